//! Plain query functions over a `&Connection`: used by the store worker for
//! writes, by other threads on read-only connections, and by tests in memory.

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::capture::clipboard::{ClipTrigger, ClipboardEvent};
use crate::capture::heartbeat::{AfkEvent, AfkStatus, HeldBy};
use crate::capture::keys::{FlushReason, KeystrokeChunk};
use crate::records::{ActivitySession, ChatMessage, ChatThread, MessageStatus, Role, SessionEnd, UrlSource};

const SESSION_COLUMNS: &str =
    "session_id, app, title, pid, window_id, started_at_ms, ended_at_ms, end_reason, url, url_source";

fn session_from_row(row: &Row<'_>) -> rusqlite::Result<ActivitySession> {
    let end_reason: Option<String> = row.get(7)?;
    Ok(ActivitySession {
        session_id: row.get(0)?,
        app: row.get(1)?,
        title: row.get(2)?,
        pid: row.get(3)?,
        window_id: row.get(4)?,
        started_at_millis: row.get(5)?,
        ended_at_millis: row.get(6)?,
        end_reason: end_reason.as_deref().and_then(SessionEnd::parse),
        url: row.get(8)?,
        url_source: row.get::<_, Option<String>>(9)?.as_deref().and_then(UrlSource::parse),
    })
}

/// Inserts a session or, if it exists, updates its end (the title and app of
/// a session never change: a new title is a new session).
pub fn upsert_session(conn: &Connection, session: &ActivitySession) -> rusqlite::Result<()> {
    let last_seen = session.ended_at_millis.unwrap_or(session.started_at_millis);
    conn.prepare_cached(
        "INSERT INTO activity_sessions
             (session_id, app, title, pid, window_id, started_at_ms, ended_at_ms, last_seen_ms, end_reason, url, url_source)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT (session_id) DO UPDATE SET
             ended_at_ms = excluded.ended_at_ms,
             last_seen_ms = max(last_seen_ms, excluded.last_seen_ms),
             end_reason = excluded.end_reason",
    )?
    .execute(params![
        session.session_id,
        session.app,
        session.title,
        session.pid,
        session.window_id,
        session.started_at_millis,
        session.ended_at_millis,
        last_seen,
        session.end_reason.map(SessionEnd::as_str),
        session.url,
        session.url_source.map(UrlSource::as_str),
    ])?;
    Ok(())
}

/// Inserts an AFK-stream event or extends it (heartbeats only ever grow an event).
pub fn upsert_afk(conn: &Connection, event: &AfkEvent) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO afk_events (event_id, status, held_by, started_at_ms, ended_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (event_id) DO UPDATE SET ended_at_ms = max(ended_at_ms, excluded.ended_at_ms)",
    )?
    .execute(params![
        event.id,
        event.data.as_str(),
        event.data.held_by().map(HeldBy::as_str),
        event.start_millis,
        event.end_millis,
    ])?;
    Ok(())
}

/// AFK-stream events overlapping `[since_millis, until_millis)`, oldest first.
/// When the AFK stream began: its first event's start (`None`: never recorded).
pub fn first_afk_start(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    conn.query_row("SELECT min(started_at_ms) FROM afk_events", [], |row| row.get(0))
}

/// The start of the last session that began before `before_millis`.
pub fn previous_session_start(conn: &Connection, before_millis: i64) -> rusqlite::Result<Option<i64>> {
    conn.query_row("SELECT max(started_at_ms) FROM activity_sessions WHERE started_at_ms < ?1", [before_millis], |row| row.get(0))
}

/// The start of the first session that began after `after_millis`.
pub fn next_session_start(conn: &Connection, after_millis: i64) -> rusqlite::Result<Option<i64>> {
    conn.query_row("SELECT min(started_at_ms) FROM activity_sessions WHERE started_at_ms > ?1", [after_millis], |row| row.get(0))
}

pub fn afk_between(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<Vec<AfkEvent>> {
    let mut stmt = conn.prepare_cached(
        "SELECT event_id, status, held_by, started_at_ms, ended_at_ms FROM afk_events
         WHERE started_at_ms < ?2 AND ended_at_ms >= ?1 ORDER BY started_at_ms ASC",
    )?;
    let rows = stmt.query_map(params![since_millis, until_millis], |row| {
        let status: String = row.get(1)?;
        let held_by: Option<String> = row.get(2)?;
        let data = match status.as_str() {
            "afk" => AfkStatus::Afk,
            _ => AfkStatus::NotAfk { held_by: held_by.as_deref().and_then(HeldBy::parse) },
        };
        Ok(AfkEvent { id: row.get(0)?, data, start_millis: row.get(3)?, end_millis: row.get(4)? })
    })?;
    rows.collect()
}

/// Records that an open session was still open at `at_millis`.
pub fn heartbeat_session(conn: &Connection, session_id: i64, at_millis: i64) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE activity_sessions SET last_seen_ms = max(last_seen_ms, ?2)
         WHERE session_id = ?1 AND ended_at_ms IS NULL",
    )?
    .execute(params![session_id, at_millis])?;
    Ok(())
}

/// Ends sessions left open by a crash at their last heartbeat. Returns how many.
pub fn recover_open_sessions(conn: &Connection) -> rusqlite::Result<usize> {
    conn.execute(
        "UPDATE activity_sessions SET ended_at_ms = last_seen_ms, end_reason = 'recovered'
         WHERE ended_at_ms IS NULL",
        [],
    )
}

/// Sessions that overlap `[since_millis, now)`, oldest first.
pub fn sessions_since(conn: &Connection, since_millis: i64, limit: usize) -> rusqlite::Result<Vec<ActivitySession>> {
    let sql = format!(
        "SELECT {SESSION_COLUMNS} FROM (
             SELECT * FROM activity_sessions
             WHERE coalesce(ended_at_ms, last_seen_ms) >= ?1 OR ended_at_ms IS NULL
             ORDER BY started_at_ms DESC LIMIT ?2
         ) ORDER BY started_at_ms ASC"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![since_millis, limit as i64], session_from_row)?;
    rows.collect()
}

/// The most recent `limit` sessions, newest first.
pub fn recent_sessions(conn: &Connection, limit: usize) -> rusqlite::Result<Vec<ActivitySession>> {
    let sql = format!(
        "SELECT {SESSION_COLUMNS} FROM activity_sessions ORDER BY started_at_ms DESC LIMIT ?1"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![limit as i64], session_from_row)?;
    rows.collect()
}

/// One session by id.
pub fn session(conn: &Connection, session_id: i64) -> rusqlite::Result<ActivitySession> {
    let sql = format!("SELECT {SESSION_COLUMNS} FROM activity_sessions WHERE session_id = ?1");
    conn.prepare_cached(&sql)?.query_row(params![session_id], session_from_row)
}

pub fn session_count(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT count(*) FROM activity_sessions", [], |row| row.get(0))
}

/// Sessions whose title or app matches an FTS5 query, best first.
pub fn search_sessions(conn: &Connection, query: &str, limit: usize) -> rusqlite::Result<Vec<ActivitySession>> {
    let sql = format!(
        "SELECT {} FROM activity_fts f JOIN activity_sessions s ON s.session_id = f.rowid
         WHERE activity_fts MATCH ?1 ORDER BY bm25(activity_fts) LIMIT ?2",
        SESSION_COLUMNS.split(", ").map(|c| format!("s.{c}")).collect::<Vec<_>>().join(", ")
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![fts_phrase(query), limit as i64], session_from_row)?;
    rows.collect()
}

/// Message ids whose text matches an FTS5 query, best first.
pub fn search_messages(conn: &Connection, query: &str, limit: usize) -> rusqlite::Result<Vec<ChatMessage>> {
    let mut stmt = conn.prepare_cached(
        "SELECT m.message_id, m.thread_id, m.role, m.content, m.context, m.status, m.created_at_ms, m.ask_id, m.provider, m.cost_usd, m.citations, m.refusal
         FROM message_fts f JOIN chat_messages m ON m.message_id = f.rowid
         WHERE message_fts MATCH ?1 ORDER BY bm25(message_fts) LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![fts_phrase(query), limit as i64], message_from_row)?;
    rows.collect()
}

/// Quotes each word so user text cannot be misread as FTS5 query syntax.
fn fts_phrase(query: &str) -> String {
    query
        .split_whitespace()
        .map(|word| format!("\"{}\"", word.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn upsert_thread(conn: &Connection, thread: &ChatThread, created_at_millis: i64) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO chat_threads (thread_id, title, created_at_ms, updated_at_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (thread_id) DO UPDATE SET updated_at_ms = max(updated_at_ms, excluded.updated_at_ms)",
    )?
    .execute(params![thread.thread_id, thread.title, created_at_millis, thread.updated_at_millis])?;
    Ok(())
}

pub fn threads(conn: &Connection, limit: usize) -> rusqlite::Result<Vec<ChatThread>> {
    let mut stmt = conn.prepare_cached(
        "SELECT thread_id, title, updated_at_ms FROM chat_threads ORDER BY updated_at_ms DESC LIMIT ?1",
    )?;
    let rows = stmt.query_map(params![limit as i64], |row| {
        Ok(ChatThread { thread_id: row.get(0)?, title: row.get(1)?, updated_at_millis: row.get(2)? })
    })?;
    rows.collect()
}

fn message_from_row(row: &Row<'_>) -> rusqlite::Result<ChatMessage> {
    let role: String = row.get(2)?;
    let status: String = row.get(5)?;
    Ok(ChatMessage {
        message_id: row.get(0)?,
        thread_id: row.get(1)?,
        role: Role::parse(&role).unwrap_or(Role::Assistant),
        content: row.get(3)?,
        context: row.get(4)?,
        status: MessageStatus::parse(&status).unwrap_or(MessageStatus::Done),
        created_at_millis: row.get(6)?,
        ask_id: row.get(7)?, provider: row.get(8)?, cost_usd: row.get(9)?,
        citations: row.get(10)?, refusal: row.get(11)?,
    })
}

/// Inserts a message, or replaces its content and status (an answer is
/// written when it finishes; a retry of the same write is harmless).
pub fn upsert_message(conn: &Connection, message: &ChatMessage, model: Option<&str>) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO chat_messages (message_id, thread_id, role, content, context, status, model, created_at_ms, ask_id, provider, cost_usd, citations, refusal)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
         ON CONFLICT (message_id) DO UPDATE SET content = excluded.content, status = excluded.status,
             context = coalesce(excluded.context, context), provider = coalesce(excluded.provider, provider),
             cost_usd = coalesce(excluded.cost_usd, cost_usd), model = coalesce(excluded.model, model),
             citations = coalesce(excluded.citations, citations), refusal = excluded.refusal",
    )?
    .execute(params![
        message.message_id,
        message.thread_id,
        message.role.as_str(),
        message.content,
        message.context,
        message.status.as_str(),
        model,
        message.created_at_millis,
        message.ask_id,
        message.provider,
        message.cost_usd,
        message.citations,
        message.refusal,
    ])?;
    conn.prepare_cached("UPDATE chat_threads SET updated_at_ms = max(updated_at_ms, ?2) WHERE thread_id = ?1")?
        .execute(params![message.thread_id, message.created_at_millis])?;
    Ok(())
}

/// Stores (or replaces) the user's rating of an answer.
pub fn set_feedback(conn: &Connection, message_id: i64, rating: i8, reason: &str, at_millis: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO feedback (message_id, rating, reason, at_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (message_id) DO UPDATE SET rating = excluded.rating, reason = excluded.reason, at_ms = excluded.at_ms",
        params![message_id, rating.signum(), reason.trim(), at_millis],
    )?;
    Ok(())
}

/// A thread's messages, oldest first.
pub fn messages(conn: &Connection, thread_id: i64) -> rusqlite::Result<Vec<ChatMessage>> {
    let mut stmt = conn.prepare_cached(
        "SELECT message_id, thread_id, role, content, context, status, created_at_ms, ask_id, provider, cost_usd, citations, refusal
         FROM chat_messages WHERE thread_id = ?1 ORDER BY created_at_ms ASC, message_id ASC",
    )?;
    let rows = stmt.query_map(params![thread_id], message_from_row)?;
    rows.collect()
}

pub fn set_setting(conn: &Connection, key: &str, value: &str, at_millis: i64) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO settings (key, value, updated_at_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at_ms = excluded.updated_at_ms",
    )?
    .execute(params![key, value, at_millis])?;
    Ok(())
}

pub fn setting(conn: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    conn.query_row("SELECT value FROM settings WHERE key = ?1", params![key], |row| row.get(0))
        .optional()
}

pub fn all_settings(conn: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare_cached("SELECT key, value FROM settings ORDER BY key")?;
    let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

pub fn insert_keystroke_chunk(conn: &Connection, chunk: &KeystrokeChunk) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO keystroke_chunks
             (chunk_id, app, title, pid, started_at_ms, ended_at_ms, text, shortcuts, flush_reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        chunk.chunk_id,
        chunk.app,
        chunk.title,
        chunk.pid,
        chunk.started_at_millis,
        chunk.ended_at_millis,
        chunk.text,
        chunk.shortcuts.join("\n"),
        chunk.flush_reason.as_str(),
    ])?;
    Ok(())
}

fn chunk_from_row(row: &Row<'_>) -> rusqlite::Result<KeystrokeChunk> {
    let shortcuts: String = row.get(7)?;
    let reason: String = row.get(8)?;
    Ok(KeystrokeChunk {
        chunk_id: row.get(0)?,
        app: row.get(1)?,
        title: row.get(2)?,
        pid: row.get(3)?,
        started_at_millis: row.get(4)?,
        ended_at_millis: row.get(5)?,
        text: row.get(6)?,
        shortcuts: shortcuts.split('\n').filter(|s| !s.is_empty()).map(str::to_owned).collect(),
        flush_reason: FlushReason::parse(&reason).unwrap_or(FlushReason::Pause),
    })
}

const CHUNK_COLUMNS: &str = "chunk_id, app, title, pid, started_at_ms, ended_at_ms, text, shortcuts, flush_reason";

/// Keystroke chunks that started in `[since_millis, until_millis)`, oldest first.
pub fn chunks_between(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<Vec<KeystrokeChunk>> {
    let sql = format!(
        "SELECT {CHUNK_COLUMNS} FROM keystroke_chunks WHERE started_at_ms >= ?1 AND started_at_ms < ?2 ORDER BY started_at_ms"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![since_millis, until_millis], chunk_from_row)?;
    rows.collect()
}

/// Keystroke chunks whose text matches an FTS5 query, best first.
pub fn search_chunks(conn: &Connection, query: &str, limit: usize) -> rusqlite::Result<Vec<KeystrokeChunk>> {
    let sql = format!(
        "SELECT {} FROM keystroke_fts f JOIN keystroke_chunks k ON k.chunk_id = f.rowid
         WHERE keystroke_fts MATCH ?1 ORDER BY bm25(keystroke_fts) LIMIT ?2",
        CHUNK_COLUMNS.split(", ").map(|c| format!("k.{c}")).collect::<Vec<_>>().join(", ")
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![fts_phrase(query), limit as i64], chunk_from_row)?;
    rows.collect()
}

pub fn insert_clipboard_event(conn: &Connection, event: &ClipboardEvent) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO clipboard_events (clip_id, app, title, pid, at_ms, text, truncated, trigger)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        event.clip_id,
        event.app,
        event.title,
        event.pid,
        event.at_millis,
        event.text,
        event.truncated,
        event.trigger.as_str(),
    ])?;
    Ok(())
}

fn clip_from_row(row: &Row<'_>) -> rusqlite::Result<ClipboardEvent> {
    let trigger: String = row.get(7)?;
    Ok(ClipboardEvent {
        clip_id: row.get(0)?,
        app: row.get(1)?,
        title: row.get(2)?,
        pid: row.get(3)?,
        at_millis: row.get(4)?,
        text: row.get(5)?,
        truncated: row.get(6)?,
        trigger: ClipTrigger::parse(&trigger).unwrap_or(ClipTrigger::OwnerChange),
    })
}

/// Clipboard events in `[since_millis, until_millis)`, oldest first.
pub fn clips_between(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<Vec<ClipboardEvent>> {
    let mut stmt = conn.prepare_cached(
        "SELECT clip_id, app, title, pid, at_ms, text, truncated, trigger FROM clipboard_events
         WHERE at_ms >= ?1 AND at_ms < ?2 ORDER BY at_ms",
    )?;
    let rows = stmt.query_map(params![since_millis, until_millis], clip_from_row)?;
    rows.collect()
}

/// Texts with their times in milliseconds, oldest first.
pub type TimedTexts = Vec<(i64, String)>;

/// Typed text and copied text in one session's window and time, as (time, text).
pub fn session_detail(conn: &Connection, session_id: i64) -> rusqlite::Result<(TimedTexts, TimedTexts)> {
    let (start, end, title): (i64, i64, String) = conn.query_row(
        // An open session runs until now: typing after its last heartbeat is its too.
        "SELECT started_at_ms, coalesce(ended_at_ms, 9223372036854775806), title FROM activity_sessions WHERE session_id = ?1",
        params![session_id],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?;
    let end = end.max(start) + 1;
    let typed = chunks_between(conn, start, end)?
        .into_iter()
        .filter(|c| c.title == title)
        .map(|c| (c.started_at_millis, if c.shortcuts.is_empty() { c.text } else { format!("{} [{}]", c.text, c.shortcuts.join(", ")) }))
        .collect();
    let copied = clips_between(conn, start, end)?.into_iter().filter(|c| c.title == title).map(|c| (c.at_millis, c.text)).collect();
    Ok((typed, copied))
}

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

/// Retention: deletes sessions that ended before `cutoff_millis`. Returns how many.
pub fn delete_sessions_ended_before(conn: &Connection, cutoff_millis: i64) -> rusqlite::Result<usize> {
    conn.execute("DELETE FROM activity_sessions WHERE ended_at_ms IS NOT NULL AND ended_at_ms < ?1", params![cutoff_millis])
        .and_then(|sessions| Ok(sessions + conn.execute("DELETE FROM afk_events WHERE ended_at_ms < ?1", params![cutoff_millis])?))
}

/// Retention: deletes keystroke chunks that ended before `cutoff_millis`. Returns how many.
pub fn delete_chunks_ended_before(conn: &Connection, cutoff_millis: i64) -> rusqlite::Result<usize> {
    conn.execute("DELETE FROM keystroke_chunks WHERE ended_at_ms < ?1", params![cutoff_millis])
        .and_then(|chunks| Ok(chunks + conn.execute("DELETE FROM clipboard_events WHERE at_ms < ?1", params![cutoff_millis])?))
}

/// Makes deletions physical: merges FTS segments (so deleted terms leave the
/// index), checkpoints the WAL and vacuums, so no deleted text stays on disk.
pub fn purge_deleted(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "INSERT INTO activity_fts (activity_fts) VALUES ('optimize');
         INSERT INTO message_fts (message_fts) VALUES ('optimize');
         INSERT INTO keystroke_fts (keystroke_fts) VALUES ('optimize');
         INSERT INTO clipboard_fts (clipboard_fts) VALUES ('optimize');
         INSERT INTO document_fts (document_fts) VALUES ('optimize');
         INSERT INTO audio_fts (audio_fts) VALUES ('optimize');
         PRAGMA wal_checkpoint(TRUNCATE);
         VACUUM;
         PRAGMA wal_checkpoint(TRUNCATE);",
    )
}

/// Every session overlapping `[since_millis, until_millis)`, oldest first (for export).
pub fn sessions_between(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<Vec<ActivitySession>> {
    let sql = format!(
        "SELECT {SESSION_COLUMNS} FROM activity_sessions
         WHERE started_at_ms < ?2 AND coalesce(ended_at_ms, last_seen_ms, started_at_ms) >= ?1
         ORDER BY started_at_ms ASC"
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params![since_millis, until_millis], session_from_row)?;
    rows.collect()
}

/// Every chat message written in `[since_millis, until_millis)`, oldest first (for export).
pub fn messages_between(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<Vec<ChatMessage>> {
    let mut stmt = conn.prepare(
        "SELECT message_id, thread_id, role, content, context, status, created_at_ms, ask_id, provider, cost_usd, citations, refusal
         FROM chat_messages WHERE created_at_ms >= ?1 AND created_at_ms < ?2 ORDER BY created_at_ms ASC",
    )?;
    let rows = stmt.query_map(params![since_millis, until_millis], message_from_row)?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema::migrate;

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
    fn a_session_is_opened_then_closed_in_place_and_found_by_title() {
        let conn = db();
        upsert_session(&conn, &session(1, "Quarterly report draft", 1_000, None)).unwrap();
        upsert_session(&conn, &session(1, "Quarterly report draft", 1_000, Some(5_000))).unwrap();
        let all = sessions_since(&conn, 0, 10).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].ended_at_millis, Some(5_000));
        let found = search_sessions(&conn, "quarterly", 10).unwrap();
        assert_eq!(found.len(), 1);
        assert!(search_sessions(&conn, "holiday", 10).unwrap().is_empty());
    }

    #[test]
    fn crash_recovery_ends_open_sessions_at_their_last_heartbeat() {
        let conn = db();
        upsert_session(&conn, &session(1, "Editor", 1_000, None)).unwrap();
        heartbeat_session(&conn, 1, 31_000).unwrap();
        assert_eq!(recover_open_sessions(&conn).unwrap(), 1);
        let s = &recent_sessions(&conn, 1).unwrap()[0];
        assert_eq!(s.ended_at_millis, Some(31_000));
        assert_eq!(s.end_reason, Some(SessionEnd::Recovered));
    }

    #[test]
    fn messages_round_trip_and_fts_follows_updates() {
        let conn = db();
        let thread = ChatThread { thread_id: 10, title: "t".into(), updated_at_millis: 1 };
        upsert_thread(&conn, &thread, 1).unwrap();
        let mut answer = ChatMessage {
            message_id: 11,
            thread_id: 10,
            role: Role::Assistant,
            content: "draft".into(),
            context: None,
            status: MessageStatus::Stopped,
            created_at_millis: 2,
            ask_id: None, provider: None, cost_usd: None, citations: None, refusal: false,
        };
        upsert_message(&conn, &answer, Some("m")).unwrap();
        answer.content = "the meeting moved to Thursday".into();
        answer.status = MessageStatus::Done;
        upsert_message(&conn, &answer, Some("m")).unwrap();
        assert_eq!(messages(&conn, 10).unwrap(), vec![answer]);
        assert_eq!(search_messages(&conn, "thursday", 5).unwrap().len(), 1);
        assert!(search_messages(&conn, "draft", 5).unwrap().is_empty());
    }

    #[test]
    fn fts_query_text_is_quoted_not_parsed() {
        let conn = db();
        upsert_session(&conn, &session(1, "a AND (b", 0, Some(1))).unwrap();
        assert_eq!(search_sessions(&conn, "AND (b", 5).unwrap().len(), 1);
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
    fn session_detail_collects_typing_and_copies_of_that_window_and_time() {
        use crate::capture::clipboard::{ClipTrigger, ClipboardEvent};
        use crate::capture::keys::{FlushReason, KeystrokeChunk};
        let conn = db();
        upsert_session(&conn, &session(1, "notes", 1_000, Some(9_000))).unwrap();
        let chunk = |id, title: &str, at| KeystrokeChunk {
            chunk_id: id,
            app: "XTerm".into(),
            title: title.into(),
            pid: None,
            started_at_millis: at,
            ended_at_millis: at + 10,
            text: format!("text {id}"),
            shortcuts: vec![],
            flush_reason: FlushReason::Enter,
        };
        insert_keystroke_chunk(&conn, &chunk(1, "notes", 2_000)).unwrap();
        insert_keystroke_chunk(&conn, &chunk(2, "other", 3_000)).unwrap();
        insert_keystroke_chunk(&conn, &chunk(3, "notes", 20_000)).unwrap();
        let clip = ClipboardEvent {
            clip_id: 5,
            app: "XTerm".into(),
            title: "notes".into(),
            pid: None,
            at_millis: 4_000,
            text: "copied".into(),
            truncated: false,
            trigger: ClipTrigger::Shortcut,
        };
        insert_clipboard_event(&conn, &clip).unwrap();
        let (typed, copied) = session_detail(&conn, 1).unwrap();
        assert_eq!(typed, vec![(2_000, "text 1".to_owned())]);
        assert_eq!(copied, vec![(4_000, "copied".to_owned())]);
    }

    #[test]
    fn settings_overwrite() {
        let conn = db();
        set_setting(&conn, "afk_secs", "180", 1).unwrap();
        set_setting(&conn, "afk_secs", "60", 2).unwrap();
        assert_eq!(setting(&conn, "afk_secs").unwrap().as_deref(), Some("60"));
        assert_eq!(setting(&conn, "missing").unwrap(), None);
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
