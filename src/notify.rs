//! Proactive notifications (issue 16): one gate for every notification (`gate`,
//! pure), the inbox and the sources' counters in SQLite (`store`), and the
//! `notify` worker that delivers over the freedesktop Notifications interface
//! and hears the desktop's actions and close reasons (`worker`).
//!
//! Invariants:
//! - Every notification enters the inbox before the gate decides, and the
//!   gate's counters are read from it; nothing is shown that the gate has not
//!   passed.
//! - A mute is only ever the user's decision.

pub mod events;
pub mod gate;
pub mod store;
pub mod worker;

pub use worker::{Act, Activity, Hooks, NotifyClient, NotifyCommand, NotifyConfig, spawn_notify};
