//! The local model: the `llm` worker loads the GGUF with mistralrs (lazily) and
//! streams generations; Layer-1 context (`context`) and prompt layout
//! (`prompt`) live here too, for the agent worker to build its prompts with;
//! `tool_calls` reads the calls in the model's output, `speed` keeps how fast
//! each model runs here, `memory` reads memory pressure, heat and the battery.
//!
//! Invariants:
//! - The llm worker never touches the database, the store or conversations;
//!   only the agent sends it `Generate`.
//! - mistralrs's tokio runtime lives inside the engine, on the llm worker's
//!   side; crossbeam channels stay the boundary.

pub mod context;
mod engine;
pub mod events;
pub mod memory;
pub mod prompt;
pub mod speed;
pub mod tool_calls;
mod worker;

pub use engine::{ChatEngine, EngineError, MistralEngine, PromptMessage, PromptRole, StreamControl, check_gguf_header};
pub use worker::{GenerateRequest, Generation, GiveWay, LlmClient, LlmCommand, LlmConfig, LlmEvent, LlmWorker, LocalBrain, LocalModelState, spawn_llm};

/// The longest prompt sent to the bundled local model (SmolLM2 reads 2,048
/// tokens; the rest is room for the answer). Longer requests go to the cloud
/// when a tier is configured.
pub const LOCAL_LIMIT_TOKENS: usize = 1_500;
