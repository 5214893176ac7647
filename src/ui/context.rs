//! The Context panel: what cowork sees right now, and today's sessions as a
//! timeline and a list.

use egui::{RichText, ScrollArea, Sense, Stroke, vec2};

use crate::ids::{format_duration_millis, local_day_start_millis, user_clock as format_clock};
use crate::runtime::{WorkerName, WorkerState};
use crate::state::{AppState, SessionDetailView, UiAction};
use crate::ui::theme;

/// The search box's draft (what is typed before it reaches the state).
#[derive(Default)]
pub struct SearchBox {
    pub text: String,
}

pub fn context_ui(ui: &mut egui::Ui, state: &AppState, search: &mut SearchBox, now_millis: i64, actions: &mut Vec<UiAction>) {
    if search_ui(ui, state, search, actions) {
        return;
    }
    ui.heading("Now");
    match state.worker_state(WorkerName::Capture) {
        WorkerState::Degraded(reason) => {
            ui.label(RichText::new(format!("Capture is limited: {reason}")).color(theme::warn()));
        }
        WorkerState::Failed { error } => {
            ui.label(RichText::new(format!("Capture failed: {error}")).color(theme::error()));
        }
        _ => {}
    }
    match &state.active_window {
        Some(window) => {
            ui.label(RichText::new(&window.title).strong());
            ui.label(RichText::new(format!(
                "{}{}",
                window.app,
                window.pid.map(|pid| format!(" · pid {pid}")).unwrap_or_default()
            ))
            .color(theme::muted()));
            if let (Some(url), Some(source)) = (&window.url, window.url_source) {
                ui.label(RichText::new(format!("{url}  (from {})", source_label(source))).small().color(theme::muted()));
            }
        }
        None => {
            ui.label(RichText::new("No active window (away, or nothing focused)").color(theme::muted()));
        }
    }
    recording_now_ui(ui, state);
    stream_health_ui(ui, state, now_millis);
    ui.separator();
    ui.heading("Today");
    timeline_ui(ui, state, now_millis);
    let total: i64 = state.sessions_today.iter().map(|s| s.duration_millis(now_millis)).sum();
    ui.label(
        RichText::new(format!("{} sessions · {} tracked", state.sessions_today.len(), format_duration_millis(total)))
            .small()
            .color(theme::muted()),
    );
    ScrollArea::vertical().auto_shrink([false, false]).show(ui, |ui| {
        if state.sessions_today.is_empty() {
            ui.label(RichText::new("No finished sessions yet today").color(theme::muted()));
        }
        for session in state.sessions_today.iter().rev() {
            ui.horizontal(|ui| {
                let (rect, _) = ui.allocate_exact_size(vec2(6.0, 14.0), Sense::hover());
                ui.painter().rect_filled(rect, 1.0, theme::app_colour(&session.app));
                ui.label(RichText::new(format_clock(session.started_at_millis)).monospace().small());
                ui.label(RichText::new(&session.app).small().color(theme::muted()));
                ui.label(RichText::new(format_duration_millis(session.duration_millis(now_millis))).small());
            });
            let open = state.open_session.as_ref().filter(|s| s.session_id == session.session_id);
            if ui.selectable_label(open.is_some(), &session.title).on_hover_text("Show what was typed and copied").clicked() {
                actions.push(UiAction::ToggleSession(session.session_id));
            }
            if let (Some(url), Some(source)) = (&session.url, session.url_source) {
                ui.label(RichText::new(url).small().color(theme::muted())).on_hover_text(format!("URL from {}", source_label(source)));
            }
            if let Some(detail) = open {
                session_detail_ui(ui, detail);
            }
        }
    });
}

/// One line per stream: last event age, events in the last minute, drops, errors.
fn stream_health_ui(ui: &mut egui::Ui, state: &AppState, now_millis: i64) {
    for health in state.stream_health.values() {
        let age = health
            .last_event_at_millis
            .map(|at| format!("last {} ago", format_duration_millis(now_millis - at)))
            .unwrap_or_else(|| "nothing yet".into());
        let mut line = format!("{}: {age} · {}/min", crate::capture::events::stream_title(&health.stream), health.events_last_minute);
        if health.drops > 0 {
            line.push_str(&format!(" · {} dropped", health.drops));
        }
        if health.errors > 0 {
            line.push_str(&format!(" · {} error{}", health.errors, if health.errors == 1 { "" } else { "s" }));
        }
        let colour = if health.drops > 0 || health.errors > 0 { theme::warn() } else { theme::muted() };
        let label = ui.label(RichText::new(line).small().color(colour));
        if let Some(error) = &health.last_error {
            label.on_hover_text(error);
        }
    }
}

/// Characters of a window's screen text shown in a session (all of it on hover).
const SEEN_SHOWN: usize = 400;

fn session_detail_ui(ui: &mut egui::Ui, detail: &SessionDetailView) {
    egui::Frame::new().inner_margin(6.0).stroke(egui::Stroke::new(1.0, theme::muted())).show(ui, |ui| {
        if !detail.loaded {
            ui.label(RichText::new("Loading…").small().color(theme::muted()));
            return;
        }
        if detail.typed.is_empty() && detail.copied.is_empty() && detail.seen.is_empty() {
            ui.label(RichText::new("Nothing typed, copied or read on screen in this session").small().color(theme::muted()));
        }
        for (at, text) in &detail.typed {
            ui.label(RichText::new(format!("{} typed: {text}", format_clock(*at))).small());
        }
        for (at, text) in &detail.copied {
            ui.label(RichText::new(format!("{} copied: {text}", format_clock(*at))).small());
        }
        for (at, text) in &detail.seen {
            let shown: String = text.chars().take(SEEN_SHOWN).collect();
            let more = if shown.len() < text.len() { "…" } else { "" };
            ui.label(RichText::new(format!("{} on screen {shown}{more}", format_clock(*at))).small()).on_hover_text(text.as_str());
        }
    });
}

/// "What would be recorded right now": the focused app, the streams that
/// would record it, or the rule that keeps it out.
fn recording_now_ui(ui: &mut egui::Ui, state: &AppState) {
    let settings = &state.settings;
    let text = match &state.capture_decision {
        None => return,
        Some(decision) => match (&decision.app, &decision.excluded_by) {
            (None, _) => "Recording now: nothing (no window focused, or cowork itself)".to_owned(),
            (Some(app), Some(rule)) => format!("Not recording {app}: {rule}"),
            (Some(app), None) if !settings.streams_confirmed => format!("Not recording {app}: waiting for your first-run answer"),
            (Some(app), None) => {
                let streams: Vec<&str> = [
                    (settings.record_windows, "window"),
                    (settings.record_keys, "typing"),
                    (settings.record_clipboard, "clipboard"),
                    (settings.screen.active(), "screen text"),
                ]
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, name)| *name)
                .collect();
                if streams.is_empty() {
                    format!("Not recording {app}: every stream is switched off")
                } else {
                    format!("Recording {app}: {}", streams.join(", "))
                }
            }
        },
    };
    ui.label(RichText::new(text).small().color(theme::muted()));
}

/// Apps as coloured bars across the day so far.
fn timeline_ui(ui: &mut egui::Ui, state: &AppState, now_millis: i64) {
    let day_start = local_day_start_millis(now_millis);
    let span = (now_millis - day_start).max(1) as f32;
    let (rect, _) = ui.allocate_exact_size(vec2(ui.available_width(), 18.0), Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_stroke(rect, 2.0, Stroke::new(1.0, theme::muted()), egui::StrokeKind::Inside);
    for session in &state.sessions_today {
        let start = ((session.started_at_millis - day_start).max(0) as f32 / span).clamp(0.0, 1.0);
        let end = ((session.ended_at_millis.unwrap_or(now_millis) - day_start) as f32 / span).clamp(0.0, 1.0);
        let x0 = rect.left() + start * rect.width();
        let x1 = (rect.left() + end * rect.width()).max(x0 + 1.0);
        painter.rect_filled(
            egui::Rect::from_x_y_ranges(x0..=x1, rect.y_range()),
            0.0,
            theme::app_colour(&session.app),
        );
    }
}

fn source_label(source: crate::records::UrlSource) -> &'static str {
    match source {
        crate::records::UrlSource::Atspi => "the address bar",
        crate::records::UrlSource::Title => "the title",
        crate::records::UrlSource::Script => "a simulation script",
    }
}

/// The search box; while it holds a query, results replace the rest of the panel.
/// Returns whether results are shown.
fn search_ui(ui: &mut egui::Ui, state: &AppState, search: &mut SearchBox, actions: &mut Vec<UiAction>) -> bool {
    ui.horizontal(|ui| {
        let label = ui.label("Search");
        let response = ui
            .add(egui::TextEdit::singleline(&mut search.text).desired_width(ui.available_width()).hint_text("windows, typing, clipboard, chat"))
            .labelled_by(label.id);
        if response.changed() {
            actions.push(UiAction::Search(search.text.clone()));
        }
    });
    if search.text.trim().is_empty() {
        return false;
    }
    if let Some(status) = &state.search.status {
        ui.label(RichText::new(status).small().color(theme::muted()));
    }
    ScrollArea::vertical().id_salt("search_results").auto_shrink([false, false]).show(ui, |ui| {
        // Grouped by day, then app, newest day first.
        let mut hits: Vec<&crate::memory::search::Hit> = state.search.hits.iter().collect();
        hits.sort_by_key(|h| (std::cmp::Reverse(local_day_start_millis(h.at_millis)), h.app.clone(), std::cmp::Reverse(h.at_millis)));
        let mut last_group = None;
        for hit in hits {
            let group = (local_day_start_millis(hit.at_millis), hit.app.clone());
            if last_group.as_ref() != Some(&group) {
                let day = crate::ids::rfc3339(group.0);
                ui.label(RichText::new(format!("{} · {}", &day[..10], group.1.as_deref().unwrap_or("chat"))).strong().small());
                last_group = Some(group);
            }
            let stream = format!("{:?}", hit.stream).to_lowercase();
            let text = format!("{} {stream}: {} — {}", format_clock(hit.at_millis), hit.title, hit.snippet.replace('\n', " "));
            ui.horizontal(|ui| {
                // Pinning keeps it first in the open chat's answers.
                if state.current_thread.is_some()
                    && ui.small_button("Pin").on_hover_text("Pin to the open chat: always in its context").clicked()
                {
                    actions.push(UiAction::PinToThread { stream: hit.stream, source_id: hit.id });
                }
                let response = ui.add(egui::Button::selectable(false, RichText::new(text).small()).wrap());
                let open = match hit.stream {
                    crate::memory::search::Stream::Chat => "Open this chat",
                    crate::memory::search::Stream::Summary => "Show summaries in Settings → Memory",
                    _ => "Open the session it happened in",
                };
                if response.on_hover_text(open).clicked() {
                    actions.push(UiAction::Search(String::new()));
                    actions.push(UiAction::OpenHit(hit.clone()));
                    search.text.clear();
                }
            });
        }
    });
    true
}
