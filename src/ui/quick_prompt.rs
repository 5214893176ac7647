//! The quick prompt: a small always-on-top window opened by the global hotkey.
//! Enter sends into the current chat (the answer streams in the sidebar); Esc hides it.

use egui::{Key, TextEdit};

use crate::state::UiAction;

#[derive(Default)]
pub struct QuickPromptPanel {
    pub text: String,
    pub focus_requested: bool,
}

pub fn quick_prompt_ui(ui: &mut egui::Ui, panel: &mut QuickPromptPanel, actions: &mut Vec<UiAction>) {
    ui.horizontal(|ui| {
        let label = ui.label("Quick prompt");
        let response = ui
            .add(TextEdit::singleline(&mut panel.text).desired_width(f32::INFINITY).hint_text("Ask cowork…"))
            .labelled_by(label.id);
        if !panel.focus_requested {
            response.request_focus();
            panel.focus_requested = true;
        }
        let submitted = response.lost_focus() && ui.input(|i| i.key_pressed(Key::Enter));
        if submitted && !panel.text.trim().is_empty() {
            actions.push(UiAction::SendMessage(panel.text.trim().to_owned()));
            panel.text.clear();
            actions.push(UiAction::CloseQuickPrompt);
        }
        if ui.input(|i| i.key_pressed(Key::Escape)) {
            actions.push(UiAction::CloseQuickPrompt);
        }
    });
}
