//! Capture against real desktop peers on a private D-Bus session bus:
//! Chromium's address bar and a GTK password field over AT-SPI, mpv over
//! MPRIS, a fullscreen window, and the tray and pause hotkey of a real sidebar.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use cowork::store;
use cowork::capture::heartbeat::{AfkStatus, HeldBy};
use cowork::records::UrlSource;

use super::support::{XSession, eventually, have_program, require, temp_dir};

fn write_settings(data: &Path, pairs: &[(&str, &str)]) {
    let conn = store::open_writer(&data.join("cowork.db")).unwrap();
    for (key, value) in pairs {
        store::set_setting(&conn, key, value, 0).unwrap();
    }
}

fn capture_run(x: &XSession, data: &Path, dbus: &str) -> Child {
    x.command(env!("CARGO_BIN_EXE_cowork"))
        .args(["capture", "run", "--data-dir"])
        .arg(data)
        .env("DBUS_SESSION_BUS_ADDRESS", dbus)
        .env("COWORK_LOG", std::env::var("COWORK_TEST_CAPTURE_LOG").unwrap_or_else(|_| "warn".into()))
        .spawn()
        .unwrap()
}

fn stop(mut child: Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

fn sessions(db: &Path) -> Vec<cowork::records::ActivitySession> {
    store::open_read_only(db).and_then(|c| Ok(cowork::capture::db::sessions_between(&c, 0, i64::MAX)?)).unwrap_or_default()
}

/// Every place a word could have reached: sessions, typed text, clipboard (rows and FTS).
fn traces(db: &Path, word: &str) -> usize {
    let reader = store::open_read_only(db).unwrap();
    let lower = word.to_lowercase();
    let rows = cowork::capture::db::sessions_between(&reader, 0, i64::MAX)
        .unwrap()
        .iter()
        .filter(|s| format!("{} {} {}", s.title, s.app, s.url.clone().unwrap_or_default()).to_lowercase().contains(&lower))
        .count()
        + cowork::capture::db::chunks_between(&reader, 0, i64::MAX).unwrap().iter().filter(|c| c.text.to_lowercase().contains(&lower) || c.title.to_lowercase().contains(&lower)).count()
        + cowork::capture::db::clips_between(&reader, 0, i64::MAX).unwrap().iter().filter(|c| c.text.to_lowercase().contains(&lower)).count();
    rows + cowork::capture::db::search_sessions(&reader, word, 10).unwrap().len() + cowork::capture::db::search_chunks(&reader, word, 10).unwrap().len()
}

/// A loopback web server: `/plan.html` redirects (after 4 s) to the secret
/// page on `www.ledger.example` (mapped to 127.0.0.1 by Chromium's resolver
/// rules), which redirects back to `/back.html` on 127.0.0.1.
fn serve_pages() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            // Chromium opens speculative connections it may never use: one thread each.
            std::thread::spawn(move || {
            let mut request = [0u8; 2048];
            let n = stream.read(&mut request).unwrap_or(0);
            let request = String::from_utf8_lossy(&request[..n]);
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let body = match path {
                "/plan.html" => format!(
                    "<html><head><title>Quarterly plan</title><meta http-equiv=refresh content='8;url=http://www.ledger.example:{port}/secret.html'></head><body>plan</body></html>"
                ),
                "/secret.html" => format!(
                    "<html><head><title>Hidden ledger</title><meta http-equiv=refresh content='4;url=http://127.0.0.1:{port}/back.html'></head><body>ledger</body></html>"
                ),
                "/back.html" => "<html><head><title>Back to work</title></head><body>back</body></html>".to_owned(),
                "/untitled.html" => "<html><body>no title here</body></html>".to_owned(),
                _ => String::new(),
            };
            let status = if body.is_empty() { "404 Not Found" } else { "200 OK" };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            });
        }
    });
    port
}

/// `cowork doctor --json` on this display and session bus `dbus`: its checks.
fn doctor_checks(x: &XSession, data: &Path, dbus: &str) -> Vec<serde_json::Value> {
    let doctor = x
        .command(env!("CARGO_BIN_EXE_cowork"))
        .args(["doctor", "--json", "--data-dir"])
        .arg(data)
        .arg("--models-dir")
        .arg(super::support::models_dir())
        .env("DBUS_SESSION_BUS_ADDRESS", dbus)
        .env("COWORK_LOG", "warn")
        .output()
        .unwrap();
    serde_json::from_slice(&doctor.stdout).unwrap_or_else(|err| panic!("doctor --json: {err}: {}", String::from_utf8_lossy(&doctor.stdout)))
}

/// Desktop accessibility (`IsEnabled`) on the session bus at `dbus`.
fn desktop_accessibility(dbus: &str) -> Option<bool> {
    let session = zbus::blocking::connection::Builder::address(dbus).ok()?.build().ok()?;
    cowork::capture::a11y::desktop_accessibility(&session).ok()
}

/// Starts Chromium on `url` with a fresh profile (kept alive by the returned
/// directory), renderer accessibility forced, on the session bus `dbus`, and
/// returns its window once a title matching `title` appears.
fn open_chromium(x: &mut XSession, dbus: &str, url: &str, title: &str) -> (String, tempfile::TempDir) {
    let profile = temp_dir();
    let profile_arg = format!("--user-data-dir={}", profile.path().display());
    let args = [
        "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--password-store=basic",
        "--host-resolver-rules=MAP *.ledger.example 127.0.0.1", "--force-renderer-accessibility",
        profile_arg.as_str(), url,
    ];
    x.spawn("chromium", &args, Some(dbus));
    (x.wait_window(title, Duration::from_secs(40)), profile)
}

#[test]
fn chromium_urls_come_from_the_address_bar_and_a_denied_domain_leaves_nothing() {
    if !require(XSession::available() && have_program("chromium") && have_program("dbus-daemon"), "Xvfb, chromium and dbus-daemon") {
        return;
    }
    let mut x = XSession::start();
    let dbus = x.start_dbus();
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    write_settings(data.path(), &[("capture.streams_confirmed", "true"), ("privacy.denied_domains", "ledger.example")]);
    let port = serve_pages();
    // A fresh desktop: accessibility is off, and Chromium would show no address bar.
    assert_eq!(desktop_accessibility(&dbus), Some(false), "the session's own home starts with accessibility off");
    let capture = capture_run(&x, data.path(), &dbus);
    // cowork turns it on, as a screen reader would. Chromium registers with
    // AT-SPI only when it is on as it starts, and builds the tree of its own
    // window (the address bar) only with renderer accessibility forced (or for
    // a screen reader it detects): both are needed, and a fresh desktop lacked the first.
    assert!(eventually(Duration::from_secs(20), || desktop_accessibility(&dbus) == Some(true)), "cowork turned desktop accessibility on");
    let (window, _profile) = open_chromium(&mut x, &dbus, &format!("http://127.0.0.1:{port}/plan.html"), "Quarterly plan");
    x.activate(&window);
    // plan (8 s: Chromium's accessibility tree, which gives the URL, can take seconds to come up
    // on a loaded machine) → secret on localhost (4 s) → back to work.
    assert!(
        eventually(Duration::from_secs(40), || sessions(&db).iter().any(|s| s.title.starts_with("Back to work"))),
        "capture followed the browser to the last page: {:?}",
        sessions(&db)
    );
    std::thread::sleep(Duration::from_millis(500));
    stop(capture);
    assert_eq!(desktop_accessibility(&dbus), Some(false), "cowork turned accessibility back off as it quit");

    let recorded = sessions(&db);
    let plan = recorded.iter().find(|s| s.title.starts_with("Quarterly plan")).expect("plan page recorded");
    assert_eq!(plan.url_source, Some(UrlSource::Atspi), "{plan:?}");
    assert!(plan.url.as_deref().is_some_and(|u| u.contains(&format!("127.0.0.1:{port}/plan.html"))), "{plan:?}");
    let back = recorded.iter().find(|s| s.title.starts_with("Back to work")).unwrap();
    assert!(back.url.as_deref().is_some_and(|u| u.ends_with("/back.html")), "{back:?}");
    // The page on the denied domain: no row, no FTS entry, no bytes on disk.
    assert_eq!(traces(&db, "Hidden ledger"), 0, "{recorded:?}");
    assert_eq!(traces(&db, "secret.html"), 0, "{recorded:?}");
    assert_eq!(traces(&db, "ledger.example"), 0, "{recorded:?}");
    let reader = store::open_read_only(&db).unwrap();
    assert_eq!(cowork::capture::db::search_sessions(&reader, "ledger", 10).unwrap().len(), 0);
    let by_url = cowork::capture::db::search_sessions(&reader, "plan.html", 10).unwrap();
    assert!(by_url.iter().any(|s| s.session_id == plan.session_id), "URLs are full-text searchable: {by_url:?} {recorded:?}");
    drop(reader);
    for file in ["cowork.db", "cowork.db-wal"] {
        let bytes = std::fs::read(data.path().join(file)).unwrap_or_default();
        assert!(!bytes.windows(13).any(|w| w == b"Hidden ledger"), "denied page's title in {file}");
    }
}

#[test]
fn without_an_accessibility_bus_chromium_urls_come_from_titles_and_doctor_says_so() {
    if !require(XSession::available() && have_program("chromium") && have_program("dbus-daemon"), "Xvfb, chromium and dbus-daemon") {
        return;
    }
    let mut x = XSession::start();
    // A session bus with nothing activatable: no org.a11y.Bus, as on a desktop without at-spi2-core running.
    let home = temp_dir();
    let (_bus, dbus) = super::support::bare_session_bus(home.path());
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    write_settings(data.path(), &[("capture.streams_confirmed", "true"), ("privacy.denied_domains", "ledger.example")]);
    let port = serve_pages();
    let capture = capture_run(&x, data.path(), &dbus);
    // A page without a <title>: Chromium's window title is its address.
    let (window, _profile) = open_chromium(&mut x, &dbus, &format!("http://127.0.0.1:{port}/untitled.html"), "untitled.html");
    x.activate(&window);
    let untitled = || sessions(&db).into_iter().find(|s| s.title.contains("untitled.html"));
    assert!(eventually(Duration::from_secs(20), || untitled().is_some_and(|s| s.url.is_some())), "{:?}", sessions(&db));
    stop(capture);
    let page = untitled().unwrap();
    assert_eq!(page.url_source, Some(UrlSource::Title), "{page:?}");
    assert!(page.url.as_deref().is_some_and(|u| u.contains(&format!("127.0.0.1:{port}/untitled.html"))), "{page:?}");

    let checks = doctor_checks(&x, data.path(), &dbus);
    let atspi = checks.iter().find(|c| c["name"] == "at-spi").expect("doctor checks AT-SPI");
    assert_eq!(atspi["status"], "warn", "{atspi}");
    assert!(atspi["detail"].as_str().unwrap().contains("browser URLs come from window titles only"), "{atspi}");
    let a11y = checks.iter().find(|c| c["area"] == "worker" && c["name"] == "a11y").expect("doctor checks the a11y worker");
    assert_eq!(a11y["status"], "warn", "the a11y worker runs degraded: {a11y}");
}

#[test]
fn doctor_leaves_desktop_accessibility_off_when_the_user_switched_it_off() {
    if !require(XSession::available() && have_program("dbus-daemon"), "Xvfb and dbus-daemon") {
        return;
    }
    let mut x = XSession::start();
    let dbus = x.start_dbus();
    let data = temp_dir();
    write_settings(data.path(), &[("capture.desktop_accessibility", "false")]);
    assert_eq!(desktop_accessibility(&dbus), Some(false));
    // Watch the switch for the whole doctor run: its scratch workers act on this desktop.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (done, dbus) = (done.clone(), dbus.clone());
        std::thread::spawn(move || {
            let mut seen_on = false;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                seen_on |= desktop_accessibility(&dbus) == Some(true);
                std::thread::sleep(Duration::from_millis(20));
            }
            seen_on
        })
    };
    let checks = doctor_checks(&x, data.path(), &dbus);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(!watcher.join().unwrap(), "doctor switched desktop accessibility on against the setting");
    let a11y = checks.iter().find(|c| c["area"] == "worker" && c["name"] == "a11y").expect("a11y worker check");
    assert!(a11y["detail"].as_str().unwrap().contains("desktop accessibility is off"), "{a11y}");
    let atspi = checks.iter().find(|c| c["name"] == "at-spi").unwrap();
    assert_eq!(atspi["status"], "warn", "{atspi}");
}

const GTK_LOGIN: &str = r#"
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk
win = Gtk.Window(title="Sign in - Demo")
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
user = Gtk.Entry()
password = Gtk.Entry()
password.set_visibility(False)
box.add(user)
box.add(password)
win.add(box)
win.connect("destroy", Gtk.main_quit)
win.show_all()
user.grab_focus()
Gtk.main()
"#;

#[test]
fn nothing_typed_into_a_real_password_field_is_recorded() {
    let gtk = Command::new("/usr/bin/python3").args(["-c", "import gi; gi.require_version('Gtk', '3.0')"]).status().is_ok_and(|s| s.success());
    if !require(XSession::available() && gtk && have_program("dbus-daemon"), "Xvfb, python3-gi with GTK 3 and dbus-daemon") {
        return;
    }
    let mut x = XSession::start();
    let dbus = x.start_dbus();
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    write_settings(data.path(), &[("capture.streams_confirmed", "true")]);
    let capture = capture_run(&x, data.path(), &dbus);
    x.spawn("/usr/bin/python3", &["-c", GTK_LOGIN], Some(&dbus));
    let window = x.wait_window("^Sign in - Demo$", Duration::from_secs(20));
    x.activate(&window);
    assert!(
        eventually(Duration::from_secs(20), || sessions(&db).iter().any(|s| s.title == "Sign in - Demo")),
        "capture sees the login window"
    );
    // Give the a11y worker time to subscribe before the first focus change.
    std::thread::sleep(Duration::from_secs(2));
    x.xdotool(&["type", "--delay", "150", "alice"]);
    // A person's next key comes ~100 ms or more after the last; xdotool's would come at once.
    std::thread::sleep(Duration::from_millis(150));
    x.xdotool(&["key", "--delay", "150", "Tab"]);
    std::thread::sleep(Duration::from_millis(500));
    x.xdotool(&["type", "--delay", "150", "hunter2"]);
    x.xdotool(&["key", "--delay", "150", "Return"]);
    // Back to the user name field: typing is recorded again.
    x.xdotool(&["key", "--delay", "150", "shift+Tab"]);
    std::thread::sleep(Duration::from_millis(500));
    x.xdotool(&["type", "--delay", "150", "bob"]);
    x.xdotool(&["key", "--delay", "150", "Return"]);
    std::thread::sleep(Duration::from_millis(500));
    stop(capture);

    let reader = store::open_read_only(&db).unwrap();
    let typed: Vec<String> = cowork::capture::db::chunks_between(&reader, 0, i64::MAX).unwrap().into_iter().map(|c| c.text).collect();
    assert!(typed.iter().any(|t| t == "alice"), "{typed:?}");
    assert!(typed.iter().any(|t| t == "bob"), "typing after leaving the password field is recorded: {typed:?}");
    assert_eq!(traces(&db, "hunter2"), 0, "{typed:?}");
    assert!(typed.iter().all(|t| !t.contains("hunter") && !t.contains("2")), "{typed:?}");
}

fn afk_events(db: &Path) -> Vec<cowork::capture::heartbeat::AfkEvent> {
    store::open_read_only(db).and_then(|c| Ok(cowork::capture::db::afk_between(&c, 0, i64::MAX)?)).unwrap_or_default()
}

/// A second of silence as a WAV file, for mpv to loop.
fn silence_wav(path: &Path) {
    let rate = 8_000u32;
    let samples = rate as usize;
    let mut wav = Vec::new();
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + samples as u32 * 2).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes());
    wav.extend_from_slice(&rate.to_le_bytes());
    wav.extend_from_slice(&(rate * 2).to_le_bytes());
    wav.extend_from_slice(&2u16.to_le_bytes());
    wav.extend_from_slice(&16u16.to_le_bytes());
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&(samples as u32 * 2).to_le_bytes());
    wav.resize(wav.len() + samples * 2, 0);
    std::fs::write(path, wav).unwrap();
}

#[test]
fn playing_media_keeps_a_quiet_user_present_and_afk_is_back_dated_after_it_stops() {
    if !require(XSession::available() && have_program("mpv") && have_program("dbus-daemon"), "Xvfb, mpv with mpv-mpris and dbus-daemon") {
        return;
    }
    let mut x = XSession::start();
    let dbus = x.start_dbus();
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    // The shortest AFK threshold Settings allows.
    write_settings(data.path(), &[("capture.streams_confirmed", "true"), ("capture.afk_secs", "10")]);
    let wav = data.path().join("silence.wav");
    silence_wav(&wav);
    let terminal = x.open_xterm("film night");
    x.activate(&terminal);
    let mut mpv = x
        .command("mpv")
        .args(["--no-video", "--ao=null", "--loop-file=inf", "--really-quiet"])
        .arg(&wav)
        .env("DBUS_SESSION_BUS_ADDRESS", &dbus)
        .spawn()
        .unwrap();
    let capture = capture_run(&x, data.path(), &dbus);
    let started = Instant::now();
    // 14 s without input while mpv plays: present, held by media.
    std::thread::sleep(Duration::from_secs(14));
    let during = afk_events(&db);
    assert!(during.iter().all(|e| e.data != AfkStatus::Afk), "media playing is not AFK: {during:?}");
    assert!(
        during.iter().any(|e| e.data == AfkStatus::NotAfk { held_by: Some(HeldBy::Media) }),
        "the present stretch names media: {during:?}"
    );
    let _ = mpv.kill();
    let _ = mpv.wait();
    let stopped_at = cowork::ids::now_millis();
    assert!(
        eventually(Duration::from_secs(25), || afk_events(&db).iter().any(|e| e.data == AfkStatus::Afk)),
        "AFK once the media stopped: {:?}",
        afk_events(&db)
    );
    stop(capture);
    let events = afk_events(&db);
    let away = events.iter().find(|e| e.data == AfkStatus::Afk).unwrap();
    // Back-dated to the last moment the media held the user present (within one threshold of the stop).
    assert!(away.start_millis <= stopped_at + 1_000 && away.start_millis >= stopped_at - 11_000, "{away:?} vs stop at {stopped_at}");
    assert!(started.elapsed() < Duration::from_secs(60));
    // Heartbeats merge: a handful of rows, not one per poll.
    assert!(events.len() <= 4, "{events:?}");
}

/// Asks the window manager (EWMH, via wmctrl) to add or remove fullscreen.
fn fullscreen(x: &XSession, window: &str, change: &str) {
    let status = Command::new("wmctrl")
        .args(["-i", "-r", window, "-b", &format!("{change},fullscreen")])
        .env("DISPLAY", &x.display)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_fullscreen_window_keeps_a_quiet_user_present() {
    if !require(XSession::available() && have_program("wmctrl") && have_program("dbus-daemon"), "Xvfb, wmctrl and dbus-daemon") {
        return;
    }
    let mut x = XSession::start();
    let dbus = x.start_dbus();
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    write_settings(data.path(), &[("capture.streams_confirmed", "true"), ("capture.afk_secs", "10")]);
    let slides = x.open_xterm("slides - presentation");
    x.activate(&slides);
    fullscreen(&x, &slides, "add");
    let capture = capture_run(&x, data.path(), &dbus);
    std::thread::sleep(Duration::from_secs(14));
    let during = afk_events(&db);
    assert!(during.iter().all(|e| e.data != AfkStatus::Afk), "fullscreen is not AFK: {during:?}");
    assert!(during.iter().any(|e| e.data == AfkStatus::NotAfk { held_by: Some(HeldBy::Fullscreen) }), "{during:?}");
    fullscreen(&x, &slides, "remove");
    assert!(
        eventually(Duration::from_secs(25), || afk_events(&db).iter().any(|e| e.data == AfkStatus::Afk)),
        "AFK once the window left fullscreen: {:?}",
        afk_events(&db)
    );
    stop(capture);
    let windows = sessions(&db);
    assert!(windows.iter().any(|s| s.title == "slides - presentation" && s.end_reason == Some(cowork::records::SessionEnd::Afk)), "{windows:?}");
}

fn setting(db: &Path, key: &str) -> Option<String> {
    let conn = store::open_read_only(db).ok()?;
    store::all_settings(&conn).ok()?.into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Calls `method` on the tray item (StatusNotifierItem / dbusmenu) of process `pid`.
pub(super) fn call_tray<B>(dbus: &str, pid: u32, path: &str, interface: &str, method: &str, body: &B) -> zbus::Result<zbus::Message>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    let conn = zbus::blocking::connection::Builder::address(dbus)?.build()?;
    let name = format!("org.kde.StatusNotifierItem-{pid}-1");
    conn.call_method(Some(name.as_str()), path, Some(interface), method, body)
}

#[test]
fn the_tray_and_the_pause_hotkey_pause_and_resume_a_real_sidebar() {
    if !require(XSession::available() && have_program("dbus-daemon"), "Xvfb and dbus-daemon") {
        return;
    }
    let mut x = XSession::start();
    let dbus = x.start_dbus();
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    write_settings(data.path(), &[("capture.streams_confirmed", "true")]);
    let before = x.open_xterm("before the pause");
    let mut app = x
        .command(env!("CARGO_BIN_EXE_cowork"))
        .arg("--data-dir")
        .arg(data.path())
        .arg("--models-dir")
        .arg(super::support::models_dir())
        .env("DBUS_SESSION_BUS_ADDRESS", &dbus)
        .env("COWORK_LOG", "warn")
        .spawn()
        .unwrap();
    let pid = app.id();
    assert!(
        eventually(Duration::from_secs(30), || {
            x.activate(&before);
            sessions(&db).iter().any(|s| s.title == "before the pause")
        }),
        "the sidebar records before the pause"
    );
    // Middle-click on the tray icon: pause.
    assert!(
        eventually(Duration::from_secs(10), || {
            call_tray(&dbus, pid, "/StatusNotifierItem", "org.kde.StatusNotifierItem", "SecondaryActivate", &(0i32, 0i32)).is_ok()
        }),
        "the tray item is on the session bus"
    );
    assert!(eventually(Duration::from_secs(10), || setting(&db, "privacy.paused").as_deref() == Some("true")), "paused");
    let status = call_tray(&dbus, pid, "/StatusNotifierItem", "org.freedesktop.DBus.Properties", "Get", &("org.kde.StatusNotifierItem", "Status"))
        .unwrap()
        .body()
        .deserialize::<zbus::zvariant::OwnedValue>()
        .map(|v| String::try_from(v).unwrap())
        .unwrap();
    assert_eq!(status, "Passive", "the tray shows the pause");
    let hidden = x.open_xterm("while paused");
    x.activate(&hidden);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!sessions(&db).iter().any(|s| s.title == "while paused"), "nothing is recorded while paused");
    // The global pause hotkey resumes.
    let resumed_at = cowork::ids::now_millis();
    x.xdotool(&["key", "ctrl+alt+p"]);
    assert!(eventually(Duration::from_secs(10), || setting(&db, "privacy.paused").as_deref() == Some("false")), "resumed by the hotkey");
    let after = x.open_xterm("after the pause");
    assert!(
        eventually(Duration::from_secs(10), || {
            x.activate(&after);
            sessions(&db).iter().any(|s| s.title == "after the pause")
        }),
        "recording again after resume"
    );
    // The window focused during the pause is recorded only from the resume on.
    let paused_rows: Vec<_> = sessions(&db).into_iter().filter(|s| s.title == "while paused" && s.started_at_millis < resumed_at).collect();
    assert!(paused_rows.is_empty(), "{paused_rows:?}");
    // The tray menu's Quit closes the app gracefully.
    let quit = (1..10)
        .find(|id| {
            call_tray(&dbus, pid, "/MenuBar", "com.canonical.dbusmenu", "GetProperty", &(*id, "label"))
                .and_then(|m| m.body().deserialize::<zbus::zvariant::OwnedValue>())
                .is_ok_and(|v| String::try_from(v).is_ok_and(|l| l.contains("Quit")))
        })
        .expect("a Quit item in the tray menu");
    let clicked = zbus::zvariant::Value::from(0i32);
    call_tray(&dbus, pid, "/MenuBar", "com.canonical.dbusmenu", "Event", &(quit, "clicked", clicked, 0u32)).unwrap();
    let exited = eventually(Duration::from_secs(10), || app.try_wait().ok().flatten().is_some());
    if !exited {
        let _ = app.kill();
    }
    assert!(exited, "Quit from the tray closes cowork");
    assert!(app.wait().unwrap().success());
}
