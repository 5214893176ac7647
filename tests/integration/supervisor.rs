//! Every worker under its real supervisor: an injected panic restarts it, the
//! same command sender keeps working, and repeated failures end in `failed`,
//! from which Retry brings it back.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use cowork::agent::events::AgentEvent;
use cowork::capture::{CaptureCommand, CaptureConfig, spawn_capture};
use cowork::events::AppEvent;
use cowork::llm::{LlmCommand, LlmConfig, spawn_llm};
use cowork::llm::events::{LocalModelEvent, ModelStatus};
use cowork::runtime::{Control, RestartPolicy, RuntimeEvent, WorkerName, WorkerState};
use cowork::store::StoreCommand;
use cowork::workers::spawn_store;
use crossbeam_channel::{Receiver, Sender, bounded};

use super::support::{temp_dir, test_sink, wait_for};

const WAIT: Duration = Duration::from_secs(20);

fn fast_policy() -> RestartPolicy {
    RestartPolicy { first_backoff: Duration::from_millis(20), max_restarts: 5, healthy_after: Duration::from_secs(60) }
}

fn state_of(events: &Receiver<AppEvent>, worker: WorkerName, want: fn(&WorkerState) -> bool) -> Option<WorkerState> {
    wait_for(events, WAIT, |event| match event {
        AppEvent::Runtime(RuntimeEvent::Worker { worker: w, state }) if *w == worker && want(state) => Some(state.clone()),
        _ => None,
    })
}

fn is_up(state: &WorkerState) -> bool {
    matches!(state, WorkerState::Running | WorkerState::Degraded(_))
}

/// Panics the worker `max_restarts + 1` times in a row and checks each restart
/// (and, after it, that the same sender reaches the new instance), then the
/// final `failed`, then Retry.
fn panic_until_failed<C>(
    worker: WorkerName,
    events: &Receiver<AppEvent>,
    commands: &Sender<C>,
    control: &Sender<Control>,
    inject: fn() -> C,
    still_works: impl Fn(),
) {
    state_of(events, worker, is_up).expect("worker starts");
    for restart in 1..=5u32 {
        commands.send(inject()).unwrap();
        let state = state_of(events, worker, |s| matches!(s, WorkerState::Restarting { .. })).expect("restarting");
        match state {
            WorkerState::Restarting { restarts, error, .. } => {
                assert_eq!(restarts, restart);
                assert!(error.contains("injected"), "{error}");
            }
            other => panic!("unexpected {other:?}"),
        }
        state_of(events, worker, is_up).expect("back up after restart");
        still_works();
    }
    commands.send(inject()).unwrap();
    let failed = state_of(events, worker, |s| matches!(s, WorkerState::Failed { .. } | WorkerState::Restarting { .. }));
    assert!(matches!(failed, Some(WorkerState::Failed { .. })), "sixth failure in a row must give up: {failed:?}");
    control.send(Control::Retry).unwrap();
    state_of(events, worker, is_up).expect("Retry brings a failed worker back");
    still_works();
}

#[test]
fn store_restarts_keeps_its_sender_and_fails_after_five_restarts() {
    let dir = temp_dir();
    let (sink, events) = test_sink();
    let mut store = spawn_store(dir.path().join("cowork.db"), sink.clone(), fast_policy()).unwrap();
    let sender = store.commands.clone();
    // The sender from before each crash reaches the new instance.
    let flushes = || {
        let (ack, done) = bounded(1);
        sender.send(StoreCommand::Flush(ack)).unwrap();
        done.recv_timeout(WAIT).expect("restarted store answers on the old sender");
    };
    panic_until_failed(WorkerName::Store, &events, &store.commands, &store.control, || StoreCommand::InjectPanic, flushes);
    assert!(store.shutdown(StoreCommand::Shutdown, WAIT));
}

#[test]
fn capture_restarts_keeps_its_sender_and_fails_after_five_restarts() {
    let (sink, events) = test_sink();
    let (store_tx, _store_rx) = bounded(16);
    // No X server on this display: capture runs degraded, still serving commands.
    let config = CaptureConfig { display: Some(":4243".into()), afk_secs: 180, rules: Default::default(), backend: cowork::desktop::backend::Backend::X11 };
    let mut capture = spawn_capture(config, store_tx, sink.narrow(), fast_policy()).unwrap();
    let sender = capture.commands.clone();
    // A degraded capture still serves commands: the old sender's message is handled.
    let answers = || sender.send(CaptureCommand::SetAfkSecs(60)).unwrap();
    panic_until_failed(WorkerName::Capture, &events, &capture.commands, &capture.control, || CaptureCommand::InjectPanic, answers);
    assert!(capture.shutdown(CaptureCommand::Shutdown, WAIT));
}

#[test]
fn llm_restarts_keeps_its_sender_and_fails_after_five_restarts() {
    let dir = temp_dir();
    let (sink, events) = test_sink();
    let config = LlmConfig {
        model_path: dir.path().join("no-such-model.gguf"),
        model_expected: None,
        local_limit_tokens: 1_500,
        max_answer_tokens: 16,
        idle_unload_secs: 600,
        sysfs: cowork::llm::LlmConfig::real_sysfs(),
        notify: None,
        speed_file: None,
    };
    let mut llm = spawn_llm(config, sink.narrow(), Arc::new(AtomicU64::new(0)), Default::default(), fast_policy()).unwrap();
    let sender = llm.commands.clone();
    let model_events = events.clone();
    // The old sender drives the new instance: a Preload reports the missing model.
    let answers = || {
        sender.send(LlmCommand::Preload).unwrap();
        let status = wait_for(&model_events, WAIT, |e| match e {
            AppEvent::LocalModel(LocalModelEvent::Model(status @ ModelStatus::Unavailable(_))) => Some(status.clone()),
            _ => None,
        });
        assert!(matches!(&status, Some(ModelStatus::Unavailable(reason)) if reason.contains("missing")), "{status:?}");
    };
    panic_until_failed(WorkerName::Llm, &events, &llm.commands, &llm.control, || LlmCommand::InjectPanic, answers);
    assert!(llm.shutdown(LlmCommand::Shutdown, WAIT));
}

#[test]
fn agent_restarts_keeps_its_sender_and_a_gone_llm_worker_is_a_failed_answer() {
    use cowork::agent::{AgentCommand, AgentConfig, ChatRequest, spawn_agent};
    let dir = temp_dir();
    let (sink, events) = test_sink();
    let (store_tx, _store_rx) = bounded(64);
    // The llm worker's end is gone: every question must fail visibly, never hang.
    let (llm_tx, llm_rx) = bounded(1);
    drop(llm_rx);
    let config = AgentConfig {
        db_path: dir.path().join("cowork.db"),
        context_budget_tokens: 100,
        max_answer_tokens: 16,
        local_history_tokens: cowork::agent::history::LOCAL_BUDGET_TOKENS,
        cloud_history_tokens: cowork::agent::history::CLOUD_CAP_TOKENS,
        data_dir: dir.path().to_owned(),
        local_limit_tokens: 1_500,
        recall: None,
        mcp: None,
        automations: None,
        flows: None,
        keys_at_millis: Default::default(),
    };
    let mut agent = spawn_agent(config, llm_tx, Default::default(), store_tx, sink.narrow(), Arc::new(AtomicU64::new(0)), fast_policy()).unwrap();
    let sender = agent.commands.clone();
    let answer_events = events.clone();
    let answers = || {
        let request = ChatRequest { answer_id: cowork::ids::next_id(), text: "hello".into(), ..ChatRequest::default() };
        let id = request.answer_id;
        sender.send(AgentCommand::Chat(request)).unwrap();
        let error = wait_for(&answer_events, WAIT, |e| match e {
            AppEvent::Agent(AgentEvent::AnswerFinished { answer_id, error, .. }) if *answer_id == id => Some(error.clone()),
            _ => None,
        });
        assert!(matches!(&error, Some(Some(e)) if e.contains("local model worker is not running")), "{error:?}");
    };
    panic_until_failed(WorkerName::Agent, &events, &agent.commands, &agent.control, || AgentCommand::InjectPanic, answers);
    assert!(agent.shutdown(AgentCommand::Shutdown, WAIT));
}

#[test]
fn a_healthy_run_resets_the_failure_count() {
    let dir = temp_dir();
    let (sink, events) = test_sink();
    let policy = RestartPolicy { first_backoff: Duration::from_millis(10), max_restarts: 1, healthy_after: Duration::from_millis(300) };
    let mut store = spawn_store(dir.path().join("cowork.db"), sink.clone(), policy).unwrap();
    for _ in 0..3 {
        state_of(&events, WorkerName::Store, is_up).unwrap();
        // Healthy for longer than healthy_after: the next failure counts as the first again.
        std::thread::sleep(Duration::from_millis(400));
        store.commands.send(StoreCommand::InjectPanic).unwrap();
        let state = state_of(&events, WorkerName::Store, |s| !is_up(s) && !matches!(s, WorkerState::Starting)).unwrap();
        assert!(matches!(state, WorkerState::Restarting { restarts: 1, .. }), "{state:?}");
    }
    assert!(store.shutdown(StoreCommand::Shutdown, WAIT));
}

#[test]
fn keys_restarts_keeps_its_sender_and_fails_after_five_restarts() {
    use cowork::capture::keys::{KeysCommand, spawn_keys};
    let (sink, events) = test_sink();
    let (store_tx, _store_rx) = bounded(16);
    // No display for key state: degraded, still serving commands.
    let mut keys = spawn_keys(store_tx, None, Some("no display in this test".into()), Default::default(), sink.narrow(), fast_policy()).unwrap();
    let sender = keys.commands.clone();
    let answers = || sender.send(KeysCommand::Window(None)).unwrap();
    panic_until_failed(WorkerName::Keys, &events, &keys.commands, &keys.control, || KeysCommand::InjectPanic, answers);
    assert!(keys.shutdown(KeysCommand::Shutdown, WAIT));
}

#[test]
fn clipboard_restarts_keeps_its_sender_and_fails_after_five_restarts() {
    use cowork::capture::clipboard::{ClipboardCommand, spawn_clipboard};
    let (sink, events) = test_sink();
    let (store_tx, _store_rx) = bounded(16);
    let (_copy_tx, copy_rx) = bounded(8);
    let mut clipboard = spawn_clipboard(None, cowork::capture::clipboard::ClipboardSource::Off("no display in this test".into()), store_tx, copy_rx, sink.narrow(), fast_policy()).unwrap();
    let sender = clipboard.commands.clone();
    let answers = || sender.send(ClipboardCommand::Window(None)).unwrap();
    panic_until_failed(WorkerName::Clipboard, &events, &clipboard.commands, &clipboard.control, || ClipboardCommand::InjectPanic, answers);
    assert!(clipboard.shutdown(ClipboardCommand::Shutdown, WAIT));
}
