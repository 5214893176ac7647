//! cowork on real Wayland compositors, headless: sway 1.7 (wlroots) with
//! foot windows, whose focus, titles, pids, idle, clipboard, dictation,
//! hotkey triggers and sidebar placement the wlroots backend handles; weston
//! as the compositor cowork has no backend for (every capability says why,
//! nothing false is recorded); XWayland beside both, which never decides.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use cowork::store;
use cowork::runtime::RuntimeEvent;

use super::support::{ChildGuard, eventually, have_program, require, temp_dir};

/// A headless compositor with its own runtime directory and home; everything
/// it and the test started is killed on drop.
pub struct Compositor {
    pub runtime: PathBuf,
    pub socket: String,
    /// `XDG_CURRENT_DESKTOP` as a session of this compositor sets it.
    pub desktop: &'static str,
    /// sway's IPC socket, once sway is up.
    pub swaysock: Option<PathBuf>,
    /// The XWayland display beside the compositor, when it runs one.
    pub x_display: Option<String>,
    /// The session bus of this desktop (KDE: KWin serves on it), when it has one.
    pub bus: Option<String>,
    /// Files holding the pids of the shells run in weston-terminals: a shell
    /// waiting on its fifo outlives its killed terminal, so it is killed too.
    shells: Vec<PathBuf>,
    pub children: Vec<ChildGuard>,
    home: tempfile::TempDir,
    /// More environment for programs in this session (GNOME: its settings backend and schemas).
    env: Vec<(&'static str, String)>,
    /// Ends after the compositor and its clients (fields drop after `Drop::drop`).
    _bus: Option<ChildGuard>,
    /// GNOME: the stand-in system bus gnome-shell needs.
    _system_bus: Option<ChildGuard>,
}

/// sway refuses to run as root: the compositor runs as `nobody` then, in a
/// runtime directory it owns (root, the test, still reaches its sockets).
fn unprivileged() -> Option<(u32, u32)> {
    // SAFETY: plain libc calls without arguments.
    (unsafe { libc::geteuid() } == 0).then_some((65534, 65534))
}

impl Compositor {
    pub fn sway_available() -> bool {
        have_program("sway") && have_program("foot") && have_program("swaymsg")
    }

    /// sway 1.7 headless, pixman-rendered, with one 1280×720 output and XWayland on demand.
    pub fn sway() -> Compositor {
        let home = temp_dir();
        // Its own directory, not inside the (root-only) home, so `nobody` can reach it.
        let runtime = tempfile::Builder::new().prefix("cowork-sway-").tempdir().unwrap().keep();
        std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let config = runtime.join("sway.conf");
        std::fs::write(&config, "output HEADLESS-1 resolution 1280x720\nxwayland enable\nfocus_follows_mouse no\n").unwrap();
        let mut command = match unprivileged() {
            Some((uid, gid)) => {
                std::os::unix::fs::chown(&runtime, Some(uid), Some(gid)).unwrap();
                std::os::unix::fs::chown(&config, Some(uid), Some(gid)).unwrap();
                let mut command = Command::new("setpriv");
                command.args(["--reuid", &uid.to_string(), "--regid", &gid.to_string(), "--clear-groups", "sway"]);
                command
            }
            None => Command::new("sway"),
        };
        let sway = command
            .arg("-c")
            .arg(&config)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("HOME", &runtime)
            .env("WLR_BACKENDS", "headless")
            .env("WLR_RENDERER", "pixman")
            .env("WLR_LIBINPUT_NO_DEVICES", "1")
            .env("WLR_HEADLESS_OUTPUTS", "1")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(home.path().join("sway.log")).unwrap())
            .spawn()
            .expect("start sway");
        let mut compositor = Compositor {
            runtime: runtime.clone(),
            socket: String::new(),
            desktop: "sway",
            swaysock: None,
            x_display: None,
            bus: None,
            shells: Vec::new(),
            children: vec![ChildGuard(sway)],
            home,
            env: Vec::new(),
            _bus: None,
            _system_bus: None,
        };
        let mut found = (None, None);
        let started = eventually(Duration::from_secs(10), || {
            for entry in std::fs::read_dir(&runtime).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with("wayland-") && !name.ends_with(".lock") {
                    found.0 = Some(name);
                } else if name.starts_with("sway-ipc.") {
                    found.1 = Some(entry.path());
                }
            }
            found.0.is_some() && found.1.is_some()
        });
        assert!(started, "sway did not start: {}", std::fs::read_to_string(compositor.home.path().join("sway.log")).unwrap_or_default());
        compositor.socket = found.0.unwrap();
        compositor.swaysock = found.1;
        compositor
    }

    /// `swaymsg` in this session; its stdout.
    pub fn swaymsg(&self, args: &[&str]) -> String {
        let out = self.command("swaymsg").args(args).output().expect("swaymsg");
        assert!(out.status.success(), "swaymsg {args:?}: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// sway's window tree as JSON.
    pub fn tree(&self) -> serde_json::Value {
        serde_json::from_str(&self.swaymsg(&["-t", "get_tree", "-r"])).unwrap()
    }

    /// Opens a foot terminal with `app_id` and `title` running `script` (sh);
    /// returns its pid once sway maps it.
    pub fn foot(&mut self, app_id: &str, title: &str, script: &str) -> u32 {
        let child = self
            .command("foot")
            .args(["--app-id", app_id, "--title", title, "sh", "-c", script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start foot");
        let pid = child.id();
        self.children.push(ChildGuard(child));
        let mapped = eventually(Duration::from_secs(10), || tree_windows(&self.tree()).iter().any(|w| w["pid"].as_u64() == Some(u64::from(pid))));
        assert!(mapped, "foot {app_id} was not mapped");
        pid
    }

    /// The facts cowork reads in this session, for in-process workers.
    pub fn facts(&self) -> cowork::desktop::session::Facts {
        let command = self.command("true");
        let vars: Vec<(String, String)> =
            command.get_envs().filter_map(|(k, v)| Some((k.to_string_lossy().into_owned(), v?.to_string_lossy().into_owned()))).collect();
        cowork::desktop::session::probe_with(&|key| vars.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()))
    }

    pub fn kwin_available() -> bool {
        have_program("kwin_wayland") && have_program("weston-terminal") && have_program("dbus-daemon")
    }

    /// A weston-terminal titled `title` showing `text`; its pid.
    pub fn terminal_showing(&mut self, title: &str, text: &str) -> u32 {
        let shell = self.home.path().join(format!("{}.sh", title.replace(' ', "-")));
        std::fs::write(&shell, format!("#!/bin/sh\nprintf '\\033]2;%s\\007' '{title}'\nprintf '%s\\n' '{text}'\nsleep 600\n")).unwrap();
        std::fs::set_permissions(&shell, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let child = self.command("weston-terminal").arg(format!("--shell={}", shell.display())).arg("--font-size=14").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let pid = child.id();
        self.children.push(ChildGuard(child));
        pid
    }

    /// KWin 5.27 (`kwin_wayland --virtual`, llvmpipe) on its own session bus,
    /// as a Plasma session has it. Debian installs kwin_wayland with a file
    /// capability (`cap_sys_resource`) that a container without it cannot
    /// exec; a copy without the capability runs the same.
    pub fn kwin() -> Compositor {
        Self::kwin_allowing(None)
    }

    /// KWin as `kwin()`, with a desktop entry installed (and KDE's service
    /// cache built) that lets `exe` use KWin's restricted screenshot
    /// interface, as cowork's installed entry does for /usr/bin/cowork.
    pub fn kwin_allowing(exe: Option<&Path>) -> Compositor {
        let home = temp_dir();
        if let Some(exe) = exe {
            let applications = home.path().join(".local/share/applications");
            std::fs::create_dir_all(&applications).unwrap();
            let entry = include_str!("../../assets/app.cowork.Cowork.desktop").replace("Exec=cowork", &format!("Exec={}", exe.display()));
            std::fs::write(applications.join("app.cowork.Cowork.desktop"), entry).unwrap();
            let built = Command::new("kbuildsycoca5")
                .arg("--noincremental")
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", home.path())
                .env("QT_QPA_PLATFORM", "offscreen")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(built.success(), "kbuildsycoca5 failed");
        }
        let runtime = home.path().join("runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let (bus_guard, bus) = super::support::bare_session_bus(home.path());
        let binary = home.path().join("kwin_wayland");
        std::fs::copy(which("kwin_wayland"), &binary).unwrap();
        let socket = "wayland-kde".to_owned();
        let kwin = Command::new(&binary)
            .args(["--virtual", "--width", "1280", "--height", "720", "--socket", &socket])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("HOME", home.path())
            .env("QT_QPA_PLATFORM", "offscreen")
            // What `kwin_windows`' probe script prints reaches the log.
            .env("QT_LOGGING_RULES", "kwin_scripting=true")
            .env("DBUS_SESSION_BUS_ADDRESS", &bus)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(home.path().join("kwin.log")).unwrap())
            .spawn()
            .expect("start kwin_wayland");
        let compositor = Compositor {
            runtime,
            socket,
            desktop: "KDE",
            swaysock: None,
            x_display: None,
            bus: Some(bus.clone()),
            shells: Vec::new(),
            children: vec![ChildGuard(kwin)],
            home,
            env: Vec::new(),
            _bus: Some(bus_guard),
            _system_bus: None,
        };
        assert!(
            eventually(Duration::from_secs(20), || compositor.runtime.join(&compositor.socket).exists()
                && super::support::bus_name_owned(&bus, "org.kde.KWin")),
            "kwin_wayland did not start: {}",
            std::fs::read_to_string(compositor.home.path().join("kwin.log")).unwrap_or_default()
        );
        compositor
    }

    pub fn gnome_available() -> bool {
        have_program("gnome-shell") && have_program("weston-terminal") && have_program("dbus-daemon") && have_program("unshare") && have_program("gsettings")
    }

    /// GNOME Shell 43 (`--headless --virtual-monitor`) on its own session bus
    /// and a stand-in system bus, with settings in a key file of its own home
    /// (`GSETTINGS_BACKEND=keyfile`) and its schemas plus an override that
    /// turns extensions on and enables the test's driver extension. Before it
    /// starts, `cowork gnome-extension install` installs and enables cowork's
    /// extension there, as a user would. gnome-shell runs in a mount namespace
    /// with a tmpfs over /run/systemd: this machine has the directory without
    /// logind, which gnome-shell would take for a logind session.
    pub fn gnome() -> Compositor {
        let home = temp_dir();
        let runtime = home.path().join("runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let (bus_guard, bus) = super::support::bare_session_bus(home.path());
        let system_dir = home.path().join("system-bus");
        std::fs::create_dir_all(&system_dir).unwrap();
        let (system_guard, system_bus) = super::support::bare_session_bus(&system_dir);
        let schemas = home.path().join("schemas");
        std::fs::create_dir_all(&schemas).unwrap();
        for entry in std::fs::read_dir("/usr/share/glib-2.0/schemas").unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".xml") || name.ends_with(".override") {
                std::fs::copy(entry.path(), schemas.join(&name)).unwrap();
            }
        }
        std::fs::write(
            schemas.join("99_cowork_test.gschema.override"),
            "[org.gnome.shell]\nenabled-extensions=['cowork-test-driver@test']\ndisable-user-extensions=false\nwelcome-dialog-last-shown-version='999'\n",
        )
        .unwrap();
        assert!(Command::new("glib-compile-schemas").arg(&schemas).status().unwrap().success());
        let driver = home.path().join(".local/share/gnome-shell/extensions/cowork-test-driver@test");
        std::fs::create_dir_all(&driver).unwrap();
        std::fs::write(driver.join("extension.js"), include_str!("gnome/driver.js")).unwrap();
        std::fs::write(driver.join("metadata.json"), r#"{"uuid":"cowork-test-driver@test","name":"test driver","description":"drives the shell in cowork's tests","shell-version":["43"]}"#).unwrap();
        let socket = "wayland-gnome".to_owned();
        let mut compositor = Compositor {
            runtime,
            socket,
            desktop: "GNOME",
            swaysock: None,
            x_display: None,
            bus: Some(bus.clone()),
            shells: Vec::new(),
            children: Vec::new(),
            home,
            env: vec![
                ("GSETTINGS_BACKEND", "keyfile".to_owned()),
                ("GSETTINGS_SCHEMA_DIR", schemas.to_string_lossy().into_owned()),
                ("DBUS_SYSTEM_BUS_ADDRESS", system_bus.clone()),
            ],
            _bus: Some(bus_guard),
            _system_bus: Some(system_guard),
        };
        // The user installs cowork's extension (the shell is not running yet: the version is given).
        let data = temp_dir();
        let out = compositor.cowork(data.path()).args(["gnome-extension", "install", "--shell-version", "43.9"]).output().unwrap();
        assert!(out.status.success(), "install: {}", String::from_utf8_lossy(&out.stderr));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("log out and in once"), "{said}");
        let mut shell = compositor.command("unshare");
        shell
            .args(["-m", "sh", "-c", "if [ -d /run/systemd ]; then mount -t tmpfs tmpfs /run/systemd || exit 1; fi; exec \"$@\"", "sh"])
            .args(["gnome-shell", "--headless", "--wayland", "--no-x11", "--virtual-monitor", "1280x720", "--wayland-display"])
            .arg(&compositor.socket)
            .env_remove("WAYLAND_DISPLAY")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(compositor.home.path().join("gnome-shell.log")).unwrap());
        compositor.children.push(ChildGuard(shell.spawn().expect("start gnome-shell")));
        // Ready as a logged-in user finds it: the shell has finished starting, every extension
        // it loads (cowork's, installed above) is enabled, and Mutter's RemoteDesktop is on the
        // bus. The driver answers earlier than that, and a loaded machine shows the gap.
        let started = "(() => { const m = imports.ui.main; if (m.layoutManager._startingUp) return false; \
                       const e = m.extensionManager.lookup('cowork@cowork.app'); return !e || e.state === 1; })()";
        let bus_address = bus.clone();
        let ready = eventually(Duration::from_secs(60), || {
            compositor.runtime.join(&compositor.socket).exists()
                && compositor.shell_eval(started) == Some(serde_json::Value::Bool(true))
                && super::support::bus_name_owned(&bus_address, "org.gnome.Mutter.RemoteDesktop")
        });
        assert!(ready, "gnome-shell did not finish starting with its extensions: {:?}\n{}", compositor.shell_eval(started), compositor.gnome_log());
        compositor
    }

    pub fn gnome_log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("gnome-shell.log")).unwrap_or_default()
    }

    /// Evaluates `code` inside gnome-shell (the test's driver extension); its JSON value, None if the shell did not answer.
    pub fn shell_eval(&self, code: &str) -> Option<serde_json::Value> {
        let conn = zbus::blocking::connection::Builder::address(self.bus.as_deref()?).ok()?.build().ok()?;
        let reply = conn.call_method(Some("org.gnome.Shell"), "/org/cowork/TestDriver", Some("org.cowork.TestDriver"), "Eval", &(code,)).ok()?;
        serde_json::from_str(&reply.body().deserialize::<String>().ok()?).ok()
    }

    /// Every normal window GNOME Shell has: title, pid, wm_class, focused, fullscreen, above, sticky, frame rect; and the work area.
    pub fn gnome_windows(&self) -> (Vec<serde_json::Value>, serde_json::Value) {
        let windows = self
            .shell_eval(
                "global.get_window_actors().map(a => a.meta_window).map(w => { const r = w.get_frame_rect(); return {title: w.get_title(), pid: w.get_pid(), \
                 wm_class: w.get_wm_class(), focused: w === global.display.focus_window, fullscreen: w.is_fullscreen(), above: w.is_above(), \
                 sticky: w.is_on_all_workspaces(), x: r.x, y: r.y, width: r.width, height: r.height}; })",
            )
            .expect("gnome-shell answers");
        let area = self
            .shell_eval("(() => { const a = global.workspace_manager.get_active_workspace().get_work_area_for_monitor(0); return {x: a.x, y: a.y, width: a.width, height: a.height}; })()")
            .expect("gnome-shell answers");
        (windows.as_array().cloned().unwrap_or_default(), area)
    }

    /// Focuses the window titled `title` as a click would.
    pub fn gnome_focus(&self, title: &str) -> bool {
        let code = format!(
            "(() => {{ const w = global.get_window_actors().map(a => a.meta_window).find(w => w.get_title() === {}); if (w) w.activate(global.get_current_time()); return Boolean(w); }})()",
            serde_json::to_string(title).unwrap()
        );
        self.shell_eval(&code) == Some(serde_json::Value::Bool(true))
    }

    /// A weston-terminal whose title is each line written to `titles` (a fifo
    /// it makes; the first line is `title`); its pid.
    pub fn weston_terminal(&mut self, title: &str) -> (u32, PathBuf) {
        let n = (0..).find(|n| !self.home.path().join(format!("titles-{n}")).exists()).unwrap();
        let titles = self.home.path().join(format!("titles-{n}"));
        assert!(Command::new("mkfifo").arg(&titles).status().unwrap().success());
        let shell = self.home.path().join(format!("shell-{n}.sh"));
        let pid_file = self.home.path().join(format!("shell-{n}.pid"));
        std::fs::write(
            &shell,
            format!(
                "#!/bin/sh\necho $$ > {}\nprintf '\\033]2;%s\\007' '{title}'\nwhile true; do while read t; do printf '\\033]2;%s\\007' \"$t\"; done < {}; done\n",
                pid_file.display(),
                titles.display()
            ),
        )
        .unwrap();
        self.shells.push(pid_file);
        std::fs::set_permissions(&shell, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let child = self.command("weston-terminal").arg(format!("--shell={}", shell.display())).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let pid = child.id();
        self.children.push(ChildGuard(child));
        (pid, titles)
    }

    /// Closes the client started with `pid` (the compositor gives the focus to the next).
    pub fn close(&mut self, pid: u32) {
        self.children.retain(|child| child.0.id() != pid);
    }

    /// `dbus-send` on this desktop's bus; its stdout.
    fn dbus_send(&self, args: &[&str]) -> String {
        let out = Command::new("dbus-send").arg(format!("--bus={}", self.bus.as_deref().unwrap())).arg("--print-reply").args(args).output().expect("dbus-send");
        assert!(out.status.success(), "dbus-send {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Every window KWin has (pid, caption, frame geometry, keepAbove,
    /// onAllDesktops) and the work area, as a script run inside KWin prints them.
    pub fn kwin_windows(&self) -> (Vec<serde_json::Value>, serde_json::Value) {
        let n = (0..).find(|n| !self.home.path().join(format!("probe-{n}.js")).exists()).unwrap();
        let file = self.home.path().join(format!("probe-{n}.js"));
        let tag = format!("cowork-probe-{n}");
        std::fs::write(
            &file,
            format!(
                r#"var list = workspace.windowList !== undefined ? workspace.windowList() : workspace.clientList();
for (var i = 0; i < list.length; i++) {{
    var w = list[i]; var g = w.frameGeometry;
    print("{tag} " + JSON.stringify({{pid: w.pid, caption: String(w.caption), x: g.x, y: g.y, width: g.width, height: g.height, keepAbove: w.keepAbove, onAllDesktops: w.onAllDesktops, active: w === (workspace.activeWindow !== undefined ? workspace.activeWindow : workspace.activeClient)}}));
}}
var a = workspace.clientArea(KWin.MaximizeArea, workspace.activeScreen !== undefined ? workspace.activeScreen : 0, workspace.currentDesktop);
print("{tag}-area " + JSON.stringify({{x: a.x, y: a.y, width: a.width, height: a.height}}));
"#
            ),
        )
        .unwrap();
        let reply = self.dbus_send(&["--dest=org.kde.KWin", "/Scripting", "org.kde.kwin.Scripting.loadScript", &format!("string:{}", file.display()), &format!("string:{tag}")]);
        let id = reply.split("int32 ").nth(1).and_then(|rest| rest.trim().parse::<i32>().ok()).expect("a script id");
        self.dbus_send(&["--dest=org.kde.KWin", &format!("/{id}"), "org.kde.kwin.Script.run"]);
        // KWin 5 can give a new script the number (and D-Bus path) of one still loaded
        // (`kwin::Scripting::load` says how): `start` runs every loaded script not running yet.
        self.dbus_send(&["--dest=org.kde.KWin", "/Scripting", "org.kde.kwin.Scripting.start"]);
        let log = self.home.path().join("kwin.log");
        let mut text = String::new();
        assert!(eventually(Duration::from_secs(5), || {
            text = std::fs::read_to_string(&log).unwrap_or_default();
            text.contains(&format!("{tag}-area "))
        }));
        self.dbus_send(&["--dest=org.kde.KWin", "/Scripting", "org.kde.kwin.Scripting.unloadScript", &format!("string:{tag}")]);
        let json = |line: &str, prefix: &str| line.split(prefix).nth(1).map(|rest| serde_json::from_str::<serde_json::Value>(rest.trim()).unwrap());
        let windows = text.lines().filter_map(|line| json(line, &format!("{tag} "))).collect();
        let area = text.lines().find_map(|line| json(line, &format!("{tag}-area "))).unwrap();
        (windows, area)
    }

    /// What scripts printed in KWin (its log's `js:` lines), for failure messages.
    pub fn kwin_script_output(&self) -> String {
        let log = std::fs::read_to_string(self.home.path().join("kwin.log")).unwrap_or_default();
        log.lines().filter(|l| l.starts_with("js:") && !l.contains("cowork-probe-")).collect::<Vec<_>>().join("\n")
    }

    /// Whether KWin has a script of this name loaded.
    pub fn kwin_script_loaded(&self, plugin: &str) -> bool {
        let out = Command::new("dbus-send")
            .args([&format!("--bus={}", self.bus.as_deref().unwrap()), "--print-reply", "--dest=org.kde.KWin", "/Scripting", "org.kde.kwin.Scripting.isScriptLoaded"])
            .arg(format!("string:{plugin}"))
            .output()
            .expect("dbus-send");
        String::from_utf8_lossy(&out.stdout).contains("boolean true")
    }

    /// weston 10 with its headless backend: only core globals, no seat; with
    /// XWayland, whose X display it names in its log.
    pub fn weston() -> Compositor {
        let home = temp_dir();
        let runtime = home.path().join("runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let socket = "wayland-w".to_owned();
        let weston = Command::new("weston")
            .args(["--backend=headless-backend.so", "--socket", &socket, "--idle-time=0", "--width=1280", "--height=720", "--xwayland"])
            .arg(format!("--log={}", home.path().join("weston.log").display()))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("HOME", home.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start weston");
        let mut compositor =
            Compositor {
            runtime,
            socket,
            desktop: "weston",
            swaysock: None,
            x_display: None,
            bus: None,
            shells: Vec::new(),
            children: vec![ChildGuard(weston)],
            home,
            env: Vec::new(),
            _bus: None,
            _system_bus: None,
        };
        let log = compositor.home.path().join("weston.log");
        let mut x_display = None;
        assert!(
            eventually(Duration::from_secs(10), || {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                x_display = text.split("xserver listening on display ").nth(1).and_then(|rest| rest.split_whitespace().next()).map(str::to_owned);
                x_display.is_some() && compositor.runtime.join(&compositor.socket).exists()
            }),
            "weston did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        compositor.x_display = x_display;
        compositor
    }

    /// The environment of a program in this session: its Wayland display, a
    /// private home, no X display and no session bus unless the test adds them.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        let home = self.home.path();
        command
            .env_remove("DISPLAY")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env_remove("QT_QPA_PLATFORM")
            .env_remove("SWAYSOCK")
            .env_remove("HYPRLAND_INSTANCE_SIGNATURE")
            .env("XDG_SESSION_TYPE", "wayland")
            .env("XDG_CURRENT_DESKTOP", self.desktop)
            .env("WAYLAND_DISPLAY", &self.socket)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("COWORK_LOG", "warn");
        if let Some(swaysock) = &self.swaysock {
            command.env("SWAYSOCK", swaysock);
        }
        if let Some(display) = &self.x_display {
            command.env("DISPLAY", display);
        }
        if let Some(bus) = &self.bus {
            command.env("DBUS_SESSION_BUS_ADDRESS", bus);
        }
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command
    }

    /// Starts `program` in this session; it is killed with the compositor.
    pub fn spawn(&mut self, program: &str, args: &[&str]) {
        let child = self.command(program).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap_or_else(|e| panic!("start {program}: {e}"));
        self.children.push(ChildGuard(child));
    }

    /// `cowork` in this session with its own data directory.
    pub fn cowork(&self, data: &Path) -> Command {
        let mut command = self.command(env!("CARGO_BIN_EXE_cowork"));
        command.arg("--data-dir").arg(data);
        command
    }
}

impl Drop for Compositor {
    fn drop(&mut self) {
        // Clients first, the compositor last: asked to end, so it takes its
        // XWayland, sockets and lock files with it; killed if it will not.
        while self.children.len() > 1 {
            drop(self.children.pop());
        }
        if let Some(compositor) = self.children.first_mut() {
            compositor.end_gently(Duration::from_secs(3));
        }
        self.children.clear();
        for pid_file in &self.shells {
            if let Some(pid) = std::fs::read_to_string(pid_file).ok().and_then(|p| p.trim().parse::<i32>().ok()) {
                // SAFETY: a process this test started (its shell wrote the pid).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        if self.runtime.starts_with(std::env::temp_dir()) && self.swaysock.is_some() {
            let _ = std::fs::remove_dir_all(&self.runtime);
        }
    }
}

fn which(program: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).map(|dir| dir.join(program)).find(|p| p.is_file()).expect("on PATH")
}

/// The windows (leaf containers with a pid) of a sway tree.
pub fn tree_windows(node: &serde_json::Value) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    if node["pid"].is_number() && node["nodes"].as_array().is_none_or(|n| n.is_empty()) {
        out.push(node.clone());
    }
    for key in ["nodes", "floating_nodes"] {
        for child in node[key].as_array().into_iter().flatten() {
            out.extend(tree_windows(child));
        }
    }
    out
}

/// Ends a `cowork capture run` as SIGTERM does and checks it exited cleanly;
/// a test that fails before this still ends it (the guard).
pub fn stop(mut child: ChildGuard) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
    assert!(child.0.wait().unwrap().success());
}

/// `cowork doctor --json`'s desktop checks: capability → (status, detail).
fn doctor_desktop(compositor: &Compositor, data: &Path) -> Vec<(String, String, String)> {
    let out = compositor.cowork(data).args(["doctor", "--json"]).output().unwrap();
    let checks: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("doctor --json: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    checks
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["area"] == "desktop")
        .map(|c| (c["name"].as_str().unwrap().to_owned(), c["status"].as_str().unwrap().to_owned(), c["detail"].as_str().unwrap().to_owned()))
        .collect()
}

/// One of doctor's desktop checks: (status, detail).
pub fn doctor_check(compositor: &Compositor, data: &Path, name: &str) -> (String, String) {
    doctor_desktop(compositor, data).into_iter().find(|(n, _, _)| n == name).map(|(_, status, detail)| (status, detail)).expect("reported")
}

/// A data directory whose streams the user confirmed, with these settings; and its database.
pub fn capturing_data_dir(settings: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    let conn = store::open_writer(&db).unwrap();
    store::set_setting(&conn, "capture.streams_confirmed", "true", 0).unwrap();
    for (key, value) in settings {
        store::set_setting(&conn, key, value, 0).unwrap();
    }
    (data, db)
}

#[test]
fn on_an_unknown_compositor_every_capability_says_why_and_nothing_false_is_recorded() {
    if !require(have_program("weston") && have_program("weston-terminal"), "weston") {
        return;
    }
    let mut weston = Compositor::weston();
    weston.spawn("weston-terminal", &[]);
    // An X app under XWayland: the X11 paths would see it (and its input) and
    // nothing of the native terminal; on a Wayland session they decide nothing.
    weston.spawn("xterm", &["-T", "x app under xwayland"]);
    let data = temp_dir();
    let checks = doctor_desktop(&weston, data.path());
    let session = checks.iter().find(|(name, _, _)| name == "session").expect("the session is reported");
    assert!(session.2.starts_with("Wayland (weston)"), "{session:?}");
    let capabilities: Vec<_> = checks.iter().filter(|(name, _, _)| name != "session").collect();
    assert_eq!(capabilities.len(), 10, "{checks:#?}");
    for (name, status, detail) in &capabilities {
        assert_eq!(status, "warn", "{name}: {detail}");
        assert!(detail.starts_with("degraded: ") || detail.starts_with("unavailable: "), "{name}: {detail}");
        assert!(detail.len() > "unavailable: ".len() + 10, "{name} says why: {detail}");
    }
    let detail = |name: &str| capabilities.iter().find(|(n, _, _)| n == name).map(|(_, _, d)| d.clone()).unwrap();
    assert!(detail("focused window").contains("no window is recorded rather than a wrong one"), "{}", detail("focused window"));
    assert!(detail("away detection").contains("never marked away"), "{}", detail("away detection"));
    assert!(detail("hotkeys").contains("cowork trigger"), "{}", detail("hotkeys"));
    let out = weston.cowork(data.path()).args(["doctor"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("XWayland is there, but it sees only X apps, so it decides nothing"), "{text}");

    // Capture runs, says what it cannot see, and records no window and no absence.
    let capture = ChildGuard(weston.cowork(data.path()).args(["capture", "run"]).spawn().unwrap());
    std::thread::sleep(Duration::from_secs(4));
    stop(capture);
    let reader = store::open_read_only(&data.path().join("cowork.db")).unwrap();
    let sessions = cowork::capture::db::sessions_between(&reader, 0, i64::MAX).unwrap();
    assert!(sessions.is_empty(), "no window was seen, so none is recorded: {sessions:?}");
    let afk = cowork::capture::db::afk_between(&reader, 0, i64::MAX).unwrap();
    assert!(afk.is_empty(), "presence cannot be seen: neither away nor present is recorded: {afk:?}");
    assert_eq!(cowork::capture::db::clips_between(&reader, 0, i64::MAX).unwrap().len(), 0);
}

/// KDE Plasma: `cowork capture run` loads its KWin script into a real KWin
/// 5.27; focus and caption changes of weston-terminal windows become sessions
/// with their pids; a caption change of a window without the focus is not
/// one; a window the firewall excludes leaves nothing; the clipboard is
/// watched through KWin's data-control; and at quit the script is unloaded
/// and its file removed.
#[test]
fn on_kde_plasma_coworks_kwin_script_turns_focus_and_caption_changes_into_sessions_with_pids() {
    if !require(Compositor::kwin_available(), "kwin_wayland, weston-terminal and dbus-daemon") {
        return;
    }
    let mut kwin = Compositor::kwin();
    let (data, db) = capturing_data_dir(&[("privacy.denied_titles", "KeePassXC")]);
    let focused = doctor_check(&kwin, data.path(), "focused window");
    assert!(focused.0 == "ok" && focused.1.contains("KWin script"), "{focused:?}");
    // No panel runs here, so no tray host: said, with what to use instead.
    let out = kwin.cowork(data.path()).args(["doctor", "--json"]).output().unwrap();
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tray = checks.as_array().unwrap().iter().find(|c| c["area"] == "display" && c["name"] == "tray").expect("the tray is reported");
    assert!(tray["status"] == "warn" && tray["detail"].as_str().unwrap().contains("sidebar and the hotkeys"), "{tray}");
    let capture = ChildGuard(kwin.cowork(data.path()).args(["capture", "run"]).spawn().unwrap());
    let plugin = format!("cowork-desktop-{}", capture.0.id());
    let script_file = kwin.runtime.join(format!("cowork-kwin-{}.js", capture.0.id()));
    assert!(eventually(Duration::from_secs(15), || kwin.kwin_script_loaded(&plugin)), "cowork loaded its script into KWin");
    let script = std::fs::read_to_string(&script_file).unwrap();
    let unique = script.split("var COWORK = \"").nth(1).and_then(|rest| rest.split('"').next()).unwrap().to_owned();
    assert!(unique.starts_with(":1."), "the script calls cowork's own unique bus name: {unique}");

    let sessions = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::db::sessions_between(&c, 0, i64::MAX).ok()).unwrap_or_default();
    let has = |title: &str, pid: u32| sessions().iter().any(|s| s.title == title && s.pid == Some(pid) && s.app == "org.freedesktop.weston.wayland-terminal");
    let (alpha, alpha_titles) = kwin.weston_terminal("Alpha document");
    assert!(eventually(Duration::from_secs(15), || has("Alpha document", alpha)), "{:?}", sessions());
    let (beta, beta_titles) = kwin.weston_terminal("Beta notes");
    assert!(eventually(Duration::from_secs(15), || has("Beta notes", beta)), "{:?}", sessions());
    // The focused window's caption changes: a new session.
    std::fs::write(&beta_titles, "Beta notes, edited\n").unwrap();
    assert!(eventually(Duration::from_secs(5), || has("Beta notes, edited", beta)), "{:?}", sessions());
    // A window without the focus changes its caption: nothing yet ...
    std::fs::write(&alpha_titles, "Alpha renamed\n").unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert!(!sessions().iter().any(|s| s.title == "Alpha renamed"), "{:?}", sessions());
    // ... until it has the focus again (KWin gives it back when beta closes).
    kwin.close(beta);
    assert!(eventually(Duration::from_secs(10), || has("Alpha renamed", alpha)), "{:?}", sessions());
    // Another program on the bus cannot pose as KWin: its report is refused and nothing is recorded.
    let forged = Command::new("dbus-send")
        .args([&format!("--bus={}", kwin.bus.as_deref().unwrap()), "--print-reply", &format!("--dest={unique}"), "/org/cowork/KWin", "org.cowork.KWin1.Focused"])
        .args(["string:Forged window", "string:evil", "string:evil", "int32:1", "boolean:false", "string:{forged}"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&forged.stderr).contains("AccessDenied"), "{forged:?}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(!sessions().iter().any(|s| s.title == "Forged window"), "{:?}", sessions());
    // A password manager's window, by the firewall's title rule: nothing of it.
    let (_vault, _) = kwin.weston_terminal("Passwords.kdbx - KeePassXC");
    std::thread::sleep(Duration::from_millis(1_500));
    // The clipboard through KWin's data-control.
    kwin.close(_vault);
    std::thread::sleep(Duration::from_millis(500));
    let copy = ChildGuard(kwin.command("wl-copy").args(["--foreground", "standup moved to 10:30"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let clips = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::db::clips_between(&c, 0, i64::MAX).ok()).unwrap_or_default();
    assert!(eventually(Duration::from_secs(5), || clips().iter().any(|c| c.text == "standup moved to 10:30")), "{:?}", clips());
    drop(copy);

    stop(capture);
    assert!(!kwin.kwin_script_loaded(&plugin), "the script is unloaded at quit");
    assert!(!script_file.exists(), "and its file removed");
    let titles: Vec<String> = sessions().into_iter().map(|s| s.title).collect();
    assert!(titles.iter().all(|t| !t.contains("KeePassXC") && !t.contains("Passwords")), "{titles:?}");
    assert!(!on_disk(data.path(), "Passwords.kdbx"));
}

/// The KWin scripts as shipped parse as JavaScript (their Plasma 6 branches
/// cannot run on Debian 12's KWin 5.27, so this is what checks them there),
/// and so do they with cowork's values written in.
#[test]
fn the_kwin_scripts_parse_as_javascript() {
    if !require(have_program("node"), "node") {
        return;
    }
    let dir = temp_dir();
    let filled = [
        ("desktop.js", std::fs::read_to_string(super::support::repo_dir().join("assets/kwin/cowork-desktop.js")).unwrap().replace("@COWORK_BUS_NAME@", ":1.42")),
        ("sidebar.js", cowork::desktop::kwin::place_script(cowork::desktop::kwin::PlaceKind::Sidebar { width: 380 }, 42, "cowork")),
        ("prompt.js", cowork::desktop::kwin::place_script(cowork::desktop::kwin::PlaceKind::Prompt { width: 560, height: 64 }, 42, "a \"quoted\" \\ title")),
    ];
    for (name, source) in filled {
        let path = dir.path().join(name);
        std::fs::write(&path, source).unwrap();
        let out = Command::new("node").arg("--check").arg(&path).output().unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    }
    for asset in ["assets/kwin/cowork-desktop.js", "assets/kwin/cowork-place.js"] {
        let out = Command::new("node").arg("--check").arg(super::support::repo_dir().join(asset)).output().unwrap();
        assert!(out.status.success(), "{asset}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// KDE Plasma: with nobody at the keyboard, KWin's ext-idle-notify marks
/// the user away after the threshold (10 s, the shortest setting),
/// back-dated to the last input; doctor says where presence comes from.
#[test]
fn on_kde_plasma_kwins_idle_notification_marks_away() {
    use cowork::capture::heartbeat::AfkStatus;
    if !require(Compositor::kwin_available(), "kwin_wayland, weston-terminal and dbus-daemon") {
        return;
    }
    let mut kwin = Compositor::kwin();
    kwin.weston_terminal("Meeting notes");
    let (data, db) = capturing_data_dir(&[("capture.afk_secs", "10")]);
    let away = doctor_check(&kwin, data.path(), "away detection");
    assert!(away.0 == "ok" && away.1.contains("ext-idle-notify"), "{away:?}");
    let started = cowork::ids::now_millis();
    let capture = ChildGuard(kwin.cowork(data.path()).args(["capture", "run"]).spawn().unwrap());
    let afk = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::db::afk_between(&c, 0, i64::MAX).ok()).unwrap_or_default();
    assert!(eventually(Duration::from_secs(25), || afk().iter().any(|e| e.data == AfkStatus::Afk)), "nobody typed, so the user went away: {:?}", afk());
    let gone = afk().into_iter().find(|e| e.data == AfkStatus::Afk).unwrap();
    assert!((gone.start_millis - started).abs() <= 3_000, "away is back-dated to the last input: {gone:?} (capture started {started})");
    stop(capture);
}

/// KDE Plasma: the sidebar started on KWin is kept above, on every desktop
/// and docked to the right edge of the work area at its full height, by
/// cowork's placement script; a terminal beside it is left where KWin put
/// it; the quick prompt opens centred, above and focused; and the scripts go
/// when cowork quits.
#[test]
fn on_kde_plasma_the_sidebar_docks_right_above_every_desktop_and_the_prompt_opens_focused() {
    if !require(Compositor::kwin_available(), "kwin_wayland, weston-terminal and dbus-daemon") {
        return;
    }
    let mut kwin = Compositor::kwin();
    let (notes, _) = kwin.weston_terminal("Meeting notes");
    let data = temp_dir();
    let placement = doctor_check(&kwin, data.path(), "sidebar placement");
    assert!(placement.0 == "ok" && placement.1.contains("KWin script"), "{placement:?}");
    let log = data.path().join("sidebar.log");
    let sidebar = kwin
        .cowork(data.path())
        .arg("--models-dir")
        .arg(super::support::models_dir())
        .env("COWORK_LOG", "cowork=debug")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let pid = sidebar.id();
    kwin.children.push(ChildGuard(sidebar));
    let placed = || std::fs::read_to_string(&log).unwrap_or_default().lines().filter(|l| l.contains("place")).collect::<Vec<_>>().join("\n");
    let window = |windows: &[serde_json::Value], pid: u32, caption: &str| windows.iter().find(|w| w["pid"] == pid && w["caption"] == caption).cloned();
    let mut last = (Vec::new(), serde_json::Value::Null);
    let docked = eventually(Duration::from_secs(30), || {
        last = kwin.kwin_windows();
        let (windows, area) = &last;
        window(windows, pid, "cowork").is_some_and(|w| {
            w["keepAbove"] == true
                && w["onAllDesktops"] == true
                && w["x"].as_f64().unwrap() + w["width"].as_f64().unwrap() == area["x"].as_f64().unwrap() + area["width"].as_f64().unwrap()
                && w["y"] == area["y"]
                && w["height"] == area["height"]
                && w["width"].as_f64().unwrap() < area["width"].as_f64().unwrap() / 2.0
        })
    });
    assert!(docked, "the sidebar is above, on all desktops, docked right at full height: {last:?}\n{}\n{}", kwin.kwin_script_output(), placed());
    // Only cowork's own window was touched.
    let terminal = window(&last.0, notes, "Meeting notes").expect("the terminal");
    assert!(terminal["keepAbove"] == false && terminal["onAllDesktops"] == false, "{terminal}");
    let plugin = format!("cowork-place-{pid}-sidebar");
    assert!(kwin.kwin_script_loaded(&plugin));

    let out = kwin.cowork(data.path()).args(["trigger", "quick-prompt"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let opened = eventually(Duration::from_secs(15), || {
        last = kwin.kwin_windows();
        let (windows, area) = &last;
        window(windows, pid, "cowork quick prompt").is_some_and(|w| {
            let centre = w["x"].as_f64().unwrap() + w["width"].as_f64().unwrap() / 2.0;
            let middle = area["x"].as_f64().unwrap() + area["width"].as_f64().unwrap() / 2.0;
            w["keepAbove"] == true && w["active"] == true && (centre - middle).abs() <= 1.0
        })
    });
    assert!(opened, "the quick prompt is centred, above and focused: {last:?}\n{}\n{}", kwin.kwin_script_output(), placed());

    let sidebar = kwin.children.iter_mut().find(|c| c.0.id() == pid).unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    assert!(sidebar.0.wait().unwrap().success());
    for kind in ["sidebar", "prompt"] {
        assert!(!kwin.kwin_script_loaded(&format!("cowork-place-{pid}-{kind}")), "{kind} script unloaded at quit");
    }
    assert!(!kwin.kwin_script_loaded(&format!("cowork-desktop-{pid}")), "the focus script too");
}

const TOLERANCE_MILLIS: i64 = 150;

#[test]
fn on_sway_focus_and_title_changes_become_sessions_with_pids_like_on_x11() {
    use super::support::{test_sink, wait_for};
    use cowork::capture::{CaptureCommand, CaptureConfig, spawn_capture};
    use cowork::events::AppEvent;
    use cowork::records::SessionEnd;
    use cowork::runtime::WorkerName;
    use cowork::ids::now_millis;
    use cowork::runtime::{RestartPolicy, WorkerState};
    use cowork::store::StoreCommand;
use cowork::workers::spawn_store;
    if !require(Compositor::sway_available(), "sway and foot") {
        return;
    }
    let mut sway = Compositor::sway();
    let fifo = sway.runtime.join("rename");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let alpha = sway.foot("test-alpha", "Alpha document", &format!("read x < {}; printf '\\033]2;Alpha renamed\\007'; sleep 600", fifo.display()));
    let beta = sway.foot("test-beta", "Beta notes", "sleep 600");
    let gamma = sway.foot("test-gamma", "Gamma sheet", "sleep 600");
    let report = cowork::desktop::session::report(&sway.facts(), false);
    assert_eq!(report.family, cowork::desktop::session::Family::Wlroots("sway".into()));
    let backend = cowork::desktop::backend::backend_for(&report, cowork::desktop::session::Capability::FocusedWindow);
    assert!(matches!(backend, cowork::desktop::backend::Backend::Wlroots(_)), "{backend:?}");

    let dir = temp_dir();
    let db = dir.path().join("cowork.db");
    let (sink, events) = test_sink();
    let mut store = spawn_store(db.clone(), sink.clone(), RestartPolicy::default()).unwrap();
    let config = CaptureConfig { display: None, afk_secs: 3600, rules: Default::default(), backend };
    let mut capture = spawn_capture(config, store.commands.clone(), sink.narrow(), RestartPolicy::default()).unwrap();
    let state = wait_for(&events, Duration::from_secs(10), |e| match e {
        AppEvent::Runtime(RuntimeEvent::Worker { worker: WorkerName::Capture, state }) if !matches!(state, WorkerState::Starting) => Some(state.clone()),
        _ => None,
    })
    .unwrap();
    assert_eq!(state, WorkerState::Running, "focus, pids and idle all work on sway");
    assert!(eventually(Duration::from_secs(5), || store::open_read_only(&db)
        .ok()
        .and_then(|c| cowork::capture::db::recent_sessions(&c, 1).ok())
        .is_some_and(|s| s.first().is_some_and(|s| s.title == "Gamma sheet"))));
    std::thread::sleep(Duration::from_millis(2 * TOLERANCE_MILLIS as u64));

    let focus = |app_id: &str| {
        sway.swaymsg(&[&format!("[app_id={app_id}] focus")]);
        now_millis()
    };
    let mut switches = Vec::new();
    for (app_id, stay_millis) in [("test-alpha", 800u64), ("test-beta", 1_200), ("test-gamma", 600), ("test-alpha", 700)] {
        switches.push(focus(app_id));
        std::thread::sleep(Duration::from_millis(stay_millis));
    }
    // A title change in the focused window starts a new session too.
    std::fs::write(&fifo, "go\n").unwrap();
    let renamed_at = now_millis();
    std::thread::sleep(Duration::from_millis(500));
    let last_switch = focus("test-beta");
    let last_switch_at = std::time::Instant::now();
    assert!(
        eventually(Duration::from_secs(1), || store::open_read_only(&db)
            .ok()
            .and_then(|c| cowork::capture::db::recent_sessions(&c, 20).ok())
            .is_some_and(|s| s.iter().any(|s| s.title == "Alpha renamed" && s.ended_at_millis.is_some()))),
        "finished session not in the database within 1 s"
    );
    let visible_after = last_switch_at.elapsed();
    assert!(capture.shutdown(CaptureCommand::Shutdown, Duration::from_secs(10)));
    let (ack, done) = crossbeam_channel::bounded(1);
    store.commands.send(StoreCommand::Flush(ack)).unwrap();
    done.recv_timeout(Duration::from_secs(10)).unwrap();

    let reader = store::open_read_only(&db).unwrap();
    let sessions: Vec<_> = cowork::capture::db::sessions_since(&reader, switches[0] - 1_000, 100)
        .unwrap()
        .into_iter()
        .filter(|s| s.started_at_millis >= switches[0] - TOLERANCE_MILLIS)
        .collect();
    let seen: Vec<(&str, &str, Option<u32>)> = sessions.iter().map(|s| (s.app.as_str(), s.title.as_str(), s.pid)).collect();
    assert_eq!(
        seen,
        [
            ("test-alpha", "Alpha document", Some(alpha)),
            ("test-beta", "Beta notes", Some(beta)),
            ("test-gamma", "Gamma sheet", Some(gamma)),
            ("test-alpha", "Alpha document", Some(alpha)),
            ("test-alpha", "Alpha renamed", Some(alpha)),
            ("test-beta", "Beta notes", Some(beta)),
        ],
        "sessions in order, with the pids sway's IPC gives"
    );
    let mut expected: Vec<(i64, i64)> = switches.windows(2).map(|w| (w[0], w[1])).collect();
    expected.push((switches[3], renamed_at));
    expected.push((renamed_at, last_switch));
    for (session, (start, end)) in sessions.iter().zip(&expected) {
        let recorded = session.ended_at_millis.unwrap() - session.started_at_millis;
        assert!((recorded - (end - start)).abs() <= TOLERANCE_MILLIS, "{}: recorded {recorded} ms, test did {} ms", session.title, end - start);
        assert!((session.started_at_millis - start).abs() <= TOLERANCE_MILLIS, "{}: start off", session.title);
    }
    assert_eq!(sessions.last().unwrap().end_reason, Some(SessionEnd::Shutdown));
    eprintln!("finished session visible in the database after {visible_after:?}");
    assert!(store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10)));
}

/// Capture in this process on `sway`'s wlroots backend, with its store.
struct InProcess {
    db: PathBuf,
    _dir: tempfile::TempDir,
    store: cowork::runtime::WorkerHandle<cowork::store::StoreCommand>,
    capture: cowork::runtime::WorkerHandle<cowork::capture::CaptureCommand>,
    events: crossbeam_channel::Receiver<cowork::events::AppEvent>,
}

impl InProcess {
    fn start(sway: &Compositor, afk_secs: u64) -> InProcess {
        use cowork::capture::{CaptureConfig, spawn_capture};
        use cowork::desktop::session::Capability;
        use cowork::events::AppEvent;
        use cowork::runtime::WorkerName;
        use cowork::runtime::{RestartPolicy, WorkerState};
        let report = cowork::desktop::session::report(&sway.facts(), false);
        let backend = cowork::desktop::backend::backend_for(&report, Capability::FocusedWindow);
        let dir = temp_dir();
        let db = dir.path().join("cowork.db");
        let (sink, events) = super::support::test_sink();
        let store = cowork::workers::spawn_store(db.clone(), sink.clone(), RestartPolicy::default()).unwrap();
        let config = CaptureConfig { display: None, afk_secs, rules: Default::default(), backend };
        let capture = spawn_capture(config, store.commands.clone(), sink.narrow(), RestartPolicy::default()).unwrap();
        let state = super::support::wait_for(&events, Duration::from_secs(10), |e| match e {
            AppEvent::Runtime(RuntimeEvent::Worker { worker: WorkerName::Capture, state }) if !matches!(state, WorkerState::Starting) => Some(state.clone()),
            _ => None,
        });
        assert_eq!(state, Some(WorkerState::Running));
        InProcess { db, _dir: dir, store, capture, events }
    }

    fn sessions(&self) -> Vec<cowork::records::ActivitySession> {
        store::open_read_only(&self.db).ok().and_then(|c| cowork::capture::db::sessions_between(&c, 0, i64::MAX).ok()).unwrap_or_default()
    }

    fn afk(&self) -> Vec<cowork::capture::heartbeat::AfkEvent> {
        store::open_read_only(&self.db).ok().and_then(|c| cowork::capture::db::afk_between(&c, 0, i64::MAX).ok()).unwrap_or_default()
    }

    fn stop(mut self) -> Self {
        use cowork::store::StoreCommand;
        assert!(self.capture.shutdown(cowork::capture::CaptureCommand::Shutdown, Duration::from_secs(10)));
        let (ack, done) = crossbeam_channel::bounded(1);
        self.store.commands.send(StoreCommand::Flush(ack)).unwrap();
        done.recv_timeout(Duration::from_secs(10)).unwrap();
        self
    }
}

#[test]
fn on_sway_the_compositors_idle_notification_marks_away_and_input_marks_present() {
    use cowork::capture::heartbeat::AfkStatus;
    if !require(Compositor::sway_available() && have_program("wtype"), "sway, foot and wtype") {
        return;
    }
    let mut sway = Compositor::sway();
    sway.foot("test-notes", "Meeting notes", "stty -echo; cat > /dev/null");
    let capture = InProcess::start(&sway, 2);
    // No input: the compositor reports idle after a second; away two seconds after the last input.
    let started = cowork::ids::now_millis();
    assert!(
        eventually(Duration::from_secs(10), || capture.afk().iter().any(|e| e.data == AfkStatus::Afk)),
        "nobody typed, so the user went away: {:?}",
        capture.afk()
    );
    let away = capture.afk().into_iter().find(|e| e.data == AfkStatus::Afk).unwrap();
    assert!((away.start_millis - started).abs() <= 1_500, "away is back-dated to the last input: {away:?} (capture started {started})");
    // A key from a (virtual) keyboard: present again.
    let typed_at = cowork::ids::now_millis();
    assert!(sway.command("wtype").arg("x").status().unwrap().success());
    assert!(
        eventually(Duration::from_secs(5), || capture.afk().iter().any(|e| e.data != AfkStatus::Afk && e.start_millis >= typed_at - 1_000)),
        "input made the user present again: {:?}",
        capture.afk()
    );
    // Typing for longer than the threshold, with no pause as long as the compositor's second, never reads as away.
    let busy_from = cowork::ids::now_millis();
    for _ in 0..8 {
        assert!(sway.command("wtype").arg("y").status().unwrap().success());
        std::thread::sleep(Duration::from_millis(400));
    }
    let capture = capture.stop();
    let afk = capture.afk();
    assert!(!afk.iter().any(|e| e.data == AfkStatus::Afk && e.end_millis > busy_from + 500), "marked away while typing: {afk:?}");
    let statuses: Vec<bool> = afk.iter().map(|e| e.data == AfkStatus::Afk).collect();
    assert_eq!(statuses, [false, true, false], "present, away, present: {afk:?}");
    drop(capture.events);
}

/// Sessions' titles and clips' texts of a data directory, and whether `word` is anywhere in its files.
pub fn on_disk(data: &Path, word: &str) -> bool {
    ["cowork.db", "cowork.db-wal"].iter().any(|file| {
        let bytes = std::fs::read(data.join(file)).unwrap_or_default();
        bytes.windows(word.len()).any(|w| w == word.as_bytes())
    })
}

#[test]
fn on_sway_capture_run_records_clipboard_changes_and_excludes_a_password_manager_by_its_app_id() {
    if !require(Compositor::sway_available() && have_program("wl-copy"), "sway, foot and wl-clipboard") {
        return;
    }
    let mut sway = Compositor::sway();
    sway.foot("test-notes", "Meeting notes", "sleep 600");
    sway.foot("org.keepassxc.KeePassXC", "Passwords.kdbx - KeePassXC", "sleep 600");
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    {
        let conn = store::open_writer(&db).unwrap();
        store::set_setting(&conn, "capture.streams_confirmed", "true", 0).unwrap();
    }
    let capture = ChildGuard(sway.cowork(data.path()).args(["capture", "run"]).spawn().unwrap());
    let sessions = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::db::sessions_between(&c, 0, i64::MAX).ok()).unwrap_or_default();
    let clips = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::db::clips_between(&c, 0, i64::MAX).ok()).unwrap_or_default();
    sway.swaymsg(&["[app_id=test-notes] focus"]);
    assert!(eventually(Duration::from_secs(15), || sessions().iter().any(|s| s.title == "Meeting notes")), "{:?}", sessions());
    let copy = |text: &str| {
        // wl-copy serves the selection until another takes it; --foreground keeps it our child.
        let child = sway.command("wl-copy").args(["--foreground", text]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        ChildGuard(child)
    };
    let _first = copy("meeting moved to Thursday");
    assert!(
        eventually(Duration::from_secs(5), || clips().iter().any(|c| c.text == "meeting moved to Thursday")),
        "wl-copy became a clipboard row: {:?}",
        clips()
    );
    // The password manager, by its Wayland app id: nothing of it, and nothing copied in it, is kept.
    sway.swaymsg(&["[app_id=org.keepassxc.KeePassXC] focus"]);
    std::thread::sleep(Duration::from_millis(600));
    let _secret = copy("hunter2 vault secret");
    std::thread::sleep(Duration::from_millis(1_000));
    sway.swaymsg(&["[app_id=test-notes] focus"]);
    std::thread::sleep(Duration::from_millis(600));
    let _second = copy("invoice 2291");
    assert!(eventually(Duration::from_secs(5), || clips().iter().any(|c| c.text == "invoice 2291")), "{:?}", clips());
    stop(capture);
    let summary: Vec<(String, String)> = clips().into_iter().map(|c| (c.text, c.app)).collect();
    assert_eq!(
        summary,
        [("meeting moved to Thursday".to_owned(), "test-notes".to_owned()), ("invoice 2291".to_owned(), "test-notes".to_owned())],
        "each copy once, with the window it was made in; none in the password manager"
    );
    assert!(sessions().iter().all(|s| !s.app.to_lowercase().contains("keepassxc")), "{:?}", sessions());
    for word in ["Passwords.kdbx", "hunter2", "KeePassXC"] {
        assert!(!on_disk(data.path(), word), "{word} reached the database files");
    }
}

#[test]
fn on_sway_dictation_types_unicode_through_a_virtual_keyboard_and_a_held_ctrl_does_not_combine() {
    if !require(Compositor::sway_available() && have_program("wtype"), "sway, foot and wtype") {
        return;
    }
    let mut sway = Compositor::sway();
    let out = sway.runtime.join("typed.txt");
    // Raw mode: each character reaches `cat` as typed (dictation never presses Enter).
    sway.foot("test-sink", "Dictation sink", &format!("stty -icanon -echo; exec cat > {}", out.display()));
    sway.swaymsg(&["[app_id=test-sink] focus"]);
    let report = cowork::desktop::session::report(&sway.facts(), false);
    let typing = cowork::audio::dictate::Typing::for_desktop(&report, None, std::path::Path::new("/nonexistent"));
    let cowork::audio::dictate::Typing::Wayland(target) = typing else { panic!("dictation on sway uses the virtual keyboard: {typing:?}") };
    // Ctrl held down on another keyboard for the whole time (wtype is a second virtual keyboard).
    let held = ChildGuard(sway.command("wtype").args(["-M", "ctrl", "-s", "3000", "-m", "ctrl"]).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(300));
    let said = "héllo wörld €5";
    let typed = cowork::desktop::wlr::type_text(&target, &cowork::audio::dictate::typeable(said)).unwrap();
    assert_eq!(typed, said.chars().count());
    assert!(
        eventually(Duration::from_secs(5), || std::fs::read_to_string(&out).unwrap_or_default() == said),
        "the terminal received {:?}",
        std::fs::read(&out).unwrap_or_default()
    );
    drop(held);
    // A line break in a transcript is a space (and the text is trimmed): dictation never submits.
    cowork::desktop::wlr::type_text(&target, &cowork::audio::dictate::typeable(" rm -rf ~\nok")).unwrap();
    let expected = format!("{said}rm -rf ~ ok");
    assert!(eventually(Duration::from_secs(5), || std::fs::read_to_string(&out).unwrap_or_default() == expected), "{:?}", std::fs::read_to_string(&out));
}

/// The X display sway's XWayland serves (its lock file names sway's pid).
fn xwayland_display(sway: &Compositor) -> String {
    let pid = sway.children[0].0.id();
    let mut display = None;
    assert!(eventually(Duration::from_secs(5), || {
        display = std::fs::read_dir("/tmp").unwrap().flatten().find_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let number = name.strip_prefix(".X")?.strip_suffix("-lock")?.to_owned();
            // "%10d" and a NUL, as wlroots writes it.
            let owner: u32 = std::fs::read_to_string(entry.path()).ok()?.trim_matches(|c: char| c.is_whitespace() || c == '\0').parse().ok()?;
            (owner == pid).then(|| format!(":{number}"))
        });
        display.is_some()
    }));
    display.unwrap()
}

#[test]
fn with_xwayland_beside_sway_an_x_app_and_native_apps_are_both_seen_and_x11_never_decides() {
    if !require(Compositor::sway_available() && have_program("xterm") && have_program("Xwayland"), "sway, foot, xterm and Xwayland") {
        return;
    }
    let mut sway = Compositor::sway();
    let display = xwayland_display(&sway);
    sway.x_display = Some(display.clone());
    let native = sway.foot("test-native", "Native notes", "sleep 600");
    // XWayland takes only the compositor's user as a client.
    let mut xterm = match unprivileged() {
        Some((uid, gid)) => {
            let mut command = sway.command("setpriv");
            command.args(["--reuid", &uid.to_string(), "--regid", &gid.to_string(), "--clear-groups", "xterm"]).env("HOME", &sway.runtime);
            command
        }
        None => sway.command("xterm"),
    };
    let xterm = xterm.args(["-T", "X terminal", "-e", "sleep 600"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let xterm_pid = xterm.id();
    sway.children.push(ChildGuard(xterm));
    assert!(eventually(Duration::from_secs(15), || tree_windows(&sway.tree()).iter().any(|w| w["pid"].as_u64() == Some(u64::from(xterm_pid)))), "xterm mapped");
    let facts = sway.facts();
    assert_eq!(facts.x_display.as_deref(), Some(display.as_str()));
    let report = cowork::desktop::session::report(&facts, false);
    assert!(report.xwayland && !report.x11_decides(), "{report:?}");
    let capture = InProcess::start(&sway, 3600);
    for app in ["XTerm", "test-native", "XTerm", "test-native"] {
        let criteria = if app == "XTerm" { "[class=XTerm] focus".to_owned() } else { format!("[app_id={app}] focus") };
        sway.swaymsg(&[&criteria]);
        std::thread::sleep(Duration::from_millis(700));
    }
    let capture = capture.stop();
    let seen: Vec<(String, String, Option<u32>)> =
        capture.sessions().into_iter().filter(|s| s.title != "Native notes" || s.app == "test-native").map(|s| (s.app, s.title, s.pid)).collect();
    let tail: Vec<_> = seen.iter().rev().take(4).rev().cloned().collect();
    assert_eq!(
        tail,
        [
            ("XTerm".to_owned(), "X terminal".to_owned(), Some(xterm_pid)),
            ("test-native".to_owned(), "Native notes".to_owned(), Some(native)),
            ("XTerm".to_owned(), "X terminal".to_owned(), Some(xterm_pid)),
            ("test-native".to_owned(), "Native notes".to_owned(), Some(native)),
        ],
        "both kinds of window, from the compositor: {seen:?}"
    );
}

/// A window of the sway tree by its pid and title.
fn window_of(sway: &Compositor, pid: u32, title: &str) -> Option<serde_json::Value> {
    tree_windows(&sway.tree()).into_iter().find(|w| w["pid"].as_u64() == Some(u64::from(pid)) && w["name"] == title)
}

#[test]
fn on_sway_the_sidebar_docks_right_on_every_workspace_and_cowork_trigger_opens_the_prompt() {
    if !require(Compositor::sway_available(), "sway and foot") {
        return;
    }
    let mut sway = Compositor::sway();
    sway.foot("test-notes", "Meeting notes", "sleep 600");
    let data = temp_dir();
    // What doctor says here: the wlroots backend, with the hotkeys left to sway's config.
    let checks = doctor_desktop(&sway, data.path());
    let state = |name: &str| checks.iter().find(|(n, _, _)| n == name).map(|(_, status, detail)| (status.clone(), detail.clone())).unwrap();
    for name in ["focused window", "away detection", "clipboard", "dictation typing", "sidebar placement", "agent window tools"] {
        assert_eq!(state(name).0, "ok", "{name}: {:?}", state(name));
    }
    assert!(state("focused window").1.contains("pid from the compositor's IPC"), "{:?}", state("focused window"));
    assert_eq!(state("hotkeys").0, "warn");
    assert!(state("hotkeys").1.contains("sway's config"), "{:?}", state("hotkeys"));

    let sidebar = sway.cowork(data.path()).arg("--models-dir").arg(super::support::models_dir()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let pid = sidebar.id();
    sway.children.push(ChildGuard(sidebar));
    let workspace: serde_json::Value = serde_json::from_str::<serde_json::Value>(&sway.swaymsg(&["-t", "get_workspaces", "-r"]))
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["focused"] == true)
        .cloned()
        .unwrap();
    let area = &workspace["rect"];
    let docked = |w: &serde_json::Value| {
        let r = &w["rect"];
        w["type"] == "floating_con"
            && w["sticky"] == true
            && r["x"].as_i64().unwrap() + r["width"].as_i64().unwrap() == area["x"].as_i64().unwrap() + area["width"].as_i64().unwrap()
            && r["y"] == area["y"]
            && r["height"] == area["height"]
            && r["width"].as_i64().unwrap() < area["width"].as_i64().unwrap() / 2
    };
    assert!(
        eventually(Duration::from_secs(30), || window_of(&sway, pid, "cowork").is_some_and(|w| docked(&w))),
        "the sidebar is a floating, sticky window at the right edge of the work area: {:?} in {area}",
        window_of(&sway, pid, "cowork")
    );
    // The notes stay where they were: only cowork's own window was moved.
    assert!(tree_windows(&sway.tree()).iter().any(|w| w["app_id"] == "test-notes" && w["type"] == "con"));

    // Another user's process cannot send triggers (the socket is the user's own).
    let paused = || {
        let out = sway.cowork(data.path()).args(["settings", "get", "privacy.paused"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    if let Some((uid, gid)) = unprivileged() {
        let out = sway
            .command("setpriv")
            .args(["--reuid", &uid.to_string(), "--regid", &gid.to_string(), "--clear-groups", env!("CARGO_BIN_EXE_cowork")])
            // The same data directory, so the same socket: only the peer's uid keeps it out.
            .arg("--data-dir")
            .arg(data.path())
            .args(["trigger", "pause"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        // Kept out by the folder's mode (0700), or by the socket's peer check.
        let kept_out = said.contains("Permission denied") || said.contains("another user");
        assert!(!out.status.success() && kept_out, "another user reached the trigger socket: {said}");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(paused(), "false");
    }
    // The compositor binding's command: the quick prompt opens, floats in the middle and has the keyboard.
    let out = sway.cowork(data.path()).args(["trigger", "quick-prompt"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        eventually(Duration::from_secs(15), || window_of(&sway, pid, "cowork quick prompt")
            .is_some_and(|w| w["focused"] == true && w["type"] == "floating_con")),
        "the quick prompt is open, floating and focused: {:?}",
        window_of(&sway, pid, "cowork quick prompt")
    );
    let out = sway.cowork(data.path()).args(["trigger", "pause"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(eventually(Duration::from_secs(5), || paused() == "true"), "the pause trigger paused capture");
    let out = sway.cowork(data.path()).args(["trigger", "open-the-pod-bay-doors"]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("quick-prompt, pause, talk-press, talk-release"));
}

#[test]
fn on_sway_the_agent_lists_windows_and_focuses_one_by_its_id() {
    if !require(Compositor::sway_available(), "sway and foot") {
        return;
    }
    let mut sway = Compositor::sway();
    let alpha = sway.foot("test-alpha", "Alpha document", "sleep 600");
    sway.foot("test-beta", "Beta notes", "sleep 600");
    let report = cowork::desktop::session::report(&sway.facts(), false);
    let target = report.wayland.clone().expect("the wlroots backend runs on sway");
    let windows = cowork::desktop::wlr::list_windows(&target).unwrap();
    let listed: Vec<(&str, &str)> = windows.iter().map(|w| (w.app.as_str(), w.title.as_str())).collect();
    assert_eq!(listed, [("test-alpha", "Alpha document"), ("test-beta", "Beta notes")]);
    assert_eq!(windows[0].pid, Some(alpha));
    // Beta has focus (opened last); the agent focuses Alpha by the id it was given.
    let focused = || tree_windows(&sway.tree()).into_iter().find(|w| w["focused"] == true).map(|w| w["app_id"].as_str().unwrap_or_default().to_owned());
    assert_eq!(focused().as_deref(), Some("test-beta"));
    cowork::desktop::wlr::activate(&target, windows[0].window_id).unwrap();
    assert!(eventually(Duration::from_secs(5), || focused().as_deref() == Some("test-alpha")), "{:?}", focused());
    let err = cowork::desktop::wlr::activate(&target, 12345).unwrap_err();
    assert!(err.contains("no window 12345"), "{err}");
}

const GTK_LOGIN: &str = r#"
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk, GLib
win = Gtk.Window(title="Sign in - Demo")
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
user = Gtk.Entry()
password = Gtk.Entry()
password.set_visibility(False)
box.add(user)
box.add(password)
win.add(box)
# The form moves the focus itself, as a login form's script would: to the
# password once the name is in, back to the name once the password is.
user.connect("changed", lambda e: e.get_text() == "alice" and GLib.idle_add(password.grab_focus))
password.connect("changed", lambda e: e.get_text() == "hunter2" and GLib.idle_add(user.grab_focus))
win.connect("destroy", Gtk.main_quit)
win.show_all()
user.grab_focus()
Gtk.main()
"#;

#[test]
fn on_sway_the_typing_stream_is_the_text_entered_into_fields_and_never_a_password() {
    let gtk = Command::new("/usr/bin/python3").args(["-c", "import gi; gi.require_version('Gtk', '3.0')"]).status().is_ok_and(|s| s.success());
    if !require(
        Compositor::sway_available() && have_program("wtype") && have_program("dbus-daemon") && gtk,
        "sway, wtype, dbus-daemon and python3-gi with GTK 3",
    ) {
        return;
    }
    let mut sway = Compositor::sway();
    let (bus, dbus) = super::support::launch_bus({
        let mut command = sway.command("dbus-daemon");
        command.arg("--session");
        command
    });
    sway.children.insert(1, bus);
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    {
        let conn = store::open_writer(&db).unwrap();
        store::set_setting(&conn, "capture.streams_confirmed", "true", 0).unwrap();
    }
    // Without sway's IPC (as on river, niri or labwc): the pid comes from the
    // window's accessible frame, matched by title, and the typing stream needs it.
    let capture = ChildGuard(
        sway.cowork(data.path())
            .args(["capture", "run"])
            .env_remove("SWAYSOCK")
            .env("DBUS_SESSION_BUS_ADDRESS", &dbus)
            .env("COWORK_LOG", std::env::var("COWORK_TEST_CAPTURE_LOG").unwrap_or_else(|_| "warn".into()))
            .spawn()
            .unwrap(),
    );
    let app = sway
        .command("/usr/bin/python3")
        .args(["-c", GTK_LOGIN])
        .env("DBUS_SESSION_BUS_ADDRESS", &dbus)
        .env("GDK_BACKEND", "wayland")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let app_pid = app.id();
    sway.children.push(ChildGuard(app));
    let sessions = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::db::sessions_between(&c, 0, i64::MAX).ok()).unwrap_or_default();
    assert!(
        eventually(Duration::from_secs(20), || sessions().iter().any(|s| s.title == "Sign in - Demo" && s.pid == Some(app_pid))),
        "the form's session, with the pid its accessible frame gave: {:?}",
        sessions()
    );
    // Give the a11y worker time to subscribe, as a person takes a moment before typing.
    std::thread::sleep(Duration::from_secs(2));
    // One keyboard for the whole input (a new one per word would refocus the
    // window each time); it loses its first key unless it waits a moment first.
    let typed = sway.command("wtype").args(["-s", "300", "-d", "60", "alice", "-s", "800", "hunter2", "-s", "800", "bob"]).status().unwrap();
    assert!(typed.success());
    std::thread::sleep(Duration::from_millis(2_600));
    stop(capture);
    let reader = store::open_read_only(&db).unwrap();
    let chunks = cowork::capture::db::chunks_between(&reader, 0, i64::MAX).unwrap();
    let typed: Vec<(&str, &str)> = chunks.iter().map(|c| (c.text.as_str(), c.title.as_str())).collect();
    assert_eq!(typed, [("alice", "Sign in - Demo"), ("bob", "Sign in - Demo")], "entered again after leaving the password field");
    assert!(typed.iter().all(|(t, _)| !t.contains("hunter") && !t.contains('2')), "{typed:?}");
    assert!(!on_disk(data.path(), "hunter2"));
}

#[test]
fn where_no_compositor_ipc_can_place_it_the_sidebar_runs_under_xwayland() {
    if !require(have_program("weston") && have_program("xdotool") && have_program("xprop"), "weston, xdotool and xprop") {
        return;
    }
    let mut weston = Compositor::weston();
    let data = temp_dir();
    let sidebar = weston
        .cowork(data.path())
        .arg("--models-dir")
        .arg(super::support::models_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    weston.children.push(ChildGuard(sidebar));
    // An X window on XWayland's display: a native Wayland window would be invisible there.
    let mut window = String::new();
    assert!(
        eventually(Duration::from_secs(30), || {
            let out = weston.command("xdotool").args(["search", "--name", "^cowork$"]).output().unwrap();
            window = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().to_owned();
            !window.is_empty()
        }),
        "the sidebar is an X11 window under XWayland"
    );
    // cowork's own window, by its class (winit asks for keep-above there; whether weston's window
    // manager honours it is weston's matter, and it keeps no _NET_WM_STATE to show).
    let class = weston.command("xprop").args(["-id", &window, "WM_CLASS"]).output().unwrap();
    assert!(String::from_utf8_lossy(&class.stdout).contains("\"cowork\""), "{}", String::from_utf8_lossy(&class.stdout));
}

/// KDE Plasma: the agent's list_windows and focus_window through a one-shot
/// KWin script: both terminals listed with their pids, one focused by the id
/// it was given, and an unknown id refused.
#[test]
fn on_kde_plasma_the_agent_lists_windows_and_focuses_one_by_its_id() {
    if !require(Compositor::kwin_available(), "kwin_wayland, weston-terminal and dbus-daemon") {
        return;
    }
    let mut kwin = Compositor::kwin();
    let (alpha, _) = kwin.weston_terminal("Alpha document");
    let (beta, _) = kwin.weston_terminal("Beta notes");
    let conn = zbus::blocking::connection::Builder::address(kwin.bus.as_deref().unwrap()).unwrap().build().unwrap();
    let mut windows = Vec::new();
    assert!(eventually(Duration::from_secs(15), || {
        windows = cowork::desktop::kwin::list_windows(&conn).unwrap();
        // Both titles set (a terminal's title passes through others while it starts).
        windows.len() == 2 && ["Alpha document", "Beta notes"].iter().all(|title| windows.iter().any(|w| w.title == *title))
    }), "{windows:?}");
    let find = |title: &str| windows.iter().find(|w| w.title == title).cloned().unwrap();
    assert_eq!(find("Alpha document").pid, Some(alpha));
    assert_eq!(find("Beta notes").pid, Some(beta));
    assert!(windows.iter().all(|w| w.app == "org.freedesktop.weston.wayland-terminal"), "{windows:?}");
    let active = || kwin.kwin_windows().0.into_iter().find(|w| w["active"] == true).map(|w| w["caption"].as_str().unwrap_or_default().to_owned());
    // Whichever has the focus, the agent focuses the other by the id it was given.
    let before = active().expect("a window has the focus");
    let other = if before == "Alpha document" { "Beta notes" } else { "Alpha document" };
    cowork::desktop::kwin::activate(&conn, find(other).window_id).unwrap();
    assert_eq!(active().as_deref(), Some(other));
    assert_eq!(cowork::desktop::kwin::list_windows(&conn).unwrap().len(), 2, "nothing else changed");
    let err = cowork::desktop::kwin::activate(&conn, 12345).unwrap_err();
    assert!(err.contains("no open window has the id 12345"), "{err}");
    // Each request's script is unloaded once it answered.
    let me = std::process::id();
    assert!((0..8).all(|run| !kwin.kwin_script_loaded(&format!("cowork-windows-{me}-{run}"))));
}

/// A foot terminal in DejaVu Sans Mono 11 printing `text`; waits until sway maps it.
fn foot_showing(sway: &mut Compositor, app_id: &str, title: &str, text: &str) {
    let script = format!("printf '%s\\n' '{}'; sleep 600", text.replace('\'', ""));
    let child = sway
        .command("foot")
        .args(["--app-id", app_id, "--title", title, "--font", "DejaVu Sans Mono:size=11", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start foot");
    let pid = child.id();
    sway.children.push(ChildGuard(child));
    assert!(eventually(Duration::from_secs(10), || window_of(sway, pid, title).is_some()), "foot {app_id} was not mapped");
}

#[test]
fn on_sway_the_screen_stream_reads_the_focused_windows_region_by_screencopy_and_never_an_excluded_or_covering_window() {
    if !require(Compositor::sway_available(), "sway and foot") || !require(cowork::ocr::status().is_ok(), "Tesseract (libtesseract5 and tesseract-ocr-eng)") {
        return;
    }
    let mut sway = Compositor::sway();
    foot_showing(&mut sway, "test-notes", "deploy notes", "Ticket ENG-4471 assigned to Dana Whitfield");
    foot_showing(&mut sway, "test-private", "Private notes", "SECRET-PIN 90210 Lighthouse");
    foot_showing(&mut sway, "test-cover", "Quarterly bonus pool", "OVERLAY 55555 Marmalade");
    sway.swaymsg(&["[app_id=test-cover] floating enable, resize set 420 90, move position 100 300"]);
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    {
        let conn = store::open_writer(&db).unwrap();
        for (key, value) in [("capture.streams_confirmed", "true"), ("capture.screen.enabled", "true"), ("capture.screen.consented", "true"), ("privacy.denied_titles", "(?i)private notes")] {
            store::set_setting(&conn, key, value, 0).unwrap();
        }
    }
    let capture = ChildGuard(sway.cowork(data.path()).args(["capture", "run"]).spawn().unwrap());
    let rows = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::screen_texts::seen_between(&c, 0, i64::MAX, 100).ok()).unwrap_or_default();
    sway.swaymsg(&["[app_id=test-private] focus"]);
    std::thread::sleep(Duration::from_secs(3));
    sway.swaymsg(&["[app_id=test-notes] focus"]);
    assert!(eventually(Duration::from_secs(20), || rows().iter().any(|r| r.title == "deploy notes" && r.text.contains("Whitfield"))), "{:?}", rows());
    stop(capture);
    // `cowork ocr --focused` (the screenshot tool's way on Wayland): the focused window, or a refusal.
    let out = sway.cowork(data.path()).args(["ocr", "--focused", "--json"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && said.contains("Whitfield") && !said.contains("55555") && !said.contains("bonus"), "{said}{}", String::from_utf8_lossy(&out.stderr));
    sway.swaymsg(&["[app_id=test-private] focus"]);
    let out = sway.cowork(data.path()).args(["ocr", "--focused", "--json"]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("is not read"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = sway.cowork(data.path()).args(["ocr", "--window", "12345", "--json"]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("does not have the focus"), "{}", String::from_utf8_lossy(&out.stderr));
    let all = rows();
    eprintln!("kept: {all:?}");
    let notes = all.iter().find(|r| r.title == "deploy notes").unwrap();
    assert_eq!(notes.method, cowork::capture::screen_texts::Method::Ocr, "foot has no accessibility tree");
    for word in ["90210", "Lighthouse", "55555", "Marmalade", "bonus"] {
        assert!(all.iter().all(|r| !r.text.contains(word)), "{word} was read: {all:?}");
    }
    assert!(all.iter().all(|r| r.title == "deploy notes"), "only the allowed, focused window: {all:?}");
}

#[test]
fn on_kde_plasma_the_screen_stream_reads_the_focused_window_alone_rendered_by_kwin_for_cowork_only() {
    if !require(Compositor::kwin_available() && have_program("kbuildsycoca5"), "kwin_wayland, kbuildsycoca5, weston-terminal and dbus-daemon")
        || !require(cowork::ocr::status().is_ok(), "Tesseract (libtesseract5 and tesseract-ocr-eng)")
    {
        return;
    }
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_cowork")).unwrap();
    let mut kwin = Compositor::kwin_allowing(Some(&exe));
    let (data, db) = capturing_data_dir(&[("privacy.denied_titles", "(?i)private notes"), ("capture.screen.enabled", "true"), ("capture.screen.consented", "true")]);
    let screen = doctor_check(&kwin, data.path(), "screen text");
    assert!(screen.0 == "ok" && screen.1.contains("KWin"), "{screen:?}");
    let capture = ChildGuard(kwin.cowork(data.path()).args(["capture", "run"]).spawn().unwrap());
    let rows = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::screen_texts::seen_between(&c, 0, i64::MAX, 100).ok()).unwrap_or_default();
    let sessions = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::db::sessions_between(&c, 0, i64::MAX).ok()).unwrap_or_default();
    assert!(eventually(Duration::from_secs(15), || kwin.kwin_script_loaded(&format!("cowork-desktop-{}", capture.0.id()))));
    // A new window takes the focus: the excluded one first, then the allowed one.
    kwin.terminal_showing("Private notes", "SECRET-PIN 90210 Lighthouse");
    std::thread::sleep(Duration::from_secs(3));
    kwin.terminal_showing("deploy notes", "Ticket ENG-4471 assigned to Dana Whitfield");
    assert!(eventually(Duration::from_secs(15), || sessions().iter().any(|s| s.title == "deploy notes")), "{:?}", sessions());
    assert!(
        eventually(Duration::from_secs(20), || rows().iter().any(|r| r.title == "deploy notes" && r.text.contains("Whitfield"))),
        "{:?}\n{}",
        rows(),
        std::fs::read_to_string(kwin.home.path().join("kwin.log")).unwrap_or_default()
    );
    // Another program, without cowork's desktop entry, is refused by KWin.
    let (mut reader, writer) = std::io::pipe().unwrap();
    let fd = zbus::zvariant::OwnedFd::from(std::os::fd::OwnedFd::from(writer));
    let conn = zbus::blocking::connection::Builder::address(kwin.bus.as_deref().unwrap()).unwrap().build().unwrap();
    let options: std::collections::HashMap<&str, zbus::zvariant::Value<'_>> = std::collections::HashMap::new();
    let refused = conn.call_method(Some("org.kde.KWin"), "/org/kde/KWin/ScreenShot2", Some("org.kde.KWin.ScreenShot2"), "CaptureActiveWindow", &(options, fd));
    assert!(refused.expect_err("refused").to_string().contains("NoAuthorized"));
    let mut leaked = Vec::new();
    std::io::Read::read_to_end(&mut reader, &mut leaked).unwrap();
    assert!(leaked.is_empty());
    stop(capture);
    // `cowork ocr --focused` (the screenshot tool's way on Wayland): KWin renders the focused window.
    let out = kwin.cowork(data.path()).args(["ocr", "--focused", "--json"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && said.contains("Whitfield"), "{said}{}", String::from_utf8_lossy(&out.stderr));
    let all = rows();
    eprintln!("kept: {all:?}");
    assert!(all.iter().all(|r| r.title == "deploy notes" && !r.text.contains("90210") && !r.text.contains("Lighthouse")), "{all:?}");
    assert_eq!(all[0].method, cowork::capture::screen_texts::Method::Ocr);
}
