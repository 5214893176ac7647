//! How cowork thinks with models other than the built-in local one: cloud and
//! local HTTP providers (OpenAI-compatible, Anthropic Messages, Gemini,
//! Ollama), their streaming formats parsed into one internal delta format, and
//! the client that talks to them through the outbound gate (`net.rs`).
//!
//! - `provider`: `providers.json` and each API's request and stream events;
//!   `message`: the one internal format (turns in, deltas out); `stream`: SSE
//!   and NDJSON framing; `client`: the request, its errors and one retry;
//!   `rules`: each provider's request rules and what a 400 taught.
//! - `prices`: what models cost and can do; `catalog`: which models a provider
//!   offers. (`provider` reads `prices`; `catalog` reads both; nothing reads
//!   back.)
//! - `router`: local or which cloud tier, and why; `budget`: estimates, caps
//!   and what was spent; `consent`: what may leave, redacted.
//!
//! The agent worker runs it all: it routes each question, asks for consent
//! (nothing stored or sent until the user answers), checks the budget, then
//! streams from the local engine or from the provider. Model lists for
//! Settings' and the first run's pickers are asked on a `model-list` thread of
//! the app, the answer coming back as `AgentEvent::ModelsListed` over the app's
//! own bounded channel.
//!
//! Invariants:
//! - Captured context reaches a provider only with consent for that provider
//!   (or for that one question), and always through `redact_for_cloud`.
//! - API keys are read from the secret store or the environment at the moment
//!   of use and never written to settings, the database or logs; the UI only
//!   ever holds masked values.

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
