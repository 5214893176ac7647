//! The supervisor: runs one worker on its own thread, named after it
//! (`WorkerName`), catches its panics and errors, reports health, and restarts
//! it with capped backoff. The default policy waits 2, 4, 8, 16 and 32 s before
//! the restarts, then marks the worker failed until the user's Retry (the
//! status bar sends `Control::Retry` on the supervisor's bounded(8) control
//! channel); a run of a healthy minute resets the count.
//!
//! The command `Receiver` lives here, outside the worker, so every `Sender`
//! handed out before a crash keeps working after the restart.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};

use super::{EventSink, RuntimeEvent, WorkerName};

/// Health of one worker, as the status bar shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkerState {
    Starting,
    Running,
    /// Running with a missing capability, and why (e.g. no X display).
    Degraded(String),
    /// Failed; the supervisor restarts it after `retry_in_millis`.
    Restarting { restarts: u32, retry_in_millis: u64, error: String },
    /// Gave up after too many failures in a row; needs a Retry.
    Failed { error: String },
    Stopped,
}

impl WorkerState {
    pub fn label(&self) -> &'static str {
        match self {
            WorkerState::Starting => "starting",
            WorkerState::Running => "running",
            WorkerState::Degraded(_) => "degraded",
            WorkerState::Restarting { .. } => "restarting",
            WorkerState::Failed { .. } => "failed",
            WorkerState::Stopped => "stopped",
        }
    }
}

/// Messages to a supervisor itself (not to the worker it runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Restart a failed or backing-off worker now, with a fresh failure count.
    Retry,
    /// Stop restarting; exit once the worker is not running.
    Shutdown,
}

/// When to restart and when to give up.
#[derive(Clone, Copy, Debug)]
pub struct RestartPolicy {
    /// Backoff before the first restart; doubles for each further one.
    pub first_backoff: Duration,
    /// Restarts allowed in a row; when the last of them fails too, the worker is failed.
    pub max_restarts: u32,
    /// A run this long counts as healthy and resets the count.
    pub healthy_after: Duration,
}

impl Default for RestartPolicy {
    /// 2, 4, 8, 16, 32 s, then give up; a healthy minute resets the count.
    fn default() -> Self {
        Self {
            first_backoff: Duration::from_secs(2),
            max_restarts: 5,
            healthy_after: Duration::from_secs(60),
        }
    }
}

impl RestartPolicy {
    /// Wait before restart number `restart` (1-based), or `None` to give up.
    pub fn backoff(&self, restart: u32) -> Option<Duration> {
        if restart == 0 || restart > self.max_restarts {
            return None;
        }
        Some(self.first_backoff.saturating_mul(1 << (restart - 1).min(20)))
    }
}

/// What a worker gets from its supervisor: its name and a way to report health.
#[derive(Clone)]
pub struct WorkerContext {
    pub name: WorkerName,
    pub sink: EventSink<RuntimeEvent>,
}

impl WorkerContext {
    pub fn report(&self, state: WorkerState) {
        self.sink.send(RuntimeEvent::Worker { worker: self.name, state });
    }

    /// The context a worker run outside a supervisor (a test, a CLI command) reports through.
    pub fn new<E: 'static>(name: WorkerName, sink: &EventSink<E>) -> Self {
        Self { name, sink: sink.runtime_only() }
    }
}

/// A worker: state it owns, and a loop over its commands. `run` returns
/// `Ok(())` on an orderly shutdown; an `Err` or a panic means "restart me".
pub trait Supervised {
    type Command: Send + 'static;
    fn run(&mut self, commands: &Receiver<Self::Command>, ctx: &WorkerContext) -> anyhow::Result<()>;
}

/// The far ends a supervised worker leaves to the rest of the program.
pub struct WorkerHandle<C> {
    pub name: WorkerName,
    pub commands: Sender<C>,
    pub control: Sender<Control>,
    thread: Option<JoinHandle<()>>,
}

impl<C> WorkerHandle<C> {
    /// Asks the supervisor to stop restarting, sends the worker its own
    /// shutdown command, and waits up to `timeout` for the thread to end.
    /// Returns false if it did not end in time (it is left detached).
    pub fn shutdown(&mut self, shutdown_command: C, timeout: Duration) -> bool {
        let _ = self.control.try_send(Control::Shutdown);
        let _ = self.commands.send_timeout(shutdown_command, timeout);
        let deadline = Instant::now() + timeout;
        while let Some(thread) = self.thread.as_ref() {
            if thread.is_finished() {
                if let Some(thread) = self.thread.take() {
                    let _ = thread.join();
                }
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }
}

/// Starts `make` + `run` on a thread named after the worker, under supervision.
/// `commands` is the receiving end the worker reads; `command_sender` its pair.
pub fn spawn_supervised<W, F, E: 'static>(
    name: WorkerName,
    policy: RestartPolicy,
    sink: EventSink<E>,
    (command_sender, commands): (Sender<W::Command>, Receiver<W::Command>),
    mut make: F,
) -> std::io::Result<WorkerHandle<W::Command>>
where
    W: Supervised,
    F: FnMut(&WorkerContext) -> anyhow::Result<W> + Send + 'static,
{
    let (control_tx, control_rx) = bounded::<Control>(8);
    let ctx = WorkerContext::new(name, &sink);
    let thread = std::thread::Builder::new().name(name.as_str().to_owned()).spawn(move || {
        let span = tracing::info_span!("worker", name = name.as_str());
        let _entered = span.enter();
        supervise(&ctx, policy, &commands, &control_rx, &mut make);
    })?;
    Ok(WorkerHandle { name, commands: command_sender, control: control_tx, thread: Some(thread) })
}

fn supervise<W, F>(
    ctx: &WorkerContext,
    policy: RestartPolicy,
    commands: &Receiver<W::Command>,
    control: &Receiver<Control>,
    make: &mut F,
) where
    W: Supervised,
    F: FnMut(&WorkerContext) -> anyhow::Result<W>,
{
    let mut restarts: u32 = 0;
    loop {
        ctx.report(WorkerState::Starting);
        let started = Instant::now();
        // Workers own all their state, so nothing shared is left half-written
        // when one unwinds: this is the one place that catches panics.
        #[allow(clippy::disallowed_methods)]
        let outcome = catch_unwind(AssertUnwindSafe(|| -> anyhow::Result<()> {
            let mut worker = make(ctx)?;
            ctx.report(WorkerState::Running);
            worker.run(commands, ctx)
        }));
        let error = match outcome {
            Ok(Ok(())) => {
                ctx.report(WorkerState::Stopped);
                return;
            }
            Ok(Err(err)) => format!("{err:#}"),
            Err(payload) => format!("panicked: {}", panic_message(payload.as_ref())),
        };
        tracing::error!(worker = ctx.name.as_str(), %error, "worker failed");
        if started.elapsed() >= policy.healthy_after {
            restarts = 0;
        }
        restarts += 1;
        let wait = match policy.backoff(restarts) {
            Some(wait) => {
                ctx.report(WorkerState::Restarting {
                    restarts,
                    retry_in_millis: wait.as_millis() as u64,
                    error: error.clone(),
                });
                Some(wait)
            }
            None => {
                ctx.report(WorkerState::Failed { error: error.clone() });
                None
            }
        };
        // Wait out the backoff (or, when failed, for a Retry); either can be cut short.
        let received = match wait {
            Some(wait) => match control.recv_timeout(wait) {
                Ok(message) => Some(message),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => Some(Control::Shutdown),
            },
            None => Some(control.recv().unwrap_or(Control::Shutdown)),
        };
        match received {
            Some(Control::Shutdown) => {
                ctx.report(WorkerState::Stopped);
                return;
            }
            Some(Control::Retry) => restarts = 0,
            None => {}
        }
    }
}

/// The other boundary where a panic is caught: one unit of work inside a
/// worker whose own state the caller resets on `Err` (a reply to one
/// request, one page of a third-party parser), so the rest goes on. The
/// panic is logged with `what` and its message, which the `Err` also holds.
pub fn contain<T>(what: &str, work: impl FnOnce() -> T) -> Result<T, String> {
    #[allow(clippy::disallowed_methods)]
    let outcome = catch_unwind(AssertUnwindSafe(work));
    outcome.map_err(|payload| {
        let message = panic_message(payload.as_ref());
        tracing::error!(what, panic = %message, "contained a panic");
        message
    })
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_backoff_is_2_4_8_16_32_then_give_up() {
        let policy = RestartPolicy::default();
        let waits: Vec<_> = (1..=6).map(|n| policy.backoff(n).map(|d| d.as_secs())).collect();
        assert_eq!(waits, vec![Some(2), Some(4), Some(8), Some(16), Some(32), None]);
    }
}
