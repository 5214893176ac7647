//! What the desktop backends share, below all of them: presence from idle edges
//! (wlroots' and KWin's idle notifications, Mutter's IdleMonitor), the ids
//! windows are known by, and the focused window as a desktop pushes it over
//! D-Bus (KWin's script, GNOME's extension).
//!
//! `Presence` turns idle edges into the AFK detector's input probe;
//! `window_key` makes the ids windows are known by; `PushSlot`/`Pushed` hold
//! the latest window a desktop pushed, taken by capture's thread. Every D-Bus
//! connection these modules open (`session_bus`: KWin, GNOME, the portal,
//! appearance) gives up on a call after 25 s.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};
use parking_lot::Mutex;

use crate::desktop::input::{InputProbe, InputSnapshot};

/// How long a D-Bus call waits for its answer (the bus's own default): a peer
/// that never answers (a stuck shell, a connection that serves nothing) must
/// not hang the thread that asked.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(25);

/// A new connection to the session bus whose calls give up after [`CALL_TIMEOUT`].
pub fn session_bus() -> Result<zbus::blocking::Connection, String> {
    zbus::blocking::connection::Builder::session().map(|b| b.method_timeout(CALL_TIMEOUT)).and_then(|b| b.build()).map_err(|err| format!("no session bus: {err}"))
}

/// The idle timeout asked of the compositor: presence is known to a second.
pub const IDLE_GRAIN: Duration = Duration::from_secs(1);

/// Presence as the compositor's idle notification says it, shared with the
/// AFK detector on the same thread.
#[derive(Debug, Default)]
pub struct Presence {
    idle: AtomicBool,
    resumes: AtomicU64,
}

impl Presence {
    /// The idle edge (true) or the return from idle (false), which counts as input.
    pub fn set_idle(&self, idle: bool) {
        self.idle.store(idle, Ordering::Relaxed);
        if !idle {
            self.resumes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl InputProbe for Arc<Presence> {
    fn snapshot(&self) -> InputSnapshot {
        // Each return from idle is a change the detector sees as input.
        InputSnapshot { pointer: (self.resumes.load(Ordering::Relaxed) as i32, 0), buttons: Vec::new(), keys: Vec::new() }
    }

    fn active_now(&self) -> bool {
        !self.idle.load(Ordering::Relaxed)
    }
}

/// The id the agent's window tools use for a toplevel: stable across
/// connections for as long as its app id and title stay (FNV-1a, nonzero).
pub fn window_key(app_id: &str, title: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in app_id.bytes().chain([0]).chain(title.bytes()) {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash & 0x7fff_ffff).max(1)
}

/// The focused window as a desktop pushes it over D-Bus (KWin's script,
/// GNOME's extension): the listener reports into the slot, and capture's
/// thread takes the latest report, woken by one pending wake at most.
pub struct PushSlot<W> {
    latest: Arc<Mutex<(u64, Option<W>)>>,
    wake: Sender<()>,
}

impl<W> PushSlot<W> {
    /// A report: the window now focused (None: nothing).
    pub fn report(&self, window: Option<W>) {
        {
            let mut latest = self.latest.lock();
            latest.0 += 1;
            latest.1 = window;
        }
        let _ = self.wake.try_send(());
    }
}

/// Capture's side of a [`PushSlot`].
pub struct Pushed<W> {
    latest: Arc<Mutex<(u64, Option<W>)>>,
    wake: Receiver<()>,
    seen: u64,
    current: Option<W>,
}

pub fn pushed<W>() -> (PushSlot<W>, Pushed<W>) {
    let latest = Arc::new(Mutex::new((0, None)));
    let (wake_tx, wake) = bounded(1);
    (PushSlot { latest: latest.clone(), wake: wake_tx }, Pushed { latest, wake, seen: 0, current: None })
}

impl<W: Clone + PartialEq> Pushed<W> {
    /// Waits up to `timeout`; true when the focused window (or what was reported of it) changed.
    pub fn wait_for_change(&mut self, timeout: Duration) -> bool {
        let _ = self.wake.recv_timeout(timeout);
        let latest = self.latest.lock();
        if latest.0 == self.seen {
            return false;
        }
        self.seen = latest.0;
        let changed = self.current != latest.1;
        self.current = latest.1.clone();
        changed
    }

    pub fn current(&self) -> Option<&W> {
        self.current.as_ref()
    }
}

