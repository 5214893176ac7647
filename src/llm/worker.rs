//! The `llm` worker: the local inference engine and nothing else. It owns the
//! mistralrs engine and knows nothing of conversations, context or the store.
//!
//! - It loads the model on first use (after the memory preflight, `Preload` to
//!   do it now), swaps the file (`SetModel`), and unloads it when idle, on
//!   battery or under memory pressure.
//! - It answers `LlmCommand::Generate { request, epoch, events }` by streaming
//!   `LlmEvent::Text` and one `LlmEvent::Finished` on the requester's own
//!   bounded channel (256 events). With `tools` set it streams only the text
//!   outside `<tool_call>` blocks and returns the calls parsed (`tool_calls`).
//!   A request's `Shape` can constrain the output: `OneCall(schema)` is exactly
//!   one call block whose JSON fits the schema, `Prose` plain text with no
//!   block or JSON; the agent uses them for the small local model. A requester
//!   that went away, or Stop (the shared stop epoch moving past the request's),
//!   ends the generation.
//! - A request marked `background` (a recap, a meeting note, a summary, a warm
//!   prefill: no one waits for it) runs its forward passes on the engine's
//!   low-priority pool (`llm-low-N`, nice 10; mistralrs-core PATCH.md change
//!   17), so the user's programs and cowork's interface come first.
//!   One that may `give_way` reads its prompt in pieces of about
//!   `PIECE_BYTES` (each a one-token generation the prefix cache keeps, like
//!   the warm prefill's), and asks between pieces and tokens whether someone
//!   is now waiting (a question): if so it stops with `EngineError::GaveWay`,
//!   and asked again later it finds the pieces read so far in the cache. A
//!   question waits for one piece at most, not for a whole recap.
//! - Each finished generation's speed is kept per model file (`speed`) and sent
//!   as `LocalModelEvent::ModelSpeed` for Settings → Models.
//! - It publishes `LocalModelState` (atomics: unavailable, loaded, last used,
//!   paused by heat or the battery, restored by the user), so the agent can
//!   route and schedule background summaries without asking.
//! - Every 30 s it reads `/sys/class/thermal` (a zone at its trip point) and
//!   `/sys/class/power_supply` (discharging): either pauses the local model
//!   (unloaded; the router prefers a cloud tier the user allowed) with one
//!   notification through the notify worker, whose Accept calls
//!   `LocalModelState::restore`.
//!
//! `LocalBrain` is what the agent needs of it: `LlmClient` over the channel in
//! the app, a scripted brain in tests.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::ids::now_millis;
use crate::llm::engine::{ChatEngine, EngineError, MistralEngine, PromptMessage, StreamControl};
use crate::llm::events::{LocalModelEvent, ModelStatus};
use crate::llm::tool_calls::{self, Shape, ToolCall, VisibleText};
use crate::records::GenerationStats;
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, WorkerState, spawn_supervised};

#[derive(Clone, Debug)]
pub struct LlmConfig {
    pub model_path: PathBuf,
    /// Size and sha256 to verify before the first load (bundled models).
    pub model_expected: Option<(u64, String)>,
    /// The longest prompt the local model takes, in tokens (for the memory preflight).
    pub local_limit_tokens: usize,
    /// The longest answer, in tokens (for the memory preflight).
    pub max_answer_tokens: usize,
    /// Unload the local model after this long unused (0: never); on battery after a minute.
    pub idle_unload_secs: u64,
    /// Where the machine's power and thermal state are read (`/sys`; a test's own tree).
    pub sysfs: PathBuf,
    /// Where the one quiet notification goes when heat or the battery pause the local model.
    pub notify: Option<Sender<crate::notify::NotifyCommand>>,
    /// Where each generation's speed is kept (`llm::speed`); None measures nothing.
    pub speed_file: Option<PathBuf>,
}

impl LlmConfig {
    /// Power and heat read from the real `/sys`, nobody notified (tests and tools).
    pub fn real_sysfs() -> PathBuf {
        PathBuf::from("/sys")
    }
}

/// On battery, the local model is unloaded after this long unused.
const BATTERY_IDLE_SECS: u64 = 60;
/// While the model is loaded, memory pressure and idleness are checked this often.
const RESOURCE_CHECK: Duration = Duration::from_secs(15);
/// Heat and the battery are checked this often, loaded or not.
const POWER_CHECK: Duration = Duration::from_secs(30);

/// One generation asked of the local engine.
#[derive(Clone, Debug, Default)]
pub struct GenerateRequest {
    pub messages: Vec<PromptMessage>,
    pub max_tokens: usize,
    /// The model's output may hold `<tool_call>` blocks: stream only the text
    /// around them and return the calls parsed.
    pub tools: bool,
    /// Generate only when the model is already loaded: background work
    /// (summaries) never loads 400 MB on its own.
    pub only_if_loaded: bool,
    /// What the output may be: the agent's local steps are one forced call,
    /// then a plain answer.
    pub shape: Shape,
    /// Work no one is waiting for (a recap, a meeting note, a summary, a warm
    /// prefill): it runs on low-priority threads (nice 10).
    pub background: bool,
    /// Asked between pieces of a background prompt and between tokens: true
    /// stops the generation with `EngineError::GaveWay` (module docs).
    pub give_way: Option<GiveWay>,
}

/// Whether a background generation should stop for someone now waiting
/// (`GenerateRequest::give_way`). Called on the llm worker's thread.
#[derive(Clone)]
pub struct GiveWay(Arc<dyn Fn() -> bool + Send + Sync>);

impl GiveWay {
    pub fn new(now: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(now))
    }

    pub fn now(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for GiveWay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GiveWay")
    }
}

/// A background prompt that may give way is read in pieces of about this
/// many bytes (200–300 tokens: a few seconds of the 1.5B's prefill on two
/// cores), cut at line ends.
const PIECE_BYTES: usize = 800;

/// `PIECE_BYTES`, or `COWORK_PIECE_BYTES` from the environment when set (`0`:
/// the whole prompt in one read), read per request so that a measurement can
/// compare both in one run (as mistralrs-core's `MISTRALRS_PREFILL_CHUNK`).
fn piece_bytes() -> usize {
    match std::env::var("COWORK_PIECE_BYTES").ok().map(|v| v.parse::<usize>()) {
        Some(Ok(0)) => usize::MAX,
        Some(Ok(n)) => n,
        _ => PIECE_BYTES,
    }
}

/// The prompts that read `messages` piece by piece: each ends a message early
/// at a line end, about every `every` bytes, and the whole prompt is not
/// among them. A tail shorter than a quarter piece is not worth a piece.
fn prompt_pieces(messages: &[PromptMessage], every: usize) -> Vec<Vec<PromptMessage>> {
    let total: usize = messages.iter().map(|m| m.content.len()).sum();
    let mut pieces = Vec::new();
    let (mut read, mut since) = (0usize, 0usize);
    for (i, message) in messages.iter().enumerate() {
        let mut last = 0;
        for (at, _) in message.content.match_indices('\n') {
            since += at - last;
            last = at;
            if since >= every && total - (read + at) >= every / 4 {
                let mut piece = messages[..i].to_vec();
                piece.push(PromptMessage { role: message.role, content: message.content[..at].to_owned() });
                pieces.push(piece);
                since = 0;
            }
        }
        since += message.content.len() - last;
        read += message.content.len();
    }
    pieces
}

/// A finished generation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Generation {
    /// The whole output, or with tools the text outside the call blocks.
    pub text: String,
    /// With tools: each `<tool_call>` block, or why it could not be read.
    pub calls: Vec<Result<ToolCall, String>>,
    /// With tools: the whole output, blocks included, as the model wrote it
    /// (a next step's prompt repeats it verbatim, so the prefix cache holds).
    pub raw: String,
    pub stats: GenerationStats,
    /// The model file's name.
    pub model: String,
}

/// What streams back for one `Generate`.
#[derive(Debug)]
pub enum LlmEvent {
    Text(String),
    Finished(Result<Generation, EngineError>),
}

#[derive(Debug)]
pub enum LlmCommand {
    /// Generate, stopping when the shared stop epoch moves past `epoch`.
    Generate { request: GenerateRequest, epoch: u64, events: Sender<LlmEvent> },
    /// Load the model now instead of on first use.
    Preload,
    /// Answer with this model file from now on (Settings → Models); size and sha256 to verify.
    SetModel { path: PathBuf, expected: Option<(u64, String)> },
    Unload,
    /// Fault injection for supervisor tests: panic inside the worker.
    InjectPanic,
    Shutdown,
}

/// What other workers may read about the local model without asking it:
/// atomics the llm worker writes and the agent reads for routing and for
/// deciding when background summaries may ride on a loaded model.
#[derive(Debug, Default)]
pub struct LocalModelState {
    unavailable: AtomicBool,
    loaded: AtomicBool,
    last_used_millis: AtomicI64,
    /// Heat or the battery paused the local model.
    constrained: AtomicBool,
    /// The user chose the local model anyway (until the constraint ends).
    restored: AtomicBool,
    /// The agent wants the model kept loaded and its prompt head prefilled (`llm.keep_warm`).
    keep_loaded: AtomicBool,
    /// The machine can afford that: loading is GREEN and the model takes at most
    /// an eighth of the RAM (the llm worker's preflight).
    affordable: AtomicBool,
    /// Resident memory the model's last load added, in bytes (Settings says it).
    resident_bytes: AtomicU64,
}

impl LocalModelState {
    /// The model cannot load (missing, damaged, not enough memory): route elsewhere.
    pub fn is_unavailable(&self) -> bool {
        self.unavailable.load(Ordering::Relaxed)
    }
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Relaxed)
    }
    /// How long since the model last generated.
    pub fn idle_for(&self, now_millis: i64) -> Duration {
        Duration::from_millis((now_millis - self.last_used_millis.load(Ordering::Relaxed)).max(0) as u64)
    }
    /// Heat or the battery paused the local model and the user has not chosen it anyway:
    /// a cloud provider the user allowed answers instead.
    pub fn prefers_cloud(&self) -> bool {
        self.constrained.load(Ordering::Relaxed) && !self.restored.load(Ordering::Relaxed)
    }
    /// The user's tap: the local model answers again, hot or on battery.
    pub fn restore(&self) {
        self.restored.store(true, Ordering::Relaxed);
    }
    #[cfg(test)]
    pub(crate) fn set_loaded(&self, loaded: bool) {
        self.loaded.store(loaded, Ordering::Relaxed);
    }
    /// `llm.keep_warm`, as the agent read it from the settings.
    pub fn set_keep_loaded(&self, keep: bool) {
        self.keep_loaded.store(keep, Ordering::Relaxed);
    }
    /// The model stays loaded: the user wants it and the machine can afford it.
    pub fn keeps_loaded(&self) -> bool {
        self.keep_loaded.load(Ordering::Relaxed) && self.affordable.load(Ordering::Relaxed)
    }
    pub fn is_affordable(&self) -> bool {
        self.affordable.load(Ordering::Relaxed)
    }
    /// Resident memory the model's last load added (0: not measured yet).
    pub fn resident_bytes(&self) -> u64 {
        self.resident_bytes.load(Ordering::Relaxed)
    }
}

/// Whether keeping a model loaded is affordable: its preflight is GREEN and it
/// needs at most an eighth of the machine's memory.
pub fn affordable(check: &crate::models::gguf::Preflight, total_bytes: u64) -> bool {
    check.verdict == crate::models::gguf::Verdict::Green && check.needed_bytes().saturating_mul(8) <= total_bytes
}

/// This process's resident memory, in bytes (`/proc/self/statm`).
fn resident_now() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(4096) as u64)
}

pub struct LlmWorker<E: ChatEngine> {
    config: LlmConfig,
    engine: E,
    sink: EventSink<LocalModelEvent>,
    /// Bumped by Stop; a generation that started under an older value stops.
    stop_epoch: Arc<AtomicU64>,
    state: Arc<LocalModelState>,
    /// When the local model last answered (for idle unloading).
    last_used: Instant,
    /// How fast each model file ran here (`config.speed_file`).
    speeds: crate::llm::speed::Speeds,
}

impl<E: ChatEngine> LlmWorker<E> {
    pub fn new(config: LlmConfig, engine: E, sink: EventSink<LocalModelEvent>, stop_epoch: Arc<AtomicU64>, state: Arc<LocalModelState>) -> Self {
        let speeds = config.speed_file.as_deref().map(crate::llm::speed::Speeds::load).unwrap_or_default();
        let worker = Self { config, engine, sink, stop_epoch, state, last_used: Instant::now(), speeds };
        worker.touch_state();
        worker
    }

    fn touch_state(&self) {
        self.state.loaded.store(self.engine.is_loaded(), Ordering::Relaxed);
        self.state.last_used_millis.store(now_millis() - self.last_used.elapsed().as_millis() as i64, Ordering::Relaxed);
    }

    fn set_unavailable(&self, unavailable: bool) {
        self.state.unavailable.store(unavailable, Ordering::Relaxed);
    }

    /// The memory preflight for the local model, if its file can be read.
    pub fn preflight(&self) -> Option<crate::models::gguf::Preflight> {
        let info = crate::models::gguf::read_info(&self.config.model_path).ok()?;
        let (available, total) = crate::llm::memory::meminfo()?;
        let context = (self.config.local_limit_tokens + self.config.max_answer_tokens) as u64;
        Some(crate::models::gguf::preflight(&info, context, available, total))
    }

    fn ensure_model(&mut self) -> Result<(), EngineError> {
        self.last_used = Instant::now();
        if self.engine.is_loaded() {
            return Ok(());
        }
        if let Some(check) = self.preflight() {
            self.sink.send(LocalModelEvent::ModelPreflight(check.describe()));
            if check.verdict == crate::models::gguf::Verdict::Red {
                let reason = format!("not enough memory for the local model ({}); configure a cloud provider to answer instead", check.describe());
                self.set_unavailable(true);
                self.sink.send(LocalModelEvent::Model(ModelStatus::Unavailable(reason.clone())));
                return Err(EngineError::ModelUnavailable(reason));
            }
        }
        self.sink.send(LocalModelEvent::Model(ModelStatus::Loading));
        let before = resident_now();
        let loaded = self.engine.ensure_loaded();
        self.touch_state();
        match loaded {
            Ok(load_time) => {
                let load_millis = load_time.map(|d| d.as_millis() as u64).unwrap_or(0);
                let resident_bytes = resident_now().zip(before).map_or(0, |(after, before)| after.saturating_sub(before));
                self.state.resident_bytes.store(resident_bytes, Ordering::Relaxed);
                self.sink.send(LocalModelEvent::Model(ModelStatus::Ready { load_millis, resident_bytes }));
                Ok(())
            }
            Err(err) => {
                self.set_unavailable(matches!(err, EngineError::ModelUnavailable(_)));
                self.sink.send(LocalModelEvent::Model(ModelStatus::Unavailable(err.to_string())));
                Err(err)
            }
        }
    }

    /// Runs one generation, streaming text to `events`. A requester that went
    /// away (its receiver dropped) stops the generation like Stop does.
    pub fn handle_generate(&mut self, request: GenerateRequest, epoch: u64, events: &Sender<LlmEvent>, ctx: &WorkerContext) {
        let result = self.generate(request, epoch, events);
        if let Err(EngineError::ModelUnavailable(reason)) = &result {
            ctx.report(WorkerState::Degraded(reason.clone()));
        }
        let _ = events.send(LlmEvent::Finished(result));
    }

    fn generate(&mut self, request: GenerateRequest, epoch: u64, events: &Sender<LlmEvent>) -> Result<Generation, EngineError> {
        if request.only_if_loaded && !self.engine.is_loaded() {
            return Err(EngineError::Generation("the local model is not loaded".into()));
        }
        self.ensure_model()?;
        self.engine.set_background(request.background);
        let stop_epoch = self.stop_epoch.clone();
        let gave_way = std::cell::Cell::new(false);
        let give_way = request.give_way.clone();
        let should_stop = || {
            if stop_epoch.load(Ordering::SeqCst) != epoch {
                return true;
            }
            if !gave_way.get() && give_way.as_ref().is_some_and(GiveWay::now) {
                gave_way.set(true);
            }
            gave_way.get()
        };
        // A prompt that may give way goes in pieces first (module docs); the last read is the whole.
        if request.background && request.give_way.is_some() {
            for piece in prompt_pieces(&request.messages, piece_bytes()) {
                if should_stop() {
                    break;
                }
                if let Err(err) = self.engine.stream(&piece, 1, &Shape::Free, &mut |_: &str| StreamControl::Stop, &should_stop) {
                    self.engine.set_background(false);
                    return Err(err);
                }
            }
        }
        let mut raw = String::new();
        let mut visible = VisibleText::default();
        let one_call = matches!(request.shape, Shape::OneCall(_));
        let stats = match gave_way.get() {
            true => Err(EngineError::GaveWay),
            false => self.engine.stream(
                &request.messages,
                request.max_tokens,
                &request.shape,
                &mut |token| {
                    raw.push_str(token);
                    let shown = if request.tools { visible.push(token) } else { token.to_owned() };
                    if !shown.is_empty() && events.send(LlmEvent::Text(shown)).is_err() {
                        return StreamControl::Stop;
                    }
                    // One forced call ends at its block's end: the grammar allows nothing after it,
                    // but Qwen's <|endoftext|> as well as its end token, which only ends a turn.
                    if one_call && raw.contains(super::tool_calls::CLOSE) { StreamControl::Stop } else { StreamControl::Continue }
                },
                &should_stop,
            ),
        };
        if request.background {
            self.engine.set_background(false);
        }
        self.last_used = Instant::now();
        self.touch_state();
        let stats = stats?;
        if gave_way.get() {
            return Err(EngineError::GaveWay);
        }
        if stop_epoch.load(Ordering::SeqCst) == epoch {
            self.record_speed(&stats);
        }
        let rest = visible.finish();
        if request.tools && !rest.is_empty() {
            let _ = events.send(LlmEvent::Text(rest));
        }
        let (text, calls, raw) = if request.tools {
            let parsed = tool_calls::parse(&raw);
            (parsed.text, parsed.calls, raw)
        } else {
            (raw, Vec::new(), String::new())
        };
        Ok(Generation { text, calls, raw, stats, model: self.engine.name() })
    }

    /// Keeps a finished generation's speed and tells Settings the model's new medians.
    fn record_speed(&mut self, stats: &GenerationStats) {
        let Some(path) = self.config.speed_file.clone() else { return };
        let model = self.engine.name();
        let sample = crate::llm::speed::Sample {
            prompt_tokens: stats.prompt_tokens as u32,
            first_token_ms: stats.first_token_millis as u32,
            completion_tokens: stats.completion_tokens as u32,
            tokens_per_sec: stats.tokens_per_sec,
        };
        if !self.speeds.record(&model, sample) {
            return;
        }
        if let Err(err) = self.speeds.save(&path) {
            tracing::warn!(error = %format!("{err:#}"), "the model's speed is not kept");
        }
        if let Some(measured) = self.speeds.measured(&model) {
            self.sink.send(LocalModelEvent::ModelSpeed { model, measured });
        }
    }

    /// Heat (a thermal zone over its trip point) or running on battery pause
    /// the local model: it is unloaded, questions go to a cloud provider the
    /// user allowed, and one quiet notification says so (Accept uses the
    /// local model anyway). When the machine is cool and on mains again, all
    /// of it ends.
    pub fn check_power(&mut self) {
        let hot = crate::llm::memory::too_hot(&self.config.sysfs.join("class/thermal"));
        let battery = crate::llm::memory::on_battery(&self.config.sysfs.join("class/power_supply"));
        let reason = match (hot, battery) {
            (Some(hot), _) => Some(format!("{} is at {:.0} °C (its limit is {:.0} °C)", hot.zone, hot.celsius, hot.limit)),
            (None, true) => Some("the computer runs on battery".to_owned()),
            (None, false) => None,
        };
        let constrained = self.state.constrained.load(Ordering::Relaxed);
        match reason {
            Some(reason) if !constrained => {
                tracing::info!(%reason, "pausing the local model");
                self.state.constrained.store(true, Ordering::Relaxed);
                self.state.restored.store(false, Ordering::Relaxed);
                if self.engine.is_loaded() {
                    self.engine.unload();
                    self.touch_state();
                    self.sink.send(LocalModelEvent::Model(ModelStatus::NotLoaded));
                }
                if let Some(notify) = &self.config.notify {
                    let notice = crate::automations::steps::Notice {
                        source: "cowork:power".into(),
                        tier: crate::automations::flow::NotifyTier::Informational,
                        title: "cowork paused its local model".into(),
                        body: format!("{reason}. Questions go to a cloud provider you allowed, if any; Accept uses the local model anyway."),
                        action: crate::automations::steps::NoticeAction::RestoreLocal,
                        why: format!("Why: {reason}"),
                    };
                    let _ = notify.try_send(crate::notify::NotifyCommand::Post { notification_id: crate::ids::next_id(), notice: Box::new(notice) });
                }
            }
            None if constrained => {
                tracing::info!("cool and on mains again: the local model answers again");
                self.state.constrained.store(false, Ordering::Relaxed);
                self.state.restored.store(false, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Unloads the local model when it has been idle long enough, the machine
    /// runs on battery, or memory is under pressure (PSI) or short.
    pub fn check_resources(&mut self) {
        if !self.engine.is_loaded() {
            self.keep_loaded();
            return;
        }
        let (available, total) = crate::llm::memory::meminfo().map_or((None, 0), |(a, t)| (Some(a), t));
        // Kept loaded (`llm.keep_warm`): never unloaded for idling; the battery, pressure and
        // a shortage of memory still unload it.
        let reason = crate::llm::memory::unload_reason(
            self.last_used.elapsed().as_secs(),
            if self.state.keeps_loaded() { 0 } else { self.config.idle_unload_secs },
            BATTERY_IDLE_SECS,
            crate::llm::memory::on_battery(std::path::Path::new("/sys/class/power_supply")),
            crate::llm::memory::memory_pressure(),
            available,
            (total / 20).max(256_000_000),
        );
        if let Some(reason) = reason {
            tracing::info!(%reason, "unloading the local model");
            self.engine.unload();
            self.touch_state();
            self.sink.send(LocalModelEvent::Model(ModelStatus::NotLoaded));
            self.sink.notice(format!("local model unloaded: {reason}; it reloads on the next question"));
        }
    }

    /// The memory preflight for the UI, and whether keeping the model loaded is affordable.
    fn assess(&self) {
        if let Some(check) = self.preflight() {
            self.sink.send(LocalModelEvent::ModelPreflight(check.describe()));
            let total = crate::llm::memory::meminfo().map_or(0, |(_, total)| total);
            self.state.affordable.store(affordable(&check, total), Ordering::Relaxed);
        }
    }

    /// Loads the model when the agent wants it kept loaded, the machine can
    /// afford it, its file is there and nothing pauses it (heat, the battery,
    /// a failed load): the first answer of the day then does not wait for it.
    fn keep_loaded(&mut self) {
        let state = &self.state;
        if !state.keeps_loaded() || state.is_unavailable() || state.constrained.load(Ordering::Relaxed) || !self.config.model_path.is_file() {
            return;
        }
        if crate::llm::memory::on_battery(&self.config.sysfs.join("class/power_supply")) {
            return;
        }
        tracing::info!("loading the local model to keep it warm");
        let _ = self.ensure_model();
    }

    /// Handles one command. Returns false on Shutdown.
    pub fn handle(&mut self, command: LlmCommand, ctx: &WorkerContext) -> bool {
        match command {
            LlmCommand::Generate { request, epoch, events } => self.handle_generate(request, epoch, &events, ctx),
            LlmCommand::Preload => {
                if let Err(EngineError::ModelUnavailable(reason)) = self.ensure_model() {
                    ctx.report(WorkerState::Degraded(reason));
                }
            }
            LlmCommand::SetModel { path, expected } => {
                tracing::info!(model = %path.display(), "chat model changed");
                self.engine.set_model(path.clone(), expected.clone());
                self.config.model_path = path;
                self.config.model_expected = expected;
                self.set_unavailable(false);
                self.touch_state();
                self.sink.send(LocalModelEvent::Model(ModelStatus::NotLoaded));
                self.assess();
            }
            LlmCommand::Unload => {
                self.engine.unload();
                self.touch_state();
                self.sink.send(LocalModelEvent::Model(ModelStatus::NotLoaded));
            }
            LlmCommand::InjectPanic => panic!("injected llm fault"),
            LlmCommand::Shutdown => return false,
        }
        true
    }
}

impl<E: ChatEngine> Supervised for LlmWorker<E> {
    type Command = LlmCommand;

    fn run(&mut self, commands: &Receiver<LlmCommand>, ctx: &WorkerContext) -> anyhow::Result<()> {
        self.sink.send(LocalModelEvent::Model(ModelStatus::NotLoaded));
        self.assess();
        self.check_power();
        let mut power_checked = Instant::now();
        loop {
            let wait = if self.engine.is_loaded() { RESOURCE_CHECK } else { POWER_CHECK };
            match commands.recv_timeout(wait) {
                Ok(command) => {
                    if !self.handle(command, ctx) {
                        break;
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    self.check_resources();
                    if power_checked.elapsed() >= POWER_CHECK {
                        self.check_power();
                        power_checked = Instant::now();
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            }
        }
        Ok(())
    }
}

/// Starts the llm worker (mistralrs) under supervision on a thread named `llm`.
pub fn spawn_llm(
    config: LlmConfig,
    sink: EventSink<LocalModelEvent>,
    stop_epoch: Arc<AtomicU64>,
    state: Arc<LocalModelState>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<LlmCommand>> {
    let channel = bounded(16);
    spawn_supervised::<LlmWorker<MistralEngine>, _, _>(WorkerName::Llm, policy, sink.clone(), channel, move |_ctx| {
        let engine = MistralEngine::new(config.model_path.clone(), config.model_expected.clone())?;
        Ok(LlmWorker::new(config.clone(), engine, sink.clone(), stop_epoch.clone(), state.clone()))
    })
}

/// The local brain as the agent uses it: one generation at a time, streamed.
/// The llm worker behind a channel in the app; a scripted brain in tests.
pub trait LocalBrain {
    /// Generates, calling `on_text` with each piece of visible text; stops when
    /// the stop epoch moves past `epoch`.
    fn generate(&mut self, request: GenerateRequest, epoch: u64, on_text: &mut dyn FnMut(&str)) -> Result<Generation, EngineError>;
    fn state(&self) -> &LocalModelState;
}

/// Reaches the llm worker over its command channel.
#[derive(Clone)]
pub struct LlmClient {
    commands: Sender<LlmCommand>,
    state: Arc<LocalModelState>,
}

/// Text pieces in flight between the llm worker and one requester.
const GENERATION_EVENTS: usize = 256;

impl LlmClient {
    pub fn new(commands: Sender<LlmCommand>, state: Arc<LocalModelState>) -> Self {
        Self { commands, state }
    }
}

impl LocalBrain for LlmClient {
    fn generate(&mut self, request: GenerateRequest, epoch: u64, on_text: &mut dyn FnMut(&str)) -> Result<Generation, EngineError> {
        let (events, replies) = bounded(GENERATION_EVENTS);
        self.commands
            .send_timeout(LlmCommand::Generate { request, epoch, events }, Duration::from_secs(5))
            .map_err(|_| EngineError::Generation("the local model worker is not running".into()))?;
        loop {
            match replies.recv() {
                Ok(LlmEvent::Text(text)) => on_text(&text),
                Ok(LlmEvent::Finished(result)) => return result,
                // The llm worker panicked or stopped mid-generation; its supervisor restarts it.
                Err(_) => return Err(EngineError::Generation("the local model worker stopped during the answer".into())),
            }
        }
    }

    fn state(&self) -> &LocalModelState {
        &self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::AppEvent;
    use crate::llm::events::LocalModelEvent;
    use crate::runtime::RuntimeEvent;
    use crate::llm::engine::PromptRole;

    /// Streams a fixed text, split where a tag could be split.
    struct FixedEngine {
        pieces: Vec<&'static str>,
        loaded: bool,
        /// Each prompt's last message and the tokens asked for.
        seen: Vec<(String, usize)>,
    }

    impl ChatEngine for FixedEngine {
        fn ensure_loaded(&mut self) -> Result<Option<Duration>, EngineError> {
            self.loaded = true;
            Ok(None)
        }
        fn is_loaded(&self) -> bool {
            self.loaded
        }
        fn unload(&mut self) {
            self.loaded = false;
        }
        fn set_model(&mut self, _path: PathBuf, _expected: Option<(u64, String)>) {}
        fn stream(
            &mut self,
            messages: &[PromptMessage],
            max_tokens: usize,
            _shape: &Shape,
            on_token: &mut dyn FnMut(&str) -> StreamControl,
            should_stop: &dyn Fn() -> bool,
        ) -> Result<GenerationStats, EngineError> {
            self.seen.push((messages.last().map(|m| m.content.clone()).unwrap_or_default(), max_tokens));
            for piece in &self.pieces {
                if should_stop() || on_token(piece) == StreamControl::Stop {
                    break;
                }
            }
            Ok(GenerationStats { completion_tokens: self.pieces.len(), ..GenerationStats::default() })
        }
        fn name(&self) -> String {
            "fixed.gguf".into()
        }
    }

    fn worker(pieces: Vec<&'static str>) -> (LlmWorker<FixedEngine>, WorkerContext, Receiver<AppEvent>, Arc<LocalModelState>) {
        let (events_tx, events) = bounded(64);
        let sink = crate::runtime::EventSink::<crate::events::AppEvent>::new(events_tx, || {}).narrow();
        let config = LlmConfig { model_path: "unused.gguf".into(), model_expected: None, local_limit_tokens: 1_500, max_answer_tokens: 16, idle_unload_secs: 600, sysfs: "/nonexistent".into(), notify: None, speed_file: None };
        let state = Arc::new(LocalModelState::default());
        let worker = LlmWorker::new(config, FixedEngine { pieces, loaded: false, seen: Vec::new() }, sink.clone(), Arc::default(), state.clone());
        (worker, WorkerContext::new(WorkerName::Llm, &sink), events, state)
    }

    fn run(worker: &mut LlmWorker<FixedEngine>, ctx: &WorkerContext, request: GenerateRequest) -> (String, Result<Generation, EngineError>) {
        let (tx, rx) = bounded(64);
        worker.handle(LlmCommand::Generate { request, epoch: 0, events: tx }, ctx);
        let mut streamed = String::new();
        for event in rx.try_iter() {
            match event {
                LlmEvent::Text(text) => streamed.push_str(&text),
                LlmEvent::Finished(result) => return (streamed, result),
            }
        }
        panic!("no Finished event")
    }

    fn ask() -> GenerateRequest {
        GenerateRequest { messages: vec![PromptMessage { role: PromptRole::User, content: "hi".into() }], max_tokens: 16, ..GenerateRequest::default() }
    }

    #[test]
    fn heat_pauses_the_local_model_once_with_one_quiet_notification_and_the_users_tap_or_cooling_ends_it() {
        let sysfs = tempfile::tempdir().unwrap();
        let zone = sysfs.path().join("class/thermal/thermal_zone0");
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(zone.join("type"), "x86_pkg_temp").unwrap();
        std::fs::write(zone.join("trip_point_0_type"), "passive").unwrap();
        std::fs::write(zone.join("trip_point_0_temp"), "85000").unwrap();
        std::fs::write(zone.join("temp"), "92000").unwrap();
        let (notify_tx, notices) = bounded(8);
        let (mut worker, ctx, _events, state) = worker(vec!["hi"]);
        worker.config.sysfs = sysfs.path().to_owned();
        worker.config.notify = Some(notify_tx);
        run(&mut worker, &ctx, ask()).1.unwrap();
        assert!(state.is_loaded());
        worker.check_power();
        worker.check_power();
        assert!(!state.is_loaded() && state.prefers_cloud(), "unloaded, and the cloud answers when allowed");
        let posted: Vec<_> = notices.try_iter().collect();
        assert_eq!(posted.len(), 1, "one notification, not one per check");
        let crate::notify::NotifyCommand::Post { notice, .. } = &posted[0] else { panic!("{posted:?}") };
        assert!(notice.body.contains("x86_pkg_temp is at 92 °C (its limit is 85 °C)") && notice.action == crate::automations::steps::NoticeAction::RestoreLocal, "{notice:?}");
        // The user's tap: local again, while it stays hot.
        state.restore();
        worker.check_power();
        assert!(!state.prefers_cloud());
        // Cool again: the pause ends; hot once more, it pauses (and says so) again.
        std::fs::write(zone.join("temp"), "60000").unwrap();
        worker.check_power();
        std::fs::write(zone.join("temp"), "90000").unwrap();
        worker.check_power();
        assert!(state.prefers_cloud());
        assert_eq!(notices.try_iter().count(), 1);
    }

    #[test]
    fn with_tools_the_stream_hides_call_blocks_and_the_result_carries_each_call() {
        let pieces = vec!["Let me look.", "<tool", "_call>{\"name\": \"current_window\", ", "\"arguments\": {}}</tool_call>", " Done."];
        let (mut worker, ctx, _events, state) = worker(pieces);
        let (streamed, result) = run(&mut worker, &ctx, GenerateRequest { tools: true, ..ask() });
        let generation = result.unwrap();
        assert_eq!(streamed, "Let me look. Done.", "no part of a block reaches the stream");
        assert_eq!(generation.text, "Let me look. Done.");
        assert_eq!(generation.calls.len(), 1);
        assert_eq!(generation.calls[0].as_ref().unwrap().name, "current_window");
        assert_eq!(generation.model, "fixed.gguf");
        assert!(state.is_loaded(), "the shared state follows the engine");
        // Without tools the text is the model's, untouched.
        let (streamed, result) = run(&mut worker, &ctx, ask());
        assert!(streamed.contains("<tool_call>") && result.unwrap().calls.is_empty());
    }

    #[test]
    fn a_prompt_is_cut_in_pieces_at_line_ends_each_a_prefix_of_the_whole() {
        let log: String = (0..40).map(|i| format!("[{i}] 09:{i:02} code — ledger.rs - ledger-svc ({i} min)\n")).collect();
        let messages = vec![PromptMessage { role: PromptRole::System, content: "You write recaps.".into() }, PromptMessage { role: PromptRole::User, content: log.clone() + "Write the recap." }];
        let pieces = prompt_pieces(&messages, 800);
        assert!(pieces.len() >= 2, "{} bytes in {} pieces", log.len(), pieces.len());
        let mut read = 0;
        for piece in &pieces {
            assert_eq!(piece.len(), 2);
            assert_eq!(piece[0], messages[0]);
            let text = &piece[1].content;
            assert!(messages[1].content.starts_with(text.as_str()) && messages[1].content[text.len()..].starts_with('\n'), "cut at a line end");
            assert!(text.len() >= read + 800 && text.len() < read + 900, "about every 800 bytes: {} after {read}", text.len());
            read = text.len();
        }
        assert!(messages[1].content.len() - read >= 200, "no piece for a short tail");
        // A short prompt is read whole; a long system message is cut too, alone.
        assert!(prompt_pieces(&messages[..1], 800).is_empty());
        let long_system = vec![PromptMessage { role: PromptRole::System, content: log.clone() }, messages[1].clone()];
        assert_eq!(prompt_pieces(&long_system, 800)[0].len(), 1);
    }

    #[test]
    fn background_work_that_may_give_way_reads_its_prompt_in_pieces_and_stops_between_them() {
        let (mut worker, ctx, _events, _state) = worker(vec!["Recap", " done."]);
        let log: String = (0..60).map(|i| format!("[{i}] 09:{i:02} code — ledger.rs - ledger-svc ({i} min)\n")).collect();
        let recap = GenerateRequest { messages: vec![PromptMessage { role: PromptRole::User, content: log.clone() }], max_tokens: 200, background: true, ..GenerateRequest::default() };
        let pieces = prompt_pieces(&recap.messages, PIECE_BYTES).len();
        assert!(pieces >= 3);
        // Someone comes to wait while the second piece is read (the fourth look: one before
        // each piece, one per token): it stops there.
        let looks = Arc::new(AtomicU64::new(0));
        let counter = looks.clone();
        let give_way = GiveWay::new(move || counter.fetch_add(1, Ordering::SeqCst) >= 3);
        let (streamed, result) = run(&mut worker, &ctx, GenerateRequest { give_way: Some(give_way), ..recap.clone() });
        assert!(matches!(result, Err(EngineError::GaveWay)) && streamed.is_empty(), "{result:?}");
        assert_eq!(worker.engine.seen.len(), 2, "{:?}", worker.engine.seen);
        assert!(worker.engine.seen.iter().all(|(text, tokens)| *tokens == 1 && log.starts_with(text.as_str()) && text.len() < log.len()));
        // No one waiting: every piece, then the whole prompt, answered as usual.
        worker.engine.seen.clear();
        let (streamed, result) = run(&mut worker, &ctx, GenerateRequest { give_way: Some(GiveWay::new(|| false)), ..recap.clone() });
        assert_eq!((streamed.as_str(), result.unwrap().text.as_str()), ("Recap done.", "Recap done."));
        assert_eq!(worker.engine.seen.len(), pieces + 1);
        assert_eq!(worker.engine.seen.last().unwrap(), &(log.clone(), 200));
        // Without give_way (a question, or a warm prefill's own pieces), one read as before.
        worker.engine.seen.clear();
        run(&mut worker, &ctx, recap).1.unwrap();
        assert_eq!(worker.engine.seen.len(), 1);
    }

    #[test]
    fn background_work_does_not_load_the_model_and_a_gone_requester_stops_the_stream() {
        let (mut worker, ctx, _events, state) = worker(vec!["a", "b", "c"]);
        let (_, result) = run(&mut worker, &ctx, GenerateRequest { only_if_loaded: true, ..ask() });
        assert!(result.is_err() && !state.is_loaded(), "not loaded for a summary");
        let (tx, rx) = bounded(1);
        drop(rx);
        worker.handle(LlmCommand::Generate { request: ask(), epoch: 0, events: tx }, &ctx);
        assert!(state.is_loaded() && state.idle_for(now_millis()) < Duration::from_secs(5));
    }

    #[test]
    fn an_idle_local_model_is_unloaded_and_says_why() {
        let (mut worker, _ctx, events, state) = worker(vec!["x"]);
        worker.ensure_model().unwrap();
        let _: Vec<AppEvent> = events.try_iter().collect();
        worker.config.idle_unload_secs = 1;
        worker.check_resources();
        assert!(events.try_iter().next().is_none(), "just used: stays loaded");
        worker.last_used = Instant::now() - Duration::from_secs(2);
        worker.check_resources();
        let seen: Vec<AppEvent> = events.try_iter().collect();
        assert!(seen.iter().any(|e| matches!(e, AppEvent::LocalModel(LocalModelEvent::Model(ModelStatus::NotLoaded)))), "{seen:?}");
        assert!(seen.iter().any(|e| matches!(e, AppEvent::Runtime(RuntimeEvent::Notice(n)) if n.contains("idle for 2 s"))), "{seen:?}");
        assert!(!state.is_loaded());
    }
}
