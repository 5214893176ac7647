//! Thread plumbing shared by every worker: the event sink that wakes the UI,
//! the supervisor that restarts failed workers, and health states.

mod events;
pub mod signals;
mod sink;
mod supervisor;

pub use events::{RuntimeEvent, WorkerName};
pub use sink::EventSink;
pub use supervisor::{
    Control, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerState, contain, spawn_supervised,
};
