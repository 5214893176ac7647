//! The `listen` worker: listen mode. Off until the user turns it on and answers
//! its own consent question (`ListenPlan::wanted`); then it keeps the
//! microphone ("you") and, when allowed, the monitor of the default output
//! ("others") open, runs each second through the segmenter (quiet seconds cost
//! an RMS, louder ones one Silero VAD pass on one thread; a chunk ends after
//! 0.8 s of silence or at 30 s), and hands speech chunks to the `speech` worker
//! (`SpeechCommand::Listen`, at most two in flight, the rest in a bounded
//! backlog). What Whisper heard comes back on the worker's own channel and goes
//! to the store (`transcripts::transcript_write`) as an `audio_transcripts`
//! row, with the window that was in focus.
//!
//! ```text
//!    capture ──ListenCommand::Focus (bounded 32)──▶ ┌────────┐ ◀── UI: ListenCommand::Configure(ListenPlan)
//!    cpal (16 kHz mono, server's pace) ──Block────▶ │ listen │ Segmenter + Silero VAD (1 thread)
//!                                                   └─┬────▲─┘
//!               SpeechCommand::Listen { job, reply }  │    │ ListenDone (bounded 4)
//!                                                     ▼    │
//!                                                   speech ─┘         listen ──transcript_write──▶ store
//! ```
//!
//! The firewall applies: capture tells it the focused window as the firewall
//! judged it (`ListenCommand::Focus`: a window, nothing, or excluded), and the
//! app sends the plan whenever a `listen.*`, privacy or device setting changes.
//! Under pause or quiet hours no stream is open (the microphone indicator goes
//! off), and a chunk during which an excluded window was focused is dropped
//! before it is transcribed. Audio is written to disk only when the user keeps
//! audio, and only for chunks in which Whisper heard speech.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, select};
use whisper_rs::WhisperVadContext;

use super::mic::{Block, Capture, MicError, SoundServer, Source};
use super::segment::{Chunk, Detector, Segmenter};
use super::transcribe::{Heard, SpeechModels, load_vad, speech_spans};
use super::transcripts::{AudioTranscript, audio_dir, audio_file_name};
use super::worker::{ListenDone, ListenJob, SpeechCommand};
use crate::audio::events::{ListenStatus, VoiceEvent};
use crate::capture::firewall::Rules;
use crate::config::ListenSettings;
use crate::ids::{local_minute_of_day, next_id, now_millis};
use crate::models::Manifest;
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, spawn_supervised};
use crate::store::StoreCommand;

/// Blocks the callbacks may queue (the server's pace: tens of milliseconds
/// to two seconds each).
const BLOCK_QUEUE: usize = 400;
/// Chunks handed to `speech` at once; the rest wait here.
const IN_FLIGHT: usize = 2;
/// Chunks waiting for `speech` at most (~10 minutes of talk); past this the oldest is dropped.
const MAX_WAITING: usize = 20;
/// How often pause, quiet hours and failed streams are looked at again.
const TICK: Duration = Duration::from_secs(5);
/// A stream that failed to open is tried again after this long.
const RETRY_AFTER: Duration = Duration::from_secs(30);
/// Focus changes remembered, to judge chunks still being transcribed.
const FOCUS_MEMORY_MILLIS: i64 = 15 * 60_000;

#[derive(Debug)]
pub enum ListenCommand {
    Configure(ListenPlan),
    /// The focused window as capture's firewall judged it.
    Focus(Focus),
    /// A call cowork noticed: the user's answer to its offer.
    Meeting(MeetingCommand),
    /// A calendar event with a call's address starts (the calendar worker):
    /// from 2 minutes before it to its end it counts as a call window in
    /// focus, so an app recording from the microphone gets the offer.
    Calendar(crate::calendar::CallStarting),
    Shutdown,
}

#[derive(Debug)]
pub enum MeetingCommand {
    /// Listen to the call that started at `since_millis` (the notification's Listen):
    /// the microphone ("you") and the computer's output ("others") until it ends.
    Listen { since_millis: i64 },
}

/// Where listen mode tells what it noticed about calls: the notification
/// that offers to listen, and the automations (a call started or ended).
#[derive(Clone, Debug, Default)]
pub struct ListenLinks {
    pub notify: Option<Sender<crate::notify::NotifyCommand>>,
    pub automations: Option<Sender<crate::automations::AutomationsCommand>>,
}

/// How often, while a call window was focused lately or a call is on, the
/// sound server is asked who records: a call is offered within this (plus the
/// focus change's own delay) of the microphone going on.
const CALL_CHECK: Duration = Duration::from_secs(2);

/// What listen mode should do: Settings → Voice, the firewall's rules, the input device.
#[derive(Clone, Debug)]
pub struct ListenPlan {
    pub listen: ListenSettings,
    pub rules: Rules,
    pub device: Option<String>,
}

impl ListenPlan {
    pub fn from_settings(settings: &crate::config::Settings) -> Self {
        Self {
            listen: settings.listen.clone(),
            rules: settings.rules(),
            device: Some(settings.voice.device.clone()).filter(|d| !d.is_empty()),
        }
    }

    /// The sources to have open at `local_minute`, or why none may be.
    pub fn wanted(&self, local_minute: u32) -> Result<Vec<Source>, Option<String>> {
        if !self.listen.active() {
            return Err(None);
        }
        if let Some(rule) = self.rules.time_exclusion(local_minute) {
            return Err(Some(rule));
        }
        let mut sources = Vec::new();
        if self.listen.mic {
            sources.push(Source::Microphone);
        }
        if self.listen.system {
            sources.push(Source::SystemAudio);
        }
        Ok(sources)
    }

    /// The sources to have open during a call the user asked cowork to listen
    /// to: the microphone and the computer's output, with listen mode's
    /// consent even when listen mode is off; pause and quiet hours still hold.
    pub fn wanted_in_call(&self, local_minute: u32) -> Result<Vec<Source>, Option<String>> {
        if !self.listen.consented {
            return Err(Some("listen mode's consent is not given (Settings → Voice)".into()));
        }
        if let Some(rule) = self.rules.time_exclusion(local_minute) {
            return Err(Some(rule));
        }
        Ok(vec![Source::Microphone, Source::SystemAudio])
    }
}

/// The focused window, as capture's firewall judged it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Focus {
    /// Nothing, or cowork's own window.
    Nothing,
    Window { app: String, title: String },
    /// A window the firewall excludes: what is heard meanwhile is not kept.
    Excluded,
}

/// Focus changes with their times, oldest first.
#[derive(Default)]
pub struct FocusLog {
    changes: VecDeque<(i64, Focus)>,
}

impl FocusLog {
    pub fn record(&mut self, at_millis: i64, focus: Focus) {
        self.changes.push_back((at_millis, focus));
        // Keep the last change before the memory's start: it is the focus then.
        while self.changes.len() > 1 && self.changes[1].0 < at_millis - FOCUS_MEMORY_MILLIS {
            self.changes.pop_front();
        }
    }

    /// The focus at `at_millis` (Nothing before the first change heard).
    pub fn at(&self, at_millis: i64) -> Focus {
        self.changes.iter().rev().find(|(at, _)| *at <= at_millis).map_or(Focus::Nothing, |(_, f)| f.clone())
    }

    /// Whether an excluded window had focus at any time in `[start, end]`.
    pub fn excluded_during(&self, start_millis: i64, end_millis: i64) -> bool {
        self.at(start_millis) == Focus::Excluded
            || self.changes.iter().any(|(at, f)| *at > start_millis && *at <= end_millis && *f == Focus::Excluded)
    }
}

struct Vad(WhisperVadContext);

impl Detector for Vad {
    fn speech(&mut self, window: &[f32]) -> anyhow::Result<Vec<(usize, usize)>> {
        speech_spans(&mut self.0, window)
    }
}

struct Open {
    capture: Capture,
    opened: Instant,
    /// When the first block arrived (the server's start-up delay).
    first_block: Option<Instant>,
    segmenter: Segmenter,
}

pub struct ListenWorker {
    sink: EventSink<VoiceEvent>,
    store: Sender<StoreCommand>,
    speech: Sender<SpeechCommand>,
    manifest: Manifest,
    models_dir: PathBuf,
    data_dir: PathBuf,
    plan: Option<ListenPlan>,
    server: Option<SoundServer>,
    streams: Vec<(Source, Open)>,
    failed: Vec<(Source, Instant)>,
    blocks_tx: Sender<Block>,
    blocks_rx: Receiver<Block>,
    done_tx: Sender<ListenDone>,
    done_rx: Receiver<ListenDone>,
    vad: Option<Vad>,
    focus: FocusLog,
    waiting: VecDeque<ListenJob>,
    in_flight: usize,
    status: ListenStatus,
    sent: Option<ListenStatus>,
    links: ListenLinks,
    /// Calls: the focused window's call service and title, the detector, when the server was last asked.
    focused_call: Option<(&'static str, String)>,
    /// The calendar's timed event starting last: the service of its call's address (None: it has
    /// none, and only names a call window's call), title, start, end.
    calendar_event: Option<(Option<&'static str>, String, i64, i64)>,
    calls: crate::day::meetings::Detector,
    last_call_check: Instant,
    /// The call being listened to (its start), after the user's click.
    listening_call: Option<i64>,
}

impl ListenWorker {
    pub fn new(sink: EventSink<VoiceEvent>, store: Sender<StoreCommand>, speech: Sender<SpeechCommand>, manifest: Manifest, models_dir: PathBuf, data_dir: PathBuf, links: ListenLinks) -> Self {
        let (blocks_tx, blocks_rx) = bounded(BLOCK_QUEUE);
        let (done_tx, done_rx) = bounded(IN_FLIGHT * 2);
        Self {
            sink,
            store,
            speech,
            manifest,
            models_dir,
            data_dir,
            plan: None,
            server: None,
            streams: Vec::new(),
            failed: Vec::new(),
            blocks_tx,
            blocks_rx,
            done_tx,
            done_rx,
            vad: None,
            focus: FocusLog::default(),
            waiting: VecDeque::new(),
            in_flight: 0,
            status: ListenStatus::default(),
            sent: None,
            links,
            focused_call: None,
            calendar_event: None,
            calls: crate::day::meetings::Detector::default(),
            last_call_check: Instant::now(),
            listening_call: None,
        }
    }

    /// Returns false on shutdown.
    pub fn handle_command(&mut self, command: ListenCommand) -> bool {
        match command {
            ListenCommand::Configure(plan) => {
                let device_changed = self.plan.as_ref().is_some_and(|p| p.device != plan.device);
                self.plan = Some(plan);
                self.failed.clear();
                if device_changed && let Some(index) = self.streams.iter().position(|(s, _)| *s == Source::Microphone) {
                    self.close(index);
                }
                self.reconcile();
            }
            ListenCommand::Focus(focus) => {
                self.focused_call = match &focus {
                    Focus::Window { app, title } => crate::day::meetings::call_service(app, title, None).map(|service| (service, title.clone())),
                    _ => None,
                };
                self.focus.record(now_millis(), focus);
            }
            ListenCommand::Calendar(crate::calendar::CallStarting { title, join_url, start_millis, end_millis }) => {
                let service = join_url.map(|url| crate::day::meetings::call_service("", "", Some(&url)).unwrap_or("a calendar's call"));
                self.calendar_event = Some((service, title, start_millis, end_millis));
            }
            ListenCommand::Meeting(MeetingCommand::Listen { since_millis }) => match self.calls.current() {
                Some((service, title, since)) if since == since_millis => {
                    self.status.call = Some(format!("{service}: {title}, since {}", crate::ids::format_clock(since)));
                    self.listening_call = Some(since);
                    self.reconcile();
                }
                _ => tracing::info!("listen: the call to listen to is over"),
            },
            ListenCommand::Shutdown => {
                while !self.streams.is_empty() {
                    self.close(0);
                }
                self.finish_in_flight(Duration::from_secs(4));
                return false;
            }
        }
        true
    }

    /// Opens and closes streams to match the plan and the clock.
    pub fn reconcile(&mut self) {
        let minute = local_minute_of_day(now_millis());
        let wanted = match &self.plan {
            Some(plan) if self.listening_call.is_some() => plan.wanted_in_call(minute),
            Some(plan) => plan.wanted(minute),
            None => Err(None),
        };
        let (sources, held) = match wanted {
            Ok(sources) => (sources, None),
            Err(held) => (Vec::new(), held),
        };
        self.status.held = held;
        while let Some(index) = self.streams.iter().position(|(s, _)| !sources.contains(s)) {
            self.close(index);
        }
        if sources.is_empty() {
            // Nothing to listen to: the VAD goes, and so does the last error.
            self.vad = None;
            self.status.error = None;
        }
        for source in sources {
            let open = self.streams.iter().any(|(s, _)| *s == source);
            let resting = self.failed.iter().any(|(s, at)| *s == source && at.elapsed() < RETRY_AFTER);
            if !open && !resting {
                self.open(source);
            }
        }
        self.report();
    }

    fn open(&mut self, source: Source) {
        self.failed.retain(|(s, _)| *s != source);
        if let Err(err) = self.ensure_vad() {
            self.status.error = Some(format!("listen mode cannot start: {err:#}"));
            self.failed.push((source, Instant::now()));
            return;
        }
        let device = match source {
            Source::Microphone => self.plan.as_ref().and_then(|p| p.device.clone()),
            Source::SystemAudio => None,
        };
        if self.server.is_none() {
            match SoundServer::connect() {
                Ok(server) => self.server = Some(server),
                Err(err) => return self.stream_failed(source, err),
            }
        }
        let server = self.server.as_ref().expect("connected above");
        // The server converts to 16 kHz mono (PulseAudio's and PipeWire's C
        // resamplers; a record stream takes any sample spec): resampling two
        // streams in cowork all day cost more than everything else listen
        // mode does on silence.
        match server.open(source, device.as_deref(), None, true, self.blocks_tx.clone()) {
            Ok(capture) => {
                tracing::info!(source = source.as_str(), device = %capture.device, "listen: stream open");
                let name = capture.device.clone();
                match source {
                    Source::Microphone => self.status.mic = Some(name),
                    Source::SystemAudio => self.status.system = Some(name),
                }
                self.status.error = None;
                self.streams.push((source, Open { capture, opened: Instant::now(), first_block: None, segmenter: Segmenter::default() }));
            }
            Err(err) => self.stream_failed(source, err),
        }
    }

    fn stream_failed(&mut self, source: Source, err: MicError) {
        if matches!(err, MicError::NoServer(_) | MicError::Other(_)) {
            self.server = None;
        }
        let what = match source {
            Source::Microphone => "the microphone",
            Source::SystemAudio => "system audio",
        };
        self.status.error = Some(format!("listen mode cannot hear {what}: {err}"));
        self.failed.push((source, Instant::now()));
    }

    fn ensure_vad(&mut self) -> anyhow::Result<()> {
        if self.vad.is_none() {
            let models = SpeechModels::resolve(&self.manifest, &self.models_dir, None)?;
            let path = models.vad.ok_or_else(|| anyhow::anyhow!("the Silero VAD model is missing (run scripts/fetch-models)"))?;
            // One thread: a second of audio takes a few milliseconds.
            self.vad = Some(Vad(load_vad(&path, 1)?));
        }
        Ok(())
    }

    /// Closes a stream; what was being said goes to transcription.
    fn close(&mut self, index: usize) {
        let (source, mut open) = self.streams.remove(index);
        drop(open.capture);
        match source {
            Source::Microphone => self.status.mic = None,
            Source::SystemAudio => self.status.system = None,
        }
        if let Some(chunk) = open.segmenter.flush() {
            self.dispatch(source, chunk);
        }
        let stats = open.segmenter.stats;
        let open_secs = open.opened.elapsed().as_secs();
        let first_block_millis = open.first_block.map(|at| at.duration_since(open.opened).as_millis() as u64);
        tracing::info!(source = source.as_str(), open_secs, first_block_millis, heard_secs = stats.windows, vad_runs = stats.vad_runs, chunks = stats.chunks, "listen: stream closed");
    }

    pub fn handle_block(&mut self, block: Block) {
        match block {
            Block::Samples { samples, source, arrived } => {
                let Some(index) = self.streams.iter().position(|(s, _)| *s == source) else { return };
                let Some(vad) = self.vad.as_mut() else { return };
                let open = &mut self.streams[index].1;
                open.first_block.get_or_insert(arrived);
                // 16 kHz mono (opened so): the block's first sample was heard one block before it arrived.
                let block_millis = super::millis_for_samples(samples.len()) as i64;
                let at_millis = now_millis() - arrived.elapsed().as_millis() as i64 - block_millis;
                match open.segmenter.push(&samples, at_millis, vad) {
                    Ok(chunks) => {
                        for chunk in chunks {
                            self.dispatch(source, chunk);
                        }
                    }
                    Err(err) => {
                        self.status.error = Some(format!("the VAD failed: {err:#}"));
                        self.close(index);
                        self.failed.push((source, Instant::now()));
                    }
                }
            }
            Block::Failed { source, error } => {
                if let Some(index) = self.streams.iter().position(|(s, _)| *s == source) {
                    self.close(index);
                }
                self.stream_failed(source, error);
            }
        }
        self.report();
    }

    /// A chunk heard: dropped if an excluded window had focus meanwhile, else queued for Whisper.
    fn dispatch(&mut self, source: Source, chunk: Chunk) {
        if self.focus.excluded_during(chunk.started_at_millis, chunk.ended_at_millis) {
            self.status.skipped += 1;
            return;
        }
        let (app, title) = match self.focus.at(chunk.started_at_millis) {
            Focus::Window { app, title } => (app, title),
            _ => (String::new(), String::new()),
        };
        if self.waiting.len() >= MAX_WAITING {
            self.waiting.pop_front();
            self.status.skipped += 1;
            tracing::warn!("listen: transcription is behind; dropped the oldest chunk");
        }
        self.waiting.push_back(ListenJob {
            transcript_id: next_id(),
            source,
            started_at_millis: chunk.started_at_millis,
            ended_at_millis: chunk.ended_at_millis,
            app,
            title,
            samples: chunk.samples,
        });
        self.pump();
    }

    fn pump(&mut self) {
        while self.in_flight < IN_FLIGHT {
            let Some(job) = self.waiting.pop_front() else { break };
            match self.speech.try_send(SpeechCommand::Listen { job, reply: self.done_tx.clone() }) {
                Ok(()) => self.in_flight += 1,
                Err(crossbeam_channel::TrySendError::Full(SpeechCommand::Listen { job, .. })) => {
                    self.waiting.push_front(job);
                    break;
                }
                Err(_) => {
                    self.status.error = Some("the speech worker is not running".into());
                    break;
                }
            }
        }
    }

    /// Waits (up to `limit`) for the chunks already heard to be transcribed and stored.
    fn finish_in_flight(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        self.pump();
        while self.in_flight > 0 {
            match self.done_rx.recv_deadline(deadline) {
                Ok(done) => self.handle_done(done),
                Err(_) => break,
            }
        }
    }

    pub fn handle_done(&mut self, done: ListenDone) {
        self.in_flight = self.in_flight.saturating_sub(1);
        match done.heard {
            Ok(Heard::Speech(transcript)) => {
                let job = done.job;
                let keep_audio = self.plan.as_ref().is_some_and(|p| p.listen.keep_audio);
                let audio_file = if keep_audio { self.keep_audio(&job) } else { None };
                self.status.last = Some(format!("{}: {}", if job.source == Source::Microphone { "You" } else { "Others" }, transcript.text));
                let row = AudioTranscript {
                    transcript_id: job.transcript_id,
                    source: job.source,
                    started_at_millis: job.started_at_millis,
                    ended_at_millis: job.ended_at_millis,
                    text: transcript.text,
                    confidence: transcript.confidence,
                    app: job.app,
                    title: job.title,
                    audio_file,
                };
                match self.store.send_timeout(crate::audio::transcripts::transcript_write(row), Duration::from_secs(1)) {
                    Ok(()) => self.status.stored += 1,
                    Err(_) => {
                        self.status.skipped += 1;
                        self.status.error = Some("the store did not take a transcript".into());
                    }
                }
            }
            Ok(Heard::Nothing(_)) => {}
            Err(err) => self.status.error = Some(format!("transcription failed: {err}")),
        }
        self.pump();
        self.report();
    }

    /// Writes a chunk's audio under `audio/`; its file name when that worked.
    fn keep_audio(&mut self, job: &ListenJob) -> Option<String> {
        let dir = audio_dir(&self.data_dir);
        let name = audio_file_name(job.transcript_id);
        // Sealed with the database's key: speech is captured content.
        let written = std::fs::create_dir_all(&dir).map_err(anyhow::Error::from).and_then(|()| {
            let key = crate::sealed::SealKey::for_database(&self.data_dir.join(crate::store::DB_FILE_NAME))?;
            crate::sealed::write(&dir.join(&name), &key, &super::wav::wav_bytes(&job.samples)?)
        });
        match written {
            Ok(()) => Some(name),
            Err(err) => {
                self.status.error = Some(format!("the audio was not kept: {err:#}"));
                None
            }
        }
    }

    /// A call: a call window focused lately (or a call under way) and an app
    /// other than cowork recording from a microphone. Asks the sound server
    /// only then; never opens a stream for it.
    pub fn check_call(&mut self) {
        self.last_call_check = Instant::now();
        if self.links.notify.is_none() && self.links.automations.is_none() {
            return;
        }
        let now = now_millis();
        // Paused, or quiet hours: no call is offered (and none would be heard).
        if self.calls.current().is_none() && self.plan.as_ref().is_none_or(|p| p.rules.time_exclusion(local_minute_of_day(now)).is_some()) {
            return;
        }
        // The focused window first (named by the calendar's event on now, if there is one);
        // else a calendar call from 2 minutes before its start to its end.
        let event = self.calendar_event.as_ref().filter(|(_, _, start, end)| now >= start - 120_000 && now < *end);
        let calendar = event.and_then(|(s, t, _, _)| s.map(|s| (s, t.as_str())));
        let focused = self.focused_call.as_ref().map(|(s, t)| (*s, event.map_or(t.as_str(), |(_, title, _, _)| title.as_str()))).or(calendar);
        if focused.is_none() && self.calls.current().is_none() && !self.calls.window_recent(now) {
            return;
        }
        let microphone = match crate::audio::inuse::recordings() {
            Ok(recordings) => recordings.iter().any(|r| r.is_microphone_in_use()),
            Err(err) => {
                tracing::debug!(%err, "listen: who records is not known");
                false
            }
        };
        match self.calls.observe(now, focused, microphone) {
            Some(crate::day::meetings::Signal::Offer { service, title, since_millis }) => {
                let why = match self.focused_call.is_some() {
                    true => format!("Why: {service} is in focus and an app is recording from your microphone"),
                    false => format!("Why: your calendar has \"{title}\" now, with a call's address, and an app is recording from your microphone"),
                };
                self.offer_call(service, &title, since_millis, why)
            }
            Some(crate::day::meetings::Signal::Ended { service, title, started_millis, ended_millis }) => self.call_ended(service, &title, started_millis, ended_millis),
            None => {}
        }
    }

    fn offer_call(&mut self, service: &'static str, title: &str, since_millis: i64, why: String) {
        tracing::info!(service, "listen: a call started; offering to listen");
        let consented = self.plan.as_ref().is_some_and(|p| p.listen.consented);
        let (body, action) = if consented {
            (
                format!("{title}\nListen, and afterwards write a note with a summary and the action items? Nothing is recorded unless you click Listen."),
                crate::automations::steps::NoticeAction::Listen { since_millis },
            )
        } else {
            (format!("{title}\nTo let cowork listen to calls and write their notes, agree to listen mode in Settings → Voice."), crate::automations::steps::NoticeAction::None)
        };
        if let Some(notify) = &self.links.notify {
            let notice = crate::automations::steps::Notice {
                source: "meeting".into(),
                tier: crate::automations::flow::NotifyTier::Urgent,
                title: format!("A call in {service}"),
                body,
                action,
                why,
            };
            let post = crate::notify::NotifyCommand::Post { notification_id: next_id(), notice: Box::new(notice) };
            if notify.send_timeout(post, Duration::from_secs(2)).is_err() {
                tracing::warn!("listen: the notification worker did not take the call's offer");
            }
        }
        self.signal_call(crate::automations::flow::MeetingEvent::Started, service, title, (since_millis, None), false);
    }

    fn call_ended(&mut self, service: &'static str, title: &str, started_millis: i64, ended_millis: i64) {
        let listened = self.listening_call.take().is_some();
        self.status.call = None;
        if listened {
            // What was said last is transcribed and kept before the note is asked for.
            self.reconcile();
            self.finish_in_flight(Duration::from_secs(20));
        }
        tracing::info!(service, listened, "listen: the call ended");
        self.signal_call(crate::automations::flow::MeetingEvent::Ended, service, title, (started_millis, Some(ended_millis)), listened);
    }

    fn signal_call(&self, event: crate::automations::flow::MeetingEvent, service: &str, title: &str, (started_millis, ended_millis): (i64, Option<i64>), listened: bool) {
        if let Some(automations) = &self.links.automations {
            let signal = crate::automations::Signal::Meeting { event, service: service.to_owned(), title: title.to_owned(), started_millis, ended_millis, listened };
            if automations.try_send(crate::automations::AutomationsCommand::Signal(signal)).is_err() {
                tracing::warn!("listen: the automations worker did not take the call's signal");
            }
        }
    }

    /// Tells the UI when the status changed.
    fn report(&mut self) {
        if self.sent.as_ref() != Some(&self.status) {
            self.sent = Some(self.status.clone());
            self.sink.send(VoiceEvent::Listening(self.status.clone()));
        }
    }
}

impl Supervised for ListenWorker {
    type Command = ListenCommand;

    fn run(&mut self, commands: &Receiver<ListenCommand>, _ctx: &WorkerContext) -> anyhow::Result<()> {
        let blocks = self.blocks_rx.clone();
        let done = self.done_rx.clone();
        let mut last_tick = Instant::now();
        loop {
            select! {
                recv(commands) -> command => match command {
                    Ok(command) => if !self.handle_command(command) { break },
                    Err(_) => break,
                },
                recv(blocks) -> block => if let Ok(block) = block { self.handle_block(block) },
                recv(done) -> finished => if let Ok(finished) = finished { self.handle_done(finished) },
                default(CALL_CHECK) => {}
            }
            if self.last_call_check.elapsed() >= CALL_CHECK {
                self.check_call();
            }
            if last_tick.elapsed() >= TICK {
                last_tick = Instant::now();
                self.reconcile();
                self.pump();
            }
        }
        Ok(())
    }
}

/// Starts the `listen` worker. It listens to nothing until a `Configure` says to.
pub fn spawn_listen(
    store: Sender<StoreCommand>,
    speech: Sender<SpeechCommand>,
    manifest: Manifest,
    models_dir: PathBuf,
    data_dir: PathBuf,
    (links, sink): (ListenLinks, EventSink<VoiceEvent>),
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<ListenCommand>> {
    spawn_supervised::<ListenWorker, _, _>(WorkerName::Listen, policy, sink.clone(), bounded(32), move |_ctx| {
        Ok(ListenWorker::new(sink.clone(), store.clone(), speech.clone(), manifest.clone(), models_dir.clone(), data_dir.clone(), links.clone()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_quiet_hours_consent_and_switches_decide_what_is_open() {
        let mut settings = crate::config::Settings::default();
        let plan = |s: &crate::config::Settings| ListenPlan::from_settings(s);
        assert_eq!(plan(&settings).wanted(600), Err(None), "off by default");
        settings.listen.enabled = true;
        assert_eq!(plan(&settings).wanted(600), Err(None), "no consent yet");
        settings.listen.consented = true;
        assert_eq!(plan(&settings).wanted(600), Ok(vec![Source::Microphone]));
        settings.listen.system = true;
        assert_eq!(plan(&settings).wanted(600), Ok(vec![Source::Microphone, Source::SystemAudio]));
        settings.privacy.quiet_hours = "22:00-07:00".into();
        assert_eq!(plan(&settings).wanted(23 * 60), Err(Some("quiet hours 22:00–07:00".into())));
        assert!(plan(&settings).wanted(12 * 60).is_ok());
        settings.privacy.paused = true;
        assert_eq!(plan(&settings).wanted(12 * 60), Err(Some("capture is paused".into())));
    }

    #[test]
    fn a_chunk_is_judged_by_every_focus_it_overlapped() {
        let mut log = FocusLog::default();
        let zoom = Focus::Window { app: "zoom".into(), title: "Standup".into() };
        log.record(1_000, zoom.clone());
        log.record(5_000, Focus::Excluded);
        log.record(6_000, Focus::Nothing);
        assert_eq!(log.at(500), Focus::Nothing);
        assert_eq!(log.at(2_000), zoom);
        assert!(!log.excluded_during(1_000, 4_999));
        assert!(log.excluded_during(4_000, 5_500), "the bank tab came up mid-sentence");
        assert!(log.excluded_during(5_500, 5_800));
        assert!(!log.excluded_during(6_000, 9_000));
        // Old changes are forgotten, but the focus they left stays known.
        log.record(6_000 + FOCUS_MEMORY_MILLIS + 10_000, zoom.clone());
        assert_eq!(log.at(6_000 + FOCUS_MEMORY_MILLIS), Focus::Nothing);
        assert!(log.changes.len() <= 2);
    }
}
