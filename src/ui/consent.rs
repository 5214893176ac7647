//! First run: before anything is recorded, the user chooses which streams
//! record (each on by default). Shown until answered; Settings changes it
//! later. Each stream worker takes `SetRecording(bool)`: the sidebar starts
//! them off until this answer (`streams_confirmed`) and then applies the
//! per-stream switches. After it, the first run's pages (`ui::setup`) stand in
//! for the tabs until finished or skipped (`ui.setup_done`).
//!
//! Invariant: before the user has answered which streams record, the sidebar
//! records nothing.

use egui::RichText;

use crate::config::keys;
use crate::state::{AppState, UiAction};
use crate::ui::theme;

/// The streams a user can switch, with their setting keys and what they mean.
pub const STREAMS: [(&str, &str, &str); 3] = [
    (keys::RECORD_WINDOWS, "Record windows and apps", "Which app and window you use, and for how long"),
    (keys::RECORD_KEYS, "Record what you type", "Typed text per window; shortcuts by name; <private>…</private> is left out"),
    (keys::RECORD_CLIPBOARD, "Record what you copy", "Clipboard text with the app it came from"),
];

/// Panel-local choices before they are saved.
pub struct ConsentPanel {
    pub choices: [bool; 3],
}

impl Default for ConsentPanel {
    fn default() -> Self {
        Self { choices: [true; 3] }
    }
}

pub fn consent_ui(ui: &mut egui::Ui, panel: &mut ConsentPanel, actions: &mut Vec<UiAction>) {
    ui.heading("Before cowork records anything");
    ui.label(
        RichText::new(
            "Everything stays in one file on this computer. Password managers and private windows are never recorded.",
        )
        .small()
        .color(theme::muted()),
    );
    for ((_, label, detail), on) in STREAMS.iter().zip(panel.choices.iter_mut()) {
        ui.checkbox(on, *label).on_hover_text(*detail);
    }
    if ui.button("Start recording").clicked() {
        for ((key, _, _), on) in STREAMS.iter().zip(panel.choices) {
            actions.push(UiAction::SaveSetting { key: (*key).to_owned(), value: on.to_string() });
        }
        actions.push(UiAction::SaveSetting { key: keys::STREAMS_CONFIRMED.to_owned(), value: "true".to_owned() });
    }
}

/// The same switches in Settings, applied at once.
pub fn streams_settings_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    let settings = &state.settings;
    let current = [settings.record_windows, settings.record_keys, settings.record_clipboard];
    for ((key, label, detail), on) in STREAMS.iter().zip(current) {
        let mut checked = on;
        if ui.checkbox(&mut checked, *label).on_hover_text(*detail).changed() {
            actions.push(UiAction::SaveSetting { key: (*key).to_owned(), value: checked.to_string() });
        }
    }
    if !settings.streams_confirmed {
        ui.label(RichText::new("Nothing is recorded until you answer the question at the top").small().color(theme::warn()));
    }
}
