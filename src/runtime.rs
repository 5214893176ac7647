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

/// The nice value of background threads (0 is normal, 19 the lowest): the
/// embed worker and its pool, and the pool background generations run in.
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority to `BACKGROUND_NICE`
/// (Linux: per thread). One way: an unprivileged thread cannot raise it again.
pub fn lower_thread_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority only read their integer arguments.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE);
    }
}
