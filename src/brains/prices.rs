//! What models cost and what they can do: `assets/model-prices.json`, written
//! by `scripts/update-model-prices` from LiteLLM's maintained model price list
//! and compiled in (context window, prices per million tokens including cache
//! reads and writes, reasoning, prompt caching, vision), parsed on first use.
//! `ProviderConfig::prices` and `::is_reasoning` read it for a provider.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

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
    /// It reads pictures (LiteLLM's `supports_vision`).
    #[serde(default)]
    pub vision: bool,
    #[serde(default)]
    pub cache_min: Option<u64>,
    /// The lowest reasoning efforts OpenAI takes for it (`none` from GPT-5.1, `minimal` on GPT-5).
    #[serde(default)]
    pub effort_none: bool,
    #[serde(default)]
    pub effort_minimal: bool,
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
pub fn source() -> &'static str {
    &table().source
}

/// The table's provider for a provider named `name` at `base_url`: its own
/// name when the table has it, else the one its API belongs to (api.openai.com, Anthropic, Gemini).
fn table_provider(name: &str, base_url: &str) -> Option<&'static str> {
    let models = &table().models;
    if let Some((name, _)) = models.get_key_value(name) {
        return Some(name.as_str());
    }
    let host = crate::net::host_of_url(base_url).unwrap_or_default();
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

/// What the table knows of `model` at the provider named `name` at `base_url`
/// (the id as the API gives it; a dated snapshot falls back to its family:
/// `gpt-4o-2024-08-06` → `gpt-4o`).
pub fn known(name: &str, base_url: &str, model: &str) -> Option<&'static PriceRow> {
    let rows = table().models.get(table_provider(name, base_url)?)?;
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

/// Whether a model the table does not know is one of OpenAI's reasoning
/// families by its name (o1, o3, o4-…, gpt-5…).
pub fn reasoning_family(model: &str) -> bool {
    let model = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    let o_series = model.len() >= 2 && model.starts_with('o') && model[1..].chars().next().is_some_and(|c| c.is_ascii_digit());
    o_series || model.starts_with("gpt-5")
}

/// Whether a model the table does not know reads pictures by its name: the
/// vision families local servers serve (llava, bakllava, moondream,
/// minicpm-v, qwen2.5-vl and "-vl" models, llama3.2-vision and "vision"
/// models, gemma3 from 4b, pixtral, granite-vision) and the cloud families
/// that all see (gpt-4o, gpt-4.1, gpt-5, claude-3 and later, gemini).
pub fn vision_family(model: &str) -> bool {
    let model = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    let named = ["llava", "moondream", "minicpm-v", "vision", "pixtral", "gpt-4o", "gpt-4.1", "gpt-5", "claude-", "gemini"];
    let gemma3_sees = model.starts_with("gemma3") && !model.contains(":1b") && !model.contains("-1b") && !model.contains("270m");
    named.iter().any(|n| model.contains(n)) || model.contains("-vl") || model.contains("vl:") || model.ends_with("vl") || gemma3_sees
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vision_is_known_from_the_table_else_from_the_models_family() {
        for seeing in ["llava:13b", "qwen2.5vl:7b", "Qwen2.5-VL-7B-Instruct", "llama3.2-vision", "gemma3:4b", "minicpm-v", "openrouter/openai/gpt-4o", "claude-future-9"] {
            assert!(vision_family(seeing), "{seeing}");
        }
        for blind in ["qwen2.5-coder:1.5b", "llama3.1:8b", "gemma3:1b", "deepseek-r1", "o3-mini", "mistral-small"] {
            assert!(!vision_family(blind), "{blind}");
        }
    }

    #[test]
    fn the_shipped_table_knows_current_models_dated_snapshots_and_providers_by_host() {
        assert!(source().starts_with("litellm"), "{}", source());
        let gpt5 = known("openai", "https://api.openai.com/v1", "gpt-5").expect("gpt-5 in the table");
        assert!(gpt5.reasoning && gpt5.input.unwrap() > 0.0 && gpt5.cache_read.unwrap() < gpt5.input.unwrap());
        assert!(known("openai", "https://api.openai.com/v1", "gpt-4o-2024-08-06").is_some(), "a dated snapshot falls back to its family");
        // A provider named otherwise, at Gemini's host, still finds Gemini's rows; an unknown host finds none.
        assert!(known("google", "https://generativelanguage.googleapis.com", "models/gemini-2.5-flash").is_some());
        assert!(known("mine", "https://example.net/v1", "gpt-5").is_none());
        assert_eq!(strip_date("claude-sonnet-4-5-20250929"), "claude-sonnet-4-5");
        assert!(reasoning_family("o4-mini-2099") && reasoning_family("gpt-5.9-nano") && !reasoning_family("omni-chat"));
    }
}
