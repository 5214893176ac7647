//! The microphone button, its level meter and the last outcome, shared by
//! the quick prompt and the chat input.

use egui::RichText;

use crate::audio::events::VoiceTarget;
use crate::config::keys;
use crate::state::{AppState, UiAction, VoiceView};
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
        ui.add(egui::ProgressBar::new(voice.level).desired_width(60.0).desired_height(8.0).fill(theme::error()))
            .on_hover_text("Microphone level");
        ui.label(RichText::new("Listening").small().color(theme::error()));
    } else if voice.transcribing == Some(target) {
        ui.spinner();
        ui.label(RichText::new("Transcribing…").small().color(theme::muted()));
    } else if let Some(status) = &voice.status {
        ui.label(RichText::new(status).small().color(theme::muted()));
    }
}

/// Settings → Voice: the speech model, among the manifest's speech models
/// (`speech`: name, installed); one not installed says where to get it.
pub fn speech_model_ui(ui: &mut egui::Ui, chosen: &str, speech: &[(&str, bool)], actions: &mut Vec<UiAction>) {
    let default = speech.first().map(|(name, _)| *name).unwrap_or("whisper-tiny-en");
    let current = if chosen.is_empty() { default } else { chosen };
    ui.horizontal(|ui| {
        let label = ui.label("Speech model");
        egui::ComboBox::from_id_salt("speech_model")
            .selected_text(current)
            .show_ui(ui, |ui| {
                for (index, (name, installed)) in speech.iter().enumerate() {
                    let text = if *installed { name.to_string() } else { format!("{name} (not installed)") };
                    let response = ui.add_enabled(*installed, egui::Button::selectable(current == *name, text));
                    if response.clicked() && current != *name {
                        // The first is the default: choosing it stores nothing, so a future default follows.
                        let value = if index == 0 { String::new() } else { name.to_string() };
                        actions.push(UiAction::SaveSetting { key: keys::VOICE_MODEL.to_owned(), value });
                    }
                }
            })
            .response
            .labelled_by(label.id);
    });
    if speech.iter().any(|(_, installed)| !installed) {
        ui.label(RichText::new("More speech models: Install one under Models, below").small().color(theme::muted()));
    }
}

/// Settings → Voice: the microphone, among the inputs the sound server has
/// (monitors left out: those are listen mode's system audio). A device
/// chosen before and unplugged now stays listed, marked.
pub fn microphone_ui(
    ui: &mut egui::Ui,
    chosen: &str,
    devices: Option<&Result<Vec<crate::audio::mic::InputDevice>, String>>,
    actions: &mut Vec<UiAction>,
) {
    let listed: &[crate::audio::mic::InputDevice] = match devices {
        Some(Ok(devices)) => devices,
        _ => &[],
    };
    let microphones: Vec<_> = listed.iter().filter(|d| !d.monitor).collect();
    let describe = |name: &str| match microphones.iter().find(|d| d.name == name) {
        Some(device) => device.description.clone(),
        None if devices.is_some() => format!("{name} (not connected)"),
        None => name.to_owned(),
    };
    let default_label = match microphones.iter().find(|d| d.default) {
        Some(device) => format!("Default ({})", device.description),
        None => "Default".to_owned(),
    };
    let selected = if chosen.is_empty() { default_label.clone() } else { describe(chosen) };
    let save = |actions: &mut Vec<UiAction>, value: &str| actions.push(UiAction::SaveSetting { key: keys::VOICE_DEVICE.to_owned(), value: value.to_owned() });
    ui.horizontal(|ui| {
        let label = ui.label("Microphone");
        egui::ComboBox::from_id_salt("microphone")
            .selected_text(selected)
            .show_ui(ui, |ui| {
                if ui.selectable_label(chosen.is_empty(), default_label).clicked() && !chosen.is_empty() {
                    save(actions, "");
                }
                for device in &microphones {
                    if ui.selectable_label(chosen == device.name, &device.description).on_hover_text(&device.name).clicked() && chosen != device.name {
                        save(actions, &device.name);
                    }
                }
                if !chosen.is_empty() && !microphones.iter().any(|d| d.name == chosen) {
                    let _ = ui.selectable_label(true, describe(chosen));
                }
            })
            .response
            .labelled_by(label.id);
        if ui.small_button("Refresh").on_hover_text("List the microphones again").clicked() {
            actions.push(UiAction::ListMicrophones);
        }
    });
    if let Some(Err(error)) = devices {
        ui.label(RichText::new(format!("Cannot list microphones: {error}")).small().color(theme::error()));
    }
}

/// Settings → Voice → Listen mode: drafts and the consent question's choices.
pub struct ListenPanel {
    pub asking: bool,
    /// Microphone, system audio, as ticked in the consent question.
    pub choices: [bool; 2],
    pub retention: Option<String>,
    pub audio_retention: Option<String>,
}

impl Default for ListenPanel {
    fn default() -> Self {
        Self { asking: false, choices: [true, false], retention: None, audio_retention: None }
    }
}

/// What listen mode records, said before the user agrees.
pub const LISTEN_DISCLOSURE: &str = "Listen mode transcribes what is said near this computer into your private history, \
     on this computer: your microphone (you) and, if you allow it, what the computer plays (others, in calls and videos). \
     Nothing is sent anywhere. Pause and quiet hours close the microphone; nothing is kept while a window your privacy \
     rules exclude is focused. Transcripts are kept 30 days and can be deleted by time range; audio is not kept unless you \
     turn that on.";

/// Listen mode: its own consent question first, then its switches, retention and state.
pub fn listen_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut ListenPanel, actions: &mut Vec<UiAction>) {
    let listen = &state.settings.listen;
    let save = |actions: &mut Vec<UiAction>, key: &str, on: bool| actions.push(UiAction::SaveSetting { key: key.to_owned(), value: on.to_string() });
    ui.label(RichText::new("Listen mode").strong());
    if !listen.consented {
        ui.label(RichText::new(LISTEN_DISCLOSURE).small().color(theme::muted()));
        if !panel.asking {
            if ui.button("Turn on listen mode…").clicked() {
                panel.asking = true;
            }
            return;
        }
        ui.checkbox(&mut panel.choices[0], "My microphone: what I say");
        ui.checkbox(&mut panel.choices[1], "What the computer plays: what others say in calls");
        ui.label(
            RichText::new("In many places, recording a conversation needs everyone's consent: tell the people you talk to.")
                .small()
                .color(theme::warn()),
        );
        ui.horizontal(|ui| {
            let any = panel.choices.iter().any(|c| *c);
            if ui.add_enabled(any, egui::Button::new("I agree, start listening")).clicked() {
                save(actions, keys::LISTEN_MIC, panel.choices[0]);
                save(actions, keys::LISTEN_SYSTEM, panel.choices[1]);
                save(actions, keys::LISTEN_CONSENTED, true);
                save(actions, keys::LISTEN_ENABLED, true);
                panel.asking = false;
            }
            if ui.button("Not now").clicked() {
                panel.asking = false;
            }
        });
        return;
    }
    for (key, on, text, hover) in [
        (keys::LISTEN_ENABLED, listen.enabled, "Listen mode on", "Off: no stream is open and nothing is transcribed"),
        (keys::LISTEN_MIC, listen.mic, "Microphone: what you say", "Transcribed as \"You\""),
        (keys::LISTEN_SYSTEM, listen.system, "What the computer plays: what others say", "The monitor of the default output, transcribed as \"Others\""),
        (keys::LISTEN_KEEP_AUDIO, listen.keep_audio, "Keep the audio too", "WAV files in the data folder's audio/, deleted after the days below"),
    ] {
        let mut value = on;
        if ui.checkbox(&mut value, text).on_hover_text(hover).changed() {
            save(actions, key, value);
        }
    }
    crate::ui::widgets::setting_row_ui(ui, "Keep transcripts (days, 0 forever)", keys::LISTEN_RETENTION_DAYS, &listen.retention_days.to_string(), &mut panel.retention, actions);
    if listen.keep_audio {
        crate::ui::widgets::setting_row_ui(ui, "Keep audio (days)", keys::LISTEN_AUDIO_RETENTION_DAYS, &listen.audio_retention_days.to_string(), &mut panel.audio_retention, actions);
    }
    let status = &state.voice.listen;
    let line = match (&status.error, &status.held, status.open()) {
        (Some(error), _, _) => RichText::new(error).color(theme::error()),
        (None, Some(held), _) => RichText::new(format!("Not listening: {held}")).color(theme::warn()),
        (None, None, true) => RichText::new(format!("Listening; {} stored this session", status.stored)).color(theme::ok()),
        (None, None, false) => RichText::new("Not listening").color(theme::muted()),
    };
    ui.label(line.small());
    if let Some(last) = &status.last {
        ui.label(RichText::new(format!("Last heard — {last}")).small().color(theme::muted()));
    }
    if ui.small_button("Withdraw consent").on_hover_text("Turns listen mode off and asks again next time").clicked() {
        save(actions, keys::LISTEN_ENABLED, false);
        save(actions, keys::LISTEN_CONSENTED, false);
    }
}
