//! The `embed` worker: turns queued rows into vectors, one checkpointed batch
//! at a time, on a low-priority thread (nice 10) with its own low-priority
//! rayon pool (`embed-N`), so capture and the UI always come first. It pauses
//! while the user types into cowork (the app stamps `typing_at_millis`). The
//! store wakes it after each commit that wrote something (`EmbedCommand::Wake`
//! by `try_send` on its bounded(16) channel: full means a wake-up already
//! waits). Without a model it reports `degraded` and search stays keyword-only,
//! saying so.
//!
//! It reads the embedding tables (jobs, chunks, vectors, tombstones) on a
//! read-only connection and writes them through the store's one writer
//! (`StoreLink::call`): a batch's vectors and its checkpoint commit together in
//! one transaction there, and the worker goes on once they have.
//!
//! Committed vectors go to the `search` worker (`SearchCommand::IndexAdd`,
//! `IndexRemove`), which owns the faiss indexes.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use rusqlite::Connection;

use super::jobs::{self, JOB_MAX_CHUNKS};
use crate::ids::now_millis;
use crate::memory::embed::SharedEmbedder;
use crate::memory::events::MemoryEvent;
use crate::memory::search_worker::SearchCommand;
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, WorkerState, spawn_supervised};
use crate::store::StoreLink;

/// Chunks per forward pass (and per checkpoint).
pub const BATCH: usize = 32;
/// How long after the user's last keystroke in cowork embedding stays paused.
pub const TYPING_PAUSE: Duration = Duration::from_millis(1500);
/// Safety wait between looks at the queue: the store wakes the worker after
/// every commit that can queue rows, so this only bounds a missed wake.
const IDLE_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub enum EmbedCommand {
    /// The store committed rows: look at the queue now.
    Wake,
    /// Failed jobs go back to pending.
    RetryFailed,
    Shutdown,
}

pub struct EmbedWorker {
    /// Read-only: what to embed next, progress.
    conn: Connection,
    /// Every write goes to the store's writer.
    store: StoreLink,
    embedder: SharedEmbedder,
    index: Sender<SearchCommand>,
    sink: EventSink<MemoryEvent>,
    typing_at_millis: Arc<AtomicI64>,
    pool: rayon::ThreadPool,
    model_error: Option<String>,
    last_progress: Option<Instant>,
    /// Work happened since the last progress report.
    progress_stale: bool,
    /// Drop the shared embedding model after this long without use.
    pub unload_after: Duration,
}

impl EmbedWorker {
    pub fn open(
        store: StoreLink,
        embedder: SharedEmbedder,
        index: Sender<SearchCommand>,
        sink: EventSink<MemoryEvent>,
        typing_at_millis: Arc<AtomicI64>,
    ) -> anyhow::Result<Self> {
        // The store first: it made the file by the time it answers.
        let recovered = store.write("recover embedding jobs", |conn| jobs::recover(conn, now_millis()))?;
        let conn = store.read_only()?;
        if recovered.failed > 0 {
            sink.notice(format!("{} embedding job(s) were stuck and failed (Settings → Memory can retry them)", recovered.failed));
        }
        if recovered.resumed > 0 {
            tracing::info!(resumed = recovered.resumed, "resuming embedding jobs from their checkpoints");
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("embed-{i}"))
            .start_handler(|_| crate::runtime::lower_thread_priority())
            .build()?;
        Ok(Self {
            conn,
            store,
            embedder,
            index,
            sink,
            typing_at_millis,
            pool,
            model_error: None,
            unload_after: crate::memory::embed::EMBEDDER_IDLE_UNLOAD,
            last_progress: None,
            progress_stale: true,
        })
    }

    fn user_is_typing(&self) -> bool {
        now_millis() - self.typing_at_millis.load(Ordering::Relaxed) < TYPING_PAUSE.as_millis() as i64
    }

    /// Passes deletions on to the indexes.
    pub fn forward_tombstones(&mut self) -> anyhow::Result<usize> {
        let removed = self.store.write("take tombstones", jobs::take_tombstones)?;
        let count = removed.iter().map(|r| r.ids.len()).sum();
        for entry in removed {
            let _ = self.index.send_timeout(SearchCommand::IndexRemove(entry), Duration::from_secs(5));
        }
        Ok(count)
    }

    /// One unit of work: a batch of the oldest job, or a new job from the
    /// queue. Returns whether there may be more to do right away.
    pub fn step(&mut self, ctx: &WorkerContext) -> anyhow::Result<bool> {
        Ok(self.step_counted(ctx)?.is_some())
    }

    /// `step`, returning how many chunks it embedded (`None`: nothing to do).
    /// The model is loaded only once there is something to embed.
    pub fn step_counted(&mut self, ctx: &WorkerContext) -> anyhow::Result<Option<usize>> {
        if self.forward_tombstones()? > 0 {
            self.progress_stale = true;
        }
        let now = now_millis();
        let job = match jobs::next_job(&self.conn)? {
            Some(job) => job,
            None => match self.store.write("create embedding job", move |conn| jobs::create_job(conn, now, JOB_MAX_CHUNKS))? {
                Some(job) => job,
                None => {
                    // Idle: one last report after work, then no more reads.
                    if self.progress_stale {
                        self.report_progress(true);
                    }
                    return Ok(None);
                }
            },
        };
        self.progress_stale = true;
        let embedder = match self.embedder.get() {
            Ok(model) => {
                if self.model_error.take().is_some() {
                    ctx.report(WorkerState::Running);
                }
                model
            }
            Err(error) => {
                if self.model_error.as_ref() != Some(&error) {
                    ctx.report(WorkerState::Degraded(format!("search by meaning is off, keyword search only: {error}")));
                    self.model_error = Some(error);
                }
                return Ok(None);
            }
        };
        let job_id = job.job_id;
        self.store.write("begin embedding job", move |conn| jobs::begin(conn, job_id, now))?;
        let batch = jobs::next_batch(&self.conn, job.job_id, BATCH)?;
        if batch.is_empty() {
            self.store.write("finish embedding job", move |conn| jobs::finish(conn, job_id, now))?;
            self.report_progress(false);
            return Ok(Some(0));
        }
        let texts: Vec<&str> = batch.iter().map(|c| c.text.as_str()).collect();
        let vectors = match self.pool.install(|| embedder.embed(&texts)) {
            Ok(vectors) => vectors,
            Err(err) => {
                let error = format!("{err:#}");
                self.store.write("fail embedding job", move |conn| jobs::fail(conn, job_id, &error, now_millis()))?;
                self.sink.notice(format!("an embedding job failed: {err:#}"));
                return Ok(Some(0));
            }
        };
        let mut stored = 0;
        let committed = self.store.write("embedding batch", move |conn| jobs::commit_batch(conn, job_id, &batch, &vectors, now_millis()))?;
        for added in committed {
            stored += added.ids.len();
            // A search worker that is not there catches up from SQLite when it opens the indexes.
            let _ = self.index.send_timeout(SearchCommand::IndexAdd(added), Duration::from_secs(5));
        }
        self.report_progress(false);
        Ok(Some(stored))
    }

    /// Progress to the UI at most every 2 s while working, and once when the
    /// queue runs dry (the counts read the chunk table, so never while idle).
    fn report_progress(&mut self, force: bool) {
        if !force && self.last_progress.is_some_and(|at| at.elapsed() < Duration::from_secs(2)) {
            return;
        }
        if let Ok(progress) = jobs::progress(&self.conn) {
            self.sink.send(MemoryEvent::MemoryProgress(progress));
            self.last_progress = Some(Instant::now());
            self.progress_stale = false;
        }
    }

    pub fn progress(&self) -> anyhow::Result<jobs::Progress> {
        Ok(jobs::progress(&self.conn)?)
    }

    /// Returns false on Shutdown.
    pub fn handle(&mut self, command: EmbedCommand) -> anyhow::Result<bool> {
        match command {
            EmbedCommand::Wake => {}
            EmbedCommand::RetryFailed => {
                let retried = self.store.write("retry failed embedding jobs", |conn| jobs::retry_failed(conn, now_millis()))?;
                tracing::info!(retried, "retrying failed embedding jobs");
            }
            EmbedCommand::Shutdown => {
                self.store.write("pause embedding jobs", |conn| jobs::pause_processing(conn, now_millis()))?;
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Supervised for EmbedWorker {
    type Command = EmbedCommand;

    fn run(&mut self, commands: &Receiver<EmbedCommand>, ctx: &WorkerContext) -> anyhow::Result<()> {
        crate::runtime::lower_thread_priority();
        let mut busy = true;
        loop {
            let wait = if self.user_is_typing() {
                Duration::from_millis(200)
            } else if busy {
                Duration::ZERO
            } else {
                // Wake in time to drop an idle embedding model (search loads it again on demand).
                self.embedder.unload_due_in(self.unload_after).map_or(IDLE_WAIT, |due| due.max(Duration::from_secs(1)).min(IDLE_WAIT))
            };
            match commands.recv_timeout(wait) {
                Ok(command) => {
                    if !self.handle(command)? {
                        return Ok(());
                    }
                    while let Ok(command) = commands.try_recv() {
                        if !self.handle(command)? {
                            return Ok(());
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
            if self.user_is_typing() {
                continue;
            }
            busy = self.step(ctx)?;
            if !busy {
                self.embedder.unload_if_idle(self.unload_after);
            }
        }
    }
}

/// The embed worker's command channel, made before the store so the store can wake it.
pub fn channel() -> (Sender<EmbedCommand>, Receiver<EmbedCommand>) {
    bounded(16)
}

pub fn spawn_embed(
    store: StoreLink,
    embedder: SharedEmbedder,
    index: Sender<SearchCommand>,
    typing_at_millis: Arc<AtomicI64>,
    channel: (Sender<EmbedCommand>, Receiver<EmbedCommand>),
    sink: EventSink<MemoryEvent>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<EmbedCommand>> {
    spawn_supervised::<EmbedWorker, _, _>(WorkerName::Embed, policy, sink.clone(), channel, move |_ctx| {
        EmbedWorker::open(store.clone(), embedder.clone(), index.clone(), sink.clone(), typing_at_millis.clone())
    })
}
