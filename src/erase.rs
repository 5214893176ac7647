//! Deleting a stretch of time from everything cowork keeps: capture,
//! chat, summaries, the agent's operations, automation runs and documents
//! kept in it. (Audio and the files it names, tombstones against late
//! writes and making it physical are the store worker's part.)

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
    Ok(Deleted { sessions, messages, keystroke_chunks, clipboard_events, afk_events, audio_transcripts: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::db::{search_sessions, sessions_since, upsert_session};
    use crate::records::{ActivitySession, SessionEnd};
    use crate::store::{migrate, purge_deleted};

    fn db() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        migrate(&conn).unwrap();
        conn
    }

    fn session(session_id: i64, title: &str, start: i64, end: Option<i64>) -> ActivitySession {
        ActivitySession {
            session_id,
            app: "XTerm".into(),
            title: title.into(),
            pid: Some(42),
            window_id: 7,
            started_at_millis: start,
            ended_at_millis: end,
            end_reason: end.map(|_| SessionEnd::Switch),
            ..Default::default()
        }
    }

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
}
