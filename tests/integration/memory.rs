//! Memory end to end with the real MiniLM model: rows written through the
//! store become findable by meaning within seconds, deletions are forgotten
//! by meaning too, and a kill -9 mid-job resumes from the last checkpoint.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cowork::events::AppEvent;
use cowork::memory::events::MemoryEvent;
use cowork::memory::search::{Filters, Hit, Stream};
use cowork::memory::search_worker::SearchCommand;
use cowork::records::{ActivitySession, ChatMessage, ChatThread, ClipTrigger, ClipboardEvent, FlushReason, KeystrokeChunk, MessageStatus, Role};

use super::support::{models_dir, require, temp_dir};

pub fn have_minilm() -> bool {
    require(cowork::memory::embed::model_dir(&models_dir()).join("model.safetensors").is_file(), "the MiniLM embedding model")
}

fn typed(id: i64, app: &str, title: &str, at: i64, text: &str) -> KeystrokeChunk {
    KeystrokeChunk {
        chunk_id: id,
        app: app.into(),
        title: title.into(),
        pid: None,
        started_at_millis: at,
        ended_at_millis: at + 2_000,
        text: text.into(),
        shortcuts: vec![],
        flush_reason: FlushReason::Enter,
    }
}

fn window(id: i64, app: &str, title: &str, at: i64) -> ActivitySession {
    ActivitySession { session_id: id, app: app.into(), title: title.into(), window_id: 7, started_at_millis: at, ended_at_millis: Some(at + 60_000), ..Default::default() }
}

/// Asks the search worker until `accept` likes the hits or `timeout` passes.
fn search_until(
    workers: &cowork::workers::Workers,
    events: &crossbeam_channel::Receiver<AppEvent>,
    query: &str,
    timeout: Duration,
    accept: impl Fn(&[Hit]) -> bool,
) -> (Vec<Hit>, Option<String>) {
    let deadline = Instant::now() + timeout;
    let mut last = (Vec::new(), None);
    while Instant::now() < deadline {
        let generation = cowork::ids::next_id() as u64;
        workers.search_latest.store(generation, std::sync::atomic::Ordering::Relaxed);
        workers.search.commands.send(SearchCommand::Query { generation, query: query.into(), filters: Filters::default() }).unwrap();
        if let Some(found) = super::support::wait_for(events, Duration::from_secs(10), |e| match e {
            AppEvent::Memory(MemoryEvent::SearchResults { generation: g, hits, keyword_only, .. }) if *g == generation => Some((hits.clone(), keyword_only.clone())),
            _ => None,
        }) {
            if accept(&found.0) {
                return found;
            }
            last = found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    last
}

#[test]
fn captured_text_is_found_by_meaning_within_seconds_and_deleted_text_never_again() {
    if !have_minilm() {
        return;
    }
    let data = temp_dir();
    let paths = cowork::config::Paths::resolve(Some(data.path().to_owned()), Some(models_dir())).unwrap();
    let (workers, events) = super::support::start_workers(&paths);
    let now = cowork::ids::now_millis();
    let hour = 3_600_000;
    let store = &workers.store.commands;
    store.send(cowork::capture::db::session_write(window(1, "chromium", "Booking.com: Lisbon to Berlin, 3 nights, Hotel Adlon", now - 5 * hour))).unwrap();
    store.send(cowork::capture::db::session_write(window(2, "code", "Cargo.toml - cowork - Visual Studio Code", now - 4 * hour))).unwrap();
    store.send(cowork::capture::db::chunk_write(typed(3, "gedit", "todo.txt", now - 3 * hour, "water the tomato plants and repot the basil seedlings"))).unwrap();
    store
        .send(cowork::capture::db::clip_write(ClipboardEvent {
            clip_id: 4,
            app: "libreoffice".into(),
            title: "Q3 report.odt".into(),
            pid: None,
            at_millis: now - 2 * hour,
            text: "Revenue rose 12 percent year on year, driven by subscriptions in Europe".into(),
            truncated: false,
            trigger: ClipTrigger::Shortcut,
        }))
        .unwrap();
    store.send(cowork::chat::thread_write(ChatThread { thread_id: 5, title: "Diet".into(), updated_at_millis: now - hour }, now - hour)).unwrap();
    store
        .send(cowork::chat::message_write(ChatMessage {
                message_id: 6,
                thread_id: 5,
                role: Role::User,
                content: "I cannot eat peanuts, I am allergic to them".into(),
                context: None,
                status: MessageStatus::Done,
                created_at_millis: now - hour,
                ask_id: None,
                provider: None,
                cost_usd: None,
                citations: None,
                refusal: false,
            }, None))
        .unwrap();
    assert!(workers.flush_store(Duration::from_secs(5)));

    // Questions that share no word with what they should find.
    // Each opens its session (typed and copied text: the session it happened in) or thread.
    for (query, stream, id, opens) in [
        ("trip to Germany and where I stay", Stream::Window, 1, 1),
        ("gardening chores", Stream::Typing, 3, 2),
        ("company earnings growth", Stream::Clipboard, 4, 2),
        ("food intolerance", Stream::Chat, 6, 5),
        // Found by its words too (the keyword half says where it opens as well).
        ("tomato", Stream::Typing, 3, 2),
    ] {
        let (hits, keyword_only) = search_until(&workers, &events, query, Duration::from_secs(60), |hits| {
            hits.first().is_some_and(|h| h.stream == stream && h.id == id)
        });
        assert_eq!(keyword_only, None, "the vector half ran");
        assert!(hits.first().is_some_and(|h| h.stream == stream && h.id == id), "{query:?} → {hits:?}");
        assert_eq!(hits[0].open_id, Some(opens), "{query:?} opens {:?}", hits[0]);
    }

    // A new row, with the model warm: searchable by meaning within 5 s of its commit.
    store.send(cowork::capture::db::session_write(window(7, "evince", "Mortgage offer from Nordbank - fixed rate 3.1%", now - 60_000))).unwrap();
    assert!(workers.flush_store(Duration::from_secs(5)));
    let committed = Instant::now();
    let (hits, _) = search_until(&workers, &events, "home loan interest", Duration::from_secs(5), |hits| hits.iter().any(|h| h.id == 7));
    let took = committed.elapsed();
    assert!(hits.iter().any(|h| h.id == 7), "not searchable by meaning within 5 s: {hits:?}");
    eprintln!("capture row → searchable by meaning in {} ms", took.as_millis());

    // Delete the trip (privacy: delete a range): never found again, by meaning or in the index files.
    let (reply, deleted) = crossbeam_channel::bounded(1);
    store.send(cowork::erase::delete_range_command(now - 5 * hour - 1, now - 5 * hour + 1, Some(reply), cowork::runtime::EventSink::ignored())).unwrap();
    let deleted = deleted.recv_timeout(Duration::from_secs(30)).unwrap().unwrap();
    assert_eq!(deleted.sessions, 1);
    let (hits, _) = search_until(&workers, &events, "trip to Germany and where I stay", Duration::from_secs(3), |hits| !hits.iter().any(|h| h.id == 1));
    assert!(!hits.iter().any(|h| h.stream == Stream::Window && h.id == 1), "{hits:?}");
    // The deletion reaches the index and its file at once (no waiting for a periodic save).
    let conn = cowork::store::open_read_only(&paths.db_path()).unwrap();
    let db_generation = || cowork::memory::jobs::generation(&conn, cowork::memory::Namespace::Activity).unwrap();
    let file_generation = || {
        std::fs::read(data.path().join("vectors/activity.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["generation"].as_u64())
    };
    assert!(
        super::support::eventually(Duration::from_secs(10), || file_generation() == Some(db_generation())),
        "index file at {:?}, database at {}",
        file_generation(),
        db_generation()
    );
    workers.shutdown(Duration::from_secs(10));

    // The index files hold no vector near the deleted text any more.
    let model = cowork::memory::embed::Embedder::load(&cowork::memory::embed::model_dir(&models_dir())).unwrap();
    let vector = model.embed(&["Window in chromium: Booking.com: Lisbon to Berlin, 3 nights, Hotel Adlon"]).unwrap().pop().unwrap();
    let (mut indexes, opened) = cowork::memory::index::IndexSet::open(&cowork::memory::index::index_dir(data.path()), &conn).unwrap();
    assert!(opened.iter().all(|(_, o)| *o == cowork::memory::index::Opened::Loaded), "saved indexes are current: {opened:?}");
    let nearest = indexes.search(cowork::memory::Namespace::Activity, &vector, 1).unwrap();
    assert!(nearest.first().is_none_or(|(_, score)| *score < 0.8), "the deleted vector is still in the index: {nearest:?}");
    let before_delete = model.embed(&["Window in code: Cargo.toml - cowork - Visual Studio Code"]).unwrap().pop().unwrap();
    let kept = indexes.search(cowork::memory::Namespace::Activity, &before_delete, 1).unwrap();
    assert!(kept[0].1 > 0.99, "the others are still there: {kept:?}");
}

#[test]
fn kill_9_in_the_middle_of_a_job_resumes_from_the_last_checkpoint() {
    if !have_minilm() {
        return;
    }
    let data = temp_dir();
    {
        let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        for i in 0..200 {
            let text = format!("note {i}: the meeting about project {} moved to room {}", i % 17, i * 7 % 31);
            cowork::capture::db::insert_keystroke_chunk(&tx, &typed(i + 1, "gedit", "notes.txt", 1_000_000 + i * 10_000, &text)).unwrap();
        }
        tx.commit().unwrap();
    }
    let cowork = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cowork"));
        command.arg("--data-dir").arg(data.path()).arg("--models-dir").arg(models_dir()).args(args);
        command
    };
    let mut child = cowork(&["memory", "embed"]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let conn = cowork::store::open_read_only(&data.path().join("cowork.db")).unwrap();
    let embedded = |conn: &rusqlite::Connection| -> i64 {
        conn.query_row("SELECT count(*) FROM memory_chunks WHERE vector IS NOT NULL", [], |r| r.get(0)).unwrap_or(0)
    };
    assert!(super::support::eventually(Duration::from_secs(120), || embedded(&conn) >= 64), "embedding did not start");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let at_kill = embedded(&conn);
    let (state, checkpoint, total): (String, i64, i64) = conn
        .query_row("SELECT state, chunks_embedded, total_chunks FROM embed_jobs ORDER BY job_id LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    assert_eq!(state, "processing", "killed mid-job");
    assert_eq!(total, 200);
    assert_eq!(checkpoint, at_kill, "the checkpoint is committed with the vectors");
    assert!(checkpoint > 0 && checkpoint < total, "{checkpoint} of {total}");

    let out = cowork(&["memory", "embed"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.trim(), format!("embedded {} chunks", total - at_kill), "resumed from the checkpoint, not from zero");
    let (state, checkpoint): (String, i64) =
        conn.query_row("SELECT state, chunks_embedded FROM embed_jobs ORDER BY job_id LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!((state.as_str(), checkpoint), ("done", total));
    assert_eq!(embedded(&conn), total);
    let failed: i64 = conn.query_row("SELECT count(*) FROM embed_jobs WHERE state = 'failed'", [], |r| r.get(0)).unwrap();
    assert_eq!(failed, 0);
}

#[test]
fn thirty_questions_about_a_scripted_week_find_the_right_session_in_the_top_5() {
    if !have_minilm() {
        return;
    }
    let data = temp_dir();
    let cowork = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cowork"))
            .arg("--data-dir")
            .arg(data.path())
            .arg("--models-dir")
            .arg(models_dir())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "cowork {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    };
    let week = super::support::repo_dir().join("assets/scripts/scripted-week.jsonl");
    cowork(&["capture", "simulate", "--script", week.to_str().unwrap(), "--start", "7d"]);
    cowork(&["memory", "embed"]);
    let paths = cowork::config::Paths::resolve(Some(data.path().to_owned()), Some(models_dir())).unwrap();
    let questions: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(super::support::repo_dir().join("tests/data/week-questions.json")).unwrap()).unwrap();
    assert_eq!(questions.len(), 30);
    let mut misses = Vec::new();
    for q in &questions {
        let (question, expect) = (q["question"].as_str().unwrap(), q["expect"].as_str().unwrap());
        let (outcome, _) = cowork::commands::memory::search(&paths, question, &Filters::default(), 5).unwrap();
        assert_eq!(outcome.keyword_only, None);
        if !outcome.hits.iter().take(5).any(|h| h.title.contains(expect) || h.snippet.replace(['[', ']'], "").contains(expect)) {
            misses.push(format!("{question:?} → {:?}", outcome.hits.iter().map(|h| &h.title).collect::<Vec<_>>()));
        }
    }
    let found = questions.len() - misses.len();
    eprintln!("retrieval: {found}/30 in the top 5; misses: {misses:#?}");
    assert!(found >= 27, "{found}/30 in the top 5 (need 90 %): {misses:#?}");
}

#[test]
fn an_idle_embedding_model_is_dropped_only_when_nobody_holds_it_and_reloads_on_demand() {
    if !super::support::require(have_minilm(), "all-MiniLM-L6-v2") {
        return;
    }
    let shared = cowork::memory::embed::SharedEmbedder::new(cowork::memory::embed::model_dir(&models_dir()));
    assert_eq!(shared.unload_due_in(Duration::from_secs(300)), None, "nothing loaded yet");
    let model = shared.get().unwrap();
    let before = model.embed(&["flight and hotel for the trip"]).unwrap();
    assert!(shared.is_loaded());
    // In use by a worker: never dropped under it, however idle.
    assert!(!shared.unload_if_idle(Duration::ZERO));
    // Used recently: kept.
    drop(model);
    assert!(!shared.unload_if_idle(Duration::from_secs(300)));
    assert!(shared.unload_due_in(Duration::from_secs(300)).is_some_and(|d| d > Duration::from_secs(290)));
    // Idle and unheld: dropped, and loaded again by the next use with the same results.
    assert!(shared.unload_if_idle(Duration::ZERO));
    assert!(!shared.is_loaded());
    let started = std::time::Instant::now();
    let again = shared.get().unwrap().embed(&["flight and hotel for the trip"]).unwrap();
    eprintln!("embedding model reloaded and embedded a query in {} ms", started.elapsed().as_millis());
    assert_eq!(before, again);
}
