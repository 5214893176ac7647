//! `EventSink<E>`: how a worker tells the UI something and wakes it.
//!
//! A worker holds a sink of its own domain's events (`EventSink<AgentEvent>`,
//! `EventSink<CaptureEvent>`, …) and never names the UI's bus: `workers.rs`
//! makes one sink over the bus's channel and narrows it for each worker
//! (`sink.narrow()`, through the bus's `From` impls). Every sink can also say
//! the runtime's own things (a worker's health, a notice, a shutdown request).
//!
//! A send waits at most 500 ms for room in the UI's queue (bounded(4096) in the
//! sidebar), then drops the event and counts it (`dropped_count`): a stuck UI
//! never stalls a worker. Every send calls the wake closure, which in the
//! sidebar asks egui to repaint; workers never import egui.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{SendTimeoutError, Sender};

use super::RuntimeEvent;

/// Sends `E`s to the UI and asks it to repaint. Workers never import egui:
/// the repaint request is a plain closure (`|| {}` in tests).
pub struct EventSink<E> {
    deliver: Arc<dyn Fn(E) -> bool + Send + Sync>,
    runtime: Arc<dyn Fn(RuntimeEvent) -> bool + Send + Sync>,
    dropped: Arc<AtomicU64>,
}

impl<E> Clone for EventSink<E> {
    fn clone(&self) -> Self {
        Self { deliver: self.deliver.clone(), runtime: self.runtime.clone(), dropped: self.dropped.clone() }
    }
}

/// How long a worker waits for room in the UI queue before dropping an event.
/// The UI drains the queue every frame, so a full queue for this long means the
/// UI is stuck, and a worker must not stall with it.
const SEND_TIMEOUT: Duration = Duration::from_millis(500);

impl<T: From<RuntimeEvent> + Send + 'static> EventSink<T> {
    /// The sink over the UI's channel; `wake` asks the UI to repaint.
    pub fn new(events: Sender<T>, wake: impl Fn() + Send + Sync + 'static) -> Self {
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = dropped.clone();
        let deliver: Arc<dyn Fn(T) -> bool + Send + Sync> = Arc::new(move |event: T| {
            let sent = match events.send_timeout(event, SEND_TIMEOUT) {
                Ok(()) => true,
                Err(SendTimeoutError::Timeout(_)) => {
                    counted.fetch_add(1, Ordering::Relaxed);
                    false
                }
                // The UI is gone (shutting down, or a headless run that ignores events).
                Err(SendTimeoutError::Disconnected(_)) => false,
            };
            wake();
            sent
        });
        let to_bus = deliver.clone();
        Self { deliver, runtime: Arc::new(move |event: RuntimeEvent| to_bus(T::from(event))), dropped }
    }
}

impl<E: 'static> EventSink<E> {
    /// Sends one event and wakes the UI. Returns false when the event was dropped.
    pub fn send(&self, event: E) -> bool {
        (self.deliver)(event)
    }

    /// Something a user should see that is not tied to one worker's health.
    pub fn notice(&self, text: impl Into<String>) -> bool {
        (self.runtime)(RuntimeEvent::Notice(text.into()))
    }

    /// One of the runtime's own events (health, shutdown).
    pub fn runtime(&self, event: RuntimeEvent) -> bool {
        (self.runtime)(event)
    }

    /// The same bus, for a domain whose events become this sink's: a worker
    /// gets `bus.narrow::<ItsEvent>()`.
    pub fn narrow<F: Into<E> + 'static>(&self) -> EventSink<F> {
        let deliver = self.deliver.clone();
        EventSink { deliver: Arc::new(move |event: F| deliver(event.into())), runtime: self.runtime.clone(), dropped: self.dropped.clone() }
    }

    /// A sink that says only the runtime's own events (its `send` is for them too).
    pub fn runtime_only(&self) -> EventSink<RuntimeEvent> {
        let runtime = self.runtime.clone();
        EventSink { deliver: runtime.clone(), runtime, dropped: self.dropped.clone() }
    }

    /// A sink whose events nobody reads (a CLI command running a worker headless).
    pub fn ignored() -> Self {
        Self { deliver: Arc::new(|_| false), runtime: Arc::new(|_| false), dropped: Arc::new(AtomicU64::new(0)) }
    }

    /// Events dropped because the UI queue stayed full.
    pub fn dropped_count(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
