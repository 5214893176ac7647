//! Conversations and acting: the `agent` worker (`worker`) owns a chat turn
//! from context to answer and, with the agent on, an operation (`operation`:
//! its state and the pure runner; `acting`: the executors) that calls tools
//! through the approval policy. The local model is reached through the `llm`
//! worker (`local` shapes the small model's turn), cloud providers through
//! `crate::brains`; `integrations` brings MCP servers' tools under the same
//! policy, `automation` and `flows` connect it to the automations worker, and
//! `store` is what it keeps in cowork.db.
//!
//! Invariants:
//! - The agent worker alone decides what is sent to a model and writes chat
//!   messages; only it executes tools, and every call is written with its
//!   decision (and as started) before it runs.
//! - An operation's state is in SQLite after every step; nothing about a
//!   waiting approval lives only in memory.
//! - A call is decided once and started once, whatever number of processes hold
//!   a copy of it; only its operation's owner runs it (`store`).

mod acting;
mod automation;
pub mod events;
pub mod flows;
pub mod history;
pub mod integrations;
pub mod local;
mod memory;
mod notes_budget;
mod corrections;
mod give_way;
mod inbox;
pub mod operation;
pub mod store;
mod meeting;
mod prefill;
mod recap;
mod warm;
mod worker;

pub use acting::{AGENT_PROMPT, suggest_rule};
pub use automation::AgentSteps;
pub use operation::{Brain, Live, StepRef};

pub use operation::{BrainChoice, ChatRequest};
pub use memory::{MemoryContext, Purpose};
pub use worker::{AgentCommand, AgentConfig, AgentWorker, SYSTEM_PROMPT, spawn_agent};
