//! Automations' own costs, on a real SQLite file and the real worker:
//! - `run`: per-run overhead — a manual run of four steps that do no work of
//!   their own (three conditions and a notification to a notifier that shows
//!   nothing), from the command to the run's last row;
//! - `tick`: one wake-up of the scheduler with 50 enabled flows;
//! - `idle`: the `automations` thread's CPU over 60 s with 50 enabled flows
//!   (the issue's bound: 0.1 % of one core);
//! - `lateness`: 10 flows every minute on the real clock for two minutes:
//!   when each run was queued after its minute.
//!
//! `cargo bench --profile dev --bench automations` (COWORK_BENCH_ONLY=run,tick,idle,lateness picks parts).

use std::sync::Arc;
use std::time::{Duration, Instant};

use cowork::automations::{AutomationsCommand, AutomationsConfig, Flow};
use cowork::automations::steps::{Notice, Notifier, StepRequest, StepRunner, SystemClock};
use cowork::automations::worker::{AutomationsChannels, AutomationsWorker};
use cowork::tools::Origin;

struct NoAgent;

impl StepRunner for NoAgent {
    fn start(&self, _: StepRequest) -> Result<(), String> {
        Err("no agent in this bench".into())
    }
    fn cancel(&self, _: i64) {}
}

struct Quiet;

impl Notifier for Quiet {
    fn post(&self, _: Notice) -> Result<i64, String> {
        Ok(1)
    }
}

fn wanted(part: &str) -> bool {
    std::env::var("COWORK_BENCH_ONLY").map_or(true, |only| only.split(',').any(|p| p == part))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The store's one writer on `dir`, as the app runs it; it ends with the last link.
fn store(dir: &std::path::Path) -> cowork::store::StoreLink {
    let store = cowork::workers::spawn_store(dir.join("cowork.db"), cowork::runtime::EventSink::<cowork::runtime::RuntimeEvent>::ignored(), cowork::runtime::RestartPolicy::default()).unwrap();
    let link = cowork::store::StoreLink::new(dir.join("cowork.db"), store.commands.clone());
    link.opened().unwrap();
    link
}

fn worker(dir: &std::path::Path) -> AutomationsWorker {
    let (_, reports) = crossbeam_channel::bounded(1);
    let mut worker = AutomationsWorker::new(
        AutomationsConfig { store: store(dir) },
        Arc::new(SystemClock),
        Box::new(NoAgent),
        Box::new(Quiet),
        reports,
        cowork::runtime::EventSink::ignored(),
    );
    worker.open().unwrap();
    worker
}

fn save(worker: &mut AutomationsWorker, json: &str) {
    let (reply, saved) = crossbeam_channel::bounded(1);
    worker.handle(AutomationsCommand::Save { flow: Box::new(Flow::from_json(json).unwrap()), reply: Some(reply) }).unwrap();
    saved.recv().unwrap().unwrap();
}

/// 50 flows as a user might have them: schedules, focus rules, returns.
fn fifty(worker: &mut AutomationsWorker) {
    for i in 0..50 {
        let trigger = match i % 3 {
            0 => format!(r#"{{"kind": "schedule", "schedule": "{} {} * * *"}}"#, i % 60, 6 + i % 12),
            1 => format!(r#"{{"kind": "focus", "app": "app{i}", "title": "project {i}"}}"#),
            _ => r#"{"kind": "back", "away_minutes": 30}"#.to_owned(),
        };
        save(worker, &format!(r#"{{"name": "flow_{i}", "trigger": {trigger}, "steps": [{{"id": "tell", "kind": "notify", "title": "flow {i}"}}]}}"#));
    }
}

/// The worker on its own thread, as the app runs it (no agent, a quiet notifier).
fn spawn(dir: &std::path::Path) -> cowork::runtime::WorkerHandle<AutomationsCommand> {
    // Nobody reads the events: the sink drops what does not fit.
    let (events, _) = crossbeam_channel::bounded(16);
    cowork::automations::spawn_automations(
        AutomationsConfig { store: store(dir) },
        AutomationsChannels::default(),
        Arc::new(SystemClock),
        || Box::new(NoAgent),
        || Box::new(Quiet),
        cowork::runtime::EventSink::<cowork::events::AppEvent>::new(events, || {}).narrow(),
        cowork::runtime::RestartPolicy::default(),
    )
    .unwrap()
}

fn thread_cpu_ticks(name: &str) -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
            return Some(fields[11].parse::<u64>().ok()? + fields[12].parse::<u64>().ok()?);
        }
    }
    None
}

fn main() {
    if wanted("run") {
        let dir = tempfile::tempdir().unwrap();
        let mut worker = worker(dir.path());
        save(
            &mut worker,
            r#"{"name": "quick", "trigger": {"kind": "manual"}, "mode": {"kind": "parallel", "limit": 1000}, "inputs": [{"name": "n", "type": "integer"}], "steps": [
                {"id": "a", "kind": "condition", "left": "${trigger.data.n}", "op": "gte", "right": "0"},
                {"id": "b", "kind": "condition", "left": "${steps.a.data.result}", "op": "equals", "right": "true"},
                {"id": "tell", "kind": "notify", "title": "run ${trigger.data.n}"},
                {"id": "c", "kind": "condition", "left": "${steps.tell.data.delivered}", "op": "equals", "right": "true"}]}"#,
        );
        let mut samples = Vec::new();
        for n in 0..300 {
            let (reply, done) = crossbeam_channel::bounded(1);
            let started = Instant::now();
            worker.handle(AutomationsCommand::Run { name: "quick".into(), data: serde_json::json!({"n": n}), origin: Origin::User, reply: Some(reply) }).unwrap();
            done.recv().unwrap().unwrap();
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        samples.sort_by(f64::total_cmp);
        println!("automations/run: a run of 4 steps (3 conditions, 1 notification), 300 runs: p50 {:.2} ms, p95 {:.2} ms (per step {:.2} ms)", percentile(&samples, 0.5), percentile(&samples, 0.95), percentile(&samples, 0.5) / 4.0);
    }
    if wanted("tick") {
        let dir = tempfile::tempdir().unwrap();
        let mut worker = worker(dir.path());
        fifty(&mut worker);
        worker.tick().unwrap();
        let mut samples = Vec::new();
        for _ in 0..500 {
            let started = Instant::now();
            worker.tick().unwrap();
            samples.push(started.elapsed().as_secs_f64() * 1_000_000.0);
        }
        samples.sort_by(f64::total_cmp);
        println!("automations/tick: one wake-up with 50 enabled flows: p50 {:.0} µs, p95 {:.0} µs", percentile(&samples, 0.5), percentile(&samples, 0.95));
    }
    if wanted("gate") {
        // The gate's whole decision for one notification: its counters read from an inbox of
        // 10,000 (SQLite, indexed) and the pure verdict.
        use cowork::automations::flow::NotifyTier;
        let dir = tempfile::tempdir().unwrap();
        let conn = cowork::store::open_writer(&dir.path().join("cowork.db")).unwrap();
        let now = cowork::ids::now_millis();
        for i in 0..10_000i64 {
            let row = cowork::notify::store::Row {
                notification_id: i + 1,
                source: format!("flow:f{}", i % 40),
                tier: [NotifyTier::Urgent, NotifyTier::Helpful, NotifyTier::Informational][(i % 3) as usize],
                title: format!("notification {i}"),
                body: String::new(),
                action: cowork::automations::steps::NoticeAction::None,
                state: "shown".into(),
                reason: None,
                release_at_millis: None,
                created_at_millis: now - (10_000 - i) * 60_000,
                shown_at_millis: Some(now - (10_000 - i) * 60_000),
                desktop_id: Some(i as u32),
                closed_at_millis: None,
                why: format!("Why: your automation \"f{}\" (every 15m)", i % 40),
            };
            cowork::notify::store::insert(&conn, &row).unwrap();
        }
        let policy = cowork::notify::gate::Policy::default();
        let situation = cowork::notify::gate::Situation { now_millis: now, same_app_since_millis: Some(now - 5 * 60_000), ..Default::default() };
        let mut samples = Vec::new();
        for i in 0..2_000 {
            let started = Instant::now();
            let counts = cowork::notify::store::counts(&conn, NotifyTier::Helpful, &format!("flow:f{}", i % 40), now).unwrap();
            let verdict = cowork::notify::gate::decide(NotifyTier::Helpful, now, &situation, &counts, &policy);
            samples.push(started.elapsed().as_secs_f64() * 1_000_000.0);
            std::hint::black_box(verdict);
        }
        samples.sort_by(f64::total_cmp);
        println!("automations/gate: one notification's decision (counters from an inbox of 10,000 + the verdict): p50 {:.0} µs, p95 {:.0} µs", percentile(&samples, 0.5), percentile(&samples, 0.95));
    }
    if wanted("idle") {
        let dir = tempfile::tempdir().unwrap();
        let mut setup = worker(dir.path());
        fifty(&mut setup);
        drop(setup);
        let mut handle = spawn(dir.path());
        std::thread::sleep(Duration::from_secs(2));
        let before = thread_cpu_ticks("automations").expect("the automations thread");
        let started = Instant::now();
        std::thread::sleep(Duration::from_secs(60));
        let after = thread_cpu_ticks("automations").unwrap();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let percent = (after - before) as f64 / hz / started.elapsed().as_secs_f64() * 100.0;
        println!("automations/idle: the automations thread with 50 enabled flows over 60 s: {percent:.3} % of one core ({} ticks of 1/{hz} s)", after - before);
        handle.shutdown(AutomationsCommand::Shutdown, Duration::from_secs(5));
    }
    if wanted("lateness") {
        let dir = tempfile::tempdir().unwrap();
        let mut setup = worker(dir.path());
        for i in 0..10 {
            save(&mut setup, &format!(r#"{{"name": "minutely_{i}", "trigger": {{"kind": "schedule", "schedule": "every 1m"}}, "steps": [{{"id": "c", "kind": "condition", "left": "1", "op": "equals", "right": "1"}}]}}"#));
        }
        drop(setup);
        let mut handle = spawn(dir.path());
        std::thread::sleep(Duration::from_secs(125));
        handle.shutdown(AutomationsCommand::Shutdown, Duration::from_secs(5));
        let conn = cowork::store::open_read_only(&dir.path().join("cowork.db")).unwrap();
        let mut late: Vec<f64> = cowork::automations::store::recent_runs(&conn, None, 1000)
            .unwrap()
            .iter()
            .map(|r| (r.created_at_millis - cowork::ids::parse_time(r.scope.trigger["scheduled_for"].as_str().unwrap(), 0).unwrap()) as f64)
            .collect();
        late.sort_by(f64::total_cmp);
        println!("automations/lateness: {} scheduled runs on the real clock: p50 {:.0} ms, p95 {:.0} ms, max {:.0} ms", late.len(), percentile(&late, 0.5), percentile(&late, 0.95), late[late.len() - 1]);
    }
}
