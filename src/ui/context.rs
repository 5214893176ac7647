//! The Context panel: what cowork sees right now, and a day or a week as a
//! timeline (apps, away time, typing and listening), time per project, and
//! the sessions.

use egui::{RichText, ScrollArea, Sense, Stroke, vec2};

use crate::day::ledger::{UNATTRIBUTED, hms, next_midnight, week_start};
use crate::day::timeline;
use crate::ids::{format_duration_millis, local_date, local_day_start_millis, local_weekday_name, user_clock as format_clock};
use crate::runtime::{WorkerName, WorkerState};
use crate::state::{AppState, SessionDetailView, UiAction};
use crate::ui::theme;

/// The panel's drafts: the search box's text, the project an open session
/// is to count for, and whether the timeline is coloured by project (else by app).
#[derive(Default)]
pub struct SearchBox {
    pub text: String,
    pub project: String,
    pub by_project: bool,
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
    days_ui(ui, state, search, now_millis, actions);
}

/// The timeline's days: which (a day or a week, back and forth), the bars,
/// time per project, and the sessions (of one project, when one is chosen).
fn days_ui(ui: &mut egui::Ui, state: &AppState, drafts: &mut SearchBox, now_millis: i64, actions: &mut Vec<UiAction>) {
    let day = &state.day;
    let today = local_day_start_millis(now_millis);
    let week = day.span.days == 7;
    ui.horizontal_wrapped(|ui| {
        let step = |forward: bool| -> i64 {
            let mut at = day.span.start_millis;
            for _ in 0..day.span.days.max(1) {
                at = if forward { next_midnight(at) } else { local_day_start_millis(at - 12 * 3_600_000) };
            }
            at
        };
        if ui.button("<").on_hover_text(if week { "The week before" } else { "The day before" }).clicked() {
            actions.push(UiAction::ShowDays { start_millis: step(false), days: day.span.days.max(1) });
        }
        let title = if week {
            format!("Week of {}", local_date(day.span.start_millis))
        } else if day.span.start_millis == today {
            "Today".to_owned()
        } else {
            format!("{} {}", local_weekday_name(day.span.start_millis), local_date(day.span.start_millis))
        };
        ui.heading(title);
        let at_end = day.end_millis() > today;
        if ui.add_enabled(!at_end, egui::Button::new(">")).on_hover_text(if week { "The week after" } else { "The day after" }).clicked() {
            actions.push(UiAction::ShowDays { start_millis: step(true), days: day.span.days.max(1) });
        }
        if ui.selectable_label(!week && day.span.start_millis == today, "Today").clicked() {
            actions.push(UiAction::ShowDays { start_millis: today, days: 1 });
        }
        if ui.selectable_label(week, "Week").clicked() && !week {
            actions.push(UiAction::ShowDays { start_millis: week_start(day.span.start_millis.max(1)), days: 7 });
        }
        ui.checkbox(&mut drafts.by_project, "By project").on_hover_text("Colour the timeline by project instead of by app");
    });
    if !day.loaded {
        ui.label(RichText::new("Loading…").small().color(theme::muted()));
        return;
    }
    let mut start = day.span.start_millis;
    for _ in 0..day.span.days.max(1) {
        let end = next_midnight(start);
        if week {
            ui.horizontal(|ui| {
                ui.add_sized(vec2(30.0, 12.0), egui::Label::new(RichText::new(local_weekday_name(start)).small()));
                day_bar_ui(ui, state, (start, end), drafts.by_project, now_millis, 12.0, actions);
            });
        } else {
            day_bar_ui(ui, state, (start, end), drafts.by_project, now_millis, 22.0, actions);
            hours_ui(ui);
        }
        start = end;
    }
    let tracked = day.ledger.seconds();
    ui.label(
        RichText::new(format!("{} sessions · {} tracked · ticks: typed above, heard below · grey: away · orange: calls with a note · blue: calendar", day.span.sessions.len(), format_duration_millis(tracked * 1000)))
            .small()
            .color(theme::muted()),
    );
    calendar_ui(ui, state, week, now_millis);
    projects_ui(ui, state, actions);
    recap_ui(ui, state, now_millis, actions);
    ui.separator();
    // The open session above the list, which is drawn a screenful of rows at a time (a week holds thousands).
    if let Some(detail) = &state.open_session {
        if let Some(session) = day.span.sessions.iter().find(|s| s.session_id == detail.session_id) {
            ui.horizontal_wrapped(|ui| {
                ui.label(RichText::new(&session.title).strong());
                if ui.small_button("Close").clicked() {
                    actions.push(UiAction::ToggleSession(session.session_id));
                }
            });
            if let (Some(url), Some(source)) = (&session.url, session.url_source) {
                ui.label(RichText::new(url).small().color(theme::muted())).on_hover_text(format!("URL from {}", source_label(source)));
            }
            count_as_ui(ui, state, session, drafts, actions);
        }
        session_detail_ui(ui, detail);
    }
    let chosen = day.project.as_deref();
    let shown: Vec<usize> = (0..day.span.sessions.len())
        .rev()
        .filter(|&i| chosen.is_none_or(|c| day.project_of(i).0 == c))
        .collect();
    if shown.is_empty() {
        let empty = if day.span.days == 1 && day.span.start_millis == today { "No finished sessions yet today" } else { "No finished sessions in these days" };
        ui.label(RichText::new(empty).color(theme::muted()));
        return;
    }
    let row_height = ui.text_style_height(&egui::TextStyle::Body).max(14.0);
    ScrollArea::vertical().auto_shrink([false, false]).show_rows(ui, row_height, shown.len(), |ui, rows| {
        for &index in &shown[rows] {
            let session = &day.span.sessions[index];
            ui.horizontal(|ui| {
                let (rect, _) = ui.allocate_exact_size(vec2(6.0, 14.0), Sense::hover());
                ui.painter().rect_filled(rect, 1.0, theme::app_colour(&session.app));
                let when = if week { format!("{} {}", local_weekday_name(session.started_at_millis), format_clock(session.started_at_millis)) } else { format_clock(session.started_at_millis) };
                ui.label(RichText::new(when).monospace().small());
                ui.label(RichText::new(format_duration_millis(session.duration_millis(now_millis))).small().color(theme::muted()));
                let open = state.open_session.as_ref().is_some_and(|s| s.session_id == session.session_id);
                let title = if open { RichText::new(&session.title).strong() } else { RichText::new(&session.title) };
                // (Written only while hovered: a week's list is long.)
                let about = |ui: &mut egui::Ui| {
                    let (project, why) = day.project_of(index);
                    let url = session.url.as_deref().map(|u| format!("\n{u}")).unwrap_or_default();
                    let why = why.map(|w| format!(": {}", w.describe())).unwrap_or_default();
                    ui.label(format!("{} · {project}{why}{url}\nShow what was typed, copied and on screen", session.app));
                };
                if ui.add(egui::Label::new(title).truncate().sense(Sense::click())).on_hover_ui(about).clicked() {
                    actions.push(UiAction::ToggleSession(session.session_id));
                }
            });
        }
    });
}

/// "Always count this window as …": a rule for its title, first in Settings → Memory → Projects.
fn count_as_ui(ui: &mut egui::Ui, state: &AppState, session: &crate::records::ActivitySession, drafts: &mut SearchBox, actions: &mut Vec<UiAction>) {
    let index = state.day.span.sessions.iter().position(|s| s.session_id == session.session_id);
    let current = index.and_then(|i| state.day.projects.get(i)).and_then(|found| found.project.clone());
    ui.horizontal_wrapped(|ui| {
        let label = ui.label(RichText::new(format!("Counts for {}; always count it as", current.as_deref().unwrap_or("no project"))).small());
        let field = ui.add(egui::TextEdit::singleline(&mut drafts.project).hint_text("Atlas, or No project").desired_width(110.0)).labelled_by(label.id);
        let enter = field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        let project = drafts.project.trim().to_owned();
        if (ui.add_enabled(!project.is_empty(), egui::Button::new("Save")).on_hover_text("Adds a rule for windows with this title (Settings → Memory → Projects)").clicked() || enter) && !project.is_empty() {
            let value = crate::day::projects::with_title_rule(&state.settings.projects, &project, &session.title);
            actions.push(UiAction::SaveSetting { key: crate::config::keys::PROJECT_RULES.to_owned(), value });
            drafts.project.clear();
        }
    });
}


/// One day's bar: apps as colours (one run per pixel column at most), away
/// time shaded, typing marked above and listening below; hover names the
/// session, a click opens it.
fn day_bar_ui(ui: &mut egui::Ui, state: &AppState, (start, end): (i64, i64), by_project: bool, now_millis: i64, height: f32, actions: &mut Vec<UiAction>) {
    let day = &state.day;
    let (rect, response) = ui.allocate_exact_size(vec2(ui.available_width().max(40.0), height), Sense::click());
    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Image, true, format!("Timeline of {} {}", local_weekday_name(start), local_date(start))));
    let painter = ui.painter_at(rect.expand(2.0));
    painter.rect_stroke(rect, 2.0, Stroke::new(1.0, theme::muted()), egui::StrokeKind::Inside);
    let width = rect.width();
    let runs = timeline::runs(&day.span.sessions, start, end, now_millis, width);
    // One mesh for the whole bar: hundreds of runs and ticks tessellate as one shape.
    let mut mesh = egui::Mesh::default();
    let mut fill = |x0: f32, x1: f32, y0: f32, y1: f32, colour: egui::Color32| {
        mesh.add_colored_rect(egui::Rect::from_x_y_ranges(rect.left() + x0..=rect.left() + x1.max(x0 + 1.0), y0..=y1), colour);
    };
    for run in &runs {
        let colour = match by_project {
            true => match day.project_of(run.session).0 {
                UNATTRIBUTED => theme::muted(),
                project => theme::app_colour(project),
            },
            false => theme::app_colour(&day.span.sessions[run.session].app),
        };
        fill(run.x0, run.x1, rect.top(), rect.bottom(), colour);
    }
    let away = egui::Color32::from_gray(128).gamma_multiply(0.35);
    for (x0, x1) in timeline::spans(&day.span.away, start, end, width) {
        fill(x0, x1, rect.top(), rect.bottom(), away);
    }
    // The calendars' meetings: a band along the top.
    let booked: Vec<(i64, i64)> = day.span.events.iter().filter(|e| !e.all_day).map(|e| (e.start_millis, e.end_millis)).collect();
    for (x0, x1) in timeline::spans(&booked, start, end, width) {
        fill(x0, x1, rect.top(), rect.top() + 4.0, theme::calendar());
    }
    // Calls cowork wrote a note of: a band along the bottom.
    let meetings: Vec<(i64, i64)> = day.span.notes.iter().filter(|n| n.kind == "meeting").map(|n| (n.start_millis, n.end_millis)).collect();
    for (x0, x1) in timeline::spans(&meetings, start, end, width) {
        fill(x0, x1, rect.bottom() - 5.0, rect.bottom(), egui::Color32::from_rgb(230, 140, 30));
    }
    for x in timeline::marks(&day.span.typed, start, end, width) {
        fill(x, x + 1.0, rect.top() - 2.0, rect.top() + 2.0, theme::strong());
    }
    for x in timeline::marks(&day.span.heard, start, end, width) {
        fill(x, x + 1.0, rect.bottom() - 2.0, rect.bottom() + 2.0, theme::accent());
    }
    painter.add(egui::Shape::mesh(mesh));
    let pointed = response.hover_pos().and_then(|pos| timeline::at(&runs, pos.x - rect.left()));
    if let Some(index) = pointed {
        let session = &day.span.sessions[index];
        let (project, why) = day.project_of(index);
        let end_at = session.ended_at_millis.unwrap_or(now_millis);
        let why = why.map(|w| format!(": {}", w.describe())).unwrap_or_default();
        let pointed_at = response.hover_pos().map_or(0, |pos| start + ((pos.x - rect.left()) / width * (end - start) as f32) as i64);
        let meeting = day.span.events.iter().find(|e| !e.all_day && e.start_millis <= pointed_at && pointed_at < e.end_millis).map(|e| format!("\nCalendar: {} ({}–{})", e.title, format_clock(e.start_millis), format_clock(e.end_millis))).unwrap_or_default();
        let text = format!("{}–{} {} — {}\n{project}{why}{meeting}", format_clock(session.started_at_millis), format_clock(end_at), session.app, session.title);
        let response = response.on_hover_text(text);
        if response.clicked() {
            actions.push(UiAction::ToggleSession(session.session_id));
        }
    }
}

/// The day's meetings from the calendars (a day shown; a week's are on its bars),
/// and the next one when it is today: "Next: Q3 review in 12 min".
fn calendar_ui(ui: &mut egui::Ui, state: &AppState, week: bool, now_millis: i64) {
    let day = &state.day;
    if let Some(line) = crate::calendar::next_meeting_line(&state.calendar.upcoming, now_millis, 12 * 3_600_000) {
        ui.label(RichText::new(line).small().color(theme::calendar()));
    }
    if week || day.span.events.is_empty() {
        return;
    }
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new("Meetings").small().strong());
        for event in day.span.events.iter().take(12) {
            let when = if event.all_day { "all day".to_owned() } else { format!("{}–{}", format_clock(event.start_millis), format_clock(event.end_millis)) };
            let people = if event.attendees.is_empty() { String::new() } else { format!("\nWith {}", event.attendees.join(", ")) };
            let place = if event.location.is_empty() { String::new() } else { format!("\n{}", event.location) };
            ui.label(RichText::new(format!("{when} {}", event.title)).small()).on_hover_text(format!("{}{people}{place}", event.title));
        }
    });
}

/// Hours under a day's bar: 0, 6, 12, 18.
fn hours_ui(ui: &mut egui::Ui) {
    let (rect, _) = ui.allocate_exact_size(vec2(ui.available_width().max(40.0), 12.0), Sense::hover());
    let painter = ui.painter_at(rect);
    for hour in [0, 6, 12, 18] {
        let x = rect.left() + rect.width() * hour as f32 / 24.0;
        painter.text(egui::pos2(x + 1.0, rect.top()), egui::Align2::LEFT_TOP, format!("{hour:02}"), egui::FontId::proportional(9.0), theme::muted());
    }
}

/// Time per project in the days shown, most first; a click lists only that project's sessions.
fn projects_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    let day = &state.day;
    let mut totals: Vec<(String, i64)> = day.ledger.totals().into_iter().filter(|(_, s)| *s > 0).collect();
    if totals.is_empty() {
        return;
    }
    totals.sort_by_key(|(name, seconds)| (name == UNATTRIBUTED, -seconds));
    let most = totals.iter().map(|(_, s)| *s).max().unwrap_or(1).max(1);
    ui.label(RichText::new("Projects").strong()).on_hover_text("From your rules (Settings → Memory → Projects), then folders, repositories, ticket keys and names in titles");
    for (project, seconds) in totals.iter().take(12) {
        ui.horizontal(|ui| {
            let (rect, _) = ui.allocate_exact_size(vec2(60.0, 8.0), Sense::hover());
            let filled = egui::Rect::from_min_size(rect.min, vec2(60.0 * *seconds as f32 / most as f32, 8.0));
            ui.painter().rect_filled(filled, 1.0, if project == UNATTRIBUTED { theme::muted() } else { theme::app_colour(project) });
            ui.label(RichText::new(hms(*seconds)).monospace().small());
            let chosen = day.project.as_deref() == Some(project.as_str());
            if ui.selectable_label(chosen, project).on_hover_text(if chosen { "List every session" } else { "List only this project's sessions" }).clicked() {
                actions.push(UiAction::FilterProject((!chosen).then(|| project.clone())));
            }
        });
    }
}

/// The recap of the day or week shown, if one was written (the built-in
/// automations write them at 17:30 and on Fridays): each line with its
/// sources, which open the session; and a button to write it now.
fn recap_ui(ui: &mut egui::Ui, state: &AppState, now_millis: i64, actions: &mut Vec<UiAction>) {
    let day = &state.day;
    let week = day.span.days == 7;
    let kind = (if week { crate::day::recap::Period::Week } else { crate::day::recap::Period::Day }).kind();
    let kept = day.span.notes.iter().rev().find(|n| n.kind == kind && n.start_millis == day.span.start_millis).map(|n| n.text.as_str());
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new("Recap").strong());
        let label = if state.day.writing_recap {
            "Writing…"
        } else if kept.is_some() {
            "Write again"
        } else {
            "Write now"
        };
        let ready = !state.day.writing_recap && day.span.start_millis <= now_millis && !day.span.sessions.is_empty();
        if ui.add_enabled(ready, egui::Button::new(label).small()).on_hover_text("Per project, what was done and left open, each line with its sources (Automations: builtin_daily_recap writes it at 17:30)").clicked() {
            actions.push(UiAction::WriteRecap { week, at_millis: day.span.start_millis });
        }
    });
    let Some(text) = kept else { return };
    for line in text.lines().skip(1) {
        let (heading, body) = match line.strip_prefix("- ") {
            Some(rest) => (false, rest),
            None => (true, line),
        };
        let (plain, sessions) = crate::ids::without_session_refs(body);
        ui.horizontal_wrapped(|ui| {
            let shown = if heading { RichText::new(plain.trim()).small().strong() } else { RichText::new(plain.trim()).small() };
            ui.label(shown);
            for (n, session_id) in sessions.iter().enumerate() {
                if ui.small_button(format!("{}", n + 1)).on_hover_text("Open this source's session").clicked() {
                    actions.push(UiAction::ToggleSession(*session_id));
                }
            }
        });
    }
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
