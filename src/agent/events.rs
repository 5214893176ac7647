//! What the agent worker tells the UI: an answer's tokens and end, its
//! operations and tool calls (issue 13), routing and consent, the memory it
//! used, and drafts; with the value types those carry.

use crate::records::{GenerationStats, MessageStatus};

#[derive(Clone, Debug)]
pub enum AgentEvent {
    /// A tool call was asked for, decided, started or finished.
    ToolCall(Box<ToolCallView>),
    /// An operation's status changed (`paused`: a guardrail waits for the user).
    Operation { operation_id: i64, answer_id: i64, status: OpStatus, steps: u32, paused: Option<String> },
    /// One brain step of an operation finished: what it cost (`cowork ask --agent --json`, the agent evaluation).
    AgentStep { answer_id: i64, step: u32, prompt_tokens: usize, first_token_millis: u64, model_millis: u64 },
    /// The agent's todo list for an answer, whole.
    Todos { answer_id: i64, items: Vec<TodoItem> },
    /// Settings → Agent: the approval rules (id, as a line), rows that could
    /// not be read, and the newest audit entries (as lines).
    AgentOverview { rules: Vec<(i64, String)>, problems: Vec<String>, audit: Vec<String> },
    /// The context attached to the user message that starts an answer.
    ContextAttached { user_message_id: i64, context: String },
    Token { answer_id: i64, text: String },
    /// Reasoning or thinking text a model streamed: shown collapsed under the answer.
    Reasoning { answer_id: i64, text: String },
    /// Who will answer, and why (the router's reason).
    Routed { answer_id: i64, ask_id: i64, answered_by: String, reason: String },
    /// Captured context would go to a cloud provider for the first time: the
    /// user sees exactly what (`preview`) and chooses; nothing was sent yet.
    ConsentNeeded { provider: String, reason: String, preview: String, request: Box<crate::agent::ChatRequest> },
    /// The models a provider offers (Settings' and the first run's pickers).
    ModelsListed { provider: String, result: Result<Vec<crate::brains::catalog::ModelInfo>, String> },
    /// What a cloud answer cost.
    AnswerCost { answer_id: i64, usd: f64 },
    AnswerFinished { answer_id: i64, status: MessageStatus, error: Option<String>, stats: GenerationStats },
    /// The local model's prompt head was prefilled (`agent::warm`): how long
    /// it took and how long the head is, in tokens.
    PromptWarmed { millis: u64, prompt_tokens: usize },
    /// What memory put into the prompt for a question, and what its budgets dropped (the Memory view).
    MemoryInjected {
        user_message_id: i64,
        report: crate::memory::synthesis::Report,
        recalled: Vec<crate::memory::rag::Item>,
        dropped: Vec<crate::memory::rag::Item>,
    },
    /// A change to the pinned facts the user asked for in conversation, shown
    /// on the answer for them to confirm (nothing changes until they do).
    MemoryChangeProposed { answer_id: i64, change: crate::memory::corrections::Change },
    /// The sources an answer may cite as [n].
    Citations { answer_id: i64, citations: Vec<crate::memory::rag::Citation> },
    /// A decision on a call was not taken: it was decided already (by whom), or is gone.
    DecisionRefused { call_id: i64, why: String },
    /// A decision was recorded for a call another cowork process drives; that process runs it.
    DecidedForOwner { call_id: i64, owner_pid: String },
    /// A task changed files that Undo can put back, until `until_millis`.
    Undoable { answer_id: i64, operation_id: i64, until_millis: i64 },
    /// "Make me an app": the drafted manifest (checked), or why none could be drafted.
    AppDrafted(Result<String, String>),
    /// "Describe it": the drafted flow as JSON (valid), or why none could be drafted.
    FlowDrafted(Result<String, String>),
    /// A recap of the day or week starting at `period_start` was kept (how many
    /// lines), or why none was written.
    RecapWritten { period_start: i64, result: Result<usize, String> },
    /// What the agent changed in memory (a fact it pinned), as memory shows it.
    Memory(crate::memory::events::MemoryEvent),
}

impl From<crate::memory::events::MemoryEvent> for AgentEvent {
    fn from(event: crate::memory::events::MemoryEvent) -> Self {
        AgentEvent::Memory(event)
    }
}

// The agent's operations and tool calls (issue 13).

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpStatus {
    Idle,
    Running,
    WaitingForHuman,
    Done,
    Error,
    Cancelled,
}

impl OpStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OpStatus::Idle => "idle",
            OpStatus::Running => "running",
            OpStatus::WaitingForHuman => "waiting_for_human",
            OpStatus::Done => "done",
            OpStatus::Error => "error",
            OpStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Self {
        match text {
            "idle" => OpStatus::Idle,
            "running" => OpStatus::Running,
            "waiting_for_human" => OpStatus::WaitingForHuman,
            "done" => OpStatus::Done,
            "cancelled" => OpStatus::Cancelled,
            _ => OpStatus::Error,
        }
    }

    pub fn is_open(self) -> bool {
        matches!(self, OpStatus::Idle | OpStatus::Running | OpStatus::WaitingForHuman)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// Waits for the user's approval.
    Waiting,
    Running,
    Done,
    Failed,
    Denied,
    /// Nobody answered the approval in time.
    Expired,
    /// It was running when cowork stopped: it may have run, so it is never run again by itself.
    MayHaveRun,
    Cancelled,
}

impl CallStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Waiting => "waiting",
            CallStatus::Running => "running",
            CallStatus::Done => "done",
            CallStatus::Failed => "failed",
            CallStatus::Denied => "denied",
            CallStatus::Expired => "expired",
            CallStatus::MayHaveRun => "may_have_run",
            CallStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Self {
        match text {
            "waiting" => CallStatus::Waiting,
            "running" => CallStatus::Running,
            "done" => CallStatus::Done,
            "denied" => CallStatus::Denied,
            "expired" => CallStatus::Expired,
            "may_have_run" => CallStatus::MayHaveRun,
            "cancelled" => CallStatus::Cancelled,
            _ => CallStatus::Failed,
        }
    }

    /// Whether the call has an outcome the model can be told.
    pub fn settled(self) -> bool {
        !matches!(self, CallStatus::Waiting | CallStatus::Running)
    }
}

/// A tool call as the chat shows it: a chip that expands, or an approval card.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallView {
    pub operation_id: i64,
    pub answer_id: i64,
    pub call_id: i64,
    pub step: u32,
    pub tool: String,
    pub arguments: serde_json::Value,
    /// safe, sensitive or dangerous.
    pub risk: String,
    pub status: CallStatus,
    /// Why the policy (or the user) decided as it did.
    pub why: String,
    pub decided_by: Option<String>,
    /// The result, whole (the model got it trimmed).
    pub output: Option<String>,
    pub is_error: bool,
    pub duration_millis: Option<i64>,
    /// A waiting approval is denied at this time.
    pub expires_at_millis: Option<i64>,
    /// For an approval: the pattern "Always allow" starts from, and what it looks at.
    pub suggested_rule: Option<(String, String)>,
    /// Images the call returned, with their thumbnails (shared, not copied).
    pub images: Vec<std::sync::Arc<crate::media::Attached>>,
}

/// How long an "Always allow" rule from an approval card holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AllowFor {
    /// Only within the operation the card belongs to.
    ThisTask,
    /// For the next 24 hours.
    Day,
    #[default]
    Always,
}

/// The user's answer on an approval card (or to `ask_user`).
#[derive(Clone, Debug, PartialEq)]
pub enum ApprovalChoice {
    Once,
    /// Allow calls like this from now on: `target` (command, path, url or a
    /// JSON pointer) matching `pattern`; no pattern: every call of the tool;
    /// for this task only, for a day, or always.
    Always { target: Option<String>, pattern: Option<String>, scope: AllowFor },
    Deny { reason: String },
    /// Run with these arguments instead.
    Edit { arguments: serde_json::Value },
    /// The answer to an `ask_user` question.
    Answer(String),
}

/// An item of the agent's todo list.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TodoItem {
    pub text: String,
    #[serde(default)]
    pub done: bool,
}
