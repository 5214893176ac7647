//! Proactive notifications (issue 16): one gate for every notification
//! (`gate`, pure), the inbox and the sources' counters in SQLite (`store`),
//! and the `notify` worker that delivers over the freedesktop Notifications
//! interface and hears the desktop's actions and close reasons (`worker`).

pub mod events;
pub mod gate;
pub mod store;
pub mod worker;

pub use worker::{Act, Activity, Hooks, NotifyClient, NotifyCommand, NotifyConfig, spawn_notify};
