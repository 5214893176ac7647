//! Activity capture: which window the user is in, for how long, and whether
//! they are at the keyboard. Runs on the `capture` thread; sends finished and
//! opened sessions straight to the store worker and summaries to the UI.

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
pub mod simulate;
mod tracker;
mod worker;

pub use a11y_worker::{A11yCommand, ACCESSIBILITY_OFF, spawn_a11y};
pub use afk::AfkDetector;
pub use tracker::{SessionTracker, TrackerOutput};
pub use worker::{CaptureCommand, CaptureConfig, CaptureWorker, StreamSenders, spawn_capture, spawn_capture_with_streams};
