//! `EventSink`: how a worker tells the UI something and wakes it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{Sender, SendTimeoutError};

use crate::events::AppEvent;

/// Sends `AppEvent`s to the UI and asks it to repaint. Workers never import
/// egui: the repaint request is a plain closure (`|| {}` in tests).
#[derive(Clone)]
pub struct EventSink {
    events: Sender<AppEvent>,
    wake: Arc<dyn Fn() + Send + Sync>,
    dropped: Arc<AtomicU64>,
}

/// How long a worker waits for room in the UI queue before dropping an event.
/// The UI drains the queue every frame, so a full queue for this long means the
/// UI is stuck, and a worker must not stall with it.
const SEND_TIMEOUT: Duration = Duration::from_millis(500);

impl EventSink {
    pub fn new(events: Sender<AppEvent>, wake: impl Fn() + Send + Sync + 'static) -> Self {
        Self { events, wake: Arc::new(wake), dropped: Arc::new(AtomicU64::new(0)) }
    }

    /// Sends one event and wakes the UI. Returns false when the event was dropped.
    pub fn send(&self, event: AppEvent) -> bool {
        let sent = match self.events.send_timeout(event, SEND_TIMEOUT) {
            Ok(()) => true,
            Err(SendTimeoutError::Timeout(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
            // The UI is gone (shutting down, or a headless run that ignores events).
            Err(SendTimeoutError::Disconnected(_)) => false,
        };
        (self.wake)();
        sent
    }

    /// Events dropped because the UI queue stayed full.
    pub fn dropped_count(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
