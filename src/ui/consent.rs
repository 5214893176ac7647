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

/// The screen-text stream, off unless chosen: what it reads, in words.
pub const SCREEN_LABEL: &str = "Record the text on your screen";
pub const SCREEN_DISCLOSURE: &str = "The focused window's text — documents, pages, terminals, dialogs — read from the app \
    itself, or by OCR of that window where the app gives none. Never windows your rules exclude, private windows, \
    password fields, quiet hours or while paused: those are not read at all. Kept encrypted in the same file.";

/// Panel-local choices before they are saved.
pub struct ConsentPanel {
    pub choices: [bool; 3],
    /// The screen-text stream (off unless chosen).
    pub screen: bool,
}

impl Default for ConsentPanel {
    fn default() -> Self {
        Self { choices: [true; 3], screen: false }
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
    ui.checkbox(&mut panel.screen, SCREEN_LABEL).on_hover_text(SCREEN_DISCLOSURE);
    if panel.screen {
        ui.label(RichText::new(SCREEN_DISCLOSURE).small().color(theme::muted()));
    }
    if ui.button("Start recording").clicked() {
        for ((key, _, _), on) in STREAMS.iter().zip(panel.choices) {
            actions.push(UiAction::SaveSetting { key: (*key).to_owned(), value: on.to_string() });
        }
        if panel.screen {
            // Chosen with its disclosure on screen: that is its consent.
            actions.push(UiAction::SaveSetting { key: keys::SCREEN_CONSENTED.to_owned(), value: "true".to_owned() });
            actions.push(UiAction::SaveSetting { key: keys::RECORD_SCREEN.to_owned(), value: "true".to_owned() });
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
    screen_settings_ui(ui, state, actions);
    if !settings.streams_confirmed {
        ui.label(RichText::new("Nothing is recorded until you answer the question at the top").small().color(theme::warn()));
    }
}

/// The screen-text stream's switch: its own consent first, then on/off, OCR, and how it is doing.
fn screen_settings_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    let screen = &state.settings.screen;
    let save = |actions: &mut Vec<UiAction>, key: &str, on: bool| actions.push(UiAction::SaveSetting { key: key.to_owned(), value: on.to_string() });
    if !screen.consented {
        ui.label(RichText::new(SCREEN_DISCLOSURE).small().color(theme::muted()));
        if ui.button(format!("{SCREEN_LABEL}: I agree")).clicked() {
            save(actions, keys::SCREEN_CONSENTED, true);
            save(actions, keys::RECORD_SCREEN, true);
        }
        return;
    }
    let mut on = screen.enabled;
    if ui.checkbox(&mut on, SCREEN_LABEL).on_hover_text(SCREEN_DISCLOSURE).changed() {
        save(actions, keys::RECORD_SCREEN, on);
    }
    if !screen.enabled {
        return;
    }
    let mut ocr = screen.ocr;
    if ui
        .checkbox(&mut ocr, "Read windows without accessible text by OCR")
        .on_hover_text("Terminals like xterm, canvases, remote desktops and some Electron apps give no text; OCR reads their pixels, on this computer")
        .changed()
    {
        save(actions, keys::SCREEN_OCR, ocr);
    }
    let status = &state.screen;
    let line = match (&status.held, &status.error) {
        (Some(held), _) => RichText::new(format!("Not reading the focused window: {held}")).color(theme::muted()),
        (None, Some(error)) => RichText::new(error).color(theme::warn()),
        (None, None) => RichText::new(format!("{} windows' text kept since cowork started", status.stored)).color(theme::muted()),
    };
    ui.label(line.small());
    if let Some(last) = &status.last {
        ui.label(RichText::new(format!("Last kept — {last}")).small().color(theme::muted()));
    }
    if ui.small_button("Withdraw consent").on_hover_text("Stops reading the screen and asks again next time").clicked() {
        save(actions, keys::RECORD_SCREEN, false);
        save(actions, keys::SCREEN_CONSENTED, false);
    }
}
