//! What the agent keeps in cowork.db: operations (with their conversation so
//! far), the calls of each step, the user's approval rules and the append-only
//! audit log (migration 8); the images a tool returned, allowed MCP tool
//! definitions, the clients of `cowork mcp serve` and the steps Undo can put
//! back. Plain functions over a `Connection`: in the sidebar the store worker
//! applies `AgentWrite`s (`command` makes one a job on the writer, with a reply
//! the agent waits for), the agent worker and the CLI read with their own
//! connections.
//!
//! Operations have an owner (`this_process()`: pid and start time; migration
//! 16). A process drives only the operations it owns; `resume_operations` takes
//! over one whose owner is gone with a compare-and-swap on the owner
//! (`AgentWrite::AdoptOperation`) and leaves a live owner's alone. Deciding a
//! call is `AgentWrite::DecideCall`, a compare-and-swap on `status = 'waiting'`
//! (refused with who decided); starting one is `AgentWrite::StartCall`, a
//! compare-and-swap on an empty start time. A process that is not the owner
//! (`cowork approve` beside the sidebar) decides through the database only; the
//! owner looks for such decisions twice a second while one of its calls waits
//! and runs what was approved. `cowork approve` waiting on an owner that dies
//! takes the task over (`AgentCommand::Resume`).

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::tools::Risk;
use crate::tools::policy::{Action, Pattern, Rule, Scope, Target};

pub use crate::agent::events::{CallStatus, OpStatus};

#[derive(Clone, Debug, PartialEq)]
pub struct OperationRow {
    pub operation_id: i64,
    pub thread_id: Option<i64>,
    pub answer_id: Option<i64>,
    pub task: String,
    pub status: OpStatus,
    pub steps: u32,
    pub cost_usd: f64,
    /// "local", or the provider's name.
    pub brain: String,
    /// The conversation so far (`agent::operation::State` as JSON).
    pub state: String,
    pub error: Option<String>,
    pub created_at_millis: i64,
    pub updated_at_millis: i64,
    /// The process driving it (`this_process()`); None: nobody.
    pub owner: Option<String>,
}

/// This process as an operation's owner: its pid and start time (so a pid
/// the system reuses later is not mistaken for it).
pub fn this_process() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| {
        let pid = std::process::id();
        format!("{pid}:{}", process_start(pid).unwrap_or_default())
    })
}

/// A process's start time in clock ticks since boot (`/proc/PID/stat`, field 22).
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields count from its closing one.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the owner an operation names is this process or another one still running.
pub fn owner_alive(owner: &str) -> bool {
    if owner == this_process() {
        return true;
    }
    let Some((pid, start)) = owner.split_once(':') else { return false };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { return false };
    process_start(pid) == Some(start)
}

/// The pid an owner token names (for messages).
pub fn owner_pid(owner: &str) -> &str {
    owner.split(':').next().unwrap_or(owner)
}

impl OperationRow {
    /// A new operation, running from `now`, with no steps yet.
    pub fn running(operation_id: i64, thread_id: Option<i64>, answer_id: Option<i64>, task: String, brain: String, now: i64) -> Self {
        OperationRow {
            operation_id,
            thread_id,
            answer_id,
            task,
            status: OpStatus::Running,
            steps: 0,
            cost_usd: 0.0,
            brain,
            state: String::new(),
            error: None,
            created_at_millis: now,
            updated_at_millis: now,
            owner: Some(this_process().to_owned()),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct CallRow {
    pub call_id: i64,
    pub operation_id: i64,
    pub step: u32,
    /// The id the model gave the call (cloud formats), or one cowork made up.
    pub model_call_id: String,
    pub tool: String,
    pub arguments: Value,
    pub risk: Risk,
    pub status: CallStatus,
    /// The policy's reason, or the user's.
    pub why: String,
    /// "rule 12", "user", "policy: blocklist", …
    pub decided_by: Option<String>,
    pub output: Option<String>,
    pub is_error: bool,
    pub created_at_millis: i64,
    pub started_at_millis: Option<i64>,
    pub finished_at_millis: Option<i64>,
    /// A waiting approval is denied at this time.
    pub expires_at_millis: Option<i64>,
    /// Images the call returned, decoded once for the chat (written with the call, never changed).
    pub images: Vec<std::sync::Arc<crate::media::Attached>>,
}

impl CallRow {
    /// The chat's view of the call, on the answer `answer_id`.
    pub fn view(&self, answer_id: i64, now_millis: i64, suggested_rule: Option<(String, String)>) -> crate::agent::events::ToolCallView {
        crate::agent::events::ToolCallView {
            operation_id: self.operation_id,
            answer_id,
            call_id: self.call_id,
            step: self.step,
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
            risk: self.risk.as_str().to_owned(),
            status: self.status,
            why: self.why.clone(),
            decided_by: self.decided_by.clone(),
            output: self.output.clone(),
            is_error: self.is_error,
            duration_millis: self.started_at_millis.map(|s| self.finished_at_millis.unwrap_or(now_millis) - s),
            expires_at_millis: self.expires_at_millis,
            suggested_rule,
            images: self.images.clone(),
        }
    }
}

/// The tool calls of a chat's operations, oldest first, as the chat shows them:
/// an answer's chips come back with the thread after a restart.
pub fn thread_calls(conn: &Connection, thread_id: i64, now_millis: i64) -> rusqlite::Result<Vec<crate::agent::events::ToolCallView>> {
    let mut stmt = conn.prepare_cached("SELECT operation_id, answer_id FROM operations WHERE thread_id = ?1 AND answer_id IS NOT NULL ORDER BY created_at_ms")?;
    let operations: Vec<(i64, i64)> = stmt.query_map([thread_id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
    let mut views = Vec::new();
    for (operation_id, answer_id) in operations {
        views.extend(calls(conn, operation_id)?.iter().map(|c| c.view(answer_id, now_millis, None)));
    }
    Ok(views)
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditEntry {
    pub audit_id: i64,
    pub at_millis: i64,
    pub operation_id: Option<i64>,
    pub call_id: Option<i64>,
    pub tool: String,
    /// Redacted (`redact_arguments`).
    pub arguments: Value,
    pub risk: Risk,
    /// allow, ask, deny, approved, denied, expired, …
    pub decision: String,
    pub decided_by: String,
    pub why: String,
    pub duration_millis: Option<i64>,
    pub result_bytes: Option<i64>,
    pub result_sha256: Option<String>,
    pub error: Option<String>,
}

impl AuditEntry {
    /// An entry for a call, its arguments redacted; `result` (when it ran) is kept as size and hash.
    pub fn for_call(call: &CallRow, decision: &str, decided_by: &str, result: Option<(&str, bool)>, now_millis: i64) -> Self {
        let duration = call.started_at_millis.map(|started| call.finished_at_millis.unwrap_or(now_millis) - started);
        AuditEntry {
            audit_id: crate::ids::next_id(),
            at_millis: now_millis,
            operation_id: Some(call.operation_id),
            call_id: Some(call.call_id),
            tool: call.tool.clone(),
            arguments: redact_arguments(&call.arguments),
            risk: call.risk,
            decision: decision.to_owned(),
            decided_by: decided_by.to_owned(),
            why: call.why.clone(),
            duration_millis: duration,
            ..AuditEntry::outcome(result)
        }
    }

    /// An entry for what `cowork mcp serve` answered (or refused) a client:
    /// no operation or call of the agent's.
    pub fn for_served(tool: &str, arguments: &Value, decision: &str, client: &str, why: &str, result: Option<(&str, bool)>, now_millis: i64) -> Self {
        AuditEntry {
            audit_id: crate::ids::next_id(),
            at_millis: now_millis,
            tool: tool.to_owned(),
            arguments: redact_arguments(arguments),
            risk: Risk::Safe,
            decision: decision.to_owned(),
            decided_by: client.to_owned(),
            why: why.to_owned(),
            ..AuditEntry::outcome(result)
        }
    }

    /// The result's size and hash, and its start when it is an error; the rest empty.
    fn outcome(result: Option<(&str, bool)>) -> Self {
        AuditEntry {
            audit_id: 0,
            at_millis: 0,
            operation_id: None,
            call_id: None,
            tool: String::new(),
            arguments: Value::Null,
            risk: Risk::Safe,
            decision: String::new(),
            decided_by: String::new(),
            why: String::new(),
            duration_millis: None,
            result_bytes: result.map(|(text, _)| text.len() as i64),
            result_sha256: result.map(|(text, _)| hex::encode(Sha256::digest(text.as_bytes()))),
            error: result.filter(|(_, is_error)| *is_error).map(|(text, _)| text.chars().take(300).collect()),
        }
    }
}

/// A rule as stored, with its validated pattern.
pub fn rule_from_row(id: i64, tool: String, action: &str, target: Option<String>, pattern: Option<String>, scope: &str, scope_value: Option<i64>) -> Result<Rule, String> {
    let action = match action {
        "allow" => Action::Allow,
        "ask" => Action::Ask,
        "deny" => Action::Deny,
        other => return Err(format!("unknown action {other:?}")),
    };
    let scope = match (scope, scope_value) {
        ("operation", Some(id)) => Scope::Operation(id),
        ("until", Some(at)) => Scope::Until(at),
        ("always", _) => Scope::Always,
        (other, _) => return Err(format!("unknown scope {other:?}")),
    };
    let pattern = match (target, pattern) {
        (Some(target), Some(source)) => Some(Pattern::new(parse_target(&target)?, &source)?),
        _ => None,
    };
    Ok(Rule { id, tool, action, pattern, scope })
}

pub fn parse_target(text: &str) -> Result<Target, String> {
    Ok(match text {
        "command" => Target::Command,
        "path" => Target::Path,
        "url" => Target::Url,
        pointer if pointer.starts_with('/') => Target::Pointer(pointer.to_owned()),
        other => return Err(format!("a pattern looks at command, path, url or a JSON pointer like /query, not {other:?}")),
    })
}

pub fn target_text(target: &Target) -> String {
    match target {
        Target::Command => "command".into(),
        Target::Path => "path".into(),
        Target::Url => "url".into(),
        Target::Pointer(pointer) => pointer.clone(),
    }
}

fn action_text(action: Action) -> &'static str {
    match action {
        Action::Allow => "allow",
        Action::Ask => "ask",
        Action::Deny => "deny",
    }
}

/// A write the database refused: a compare-and-swap that found another
/// process's decision, or the SQL error.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
}

/// One write, applied by the store worker.
#[derive(Clone, Debug)]
pub enum AgentWrite {
    /// Written only while this process owns it (or nobody does).
    Operation(OperationRow),
    Call(CallRow),
    /// A decision on a waiting call, as one compare-and-swap: refused when the
    /// call no longer waits ("already decided by …"). `to` is `Running`
    /// (approved, to be started by the operation's owner), `Denied` or `Done`
    /// (an answer); `arguments` replaces them when the user edited the call.
    DecideCall { call_id: i64, to: CallStatus, by: String, output: Option<String>, arguments: Option<(Value, Risk)>, at_millis: i64 },
    /// A call starts: refused when it was started already (it runs once).
    StartCall { call_id: i64, at_millis: i64 },
    /// This process takes over an operation whose owner is gone (`previous`).
    AdoptOperation { operation_id: i64, owner: String, previous: Option<String> },
    Audit(AuditEntry),
    AddRule(Rule),
    RemoveRule(i64),
    /// An MCP tool's definition as the user allowed it (replaces an older one).
    AllowedMcpTool(crate::mcp::tools::McpTool, i64),
    /// An MCP client of `cowork mcp serve` asked (a new name becomes
    /// pending; a known one only has its last visit updated).
    McpClientSeen { name: String, version: String, transport: String, at_millis: i64 },
    /// The user's answer for an MCP client (or `--allow NAME`).
    McpClientDecided { name: String, allowed: bool, by: String, at_millis: i64 },
    /// What a call changed on disk that can be put back.
    Undo { operation_id: i64, call_id: i64, steps: Vec<crate::tools::undo::UndoStep>, at_millis: i64 },
    /// Steps put back (or that failed to be), by id.
    Undone { results: Vec<(i64, Option<String>)>, at_millis: i64 },
}

/// Whether an MCP client may read cowork's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientStatus {
    Pending,
    Allowed,
    Denied,
}

impl ClientStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientStatus::Pending => "pending",
            ClientStatus::Allowed => "allowed",
            ClientStatus::Denied => "denied",
        }
    }

    fn parse(text: &str) -> ClientStatus {
        match text {
            "allowed" => ClientStatus::Allowed,
            "denied" => ClientStatus::Denied,
            _ => ClientStatus::Pending,
        }
    }
}

/// A client of `cowork mcp serve` as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpClientRow {
    pub name: String,
    pub status: ClientStatus,
    pub version: String,
    pub transport: String,
    pub asked_at_millis: i64,
    pub last_seen_millis: i64,
}

/// Every client that asked, newest first.
pub fn mcp_clients(conn: &Connection) -> rusqlite::Result<Vec<McpClientRow>> {
    let mut stmt = conn.prepare_cached("SELECT name, status, version, transport, asked_at_ms, last_seen_ms FROM mcp_clients ORDER BY asked_at_ms DESC, name")?;
    let rows = stmt.query_map([], |r| {
        Ok(McpClientRow {
            name: r.get(0)?,
            status: ClientStatus::parse(&r.get::<_, String>(1)?),
            version: r.get(2)?,
            transport: r.get(3)?,
            asked_at_millis: r.get(4)?,
            last_seen_millis: r.get(5)?,
        })
    })?;
    rows.collect()
}

/// One client's status (None: it never asked).
pub fn mcp_client_status(conn: &Connection, name: &str) -> rusqlite::Result<Option<ClientStatus>> {
    let status: Option<String> = conn.query_row("SELECT status FROM mcp_clients WHERE name = ?1", [name], |r| r.get(0)).optional()?;
    Ok(status.as_deref().map(ClientStatus::parse))
}

/// Who decided a call, as the refusal names them.
fn decided_text(conn: &Connection, call_id: i64) -> String {
    let row: Option<(String, Option<String>)> = conn.query_row("SELECT status, decided_by FROM operation_calls WHERE call_id = ?1", [call_id], |r| Ok((r.get(0)?, r.get(1)?))).optional().ok().flatten();
    match row {
        None => format!("there is no call {call_id}"),
        Some((status, by)) => format!("call {call_id} was already decided by {} (it is {status})", by.unwrap_or_else(|| "cowork".into())),
    }
}

/// Applies one write; a compare-and-swap that finds another decision or owner is refused.
pub fn apply(conn: &Connection, write: &AgentWrite) -> Result<(), WriteError> {
    match write {
        AgentWrite::DecideCall { call_id, to, by, output, arguments, at_millis } => {
            let (new_arguments, new_risk) = match arguments {
                Some((args, risk)) => (Some(args.to_string()), Some(risk.as_str())),
                None => (None, None),
            };
            let settled = to.settled();
            let changed = conn.execute(
                "UPDATE operation_calls SET status = ?2, decided_by = ?3, output = COALESCE(?4, output), is_error = ?5,
                     arguments = COALESCE(?6, arguments), risk = COALESCE(?7, risk), started_at_ms = NULL, expires_at_ms = NULL,
                     finished_at_ms = CASE WHEN ?8 THEN ?9 ELSE NULL END
                 WHERE call_id = ?1 AND status = 'waiting'",
                params![call_id, to.as_str(), by, output, *to == CallStatus::Denied, new_arguments, new_risk, settled, at_millis],
            )?;
            if changed == 0 {
                return Err(WriteError::Refused(decided_text(conn, *call_id)));
            }
        }
        AgentWrite::StartCall { call_id, at_millis } => {
            let changed = conn.execute(
                "UPDATE operation_calls SET started_at_ms = ?2 WHERE call_id = ?1 AND status = 'running' AND started_at_ms IS NULL",
                params![call_id, at_millis],
            )?;
            if changed == 0 {
                return Err(WriteError::Refused(format!("call {call_id} was started already, or is no longer approved: it is not run again")));
            }
        }
        AgentWrite::AdoptOperation { operation_id, owner, previous } => {
            let changed = conn.execute(
                "UPDATE operations SET owner = ?2 WHERE operation_id = ?1 AND owner IS ?3",
                params![operation_id, owner, previous],
            )?;
            if changed == 0 {
                return Err(WriteError::Refused(format!("another process took over operation {operation_id}")));
            }
        }
        AgentWrite::Operation(op) => write_operation(conn, op)?,
        AgentWrite::Call(call) => write_call(conn, call)?,
        AgentWrite::Audit(entry) => write_audit(conn, entry)?,
        AgentWrite::AddRule(rule) => write_rule(conn, rule)?,
        AgentWrite::RemoveRule(id) => {
            conn.execute("DELETE FROM tool_rules WHERE rule_id = ?1", [id])?;
        }
        AgentWrite::AllowedMcpTool(tool, at_millis) => {
            let definition = serde_json::to_string(tool).unwrap_or_default();
            conn.execute(
                "INSERT INTO mcp_allowed_tools (tool, fingerprint, definition, allowed_at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (tool) DO UPDATE SET fingerprint = excluded.fingerprint, definition = excluded.definition, allowed_at_ms = excluded.allowed_at_ms",
                params![tool.qualified_name(), tool.fingerprint(), definition, at_millis],
            )?;
        }
        AgentWrite::McpClientSeen { name, version, transport, at_millis } => {
            conn.execute(
                "INSERT INTO mcp_clients (name, status, version, transport, asked_at_ms, last_seen_ms) VALUES (?1, 'pending', ?2, ?3, ?4, ?4)
                 ON CONFLICT (name) DO UPDATE SET version = excluded.version, transport = excluded.transport, last_seen_ms = excluded.last_seen_ms",
                params![name, version, transport, at_millis],
            )?;
        }
        AgentWrite::Undo { operation_id, call_id, steps, at_millis } => {
            for step in steps {
                conn.execute(
                    "INSERT INTO undo_steps (operation_id, call_id, at_ms, step) VALUES (?1, ?2, ?3, ?4)",
                    params![operation_id, call_id, at_millis, serde_json::to_string(step).unwrap_or_default()],
                )?;
            }
        }
        AgentWrite::Undone { results, at_millis } => {
            for (step_id, error) in results {
                conn.execute("UPDATE undo_steps SET undone_at_ms = ?2, error = ?3 WHERE step_id = ?1", params![step_id, at_millis, error])?;
            }
        }
        AgentWrite::McpClientDecided { name, allowed, by, at_millis } => {
            let status = if *allowed { ClientStatus::Allowed } else { ClientStatus::Denied };
            conn.execute(
                "INSERT INTO mcp_clients (name, status, asked_at_ms, decided_at_ms, decided_by, last_seen_ms) VALUES (?1, ?2, ?3, ?3, ?4, ?3)
                 ON CONFLICT (name) DO UPDATE SET status = excluded.status, decided_at_ms = excluded.decided_at_ms, decided_by = excluded.decided_by",
                params![name, status.as_str(), at_millis, by],
            )?;
        }
    }
    Ok(())
}

/// Inserts or updates an operation while this process owns it (or nobody does); refused otherwise.
fn write_operation(conn: &Connection, op: &OperationRow) -> Result<(), WriteError> {
    let changed = conn.execute(
        "INSERT INTO operations (operation_id, thread_id, answer_id, task, status, steps, cost_usd, brain, state, error, created_at_ms, updated_at_ms, owner)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
         ON CONFLICT (operation_id) DO UPDATE SET status = excluded.status, steps = excluded.steps, cost_usd = excluded.cost_usd,
             brain = excluded.brain, state = excluded.state, error = excluded.error, updated_at_ms = excluded.updated_at_ms
         WHERE operations.owner IS NULL OR operations.owner IS excluded.owner",
        params![
            op.operation_id,
            op.thread_id,
            op.answer_id,
            crate::records::redact_private(&op.task),
            op.status.as_str(),
            op.steps,
            op.cost_usd,
            op.brain,
            op.state,
            op.error,
            op.created_at_millis,
            op.updated_at_millis,
            op.owner
        ],
    )?;
    if changed == 0 {
        return Err(WriteError::Refused(format!("operation {} is driven by another process; this one's copy was not saved", op.operation_id)));
    }
    Ok(())
}

/// Inserts or updates a call, and its images once.
fn write_call(conn: &Connection, call: &CallRow) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO operation_calls (call_id, operation_id, step, model_call_id, tool, arguments, risk, status, why, decided_by, output, is_error,
             created_at_ms, started_at_ms, finished_at_ms, expires_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
         ON CONFLICT (call_id) DO UPDATE SET arguments = excluded.arguments, risk = excluded.risk, status = excluded.status, why = excluded.why,
             decided_by = excluded.decided_by, output = excluded.output, is_error = excluded.is_error,
             started_at_ms = excluded.started_at_ms, finished_at_ms = excluded.finished_at_ms, expires_at_ms = excluded.expires_at_ms",
        params![
            call.call_id,
            call.operation_id,
            call.step,
            call.model_call_id,
            call.tool,
            call.arguments.to_string(),
            call.risk.as_str(),
            call.status.as_str(),
            call.why,
            call.decided_by,
            call.output,
            call.is_error,
            call.created_at_millis,
            call.started_at_millis,
            call.finished_at_millis,
            call.expires_at_millis
        ],
    )?;
    // Written once: a call's images never change after it settled.
    for (seq, attached) in call.images.iter().enumerate() {
        conn.execute(
            "INSERT OR IGNORE INTO operation_call_images (call_id, seq, mime, data) VALUES (?1, ?2, ?3, ?4)",
            params![call.call_id, seq as i64, attached.image.mime, attached.image.data],
        )?;
    }
    Ok(())
}

/// Appends an entry to the audit log.
fn write_audit(conn: &Connection, entry: &AuditEntry) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO audit_log (audit_id, at_ms, operation_id, call_id, tool, arguments, risk, decision, decided_by, why, duration_ms, result_bytes, result_sha256, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        params![
            entry.audit_id,
            entry.at_millis,
            entry.operation_id,
            entry.call_id,
            entry.tool,
            entry.arguments.to_string(),
            entry.risk.as_str(),
            entry.decision,
            entry.decided_by,
            entry.why,
            entry.duration_millis,
            entry.result_bytes,
            entry.result_sha256,
            entry.error
        ],
    )?;
    Ok(())
}

/// Records an approval rule with its scope.
fn write_rule(conn: &Connection, rule: &Rule) -> rusqlite::Result<()> {
    let (scope, value) = match rule.scope {
        Scope::Operation(id) => ("operation", Some(id)),
        Scope::Until(at) => ("until", Some(at)),
        Scope::Always => ("always", None),
    };
    conn.execute(
        "INSERT INTO tool_rules (rule_id, tool, action, target, pattern, scope, scope_value, created_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            rule.id,
            rule.tool,
            action_text(rule.action),
            rule.pattern.as_ref().map(|p| target_text(&p.target)),
            rule.pattern.as_ref().map(|p| p.source.clone()),
            scope,
            value,
            crate::ids::now_millis()
        ],
    )?;
    Ok(())
}

/// An operation's steps not yet undone: (step id, step), oldest first.
pub type UndoSteps = Vec<(i64, crate::tools::undo::UndoStep)>;

/// What Undo did to an operation: its id, the steps put back, those that could not be.
pub type UndoOutcome = (i64, Vec<String>, Vec<String>);

/// The latest operation with steps not yet undone: its id, when its last step
/// was recorded, and its steps.
pub fn last_undoable(conn: &Connection, operation_id: Option<i64>) -> rusqlite::Result<Option<(i64, i64, UndoSteps)>> {
    let operation: Option<(i64, i64)> = conn
        .query_row(
            "SELECT operation_id, max(at_ms) FROM undo_steps WHERE undone_at_ms IS NULL AND (?1 IS NULL OR operation_id = ?1)
             GROUP BY operation_id ORDER BY max(at_ms) DESC, operation_id DESC LIMIT 1",
            params![operation_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((operation_id, at)) = operation else { return Ok(None) };
    let mut stmt = conn.prepare("SELECT step_id, step FROM undo_steps WHERE operation_id = ?1 AND undone_at_ms IS NULL ORDER BY step_id")?;
    let steps = stmt
        .query_map(params![operation_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
        .filter_map(|row| row.ok().and_then(|(id, json)| serde_json::from_str(&json).ok().map(|step| (id, step))))
        .collect();
    Ok(Some((operation_id, at, steps)))
}

/// Undo from the sidebar, run on the store's writer: puts the operation's
/// steps back and says the outcome in one sentence to `say`.
pub fn undo_command(operation_id: i64, data_dir: std::path::PathBuf, say: impl FnOnce(String) + Send + Sync + 'static) -> crate::store::StoreCommand {
    crate::store::StoreCommand::run(format!("undo operation {operation_id}"), move |writer| {
        say(match undo_operation(writer.conn(), Some(operation_id), &data_dir, crate::ids::now_millis()) {
            Ok(Some((_, done, failed))) if failed.is_empty() => format!("Undone: {}", done.join("; ")),
            Ok(Some((_, done, failed))) => format!("Undone: {}. Not undone: {}", if done.is_empty() { "nothing".to_owned() } else { done.join("; ") }, failed.join("; ")),
            Ok(None) => "Nothing left to undo for that task".to_owned(),
            Err(err) => format!("Undo failed: {err}"),
        });
    })
}

/// Puts an operation's steps back (newest first) and records the outcome:
/// what was done and what could not be.
/// `data_dir` is cowork's data directory: Undo never writes into it.
pub fn undo_operation(conn: &Connection, operation_id: Option<i64>, data_dir: &std::path::Path, now_millis: i64) -> rusqlite::Result<Option<UndoOutcome>> {
    let Some((operation_id, _, steps)) = last_undoable(conn, operation_id)? else { return Ok(None) };
    let data_dir = data_dir.canonicalize().unwrap_or_else(|_| data_dir.to_path_buf());
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from).unwrap_or_default();
    let own = crate::tools::own_data::OwnData { data_dir: &data_dir, home: &home };
    let (mut done, mut failed, mut results) = (Vec::new(), Vec::new(), Vec::new());
    for (id, step) in steps.iter().rev() {
        match crate::tools::undo::undo(step, &own) {
            Ok(text) => {
                done.push(text);
                results.push((*id, None));
            }
            Err(err) => {
                failed.push(err.clone());
                results.push((*id, Some(err)));
            }
        }
    }
    apply(conn, &AgentWrite::Undone { results, at_millis: now_millis }).map_err(|e| match e {
        WriteError::Sql(e) => e,
        other => rusqlite::Error::ToSqlConversionFailure(other.to_string().into()),
    })?;
    Ok(Some((operation_id, done, failed)))
}

/// The definition of MCP tool `qualified` as the user allowed it, if ever.
pub fn allowed_mcp_tool(conn: &Connection, qualified: &str) -> rusqlite::Result<Option<crate::mcp::tools::McpTool>> {
    let definition: Option<String> = conn
        .query_row("SELECT definition FROM mcp_allowed_tools WHERE tool = ?1", [qualified], |row| row.get(0))
        .optional()?;
    Ok(definition.and_then(|d| serde_json::from_str(&d).ok()))
}

/// The user's rules. A rule that no longer parses is skipped and named in the second list.
pub fn rules(conn: &Connection) -> rusqlite::Result<(Vec<Rule>, Vec<String>)> {
    let mut stmt = conn.prepare_cached("SELECT rule_id, tool, action, target, pattern, scope, scope_value FROM tool_rules ORDER BY rule_id")?;
    let rows = stmt.query_map([], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get(3)?, r.get(4)?, r.get::<_, String>(5)?, r.get(6)?))
    })?;
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for row in rows {
        let (id, tool, action, target, pattern, scope, value) = row?;
        match rule_from_row(id, tool, &action, target, pattern, &scope, value) {
            Ok(rule) => good.push(rule),
            Err(err) => bad.push(format!("rule {id}: {err}")),
        }
    }
    Ok((good, bad))
}

fn operation_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<OperationRow> {
    Ok(OperationRow {
        operation_id: r.get(0)?,
        thread_id: r.get(1)?,
        answer_id: r.get(2)?,
        task: r.get(3)?,
        status: OpStatus::parse(&r.get::<_, String>(4)?),
        steps: r.get(5)?,
        cost_usd: r.get(6)?,
        brain: r.get(7)?,
        state: r.get(8)?,
        error: r.get(9)?,
        created_at_millis: r.get(10)?,
        updated_at_millis: r.get(11)?,
        owner: r.get(12)?,
    })
}

const OPERATION_COLUMNS: &str = "operation_id, thread_id, answer_id, task, status, steps, cost_usd, brain, state, error, created_at_ms, updated_at_ms, owner";

/// One call by its id.
pub fn call(conn: &Connection, call_id: i64) -> rusqlite::Result<Option<CallRow>> {
    let operation: Option<i64> = conn.query_row("SELECT operation_id FROM operation_calls WHERE call_id = ?1", [call_id], |r| r.get(0)).optional()?;
    let Some(operation) = operation else { return Ok(None) };
    Ok(calls(conn, operation)?.into_iter().find(|c| c.call_id == call_id))
}

/// The status and deciders of some calls, for an owner watching its waiting ones.
pub fn call_states(conn: &Connection, call_ids: &[i64]) -> rusqlite::Result<Vec<(i64, CallStatus)>> {
    let mut stmt = conn.prepare_cached("SELECT status FROM operation_calls WHERE call_id = ?1")?;
    let mut out = Vec::new();
    for id in call_ids {
        if let Some(status) = stmt.query_row([id], |r| r.get::<_, String>(0)).optional()? {
            out.push((*id, CallStatus::parse(&status)));
        }
    }
    Ok(out)
}

pub fn operation(conn: &Connection, operation_id: i64) -> rusqlite::Result<Option<OperationRow>> {
    conn.query_row(&format!("SELECT {OPERATION_COLUMNS} FROM operations WHERE operation_id = ?1"), [operation_id], operation_from_row).optional()
}

/// Operations that were running or waiting when cowork last stopped.
pub fn open_operations(conn: &Connection) -> rusqlite::Result<Vec<OperationRow>> {
    let mut stmt = conn.prepare(&format!("SELECT {OPERATION_COLUMNS} FROM operations WHERE status IN ('idle', 'running', 'waiting_for_human') ORDER BY created_at_ms"))?;
    stmt.query_map([], operation_from_row)?.collect()
}

pub fn recent_operations(conn: &Connection, limit: usize) -> rusqlite::Result<Vec<OperationRow>> {
    let mut stmt = conn.prepare(&format!("SELECT {OPERATION_COLUMNS} FROM operations ORDER BY created_at_ms DESC LIMIT ?1"))?;
    stmt.query_map([limit as i64], operation_from_row)?.collect()
}

pub fn calls(conn: &Connection, operation_id: i64) -> rusqlite::Result<Vec<CallRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT call_id, operation_id, step, model_call_id, tool, arguments, risk, status, why, decided_by, output, is_error,
                created_at_ms, started_at_ms, finished_at_ms, expires_at_ms
         FROM operation_calls WHERE operation_id = ?1 ORDER BY step, call_id",
    )?;
    stmt.query_map([operation_id], |r| {
        let arguments: String = r.get(5)?;
        let risk: String = r.get(6)?;
        Ok(CallRow {
            call_id: r.get(0)?,
            operation_id: r.get(1)?,
            step: r.get(2)?,
            model_call_id: r.get(3)?,
            tool: r.get(4)?,
            arguments: serde_json::from_str(&arguments).unwrap_or(Value::Null),
            risk: parse_risk(&risk),
            status: CallStatus::parse(&r.get::<_, String>(7)?),
            why: r.get(8)?,
            decided_by: r.get(9)?,
            output: r.get(10)?,
            is_error: r.get(11)?,
            created_at_millis: r.get(12)?,
            started_at_millis: r.get(13)?,
            finished_at_millis: r.get(14)?,
            expires_at_millis: r.get(15)?,
            images: Vec::new(),
        })
    })?
    .collect::<rusqlite::Result<Vec<CallRow>>>()
    .and_then(|mut rows| {
        for row in &mut rows {
            row.images = call_images(conn, row.call_id)?;
        }
        Ok(rows)
    })
}

/// A call's images, decoded into thumbnails.
fn call_images(conn: &Connection, call_id: i64) -> rusqlite::Result<Vec<std::sync::Arc<crate::media::Attached>>> {
    let mut stmt = conn.prepare_cached("SELECT mime, data FROM operation_call_images WHERE call_id = ?1 ORDER BY seq")?;
    stmt.query_map([call_id], |r| Ok(crate::media::Image { mime: r.get(0)?, data: r.get(1)? }))?.map(|image| image.map(crate::media::Attached::new)).collect()
}

pub fn parse_risk(text: &str) -> Risk {
    match text {
        "safe" => Risk::Safe,
        "sensitive" => Risk::Sensitive,
        _ => Risk::Dangerous,
    }
}

/// One rule as a line: "allow run_command where command matches git .* until …".
pub fn rule_text(rule: &Rule) -> String {
    let action = match rule.action {
        Action::Allow => "allow",
        Action::Ask => "ask",
        Action::Deny => "deny",
    };
    let pattern = rule.pattern.as_ref().map(|p| format!(" where {} matches {}", target_text(&p.target), p.source)).unwrap_or_default();
    let scope = match rule.scope {
        Scope::Always => String::new(),
        Scope::Until(at) => format!(" until {}", crate::ids::rfc3339(at)),
        Scope::Operation(id) => format!(" in operation {id}"),
    };
    format!("{action} {}{pattern}{scope}", rule.tool)
}

/// One audit entry as a line: time, tool, risk, decision and who decided, duration, size, arguments.
pub fn audit_text(e: &AuditEntry) -> String {
    let took = e.duration_millis.map(|ms| format!(" {ms} ms")).unwrap_or_default();
    let size = e.result_bytes.map(|b| format!(" {b} B")).unwrap_or_default();
    format!("{} {} {} {} by {}{took}{size} {}", crate::ids::rfc3339(e.at_millis), e.tool, e.risk.as_str(), e.decision, e.decided_by, e.arguments)
}

/// The newest audit entries first.
pub fn audit(conn: &Connection, limit: usize) -> rusqlite::Result<Vec<AuditEntry>> {
    let mut stmt = conn.prepare(
        "SELECT audit_id, at_ms, operation_id, call_id, tool, arguments, risk, decision, decided_by, why, duration_ms, result_bytes, result_sha256, error
         FROM audit_log ORDER BY at_ms DESC, audit_id DESC LIMIT ?1",
    )?;
    stmt.query_map([limit as i64], |r| {
        let arguments: String = r.get(5)?;
        Ok(AuditEntry {
            audit_id: r.get(0)?,
            at_millis: r.get(1)?,
            operation_id: r.get(2)?,
            call_id: r.get(3)?,
            tool: r.get(4)?,
            arguments: serde_json::from_str(&arguments).unwrap_or(Value::Null),
            risk: parse_risk(&r.get::<_, String>(6)?),
            decision: r.get(7)?,
            decided_by: r.get(8)?,
            why: r.get(9)?,
            duration_millis: r.get(10)?,
            result_bytes: r.get(11)?,
            result_sha256: r.get(12)?,
            error: r.get(13)?,
        })
    })?
    .collect()
}

/// Argument names whose values are never written to the audit log.
const SECRET_KEYS: [&str; 9] = ["key", "api_key", "apikey", "token", "password", "passwd", "secret", "authorization", "cookie"];

/// The arguments with secrets masked: values under secret-sounding names,
/// and key, token and e-mail shapes anywhere in a string (as for the cloud).
pub fn redact_arguments(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let lower = k.to_ascii_lowercase();
                    let secret = SECRET_KEYS.iter().any(|s| lower == *s || lower.ends_with(&format!("_{s}")));
                    (k.clone(), if secret { Value::String("[redacted]".into()) } else { redact_arguments(v) })
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact_arguments).collect()),
        Value::String(text) => Value::String(redact_text(text)),
        other => other.clone(),
    }
}

fn redact_text(text: &str) -> String {
    use std::sync::LazyLock;
    static INLINE: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"(?i)\b(bearer|token|password|passwd|api[_-]?key|secret)(\s*[:=]\s*|\s+)('[^']*'|\S+)").expect("valid")
    });
    let masked = INLINE.replace_all(text, "$1$2[redacted]").into_owned();
    crate::brains::consent::redact_for_cloud(&masked)
}

/// The agent's operations, calls, rules and audit log, written at once (not
/// batched): a call is recorded as started before it runs. The outcome goes
/// to `reply` when given (the agent says what failed in its own words).
pub fn command(write: AgentWrite, reply: Option<crossbeam_channel::Sender<Result<(), String>>>) -> crate::store::StoreCommand {
    let kind = format!("{write:?}").split([' ', '(', '{']).next().unwrap_or_default().to_owned();
    crate::store::StoreCommand::run(format!("agent {kind}"), move |writer| {
        let outcome = apply(writer.conn(), &write).map_err(|err| err.to_string());
        match reply {
            Some(reply) => {
                let _ = reply.try_send(outcome);
            }
            None => {
                if let Err(err) = &outcome {
                    writer.notice(format!("the agent's record was not saved: {err}"));
                }
            }
        }
    })
}

/// The agent's tool chips of a thread's answers, when it is opened (a live operation sends its own).
pub fn load_thread_calls(thread_id: i64, sink: crate::runtime::EventSink<crate::agent::events::AgentEvent>) -> crate::store::StoreCommand {
    crate::store::StoreCommand::run(format!("load tool calls {thread_id}"), move |writer| match thread_calls(writer.conn(), thread_id, crate::ids::now_millis()) {
        Ok(calls) => {
            for call in calls {
                sink.send(crate::agent::events::AgentEvent::ToolCall(Box::new(call)));
            }
        }
        Err(err) => writer.notice(format!("cannot load the chat's tool calls: {err}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conn() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        conn
    }

    fn call(id: i64, op: i64, status: CallStatus) -> CallRow {
        CallRow {
            call_id: id,
            operation_id: op,
            step: 1,
            model_call_id: format!("c{id}"),
            tool: "run_command".into(),
            arguments: json!({"command": "ls"}),
            risk: Risk::Sensitive,
            status,
            why: "sensitive calls ask".into(),
            decided_by: None,
            output: None,
            is_error: false,
            created_at_millis: 1,
            started_at_millis: None,
            finished_at_millis: None,
            expires_at_millis: Some(300_001),
            images: Vec::new(),
        }
    }

    #[test]
    fn an_operations_task_is_stored_without_its_private_spans() {
        let conn = conn();
        apply(&conn, &AgentWrite::Operation(OperationRow::running(8, None, Some(2), "sign in as <private>pw 1234</private> me".into(), "local".into(), 10))).unwrap();
        assert_eq!(operation(&conn, 8).unwrap().unwrap().task, "sign in as  me");
    }

    #[test]
    fn a_call_is_decided_once_and_started_once_and_an_owned_operation_is_not_overwritten() {
        let conn = conn();
        let mut op = OperationRow::running(7, None, Some(2), "t".into(), "local".into(), 10);
        apply(&conn, &AgentWrite::Operation(op.clone())).unwrap();
        apply(&conn, &AgentWrite::Call(call(70, 7, CallStatus::Waiting))).unwrap();
        let decide = |by: &str| AgentWrite::DecideCall { call_id: 70, to: CallStatus::Running, by: by.into(), output: None, arguments: None, at_millis: 20 };
        apply(&conn, &decide("cowork approve (pid 1)")).unwrap();
        let refused = apply(&conn, &decide("the sidebar")).unwrap_err().to_string();
        assert!(refused.contains("already decided by cowork approve (pid 1)"), "{refused}");
        let deny = AgentWrite::DecideCall { call_id: 70, to: CallStatus::Denied, by: "x".into(), output: Some("no".into()), arguments: None, at_millis: 21 };
        assert!(apply(&conn, &deny).is_err(), "a decided call cannot be denied afterwards");
        apply(&conn, &AgentWrite::StartCall { call_id: 70, at_millis: 30 }).unwrap();
        assert!(apply(&conn, &AgentWrite::StartCall { call_id: 70, at_millis: 31 }).is_err(), "started once");
        assert!(apply(&conn, &decide("late")).is_err());
        assert!(apply(&conn, &AgentWrite::DecideCall { call_id: 99, to: CallStatus::Running, by: "x".into(), output: None, arguments: None, at_millis: 1 }).unwrap_err().to_string().contains("no call 99"));
        // Another owner's copy is not written; adoption is a compare-and-swap on the old owner.
        let mut theirs = op.clone();
        theirs.owner = Some("1:1".into());
        theirs.steps = 9;
        assert!(apply(&conn, &AgentWrite::Operation(theirs)).is_err());
        assert_eq!(operation(&conn, 7).unwrap().unwrap().steps, 0);
        let me = this_process().to_owned();
        assert!(apply(&conn, &AgentWrite::AdoptOperation { operation_id: 7, owner: "2:2".into(), previous: Some("1:1".into()) }).is_err());
        apply(&conn, &AgentWrite::AdoptOperation { operation_id: 7, owner: "2:2".into(), previous: Some(me.clone()) }).unwrap();
        op.steps = 3;
        assert!(apply(&conn, &AgentWrite::Operation(op)).is_err(), "adopted: the old owner's copy is stale");
        assert!(owner_alive(&me));
        assert!(!owner_alive("2:2") || process_start(2) == Some(2));
        assert!(!owner_alive(&format!("{}:{}", std::process::id(), 1)), "a reused pid is not the owner");
        assert!(!owner_alive("junk"));
    }

    #[test]
    fn operations_and_calls_round_trip_and_update_in_place() {
        let conn = conn();
        let mut op = OperationRow {
            operation_id: 7,
            thread_id: Some(1),
            answer_id: Some(2),
            task: "tidy my notes".into(),
            status: OpStatus::Running,
            steps: 1,
            cost_usd: 0.0,
            brain: "local".into(),
            state: "{}".into(),
            error: None,
            created_at_millis: 10,
            updated_at_millis: 10,
            owner: Some(this_process().to_owned()),
        };
        apply(&conn, &AgentWrite::Operation(op.clone())).unwrap();
        op.status = OpStatus::WaitingForHuman;
        op.steps = 2;
        apply(&conn, &AgentWrite::Operation(op.clone())).unwrap();
        assert_eq!(operation(&conn, 7).unwrap().unwrap(), op);
        assert_eq!(open_operations(&conn).unwrap().len(), 1);
        let mut c = call(70, 7, CallStatus::Waiting);
        apply(&conn, &AgentWrite::Call(c.clone())).unwrap();
        c.status = CallStatus::Done;
        c.output = Some("a\nb".into());
        // A 1×1 PNG and bytes that are no image: both kept whole, the second named as unshowable.
        let png = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==").unwrap();
        c.images = vec![crate::media::Attached::new(crate::media::Image { mime: "image/png".into(), data: png }), crate::media::Attached::new(crate::media::Image { mime: "image/png".into(), data: b"nope".to_vec() })];
        apply(&conn, &AgentWrite::Call(c.clone())).unwrap();
        apply(&conn, &AgentWrite::Call(c.clone())).unwrap();
        let read = calls(&conn, 7).unwrap();
        assert_eq!(read, vec![c]);
        assert_eq!(read[0].images[0].shown.as_ref().map(|t| (t.width, t.height)), Ok((1, 1)));
        assert!(read[0].images[1].shown.is_err());
        op.status = OpStatus::Done;
        apply(&conn, &AgentWrite::Operation(op)).unwrap();
        assert!(open_operations(&conn).unwrap().is_empty());
        // The thread's chips come back on the operation's answer.
        let views = thread_calls(&conn, 1, 100).unwrap();
        assert_eq!(views.len(), 1);
        assert_eq!((views[0].answer_id, views[0].call_id, views[0].output.as_deref()), (2, 70, Some("a\nb")));
        assert!(thread_calls(&conn, 9, 100).unwrap().is_empty());
    }

    #[test]
    fn rules_persist_with_their_patterns_and_a_broken_row_is_named_not_fatal() {
        let conn = conn();
        let rule = Rule { id: 3, tool: "run_command".into(), action: Action::Allow, pattern: Some(Pattern::new(Target::Command, "git status.*").unwrap()), scope: Scope::Always };
        apply(&conn, &AgentWrite::AddRule(rule)).unwrap();
        conn.execute("INSERT INTO tool_rules (rule_id, tool, action, target, pattern, scope, created_at_ms) VALUES (4, 'x', 'allow', 'command', '(', 'always', 0)", []).unwrap();
        let (good, bad) = rules(&conn).unwrap();
        assert_eq!(good.len(), 1);
        assert_eq!(good[0].pattern.as_ref().unwrap().source, "git status.*");
        assert_eq!(bad.len(), 1, "{bad:?}");
        apply(&conn, &AgentWrite::RemoveRule(3)).unwrap();
        assert!(rules(&conn).unwrap().0.is_empty());
    }

    #[test]
    fn the_audit_log_is_append_only_and_redacts_secrets() {
        let conn = conn();
        let mut c = call(1, 9, CallStatus::Done);
        c.arguments = json!({"url": "https://x.invalid/?token=abc123", "headers": {"Authorization": "Bearer sk-abcdefghijklmnop"}, "api_key": "hunter2", "command": "curl -H 'password: hunter2' x"});
        let entry = AuditEntry::for_call(&c, "allow", "rule 3", Some(("output", false)), 5);
        apply(&conn, &AgentWrite::Audit(entry)).unwrap();
        let stored = audit(&conn, 10).unwrap();
        let text = stored[0].arguments.to_string();
        assert!(!text.contains("hunter2") && !text.contains("abc123") && !text.contains("sk-abcdefghijklmnop"), "{text}");
        assert_eq!(stored[0].result_bytes, Some(6));
        assert_eq!(stored[0].result_sha256.as_deref(), Some(hex::encode(Sha256::digest(b"output")).as_str()));
        assert!(conn.execute("UPDATE audit_log SET decision = 'allow'", []).is_err());
        assert!(conn.execute("DELETE FROM audit_log", []).is_err());
    }
}
