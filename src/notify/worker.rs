//! The `notify` worker: every notification from every source (a flow, a failed
//! run, a parked approval, the local model paused by heat or the battery,
//! cowork's own proposals) enters the inbox in SQLite first, then the gate
//! decides; what passes goes to the desktop over the freedesktop Notifications
//! interface with actions (Open, Accept only for something to accept, Dismiss)
//! and urgency from its tier. It reads on a read-only connection of its own and
//! writes the notification tables through the store's one writer
//! (`StoreLink::call`).
//!
//! Senders use `NotifyClient` (`NotifyCommand::Post`, waiting at most 2 s for
//! room in the bounded(64) channel). The desktop's answers (an action, a close
//! with its reason) come back on a `notify-signals` thread (zbus, bounded(64)),
//! believed only from the bus name that owns `org.freedesktop.Notifications`:
//! Accept on an approval sends `AgentCommand::DecideAs { Once }` for that one
//! call (offered only when the body shows the whole call, markup escaped), Open
//! shows the sidebar, a close by the user is a dismissal (three in a row
//! propose muting the source; only the user's Accept mutes it), a timeout is an
//! expiry. dunst's `paused`, or the `Inhibited` property, is do-not-disturb.
//!
//! Capture tells it focus changes (a new app is a natural break that releases
//! what was deferred), away, back and a fullscreen window, which is how it
//! knows a focus session and its natural breaks. It sleeps until the earliest
//! release time, and at most 20 s while something is held, to read
//! do-not-disturb again. Without a notification service a notice stays in the
//! inbox with the reason.

use std::collections::HashMap;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded, select};
use rusqlite::Connection;

use super::events::InboxItem;
use super::gate::{self, Policy, Situation, Verdict};
use super::store::{self as db, Row};
use crate::automations::flow::NotifyTier;
use crate::automations::steps::{Notice, NoticeAction, Notifier};
use crate::ids::{next_id, now_millis};
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, WorkerState, spawn_supervised};

/// The longest the loop sleeps while something is held (do-not-disturb is read again then).
const RECHECK: Duration = Duration::from_secs(20);
/// Notifications the Apps panel's inbox lists.
const INBOX_SHOWN: usize = 50;
/// Dismissals in a row after which muting the source is proposed.
const MUTE_AFTER_DISMISSALS: u32 = 3;
/// Muting one source is proposed at most once a week.
const PROPOSE_EVERY_MILLIS: i64 = 7 * 86_400_000;

#[derive(Debug)]
pub enum NotifyCommand {
    /// A notice, with the id the sender gave it.
    Post { notification_id: i64, notice: Box<Notice> },
    Activity(Activity),
    /// The inbox's buttons: the same as the desktop's.
    Act { notification_id: i64, act: Act },
    /// The user changed how often cowork may interrupt.
    SetPolicy(Policy),
    Shutdown,
}

/// What capture saw.
#[derive(Clone, Debug, PartialEq)]
pub enum Activity {
    /// An app gained focus (a natural break for whatever was deferred).
    Focus { app: String, at_millis: i64 },
    Away { at_millis: i64 },
    Back { at_millis: i64 },
    /// A fullscreen window has (or no longer has) focus.
    Presenting(bool),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    Accept,
    Open,
    Dismiss,
}

/// What the desktop said about a notification.
#[derive(Clone, Debug, PartialEq)]
enum DesktopSignal {
    Action { desktop_id: u32, key: String },
    Closed { desktop_id: u32, reason: u32 },
}

/// What Accept and Open do beyond the inbox (the app wires them to the agent and the window).
pub struct Hooks {
    pub approve: Box<dyn Fn(i64) + Send>,
    pub open: Box<dyn Fn(i64) + Send>,
    pub restore_local: Box<dyn Fn() + Send>,
    /// Listen to the call that started then (listen mode for this meeting).
    pub listen: Box<dyn Fn(i64) + Send>,
    /// Start a chat with this request (the sidebar opens with it).
    pub task: Box<dyn Fn(String) + Send>,
}

#[derive(Clone, Debug)]
pub struct NotifyConfig {
    /// Writes go to the store's one writer; reads use a read-only connection of this worker's.
    pub store: crate::store::StoreLink,
    /// The session bus (None: `$DBUS_SESSION_BUS_ADDRESS`).
    pub bus: Option<String>,
    pub policy: Policy,
}

/// The notification service on the session bus.
struct Desktop {
    conn: zbus::blocking::Connection,
}

const DEST: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";

impl Desktop {
    fn connect(bus: Option<&str>, signals: Sender<DesktopSignal>) -> Result<Desktop, String> {
        let conn = match bus {
            Some(address) => zbus::blocking::connection::Builder::address(address).and_then(|b| b.build()),
            None => zbus::blocking::Connection::session(),
        }
        .map_err(|err| format!("no session bus for notifications: {err}"))?;
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .interface(DEST)
            .map_err(|err| err.to_string())?
            .path(PATH)
            .map_err(|err| err.to_string())?
            .build();
        let messages = zbus::blocking::MessageIterator::for_match_rule(rule, &conn, Some(64)).map_err(|err| format!("cannot listen to the notification service: {err}"))?;
        // Only the notification server's own signals count: any peer on the session bus can emit
        // one with the same interface and path (`gdbus emit … ActionInvoked ID accept`). The bus
        // stamps each message with its sender's unique name, which a peer cannot forge.
        let owner_conn = conn.clone();
        let owner_of = move || -> Option<String> {
            let reply = owner_conn.call_method(Some("org.freedesktop.DBus"), "/org/freedesktop/DBus", Some("org.freedesktop.DBus"), "GetNameOwner", &(DEST,)).ok()?;
            reply.body().deserialize::<String>().ok()
        };
        let mut owner = owner_of();
        // Ends when the connection closes or nobody listens any more.
        std::thread::Builder::new()
            .name("notify-signals".into())
            .spawn(move || {
                for message in messages {
                    let Ok(message) = message else { continue };
                    let header = message.header();
                    let sender = header.sender().map(|s| s.as_str().to_owned());
                    if sender.is_none() || sender != owner {
                        // The server may have restarted under a new name: asked again once.
                        owner = owner_of();
                        if sender.is_none() || sender != owner {
                            tracing::warn!(?sender, ?owner, "a notification signal from a peer that is not the notification server was ignored");
                            continue;
                        }
                    }
                    let signal = match header.member().map(|m| m.as_str()) {
                        Some("ActionInvoked") => message.body().deserialize::<(u32, String)>().ok().map(|(desktop_id, key)| DesktopSignal::Action { desktop_id, key }),
                        Some("NotificationClosed") => message.body().deserialize::<(u32, u32)>().ok().map(|(desktop_id, reason)| DesktopSignal::Closed { desktop_id, reason }),
                        _ => None,
                    };
                    if let Some(signal) = signal
                        && signals.send(signal).is_err()
                    {
                        break;
                    }
                }
            })
            .map_err(|err| err.to_string())?;
        Ok(Desktop { conn })
    }

    /// Whether the server reads markup in bodies (then text is escaped, so
    /// markup in a call's arguments cannot hide part of them).
    fn body_markup(&self) -> bool {
        self.conn
            .call_method(Some(DEST), PATH, Some(DEST), "GetCapabilities", &())
            .ok()
            .and_then(|reply| reply.body().deserialize::<Vec<String>>().ok())
            .is_none_or(|caps| caps.iter().any(|c| c == "body-markup"))
    }

    fn show(&self, title: &str, body: &str, tier: NotifyTier, accept: Option<&str>) -> Result<u32, String> {
        let title = crate::tools::visible(title, false);
        let body = crate::tools::visible(body, self.body_markup());
        let (title, body) = (title.as_str(), body.as_str());
        let urgency: u8 = match tier {
            NotifyTier::Informational => 0,
            NotifyTier::Helpful => 1,
            NotifyTier::Urgent => 2,
        };
        let mut hints: HashMap<&str, zbus::zvariant::Value<'_>> = HashMap::new();
        hints.insert("urgency", zbus::zvariant::Value::U8(urgency));
        hints.insert("desktop-entry", zbus::zvariant::Value::from("cowork"));
        let mut actions = vec!["default", "Open"];
        if let Some(label) = accept {
            actions.extend(["accept", label]);
        }
        actions.extend(["dismiss", "Dismiss"]);
        let reply = self
            .conn
            .call_method(Some(DEST), PATH, Some(DEST), "Notify", &("cowork", 0u32, "", title, body, actions, hints, -1i32))
            .map_err(|err| format!("no notification service answered: {err}"))?;
        reply.body().deserialize::<u32>().map_err(|err| format!("the notification service answered oddly: {err}"))
    }

    fn close(&self, desktop_id: u32) {
        let _ = self.conn.call_method(Some(DEST), PATH, Some(DEST), "CloseNotification", &(desktop_id,));
    }

    /// Do-not-disturb as the server says it: dunst's `paused`, or the `Inhibited` property (KDE, GNOME 46+).
    fn do_not_disturb(&self) -> bool {
        let get = |interface: &str, property: &str| -> Option<bool> {
            let reply = self.conn.call_method(Some(DEST), PATH, Some("org.freedesktop.DBus.Properties"), "Get", &(interface, property)).ok()?;
            let value: zbus::zvariant::OwnedValue = reply.body().deserialize().ok()?;
            bool::try_from(value).ok()
        };
        get("org.dunstproject.cmd0", "paused").or_else(|| get(DEST, "Inhibited")).unwrap_or(false)
    }
}

pub struct NotifyWorker {
    config: NotifyConfig,
    conn: Option<Connection>,
    desktop: Option<Desktop>,
    signals: (Sender<DesktopSignal>, Receiver<DesktopSignal>),
    hooks: Hooks,
    sink: EventSink<Vec<InboxItem>>,
    /// The inbox changed since the Apps panel was last told.
    changed: bool,
    /// The focused app and since when (with the user present).
    focus: Option<(String, i64)>,
    away: bool,
    presenting: bool,
}

impl NotifyWorker {
    pub fn new(config: NotifyConfig, hooks: Hooks, sink: EventSink<Vec<InboxItem>>) -> Self {
        Self { config, conn: None, desktop: None, signals: bounded(64), hooks, sink, changed: true, focus: None, away: false, presenting: false }
    }

    /// The read-only connection.
    fn conn(&self) -> anyhow::Result<&Connection> {
        self.conn.as_ref().ok_or_else(|| anyhow::anyhow!("the notify worker has no database"))
    }

    fn set_gate(&self, notification_id: i64, state: &'static str, reason: String, release_at_millis: Option<i64>) -> anyhow::Result<()> {
        self.config.store.write("notification gate", move |conn| db::set_gate(conn, notification_id, state, &reason, release_at_millis))
    }

    /// Closes a notification as `state`; false when it was closed already.
    fn close(&self, notification_id: i64, state: &'static str, now_millis: i64) -> anyhow::Result<bool> {
        self.config.store.write("close notification", move |conn| db::close(conn, notification_id, state, now_millis))
    }

    fn acted(&self, source: &str) -> anyhow::Result<()> {
        let source = source.to_owned();
        self.config.store.write("notification acted on", move |conn| db::acted(conn, &source))
    }

    pub fn open(&mut self) -> anyhow::Result<()> {
        self.conn = Some(self.config.store.read_only()?);
        Ok(())
    }

    fn desktop(&mut self) -> Result<&Desktop, String> {
        if self.desktop.is_none() {
            self.desktop = Some(Desktop::connect(self.config.bus.as_deref(), self.signals.0.clone())?);
        }
        self.desktop.as_ref().ok_or_else(|| "no notification service".to_owned())
    }

    fn situation(&mut self, now: i64) -> Situation {
        let do_not_disturb = self.desktop().map(Desktop::do_not_disturb).unwrap_or(false);
        Situation {
            now_millis: now,
            do_not_disturb,
            presenting: self.presenting,
            away: self.away,
            same_app_since_millis: self.focus.as_ref().filter(|_| !self.away).map(|(_, since)| *since),
        }
    }

    /// Puts a notice in the inbox; the loop lets the gate look at everything
    /// pending after each command (so an activity change releases what it may).
    pub fn post(&mut self, notification_id: i64, notice: Notice) -> anyhow::Result<()> {
        let row = Row {
            notification_id,
            source: notice.source,
            tier: notice.tier,
            title: notice.title,
            body: notice.body,
            action: notice.action,
            state: "pending".into(),
            reason: None,
            release_at_millis: None,
            created_at_millis: now_millis(),
            shown_at_millis: None,
            desktop_id: None,
            closed_at_millis: None,
            why: notice.why,
        };
        self.config.store.write("notification", move |conn| db::insert(conn, &row))?;
        self.changed = true;
        Ok(())
    }

    /// The gate over everything pending: what passes is shown (urgent ones
    /// each alone, the rest as one); returns when to look again.
    pub fn process(&mut self) -> anyhow::Result<Option<i64>> {
        let pending = db::pending(self.conn()?)?;
        if pending.is_empty() {
            return Ok(None);
        }
        self.changed = true;
        let now = now_millis();
        let situation = self.situation(now);
        let mut next: Option<i64> = None;
        let mut due: Vec<Row> = Vec::new();
        let mut wake_at = |at: i64| next = Some(next.map_or(at, |n: i64| n.min(at)));
        for row in pending {
            let counts = db::counts(self.conn()?, row.tier, &row.source, now)?;
            let verdict = gate::decide(row.tier, row.created_at_millis, &situation, &counts, &self.config.policy);
            match verdict {
                Verdict::Deliver => due.push(row),
                Verdict::Hold { why } => {
                    self.set_gate(row.notification_id, "pending", format!("held: {why}"), None)?;
                    wake_at(now + RECHECK.as_millis() as i64);
                }
                Verdict::Defer { until_millis } => {
                    self.set_gate(row.notification_id, "pending", "deferred: you are focused; it comes at your next break".to_owned(), Some(until_millis))?;
                    wake_at(until_millis);
                }
                Verdict::Cooldown { until_millis } => {
                    self.set_gate(row.notification_id, "pending", "waiting: this source spoke a moment ago".to_owned(), Some(until_millis))?;
                    wake_at(until_millis);
                }
                Verdict::Bundle { until_millis } => {
                    self.set_gate(row.notification_id, "pending", "bundled with what arrives next".to_owned(), Some(until_millis))?;
                    wake_at(until_millis);
                }
                Verdict::Capped { .. } => self.set_gate(row.notification_id, "inbox", format!("in the inbox only: the hour's {} notifications were shown", row.tier.as_str()), None)?,
                Verdict::Muted => self.set_gate(row.notification_id, "inbox", "in the inbox only: you muted this source".to_owned(), None)?,
            }
        }
        let (urgent, rest): (Vec<Row>, Vec<Row>) = due.into_iter().partition(|r| r.tier == NotifyTier::Urgent || matches!(r.action, NoticeAction::Approve { .. }));
        for row in urgent {
            let accept = (row.action != NoticeAction::None).then(|| row.action.label());
            self.deliver(&[row.notification_id], &row.title, &with_why(&row.body, &row.why), row.tier, accept)?;
        }
        match rest.as_slice() {
            [] => {}
            [one] => {
                let accept = (one.action != NoticeAction::None).then(|| one.action.label());
                self.deliver(&[one.notification_id], &one.title, &with_why(&one.body, &one.why), one.tier, accept)?;
            }
            many => {
                let ids: Vec<i64> = many.iter().map(|r| r.notification_id).collect();
                let tier = many.iter().map(|r| r.tier).max().unwrap_or_default();
                let body = many.iter().map(|r| if r.body.is_empty() { format!("• {}", r.title) } else { format!("• {}: {}", r.title, r.body) }).collect::<Vec<_>>().join("\n");
                self.deliver(&ids, &format!("{} notifications from cowork", many.len()), &body, tier, None)?;
            }
        }
        Ok(next)
    }

    fn deliver(&mut self, ids: &[i64], title: &str, body: &str, tier: NotifyTier, accept: Option<&str>) -> anyhow::Result<()> {
        let shown = self.desktop().and_then(|d| d.show(title, body, tier, accept));
        match shown {
            Ok(desktop_id) => {
                tracing::debug!(desktop_id, ?ids, title, "shown on the desktop");
                {
                    let ids = ids.to_vec();
                    self.config.store.write("notification shown", move |conn| db::mark_shown(conn, &ids, desktop_id, now_millis()))?
                }
            }
            Err(err) => {
                self.desktop = None;
                for id in ids {
                    self.set_gate(*id, "inbox", format!("in the inbox only: {err}"), None)?;
                }
            }
        }
        Ok(())
    }

    /// Accept, Open or Dismiss, from the desktop or the inbox.
    pub fn act(&mut self, notification_id: i64, act: Act) -> anyhow::Result<()> {
        self.changed = true;
        let Some(row) = db::by_id(self.conn()?, notification_id)? else { return Ok(()) };
        let now = now_millis();
        match act {
            Act::Accept => {
                if !self.close(notification_id, "accepted", now)? {
                    return Ok(());
                }
                self.acted(&row.source)?;
                match &row.action {
                    NoticeAction::Approve { call_id } => (self.hooks.approve)(*call_id),
                    NoticeAction::Mute { source } => {
                        let source = source.clone();
                        self.config.store.write("mute source", move |conn| db::set_muted(conn, &source, true))?
                    }
                    NoticeAction::RestoreLocal => (self.hooks.restore_local)(),
                    NoticeAction::Listen { since_millis } => (self.hooks.listen)(*since_millis),
                    NoticeAction::Task { prompt } => (self.hooks.task)(prompt.clone()),
                    NoticeAction::None => {}
                }
            }
            Act::Open => {
                if self.close(notification_id, "opened", now)? {
                    self.acted(&row.source)?;
                }
                (self.hooks.open)(notification_id);
            }
            Act::Dismiss => {
                if self.close(notification_id, "dismissed", now)? {
                    self.learn_from_dismissal(&row.source)?;
                }
            }
        }
        if let (Some(desktop_id), Some(desktop)) = (row.desktop_id, self.desktop.as_ref())
            && act != Act::Open
        {
            desktop.close(desktop_id);
        }
        Ok(())
    }

    /// A source dismissed again and again is proposed for muting: asked, never muted silently.
    fn learn_from_dismissal(&mut self, source: &str) -> anyhow::Result<()> {
        let dismissed = source.to_owned();
        let in_a_row = self.config.store.write("notification dismissed", move |conn| db::dismissed(conn, &dismissed))?;
        let now = now_millis();
        if in_a_row >= MUTE_AFTER_DISMISSALS && !source.starts_with("cowork:") && {
            let source = source.to_owned();
            self.config.store.write("propose mute", move |conn| db::propose_mute(conn, &source, now - PROPOSE_EVERY_MILLIS, now))?
        } {
            let notice = Notice {
                source: "cowork:mute".into(),
                tier: NotifyTier::Informational,
                title: format!("Mute \"{source}\"?"),
                body: format!("You dismissed its last {in_a_row} notifications. Accept mutes it (its notifications still land in the inbox)."),
                action: NoticeAction::Mute { source: source.to_owned() },
                why: format!("Why: you dismissed {in_a_row} of its notifications in a row"),
            };
            self.post(next_id(), notice)?;
        }
        Ok(())
    }

    /// The inbox for the Apps panel, newest first.
    fn publish(&mut self) -> anyhow::Result<()> {
        if !self.changed {
            return Ok(());
        }
        self.changed = false;
        let items = db::inbox(self.conn()?, INBOX_SHOWN)?
            .into_iter()
            .map(|r| crate::notify::events::InboxItem {
                notification_id: r.notification_id,
                can_accept: r.action != NoticeAction::None,
                accept_label: r.action.label().to_owned(),
                source: r.source,
                tier: r.tier.as_str().into(),
                title: r.title,
                body: r.body,
                state: r.state,
                reason: r.reason,
                created_at_millis: r.created_at_millis,
                shown_at_millis: r.shown_at_millis,
                why: r.why,
            })
            .collect();
        self.sink.send(items);
        Ok(())
    }

    fn desktop_signal(&mut self, signal: DesktopSignal) -> anyhow::Result<()> {
        tracing::debug!(?signal, "the desktop answered");
        self.changed = true;
        match signal {
            DesktopSignal::Action { desktop_id, key } => {
                let act = match key.as_str() {
                    "accept" => Act::Accept,
                    "dismiss" => Act::Dismiss,
                    _ => Act::Open,
                };
                for row in db::by_desktop_id(self.conn()?, desktop_id)? {
                    self.act(row.notification_id, act)?;
                }
            }
            DesktopSignal::Closed { desktop_id, reason } => {
                // 1 expired, 2 dismissed by the user, 3 closed by cowork, 4 undefined.
                for row in db::by_desktop_id(self.conn()?, desktop_id)? {
                    match reason {
                        2 => self.act(row.notification_id, Act::Dismiss)?,
                        1 => {
                            self.close(row.notification_id, "expired", now_millis())?;
                        }
                        _ => {
                            self.close(row.notification_id, "closed", now_millis())?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub fn activity(&mut self, activity: Activity) -> anyhow::Result<()> {
        match activity {
            Activity::Focus { app, at_millis } => {
                // A different app is a natural break: a new stretch starts.
                if self.focus.as_ref().is_none_or(|(current, _)| *current != app) {
                    self.focus = Some((app, at_millis));
                }
            }
            Activity::Away { .. } => {
                self.away = true;
                self.focus = None;
            }
            Activity::Back { at_millis } => {
                self.away = false;
                if let Some((_, since)) = self.focus.as_mut() {
                    *since = at_millis;
                }
            }
            Activity::Presenting(on) => self.presenting = on,
        }
        Ok(())
    }

    pub fn handle(&mut self, command: NotifyCommand) -> anyhow::Result<bool> {
        match command {
            NotifyCommand::Post { notification_id, notice } => self.post(notification_id, *notice)?,
            NotifyCommand::Activity(activity) => self.activity(activity)?,
            NotifyCommand::Act { notification_id, act } => self.act(notification_id, act)?,
            NotifyCommand::SetPolicy(policy) => {
                self.config.policy = policy;
                self.changed = true;
            }
            NotifyCommand::Shutdown => return Ok(false),
        }
        Ok(true)
    }
}

impl Supervised for NotifyWorker {
    type Command = NotifyCommand;

    fn run(&mut self, commands: &Receiver<NotifyCommand>, ctx: &WorkerContext) -> anyhow::Result<()> {
        self.open()?;
        ctx.report(WorkerState::Running);
        let signals = self.signals.1.clone();
        let mut next = self.process()?;
        self.publish()?;
        loop {
            let sleep = next.map_or(Duration::from_secs(3600), |at| Duration::from_millis((at - now_millis()).clamp(0, RECHECK.as_millis() as i64) as u64));
            select! {
                recv(commands) -> command => match command {
                    Ok(command) => {
                        if !self.handle(command)? {
                            break;
                        }
                    }
                    Err(_) => break,
                },
                recv(signals) -> signal => {
                    if let Ok(signal) = signal {
                        self.desktop_signal(signal)?;
                    }
                }
                default(sleep) => {}
            }
            next = self.process()?;
            self.publish()?;
        }
        Ok(())
    }
}

/// What senders hold: posting is a `try_send` with an id made here.
#[derive(Clone)]
pub struct NotifyClient(pub Sender<NotifyCommand>);

impl Notifier for NotifyClient {
    fn post(&self, notice: Notice) -> Result<i64, String> {
        let notification_id = next_id();
        self.0.send_timeout(NotifyCommand::Post { notification_id, notice: Box::new(notice) }, Duration::from_secs(2)).map_err(|_| "the notify worker is not accepting notifications".to_owned())?;
        Ok(notification_id)
    }
}

/// A notification's body with why it appeared under it.
fn with_why(body: &str, why: &str) -> String {
    match (body.is_empty(), why.is_empty()) {
        (_, true) => body.to_owned(),
        (true, false) => why.to_owned(),
        (false, false) => format!("{body}\n{why}"),
    }
}

/// Starts the notify worker under supervision on a thread named `notify`.
pub fn spawn_notify(
    config: NotifyConfig,
    channel: (Sender<NotifyCommand>, Receiver<NotifyCommand>),
    make_hooks: impl Fn() -> Hooks + Send + 'static,
    sink: EventSink<Vec<InboxItem>>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<NotifyCommand>> {
    spawn_supervised::<NotifyWorker, _, _>(WorkerName::Notify, policy, sink.clone(), channel, move |_ctx| Ok(NotifyWorker::new(config.clone(), make_hooks(), sink.clone())))
}

#[cfg(test)]
mod visible_tests {
    #[test]
    fn markup_and_direction_characters_cannot_hide_part_of_an_approval() {
        let text = "echo ok <b>x</b> & \u{202e}gnp.exe\u{200b}";
        assert_eq!(crate::tools::visible(text, true), "echo ok &lt;b&gt;x&lt;/b&gt; &amp; \\u{202e}gnp.exe\\u{200b}");
        assert_eq!(crate::tools::visible(text, false), "echo ok <b>x</b> & \\u{202e}gnp.exe\\u{200b}");
        assert_eq!(crate::tools::visible("a\nb\tc\u{7}", false), "a\nb\tc\\u{7}");
    }
}
