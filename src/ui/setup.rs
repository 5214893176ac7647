//! The first run, after "what cowork records": four pages in the sidebar —
//! the brain (a local model chosen by what this machine can hold, downloaded
//! with progress, resumable, verified and cancellable, from the upstream or
//! a mirror; and/or a cloud provider whose key is tried with one tiny
//! question), the hotkeys with a "try it now", starting at login, and where
//! the data lives. Every page can be skipped; Settings → "Set up again"
//! shows them again. Thin view: the app does the work (`UiAction`s).

use egui::RichText;

use crate::brains::{ProviderConfig, ProviderKind};
use crate::models::gguf::Verdict;
use crate::models::{Manifest, ModelRole};
use crate::state::{AppState, UiAction};
use crate::ui::settings::ModelView;
use crate::ui::theme;

/// Tokens of context the preflight sizes the KV cache for (as `config` does for the default model).
const PREFLIGHT_TOKENS: u64 = 4_096;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Page {
    #[default]
    Brain,
    Hotkeys,
    Login,
    Done,
}

impl Page {
    const ALL: [Page; 4] = [Page::Brain, Page::Hotkeys, Page::Login, Page::Done];

    fn title(self) -> &'static str {
        match self {
            Page::Brain => "The brain",
            Page::Hotkeys => "Hotkeys",
            Page::Login => "Start at login",
            Page::Done => "Where your data lives",
        }
    }

    fn number(self) -> usize {
        Page::ALL.iter().position(|p| *p == self).unwrap_or(0) + 1
    }

    fn next(self) -> Option<Page> {
        Page::ALL.get(self.number()).copied()
    }

    fn back(self) -> Option<Page> {
        self.number().checked_sub(2).map(|i| Page::ALL[i])
    }
}

/// A local chat model as the first run offers it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatChoice {
    pub name: String,
    /// What the download costs (its upstream files).
    pub download_bytes: u64,
    /// Weights + KV cache for `PREFLIGHT_TOKENS` + the runtime's own.
    pub needed_bytes: u64,
    pub verdict: Verdict,
    /// Starts an agent step within the speed floor on this machine's cores.
    pub fast: bool,
}

/// This machine, as the preflight sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub total_bytes: u64,
    pub available_bytes: u64,
    pub cores: usize,
}

impl Machine {
    pub fn here() -> Self {
        let (available_bytes, total_bytes) = crate::llm::memory::meminfo().unwrap_or((0, 0));
        Self { total_bytes, available_bytes, cores: std::thread::available_parallelism().map_or(1, usize::from) }
    }
}

/// The manifest's chat models, best first, each judged for `machine`.
pub fn chat_choices(manifest: &Manifest, machine: &Machine) -> Vec<ChatChoice> {
    manifest
        .models
        .iter()
        .filter(|m| m.role == ModelRole::Chat)
        .map(|m| {
            let (weights, _) = m.primary_size_and_sha();
            let needed_bytes = weights + m.kv_bytes_per_token * PREFLIGHT_TOKENS + crate::models::gguf::RUNTIME_OVERHEAD_BYTES;
            ChatChoice {
                name: m.name.clone(),
                download_bytes: m.download_bytes(),
                needed_bytes,
                verdict: crate::models::gguf::verdict(needed_bytes, machine.available_bytes, machine.total_bytes),
                fast: crate::config::meets_speed_floor(weights, machine.cores),
            }
        })
        .collect()
}

/// The best model that fits and is fast enough here; else the smallest that fits; else the smallest.
pub fn recommended(choices: &[ChatChoice]) -> Option<&ChatChoice> {
    let fits = |c: &&ChatChoice| c.verdict != Verdict::Red;
    choices.iter().find(|c| fits(c) && c.fast).or_else(|| choices.iter().rev().find(fits)).or(choices.last())
}

/// What the local brain downloads besides the chat model: memory search
/// always, and the speech models when voice is wanted.
pub fn companions(manifest: &Manifest, voice: bool) -> Vec<String> {
    let wanted = |role: ModelRole| role == ModelRole::Embedding || (voice && matches!(role, ModelRole::Speech | ModelRole::Vad));
    manifest.models.iter().filter(|m| !m.optional && wanted(m.role)).map(|m| m.name.clone()).collect()
}

/// Well-known providers' default models: a first answer without looking one up.
const DEFAULT_MODELS: &[(&str, &str)] = &[
    ("openai", "gpt-5-mini"),
    ("anthropic", "claude-haiku-4-5"),
    ("gemini", "gemini-2.5-flash"),
    ("groq", "llama-3.3-70b-versatile"),
    ("openrouter", "openai/gpt-5-mini"),
    ("mistral", "mistral-small-latest"),
    ("deepseek", "deepseek-chat"),
    ("together", "meta-llama/Llama-3.3-70B-Instruct-Turbo"),
    ("xai", "grok-4.3-latest"),
];

/// The pages' own choices before they are acted on.
#[derive(Debug)]
pub struct SetupPanel {
    pub page: Page,
    pub local: bool,
    pub cloud: bool,
    pub chat_model: Option<String>,
    pub voice: bool,
    pub mirror: String,
    pub provider: String,
    pub model: String,
    pub base_url: String,
    pub key: String,
    /// What is typed to narrow the provider's model list.
    pub model_filter: String,
    /// The manifest, this machine and its chat models judged, made once (not per frame).
    judged: Option<std::sync::Arc<Judged>>,
}

#[derive(Debug)]
struct Judged {
    manifest: Manifest,
    machine: Machine,
    choices: Vec<ChatChoice>,
}

impl Default for SetupPanel {
    fn default() -> Self {
        Self {
            page: Page::Brain,
            local: true,
            cloud: false,
            chat_model: None,
            voice: true,
            mirror: String::new(),
            provider: "openai".into(),
            model: String::new(),
            base_url: String::new(),
            key: String::new(),
            model_filter: String::new(),
            judged: None,
        }
    }
}

impl SetupPanel {
    /// Judges the models for `machine` (a test's, or this computer's at the first look).
    pub fn with_machine(mut self, manifest: &Manifest, machine: Machine) -> Self {
        let choices = chat_choices(manifest, &machine);
        self.judged = Some(std::sync::Arc::new(Judged { manifest: manifest.clone(), machine, choices }));
        self
    }
}

fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

fn mb(bytes: u64) -> String {
    format!("{:.0} MB", bytes as f64 / 1e6)
}

fn muted(ui: &mut egui::Ui, text: impl Into<String>) {
    ui.label(RichText::new(text).small().color(theme::muted()));
}

pub fn setup_ui(ui: &mut egui::Ui, state: &AppState, models: &[ModelView], data_dir: &std::path::Path, panel: &mut SetupPanel, actions: &mut Vec<UiAction>) {
    if panel.judged.is_none() {
        let Ok(manifest) = Manifest::bundled() else { return };
        let judged = std::mem::take(panel).with_machine(&manifest, Machine::here());
        *panel = judged;
    }
    let Some(judged) = panel.judged.clone() else { return };
    ui.heading("Set up cowork");
    muted(ui, format!("Step {} of {} · {}", panel.page.number(), Page::ALL.len(), panel.page.title()));
    ui.separator();
    egui::ScrollArea::vertical().auto_shrink([false, true]).max_height(ui.available_height() - 40.0).show(ui, |ui| match panel.page {
        Page::Brain => brain_ui(ui, state, models, &judged, panel, actions),
        Page::Hotkeys => hotkeys_ui(ui, state),
        Page::Login => login_ui(ui, state, actions),
        Page::Done => done_ui(ui, state, data_dir),
    });
    ui.separator();
    ui.horizontal(|ui| {
        if let Some(back) = panel.page.back()
            && ui.button("Back").clicked()
        {
            panel.page = back;
        }
        match panel.page.next() {
            Some(next) => {
                if ui.button("Next").clicked() {
                    panel.page = next;
                }
                if ui.button("Skip setup").on_hover_text("Set up again, in Settings, shows these pages later").clicked() {
                    actions.push(UiAction::FinishSetup);
                }
            }
            None => {
                if ui.button("Finish").clicked() {
                    actions.push(UiAction::FinishSetup);
                }
            }
        }
    });
}

fn brain_ui(ui: &mut egui::Ui, state: &AppState, models: &[ModelView], judged: &Judged, panel: &mut SetupPanel, actions: &mut Vec<UiAction>) {
    ui.label("Who answers you?");
    ui.checkbox(&mut panel.local, "A model on this computer (private, works offline)");
    ui.checkbox(&mut panel.cloud, "A cloud model (you bring its key)");
    if panel.local {
        ui.separator();
        local_ui(ui, state, models, judged, panel, actions);
    }
    if panel.cloud {
        ui.separator();
        cloud_ui(ui, state, panel, actions);
    }
    if !panel.local && !panel.cloud {
        muted(ui, "Nothing answers until one is set: Next skips this (Settings, Brains & network, sets it later)");
    }
}

fn local_ui(ui: &mut egui::Ui, state: &AppState, models: &[ModelView], judged: &Judged, panel: &mut SetupPanel, actions: &mut Vec<UiAction>) {
    let Judged { manifest, machine, choices } = judged;
    muted(ui, format!("This computer: {} of memory, {} free now, {} cores", gb(machine.total_bytes), gb(machine.available_bytes), machine.cores));
    let best = recommended(choices).map(|c| c.name.clone());
    let chosen = panel.chat_model.clone().or(best.clone()).unwrap_or_default();
    let installed = |name: &str| models.iter().any(|m| m.name == name && m.ok);
    for choice in choices {
        let mut notes = vec![format!("download {}", mb(choice.download_bytes)), format!("needs about {} of memory", gb(choice.needed_bytes))];
        if installed(&choice.name) {
            notes.push("installed".into());
        }
        let (note, colour) = match (choice.verdict, choice.fast) {
            (Verdict::Red, _) => ("too big for this computer's free memory", theme::error()),
            (_, false) => ("slow on this computer", theme::warn()),
            _ if Some(&choice.name) == best.as_ref() => ("recommended here", theme::ok()),
            _ => ("fits", theme::muted()),
        };
        if ui.radio(chosen == choice.name, choice.name.as_str()).clicked() {
            panel.chat_model = Some(choice.name.clone());
        }
        ui.horizontal_wrapped(|ui| {
            ui.add_space(18.0);
            ui.label(RichText::new(format!("{} · {note}", notes.join(" · "))).small().color(colour));
        });
    }
    ui.checkbox(&mut panel.voice, "Voice: push-to-talk and dictation");
    let mut names = vec![chosen.clone()];
    names.extend(companions(manifest, panel.voice));
    let missing: Vec<String> = names.iter().filter(|n| !installed(n)).cloned().collect();
    let bytes: u64 = missing.iter().filter_map(|n| manifest.model(n)).map(|m| m.download_bytes()).sum();
    muted(ui, "Memory search (all-MiniLM, 91 MB) comes with it: it finds what you did by meaning");
    let mirror_label = ui.label(RichText::new("Download from (empty: huggingface.co, each file checked by its sha256)").small());
    ui.add(egui::TextEdit::singleline(&mut panel.mirror).hint_text("https://a-mirror.example").desired_width(f32::INFINITY)).labelled_by(mirror_label.id);
    let download = state.setup.download.as_ref();
    match download {
        Some(job) if job.running() => {
            for (path, (done, total, error)) in state.downloads.iter().filter(|(path, _)| job.names.iter().any(|n| path.starts_with(n.as_str()))) {
                match error {
                    Some(error) => ui.label(RichText::new(format!("{path}: {error}")).small().color(theme::error())),
                    None => ui.add(egui::ProgressBar::new(*done as f32 / (*total).max(1) as f32).text(format!("{path}: {} of {}", mb(*done), mb(*total)))),
                };
            }
            if ui.button("Cancel").on_hover_text("What is downloaded stays; the next download goes on from there").clicked() {
                actions.push(UiAction::SetupCancelDownload);
            }
        }
        _ => {
            if let Some(Some(outcome)) = download.map(|job| &job.outcome) {
                match outcome {
                    Ok(text) => ui.label(RichText::new(format!("Done: {text}; {chosen} answers you")).small().color(theme::ok())),
                    Err(text) => ui.label(RichText::new(text).small().color(theme::error())),
                };
            }
            if missing.is_empty() {
                muted(ui, "Everything this needs is installed");
            } else {
                let label = if matches!(download.and_then(|job| job.outcome.as_ref()), Some(Err(_))) { "Try again" } else { "Download" };
                if ui.button(format!("{label} ({})", mb(bytes))).on_hover_text(missing.join(", ")).clicked() {
                    let mirror = Some(panel.mirror.trim().to_owned()).filter(|m| !m.is_empty());
                    actions.push(UiAction::SetupDownload { names: missing, chat_model: chosen, mirror });
                }
            }
        }
    }
}

fn cloud_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut SetupPanel, actions: &mut Vec<UiAction>) {
    let known = crate::brains::provider::KNOWN;
    egui::ComboBox::from_label("Provider").selected_text(panel.provider.as_str()).show_ui(ui, |ui| {
        for (name, _, _) in known {
            if ui.selectable_label(panel.provider == *name, *name).clicked() {
                panel.provider = (*name).to_owned();
                panel.model.clear();
            }
        }
    });
    let default_model = DEFAULT_MODELS.iter().find(|(n, _)| *n == panel.provider).map_or("", |(_, m)| m);
    for (label, field, hint, password) in [
        ("Model", &mut panel.model, default_model, false),
        ("API key", &mut panel.key, "paste your key", true),
        ("Base URL (empty: the provider's own)", &mut panel.base_url, "", false),
    ] {
        let label = ui.label(RichText::new(label).small());
        ui.add(egui::TextEdit::singleline(field).password(password).hint_text(hint).desired_width(f32::INFINITY)).labelled_by(label.id);
    }
    // What the provider offers, asked with the key typed here.
    let kind = known.iter().find(|(n, _, _)| *n == panel.provider).map_or(ProviderKind::Openai, |(_, kind, _)| *kind);
    let base = if panel.base_url.trim().is_empty() { known.iter().find(|(n, _, _)| *n == panel.provider).map_or("", |k| k.2).to_owned() } else { panel.base_url.trim().to_owned() };
    if !base.is_empty() {
        let draft = ProviderConfig::new(&panel.provider, kind, base, default_model);
        let key = panel.key.trim().to_owned();
        let current = if panel.model.trim().is_empty() { default_model.to_owned() } else { panel.model.trim().to_owned() };
        let name = panel.provider.clone();
        if let Some(model) = crate::ui::settings::model_picker_ui(ui, state, &name, &current, &mut panel.model_filter, || UiAction::ListModels { name: name.clone(), draft: Some((draft, key)) }, actions) {
            panel.model = model;
        }
    }
    muted(
        ui,
        format!(
            "Your questions go to {}; what cowork recorded about your activity goes only if you allow it for this provider, and it asks first.",
            panel.provider
        ),
    );
    let testing = state.setup.provider_test.as_ref().is_some_and(|(_, outcome)| outcome.is_none());
    let model = if panel.model.trim().is_empty() { default_model.to_owned() } else { panel.model.trim().to_owned() };
    let ready = !model.is_empty() && (!panel.key.trim().is_empty() || panel.base_url.starts_with("http://127.0.0.1"));
    if ui.add_enabled(ready && !testing, egui::Button::new(if testing { "Trying the key…" } else { "Save and try the key" })).clicked() {
        let kind = known.iter().find(|(n, _, _)| *n == panel.provider).map_or(ProviderKind::Openai, |(_, kind, _)| *kind);
        let provider = ProviderConfig {
            name: panel.provider.clone(),
            kind,
            base_url: panel.base_url.trim().to_owned(),
            model,
            api_key_env: None,
            price_in_per_mtok: 0.0,
            price_out_per_mtok: 0.0,
            reasoning_effort: None,
            prompt_caching: true,
            thinking_tokens: None,
            vision: None,
        };
        actions.push(UiAction::TestProvider { provider, key: panel.key.trim().to_owned(), prefer_cloud: !panel.local });
    }
    if let Some((name, Some(outcome))) = &state.setup.provider_test {
        match outcome {
            Ok(text) => ui.label(RichText::new(format!("{name}: {text}")).small().color(theme::ok())),
            Err(text) => ui.label(RichText::new(format!("{name}: {text}")).small().color(theme::error())),
        };
    }
}

fn hotkeys_ui(ui: &mut egui::Ui, state: &AppState) {
    let settings = &state.settings;
    let bound_by_desktop = state.desktop.as_ref().is_some_and(|d| !d.x11_decides());
    ui.label("These work from any app. Try them now:");
    for (id, keys, what) in [
        ("quick prompt", &settings.quick_prompt_hotkey, "opens the quick prompt: ask without leaving what you are doing"),
        ("pause", &settings.pause_hotkey, "pauses recording, and resumes it"),
        ("push-to-talk", &settings.voice.hotkey, "hold and speak; let go to send"),
    ] {
        ui.horizontal_wrapped(|ui| {
            ui.label(RichText::new(keys).monospace());
            if state.setup.hotkeys_tried.contains(id) {
                ui.label(RichText::new("it works").small().color(theme::ok()));
            }
        });
        muted(ui, what);
    }
    if bound_by_desktop {
        let hotkeys = state.desktop.as_ref().map(|d| d.state(crate::desktop::session::Capability::Hotkeys).text()).unwrap_or_default();
        muted(ui, format!("On this desktop: {hotkeys}. Settings, General, Desktop, shows how to bind them."));
    }
    muted(ui, "Settings, General, changes them");
}

fn login_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    crate::ui::settings::autostart_ui(ui, state, actions);
}

fn done_ui(ui: &mut egui::Ui, state: &AppState, data_dir: &std::path::Path) {
    ui.label(format!("Everything cowork keeps is in {}: one encrypted file (cowork.db), its models and settings. Nothing leaves this computer unless you allow a provider.", data_dir.display()));
    ui.label(format!("Pause recording any time: {}, the tray icon's Pause, or the pause button below.", state.settings.pause_hotkey));
    muted(ui, "Settings changes all of this, and Forget everything under Your data removes it all.");
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1_000_000_000;

    #[test]
    fn the_recommendation_follows_the_machine() {
        let manifest = Manifest::bundled().unwrap();
        let big = chat_choices(&manifest, &Machine { total_bytes: 24 * GB, available_bytes: 20 * GB, cores: 2 });
        assert_eq!(recommended(&big).unwrap().name, "qwen2.5-coder-1.5b-instruct", "{big:?}");
        // One core: the 1.5B is too slow to start an agent step; the 0.5B is not.
        let one_core = chat_choices(&manifest, &Machine { total_bytes: 24 * GB, available_bytes: 20 * GB, cores: 1 });
        assert_eq!(recommended(&one_core).unwrap().name, "qwen2.5-coder-0.5b-instruct", "{one_core:?}");
        // Little memory: only SmolLM2 fits.
        let small = chat_choices(&manifest, &Machine { total_bytes: 4 * GB, available_bytes: 1_500_000_000, cores: 4 });
        assert_eq!(small.iter().filter(|c| c.verdict == Verdict::Red).count(), 2, "{small:?}");
        assert_eq!(recommended(&small).unwrap().name, "smollm2-135m-instruct");
        let smol = small.iter().find(|c| c.name == "smollm2-135m-instruct").unwrap();
        assert_eq!(smol.needed_bytes, 98_362_432 + 46_080 * 4_096 + crate::models::gguf::RUNTIME_OVERHEAD_BYTES);
    }

    #[test]
    fn memory_search_always_comes_and_voice_when_wanted() {
        let manifest = Manifest::bundled().unwrap();
        assert_eq!(companions(&manifest, false), ["all-minilm-l6-v2"]);
        let with_voice = companions(&manifest, true);
        assert!(with_voice.contains(&"whisper-tiny-en".to_owned()) && with_voice.contains(&"silero-vad".to_owned()), "{with_voice:?}");
        assert!(!with_voice.contains(&"whisper-base".to_owned()), "optional models stay optional");
    }
}
