//! Automations (issue 16): flows the user describes once and cowork runs while
//! nobody watches. `flow` is the pure model (trigger, steps, variables, checks
//! at save time), `schedule` the pure cron and "every N minutes" clock in local
//! time, `store` the SQL, `steps` what the worker asks of the agent, the
//! notifier and the clock, and `worker` the durable executor on the
//! `automations` thread.
//!
//! Around it: `agent::automation` runs tool and agent steps as operations,
//! `agent::flows` offers flows marked `agent_tool` to the agent as
//! `flow_<name>` tools, the notify worker gates the notifications, the Apps
//! panel (`ui::apps`, `ui::flow_editor`) shows and edits flows, and `cowork
//! automations` is the command line. "Describe it" is
//! `AgentCommand::DraftFlow`: the agent asks its routed brain for a flow
//! (`assets/prompts/draft-flow.txt`), checks the answer with `Flow::validate`
//! and sends the problems back, up to three drafts; the checked JSON goes to
//! the UI (`AgentEvent::FlowDrafted`) or `cowork automations describe`.
//!
//! Invariants:
//! - A run, a delay and a parked approval are rows with a wake or expiry time;
//!   no thread sleeps through one, so a restart, a crash or a suspend resumes
//!   them.
//! - An event is claimed in the same transaction that queues its run; a claimed
//!   event never queues a second run.
//! - The automations worker never executes a tool: the agent decides and runs
//!   every call of a flow, and nothing is approved because nobody is watching.

pub mod events;
pub mod flow;
pub mod schedule;
pub mod steps;
pub mod store;
pub mod worker;

pub use flow::Flow;
pub use worker::{AutomationsCommand, AutomationsConfig, Signal, spawn_automations};
