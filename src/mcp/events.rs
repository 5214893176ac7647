//! What the mcp worker tells the UI: the servers and their state, clients of
//! `cowork mcp serve`, tests, progress, elicitations, resources and prompts;
//! with the views those carry.

use crate::records::Attachment;

#[derive(Clone, Debug)]
pub enum McpEvent {
    /// The MCP servers and their state, whenever one changes.
    McpServers(Vec<McpServerView>),
    /// The clients of `cowork mcp serve`; a pending one is asked about.
    McpClients(Vec<McpClientView>),
    /// What Settings' Test found.
    McpTested(McpTestReport),
    /// A server from the integrations catalog: saved with this many tools, or why not (and what it printed).
    McpCatalogAdded { name: String, result: Result<usize, String>, stderr: Vec<String> },
    /// Progress an MCP server reported for a running call (shown on its chip).
    ToolProgress { call_id: i64, text: String },
    /// An MCP server asks the user for input: a form in the chat.
    Elicitation(Box<ElicitationView>),
    /// The request was answered, cancelled or given up.
    ElicitationClosed { id: i64 },
    /// A resource the user chose was read (or why not): it waits in the chat input.
    ResourceAttached(Result<Attachment, String>),
    /// A prompt the user chose, filled in by its server (or why not): it goes into the chat input to edit and send.
    PromptFilled(Result<String, String>),
}

/// An MCP server's state, as Settings → Integrations shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum McpServerStatus {
    Starting,
    Running,
    #[default]
    Stopped,
    Error(String),
    /// An HTTP server that wants an OAuth sign-in (why, as the server put it).
    NeedsSignIn(String),
    /// A sign-in under way in the browser: the authorization URL (empty until known).
    SigningIn(String),
}

impl McpServerStatus {
    pub fn label(&self) -> &str {
        match self {
            McpServerStatus::Starting => "starting",
            McpServerStatus::Running => "running",
            McpServerStatus::Stopped => "stopped",
            McpServerStatus::Error(_) => "error",
            McpServerStatus::NeedsSignIn(_) => "sign-in needed",
            McpServerStatus::SigningIn(_) => "signing in",
        }
    }
}

/// One server for the UI.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct McpServerView {
    pub name: String,
    /// "stdio: npx -y …" or "http: https://…".
    pub endpoint: String,
    pub status: McpServerStatus,
    pub trusted: bool,
    /// (tool, description, enabled, risk) for each listed tool.
    pub tools: Vec<(String, String, bool, String)>,
    pub stderr: Vec<String>,
    pub protocol_version: String,
    pub server_name: String,
    pub connect_millis: Option<u64>,
    /// What the server offers to attach to a message.
    pub resources: Vec<McpResource>,
    /// Its prompts, offered as `/name` in the chat input.
    pub prompts: Vec<McpPrompt>,
    /// An OAuth sign-in is kept for it (Sign out forgets it).
    pub signed_in: bool,
}

/// A resource an MCP server lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McpResource {
    pub uri: String,
    pub name: String,
    pub mime: String,
    pub description: String,
}

/// A prompt an MCP server offers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McpPrompt {
    pub name: String,
    pub description: String,
    /// (name, required), in the server's order.
    pub arguments: Vec<(String, bool)>,
}

/// A client of `cowork mcp serve` (another assistant reading cowork's memory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpClientView {
    pub name: String,
    pub version: String,
    /// "stdio" or "http".
    pub transport: String,
    /// "pending", "allowed" or "denied".
    pub status: String,
    pub asked_at_millis: i64,
    pub last_seen_millis: i64,
}

/// What Test found.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTestReport {
    pub server: String,
    pub result: Result<McpTestFigures, String>,
    pub stderr: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct McpTestFigures {
    pub protocol_version: String,
    pub server_name: String,
    pub tools: usize,
    pub connect_millis: u64,
    pub round_trip_micros: u64,
}

/// An MCP server's request for input, as the chat's form shows it. The
/// message is the server's words (shown as its, never as cowork's).
#[derive(Clone, Debug, PartialEq)]
pub struct ElicitationView {
    pub id: i64,
    pub server: String,
    pub message: String,
    pub form: crate::mcp::elicit::Form,
}
