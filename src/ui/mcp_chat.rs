//! The MCP parts of the chat: a server's request for input drawn as a form
//! (Send checks it against the requested schema first; Decline and Cancel
//! send nothing), resources to attach to the next message ("Attach…", then
//! chips that can be removed), and prompts offered as `/name` under the input.

use std::collections::{BTreeMap, HashMap};

use egui::{RichText, TextEdit};

use crate::mcp::elicit::{Answer, Input, Kind};
use crate::mcp::events::ElicitationView;
use crate::state::{AppState, UiAction};
use crate::ui::theme;

/// A form being filled in: its inputs and what Send found wrong.
#[derive(Clone, Debug, Default)]
pub struct FormDraft {
    pub inputs: BTreeMap<String, Input>,
    pub problems: BTreeMap<String, String>,
}

/// The chat's MCP drafts.
#[derive(Default)]
pub struct McpChatPanel {
    pub forms: HashMap<i64, FormDraft>,
    /// Why the `/name` in the input cannot be used yet (a missing argument).
    pub slash_problem: Option<String>,
}

/// Running servers with something to offer the chat input.
fn offering(state: &AppState, what: impl Fn(&crate::mcp::events::McpServerView) -> bool) -> impl Iterator<Item = &crate::mcp::events::McpServerView> {
    state.mcp_servers.iter().filter(move |s| s.status == crate::mcp::events::McpServerStatus::Running && what(s))
}

/// The running servers' prompts, borrowed (built each frame: no copies).
pub fn prompt_lists(state: &AppState) -> Vec<(&str, &[crate::mcp::events::McpPrompt])> {
    offering(state, |s| !s.prompts.is_empty()).map(|s| (s.name.as_str(), s.prompts.as_slice())).collect()
}

/// How much taller than the bare input the MCP rows make it (so the chat's
/// scroll area leaves them room).
pub fn extra_height(state: &AppState, draft: &str, panel: &McpChatPanel) -> f32 {
    let row = 22.0;
    // The attach buttons' row, then one row per attachment and per document being read.
    let mut extra = row * (1 + state.attachments.len() + state.reading_documents.len()) as f32;
    if state.file_browser.is_some() {
        extra += 220.0;
    }
    if draft.starts_with('/') {
        extra += crate::mcp::slash::matching(draft, &prompt_lists(state)).len().min(8) as f32 * row + if panel.slash_problem.is_some() { row } else { 0.0 };
    }
    extra
}

/// "Attach…" (the running servers' resources) and the attached ones, each removable.
pub fn attachments_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    let running: Vec<&crate::mcp::events::McpServerView> = offering(state, |s| !s.resources.is_empty()).collect();
    ui.horizontal_wrapped(|ui| {
        // A document from disk (the desktop's file chooser; or drop files onto the sidebar).
        if ui.small_button("Attach a file…").on_hover_text("PDF, Word, OpenDocument, Excel, PowerPoint, EPUB, HTML, Markdown, CSV or text; or drop files here").clicked() {
            actions.push(UiAction::ChooseFiles);
        }
        if !running.is_empty() {
            ui.menu_button("Attach…", |ui| {
                for server in &running {
                    ui.label(RichText::new(&server.name).small().color(theme::muted()));
                    for resource in &server.resources {
                        let button = ui.button(&resource.name).on_hover_text(format!("{}\n{}", resource.uri, resource.description));
                        if button.clicked() {
                            actions.push(UiAction::AttachResource { server: server.name.clone(), uri: resource.uri.clone(), name: resource.name.clone() });
                            ui.close();
                        }
                    }
                }
            });
        }
    });
    if let Some(browser) = &state.file_browser {
        file_browser_ui(ui, browser, actions);
    }
    for name in &state.reading_documents {
        ui.label(RichText::new(format!("Reading {name}…")).small().color(theme::muted()));
    }
    for (index, attachment) in state.attachments.iter().enumerate() {
        ui.horizontal_wrapped(|ui| {
            let size = crate::media::human_bytes(attachment.text.len() as u64);
            let from = if attachment.server.is_empty() { "document" } else { attachment.server.as_str() };
            ui.label(RichText::new(format!("{} · {from} · {size}", attachment.name)).small()).on_hover_text(&attachment.uri);
            if ui.small_button(format!("Remove {}", attachment.name)).clicked() {
                actions.push(UiAction::Detach(index));
            }
        });
    }
}

/// The sidebar's own file browser (where the desktop has no file chooser):
/// the folder, Up, its folders and files; a file is attached on a click.
fn file_browser_ui(ui: &mut egui::Ui, browser: &crate::state::FileBrowser, actions: &mut Vec<UiAction>) {
    egui::Frame::new().inner_margin(4.0).stroke(egui::Stroke::new(1.0, theme::muted())).show(ui, |ui| {
        ui.set_width(ui.available_width());
        ui.horizontal_wrapped(|ui| {
            if let Some(parent) = browser.dir.parent()
                && ui.small_button("Up").on_hover_text(parent.display().to_string()).clicked()
            {
                actions.push(UiAction::BrowseFiles(Some(parent.to_path_buf())));
            }
            if ui.small_button("Close the file browser").clicked() {
                actions.push(UiAction::BrowseFiles(None));
            }
            ui.label(RichText::new(browser.dir.display().to_string()).small().strong());
        });
        if let Some(error) = &browser.error {
            ui.label(RichText::new(error).small().color(theme::warn()));
        }
        egui::ScrollArea::vertical().id_salt("file_browser").max_height(160.0).show(ui, |ui| {
            for (name, folder, size) in &browser.entries {
                let label = if *folder { format!("{name}/") } else { format!("{name} · {}", crate::media::human_bytes(*size)) };
                if ui.add(egui::Button::new(RichText::new(label).small()).frame(false)).clicked() {
                    let path = browser.dir.join(name);
                    actions.push(if *folder { UiAction::BrowseFiles(Some(path)) } else { UiAction::AttachFiles(vec![path]) });
                }
            }
        });
    });
}

/// Under the input while it starts with `/`: the prompts that match, each
/// filling in its name (and its arguments' names) on a click; and why the
/// typed one cannot be used yet.
pub fn prompts_ui(ui: &mut egui::Ui, state: &AppState, draft: &mut String, panel: &mut McpChatPanel, input: egui::Id) {
    if !draft.starts_with('/') {
        panel.slash_problem = None;
        return;
    }
    let servers = prompt_lists(state);
    let matching = crate::mcp::slash::matching(draft, &servers);
    let shared = |name: &str| matching.iter().filter(|(_, p)| p.name == name).count() > 1;
    let mut chosen = None;
    for (server, prompt) in matching.iter().take(8) {
        let name = if shared(&prompt.name) { format!("/{server}:{}", prompt.name) } else { format!("/{}", prompt.name) };
        let arguments: String = prompt.arguments.iter().map(|(a, required)| if *required { format!(" {a}=…") } else { format!(" [{a}=…]") }).collect();
        let text = format!("{name}{arguments} — {} ({server})", prompt.description);
        if ui.add(egui::Button::new(RichText::new(text).small()).frame(false)).clicked() {
            chosen = Some(format!("{name} "));
        }
    }
    if let Some(name) = chosen {
        *draft = name;
        // Typing goes on after the name, in the input.
        if let Some(mut edit) = egui::TextEdit::load_state(ui.ctx(), input) {
            let end = egui::text::CCursor::new(draft.chars().count());
            edit.cursor.set_char_range(Some(egui::text::CCursorRange::one(end)));
            edit.store(ui.ctx(), input);
        }
        ui.memory_mut(|m| m.request_focus(input));
    }
    if let Some(problem) = &panel.slash_problem {
        ui.label(RichText::new(problem).small().color(theme::error()));
    }
}

/// Every open request for input, oldest first.
pub fn elicitations_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut McpChatPanel, actions: &mut Vec<UiAction>) {
    panel.forms.retain(|id, _| state.elicitations.iter().any(|e| e.id == *id));
    for request in &state.elicitations {
        let draft = panel.forms.entry(request.id).or_insert_with(|| FormDraft { inputs: request.form.initial(), problems: BTreeMap::new() });
        egui::Frame::new().fill(theme::user_bubble()).corner_radius(6.0).inner_margin(8.0).show(ui, |ui| {
            form_ui(ui, request, draft, actions);
        });
        ui.add_space(theme::SPACING);
    }
}

fn form_ui(ui: &mut egui::Ui, request: &ElicitationView, draft: &mut FormDraft, actions: &mut Vec<UiAction>) {
    ui.label(RichText::new(format!("The MCP server {} asks", request.server)).strong());
    // The server's words, shown as its: data, not cowork's instructions.
    ui.label(RichText::new(&request.message).italics());
    ui.label(RichText::new(format!("What you send goes to {} only; never put a password here", request.server)).small().color(theme::muted()));
    for field in &request.form.fields {
        let title = if field.required { format!("{} *", field.title) } else { field.title.clone() };
        let input = draft.inputs.entry(field.name.clone()).or_insert_with(|| Input::Text(String::new()));
        match (&field.kind, input) {
            (Kind::Boolean, Input::Bool(on)) => {
                ui.checkbox(on, title);
            }
            (Kind::Choice(options), Input::Text(value)) => {
                ui.horizontal(|ui| {
                    let label = ui.label(&title);
                    let shown = options.iter().find(|(v, _)| v == value).map(|(_, l)| l.clone()).unwrap_or_else(|| "Choose…".into());
                    egui::ComboBox::from_id_salt(("elicit", request.id, &field.name))
                        .selected_text(shown)
                        .show_ui(ui, |ui| {
                            for (option, label) in options {
                                ui.selectable_value(value, option.clone(), label);
                            }
                        })
                        .response
                        .labelled_by(label.id);
                });
            }
            (Kind::Choices { options, .. }, Input::Picked(picked)) => {
                ui.label(&title);
                ui.horizontal_wrapped(|ui| {
                    for (option, label) in options {
                        let mut on = picked.contains(option);
                        if ui.checkbox(&mut on, label).changed() {
                            if on {
                                picked.insert(option.clone());
                            } else {
                                picked.remove(option);
                            }
                        }
                    }
                });
            }
            (kind, Input::Text(text)) => {
                let hint = match kind {
                    Kind::Text { format: Some(f), .. } if f == "email" => "name@example.org",
                    Kind::Text { format: Some(f), .. } if f == "uri" => "https://…",
                    Kind::Text { format: Some(f), .. } if f == "date" => "YYYY-MM-DD",
                    Kind::Text { format: Some(f), .. } if f == "date-time" => "YYYY-MM-DDTHH:MM:SSZ",
                    Kind::Number { integer: true, .. } => "a whole number",
                    Kind::Number { .. } => "a number",
                    _ => "",
                };
                let label = ui.label(&title);
                ui.add(TextEdit::singleline(text).hint_text(hint).desired_width(f32::INFINITY)).labelled_by(label.id);
            }
            // The input does not fit the field (cannot happen for a draft made from the form).
            (_, input) => *input = Input::Text(String::new()),
        }
        if !field.description.is_empty() {
            ui.label(RichText::new(&field.description).small().color(theme::muted()));
        }
        if let Some(problem) = draft.problems.get(&field.name) {
            ui.label(RichText::new(format!("{}: {problem}", field.title)).small().color(theme::error()));
        }
    }
    ui.horizontal(|ui| {
        if ui.button("Send").clicked() {
            match request.form.answer(&draft.inputs) {
                Ok(content) => actions.push(UiAction::Elicited { id: request.id, answer: Answer::Accept(content) }),
                Err(problems) => draft.problems = problems.into_iter().collect(),
            }
        }
        if ui.button("Decline").clicked() {
            actions.push(UiAction::Elicited { id: request.id, answer: Answer::Decline });
        }
        if ui.button("Cancel").clicked() {
            actions.push(UiAction::Elicited { id: request.id, answer: Answer::Cancel });
        }
    });
}
