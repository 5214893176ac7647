//! Tools the agent calls (issue 13). Each family gets its own file with its
//! executors and a pure `classify(args) -> Risk`; `policy` decides, as a pure
//! function, whether a call runs, asks the user or is refused. Only the agent
//! worker executes tools, and never without a recorded decision.
//!
//! So far: the risk and origin vocabulary and the approval policy. The
//! registry, the executors and the agent worker come next (the note on
//! issue 13 says what is left).

pub mod policy;
pub mod schema;

use serde::{Deserialize, Serialize};

/// How much harm a call can do; a tool has a default, and its `classify`
/// raises it by argument (a shell command that deletes, a write under `/etc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Reads what cowork may read anyway (memory, the current window): runs.
    Safe,
    /// Changes something, or can carry data out (a write, a command, a fetch): asks by default.
    Sensitive,
    /// Hard to undo (delete, move, force-push): asks by default.
    Dangerous,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Safe => "safe",
            Risk::Sensitive => "sensitive",
            Risk::Dangerous => "dangerous",
        }
    }
}

/// Where a piece of text in a prompt came from. Only the user's own words and
/// cowork's instructions may lead to a sensitive call without asking: text from
/// anywhere else is data, never instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// What the user typed or said to cowork.
    User,
    /// cowork's own system prompt, examples and tool descriptions.
    Instructions,
    /// Captured window titles, typed text and clipboard.
    Capture,
    /// What a tool returned.
    ToolResult,
    /// A fetched web page.
    Web,
    /// Recalled notes and summaries (they hold captured text too).
    Memory,
}

impl Origin {
    pub fn trusted(self) -> bool {
        matches!(self, Origin::User | Origin::Instructions)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Origin::User => "your message",
            Origin::Instructions => "cowork's instructions",
            Origin::Capture => "captured windows, typing or clipboard",
            Origin::ToolResult => "a tool's output",
            Origin::Web => "a web page",
            Origin::Memory => "recalled notes",
        }
    }
}
