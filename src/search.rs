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
}

impl Stream {
    pub const ALL: [Stream; 5] = [Stream::Window, Stream::Typing, Stream::Clipboard, Stream::Chat, Stream::Summary];

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "window" | "windows" => Some(Stream::Window),
            "typing" | "keys" => Some(Stream::Typing),
            "clipboard" => Some(Stream::Clipboard),
            "chat" | "messages" => Some(Stream::Chat),
            "summary" | "summaries" => Some(Stream::Summary),
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
        }
    }

    /// The vector index its chunks go to.
    pub fn namespace(self) -> crate::memory::Namespace {
        use crate::memory::Namespace;
        match self {
            Stream::Window | Stream::Typing | Stream::Clipboard => Namespace::Activity,
            Stream::Chat => Namespace::Conversation,
            Stream::Summary => Namespace::Observation,
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
    use crate::capture::keys::{FlushReason, KeystrokeChunk};
    use crate::events::ActivitySession;

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
        crate::store::upsert_session(&conn, &session(1, "firefox", "Invoice 2291 - Mail", 1_000)).unwrap();
        crate::store::upsert_session(&conn, &session(2, "code", "invoice.rs - cowork", 5_000)).unwrap();
        crate::store::insert_keystroke_chunk(
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

// ------------------------------------------------------------------ worker

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};

use crate::embed::SharedEmbedder;
use crate::events::{AppEvent, WorkerName};
use crate::memory::hybrid::{ChunkHit, MIN_SIMILARITY, VECTOR_K, hybrid_search, nearest, resolve};
use crate::memory::index::IndexSet;
use crate::memory::jobs::{Added, Removed};
use crate::memory::Namespace;
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, spawn_supervised};

/// Changed indexes are written at most this often (and at shutdown, and
/// right after a deletion so removed vectors leave the disk too).
const SAVE_EVERY: Duration = Duration::from_secs(300);

#[derive(Debug)]
pub enum SearchCommand {
    /// Search-as-you-type: a newer query makes older waiting ones moot, and
    /// interrupts a running one (see `latest`).
    Query { generation: u64, query: String, filters: Filters },
    /// Vectors the embed worker committed.
    IndexAdd(Added),
    /// Vectors of deleted chunks.
    IndexRemove(Removed),
    /// Chunks nearest in meaning to `query` (chat context); answered on `reply`.
    Recall { query: String, namespaces: Vec<Namespace>, k: usize, reply: Sender<Result<Vec<ChunkHit>, String>> },
    /// Write changed indexes now (tests, benches).
    Save(Sender<()>),
    Shutdown,
}

/// The `search` worker: owns the faiss indexes and its own read-only
/// connection, so searching never waits behind (or delays) the store's writes.
pub struct SearchWorker {
    db_path: PathBuf,
    index_dir: PathBuf,
    conn: Option<Connection>,
    embedder: SharedEmbedder,
    indexes: Option<IndexSet>,
    /// The newest query generation the UI has asked for: a running query
    /// with an older one is interrupted.
    latest: Arc<AtomicU64>,
    sink: EventSink,
    last_save: Instant,
}

impl SearchWorker {
    pub fn new(db_path: PathBuf, index_dir: PathBuf, embedder: SharedEmbedder, latest: Arc<AtomicU64>, sink: EventSink) -> Self {
        Self { db_path, index_dir, conn: None, embedder, indexes: None, latest, sink, last_save: Instant::now() }
    }

    fn connection(&mut self) -> Result<&mut Connection, String> {
        if self.conn.is_none() {
            self.conn = Some(crate::store::open_read_only(&self.db_path).map_err(|err| format!("{err:#}"))?);
        }
        Ok(self.conn.as_mut().expect("just opened"))
    }

    /// Opens the indexes on first need (rebuilding stale ones from SQLite).
    fn ensure_indexes(&mut self) -> Result<(), String> {
        if self.indexes.is_none() {
            let dir = self.index_dir.clone();
            let conn = self.connection()?;
            let (set, _) = IndexSet::open(&dir, conn).map_err(|err| format!("the vector indexes cannot open: {err:#}"))?;
            self.indexes = Some(set);
        }
        Ok(())
    }

    fn run_query(&mut self, generation: u64, query: &str, filters: &Filters) {
        let started = Instant::now();
        let model = self.embedder.get();
        let ready = self.ensure_indexes();
        let result = match self.connection() {
            Err(err) => Err(err),
            Ok(_) => {
                let conn = self.conn.as_mut().expect("connected");
                // Interrupt this query as soon as a newer one is asked for.
                let latest = self.latest.clone();
                let _ = conn.progress_handler(5_000, Some(move || latest.load(Ordering::Relaxed) > generation));
                let semantic = match (&model, ready, self.indexes.as_mut()) {
                    (Ok(model), Ok(()), Some(indexes)) => Ok((model.as_ref(), indexes)),
                    (Err(err), _, _) => Err(format!("the embedding model is not available ({err})")),
                    (_, Err(err), _) => Err(err),
                    _ => Err("the vector indexes are not available".to_owned()),
                };
                let outcome = hybrid_search(conn, semantic, query, filters, 50).map_err(|err| format!("{err:#}"));
                let _ = conn.progress_handler(0, None::<fn() -> bool>);
                outcome
            }
        };
        if self.latest.load(Ordering::Relaxed) > generation {
            return; // overtaken: the newer query answers
        }
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        let (hits, error, keyword_only) = match result {
            Ok(outcome) => (outcome.hits, None, outcome.keyword_only),
            Err(error) => {
                self.conn = None;
                (Vec::new(), Some(error), None)
            }
        };
        self.sink.send(AppEvent::SearchResults { generation, query: query.to_owned(), hits, millis, error, keyword_only });
    }

    fn recall(&mut self, query: &str, namespaces: &[Namespace], k: usize) -> Result<Vec<ChunkHit>, String> {
        let model = self.embedder.get()?;
        self.ensure_indexes()?;
        let indexes = self.indexes.as_mut().expect("opened");
        let found = nearest(&model, indexes, query, namespaces, VECTOR_K.max(k)).map_err(|err| format!("{err:#}"))?;
        let conn = self.connection()?;
        let mut hits = resolve(conn, &found, &Filters::default(), MIN_SIMILARITY).map_err(|err| err.to_string())?;
        hits.truncate(k);
        for hit in &hits {
            tracing::debug!(score = hit.score, title = %hit.title, text = %hit.body(), "recalled");
        }
        Ok(hits)
    }

    fn apply_index_change(&mut self, command: SearchCommand) -> anyhow::Result<()> {
        if let Err(err) = self.ensure_indexes() {
            // They will be built from SQLite, which already holds this change, when they can open.
            tracing::warn!(%err, "vector index change deferred");
            return Ok(());
        }
        let conn = self.conn.as_ref().expect("opened with the indexes");
        let indexes = self.indexes.as_mut().expect("opened");
        match command {
            SearchCommand::IndexAdd(added) => indexes.add(&added, conn)?,
            SearchCommand::IndexRemove(removed) => {
                indexes.remove(&removed, conn)?;
                // Removed vectors leave the disk now, not at the next periodic save.
                self.save()?;
            }
            _ => {}
        }
        Ok(())
    }

    fn save(&mut self) -> anyhow::Result<()> {
        if let Some(indexes) = self.indexes.as_mut() {
            indexes.save()?;
        }
        self.last_save = Instant::now();
        Ok(())
    }

    /// Handles one non-query command; returns false on Shutdown.
    fn handle(&mut self, command: SearchCommand) -> anyhow::Result<bool> {
        match command {
            SearchCommand::Query { generation, query, filters } => self.run_query(generation, &query, &filters),
            SearchCommand::IndexAdd(_) | SearchCommand::IndexRemove(_) => self.apply_index_change(command)?,
            SearchCommand::Recall { query, namespaces, k, reply } => {
                let _ = reply.send(self.recall(&query, &namespaces, k));
            }
            SearchCommand::Save(ack) => {
                self.save()?;
                let _ = ack.send(());
            }
            SearchCommand::Shutdown => {
                self.save()?;
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Supervised for SearchWorker {
    type Command = SearchCommand;

    fn run(&mut self, commands: &Receiver<SearchCommand>, _ctx: &WorkerContext) -> anyhow::Result<()> {
        loop {
            let first = match commands.recv_timeout(SAVE_EVERY) {
                Ok(command) => command,
                Err(RecvTimeoutError::Timeout) => {
                    if self.indexes.as_ref().is_some_and(IndexSet::is_dirty) && self.last_save.elapsed() >= SAVE_EVERY {
                        self.save()?;
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.save()?;
                    return Ok(());
                }
            };
            // Everything waiting runs in order, except that only the newest query runs (the user typed on).
            let mut batch = vec![first];
            batch.extend(commands.try_iter());
            let newest_query = batch.iter().rposition(|c| matches!(c, SearchCommand::Query { .. }));
            for (position, command) in batch.into_iter().enumerate() {
                if matches!(command, SearchCommand::Query { .. }) && Some(position) != newest_query {
                    continue;
                }
                if !self.handle(command)? {
                    return Ok(());
                }
            }
        }
    }
}

/// The search worker's command channel, made early so the embed and llm workers can hold senders.
pub fn channel() -> (Sender<SearchCommand>, Receiver<SearchCommand>) {
    bounded(64)
}

pub fn spawn_search(
    db_path: PathBuf,
    index_dir: PathBuf,
    embedder: SharedEmbedder,
    latest: Arc<AtomicU64>,
    channel: (Sender<SearchCommand>, Receiver<SearchCommand>),
    sink: EventSink,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<SearchCommand>> {
    spawn_supervised::<SearchWorker, _>(WorkerName::Search, policy, sink.clone(), channel, move |_ctx| {
        Ok(SearchWorker::new(db_path.clone(), index_dir.clone(), embedder.clone(), latest.clone(), sink.clone()))
    })
}

#[cfg(test)]
mod worker_tests {
    use super::*;

    #[test]
    fn a_burst_of_queries_answers_the_newest_and_skips_the_stale() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("cowork.db");
        let conn = crate::store::open_writer(&db).unwrap();
        let session = crate::events::ActivitySession {
            session_id: 1,
            app: "firefox".into(),
            title: "Invoice 2291".into(),
            window_id: 1,
            started_at_millis: 1_000,
            ended_at_millis: Some(2_000),
            ..Default::default()
        };
        crate::store::upsert_session(&conn, &session).unwrap();
        let (events_tx, events) = crossbeam_channel::bounded(64);
        let sink = EventSink::new(events_tx, || {});
        // Queue the burst before the worker starts, as typing does while it is busy.
        let (tx, rx) = bounded(16);
        for (generation, query) in [(1, "i"), (2, "in"), (3, "invoice")] {
            tx.send(SearchCommand::Query { generation, query: query.into(), filters: Filters::default() }).unwrap();
        }
        tx.send(SearchCommand::Shutdown).unwrap();
        let latest = Arc::new(AtomicU64::new(3));
        let embedder = SharedEmbedder::new(dir.path().join("no-model"));
        let mut worker = SearchWorker::new(db, dir.path().join("vectors"), embedder, latest, sink.clone());
        worker.run(&rx, &WorkerContext { name: WorkerName::Search, sink }).unwrap();
        let answered: Vec<(u64, usize, Option<String>)> = events
            .try_iter()
            .filter_map(|e| match e {
                AppEvent::SearchResults { generation, hits, keyword_only, .. } => Some((generation, hits.len(), keyword_only)),
                _ => None,
            })
            .collect();
        assert_eq!(answered.len(), 1, "only the newest query ran: {answered:?}");
        assert_eq!((answered[0].0, answered[0].1), (3, 1));
        // No embedding model here: keyword results, and the note says so.
        let note = answered[0].2.as_deref().unwrap_or_default();
        assert!(note.starts_with("the embedding model is not available"), "{note}");
    }
}
