//! The `a11y` worker: listens to AT-SPI focus events and tells the keys worker
//! when keyboard focus is in a password field, so nothing typed there is kept.
//!
//! Without a session bus or accessibility bus it is degraded (password fields
//! then go undetected; the app deny list still covers password managers) and
//! tries again every 30 s.

use std::collections::HashMap;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use futures_lite::StreamExt;
use zbus::message::Type as MessageType;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};
use zbus::{MatchRule, MessageStream};

use crate::capture::a11y::{A11yBus, ROLE_PASSWORD_TEXT};
use crate::capture::keys::KeysCommand;
use crate::events::WorkerName;
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerState, spawn_supervised};

/// How often the worker looks at its command channel while waiting for events.
const TICK: Duration = Duration::from_millis(500);
/// Without an accessibility bus, how often to look for one again.
const RECONNECT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub enum A11yCommand {
    InjectPanic,
    Shutdown,
}

pub struct A11yWorker {
    keys: Sender<KeysCommand>,
    /// What the keys worker was last told.
    secret: Option<(u32, bool)>,
}

enum Wake {
    Message(zbus::Result<zbus::Message>),
    Closed,
    Tick,
}

impl A11yWorker {
    /// Serves commands for `wait`; false when the worker should stop.
    fn idle(&self, commands: &Receiver<A11yCommand>, wait: Duration) -> bool {
        match commands.recv_timeout(wait) {
            Ok(A11yCommand::InjectPanic) => panic!("injected a11y fault"),
            Ok(A11yCommand::Shutdown) | Err(RecvTimeoutError::Disconnected) => false,
            Err(RecvTimeoutError::Timeout) => true,
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
                    ctx.report(WorkerState::Degraded(format!("{err:#}: password fields are not detected")));
                    if !self.idle(commands, RECONNECT) {
                        return Ok(());
                    }
                    continue;
                }
            };
            let rule = MatchRule::builder()
                .msg_type(MessageType::Signal)
                .interface("org.a11y.atspi.Event.Object")?
                .member("StateChanged")?
                .build();
            let mut stream = zbus::block_on(MessageStream::for_match_rule(rule, bus.connection().inner(), Some(256)))?;
            bus.register_focus_events()?;
            ctx.report(WorkerState::Running);
            let mut pids = HashMap::new();
            loop {
                while let Ok(command) = commands.try_recv() {
                    match command {
                        A11yCommand::InjectPanic => panic!("injected a11y fault"),
                        A11yCommand::Shutdown => return Ok(()),
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
                    Wake::Message(Ok(message)) => self.focus_event(&bus, &mut pids, &message),
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

/// Starts the `a11y` worker, which tells `keys` about password-field focus.
pub fn spawn_a11y(keys: Sender<KeysCommand>, sink: EventSink, policy: RestartPolicy) -> std::io::Result<WorkerHandle<A11yCommand>> {
    let channel = bounded(8);
    spawn_supervised::<A11yWorker, _>(WorkerName::A11y, policy, sink, channel, move |_ctx| {
        Ok(A11yWorker { keys: keys.clone(), secret: None })
    })
}
