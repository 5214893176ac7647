//! The whole app in egui_kittest (no GPU, no display): the test holds the far
//! ends of every channel, drives the panels by label, and checks both what is
//! shown and what was sent to the workers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cowork::agent::AgentCommand;
use cowork::agent::events::AgentEvent;
use cowork::app::{AppOptions, CoworkApp};
use cowork::capture::CaptureCommand;
use cowork::capture::clipboard::ClipboardCommand;
use cowork::capture::events::CaptureEvent;
use cowork::capture::keys::KeysCommand;
use cowork::desktop::events::DesktopEvent;
use cowork::events::AppEvent;
use cowork::llm::LlmCommand;
use cowork::llm::events::LocalModelEvent;
use cowork::mcp::events::McpEvent;
use cowork::memory::events::MemoryEvent;
use cowork::models::events::ModelsEvent;
use cowork::records::{ActiveWindow, GenerationStats, MessageStatus};
use cowork::runtime::{Control, RuntimeEvent, WorkerName, WorkerState};
use cowork::state::{AppState, Tab};
use cowork::store::StoreCommand;
use cowork::store::events::StoreEvent;
use cowork::workers::Channels;
use crossbeam_channel::{Receiver, Sender, bounded};
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

pub(super) struct Far {
    pub(super) events: Sender<AppEvent>,
    pub(super) llm: Receiver<LlmCommand>,
    pub(super) agent: Receiver<AgentCommand>,
    pub(super) store: Receiver<StoreCommand>,
    pub(super) capture: Receiver<CaptureCommand>,
    pub(super) keys: Receiver<KeysCommand>,
    pub(super) clipboard: Receiver<ClipboardCommand>,
    pub(super) a11y: Receiver<cowork::capture::A11yCommand>,
    pub(super) llm_control: Receiver<Control>,
    pub(super) stop_epoch: Arc<AtomicU64>,
    pub(super) search: Receiver<cowork::memory::search_worker::SearchCommand>,
    pub(super) mcp: Receiver<cowork::mcp::worker::McpCommand>,
    pub(super) audio: Receiver<cowork::audio::worker::AudioCommand>,
    pub(super) listen: Receiver<cowork::audio::listen::ListenCommand>,
    pub(super) screen: Receiver<cowork::capture::screen_worker::ScreenCommand>,
    pub(super) models: Receiver<cowork::models::worker::ModelsCommand>,
    pub(super) automations: Receiver<cowork::automations::AutomationsCommand>,
    pub(super) notify: Receiver<cowork::notify::NotifyCommand>,
    pub(super) apps: Receiver<cowork::apps::AppsCommand>,
    pub(super) calendar: Receiver<cowork::calendar::worker::CalendarCommand>,
}

fn app() -> (Harness<'static, CoworkApp>, Far) {
    app_with(AppOptions::default(), 760.0)
}

fn app_with(options: AppOptions, height: f32) -> (Harness<'static, CoworkApp>, Far) {
    app_with_models(options, height, Vec::new())
}

fn app_with_models(options: AppOptions, height: f32, models: Vec<cowork::ui::settings::ModelView>) -> (Harness<'static, CoworkApp>, Far) {
    app_built(options, height, models, AppState::default(), |app| app)
}

/// The app from `state`, changed by `adjust` before the first frame.
fn app_built(
    options: AppOptions,
    height: f32,
    models: Vec<cowork::ui::settings::ModelView>,
    state: AppState,
    adjust: impl FnOnce(CoworkApp) -> CoworkApp + 'static,
) -> (Harness<'static, CoworkApp>, Far) {
    app_on(Harness::builder().with_size(egui::vec2(380.0, height)), options, models, state, adjust)
}

/// The app in the harness `builder` makes (its size, its renderer).
pub(super) fn app_on(
    builder: egui_kittest::HarnessBuilder<CoworkApp>,
    options: AppOptions,
    models: Vec<cowork::ui::settings::ModelView>,
    state: AppState,
    adjust: impl FnOnce(CoworkApp) -> CoworkApp + 'static,
) -> (Harness<'static, CoworkApp>, Far) {
    let (events_tx, events) = bounded(1024);
    let (llm_tx, llm) = bounded(16);
    let (agent_tx, agent) = bounded(16);
    let (store_tx, store) = bounded(64);
    let (capture_tx, capture) = bounded(8);
    let (keys_tx, keys) = bounded(8);
    let (clipboard_tx, clipboard) = bounded(8);
    let (a11y_tx, a11y) = bounded(8);
    let (control_tx, llm_control) = bounded(8);
    let (models_tx, models_rx) = bounded(4);
    let (search_tx, search) = bounded(16);
    let (embed_tx, _embed) = bounded(4);
    let (mcp_tx, mcp) = bounded(16);
    let (audio_tx, audio) = bounded(16);
    let (speech_tx, _speech) = bounded(8);
    let (listen_tx, listen) = bounded(8);
    let (screen_tx, screen) = bounded(8);
    let (automations_tx, automations) = bounded(8);
    let (notify_tx, notify) = bounded(8);
    let (apps_tx, apps) = bounded(8);
    let (calendar_tx, calendar) = bounded(8);
    let (store_control, _) = bounded(8);
    let stop_epoch = Arc::new(AtomicU64::new(0));
    let channels = Channels {
        store: store_tx,
        capture: capture_tx,
        keys: keys_tx,
        clipboard: clipboard_tx,
        a11y: a11y_tx,
        screen: screen_tx,
        screen_latest: cowork::capture::screen_worker::ScreenLatest::default(),
        llm: llm_tx,
        agent: agent_tx,
        models: models_tx,
        search: search_tx,
        embed: embed_tx,
        mcp: mcp_tx,
        audio: audio_tx,
        speech: speech_tx,
        listen: listen_tx,
        automations: automations_tx,
        notify: notify_tx,
        apps: apps_tx,
        calendar: calendar_tx,
        search_latest: Arc::new(AtomicU64::new(0)),
        typing_at_millis: Arc::new(std::sync::atomic::AtomicI64::new(0)),
        controls: vec![(WorkerName::Llm, control_tx), (WorkerName::Store, store_control)],
        events,
        bus: cowork::runtime::EventSink::new(events_tx.clone(), || {}),
        stop_epoch: stop_epoch.clone(),
    };
    let harness = builder.build_eframe(move |_cc| adjust(CoworkApp::new(channels, state, models, options)));
    (harness, Far { events: events_tx, llm, agent, store, capture, keys, clipboard, a11y, llm_control, stop_epoch, search, mcp, audio, listen, screen, models: models_rx, automations, notify, apps, calendar })
}

/// The settings the app asked the store to save since the last look, in order.
fn saved_settings(far: &Far) -> Vec<(String, String)> {
    far.store
        .try_iter()
        .filter_map(|c| c.what().strip_prefix("setting ").and_then(|s| s.split_once(" = ")).map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

/// What the app asked the store to do since the last look, as the commands say it.
fn store_asked(far: &Far) -> Vec<String> {
    far.store.try_iter().map(|c| c.what().to_owned()).collect()
}

/// Types `text`, clicks Send, and returns the request that reached the agent worker.
#[track_caller]
pub(super) fn send_message(harness: &mut Harness<'static, CoworkApp>, far: &Far, text: &str) -> cowork::agent::ChatRequest {
    type_message(harness, text);
    harness.run();
    harness.get_by_label("Send").click();
    harness.run();
    match far.agent.try_recv().expect("a chat request reached the agent worker") {
        AgentCommand::Chat(request) => request,
        other => panic!("unexpected {other:?}"),
    }
}

/// Every model of the bundled manifest, none installed (in an empty folder).
pub(super) fn manifest_models() -> Vec<cowork::ui::settings::ModelView> {
    let empty = std::env::temp_dir().join("cowork-no-models");
    cowork::ui::settings::model_views(&cowork::models::Manifest::bundled().unwrap(), &empty)
}

/// Opens Settings at `section` (its title on the index of sections).
pub(super) fn open_settings(harness: &mut Harness<'static, CoworkApp>, section: &str) {
    harness.get_by_label("Settings").click();
    harness.run();
    if let Some(back) = harness.query_by_label("All settings") {
        back.click();
        harness.run();
    }
    harness.get_by_role_and_label(Role::Button, section).click();
    harness.run();
}

/// Focuses the chat input (kittest types only into a focused widget) and types.
fn type_message(harness: &mut Harness<'static, CoworkApp>, text: &str) {
    harness.get_by_role_and_label(Role::MultilineTextInput, "Message").focus();
    harness.run();
    harness.get_by_role_and_label(Role::MultilineTextInput, "Message").type_text(text);
}

#[test]
fn start_up_asks_the_store_for_threads_sessions_and_settings() {
    let (_harness, far) = app();
    let sent = store_asked(&far);
    for load in ["load threads", "load settings", "load sessions", "load hot memory"] {
        assert!(sent.iter().any(|c| c == load), "{load}: {sent:?}");
    }
}

#[test]
fn tabs_switch_by_label_and_each_panel_shows_its_content() {
    let (mut harness, far) = app();
    far.events
        .send(AppEvent::Capture(CaptureEvent::ActiveWindow(Some(ActiveWindow {
            window_id: 1,
            app: "Firefox".into(),
            title: "Rust docs — Mozilla Firefox".into(),
            pid: Some(9),
            ..Default::default()
        }))))
        .unwrap();
    harness.get_by_label("Context").click();
    let today = cowork::ids::local_day_start_millis(cowork::ids::now_millis());
    far.events.send(AppEvent::Capture(CaptureEvent::DaysLoaded(cowork::capture::events::Days { start_millis: today, days: 1, ..Default::default() }))).unwrap();
    harness.run();
    assert_eq!(harness.state().state.tab(), Tab::Context);
    harness.get_by_label("Rust docs — Mozilla Firefox");
    harness.get_by_label("No finished sessions yet today");

    harness.get_by_label("Apps").click();
    harness.run();
    harness.get_by_label_contains("No automations yet");

    open_settings(&mut harness, "General");
    harness.run();
    harness.get_by_label("Keyboard shortcuts");
    open_settings(&mut harness, "About");
    harness.get_by_label_contains("cowork 0.1.0");

    harness.get_by_label("Chat").click();
    harness.run();
    assert_eq!(harness.state().state.tab(), Tab::Chat);
}

#[test]
fn the_apps_panel_lists_the_inbox_and_the_automations_and_sends_their_actions() {
    use cowork::automations::AutomationsCommand;
    use cowork::automations::events::{AutomationRow, AutomationsView, RunSummary, StepSummary};
    use cowork::notify::events::InboxItem;
    use cowork::notify::{Act, NotifyCommand};
    let (mut harness, far) = app_with(AppOptions::default(), 1400.0);
    let now = cowork::ids::now_millis();
    let flow = AutomationRow { name: "morning_summary".into(), description: String::new(), enabled: true, trigger: "0 9 * * mon-fri".into(), next_fire_at_millis: Some(now + 3_600_000), problem: None, definition: String::new() };
    let step = StepSummary { step_id: "recent".into(), kind: "tool".into(), status: "done".into(), decision: Some("policy: default".into()), error: None, output: "No window was in use".into(), duration_millis: Some(4) };
    let run = RunSummary { run_id: 7, automation: "morning_summary".into(), trigger_kind: "schedule".into(), status: "failed".into(), error: Some("step \"tell\": timed out after 120 s".into()), created_at_millis: now - 60_000, steps: vec![step] };
    far.events.send(AppEvent::Automations(AutomationsView { flows: vec![flow], runs: vec![run] })).unwrap();
    let approval = InboxItem { notification_id: 5, source: "approval".into(), tier: "urgent".into(), title: "\"tidy\" waits for your approval".into(), body: "Step \"write\" wants to run write_file".into(), state: "shown".into(), reason: None, created_at_millis: now, can_accept: true, accept_label: "Accept".into(), shown_at_millis: Some(now - 60_000), why: "Why: a step of your automation \"tidy\" needs your approval".into() };
    let held = InboxItem { notification_id: 6, source: "flow:fyi".into(), tier: "informational".into(), title: "FYI".into(), state: "pending".into(), reason: Some("held: you are away".into()), created_at_millis: now, ..InboxItem::default() };
    far.events.send(AppEvent::Inbox(vec![approval, held])).unwrap();
    harness.get_by_label("Apps").click();
    harness.run();
    harness.get_by_label("Inbox (2)");
    harness.get_by_label_contains("held: you are away");
    // Why it appeared, and how much of the hour's budget was used (the defaults: 20, 6, 3).
    harness.get_by_label_contains("Why: a step of your automation \"tidy\" needs your approval");
    harness.get_by_label("Shown this hour: urgent 1/20, helpful 0/6, informational 0/3");
    harness.get_by_label("Accept").click();
    harness.run();
    assert!(matches!(far.notify.try_recv(), Ok(NotifyCommand::Act { notification_id: 5, act: Act::Accept })));
    harness.get_all_by_label("Dismiss").nth(1).unwrap().click();
    harness.run();
    assert!(matches!(far.notify.try_recv(), Ok(NotifyCommand::Act { notification_id: 6, act: Act::Dismiss })));

    harness.get_by_label_contains("last run failed");
    harness.get_by_label("Run now").click();
    harness.run();
    assert!(matches!(far.automations.try_recv(), Ok(AutomationsCommand::Run { name, .. }) if name == "morning_summary"));
    harness.get_by_label("Morning summary").click();
    harness.run();
    assert!(matches!(far.automations.try_recv(), Ok(AutomationsCommand::SetEnabled { name, enabled: false }) if name == "morning_summary"));
    // The run's history: its steps, and run again with the same trigger data.
    harness.get_by_label_contains("Morning summary · failed").click();
    harness.run();
    harness.get_by_label_contains("timed out after 120 s");
    harness.get_by_label_contains("recent (tool) done");
    harness.get_by_label("Run again").click();
    harness.run();
    assert!(matches!(far.automations.try_recv(), Ok(AutomationsCommand::Rerun { run_id: 7, .. })));

    // Describe it: the words go to the agent; the checked draft comes back to review and save.
    harness.get_by_role_and_label(Role::MultilineTextInput, "Describe a routine").focus();
    harness.run();
    harness.get_by_role_and_label(Role::MultilineTextInput, "Describe a routine").type_text("every hour, tell me what I did");
    harness.run();
    harness.get_by_label("Draft it").click();
    harness.run();
    assert!(matches!(far.agent.try_recv(), Ok(AgentCommand::DraftFlow { description, .. }) if description == "every hour, tell me what I did"));
    harness.get_by_label("Drafting…");
    let draft = r#"{"name": "hourly", "trigger": {"kind": "schedule", "schedule": "every 1h"}, "steps": [{"id": "tell", "kind": "notify", "title": "An hour"}]}"#;
    far.events.send(AppEvent::Agent(AgentEvent::FlowDrafted(Ok(draft.into())))).unwrap();
    harness.run();
    harness.get_by_label("Save automation").click();
    harness.run();
    assert!(matches!(far.automations.try_recv(), Ok(AutomationsCommand::Save { flow, .. }) if flow.name == "hourly"));
}

#[test]
fn the_automation_editor_is_a_list_of_step_forms_that_offers_each_steps_variables() {
    use cowork::automations::AutomationsCommand;
    use cowork::automations::flow::StepKind;
    use cowork::automations::events::{AutomationRow, AutomationsView};
    let (mut harness, far) = app_with(AppOptions::default(), 2400.0);
    let definition = r#"{"name": "look_back", "trigger": {"kind": "manual"}, "steps": [
        {"id": "recent", "kind": "tool", "tool": "recent_activity", "args": {"minutes": 60}},
        {"id": "tell", "kind": "notify", "title": "Your hour"}]}"#;
    let flow = AutomationRow { name: "look_back".into(), enabled: true, trigger: "manual".into(), definition: cowork::automations::Flow::from_json(definition).unwrap().to_json(), ..AutomationRow::default() };
    far.events.send(AppEvent::Automations(AutomationsView { flows: vec![flow], runs: Vec::new() })).unwrap();
    harness.get_by_label("Apps").click();
    harness.run();
    harness.get_by_label("Edit").click();
    harness.run();
    harness.get_by_label("Edit automation");
    // The notification step is offered the tool step's output; the tool step, nothing (a manual trigger has no data).
    assert!(harness.query_by_label_contains("Insert into Arguments").is_none());
    harness.get_by_role_and_label(Role::ComboBox, "Insert into Body").click();
    harness.run();
    harness.get_by_label("${steps.recent.data}").click();
    harness.run();
    harness.get_by_label("Save").click();
    harness.run();
    match far.automations.try_recv() {
        Ok(AutomationsCommand::Save { flow, .. }) => {
            assert_eq!(flow.steps[1].kind, StepKind::Notify { title: "Your hour".into(), body: "${steps.recent.data}".into(), tier: Default::default(), task: String::new() });
        }
        other => panic!("expected a save, got {other:?}"),
    }
    // A new one starts from a form; a second step is offered the first one's output.
    harness.get_by_label("New automation").click();
    harness.run();
    harness.get_by_label("New automation");
    harness.get_by_label("Add a step").click();
    harness.run();
    harness.get_by_role_and_label(Role::ComboBox, "Insert into Body");
    harness.get_by_label("Cancel").click();
    harness.run();
    assert!(harness.query_by_label("Add a step").is_none(), "closed");
    assert!(far.automations.try_recv().is_err(), "nothing saved");
}

#[test]
fn send_streams_the_answer_shows_the_context_and_stop_bumps_the_epoch() {
    let (mut harness, far) = app();
    let request = send_message(&mut harness, &far, "What was I doing?");
    assert_eq!(request.text, "What was I doing?");
    assert!(request.thread_is_new);

    far.events
        .send(AppEvent::Agent(AgentEvent::ContextAttached { user_message_id: request.user_message_id, context: "Current window: XTerm — \"build\"".into() }))
        .unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::Token { answer_id: request.answer_id, text: "You were ".into() })).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::Token { answer_id: request.answer_id, text: "building.".into() })).unwrap();
    harness.run();
    harness.get_by_label("You were building.");

    // The chip shows exactly what was sent.
    harness.get_by_label("Context: recent activity").click();
    harness.run();
    harness.get_by_label("Current window: XTerm — \"build\"");

    harness.get_by_label("Stop").click();
    harness.run();
    assert_eq!(far.stop_epoch.load(Ordering::SeqCst), 1);
    far.events
        .send(AppEvent::Agent(AgentEvent::AnswerFinished {
            answer_id: request.answer_id,
            status: MessageStatus::Stopped,
            error: None,
            stats: GenerationStats::default(),
        }))
        .unwrap();
    harness.run();
    harness.get_by_label("Stopped");
    assert_eq!(harness.state().state.generating, None);
}

#[test]
fn a_stopped_agent_worker_fails_the_answer_visibly_instead_of_blocking() {
    let (mut harness, far) = app();
    drop(far.agent);
    type_message(&mut harness, "hello");
    harness.run();
    harness.get_by_label("Send").click();
    harness.run();
    assert!(harness.get_all_by_label_contains("the agent worker is not running").next().is_some());
    assert_eq!(harness.state().state.generating, None, "the UI is ready for the next message");
}

#[test]
fn a_failed_worker_gets_a_retry_button_that_reaches_its_supervisor() {
    let (mut harness, far) = app();
    far.events
        .send(AppEvent::Runtime(RuntimeEvent::Worker { worker: WorkerName::Llm, state: WorkerState::Failed { error: "panicked: boom".into() } }))
        .unwrap();
    harness.run();
    harness.get_by_label_contains("Local model failed");
    // The others share one chip, so the failed one and its button stay in view.
    harness.get_by_label("• 19 workers starting");
    harness.get_by_label("Retry local model").click();
    harness.run();
    assert_eq!(far.llm_control.try_recv().ok(), Some(Control::Retry));
}

#[test]
fn the_quick_prompt_opens_from_the_keyboard_and_sends_into_the_chat() {
    let (mut harness, far) = app();
    harness.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::K);
    harness.run();
    assert!(harness.state().state.quick_prompt_open);
    harness.get_by_label("Quick prompt").type_text("Summarise my morning");
    harness.run();
    harness.key_press(egui::Key::Enter);
    harness.run();
    // Opening it asked the llm worker to load the model and prefill the prompt head.
    assert!(matches!(far.agent.try_recv(), Ok(AgentCommand::Prepare)), "opening the quick prompt prepares the local model");
    assert!(far.llm.try_recv().is_err(), "the UI asks the agent; only the agent asks the llm worker to generate");
    match far.agent.try_recv().expect("quick prompt sent a chat request") {
        AgentCommand::Chat(request) => assert_eq!(request.text, "Summarise my morning"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(!harness.state().state.quick_prompt_open, "Enter hides the quick prompt");
    // The global hotkey opens it too.
    far.events.send(AppEvent::Desktop(DesktopEvent::QuickPromptHotkey)).unwrap();
    harness.run();
    assert!(harness.state().state.quick_prompt_open);
    harness.key_press(egui::Key::Escape);
    harness.run();
    assert!(!harness.state().state.quick_prompt_open, "Esc hides it");
}

#[test]
fn a_bad_setting_value_is_shown_and_a_good_one_is_saved() {
    let (mut harness, far) = app();
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "capture.afk_secs".into(), value: "soon".into() })).unwrap();
    open_settings(&mut harness, "General");
    harness.run();
    harness.get_by_label_contains("is not a number");
    let field = harness.get_by_label("Away after (seconds without input)");
    field.focus();
    harness.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    harness.get_by_label("Away after (seconds without input)").type_text("5");
    harness.run();
    // Checked as typed: too short says why, and leaving the field keeps it unsaved.
    harness.get_by_label("Not a number from 10 to 86400");
    harness.key_press(egui::Key::Enter);
    harness.run();
    assert!(saved_settings(&far).is_empty(), "an invalid value is not applied");
    harness.get_by_label("Away after (seconds without input)").focus();
    harness.run();
    harness.get_by_label("Away after (seconds without input)").type_text("0");
    harness.run();
    assert!(harness.query_by_label("Not a number from 10 to 86400").is_none());
    // No Save button: Enter (or leaving the field) applies it.
    assert!(harness.query_by_label("Save").is_none());
    harness.key_press(egui::Key::Enter);
    harness.run();
    assert_eq!(saved_settings(&far).first(), Some(&("capture.afk_secs".to_owned(), "50".to_owned())));
    assert_eq!(harness.state().state.settings.afk_secs, 50);
}


#[test]
fn settings_delete_and_export_buttons_reach_the_store() {
    let (mut harness, far) = app();
    open_settings(&mut harness, "Your data");
    harness.run();
    let _ = far.store.try_iter().count();
    harness.get_by_label("Delete last 15 minutes").click();
    harness.run();
    harness.get_by_label("Export today for ActivityWatch").click();
    harness.run();
    let sent = store_asked(&far);
    let span = sent.iter().find_map(|c| {
        let (since, until) = c.strip_prefix("delete range ")?.split_once("..")?;
        Some(until.parse::<i64>().ok()? - since.parse::<i64>().ok()?)
    });
    assert!(span.is_some_and(|s| (15 * 60_000..=15 * 60_000 + 1).contains(&s)), "{span:?}");
    assert!(sent.iter().any(|c| c.starts_with("export ActivityWatch ")), "{sent:?}");
    far.events.send(AppEvent::Store(StoreEvent::RangeDeleted { since_millis: 0, until_millis: 1, sessions: 3, messages: 0 })).unwrap();
    harness.run();
    harness.get_by_label("deleted 3 sessions and 0 messages");
}

#[test]
fn first_run_asks_which_streams_record_and_applies_the_answer() {
    let (mut harness, far) = app();
    harness.get_by_label("Before cowork records anything");
    harness.get_by_label("Record what you type").click();
    harness.run();
    harness.get_by_label("Start recording").click();
    harness.run();
    let saved = saved_settings(&far);
    assert!(saved.contains(&("capture.keys.enabled".into(), "false".into())), "{saved:?}");
    assert!(saved.contains(&("capture.windows.enabled".into(), "true".into())));
    assert!(saved.contains(&("capture.streams_confirmed".into(), "true".into())));
    // The last switch applied: windows and clipboard on, typing off.
    let last_capture = far.capture.try_iter().filter_map(|c| match c { CaptureCommand::SetRecording(on) => Some(on), _ => None }).last();
    let last_keys = far.keys.try_iter().filter_map(|c| match c { KeysCommand::SetRecording(on) => Some(on), _ => None }).last();
    let last_clip = far.clipboard.try_iter().filter_map(|c| match c { ClipboardCommand::SetRecording(on) => Some(on), _ => None }).last();
    assert_eq!((last_capture, last_keys, last_clip), (Some(true), Some(false), Some(true)));
    assert!(harness.query_by_label("Before cowork records anything").is_none(), "answered once");
    // The screen-text stream stays off unless chosen.
    assert!(!saved.iter().any(|(k, _)| k.starts_with("capture.screen.")), "{saved:?}");
    let plans: Vec<_> = far.screen.try_iter().filter_map(|c| match c { cowork::capture::screen_worker::ScreenCommand::Configure(plan) => Some(plan), _ => None }).collect();
    assert!(plans.last().is_some_and(|p| !p.on), "{plans:?}");
}

#[test]
fn the_screen_text_stream_is_off_until_chosen_with_its_disclosure_and_its_consent_can_be_withdrawn() {
    let (mut harness, far) = app();
    harness.get_by_label("Record the text on your screen").click();
    harness.run();
    harness.get_by_label_contains("Never windows your rules exclude, private windows, password fields");
    harness.get_by_label("Start recording").click();
    harness.run();
    let saved = saved_settings(&far);
    for key in ["capture.screen.consented", "capture.screen.enabled"] {
        assert!(saved.contains(&(key.into(), "true".into())), "{key}: {saved:?}");
    }
    let plan = far.screen.try_iter().filter_map(|c| match c { cowork::capture::screen_worker::ScreenCommand::Configure(plan) => Some(plan), _ => None }).last();
    assert_eq!(plan, Some(cowork::capture::screen_worker::ScreenPlan { on: true, ocr: true }));
    // Settings: the status the worker reports, OCR's switch, and withdrawing.
    far.events
        .send(AppEvent::Capture(CaptureEvent::Screen(cowork::capture::events::ScreenStatus {
            on: true,
            held: Some("window 7 (Payroll) is not read: title deny list".into()),
            stored: 12,
            last: None,
            error: None,
        })))
        .unwrap();
    open_settings(&mut harness, "What cowork records & privacy");
    harness.get_by_label_contains("Not reading the focused window: window 7 (Payroll) is not read");
    harness.get_by_label("Read windows without accessible text by OCR").click();
    harness.run();
    assert!(saved_settings(&far).contains(&("capture.screen.ocr".into(), "false".into())));
    let plan = far.screen.try_iter().filter_map(|c| match c { cowork::capture::screen_worker::ScreenCommand::Configure(plan) => Some(plan), _ => None }).last();
    assert_eq!(plan, Some(cowork::capture::screen_worker::ScreenPlan { on: true, ocr: false }));
    harness.get_by_label("Withdraw consent").click();
    harness.run();
    let plan = far.screen.try_iter().filter_map(|c| match c { cowork::capture::screen_worker::ScreenCommand::Configure(plan) => Some(plan), _ => None }).last();
    assert!(plan.is_some_and(|p| !p.on));
    harness.get_by_label_contains("Record the text on your screen: I agree");
}

#[test]
fn the_context_panel_says_what_would_be_recorded_and_which_rule_decided() {
    use cowork::capture::events::CaptureDecision;
    let (mut harness, far) = app();
    harness.get_by_label("Context").click();
    far.events
        .send(AppEvent::Capture(CaptureEvent::CaptureDecision(CaptureDecision {
            app: Some("KeePassXC".into()),
            excluded_by: Some("app deny list: keepassxc".into()),
            recording: true,
        })))
        .unwrap();
    harness.run();
    harness.get_by_label("Not recording KeePassXC: app deny list: keepassxc");
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "capture.streams_confirmed".into(), value: "true".into() })).unwrap();
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "capture.keys.enabled".into(), value: "false".into() })).unwrap();
    far.events
        .send(AppEvent::Capture(CaptureEvent::CaptureDecision(CaptureDecision { app: Some("XTerm".into()), excluded_by: None, recording: true })))
        .unwrap();
    harness.run();
    harness.get_by_label("Recording XTerm: window, clipboard");
}

#[test]
fn a_finished_session_is_given_its_project_when_the_context_panel_shows_it() {
    use cowork::records::ActivitySession;
    let (mut harness, far) = app();
    let now = cowork::ids::now_millis();
    let today = cowork::ids::local_day_start_millis(now);
    far.events.send(AppEvent::Capture(CaptureEvent::DaysLoaded(cowork::capture::events::Days { start_millis: today, days: 1, ..Default::default() }))).unwrap();
    let finished = |id: i64| {
        AppEvent::Capture(CaptureEvent::SessionFinished(ActivitySession {
            session_id: id,
            app: "code".into(),
            title: "main.rs - ledger-svc - Visual Studio Code".into(),
            started_at_millis: today.max(now - 600_000) + (id - 1) * 60_000,
            ended_at_millis: Some(today.max(now - 600_000) + id * 60_000),
            ..Default::default()
        }))
    };
    // On the chat tab, a window switch costs the frame nothing: the timeline's projects wait.
    far.events.send(finished(1)).unwrap();
    harness.run();
    assert!(harness.state().state.day.stale);
    assert!(harness.state().state.day.projects.is_empty());
    // Shown, they are worked out once.
    harness.get_by_label("Context").click();
    harness.run();
    let day = &harness.state().state.day;
    assert!(!day.stale);
    assert_eq!(day.project_of(0).0, "ledger-svc");
    assert_eq!(day.ledger.totals().get("ledger-svc").copied(), Some(60));
    // While it is shown, a new one is attributed at the next frame.
    far.events.send(finished(2)).unwrap();
    harness.run();
    assert_eq!(harness.state().state.day.projects.len(), 2);
}

/// The day's recap under the timeline (issue 58): each line with a button per
/// source that opens its session; "Write again" asks the agent for it; when it
/// is written the days load again; and a suggestion's Accept starts its task
/// in a new chat.
#[test]
fn the_days_recap_shows_its_sources_writes_again_and_a_suggestion_starts_its_task() {
    use cowork::records::ActivitySession;
    let (mut harness, far) = app();
    harness.get_by_label("Context").click();
    harness.run();
    let now = cowork::ids::now_millis();
    let today = cowork::ids::local_day_start_millis(now);
    let session = ActivitySession { session_id: 41, app: "code".into(), title: "export.rs - ledger-svc".into(), started_at_millis: today.max(now - 600_000), ended_at_millis: Some(today.max(now - 600_000) + 60_000), ..Default::default() };
    let recap = cowork::capture::events::KeptNote {
        kind: "recap_day".into(),
        start_millis: today,
        end_millis: today + 86_400_000,
        text: "Recap of today\nAtlas (1 min):\n- fixed the export's rounding (session 41)".into(),
    };
    far.events.send(AppEvent::Capture(CaptureEvent::DaysLoaded(cowork::capture::events::Days { start_millis: today, days: 1, sessions: vec![session], notes: vec![recap], ..Default::default() }))).unwrap();
    harness.run();
    let _ = far.store.try_iter().count();
    harness.get_by_label("Atlas (1 min):");
    harness.get_by_label("fixed the export's rounding");
    harness.get_by_label("1").click();
    harness.run();
    assert!(store_asked(&far).iter().any(|c| c == "load session detail 41"), "the source opens its session");
    harness.get_by_label("Write again").click();
    harness.run();
    match far.agent.try_recv() {
        Ok(AgentCommand::Recap { period: cowork::day::recap::Period::Day, at_millis, reply: None, .. }) => assert_eq!(at_millis, today),
        other => panic!("a recap asked for: {other:?}"),
    }
    harness.get_by_label("Writing…");
    far.events.send(AppEvent::Agent(AgentEvent::RecapWritten { period_start: today, result: Ok(3) })).unwrap();
    harness.run();
    assert!(store_asked(&far).iter().any(|c| c == "load days"), "written: the days load again to show it");
    // Accept on a suggestion whose flow has a task: a new chat that asks it.
    far.events.send(AppEvent::Desktop(DesktopEvent::StartTask("What did I leave open today?".into()))).unwrap();
    harness.run();
    let AgentCommand::Chat(request) = far.agent.try_recv().expect("the task reached the agent") else { panic!("a chat request") };
    assert_eq!(request.text, "What did I leave open today?");
    assert!(request.thread_is_new);
    assert_eq!(harness.state().state.tab, Some(Tab::Chat));
}

#[test]
fn clicking_a_session_shows_what_was_typed_and_copied_in_it() {
    use cowork::records::{ActivitySession, SessionEnd};
    let (mut harness, far) = app();
    harness.get_by_label("Context").click();
    let now = cowork::ids::now_millis();
    // The timeline asks the store for today, and shows sessions once it has it.
    assert!(store_asked(&far).iter().any(|c| c == "load days"));
    harness.run();
    harness.get_by_label("Loading…");
    let today = cowork::ids::local_day_start_millis(now);
    far.events.send(AppEvent::Capture(CaptureEvent::DaysLoaded(cowork::capture::events::Days { start_millis: today, days: 1, ..Default::default() }))).unwrap();
    far.events
        .send(AppEvent::Capture(CaptureEvent::SessionFinished(ActivitySession {
            session_id: 77,
            app: "XTerm".into(),
            title: "release notes".into(),
            pid: None,
            window_id: 1,
            started_at_millis: now - 60_000,
            ended_at_millis: Some(now - 1_000),
            end_reason: Some(SessionEnd::Switch),
            ..Default::default()
        })))
        .unwrap();
    harness.run();
    let _ = far.store.try_iter().count();
    harness.get_by_label("release notes").click();
    harness.run();
    let asked = store_asked(&far).iter().any(|c| c == "load session detail 77");
    assert!(asked);
    far.events
        .send(AppEvent::Capture(CaptureEvent::SessionDetail {
            session_id: 77,
            typed: vec![(now - 30_000, "ship it".into())],
            copied: vec![(now - 20_000, "v0.2.0".into())],
            seen: vec![(now - 10_000, format!("(OCR, 93 %) Release v0.2.0 checklist {}", "x".repeat(600)))],
        }))
        .unwrap();
    harness.run();
    harness.get_by_label_contains("typed: ship it");
    harness.get_by_label_contains("copied: v0.2.0");
    // Screen text, its first 400 characters (all of it on hover).
    let seen = harness.get_by_label_contains("on screen (OCR, 93 %) Release v0.2.0 checklist");
    use egui_kittest::kittest::NodeT;
    let node = seen.accesskit_node();
    let shown = node.label().or_else(|| node.value()).unwrap_or_default().to_string();
    assert!(shown.ends_with('…') && shown.chars().count() < 450, "{shown}");
}

#[test]
fn stream_health_shows_age_rate_drops_and_errors() {
    use cowork::capture::events::StreamHealth;
    let (mut harness, far) = app();
    harness.get_by_label("Context").click();
    let now = cowork::ids::now_millis();
    far.events
        .send(AppEvent::Capture(CaptureEvent::StreamHealth(StreamHealth {
            stream: "typing".into(),
            last_event_at_millis: Some(now - 5_000),
            events_last_minute: 7,
            drops: 2,
            errors: 1,
            last_error: Some("store queue full".into()),
        })))
        .unwrap();
    harness.run();
    harness.get_by_label_contains("What you type: last 5s ago · 7/min · 2 dropped · 1 error");
}

#[test]
fn consent_shows_the_exact_preview_and_retry_offers_the_next_tier_with_its_cost() {
    let (mut harness, far) = app();
    // Two cloud tiers, from settings; providers.json is not needed for the consent prompt.
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "brains.tiers".into(), value: "cheap, smart".into() })).unwrap();
    type_message(&mut harness, "Summarise my morning");
    harness.run();
    harness.get_by_label("Send").click();
    harness.run();
    let AgentCommand::Chat(request) = far.agent.try_recv().unwrap() else { panic!("a chat request") };
    far.events
        .send(AppEvent::Agent(AgentEvent::ConsentNeeded {
            provider: "cheap".into(),
            reason: "you prefer cloud models".into(),
            preview: "Current window: Budget.ods - [email]".into(),
            request: Box::new(request.clone()),
        }))
        .unwrap();
    harness.run();
    harness.get_by_label("Send what you were doing to cheap?");
    harness.get_by_label("Current window: Budget.ods - [email]");
    harness.get_by_label("This time only").click();
    harness.run();
    let AgentCommand::Chat(again) = far.agent.try_recv().unwrap() else { panic!("the question again") };
    assert!(again.consent_once && again.answer_id == request.answer_id);
    assert!(harness.query_by_label("This time only").is_none(), "the prompt is gone");

    // The answer came from tier 1; "Retry with a smarter model" offers tier 2 first.
    far.events
        .send(AppEvent::Agent(AgentEvent::Routed { answer_id: request.answer_id, ask_id: request.ask_id, answered_by: "cheap · small".into(), reason: "r".into() }))
        .unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::Token { answer_id: request.answer_id, text: "A quiet morning.".into() })).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::AnswerCost { answer_id: request.answer_id, usd: 0.0012 })).unwrap();
    far.events
        .send(AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: request.answer_id, status: MessageStatus::Done, error: None, stats: Default::default() }))
        .unwrap();
    harness.run();
    harness.get_by_label_contains("by cheap · small · $0.0012");
    harness.get_by_label("Retry with a smarter model").click();
    harness.run();
    // No providers.json here: the tiers are named but not configured, so the app says so.
    assert!(harness.state().state.notices.last().is_some_and(|n| n.contains("no cloud tier")), "{:?}", harness.state().state.notices);
}

#[test]
fn a_provider_added_in_settings_lands_in_providers_json_and_its_key_in_the_secret_store() {
    let data = super::support::temp_dir();
    // Tall enough that Settings → Network is on screen without scrolling.
    let (mut harness, _far) = app_with(AppOptions { export_dir: data.path().to_owned(), ..AppOptions::default() }, 3000.0);
    open_settings(&mut harness, "Brains & network");
    harness.run();
    harness.get_by_label("Add or change a provider").click();
    harness.run();
    for (label, text) in [("Name", "groq"), ("Model", "llama-3.3-70b-versatile"), ("$ per million input tokens", "0.59")] {
        harness.get_by_role_and_label(Role::TextInput, label).focus();
        harness.run();
        harness.get_by_role_and_label(Role::TextInput, label).type_text(text);
        harness.run();
    }
    harness.get_by_label("Save provider").click();
    harness.run();
    let providers = cowork::brains::Providers::load(&data.path().join("providers.json")).unwrap();
    let groq = providers.get("groq").expect("saved");
    assert_eq!((groq.base_url.as_str(), groq.price_in_per_mtok), ("https://api.groq.com/openai/v1", 0.59));
    // Its key goes to the secret store; the UI shows it masked and the config never holds it.
    harness.get_by_role_and_label(Role::PasswordInput, "key: no key stored").focus();
    harness.run();
    harness.get_by_role_and_label(Role::PasswordInput, "key: no key stored").type_text("gsk_abcdefghijklmnop1234");
    harness.run();
    harness.get_by_label("Save key").click();
    harness.run();
    harness.get_by_label("key: gsk…1234");
    let config = std::fs::read_to_string(data.path().join("providers.json")).unwrap();
    assert!(!config.contains("gsk_abc"), "{config}");
    let secrets = cowork::secrets::Secrets::open(data.path()).unwrap();
    assert_eq!(secrets.get("provider:groq").unwrap().as_deref(), Some("gsk_abcdefghijklmnop1234"));
}

#[test]
fn search_as_you_type_shows_only_the_newest_results_grouped_by_day_and_app() {
    let (mut harness, far) = app();
    harness.get_by_label("Context").click();
    harness.run();
    harness.get_by_role_and_label(Role::TextInput, "Search").focus();
    harness.run();
    harness.get_by_role_and_label(Role::TextInput, "Search").type_text("inv");
    harness.run();
    let queries: Vec<(u64, String)> = far
        .search
        .try_iter()
        .map(|c| match c {
            cowork::memory::search_worker::SearchCommand::Query { generation, query, .. } => (generation, query),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(queries.last().map(|q| q.1.as_str()), Some("inv"), "{queries:?}");
    let newest = queries.last().unwrap().0;
    let hit = |id, title: &str| cowork::memory::search::Hit {
        stream: cowork::memory::search::Stream::Window,
        id,
        at_millis: 1_795_300_000_000,
        app: Some("firefox".into()),
        title: title.into(),
        snippet: format!("[{title}]"),
        score: 1.0,
        open_id: Some(id),
    };
    // A stale answer (an older generation) is ignored; the newest is shown.
    far.events.send(AppEvent::Memory(MemoryEvent::SearchResults { generation: newest - 1, query: "in".into(), hits: vec![hit(1, "stale page")], millis: 1.0, error: None, keyword_only: None })).unwrap();
    far.events.send(AppEvent::Memory(MemoryEvent::SearchResults { generation: newest, query: "inv".into(), hits: vec![hit(2, "Invoice 2291")], millis: 2.5, error: None, keyword_only: None })).unwrap();
    harness.run();
    harness.get_by_label_contains("Invoice 2291");
    harness.get_by_label_contains("firefox");
    assert!(harness.query_by_label_contains("stale page").is_none());
    harness.get_by_label("1 results in 2.5 ms (keywords and meaning)");
}

#[test]
fn citations_open_their_source_ratings_reach_the_store_and_the_memory_view_shows_the_prompt() {
    use cowork::memory::rag::{Citation, Item, Origin};
    let (mut harness, far) = app_with(AppOptions::default(), 1400.0);
    type_message(&mut harness, "Where did I book the hotel?");
    harness.run();
    harness.get_by_label("Send").click();
    harness.run();
    let AgentCommand::Chat(request) = far.agent.try_recv().unwrap() else { panic!("a chat request") };
    let citation = |n, stream, source_id, open_id, label: &str| Citation {
        n,
        chunk_id: Some(n as i64),
        stream,
        source_id,
        at_millis: 1_795_300_000_000,
        label: label.into(),
        open_id: Some(open_id),
    };
    let citations = vec![
        citation(1, cowork::memory::search::Stream::Window, 41, 41, "chromium — Booking.com: Hotel Adlon"),
        citation(2, cowork::memory::search::Stream::Chat, 77, 5, "Trip planning"),
    ];
    far.events.send(AppEvent::Agent(AgentEvent::Citations { answer_id: request.answer_id, citations })).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::Token { answer_id: request.answer_id, text: "At the Hotel Adlon [1].".into() })).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: request.answer_id, status: MessageStatus::Done, error: None, stats: Default::default() })).unwrap();
    let item = |label: &str, origin| Item { chunk_id: Some(1), stream: cowork::memory::search::Stream::Window, source_id: 41, at_millis: 0, label: label.into(), text: "Booking.com".into(), origin, open_id: Some(41) };
    let report = cowork::memory::synthesis::synthesize("You are cowork.", &[], "Goal: a quiet week", &[], &[("day 1".into(), "long ".repeat(400))], 50);
    far.events
        .send(AppEvent::Agent(AgentEvent::MemoryInjected {
            user_message_id: request.user_message_id,
            report,
            recalled: vec![item("chromium — Booking.com: Hotel Adlon", Origin::Recalled)],
            dropped: vec![item("evince — old invoice", Origin::Recalled)],
        }))
        .unwrap();
    harness.run();
    let _ = far.store.try_iter().count();

    // The first source opens its session in the Context panel.
    harness.get_by_label_contains("Booking.com: Hotel Adlon").click();
    harness.run();
    assert!(store_asked(&far).iter().any(|c| c == "load session detail 41"));
    assert_eq!(harness.state().state.tab(), cowork::state::Tab::Context);
    harness.get_by_label("Chat").click();
    harness.run();
    // Thumbs down, with a reason.
    harness.get_by_label("Chat").click();
    harness.run();
    harness.get_by_label("Not helpful").click();
    harness.run();
    harness.get_by_role_and_label(Role::TextInput, "Why").focus();
    harness.run();
    harness.get_by_role_and_label(Role::TextInput, "Why").type_text("made up a hotel");
    harness.run();
    harness.get_by_label("Save rating").click();
    harness.run();
    let rated = store_asked(&far).into_iter().find(|c| c.starts_with("feedback "));
    assert_eq!(rated, Some(format!("feedback -1 on {}: made up a hotel", request.answer_id)));

    // The second opens its thread.
    harness.get_by_label_contains("Trip planning").click();
    harness.run();
    let asked = store_asked(&far);
    for load in ["load messages 5", "load tool calls 5", "load pins 5"] {
        assert!(asked.iter().any(|c| c == load), "{load}: {asked:?}");
    }

    // The Memory view: what was injected, and what the budgets dropped.
    open_settings(&mut harness, "Memory");
    harness.run();
    harness.get_by_label("Memory view: the last prompt").click();
    harness.run();
    harness.get_by_label_contains("Profile (17 tokens)");
    harness.get_by_label_contains("dropped by the budget: Summary day 1");
    harness.get_by_label_contains("dropped by the budget: evince — old invoice");
    harness.get_by_label_contains("[1] Recalled · chromium — Booking.com: Hotel Adlon");
    // The profile loads after the view was first drawn: the box shows it; a
    // change applies when the box is left (no Save button).
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: cowork::config::keys::PROFILE.into(), value: "Goal: a quiet week".into() })).unwrap();
    harness.run();
    let profile = "Profile (preferences, goals, style; always in the prompt)";
    assert_eq!(harness.get_by_role_and_label(Role::MultilineTextInput, profile).value().as_deref(), Some("Goal: a quiet week"));
    harness.get_by_role_and_label(Role::MultilineTextInput, profile).focus();
    harness.run();
    harness.get_by_role_and_label(Role::MultilineTextInput, profile).type_text(", no meetings");
    harness.run();
    assert!(saved_settings(&far).is_empty(), "not while it is typed");
    harness.key_press(egui::Key::Escape);
    harness.run();
    let saved = saved_settings(&far).into_iter().find_map(|(key, value)| (key == cowork::config::keys::PROFILE).then_some(value));
    assert_eq!(saved.as_deref(), Some("Goal: a quiet week, no meetings"));
    // Pinning a fact goes to the store (which mirrors it into USER.md).
    harness.get_by_role_and_label(Role::TextInput, "Fact").focus();
    harness.run();
    harness.get_by_role_and_label(Role::TextInput, "Fact").type_text("Prefers window seats");
    harness.run();
    harness.get_by_label("Pin").click();
    harness.run();
    let sent = store_asked(&far);
    assert!(sent.iter().any(|c| c == "pin a fact by user: Prefers window seats"), "{sent:?} {:?}", harness.state().state.notices);
}

#[test]
fn a_search_result_pins_to_the_open_chat_its_pin_can_be_taken_off_and_typed_text_opens_its_session() {
    let (mut harness, far) = app();
    let search_for = |harness: &mut Harness<'static, CoworkApp>, text: &str| {
        harness.get_by_label("Context").click();
        harness.run();
        harness.get_by_role_and_label(Role::TextInput, "Search").focus();
        harness.run();
        harness.get_by_role_and_label(Role::TextInput, "Search").type_text(text);
        harness.run();
        let generation = far
            .search
            .try_iter()
            .filter_map(|c| match c {
                cowork::memory::search_worker::SearchCommand::Query { generation, .. } => Some(generation),
                _ => None,
            })
            .last()
            .unwrap();
        let hit = cowork::memory::search::Hit {
            stream: cowork::memory::search::Stream::Typing,
            id: 12,
            at_millis: 1_795_300_000_000,
            app: Some("gedit".into()),
            title: "notes".into(),
            snippet: "[hotel] Adlon, 3 nights".into(),
            score: 1.0,
            open_id: Some(41),
        };
        far.events.send(AppEvent::Memory(MemoryEvent::SearchResults { generation, query: text.into(), hits: vec![hit], millis: 1.0, error: None, keyword_only: None })).unwrap();
        harness.run();
        harness.get_by_label_contains("Adlon, 3 nights");
    };
    // No chat open yet: nothing to pin to.
    search_for(&mut harness, "hotel");
    assert!(harness.query_by_label("Pin").is_none());

    harness.get_by_label("Chat").click();
    harness.run();
    type_message(&mut harness, "Plan the Berlin trip");
    harness.run();
    harness.get_by_label("Send").click();
    harness.run();
    let thread_id = harness.state().state.current_thread.expect("sending opened a thread");
    search_for(&mut harness, "hotel ");
    let _ = far.store.try_iter().count();
    harness.get_by_label("Pin").click();
    harness.run();
    let pinned = store_asked(&far);
    assert!(pinned.contains(&format!("pin typing 12 to thread {thread_id}")), "{pinned:?}");

    // The store answers with the thread's pins; the chat shows them with Unpin.
    let item = cowork::memory::rag::Item {
        chunk_id: Some(40),
        stream: cowork::memory::search::Stream::Typing,
        source_id: 12,
        at_millis: 1_795_300_000_000,
        label: "gedit — notes".into(),
        text: "hotel Adlon, 3 nights".into(),
        origin: cowork::memory::rag::Origin::Pinned,
        open_id: None,
    };
    far.events.send(AppEvent::Memory(MemoryEvent::ThreadPins { thread_id: thread_id + 1, items: vec![item.clone()] })).unwrap();
    harness.get_by_label("Chat").click();
    harness.run();
    assert!(harness.query_by_label("Pinned: gedit — notes").is_none(), "another thread's pins are not shown");
    far.events.send(AppEvent::Memory(MemoryEvent::ThreadPins { thread_id, items: vec![item] })).unwrap();
    harness.run();
    harness.get_by_label("Pinned: gedit — notes");
    harness.get_by_label("Unpin").click();
    harness.run();
    let unpinned = store_asked(&far);
    assert!(unpinned.contains(&format!("unpin typing 12 from thread {thread_id}")), "{unpinned:?}");
    // A new chat starts without them.
    harness.get_by_label("New chat").click();
    harness.run();
    assert!(harness.query_by_label("Pinned: gedit — notes").is_none());
    // Typed text opens the session it was typed in.
    search_for(&mut harness, "adlon");
    let _ = far.store.try_iter().count();
    harness.get_by_label_contains("Adlon, 3 nights").click();
    harness.run();
    assert!(store_asked(&far).iter().any(|c| c == "load session detail 41"));
    assert_eq!(harness.state().state.open_session.as_ref().map(|s| s.session_id), Some(41));
}

#[test]
fn the_desktop_accessibility_switch_is_saved_and_reaches_the_a11y_worker() {
    let (mut harness, far) = app();
    open_settings(&mut harness, "What cowork records & privacy");
    let _ = far.store.try_iter().count();
    // On by default; switching it off is saved and told to the worker that owns it.
    harness.get_by_label("Turn on desktop accessibility while cowork runs").click();
    harness.run();
    let saved = saved_settings(&far);
    assert_eq!(saved, [("capture.desktop_accessibility".to_owned(), "false".to_owned())]);
    let told: Vec<bool> = far
        .a11y
        .try_iter()
        .filter_map(|c| match c {
            cowork::capture::A11yCommand::SetDesktopAccessibility(on) => Some(on),
            _ => None,
        })
        .collect();
    assert_eq!(told, [false]);
}

/// The desktop the workers found: a chip in the status bar when something is
/// limited, and Settings → Desktop with each capability and, on sway, the
/// lines that bind the hotkeys (the configured ones) in its config.
#[test]
fn the_status_bar_and_settings_say_what_the_desktop_limits_and_how_to_bind_the_hotkeys() {
    use cowork::desktop::session::{Facts, report};
    let (mut harness, far) = app();
    let globals = ["wl_seat", "zwlr_foreign_toplevel_manager_v1", "org_kde_kwin_idle", "zwlr_data_control_manager_v1", "zwp_virtual_keyboard_manager_v1"];
    let facts = Facts {
        session_type: "wayland".into(),
        current_desktop: "sway".into(),
        wayland_display: Some("wayland-1".into()),
        globals: Some(globals.iter().map(|g| ((*g).to_owned(), 1)).collect()),
        swaysock: Some("/nonexistent/sway-ipc.sock".into()),
        runtime_dir: Some("/run/user/1000".into()),
        ..Facts::default()
    };
    far.events.send(AppEvent::Desktop(DesktopEvent::Report(Box::new(report(&facts, true))))).unwrap();
    harness.run();
    harness.get_by_label_contains("Wayland (sway):");
    open_settings(&mut harness, "General");
    harness.run();
    harness.get_by_label_contains("bindsym --no-repeat Ctrl+Mod1+space exec cowork trigger quick-prompt");
    harness.get_by_label_contains("bindsym --release Ctrl+Mod1+v exec cowork trigger talk-release");
    harness.get_by_label_contains("text entered into fields");
    harness.get_by_label_contains("once bound in your compositor");
}

/// GNOME without cowork's extension: Settings → Desktop says each capability
/// waits for it, and offers to install it only after saying what it does and
/// that GNOME needs a log-out/in; "Not now" closes that without installing.
#[test]
fn on_gnome_settings_offer_the_extension_with_what_it_does_before_installing_it() {
    use cowork::desktop::session::{Facts, report};
    let (mut harness, far) = app_with(AppOptions::default(), 4000.0);
    let facts = Facts {
        session_type: "wayland".into(),
        current_desktop: "GNOME".into(),
        wayland_display: Some("wayland-0".into()),
        globals: Some([("wl_seat".to_owned(), 1)].into_iter().collect()),
        bus_names: vec!["org.gnome.Shell".into(), "org.gnome.Mutter.IdleMonitor".into()],
        ..Facts::default()
    };
    far.events.send(AppEvent::Desktop(DesktopEvent::Report(Box::new(report(&facts, true))))).unwrap();
    harness.run();
    open_settings(&mut harness, "General");
    harness.run();
    assert!(harness.query_all_by_label_contains("waiting for cowork's GNOME Shell extension").count() >= 4);
    assert!(harness.query_by_label_contains("no other program").is_none(), "nothing is explained before it is asked for");
    harness.get_by_label("Install cowork's GNOME Shell extension…").click();
    harness.run();
    harness.get_by_label_contains("It tells cowork, and no other program, which window has the focus");
    harness.get_by_label_contains("log out and in once after installing");
    harness.get_by_label("Install");
    harness.get_by_label("Not now").click();
    harness.run();
    assert!(harness.query_by_label_contains("no other program").is_none());
    harness.get_by_label("Install cowork's GNOME Shell extension…");
    assert!(harness.query_by_label_contains("GNOME Shell extension in").is_none(), "nothing was installed");
}

/// Settings → Agent: opening Settings asks the agent for its rules and audit log; each rule
/// shows with a Remove button that tells the agent, and the agent switch is saved.
#[test]
fn settings_show_the_agents_rules_and_audit_and_remove_a_rule() {
    // Tall enough that the Agent section is on screen without scrolling.
    let (mut harness, far) = app_with(AppOptions::default(), 3000.0);
    open_settings(&mut harness, "Agent & tools");
    harness.run();
    assert!(far.agent.try_iter().any(|c| matches!(c, AgentCommand::Overview)), "the overview is asked for");
    far.events
        .send(AppEvent::Agent(AgentEvent::AgentOverview {
            rules: vec![(7, "allow run_command where command matches git status".into())],
            problems: vec!["rule 9 skipped: its pattern is not a regex".into()],
            audit: vec!["2026-11-24T11:30:00Z recent_activity safe ran by policy: default {}".into()],
        }))
        .unwrap();
    harness.run();
    harness.get_by_label("allow run_command where command matches git status");
    harness.get_by_label("rule 9 skipped: its pattern is not a regex");
    harness.get_by_label("2026-11-24T11:30:00Z recent_activity safe ran by policy: default {}");
    harness.get_by_label("Remove").click();
    harness.run();
    assert!(far.agent.try_iter().any(|c| matches!(c, AgentCommand::RemoveRule(7))), "Remove tells the agent");
    let _ = far.store.try_iter().count();
    harness.get_by_label("Answer with tools (the agent)").click();
    harness.run();
    assert_eq!(saved_settings(&far), [("agent.enabled".to_owned(), "false".to_owned())]);
}

/// A tool chip expands to its arguments and result; a long result shows its head and says
/// how much more is kept, instead of laying out megabytes every frame. Images
/// the tool returned show under the chips; one that cannot be decoded says so.
#[test]
fn an_open_tool_chip_shows_the_head_of_a_long_result_and_its_images() {
    let (mut harness, far) = app();
    let request = send_message(&mut harness, &far, "read my build log");
    let output = "build ok\n".repeat(20_000);
    let call = cowork::agent::events::ToolCallView {
        operation_id: 1,
        answer_id: request.answer_id,
        call_id: 77,
        step: 1,
        tool: "read_file".into(),
        arguments: serde_json::json!({"path": "build.log"}),
        risk: "safe".into(),
        status: cowork::agent::events::CallStatus::Done,
        why: "safe".into(),
        decided_by: Some("policy: default".into()),
        output: Some(output.clone()),
        is_error: false,
        duration_millis: Some(3),
        expires_at_millis: None,
        suggested_rule: None,
        images: vec![
            cowork::media::Attached::new(cowork::media::Image { mime: "image/png".into(), data: png(40, 20) }),
            cowork::media::Attached::new(cowork::media::Image { mime: "image/png".into(), data: b"<html>not a picture</html>".to_vec() }),
        ],
    };
    far.events.send(AppEvent::Agent(AgentEvent::ToolCall(Box::new(call)))).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::Token { answer_id: request.answer_id, text: "It built.".into() })).unwrap();
    harness.run();
    let picture = harness.get_by_label("Image from read_file");
    let shown = picture.rect();
    assert!((shown.width() - 40.0).abs() < 1.0 && (shown.height() - 20.0).abs() < 1.0, "{shown:?}");
    harness.get_by_label("[image not shown: not an image cowork can show (PNG, JPEG, GIF or WebP)]");
    harness.get_by_label("Read a file: build.log · done 3 ms").click();
    harness.run();
    harness.get_by_label(&format!("… {} more bytes, kept whole in cowork.db: `cowork audit --output 77` prints it", output.len() - 64 * 1024));
}

/// Settings → Integrations shows each MCP server's state (an error with its
/// reason and stderr), and its buttons and tool switches reach the mcp worker.
#[test]
fn settings_integrations_show_server_state_and_send_reconnect_test_and_tool_choices() {
    use cowork::mcp::events::{McpServerStatus, McpServerView};
    use cowork::mcp::config::McpEdit;
    use cowork::mcp::worker::McpCommand;
    let (mut harness, far) = app_with(AppOptions::default(), 3000.0);
    let view = |name: &str, status: McpServerStatus| McpServerView {
        name: name.into(),
        endpoint: format!("stdio: {name}-server"),
        status,
        trusted: false,
        tools: vec![("echo".into(), "Echoes".into(), true, "sensitive".into()), ("add".into(), "Adds".into(), true, "sensitive".into())],
        stderr: vec!["listening on stdio".into()],
        protocol_version: "2025-11-25".into(),
        server_name: "everything 2.0".into(),
        connect_millis: Some(300),
        resources: Vec::new(),
        prompts: Vec::new(),
        signed_in: false,
    };
    let broken = McpServerView { tools: Vec::new(), stderr: vec!["Traceback: ImportError".into()], ..view("broken", McpServerStatus::Error("no handshake within 30 s (startup timeout)".into())) };
    far.events.send(AppEvent::Mcp(McpEvent::McpServers(vec![broken, view("everything", McpServerStatus::Running)]))).unwrap();
    open_settings(&mut harness, "Integrations");
    harness.run();
    harness.get_by_label_contains("no handshake within 30 s");
    harness.get_by_label_contains("2 tools · 2025-11-25");
    harness.get_by_label("Start").click();
    harness.run();
    harness.get_all_by_label("Test").nth(1).unwrap().click();
    harness.run();
    harness.get_by_label("Tools of everything (2)").click();
    harness.run();
    harness.get_by_label("echo").click();
    harness.run();
    let sent: Vec<McpCommand> = far.mcp.try_iter().collect();
    assert!(matches!(&sent[0], McpCommand::Connect(name) if name == "broken"));
    assert!(matches!(&sent[1], McpCommand::Test(name) if name == "everything"));
    match &sent[2] {
        McpCommand::Edit(McpEdit::SetTool { server, tool, enabled, .. }) => assert_eq!((server.as_str(), tool.as_str(), *enabled), ("everything", "echo", false)),
        _ => panic!("a tool switch is an edit"),
    }
    assert_eq!(sent.len(), 3);
}

/// OAuth in Settings → Integrations: a server that wants a sign-in says so
/// with Sign in; while the browser is out, its link (to open or copy) and
/// Stop; signed in, Sign out. Each reaches the mcp worker.
#[test]
fn an_http_server_that_wants_a_sign_in_offers_sign_in_its_link_and_sign_out() {
    use cowork::mcp::events::{McpServerStatus, McpServerView};
    use cowork::mcp::worker::McpCommand;
    let (mut harness, far) = app_with(AppOptions::default(), 3000.0);
    let tracker = |status: McpServerStatus, signed_in: bool| McpServerView {
        name: "tracker".into(),
        endpoint: "http: https://tracker.example/mcp".into(),
        status,
        signed_in,
        ..McpServerView::default()
    };
    far.events.send(AppEvent::Mcp(McpEvent::McpServers(vec![tracker(McpServerStatus::NeedsSignIn("https://tracker.example/mcp asks you to sign in (OAuth)".into()), false)]))).unwrap();
    open_settings(&mut harness, "Integrations");
    harness.run();
    harness.get_by_label_contains("asks you to sign in");
    assert!(harness.query_by_label("Sign out").is_none());
    harness.get_by_label("Sign in").click();
    harness.run();
    assert!(matches!(far.mcp.try_iter().collect::<Vec<_>>().as_slice(), [McpCommand::SignIn(name)] if name == "tracker"));

    far.events.send(AppEvent::Mcp(McpEvent::McpServers(vec![tracker(McpServerStatus::SigningIn("https://auth.example/authorize?state=abc".into()), false)]))).unwrap();
    harness.run();
    harness.get_by_label_contains("waiting for you to sign in in the browser");
    harness.get_by_label("Open the sign-in page");
    assert!(harness.query_by_label("Sign in").is_none(), "no second sign-in while one is under way");
    harness.get_by_label("Stop").click();
    harness.run();
    assert!(matches!(far.mcp.try_iter().collect::<Vec<_>>().as_slice(), [McpCommand::Disconnect(name)] if name == "tracker"));

    far.events.send(AppEvent::Mcp(McpEvent::McpServers(vec![tracker(McpServerStatus::Running, true)]))).unwrap();
    harness.run();
    harness.get_by_label("Sign out").click();
    harness.run();
    assert!(matches!(far.mcp.try_iter().collect::<Vec<_>>().as_slice(), [McpCommand::SignOut(name)] if name == "tracker"));
}

#[test]
fn an_assistant_asking_to_read_memory_is_asked_about_in_the_chat_and_listed_in_settings() {
    use cowork::agent::store::ClientStatus;
    use cowork::mcp::events::McpClientView;
    let (mut harness, far) = app_with(AppOptions::default(), 3000.0);
    let client = |name: &str, status: &str| McpClientView {
        name: name.into(),
        version: "1.0".into(),
        transport: "stdio".into(),
        status: status.into(),
        asked_at_millis: 1_000,
        last_seen_millis: 2_000,
    };
    far.events.send(AppEvent::Mcp(McpEvent::McpClients(vec![client("Claude Desktop", "pending"), client("zed", "allowed")]))).unwrap();
    harness.run();
    harness.get_by_label_contains("Claude Desktop wants to read cowork's memory");
    assert!(harness.query_by_label_contains("zed wants").is_none(), "only a pending client is asked about");
    harness.get_by_label("Allow Claude Desktop").click();
    harness.run();
    // What the app asked the store to write, written to a database of its own.
    let db = rusqlite::Connection::open_in_memory().unwrap();
    cowork::store::migrate(&db).unwrap();
    for command in far.store.try_iter() {
        command.run_on(&db).unwrap();
    }
    let clients = cowork::agent::store::mcp_clients(&db).unwrap();
    let by: Option<String> = db.query_row("SELECT decided_by FROM mcp_clients WHERE name = 'Claude Desktop'", [], |r| r.get(0)).unwrap();
    let allowed = clients.iter().any(|c| c.name == "Claude Desktop" && c.status == ClientStatus::Allowed) && by.as_deref() == Some("user");
    assert!(allowed, "Allow is written through the store: {clients:?}");
    assert!(harness.query_by_label_contains("Claude Desktop wants").is_none(), "the card goes at once");

    // Settings → Integrations lists every client; Deny revokes an allowed one.
    open_settings(&mut harness, "Integrations");
    harness.run();
    harness.get_by_label_contains("Assistants reading cowork's memory");
    harness.get_all_by_label("Deny").next().unwrap().click();
    harness.run();
    for command in far.store.try_iter() {
        command.run_on(&db).unwrap();
    }
    let denied = cowork::agent::store::mcp_clients(&db).unwrap().iter().any(|c| c.status == ClientStatus::Denied);
    assert!(denied);
}

/// A `width` × `height` PNG, as a tool would return it.
fn png(width: u32, height: u32) -> Vec<u8> {
    let mut out = Vec::new();
    image::DynamicImage::ImageRgba8(image::RgbaImage::from_pixel(width, height, image::Rgba([0, 120, 200, 255])))
        .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

/// An MCP server's request for input is a form in the chat: Send checks it
/// first (an empty required field is named, nothing goes), then the answer
/// reaches the mcp worker; Decline sends no content.
#[test]
fn a_servers_request_for_input_is_a_form_that_is_checked_before_it_is_sent() {
    use cowork::mcp::elicit::{Answer, Form};
    use cowork::mcp::worker::McpCommand;
    let (mut harness, far) = app();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Your name"},
            "seats": {"type": "integer", "title": "Seats", "minimum": 1, "maximum": 4, "default": 2},
            "window": {"type": "boolean", "title": "Window seat"}
        },
        "required": ["name"]
    });
    let form = Form::parse(&schema).unwrap();
    for id in [5, 6] {
        let request = cowork::mcp::events::ElicitationView { id, server: "trains".into(), message: format!("Book the 9:12? ({id})"), form: form.clone() };
        far.events.send(AppEvent::Mcp(McpEvent::Elicitation(Box::new(request)))).unwrap();
    }
    harness.run();
    harness.get_by_label("Book the 9:12? (5)");
    // Send with the name empty: the form says why, and nothing is sent.
    harness.get_all_by_label("Send").next().unwrap().click();
    harness.run();
    harness.get_by_label("Your name: required");
    assert!(far.mcp.try_recv().is_err());
    harness.get_all_by_label("Your name *").next().unwrap().click();
    harness.run();
    harness.get_all_by_label("Your name *").next().unwrap().type_text("Ada");
    harness.get_all_by_label("Window seat").next().unwrap().click();
    harness.run();
    harness.get_all_by_label("Send").next().unwrap().click();
    harness.run();
    match far.mcp.try_recv().expect("the answer went to the mcp worker") {
        McpCommand::Elicited { id, answer } => assert_eq!((id, answer), (5, Answer::Accept(serde_json::json!({"name": "Ada", "seats": 2, "window": true})))),
        _ => panic!("another command"),
    }
    // The answered form left; the second one is declined.
    assert!(harness.query_by_label("Book the 9:12? (5)").is_none());
    harness.get_by_label("Decline").click();
    harness.run();
    match far.mcp.try_recv().expect("the decline went to the mcp worker") {
        McpCommand::Elicited { id, answer } => assert_eq!((id, answer), (6, Answer::Decline)),
        _ => panic!("another command"),
    }
    assert!(harness.query_by_label("Book the 9:12? (6)").is_none());
}

/// The chat's MCP parts: "Attach…" lists a running server's resources and
/// asks the mcp worker to read one; the attached resource shows as a chip,
/// goes with the next message and can be removed. `/` offers the servers'
/// prompts; one with a missing argument says so, a complete one goes to the
/// worker, and the filled-in prompt lands in the input to edit.
#[test]
fn resources_attach_to_a_message_and_prompts_are_offered_as_slash_names() {
    use cowork::records::Attachment;
    use cowork::mcp::events::{McpPrompt, McpResource, McpServerStatus, McpServerView};
    use cowork::mcp::worker::McpCommand;
    let (mut harness, far) = app();
    let server = McpServerView {
        name: "docs".into(),
        endpoint: "stdio: docs".into(),
        status: McpServerStatus::Running,
        resources: vec![McpResource { uri: "demo://guide.md".into(), name: "guide.md".into(), mime: "text/markdown".into(), description: "The guide".into() }],
        prompts: vec![McpPrompt { name: "weather".into(), description: "Asks about the weather".into(), arguments: vec![("city".into(), true), ("state".into(), false)] }],
        ..Default::default()
    };
    far.events.send(AppEvent::Mcp(McpEvent::McpServers(vec![server]))).unwrap();
    harness.run();
    harness.get_by_label("Attach…").click();
    harness.run();
    harness.get_by_label("guide.md").click();
    harness.run();
    match far.mcp.try_recv().expect("the read went to the mcp worker") {
        McpCommand::ReadResource { server, uri, .. } => assert_eq!((server.as_str(), uri.as_str()), ("docs", "demo://guide.md")),
        _ => panic!("another command"),
    }
    let attachment = Attachment { server: "docs".into(), uri: "demo://guide.md".into(), name: "guide.md".into(), text: "# Guide".into(), picture: None };
    far.events.send(AppEvent::Mcp(McpEvent::ResourceAttached(Ok(attachment.clone())))).unwrap();
    harness.run();
    harness.get_by_label("guide.md · docs · 7 B");
    let request = send_message(&mut harness, &far, "summarise it");
    assert_eq!(request.attachments, vec![attachment.clone()]);
    assert!(harness.query_by_label("guide.md · docs · 7 B").is_none(), "sent with the message");
    far.events.send(AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: request.answer_id, status: cowork::records::MessageStatus::Done, error: None, stats: Default::default() })).unwrap();
    far.events.send(AppEvent::Mcp(McpEvent::ResourceAttached(Ok(attachment)))).unwrap();
    harness.run();
    harness.get_by_label("Remove guide.md").click();
    harness.run();
    assert!(harness.query_by_label("guide.md · docs · 7 B").is_none(), "removed");

    // `/we` offers the prompt; a click fills in its name.
    type_message(&mut harness, "/we");
    harness.run();
    harness.get_by_label("/weather city=… [state=…] — Asks about the weather (docs)").click();
    harness.run();
    harness.get_by_label("Send").click();
    harness.run();
    harness.get_by_label("/weather needs city");
    assert!(far.mcp.try_recv().is_err() && far.agent.try_recv().is_err(), "nothing was sent");
    type_message(&mut harness, "Lyon");
    harness.run();
    harness.get_by_label("Send").click();
    harness.run();
    match far.mcp.try_recv().expect("the prompt went to the mcp worker") {
        McpCommand::GetPrompt { server, name, arguments } => {
            assert_eq!((server.as_str(), name.as_str(), arguments.get("city").map(String::as_str)), ("docs", "weather", Some("Lyon")))
        }
        _ => panic!("another command"),
    }
    far.events.send(AppEvent::Mcp(McpEvent::PromptFilled(Ok("What's the weather in Lyon?".into())))).unwrap();
    harness.run();
    harness.run();
    let input = harness.get_by_role_and_label(Role::MultilineTextInput, "Message");
    assert_eq!(input.value().as_deref(), Some("What's the weather in Lyon?"));
}

/// The built-in browser's actions under an answer: one line each, with the
/// page title its result names, or what became of it.
#[test]
fn the_browser_action_log_shows_each_action_with_its_page_title() {
    let (mut harness, far) = app();
    let request = send_message(&mut harness, &far, "open the shop");
    let call = |call_id: i64, tool: &str, arguments: serde_json::Value, status: cowork::agent::events::CallStatus, output: &str| cowork::agent::events::ToolCallView {
        operation_id: 1,
        answer_id: request.answer_id,
        call_id,
        step: 1,
        tool: format!("mcp__browser__{tool}"),
        arguments,
        risk: "sensitive".into(),
        status,
        why: String::new(),
        decided_by: Some("user".into()),
        output: Some(output.into()),
        is_error: false,
        duration_millis: Some(40),
        expires_at_millis: None,
        suggested_rule: None,
        images: Vec::new(),
    };
    use cowork::agent::events::CallStatus;
    let open = call(81, "browser_navigate", serde_json::json!({"url": "http://127.0.0.1:8000/"}), CallStatus::Done, "### Page\n- Page URL: http://127.0.0.1:8000/\n- Page Title: Loopback Shop\n");
    let submit = call(82, "browser_type", serde_json::json!({"element": "Query", "target": "e3", "text": "shoes", "submit": true}), CallStatus::Denied, "Not run: the user denied it");
    for view in [open, submit] {
        far.events.send(AppEvent::Agent(AgentEvent::ToolCall(Box::new(view)))).unwrap();
    }
    harness.run();
    harness.get_by_label("navigate http://127.0.0.1:8000/ — Loopback Shop");
    harness.get_by_label("type Query (denied)");
}

#[test]
fn the_microphone_button_records_into_the_chat_and_esc_cancels() {
    use cowork::audio::transcribe::{Heard, Transcript};
    use cowork::audio::worker::AudioCommand;
    use cowork::audio::events::{VoiceEvent, VoiceTarget};
    let (mut harness, far) = app();
    harness.get_by_label("Talk").click();
    harness.run();
    assert!(matches!(far.audio.try_recv(), Ok(AudioCommand::Start { target: VoiceTarget::Chat, .. })));
    far.events.send(AppEvent::Voice(VoiceEvent::Opened { target: VoiceTarget::Chat, device: "microphone".into() })).unwrap();
    far.events.send(AppEvent::Voice(VoiceEvent::Level(0.7))).unwrap();
    harness.run();
    // The indicator: the status bar says the microphone is on, the button says Done, the meter shows.
    harness.get_by_label_contains("Microphone on: talking into the chat");
    harness.get_by_label("Listening");
    harness.key_press(egui::Key::Escape);
    harness.run();
    assert!(matches!(far.audio.try_recv(), Ok(AudioCommand::Cancel)), "Esc cancels the recording");
    far.events.send(AppEvent::Voice(VoiceEvent::Closed { cancelled: true })).unwrap();
    harness.run();
    assert!(harness.query_by_label_contains("Microphone on").is_none(), "the indicator goes with the microphone");

    // Talk, Done: the transcript lands in the input, to edit, and is not sent.
    // (Half a second first: two clicks on one button within 0.3 s are a double click.)
    harness.run_steps(40);
    harness.get_by_label("Talk").click();
    harness.run();
    far.events.send(AppEvent::Voice(VoiceEvent::Opened { target: VoiceTarget::Chat, device: "microphone".into() })).unwrap();
    harness.run_steps(40);
    harness.get_by_label("Done").click();
    harness.run();
    let sent: Vec<AudioCommand> = far.audio.try_iter().collect();
    assert!(matches!(sent.as_slice(), [AudioCommand::Start { .. }, AudioCommand::Stop { .. }]), "{sent:?}");
    let transcript = Transcript { text: "What did I do this morning".into(), confidence: 0.9, segments: Vec::new(), speech_millis: 1500, audio_ctx: 384, elapsed_millis: 200, language: "en".into() };
    far.events.send(AppEvent::Voice(VoiceEvent::Closed { cancelled: false })).unwrap();
    far.events.send(AppEvent::Voice(VoiceEvent::Heard { target: VoiceTarget::Chat, heard: Heard::Speech(transcript), release_to_text_millis: 300 })).unwrap();
    harness.run();
    harness.run();
    let input = harness.get_by_role_and_label(Role::MultilineTextInput, "Message");
    assert_eq!(input.value().as_deref(), Some("What did I do this morning"));
    assert!(far.agent.try_recv().is_err(), "nothing was sent");
    // Silence says so instead of inventing text.
    far.events.send(AppEvent::Voice(VoiceEvent::Heard { target: VoiceTarget::Chat, heard: Heard::Nothing(cowork::audio::transcribe::Silence::NoSpeech), release_to_text_millis: 50 })).unwrap();
    harness.run();
    harness.get_by_label("heard nothing (no speech)");
}

/// Settings → Voice lists the microphones the audio worker found (monitors
/// left out) and saves the one chosen; Settings → Models installs the
/// optional speech model through the models worker, lists it as a speech
/// model once its files are there, and Remove takes it back (a voice setting
/// that named it returns to the default).
#[test]
fn settings_list_microphones_and_install_choose_and_remove_an_optional_speech_model() {
    use cowork::audio::mic::InputDevice;
    use cowork::audio::worker::AudioCommand;
    use cowork::audio::events::VoiceEvent;
    use cowork::models::worker::ModelsCommand;
    let models_dir = tempfile::tempdir().unwrap();
    let manifest = cowork::models::Manifest::bundled().unwrap();
    let views = cowork::ui::settings::model_views(&manifest, models_dir.path());
    let options = AppOptions { models_dir: models_dir.path().to_owned(), ..AppOptions::default() };
    let (mut harness, far) = app_with_models(options, 6000.0, views);
    open_settings(&mut harness, "Voice");
    harness.run();
    assert!(far.audio.try_iter().any(|c| matches!(c, AudioCommand::ListDevices)), "opening Settings asks for the microphones");
    let device = |name: &str, description: &str, monitor: bool, default: bool| InputDevice { name: name.into(), description: description.into(), monitor, default };
    far.events
        .send(AppEvent::Voice(VoiceEvent::Devices(Ok(vec![
            device("alsa_input.usb-headset", "USB Headset", false, false),
            device("alsa_input.pci-analog", "Built-in Microphone", false, true),
            device("alsa_output.pci-analog.monitor", "Monitor of Built-in Speakers", true, false),
        ]))))
        .unwrap();
    harness.run();
    let _ = saved_settings(&far);
    harness.get_by_role_and_label(Role::ComboBox, "Microphone").click();
    harness.run();
    harness.get_by_label("Default (Built-in Microphone)");
    assert!(harness.query_by_label("Monitor of Built-in Speakers").is_none(), "a monitor is not a microphone");
    harness.get_by_label("USB Headset").click();
    harness.run();
    assert_eq!(saved_settings(&far), vec![("voice.device".to_owned(), "alsa_input.usb-headset".to_owned())]);
    harness.get_by_label("Refresh").click();
    harness.run();
    assert!(far.audio.try_iter().any(|c| matches!(c, AudioCommand::ListDevices)));

    // The optional model: Install asks the models worker, and the button waits.
    // Each chat model says how it did on the evaluations, and how fast.
    open_settings(&mut harness, "Brains & network");
    let evaluated: Vec<&str> = manifest.models.iter().map(|m| m.evaluation.as_str()).filter(|e| !e.is_empty()).collect();
    assert!(evaluated.len() >= 3, "every chat model of the manifest has its line");
    for line in evaluated {
        harness.get_by_label(line);
    }
    // And how fast it ran here, as the llm worker measured its answers (model-speed.json).
    let qwen = manifest.model("qwen2.5-coder-0.5b-instruct").unwrap();
    let file = std::path::Path::new(qwen.primary_path()).file_name().unwrap().to_string_lossy().into_owned();
    let measured = cowork::llm::speed::Measured { samples: 7, first_token_ms: 840, prompt_tokens: 650, tokens_per_sec: 21.4 };
    far.events.send(AppEvent::LocalModel(LocalModelEvent::ModelSpeed { model: file, measured })).unwrap();
    harness.run();
    harness.get_by_label("On this machine: first token in 0.8 s (prompts of about 650 tokens), 21 tokens/s; median of 7 answers.");
    let optional = manifest.models.iter().filter(|m| m.optional).count();
    assert_eq!(harness.get_all_by_label("not installed (optional)").count(), optional);
    harness.get_by_label("Install whisper-base").click();
    harness.run();
    assert!(matches!(far.models.try_recv(), Ok(ModelsCommand::Install(name)) if name == "whisper-base"));
    assert!(harness.query_by_label("Install whisper-base").is_none());
    harness.get_by_label("Installing…");
    // The worker made its file (a file of the right size passes the size check Settings runs).
    let base = manifest.model("whisper-base").unwrap();
    let file = models_dir.path().join(base.primary_path());
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::File::create(&file).unwrap().set_len(base.primary_size_and_sha().0).unwrap();
    far.events.send(AppEvent::Models(ModelsEvent::ModelsChanged { name: "whisper-base".into(), outcome: Ok("whisper-base is installed and verified".into()) })).unwrap();
    harness.run();
    harness.get_by_label("whisper-base is installed and verified");
    harness.get_by_label("Remove whisper-base");
    // Now a speech model to choose.
    open_settings(&mut harness, "Voice");
    harness.get_by_role_and_label(Role::ComboBox, "Speech model").click();
    harness.run();
    harness.get_by_label("whisper-tiny-en (not installed)");
    harness.get_by_role_and_label(Role::Button, "whisper-base").click();
    harness.run();
    assert_eq!(saved_settings(&far), vec![("voice.model".to_owned(), "whisper-base".to_owned())]);
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "voice.model".into(), value: "whisper-base".into() })).unwrap();
    harness.run();
    open_settings(&mut harness, "Brains & network");
    harness.get_by_label("Remove whisper-base").click();
    harness.run();
    assert!(matches!(far.models.try_recv(), Ok(ModelsCommand::Remove(name)) if name == "whisper-base"));
    assert_eq!(saved_settings(&far), vec![("voice.model".to_owned(), String::new())], "voice goes back to the default model");
}

/// Dictation on: the hotkey records for the focused app without opening the
/// quick prompt, and what was heard goes to the audio worker to type, not
/// into an input.
#[test]
fn dictation_sends_the_words_to_the_focused_app_instead_of_an_input() {
    use cowork::audio::transcribe::{Heard, Transcript};
    use cowork::audio::worker::AudioCommand;
    use cowork::audio::events::{VoiceEvent, VoiceTarget};
    let (mut harness, far) = app_with(AppOptions::default(), 6000.0);
    open_settings(&mut harness, "Voice");
    harness.run();
    let _ = saved_settings(&far);
    harness.get_by_label("Dictation: the hotkey types into the app you are in").click();
    harness.run();
    assert_eq!(saved_settings(&far), vec![("voice.dictation".to_owned(), "true".to_owned())]);
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "voice.dictation".into(), value: "true".into() })).unwrap();
    harness.run();
    let _ = far.audio.try_iter().count();
    far.events.send(AppEvent::Desktop(DesktopEvent::VoiceHotkey { pressed: true })).unwrap();
    harness.run();
    assert!(matches!(far.audio.try_recv(), Ok(AudioCommand::Start { target: VoiceTarget::Dictation, .. })));
    assert!(!harness.state().state.quick_prompt_open, "the focused app keeps the focus");
    far.events.send(AppEvent::Voice(VoiceEvent::Opened { target: VoiceTarget::Dictation, device: "microphone".into() })).unwrap();
    harness.run();
    harness.get_by_label_contains("Microphone on: dictating into the focused app");
    // Held, not tapped (a tap would toggle recording on).
    std::thread::sleep(std::time::Duration::from_millis(600));
    far.events.send(AppEvent::Desktop(DesktopEvent::VoiceHotkey { pressed: false })).unwrap();
    harness.run();
    assert!(matches!(far.audio.try_recv(), Ok(AudioCommand::Stop { .. })));
    let transcript = Transcript { text: "See you at noon".into(), confidence: 0.9, segments: Vec::new(), speech_millis: 1200, audio_ctx: 384, elapsed_millis: 150, language: "en".into() };
    far.events.send(AppEvent::Voice(VoiceEvent::Closed { cancelled: false })).unwrap();
    far.events.send(AppEvent::Voice(VoiceEvent::Heard { target: VoiceTarget::Dictation, heard: Heard::Speech(transcript), release_to_text_millis: 200 })).unwrap();
    harness.run();
    assert!(matches!(far.audio.try_recv(), Ok(AudioCommand::Dictate(text)) if text == "See you at noon"));
    assert!(!harness.state().state.quick_prompt_open);
    assert!(far.agent.try_iter().all(|c| !matches!(c, AgentCommand::Chat(_))), "nothing was sent to cowork");
}

/// The real speech and audio workers with their events into the app
/// (dictation types into `display`); the test is the wire from the app to
/// the audio worker (`forward_audio`).
fn real_voice_workers(
    far: &Far,
    display: Option<String>,
) -> (cowork::runtime::WorkerHandle<cowork::audio::worker::SpeechCommand>, cowork::runtime::WorkerHandle<cowork::audio::worker::AudioCommand>) {
    use cowork::audio::worker::{SpeechConfig, spawn_audio, spawn_speech};
    let sink = cowork::runtime::EventSink::<AppEvent>::new(far.events.clone(), || {}).narrow();
    let policy = cowork::runtime::RestartPolicy::default();
    let speech = spawn_speech(cowork::models::Manifest::bundled().unwrap(), super::support::models_dir(), SpeechConfig::default(), sink.clone(), policy).unwrap();
    let audio = spawn_audio(speech.commands.clone(), cowork::audio::dictate::Typing::X11(display), sink, policy).unwrap();
    (speech, audio)
}

/// A few frames (steps, not run(): the spinner repaints while Whisper works),
/// then what the app asked of the audio worker goes to the real one.
fn forward_audio(harness: &mut Harness<'static, CoworkApp>, far: &Far, audio: &Sender<cowork::audio::worker::AudioCommand>) {
    harness.run_steps(3);
    for command in far.audio.try_iter() {
        audio.send(command).unwrap();
    }
}

/// Presses the voice hotkey and waits for the microphone's first sample.
fn press_until_the_microphone_opens(harness: &mut Harness<'static, CoworkApp>, far: &Far, audio: &Sender<cowork::audio::worker::AudioCommand>) {
    far.events.send(AppEvent::Desktop(DesktopEvent::VoiceHotkey { pressed: true })).unwrap();
    forward_audio(harness, far, audio);
    let opened = super::support::eventually(std::time::Duration::from_secs(10), || {
        harness.step();
        harness.state().state.voice.first_sample_millis.is_some()
    });
    assert!(opened, "the microphone did not open: {:?}", harness.state().state.voice);
}

#[test]
fn push_to_talk_fills_the_quick_prompt_from_a_real_microphone() {
    use super::support::{PulseAudio, PulseSetup, espeak, require, whisper_model, whisper_turn};
    if !require(whisper_model().is_file(), "the Whisper model") {
        return;
    }
    let _turn = whisper_turn();
    let Some(pulse) = PulseAudio::start(PulseSetup::Devices) else { return };
    let (mut harness, far) = app();
    let (mut speech, mut audio) = real_voice_workers(&far, None);
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("ask.wav");
    espeak("Summarize the pull request about the billing service.", &wav);

    // Hold the hotkey: the quick prompt opens and the microphone with it.
    press_until_the_microphone_opens(&mut harness, &far, &audio.commands);
    assert!(harness.state().state.quick_prompt_open);
    pulse.play("mic_in", &wav);
    far.events.send(AppEvent::Desktop(DesktopEvent::VoiceHotkey { pressed: false })).unwrap();
    forward_audio(&mut harness, &far, &audio.commands);
    let filled = super::support::eventually(std::time::Duration::from_secs(60), || {
        harness.step();
        harness.get_by_label("Quick prompt").value().is_some_and(|v| !v.is_empty())
    });
    assert!(filled, "no transcript arrived: {:?}", harness.state().state.voice);
    let text = harness.get_by_label("Quick prompt").value().unwrap().to_lowercase();
    // tiny.en hears espeak's "pull request about" as anything from "public west" on; the rest is steady.
    assert!(text.contains("summar") && text.contains("billing service"), "{text}");
    assert!(harness.state().state.quick_prompt_open, "the words wait in the quick prompt, to edit");
    assert!(far.agent.try_iter().all(|c| !matches!(c, AgentCommand::Chat(_))), "nothing was sent");
    audio.shutdown(cowork::audio::worker::AudioCommand::Shutdown, std::time::Duration::from_secs(5));
    speech.shutdown(cowork::audio::worker::SpeechCommand::Shutdown, std::time::Duration::from_secs(5));
}

/// Dictation end to end: the hotkey held with dictation on, a sentence into
/// a real PulseAudio microphone, the real audio and speech workers, and the
/// words typed into a real GTK app that has the focus under Xvfb.
#[test]
fn dictation_types_a_spoken_sentence_into_the_focused_gtk_app() {
    use super::support::{PulseAudio, PulseSetup, XSession, espeak, require, whisper_model, whisper_turn};
    use super::voice::{GTK_ENTRY, entry_reads, have_gtk};
    if !require(whisper_model().is_file() && XSession::available() && have_gtk(), "the Whisper model, Xvfb and python3-gi with GTK 3") {
        return;
    }
    let _turn = whisper_turn();
    let Some(pulse) = PulseAudio::start(PulseSetup::Devices) else { return };
    let mut x = XSession::start();
    let lines = x.spawn_reading("/usr/bin/python3", &["-c", GTK_ENTRY]);
    assert_eq!(lines.recv_timeout(std::time::Duration::from_secs(20)).as_deref(), Ok("READY"));
    let window = x.wait_window("^Dictation target$", std::time::Duration::from_secs(20));
    x.activate(&window);

    let (mut harness, far) = app();
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: "voice.dictation".into(), value: "true".into() })).unwrap();
    harness.run();
    let (mut speech, mut audio) = real_voice_workers(&far, Some(x.display.clone()));
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("dictate.wav");
    espeak("Remind me to call the dentist on Friday morning.", &wav);
    press_until_the_microphone_opens(&mut harness, &far, &audio.commands);
    assert!(!harness.state().state.quick_prompt_open, "dictation leaves the focus where it is");
    pulse.play("mic_in", &wav);
    far.events.send(AppEvent::Desktop(DesktopEvent::VoiceHotkey { pressed: false })).unwrap();
    let typed = super::support::eventually(std::time::Duration::from_secs(60), || {
        forward_audio(&mut harness, &far, &audio.commands);
        harness.state().state.voice.status.as_deref().is_some_and(|s| s.starts_with("typed ") || s.contains("dictation"))
    });
    assert!(typed, "nothing was typed: {:?}", harness.state().state.voice);
    let status = harness.state().state.voice.status.clone().unwrap();
    assert!(status.starts_with("typed "), "{status}");
    let (arrived, seen) = entry_reads(&lines, |text| text.to_lowercase().contains("dentist") && text.to_lowercase().contains("friday"), std::time::Duration::from_secs(10));
    assert!(arrived, "the app did not get the words: {seen:?}");
    assert!(harness.state().state.voice.fill.is_none(), "nothing waits for cowork's own inputs");
    audio.shutdown(cowork::audio::worker::AudioCommand::Shutdown, std::time::Duration::from_secs(5));
    speech.shutdown(cowork::audio::worker::SpeechCommand::Shutdown, std::time::Duration::from_secs(5));
    drop(pulse);
}

#[test]
fn listen_mode_asks_its_own_consent_and_the_status_bar_says_when_it_listens() {
    use cowork::audio::listen::ListenCommand;
    use cowork::audio::events::{ListenStatus, VoiceEvent};
    let (mut harness, far) = app_with(AppOptions::default(), 6000.0);
    open_settings(&mut harness, "Voice");
    harness.run();
    let _ = saved_settings(&far);
    harness.get_by_label_contains("Listen mode transcribes what is said near this computer");
    harness.get_by_label("Turn on listen mode…").click();
    harness.run();
    // The microphone is ticked, system audio needs its own tick.
    harness.get_by_label("What the computer plays: what others say in calls").click();
    harness.run();
    harness.get_by_label("I agree, start listening").click();
    harness.run();
    let saved = saved_settings(&far);
    for (key, value) in [("listen.mic", "true"), ("listen.system", "true"), ("listen.consented", "true"), ("listen.enabled", "true")] {
        assert!(saved.contains(&(key.to_owned(), value.to_owned())), "{key} not saved: {saved:?}");
    }
    let plans: Vec<_> = far.listen.try_iter().filter_map(|c| match c {
        ListenCommand::Configure(plan) => Some(plan),
        _ => None,
    }).collect();
    let last = plans.last().expect("the listen worker heard the answer");
    assert!(last.listen.active() && last.listen.system, "{last:?}");

    // Listening shows in the status bar; the switches replace the question.
    let status = ListenStatus { mic: Some("alsa_input.usb".into()), system: Some("speakers.monitor".into()), stored: 3, ..Default::default() };
    far.events.send(AppEvent::Voice(VoiceEvent::Listening(status))).unwrap();
    harness.run();
    harness.get_by_label("• Listening: microphone and system audio");
    harness.get_by_label("Listening; 3 stored this session");
    assert!(harness.state().state.mic_open(), "the tray's microphone indicator follows listen mode");
    // Pause holds it, and says so.
    far.events.send(AppEvent::Voice(VoiceEvent::Listening(ListenStatus { held: Some("capture is paused".into()), stored: 3, ..Default::default() }))).unwrap();
    harness.run();
    harness.get_by_label("Not listening: capture is paused");
    assert!(harness.query_by_label_contains("• Listening").is_none());
    // The pause switch (the hotkey and the tray do the same) reaches listen mode.
    let _ = far.listen.try_iter().count();
    open_settings(&mut harness, "What cowork records & privacy");
    harness.get_by_label_contains("Pause all capture").click();
    harness.run();
    let paused = far.listen.try_iter().any(|c| matches!(c, ListenCommand::Configure(plan) if plan.rules.paused));
    assert!(paused, "listen mode did not hear the pause");
    open_settings(&mut harness, "Voice");
    harness.get_by_label("Withdraw consent").click();
    harness.run();
    let saved = saved_settings(&far);
    assert!(saved.contains(&("listen.consented".to_owned(), "false".to_owned())), "{saved:?}");
    harness.get_by_label("Turn on listen mode…");
}

#[test]
fn the_apps_panel_installs_with_a_disclosure_and_draws_an_apps_view_whose_host_actions_ask() {
    use cowork::apps::worker::{Inspection, OpenApp};
    use cowork::apps::{AppsCommand, AppsView, Capability, Disclosure, Manifest};
    let (mut harness, far) = app_with(AppOptions::default(), 1600.0);
    let manifest = Manifest::parse("name = \"Standup\"\ndescription = \"Drafts your standup\"\ncategory = \"productivity\"\nversion = \"0.1.0\"\ncomponent = \"app.wasm\"\ndata_use = \"Reads yesterday\"\nnetwork = \"offline\"\n").unwrap();
    let imports = vec!["cowork:app/context@0.1.0".to_owned(), "cowork:app/ai@0.1.0".to_owned(), "cowork:app/http@0.1.0".to_owned()];
    let disclosure = Disclosure::new(&manifest, imports.clone());
    let inspection = Inspection { path: "/tmp/standup".into(), manifest: manifest.clone(), disclosure, replaces: None, new_imports: Vec::new() };
    let installed = focus_today("Time per app today");
    far.events.send(AppEvent::Apps(Box::new(AppsView { installed: vec![installed], inspection: Some(Ok(inspection)), open: Vec::new(), message: None }))).unwrap();
    harness.get_by_label("Apps").click();
    harness.run();
    assert!(matches!(far.apps.try_recv(), Ok(AppsCommand::List)), "opening the tab lists the apps again");
    harness.get_by_label("Can read your current window and your activity (apps, window titles, times)");
    harness.get_by_label_contains("its code can fetch web pages, but its manifest says it works offline");
    harness.get_by_label("The app says: Reads yesterday");
    harness.get_by_label_contains("Allow it to ask a model").click();
    harness.run();
    harness.get_by_label("Install").click();
    harness.run();
    match far.apps.try_recv() {
        Ok(AppsCommand::Install { granted, .. }) => assert_eq!(granted, [Capability::Ai], "only what was ticked"),
        other => panic!("{other:?}"),
    }

    harness.get_by_label("Open").click();
    harness.run();
    assert!(matches!(far.apps.try_recv(), Ok(AppsCommand::Open { app_id }) if app_id == "focus-today"));
    let json = r#"[{"type":"stat","label":"Focused today","value":"3 h 12 min"},
        {"type":"chart","kind":"bar","title":"Time per app today","unit":"min","bars":[{"label":"Code","value":120},{"label":"Firefox","value":72}]},
        {"type":"list","items":[{"title":"Code","accessory":"2 h","actions":[{"title":"Ask about it","host":"chat","text":"What did I do in Code?"},{"title":"Copy","host":"copy","text":"Code 2 h"}]}]},
        {"type":"form","id":"note","fields":[{"id":"text","label":"Note","kind":"text","value":"draft"}],"submit":"Save"},
        {"type":"hologram","fallback":"A 3-D view of your day"}]"#;
    let open = OpenApp { app_id: "focus-today".into(), name: "Focus today".into(), json: json.into(), view: cowork::apps::view::View::parse(json), error: None, busy: false, millis: 12, memory_bytes: 9 << 20 };
    far.events.send(AppEvent::Apps(Box::new(AppsView { open: vec![open], ..AppsView::default() }))).unwrap();
    harness.run();
    harness.get_by_label("3 h 12 min");
    harness.get_by_label("Time per app today");
    harness.get_by_label("A 3-D view of your day");
    // Copy asks first.
    harness.get_by_label("Copy").click();
    harness.run();
    harness.get_by_label_contains("Focus today wants to copy this to the clipboard");
    harness.get_by_label("Cancel").click();
    harness.run();
    // A form's submit goes to the app's handle with the edited values.
    harness.get_by_role_and_label(Role::TextInput, "Note").focus();
    harness.run();
    harness.get_by_role_and_label(Role::TextInput, "Note").type_text(" two");
    harness.run();
    harness.get_by_label("Save").click();
    harness.run();
    match far.apps.try_recv() {
        Ok(AppsCommand::Act { app_id, message }) => {
            assert_eq!(app_id, "focus-today");
            let message: serde_json::Value = serde_json::from_str(&message).unwrap();
            assert_eq!(message, serde_json::json!({"type": "submit", "form": "note", "values": {"text": "draft two"}}));
        }
        other => panic!("{other:?}"),
    }
    // "Ask about it" opens a new chat with the text to send.
    harness.get_by_label("Ask about it").click();
    harness.run();
    assert_eq!(harness.state().state.tab(), Tab::Chat);
    assert_eq!(harness.state().state.chat_from_app.as_deref(), Some("focus-today"));
}

/// The installed "Focus today" app as the apps worker lists it, with `description`.
pub(super) fn focus_today(description: &str) -> cowork::apps::worker::InstalledApp {
    let row = cowork::apps::store::AppRow {
        app_id: "focus-today".into(),
        name: "Focus today".into(),
        version: "0.1.0".into(),
        manifest: String::new(),
        component_sha256: Some("ab".into()),
        imports: Vec::new(),
        granted: Vec::new(),
        enabled: true,
        installed_at_millis: 0,
        updated_at_millis: 0,
    };
    let reads = vec!["read your current window and your activity (apps, window titles, times)".into()];
    cowork::apps::worker::InstalledApp { row, description: description.into(), reads, without_code: false }
}

/// Steps frames (without waiting for the UI to settle: a document being read keeps it
/// repainting) until `done` holds, up to `timeout`.
fn step_until(harness: &mut Harness<'static, CoworkApp>, timeout: std::time::Duration, mut done: impl FnMut(&Harness<'static, CoworkApp>) -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        harness.step();
        if done(harness) {
            harness.run_steps(2);
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Runs frames until `done` holds (the workers answer on their own threads), up to `timeout`.
/// A worker's event arriving mid-run asks for more frames than `Harness::run` allows
/// before it settles (a download's progress does, seen in CI); that is no failure
/// here: the loop runs again until `done` holds or the time is up.
fn run_until(harness: &mut Harness<'static, CoworkApp>, timeout: std::time::Duration, mut done: impl FnMut(&Harness<'static, CoworkApp>) -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let _still_repainting = harness.try_run();
        if done(harness) {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The first run end to end, in the real app with the real models worker:
/// the local brain judged for a 24 GB, 2-core machine, SmolLM2 and memory
/// search downloaded from a mirror — a real HTTP server on loopback serving
/// the real model files — cancelled midway and resumed, a cut connection
/// resumed, a corrupted file refused and fetched again once the mirror has it
/// right; a cloud key refused, then tried and saved; the hotkeys tried; start
/// at login; finish.
#[test]
fn the_first_run_sets_up_a_local_brain_from_a_mirror_a_cloud_key_the_hotkeys_and_login() {
    use cowork::models::worker::{ModelsCommand, spawn_models};
    use cowork::state::SetupState;
    use super::models::FileServer;
    use super::support::{models_dir, require};
    let manifest = cowork::models::Manifest::bundled().unwrap();
    let wanted = ["smollm2-135m-instruct", "all-minilm-l6-v2"];
    let files: Vec<&cowork::models::ManifestFile> = wanted.iter().flat_map(|name| &manifest.model(name).unwrap().files).collect();
    if !require(files.iter().all(|f| models_dir().join(&f.path).is_file()), "SmolLM2 and all-MiniLM in models/") {
        return;
    }
    let url_path = |file: &cowork::models::ManifestFile| file.url.strip_prefix("https://huggingface.co").unwrap().to_owned();
    let weights = manifest.model("all-minilm-l6-v2").unwrap().files.iter().find(|f| f.path.ends_with("model.safetensors")).unwrap();
    let real_weights = std::fs::read(models_dir().join(&weights.path)).unwrap();
    let mut corrupted = real_weights.clone();
    corrupted[1_000_000] ^= 0x40;
    let served: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|f| (url_path(f), if f.path == weights.path { corrupted.clone() } else { std::fs::read(models_dir().join(&f.path)).unwrap() }))
        .collect();
    let mirror = FileServer::serve(served, None);
    // A slow line at first, so Cancel lands mid-file.
    *mirror.pause_per_chunk.lock().unwrap() = std::time::Duration::from_millis(40);

    let installed = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let autostart = data.path().join("autostart").join("app.cowork.Cowork.desktop");
    let options = AppOptions {
        models_dir: installed.path().to_owned(),
        export_dir: data.path().to_owned(),
        autostart_entry: Some(autostart.clone()),
        ..AppOptions::default()
    };
    let mut state = AppState { setup: SetupState { open: true, ..SetupState::default() }, ..AppState::default() };
    state.settings.streams_confirmed = true;
    let views = cowork::ui::settings::model_views(&manifest, installed.path());
    let machine = cowork::ui::setup::Machine { total_bytes: 24_000_000_000, available_bytes: 20_000_000_000, cores: 2 };
    let (mut harness, far) = app_built(options, 1400.0, views, state, move |app| app.with_setup_machine(machine));
    // The real models worker behind the app's channel, its events back to the app.
    let (sink, worker_events) = super::support::test_sink();
    let mut worker = spawn_models(manifest.clone(), installed.path().to_owned(), None, sink.narrow(), cowork::runtime::RestartPolicy::default()).unwrap();
    let (commands, to_worker) = (far.models.clone(), worker.commands.clone());
    std::thread::spawn(move || commands.iter().for_each(|command| to_worker.send(command).unwrap()));
    let events = far.events.clone();
    std::thread::spawn(move || worker_events.iter().for_each(|event| drop(events.send(event))));

    harness.get_by_label("Step 1 of 4 · The brain");
    assert!(harness.query_by_label("Chat").is_none(), "the setup pages stand in for the tabs");
    // This machine: the 1.5B is recommended; SmolLM2 is chosen instead, without voice.
    harness.get_by_label_contains("recommended here");
    harness.get_by_label("smollm2-135m-instruct").click();
    harness.get_by_label("Voice: push-to-talk and dictation").click();
    harness.run();
    harness.get_by_role_and_label(Role::TextInput, "Download from (empty: huggingface.co, each file checked by its sha256)").focus();
    harness.run();
    harness.get_by_role_and_label(Role::TextInput, "Download from (empty: huggingface.co, each file checked by its sha256)").type_text(&mirror.base);
    harness.run();
    let smol = std::fs::metadata(models_dir().join(&manifest.model("smollm2-135m-instruct").unwrap().files[0].path)).unwrap().len();
    let total: u64 = files.iter().map(|f| f.size).sum();
    harness.get_by_label(&format!("Download ({:.0} MB)", total as f64 / 1e6)).click();
    // Cancel once the first file is on its way: what came stays, to resume.
    let partial = installed.path().join("smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf.part");
    assert!(run_until(&mut harness, std::time::Duration::from_secs(30), |_| std::fs::metadata(&partial).is_ok_and(|m| m.len() > 0)), "the download began");
    harness.get_by_label("Cancel").click();
    assert!(
        run_until(&mut harness, std::time::Duration::from_secs(30), |h| h.query_by_label_contains("the download was cancelled").is_some()),
        "cancelled"
    );
    let kept = std::fs::metadata(&partial).unwrap().len();
    assert!(kept > 0 && kept < smol, "the partial file stays for the next attempt ({kept} of {smol})");

    // Full speed, and the next connection drops after 5 MB: resumed each time from what is on disk.
    *mirror.pause_per_chunk.lock().unwrap() = std::time::Duration::ZERO;
    mirror.cut_next(5_000_000);
    harness.get_by_label_contains("Try again (").click();
    let refused = run_until(&mut harness, std::time::Duration::from_secs(120), |h| h.query_by_label_contains("all-minilm-l6-v2 was not installed").is_some());
    assert!(refused, "the corrupted file is refused");
    harness.get_by_label_contains("checksum mismatch");
    let ranges = mirror.ranges_seen.lock().unwrap().clone();
    assert!(ranges.iter().filter(|r| r.is_some()).count() >= 2, "the cancelled and the cut download resumed with Range requests: {ranges:?}");
    assert_eq!(
        cowork::models::check_file(&installed.path().join("smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"), smol, &manifest.model("smollm2-135m-instruct").unwrap().files[0].sha256, true),
        cowork::models::FileCheck::Ok,
        "SmolLM2 arrived whole and verified"
    );
    assert!(!installed.path().join(&weights.path).exists() && !installed.path().join(format!("{}.part", weights.path)).exists(), "nothing of the bad file is kept");
    assert!(far.llm.try_iter().next().is_none(), "no model is chosen before all of it is here");

    // The mirror mended: only what is missing comes again.
    mirror.replace(&url_path(weights), real_weights);
    let rest: u64 = manifest.model("all-minilm-l6-v2").unwrap().files.iter().map(|f| f.size).sum();
    harness.get_by_label(&format!("Try again ({:.0} MB)", rest as f64 / 1e6)).click();
    assert!(
        run_until(&mut harness, std::time::Duration::from_secs(60), |h| h.query_by_label_contains("downloaded and verified").is_some()),
        "downloaded"
    );
    harness.get_by_label_contains("smollm2-135m-instruct answers you");
    let chosen = far.llm.try_iter().find_map(|c| match c {
        cowork::llm::LlmCommand::SetModel { path, .. } => Some(path),
        _ => None,
    });
    assert_eq!(chosen, Some(installed.path().join("smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")), "SmolLM2 answers from now on");
    assert!(saved_settings(&far).contains(&("llm.chat_model".to_owned(), "smollm2-135m-instruct".to_owned())));
    harness.get_by_label("Everything this needs is installed");

    // A cloud model as well: a wrong key is said so, then a good one answers.
    let provider = super::providers::scripted(vec![
        super::providers::reply("401 Unauthorized", "", &["{\"error\":{\"message\":\"invalid api key\"}}"]),
        // OpenAI's default model is a reasoning one: it answers through the Responses API.
        super::providers::reply("200 OK", "", &[
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Hello\"}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        ]),
    ]);
    harness.get_by_label("A cloud model (you bring its key)").click();
    harness.run();
    harness.get_by_label_contains("what cowork recorded about your activity goes only if you allow it");
    for (role, field, text) in [
        (Role::PasswordInput, "API key", "sk-bad".to_owned()),
        (Role::TextInput, "Base URL (empty: the provider's own)", format!("http://127.0.0.1:{}/v1", provider.port)),
    ] {
        harness.get_by_role_and_label(role, field).focus();
        harness.run();
        harness.get_by_role_and_label(role, field).type_text(&text);
        harness.run();
    }
    harness.get_by_label("Save and try the key").click();
    assert!(run_until(&mut harness, std::time::Duration::from_secs(30), |h| h.query_by_label_contains("the key did not work").is_some()), "a wrong key is said so");
    assert!(!data.path().join("providers.json").exists(), "a provider whose key did not work is not saved");
    assert!(!saved_settings(&far).iter().any(|(k, _)| k == "brains.tiers"), "nor made a cloud tier");
    harness.get_by_role_and_label(Role::PasswordInput, "API key").focus();
    harness.run();
    harness.get_by_role_and_label(Role::PasswordInput, "API key").type_text("2");
    harness.run();
    harness.get_by_label("Save and try the key").click();
    assert!(
        run_until(&mut harness, std::time::Duration::from_secs(30), |h| h.query_by_label_contains("openai: gpt-5-mini answered \"Hello\"").is_some()),
        "the key works"
    );
    let providers = std::fs::read_to_string(data.path().join("providers.json")).unwrap();
    assert!(providers.contains("gpt-5-mini") && providers.contains(&provider.port.to_string()), "{providers}");
    assert!(saved_settings(&far).contains(&("brains.tiers".to_owned(), "openai".to_owned())), "the provider is one of the cloud tiers");
    let heads = provider.heads.lock().clone();
    assert!(heads.len() == 2 && heads[0].contains("Bearer sk-bad\r") && heads[1].contains("Bearer sk-bad2\r"), "each key typed went with its test: {heads:?}");
    let key = cowork::secrets::Secrets::open(data.path()).unwrap().get(&cowork::secrets::provider_key_name("openai")).unwrap();
    assert_eq!(key.as_deref(), Some("sk-bad2"), "the key that worked is kept in the secret store");

    // The hotkeys, tried.
    harness.get_by_label("Next").click();
    harness.run();
    harness.get_by_label("Step 2 of 4 · Hotkeys");
    assert!(harness.query_by_label("it works").is_none());
    far.events.send(AppEvent::Desktop(DesktopEvent::TogglePause)).unwrap();
    harness.run();
    assert_eq!(harness.get_all_by_label("it works").count(), 1, "the pause hotkey reached cowork");
    assert!(saved_settings(&far).contains(&("privacy.paused".to_owned(), "true".to_owned())), "and paused");
    // Start at login.
    harness.get_by_label("Next").click();
    harness.run();
    harness.get_by_label("Start cowork when I log in").click();
    harness.run();
    let entry = std::fs::read_to_string(&autostart).unwrap_or_else(|err| panic!("{err}: {:?}", harness.state().state.notices));
    assert!(entry.contains("Exec=") && entry.contains(" --autostart\n"), "{entry}");
    harness.get_by_label("This desktop shows no tray icons: at login the sidebar opens");
    // Where the data lives, and finish.
    harness.get_by_label("Next").click();
    harness.run();
    harness.get_by_label_contains(&format!("Everything cowork keeps is in {}: one encrypted file", data.path().display()));
    let _ = saved_settings(&far);
    harness.get_by_label("Finish").click();
    harness.run();
    assert_eq!(saved_settings(&far), vec![("ui.setup_done".to_owned(), "true".to_owned())]);
    harness.get_by_label("Chat");
    assert!(worker.shutdown(ModelsCommand::Shutdown, std::time::Duration::from_secs(5)));
}

/// Every page can be skipped, and Settings shows them again.
#[test]
fn the_first_run_can_be_skipped_and_opened_again_from_settings() {
    let mut state = AppState { setup: cowork::state::SetupState { open: true, ..Default::default() }, ..AppState::default() };
    state.settings.streams_confirmed = true;
    let (mut harness, far) = app_built(AppOptions::default(), 3000.0, Vec::new(), state, |app| app);
    harness.get_by_label("Skip setup").click();
    harness.run();
    assert_eq!(saved_settings(&far), vec![("ui.setup_done".to_owned(), "true".to_owned())]);
    open_settings(&mut harness, "General");
    harness.run();
    harness.get_by_label("Set up again").click();
    harness.run();
    harness.get_by_label("Step 1 of 4 · The brain");
}

/// Settings → Your data → Forget everything: what goes is listed first
/// (the data directory with its size, the autostart entry), Cancel keeps it
/// all, and confirming quits with the removal asked of the process.
#[test]
fn forget_everything_lists_what_goes_and_asks_before_it_quits() {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("cowork.db"), vec![1u8; 4096]).unwrap();
    let forget = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let options = AppOptions { export_dir: data.path().to_owned(), forget_on_exit: forget.clone(), ..AppOptions::default() };
    let (mut harness, _far) = app_with(options, 6000.0);
    open_settings(&mut harness, "Your data");
    harness.run();
    harness.get_by_label("Forget everything…").click();
    assert!(
        run_until(&mut harness, std::time::Duration::from_secs(20), |h| h.query_by_label("This removes, for good, and cowork quits:").is_some()),
        "the list is made"
    );
    harness.get_by_label_contains(&format!("• {}: 1 files, 4.0 KB", data.path().display()));
    harness.get_by_label("Cancel").click();
    harness.run();
    assert!(harness.query_by_label("This removes, for good, and cowork quits:").is_none());
    assert!(!harness.state().state.shutting_down && !forget.load(Ordering::SeqCst), "cancelled: nothing happens");
    harness.get_by_label("Forget everything…").click();
    assert!(run_until(&mut harness, std::time::Duration::from_secs(20), |h| h.query_by_label("Forget everything and quit").is_some()));
    harness.get_by_label("Forget everything and quit").click();
    // Closing repaints until the window goes: step, not run to rest.
    harness.run_steps(2);
    assert!(harness.state().state.shutting_down && forget.load(Ordering::SeqCst), "confirmed: cowork quits and forgets");
    assert!(data.path().join("cowork.db").exists(), "nothing is removed while the workers may still write");
}

/// The keyboard reaches every tab and the chat's input (Tab moves the focus,
/// Enter presses), and the focused control is drawn with the focus ring.
#[test]
fn tabs_and_the_chat_are_reachable_by_keyboard_with_the_focus_drawn() {
    use egui_kittest::kittest::NodeT;
    let (mut harness, _far) = app();
    let focused = |harness: &Harness<'static, CoworkApp>| {
        harness.root().children_recursive().find(|n| n.is_focused()).and_then(|n| n.accesskit_node().label())
    };
    let mut seen = Vec::new();
    let mut pressed_enter = false;
    for _ in 0..60 {
        harness.key_press(egui::Key::Tab);
        // One frame per press, as a person presses it.
        harness.step();
        if let Some(label) = focused(&harness) {
            if label == "Settings" && !pressed_enter {
                pressed_enter = true;
                // The focus ring is drawn around the focused tab.
                let tab = harness.get_by_label("Settings").rect();
                let ring = harness.output().shapes.iter().any(|s| match &s.shape {
                    egui::Shape::Rect(r) => r.stroke.color == cowork::ui::theme::focus_ring() && r.stroke.width >= 2.0 && r.rect.contains_rect(tab),
                    _ => false,
                });
                assert!(ring, "no focus ring around the focused tab");
                harness.key_press(egui::Key::Enter);
                harness.step();
                assert_eq!(harness.state().state.tab(), Tab::Settings, "Enter on the focused tab opens it");
                harness.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Num1);
                harness.step();
                assert_eq!(harness.state().state.tab(), Tab::Chat, "Ctrl+1 shows the chat");
            }
            seen.push(label);
        }
    }
    for want in ["Chat", "Context", "Apps", "Settings", "Message"] {
        assert!(seen.iter().any(|l| l == want), "Tab never reached {want}: {seen:?}");
    }
}


/// A file dropped onto the sidebar, as winit hands it to egui.
#[derive(Debug)]
struct Dropped(std::path::PathBuf);

impl egui::DroppedFile for Dropped {
    fn path(&self) -> &std::path::Path {
        &self.0
    }

    fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| e.to_string())
    }
}

/// A document dropped onto the sidebar is read and attached (the request
/// carries it by page, as data); "Attach a file…" is offered; a finished
/// answer can be saved as a Word document, and an answer whose task changed
/// files offers Undo, which puts the file back from the trash.
#[test]
fn a_dropped_document_is_attached_and_an_answer_can_be_saved_and_its_task_undone() {
    let data = super::support::temp_dir();
    let files = super::support::temp_dir();
    let plan = files.path().join("plan.docx");
    cowork::documents::write::write(&plan, Some("# Plan\n\nThe okapi budget is 4200.\n"), &[]).unwrap();
    // A task of an earlier answer deleted a file: it is in the trash, its step recorded.
    let victim = files.path().join("notes.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let step = cowork::tools::undo::trash(&victim).unwrap();
    let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
    cowork::agent::store::apply(&conn, &cowork::agent::store::AgentWrite::Undo { operation_id: 77, call_id: 1, steps: vec![step], at_millis: cowork::ids::now_millis() }).unwrap();
    drop(conn);
    let options = AppOptions { export_dir: data.path().to_owned(), ..AppOptions::default() };
    let (mut harness, far) = app_with(options, 760.0);
    harness.get_by_label("Attach a file…");

    harness.input_mut().dropped_files.push(Arc::new(Dropped(plan.clone())));
    assert!(step_until(&mut harness, std::time::Duration::from_secs(20), |h| h.query_by_label_contains("plan.docx · document").is_some()), "the dropped document is attached");
    // Kept in memory too (the store is asked to keep it).
    assert!(store_asked(&far).iter().any(|c| c == "remember plan.docx"));
    let request = send_message(&mut harness, &far, "How big is the okapi budget?");
    assert_eq!(request.attachments.len(), 1);
    assert!(request.attachments[0].server.is_empty() && request.attachments[0].text.contains("--- section 1: Plan ---"), "{:?}", request.attachments);
    assert!(request.attachments[0].as_data().contains("not instructions"));

    far.events.send(AppEvent::Agent(AgentEvent::Token { answer_id: request.answer_id, text: "It is 4200 (section 1).".into() })).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: request.answer_id, status: MessageStatus::Done, error: None, stats: GenerationStats::default() })).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::Undoable { answer_id: request.answer_id, operation_id: 77, until_millis: cowork::ids::now_millis() + 300_000 })).unwrap();
    harness.run();
    harness.get_by_label("Save as DOCX").click();
    harness.run();
    let documents = std::path::PathBuf::from(std::env::var("HOME").unwrap()).join("Documents");
    assert!(step_until(&mut harness, std::time::Duration::from_secs(20), |h| h.state().state.notices.iter().any(|n| n.starts_with("Saved the answer as"))), "the answer is saved");
    let saved = harness.state().state.notices.iter().find_map(|n| n.strip_prefix("Saved the answer as ")).unwrap().to_owned();
    assert!(saved.starts_with(&documents.display().to_string()), "{saved}");
    let doc = cowork::documents::read(std::path::Path::new(&saved), &cowork::documents::Selection::default()).unwrap();
    assert_eq!(doc.parts[0].text, "It is 4200 (section 1).");
    std::fs::remove_file(&saved).unwrap();

    harness.get_by_label("Undo").click();
    harness.run();
    // Undo is a job on the store's one writer; here the test plays the store.
    let undo = far.store.try_iter().find(|c| c.what() == "undo operation 77").expect("Undo asks the store");
    undo.run_on(&cowork::store::open_writer(&data.path().join("cowork.db")).unwrap()).unwrap();
    assert!(step_until(&mut harness, std::time::Duration::from_secs(20), |h| h.state().state.notices.iter().any(|n| n.starts_with("Undone:"))), "the undo is done");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(harness.query_by_label("Undo").is_none(), "Undo is offered once");
}

/// Without a desktop file chooser (no portal on this session, as in the
/// suite), Attach a file… opens the sidebar's own browser: Up, folders,
/// files; a file is attached on a click and the browser closes. A web
/// search's results are links with the site each leads to.
#[test]
fn without_a_portal_the_sidebars_own_file_browser_attaches_and_search_results_are_links() {
    let home = std::path::PathBuf::from(std::env::var("HOME").unwrap());
    let folder = tempfile::Builder::new().prefix("browse-").tempdir_in(&home).unwrap();
    let folder_name = folder.path().file_name().unwrap().to_string_lossy().into_owned();
    std::fs::create_dir_all(folder.path().join("reports")).unwrap();
    cowork::documents::write::write(&folder.path().join("reports/plan.docx"), Some("# Plan\n\nOkapi.\n"), &[]).unwrap();
    let (mut harness, far) = app();
    harness.get_by_label("Attach a file…").click();
    assert!(step_until(&mut harness, std::time::Duration::from_secs(20), |h| h.query_by_label("Close the file browser").is_some()), "the sidebar's browser opens");
    let start = harness.state().state.file_browser.clone().unwrap().dir;
    if start != home {
        // A Documents folder was set up: go up to home first.
        harness.get_by_label("Up").click();
        harness.run();
    }
    harness.get_by_label(&format!("{folder_name}/")).click();
    harness.run();
    harness.get_by_label("reports/").click();
    harness.run();
    harness.get_by_label_contains("plan.docx · ").click();
    harness.run_steps(2);
    assert!(harness.state().state.file_browser.is_none(), "the browser closes once a file is chosen");
    assert!(step_until(&mut harness, std::time::Duration::from_secs(20), |h| h.query_by_label_contains("plan.docx · document").is_some()), "attached");

    // A web search's results, as the agent's chip shows them.
    let request = send_message(&mut harness, &far, "what does the web say about okapis?");
    let found = vec![cowork::tools::web_search::Found { title: "Okapi - Wikipedia".into(), url: "https://en.wikipedia.org/wiki/Okapi".into(), snippet: "The okapi is a giraffid".into() }];
    let output = cowork::tools::web_search::render(cowork::tools::web_search::Provider::Searxng, "okapi", &found);
    let call = cowork::agent::events::ToolCallView {
        operation_id: 1,
        answer_id: request.answer_id,
        call_id: 5,
        step: 1,
        tool: "web_search".into(),
        arguments: serde_json::json!({"query": "okapi"}),
        risk: "sensitive".into(),
        status: cowork::agent::events::CallStatus::Done,
        why: "your rule allows every web_search call".into(),
        decided_by: Some("policy: rule 1".into()),
        output: Some(output),
        is_error: false,
        duration_millis: Some(300),
        expires_at_millis: None,
        suggested_rule: None,
        images: Vec::new(),
    };
    far.events.send(AppEvent::Agent(AgentEvent::ToolCall(Box::new(call)))).unwrap();
    harness.run();
    harness.get_by_role_and_label(Role::Link, "Okapi - Wikipedia");
    harness.get_by_label("en.wikipedia.org");
}

/// Settings' model picker asks the provider (a loopback server that answers as
/// Anthropic does) on its own thread, lists its models with context window and
/// price, and a click makes one the provider's model in providers.json.
#[test]
fn the_model_picker_lists_a_providers_models_with_prices_and_a_click_chooses_one() {
    use egui_kittest::kittest::NodeT;
    let anthropic = super::provider_mocks::mock(super::provider_mocks::Flavour::Anthropic);
    let data = super::support::temp_dir();
    std::fs::write(data.path().join("providers.json"), format!(r#"{{"providers": [{{"name": "anthropic", "base_url": "{}", "model": "claude-opus-4-5"}}]}}"#, anthropic.url())).unwrap();
    cowork::secrets::Secrets::open(data.path()).unwrap().set("provider:anthropic", "sk-ant-test").unwrap();
    let (mut harness, _far) = app_with(AppOptions { export_dir: data.path().to_owned(), ..AppOptions::default() }, 3000.0);
    open_settings(&mut harness, "Brains & network");
    harness.get_by_label("Models of anthropic…").click();
    harness.step();
    let listed = (0..300).any(|_| {
        harness.step();
        std::thread::sleep(std::time::Duration::from_millis(10));
        harness.query_by_label_contains("claude-haiku-4-5 (Claude Haiku 4.5)").is_some()
    });
    assert!(listed, "the list came");
    harness.run();
    // Context and price from the shipped table; the one in use is selected.
    let haiku = harness.get_by_label_contains("claude-haiku-4-5 (Claude Haiku 4.5)").accesskit_node().label().unwrap_or_default().to_owned();
    assert!(haiku.contains("k context") && haiku.contains("per M tokens"), "{haiku}");
    harness.get_by_label_contains("3 models; find");
    assert_eq!(anthropic.seen().iter().filter(|s| s.method == "GET").count(), 2, "both pages of the list");
    assert!(anthropic.seen().iter().all(|s| s.headers.get("x-api-key").map(String::as_str) == Some("sk-ant-test")));
    // Typing narrows the list.
    harness.get_by_role_and_label(Role::TextInput, "3 models; find").focus();
    harness.run();
    harness.get_by_role_and_label(Role::TextInput, "3 models; find").type_text("haiku");
    harness.run();
    assert!(harness.query_by_label_contains("claude-opus-4-5 (").is_none());
    harness.get_by_label_contains("claude-haiku-4-5 (Claude Haiku 4.5)").click();
    harness.run();
    let providers = cowork::brains::Providers::load(&data.path().join("providers.json")).unwrap();
    assert_eq!(providers.get("anthropic").unwrap().model, "claude-haiku-4-5");
    harness.get_by_label_contains("anthropic · anthropic · claude-haiku-4-5");
}

/// Settings → Integrations → Add an integration: the catalog, the chosen
/// server's form with exactly its fields (a key as a password field), what
/// is wrong said before anything starts, the trust choice with its
/// consequence, and Test and add sending the form to the mcp worker.
#[test]
fn adding_a_catalog_integration_is_a_short_form_with_its_keys_paths_and_trust() {
    use egui_kittest::kittest::NodeT;
    use cowork::mcp::worker::McpCommand;
    let (mut harness, far) = app_with(AppOptions::default(), 3000.0);
    open_settings(&mut harness, "Integrations");
    harness.get_by_label("Add an integration").click();
    harness.run();
    for name in ["Files", "Git", "Fetch", "Knowledge graph", "Time", "SQLite", "GitHub", "Slack", "Brave Search", "Browser (Playwright)"] {
        harness.get_by_role_and_label(Role::Button, name);
    }
    // Brave Search: one key, as a password field; nothing can be added before it is typed.
    harness.get_by_role_and_label(Role::Button, "Brave Search").click();
    harness.run();
    harness.get_by_label_contains("npx -y @brave/brave-search-mcp-server@");
    let add = || "Test and add";
    assert!(harness.get_by_label(add()).accesskit_node().is_disabled(), "nothing to test before the key is typed");
    harness.get_by_role_and_label(Role::PasswordInput, "Brave Search API key (needed)").focus();
    harness.run();
    harness.get_by_role_and_label(Role::PasswordInput, "Brave Search API key (needed)").type_text("BSA-test-key-123");
    harness.run();
    // Not trusted unless chosen; the consequence is said either way.
    harness.get_by_label_contains(&cowork::mcp::tools::trust_text(false)[..40]);
    harness.get_by_label("Trust its annotations").click();
    harness.run();
    harness.get_by_label_contains(&cowork::mcp::tools::trust_text(true)[..40]);
    if cowork::mcp::catalog::on_path("npx").is_some() {
        harness.get_by_label(add()).click();
        harness.step();
        harness.step();
        match far.mcp.try_recv().expect("the form reached the mcp worker") {
            McpCommand::AddFromCatalog { id, values, trusted } => {
                assert_eq!((id.as_str(), trusted), ("brave-search", true));
                assert_eq!(values.get("api_key").map(String::as_str), Some("BSA-test-key-123"));
            }
            _ => panic!("the form is an AddFromCatalog"),
        }
        harness.get_by_label("Testing…");
        // The worker's answer: not added, and why, with what the server printed.
        far.events
            .send(AppEvent::Mcp(McpEvent::McpCatalogAdded { name: "brave-search".into(), result: Err("no handshake within 120 s".into()), stderr: vec!["Error: invalid API key".into()] }))
            .unwrap();
        harness.run();
        harness.get_by_label("Not added: no handshake within 120 s");
        harness.get_by_label("Error: invalid API key");
    }
    // Files: a folder that is not there is said before anything starts.
    harness.get_by_label("Back to the list").click();
    harness.run();
    harness.get_by_role_and_label(Role::Button, "Files").click();
    harness.run();
    harness.get_by_role_and_label(Role::MultilineTextInput, "Folders it may use (needed)").focus();
    harness.run();
    harness.get_by_role_and_label(Role::MultilineTextInput, "Folders it may use (needed)").type_text("/no/such/folder");
    harness.run();
    harness.get_by_label_contains("there is no folder /no/such/folder");
    assert!(harness.get_by_label(add()).accesskit_node().is_disabled());
}

/// A reasoning model's thinking shows collapsed under the answer, apart from it.
#[test]
fn a_models_thinking_is_shown_collapsed_under_the_answer_and_apart_from_it() {
    let (mut harness, far) = app();
    let request = send_message(&mut harness, &far, "Capital of France?");
    far.events.send(AppEvent::Agent(AgentEvent::Reasoning { answer_id: request.answer_id, text: "The user asks for a capital. ".into() })).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::Reasoning { answer_id: request.answer_id, text: "France: Paris.".into() })).unwrap();
    far.events.send(AppEvent::Agent(AgentEvent::Token { answer_id: request.answer_id, text: "Paris.".into() })).unwrap();
    let stats = GenerationStats { prompt_tokens: 4000, completion_tokens: 120, cached_prompt_tokens: 3300, reasoning_tokens: 64, ..GenerationStats::default() };
    far.events.send(AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: request.answer_id, status: MessageStatus::Done, error: None, stats })).unwrap();
    harness.run();
    harness.get_by_label("Paris.");
    // A cloud task's footer: its tokens and how much of its prompts the provider's cache served.
    harness.get_by_label("120 tokens · thought for 64 tokens · 82 % of the prompt from the cache");
    assert!(harness.query_by_label_contains("The user asks for a capital").is_none(), "collapsed until asked for");
    harness.get_by_label("Thought (8 words)").click();
    harness.run();
    harness.get_by_label("The user asks for a capital. France: Paris.");
}

#[test]
fn a_conversation_is_deleted_only_after_a_yes_and_leaves_the_list() {
    let (mut harness, far) = app();
    let thread = |thread_id, title: &str| cowork::records::ChatThread { thread_id, title: title.into(), updated_at_millis: thread_id };
    far.events.send(AppEvent::Chat(cowork::chat::ChatEvent::ThreadsLoaded(vec![thread(1, "Trip to Porto"), thread(2, "Budget questions")]))).unwrap();
    harness.run();
    harness.state_mut().state.current_thread = Some(2);
    harness.run();
    let _ = far.store.try_iter().count();
    harness.get_by_label("Delete").click();
    harness.run();
    assert!(store_asked(&far).is_empty(), "nothing is deleted before the user says yes");
    // No: nothing happens.
    harness.get_by_label("Keep it").click();
    harness.run();
    assert!(store_asked(&far).is_empty());
    assert!(harness.query_by_label("Delete conversation").is_none());
    // Yes: the store is asked to delete that conversation, and only that one.
    harness.get_by_label("Delete").click();
    harness.run();
    harness.get_by_label("Delete conversation").click();
    harness.run();
    assert_eq!(store_asked(&far), ["delete thread 2"]);
    far.events.send(AppEvent::Chat(cowork::chat::ChatEvent::ThreadDeleted { thread_id: 2, messages: 4 })).unwrap();
    harness.run();
    let state = &harness.state().state;
    assert_eq!(state.threads.iter().map(|t| t.thread_id).collect::<Vec<_>>(), [1]);
    assert_eq!(state.current_thread, None, "a new chat, not the deleted one");
    harness.get_by_label("Deleted the conversation (4 messages)");
}

/// Memory corrected in the chat: the proposed change is shown on its answer
/// and nothing reaches the store until the user clicks; "Keep as it is"
/// drops it. A line proposed for the profile is added only on "Add to
/// profile" (the setting is saved) and a dismissed one goes to the store.
#[test]
fn a_memory_change_waits_for_its_click_and_a_profile_line_is_added_only_when_the_user_says_so() {
    use cowork::memory::corrections::Change;
    let (mut harness, far) = app();
    let propose = |harness: &mut Harness<'static, CoworkApp>, text: &str, change: Change| {
        let request = send_message(harness, &far, text);
        far.events.send(AppEvent::Agent(AgentEvent::MemoryChangeProposed { answer_id: request.answer_id, change })).unwrap();
        far.events.send(AppEvent::Agent(AgentEvent::Token { answer_id: request.answer_id, text: format!("{text} Confirm below.") })).unwrap();
        far.events.send(AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: request.answer_id, status: MessageStatus::Done, error: None, stats: GenerationStats::default() })).unwrap();
        harness.run();
        let _ = far.store.try_iter().count();
        let _ = far.agent.try_iter().count();
    };
    propose(&mut harness, "That's wrong, my manager is Marta Kowalski.", Change::Replace { memory_id: 4, old: "My manager is Dana Reyes.".into(), new: "My manager is Marta Kowalski.".into() });
    harness.get_by_label("Replace it");
    harness.get_by_label("Keep as it is").click();
    harness.run();
    assert!(store_asked(&far).is_empty(), "kept: nothing asked of the store");
    assert!(harness.query_by_label("Replace it").is_none() && harness.query_by_label("Keep as it is").is_none(), "the card is answered once");
    propose(&mut harness, "Forget that Lior likes tea.", Change::Remove { memory_id: 5, text: "Lior likes tea.".into() });
    harness.get_by_label("Forget it").click();
    harness.run();
    let asked = store_asked(&far);
    assert_eq!(asked, ["memory change: Forget “Lior likes tea.”"]);
    assert!(far.agent.try_iter().any(|c| matches!(c, AgentCommand::MemoryChanged)), "the agent drops a prompt that may hold the old fact");
    assert!(harness.query_by_label("Keep as it is").is_none(), "each card is answered once");

    // Profile lines, proposed by the store.
    let proposal = |text: &str| cowork::memory::profile::Proposal { text: text.into(), question: format!("Add “{text}” to your profile?") };
    far.events.send(AppEvent::Memory(cowork::memory::events::MemoryEvent::ProfileProposals(vec![proposal("Works on atlas most mornings.")]))).unwrap();
    open_settings(&mut harness, "Memory");
    harness.run();
    let _ = far.store.try_iter().count();
    harness.get_by_label_contains("Works on atlas most mornings.");
    harness.get_by_label("Dismiss").click();
    harness.run();
    assert_eq!(store_asked(&far), ["dismiss a profile proposal"]);
    assert!(harness.query_by_label_contains("Works on atlas").is_none(), "a dismissed line leaves the list");
    far.events.send(AppEvent::Memory(cowork::memory::events::MemoryEvent::ProfileProposals(vec![proposal("I work at Norvik.")]))).unwrap();
    harness.run();
    harness.get_by_label("Add to profile").click();
    harness.run();
    let asked = store_asked(&far);
    assert!(asked.iter().any(|c| c.contains("memory.profile") && c.contains("I work at Norvik.")), "the profile setting is saved with the line: {asked:?}");
    assert!(harness.query_by_label("Add to profile").is_none());
}

/// The calendar (issue 58): the day's meetings under the timeline and the next
/// one above them; Settings → Memory → Calendar shows each source's state, a
/// password field for a CalDAV account, and Read now asks the worker.
#[test]
fn the_calendar_shows_the_days_meetings_the_next_one_and_each_sources_state() {
    let (mut harness, far) = app_with(AppOptions::default(), 1400.0);
    harness.get_by_label("Context").click();
    harness.run();
    let now = cowork::ids::now_millis();
    let today = cowork::ids::local_day_start_millis(now);
    let review = cowork::day::calendar::Event {
        uid: "q3".into(),
        title: "Q3 review".into(),
        start_millis: now + 12 * 60_000 - 1_000,
        end_millis: now + 42 * 60_000,
        attendees: vec!["Sam".into()],
        ..Default::default()
    };
    far.events.send(AppEvent::Capture(CaptureEvent::DaysLoaded(cowork::capture::events::Days { start_millis: today, days: 1, events: vec![review.clone()], ..Default::default() }))).unwrap();
    let failed = cowork::calendar::SourceStatus { label: "alice@dav.example.org (CalDAV)".into(), error: Some("alice@dav.example.org refused the password (HTTP 401)".into()), ..Default::default() };
    let read = cowork::calendar::SourceStatus { label: "calendar.example.org (address)".into(), read_at_millis: Some(now), events: 14, error: None };
    far.events.send(AppEvent::Calendar(cowork::calendar::CalendarView { sources: vec![failed, read], upcoming: vec![review.clone()] })).unwrap();
    harness.run();
    harness.get_by_label_contains("Your next meeting is in 12 min");
    harness.get_by_label_contains("\"Q3 review\" with Sam.");
    harness.get_by_label(&format!("{}–{} Q3 review", cowork::ids::format_clock(review.start_millis), cowork::ids::format_clock(review.end_millis)));
    let sources = "https://calendar.example.org/private-1/basic.ics\ncaldav https://dav.example.org/alice/ alice";
    far.events.send(AppEvent::Store(StoreEvent::Setting { key: cowork::config::keys::CALENDAR_SOURCES.into(), value: sources.into() })).unwrap();
    open_settings(&mut harness, "Memory");
    harness.run();
    harness.get_by_label("alice@dav.example.org (CalDAV): alice@dav.example.org refused the password (HTTP 401)");
    harness.get_by_label_contains("calendar.example.org (address): 14 events, read at");
    harness.get_by_role_and_label(Role::PasswordInput, "Password or token for alice@dav.example.org");
    let _ = far.calendar.try_iter().count();
    harness.get_by_label("Read now").click();
    harness.run();
    assert!(matches!(far.calendar.try_recv(), Ok(cowork::calendar::worker::CalendarCommand::Refresh)), "Read now asks the calendar worker");
}
