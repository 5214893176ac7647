//! The Settings panel: preferences, keyboard shortcuts, workers, models and
//! About. It is an index of ten `Section`s and a search box; one `Page` per
//! frame decides which items show (a section's, or every item whose words hold
//! the searched ones, under its section's title). A setting typed as text
//! (`widgets::setting_text_ui`) is checked as it is typed (`config::check`, the
//! same rules `Settings::apply` uses) and applied when the field is left or
//! Enter is pressed; there are no Save buttons.

use egui::{RichText, ScrollArea};

use crate::build_info;
use crate::config::keys;
use crate::runtime::WorkerName;
use crate::state::{AppState, UiAction};
use crate::ui::{shortcuts, theme};
use crate::ui::widgets::setting_row_ui;

/// Which section is open, the search, and drafts of values being typed
/// (applied when the field is left).
#[derive(Default)]
pub struct SettingsPanel {
    /// None: the index of sections.
    pub section: Option<Section>,
    pub search: String,
    pub automation_hours: Option<String>,
    /// How often cowork may interrupt: urgent, helpful, informational per hour.
    pub notify_caps: [Option<String>; 3],
    /// Settings → Desktop: the GNOME extension's consent card is open.
    pub gnome_extension_consent: bool,
    pub afk_secs: Option<String>,
    pub hotkey: Option<String>,
    pub context_budget: Option<String>,
    pub document_folders: Option<String>,
    pub document_exclude: Option<String>,
    pub project_rules: Option<String>,
    pub calendar_sources: Option<String>,
    /// A CalDAV account's password or token being typed (secret name, text).
    pub calendar_password: (String, String),
    pub retention_days: Option<String>,
    pub screen_retention_days: Option<String>,
    pub pause_hotkey: Option<String>,
    /// Drafts of the privacy rule lists, by settings key.
    pub rules: std::collections::HashMap<&'static str, Option<String>>,
    /// What the Network section shows (filled by the app).
    pub network: NetworkView,
    pub memory: crate::ui::memory::MemoryPanel,
    /// The path typed into Settings → Models → Add.
    pub add_model_path: String,
    /// Settings → Agent drafts: steps, approval timeout, always-ask tools.
    pub agent_steps: Option<String>,
    pub approval_timeout: Option<String>,
    pub always_ask: Option<String>,
    pub integrations: crate::ui::integrations::IntegrationsPanel,
    /// Settings → Voice drafts.
    pub voice_hotkey: Option<String>,
    pub voice_language: Option<String>,
    pub voice_idle_unload: Option<String>,
    pub listen: crate::ui::voice::ListenPanel,
}

#[derive(Default)]
pub struct NewProvider {
    pub name: String,
    pub kind: Option<crate::brains::ProviderKind>,
    pub base_url: String,
    pub model: String,
    pub price_in: String,
    pub price_out: String,
    /// "" (the provider's default), off, minimal, low, medium, high.
    pub reasoning_effort: String,
    pub no_prompt_caching: bool,
}

/// Providers and the outbound-request log, for Settings → Network.
#[derive(Default)]
pub struct NetworkView {
    /// (name, kind, model, base URL)
    pub providers: Vec<(String, String, String, String)>,
    pub providers_error: Option<String>,
    pub log: Vec<crate::net::OutboundRecord>,
    /// Stored API keys, masked, by provider name; and where they are kept.
    pub keys: std::collections::BTreeMap<String, String>,
    pub secret_store: String,
    /// Drafts: a key being typed per provider, tiers, budgets.
    pub key_drafts: std::collections::BTreeMap<String, String>,
    pub tiers: Option<String>,
    /// The "Add a provider" form: name, kind, base URL, model, $ in, $ out per million tokens.
    pub new_provider: NewProvider,
    pub budgets: std::collections::BTreeMap<&'static str, Option<String>>,
    /// Web search: the address being typed, the key being typed, and whether a key is stored (masked).
    pub search_url: Option<String>,
    pub search_key: String,
    pub search_key_stored: Option<String>,
    /// What is typed to narrow each provider's model list.
    pub model_filters: std::collections::BTreeMap<String, String>,
}

/// A model file as Settings lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelView {
    pub name: String,
    pub role: crate::models::ModelRole,
    pub licence: String,
    pub size_bytes: u64,
    pub status: String,
    pub ok: bool,
    /// Installed only on request (Install / Remove buttons).
    pub optional: bool,
    /// One line on what it is for.
    pub summary: String,
    /// How it did on the project's evaluations, and how fast (chat models).
    pub evaluation: String,
    /// Its file's name: how the speed measured here is found (`AppState::model_speeds`).
    pub file_name: String,
    /// For an installed chat model: what answering with it needs.
    pub chat: Option<crate::config::ResolvedModel>,
}

/// Every model of the manifest as Settings lists it, checked by size (the
/// full checksum runs before a model is loaded).
pub fn model_views(manifest: &crate::models::Manifest, models_dir: &std::path::Path) -> Vec<ModelView> {
    use crate::models::{FileCheck, check_file};
    manifest
        .models
        .iter()
        .map(|model| {
            let (size, sha256) = model.primary_size_and_sha();
            let path = models_dir.join(model.primary_path());
            let check = check_file(&path, size, sha256, false);
            let status = match &check {
                FileCheck::Ok => "installed".to_owned(),
                FileCheck::Missing if model.optional => "not installed (optional)".to_owned(),
                other => other.describe(&path),
            };
            ModelView {
                name: model.name.clone(),
                role: model.role,
                licence: model.licence.clone(),
                size_bytes: size,
                status,
                ok: check.is_ok(),
                optional: model.optional,
                summary: model.summary.clone(),
                evaluation: model.evaluation.clone(),
                file_name: path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
                chat: (model.role == crate::models::ModelRole::Chat && check.is_ok()).then(|| crate::config::ResolvedModel::from_manifest(model, models_dir)),
            }
        })
        .collect()
}

/// The sections of Settings, in the order its index lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    General,
    Privacy,
    Brains,
    Memory,
    Agent,
    Voice,
    Integrations,
    Automations,
    Data,
    About,
}

impl Section {
    pub const ALL: [Section; 10] = [
        Section::General,
        Section::Privacy,
        Section::Brains,
        Section::Memory,
        Section::Agent,
        Section::Voice,
        Section::Integrations,
        Section::Automations,
        Section::Data,
        Section::About,
    ];

    pub fn title(self) -> &'static str {
        self.describe().0
    }

    /// Its title, and one line on what is in it (the index shows both).
    pub fn describe(self) -> (&'static str, &'static str) {
        match self {
            Section::General => ("General", "Start at login, hotkeys, when you count as away, this desktop, appearance"),
            Section::Privacy => ("What cowork records & privacy", "What is recorded, what never is, quiet hours, how long it is kept"),
            Section::Brains => ("Brains & network", "Local and cloud models, keys, budgets, offline mode, what left this computer"),
            Section::Memory => ("Memory", "Your profile, pinned facts, grounded answers, the last prompt"),
            Section::Agent => ("Agent & tools", "What the agent may do alone, approval rules, its tools, the audit log"),
            Section::Voice => ("Voice", "Push-to-talk, dictation, speech models, microphones, listen mode"),
            Section::Integrations => ("Integrations", "MCP servers cowork uses, and assistants that use cowork"),
            Section::Automations => ("Apps & automations", "Built-in routines and yours, how long their approvals wait"),
            Section::Data => ("Your data", "Delete a span, export, encryption, forget everything"),
            Section::About => ("About", "Version, the workers and their health"),
        }
    }
}

/// What one frame of a section shows: everything, or (searching) the items
/// whose words hold every searched word, under their section's title.
struct Page {
    words: Vec<String>,
    section: &'static str,
    heading_shown: bool,
    shown: usize,
}

impl Page {
    fn new(section: Section, search: &str) -> Self {
        let words = search.split_whitespace().map(str::to_lowercase).collect();
        Page { words, section: section.title(), heading_shown: search.trim().is_empty(), shown: 0 }
    }

    /// Whether the item described by `text` is shown (its section's title counts as its words too).
    fn shows(&mut self, ui: &mut egui::Ui, text: &str) -> bool {
        if !self.words.is_empty() {
            let haystack = format!("{text} {}", self.section).to_lowercase();
            if !self.words.iter().all(|w| haystack.contains(w.as_str())) {
                return false;
            }
        }
        if !self.heading_shown {
            self.heading_shown = true;
            ui.add_space(theme::SPACING);
            ui.label(RichText::new(self.section).heading());
        }
        self.shown += 1;
        true
    }
}

pub fn settings_ui(
    ui: &mut egui::Ui,
    state: &AppState,
    models: &[ModelView],
    panel: &mut SettingsPanel,
    actions: &mut Vec<UiAction>,
) {
    let searching = !panel.search.trim().is_empty();
    ui.horizontal(|ui| {
        if panel.section.is_some() && !searching && ui.button("All settings").clicked() {
            panel.section = None;
        }
        let search = egui::TextEdit::singleline(&mut panel.search).hint_text("Search settings").desired_width(ui.available_width());
        let response = ui.add(search);
        response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::TextInput, true, "Search settings"));
    });
    ui.add_space(theme::SPACING);
    ScrollArea::vertical().auto_shrink([false, false]).show(ui, |ui| {
        if searching {
            let mut shown = 0;
            for section in Section::ALL {
                let mut page = Page::new(section, &panel.search);
                section_ui(ui, section, &mut page, state, models, panel, actions);
                shown += page.shown;
            }
            if shown == 0 {
                ui.label(RichText::new(format!("No setting matches \"{}\"", panel.search.trim())).color(theme::muted()));
            }
            return;
        }
        match panel.section {
            None => {
                for section in Section::ALL {
                    let (title, summary) = section.describe();
                    let button = egui::Button::new(RichText::new(title).strong()).frame(false);
                    if ui.add(button).on_hover_text(summary).clicked() {
                        panel.section = Some(section);
                    }
                    ui.label(RichText::new(summary).small().color(theme::muted()));
                    ui.add_space(theme::SPACING);
                }
            }
            Some(section) => {
                ui.label(RichText::new(section.title()).heading());
                let mut page = Page::new(section, "");
                section_ui(ui, section, &mut page, state, models, panel, actions);
            }
        }
    });
}

fn section_ui(
    ui: &mut egui::Ui,
    section: Section,
    page: &mut Page,
    state: &AppState,
    models: &[ModelView],
    panel: &mut SettingsPanel,
    actions: &mut Vec<UiAction>,
) {
    match section {
        Section::General => general_ui(ui, page, state, panel, actions),
        Section::Privacy => privacy_ui(ui, page, state, panel, actions),
        Section::Brains => brains_ui(ui, page, state, models, panel, actions),
        Section::Memory => {
            if page.shows(ui, "profile pinned facts hot memory grounded answers embedding summarise prompt budget USER.md MEMORY.md") {
                crate::ui::memory::memory_ui(ui, state, &mut panel.memory, actions);
            }
            if page.shows(ui, "documents attached pdf word excel folders indexed excluded paths") {
                documents_ui(ui, state, panel, actions);
            }
            if page.shows(ui, "projects time per project timeline report rules count as client invoice tickets repositories") {
                projects_ui(ui, state, panel, actions);
            }
            if page.shows(ui, "calendar ics webcal caldav meetings events next meeting your day") {
                calendar_ui(ui, state, panel, actions);
            }
        }
        Section::Agent => agent_ui(ui, page, state, panel, actions),
        Section::Voice => {
            if page.shows(ui, "push-to-talk hotkey dictation speech whisper model language microphone listen mode transcripts") {
                voice_ui(ui, state, models, panel, actions);
            }
        }
        Section::Integrations => {
            if page.shows(ui, "MCP servers tools resources prompts sign in oauth assistants clients claude import") {
                crate::ui::integrations::integrations_ui(ui, state, &mut panel.integrations, actions);
            }
        }
        Section::Automations => automations_settings_ui(ui, page, state, panel, actions),
        Section::Data => data_ui(ui, page, state, actions),
        Section::About => about_ui(ui, page, state, actions),
    }
}

/// Settings → Memory → Documents: whether attached and agent-read documents
/// are kept searchable, the folders followed, the paths never kept.
fn documents_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    ui.label(RichText::new("Documents").strong());
    let mut keep = state.settings.remember_documents;
    if ui.checkbox(&mut keep, "Keep documents you attach or the agent reads searchable in memory").changed() {
        actions.push(UiAction::SaveSetting { key: keys::REMEMBER_DOCUMENTS.to_owned(), value: keep.to_string() });
    }
    crate::ui::widgets::setting_text_ui(
        ui,
        "Folders to keep searchable, followed as files change (one per line)",
        keys::DOCUMENT_FOLDERS,
        &state.settings.document_folders,
        &mut panel.document_folders,
        "~/Documents",
        true,
        actions,
    );
    crate::ui::widgets::setting_text_ui(
        ui,
        "Never keep these paths (one pattern per line; ** is any folders)",
        keys::DOCUMENT_EXCLUDE,
        &state.settings.document_exclude,
        &mut panel.document_exclude,
        "~/Taxes/**",
        true,
        actions,
    );
    ui.label(RichText::new("They are deleted with everything else of their time (Your data), or one by one: cowork documents list, cowork documents forget ID").small().color(theme::muted()));
}

/// Settings → Memory → Projects: the rules that say which windows count for
/// which project (the timeline, `cowork report`); without them cowork goes by
/// folders, repositories, ticket keys and names in titles.
fn projects_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    ui.label(RichText::new("Projects").strong());
    crate::ui::widgets::setting_text_ui(
        ui,
        "Count windows for a project when their title, app or address has one of its words (one project per line)",
        keys::PROJECT_RULES,
        &state.settings.projects,
        &mut panel.project_rules,
        "Atlas: ledger-svc, ATL, acme.example\nNo project: Hacker News",
        true,
        actions,
    );
    ui.label(
        RichText::new("A project's own name counts too; /…/ is a regular expression. Without a rule, folders (~/src/NAME), editors' folders, repositories, ticket keys (ATL-142) and names in titles decide. Report: cowork report --week --format csv")
            .small()
            .color(theme::muted()),
    );
}

/// Settings → Memory → Calendar: the calendars cowork reads (read-only), each
/// one's state, and a CalDAV account's password (kept in the secret store).
fn calendar_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    ui.label(RichText::new("Calendar").strong());
    crate::ui::widgets::setting_text_ui(
        ui,
        "Calendars to read (one per line): an .ics file, an https:// or webcal:// address, or caldav URL USER",
        keys::CALENDAR_SOURCES,
        &state.settings.calendar_sources,
        &mut panel.calendar_sources,
        "~/Calendars/team.ics\nwebcal://calendar.example.org/private-…/basic.ics\ncaldav https://dav.example.org/alice/ alice",
        true,
        actions,
    );
    for source in &state.calendar.sources {
        let (text, colour) = match (&source.error, source.read_at_millis) {
            (Some(error), _) => (format!("{}: {error}", source.label), theme::warn()),
            (None, Some(at)) => (format!("{}: {} events, read at {}", source.label, source.events, crate::ids::format_clock(at)), theme::muted()),
            (None, None) => (format!("{}: not read yet", source.label), theme::muted()),
        };
        ui.label(RichText::new(text).small().color(colour));
    }
    let accounts: Vec<String> = crate::calendar::parse_sources(&state.settings.calendar_sources).unwrap_or_default().iter().filter_map(crate::calendar::Source::secret_name).collect();
    for name in accounts {
        ui.horizontal(|ui| {
            let label = ui.label(RichText::new(format!("Password or token for {}", name.trim_start_matches("calendar:"))).small());
            let mut draft = if panel.calendar_password.0 == name { panel.calendar_password.1.clone() } else { String::new() };
            let field = ui.add(egui::TextEdit::singleline(&mut draft).password(true).desired_width(140.0)).labelled_by(label.id);
            if field.changed() {
                panel.calendar_password = (name.clone(), draft.clone());
            }
            if ui.add_enabled(!draft.trim().is_empty(), egui::Button::new("Keep")).on_hover_text("Kept in the secret store, never in the settings").clicked() {
                actions.push(UiAction::SaveCalendarPassword { name: name.clone(), secret: draft.trim().to_owned() });
                panel.calendar_password = Default::default();
            }
        });
    }
    ui.horizontal_wrapped(|ui| {
        if ui.small_button("Read now").clicked() {
            actions.push(UiAction::RefreshCalendar);
        }
        ui.label(
            RichText::new("Read only, over the outbound gate (offline: files only). Meetings show on the timeline, the next one in answers' context, and the automations' calendar trigger runs before them.")
                .small()
                .color(theme::muted()),
        );
    });
}

fn general_ui(ui: &mut egui::Ui, page: &mut Page, state: &AppState, panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    if page.shows(ui, "warnings invalid settings") {
        for warning in &state.setting_warnings {
            ui.label(RichText::new(warning).small().color(theme::warn()));
        }
    }
    if page.shows(ui, "start at login autostart tray set up again first run") {
        autostart_ui(ui, state, actions);
        if ui.button("Set up again").on_hover_text("The first run's pages: the brain, hotkeys, start at login").clicked() {
            actions.push(UiAction::OpenSetup);
        }
    }
    if page.shows(ui, "appearance theme dark light colours colors") {
        theme_choice_ui(ui, state, actions);
    }
    if page.shows(ui, "away afk idle seconds") {
        setting_row_ui(ui, "Away after (seconds without input)", keys::AFK_SECS, &state.settings.afk_secs.to_string(), &mut panel.afk_secs, actions);
    }
    if page.shows(ui, "quick prompt hotkey keyboard shortcut") {
        setting_row_ui(ui, "Quick prompt hotkey", keys::QUICK_PROMPT_HOTKEY, &state.settings.quick_prompt_hotkey, &mut panel.hotkey, actions);
    }
    if page.shows(ui, "pause hotkey keyboard shortcut capture") {
        setting_row_ui(ui, "Pause hotkey", keys::PAUSE_HOTKEY, &state.settings.pause_hotkey, &mut panel.pause_hotkey, actions);
    }
    if page.shows(ui, "keyboard shortcuts hotkeys keys") {
        ui.label(RichText::new("Keyboard shortcuts").strong());
        let quick = if state.desktop.as_ref().is_some_and(|d| !d.x11_decides()) {
            "Open the quick prompt from anywhere, once bound in your compositor (see Desktop below)"
        } else {
            "Open the quick prompt from anywhere"
        };
        shortcut_row_ui(ui, &state.settings.quick_prompt_hotkey, quick);
        for shortcut in shortcuts::SHORTCUTS {
            shortcut_row_ui(ui, &shortcuts::format(ui.ctx(), &shortcut.keys), shortcut.description);
        }
        for (keys, description) in shortcuts::WIDGET_KEYS {
            shortcut_row_ui(ui, keys, description);
        }
    }
    if page.shows(ui, "desktop wayland x11 gnome kde sway hyprland extension compositor bind hotkeys tray") {
        ui.label(RichText::new("Desktop").strong());
        crate::ui::desktop::desktop_ui(ui, state, &mut panel.gnome_extension_consent, actions);
    }
}

/// A key and what it does, wrapping under each other in a narrow sidebar.
fn shortcut_row_ui(ui: &mut egui::Ui, keys: &str, description: &str) {
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new(keys).monospace());
        ui.label(RichText::new(description).color(theme::muted()));
    });
}

/// Follow the desktop's light or dark preference, or choose one.
fn theme_choice_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    ui.horizontal_wrapped(|ui| {
        let label = ui.label("Appearance");
        for (value, text) in [("system", "Follow the desktop"), ("light", "Light"), ("dark", "Dark")] {
            if ui.radio(state.settings.theme == value, text).labelled_by(label.id).clicked() && state.settings.theme != value {
                actions.push(UiAction::SaveSetting { key: keys::THEME.to_owned(), value: value.to_owned() });
            }
        }
    });
}

fn privacy_ui(ui: &mut egui::Ui, page: &mut Page, state: &AppState, panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    if page.shows(ui, "record windows typing keys clipboard streams screen text ocr") {
        crate::ui::consent::streams_settings_ui(ui, state, actions);
    }
    if page.shows(ui, "pause all capture") {
        let mut paused = state.settings.privacy.paused;
        if ui.checkbox(&mut paused, format!("Pause all capture ({})", state.settings.pause_hotkey)).changed() {
            actions.push(UiAction::TogglePause);
        }
    }
    if page.shows(ui, "private incognito windows browser accessibility address bar url") {
        privacy_switches_ui(ui, state, actions);
    }
    if page.shows(ui, "never record apps titles domains quiet hours rules exclude firewall") {
        privacy_lists_ui(ui, state, panel, actions);
    }
    if page.shows(ui, "keep window history retention days") {
        setting_row_ui(
            ui,
            "Keep window history (days, 0 keeps all)",
            keys::WINDOW_RETENTION_DAYS,
            &state.settings.window_retention_days.to_string(),
            &mut panel.retention_days,
            actions,
        );
    }
    if state.settings.screen.consented && page.shows(ui, "keep screen text retention days") {
        setting_row_ui(
            ui,
            "Keep screen text (days, 0 keeps all)",
            keys::SCREEN_RETENTION_DAYS,
            &state.settings.screen.retention_days.to_string(),
            &mut panel.screen_retention_days,
            actions,
        );
    }
}

fn brains_ui(ui: &mut egui::Ui, page: &mut Page, state: &AppState, models: &[ModelView], panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    if page.shows(ui, "offline cloud local prefer answer with tiers budgets dollars cost providers keys api outbound requests network") {
        network_ui(ui, state, &mut panel.network, actions);
    }
    if page.shows(ui, "web search searxng brave tavily kagi perplexity openai internet look up key") {
        web_search_ui(ui, state, &mut panel.network, actions);
    }
    if page.shows(ui, "context budget tokens recent activity prompt") {
        setting_row_ui(
            ui,
            "Recent activity in each prompt (tokens)",
            keys::CONTEXT_BUDGET,
            &state.settings.context_budget_tokens.to_string(),
            &mut panel.context_budget,
            actions,
        );
    }
    if page.shows(ui, "models chat model download install gguf memory preflight whisper embeddings") {
        models_ui(ui, state, models, panel, actions);
    }
}

/// `llm.keep_warm`, with what it costs: the memory the loaded model holds
/// (measured when it loaded, else the preflight's estimate).
fn keep_warm_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    let mut keep = state.settings.keep_warm;
    if ui.checkbox(&mut keep, "Keep the chat model loaded and your context prefilled, so the first answer is quick").changed() {
        actions.push(UiAction::SaveSetting { key: keys::KEEP_WARM.to_owned(), value: keep.to_string() });
    }
    let cost = match &state.model {
        Some(crate::llm::events::ModelStatus::Ready { resident_bytes, .. }) if *resident_bytes > 0 => format!("The loaded model holds {} MB of memory", resident_bytes / 1_000_000),
        _ => "Loaded, the model holds about its file's size in memory (the preflight above)".to_owned(),
    };
    ui.label(
        RichText::new(format!(
            "{cost}; cowork keeps it only where that is under an eighth of the RAM, unloads it on battery, when hot or short of memory, and prefills only while you are not typing and the computer is idle."
        ))
        .small()
        .color(theme::muted()),
    );
}

fn models_ui(ui: &mut egui::Ui, state: &AppState, models: &[ModelView], panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    ui.label(RichText::new("Models").strong());
    if let Some(preflight) = &state.model_preflight {
        let colour = if preflight.starts_with("GREEN") { theme::ok() } else if preflight.starts_with("YELLOW") { theme::warn() } else { theme::error() };
        ui.label(RichText::new(format!("Memory preflight: {preflight}")).small().color(colour));
    }
    keep_warm_ui(ui, state, actions);
    ui.horizontal_wrapped(|ui| {
        if ui.button("Load the chat model now").clicked() {
            actions.push(UiAction::LoadModel);
        }
        if ui.button("Download missing models").clicked() {
            actions.push(UiAction::FetchModels);
        }
    });
    for (path, (done, total, error)) in &state.downloads {
        match error {
            Some(error) => ui.label(RichText::new(format!("{path}: {error}")).small().color(theme::error())),
            None => ui.add(egui::ProgressBar::new(*done as f32 / (*total).max(1) as f32).text(format!("{path}: {:.0} of {:.0} MB", *done as f64 / 1e6, *total as f64 / 1e6))),
        };
    }
    chat_model_ui(ui, state, models, panel, actions);
    for model in models {
        ui.separator();
        let role = format!("{:?}", model.role).to_lowercase();
        ui.horizontal_wrapped(|ui| {
            ui.label(RichText::new(&model.name).strong());
            ui.label(RichText::new(format!("{role} · {} · {:.0} MB", model.licence, model.size_bytes as f64 / 1e6)).small());
        });
        // The project's figures, then this machine's own (chat models that have answered here).
        let here = match state.model_speeds.get(&model.file_name) {
            Some(measured) => measured.describe(),
            None if model.chat.is_some() => "Not measured on this machine yet: its first answers here measure it.".to_owned(),
            None => String::new(),
        };
        for line in [&model.summary, &model.evaluation, &here] {
            if !line.is_empty() {
                ui.label(RichText::new(line).small().color(theme::muted()));
            }
        }
        ui.horizontal_wrapped(|ui| {
            let colour = if model.ok { theme::ok() } else if model.optional { theme::muted() } else { theme::error() };
            ui.label(RichText::new(&model.status).small().color(colour));
            if model.optional {
                let busy = state.model_jobs.contains(&model.name);
                // Each button says which model it is for (a screen reader lists several).
                let named = |response: egui::Response, verb: &str| {
                    let enabled = response.enabled();
                    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Button, enabled, format!("{verb} {}", model.name)));
                    response
                };
                if model.ok {
                    let remove = named(ui.add_enabled(!busy, egui::Button::new("Remove").small()), "Remove");
                    if remove.on_hover_text("Delete its files to free the disk").clicked() {
                        actions.push(UiAction::RemoveModel(model.name.clone()));
                    }
                } else {
                    let install = ui.add_enabled(!busy, egui::Button::new(if busy { "Installing…" } else { "Install" }).small());
                    let install = if busy { install } else { named(install, "Install") };
                    if install.on_hover_text("Download, verify by sha256 and convert on this computer").clicked() {
                        actions.push(UiAction::InstallModel(model.name.clone()));
                    }
                }
            }
        });
    }
}

/// Settings → Apps & automations: the routines cowork knows by their human
/// names, how long an automation's approval waits.
fn automations_settings_ui(ui: &mut egui::Ui, page: &mut Page, state: &AppState, panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    if page.shows(ui, "automation approval waits hours expire") {
        setting_row_ui(
            ui,
            "An automation's approval waits (hours)",
            keys::AUTOMATION_APPROVAL_HOURS,
            &state.settings.automation_approval_hours.to_string(),
            &mut panel.automation_hours,
            actions,
        );
    }
    if page.shows(ui, "notifications interrupt budget per hour how often suggestions urgent helpful informational") {
        ui.label(RichText::new("How often cowork may interrupt you").strong())
            .on_hover_text("Notifications shown per hour at most, by how much they matter; what is over waits in the Apps tab's inbox. Every notification says why it appeared.");
        let s = &state.settings;
        let rows = [
            ("Urgent (approvals, calls) per hour", keys::NOTIFY_URGENT_PER_HOUR, s.notify_urgent_per_hour),
            ("Helpful per hour", keys::NOTIFY_HELPFUL_PER_HOUR, s.notify_helpful_per_hour),
            ("Informational per hour", keys::NOTIFY_INFORMATIONAL_PER_HOUR, s.notify_informational_per_hour),
        ];
        for ((label, key, value), draft) in rows.into_iter().zip(panel.notify_caps.iter_mut()) {
            setting_row_ui(ui, label, key, &value.to_string(), draft, actions);
        }
    }
    if page.shows(ui, "routines built-in automations schedule enabled") {
        ui.label(RichText::new("Automations").strong());
        if state.automations.flows.is_empty() {
            ui.label(RichText::new("No automations yet").small().color(theme::muted()));
        }
        for flow in &state.automations.flows {
            let mut on = flow.enabled;
            if ui.checkbox(&mut on, flow.title()).changed() {
                actions.push(UiAction::AutomationEnable { name: flow.name.clone(), enabled: on });
            }
            if !flow.description.is_empty() {
                ui.label(RichText::new(&flow.description).small().color(theme::muted()));
            }
        }
    }
    if page.shows(ui, "apps installed sandbox") {
        ui.label(RichText::new("Apps").strong());
        if state.apps.installed.is_empty() {
            ui.label(RichText::new("No apps installed").small().color(theme::muted()));
        }
        for app in &state.apps.installed {
            ui.label(format!("{} {}", app.row.name, app.row.version));
            ui.label(RichText::new(&app.description).small().color(theme::muted()));
        }
        if ui.button("Open the Apps tab").clicked() {
            actions.push(UiAction::SwitchTab(crate::state::Tab::Apps));
        }
    }
}

fn data_ui(ui: &mut egui::Ui, page: &mut Page, state: &AppState, actions: &mut Vec<UiAction>) {
    if page.shows(ui, "delete last minutes hour day span range") {
        ui.horizontal_wrapped(|ui| {
            for (label, span_millis) in [("Delete last 15 minutes", 15 * 60_000), ("Delete last hour", 3_600_000), ("Delete last day", 86_400_000)] {
                if ui.button(label).clicked() {
                    actions.push(UiAction::DeleteRecent { span_millis });
                }
            }
        });
    }
    if page.shows(ui, "export json activitywatch") {
        ui.horizontal_wrapped(|ui| {
            if ui.button("Export today as JSON Lines").clicked() {
                actions.push(UiAction::ExportToday(crate::export::Format::JsonLines));
            }
            if ui.button("Export today for ActivityWatch").clicked() {
                actions.push(UiAction::ExportToday(crate::export::Format::ActivityWatch));
            }
        });
        ui.label(RichText::new("Exports are plain text, not encrypted: they are for taking elsewhere. They are written to the data directory; `cowork export` takes any range").small().color(theme::muted()));
    }
    if page.shows(ui, "encryption encrypted key secret store sqlcipher") {
        ui.label(
            RichText::new(
                "Encrypted at rest: the database (SQLCipher), its search indexes and kept audio, under a key in the system secret store or, without one, in secrets.key beside them (`cowork doctor` says which). USER.md and MEMORY.md in the data directory stay plain text so you can read and edit them by hand",
            )
            .small()
            .color(theme::muted()),
        );
    }
    if page.shows(ui, "forget everything remove all data uninstall") {
        your_data_ui(ui, state, actions);
    }
}

fn about_ui(ui: &mut egui::Ui, page: &mut Page, state: &AppState, actions: &mut Vec<UiAction>) {
    if page.shows(ui, "version build about") {
        ui.label(format!("cowork {}", build_info::long_version()));
        ui.label(RichText::new("Everything cowork captures stays in one SQLite file on this computer").small().color(theme::muted()));
    }
    if page.shows(ui, "workers health running failed retry status") {
        ui.label(RichText::new("Workers").strong());
        for worker in WorkerName::ALL {
            let worker_state = state.worker_state(worker);
            let (title, what) = worker.describe();
            ui.horizontal_wrapped(|ui| {
                ui.label(title);
                ui.label(RichText::new(worker_state.label()).color(theme::worker_colour(&worker_state)));
                if matches!(worker_state, crate::runtime::WorkerState::Failed { .. }) && ui.small_button("Retry").clicked() {
                    actions.push(UiAction::RetryWorker(worker));
                }
            });
            ui.label(RichText::new(what).small().color(theme::muted()));
        }
    }
}

/// Settings → Agent & tools: whether chat questions run as operations with
/// tools, the limits, the tools that always ask, the approval rules (each
/// removable), the built-in tools by name, and the newest audit entries
/// (`cowork audit` has them all).
fn agent_ui(ui: &mut egui::Ui, page: &mut Page, state: &AppState, panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    if page.shows(ui, "answer with tools agent on off") {
        let mut on = state.settings.agent;
        if ui.checkbox(&mut on, "Answer with tools (the agent)").on_hover_text("Off: chat answers from what cowork recorded, without acting").changed() {
            actions.push(UiAction::SaveSetting { key: keys::AGENT.to_owned(), value: on.to_string() });
        }
    }
    if page.shows(ui, "steps per task limit") {
        setting_row_ui(ui, "Steps per task at most", keys::AGENT_MAX_STEPS, &state.settings.agent_max_steps.to_string(), &mut panel.agent_steps, actions);
    }
    if page.shows(ui, "approval timeout deny unanswered seconds") {
        setting_row_ui(
            ui,
            "Deny an unanswered approval after (seconds)",
            keys::APPROVAL_TIMEOUT,
            &state.settings.approval_timeout_secs.to_string(),
            &mut panel.approval_timeout,
            actions,
        );
    }
    if page.shows(ui, "tools that always ask approval") {
        setting_row_ui(ui, "Tools that always ask (comma-separated)", keys::ALWAYS_ASK, &state.settings.always_ask.join(", "), &mut panel.always_ask, actions);
    }
    if page.shows(ui, "built-in tools what the agent can do risk") {
        egui::CollapsingHeader::new(format!("Built-in tools ({})", crate::tools::registry::TOOLS.len())).show(ui, |ui| {
            for tool in crate::tools::registry::TOOLS {
                ui.horizontal_wrapped(|ui| {
                    ui.label(tool.title);
                    let colour = if tool.risk == crate::tools::Risk::Safe { theme::muted() } else { theme::warn() };
                    let risk = if tool.risk == crate::tools::Risk::Safe { "runs at once" } else { "asks first" };
                    ui.label(RichText::new(risk).small().color(colour));
                });
                ui.label(RichText::new(tool.description).small().color(theme::muted()));
            }
        });
    }
    if !page.shows(ui, "approval rules always allow audit log") {
        return;
    }
    ui.label(RichText::new("Approval rules (an approval card's \"Always allow\" adds one; `cowork rules add` too)").strong());
    let Some((rules, problems, audit)) = &state.agent_overview else {
        ui.label(RichText::new("loading…").small().color(theme::muted()));
        return;
    };
    if rules.is_empty() {
        ui.label(RichText::new("No rules: safe calls run, the others ask").small().color(theme::muted()));
    }
    for (id, text) in rules {
        ui.label(RichText::new(text).monospace().small());
        if ui.small_button("Remove").clicked() {
            actions.push(UiAction::RemoveRule(*id));
        }
    }
    for problem in problems {
        ui.label(RichText::new(problem).small().color(theme::warn()));
    }
    ui.label(RichText::new(format!("Audit log, newest first ({} shown; `cowork audit` has all)", audit.len())).strong());
    ScrollArea::vertical().id_salt("audit").max_height(180.0).show(ui, |ui| {
        if audit.is_empty() {
            ui.label(RichText::new("No tool has been called yet").small().color(theme::muted()));
        }
        for line in audit {
            ui.label(RichText::new(line).monospace().small());
        }
    });
}

fn voice_ui(ui: &mut egui::Ui, state: &AppState, models: &[ModelView], panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    let voice = &state.settings.voice;
    ui.label(RichText::new("Speech is transcribed on this computer (Whisper); the microphone is open only while you talk to cowork").small().color(theme::muted()));
    setting_row_ui(ui, "Push-to-talk hotkey", keys::VOICE_HOTKEY, &voice.hotkey, &mut panel.voice_hotkey, actions);
    ui.horizontal_wrapped(|ui| {
        let label = ui.label("The hotkey");
        for (mode, text) in [
            (crate::audio::ptt::PttMode::Auto, "hold to talk, tap to toggle"),
            (crate::audio::ptt::PttMode::Hold, "hold to talk"),
            (crate::audio::ptt::PttMode::Toggle, "tap to start and stop"),
        ] {
            if ui.radio(voice.mode == mode, text).labelled_by(label.id).clicked() && voice.mode != mode {
                actions.push(UiAction::SaveSetting { key: keys::VOICE_MODE.to_owned(), value: mode.as_str().to_owned() });
            }
        }
    });
    for (key, on, text, hover) in [
        (keys::VOICE_SEND_ON_RELEASE, voice.send_on_release, "Send when I release", "Off: the words wait in the input, to edit"),
        (keys::VOICE_SHORT_CLIP_CONTEXT, voice.short_clip_context, "Faster transcription of short clips", "Whisper looks at a window sized to the clip instead of 30 s"),
        (
            keys::VOICE_DICTATION,
            voice.dictation,
            "Dictation: the hotkey types into the app you are in",
            "Instead of opening the quick prompt, the words are typed into the focused app (X11). Enter and Tab are never pressed.",
        ),
    ] {
        let mut value = on;
        if ui.checkbox(&mut value, text).on_hover_text(hover).changed() {
            actions.push(UiAction::SaveSetting { key: key.to_owned(), value: value.to_string() });
        }
    }
    let speech: Vec<(&str, bool)> = models.iter().filter(|m| m.role == crate::models::ModelRole::Speech).map(|m| (m.name.as_str(), m.ok)).collect();
    crate::ui::voice::speech_model_ui(ui, &voice.model, &speech, actions);
    setting_row_ui(ui, "Language, multilingual models (e.g. de; empty: detect)", keys::VOICE_LANGUAGE, &voice.language, &mut panel.voice_language, actions);
    crate::ui::voice::microphone_ui(ui, &voice.device, state.voice.devices.as_ref(), actions);
    setting_row_ui(ui, "Unload Whisper after (seconds idle, 0 never)", keys::VOICE_IDLE_UNLOAD_SECS, &voice.idle_unload_secs.to_string(), &mut panel.voice_idle_unload, actions);
    if let (Some(open), Some(text)) = (state.voice.first_sample_millis, state.voice.release_to_text_millis) {
        ui.label(RichText::new(format!("Last utterance: microphone ready {open} ms after the key, text {text} ms after release")).small().color(theme::muted()));
    }
    crate::ui::voice::listen_ui(ui, state, &mut panel.listen, actions);
}

/// Private windows and desktop accessibility (for browsers' address bars).
fn privacy_switches_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    let privacy = &state.settings.privacy;
    let mut private = privacy.exclude_private_windows;
    if ui.checkbox(&mut private, "Skip private and incognito windows").changed() {
        actions.push(UiAction::SaveSetting { key: keys::PRIVATE_WINDOWS.to_owned(), value: private.to_string() });
    }
    let mut accessibility = state.settings.desktop_accessibility;
    if ui.checkbox(&mut accessibility, "Turn on desktop accessibility while cowork runs").changed() {
        actions.push(UiAction::SaveSetting { key: keys::DESKTOP_ACCESSIBILITY.to_owned(), value: accessibility.to_string() });
    }
    ui.label(
        RichText::new(
            "Browsers show cowork their address bar only when it is on as they start (restart a browser opened before; \
             Chromium also needs --force-renderer-accessibility); off, URLs come from window titles. \
             cowork turns it off again when it quits",
        )
        .small()
        .color(theme::muted()),
    );
}

/// The firewall's lists, checked before anything is recorded; each applied when its field is left.
fn privacy_lists_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    let privacy = &state.settings.privacy;
    ui.label(RichText::new("Checked before anything is recorded, for every stream").small().color(theme::muted()));
    for (key, label, current, hint) in [
        (keys::DENIED_APPS, "Never record these apps", &privacy.denied_apps, "keepassxc, bitwarden"),
        (keys::ALLOWED_APPS, "Record only these apps (empty: all)", &privacy.allowed_apps, "code, firefox"),
        (keys::DENIED_TITLES, "Skip titles matching (one regex per line)", &privacy.denied_titles, "(?i)salary"),
        (keys::DENIED_DOMAINS, "Skip these domains and their subdomains", &privacy.denied_domains, "bank.example"),
        (keys::QUIET_HOURS, "Quiet hours", &privacy.quiet_hours, "22:00-07:00"),
    ] {
        let draft = panel.rules.entry(key).or_default();
        crate::ui::widgets::setting_text_ui(ui, label, key, current, draft, hint, key != keys::QUIET_HOURS, actions);
    }
}

/// "Start cowork when I log in" and "only the tray icon": the first run's page and Settings.
pub fn autostart_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    let mut autostart = state.setup.autostart;
    if ui.checkbox(&mut autostart, "Start cowork when I log in").changed() {
        actions.push(UiAction::SetAutostart(autostart));
    }
    let mut in_tray = state.settings.start_in_tray;
    let tray_text = "At login, show only the tray icon (the sidebar opens from it)";
    if ui.add_enabled(autostart && state.setup.tray, egui::Checkbox::new(&mut in_tray, tray_text)).changed() {
        actions.push(UiAction::SaveSetting { key: keys::START_IN_TRAY.to_owned(), value: in_tray.to_string() });
    }
    if !state.setup.tray {
        ui.label(RichText::new("This desktop shows no tray icons: at login the sidebar opens").small().color(theme::muted()));
    }
}

/// Forget everything: what goes is listed first, then confirmed.
fn your_data_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    match &state.forget {
        None => {
            ui.label(RichText::new("Everything cowork keeps stays on this computer. Export or delete a range in Context; this removes it all.").small().color(theme::muted()));
            if ui.button("Forget everything…").clicked() {
                actions.push(UiAction::AskForgetEverything);
            }
        }
        Some(None) => {
            ui.label(RichText::new("Listing what cowork keeps…").small().color(theme::muted()));
        }
        Some(Some(Err(reason))) => {
            ui.label(RichText::new(reason).small().color(theme::error()));
            if ui.button("Close").clicked() {
                actions.push(UiAction::CancelForget);
            }
        }
        Some(Some(Ok(lines))) => {
            egui::Frame::group(ui.style()).stroke(egui::Stroke::new(1.0, theme::error())).show(ui, |ui| {
                ui.label(RichText::new("This removes, for good, and cowork quits:").strong());
                for line in lines {
                    ui.label(RichText::new(format!("• {line}")).small());
                }
                ui.horizontal_wrapped(|ui| {
                    if ui.button(RichText::new("Forget everything and quit").color(theme::error())).clicked() {
                        actions.push(UiAction::ForgetEverything);
                    }
                    if ui.button("Cancel").clicked() {
                        actions.push(UiAction::CancelForget);
                    }
                });
            });
        }
    }
}

fn network_ui(ui: &mut egui::Ui, state: &AppState, network: &mut NetworkView, actions: &mut Vec<UiAction>) {
    let mut offline = state.settings.offline;
    if ui.checkbox(&mut offline, "Offline: no connection except to this computer (loopback)").changed() {
        actions.push(UiAction::SaveSetting { key: keys::OFFLINE.to_owned(), value: offline.to_string() });
    }
    ui.horizontal_wrapped(|ui| {
        ui.label("Answer with");
        for preference in [crate::brains::Preference::Local, crate::brains::Preference::Cloud] {
            let label = if preference == crate::brains::Preference::Local { "local model first" } else { "cloud first" };
            if ui.radio(state.settings.prefer == preference, label).clicked() {
                actions.push(UiAction::SaveSetting { key: keys::PREFER.to_owned(), value: preference.as_str().to_owned() });
            }
        }
    });
    setting_row_ui(ui, "Cloud tiers, cheapest first", keys::TIERS, &state.settings.tiers.join(", "), &mut network.tiers, actions);
    let budget = &state.settings.budget;
    for (key, label, value) in [
        (keys::BUDGET_INTERACTION, "Max $ per answer", budget.per_interaction_usd.to_string()),
        (keys::BUDGET_DAILY, "Max $ per day", budget.daily_usd.to_string()),
        (keys::BUDGET_WEEKLY, "Max $ per week", budget.weekly_usd.to_string()),
        (keys::BUDGET_MONTHLY, "Max $ per month", budget.monthly_usd.to_string()),
        (keys::BUDGET_FREE_TOKENS, "Free tokens per month", budget.monthly_free_tokens.to_string()),
    ] {
        setting_row_ui(ui, label, key, &value, network.budgets.entry(key).or_default(), actions);
    }
    ui.label(RichText::new("Providers (providers.json in the data directory)").strong());
    if let Some(error) = &network.providers_error {
        ui.label(RichText::new(error).small().color(theme::error()));
    }
    if network.providers.is_empty() {
        ui.label(RichText::new("None configured: only the local model answers").small().color(theme::muted()));
    }
    for (name, kind, model, base) in network.providers.clone() {
        let name = &name;
        let model = &model;
        ui.label(RichText::new(format!("{name} · {kind} · {model} · {base}")).small());
        ui.horizontal_wrapped(|ui| {
            let stored = network.keys.get(name).cloned().unwrap_or_else(|| "no key stored".into());
            let label = ui.label(RichText::new(format!("key: {stored}")).small().color(theme::muted()));
            let draft = network.key_drafts.entry(name.clone()).or_default();
            ui.add(egui::TextEdit::singleline(draft).password(true).desired_width(120.0).hint_text("paste a new key")).labelled_by(label.id);
            if ui.add_enabled(!draft.trim().is_empty(), egui::Button::new("Save key")).clicked() {
                actions.push(UiAction::SaveKey { provider: name.clone(), key: std::mem::take(draft).trim().to_owned() });
            }
            if ui.small_button(format!("Remove {name}")).clicked() {
                actions.push(UiAction::RemoveProvider(name.clone()));
            }
        });
        let filter = network.model_filters.entry(name.clone()).or_default();
        if let Some(model) = model_picker_ui(ui, state, name, model, filter, || UiAction::ListModels { name: name.clone(), draft: None }, actions) {
            actions.push(UiAction::SetProviderModel { provider: name.clone(), model });
        }
    }
    egui::CollapsingHeader::new("Add or change a provider").show(ui, |ui| new_provider_ui(ui, network, actions));
    if !network.secret_store.is_empty() {
        ui.label(RichText::new(format!("Keys are kept in {}", network.secret_store)).small().color(theme::muted()));
    }
    egui::CollapsingHeader::new(format!("Outbound requests ({})", network.log.len())).show(ui, |ui| {
        if network.log.is_empty() {
            ui.label(RichText::new("No connection has left this computer since cowork started").small().color(theme::muted()));
        }
        for record in network.log.iter().rev().take(50) {
            let text = match &record.refused {
                None => format!("{} {} · {} · {} B out, {} B in", crate::ids::user_clock(record.at_millis), record.destination(), record.purpose, record.bytes_out, record.bytes_in),
                Some(reason) => format!("{} {} · {} · refused: {reason}", crate::ids::user_clock(record.at_millis), record.destination(), record.purpose),
            };
            ui.label(RichText::new(text).small().color(if record.refused.is_some() { theme::warn() } else { theme::muted() }));
        }
    });
}

/// A provider's models to pick from: "Models…" asks the provider for its list
/// (on its own thread); the list shows each model's context window and price
/// where known, narrowed by what is typed. Returns the model picked this frame.
pub fn model_picker_ui(
    ui: &mut egui::Ui,
    state: &AppState,
    provider: &str,
    current: &str,
    filter: &mut String,
    ask: impl FnOnce() -> UiAction,
    actions: &mut Vec<UiAction>,
) -> Option<String> {
    let listed = state.model_lists.get(provider);
    let mut picked = None;
    ui.horizontal_wrapped(|ui| {
        let label = if listed.is_some() { format!("Refresh {provider}'s models") } else { format!("Models of {provider}…") };
        if ui.add_enabled(!matches!(listed, Some(None)), egui::Button::new(RichText::new(label).small())).on_hover_text("Ask the provider which models it offers").clicked() {
            actions.push(ask());
        }
        if matches!(listed, Some(None)) {
            ui.spinner();
            ui.label(RichText::new(format!("asking {provider}…")).small().color(theme::muted()));
        }
    });
    match listed {
        Some(Some(Err(err))) => {
            ui.add(egui::Label::new(RichText::new(err).small().color(theme::error())).wrap());
        }
        Some(Some(Ok(models))) => {
            ui.horizontal(|ui| {
                let label = ui.label(RichText::new(format!("{} models; find", models.len())).small());
                ui.add(egui::TextEdit::singleline(filter).desired_width(ui.available_width().min(200.0)).hint_text("name")).labelled_by(label.id);
            });
            let needle = filter.trim().to_lowercase();
            let shown: Vec<&crate::brains::catalog::ModelInfo> =
                models.iter().filter(|m| needle.is_empty() || m.id.to_lowercase().contains(&needle) || m.display_name.as_ref().is_some_and(|n| n.to_lowercase().contains(&needle))).collect();
            ScrollArea::vertical().id_salt(("models", provider)).max_height(180.0).show(ui, |ui| {
                for model in shown.iter().take(60) {
                    let line = model.describe();
                    if ui.add(egui::Button::selectable(model.id == current, RichText::new(line).small()).wrap_mode(egui::TextWrapMode::Wrap)).clicked() && model.id != current {
                        picked = Some(model.id.clone());
                    }
                }
                if shown.len() > 60 {
                    ui.label(RichText::new(format!("and {} more: type to narrow", shown.len() - 60)).small().color(theme::muted()));
                }
            });
            ui.label(RichText::new(format!("Prices per million tokens (in / out); known ones from {}", crate::brains::prices::source())).small().color(theme::muted()));
        }
        _ => {}
    }
    picked
}

/// Settings → Brains & network → Web search: which service the agent's
/// `web_search` asks, its address and its key (kept in the secret store).
fn web_search_ui(ui: &mut egui::Ui, state: &AppState, network: &mut NetworkView, actions: &mut Vec<UiAction>) {
    use crate::tools::web_search::Provider;
    ui.label(RichText::new("Web search").strong());
    ui.label(RichText::new("The agent searches the web through the service you choose; every search asks first unless a rule allows it, and offline mode refuses it.").small().color(theme::muted()));
    let current = Provider::parse(&state.settings.web_search_provider);
    ui.horizontal_wrapped(|ui| {
        if ui.radio(current.is_none(), "None").clicked() && current.is_some() {
            actions.push(UiAction::SaveSetting { key: keys::WEB_SEARCH_PROVIDER.to_owned(), value: String::new() });
        }
        for provider in Provider::ALL {
            if ui.radio(current == Some(provider), provider.title()).clicked() && current != Some(provider) {
                actions.push(UiAction::SaveSetting { key: keys::WEB_SEARCH_PROVIDER.to_owned(), value: provider.as_str().to_owned() });
                network.search_key_stored = None;
            }
        }
    });
    let Some(provider) = current else { return };
    let hint = match provider.default_url() {
        Some(url) => format!("Address (empty: {url})"),
        None => "Address of your SearXNG (its JSON format switched on)".to_owned(),
    };
    setting_row_ui(ui, &hint, keys::WEB_SEARCH_URL, &state.settings.web_search_url, &mut network.search_url, actions);
    if provider.needs_key() {
        ui.horizontal_wrapped(|ui| {
            let stored = network.search_key_stored.clone().unwrap_or_else(|| "no key saved here yet".into());
            let label = ui.label(RichText::new(format!("{} key: {stored}", provider.title())).small().color(theme::muted()));
            ui.add(egui::TextEdit::singleline(&mut network.search_key).password(true).desired_width(140.0).hint_text("paste the key")).labelled_by(label.id);
            if ui.add_enabled(!network.search_key.trim().is_empty(), egui::Button::new("Save search key")).clicked() {
                let key = std::mem::take(&mut network.search_key).trim().to_owned();
                network.search_key_stored = Some(crate::secrets::mask(&key));
                actions.push(UiAction::SaveSearchKey { provider: provider.as_str().to_owned(), key });
            }
        });
    }
}

fn new_provider_ui(ui: &mut egui::Ui, network: &mut NetworkView, actions: &mut Vec<UiAction>) {
    use crate::brains::ProviderKind;
    let form = &mut network.new_provider;
    for (label, field, hint) in [
        ("Name", &mut form.name, "groq"),
        ("Base URL (empty: the known one)", &mut form.base_url, "https://api.groq.com/openai/v1"),
        ("Model", &mut form.model, "llama-3.3-70b-versatile"),
        ("$ per million input tokens", &mut form.price_in, "0"),
        ("$ per million output tokens", &mut form.price_out, "0"),
    ] {
        let label = ui.label(RichText::new(label).small());
        ui.add(egui::TextEdit::singleline(field).desired_width(ui.available_width().min(360.0)).hint_text(hint)).labelled_by(label.id);
    }
    let known = crate::brains::provider::KNOWN.iter().find(|(n, _, _)| *n == form.name.trim());
    ui.horizontal_wrapped(|ui| {
        for (kind, label) in [(ProviderKind::Openai, "OpenAI-compatible"), (ProviderKind::Anthropic, "Anthropic"), (ProviderKind::Gemini, "Gemini"), (ProviderKind::Ollama, "Ollama")] {
            let selected = form.kind.or(known.map(|k| k.1)) == Some(kind);
            if ui.radio(selected, RichText::new(label).small()).clicked() {
                form.kind = Some(kind);
            }
        }
    });
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new("Thinking of reasoning models").small());
        for (value, label) in [("", "their default"), ("off", "off"), ("low", "low"), ("medium", "medium"), ("high", "high")] {
            if ui.radio(form.reasoning_effort == value, RichText::new(label).small()).clicked() {
                form.reasoning_effort = value.to_owned();
            }
        }
    });
    let mut caching = !form.no_prompt_caching;
    if ui.checkbox(&mut caching, RichText::new("Prompt caching (cached input costs a tenth to a half)").small()).changed() {
        form.no_prompt_caching = !caching;
    }
    ui.label(RichText::new("Empty prices: the provider's list prices, shipped with cowork").small().color(theme::muted()));
    let price = |text: &str| text.trim().parse::<f64>().ok().filter(|p| *p >= 0.0).or(text.trim().is_empty().then_some(0.0));
    let base_url = if form.base_url.trim().is_empty() { known.map(|k| k.2.to_owned()).unwrap_or_default() } else { form.base_url.trim().to_owned() };
    let ready = form.kind.or(known.map(|k| k.1)).is_some() && price(&form.price_in).is_some() && price(&form.price_out).is_some();
    if ui.add_enabled(ready, egui::Button::new("Save provider")).clicked()
        && let (Some(kind), Some(price_in), Some(price_out)) = (form.kind.or(known.map(|k| k.1)), price(&form.price_in), price(&form.price_out))
    {
        actions.push(UiAction::SaveProvider(crate::brains::ProviderConfig {
            name: form.name.trim().to_owned(),
            kind,
            base_url,
            model: form.model.trim().to_owned(),
            api_key_env: None,
            price_in_per_mtok: price_in,
            price_out_per_mtok: price_out,
            reasoning_effort: Some(form.reasoning_effort.clone()).filter(|e| !e.is_empty()),
            prompt_caching: !form.no_prompt_caching,
            thinking_tokens: None,
            vision: None,
        }));
        *form = NewProvider::default();
    }
}

/// Settings → Models: which installed chat model answers, and adding a GGUF file the user has.
fn chat_model_ui(ui: &mut egui::Ui, state: &AppState, models: &[ModelView], panel: &mut SettingsPanel, actions: &mut Vec<UiAction>) {
    let added = state.added_models.iter().map(crate::config::ResolvedModel::from);
    let choices: Vec<crate::config::ResolvedModel> = models.iter().filter_map(|m| m.chat.clone()).chain(added).collect();
    let current = &state.settings.chat_model;
    let selected = if current.is_empty() { "Default for this machine".to_owned() } else { current.clone() };
    ui.horizontal_wrapped(|ui| {
        let label = ui.label("Chat model");
        egui::ComboBox::from_id_salt("chat_model").selected_text(selected).truncate().show_ui(ui, |ui| {
            if ui.selectable_label(current.is_empty(), "Default for this machine").clicked() && !current.is_empty() {
                actions.push(UiAction::ChooseChatModel(None));
            }
            for choice in &choices {
                if ui.selectable_label(*current == choice.name, &choice.name).clicked() && *current != choice.name {
                    actions.push(UiAction::ChooseChatModel(Some(choice.clone())));
                }
            }
        })
        .response
        .labelled_by(label.id);
    });
    ui.label(RichText::new("The default is the first chat model below that is installed and fits in memory").small().color(theme::muted()));
    let label = ui.label("Add a GGUF file");
    ui.horizontal(|ui| {
        ui.add(egui::TextEdit::singleline(&mut panel.add_model_path).hint_text("/path/to/model.gguf").desired_width(ui.available_width() - 50.0)).labelled_by(label.id);
        let path = panel.add_model_path.trim().to_owned();
        if ui.add_enabled(!path.is_empty(), egui::Button::new("Add")).clicked() {
            actions.push(UiAction::AddModel(path.into()));
            panel.add_model_path.clear();
        }
    });
}

