//! The `store` worker: owns the only writable connection, batches writes into
//! transactions, and answers the UI's load requests.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, bounded};
use rusqlite::Connection;

use crate::ids::now_millis;
use crate::records::{ActivitySession, ChatMessage, ChatThread};
use crate::runtime::{EventSink, RestartPolicy, RuntimeEvent, Supervised, WorkerContext, WorkerHandle, WorkerName, WorkerState, spawn_supervised};
use crate::store::{queries, schema};
use crate::store::events::StoreEvent;

/// Room in the store's queue. Capture and llm block briefly when it is full
/// rather than lose rows; at 50k rows/s that is ~80 ms of backlog.
pub const STORE_QUEUE: usize = 4096;

/// Writes applied in one transaction at most.
const MAX_BATCH: usize = 2048;

/// How long to wait before retrying a batch that failed to commit (disk full, locked).
const RETRY_WRITE_AFTER: Duration = Duration::from_secs(1);

/// How often retention runs (and once at start).
const RETENTION_INTERVAL: Duration = Duration::from_secs(3600);

/// Pending writes kept in memory while the disk refuses them; past this the
/// oldest are dropped and counted, so a full disk cannot exhaust memory.
const MAX_PENDING: usize = 200_000;

#[derive(Debug)]
pub enum StoreCommand {
    UpsertSession(ActivitySession),
    InsertKeystrokeChunk(crate::capture::keys::KeystrokeChunk),
    InsertClipboardEvent(crate::capture::clipboard::ClipboardEvent),
    /// A chunk listen mode heard.
    InsertAudioTranscript(crate::audio::transcripts::AudioTranscript),
    /// An AFK-stream event, new or extended.
    UpsertAfk(crate::capture::heartbeat::AfkEvent),
    Heartbeat { session_id: i64, at_millis: i64 },
    UpsertThread { thread: ChatThread, created_at_millis: i64 },
    UpsertMessage { message: ChatMessage, model: Option<String> },
    /// A finished cloud request, for budgets.
    RecordUsage(crate::brains::budget::Usage),
    SetSetting { key: String, value: String },
    LoadSessionsSince { since_millis: i64 },
    LoadThreads,
    LoadMessages { thread_id: i64 },
    LoadSettings,
    /// Typed chunks and clipboard events during a session, for the UI.
    LoadSessionDetail { session_id: i64 },
    /// Delete everything in `[since, until)` and purge it from the files; the
    /// outcome goes to `reply` when given, and to the UI as an event.
    DeleteRange { since_millis: i64, until_millis: i64, reply: Option<Sender<Result<crate::erase::Deleted, String>>> },
    /// Write an export of `[since, until)` to `path` (UI "Export"); the UI hears the outcome.
    Export { format: crate::export::Format, since_millis: i64, until_millis: i64, path: PathBuf },
    /// Hot memory: pin a fact (≤ 320 characters) into USER.md or MEMORY.md.
    AddHotMemory { file: crate::memory::hot::File, text: String, pinned_by: String },
    RemoveHotMemory { memory_id: i64 },
    /// Read back hand edits of USER.md/MEMORY.md, rewrite them, and show the list.
    LoadHotMemory,
    /// Pin a source row's chunks to a thread (chunking it now if still queued),
    /// or take them off; the UI hears the thread's pins.
    PinSource { thread_id: i64, stream: crate::memory::search::Stream, source_id: i64 },
    UnpinSource { thread_id: i64, stream: crate::memory::search::Stream, source_id: i64 },
    /// A summary the local model wrote of an older period.
    InsertObservation(crate::memory::Observation),
    /// 👍 (+1) or 👎 (-1) on an answer, with why.
    SetFeedback { message_id: i64, rating: i8, reason: String },
    /// Commit everything queued so far, then acknowledge (tests, shutdown, benches).
    Flush(Sender<()>),
    /// The agent's operations, calls, rules and audit log, written at once
    /// (not batched): a call is recorded as started before it runs. The
    /// outcome goes to `reply` when given.
    Agent { write: Box<crate::agent::store::AgentWrite>, reply: Option<Sender<Result<(), String>>> },
    /// A document read whole (attached, or read by the agent) kept searchable in memory; its id to `reply`.
    RememberDocument { doc: Box<crate::documents::memory::Remembered>, reply: Option<Sender<Result<i64, String>>> },
    /// Forget a remembered document (its parts, chunks and vectors).
    ForgetDocument { document_id: i64, reply: Option<Sender<Result<bool, String>>> },
    /// Forget the document read from `path` (gone from a followed folder).
    ForgetDocumentAt { path: String },
    /// Fault injection for supervisor tests: panic inside the worker.
    InjectPanic,
    Shutdown,
}

/// A write waiting for the next transaction.
#[derive(Debug, Clone)]
enum Write {
    Session(ActivitySession),
    Chunk(crate::capture::keys::KeystrokeChunk),
    Clip(crate::capture::clipboard::ClipboardEvent),
    Audio(crate::audio::transcripts::AudioTranscript),
    Afk(crate::capture::heartbeat::AfkEvent),
    Heartbeat { session_id: i64, at_millis: i64 },
    Thread { thread: ChatThread, created_at_millis: i64 },
    Message { message: ChatMessage, model: Option<String> },
    Usage(crate::brains::budget::Usage),
    Setting { key: String, value: String },
}

pub struct StoreWorker {
    conn: Connection,
    sink: EventSink<StoreEvent>,
    pending: Vec<Write>,
    dropped_writes: u64,
    write_error: Option<String>,
    /// Ranges deleted in this run, with when: a session still open at deletion
    /// time is written again when it closes, and must not come back.
    deleted: Vec<(i64, i64, i64)>,
    last_retention: Option<std::time::Instant>,
    /// Told after each commit that new rows wait to be embedded.
    embed_waker: Option<Sender<crate::memory::embed_worker::EmbedCommand>>,
}

impl StoreWorker {
    pub fn open(path: PathBuf, sink: EventSink<StoreEvent>) -> anyhow::Result<Self> {
        let conn = schema::open_writer(&path)?;
        let recovered = crate::capture::db::recover_open_sessions(&conn)?;
        if recovered > 0 {
            tracing::info!(recovered, "closed sessions left open by an earlier crash");
        }
        // Kept audio from before encryption is sealed like the rest.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && let Ok(key) = crate::sealed::SealKey::for_database(&path)
        {
            match crate::audio::transcripts::seal_plain_files(&conn, dir, &key) {
                Ok(0) => {}
                Ok(sealed) => tracing::info!(sealed, "sealed kept audio written before encryption"),
                Err(err) => tracing::warn!("cannot seal kept audio written before encryption: {err}"),
            }
        }
        Ok(Self {
            conn,
            sink,
            pending: Vec::new(),
            dropped_writes: 0,
            write_error: None,
            deleted: Vec::new(),
            last_retention: None,
            embed_waker: None,
        })
    }

    /// Handles one command. Returns false on Shutdown.
    pub fn handle(&mut self, command: StoreCommand) -> bool {
        match command {
            command @ (StoreCommand::UpsertSession(..) | StoreCommand::InsertKeystrokeChunk(..) | StoreCommand::InsertClipboardEvent(..) | StoreCommand::InsertAudioTranscript(..) | StoreCommand::UpsertAfk(..) | StoreCommand::Heartbeat { .. } | StoreCommand::UpsertThread { .. } | StoreCommand::UpsertMessage { .. } | StoreCommand::RecordUsage(..) | StoreCommand::SetSetting { .. }) => self.queue_write(command),
            command @ (StoreCommand::AddHotMemory { .. } | StoreCommand::RemoveHotMemory { .. } | StoreCommand::LoadHotMemory | StoreCommand::InsertObservation(..) | StoreCommand::PinSource { .. } | StoreCommand::UnpinSource { .. }) => self.handle_memory(command),
            command @ (StoreCommand::LoadSessionsSince { .. } | StoreCommand::LoadThreads | StoreCommand::LoadMessages { .. } | StoreCommand::LoadSettings | StoreCommand::LoadSessionDetail { .. }) => self.handle_load(command),
            command @ (StoreCommand::SetFeedback { .. } | StoreCommand::DeleteRange { .. } | StoreCommand::Export { .. } | StoreCommand::RememberDocument { .. } | StoreCommand::ForgetDocumentAt { .. } | StoreCommand::ForgetDocument { .. } | StoreCommand::Agent { .. }) => self.handle_now(command),
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

    /// Writes batched into the next transaction (dropped when a deletion in this run covered their time).
    fn queue_write(&mut self, command: StoreCommand) {
        match command {
            StoreCommand::UpsertSession(session) => {
                if !self.was_deleted(session.started_at_millis, session.ended_at_millis.unwrap_or(i64::MAX)) {
                    self.queue(Write::Session(session));
                }
            }
            StoreCommand::InsertKeystrokeChunk(chunk) => {
                if !self.was_deleted(chunk.started_at_millis, chunk.ended_at_millis) {
                    self.queue(Write::Chunk(chunk));
                }
            }
            StoreCommand::InsertClipboardEvent(event) => {
                if !self.was_deleted(event.at_millis, event.at_millis) {
                    self.queue(Write::Clip(event));
                }
            }
            StoreCommand::InsertAudioTranscript(transcript) => {
                if !self.was_deleted(transcript.started_at_millis, transcript.ended_at_millis) {
                    self.queue(Write::Audio(transcript));
                } else if let (Some(file), Some(dir)) = (&transcript.audio_file, self.data_dir()) {
                    crate::audio::transcripts::remove_files(&dir, std::slice::from_ref(file));
                }
            }
            StoreCommand::UpsertAfk(event) => {
                if !self.was_deleted(event.start_millis, event.end_millis) {
                    self.queue(Write::Afk(event));
                }
            }
            StoreCommand::Heartbeat { session_id, at_millis } => {
                self.queue(Write::Heartbeat { session_id, at_millis })
            }
            StoreCommand::UpsertThread { thread, created_at_millis } => {
                self.queue(Write::Thread { thread, created_at_millis })
            }
            StoreCommand::UpsertMessage { message, model } => self.queue(Write::Message { message, model }),
            StoreCommand::RecordUsage(usage) => self.queue(Write::Usage(usage)),
            StoreCommand::SetSetting { key, value } => self.queue(Write::Setting { key, value }),
            other => tracing::error!(command = ?other, "a command reached the wrong handler"),
        }
    }

    /// Hot memory, summaries and pins.
    fn handle_memory(&mut self, command: StoreCommand) {
        match command {
            StoreCommand::AddHotMemory { file, text, pinned_by } => {
                self.edit_hot_memory(|conn| crate::memory::hot::add(conn, file, &text, &pinned_by, now_millis()).map(|_| ()))
            }
            StoreCommand::RemoveHotMemory { memory_id } => {
                self.edit_hot_memory(|conn| crate::memory::hot::remove(conn, memory_id).map(|_| ()).map_err(|e| e.to_string()))
            }
            StoreCommand::LoadHotMemory => self.edit_hot_memory(|_| Ok(())),
            StoreCommand::InsertObservation(observation) => {
                self.commit_pending();
                match crate::memory::insert_observation(&self.conn, &observation, now_millis()) {
                    Ok(()) => self.wake_embed(),
                    Err(err) => self.emit_notice(format!("a summary was not saved: {err}")),
                }
            }
            StoreCommand::PinSource { thread_id, stream, source_id } => {
                self.commit_pending();
                let pinned = super::write_transaction(&self.conn).and_then(|tx| {
                    let n = crate::memory::rag::pin_source(&tx, thread_id, stream, source_id, now_millis())?;
                    tx.commit().map(|_| n)
                });
                match pinned {
                    Ok(0) if !self.has_chunks(stream, source_id) => self.emit_notice("that item is no longer in your history, so it cannot be pinned".into()),
                    Ok(_) => self.wake_embed(), // a row cut into chunks just now waits for its vectors
                    Err(err) => self.emit_notice(format!("cannot pin: {err}")),
                }
                self.emit_pins(thread_id);
            }
            StoreCommand::UnpinSource { thread_id, stream, source_id } => {
                self.commit_pending();
                if let Err(err) = crate::memory::rag::unpin_source(&self.conn, thread_id, stream, source_id) {
                    self.emit_notice(format!("cannot unpin: {err}"));
                }
                self.emit_pins(thread_id);
            }
            other => tracing::error!(command = ?other, "a command reached the wrong handler"),
        }
    }

    /// Reads the UI asked for, after what is queued is committed.
    fn handle_load(&mut self, command: StoreCommand) {
        match command {
            StoreCommand::LoadSessionsSince { since_millis } => {
                self.commit_pending();
                match crate::capture::db::sessions_since(&self.conn, since_millis, 5_000) {
                    Ok(sessions) => self.emit(StoreEvent::SessionsLoaded(sessions)),
                    Err(err) => self.emit_notice(format!("cannot load sessions: {err}")),
                }
            }
            StoreCommand::LoadThreads => {
                self.commit_pending();
                match crate::chat::threads(&self.conn, 200) {
                    Ok(threads) => self.emit(StoreEvent::ThreadsLoaded(threads)),
                    Err(err) => self.emit_notice(format!("cannot load chat threads: {err}")),
                }
            }
            StoreCommand::LoadMessages { thread_id } => {
                self.commit_pending();
                match crate::chat::messages(&self.conn, thread_id) {
                    Ok(messages) => self.emit(StoreEvent::MessagesLoaded { thread_id, messages }),
                    Err(err) => self.emit_notice(format!("cannot load messages: {err}")),
                }
                // The agent's tool chips of the thread's answers (a live operation sends its own).
                match crate::agent::store::thread_calls(&self.conn, thread_id, now_millis()) {
                    Ok(calls) => {
                        for call in calls {
                            self.emit(StoreEvent::ToolCall(Box::new(call)));
                        }
                    }
                    Err(err) => self.emit_notice(format!("cannot load the chat's tool calls: {err}")),
                }
                self.emit_pins(thread_id);
            }
            StoreCommand::LoadSettings => {
                self.commit_pending();
                match queries::all_settings(&self.conn) {
                    Ok(settings) => {
                        for (key, value) in settings {
                            self.emit(StoreEvent::Setting { key, value });
                        }
                    }
                    Err(err) => self.emit_notice(format!("cannot load settings: {err}")),
                }
            }
            StoreCommand::LoadSessionDetail { session_id } => {
                self.commit_pending();
                match crate::capture::db::session_detail(&self.conn, session_id) {
                    Ok((typed, copied)) => self.emit(StoreEvent::SessionDetail { session_id, typed, copied }),
                    Err(err) => self.emit_notice(format!("cannot load the session: {err}")),
                }
            }
            other => tracing::error!(command = ?other, "a command reached the wrong handler"),
        }
    }

    /// Writes run at once, each with its outcome: feedback, deletion, export, documents, the agent's records.
    fn handle_now(&mut self, command: StoreCommand) {
        match command {
            StoreCommand::SetFeedback { message_id, rating, reason } => {
                self.commit_pending();
                if let Err(err) = crate::chat::set_feedback(&self.conn, message_id, rating, &reason, now_millis()) {
                    self.emit_notice(format!("feedback was not saved: {err}"));
                }
            }
            StoreCommand::DeleteRange { since_millis, until_millis, reply } => {
                self.commit_pending();
                let outcome = self.delete_range(since_millis, until_millis).map_err(|err| format!("{err:#}"));
                match &outcome {
                    Ok(deleted) => self.emit(StoreEvent::RangeDeleted {
                        since_millis,
                        until_millis,
                        sessions: deleted.sessions,
                        messages: deleted.messages,
                    }),
                    Err(err) => self.emit_notice(format!("delete failed: {err}")),
                }
                if let Some(reply) = reply {
                    let _ = reply.try_send(outcome);
                }
            }
            StoreCommand::Export { format, since_millis, until_millis, path } => {
                self.commit_pending();
                let outcome = std::fs::File::create(&path)
                    .map_err(anyhow::Error::from)
                    .and_then(|file| {
                        let mut out = std::io::BufWriter::new(file);
                        let count = crate::export::export(&self.conn, format, since_millis, until_millis, &mut out)?;
                        std::io::Write::flush(&mut out)?;
                        Ok(count)
                    });
                match outcome {
                    Ok(count) => self.emit_notice(format!("exported {count} records, unencrypted (for taking elsewhere), to {}", path.display())),
                    Err(err) => self.emit_notice(format!("export failed: {err:#}: {}", path.display())),
                }
            }
            StoreCommand::RememberDocument { doc, reply } => {
                self.commit_pending();
                let outcome = crate::store::write_transaction(&self.conn)
                    .and_then(|tx| {
                        let id = crate::documents::memory::store(&tx, &doc, crate::ids::now_millis())?;
                        tx.commit().map(|()| id)
                    })
                    .map_err(|err| err.to_string());
                match reply {
                    Some(reply) => {
                        let _ = reply.try_send(outcome);
                    }
                    None => {
                        if let Err(err) = &outcome {
                            self.emit_notice(format!("{} was not kept in memory: {err}", doc.name));
                        }
                    }
                }
            }
            StoreCommand::ForgetDocumentAt { path } => {
                self.commit_pending();
                let id: Option<i64> = self.conn.query_row("SELECT document_id FROM documents WHERE path = ?1", rusqlite::params![path], |r| r.get(0)).ok();
                if let Some(id) = id
                    && let Err(err) = crate::documents::memory::forget(&self.conn, id)
                {
                    self.emit_notice(format!("{path} was not forgotten: {err}"));
                }
            }
            StoreCommand::ForgetDocument { document_id, reply } => {
                self.commit_pending();
                let outcome = crate::documents::memory::forget(&self.conn, document_id).map_err(|err| err.to_string());
                if let Some(reply) = reply {
                    let _ = reply.try_send(outcome);
                }
            }
            StoreCommand::Agent { write, reply } => {
                self.commit_pending();
                let outcome = crate::agent::store::apply(&self.conn, &write).map_err(|err| err.to_string());
                match reply {
                    // The agent waits for the outcome and says what failed in its own words.
                    Some(reply) => {
                        let _ = reply.try_send(outcome);
                    }
                    None => {
                        if let Err(err) = &outcome {
                            self.emit_notice(format!("the agent's record was not saved: {err}"));
                        }
                    }
                }
            }
            other => tracing::error!(command = ?other, "a command reached the wrong handler"),
        }
    }

    /// Deletes window history older than the retention setting. Returns how many sessions went.
    pub fn enforce_retention(&mut self, now_millis: i64) -> usize {
        self.last_retention = Some(std::time::Instant::now());
        self.commit_pending();
        let (settings, _) = crate::config::Settings::from_pairs(&queries::all_settings(&self.conn).unwrap_or_default());
        let cutoff = |days: u32| (days > 0).then(|| now_millis - i64::from(days) * 86_400_000);
        let _ = self.conn.pragma_update(None, "secure_delete", "ON");
        let mut deleted = 0;
        let mut failure = None;
        if let Some(cutoff) = cutoff(settings.window_retention_days) {
            match crate::capture::db::delete_sessions_ended_before(&self.conn, cutoff) {
                Ok(n) => deleted += n,
                Err(err) => failure = Some(err),
            }
        }
        if let Some(cutoff) = cutoff(settings.keystroke_retention_days) {
            match crate::capture::db::delete_chunks_ended_before(&self.conn, cutoff) {
                Ok(n) => deleted += n,
                Err(err) => failure = Some(err),
            }
        }
        match self.audio_retention(now_millis, &settings.listen) {
            Ok(n) => deleted += n,
            Err(err) => failure = Some(err),
        }
        let _ = self.conn.pragma_update(None, "secure_delete", "OFF");
        if let Some(err) = failure {
            self.emit_notice(format!("retention failed: {err}"));
        }
        if deleted > 0 {
            tracing::info!(deleted, "retention removed old history");
            self.wake_embed();
        }
        deleted
    }

    /// Listen mode's two retentions (transcripts, and the shorter one of kept
    /// audio), and audio files no row points at any more.
    fn audio_retention(&mut self, now_millis: i64, listen: &crate::config::ListenSettings) -> rusqlite::Result<usize> {
        use crate::audio::transcripts;
        let mut files = Vec::new();
        let mut deleted = 0;
        if listen.retention_days > 0 {
            let (n, gone) = transcripts::delete_ended_before(&self.conn, now_millis - i64::from(listen.retention_days) * 86_400_000)?;
            deleted += n;
            files.extend(gone);
        }
        files.extend(transcripts::release_audio_before(&self.conn, now_millis - i64::from(listen.audio_retention_days) * 86_400_000)?);
        if let Some(dir) = self.data_dir() {
            files.extend(transcripts::orphan_files(&dir, &transcripts::kept_files(&self.conn)?, Duration::from_secs(600)));
            transcripts::remove_files(&dir, &files);
        }
        Ok(deleted)
    }

    fn retention_due_in(&self) -> Duration {
        self.last_retention.map_or(Duration::ZERO, |at| RETENTION_INTERVAL.saturating_sub(at.elapsed()))
    }

    fn delete_range(&mut self, since_millis: i64, until_millis: i64) -> anyhow::Result<crate::erase::Deleted> {
        // Overwrite freed content on disk; only around deletions, since it
        // also zeroes pages FTS merges free and would slow ingest by a quarter.
        self.conn.pragma_update(None, "secure_delete", "ON")?;
        let outcome = self.delete_range_inner(since_millis, until_millis);
        self.conn.pragma_update(None, "secure_delete", "OFF")?;
        self.wake_embed(); // its tombstones take the vectors out of the indexes
        outcome
    }

    fn delete_range_inner(&mut self, since_millis: i64, until_millis: i64) -> anyhow::Result<crate::erase::Deleted> {
        let tx = super::write_transaction(&self.conn)?;
        let (audio, files) = crate::audio::transcripts::delete_range(&tx, since_millis, until_millis)?;
        let deleted = crate::erase::Deleted { audio_transcripts: audio, ..crate::erase::delete_range(&tx, since_millis, until_millis)? };
        tx.commit()?;
        if let Some(dir) = self.data_dir() {
            crate::audio::transcripts::remove_files(&dir, &files);
        }
        queries::purge_deleted(&self.conn)?;
        self.deleted.push((since_millis, until_millis, now_millis()));
        Ok(deleted)
    }

    /// Whether a row spanning `[start, end]` that began before a deletion falls in a deleted range.
    fn was_deleted(&self, start_millis: i64, end_millis: i64) -> bool {
        self.deleted.iter().any(|&(since, until, at)| start_millis < until && end_millis >= since && start_millis <= at)
    }

    fn queue(&mut self, write: Write) {
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
                self.wake_embed();
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
        let tx = super::write_transaction(&self.conn)?;
        for write in &self.pending {
            match write {
                Write::Session(session) => crate::capture::db::upsert_session(&tx, session)?,
                Write::Chunk(chunk) => crate::capture::db::insert_keystroke_chunk(&tx, chunk)?,
                Write::Clip(event) => crate::capture::db::insert_clipboard_event(&tx, event)?,
                Write::Audio(transcript) => crate::audio::transcripts::insert(&tx, transcript)?,
                Write::Afk(event) => crate::capture::db::upsert_afk(&tx, event)?,
                Write::Heartbeat { session_id, at_millis } => crate::capture::db::heartbeat_session(&tx, *session_id, *at_millis)?,
                Write::Thread { thread, created_at_millis } => crate::chat::upsert_thread(&tx, thread, *created_at_millis)?,
                Write::Message { message, model } => crate::chat::upsert_message(&tx, message, model.as_deref())?,
                Write::Usage(usage) => crate::brains::budget::insert_usage(&tx, usage)?,
                Write::Setting { key, value } => queries::set_setting(&tx, key, value, now_millis())?,
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// A hot-memory change: first read back hand edits of USER.md/MEMORY.md
    /// (so rewriting them never loses one), then `edit`, then rewrite both
    /// files and show the list.
    fn edit_hot_memory(&mut self, edit: impl FnOnce(&Connection) -> Result<(), String>) {
        use crate::memory::hot;
        let dir = self.data_dir();
        if let Some(dir) = &dir {
            for (file, texts, problems) in hot::edited(&self.conn, dir).unwrap_or_default() {
                for problem in problems {
                    self.emit_notice(format!("{}: {problem}", file.file_name()));
                }
                if let Err(err) = hot::replace(&self.conn, file, &texts, now_millis()) {
                    self.emit_notice(format!("{} was not read back: {err}", file.file_name()));
                }
            }
        }
        if let Err(error) = edit(&self.conn) {
            self.emit_notice(format!("hot memory: {error}"));
        }
        if let Some(dir) = &dir
            && let Err(err) = hot::write_mirrors(&self.conn, dir, now_millis())
        {
            self.emit_notice(format!("cannot write USER.md/MEMORY.md: {err:#}"));
        }
        self.emit(StoreEvent::HotMemory(hot::facts(&self.conn).unwrap_or_default()));
    }

    fn emit_pins(&mut self, thread_id: i64) {
        match crate::memory::rag::pinned(&self.conn, thread_id) {
            Ok(items) => self.emit(StoreEvent::ThreadPins { thread_id, items }),
            Err(err) => self.emit_notice(format!("cannot load the thread's pins: {err}")),
        }
    }

    fn has_chunks(&self, stream: crate::memory::search::Stream, source_id: i64) -> bool {
        self.conn
            .query_row("SELECT 1 FROM memory_chunks WHERE source = ?1 AND source_id = ?2 LIMIT 1", rusqlite::params![stream.as_str(), source_id], |_| Ok(()))
            .is_ok()
    }

    /// The directory holding the database file.
    fn data_dir(&self) -> Option<PathBuf> {
        self.conn.path().and_then(|p| Path::new(p).parent().map(Path::to_path_buf)).filter(|p| !p.as_os_str().is_empty())
    }

    /// Tells the embed worker there are new rows or tombstones.
    fn wake_embed(&self) {
        if let Some(waker) = &self.embed_waker {
            // Full means a wake-up is already waiting.
            let _ = waker.try_send(crate::memory::embed_worker::EmbedCommand::Wake);
        }
    }

    fn emit(&self, event: StoreEvent) {
        self.sink.send(event);
    }

    fn emit_notice(&self, text: String) {
        self.sink.notice(text);
    }
}

impl Supervised for StoreWorker {
    type Command = StoreCommand;

    fn run(&mut self, commands: &Receiver<StoreCommand>, _ctx: &WorkerContext) -> anyhow::Result<()> {
        loop {
            // Block until there is work; while writes are waiting on a failing
            // disk, wake up to retry them.
            if self.retention_due_in().is_zero() {
                self.enforce_retention(now_millis());
            }
            let first = if self.write_error.is_some() && !self.pending.is_empty() {
                match commands.recv_timeout(RETRY_WRITE_AFTER) {
                    Ok(command) => Some(command),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match commands.recv_timeout(self.retention_due_in()) {
                    Ok(command) => Some(command),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
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
pub fn spawn_store(path: PathBuf, sink: EventSink<StoreEvent>, policy: RestartPolicy) -> std::io::Result<WorkerHandle<StoreCommand>> {
    spawn_store_waking(path, sink, policy, None)
}

/// `spawn_store`, waking the embed worker after each commit.
pub fn spawn_store_waking(
    path: PathBuf,
    sink: EventSink<StoreEvent>,
    policy: RestartPolicy,
    embed_waker: Option<Sender<crate::memory::embed_worker::EmbedCommand>>,
) -> std::io::Result<WorkerHandle<StoreCommand>> {
    let channel = bounded(STORE_QUEUE);
    spawn_supervised::<StoreWorker, _, _>(WorkerName::Store, policy, sink.clone(), channel, move |_ctx| {
        let mut worker = StoreWorker::open(path.clone(), sink.clone())?;
        worker.embed_waker = embed_waker.clone();
        Ok(worker)
    })
}
