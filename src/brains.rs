//! How cowork thinks with models other than the built-in local one: cloud and
//! local HTTP providers (OpenAI-compatible, Anthropic Messages, Gemini,
//! Ollama), their streaming formats parsed into one internal delta format,
//! and the client that talks to them through the outbound gate (`net.rs`).

pub mod budget;
pub mod catalog;
pub mod client;
pub mod consent;
pub mod message;
pub mod prices;
pub mod provider;
pub mod router;
pub mod rules;
pub mod stream;

pub use client::{Completion, ProviderError, stream_chat, stream_chat_with_tools};
pub use message::{Assembled, Delta, Role, ToolCall, ToolDef, Turn, Usage};
pub use provider::{ProviderConfig, ProviderKind, Providers};
pub use router::{Preference, Route, RouteInput, Target, route};

/// A provider's API key: the secret store (`provider:NAME`), else the
/// environment variable the provider names; none for keyless local servers.
pub fn provider_key(data_dir: &std::path::Path, provider: &ProviderConfig) -> anyhow::Result<Option<String>> {
    let secrets = crate::secrets::Secrets::open(data_dir)?;
    if let Some(key) = secrets.get(&crate::secrets::provider_key_name(&provider.name))? {
        return Ok(Some(key));
    }
    match &provider.api_key_env {
        Some(var) => match std::env::var(var) {
            Ok(key) => Ok(Some(key)),
            Err(_) => anyhow::bail!(
                "no API key for {}: none in {} and {var} is not set (store one in Settings or with `cowork secrets set {}`)",
                provider.name,
                secrets.describe(),
                crate::secrets::provider_key_name(&provider.name)
            ),
        },
        None => Ok(None),
    }
}
