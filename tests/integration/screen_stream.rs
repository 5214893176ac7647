//! The screen-text stream (issue 57) end to end, with `cowork capture run`
//! on a real X session (Xvfb, openbox, its own D-Bus and accessibility bus):
//! a GTK window's text comes from its accessibility tree, exactly; an xterm,
//! which exposes none, is read by OCR; new output in it is read again; each
//! row belongs to the window's session and is found by search. A window the
//! rules exclude and a window whose password field has focus leave nothing.
//! In process, the worker itself refuses excluded, paused and quiet-hours
//! windows without a pixel or an accessible read (counted).

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use cowork::capture::screen_texts::{Method, ScreenRow, seen_between};
use cowork::store;

use super::support::{XSession, eventually, have_program, require, temp_dir};

const GTK_NOTES: &str = r#"
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk
win = Gtk.Window(title="Atlas checklist - Notes")
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
box.add(Gtk.Label(label="Atlas migration checklist"))
view = Gtk.TextView()
view.get_buffer().set_text("Rotate the staging keys before Thursday.\nAsk Priya about the ledger export.\nInvoice 5512 goes to Northwind on Monday.")
box.add(view)
win.add(box)
win.set_default_size(520, 240)
win.connect("destroy", Gtk.main_quit)
win.show_all()
Gtk.main()
"#;

const GTK_PASSWORD: &str = r#"
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk
win = Gtk.Window(title="Unlock vault - Demo")
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
box.add(Gtk.Label(label="Recovery phrase hint: Zephyr lantern orchard 7741"))
password = Gtk.Entry()
password.set_visibility(False)
box.add(password)
win.add(box)
win.connect("destroy", Gtk.main_quit)
win.show_all()
password.grab_focus()
Gtk.main()
"#;

fn write_settings(data: &Path, pairs: &[(&str, &str)]) {
    let conn = store::open_writer(&data.join("cowork.db")).unwrap();
    for (key, value) in pairs {
        store::set_setting(&conn, key, value, 0).unwrap();
    }
}

fn rows(db: &Path) -> Vec<ScreenRow> {
    store::open_read_only(db).and_then(|c| Ok(seen_between(&c, 0, i64::MAX, 1_000)?)).unwrap_or_default()
}

fn found(db: &Path, query: &str) -> Vec<cowork::memory::search::Hit> {
    let filters = cowork::memory::search::Filters { streams: vec![cowork::memory::search::Stream::Screen], ..Default::default() };
    store::open_read_only(db).and_then(|c| Ok(cowork::memory::search::search(&c, query, &filters, 10)?)).unwrap_or_default()
}

/// An xterm printing `text` (then, after `later_secs`, `later`) in DejaVu Sans Mono 11.
fn terminal(x: &mut XSession, dir: &Path, title: &str, text: &str, later: Option<(u32, &str)>) -> String {
    let file = dir.join(format!("{}.txt", title.replace(' ', "-")));
    std::fs::write(&file, text).unwrap();
    let mut script = format!("cat '{}'", file.display());
    if let Some((secs, line)) = later {
        script.push_str(&format!("; sleep {secs}; echo; echo '{line}'"));
    }
    script.push_str("; sleep 600");
    x.spawn("xterm", &["-T", title, "-fa", "DejaVu Sans Mono", "-fs", "11", "-geometry", "64x8", "-e", "sh", "-c", &script], None);
    x.wait_window(&format!("^{title}$"), Duration::from_secs(10))
}

fn stop(mut child: Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

#[test]
fn the_screen_stream_keeps_tree_text_exactly_reads_the_rest_by_ocr_and_leaves_excluded_and_password_windows_unread() {
    let gtk = Command::new("/usr/bin/python3").args(["-c", "import gi; gi.require_version('Gtk', '3.0')"]).status().is_ok_and(|s| s.success());
    if !require(XSession::available() && gtk && have_program("dbus-daemon") && have_program("xterm"), "Xvfb, xterm, python3-gi with GTK 3 and dbus-daemon") {
        return;
    }
    if !require(cowork::ocr::status().is_ok(), "Tesseract (libtesseract5 and tesseract-ocr-eng)") {
        return;
    }
    let mut x = XSession::start();
    let dbus = x.start_dbus();
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    write_settings(
        data.path(),
        &[
            ("capture.streams_confirmed", "true"),
            ("capture.screen.enabled", "true"),
            ("capture.screen.consented", "true"),
            ("privacy.denied_titles", "(?i)private notes"),
        ],
    );
    let dir = temp_dir();
    let private = terminal(&mut x, dir.path(), "Private notes", "SECRET-PIN 90210 Lighthouse\nbank login: lighthouse-42", None);
    x.spawn("/usr/bin/python3", &["-c", GTK_NOTES], Some(&dbus));
    let notes = x.wait_window("^Atlas checklist - Notes$", Duration::from_secs(20));
    x.spawn("/usr/bin/python3", &["-c", GTK_PASSWORD], Some(&dbus));
    let vault = x.wait_window("^Unlock vault - Demo$", Duration::from_secs(20));
    let capture = x
        .command(env!("CARGO_BIN_EXE_cowork"))
        .args(["capture", "run", "--data-dir"])
        .arg(data.path())
        .env("DBUS_SESSION_BUS_ADDRESS", &dbus)
        .env("COWORK_LOG", std::env::var("COWORK_TEST_CAPTURE_LOG").unwrap_or_else(|_| "warn".into()))
        .spawn()
        .unwrap();

    // The GTK window: its tree holds the text, taken as it is.
    x.activate(&notes);
    assert!(
        eventually(Duration::from_secs(20), || rows(&db).iter().any(|r| r.title == "Atlas checklist - Notes")),
        "the GTK window's text was not kept: {:?}",
        rows(&db)
    );
    let gtk_row = rows(&db).into_iter().find(|r| r.title == "Atlas checklist - Notes").unwrap();
    assert_eq!(gtk_row.method, Method::Accessibility, "{gtk_row:?}");
    for line in ["Atlas migration checklist", "Rotate the staging keys before Thursday.\nAsk Priya about the ledger export.\nInvoice 5512 goes to Northwind on Monday."] {
        assert!(gtk_row.text.contains(line), "the tree's text is exact: {:?}", gtk_row.text);
    }

    // `cowork ocr --accessible` reads the same tree (what the measurements score), and refuses the password window.
    let tree = x.command(env!("CARGO_BIN_EXE_cowork")).args(["--data-dir"]).arg(data.path()).args(["ocr", "--window", &notes, "--accessible", "--json"]).env("DBUS_SESSION_BUS_ADDRESS", &dbus).output().unwrap();
    let said: serde_json::Value = serde_json::from_slice(&tree.stdout).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&tree.stderr)));
    assert_eq!(said["method"], "accessibility");
    assert!(said["text"].as_str().unwrap().contains("Invoice 5512 goes to Northwind on Monday."), "{said}");
    x.activate(&vault);
    std::thread::sleep(Duration::from_millis(500));
    let refused = x.command(env!("CARGO_BIN_EXE_cowork")).args(["--data-dir"]).arg(data.path()).args(["ocr", "--window", &vault, "--accessible"]).env("DBUS_SESSION_BUS_ADDRESS", &dbus).output().unwrap();
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("password field"), "{}", String::from_utf8_lossy(&refused.stderr));

    // The excluded window and the focused password field: nothing kept, for long enough to have been read.
    x.activate(&notes);
    std::thread::sleep(Duration::from_millis(500));
    x.activate(&private);
    std::thread::sleep(Duration::from_secs(4));
    x.activate(&vault);
    std::thread::sleep(Duration::from_secs(4));

    // An xterm exposes no tree: OCR, timed from focus to searchable.
    let later = "Rollback plan approved by Marguerite";
    let xterm = terminal(&mut x, dir.path(), "deploy log", "Ticket ENG-4471 assigned to Dana Whitfield\nDeploy window closes Friday at 17:30", Some((6, later)));
    let focused_at = Instant::now();
    x.activate(&xterm);
    assert!(eventually(Duration::from_secs(20), || !found(&db, "Whitfield").is_empty()), "the xterm's text was not found: {:?}", rows(&db));
    let searchable = focused_at.elapsed();
    eprintln!("focus to searchable (OCR, debug build): {searchable:?}");
    assert!(searchable < Duration::from_secs(6), "{searchable:?}");
    let ocr_row = rows(&db).into_iter().find(|r| r.title == "deploy log").unwrap();
    assert_eq!(ocr_row.method, Method::Ocr);
    assert!(ocr_row.confidence >= 60, "{ocr_row:?}");
    // New output in the same window is read again.
    assert!(
        eventually(Duration::from_secs(25), || rows(&db).iter().any(|r| r.title == "deploy log" && r.text.contains("Marguerite"))),
        "the new line was not read: {:?}",
        rows(&db).iter().filter(|r| r.title == "deploy log").map(|r| &r.text).collect::<Vec<_>>()
    );
    // In the same session only what is new is kept: the new line, not the window again.
    let again = rows(&db).into_iter().find(|r| r.title == "deploy log" && r.text.contains("Marguerite")).unwrap();
    assert!(!again.text.contains("Whitfield"), "the window's old lines are not kept twice: {:?}", again.text);
    let kept = rows(&db).iter().filter(|r| r.title == "deploy log").count();
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(rows(&db).iter().filter(|r| r.title == "deploy log").count(), kept, "an unchanged window is not kept again");
    stop(capture);

    let all = rows(&db);
    for (word, why) in [("90210", "the excluded window"), ("Lighthouse", "the excluded window"), ("Zephyr", "the window whose password field had focus"), ("7741", "the window whose password field had focus")] {
        assert!(all.iter().all(|r| !r.text.contains(word)), "{why} was read: {all:?}");
        assert!(found(&db, word).is_empty(), "{why} is searchable");
    }
    assert!(all.iter().all(|r| r.title != "Private notes" && r.title != "Unlock vault - Demo"), "{all:?}");

    // Each row is its window session's, and search opens that session.
    let conn = store::open_read_only(&db).unwrap();
    let sessions = cowork::capture::db::sessions_between(&conn, 0, i64::MAX).unwrap();
    for row in [&gtk_row, &ocr_row] {
        let session = sessions.iter().find(|s| Some(s.session_id) == row.session_id).unwrap_or_else(|| panic!("no session for {row:?}"));
        assert_eq!(session.title, row.title);
    }
    let hit = found(&db, "Northwind").into_iter().next().expect("search finds the tree's text");
    assert_eq!(hit.open_id, gtk_row.session_id);
    assert_eq!(hit.title, "Atlas checklist - Notes");
}
