//! Every tab and card of the sidebar, filled with a realistic day, laid out at
//! 320, 380 and 600 px: no widget may leave the panel, and every control has
//! a name in the accessibility tree. The same frames are
//! drawn by the software renderer into `docs/images/` (the README shows them)
//! when `UPDATE_SNAPSHOTS=1`; otherwise into a temporary folder, to check the
//! drawing itself.

use cowork::agent::events::{AgentEvent, CallStatus, ToolCallView};
use cowork::app::{AppOptions, CoworkApp};
use cowork::capture::events::CaptureEvent;
use cowork::desktop::events::DesktopEvent;
use cowork::events::AppEvent;
use cowork::mcp::events::McpEvent;
use cowork::records::{ActiveWindow, MessageStatus};
use cowork::store::events::StoreEvent;
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};

use super::render::SoftRenderer;
use super::ui::{Far, app_on, send_message};

const WIDTHS: [f32; 3] = [320.0, 380.0, 600.0];
const HEIGHT: f32 = 860.0;

/// Widgets whose rectangle leaves `0..width` (the panel), as "role 'label' x0..x1".
fn overflowing(harness: &Harness<'static, CoworkApp>, width: f32) -> Vec<String> {
    harness
        .root()
        .children_recursive()
        .filter_map(|node| {
            let node = node.accesskit_node();
            // A one-line field scrolls its own text inside it: the field is what must fit.
            if node.role() == Role::TextRun && node.parent().is_some_and(|p| p.role() == Role::TextInput) {
                return None;
            }
            let rect = node.bounding_box()?;
            let (x0, x1) = (rect.x0 as f32, rect.x1 as f32);
            let inside = x0 >= -0.5 && x1 <= width + 0.5;
            let label = node.label().or_else(|| node.value()).unwrap_or_default();
            (!inside).then(|| format!("{:?} {:?} x {x0:.0}..{x1:.0}", node.role(), label.chars().take(60).collect::<String>()))
        })
        .collect()
}

/// Controls a screen reader could not name: a button, box, field or link without a label.
fn unnamed(harness: &Harness<'static, CoworkApp>) -> Vec<String> {
    let controls = [Role::Button, Role::CheckBox, Role::RadioButton, Role::TextInput, Role::MultilineTextInput, Role::ComboBox, Role::Link, Role::Slider, Role::SpinButton];
    harness
        .root()
        .children_recursive()
        .filter_map(|node| {
            let node = node.accesskit_node();
            let role = node.role();
            let named = node.label().is_some_and(|l| !l.trim().is_empty());
            (controls.contains(&role) && !named).then(|| format!("{role:?} {:?} at {:?}", node.value().unwrap_or_default(), node.bounding_box()))
        })
        .collect()
}

struct Shot {
    renderer: SoftRenderer,
    width: f32,
    /// docs/images when updating the snapshots, else a temporary folder.
    folder: std::path::PathBuf,
    scratch: std::path::PathBuf,
}

impl Shot {
    /// Fails with every widget that leaves the panel, then draws the frame.
    #[track_caller]
    fn check(&self, harness: &mut Harness<'static, CoworkApp>, name: &str, problems: &mut Vec<String>) {
        harness.run();
        for widget in overflowing(harness, self.width) {
            problems.push(format!("{name} at {} px: {widget}", self.width));
        }
        for widget in unnamed(harness) {
            problems.push(format!("{name} at {} px has a control without a name: {widget}", self.width));
        }
        let image = self.renderer.render(&harness.ctx, harness.output(), egui::vec2(self.width, HEIGHT));
        // Something was drawn: text pixels (far from the background) in the panel.
        let background = harness.ctx.global_style().visuals.panel_fill;
        let drawn = image.pixels.iter().filter(|p| (i32::from(p.r()) - i32::from(background.r())).abs() > 60).count();
        assert!(drawn > 500, "{name} at {} px drew almost nothing ({drawn} pixels)", self.width);
        // The repository keeps every view at 380 px (the default width) and the chat at each width.
        let kept = self.width == 380.0 || name == "chat";
        let folder = if kept { &self.folder } else { &self.scratch };
        super::render::write_png(&folder.join(format!("{name}-{}.png", self.width as u32)), &image);
    }
}

fn harness_at(width: f32, renderer: &SoftRenderer) -> (Harness<'static, CoworkApp>, Far) {
    let models = super::ui::manifest_models();
    app_on(
        Harness::builder().with_size(egui::vec2(width, HEIGHT)).renderer(renderer.clone()),
        AppOptions::default(),
        models,
        cowork::state::AppState::default(),
        |app| app,
    )
}

const LONG_ANSWER: &str = "This morning you worked on **cowork's sidebar layout** for about two hours, then reviewed a pull request.\n\n\
## Where the time went\n\n\
| App | Window | Time | Share |\n|---|---|---|---|\n\
| Code | layout.rs — cowork — Visual Studio Code | 1 h 42 min | 61 % |\n\
| Chromium | egui::ScrollArea — Rust documentation | 38 min | 23 % |\n\
| Slack | #design-reviews | 27 min | 16 % |\n\n\
The failing command was:\n\n\
```sh\ncargo test --test integration -- integration::layout::every_tab_and_card_fits_the_panel_from_320_to_600_px --nocapture --test-threads=1\n```\n\n\
and the page you kept open was https://docs.rs/egui/latest/egui/containers/scroll_area/struct.ScrollArea.html#method.auto_shrink_horizontally_and_vertically_with_a_long_anchor [1].";

fn call(answer_id: i64, call_id: i64, tool: &str, arguments: serde_json::Value, status: CallStatus, output: Option<&str>) -> ToolCallView {
    ToolCallView {
        operation_id: 1,
        answer_id,
        call_id,
        step: 1,
        tool: tool.into(),
        arguments,
        risk: if status == CallStatus::Waiting { "dangerous".into() } else { "safe".into() },
        status,
        why: "run_command is dangerous: it runs a program with your rights, and this one writes outside the workspace".into(),
        decided_by: output.map(|_| "policy: default".into()),
        output: output.map(str::to_owned),
        is_error: false,
        duration_millis: output.map(|_| 41),
        expires_at_millis: (status == CallStatus::Waiting).then(|| cowork::ids::now_millis() + 290_000),
        suggested_rule: (status == CallStatus::Waiting).then(|| ("rsync -a ~/Documents/quarterly-reports-2026/ /media/backup-drive/quarterly-reports-2026/*".to_owned(), "command".to_owned())),
        images: Vec::new(),
    }
}

fn chat_scene(harness: &mut Harness<'static, CoworkApp>, far: &Far) {
    use cowork::memory::rag::Citation;
    // Past the first run: what cowork records was answered.
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "capture.streams_confirmed".into(), value: "true".into() })).unwrap();
    harness.run();
    let request = send_message(harness, far, "What did I do this morning, and which command failed in the integration tests?");
    let now = cowork::ids::now_millis();
    far.events.send(AppEvent::Agent(AgentEvent::ContextAttached { user_message_id: request.user_message_id, context: "Current window: Code — layout.rs — cowork — Visual Studio Code, since 09:12 (1 h 42 min)".into() })).unwrap();
    let citation = Citation {
        n: 1,
        chunk_id: Some(1),
        stream: cowork::memory::search::Stream::Window,
        source_id: 41,
        at_millis: now - 3_600_000,
        label: "chromium — egui::containers::scroll_area::ScrollArea — Rust documentation — docs.rs".into(),
        open_id: Some(41),
    };
    far.events.send(AppEvent::Agent(AgentEvent::Citations { answer_id: request.answer_id, citations: vec![citation] })).unwrap();
    let done = call(request.answer_id, 1, "recent_activity", serde_json::json!({"minutes": 240, "include_titles": true, "app_filter": "code,chromium,slack,thunderbird"}), CallStatus::Done, Some(&"09:12 Code layout.rs — cowork — Visual Studio Code\n".repeat(30)));
    far.events.send(AppEvent::Agent(AgentEvent::ToolCall(Box::new(done)))).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::Reasoning { answer_id: request.answer_id, text: "The user wants this morning's work and the failing command; recent_activity over four hours covers both, then the integration-test window's title names the command.".into() })).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::Token { answer_id: request.answer_id, text: LONG_ANSWER.into() })).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: request.answer_id, status: MessageStatus::Done, error: None, stats: Default::default() })).unwrap();
    // Its task deleted files: Undo is offered; and a long-named document is attached to the next message.
    far.events.send(AppEvent::Agent(AgentEvent::Undoable { answer_id: request.answer_id, operation_id: 9, until_millis: now + 300_000 })).unwrap();
    let attached = cowork::records::Attachment::document(
        std::path::Path::new("/home/user/Documents/quarterly-reports-2026/Budget-2026-quarterly-forecast-final-v3-reviewed.docx"),
        "--- page 1 ---\nRevenue".into(),
    );
    far.events.send(AppEvent::Mcp(McpEvent::ResourceAttached(Ok(attached)))).unwrap();
    let waiting = call(
        request.answer_id,
        2,
        "run_command",
        serde_json::json!({"command": "rsync -a --delete ~/Documents/quarterly-reports-2026/ /media/backup-drive/quarterly-reports-2026/", "cwd": "/home/user/projects/cowork"}),
        CallStatus::Waiting,
        None,
    );
    far.events.send(AppEvent::Agent(AgentEvent::ToolCall(Box::new(waiting)))).unwrap();
    far.events
        .send(AppEvent::Agent(AgentEvent::ConsentNeeded {
            provider: "anthropic-claude-sonnet".into(),
            reason: "the local model is not loaded and you prefer cloud models for long questions".into(),
            preview: "Current window: Budget-2026-quarterly-forecast-final-v3.ods — LibreOffice Calc, https://intranet.example.com/finance/budgets/2026/q3/forecast".into(),
            request: Box::new(request),
        }))
        .unwrap();
}

fn context_scene(far: &Far) {
    use cowork::records::ActivitySession;
    use cowork::capture::events::{CaptureDecision, StreamHealth};
    let now = cowork::ids::now_millis();
    far.events
        .send(AppEvent::Capture(CaptureEvent::ActiveWindow(Some(ActiveWindow {
            window_id: 1,
            app: "chromium".into(),
            title: "egui::containers::scroll_area::ScrollArea — Rust documentation — Chromium".into(),
            pid: Some(4242),
            url: Some("https://docs.rs/egui/latest/egui/containers/scroll_area/struct.ScrollArea.html#method.auto_shrink".into()),
            ..Default::default()
        }))))
        .unwrap();
    far.events.send(AppEvent::Capture(CaptureEvent::CaptureDecision(CaptureDecision { app: Some("chromium".into()), excluded_by: None, recording: true }))).unwrap();
    let titles = [
        ("code", "layout.rs — cowork — Visual Studio Code", None),
        ("chromium", "Pull request #4821: Sidebar layout fits from 320 to 600 pixels without clipping · cowork/cowork", Some("https://github.com/cowork/cowork/pull/4821/files#diff-5b1c2e0a9f7d3e6b8a4c2d1e0f9a8b7c6d5e4f3a")),
        ("slack", "#design-reviews — Slack", None),
        ("thunderbird", "Re: Quarterly report draft, numbers for the board meeting on Thursday — Mozilla Thunderbird", None),
        ("org.gnome.Nautilus", "quarterly-reports-2026", None),
    ];
    let sessions: Vec<ActivitySession> = titles
        .iter()
        .enumerate()
        .map(|(i, (app, title, url))| ActivitySession {
            session_id: i as i64 + 1,
            app: (*app).into(),
            title: (*title).into(),
            window_id: i as u32 + 1,
            started_at_millis: now - (6 - i as i64) * 1_500_000,
            ended_at_millis: Some(now - (6 - i as i64) * 1_500_000 + 1_200_000),
            url: url.map(str::to_owned),
            ..Default::default()
        })
        .collect();
    far.events.send(AppEvent::Capture(CaptureEvent::SessionsLoaded(sessions.clone()))).unwrap();
    let typed = sessions.iter().map(|s| s.started_at_millis + 60_000).collect();
    let heard = vec![sessions[2].started_at_millis + 120_000];
    let away = vec![(now - 1_200_000, now - 600_000)];
    let day = cowork::ids::local_day_start_millis(now);
    // The day's recap (long lines, several sources each) and a call's note on the timeline.
    let (first, second) = (sessions[0].session_id, sessions[1].session_id);
    let recap = format!(
        "Recap of today\nAtlas (2 h 05 min):\n- fixed the export's rounding of cents in ledger-svc and answered the reviewers on the pull request (session {first}) (session {second})\nLeft open:\n- reply to Sam about the Q3 review deck before Thursday (session {second})"
    );
    let notes = vec![
        cowork::capture::events::KeptNote { kind: "recap_day".into(), start_millis: day, end_millis: day + 86_400_000, text: recap },
        cowork::capture::events::KeptNote { kind: "meeting".into(), start_millis: now - 3_000_000, end_millis: now - 1_500_000, text: "Meeting note: Q3 review".into() },
    ];
    let event = |title: &str, start: i64, people: &[&str]| cowork::day::calendar::Event { uid: title.into(), title: title.into(), start_millis: start, end_millis: start + 1_800_000, attendees: people.iter().map(|p| p.to_string()).collect(), ..Default::default() };
    let events = vec![event("Q3 review", now - 3_000_000, &["Sam"]), event("Design crit with the platform team", now + 20 * 60_000, &["Ana", "Bo"])];
    far.events.send(AppEvent::Calendar(cowork::calendar::CalendarView { sources: Vec::new(), upcoming: events[1..].to_vec() })).unwrap();
    far.events.send(AppEvent::Capture(CaptureEvent::DaysLoaded(cowork::capture::events::Days { start_millis: day, days: 1, sessions, away, typed, heard, notes, events }))).unwrap();
    for (stream, errors, last_error) in [("windows", 0, None), ("keys", 0, None), ("clipboard", 2, Some("the clipboard owner org.gnome.Nautilus answered no TARGETS within 500 ms".to_owned()))] {
        far.events.send(AppEvent::Capture(CaptureEvent::StreamHealth(StreamHealth { stream: stream.into(), last_event_at_millis: Some(now - 4_000), events_last_minute: 12, drops: 0, errors, last_error }))).unwrap();
    }
}

fn apps_scene(far: &Far) {
    use cowork::apps::worker::{Inspection, OpenApp};
    use cowork::apps::{AppsView, Disclosure, Manifest};
    use cowork::automations::events::{AutomationRow, AutomationsView, RunSummary, StepSummary};
    use cowork::notify::events::InboxItem;
    let now = cowork::ids::now_millis();
    let definition = r#"{"name": "builtin_morning_summary", "trigger": {"kind": "schedule", "schedule": "0 9 * * mon-fri"}, "steps": [
        {"id": "recent", "kind": "tool", "tool": "recent_activity", "args": {"minutes": 600, "include_titles": true}},
        {"id": "tell", "kind": "notify", "title": "Your morning in one paragraph, with the three windows you spent the most time in"}]}"#;
    let flow = AutomationRow {
        name: "builtin_morning_summary".into(),
        description: "Your morning in one paragraph, every weekday at nine, with the three windows you spent the most time in".into(),
        enabled: true,
        trigger: "0 9 * * mon-fri".into(),
        next_fire_at_millis: Some(now + 3_600_000),
        problem: None,
        definition: cowork::automations::Flow::from_json(definition).unwrap().to_json(),
    };
    let approval_reminder = AutomationRow { name: "builtin_approval_reminder".into(), enabled: true, trigger: "every 10m".into(), ..AutomationRow::default() };
    let step = StepSummary { step_id: "recent".into(), kind: "tool".into(), status: "failed".into(), decision: Some("policy: default".into()), error: Some("recent_activity: the database is locked by another writer (cowork capture run, pid 4242)".into()), output: String::new(), duration_millis: Some(4) };
    let run = RunSummary { run_id: 7, automation: "builtin_morning_summary".into(), trigger_kind: "schedule".into(), status: "failed".into(), error: Some("step \"tell\": timed out after 120 s waiting for the notification daemon to answer".into()), created_at_millis: now - 60_000, steps: vec![step] };
    far.events.send(AppEvent::Automations(AutomationsView { flows: vec![flow, approval_reminder], runs: vec![run] })).unwrap();
    let approval = InboxItem { notification_id: 5, source: "approval".into(), tier: "urgent".into(), title: "\"tidy-downloads-folder-every-evening\" waits for your approval".into(), body: "Step \"write\" wants to run write_file on /home/user/Downloads/archive/2026-11/invoices-and-receipts.zip".into(), state: "shown".into(), reason: None, created_at_millis: now, can_accept: true, accept_label: "Accept".into(), shown_at_millis: Some(now - 60_000), why: "Why: a step of your automation \"tidy-downloads-folder-every-evening\" needs your approval".into() };
    far.events.send(AppEvent::Inbox(vec![approval])).unwrap();
    let manifest = Manifest::parse("name = \"Standup writer with a rather long name\"\ndescription = \"Drafts your standup from yesterday's windows, commits and calendar\"\ncategory = \"productivity\"\nversion = \"0.1.0\"\ncomponent = \"app.wasm\"\ndata_use = \"Reads yesterday's activity and sends a summary of it to the model you allowed; nothing else leaves the machine\"\nnetwork = \"offline\"\n").unwrap();
    let imports = vec!["cowork:app/context@0.1.0".to_owned(), "cowork:app/ai@0.1.0".to_owned(), "cowork:app/http@0.1.0".to_owned()];
    let inspection = Inspection { path: "/home/user/Downloads/standup-writer-0.1.0/".into(), manifest: manifest.clone(), disclosure: Disclosure::new(&manifest, imports), replaces: None, new_imports: Vec::new() };
    let installed = super::ui::focus_today("Time per app today, and the windows you spent it in");
    let json = r#"[{"type":"stat","label":"Focused today","value":"3 h 12 min"},
        {"type":"chart","kind":"bar","title":"Time per app today","unit":"min","bars":[{"label":"Visual Studio Code","value":120},{"label":"Chromium","value":72},{"label":"Thunderbird","value":20}]},
        {"type":"list","items":[{"title":"layout.rs — cowork — Visual Studio Code, the longest stretch of the day","accessory":"2 h 04 min","actions":[{"title":"Ask about it","host":"chat","text":"What did I do in Code?"},{"title":"Copy","host":"copy","text":"Code 2 h"},{"title":"Open the folder","host":"open","text":"/home/user/projects/cowork"}]}]},
        {"type":"table","columns":["App","Window","Time"],"rows":[["Code","layout.rs — cowork — Visual Studio Code","2 h 04 min"],["Chromium","egui::ScrollArea — Rust documentation","1 h 12 min"]]},
        {"type":"form","id":"note","fields":[{"id":"text","label":"Note for tomorrow","kind":"text","value":"finish the layout test"}],"submit":"Save"}]"#;
    let open = OpenApp { app_id: "focus-today".into(), name: "Focus today".into(), json: json.into(), view: cowork::apps::view::View::parse(json), error: None, busy: false, millis: 12, memory_bytes: 9 << 20 };
    far.events.send(AppEvent::Apps(Box::new(AppsView { installed: vec![installed], inspection: Some(Ok(inspection)), open: vec![open], message: None }))).unwrap();
}

fn settings_scene(far: &Far) {
    use cowork::mcp::events::{McpServerStatus, McpServerView};
    let server = McpServerView {
        name: "filesystem-projects-and-documents".into(),
        endpoint: "stdio: npx -y @modelcontextprotocol/server-filesystem /home/user/projects /home/user/Documents".into(),
        status: McpServerStatus::Error("no handshake within 30 s (startup timeout); its last words on stderr are below".into()),
        trusted: false,
        tools: vec![("read_text_file".into(), "Read the complete contents of a file from the file system as text".into(), true, "safe".into())],
        stderr: vec!["npm ERR! code ENOTFOUND npm ERR! network request to https://registry.npmjs.org/@modelcontextprotocol%2fserver-filesystem failed".into()],
        protocol_version: "2025-11-25".into(),
        server_name: "secure-filesystem-server 0.2.0".into(),
        connect_millis: Some(300),
        ..Default::default()
    };
    far.events.send(AppEvent::Mcp(McpEvent::McpServers(vec![server]))).unwrap();
    far.events
        .send(AppEvent::Agent(AgentEvent::AgentOverview {
            rules: vec![(1, "allow run_command where command matches \"rsync -a ~/Documents/quarterly-reports-2026/ /media/backup-drive/*\" (always)".into())],
            problems: vec!["rule 3 names a tool no server offers any more: filesystem-projects-and-documents.write_file".into()],
            audit: vec!["2026-11-26 09:14:03 run_command rsync -a --delete ~/Documents/quarterly-reports-2026/ /media/backup-drive/ · approved once by you".into()],
        }))
        .unwrap();
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "capture.afk_secs".into(), value: "soon".into() })).unwrap();
    // A web search with its address and key fields, and followed document folders.
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "web.search_provider".into(), value: "searxng".into() })).unwrap();
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "web.search_url".into(), value: "https://search.example-university.edu/searxng-instance-for-the-whole-department/".into() })).unwrap();
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "memory.document_folders".into(), value: "~/Documents/quarterly-reports-2026\n~/Projects/cowork/docs".into() })).unwrap();
}

/// Every tab at every width, each with what makes it long: a captured day, a
/// long answer with code and a table, a pending approval and a consent card,
/// an installed app, its disclosure and its view, the inbox, the automation
/// editor, and every Settings section.
/// The timeline of a day of 2,000 sessions and a week of 14,000, with time
/// per project and the session list, fits the panel from 320 to 600 px, and
/// its controls are named; the frame time is printed (the `timeline` bench
/// measures it optimised: ≤ 4 ms).
#[test]
fn a_day_of_two_thousand_sessions_and_a_week_fit_the_context_panel() {
    let now = cowork::ids::now_millis();
    let day = cowork::ids::local_day_start_millis(now);
    let titles = ["ledger.rs - ledger-svc - Visual Studio Code", "ATL-142 Fix rounding in invoice totals - Jira — Mozilla Firefox", "dana@thinkpad: ~/src/route-planner", "#atlas-dev - Acme - Slack"];
    let sessions = |start: i64, count: usize, span: i64| -> Vec<cowork::records::ActivitySession> {
        (0..count)
            .map(|i| cowork::records::ActivitySession {
                session_id: i as i64 + 1,
                app: ["code", "firefox", "kitty", "Slack"][i % 4].into(),
                title: format!("{} {i}", titles[i % 4]),
                started_at_millis: start + i as i64 * (span / count as i64),
                ended_at_millis: Some(start + i as i64 * (span / count as i64) + span / count as i64 / 2),
                ..Default::default()
            })
            .collect()
    };
    let mut problems = Vec::new();
    for width in WIDTHS {
        let renderer = SoftRenderer::default();
        let (mut harness, far) = harness_at(width, &renderer);
        harness.get_by_label("Context").click();
        harness.run();
        // Today, then a past week (the panel asks for the week; the store's answer comes as an event).
        let today = sessions(day, 2_000, (now - day).max(3_600_000));
        far.events.send(AppEvent::Capture(CaptureEvent::DaysLoaded(cowork::capture::events::Days { start_millis: day, days: 1, sessions: today, ..Default::default() }))).unwrap();
        harness.run();
        let started = std::time::Instant::now();
        for _ in 0..10 {
            harness.step();
        }
        eprintln!("{width} px, a day of 2,000 sessions: {:?} a frame (unoptimised, with the test harness)", started.elapsed() / 10);
        problems.extend(overflowing(&harness, width).into_iter().map(|p| format!("day at {width}: {p}")));
        problems.extend(unnamed(&harness).into_iter().map(|p| format!("day at {width}: {p}")));
        assert!(harness.query_by_label("Projects").is_some(), "time per project is shown");
        // Coloured by project, it still fits.
        harness.get_by_label("By project").click();
        harness.run();
        problems.extend(overflowing(&harness, width).into_iter().map(|p| format!("day by project at {width}: {p}")));
        harness.get_by_label("Week").click();
        harness.run();
        let shown = harness.state().state.day.span.start_millis;
        far.events.send(AppEvent::Capture(CaptureEvent::DaysLoaded(cowork::capture::events::Days { start_millis: shown, days: 7, sessions: sessions(shown, 14_000, 7 * 86_400_000), ..Default::default() }))).unwrap();
        harness.run();
        assert_eq!(harness.state().state.day.span.days, 7);
        assert!(harness.state().state.day.loaded, "the week's sessions were taken");
        problems.extend(overflowing(&harness, width).into_iter().map(|p| format!("week at {width}: {p}")));
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn every_tab_and_card_fits_the_panel_from_320_to_600_px() {
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let scratch = tempfile::tempdir().unwrap();
    let folder = if update { std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/images") } else { scratch.path().to_owned() };
    std::fs::create_dir_all(&folder).unwrap();
    let mut problems = Vec::new();
    for width in WIDTHS {
        let renderer = SoftRenderer::default();
        let shot = Shot { renderer: renderer.clone(), width, folder: folder.clone(), scratch: scratch.path().to_owned() };
        let (mut harness, far) = harness_at(width, &renderer);
        chat_scene(&mut harness, &far);
        context_scene(&far);
        apps_scene(&far);
        settings_scene(&far);
        shot.check(&mut harness, "chat", &mut problems);
        harness.get_by_label("Context").click();
        shot.check(&mut harness, "context", &mut problems);
        harness.get_by_label("Apps").click();
        shot.check(&mut harness, "apps", &mut problems);
        harness.get_all_by_label("Edit").next().unwrap().click();
        shot.check(&mut harness, "automation-editor", &mut problems);
        harness.get_by_label("Cancel").click();
        harness.get_by_label("Settings").click();
        shot.check(&mut harness, "settings", &mut problems);
        for section in cowork::ui::settings::Section::ALL {
            harness.get_by_role_and_label(Role::Button, section.title()).click();
            shot.check(&mut harness, &format!("settings-{section:?}").to_lowercase(), &mut problems);
            harness.get_by_label("All settings").click();
            harness.run();
        }
        // The integrations catalog, and the longest form in it.
        harness.get_by_role_and_label(Role::Button, "Integrations").click();
        harness.run();
        harness.get_by_label("Add an integration").click();
        shot.check(&mut harness, "settings-catalog", &mut problems);
        harness.get_by_role_and_label(Role::Button, "Slack").click();
        shot.check(&mut harness, "settings-catalog-slack", &mut problems);
        harness.get_by_label("All settings").click();
        harness.run();
    }
    // A desktop that prefers light gets the light theme, and it fits too.
    let renderer = SoftRenderer::default();
    let shot = Shot { renderer: renderer.clone(), width: 380.0, folder: folder.clone(), scratch: scratch.path().to_owned() };
    let (mut harness, far) = harness_at(380.0, &renderer);
    far.events.send(AppEvent::Desktop(DesktopEvent::ColorScheme(Some(false)))).unwrap();
    chat_scene(&mut harness, &far);
    shot.check(&mut harness, "chat-light", &mut problems);
    assert!(!harness.ctx.global_style().visuals.dark_mode, "the desktop's light preference is followed");
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}
