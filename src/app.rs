//! The eframe application: `logic` drains worker events into `AppState` (within
//! an 8 ms budget per frame) and handles the shortcuts; `ui` lays out the tabs,
//! the status bar and the current panel, then turns their `UiAction`s into
//! commands (one `*_action` handler per domain), always with `try_send`: a full
//! channel becomes a visible "busy" message, never a block.
//!
//! The one-off tasks the app starts itself run on named threads and answer on
//! channels it polls: a provider's key tried with one tiny question
//! (`provider-test`) and Forget everything's list, which asks the secret store
//! (`forget-list`), each once on a `bounded(1)` channel; model lists for the
//! pickers (`model-list`, bounded(16)); files chosen through the portal
//! (`file-chooser`), read on `attach-document` threads, and answers exported
//! (`export-answer`), on the documents channel (bounded(64)).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::TrySendError;
use egui::{Key, KeyboardShortcut, Modifiers, RichText, ViewportBuilder, ViewportCommand, ViewportId};

use crate::agent::{AgentCommand, ChatRequest};
use crate::agent::events::AgentEvent;
use crate::capture::CaptureCommand;
use crate::config::keys;
use crate::desktop::events::DesktopEvent;
use crate::events::AppEvent;
use crate::ids::{local_day_start_millis, next_id, now_millis};
use crate::llm::LlmCommand;
use crate::models::events::ModelsEvent;
use crate::runtime::{Control, WorkerName};
use crate::state::{AppState, Tab, UiAction};
use crate::store::StoreCommand;
use crate::store::events::StoreEvent;
use crate::ui::{shortcuts, theme};
use crate::ui::apps::apps_ui;
use crate::ui::chat::{ChatPanel, chat_ui};
use crate::ui::context::context_ui;
use crate::ui::quick_prompt::{QuickPromptPanel, quick_prompt_ui};
use crate::ui::settings::{ModelView, SettingsPanel, settings_ui};
use crate::ui::status_bar::status_bar_ui;
use crate::workers::Channels;

/// Options that change how the app runs, from the command line.
#[derive(Clone, Debug, Default)]
pub struct AppOptions {
    /// Write the first frames to this PNG, then quit.
    pub screenshot: Option<PathBuf>,
    /// When the process started, for the first-frame measurement.
    pub process_started: Option<Instant>,
    /// Where the UI's Export buttons write (the data directory).
    pub export_dir: PathBuf,
    /// Where the models live (Settings → Models checks them again after an install).
    pub models_dir: PathBuf,
    /// Started at login with "only the tray icon": the window is unmapped
    /// after its first frame (eframe maps it after painting one) until the
    /// tray's Show or a second `cowork` asks for it.
    pub start_hidden: bool,
    /// Set when the user confirmed Forget everything: the process removes
    /// what cowork keeps once the window is closed and the workers stopped.
    pub forget_on_exit: Arc<std::sync::atomic::AtomicBool>,
    /// The login autostart entry (None: `$XDG_CONFIG_HOME/autostart/…`; tests give their own).
    pub autostart_entry: Option<PathBuf>,
}

pub struct CoworkApp {
    pub state: AppState,
    channels: Channels,
    models: Vec<ModelView>,
    chat: ChatPanel,
    quick: QuickPromptPanel,
    apps: crate::ui::apps::AppsPanel,
    consent: crate::ui::consent::ConsentPanel,
    settings: SettingsPanel,
    options: AppOptions,
    frames: u64,
    screenshot_requested: bool,
    /// The keyboard moved the focus last (Tab): the focus ring is drawn.
    keyboard_driving: bool,
    screenshot_done: Arc<std::sync::atomic::AtomicBool>,
    geometry: Option<[f32; 4]>,
    geometry_saved_at: Instant,
    /// The tray icon, told when capture is paused and how many agent tasks wait.
    tray: Option<crate::desktop::TrayIcon>,
    /// Places the sidebar and the quick prompt through the compositor (sway, Hyprland).
    placer: Option<crate::desktop::place::Placer>,
    /// What the tray was last told waits (told again only when it changes).
    tray_waiting: usize,
    show_requested: bool,
    search_box: crate::ui::context::SearchBox,
    /// providers.json as read at start, for retry estimates.
    providers: crate::brains::Providers,
    /// The voice hotkey's presses and releases, as starts and stops.
    ptt: crate::audio::ptt::PushToTalk,
    /// Whether the tray was last told the microphone is open.
    tray_mic: bool,
    setup: crate::ui::setup::SetupPanel,
    /// A provider's key being tried on its own thread, and what Forget
    /// everything would remove being listed (each answers once).
    provider_test: Option<crossbeam_channel::Receiver<Result<String, String>>>,
    forget_list: Option<crossbeam_channel::Receiver<Result<Vec<String>, String>>>,
    /// Model lists asked of providers (Settings' and the first run's pickers), each on its own thread.
    model_lists: (crossbeam_channel::Sender<AppEvent>, crossbeam_channel::Receiver<AppEvent>),
    /// The provider being tried, saved once its key answers (and whether cloud answers first then).
    provider_tried: Option<(crate::brains::ProviderConfig, bool)>,
    /// Files chosen or dropped, read on their own threads, and undo outcomes.
    documents: (crossbeam_channel::Sender<DocumentEvent>, crossbeam_channel::Receiver<DocumentEvent>),
}

/// What the document threads tell the sidebar.
enum DocumentEvent {
    Chosen(Result<Vec<PathBuf>, String>),
    Read { name: String, result: Result<Box<(crate::records::Attachment, Option<crate::documents::memory::Remembered>)>, String> },
    Said(String),
}

/// The configured providers, for Settings → Network.
fn network_view(data_dir: &std::path::Path, providers: &anyhow::Result<crate::brains::Providers>) -> crate::ui::settings::NetworkView {
    let mut view = match providers {
        Ok(providers) => crate::ui::settings::NetworkView {
            providers: providers
                .list
                .iter()
                .map(|p| (p.name.clone(), format!("{:?}", p.kind).to_lowercase(), p.model.clone(), p.base_url.clone()))
                .collect(),
            ..Default::default()
        },
        Err(err) => crate::ui::settings::NetworkView { providers_error: Some(format!("{err:#}")), ..Default::default() },
    };
    // Only masked values reach the UI.
    if !view.providers.is_empty()
        && let Ok(secrets) = crate::secrets::Secrets::open(data_dir)
    {
        view.secret_store = secrets.describe();
        for (name, masked) in secrets.list().unwrap_or_default() {
            if let Some(provider) = name.strip_prefix("provider:") {
                view.keys.insert(provider.to_owned(), masked);
            }
        }
    }
    view
}

/// One tiny question to a provider (the first run's key test): its answer and how long it took.
fn try_provider(provider: &crate::brains::ProviderConfig, key: Option<&str>) -> Result<String, String> {
    use crate::brains::{Role, Turn};
    let mut provider = provider.clone();
    if provider.base_url.is_empty()
        && let Some((_, _, base)) = crate::brains::provider::KNOWN.iter().find(|(name, _, _)| *name == provider.name)
    {
        provider.base_url = (*base).to_owned();
    }
    let started = Instant::now();
    let turns = [Turn::new(Role::User, "Reply with the single word OK.")];
    let completion = crate::brains::stream_chat(crate::net::OutboundGate::global(), &provider, None, key, &turns, 8, &|| false, &mut |_| {})
        .map_err(|err| format!("the key did not work: {err}"))?;
    let text: String = completion.answer.text.chars().take(40).collect();
    Ok(format!("{} answered \"{}\" in {} ms", provider.model, text.trim(), started.elapsed().as_millis()))
}

/// A one-off task's answer once it came (the slot empties then, or when the task died);
/// while it runs, the UI looks again in 100 ms.
/// Files from the desktop's file chooser (the XDG portal, which GNOME, KDE
/// and wlroots desktops answer with their own dialog). Without a portal the
/// sidebar's own file browser opens instead (no GTK or Qt needed).
fn choose_files() -> Result<Vec<PathBuf>, String> {
    zbus::blocking::Connection::session().map_err(|e| e.to_string()).and_then(|conn| crate::desktop::portal::choose_files(&conn, "Attach files to the chat"))
}

/// Where an exported answer goes: the user's Documents folder (XDG), a name not yet taken.
fn export_path(extension: &str) -> Result<PathBuf, String> {
    let dirs = directories::UserDirs::new().ok_or("no home folder")?;
    let folder = dirs.document_dir().map(PathBuf::from).unwrap_or_else(|| dirs.home_dir().join("Documents"));
    std::fs::create_dir_all(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    let stamp = crate::ids::format_local_datetime(crate::ids::now_millis()).replace(':', "-");
    for n in 0..100 {
        let suffix = if n == 0 { String::new() } else { format!(" ({n})") };
        let path = folder.join(format!("cowork answer {stamp}{suffix}.{extension}"));
        if !path.exists() {
            return Ok(path);
        }
    }
    Err(format!("{} has too many answers saved this minute", folder.display()))
}

fn answer_once<T>(slot: &mut Option<crossbeam_channel::Receiver<T>>, ctx: &egui::Context) -> Option<T> {
    let received = slot.as_ref()?.try_recv();
    match received {
        Ok(answer) => {
            *slot = None;
            Some(answer)
        }
        Err(crossbeam_channel::TryRecvError::Disconnected) => {
            *slot = None;
            None
        }
        Err(crossbeam_channel::TryRecvError::Empty) => {
            ctx.request_repaint_after(Duration::from_millis(100));
            None
        }
    }
}

/// Longest the UI spends applying events in one frame before yielding.
const EVENT_BUDGET: Duration = Duration::from_millis(8);
const GEOMETRY_SAVE_INTERVAL: Duration = Duration::from_secs(2);

impl CoworkApp {
    pub fn new(channels: Channels, mut state: AppState, models: Vec<ModelView>, options: AppOptions) -> Self {
        let today = local_day_start_millis(now_millis());
        state.day = crate::state::DayView { span: crate::capture::events::Days { start_millis: today, days: 1, ..Default::default() }, ..Default::default() };
        for command in [
            crate::store::load_settings(channels.bus.narrow()),
            crate::chat::load_threads(channels.bus.narrow()),
            crate::memory::commands::load_facts(channels.bus.narrow()),
            crate::memory::commands::profile_proposals(channels.bus.narrow()),
            crate::capture::db::load_sessions_since(today, channels.bus.narrow()),
            crate::capture::db::load_days(today, 1, channels.bus.narrow()),
        ] {
            let _ = channels.store.try_send(command);
        }
        let geometry = state.settings.sidebar_geometry;
        let loaded = crate::brains::Providers::load(&crate::brains::Providers::path(&options.export_dir));
        let network = network_view(&options.export_dir, &loaded);
        let providers = loaded.unwrap_or_default();
        Self {
            state,
            channels,
            models,
            chat: ChatPanel::default(),
            quick: QuickPromptPanel::default(),
            apps: crate::ui::apps::AppsPanel::default(),
            consent: crate::ui::consent::ConsentPanel::default(),
            settings: SettingsPanel { network, ..SettingsPanel::default() },
            options,
            frames: 0,
            screenshot_requested: false,
            keyboard_driving: false,
            screenshot_done: Arc::default(),
            geometry,
            geometry_saved_at: Instant::now(),
            tray: None,
            placer: None,
            tray_waiting: 0,
            show_requested: false,
            providers,
            search_box: Default::default(),
            ptt: crate::audio::ptt::PushToTalk::default(),
            tray_mic: false,
            setup: crate::ui::setup::SetupPanel::default(),
            provider_test: None,
            forget_list: None,
            model_lists: crossbeam_channel::bounded(16),
            provider_tried: None,
            documents: crossbeam_channel::bounded(64),
        }
    }

    fn paths(&self) -> crate::config::Paths {
        crate::config::Paths { data_dir: self.options.export_dir.clone(), models_dir: self.options.models_dir.clone() }
    }

    /// The data directory when it is not the default one (the autostart entry names it).
    fn data_dir_arg(&self) -> Option<PathBuf> {
        self.paths().data_dir_if_not_default().map(|dir| dir.to_path_buf())
    }

    /// The first run's pages judge the models for `machine` instead of this computer (tests).
    pub fn with_setup_machine(mut self, machine: crate::ui::setup::Machine) -> Self {
        if let Ok(manifest) = crate::models::Manifest::bundled() {
            self.setup = std::mem::take(&mut self.setup).with_machine(&manifest, machine);
        }
        self
    }

    /// Answers of the one-off tasks (a provider's key tried, Forget everything's list).
    fn take_task_answers(&mut self, ctx: &egui::Context) {
        if let Some(outcome) = answer_once(&mut self.provider_test, ctx) {
            let answered = outcome.is_ok();
            if let Some((_, slot)) = &mut self.state.setup.provider_test {
                *slot = Some(outcome);
            }
            if let Some((provider, prefer_cloud)) = self.provider_tried.take().filter(|_| answered) {
                self.keep_provider(provider, prefer_cloud);
            }
        }
        while let Ok(event) = self.model_lists.1.try_recv() {
            self.state.apply(event, crate::ids::now_millis());
        }
        if self.state.model_lists.values().any(Option::is_none) {
            ctx.request_repaint_after(Duration::from_millis(100));
        }
        if let Some(listed) = answer_once(&mut self.forget_list, ctx)
            && self.state.forget.is_some()
        {
            self.state.forget = Some(Some(listed));
        }
        // Files dropped onto the sidebar are attached.
        let dropped: Vec<PathBuf> = ctx.input(|i| i.raw.dropped_files.iter().map(|f| f.path().to_path_buf()).filter(|p| !p.as_os_str().is_empty()).collect());
        if !dropped.is_empty() {
            self.handle_action(UiAction::AttachFiles(dropped));
        }
        while let Ok(event) = self.documents.1.try_recv() {
            match event {
                DocumentEvent::Chosen(Ok(paths)) => self.handle_action(UiAction::AttachFiles(paths)),
                DocumentEvent::Chosen(Err(err)) => {
                    tracing::info!(%err, "no desktop file chooser; the sidebar's own opens");
                    let start = directories::UserDirs::new().map(|d| d.document_dir().unwrap_or(d.home_dir()).to_path_buf()).unwrap_or_else(|| PathBuf::from("/"));
                    self.handle_action(UiAction::BrowseFiles(Some(start)));
                }
                DocumentEvent::Said(err) => self.state.notice(err),
                DocumentEvent::Read { name, result } => {
                    if let Some(at) = self.state.reading_documents.iter().position(|n| *n == name) {
                        self.state.reading_documents.remove(at);
                    }
                    match result.map(|read| *read) {
                        Ok((attachment, remembered)) => {
                            self.state.attachments.retain(|a| !(a.server.is_empty() && a.uri == attachment.uri));
                            self.state.attachments.push(attachment);
                            if let Some(doc) = remembered {
                                self.send_store(crate::documents::memory::remember_command(doc, None));
                            }
                        }
                        Err(err) => self.state.notice(err),
                    }
                }
            }
        }
        if !self.state.reading_documents.is_empty() {
            ctx.request_repaint_after(Duration::from_millis(100));
        }
    }

    /// Reads `path` for the chat (at most the attachment's share of the
    /// prompt, with what was cut said) and, when the user keeps documents in
    /// memory, whole for memory; on its own thread.
    fn read_for_chat(&mut self, path: PathBuf) {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string());
        let withheld = crate::documents::memory::withheld(&path, &self.state.settings);
        let remember = withheld.is_none();
        let tx = self.documents.0.clone();
        self.state.reading_documents.push(name.clone());
        let spawned = std::thread::Builder::new().name("attach-document".into()).spawn(move || {
            let result = crate::documents::read_with_deadline(&path, &crate::documents::Selection::default(), crate::documents::read::DEADLINE).map_err(|e| e.to_string()).map(|doc| {
                let text = doc.render(crate::records::Attachment::FOR_MODEL);
                // A picture goes along whole too, for a cloud model that sees (`Attachment::picture`).
                let picture = (doc.kind == crate::documents::Kind::Picture).then(|| std::fs::read(&path).ok()).flatten().and_then(crate::media::Image::sniffed);
                let attachment = match picture {
                    Some(picture) => crate::records::Attachment::picture(&path, text, picture),
                    None => crate::records::Attachment::document(&path, text),
                };
                let remembered = remember.then(|| crate::documents::memory::from_document(&doc, "attached").ok()).flatten();
                Box::new((attachment, remembered))
            });
            let _ = tx.send(DocumentEvent::Read { name, result });
        });
        if let Err(err) = spawned {
            self.state.reading_documents.pop();
            self.state.notice(format!("cannot read the file: {err}"));
        }
    }

    /// A provider whose key answered: saved, one of the cloud tiers, and first when the user chose cloud only.
    fn keep_provider(&mut self, provider: crate::brains::ProviderConfig, prefer_cloud: bool) {
        let name = provider.name.clone();
        self.handle_action(UiAction::SaveProvider(provider));
        if !self.state.settings.tiers.contains(&name) {
            let mut tiers = self.state.settings.tiers.clone();
            tiers.push(name);
            self.handle_action(UiAction::SaveSetting { key: keys::TIERS.to_owned(), value: tiers.join(", ") });
        }
        if prefer_cloud {
            self.handle_action(UiAction::SaveSetting { key: keys::PREFER.to_owned(), value: crate::brains::Preference::Cloud.as_str().to_owned() });
        }
    }

    /// The first run's download is here: its chat model answers from now on,
    /// and memory search starts again if it had stopped for want of its model.
    fn setup_download_done(&mut self) {
        let Some(download) = &self.state.setup.download else { return };
        let Ok(manifest) = crate::models::Manifest::bundled() else { return };
        if let Some(model) = crate::config::resolve_named_model(&manifest, &self.options.models_dir, &self.state.added_models, &download.chat_model) {
            self.handle_action(UiAction::ChooseChatModel(Some(model)));
        }
        for worker in [WorkerName::Embed, WorkerName::Search] {
            if !matches!(self.state.worker_state(worker), crate::runtime::WorkerState::Running) {
                self.handle_action(UiAction::RetryWorker(worker));
            }
        }
    }

    /// Keeps the tray icon and keeps it in step with the pause switch.
    pub fn with_tray(mut self, tray: Option<crate::desktop::TrayIcon>) -> Self {
        self.tray = tray;
        self
    }

    pub fn with_placer(mut self, placer: Option<crate::desktop::place::Placer>) -> Self {
        self.placer = placer;
        self
    }

    /// Where the toolkit cannot place the quick prompt (Wayland), the compositor is asked to.
    fn place_quick_prompt(&self) {
        if let Some(placer) = &self.placer {
            let [width, height] = theme::QUICK_PROMPT_SIZE;
            placer.place(crate::desktop::place::PlaceCommand::QuickPrompt { width: width as i32, height: height as i32 });
        }
    }

    /// Applies pending worker events, within a time budget.
    pub fn drain_events(&mut self, ctx: &egui::Context) {
        let start = Instant::now();
        let now = now_millis();
        while let Ok(event) = self.channels.events.try_recv() {
            if self.state.setup.open {
                let tried = match &event {
                    AppEvent::Desktop(DesktopEvent::QuickPromptHotkey) => Some("quick prompt"),
                    AppEvent::Desktop(DesktopEvent::TogglePause) => Some("pause"),
                    AppEvent::Desktop(DesktopEvent::VoiceHotkey { pressed: true }) => Some("push-to-talk"),
                    _ => None,
                };
                self.state.setup.hotkeys_tried.extend(tried);
            }
            let download_done = matches!(&event, AppEvent::Models(ModelsEvent::ModelsChanged { name, outcome: Ok(_) }) if name == crate::models::worker::DOWNLOAD_JOB);
            match event {
                AppEvent::Desktop(DesktopEvent::TogglePause) => {
                    self.handle_action(UiAction::TogglePause);
                    continue;
                }
                AppEvent::Desktop(DesktopEvent::ShowSidebar) => {
                    self.show_requested = true;
                    continue;
                }
                // Accept on a suggestion: its request, in a new chat, as if typed (its risky calls still ask).
                AppEvent::Desktop(DesktopEvent::StartTask(prompt)) => {
                    self.show_requested = true;
                    self.state.tab = Some(crate::state::Tab::Chat);
                    self.handle_action(UiAction::NewThread);
                    self.handle_action(UiAction::SendMessage(prompt));
                    continue;
                }
                // The hotkey or `cowork trigger quick-prompt`: placed as when opened from the sidebar.
                AppEvent::Desktop(DesktopEvent::QuickPromptHotkey) if !self.state.quick_prompt_open => self.place_quick_prompt(),
                AppEvent::Desktop(DesktopEvent::VoiceHotkey { pressed }) => {
                    self.voice_hotkey(pressed);
                    continue;
                }
                AppEvent::Voice(crate::audio::events::VoiceEvent::Closed { .. } | crate::audio::events::VoiceEvent::Failed { .. }) => self.ptt.reset(),
                _ => {}
            }
            if matches!(event, AppEvent::Models(ModelsEvent::ModelsChanged { .. }))
                && let Ok(manifest) = crate::models::Manifest::bundled()
            {
                self.models = crate::ui::settings::model_views(&manifest, &self.options.models_dir);
            }
            let threads_loaded = matches!(event, AppEvent::Chat(crate::chat::ChatEvent::ThreadsLoaded(_)));
            // A recap was kept (from the panel or the automation): the days shown load again to show it.
            if matches!(event, AppEvent::Agent(crate::agent::events::AgentEvent::RecapWritten { result: Ok(_), .. })) && self.state.day.loaded {
                self.send_store(crate::capture::db::load_days(self.state.day.span.start_millis, self.state.day.span.days, self.channels.bus.narrow()));
            }
            if matches!(event, AppEvent::Store(StoreEvent::RangeDeleted { messages: 1.., .. })) {
                self.send_store(crate::chat::load_threads(self.channels.bus.narrow()));
            }
            self.state.apply(event, now);
            if download_done {
                self.setup_download_done();
            }
            // After a restart, reopen the most recent conversation.
            if threads_loaded
                && self.state.current_thread.is_none()
                && let Some(thread_id) = self.state.threads.first().map(|t| t.thread_id)
            {
                self.handle_action(UiAction::SelectThread(thread_id));
            }
            if start.elapsed() > EVENT_BUDGET {
                ctx.request_repaint();
                break;
            }
        }
    }

    /// The global voice hotkey: hold to talk, tap to toggle (Settings → Voice),
    /// into the quick prompt, which opens.
    fn voice_hotkey(&mut self, pressed: bool) {
        use crate::audio::ptt::PttAction;
        use crate::audio::worker::AudioCommand;
        self.ptt.mode = self.state.settings.voice.mode;
        let now = Instant::now();
        let action = if pressed { self.ptt.press(now) } else { self.ptt.release(now) };
        match action {
            // Dictation: the focused app keeps the focus, and the words are typed into it.
            Some(PttAction::Start) if self.state.settings.voice.dictation => {
                self.send_audio(AudioCommand::Start { target: crate::audio::events::VoiceTarget::Dictation, pressed_at: now });
            }
            Some(PttAction::Start) => {
                // The microphone opens before the window: the first word is not lost to drawing it.
                self.send_audio(AudioCommand::Start { target: crate::audio::events::VoiceTarget::QuickPrompt, pressed_at: now });
                if !self.state.quick_prompt_open {
                    self.handle_action(UiAction::OpenQuickPrompt);
                }
            }
            Some(PttAction::Stop) => {
                self.send_audio(AudioCommand::Stop { released_at: now });
            }
            None => {}
        }
    }

    fn send_audio(&mut self, command: crate::audio::worker::AudioCommand) {
        match self.channels.audio.try_send(command) {
            Ok(()) => {}
            Err(crossbeam_channel::TrySendError::Full(_)) => self.state.notice("the audio worker is busy; try again"),
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => self.state.notice("the audio worker is not running"),
        }
    }

    /// A transcript goes into its input to edit, or is sent at once when
    /// Settings → Voice says so.
    fn take_transcript(&mut self) {
        let Some((target, text)) = self.state.voice.fill.take() else { return };
        if target == crate::audio::events::VoiceTarget::Dictation {
            self.send_audio(crate::audio::worker::AudioCommand::Dictate(text));
            return;
        }
        if self.state.settings.voice.send_on_release {
            self.handle_action(UiAction::SendMessage(text));
            if target == crate::audio::events::VoiceTarget::QuickPrompt {
                self.handle_action(UiAction::CloseQuickPrompt);
            }
            return;
        }
        let draft = match target {
            crate::audio::events::VoiceTarget::QuickPrompt => &mut self.quick.text,
            crate::audio::events::VoiceTarget::Chat | crate::audio::events::VoiceTarget::Dictation => &mut self.chat.draft,
        };
        if !draft.trim().is_empty() && !draft.ends_with(' ') {
            draft.push(' ');
        }
        draft.push_str(&text);
    }

    /// What a view asked for: each domain's actions go to its own handler below.
    pub fn handle_action(&mut self, action: UiAction) {
        match action {
            action @ (UiAction::VoiceToggle(..) | UiAction::VoiceCancel | UiAction::ListMicrophones) => self.voice_action(action),
            action @ (UiAction::SendMessage(..) | UiAction::Stop | UiAction::DecideCall { .. } | UiAction::ContinueOperation { .. } | UiAction::NewThread | UiAction::SelectThread(..) | UiAction::DeleteThread(..) | UiAction::Consent(..) | UiAction::TryHarder { .. } | UiAction::ConfirmRetry | UiAction::CancelRetry | UiAction::ExportAnswer { .. } | UiAction::Rate { .. } | UiAction::Undo(..) | UiAction::MemoryChange { .. } | UiAction::OpenCitation(..) | UiAction::RemoveRule(..)) => self.chat_action(action),
            action @ (UiAction::McpEdit(..) | UiAction::McpReconnect(..) | UiAction::McpStop(..) | UiAction::McpTest(..) | UiAction::McpAddFromCatalog { .. } | UiAction::McpSignIn(..) | UiAction::McpSignOut(..) | UiAction::AttachResource { .. } | UiAction::UsePrompt(..) | UiAction::Elicited { .. } | UiAction::McpClientDecision { .. }) => self.mcp_action(action),
            action @ (UiAction::ListModels { .. } | UiAction::SetProviderModel { .. } | UiAction::SaveProvider(..) | UiAction::RemoveProvider(..) | UiAction::TestProvider { .. } | UiAction::SaveKey { .. } | UiAction::SaveSearchKey { .. } | UiAction::SaveCalendarPassword { .. }) => self.providers_action(action),
            UiAction::RefreshCalendar => {
                if self.channels.calendar.try_send(crate::calendar::worker::CalendarCommand::Refresh).is_err() {
                    self.state.notice("the calendar worker is not running (see the status bar): the calendars were not read");
                }
            }
            action @ (UiAction::ChooseChatModel(..) | UiAction::AddModel(..) | UiAction::SetupDownload { .. } | UiAction::SetupCancelDownload | UiAction::FetchModels | UiAction::InstallModel(..) | UiAction::RemoveModel(..) | UiAction::LoadModel) => self.models_action(action),
            action @ (UiAction::AutomationRun(..) | UiAction::AutomationEnable { .. } | UiAction::AutomationRerun(..) | UiAction::AutomationCancel(..) | UiAction::DraftFlow(..) | UiAction::SaveFlow(..) | UiAction::AppsInspect(..) | UiAction::DraftApp(..) | UiAction::AppsInspectDraft(..) | UiAction::AppsForgetInspection | UiAction::AppsInstall { .. } | UiAction::AppsEnable { .. } | UiAction::AppsRemove(..) | UiAction::AppOpen(..) | UiAction::AppClose(..) | UiAction::AppAct { .. } | UiAction::AppChat { .. } | UiAction::AppOpenUrl(..) | UiAction::InboxAct { .. }) => self.apps_action(action),
            action @ (UiAction::Search(..) | UiAction::OpenHit(..) | UiAction::PinFact { .. } | UiAction::UnpinFact(..) | UiAction::ProfileProposal { .. } | UiAction::PinToThread { .. } | UiAction::UnpinFromThread { .. } | UiAction::SummariseNow | UiAction::RetryEmbedding | UiAction::ToggleSession(..) | UiAction::ShowDays { .. } | UiAction::WriteRecap { .. } | UiAction::FilterProject(..) | UiAction::DeleteRecent { .. } | UiAction::ExportToday(..) | UiAction::AskForgetEverything | UiAction::CancelForget | UiAction::ForgetEverything) => self.memory_action(action),
            action @ (UiAction::ChooseFiles | UiAction::BrowseFiles(..) | UiAction::AttachFiles(..) | UiAction::Detach(..)) => self.documents_action(action),
            action @ (UiAction::SwitchTab(..) | UiAction::SaveSetting { .. } | UiAction::SetAutostart(..) | UiAction::OpenSetup | UiAction::FinishSetup | UiAction::TogglePause | UiAction::GnomeExtension { .. } | UiAction::GnomeShortcuts { .. } | UiAction::RetryWorker(..) | UiAction::OpenQuickPrompt | UiAction::CloseQuickPrompt) => self.settings_action(action),
        }
    }

    /// Push-to-talk and the microphones.
    fn voice_action(&mut self, action: UiAction) {
        match action {
            UiAction::VoiceToggle(target) => {
                use crate::audio::worker::AudioCommand;
                if self.state.voice.recording == Some(target) {
                    self.send_audio(AudioCommand::Stop { released_at: Instant::now() });
                } else if self.state.voice.recording.is_none() {
                    self.send_audio(AudioCommand::Start { target, pressed_at: Instant::now() });
                }
                self.ptt.reset();
            }
            UiAction::VoiceCancel => {
                self.send_audio(crate::audio::worker::AudioCommand::Cancel);
                self.ptt.reset();
            }
            UiAction::ListMicrophones => self.send_audio(crate::audio::worker::AudioCommand::ListDevices),
            other => tracing::error!(action = ?other, "an action reached the wrong handler"),
        }
    }

    /// The chat: sending, stopping, threads, approvals, consent, retries, ratings, undo.
    fn chat_action(&mut self, action: UiAction) {
        match action {
            UiAction::SendMessage(text) => self.send_message(text),
            UiAction::Stop => {
                if self.state.generating.is_some() {
                    self.channels.stop_epoch.fetch_add(1, Ordering::SeqCst);
                }
                if self.state.waiting_count() > 0 {
                    self.send_agent_command(AgentCommand::CancelWaiting);
                }
            }
            UiAction::DecideCall { call_id, choice } => self.send_agent_command(AgentCommand::Decide { call_id, choice }),
            UiAction::ContinueOperation { operation_id, go_on } => self.send_agent_command(AgentCommand::Continue { operation_id, go_on }),
            UiAction::NewThread => {
                self.state.chat_from_app = None;
                self.state.new_thread();
            }
            UiAction::SelectThread(thread_id) => {
                if self.state.generating.is_none() {
                    self.state.chat_from_app = None;
                    self.state.current_thread = Some(thread_id);
                    self.state.messages.clear();
                    self.state.pins.clear();
                    self.send_store(crate::chat::load_messages(thread_id, self.channels.bus.narrow()));
                    // The agent's tool chips of the thread's answers (a live operation sends its own), and its pins.
                    self.send_store(crate::agent::store::load_thread_calls(thread_id, self.channels.bus.narrow()));
                    self.send_store(crate::memory::commands::load_pins(thread_id, self.channels.bus.narrow()));
                }
            }
            UiAction::DeleteThread(thread_id) => {
                // Not while it is being answered: the answer would write into it again.
                if self.state.generating.is_none() || self.state.current_thread != Some(thread_id) {
                    self.send_store(crate::erase::delete_thread_command(thread_id, self.channels.bus.narrow()));
                }
            }
            UiAction::RemoveRule(id) => self.send_agent_command(AgentCommand::RemoveRule(id)),
            UiAction::Consent(choice) => self.answer_consent(choice),
            UiAction::TryHarder { answer_id } => self.offer_retry(answer_id),
            UiAction::ConfirmRetry => self.send_retry(),
            UiAction::CancelRetry => self.state.retry_offer = None,
            UiAction::Undo(operation_id) => {
                let tx = self.documents.0.clone();
                let say = move |said| {
                    let _ = tx.send_timeout(DocumentEvent::Said(said), std::time::Duration::from_millis(500));
                };
                self.send_store(crate::agent::store::undo_command(operation_id, self.paths().data_dir.clone(), say));
                self.state.undoable.retain(|_, (op, _)| *op != operation_id);
            }
            UiAction::MemoryChange { answer_id, confirm } => {
                let Some(change) = self.state.memory_changes.remove(&answer_id) else { return };
                if confirm {
                    self.send_store(crate::memory::commands::apply_change(change, self.channels.bus.narrow()));
                    // The local model's kept prompt may hold the old fact.
                    self.send_agent_command(AgentCommand::MemoryChanged);
                } else {
                    self.state.notice("Kept your pinned facts as they are");
                }
            }
            UiAction::ExportAnswer { answer_id, extension } => {
                let Some(text) = self.state.messages.iter().find(|m| m.message_id == answer_id).map(|m| crate::ids::without_session_refs(&m.content).0.into_owned()) else { return };
                let tx = self.documents.0.clone();
                let _ = std::thread::Builder::new().name("export-answer".into()).spawn(move || {
                    let said = match export_path(extension) {
                        Ok(path) => crate::documents::write::export_answer(&text, &path).map(|_| format!("Saved the answer as {}", path.display())),
                        Err(err) => Err(err),
                    };
                    let _ = tx.send(DocumentEvent::Said(said.unwrap_or_else(|err| format!("The answer was not saved: {err}"))));
                });
            }
            UiAction::OpenCitation(citation) => {
                let what = format!("[{}] {}", citation.n, citation.label);
                self.open_source(citation.stream, citation.open_id, &what);
            }
            UiAction::Rate { message_id, rating, reason } => {
                if let Some(message) = self.state.messages.iter_mut().find(|m| m.message_id == message_id) {
                    message.feedback = Some(rating);
                }
                self.send_store(crate::chat::feedback(message_id, rating, reason));
            }
            other => tracing::error!(action = ?other, "an action reached the wrong handler"),
        }
    }

    /// Integrations: MCP servers, their sign-in, resources, prompts and requests, and the clients of `cowork mcp serve`.
    fn mcp_action(&mut self, action: UiAction) {
        match action {
            UiAction::McpEdit(edit) => {
                self.send_mcp(crate::mcp::worker::McpCommand::Edit(edit));
            }
            UiAction::McpReconnect(name) => {
                self.send_mcp(crate::mcp::worker::McpCommand::Connect(name));
            }
            UiAction::McpStop(name) => {
                self.send_mcp(crate::mcp::worker::McpCommand::Disconnect(name));
            }
            UiAction::McpTest(name) => {
                self.send_mcp(crate::mcp::worker::McpCommand::Test(name));
            }
            UiAction::McpAddFromCatalog { id, values, trusted } => {
                self.state.mcp_catalog = Some((id.clone(), None, Vec::new()));
                self.send_mcp(crate::mcp::worker::McpCommand::AddFromCatalog { id, values, trusted });
            }
            UiAction::McpSignIn(name) => {
                self.send_mcp(crate::mcp::worker::McpCommand::SignIn(name));
            }
            UiAction::McpSignOut(name) => {
                self.send_mcp(crate::mcp::worker::McpCommand::SignOut(name));
            }
            UiAction::AttachResource { server, uri, name } => {
                self.send_mcp(crate::mcp::worker::McpCommand::ReadResource { server, uri, name });
            }
            UiAction::UsePrompt(used) => {
                self.send_mcp(crate::mcp::worker::McpCommand::GetPrompt { server: used.server, name: used.name, arguments: used.arguments });
            }
            UiAction::Elicited { id, answer } => {
                // The form stays when the answer could not go (the server still waits).
                if self.send_mcp(crate::mcp::worker::McpCommand::Elicited { id, answer }) {
                    self.state.elicitations.retain(|e| e.id != id);
                }
            }
            UiAction::McpClientDecision { name, allow } => {
                // Shown at once; the mcp worker reads the table back at its next tick.
                if let Some(client) = self.state.mcp_clients.iter_mut().find(|c| c.name == name) {
                    client.status = if allow { "allowed" } else { "denied" }.into();
                }
                let write = crate::agent::store::AgentWrite::McpClientDecided { name, allowed: allow, by: "user".into(), at_millis: now_millis() };
                self.send_store(crate::agent::store::command(write, None));
            }
            other => tracing::error!(action = ?other, "an action reached the wrong handler"),
        }
    }

    /// Cloud providers: their keys, models and tests, and the web search key.
    fn providers_action(&mut self, action: UiAction) {
        match action {
            UiAction::ListModels { name, draft } => {
                let (provider, key) = match draft {
                    Some((provider, key)) => (provider, Some(key)),
                    None => match self.providers.get(&name) {
                        Some(provider) => (provider.clone(), None),
                        None => return self.state.notice(format!("no provider {name}")),
                    },
                };
                // Asked on its own thread (the network, the secret store); the answer comes as an event.
                self.state.model_lists.insert(provider.name.clone(), None);
                let (sink, data_dir) = (self.model_lists.0.clone(), self.options.export_dir.clone());
                let spawned = std::thread::Builder::new().name("model-list".into()).spawn(move || {
                    let key = match key.filter(|k| !k.trim().is_empty()) {
                        Some(key) => Ok(Some(key)),
                        None => crate::brains::provider_key(&data_dir, &provider),
                    };
                    let result = key
                        .and_then(|key| crate::brains::catalog::list_models(crate::net::OutboundGate::global(), &provider, key.as_deref()))
                        .map_err(|err| format!("{err:#}"));
                    let _ = sink.send(AppEvent::Agent(AgentEvent::ModelsListed { provider: provider.name.clone(), result }));
                });
                if let Err(err) = spawned {
                    self.state.notice(format!("cannot ask for the models: {err}"));
                }
            }
            UiAction::SetProviderModel { provider, model } => {
                match self.providers.get(&provider).cloned() {
                    Some(config) => self.handle_action(UiAction::SaveProvider(crate::brains::ProviderConfig { model, ..config })),
                    None => self.state.notice(format!("no provider {provider}")),
                }
            }
            UiAction::SaveProvider(provider) => {
                let name = provider.name.clone();
                let mut providers = self.providers.clone();
                let saved = providers.upsert(provider).and_then(|()| providers.save(&crate::brains::Providers::path(&self.options.export_dir)));
                match saved {
                    Ok(()) => {
                        self.providers = providers;
                        self.refresh_network_view();
                        self.state.notice(format!("provider {name} saved"));
                    }
                    Err(err) => self.state.notice(format!("provider {name} not saved: {err:#}")),
                }
            }
            UiAction::RemoveProvider(name) => {
                let mut providers = self.providers.clone();
                if providers.remove(&name) {
                    match providers.save(&crate::brains::Providers::path(&self.options.export_dir)) {
                        Ok(()) => {
                            self.providers = providers;
                            self.refresh_network_view();
                        }
                        Err(err) => self.state.notice(format!("cannot save providers: {err:#}")),
                    }
                }
            }
            UiAction::TestProvider { provider, key, prefer_cloud } => {
                // Tried first, and the key kept, on their own thread (the secret store may take
                // seconds); the provider and its tier are saved only once it answered.
                let name = provider.name.clone();
                let (tx, rx) = crossbeam_channel::bounded(1);
                let data_dir = self.options.export_dir.clone();
                let tried = provider.clone();
                let spawned = std::thread::Builder::new().name("provider-test".into()).spawn(move || {
                    let key = Some(key).filter(|k| !k.is_empty());
                    let outcome = try_provider(&tried, key.as_deref()).and_then(|said| match &key {
                        Some(key) => crate::secrets::Secrets::open(&data_dir)
                            .and_then(|secrets| secrets.set(&crate::secrets::provider_key_name(&tried.name), key).map(|()| secrets.describe()))
                            .map(|store| format!("{said}; the key is kept in {store}"))
                            .map_err(|err| format!("it answered, but the key was not kept: {err:#}")),
                        None => Ok(said),
                    });
                    let _ = tx.send(outcome);
                });
                match spawned {
                    Ok(_) => {
                        self.state.setup.provider_test = Some((name, None));
                        self.provider_test = Some(rx);
                        self.provider_tried = Some((provider, prefer_cloud));
                    }
                    Err(err) => self.state.setup.provider_test = Some((name, Some(Err(format!("cannot start the test: {err}"))))),
                }
            }
            UiAction::SaveKey { provider, key } => {
                let stored = crate::secrets::Secrets::open(&self.options.export_dir)
                    .and_then(|secrets| secrets.set(&crate::secrets::provider_key_name(&provider), &key).map(|()| secrets));
                match stored {
                    Ok(secrets) => {
                        self.state.notice(format!("key for {provider} stored in {}", secrets.describe()));
                        self.settings.network.keys.insert(provider, crate::secrets::mask(&key));
                    }
                    Err(err) => self.state.notice(format!("the key for {provider} was not stored: {err:#}")),
                }
            }
            UiAction::SaveCalendarPassword { name, secret } => {
                let stored = crate::secrets::Secrets::open(&self.options.export_dir).and_then(|secrets| secrets.set(&name, &secret).map(|()| secrets));
                match stored {
                    Ok(secrets) => {
                        self.state.notice(format!("the password for {} is kept in {}", name.trim_start_matches("calendar:"), secrets.describe()));
                        let _ = self.channels.calendar.try_send(crate::calendar::worker::CalendarCommand::Refresh);
                    }
                    Err(err) => self.state.notice(format!("the password for {} was not kept: {err:#}", name.trim_start_matches("calendar:"))),
                }
            }
            UiAction::SaveSearchKey { provider, key } => {
                let Some(provider) = crate::tools::web_search::Provider::parse(&provider) else { return };
                let stored = crate::secrets::Secrets::open(&self.options.export_dir).and_then(|secrets| secrets.set(&provider.key_name(), &key).map(|()| secrets));
                match stored {
                    Ok(secrets) => self.state.notice(format!("the {} key is kept in {}", provider.title(), secrets.describe())),
                    Err(err) => {
                        self.settings.network.search_key_stored = None;
                        self.state.notice(format!("the {} key was not kept: {err:#}", provider.title()));
                    }
                }
            }
            other => tracing::error!(action = ?other, "an action reached the wrong handler"),
        }
    }

    /// The local model files: choosing, adding, downloading, installing, removing, loading.
    fn models_action(&mut self, action: UiAction) {
        match action {
            UiAction::ChooseChatModel(model) => {
                let name = model.as_ref().map(|m| m.name.clone()).unwrap_or_default();
                self.handle_action(UiAction::SaveSetting { key: keys::CHAT_MODEL.to_owned(), value: name });
                // The default is resolved at the next start; a chosen one applies now.
                if let Some(model) = model {
                    let command = LlmCommand::SetModel { path: model.path, expected: Some((model.size, model.sha256)) };
                    if self.channels.llm.try_send(command).is_err() {
                        self.state.notice("the llm worker is busy: the new chat model applies after the current answer or at the next start");
                    }
                    // A follow-up must not extend a prompt the old model wrote.
                    let _ = self.channels.agent.try_send(AgentCommand::ModelChanged);
                }
            }
            UiAction::AddModel(path) => {
                if self.channels.models.try_send(crate::models::worker::ModelsCommand::AddUser(path)).is_err() {
                    self.state.notice("the models worker is busy or not running");
                }
            }
            UiAction::SetupDownload { names, chat_model, mirror } => {
                if self.state.setup.download.as_ref().is_some_and(|d| d.running()) {
                    return;
                }
                let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let command = crate::models::worker::ModelsCommand::Download { names: names.clone(), mirror, cancel: cancel.clone() };
                match self.channels.models.try_send(command) {
                    Ok(()) => self.state.setup.download = Some(crate::state::SetupDownload { names, chat_model, cancel, outcome: None }),
                    Err(_) => self.state.notice("the models worker is busy or not running: try again in a moment"),
                }
            }
            UiAction::SetupCancelDownload => {
                if let Some(download) = &self.state.setup.download {
                    download.cancel.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
            UiAction::FetchModels => {
                if self.channels.models.try_send(crate::models::worker::ModelsCommand::FetchAll).is_err() {
                    self.state.notice("the models worker is busy or not running");
                }
            }
            UiAction::InstallModel(name) | UiAction::RemoveModel(name) if self.state.model_jobs.contains(&name) => {}
            UiAction::InstallModel(name) => match self.channels.models.try_send(crate::models::worker::ModelsCommand::Install(name.clone())) {
                Ok(()) => {
                    self.state.notice(format!("installing {name}: downloading, verifying and converting"));
                    self.state.model_jobs.insert(name);
                }
                Err(_) => self.state.notice("the models worker is busy or not running"),
            }
            UiAction::RemoveModel(name) => {
                // Voice falls back to the default speech model rather than fail on missing files.
                if self.state.settings.voice.model == name {
                    self.handle_action(UiAction::SaveSetting { key: keys::VOICE_MODEL.to_owned(), value: String::new() });
                }
                match self.channels.models.try_send(crate::models::worker::ModelsCommand::Remove(name.clone())) {
                    Ok(()) => {
                        self.state.model_jobs.insert(name);
                    }
                    Err(_) => self.state.notice("the models worker is busy or not running"),
                }
            }
            UiAction::LoadModel => match self.channels.llm.try_send(LlmCommand::Preload) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => self.state.notice("the llm worker is busy"),
                Err(TrySendError::Disconnected(_)) => self.state.notice("the llm worker is not running"),
            }
            other => tracing::error!(action = ?other, "an action reached the wrong handler"),
        }
    }

    /// Automations, apps and the notification inbox.
    fn apps_action(&mut self, action: UiAction) {
        match action {
            UiAction::AutomationRun(name) => {
                let data = serde_json::json!({});
                self.send_automations(crate::automations::AutomationsCommand::Run { name, data, origin: crate::tools::Origin::User, reply: None });
            }
            UiAction::AutomationEnable { name, enabled } => {
                self.send_automations(crate::automations::AutomationsCommand::SetEnabled { name, enabled });
            }
            UiAction::AutomationRerun(run_id) => {
                self.send_automations(crate::automations::AutomationsCommand::Rerun { run_id, reply: None });
            }
            UiAction::AutomationCancel(run_id) => {
                self.send_automations(crate::automations::AutomationsCommand::Cancel { run_id });
            }
            UiAction::DraftFlow(description) => match self.channels.agent.try_send(AgentCommand::DraftFlow { description, reply: None }) {
                Ok(()) => {
                    self.state.drafting = true;
                    self.state.flow_draft = None;
                }
                Err(_) => self.state.notice("the agent is busy; try again in a moment"),
            }
            UiAction::SaveFlow(json) => match crate::automations::Flow::from_json(&json) {
                Ok(flow) => {
                    self.send_automations(crate::automations::AutomationsCommand::Save { flow: Box::new(flow), reply: None });
                    self.state.flow_draft = None;
                }
                Err(err) => self.state.flow_draft = Some(Err(err)),
            }
            UiAction::AppsInspect(path) => self.send_apps(crate::apps::AppsCommand::Inspect { path }),
            UiAction::DraftApp(description) => match self.channels.agent.try_send(AgentCommand::DraftApp { description, reply: None }) {
                Ok(()) => {
                    self.state.drafting_app = true;
                    self.state.app_draft = None;
                }
                Err(_) => self.state.notice("the agent is busy; try again in a moment"),
            }
            UiAction::AppsInspectDraft(manifest) => self.send_apps(crate::apps::AppsCommand::InspectDraft { manifest }),
            UiAction::AppsForgetInspection => self.send_apps(crate::apps::AppsCommand::ForgetInspection),
            UiAction::AppsInstall { path, granted } => self.send_apps(crate::apps::AppsCommand::Install { path, granted, reply: None }),
            UiAction::AppsEnable { app_id, enabled } => self.send_apps(crate::apps::AppsCommand::SetEnabled { app_id, enabled }),
            UiAction::AppsRemove(app_id) => self.send_apps(crate::apps::AppsCommand::Remove { app_id, reply: None }),
            UiAction::AppOpen(app_id) => self.send_apps(crate::apps::AppsCommand::Open { app_id }),
            UiAction::AppClose(app_id) => self.send_apps(crate::apps::AppsCommand::Close { app_id }),
            UiAction::AppAct { app_id, message } => self.send_apps(crate::apps::AppsCommand::Act { app_id, message }),
            UiAction::AppChat { app_id, text } => {
                // A new chat with the app's text in the input: the user reads it and sends it.
                if self.state.generating.is_none() {
                    self.state.new_thread();
                    self.state.prompt_fill = Some((text, crate::tools::Origin::ToolResult));
                    self.state.chat_from_app = Some(app_id);
                    self.state.tab = Some(Tab::Chat);
                } else {
                    self.state.notice("wait for the current answer, or stop it");
                }
            }
            UiAction::AppOpenUrl(url) => {
                if let Err(err) = crate::tools::desktop::xdg_open(&url, Some("open a page an app links to"), crate::net::OutboundGate::global()) {
                    self.state.notice(err);
                }
            }
            UiAction::InboxAct { notification_id, act } => match self.channels.notify.try_send(crate::notify::NotifyCommand::Act { notification_id, act }) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => self.state.notice("notifications are busy; try again in a moment"),
                Err(TrySendError::Disconnected(_)) => self.state.notice("notifications are not running"),
            }
            other => tracing::error!(action = ?other, "an action reached the wrong handler"),
        }
    }

    /// Memory and privacy: search, pins, summaries, sessions, export and deletion.
    fn memory_action(&mut self, action: UiAction) {
        match action {
            UiAction::ProfileProposal { text, accept } => {
                self.state.memory.profile_proposals.retain(|p| p.text != text);
                if accept {
                    let profile = self.state.settings.profile.trim();
                    let value = if profile.is_empty() { text } else { format!("{profile}\n{text}") };
                    self.handle_action(UiAction::SaveSetting { key: crate::config::keys::PROFILE.into(), value });
                } else {
                    self.send_store(crate::memory::commands::dismiss_proposal(text, self.channels.bus.narrow()));
                }
            }
            UiAction::Search(query) => {
                self.state.search.generation += 1;
                // A query still running for an older generation stops now.
                self.channels.search_latest.store(self.state.search.generation, std::sync::atomic::Ordering::Relaxed);
                self.state.search.query = query.clone();
                if query.trim().is_empty() {
                    self.state.search.hits.clear();
                    self.state.search.status = None;
                } else {
                    let command = crate::memory::search_worker::SearchCommand::Query { generation: self.state.search.generation, query, filters: Default::default() };
                    if self.channels.search.try_send(command).is_err() {
                        self.state.search.status = Some("search is busy; keep typing".into());
                    }
                }
            }
            UiAction::AskForgetEverything => {
                let paths = self.paths();
                let (tx, rx) = crossbeam_channel::bounded(1);
                let spawned = std::thread::Builder::new().name("forget-list".into()).spawn(move || {
                    let inventory = crate::commands::forget::inventory(&paths);
                    let _ = tx.send(match inventory.refusal.clone() {
                        Some(reason) => Err(reason),
                        None => Ok(inventory.describe()),
                    });
                });
                match spawned {
                    Ok(_) => {
                        self.state.forget = Some(None);
                        self.forget_list = Some(rx);
                    }
                    Err(err) => self.state.notice(format!("cannot list what cowork keeps: {err}")),
                }
            }
            UiAction::CancelForget => self.state.forget = None,
            UiAction::ForgetEverything => {
                // The workers stop and the window closes first; main removes it all then.
                self.options.forget_on_exit.store(true, std::sync::atomic::Ordering::SeqCst);
                // A download would go on writing into the folder being removed.
                self.handle_action(UiAction::SetupCancelDownload);
                self.state.notice("forgetting everything: cowork quits and removes what it keeps");
                self.state.shutting_down = true;
            }
            UiAction::DeleteRecent { span_millis } => {
                let now = now_millis();
                self.send_store(crate::erase::delete_range_command(now - span_millis, now + 1, None, self.channels.bus.narrow()));
            }
            UiAction::ExportToday(format) => {
                let now = now_millis();
                let extension = match format {
                    crate::export::Format::JsonLines => "jsonl",
                    crate::export::Format::ActivityWatch => "json",
                };
                let path = self.options.export_dir.join(format!("cowork-export-{}.{extension}", crate::ids::rfc3339(now).replace(':', "-")));
                self.send_store(crate::export::export_command(format, local_day_start_millis(now), now + 1, path));
            }
            UiAction::OpenHit(hit) => self.open_source(hit.stream, hit.open_id, &hit.title),
            UiAction::PinFact { file, text } => match crate::memory::hot::clean(&text) {
                Ok(text) => self.send_store(crate::memory::commands::add_fact(file, text, "user".into(), self.channels.bus.narrow())),
                Err(err) => self.state.notice(err),
            }
            UiAction::UnpinFact(memory_id) => self.send_store(crate::memory::commands::remove_fact(memory_id, self.channels.bus.narrow())),
            UiAction::PinToThread { stream, source_id } => match self.state.current_thread {
                Some(thread_id) => self.send_store(crate::memory::commands::pin(thread_id, stream, source_id, self.channels.bus.narrow())),
                None => self.state.notice("open or start a chat first: pins belong to a chat"),
            }
            UiAction::UnpinFromThread { stream, source_id } => {
                if let Some(thread_id) = self.state.current_thread {
                    self.send_store(crate::memory::commands::unpin(thread_id, stream, source_id, self.channels.bus.narrow()));
                }
            }
            UiAction::SummariseNow => {
                if self.channels.agent.try_send(AgentCommand::Summarise { limit: 6, reply: None }).is_err() {
                    self.state.notice("the agent worker is busy or not running");
                }
            }
            UiAction::RetryEmbedding => {
                if self.channels.embed.try_send(crate::memory::embed_worker::EmbedCommand::RetryFailed).is_err() {
                    self.state.notice("the embed worker is busy or not running");
                }
            }
            UiAction::ShowDays { start_millis, days } => {
                self.state.day = crate::state::DayView { span: crate::capture::events::Days { start_millis, days, ..Default::default() }, project: self.state.day.project.take(), ..Default::default() };
                self.send_store(crate::capture::db::load_days(start_millis, days, self.channels.bus.narrow()));
            }
            UiAction::WriteRecap { week, at_millis } => {
                let period = if week { crate::day::recap::Period::Week } else { crate::day::recap::Period::Day };
                let command = AgentCommand::Recap { period, at_millis, instructions: String::new(), reply: None };
                if self.channels.agent.try_send(command).is_err() {
                    self.state.notice("the agent worker is busy or not running");
                } else {
                    self.state.day.writing_recap = true;
                }
            }
            UiAction::FilterProject(project) => self.state.day.project = project,
            UiAction::ToggleSession(session_id) => {
                if self.state.open_session.as_ref().is_some_and(|s| s.session_id == session_id) {
                    self.state.open_session = None;
                } else {
                    self.state.open_session = Some(crate::state::SessionDetailView { session_id, ..Default::default() });
                    self.send_store(crate::capture::db::load_session_detail(session_id, self.channels.bus.narrow()));
                }
            }
            other => tracing::error!(action = ?other, "an action reached the wrong handler"),
        }
    }

    /// Files to attach: the chooser, and reading them.
    fn documents_action(&mut self, action: UiAction) {
        match action {
            UiAction::Detach(index) => {
                if index < self.state.attachments.len() {
                    self.state.attachments.remove(index);
                }
            }
            UiAction::ChooseFiles => {
                let tx = self.documents.0.clone();
                let spawned = std::thread::Builder::new().name("file-chooser".into()).spawn(move || {
                    let _ = tx.send(DocumentEvent::Chosen(choose_files()));
                });
                if let Err(err) = spawned {
                    self.state.notice(format!("cannot open the file chooser: {err}"));
                }
            }
            UiAction::BrowseFiles(None) => self.state.file_browser = None,
            UiAction::BrowseFiles(Some(dir)) => {
                let browser = crate::state::FileBrowser::list(&dir);
                self.state.file_browser = Some(browser);
            }
            UiAction::AttachFiles(paths) => {
                self.state.file_browser = None;
                for path in paths.into_iter().take(20) {
                    if path.is_dir() {
                        self.state.notice(format!("{} is a folder; attach the files in it", path.display()));
                        continue;
                    }
                    self.read_for_chat(path);
                }
            }
            other => tracing::error!(action = ?other, "an action reached the wrong handler"),
        }
    }

    /// Tabs, settings, the first run, the desktop and worker retries.
    fn settings_action(&mut self, action: UiAction) {
        match action {
            UiAction::SwitchTab(tab) => {
                if tab == Tab::Settings {
                    // Rules and the audit log as they are now; an approval may have added a rule.
                    self.send_agent_command(AgentCommand::Overview);
                    // And the microphones plugged in now.
                    let _ = self.channels.audio.try_send(crate::audio::worker::AudioCommand::ListDevices);
                }
                if tab == Tab::Apps {
                    // The installed apps as they are now (`cowork apps` may have changed them).
                    let _ = self.channels.apps.try_send(crate::apps::AppsCommand::List);
                }
                self.state.tab = Some(tab);
            }
            UiAction::RetryWorker(worker) => {
                if let Some((_, control)) = self.channels.controls.iter().find(|(w, _)| *w == worker)
                    && control.try_send(Control::Retry).is_err()
                {
                    self.state.notice(format!("cannot reach the {worker} supervisor"));
                }
            }
            UiAction::OpenQuickPrompt => {
                if !self.state.quick_prompt_open {
                    self.place_quick_prompt();
                }
                self.state.quick_prompt_open = true;
                self.quick.focus_requested = false;
                // Load the model and prefill the shared prompt head while the user types.
                if self.state.settings.prefer == crate::brains::Preference::Local {
                    let _ = self.channels.agent.try_send(AgentCommand::Prepare);
                }
            }
            UiAction::CloseQuickPrompt => self.state.quick_prompt_open = false,
            UiAction::SaveSetting { key, value } => {
                self.state.apply(AppEvent::Store(StoreEvent::Setting { key: key.clone(), value: value.clone() }), now_millis());
                if key == keys::AFK_SECS && !self.state.setting_warnings.iter().any(|w| w.contains(&key)) {
                    let _ = self.channels.capture.try_send(CaptureCommand::SetAfkSecs(self.state.settings.afk_secs));
                }
                if [keys::RECORD_WINDOWS, keys::RECORD_KEYS, keys::RECORD_CLIPBOARD, keys::STREAMS_CONFIRMED].contains(&key.as_str()) || key.starts_with("capture.screen.") {
                    self.apply_stream_switches();
                }
                if key.starts_with("voice.") {
                    let _ = self.channels.speech.try_send(crate::audio::worker::SpeechCommand::Configure(crate::audio::worker::SpeechConfig::from_settings(&self.state.settings)));
                    let device = Some(self.state.settings.voice.device.clone()).filter(|d| !d.is_empty());
                    let _ = self.channels.audio.try_send(crate::audio::worker::AudioCommand::SetDevice(device));
                }
                if key == keys::OFFLINE {
                    crate::net::OutboundGate::global().set_offline(self.state.settings.offline);
                }
                if key == keys::DESKTOP_ACCESSIBILITY {
                    let on = self.state.settings.desktop_accessibility;
                    let _ = self.channels.a11y.try_send(crate::capture::A11yCommand::SetDesktopAccessibility(on));
                }
                if key.starts_with("listen.") || key == keys::VOICE_DEVICE || keys::PRIVACY.contains(&key.as_str()) {
                    let plan = crate::audio::listen::ListenPlan::from_settings(&self.state.settings);
                    let _ = self.channels.listen.try_send(crate::audio::listen::ListenCommand::Configure(plan));
                }
                if key.starts_with("notify.") {
                    let _ = self.channels.notify.try_send(crate::notify::NotifyCommand::SetPolicy(crate::workers::notify_policy(&self.state.settings)));
                }
                if keys::PRIVACY.contains(&key.as_str()) {
                    let _ = self.channels.capture.try_send(CaptureCommand::SetRules(self.state.settings.rules()));
                    if let Some(tray) = &self.tray {
                        tray.set_paused(self.state.settings.privacy.paused);
                    }
                }
                self.send_store(crate::store::setting_write(key, value));
            }
            UiAction::SetAutostart(on) => {
                use crate::desktop::autostart;
                let entry = self.options.autostart_entry.clone().or_else(autostart::entry_path);
                let data_dir = self.data_dir_arg();
                let program = std::env::current_exe();
                let done = match (&entry, program) {
                    (Some(entry), Ok(program)) => autostart::set_at(entry, on, &program, data_dir.as_deref()),
                    (None, _) => Err("no home folder to keep the autostart entry in".to_owned()),
                    (_, Err(err)) => Err(format!("cannot find this program: {err}")),
                };
                match done {
                    Ok(said) => self.state.notice(said),
                    Err(err) => self.state.notice(format!("start at login: {err}")),
                }
                self.state.setup.autostart = entry.is_some_and(|entry| autostart::enabled_at(&entry) && autostart::targets(&entry, data_dir.as_deref()));
            }
            UiAction::OpenSetup => {
                self.setup = crate::ui::setup::SetupPanel::default();
                self.state.setup.open = true;
            }
            UiAction::FinishSetup => {
                self.state.setup.open = false;
                self.handle_action(UiAction::SaveSetting { key: keys::SETUP_DONE.to_owned(), value: "true".to_owned() });
            }
            UiAction::GnomeExtension { install } => {
                // One gsettings call and three small files: done here, once, on the user's click.
                let done = if install { crate::desktop::gnome::install_here(None) } else { crate::desktop::gnome::remove_here() };
                match done {
                    Ok(said) => self.state.notice(said.replace('\n', " ")),
                    Err(err) => self.state.notice(format!("cowork's GNOME extension: {err}")),
                }
            }
            UiAction::GnomeShortcuts { add } => {
                let settings = &self.state.settings;
                let done = if add {
                    crate::desktop::gnome::add_shortcuts_here(&settings.quick_prompt_hotkey, &settings.pause_hotkey, &settings.voice.hotkey)
                } else {
                    crate::desktop::gnome::remove_shortcuts_here()
                };
                match done {
                    Ok(said) => self.state.notice(said),
                    Err(err) => self.state.notice(format!("GNOME's keyboard settings: {err}")),
                }
            }
            UiAction::TogglePause => {
                let paused = !self.state.settings.privacy.paused;
                self.state.notice(if paused { "capture paused: nothing is recorded" } else { "capture resumed" });
                self.handle_action(UiAction::SaveSetting { key: keys::PAUSED.to_owned(), value: paused.to_string() });
            }
            other => tracing::error!(action = ?other, "an action reached the wrong handler"),
        }
    }

    /// Opens what a citation or search result points at: the thread of a chat
    /// message, the Memory view for a summary, else the capture session.
    fn open_source(&mut self, stream: crate::memory::search::Stream, open_id: Option<i64>, what: &str) {
        match (stream, open_id) {
            (crate::memory::search::Stream::Chat, Some(thread_id)) => self.handle_action(UiAction::SelectThread(thread_id)),
            (crate::memory::search::Stream::Summary, _) => self.state.tab = Some(crate::state::Tab::Settings),
            (_, Some(session_id)) => {
                self.state.tab = Some(crate::state::Tab::Context);
                self.state.open_session = Some(crate::state::SessionDetailView { session_id, ..Default::default() });
                self.send_store(crate::capture::db::load_session_detail(session_id, self.channels.bus.narrow()));
            }
            (_, None) => self.state.notice(format!("{what} is no longer in your history")),
        }
    }

    /// Tells each stream whether it records, from the settings (nothing before the first-run answer).
    fn apply_stream_switches(&mut self) {
        let s = &self.state.settings;
        let allowed = s.streams_confirmed;
        let _ = self.channels.capture.try_send(CaptureCommand::SetRecording(allowed && s.record_windows));
        let _ = self.channels.keys.try_send(crate::capture::keys::KeysCommand::SetRecording(allowed && s.record_keys));
        let _ = self
            .channels
            .clipboard
            .try_send(crate::capture::clipboard::ClipboardCommand::SetRecording(allowed && s.record_clipboard));
        let plan = s.screen.plan(allowed);
        self.channels.screen_latest.set_plan(plan);
        let _ = self.channels.screen.try_send(crate::capture::screen_worker::ScreenCommand::Configure(plan));
    }

    fn send_message(&mut self, text: String) {
        if self.state.generating.is_some() {
            self.state.notice("wait for the current answer, or stop it");
            return;
        }
        let (thread, thread_is_new, user_message_id, answer_id) =
            self.state.begin_exchange(&text, now_millis(), next_id);
        // The first message of a chat an app opened: the chat is that app's (its data goes with it).
        if let Some(app_id) = self.state.chat_from_app.take()
            && thread_is_new
        {
            self.send_apps(crate::apps::AppsCommand::LinkThread { app_id, thread_id: thread.thread_id });
        }
        let request = ChatRequest {
            history: self.state.history_before_last_exchange(),
            agent: self.state.settings.agent,
            attachments: self.state.attachments.clone(),
            text_origin: self.chat.draft_origin.take(),
            ..ChatRequest::new(thread, thread_is_new, user_message_id, answer_id, text)
        };
        let _ = answer_id;
        // Attachments stay for another try when the request did not go.
        if self.send_agent(request) {
            self.state.attachments.clear();
        }
    }

    fn refresh_network_view(&mut self) {
        let keys = std::mem::take(&mut self.settings.network.keys);
        let store = std::mem::take(&mut self.settings.network.secret_store);
        let fresh = network_view(&self.options.export_dir, &Ok(self.providers.clone()));
        self.settings.network.providers = fresh.providers;
        self.settings.network.providers_error = None;
        self.settings.network.keys = if fresh.keys.is_empty() { keys } else { fresh.keys };
        self.settings.network.secret_store = if fresh.secret_store.is_empty() { store } else { fresh.secret_store };
    }

    fn send_agent_command(&mut self, command: AgentCommand) {
        match self.channels.agent.try_send(command) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.state.notice("the agent worker is busy; try again in a moment"),
            Err(TrySendError::Disconnected(_)) => self.state.notice("the agent worker is not running"),
        }
    }

    fn send_apps(&mut self, command: crate::apps::AppsCommand) {
        match self.channels.apps.try_send(command) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.state.notice("apps are busy; try again in a moment"),
            Err(TrySendError::Disconnected(_)) => self.state.notice("apps are not running"),
        }
    }

    /// Whether the command went (if not, the user is told why).
    fn send_automations(&mut self, command: crate::automations::AutomationsCommand) {
        match self.channels.automations.try_send(command) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.state.notice("automations are busy; try again in a moment"),
            Err(TrySendError::Disconnected(_)) => self.state.notice("automations are not running"),
        }
    }

    fn send_mcp(&mut self, command: crate::mcp::worker::McpCommand) -> bool {
        match self.channels.mcp.try_send(command) {
            Ok(()) => return true,
            Err(TrySendError::Full(_)) => self.state.notice("the MCP worker is busy; try again in a moment"),
            Err(TrySendError::Disconnected(_)) => self.state.notice("the MCP worker is not running"),
        }
        false
    }

    /// Whether the request went (if not, its answer says why).
    fn send_agent(&mut self, request: ChatRequest) -> bool {
        let answer_id = request.answer_id;
        match self.channels.agent.try_send(AgentCommand::Chat(request)) {
            Ok(()) => {
                // What the user said before this may be a line for their profile.
                self.send_store(crate::memory::commands::profile_proposals(self.channels.bus.narrow()));
                return true;
            }
            Err(TrySendError::Full(_)) => self.state.fail_answer(answer_id, "the agent worker is busy; try again in a moment".into()),
            Err(TrySendError::Disconnected(_)) => self.state.fail_answer(answer_id, "the agent worker is not running".into()),
        }
        false
    }

    /// The user chose whether captured context may go to the provider; the
    /// question is sent again with that choice (stored unless "this time").
    fn answer_consent(&mut self, choice: crate::state::ConsentChoice) {
        use crate::state::ConsentChoice;
        let Some(prompt) = self.state.pending_consent.take() else { return };
        let value = match choice {
            ConsentChoice::Always => Some("always"),
            ConsentChoice::Never => Some("never"),
            ConsentChoice::Once => None,
        };
        if let Some(value) = value {
            self.handle_action(UiAction::SaveSetting { key: crate::config::consent_key(&prompt.provider), value: value.to_owned() });
        }
        let mut request = prompt.request;
        request.consent_once = choice == ConsentChoice::Once;
        if value.is_some() {
            // The worker reads the choice from the database: make sure it is there first.
            let (ack, done) = crossbeam_channel::bounded(1);
            if self.channels.store.send_timeout(StoreCommand::Flush(ack), Duration::from_secs(1)).is_ok() {
                let _ = done.recv_timeout(Duration::from_secs(2));
            }
            request.consent_once = choice == ConsentChoice::Always;
        }
        let _ = self.send_agent(request);
    }

    /// "Retry with a smarter model": the next tier up, with what it may cost.
    fn offer_retry(&mut self, answer_id: i64) {
        use crate::brains::router::{RouteInput, Target, route};
        use crate::memory::tokens::estimate_tokens;
        let Some(answer) = self.state.messages.iter().find(|m| m.message_id == answer_id) else { return };
        let settings = &self.state.settings;
        let from = match answer.answered_by.as_deref().map(|by| by.split(" · ").next().unwrap_or(by)) {
            None | Some("local") => Target::Local,
            Some(name) => settings.tiers.iter().position(|t| t == name).map(Target::Cloud).unwrap_or(Target::Local),
        };
        let offline = crate::net::OutboundGate::global().is_offline();
        let tiers: Vec<crate::brains::ProviderConfig> = settings
            .tiers
            .iter()
            .filter_map(|name| self.providers.get(name).cloned())
            .filter(|p| !offline || crate::net::host_of_url(&p.base_url).is_some_and(|h| crate::net::is_loopback(&h)))
            .collect();
        let question = answer.ask_id.and_then(|ask| self.state.messages.iter().find(|m| m.message_id == ask)).map(|m| m.content.clone()).unwrap_or_default();
        let input = RouteInput {
            preference: settings.prefer,
            prompt_tokens: estimate_tokens(&question) + settings.context_budget_tokens,
            attachments: 0,
            tools_needed: 0,
            try_harder_from: Some(from),
            local_limit_tokens: crate::llm::LOCAL_LIMIT_TOKENS,
            local_available: true,
            cloud_tiers: tiers.len(),
        };
        match route(&input) {
            Ok(route) => {
                let Target::Cloud(tier) = route.target else { return };
                let provider = &tiers[tier];
                let estimate = crate::brains::budget::estimate(provider, input.prompt_tokens as u64, settings.max_answer_tokens as u64);
                self.state.retry_offer = Some(crate::state::RetryOffer {
                    answer_id,
                    target: from,
                    label: format!("{} · {}", provider.name, provider.model),
                    estimate_usd: estimate.usd,
                });
            }
            Err(err) => self.state.notice(if tiers.is_empty() {
                "no cloud tier is configured (Settings, Network, cloud tiers), or offline mode is on".to_owned()
            } else {
                err.to_string()
            }),
        }
    }

    fn send_retry(&mut self) {
        let Some(offer) = self.state.retry_offer.take() else { return };
        if self.state.generating.is_some() {
            return;
        }
        let Some(answer) = self.state.messages.iter().find(|m| m.message_id == offer.answer_id) else { return };
        let Some(ask_id) = answer.ask_id else { return };
        let Some(question_at) = self.state.messages.iter().position(|m| m.message_id == ask_id) else { return };
        let Some(thread) = self.state.current_thread.and_then(|id| self.state.threads.iter().find(|t| t.thread_id == id)).cloned() else { return };
        let text = self.state.messages[question_at].content.clone();
        let history = self.state.messages[..question_at]
            .iter()
            .filter(|m| m.status != Some(crate::records::MessageStatus::Failed) && !m.content.is_empty())
            .map(|m| (m.role, m.content.clone()))
            .collect();
        let answer_id = next_id();
        // The new answer goes right after the last answer to this question.
        let at = self.state.messages.iter().rposition(|m| m.ask_id == Some(ask_id)).map_or(self.state.messages.len(), |i| i + 1);
        self.state.messages.insert(at, crate::state::MessageView::pending_answer(answer_id, ask_id));
        self.state.generating = Some(answer_id);
        // Attachments are not stored with the question: a retry goes without them.
        let _ = self.send_agent(ChatRequest {
            history,
            try_harder_from: Some(offer.target),
            is_retry: true,
            agent: self.state.settings.agent,
            ..ChatRequest::new(thread, false, ask_id, answer_id, text)
        });
    }

    fn send_store(&mut self, command: StoreCommand) {
        match self.channels.store.try_send(command) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.state.notice("the store is busy; the change was not saved"),
            Err(TrySendError::Disconnected(_)) => self.state.notice("the store is not running"),
        }
    }

    /// Remembers the sidebar's position and size (saved at most every 2 s).
    fn track_geometry(&mut self, ctx: &egui::Context, force: bool) {
        let rect = ctx.input(|i| i.viewport().outer_rect);
        if let Some(rect) = rect {
            let geometry = [rect.min.x, rect.min.y, rect.width(), rect.height()];
            let changed = self.geometry.is_none_or(|g| g.iter().zip(geometry).any(|(a, b)| (a - b).abs() > 0.5));
            if changed && (force || self.geometry_saved_at.elapsed() >= GEOMETRY_SAVE_INTERVAL) {
                self.geometry = Some(geometry);
                self.geometry_saved_at = Instant::now();
                let value = geometry.map(|v| format!("{v:.0}")).join(",");
                let _ = self.channels.store.try_send(crate::store::setting_write(keys::SIDEBAR_GEOMETRY.into(), value));
            }
        }
    }

    fn screenshot_step(&mut self, ctx: &egui::Context) {
        let Some(path) = self.options.screenshot.clone() else { return };
        if self.screenshot_done.load(Ordering::SeqCst) {
            ctx.send_viewport_cmd(ViewportCommand::Close);
        } else if !self.screenshot_requested && self.frames >= 10 {
            // A few frames in, fonts and the first events have landed.
            self.screenshot_requested = true;
            let done = self.screenshot_done.clone();
            let wake = ctx.clone();
            let callback = egui::ScreenshotCallback::new(move |image| {
                match write_png(&path, &image) {
                    Ok(()) => tracing::info!(path = %path.display(), "screenshot written"),
                    Err(err) => tracing::error!(error = %format!("{err:#}"), "screenshot failed"),
                }
                done.store(true, Ordering::SeqCst);
                wake.request_repaint();
            });
            ctx.send_viewport_cmd(ViewportCommand::Screenshot(callback));
        }
        ctx.request_repaint();
    }
}

fn write_png(path: &std::path::Path, image: &egui::ColorImage) -> anyhow::Result<()> {
    let file = std::fs::File::create(path)?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), image.size[0] as u32, image.size[1] as u32);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(image.as_raw())?;
    Ok(())
}

impl eframe::App for CoworkApp {
    fn logic(&mut self, ctx: &egui::Context, _frame: &mut eframe::Frame) {
        self.drain_events(ctx);
        self.take_task_answers(ctx);
        self.take_transcript();
        let mic = self.state.mic_open();
        if mic != self.tray_mic {
            self.tray_mic = mic;
            if let Some(tray) = &self.tray {
                tray.set_microphone(mic);
            }
        }
        let waiting = self.state.waiting_count();
        if waiting != self.tray_waiting {
            self.tray_waiting = waiting;
            if let Some(tray) = &self.tray {
                tray.set_waiting(waiting);
            }
        }
        // Typing into cowork pauses embedding (it yields the CPU to the UI).
        if ctx.input(|i| i.events.iter().any(|e| matches!(e, egui::Event::Text(_) | egui::Event::Key { pressed: true, .. }))) {
            self.channels.typing_at_millis.store(crate::ids::now_millis(), std::sync::atomic::Ordering::Relaxed);
        }
        let mut actions = shortcuts::consume(ctx);
        if ctx.input_mut(|i| i.consume_shortcut(&KeyboardShortcut::new(Modifiers::COMMAND | Modifiers::SHIFT, Key::R))) {
            for worker in WorkerName::ALL {
                if matches!(self.state.worker_state(worker), crate::runtime::WorkerState::Failed { .. }) {
                    actions.push(UiAction::RetryWorker(worker));
                }
            }
        }
        for action in actions {
            self.handle_action(action);
        }
        self.track_geometry(ctx, false);
        if self.options.start_hidden && self.frames == 0 && !self.show_requested {
            ctx.send_viewport_cmd(ViewportCommand::Visible(false));
        }
        if std::mem::take(&mut self.show_requested) {
            ctx.send_viewport_cmd(ViewportCommand::Visible(true));
            ctx.send_viewport_cmd(ViewportCommand::Minimized(false));
            ctx.send_viewport_cmd(ViewportCommand::Focus);
        }
        if self.state.shutting_down {
            ctx.send_viewport_cmd(ViewportCommand::Close);
        }
        if self.frames == 2 {
            // eframe maps the window only after its first frame, and openbox (like
            // other window managers) drops a state set before mapping: ask again.
            ctx.send_viewport_cmd(ViewportCommand::WindowLevel(egui::WindowLevel::AlwaysOnTop));
        }
        self.screenshot_step(ctx);
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.frames += 1;
        theme::apply(ui.ctx(), &self.state.settings.theme, self.state.desktop_dark);
        if self.frames == 1
            && let Some(started) = self.options.process_started
        {
            tracing::info!(first_frame_millis = started.elapsed().as_millis() as u64, "first frame");
        }
        let now = now_millis();
        if self.state.tab() == Tab::Context && self.state.day.stale {
            self.state.day.attribute(&self.state.settings.projects, now);
        }
        let mut actions = Vec::new();
        // A prompt its server filled in goes into the chat input, to edit and send.
        if let Some((text, origin)) = self.state.prompt_fill.take() {
            self.chat.draft = text;
            self.chat.draft_origin = Some(origin);
        }
        // Emptied, the input holds only what the user types from here on.
        if self.chat.draft.trim().is_empty() {
            self.chat.draft_origin = None;
        }
        let state = &self.state;
        // The first run's pages, once what cowork records is answered.
        let setup = state.setup.open && state.settings.streams_confirmed;

        if !setup {
            egui::Panel::top("tabs").show(ui, |ui| {
                ui.horizontal(|ui| {
                    let waiting = state.waiting_count();
                    for tab in Tab::ALL {
                        let label = if tab == Tab::Chat && waiting > 0 { format!("{} ({waiting})", tab.label()) } else { tab.label().to_owned() };
                        if ui.selectable_label(state.tab() == tab, label).clicked() {
                            actions.push(UiAction::SwitchTab(tab));
                        }
                    }
                });
            });
        }
        if !state.settings.streams_confirmed {
            let consent = &mut self.consent;
            egui::Panel::top("consent").show(ui, |ui| crate::ui::consent::consent_ui(ui, consent, &mut actions));
        }
        egui::Panel::bottom("status").show(ui, |ui| status_bar_ui(ui, state, &mut actions));
        egui::CentralPanel::default_margins().show(ui, |ui| match state.tab() {
            _ if setup => crate::ui::setup::setup_ui(ui, state, &self.models, &self.options.export_dir, &mut self.setup, &mut actions),
            Tab::Chat => chat_ui(ui, state, &mut self.chat, &mut actions),
            Tab::Context => context_ui(ui, state, &mut self.search_box, now, &mut actions),
            Tab::Apps => apps_ui(ui, state, &mut self.apps, now, &mut actions),
            Tab::Settings => {
                self.settings.network.log = crate::net::OutboundGate::global().log();
                settings_ui(ui, state, &self.models, &mut self.settings, &mut actions)
            }
        });

        if state.quick_prompt_open {
            let quick = &mut self.quick;
            let builder = ViewportBuilder::default()
                .with_title("cowork quick prompt")
                .with_inner_size(theme::QUICK_PROMPT_SIZE)
                .with_window_level(egui::WindowLevel::AlwaysOnTop)
                .with_resizable(false);
            ui.ctx().show_viewport_immediate(ViewportId::from_hash_of("quick_prompt"), builder, |ui, _class| {
                egui::CentralPanel::default_margins().show(ui, |ui| {
                    ui.label(RichText::new("Enter sends to the sidebar chat · Esc hides").small().color(theme::muted()));
                    quick_prompt_ui(ui, quick, &state.voice, &mut actions);
                });
                if ui.ctx().input(|i| i.viewport().close_requested()) {
                    actions.push(UiAction::CloseQuickPrompt);
                }
            });
        }

        theme::focus_ring_ui(ui.ctx(), &mut self.keyboard_driving);
        for action in actions {
            self.handle_action(action);
        }
        // Durations on the Context tab and an approval card's countdown tick
        // once a second; elsewhere the UI sleeps until a worker event or input wakes it.
        if self.state.tab() == Tab::Context || (self.state.tab() == Tab::Chat && self.state.waiting_calls().next().is_some()) {
            ui.ctx().request_repaint_after(Duration::from_secs(1));
        }
    }
}
