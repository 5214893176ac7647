//! Search across everything captured and said: one query over window
//! sessions (title, app, URL), typed text, clipboard and chat messages, each
//! ranked by FTS5's BM25 and merged by reciprocal rank fusion (RRF), with
//! filters by time range, app and stream. The vector half (faiss) joins the
//! same fusion once the embed worker fills the indexes.

use rusqlite::{Connection, params};
use serde::Serialize;

/// RRF's constant: how much a top rank outweighs a lower one.
const RRF_K: f64 = 60.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Window,
    Typing,
    Clipboard,
    Chat,
    /// Dated summaries the local model wrote (observational memory).
    Summary,
    /// What listen mode heard (microphone and system audio).
    Audio,
    /// Pages of documents the user attached or the agent read.
    Document,
    /// What the focused window showed (the screen-text stream).
    Screen,
}

impl Stream {
    pub const ALL: [Stream; 8] = [Stream::Window, Stream::Typing, Stream::Clipboard, Stream::Chat, Stream::Summary, Stream::Audio, Stream::Document, Stream::Screen];

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "window" | "windows" => Some(Stream::Window),
            "typing" | "keys" => Some(Stream::Typing),
            "clipboard" => Some(Stream::Clipboard),
            "chat" | "messages" => Some(Stream::Chat),
            "summary" | "summaries" => Some(Stream::Summary),
            "audio" | "heard" => Some(Stream::Audio),
            "document" | "documents" | "docs" => Some(Stream::Document),
            "screen" | "seen" => Some(Stream::Screen),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Window => "window",
            Stream::Typing => "typing",
            Stream::Clipboard => "clipboard",
            Stream::Chat => "chat",
            Stream::Summary => "summary",
            Stream::Audio => "audio",
            Stream::Document => "document",
            Stream::Screen => "screen",
        }
    }

    /// The vector index its chunks go to.
    pub fn namespace(self) -> crate::memory::Namespace {
        use crate::memory::Namespace;
        match self {
            Stream::Window | Stream::Typing | Stream::Clipboard | Stream::Audio | Stream::Screen => Namespace::Activity,
            Stream::Chat => Namespace::Conversation,
            Stream::Summary => Namespace::Observation,
            Stream::Document => Namespace::Documents,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filters {
    pub since_millis: Option<i64>,
    pub until_millis: Option<i64>,
    /// Case-insensitive app name (WM_CLASS); chat messages have none and are skipped when set.
    pub app: Option<String>,
    /// Only these streams (empty: all).
    pub streams: Vec<Stream>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hit {
    pub stream: Stream,
    pub id: i64,
    pub at_millis: i64,
    pub app: Option<String>,
    pub title: String,
    /// The matching text with the match marked `[…]`.
    pub snippet: String,
    pub score: f64,
    /// What opening it shows: its session (for typed or copied text, the
    /// session it happened in), its thread (chat), the summary.
    pub open_id: Option<i64>,
}

fn phrase(query: &str) -> String {
    query.split_whitespace().map(|w| format!("\"{}\"", w.replace('"', "\"\""))).collect::<Vec<_>>().join(" ")
}

/// Ranked hits from one stream's FTS table.
fn stream_hits(conn: &Connection, stream: Stream, query: &str, filters: &Filters, limit: usize) -> rusqlite::Result<Vec<Hit>> {
    let (sql, snippet_col) = match stream {
        Stream::Window => (
            "SELECT s.session_id, s.started_at_ms, s.app, s.title, snippet(activity_fts, -1, '[', ']', '…', 12), s.session_id
             FROM activity_fts f JOIN activity_sessions s ON s.session_id = f.rowid
             WHERE activity_fts MATCH ?1 AND s.started_at_ms < ?3 AND coalesce(s.ended_at_ms, s.last_seen_ms) >= ?2
               AND (?4 IS NULL OR lower(s.app) = lower(?4))
             ORDER BY bm25(activity_fts) LIMIT ?5",
            4,
        ),
        Stream::Typing => (
            "SELECT k.chunk_id, k.started_at_ms, k.app, k.title, snippet(keystroke_fts, -1, '[', ']', '…', 12),
                    (SELECT session_id FROM activity_sessions WHERE started_at_ms <= k.started_at_ms ORDER BY started_at_ms DESC LIMIT 1)
             FROM keystroke_fts f JOIN keystroke_chunks k ON k.chunk_id = f.rowid
             WHERE keystroke_fts MATCH ?1 AND k.started_at_ms < ?3 AND k.ended_at_ms >= ?2
               AND (?4 IS NULL OR lower(k.app) = lower(?4))
             ORDER BY bm25(keystroke_fts) LIMIT ?5",
            4,
        ),
        Stream::Clipboard => (
            "SELECT c.clip_id, c.at_ms, c.app, c.title, snippet(clipboard_fts, -1, '[', ']', '…', 12),
                    (SELECT session_id FROM activity_sessions WHERE started_at_ms <= c.at_ms ORDER BY started_at_ms DESC LIMIT 1)
             FROM clipboard_fts f JOIN clipboard_events c ON c.clip_id = f.rowid
             WHERE clipboard_fts MATCH ?1 AND c.at_ms < ?3 AND c.at_ms >= ?2
               AND (?4 IS NULL OR lower(c.app) = lower(?4))
             ORDER BY bm25(clipboard_fts) LIMIT ?5",
            4,
        ),
        Stream::Audio => (
            "SELECT a.transcript_id, a.started_at_ms, nullif(a.app, ''),
                    CASE a.source WHEN 'mic' THEN 'You (microphone)' ELSE 'Others (system audio)' END,
                    snippet(audio_fts, -1, '[', ']', '…', 12),
                    (SELECT session_id FROM activity_sessions WHERE started_at_ms <= a.started_at_ms ORDER BY started_at_ms DESC LIMIT 1)
             FROM audio_fts f JOIN audio_transcripts a ON a.transcript_id = f.rowid
             WHERE audio_fts MATCH ?1 AND a.started_at_ms < ?3 AND a.ended_at_ms >= ?2
               AND (?4 IS NULL OR lower(a.app) = lower(?4))
             ORDER BY bm25(audio_fts) LIMIT ?5",
            4,
        ),
        Stream::Screen => (
            "SELECT s.screen_id, s.seen_at_ms, s.app, s.title, snippet(screen_fts, -1, '[', ']', '…', 12),
                    coalesce(s.session_id, (SELECT session_id FROM activity_sessions WHERE started_at_ms <= s.seen_at_ms ORDER BY started_at_ms DESC LIMIT 1))
             FROM screen_fts f JOIN screen_texts s ON s.screen_id = f.rowid
             WHERE screen_fts MATCH ?1 AND s.seen_at_ms < ?3 AND s.seen_at_ms >= ?2
               AND (?4 IS NULL OR lower(s.app) = lower(?4))
             ORDER BY bm25(screen_fts) LIMIT ?5",
            4,
        ),
        Stream::Document => (
            "SELECT p.part_id, p.added_at_ms, NULL, d.name || ' — ' || p.label, snippet(document_fts, -1, '[', ']', '…', 12), d.document_id
             FROM document_fts f JOIN document_parts p ON p.part_id = f.rowid JOIN documents d ON d.document_id = p.document_id
             WHERE document_fts MATCH ?1 AND p.added_at_ms < ?3 AND p.added_at_ms >= ?2 AND ?4 IS NULL
             ORDER BY bm25(document_fts) LIMIT ?5",
            4,
        ),
        Stream::Chat => (
            "SELECT m.message_id, m.created_at_ms, NULL, t.title, snippet(message_fts, -1, '[', ']', '…', 12), m.thread_id
             FROM message_fts f JOIN chat_messages m ON m.message_id = f.rowid JOIN chat_threads t ON t.thread_id = m.thread_id
             WHERE message_fts MATCH ?1 AND m.created_at_ms < ?3 AND m.created_at_ms >= ?2 AND ?4 IS NULL
             ORDER BY bm25(message_fts) LIMIT ?5",
            4,
        ),
        Stream::Summary => (
            "SELECT o.observation_id, o.period_start_ms, NULL, 'Summary of ' || o.kind, snippet(observation_fts, -1, '[', ']', '…', 12), o.observation_id
             FROM observation_fts f JOIN observations o ON o.observation_id = f.rowid
             WHERE observation_fts MATCH ?1 AND o.period_start_ms < ?3 AND o.period_end_ms >= ?2 AND ?4 IS NULL
             ORDER BY bm25(observation_fts) LIMIT ?5",
            4,
        ),
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(
        params![
            phrase(query),
            filters.since_millis.unwrap_or(i64::MIN),
            filters.until_millis.unwrap_or(i64::MAX),
            filters.app,
            limit as i64
        ],
        |row| {
            Ok(Hit {
                stream,
                id: row.get(0)?,
                at_millis: row.get(1)?,
                app: row.get(2)?,
                title: row.get(3)?,
                snippet: row.get(snippet_col)?,
                score: 0.0,
                open_id: row.get(snippet_col + 1)?,
            })
        },
    )?;
    rows.collect()
}

/// Fuses ranked lists: each hit scores Σ 1 / (k + rank) over the lists it is in.
pub fn reciprocal_rank_fusion(lists: Vec<Vec<Hit>>, limit: usize) -> Vec<Hit> {
    let mut fused: Vec<Hit> = Vec::new();
    for list in lists {
        for (rank, hit) in list.into_iter().enumerate() {
            let add = 1.0 / (RRF_K + rank as f64 + 1.0);
            match fused.iter_mut().find(|h| h.stream == hit.stream && h.id == hit.id) {
                Some(existing) => existing.score += add,
                None => fused.push(Hit { score: add, ..hit }),
            }
        }
    }
    fused.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.at_millis.cmp(&a.at_millis)));
    fused.truncate(limit);
    fused
}

impl Filters {
    /// The streams to search (none chosen: all).
    pub fn streams(&self) -> Vec<Stream> {
        if self.streams.is_empty() { Stream::ALL.to_vec() } else { self.streams.clone() }
    }

    /// Whether a hit of `stream` from `app` spanning `[start, end]` passes.
    pub fn admits(&self, stream: Stream, app: Option<&str>, start_millis: i64, end_millis: i64) -> bool {
        self.streams().contains(&stream)
            && start_millis < self.until_millis.unwrap_or(i64::MAX)
            && end_millis >= self.since_millis.unwrap_or(i64::MIN)
            && self.app.as_ref().is_none_or(|want| app.is_some_and(|a| a.eq_ignore_ascii_case(want)))
    }
}

/// One BM25-ranked list per stream the filters allow.
pub fn keyword_lists(conn: &Connection, query: &str, filters: &Filters, limit: usize) -> rusqlite::Result<Vec<Vec<Hit>>> {
    if query.split_whitespace().next().is_none() {
        return Ok(Vec::new());
    }
    filters.streams().into_iter().map(|stream| stream_hits(conn, stream, query, filters, limit)).collect()
}

/// Keyword search over every stream the filters allow, fused into one list.
pub fn search(conn: &Connection, query: &str, filters: &Filters, limit: usize) -> rusqlite::Result<Vec<Hit>> {
    Ok(reciprocal_rank_fusion(keyword_lists(conn, query, filters, limit)?, limit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{FlushReason, KeystrokeChunk};
    use crate::records::ActivitySession;

    #[test]
    fn one_query_finds_every_stream_with_filters_and_fused_ranks() {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        let session = |id, app: &str, title: &str, at| ActivitySession {
            session_id: id,
            app: app.into(),
            title: title.into(),
            window_id: 1,
            started_at_millis: at,
            ended_at_millis: Some(at + 1000),
            ..Default::default()
        };
        crate::capture::db::upsert_session(&conn, &session(1, "firefox", "Invoice 2291 - Mail", 1_000)).unwrap();
        crate::capture::db::upsert_session(&conn, &session(2, "code", "invoice.rs - cowork", 5_000)).unwrap();
        crate::capture::db::insert_keystroke_chunk(
            &conn,
            &KeystrokeChunk {
                chunk_id: 3,
                app: "Slack".into(),
                title: "#finance".into(),
                pid: None,
                started_at_millis: 9_000,
                ended_at_millis: 9_500,
                text: "paid the invoice today".into(),
                shortcuts: vec![],
                flush_reason: FlushReason::Enter,
            },
        )
        .unwrap();
        let all = search(&conn, "invoice", &Filters::default(), 10).unwrap();
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(all.iter().any(|h| h.stream == Stream::Typing && h.snippet.contains("[invoice]")), "{all:?}");
        let code = search(&conn, "invoice", &Filters { app: Some("CODE".into()), ..Filters::default() }, 10).unwrap();
        assert_eq!(code.iter().map(|h| h.id).collect::<Vec<_>>(), vec![2]);
        let late = search(&conn, "invoice", &Filters { since_millis: Some(8_000), ..Filters::default() }, 10).unwrap();
        assert_eq!(late.iter().map(|h| h.id).collect::<Vec<_>>(), vec![3]);
        let windows = search(&conn, "invoice", &Filters { streams: vec![Stream::Window], ..Filters::default() }, 10).unwrap();
        assert!(windows.iter().all(|h| h.stream == Stream::Window) && windows.len() == 2);
        assert!(search(&conn, "  ", &Filters::default(), 10).unwrap().is_empty());
        assert!(search(&conn, "\"unbalanced AND (", &Filters::default(), 10).is_ok(), "user text is quoted, not parsed");
    }

    #[test]
    fn fusion_rewards_agreement_between_lists() {
        let hit = |id, at| Hit { stream: Stream::Window, id, at_millis: at, app: None, title: String::new(), snippet: String::new(), score: 0.0, open_id: Some(id) };
        // Id 2 is second in both lists; id 1 first in one only: agreement wins.
        let fused = reciprocal_rank_fusion(vec![vec![hit(1, 0), hit(2, 0)], vec![hit(3, 0), hit(2, 0)]], 10);
        assert_eq!(fused[0].id, 2);
        assert_eq!(fused.len(), 3);
    }
}
