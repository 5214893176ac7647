//! `cowork search` (hybrid: keywords and meaning) and `cowork memory …`
//! (embed now, status, retry failed jobs).

use std::time::Instant;

use crate::config::Paths;
use crate::memory::jobs;
use crate::memory::embed::SharedEmbedder;
use crate::memory::embed_worker::EmbedWorker;
use crate::memory::hybrid::{Outcome, hybrid_search};
use crate::memory::index::{IndexSet, index_dir};
use crate::memory::search::Filters;
use crate::memory::search_worker::SearchCommand;
use crate::runtime::{EventSink, WorkerContext};

fn embedder(paths: &Paths) -> SharedEmbedder {
    SharedEmbedder::new(crate::memory::embed::model_dir(&paths.models_dir))
}

/// Hybrid search from the command line: the indexes are read from their
/// files (or rebuilt in memory from SQLite when stale; this process never
/// writes them, the app's search worker does).
pub fn search(paths: &Paths, query: &str, filters: &Filters, limit: usize) -> anyhow::Result<(Outcome, f64)> {
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let started = Instant::now();
    let model = embedder(paths).get();
    let opened = match &model {
        Ok(_) => IndexSet::open(&index_dir(&paths.data_dir), &conn).map(|(set, _)| set).map_err(|err| format!("{err:#}")),
        Err(err) => Err(format!("the embedding model is not available ({err})")),
    };
    let mut indexes = opened;
    let load_millis = started.elapsed().as_secs_f64() * 1000.0;
    let semantic = match (&model, indexes.as_mut()) {
        (Ok(model), Ok(indexes)) => Ok((model.as_ref(), indexes)),
        (_, Err(err)) => Err(err.clone()),
        (Err(err), _) => Err(err.clone()),
    };
    let outcome = hybrid_search(&conn, semantic, query, filters, limit)?;
    Ok((outcome, load_millis))
}

/// `cowork memory embed`: embeds everything queued, in this process, with
/// the same jobs and checkpoints as the app. Returns (chunks embedded, jobs resumed).
pub fn embed_now(paths: &Paths) -> anyhow::Result<usize> {
    let sink = EventSink::ignored();
    // No search worker here: the app's indexes catch up from SQLite when they next open.
    let (index, _) = crossbeam_channel::bounded(1);
    let shared = embedder(paths);
    shared.get().map_err(|err| anyhow::anyhow!("the embedding model cannot load: {err}"))?;
    // A writer thread as in the app, without its hooks: retention and crash recovery are the app's.
    let mut store = crate::store::spawn_store(paths.db_path(), sink.clone(), crate::runtime::RestartPolicy::default(), crate::store::StoreHooks::default())?;
    let embedded = embed_all(crate::store::StoreLink::new(paths.db_path(), store.commands.clone()), shared, index, &sink);
    store.shutdown(crate::store::StoreCommand::Shutdown, std::time::Duration::from_secs(30));
    embedded
}

fn embed_all(store: crate::store::StoreLink, shared: SharedEmbedder, index: crossbeam_channel::Sender<SearchCommand>, sink: &EventSink<crate::memory::events::MemoryEvent>) -> anyhow::Result<usize> {
    let typing = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let mut worker = EmbedWorker::open(store, shared, index, sink.clone(), typing)?;
    let ctx = WorkerContext::new(crate::runtime::WorkerName::Embed, sink);
    let started = Instant::now();
    let mut embedded = 0;
    while let Some(count) = worker.step_counted(&ctx)? {
        embedded += count;
        if count > 0 {
            let progress = worker.progress()?;
            eprintln!(
                "embedded {embedded} chunks ({:.0}/s); {} waiting, {} rows queued",
                embedded as f64 / started.elapsed().as_secs_f64(),
                progress.chunks_waiting,
                progress.queued_rows
            );
        }
    }
    Ok(embedded)
}

pub fn status(paths: &Paths) -> anyhow::Result<jobs::Progress> {
    let conn = crate::store::open_read_only(&paths.db_path())?;
    Ok(jobs::progress(&conn)?)
}

pub fn retry_failed(paths: &Paths) -> anyhow::Result<usize> {
    let conn = crate::store::open_writer(&paths.db_path())?;
    Ok(jobs::retry_failed(&conn, crate::ids::now_millis())?)
}
