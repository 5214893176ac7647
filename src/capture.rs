//! Activity capture: which window the user is in, for how long, whether they
//! are at the keyboard, and (when allowed) what they type and copy.
//!
//! - `worker`: the `capture` thread. It consumes a
//!   `desktop::backend::DesktopBackend` (X11, wlroots, KWin's script, GNOME's
//!   extension; the session decides which, see `crate::desktop`), asks the
//!   `firewall` about each window, turns observations into sessions
//!   (`tracker`), AFK (`afk`, `heartbeat`, `media`) and hands rows to the store
//!   through a five-slot `buffer`. It tells the other streams which allowed
//!   window has focus: keys, clipboard, listen mode, and in the sidebar the
//!   automations and notify workers.
//! - `keys`, `clipboard`: the typing and clipboard streams, each a worker.
//! - `a11y`, `a11y_worker`: AT-SPI (browser addresses, password fields, on
//!   Wayland the typing stream) and the `a11y` worker.
//! - `screen`: a window's text read on request by OCR of its own pixels,
//!   after the firewall allowed the window (no pixel of an excluded one is read).
//! - `health`: per-stream counters; `simulate`: a scripted day through the same
//!   pipeline; `db`: their SQL and store commands; `events`: what capture tells
//!   the UI.
//!
//! Invariants:
//! - `tracker.rs` and `firewall.rs` have no I/O and no clock; time comes in as
//!   arguments.
//! - Nothing reaches the store that the firewall has not allowed; the keys and
//!   clipboard workers only ever know windows capture has allowed, so typing in
//!   an excluded window has nowhere to go.
//! - Capture never blocks on the store (only at shutdown does it wait, up to
//!   200 ms per remaining row); a row it cannot hand over is counted as
//!   dropped.

pub mod a11y;
mod a11y_worker;
mod afk;
mod buffer;
pub mod db;
pub mod events;
pub mod heartbeat;
mod media;
pub mod clipboard;
pub mod firewall;
pub mod health;
pub mod keys;
pub mod screen;
pub mod screen_texts;
pub mod screen_worker;
pub mod simulate;
mod tracker;
mod worker;

pub use a11y_worker::{A11yCommand, ACCESSIBILITY_OFF, spawn_a11y};
pub use afk::AfkDetector;
pub use tracker::{SessionTracker, TrackerOutput};
pub use worker::{CaptureCommand, CaptureConfig, CaptureWorker, StreamSenders, spawn_capture, spawn_capture_with_streams};
