//! Capture on a real desktop, side by side: focus change → finished session
//! readable in SQLite, on KDE's KWin 5.27 (`--virtual`, weston-terminal
//! windows, activated by a KWin script per switch; cowork's own KWin script
//! reports), on X11 (Xvfb + openbox, xterms, activated with xdotool) and on
//! sway 1.7 headless (foot windows, focused through sway's IPC); then the CPU
//! the Wayland capture threads (capture: foreign-toplevel + idle
//! notification; clipboard: data-control) spend on an idle desktop, on sway
//! and on KWin.
//!
//! `cargo bench --profile dev --bench desktop` (COWORK_BENCH_SWITCHES=200,
//! COWORK_BENCH_IDLE_SECS=60; COWORK_BENCH_ONLY=kwin|x11|sway|idle|gnome runs one part; GNOME
//! Shell 43 headless with cowork's extension runs only when asked for by name).
// A bench drives windows from plain helper threads; clippy.toml's thread rule is for the program.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cowork::capture::{CaptureCommand, CaptureConfig, spawn_capture};
use cowork::capture::clipboard::{ClipboardSource, spawn_clipboard};
use cowork::desktop::backend::Backend;
use cowork::desktop::session::{Capability, probe_with, report};
use cowork::runtime::{EventSink, RestartPolicy, WorkerHandle};
use cowork::store::{self, StoreCommand};
use cowork::workers::spawn_store;
use crossbeam_channel::bounded;

fn var(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn runs(part: &str) -> bool {
    std::env::var("COWORK_BENCH_ONLY").map_or(true, |only| only == part)
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        std::thread::sleep(Duration::from_millis(200));
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Store and capture in this process on `backend`.
fn capture(db: &Path, backend: Backend, display: Option<String>) -> (WorkerHandle<StoreCommand>, WorkerHandle<CaptureCommand>) {
    let (events, events_rx) = bounded(1 << 16);
    std::thread::spawn(move || for _ in events_rx {});
    let sink = EventSink::<cowork::events::AppEvent>::new(events, || {});
    let store = spawn_store(db.to_path_buf(), sink.clone(), RestartPolicy::default()).unwrap();
    let config = CaptureConfig { display, afk_secs: 3600, rules: Default::default(), backend };
    let capture = spawn_capture(config, store.commands.clone(), sink.narrow(), RestartPolicy::default()).unwrap();
    (store, capture)
}

/// Switches focus `switches` times between two windows and measures, for
/// each, from the switch having happened to the session it ended being
/// readable in SQLite from another connection.
fn measure(name: &str, db: &Path, switches: u64, mut focus: impl FnMut(bool)) {
    let reader = store::open_read_only(db).unwrap();
    let ended = |reader: &rusqlite::Connection| cowork::capture::db::recent_sessions(reader, 400).unwrap().iter().filter(|s| s.ended_at_millis.is_some()).count();
    let mut samples = Vec::new();
    for i in 0..switches {
        let before = ended(&reader);
        focus(i % 2 == 0);
        let switched = Instant::now();
        while ended(&reader) <= before {
            assert!(switched.elapsed() < Duration::from_secs(5), "{name}: switch {i} never became a row");
            std::thread::sleep(Duration::from_micros(500));
        }
        samples.push(switched.elapsed().as_secs_f64() * 1000.0);
        std::thread::sleep(Duration::from_millis(60));
    }
    samples.sort_by(f64::total_cmp);
    println!(
        "{name}: focus change → finished session in SQLite over {} switches: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.95),
        samples.last().unwrap()
    );
}

fn x11(switches: u64) {
    let display = format!(":{}", 700 + std::process::id() % 200);
    let _xvfb = Killed(Command::new("Xvfb").args([display.as_str(), "-screen", "0", "1280x800x24", "-nolisten", "tcp"]).stderr(Stdio::null()).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(500));
    let x = |program: &str| {
        let mut command = Command::new(program);
        command.env("DISPLAY", &display).stdout(Stdio::null()).stderr(Stdio::null());
        command
    };
    let _wm = Killed(x("openbox").spawn().unwrap());
    let _a = Killed(x("xterm").args(["-T", "bench alpha"]).spawn().unwrap());
    let _b = Killed(x("xterm").args(["-T", "bench beta"]).spawn().unwrap());
    let search = |title: &str| {
        let out = x("xdotool").args(["search", "--name", title]).stdout(Stdio::piped()).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().next().map(str::to_owned)
    };
    let mut ids = (None, None);
    wait_until("xterms mapped", || {
        ids = (search("^bench alpha$"), search("^bench beta$"));
        ids.0.is_some() && ids.1.is_some()
    });
    let (alpha, beta) = (ids.0.unwrap(), ids.1.unwrap());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cowork.db");
    let (mut store, mut capture) = capture(&db, Backend::X11, Some(display.clone()));
    std::thread::sleep(Duration::from_secs(1));
    measure("X11 (Xvfb, openbox, xterm)", &db, switches, |first| {
        let window = if first { &alpha } else { &beta };
        x("xdotool").args(["windowactivate", "--sync", window]).status().unwrap();
    });
    capture.shutdown(CaptureCommand::Shutdown, Duration::from_secs(10));
    store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10));
}

/// sway headless as `nobody` (it refuses root), in a runtime directory of its own.
struct Sway {
    runtime: PathBuf,
    _sway: Killed,
    clients: Vec<Killed>,
}

impl Sway {
    fn start() -> Sway {
        let runtime = tempfile::Builder::new().prefix("cowork-bench-sway-").tempdir().unwrap().keep();
        let config = runtime.join("sway.conf");
        std::fs::write(&config, "output HEADLESS-1 resolution 1280x720\n").unwrap();
        std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        // SAFETY: no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mut command = if root {
            std::os::unix::fs::chown(&runtime, Some(65534), Some(65534)).unwrap();
            std::os::unix::fs::chown(&config, Some(65534), Some(65534)).unwrap();
            let mut command = Command::new("setpriv");
            command.args(["--reuid", "65534", "--regid", "65534", "--clear-groups", "sway"]);
            command
        } else {
            Command::new("sway")
        };
        let sway = command
            .arg("-c")
            .arg(&config)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs([("WLR_BACKENDS", "headless"), ("WLR_RENDERER", "pixman"), ("WLR_LIBINPUT_NO_DEVICES", "1"), ("WLR_HEADLESS_OUTPUTS", "1")])
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("HOME", &runtime)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let sway = Sway { runtime: runtime.clone(), _sway: Killed(sway), clients: Vec::new() };
        wait_until("sway started", || sway.swaysock().is_some() && runtime.join("wayland-1").exists());
        sway
    }

    fn swaysock(&self) -> Option<PathBuf> {
        std::fs::read_dir(&self.runtime).ok()?.flatten().map(|e| e.path()).find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("sway-ipc.")))
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("XDG_SESSION_TYPE".into(), "wayland".into()),
            ("XDG_CURRENT_DESKTOP".into(), "sway".into()),
            ("WAYLAND_DISPLAY".into(), "wayland-1".into()),
            ("XDG_RUNTIME_DIR".into(), self.runtime.display().to_string()),
            ("SWAYSOCK".into(), self.swaysock().unwrap().display().to_string()),
        ]
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.env_remove("DISPLAY").envs(self.env()).stdout(Stdio::null()).stderr(Stdio::null());
        command
    }

    fn foot(&mut self, app_id: &str) {
        self.clients.push(Killed(self.command("foot").args(["--app-id", app_id, "sh", "-c", "sleep 3600"]).spawn().unwrap()));
        let tree = || String::from_utf8_lossy(&self.command("swaymsg").args(["-t", "get_tree"]).stdout(Stdio::piped()).output().unwrap().stdout).into_owned();
        wait_until("foot mapped", || tree().contains(app_id));
    }

    fn backend(&self, capability: Capability) -> Backend {
        backend_in(&self.env(), capability)
    }
}

impl Drop for Sway {
    fn drop(&mut self) {
        self.clients.clear();
        let _ = std::fs::remove_dir_all(&self.runtime);
    }
}

fn sway(switches: u64) {
    let mut sway = Sway::start();
    sway.foot("bench-alpha");
    sway.foot("bench-beta");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cowork.db");
    let (mut store, mut capture) = capture(&db, sway.backend(Capability::FocusedWindow), None);
    std::thread::sleep(Duration::from_secs(1));
    let swaysock = sway.swaysock().unwrap();
    measure("sway 1.7 (foreign-toplevel, pid over IPC)", &db, switches, |first| {
        let command = if first { "[app_id=bench-alpha] focus" } else { "[app_id=bench-beta] focus" };
        cowork::desktop::ipc::sway_request(&swaysock, 0, command).unwrap();
    });
    capture.shutdown(CaptureCommand::Shutdown, Duration::from_secs(10));
    store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10));
}

/// The backend cowork picks for `capability` in a session with this environment.
fn backend_in(env: &[(String, String)], capability: Capability) -> Backend {
    let facts = probe_with(&|key| env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()));
    cowork::desktop::backend::backend_for(&report(&facts, false), capability)
}

/// The share of one core this process's threads named `names` use over `seconds` of nothing happening: (percent, ticks, ticks per second).
fn idle_cpu(names: &[&str], seconds: u64) -> (f64, u64, f64) {
    let before = thread_ticks(names);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let ticks = thread_ticks(names) - before;
    // SAFETY: no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks as f64 / hz / started.elapsed().as_secs_f64() * 100.0, ticks, hz)
}

/// utime + stime of this process's threads named `names`, in clock ticks.
fn thread_ticks(names: &[&str]) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !names.contains(&comm.trim()) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
        let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
        total += fields.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) + fields.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    total
}

fn idle(seconds: u64) {
    let mut sway = Sway::start();
    sway.foot("bench-idle");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cowork.db");
    let (mut store, mut capture) = capture(&db, sway.backend(Capability::FocusedWindow), None);
    let Backend::Wlroots(target) = sway.backend(Capability::ClipboardWatch) else { panic!("data-control on sway") };
    let (events, events_rx) = bounded(1 << 10);
    std::thread::spawn(move || for _ in events_rx {});
    let (_copy_tx, copy_rx) = bounded(1);
    let mut clipboard =
        spawn_clipboard(None, ClipboardSource::Wayland(target), store.commands.clone(), copy_rx, EventSink::<cowork::events::AppEvent>::new(events, || {}).narrow(), RestartPolicy::default())
            .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let (percent, ticks, hz) = idle_cpu(&["capture", "clipboard"], seconds);
    println!("sway, idle desktop for {seconds} s: the capture and clipboard threads used {percent:.3} % of one core ({ticks} ticks at {hz} Hz)");
    clipboard.shutdown(cowork::capture::clipboard::ClipboardCommand::Shutdown, Duration::from_secs(10));
    capture.shutdown(CaptureCommand::Shutdown, Duration::from_secs(10));
    store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10));
}

/// A dbus-daemon of its own in `dir`, from which nothing is activated (a keyring would
/// be, and take its time); and its address.
fn private_bus(dir: &Path) -> (Killed, String) {
    use std::io::BufRead;
    std::fs::create_dir_all(dir).unwrap();
    let config = dir.join("bus.conf");
    std::fs::write(
        &config,
        format!(
            "<busconfig><type>session</type><keep_umask/><listen>unix:dir={}</listen><auth>EXTERNAL</auth>\
             <policy context=\"default\"><allow send_destination=\"*\" eavesdrop=\"true\"/><allow eavesdrop=\"true\"/><allow own=\"*\"/></policy></busconfig>",
            dir.display()
        ),
    )
    .unwrap();
    let mut daemon = Command::new("dbus-daemon")
        .arg(format!("--config-file={}", config.display()))
        .args(["--nofork", "--print-address=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut address = String::new();
    std::io::BufReader::new(daemon.stdout.take().unwrap()).read_line(&mut address).unwrap();
    (Killed(daemon), address.trim().to_owned())
}

/// KWin 5.27 `--virtual` on a session bus of its own, which this process
/// then uses (set before any other thread runs: `main` starts here).
struct KWin {
    home: tempfile::TempDir,
    runtime: PathBuf,
    clients: Vec<Killed>,
    shells: Vec<PathBuf>,
    _kwin: Killed,
    _bus: Killed,
}

impl KWin {
    fn start() -> KWin {
        let home = tempfile::tempdir().unwrap();
        let runtime = home.path().join("runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let (bus, address) = private_bus(home.path());
        // SAFETY: no other thread runs yet (the KWin part is the first).
        unsafe { std::env::set_var("DBUS_SESSION_BUS_ADDRESS", &address) };
        // Debian's kwin_wayland carries a file capability a container cannot exec; a copy has none.
        let binary = home.path().join("kwin_wayland");
        std::fs::copy("/usr/bin/kwin_wayland", &binary).unwrap();
        let kwin = Command::new(&binary)
            .args(["--virtual", "--width", "1280", "--height", "720", "--socket", "wayland-kde"])
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("QT_QPA_PLATFORM", "offscreen")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let kwin = KWin { home, runtime: runtime.clone(), clients: Vec::new(), shells: Vec::new(), _kwin: Killed(kwin), _bus: bus };
        let bus = zbus::blocking::Connection::session().unwrap();
        let dbus = zbus::blocking::fdo::DBusProxy::new(&bus).unwrap();
        wait_until("kwin started", || runtime.join("wayland-kde").exists() && dbus.name_has_owner("org.kde.KWin".try_into().unwrap()).unwrap_or(false));
        kwin
    }

    fn env(&self) -> Vec<(String, String)> {
        [("XDG_SESSION_TYPE", "wayland"), ("XDG_CURRENT_DESKTOP", "KDE"), ("WAYLAND_DISPLAY", "wayland-kde")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .chain([("XDG_RUNTIME_DIR".to_owned(), self.runtime.display().to_string())])
            .collect()
    }

    fn terminal(&mut self, title: &str) {
        let shell = self.home.path().join(format!("{}.sh", title.replace(' ', "-")));
        // The shell becomes `sleep` and writes its pid: it outlives the terminal unless killed.
        let pid_file = shell.with_extension("pid");
        std::fs::write(&shell, format!("#!/bin/sh\necho $$ > {}\nprintf '\\033]2;{title}\\007'\nexec sleep 3600\n", pid_file.display())).unwrap();
        self.shells.push(pid_file);
        std::fs::set_permissions(&shell, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let child = Command::new("weston-terminal")
            .arg(format!("--shell={}", shell.display()))
            .env("WAYLAND_DISPLAY", "wayland-kde")
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.clients.push(Killed(child));
    }

    fn backend(&self, capability: Capability) -> Backend {
        backend_in(&self.env(), capability)
    }
}

impl Drop for KWin {
    fn drop(&mut self) {
        self.clients.clear();
        for pid_file in &self.shells {
            if let Some(pid) = std::fs::read_to_string(pid_file).ok().and_then(|p| p.trim().parse::<i32>().ok()) {
                // SAFETY: a process this bench started (its shell wrote the pid).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

fn kwin(switches: u64) {
    use cowork::desktop::kwin::Scripting;
    let mut kwin = KWin::start();
    kwin.terminal("bench alpha");
    kwin.terminal("bench beta");
    std::thread::sleep(Duration::from_secs(2));
    let backend = kwin.backend(Capability::FocusedWindow);
    assert!(matches!(backend, Backend::KWin(_)), "{backend:?}");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cowork.db");
    let (mut store, mut capture) = capture(&db, backend, None);
    wait_until("the first session", || store::open_read_only(&db).ok().is_some_and(|c| !cowork::capture::db::recent_sessions(&c, 1).unwrap_or_default().is_empty()));
    let scripting = Scripting::session().unwrap();
    let file = kwin.home.path().join("switch.js");
    let switch = |title: &str| {
        let source = format!(
            "var l = workspace.clientList(); for (var i = 0; i < l.length; i++) {{ if (String(l[i].caption) === \"{title}\") {{ workspace.activeClient = l[i]; }} }}"
        );
        scripting.load("bench-switch", &file, &source).unwrap();
    };
    // Whichever mapped last has the focus: start from beta, so the first switch is one.
    switch("bench beta");
    std::thread::sleep(Duration::from_millis(500));
    // The switch happens while the script runs: the time counts from its run returning.
    measure("KWin 5.27 (cowork's KWin script, D-Bus)", &db, switches, |first| switch(if first { "bench alpha" } else { "bench beta" }));
    scripting.unload("bench-switch");
    // Then an idle desktop: what the capture thread, the idle thread and zbus's
    // executor (which receives the script's calls) spend while nothing happens.
    std::thread::sleep(Duration::from_secs(2));
    let seconds = var("COWORK_BENCH_IDLE_SECS", 60);
    let (percent, ticks, hz) = idle_cpu(&["capture", "idle", "zbus::Connectio"], seconds);
    println!("KWin, idle desktop for {seconds} s: the capture, idle and D-Bus threads used {percent:.3} % of one core ({ticks} ticks at {hz} Hz)");
    capture.shutdown(CaptureCommand::Shutdown, Duration::from_secs(10));
    store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10));
}

/// GNOME Shell 43 headless with cowork's extension (installed for this
/// bench's own executable, the program that captures here) and the tests'
/// driver extension, which moves the focus; on its own session bus and a
/// stand-in system bus, in a mount namespace hiding /run/systemd. Runs alone
/// (`COWORK_BENCH_ONLY=gnome`): it sets this process's session bus.
fn gnome(switches: u64) {
    let home = tempfile::tempdir().unwrap();
    let runtime = home.path().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let (_session, session_address) = private_bus(&home.path().join("session"));
    let (_system, system_address) = private_bus(&home.path().join("system"));
    // SAFETY: no other thread runs yet (this part runs alone).
    unsafe { std::env::set_var("DBUS_SESSION_BUS_ADDRESS", &session_address) };
    let schemas = home.path().join("schemas");
    std::fs::create_dir_all(&schemas).unwrap();
    for entry in std::fs::read_dir("/usr/share/glib-2.0/schemas").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".xml") || name.ends_with(".override") {
            std::fs::copy(entry.path(), schemas.join(&name)).unwrap();
        }
    }
    std::fs::write(
        schemas.join("99_bench.gschema.override"),
        "[org.gnome.shell]\nenabled-extensions=['cowork-test-driver@test', 'cowork@cowork.app']\ndisable-user-extensions=false\n",
    )
    .unwrap();
    assert!(Command::new("glib-compile-schemas").arg(&schemas).status().unwrap().success());
    let extensions = home.path().join("data/gnome-shell/extensions");
    let driver = extensions.join("cowork-test-driver@test");
    std::fs::create_dir_all(&driver).unwrap();
    std::fs::write(driver.join("extension.js"), include_str!("../tests/integration/gnome/driver.js")).unwrap();
    std::fs::write(driver.join("metadata.json"), r#"{"uuid":"cowork-test-driver@test","name":"driver","description":"bench","shell-version":["43"]}"#).unwrap();
    struct Enabled;
    impl cowork::desktop::gnome::GnomeSettings for Enabled {
        fn get(&self, _: &str, _: &str) -> Result<String, String> {
            Ok(format!("['{}']", cowork::desktop::gnome::UUID))
        }
        fn set(&self, _: &str, _: &str, _: &str) -> Result<(), String> {
            Ok(())
        }
    }
    cowork::desktop::gnome::install(&extensions.join(cowork::desktop::gnome::UUID), 43, &std::env::current_exe().unwrap(), &Enabled).unwrap();
    let _shell = Killed(
        Command::new("unshare")
            .args(["-m", "sh", "-c", "if [ -d /run/systemd ]; then mount -t tmpfs tmpfs /run/systemd || exit 1; fi; exec \"$@\"", "sh"])
            .args(["gnome-shell", "--headless", "--wayland", "--no-x11", "--virtual-monitor", "1280x720", "--wayland-display", "wayland-gnome"])
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("GSETTINGS_BACKEND", "keyfile")
            .env("GSETTINGS_SCHEMA_DIR", &schemas)
            .env("DBUS_SYSTEM_BUS_ADDRESS", &system_address)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let conn = zbus::blocking::Connection::session().unwrap();
    let eval = |code: &str| -> Option<String> {
        let reply = conn.call_method(Some("org.gnome.Shell"), "/org/cowork/TestDriver", Some("org.cowork.TestDriver"), "Eval", &(code,)).ok()?;
        reply.body().deserialize::<String>().ok()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while eval("1").is_none() {
        assert!(Instant::now() < deadline, "gnome-shell did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut clients = Vec::new();
    for title in ["bench alpha", "bench beta"] {
        let shell = home.path().join(format!("{}.sh", title.replace(' ', "-")));
        std::fs::write(&shell, format!("#!/bin/sh\nprintf '\\033]2;{title}\\007'\nexec sleep 3600\n")).unwrap();
        std::fs::set_permissions(&shell, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let child = Command::new("weston-terminal")
            .arg(format!("--shell={}", shell.display()))
            .env("WAYLAND_DISPLAY", "wayland-gnome")
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        clients.push(Killed(child));
    }
    let switch = |title: &str| {
        let code = format!("global.get_window_actors().map(a => a.meta_window).filter(w => w.get_title() === '{title}').map(w => w.activate(global.get_current_time())).length");
        assert_eq!(eval(&code).as_deref(), Some("1"), "{title}");
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while eval("global.get_window_actors().map(a => a.meta_window).filter(w => w.get_title().startsWith('bench ')).length").as_deref() != Some("2") {
        assert!(Instant::now() < deadline, "the terminals did not map");
        std::thread::sleep(Duration::from_millis(100));
    }
    switch("bench beta");
    let env: Vec<(String, String)> = [("XDG_SESSION_TYPE", "wayland"), ("XDG_CURRENT_DESKTOP", "GNOME"), ("WAYLAND_DISPLAY", "wayland-gnome")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .chain([("XDG_RUNTIME_DIR".to_owned(), runtime.display().to_string())])
        .collect();
    let backend = backend_in(&env, Capability::FocusedWindow);
    assert!(matches!(backend, Backend::Gnome), "{backend:?}");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cowork.db");
    let (mut store, mut capture) = capture(&db, backend, None);
    wait_until("the first session", || store::open_read_only(&db).ok().is_some_and(|c| !cowork::capture::db::recent_sessions(&c, 1).unwrap_or_default().is_empty()));
    measure("GNOME Shell 43 (cowork's extension, D-Bus)", &db, switches, |first| switch(if first { "bench alpha" } else { "bench beta" }));
    std::thread::sleep(Duration::from_secs(2));
    let seconds = var("COWORK_BENCH_IDLE_SECS", 60);
    let (percent, ticks, hz) = idle_cpu(&["capture", "idle", "zbus::Connectio"], seconds);
    println!("GNOME, idle desktop for {seconds} s: the capture, idle and D-Bus threads used {percent:.3} % of one core ({ticks} ticks at {hz} Hz)");
    capture.shutdown(CaptureCommand::Shutdown, Duration::from_secs(10));
    store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10));
}

fn main() {
    // `cargo bench` passes --bench; this is not a criterion harness.
    let switches = var("COWORK_BENCH_SWITCHES", 200);
    // First: it sets this process's session bus before any thread starts.
    if runs("kwin") && std::path::Path::new("/usr/bin/kwin_wayland").exists() {
        kwin(switches);
    }
    // Alone: it sets this process's session bus too.
    if std::env::var("COWORK_BENCH_ONLY").as_deref() == Ok("gnome") {
        gnome(switches);
        return;
    }
    if runs("x11") {
        x11(switches);
    }
    if runs("sway") {
        sway(switches);
    }
    if runs("idle") {
        idle(var("COWORK_BENCH_IDLE_SECS", 60));
    }
}
