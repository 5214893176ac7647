//! What the automations worker asks of others and hears back: the agent runs
//! tool and agent steps (only it executes tools, through its approval policy),
//! a notifier shows notifications, a clock tells the time. Traits, so the
//! worker is tested without the agent, D-Bus or real time (`OffsetClock`
//! simulates a suspend).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::Value;

use super::flow::{NotifyTier, Tier};
use crate::tools::Origin;

/// A tool or agent step for the agent to run as an operation.
#[derive(Clone, Debug)]
pub struct StepRequest {
    pub run_id: i64,
    pub seq: u32,
    /// Made by the automations worker and stored with the run before it is sent.
    pub operation_id: i64,
    pub flow: String,
    pub step_id: String,
    pub work: StepWork,
    /// Where the filled-in values came from: anything but the flow's own text
    /// (the user's) makes a sensitive call ask.
    pub origins: Vec<Origin>,
}

#[derive(Clone, Debug)]
pub enum StepWork {
    Tool { tool: String, args: Value },
    Agent { prompt: String, tools: Vec<String>, tier: Tier },
}

/// The agent's word on a step.
#[derive(Clone, Debug)]
pub struct StepReport {
    pub run_id: i64,
    pub seq: u32,
    pub operation_id: i64,
    pub outcome: StepOutcome,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StepOutcome {
    Done { data: Value, decision: String },
    Failed { error: String, decision: String, expired: bool },
    /// A call waits for the user's approval; the run parks until then.
    /// `arguments`: the call's arguments as JSON, shown on the notification.
    Parked { call_id: i64, tool: String, arguments: String, why: String, expires_at_millis: i64 },
}

/// Runs tool and agent steps (the agent worker in the app).
pub trait StepRunner: Send {
    fn start(&self, request: StepRequest) -> Result<(), String>;
    /// The step's operation is no longer wanted (a timeout, a restarted run).
    fn cancel(&self, operation_id: i64);
}

/// A notification a flow sends.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    /// Who sends it: `flow:<name>`, `approval`, `failure` (cooldowns and muting go by source).
    pub source: String,
    pub tier: NotifyTier,
    pub title: String,
    pub body: String,
    pub action: NoticeAction,
    /// Why it appeared, in the user's words ("Why: …"; empty for none).
    pub why: String,
}

/// What the notification's Accept does.
#[derive(Clone, Debug, PartialEq)]
pub enum NoticeAction {
    /// Nothing to accept: Open and Dismiss only.
    None,
    /// Approve a parked call once.
    Approve { call_id: i64 },
    /// Mute a source the user keeps dismissing (cowork asks; it never mutes by itself).
    Mute { source: String },
    /// Use the local model again although heat or the battery paused it.
    RestoreLocal,
    /// Listen to the call that started at `since_millis` (a meeting cowork
    /// noticed; it never listens without this click).
    Listen { since_millis: i64 },
    /// Start a chat with this request (a flow's own words), whose risky calls still ask.
    Task { prompt: String },
}

impl NoticeAction {
    /// The notification's button for it.
    pub fn label(&self) -> &'static str {
        match self {
            NoticeAction::Listen { .. } => "Listen",
            NoticeAction::Task { .. } => "Do it",
            _ => "Accept",
        }
    }
}

pub trait Notifier: Send {
    /// Shows or holds the notice; returns its id.
    fn post(&self, notice: Notice) -> Result<i64, String>;
}

/// The time, as the scheduler sees it.
pub trait Clock: Send + Sync {
    fn now_millis(&self) -> i64;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        crate::ids::now_millis()
    }
}

/// The system clock moved by an offset, for tests that simulate a suspend or
/// a clock jump by moving time forward.
#[derive(Clone, Default)]
pub struct OffsetClock(pub Arc<AtomicI64>);

impl OffsetClock {
    pub fn jump(&self, millis: i64) {
        self.0.fetch_add(millis, Ordering::SeqCst);
    }
}

impl Clock for OffsetClock {
    fn now_millis(&self) -> i64 {
        crate::ids::now_millis() + self.0.load(Ordering::SeqCst)
    }
}
