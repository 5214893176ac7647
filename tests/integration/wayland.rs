//! cowork on real Wayland compositors, headless: weston as the compositor
//! cowork has no backend for (every capability says why, nothing false is
//! recorded).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cowork::store;

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
    children: Vec<ChildGuard>,
    home: tempfile::TempDir,
}

impl Compositor {
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
            Compositor { runtime, socket, desktop: "weston", swaysock: None, x_display: None, children: vec![ChildGuard(weston)], home };
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
        // Clients first, the compositor last.
        while self.children.len() > 1 {
            drop(self.children.pop());
        }
        self.children.clear();
    }
}

fn stop(mut child: Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

/// `cowork doctor --json`'s desktop checks: capability → (status, detail).
fn doctor_desktop(compositor: &Compositor, data: &Path) -> Vec<(String, String, String)> {
    let out = compositor.cowork(data).args(["doctor", "--json"]).output().unwrap();
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("doctor --json: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    checks
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["area"] == "desktop")
        .map(|c| (c["name"].as_str().unwrap().to_owned(), c["status"].as_str().unwrap().to_owned(), c["detail"].as_str().unwrap().to_owned()))
        .collect()
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
    assert_eq!(capabilities.len(), 9, "{checks:#?}");
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
    let capture = weston.cowork(data.path()).args(["capture", "run"]).spawn().unwrap();
    std::thread::sleep(Duration::from_secs(4));
    stop(capture);
    let reader = store::open_read_only(&data.path().join("cowork.db")).unwrap();
    let sessions = store::sessions_between(&reader, 0, i64::MAX).unwrap();
    assert!(sessions.is_empty(), "no window was seen, so none is recorded: {sessions:?}");
    let afk = store::afk_between(&reader, 0, i64::MAX).unwrap();
    assert!(afk.is_empty(), "presence cannot be seen: neither away nor present is recorded: {afk:?}");
    assert_eq!(store::clips_between(&reader, 0, i64::MAX).unwrap().len(), 0);
}
