//! The `search` worker: owns the faiss indexes and its own read-only
//! connection, answers search-as-you-type (keyword and vector halves fused,
//! `memory::search` and `memory::hybrid`) and the chat's recall, and keeps the
//! indexes in step with the embed worker. Split from `search.rs` so the pure
//! search does not import the event bus that carries its results.
//!
//! Its channel (`SearchCommand`, bounded(64)) carries the UI's `Query`, the
//! agent's and apps' `Recall { reply }`, and the embed worker's `IndexAdd` /
//! `IndexRemove`. Of a burst of queries only the newest runs, and a running
//! one is interrupted (SQLite's progress handler) when the UI's shared
//! `latest` generation moves past it.
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use rusqlite::Connection;

use crate::memory::Namespace;
use crate::memory::embed::SharedEmbedder;
use crate::memory::events::MemoryEvent;
use crate::memory::hybrid::{ChunkHit, hybrid_search};
use crate::memory::index::IndexSet;
use crate::memory::jobs::{Added, Removed};
use crate::memory::search::Filters;
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, spawn_supervised};

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
    sink: EventSink<MemoryEvent>,
    last_save: Instant,
}

impl SearchWorker {
    pub fn new(db_path: PathBuf, index_dir: PathBuf, embedder: SharedEmbedder, latest: Arc<AtomicU64>, sink: EventSink<MemoryEvent>) -> Self {
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
        self.sink.send(MemoryEvent::SearchResults { generation, query: query.to_owned(), hits, millis, error, keyword_only });
    }

    fn recall(&mut self, query: &str, namespaces: &[Namespace], k: usize) -> Result<Vec<ChunkHit>, String> {
        let model = self.embedder.get()?;
        self.ensure_indexes()?;
        self.connection()?;
        let (indexes, conn) = (self.indexes.as_mut().expect("opened"), self.conn.as_ref().expect("connected"));
        let hits = crate::memory::hybrid::recall(&model, indexes, conn, query, namespaces, k)?;
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
    sink: EventSink<MemoryEvent>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<SearchCommand>> {
    spawn_supervised::<SearchWorker, _, _>(WorkerName::Search, policy, sink.clone(), channel, move |_ctx| {
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
        let session = crate::records::ActivitySession {
            session_id: 1,
            app: "firefox".into(),
            title: "Invoice 2291".into(),
            window_id: 1,
            started_at_millis: 1_000,
            ended_at_millis: Some(2_000),
            ..Default::default()
        };
        crate::capture::db::upsert_session(&conn, &session).unwrap();
        let (events_tx, events) = crossbeam_channel::bounded(64);
        let sink = EventSink::<crate::events::AppEvent>::new(events_tx, || {}).narrow();
        // Queue the burst before the worker starts, as typing does while it is busy.
        let (tx, rx) = bounded(16);
        for (generation, query) in [(1, "i"), (2, "in"), (3, "invoice")] {
            tx.send(SearchCommand::Query { generation, query: query.into(), filters: Filters::default() }).unwrap();
        }
        tx.send(SearchCommand::Shutdown).unwrap();
        let latest = Arc::new(AtomicU64::new(3));
        let embedder = SharedEmbedder::new(dir.path().join("no-model"));
        let mut worker = SearchWorker::new(db, dir.path().join("vectors"), embedder, latest, sink.clone());
        worker.run(&rx, &WorkerContext::new(WorkerName::Search, &sink)).unwrap();
        let answered: Vec<(u64, usize, Option<String>)> = events
            .try_iter()
            .filter_map(|e| match e {
                crate::events::AppEvent::Memory(MemoryEvent::SearchResults { generation, hits, keyword_only, .. }) => Some((generation, hits.len(), keyword_only)),
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
