//! Capture against real X11 windows: Xvfb + openbox + xterm, focus switched
//! with xdotool; the recorded sessions must match what the test did.

use std::time::{Duration, Instant};

use cowork::capture::{CaptureCommand, CaptureConfig, spawn_capture};
use cowork::events::AppEvent;
use cowork::ids::now_millis;
use cowork::records::SessionEnd;
use cowork::runtime::{RestartPolicy, RuntimeEvent, WorkerName, WorkerState};
use cowork::store::{self, StoreCommand};
use cowork::workers::spawn_store;

use super::support::{XSession, eventually, require, temp_dir, test_sink, wait_for};

const TOLERANCE_MILLIS: i64 = 300;

#[test]
fn focus_and_title_changes_become_sessions_with_accurate_durations() {
    if !require(XSession::available(), "Xvfb, openbox and xdotool") {
        return;
    }
    let mut x = XSession::start();
    let alpha = x.open_xterm("cowork alpha");
    let beta = x.open_xterm("cowork beta");
    let gamma = x.open_xterm("cowork gamma");

    let dir = temp_dir();
    let db = dir.path().join("cowork.db");
    let (sink, events) = test_sink();
    let mut store = spawn_store(db.clone(), sink.clone(), RestartPolicy::default()).unwrap();
    let config = CaptureConfig { display: Some(x.display.clone()), afk_secs: 3600, rules: Default::default(), backend: cowork::desktop::backend::Backend::X11 };
    let mut capture = spawn_capture(config, store.commands.clone(), sink.narrow(), RestartPolicy::default()).unwrap();
    let state = wait_for(&events, Duration::from_secs(10), |e| match e {
        AppEvent::Runtime(RuntimeEvent::Worker { worker: WorkerName::Capture, state }) if !matches!(state, WorkerState::Starting) => Some(state.clone()),
        _ => None,
    })
    .unwrap();
    // Input state comes from $DISPLAY, which is not this private server: only AFK may be missing.
    assert!(
        matches!(&state, WorkerState::Running) || matches!(&state, WorkerState::Degraded(r) if r.contains("AFK")),
        "{state:?}"
    );

    // Let capture record the window that is focused at start, well before the script begins.
    assert!(eventually(Duration::from_secs(5), || store::open_read_only(&db)
        .ok()
        .and_then(|c| cowork::capture::db::recent_sessions(&c, 1).ok())
        .is_some_and(|s| !s.is_empty())));
    std::thread::sleep(Duration::from_millis(2 * TOLERANCE_MILLIS as u64));

    // The script: (window, how long it stays focused).
    let script = [(&alpha, 800u64), (&beta, 1_200), (&gamma, 600), (&alpha, 700)];
    let mut switches = Vec::new();
    for (window, stay_millis) in script {
        x.activate(window);
        switches.push(now_millis());
        std::thread::sleep(Duration::from_millis(stay_millis));
    }
    // A title change in the focused window starts a new session too.
    x.xdotool(&["set_window", "--name", "cowork alpha renamed", &alpha]);
    let renamed_at = now_millis();
    std::thread::sleep(Duration::from_millis(500));
    x.activate(&beta);
    let last_switch = now_millis();
    let last_switch_at = Instant::now();

    // The session that just finished is in the database within 1 s.
    let reader_path = db.clone();
    assert!(
        eventually(Duration::from_secs(1), || {
            store::open_read_only(&reader_path)
                .ok()
                .and_then(|c| cowork::capture::db::recent_sessions(&c, 20).ok())
                .is_some_and(|s| s.iter().any(|s| s.title == "cowork alpha renamed" && s.ended_at_millis.is_some()))
        }),
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
    let titles: Vec<&str> = sessions.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(
        titles,
        ["cowork alpha", "cowork beta", "cowork gamma", "cowork alpha", "cowork alpha renamed", "cowork beta"],
        "sessions in order"
    );
    let mut expected_bounds: Vec<(i64, i64)> = switches.windows(2).map(|w| (w[0], w[1])).collect();
    expected_bounds.push((switches[3], renamed_at));
    expected_bounds.push((renamed_at, last_switch));
    for (session, (start, end)) in sessions.iter().zip(&expected_bounds) {
        assert_eq!(session.app, "XTerm");
        assert!(session.pid.is_some(), "xterm publishes _NET_WM_PID");
        let recorded = session.ended_at_millis.unwrap() - session.started_at_millis;
        let actual = end - start;
        assert!(
            (recorded - actual).abs() <= TOLERANCE_MILLIS,
            "{}: recorded {recorded} ms, test did {actual} ms",
            session.title
        );
        assert!((session.started_at_millis - start).abs() <= TOLERANCE_MILLIS, "{}: start off", session.title);
    }
    // The open session was flushed at shutdown.
    let last = sessions.last().unwrap();
    assert_eq!(last.end_reason, Some(SessionEnd::Shutdown));
    assert!(cowork::capture::db::search_sessions(&reader, "renamed", 5).unwrap().len() == 1, "titles are full-text searchable");
    eprintln!("finished session visible in the database after {visible_after:?}");
    assert!(store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10)));
}

#[test]
fn without_a_display_capture_is_degraded_with_the_reason() {
    let (sink, events) = test_sink();
    let (store_tx, _rx) = crossbeam_channel::bounded(4);
    let config = CaptureConfig { display: Some(":4711".into()), afk_secs: 180, rules: Default::default(), backend: cowork::desktop::backend::Backend::X11 };
    let mut capture = spawn_capture(config, store_tx, sink.narrow(), RestartPolicy::default()).unwrap();
    let reason = wait_for(&events, Duration::from_secs(10), |e| match e {
        AppEvent::Runtime(RuntimeEvent::Worker { worker: WorkerName::Capture, state: WorkerState::Degraded(reason) }) => Some(reason.clone()),
        _ => None,
    })
    .expect("degraded");
    assert!(reason.contains("no X display") && reason.contains(":4711"), "{reason}");
    assert!(capture.shutdown(CaptureCommand::Shutdown, Duration::from_secs(5)), "still answers commands");
}

/// Runs capture over `windows` (activated in turn) with `rules`, and returns
/// the database afterwards.
fn capture_with_rules(rules: cowork::capture::firewall::Rules, windows: &[(&str, &str)]) -> (tempfile::TempDir, Vec<String>) {
    let mut x = XSession::start();
    let ids: Vec<String> = windows.iter().map(|(title, class)| x.open_xterm_as(title, class)).collect();
    let dir = temp_dir();
    let db = dir.path().join("cowork.db");
    let (sink, _events) = test_sink();
    let mut store = spawn_store(db.clone(), sink.clone(), RestartPolicy::default()).unwrap();
    let config = CaptureConfig { display: Some(x.display.clone()), afk_secs: 3600, rules, backend: cowork::desktop::backend::Backend::X11 };
    let mut capture = spawn_capture(config, store.commands.clone(), sink.narrow(), RestartPolicy::default()).unwrap();
    for id in &ids {
        x.activate(id);
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(capture.shutdown(CaptureCommand::Shutdown, Duration::from_secs(10)));
    assert!(store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10)));
    let reader = store::open_read_only(&db).unwrap();
    let titles = cowork::capture::db::recent_sessions(&reader, 100).unwrap().into_iter().map(|s| s.title).collect();
    (dir, titles)
}

fn fts_hits(db: &std::path::Path, word: &str) -> usize {
    let reader = store::open_read_only(db).unwrap();
    cowork::capture::db::search_sessions(&reader, word, 10).unwrap().len()
}

#[test]
fn the_firewall_keeps_excluded_windows_out_of_every_table_and_fts() {
    if !require(XSession::available(), "Xvfb, openbox and xdotool") {
        return;
    }
    let rules = cowork::capture::firewall::Rules {
        denied_titles: vec![regex::Regex::new("(?i)salary").unwrap()],
        ..Default::default()
    };
    let windows = [
        ("Passwords.kdbx - KeePassXC", "KeePassXC"),
        ("Salary review 2026.ods", "XTerm"),
        ("New Tab - Mozilla Firefox Private Browsing", "firefox"),
        ("meeting notes", "XTerm"),
    ];
    let (dir, titles) = capture_with_rules(rules, &windows);
    assert!(titles.iter().all(|t| t == "meeting notes"), "only the allowed window was recorded: {titles:?}");
    assert!(!titles.is_empty());
    let db = dir.path().join("cowork.db");
    for word in ["Passwords", "KeePassXC", "Salary", "Private"] {
        assert_eq!(fts_hits(&db, word), 0, "{word} leaked into FTS");
    }
    let raw = std::fs::read(&db).unwrap();
    let wal = std::fs::read(dir.path().join("cowork.db-wal")).unwrap_or_default();
    for needle in [&b"Passwords.kdbx"[..], b"Salary review", b"Private Browsing"] {
        assert!(!raw.windows(needle.len()).any(|w| w == needle), "excluded title bytes in the database file");
        assert!(!wal.windows(needle.len()).any(|w| w == needle), "excluded title bytes in the WAL");
    }
}

#[test]
fn pause_and_quiet_hours_record_nothing() {
    if !require(XSession::available(), "Xvfb, openbox and xdotool") {
        return;
    }
    let paused = cowork::capture::firewall::Rules { paused: true, ..Default::default() };
    let (_dir, titles) = capture_with_rules(paused, &[("paused work", "XTerm")]);
    assert!(titles.is_empty(), "{titles:?}");
    let quiet = cowork::capture::firewall::Rules { quiet_hours: vec![(0, 24 * 60)], ..Default::default() };
    let (_dir, titles) = capture_with_rules(quiet, &[("late work", "XTerm")]);
    assert!(titles.is_empty(), "{titles:?}");
    // An allow list: only the listed app is recorded.
    let allow = cowork::capture::firewall::Rules { allowed_apps: vec!["xterm".into()], ..Default::default() };
    let (dir, titles) = capture_with_rules(allow, &[("draft letter", "Gedit"), ("build log", "XTerm")]);
    assert!(!titles.is_empty() && titles.iter().all(|t| t == "build log"), "{titles:?}");
    assert_eq!(fts_hits(&dir.path().join("cowork.db"), "letter"), 0);
}

/// Runs `cowork capture run` on the test display (device_query and arboard read
/// `$DISPLAY`, so capture is its own process there) and waits until it records
/// `window` (titled `title`) as the open session, focusing it as needed:
/// openbox may hand focus to a just-mapped window late.
pub(super) fn capture_run_on(x: &XSession, data: &std::path::Path, window: &str, title: &str) -> std::process::Child {
    let db = data.join("cowork.db");
    let capture = x
        .command(env!("CARGO_BIN_EXE_cowork"))
        .args(["capture", "run", "--data-dir"])
        .arg(data)
        .env("COWORK_LOG", "warn")
        .spawn()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(20), || {
            x.activate(window);
            store::open_read_only(&db)
                .ok()
                .and_then(|c| cowork::capture::db::recent_sessions(&c, 1).ok())
                .is_some_and(|s| s.first().is_some_and(|s| s.title == title && s.ended_at_millis.is_none()))
        }),
        "capture is watching {title}"
    );
    std::thread::sleep(Duration::from_millis(300));
    x.activate(window);
    capture
}

#[test]
fn typing_in_a_real_window_becomes_keystroke_chunks_with_their_window() {
    if !require(XSession::available(), "Xvfb, openbox and xdotool") {
        return;
    }
    let mut x = XSession::start();
    let terminal = x.open_xterm("notes - xterm");
    let other = x.open_xterm("other window");
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    let mut capture = capture_run_on(&x, data.path(), &terminal, "notes - xterm");
    // Real key events through the X server, slow enough for a 100 Hz poll to see each key.
    x.xdotool(&["type", "--delay", "200", "Hello World"]);
    x.xdotool(&["key", "--delay", "120", "Return"]);
    x.xdotool(&["type", "--delay", "120", "draft"]);
    // A shortcut held as a person holds it (xdotool's `key` releases within microseconds).
    x.xdotool(&["keydown", "ctrl+c"]);
    std::thread::sleep(Duration::from_millis(100));
    x.xdotool(&["keyup", "ctrl+c"]);
    std::thread::sleep(Duration::from_millis(200));
    x.activate(&other);
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(capture.id() as i32, libc::SIGTERM) };
    assert!(capture.wait().unwrap().success());

    let reader = store::open_read_only(&db).unwrap();
    let chunks = cowork::capture::db::chunks_between(&reader, 0, i64::MAX).unwrap();
    let summary: Vec<(&str, &str, &str)> =
        chunks.iter().map(|c| (c.text.as_str(), c.title.as_str(), c.flush_reason.as_str())).collect();
    assert_eq!(
        summary,
        [("Hello World", "notes - xterm", "enter"), ("draft", "notes - xterm", "window_change")],
        "{chunks:?}"
    );
    assert_eq!(chunks[1].shortcuts, ["Ctrl+C"]);
    assert_eq!(chunks[0].app, "XTerm");
    assert_eq!(cowork::capture::db::search_chunks(&reader, "hello", 5).unwrap().len(), 1, "typed text is full-text searchable");
}

#[test]
fn clipboard_changes_are_recorded_with_their_source_app_once_each() {
    if !require(XSession::available() && super::support::have_program("xclip"), "Xvfb and xclip") {
        return;
    }
    let mut x = XSession::start();
    let editor = x.open_xterm_as("draft.txt - Editor", "Gedit");
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    let mut capture = capture_run_on(&x, data.path(), &editor, "draft.txt - Editor");
    // A real selection owner (xclip) takes CLIPBOARD each time.
    let copy = |text: &str| {
        let mut child = std::process::Command::new("xclip")
            .args(["-selection", "clipboard", "-loops", "1"])
            .env("DISPLAY", &x.display)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(700));
        let _ = child.kill();
        let _ = child.wait();
    };
    copy("meeting moved to Thursday");
    copy("meeting moved to Thursday");
    copy("invoice 2291");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(capture.id() as i32, libc::SIGTERM) };
    assert!(capture.wait().unwrap().success());
    let reader = store::open_read_only(&db).unwrap();
    let clips = cowork::capture::db::clips_between(&reader, 0, i64::MAX).unwrap();
    let summary: Vec<(&str, &str, &str)> = clips.iter().map(|c| (c.text.as_str(), c.app.as_str(), c.trigger.as_str())).collect();
    assert_eq!(
        summary,
        [("meeting moved to Thursday", "Gedit", "owner_change"), ("invoice 2291", "Gedit", "owner_change")],
        "consecutive duplicates are dropped"
    );
}
