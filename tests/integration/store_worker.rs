//! The store worker on a real SQLite file: batching, read-your-writes, WAL,
//! reload after restart, and a full database that loses nothing.

use std::time::Duration;

use cowork::events::AppEvent;
use cowork::records::{ActivitySession, ChatMessage, ChatThread, MessageStatus, Role, SessionEnd};
use cowork::runtime::{RestartPolicy, RuntimeEvent, WorkerName, WorkerState};
use cowork::store::{self, StoreCommand, StoreWorker};
use cowork::store::events::StoreEvent;
use cowork::workers::spawn_store;
use crossbeam_channel::bounded;

use super::support::{temp_dir, test_sink, wait_for};

fn session(session_id: i64, title: &str, start: i64, end: Option<i64>) -> ActivitySession {
    ActivitySession {
        session_id,
        app: "XTerm".into(),
        title: title.into(),
        pid: Some(7),
        window_id: 3,
        started_at_millis: start,
        ended_at_millis: end,
        end_reason: end.map(|_| SessionEnd::Switch),
        ..Default::default()
    }
}

fn flush(commands: &crossbeam_channel::Sender<StoreCommand>) {
    let (ack, done) = bounded(1);
    commands.send(StoreCommand::Flush(ack)).unwrap();
    done.recv_timeout(Duration::from_secs(10)).expect("flush acknowledged");
}

#[test]
fn writes_land_in_one_wal_file_and_survive_a_restart() {
    let dir = temp_dir();
    let db = dir.path().join("cowork.db");
    let (sink, events) = test_sink();
    let mut worker = spawn_store(db.clone(), sink.clone(), RestartPolicy::default()).unwrap();
    for i in 0..5_000 {
        worker.commands.send(cowork::capture::db::session_write(session(i, &format!("window {i}"), i * 10, Some(i * 10 + 5)))).unwrap();
    }
    let thread = ChatThread { thread_id: 1, title: "plans".into(), updated_at_millis: 1 };
    worker.commands.send(cowork::chat::thread_write(thread, 1)).unwrap();
    let message = ChatMessage {
        message_id: 2,
        thread_id: 1,
        role: Role::User,
        content: "book the dentist".into(),
        context: Some("Current window: XTerm".into()),
        status: MessageStatus::Done,
        created_at_millis: 2,
        ask_id: None, provider: None, cost_usd: None, citations: None, refusal: false,
    };
    worker.commands.send(cowork::chat::message_write(message.clone(), None)).unwrap();
    flush(&worker.commands);

    // A reader on its own read-only connection sees everything, FTS included.
    let reader = store::open_read_only(&db).unwrap();
    assert_eq!(cowork::capture::db::session_count(&reader).unwrap(), 5_000);
    assert_eq!(cowork::capture::db::search_sessions(&reader, "window 4999", 3).unwrap()[0].session_id, 4999);
    let mode: String = reader.pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    drop(reader);
    assert!(worker.shutdown(StoreCommand::Shutdown, Duration::from_secs(10)));

    // A new worker on the same file loads the thread back for the UI.
    let mut again = spawn_store(db, sink.clone(), RestartPolicy::default()).unwrap();
    again.commands.send(cowork::chat::load_messages(1, sink.narrow())).unwrap();
    let loaded = wait_for(&events, Duration::from_secs(10), |e| match e {
        AppEvent::Chat(cowork::chat::ChatEvent::MessagesLoaded { messages, .. }) => Some(messages.clone()),
        _ => None,
    })
    .unwrap();
    assert_eq!(loaded, vec![message]);
    assert!(again.shutdown(StoreCommand::Shutdown, Duration::from_secs(10)));
}

#[test]
fn a_full_database_keeps_writes_queued_and_reports_degraded_until_space_returns() {
    let dir = temp_dir();
    let (sink, events) = test_sink();
    let mut worker = StoreWorker::open(dir.path().join("cowork.db"), sink.runtime_only(), cowork::workers::store_hooks(None)).unwrap();
    // SQLite's own page limit stands in for a full disk: inserts fail with SQLITE_FULL.
    let pages: i64 = worker.connection().pragma_query_value(None, "page_count", |r| r.get(0)).unwrap();
    worker.connection().pragma_update(None, "max_page_count", pages).unwrap();
    for i in 0..2_000 {
        worker.handle(cowork::capture::db::session_write(session(i, &"long title ".repeat(20), i, Some(i + 1))));
    }
    assert!(!worker.commit_pending(), "commit must fail while the database is full");
    assert_eq!(worker.pending_len(), 2_000, "nothing is lost");
    let degraded = wait_for(&events, Duration::from_secs(1), |e| match e {
        AppEvent::Runtime(RuntimeEvent::Worker { worker: WorkerName::Store, state: WorkerState::Degraded(reason) }) => Some(reason.clone()),
        _ => None,
    })
    .expect("the UI hears about it");
    assert!(degraded.contains("full"), "{degraded}");
    worker.connection().pragma_update(None, "max_page_count", 1_000_000_000i64).unwrap();
    assert!(worker.commit_pending());
    assert_eq!(worker.pending_len(), 0);
    assert_eq!(cowork::capture::db::session_count(worker.connection()).unwrap(), 2_000);
}

#[test]
fn a_corrupt_database_file_is_a_clear_error_and_is_left_in_place() {
    let dir = temp_dir();
    let db = dir.path().join("cowork.db");
    std::fs::write(&db, b"this is not an SQLite database, but it is the user's file").unwrap();
    let (sink, _events) = test_sink();
    let err = StoreWorker::open(db.clone(), sink.runtime_only(), cowork::workers::store_hooks(None)).err().expect("must refuse");
    assert!(format!("{err:#}").contains("not a database"), "{err:#}");
    assert!(std::fs::read(&db).unwrap().starts_with(b"this is not"), "the file must not be overwritten");
}

#[test]
fn a_deleted_range_leaves_no_row_no_fts_entry_and_no_bytes_on_disk() {
    let dir = temp_dir();
    let db = dir.path().join("cowork.db");
    let (sink, events) = test_sink();
    let mut worker = spawn_store(db.clone(), sink.clone(), RestartPolicy::default()).unwrap();
    let now = cowork::ids::now_millis();
    let old = session(1, "kept from yesterday", now - 86_400_000, Some(now - 86_000_000));
    let secret = session(2, "zebra-secret-diagnosis", now - 600_000, Some(now - 300_000));
    // Open at deletion time: closing it later must not bring it back.
    let open = session(3, "zebra-open-window", now - 100_000, None);
    for s in [&old, &secret, &open] {
        worker.commands.send(cowork::capture::db::session_write(s.clone())).unwrap();
    }
    let thread = ChatThread { thread_id: 9, title: "zebra question".into(), updated_at_millis: now - 200_000 };
    worker.commands.send(cowork::chat::thread_write(thread, now - 200_000)).unwrap();
    let message = ChatMessage {
        message_id: 10,
        thread_id: 9,
        role: Role::User,
        content: "zebra-private-question".into(),
        context: None,
        status: MessageStatus::Done,
        created_at_millis: now - 200_000,
        ask_id: None, provider: None, cost_usd: None, citations: None, refusal: false,
    };
    worker.commands.send(cowork::chat::message_write(message, None)).unwrap();
    flush(&worker.commands);

    let (reply, outcome) = bounded(1);
    worker.commands.send(cowork::erase::delete_range_command(now - 3_600_000, now + 1, Some(reply), sink.narrow())).unwrap();
    let deleted = outcome.recv_timeout(Duration::from_secs(30)).unwrap().unwrap();
    assert_eq!((deleted.sessions, deleted.messages), (2, 1));
    assert!(wait_for(&events, Duration::from_secs(5), |e| matches!(e, AppEvent::Store(StoreEvent::RangeDeleted { .. })).then_some(())).is_some());
    let mut closed = open.clone();
    closed.ended_at_millis = Some(now + 5_000);
    worker.commands.send(cowork::capture::db::session_write(closed)).unwrap();
    flush(&worker.commands);
    assert!(worker.shutdown(StoreCommand::Shutdown, Duration::from_secs(10)));

    let reader = store::open_read_only(&db).unwrap();
    let titles: Vec<String> = cowork::capture::db::recent_sessions(&reader, 10).unwrap().into_iter().map(|s| s.title).collect();
    assert_eq!(titles, ["kept from yesterday"]);
    assert!(cowork::capture::db::search_sessions(&reader, "zebra", 10).unwrap().is_empty());
    assert!(cowork::chat::search_messages(&reader, "zebra", 10).unwrap().is_empty());
    drop(reader);
    let mut bytes = std::fs::read(&db).unwrap();
    bytes.extend(std::fs::read(dir.path().join("cowork.db-wal")).unwrap_or_default());
    assert!(!bytes.windows(5).any(|w| w == b"zebra"), "deleted text still on disk after VACUUM");
    // Kept rows are there (read above through the key), but not as plaintext.
    assert!(!bytes.windows(9).any(|w| w == b"yesterday"), "the database is encrypted");
}

#[test]
fn retention_removes_window_history_older_than_the_setting() {
    let dir = temp_dir();
    let (sink, _events) = test_sink();
    let mut worker = StoreWorker::open(dir.path().join("cowork.db"), sink.runtime_only(), cowork::workers::store_hooks(None)).unwrap();
    let now = cowork::ids::now_millis();
    let day = 86_400_000;
    worker.handle(cowork::capture::db::session_write(session(1, "ancient", now - 100 * day, Some(now - 100 * day + 1_000))));
    worker.handle(cowork::capture::db::session_write(session(2, "last month", now - 30 * day, Some(now - 30 * day + 1_000))));
    worker.handle(cowork::capture::db::session_write(session(3, "open now", now - 1_000, None)));
    assert_eq!(retention(&mut worker, now), 1, "default keeps 90 days");
    worker.handle(cowork::store::setting_write("retention.window_days".into(), "7".into()));
    assert_eq!(retention(&mut worker, now), 1);
    let titles: Vec<String> = cowork::capture::db::recent_sessions(worker.connection(), 10).unwrap().into_iter().map(|s| s.title).collect();
    assert_eq!(titles, ["open now"]);
    worker.handle(cowork::store::setting_write("retention.window_days".into(), "0".into()));
    worker.handle(cowork::capture::db::session_write(session(4, "old but kept", now - 400 * day, Some(now - 400 * day + 1))));
    assert_eq!(retention(&mut worker, now), 0, "0 keeps everything");
}

/// Retention as the store runs it, after what is queued is committed; how many rows went.
fn retention(worker: &mut StoreWorker, now_millis: i64) -> usize {
    worker.commit_pending();
    cowork::erase::enforce_retention(worker.connection(), now_millis).unwrap()
}

/// The descriptors this process holds on `path`, split by access mode: (read-write, read-only).
fn descriptors_on(path: &std::path::Path) -> (usize, usize) {
    let (mut writable, mut read_only) = (0, 0);
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if std::fs::read_link(entry.path()).ok().as_deref() != Some(path) {
            continue;
        }
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", entry.file_name().to_string_lossy())).unwrap_or_default();
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).and_then(|f| u32::from_str_radix(f.trim(), 8).ok()).unwrap_or(0);
        match flags & 0o3 {
            0 => read_only += 1,
            _ => writable += 1,
        }
    }
    (writable, read_only)
}

#[test]
fn the_sidebar_process_holds_one_writable_descriptor_on_the_database_however_many_workers_read_it() {
    let data = temp_dir();
    let paths = cowork::config::Paths { data_dir: data.path().to_owned(), models_dir: super::support::models_dir() };
    let (sink, _events) = test_sink();
    // Every worker of the sidebar but capture: automations, notify, apps, embed, search, the agent.
    let options = cowork::workers::WorkerOptions { capture: false, display: None, chat_model: None, policy: RestartPolicy::default(), require_consent: false, automations: true };
    let (workers, _, _) = cowork::workers::Workers::start(&paths, options, sink).unwrap();
    let db = paths.db_path().canonicalize().unwrap();
    // The readers open as their workers start: embed, search, automations, notify and apps at least.
    assert!(super::support::eventually(Duration::from_secs(20), || descriptors_on(&db).1 >= 5), "the readers did not open: {:?}", descriptors_on(&db));
    // Undo, a flow's run and an embedding batch write through it too (their tests say so); here: the count.
    assert_eq!(descriptors_on(&db).0, 1, "one writer (the store's), read-only connections for the rest");
    workers.shutdown(Duration::from_secs(10));
}
