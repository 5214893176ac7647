//! The `automations` worker: the durable executor. It reads cowork.db on a
//! read-only connection of its own and writes the automation tables through the
//! store's one writer (`StoreLink::call`). Runs, delays and parked approvals
//! are rows with a wake time, never sleeping threads: the loop sleeps until the
//! earliest wake time (at most `MAX_SLEEP`, 15 s, so a suspend is noticed soon
//! after it ends) and asks the database what is due by the wall clock.
//!
//! - A trigger first applies the flow's run mode (single skips, queued waits,
//!   restart cancels the running one, parallel up to a limit), then
//!   `store::queue_run` claims the event (`INSERT OR IGNORE` on
//!   `automation_claims`: a focus session, a return, a scheduled time, a day's
//!   first activity) and queues the run in one transaction, so an event seen
//!   twice runs once.
//! - Conditions, delays and notifications run here; a delay is `waiting_delay`
//!   with a wake time; a notification is recorded before it is sent, so a crash
//!   never sends it twice. Notifications go to the notify worker
//!   (`NotifyClient`), which gates them.
//! - Tool and agent steps go to the agent through `StepRunner`
//!   (`agent::AgentSteps` in the app: `AgentCommand::AutomationStep`): the step
//!   is recorded with a new operation id and a timeout first, then sent; the
//!   agent's `StepReport` (done, failed, parked; bounded(64)), or after a
//!   restart the operation's own row, settles it. The agent decides every call
//!   with its approval policy.
//! - Only one process per data directory executes automations: the worker holds
//!   `automations.lock` (flock); another process (a second `cowork automations
//!   run` beside the sidebar) only queues runs, and the holder starts them.
//! - It also watches over time (`watch`): an approval waiting too long, a long
//!   stretch in one app and many app switches (from capture's focus signals,
//!   `Signal::Focus`, kept in memory), each claimed once per call, stretch or
//!   window; the built-in suggestions are flows added once (`automation_meta`).
//!   Servers' notifications come from the mcp worker as `Signal::Mcp`.
//! - It publishes `AutomationsView` (the flows and the newest runs with their
//!   steps) when something changed.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded, select};
use rusqlite::Connection;
use serde_json::{Value, json};

use super::events::AutomationsView;
use super::flow::{self, Flow, RunMode, Scope, StepKind, Trigger};
use super::schedule::Schedule;
use super::steps::{Clock, Notice, NoticeAction, Notifier, StepOutcome, StepReport, StepRequest, StepRunner, StepWork};
use super::store::{self as db, FlowRow, NewRun, RunRow, RunStatus, StepRow};
use crate::ids::next_id;
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, spawn_supervised};
use crate::tools::Origin;

/// The longest the loop sleeps: after a suspend, due work starts at most this late.
const MAX_SLEEP: Duration = Duration::from_secs(15);
/// A parked approval is looked at again this long after it should have
/// expired, in case the agent's word on it was lost.
const EXPIRY_GRACE_MILLIS: i64 = 60_000;

#[derive(Debug)]
pub enum AutomationsCommand {
    /// Validate and save (a new flow or a new version of one).
    Save { flow: Box<Flow>, reply: Option<Sender<Result<i64, Vec<String>>>> },
    Delete { name: String, reply: Option<Sender<Result<(), String>>> },
    SetEnabled { name: String, enabled: bool },
    /// Run now with this trigger data (a manual run, the command line, the agent).
    Run { name: String, data: Value, origin: Origin, reply: Option<Sender<Result<i64, String>>> },
    /// Run again with the same trigger data as an earlier run.
    Rerun { run_id: i64, reply: Option<Sender<Result<i64, String>>> },
    Cancel { run_id: i64 },
    /// Something happened that a trigger may wait for.
    Signal(Signal),
    Shutdown,
}

/// Events triggers listen for, from capture and the mcp worker.
#[derive(Clone, Debug, PartialEq)]
pub enum Signal {
    /// A window the firewall allowed gained focus (`session_id`: its session, the event's key).
    Focus { app: String, title: String, url: Option<String>, session_id: i64, at_millis: i64 },
    /// The user came back after `away_millis`.
    Back { away_millis: i64, at_millis: i64 },
    /// The user went away (no input for the AFK threshold, a locked screen) since `since_millis`.
    Away { since_millis: i64, at_millis: i64 },
    /// An MCP server's notification.
    Mcp { server: String, event: flow::McpEvent, uri: Option<String>, at_millis: i64 },
    /// A call started (cowork offered to listen) or ended (`listened`: the user let cowork listen).
    Meeting { event: flow::MeetingEvent, service: String, title: String, started_millis: i64, ended_millis: Option<i64>, listened: bool },
}

#[derive(Clone, Debug)]
pub struct AutomationsConfig {
    /// Writes go to the store's one writer; reads use a read-only connection of this worker's.
    pub store: crate::store::StoreLink,
}

pub struct AutomationsWorker {
    config: AutomationsConfig,
    conn: Option<Connection>,
    clock: Arc<dyn Clock>,
    runner: Box<dyn StepRunner>,
    notifier: Box<dyn Notifier>,
    reports: Receiver<StepReport>,
    sink: EventSink<AutomationsView>,
    /// The flows as stored, read again after every change.
    flows: Vec<FlowRow>,
    /// What the flows looked like when read (count, newest change, how many on):
    /// `cowork automations import` in another process changes it.
    flows_stamp: (i64, i64, i64),
    /// The lock that makes this process the one that executes automations
    /// (None: another cowork on this data directory does; this one only queues).
    owner: Option<std::fs::File>,
    /// Something the Apps panel shows changed since it was last told.
    changed: bool,
    /// Focus changes (app, when), newest last, for "context switches".
    focus_log: std::collections::VecDeque<(String, i64)>,
    /// The app in focus and since when without a break (none: nothing yet, or away).
    stretch: Option<(String, i64)>,
    /// Since when the user has been away (None: here), for "the end of the day".
    away_since: Option<i64>,
    /// The time triggers' events already started (flow, key): asked once, not every tick.
    watched: std::collections::HashSet<(i64, String)>,
}

/// Focus changes remembered for "context switches".
const FOCUS_LOG: usize = 256;

/// Runs the Apps panel lists.
const RUNS_SHOWN: usize = 20;
/// Characters of a step's output the panel shows.
const OUTPUT_SHOWN: usize = 300;

/// The file whose lock makes one process per data directory the executor.
pub const LOCK_FILE: &str = "automations.lock";

/// Takes the executor's lock, or says that another process holds it.
pub fn take_lock(data_dir: &std::path::Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(data_dir.join(LOCK_FILE))?;
    // SAFETY: flock on a descriptor this function owns; released when the file closes.
    let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    Ok(taken.then_some(file))
}

/// What a trigger hands a new run.
struct Start<'a> {
    kind: &'a str,
    data: Value,
    origin: Origin,
    event_key: Option<String>,
    next_fire: Option<Option<i64>>,
    rerun_of: Option<i64>,
}

impl AutomationsWorker {
    pub fn new(config: AutomationsConfig, clock: Arc<dyn Clock>, runner: Box<dyn StepRunner>, notifier: Box<dyn Notifier>, reports: Receiver<StepReport>, sink: EventSink<AutomationsView>) -> Self {
        Self { config, conn: None, clock, runner, notifier, reports, sink, flows: Vec::new(), flows_stamp: (0, 0, 0), owner: None, changed: true, focus_log: Default::default(), stretch: None, away_since: None, watched: Default::default() }
    }

    fn now(&self) -> i64 {
        self.clock.now_millis()
    }

    /// The read-only connection.
    fn conn(&self) -> anyhow::Result<&Connection> {
        self.conn.as_ref().ok_or_else(|| anyhow::anyhow!("the automations worker has no database"))
    }

    fn save_run(&self, run: &RunRow) -> anyhow::Result<()> {
        let run = run.clone();
        self.config.store.write("automation run", move |conn| db::save_run(conn, &run))
    }

    fn save_step(&self, step: &StepRow) -> anyhow::Result<()> {
        let step = step.clone();
        self.config.store.write("automation step", move |conn| db::save_step(conn, &step))
    }

    fn save_run_and_step(&self, run: &RunRow, step: &StepRow) -> anyhow::Result<()> {
        let (run, step) = (run.clone(), step.clone());
        self.config.store.write("automation run and step", move |conn| db::save_run_and_step(conn, &run, &step))
    }

    /// Opens the database and reads the flows; open runs resume.
    pub fn open(&mut self) -> anyhow::Result<()> {
        self.conn = Some(self.config.store.read_only()?);
        self.reload()?;
        self.take_ownership()
    }

    /// Becomes the executor if no other process is; open runs resume then.
    fn take_ownership(&mut self) -> anyhow::Result<()> {
        if self.owner.is_some() {
            return Ok(());
        }
        let dir = self.config.store.path().parent().unwrap_or(std::path::Path::new("."));
        self.owner = take_lock(dir)?;
        if self.owner.is_some() {
            let now = self.now();
            let added = self.config.store.write("seed built-in flows", move |conn| db::seed_builtins(conn, now))?;
            if added > 0 {
                self.reload()?;
            }
            self.resume()?;
        } else {
            tracing::info!("another cowork runs the automations of this data directory: this one only queues runs");
        }
        Ok(())
    }

    /// Whether this process executes runs (else it only queues them).
    pub fn is_owner(&self) -> bool {
        self.owner.is_some()
    }

    fn stamp(&self) -> anyhow::Result<(i64, i64, i64)> {
        Ok(self.conn()?.query_row("SELECT count(*), coalesce(max(updated_at_ms), 0), coalesce(sum(enabled), 0) FROM automations", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?)
    }

    fn reload(&mut self) -> anyhow::Result<()> {
        self.changed = true;
        self.flows_stamp = self.stamp()?;
        self.flows = db::flows(self.conn()?)?;
        for row in &self.flows {
            if let Err(err) = &row.flow {
                tracing::warn!(flow = %row.name, %err, "a stored flow no longer reads");
            }
        }
        Ok(())
    }

    /// After a start: a step that was running when cowork stopped is settled
    /// from its operation if that ended, else it waits for the agent's word
    /// (bounded by its timeout). A notification that may have been shown is
    /// not shown again.
    fn resume(&mut self) -> anyhow::Result<()> {
        let open = db::open_runs(self.conn()?)?;
        for mut run in open {
            if run.status != RunStatus::Running {
                continue;
            }
            let Some(step) = run.flow.steps.get(run.step_index).cloned() else { continue };
            match step.kind {
                StepKind::Tool { .. } | StepKind::Agent { .. } => {
                    let started = match run.operation_id {
                        Some(op) => operation_exists(self.conn()?, op)?,
                        None => false,
                    };
                    if started {
                        // Ended: settled now. Still open: the agent's word (or the timeout) settles it.
                        self.settle_from_operation(run.run_id)?;
                    } else {
                        // The agent never started it (nothing ran): hand it over again, with the same id.
                        self.advance(run.run_id)?;
                    }
                }
                StepKind::Notify { .. } => {
                    let now = self.now();
                    let mut row = self.step_row(&run, "done");
                    row.output = Some(json!({"delivered": "unknown"}));
                    row.error = Some("cowork stopped while this notification was being sent: it may have been shown".into());
                    row.finished_at_millis = Some(now);
                    run.scope.steps.insert(step.id.clone(), json!({"notification_id": null, "delivered": false}));
                    run.scope.step_origins.insert(step.id.clone(), Origin::Instructions);
                    self.next_step(&mut run, &step, None);
                    self.save_run_and_step(&run, &row)?;
                    self.advance(run.run_id)?;
                }
                _ => self.advance(run.run_id)?,
            }
        }
        Ok(())
    }

    /// Does everything due at the wall clock's now; returns how long to sleep.
    pub fn tick(&mut self) -> anyhow::Result<Duration> {
        if self.stamp()? != self.flows_stamp {
            self.reload()?;
        }
        self.take_ownership()?;
        if !self.is_owner() {
            return Ok(MAX_SLEEP);
        }
        let now = self.now();
        let mut wake = now + MAX_SLEEP.as_millis() as i64;
        // Scheduled flows.
        let scheduled: Vec<(i64, String, Schedule)> = self
            .flows
            .iter()
            .filter(|r| r.enabled)
            .filter_map(|r| match &r.flow {
                Ok(Flow { trigger: Trigger::Schedule { schedule }, .. }) => Schedule::parse(schedule).ok().map(|s| (r.automation_id, r.name.clone(), s)),
                _ => None,
            })
            .collect();
        for (id, name, schedule) in scheduled {
            let state = db::scheduler(self.conn()?, id)?;
            let Some(next) = state.next_fire_at_millis else {
                // Newly saved or switched on: the first time after now.
                let first = schedule.next_after(now);
                self.config.store.write("next fire", move |conn| db::set_next_fire(conn, id, first))?;
                if let Some(at) = schedule.next_after(now) {
                    wake = wake.min(at);
                }
                continue;
            };
            match schedule.due(next, now) {
                Some(due) => {
                    if due.missed > 0 {
                        tracing::info!(flow = %name, missed = due.missed, "scheduled times passed while cowork was stopped or the machine slept: one catch-up run");
                    }
                    let data = json!({"scheduled_for": crate::ids::rfc3339(due.fire_at_millis), "missed": due.missed});
                    let start = Start { kind: "schedule", data, origin: Origin::Instructions, event_key: Some(format!("schedule:{}", due.fire_at_millis)), next_fire: Some(due.next_millis), rerun_of: None };
                    self.trigger(id, start)?;
                    if let Some(at) = due.next_millis {
                        wake = wake.min(at);
                    }
                }
                None => wake = wake.min(next),
            }
        }
        if let Some(at) = self.watch(now)? {
            wake = wake.min(at);
        }
        // Runs: queued ones whose turn it is, and ones whose wake time came.
        self.start_queued()?;
        for run in db::open_runs(self.conn()?)? {
            // An approval may have been given in another process (`cowork approve`): its operation says so.
            if run.status == RunStatus::WaitingApproval && self.settle_from_operation(run.run_id)? {
                continue;
            }
            let Some(at) = run.wake_at_millis else { continue };
            if at > now {
                wake = wake.min(at);
                continue;
            }
            match run.status {
                RunStatus::WaitingDelay => self.advance(run.run_id)?,
                RunStatus::Running | RunStatus::WaitingApproval => self.overdue(run)?,
                _ => {}
            }
        }
        Ok(Duration::from_millis((wake - self.now()).clamp(0, MAX_SLEEP.as_millis() as i64) as u64))
    }

    /// The triggers that watch over time: approvals waiting, a long stretch
    /// in one app, many switches. Returns when one may come due next.
    fn watch(&mut self, now: i64) -> anyhow::Result<Option<i64>> {
        let mut next: Option<i64> = None;
        // The database's claim stays the guard across restarts; this only spares it the asking.
        if self.watched.len() > 4_096 {
            self.watched.clear();
        }
        let flows: Vec<(i64, Trigger)> = self.flows.iter().filter(|r| r.enabled).filter_map(|r| r.flow.as_ref().ok().map(|f| (r.automation_id, f.trigger.clone()))).collect();
        for (id, trigger) in flows {
            match trigger {
                Trigger::ApprovalWaiting { minutes } => {
                    let waited = minutes as i64 * 60_000;
                    for (call_id, tool, why, since) in db::waiting_calls(self.conn()?, now - waited)? {
                        let data = json!({"tool": tool, "call_id": call_id, "waited_minutes": (now - since) / 60_000, "why": why});
                        self.trigger(id, Start { kind: "approval_waiting", data, origin: Origin::ToolResult, event_key: Some(format!("approval_waiting:{call_id}")), next_fire: None, rerun_of: None })?;
                    }
                }
                Trigger::FocusStretch { minutes } => {
                    let Some((app, since)) = self.stretch.clone() else { continue };
                    let due = since + minutes as i64 * 60_000;
                    if now >= due {
                        let data = json!({"app": app, "minutes": (now - since) / 60_000});
                        self.trigger(id, Start { kind: "focus_stretch", data, origin: Origin::Capture, event_key: Some(format!("stretch:{since}")), next_fire: None, rerun_of: None })?;
                    } else {
                        next = Some(next.map_or(due, |n: i64| n.min(due)));
                    }
                }
                Trigger::ContextSwitches { count, minutes } => {
                    let window = minutes as i64 * 60_000;
                    let recent: Vec<&(String, i64)> = self.focus_log.iter().filter(|(_, at)| *at > now - window).collect();
                    if recent.len() >= count as usize {
                        let mut apps: Vec<&str> = recent.iter().map(|(app, _)| app.as_str()).collect();
                        apps.sort_unstable();
                        apps.dedup();
                        let data = json!({"switches": recent.len(), "minutes": minutes, "apps": apps});
                        // One per window: the count has to build up again before the next.
                        self.trigger(id, Start { kind: "context_switches", data, origin: Origin::Capture, event_key: Some(format!("switches:{}", now / window)), next_fire: None, rerun_of: None })?;
                    }
                }
                Trigger::DayEnd { after_hour, away_minutes } => {
                    let Some(since) = self.away_since else { continue };
                    // Away from before the hour counts from the hour: gone at 15:55 ends the day at 16:20.
                    let day = crate::ids::local_day_start_millis(now);
                    let from = since.max(day + after_hour as i64 * 3_600_000);
                    let due = from + away_minutes as i64 * 60_000;
                    if now < due {
                        next = Some(next.map_or(due, |n: i64| n.min(due)));
                        continue;
                    }
                    let key = format!("day_end:{day}");
                    if self.watched.insert((id, key.clone())) {
                        let data = json!({"away_since": crate::ids::rfc3339(since), "away_minutes": (now - since) / 60_000, "date": crate::ids::local_date(now)});
                        self.trigger(id, Start { kind: "day_end", data, origin: Origin::Capture, event_key: Some(key), next_fire: None, rerun_of: None })?;
                    }
                }
                Trigger::Calendar { minutes_before, title } => {
                    let lead = minutes_before as i64 * 60_000;
                    let pattern = title.as_deref().and_then(|p| regex::RegexBuilder::new(p).case_insensitive(true).size_limit(1 << 20).build().ok());
                    // Events not yet begun whose lead time has come; a later one says when to wake.
                    for event in crate::calendar::db::between(self.conn()?, now, now + lead + MAX_SLEEP.as_millis() as i64)? {
                        if event.all_day || event.start_millis <= now || pattern.as_ref().is_some_and(|p| !p.is_match(&event.title)) {
                            continue;
                        }
                        let due = event.start_millis - lead;
                        if now < due {
                            next = Some(next.map_or(due, |n: i64| n.min(due)));
                            continue;
                        }
                        let data = json!({
                            "title": event.title,
                            "start": crate::ids::rfc3339(event.start_millis),
                            "end": crate::ids::rfc3339(event.end_millis),
                            "start_ms": event.start_millis,
                            "end_ms": event.end_millis,
                            "minutes": (event.start_millis - now + 59_999) / 60_000,
                            "location": event.location,
                            "attendees": event.attendees.join(", "),
                            "join_url": event.join_url,
                        });
                        let key = format!("calendar:{}:{}:{minutes_before}", event.uid, event.start_millis);
                        if self.watched.insert((id, key.clone())) {
                            self.trigger(id, Start { kind: "calendar", data, origin: Origin::ToolResult, event_key: Some(key), next_fire: None, rerun_of: None })?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(next)
    }

    /// A trigger fired for a flow: the run mode decides, then the event is
    /// claimed and the run queued in one transaction.
    fn trigger(&mut self, automation_id: i64, start: Start<'_>) -> anyhow::Result<Option<i64>> {
        let Some(row) = self.flows.iter().find(|r| r.automation_id == automation_id).cloned() else { return Ok(None) };
        let flow = row.flow.map_err(|err| anyhow::anyhow!("the flow {} does not read: {err}", row.name))?;
        let active = db::active_runs(self.conn()?, automation_id)?;
        let skip = match flow.mode {
            RunMode::Single => active > 0,
            RunMode::Parallel { limit } => active >= limit as usize,
            RunMode::Queued | RunMode::Restart => false,
        };
        if skip {
            tracing::info!(flow = %flow.name, active, "the flow is still running: this start is skipped");
            let next_fire = start.next_fire;
            self.config.store.write("skipped start", move |conn| {
                if let Some(next) = next_fire {
                    db::set_next_fire(conn, automation_id, next)?;
                }
                db::count_skip(conn, automation_id)
            })?;
            return Ok(None);
        }
        if flow.mode == RunMode::Restart {
            for run in db::open_runs(self.conn()?)?.into_iter().filter(|r| r.automation_id == automation_id) {
                self.end_run(run, RunStatus::Cancelled, Some("a new run of this flow replaced it".into()))?;
            }
        }
        let scope = Scope { trigger: start.data, trigger_origin: start.origin, ..Scope::default() };
        let run_id = next_id();
        let (trigger_kind, event_key, next_fire, rerun_of, now_millis) = (start.kind.to_owned(), start.event_key.clone(), start.next_fire, start.rerun_of, self.now());
        let queued_flow = flow.clone();
        self.changed = true;
        let queued = self.config.store.write("queue automation run", move |conn| {
            let new = NewRun { run_id, automation_id, flow: &queued_flow, trigger_kind: &trigger_kind, scope: &scope, event_key: event_key.as_deref(), next_fire, rerun_of, now_millis };
            db::queue_run(conn, &new)
        })?;
        if !queued {
            tracing::info!(flow = %flow.name, key = ?start.event_key, "this event was claimed before: no second run");
            return Ok(None);
        }
        self.start_queued()?;
        Ok(Some(run_id))
    }

    /// Starts queued runs: a queued-mode flow's oldest when none of its runs is active, any other at once.
    fn start_queued(&mut self) -> anyhow::Result<()> {
        if !self.is_owner() {
            return Ok(());
        }
        let open = db::open_runs(self.conn()?)?;
        let mut started: Vec<i64> = Vec::new();
        for run in open.iter().filter(|r| r.status == RunStatus::Queued) {
            if run.flow.mode == RunMode::Queued {
                let busy = open.iter().any(|r| r.automation_id == run.automation_id && r.status.is_active()) || started.contains(&run.automation_id);
                if busy {
                    continue;
                }
            }
            started.push(run.automation_id);
            let mut run = run.clone();
            run.status = RunStatus::Running;
            run.started_at_millis = Some(self.now());
            self.save_run(&run)?;
            self.advance(run.run_id)?;
        }
        Ok(())
    }

    fn step_row(&self, run: &RunRow, status: &str) -> StepRow {
        let step = &run.flow.steps[run.step_index];
        StepRow {
            run_id: run.run_id,
            seq: run.step_index as u32,
            step_id: step.id.clone(),
            kind: step.kind_name().into(),
            input: None,
            output: None,
            status: status.into(),
            decision: None,
            error: None,
            operation_id: run.operation_id,
            started_at_millis: self.now(),
            finished_at_millis: None,
        }
    }

    /// Moves the run past a finished step: to the next, to a condition's
    /// target, or to the end (`end` set on the step).
    fn next_step(&self, run: &mut RunRow, step: &flow::Step, goto: Option<&str>) {
        run.operation_id = None;
        run.wake_at_millis = None;
        run.status = RunStatus::Running;
        match goto {
            Some(flow::END) => run.step_index = run.flow.steps.len(),
            Some(id) if id != flow::NEXT => run.step_index = run.flow.steps.iter().position(|s| s.id == id).unwrap_or(run.flow.steps.len()),
            _ if step.end => run.step_index = run.flow.steps.len(),
            _ => run.step_index += 1,
        }
    }

    /// Takes the run's steps until one has to wait (a delay, the agent) or the run ends.
    fn advance(&mut self, run_id: i64) -> anyhow::Result<()> {
        self.changed = true;
        loop {
            let Some(mut run) = db::run(self.conn()?, run_id)? else { return Ok(()) };
            if !run.status.is_active() {
                return Ok(());
            }
            let now = self.now();
            let Some(step) = run.flow.steps.get(run.step_index).cloned() else {
                let output = run.flow.steps.iter().rev().find_map(|s| run.scope.steps.get(&s.id)).map(Value::to_string);
                run.output = output;
                return self.end_run(run, RunStatus::Done, None);
            };
            match &step.kind {
                StepKind::Condition { left, op, right, then_go, else_go } => {
                    let (left, _) = run.scope.fill(left);
                    let (right, _) = run.scope.fill(right);
                    let mut row = self.step_row(&run, "done");
                    row.input = Some(json!({"left": left, "op": op, "right": right}));
                    row.started_at_millis = now;
                    row.finished_at_millis = Some(now);
                    match flow::compare(&left, *op, &right) {
                        Ok(result) => {
                            row.output = Some(json!({"result": result}));
                            row.decision = Some(if result { format!("then: {then_go}") } else { format!("else: {else_go}") });
                            run.scope.steps.insert(step.id.clone(), json!({"result": result}));
                            run.scope.step_origins.insert(step.id.clone(), Origin::Instructions);
                            let target = if result { then_go.clone() } else { else_go.clone() };
                            self.next_step(&mut run, &step, Some(&target));
                            self.save_run_and_step(&run, &row)?;
                        }
                        Err(err) => {
                            row.status = "failed".into();
                            row.error = Some(err.clone());
                            self.save_step(&row)?;
                            return self.end_run(run, RunStatus::Failed, Some(format!("step \"{}\": {err}", step.id)));
                        }
                    }
                }
                StepKind::Delay { seconds } => {
                    match (run.status, run.wake_at_millis) {
                        (RunStatus::WaitingDelay, Some(at)) if at <= now => {
                            let mut row = self.step_row(&run, "done");
                            row.started_at_millis = at - *seconds as i64 * 1000;
                            row.output = Some(json!({"waited_seconds": (now - row.started_at_millis) / 1000}));
                            row.finished_at_millis = Some(now);
                            run.scope.steps.insert(step.id.clone(), json!({"waited_seconds": (now - row.started_at_millis) / 1000}));
                            run.scope.step_origins.insert(step.id.clone(), Origin::Instructions);
                            self.next_step(&mut run, &step, None);
                            self.save_run_and_step(&run, &row)?;
                        }
                        (RunStatus::WaitingDelay, Some(_)) => return Ok(()),
                        _ => {
                            // The delay is a row with a wake time: a restart or a suspend keeps it.
                            run.status = RunStatus::WaitingDelay;
                            run.wake_at_millis = Some(now + *seconds as i64 * 1000);
                            let mut row = self.step_row(&run, "waiting_delay");
                            row.input = Some(json!({"seconds": seconds, "until": crate::ids::rfc3339(now + *seconds as i64 * 1000)}));
                            self.save_run_and_step(&run, &row)?;
                            return Ok(());
                        }
                    }
                }
                StepKind::Notify { title, body, tier, task } => {
                    let (title, _) = run.scope.fill(title);
                    let (body, _) = run.scope.fill(body);
                    let mut row = self.step_row(&run, "running");
                    row.input = Some(json!({"title": title, "body": body, "tier": tier, "task": task}));
                    // Recorded before it is sent: after a crash it is not sent twice.
                    self.save_step(&row)?;
                    let why = format!("Why: your automation \"{}\" ({})", run.flow.name, run.flow.trigger.describe());
                    let action = if task.trim().is_empty() { NoticeAction::None } else { NoticeAction::Task { prompt: task.trim().to_owned() } };
                    let notice = Notice { source: format!("flow:{}", run.flow.name), tier: *tier, title, body, action, why };
                    let (data, error) = match self.notifier.post(notice) {
                        Ok(id) => (json!({"notification_id": id, "delivered": true}), None),
                        Err(err) => (json!({"notification_id": null, "delivered": false}), Some(err)),
                    };
                    row.status = "done".into();
                    row.output = Some(data.clone());
                    row.error = error;
                    row.finished_at_millis = Some(self.now());
                    run.scope.steps.insert(step.id.clone(), data);
                    run.scope.step_origins.insert(step.id.clone(), Origin::Instructions);
                    self.next_step(&mut run, &step, None);
                    self.save_run_and_step(&run, &row)?;
                }
                StepKind::Tool { tool, args } => {
                    let mut origins = Vec::new();
                    let args = run.scope.fill_value(args, &mut origins);
                    let work = StepWork::Tool { tool: tool.clone(), args: args.clone() };
                    return self.hand_over(run, &step, work, json!({"tool": tool, "args": args}), origins);
                }
                StepKind::Agent { prompt, tools, tier } => {
                    let (prompt, origins) = run.scope.fill(prompt);
                    let work = StepWork::Agent { prompt: prompt.clone(), tools: tools.clone(), tier: *tier };
                    return self.hand_over(run, &step, work, json!({"prompt": prompt, "tools": tools, "tier": tier}), origins);
                }
            }
        }
    }

    /// A tool or agent step goes to the agent: recorded first (with the
    /// operation's id and a timeout), then sent.
    fn hand_over(&mut self, mut run: RunRow, step: &flow::Step, work: StepWork, input: Value, origins: Vec<Origin>) -> anyhow::Result<()> {
        // Handed over again after a restart, a step keeps its operation's id: the agent starts an id once.
        let operation_id = run.operation_id.unwrap_or_else(next_id);
        run.operation_id = Some(operation_id);
        run.wake_at_millis = Some(self.now() + step.timeout_millis());
        let mut row = self.step_row(&run, "running");
        row.input = Some(input);
        self.save_run_and_step(&run, &row)?;
        let request = StepRequest { run_id: run.run_id, seq: run.step_index as u32, operation_id, flow: run.flow.name.clone(), step_id: step.id.clone(), work, origins };
        if let Err(err) = self.runner.start(request) {
            row.status = "failed".into();
            row.error = Some(err.clone());
            row.finished_at_millis = Some(self.now());
            self.save_step(&row)?;
            return self.end_run(run, RunStatus::Failed, Some(format!("step \"{}\" could not start: {err}", step.id)));
        }
        Ok(())
    }

    /// The agent's word on a step.
    pub fn handle_report(&mut self, report: StepReport) -> anyhow::Result<()> {
        self.changed = true;
        let Some(mut run) = db::run(self.conn()?, report.run_id)? else { return Ok(()) };
        // Only the step the run waits for, once.
        if run.operation_id != Some(report.operation_id) || run.step_index != report.seq as usize || !run.status.is_active() {
            return Ok(());
        }
        let Some(step) = run.flow.steps.get(run.step_index).cloned() else { return Ok(()) };
        let mut row = self.step_row(&run, "done");
        let existing = db::steps(self.conn()?, run.run_id)?.into_iter().find(|s| s.seq == report.seq);
        if let Some(existing) = existing {
            row.input = existing.input;
            row.started_at_millis = existing.started_at_millis;
        }
        let now = self.now();
        match report.outcome {
            StepOutcome::Done { data, decision } => {
                row.output = Some(data.clone());
                row.decision = Some(decision);
                row.finished_at_millis = Some(now);
                let origin = match &step.kind {
                    StepKind::Tool { tool, .. } => crate::tools::registry::origin(tool),
                    _ => Origin::ToolResult,
                };
                run.scope.steps.insert(step.id.clone(), data);
                run.scope.step_origins.insert(step.id.clone(), origin);
                self.next_step(&mut run, &step, None);
                self.save_run_and_step(&run, &row)?;
                self.advance(run.run_id)
            }
            StepOutcome::Failed { error, decision, expired } => {
                row.status = if expired { "expired".into() } else { "failed".into() };
                row.error = Some(error.clone());
                row.decision = Some(decision);
                row.finished_at_millis = Some(now);
                self.save_step(&row)?;
                let status = if expired { RunStatus::Expired } else { RunStatus::Failed };
                self.end_run(run, status, Some(format!("step \"{}\": {error}", step.id)))
            }
            StepOutcome::Parked { call_id, tool, arguments, why, expires_at_millis } => {
                if run.status == RunStatus::WaitingApproval {
                    return Ok(());
                }
                run.status = RunStatus::WaitingApproval;
                run.wake_at_millis = Some(expires_at_millis + EXPIRY_GRACE_MILLIS);
                row.status = "waiting_approval".into();
                row.decision = Some(format!("ask: {why}"));
                self.save_run_and_step(&run, &row)?;
                // Nothing is approved because nobody is watching: the user is asked. Accept is
                // offered only when the notification shows the whole call; else Open shows the card.
                let (shown, whole) = approval_arguments(&tool, &arguments);
                let notice = Notice {
                    source: "approval".into(),
                    tier: flow::NotifyTier::Urgent,
                    title: format!("\"{}\" waits for your approval", run.flow.name),
                    body: if whole {
                        format!("Step \"{}\" wants to run {tool}:\n{shown}\n{why}", step.id)
                    } else {
                        format!("Step \"{}\" wants to run {tool}:\n{shown}\nOpen cowork to see the whole call and decide. {why}", step.id)
                    },
                    action: if whole { NoticeAction::Approve { call_id } } else { NoticeAction::None },
                    why: format!("Why: a step of your automation \"{}\" needs your approval", run.flow.name),
                };
                if let Err(err) = self.notifier.post(notice) {
                    tracing::warn!(%err, "the approval notification was not shown");
                }
                Ok(())
            }
        }
    }

    /// A step's operation, read from the database: an ended one settles the step.
    fn settle_from_operation(&mut self, run_id: i64) -> anyhow::Result<bool> {
        let Some(run) = db::run(self.conn()?, run_id)? else { return Ok(false) };
        let Some(operation_id) = run.operation_id else { return Ok(false) };
        let Some(outcome) = operation_outcome(self.conn()?, operation_id, &run)? else { return Ok(false) };
        if matches!(outcome, StepOutcome::Parked { .. }) && run.status == RunStatus::WaitingApproval {
            return Ok(false);
        }
        self.handle_report(StepReport { run_id, seq: run.step_index as u32, operation_id, outcome })?;
        Ok(true)
    }

    /// A run whose wake time passed while a step ran or an approval waited.
    fn overdue(&mut self, run: RunRow) -> anyhow::Result<()> {
        if self.settle_from_operation(run.run_id)? {
            return Ok(());
        }
        let Some(step) = run.flow.steps.get(run.step_index).cloned() else { return Ok(()) };
        if let Some(op) = run.operation_id {
            self.runner.cancel(op);
        }
        let mut row = self.step_row(&run, "failed");
        if let Some(existing) = db::steps(self.conn()?, run.run_id)?.into_iter().find(|s| s.seq == run.step_index as u32) {
            row.input = existing.input;
            row.started_at_millis = existing.started_at_millis;
        }
        row.finished_at_millis = Some(self.now());
        let (status, error) = match run.status {
            RunStatus::WaitingApproval => (RunStatus::Expired, "nobody approved the step in time, so it did not run".to_owned()),
            _ => (RunStatus::Failed, format!("timed out after {} s", step.timeout_millis() / 1000)),
        };
        row.status = if status == RunStatus::Expired { "expired".into() } else { "failed".into() };
        row.error = Some(error.clone());
        self.save_step(&row)?;
        self.end_run(run, status, Some(format!("step \"{}\": {error}", step.id)))
    }

    /// Ends a run: stored, counted, and a failure notified (unless the flow says not to).
    fn end_run(&mut self, mut run: RunRow, status: RunStatus, error: Option<String>) -> anyhow::Result<()> {
        self.changed = true;
        if let (Some(op), RunStatus::Cancelled) = (run.operation_id, status) {
            self.runner.cancel(op);
        }
        let now = self.now();
        run.status = status;
        run.error = error.clone();
        run.wake_at_millis = None;
        run.finished_at_millis = Some(now);
        self.save_run(&run)?;
        if status != RunStatus::Cancelled {
            let (automation_id, success) = (run.automation_id, status == RunStatus::Done);
            self.config.store.write("automation outcome", move |conn| db::record_outcome(conn, automation_id, success, now))?;
        }
        tracing::info!(flow = %run.flow.name, run = run.run_id, status = status.as_str(), error = ?error, "automation run ended");
        if let Some(error) = &error
            && status != RunStatus::Cancelled
        {
            self.sink.notice(format!("automation \"{}\": {error}", run.flow.name));
        }
        if matches!(status, RunStatus::Failed | RunStatus::Expired) && run.flow.notify_on_failure {
            let notice = Notice {
                source: "failure".into(),
                tier: flow::NotifyTier::Helpful,
                title: format!("\"{}\" {}", run.flow.name, if status == RunStatus::Expired { "stopped: an approval expired" } else { "failed" }),
                body: error.unwrap_or_default(),
                action: NoticeAction::None,
                why: format!("Why: \"{}\" tells you when it fails (its notify_on_failure)", run.flow.name),
            };
            if let Err(err) = self.notifier.post(notice) {
                tracing::warn!(%err, "the failure notification was not shown");
            }
        }
        // A queued run of the same flow may start now.
        self.start_queued()
    }

    /// The flows and the newest runs, for the Apps panel (sent when something changed).
    pub fn view(&self) -> anyhow::Result<crate::automations::events::AutomationsView> {
        use crate::automations::events::{AutomationRow, AutomationsView, RunSummary, StepSummary};
        let conn = self.conn()?;
        let mut flows = Vec::new();
        for row in &self.flows {
            let state = db::scheduler(conn, row.automation_id)?;
            flows.push(AutomationRow {
                name: row.name.clone(),
                description: row.flow.as_ref().map(|f| f.description.clone()).unwrap_or_default(),
                enabled: row.enabled,
                trigger: row.flow.as_ref().map(|f| f.trigger.describe()).unwrap_or_default(),
                next_fire_at_millis: state.next_fire_at_millis,
                problem: row.flow.as_ref().err().cloned(),
                definition: row.flow.as_ref().map(Flow::to_json).unwrap_or_default(),
            });
        }
        let mut runs = Vec::new();
        for run in db::recent_runs(conn, None, RUNS_SHOWN)? {
            let steps = db::steps(conn, run.run_id)?
                .into_iter()
                .map(|s| StepSummary {
                    output: s.output.as_ref().map(|o| match o.get("text").and_then(Value::as_str) {
                        Some(text) => text.chars().take(OUTPUT_SHOWN).collect(),
                        None => o.to_string().chars().take(OUTPUT_SHOWN).collect(),
                    }).unwrap_or_default(),
                    duration_millis: s.finished_at_millis.map(|f| f - s.started_at_millis),
                    step_id: s.step_id,
                    kind: s.kind,
                    status: s.status,
                    decision: s.decision,
                    error: s.error,
                })
                .collect();
            runs.push(RunSummary {
                run_id: run.run_id,
                automation: run.flow.name.clone(),
                trigger_kind: run.trigger_kind.clone(),
                status: run.status.as_str().into(),
                error: run.error.clone(),
                created_at_millis: run.created_at_millis,
                steps,
            });
        }
        Ok(AutomationsView { flows, runs })
    }

    fn publish(&mut self) -> anyhow::Result<()> {
        if self.changed {
            self.changed = false;
            let view = self.view()?;
            self.sink.send(view);
        }
        Ok(())
    }

    /// A signal from capture or an MCP server: every enabled flow it matches gets a run.
    pub fn handle_signal(&mut self, signal: Signal) -> anyhow::Result<()> {
        let now = self.now();
        match &signal {
            Signal::Focus { app, at_millis, .. } => {
                if self.stretch.as_ref().is_none_or(|(current, _)| current != app) {
                    self.stretch = Some((app.clone(), *at_millis));
                    self.focus_log.push_back((app.clone(), *at_millis));
                    if self.focus_log.len() > FOCUS_LOG {
                        self.focus_log.pop_front();
                    }
                }
            }
            // Coming back is a break: a new stretch starts.
            Signal::Back { at_millis, .. } => {
                self.away_since = None;
                if let Some((_, since)) = self.stretch.as_mut() {
                    *since = *at_millis;
                }
            }
            Signal::Away { since_millis, .. } => self.away_since = Some(*since_millis),
            Signal::Mcp { .. } | Signal::Meeting { .. } => {}
        }
        let mut starts: Vec<(i64, Start<'static>)> = Vec::new();
        // The first signal of a local day is also the day's first activity (claimed once per day).
        let day = crate::ids::local_day_start_millis(now);
        for row in self.flows.iter().filter(|r| r.enabled) {
            let Ok(flow) = &row.flow else { continue };
            let start = match (&flow.trigger, &signal) {
                (Trigger::Focus { app, title }, Signal::Focus { app: a, title: t, url, session_id, .. }) => {
                    let matches = |pattern: &Option<String>, text: &str| pattern.as_ref().is_none_or(|p| regex::RegexBuilder::new(p).case_insensitive(true).size_limit(1 << 20).build().is_ok_and(|r| r.is_match(text)));
                    (matches(app, a) && matches(title, t)).then(|| Start {
                        kind: "focus",
                        data: json!({"app": a, "title": t, "url": url}),
                        origin: Origin::Capture,
                        event_key: Some(format!("focus:{session_id}")),
                        next_fire: None,
                        rerun_of: None,
                    })
                }
                (Trigger::Back { away_minutes }, Signal::Back { away_millis, at_millis }) => (*away_millis >= *away_minutes as i64 * 60_000).then(|| Start {
                    kind: "back",
                    data: json!({"away_minutes": away_millis / 60_000}),
                    origin: Origin::Capture,
                    event_key: Some(format!("back:{at_millis}")),
                    next_fire: None,
                    rerun_of: None,
                }),
                (Trigger::Meeting { event }, Signal::Meeting { event: e, service, title, started_millis, ended_millis, listened }) => (event == e).then(|| Start {
                    kind: "meeting",
                    data: json!({
                        "service": service,
                        "title": title,
                        "start": crate::ids::rfc3339(*started_millis),
                        "end": ended_millis.map(crate::ids::rfc3339),
                        "start_ms": started_millis,
                        "end_ms": ended_millis,
                        "listened": listened,
                    }),
                    origin: Origin::Capture,
                    event_key: Some(format!("meeting:{}:{started_millis}", e.as_str())),
                    next_fire: None,
                    rerun_of: None,
                }),
                (Trigger::FirstActivity, Signal::Focus { .. } | Signal::Back { .. }) => Some(Start {
                    kind: "first_activity",
                    data: json!({"at": crate::ids::rfc3339(now)}),
                    origin: Origin::Capture,
                    event_key: Some(format!("first_activity:{day}")),
                    next_fire: None,
                    rerun_of: None,
                }),
                (Trigger::Mcp { server, event, uri }, Signal::Mcp { server: s, event: e, uri: u, at_millis }) => {
                    (server == s && event == e && (uri.is_none() || uri == u)).then(|| Start {
                        kind: "mcp",
                        data: json!({"server": s, "event": e, "uri": u}),
                        origin: Origin::ToolResult,
                        event_key: Some(format!("mcp:{s}:{}:{}:{}", serde_json::to_string(e).unwrap_or_default(), u.as_deref().unwrap_or(""), at_millis / 1000)),
                        next_fire: None,
                        rerun_of: None,
                    })
                }
                _ => None,
            };
            if let Some(start) = start {
                starts.push((row.automation_id, start));
            }
        }
        for (id, start) in starts {
            self.trigger(id, start)?;
        }
        Ok(())
    }

    fn handle_run(&mut self, name: &str, data: Value, origin: Origin, rerun_of: Option<i64>) -> Result<i64, String> {
        let row = self.flows.iter().find(|r| r.name == name).cloned().ok_or_else(|| format!("there is no automation \"{name}\""))?;
        let flow = row.flow.map_err(|err| format!("the automation \"{name}\" does not read: {err}"))?;
        flow.check_inputs(&data).map_err(|err| format!("the inputs do not fit: {err}"))?;
        let kind = if rerun_of.is_some() { "rerun" } else { "manual" };
        let start = Start { kind, data, origin, event_key: None, next_fire: None, rerun_of };
        match self.trigger(row.automation_id, start) {
            Ok(Some(run_id)) => Ok(run_id),
            Ok(None) => Err(format!("\"{name}\" is still running and runs one at a time")),
            Err(err) => Err(format!("{err:#}")),
        }
    }

    /// Handles one command; false on Shutdown.
    pub fn handle(&mut self, command: AutomationsCommand) -> anyhow::Result<bool> {
        match command {
            AutomationsCommand::Save { flow, reply } => {
                let result = match flow.validate(&flow::BuiltIn) {
                    Ok(()) => {
                        let (saved, now) = (flow.clone(), self.now());
                        self.config.store.write("save flow", move |conn| db::save_flow(conn, &saved, now)).map_err(|err| vec![format!("the flow was not saved: {err:#}")])
                    }
                    Err(problems) => Err(problems),
                };
                self.reload()?;
                match reply {
                    Some(reply) => {
                        let _ = reply.send(result);
                    }
                    // Saved from the Apps panel: it hears how it went.
                    None => {
                        self.sink.notice(match result {
                            Ok(_) => format!("automation \"{}\" saved", flow.name),
                            Err(problems) => format!("automation \"{}\" not saved: {}", flow.name, problems.join("; ")),
                        });
                    }
                }
            }
            AutomationsCommand::Delete { name, reply } => {
                let deleted = name.clone();
                let result = match self.config.store.write("delete flow", move |conn| db::delete_flow(conn, &deleted)) {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(format!("there is no automation \"{name}\"")),
                    Err(err) => Err(format!("the automation was not removed: {err:#}")),
                };
                self.reload()?;
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            AutomationsCommand::SetEnabled { name, enabled } => {
                let named = name.clone();
                self.config.store.write("flow on or off", move |conn| db::set_enabled(conn, &named, enabled))?;
                self.reload()?;
            }
            AutomationsCommand::Run { name, data, origin, reply } => {
                let result = self.handle_run(&name, data, origin, None);
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            AutomationsCommand::Rerun { run_id, reply } => {
                let result = match db::run(self.conn()?, run_id)? {
                    Some(run) => {
                        let name = self.flows.iter().find(|r| r.automation_id == run.automation_id).map(|r| r.name.clone()).unwrap_or_default();
                        self.handle_run(&name, run.scope.trigger.clone(), run.scope.trigger_origin, Some(run_id))
                    }
                    None => Err(format!("there is no run {run_id}")),
                };
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            AutomationsCommand::Cancel { run_id } => {
                if let Some(run) = db::run(self.conn()?, run_id)?.filter(|r| r.status.is_open()) {
                    self.end_run(run, RunStatus::Cancelled, Some("cancelled by you".into()))?;
                }
            }
            AutomationsCommand::Signal(signal) => self.handle_signal(signal)?,
            AutomationsCommand::Shutdown => return Ok(false),
        }
        Ok(true)
    }
}

fn operation_exists(conn: &Connection, operation_id: i64) -> rusqlite::Result<bool> {
    conn.query_row("SELECT count(*) FROM operations WHERE operation_id = ?1", [operation_id], |r| r.get::<_, i64>(0)).map(|n| n > 0)
}

/// How a step's operation ended, read from its rows (None: not yet).
fn operation_outcome(conn: &Connection, operation_id: i64, run: &RunRow) -> rusqlite::Result<Option<StepOutcome>> {
    use rusqlite::OptionalExtension;
    let row: Option<(String, String, Option<String>)> =
        conn.query_row("SELECT status, state, error FROM operations WHERE operation_id = ?1", [operation_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()?;
    let Some((status, state, error)) = row else { return Ok(None) };
    let shown = serde_json::from_str::<Value>(&state).ok().and_then(|s| s.get("shown").and_then(Value::as_str).map(str::to_owned)).unwrap_or_default();
    let is_tool = matches!(run.flow.steps.get(run.step_index).map(|s| &s.kind), Some(StepKind::Tool { .. }));
    // Who let the last call run: the policy, a rule, or the user.
    let decided_by: Option<String> = conn
        .query_row("SELECT decided_by FROM operation_calls WHERE operation_id = ?1 ORDER BY created_at_ms DESC LIMIT 1", [operation_id], |r| r.get(0))
        .optional()?
        .flatten();
    Ok(match status.as_str() {
        "done" => Some(StepOutcome::Done { data: step_data(is_tool, &shown), decision: decided_by.unwrap_or_else(|| "ran".into()) }),
        "error" | "cancelled" => {
            let error = error.unwrap_or_else(|| "the step's task ended without a result".into());
            let expired = error.contains("approv") && error.contains("expire");
            Some(StepOutcome::Failed { error, decision: status, expired })
        }
        "waiting_for_human" => {
            let waiting: Option<(i64, String, String, String, Option<i64>)> = conn
                .query_row(
                    "SELECT call_id, tool, arguments, why, expires_at_ms FROM operation_calls WHERE operation_id = ?1 AND status = 'waiting' ORDER BY created_at_ms LIMIT 1",
                    [operation_id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .optional()?;
            waiting.map(|(call_id, tool, arguments, why, expires)| StepOutcome::Parked { call_id, tool, arguments, why, expires_at_millis: expires.unwrap_or(i64::MAX / 2) })
        }
        _ => None,
    })
}

/// A step's output as data: a tool's JSON as it is, any other text as `{"text": …}`.
pub fn step_data(is_tool: bool, text: &str) -> Value {
    if is_tool && let Ok(value @ (Value::Object(_) | Value::Array(_))) = serde_json::from_str::<Value>(text) {
        return value;
    }
    json!({"text": text})
}

impl Supervised for AutomationsWorker {
    type Command = AutomationsCommand;

    fn run(&mut self, commands: &Receiver<AutomationsCommand>, ctx: &WorkerContext) -> anyhow::Result<()> {
        self.open()?;
        ctx.report(crate::runtime::WorkerState::Running);
        let mut reports = self.reports.clone();
        loop {
            let sleep = self.tick()?;
            self.publish()?;
            select! {
                recv(commands) -> command => match command {
                    Ok(command) => {
                        if !self.handle(command)? {
                            break;
                        }
                    }
                    Err(_) => break,
                },
                recv(reports) -> report => match report {
                    Ok(report) => self.handle_report(report)?,
                    // Nobody reports any more (no agent in this process): stop listening, or the loop would spin.
                    Err(_) => reports = crossbeam_channel::never(),
                },
                default(sleep) => {}
            }
        }
        Ok(())
    }
}

/// The far ends of the automations worker: its commands, and the channel the agent reports steps on.
pub struct AutomationsChannels {
    pub commands: (Sender<AutomationsCommand>, Receiver<AutomationsCommand>),
    pub reports: (Sender<StepReport>, Receiver<StepReport>),
}

impl Default for AutomationsChannels {
    fn default() -> Self {
        Self { commands: bounded(64), reports: bounded(64) }
    }
}

/// Starts the automations worker under supervision on a thread named `automations`.
pub fn spawn_automations(
    config: AutomationsConfig,
    channels: AutomationsChannels,
    clock: Arc<dyn Clock>,
    make_runner: impl Fn() -> Box<dyn StepRunner> + Send + 'static,
    make_notifier: impl Fn() -> Box<dyn Notifier> + Send + 'static,
    sink: EventSink<AutomationsView>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<AutomationsCommand>> {
    let reports = channels.reports.1;
    spawn_supervised::<AutomationsWorker, _, _>(WorkerName::Automations, policy, sink.clone(), channels.commands, move |_ctx| {
        Ok(AutomationsWorker::new(config.clone(), clock.clone(), make_runner(), make_notifier(), reports.clone(), sink.clone()))
    })
}

/// Characters of a call's arguments a notification shows whole (a longer call is shown on its card).
const NOTICE_ARGUMENTS: usize = 400;

/// A call's arguments as an approval notification shows them: a command as
/// its text, anything else as compact JSON; and whether that is all of it.
pub fn approval_arguments(tool: &str, arguments: &str) -> (String, bool) {
    let value: serde_json::Value = serde_json::from_str(arguments).unwrap_or(serde_json::Value::String(arguments.to_owned()));
    let text = match (tool, value.get("command").and_then(serde_json::Value::as_str)) {
        ("run_command", Some(command)) if value.as_object().is_some_and(|o| o.len() == 1) => command.to_owned(),
        _ => value.to_string(),
    };
    if text.chars().count() <= NOTICE_ARGUMENTS {
        (text, true)
    } else {
        (format!("{}…", text.chars().take(NOTICE_ARGUMENTS).collect::<String>()), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automations::steps::OffsetClock;
    use crossbeam_channel::unbounded;
    use std::sync::Mutex;

    /// Records what it was asked to run; the test answers as the agent would.
    #[derive(Clone, Default)]
    struct Script {
        started: Arc<Mutex<Vec<StepRequest>>>,
        cancelled: Arc<Mutex<Vec<i64>>>,
        notices: Arc<Mutex<Vec<Notice>>>,
    }

    impl StepRunner for Script {
        fn start(&self, request: StepRequest) -> Result<(), String> {
            self.started.lock().unwrap().push(request);
            Ok(())
        }
        fn cancel(&self, operation_id: i64) {
            self.cancelled.lock().unwrap().push(operation_id);
        }
    }

    impl Notifier for Script {
        fn post(&self, notice: Notice) -> Result<i64, String> {
            let mut notices = self.notices.lock().unwrap();
            notices.push(notice);
            Ok(notices.len() as i64)
        }
    }

    struct Bench {
        dir: tempfile::TempDir,
        clock: OffsetClock,
        script: Script,
        worker: AutomationsWorker,
    }

    fn worker_on(dir: &std::path::Path, clock: &OffsetClock, script: &Script) -> AutomationsWorker {
        // Only the test thread sends and receives on these.
        let (_, reports) = unbounded();
        let (events, _) = unbounded();
        // The store ends once the worker (holding the link) is dropped.
        let (_store, link) = crate::store::test_store(&dir.join("cowork.db"));
        let mut worker = AutomationsWorker::new(
            AutomationsConfig { store: link },
            Arc::new(clock.clone()),
            Box::new(script.clone()),
            Box::new(script.clone()),
            reports,
            crate::runtime::EventSink::<crate::events::AppEvent>::new(events, || {}).narrow(),
        );
        worker.open().unwrap();
        worker
    }

    fn bench() -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let clock = OffsetClock::default();
        let script = Script::default();
        let worker = worker_on(dir.path(), &clock, &script);
        Bench { dir, clock, script, worker }
    }

    fn save(worker: &mut AutomationsWorker, json: &str) {
        let (reply, result) = bounded(1);
        worker.handle(AutomationsCommand::Save { flow: Box::new(Flow::from_json(json).unwrap()), reply: Some(reply) }).unwrap();
        result.recv().unwrap().unwrap();
    }

    fn runs(worker: &AutomationsWorker) -> Vec<RunRow> {
        let mut runs = db::recent_runs(worker.conn().unwrap(), None, 100).unwrap();
        runs.reverse();
        runs
    }

    /// The runs of the test's own flows (the built-ins are seeded too).
    fn mine(worker: &AutomationsWorker) -> Vec<RunRow> {
        runs(worker).into_iter().filter(|r| !r.flow.name.starts_with("builtin_")).collect()
    }

    fn run_now(worker: &mut AutomationsWorker, name: &str, data: Value) -> Result<i64, String> {
        let (reply, result) = bounded(1);
        worker.handle(AutomationsCommand::Run { name: name.into(), data, origin: Origin::User, reply: Some(reply) }).unwrap();
        result.recv().unwrap()
    }

    #[test]
    fn a_suspend_that_skipped_three_hours_of_a_minutely_flow_gives_one_catch_up_run() {
        let Bench { clock, mut worker, .. } = bench();
        save(&mut worker, r#"{"name": "minutely", "trigger": {"kind": "schedule", "schedule": "every 1m"}, "steps": [{"id": "c", "kind": "condition", "left": "${trigger.data.missed}", "op": "gte", "right": "0"}]}"#);
        worker.tick().unwrap();
        assert!(runs(&worker).is_empty(), "a new schedule starts at the next minute, not now");
        let id = worker.flows.iter().find(|f| f.name == "minutely").unwrap().automation_id;
        let next = db::scheduler(worker.conn().unwrap(), id).unwrap().next_fire_at_millis.unwrap();
        assert!(next > clock.now_millis() && next - clock.now_millis() <= 60_000);
        clock.jump(next - clock.now_millis() + 1_000);
        worker.tick().unwrap();
        worker.tick().unwrap();
        let first = runs(&worker);
        assert_eq!(first.len(), 1, "one run for the minute that passed, however often the loop wakes");
        assert_eq!((first[0].status, first[0].scope.trigger["missed"].as_u64()), (RunStatus::Done, Some(0)));
        // The machine sleeps for three hours.
        clock.jump(3 * 3_600_000);
        worker.tick().unwrap();
        worker.tick().unwrap();
        let after = runs(&worker);
        assert_eq!(after.len(), 2, "one catch-up run, not 180");
        let missed = after[1].scope.trigger["missed"].as_u64().unwrap();
        assert!((179..=181).contains(&missed), "the catch-up run knows how many times it stands for: {missed}");
        let next = db::scheduler(worker.conn().unwrap(), after[1].automation_id).unwrap().next_fire_at_millis.unwrap();
        assert!(next > clock.now_millis() && next - clock.now_millis() <= 60_000, "the schedule goes on from now");
    }

    #[test]
    fn the_end_of_the_day_is_the_first_long_absence_after_its_hour_once_a_day() {
        let Bench { clock, mut worker, .. } = bench();
        save(&mut worker, r#"{"name": "evening", "trigger": {"kind": "day_end", "after_hour": 16, "away_minutes": 20}, "steps": [{"id": "c", "kind": "condition", "left": "${trigger.data.away_minutes}", "op": "gte", "right": "20"}]}"#);
        let midnight = crate::day::ledger::next_midnight(clock.now_millis());
        let at = |h: i64, m: i64| midnight + (h * 60 + m) * 60_000;
        let go = |clock: &OffsetClock, to: i64| clock.jump(to - clock.now_millis());
        let away = |worker: &mut AutomationsWorker, since: i64| worker.handle(AutomationsCommand::Signal(Signal::Away { since_millis: since, at_millis: since + 300_000 })).unwrap();
        // Lunch: long, but before 16:00.
        go(&clock, at(13, 0));
        away(&mut worker, at(12, 55));
        go(&clock, at(13, 40));
        worker.tick().unwrap();
        worker.handle(AutomationsCommand::Signal(Signal::Back { away_millis: 45 * 60_000, at_millis: at(13, 40) })).unwrap();
        assert!(mine(&worker).is_empty(), "away before the hour");
        // A short break after it, then the evening.
        go(&clock, at(16, 30));
        away(&mut worker, at(16, 25));
        go(&clock, at(16, 35));
        worker.tick().unwrap();
        worker.handle(AutomationsCommand::Signal(Signal::Back { away_millis: 10 * 60_000, at_millis: at(16, 35) })).unwrap();
        go(&clock, at(17, 50));
        worker.tick().unwrap();
        assert!(mine(&worker).is_empty(), "10 minutes away, then back at work");
        away(&mut worker, at(17, 45));
        go(&clock, at(18, 1));
        worker.tick().unwrap();
        assert!(mine(&worker).is_empty(), "16 minutes so far");
        go(&clock, at(18, 6));
        worker.tick().unwrap();
        worker.tick().unwrap();
        let all = mine(&worker);
        assert_eq!(all.len(), 1);
        assert_eq!((all[0].status, all[0].scope.trigger["away_minutes"].as_i64()), (RunStatus::Done, Some(21)));
        // Back for a late hour, away again: the day already ended once.
        worker.handle(AutomationsCommand::Signal(Signal::Back { away_millis: 3_600_000, at_millis: at(19, 0) })).unwrap();
        away(&mut worker, at(20, 0));
        go(&clock, at(21, 0));
        worker.tick().unwrap();
        assert_eq!(mine(&worker).len(), 1, "once a day");
        // The next day: gone at 15:55, the day ends at 16:20 (away counts from the hour).
        worker.handle(AutomationsCommand::Signal(Signal::Back { away_millis: 3_600_000, at_millis: at(24 + 9, 0) })).unwrap();
        go(&clock, at(24 + 15, 56));
        away(&mut worker, at(24 + 15, 55));
        go(&clock, at(24 + 16, 19));
        worker.tick().unwrap();
        assert_eq!(mine(&worker).len(), 1);
        go(&clock, at(24 + 16, 21));
        worker.tick().unwrap();
        assert_eq!(mine(&worker).len(), 2, "gone before the hour, the day ends 20 minutes after it");
    }

    #[test]
    fn a_calendar_trigger_runs_once_its_lead_time_before_a_timed_event_that_matches() {
        let Bench { dir, clock, script, mut worker } = bench();
        save(&mut worker, r#"{"name": "prep", "trigger": {"kind": "calendar", "minutes_before": 10}, "steps": [{"id": "tell", "kind": "notify", "title": "In ${trigger.data.minutes} min: ${trigger.data.title}", "body": "with ${trigger.data.attendees}"}]}"#);
        save(&mut worker, r#"{"name": "one_to_one", "trigger": {"kind": "calendar", "minutes_before": 5, "title": "^1:1"}, "steps": [{"id": "tell", "kind": "notify", "title": "1:1 soon: ${trigger.data.title}"}]}"#);
        let now = clock.now_millis();
        let event = |uid: &str, title: &str, start: i64, all_day: bool| crate::day::calendar::Event {
            uid: uid.into(),
            title: title.into(),
            start_millis: start,
            end_millis: start + 1_800_000,
            all_day,
            attendees: vec!["Sam".into()],
            ..Default::default()
        };
        let mut conn = crate::store::open_writer(&dir.path().join("cowork.db")).unwrap();
        let tx = conn.transaction().unwrap();
        let events = [event("q3", "Q3 review", now + 30 * 60_000, false), event("off", "Offsite", now + 20 * 60_000, true), event("ana", "1:1 Ana", now + 60 * 60_000, false)];
        crate::calendar::db::replace(&tx, "s", (now - 86_400_000, now + 86_400_000), &events).unwrap();
        tx.commit().unwrap();
        worker.tick().unwrap();
        assert!(mine(&worker).is_empty(), "30 minutes ahead is not 10");
        clock.jump(21 * 60_000);
        worker.tick().unwrap();
        worker.tick().unwrap();
        let all = mine(&worker);
        assert_eq!(all.len(), 1, "one run for the review, none for the all-day event: {all:?}");
        assert_eq!(all[0].scope.trigger["title"], "Q3 review");
        let told: Vec<String> = script.notices.lock().unwrap().iter().filter(|n| n.source == "flow:prep").map(|n| format!("{} | {}", n.title, n.body)).collect();
        assert_eq!(told, ["In 9 min: Q3 review | with Sam"]);
        // The 1:1: 10 minutes before for the first flow, 5 for the second, whose title pattern only it matches.
        clock.jump(31 * 60_000);
        worker.tick().unwrap();
        assert_eq!(mine(&worker).len(), 2, "8 minutes before the 1:1: the first flow only (the review began)");
        clock.jump(4 * 60_000);
        worker.tick().unwrap();
        let all = mine(&worker);
        assert_eq!(all.len(), 3, "4 minutes before: the second flow too: {all:?}");
        assert_eq!(script.notices.lock().unwrap().last().map(|n| n.title.clone()).as_deref(), Some("1:1 soon: 1:1 Ana"));
        clock.jump(10 * 60_000);
        worker.tick().unwrap();
        assert_eq!(mine(&worker).len(), 3, "a meeting that began starts nothing");
    }

    #[test]
    fn an_event_seen_twice_runs_once_and_a_focus_rule_matches_app_and_title() {
        let Bench { dir, mut worker, .. } = bench();
        save(&mut worker, r#"{"name": "invoices", "trigger": {"kind": "focus", "app": "^nautilus$", "title": "invoices"}, "steps": [{"id": "tell", "kind": "notify", "title": "Opened ${trigger.data.title}"}]}"#);
        let focus = |title: &str, session_id: i64| Signal::Focus { app: "Nautilus".into(), title: title.into(), url: None, session_id, at_millis: 1 };
        worker.handle(AutomationsCommand::Signal(focus("Invoices 2026", 7))).unwrap();
        worker.handle(AutomationsCommand::Signal(focus("Invoices 2026", 7))).unwrap();
        worker.handle(AutomationsCommand::Signal(focus("Holiday photos", 8))).unwrap();
        let all = runs(&worker);
        assert_eq!(all.len(), 1, "the same focus event twice, and a title that does not match");
        assert_eq!(all[0].status, RunStatus::Done);
        // After a restart the claim is still there.
        let mut again = worker_on(dir.path(), &OffsetClock::default(), &Script::default());
        again.handle(AutomationsCommand::Signal(focus("Invoices 2026", 7))).unwrap();
        assert_eq!(runs(&again).len(), 1);
    }

    #[test]
    fn a_tool_step_that_needs_approval_parks_the_run_and_continues_when_the_agent_reports() {
        let Bench { script, mut worker, .. } = bench();
        save(&mut worker, r#"{"name": "tidy", "trigger": {"kind": "manual"}, "steps": [
            {"id": "write", "kind": "tool", "tool": "write_file", "args": {"path": "/tmp/x", "content": "${trigger.data.note}"}},
            {"id": "tell", "kind": "notify", "title": "Wrote", "body": "${steps.write.data.text}"}],
            "inputs": [{"name": "note", "type": "string"}]}"#);
        let run_id = run_now(&mut worker, "tidy", json!({"note": "hello"})).unwrap();
        let request = script.started.lock().unwrap()[0].clone();
        assert!(matches!(&request.work, StepWork::Tool { tool, args } if tool == "write_file" && args["content"] == "hello"));
        assert_eq!(request.origins, [Origin::User], "a manual run's inputs are the user's");
        worker.handle_report(StepReport { run_id, seq: 0, operation_id: request.operation_id, outcome: StepOutcome::Parked { call_id: 42, tool: "write_file".into(), arguments: r#"{"path":"/tmp/x","content":"hi"}"#.into(), why: "sensitive".into(), expires_at_millis: i64::MAX / 4 } }).unwrap();
        let parked = db::run(worker.conn().unwrap(), run_id).unwrap().unwrap();
        assert_eq!(parked.status, RunStatus::WaitingApproval);
        let notice = script.notices.lock().unwrap()[0].clone();
        assert_eq!(notice.action, NoticeAction::Approve { call_id: 42 });
        // A report for another operation is not this step's.
        worker.handle_report(StepReport { run_id, seq: 0, operation_id: 1, outcome: StepOutcome::Done { data: json!({}), decision: "x".into() } }).unwrap();
        assert_eq!(db::run(worker.conn().unwrap(), run_id).unwrap().unwrap().status, RunStatus::WaitingApproval);
        worker.handle_report(StepReport { run_id, seq: 0, operation_id: request.operation_id, outcome: StepOutcome::Done { data: json!({"text": "wrote 5 bytes"}), decision: "user".into() } }).unwrap();
        let done = db::run(worker.conn().unwrap(), run_id).unwrap().unwrap();
        assert_eq!(done.status, RunStatus::Done);
        assert_eq!(script.notices.lock().unwrap()[1].body, "wrote 5 bytes");
        let steps = db::steps(worker.conn().unwrap(), run_id).unwrap();
        assert_eq!(steps.iter().map(|s| (s.step_id.as_str(), s.status.as_str())).collect::<Vec<_>>(), [("write", "done"), ("tell", "done")]);
        assert_eq!(steps[0].decision.as_deref(), Some("user"));
    }

    #[test]
    fn a_delay_survives_a_restart_and_a_step_that_never_answers_times_out() {
        let Bench { dir, clock, script, mut worker } = bench();
        save(&mut worker, r#"{"name": "later", "trigger": {"kind": "manual"}, "steps": [
            {"id": "wait", "kind": "delay", "seconds": 600},
            {"id": "look", "kind": "tool", "tool": "current_window", "timeout_secs": 30}]}"#);
        let run_id = run_now(&mut worker, "later", json!({})).unwrap();
        assert_eq!(db::run(worker.conn().unwrap(), run_id).unwrap().unwrap().status, RunStatus::WaitingDelay);
        drop(worker);
        // A new process, ten minutes later.
        clock.jump(600_000);
        let mut worker = worker_on(dir.path(), &clock, &script);
        worker.tick().unwrap();
        assert_eq!(script.started.lock().unwrap().len(), 1, "the delay ended and the next step went to the agent");
        let steps = db::steps(worker.conn().unwrap(), run_id).unwrap();
        assert_eq!((steps[0].status.as_str(), steps[0].output.as_ref().unwrap()["waited_seconds"].as_i64()), ("done", Some(600)));
        // The agent never answers: the step's timeout ends the run, and the failure is notified.
        clock.jump(31_000);
        worker.tick().unwrap();
        let run = db::run(worker.conn().unwrap(), run_id).unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Failed);
        assert!(run.error.unwrap().contains("timed out after 30 s"));
        assert_eq!(script.cancelled.lock().unwrap().len(), 1, "the agent is told to stop it");
        assert!(script.notices.lock().unwrap().iter().any(|n| n.source == "failure" && n.title.contains("later")));
    }

    #[test]
    fn the_apps_panel_is_told_the_flows_and_each_runs_steps_when_something_changed() {
        let dir = tempfile::tempdir().unwrap();
        let (_, reports) = unbounded();
        let (events_tx, events) = unbounded();
        let script = Script::default();
        let (_store, link) = crate::store::test_store(&dir.path().join("cowork.db"));
        let mut worker = AutomationsWorker::new(
            AutomationsConfig { store: link },
            Arc::new(OffsetClock::default()),
            Box::new(script.clone()),
            Box::new(script),
            reports,
            crate::runtime::EventSink::<crate::events::AppEvent>::new(events_tx, || {}).narrow(),
        );
        worker.open().unwrap();
        save(&mut worker, r#"{"name": "check", "trigger": {"kind": "schedule", "schedule": "every 2h"}, "steps": [{"id": "c", "kind": "condition", "left": "a", "op": "equals", "right": "b", "else": "end"}]}"#);
        run_now(&mut worker, "check", json!({})).unwrap();
        worker.tick().unwrap();
        worker.publish().unwrap();
        let view = events.try_iter().find_map(|e| match e { crate::events::AppEvent::Automations(view) => Some(view), _ => None }).unwrap();
        let check = view.flows.iter().find(|f| f.name == "check").unwrap();
        assert_eq!(check.trigger, "every 2h");
        assert!(check.next_fire_at_millis.is_some());
        assert!(view.flows.iter().any(|f| f.name == "builtin_take_a_break" && !f.enabled), "the built-in suggestions are there, the break one off");
        assert_eq!((view.runs[0].status.as_str(), view.runs[0].steps[0].decision.as_deref()), ("done", Some("else: end")));
        worker.publish().unwrap();
        assert!(events.try_recv().is_err(), "nothing changed: nothing sent");
    }

    #[test]
    fn the_built_in_suggestions_watch_waiting_approvals_long_stretches_and_many_switches() {
        let Bench { dir, clock, script, mut worker } = bench();
        worker.handle(AutomationsCommand::SetEnabled { name: "builtin_take_a_break".into(), enabled: true }).unwrap();
        let now = clock.now_millis();
        let runs_of = |worker: &AutomationsWorker, name: &str| runs(worker).into_iter().filter(|r| r.flow.name == name).collect::<Vec<_>>();
        // A call has waited 11 minutes: one reminder, however often the loop looks.
        // The agent's rows, written as another thread would.
        let conn = crate::store::open_writer(&dir.path().join("cowork.db")).unwrap();
        conn.execute("INSERT INTO operations (operation_id, task, status, brain, state, created_at_ms, updated_at_ms) VALUES (1, 't', 'waiting_for_human', 'local', '{}', ?1, ?1)", [now - 11 * 60_000]).unwrap();
        conn.execute(
            "INSERT INTO operation_calls (call_id, operation_id, step, model_call_id, tool, arguments, risk, status, why, created_at_ms) VALUES (7, 1, 1, 'c', 'run_command', '{}', 'sensitive', 'waiting', 'a command', ?1)",
            [now - 11 * 60_000],
        )
        .unwrap();
        worker.tick().unwrap();
        worker.tick().unwrap();
        let reminders = runs_of(&worker, "builtin_approval_reminder");
        assert_eq!(reminders.len(), 1);
        assert!(script.notices.lock().unwrap().iter().any(|n| n.body == "run_command has waited 11 minutes for your answer"));
        // Twelve switches within ten minutes: one notice for the window.
        for i in 0..12 {
            let app = if i % 2 == 0 { "Editor" } else { "Browser" };
            worker.handle_signal(Signal::Focus { app: app.into(), title: "t".into(), url: None, session_id: i, at_millis: now - 60_000 + i * 1_000 }).unwrap();
        }
        worker.tick().unwrap();
        worker.tick().unwrap();
        let switches = runs_of(&worker, "builtin_context_switches");
        assert_eq!(switches.len(), 1);
        assert_eq!(switches[0].scope.trigger["apps"], json!(["Browser", "Editor"]));
        // It says why it appeared, and its Accept starts the flow's task (its own words).
        let switched = script.notices.lock().unwrap().iter().find(|n| n.source == "flow:builtin_context_switches").cloned().expect("the switches notice");
        assert_eq!(switched.why, "Why: your automation \"builtin_context_switches\" (12 app switches within 10 minutes)");
        assert!(matches!(&switched.action, NoticeAction::Task { prompt } if prompt.starts_with("Look at what I switched between")), "{:?}", switched.action);
        // Ninety minutes in the last app (the Browser): a break is suggested once.
        assert!(runs_of(&worker, "builtin_take_a_break").is_empty());
        clock.jump(90 * 60_000);
        worker.tick().unwrap();
        worker.tick().unwrap();
        let breaks = runs_of(&worker, "builtin_take_a_break");
        assert_eq!(breaks.len(), 1);
        assert_eq!(breaks[0].scope.trigger["app"], "Browser");
        // Coming back from away starts a new stretch.
        worker.handle_signal(Signal::Back { away_millis: 600_000, at_millis: clock.now_millis() }).unwrap();
        worker.tick().unwrap();
        assert_eq!(runs_of(&worker, "builtin_take_a_break").len(), 1);
    }

    #[test]
    fn run_modes_skip_queue_or_restart_a_second_start() {
        let Bench { script, mut worker, .. } = bench();
        let flow = |name: &str, mode: &str| format!(r#"{{"name": "{name}", "trigger": {{"kind": "manual"}}, "mode": {mode}, "steps": [{{"id": "wait", "kind": "delay", "seconds": 60}}]}}"#);
        save(&mut worker, &flow("one", r#"{"kind": "single"}"#));
        save(&mut worker, &flow("queue", r#"{"kind": "queued"}"#));
        save(&mut worker, &flow("again", r#"{"kind": "restart"}"#));
        save(&mut worker, &flow("two", r#"{"kind": "parallel", "limit": 2}"#));
        run_now(&mut worker, "one", json!({})).unwrap();
        assert!(run_now(&mut worker, "one", json!({})).unwrap_err().contains("still running"));
        let first = run_now(&mut worker, "queue", json!({})).unwrap();
        let second = run_now(&mut worker, "queue", json!({})).unwrap();
        assert_eq!(db::run(worker.conn().unwrap(), second).unwrap().unwrap().status, RunStatus::Queued, "waits its turn");
        worker.handle(AutomationsCommand::Cancel { run_id: first }).unwrap();
        assert_eq!(db::run(worker.conn().unwrap(), second).unwrap().unwrap().status, RunStatus::WaitingDelay, "starts when the first ends");
        let old = run_now(&mut worker, "again", json!({})).unwrap();
        run_now(&mut worker, "again", json!({})).unwrap();
        assert_eq!(db::run(worker.conn().unwrap(), old).unwrap().unwrap().status, RunStatus::Cancelled);
        run_now(&mut worker, "two", json!({})).unwrap();
        run_now(&mut worker, "two", json!({})).unwrap();
        assert!(run_now(&mut worker, "two", json!({})).is_err(), "a third beyond the limit of 2");
        let id = worker.flows.iter().find(|f| f.name == "two").unwrap().automation_id;
        assert_eq!(db::scheduler(worker.conn().unwrap(), id).unwrap().skipped, 1);
        assert!(script.notices.lock().unwrap().is_empty(), "cancelled and skipped runs notify nobody");
    }
}
