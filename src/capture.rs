//! Activity capture: which window the user is in, for how long, and whether
//! they are at the keyboard. Runs on the `capture` thread; sends finished and
//! opened sessions straight to the store worker and summaries to the UI.

mod afk;
pub mod clipboard;
pub mod firewall;
pub mod health;
pub mod keys;
pub mod simulate;
mod tracker;
mod worker;
pub mod x11;

pub use afk::{AfkDetector, InputProbe};
pub use tracker::{SessionTracker, TrackerOutput};
pub use worker::{CaptureCommand, CaptureConfig, CaptureWorker, StreamSenders, spawn_capture, spawn_capture_with_streams};
