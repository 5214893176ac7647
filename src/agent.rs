//! Conversations and, next, acting: the `agent` worker owns a chat turn from
//! context to answer; the local model is reached through the `llm` worker.

mod acting;
mod automation;
pub mod events;
pub mod flows;
pub mod integrations;
pub mod local;
pub mod operation;
pub mod store;
mod worker;

pub use acting::{AGENT_PROMPT, suggest_rule};
pub use automation::AgentSteps;
pub use operation::{Brain, Live, StepRef};

pub use operation::{BrainChoice, ChatRequest};
pub use worker::{AgentCommand, AgentConfig, AgentWorker, MemoryContext, SYSTEM_PROMPT, spawn_agent};
