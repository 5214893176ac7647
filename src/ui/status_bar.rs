//! The status bar: healthy workers in one chip, each other worker in its own with its state; failed ones get Retry.

use egui::RichText;

use crate::runtime::{WorkerName, WorkerState};
use crate::state::{AppState, UiAction};
use crate::ui::theme;

pub fn status_bar_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    if state.settings.privacy.paused {
        ui.horizontal(|ui| {
            ui.label(RichText::new("Capture paused: nothing is recorded").color(theme::warn()));
            if ui.small_button("Resume").on_hover_text(format!("or {}", state.settings.pause_hotkey)).clicked() {
                actions.push(UiAction::TogglePause);
            }
        });
    }
    if let Some(target) = state.voice.recording {
        ui.horizontal(|ui| {
            let into = match target {
                crate::audio::events::VoiceTarget::QuickPrompt => "talking into the quick prompt",
                crate::audio::events::VoiceTarget::Chat => "talking into the chat",
                crate::audio::events::VoiceTarget::Dictation => "dictating into the focused app",
            };
            ui.label(RichText::new(format!("• Microphone on: {into}")).small().color(theme::error()));
            ui.add(egui::ProgressBar::new(state.voice.level).desired_width(60.0).desired_height(6.0).fill(theme::error()));
        });
    }
    let listen = &state.voice.listen;
    if listen.open() {
        let streams: Vec<&str> = [listen.mic.as_ref().map(|_| "microphone"), listen.system.as_ref().map(|_| "system audio")].into_iter().flatten().collect();
        let what = match &listen.call {
            Some(call) => format!("• Listening to a call ({call}): {}", streams.join(" and ")),
            None => format!("• Listening: {}", streams.join(" and ")),
        };
        let line = ui.label(RichText::new(what).small().color(theme::error()));
        line.on_hover_text(format!(
            "Listen mode transcribes on this computer into your history. {} stored this session{}. Pause stops it.",
            listen.stored,
            listen.last.as_deref().map(|l| format!("; last: {l}")).unwrap_or_default()
        ));
    }
    ui.horizontal_wrapped(|ui| {
        // Healthy workers share one chip, so a 380-pixel sidebar spends one line
        // on them; a worker that needs attention gets its own chip (and Retry).
        let (quiet, loud): (Vec<WorkerName>, Vec<WorkerName>) =
            WorkerName::ALL.into_iter().partition(|w| matches!(state.worker_state(*w), WorkerState::Running | WorkerState::Starting));
        if !quiet.is_empty() {
            let starting = quiet.iter().filter(|w| state.worker_state(**w) == WorkerState::Starting).count();
            let summary = match (quiet.len() - starting, starting) {
                (running, 0) => format!("• {running} workers running"),
                (0, starting) => format!("• {starting} workers starting"),
                (running, starting) => format!("• {running} running, {starting} starting"),
            };
            let names: Vec<String> = quiet.iter().map(|w| format!("{} {}", w.title(), state.worker_state(*w).label())).collect();
            let colour = if starting > 0 { theme::worker_colour(&WorkerState::Starting) } else { theme::worker_colour(&WorkerState::Running) };
            ui.label(RichText::new(summary).small().color(colour)).on_hover_text(names.join("\n"));
        }
        crate::ui::desktop::chip_ui(ui, state);
        for worker in loud {
            let worker_state = state.worker_state(worker);
            let text = RichText::new(format!("• {} {}", worker.title(), worker_state.label()))
                .small()
                .color(theme::worker_colour(&worker_state));
            let response = ui.label(text);
            let detail = match &worker_state {
                WorkerState::Degraded(reason) => Some(reason.clone()),
                WorkerState::Restarting { restarts, retry_in_millis, error } => Some(format!(
                    "{error}\nrestart {restarts} in {:.0} s",
                    *retry_in_millis as f64 / 1000.0
                )),
                WorkerState::Failed { error } => Some(format!("{error}\ngave up after repeated failures")),
                _ => None,
            };
            if let Some(detail) = detail {
                response.on_hover_text(detail);
            }
            if matches!(worker_state, WorkerState::Failed { .. }) && ui.small_button(format!("Retry {}", worker.title().to_lowercase())).clicked() {
                actions.push(UiAction::RetryWorker(worker));
            }
        }
    });
    if let Some(notice) = state.notices.last() {
        ui.label(RichText::new(notice).small().color(theme::warn()));
    }
}
