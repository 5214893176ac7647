//! Thread plumbing shared by every worker: `EventSink<E>`, a worker's typed way
//! to the UI that wakes it (`sink`); `spawn_supervised`, which runs a worker on
//! its own named thread and restarts it when it fails (`supervisor`); health
//! states and worker names (`events`); graceful shutdown on SIGTERM and SIGINT
//! (`signals`).
//!
//! Invariants:
//! - A worker owns all its state and is reached only through its command
//!   channel, whose `Receiver` belongs to the supervisor, so senders survive a
//!   restart.
//! - `catch_unwind` appears only in `supervisor.rs`: around a worker's run, and
//!   in `contain`, around one unit of work whose state its caller resets. So
//!   nothing shared is left half-written when a worker unwinds.

mod events;
pub mod signals;
mod sink;
mod supervisor;

pub use events::{RuntimeEvent, WorkerName};
pub use sink::EventSink;
pub use supervisor::{
    Control, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerState, contain, spawn_supervised,
};
