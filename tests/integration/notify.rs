//! Notifications against a real notification daemon: Debian's dunst under
//! Xvfb on a private session bus, driven with `dunstctl` (its context menu
//! goes through a dmenu script that picks Accept; `close` dismisses as a
//! user would; a low-urgency timeout expires). Then the whole chain: a
//! flow's agent step (a scripted model) asks to write a file, the run parks,
//! the approval notification's Accept approves it, the run finishes.

use std::process::Stdio;
use std::time::{Duration, Instant};

use cowork::automations::flow::NotifyTier;
use cowork::automations::steps::{Notice, NoticeAction, Notifier};
use cowork::notify::{Activity, NotifyClient, NotifyCommand, store as inbox};
use cowork::notify::gate::Policy;
use serde_json::json;

use super::support::{XSession, have_program, require, temp_dir, test_sink};

struct Dunst {
    _dunst: super::support::ChildGuard,
    _bus: super::support::ChildGuard,
    x: XSession,
    bus: String,
    _dir: tempfile::TempDir,
}

impl Dunst {
    /// What dunst said, for a failure's message.
    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("dunst.log")).unwrap_or_default()
    }
}

impl Dunst {
    /// Chooses Accept in dunst's context menu until a call is approved (the
    /// menu may open before the notification is ready); the call approved.
    fn accept(&self, approved: &crossbeam_channel::Receiver<i64>) -> Option<i64> {
        for _ in 0..10 {
            assert!(self.ctl(&["context"]).0);
            if let Ok(call) = approved.recv_timeout(Duration::from_secs(3)) {
                return Some(call);
            }
        }
        None
    }

    /// Xvfb, a session bus and dunst, whose context menu always picks the Accept line.
    fn start() -> Option<Dunst> {
        if !require(XSession::available() && have_program("dunst") && have_program("dunstctl"), "Xvfb and dunst") {
            return None;
        }
        let x = XSession::start();
        let dir = temp_dir();
        // A bus from which nothing is activated: a session bus would start Debian's
        // dunst (default config) when dunstctl asked before ours had the name.
        let (bus_guard, bus) = super::support::bare_session_bus(dir.path());
        let pick = dir.path().join("pick-accept.sh");
        std::fs::write(&pick, "#!/bin/sh\ngrep -m1 -i accept\n").unwrap();
        std::fs::set_permissions(&pick, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let rc = dir.path().join("dunstrc");
        std::fs::write(&rc, format!("[global]\n    dmenu = {}\n[urgency_low]\n    timeout = 1\n[urgency_normal]\n    timeout = 0\n[urgency_critical]\n    timeout = 0\n", pick.display())).unwrap();
        let log = std::fs::File::create(dir.path().join("dunst.log")).unwrap();
        let child = x.command("dunst").env("DBUS_SESSION_BUS_ADDRESS", &bus).args(["-config", rc.to_str().unwrap(), "-verbosity", "info"]).stdout(Stdio::null()).stderr(log).spawn().unwrap();
        let guard = super::support::ChildGuard(child);
        let dunst = Dunst { x, bus, _dir: dir, _dunst: guard, _bus: bus_guard };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !dunst.ctl(&["is-paused"]).0 {
            assert!(Instant::now() < deadline, "dunst did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(dunst)
    }

    fn ctl(&self, args: &[&str]) -> (bool, String) {
        let out = self.x.command("dunstctl").env("DBUS_SESSION_BUS_ADDRESS", &self.bus).args(args).stdin(Stdio::null()).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    fn displayed(&self) -> usize {
        self.ctl(&["count", "displayed"]).1.parse().unwrap_or(0)
    }

}

fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "waited in vain: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn state(db: &std::path::Path, id: i64) -> (String, Option<String>) {
    let conn = cowork::store::open_read_only(db).unwrap();
    // Not there yet: the worker has not taken it from its channel.
    inbox::by_id(&conn, id).unwrap().map_or((String::new(), None), |row| (row.state, row.reason))
}

/// A notify worker whose Accept hook sends the approved call's id to `approved`.
pub fn spawn_worker(config: cowork::notify::NotifyConfig, approved: crossbeam_channel::Sender<i64>) -> (cowork::runtime::WorkerHandle<NotifyCommand>, NotifyClient) {
    let (sink, _) = test_sink();
    let channel = crossbeam_channel::bounded(64);
    let client = NotifyClient(channel.0.clone());
    let handle = cowork::notify::spawn_notify(
        config,
        channel,
        move || {
            let approved = approved.clone();
            cowork::notify::Hooks { approve: Box::new(move |call| approved.send(call).unwrap()), open: Box::new(|_| {}), restore_local: Box::new(|| {}), listen: Box::new(|_| {}), task: Box::new(|_| {}) }
        },
        sink.narrow(),
        cowork::runtime::RestartPolicy::default(),
    )
    .unwrap();
    (handle, client)
}

fn notice(source: &str, tier: NotifyTier, title: &str, action: NoticeAction) -> Notice {
    Notice { source: source.into(), tier, title: title.into(), body: format!("from {source}"), action, why: format!("Why: {source} is testing") }
}

#[test]
fn a_real_dunst_shows_accepts_dismisses_and_expires_and_the_gate_holds_defers_and_caps_across_a_restart() {
    let Some(dunst) = Dunst::start() else { return };
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    drop(cowork::store::open_writer(&db).unwrap());
    // No cooldown or bundling here (unit-tested); two informational notifications an hour.
    let policy = Policy { caps_per_hour: [20, 6, 2], cooldown_millis: 0, bundle_millis: 0, ..Policy::default() };
    let config = cowork::notify::NotifyConfig { store: super::support::store_link(&db), bus: Some(dunst.bus.clone()), policy };
    let (approved_tx, approved) = crossbeam_channel::bounded(8);
    let spawn = |config: cowork::notify::NotifyConfig| spawn_worker(config, approved_tx.clone());
    let (mut worker, client) = spawn(config.clone());

    // An approval: shown with Accept; Accept in dunst's menu approves that call.
    let id = client.post(notice("approval", NotifyTier::Urgent, "\"tidy\" waits for your approval", NoticeAction::Approve { call_id: 42 })).unwrap();
    until("the approval is displayed", || dunst.displayed() == 1);
    let call = dunst.accept(&approved);
    assert_eq!(call, Some(42), "dunst said:\n{}", dunst.log());
    until("accepted in the inbox", || state(&db, id).0 == "accepted");

    // An informational one expires (dunst's low-urgency timeout): expired, not dismissed.
    let fyi = client.post(notice("flow:fyi", NotifyTier::Informational, "FYI", NoticeAction::None)).unwrap();
    until("expired", || state(&db, fyi).0 == "expired");

    // Dismissed three times by the user: cowork asks whether to mute the source, and does not mute it.
    for n in 0..3 {
        let id = client.post(notice("flow:noisy", NotifyTier::Helpful, &format!("Noisy {n}"), NoticeAction::None)).unwrap();
        until("shown", || state(&db, id).0 == "shown");
        until("displayed", || dunst.displayed() >= 1);
        assert!(dunst.ctl(&["close"]).0);
        until("dismissed", || state(&db, id).0 == "dismissed");
    }
    let conn = cowork::store::open_read_only(&db).unwrap();
    until("the mute proposal", || inbox::inbox(&conn, 50).unwrap().iter().any(|r| r.action == NoticeAction::Mute { source: "flow:noisy".into() }));
    assert!(!inbox::counts(&conn, NotifyTier::Helpful, "flow:noisy", cowork::ids::now_millis()).unwrap().source_muted, "asked, not muted");

    // Do not disturb (dunst paused): held in the inbox, shown once it ends.
    assert!(dunst.ctl(&["set-paused", "true"]).0);
    let held = client.post(notice("flow:dnd", NotifyTier::Helpful, "During do not disturb", NoticeAction::None)).unwrap();
    until("held", || state(&db, held).1.unwrap_or_default().contains("do not disturb"));
    assert_eq!(state(&db, held).0, "pending");
    assert!(dunst.ctl(&["set-paused", "false"]).0);
    worker.commands.send(NotifyCommand::Activity(Activity::Back { at_millis: cowork::ids::now_millis() })).unwrap();
    until("shown after do not disturb", || state(&db, held).0 == "shown");

    // A focus session (one app for half an hour): deferred, then shown at the switch to another app.
    let now = cowork::ids::now_millis();
    worker.commands.send(NotifyCommand::Activity(Activity::Focus { app: "Editor".into(), at_millis: now - 30 * 60_000 })).unwrap();
    let deferred = client.post(notice("flow:focus", NotifyTier::Helpful, "While you focus", NoticeAction::None)).unwrap();
    until("deferred", || state(&db, deferred).1.unwrap_or_default().contains("deferred"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(state(&db, deferred).0, "pending", "still deferred while the session lasts");
    worker.commands.send(NotifyCommand::Activity(Activity::Focus { app: "Browser".into(), at_millis: cowork::ids::now_millis() })).unwrap();
    until("released at the break", || state(&db, deferred).0 == "shown");

    // Two informational ones this hour (the expired one and the mute proposal): a third goes to the inbox only,
    // and a restart does not reset the count.
    let capped = client.post(notice("flow:fyi2", NotifyTier::Informational, "Third FYI", NoticeAction::None)).unwrap();
    until("capped", || state(&db, capped).0 == "inbox");
    assert!(worker.shutdown(NotifyCommand::Shutdown, Duration::from_secs(5)));
    // After the restart, with a 10-minute cooldown: the cap still holds, and a source that spoke a moment ago waits.
    let (mut worker, client) = spawn(cowork::notify::NotifyConfig { policy: Policy { cooldown_millis: 10 * 60_000, ..config.policy.clone() }, ..config });
    let again = client.post(notice("flow:fyi3", NotifyTier::Informational, "Fourth FYI", NoticeAction::None)).unwrap();
    until("capped after the restart", || state(&db, again).0 == "inbox");
    assert!(state(&db, again).1.unwrap().contains("informational notifications were shown"));
    let cooled = client.post(notice("flow:focus", NotifyTier::Helpful, "Again so soon", NoticeAction::None)).unwrap();
    until("cooling down after the restart", || state(&db, cooled).1.unwrap_or_default().contains("spoke a moment ago"));
    assert_eq!(state(&db, cooled).0, "pending");
    assert!(worker.shutdown(NotifyCommand::Shutdown, Duration::from_secs(5)));
}

#[test]
fn a_flows_agent_step_parks_at_a_risky_call_and_accept_on_the_notification_finishes_the_run() {
    let Some(dunst) = Dunst::start() else { return };
    let home = temp_dir();
    let target = home.path().join("draft.txt");
    let server = super::providers::scripted(vec![
        super::agent::calls(&[("write_file", json!({"path": target.to_str().unwrap(), "content": "Dear customer, fixed."}))]),
        super::agent::answer("Saved the draft."),
    ]);
    let (data, _paths) = super::agent::fixture(&server, "Tickets", "");
    let flows = json!({"name": "draft_reply", "trigger": {"kind": "manual"}, "steps": [
        {"id": "draft", "kind": "agent", "prompt": "Write a reply to the new ticket into the draft file", "tools": ["write_file"], "tier": "auto"}]});
    let file = data.path().join("flow.json");
    std::fs::write(&file, flows.to_string()).unwrap();
    let cowork = |args: &[&str]| {
        let mut command = dunst.x.command(env!("CARGO_BIN_EXE_cowork"));
        command.env("DBUS_SESSION_BUS_ADDRESS", &dunst.bus);
        command.env("COWORK_LOG", std::env::var("COWORK_TEST_CHILD_LOG").unwrap_or_else(|_| "warn".into())).env("HOME", home.path()).arg("--data-dir").arg(data.path()).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        command
    };
    assert!(cowork(&["automations", "import", file.to_str().unwrap()]).output().unwrap().status.success());
    let child = cowork(&["automations", "run", "draft_reply", "--keep-waiting", "--wait-secs", "60"]).spawn().unwrap();
    // The run parks: nothing is written until the user says so.
    until("the approval notification", || dunst.displayed() == 1);
    assert!(!target.exists());
    let conn = cowork::store::open_read_only(&data.path().join("cowork.db")).unwrap();
    let shown = inbox::inbox(&conn, 10).unwrap();
    assert!(shown.iter().any(|r| r.title.contains("waits for your approval") && r.body.contains("write_file") && r.state == "shown"), "{shown:?}");
    drop(conn);
    // Accept from the notification's menu (asked again while dunst may still be drawing it under load).
    let mut child = child;
    let deadline = Instant::now() + Duration::from_secs(45);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        if dunst.displayed() >= 1 {
            assert!(dunst.ctl(&["context"]).0);
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let diagnosis = || {
        let conn = cowork::store::open_read_only(&data.path().join("cowork.db")).unwrap();
        let inbox: Vec<String> = inbox::inbox(&conn, 10).unwrap().iter().map(|r| format!("{} {} {:?} {:?}", r.title, r.state, r.desktop_id, r.reason)).collect();
        let calls: Vec<String> = conn.prepare("SELECT tool, status, decided_by FROM operation_calls").unwrap().query_map([], |r| Ok(format!("{}:{}:{:?}", r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<String>>(2)?))).unwrap().map(Result::unwrap).collect();
        format!("inbox {inbox:?}\ncalls {calls:?}\ndunst said:\n{}", dunst.log())
    };
    assert!(out.status.success(), "{stdout}\n{}\n{}", String::from_utf8_lossy(&out.stderr), diagnosis());
    assert!(stdout.contains("done"), "{stdout}\n{}", diagnosis());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "Dear customer, fixed.");
    let conn = cowork::store::open_read_only(&data.path().join("cowork.db")).unwrap();
    let id = cowork::automations::store::flow_by_name(&conn, "draft_reply").unwrap().unwrap().automation_id;
    let run = cowork::automations::store::recent_runs(&conn, Some(id), 1).unwrap().remove(0);
    assert_eq!(run.status, cowork::automations::store::RunStatus::Done);
    let steps = cowork::automations::store::steps(&conn, run.run_id).unwrap();
    assert_eq!(steps[0].output.as_ref().unwrap()["text"], "Saved the draft.");
    let calls = cowork::agent::store::calls(&conn, steps[0].operation_id.unwrap()).unwrap();
    assert_eq!(calls[0].decided_by.as_deref(), Some("user (notification)"), "approved by the user, from the notification");
}

/// F10 of the security review: any peer on the session bus can emit an
/// `ActionInvoked` signal with the same interface and path as the
/// notification server; only the server's own (the owner of
/// `org.freedesktop.Notifications`) approve anything.
#[test]
fn a_forged_notification_action_approves_nothing_and_the_body_shows_the_call() {
    let Some(dunst) = Dunst::start() else { return };
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    drop(cowork::store::open_writer(&db).unwrap());
    let config = cowork::notify::NotifyConfig { store: super::support::store_link(&db), bus: Some(dunst.bus.clone()), policy: Policy { cooldown_millis: 0, bundle_millis: 0, ..Policy::default() } };
    let (approved_tx, approved) = crossbeam_channel::bounded(8);
    let (mut worker, client) = spawn_worker(config, approved_tx);
    let (shown, whole) = cowork::automations::worker::approval_arguments("run_command", r#"{"command":"echo ok <b>hidden</b> \u202egnp.exe"}"#);
    assert!(whole);
    let body = format!("Step \"x\" wants to run run_command:\n{shown}");
    let id = client.post(Notice { source: "approval".into(), tier: NotifyTier::Urgent, title: "\"tidy\" waits for your approval".into(), body, action: NoticeAction::Approve { call_id: 77 }, why: String::new() }).unwrap();
    until("shown", || state(&db, id).0 == "shown");
    until("displayed", || dunst.displayed() == 1);
    let desktop_id = {
        let conn = cowork::store::open_read_only(&db).unwrap();
        inbox::by_id(&conn, id).unwrap().unwrap().desktop_id.unwrap()
    };
    // Another peer on the bus forges Accept, many times: nothing is approved.
    let forger = zbus::blocking::connection::Builder::address(dunst.bus.as_str()).unwrap().build().unwrap();
    for _ in 0..5 {
        forger.emit_signal(None::<&str>, "/org/freedesktop/Notifications", "org.freedesktop.Notifications", "ActionInvoked", &(desktop_id, "accept")).unwrap();
    }
    assert!(approved.recv_timeout(Duration::from_millis(1500)).is_err(), "a forged signal approved the call");
    assert_eq!(state(&db, id).0, "shown");
    // The real server's Accept still works.
    let call = dunst.accept(&approved);
    assert_eq!(call, Some(77), "dunst said:\n{}", dunst.log());
    assert!(worker.shutdown(NotifyCommand::Shutdown, Duration::from_secs(5)));
}
