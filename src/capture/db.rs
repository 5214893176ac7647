//! What capture keeps, in SQL: activity sessions (opened, heartbeaten,
//! closed, recovered after a crash), AFK spans, typed text and copies; the
//! reads over them (by time, by words, one session's detail); retention.
//! The store worker runs the writes in its batches; other threads read on
//! read-only connections.

use rusqlite::{Connection, Row, params};

use crate::capture::events::CaptureEvent;
use crate::capture::heartbeat::{AfkEvent, AfkStatus, HeldBy};
use crate::records::{ActivitySession, ClipTrigger, ClipboardEvent, FlushReason, KeystrokeChunk, SessionEnd, UrlSource};
use crate::runtime::EventSink;
use crate::store::{StoreCommand, Writer, fts_phrase};

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

/// Sessions still open, each with its last heartbeat.
pub fn open_sessions_last_seen(conn: &Connection) -> rusqlite::Result<Vec<(i64, i64)>> {
    let mut stmt = conn.prepare("SELECT session_id, last_seen_ms FROM activity_sessions WHERE ended_at_ms IS NULL AND last_seen_ms IS NOT NULL")?;
    let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

/// A session heartbeaten this recently is still being recorded (capture beats every 30 s).
const LIVE_WITHIN_MILLIS: i64 = 90_000;

/// Time per project over the local days `[from, until)`, attributed with
/// `rules` among the sessions of a week either side (a ticket key or a
/// project's name is learned from the days around too). An open session runs
/// until now while capture heartbeats it; one a crash left open (cowork not
/// running since) ends at its last heartbeat, as the next start will end it.
pub fn ledger_between(conn: &Connection, rules: &crate::day::projects::ProjectRules, from: i64, until: i64, now: i64) -> rusqlite::Result<crate::day::ledger::Ledger> {
    const AROUND: i64 = 7 * 86_400_000;
    let mut sessions = sessions_between(conn, from - AROUND, until + AROUND)?;
    let seen: std::collections::HashMap<i64, i64> = open_sessions_last_seen(conn)?.into_iter().collect();
    for session in sessions.iter_mut().filter(|s| s.ended_at_millis.is_none()) {
        if let Some(&last_seen) = seen.get(&session.session_id)
            && now - last_seen > LIVE_WITHIN_MILLIS
        {
            session.ended_at_millis = Some(last_seen.max(session.started_at_millis));
        }
    }
    Ok(crate::day::ledger::Ledger::of(&sessions, rules, from, until, now))
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

/// A session opened, extended or closed, for the next batch.
pub fn session_write(session: ActivitySession) -> StoreCommand {
    let span = (session.started_at_millis, session.ended_at_millis.unwrap_or(i64::MAX));
    let id = session.session_id;
    StoreCommand::write_during("session", span, move |tx| upsert_session(tx, &session)).of_row("session", id)
}

/// A chunk of typed text, for the next batch.
pub fn chunk_write(chunk: KeystrokeChunk) -> StoreCommand {
    StoreCommand::write_during("typed text", (chunk.started_at_millis, chunk.ended_at_millis), move |tx| insert_keystroke_chunk(tx, &chunk))
}

/// A copy, for the next batch.
pub fn clip_write(event: ClipboardEvent) -> StoreCommand {
    StoreCommand::write_during("copy", (event.at_millis, event.at_millis), move |tx| insert_clipboard_event(tx, &event))
}

/// An AFK-stream event, new or extended, for the next batch.
pub fn afk_write(event: AfkEvent) -> StoreCommand {
    let id = event.id;
    StoreCommand::write_during("afk", (event.start_millis, event.end_millis), move |tx| upsert_afk(tx, &event)).of_row("afk", id)
}

/// The open session is still focused at `at_millis`.
pub fn heartbeat_write(session_id: i64, at_millis: i64) -> StoreCommand {
    StoreCommand::write("heartbeat", move |tx| heartbeat_session(tx, session_id, at_millis)).of_row("heartbeat", session_id)
}

/// Today's finished sessions for the Context panel.
pub fn load_sessions_since(since_millis: i64, sink: EventSink<CaptureEvent>) -> StoreCommand {
    StoreCommand::run("load sessions", move |writer| match sessions_since(writer.conn(), since_millis, 5_000) {
        Ok(sessions) => {
            sink.send(CaptureEvent::SessionsLoaded(sessions));
        }
        Err(err) => writer.notice(format!("cannot load sessions: {err}")),
    })
}

/// The timeline's days: sessions, away spans, typing and what was heard, from
/// `start_millis` (a local midnight) for `days` days.
pub fn load_days(start_millis: i64, days: u32, sink: EventSink<CaptureEvent>) -> StoreCommand {
    StoreCommand::run("load days", move |writer| {
        let end = (0..days.max(1)).fold(start_millis, |day, _| crate::day::ledger::next_midnight(day));
        let conn = writer.conn();
        let read = || -> rusqlite::Result<crate::capture::events::Days> {
            let away = afk_between(conn, start_millis, end)?
                .into_iter()
                .filter(|e| e.data == crate::capture::heartbeat::AfkStatus::Afk)
                .map(|e| (e.start_millis, e.end_millis))
                .collect();
            let typed = chunks_between(conn, start_millis, end)?.into_iter().map(|c| c.started_at_millis).collect();
            let heard = crate::audio::transcripts::between(conn, start_millis, end)?.into_iter().map(|t| t.started_at_millis).collect();
            let notes = notes_between(conn, start_millis, end)?;
            let events = crate::calendar::db::between(conn, start_millis, end)?;
            Ok(crate::capture::events::Days { start_millis, days, sessions: sessions_between(conn, start_millis, end)?, away, typed, heard, notes, events })
        };
        match read() {
            Ok(loaded) => {
                sink.send(CaptureEvent::DaysLoaded(loaded));
            }
            Err(err) => writer.notice(format!("cannot load the timeline: {err}")),
        }
    })
}

/// The day and week recaps and the meeting notes whose span overlaps `[start, end)`, oldest first.
pub fn notes_between(conn: &Connection, start: i64, end: i64) -> rusqlite::Result<Vec<crate::capture::events::KeptNote>> {
    let mut stmt = conn.prepare(
        "SELECT kind, period_start_ms, period_end_ms, text FROM observations
         WHERE kind IN ('recap_day', 'recap_week', 'meeting') AND period_start_ms < ?2 AND period_end_ms > ?1 ORDER BY period_start_ms",
    )?;
    let rows = stmt.query_map(params![start, end], |r| Ok(crate::capture::events::KeptNote { kind: r.get(0)?, start_millis: r.get(1)?, end_millis: r.get(2)?, text: r.get(3)? }))?;
    rows.collect()
}

/// What was typed, copied and on screen during one session, for the Context panel.
pub fn load_session_detail(session_id: i64, sink: EventSink<CaptureEvent>) -> StoreCommand {
    StoreCommand::run(format!("load session detail {session_id}"), move |writer| match session_detail(writer.conn(), session_id) {
        Ok((typed, copied)) => {
            // What the screen showed in it (the screen-text stream, when on).
            let seen = crate::capture::screen_texts::of_session(writer.conn(), session_id)
                .unwrap_or_default()
                .into_iter()
                .map(|row| {
                    let how = match row.method {
                        crate::capture::screen_texts::Method::Accessibility => "read".to_owned(),
                        crate::capture::screen_texts::Method::Ocr => format!("OCR, {} %", row.confidence),
                    };
                    (row.seen_at_millis, format!("({how}) {}", row.text))
                })
                .collect();
            sink.send(CaptureEvent::SessionDetail { session_id, typed, copied, seen });
        }
        Err(err) => writer.notice(format!("cannot load the session: {err}")),
    })
}

/// At open: sessions a crash left open end at their last heartbeat.
pub fn recover_at_open(writer: &mut Writer<'_>) -> anyhow::Result<()> {
    let recovered = recover_open_sessions(writer.conn())?;
    if recovered > 0 {
        tracing::info!(recovered, "closed sessions left open by an earlier crash");
    }
    Ok(())
}


/// A finished (or open) XTerm session, for unit tests.
#[cfg(test)]
pub(crate) fn test_session(session_id: i64, title: &str, start: i64, end: Option<i64>) -> ActivitySession {
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_db as db;
    use test_session as session;

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
    fn fts_query_text_is_quoted_not_parsed() {
        let conn = db();
        upsert_session(&conn, &session(1, "a AND (b", 0, Some(1))).unwrap();
        assert_eq!(search_sessions(&conn, "AND (b", 5).unwrap().len(), 1);
    }

    #[test]
    fn session_detail_collects_typing_and_copies_of_that_window_and_time() {
        use crate::records::{ClipTrigger, ClipboardEvent};
        use crate::records::{FlushReason, KeystrokeChunk};
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
}
