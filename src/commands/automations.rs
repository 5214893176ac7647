//! `cowork automations list|run|history|describe|export|import|remove|enable|disable`.
//! Reads and edits go straight to the database (the sidebar's automations
//! worker sees a change at its next wake-up). `run` executes here, with
//! headless workers, when no sidebar holds the executor's lock; with one
//! running, the run is queued for it.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::automations::flow::{BuiltIn, Flow, Trigger};
use crate::automations::schedule::Schedule;
use crate::automations::store::{self as db, RunStatus};
use crate::automations::worker::take_lock;
use crate::config::Paths;
use crate::ids::{format_when, next_id, now_millis};
use crate::tools::Origin;

/// `cowork automations list`: each flow, its trigger, whether it is on, its last run and the next time it fires.
pub fn list(paths: &Paths, as_json: bool) -> anyhow::Result<()> {
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let now = now_millis();
    let mut out = Vec::new();
    for row in db::flows(&conn)? {
        let last = db::recent_runs(&conn, Some(row.automation_id), 1)?.into_iter().next();
        let state = db::scheduler(&conn, row.automation_id)?;
        let trigger = row.flow.as_ref().map(|f| f.trigger.describe()).unwrap_or_else(|err| format!("(does not read: {err})"));
        if as_json {
            out.push(json!({
                "name": row.name,
                "enabled": row.enabled,
                "trigger": trigger,
                "last_run": last.as_ref().map(|r| json!({"run_id": r.run_id, "status": r.status.as_str(), "at": crate::ids::rfc3339(r.created_at_millis), "error": r.error})),
                "next_fire": state.next_fire_at_millis.filter(|_| row.enabled).map(crate::ids::rfc3339),
            }));
        } else {
            let last = last.map(|r| format!("{} {}", r.status.as_str(), format_when(r.created_at_millis, now))).unwrap_or_else(|| "never run".into());
            let next = state.next_fire_at_millis.filter(|_| row.enabled).map(|at| format!(", next {}", format_when(at, now))).unwrap_or_default();
            println!("{}\t{}\t{trigger}\t{last}{next}", row.name, if row.enabled { "on" } else { "off" });
        }
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}

/// `--input key=value`: the value as JSON when it reads as JSON, else as text.
pub fn parse_inputs(inputs: &[String]) -> anyhow::Result<Value> {
    let mut data = serde_json::Map::new();
    for input in inputs {
        let (key, value) = input.split_once('=').with_context(|| format!("--input {input}: write it as name=value"))?;
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        data.insert(key.trim().to_owned(), value);
    }
    Ok(Value::Object(data))
}

/// `cowork automations run NAME`: runs it now and prints each step. Exit
/// status 3 when a step waits for approval (decide it with `cowork approve`).
pub fn run(paths: &Paths, name: &str, data: Value, wait: Duration, keep_waiting: bool) -> anyhow::Result<i32> {
    paths.ensure_data_dir()?;
    let conn = crate::store::open_writer(&paths.db_path())?;
    let row = db::flow_by_name(&conn, name)?.with_context(|| format!("there is no automation \"{name}\" (cowork automations list)"))?;
    let flow = row.flow.map_err(|err| anyhow::anyhow!("the automation \"{name}\" does not read: {err}"))?;
    flow.check_inputs(&data).map_err(|err| anyhow::anyhow!("the inputs do not fit: {err}"))?;
    let lock = take_lock(&paths.data_dir)?;
    if lock.is_none() {
        // The sidebar executes automations: queue the run for it.
        let scope = crate::automations::flow::Scope { trigger: data, trigger_origin: Origin::User, ..Default::default() };
        let run_id = next_id();
        let new = db::NewRun { run_id, automation_id: row.automation_id, flow: &flow, trigger_kind: "manual", scope: &scope, event_key: None, next_fire: None, rerun_of: None, now_millis: now_millis() };
        db::queue_run(&conn, &new)?;
        println!("queued as run {run_id}: the running cowork starts it (cowork automations history {name})");
        return Ok(0);
    }
    drop(lock);
    drop(conn);
    let workers = headless(paths, true)?;
    let outcome = run_with(&workers, paths, name, data, wait, keep_waiting);
    workers.shutdown(Duration::from_secs(5));
    outcome
}

/// The workers without the window (nobody reads their events, so the sink
/// drops them at once): the agent, and with `automations` the executor.
pub(crate) fn headless(paths: &Paths, automations: bool) -> anyhow::Result<crate::workers::Workers> {
    let manifest = crate::models::Manifest::bundled()?;
    let sink = crate::runtime::EventSink::ignored();
    let options = crate::workers::WorkerOptions {
        capture: false,
        display: None,
        chat_model: crate::workers::chat_model(&manifest, paths),
        policy: crate::runtime::RestartPolicy { max_restarts: 0, ..Default::default() },
        require_consent: false,
        automations,
    };
    Ok(crate::workers::Workers::start(paths, options, sink)?.0)
}

fn run_with(workers: &crate::workers::Workers, paths: &Paths, name: &str, data: Value, wait: Duration, keep_waiting: bool) -> anyhow::Result<i32> {
    let automations = workers.automations.as_ref().context("the automations worker did not start")?;
    let (reply, result) = crossbeam_channel::bounded(1);
    automations.commands.send(crate::automations::AutomationsCommand::Run { name: name.to_owned(), data, origin: Origin::User, reply: Some(reply) })?;
    let run_id = result.recv_timeout(Duration::from_secs(30)).context("the automations worker did not answer")?.map_err(|err| anyhow::anyhow!(err))?;
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let started = Instant::now();
    let mut printed = 0;
    let mut told = false;
    loop {
        let run = db::run(&conn, run_id)?.context("the run disappeared")?;
        let steps = db::steps(&conn, run_id)?;
        for step in steps.iter().filter(|s| !matches!(s.status.as_str(), "running" | "waiting_delay" | "waiting_approval")).skip(printed) {
            print_step(step);
            printed += 1;
        }
        match run.status {
            RunStatus::WaitingApproval if !told => {
                let op = run.operation_id.unwrap_or_default();
                let call: Option<i64> = conn.query_row("SELECT call_id FROM operation_calls WHERE operation_id = ?1 AND status = 'waiting'", [op], |r| r.get(0)).ok();
                println!("run {run_id} waits for your approval{}", call.map(|c| format!(": Accept on its notification, or cowork approve {c}")).unwrap_or_default());
                if !keep_waiting {
                    return Ok(3);
                }
                told = true;
            }
            status if !status.is_open() => {
                println!("run {run_id}: {}{}", status.as_str(), run.error.map(|e| format!(" ({e})")).unwrap_or_default());
                if let Some(output) = run.output {
                    println!("{output}");
                }
                return Ok(if status == RunStatus::Done { 0 } else { 1 });
            }
            _ => {}
        }
        if started.elapsed() > wait {
            println!("run {run_id} is still {} after {} s; it goes on when cowork runs again (cowork automations history {name})", run.status.as_str(), wait.as_secs());
            return Ok(0);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn print_step(step: &db::StepRow) {
    let took = step.finished_at_millis.map(|f| crate::ids::format_duration_millis(f - step.started_at_millis)).unwrap_or_default();
    let output = step.output.as_ref().map(|o| o.to_string()).unwrap_or_default();
    let output: String = output.chars().take(300).collect();
    let error = step.error.as_deref().map(|e| format!(" error: {e}")).unwrap_or_default();
    let decision = step.decision.as_deref().map(|d| format!(" [{d}]")).unwrap_or_default();
    println!("  {} ({}) {} {took}{decision}{error}\n    {output}", step.step_id, step.kind, step.status);
}

/// `cowork automations history NAME`: its newest runs, each with its steps.
pub fn history(paths: &Paths, name: &str, limit: usize) -> anyhow::Result<()> {
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let row = db::flow_by_name(&conn, name)?.with_context(|| format!("there is no automation \"{name}\""))?;
    let now = now_millis();
    for run in db::recent_runs(&conn, Some(row.automation_id), limit)? {
        let rerun = run.rerun_of.map(|r| format!(", again from run {r}")).unwrap_or_default();
        println!("run {} ({}{rerun}) {} {}{}", run.run_id, run.trigger_kind, run.status.as_str(), format_when(run.created_at_millis, now), run.error.map(|e| format!(": {e}")).unwrap_or_default());
        for step in db::steps(&conn, run.run_id)? {
            print_step(&step);
        }
    }
    Ok(())
}

/// `cowork automations export [NAME]`: flows as JSON (`{"flows": […]}`), to import elsewhere.
pub fn export(paths: &Paths, name: Option<&str>, output: Option<&Path>) -> anyhow::Result<()> {
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let mut flows = Vec::new();
    for row in db::flows(&conn)?.into_iter().filter(|r| name.is_none_or(|n| r.name == n)) {
        flows.push(serde_json::to_value(row.flow.map_err(|err| anyhow::anyhow!("{}: {err}", row.name))?)?);
    }
    if let Some(name) = name
        && flows.is_empty()
    {
        bail!("there is no automation \"{name}\"");
    }
    let text = serde_json::to_string_pretty(&json!({"flows": flows}))?;
    match output {
        Some(path) => {
            std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("{} flows written (plain JSON) to {}", flows.len(), path.display());
        }
        None => println!("{text}"),
    }
    Ok(())
}

/// The flows of an export: `{"flows": […]}`, a list, or one flow.
pub fn read_flows(text: &str) -> Result<Vec<Flow>, String> {
    let value: Value = serde_json::from_str(text).map_err(|err| format!("not JSON: {err}"))?;
    let items = match value {
        Value::Object(ref map) if map.contains_key("flows") => map["flows"].as_array().cloned().ok_or("\"flows\" is not a list")?,
        Value::Array(items) => items,
        one => vec![one],
    };
    items.iter().map(|item| Flow::from_json(&item.to_string())).collect()
}

/// `cowork automations import FILE`: every flow checked first; none is saved unless all are valid.
pub fn import(paths: &Paths, file: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let flows = read_flows(&text).map_err(|err| anyhow::anyhow!("{}: {err}", file.display()))?;
    let mut problems = Vec::new();
    for flow in &flows {
        if let Err(found) = flow.validate(&BuiltIn) {
            problems.extend(found.into_iter().map(|p| format!("{}: {p}", flow.name)));
        }
    }
    if !problems.is_empty() {
        bail!("nothing was imported:\n{}", problems.join("\n"));
    }
    paths.ensure_data_dir()?;
    let conn = crate::store::open_writer(&paths.db_path())?;
    for flow in &flows {
        db::save_flow(&conn, flow, now_millis())?;
        let when = match &flow.trigger {
            Trigger::Schedule { schedule } => Schedule::parse(schedule).ok().and_then(|s| s.next_after(now_millis())).map(|at| format!(", first at {}", format_when(at, now_millis()))).unwrap_or_default(),
            _ => String::new(),
        };
        println!("imported {} ({}{when})", flow.name, flow.trigger.describe());
    }
    Ok(())
}

/// `cowork automations remove NAME`, with its history.
pub fn remove(paths: &Paths, name: &str) -> anyhow::Result<()> {
    let conn = crate::store::open_writer(&paths.db_path())?;
    if !db::delete_flow(&conn, name)? {
        bail!("there is no automation \"{name}\"");
    }
    println!("removed {name} and its history");
    Ok(())
}

/// `cowork automations enable|disable NAME`.
pub fn set_enabled(paths: &Paths, name: &str, enabled: bool) -> anyhow::Result<()> {
    let conn = crate::store::open_writer(&paths.db_path())?;
    if !db::set_enabled(&conn, name, enabled)? {
        bail!("there is no automation \"{name}\"");
    }
    // The stamp the sidebar watches moves with it.
    conn.execute("UPDATE automations SET updated_at_ms = ?2 WHERE name = ?1", rusqlite::params![name, now_millis()])?;
    println!("{name} is {}", if enabled { "on" } else { "off" });
    Ok(())
}

/// `cowork automations describe "words"`: the agent drafts a flow (checked
/// before it is printed); `--save` saves it.
pub fn describe(paths: &Paths, description: &str, save: bool) -> anyhow::Result<()> {
    let workers = headless(paths, false)?;
    let (reply, drafted) = crossbeam_channel::bounded(1);
    let sent = workers.agent.commands.send(crate::agent::AgentCommand::DraftFlow { description: description.to_owned(), reply: Some(reply) });
    let draft = sent.map_err(|_| "the agent did not start".to_owned()).and_then(|()| drafted.recv_timeout(Duration::from_secs(600)).map_err(|_| "the agent did not answer in 10 minutes".to_owned()).and_then(|d| d));
    workers.shutdown(Duration::from_secs(5));
    let json = draft.map_err(|err| anyhow::anyhow!(err))?;
    println!("{json}");
    if save {
        let flow = Flow::from_json(&json).map_err(|err| anyhow::anyhow!(err))?;
        let conn = crate::store::open_writer(&paths.db_path())?;
        db::save_flow(&conn, &flow, now_millis())?;
        eprintln!("saved {} ({})", flow.name, flow.trigger.describe());
    }
    Ok(())
}
