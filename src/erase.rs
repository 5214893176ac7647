//! Deleting what cowork keeps: a stretch of time from everything (capture,
//! chat, summaries, the agent's operations, automation runs, documents kept
//! in it, audio and its files), or one conversation with all that belongs to
//! it, made physical on disk and guarded against late writes; and retention,
//! run by the store now and then.
//!
//! A deletion is a job on the store's one writer (`delete_range_command`):
//! the rows go in one transaction, then `store::purge_deleted` makes it
//! physical (FTS segments merged, the WAL checkpointed, VACUUM), and writes of
//! rows in the range that arrive later in the run are dropped. Retention
//! (`retention`) is one of the store's periodic hooks, handed in by
//! `workers.rs`.

use rusqlite::{Connection, params};

/// What a range deletion removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deleted {
    pub sessions: usize,
    pub messages: usize,
    pub keystroke_chunks: usize,
    pub clipboard_events: usize,
    pub afk_events: usize,
    pub audio_transcripts: usize,
    pub screen_texts: usize,
}

/// Deletes everything captured or said in `[since_millis, until_millis)`:
/// sessions that overlap the range (whole, so no fragment of a title
/// survives), and chat messages written in it. FTS entries go with them
/// (triggers); `purge_deleted` then removes leftovers from the files.
pub fn delete_range(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<Deleted> {
    let sessions = conn.execute(
        "DELETE FROM activity_sessions
         WHERE started_at_ms < ?2 AND coalesce(ended_at_ms, last_seen_ms, started_at_ms) >= ?1",
        params![since_millis, until_millis],
    )?;
    let messages = conn.execute(
        "DELETE FROM chat_messages WHERE created_at_ms >= ?1 AND created_at_ms < ?2",
        params![since_millis, until_millis],
    )?;
    let keystroke_chunks = conn.execute(
        "DELETE FROM keystroke_chunks WHERE started_at_ms < ?2 AND ended_at_ms >= ?1",
        params![since_millis, until_millis],
    )?;
    let clipboard_events = conn.execute(
        "DELETE FROM clipboard_events WHERE at_ms >= ?1 AND at_ms < ?2",
        params![since_millis, until_millis],
    )?;
    let afk_events = conn.execute(
        "DELETE FROM afk_events WHERE started_at_ms < ?2 AND ended_at_ms >= ?1",
        params![since_millis, until_millis],
    )?;
    let screen_texts = crate::capture::screen_texts::delete_range(conn, since_millis, until_millis)?;
    // Summaries of any of it go too: they describe what was deleted.
    conn.execute("DELETE FROM observations WHERE period_start_ms < ?2 AND period_end_ms >= ?1", params![since_millis, until_millis])?;
    // The agent's operations of the range hold its conversations and tool
    // output (the audit log keeps only redacted arguments, sizes and hashes).
    conn.execute(
        "DELETE FROM operation_calls WHERE operation_id IN (SELECT operation_id FROM operations WHERE created_at_ms >= ?1 AND created_at_ms < ?2)",
        params![since_millis, until_millis],
    )?;
    conn.execute("DELETE FROM operations WHERE created_at_ms >= ?1 AND created_at_ms < ?2", params![since_millis, until_millis])?;
    // Finished automation runs of the range: their steps hold what the flows read (open runs go on).
    crate::automations::store::delete_runs_between(conn, since_millis, until_millis)?;
    // Documents kept in memory in the range (attached, read by the agent): their parts, chunks and vectors.
    conn.execute(
        "DELETE FROM document_parts WHERE document_id IN (SELECT document_id FROM documents WHERE added_at_ms >= ?1 AND added_at_ms < ?2)",
        params![since_millis, until_millis],
    )?;
    conn.execute("DELETE FROM documents WHERE added_at_ms >= ?1 AND added_at_ms < ?2", params![since_millis, until_millis])?;
    conn.execute(
        "DELETE FROM chat_threads WHERE NOT EXISTS (SELECT 1 FROM chat_messages m WHERE m.thread_id = chat_threads.thread_id)
         AND created_at_ms >= ?1 AND created_at_ms < ?2",
        params![since_millis, until_millis],
    )?;
    Ok(Deleted { sessions, messages, keystroke_chunks, clipboard_events, afk_events, audio_transcripts: 0, screen_texts })
}

/// Deletes one conversation: its messages (their search entries and vectors go
/// by the triggers), its summary, the agent's tasks in it with their calls,
/// what was pinned to it and an app's link to it. Returns how many messages went.
pub fn delete_thread(conn: &Connection, thread_id: i64) -> rusqlite::Result<usize> {
    // A conversation's summary spans its first message to its last (`summarise_pending`).
    conn.execute(
        "DELETE FROM observations WHERE kind = 'conversation' AND period_start_ms = (SELECT min(created_at_ms) FROM chat_messages WHERE thread_id = ?1)",
        [thread_id],
    )?;
    conn.execute("DELETE FROM operation_calls WHERE operation_id IN (SELECT operation_id FROM operations WHERE thread_id = ?1)", [thread_id])?;
    conn.execute("DELETE FROM operations WHERE thread_id = ?1", [thread_id])?;
    conn.execute("DELETE FROM feedback WHERE message_id IN (SELECT message_id FROM chat_messages WHERE thread_id = ?1)", [thread_id])?;
    let messages = conn.execute("DELETE FROM chat_messages WHERE thread_id = ?1", [thread_id])?;
    conn.execute("DELETE FROM thread_pins WHERE thread_id = ?1", [thread_id])?;
    conn.execute("DELETE FROM app_threads WHERE thread_id = ?1", [thread_id])?;
    conn.execute("DELETE FROM chat_threads WHERE thread_id = ?1", [thread_id])?;
    Ok(messages)
}

/// Deletes one conversation and purges it from the files, as a range
/// deletion does; the outcome goes to the chat (`show`) or as a notice.
pub fn delete_thread_command(thread_id: i64, show: crate::runtime::EventSink<crate::chat::ChatEvent>) -> crate::store::StoreCommand {
    crate::store::StoreCommand::run(format!("delete thread {thread_id}"), move |writer| {
        let outcome = delete_thread_now(writer, thread_id);
        match outcome {
            Ok(messages) => {
                writer.wrote(); // its tombstones take the vectors out of the indexes
                show.send(crate::chat::ChatEvent::ThreadDeleted { thread_id, messages });
            }
            Err(err) => writer.notice(format!("the conversation was not deleted: {err:#}")),
        }
    })
}

fn delete_thread_now(writer: &crate::store::Writer<'_>, thread_id: i64) -> anyhow::Result<usize> {
    writer.conn().pragma_update(None, "secure_delete", "ON")?;
    let outcome = writer.transaction(|tx| Ok(delete_thread(tx, thread_id)?)).and_then(|messages| {
        crate::store::purge_deleted(writer.conn())?;
        Ok(messages)
    });
    writer.conn().pragma_update(None, "secure_delete", "OFF")?;
    outcome
}

/// Deletes everything in `[since, until)` and purges it from the files; the
/// outcome goes to `reply` when given, and to the UI (`show`).
pub fn delete_range_command(
    since_millis: i64,
    until_millis: i64,
    reply: Option<crossbeam_channel::Sender<Result<Deleted, String>>>,
    show: crate::runtime::EventSink<crate::store::events::StoreEvent>,
) -> crate::store::StoreCommand {
    crate::store::StoreCommand::run(format!("delete range {since_millis}..{until_millis}"), move |writer| {
        let outcome = delete_range_now(writer, since_millis, until_millis).map_err(|err| format!("{err:#}"));
        match &outcome {
            Ok(deleted) => {
                show.send(crate::store::events::StoreEvent::RangeDeleted { since_millis, until_millis, sessions: deleted.sessions, messages: deleted.messages });
            }
            Err(err) => writer.notice(format!("delete failed: {err}")),
        }
        if let Some(reply) = reply {
            let _ = reply.try_send(outcome);
        }
    })
}

/// The deletion itself: rows and audio files, FTS leftovers and free pages
/// overwritten, later writes of rows in the range dropped, tombstones for the vectors.
fn delete_range_now(writer: &mut crate::store::Writer<'_>, since_millis: i64, until_millis: i64) -> anyhow::Result<Deleted> {
    // Overwrite freed content on disk; only around deletions, since it
    // also zeroes pages FTS merges free and would slow ingest by a quarter.
    writer.conn().pragma_update(None, "secure_delete", "ON")?;
    let outcome = writer.transaction(|tx| {
        let (audio, files) = crate::audio::transcripts::delete_range(tx, since_millis, until_millis)?;
        Ok((Deleted { audio_transcripts: audio, ..delete_range(tx, since_millis, until_millis)? }, files))
    });
    let outcome = outcome.and_then(|(deleted, files)| {
        if let Some(dir) = writer.data_dir() {
            crate::audio::transcripts::remove_files(&dir, &files);
        }
        crate::store::purge_deleted(writer.conn())?;
        writer.deleted_range(since_millis, until_millis);
        Ok(deleted)
    });
    writer.conn().pragma_update(None, "secure_delete", "OFF")?;
    writer.wrote(); // its tombstones take the vectors out of the indexes
    outcome
}

/// How often retention runs (and once at start).
pub const RETENTION_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3600);

/// Retention as the store runs it: every hour, by the stored settings.
pub fn retention() -> crate::store::Periodic {
    crate::store::Periodic {
        every: RETENTION_INTERVAL,
        run: std::sync::Arc::new(|writer| match enforce_retention(writer.conn(), crate::ids::now_millis()) {
            Ok(0) => {}
            Ok(deleted) => {
                tracing::info!(deleted, "retention removed old history");
                writer.wrote();
            }
            Err(err) => writer.notice(format!("retention failed: {err}")),
        }),
    }
}

/// Deletes history older than the retention settings (windows, typed text,
/// screen text, transcripts and kept audio, and audio files no row points at). Returns how many rows went.
pub fn enforce_retention(conn: &Connection, now_millis: i64) -> rusqlite::Result<usize> {
    let (settings, _) = crate::config::Settings::from_pairs(&crate::store::all_settings(conn).unwrap_or_default());
    let cutoff = |days: u32| (days > 0).then(|| now_millis - i64::from(days) * 86_400_000);
    let _ = conn.pragma_update(None, "secure_delete", "ON");
    let mut deleted = 0;
    let mut failure = None;
    let mut tally = |outcome: rusqlite::Result<usize>| match outcome {
        Ok(n) => deleted += n,
        Err(err) => failure = Some(err),
    };
    if let Some(cutoff) = cutoff(settings.window_retention_days) {
        tally(crate::capture::db::delete_sessions_ended_before(conn, cutoff));
    }
    if let Some(cutoff) = cutoff(settings.keystroke_retention_days) {
        tally(crate::capture::db::delete_chunks_ended_before(conn, cutoff));
    }
    if let Some(cutoff) = cutoff(settings.screen.retention_days) {
        tally(crate::capture::screen_texts::delete_seen_before(conn, cutoff));
    }
    tally(audio_retention(conn, now_millis, &settings.listen));
    let _ = conn.pragma_update(None, "secure_delete", "OFF");
    match failure {
        Some(err) => Err(err),
        None => Ok(deleted),
    }
}

/// Listen mode's two retentions (transcripts, and the shorter one of kept
/// audio), and audio files no row points at any more.
fn audio_retention(conn: &Connection, now_millis: i64, listen: &crate::config::ListenSettings) -> rusqlite::Result<usize> {
    use crate::audio::transcripts;
    let mut files = Vec::new();
    let mut deleted = 0;
    if listen.retention_days > 0 {
        let (n, gone) = transcripts::delete_ended_before(conn, now_millis - i64::from(listen.retention_days) * 86_400_000)?;
        deleted += n;
        files.extend(gone);
    }
    files.extend(transcripts::release_audio_before(conn, now_millis - i64::from(listen.audio_retention_days) * 86_400_000)?);
    if let Some(dir) = crate::store::data_dir(conn) {
        files.extend(transcripts::orphan_files(&dir, &transcripts::kept_files(conn)?, std::time::Duration::from_secs(600)));
        transcripts::remove_files(&dir, &files);
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::db::{search_sessions, sessions_since, test_session as session, upsert_session};
    use crate::store::{purge_deleted, test_db as db};

    #[test]
    fn delete_range_takes_overlapping_sessions_and_their_fts_entries() {
        let conn = db();
        upsert_session(&conn, &session(1, "before", 0, Some(900))).unwrap();
        upsert_session(&conn, &session(2, "overlapping start", 900, Some(1_500))).unwrap();
        upsert_session(&conn, &session(3, "inside", 1_200, Some(1_300))).unwrap();
        upsert_session(&conn, &session(4, "after", 2_000, Some(2_500))).unwrap();
        let deleted = delete_range(&conn, 1_000, 2_000).unwrap();
        assert_eq!(deleted.sessions, 2);
        let left: Vec<String> = sessions_since(&conn, 0, 10).unwrap().into_iter().map(|s| s.title).collect();
        assert_eq!(left, ["before", "after"]);
        assert!(search_sessions(&conn, "overlapping", 5).unwrap().is_empty());
        assert!(search_sessions(&conn, "inside", 5).unwrap().is_empty());
        purge_deleted(&conn).unwrap();
        assert_eq!(search_sessions(&conn, "after", 5).unwrap().len(), 1);
    }

    #[test]
    fn a_rewritten_summary_is_searched_by_its_new_words_and_deleting_its_period_deletes_it() {
        let conn = db();
        let summary = |text: &str, end| crate::memory::Observation {
            kind: "conversation".into(),
            period_start_millis: 10_000,
            period_end_millis: end,
            text: text.into(),
            model: None,
        };
        let find = |word: &str| -> Vec<i64> {
            let filters = crate::memory::search::Filters { streams: vec![crate::memory::search::Stream::Summary], ..Default::default() };
            crate::memory::search::search(&conn, word, &filters, 10).unwrap().iter().map(|h| h.id).collect()
        };
        crate::memory::insert_observation(&conn, &summary("Planned a trip to Lisbon", 20_000), 1).unwrap();
        // The conversation went on: the summary is rewritten in place.
        crate::memory::insert_observation(&conn, &summary("Moved the trip to Porto instead", 90_000), 2).unwrap();
        let end: i64 = conn.query_row("SELECT period_end_ms FROM observations", [], |r| r.get(0)).unwrap();
        assert_eq!(end, 90_000, "the period grows with the conversation");
        assert_eq!(find("Porto").len(), 1);
        assert!(find("Lisbon").is_empty(), "the old words left the keyword index");
        // Deleting any part of its period deletes the summary (it describes what was deleted).
        delete_range(&conn, 50_000, 60_000).unwrap();
        let left: i64 = conn.query_row("SELECT count(*) FROM observations", [], |r| r.get(0)).unwrap();
        assert_eq!(left, 0);
        assert!(find("Porto").is_empty());
        conn.execute("INSERT INTO observation_fts (observation_fts) VALUES ('integrity-check')", []).expect("the keyword index is intact");
    }

    #[test]
    fn deleting_a_conversation_takes_its_messages_tasks_summary_and_pins_and_leaves_the_others() {
        let conn = db();
        let message = |message_id, thread_id, text: &str, at| crate::records::ChatMessage {
            message_id,
            thread_id,
            role: crate::records::Role::User,
            content: text.into(),
            context: None,
            status: crate::records::MessageStatus::Done,
            created_at_millis: at,
            ask_id: None, provider: None, cost_usd: None, citations: None, refusal: false,
        };
        for (thread_id, title) in [(1, "Porto"), (2, "Budget")] {
            crate::chat::upsert_thread(&conn, &crate::records::ChatThread { thread_id, title: title.into(), updated_at_millis: 0 }, 0).unwrap();
        }
        crate::chat::upsert_message(&conn, &message(10, 1, "book the hotel in Porto", 1_000), None).unwrap();
        crate::chat::upsert_message(&conn, &message(11, 1, "the Porto hotel is booked", 2_000), None).unwrap();
        crate::chat::upsert_message(&conn, &message(20, 2, "the budget is due on Friday", 1_500), None).unwrap();
        let summary = |start, text: &str| crate::memory::Observation { kind: "conversation".into(), period_start_millis: start, period_end_millis: start + 1_000, text: text.into(), model: None };
        crate::memory::insert_observation(&conn, &summary(1_000, "Booked a hotel in Porto"), 3).unwrap();
        crate::memory::insert_observation(&conn, &summary(1_500, "The budget is due Friday"), 3).unwrap();
        conn.execute("INSERT INTO operations (operation_id, thread_id, task, status, brain, state, created_at_ms, updated_at_ms) VALUES (5, 1, 'book it', 'done', 'local', '{}', 1, 1)", []).unwrap();
        conn.execute("INSERT INTO operation_calls (call_id, operation_id, step, model_call_id, tool, arguments, risk, status, why, created_at_ms) VALUES (50, 5, 1, 'c', 'write_file', '{}', 'sensitive', 'done', 'x', 1)", []).unwrap();
        conn.execute("INSERT INTO feedback (message_id, rating, reason, at_ms) VALUES (11, 1, 'good', 3)", []).unwrap();

        assert_eq!(delete_thread(&conn, 1).unwrap(), 2);
        purge_deleted(&conn).unwrap();
        let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(count("SELECT count(*) FROM chat_threads WHERE thread_id = 1"), 0);
        assert_eq!(count("SELECT count(*) FROM chat_messages WHERE thread_id = 1"), 0);
        assert!(crate::chat::search_messages(&conn, "Porto", 5).unwrap().is_empty(), "its words left the keyword index");
        assert_eq!(count("SELECT count(*) FROM operations"), 0);
        assert_eq!(count("SELECT count(*) FROM operation_calls"), 0);
        assert_eq!(count("SELECT count(*) FROM feedback"), 0);
        assert_eq!(count("SELECT count(*) FROM observations WHERE text LIKE '%Porto%'"), 0, "its summary went with it");
        // The other conversation is untouched.
        assert_eq!(crate::chat::messages(&conn, 2).unwrap().len(), 1);
        assert_eq!(crate::chat::search_messages(&conn, "budget", 5).unwrap().len(), 1);
        assert_eq!(count("SELECT count(*) FROM observations WHERE text LIKE '%budget%'"), 1);
        assert_eq!(delete_thread(&conn, 1).unwrap(), 0, "deleting it again deletes nothing");
    }
}
