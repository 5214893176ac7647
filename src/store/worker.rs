//! The `store` worker: owns the only writable connection of the sidebar process
//! and knows nothing of what it writes. It takes a few commands:
//! `StoreCommand::write` (a closure run in the next batch; batches are atomic
//! and bounded), `StoreCommand::run` (work run at once on the writer after the
//! batch is committed; `StoreLink::call` is one that sends its result back),
//! flush and shutdown. Each domain builds its commands beside its SQL
//! (`capture::db`, `chat`, `memory::commands`, `erase`, `agent::store`, …);
//! what must happen after a commit (waking the embed worker), at open (crash
//! recovery, sealing) or now and then (retention) is handed in as `StoreHooks`
//! by `workers.rs`.
//!
//! Its queue holds `STORE_QUEUE` (4096) commands. Each wake-up drains what is
//! queued (up to `MAX_BATCH` commands) and commits the writes in one
//! transaction. A commit that fails (a full disk) keeps the writes queued (the
//! oldest dropped and counted past `MAX_PENDING`), reports the worker
//! `degraded` and is retried every second. A write made with `write_during`
//! over a stretch of time deleted earlier in this run is dropped, so a session
//! still open at the deletion does not come back when it closes.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, bounded};
use rusqlite::{Connection, Transaction};

use crate::runtime::{EventSink, RestartPolicy, RuntimeEvent, Supervised, WorkerContext, WorkerHandle, WorkerName, WorkerState, spawn_supervised};
use crate::store::schema;

/// Room in the store's queue. Capture and llm block briefly when it is full
/// rather than lose rows; at 50k rows/s that is ~80 ms of backlog.
pub const STORE_QUEUE: usize = 4096;

/// Writes applied in one transaction at most.
const MAX_BATCH: usize = 2048;

/// How long to wait before retrying a batch that failed to commit (disk full, locked).
const RETRY_WRITE_AFTER: Duration = Duration::from_secs(1);

/// Pending writes kept in memory while the disk refuses them; past this the
/// oldest are dropped and counted, so a full disk cannot exhaust memory.
const MAX_PENDING: usize = 200_000;

/// A write for the next batch. It may run more than once (a batch that did
/// not commit is tried again), so it borrows what it writes.
pub type ApplyFn = Box<dyn Fn(&Transaction<'_>) -> rusqlite::Result<()> + Send + Sync>;

/// Work run at once on the writer connection; it says its own outcome.
pub type JobFn = Box<dyn FnOnce(&mut Writer<'_>) + Send + Sync>;

/// What a dropped write does instead, given the data directory.
pub type DroppedFn = Box<dyn FnOnce(&Path) + Send + Sync>;

/// Work run each time the database is opened.
pub type OnOpenFn = Arc<dyn Fn(&mut Writer<'_>) -> anyhow::Result<()> + Send + Sync>;

/// What the store worker is asked to do.
pub enum StoreCommand {
    /// Queued into the next batch.
    Write(Write),
    /// Run now, after what is queued is committed.
    Run { what: Cow<'static, str>, job: JobFn },
    /// Commit everything queued so far, then acknowledge (tests, shutdown, benches).
    Flush(Sender<()>),
    /// Fault injection for supervisor tests: panic inside the worker.
    InjectPanic,
    Shutdown,
}

/// A write waiting for the next transaction.
pub struct Write {
    what: Cow<'static, str>,
    /// The row it writes, when a newer write of it makes this one moot (a session's open and close).
    row: Option<(&'static str, i64)>,
    /// The time its row covers: a write over a range deleted earlier in this
    /// run (a session still open then, written again as it closes) is dropped.
    span: Option<(i64, i64)>,
    apply: ApplyFn,
    /// Run instead of the write when it is dropped, with the data directory (a kept audio file goes).
    dropped: Option<DroppedFn>,
}

impl StoreCommand {
    /// A write for the next batch, named `what` (logs, tests).
    pub fn write(what: impl Into<Cow<'static, str>>, apply: impl Fn(&Transaction<'_>) -> rusqlite::Result<()> + Send + Sync + 'static) -> Self {
        StoreCommand::Write(Write { what: what.into(), row: None, span: None, apply: Box::new(apply), dropped: None })
    }

    /// A write of a row covering `[start, end]`: dropped when a deletion in this run covered it.
    pub fn write_during(what: impl Into<Cow<'static, str>>, (start, end): (i64, i64), apply: impl Fn(&Transaction<'_>) -> rusqlite::Result<()> + Send + Sync + 'static) -> Self {
        StoreCommand::Write(Write { what: what.into(), row: None, span: Some((start, end)), apply: Box::new(apply), dropped: None })
    }

    /// What to do instead when the write is dropped (given the data directory).
    pub fn or_when_dropped(self, dropped: impl FnOnce(&Path) + Send + Sync + 'static) -> Self {
        match self {
            StoreCommand::Write(write) => StoreCommand::Write(Write { dropped: Some(Box::new(dropped)), ..write }),
            other => other,
        }
    }

    /// Names the row this writes (its kind and id): a newer write of the same row replaces it in a buffer.
    pub fn of_row(self, kind: &'static str, id: i64) -> Self {
        match self {
            StoreCommand::Write(write) => StoreCommand::Write(Write { row: Some((kind, id)), ..write }),
            other => other,
        }
    }

    /// The row a write names (`of_row`).
    pub fn row(&self) -> Option<(&'static str, i64)> {
        match self {
            StoreCommand::Write(write) => write.row,
            _ => None,
        }
    }

    /// Work run at once on the writer, after the batch is committed.
    pub fn run(what: impl Into<Cow<'static, str>>, job: impl FnOnce(&mut Writer<'_>) + Send + Sync + 'static) -> Self {
        StoreCommand::Run { what: what.into(), job: Box::new(job) }
    }

    /// What it does, in a few words with its arguments ("session", "load
    /// threads", "delete range 1000..2000"): for logs and tests, never for the model.
    pub fn what(&self) -> &str {
        match self {
            StoreCommand::Write(Write { what, .. }) | StoreCommand::Run { what, .. } => what,
            StoreCommand::Flush(_) => "flush",
            StoreCommand::InjectPanic => "inject panic",
            StoreCommand::Shutdown => "shutdown",
        }
    }

    /// Runs this command on `conn` at once, as the worker would (a write in its
    /// own transaction): for tools and tests that hold a connection of their own.
    pub fn run_on(self, conn: &Connection) -> anyhow::Result<()> {
        match self {
            StoreCommand::Write(write) => {
                let tx = schema::write_transaction(conn)?;
                (write.apply)(&tx)?;
                tx.commit()?;
            }
            StoreCommand::Run { job, .. } => {
                let sink = EventSink::<RuntimeEvent>::ignored();
                let mut deleted = Vec::new();
                let mut writer = Writer { conn, sink: &sink, deleted: &mut deleted, wrote: false };
                job(&mut writer);
            }
            StoreCommand::Flush(ack) => {
                let _ = ack.try_send(());
            }
            StoreCommand::InjectPanic | StoreCommand::Shutdown => {}
        }
        Ok(())
    }
}

impl std::fmt::Debug for StoreCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreCommand({})", self.what())
    }
}

/// What a job gets: the writer connection and the worker's few services.
pub struct Writer<'a> {
    conn: &'a Connection,
    sink: &'a EventSink<RuntimeEvent>,
    deleted: &'a mut Vec<(i64, i64, i64)>,
    wrote: bool,
}

impl Writer<'_> {
    /// The writer connection (reads see every committed write).
    pub fn conn(&self) -> &Connection {
        self.conn
    }

    /// Runs `work` in one write transaction and commits it.
    pub fn transaction<T>(&self, work: impl FnOnce(&Transaction<'_>) -> anyhow::Result<T>) -> anyhow::Result<T> {
        let tx = schema::write_transaction(self.conn)?;
        let value = work(&tx)?;
        tx.commit()?;
        Ok(value)
    }

    /// The directory holding the database file.
    pub fn data_dir(&self) -> Option<PathBuf> {
        data_dir(self.conn)
    }

    /// New rows or tombstones wait for the after-commit hook (the embed worker).
    pub fn wrote(&mut self) {
        self.wrote = true;
    }

    /// `[since, until)` was deleted now: writes of rows in it that arrive later in this run are dropped.
    pub fn deleted_range(&mut self, since_millis: i64, until_millis: i64) {
        self.deleted.push((since_millis, until_millis, crate::ids::now_millis()));
    }

    /// Something the user should see.
    pub fn notice(&self, text: impl Into<String>) {
        self.sink.notice(text);
    }
}

/// A job the store runs now and then (and once at start).
#[derive(Clone)]
pub struct Periodic {
    pub every: Duration,
    pub run: Arc<dyn Fn(&mut Writer<'_>) + Send + Sync>,
}

/// What the domains hand the store: work at open, after each commit, and now and then.
#[derive(Clone, Default)]
pub struct StoreHooks {
    /// Run once each time the database is opened (crash recovery, sealing).
    pub on_open: Vec<OnOpenFn>,
    /// Called after a commit that wrote something (the embed worker's wake-up).
    pub after_commit: Option<Arc<dyn Fn() + Send + Sync>>,
    pub periodic: Vec<Periodic>,
}

pub struct StoreWorker {
    conn: Connection,
    sink: EventSink<RuntimeEvent>,
    hooks: StoreHooks,
    pending: Vec<Write>,
    dropped_writes: u64,
    write_error: Option<String>,
    /// Ranges deleted in this run, with when: a session still open at deletion
    /// time is written again when it closes, and must not come back.
    deleted: Vec<(i64, i64, i64)>,
    /// When each periodic hook last ran.
    last_ran: Vec<Option<Instant>>,
}

impl StoreWorker {
    pub fn open(path: PathBuf, sink: EventSink<RuntimeEvent>, hooks: StoreHooks) -> anyhow::Result<Self> {
        let conn = schema::open_writer(&path)?;
        let last_ran = vec![None; hooks.periodic.len()];
        let mut worker = Self { conn, sink, hooks, pending: Vec::new(), dropped_writes: 0, write_error: None, deleted: Vec::new(), last_ran };
        for on_open in worker.hooks.on_open.clone() {
            worker.with_writer(|writer| on_open(writer))?;
        }
        Ok(worker)
    }

    /// Runs `work` with the worker's services; wakes the after-commit hook when it wrote.
    fn with_writer<T>(&mut self, work: impl FnOnce(&mut Writer<'_>) -> T) -> T {
        let mut writer = Writer { conn: &self.conn, sink: &self.sink, deleted: &mut self.deleted, wrote: false };
        let value = work(&mut writer);
        if writer.wrote {
            self.after_commit();
        }
        value
    }

    /// Handles one command. Returns false on Shutdown.
    pub fn handle(&mut self, command: StoreCommand) -> bool {
        match command {
            StoreCommand::Write(write) => self.queue(write),
            StoreCommand::Run { job, .. } => {
                self.commit_pending();
                self.with_writer(job);
            }
            StoreCommand::Flush(ack) => {
                self.commit_pending();
                let _ = ack.try_send(());
            }
            StoreCommand::InjectPanic => panic!("injected store fault"),
            StoreCommand::Shutdown => {
                self.commit_pending();
                return false;
            }
        }
        true
    }

    /// Runs the periodic hooks that are due. Returns how long until the next one is.
    pub fn run_due(&mut self) -> Duration {
        // Runs once per batch (the capture write path): nothing is cloned unless a job is due.
        let mut next = Duration::from_secs(3600);
        for index in 0..self.hooks.periodic.len() {
            let every = self.hooks.periodic[index].every;
            let due_in = self.last_ran[index].map_or(Duration::ZERO, |at| every.saturating_sub(at.elapsed()));
            if due_in.is_zero() {
                self.last_ran[index] = Some(Instant::now());
                self.commit_pending();
                let run = self.hooks.periodic[index].run.clone();
                self.with_writer(|writer| run(writer));
                next = next.min(every);
            } else {
                next = next.min(due_in);
            }
        }
        next
    }

    /// Whether a row spanning `[start, end]` that began before a deletion falls in a deleted range.
    fn was_deleted(&self, (start_millis, end_millis): (i64, i64)) -> bool {
        self.deleted.iter().any(|&(since, until, at)| start_millis < until && end_millis >= since && start_millis <= at)
    }

    fn queue(&mut self, write: Write) {
        if let Some(span) = write.span
            && self.was_deleted(span)
        {
            if let (Some(dropped), Some(dir)) = (write.dropped, data_dir(&self.conn)) {
                dropped(&dir);
            }
            return;
        }
        if self.pending.len() >= MAX_PENDING {
            self.pending.remove(0);
            self.dropped_writes += 1;
        }
        self.pending.push(write);
    }

    /// The writable connection, for tests that need to provoke write failures.
    #[doc(hidden)]
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Commits queued writes in one transaction. On failure they stay queued
    /// and the worker reports itself degraded until a later commit succeeds.
    pub fn commit_pending(&mut self) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        match self.try_commit() {
            Ok(()) => {
                self.pending.clear();
                self.after_commit();
                if self.write_error.take().is_some() {
                    self.sink.runtime(RuntimeEvent::Worker { worker: WorkerName::Store, state: WorkerState::Running });
                }
                true
            }
            Err(err) => {
                let message = format!("writes are waiting: {err:#}");
                if self.write_error.as_deref() != Some(message.as_str()) {
                    tracing::warn!(%message, "store commit failed");
                    self.sink.runtime(RuntimeEvent::Worker { worker: WorkerName::Store, state: WorkerState::Degraded(message.clone()) });
                    self.write_error = Some(message);
                }
                false
            }
        }
    }

    fn try_commit(&mut self) -> anyhow::Result<()> {
        let tx = schema::write_transaction(&self.conn)?;
        for write in &self.pending {
            (write.apply)(&tx).map_err(|err| anyhow::anyhow!("{}: {err}", write.what))?;
        }
        tx.commit()?;
        Ok(())
    }

    fn after_commit(&self) {
        if let Some(hook) = &self.hooks.after_commit {
            hook();
        }
    }
}

/// The directory holding the database file (None in memory).
pub fn data_dir(conn: &Connection) -> Option<PathBuf> {
    conn.path().and_then(|p| Path::new(p).parent().map(Path::to_path_buf)).filter(|p| !p.as_os_str().is_empty())
}

impl Supervised for StoreWorker {
    type Command = StoreCommand;

    fn run(&mut self, commands: &Receiver<StoreCommand>, _ctx: &WorkerContext) -> anyhow::Result<()> {
        loop {
            let next_due = self.run_due();
            // Block until there is work; while writes are waiting on a failing
            // disk, wake up to retry them.
            let wait = if self.write_error.is_some() && !self.pending.is_empty() { RETRY_WRITE_AFTER } else { next_due };
            let first = match commands.recv_timeout(wait) {
                Ok(command) => Some(command),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if let Some(command) = first
                && !self.handle(command)
            {
                return Ok(());
            }
            // Drain what is already queued into the same transaction.
            let mut drained = 0;
            while drained < MAX_BATCH {
                match commands.try_recv() {
                    Ok(command) => {
                        if !self.handle(command) {
                            return Ok(());
                        }
                        drained += 1;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        self.commit_pending();
                        return Ok(());
                    }
                }
            }
            self.commit_pending();
        }
        self.commit_pending();
        Ok(())
    }
}

/// Starts the store worker under supervision on a thread named `store`.
pub fn spawn_store<E: 'static>(path: PathBuf, sink: EventSink<E>, policy: RestartPolicy, hooks: StoreHooks) -> std::io::Result<WorkerHandle<StoreCommand>> {
    let channel = bounded(STORE_QUEUE);
    let runtime = sink.runtime_only();
    spawn_supervised::<StoreWorker, _, _>(WorkerName::Store, policy, sink, channel, move |_ctx| StoreWorker::open(path.clone(), runtime.clone(), hooks.clone()))
}
