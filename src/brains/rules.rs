//! Each provider's current request rules, and what a provider taught us.
//!
//! From the providers' documentation (and LiteLLM's and OpenRouter's
//! handling, which encode the same): OpenAI's reasoning models (o1, o3, o4-…,
//! the GPT-5 family) take `max_completion_tokens`, refuse `max_tokens`,
//! `temperature` and `top_p`, and may get a `reasoning_effort`; api.openai.com
//! takes `max_completion_tokens` for every model (`max_tokens` is deprecated
//! there) while other OpenAI-compatible servers keep `max_tokens`. Anthropic's
//! extended thinking needs a `budget_tokens` of at least 1,024 and below
//! `max_tokens`. Gemini shows thought summaries with `includeThoughts`.
//!
//! When a provider still answers 400 naming a parameter it does not support,
//! the client retries once without it (or with the name it asks for) and the
//! adaptation is remembered for that provider and model, in
//! `model-adaptations.json` in the data directory, so the next request is
//! right the first time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The human part of an error body (`{"error": {"message": …}}` and friends).
pub fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .or_else(|| v.get("message"))
            .and_then(|m| m.as_str())
            .map(str::to_owned)
    });
    message.unwrap_or_else(|| body.chars().take(300).collect::<String>().trim().to_owned())
}

/// What was learned about one provider's model.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adaptation {
    /// Parameters to leave out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<String>,
    /// Parameters to send under another name (`max_tokens` → `max_completion_tokens`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rename: BTreeMap<String, String>,
}

impl Adaptation {
    /// Applies what was learned to a request body: a dotted name
    /// (`reasoning.summary`) is that exact path; a plain one is looked for at
    /// the top level and one level down (where Gemini keeps its settings).
    pub fn apply(&self, body: &mut Value) {
        fn fix(object: &mut serde_json::Map<String, Value>, adaptation: &Adaptation) {
            for key in adaptation.drop.iter().filter(|k| !k.contains('.')) {
                object.remove(key);
            }
            for (from, to) in &adaptation.rename {
                if let Some(value) = object.remove(from) {
                    object.insert(to.clone(), value);
                }
            }
        }
        for path in self.drop.iter().filter(|k| k.contains('.')) {
            let (parent, last) = path.rsplit_once('.').expect("a dotted name");
            let pointer = format!("/{}", parent.replace('.', "/"));
            if let Some(object) = body.pointer_mut(&pointer).and_then(Value::as_object_mut) {
                object.remove(last);
                if object.is_empty() {
                    // An emptied settings object goes too (`"reasoning": {}` is refused as well).
                    let (grand, name) = pointer.rsplit_once('/').expect("a pointer");
                    if let Some(holder) = if grand.is_empty() { Some(&mut *body) } else { body.pointer_mut(grand) }.and_then(Value::as_object_mut) {
                        holder.remove(name);
                    }
                }
            }
        }
        let Some(object) = body.as_object_mut() else { return };
        fix(object, self);
        for (_, value) in object.iter_mut() {
            if let Some(inner) = value.as_object_mut() {
                fix(inner, self);
            }
        }
    }

    fn merge(&mut self, other: &Adaptation) -> bool {
        let before = self.clone();
        for key in &other.drop {
            if !self.drop.contains(key) {
                self.drop.push(key.clone());
            }
        }
        self.rename.extend(other.rename.iter().map(|(k, v)| (k.clone(), v.clone())));
        *self != before
    }
}

/// The parameter a 400 names as unsupported, and what to do about it.
/// OpenAI: `{"error": {"message": "Unsupported parameter: 'max_tokens' is not
/// supported with this model. Use 'max_completion_tokens' instead.", "param":
/// "max_tokens", "code": "unsupported_parameter"}}`; "Unsupported value:
/// 'temperature' does not support 0.2 …" (`unsupported_value`); "Unrecognized
/// request argument supplied: x". Anthropic: "x: Extra inputs are not
/// permitted". Gemini: `Invalid JSON payload received. Unknown name "x" at
/// 'generation_config': Cannot find field.`
pub fn unsupported(body: &str, request: &Value) -> Option<Adaptation> {
    let parsed: Value = serde_json::from_str(body).ok()?;
    let error = parsed.get("error").unwrap_or(&parsed);
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    let code = error.get("code").and_then(Value::as_str).unwrap_or_default();
    let quoted = |text: &str, open: char, close: char| -> Option<String> {
        let start = text.find(open)? + open.len_utf8();
        let end = text[start..].find(close)? + start;
        Some(text[start..end].to_owned())
    };
    let param = if code == "unsupported_parameter" || code == "unsupported_value" || message.starts_with("Unsupported parameter") || message.starts_with("Unsupported value") {
        error.get("param").and_then(Value::as_str).map(str::to_owned).or_else(|| quoted(message, '\'', '\''))
    } else if code == "unknown_parameter" || message.starts_with("Unknown parameter") {
        // The Responses API: "Unknown parameter: 'max_tokens'."
        error.get("param").and_then(Value::as_str).map(str::to_owned).or_else(|| quoted(message, '\'', '\''))
    } else if let Some(rest) = message.strip_prefix("Unrecognized request argument supplied:") {
        Some(rest.trim().trim_matches('\'').to_owned())
    } else if let Some(at) = message.find(": Extra inputs are not permitted") {
        Some(message[..at].rsplit(['.', ' ']).next().unwrap_or_default().to_owned())
    } else if message.contains("Unknown name") {
        quoted(&message[message.find("Unknown name")?..], '"', '"')
    } else if let Some(extra) = parsed.get("detail").and_then(Value::as_array).and_then(|d| d.iter().find(|e| e["type"] == "extra_forbidden")) {
        // Mistral (FastAPI, a 422): {"detail": [{"type": "extra_forbidden", "loc": ["body", "x"], …}]}.
        extra["loc"].as_array().and_then(|loc| loc.last()).and_then(Value::as_str).map(str::to_owned)
    } else {
        None
    }?;
    // Only parameters this request carries (never drop what the request needs).
    let present = if param.contains('.') {
        request.pointer(&format!("/{}", param.replace('.', "/"))).is_some()
    } else {
        request.get(&param).is_some() || request.as_object()?.values().any(|v| v.get(&param).is_some())
    };
    // What carries the conversation, the instructions, the tools or the privacy of the request is
    // never "adapted" away: a provider that refuses those is broken, not different (the user sees its error).
    const KEPT: &[&str] = &["model", "messages", "contents", "input", "stream", "system", "systemInstruction", "instructions", "tools", "store"];
    // An output limit may be renamed, never dropped: the budget counts on it.
    const LIMITS: &[&str] = &["max_tokens", "max_completion_tokens", "max_output_tokens", "maxOutputTokens", "num_predict"];
    if !present || KEPT.contains(&param.as_str()) {
        return None;
    }
    let mut adaptation = Adaptation::default();
    // "Use 'max_completion_tokens' instead." — only ever one output limit for another.
    let instead = message
        .find("Use '")
        .and_then(|at| quoted(&message[at..], '\'', '\''))
        .filter(|name| name != &param && message.contains("instead") && LIMITS.contains(&name.as_str()) && LIMITS.contains(&param.as_str()));
    match instead {
        Some(to) => {
            adaptation.rename.insert(param, to);
        }
        None if LIMITS.contains(&param.as_str()) => return None,
        None => adaptation.drop.push(param),
    }
    Some(adaptation)
}

/// What the client learned, per provider and model, kept across restarts.
pub struct Learned {
    path: Option<PathBuf>,
    map: BTreeMap<String, Adaptation>,
}

fn learned() -> &'static Mutex<Learned> {
    static LEARNED: std::sync::OnceLock<Mutex<Learned>> = std::sync::OnceLock::new();
    LEARNED.get_or_init(|| Mutex::new(Learned { path: None, map: BTreeMap::new() }))
}

const FILE_NAME: &str = "model-adaptations.json";

fn key(provider: &str, model: &str) -> String {
    format!("{provider}/{model}")
}

/// Reads (and from now on writes) what was learned in `data_dir`.
pub fn remember_in(data_dir: &Path) {
    let path = data_dir.join(FILE_NAME);
    let kept: BTreeMap<String, Adaptation> = std::fs::read_to_string(&path).ok().and_then(|text| serde_json::from_str(&text).ok()).unwrap_or_default();
    let mut learned = learned().lock();
    // What this process learned stays true whichever data directory it writes to next.
    for (key, adaptation) in kept {
        learned.map.entry(key).or_default().merge(&adaptation);
    }
    learned.path = Some(path);
}

/// What was learned about `model` at `provider`.
pub fn adaptation(provider: &str, model: &str) -> Adaptation {
    learned().lock().map.get(&key(provider, model)).cloned().unwrap_or_default()
}

/// Keeps `adaptation` for `model` at `provider`.
pub fn learn(provider: &str, model: &str, adaptation: &Adaptation) {
    let mut learned = learned().lock();
    let changed = learned.map.entry(key(provider, model)).or_default().merge(adaptation);
    if changed && let Some(path) = learned.path.clone() {
        let partial = path.with_extension("json.partial");
        let written = serde_json::to_string_pretty(&learned.map).ok().is_some_and(|text| std::fs::write(&partial, text).is_ok());
        if !(written && std::fs::rename(&partial, &path).is_ok()) {
            tracing::warn!(path = %path.display(), "could not keep what the provider taught");
        }
    }
    tracing::info!(provider, model, ?adaptation, "adapted to what the provider supports");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_providers_refusal_names_the_parameter_and_what_to_send_instead() {
        let request = json!({"model": "o3", "max_tokens": 10, "temperature": 0.2, "generationConfig": {"thinkingConfig": {}}});
        let openai = r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#;
        let a = unsupported(openai, &request).unwrap();
        assert_eq!(a.rename.get("max_tokens").map(String::as_str), Some("max_completion_tokens"));
        let value = r#"{"error":{"message":"Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.","param":"temperature","code":"unsupported_value"}}"#;
        assert_eq!(unsupported(value, &request).unwrap().drop, vec!["temperature"]);
        let gemini = r#"{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name \"thinkingConfig\" at 'generation_config': Cannot find field.","status":"INVALID_ARGUMENT"}}"#;
        assert_eq!(unsupported(gemini, &request).unwrap().drop, vec!["thinkingConfig"]);
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"temperature: Extra inputs are not permitted"}}"#;
        assert_eq!(unsupported(anthropic, &request).unwrap().drop, vec!["temperature"]);
        // What the request does not carry, or needs, is never "adapted" away; other 400s are not about parameters.
        assert!(unsupported(r#"{"error":{"message":"Unsupported parameter: 'top_p'","code":"unsupported_parameter"}}"#, &request).is_none());
        assert!(unsupported(r#"{"error":{"message":"Unsupported parameter: 'messages'","param":"messages","code":"unsupported_parameter"}}"#, &json!({"messages": []})).is_none());
        assert!(unsupported(r#"{"error":{"message":"Unsupported parameter: 'tools'","param":"tools","code":"unsupported_parameter"}}"#, &json!({"tools": []})).is_none());
        assert!(unsupported(r#"{"type":"error","error":{"message":"system: Extra inputs are not permitted"}}"#, &json!({"system": "be careful"})).is_none());
        assert!(unsupported(r#"{"error":{"message":"context too long"}}"#, &request).is_none());
        // An unverified organisation's refusal of reasoning summaries: that one nested setting goes.
        let summary = r#"{"error":{"message":"Your organization must be verified to generate reasoning summaries.","type":"invalid_request_error","param":"reasoning.summary","code":"unsupported_value"}}"#;
        let responses = json!({"model": "gpt-5", "input": [], "reasoning": {"summary": "auto", "effort": "low"}, "store": false, "max_output_tokens": 10});
        let no_summary = unsupported(summary, &responses).unwrap();
        let mut body = responses.clone();
        no_summary.apply(&mut body);
        assert_eq!(body["reasoning"], json!({"effort": "low"}));
        let mut alone = json!({"reasoning": {"summary": "auto"}});
        no_summary.apply(&mut alone);
        assert_eq!(alone, json!({}), "an emptied settings object goes too");
        // Mistral's 422 for a field it forbids.
        let mistral = r#"{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","reasoning_effort"],"msg":"Extra inputs are not permitted"}]},"detail":[{"type":"extra_forbidden","loc":["body","reasoning_effort"],"msg":"Extra inputs are not permitted","input":"low"}]}"#;
        assert_eq!(unsupported(mistral, &json!({"reasoning_effort": "low"})).unwrap().drop, vec!["reasoning_effort"]);
        // A hostile or broken server cannot have the output limit dropped, the request stored, or a limit renamed into something else.
        let limits = json!({"max_output_tokens": 10, "store": false, "max_tokens": 5, "input": []});
        assert!(unsupported(r#"{"error":{"message":"Unknown parameter: 'max_output_tokens'.","param":"max_output_tokens","code":"unknown_parameter"}}"#, &limits).is_none());
        assert!(unsupported(r#"{"error":{"message":"Unknown parameter: 'store'.","param":"store","code":"unknown_parameter"}}"#, &limits).is_none());
        assert!(unsupported(r#"{"error":{"message":"Unsupported parameter: 'max_tokens'. Use 'messages' instead.","param":"max_tokens","code":"unsupported_parameter"}}"#, &limits).is_none());
        let mut body = request.clone();
        a.apply(&mut body);
        assert_eq!(body["max_completion_tokens"], 10);
        assert!(body.get("max_tokens").is_none());
    }

    #[test]
    fn what_was_learned_is_kept_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        remember_in(dir.path());
        let mut a = Adaptation::default();
        a.drop.push("top_p".into());
        learn("test-provider", "m1", &a);
        remember_in(dir.path());
        assert_eq!(adaptation("test-provider", "m1").drop, vec!["top_p"]);
        assert_eq!(adaptation("test-provider", "m2"), Adaptation::default());
    }
}
