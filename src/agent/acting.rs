//! The agent's executors: a chat question becomes an operation, and the runner
//! (`operation::next`) decides each move while these act on it:
//!
//! - `call_llm`: one brain step; the local engine with `<tool_call>` blocks
//!   (its tools and prompt section from `agent::local`, the raw output kept
//!   verbatim for the prefix cache), or a cloud provider's native tool calls
//!   (`brains::stream_chat_with_tools`; without consent nothing captured is
//!   offered to it). Each step's cost goes out as `AgentEvent::AgentStep`
//!   (`cowork ask --agent --json` prints it, `scripts/eval-agent` scores with
//!   it).
//! - `decide_call`: schema → `registry::classify` → `policy::decide` with the
//!   origins of the step's prompt → recorded. An approval expires after
//!   Settings' timeout (5 minutes by default; an automation's waits longer).
//! - `call_tools`: the allowed calls of a step, each recorded as started before
//!   it runs; the tools that need the database (memory, the agent's own) on
//!   this thread, which holds the read-only connection, the others in parallel
//!   on scoped threads. Stop sets a flag that kills commands and abandons
//!   fetches.
//! - `request_approval`: the operation parks, saved `waiting_for_human`, and
//!   the worker goes back to its command loop; `AgentCommand::Decide` continues
//!   it.
//! - `delegate`: a helper operation with its own context and a subset of tools,
//!   refused anything that would ask, returning only its summary.
//! - `finish`, and `resume_operations` at start: waiting approvals come back; a
//!   call found running becomes `may_have_run`, never run again by itself; an
//!   operation interrupted mid-step pauses until continued.
//!
//! Only this thread executes tools, and never without a recorded decision.
//! Every record is written through the store and waited for (`record`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use serde_json::Value;

use super::{flows, integrations};
use super::operation::{self, Brain, ChatRequest, Limits, Live, Next, RawCall, State};
use super::store::{self as agent_store, AgentWrite, AuditEntry, CallRow, CallStatus, OpStatus, OperationRow};
use super::worker::AgentWorker;
use crate::agent::events::{AgentEvent, ApprovalChoice, ToolCallView};
use crate::brains::{Delta, ProviderConfig, Role, Turn};
use crate::ids::{next_id, now_millis};
use crate::llm::{GenerateRequest, LocalBrain};
use crate::llm::tool_calls::Shape;
use crate::records::{GenerationStats, MessageStatus};
use crate::runtime::EventSink;
use crate::store::StoreCommand;
use crate::tools::{Origin, ToolOutput, registry};
use crate::tools::policy::{self, Action, Pattern, Rule, Scope};

/// The system prompt of an operation.
pub const AGENT_PROMPT: &str = include_str!("../../assets/prompts/agent.txt");
/// Characters of one tool result the model reads (head and tail); the whole result is kept.
const RESULT_FOR_MODEL: usize = 6_000;
/// The local model's context is small: it reads less of each result.
const RESULT_FOR_LOCAL: usize = 1_500;
/// Audit entries Settings → Agent shows (`cowork audit --limit` reads any number).
const OVERVIEW_AUDIT: usize = 50;
/// Turns kept at the end of a long operation (the head always stays).
const KEEP_TURNS: usize = 24;
/// How long a record write may wait for the store.
const STORE_WAIT: Duration = Duration::from_secs(5);
/// A delegated helper's steps at most.
const HELPER_STEPS: u32 = 8;
/// The longest a call waits for its MCP server to finish starting (servers'
/// startup timeouts, 30 s by default, end it sooner).
const MCP_START_WAIT: Duration = Duration::from_secs(120);

/// The view of a call for the UI.
fn view(live: &Live, call: &CallRow) -> ToolCallView {
    let suggested_rule = (call.status == CallStatus::Waiting).then(|| suggest_rule(call)).flatten();
    call.view(live.request.answer_id, now_millis(), suggested_rule)
}

/// The pattern "Always allow" starts from: the command's first word and the
/// rest, the path's directory, the URL's site; editable on the card.
pub fn suggest_rule(call: &CallRow) -> Option<(String, String)> {
    let text = |key: &str| call.arguments.get(key).and_then(Value::as_str);
    if let Some(command) = text("command") {
        // The whole argv, pinned; a compound or expanded line gets none (it always asks).
        return policy::pinned_command_rule(command).map(|pattern| ("command".into(), pattern));
    }
    if let Some(url) = text("url") {
        let host = crate::net::host_of_url(url)?;
        return Some(("url".into(), format!("https://{}/.*", regex::escape(&host))));
    }
    if let Some(path) = text("path").or_else(|| text("to")) {
        let path = std::path::Path::new(path);
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
        return Some(("path".into(), format!("{}/.*", regex::escape(&dir.to_string_lossy()))));
    }
    None
}

/// What the model is told of the time.
fn clock_line(now: i64) -> String {
    format!("It is {} now, local time ({}).", crate::ids::format_local_datetime(now), crate::ids::rfc3339(now))
}

/// The head of a cloud task's first turn: the clock, kept out of its system prompt (which the provider caches).
fn task_clock(brain: &Brain, now: i64) -> String {
    if matches!(brain, Brain::Cloud { .. }) { format!("{}\n\n", clock_line(now)) } else { String::new() }
}

/// Whether the user's own request for this task asks for a formula (`Env::user_asked_for_formulas`):
/// the task's turn only, and only when the user wrote it; never an automation's or a helper's.
fn user_asked_for_formulas(state: &State) -> bool {
    let task = state.head.checked_sub(1).and_then(|i| state.entries.get(i));
    state.automation.is_none() && task.is_some_and(|e| e.origin == Origin::User && e.turn.role == Role::User && crate::tools::documents::asks_for_formulas(&e.turn.content))
}

/// How a question put to the agent is answered (`AgentWorker::decide`).
enum Answering {
    /// From memory in one pass, as a plain answer (a local question that can only read memory).
    FromMemory(ChatRequest),
    /// As a task with tools.
    Task(Box<Task>),
    /// Nothing starts now: the user is asked for consent, or it ended early.
    Nothing,
}

/// A task decided on: everything `start_operation` needs, each read once.
struct Task {
    request: ChatRequest,
    brain: Brain,
    remember: bool,
    /// On the local brain: what its plan offers.
    local: Option<super::local::LocalPlan>,
    /// The user's memory for it (None: a cloud the user has not allowed).
    memory: Option<super::memory::MemoryContext>,
}

/// What one brain step reads, gathered from the live operation before the model runs.
struct StepPlan {
    operation_id: i64,
    epoch: u64,
    step: u32,
    answer_id: i64,
    turns: Vec<Turn>,
    /// A tool's result is in view (the local model then answers rather than calls).
    has_looked: bool,
    tools: Vec<String>,
    question: String,
    /// Paths the local model may pick from in its one call.
    path_choices: Vec<String>,
}

/// What the brain answered in one step.
struct StepAnswer {
    assistant: Turn,
    raw_calls: Vec<RawCall>,
    cost: f64,
    prompt_tokens: usize,
    first_token_millis: u64,
}

/// A step's text as it streams: sent to the answer and kept for the operation.
struct Shown {
    text: String,
    sink: EventSink<AgentEvent>,
    answer_id: i64,
}

impl Shown {
    /// Sends a piece of the answer and keeps it.
    fn push(&mut self, text: &str) {
        self.text.push_str(text);
        self.sink.send(AgentEvent::Token { answer_id: self.answer_id, text: text.to_owned() });
    }
}

/// Writes a record and waits until it is committed. The record functions
/// take the store's line and the sink, not the worker, so that a live
/// operation (in the worker's map) can stay borrowed while they run.
fn record(store: &Sender<StoreCommand>, write: AgentWrite) -> Result<(), String> {
    let (reply, done) = crossbeam_channel::bounded(1);
    store.send_timeout(super::store::command(write, Some(reply)), STORE_WAIT).map_err(|_| "the store is not accepting writes".to_owned())?;
    done.recv_timeout(STORE_WAIT).map_err(|_| "the store did not confirm a write".to_owned())?
}

/// Saves the operation's row and state, and tells the UI.
fn save_operation(store: &Sender<StoreCommand>, sink: &EventSink<AgentEvent>, live: &mut Live) {
    live.row.state = serde_json::to_string(&live.state.stored()).unwrap_or_default();
    live.row.updated_at_millis = now_millis();
    if let Err(err) = record(store, AgentWrite::Operation(live.row.clone())) {
        sink.notice(format!("the task's progress was not saved: {err}"));
    }
    sink.send(AgentEvent::Operation { operation_id: live.row.operation_id, answer_id: live.request.answer_id, status: live.row.status, steps: live.row.steps, paused: live.state.paused.clone() });
}

/// Saves a call and shows its card.
fn save_call(store: &Sender<StoreCommand>, sink: &EventSink<AgentEvent>, live: &Live, call: &CallRow) -> Result<(), String> {
    let saved = record(store, AgentWrite::Call(call.clone()));
    sink.send(AgentEvent::ToolCall(Box::new(view(live, call))));
    saved
}

fn audit(store: &Sender<StoreCommand>, call: &CallRow, decision: &str) {
    let result = call.output.as_deref().map(|o| (o, call.is_error));
    let entry = AuditEntry::for_call(call, decision, call.decided_by.as_deref().unwrap_or("policy"), result, now_millis());
    if let Err(err) = record(store, AgentWrite::Audit(entry)) {
        tracing::warn!(%err, "an audit entry was not written");
    }
}

impl<B: LocalBrain> AgentWorker<B> {
    /// Writes a record and waits until it is committed.
    fn record(&self, write: AgentWrite) -> Result<(), String> {
        record(&self.store, write)
    }

    pub(super) fn save_operation(&self, live: &mut Live) {
        save_operation(&self.store, &self.sink, live);
    }

    fn audit(&self, call: &CallRow, decision: &str) {
        audit(&self.store, call, decision);
    }

    fn limits(settings: &crate::config::Settings) -> Limits {
        Limits { max_steps: settings.agent_max_steps, ..Limits::default() }
    }

    /// A question put to the agent: started as a task (None), ended early or
    /// waiting for consent (None), or handed back to be answered from memory
    /// in one pass.
    pub(super) fn agent_answer(&mut self, request: ChatRequest) -> Option<ChatRequest> {
        match self.decide(request) {
            Answering::FromMemory(request) => Some(request),
            Answering::Task(task) => {
                self.start_operation(*task);
                None
            }
            Answering::Nothing => None,
        }
    }

    /// How a question put to the agent is answered, decided once before
    /// anything starts: from memory in one pass, as a task on a brain, or
    /// not yet (the user is asked for consent) or not at all (it ended early).
    fn decide(&mut self, mut request: ChatRequest) -> Answering {
        let remember = !crate::capture::firewall::wants_no_memory(&request.text);
        let asked_text = request.text.clone();
        request.text = request.text.replace("<no-memory>", "").trim().to_owned();
        let (settings, providers) = self.brains();
        // Route with the question alone: context comes through tools, marked as data.
        let brain = match self.plan_operation(&request, &settings, &providers) {
            Ok((brain, None)) => brain,
            // The same card as for a question: what the provider would get, and the choice.
            Ok((Brain::Cloud { provider, .. }, Some(reason))) => {
                let preview = format!(
                    "To work on this task {} would get your profile and the facts you pinned, the notes cowork recalls for it, and may ask \
                     cowork's memory tools for your activity: window titles, typed text and copied text, redacted of keys and passwords, \
                     would go to it. Without your consent it gets only your question and the tools that do not read what cowork recorded.",
                    provider.name
                );
                self.sink.send(AgentEvent::ConsentNeeded { provider: provider.name.clone(), reason, preview, request: Box::new(request) });
                return Answering::Nothing;
            }
            Ok((brain, Some(_))) => brain,
            Err(message) => {
                self.finish_early(&request, remember, None, message);
                return Answering::Nothing;
            }
        };
        self.refresh_mcp_tools();
        self.refresh_flow_tools();
        // A question that can only read memory is answered from the grounded context in one pass:
        // as right as without the agent and three times sooner than a tool step first
        // (`local::reads_memory_only` has the measurements, `answers_from_memory` the rule).
        // The small model's plan is made once, here: whether memory answers it, and what a task is offered.
        let plan = super::local::plan(&request.text, &self.acting.files);
        let memory = self.task_memory(&request, &brain, &settings);
        let one_pass = settings.agent_memory_from_context && request.attachments.is_empty() && {
            let no_path_or_change = super::local::names_no_path_or_change(&request.text, &self.acting.files);
            match (&brain, &memory) {
                // What cowork derived for the question (a summary, a note) answers it too, when it asks for
                // no change and names no path: "which file had the timezone bug?" is about a day it summarised.
                (Brain::Local, memory) => plan.from_memory || no_path_or_change && memory.as_ref().is_some_and(|m| !m.report.data_text().is_empty()),
                // A cloud the user allowed has the memory in hand already (their facts and profile, what
                // was derived and recalled for the question): a question that reads only memory, or asks
                // for no change, needs no tool and shares a word with what memory holds, is answered in
                // one pass, as with the agent off — it does not depend on the model choosing to search.
                // Memory speaks to it when it shares a word with what the user wrote, what was derived or
                // recalled for it, or the thread; a question about what the user did is the activity log's;
                // and what the user says of themselves ("I am on leave next week") is answered so too (the
                // agent's model had written a call as text there, and the next turn copied it). A question
                // memory says nothing to keeps the agent: "what changed in Zig 0.15?" may need the web.
                // Work for tools ("find my budget", "how long is big.log?") keeps the agent too.
                (Brain::Cloud { .. }, Some(_)) if super::local::sets_tool_work(&request.text) => false,
                (Brain::Cloud { .. }, Some(memory)) => {
                    let reads_nothing_else = plan.offered.iter().all(|t| super::local::reads_memory_only(&[t]));
                    let about_the_user = super::local::asks_what_user_did(&request.text) || super::local::tells_about_user(&request.text);
                    (plan.from_memory || no_path_or_change && reads_nothing_else) && (about_the_user || memory.speaks_to(&request.text, &request.history))
                }
                (Brain::Cloud { .. }, None) => false,
            }
        };
        if one_pass {
            let extra = integrations::local_names(&self.acting.mcp_tools, &request.text).len() + flows::local_names(&self.acting.flow_tools, &request.text).len();
            if extra == 0 {
                return Answering::FromMemory(ChatRequest { agent: false, text: asked_text, ..request });
            }
        }
        let local = matches!(brain, Brain::Local).then_some(plan);
        // Grounded mode: a question only memory could answer, with nothing found for it, gets the
        // refusal without a model (a local one is answered in one pass above, with the same rule).
        if settings.grounded
            && matches!(brain, Brain::Cloud { .. })
            && request.attachments.is_empty()
            && super::local::answers_from_memory(&request.text, &self.acting.files)
            && memory.as_ref().is_none_or(|m| !m.any_embedded || m.assembly.items.is_empty())
        {
            self.refuse(&request, remember);
            return Answering::Nothing;
        }
        Answering::Task(Box::new(Task { request, brain, remember, local, memory }))
    }

    /// Starts an operation for a question `decide` made a task.
    fn start_operation(&mut self, task: Task) {
        let Task { request, brain, remember, local, memory } = task;
        let now = now_millis();
        if remember && !request.is_retry {
            if request.thread_is_new {
                let _ = self.store.send_timeout(crate::chat::thread_write(request.thread.clone(), now_millis()), STORE_WAIT);
            }
            self.persist(super::worker::user_message(&request, None), None);
        }
        let mut tools: Vec<String> = match &brain {
            Brain::Local => local.map_or_else(|| super::local::offer(&request.text, Some(&self.acting.files)), |plan| plan.offered).into_iter().map(str::to_owned).collect(),
            Brain::Cloud { consent, .. } => registry::cloud_set(0)
                .into_iter()
                // Without consent for this provider, nothing captured is offered to it.
                .filter(|name| *consent || !matches!(registry::origin(name), Origin::Memory | Origin::Capture))
                .map(str::to_owned)
                .collect(),
        };
        tools.extend(match &brain {
            Brain::Local => integrations::local_names(&self.acting.mcp_tools, &request.text),
            Brain::Cloud { .. } => integrations::cloud_names(&self.acting.mcp_tools),
        });
        // The user's automations marked usable by the agent.
        tools.extend(match &brain {
            Brain::Local => flows::local_names(&self.acting.flow_tools, &request.text),
            Brain::Cloud { .. } => flows::cloud_names(&self.acting.flow_tools),
        });
        let mut state = State { tools: tools.clone(), started_at_millis: now, ask_id: request.ask_id, ..State::default() };
        let names: Vec<&str> = tools.iter().map(String::as_str).collect();
        let user_memory = memory.as_ref().map(|m| m.report.user_text()).unwrap_or_default();
        let system = self.operation_system_prompt(&brain, &names, &user_memory, now);
        state.push(Turn::new(Role::System, system), Origin::Instructions);
        // Earlier messages of the thread: the user's own words, and answers
        // that may quote what tools returned (memory, so untrusted).
        let provider = match &brain {
            Brain::Cloud { provider, .. } => Some(provider),
            Brain::Local => None,
        };
        let history = super::history::fit(&request.history, self.history_budget(provider));
        // The older part of a long thread, summarised: both sides' words, so data like an answer.
        if let Some(earlier) = &history.earlier {
            state.push(Turn::new(Role::User, earlier.clone()), Origin::Memory);
        }
        for (role, text) in &history.recent {
            match role {
                crate::records::Role::User => state.push(Turn::new(Role::User, text.clone()), Origin::User),
                crate::records::Role::Assistant => state.push(Turn::new(Role::Assistant, text.clone()), Origin::Memory),
            }
        }
        // What cowork derived for the question, marked as data, nearest the request; its notes are the answer's sources.
        match &memory {
            Some(memory) => {
                self.sink.send(memory.shown(request.user_message_id));
                if let Some(data) = memory.task_data(now) {
                    state.push(Turn::new(Role::User, data), Origin::Memory);
                }
                state.citations = memory.assembly.citations();
                if !state.citations.is_empty() {
                    self.sink.send(AgentEvent::Citations { answer_id: request.answer_id, citations: state.citations.clone() });
                }
            }
            None => self.show_withheld(&request, &brain),
        }
        let clock = task_clock(&brain, now);
        if request.attachments.is_empty() {
            state.push(Turn::new(Role::User, format!("{clock}{}", request.text)), request.text_origin.unwrap_or(Origin::User));
        } else {
            // The server's text rides in the user's turn, so the turn counts as
            // untrusted: a tool call it leads to is asked about.
            let mut turn = Turn::new(Role::User, format!("{clock}{}\n\n{}", request.attached_data(), request.text));
            // Attached pictures themselves only where captured context may go (their OCR text is in the turn either way).
            if matches!(brain, Brain::Cloud { consent: true, .. }) {
                turn.images = crate::brains::message::Picture::of_attachments(&request.attachments);
            }
            state.push(turn, Origin::ToolResult);
        }
        state.head = state.entries.len();
        let (answered_by, reason) = match &brain {
            Brain::Local => ("local · agent".to_owned(), format!("{} tools offered", tools.len())),
            Brain::Cloud { provider, .. } => (format!("{} · {} · agent", provider.name, provider.model), format!("{} tools offered", tools.len())),
        };
        self.sink.send(AgentEvent::Routed { answer_id: request.answer_id, ask_id: request.ask_id, answered_by, reason });
        let row = OperationRow::running(next_id(), Some(request.thread.thread_id), Some(request.answer_id), request.text.clone(), brain.name(), now);
        let mut live = Live { row, state, calls: Vec::new(), brain, request, step_has_calls: false, remember, tokens: Default::default() };
        self.save_operation(&mut live);
        let id = live.row.operation_id;
        self.acting.live.insert(id, live);
        self.advance(id);
    }

    /// A task's system prompt: what the agent is, then `user_memory` (what the
    /// user wrote: pinned facts, profile, feedback), both the same from task to
    /// task so the prefix and prompt caches keep them; then what varies.
    pub(super) fn operation_system_prompt(&self, brain: &Brain, tools: &[&str], user_memory: &str, now: i64) -> String {
        let mut parts = vec![AGENT_PROMPT.to_owned()];
        if !user_memory.trim().is_empty() {
            parts.push(user_memory.trim().to_owned());
        }
        if matches!(brain, Brain::Cloud { .. }) && !self.acting.skills.is_empty() {
            parts.push(format!("Skills you can load with the skill tool:\n{}", crate::tools::skills::catalogue(&self.acting.skills)));
        }
        if matches!(brain, Brain::Local) && !tools.is_empty() {
            let mut section = super::local::prompt_section(tools);
            for line in integrations::local_lines(&self.acting.mcp_tools, tools).into_iter().chain(flows::local_lines(&self.acting.flow_tools, tools)) {
                section.push('\n');
                section.push_str(&line);
            }
            parts.push(section);
        }
        // Where "~" and "my Downloads folder" are: a small model otherwise invents a home ("/home/user").
        // Said only where a files tool is offered (a small model repeats it as an answer elsewhere).
        if !matches!(brain, Brain::Local) || tools.iter().any(|t| registry::get(t).is_some_and(|s| s.family == registry::Family::Files)) {
            let home = self.acting.files.home.display();
            parts.push(format!("The user's home folder is {home}. Write paths in it as the user does: ~/notes/todo.txt."));
        }
        // A cloud brain's system prompt stays the same from task to task, so the provider's prompt
        // cache keeps it (and the tools): the clock goes in the task's own turn instead (`clock_line`).
        if matches!(brain, Brain::Local) {
            parts.push(clock_line(now));
        }
        parts.join("\n\n")
    }

    /// Drives an operation until it needs the user or ends.
    pub(super) fn advance(&mut self, operation_id: i64) {
        let epoch = self.stop_epoch.load(Ordering::SeqCst);
        // Read once per drive, not per step: settings change between tasks, not within one.
        let settings = self.settings();
        let limits = Self::limits(&settings);
        loop {
            let Some(live) = self.acting.live.get_mut(&operation_id) else { return };
            if self.stop_epoch.load(Ordering::SeqCst) != epoch {
                self.finish(operation_id, OpStatus::Cancelled, Some("stopped".into()));
                return;
            }
            let step = live.row.steps;
            let next = operation::next(&live.state, &live.calls, step, live.step_has_calls, &limits, now_millis());
            match &live.state.automation {
                // A tool step is one call: once it has an outcome, the operation ends with it.
                Some(auto) if auto.tool_step && matches!(next, Next::CallLlm | Next::Finish { .. } | Next::Pause { .. }) => {
                    self.finish_tool_step(operation_id);
                    return;
                }
                // Nobody may be there to wave a guardrail through: the step fails with its reason.
                Some(_) if matches!(next, Next::Pause { .. }) => {
                    let Next::Pause { why, .. } = next else { return };
                    self.finish(operation_id, OpStatus::Error, Some(why));
                    return;
                }
                _ => {}
            }
            match next {
                Next::CallLlm => {
                    if let Err(err) = self.call_llm(operation_id, epoch, &settings) {
                        let status = if self.stop_epoch.load(Ordering::SeqCst) != epoch { OpStatus::Cancelled } else { OpStatus::Error };
                        self.finish(operation_id, status, Some(err));
                        return;
                    }
                }
                Next::CallTools(ids) => self.call_tools(operation_id, &ids, epoch),
                Next::RequestApproval(ids) => {
                    self.request_approval(operation_id, &ids);
                    return;
                }
                Next::Pause { guard, why } => {
                    // The operation read at the top of this turn of the loop, still borrowed.
                    live.state.paused = Some(format!("{guard}: {why}"));
                    live.row.status = OpStatus::WaitingForHuman;
                    save_operation(&self.store, &self.sink, live);
                    return;
                }
                Next::Finish { early } => {
                    let status = if early.is_some() { OpStatus::Error } else { OpStatus::Done };
                    self.finish(operation_id, status, early);
                    return;
                }
            }
        }
    }

    /// One brain step: the model's text streams into the answer; its calls are recorded with their decisions.
    fn call_llm(&mut self, operation_id: i64, epoch: u64, settings: &crate::config::Settings) -> Result<(), String> {
        let overhead_start = Instant::now();
        let (brain, plan) = self.plan_step(operation_id, epoch)?;
        let (step, answer_id) = (plan.step, plan.answer_id);
        let mut shown = Shown { text: String::new(), sink: self.sink.clone(), answer_id };
        let overhead_before = overhead_start.elapsed();
        let model_start = Instant::now();
        let answer = match &brain {
            Brain::Local => self.local_step(plan, settings, &mut shown)?,
            Brain::Cloud { provider, key, .. } => self.cloud_step(plan, provider, key.as_deref(), settings, &mut shown)?,
        };
        let model_millis = model_start.elapsed().as_millis() as u64;
        let prompt_tokens = answer.prompt_tokens;
        self.sink.send(AgentEvent::AgentStep { answer_id, step, prompt_tokens, first_token_millis: answer.first_token_millis, model_millis });
        let overhead_after = Instant::now();
        self.apply_answer(operation_id, step, answer, &shown.text, settings)?;
        let overhead = overhead_before + overhead_after.elapsed();
        tracing::info!(operation = operation_id, step, prompt_tokens, model_millis, overhead_micros = overhead.as_micros() as u64, "agent step");
        let live = self.acting.live.get_mut(&operation_id).ok_or("the task is gone")?;
        save_operation(&self.store, &self.sink, live);
        Ok(())
    }

    /// Starts a step: counts it, ends the answer's last line, and gathers what the brain reads.
    fn plan_step(&mut self, operation_id: i64, epoch: u64) -> Result<(Brain, StepPlan), String> {
        let live = self.acting.live.get_mut(&operation_id).ok_or("the task is gone")?;
        live.row.steps += 1;
        let step = live.row.steps;
        let answer_id = live.request.answer_id;
        if !live.state.shown.is_empty() && !live.state.shown.ends_with('\n') {
            live.state.shown.push('\n');
            self.sink.send(AgentEvent::Token { answer_id, text: "\n".into() });
        }
        let turns = live.state.turns(KEEP_TURNS);
        // The local model's first step calls a tool; after a result it answers. A first call
        // that failed (a wrong path, a bad argument) gets one more try, with the error in view.
        let retry = live.calls.len() == 1 && live.calls[0].status == CallStatus::Failed;
        let has_looked = live.state.entries.iter().any(|e| e.turn.role == Role::Tool) && !retry;
        let brain = live.brain.clone();
        let tools: Vec<String> = live.state.tools.clone();
        let question = live.request.text.clone();
        let path_choices = if matches!(brain, Brain::Local) { super::local::path_choices(&question, &self.acting.files) } else { Vec::new() };
        Ok((brain, StepPlan { operation_id, epoch, step, answer_id, turns, has_looked, tools, question, path_choices }))
    }

    /// The local engine's step: its calls come as `<tool_call>` blocks, one before it has looked at a result.
    fn local_step(&mut self, plan: StepPlan, settings: &crate::config::Settings, shown: &mut Shown) -> Result<StepAnswer, String> {
        let StepPlan { operation_id, epoch, step, turns, has_looked, tools, question, path_choices, .. } = plan;
        let messages = super::local::messages(&turns, has_looked, &question);
        let prompt_tokens = messages.iter().map(|m| crate::memory::tokens::estimate_tokens(&m.content)).sum::<usize>();
        // The small local model makes one call, then answers from its result.
        let names: Vec<&str> = tools.iter().map(String::as_str).collect();
        let one_call = super::local::call_schema(&names, &path_choices);
        let choices = integrations::with_call_choices(one_call, &self.acting.mcp_tools, &names);
        let shape = match flows::with_call_choices(choices, &self.acting.flow_tools, &names) {
            Some(schema) if !has_looked => Shape::OneCall(schema),
            _ => Shape::Prose,
        };
        let request = GenerateRequest { messages, max_tokens: settings.max_answer_tokens, tools: true, shape, ..GenerateRequest::default() };
        let mut generation = self
            .brain
            .generate(request, epoch, &mut |text: &str| shown.push(text))
            .map_err(|err| err.to_string())?;
        self.prefill_rate.record(&generation.model, &generation.stats);
        // An answer to a list that names nothing in it gets the list under it.
        let last_result = self.acting.live.get(&operation_id).and_then(|l| l.calls.last()).filter(|c| c.status == CallStatus::Done);
        if has_looked
            && generation.calls.is_empty()
            && let Some(call) = last_result
            && let Some(list) = super::local::complete(&call.tool, call.output.as_deref().unwrap_or_default(), &generation.text)
        {
            let under = format!("{}{list}", if generation.text.trim().is_empty() { "" } else { "\n\n" });
            shown.push(&under);
            generation.text.push_str(&under);
            if !generation.raw.is_empty() {
                generation.raw.push_str(&under);
            }
        }
        let calls: Vec<RawCall> = generation
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                c.map(|mut c| {
                    super::local::repair(&c.name, &mut c.arguments, &question);
                    (format!("call_{step}_{i}"), c.name, c.arguments)
                })
            })
            .collect();
        let mut turn = Turn::new(Role::Assistant, if generation.raw.is_empty() { generation.text.clone() } else { generation.raw.clone() });
        turn.tool_calls = calls
            .iter()
            .filter_map(|c| c.as_ref().ok())
            .map(|(id, name, args)| crate::brains::ToolCall { id: id.clone(), name: name.clone(), arguments: args.to_string(), signature: None })
            .collect();
        let prompt_tokens = if generation.stats.prompt_tokens > 0 { generation.stats.prompt_tokens } else { prompt_tokens };
        Ok(StepAnswer { assistant: turn, raw_calls: calls, cost: 0.0, prompt_tokens, first_token_millis: generation.stats.first_token_millis })
    }

    /// A cloud provider's step: native tool calls, its usage recorded; what is sent is redacted.
    fn cloud_step(&mut self, plan: StepPlan, provider: &ProviderConfig, key: Option<&str>, settings: &crate::config::Settings, shown: &mut Shown) -> Result<StepAnswer, String> {
        let StepPlan { operation_id, epoch, step, answer_id, turns, tools, .. } = plan;
        let names: Vec<&str> = tools.iter().map(String::as_str).collect();
        let mut defs = registry::defs(&names);
        defs.extend(integrations::defs(&self.acting.mcp_tools, &names));
        defs.extend(flows::defs(&self.acting.flow_tools, &names));
        // What goes to the cloud is redacted, with consent or without (keys, tokens, card numbers).
        let turns: Vec<Turn> = turns
            .into_iter()
            .map(|mut t| {
                if t.role != Role::System {
                    t.content = crate::brains::consent::redact_for_cloud(&t.content);
                }
                t
            })
            .collect();
        let stop_epoch = self.stop_epoch.clone();
        let completion = crate::brains::stream_chat_with_tools(
            crate::net::OutboundGate::global(),
            provider,
            None,
            key,
            &turns,
            &defs,
            settings.max_answer_tokens as u32,
            &|| stop_epoch.load(Ordering::SeqCst) != epoch,
            &mut |delta| {
                if let Delta::Text(text) = delta {
                    shown.push(text);
                } else if let Some(thought) = delta.reasoning_text() {
                    self.sink.send(AgentEvent::Reasoning { answer_id, text: thought.to_owned() });
                }
            },
        )
        .map_err(|err| err.to_string())?;
        let mut answer = completion.answer;
        if answer.tool_calls.is_empty()
            && let Some(call) = crate::llm::tool_calls::bare_call(&answer.text, &|name| tools.iter().any(|t| t == name))
        {
            answer.tool_calls.push(crate::brains::ToolCall { id: String::new(), name: call.name, arguments: call.arguments.to_string(), signature: None });
            answer.text.clear();
            shown.text.clear();
        }
        let ask_id = self.acting.live.get(&operation_id).map_or(0, |l| l.request.ask_id);
        let usage = crate::brains::budget::usage_row(provider, &provider.model, &answer.usage(), ask_id);
        let cost = usage.cost_usd;
        let _ = self.store.send_timeout(crate::brains::budget::usage_write(usage), STORE_WAIT);
        let calls: Vec<RawCall> = answer
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let id = if c.id.is_empty() { format!("call_{step}_{i}") } else { c.id.clone() };
                let arguments = if c.arguments.trim().is_empty() { Ok(Value::Object(Default::default())) } else { serde_json::from_str::<Value>(&c.arguments) };
                match arguments {
                    Ok(args) => Ok((id, c.name.clone(), args)),
                    Err(err) => Err(format!("the arguments of {} are not valid JSON ({err}); call it again with a JSON object", c.name)),
                }
            })
            .collect();
        let ok: Vec<(String, String, Value)> = calls.iter().filter_map(|c| c.as_ref().ok().cloned()).collect();
        let first_token = completion.first_token.map_or(0, |d| d.as_millis() as u64);
        let mut turn = operation::assistant_turn(&answer.text, &ok);
        // What the provider signed goes back with the calls (Anthropic thinking, Gemini thought signatures).
        turn.thinking = answer.thinking_blocks();
        for (i, call) in answer.tool_calls.iter().enumerate() {
            let id = if call.id.is_empty() { format!("call_{step}_{i}") } else { call.id.clone() };
            if let Some(sent) = turn.tool_calls.iter_mut().find(|c| c.id == id) {
                sent.signature.clone_from(&call.signature);
            }
        }
        if let Some(live) = self.acting.live.get_mut(&operation_id) {
            // Counts from a provider are its say: summed without overflowing.
            live.tokens.input_tokens = live.tokens.input_tokens.saturating_add(answer.input_tokens);
            live.tokens.cached_input_tokens = live.tokens.cached_input_tokens.saturating_add(answer.cached_input_tokens);
            live.tokens.output_tokens = live.tokens.output_tokens.saturating_add(answer.output_tokens);
            live.tokens.reasoning_tokens = live.tokens.reasoning_tokens.saturating_add(answer.reasoning_tokens);
        }
        Ok(StepAnswer { assistant: turn, raw_calls: calls, cost, prompt_tokens: answer.input_tokens as usize, first_token_millis: first_token })
    }

    /// Puts the brain's answer into the operation and decides each of its calls.
    fn apply_answer(&mut self, operation_id: i64, step: u32, answer: StepAnswer, shown: &str, settings: &crate::config::Settings) -> Result<(), String> {
        let live = self.acting.live.get_mut(&operation_id).ok_or("the task is gone")?;
        live.state.shown.push_str(shown);
        live.row.cost_usd += answer.cost;
        if answer.cost > 0.0 {
            live.state.spend.push((now_millis(), answer.cost));
        }
        live.state.push(answer.assistant, Origin::Instructions);
        live.step_has_calls = !answer.raw_calls.is_empty();
        // Calls are decided against what this step's prompt held.
        let origins = live.state.origins();
        let mut unreadable = Vec::new();
        for (index, call) in answer.raw_calls.into_iter().enumerate() {
            match call {
                Ok((model_call_id, tool, args)) => self.decide_call(operation_id, step, model_call_id, tool, args, &origins, settings),
                Err(err) => unreadable.push(format!("Call {} was not run: {err}", index + 1)),
            }
        }
        let live = self.acting.live.get_mut(&operation_id).ok_or("the task is gone")?;
        if !unreadable.is_empty() {
            live.state.push(Turn::new(Role::User, unreadable.join("\n")), Origin::Instructions);
        }
        Ok(())
    }

    /// Validates, classifies and decides one call, and records it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decide_call(&mut self, operation_id: i64, step: u32, model_call_id: String, tool: String, args: Value, origins: &[Origin], settings: &crate::config::Settings) {
        let now = now_millis();
        let offered = self.acting.live.get(&operation_id).is_some_and(|l| l.state.tools.contains(&tool));
        let mut call = CallRow {
            call_id: next_id(),
            operation_id,
            step,
            model_call_id,
            tool: tool.clone(),
            arguments: args.clone(),
            risk: registry::get(&tool).map_or(crate::tools::Risk::Dangerous, |s| s.risk),
            status: CallStatus::Failed,
            why: String::new(),
            decided_by: Some("policy: arguments".into()),
            output: None,
            is_error: true,
            created_at_millis: now,
            started_at_millis: None,
            finished_at_millis: Some(now),
            expires_at_millis: None,
            images: Vec::new(),
        };
        let classified = if offered { self.check_and_classify(&tool, &args) } else { Err(format!("{tool} is not one of the tools you were given for this task")) };
        match classified {
            Err(err) => {
                call.why = err.clone();
                call.output = Some(err);
            }
            Ok(classified) => {
                call.risk = classified.risk;
                let rules = self.db_rules();
                let ctx = policy::Context { now_millis: now, ..self.policy_context(operation_id, origins, &settings.always_ask) };
                let decision = policy::decide(&classified.call(&tool, &args), &rules, &ctx);
                let (decision, first_allowed) = self.recheck_mcp(&tool, decision);
                if let Some(definition) = first_allowed
                    && let Err(err) = self.record(AgentWrite::AllowedMcpTool(definition, now))
                {
                    tracing::warn!(%err, "an MCP tool's allowed definition was not recorded");
                }
                call.why = decision.why.clone();
                call.decided_by = Some(match decision.phase {
                    policy::Phase::Rule(id) => format!("rule {id}"),
                    phase => format!("policy: {}", serde_json::to_value(&phase).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()),
                });
                call.finished_at_millis = None;
                call.is_error = false;
                match decision.action {
                    // ask_user always waits: for the user's answer.
                    _ if tool == "ask_user" => {
                        call.status = CallStatus::Waiting;
                        call.why = "a question for you".into();
                        call.decided_by = Some("ask_user".into());
                    }
                    Action::Allow => call.status = CallStatus::Running,
                    Action::Ask => {
                        call.status = CallStatus::Waiting;
                        // Nobody may be watching an automation: its approvals wait longer.
                        let automation = self.acting.live.get(&operation_id).is_some_and(|l| l.state.automation.is_some());
                        let timeout_millis = if automation { settings.automation_approval_hours as i64 * 3_600_000 } else { settings.approval_timeout_secs as i64 * 1000 };
                        call.expires_at_millis = Some(now + timeout_millis);
                    }
                    Action::Deny => {
                        call.status = CallStatus::Denied;
                        call.is_error = true;
                        call.finished_at_millis = Some(now);
                        call.output = Some(format!("Not run: {}", decision.why));
                    }
                }
            }
        }
        let Some(live) = self.acting.live.get_mut(&operation_id) else { return };
        if let Err(err) = save_call(&self.store, &self.sink, live, &call) {
            // Unrecorded, it must not run.
            call.status = CallStatus::Failed;
            call.output = Some(format!("not run: cowork could not record the call ({err})"));
            call.is_error = true;
        }
        if call.status.settled() {
            audit(&self.store, &call, if call.status == CallStatus::Denied { "deny" } else { "invalid" });
        } else if call.status == CallStatus::Waiting {
            // `cowork audit` shows what waits for the user too.
            audit(&self.store, &call, "waiting");
        }
        live.calls.push(call);
        self.close_step_if_settled(operation_id, step);
    }

    /// The automations offered as tools, read from the database.
    pub(super) fn refresh_flow_tools(&mut self) {
        self.open_db();
        self.acting.flow_tools = self.db.as_ref().map(flows::load).unwrap_or_default();
    }

    /// The mcp worker's current tools (none when it does not answer in 300 ms).
    pub(super) fn refresh_mcp_tools(&mut self) {
        if let Some(mcp) = &self.config.mcp {
            let now = mcp.offered(Duration::from_millis(300));
            (self.acting.mcp_tools, self.acting.mcp_starting) = (now.offered, now.starting);
        }
    }

    /// Before running calls whose tools are not on offer: a server that was
    /// still starting when the operation began or resumed is waited for (its
    /// own startup timeout ends the wait in the mcp worker); otherwise the
    /// list is read again, as a server may have come up since.
    fn refresh_mcp_tools_for(&mut self, missing: &[&str]) {
        let starting: Vec<String> = self.acting.mcp_starting.iter().filter(|s| missing.iter().any(|t| t.starts_with(&format!("mcp__{s}__")))).cloned().collect();
        match (&self.config.mcp, starting.is_empty()) {
            (Some(mcp), false) => {
                let now = mcp.offered_after_start(&starting, MCP_START_WAIT);
                (self.acting.mcp_tools, self.acting.mcp_starting) = (now.offered, now.starting);
            }
            _ => self.refresh_mcp_tools(),
        }
    }

    /// The policy's view of a step of `operation_id`.
    fn policy_context<'a>(&'a self, operation_id: i64, origins: &'a [Origin], always_ask: &'a [String]) -> policy::Context<'a> {
        policy::Context {
            operation_id,
            now_millis: now_millis(),
            data_dir: &self.acting.files.data_dir,
            home: &self.acting.files.home,
            cwd: &self.acting.files.cwd,
            origins,
            always_ask,
        }
    }

    /// A call's arguments checked against its schema, and what it touches.
    fn check_and_classify(&self, tool: &str, args: &Value) -> Result<registry::Classified, String> {
        if flows::is_flow(tool) {
            let offered = flows::find(&self.acting.flow_tools, tool).ok_or_else(|| format!("{tool} is not an automation the agent may start"))?;
            return flows::classify(offered, args);
        }
        if integrations::is_mcp(tool) {
            let offered = integrations::find(&self.acting.mcp_tools, tool).ok_or_else(|| format!("{tool}'s MCP server is not running now"))?;
            return integrations::classify(offered, args);
        }
        registry::validate(tool, args).and_then(|()| registry::classify(tool, args, &self.acting.files))
    }

    /// The rug-pull check for an MCP tool, and the definition to record when
    /// the policy allows a tool for the first time.
    fn recheck_mcp(&mut self, tool: &str, decision: policy::Decision) -> (policy::Decision, Option<crate::mcp::tools::McpTool>) {
        let Some(offered) = integrations::find(&self.acting.mcp_tools, tool).cloned() else { return (decision, None) };
        self.open_db();
        let allowed = self.db.as_ref().and_then(|conn| agent_store::allowed_mcp_tool(conn, tool).ok().flatten());
        let changes = integrations::changes(&offered.tool, allowed.as_ref());
        let decision = integrations::recheck(decision, &changes);
        let first = (allowed.is_none() && decision.action == Action::Allow).then_some(offered.tool);
        (decision, first)
    }

    fn db_rules(&mut self) -> Vec<Rule> {
        self.open_db();
        let Some(conn) = self.db.as_ref() else { return Vec::new() };
        match agent_store::rules(conn) {
            Ok((rules, problems)) => {
                for problem in problems {
                    tracing::warn!(%problem, "an approval rule was skipped");
                }
                rules
            }
            Err(err) => {
                tracing::warn!(%err, "cannot read approval rules; every risky call asks");
                Vec::new()
            }
        }
    }

    /// Runs the allowed calls of a step: each is recorded as started, then
    /// they run in parallel (memory tools on this thread, which holds the
    /// database connection); Stop kills commands and abandons fetches.
    fn call_tools(&mut self, operation_id: i64, ids: &[i64], epoch: u64) {
        let Some(live) = self.acting.live.get(&operation_id) else { return };
        let step = live.row.steps;
        let started = now_millis();
        let batch: Vec<i64> = ids.iter().copied().filter(|id| live.calls.iter().any(|c| c.call_id == *id)).collect();
        let mut runnable = Vec::new();
        for id in batch {
            // Started once, whoever else holds a copy of it: a compare-and-swap on its start time.
            match self.record(AgentWrite::StartCall { call_id: id, at_millis: started }) {
                Ok(()) => {
                    let Some(live) = self.acting.live.get_mut(&operation_id) else { return };
                    let Some(call) = live.calls.iter_mut().find(|c| c.call_id == id) else { continue };
                    call.started_at_millis = Some(started);
                    let call = call.clone();
                    self.sink.send(AgentEvent::ToolCall(Box::new(view(live, &call))));
                    runnable.push(call);
                }
                Err(err) => {
                    tracing::warn!(%err, call = id, "a call was not started here");
                    self.not_started(operation_id, id, &err);
                }
            }
        }
        // A server that was still starting when the operation began (or resumed) may be up now.
        let missing: Vec<&str> = runnable.iter().filter(|c| integrations::is_mcp(&c.tool) && integrations::find(&self.acting.mcp_tools, &c.tool).is_none()).map(|c| c.tool.as_str()).collect();
        if !missing.is_empty() {
            self.refresh_mcp_tools_for(&missing);
        }
        let mut results: Vec<(i64, ToolOutput)> = Vec::new();
        // The agent's own tools first, on this thread.
        let (own, parallel): (Vec<CallRow>, Vec<CallRow>) = runnable.into_iter().partition(|c| !registry::runs_anywhere(&c.tool) && !integrations::is_mcp(&c.tool));
        for call in &own {
            let output = self.run_own(operation_id, call, epoch);
            results.push((call.call_id, output));
        }
        let stop = AtomicBool::new(false);
        if !parallel.is_empty() {
            let stop_epoch = self.stop_epoch.clone();
            let search = &self.search_config();
            let (files, skills, mcp_tools, mcp) = (&self.acting.files, &self.acting.skills, &self.acting.mcp_tools, self.config.mcp.as_ref());
            let gate = crate::net::OutboundGate::global();
            let user_asked_for_formulas = self.acting.live.get(&operation_id).is_some_and(|l| user_asked_for_formulas(&l.state));
            // Dropped when every call has returned: the watcher wakes at once, not at its next tick.
            let (done, finished) = crossbeam_channel::bounded::<()>(0);
            std::thread::scope(|scope| {
                let stop = &stop;
                scope.spawn(move || {
                    while let Err(crossbeam_channel::RecvTimeoutError::Timeout) = finished.recv_timeout(Duration::from_millis(20)) {
                        if stop_epoch.load(Ordering::SeqCst) != epoch {
                            stop.store(true, Ordering::SeqCst);
                            break;
                        }
                    }
                });
                let handles: Vec<_> = parallel
                    .iter()
                    .map(|call| {
                        scope.spawn(move || {
                            if integrations::is_mcp(&call.tool) {
                                return (call.call_id, integrations::run(mcp, mcp_tools, call.call_id, &call.tool, &call.arguments, stop));
                            }
                            let env = registry::Env { files, memory: None, gate, stop, skills, search, user_asked_for_formulas };
                            (call.call_id, registry::execute(&call.tool, &call.arguments, &env))
                        })
                    })
                    .collect();
                for handle in handles {
                    match handle.join() {
                        Ok(result) => results.push(result),
                        Err(_) => tracing::error!("a tool panicked"),
                    }
                }
                drop(done);
            });
        }
        let stopped = stop.load(Ordering::SeqCst);
        for id in ids {
            let output = results.iter().find(|(cid, _)| cid == id).map(|(_, o)| o.clone()).unwrap_or_else(|| ToolOutput::error("the tool failed unexpectedly"));
            // Stop cut short what ran in parallel; what ran here had finished.
            let cut = stopped && parallel.iter().any(|c| c.call_id == *id);
            let status = if cut { CallStatus::Cancelled } else if output.is_error { CallStatus::Failed } else { CallStatus::Done };
            self.settle(operation_id, *id, status, output, None);
        }
        self.close_step_if_settled(operation_id, step);
    }

    /// A document the agent read goes into memory (the `documents` namespace),
    /// read whole on its own thread, stored by the store worker.
    fn remember_document(&mut self, arguments: &Value, origin: &'static str) {
        let Some(path) = arguments.get("path").and_then(Value::as_str).and_then(|p| crate::tools::files::resolve(p, &self.acting.files).ok()) else { return };
        if let Some(why) = crate::documents::memory::withheld(&path, &self.settings()) {
            tracing::info!(%why, "a document the agent read is not kept in memory");
            return;
        }
        let store = self.store.clone();
        let _ = std::thread::Builder::new().name("remember-document".into()).spawn(move || match crate::documents::memory::prepare(&path, origin) {
            Ok(doc) => {
                let _ = store.send_timeout(crate::documents::memory::remember_command(doc, None), STORE_WAIT);
            }
            Err(err) => tracing::info!(%err, "a document the agent read was not kept in memory"),
        });
    }

    /// The web search the user set up (Settings → Brains & network).
    fn search_config(&mut self) -> crate::tools::web_search::SearchConfig {
        let settings = self.settings();
        crate::tools::web_search::SearchConfig {
            provider: crate::tools::web_search::Provider::parse(&settings.web_search_provider),
            url: settings.web_search_url.clone(),
            data_dir: self.acting.files.data_dir.clone(),
        }
    }

    /// Tools that need this thread: memory (the database connection),
    /// the todo list and `delegate`.
    fn run_own(&mut self, operation_id: i64, call: &CallRow, epoch: u64) -> ToolOutput {
        match call.tool.as_str() {
            "update_todos" => {
                let items: Vec<crate::agent::events::TodoItem> = serde_json::from_value(call.arguments.get("items").cloned().unwrap_or_default()).unwrap_or_default();
                let Some(live) = self.acting.live.get_mut(&operation_id) else { return ToolOutput::error("the task ended") };
                live.state.todos = items.clone();
                let answer_id = live.request.answer_id;
                let done = items.iter().filter(|i| i.done).count();
                self.sink.send(AgentEvent::Todos { answer_id, items: items.clone() });
                ToolOutput::ok(format!("The user sees your list ({done} of {} done).", items.len()))
            }
            "delegate" => self.delegate(operation_id, call, epoch),
            "recap" => self.recap_tool(&call.arguments),
            "meeting_note" => self.meeting_note_tool(&call.arguments),
            // The picture the card showed, if the user saw one; else taken now (an always-allow rule).
            "screenshot" => match call.images.first() {
                Some(shown) => ToolOutput { images: vec![shown.image.clone()], ..ToolOutput::ok("The screenshot the user saw on the approval card and allowed.") },
                None => match self.take_screenshot(&call.arguments) {
                    Ok(shot) => ToolOutput { images: vec![shot.image], ..ToolOutput::ok(format!("A screenshot of {}.", shot.of)) },
                    Err(err) => ToolOutput::error(err),
                },
            },
            tool if flows::is_flow(tool) => {
                if flows::find(&self.acting.flow_tools, tool).is_none() {
                    self.refresh_flow_tools();
                }
                let Some(offered) = flows::find(&self.acting.flow_tools, tool).cloned() else {
                    return ToolOutput::error(format!("{tool} is not an automation the agent may start"));
                };
                // The run's inputs carry where the step's prompt came from.
                let origin = self.acting.live.get(&operation_id).and_then(|l| l.state.origins().into_iter().find(|o| !o.trusted())).unwrap_or(Origin::User);
                flows::run(self.config.flows.as_ref(), &offered, &call.arguments, origin)
            }
            tool => {
                let search = self.search_config();
                self.open_db();
                let Some(conn) = self.db.as_ref() else { return ToolOutput::error("cowork's memory cannot be read right now") };
                let thread_id = self.acting.live.get(&operation_id).map(|l| l.request.thread.thread_id);
                let memory = crate::tools::memory::MemoryEnv { conn, recall: self.config.recall.as_ref().map(|r| r as &dyn crate::tools::memory::Recall), withheld: None, store: Some((&self.store, self.sink.narrow())), thread_id, now_millis: now_millis() };
                let stop = AtomicBool::new(false);
                let user_asked_for_formulas = self.acting.live.get(&operation_id).is_some_and(|l| user_asked_for_formulas(&l.state));
                let env = registry::Env { files: &self.acting.files, memory: Some(memory), gate: crate::net::OutboundGate::global(), stop: &stop, skills: &self.acting.skills, search: &search, user_asked_for_formulas };
                registry::execute(tool, &call.arguments, &env)
            }
        }
    }

    /// The screenshot a `screenshot` call asks for, if the privacy rules allow it.
    fn take_screenshot(&mut self, args: &Value) -> Result<crate::tools::desktop::Screenshot, String> {
        let shot = crate::tools::desktop::Shot::of(args)?;
        let rules = self.settings().rules();
        crate::tools::desktop::screenshot(shot, None, &rules, crate::ids::local_minute_of_day(now_millis()))
    }

    /// A call's outcome: recorded, audited, shown.
    fn settle(&mut self, operation_id: i64, call_id: i64, status: CallStatus, output: ToolOutput, decided_by: Option<String>) {
        let Some(live) = self.acting.live.get_mut(&operation_id) else { return };
        let Some(call) = live.calls.iter_mut().find(|c| c.call_id == call_id) else { return };
        call.status = status;
        call.is_error = output.is_error;
        let undo = output.undo;
        let sources = output.sources;
        call.output = Some(output.content);
        call.images = output.images.into_iter().map(crate::media::Attached::new).collect();
        call.finished_at_millis = Some(now_millis());
        if decided_by.is_some() {
            call.decided_by = decided_by;
        }
        let call = call.clone();
        let _ = save_call(&self.store, &self.sink, live, &call);
        if live.state.add_sources(sources) {
            self.sink.send(AgentEvent::Citations { answer_id: live.request.answer_id, citations: live.state.citations.clone() });
        }
        if !undo.is_empty() {
            let answer_id = live.request.answer_id;
            let at_millis = now_millis();
            match self.record(AgentWrite::Undo { operation_id, call_id, steps: undo, at_millis }) {
                Ok(()) => {
                    self.sink.send(AgentEvent::Undoable { answer_id, operation_id, until_millis: at_millis + crate::tools::undo::UNDO_WINDOW_MS });
                }
                Err(err) => {
                    self.sink.notice(format!("what this task changed could not be recorded for Undo: {err}"));
                }
            }
        }
        if status == CallStatus::Done && call.tool == "read_document" {
            self.remember_document(&call.arguments, "agent");
        }
        let decision = match status {
            CallStatus::Done | CallStatus::Failed | CallStatus::Cancelled => "ran",
            CallStatus::Denied => "denied",
            CallStatus::Expired => "expired",
            CallStatus::MayHaveRun => "may_have_run",
            _ => "pending",
        };
        self.audit(&call, decision);
    }

    /// When every call of the step has an outcome, the results go into the conversation.
    fn close_step_if_settled(&mut self, operation_id: i64, step: u32) {
        let Some(live) = self.acting.live.get_mut(&operation_id) else { return };
        let current: Vec<&CallRow> = live.calls.iter().filter(|c| c.step == step).collect();
        if current.is_empty() || !current.iter().all(|c| c.status.settled()) {
            return;
        }
        // Results already written for this step? They follow its assistant turn, the last one
        // (a provider may reuse call ids from step to step, so the ids cannot tell).
        if live.state.entries.iter().rev().take_while(|e| e.turn.role != Role::Assistant).any(|e| e.turn.role == Role::Tool) {
            return;
        }
        let limit = if matches!(live.brain, Brain::Local) { RESULT_FOR_LOCAL } else { RESULT_FOR_MODEL };
        let seen = matches!(live.brain, Brain::Cloud { consent: true, .. });
        let results: Vec<(String, String, Origin, Vec<crate::brains::message::Picture>)> = current
            .iter()
            .map(|c| {
                let output = if c.is_error { ToolOutput::error(c.output.clone().unwrap_or_default()) } else { ToolOutput::ok(c.output.clone().unwrap_or_default()) };
                let origin = match c.status {
                    // cowork's own words: a denial, an expiry, a refusal.
                    CallStatus::Denied | CallStatus::Expired | CallStatus::Cancelled | CallStatus::MayHaveRun => Origin::Instructions,
                    _ if c.decided_by.as_deref() == Some("policy: arguments") => Origin::Instructions,
                    _ => registry::origin(&c.tool),
                };
                let mut text = match (c.is_error, &live.brain) {
                    (true, _) => format!("Error: {}", output.for_model(limit)),
                    (false, Brain::Local) if c.tool == "read_file" => operation::numbered_lines(&output.for_model(limit)),
                    (false, _) => output.for_model(limit),
                };
                // Every model reads what the pictures hold (their text by OCR); one that sees, allowed captured content, gets them too.
                for (i, attached) in c.images.iter().enumerate() {
                    text.push('\n');
                    text.push_str(&crate::ocr::describe(&attached.image, i + 1));
                }
                let pictures = if seen { c.images.iter().filter_map(|a| crate::brains::message::Picture::for_model(&a.image)).collect() } else { Vec::new() };
                (c.model_call_id.clone(), text, origin, pictures)
            })
            .collect();
        for (id, text, origin, pictures) in results {
            let mut turn = operation::tool_turn(&id, text);
            turn.images = pictures;
            live.state.push(turn, origin);
        }
    }

    /// The operation waits for the user: its state is saved, the cards shown.
    fn request_approval(&mut self, operation_id: i64, ids: &[i64]) {
        let Some(mut live) = self.acting.live.remove(&operation_id) else { return };
        live.row.status = OpStatus::WaitingForHuman;
        // A screenshot is taken now (the privacy rules decide first), so its card shows the
        // picture the model would get before anything leaves; approved, that picture goes.
        for id in ids {
            let Some(at) = live.calls.iter().position(|c| c.call_id == *id && c.tool == "screenshot" && c.images.is_empty()) else { continue };
            match self.take_screenshot(&live.calls[at].arguments) {
                Ok(shot) => {
                    live.calls[at].images = vec![crate::media::Attached::new(shot.image)];
                    let call = live.calls[at].clone();
                    let _ = save_call(&self.store, &self.sink, &live, &call);
                }
                Err(why) => tracing::info!(%why, "no screenshot for the approval card"),
            }
        }
        self.save_operation(&mut live);
        for id in ids {
            if let Some(call) = live.calls.iter().find(|c| c.call_id == *id) {
                self.sink.send(AgentEvent::ToolCall(Box::new(view(&live, call))));
            }
        }
        self.report_parked(&live, ids);
        self.acting.live.insert(operation_id, live);
    }

    /// The user decided on a waiting call (or answered a question): the
    /// decision is one compare-and-swap in the database, so the sidebar, a
    /// notification's Accept and `cowork approve` in another process cannot
    /// both win. A call of an operation another live process drives is decided
    /// there by the same swap, and that process runs it.
    pub(super) fn handle_decision(&mut self, call_id: i64, choice: ApprovalChoice) {
        let by = "user".to_owned();
        self.handle_decision_by(call_id, choice, by);
    }

    pub(super) fn handle_decision_by(&mut self, call_id: i64, choice: ApprovalChoice, by: String) {
        /// What a decision writes: the call's new status, its output, edited arguments, who decided.
        type Decided = (CallStatus, Option<String>, Option<(Value, crate::tools::Risk)>, String);
        let Some((operation_id, call)) = self.acting.live.iter().find_map(|(id, l)| l.calls.iter().find(|c| c.call_id == call_id).map(|c| (*id, c.clone()))) else {
            self.decide_elsewhere(call_id, choice, &by);
            return;
        };
        if call.status != CallStatus::Waiting {
            // This process drives the task: it goes on with what was decided, and says so.
            let by = call.decided_by.clone().unwrap_or_else(|| "cowork".into());
            self.sink.notice(format!("call {call_id} was already decided by {by} (it is {})", call.status.as_str()));
            return;
        }
        let settings = self.settings();
        // What the decision writes: the new status, its output, edited arguments.
        let decided: Result<Decided, String> = match choice {
            ApprovalChoice::Answer(text) if call.tool == "ask_user" => Ok((CallStatus::Done, Some(text), None, by.clone())),
            ApprovalChoice::Deny { reason } => {
                let why = if reason.trim().is_empty() { "The user denied this call.".to_owned() } else { format!("The user denied this call: {}", reason.trim()) };
                Ok((CallStatus::Denied, Some(why), None, by.clone()))
            }
            ApprovalChoice::Once | ApprovalChoice::Answer(_) => Ok((CallStatus::Running, None, None, by.clone())),
            ApprovalChoice::Edit { arguments } => match self.check_and_classify(&call.tool, &arguments) {
                Ok(classified) => {
                    // The edited call still goes through phase 1 (own data is refused
                    // whatever the user typed) and the user's own deny rules.
                    let rules = self.db_rules();
                    let ctx = self.policy_context(operation_id, &[Origin::User], &[]);
                    let decision = policy::decide(&classified.call(&call.tool, &arguments), &rules, &ctx);
                    if decision.action == Action::Deny {
                        let phase = serde_json::to_value(&decision.phase).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_else(|| "rule".into());
                        Ok((CallStatus::Denied, Some(decision.why), None, format!("policy: {phase}")))
                    } else {
                        Ok((CallStatus::Running, None, Some((arguments, classified.risk)), format!("{by} (edited)")))
                    }
                }
                Err(err) => Err(format!("the edited arguments cannot be used: {err}")),
            },
            ApprovalChoice::Always { target, pattern, scope } => {
                let pattern = match (target, pattern) {
                    (Some(target), Some(pattern)) => agent_store::parse_target(&target).and_then(|t| Pattern::new(t, &pattern)).map(Some),
                    _ => Ok(None),
                };
                let scope = match scope {
                    crate::agent::events::AllowFor::ThisTask => Scope::Operation(operation_id),
                    crate::agent::events::AllowFor::Day => Scope::Until(now_millis() + 86_400_000),
                    crate::agent::events::AllowFor::Always => Scope::Always,
                };
                match pattern {
                    Err(err) => Err(format!("the rule was not saved: {err}")),
                    Ok(pattern) => {
                        let rule = Rule { id: next_id(), tool: call.tool.clone(), action: Action::Allow, pattern, scope };
                        let classified = self.check_and_classify(&call.tool, &call.arguments).unwrap_or_default();
                        let ctx = self.policy_context(operation_id, &[], &settings.always_ask);
                        match policy::validate_rule(&rule, &classified.call(&call.tool, &call.arguments), &ctx) {
                            Err(err) => Err(format!("the rule was not saved: {err}")),
                            Ok(()) => {
                                let id = rule.id;
                                match self.record(AgentWrite::AddRule(rule)) {
                                    Ok(()) => Ok((CallStatus::Running, None, None, format!("{by} (rule {id} added)"))),
                                    Err(err) => Err(format!("the rule was not saved: {err}")),
                                }
                            }
                        }
                    }
                }
            }
        };
        let (to, output, edited, decided_by) = match decided {
            Ok(decided) => decided,
            Err(why) => {
                self.sink.notice(why);
                return;
            }
        };
        let write = AgentWrite::DecideCall { call_id, to, by: decided_by.clone(), output: output.clone(), arguments: edited.clone(), at_millis: now_millis() };
        if let Err(why) = self.record(write) {
            // Someone else decided first: what they decided is what happens, here, where the task runs.
            self.sink.notice(why);
            self.sync_decided(operation_id, call_id);
            self.after_decision(operation_id);
            return;
        }
        match to {
            CallStatus::Running => self.approve(operation_id, call_id, edited, &decided_by),
            status => {
                let output = output.unwrap_or_default();
                let result = if status == CallStatus::Denied { ToolOutput::error(output) } else { ToolOutput::ok(output) };
                self.settle(operation_id, call_id, status, result, Some(decided_by));
            }
        }
        self.after_decision(operation_id);
    }

    /// After a decision: the step's results go in, and the task goes on when nothing waits.
    fn after_decision(&mut self, operation_id: i64) {
        let step = self.acting.live.get(&operation_id).map_or(0, |l| l.row.steps);
        self.close_step_if_settled(operation_id, step);
        let waiting = self.acting.live.get(&operation_id).is_some_and(|l| l.calls.iter().any(|c| c.status == CallStatus::Waiting));
        if !waiting && self.acting.live.contains_key(&operation_id) {
            if let Some(live) = self.acting.live.get_mut(&operation_id) {
                live.row.status = OpStatus::Running;
            }
            self.advance(operation_id);
        }
    }

    fn refuse_decision(&self, call_id: i64, why: String) {
        self.sink.notice(why.clone());
        self.sink.send(AgentEvent::DecisionRefused { call_id, why });
    }

    /// A decision on a call this process does not drive. A live owner gets
    /// it through the database (it runs the call); a task whose owner is
    /// gone is taken over here first.
    fn decide_elsewhere(&mut self, call_id: i64, choice: ApprovalChoice, by: &str) {
        self.open_db();
        let Some(conn) = self.db.as_ref() else {
            self.refuse_decision(call_id, "cowork's database cannot be read".into());
            return;
        };
        let call = match agent_store::call(conn, call_id) {
            Ok(Some(call)) => call,
            Ok(None) => return self.refuse_decision(call_id, format!("there is no call {call_id} (see cowork audit)")),
            Err(err) => return self.refuse_decision(call_id, format!("cannot read call {call_id}: {err}")),
        };
        if call.status != CallStatus::Waiting {
            let by = call.decided_by.clone().unwrap_or_else(|| "cowork".into());
            return self.refuse_decision(call_id, format!("call {call_id} was already decided by {by} (it is {})", call.status.as_str()));
        }
        let owner = agent_store::operation(conn, call.operation_id).ok().flatten().and_then(|op| op.owner);
        match owner {
            Some(owner) if owner != agent_store::this_process() && agent_store::owner_alive(&owner) => {
                let (to, output) = match &choice {
                    ApprovalChoice::Deny { reason } => (CallStatus::Denied, Some(if reason.trim().is_empty() { "The user denied this call.".to_owned() } else { format!("The user denied this call: {}", reason.trim()) })),
                    ApprovalChoice::Answer(text) if call.tool == "ask_user" => (CallStatus::Done, Some(text.clone())),
                    ApprovalChoice::Once | ApprovalChoice::Answer(_) => (CallStatus::Running, None),
                    ApprovalChoice::Edit { .. } | ApprovalChoice::Always { .. } => {
                        return self.refuse_decision(call_id, format!("call {call_id} belongs to a task cowork (pid {}) drives: edit it or make a rule there", agent_store::owner_pid(&owner)));
                    }
                };
                let decided_by = format!("{by} (pid {})", std::process::id());
                let write = AgentWrite::DecideCall { call_id, to, by: decided_by, output, arguments: None, at_millis: now_millis() };
                match self.record(write) {
                    Ok(()) => {
                        self.sink.send(AgentEvent::DecidedForOwner { call_id, owner_pid: agent_store::owner_pid(&owner).to_owned() });
                    }
                    Err(why) => self.refuse_decision(call_id, why),
                }
            }
            _ => {
                // Nobody drives it (or its process is gone): taken over, then decided here.
                self.resume_one(call.operation_id);
                if self.acting.live.values().any(|l| l.calls.iter().any(|c| c.call_id == call_id)) {
                    self.handle_decision_by(call_id, choice, by.to_owned());
                } else {
                    self.refuse_decision(call_id, format!("call {call_id} could not be taken over: another process drives its task now"));
                }
            }
        }
    }

    /// A waiting call that the database says another process decided: this
    /// process (the owner) takes that decision, and runs an approved call.
    pub(super) fn sync_decided(&mut self, operation_id: i64, call_id: i64) {
        self.open_db();
        let Some(row) = self.db.as_ref().and_then(|conn| agent_store::call(conn, call_id).ok().flatten()) else { return };
        let Some(live) = self.acting.live.get_mut(&operation_id) else { return };
        let Some(call) = live.calls.iter_mut().find(|c| c.call_id == call_id) else { return };
        if call.status != CallStatus::Waiting || row.status == CallStatus::Waiting {
            return;
        }
        call.status = row.status;
        call.decided_by = row.decided_by.clone();
        call.arguments = row.arguments.clone();
        call.risk = row.risk;
        call.output = row.output.clone();
        call.is_error = row.is_error;
        call.expires_at_millis = None;
        call.started_at_millis = row.started_at_millis;
        call.finished_at_millis = row.finished_at_millis;
        let call = call.clone();
        self.sink.send(AgentEvent::ToolCall(Box::new(view(live, &call))));
        match call.status {
            CallStatus::Running if call.started_at_millis.is_none() => {
                let by = call.decided_by.clone().unwrap_or_else(|| "another cowork".into());
                self.approve(operation_id, call_id, None, &by);
            }
            CallStatus::Running => {}
            _ => self.audit(&call, call.status.as_str()),
        }
    }

    /// Waiting calls that another process may have decided since they were
    /// shown: each one the database no longer has waiting is taken up.
    pub(super) fn poll_decisions(&mut self) {
        let waiting: Vec<(i64, i64)> =
            self.acting.live.iter().flat_map(|(op, l)| l.calls.iter().filter(|c| c.status == CallStatus::Waiting).map(|c| (*op, c.call_id))).collect();
        if waiting.is_empty() {
            return;
        }
        self.open_db();
        let ids: Vec<i64> = waiting.iter().map(|(_, id)| *id).collect();
        let Some(states) = self.db.as_ref().and_then(|conn| agent_store::call_states(conn, &ids).ok()) else { return };
        let mut touched: Vec<i64> = Vec::new();
        for (call_id, status) in states {
            if status == CallStatus::Waiting {
                continue;
            }
            let Some((op, _)) = waiting.iter().find(|(_, id)| *id == call_id) else { continue };
            self.sync_decided(*op, call_id);
            if !touched.contains(op) {
                touched.push(*op);
            }
        }
        for op in touched {
            self.after_decision(op);
        }
    }

    /// Whether any shown call waits for a decision (the worker then looks for ones made elsewhere).
    pub(super) fn has_waiting(&self) -> bool {
        self.acting.live.values().any(|l| l.calls.iter().any(|c| c.status == CallStatus::Waiting))
    }

    /// A call that could not be started here (someone else started or settled it).
    fn not_started(&mut self, operation_id: i64, call_id: i64, why: &str) {
        self.open_db();
        let row = self.db.as_ref().and_then(|conn| agent_store::call(conn, call_id).ok().flatten());
        let Some(live) = self.acting.live.get_mut(&operation_id) else { return };
        let Some(call) = live.calls.iter_mut().find(|c| c.call_id == call_id) else { return };
        match row {
            Some(row) if row.status.settled() => {
                call.status = row.status;
                call.output = row.output;
                call.is_error = row.is_error;
                call.finished_at_millis = row.finished_at_millis;
            }
            _ => {
                call.status = CallStatus::Cancelled;
                call.is_error = true;
                call.finished_at_millis = Some(now_millis());
                call.output = Some(format!("not run: {why}"));
            }
        }
        let call = call.clone();
        self.sink.send(AgentEvent::ToolCall(Box::new(view(live, &call))));
    }

    /// Approves a waiting call (its decision recorded) and runs it at once.
    fn approve(&mut self, operation_id: i64, call_id: i64, edited: Option<(Value, crate::tools::Risk)>, by: &str) {
        let Some(live) = self.acting.live.get_mut(&operation_id) else { return };
        let Some(call) = live.calls.iter_mut().find(|c| c.call_id == call_id) else { return };
        if let Some((arguments, risk)) = edited {
            call.arguments = arguments;
            call.risk = risk;
        }
        call.status = CallStatus::Running;
        call.started_at_millis = None;
        call.expires_at_millis = None;
        call.decided_by = Some(by.to_owned());
        let tool = call.tool.clone();
        // Approved after a restart, the call's server may still be starting.
        if integrations::is_mcp(&tool) && integrations::find(&self.acting.mcp_tools, &tool).is_none() {
            self.refresh_mcp_tools_for(&[tool.as_str()]);
        }
        // The user allowed this definition of an MCP tool: a later change asks again.
        if let Some(offered) = integrations::find(&self.acting.mcp_tools, &tool) {
            let definition = offered.tool.clone();
            if let Err(err) = self.record(AgentWrite::AllowedMcpTool(definition, now_millis())) {
                tracing::warn!(%err, "an MCP tool's allowed definition was not recorded");
            }
        }
        let epoch = self.stop_epoch.load(Ordering::SeqCst);
        self.call_tools(operation_id, &[call_id], epoch);
    }

    /// A guardrail's pause: go on, or stop.
    pub(super) fn handle_continue(&mut self, operation_id: i64, go_on: bool) {
        let Some(live) = self.acting.live.get_mut(&operation_id) else { return };
        let Some(paused) = live.state.paused.take() else { return };
        if !go_on {
            self.finish(operation_id, OpStatus::Cancelled, Some("stopped by you".into()));
            return;
        }
        let guard = paused.split(':').next().unwrap_or_default().to_owned();
        match guard.as_str() {
            "check_in" | "restart" => live.state.checked_in_at_millis = Some(now_millis()),
            // The spend window starts over from what was spent so far.
            "spend" => live.state.spend.clear(),
            _ => live.state.waived.push(guard),
        }
        live.row.status = OpStatus::Running;
        self.advance(operation_id);
    }

    /// Settings → Agent: the rules and the newest audit entries.
    pub(super) fn overview(&mut self) {
        self.open_db();
        let Some(conn) = self.db.as_ref() else {
            self.sink.send(AgentEvent::AgentOverview { rules: Vec::new(), problems: vec!["cowork.db cannot be read".into()], audit: Vec::new() });
            return;
        };
        let (rules, mut problems) = agent_store::rules(conn).unwrap_or_else(|err| (Vec::new(), vec![format!("cannot read the rules: {err}")]));
        let audit = agent_store::audit(conn, OVERVIEW_AUDIT).unwrap_or_else(|err| {
            problems.push(format!("cannot read the audit log: {err}"));
            Vec::new()
        });
        self.sink.send(AgentEvent::AgentOverview {
            rules: rules.iter().map(|r| (r.id, agent_store::rule_text(r))).collect(),
            problems,
            audit: audit.iter().map(agent_store::audit_text).collect(),
        });
    }

    /// Settings → Agent: a rule removed, and the overview sent again.
    pub(super) fn remove_rule(&mut self, id: i64) {
        if let Err(err) = self.record(AgentWrite::RemoveRule(id)) {
            self.sink.notice(format!("the rule was not removed: {err}"));
        }
        self.overview();
    }

    /// Stop: every operation that waits is cancelled (running ones stop by the epoch).
    pub(super) fn cancel_waiting(&mut self) {
        let waiting: Vec<i64> = self.acting.live.iter().filter(|(_, l)| l.row.status == OpStatus::WaitingForHuman).map(|(id, _)| *id).collect();
        for id in waiting {
            self.finish(id, OpStatus::Cancelled, Some("stopped".into()));
        }
    }

    /// Denies approvals nobody answered in time; returns when the next one expires.
    pub(super) fn expire_approvals(&mut self, now: i64) -> Option<i64> {
        let expired: Vec<(i64, i64)> = self
            .acting
            .live
            .iter()
            .flat_map(|(op, l)| l.calls.iter().filter(|c| c.status == CallStatus::Waiting && c.expires_at_millis.is_some_and(|at| at <= now)).map(|c| (*op, c.call_id)))
            .collect();
        let mut touched: Vec<i64> = Vec::new();
        for (op, call_id) in expired {
            let waited = self.acting.live.get(&op).and_then(|l| l.calls.iter().find(|c| c.call_id == call_id)).map_or(0, |c| c.expires_at_millis.unwrap_or(c.created_at_millis) - c.created_at_millis);
            let why = format!("Nobody approved this call within {}, so it was not run.", crate::ids::format_duration_millis(waited));
            self.settle(op, call_id, CallStatus::Expired, ToolOutput::error(why), Some("timeout".into()));
            self.sink.notice("an approval expired; the task went on without that call");
            if !touched.contains(&op) {
                touched.push(op);
            }
        }
        for op in touched {
            let step = self.acting.live.get(&op).map_or(0, |l| l.row.steps);
            self.close_step_if_settled(op, step);
            if self.acting.live.get(&op).is_some_and(|l| !l.calls.iter().any(|c| c.status == CallStatus::Waiting)) {
                self.advance(op);
            }
        }
        self.acting.live.values().flat_map(|l| l.calls.iter().filter(|c| c.status == CallStatus::Waiting).filter_map(|c| c.expires_at_millis)).min()
    }

    /// Ends an operation: the answer is stored and shown as finished.
    pub(super) fn finish(&mut self, operation_id: i64, status: OpStatus, note: Option<String>) {
        let Some(mut live) = self.acting.live.remove(&operation_id) else { return };
        let now = now_millis();
        let mut ended = Vec::new();
        for call in live.calls.iter_mut().filter(|c| !c.status.settled()) {
            call.status = CallStatus::Cancelled;
            call.finished_at_millis = Some(now);
            call.output.get_or_insert_with(|| "not run: the task ended".into());
            ended.push(call.clone());
        }
        for call in ended {
            let _ = self.record(AgentWrite::Call(call.clone()));
            self.sink.send(AgentEvent::ToolCall(Box::new(view(&live, &call))));
            self.audit(&call, "cancelled");
        }
        live.row.status = status;
        live.row.error = note.clone().filter(|_| status != OpStatus::Done);
        live.state.paused = None;
        self.save_operation(&mut live);
        self.report_finished(&live, status, note.as_deref());
        let mut text = live.state.shown.trim().to_owned();
        let (message_status, error) = match status {
            OpStatus::Done => (MessageStatus::Done, None),
            OpStatus::Cancelled => (MessageStatus::Stopped, None),
            _ => (MessageStatus::Failed, note.clone()),
        };
        if let (Some(note), OpStatus::Error) = (&note, status) {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&format!("({note})"));
        }
        if live.remember {
            let citations = (!live.state.citations.is_empty()).then(|| serde_json::to_string(&live.state.citations).unwrap_or_default());
            let message = super::worker::answer_message(&live.request, text, error.as_deref(), message_status, &live.row.brain, live.row.cost_usd, citations);
            self.persist(message, Some(live.row.brain.clone()));
        }
        self.sink.send(AgentEvent::AnswerCost { answer_id: live.request.answer_id, usd: live.row.cost_usd });
        // A cloud task's tokens over all its steps, and how much of its prompts the provider's cache served.
        let stats = GenerationStats {
            prompt_tokens: live.tokens.input_tokens as usize,
            completion_tokens: live.tokens.output_tokens as usize,
            cached_prompt_tokens: live.tokens.cached_input_tokens as usize,
            reasoning_tokens: live.tokens.reasoning_tokens as usize,
            ..GenerationStats::default()
        };
        self.sink.send(AgentEvent::AnswerFinished { answer_id: live.request.answer_id, status: message_status, error, stats });
    }

    /// After a restart: operations that were open come back. A waiting
    /// approval is shown again; a call that was running "may have run" and is
    /// never run again by itself; an operation interrupted mid-step pauses
    /// until the user continues it. An operation another live process drives
    /// is left to it; one whose process is gone is taken over (once, however
    /// many processes start together).
    pub fn resume_operations(&mut self) {
        self.refresh_mcp_tools();
        self.open_db();
        let Some(conn) = self.db.as_ref() else { return };
        let open = match agent_store::open_operations(conn) {
            Ok(open) => open,
            Err(err) => {
                tracing::warn!(%err, "cannot read open operations");
                return;
            }
        };
        for row in open {
            self.resume_row(row);
        }
    }

    /// Takes over one open operation by id (a decision came for it and its process is gone).
    fn resume_one(&mut self, operation_id: i64) {
        if self.acting.live.contains_key(&operation_id) {
            return;
        }
        self.open_db();
        let Some(row) = self.db.as_ref().and_then(|conn| agent_store::operation(conn, operation_id).ok().flatten()) else { return };
        if matches!(row.status, OpStatus::Running | OpStatus::WaitingForHuman | OpStatus::Idle) {
            self.resume_row(row);
        }
    }

    fn resume_row(&mut self, mut row: OperationRow) {
        if self.acting.live.contains_key(&row.operation_id) {
            return;
        }
        let me = agent_store::this_process();
        if let Some(owner) = &row.owner
            && owner != me
            && agent_store::owner_alive(owner)
        {
            tracing::debug!(operation = row.operation_id, owner = %owner, "an operation another cowork drives is left to it");
            return;
        }
        if row.owner.as_deref() != Some(me) {
            if let Err(err) = self.record(AgentWrite::AdoptOperation { operation_id: row.operation_id, owner: me.to_owned(), previous: row.owner.clone() }) {
                tracing::debug!(%err, operation = row.operation_id, "not taken over");
                return;
            }
            row.owner = Some(me.to_owned());
        }
        let (settings, providers) = self.brains();
        let Some(conn) = self.db.as_ref() else { return };
        let calls = agent_store::calls(conn, row.operation_id).unwrap_or_default();
        let state: State = serde_json::from_str(&row.state).unwrap_or_default();
        // A helper lives only inside its parent's `delegate` call, which comes back as
        // "may have run": the helper itself is not resumed on its own, with no answer to show.
        if row.answer_id.is_none() || state.depth > 0 {
            row.status = OpStatus::Cancelled;
            row.error = Some("cowork stopped during this helper task".into());
            row.updated_at_millis = now_millis();
            let _ = self.record(AgentWrite::Operation(row));
            return;
        }
        let brain = if row.brain == "local" {
            Brain::Local
        } else {
            match providers.get(&row.brain) {
                Some(provider) => Brain::Cloud {
                    provider: provider.clone(),
                    key: crate::brains::provider_key(&self.config.data_dir, provider).ok().flatten(),
                    consent: settings.consent.get(&provider.name).copied().unwrap_or(false),
                },
                None => Brain::Local,
            }
        };
        let thread = crate::records::ChatThread { thread_id: row.thread_id.unwrap_or_default(), title: row.task.chars().take(60).collect(), updated_at_millis: row.updated_at_millis };
        let request = ChatRequest {
            thread,
            answer_id: row.answer_id.unwrap_or_default(),
            ask_id: if state.ask_id != 0 { state.ask_id } else { row.answer_id.unwrap_or_default() },
            text: row.task.clone(),
            ..ChatRequest::default()
        };
        let step_has_calls = calls.iter().any(|c| c.step == row.steps);
        // An automation's operation wrote no chat message and writes none now.
        let automation = state.automation.is_some();
        let mut live = Live { row, state, calls, brain, request, step_has_calls, remember: !automation, tokens: Default::default() };
        let mut interrupted = false;
        for call in live.calls.iter_mut() {
            if call.status == CallStatus::Running && call.started_at_millis.is_some() {
                call.status = CallStatus::MayHaveRun;
                call.is_error = true;
                call.finished_at_millis = Some(now_millis());
                call.output = Some("cowork stopped while this call was running: it may have run — check before running it again.".into());
                interrupted = true;
            }
        }
        let changed: Vec<CallRow> = live.calls.iter().filter(|c| c.status == CallStatus::MayHaveRun && c.output.as_deref().is_some_and(|o| o.starts_with("cowork stopped while"))).cloned().collect();
        for call in &changed {
            let _ = self.record(AgentWrite::Call(call.clone()));
            self.audit(call, "may_have_run");
        }
        let waiting = live.calls.iter().any(|c| c.status == CallStatus::Waiting);
        if automation && !waiting {
            // Its run reports the interruption; nobody is asked to continue a step the run gave up on.
            let id = live.row.operation_id;
            self.acting.live.insert(id, live);
            self.finish(id, OpStatus::Error, Some("cowork stopped while this step was running; a call may have run — check before running the flow again".into()));
            return;
        }
        if live.row.status == OpStatus::Running || interrupted {
            live.row.status = OpStatus::WaitingForHuman;
            if !waiting && live.state.paused.is_none() {
                live.state.paused = Some("restart: cowork restarted while this task was running. Continue it?".into());
            }
        }
        for call in &live.calls {
            self.sink.send(AgentEvent::ToolCall(Box::new(view(&live, call))));
        }
        self.save_operation(&mut live);
        let id = live.row.operation_id;
        self.acting.live.insert(id, live);
        let step = self.acting.live.get(&id).map_or(0, |l| l.row.steps);
        self.close_step_if_settled(id, step);
        // Calls approved (in another process, or before a crash) but not started: they run now, once.
        let approved: Vec<i64> = self.acting.live.get(&id).map(|l| l.calls.iter().filter(|c| c.status == CallStatus::Running && c.started_at_millis.is_none()).map(|c| c.call_id).collect()).unwrap_or_default();
        if !approved.is_empty() {
            let epoch = self.stop_epoch.load(Ordering::SeqCst);
            self.call_tools(id, &approved, epoch);
            if self.acting.live.get(&id).is_some_and(|l| l.state.paused.is_none()) {
                self.after_decision(id);
            }
        }
    }

    /// Takes over an operation whose process is gone, and goes on with what was decided for it.
    pub(super) fn handle_resume(&mut self, operation_id: i64) {
        self.resume_one(operation_id);
        if !self.acting.live.contains_key(&operation_id) {
            self.sink.notice(format!("operation {operation_id} could not be taken over: another process drives it"));
        }
    }

    /// `delegate`: a helper with its own context and a subset of the tools
    /// runs a few steps and returns only its summary. It runs what the policy
    /// allows without asking; a call that would need approval is refused to
    /// it (the parent can ask for it).
    fn delegate(&mut self, operation_id: i64, call: &CallRow, epoch: u64) -> ToolOutput {
        let task = call.arguments.get("task").and_then(Value::as_str).unwrap_or_default().to_owned();
        let settings = self.settings();
        let Some(parent) = self.acting.live.get(&operation_id) else { return ToolOutput::error("the task is gone") };
        let wanted: Vec<String> = call.arguments.get("tools").and_then(Value::as_array).map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()).unwrap_or_default();
        let tools: Vec<String> = parent
            .state
            .tools
            .iter()
            .filter(|t| !matches!(t.as_str(), "delegate" | "ask_user" | "update_todos"))
            .filter(|t| wanted.is_empty() || wanted.contains(t))
            .cloned()
            .collect();
        let brain = parent.brain.clone();
        let (depth, thread_id, parent_request) = (parent.state.depth, parent.row.thread_id, parent.request.clone());
        // The task was written by a model that may have read untrusted text: it carries that origin on.
        let task_origin = parent.state.origins().into_iter().find(|o| !o.trusted()).unwrap_or(Origin::Instructions);
        let names: Vec<&str> = tools.iter().map(String::as_str).collect();
        let user_memory = self.user_memory(&brain, &settings);
        let mut system = self.operation_system_prompt(&brain, &names, &user_memory, now_millis());
        system.push_str("\n\nYou are a helper: do the task, then answer with a short summary of what you found or did. Calls that need the user's approval are refused to you; say what would be needed instead.");
        let now = now_millis();
        let mut state = State { tools, started_at_millis: now, depth: depth + 1, ..State::default() };
        state.push(Turn::new(Role::System, system), Origin::Instructions);
        state.push(Turn::new(Role::User, format!("{}{task}", task_clock(&brain, now))), task_origin);
        state.head = state.entries.len();
        let helper_id = next_id();
        let row = OperationRow::running(helper_id, thread_id, None, task, brain.name(), now);
        // The helper streams nothing to the chat: its answer id is none.
        let request = ChatRequest { answer_id: 0, ..parent_request };
        let mut live = Live { row, state, calls: Vec::new(), brain, request, step_has_calls: false, remember: false, tokens: Default::default() };
        // Its row first: the helper's calls are recorded against it (a foreign key).
        self.save_operation(&mut live);
        self.acting.live.insert(helper_id, live);
        let limits = Limits { max_steps: HELPER_STEPS, ..Self::limits(&settings) };
        let summary = loop {
            let Some(helper) = self.acting.live.get_mut(&helper_id) else { break Err("the helper is gone".to_owned()) };
            match operation::next(&helper.state, &helper.calls, helper.row.steps, helper.step_has_calls, &limits, now_millis()) {
                Next::CallLlm => {
                    if let Err(err) = self.call_llm(helper_id, epoch, &settings) {
                        break Err(err);
                    }
                }
                Next::CallTools(ids) => self.call_tools(helper_id, &ids, epoch),
                Next::RequestApproval(ids) => {
                    for id in ids {
                        self.settle(helper_id, id, CallStatus::Denied, ToolOutput::error("Refused to the helper: this call needs the user's approval. Report what is needed instead."), Some("delegate".into()));
                    }
                    let step = self.acting.live.get(&helper_id).map_or(0, |l| l.row.steps);
                    self.close_step_if_settled(helper_id, step);
                }
                Next::Pause { why, .. } => break Err(why),
                Next::Finish { early } => {
                    let text = self.acting.live.get(&helper_id).map(|l| l.state.shown.trim().to_owned()).unwrap_or_default();
                    break match early {
                        Some(reason) if text.is_empty() => Err(reason),
                        _ => Ok(text),
                    };
                }
            }
        };
        if let Some(mut helper) = self.acting.live.remove(&helper_id) {
            helper.row.status = if summary.is_ok() { OpStatus::Done } else { OpStatus::Error };
            helper.row.error = summary.as_ref().err().cloned();
            self.save_operation(&mut helper);
            let cost = helper.row.cost_usd;
            if let Some(parent) = self.acting.live.get_mut(&operation_id) {
                parent.row.cost_usd += cost;
                if cost > 0.0 {
                    parent.state.spend.push((now_millis(), cost));
                }
            }
        }
        match summary {
            Ok(text) if !text.is_empty() => ToolOutput::ok(text),
            Ok(_) => ToolOutput::error("the helper finished without a summary"),
            Err(err) => ToolOutput::error(format!("the helper stopped: {err}")),
        }
    }
}
