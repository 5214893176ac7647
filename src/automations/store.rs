//! The SQL of automations (migration 13): `automations` (the flows),
//! `automation_runs` (the flow as it was when queued, the trigger data and the
//! variables so far, status, `step_index`, `wake_at_ms`, the operation the step
//! waits for), `run_steps` (input, output, decision, error, times),
//! `automation_scheduler` (next fire time, failures, skipped starts),
//! `automation_claims` and `automation_meta`. Plain functions over a
//! connection: the automations worker reads them on its own connection and runs
//! the writing ones on the store's writer thread (`StoreLink::call`); `cowork
//! automations` calls them on a connection of its own.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use super::flow::{Flow, Scope};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    Queued,
    Running,
    WaitingDelay,
    WaitingApproval,
    Done,
    Failed,
    Cancelled,
    /// A parked approval nobody answered in time.
    Expired,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::WaitingDelay => "waiting_delay",
            RunStatus::WaitingApproval => "waiting_approval",
            RunStatus::Done => "done",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> RunStatus {
        match text {
            "queued" => RunStatus::Queued,
            "running" => RunStatus::Running,
            "waiting_delay" => RunStatus::WaitingDelay,
            "waiting_approval" => RunStatus::WaitingApproval,
            "done" => RunStatus::Done,
            "cancelled" => RunStatus::Cancelled,
            "expired" => RunStatus::Expired,
            _ => RunStatus::Failed,
        }
    }

    /// Queued, running or waiting: the run is not over.
    pub fn is_open(self) -> bool {
        matches!(self, RunStatus::Queued | RunStatus::Running | RunStatus::WaitingDelay | RunStatus::WaitingApproval)
    }

    /// Started and not over (a queued run has not started).
    pub fn is_active(self) -> bool {
        self.is_open() && self != RunStatus::Queued
    }
}

/// A flow as stored.
#[derive(Clone, Debug)]
pub struct FlowRow {
    pub automation_id: i64,
    pub name: String,
    /// The flow, or why its stored JSON no longer reads.
    pub flow: Result<Flow, String>,
    pub enabled: bool,
    pub updated_at_millis: i64,
}

/// The scheduler's state of one flow.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulerRow {
    pub next_fire_at_millis: Option<i64>,
    pub last_fire_at_millis: Option<i64>,
    pub last_success_at_millis: Option<i64>,
    pub consecutive_failures: u32,
    pub skipped: u32,
}

#[derive(Clone, Debug)]
pub struct RunRow {
    pub run_id: i64,
    pub automation_id: i64,
    /// The flow as it was when the run was queued.
    pub flow: Flow,
    pub trigger_kind: String,
    pub scope: Scope,
    pub event_key: Option<String>,
    pub status: RunStatus,
    /// The next step to take.
    pub step_index: usize,
    pub wake_at_millis: Option<i64>,
    pub operation_id: Option<i64>,
    pub output: Option<String>,
    pub error: Option<String>,
    pub rerun_of: Option<i64>,
    pub created_at_millis: i64,
    pub started_at_millis: Option<i64>,
    pub finished_at_millis: Option<i64>,
}

/// One step of a run as it happened.
#[derive(Clone, Debug, PartialEq)]
pub struct StepRow {
    pub run_id: i64,
    pub seq: u32,
    pub step_id: String,
    pub kind: String,
    pub input: Option<Value>,
    pub output: Option<Value>,
    pub status: String,
    pub decision: Option<String>,
    pub error: Option<String>,
    pub operation_id: Option<i64>,
    pub started_at_millis: i64,
    pub finished_at_millis: Option<i64>,
}

fn flow_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FlowRow> {
    let definition: String = r.get(2)?;
    Ok(FlowRow { automation_id: r.get(0)?, name: r.get(1)?, flow: Flow::from_json(&definition), enabled: r.get(3)?, updated_at_millis: r.get(4)? })
}

/// Saves a flow under its name: a new one, or a new definition for the same
/// automation (its runs and history stay). Returns its id.
pub fn save_flow(conn: &Connection, flow: &Flow, now_millis: i64) -> rusqlite::Result<i64> {
    let tx = crate::store::write_transaction(conn)?;
    let existing: Option<i64> = tx.query_row("SELECT automation_id FROM automations WHERE name = ?1", [&flow.name], |r| r.get(0)).optional()?;
    let id = match existing {
        Some(id) => {
            tx.execute("UPDATE automations SET definition = ?2, updated_at_ms = ?3 WHERE automation_id = ?1", params![id, flow.to_json(), now_millis])?;
            // A new schedule is computed from now.
            tx.execute("UPDATE automation_scheduler SET next_fire_at_ms = NULL WHERE automation_id = ?1", [id])?;
            id
        }
        None => {
            let id = crate::ids::next_id();
            tx.execute(
                "INSERT INTO automations (automation_id, name, definition, enabled, created_at_ms, updated_at_ms) VALUES (?1, ?2, ?3, 1, ?4, ?4)",
                params![id, flow.name, flow.to_json(), now_millis],
            )?;
            tx.execute("INSERT INTO automation_scheduler (automation_id) VALUES (?1)", [id])?;
            id
        }
    };
    tx.commit()?;
    Ok(id)
}

pub fn flows(conn: &Connection) -> rusqlite::Result<Vec<FlowRow>> {
    let mut stmt = conn.prepare("SELECT automation_id, name, definition, enabled, updated_at_ms FROM automations ORDER BY name")?;
    let rows = stmt.query_map([], flow_row)?;
    rows.collect()
}

pub fn flow_by_name(conn: &Connection, name: &str) -> rusqlite::Result<Option<FlowRow>> {
    conn.query_row("SELECT automation_id, name, definition, enabled, updated_at_ms FROM automations WHERE name = ?1", [name], flow_row).optional()
}

pub fn flow_by_id(conn: &Connection, automation_id: i64) -> rusqlite::Result<Option<FlowRow>> {
    conn.query_row("SELECT automation_id, name, definition, enabled, updated_at_ms FROM automations WHERE automation_id = ?1", [automation_id], flow_row).optional()
}

/// The built-in suggestions, as flows the user can switch off, edit or remove.
pub const BUILTINS: [(&str, bool); 7] = [
    (
        r#"{"name": "builtin_approval_reminder", "description": "Reminds you of a tool call that has waited 10 minutes for your approval.",
            "trigger": {"kind": "approval_waiting", "minutes": 10},
            "steps": [{"id": "remind", "kind": "notify", "tier": "helpful", "title": "An approval is waiting",
                "body": "${trigger.data.tool} has waited ${trigger.data.waited_minutes} minutes for your answer"}]}"#,
        true,
    ),
    (
        r#"{"name": "builtin_take_a_break", "description": "Suggests a break after 90 minutes in one app.",
            "trigger": {"kind": "focus_stretch", "minutes": 90},
            "steps": [{"id": "suggest", "kind": "notify", "tier": "informational", "title": "Time for a break?",
                "body": "You have been in ${trigger.data.app} for ${trigger.data.minutes} minutes"}]}"#,
        false,
    ),
    (
        r#"{"name": "builtin_context_switches", "description": "Tells you when you switched apps 12 times within 10 minutes.",
            "trigger": {"kind": "context_switches", "count": 12, "minutes": 10},
            "steps": [{"id": "tell", "kind": "notify", "tier": "informational", "title": "Lots of switching",
                "body": "You switched apps ${trigger.data.switches} times in ${trigger.data.minutes} minutes",
                "task": "Look at what I switched between in the last 10 minutes and help me pick the one thing to finish first."}]}"#,
        true,
    ),
    (
        r#"{"name": "builtin_daily_recap", "description": "Writes the day's recap at 17:30 on weekdays: per project, what was done and what was left open, each line with its sources. Kept in memory and shown in the Context tab; needs a local model or a cloud you allowed. To have it written when you leave instead, give it the trigger day_end.",
            "trigger": {"kind": "schedule", "schedule": "30 17 * * 1-5"},
            "steps": [
                {"id": "recap", "kind": "tool", "tool": "recap", "args": {"period": "day", "instructions": ""}, "timeout_secs": 600},
                {"id": "written", "kind": "condition", "left": "${steps.recap.data.written}", "op": "equals", "right": "true", "else": "end"},
                {"id": "tell", "kind": "notify", "tier": "informational", "title": "Your day: ${steps.recap.data.headline}", "body": "${steps.recap.data.summary}",
                    "task": "From today's recap, what did I leave open, and what should I do first tomorrow?"}]}"#,
        true,
    ),
    (
        r#"{"name": "builtin_weekly_recap", "description": "Writes the week's recap on Fridays at 17:45: per project, what was done and what was left open, each line with its sources.",
            "trigger": {"kind": "schedule", "schedule": "45 17 * * 5"},
            "steps": [
                {"id": "recap", "kind": "tool", "tool": "recap", "args": {"period": "week", "instructions": ""}, "timeout_secs": 600},
                {"id": "written", "kind": "condition", "left": "${steps.recap.data.written}", "op": "equals", "right": "true", "else": "end"},
                {"id": "tell", "kind": "notify", "tier": "informational", "title": "Your week: ${steps.recap.data.headline}", "body": "${steps.recap.data.summary}"}]}"#,
        true,
    ),
    (
        r#"{"name": "builtin_meeting_note", "description": "After a call cowork listened to (you clicked Listen on its offer), writes the meeting note: a summary, decisions and action items with owners, each with the transcript lines it stands on. Kept in memory.",
            "trigger": {"kind": "meeting", "event": "ended"},
            "steps": [
                {"id": "listened", "kind": "condition", "left": "${trigger.data.listened}", "op": "equals", "right": "true", "else": "end"},
                {"id": "note", "kind": "tool", "tool": "meeting_note", "args": {"start_ms": "${trigger.data.start_ms}", "end_ms": "${trigger.data.end_ms}", "title": "${trigger.data.title}", "instructions": ""}, "timeout_secs": 900},
                {"id": "written", "kind": "condition", "left": "${steps.note.data.written}", "op": "equals", "right": "true", "else": "end"},
                {"id": "tell", "kind": "notify", "tier": "helpful", "title": "Meeting note: ${trigger.data.title}", "body": "${steps.note.data.summary}\n${steps.note.data.action_items}"}]}"#,
        true,
    ),
    (
        r#"{"name": "builtin_meeting_prep", "description": "10 minutes before a meeting in your calendar (Settings → Your day), gathers what memory holds on its subject and offers to prepare you.",
            "trigger": {"kind": "calendar", "minutes_before": 10},
            "steps": [
                {"id": "found", "kind": "tool", "tool": "search_memory", "args": {"query": "${trigger.data.title}", "limit": 5}},
                {"id": "tell", "kind": "notify", "tier": "helpful", "title": "In ${trigger.data.minutes} min: ${trigger.data.title}", "body": "${steps.found.data.text}",
                    "task": "Prepare me for my next meeting: what did I do lately on its subject, what was decided, and what is still open?"}]}"#,
        true,
    ),
];

/// The built-ins the first release seeded under one mark (`builtins_seeded`).
const FIRST_BUILTINS: [&str; 3] = ["builtin_approval_reminder", "builtin_take_a_break", "builtin_context_switches"];

/// Adds each built-in once (never again after the user removed it): each is
/// marked as seeded (`builtin_seeded:NAME`), so a built-in a newer cowork
/// brings is added to a database that had the others.
pub fn seed_builtins(conn: &Connection, now_millis: i64) -> rusqlite::Result<usize> {
    let meta = |key: &str| conn.query_row("SELECT value FROM automation_meta WHERE key = ?1", [key], |r| r.get::<_, String>(0)).optional();
    let first_seeded = meta("builtins_seeded")?.is_some();
    let mut added = 0;
    for (json, enabled) in BUILTINS {
        let flow = match Flow::from_json(json) {
            Ok(flow) => flow,
            Err(err) => {
                tracing::error!(%err, "a built-in suggestion does not read");
                continue;
            }
        };
        let key = format!("builtin_seeded:{}", flow.name);
        if meta(&key)?.is_some() || first_seeded && FIRST_BUILTINS.contains(&flow.name.as_str()) {
            continue;
        }
        if flow_by_name(conn, &flow.name)?.is_none() {
            save_flow(conn, &flow, now_millis)?;
            if !enabled {
                set_enabled(conn, &flow.name, false)?;
            }
            added += 1;
        }
        conn.execute("INSERT OR REPLACE INTO automation_meta (key, value) VALUES (?1, '1')", [&key])?;
    }
    conn.execute("INSERT OR REPLACE INTO automation_meta (key, value) VALUES ('builtins_seeded', '1')", [])?;
    Ok(added)
}

/// Tool calls that have waited for approval since before `before_millis`: (call id, tool, why, since).
pub fn waiting_calls(conn: &Connection, before_millis: i64) -> rusqlite::Result<Vec<(i64, String, String, i64)>> {
    let mut stmt = conn.prepare("SELECT call_id, tool, why, created_at_ms FROM operation_calls WHERE status = 'waiting' AND created_at_ms <= ?1 ORDER BY created_at_ms")?;
    let rows = stmt.query_map([before_millis], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    rows.collect()
}

/// The resources of an MCP server that enabled flows wait on (`resource_updated` with a URI).
pub fn watched_resources(conn: &Connection, server: &str) -> rusqlite::Result<Vec<String>> {
    let mut uris: Vec<String> = flows(conn)?
        .into_iter()
        .filter(|row| row.enabled)
        .filter_map(|row| row.flow.ok())
        .filter_map(|flow| match flow.trigger {
            super::flow::Trigger::Mcp { server: s, event: super::flow::McpEvent::ResourceUpdated, uri: Some(uri) } if s == server => Some(uri),
            _ => None,
        })
        .collect();
    uris.sort();
    uris.dedup();
    Ok(uris)
}

/// Switches a flow on or off; a flow switched on computes its schedule from now.
pub fn set_enabled(conn: &Connection, name: &str, enabled: bool) -> rusqlite::Result<bool> {
    let tx = crate::store::write_transaction(conn)?;
    let changed = tx.execute("UPDATE automations SET enabled = ?2 WHERE name = ?1", params![name, enabled])?;
    tx.execute("UPDATE automation_scheduler SET next_fire_at_ms = NULL WHERE automation_id = (SELECT automation_id FROM automations WHERE name = ?1)", [name])?;
    tx.commit()?;
    Ok(changed > 0)
}

/// Removes a flow with its history (runs, steps, claims).
pub fn delete_flow(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    let tx = crate::store::write_transaction(conn)?;
    let id: Option<i64> = tx.query_row("SELECT automation_id FROM automations WHERE name = ?1", [name], |r| r.get(0)).optional()?;
    if let Some(id) = id {
        tx.execute("DELETE FROM run_steps WHERE run_id IN (SELECT run_id FROM automation_runs WHERE automation_id = ?1)", [id])?;
        tx.execute("DELETE FROM automation_runs WHERE automation_id = ?1", [id])?;
        tx.execute("DELETE FROM automation_claims WHERE automation_id = ?1", [id])?;
        tx.execute("DELETE FROM automation_scheduler WHERE automation_id = ?1", [id])?;
        tx.execute("DELETE FROM automations WHERE automation_id = ?1", [id])?;
    }
    tx.commit()?;
    Ok(id.is_some())
}

pub fn scheduler(conn: &Connection, automation_id: i64) -> rusqlite::Result<SchedulerRow> {
    conn.query_row(
        "SELECT next_fire_at_ms, last_fire_at_ms, last_success_at_ms, consecutive_failures, skipped FROM automation_scheduler WHERE automation_id = ?1",
        [automation_id],
        |r| Ok(SchedulerRow { next_fire_at_millis: r.get(0)?, last_fire_at_millis: r.get(1)?, last_success_at_millis: r.get(2)?, consecutive_failures: r.get(3)?, skipped: r.get(4)? }),
    )
    .optional()
    .map(Option::unwrap_or_default)
}

pub fn set_next_fire(conn: &Connection, automation_id: i64, next_millis: Option<i64>) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO automation_scheduler (automation_id, next_fire_at_ms) VALUES (?1, ?2)
         ON CONFLICT (automation_id) DO UPDATE SET next_fire_at_ms = excluded.next_fire_at_ms",
        params![automation_id, next_millis],
    )?;
    Ok(())
}

/// A start the run mode skipped.
pub fn count_skip(conn: &Connection, automation_id: i64) -> rusqlite::Result<()> {
    conn.execute("UPDATE automation_scheduler SET skipped = skipped + 1 WHERE automation_id = ?1", [automation_id])?;
    Ok(())
}

/// A run ended: success resets the failure count.
pub fn record_outcome(conn: &Connection, automation_id: i64, success: bool, now_millis: i64) -> rusqlite::Result<()> {
    if success {
        conn.execute("UPDATE automation_scheduler SET last_success_at_ms = ?2, consecutive_failures = 0 WHERE automation_id = ?1", params![automation_id, now_millis])?;
    } else {
        conn.execute("UPDATE automation_scheduler SET consecutive_failures = consecutive_failures + 1 WHERE automation_id = ?1", [automation_id])?;
    }
    Ok(())
}

/// A run to queue, and what it claims.
pub struct NewRun<'a> {
    pub run_id: i64,
    pub automation_id: i64,
    pub flow: &'a Flow,
    pub trigger_kind: &'a str,
    pub scope: &'a Scope,
    /// The event this run is for: claimed first; a claimed event queues nothing.
    pub event_key: Option<&'a str>,
    /// A scheduled run moves the flow's next fire time in the same transaction.
    pub next_fire: Option<Option<i64>>,
    pub rerun_of: Option<i64>,
    pub now_millis: i64,
}

/// Claims the event and queues the run in one transaction. Returns false
/// (and writes nothing but the schedule) when the event was claimed before.
pub fn queue_run(conn: &Connection, run: &NewRun<'_>) -> rusqlite::Result<bool> {
    let tx = crate::store::write_transaction(conn)?;
    if let Some(next) = run.next_fire {
        tx.execute(
            "UPDATE automation_scheduler SET next_fire_at_ms = ?2, last_fire_at_ms = ?3 WHERE automation_id = ?1",
            params![run.automation_id, next, run.now_millis],
        )?;
    }
    if let Some(key) = run.event_key {
        let claimed = tx.execute(
            "INSERT OR IGNORE INTO automation_claims (automation_id, event_key, run_id, claimed_at_ms) VALUES (?1, ?2, ?3, ?4)",
            params![run.automation_id, key, run.run_id, run.now_millis],
        )?;
        if claimed == 0 {
            tx.commit()?;
            return Ok(false);
        }
    }
    tx.execute(
        "INSERT INTO automation_runs (run_id, automation_id, definition, trigger_kind, scope, event_key, status, step_index, rerun_of, created_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', 0, ?7, ?8)",
        params![
            run.run_id,
            run.automation_id,
            serde_json::to_string(run.flow).unwrap_or_default(),
            run.trigger_kind,
            serde_json::to_string(run.scope).unwrap_or_default(),
            run.event_key,
            run.rerun_of,
            run.now_millis
        ],
    )?;
    tx.commit()?;
    Ok(true)
}

const RUN_COLUMNS: &str = "run_id, automation_id, definition, trigger_kind, scope, event_key, status, step_index, wake_at_ms, operation_id, output, error, rerun_of, created_at_ms, started_at_ms, finished_at_ms";

fn run_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    let definition: String = r.get(2)?;
    let scope: String = r.get(4)?;
    let status: String = r.get(6)?;
    let flow = serde_json::from_str(&definition).map_err(|e| rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e)))?;
    Ok(RunRow {
        run_id: r.get(0)?,
        automation_id: r.get(1)?,
        flow,
        trigger_kind: r.get(3)?,
        scope: serde_json::from_str(&scope).unwrap_or_default(),
        event_key: r.get(5)?,
        status: RunStatus::parse(&status),
        step_index: r.get::<_, i64>(7)? as usize,
        wake_at_millis: r.get(8)?,
        operation_id: r.get(9)?,
        output: r.get(10)?,
        error: r.get(11)?,
        rerun_of: r.get(12)?,
        created_at_millis: r.get(13)?,
        started_at_millis: r.get(14)?,
        finished_at_millis: r.get(15)?,
    })
}

pub fn run(conn: &Connection, run_id: i64) -> rusqlite::Result<Option<RunRow>> {
    conn.query_row(&format!("SELECT {RUN_COLUMNS} FROM automation_runs WHERE run_id = ?1"), [run_id], run_row).optional()
}

/// Runs that are not over, oldest first.
pub fn open_runs(conn: &Connection) -> rusqlite::Result<Vec<RunRow>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {RUN_COLUMNS} FROM automation_runs WHERE status IN ('queued', 'running', 'waiting_delay', 'waiting_approval') ORDER BY created_at_ms, run_id"
    ))?;
    let rows = stmt.query_map([], run_row)?;
    rows.collect()
}

/// The newest runs (of one flow, or of all), newest first.
pub fn recent_runs(conn: &Connection, automation_id: Option<i64>, limit: usize) -> rusqlite::Result<Vec<RunRow>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {RUN_COLUMNS} FROM automation_runs WHERE ?1 IS NULL OR automation_id = ?1 ORDER BY created_at_ms DESC, run_id DESC LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![automation_id, limit as i64], run_row)?;
    rows.collect()
}

/// Runs queued in `[since, until)`, oldest first (for export).
pub fn runs_between(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<Vec<RunRow>> {
    let mut stmt = conn.prepare(&format!("SELECT {RUN_COLUMNS} FROM automation_runs WHERE created_at_ms >= ?1 AND created_at_ms < ?2 ORDER BY created_at_ms, run_id"))?;
    let rows = stmt.query_map(params![since_millis, until_millis], run_row)?;
    rows.collect()
}

/// Writes a run's progress.
pub fn save_run(conn: &Connection, run: &RunRow) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE automation_runs SET scope = ?2, status = ?3, step_index = ?4, wake_at_ms = ?5, operation_id = ?6, output = ?7, error = ?8,
                started_at_ms = ?9, finished_at_ms = ?10 WHERE run_id = ?1",
        params![
            run.run_id,
            serde_json::to_string(&run.scope).unwrap_or_default(),
            run.status.as_str(),
            run.step_index as i64,
            run.wake_at_millis,
            run.operation_id,
            run.output,
            run.error,
            run.started_at_millis,
            run.finished_at_millis
        ],
    )?;
    Ok(())
}

/// Writes a run and one of its steps together.
pub fn save_run_and_step(conn: &Connection, run: &RunRow, step: &StepRow) -> rusqlite::Result<()> {
    let tx = crate::store::write_transaction(conn)?;
    save_run(&tx, run)?;
    save_step(&tx, step)?;
    tx.commit()
}

pub fn save_step(conn: &Connection, step: &StepRow) -> rusqlite::Result<()> {
    let json = |v: &Option<Value>| v.as_ref().map(Value::to_string);
    conn.execute(
        "INSERT INTO run_steps (run_id, seq, step_id, kind, input, output, status, decision, error, operation_id, started_at_ms, finished_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         ON CONFLICT (run_id, seq) DO UPDATE SET input = excluded.input, output = excluded.output, status = excluded.status,
             decision = excluded.decision, error = excluded.error, operation_id = excluded.operation_id, finished_at_ms = excluded.finished_at_ms",
        params![
            step.run_id,
            step.seq,
            step.step_id,
            step.kind,
            json(&step.input),
            json(&step.output),
            step.status,
            step.decision,
            step.error,
            step.operation_id,
            step.started_at_millis,
            step.finished_at_millis
        ],
    )?;
    Ok(())
}

pub fn steps(conn: &Connection, run_id: i64) -> rusqlite::Result<Vec<StepRow>> {
    let mut stmt = conn.prepare(
        "SELECT run_id, seq, step_id, kind, input, output, status, decision, error, operation_id, started_at_ms, finished_at_ms
         FROM run_steps WHERE run_id = ?1 ORDER BY seq",
    )?;
    let parse = |text: Option<String>| text.and_then(|t| serde_json::from_str(&t).ok());
    let rows = stmt.query_map([run_id], |r| {
        Ok(StepRow {
            run_id: r.get(0)?,
            seq: r.get(1)?,
            step_id: r.get(2)?,
            kind: r.get(3)?,
            input: parse(r.get(4)?),
            output: parse(r.get(5)?),
            status: r.get(6)?,
            decision: r.get(7)?,
            error: r.get(8)?,
            operation_id: r.get(9)?,
            started_at_millis: r.get(10)?,
            finished_at_millis: r.get(11)?,
        })
    })?;
    rows.collect()
}

/// Runs of a flow that started and are not over.
pub fn active_runs(conn: &Connection, automation_id: i64) -> rusqlite::Result<usize> {
    conn.query_row(
        "SELECT count(*) FROM automation_runs WHERE automation_id = ?1 AND status IN ('running', 'waiting_delay', 'waiting_approval')",
        [automation_id],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as usize)
}

/// Deletes the runs queued in `[since, until)`: their steps hold what the flow read.
pub fn delete_runs_between(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<usize> {
    conn.execute(
        "DELETE FROM run_steps WHERE run_id IN (SELECT run_id FROM automation_runs WHERE created_at_ms >= ?1 AND created_at_ms < ?2 AND status NOT IN ('queued', 'running', 'waiting_delay', 'waiting_approval'))",
        params![since_millis, until_millis],
    )?;
    conn.execute(
        "DELETE FROM automation_runs WHERE created_at_ms >= ?1 AND created_at_ms < ?2 AND status NOT IN ('queued', 'running', 'waiting_delay', 'waiting_approval')",
        params![since_millis, until_millis],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automations::flow::Flow;

    fn conn() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        conn
    }

    fn flow() -> Flow {
        Flow::from_json(r#"{"name": "every_minute", "trigger": {"kind": "schedule", "schedule": "every 1m"}, "steps": [{"id": "wait", "kind": "delay", "seconds": 5}]}"#).unwrap()
    }

    #[test]
    fn an_event_claimed_once_queues_one_run_however_often_it_comes() {
        let conn = conn();
        let f = flow();
        let id = save_flow(&conn, &f, 1).unwrap();
        assert_eq!(save_flow(&conn, &f, 2).unwrap(), id, "saving again keeps the automation");
        let scope = Scope::default();
        let new = |run_id| NewRun { run_id, automation_id: id, flow: &f, trigger_kind: "schedule", scope: &scope, event_key: Some("schedule:60000"), next_fire: Some(Some(120_000)), rerun_of: None, now_millis: 60_500 };
        assert!(queue_run(&conn, &new(10)).unwrap());
        assert!(!queue_run(&conn, &new(11)).unwrap(), "the same scheduled time again");
        assert_eq!(open_runs(&conn).unwrap().len(), 1);
        assert_eq!(scheduler(&conn, id).unwrap().next_fire_at_millis, Some(120_000));
        let mut run = run(&conn, 10).unwrap().unwrap();
        assert_eq!((run.status, run.flow.name.as_str()), (RunStatus::Queued, "every_minute"));
        run.status = RunStatus::WaitingDelay;
        run.wake_at_millis = Some(65_500);
        let step = StepRow { run_id: 10, seq: 0, step_id: "wait".into(), kind: "delay".into(), input: None, output: None, status: "waiting_delay".into(), decision: None, error: None, operation_id: None, started_at_millis: 60_500, finished_at_millis: None };
        save_run_and_step(&conn, &run, &step).unwrap();
        assert_eq!(super::run(&conn, 10).unwrap().unwrap().wake_at_millis, Some(65_500));
        assert_eq!(steps(&conn, 10).unwrap(), [step]);
        assert_eq!(active_runs(&conn, id).unwrap(), 1);
        assert!(delete_flow(&conn, "every_minute").unwrap());
        assert!(open_runs(&conn).unwrap().is_empty() && steps(&conn, 10).unwrap().is_empty());
    }

    #[test]
    fn every_built_in_validates_and_one_a_newer_cowork_brings_is_added_once_beside_the_first_ones() {
        for (json, _) in BUILTINS {
            let flow = Flow::from_json(json).unwrap();
            flow.validate(&crate::automations::flow::BuiltIn).unwrap_or_else(|problems| panic!("{}: {problems:?}", flow.name));
        }
        // A database the first release seeded, whose user removed the break suggestion.
        let conn = conn();
        for (json, enabled) in &BUILTINS[..3] {
            let flow = Flow::from_json(json).unwrap();
            save_flow(&conn, &flow, 1).unwrap();
            set_enabled(&conn, &flow.name, *enabled).unwrap();
        }
        conn.execute("INSERT INTO automation_meta (key, value) VALUES ('builtins_seeded', '1')", []).unwrap();
        assert!(delete_flow(&conn, "builtin_take_a_break").unwrap());
        assert_eq!(seed_builtins(&conn, 2).unwrap(), 4, "the recaps, the meeting note and the meeting preparation");
        assert!(flow_by_name(&conn, "builtin_take_a_break").unwrap().is_none(), "a removed built-in stays removed");
        assert!(flow_by_name(&conn, "builtin_daily_recap").unwrap().is_some_and(|f| f.enabled));
        assert!(delete_flow(&conn, "builtin_daily_recap").unwrap());
        assert_eq!(seed_builtins(&conn, 3).unwrap(), 0, "each is added once");
        assert!(flow_by_name(&conn, "builtin_daily_recap").unwrap().is_none());
    }
}
