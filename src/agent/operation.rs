//! An operation's conversation and the runner that decides its next move.
//! `State` holds the turns (each with its `Origin`), the offered tools, the
//! todos and the spend. The runner, `next`, is pure: from the state, the calls
//! of the current step and the limits it returns `CallLlm`, `CallTools`,
//! `RequestApproval`, `Pause` (a guardrail: the same call three times, over
//! $1.00 of cloud in 10 minutes, running over 5 minutes; a restart pauses an
//! operation too, in `acting::resume_operations`) or `Finish` (the model
//! answered without calls, 20 steps, most calls failing); the agent worker's
//! executors (`acting`) act on it. Every text in the conversation keeps its
//! origin, so the policy knows whether a step's prompt holds anything but the
//! user's words and cowork's own.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::store::{CallRow, CallStatus, OperationRow};
use crate::brains::{ProviderConfig, Role, ToolCall, Turn};
use crate::records::ChatThread;
use crate::tools::Origin;
use crate::tools::files::FilesEnv;

/// One question in a thread.
#[derive(Clone, Debug, Default)]
pub struct ChatRequest {
    pub thread: ChatThread,
    pub thread_is_new: bool,
    pub user_message_id: i64,
    pub answer_id: i64,
    pub text: String,
    /// Earlier messages of the thread, oldest first.
    pub history: Vec<(crate::records::Role, String)>,
    /// The question this answers: a retry with a smarter model keeps the first answer's.
    pub ask_id: i64,
    /// "Try harder": who gave the answer being retried.
    pub try_harder_from: Option<crate::brains::Target>,
    /// The user allowed captured context for this request only.
    pub consent_once: bool,
    /// A retry adds an answer to an existing question: the question is not stored again.
    pub is_retry: bool,
    /// Run as an agent operation: the model may call tools (Settings → Agent).
    pub agent: bool,
    /// MCP resources the user attached: data from a server, never instructions.
    pub attachments: Vec<crate::records::Attachment>,
    /// Who wrote the text when not the user alone: an MCP server's prompt or
    /// an app filled the input (the user sent it, but its words are theirs).
    pub text_origin: Option<crate::tools::Origin>,
    /// The brain the user chose for this request (`cowork ask --agent
    /// --provider NAME`, `--local-model NAME`); None: the router decides.
    pub brain: Option<BrainChoice>,
}

/// A brain chosen by name rather than routed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BrainChoice {
    /// The local model (which one is the llm worker's: `--local-model` starts it with that one).
    Local,
    /// A configured provider, with another of its models if given.
    Provider { name: String, model: Option<String> },
}

impl ChatRequest {
    /// A question asked in `thread` (new, or with its history to add): the
    /// question's message id (it is its own ask), its answer's id and its
    /// text; plain chat, nothing attached, the router chooses the brain.
    pub fn new(thread: ChatThread, thread_is_new: bool, user_message_id: i64, answer_id: i64, text: impl Into<String>) -> Self {
        Self { thread, thread_is_new, user_message_id, answer_id, text: text.into(), ask_id: user_message_id, ..Self::default() }
    }

    /// The attachments as the model reads them, each marked as data from its server.
    pub fn attached_data(&self) -> String {
        self.attachments.iter().map(crate::records::Attachment::as_data).collect::<Vec<_>>().join("\n\n")
    }
}

/// A call as the brain wrote it: (id, tool, arguments), or why it could not be read.
pub(super) type RawCall = Result<(String, String, Value), String>;

/// Who thinks for an operation.
#[derive(Clone, Debug)]
pub enum Brain {
    Local,
    Cloud { provider: ProviderConfig, key: Option<String>, consent: bool },
}

impl Brain {
    pub(super) fn name(&self) -> String {
        match self {
            Brain::Local => "local".into(),
            Brain::Cloud { provider, .. } => provider.name.clone(),
        }
    }
}

/// An operation the worker is driving.
pub struct Live {
    pub row: OperationRow,
    pub state: State,
    pub calls: Vec<CallRow>,
    pub brain: Brain,
    pub request: ChatRequest,
    /// Whether the current step asked for any call.
    pub step_has_calls: bool,
    /// Keep the question and answer (false for `<no-memory>`).
    pub remember: bool,
    /// The cloud steps' tokens so far (prompt, cached, output), for the answer's footer.
    pub tokens: crate::brains::Usage,
}

/// What the agent acts with, built once per worker.
pub struct Acting {
    pub live: HashMap<i64, Live>,
    pub skills: Vec<crate::tools::skills::Skill>,
    pub files: FilesEnv,
    /// The MCP servers' tools, as the mcp worker last listed them (refreshed per operation).
    pub mcp_tools: Vec<crate::mcp::worker::Offered>,
    /// MCP servers that were still starting when `mcp_tools` was read.
    pub mcp_starting: Vec<String>,
    /// The automations offered as `flow_<name>` (read at each operation's start).
    pub flow_tools: Vec<super::flows::FlowTool>,
}

impl Acting {
    pub fn new(data_dir: PathBuf) -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"));
        let (skills, problems) = crate::tools::skills::discover(&data_dir);
        for problem in problems {
            tracing::warn!(%problem, "a skill could not be read");
        }
        // The data directory resolved, so no spelling of it slips past the checks.
        let data_dir = data_dir.canonicalize().unwrap_or(data_dir);
        Acting { live: HashMap::new(), skills, files: FilesEnv { cwd: home.clone(), home, data_dir }, mcp_tools: Vec::new(), mcp_starting: Vec::new(), flow_tools: Vec::new() }
    }
}

/// One text of the conversation and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub turn: Turn,
    pub origin: Origin,
}

pub use crate::agent::events::TodoItem as Todo;

/// What the operation has said and seen so far, saved after every step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub entries: Vec<Entry>,
    /// The tools offered to the model.
    pub tools: Vec<String>,
    pub todos: Vec<Todo>,
    /// The text shown to the user so far (every step's text).
    pub shown: String,
    pub started_at_millis: i64,
    /// Cloud spend by time, for the spend guardrail.
    #[serde(default)]
    pub spend: Vec<(i64, f64)>,
    /// A guardrail paused the operation: why (the user continues or stops it).
    #[serde(default)]
    pub paused: Option<String>,
    /// The user said to keep going after a check-in at this time.
    #[serde(default)]
    pub checked_in_at_millis: Option<i64>,
    /// Guardrails the user has waved through (so the same one does not pause again at once).
    #[serde(default)]
    pub waived: Vec<String>,
    /// The sub-agent depth (0: the user's own operation).
    #[serde(default)]
    pub depth: u32,
    /// Entries up to and including the task: kept however long the operation gets.
    #[serde(default)]
    pub head: usize,
    /// The user's message the answer belongs to (the answer links back to it after a restart).
    #[serde(default)]
    pub ask_id: i64,
    /// What the answer stands on, numbered as the model read it: the notes
    /// recalled before the first step, then what memory tools returned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub citations: Vec<crate::memory::rag::Citation>,
    /// The automation run and step this operation works for (none: the user's own task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automation: Option<StepRef>,
}

/// Which run and step of an automation an operation works for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRef {
    pub run_id: i64,
    pub seq: u32,
    pub flow: String,
    pub step_id: String,
    /// A tool step: one call, no model.
    pub tool_step: bool,
}

impl State {
    /// The state as it is saved: the `<private>…</private>` spans of its
    /// texts left out (the model saw them in the turn they were typed in).
    /// Borrowed, not copied, when there is none (every step saves the state).
    pub fn stored(&self) -> std::borrow::Cow<'_, State> {
        let private = |text: &str| text.contains("<private>");
        if !private(&self.shown) && !self.entries.iter().any(|e| private(&e.turn.content)) {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut stored = self.clone();
        for entry in &mut stored.entries {
            entry.turn.content = crate::records::redact_private(&entry.turn.content);
        }
        stored.shown = crate::records::redact_private(&stored.shown);
        std::borrow::Cow::Owned(stored)
    }

    /// The origins of everything in the next step's prompt: its entries, and
    /// the definitions of the MCP tools offered with it (a server wrote those).
    pub fn origins(&self) -> Vec<Origin> {
        let mut origins: Vec<Origin> = Vec::new();
        for entry in &self.entries {
            if !origins.contains(&entry.origin) {
                origins.push(entry.origin);
            }
        }
        if self.tools.iter().any(|t| crate::agent::integrations::is_mcp(t)) && !origins.contains(&Origin::McpDefinition) {
            origins.push(Origin::McpDefinition);
        }
        origins
    }

    pub fn push(&mut self, turn: Turn, origin: Origin) {
        self.entries.push(Entry { turn, origin });
    }

    /// Takes a tool's sources as the answer's next citations (one already
    /// cited keeps its number); whether any was new.
    pub fn add_sources(&mut self, sources: Vec<crate::memory::rag::Citation>) -> bool {
        let before = self.citations.len();
        for mut source in sources {
            if !self.citations.iter().any(|c| c.stream == source.stream && c.source_id == source.source_id) {
                source.n = self.citations.len() + 1;
                self.citations.push(source);
            }
        }
        self.citations.len() > before
    }

    /// The turns for a cloud brain, long conversations cut in the middle:
    /// the system prompt and the first request always stay.
    pub fn turns(&self, keep_last: usize) -> Vec<Turn> {
        let turns: Vec<Turn> = self.entries.iter().map(|e| e.turn.clone()).collect();
        truncate(turns, self.head, keep_last)
    }
}

/// Keeps the head (system prompt, history and the request: `head` turns, at
/// least up to the first user turn) and the last `keep_last` turns, never
/// starting the tail on a tool result whose call was cut.
pub fn truncate(turns: Vec<Turn>, head: usize, keep_last: usize) -> Vec<Turn> {
    let first_user = turns.iter().position(|t| t.role == Role::User).map_or(turns.len(), |i| i + 1);
    let head = head.max(first_user).min(turns.len());
    if turns.len() <= head + keep_last {
        return turns;
    }
    let mut start = turns.len() - keep_last;
    while start < turns.len() && turns[start].role == Role::Tool {
        start += 1;
    }
    let mut kept: Vec<Turn> = turns[..head].to_vec();
    kept.push(Turn::new(Role::User, format!("[{} earlier messages of this task were left out to fit]", start - head)));
    kept.extend_from_slice(&turns[start..]);
    kept
}

/// Limits and guardrails (settings).
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_steps: u32,
    /// The same tool with the same arguments this many times: "I seem to be stuck".
    pub repeat_limit: usize,
    pub spend_limit_usd: f64,
    pub spend_window_millis: i64,
    /// Running longer than this: check in with the user.
    pub check_in_millis: i64,
    /// Calls before the failure ratio counts.
    pub failure_min_calls: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 20,
            repeat_limit: 3,
            spend_limit_usd: 1.00,
            spend_window_millis: 10 * 60_000,
            check_in_millis: 5 * 60_000,
            failure_min_calls: 4,
        }
    }
}

/// What the runner wants next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Ask the brain for the next step.
    CallLlm,
    /// Run these calls (approved or allowed, recorded as such).
    CallTools(Vec<i64>),
    /// These calls wait for the user.
    RequestApproval(Vec<i64>),
    /// A guardrail: wait for the user to continue or stop.
    Pause { guard: &'static str, why: String },
    /// Done: with the reason when it ended early.
    Finish { early: Option<String> },
}

/// Decides the next move from the state, the calls of the current step
/// (every call so far for the guardrails) and the step count.
pub fn next(state: &State, calls: &[CallRow], step: u32, step_has_calls: bool, limits: &Limits, now_millis: i64) -> Next {
    let current: Vec<&CallRow> = calls.iter().filter(|c| c.step == step).collect();
    // Calls of this step first: the ones allowed run, the others wait.
    let runnable: Vec<i64> = current.iter().filter(|c| c.status == CallStatus::Running && c.started_at_millis.is_none()).map(|c| c.call_id).collect();
    if !runnable.is_empty() {
        return Next::CallTools(runnable);
    }
    let waiting: Vec<i64> = current.iter().filter(|c| c.status == CallStatus::Waiting).map(|c| c.call_id).collect();
    if !waiting.is_empty() {
        return Next::RequestApproval(waiting);
    }
    if step > 0 && !step_has_calls {
        // The model answered without calling anything: that is the answer.
        return Next::Finish { early: None };
    }
    if step >= limits.max_steps {
        return Next::Finish { early: Some(format!("stopped after {} steps, the limit for one task (Settings → Agent)", limits.max_steps)) };
    }
    let waived = |guard: &str| state.waived.iter().any(|w| w == guard);
    // The same call again and again.
    let mut counts: std::collections::HashMap<(String, String), usize> = Default::default();
    for call in calls {
        *counts.entry((call.tool.clone(), crate::tools::schema::canonical(&call.arguments))).or_default() += 1;
    }
    if let Some(((tool, _), n)) = counts.into_iter().find(|(_, n)| *n >= limits.repeat_limit)
        && !waived("stuck")
    {
        return Next::Pause { guard: "stuck", why: format!("I seem to be stuck: I called {tool} with the same arguments {n} times.") };
    }
    let spent: f64 = state.spend.iter().filter(|(at, _)| now_millis - at <= limits.spend_window_millis).map(|(_, usd)| usd).sum();
    if spent > limits.spend_limit_usd {
        // A hard pause: waving it through only lasts until the next window's spend.
        return Next::Pause {
            guard: "spend",
            why: format!("This task spent ${spent:.2} on cloud models in the last {} minutes (the limit is ${:.2}).", limits.spend_window_millis / 60_000, limits.spend_limit_usd),
        };
    }
    let since = state.checked_in_at_millis.unwrap_or(state.started_at_millis);
    if now_millis - since > limits.check_in_millis {
        return Next::Pause { guard: "check_in", why: format!("I have been working on this for {} minutes. Shall I go on?", (now_millis - state.started_at_millis) / 60_000) };
    }
    let ran: Vec<&CallRow> = calls.iter().filter(|c| c.status.settled()).collect();
    let failed = ran.iter().filter(|c| matches!(c.status, CallStatus::Failed | CallStatus::MayHaveRun) || c.is_error).count();
    if ran.len() >= limits.failure_min_calls && failed * 2 > ran.len() {
        return Next::Finish { early: Some(format!("stopped: {failed} of {} tool calls failed", ran.len())) };
    }
    Next::CallLlm
}


/// A text file's lines numbered for the local model ("line 2: Renew passport"),
/// with the count first and the last line named: a half-billion-parameter
/// model asked for "the second item" or "the last one" counts wrong without
/// them. Longer texts are left as they are.
pub fn numbered_lines(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() || lines.len() > 400 {
        return text.to_owned();
    }
    let mut out = format!("{} lines (the last is line {}):", lines.len(), lines.len());
    for (i, line) in lines.iter().enumerate() {
        out.push_str(&format!("\nline {}: {line}", i + 1));
    }
    out
}

/// A step's calls as the assistant turn carries them.
pub fn assistant_turn(text: &str, calls: &[(String, String, Value)]) -> Turn {
    let mut turn = Turn::new(Role::Assistant, text);
    turn.tool_calls = calls.iter().map(|(id, name, args)| ToolCall { id: id.clone(), name: name.clone(), arguments: args.to_string(), signature: None }).collect();
    turn
}

/// The result of a call as the model reads it.
pub fn tool_turn(call_id: &str, content: String) -> Turn {
    let mut turn = Turn::new(Role::Tool, content);
    turn.tool_call_id = Some(call_id.to_owned());
    turn
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Risk;
    use serde_json::json;

    #[test]
    fn offered_mcp_tools_put_their_servers_words_in_every_step_of_any_kind_of_task() {
        // A chat task, an automation's agent step and a delegated helper all carry their tools in the state.
        let mut state = State { tools: vec!["search_memory".into(), "run_command".into()], ..State::default() };
        state.push(Turn::new(Role::System, "prompt"), Origin::Instructions);
        state.push(Turn::new(Role::User, "task"), Origin::User);
        assert!(state.origins().iter().all(|o| o.trusted()));
        state.tools.push("mcp__notes__lookup".into());
        assert!(state.origins().contains(&Origin::McpDefinition), "before any tool has returned anything");
        // Kept across a save and a restart (the tools are part of the saved state).
        let restored: State = serde_json::from_str(&serde_json::to_string(&state).unwrap()).unwrap();
        assert!(restored.origins().contains(&Origin::McpDefinition));
    }

    fn call(id: i64, step: u32, tool: &str, args: Value, status: CallStatus) -> CallRow {
        CallRow {
            call_id: id,
            operation_id: 1,
            step,
            model_call_id: format!("c{id}"),
            tool: tool.into(),
            arguments: args,
            risk: Risk::Safe,
            status,
            why: String::new(),
            decided_by: None,
            output: None,
            is_error: false,
            created_at_millis: 0,
            started_at_millis: None,
            finished_at_millis: None,
            expires_at_millis: None,
            images: Vec::new(),
        }
    }

    #[test]
    fn allowed_calls_run_while_the_others_of_the_step_wait() {
        let state = State::default();
        let calls = vec![call(1, 1, "search_memory", json!({}), CallStatus::Running), call(2, 1, "run_command", json!({}), CallStatus::Waiting)];
        assert_eq!(next(&state, &calls, 1, true, &Limits::default(), 0), Next::CallTools(vec![1]));
        let mut calls = calls;
        calls[0].status = CallStatus::Done;
        assert_eq!(next(&state, &calls, 1, true, &Limits::default(), 0), Next::RequestApproval(vec![2]));
        calls[1].status = CallStatus::Denied;
        assert_eq!(next(&state, &calls, 1, true, &Limits::default(), 0), Next::CallLlm);
        assert_eq!(next(&state, &calls, 2, false, &Limits::default(), 0), Next::Finish { early: None });
    }

    #[test]
    fn guardrails_stuck_spend_check_in_failures_and_the_step_limit() {
        let limits = Limits::default();
        let state = State { started_at_millis: 0, ..State::default() };
        let same: Vec<CallRow> = (1..=3).map(|i| call(i, i as u32, "search_memory", json!({"query": "x", "limit": 2}), CallStatus::Done)).collect();
        assert!(matches!(next(&state, &same, 3, true, &limits, 1000), Next::Pause { guard: "stuck", .. }));
        let waived = State { waived: vec!["stuck".into()], ..state.clone() };
        assert_eq!(next(&waived, &same, 3, true, &limits, 1000), Next::CallLlm);
        let spending = State { spend: vec![(1000, 0.6), (2000, 0.5)], ..state.clone() };
        assert!(matches!(next(&spending, &[], 1, true, &limits, 3000), Next::Pause { guard: "spend", .. }));
        assert_eq!(next(&spending, &[], 1, true, &limits, 1000 + 11 * 60_000), Next::Pause { guard: "check_in", why: "I have been working on this for 11 minutes. Shall I go on?".into() });
        let later = State { checked_in_at_millis: Some(10 * 60_000), ..state.clone() };
        assert_eq!(next(&later, &[], 1, true, &limits, 11 * 60_000), Next::CallLlm);
        let failing: Vec<CallRow> = (1..=4).map(|i| call(i, 1, "read_file", json!({"path": i}), if i == 1 { CallStatus::Done } else { CallStatus::Failed })).collect();
        assert!(matches!(next(&state, &failing, 1, true, &limits, 1000), Next::Finish { early: Some(_) }));
        assert!(matches!(next(&state, &[], 20, true, &limits, 1000), Next::Finish { early: Some(_) }));
    }

    #[test]
    fn a_files_lines_are_numbered_and_counted_for_the_local_model() {
        assert_eq!(numbered_lines("milk\npassport\n"), "2 lines (the last is line 2):\nline 1: milk\nline 2: passport");
        assert_eq!(numbered_lines(""), "");
        let long = "x\n".repeat(401);
        assert_eq!(numbered_lines(&long), long);
    }

    #[test]
    fn the_saved_state_leaves_private_spans_out_and_borrows_when_there_is_none() {
        let mut state = State::default();
        state.push(Turn::new(Role::User, "log in with <private>s3cret</private> and check the build"), Origin::User);
        state.shown = "Logging in with <private>s3cret</private>".into();
        let saved = serde_json::to_string(&state.stored()).unwrap();
        assert!(!saved.contains("s3cret"), "{saved}");
        assert_eq!(state.stored().entries[0].turn.content, "log in with  and check the build");
        assert!(state.entries[0].turn.content.contains("s3cret"), "the live task keeps what the user typed");
        let plain = State::default();
        assert!(matches!(plain.stored(), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn the_local_form_writes_calls_and_results_as_qwen_expects() {
        let turns = vec![
            Turn::new(Role::System, "sys"),
            Turn::new(Role::User, "what was I doing?"),
            assistant_turn("Let me look.", &[("a".into(), "recent_activity".into(), json!({"minutes": 30})), ("b".into(), "current_window".into(), json!({}))]),
            tool_turn("a", "10:00 Editor".into()),
            tool_turn("b", "Editor — notes.md".into()),
        ];
        let messages = crate::agent::local::prompt_messages(&turns);
        assert_eq!(messages.len(), 4);
        assert_eq!(
            messages[2].content,
            "Let me look.\n<tool_call>\n{\"name\": \"recent_activity\", \"arguments\": {\"minutes\":30}}\n</tool_call>\n<tool_call>\n{\"name\": \"current_window\", \"arguments\": {}}\n</tool_call>"
        );
        assert_eq!(messages[3].content, "<tool_response>\n10:00 Editor\n</tool_response>\n<tool_response>\nEditor — notes.md\n</tool_response>");
        // The local parser reads back what was written.
        let parsed = crate::llm::tool_calls::parse(&messages[2].content);
        assert_eq!(parsed.calls.len(), 2);
    }

    #[test]
    fn truncation_keeps_the_first_request_and_never_orphans_a_result() {
        let mut turns = vec![Turn::new(Role::System, "sys"), Turn::new(Role::User, "task")];
        for i in 0..10 {
            turns.push(assistant_turn("", &[(format!("c{i}"), "x".into(), json!({}))]));
            turns.push(tool_turn(&format!("c{i}"), format!("r{i}")));
        }
        let kept = truncate(turns, 0, 3);
        assert_eq!(kept[1].content, "task");
        assert!(kept[2].content.contains("left out"));
        assert_eq!(kept[3].role, Role::Assistant, "the tail starts at a call, not its result");
        assert_eq!(kept.len(), 5);
    }
}
