//! The Apps panel: the installed apps (open, on/off, remove; install from a
//! folder or zip through a dialog that discloses what the code can call and
//! asks for each optional capability), an open app's view, the notification inbox (Accept, Open, Dismiss, and why the
//! gate holds one) and the automations (on/off, run now, the newest runs
//! with each step, run again with the same trigger data), and "describe it"
//! (the agent drafts a flow, checked, for the user to review and save). It
//! reads state and pushes `UiAction`s only.

use egui::RichText;

use crate::automations::events::RunSummary;
use crate::ids::{format_duration_millis, user_when as format_when};
use crate::notify::Act;
use crate::notify::events::InboxItem;
use crate::state::{AppState, UiAction};
use crate::ui::theme;

/// Inbox items listed at most.
const INBOX_SHOWN: usize = 20;
/// Runs listed at most.
const RUNS_SHOWN: usize = 10;

/// What the panel keeps between frames: the routine being described and the draft being reviewed.
#[derive(Default)]
pub struct AppsPanel {
    /// "Describe a routine": the words and the drafted flow being reviewed.
    pub routine: DraftBox,
    /// The automation being edited, step by step.
    pub editor: Option<crate::ui::flow_editor::FlowEditor>,
    /// Install: the folder or zip to read.
    pub install_path: String,
    /// The capabilities ticked in the install dialog.
    pub grants: Vec<crate::apps::Capability>,
    /// The app shown (its view replaces the lists).
    pub open_app: Option<String>,
    pub forms: crate::ui::app_view::Forms,
    /// A copy or a URL the app asked for, waiting for the user's yes.
    pub confirm: Option<crate::ui::app_view::ViewAction>,
    /// The app whose removal waits for the user's yes.
    pub confirm_remove: Option<String>,
    /// "Make me an app": the words, and the drafted manifest being reviewed.
    pub app: DraftBox,
}

/// One "describe it, the agent drafts it, you review it" box: the words, and
/// the draft being edited.
#[derive(Default)]
pub struct DraftBox {
    pub describe: String,
    pub draft: String,
    /// The draft as it arrived, so an edit is not overwritten by the same draft again.
    seen: Option<String>,
}

/// What a draft box says, and how its words look.
struct DraftWords {
    prompt: &'static str,
    prompt_strong: bool,
    hint: &'static str,
    rows: usize,
    draft_button: &'static str,
    drafted: &'static str,
    confirm: &'static str,
}

/// What the user did in a draft box this frame.
enum Drafted {
    Nothing,
    /// Draft from these words.
    Describe(String),
    /// Go on with this (possibly edited) draft.
    Confirm(String),
}

fn draft_box_ui(ui: &mut egui::Ui, words: &DraftWords, drafting: bool, result: Option<&Result<String, String>>, draft_box: &mut DraftBox) -> Drafted {
    let mut done = Drafted::Nothing;
    let prompt = RichText::new(words.prompt);
    let label = ui.label(if words.prompt_strong { prompt.strong() } else { prompt.small() });
    ui.add(egui::TextEdit::multiline(&mut draft_box.describe).hint_text(words.hint).desired_rows(words.rows).desired_width(f32::INFINITY)).labelled_by(label.id);
    if ui.add_enabled(!drafting && !draft_box.describe.trim().is_empty(), egui::Button::new(words.draft_button)).clicked() {
        done = Drafted::Describe(draft_box.describe.trim().to_owned());
    }
    if drafting {
        ui.label(RichText::new("Drafting…").small().color(theme::muted()));
    }
    match result {
        Some(Ok(drafted)) => {
            if draft_box.seen.as_deref() != Some(drafted.as_str()) {
                draft_box.draft = drafted.clone();
                draft_box.seen = Some(drafted.clone());
            }
            let label = ui.label(RichText::new(words.drafted).small());
            ui.add(egui::TextEdit::multiline(&mut draft_box.draft).code_editor().desired_width(f32::INFINITY)).labelled_by(label.id);
            if ui.button(words.confirm).clicked() {
                done = Drafted::Confirm(draft_box.draft.clone());
            }
        }
        Some(Err(why)) => {
            ui.label(RichText::new(why).small().color(theme::error()));
        }
        None => {}
    }
    done
}

pub fn apps_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut AppsPanel, now_millis: i64, actions: &mut Vec<UiAction>) {
    egui::ScrollArea::vertical().auto_shrink([false, false]).show(ui, |ui| {
        if let Some(editor) = panel.editor.as_mut() {
            if !crate::ui::flow_editor::flow_editor_ui(ui, editor, actions) {
                panel.editor = None;
            }
            return;
        }
        if let Some(app_id) = panel.open_app.clone() {
            open_app_ui(ui, state, panel, &app_id, actions);
            return;
        }
        installed_ui(ui, state, panel, actions);
        ui.separator();
        inbox_ui(ui, &state.inbox, &state.settings, now_millis, actions);
        ui.separator();
        automations_ui(ui, state, panel, now_millis, actions);
        ui.separator();
        describe_ui(ui, state, panel, actions);
    });
}

/// The installed apps, the install field and its dialog.
fn installed_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut AppsPanel, actions: &mut Vec<UiAction>) {
    ui.heading("Apps");
    if state.apps.installed.is_empty() {
        ui.label(RichText::new("No apps yet: install one from a folder or a zip").small().color(theme::muted()));
    }
    for app in &state.apps.installed {
        let row = &app.row;
        ui.push_id(&row.app_id, |ui| {
            ui.horizontal(|ui| {
                ui.label(RichText::new(&row.name).strong());
                ui.label(RichText::new(format!("{}{}", row.version, if app.without_code { " · no code" } else { "" })).small().color(theme::muted()));
            });
            if !app.description.is_empty() {
                ui.label(RichText::new(&app.description).small());
            }
            for read in &app.reads {
                ui.label(RichText::new(format!("Can {read}")).small().color(theme::muted()));
            }
            ui.horizontal(|ui| {
                if ui.add_enabled(row.enabled, egui::Button::new("Open")).clicked() {
                    panel.open_app = Some(row.app_id.clone());
                    actions.push(UiAction::AppOpen(row.app_id.clone()));
                }
                let mut enabled = row.enabled;
                if ui.checkbox(&mut enabled, "On").changed() {
                    actions.push(UiAction::AppsEnable { app_id: row.app_id.clone(), enabled });
                }
                if panel.confirm_remove.as_deref() == Some(row.app_id.as_str()) {
                    ui.label(RichText::new("Remove it and its data?").small().color(theme::warn()));
                    if ui.button("Remove").clicked() {
                        actions.push(UiAction::AppsRemove(row.app_id.clone()));
                        panel.confirm_remove = None;
                    }
                    if ui.button("Keep").clicked() {
                        panel.confirm_remove = None;
                    }
                } else if ui.button("Remove…").clicked() {
                    panel.confirm_remove = Some(row.app_id.clone());
                }
            });
        });
        ui.add_space(theme::SPACING);
    }
    let label = ui.label(RichText::new("Install from a folder or a zip").small());
    ui.horizontal(|ui| {
        ui.add(egui::TextEdit::singleline(&mut panel.install_path).hint_text("~/Downloads/focus-today.zip").desired_width(220.0)).labelled_by(label.id);
        if ui.add_enabled(!panel.install_path.trim().is_empty(), egui::Button::new("Inspect…")).clicked() {
            panel.grants.clear();
            actions.push(UiAction::AppsInspect(std::path::PathBuf::from(panel.install_path.trim())));
        }
    });
    make_app_ui(ui, state, panel, actions);
    match &state.apps.inspection {
        Some(Ok(inspection)) => install_dialog(ui, inspection, panel, actions),
        Some(Err(why)) => {
            ui.label(RichText::new(why).small().color(theme::error()));
            if ui.button("Close").clicked() {
                actions.push(UiAction::AppsForgetInspection);
            }
        }
        None => {}
    }
    if let Some(message) = &state.apps.message {
        ui.label(RichText::new(message).small().color(theme::muted()));
    }
}

/// "Make me an app": the agent drafts an app without code; the user reviews it, then the install dialog shows what it reads.
fn make_app_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut AppsPanel, actions: &mut Vec<UiAction>) {
    let words = DraftWords {
        prompt: "Or describe an app",
        prompt_strong: false,
        hint: "Show my time per app today",
        rows: 1,
        draft_button: "Draft app",
        drafted: "Drafted app (checked; edit it if you like)",
        confirm: "Review and install…",
    };
    match draft_box_ui(ui, &words, state.drafting_app, state.app_draft.as_ref(), &mut panel.app) {
        Drafted::Describe(text) => actions.push(UiAction::DraftApp(text)),
        Drafted::Confirm(manifest) => {
            panel.grants.clear();
            actions.push(UiAction::AppsInspectDraft(manifest));
        }
        Drafted::Nothing => {}
    }
}

/// What the package's code can call, next to what its manifest says; each optional capability asked for.
fn install_dialog(ui: &mut egui::Ui, inspection: &crate::apps::worker::Inspection, panel: &mut AppsPanel, actions: &mut Vec<UiAction>) {
    let manifest = &inspection.manifest;
    let disclosure = &inspection.disclosure;
    egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.label(RichText::new(format!("{} {}", manifest.name, manifest.version)).strong());
        ui.label(RichText::new(format!("{} · {}", manifest.category, manifest.description)).small());
        if let Some(version) = &inspection.replaces {
            ui.label(RichText::new(format!("Updates the installed version {version}")).small());
            for import in &inspection.new_imports {
                ui.label(RichText::new(format!("New: it now imports {import}")).small().color(theme::warn()));
            }
        }
        ui.label(RichText::new("What its code can do").small().strong());
        for read in &disclosure.reads {
            ui.label(RichText::new(format!("• read {read}")).small());
        }
        for capability in &disclosure.capabilities {
            let mut granted = panel.grants.contains(capability);
            if ui.checkbox(&mut granted, format!("Allow it to {}", capability.describe())).changed() {
                panel.grants.retain(|c| c != capability);
                if granted {
                    panel.grants.push(*capability);
                }
            }
        }
        for flag in &disclosure.flags {
            ui.label(RichText::new(format!("Warning: {flag}")).small().color(theme::warn()));
        }
        ui.label(RichText::new(format!("The app says: {}", disclosure.claim)).small().color(theme::muted()));
        ui.horizontal(|ui| {
            if ui.button(if inspection.replaces.is_some() { "Update" } else { "Install" }).clicked() {
                actions.push(UiAction::AppsInstall { path: inspection.path.clone(), granted: panel.grants.clone() });
            }
            if ui.button("Cancel").clicked() {
                actions.push(UiAction::AppsForgetInspection);
            }
        });
    });
}

/// An open app: its view (or the error card that replaced it), and the host actions it asked for.
fn open_app_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut AppsPanel, app_id: &str, actions: &mut Vec<UiAction>) {
    use crate::ui::app_view::ViewAction;
    let open = state.apps.open.iter().find(|o| o.app_id == app_id);
    ui.horizontal(|ui| {
        if ui.button("All apps").clicked() {
            panel.open_app = None;
            panel.confirm = None;
        }
        ui.label(RichText::new(open.map_or(app_id, |o| o.name.as_str())).strong());
        if ui.small_button("Reload").clicked() {
            actions.push(UiAction::AppOpen(app_id.to_owned()));
        }
        if ui.small_button("Close").clicked() {
            actions.push(UiAction::AppClose(app_id.to_owned()));
            panel.open_app = None;
        }
    });
    let Some(open) = open else {
        ui.label(RichText::new("Opening…").small().color(theme::muted()));
        return;
    };
    if open.busy {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label(RichText::new("Working…").small().color(theme::muted()));
        });
    }
    if let Some(error) = &open.error {
        egui::Frame::group(ui.style()).show(ui, |ui| {
            ui.label(RichText::new(format!("{} stopped", open.name)).strong().color(theme::error()));
            ui.label(RichText::new(error).small());
            if ui.button("Try again").clicked() {
                actions.push(UiAction::AppOpen(app_id.to_owned()));
            }
        });
    }
    if let Some(confirm) = panel.confirm.clone() {
        egui::Frame::group(ui.style()).show(ui, |ui| {
            let (question, yes) = match &confirm {
                ViewAction::Copy(text) => (format!("{} wants to copy this to the clipboard:\n{}", open.name, text.chars().take(300).collect::<String>()), "Copy"),
                ViewAction::OpenUrl(url) => (format!("{} wants to open {url} in your browser", open.name), "Open"),
                _ => (String::new(), ""),
            };
            ui.label(RichText::new(question).small());
            ui.horizontal(|ui| {
                if ui.button(yes).clicked() {
                    match &confirm {
                        ViewAction::Copy(text) => ui.ctx().copy_text(text.clone()),
                        ViewAction::OpenUrl(url) => actions.push(UiAction::AppOpenUrl(url.clone())),
                        _ => {}
                    }
                    panel.confirm = None;
                }
                if ui.button("Cancel").clicked() {
                    panel.confirm = None;
                }
            });
        });
    }
    let mut done = Vec::new();
    crate::ui::app_view::view_ui(ui, &open.view, &mut panel.forms, &mut done);
    for action in done {
        match action {
            ViewAction::Handle(message) => {
                panel.forms.clear();
                actions.push(UiAction::AppAct { app_id: app_id.to_owned(), message });
            }
            ViewAction::Chat(text) => actions.push(UiAction::AppChat { app_id: app_id.to_owned(), text }),
            other => panel.confirm = Some(other),
        }
    }
    ui.label(RichText::new(format!("{} ms · {} MiB", open.millis, open.memory_bytes >> 20)).small().color(theme::muted()));
}

/// Describe it: words in, a drafted flow out (checked before it is shown), reviewed, edited, saved.
fn describe_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut AppsPanel, actions: &mut Vec<UiAction>) {
    let words = DraftWords {
        prompt: "Describe a routine",
        prompt_strong: true,
        hint: "Every weekday at 9, summarise yesterday",
        rows: 2,
        draft_button: "Draft it",
        drafted: "Draft (checked; edit it before saving if you like)",
        confirm: "Save automation",
    };
    match draft_box_ui(ui, &words, state.drafting, state.flow_draft.as_ref(), &mut panel.routine) {
        Drafted::Describe(text) => actions.push(UiAction::DraftFlow(text)),
        Drafted::Confirm(json) => {
            actions.push(UiAction::SaveFlow(json));
            panel.routine.seen = None;
        }
        Drafted::Nothing => {}
    }
}

fn open(state: &str) -> bool {
    matches!(state, "pending" | "inbox" | "shown")
}

fn inbox_ui(ui: &mut egui::Ui, inbox: &[InboxItem], settings: &crate::config::Settings, now_millis: i64, actions: &mut Vec<UiAction>) {
    let waiting = inbox.iter().filter(|i| open(&i.state)).count();
    ui.heading(if waiting > 0 { format!("Inbox ({waiting})") } else { "Inbox".to_owned() });
    // The gate's budget: how often cowork may interrupt, and how much of it this hour used.
    let shown = |tier: &str| inbox.iter().filter(|i| i.tier == tier && i.shown_at_millis.is_some_and(|at| now_millis - at < 3_600_000)).count();
    let budget = format!(
        "Shown this hour: urgent {}/{}, helpful {}/{}, informational {}/{}",
        shown("urgent"),
        settings.notify_urgent_per_hour,
        shown("helpful"),
        settings.notify_helpful_per_hour,
        shown("informational"),
        settings.notify_informational_per_hour
    );
    ui.label(RichText::new(budget).small().color(theme::muted()))
        .on_hover_text("How often cowork may interrupt you: change it in Settings → Notifications (notify.*_per_hour). What is over the budget waits here.");
    if inbox.is_empty() {
        ui.label(RichText::new("Nothing yet: what cowork tells you lands here too, even when the desktop did not show it").small().color(theme::muted()));
    }
    for item in inbox.iter().take(INBOX_SHOWN) {
        ui.group(|ui| {
            let colour = if item.tier == "urgent" { theme::warn() } else { ui.visuals().text_color() };
            ui.label(RichText::new(&item.title).strong().color(colour));
            if !item.body.is_empty() {
                ui.label(&item.body);
            }
            if !item.why.is_empty() {
                ui.label(RichText::new(&item.why).small().italics());
            }
            let mut line = format!("{} · {} · {}", format_when(item.created_at_millis, now_millis), item.source, item.state);
            if let Some(reason) = &item.reason {
                line.push_str(&format!(" · {reason}"));
            }
            ui.label(RichText::new(line).small().color(theme::muted()));
            if open(&item.state) {
                ui.horizontal(|ui| {
                    if item.can_accept && ui.button(&item.accept_label).on_hover_text(&item.title).clicked() {
                        actions.push(UiAction::InboxAct { notification_id: item.notification_id, act: Act::Accept });
                    }
                    if ui.button("Dismiss").clicked() {
                        actions.push(UiAction::InboxAct { notification_id: item.notification_id, act: Act::Dismiss });
                    }
                });
            }
        });
    }
}

fn automations_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut AppsPanel, now_millis: i64, actions: &mut Vec<UiAction>) {
    let view = &state.automations;
    ui.horizontal(|ui| {
        ui.heading("Automations");
        if ui.button("New automation").clicked() {
            panel.editor = Some(crate::ui::flow_editor::FlowEditor::blank());
        }
    });
    if view.flows.is_empty() {
        ui.label(RichText::new("No automations yet: cowork automations import FILE adds them").small().color(theme::muted()));
    }
    for flow in &view.flows {
        ui.group(|ui| {
            let title = flow.title();
            let mut enabled = flow.enabled;
            if ui.checkbox(&mut enabled, RichText::new(&title).strong()).on_hover_text(format!("Switch {title} on or off ({})", flow.name)).changed() {
                actions.push(UiAction::AutomationEnable { name: flow.name.clone(), enabled });
            }
            if !flow.description.is_empty() {
                ui.label(RichText::new(&flow.description).small());
            }
            ui.horizontal_wrapped(|ui| {
                if ui.add_enabled(flow.problem.is_none(), egui::Button::new("Run now")).on_hover_text(format!("Run {title} now")).clicked() {
                    actions.push(UiAction::AutomationRun(flow.name.clone()));
                }
                // Parsed when clicked, not every frame.
                if flow.problem.is_none()
                    && ui.button("Edit").on_hover_text(format!("Edit {title}")).clicked()
                    && let Ok(definition) = crate::automations::Flow::from_json(&flow.definition)
                {
                    panel.editor = Some(crate::ui::flow_editor::FlowEditor::new(definition, false));
                }
            });
            let mut line = flow.trigger.clone();
            if let Some(next) = flow.next_fire_at_millis.filter(|_| flow.enabled) {
                line.push_str(&format!(" · next {}", format_when(next, now_millis)));
            }
            if let Some(last) = view.runs.iter().find(|r| r.automation == flow.name) {
                line.push_str(&format!(" · last run {} {}", last.status, format_when(last.created_at_millis, now_millis)));
            }
            ui.label(RichText::new(line).small().color(theme::muted()));
            if let Some(problem) = &flow.problem {
                ui.label(RichText::new(problem).small().color(theme::error()));
            }
        });
    }
    if !view.runs.is_empty() {
        ui.label(RichText::new("Runs").strong());
    }
    for run in view.runs.iter().take(RUNS_SHOWN) {
        run_ui(ui, run, now_millis, actions);
    }
}

fn run_ui(ui: &mut egui::Ui, run: &RunSummary, now_millis: i64, actions: &mut Vec<UiAction>) {
    let colour = match run.status.as_str() {
        "done" => theme::ok(),
        "failed" | "expired" => theme::error(),
        _ => theme::warn(),
    };
    let title = format!("{} · {} · {} ({})", crate::automations::events::flow_title(&run.automation), run.status, format_when(run.created_at_millis, now_millis), run.trigger_kind);
    egui::CollapsingHeader::new(RichText::new(title).color(colour)).id_salt(run.run_id).show(ui, |ui| {
        if let Some(error) = &run.error {
            ui.label(RichText::new(error).small().color(theme::error()));
        }
        for step in &run.steps {
            let took = step.duration_millis.map(format_duration_millis).unwrap_or_default();
            let decision = step.decision.as_deref().map(|d| format!(" · {d}")).unwrap_or_default();
            ui.label(RichText::new(format!("{} ({}) {} {took}{decision}", step.step_id, step.kind, step.status)).small());
            if let Some(error) = &step.error {
                ui.label(RichText::new(error).small().color(theme::error()));
            } else if !step.output.is_empty() {
                ui.label(RichText::new(&step.output).small().color(theme::muted()));
            }
        }
        ui.horizontal(|ui| {
            if ui.button("Run again").on_hover_text("Run again with the same trigger data").clicked() {
                actions.push(UiAction::AutomationRerun(run.run_id));
            }
            if matches!(run.status.as_str(), "queued" | "running" | "waiting_delay" | "waiting_approval") && ui.button("Cancel").clicked() {
                actions.push(UiAction::AutomationCancel(run.run_id));
            }
        });
    });
}
