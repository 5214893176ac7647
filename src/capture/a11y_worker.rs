//! The `a11y` worker: listens to AT-SPI's focus events (`StateChanged`, detail
//! `focused`) and tells the keys worker when keyboard focus enters or leaves a
//! password field (`KeysCommand::SecretField`, with the process id, so another
//! window is not silenced), so nothing typed there is kept. On Wayland, where
//! no app may see another's keys, it is also the typing stream: text inserted
//! into editable fields (`TextChanged` inserts; never password fields or
//! terminals) goes to the keys worker as `KeysCommand::Entered`, which keeps it
//! for the focused window's process only.
//!
//! It also owns desktop accessibility (`org.a11y.Status.IsEnabled` on the
//! session bus). Browsers register with AT-SPI only when it was on as they
//! started, and a fresh desktop has it off (at-spi-bus-launcher keeps it in
//! GSettings, so it survives sessions: the reason one machine saw address bars
//! and another did not). With `capture.desktop_accessibility` (on by default)
//! the worker turns it on while cowork runs, so browsers started afterwards
//! expose their address bar (capture reads URLs there), and puts it back off at
//! shutdown if it was cowork that turned it on; with the setting off it reports
//! `degraded` with what that costs (URLs from titles). Only this worker
//! switches desktop accessibility; capture only reads the tree.
//!
//! Without a session bus or accessibility bus it is degraded (password fields
//! then go undetected; the app deny list still covers password managers;
//! browser URLs come from titles) and tries again every 30 s.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use futures_lite::StreamExt;
use zbus::{MatchRule, MessageStream};
use zbus::message::Type as MessageType;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

use crate::capture::a11y::{A11yBus, ROLE_PASSWORD_TEXT, ROLE_TERMINAL, STATE_EDITABLE, desktop_accessibility, set_desktop_accessibility};
use crate::capture::events::CaptureEvent;
use crate::capture::keys::KeysCommand;
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, WorkerState, spawn_supervised};

/// How often the worker looks at its command channel while waiting for events.
const TICK: Duration = Duration::from_millis(500);
/// Without an accessibility bus, how often to look for one again.
const RECONNECT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub enum A11yCommand {
    /// The user's "turn on desktop accessibility" setting changed.
    SetDesktopAccessibility(bool),
    InjectPanic,
    Shutdown,
}

pub struct A11yWorker {
    keys: Sender<KeysCommand>,
    /// What the keys worker was last told.
    secret: Option<(u32, bool)>,
    /// The process whose password field has keyboard focus (0: none), for
    /// the screen-text stream, which reads nothing of that window then.
    secret_pid: Arc<std::sync::atomic::AtomicU32>,
    /// The setting: turn desktop accessibility on while cowork runs. Shared
    /// with the supervisor's factory, so a restarted worker keeps the latest.
    turn_on: Arc<AtomicBool>,
    /// cowork turned it on (so it turns it off again at shutdown).
    turned_on: bool,
    /// Forward text entered into fields (the typing stream on Wayland).
    fields: bool,
}

/// What the worker reports when desktop accessibility is off.
pub const ACCESSIBILITY_OFF: &str = "desktop accessibility is off: browsers do not show cowork their address bar, \
    so their URLs come from window titles (turn it on in Settings → What cowork records & privacy)";

enum Wake {
    Message(zbus::Result<zbus::Message>),
    Closed,
    Tick,
}

impl A11yWorker {
    pub fn new(keys: Sender<KeysCommand>, turn_on: Arc<AtomicBool>, fields: bool, secret_pid: Arc<std::sync::atomic::AtomicU32>) -> Self {
        Self { keys, secret: None, secret_pid, turn_on, turned_on: false, fields }
    }

    fn wants_accessibility(&self) -> bool {
        self.turn_on.load(Ordering::Relaxed)
    }

    /// Serves commands for `wait`; false when the worker should stop.
    fn idle(&mut self, commands: &Receiver<A11yCommand>, wait: Duration) -> bool {
        match commands.recv_timeout(wait) {
            Ok(A11yCommand::InjectPanic) => panic!("injected a11y fault"),
            Ok(A11yCommand::SetDesktopAccessibility(on)) => {
                self.turn_on.store(on, Ordering::Relaxed);
                true
            }
            Ok(A11yCommand::Shutdown) | Err(RecvTimeoutError::Disconnected) => false,
            Err(RecvTimeoutError::Timeout) => true,
        }
    }

    /// Brings desktop accessibility in line with the setting and reports the
    /// result: running when it is on, degraded (with what that costs) when off.
    fn apply_accessibility(&mut self, bus: &A11yBus, ctx: &WorkerContext) {
        let session = bus.session();
        let mut on = match desktop_accessibility(session) {
            Ok(on) => on,
            Err(err) => {
                ctx.report(WorkerState::Degraded(format!("cannot read desktop accessibility ({err}): browser URLs may come from titles")));
                return;
            }
        };
        if !on && self.wants_accessibility() {
            match set_desktop_accessibility(session, true) {
                Ok(()) => {
                    tracing::info!("a11y: turned desktop accessibility on; browsers started from now on show their address bar");
                    self.turned_on = true;
                    on = true;
                }
                Err(err) => tracing::warn!("a11y: cannot turn desktop accessibility on: {err}"),
            }
        } else if on && !self.wants_accessibility() && self.turned_on {
            self.restore_accessibility(bus);
            on = false;
        }
        ctx.report(if on { WorkerState::Running } else { WorkerState::Degraded(ACCESSIBILITY_OFF.into()) });
    }

    /// Turns desktop accessibility off again if cowork turned it on.
    fn restore_accessibility(&mut self, bus: &A11yBus) {
        if self.turned_on {
            match set_desktop_accessibility(bus.session(), false) {
                Ok(()) => tracing::info!("a11y: turned desktop accessibility back off"),
                Err(err) => tracing::warn!("a11y: cannot turn desktop accessibility back off: {err}"),
            }
            self.turned_on = false;
        }
    }

    /// Text inserted into a field: to the keys worker, unless the field is a
    /// password field, a terminal or not editable.
    fn text_event(&self, bus: &A11yBus, pids: &mut HashMap<String, u32>, message: &zbus::Message) {
        let header = message.header();
        let (Some(sender), Some(path)) = (header.sender(), header.path()) else { return };
        let Some((detail, text)) = inserted_text(message) else { return };
        if !detail.starts_with("insert") || text.is_empty() {
            return;
        }
        let node = (sender.to_string(), OwnedObjectPath::from(path.to_owned()));
        let Ok(role) = bus.role(&node) else { return };
        tracing::debug!(role, %detail, "a11y: text entered");
        if role == ROLE_PASSWORD_TEXT || role == ROLE_TERMINAL {
            return;
        }
        let editable = bus.states(&node).is_ok_and(|states| states.first().is_some_and(|word| word & (1 << STATE_EDITABLE) != 0));
        if !editable {
            return;
        }
        let Some(pid) = process_of(bus, pids, &node.0) else { return };
        if self.keys.try_send(KeysCommand::Entered { pid, text }).is_err() {
            tracing::debug!("a11y: the keys worker is busy, entered text was dropped");
        }
    }

    /// One focus event: `(detail, gained)` on the accessible `node`.
    fn focus_event(&mut self, bus: &A11yBus, pids: &mut HashMap<String, u32>, message: &zbus::Message) {
        let header = message.header();
        let (Some(sender), Some(path)) = (header.sender(), header.path()) else { return };
        let Some((detail, gained)) = state_change(message) else { return };
        if detail != "focused" {
            return;
        }
        let node = (sender.to_string(), OwnedObjectPath::from(path.to_owned()));
        let Ok(role) = bus.role(&node) else { return };
        let password = role == ROLE_PASSWORD_TEXT;
        // Losing focus only matters for the field that made typing secret.
        if !gained && !password {
            return;
        }
        let Some(pid) = process_of(bus, pids, &node.0) else { return };
        let secret = gained && password;
        if self.secret != Some((pid, secret)) {
            tracing::debug!(pid, secret, "a11y: password-field focus changed");
            self.secret = Some((pid, secret));
            if secret {
                self.secret_pid.store(pid, Ordering::SeqCst);
            } else {
                let _ = self.secret_pid.compare_exchange(pid, 0, Ordering::SeqCst, Ordering::SeqCst);
            }
            let _ = self.keys.try_send(KeysCommand::SecretField { pid, on: secret });
        }
    }
}

/// `(detail, detail1 == 1)` of an `org.a11y.atspi.Event.Object.StateChanged` signal.
fn state_change(message: &zbus::Message) -> Option<(String, bool)> {
    let body = message.body();
    // at-spi2-core ≥ 2.42 sends `siiva{sv}`; older ones `siiv(so)`.
    if let Ok((detail, detail1, _, _, _)) = body.deserialize::<(String, i32, i32, OwnedValue, HashMap<String, OwnedValue>)>() {
        return Some((detail, detail1 == 1));
    }
    let (detail, detail1, _, _, _) = body.deserialize::<(String, i32, i32, OwnedValue, (String, OwnedObjectPath))>().ok()?;
    Some((detail, detail1 == 1))
}

/// `(detail, inserted text)` of an `org.a11y.atspi.Event.Object.TextChanged` signal.
fn inserted_text(message: &zbus::Message) -> Option<(String, String)> {
    let body = message.body();
    let (detail, any) = match body.deserialize::<(String, i32, i32, OwnedValue, HashMap<String, OwnedValue>)>() {
        Ok((detail, _, _, any, _)) => (detail, any),
        Err(_) => {
            let (detail, _, _, any, _) = body.deserialize::<(String, i32, i32, OwnedValue, (String, OwnedObjectPath))>().ok()?;
            (detail, any)
        }
    };
    Some((detail, String::try_from(any).ok()?))
}

fn process_of(bus: &A11yBus, pids: &mut HashMap<String, u32>, name: &str) -> Option<u32> {
    if let Some(pid) = pids.get(name) {
        return Some(*pid);
    }
    let reply = bus
        .connection()
        .call_method(Some("org.freedesktop.DBus"), "/org/freedesktop/DBus", Some("org.freedesktop.DBus"), "GetConnectionUnixProcessID", &(name,))
        .ok()?;
    let pid: u32 = reply.body().deserialize().ok()?;
    pids.insert(name.to_owned(), pid);
    Some(pid)
}

impl Supervised for A11yWorker {
    type Command = A11yCommand;

    fn run(&mut self, commands: &Receiver<A11yCommand>, ctx: &WorkerContext) -> anyhow::Result<()> {
        loop {
            let bus = match A11yBus::connect() {
                Ok(bus) => bus,
                Err(err) => {
                    ctx.report(WorkerState::Degraded(format!(
                        "{err:#}: password fields are not detected and browser URLs come from window titles"
                    )));
                    if !self.idle(commands, RECONNECT) {
                        return Ok(());
                    }
                    continue;
                }
            };
            // StateChanged and, for the typing stream only, every Object event (TextChanged among
            // them: another listener may have registered events this worker would only skip).
            let rule = MatchRule::builder().msg_type(MessageType::Signal).interface("org.a11y.atspi.Event.Object")?;
            let rule = if self.fields { rule.build() } else { rule.member("StateChanged")?.build() };
            let mut stream = zbus::block_on(MessageStream::for_match_rule(rule, bus.connection().inner(), Some(256)))?;
            bus.register_focus_events()?;
            if self.fields {
                bus.register_text_events()?;
            }
            self.apply_accessibility(&bus, ctx);
            let mut pids = HashMap::new();
            loop {
                while let Ok(command) = commands.try_recv() {
                    match command {
                        A11yCommand::InjectPanic => panic!("injected a11y fault"),
                        A11yCommand::SetDesktopAccessibility(on) => {
                            self.turn_on.store(on, Ordering::Relaxed);
                            self.apply_accessibility(&bus, ctx);
                        }
                        A11yCommand::Shutdown => {
                            self.restore_accessibility(&bus);
                            return Ok(());
                        }
                    }
                }
                let wake = zbus::block_on(futures_lite::future::or(
                    async {
                        match stream.next().await {
                            Some(message) => Wake::Message(message),
                            None => Wake::Closed,
                        }
                    },
                    async {
                        async_io::Timer::after(TICK).await;
                        Wake::Tick
                    },
                ));
                match wake {
                    Wake::Message(Ok(message)) => match message.header().member().map(|m| m.as_str()) {
                        Some("StateChanged") => self.focus_event(&bus, &mut pids, &message),
                        Some("TextChanged") if self.fields => self.text_event(&bus, &mut pids, &message),
                        _ => {}
                    },
                    Wake::Message(Err(err)) => tracing::debug!("a11y: unreadable event: {err}"),
                    Wake::Tick => {}
                    Wake::Closed => {
                        ctx.report(WorkerState::Degraded("the accessibility bus went away; reconnecting".into()));
                        break;
                    }
                }
            }
        }
    }
}

/// Starts the `a11y` worker, which tells `keys` about password-field focus
/// (and, with `fields`, the text entered into fields) and turns desktop
/// accessibility on while cowork runs when `turn_on`.
pub fn spawn_a11y(
    keys: Sender<KeysCommand>,
    turn_on: bool,
    fields: bool,
    secret_pid: Arc<std::sync::atomic::AtomicU32>,
    sink: EventSink<CaptureEvent>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<A11yCommand>> {
    let channel = bounded(8);
    let turn_on = Arc::new(AtomicBool::new(turn_on));
    spawn_supervised::<A11yWorker, _, _>(WorkerName::A11y, policy, sink, channel, move |_ctx| {
        Ok(A11yWorker::new(keys.clone(), turn_on.clone(), fields, secret_pid.clone()))
    })
}
