//! How cowork thinks with models other than the built-in local one: cloud and
//! local HTTP providers (OpenAI-compatible, Anthropic Messages, Gemini,
//! Ollama), their streaming formats parsed into one internal delta format,
//! and the client that talks to them through the outbound gate (`net.rs`).

pub mod client;
pub mod message;
pub mod provider;
pub mod stream;

pub use client::{Completion, ProviderError, stream_chat};
pub use message::{Assembled, Delta, Role, ToolCall, Turn};
pub use provider::{ProviderConfig, ProviderKind, Providers};
