//! The Context panel's timeline (issue 58): a whole egui frame of the panel —
//! layout and tessellation — showing a day of 2,000 sessions (a week of
//! 14,000 too), with time per project and the session list, at 320 and
//! 600 px. Target: ≤ 4 ms a frame.

use cowork::records::ActivitySession;
use cowork::state::{AppState, DayView};
use criterion::{Criterion, criterion_group, criterion_main};

fn day_of(sessions: usize, days: u32, start: i64) -> DayView {
    let apps = ["code", "firefox", "kitty", "Slack", "thunderbird", "libreoffice-writer"];
    let titles = ["ledger.rs - ledger-svc - Visual Studio Code", "ATL-142 Fix rounding - Jira — Mozilla Firefox", "dana@thinkpad: ~/src/route-planner", "#atlas-dev - Acme - Slack", "Inbox - Mozilla Thunderbird", "Atlas SOW 2026.odt - LibreOffice Writer"];
    let span = i64::from(days) * 86_400_000;
    let step = span / sessions.max(1) as i64;
    let sessions: Vec<ActivitySession> = (0..sessions)
        .map(|i| ActivitySession {
            session_id: i as i64 + 1,
            app: apps[i % apps.len()].into(),
            title: format!("{} ({i})", titles[i % titles.len()]),
            started_at_millis: start + i as i64 * step,
            ended_at_millis: Some(start + i as i64 * step + step * 3 / 4),
            ..ActivitySession::default()
        })
        .collect();
    let away = (0..days).map(|d| (start + i64::from(d) * 86_400_000 + 12 * 3_600_000, start + i64::from(d) * 86_400_000 + 13 * 3_600_000)).collect();
    let typed = (0..sessions.len()).step_by(3).map(|i| sessions[i].started_at_millis + 1_000).collect();
    // The span's recap (a line per project, each with its sources) and two calls with a note.
    let first = sessions.first().map_or(1, |s| s.session_id);
    let recap: String = std::iter::once("Recap of the span".to_owned())
        .chain((0..8).map(|p| format!("Project {p} (1 h 10 min):\n- worked on the export and answered the reviews (session {first}) (session {first})")))
        .collect::<Vec<_>>()
        .join("\n");
    let kind = if days == 7 { "recap_week" } else { "recap_day" };
    let notes = vec![
        cowork::capture::events::KeptNote { kind: kind.into(), start_millis: start, end_millis: start + span, text: recap },
        cowork::capture::events::KeptNote { kind: "meeting".into(), start_millis: start + 9 * 3_600_000, end_millis: start + 10 * 3_600_000, text: "Meeting note".into() },
    ];
    // A working day's calendar: six meetings a day.
    let events = (0..days as i64)
        .flat_map(|d| (0..6).map(move |m| cowork::day::calendar::Event { uid: format!("{d}-{m}"), title: format!("Meeting {m}"), start_millis: start + d * 86_400_000 + (9 + m) * 3_600_000, end_millis: start + d * 86_400_000 + (9 + m) * 3_600_000 + 1_800_000, ..Default::default() }))
        .collect();
    let shown = cowork::capture::events::Days { start_millis: start, days, sessions, away, typed, heard: vec![start + 10 * 3_600_000], notes, events };
    let mut day = DayView { span: shown, loaded: true, ..DayView::default() };
    day.attribute("Atlas: ledger-svc, ATL", start + span);
    day
}

fn timeline(c: &mut Criterion) {
    let start = cowork::ids::local_day_start_millis(cowork::ids::now_millis()) - 7 * 86_400_000;
    let start = cowork::day::ledger::week_start(start);
    for (name, sessions, days) in [("day_0_sessions", 0, 1), ("day_2000_sessions", 2_000, 1), ("week_14000_sessions", 14_000, 7)] {
        let state = AppState { day: day_of(sessions, days, start), ..AppState::default() };
        let now = start + i64::from(days) * 86_400_000;
        for width in [320.0f32, 600.0] {
            let ctx = egui::Context::default();
            let mut search = cowork::ui::context::SearchBox::default();
            let mut frame = || {
                let input = egui::RawInput {
                    screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(width, 860.0))),
                    ..Default::default()
                };
                let mut output = ctx.run_ui(input, |ui| {
                    egui::CentralPanel::default().show(ui, |ui| {
                        let mut actions = Vec::new();
                        cowork::ui::context::context_ui(ui, &state, &mut search, now, &mut actions);
                    });
                });
                // (The font atlas's updates would go to a GPU; here they are dropped.)
                output.textures_delta.clear();
                ctx.tessellate(output.shapes, output.pixels_per_point)
            };
            // The first frames lay fonts out; a user's frames after that are what counts.
            for _ in 0..3 {
                frame();
            }
            c.bench_function(&format!("timeline_frame_{name}_{width}px"), |b| b.iter(&mut frame));
        }
    }
}

/// What a finished session costs the UI thread while the timeline shows its
/// days: the sessions attributed again together (tickets and neighbours),
/// what each says by itself read once and kept (`day::projects::Prepared`),
/// and the ledger cut; and the cold reading when the days are first shown.
fn attribution(c: &mut Criterion) {
    let start = cowork::day::ledger::week_start(cowork::ids::local_day_start_millis(cowork::ids::now_millis()) - 7 * 86_400_000);
    for (name, sessions, days) in [("day_2000_sessions", 2_000, 1), ("week_14000_sessions", 14_000, 7)] {
        let mut day = day_of(sessions, days, start);
        let now = start + i64::from(days) * 86_400_000;
        // A window switch while the days are shown: one finished session more, the rest prepared already.
        c.bench_function(&format!("timeline_attribute_{name}"), |b| {
            b.iter(|| {
                let mut next = day.span.sessions.last().cloned().unwrap_or_default();
                next.session_id += 1;
                day.span.sessions.push(next);
                day.attribute("Atlas: ledger-svc, ATL", now);
                day.span.sessions.pop();
            })
        });
        // The days first shown (or the rules changed): every session read.
        c.bench_function(&format!("timeline_attribute_{name}_cold"), |b| {
            b.iter(|| {
                day.prepared = Default::default();
                day.attribute("Atlas: ledger-svc, ATL", now);
            })
        });
    }
}

criterion_group!(benches, timeline, attribution);
criterion_main!(benches);
