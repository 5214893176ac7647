//! The llm worker with the real SmolLM2 model: a streamed answer that knows the
//! active window recorded by real capture, persisted messages, and Stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cowork::agent::{AgentCommand, AgentConfig, ChatRequest, spawn_agent};
use cowork::agent::events::AgentEvent;
use cowork::capture::{CaptureCommand, CaptureConfig, spawn_capture};
use cowork::events::AppEvent;
use cowork::ids::{next_id, now_millis};
use cowork::llm::{LlmCommand, LlmConfig, spawn_llm};
use cowork::models::{Manifest, ModelRole};
use cowork::records::{ChatThread, MessageStatus, Role};
use cowork::runtime::{EventSink, RestartPolicy, WorkerHandle};
use cowork::store::{self, StoreCommand};
use cowork::workers::spawn_store;

use super::support::{XSession, chat_model, eventually, models_dir, require, temp_dir, test_sink, wait_for};

fn request(question: &str, thread_id: i64) -> ChatRequest {
    let thread = ChatThread { thread_id, title: "test".into(), updated_at_millis: now_millis() };
    ChatRequest { ask_id: next_id(), ..ChatRequest::new(thread, true, next_id(), next_id(), question) }
}

#[test]
fn smollm2_answers_with_the_captured_window_in_context_and_stops_within_a_second() {
    if !require(chat_model().is_file(), "the SmolLM2 model") || !require(XSession::available(), "Xvfb") {
        return;
    }
    let mut x = XSession::start();
    let title = "Quarterly budget review - LibreOffice Calc";
    let window = x.open_xterm(title);
    x.activate(&window);

    let dir = temp_dir();
    let db = dir.path().join("cowork.db");
    let (sink, events) = test_sink();
    let mut store = spawn_store(db.clone(), sink.clone(), RestartPolicy::default()).unwrap();
    let mut capture = spawn_capture(
        CaptureConfig { display: Some(x.display.clone()), afk_secs: 3600, rules: Default::default(), backend: cowork::desktop::backend::Backend::X11 },
        store.commands.clone(),
        sink.narrow(),
        RestartPolicy::default(),
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || store::open_read_only(&db)
            .ok()
            .and_then(|c| cowork::capture::db::recent_sessions(&c, 1).ok())
            .is_some_and(|s| s.first().is_some_and(|s| s.title == title && s.ended_at_millis.is_none()))),
        "capture recorded the active window"
    );

    let config = real_config(&db);
    let stop_epoch = Arc::new(AtomicU64::new(0));
    let mut brain = Brain::spawn(config, store.commands.clone(), sink, stop_epoch.clone());

    // 1. A streamed, non-empty answer; the context names the active window.
    let thread_id = next_id();
    let ask = request("Which application am I using right now?", thread_id);
    let (user_id, answer_id) = (ask.user_message_id, ask.answer_id);
    brain.agent.commands.send(AgentCommand::Chat(ask)).unwrap();
    let mut context = None;
    let mut streamed = String::new();
    let mut tokens = 0;
    let finished = wait_for(&events, Duration::from_secs(180), |event| match event {
        AppEvent::Agent(AgentEvent::ContextAttached { user_message_id, context: text }) if *user_message_id == user_id => {
            context = Some(text.clone());
            None
        }
        AppEvent::Agent(AgentEvent::Token { answer_id: id, text }) if *id == answer_id => {
            streamed.push_str(text);
            tokens += 1;
            None
        }
        AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: id, status, error, stats }) if *id == answer_id => {
            Some((*status, error.clone(), *stats))
        }
        _ => None,
    })
    .expect("answer finished");
    assert_eq!(finished.0, MessageStatus::Done, "error: {:?}", finished.1);
    assert!(tokens > 1, "streamed token by token, got {tokens}");
    assert!(!streamed.trim().is_empty());
    let context = context.expect("context attached");
    assert!(context.contains(title), "context sent to the model names the active window:\n{context}");
    eprintln!("answer: {streamed:?} ({:?})", finished.2);

    // Both messages are in the database, the context with the question.
    let (ack, done) = crossbeam_channel::bounded(1);
    store.commands.send(StoreCommand::Flush(ack)).unwrap();
    done.recv_timeout(Duration::from_secs(10)).unwrap();
    let reader = store::open_read_only(&db).unwrap();
    let saved = cowork::chat::messages(&reader, thread_id).unwrap();
    assert_eq!(saved.len(), 2);
    assert_eq!(saved[0].role, Role::User);
    assert!(saved[0].context.as_deref().unwrap_or_default().contains(title));
    assert_eq!(saved[1].content, streamed);
    // Its speed is kept for Settings and the default's speed floor: the figures of this answer.
    let model_file = chat_model().file_name().unwrap().to_string_lossy().into_owned();
    let speeds = cowork::llm::speed::Speeds::load(&cowork::llm::speed::path(dir.path()));
    let measured = speeds.measured(&model_file).expect("the answer's speed is kept");
    assert!(measured.first_token_ms > 0 && measured.tokens_per_sec > 0.0, "{measured:?}");
    if measured.samples == 1 {
        assert_eq!((measured.first_token_ms as u64, measured.tokens_per_sec), (finished.2.first_token_millis, finished.2.tokens_per_sec));
    }

    // 2. Stop ends generation within 1 s.
    let long = ChatRequest {
        history: vec![(Role::User, "Hi".into()), (Role::Assistant, "Hello!".into())],
        ..request("Write a very long story about a lighthouse keeper, in many paragraphs.", next_id())
    };
    let long_answer = long.answer_id;
    let mut config_tokens = 0;
    brain.agent.commands.send(AgentCommand::Chat(long)).unwrap();
    wait_for(&events, Duration::from_secs(60), |e| match e {
        AppEvent::Agent(AgentEvent::Token { answer_id, .. }) if *answer_id == long_answer => {
            config_tokens += 1;
            (config_tokens >= 3).then_some(())
        }
        _ => None,
    })
    .expect("generation started");
    let stop_pressed = Instant::now();
    stop_epoch.fetch_add(1, Ordering::SeqCst);
    let status = wait_for(&events, Duration::from_secs(5), |e| match e {
        AppEvent::Agent(AgentEvent::AnswerFinished { answer_id, status, .. }) if *answer_id == long_answer => Some(*status),
        _ => None,
    })
    .expect("stopped answer finished");
    let stop_latency = stop_pressed.elapsed();
    assert_eq!(status, MessageStatus::Stopped);
    assert!(stop_latency < Duration::from_secs(1), "Stop took {stop_latency:?}");
    eprintln!("stop latency {stop_latency:?}");
    // A stopped answer measures nothing.
    let speeds = cowork::llm::speed::Speeds::load(&cowork::llm::speed::path(dir.path()));
    assert_eq!(speeds.measured(&model_file).map(|m| m.samples), Some(measured.samples));

    assert!(capture.shutdown(CaptureCommand::Shutdown, Duration::from_secs(10)));
    assert!(brain.shutdown());
    assert!(store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10)));
}

#[test]
fn a_corrupt_model_is_a_clear_message_not_a_crash() {
    let dir = temp_dir();
    let bad = dir.path().join("model.gguf");
    std::fs::write(&bad, b"GGUF\x03\x00\x00\x00 but then garbage").unwrap();
    let (sink, events) = test_sink();
    let (store_tx, _store_rx) = crossbeam_channel::bounded(16);
    let (llm_config, agent_config) = real_config(&dir.path().join("cowork.db"));
    let llm_config = LlmConfig {
        model_path: bad,
        model_expected: Some((98_362_432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53".into())),
        ..llm_config
    };
    let mut brain = Brain::spawn((llm_config, agent_config), store_tx, sink, Arc::new(AtomicU64::new(0)));
    let ask = request("hello", next_id());
    let answer_id = ask.answer_id;
    brain.agent.commands.send(AgentCommand::Chat(ask)).unwrap();
    let error = wait_for(&events, Duration::from_secs(30), |e| match e {
        AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: id, error, .. }) if *id == answer_id => error.clone(),
        _ => None,
    })
    .expect("a failed answer with a message");
    assert!(error.contains("corrupt") && error.contains("cowork models fetch"), "{error}");
    assert!(brain.shutdown());
}

#[test]
fn the_local_model_summarises_an_older_hour_and_a_quiet_conversation_and_the_summaries_are_embedded() {
    if !require(chat_model().is_file(), "the SmolLM2 chat model") || !super::memory::have_minilm() {
        return;
    }
    let dir = temp_dir();
    let db = dir.path().join("cowork.db");
    let hour = 3_600_000;
    let start = (cowork::ids::now_millis() / hour - 3) * hour;
    {
        let conn = store::open_writer(&db).unwrap();
        for (i, (app, title)) in [("firefox", "Quarterly budget review - Google Sheets"), ("LibreOffice", "Budget 2027.ods"), ("Thunderbird", "Re: budget approval - Dana")]
            .iter()
            .enumerate()
        {
            let at = start + i as i64 * 600_000;
            let session = cowork::records::ActivitySession {
                session_id: 100 + i as i64,
                app: (*app).into(),
                title: (*title).into(),
                window_id: 1,
                started_at_millis: at,
                ended_at_millis: Some(at + 500_000),
                ..Default::default()
            };
            cowork::capture::db::upsert_session(&conn, &session).unwrap();
        }
        // A conversation that went quiet two hours ago.
        let thread = cowork::records::ChatThread { thread_id: 9, title: "Dinner on Friday".into(), updated_at_millis: start };
        cowork::chat::upsert_thread(&conn, &thread, start).unwrap();
        for (id, role, text) in [
            (1, cowork::records::Role::User, "Find me a vegetarian restaurant near Alexanderplatz for Friday at 8 pm, for four people."),
            (2, cowork::records::Role::Assistant, "Cookies Cream has vegetarian tasting menus and a table for four at 8 pm on Friday."),
            (3, cowork::records::Role::User, "Great, book Cookies Cream then."),
        ] {
            let message = cowork::records::ChatMessage {
                message_id: id,
                thread_id: 9,
                role,
                content: text.into(),
                context: None,
                status: cowork::records::MessageStatus::Done,
                created_at_millis: start + id * 60_000,
                ask_id: None,
                provider: None,
                cost_usd: None,
                citations: None,
                refusal: false,
            };
            cowork::chat::upsert_message(&conn, &message, None).unwrap();
        }
    }
    let (sink, _events) = test_sink();
    let mut store = spawn_store(db.clone(), sink.clone(), RestartPolicy::default()).unwrap();
    let config = real_config(&db);
    let mut brain = Brain::spawn(config, store.commands.clone(), sink, Arc::new(AtomicU64::new(0)));
    let (reply, written) = crossbeam_channel::bounded(1);
    brain.agent.commands.send(AgentCommand::Summarise { limit: 5, reply: Some(reply) }).unwrap();
    assert_eq!(written.recv_timeout(Duration::from_secs(240)).unwrap(), Ok(2), "one older hour had activity, one conversation went quiet");
    let (ack, flushed) = crossbeam_channel::bounded(1);
    store.commands.send(StoreCommand::Flush(ack)).unwrap();
    flushed.recv_timeout(Duration::from_secs(5)).unwrap();
    let conn = store::open_read_only(&db).unwrap();
    let (period, text, by): (i64, String, String) =
        conn.query_row("SELECT period_start_ms, text, model FROM observations WHERE kind = 'activity'", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    assert_eq!(period, start);
    assert!(!text.trim().is_empty());
    eprintln!("summary by {by}: {text:?}");
    let (first, last, said): (i64, i64, String) = conn
        .query_row("SELECT period_start_ms, period_end_ms, text FROM observations WHERE kind = 'conversation'", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    assert_eq!((first, last), (start + 60_000, start + 180_000), "spans the conversation");
    assert!(!said.trim().is_empty());
    eprintln!("conversation summary: {said:?}");
    // Asking again writes nothing new: that hour has its summary.
    let (reply, again) = crossbeam_channel::bounded(1);
    brain.agent.commands.send(AgentCommand::Summarise { limit: 5, reply: Some(reply) }).unwrap();
    assert_eq!(again.recv_timeout(Duration::from_secs(60)).unwrap(), Ok(0));
    assert!(brain.shutdown());
    assert!(store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10)));

    // The summary is queued and embedded into the observation namespace.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cowork"))
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--models-dir")
        .arg(models_dir())
        .args(["memory", "embed"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let observed: i64 = conn
        .query_row("SELECT count(*) FROM memory_chunks WHERE namespace = 'observation' AND vector IS NOT NULL", [], |r| r.get(0))
        .unwrap();
    assert!(observed >= 1);
}

/// The llm and agent workers' configurations for the bundled SmolLM2 over `db`.
pub(super) fn real_config(db: &std::path::Path) -> (LlmConfig, AgentConfig) {
    let manifest = Manifest::bundled().unwrap();
    let model = manifest.models.iter().find(|m| m.role == ModelRole::Chat && m.name == "smollm2-135m-instruct").unwrap();
    let (size, sha256) = model.primary_size_and_sha();
    let llm = LlmConfig {
        model_path: models_dir().join(model.primary_path()),
        model_expected: Some((size, sha256.to_owned())),
        local_limit_tokens: 1_500,
        max_answer_tokens: 48,
        idle_unload_secs: 600,
        sysfs: cowork::llm::LlmConfig::real_sysfs(),
        notify: None,
        speed_file: Some(cowork::llm::speed::path(db.parent().unwrap())),
    };
    let agent = AgentConfig {
        db_path: db.to_owned(),
        context_budget_tokens: 300,
        max_answer_tokens: 48,
        local_history_tokens: cowork::agent::history::LOCAL_BUDGET_TOKENS,
        cloud_history_tokens: cowork::agent::history::CLOUD_CAP_TOKENS,
        data_dir: db.parent().unwrap().to_owned(),
        local_limit_tokens: 1_500,
        recall: None,
        mcp: None,
        automations: None,
        flows: None,
        keys_at_millis: Default::default(),
    };
    (llm, agent)
}

/// The local engine and the agent that asks it, as `Workers::start` wires them.
pub(super) struct Brain {
    pub(super) llm: WorkerHandle<LlmCommand>,
    pub(super) agent: WorkerHandle<AgentCommand>,
}

impl Brain {
    pub(super) fn spawn((llm, agent): (LlmConfig, AgentConfig), store: crossbeam_channel::Sender<StoreCommand>, sink: EventSink<cowork::events::AppEvent>, stop_epoch: Arc<AtomicU64>) -> Self {
        let local = Arc::new(cowork::llm::LocalModelState::default());
        let llm = spawn_llm(llm, sink.narrow(), stop_epoch.clone(), local.clone(), RestartPolicy::default()).unwrap();
        let agent = spawn_agent(agent, llm.commands.clone(), local, store, sink.narrow(), stop_epoch, RestartPolicy::default()).unwrap();
        Self { llm, agent }
    }

    pub(super) fn shutdown(&mut self) -> bool {
        self.agent.shutdown(AgentCommand::Shutdown, Duration::from_secs(10)) && self.llm.shutdown(LlmCommand::Shutdown, Duration::from_secs(10))
    }
}

/// The grounded-answer evaluation (scripts/eval-grounded): a scripted morning
/// replayed through `capture simulate`, 25 questions written beforehand whose
/// answers are in the captured context, answered by the real default model
/// through `cowork ask`, with cowork's wall clock frozen at 11:30 (libfaketime)
/// so every run sends the same prompts. The floor is the target, 85 %
/// (22/25); the bundled Qwen2.5-Coder-0.5B scores 24 with greedy decoding at
/// that clock, the same misses on every run (21 with the morning ending at
/// 09:40 and 15:10: the clock's tokens alone move an answer). Run at
/// the real clock it scored 20–23 by time of day, which no floor can check. So a
/// change to the prompt, the context, the sampler or a kernel that costs an
/// answer fails.
/// It also checks that a warm model answers later questions from the prefix cache.
#[test]
fn the_default_model_answers_questions_about_a_scripted_morning_from_its_context() {
    let qwen = models_dir().join("qwen2.5-coder-0.5b-instruct/qwen2.5-coder-0.5b-instruct-q8_0.gguf");
    if !require(qwen.is_file() && super::memory::have_minilm(), "the Qwen chat model and MiniLM") {
        return;
    }
    let out = std::process::Command::new("python3")
        .arg(super::support::repo_dir().join("scripts/eval-grounded"))
        .args(["--json", "--cowork", env!("CARGO_BIN_EXE_cowork"), "--models-dir"])
        .arg(models_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("grounded answers: {report:#}");
    let (score, questions) = (report["score"].as_u64().unwrap(), report["questions"].as_u64().unwrap());
    assert_eq!(questions, 25);
    assert!(score >= 22, "{score}/{questions} right; misses: {:#}", report["misses"]);
    // Later questions share the prompt's head with the first: only their own turn is prefilled.
    let (first, later) = (report["first_question_first_token_ms"].as_u64().unwrap(), report["first_token_ms_median"].as_f64().unwrap());
    assert!(later * 2.0 < first as f64, "prefix cache: first question {first} ms, later median {later} ms");
}

/// A long prompt goes through the layers in chunks (mistralrs-core patch 7, 512 tokens by
/// default); each chunk must see the keys the chunks before it cached, at the right positions.
/// With the real SmolLM2 and greedy decoding, a 650-token prompt answers the same in one pass
/// and in 128-token chunks, and the prompt is the same length both ways. (Short enough not to
/// starve the timing-sensitive desktop tests running beside it on two cores.)
#[test]
fn a_long_prompt_answers_the_same_in_chunks_as_in_one_pass() {
    if !require(chat_model().is_file(), "the SmolLM2 chat model") {
        return;
    }
    let apps = ["VS Code: budget-2026.ods", "Terminal: Pull request #412", "Firefox: Re: Offsite venue", "Evince: Standup notes"];
    let mut prompt = String::from("Here is my activity log:\n");
    for i in 0..32 {
        prompt += &format!("{:02}:{:02} {} (typed: item {i} checked)\n", 8 + i / 20, (i % 20) * 3, apps[i % apps.len()]);
    }
    prompt += "Which item did I check in Evince at 08:27?";
    let ask = |chunk: &str| -> serde_json::Value {
        let dir = temp_dir();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cowork"))
            .env("MISTRALRS_PREFILL_CHUNK", chunk)
            .env("COWORK_LOG", "error")
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--models-dir")
            .arg(models_dir())
            .args(["ask", "--forget", "--json", "--local-model", "smollm2-135m-instruct", &prompt])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (whole, chunked) = (ask("0"), ask("128"));
    let tokens = whole["prompt_tokens"].as_u64().unwrap();
    assert!(tokens > 512, "the prompt spans several chunks: {tokens} tokens");
    assert_eq!(chunked["prompt_tokens"].as_u64(), Some(tokens));
    let answer = whole["answer"].as_str().unwrap();
    assert!(!answer.trim().is_empty());
    assert_eq!(chunked["answer"].as_str(), Some(answer), "chunked prefill changed the answer");
}

/// The engine says how much of a prompt its prefix cache held and how long
/// reading the rest took (mistralrs-core PATCH.md change 16): a local
/// question's notes are budgeted on that rate (`agent::notes_budget`).
#[test]
fn the_engine_reports_the_tokens_it_read_apart_from_the_prefix_cache() {
    if !require(chat_model().is_file(), "the SmolLM2 chat model") {
        return;
    }
    let dir = temp_dir();
    let question = "Name three colours of the rainbow, please, in one short sentence.";
    // The clock frozen: both prompts say the same time.
    let (out, threads) = super::support::run_watching_threads(at_morning(dir.path(), &["ask", "--forget", "--json", "--local-model", "smollm2-135m-instruct", question, question]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The user waits for a question: it runs at normal priority, not on the background threads.
    assert!(threads.iter().all(|t| !t.name.starts_with("llm-low")), "{threads:?}");
    let answers: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let field = |n: usize, name: &str| answers[n][name].as_u64().unwrap_or_else(|| panic!("{name} in {}", answers[n]));
    // The first reads its whole prompt, in measurable time.
    assert_eq!(field(0, "cached_prompt_tokens"), 0, "{}", answers[0]);
    assert!(field(0, "prompt_ms") > 0 && field(0, "prompt_tokens") > 50, "{}", answers[0]);
    // The same question again: all but its last token comes from the cache (PATCH.md change 15).
    let (prompt, cached) = (field(1, "prompt_tokens"), field(1, "cached_prompt_tokens"));
    assert_eq!(prompt, field(0, "prompt_tokens"), "the same prompt: {answers:?}");
    assert!(cached + 2 >= prompt && cached < prompt, "the cache held all but the last token or so: {answers:?}");
}

/// The bundled default chat model (Qwen2.5-Coder-0.5B, Q8_0).
pub(super) fn qwen() -> std::path::PathBuf {
    models_dir().join("qwen2.5-coder-0.5b-instruct/qwen2.5-coder-0.5b-instruct-q8_0.gguf")
}

/// Runs cowork with its wall clock frozen at the scripted morning's end (libfaketime, as
/// scripts/eval-grounded does), so a real model sees the same prompt on every run.
pub(super) fn cowork_at_morning(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    at_morning(data, args).stdin(std::process::Stdio::null()).output().unwrap()
}

/// The command `cowork_at_morning` runs.
fn at_morning(data: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new("faketime");
    command
        .args(["-f", "2026-11-24 11:30:00", env!("CARGO_BIN_EXE_cowork")])
        .arg("--data-dir")
        .arg(data)
        .arg("--models-dir")
        .arg(models_dir())
        .args(args)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("COWORK_LOG", "info");
    command
}

/// A data directory holding the scripted morning of the grounded evaluation, captured.
pub(super) fn captured_morning() -> tempfile::TempDir {
    let data = temp_dir();
    let script = super::support::repo_dir().join("assets/scripts/grounded-morning.jsonl");
    let out = cowork_at_morning(data.path(), &["capture", "simulate", "--script", script.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    data
}

/// The agent's calls, oldest first: (tool, arguments, status, output).
pub(super) fn agent_calls(data: &std::path::Path) -> Vec<(String, String, String, String)> {
    let conn = store::open_read_only(&data.join("cowork.db")).unwrap();
    let mut stmt = conn.prepare("SELECT tool, arguments, status, coalesce(output, '') FROM operation_calls ORDER BY started_at_ms, call_id").unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).unwrap().map(Result::unwrap).collect()
}

/// `cowork ARGS` on the data directory at the morning's end, as it ran.
fn out_of(data: &tempfile::TempDir, args: &[&str]) -> std::process::Output {
    cowork_at_morning(data.path(), args)
}

/// The "agent step" lines the agent logs: (prompt tokens, model ms) per step.
pub(super) fn agent_steps(stderr: &str) -> Vec<(u64, u64)> {
    let field = |line: &str, key: &str| line.split(key).nth(1).and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()).and_then(|n| n.parse().ok());
    stderr.lines().filter(|l| l.contains("agent step")).filter_map(|l| Some((field(l, "prompt_tokens=")?, field(l, "model_millis=")?))).collect()
}

/// The agent with the real default model through mistralrs, asked "what was I just doing?"
/// about a captured morning. By default a question that can only read memory is answered from
/// the recorded context in one pass (no tool step: `agent::local::reads_memory_only`). With that
/// switched off, its first step calls a memory or context tool (a grammar makes the small model
/// call one; it picks which and with what arguments) and its answer uses what the tool returned.
/// The prompt size and time of each step are printed.
#[test]
fn the_local_model_answers_what_was_i_just_doing_by_calling_a_memory_tool() {
    if !require(qwen().is_file(), "the Qwen chat model") || !require(super::support::have_program("faketime"), "faketime") {
        return;
    }
    let data = captured_morning();
    // Answered from the context, `<no-memory>` (--forget) still keeps neither question nor answer.
    let out = cowork_at_morning(data.path(), &["ask", "--agent", "--forget", "What was I just doing?"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let kept: i64 = store::open_read_only(&data.path().join("cowork.db")).unwrap().query_row("SELECT count(*) FROM chat_messages", [], |r| r.get(0)).unwrap();
    assert_eq!(kept, 0, "a forgotten question was kept");
    let started = Instant::now();
    let out = cowork_at_morning(data.path(), &["ask", "--agent", "What was I just doing?"]);
    let (answer, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success(), "{stderr}");
    eprintln!("from the context: {answer:?} in {:?}, the model's load included", started.elapsed());
    assert!(agent_steps(&stderr).is_empty() && agent_calls(data.path()).is_empty(), "no tool step: {stderr}");
    let lower = answer.to_lowercase();
    assert!(["rounding", "billing", "visual studio", "code"].iter().any(|w| lower.contains(w)), "the answer names the last window: {answer:?}");
    assert!(out_of(&data, &["settings", "set", "agent.memory_from_context", "false"]).status.success());
    let started = Instant::now();
    let out = cowork_at_morning(data.path(), &["ask", "--agent", "What was I just doing?"]);
    let elapsed = started.elapsed();
    let (answer, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success(), "{stderr}");
    let steps = agent_steps(&stderr);
    eprintln!("answer: {answer:?}\nsteps (prompt tokens, model ms): {steps:?}; {elapsed:?} in all, the model's load included");
    let calls = agent_calls(data.path());
    let (tool, arguments, status, output) = calls.first().expect("the model called a tool");
    assert!(cowork::tools::memory::TOOLS.contains(&tool.as_str()), "a memory or context tool: {tool} {arguments}");
    assert_eq!(status, "done", "{output}");
    assert_eq!(steps.len(), calls.len() + 1, "a step per call and one to answer: {steps:?}");
    // The answer uses the result: it names something only the tool's output held.
    let question = "what was i just doing";
    let words: Vec<String> = output
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 5 && !w.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_lowercase)
        .filter(|w| !question.contains(w.as_str()) && !["session", "window"].contains(&w.as_str()))
        .collect();
    let lower = answer.to_lowercase();
    assert!(words.iter().any(|w| lower.contains(w.as_str())), "the answer {answer:?} uses none of the tool's result:\n{output}");
}

/// The real default model with a document (issue 44): asked about a Word
/// document it is named, the local agent reads it with `read_document` (the
/// one tool the question is about) and answers from the page that says it.
#[test]
fn the_local_model_reads_a_named_document_and_answers_from_it() {
    if !require(qwen().is_file(), "the Qwen chat model") {
        return;
    }
    let home = std::path::PathBuf::from(std::env::var("HOME").unwrap());
    let folder = tempfile::Builder::new().prefix("real-document-").tempdir_in(&home).unwrap();
    let plan = folder.path().join("plan.docx");
    cowork::documents::write::write(&plan, Some("# Zoo plan\n\nIntroductions and the schedule.\n\n<!-- pagebreak -->\n# Money\n\nThe okapi budget is 4200 euros for the year.\n"), &[]).unwrap();
    let data = temp_dir();
    let started = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cowork"))
        .env("COWORK_LOG", "info")
        .arg("--data-dir")
        .arg(data.path())
        .arg("--models-dir")
        .arg(models_dir())
        .args(["ask", "--agent", &format!("How big is the okapi budget in {}?", plan.display())])
        .output()
        .unwrap();
    let (answer, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success(), "{stderr}");
    eprintln!("answer: {answer:?} in {:?}, the model's load included", started.elapsed());
    let calls = agent_calls(data.path());
    let (tool, _, status, output) = calls.first().expect("the model read the document");
    assert_eq!((tool.as_str(), status.as_str()), ("read_document", "done"), "{output}");
    assert!(output.contains("--- page 2 ---") && output.contains("4200"), "{output}");
    assert!(answer.contains("4200") || answer.contains("4,200"), "the answer uses the page: {answer:?}");
}
