//! The MCP parts of the chat: a server's request for input drawn as a form
//! (Send checks it against the requested schema first; Decline and Cancel
//! send nothing).

use std::collections::{BTreeMap, HashMap};

use egui::{RichText, TextEdit};

use crate::events::ElicitationView;
use crate::mcp::elicit::{Answer, Input, Kind};
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
}

/// Every open request for input, oldest first.
pub fn elicitations_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut McpChatPanel, actions: &mut Vec<UiAction>) {
    panel.forms.retain(|id, _| state.elicitations.iter().any(|e| e.id == *id));
    for request in &state.elicitations {
        let draft = panel.forms.entry(request.id).or_insert_with(|| FormDraft { inputs: request.form.initial(), problems: BTreeMap::new() });
        egui::Frame::new().fill(theme::USER_BUBBLE).corner_radius(6.0).inner_margin(8.0).show(ui, |ui| {
            form_ui(ui, request, draft, actions);
        });
        ui.add_space(theme::SPACING);
    }
}

fn form_ui(ui: &mut egui::Ui, request: &ElicitationView, draft: &mut FormDraft, actions: &mut Vec<UiAction>) {
    ui.label(RichText::new(format!("The MCP server {} asks", request.server)).strong());
    // The server's words, shown as its: data, not cowork's instructions.
    ui.label(RichText::new(&request.message).italics());
    ui.label(RichText::new(format!("What you send goes to {} only; never put a password here", request.server)).small().color(theme::MUTED));
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
            ui.label(RichText::new(&field.description).small().color(theme::MUTED));
        }
        if let Some(problem) = draft.problems.get(&field.name) {
            ui.label(RichText::new(format!("{}: {problem}", field.title)).small().color(theme::ERROR));
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
