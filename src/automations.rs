//! Automations (issue 16): flows the user describes once and cowork runs
//! while nobody watches. `flow` is the pure model (trigger, steps,
//! variables, checks at save time), `schedule` the pure cron and "every N
//! minutes" clock in local time, `store` the SQL, `steps` what the worker
//! asks of the agent, the notifier and the clock, and `worker` the durable
//! executor on the `automations` thread.

pub mod events;
pub mod flow;
pub mod schedule;
pub mod steps;
pub mod store;
pub mod worker;

pub use flow::Flow;
pub use worker::{AutomationsCommand, AutomationsConfig, Signal, spawn_automations};
