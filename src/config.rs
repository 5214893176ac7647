//! Where cowork keeps its files (`Paths`: the data directory, canonicalised,
//! and the models directory), and the user's settings with their defaults.
//! Settings live in the `settings` table; every key is one row of `table`; a
//! value that does not parse falls back to its default with a warning, and the
//! stored value is left alone. `check` applies the same rules `Settings::apply`
//! does, for the Settings tab and `cowork settings`. The privacy firewall's
//! rules are settings too (`capture::firewall::RuleText`, compiled by
//! `RuleText::compile`); a change reaches capture as
//! `CaptureCommand::SetRules`. Which local chat model answers is
//! `resolve_chat_model`.

pub mod table;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::capture::firewall::{RuleText, Rules};
use crate::models::{Manifest, ModelRole};
use crate::store::DB_FILE_NAME;

/// Resolved locations.
#[derive(Clone, Debug)]
pub struct Paths {
    pub data_dir: PathBuf,
    pub models_dir: PathBuf,
}

impl Paths {
    /// `data_dir`: flag or `COWORK_DATA_DIR` (clap fills both), else the XDG data directory.
    /// `models_dir`: flag or `COWORK_MODELS_DIR`, else `<data_dir>/models` if it
    /// exists, else the source tree's `models/` when this cowork was built from
    /// one that is still there and runs from outside the system's folders
    /// (where the setup script puts them), else `<data_dir>/models`, where an
    /// installed cowork downloads them.
    pub fn resolve(data_dir: Option<PathBuf>, models_dir: Option<PathBuf>) -> anyhow::Result<Self> {
        let data_dir = match data_dir {
            Some(dir) => dir,
            None => default_data_dir().context("cannot find a home directory for the data directory; pass --data-dir")?,
        };
        // One spelling per folder (symlinks, `..`, a trailing slash): the instance lock, the trigger
        // socket's name and the secret store's name for the database key all go by it.
        let data_dir = std::path::absolute(&data_dir).unwrap_or(data_dir);
        let data_dir = data_dir.canonicalize().unwrap_or(data_dir);
        let models_dir = models_dir.unwrap_or_else(|| {
            let in_data = data_dir.join("models");
            let source_tree = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models");
            // An installed cowork (/usr/bin, /opt) never reads the tree it was built from.
            let installed = std::env::current_exe().is_ok_and(|exe| exe.starts_with("/usr") || exe.starts_with("/opt"));
            if in_data.is_dir() || installed || !source_tree.join("manifest.json").is_file() { in_data } else { source_tree }
        });
        Ok(Self { data_dir, models_dir })
    }

    pub fn db_path(&self) -> PathBuf {
        self.data_dir.join(DB_FILE_NAME)
    }

    /// The data directory when it is not the default one (what a command cowork writes
    /// for later, such as the login autostart entry, must name).
    pub fn data_dir_if_not_default(&self) -> Option<&Path> {
        let default = default_data_dir()?;
        let default = default.canonicalize().unwrap_or(default);
        (self.data_dir != default).then_some(self.data_dir.as_path())
    }

    pub fn ensure_data_dir(&self) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.data_dir)
            .with_context(|| format!("cannot create data directory {}", self.data_dir.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // Captured activity is private: owner-only.
            let _ = std::fs::set_permissions(&self.data_dir, std::fs::Permissions::from_mode(0o700));
        }
        Ok(())
    }
}

/// The XDG data directory's `cowork` folder (`~/.local/share/cowork`).
fn default_data_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "cowork").map(|dirs| dirs.data_dir().to_path_buf())
}

/// A model from the manifest resolved against the models directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedModel {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub sha256: String,
}

impl ResolvedModel {
    /// A manifest model's file (the converted one when there is one) under `models_dir`.
    pub fn from_manifest(model: &crate::models::ManifestModel, models_dir: &Path) -> Self {
        let (size, sha256) = model.primary_size_and_sha();
        Self { name: model.name.clone(), path: models_dir.join(model.primary_path()), size, sha256: sha256.to_owned() }
    }
}

impl From<&crate::models::user::UserModel> for ResolvedModel {
    fn from(model: &crate::models::user::UserModel) -> Self {
        Self { name: model.name.clone(), path: model.path.clone(), size: model.size, sha256: model.sha256.clone() }
    }
}

pub fn resolve_model(manifest: &Manifest, models_dir: &Path, role: ModelRole) -> Option<ResolvedModel> {
    Some(ResolvedModel::from_manifest(manifest.by_role(role)?, models_dir))
}

/// Tokens the preflight reserves KV cache for when choosing the default chat model.
const CHAT_PREFLIGHT_TOKENS: u64 = 4_096;

/// The chat model to answer with: `chosen` (Settings → Models) when it is a
/// chat model of the manifest or one the user added, otherwise the first chat
/// model in the manifest's order (best first: Qwen2.5-Coder-1.5B when it was
/// installed, Qwen2.5-Coder-0.5B, SmolLM2-135M) that is installed, that the
/// memory preflight does not refuse on this machine and that meets the speed
/// floor on this machine (`fast_enough`); when none meets it, the fastest
/// that fits. With nothing installed, the first that is not optional, so the
/// error names what setup installs.
pub fn resolve_chat_model(
    manifest: &Manifest,
    models_dir: &Path,
    user: &[crate::models::user::UserModel],
    chosen: Option<&str>,
    speeds: &crate::llm::speed::Speeds,
) -> Option<ResolvedModel> {
    if let Some(model) = chosen.and_then(|name| resolve_named_model(manifest, models_dir, user, name)) {
        return Some(model);
    }
    let memory = crate::llm::memory::meminfo();
    let fits = |model: &ResolvedModel| {
        let Ok(info) = crate::models::gguf::read_info(&model.path) else { return false };
        memory.is_none_or(|(available, total)| {
            crate::models::gguf::preflight(&info, CHAT_PREFLIGHT_TOKENS, available, total).verdict != crate::models::gguf::Verdict::Red
        })
    };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let chat: Vec<&crate::models::ManifestModel> = manifest.models.iter().filter(|m| m.role == ModelRole::Chat).collect();
    let resolved = |m: &&crate::models::ManifestModel| ResolvedModel::from_manifest(m, models_dir);
    let installed: Vec<ResolvedModel> = chat.iter().map(resolved).filter(fits).collect();
    // The best that is fast enough here; else the fastest that fits; with nothing that fits,
    // the first a setup installs, so the error names what to install.
    installed
        .iter()
        .find(|m| fast_enough(m, cores, speeds))
        .or(installed.last())
        .cloned()
        .or_else(|| chat.iter().find(|m| !m.optional).or(chat.first()).map(resolved))
}

/// Seconds of CPU (one core) an agent step's first token costs per GB of
/// weights: a 700-token step's prefill, measured with `scripts/eval-agent` on
/// the 2-core test machine (Qwen2.5-Coder-1.5B, 1.12 GB: 2.3 s first token
/// median on 2 cores; the 0.5B's Q8_0, 0.64 GB: 0.8 s, so this errs slow).
const STEP_CORE_SECS_PER_GB: f64 = 4.1;
/// The speed floor of the default: an agent step's first token within 3 s.
const STEP_FIRST_TOKEN_FLOOR_SECS: f64 = 3.0;

/// Whether `model` starts an agent step within the floor here: by its median
/// first token over its recent generations on this machine once it has
/// `speed::TRUSTED_AFTER` of them (so a slow CPU, a hot laptop or a busy
/// machine moves the default to a lighter model), before that by the
/// estimate from its size and the cores (`meets_speed_floor`).
pub fn fast_enough(model: &ResolvedModel, cores: usize, speeds: &crate::llm::speed::Speeds) -> bool {
    let file = model.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    match speeds.measured(&file) {
        Some(measured) if measured.samples >= crate::llm::speed::TRUSTED_AFTER => measured.first_token_ms as f64 <= STEP_FIRST_TOKEN_FLOOR_SECS * 1000.0,
        _ => meets_speed_floor(model.size, cores),
    }
}

/// Whether a chat model of `weights_bytes` starts an agent step within the
/// floor on `cores` cores (prefill is compute-bound: the cost grows with the
/// weights and shrinks with the cores). On the 2-core test machine the 1.5B
/// (est. 2.3 s) meets it; on one core it does not (4.6 s) and the 0.5B (2.6 s) is the default.
pub fn meets_speed_floor(weights_bytes: u64, cores: usize) -> bool {
    let secs = STEP_CORE_SECS_PER_GB * weights_bytes as f64 / 1e9 / cores.max(1) as f64;
    secs <= STEP_FIRST_TOKEN_FLOOR_SECS
}

/// The chat model called `name`: one of the manifest's, or one the user added.
pub fn resolve_named_model(manifest: &Manifest, models_dir: &Path, user: &[crate::models::user::UserModel], name: &str) -> Option<ResolvedModel> {
    match manifest.models.iter().find(|m| m.name == name && m.role == ModelRole::Chat) {
        Some(model) => Some(ResolvedModel::from_manifest(model, models_dir)),
        None => user.iter().find(|m| m.name == name).map(ResolvedModel::from),
    }
}

/// Settings with their defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub afk_secs: u64,
    pub quick_prompt_hotkey: String,
    pub context_budget_tokens: usize,
    pub max_answer_tokens: usize,
    /// Remembered sidebar geometry (logical points): x, y, width, height.
    pub sidebar_geometry: Option<[f32; 4]>,
    /// Days of window history kept; 0 keeps everything.
    pub window_retention_days: u32,
    /// Days of typed text kept; 0 keeps everything.
    pub keystroke_retention_days: u32,
    /// Which streams record (each can be switched on its own).
    pub record_windows: bool,
    pub record_keys: bool,
    pub record_clipboard: bool,
    /// The user has answered the first-run question about streams.
    pub streams_confirmed: bool,
    /// Turn on desktop accessibility (AT-SPI `IsEnabled`) while cowork runs,
    /// so browsers started afterwards expose their address bar.
    pub desktop_accessibility: bool,
    /// Started at login (`--autostart`), open only the tray icon, not the sidebar.
    pub start_in_tray: bool,
    /// Light or dark: "system" follows the desktop's preference, else "light" or "dark".
    pub theme: String,
    /// The first-run setup after the streams question (brain, hotkeys, login) was finished or skipped.
    pub setup_done: bool,
    /// The privacy firewall's rules as written in Settings (always compilable).
    pub privacy: RuleText,
    /// Global hotkey that pauses and resumes all capture.
    pub pause_hotkey: String,
    /// Offline mode: no network connection except to loopback.
    pub offline: bool,
    /// Unload the local model after this many idle seconds (0: never).
    pub idle_unload_secs: u64,
    /// Keep the local model loaded and its prompt head prefilled in the
    /// background where the machine can afford it (`agent::warm`).
    pub keep_warm: bool,
    /// Local or cloud first.
    pub prefer: crate::brains::Preference,
    /// Cloud tiers, cheapest first: provider names from providers.json.
    pub tiers: Vec<String>,
    pub budget: crate::brains::budget::Budget,
    /// Answer only from memory: with nothing found, refuse instead of guessing.
    pub grounded: bool,
    /// The system prompt's budget (identity, profile, hot memory, summaries).
    pub prompt_budget_tokens: usize,
    /// Budget of recalled memory items per question.
    pub recall_budget_tokens: usize,
    /// Working memory: what the user told cowork about themselves (preferences, goals, style).
    pub profile: String,
    /// The local chat model by manifest name; empty: the first that fits this machine.
    pub chat_model: String,
    /// Consent per provider for captured context (`consent.NAME.activity`): true allows, false never.
    pub consent: std::collections::BTreeMap<String, bool>,
    /// Chat questions run as agent operations with tools (Settings → Agent).
    pub agent: bool,
    /// With the agent on, a local question that can only read memory is answered from the grounded context (`agent::local::reads_memory_only`).
    pub agent_memory_from_context: bool,
    /// Steps per operation at most.
    pub agent_max_steps: u32,
    /// A pending approval is denied after this many seconds.
    pub approval_timeout_secs: u64,
    /// An automation's parked approval expires after this many hours (nobody may be watching).
    pub automation_approval_hours: u64,
    /// How often cowork may interrupt: notifications shown per hour at most, by tier
    /// (urgent, helpful, informational; the rest wait in the inbox).
    pub notify_urgent_per_hour: u32,
    pub notify_helpful_per_hour: u32,
    pub notify_informational_per_hour: u32,
    /// Tools whose every call asks, whatever the rules say.
    pub always_ask: Vec<String>,
    pub voice: VoiceSettings,
    pub listen: ListenSettings,
    pub screen: ScreenSettings,
    /// The web search provider (`tools::web_search::Provider`); empty: none set up.
    pub web_search_provider: String,
    /// Its address (SearXNG's instance; the others' own when empty).
    pub web_search_url: String,
    /// Documents the user attaches or the agent reads are kept searchable in memory.
    pub remember_documents: bool,
    /// Folders whose documents are kept searchable and followed as they change (one per line).
    pub document_folders: String,
    /// Paths never kept in memory (globs, one per line: `~/Taxes/**`, `**/*.kdbx`, `**/private/**`).
    pub document_exclude: String,
    /// The user's project rules (`day::projects::ProjectRules`: `Atlas: ledger-svc, ATL, acme.example` per line).
    pub projects: String,
    /// The calendars read (`calendar::parse_sources`: an `.ics` path, an https address or `caldav URL USER` per line).
    pub calendar_sources: String,
    /// How often each calendar is read again.
    pub calendar_refresh_minutes: u32,
}

/// The screen-text stream (issue 57): the focused window's text, from its
/// accessibility tree or by OCR. Off until the user turns it on and agrees
/// to what it reads (the first run's switch is that agreement).
#[derive(Clone, Debug, PartialEq)]
pub struct ScreenSettings {
    pub enabled: bool,
    pub consented: bool,
    /// OCR of the window where its accessibility tree holds no text.
    pub ocr: bool,
    /// Days screen text is kept; 0 keeps it.
    pub retention_days: u32,
}

impl Default for ScreenSettings {
    fn default() -> Self {
        Self { enabled: false, consented: false, ocr: true, retention_days: 30 }
    }
}

impl ScreenSettings {
    /// Whether the stream may read at all (the firewall still decides per window).
    pub fn active(&self) -> bool {
        self.enabled && self.consented
    }

    /// What the screen worker may do (`confirmed`: the first-run question was answered).
    pub fn plan(&self, confirmed: bool) -> crate::capture::screen_worker::ScreenPlan {
        crate::capture::screen_worker::ScreenPlan { on: confirmed && self.active(), ocr: self.ocr }
    }
}

/// Listen mode (Settings → Voice): transcribe what is said around the
/// computer into the `audio_transcripts` stream. Off until the user turns it
/// on and answers its own consent question.
#[derive(Clone, Debug, PartialEq)]
pub struct ListenSettings {
    pub enabled: bool,
    /// The user read what listen mode records and agreed.
    pub consented: bool,
    /// Transcribe the microphone ("you").
    pub mic: bool,
    /// Transcribe what the computer plays ("others"): the default output's monitor.
    pub system: bool,
    /// Keep each chunk's audio as a WAV file next to its transcript.
    pub keep_audio: bool,
    /// Days transcripts are kept; 0 keeps them.
    pub retention_days: u32,
    /// Days kept audio is kept (its text stays for `retention_days`).
    pub audio_retention_days: u32,
}

impl Default for ListenSettings {
    fn default() -> Self {
        Self { enabled: false, consented: false, mic: true, system: false, keep_audio: false, retention_days: 30, audio_retention_days: 7 }
    }
}

impl ListenSettings {
    /// Whether listen mode may run at all (the firewall's pause and quiet hours still apply).
    pub fn active(&self) -> bool {
        self.enabled && self.consented && (self.mic || self.system)
    }
}

/// Push-to-talk and transcription (Settings → Voice).
#[derive(Clone, Debug, PartialEq)]
pub struct VoiceSettings {
    /// Global hotkey: hold to talk, tap to toggle (as `mode` says).
    pub hotkey: String,
    pub mode: crate::audio::ptt::PttMode,
    /// Send the transcript as soon as it is ready instead of leaving it to edit.
    pub send_on_release: bool,
    /// The hotkey types the transcript into the focused app (XTest) instead
    /// of opening the quick prompt. Off by default.
    pub dictation: bool,
    /// Shrink Whisper's encoder window for short clips (faster; docs/performance.md, "Voice", says what it costs).
    pub short_clip_context: bool,
    /// A speech model of the manifest by name; empty: tiny.en.
    pub model: String,
    /// What a multilingual model hears (ISO 639-1, e.g. `de`); empty:
    /// detected per utterance (which costs base about 360 ms on 5 s).
    pub language: String,
    /// The input device by its sound-server name; empty: the default.
    pub device: String,
    /// Unload Whisper after this many idle seconds (0: never).
    pub idle_unload_secs: u64,
}

impl Default for VoiceSettings {
    fn default() -> Self {
        Self {
            hotkey: "ctrl+alt+KeyV".to_owned(),
            mode: crate::audio::ptt::PttMode::Auto,
            send_on_release: false,
            dictation: false,
            short_clip_context: true,
            model: String::new(),
            language: String::new(),
            device: String::new(),
            idle_unload_secs: 300,
        }
    }
}

/// What the user chose about sending captured context to one provider.
pub fn consent_key(provider: &str) -> String {
    format!("consent.{provider}.activity")
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            afk_secs: 180,
            quick_prompt_hotkey: "ctrl+alt+Space".to_owned(),
            // Measured (docs/engine.md, "The local model's prompt"): Qwen answers as many grounded
            // questions at 250 as at 400 tokens of activity log, and the first question's
            // first token is 1.5 s sooner; the log is prefix-cached after that.
            context_budget_tokens: 250,
            max_answer_tokens: 400,
            sidebar_geometry: None,
            window_retention_days: 90,
            keystroke_retention_days: 30,
            record_windows: true,
            record_keys: true,
            record_clipboard: true,
            streams_confirmed: false,
            desktop_accessibility: true,
            start_in_tray: false,
            theme: "system".to_owned(),
            setup_done: false,
            privacy: RuleText::default(),
            pause_hotkey: "ctrl+alt+KeyP".to_owned(),
            offline: false,
            idle_unload_secs: 600,
            keep_warm: true,
            prefer: crate::brains::Preference::Local,
            tiers: Vec::new(),
            budget: crate::brains::budget::Budget { per_interaction_usd: 0.05, daily_usd: 0.50, weekly_usd: 2.0, monthly_usd: 5.0, monthly_free_tokens: 1_000_000 },
            consent: Default::default(),
            grounded: false,
            prompt_budget_tokens: 2_800,
            recall_budget_tokens: 500,
            profile: String::new(),
            chat_model: String::new(),
            agent: true,
            agent_memory_from_context: true,
            web_search_provider: String::new(),
            web_search_url: String::new(),
            remember_documents: true,
            document_folders: String::new(),
            document_exclude: "**/.*/**\n**/*.kdbx\n**/*.key\n**/*.pem".into(),
            projects: String::new(),
            calendar_sources: String::new(),
            calendar_refresh_minutes: crate::calendar::DEFAULT_REFRESH_MINUTES,
            agent_max_steps: 20,
            approval_timeout_secs: 300,
            automation_approval_hours: 24,
            notify_urgent_per_hour: 20,
            notify_helpful_per_hour: 6,
            notify_informational_per_hour: 3,
            always_ask: Vec::new(),
            voice: VoiceSettings::default(),
            listen: ListenSettings::default(),
            screen: ScreenSettings::default(),
        }
    }
}

pub mod keys {
    pub const AFK_SECS: &str = "capture.afk_secs";
    pub const QUICK_PROMPT_HOTKEY: &str = "ui.quick_prompt_hotkey";
    pub const CONTEXT_BUDGET: &str = "llm.context_budget_tokens";
    pub const MAX_ANSWER_TOKENS: &str = "llm.max_answer_tokens";
    pub const SIDEBAR_GEOMETRY: &str = "ui.sidebar_geometry";
    pub const WINDOW_RETENTION_DAYS: &str = "retention.window_days";
    pub const KEYSTROKE_RETENTION_DAYS: &str = "retention.keystroke_days";
    pub const RECORD_WINDOWS: &str = "capture.windows.enabled";
    pub const RECORD_KEYS: &str = "capture.keys.enabled";
    pub const RECORD_CLIPBOARD: &str = "capture.clipboard.enabled";
    pub const STREAMS_CONFIRMED: &str = "capture.streams_confirmed";
    pub const RECORD_SCREEN: &str = "capture.screen.enabled";
    pub const SCREEN_CONSENTED: &str = "capture.screen.consented";
    pub const SCREEN_OCR: &str = "capture.screen.ocr";
    pub const SCREEN_RETENTION_DAYS: &str = "retention.screen_days";
    pub const DESKTOP_ACCESSIBILITY: &str = "capture.desktop_accessibility";
    pub const START_IN_TRAY: &str = "ui.start_in_tray";
    pub const THEME: &str = "ui.theme";
    pub const SETUP_DONE: &str = "ui.setup_done";
    pub const PAUSE_HOTKEY: &str = "ui.pause_hotkey";
    pub const OFFLINE: &str = "network.offline";
    pub const PREFER: &str = "brains.prefer";
    pub const IDLE_UNLOAD_SECS: &str = "llm.idle_unload_secs";
    pub const KEEP_WARM: &str = "llm.keep_warm";
    pub const TIERS: &str = "brains.tiers";
    pub const BUDGET_INTERACTION: &str = "budget.per_interaction_usd";
    pub const BUDGET_DAILY: &str = "budget.daily_usd";
    pub const BUDGET_WEEKLY: &str = "budget.weekly_usd";
    pub const BUDGET_MONTHLY: &str = "budget.monthly_usd";
    pub const BUDGET_FREE_TOKENS: &str = "budget.monthly_free_tokens";
    pub const GROUNDED: &str = "memory.grounded";
    pub const PROMPT_BUDGET: &str = "memory.prompt_budget_tokens";
    pub const RECALL_BUDGET: &str = "memory.recall_budget_tokens";
    pub const PROFILE: &str = "memory.profile";
    pub const CHAT_MODEL: &str = "llm.chat_model";
    pub const PAUSED: &str = "privacy.paused";
    pub const ALLOWED_APPS: &str = "privacy.allowed_apps";
    pub const DENIED_APPS: &str = "privacy.denied_apps";
    pub const DENIED_TITLES: &str = "privacy.denied_titles";
    pub const DENIED_DOMAINS: &str = "privacy.denied_domains";
    pub const QUIET_HOURS: &str = "privacy.quiet_hours";
    pub const PRIVATE_WINDOWS: &str = "privacy.private_windows";
    pub const AGENT: &str = "agent.enabled";
    pub const AGENT_MAX_STEPS: &str = "agent.max_steps";
    pub const AGENT_MEMORY_FROM_CONTEXT: &str = "agent.memory_from_context";
    pub const WEB_SEARCH_PROVIDER: &str = "web.search_provider";
    pub const WEB_SEARCH_URL: &str = "web.search_url";
    pub const REMEMBER_DOCUMENTS: &str = "memory.documents";
    pub const DOCUMENT_FOLDERS: &str = "memory.document_folders";
    pub const DOCUMENT_EXCLUDE: &str = "memory.document_exclude";
    pub const PROJECT_RULES: &str = "projects.rules";
    pub const CALENDAR_SOURCES: &str = crate::calendar::SOURCES_KEY;
    pub const CALENDAR_REFRESH_MINUTES: &str = crate::calendar::REFRESH_KEY;
    pub const APPROVAL_TIMEOUT: &str = "agent.approval_timeout_secs";
    pub const ALWAYS_ASK: &str = "agent.always_ask";
    pub const AUTOMATION_APPROVAL_HOURS: &str = "automations.approval_hours";
    pub const NOTIFY_URGENT_PER_HOUR: &str = "notify.urgent_per_hour";
    pub const NOTIFY_HELPFUL_PER_HOUR: &str = "notify.helpful_per_hour";
    pub const NOTIFY_INFORMATIONAL_PER_HOUR: &str = "notify.informational_per_hour";
    pub const VOICE_HOTKEY: &str = "voice.hotkey";
    pub const VOICE_MODE: &str = "voice.mode";
    pub const VOICE_SEND_ON_RELEASE: &str = "voice.send_on_release";
    pub const VOICE_DICTATION: &str = "voice.dictation";
    pub const VOICE_SHORT_CLIP_CONTEXT: &str = "voice.short_clip_context";
    pub const VOICE_MODEL: &str = "voice.model";
    pub const VOICE_LANGUAGE: &str = "voice.language";
    pub const VOICE_DEVICE: &str = "voice.device";
    pub const VOICE_IDLE_UNLOAD_SECS: &str = "voice.idle_unload_secs";
    pub const LISTEN_ENABLED: &str = "listen.enabled";
    pub const LISTEN_CONSENTED: &str = "listen.consented";
    pub const LISTEN_MIC: &str = "listen.mic";
    pub const LISTEN_SYSTEM: &str = "listen.system";
    pub const LISTEN_KEEP_AUDIO: &str = "listen.keep_audio";
    pub const LISTEN_RETENTION_DAYS: &str = "retention.audio_days";
    pub const LISTEN_AUDIO_RETENTION_DAYS: &str = "retention.audio_file_days";
    /// Every key that changes the firewall's rules.
    pub const PRIVACY: &[&str] =
        &[PAUSED, ALLOWED_APPS, DENIED_APPS, DENIED_TITLES, DENIED_DOMAINS, QUIET_HOURS, PRIVATE_WINDOWS];
}

/// Every setting the Settings tab edits, with what it does (`cowork settings`), in order.
pub fn described() -> impl Iterator<Item = (&'static str, &'static str)> {
    table::SETTINGS.iter().filter_map(|s| s.description.map(|about| (s.key, about)))
}

/// Whether a setting takes effect only when cowork starts again (the rest apply at once).
pub fn needs_restart(key: &str) -> bool {
    table::row(key).is_some_and(|s| s.restart)
}

/// The provider a consent key (`consent.NAME.activity`) is about.
fn consent_provider(key: &str) -> Option<&str> {
    key.strip_prefix("consent.")?.strip_suffix(".activity").filter(|provider| !provider.is_empty())
}

/// Whether `key` is a setting cowork reads (a described one, or a provider's consent).
pub fn known_setting(key: &str) -> bool {
    table::row(key).is_some_and(|s| s.description.is_some()) || consent_provider(key).is_some()
}

/// Whether `value` can be stored under `key`; if not, why, in words for the
/// field it was typed into (Settings checks as the user types).
pub fn check(key: &str, value: &str) -> Result<(), String> {
    let reason = match table::row(key) {
        Some(row) => match row.check(&Settings::default(), value) {
            Ok(()) => return Ok(()),
            Err(reason) => reason,
        },
        None => match Settings::default().apply(key, value) {
            None => return Ok(()),
            Some(_) => "is not always, never or ask".to_owned(),
        },
    };
    let reason = reason.strip_prefix("is ").unwrap_or(&reason);
    let mut chars = reason.chars();
    Err(chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default())
}

impl Settings {
    /// A setting's current value as it is stored (what `apply` reads back).
    pub fn value(&self, key: &str) -> Option<String> {
        if let Some(row) = table::row(key) {
            return Some((row.get)(self));
        }
        let provider = consent_provider(key)?;
        Some(match self.consent.get(provider) {
            Some(true) => "always".into(),
            Some(false) => "never".into(),
            None => "ask".into(),
        })
    }

    /// Applies one stored key/value. Returns a warning when the value is
    /// unusable (the setting keeps its last good value, or its default).
    pub fn apply(&mut self, key: &str, value: &str) -> Option<String> {
        if let Some(row) = table::row(key) {
            return row.apply(self, value);
        }
        let provider = consent_provider(key)?;
        let choice = match value.trim() {
            "always" => Some(true),
            "never" => Some(false),
            "" | "ask" => None,
            _ => return Some(format!("setting {key} = {value:?} is not always, never or ask")),
        };
        match choice {
            Some(allow) => self.consent.insert(provider.to_owned(), allow),
            None => self.consent.remove(provider),
        };
        None
    }

    /// The firewall's rules (the text is kept compilable by `apply`).
    pub fn rules(&self) -> Rules {
        let rules = self.privacy.compile().unwrap_or_default();
        Rules { document_exclude: self.document_exclude.clone(), ..rules }
    }

    pub fn from_pairs(pairs: &[(String, String)]) -> (Self, Vec<String>) {
        let mut settings = Self::default();
        let warnings = pairs.iter().filter_map(|(k, v)| settings.apply(k, v)).collect();
        (settings, warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_says_why_a_typed_value_cannot_be_stored_in_the_fields_words() {
        assert_eq!(check(keys::AFK_SECS, "240"), Ok(()));
        assert_eq!(check(keys::AFK_SECS, "soon"), Err("Not a number from 10 to 86400".into()));
        assert_eq!(check(keys::AFK_SECS, "5"), Err("Not a number from 10 to 86400".into()));
        assert!(check(keys::QUICK_PROMPT_HOTKEY, "ctrl+alt+Space").is_ok());
        assert!(check(keys::QUICK_PROMPT_HOTKEY, "ctrl+banana").unwrap_err().starts_with("Not a hotkey"));
        let regex = check(keys::DENIED_TITLES, "(?i)salary(").unwrap_err();
        assert!(!regex.contains("setting") && !regex.contains("keeping"), "{regex}");
        assert_eq!(check(keys::PROFILE, "anything at all"), Ok(()));
    }

    #[test]
    fn the_speed_floor_keeps_the_larger_model_off_a_machine_too_slow_for_it() {
        let (large, small) = (1_117_320_768, 636_896_128);
        assert!(meets_speed_floor(large, 2) && meets_speed_floor(small, 2));
        assert!(!meets_speed_floor(large, 1) && meets_speed_floor(small, 1));
        assert!(meets_speed_floor(large, 8));
    }

    #[test]
    fn measured_speed_here_overrules_the_estimate_once_there_is_enough_of_it() {
        use crate::llm::speed::{Sample, Speeds, TRUSTED_AFTER};
        let large = ResolvedModel { name: "qwen2.5-coder-1.5b-instruct".into(), path: "/m/qwen-1.5b.gguf".into(), size: 1_117_320_768, sha256: String::new() };
        let mut speeds = Speeds::default();
        assert!(fast_enough(&large, 2, &speeds), "estimated: 2.3 s on two cores");
        let slow = Sample { prompt_tokens: 700, first_token_ms: 5_200, completion_tokens: 30, tokens_per_sec: 4.0 };
        for _ in 1..TRUSTED_AFTER {
            speeds.record("qwen-1.5b.gguf", slow);
        }
        assert!(fast_enough(&large, 2, &speeds), "too few answers to go by");
        speeds.record("qwen-1.5b.gguf", slow);
        assert!(!fast_enough(&large, 2, &speeds), "this machine is slower than its cores say");
        // And a machine faster than its core count says keeps the larger model on one core.
        let mut fast = Speeds::default();
        for _ in 0..TRUSTED_AFTER {
            fast.record("qwen-1.5b.gguf", Sample { first_token_ms: 1_900, ..slow });
        }
        assert!(!fast_enough(&large, 1, &Speeds::default()) && fast_enough(&large, 1, &fast));
    }

    #[test]
    fn the_default_chat_model_is_the_best_installed_and_with_none_the_first_setup_installs() {
        let manifest = Manifest::bundled().unwrap();
        let chat: Vec<&crate::models::ManifestModel> = manifest.models.iter().filter(|m| m.role == ModelRole::Chat).collect();
        assert!(chat[0].optional, "the strongest chat model is first and installed on request");
        let empty = tempfile::tempdir().unwrap();
        let none = resolve_chat_model(&manifest, empty.path(), &[], None, &Default::default()).unwrap();
        assert_eq!(none.name, chat.iter().find(|m| !m.optional).unwrap().name, "names what setup installs");
        // Only the small model installed (a GGUF header is enough for the memory preflight): it answers.
        let dir = tempfile::tempdir().unwrap();
        let small = chat.iter().find(|m| m.name == "smollm2-135m-instruct").unwrap();
        let path = dir.path().join(small.primary_path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let real = crate::models::gguf::read_info(&Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(small.primary_path()));
        if real.is_ok() {
            std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(small.primary_path()), &path).unwrap();
            assert_eq!(resolve_chat_model(&manifest, dir.path(), &[], None, &Default::default()).unwrap().name, small.name);
        }
    }

    #[test]
    fn broken_values_fall_back_with_a_warning() {
        let pairs = vec![
            (keys::AFK_SECS.to_owned(), "abc".to_owned()),
            (keys::CONTEXT_BUDGET.to_owned(), "250".to_owned()),
            (keys::QUICK_PROMPT_HOTKEY.to_owned(), "ctrl+nope".to_owned()),
            (keys::SIDEBAR_GEOMETRY.to_owned(), "10,20,380,900".to_owned()),
        ];
        let (settings, warnings) = Settings::from_pairs(&pairs);
        assert_eq!(settings.afk_secs, 180);
        assert_eq!(settings.context_budget_tokens, 250);
        assert_eq!(settings.quick_prompt_hotkey, "ctrl+alt+Space");
        assert_eq!(settings.sidebar_geometry, Some([10.0, 20.0, 380.0, 900.0]));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("capture.afk_secs"));
    }

    #[test]
    fn default_hotkeys_parse() {
        let settings = Settings::default();
        assert!(settings.quick_prompt_hotkey.parse::<global_hotkey::hotkey::HotKey>().is_ok());
        assert!(settings.pause_hotkey.parse::<global_hotkey::hotkey::HotKey>().is_ok());
        assert!(settings.voice.hotkey.parse::<global_hotkey::hotkey::HotKey>().is_ok());
    }

    #[test]
    fn voice_settings_apply_and_bad_ones_keep_the_default() {
        let pairs: Vec<(String, String)> = [
            (keys::VOICE_MODE, "hold"),
            (keys::VOICE_SEND_ON_RELEASE, "true"),
            (keys::VOICE_SHORT_CLIP_CONTEXT, "false"),
            (keys::VOICE_IDLE_UNLOAD_SECS, "60"),
            (keys::VOICE_HOTKEY, "ctrl+nope"),
            (keys::VOICE_DICTATION, "maybe"),
            (keys::VOICE_LANGUAGE, "klingon"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (settings, warnings) = Settings::from_pairs(&pairs);
        assert_eq!(settings.voice.mode, crate::audio::ptt::PttMode::Hold);
        assert!(settings.voice.send_on_release && !settings.voice.short_clip_context);
        assert_eq!(settings.voice.idle_unload_secs, 60);
        assert_eq!(settings.voice.hotkey, "ctrl+alt+KeyV");
        assert!(!settings.voice.dictation, "dictation stays off by default");
        assert!(settings.voice.language.is_empty(), "an unknown language falls back to detection");
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        let (settings, warnings) = Settings::from_pairs(&[(keys::VOICE_LANGUAGE.to_owned(), " DE ".to_owned())]);
        assert_eq!((settings.voice.language.as_str(), warnings.len()), ("de", 0));
    }

    #[test]
    fn listen_mode_is_off_until_turned_on_and_consented() {
        assert!(!Settings::default().listen.active(), "off by default");
        let pairs = |list: &[(&str, &str)]| list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        let (on, _) = Settings::from_pairs(&pairs(&[(keys::LISTEN_ENABLED, "true")]));
        assert!(!on.listen.active(), "turned on without the consent question answered");
        let (on, _) = Settings::from_pairs(&pairs(&[(keys::LISTEN_ENABLED, "true"), (keys::LISTEN_CONSENTED, "true")]));
        assert!(on.listen.active() && on.listen.mic && !on.listen.system, "system audio needs its own yes");
        let (none, _) = Settings::from_pairs(&pairs(&[(keys::LISTEN_ENABLED, "true"), (keys::LISTEN_CONSENTED, "true"), (keys::LISTEN_MIC, "false")]));
        assert!(!none.listen.active(), "no stream chosen");
        let (kept, warnings) = Settings::from_pairs(&pairs(&[(keys::LISTEN_RETENTION_DAYS, "0"), (keys::LISTEN_AUDIO_RETENTION_DAYS, "0")]));
        assert_eq!((kept.listen.retention_days, kept.listen.audio_retention_days), (0, 7), "kept audio always expires");
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn privacy_rules_come_from_settings_and_a_broken_one_keeps_the_last_good() {
        let pairs = vec![
            (keys::DENIED_TITLES.to_owned(), "(?i)salary".to_owned()),
            (keys::DENIED_TITLES.to_owned(), "(broken".to_owned()),
            (keys::QUIET_HOURS.to_owned(), "22:00-07:00".to_owned()),
            (keys::PAUSED.to_owned(), "true".to_owned()),
        ];
        let (settings, warnings) = Settings::from_pairs(&pairs);
        let rules = settings.rules();
        assert_eq!(rules.denied_titles.iter().map(|r| r.as_str()).collect::<Vec<_>>(), vec!["(?i)salary"]);
        assert_eq!(rules.quiet_hours, vec![(22 * 60, 7 * 60)]);
        assert!(rules.paused);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("(broken"), "{warnings:?}");
    }
}
