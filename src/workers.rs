//! Starting and stopping the set of workers, each under its own supervisor
//! (`runtime::spawn_supervised`, a thread named after it), wired to each other
//! and to one event sink narrowed per worker (`EventSink<E>` of its own
//! domain's events).
//!
//! `Workers::start` starts the store first and waits until it has the database
//! open, reads the settings, then the rest in dependency order: speech and
//! listen; the desktop session's report, which decides which backend capture,
//! clipboard, keys, a11y and dictation use; the capture workers (recording
//! nothing until the first-run answer in the sidebar); models, embed and
//! search; llm; mcp and the agent; and, when `WorkerOptions::automations` is
//! set (the sidebar, `cowork automations run`), automations, notify, apps,
//! folders and calendar; audio last. `store_hooks` hands the store what it does beside
//! writing: crash recovery and sealing at open, waking the embed worker after
//! each commit, retention every hour. `Workers::shutdown` bumps the stop epoch
//! and stops the workers that write before the ones they write to: capture and
//! its streams, the microphone, listen, speech, embed, search, models,
//! automations before the agent (no new step is handed over), notify, apps,
//! folders, the agent, mcp, llm, and the store last, so nothing queued is lost.
//! The headless commands start the same workers without the window
//! (`commands`).
//!
//! The workers, threads and channels of the sidebar process, each channel with
//! its bound (every channel is a crossbeam `bounded` one; short-lived helper
//! threads, such as a tool's fetch or a probe, are left out):
//!
//! ```text
//!                  ┌──────────────────────── main thread (eframe) ────────────────────────┐
//!                  │  CoworkApp::logic ──apply──▶ AppState ◀──read── ui/ views            │
//!                  │             ▲                                   └─▶ UiAction ─┐      │
//!                  └─────────────┼─────────────────────────────────────────────────┼──────┘
//!    AppEvent (an enum of        │ bounded(4096); a sink waits ≤ 500 ms,           │ try_send: each worker's *Command;
//!    per-domain enums), from     │ then drops and counts; wake = request_repaint   ▼ Control (Retry) bounded(8) per supervisor
//!    every EventSink<E>          │
//!
//!  capture (desktop::backend: X11, wlroots, KWin script, GNOME extension; CaptureCommand bounded(32) ◀── UI)
//!    │ rows ──▶ ActivityBuffer (5 slots; try_send on each focus change; a row pushed out is counted) ──▶ store
//!    ├──KeysCommand::Window bounded(64) ─────────▶ keys (device_query, 10/25/200 ms polls) ──chunks (≤ 200 ms)──▶ store
//!    │                                               │ copy shortcuts bounded(8)
//!    ├──ClipboardCommand::Window bounded(64) ────▶ clipboard (XFixes / data-control / GNOME push) ──clips (≤ 200 ms)──▶ store
//!    ├──ListenCommand::Focus bounded(32) ────────▶ listen
//!    ├──ScreenLatest (shared: rules, focus) + ScreenCommand wake bounded(32) ──▶ screen (AT-SPI text, else OCR of the window's pixels; off until chosen) ──rows──▶ store
//!    ├──AutomationsCommand::Signal (Focus, Back) bounded(64) ──────────────▶ automations (sidebar)
//!    └──NotifyCommand::Activity (Focus, Away, Back, Presenting) bounded(64) ──▶ notify (sidebar)
//!    capture's sends to its peers are try_send: it never waits on one
//!  a11y (AT-SPI over zbus; A11yCommand bounded(8)) ──KeysCommand::SecretField, Entered (Wayland typing)──▶ keys
//!
//!  the one writer:
//!    capture, keys, clipboard, listen, agent, folders, UI ──StoreCommand bounded(4096)───────────▶┌───────┐
//!      write (next batch) · run (a job on the writer) · flush · shutdown                          │ store │ the only writer of cowork.db
//!    automations, notify, apps, embed ──StoreLink::call: a job run after the queued batch ───────▶│       │ (SQLCipher, WAL)
//!      commits; the caller waits for its result (≤ 5 s to queue, ≤ 60 s for it)                   └───────┘
//!    StoreHooks from workers.rs: on_open (crash recovery, sealing), after_commit (EmbedCommand::Wake), periodic (retention)
//!    every other connection of the process is read-only
//!
//!  memory:
//!    embed (nice 10 + its nice-10 rayon pool) ◀──EmbedCommand::Wake (try_send) bounded(16)── store, after each commit that wrote
//!      │ triggers fill embed_queue / vector_tombstones; embed reads them read-only, writes through StoreLink
//!      │ SearchCommand::IndexAdd / IndexRemove bounded(64)
//!      ▼
//!    search ◀──SearchCommand::Query (+ Arc<AtomicU64> latest: a newer query interrupts)── UI
//!           ◀──SearchCommand::Recall { reply }── agent, apps
//!      owns the faiss indexes; read-only connection
//!    embed and search share one all-MiniLM-L6-v2 (SharedEmbedder: loaded on first use, dropped after 5 idle minutes)
//!
//!  the agent and the models:
//!    UI (Chat, Prepare, Summarise, Decide, …) ──AgentCommand bounded(16)──▶ agent ◀── stop epoch: Arc<AtomicU64> ◀── UI (Stop), read by llm too
//!      turns, routing, consent, operations, tools;                            │ read-only connection; messages: StoreCommand::write;
//!      cloud providers streamed through net.rs                                │ operation records: jobs on the writer, waited for ──▶ store
//!         ┌───────────────────────────────────────────────────────────────────┼───────────────────────────────────┐
//!         ▼ LlmCommand::Generate bounded(16)                                  ▼ SearchCommand::Recall             ▼ McpClient: McpCommand bounded(64)
//!       llm (mistralrs + its tokio runtime `llm-rt`)                        search                              mcp (rmcp on `mcp-io`; internal channels
//!         │ LlmEvent (Text, Finished) bounded(256), one channel per generation, back to the agent                  bounded(256) and (64))
//!         │ a background generation (recap, meeting note, summary, warm prefill) runs its forward passes on `llm-low-N` (nice 10)
//!         │ LocalModelState (atomics: unavailable, loaded, last used, paused, restored, affordable, resident bytes) ──read──▶ agent
//!         │   ◀──written── agent (keep loaded: `llm.keep_warm`, read between commands, when it keeps the prompt head prefilled)
//!    keys ──keys_at_millis: Arc<AtomicI64> (a key was down)──read──▶ agent (no prefill while the user types)
//!         ◀── UI (Preload, SetModel, Unload)
//!    models (downloads, installs; ModelsCommand bounded(4)) ◀── UI
//!
//!  voice:
//!    UI (Talk, the voice hotkey through PushToTalk) ──AudioCommand (Start, Stop, Cancel, Dictate, …) bounded(16)──▶ audio
//!    cpal's PulseAudio callback ──mic::Block (device rate, f32) bounded(500)──▶ audio (16 kHz mono; a stream only while talking)
//!    audio ──SpeechCommand::Prepare / Transcribe bounded(8)──▶ speech (whisper.cpp + Silero VAD, loaded while needed)
//!    listen (off until its consent; its own streams, blocks bounded(400)) ──SpeechCommand::Listen──▶ speech
//!      ──ListenDone bounded(4)──▶ listen ──transcript_write──▶ store
//!    listen (a call window focused lately; every 2 s asks the sound server who records, audio::inuse)
//!      ──NotifyCommand::Post (the offer to listen)──▶ notify ──Listen clicked: ListenCommand::Meeting──▶ listen
//!      ──AutomationsCommand::Signal(Meeting started / ended)──▶ automations ──builtin_meeting_note: meeting_note tool──▶ agent
//!    audio, speech, listen ──VoiceEvent (Opened, FirstSample, Level, Closed, Transcribing, Heard, Failed, …)──▶ UI
//!
//!  automations, notifications, apps (the sidebar):
//!    capture (Signal::Focus, Back), listen (Signal::Meeting), mcp (Signal::Mcp), UI and the agent's flow_<name> tools (Save, Run, Rerun, Cancel, …)
//!      ──AutomationsCommand bounded(64)──▶ automations (sleeps until the earliest wake time, ≤ 15 s; asks SQLite what is due)
//!    automations ──AgentCommand::AutomationStep (tool and agent steps)──▶ agent ──StepReport (done, failed, parked) bounded(64)──▶ automations
//!    automations, llm (heat, battery) ──NotifyClient: NotifyCommand::Post (≤ 2 s) bounded(64)──▶ notify ──Notify / CloseNotification──▶ desktop
//!    notify-signals thread (ActionInvoked, NotificationClosed; bounded(64)) ──▶ notify
//!      Accept on an approval ──AgentCommand::DecideAs { Once }──▶ agent; Open ──DesktopEvent::ShowSidebar──▶ UI;
//!      Accept on the paused local model ──▶ LocalModelState::restore
//!    UI ──AppsCommand bounded(32)──▶ apps (wasmtime; 1 s of its own time and 128 MiB per call) ──AppEvent::Apps──▶ UI
//!      ai.complete ──AgentCommand::AppComplete (≤ 5 s)──▶ agent; data.search ──SearchCommand::Recall──▶ search; http.fetch ──▶ outbound gate
//!
//!  calendar (the sidebar): reads the calendars of `calendar.sources` (settings read every 3 s; CalendarCommand bounded(8))
//!    over the outbound gate ──calendar_events (replace per source)──▶ store; CalendarView (sources' state, next events) ──▶ UI;
//!    a timed event starting ──ListenCommand::Calendar(CallStarting) (try_send)──▶ listen (offers to listen to one with a call's address when the microphone is in use; names a call window's call)
//!
//!  documents:
//!    UI: Attach a file… (the portal's FileChooser on a `file-chooser` thread; dropped files) ──read on an `attach-document` thread
//!      ──▶ the attachment, and documents::memory::remember_command ──▶ store
//!    the agent's read_document ──`remember-document` thread──▶ remember_command ──▶ store (documents, document_parts → embed_queue)
//!    folders (inotify on the folders the user named; settings read every 3 s; FoldersCommand bounded(8))
//!      ──remember_command / forget_at_command──▶ store
//!    the agent's delete_path / move_path / write_document / edit_document ──AgentWrite::Undo──▶ store;
//!      AgentEvent::Undoable ──▶ UI (Undo, 5 min) ──undo_command (a job on the writer)──▶ store
//!
//!  the desktop:
//!    hotkeys: X11 key grabs (global-hotkey) · the portal's GlobalShortcuts (`shortcuts` thread) · compositor bindings running
//!      `cowork trigger` (the `trigger` thread's socket) ──DesktopEvent::QuickPromptHotkey / TogglePause / VoiceHotkey { pressed }──▶ UI
//!    tray (ksni, StatusNotifierItem) ──TogglePause, ShowSidebar, RuntimeEvent::ShutdownRequested──▶ UI
//!    `appearance` thread (settings portal, else GTK) ──DesktopEvent::ColorScheme──▶ UI
//!    UI ──PlaceCommand bounded(8)──▶ `place` thread (sway/Hyprland IPC, a KWin script, the GNOME extension)
//!    `signals` (SIGTERM/SIGINT through a self-pipe) ──RuntimeEvent::ShutdownRequested──▶ UI closes; Workers::shutdown
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::store;
use crate::agent::{AgentCommand, AgentConfig, spawn_agent};
use crate::capture::{A11yCommand, CaptureCommand, CaptureConfig, StreamSenders, spawn_a11y, spawn_capture_with_streams};
use crate::capture::clipboard::{ClipboardCommand, ClipboardSource, spawn_clipboard};
use crate::capture::keys::{KeysCommand, spawn_keys};
use crate::config::{Paths, ResolvedModel, Settings};
use crate::desktop::events::DesktopEvent;
use crate::events::AppEvent;
use crate::llm::{LOCAL_LIMIT_TOKENS, LlmCommand, LlmConfig, LocalModelState, spawn_llm};
use crate::memory::embed_worker::{self, EmbedCommand};
use crate::runtime::{Control, EventSink, RestartPolicy, WorkerHandle, WorkerName};
use crate::store::StoreCommand;

pub struct Workers {
    pub store: WorkerHandle<StoreCommand>,
    pub capture: Option<WorkerHandle<CaptureCommand>>,
    pub keys: Option<WorkerHandle<KeysCommand>>,
    pub clipboard: Option<WorkerHandle<ClipboardCommand>>,
    pub a11y: Option<WorkerHandle<A11yCommand>>,
    /// The screen-text stream (reads only when the user turned it on).
    pub screen: Option<WorkerHandle<crate::capture::screen_worker::ScreenCommand>>,
    /// Its shared latest state (the app writes the plan into it).
    pub screen_latest: crate::capture::screen_worker::ScreenLatest,
    pub models: WorkerHandle<crate::models::worker::ModelsCommand>,
    pub search: WorkerHandle<crate::memory::search_worker::SearchCommand>,
    pub embed: WorkerHandle<EmbedCommand>,
    pub llm: WorkerHandle<LlmCommand>,
    pub agent: WorkerHandle<AgentCommand>,
    pub mcp: WorkerHandle<crate::mcp::worker::McpCommand>,
    pub audio: WorkerHandle<crate::audio::worker::AudioCommand>,
    pub speech: WorkerHandle<crate::audio::worker::SpeechCommand>,
    pub listen: WorkerHandle<crate::audio::listen::ListenCommand>,
    /// Runs the automations (the sidebar, `cowork automations run`; not `cowork ask`).
    pub automations: Option<WorkerHandle<crate::automations::AutomationsCommand>>,
    /// Shows notifications through the gate (with the automations worker only).
    pub notify: Option<WorkerHandle<crate::notify::NotifyCommand>>,
    /// Runs the installed apps (the sidebar, with the automations worker).
    pub apps: Option<WorkerHandle<crate::apps::AppsCommand>>,
    /// Follows the document folders the user named (the sidebar, with the automations worker).
    pub folders: Option<WorkerHandle<crate::documents::folders::FoldersCommand>>,
    /// Reads the calendars the user named (the sidebar, with the automations worker).
    pub calendar: Option<WorkerHandle<crate::calendar::worker::CalendarCommand>>,
    pub stop_epoch: Arc<AtomicU64>,
    /// The newest search generation asked for (a running older query stops).
    pub search_latest: Arc<AtomicU64>,
    /// When the user last typed into cowork (embedding pauses meanwhile).
    pub typing_at_millis: Arc<AtomicI64>,
}

/// What to start.
pub struct WorkerOptions {
    /// Start capture; `display` is the X display (`None`: `$DISPLAY`).
    pub capture: bool,
    pub display: Option<String>,
    pub chat_model: Option<ResolvedModel>,
    pub policy: RestartPolicy,
    /// Record nothing until the user has answered the first-run question (the sidebar);
    /// `cowork capture run` is itself the user's answer.
    pub require_consent: bool,
    /// Run the automations worker (only one process per data directory
    /// executes them), the notify worker and the apps worker: the sidebar.
    pub automations: bool,
}

/// Settings from the database (read-only), with warnings for unusable values.
/// A database that cannot be read yields the defaults.
/// The local chat model the user chose in Settings → Models, or the default for this machine.
pub fn chat_model(manifest: &crate::models::Manifest, paths: &Paths) -> Option<crate::config::ResolvedModel> {
    let (settings, _) = read_settings(paths);
    let user = crate::models::user::list(&paths.data_dir).unwrap_or_else(|err| {
        tracing::warn!(error = %format!("{err:#}"), "ignoring the list of added models");
        Vec::new()
    });
    let speeds = crate::llm::speed::Speeds::load(&crate::llm::speed::path(&paths.data_dir));
    crate::config::resolve_chat_model(manifest, &paths.models_dir, &user, Some(settings.chat_model.as_str()).filter(|n| !n.is_empty()), &speeds)
}

pub fn read_settings(paths: &Paths) -> (Settings, Vec<String>) {
    match store::open_read_only(&paths.db_path()).and_then(|conn| Ok(store::all_settings(&conn)?)) {
        Ok(pairs) => Settings::from_pairs(&pairs),
        Err(_) => (Settings::default(), Vec::new()),
    }
}

/// The UI's ends of every channel. Tests build one and hold the far ends.
pub struct Channels {
    pub store: Sender<StoreCommand>,
    pub capture: Sender<CaptureCommand>,
    pub keys: Sender<crate::capture::keys::KeysCommand>,
    pub clipboard: Sender<crate::capture::clipboard::ClipboardCommand>,
    pub a11y: Sender<crate::capture::A11yCommand>,
    pub screen: Sender<crate::capture::screen_worker::ScreenCommand>,
    /// The screen worker's shared latest state: the plan goes in here, the command only wakes it.
    pub screen_latest: crate::capture::screen_worker::ScreenLatest,
    pub llm: Sender<LlmCommand>,
    pub agent: Sender<AgentCommand>,
    pub models: Sender<crate::models::worker::ModelsCommand>,
    pub search: Sender<crate::memory::search_worker::SearchCommand>,
    pub embed: Sender<crate::memory::embed_worker::EmbedCommand>,
    pub mcp: Sender<crate::mcp::worker::McpCommand>,
    pub audio: Sender<crate::audio::worker::AudioCommand>,
    pub speech: Sender<crate::audio::worker::SpeechCommand>,
    pub listen: Sender<crate::audio::listen::ListenCommand>,
    pub automations: Sender<crate::automations::AutomationsCommand>,
    pub notify: Sender<crate::notify::NotifyCommand>,
    pub apps: Sender<crate::apps::AppsCommand>,
    pub calendar: Sender<crate::calendar::worker::CalendarCommand>,
    pub search_latest: Arc<AtomicU64>,
    pub typing_at_millis: Arc<std::sync::atomic::AtomicI64>,
    pub controls: Vec<(WorkerName, Sender<Control>)>,
    pub events: Receiver<AppEvent>,
    /// The bus, for store reads the UI asks for (their results come back as events).
    pub bus: EventSink<AppEvent>,
    pub stop_epoch: Arc<AtomicU64>,
}

impl Workers {
    /// Starts the store, waits for it to open the database, reads the settings,
    /// then starts capture and llm with them.
    pub fn start(paths: &Paths, options: WorkerOptions, sink: EventSink<AppEvent>) -> anyhow::Result<(Self, Settings, Vec<String>)> {
        // What providers taught about their models (a parameter one does not take) is kept here.
        crate::brains::rules::remember_in(&paths.data_dir);
        paths.ensure_data_dir()?;
        let embed_channel = embed_worker::channel();
        let store = crate::store::spawn_store(paths.db_path(), sink.clone(), options.policy, store_hooks(Some(embed_channel.0.clone())))?;
        let (ack, done) = crossbeam_channel::bounded(1);
        let opened = store.commands.send_timeout(StoreCommand::Flush(ack), Duration::from_secs(5)).is_ok()
            && done.recv_timeout(Duration::from_secs(5)).is_ok();
        if !opened {
            tracing::warn!("the store did not open the database in time; using default settings");
        }
        let (settings, warnings) = read_settings(paths);
        let speech_manifest = crate::models::Manifest::bundled()?;
        let speech = crate::audio::worker::spawn_speech(speech_manifest.clone(), paths.models_dir.clone(), crate::audio::worker::SpeechConfig::from_settings(&settings), sink.narrow(), options.policy)?;
        // Made first: capture and listen mode signal to it, and the agent reports steps to it.
        let automations_channels = crate::automations::worker::AutomationsChannels::default();
        let notify_channel = bounded(64);
        let listen = crate::audio::listen::spawn_listen(
            store.commands.clone(),
            speech.commands.clone(),
            speech_manifest,
            paths.models_dir.clone(),
            paths.data_dir.clone(),
            (listen_links(&options, &notify_channel.0, &automations_channels), sink.narrow()),
            options.policy,
        )?;
        let _ = listen.commands.try_send(crate::audio::listen::ListenCommand::Configure(crate::audio::listen::ListenPlan::from_settings(&settings)));
        // Which desktop this is decides which paths may record anything: an X
        // display named on the command line is X11; otherwise the session says.
        let desktop = crate::desktop::session::for_display(options.display.as_deref(), settings.desktop_accessibility);
        let keys_at_millis = Arc::new(AtomicI64::new(0));
        let streams = CaptureStreams {
            listen: listen.commands.clone(),
            keys_at_millis: keys_at_millis.clone(),
            automations: options.automations.then(|| automations_channels.commands.0.clone()),
            notify: options.automations.then(|| notify_channel.0.clone()),
        };
        let (capture, keys, clipboard, a11y, screen) = match options.capture {
            true => start_capture(&options, &settings, &desktop, &store.commands, streams, &sink)?,
            false => (None, None, None, None, None),
        };
        let (screen, screen_latest) = match screen {
            Some((handle, latest)) => (Some(handle), latest),
            None => (None, crate::capture::screen_worker::ScreenLatest::default()),
        };
        let stop_epoch = Arc::new(AtomicU64::new(0));
        let llm_config = llm_config(paths, &options, &settings, options.automations.then(|| notify_channel.0.clone()));
        let manifest = crate::models::Manifest::bundled().unwrap_or(crate::models::Manifest { models: Vec::new() });
        let models = crate::models::worker::spawn_models(manifest, paths.models_dir.clone(), None, sink.narrow(), options.policy)?;
        let _ = models.commands.try_send(crate::models::worker::ModelsCommand::SetDataDir(paths.data_dir.clone()));
        let embedder = crate::memory::embed::SharedEmbedder::new(crate::memory::embed::model_dir(&paths.models_dir));
        let search_latest = Arc::new(AtomicU64::new(0));
        let typing_at_millis = Arc::new(AtomicI64::new(0));
        let search_channel = crate::memory::search_worker::channel();
        let embed = embed_worker::spawn_embed(
            crate::store::StoreLink::new(paths.db_path(), store.commands.clone()),
            embedder.clone(),
            search_channel.0.clone(),
            typing_at_millis.clone(),
            embed_channel,
            sink.narrow(),
            options.policy,
        )?;
        let search = crate::memory::search_worker::spawn_search(
            paths.db_path(),
            crate::memory::index::index_dir(&paths.data_dir),
            embedder,
            search_latest.clone(),
            search_channel,
            sink.narrow(),
            options.policy,
        )?;
        let local = Arc::new(LocalModelState::default());
        let local_state = local.clone();
        let llm = spawn_llm(llm_config, sink.narrow(), stop_epoch.clone(), local.clone(), options.policy)?;
        let agent_config = AgentConfig {
            db_path: paths.db_path(),
            context_budget_tokens: settings.context_budget_tokens,
            max_answer_tokens: settings.max_answer_tokens,
            local_history_tokens: crate::agent::history::LOCAL_BUDGET_TOKENS,
            cloud_history_tokens: crate::agent::history::CLOUD_CAP_TOKENS,
            data_dir: paths.data_dir.clone(),
            local_limit_tokens: LOCAL_LIMIT_TOKENS,
            recall: Some(search.commands.clone()),
            mcp: None,
            automations: options.automations.then(|| automations_channels.reports.0.clone()),
            flows: options.automations.then(|| automations_channels.commands.0.clone()),
            keys_at_millis,
        };
        let mcp_signals = options.automations.then(|| automations_channels.commands.0.clone());
        let mcp = crate::mcp::worker::spawn_mcp_signalling(paths.data_dir.clone(), sink.narrow(), options.policy, crate::net::OutboundGate::global(), mcp_signals)?;
        let agent_config = AgentConfig { mcp: Some(crate::mcp::worker::McpClient { commands: mcp.commands.clone() }), ..agent_config };
        let agent = spawn_agent(agent_config, llm.commands.clone(), local, store.commands.clone(), sink.narrow(), stop_epoch.clone(), options.policy)?;
        let (automations, notify) = match options.automations {
            true => {
                let (automations, notify) = start_automations(crate::store::StoreLink::new(paths.db_path(), store.commands.clone()), automations_channels, notify_channel, (&agent.commands, &listen.commands), local_state, (&sink, notify_policy(&settings)), options.policy)?;
                (Some(automations), Some(notify))
            }
            false => (None, None),
        };
        let apps = match options.automations {
            true => Some(crate::apps::worker::spawn_apps(
                crate::apps::worker::AppsConfig { store: crate::store::StoreLink::new(paths.db_path(), store.commands.clone()), apps_dir: crate::apps::worker::apps_dir(&paths.data_dir) },
                crate::apps::worker::channel(),
                Some(search.commands.clone()),
                Some(agent.commands.clone()),
                sink.narrow(),
                options.policy,
            )?),
            false => None,
        };
        let (folders, calendar) = followers(paths, &options, &store, &listen, &sink)?;
        let typing = crate::audio::dictate::Typing::for_desktop(&desktop, options.display.clone(), &paths.data_dir);
        let audio = crate::audio::worker::spawn_audio(speech.commands.clone(), typing, sink.narrow(), options.policy)?;
        let device = Some(settings.voice.device.clone()).filter(|d| !d.is_empty());
        let _ = audio.commands.try_send(crate::audio::worker::AudioCommand::SetDevice(device));
        let workers = Self {
            store,
            capture,
            keys,
            clipboard,
            a11y,
            screen,
            screen_latest,
            models,
            search,
            embed,
            llm,
            agent,
            mcp,
            audio,
            speech,
            listen,
            automations,
            notify,
            apps,
            folders,
            calendar,
            stop_epoch,
            search_latest,
            typing_at_millis,
        };
        Ok((workers, settings, warnings))
    }

    /// Waits until the store has committed everything sent to it so far.
    pub fn flush_store(&self, timeout: Duration) -> bool {
        let (ack, done) = crossbeam_channel::bounded(1);
        self.store.commands.send_timeout(StoreCommand::Flush(ack), timeout).is_ok() && done.recv_timeout(timeout).is_ok()
    }

    pub fn channels(&self, events: Receiver<AppEvent>, bus: EventSink<AppEvent>) -> Channels {
        let (dead_capture, _) = crossbeam_channel::bounded(1);
        let (dead_keys, _) = crossbeam_channel::bounded(1);
        let (dead_clipboard, _) = crossbeam_channel::bounded(1);
        let (dead_a11y, _) = crossbeam_channel::bounded(1);
        let (dead_screen, _) = crossbeam_channel::bounded(1);
        let (dead_automations, _) = crossbeam_channel::bounded(1);
        let (dead_notify, _) = crossbeam_channel::bounded(1);
        let (dead_apps, _) = crossbeam_channel::bounded(1);
        let (dead_calendar, _) = crossbeam_channel::bounded(1);
        let mut controls = vec![
            (self.store.name, self.store.control.clone()),
            (self.llm.name, self.llm.control.clone()),
            (self.agent.name, self.agent.control.clone()),
            (self.models.name, self.models.control.clone()),
            (self.search.name, self.search.control.clone()),
            (self.embed.name, self.embed.control.clone()),
            (self.mcp.name, self.mcp.control.clone()),
            (self.audio.name, self.audio.control.clone()),
            (self.speech.name, self.speech.control.clone()),
            (self.listen.name, self.listen.control.clone()),
        ];
        if let Some(automations) = &self.automations {
            controls.push((automations.name, automations.control.clone()));
        }
        if let Some(notify) = &self.notify {
            controls.push((notify.name, notify.control.clone()));
        }
        if let Some(apps) = &self.apps {
            controls.push((apps.name, apps.control.clone()));
        }
        if let Some(folders) = &self.folders {
            controls.push((folders.name, folders.control.clone()));
        }
        if let Some(calendar) = &self.calendar {
            controls.push((calendar.name, calendar.control.clone()));
        }
        if let Some(capture) = &self.capture {
            controls.push((capture.name, capture.control.clone()));
        }
        if let Some(keys) = &self.keys {
            controls.push((keys.name, keys.control.clone()));
        }
        if let Some(clipboard) = &self.clipboard {
            controls.push((clipboard.name, clipboard.control.clone()));
        }
        if let Some(a11y) = &self.a11y {
            controls.push((a11y.name, a11y.control.clone()));
        }
        if let Some(screen) = &self.screen {
            controls.push((screen.name, screen.control.clone()));
        }
        Channels {
            store: self.store.commands.clone(),
            capture: self.capture.as_ref().map(|c| c.commands.clone()).unwrap_or(dead_capture),
            keys: self.keys.as_ref().map(|k| k.commands.clone()).unwrap_or(dead_keys),
            clipboard: self.clipboard.as_ref().map(|c| c.commands.clone()).unwrap_or(dead_clipboard),
            a11y: self.a11y.as_ref().map(|a| a.commands.clone()).unwrap_or(dead_a11y),
            screen: self.screen.as_ref().map(|s| s.commands.clone()).unwrap_or(dead_screen),
            screen_latest: self.screen_latest.clone(),
            llm: self.llm.commands.clone(),
            agent: self.agent.commands.clone(),
            models: self.models.commands.clone(),
            search: self.search.commands.clone(),
            embed: self.embed.commands.clone(),
            mcp: self.mcp.commands.clone(),
            audio: self.audio.commands.clone(),
            speech: self.speech.commands.clone(),
            listen: self.listen.commands.clone(),
            automations: self.automations.as_ref().map(|a| a.commands.clone()).unwrap_or(dead_automations),
            notify: self.notify.as_ref().map(|n| n.commands.clone()).unwrap_or(dead_notify),
            apps: self.apps.as_ref().map(|a| a.commands.clone()).unwrap_or(dead_apps),
            calendar: self.calendar.as_ref().map(|c| c.commands.clone()).unwrap_or(dead_calendar),
            search_latest: self.search_latest.clone(),
            typing_at_millis: self.typing_at_millis.clone(),
            controls,
            events,
            bus,
            stop_epoch: self.stop_epoch.clone(),
        }
    }

    /// Stops capture, the agent and llm first (they write to the store), then the store.
    pub fn shutdown(mut self, timeout: Duration) {
        self.stop_epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(capture) = self.capture.as_mut()
            && !capture.shutdown(CaptureCommand::Shutdown, timeout)
        {
            tracing::warn!("capture did not stop in time");
        }
        if let Some(keys) = self.keys.as_mut()
            && !keys.shutdown(KeysCommand::Shutdown, timeout)
        {
            tracing::warn!("keys did not stop in time");
        }
        if let Some(clipboard) = self.clipboard.as_mut()
            && !clipboard.shutdown(ClipboardCommand::Shutdown, timeout)
        {
            tracing::warn!("clipboard did not stop in time");
        }
        if let Some(a11y) = self.a11y.as_mut()
            && !a11y.shutdown(A11yCommand::Shutdown, timeout)
        {
            tracing::warn!("a11y did not stop in time");
        }
        if let Some(screen) = self.screen.as_mut()
            && !screen.shutdown(crate::capture::screen_worker::ScreenCommand::Shutdown, timeout)
        {
            tracing::warn!("screen did not stop in time (an OCR read was under way)");
        }
        // The microphone closes first.
        if !self.audio.shutdown(crate::audio::worker::AudioCommand::Shutdown, timeout) {
            tracing::warn!("audio did not stop in time");
        }
        // Listen closes its streams and waits for the chunks it handed to speech.
        if !self.listen.shutdown(crate::audio::listen::ListenCommand::Shutdown, timeout) {
            tracing::warn!("listen did not stop in time (its last chunk was not stored)");
        }
        if !self.speech.shutdown(crate::audio::worker::SpeechCommand::Shutdown, timeout) {
            tracing::warn!("speech did not stop in time (a transcription was under way)");
        }
        if !self.embed.shutdown(EmbedCommand::Shutdown, timeout) {
            tracing::warn!("embed did not stop in time (its job resumes from the last checkpoint)");
        }
        if !self.search.shutdown(crate::memory::search_worker::SearchCommand::Shutdown, timeout) {
            tracing::warn!("search did not stop in time");
        }
        if !self.models.shutdown(crate::models::worker::ModelsCommand::Shutdown, timeout) {
            tracing::warn!("models did not stop in time (a download in progress resumes next time)");
        }
        // Automations before the agent: no new step is handed over while the agent stops.
        if let Some(automations) = self.automations.as_mut()
            && !automations.shutdown(crate::automations::AutomationsCommand::Shutdown, timeout)
        {
            tracing::warn!("automations did not stop in time (its runs resume from the database)");
        }
        if let Some(notify) = self.notify.as_mut()
            && !notify.shutdown(crate::notify::NotifyCommand::Shutdown, timeout)
        {
            tracing::warn!("notify did not stop in time (what it holds waits in the inbox)");
        }
        // Apps before the agent: a completion it waits on ends with the epoch bump.
        if let Some(apps) = self.apps.as_mut()
            && !apps.shutdown(crate::apps::AppsCommand::Shutdown, timeout)
        {
            tracing::warn!("apps did not stop in time (an app's call was running)");
        }
        if let Some(folders) = self.folders.as_mut()
            && !folders.shutdown(crate::documents::folders::FoldersCommand::Shutdown, timeout)
        {
            tracing::warn!("folders did not stop in time (it walks the folders again next start)");
        }
        if let Some(calendar) = self.calendar.as_mut()
            && !calendar.shutdown(crate::calendar::worker::CalendarCommand::Shutdown, timeout)
        {
            tracing::warn!("calendar did not stop in time (a calendar's server was slow to answer)");
        }
        // The agent first: a turn it is in stops at the epoch bump and writes its message.
        if !self.agent.shutdown(AgentCommand::Shutdown, timeout) {
            tracing::warn!("agent did not stop in time");
        }
        // After the agent: a call it was waiting on ends with the servers.
        if !self.mcp.shutdown(crate::mcp::worker::McpCommand::Shutdown, timeout) {
            tracing::warn!("mcp did not stop in time (its servers end with the process)");
        }
        if !self.llm.shutdown(LlmCommand::Shutdown, timeout) {
            tracing::warn!("llm did not stop in time");
        }
        if !self.store.shutdown(StoreCommand::Shutdown, timeout) {
            tracing::warn!("store did not stop in time");
        }
    }
}

/// The workers capture signals besides the store: listen mode, and (in the sidebar) automations and notifications.
struct CaptureStreams {
    listen: Sender<crate::audio::listen::ListenCommand>,
    /// Stamped by the keys worker at each key (the prompt head waits while the user types).
    keys_at_millis: Arc<AtomicI64>,
    automations: Option<Sender<crate::automations::AutomationsCommand>>,
    notify: Option<Sender<crate::notify::NotifyCommand>>,
}

/// The capture workers for this desktop: windows, typing, the clipboard and
/// browser addresses, each on the backend the session allows, recording only
/// what the user confirmed.
type CaptureWorkers = (
    Option<WorkerHandle<CaptureCommand>>,
    Option<WorkerHandle<KeysCommand>>,
    Option<WorkerHandle<ClipboardCommand>>,
    Option<WorkerHandle<A11yCommand>>,
    Option<(WorkerHandle<crate::capture::screen_worker::ScreenCommand>, crate::capture::screen_worker::ScreenLatest)>,
);

/// Starts the capture workers (see `CaptureWorkers`).
fn start_capture(options: &WorkerOptions, settings: &Settings, desktop: &crate::desktop::session::Report, store: &Sender<StoreCommand>, streams: CaptureStreams, sink: &EventSink<AppEvent>) -> anyhow::Result<CaptureWorkers> {
    use crate::desktop::backend::{Backend, backend_for};
    use crate::desktop::session::Capability;
    sink.send(AppEvent::Desktop(DesktopEvent::Report(Box::new(desktop.clone()))));
    // device_query and arboard read $DISPLAY; those streams run only when that is the display we watch.
    let same_display = options.display.is_none() || options.display == std::env::var("DISPLAY").ok();
    let not_ours = "it is read from $DISPLAY, which is not the display being captured".to_owned();
    let keys_off = match backend_for(desktop, Capability::TypingStream) {
        Backend::X11 if same_display => None,
        Backend::X11 => Some(not_ours.clone()),
        _ => Some(desktop.state(Capability::TypingStream).text()),
    };
    let clipboard_source = match backend_for(desktop, Capability::ClipboardWatch) {
        Backend::X11 if same_display => ClipboardSource::X11,
        Backend::X11 => ClipboardSource::Off(not_ours),
        Backend::Wlroots(target) => ClipboardSource::Wayland(target),
        Backend::Blind(why) => ClipboardSource::Off(why),
        Backend::KWin(_) => ClipboardSource::Off(desktop.state(Capability::ClipboardWatch).text()),
        Backend::Gnome => ClipboardSource::Gnome,
    };
    let (copy_tx, copy_rx) = bounded(8);
    let keys = spawn_keys(store.clone(), Some(copy_tx), keys_off, streams.keys_at_millis.clone(), sink.narrow(), options.policy)?;
    let clipboard = spawn_clipboard(
        options.display.clone(),
        clipboard_source,
        store.clone(),
        copy_rx,
        sink.narrow(),
        options.policy,
    )?;
    // On wlroots the typing stream is the text entered into fields (AT-SPI).
    let fields = matches!(backend_for(desktop, Capability::TypingStream), Backend::Wlroots(_));
    // Which process's password field has the focus: the a11y worker knows, the screen worker reads nothing of it then.
    let secret_pid = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let a11y = spawn_a11y(keys.commands.clone(), settings.desktop_accessibility, fields, secret_pid.clone(), sink.narrow(), options.policy)?;
    let backend = backend_for(desktop, Capability::FocusedWindow);
    let allowed = settings.streams_confirmed || !options.require_consent;
    // Pixels: X11's, sway's by screencopy; elsewhere the accessibility tree alone.
    let screen_latest = crate::capture::screen_worker::ScreenLatest::new(settings.screen.plan(allowed), settings.rules());
    let screen = crate::capture::screen_worker::spawn_screen(
        crate::capture::screen_worker::PixelSource::for_backend(&backend, options.display.clone()),
        screen_latest.clone(),
        secret_pid,
        store.clone(),
        sink.narrow(),
        options.policy,
    )?;
    let config = CaptureConfig { display: options.display.clone(), afk_secs: settings.afk_secs, rules: settings.rules(), backend };
    let senders = StreamSenders {
        keys: Some(keys.commands.clone()),
        clipboard: Some(clipboard.commands.clone()),
        listen: Some(streams.listen),
        screen: Some(screen.commands.clone()),
        screen_latest: Some(screen_latest.clone()),
        automations: streams.automations,
        notify: streams.notify,
    };
    let capture = spawn_capture_with_streams(config, store.clone(), senders, sink.narrow(), options.policy)?;
    let _ = capture.commands.try_send(CaptureCommand::SetRecording(allowed && settings.record_windows));
    let _ = keys.commands.try_send(KeysCommand::SetRecording(allowed && settings.record_keys));
    let _ = clipboard.commands.try_send(ClipboardCommand::SetRecording(allowed && settings.record_clipboard));
    Ok((Some(capture), Some(keys), Some(clipboard), Some(a11y), Some((screen, screen_latest))))
}

/// The notification gate with the user's budget (Settings → Automations,
/// `notify.*_per_hour`) over its defaults.
pub fn notify_policy(settings: &Settings) -> crate::notify::gate::Policy {
    crate::notify::gate::Policy { caps_per_hour: [settings.notify_urgent_per_hour, settings.notify_helpful_per_hour, settings.notify_informational_per_hour], ..Default::default() }
}

/// Listen mode also notices calls: it offers to listen (a notification) and
/// tells the automations (a call started or ended), when those run.
fn listen_links(options: &WorkerOptions, notify: &Sender<crate::notify::NotifyCommand>, automations: &crate::automations::worker::AutomationsChannels) -> crate::audio::listen::ListenLinks {
    crate::audio::listen::ListenLinks { notify: options.automations.then(|| notify.clone()), automations: options.automations.then(|| automations.commands.0.clone()) }
}

/// The automations worker and the notification worker that shows what needs
/// the user (an approval it accepts, the sidebar it opens, the local model
/// it lets back on after heat or the battery paused it).
fn start_automations(
    store: crate::store::StoreLink,
    automations_channels: crate::automations::worker::AutomationsChannels,
    notify_channel: (Sender<crate::notify::NotifyCommand>, Receiver<crate::notify::NotifyCommand>),
    (agent, listen): (&Sender<AgentCommand>, &Sender<crate::audio::listen::ListenCommand>),
    local_state: Arc<LocalModelState>,
    (sink, policy): (&EventSink<AppEvent>, crate::notify::gate::Policy),
    restart: RestartPolicy,
) -> anyhow::Result<(WorkerHandle<crate::automations::AutomationsCommand>, WorkerHandle<crate::notify::NotifyCommand>)> {
    let agent_commands = agent.clone();
    let notify_tx = notify_channel.0.clone();
    let automations = crate::automations::spawn_automations(
        crate::automations::AutomationsConfig { store: store.clone() },
        automations_channels,
        Arc::new(crate::automations::steps::SystemClock),
        move || Box::new(crate::agent::AgentSteps(agent_commands.clone())),
        move || Box::new(crate::notify::NotifyClient(notify_tx.clone())),
        sink.narrow(),
        restart,
    )?;
    let (approver, opener, listener) = (agent.clone(), sink.narrow::<DesktopEvent>(), listen.clone());
    let tasker = opener.clone();
    let notify = crate::notify::spawn_notify(
        crate::notify::NotifyConfig { store, bus: None, policy },
        notify_channel,
        move || {
            let (approver, opener, local_state, listener, tasker) = (approver.clone(), opener.clone(), local_state.clone(), listener.clone(), tasker.clone());
            crate::notify::Hooks {
                // Accept on a notification approves that one call, once.
                approve: Box::new(move |call_id| {
                    let _ = approver.try_send(AgentCommand::DecideAs { call_id, choice: crate::agent::events::ApprovalChoice::Once, by: "user (notification)".into() });
                }),
                open: Box::new(move |_| {
                    opener.send(DesktopEvent::ShowSidebar);
                }),
                // The user's tap after heat or the battery paused the local model.
                restore_local: Box::new(move || local_state.restore()),
                // The user's click on a call cowork noticed: listen to this call.
                listen: Box::new(move |since_millis| {
                    let _ = listener.try_send(crate::audio::listen::ListenCommand::Meeting(crate::audio::listen::MeetingCommand::Listen { since_millis }));
                }),
                // A suggestion's Accept: the sidebar opens a chat with the flow's request.
                task: Box::new(move |prompt| {
                    tasker.send(DesktopEvent::StartTask(prompt));
                }),
            }
        },
        sink.narrow(),
        restart,
    )?;
    Ok((automations, notify))
}

/// The local model's configuration: the chat model chosen (or a missing file
/// that says so when asked), the answer and idle limits from the settings.
fn llm_config(paths: &Paths, options: &WorkerOptions, settings: &Settings, notify: Option<Sender<crate::notify::NotifyCommand>>) -> LlmConfig {
    let (model_path, model_expected) = match &options.chat_model {
        Some(model) => (model.path.clone(), Some((model.size, model.sha256.clone()))),
        None => (paths.models_dir.join("missing-chat-model.gguf"), None),
    };
    LlmConfig {
        model_path,
        model_expected,
        local_limit_tokens: LOCAL_LIMIT_TOKENS,
        max_answer_tokens: settings.max_answer_tokens,
        idle_unload_secs: settings.idle_unload_secs,
        sysfs: crate::llm::LlmConfig::real_sysfs(),
        notify,
        speed_file: Some(crate::llm::speed::path(&paths.data_dir)),
    }
}

/// What the store does beside writing, for the sidebar and the CLI: crash
/// recovery and sealing at open, retention every hour, and (given its
/// channel) waking the embed worker after each commit.
pub fn store_hooks(embed: Option<Sender<EmbedCommand>>) -> crate::store::StoreHooks {
    crate::store::StoreHooks {
        on_open: vec![Arc::new(crate::capture::db::recover_at_open), Arc::new(crate::audio::transcripts::seal_at_open)],
        after_commit: embed.map(|embed| -> Arc<dyn Fn() + Send + Sync> {
            // Full means a wake-up is already waiting.
            Arc::new(move || {
                let _ = embed.try_send(EmbedCommand::Wake);
            })
        }),
        periodic: vec![crate::erase::retention()],
    }
}

/// The store worker with `store_hooks` (no embed worker to wake).
pub fn spawn_store<E: 'static>(path: std::path::PathBuf, sink: EventSink<E>, policy: RestartPolicy) -> std::io::Result<WorkerHandle<StoreCommand>> {
    crate::store::spawn_store(path, sink, policy, store_hooks(None))
}

/// The sidebar's followers of what lies outside cowork (with the automations
/// worker): the document folders and the calendars.
#[allow(clippy::type_complexity)]
fn followers(
    paths: &Paths,
    options: &WorkerOptions,
    store: &WorkerHandle<StoreCommand>,
    listen: &WorkerHandle<crate::audio::listen::ListenCommand>,
    sink: &EventSink<AppEvent>,
) -> anyhow::Result<(Option<WorkerHandle<crate::documents::folders::FoldersCommand>>, Option<WorkerHandle<crate::calendar::worker::CalendarCommand>>)> {
    if !options.automations {
        return Ok((None, None));
    }
    let folders = crate::documents::folders::spawn_folders(paths.db_path(), paths.data_dir.clone(), store.commands.clone(), crossbeam_channel::bounded(8), sink.runtime_only(), options.policy)?;
    let calendar = crate::calendar::worker::spawn_calendar(
        paths.db_path(),
        paths.data_dir.clone(),
        store.commands.clone(),
        {
            let listen = listen.commands.clone();
            move |call| {
                let _ = listen.try_send(crate::audio::listen::ListenCommand::Calendar(call));
            }
        },
        crate::calendar::worker::channel(),
        sink.narrow(),
        options.policy,
    )?;
    Ok((Some(folders), Some(calendar)))
}
