//! The app runtime: one wasmtime engine with the component model and epoch
//! interruption (an `apps-epoch` thread ticks every 10 ms while a call
//! runs, and sleeps otherwise), components compiled once and cached on disk (by sha256, written atomically), and a
//! store per running app holding only its identity, the read lane and its
//! limits. The linker gets the read lane (context, user, data) and only the
//! optional capabilities the user granted; a component that imports anything
//! else is refused before it runs, with the import named. A call that runs
//! past its time limit, grows memory past the cap, or traps is an error for
//! that app only. The limit is 1 s of the app's own time per call (the
//! epoch-deadline callback subtracts the time spent waiting on the host: a
//! completion, a fetch), the cap 128 MiB.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, ResourceLimiter, Store, UpdateDeadline};

wasmtime::component::bindgen!({
    path: "assets/sdk/wit",
    world: "app-with-ai-and-http",
});

pub use self::cowork::app::{ai, context, data, http, user};

pub const CONTEXT: &str = "cowork:app/context@0.1.0";
pub const USER: &str = "cowork:app/user@0.1.0";
pub const DATA: &str = "cowork:app/data@0.1.0";
pub const AI: &str = "cowork:app/ai@0.1.0";
pub const HTTP: &str = "cowork:app/http@0.1.0";

/// How often the engine's epoch advances: the granularity of time limits.
const EPOCH_TICK: Duration = Duration::from_millis(10);
/// How long one `render` or `handle` may run.
pub const CALL_LIMIT: Duration = Duration::from_secs(1);
/// The memory one app may have (its linear memories together).
pub const MEMORY_CAP: usize = 128 << 20;

/// What the user may grant beyond the read lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    Ai,
    Http,
}

impl Capability {
    pub const ALL: [Capability; 2] = [Capability::Ai, Capability::Http];

    pub fn name(self) -> &'static str {
        match self {
            Capability::Ai => "ai",
            Capability::Http => "http",
        }
    }

    pub fn parse(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.name() == name)
    }

    pub fn interface(self) -> &'static str {
        match self {
            Capability::Ai => AI,
            Capability::Http => HTTP,
        }
    }

    /// What granting it means, in plain words.
    pub fn describe(self) -> &'static str {
        match self {
            Capability::Ai => "ask a model for completions (through your routing, budgets and cloud consent)",
            Capability::Http => "fetch web pages (through the network gate; offline mode refuses)",
        }
    }
}

/// What an app can read. The app's identity is the host's, never the app's
/// argument: `storage_*` are called with the id the store holds.
pub trait Lane: Send + Sync {
    fn active_window(&self) -> Option<context::Window>;
    fn recent_activity(&self, since_ms: i64, until_ms: i64, app: Option<&str>, limit: u32) -> Vec<context::Activity>;
    fn now(&self) -> i64;
    /// Midnight today, local time.
    fn day_start(&self) -> i64;
    fn profile(&self) -> String;
    fn preferences(&self) -> Vec<(String, String)>;
    fn search(&self, query: &str, filters: &data::Filters, limit: u32) -> Vec<data::Hit>;
    /// The chats `app_id` opened, newest first.
    fn conversations(&self, app_id: &str) -> Vec<data::Conversation>;
    fn storage_get(&self, app_id: &str, key: &str) -> Option<String>;
    fn storage_set(&self, app_id: &str, key: &str, value: &str);
    fn complete(&self, app_id: &str, prompt: &str) -> Result<String, String>;
    fn fetch(&self, url: &str) -> Result<String, String>;
}

/// Why an app did not run or answer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AppError {
    #[error("the app could not be compiled: {0}")]
    Compile(String),
    #[error("the app uses {0}, which it was not granted")]
    NotGranted(String),
    #[error("the app asks for {0}, which cowork does not offer")]
    Unknown(String),
    #[error("the app ran longer than {} s and was stopped", CALL_LIMIT.as_secs())]
    OutOfTime,
    #[error("the app tried to use more than {} MiB of memory and was stopped", MEMORY_CAP >> 20)]
    OutOfMemory,
    #[error("the app failed: {0}")]
    Trap(String),
}

/// The limiter of one app's store: memory beyond the cap is refused, and the refusal remembered.
struct Limits {
    cap: usize,
    refused: bool,
    /// The largest memory the app has grown to.
    in_use: usize,
}

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.refused = true;
            return Ok(false);
        }
        self.in_use = self.in_use.max(desired);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// What a running app's store holds.
pub struct Host {
    app_id: String,
    lane: Arc<dyn Lane>,
    limits: Limits,
    /// When the current call began, and how long it has waited on the host
    /// (a completion, a fetch): the time limit counts the app's own time.
    call_started: Instant,
    host_time: Duration,
}

impl Host {
    fn waiting<R>(&mut self, work: impl FnOnce(&dyn Lane) -> R) -> R {
        let started = Instant::now();
        let result = work(self.lane.as_ref());
        self.host_time += started.elapsed();
        result
    }
}

impl context::Host for Host {
    fn active_window(&mut self) -> Option<context::Window> {
        self.lane.active_window()
    }
    fn recent_activity(&mut self, since_ms: i64, until_ms: i64, app: Option<String>, limit: u32) -> Vec<context::Activity> {
        self.lane.recent_activity(since_ms, until_ms, app.as_deref(), limit.min(1_000))
    }
    fn now(&mut self) -> i64 {
        self.lane.now()
    }
    fn day_start(&mut self) -> i64 {
        self.lane.day_start()
    }
}

impl user::Host for Host {
    fn profile(&mut self) -> String {
        self.lane.profile()
    }
    fn preferences(&mut self) -> Vec<(String, String)> {
        self.lane.preferences()
    }
}

impl data::Host for Host {
    fn search(&mut self, query: String, filters: data::Filters, limit: u32) -> Vec<data::Hit> {
        self.waiting(|lane| lane.search(&query, &filters, limit.min(100)))
    }
    fn conversations(&mut self) -> Vec<data::Conversation> {
        self.lane.conversations(&self.app_id)
    }
    fn storage_get(&mut self, key: String) -> Option<String> {
        self.lane.storage_get(&self.app_id, &key)
    }
    fn storage_set(&mut self, key: String, value: String) {
        self.lane.storage_set(&self.app_id, &key, &value)
    }
}

impl ai::Host for Host {
    fn complete(&mut self, prompt: String) -> Result<String, String> {
        let app_id = self.app_id.clone();
        self.waiting(|lane| lane.complete(&app_id, &prompt))
    }
}

impl http::Host for Host {
    fn fetch(&mut self, url: String) -> Result<String, String> {
        self.waiting(|lane| lane.fetch(&url))
    }
}

/// How a component was opened, for the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened {
    pub from_cache: bool,
    pub millis: u64,
}

/// Advances the engine's epoch while some call into an app runs, and sleeps
/// otherwise: an idle cowork does not wake 100 times a second for apps.
struct Ticker {
    /// Calls running now.
    active: AtomicUsize,
    stop: AtomicBool,
    thread: std::thread::Thread,
}

/// One call running: the ticker ticks until it ends.
struct Ticking<'a>(&'a Ticker);

impl<'a> Ticking<'a> {
    fn start(ticker: &'a Ticker) -> Self {
        ticker.active.fetch_add(1, Ordering::SeqCst);
        ticker.thread.unpark();
        Ticking(ticker)
    }
}

impl Drop for Ticking<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

pub struct Runtime {
    engine: Engine,
    cache_dir: Option<PathBuf>,
    ticker: Arc<Ticker>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.ticker.stop.store(true, Ordering::SeqCst);
        self.ticker.thread.unpark();
    }
}

impl Runtime {
    /// The engine, with compiled components cached under `cache_dir` (None: not cached).
    pub fn new(cache_dir: Option<PathBuf>) -> anyhow::Result<Runtime> {
        let mut config = Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        let engine = Engine::new(&config)?;
        let ticking = engine.clone();
        let (ready, thread) = crossbeam_channel::bounded(1);
        std::thread::Builder::new().name("apps-epoch".into()).spawn(move || {
            let Ok(ticker) = thread.recv() else { return };
            let ticker: Arc<Ticker> = ticker;
            while !ticker.stop.load(Ordering::SeqCst) {
                if ticker.active.load(Ordering::SeqCst) == 0 {
                    std::thread::park();
                    continue;
                }
                std::thread::sleep(EPOCH_TICK);
                ticking.increment_epoch();
            }
        })
        .map(|handle| {
            let ticker = Arc::new(Ticker { active: AtomicUsize::new(0), stop: AtomicBool::new(false), thread: handle.thread().clone() });
            let _ = ready.send(ticker.clone());
            Ok(Runtime { engine, cache_dir, ticker })
        })?
    }

    /// Compiles a component, or loads its compiled form from the cache.
    pub fn open(&self, wasm: &[u8]) -> Result<(Component, Opened), AppError> {
        let started = Instant::now();
        let key = hex::encode(Sha256::digest(wasm));
        let cached = self.cache_dir.as_ref().map(|dir| dir.join(format!("{key}.cwasm")));
        if let Some(path) = cached.as_ref().filter(|p| p.is_file()) {
            // SAFETY: the file was written by `Component::serialize` of this engine's
            // configuration (wasmtime checks its header and version), in cowork's own
            // data directory, named by the sha256 of the component it came from.
            match unsafe { Component::deserialize_file(&self.engine, path) } {
                Ok(component) => return Ok((component, Opened { from_cache: true, millis: started.elapsed().as_millis() as u64 })),
                Err(err) => tracing::warn!(path = %path.display(), error = %format!("{err:#}"), "a cached app does not load; compiling it again"),
            }
        }
        let component = Component::new(&self.engine, wasm).map_err(|err| AppError::Compile(format!("{err:#}")))?;
        if let Some(path) = cached
            && let Err(err) = write_cache(&path, &component)
        {
            tracing::warn!(path = %path.display(), error = %format!("{err:#}"), "the compiled app was not cached");
        }
        Ok((component, Opened { from_cache: false, millis: started.elapsed().as_millis() as u64 }))
    }

    /// The interfaces a component imports (what it can actually call).
    pub fn imports(&self, component: &Component) -> Vec<String> {
        component.component_type().imports(&self.engine).map(|(name, _)| name.to_owned()).collect()
    }

    /// An app ready to render: the read lane and the granted capabilities
    /// linked, nothing else. An import that is not granted refuses it.
    pub fn instantiate(&self, component: &Component, app_id: &str, granted: &[Capability], lane: Arc<dyn Lane>) -> Result<RunningApp, AppError> {
        for import in self.imports(component) {
            match import.as_str() {
                CONTEXT | USER | DATA => {}
                AI if granted.contains(&Capability::Ai) => {}
                HTTP if granted.contains(&Capability::Http) => {}
                AI | HTTP => return Err(AppError::NotGranted(import)),
                _ => return Err(AppError::Unknown(import)),
            }
        }
        let mut linker: Linker<Host> = Linker::new(&self.engine);
        let linked = (|| -> wasmtime::Result<()> {
            context::add_to_linker::<_, HasSelf<_>>(&mut linker, |h| h)?;
            user::add_to_linker::<_, HasSelf<_>>(&mut linker, |h| h)?;
            data::add_to_linker::<_, HasSelf<_>>(&mut linker, |h| h)?;
            if granted.contains(&Capability::Ai) {
                ai::add_to_linker::<_, HasSelf<_>>(&mut linker, |h| h)?;
            }
            if granted.contains(&Capability::Http) {
                http::add_to_linker::<_, HasSelf<_>>(&mut linker, |h| h)?;
            }
            Ok(())
        })();
        linked.map_err(|err| AppError::Trap(format!("{err:#}")))?;
        let host = Host { app_id: app_id.to_owned(), lane, limits: Limits { cap: MEMORY_CAP, refused: false, in_use: 0 }, call_started: Instant::now(), host_time: Duration::ZERO };
        let mut store = Store::new(&self.engine, host);
        store.limiter(|h| &mut h.limits);
        // At each deadline: stop the app if its own time (not its waits on the host) is spent.
        store.epoch_deadline_callback(|ctx| {
            let host = ctx.data();
            let used = host.call_started.elapsed().saturating_sub(host.host_time);
            Ok(match CALL_LIMIT.checked_sub(used) {
                Some(left) if !left.is_zero() => UpdateDeadline::Continue(ticks(left)),
                _ => UpdateDeadline::Interrupt,
            })
        });
        start_call(&mut store);
        let ticking = Ticking::start(&self.ticker);
        let bindings = AppWithAiAndHttp::instantiate(&mut store, component, &linker).map_err(|err| classify(&store, err));
        drop(ticking);
        Ok(RunningApp { store, bindings: bindings?, ticker: self.ticker.clone() })
    }
}

/// A call begins: the clock and the deadline start again.
fn start_call(store: &mut Store<Host>) {
    let host = store.data_mut();
    host.call_started = Instant::now();
    host.host_time = Duration::ZERO;
    store.set_epoch_deadline(ticks(CALL_LIMIT));
}

fn ticks(limit: Duration) -> u64 {
    (limit.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
}

fn write_cache(path: &Path, component: &Component) -> anyhow::Result<()> {
    let bytes = component.serialize()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let partial = path.with_extension("partial");
    std::fs::write(&partial, bytes)?;
    std::fs::rename(&partial, path)?;
    Ok(())
}

/// What a failed call means for the user.
fn classify(store: &Store<Host>, err: wasmtime::Error) -> AppError {
    if store.data().limits.refused {
        return AppError::OutOfMemory;
    }
    match err.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => AppError::OutOfTime,
        _ => AppError::Trap(format!("{err:#}").lines().next().unwrap_or_default().to_owned()),
    }
}

/// An instantiated app. A trap poisons the instance: it is opened again for the next call.
pub struct RunningApp {
    store: Store<Host>,
    bindings: AppWithAiAndHttp,
    ticker: Arc<Ticker>,
}

impl RunningApp {
    pub fn render(&mut self, state: &str) -> Result<String, AppError> {
        start_call(&mut self.store);
        let _ticking = Ticking::start(&self.ticker);
        let result = self.bindings.call_render(&mut self.store, state);
        result.map_err(|err| classify(&self.store, err))
    }

    pub fn handle(&mut self, action: &str, state: &str) -> Result<String, AppError> {
        start_call(&mut self.store);
        let _ticking = Ticking::start(&self.ticker);
        let result = self.bindings.call_handle(&mut self.store, action, state);
        result.map_err(|err| classify(&self.store, err))
    }

    /// The app's linear memory, in bytes (the numbers: memory per running app).
    pub fn memory_bytes(&self) -> usize {
        self.store.data().limits.in_use
    }
}
