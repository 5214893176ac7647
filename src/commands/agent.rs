//! The agent from the command line: `cowork ask --agent "task"` runs an
//! operation headlessly (on a terminal each approval is a y/N question;
//! without one nothing that needs approval runs: the pending call is printed
//! and the exit status is 3, the operation waits in the database), `cowork
//! approve CALL [--deny]` decides a waiting call and continues its operation
//! (after a crash too), `cowork tools`, `cowork rules` and `cowork audit`.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, bail};
use crossbeam_channel::{Receiver, bounded};

use crate::agent::{AgentCommand, ChatRequest};
use crate::agent::events::{AgentEvent, ApprovalChoice, CallStatus, ToolCallView};
use crate::agent::store::{self as agent_store, AgentWrite};
use crate::config::Paths;
use crate::events::AppEvent;
use crate::ids::{next_id, now_millis};
use crate::llm::events::LocalModelEvent;
use crate::records::{ChatThread, MessageStatus};
use crate::runtime::{EventSink, RestartPolicy, RuntimeEvent};
use crate::tools::policy::{Action, Pattern, Rule, Scope};
use crate::workers::{WorkerOptions, Workers};

/// Exit status when a call waits for approval and there is no terminal to ask on.
pub const EXIT_NEEDS_APPROVAL: u8 = 3;

fn start(paths: &Paths) -> anyhow::Result<(Workers, Receiver<AppEvent>)> {
    start_with(paths, None)
}

fn start_with(paths: &Paths, local_model: Option<&str>) -> anyhow::Result<(Workers, Receiver<AppEvent>)> {
    let (events_tx, events) = bounded(4096);
    let sink = EventSink::new(events_tx, || {});
    let options = WorkerOptions {
        capture: false,
        display: None,
        chat_model: super::ask::chosen_chat_model(paths, local_model)?,
        policy: RestartPolicy { max_restarts: 0, ..RestartPolicy::default() },
        require_consent: false,
        automations: false,
    };
    let (workers, _settings, _warnings) = Workers::start(paths, options, sink)?;
    Ok((workers, events))
}

/// How long a headless task waits for configured MCP servers to finish starting.
const MCP_READY_WAIT: Duration = Duration::from_secs(30);

/// `cowork ask --agent "task"` (`brain`: `--provider NAME [--model M]` or
/// `--local-model NAME`; None: routed as in the sidebar). The task starts
/// once the configured MCP servers have started (or failed to), so their
/// tools are on offer from the first step. Returns the exit status.
pub fn ask_agent(paths: &Paths, task: &str, brain: Option<crate::agent::BrainChoice>, local_model: Option<&str>) -> anyhow::Result<u8> {
    let (workers, events) = start_with(paths, local_model)?;
    wait_for_mcp(&workers);
    let thread = ChatThread { thread_id: next_id(), title: crate::state::thread_title(task), updated_at_millis: now_millis() };
    let user_message_id = next_id();
    let answer_id = next_id();
    let request = ChatRequest { agent: true, brain, ..ChatRequest::new(thread, true, user_message_id, answer_id, task) };
    workers.agent.commands.send(AgentCommand::Chat(request))?;
    let outcome = drive(&workers, &events, Some(answer_id), None, paths);
    workers.shutdown(Duration::from_secs(5));
    outcome
}

/// One task of `cowork ask --agent --json`, as printed: the answer, how the
/// operation ended, each brain step's cost and every call with its outcome.
#[derive(Debug, Default, serde::Serialize)]
struct TaskReport {
    task: String,
    answer: String,
    /// done, waiting (a call waits for approval), paused (a guardrail), failed, stopped or consent.
    outcome: String,
    /// Who answered: "local · agent" for a task, "local" when a memory question was answered
    /// from the recorded context in one pass (no task, no calls).
    answered_by: String,
    error: Option<String>,
    /// Time to load the model, when this task loaded it.
    load_ms: u64,
    /// From the task sent to the first word of the answer the user sees (the model's load excluded).
    first_token_ms: u64,
    total_ms: u64,
    steps: Vec<StepReport>,
    calls: Vec<CallReport>,
}

#[derive(Debug, serde::Serialize)]
struct StepReport {
    prompt_tokens: usize,
    first_token_ms: u64,
    model_ms: u64,
}

#[derive(Debug, serde::Serialize)]
struct CallReport {
    call_id: i64,
    tool: String,
    arguments: serde_json::Value,
    risk: String,
    status: String,
    is_error: bool,
    /// The head of its result.
    output: String,
}

/// `cowork ask --agent --json TASK [TASK ...]`: each task in turn with the
/// model loaded once, one JSON line a task (the agent evaluation reads them).
/// Nothing is asked: a call that needs approval stays waiting (as without a
/// terminal) and the next task starts. `forget`: no chat is kept.
/// `follow_up`: the tasks are one thread, each with the ones before as its history.
pub fn ask_agent_json(paths: &Paths, tasks: &[String], brain: Option<crate::agent::BrainChoice>, local_model: Option<&str>, forget: bool, follow_up: bool, warm: bool) -> anyhow::Result<u8> {
    let (workers, events) = start_with(paths, local_model)?;
    wait_for_mcp(&workers);
    if warm {
        super::ask::warm(&workers, &events, true)?;
    }
    let mut stdout = std::io::stdout().lock();
    let mut worst = 0u8;
    let mut thread: Option<ChatThread> = None;
    let mut history = Vec::new();
    for task in tasks {
        let answer_id = next_id();
        let user_message_id = next_id();
        let new_thread = thread.is_none() || !follow_up;
        if new_thread {
            thread = Some(ChatThread { thread_id: next_id(), title: crate::state::thread_title(task), updated_at_millis: now_millis() });
            history.clear();
        }
        let thread = thread.clone().expect("set above");
        let text = if forget { format!("<no-memory> {task}") } else { task.clone() };
        let request = ChatRequest { agent: true, brain: brain.clone(), history: history.clone(), ..ChatRequest::new(thread, new_thread, user_message_id, answer_id, text) };
        let started = std::time::Instant::now();
        workers.agent.commands.send(AgentCommand::Chat(request))?;
        let mut report = TaskReport { task: task.clone(), ..TaskReport::default() };
        collect_task(&events, answer_id, started, &mut report)?;
        report.total_ms = (started.elapsed().as_millis() as u64).saturating_sub(report.load_ms);
        worst = worst.max(match report.outcome.as_str() {
            "done" => 0,
            "waiting" | "paused" | "consent" => EXIT_NEEDS_APPROVAL,
            _ => 1,
        });
        history.push((crate::records::Role::User, task.clone()));
        history.push((crate::records::Role::Assistant, report.answer.clone()));
        writeln!(stdout, "{}", serde_json::to_string(&report)?)?;
        stdout.flush()?;
    }
    workers.shutdown(Duration::from_secs(5));
    Ok(worst)
}

/// Follows one task's events until it ends or waits for someone.
fn collect_task(events: &Receiver<AppEvent>, answer_id: i64, started: std::time::Instant, report: &mut TaskReport) -> anyhow::Result<()> {
    loop {
        let Ok(event) = events.recv_timeout(Duration::from_secs(600)) else { bail!("the task gave no sign for 10 minutes") };
        match event {
            AppEvent::LocalModel(LocalModelEvent::Model(crate::llm::events::ModelStatus::Ready { load_millis, .. })) => report.load_ms = load_millis,
            AppEvent::Agent(AgentEvent::Routed { answer_id: id, answered_by, .. }) if id == answer_id => report.answered_by = answered_by,
            AppEvent::Agent(AgentEvent::Token { answer_id: id, text }) if id == answer_id => {
                if report.answer.trim().is_empty() && !text.trim().is_empty() {
                    report.first_token_ms = (started.elapsed().as_millis() as u64).saturating_sub(report.load_ms);
                }
                report.answer.push_str(&text);
            }
            AppEvent::Agent(AgentEvent::AgentStep { answer_id: id, prompt_tokens, first_token_millis, model_millis, .. }) if id == answer_id => {
                report.steps.push(StepReport { prompt_tokens, first_token_ms: first_token_millis, model_ms: model_millis });
            }
            AppEvent::Agent(AgentEvent::ToolCall(call)) if call.answer_id == answer_id => {
                let output: String = call.output.as_deref().unwrap_or_default().chars().take(400).collect();
                let row = CallReport {
                    call_id: call.call_id,
                    tool: call.tool.clone(),
                    arguments: call.arguments.clone(),
                    risk: call.risk.clone(),
                    status: call.status.as_str().to_owned(),
                    is_error: call.is_error,
                    output,
                };
                match report.calls.iter_mut().find(|c| c.call_id == call.call_id) {
                    Some(known) => *known = row,
                    None => report.calls.push(row),
                }
            }
            AppEvent::Agent(AgentEvent::Operation { answer_id: id, status: crate::agent::events::OpStatus::WaitingForHuman, paused, .. }) if id == answer_id => {
                report.outcome = if paused.is_some() { "paused" } else { "waiting" }.into();
                report.error = paused;
                return Ok(());
            }
            AppEvent::Agent(AgentEvent::ConsentNeeded { request, .. }) if request.answer_id == answer_id => {
                report.outcome = "consent".into();
                return Ok(());
            }
            AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: id, status, error, .. }) if id == answer_id => {
                report.outcome = match status {
                    MessageStatus::Failed => "failed",
                    MessageStatus::Stopped => "stopped",
                    _ => "done",
                }
                .into();
                report.error = error;
                return Ok(());
            }
            _ => {}
        }
    }
}

/// Waits (a bounded time) for the configured MCP servers to finish starting,
/// so their tools are on offer from a task's first step.
fn wait_for_mcp(workers: &Workers) {
    let mcp = crate::mcp::worker::McpClient { commands: workers.mcp.commands.clone() };
    let deadline = std::time::Instant::now() + MCP_READY_WAIT;
    loop {
        let now = mcp.offered(Duration::from_millis(500));
        if now.starting.is_empty() || std::time::Instant::now() >= deadline {
            if !now.starting.is_empty() {
                eprintln!("cowork: still starting after {} s, left out of this task: {}", MCP_READY_WAIT.as_secs(), now.starting.join(", "));
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the command line decides as soon as the resumed operation shows it.
#[derive(Clone, Copy)]
enum Decide {
    Call { call_id: i64 },
    Continue(i64),
}

/// `cowork approve CALL [--deny]`: decides a waiting call. The decision is
/// one compare-and-swap in cowork.db: a call someone else decided already
/// (the sidebar, a notification, another `cowork approve`) is refused with
/// who did (exit status 1). A task another running cowork drives is decided
/// for it (that process runs the call; this one waits for the result); a
/// task whose process is gone is taken over and driven on here.
pub fn approve(paths: &Paths, call_id: i64, deny: bool) -> anyhow::Result<u8> {
    if let Ok(conn) = crate::store::open_read_only(&paths.db_path())
        && let Ok(Some(call)) = agent_store::call(&conn, call_id)
        && call.status != CallStatus::Waiting
    {
        eprintln!("call {call_id} was already decided by {} (it is {})", call.decided_by.as_deref().unwrap_or("cowork"), call.status.as_str());
        return Ok(1);
    }
    let (workers, events) = start(paths)?;
    let choice = if deny { ApprovalChoice::Deny { reason: "denied from the command line".into() } } else { ApprovalChoice::Once };
    workers.agent.commands.send(AgentCommand::DecideAs { call_id, choice, by: "cowork approve".into() })?;
    let outcome = drive(&workers, &events, None, Some(Decide::Call { call_id }), paths);
    workers.shutdown(Duration::from_secs(5));
    outcome
}

/// How waiting on another process's call ended.
enum Waited {
    /// It settled: the exit status.
    Settled(u8),
    /// Its process went away first: this one takes the task over.
    OwnerGone { operation_id: i64, answer_id: Option<i64> },
}

/// Waits for a call another process runs to settle, and prints its result.
fn wait_for_owner(paths: &Paths, call_id: i64, owner_pid: &str) -> anyhow::Result<Waited> {
    eprintln!("decided: the cowork that drives this task (pid {owner_pid}) runs call {call_id}");
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let started = std::time::Instant::now();
    loop {
        let call = agent_store::call(&conn, call_id)?.ok_or_else(|| anyhow::anyhow!("call {call_id} is gone"))?;
        if call.status.settled() {
            eprintln!("[{} {}]", call.tool, call.status.as_str());
            if let Some(output) = &call.output {
                println!("{output}");
            }
            return Ok(Waited::Settled(if call.status == CallStatus::Done { 0 } else { 1 }));
        }
        let op = agent_store::operation(&conn, call.operation_id)?;
        if let Some(op) = op
            && op.owner.as_deref().is_none_or(|o| !agent_store::owner_alive(o))
        {
            return Ok(Waited::OwnerGone { operation_id: op.operation_id, answer_id: op.answer_id });
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("call {call_id} has not finished after 10 minutes (it is {}); see cowork audit", call.status.as_str());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Streams an operation's answer and handles what waits for the user.
fn drive(workers: &Workers, events: &Receiver<AppEvent>, mut answer_id: Option<i64>, mut decide: Option<Decide>, paths: &Paths) -> anyhow::Result<u8> {
    // The call this command decides (its decision is on its way): not asked about again.
    let deciding = match decide {
        Some(Decide::Call { call_id, .. }) => Some(call_id),
        _ => None,
    };
    let tty = std::io::stdin().is_terminal();
    let mut stdout = std::io::stdout().lock();
    let started = std::time::Instant::now();
    // Calls that wait, asked about once the operation is saved as waiting.
    let mut waiting: Vec<ToolCallView> = Vec::new();
    loop {
        let event = match events.recv_timeout(Duration::from_secs(1)) {
            Ok(event) => event,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if decide.is_some() && started.elapsed() > Duration::from_secs(10) {
                    bail!("nothing waits on that call or operation (see cowork audit)");
                }
                continue;
            }
            Err(_) => bail!("the agent stopped"),
        };
        match event {
            AppEvent::Agent(AgentEvent::Token { answer_id: id, text }) if Some(id) == answer_id => {
                stdout.write_all(text.as_bytes())?;
                stdout.flush()?;
            }
            AppEvent::Agent(AgentEvent::DecisionRefused { call_id, why }) if deciding == Some(call_id) => {
                eprintln!("{why}");
                return Ok(1);
            }
            AppEvent::Agent(AgentEvent::DecidedForOwner { call_id, owner_pid }) if deciding == Some(call_id) => match wait_for_owner(paths, call_id, &owner_pid)? {
                Waited::Settled(code) => return Ok(code),
                Waited::OwnerGone { operation_id, answer_id: id } => {
                    eprintln!("cowork (pid {owner_pid}) stopped before running it: the task goes on here");
                    answer_id = id;
                    decide = None;
                    workers.agent.commands.send(AgentCommand::Resume(operation_id))?;
                }
            },
            AppEvent::Agent(AgentEvent::ToolCall(call)) => {
                if let Some(Decide::Call { call_id, .. }) = decide
                    && call.call_id == call_id
                {
                    // Taken over here: its answer streams here.
                    answer_id = Some(call.answer_id);
                    decide = None;
                }
                if Some(call.answer_id) != answer_id {
                    continue;
                }
                waiting.retain(|c| c.call_id != call.call_id);
                match call.status {
                    CallStatus::Waiting if deciding == Some(call.call_id) => {}
                    CallStatus::Waiting => waiting.push(*call),
                    CallStatus::Running if call.duration_millis.is_some() => eprintln!("[{} {}]", call.tool, crate::ui::agent::arguments_text(&call).lines().next().unwrap_or_default()),
                    status if status.settled() => {
                        let took = call.duration_millis.map(|ms| format!(", {ms} ms")).unwrap_or_default();
                        eprintln!("[{} {}{took}]", call.tool, status.as_str());
                    }
                    _ => {}
                }
            }
            AppEvent::Agent(AgentEvent::Operation { operation_id, answer_id: id, paused: Some(_), .. }) if matches!(decide, Some(Decide::Continue(op)) if op == operation_id) => {
                answer_id = Some(id);
                decide = None;
                workers.agent.commands.send(AgentCommand::Continue { operation_id, go_on: true })?;
            }
            AppEvent::Agent(AgentEvent::Operation { answer_id: id, status: crate::agent::events::OpStatus::WaitingForHuman, paused: None, .. }) if Some(id) == answer_id && !waiting.is_empty() => {
                // The operation is saved as waiting: a crash from here on loses nothing.
                for call in std::mem::take(&mut waiting) {
                    if !tty {
                        print_pending(&call);
                        return Ok(EXIT_NEEDS_APPROVAL);
                    }
                    let choice = ask_on_terminal(&call)?;
                    workers.agent.commands.send(AgentCommand::Decide { call_id: call.call_id, choice })?;
                }
            }
            AppEvent::Agent(AgentEvent::Operation { operation_id, answer_id: id, paused: Some(why), .. }) if Some(id) == answer_id => {
                let text = why.split_once(": ").map_or(why.as_str(), |(_, rest)| rest).to_owned();
                if !tty {
                    println!("\npaused: {text}\ncontinue with: cowork approve --continue {operation_id}");
                    return Ok(EXIT_NEEDS_APPROVAL);
                }
                let go_on = yes_no(&format!("\n{text} Continue? [y/N] "))?;
                workers.agent.commands.send(AgentCommand::Continue { operation_id, go_on })?;
            }
            AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: id, status, error, .. }) if Some(id) == answer_id => {
                writeln!(stdout)?;
                return match (status, error) {
                    (MessageStatus::Failed, Some(error)) => bail!(error),
                    (MessageStatus::Stopped, _) => Ok(1),
                    _ => Ok(0),
                };
            }
            AppEvent::Agent(AgentEvent::ConsentNeeded { provider, preview, request, .. }) if Some(request.answer_id) == answer_id => {
                // A cloud brain not asked about yet: on a terminal, this task's answer; else the sidebar's.
                println!("\n{preview}");
                if !tty {
                    println!("decide in cowork's sidebar (or run this on a terminal to allow it once)");
                    return Ok(EXIT_NEEDS_APPROVAL);
                }
                let mut request = *request;
                request.consent_once = yes_no(&format!("Let {provider} see what cowork recorded, for this task only? [y/N] "))?;
                if !request.consent_once {
                    println!("not asked again for this task: run it with the local model, or allow {provider} in Settings");
                    return Ok(EXIT_NEEDS_APPROVAL);
                }
                workers.agent.commands.send(AgentCommand::Chat(request))?;
            }
            AppEvent::Runtime(RuntimeEvent::Notice(text)) if !text.contains("already decided by") => eprintln!("cowork: {text}"),
            _ => {}
        }
    }
}

fn print_pending(call: &ToolCallView) {
    println!("\nwaiting for approval: call {} {} ({})", call.call_id, call.tool, call.risk);
    println!("  {}", crate::ui::agent::arguments_text(call).replace('\n', "\n  "));
    println!("  why it asks: {}", call.why);
    println!("approve with: cowork approve {}   deny with: cowork approve {} --deny", call.call_id, call.call_id);
}

fn ask_on_terminal(call: &ToolCallView) -> anyhow::Result<ApprovalChoice> {
    if call.tool == "ask_user" {
        let question = call.arguments.get("question").and_then(|q| q.as_str()).unwrap_or_default();
        eprint!("\n{question}\n> ");
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        return Ok(ApprovalChoice::Answer(line.trim().to_owned()));
    }
    eprintln!("\n{} ({}) wants to run:\n  {}\n  {}", call.tool, call.risk, crate::ui::agent::arguments_text(call).replace('\n', "\n  "), call.why);
    Ok(if yes_no("Run it? [y/N] ")? { ApprovalChoice::Once } else { ApprovalChoice::Deny { reason: "the user said no".into() } })
}

fn yes_no(prompt: &str) -> anyhow::Result<bool> {
    eprint!("{prompt}");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}

/// `cowork approve --continue OPERATION`: a paused operation goes on.
pub fn continue_operation(paths: &Paths, operation_id: i64) -> anyhow::Result<u8> {
    {
        let conn = crate::store::open_read_only(&paths.db_path())?;
        let op = agent_store::operation(&conn, operation_id)?.context("no such operation")?;
        if let Some(owner) = op.owner.as_deref().filter(|o| agent_store::owner_alive(o)) {
            bail!("operation {operation_id} is driven by the cowork with pid {}: continue it there", agent_store::owner_pid(owner));
        }
    }
    let (workers, events) = start(paths)?;
    let outcome = drive(&workers, &events, None, Some(Decide::Continue(operation_id)), paths);
    workers.shutdown(Duration::from_secs(5));
    outcome
}

/// `cowork tools [--json]`.
pub fn tools(json: bool) -> anyhow::Result<()> {
    let listing = crate::tools::registry::listing();
    if json {
        println!("{}", serde_json::to_string_pretty(&listing)?);
    } else {
        for tool in listing {
            println!("{:<16} {:<10} {:<13} {}", tool.name, tool.risk.as_str(), serde_json::to_value(tool.family)?.as_str().unwrap_or_default(), tool.description);
        }
    }
    Ok(())
}

/// `cowork rules list`.
pub fn rules_list(paths: &Paths) -> anyhow::Result<()> {
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let (rules, problems) = agent_store::rules(&conn)?;
    for rule in &rules {
        println!("{}\t{}", rule.id, agent_store::rule_text(rule));
    }
    for problem in problems {
        eprintln!("skipped: {problem}");
    }
    if rules.is_empty() {
        eprintln!("no rules: safe calls run, the others ask");
    }
    Ok(())
}

/// `cowork rules add`: checked against `example` (the arguments of a call it
/// is meant for) before it is saved.
pub fn rules_add(paths: &Paths, tool: &str, action: &str, target: Option<&str>, pattern: Option<&str>, until: Option<i64>, example: Option<&str>) -> anyhow::Result<i64> {
    let action = match action {
        "allow" => Action::Allow,
        "ask" => Action::Ask,
        "deny" => Action::Deny,
        other => bail!("the action is allow, ask or deny, not {other:?}"),
    };
    if tool != "*" && crate::tools::registry::get(tool).is_none() {
        bail!("there is no tool {tool:?} (see cowork tools)");
    }
    let pattern = match (target, pattern) {
        (Some(target), Some(source)) => Some(Pattern::new(agent_store::parse_target(target).map_err(anyhow::Error::msg)?, source).map_err(anyhow::Error::msg)?),
        (None, None) => None,
        _ => bail!("--target and --pattern go together"),
    };
    let rule = Rule { id: next_id(), tool: tool.to_owned(), action, pattern, scope: until.map_or(Scope::Always, Scope::Until) };
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from).unwrap_or_default();
    let data_dir = paths.data_dir.canonicalize().unwrap_or_else(|_| paths.data_dir.clone());
    let files = crate::tools::files::FilesEnv { cwd: home.clone(), home: home.clone(), data_dir: data_dir.clone() };
    let ctx = crate::tools::policy::Context { operation_id: 0, now_millis: now_millis(), data_dir: &data_dir, home: &home, cwd: &home, origins: &[], always_ask: &[] };
    match (example, action) {
        (Some(example), _) => {
            let args: serde_json::Value = serde_json::from_str(example).context("--example is the JSON arguments of a call the rule is for")?;
            let example_tool = if tool == "*" { "run_command" } else { tool };
            let classified = crate::tools::registry::classify(example_tool, &args, &files).map_err(anyhow::Error::msg)?;
            crate::tools::policy::validate_rule(&rule, &classified.call(example_tool, &args), &ctx).map_err(anyhow::Error::msg)?;
        }
        (None, Action::Allow) => bail!("an allow rule needs --example '{{...}}': the arguments of a call it should allow, so a typo cannot allow everything"),
        (None, _) => {}
    }
    paths.ensure_data_dir()?;
    let conn = crate::store::open_writer(&paths.db_path())?;
    let id = rule.id;
    agent_store::apply(&conn, &AgentWrite::AddRule(rule))?;
    Ok(id)
}

pub fn rules_remove(paths: &Paths, id: i64) -> anyhow::Result<()> {
    let conn = crate::store::open_writer(&paths.db_path())?;
    let (rules, _) = agent_store::rules(&conn)?;
    if !rules.iter().any(|r| r.id == id) {
        bail!("there is no rule {id} (see cowork rules list)");
    }
    agent_store::apply(&conn, &AgentWrite::RemoveRule(id))?;
    Ok(())
}

/// `cowork audit [--json] [--limit N]`: newest first.
/// `cowork audit --output CALL`: a call's whole stored result, as the tool
/// returned it (the model got it trimmed, the chat shows its first 64 KB).
pub fn call_output(paths: &Paths, call_id: i64) -> anyhow::Result<()> {
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let output: Option<Option<String>> = conn
        .query_row("SELECT output FROM operation_calls WHERE call_id = ?1", [call_id], |row| row.get(0))
        .map(Some)
        .or_else(|err| if err == rusqlite::Error::QueryReturnedNoRows { Ok(None) } else { Err(err) })?;
    match output {
        None => anyhow::bail!("no call {call_id} (`cowork audit` lists them)"),
        Some(None) => anyhow::bail!("call {call_id} has no result (it did not run)"),
        Some(Some(text)) => {
            use std::io::Write;
            std::io::stdout().write_all(text.as_bytes())?;
            Ok(())
        }
    }
}

pub fn audit(paths: &Paths, json: bool, limit: usize) -> anyhow::Result<()> {
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let entries = agent_store::audit(&conn, limit)?;
    if json {
        for entry in &entries {
            println!("{}", serde_json::to_string(entry)?);
        }
        return Ok(());
    }
    for e in &entries {
        println!("{}", agent_store::audit_text(e));
    }
    if entries.is_empty() {
        eprintln!("the audit log is empty");
    }
    Ok(())
}
