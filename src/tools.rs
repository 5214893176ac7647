//! Tools the agent calls (issue 13). Each family gets its own file with its
//! executors and a pure `classify(args) -> Risk`; `policy` decides, as a pure
//! function, whether a call runs, asks the user or is refused. Only the agent
//! worker executes tools, and never without a recorded decision.
//!
//! `registry` lists every built-in tool (name, family, schema, risk) and
//! dispatches to the families: memory, files, documents, shell, web, web
//! search, desktop, skills; conversation tools (`ask_user`, `update_todos`) and
//! `delegate` are the agent's own. `command` reads shell command lines as `sh`
//! would, `own_data` decides what is cowork's own data, `guard` is the process
//! every shell command runs under, `schema` checks arguments, `undo` puts back
//! what a task changed.
//!
//! This file holds the vocabulary: `Risk` (safe, sensitive, dangerous) and
//! `Origin` (the user, cowork's instructions, capture, a tool's output, a web
//! page, a document, recalled notes, an MCP server's own words), which every
//! text that enters a prompt carries; an operation's `State::origins` adds
//! `McpDefinition` whenever an MCP tool is offered. `ToolOutput::for_model`
//! trims a long output to its head and tail.
//!
//! Invariants:
//! - A tool resolves its paths before the policy sees them, and no tool reads
//!   or writes under cowork's data directory.
//! - When any text in a step's prompt came from anywhere but the user or
//!   cowork's instructions (an offered MCP tool's definition included), that
//!   step's sensitive and dangerous calls ask, whatever the allow rules say; no
//!   allow rule matches a command that is not one simple command of literal
//!   words.
//! - `command` and `own_data` never guess what cannot be known before a command
//!   runs: an unknown part makes the command ask (blocklist phase), and the
//!   known end of a word is still checked against cowork's data.
//! - No process a shell command starts outlives the command's guard, which also
//!   dies with cowork (`PR_SET_PDEATHSIG` and a subreaper), so a kill -9 never
//!   leaves the rest of a command running unattended.

pub mod command;
pub mod desktop;
pub mod documents;
pub mod files;
pub mod guard;
pub mod memory;
pub mod own_data;
pub mod policy;
pub mod registry;
pub mod schema;
pub mod shell;
pub mod skills;
pub mod undo;
pub mod web;
pub mod web_search;

use serde::{Deserialize, Serialize};

/// How much harm a call can do; a tool has a default, and its `classify`
/// raises it by argument (a shell command that deletes, a write under `/etc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Reads what cowork may read anyway (memory, the current window): runs.
    #[default]
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
    /// A fetched web page, or web search results.
    Web,
    /// A document read by a tool or attached by the user (PDF, office files, e-books).
    Document,
    /// Recalled notes and summaries (they hold captured text too).
    Memory,
    /// An MCP server's own words: its tools' names, descriptions and schemas,
    /// its prompts and resources. Offered to the model, they are in the prompt
    /// from the first step on.
    McpDefinition,
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
            Origin::Document => "a document",
            Origin::Memory => "cowork's memory (recalled notes, summaries, notes a model pinned)",
            Origin::McpDefinition => "an MCP server's tool descriptions",
        }
    }
}

/// (In `records`, below everything that shows or stores text: the day's
/// recap and meeting notes use it too.)
pub use crate::records::visible;

/// What a tool returned: kept whole (the chat shows it, the audit log hashes
/// it) and trimmed for the model, whose context is small.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// Images the tool returned (an MCP server's): the chat shows them, the
    /// model reads their names in `content`.
    pub images: Vec<crate::media::Image>,
    /// What the call changed that `cowork undo` and the chat's Undo can put back.
    pub undo: Vec<undo::UndoStep>,
    /// What in cowork's memory the result came from (a memory tool's): the
    /// answer's citation chips, numbered when the task takes them.
    pub sources: Vec<crate::memory::rag::Citation>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput { content: content.into(), is_error: false, images: Vec::new(), undo: Vec::new(), sources: Vec::new() }
    }

    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput { content: content.into(), is_error: true, images: Vec::new(), undo: Vec::new(), sources: Vec::new() }
    }

    /// At most `limit` characters for the model: the head and the tail, with
    /// a line between them that says how much was cut.
    pub fn for_model(&self, limit: usize) -> String {
        let total = self.content.chars().count();
        if total <= limit {
            return self.content.clone();
        }
        let (head, tail) = (limit * 2 / 3, limit / 3);
        let start: String = self.content.chars().take(head).collect();
        let end: String = self.content.chars().skip(total - tail).collect();
        format!("{start}\n[… {} characters cut here; the whole result is kept and the user can open it …]\n{end}", total - head - tail)
    }
}
