//! What models a provider offers and what they cost: the provider's own list
//! (`GET /v1/models` for OpenAI-compatible servers and OpenRouter, Anthropic's
//! and Gemini's model lists, Ollama's `/api/tags`, LM Studio's `/api/v0/models`),
//! each model with its context window and prices where known, from
//! `assets/model-prices.json` (written by `scripts/update-model-prices` from
//! LiteLLM's maintained model price list, shipped with the app) or from what
//! the provider's list says itself (OpenRouter's prices, Gemini's and LM
//! Studio's context windows).

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::brains::provider::{ProviderConfig, ProviderKind};
use crate::net::OutboundGate;

/// One row of the price table (US dollars per million tokens).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct PriceRow {
    #[serde(default)]
    pub context: Option<u64>,
    #[serde(default)]
    pub max_output: Option<u64>,
    #[serde(default, rename = "in")]
    pub input: Option<f64>,
    #[serde(default)]
    pub out: Option<f64>,
    #[serde(default)]
    pub cache_read: Option<f64>,
    #[serde(default)]
    pub cache_write: Option<f64>,
    #[serde(default)]
    pub reasoning: bool,
    #[serde(default)]
    pub caching: bool,
    #[serde(default)]
    pub tools: bool,
    #[serde(default)]
    pub cache_min: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct PriceFile {
    #[serde(default)]
    source: String,
    #[serde(default)]
    models: BTreeMap<String, BTreeMap<String, PriceRow>>,
}

/// The table shipped with this build.
const PRICES: &str = include_str!("../../assets/model-prices.json");

fn table() -> &'static PriceFile {
    static TABLE: OnceLock<PriceFile> = OnceLock::new();
    TABLE.get_or_init(|| {
        serde_json::from_str(PRICES).unwrap_or_else(|err| {
            tracing::error!(%err, "the shipped model price table is broken: prices unknown");
            PriceFile::default()
        })
    })
}

/// Where the prices come from ("litellm 1.106.2").
pub fn prices_source() -> &'static str {
    &table().source
}

/// The table's provider for `provider`: its own name when the table has it,
/// else the one its API belongs to (api.openai.com, Anthropic, Gemini).
fn table_provider(provider: &ProviderConfig) -> Option<&'static str> {
    let models = &table().models;
    if let Some((name, _)) = models.get_key_value(provider.name.as_str()) {
        return Some(name.as_str());
    }
    let host = crate::net::host_of_url(&provider.base_url).unwrap_or_default();
    let by_host = [
        ("api.openai.com", "openai"),
        ("api.anthropic.com", "anthropic"),
        ("generativelanguage.googleapis.com", "gemini"),
        ("api.deepseek.com", "deepseek"),
        ("api.groq.com", "groq"),
        ("api.mistral.ai", "mistral"),
        ("api.x.ai", "xai"),
        ("api.together.xyz", "together"),
    ];
    by_host.iter().find(|(h, _)| host == *h).map(|(_, name)| *name)
}

/// What the table knows of `model` at `provider` (the id as the API gives
/// it; a dated snapshot falls back to its family: `gpt-4o-2024-08-06` → `gpt-4o`).
pub fn known(provider: &ProviderConfig, model: &str) -> Option<&'static PriceRow> {
    let rows = table().models.get(table_provider(provider)?)?;
    let model = model.strip_prefix("models/").unwrap_or(model);
    if let Some(row) = rows.get(model) {
        return Some(row);
    }
    let undated = strip_date(model);
    rows.get(undated).or_else(|| rows.get(&format!("{undated}-latest")))
}

/// `name-2024-08-06`, `name-20250929` → `name`.
fn strip_date(model: &str) -> &str {
    let is_date = |s: &str| s.len() >= 8 && s.chars().all(|c| c.is_ascii_digit() || c == '-') && s.chars().filter(char::is_ascii_digit).count() == 8;
    for (at, _) in model.match_indices('-') {
        if is_date(&model[at + 1..]) {
            return &model[..at];
        }
    }
    model
}

/// Whether `model` is a reasoning model: the table says so, or its name is
/// one of OpenAI's reasoning families (o1, o3, o4-…, gpt-5…) for a model the
/// table does not know yet.
pub fn is_reasoning(provider: &ProviderConfig, model: &str) -> bool {
    if let Some(row) = known(provider, model) {
        return row.reasoning;
    }
    let model = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    let o_series = model.len() >= 2 && model.starts_with('o') && model[1..].chars().next().is_some_and(|c| c.is_ascii_digit());
    o_series || model.starts_with("gpt-5")
}

/// Prices in US dollars per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Prices {
    pub input: f64,
    pub output: f64,
    /// A cached input token, read from the provider's cache.
    pub cache_read: f64,
    /// An input token written to the cache (Anthropic: 1.25 × input).
    pub cache_write: f64,
}

impl Prices {
    pub fn is_free(&self) -> bool {
        self.input == 0.0 && self.output == 0.0
    }
}

/// What `model` at `provider` costs: the prices the user set for the
/// provider win; else the table's; else free (local servers, unknown models).
pub fn prices(provider: &ProviderConfig, model: &str) -> Prices {
    let local = matches!(provider.kind, ProviderKind::Ollama) || crate::net::host_of_url(&provider.base_url).is_some_and(|h| crate::net::is_loopback(&h));
    if provider.price_in_per_mtok > 0.0 || provider.price_out_per_mtok > 0.0 {
        let input = provider.price_in_per_mtok;
        let row = known(provider, model);
        let read_share = row.and_then(|r| Some(r.cache_read? / r.input.filter(|i| *i > 0.0)?)).unwrap_or(match provider.kind {
            ProviderKind::Anthropic => 0.1,
            ProviderKind::Gemini => 0.25,
            _ => 0.5,
        });
        let write_share = if provider.kind == ProviderKind::Anthropic { 1.25 } else { 1.0 };
        return Prices { input, output: provider.price_out_per_mtok, cache_read: input * read_share, cache_write: input * write_share };
    }
    if local {
        return Prices::default();
    }
    match known(provider, model) {
        Some(row) => {
            let input = row.input.unwrap_or(0.0);
            Prices { input, output: row.out.unwrap_or(0.0), cache_read: row.cache_read.unwrap_or(input), cache_write: row.cache_write.unwrap_or(input) }
        }
        None => Prices::default(),
    }
}

/// One model a provider offers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelInfo {
    /// The id requests use.
    pub id: String,
    /// The provider's own name for it, when it gives one.
    pub display_name: Option<String>,
    pub context: Option<u64>,
    /// Per million tokens, when known.
    pub price_in: Option<f64>,
    pub price_out: Option<f64>,
    pub reasoning: bool,
    /// Loaded right now (LM Studio).
    pub loaded: Option<bool>,
}

impl ModelInfo {
    /// One line for a picker: "gpt-5 · 272k context · $1.25 / $10.00 per M".
    pub fn describe(&self) -> String {
        let mut parts = vec![self.display_name.clone().filter(|n| n != &self.id).map_or(self.id.clone(), |n| format!("{} ({n})", self.id))];
        if let Some(context) = self.context {
            parts.push(if context >= 1000 { format!("{}k context", context / 1000) } else { format!("{context} context") });
        }
        match (self.price_in, self.price_out) {
            (Some(i), Some(o)) if i == 0.0 && o == 0.0 => parts.push("free".into()),
            (Some(i), Some(o)) => parts.push(format!("${i:.2} / ${o:.2} per M tokens")),
            _ => {}
        }
        if self.reasoning {
            parts.push("reasoning".into());
        }
        if self.loaded == Some(true) {
            parts.push("loaded".into());
        }
        parts.join(" · ")
    }
}

/// The most pages of a paginated list followed.
const MAX_PAGES: usize = 20;

/// Asks `provider` which models it offers, through the outbound gate.
pub fn list_models(gate: &OutboundGate, provider: &ProviderConfig, key: Option<&str>) -> anyhow::Result<Vec<ModelInfo>> {
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(Duration::from_secs(30)))
            .http_status_as_error(false)
            .build(),
    );
    let get = |url: &str, headers: &[(&str, String)]| -> anyhow::Result<(u16, Value)> {
        let admission = gate.admit(url, &format!("list the models of {}", provider.name))?;
        let mut request = agent.get(url);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = request.call();
        let response = match response {
            Ok(response) => response,
            Err(err) => {
                gate.finish(admission, 0, 0);
                anyhow::bail!("cannot reach {}: {err}", provider.name);
            }
        };
        let status = response.status().as_u16();
        let text = response.into_body().with_config().limit(32 << 20).read_to_string().unwrap_or_default();
        gate.finish(admission, 0, text.len() as u64);
        if status != 200 {
            let message = crate::brains::client::error_message(&text);
            match status {
                401 | 403 => anyhow::bail!("{} refused the API key (HTTP {status}): {message}", provider.name),
                _ => anyhow::bail!("{} could not list its models (HTTP {status}): {message}", provider.name),
            }
        }
        let value = serde_json::from_str(&text).map_err(|err| anyhow::anyhow!("{} sent a model list that is not JSON ({err})", provider.name))?;
        Ok((status, value))
    };
    let base = provider.base_url.trim_end_matches('/');
    let mut models = Vec::new();
    match provider.kind {
        ProviderKind::Openai => {
            let mut headers = Vec::new();
            if let Some(key) = key {
                headers.push(("authorization", format!("Bearer {key}")));
            }
            // LM Studio's own list says what is loaded and each model's context.
            let lm_studio = base.ends_with(":1234/v1") || provider.name == "lmstudio";
            let native = lm_studio.then(|| get(&format!("{}/api/v0/models", base.trim_end_matches("/v1")), &headers).ok()).flatten();
            let (_, value) = match native {
                Some(found) => found,
                None => get(&format!("{base}/models"), &headers)?,
            };
            let data = value.get("data").and_then(Value::as_array).ok_or_else(|| anyhow::anyhow!("{}'s model list has no data array", provider.name))?;
            for item in data {
                let Some(id) = item.get("id").and_then(Value::as_str) else { continue };
                // Embedding, speech and image models are not for chat.
                let kind = item.get("type").and_then(Value::as_str).unwrap_or("llm");
                if matches!(kind, "embeddings" | "embedding") || is_not_chat(id) {
                    continue;
                }
                let per_token = |key: &str| item.pointer(&format!("/pricing/{key}")).and_then(|v| v.as_str().and_then(|s| s.parse::<f64>().ok()).or(v.as_f64())).map(|p| p * 1e6);
                models.push(ModelInfo {
                    id: id.to_owned(),
                    display_name: item.get("name").and_then(Value::as_str).map(str::to_owned),
                    context: item
                        .get("context_length")
                        .or_else(|| item.get("max_context_length"))
                        .or_else(|| item.pointer("/top_provider/context_length"))
                        .and_then(Value::as_u64),
                    price_in: per_token("prompt"),
                    price_out: per_token("completion"),
                    reasoning: item.get("supported_parameters").and_then(Value::as_array).is_some_and(|p| p.iter().any(|p| p == "reasoning")),
                    loaded: item.get("state").and_then(Value::as_str).map(|s| s == "loaded"),
                });
            }
        }
        ProviderKind::Anthropic => {
            let mut headers = vec![("anthropic-version", "2023-06-01".to_owned())];
            if let Some(key) = key {
                headers.push(("x-api-key", key.to_owned()));
            }
            let mut after: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let url = match &after {
                    Some(id) => format!("{base}/v1/models?limit=1000&after_id={id}"),
                    None => format!("{base}/v1/models?limit=1000"),
                };
                let (_, value) = get(&url, &headers)?;
                for item in value.get("data").and_then(Value::as_array).into_iter().flatten() {
                    let Some(id) = item.get("id").and_then(Value::as_str) else { continue };
                    models.push(ModelInfo {
                        id: id.to_owned(),
                        display_name: item.get("display_name").and_then(Value::as_str).map(str::to_owned),
                        context: item.get("max_input_tokens").and_then(Value::as_u64),
                        ..ModelInfo::default()
                    });
                }
                match (value.get("has_more").and_then(Value::as_bool), value.get("last_id").and_then(Value::as_str)) {
                    (Some(true), Some(last)) => after = Some(last.to_owned()),
                    _ => break,
                }
            }
        }
        ProviderKind::Gemini => {
            let mut headers = Vec::new();
            if let Some(key) = key {
                headers.push(("x-goog-api-key", key.to_owned()));
            }
            let mut page: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let url = match &page {
                    Some(token) => format!("{base}/v1beta/models?pageSize=1000&pageToken={}", urlencoding(token)),
                    None => format!("{base}/v1beta/models?pageSize=1000"),
                };
                let (_, value) = get(&url, &headers)?;
                for item in value.get("models").and_then(Value::as_array).into_iter().flatten() {
                    let Some(name) = item.get("name").and_then(Value::as_str) else { continue };
                    let chats = item
                        .get("supportedGenerationMethods")
                        .and_then(Value::as_array)
                        .is_some_and(|m| m.iter().any(|m| m == "generateContent" || m == "streamGenerateContent"));
                    if !chats {
                        continue;
                    }
                    models.push(ModelInfo {
                        id: name.strip_prefix("models/").unwrap_or(name).to_owned(),
                        display_name: item.get("displayName").and_then(Value::as_str).map(str::to_owned),
                        context: item.get("inputTokenLimit").and_then(Value::as_u64),
                        reasoning: item.get("thinking").and_then(Value::as_bool).unwrap_or(false),
                        ..ModelInfo::default()
                    });
                }
                match value.get("nextPageToken").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    Some(token) => page = Some(token.to_owned()),
                    None => break,
                }
            }
        }
        ProviderKind::Ollama => {
            let (_, value) = get(&format!("{base}/api/tags"), &[])?;
            let list = value.get("models").and_then(Value::as_array).ok_or_else(|| anyhow::anyhow!("{}'s /api/tags has no models array", provider.name))?;
            for item in list {
                let Some(name) = item.get("name").or_else(|| item.get("model")).and_then(Value::as_str) else { continue };
                let details = item.get("details");
                let size = details.and_then(|d| d.get("parameter_size")).and_then(Value::as_str);
                let quant = details.and_then(|d| d.get("quantization_level")).and_then(Value::as_str);
                let display = [size, quant].into_iter().flatten().collect::<Vec<_>>().join(" ");
                models.push(ModelInfo {
                    id: name.to_owned(),
                    display_name: (!display.is_empty()).then_some(display),
                    price_in: Some(0.0),
                    price_out: Some(0.0),
                    ..ModelInfo::default()
                });
            }
        }
    }
    // What the table knows fills what the list did not say.
    for model in &mut models {
        if let Some(row) = known(provider, &model.id) {
            model.context = model.context.or(row.context);
            model.price_in = model.price_in.or(row.input);
            model.price_out = model.price_out.or(row.out);
            model.reasoning |= row.reasoning;
        } else if model.price_in.is_none() && crate::net::host_of_url(base).is_some_and(|h| crate::net::is_loopback(&h)) {
            (model.price_in, model.price_out) = (Some(0.0), Some(0.0));
        }
        model.reasoning |= provider.kind == ProviderKind::Openai && is_reasoning(provider, &model.id);
    }
    models.sort_by(|a, b| a.id.cmp(&b.id));
    models.dedup_by(|a, b| a.id == b.id);
    Ok(models)
}

/// Ids of OpenAI's models that are not chat models.
fn is_not_chat(id: &str) -> bool {
    let id = id.to_ascii_lowercase();
    ["embedding", "whisper", "tts", "dall-e", "moderation", "davinci", "babbage", "transcribe", "realtime", "image", "audio"].iter().any(|w| id.contains(w))
}

fn urlencoding(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(name: &str, kind: ProviderKind, base: &str) -> ProviderConfig {
        ProviderConfig::new(name, kind, base, "m")
    }

    #[test]
    fn the_shipped_table_prices_current_models_and_dated_snapshots() {
        assert!(prices_source().starts_with("litellm"), "{}", prices_source());
        let openai = at("openai", ProviderKind::Openai, "https://api.openai.com/v1");
        let gpt5 = known(&openai, "gpt-5").expect("gpt-5 in the table");
        assert!(gpt5.reasoning && gpt5.input.unwrap() > 0.0 && gpt5.cache_read.unwrap() < gpt5.input.unwrap());
        assert!(known(&openai, "gpt-4o-2024-08-06").is_some(), "a dated snapshot falls back to its family");
        let anthropic = at("anthropic", ProviderKind::Anthropic, "https://api.anthropic.com");
        let sonnet = prices(&anthropic, "claude-sonnet-4-5");
        assert!(sonnet.cache_write > sonnet.input && sonnet.cache_read < sonnet.input, "{sonnet:?}");
        // A provider named otherwise, at Gemini's host, still finds Gemini's rows.
        let google = at("google", ProviderKind::Gemini, "https://generativelanguage.googleapis.com");
        assert!(known(&google, "models/gemini-2.5-flash").is_some());
        // Local servers are free whatever the model is called; unknown models are not guessed.
        assert!(prices(&at("openai", ProviderKind::Openai, "http://127.0.0.1:9/v1"), "gpt-5").is_free());
        assert!(prices(&at("mine", ProviderKind::Openai, "https://example.net/v1"), "gpt-5").is_free());
        // Prices the user set win.
        let set = ProviderConfig { price_in_per_mtok: 2.0, price_out_per_mtok: 8.0, ..anthropic.clone() };
        let mine = prices(&set, "claude-sonnet-4-5");
        assert_eq!((mine.input, mine.output, mine.cache_write), (2.0, 8.0, 2.5));
        assert!((mine.cache_read - 0.2).abs() < 1e-9, "the table's share of the input price: {mine:?}");
    }

    #[test]
    fn reasoning_models_are_known_by_the_table_or_their_family() {
        let openai = at("openai", ProviderKind::Openai, "https://api.openai.com/v1");
        assert!(is_reasoning(&openai, "o3-mini") && is_reasoning(&openai, "gpt-5"));
        assert!(!is_reasoning(&openai, "gpt-4o-mini"));
        let unknown = at("azure", ProviderKind::Openai, "https://example.openai.azure.com/v1");
        assert!(is_reasoning(&unknown, "o4-mini-2099") && is_reasoning(&unknown, "gpt-5.9-nano") && !is_reasoning(&unknown, "omni-chat"));
        assert_eq!(strip_date("claude-sonnet-4-5-20250929"), "claude-sonnet-4-5");
    }
}
