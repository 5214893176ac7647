//! The microphone button, its level meter and the last outcome, shared by
//! the quick prompt and the chat input.

use egui::RichText;

use crate::events::VoiceTarget;
use crate::state::{UiAction, VoiceView};
use crate::ui::theme;

/// The button (Talk while idle, Done while this input records), the meter
/// while recording, "Transcribing…" while Whisper runs, and the last
/// outcome ("heard nothing", an error) otherwise.
pub fn mic_ui(ui: &mut egui::Ui, voice: &VoiceView, target: VoiceTarget, actions: &mut Vec<UiAction>) {
    let recording_here = voice.recording == Some(target);
    let busy_elsewhere = voice.recording.is_some() && !recording_here;
    let label = if recording_here { "Done" } else { "Talk" };
    let hover = if recording_here { "Stop and transcribe (Esc cancels)" } else { "Talk instead of typing: transcribed on this computer" };
    if ui.add_enabled(!busy_elsewhere, egui::Button::new(label)).on_hover_text(hover).clicked() {
        actions.push(UiAction::VoiceToggle(target));
    }
    if recording_here {
        ui.add(egui::ProgressBar::new(voice.level).desired_width(60.0).desired_height(8.0).fill(theme::ERROR))
            .on_hover_text("Microphone level");
        ui.label(RichText::new("Listening").small().color(theme::ERROR));
    } else if voice.transcribing == Some(target) {
        ui.spinner();
        ui.label(RichText::new("Transcribing…").small().color(theme::MUTED));
    } else if let Some(status) = &voice.status {
        ui.label(RichText::new(status).small().color(theme::MUTED));
    }
}
