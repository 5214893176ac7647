//! The `audio` and `speech` workers.
//!
//! `audio` (`AudioCommand`, bounded(16): Start, Stop, Cancel, …, from the UI's
//! Talk button and the voice hotkey) owns the sound-server connection and, only
//! while the user talks to cowork, the microphone stream: cpal's callback hands
//! device-rate blocks over a bounded(500) channel; the worker makes them 16 kHz
//! mono, reports the level for the meter and the first sample's delay, closes
//! the stream at Stop (or Cancel, or after 120 s), and hands the utterance to
//! `speech`. Connecting to the server opens no device, so the connection is
//! kept between recordings and a press only opens a stream. It also lists the
//! input devices (`AudioCommand::ListDevices` → `VoiceEvent::Devices`, Settings
//! → Voice) and types dictation: with `voice.dictation` on, the hotkey records
//! for `VoiceTarget::Dictation`, and the app hands what was heard back as
//! `AudioCommand::Dictate(text)`. On X11 the worker's own X connection
//! (`dictate::Typist`, made at the first dictation) types through XTest;
//! keycodes it borrowed for characters the layout lacks are emptied by the
//! worker's loop when `restore_due` says, and at shutdown.
//!
//! `speech` (`SpeechCommand`, bounded(8): Prepare, Transcribe, Listen,
//! Configure) owns Whisper and the VAD model: loaded when a press announces an
//! utterance (`Prepare`, so loading overlaps speaking), unloaded after the idle
//! time of Settings → Voice. It answers whatever is in its channel before it
//! starts a queued listen chunk (`drain`, then one chunk from `listen_queue`),
//! so push-to-talk waits at most for the one chunk Whisper is already decoding.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, select};

use super::{millis_for_samples, rms, samples_for_millis};
use super::mic::{Block, Capture, MicError, SoundServer, Source};
use super::resample::{To16k, downmix_into};
use super::transcribe::{DecodeSettings, Heard, Silence, SpeechModels, Transcriber};
use crate::audio::events::{VoiceEvent, VoiceTarget};
use crate::models::Manifest;
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, spawn_supervised};

/// A push-to-talk recording stops by itself after this long.
pub const MAX_UTTERANCE_SECS: u64 = 120;
/// Level updates for the meter, at most this often.
const LEVEL_EVERY: Duration = Duration::from_millis(50);
/// Device blocks the callback may queue (20 ms each: 10 s).
const BLOCK_QUEUE: usize = 500;

#[derive(Debug)]
pub enum AudioCommand {
    /// Open the microphone for an utterance to `target`; `pressed_at` is when the user asked.
    Start { target: VoiceTarget, pressed_at: Instant },
    /// Close the microphone and transcribe what was said.
    Stop { released_at: Instant },
    /// Close the microphone and forget what was said.
    Cancel,
    /// The input device by its server name; None for the default.
    SetDevice(Option<String>),
    /// List the input devices (answered with `VoiceEvent::Devices`).
    ListDevices,
    /// Type a transcript into the focused app (dictation).
    Dictate(String),
    Shutdown,
}

/// An utterance on its way to Whisper.
#[derive(Debug)]
pub struct Utterance {
    pub target: VoiceTarget,
    pub samples: Vec<f32>,
    pub released_at: Instant,
}

/// A chunk listen mode heard, on its way to Whisper and back.
#[derive(Debug)]
pub struct ListenJob {
    pub transcript_id: i64,
    pub source: Source,
    pub started_at_millis: i64,
    pub ended_at_millis: i64,
    pub app: String,
    pub title: String,
    pub samples: Vec<f32>,
}

/// A listen job transcribed.
#[derive(Debug)]
pub struct ListenDone {
    pub job: ListenJob,
    pub heard: Result<Heard, String>,
}

#[derive(Debug)]
pub enum SpeechCommand {
    /// Load the models now: an utterance is coming.
    Prepare,
    Transcribe(Utterance),
    /// A listen-mode chunk; the outcome goes back on `reply`.
    Listen { job: ListenJob, reply: Sender<ListenDone> },
    Configure(SpeechConfig),
    Shutdown,
}

/// What the speech worker loads and how it decodes.
#[derive(Clone, Debug, PartialEq)]
pub struct SpeechConfig {
    /// A speech model of the manifest by name; None: the first (tiny.en).
    pub model: Option<String>,
    pub settings: DecodeSettings,
    /// Unload the models after this long unused (0: never).
    pub idle_unload: Duration,
}

impl SpeechConfig {
    /// From Settings → Voice.
    pub fn from_settings(settings: &crate::config::Settings) -> Self {
        let voice = &settings.voice;
        Self {
            model: Some(voice.model.clone()).filter(|m| !m.is_empty()),
            settings: DecodeSettings {
                short_clip_context: voice.short_clip_context,
                language: Some(voice.language.clone()).filter(|l| !l.is_empty()),
                ..DecodeSettings::default()
            },
            idle_unload: Duration::from_secs(voice.idle_unload_secs),
        }
    }
}

impl Default for SpeechConfig {
    fn default() -> Self {
        Self { model: None, settings: DecodeSettings::default(), idle_unload: Duration::from_secs(300) }
    }
}

struct Recording {
    target: VoiceTarget,
    pressed_at: Instant,
    capture: Capture,
    to16k: To16k,
    samples: Vec<f32>,
    scratch: Vec<f32>,
    first_sample: bool,
    level_at: Instant,
}

pub struct AudioWorker {
    sink: EventSink<VoiceEvent>,
    speech: Sender<SpeechCommand>,
    server: Option<SoundServer>,
    blocks_tx: Sender<Block>,
    blocks_rx: Receiver<Block>,
    recording: Option<Recording>,
    device: Option<String>,
    /// The X connection dictation types through, made at the first use.
    typist: Option<super::dictate::Typist>,
    /// Where dictation types (an X display, a Wayland compositor, nowhere).
    typing: super::dictate::Typing,
}

impl AudioWorker {
    pub fn new(sink: EventSink<VoiceEvent>, speech: Sender<SpeechCommand>, typing: super::dictate::Typing) -> Self {
        let (blocks_tx, blocks_rx) = bounded(BLOCK_QUEUE);
        Self { sink, speech, server: None, blocks_tx, blocks_rx, recording: None, device: None, typist: None, typing }
    }

    fn voice(&self, event: VoiceEvent) {
        self.sink.send(event);
    }

    fn server(&mut self) -> Result<&SoundServer, MicError> {
        if self.server.is_none() {
            self.server = Some(SoundServer::connect()?);
        }
        Ok(self.server.as_ref().expect("connected above"))
    }

    /// Returns false on shutdown.
    pub fn handle_command(&mut self, command: AudioCommand) -> bool {
        match command {
            AudioCommand::Start { target, pressed_at } => self.start(target, pressed_at),
            AudioCommand::Stop { released_at } => self.stop(released_at),
            AudioCommand::Cancel => {
                if self.recording.take().is_some() {
                    self.voice(VoiceEvent::Closed { cancelled: true });
                }
            }
            AudioCommand::SetDevice(device) => self.device = device,
            AudioCommand::ListDevices => {
                let devices = self.server().and_then(|server| server.input_devices()).map_err(|err| err.to_string());
                if devices.is_err() {
                    self.server = None;
                }
                self.voice(VoiceEvent::Devices(devices));
            }
            AudioCommand::Dictate(text) => self.dictate(&text),
            AudioCommand::Shutdown => return false,
        }
        true
    }

    fn start(&mut self, target: VoiceTarget, pressed_at: Instant) {
        if self.recording.is_some() {
            return;
        }
        // Blocks of an earlier stream still queued are not this utterance's.
        while self.blocks_rx.try_recv().is_ok() {}
        let _ = self.speech.try_send(SpeechCommand::Prepare);
        let device = self.device.clone();
        let was_connected = self.server.is_some();
        let blocks = self.blocks_tx.clone();
        let mut opened = self.server().and_then(|server| server.open(Source::Microphone, device.as_deref(), Some(super::mic::FRAGMENT_MILLIS), false, blocks.clone()));
        if was_connected && matches!(opened, Err(MicError::NoServer(_) | MicError::Busy(_) | MicError::Other(_))) {
            // The kept connection may be to a server that restarted since: connect afresh once.
            self.server = None;
            opened = self.server().and_then(|server| server.open(Source::Microphone, device.as_deref(), Some(super::mic::FRAGMENT_MILLIS), false, blocks));
        }
        match opened {
            Ok(capture) => {
                let to16k = match To16k::new(capture.rate) {
                    Ok(to16k) => to16k,
                    Err(err) => {
                        self.voice(VoiceEvent::Failed { target: Some(target), error: format!("{err:#}") });
                        return;
                    }
                };
                self.voice(VoiceEvent::Opened { target, device: capture.device.clone() });
                self.recording = Some(Recording {
                    target,
                    pressed_at,
                    capture,
                    to16k,
                    samples: Vec::with_capacity(samples_for_millis(10_000)),
                    scratch: Vec::new(),
                    first_sample: false,
                    level_at: Instant::now(),
                });
            }
            Err(error) => self.fail(Some(target), error),
        }
    }

    fn dictate(&mut self, text: &str) {
        use super::dictate::Typing;
        let typed = match (&self.typing, self.typist.as_mut()) {
            (Typing::X11(_), Some(typist)) => typist.type_text(text),
            (Typing::X11(display), None) => {
                super::dictate::Typist::connect(display.as_deref()).and_then(|typist| self.typist.insert(typist).type_text(text))
            }
            (Typing::Wayland(target), _) => {
                crate::desktop::wlr::type_text(target, &super::dictate::typeable(text)).map_err(|err| anyhow::anyhow!(err))
            }
            (Typing::Mutter, _) => said(crate::desktop::gnome::type_text(&super::dictate::typeable(text))),
            (Typing::Portal(data_dir), _) => type_through_portal(data_dir, &super::dictate::typeable(text)),
            (Typing::Off(why), _) => Err(anyhow::anyhow!("{why}")),
        };
        match typed {
            Ok(chars) => self.voice(VoiceEvent::Typed { chars }),
            Err(err) => {
                // A display that went away is connected afresh next time.
                if err.downcast_ref::<x11rb::errors::ConnectionError>().is_some() || err.downcast_ref::<x11rb::errors::ReplyError>().is_some() {
                    self.typist = None;
                }
                self.voice(VoiceEvent::Failed { target: Some(VoiceTarget::Dictation), error: format!("dictation typed nothing: {err:#}") });
            }
        }
    }

    /// Empties the keycodes dictation borrowed, once the app has read them.
    fn restore_keys(&mut self) {
        if let Some(typist) = self.typist.as_mut()
            && let Err(err) = typist.restore()
        {
            tracing::warn!("dictation: cannot restore the keyboard mapping: {err:#}");
            self.typist = None;
        }
    }

    fn fail(&mut self, target: Option<VoiceTarget>, error: MicError) {
        if matches!(error, MicError::NoServer(_) | MicError::Other(_)) {
            // Reconnect at the next press: the server may have restarted.
            self.server = None;
        }
        self.voice(VoiceEvent::Failed { target, error: error.to_string() });
    }

    fn stop(&mut self, released_at: Instant) {
        let Some(mut recording) = self.recording.take() else { return };
        // Blocks already delivered belong to the utterance.
        while let Ok(block) = self.blocks_rx.try_recv() {
            if let Block::Samples { samples, .. } = block {
                Self::take_samples(&mut recording, &samples);
            }
        }
        drop(recording.capture);
        self.voice(VoiceEvent::Closed { cancelled: false });
        recording.to16k.finish(&mut recording.samples);
        let target = recording.target;
        if recording.samples.is_empty() {
            self.voice(VoiceEvent::Heard { target, heard: Heard::Nothing(Silence::TooShort), release_to_text_millis: 0 });
            return;
        }
        let utterance = Utterance { target, samples: recording.samples, released_at };
        match self.speech.try_send(SpeechCommand::Transcribe(utterance)) {
            Ok(()) => self.voice(VoiceEvent::Transcribing { target }),
            Err(_) => self.voice(VoiceEvent::Failed { target: Some(target), error: "the speech worker is busy or not running".into() }),
        }
    }

    fn take_samples(recording: &mut Recording, interleaved: &[f32]) {
        recording.scratch.clear();
        downmix_into(interleaved, recording.capture.channels, &mut recording.scratch);
        recording.to16k.push(&recording.scratch, &mut recording.samples);
    }

    pub fn handle_block(&mut self, block: Block) {
        let Some(recording) = self.recording.as_mut() else { return };
        match block {
            Block::Samples { samples, arrived, .. } => {
                let before = recording.samples.len();
                Self::take_samples(recording, &samples);
                if !recording.first_sample {
                    recording.first_sample = true;
                    // The block holds the fragment before its arrival: its first sample is that much older.
                    let millis = arrived.saturating_duration_since(recording.pressed_at).as_millis() as u64;
                    self.sink.send(VoiceEvent::FirstSample { millis });
                }
                if recording.level_at.elapsed() >= LEVEL_EVERY {
                    recording.level_at = Instant::now();
                    let level = level_of(&recording.samples[before..]);
                    self.sink.send(VoiceEvent::Level(level));
                }
                if millis_for_samples(recording.samples.len()) >= MAX_UTTERANCE_SECS * 1000 {
                    self.stop(Instant::now());
                }
            }
            Block::Failed { error, .. } => {
                let target = recording.target;
                self.recording = None;
                self.fail(Some(target), error);
            }
        }
    }
}

/// A meter reading from RMS: −60 dBFS and below is 0, full scale is 1.
pub fn level_of(samples: &[f32]) -> f32 {
    let rms = rms(samples);
    if rms <= 0.0 {
        return 0.0;
    }
    ((20.0 * rms.log10() + 60.0) / 60.0).clamp(0.0, 1.0)
}

impl Supervised for AudioWorker {
    type Command = AudioCommand;

    fn run(&mut self, commands: &Receiver<AudioCommand>, _ctx: &WorkerContext) -> anyhow::Result<()> {
        // Connected ahead (no device opens): the first press pays only for its stream.
        if let Err(err) = self.server() {
            tracing::info!("no sound server yet: {err}");
        }
        let blocks = self.blocks_rx.clone();
        loop {
            let restore = match self.typist.as_ref().and_then(|t| t.restore_due()) {
                Some(at) => crossbeam_channel::at(at),
                None => crossbeam_channel::never(),
            };
            select! {
                recv(commands) -> command => match command {
                    Ok(command) => if !self.handle_command(command) { break },
                    Err(_) => break,
                },
                recv(blocks) -> block => if let Ok(block) = block { self.handle_block(block) },
                recv(restore) -> _ => self.restore_keys(),
            }
        }
        self.restore_keys();
        Ok(())
    }
}

pub struct SpeechWorker {
    sink: EventSink<VoiceEvent>,
    manifest: Manifest,
    models_dir: PathBuf,
    config: SpeechConfig,
    transcriber: Option<Transcriber>,
    last_used: Instant,
    /// Listen-mode chunks received and not yet transcribed: they wait while
    /// anything else is in the channel, so push-to-talk never queues behind them.
    listen_queue: std::collections::VecDeque<(ListenJob, Sender<ListenDone>)>,
}

impl SpeechWorker {
    pub fn new(sink: EventSink<VoiceEvent>, manifest: Manifest, models_dir: PathBuf, config: SpeechConfig) -> Self {
        Self { sink, manifest, models_dir, config, transcriber: None, last_used: Instant::now(), listen_queue: Default::default() }
    }

    fn load(&mut self) -> anyhow::Result<&mut Transcriber> {
        let models = SpeechModels::resolve(&self.manifest, &self.models_dir, self.config.model.as_deref())?;
        if self.transcriber.as_ref().is_none_or(|t| !t.is_loaded(&models)) {
            self.transcriber = None;
            let started = Instant::now();
            let transcriber = Transcriber::load(&models, self.config.settings.clone())?;
            tracing::info!(model = %models.whisper.display(), millis = started.elapsed().as_millis() as u64, "speech models loaded");
            self.transcriber = Some(transcriber);
        }
        let transcriber = self.transcriber.as_mut().expect("loaded above");
        transcriber.set_settings(self.config.settings.clone());
        Ok(transcriber)
    }

    /// Returns false on shutdown.
    pub fn handle_command(&mut self, command: SpeechCommand) -> bool {
        self.last_used = Instant::now();
        match command {
            SpeechCommand::Prepare => {
                if let Err(err) = self.load() {
                    self.sink.send(VoiceEvent::Failed { target: None, error: format!("{err:#}") });
                }
            }
            SpeechCommand::Transcribe(utterance) => {
                let target = utterance.target;
                let result = self.load().and_then(|t| t.transcribe(&utterance.samples, None::<Arc<AtomicBool>>));
                let event = match result {
                    Ok(heard) => VoiceEvent::Heard { target, heard, release_to_text_millis: utterance.released_at.elapsed().as_millis() as u64 },
                    Err(err) => VoiceEvent::Failed { target: Some(target), error: format!("{err:#}") },
                };
                self.sink.send(event);
            }
            SpeechCommand::Listen { job, reply } => self.listen_queue.push_back((job, reply)),
            SpeechCommand::Configure(config) => self.config = config,
            SpeechCommand::Shutdown => return false,
        }
        self.last_used = Instant::now();
        true
    }

    /// Handles every command waiting in the channel; listen chunks only
    /// join the queue. Returns false on shutdown.
    fn drain(&mut self, commands: &Receiver<SpeechCommand>) -> bool {
        while let Ok(command) = commands.try_recv() {
            if !self.handle_command(command) {
                return false;
            }
        }
        true
    }

    fn transcribe_listen_chunk(&mut self, job: ListenJob, reply: Sender<ListenDone>) {
        self.last_used = Instant::now();
        let heard = self.load().and_then(|t| t.transcribe(&job.samples, None::<Arc<AtomicBool>>)).map_err(|err| format!("{err:#}"));
        let _ = reply.send_timeout(ListenDone { job, heard }, Duration::from_secs(5));
        self.last_used = Instant::now();
    }
}

impl Supervised for SpeechWorker {
    type Command = SpeechCommand;

    fn run(&mut self, commands: &Receiver<SpeechCommand>, _ctx: &WorkerContext) -> anyhow::Result<()> {
        loop {
            // Whatever waits in the channel first (an utterance, a Prepare), then one listen chunk.
            if !self.drain(commands) {
                return Ok(());
            }
            if let Some((job, reply)) = self.listen_queue.pop_front() {
                self.transcribe_listen_chunk(job, reply);
                continue;
            }
            let wait = match (&self.transcriber, self.config.idle_unload.is_zero()) {
                (Some(_), false) => self.config.idle_unload.saturating_sub(self.last_used.elapsed()),
                _ => Duration::from_secs(3600),
            };
            match commands.recv_timeout(wait) {
                Ok(command) => {
                    if !self.handle_command(command) {
                        break;
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    if self.transcriber.is_some() && !self.config.idle_unload.is_zero() && self.last_used.elapsed() >= self.config.idle_unload {
                        self.transcriber = None;
                        tracing::info!("speech models unloaded after idling");
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            }
        }
        Ok(())
    }
}

/// Starts the `speech` worker.
pub fn spawn_speech(manifest: Manifest, models_dir: PathBuf, config: SpeechConfig, sink: EventSink<VoiceEvent>, policy: RestartPolicy) -> std::io::Result<WorkerHandle<SpeechCommand>> {
    spawn_supervised::<SpeechWorker, _, _>(WorkerName::Speech, policy, sink.clone(), bounded(8), move |_ctx| {
        Ok(SpeechWorker::new(sink.clone(), manifest.clone(), models_dir.clone(), config.clone()))
    })
}

/// Starts the `audio` worker, handing utterances to `speech`; dictation
/// types into `display` (None: $DISPLAY).
pub fn spawn_audio(speech: Sender<SpeechCommand>, typing: super::dictate::Typing, sink: EventSink<VoiceEvent>, policy: RestartPolicy) -> std::io::Result<WorkerHandle<AudioCommand>> {
    spawn_supervised::<AudioWorker, _, _>(WorkerName::Audio, policy, sink.clone(), bounded(16), move |_ctx| {
        Ok(AudioWorker::new(sink.clone(), speech.clone(), typing.clone()))
    })
}

/// Dictation through the RemoteDesktop portal and libei; what the keyboard layout has no key for is said.
fn type_through_portal(data_dir: &std::path::Path, text: &str) -> anyhow::Result<usize> {
    let secrets = crate::secrets::Secrets::open(data_dir)?;
    let conn = crate::desktop::observed::session_bus().map_err(|err| anyhow::anyhow!(err))?;
    said(crate::desktop::portal::type_text(&conn, &secrets, text))
}

/// What was typed; what the keyboard layout has no key for is said, not guessed.
fn said(typed: Result<crate::desktop::ei::Typed, String>) -> anyhow::Result<usize> {
    let typed = typed.map_err(|err| anyhow::anyhow!(err))?;
    if typed.untypeable.is_empty() {
        return Ok(typed.typed);
    }
    let missing: String = typed.untypeable.iter().collect();
    anyhow::bail!("typed {} characters; your keyboard layout has no key for {missing:?}", typed.typed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::AppEvent;

    #[test]
    fn an_utterance_is_transcribed_before_listen_chunks_that_arrived_first() {
        let (events_tx, events) = bounded(16);
        let sink = crate::runtime::EventSink::<crate::events::AppEvent>::new(events_tx, || {}).narrow();
        let models = tempfile::tempdir().unwrap();
        let mut worker = SpeechWorker::new(sink, Manifest::bundled().unwrap(), models.path().to_owned(), SpeechConfig::default());
        let (commands_tx, commands) = bounded(8);
        let (reply, replies) = bounded(8);
        let job = |id: i64| ListenJob { transcript_id: id, source: Source::Microphone, started_at_millis: 0, ended_at_millis: 0, app: String::new(), title: String::new(), samples: vec![0.0; 16_000] };
        commands_tx.send(SpeechCommand::Listen { job: job(1), reply: reply.clone() }).unwrap();
        commands_tx.send(SpeechCommand::Transcribe(Utterance { target: VoiceTarget::Chat, samples: vec![0.0; 16_000], released_at: Instant::now() })).unwrap();
        commands_tx.send(SpeechCommand::Listen { job: job(2), reply }).unwrap();
        assert!(worker.drain(&commands));
        // The utterance was answered (no model here: an error naming it), the chunks only queued.
        assert!(matches!(events.try_recv(), Ok(AppEvent::Voice(VoiceEvent::Failed { target: Some(VoiceTarget::Chat), .. }))));
        assert!(replies.try_recv().is_err());
        assert_eq!(worker.listen_queue.iter().map(|(job, _)| job.transcript_id).collect::<Vec<_>>(), vec![1, 2]);
        commands_tx.send(SpeechCommand::Shutdown).unwrap();
        assert!(!worker.drain(&commands), "shutdown ends the loop");
    }

    #[test]
    fn the_meter_spans_sixty_decibels() {
        assert_eq!(level_of(&[]), 0.0);
        assert_eq!(level_of(&[0.0; 100]), 0.0);
        assert!((level_of(&[1.0; 100]) - 1.0).abs() < 1e-6);
        assert!((level_of(&[0.001; 100])).abs() < 1e-3);
        let mid = level_of(&[0.0316; 100]);
        assert!((mid - 0.5).abs() < 0.01, "{mid}");
    }
}
