//! Conversations and, next, acting: the `agent` worker owns a chat turn from
//! context to answer; the local model is reached through the `llm` worker.

mod worker;

pub use worker::{AgentCommand, AgentConfig, AgentWorker, ChatRequest, MemoryContext, SYSTEM_PROMPT, spawn_agent};
