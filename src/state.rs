//! `AppState`: everything the UI shows, updated only by `apply(AppEvent)` (one
//! `apply_*` per domain) and by the app's handling of `UiAction`s, which are
//! defined here too. No egui types: tested like a reducer.

use std::collections::BTreeMap;

use crate::agent::events::AgentEvent;
use crate::capture::events::CaptureEvent;
use crate::config::Settings;
use crate::desktop::events::DesktopEvent;
use crate::events::AppEvent;
use crate::ids::local_day_start_millis;
use crate::llm::events::{LocalModelEvent, ModelStatus};
use crate::mcp::events::McpEvent;
use crate::memory::events::MemoryEvent;
use crate::models::events::ModelsEvent;
use crate::records::{ActiveWindow, ActivitySession, ChatMessage, ChatThread, GenerationStats, MessageStatus, Role};
use crate::runtime::{RuntimeEvent, WorkerName, WorkerState};
use crate::store::events::StoreEvent;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    Chat,
    Context,
    Apps,
    Settings,
}

impl Tab {
    pub const ALL: [Tab; 4] = [Tab::Chat, Tab::Context, Tab::Apps, Tab::Settings];

    pub fn label(self) -> &'static str {
        match self {
            Tab::Chat => "Chat",
            Tab::Context => "Context",
            Tab::Apps => "Apps",
            Tab::Settings => "Settings",
        }
    }
}

/// What a view asks the app to do.
#[derive(Clone, Debug, PartialEq)]
pub enum UiAction {
    /// Settings → Web search: keep the provider's key in the secret store.
    SaveSearchKey { provider: String, key: String },
    /// Settings → Calendar: keep a CalDAV account's password or token (`calendar:USER@HOST`) in the secret store.
    SaveCalendarPassword { name: String, secret: String },
    /// Settings → Calendar: read every calendar now.
    RefreshCalendar,
    /// Chat: ask the desktop's file chooser for documents to attach.
    ChooseFiles,
    /// Chat, without a desktop file chooser: the sidebar's own file browser at this folder (None closes it).
    BrowseFiles(Option<std::path::PathBuf>),
    /// Chat: read these files and attach them (dropped, or chosen).
    AttachFiles(Vec<std::path::PathBuf>),
    /// Chat: put back what an agent task changed on disk.
    Undo(i64),
    /// Memory: a line proposed for the profile, added (`accept`) or dismissed for good.
    ProfileProposal { text: String, accept: bool },
    /// Chat: the user's answer to a proposed change of the pinned facts (confirm, or keep things as they are).
    MemoryChange { answer_id: i64, confirm: bool },
    /// Chat: save an answer as a document (docx or pdf) in the Documents folder.
    ExportAnswer { answer_id: i64, extension: &'static str },
    /// Settings → Desktop: install cowork's GNOME Shell extension (the user consented) or remove it.
    GnomeExtension { install: bool },
    /// Settings → Desktop: add cowork's hotkeys to GNOME's custom shortcuts, or remove them.
    GnomeShortcuts { add: bool },
    /// Apps → Automations: run a flow now (a manual run, no inputs).
    AutomationRun(String),
    AutomationEnable { name: String, enabled: bool },
    /// Run again with the same trigger data as this run.
    AutomationRerun(i64),
    AutomationCancel(i64),
    /// Describe it: the agent drafts a flow from these words.
    DraftFlow(String),
    /// Save a flow (JSON, as reviewed and edited).
    SaveFlow(String),
    /// Apps: read a package and show what it can do (the install dialog).
    AppsInspect(std::path::PathBuf),
    AppsForgetInspection,
    /// The agent drafts an app without code from these words.
    DraftApp(String),
    /// Show the install dialog for a drafted manifest (as reviewed and edited).
    AppsInspectDraft(String),
    /// Install (or update) the inspected package with these grants.
    AppsInstall { path: std::path::PathBuf, granted: Vec<crate::apps::Capability> },
    AppsEnable { app_id: String, enabled: bool },
    AppsRemove(String),
    /// Open an app (or draw it again).
    AppOpen(String),
    AppClose(String),
    /// A message for the app's `handle` (a button, a form).
    AppAct { app_id: String, message: String },
    /// An app's "open a chat": a new chat with this text to send.
    AppChat { app_id: String, text: String },
    /// An app's "open a URL", after the user said yes.
    AppOpenUrl(String),
    /// Apps → Inbox: Accept, Open or Dismiss, as on the desktop.
    InboxAct { notification_id: i64, act: crate::notify::Act },
    /// Settings → Integrations: change mcp-servers.json.
    McpEdit(crate::mcp::config::McpEdit),
    McpReconnect(String),
    McpStop(String),
    McpTest(String),
    /// Add a server made from the integrations catalog (tested first).
    McpAddFromCatalog { id: String, values: std::collections::BTreeMap<String, String>, trusted: bool },
    /// Ask a configured provider (by name) which models it offers, or a provider
    /// being set up in the first run with the key typed there.
    ListModels { name: String, draft: Option<(crate::brains::ProviderConfig, String)> },
    /// Answer with another of a configured provider's models.
    SetProviderModel { provider: String, model: String },
    /// OAuth: sign in to an HTTP server in the browser, or forget the sign-in.
    McpSignIn(String),
    McpSignOut(String),
    /// The user's answer for a client of `cowork mcp serve`.
    McpClientDecision { name: String, allow: bool },
    /// The user's answer to an MCP server's request for input.
    Elicited { id: i64, answer: crate::mcp::elicit::Answer },
    /// Read an MCP resource and attach it to the next message.
    AttachResource { server: String, uri: String, name: String },
    /// Take an attachment off the next message.
    Detach(usize),
    /// Fill in an MCP prompt (`/name`) for the chat input.
    UsePrompt(crate::mcp::slash::Use),
    /// Settings → Models: answer with this chat model (None: the default for this machine).
    ChooseChatModel(Option<crate::config::ResolvedModel>),
    /// Settings → Models: check and add a GGUF file the user has.
    AddModel(std::path::PathBuf),
    SendMessage(String),
    Stop,
    NewThread,
    SelectThread(i64),
    /// Delete a conversation with everything in it (the chat asked first).
    DeleteThread(i64),
    SwitchTab(Tab),
    RetryWorker(WorkerName),
    OpenQuickPrompt,
    CloseQuickPrompt,
    /// A microphone button: start talking into this input, or stop and transcribe.
    VoiceToggle(crate::audio::events::VoiceTarget),
    /// Esc while recording: close the microphone and forget what was said.
    VoiceCancel,
    SaveSetting { key: String, value: String },
    LoadModel,
    /// Open (or close) a session in the Context panel.
    ToggleSession(i64),
    /// Show these days in the timeline: from a local midnight, 1 or 7 days.
    ShowDays { start_millis: i64, days: u32 },
    /// Write the recap of the day (or the week) shown now.
    WriteRecap { week: bool, at_millis: i64 },
    /// List only this project's sessions (None: all).
    FilterProject(Option<String>),
    /// Delete everything from this long ago until now.
    DeleteRecent { span_millis: i64 },
    /// Export today's history into the data directory.
    ExportToday(crate::export::Format),
    /// Pause all capture, or resume it (hotkey, tray, status bar).
    TogglePause,
    /// The user's answer to the pending consent prompt.
    Consent(ConsentChoice),
    /// "Retry with a smarter model" on an answer: offer the next tier with its cost.
    TryHarder { answer_id: i64 },
    ConfirmRetry,
    CancelRetry,
    /// Add or replace a provider in providers.json (Settings → Network).
    SaveProvider(crate::brains::ProviderConfig),
    RemoveProvider(String),
    /// Search-as-you-type in the Context panel.
    Search(String),
    /// Download missing or damaged model files (the models worker).
    FetchModels,
    /// The first run's local brain: download these models (the chat model,
    /// then what memory and voice need), from `mirror` when given.
    SetupDownload { names: Vec<String>, chat_model: String, mirror: Option<String> },
    /// Stop the first run's download (what is on disk stays, to resume).
    SetupCancelDownload,
    /// Ask a cloud provider one tiny question with this key; when it answers, keep the key
    /// and save the provider as a cloud tier (first, with `prefer_cloud`).
    TestProvider { provider: crate::brains::ProviderConfig, key: String, prefer_cloud: bool },
    /// Start cowork when the user logs in (the XDG autostart entry), or not.
    SetAutostart(bool),
    /// Settings → Set up again: the first-run pages.
    OpenSetup,
    /// The first run finished or skipped: its pages close for good.
    FinishSetup,
    /// Settings → Your data → Forget everything…: list what would go.
    AskForgetEverything,
    /// Confirmed: cowork quits and removes everything it keeps.
    ForgetEverything,
    CancelForget,
    /// Download, verify and convert an optional model (Settings → Models → Install).
    InstallModel(String),
    /// Delete an optional model's files.
    RemoveModel(String),
    /// Ask the audio worker for the input devices again.
    ListMicrophones,
    /// Store a provider's API key in the secret store (never in settings).
    SaveKey { provider: String, key: String },
    /// A citation under an answer: open its session (capture) or thread (chat).
    OpenCitation(crate::memory::rag::Citation),
    /// A search result: open its session (capture) or thread (chat).
    OpenHit(crate::memory::search::Hit),
    /// 👍 / 👎 on an answer, with why.
    Rate { message_id: i64, rating: i8, reason: String },
    /// Hot memory: pin a fact, or unpin one.
    PinFact { file: crate::memory::hot::File, text: String },
    UnpinFact(i64),
    /// Pin a found row (session, typed text, copy, message, summary) to the
    /// open chat, or take it off: pinned rows come first in its answers.
    PinToThread { stream: crate::memory::search::Stream, source_id: i64 },
    UnpinFromThread { stream: crate::memory::search::Stream, source_id: i64 },
    /// Failed embedding jobs back to pending.
    RetryEmbedding,
    /// Observational memory now: the local model summarises older hours.
    SummariseNow,
    /// The user's decision on an approval card (or answer to a question).
    DecideCall { call_id: i64, choice: crate::agent::events::ApprovalChoice },
    /// A paused operation: go on, or stop.
    ContinueOperation { operation_id: i64, go_on: bool },
    /// Settings → Agent: remove an approval rule.
    RemoveRule(i64),
}

/// A session opened in the Context panel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionDetailView {
    pub session_id: i64,
    pub typed: Vec<(i64, String)>,
    pub copied: Vec<(i64, String)>,
    /// What the screen showed (the screen-text stream).
    pub seen: Vec<(i64, String)>,
    pub loaded: bool,
}

/// The days the Context panel's timeline shows (one, or a week), with what
/// happened in them and the time per project.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DayView {
    /// Which days (from a local midnight, 1 or 7), and what happened in them:
    /// finished sessions oldest first (today's grow as they finish), away
    /// spans, and when the user typed and listen mode heard someone (sorted).
    pub span: crate::capture::events::Days,
    /// Each session's project, in `sessions`' order, and the days' time per project.
    pub projects: Vec<crate::day::projects::Attribution>,
    pub ledger: crate::day::ledger::Ledger,
    pub loaded: bool,
    /// Sessions came since `projects` and `ledger` were worked out (done when the panel is shown).
    pub stale: bool,
    /// Only the sessions of this project are listed.
    pub project: Option<String>,
    /// A recap asked for from the panel is being written.
    pub writing_recap: bool,
    /// What attribution read of each session (kept: a new session is read alone).
    pub prepared: crate::day::projects::Prepared,
}

impl DayView {
    /// The project of `span.sessions[index]` (`UNATTRIBUTED` for none), and why.
    pub fn project_of(&self, index: usize) -> (&str, Option<&crate::day::projects::Why>) {
        match self.projects.get(index) {
            Some(found) => (found.project.as_deref().unwrap_or(crate::day::ledger::UNATTRIBUTED), Some(&found.why)),
            None => (crate::day::ledger::UNATTRIBUTED, None),
        }
    }

    /// The end of the span shown (local midnight after its last day).
    pub fn end_millis(&self) -> i64 {
        (0..self.span.days.max(1)).fold(self.span.start_millis, |day, _| crate::day::ledger::next_midnight(day))
    }

    /// Attributes the sessions again (new sessions, new rules).
    pub fn attribute(&mut self, rules: &str, now_millis: i64) {
        let rules = crate::day::projects::ProjectRules::parse(rules).unwrap_or_default();
        // (The sessions are oldest first, as the ledger wants them: one attribution serves both.)
        let found = crate::day::projects::attribute_with(&mut self.prepared, &self.span.sessions, &rules);
        self.ledger = crate::day::ledger::Ledger::cut(&self.span.sessions, &found, self.span.start_millis, self.end_millis(), now_millis);
        self.projects = found;
        self.stale = false;
    }
}

/// A message as the chat panel shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageView {
    pub message_id: i64,
    pub role: Role,
    pub content: String,
    /// Context attached to a user message, exactly as sent.
    pub context: Option<String>,
    pub status: Option<MessageStatus>,
    pub error: Option<String>,
    pub stats: Option<GenerationStats>,
    /// The question an answer belongs to (retries share it).
    pub ask_id: Option<i64>,
    /// Who answered (`local`, or `provider · model`) and the router's reason.
    pub answered_by: Option<String>,
    pub route_reason: Option<String>,
    pub cost_usd: Option<f64>,
    /// Sources the answer could cite as [n]; each opens its session or message.
    pub citations: Vec<crate::memory::rag::Citation>,
    /// The user's 👍 (+1) / 👎 (-1).
    pub feedback: Option<i8>,
    /// What a reasoning model showed of its thinking (collapsed under the answer; never the answer).
    pub reasoning: String,
}

/// Settings → Memory: hot memory, and what the last question's prompt carried.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryView {
    pub hot: Vec<crate::memory::hot::Fact>,
    pub last_report: Option<crate::memory::synthesis::Report>,
    pub last_recalled: Vec<crate::memory::rag::Item>,
    pub last_dropped: Vec<crate::memory::rag::Item>,
    /// Lines proposed for the profile (added only when the user says so).
    pub profile_proposals: Vec<crate::memory::profile::Proposal>,
}

/// The Context panel's search: the newest query and the results that belong to it.
#[derive(Clone, Debug, Default)]
pub struct SearchView {
    pub generation: u64,
    pub query: String,
    pub hits: Vec<crate::memory::search::Hit>,
    /// "12 results in 3.1 ms", or why there are none.
    pub status: Option<String>,
}

/// Captured context waiting for the user's yes or no before it goes to a provider.
#[derive(Clone, Debug)]
pub struct ConsentPrompt {
    pub provider: String,
    pub reason: String,
    /// Exactly what would be sent (already redacted).
    pub preview: String,
    pub request: crate::agent::ChatRequest,
}

/// The first run's pages and what they are waiting for.
#[derive(Clone, Debug, Default)]
pub struct SetupState {
    /// The pages show (at the first start until finished or skipped; Settings opens them again).
    pub open: bool,
    pub download: Option<SetupDownload>,
    /// The provider whose key is being tried, and its answer (None while it runs).
    pub provider_test: Option<(String, Option<Result<String, String>>)>,
    /// The hotkeys pressed while the pages showed ("try it now").
    pub hotkeys_tried: std::collections::BTreeSet<&'static str>,
    /// Whether cowork starts at login (the autostart entry is there and on).
    pub autostart: bool,
    /// Whether a tray icon is up (starting in the tray needs one).
    pub tray: bool,
}

/// The first run's model download.
#[derive(Clone, Debug)]
pub struct SetupDownload {
    pub names: Vec<String>,
    /// The chat model it brings (chosen as the one to answer with once it is here).
    pub chat_model: String,
    pub cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// How it ended; None while it runs.
    pub outcome: Option<Result<String, String>>,
}

impl SetupDownload {
    pub fn running(&self) -> bool {
        self.outcome.is_none()
    }
}

/// "Retry with a smarter model", waiting for the user to accept its estimated cost.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryOffer {
    pub answer_id: i64,
    pub target: crate::brains::Target,
    pub label: String,
    pub estimate_usd: f64,
}

/// The user's answer to a consent prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsentChoice {
    /// Allow captured context for this provider from now on.
    Always,
    /// Send it with this question only.
    Once,
    /// Never send it to this provider (the question goes without it).
    Never,
}

impl MessageView {
    /// An answer that is about to stream in.
    pub fn pending_answer(answer_id: i64, ask_id: i64) -> Self {
        Self {
            message_id: answer_id,
            role: Role::Assistant,
            content: String::new(),
            context: None,
            status: None,
            error: None,
            stats: None,
            ask_id: Some(ask_id),
            answered_by: None,
            route_reason: None,
            cost_usd: None,
            citations: Vec::new(),
            feedback: None,
            reasoning: String::new(),
        }
    }

    pub fn is_streaming(&self) -> bool {
        self.role == Role::Assistant && self.status.is_none()
    }
}

impl From<ChatMessage> for MessageView {
    fn from(message: ChatMessage) -> Self {
        Self {
            message_id: message.message_id,
            role: message.role,
            content: message.content,
            context: message.context,
            status: Some(message.status),
            error: None,
            stats: None,
            ask_id: message.ask_id,
            answered_by: message.provider,
            route_reason: None,
            cost_usd: message.cost_usd,
            citations: message.citations.as_deref().and_then(|json| serde_json::from_str(json).ok()).unwrap_or_default(),
            feedback: None,
            reasoning: String::new(),
        }
    }
}

/// A folder as the sidebar's own file browser shows it: its folders first,
/// then its files (hidden ones left out), read once when it is opened.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileBrowser {
    pub dir: std::path::PathBuf,
    /// (name, is a folder, size in bytes)
    pub entries: Vec<(String, bool, u64)>,
    pub error: Option<String>,
}

impl FileBrowser {
    /// Entries listed at most (a huge folder shows its first ones and says so).
    pub const MAX_ENTRIES: usize = 500;

    pub fn list(dir: &std::path::Path) -> FileBrowser {
        let mut browser = FileBrowser { dir: dir.to_path_buf(), ..FileBrowser::default() };
        match std::fs::read_dir(dir) {
            Ok(entries) => {
                let mut entries: Vec<(String, bool, u64)> = entries
                    .flatten()
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        let meta = std::fs::metadata(e.path()).ok()?;
                        (!name.starts_with('.')).then(|| (name, meta.is_dir(), meta.len()))
                    })
                    .collect();
                entries.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.to_lowercase().cmp(&b.0.to_lowercase())));
                if entries.len() > Self::MAX_ENTRIES {
                    browser.error = Some(format!("{} entries; the first {} are shown", entries.len(), Self::MAX_ENTRIES));
                    entries.truncate(Self::MAX_ENTRIES);
                }
                browser.entries = entries;
            }
            Err(err) => browser.error = Some(format!("{}: {err}", dir.display())),
        }
        browser
    }
}

#[derive(Clone, Debug, Default)]
pub struct AppState {
    pub tab: Option<Tab>,
    pub workers: BTreeMap<WorkerName, WorkerState>,
    pub active_window: Option<ActiveWindow>,
    pub capture_decision: Option<crate::capture::events::CaptureDecision>,
    /// The screen-text stream's state.
    pub screen: crate::capture::events::ScreenStatus,
    pub stream_health: BTreeMap<String, crate::capture::events::StreamHealth>,
    /// The session opened in the Context panel, with what was typed and copied in it.
    pub open_session: Option<SessionDetailView>,
    /// Today's finished sessions, oldest first.
    pub sessions_today: Vec<ActivitySession>,
    /// The timeline's days.
    pub day: DayView,
    pub threads: Vec<ChatThread>,
    pub current_thread: Option<i64>,
    pub messages: Vec<MessageView>,
    /// What is pinned to the open thread.
    pub pins: Vec<crate::memory::rag::Item>,
    /// The answer being generated, if any.
    pub generating: Option<i64>,
    pub model: Option<ModelStatus>,
    /// Recent notices for the user, newest last.
    pub notices: Vec<String>,
    /// Documents being read to be attached (their names).
    pub reading_documents: Vec<String>,
    /// The sidebar's own file browser, open where the desktop has no file chooser.
    pub file_browser: Option<FileBrowser>,
    /// Answers whose task changed files Undo can put back: answer id → (operation, until when).
    pub undoable: BTreeMap<i64, (i64, i64)>,
    /// Changes to the pinned facts the user asked for in the chat, waiting for their click: answer id → change.
    pub memory_changes: BTreeMap<i64, crate::memory::corrections::Change>,
    pub settings: Settings,
    pub setting_warnings: Vec<String>,
    pub quick_prompt_open: bool,
    pub shutting_down: bool,
    /// The desktop's light or dark preference (None: it says none).
    pub desktop_dark: Option<bool>,
    pub pending_consent: Option<ConsentPrompt>,
    pub search: SearchView,
    pub memory: MemoryView,
    /// How far embedding has got (Settings → Memory).
    pub memory_progress: Option<crate::memory::jobs::Progress>,
    /// Model downloads: path → (done, total, error).
    pub downloads: BTreeMap<String, (u64, u64, Option<String>)>,
    /// Optional models being installed or removed (their buttons wait).
    pub model_jobs: std::collections::BTreeSet<String>,
    /// The local model's memory preflight, as the llm worker reported it.
    pub model_preflight: Option<String>,
    /// How fast each local chat model ran here, by model file name (`llm::speed`).
    pub model_speeds: std::collections::BTreeMap<String, crate::llm::speed::Measured>,
    /// GGUF files the user added (user-models.json).
    pub added_models: Vec<crate::models::user::UserModel>,
    pub retry_offer: Option<RetryOffer>,
    /// The first-run setup after the streams question (ui/setup.rs).
    pub setup: SetupState,
    /// Settings → Your data → Forget everything: what would go (None while
    /// it is being listed), shown until confirmed or cancelled.
    pub forget: Option<Option<Result<Vec<String>, String>>>,
    /// The agent's tool calls, oldest first (the newest `MAX_TOOL_CALLS`).
    pub tool_calls: Vec<crate::agent::events::ToolCallView>,
    /// The latest progress an MCP server reported for a running call, by call id.
    pub tool_progress: BTreeMap<i64, String>,
    /// The MCP servers (Settings → Integrations).
    pub mcp_servers: Vec<crate::mcp::events::McpServerView>,
    /// The desktop session and each capability's state (None until the workers start).
    pub desktop: Option<crate::desktop::session::Report>,
    pub mcp_clients: Vec<crate::mcp::events::McpClientView>,
    /// Apps → Automations: the flows and their newest runs.
    pub automations: crate::automations::events::AutomationsView,
    /// Apps: the installed apps, the install dialog, the open apps.
    pub apps: crate::apps::AppsView,
    /// "Make me an app": the drafted manifest to review, or why there is none.
    pub app_draft: Option<Result<String, String>>,
    pub drafting_app: bool,
    /// The chat input holds an app's text: the chat it starts is that app's.
    pub chat_from_app: Option<String>,
    /// Apps → Inbox: every notification, newest first.
    pub inbox: Vec<crate::notify::events::InboxItem>,
    /// Settings → Your day, the timeline and the sidebar: the calendars' state and the next events.
    pub calendar: crate::calendar::CalendarView,
    /// Apps → Automations → Describe it: the draft to review (JSON), or why there is none; None while none was asked for.
    pub flow_draft: Option<Result<String, String>>,
    /// A draft is being written.
    pub drafting: bool,
    /// The last Test result.
    pub mcp_test: Option<crate::mcp::events::McpTestReport>,
    /// The last server added from the catalog: (name, None while it is tested, then tools or why not, its last lines).
    pub mcp_catalog: Option<CatalogAdd>,
    /// Models each provider offers, by provider name: None while asked, then the list or why not.
    pub model_lists: std::collections::BTreeMap<String, Option<ModelList>>,
    /// MCP servers' requests for input, oldest first.
    pub elicitations: Vec<crate::mcp::events::ElicitationView>,
    /// MCP resources attached to the next message.
    pub attachments: Vec<crate::records::Attachment>,
    /// A prompt its server filled in, for the chat input to take.
    /// Text a server's prompt or an app put in the chat input, and where it came from.
    pub prompt_fill: Option<(String, crate::tools::Origin)>,
    /// Push-to-talk: the microphone, the meter, the last outcome.
    pub voice: VoiceView,
    /// Operations by id: their answer, status and, when paused, why.
    pub operations: BTreeMap<i64, OperationView>,
    /// The agent's todo list per answer.
    pub todos: BTreeMap<i64, Vec<crate::agent::events::TodoItem>>,
    /// Settings → Agent: rules (id, line), unreadable rows, newest audit lines.
    pub agent_overview: Option<AgentOverview>,
}

/// A server added from the catalog: its name, None while it is tested, then its tool count or why not, its last lines.
pub type CatalogAdd = (String, Option<Result<usize, String>>, Vec<String>);

/// The models a provider offers, or why they could not be listed.
pub type ModelList = Result<Vec<crate::brains::catalog::ModelInfo>, String>;

/// Settings → Agent: rules (id, line), unreadable rows, newest audit lines.
pub type AgentOverview = (Vec<(i64, String)>, Vec<String>, Vec<String>);

/// An agent operation as the chat shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct OperationView {
    pub answer_id: i64,
    pub status: crate::agent::events::OpStatus,
    pub steps: u32,
    pub paused: Option<String>,
}

const MAX_NOTICES: usize = 20;
const MAX_TOOL_CALLS: usize = 300;

impl AppState {
    pub fn tab(&self) -> Tab {
        self.tab.unwrap_or(Tab::Chat)
    }

    pub fn worker_state(&self, worker: WorkerName) -> WorkerState {
        self.workers.get(&worker).cloned().unwrap_or(WorkerState::Starting)
    }

    /// Whether the microphone (or listen mode's system audio) is open: the status bar and tray show it.
    pub fn mic_open(&self) -> bool {
        self.voice.recording.is_some() || self.voice.listen.open()
    }

    pub fn notice(&mut self, text: impl Into<String>) {
        self.notices.push(text.into());
        if self.notices.len() > MAX_NOTICES {
            self.notices.remove(0);
        }
    }

    /// Calls that wait for the user (approvals and questions), oldest first.
    pub fn waiting_calls(&self) -> impl Iterator<Item = &crate::agent::events::ToolCallView> {
        self.tool_calls.iter().filter(|c| c.status == crate::agent::events::CallStatus::Waiting)
    }

    /// Operations a guardrail paused: (operation id, why).
    pub fn paused_operations(&self) -> impl Iterator<Item = (i64, &str)> {
        self.operations.iter().filter_map(|(id, op)| op.paused.as_deref().map(|why| (*id, why)))
    }

    /// What waits for the user: the Chat tab's and the tray's badge.
    pub fn waiting_count(&self) -> usize {
        self.waiting_calls().count() + self.paused_operations().count() + self.elicitations.len()
    }

    /// Applies one worker event: each domain's events go to its own reducer below.
    pub fn apply(&mut self, event: AppEvent, now_millis: i64) {
        match event {
            AppEvent::Agent(event) => self.apply_agent(event),
            AppEvent::Store(event) => self.apply_store(event, now_millis),
            AppEvent::Chat(event) => self.apply_chat(event),
            AppEvent::Runtime(event) => self.apply_runtime(event),
            AppEvent::Capture(event) => self.apply_capture(event, now_millis),
            AppEvent::LocalModel(event) => self.apply_local_model(event),
            AppEvent::Memory(event) => self.apply_memory(event),
            AppEvent::Models(event) => self.apply_models(event),
            AppEvent::Desktop(event) => self.apply_desktop(event),
            AppEvent::Mcp(event) => self.apply_mcp(event),
            AppEvent::Automations(view) => self.automations = view,
            AppEvent::Inbox(items) => self.inbox = items,
            AppEvent::Calendar(view) => self.calendar = view,
            AppEvent::Apps(view) => self.apps = *view,
            AppEvent::Voice(event) => {
                match &event {
                    crate::audio::events::VoiceEvent::Failed { error, .. } => self.notice(error.clone()),
                    crate::audio::events::VoiceEvent::Listening(status) if status.error.is_some() && status.error != self.voice.listen.error => {
                        self.notice(status.error.clone().unwrap_or_default());
                    }
                    _ => {}
                }
                self.voice.apply(event);
            }
        }
    }

    /// A tool call was asked for, decided, started or finished (or loaded with its thread).
    fn tool_call(&mut self, call: crate::agent::events::ToolCallView) {
        if call.status != crate::agent::events::CallStatus::Running {
            self.tool_progress.remove(&call.call_id);
        }
        match self.tool_calls.iter_mut().find(|c| c.call_id == call.call_id) {
            Some(existing) => *existing = call,
            None => {
                self.tool_calls.push(call);
                if self.tool_calls.len() > MAX_TOOL_CALLS {
                    self.tool_calls.remove(0);
                }
            }
        }
    }

    /// The agent's answers, operations, tool calls, consent and drafts.
    fn apply_agent(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::ToolCall(call) => self.tool_call(*call),
            AgentEvent::Operation { operation_id, answer_id, status, steps, paused } => {
                if status.is_open() {
                    self.operations.insert(operation_id, OperationView { answer_id, status, steps, paused });
                } else {
                    self.operations.remove(&operation_id);
                }
                // A resumed operation (after a restart) owns the chat until it ends.
                if status == crate::agent::events::OpStatus::WaitingForHuman && self.generating.is_none() && answer_id != 0 {
                    self.generating = Some(answer_id);
                }
            }
            AgentEvent::Todos { answer_id, items } => {
                self.todos.insert(answer_id, items);
            }
            AgentEvent::AgentOverview { rules, problems, audit } => self.agent_overview = Some((rules, problems, audit)),
            AgentEvent::ContextAttached { user_message_id, context } => {
                if let Some(message) = self.messages.iter_mut().find(|m| m.message_id == user_message_id) {
                    message.context = Some(context);
                }
            }
            AgentEvent::Routed { answer_id, ask_id, answered_by, reason } => {
                if let Some(message) = self.messages.iter_mut().find(|m| m.message_id == answer_id) {
                    message.ask_id = Some(ask_id);
                    message.answered_by = Some(answered_by);
                    message.route_reason = Some(reason);
                }
            }
            AgentEvent::ConsentNeeded { provider, reason, preview, request } => {
                self.pending_consent = Some(ConsentPrompt { provider, reason, preview, request: *request });
            }
            AgentEvent::AnswerCost { answer_id, usd } => {
                if let Some(message) = self.messages.iter_mut().find(|m| m.message_id == answer_id) {
                    message.cost_usd = Some(usd);
                }
            }
            AgentEvent::Token { answer_id, text } => {
                if let Some(message) = self.messages.iter_mut().find(|m| m.message_id == answer_id) {
                    message.content.push_str(&text);
                }
            }
            AgentEvent::Reasoning { answer_id, text } => {
                if let Some(message) = self.messages.iter_mut().find(|m| m.message_id == answer_id) {
                    message.reasoning.push_str(&text);
                }
            }
            AgentEvent::AnswerFinished { answer_id, status, error, stats } => {
                if let Some(message) = self.messages.iter_mut().find(|m| m.message_id == answer_id) {
                    message.status = Some(status);
                    message.stats = (stats.completion_tokens > 0).then_some(stats);
                    if let Some(error) = &error
                        && message.content.is_empty()
                    {
                        message.content = format!("(no answer: {error})");
                    }
                    message.error = error;
                }
                if self.generating == Some(answer_id) {
                    self.generating = None;
                }
            }
            AgentEvent::PromptWarmed { .. } => {}
            AgentEvent::MemoryInjected { report, recalled, dropped, .. } => {
                self.memory.last_report = Some(report);
                self.memory.last_recalled = recalled;
                self.memory.last_dropped = dropped;
            }
// Its notice came with it.
            
            AgentEvent::DecisionRefused { .. } => {}
            AgentEvent::DecidedForOwner { call_id, owner_pid } => self.notice(format!("decided: the cowork that drives this task (pid {owner_pid}) runs call {call_id}")),
            AgentEvent::Citations { answer_id, citations } => {
                if let Some(message) = self.messages.iter_mut().find(|m| m.message_id == answer_id) {
                    message.citations = citations;
                }
            }
            AgentEvent::MemoryChangeProposed { answer_id, change } => {
                self.memory_changes.insert(answer_id, change);
            }
            AgentEvent::Undoable { answer_id, operation_id, until_millis } => {
                self.undoable.insert(answer_id, (operation_id, until_millis));
            }
            AgentEvent::AppDrafted(draft) => {
                self.app_draft = Some(draft);
                self.drafting_app = false;
            }
            AgentEvent::RecapWritten { result, .. } => {
                self.day.writing_recap = false;
                if let Err(why) = result {
                    self.notice(format!("no recap: {why}"));
                }
            }
            AgentEvent::FlowDrafted(draft) => {
                self.flow_draft = Some(draft);
                self.drafting = false;
            }
            AgentEvent::ModelsListed { provider, result } => {
                self.model_lists.insert(provider, Some(result));
            }
            // Handled by the app (it sends commands), never reaches the reducer.
            AgentEvent::AgentStep { .. } => {}
            AgentEvent::Memory(event) => self.apply_memory(event),
        }
    }

    /// The chat's threads and a thread's messages, as loaded.
    fn apply_chat(&mut self, event: crate::chat::ChatEvent) {
        use crate::chat::ChatEvent;
        match event {
            ChatEvent::ThreadsLoaded(threads) => self.threads = threads,
            ChatEvent::MessagesLoaded { thread_id, messages } => {
                if self.current_thread == Some(thread_id) && self.generating.is_none() {
                    self.messages = messages.into_iter().map(MessageView::from).collect();
                }
            }
            ChatEvent::ThreadDeleted { thread_id, messages } => {
                self.threads.retain(|t| t.thread_id != thread_id);
                if self.current_thread == Some(thread_id) {
                    self.new_thread();
                }
                self.notice(format!("Deleted the conversation ({messages} messages)"));
            }
        }
    }

    /// The store's own commands: a setting as stored, a deleted range.
    fn apply_store(&mut self, event: StoreEvent, now_millis: i64) {
        match event {
            StoreEvent::Setting { key, value } => {
                if let Some(warning) = self.settings.apply(&key, &value) {
                    self.setting_warnings.retain(|w| !w.contains(&key));
                    self.setting_warnings.push(warning);
                } else {
                    self.setting_warnings.retain(|w| !w.contains(&key));
                }
                if key == crate::config::keys::PROJECT_RULES {
                    self.day.attribute(&self.settings.projects, now_millis);
                }
            }
            StoreEvent::RangeDeleted { since_millis, until_millis, sessions, messages } => {
                self.sessions_today.retain(|s| {
                    s.started_at_millis >= until_millis || s.ended_at_millis.unwrap_or(now_millis) < since_millis
                });
                self.day.span.sessions.retain(|s| s.started_at_millis >= until_millis || s.ended_at_millis.unwrap_or(now_millis) < since_millis);
                self.day.span.typed.retain(|at| *at >= until_millis || *at < since_millis);
                self.day.span.heard.retain(|at| *at >= until_millis || *at < since_millis);
                self.day.attribute(&self.settings.projects, now_millis);
                if messages > 0 {
                    self.new_thread();
                    self.threads.clear();
                }
                self.notice(format!("deleted {sessions} sessions and {messages} messages"));
            }
        }
    }

    /// Workers' health, notices and shutdown.
    fn apply_runtime(&mut self, event: RuntimeEvent) {
        match event {
            RuntimeEvent::Worker { worker, state } => {
                self.workers.insert(worker, state);
            }
            RuntimeEvent::Notice(text) => self.notice(text),
            RuntimeEvent::ShutdownRequested => self.shutting_down = true,
        }
    }

    /// The focused window, what capture does with it, stream health, finished sessions.
    fn apply_capture(&mut self, event: CaptureEvent, now_millis: i64) {
        match event {
            CaptureEvent::SessionDetail { session_id, typed, copied, seen } => {
                if self.open_session.as_ref().is_some_and(|s| s.session_id == session_id) {
                    self.open_session = Some(SessionDetailView { session_id, typed, copied, seen, loaded: true });
                }
            }
            CaptureEvent::Screen(status) => self.screen = status,
            CaptureEvent::SessionsLoaded(sessions) => {
                self.sessions_today = sessions.into_iter().filter(|s| s.ended_at_millis.is_some()).collect();
            }
            CaptureEvent::DaysLoaded(days) => {
                if (days.start_millis, days.days) == (self.day.span.start_millis, self.day.span.days) {
                    let mut sessions: Vec<ActivitySession> = days.sessions.into_iter().filter(|s| s.ended_at_millis.is_some()).collect();
                    sessions.sort_by_key(|s| s.started_at_millis);
                    // Oldest first: the timeline finds a day's sessions and marks by bisection.
                    let (mut typed, mut heard) = (days.typed, days.heard);
                    typed.sort_unstable();
                    heard.sort_unstable();
                    self.day = DayView { span: crate::capture::events::Days { sessions, typed, heard, ..days }, loaded: true, project: self.day.project.take(), writing_recap: self.day.writing_recap, ..std::mem::take(&mut self.day) };
                    self.day.attribute(&self.settings.projects, now_millis);
                }
            }
            CaptureEvent::ActiveWindow(window) => self.active_window = window,
            CaptureEvent::CaptureDecision(decision) => self.capture_decision = Some(decision),
            CaptureEvent::StreamHealth(health) => {
                self.stream_health.insert(health.stream.clone(), health);
            }
            CaptureEvent::SessionFinished(session) => {
                let today = local_day_start_millis(now_millis);
                let end = session.ended_at_millis.unwrap_or(now_millis);
                if self.day.loaded && session.started_at_millis < self.day.end_millis() && end >= self.day.span.start_millis {
                    self.day.span.sessions.retain(|s| s.session_id != session.session_id);
                    self.day.span.sessions.push(session.clone());
                    self.day.span.sessions.sort_by_key(|s| s.started_at_millis);
                    // (All sessions are read together, so all are attributed again: not on every window
                    // switch, but when the panel shows them — `CoworkApp::ui`.)
                    self.day.stale = true;
                }
                if end >= today {
                    self.sessions_today.retain(|s| s.session_id != session.session_id);
                    self.sessions_today.push(session);
                }
            }
        }
    }

    /// The local model's state, preflight and speed.
    fn apply_local_model(&mut self, event: LocalModelEvent) {
        match event {
            LocalModelEvent::Model(status) => self.model = Some(status),
            LocalModelEvent::ModelPreflight(text) => self.model_preflight = Some(text),
            LocalModelEvent::ModelSpeed { model, measured } => {
                self.model_speeds.insert(model, measured);
            }
        }
    }

    /// Indexing progress and search results.
    fn apply_memory(&mut self, event: MemoryEvent) {
        match event {
            MemoryEvent::HotMemory(facts) => self.memory.hot = facts,
            MemoryEvent::ProfileProposals(proposals) => self.memory.profile_proposals = proposals,
            MemoryEvent::ThreadPins { thread_id, items } => {
                if self.current_thread == Some(thread_id) {
                    self.pins = items;
                }
            }
            MemoryEvent::MemoryProgress(progress) => self.memory_progress = Some(progress),
            MemoryEvent::SearchResults { generation, hits, millis, error, keyword_only, .. } => {
                // Results of an older query than the one on screen are dropped.
                if generation == self.search.generation {
                    self.search.status = Some(match (error, keyword_only) {
                        (Some(error), _) => format!("search failed: {error}"),
                        (None, Some(why)) => format!("{} keyword results in {millis:.1} ms; search by meaning is off: {why}", hits.len()),
                        (None, None) => format!("{} results in {millis:.1} ms (keywords and meaning)", hits.len()),
                    });
                    self.search.hits = hits;
                }
            }
        }
    }

    /// Model downloads, installs and added files.
    fn apply_models(&mut self, event: ModelsEvent) {
        match event {
            ModelsEvent::ModelDownload { path, done_bytes, total_bytes, error } => {
                self.downloads.insert(path, (done_bytes, total_bytes, error));
            }
            ModelsEvent::ModelsChanged { name, outcome } if name == crate::models::worker::DOWNLOAD_JOB => {
                if let Some(download) = &mut self.setup.download {
                    download.outcome = Some(outcome);
                }
            }
            ModelsEvent::ModelsChanged { name, outcome } => {
                self.model_jobs.remove(&name);
                self.notice(match outcome {
                    Ok(text) | Err(text) => text,
                });
            }
            ModelsEvent::ModelAdded(Ok(model)) => {
                self.notice(format!("added {} ({}, {:.0} MB): choose it as the chat model below", model.name, model.architecture, model.size as f64 / 1e6));
                self.added_models.retain(|m| m.path != model.path);
                self.added_models.push(model);
            }
            ModelsEvent::ModelAdded(Err(reason)) => self.notice(format!("model not added: {reason}")),
        }
    }

    /// The desktop: its report, hotkeys, the colour scheme.
    fn apply_desktop(&mut self, event: DesktopEvent) {
        match event {
            DesktopEvent::Report(report) => self.desktop = Some(*report),
            DesktopEvent::QuickPromptHotkey => self.quick_prompt_open = true,
            // Handled by the app (they send commands), never reach the reducer.
            DesktopEvent::TogglePause | DesktopEvent::ShowSidebar | DesktopEvent::StartTask(_) | DesktopEvent::VoiceHotkey { .. } => {}
            DesktopEvent::ColorScheme(dark) => self.desktop_dark = dark,
        }
    }

    /// MCP servers and clients, tests, elicitations, resources, prompts, progress.
    fn apply_mcp(&mut self, event: McpEvent) {
        match event {
            McpEvent::McpServers(servers) => self.mcp_servers = servers,
            McpEvent::McpClients(clients) => self.mcp_clients = clients,
            McpEvent::McpTested(report) => self.mcp_test = Some(report),
            McpEvent::McpCatalogAdded { name, result, stderr } => self.mcp_catalog = Some((name, Some(result), stderr)),
            McpEvent::Elicitation(request) => self.elicitations.push(*request),
            McpEvent::ElicitationClosed { id } => self.elicitations.retain(|e| e.id != id),
            McpEvent::ResourceAttached(Ok(attachment)) => {
                self.attachments.retain(|a| (a.server.as_str(), a.uri.as_str()) != (attachment.server.as_str(), attachment.uri.as_str()));
                self.attachments.push(attachment);
            }
            McpEvent::PromptFilled(Ok(text)) => self.prompt_fill = Some((text, crate::tools::Origin::McpDefinition)),
            McpEvent::ResourceAttached(Err(why)) | McpEvent::PromptFilled(Err(why)) => self.notice(why),
            McpEvent::ToolProgress { call_id, text } => {
                if self.tool_calls.iter().any(|c| c.call_id == call_id && c.status == crate::agent::events::CallStatus::Running) {
                    self.tool_progress.insert(call_id, text);
                }
            }
        }
    }

    /// Adds a question and its empty answer to the current thread, creating the
    /// thread if needed. Returns (thread, new thread?, user message id, answer id).
    pub fn begin_exchange(&mut self, text: &str, now_millis: i64, mut next_id: impl FnMut() -> i64) -> (ChatThread, bool, i64, i64) {
        let (thread, is_new) = match self.current_thread.and_then(|id| self.threads.iter().find(|t| t.thread_id == id)) {
            Some(thread) => (thread.clone(), false),
            None => {
                let thread = ChatThread { thread_id: next_id(), title: thread_title(text), updated_at_millis: now_millis };
                self.threads.insert(0, thread.clone());
                self.current_thread = Some(thread.thread_id);
                self.messages.clear();
                (thread, true)
            }
        };
        let user_message_id = next_id();
        let answer_id = next_id();
        self.messages.push(MessageView {
            message_id: user_message_id,
            role: Role::User,
            content: text.to_owned(),
            context: None,
            status: Some(MessageStatus::Done),
            error: None,
            stats: None,
            ask_id: Some(user_message_id),
            answered_by: None,
            route_reason: None,
            cost_usd: None,
            citations: Vec::new(),
            feedback: None,
            reasoning: String::new(),
        });
        self.messages.push(MessageView::pending_answer(answer_id, user_message_id));
        self.generating = Some(answer_id);
        (thread, is_new, user_message_id, answer_id)
    }

    /// The thread's earlier messages as (role, text), for the model.
    pub fn history_before_last_exchange(&self) -> Vec<(Role, String)> {
        let keep = self.messages.len().saturating_sub(2);
        self.messages[..keep]
            .iter()
            .filter(|m| m.status != Some(MessageStatus::Failed) && !m.content.is_empty())
            .map(|m| (m.role, m.content.clone()))
            .collect()
    }

    /// A failed answer that never reached the worker (queue full or worker gone).
    pub fn fail_answer(&mut self, answer_id: i64, error: String) {
        self.apply(
            AppEvent::Agent(AgentEvent::AnswerFinished {
                answer_id,
                status: MessageStatus::Failed,
                error: Some(error),
                stats: GenerationStats::default(),
            }),
            0,
        );
    }

    /// The answers to one question, in order, and what they cost together.
    pub fn answers_to(&self, ask_id: i64) -> (usize, f64) {
        let answers = self.messages.iter().filter(|m| m.role == Role::Assistant && m.ask_id == Some(ask_id));
        answers.fold((0, 0.0), |(n, cost), m| (n + 1, cost + m.cost_usd.unwrap_or(0.0)))
    }

    pub fn new_thread(&mut self) {
        self.current_thread = None;
        self.messages.clear();
        self.pins.clear();
    }
}

/// A thread's title: its first question, shortened.
pub fn thread_title(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    let mut title: String = line.chars().take(48).collect();
    if line.chars().count() > 48 {
        title.push('…');
    }
    if title.is_empty() { "New chat".to_owned() } else { title }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::keys;

    fn ids() -> impl FnMut() -> i64 {
        let mut n = 0;
        move || {
            n += 1;
            n
        }
    }

    #[test]
    fn an_exchange_streams_into_the_answer_and_finishes() {
        let mut state = AppState::default();
        let (thread, is_new, user_id, answer_id) = state.begin_exchange("What was I doing?", 0, ids());
        assert!(is_new);
        assert_eq!(state.current_thread, Some(thread.thread_id));
        state.apply(AppEvent::Agent(AgentEvent::ContextAttached { user_message_id: user_id, context: "Current window: X".into() }), 0);
        state.apply(AppEvent::Agent(AgentEvent::Token { answer_id, text: "You were ".into() }), 0);
        state.apply(AppEvent::Agent(AgentEvent::Token { answer_id, text: "editing.".into() }), 0);
        assert!(state.messages[1].is_streaming());
        state.apply(
            AppEvent::Agent(AgentEvent::AnswerFinished { answer_id, status: MessageStatus::Done, error: None, stats: GenerationStats::default() }),
            0,
        );
        assert_eq!(state.messages[1].content, "You were editing.");
        assert_eq!(state.messages[0].context.as_deref(), Some("Current window: X"));
        assert_eq!(state.generating, None);
        // A second question in the same thread carries the first exchange as history.
        let (_, is_new, _, _) = state.begin_exchange("And before?", 0, ids());
        assert!(!is_new);
        assert_eq!(state.history_before_last_exchange().len(), 2);
    }

    #[test]
    fn a_failed_send_shows_the_error_in_the_answer() {
        let mut state = AppState::default();
        let (_, _, _, answer_id) = state.begin_exchange("hi", 0, ids());
        state.fail_answer(answer_id, "llm worker is busy".into());
        assert_eq!(state.messages[1].content, "(no answer: llm worker is busy)");
        assert_eq!(state.generating, None);
    }

    #[test]
    fn worker_health_and_bad_settings_are_kept() {
        let mut state = AppState::default();
        state.apply(AppEvent::Runtime(RuntimeEvent::Worker { worker: WorkerName::Capture, state: WorkerState::Degraded("no X".into()) }), 0);
        assert_eq!(state.worker_state(WorkerName::Capture), WorkerState::Degraded("no X".into()));
        state.apply(AppEvent::Store(StoreEvent::Setting { key: keys::AFK_SECS.into(), value: "soon".into() }), 0);
        assert_eq!(state.setting_warnings.len(), 1);
        state.apply(AppEvent::Store(StoreEvent::Setting { key: keys::AFK_SECS.into(), value: "60".into() }), 0);
        assert!(state.setting_warnings.is_empty());
        assert_eq!(state.settings.afk_secs, 60);
    }

    #[test]
    fn thread_titles_are_short_first_lines() {
        assert_eq!(thread_title("  hello\nworld"), "hello");
        assert_eq!(thread_title(""), "New chat");
        assert!(thread_title(&"x".repeat(100)).ends_with('…'));
    }
}

/// Push-to-talk as the inputs show it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VoiceView {
    /// The microphone is open, talking into this input.
    pub recording: Option<crate::audio::events::VoiceTarget>,
    /// The meter, 0–1.
    pub level: f32,
    pub transcribing: Option<crate::audio::events::VoiceTarget>,
    /// The last outcome worth a line under the input ("heard nothing", an error).
    pub status: Option<String>,
    /// A transcript for an input to take (to edit, not sent).
    pub fill: Option<(crate::audio::events::VoiceTarget, String)>,
    /// Key press to first sample, and key release to text, of the last utterance.
    pub first_sample_millis: Option<u64>,
    pub release_to_text_millis: Option<u64>,
    /// Listen mode, as its worker last said.
    pub listen: crate::audio::events::ListenStatus,
    /// The input devices, as the audio worker last listed them.
    pub devices: Option<Result<Vec<crate::audio::mic::InputDevice>, String>>,
}

impl VoiceView {
    pub fn apply(&mut self, event: crate::audio::events::VoiceEvent) {
        use crate::audio::transcribe::Heard;
        use crate::audio::events::VoiceEvent;
        match event {
            VoiceEvent::Opened { target, .. } => {
                self.recording = Some(target);
                self.level = 0.0;
                self.status = None;
            }
            VoiceEvent::FirstSample { millis } => self.first_sample_millis = Some(millis),
            VoiceEvent::Level(level) => self.level = level,
            VoiceEvent::Closed { cancelled } => {
                self.recording = None;
                self.level = 0.0;
                if cancelled {
                    self.status = Some("cancelled".into());
                }
            }
            VoiceEvent::Transcribing { target } => self.transcribing = Some(target),
            VoiceEvent::Heard { target, heard, release_to_text_millis } => {
                self.transcribing = None;
                self.release_to_text_millis = Some(release_to_text_millis);
                match heard {
                    Heard::Speech(transcript) => {
                        self.status = (transcript.confidence < LOW_CONFIDENCE).then(|| format!("low confidence ({:.0} %): check the text", transcript.confidence * 100.0));
                        self.fill = Some((target, transcript.text));
                    }
                    Heard::Nothing(why) => self.status = Some(why.describe()),
                }
            }
            VoiceEvent::Failed { error, .. } => {
                self.recording = None;
                self.transcribing = None;
                self.level = 0.0;
                self.status = Some(error);
            }
            VoiceEvent::Listening(status) => self.listen = status,
            VoiceEvent::Devices(devices) => self.devices = Some(devices),
            VoiceEvent::Typed { chars } => self.status = Some(format!("typed {chars} characters into the focused app")),
        }
    }
}

/// Below this mean token probability a transcript is flagged for checking.
pub const LOW_CONFIDENCE: f32 = 0.5;
