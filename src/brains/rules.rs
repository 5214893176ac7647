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
//!
//! Such an error may come from anything on the way (a gateway's sub-provider, a
//! proxy) and a lesson lasts, so a lesson is only ever one of two things: leave
//! out an optional setting this request format lists as one it may lose
//! (`Format::droppable`: sampling, reasoning and caching settings), or send the
//! output limit under the other name the same format takes for it. The
//! conversation, the instructions, the tools, `store`, the usage report and the
//! output limit are never left out, whatever path or spelling names them, and a
//! lesson read back from the file is held to the same rules.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::brains::ProviderKind;

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

/// The format of a request body: each has its own optional settings, and its own
/// name (or names) for the output limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenAI's chat completions, which most servers speak.
    Chat,
    /// OpenAI's Responses API.
    Responses,
    /// Anthropic's Messages.
    Anthropic,
    /// Gemini's `streamGenerateContent`.
    Gemini,
    /// Ollama's `/api/chat`.
    Ollama,
}

impl Format {
    const ALL: [Format; 5] = [Format::Chat, Format::Responses, Format::Anthropic, Format::Gemini, Format::Ollama];

    /// The format of a request to a provider of `kind` (`responses`: OpenAI's Responses API).
    pub fn of(kind: ProviderKind, responses: bool) -> Format {
        match kind {
            ProviderKind::Openai if responses => Format::Responses,
            ProviderKind::Openai => Format::Chat,
            ProviderKind::Anthropic => Format::Anthropic,
            ProviderKind::Gemini => Format::Gemini,
            ProviderKind::Ollama => Format::Ollama,
        }
    }

    /// Everything a provider may teach cowork to leave out of this format's body, as
    /// exact paths: sampling, reasoning and caching settings, each optional, none of them
    /// carrying the conversation, the instructions, the tools, the output limit, the usage
    /// the budget counts or the privacy of the request. A setting not listed here is never
    /// dropped, whatever a provider says: a list of what may go (rather than of what must
    /// stay) cannot be got round by a spelling, a path or a setting added later.
    fn droppable(self) -> &'static [&'static str] {
        match self {
            // `stream_options` asks for the usage report; a server that refuses it may go without,
            // and the client then counts the answer's tokens itself (`client::estimate_usage`),
            // so the budget still sees what it cost.
            Format::Chat => &["temperature", "top_p", "reasoning_effort", "reasoning", "reasoning.effort", "prompt_cache_key", "stream_options"],
            Format::Responses => &["temperature", "top_p", "reasoning", "reasoning.summary", "reasoning.effort", "prompt_cache_key"],
            Format::Anthropic => &["temperature", "top_p", "top_k", "thinking"],
            Format::Gemini => &[
                "generationConfig.temperature",
                "generationConfig.topP",
                "generationConfig.topK",
                "generationConfig.thinkingConfig",
                "generationConfig.thinkingConfig.includeThoughts",
                "generationConfig.thinkingConfig.thinkingBudget",
                "generationConfig.thinkingConfig.thinkingLevel",
            ],
            Format::Ollama => &["think", "options.temperature", "options.top_p", "options.top_k"],
        }
    }

    /// The renames a provider may ask for ("Use 'max_completion_tokens' instead"): an
    /// output limit to the other name this same format takes for it, at the top level.
    /// Every other format has one name for its limit, so nothing there is ever renamed.
    fn renames(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Format::Chat => &[("max_tokens", "max_completion_tokens"), ("max_completion_tokens", "max_tokens")],
            _ => &[],
        }
    }
}

/// Names no lesson ever reaches, at any depth of a path and in any spelling (compared
/// without case, `_` or `-`, so `maxOutputTokens` is `max_output_tokens`): what carries
/// the conversation, the instructions or the tools, the model and the stream, `store`
/// (privacy), the usage report the budget counts, and every provider's output limit.
/// `Format::droppable` is the rule; this is a second wall, so that no setting added to
/// those lists later can sit under one of these.
const NEVER: &[&str] = &[
    "model", "messages", "contents", "input", "instructions", "system", "systeminstruction", "prompt", "content", "parts", "text", "role",
    "tools", "toolchoice", "function", "functions", "functiondeclarations", "parameters", "stream", "store", "includeusage",
    "maxtokens", "maxcompletiontokens", "maxoutputtokens", "maxnewtokens", "maxtokenstosample", "numpredict",
];

/// `name` as a provider spelled it, split into the object keys of a path; None when a
/// key is empty, an array index (no letter in it: `messages.0.content`), anything but
/// letters, digits, `_` and `-` (`messages[0]`, `/messages/0`, spaces), or one of `NEVER`.
fn keys(name: &str) -> Option<Vec<&str>> {
    let keys: Vec<&str> = name.split('.').collect();
    let plain = |key: &str| key.bytes().any(|b| b.is_ascii_alphabetic()) && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let never = |key: &str| {
        let folded: String = key.chars().filter(|c| *c != '_' && *c != '-').map(|c| c.to_ascii_lowercase()).collect();
        NEVER.contains(&folded.as_str())
    };
    keys.iter().all(|key| plain(key) && !never(key)).then_some(keys)
}

/// The paths in `body` a name reaches: a dotted name that one path, a plain one the key
/// at the top level and in each settings object one level down (where Gemini and Ollama
/// keep theirs). Only through objects: nothing inside an array is ever reached.
fn reached(keys: &[&str], body: &Value) -> Vec<String> {
    let Some(object) = body.as_object() else { return Vec::new() };
    if let [key] = keys {
        let mut paths: Vec<String> = object.contains_key(*key).then(|| (*key).to_owned()).into_iter().collect();
        for (holder, value) in object {
            if value.as_object().is_some_and(|inner| inner.contains_key(*key)) {
                paths.push(format!("{holder}.{key}"));
            }
        }
        return paths;
    }
    let mut at = body;
    for key in keys {
        match at.as_object().and_then(|o| o.get(*key)) {
            Some(next) => at = next,
            None => return Vec::new(),
        }
    }
    vec![keys.join(".")]
}

/// Where leaving `name` out would remove something from `body`, when every such place
/// is a setting this format may lose; None when any is not, or when `body` has none.
fn droppable_at(format: Format, name: &str, body: &Value) -> Option<Vec<String>> {
    let paths = reached(&keys(name)?, body);
    (!paths.is_empty() && paths.iter().all(|path| format.droppable().contains(&path.as_str()))).then_some(paths)
}

/// Removes the setting at `path` (object keys), and the settings object it was in when
/// that is left empty and may go too (`"reasoning": {}` is refused as well).
fn remove(format: Format, body: &mut Value, path: &str) {
    let (holder, key) = match path.rsplit_once('.') {
        Some((holder, key)) => (Some(holder), key),
        None => (None, path),
    };
    let pointer = holder.map(|h| format!("/{}", h.replace('.', "/"))).unwrap_or_default();
    let Some(object) = body.pointer_mut(&pointer).and_then(Value::as_object_mut) else { return };
    object.remove(key);
    if object.is_empty()
        && let Some(holder) = holder
        && format.droppable().contains(&holder)
    {
        remove(format, body, holder);
    }
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
    /// Applies what was learned to a request body in `format`: a dotted name
    /// (`reasoning.summary`) is that exact path; a plain one is looked for at the top
    /// level and one level down (where Gemini keeps its settings). Whatever the lesson
    /// says, only what `format` may lose is left out and only an output limit renamed
    /// (`Format::droppable`, `Format::renames`): a lesson from an older cowork or a
    /// hand-edited file can do no more than one `unsupported` would teach today.
    pub fn apply(&self, format: Format, body: &mut Value) {
        for name in &self.drop {
            for path in droppable_at(format, name, body).unwrap_or_default() {
                remove(format, body, &path);
            }
        }
        for (from, to) in &self.rename {
            if format.renames().contains(&(from.as_str(), to.as_str()))
                && let Some(object) = body.as_object_mut()
                && let Some(value) = object.remove(from)
            {
                object.insert(to.clone(), value);
            }
        }
    }

    /// What of this lesson some format could apply; the rest (kept by an older cowork,
    /// or written by hand) is left out, and the log says so.
    fn sound(&self) -> Adaptation {
        let droppable = |name: &str| {
            keys(name).is_some() && Format::ALL.iter().flat_map(|f| f.droppable()).any(|path| *path == name || path.rsplit('.').next() == Some(name))
        };
        let renamable = |from: &str, to: &str| Format::ALL.iter().any(|f| f.renames().contains(&(from, to)));
        let kept = Adaptation {
            drop: self.drop.iter().filter(|name| droppable(name)).cloned().collect(),
            rename: self.rename.iter().filter(|(from, to)| renamable(from, to)).map(|(k, v)| (k.clone(), v.clone())).collect(),
        };
        if kept != *self {
            tracing::warn!(lesson = ?self, kept = ?kept, "ignored what a provider can never teach: only optional settings are left out, only an output limit renamed");
        }
        kept
    }

    fn is_empty(&self) -> bool {
        self.drop.is_empty() && self.rename.is_empty()
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
///
/// The error comes from the provider, or from anything on the way (a gateway's
/// sub-provider, a proxy), and what is learned stays for every later request: so
/// only a setting `format` may lose (`Format::droppable`) that `request` carries is
/// ever left out, and only an output limit is ever renamed, to the other name this
/// format takes for it. Anything else is None: the user sees the provider's error.
pub fn unsupported(body: &str, format: Format, request: &Value) -> Option<Adaptation> {
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
    let mut adaptation = Adaptation::default();
    // "Use 'max_completion_tokens' instead.": one name of this format's output limit for its other one.
    let instead = message
        .find("Use '")
        .and_then(|at| quoted(&message[at..], '\'', '\''))
        .filter(|name| message.contains("instead") && format.renames().contains(&(param.as_str(), name.as_str())) && request.get(&param).is_some());
    match instead {
        Some(to) => {
            adaptation.rename.insert(param, to);
        }
        None => {
            droppable_at(format, &param, request)?;
            adaptation.drop.push(param);
        }
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
    // A lesson no provider may teach (kept by an older cowork, before lessons were
    // checked, or written by hand) is ignored here, and gone from the file at its next write.
    for (key, adaptation) in kept {
        let sound = adaptation.sound();
        if !sound.is_empty() {
            learned.map.entry(key).or_default().merge(&sound);
        }
    }
    learned.path = Some(path);
}

/// What was learned about `model` at `provider`.
pub fn adaptation(provider: &str, model: &str) -> Adaptation {
    learned().lock().map.get(&key(provider, model)).cloned().unwrap_or_default()
}

/// Keeps `adaptation` for `model` at `provider`.
pub fn learn(provider: &str, model: &str, adaptation: &Adaptation) {
    let adaptation = &adaptation.sound();
    if adaptation.is_empty() {
        return;
    }
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
    use crate::brains::{ProviderConfig, Role, ToolDef, Turn};
    use serde_json::json;

    const SYSTEM: &str = "You are cowork, a concise desktop assistant.";

    /// A request of each format as cowork builds it: a system prompt, a conversation, a
    /// tool, and the optional settings each sends (reasoning, thinking, caching).
    fn requests() -> Vec<(Format, Value)> {
        let turns = [Turn::new(Role::System, SYSTEM), Turn::new(Role::User, "hello"), Turn::new(Role::Assistant, "hi"), Turn::new(Role::User, "and now?")];
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false});
        let tools = [ToolDef { name: "read_file".into(), description: "Reads a file".into(), parameters: schema }];
        let effort = |name: &str, kind: ProviderKind, base: &str, model: &str| ProviderConfig { reasoning_effort: Some("low".into()), ..ProviderConfig::new(name, kind, base, model) };
        let providers = [
            effort("azure", ProviderKind::Openai, "http://127.0.0.1:1/v1", "o3-mini"),
            effort("openrouter", ProviderKind::Openai, "https://openrouter.ai/api/v1", "openai/o3-mini"),
            ProviderConfig::new("local", ProviderKind::Openai, "http://127.0.0.1:1/v1", "llama"),
            effort("openai", ProviderKind::Openai, "https://api.openai.com/v1", "gpt-5"),
            effort("anthropic", ProviderKind::Anthropic, "https://api.anthropic.com", "claude-sonnet-4-5"),
            effort("gemini", ProviderKind::Gemini, "https://generativelanguage.googleapis.com", "gemini-2.5-flash"),
            effort("ollama", ProviderKind::Ollama, "http://127.0.0.1:11434", "llama3.2"),
        ];
        providers
            .iter()
            .map(|p| {
                let request = p.request(&p.model, &turns, &tools, 400, Some("key"));
                (Format::of(p.kind, request.responses), request.body)
            })
            .collect()
    }

    /// What no lesson may change: the conversation, the instructions, the tools, the model,
    /// the stream, `store`, the usage report, and the output limit's value (Chat's may change name).
    fn essentials(format: Format, body: &Value) -> Vec<(String, Value)> {
        let keys = ["model", "messages", "input", "contents", "system", "systemInstruction", "instructions", "tools", "stream", "store"];
        let mut kept: Vec<(String, Value)> = keys.iter().map(|k| ((*k).to_owned(), body.get(*k).cloned().unwrap_or(Value::Null))).collect();
        let limit = match format {
            Format::Chat => body.get("max_tokens").or_else(|| body.get("max_completion_tokens")),
            Format::Responses => body.get("max_output_tokens"),
            Format::Anthropic => body.get("max_tokens"),
            Format::Gemini => body.pointer("/generationConfig/maxOutputTokens"),
            Format::Ollama => body.pointer("/options/num_predict"),
        };
        kept.push(("output limit".into(), limit.cloned().unwrap_or(Value::Null)));
        kept
    }

    /// Every key and every path (array indices included) in `value`.
    fn names(value: &Value, at: &str, out: &mut Vec<String>) {
        let children: Vec<(String, &Value)> = match value {
            Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
            Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
            _ => return,
        };
        for (key, child) in children {
            let path = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
            out.push(key);
            out.push(path.clone());
            names(child, &path, out);
        }
    }

    /// Spellings of the review's names that a path walk does not produce.
    const VARIANTS: &[&str] = &[
        "messages[0].content", "messages[0]", "/messages/0/content", "messages.0.content.", ".messages", "messages..0", "Messages.0.Content", "messages.-",
        "input[0]", "tools[0].function.parameters", "contents[0].parts", "system_instruction", "system_instruction.parts", "generation_config",
        "generation_config.max_output_tokens", "generationConfig.MaxOutputTokens", "generationConfig.max_output_tokens", "options.NUM_PREDICT",
        "options.num-predict", "maxTokens", "max-tokens", "MAX_TOKENS", "max_new_tokens", "include_usage", "stream_options.include_usage", "parts", "content",
        "text", "role", "thinking.budget_tokens", "thinking.type", "options.num_predict\u{0}",
    ];

    /// The same refusal in each shape the client understands, naming `name`.
    fn refusals(name: &str) -> Vec<String> {
        let mut all = vec![
            json!({"error": {"message": format!("Unsupported parameter: '{name}' is not supported with this model."), "type": "invalid_request_error", "param": name, "code": "unsupported_parameter"}}),
            json!({"error": {"message": format!("Unsupported value: '{name}' does not support 0.2 with this model."), "param": name, "code": "unsupported_value"}}),
            json!({"error": {"message": format!("Unsupported parameter: '{name}' is not supported with this model."), "code": "unsupported_parameter"}}),
            json!({"error": {"message": format!("Unknown parameter: '{name}'."), "type": "invalid_request_error", "param": name, "code": "unknown_parameter"}}),
            json!({"error": {"message": format!("Unrecognized request argument supplied: {name}"), "type": "invalid_request_error"}}),
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": format!("{name}: Extra inputs are not permitted")}}),
            json!({"error": {"code": 400, "message": format!("Invalid JSON payload received. Unknown name \"{name}\" at 'generation_config': Cannot find field."), "status": "INVALID_ARGUMENT"}}),
            json!({"error": {"code": 400, "message": format!("Invalid JSON payload received. Unknown name \"{name}\": Cannot find field."), "status": "INVALID_ARGUMENT"}}),
            json!({"object": "error", "detail": [{"type": "extra_forbidden", "loc": ["body", name], "msg": "Extra inputs are not permitted"}]}),
        ];
        for to in ["max_tokens", "max_completion_tokens", "max_output_tokens", "maxOutputTokens", "num_predict", "options.max_tokens", "messages", "temperature", "x"] {
            all.push(json!({"error": {"message": format!("Unsupported parameter: '{name}' is not supported with this model. Use '{to}' instead."), "param": name, "code": "unsupported_parameter"}}));
        }
        all.iter().map(Value::to_string).collect()
    }

    #[test]
    fn no_refusal_reaches_the_conversation_the_instructions_the_tools_or_the_output_limit_whatever_it_names() {
        let mut learned: Vec<(Format, String)> = Vec::new();
        for (format, body) in requests() {
            let before = essentials(format, &body);
            assert!(before.iter().any(|(k, v)| k == "output limit" && v.is_u64()), "{format:?} sends an output limit: {body}");
            assert!(body.to_string().contains(SYSTEM), "{format:?} sends the system prompt");
            let mut all = Vec::new();
            names(&body, "", &mut all);
            all.extend(VARIANTS.iter().map(|v| (*v).to_owned()));
            all.sort();
            all.dedup();
            for name in &all {
                for refusal in refusals(name) {
                    let Some(lesson) = unsupported(&refusal, format, &body) else { continue };
                    let mut after = body.clone();
                    lesson.apply(format, &mut after);
                    assert_eq!(essentials(format, &after), before, "{format:?}: {refusal} taught {lesson:?}");
                    assert!(after.to_string().contains(SYSTEM), "{format:?}: {refusal} taught {lesson:?}");
                    for dropped in &lesson.drop {
                        assert!(format.droppable().iter().any(|p| p == dropped || p.ends_with(&format!(".{dropped}"))), "{format:?}: {refusal} taught {lesson:?}");
                    }
                    assert_eq!(lesson.sound(), lesson, "what is learned is read back as it was written");
                    // Kept and read back by a later request, it does no more.
                    let mut again = after.clone();
                    lesson.apply(format, &mut again);
                    assert_eq!(essentials(format, &again), before);
                    learned.extend(lesson.drop.iter().map(|d| (format, d.clone())));
                    learned.extend(lesson.rename.keys().map(|r| (format, format!("rename {r}"))));
                }
            }
        }
        // Not vacuous: each format still learns to leave out the optional settings it sends.
        for (format, name) in [
            (Format::Chat, "reasoning_effort"),
            (Format::Chat, "reasoning"),
            (Format::Chat, "reasoning.effort"),
            (Format::Chat, "rename max_completion_tokens"),
            (Format::Responses, "reasoning.summary"),
            (Format::Responses, "summary"),
            (Format::Responses, "prompt_cache_key"),
            (Format::Anthropic, "thinking"),
            (Format::Gemini, "thinkingConfig"),
            (Format::Gemini, "generationConfig.thinkingConfig.includeThoughts"),
            (Format::Ollama, "think"),
        ] {
            assert!(learned.contains(&(format, name.to_owned())), "{format:?} no longer learns {name}");
        }
    }

    #[test]
    fn the_reviews_dotted_names_teach_nothing_in_any_format() {
        let names = [
            "messages.0.content", "messages.0", "messages.0.role", "input.0", "input.0.content", "contents.0.parts", "contents.0.parts.0.text",
            "tools.0.function.parameters", "tools.0.function", "tools.0", "tools.0.parameters", "tools.0.functionDeclarations", "options.num_predict", "options",
            "generationConfig.maxOutputTokens", "generationConfig", "systemInstruction.parts", "systemInstruction", "system", "system.0.text", "instructions",
            "store", "stream", "model", "stream_options.include_usage", "max_tokens", "max_completion_tokens", "max_output_tokens",
            "maxOutputTokens", "num_predict",
        ];
        for (format, body) in requests() {
            for name in names.iter().chain(VARIANTS) {
                for refusal in refusals(name) {
                    let lesson = unsupported(&refusal, format, &body);
                    assert!(lesson.is_none() || lesson.as_ref().is_some_and(|l| l.drop.is_empty()), "{format:?}: {refusal} taught {lesson:?}");
                }
            }
        }
    }

    #[test]
    fn each_providers_refusal_names_the_parameter_and_what_to_send_instead() {
        let chat = json!({"model": "o3", "messages": [], "max_tokens": 10, "temperature": 0.2});
        let openai = r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#;
        let a = unsupported(openai, Format::Chat, &chat).unwrap();
        assert_eq!(a.rename.get("max_tokens").map(String::as_str), Some("max_completion_tokens"));
        let value = r#"{"error":{"message":"Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.","param":"temperature","code":"unsupported_value"}}"#;
        assert_eq!(unsupported(value, Format::Chat, &chat).unwrap().drop, vec!["temperature"]);
        let gemini = json!({"contents": [], "generationConfig": {"maxOutputTokens": 10, "thinkingConfig": {"includeThoughts": true}}});
        let unknown = r#"{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name \"thinkingConfig\" at 'generation_config': Cannot find field.","status":"INVALID_ARGUMENT"}}"#;
        let no_thinking = unsupported(unknown, Format::Gemini, &gemini).unwrap();
        assert_eq!(no_thinking.drop, vec!["thinkingConfig"]);
        let mut body = gemini.clone();
        no_thinking.apply(Format::Gemini, &mut body);
        assert_eq!(body, json!({"contents": [], "generationConfig": {"maxOutputTokens": 10}}));
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"temperature: Extra inputs are not permitted"}}"#;
        assert_eq!(unsupported(anthropic, Format::Anthropic, &json!({"max_tokens": 5, "temperature": 1.0})).unwrap().drop, vec!["temperature"]);
        // What the request does not carry, or needs, is never "adapted" away; other 400s are not about parameters.
        assert!(unsupported(r#"{"error":{"message":"Unsupported parameter: 'top_p'","code":"unsupported_parameter"}}"#, Format::Chat, &chat).is_none());
        assert!(unsupported(r#"{"error":{"message":"Unsupported parameter: 'messages'","param":"messages","code":"unsupported_parameter"}}"#, Format::Chat, &chat).is_none());
        assert!(unsupported(r#"{"error":{"message":"Unsupported parameter: 'tools'","param":"tools","code":"unsupported_parameter"}}"#, Format::Chat, &json!({"tools": []})).is_none());
        assert!(unsupported(r#"{"type":"error","error":{"message":"system: Extra inputs are not permitted"}}"#, Format::Anthropic, &json!({"system": "be careful"})).is_none());
        assert!(unsupported(r#"{"error":{"message":"context too long"}}"#, Format::Chat, &chat).is_none());
        // A setting another format may lose is kept in this one.
        assert!(unsupported(value, Format::Gemini, &chat).is_none());
        // An unverified organisation's refusal of reasoning summaries: that one nested setting goes.
        let summary = r#"{"error":{"message":"Your organization must be verified to generate reasoning summaries.","type":"invalid_request_error","param":"reasoning.summary","code":"unsupported_value"}}"#;
        let responses = json!({"model": "gpt-5", "input": [], "reasoning": {"summary": "auto", "effort": "low"}, "store": false, "max_output_tokens": 10});
        let no_summary = unsupported(summary, Format::Responses, &responses).unwrap();
        let mut body = responses.clone();
        no_summary.apply(Format::Responses, &mut body);
        assert_eq!(body["reasoning"], json!({"effort": "low"}));
        let mut alone = json!({"reasoning": {"summary": "auto"}});
        no_summary.apply(Format::Responses, &mut alone);
        assert_eq!(alone, json!({}), "an emptied settings object goes too");
        // Mistral's 422 for a field it forbids.
        let mistral = r#"{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","reasoning_effort"],"msg":"Extra inputs are not permitted"}]},"detail":[{"type":"extra_forbidden","loc":["body","reasoning_effort"],"msg":"Extra inputs are not permitted","input":"low"}]}"#;
        assert_eq!(unsupported(mistral, Format::Chat, &json!({"reasoning_effort": "low"})).unwrap().drop, vec!["reasoning_effort"]);
        // A hostile or broken server cannot have the output limit dropped or the request stored.
        let limits = json!({"max_output_tokens": 10, "store": false, "input": []});
        assert!(unsupported(r#"{"error":{"message":"Unknown parameter: 'max_output_tokens'.","param":"max_output_tokens","code":"unknown_parameter"}}"#, Format::Responses, &limits).is_none());
        assert!(unsupported(r#"{"error":{"message":"Unknown parameter: 'store'.","param":"store","code":"unknown_parameter"}}"#, Format::Responses, &limits).is_none());
        let mut body = chat.clone();
        a.apply(Format::Chat, &mut body);
        assert_eq!(body["max_completion_tokens"], 10);
        assert!(body.get("max_tokens").is_none());
    }

    #[test]
    fn an_output_limit_is_renamed_only_to_the_other_name_its_own_format_takes() {
        let instead = |from: &str, to: &str| {
            json!({"error": {"message": format!("Unsupported parameter: '{from}' is not supported with this model. Use '{to}' instead."), "param": from, "code": "unsupported_parameter"}})
                .to_string()
        };
        let chat = json!({"messages": [{"role": "system", "content": SYSTEM}], "max_tokens": 10, "temperature": 0.2});
        assert!(unsupported(&instead("max_tokens", "max_completion_tokens"), Format::Chat, &chat).is_some_and(|a| a.rename.len() == 1 && a.drop.is_empty()));
        for to in ["messages", "max_output_tokens", "maxOutputTokens", "num_predict", "temperature", "x"] {
            assert!(unsupported(&instead("max_tokens", to), Format::Chat, &chat).is_none(), "max_tokens to {to}");
        }
        // The old client renamed a plain name one level down too: Ollama's limit moved to a name it ignores.
        let ollama = json!({"model": "m", "messages": [], "options": {"num_predict": 10}});
        assert!(unsupported(&instead("num_predict", "max_tokens"), Format::Ollama, &ollama).is_none());
        assert!(unsupported(&instead("options.num_predict", "options.max_tokens"), Format::Ollama, &ollama).is_none());
        let gemini = json!({"contents": [], "generationConfig": {"maxOutputTokens": 10}});
        assert!(unsupported(&instead("maxOutputTokens", "max_tokens"), Format::Gemini, &gemini).is_none());
        let responses = json!({"input": [], "max_output_tokens": 10});
        assert!(unsupported(&instead("max_output_tokens", "max_tokens"), Format::Responses, &responses).is_none());
        let anthropic = json!({"messages": [], "max_tokens": 10});
        assert!(unsupported(&instead("max_tokens", "max_completion_tokens"), Format::Anthropic, &anthropic).is_none());
        // "Use 'messages' instead" of an optional setting leaves the setting out and moves nothing.
        let lesson = unsupported(&instead("temperature", "messages"), Format::Chat, &chat).unwrap();
        assert_eq!((lesson.drop.as_slice(), lesson.rename.len()), (&["temperature".to_owned()][..], 0));
        // A rename no provider may teach does nothing when applied, whatever wrote it.
        let mut forced = Adaptation::default();
        for (from, to) in [("num_predict", "max_tokens"), ("messages", "x"), ("maxOutputTokens", "max_tokens"), ("max_output_tokens", "max_tokens"), ("max_tokens", "max_completion_tokens")] {
            forced.rename.insert(from.into(), to.into());
        }
        for (format, body) in [(Format::Ollama, &ollama), (Format::Gemini, &gemini), (Format::Responses, &responses), (Format::Anthropic, &anthropic)] {
            let mut after = body.clone();
            forced.apply(format, &mut after);
            assert_eq!(&after, body, "{format:?}");
        }
    }

    #[test]
    fn lessons_an_older_cowork_kept_are_ignored_when_read_and_when_applied() {
        let dir = tempfile::tempdir().unwrap();
        let old = json!({
            "older/m": {"drop": ["messages.0.content", "options.num_predict", "generationConfig.maxOutputTokens", "tools.0.function.parameters", "input.0",
                                 "systemInstruction.parts", "parts", "instructions", "stream_options", "temperature", "reasoning.summary"],
                        "rename": {"num_predict": "max_tokens", "max_tokens": "max_completion_tokens", "messages": "x"}},
            "older/bad-only": {"drop": ["messages.0.content"]}
        });
        std::fs::write(dir.path().join(FILE_NAME), old.to_string()).unwrap();
        remember_in(dir.path());
        let kept = adaptation("older", "m");
        assert_eq!(kept.drop, vec!["stream_options", "temperature", "reasoning.summary"]);
        assert_eq!(kept.rename, BTreeMap::from([("max_tokens".to_owned(), "max_completion_tokens".to_owned())]));
        assert_eq!(adaptation("older", "bad-only"), Adaptation::default());
        // And were such a lesson applied as it was written, it would still take nothing needed.
        let raw: Adaptation = serde_json::from_value(old["older/m"].clone()).unwrap();
        for (format, body) in requests() {
            let mut after = body.clone();
            raw.apply(format, &mut after);
            assert_eq!(essentials(format, &after), essentials(format, &body), "{format:?}");
            assert!(after.to_string().contains(SYSTEM));
        }
        // learn() holds a lesson to the same rules.
        learn("older", "learned", &raw);
        assert_eq!(adaptation("older", "learned").drop, vec!["stream_options", "temperature", "reasoning.summary"]);
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
