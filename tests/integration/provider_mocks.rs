//! Loopback servers that behave as each paid provider documents, refusals
//! included, so a request a real service would reject fails a test here:
//!
//! - OpenAI (`/v1/chat/completions`, `/v1/models`): reasoning models (o-series,
//!   GPT-5) refuse `max_tokens` ("Unsupported parameter: 'max_tokens' is not
//!   supported with this model. Use 'max_completion_tokens' instead.",
//!   `unsupported_parameter`) and a `temperature` or `top_p` other than 1
//!   (`unsupported_value`); unknown arguments are refused ("Unrecognized
//!   request argument supplied"); prompts of 1,024 tokens and more are cached
//!   automatically by their longest earlier prefix in 128-token steps
//!   (`prompt_tokens_details.cached_tokens`).
//! - DeepSeek (`deepseek-reasoner`): streams `reasoning_content`, and refuses a
//!   request that sends `reasoning_content` back in its messages.
//! - OpenRouter (`/api/v1/models` with prices and context; `delta.reasoning`).
//! - Anthropic (`/v1/messages`, `/v1/models` paginated): `anthropic-version`
//!   and `max_tokens` required; unknown fields refused ("x: Extra inputs are
//!   not permitted"); thinking needs 1,024 ≤ `budget_tokens` < `max_tokens`,
//!   no `temperature`, and a final assistant turn with tool use that starts
//!   with its signed thinking block; at most 4 `cache_control` blocks; cache
//!   reads and writes by breakpoint prefix (1,024-token minimum), billed apart
//!   in `cache_read_input_tokens` / `cache_creation_input_tokens`.
//! - Gemini (`:streamGenerateContent`, `/v1beta/models` paginated): unknown
//!   fields refused ('Unknown name "x" at …'); thought summaries as
//!   `"thought": true` parts when asked; Gemini 3 refuses a function call sent
//!   back without its `thoughtSignature`; implicit caching
//!   (`cachedContentTokenCount`), `thoughtsTokenCount`.
//! - Ollama (`/api/tags`, `/api/chat` with `think`).
//!
//! Pictures are checked as the services check them: base64 that decodes to a
//! picture of the type it claims (Anthropic's "Image does not match the
//! provided media type"), only in user messages on OpenAI's chat API ("Image
//! URLs are only allowed for messages with role 'user'").
//!
//! Tokens are counted as characters / 4, the same for every request, so
//! before-and-after figures compare like with like.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flavour {
    OpenAi,
    DeepSeek,
    OpenRouter,
    Anthropic,
    Gemini,
    Ollama,
}

/// What the model says next: text, or a call to a tool.
#[derive(Clone, Debug)]
pub(super) enum Say {
    Text(String),
    Call { name: String, arguments: Value },
}

/// One request as the mock saw it.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) headers: BTreeMap<String, String>,
    pub(super) body: Value,
    pub(super) status: u16,
    /// (input, cached read, cache write, output) as reported.
    pub(super) usage: (u64, u64, u64, u64),
}

#[derive(Default)]
struct State {
    /// An OpenAI organisation that is not verified: reasoning summaries are refused.
    unverified: bool,
    script: VecDeque<Say>,
    seen: Vec<Seen>,
    /// Prompt prefixes cached so far (OpenAI, Gemini: whole earlier prompts; Anthropic: breakpoint prefixes).
    prefixes: Vec<String>,
    anthropic_cache: HashSet<String>,
    signatures: HashSet<String>,
    issued: u64,
}

pub(super) struct Mock {
    pub(super) port: u16,
    pub(super) flavour: Flavour,
    state: Arc<Mutex<State>>,
}

impl Mock {
    pub(super) fn url(&self) -> String {
        match self.flavour {
            Flavour::OpenAi | Flavour::DeepSeek => format!("http://127.0.0.1:{}/v1", self.port),
            Flavour::OpenRouter => format!("http://127.0.0.1:{}/api/v1", self.port),
            Flavour::Anthropic | Flavour::Gemini | Flavour::Ollama => format!("http://127.0.0.1:{}", self.port),
        }
    }

    /// What the model says to the next requests, in order (then "OK").
    pub(super) fn script(&self, says: Vec<Say>) {
        self.state.lock().script.extend(says);
    }

    /// Answers as OpenAI does an organisation that is not verified (no reasoning summaries).
    pub(super) fn unverified(&self) {
        self.state.lock().unverified = true;
    }

    pub(super) fn seen(&self) -> Vec<Seen> {
        self.state.lock().seen.clone()
    }

    /// The chat requests (not model lists), in order.
    pub(super) fn chats(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.method == "POST").collect()
    }
}

pub(super) fn mock(flavour: Flavour) -> Mock {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = Arc::new(Mutex::new(State::default()));
    let shared = state.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let state = shared.clone();
            std::thread::spawn(move || serve(stream, flavour, &state));
        }
    });
    Mock { port, flavour, state }
}

fn serve(mut stream: std::net::TcpStream, flavour: Flavour, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or_default().to_owned(), parts.next().unwrap_or_default().to_owned());
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_lowercase(), value.trim().to_owned());
        }
    }
    let length: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; length];
    let _ = reader.read_exact(&mut body);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (path, query) = target.split_once('?').map_or((target.clone(), String::new()), |(p, q)| (p.to_owned(), q.to_owned()));
    let (status, content_type, payload, _) = {
        let mut state = state.lock();
        let answer = respond(flavour, &method, &path, &query, &headers, &body, &mut state);
        state.seen.push(Seen { method: method.clone(), path: path.clone(), headers: headers.clone(), body: body.clone(), status: answer.0, usage: answer.3 });
        answer
    };
    let reason = if status == 200 { "OK" } else { "Error" };
    let head = format!("HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", payload.len());
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(payload.as_bytes());
    let _ = stream.flush();
}

type Answer = (u16, &'static str, String, (u64, u64, u64, u64));

fn json_answer(status: u16, value: Value) -> Answer {
    (status, "application/json", value.to_string(), (0, 0, 0, 0))
}

fn openai_error(message: &str, param: Option<&str>, code: &str) -> Answer {
    json_answer(400, json!({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}))
}

fn tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// The longest earlier prompt this one starts with (character count).
fn cached_prefix(prefixes: &[String], prompt: &str) -> usize {
    prefixes
        .iter()
        .map(|earlier| earlier.bytes().zip(prompt.bytes()).take_while(|(a, b)| a == b).count())
        .max()
        .unwrap_or(0)
}

fn next_say(state: &mut State) -> Say {
    state.script.pop_front().unwrap_or_else(|| Say::Text("OK".into()))
}

fn is_reasoning(model: &str) -> bool {
    let model = model.rsplit('/').next().unwrap_or(model);
    (model.starts_with('o') && model[1..].starts_with(|c: char| c.is_ascii_digit())) || model.starts_with("gpt-5") || model.contains("reasoner")
}

fn respond(flavour: Flavour, method: &str, path: &str, query: &str, headers: &BTreeMap<String, String>, body: &Value, state: &mut State) -> Answer {
    match (flavour, method) {
        // LM Studio's own list (what is loaded, each model's context), beside its OpenAI-compatible one.
        (Flavour::OpenAi, "GET") if path == "/api/v0/models" => json_answer(
            200,
            json!({"object": "list", "data": [
                {"id": "qwen2.5-7b-instruct", "object": "model", "type": "llm", "publisher": "lmstudio-community", "arch": "qwen2", "quantization": "Q4_K_M", "state": "loaded", "max_context_length": 32768},
                {"id": "text-embedding-nomic-embed-text-v1.5", "object": "model", "type": "embeddings", "state": "not-loaded", "max_context_length": 2048},
                {"id": "llama-3.2-3b-instruct", "object": "model", "type": "llm", "state": "not-loaded", "max_context_length": 131072}
            ]}),
        ),
        (Flavour::OpenAi | Flavour::DeepSeek | Flavour::OpenRouter, "GET") => openai_models(flavour),
        (Flavour::OpenAi, _) if path.ends_with("/responses") => openai_responses(body, state),
        (Flavour::OpenAi | Flavour::DeepSeek | Flavour::OpenRouter, _) => openai_chat(flavour, body, state),
        (Flavour::Anthropic, "GET") => anthropic_models(headers, query),
        (Flavour::Anthropic, _) => anthropic_messages(headers, body, state),
        (Flavour::Gemini, "GET") => gemini_models(query),
        (Flavour::Gemini, _) => gemini_generate(path, headers, body, state),
        (Flavour::Ollama, "GET") => json_answer(
            200,
            json!({"models": [
                {"name": "qwen3:8b", "model": "qwen3:8b", "details": {"parameter_size": "8.2B", "quantization_level": "Q4_K_M"}},
                {"name": "llama3.2:latest", "model": "llama3.2:latest", "details": {"parameter_size": "3.2B", "quantization_level": "Q4_K_M"}}
            ]}),
        ),
        (Flavour::Ollama, _) => ollama_chat(body, state),
    }
}

fn openai_models(flavour: Flavour) -> Answer {
    match flavour {
        Flavour::OpenRouter => json_answer(
            200,
            json!({"data": [
                {"id": "anthropic/claude-sonnet-4.5", "name": "Anthropic: Claude Sonnet 4.5", "context_length": 1000000,
                 "pricing": {"prompt": "0.000003", "completion": "0.000015"}, "supported_parameters": ["tools", "reasoning"]},
                {"id": "meta-llama/llama-3.3-70b-instruct:free", "name": "Meta: Llama 3.3 70B (free)", "context_length": 131072,
                 "pricing": {"prompt": "0", "completion": "0"}, "supported_parameters": ["tools"]}
            ]}),
        ),
        _ => json_answer(
            200,
            json!({"object": "list", "data": [
                {"id": "gpt-5", "object": "model", "owned_by": "system"},
                {"id": "gpt-5-mini", "object": "model", "owned_by": "system"},
                {"id": "o3-mini", "object": "model", "owned_by": "system"},
                {"id": "gpt-4o-mini", "object": "model", "owned_by": "system"},
                {"id": "deepseek-reasoner", "object": "model", "owned_by": "deepseek"},
                {"id": "text-embedding-3-small", "object": "model", "owned_by": "system"},
                {"id": "whisper-1", "object": "model", "owned_by": "system"}
            ]}),
        ),
    }
}

const OPENAI_PARAMS: &[&str] = &[
    "model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens", "tools", "tool_choice", "temperature", "top_p",
    "reasoning_effort", "prompt_cache_key", "parallel_tool_calls", "user", "seed", "stop", "response_format",
];

/// What a service says of a picture that is not what it claims, or None.
fn picture_error(mime: &str, data: &str) -> Option<String> {
    use base64::Engine as _;
    if !["image/jpeg", "image/png", "image/gif", "image/webp"].contains(&mime) {
        return Some(format!("media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp' (got {mime})"));
    }
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data) else { return Some("invalid base64 data".into()) };
    match cowork::media::Image::sniffed(bytes) {
        Some(image) if image.mime == mime => None,
        _ => Some(format!("Image does not match the provided media type {mime}")),
    }
}

/// The first refused picture of an OpenAI chat request: a data URL's, or one in a message that is not the user's.
fn openai_picture_error(body: &Value) -> Option<String> {
    for message in body["messages"].as_array().into_iter().flatten() {
        for part in message["content"].as_array().into_iter().flatten().filter(|p| p["type"] == "image_url") {
            let role = message["role"].as_str().unwrap_or_default();
            if role != "user" {
                return Some(format!("Image URLs are only allowed for messages with role 'user', but this message with role '{role}' contains an image URL."));
            }
            let url = part["image_url"]["url"].as_str().unwrap_or_default();
            let Some((mime, data)) = url.strip_prefix("data:").and_then(|rest| rest.split_once(";base64,")) else { return Some("Invalid image URL".into()) };
            if let Some(error) = picture_error(mime, data) {
                return Some(error);
            }
        }
    }
    None
}

fn openai_chat(flavour: Flavour, body: &Value, state: &mut State) -> Answer {
    if let Some(error) = openai_picture_error(body) {
        return openai_error(&error, Some("messages"), "invalid_image");
    }
    let model = body["model"].as_str().unwrap_or_default().to_owned();
    let object = body.as_object().cloned().unwrap_or_default();
    let allowed: &[&str] = if flavour == Flavour::OpenRouter { &["reasoning", "provider", "transforms"] } else { &[] };
    if let Some(unknown) = object.keys().find(|k| !OPENAI_PARAMS.contains(&k.as_str()) && !allowed.contains(&k.as_str())) {
        return openai_error(&format!("Unrecognized request argument supplied: {unknown}"), None, "unknown_parameter");
    }
    if flavour == Flavour::OpenAi && is_reasoning(&model) {
        if object.contains_key("max_tokens") {
            return openai_error(
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
                Some("max_tokens"),
                "unsupported_parameter",
            );
        }
        for sampling in ["temperature", "top_p"] {
            if let Some(value) = object.get(sampling).and_then(Value::as_f64)
                && value != 1.0
            {
                return openai_error(
                    &format!("Unsupported value: '{sampling}' does not support {value} with this model. Only the default (1) value is supported."),
                    Some(sampling),
                    "unsupported_value",
                );
            }
        }
    }
    if let Some(effort) = object.get("reasoning_effort") {
        if !is_reasoning(&model) {
            return openai_error("Unsupported parameter: 'reasoning_effort' is not supported with this model.", Some("reasoning_effort"), "unsupported_parameter");
        }
        if !["minimal", "low", "medium", "high", "none"].contains(&effort.as_str().unwrap_or_default()) {
            return openai_error(&format!("Invalid value: {effort}. Supported values are: 'minimal', 'low', 'medium', 'high'."), Some("reasoning_effort"), "invalid_value");
        }
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if flavour == Flavour::DeepSeek && messages.iter().any(|m| m.get("reasoning_content").is_some()) {
        return json_answer(400, json!({"error": {"message": "The reasoning_content is an intermediate result for display purposes only and will not be included in the context for inference. Please remove the reasoning_content from your input messages.", "type": "invalid_request_error"}}));
    }
    // The prompt as the cache sees it: tools, then messages, in order.
    let prompt = format!("{}{}", body["tools"], body["messages"]);
    let input = tokens(&prompt);
    let cached = if input >= 1024 { (tokens(&prompt[..cached_prefix(&state.prefixes, &prompt)]) / 128) * 128 } else { 0 };
    let cached = if cached >= 1024 { cached } else { 0 };
    state.prefixes.push(prompt);
    let say = next_say(state);
    let mut events = Vec::new();
    let reasoning_text = "First I look at what was asked. ";
    match flavour {
        Flavour::DeepSeek if is_reasoning(&model) => events.push(json!({"choices": [{"index": 0, "delta": {"reasoning_content": reasoning_text}}]})),
        Flavour::OpenRouter if body.get("reasoning").is_some() => events.push(json!({"choices": [{"index": 0, "delta": {"reasoning": reasoning_text}}]})),
        _ => {}
    }
    let output = match &say {
        Say::Text(text) => {
            for piece in text.split_inclusive(' ') {
                events.push(json!({"choices": [{"index": 0, "delta": {"content": piece}}]}));
            }
            events.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
            tokens(text)
        }
        Say::Call { name, arguments } => {
            state.issued += 1;
            let id = format!("call_{}", state.issued);
            events.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]}}]}));
            events.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
            tokens(&arguments.to_string()) + 5
        }
    };
    let reasoning_tokens = if is_reasoning(&model) { 64 } else { 0 };
    let usage = match flavour {
        Flavour::DeepSeek => json!({"prompt_tokens": input, "completion_tokens": output + reasoning_tokens, "prompt_cache_hit_tokens": cached, "prompt_cache_miss_tokens": input - cached}),
        _ => json!({"prompt_tokens": input, "completion_tokens": output + reasoning_tokens, "prompt_tokens_details": {"cached_tokens": cached},
                   "completion_tokens_details": {"reasoning_tokens": reasoning_tokens}}),
    };
    events.push(json!({"choices": [], "usage": usage}));
    let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    (200, "text/event-stream", text, (input, cached, 0, output + reasoning_tokens))
}

const RESPONSES_PARAMS: &[&str] = &[
    "model", "input", "instructions", "stream", "store", "max_output_tokens", "reasoning", "tools", "tool_choice", "prompt_cache_key", "include",
    "parallel_tool_calls", "text", "temperature", "top_p", "previous_response_id", "metadata", "user",
];

/// OpenAI's Responses API as it documents itself: unknown parameters refused
/// ("Unknown parameter"), sampling refused for reasoning models, every
/// `function_call_output` answering a `function_call` of the same input,
/// reasoning summaries streamed when asked for, cached input by prefix.
fn openai_responses(body: &Value, state: &mut State) -> Answer {
    let model = body["model"].as_str().unwrap_or_default().to_owned();
    let object = body.as_object().cloned().unwrap_or_default();
    if let Some(unknown) = object.keys().find(|k| !RESPONSES_PARAMS.contains(&k.as_str())) {
        return json_answer(400, json!({"error": {"message": format!("Unknown parameter: '{unknown}'."), "type": "invalid_request_error", "param": unknown, "code": "unknown_parameter"}}));
    }
    if is_reasoning(&model) {
        for sampling in ["temperature", "top_p"] {
            if object.get(sampling).and_then(Value::as_f64).is_some_and(|v| v != 1.0) {
                return openai_error(&format!("Unsupported parameter: '{sampling}' is not supported with this model."), Some(sampling), "unsupported_parameter");
            }
        }
    }
    for (at, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if tool["type"] != "function" || tool.get("name").is_none() {
            return openai_error(&format!("Missing required parameter: 'tools[{at}].name'."), Some(&format!("tools[{at}].name")), "missing_required_parameter");
        }
        // `strict` left out is strict: a schema must then close every object and require every property.
        if tool["strict"] != false && tool["parameters"]["additionalProperties"] != false {
            return openai_error(
                &format!("Invalid schema for function '{}': In context=(), 'additionalProperties' is required to be supplied and to be false.", tool["name"].as_str().unwrap_or_default()),
                Some(&format!("tools[{at}].parameters")),
                "invalid_function_parameters",
            );
        }
    }
    if state.unverified && body.pointer("/reasoning/summary").is_some() {
        return openai_error(
            "Your organization must be verified to generate reasoning summaries. Please go to: https://platform.openai.com/settings/organization/general and click on Verify Organization.",
            Some("reasoning.summary"),
            "unsupported_value",
        );
    }
    let input = body["input"].as_array().cloned().unwrap_or_default();
    let mut calls = HashSet::new();
    for item in &input {
        match item["type"].as_str() {
            Some("function_call") => {
                calls.insert(item["call_id"].as_str().unwrap_or_default().to_owned());
            }
            Some("function_call_output") => {
                let id = item["call_id"].as_str().unwrap_or_default();
                if !calls.contains(id) {
                    return openai_error(&format!("No tool call found for function call output with call_id {id}."), Some("input"), "invalid_value");
                }
            }
            _ => {}
        }
    }
    let prompt = format!("{}{}{}", body["tools"], body["instructions"], body["input"]);
    let input_tokens = tokens(&prompt);
    let cached = if input_tokens >= 1024 { (tokens(&prompt[..cached_prefix(&state.prefixes, &prompt)]) / 128) * 128 } else { 0 };
    let cached = if cached >= 1024 { cached } else { 0 };
    state.prefixes.push(prompt);
    let say = next_say(state);
    let mut events: Vec<(&str, Value)> = vec![("response.created", json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}))];
    let mut output_index = 0;
    let summary = body.pointer("/reasoning/summary").is_some() && is_reasoning(&model);
    if is_reasoning(&model) {
        events.push(("response.output_item.added", json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}})));
        if summary {
            events.push(("response.reasoning_summary_part.added", json!({"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": ""}})));
            for piece in ["**Reading the request**\n\n", "The user wants a short answer."] {
                events.push(("response.reasoning_summary_text.delta", json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": piece})));
            }
        }
        events.push(("response.output_item.done", json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1"}})));
        output_index = 1;
    }
    let (output_item, output) = match &say {
        Say::Text(text) => {
            events.push(("response.output_item.added", json!({"type": "response.output_item.added", "output_index": output_index, "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}})));
            for piece in text.split_inclusive(' ') {
                events.push(("response.output_text.delta", json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": output_index, "content_index": 0, "delta": piece})));
            }
            (json!({"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": text}]}), tokens(text))
        }
        Say::Call { name, arguments } => {
            state.issued += 1;
            let call_id = format!("call_{}", state.issued);
            events.push(("response.output_item.added", json!({"type": "response.output_item.added", "output_index": output_index, "item": {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": name, "arguments": ""}})));
            events.push(("response.function_call_arguments.delta", json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": output_index, "delta": arguments.to_string()})));
            (json!({"type": "function_call", "id": "fc_1", "call_id": call_id, "name": name, "arguments": arguments.to_string()}), tokens(&arguments.to_string()) + 5)
        }
    };
    let reasoning_tokens = if is_reasoning(&model) { 64 } else { 0 };
    let usage = json!({"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": output + reasoning_tokens, "output_tokens_details": {"reasoning_tokens": reasoning_tokens}, "total_tokens": input_tokens + output + reasoning_tokens});
    events.push(("response.completed", json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": [output_item], "usage": usage}})));
    let text: String = events.iter().map(|(event, data)| format!("event: {event}\ndata: {data}\n\n")).collect();
    (200, "text/event-stream", text, (input_tokens, cached, 0, output + reasoning_tokens))
}

fn anthropic_error(message: &str) -> Answer {
    json_answer(400, json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}))
}

fn anthropic_models(headers: &BTreeMap<String, String>, query: &str) -> Answer {
    if !headers.contains_key("anthropic-version") {
        return anthropic_error("anthropic-version: header is required");
    }
    let page_two = query.contains("after_id=claude-sonnet-4-5");
    if page_two {
        json_answer(200, json!({"data": [{"type": "model", "id": "claude-haiku-4-5", "display_name": "Claude Haiku 4.5"}], "has_more": false, "first_id": "claude-haiku-4-5", "last_id": "claude-haiku-4-5"}))
    } else {
        json_answer(
            200,
            json!({"data": [{"type": "model", "id": "claude-opus-4-5", "display_name": "Claude Opus 4.5"}, {"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5"}],
                   "has_more": true, "first_id": "claude-opus-4-5", "last_id": "claude-sonnet-4-5"}),
        )
    }
}

const ANTHROPIC_FIELDS: &[&str] = &[
    "model", "messages", "max_tokens", "system", "tools", "tool_choice", "stream", "temperature", "top_p", "top_k", "stop_sequences", "thinking", "metadata",
];

fn anthropic_messages(headers: &BTreeMap<String, String>, body: &Value, state: &mut State) -> Answer {
    if !headers.contains_key("anthropic-version") {
        return anthropic_error("anthropic-version: header is required");
    }
    let object = body.as_object().cloned().unwrap_or_default();
    if let Some(unknown) = object.keys().find(|k| !ANTHROPIC_FIELDS.contains(&k.as_str())) {
        return anthropic_error(&format!("{unknown}: Extra inputs are not permitted"));
    }
    let Some(max_tokens) = body["max_tokens"].as_u64() else { return anthropic_error("max_tokens: Field required") };
    let thinking = body.get("thinking").filter(|t| t["type"] == "enabled");
    if let Some(thinking) = thinking {
        let budget = thinking["budget_tokens"].as_u64().unwrap_or(0);
        if budget < 1024 {
            return anthropic_error("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024");
        }
        if budget >= max_tokens {
            return anthropic_error("`max_tokens` must be greater than `thinking.budget_tokens`.");
        }
        if object.contains_key("temperature") {
            return anthropic_error("`temperature` may only be set to 1 when thinking is enabled.");
        }
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    // Pictures: in user content, or in a tool_result's content.
    for (at, message) in messages.iter().enumerate() {
        for block in message["content"].as_array().into_iter().flatten() {
            let nested: Vec<&Value> = block["content"].as_array().map(|c| c.iter().collect()).unwrap_or_default();
            for image in std::iter::once(block).chain(nested).filter(|b| b["type"] == "image") {
                if message["role"] != "user" {
                    return anthropic_error(&format!("messages.{at}: images are only allowed in user messages"));
                }
                let source = &image["source"];
                if source["type"] != "base64" {
                    return anthropic_error(&format!("messages.{at}.content: image source type must be base64 here"));
                }
                if let Some(error) = picture_error(source["media_type"].as_str().unwrap_or_default(), source["data"].as_str().unwrap_or_default()) {
                    return anthropic_error(&format!("messages.{at}.content.image.source.base64: {error}"));
                }
            }
        }
    }
    // With thinking on, the last assistant turn that used a tool must start with its signed thinking block.
    if thinking.is_some()
        && let Some((at, last)) = messages.iter().enumerate().rev().find(|(_, m)| m["role"] == "assistant")
        && last["content"].as_array().is_some_and(|c| c.iter().any(|b| b["type"] == "tool_use"))
    {
        let first = &last["content"][0];
        let signed = first["type"] == "thinking" && first["signature"].as_str().is_some_and(|s| state.signatures.contains(s));
        if first["type"] != "thinking" && first["type"] != "redacted_thinking" {
            return anthropic_error(&format!(
                "messages.{at}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks).",
                first["type"].as_str().unwrap_or("text")
            ));
        }
        if !signed {
            return anthropic_error(&format!("messages.{at}.content.0: Invalid `signature` in `thinking` block"));
        }
    }
    // Cache breakpoints, in the order the prompt is read: tools, system, messages.
    let mut prefix = String::new();
    let mut breakpoints: Vec<String> = Vec::new();
    let mut marks = 0;
    let mut walk = |value: &Value, prefix: &mut String, breakpoints: &mut Vec<String>| {
        let blocks: Vec<Value> = match value {
            Value::Array(items) => items.clone(),
            Value::Null => Vec::new(),
            other => vec![other.clone()],
        };
        for block in blocks {
            let mut plain = block.clone();
            if let Some(map) = plain.as_object_mut() {
                map.remove("cache_control");
            }
            prefix.push_str(&plain.to_string());
            if block.get("cache_control").is_some() {
                marks += 1;
                breakpoints.push(prefix.clone());
            }
        }
    };
    walk(&body["tools"], &mut prefix, &mut breakpoints);
    walk(&body["system"], &mut prefix, &mut breakpoints);
    for message in &messages {
        prefix.push_str(message["role"].as_str().unwrap_or_default());
        walk(&message["content"], &mut prefix, &mut breakpoints);
    }
    if marks > 4 {
        return anthropic_error(&format!("A maximum of 4 blocks with cache_control may be provided. Found {marks}."));
    }
    let input = tokens(&prefix);
    const MINIMUM: u64 = 1024;
    let read = breakpoints.iter().filter(|b| state.anthropic_cache.contains(*b)).map(|b| tokens(b)).max().unwrap_or(0);
    let write = breakpoints.last().map(|b| tokens(b)).filter(|t| *t >= MINIMUM && *t > read).map_or(0, |t| t - read);
    for breakpoint in &breakpoints {
        if tokens(breakpoint) >= MINIMUM {
            state.anthropic_cache.insert(breakpoint.clone());
        }
    }
    let say = next_say(state);
    let mut events: Vec<(&str, Value)> = Vec::new();
    events.push((
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": body["model"],
               "usage": {"input_tokens": input - read - write, "cache_read_input_tokens": read, "cache_creation_input_tokens": write, "output_tokens": 1}}}),
    ));
    let mut index = 0;
    let mut output = 0;
    if thinking.is_some() {
        state.issued += 1;
        let signature = format!("sig-{}-{}", state.issued, "E".repeat(24));
        state.signatures.insert(signature.clone());
        events.push(("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})));
        events.push(("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "The user wants "}})));
        events.push(("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "a short answer."}})));
        events.push(("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": signature}})));
        events.push(("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
        index = 1;
        output += 40;
    }
    let stop = match &say {
        Say::Text(text) => {
            events.push(("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
            events.push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}})));
            output += tokens(text);
            "end_turn"
        }
        Say::Call { name, arguments } => {
            state.issued += 1;
            let id = format!("toolu_{}", state.issued);
            events.push(("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})));
            events.push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": arguments.to_string()}})));
            output += tokens(&arguments.to_string());
            "tool_use"
        }
    };
    events.push(("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    events.push(("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": output}})));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let text: String = events.iter().map(|(event, data)| format!("event: {event}\ndata: {data}\n\n")).collect();
    (200, "text/event-stream", text, (input, read, write, output))
}

fn gemini_models(query: &str) -> Answer {
    if query.contains("pageToken=next") {
        return json_answer(
            200,
            json!({"models": [{"name": "models/text-embedding-004", "displayName": "Text Embedding 004", "inputTokenLimit": 2048, "supportedGenerationMethods": ["embedContent"]}]}),
        );
    }
    json_answer(
        200,
        json!({"models": [
            {"name": "models/gemini-2.5-flash", "displayName": "Gemini 2.5 Flash", "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
             "supportedGenerationMethods": ["generateContent", "countTokens", "createCachedContent"], "thinking": true},
            {"name": "models/gemini-3-pro-preview", "displayName": "Gemini 3 Pro Preview", "inputTokenLimit": 1048576,
             "supportedGenerationMethods": ["generateContent", "countTokens"], "thinking": true}
        ], "nextPageToken": "next"}),
    )
}

const GEMINI_FIELDS: &[&str] = &["contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings", "cachedContent"];
const GEMINI_GENERATION: &[&str] = &["maxOutputTokens", "temperature", "topP", "topK", "stopSequences", "thinkingConfig", "candidateCount", "responseMimeType"];
const GEMINI_THINKING: &[&str] = &["includeThoughts", "thinkingBudget", "thinkingLevel"];

fn gemini_error(message: &str) -> Answer {
    json_answer(400, json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}))
}

fn gemini_generate(path: &str, headers: &BTreeMap<String, String>, body: &Value, state: &mut State) -> Answer {
    if !headers.contains_key("x-goog-api-key") {
        return json_answer(403, json!({"error": {"code": 403, "message": "Method doesn't allow unregistered callers", "status": "PERMISSION_DENIED"}}));
    }
    let model = path.trim_start_matches("/v1beta/models/").split(':').next().unwrap_or_default().to_owned();
    let object = body.as_object().cloned().unwrap_or_default();
    if let Some(unknown) = object.keys().find(|k| !GEMINI_FIELDS.contains(&k.as_str())) {
        return gemini_error(&format!("Invalid JSON payload received. Unknown name \"{unknown}\": Cannot find field."));
    }
    let generation = body["generationConfig"].as_object().cloned().unwrap_or_default();
    if let Some(unknown) = generation.keys().find(|k| !GEMINI_GENERATION.contains(&k.as_str())) {
        return gemini_error(&format!("Invalid JSON payload received. Unknown name \"{unknown}\" at 'generation_config': Cannot find field."));
    }
    let thinking = body.pointer("/generationConfig/thinkingConfig").and_then(Value::as_object).cloned().unwrap_or_default();
    if let Some(unknown) = thinking.keys().find(|k| !GEMINI_THINKING.contains(&k.as_str())) {
        return gemini_error(&format!("Invalid JSON payload received. Unknown name \"{unknown}\" at 'generation_config.thinking_config': Cannot find field."));
    }
    // Levels are Gemini 3's; 2.5 takes budgets, and 2.5 Pro cannot stop thinking.
    if !model.starts_with("gemini-3") && thinking.contains_key("thinkingLevel") {
        return gemini_error("thinking_level is not supported by this model. Please use thinking_budget instead.");
    }
    if model.contains("-pro") && thinking.get("thinkingBudget").and_then(Value::as_i64).is_some_and(|b| (0..128).contains(&b)) {
        return gemini_error("Budget 0 is invalid. This model only works in thinking mode.");
    }
    let contents = body["contents"].as_array().cloned().unwrap_or_default();
    for part in contents.iter().flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default()) {
        if let Some(inline) = part.get("inlineData")
            && let Some(error) = picture_error(inline["mimeType"].as_str().unwrap_or_default(), inline["data"].as_str().unwrap_or_default())
        {
            return gemini_error(&format!("Unable to process input image: {error}"));
        }
    }
    // Gemini 3: every function call sent back carries the thought signature it came with.
    if model.starts_with("gemini-3") {
        for (at, content) in contents.iter().enumerate().filter(|(_, c)| c["role"] == "model") {
            for part in content["parts"].as_array().into_iter().flatten().filter(|p| p.get("functionCall").is_some()) {
                let signed = part["thoughtSignature"].as_str().is_some_and(|s| state.signatures.contains(s));
                if !signed {
                    return gemini_error(&format!("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", part["functionCall"]["name"].as_str().unwrap_or_default(), at + 1));
                }
            }
        }
    }
    let prompt = format!("{}{}{}", body["systemInstruction"], body["tools"], body["contents"]);
    let input = tokens(&prompt);
    let cached = if input >= 1024 { tokens(&prompt[..cached_prefix(&state.prefixes, &prompt)]) } else { 0 };
    let cached = if cached >= 1024 { cached } else { 0 };
    state.prefixes.push(prompt);
    let say = next_say(state);
    let mut events = Vec::new();
    let thoughts = if thinking.get("includeThoughts") == Some(&Value::Bool(true)) { 48 } else { 0 };
    if thoughts > 0 {
        events.push(json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "**Weighing the question**\nA short answer will do.", "thought": true}]}}]}));
    }
    let output = match &say {
        Say::Text(text) => {
            events.push(json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]}));
            tokens(text)
        }
        Say::Call { name, arguments } => {
            state.issued += 1;
            let signature = format!("c2lnLTE{}", state.issued);
            state.signatures.insert(signature.clone());
            events.push(json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": name, "args": arguments}, "thoughtSignature": signature}]}, "finishReason": "STOP"}]}));
            tokens(&arguments.to_string())
        }
    };
    let usage = json!({"promptTokenCount": input, "candidatesTokenCount": output, "thoughtsTokenCount": thoughts, "cachedContentTokenCount": cached, "totalTokenCount": input + output + thoughts});
    if let Some(last) = events.last_mut() {
        last["usageMetadata"] = usage;
    }
    let text: String = events.iter().map(|e| format!("data: {e}\r\n\r\n")).collect();
    (200, "text/event-stream", text, (input, cached, 0, output + thoughts))
}

fn ollama_chat(body: &Value, state: &mut State) -> Answer {
    let say = next_say(state);
    let mut lines = Vec::new();
    if body["think"] == Value::Bool(true) {
        lines.push(json!({"model": body["model"], "message": {"role": "assistant", "content": "", "thinking": "Let me think. "}, "done": false}));
    }
    match say {
        Say::Text(text) => lines.push(json!({"model": body["model"], "message": {"role": "assistant", "content": text}, "done": false})),
        Say::Call { name, arguments } => {
            lines.push(json!({"model": body["model"], "message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": name, "arguments": arguments}}]}, "done": false}))
        }
    }
    lines.push(json!({"model": body["model"], "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", "prompt_eval_count": 10, "eval_count": 5}));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    (200, "application/x-ndjson", text, (10, 0, 0, 5))
}
