//! cowork as installed desktop software: one instance per data directory (a
//! second start hands over to the first), starting at login in the tray,
//! and forgetting everything — with the real binary on a real X server and
//! session bus.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::support::{XSession, eventually, have_program, models_dir, require, temp_dir};

fn cowork(x: &XSession, data: &Path) -> Command {
    let mut command = x.command(env!("CARGO_BIN_EXE_cowork"));
    command.env("COWORK_LOG", "warn").arg("--data-dir").arg(data).arg("--models-dir").arg(models_dir());
    command
}

fn run(command: &mut Command) -> (bool, String) {
    let out = command.stdin(Stdio::null()).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The X windows titled exactly `name` that are mapped (viewable).
fn visible(x: &XSession, name: &str) -> bool {
    !x.xdotool(&["search", "--onlyvisible", "--name", &format!("^{name}$")]).trim().is_empty()
}

/// A panel's tray host: takes cowork's item and says a host shows it.
struct TrayHost;

#[zbus::interface(name = "org.kde.StatusNotifierWatcher")]
impl TrayHost {
    fn register_status_notifier_item(&self, _service: &str) {}

    fn register_status_notifier_host(&self, _service: &str) {}

    #[zbus(property)]
    fn is_status_notifier_host_registered(&self) -> bool {
        true
    }

    #[zbus(property)]
    fn protocol_version(&self) -> i32 {
        0
    }

    #[zbus(property)]
    fn registered_status_notifier_items(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Live processes whose command line names `data` (the coworks of that data directory).
fn processes_of(data: &Path) -> usize {
    let wanted = data.as_os_str().as_encoded_bytes();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter(|entry| {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let zombie = stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'));
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            !zombie && cmdline.split(|b| *b == 0).any(|arg| arg == wanted)
        })
        .count()
}

#[test]
fn a_second_start_hands_over_to_the_first_and_login_starts_in_the_tray() {
    if !require(XSession::available() && have_program("dbus-daemon"), "Xvfb and dbus-daemon") {
        return;
    }
    let mut x = XSession::start();
    let dbus = x.start_dbus();
    let data = temp_dir();
    let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
    cowork::store::set_setting(&conn, "capture.streams_confirmed", "true", 0).unwrap();
    cowork::store::set_setting(&conn, "ui.setup_done", "true", 0).unwrap();
    drop(conn);
    // "Start cowork when I log in", only the tray icon: what the session's autostart runs.
    let (ok, said) = run(cowork(&x, data.path()).args(["settings", "set", "ui.start_in_tray", "true"]));
    assert!(ok, "{said}");
    let (ok, said) = run(cowork(&x, data.path()).args(["autostart", "on"]));
    assert!(ok, "{said}");
    let entry = x.home_env().into_iter().find(|(k, _)| *k == "XDG_CONFIG_HOME").unwrap().1.join("autostart/app.cowork.Cowork.desktop");
    let text = std::fs::read_to_string(&entry).unwrap();
    let exec = text.lines().find_map(|l| l.strip_prefix("Exec=")).unwrap().to_owned();
    assert!(exec.ends_with(" --autostart"), "{text}");
    if have_program("desktop-file-validate") {
        let out = Command::new("desktop-file-validate").arg(&entry).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    }
    // A tray host on the bus (as a panel is): only then is the icon seen, and only then may the window hide.
    let _tray_host = zbus::blocking::connection::Builder::address(dbus.as_str())
        .unwrap()
        .name("org.kde.StatusNotifierWatcher")
        .unwrap()
        .serve_at("/StatusNotifierWatcher", TrayHost)
        .unwrap()
        .build()
        .unwrap();
    let first = cowork(&x, data.path()).arg("--autostart").stderr(Stdio::piped()).spawn().unwrap();
    let pid = first.id();
    let tray = eventually(Duration::from_secs(30), || super::capture_desktop::call_tray(&dbus, pid, "/StatusNotifierItem", "org.freedesktop.DBus.Properties", "Get", &("org.kde.StatusNotifierItem", "Status")).is_ok());
    assert!(tray, "the tray icon is up");
    // The window exists (eframe maps it for its first frame), then stays unmapped.
    let exists = eventually(Duration::from_secs(30), || !x.xdotool(&["search", "--name", "^cowork$"]).trim().is_empty());
    assert!(exists, "the sidebar's window was made");
    assert!(eventually(Duration::from_secs(10), || !visible(&x, "cowork")), "started at login in the tray: no sidebar window");
    std::thread::sleep(Duration::from_millis(1000));
    assert!(!visible(&x, "cowork"), "and it stays hidden");

    // The launcher's icon clicked: a second cowork shows the first's sidebar and ends.
    let (ok, said) = run(&mut cowork(&x, data.path()));
    assert!(ok && said.contains(&format!("pid {pid}")) && said.contains("showed its sidebar"), "{said}");
    assert!(eventually(Duration::from_secs(15), || visible(&x, "cowork")), "the sidebar is shown");
    // The desktop entry's Quick prompt action.
    let (ok, said) = run(cowork(&x, data.path()).arg("--quick-prompt"));
    assert!(ok && said.contains("opened its quick prompt"), "{said}");
    assert!(eventually(Duration::from_secs(15), || visible(&x, "cowork quick prompt")), "the quick prompt opened");
    // No second capture beside it, and nothing forgotten under it.
    let (ok, said) = run(cowork(&x, data.path()).args(["capture", "run"]));
    assert!(!ok && said.contains("already runs"), "{said}");
    let (ok, said) = run(cowork(&x, data.path()).args(["forget-everything", "--yes"]));
    assert!(!ok && said.contains("quit it first"), "{said}");
    assert!(data.path().join("cowork.db").exists());
    assert_eq!(processes_of(data.path()), 1, "one cowork runs");

    // Another data directory is another cowork.
    let other = temp_dir();
    let mut second = super::support::ChildGuard(cowork(&x, other.path()).args(["capture", "run"]).spawn().unwrap());
    let holder = |dir: &Path| std::fs::read_to_string(dir.join("cowork.lock")).unwrap_or_default();
    let its_pid = second.0.id().to_string();
    assert!(eventually(Duration::from_secs(30), || holder(other.path()).starts_with(&its_pid)), "a cowork of another data directory runs beside it");
    assert!(second.0.try_wait().unwrap().is_none());
    // SAFETY: signalling our own children.
    unsafe {
        libc::kill(second.0.id() as i32, libc::SIGTERM);
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let _ = second.0.wait();
    let output = first.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    // Forget everything: asked first (no terminal and no --yes: nothing goes), then all of it.
    let (ok, said) = run(cowork(&x, data.path()).arg("forget-everything"));
    assert!(!ok && said.contains("nothing was removed"), "{said}");
    assert!(data.path().join("cowork.db").exists() && entry.exists());
    let (ok, said) = run(cowork(&x, data.path()).args(["forget-everything", "--yes"]));
    assert!(ok, "{said}");
    assert!(said.contains(&data.path().display().to_string()) && said.contains("starting at login"), "the list names what goes: {said}");
    assert!(!data.path().exists(), "the data directory is gone");
    assert!(!entry.exists(), "the autostart entry is gone");
}
