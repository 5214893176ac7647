//! Local chat: the `llm` worker loads the default GGUF with mistralrs (lazily),
//! builds the Layer-1 context from recent capture, and streams answers.

pub mod context;
mod engine;
pub mod memory;
pub mod prompt;
pub mod tokens;
pub mod tool_calls;
mod worker;

pub use engine::{ChatEngine, EngineError, MistralEngine, PromptMessage, StreamControl, check_gguf_header};
pub use worker::{ChatRequest, LlmCommand, LlmConfig, LlmWorker, spawn_llm};
