//! The quick prompt: a small always-on-top window opened by the global hotkey.
//! Enter sends into the current chat (the answer streams in the sidebar); Esc
//! cancels a recording, else hides it. Talk (or the voice hotkey) puts what
//! was said into the box, to edit before sending.

use egui::{Key, TextEdit};

use crate::audio::events::VoiceTarget;
use crate::state::{UiAction, VoiceView};

#[derive(Default)]
pub struct QuickPromptPanel {
    pub text: String,
    pub focus_requested: bool,
}

pub fn quick_prompt_ui(ui: &mut egui::Ui, panel: &mut QuickPromptPanel, voice: &VoiceView, actions: &mut Vec<UiAction>) {
    ui.horizontal(|ui| {
        let label = ui.label("Quick prompt");
        let response = ui
            .add(TextEdit::singleline(&mut panel.text).desired_width(ui.available_width() - 150.0).hint_text("Ask cowork…"))
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
        crate::ui::voice::mic_ui(ui, voice, VoiceTarget::QuickPrompt, actions);
        if ui.input(|i| i.key_pressed(Key::Escape)) {
            if voice.recording.is_some() {
                actions.push(UiAction::VoiceCancel);
            } else {
                actions.push(UiAction::CloseQuickPrompt);
            }
        }
    });
}
