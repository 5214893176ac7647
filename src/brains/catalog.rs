//! What models a provider offers: the provider's own list (`GET /v1/models`
//! for OpenAI-compatible servers and OpenRouter, Anthropic's and Gemini's
//! model lists, Ollama's `/api/tags`, LM Studio's `/api/v0/models`), each
//! model with its context window and prices where known — from what the list
//! says itself (OpenRouter's prices, Gemini's and LM Studio's context windows)
//! or from the shipped price table (`prices.rs`). Every list is fetched
//! through the outbound gate and followed across pages where it has them.

use std::time::Duration;

use serde_json::Value;

use crate::brains::provider::{ProviderConfig, ProviderKind};
use crate::net::OutboundGate;

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
    let lister = Lister { gate, provider, base: provider.base_url.trim_end_matches('/'), key };
    let mut models = match provider.kind {
        ProviderKind::Openai => lister.openai()?,
        ProviderKind::Anthropic => lister.anthropic()?,
        ProviderKind::Gemini => lister.gemini()?,
        ProviderKind::Ollama => lister.ollama()?,
    };
    fill_from_table(&mut models, provider, lister.base);
    models.sort_by(|a, b| a.id.cmp(&b.id));
    models.dedup_by(|a, b| a.id == b.id);
    Ok(models)
}

/// One provider's model list being read: where it lives and the key that opens it.
struct Lister<'a> {
    gate: &'a OutboundGate,
    provider: &'a ProviderConfig,
    /// The provider's base URL without a trailing slash.
    base: &'a str,
    key: Option<&'a str>,
}

impl Lister<'_> {
    /// GETs `url` through the gate and reads its JSON; an HTTP error becomes the provider's words.
    fn get(&self, url: &str, headers: &[(&str, String)]) -> anyhow::Result<Value> {
        let (gate, provider) = (self.gate, self.provider);
        let admission = gate.admit(url, &format!("list the models of {}", provider.name))?;
        let agent = admission.agent(|config| config.timeout_connect(Some(Duration::from_secs(10))).timeout_global(Some(Duration::from_secs(30))).http_status_as_error(false));
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
            let message = crate::brains::rules::error_message(&text);
            match status {
                401 | 403 => anyhow::bail!("{} refused the API key (HTTP {status}): {message}", provider.name),
                _ => anyhow::bail!("{} could not list its models (HTTP {status}): {message}", provider.name),
            }
        }
        let value = serde_json::from_str(&text).map_err(|err| anyhow::anyhow!("{} sent a model list that is not JSON ({err})", provider.name))?;
        Ok(value)
    }

    /// An OpenAI-compatible `/models` list (LM Studio's own list first, where it answers), chat models only.
    fn openai(&self) -> anyhow::Result<Vec<ModelInfo>> {
        let (base, provider) = (self.base, self.provider);
        let mut headers = Vec::new();
        if let Some(key) = self.key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        // LM Studio's own list says what is loaded and each model's context.
        let lm_studio = base.ends_with(":1234/v1") || provider.name == "lmstudio";
        let native = lm_studio.then(|| self.get(&format!("{}/api/v0/models", base.trim_end_matches("/v1")), &headers).ok()).flatten();
        let value = match native {
            Some(found) => found,
            None => self.get(&format!("{base}/models"), &headers)?,
        };
        let data = value.get("data").and_then(Value::as_array).ok_or_else(|| anyhow::anyhow!("{}'s model list has no data array", provider.name))?;
        Ok(data.iter().filter_map(openai_model).collect())
    }

    /// Anthropic's `/v1/models`, page after page.
    fn anthropic(&self) -> anyhow::Result<Vec<ModelInfo>> {
        let base = self.base;
        let mut headers = vec![("anthropic-version", "2023-06-01".to_owned())];
        if let Some(key) = self.key {
            headers.push(("x-api-key", key.to_owned()));
        }
        let mut models = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let url = match &after {
                Some(id) => format!("{base}/v1/models?limit=1000&after_id={id}"),
                None => format!("{base}/v1/models?limit=1000"),
            };
            let value = self.get(&url, &headers)?;
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
        Ok(models)
    }

    /// Gemini's `/v1beta/models`, page after page, the models that generate content only.
    fn gemini(&self) -> anyhow::Result<Vec<ModelInfo>> {
        let base = self.base;
        let mut headers = Vec::new();
        if let Some(key) = self.key {
            headers.push(("x-goog-api-key", key.to_owned()));
        }
        let mut models = Vec::new();
        let mut page: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let url = match &page {
                Some(token) => format!("{base}/v1beta/models?pageSize=1000&pageToken={}", urlencoding(token)),
                None => format!("{base}/v1beta/models?pageSize=1000"),
            };
            let value = self.get(&url, &headers)?;
            models.extend(value.get("models").and_then(Value::as_array).into_iter().flatten().filter_map(gemini_model));
            match value.get("nextPageToken").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                Some(token) => page = Some(token.to_owned()),
                None => break,
            }
        }
        Ok(models)
    }

    /// Ollama's `/api/tags`: the pulled models, free, named with their size and quantization.
    fn ollama(&self) -> anyhow::Result<Vec<ModelInfo>> {
        let value = self.get(&format!("{}/api/tags", self.base), &[])?;
        let list = value.get("models").and_then(Value::as_array).ok_or_else(|| anyhow::anyhow!("{}'s /api/tags has no models array", self.provider.name))?;
        let mut models = Vec::new();
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
        Ok(models)
    }
}

/// One entry of an OpenAI-compatible list (OpenRouter's prices, LM Studio's state and context); None for one without an id or not for chat.
fn openai_model(item: &Value) -> Option<ModelInfo> {
    let id = item.get("id").and_then(Value::as_str)?;
    // Embedding, speech and image models are not for chat.
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("llm");
    if matches!(kind, "embeddings" | "embedding") || is_not_chat(id) {
        return None;
    }
    let per_token = |key: &str| item.pointer(&format!("/pricing/{key}")).and_then(|v| v.as_str().and_then(|s| s.parse::<f64>().ok()).or(v.as_f64())).map(|p| p * 1e6);
    Some(ModelInfo {
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
    })
}

/// One entry of Gemini's list; None for one without a name or that cannot chat.
fn gemini_model(item: &Value) -> Option<ModelInfo> {
    let name = item.get("name").and_then(Value::as_str)?;
    let chats = item
        .get("supportedGenerationMethods")
        .and_then(Value::as_array)
        .is_some_and(|m| m.iter().any(|m| m == "generateContent" || m == "streamGenerateContent"));
    if !chats {
        return None;
    }
    Some(ModelInfo {
        id: name.strip_prefix("models/").unwrap_or(name).to_owned(),
        display_name: item.get("displayName").and_then(Value::as_str).map(str::to_owned),
        context: item.get("inputTokenLimit").and_then(Value::as_u64),
        reasoning: item.get("thinking").and_then(Value::as_bool).unwrap_or(false),
        ..ModelInfo::default()
    })
}

/// What the price table knows fills what the list did not say; a loopback server's unknown models are free.
fn fill_from_table(models: &mut [ModelInfo], provider: &ProviderConfig, base: &str) {
    for model in models {
        if let Some(row) = provider.known(&model.id) {
            model.context = model.context.or(row.context);
            model.price_in = model.price_in.or(row.input);
            model.price_out = model.price_out.or(row.out);
            model.reasoning |= row.reasoning;
        } else if model.price_in.is_none() && crate::net::host_of_url(base).is_some_and(|h| crate::net::is_loopback(&h)) {
            (model.price_in, model.price_out) = (Some(0.0), Some(0.0));
        }
        model.reasoning |= provider.kind == ProviderKind::Openai && provider.is_reasoning(&model.id);
    }
}

/// Ids of OpenAI's models that are not chat models.
fn is_not_chat(id: &str) -> bool {
    let id = id.to_ascii_lowercase();
    ["embedding", "whisper", "tts", "dall-e", "moderation", "davinci", "babbage", "transcribe", "realtime", "image", "audio"].iter().any(|w| id.contains(w))
}

fn urlencoding(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

