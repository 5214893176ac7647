//! Issue 53, the second adversarial review (`../shared/research/agent-security-2.md`):
//! T8, a provider (or anything on its path) answering one 400 that names a dotted or
//! otherwise dangerous parameter must not teach cowork to leave out the system prompt,
//! the conversation, the tools or the output limit, neither in the retry nor in any later
//! process; and the review's smaller observation that `cowork audit | head -1` panicked
//! on the closed pipe. The real binary, against a loopback server that speaks each
//! request format (chat completions, the Responses API, Anthropic, Gemini, Ollama) and
//! refuses the first request it gets in the shape of that provider's errors.

use std::io::Write;
use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt;
use std::process::{Output, Stdio};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::security::{Lab, Step, calls, text};

/// The system prompt of `cowork ask --provider`.
const SYSTEM: &str = "You are cowork, a concise desktop assistant.";
const ADAPTATIONS: &str = "model-adaptations.json";

/// The request formats, each as providers.json configures it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Api {
    Chat,
    Responses,
    Anthropic,
    Gemini,
    Ollama,
}

impl Api {
    /// The provider's name and its providers.json entry, pointing at `port`. Each asks for
    /// reasoning, so every format also carries an optional setting a provider may refuse.
    fn provider(self, port: u16) -> (&'static str, Value) {
        let base = format!("http://127.0.0.1:{port}");
        let (name, kind, base_url, model) = match self {
            // A reasoning model at a gateway: chat completions with max_completion_tokens and reasoning_effort.
            Api::Chat => ("scripted", "openai", format!("{base}/v1"), "o3-mini"),
            // "openai" and a reasoning model: the Responses API.
            Api::Responses => ("openai", "openai", format!("{base}/v1"), "o3-mini"),
            Api::Anthropic => ("anthropic", "anthropic", base, "claude-sonnet-4-5"),
            Api::Gemini => ("gemini", "gemini", base, "gemini-2.5-flash"),
            Api::Ollama => ("scripted", "ollama", base, "scripted"),
        };
        (name, json!({"name": name, "kind": kind, "base_url": base_url, "model": model, "reasoning_effort": "low"}))
    }

    /// What no lesson may change in a request: the conversation, the instructions, the
    /// tools, the model, the stream, `store`, the usage report and the output limit's value.
    fn essentials(self, body: &Value) -> Vec<(String, Value)> {
        let keys = ["model", "messages", "input", "contents", "system", "systemInstruction", "instructions", "tools", "stream", "store"];
        let mut kept: Vec<(String, Value)> = keys.iter().map(|k| ((*k).to_owned(), body.get(*k).cloned().unwrap_or(Value::Null))).collect();
        kept.push(("output limit".into(), self.limit(body)));
        kept
    }

    fn limit(self, body: &Value) -> Value {
        let limit = match self {
            Api::Chat => body.get("max_completion_tokens").or_else(|| body.get("max_tokens")),
            Api::Responses => body.get("max_output_tokens"),
            Api::Anthropic => body.get("max_tokens"),
            Api::Gemini => body.pointer("/generationConfig/maxOutputTokens"),
            Api::Ollama => body.pointer("/options/num_predict"),
        };
        limit.cloned().unwrap_or(Value::Null)
    }
}

/// A loopback provider that refuses the next request with the refusal it was given
/// (once), answers "ok" in the format its path names, and keeps every request body.
struct Teacher {
    port: u16,
    state: Arc<Mutex<Taught>>,
}

#[derive(Default)]
struct Taught {
    refusal: Option<(u16, String)>,
    seen: Vec<Value>,
}

impl Teacher {
    fn start() -> Teacher {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(Taught::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let state = shared.clone();
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        Teacher { port, state }
    }

    /// Forgets the requests seen, and refuses the next one with `status` and `body`.
    fn refuse_next(&self, (status, body): &(u16, Value)) {
        let mut state = self.state.lock();
        state.seen.clear();
        state.refusal = Some((*status, body.to_string()));
    }

    fn seen(&self) -> Vec<Value> {
        self.state.lock().seen.clone()
    }
}

fn serve(mut stream: std::net::TcpStream, state: &Mutex<Taught>) {
    let request = super::support::read_request(&stream);
    let request_line = request.line().to_owned();
    let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let respond = |stream: &mut std::net::TcpStream, status: u16, content_type: &str, body: &str| {
        let length = if content_type == "application/json" { format!("content-length: {}\r\n", body.len()) } else { String::new() };
        let _ = write!(stream, "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\n{length}connection: close\r\n\r\n{body}");
        let _ = stream.flush();
    };
    if request_line.starts_with("GET") {
        respond(&mut stream, 200, "application/json", r#"{"data":[{"id":"scripted"}],"models":[{"name":"scripted"}]}"#);
        return;
    }
    let request: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let refusal = {
        let mut state = state.lock();
        state.seen.push(request);
        state.refusal.take()
    };
    if let Some((status, body)) = refusal {
        respond(&mut stream, status, "application/json", &body);
        return;
    }
    let sse = |events: &[Value]| events.iter().map(|e| format!("data: {e}\n\n")).collect::<String>();
    let (content_type, answer) = if path.ends_with("/chat/completions") {
        let events = [
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": null}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 2}}),
        ];
        ("text/event-stream", format!("{}data: [DONE]\n\n", sse(&events)))
    } else if path.ends_with("/responses") {
        let events = [
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "ok"}),
            json!({"type": "response.completed", "response": {"status": "completed", "output": [], "usage": {"input_tokens": 10, "output_tokens": 2}}}),
        ];
        ("text/event-stream", sse(&events))
    } else if path.ends_with("/v1/messages") {
        let events = [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
            json!({"type": "message_stop"}),
        ];
        ("text/event-stream", events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())).collect())
    } else if path.contains(":streamGenerateContent") {
        let events = [json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
                             "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}})];
        ("text/event-stream", sse(&events))
    } else {
        let lines = [
            json!({"model": "scripted", "message": {"role": "assistant", "content": "ok"}, "done": false}),
            json!({"model": "scripted", "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", "prompt_eval_count": 10, "eval_count": 2}),
        ];
        ("application/x-ndjson", lines.iter().map(|l| format!("{l}\n")).collect())
    };
    respond(&mut stream, 200, content_type, &answer);
}

// The shapes providers refuse a parameter in (tests/integration/provider_mocks.rs, adapt_llm.py).

/// OpenAI's (and every gateway's that copies it): the parameter in `param`.
fn openai(name: &str) -> (u16, Value) {
    let message = format!("Unsupported parameter: '{name}' is not supported with this model.");
    (400, json!({"error": {"message": message, "type": "invalid_request_error", "param": name, "code": "unsupported_parameter"}}))
}

/// OpenAI's, asking for another name.
fn openai_instead(name: &str, instead: &str) -> (u16, Value) {
    let message = format!("Unsupported parameter: '{name}' is not supported with this model. Use '{instead}' instead.");
    (400, json!({"error": {"message": message, "type": "invalid_request_error", "param": name, "code": "unsupported_parameter"}}))
}

/// OpenAI's for an argument it does not know, the name only in the message.
fn unrecognized(name: &str) -> (u16, Value) {
    (400, json!({"error": {"message": format!("Unrecognized request argument supplied: {name}"), "type": "invalid_request_error", "param": null, "code": null}}))
}

/// The Responses API's.
fn unknown_parameter(name: &str) -> (u16, Value) {
    (400, json!({"error": {"message": format!("Unknown parameter: '{name}'."), "type": "invalid_request_error", "param": name, "code": "unknown_parameter"}}))
}

/// Anthropic's.
fn anthropic(name: &str) -> (u16, Value) {
    (400, json!({"type": "error", "error": {"type": "invalid_request_error", "message": format!("{name}: Extra inputs are not permitted")}}))
}

/// Gemini's, `at` the field it was found in.
fn gemini(name: &str, at: Option<&str>) -> (u16, Value) {
    let place = at.map(|at| format!(" at '{at}'")).unwrap_or_default();
    let message = format!("Invalid JSON payload received. Unknown name \"{name}\"{place}: Cannot find field.");
    (400, json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}))
}

/// Ollama's own: `{"error": "…"}`.
fn ollama(name: &str) -> (u16, Value) {
    (400, json!({"error": format!("json: unknown field \"{name}\"")}))
}

/// Mistral's 422 (FastAPI).
fn mistral(name: &str) -> (u16, Value) {
    (422, json!({"object": "error", "detail": [{"type": "extra_forbidden", "loc": ["body", name], "msg": "Extra inputs are not permitted", "input": 1}]}))
}

/// Points `lab`'s providers at `teacher` for `api`; the name to ask.
fn use_provider(lab: &Lab, teacher: &Teacher, api: Api) -> &'static str {
    let (name, entry) = api.provider(teacher.port);
    std::fs::write(lab.data.join("providers.json"), json!({"providers": [entry]}).to_string()).unwrap();
    name
}

/// What the first process kept in model-adaptations.json: the names it drops and renames.
fn kept(lab: &Lab) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(lab.data.join(ADAPTATIONS)) else { return Vec::new() };
    let all: Value = serde_json::from_str(&text).unwrap();
    let mut names = Vec::new();
    for lesson in all.as_object().unwrap().values() {
        names.extend(lesson["drop"].as_array().into_iter().flatten().map(|n| n.as_str().unwrap().to_owned()));
        names.extend(lesson["rename"].as_object().into_iter().flatten().map(|(from, _)| from.clone()));
    }
    names
}

/// One case: nothing learned before, the first request refused with `refusal`, then the
/// same question in a new process. Returns the requests the provider got, and both runs.
fn teach(lab: &Lab, teacher: &Teacher, refusal: &(u16, Value), args: &[&str]) -> (Vec<Value>, Output, Output) {
    let _ = std::fs::remove_file(lab.data.join(ADAPTATIONS));
    teacher.refuse_next(refusal);
    let first = lab.run(args);
    let later = lab.run(args);
    (teacher.seen(), first, later)
}

/// Each refusal names something the request needs: the user sees the provider's error,
/// nothing is learned, and every later request (a retry, a new process) carries the
/// system prompt, the conversation, the tools and the output limit the first one did.
fn assert_teaches_nothing(lab: &Lab, teacher: &Teacher, api: Api, args: &[&str], cases: &[(&str, (u16, Value))]) {
    for (name, refusal) in cases {
        let case = format!("{api:?}, {name} refused as {}", refusal.1);
        let (seen, first, later) = teach(lab, teacher, refusal, args);
        assert!(seen.len() >= 2, "{case}: {} requests\n{}\n{}", seen.len(), text(&first), text(&later));
        let original = api.essentials(&seen[0]);
        assert!(api.limit(&seen[0]).is_u64(), "{case}: the first request has an output limit: {}", seen[0]);
        assert!(seen[0].to_string().contains(SYSTEM), "{case}: the first request has the system prompt: {}", seen[0]);
        for (at, request) in seen.iter().enumerate().skip(1) {
            assert_eq!(api.essentials(request), original, "{case}: request {} lost something the first had\n{}", at + 1, text(&first));
        }
        assert!(!first.status.success(), "{case}: the refusal is the user's error, not a lesson\n{}", text(&first));
        assert!(text(&first).contains(&format!("(HTTP {})", refusal.0)), "{case}: the provider's error is shown\n{}", text(&first));
        assert!(later.status.success() && String::from_utf8_lossy(&later.stdout).contains("ok"), "{case}: a new process is answered\n{}", text(&later));
        assert_eq!(kept(lab), Vec::<String>::new(), "{case}: nothing kept for later");
    }
}

#[test]
fn a_chat_completions_provider_cannot_teach_cowork_to_drop_the_prompt_the_limit_or_the_usage() {
    let lab = Lab::new(vec![]);
    let teacher = Teacher::start();
    let name = use_provider(&lab, &teacher, Api::Chat);
    let cases = [
        // The review's reproduction, and other spellings of the same.
        ("messages.0.content", openai("messages.0.content")),
        ("messages.0.content", unrecognized("messages.0.content")),
        ("messages.0.content", mistral("messages.0.content")),
        ("messages.0.content", unknown_parameter("messages.0.content")),
        ("messages[0].content", openai("messages[0].content")),
        ("messages.0", openai("messages.0")),
        ("messages", openai("messages")),
        ("model", openai("model")),
        // The output limit, under its name, another, or renamed into something else.
        ("max_completion_tokens", openai("max_completion_tokens")),
        ("max_completion_tokens", mistral("max_completion_tokens")),
        ("max_completion_tokens", openai_instead("max_completion_tokens", "temperature")),
        ("max_completion_tokens", openai_instead("max_completion_tokens", "max_output_tokens")),
        // The usage report the budget counts: only the whole request for it may go (and the answer is then counted by its size).
        ("stream_options.include_usage", openai("stream_options.include_usage")),
        ("include_usage", openai("include_usage")),
    ];
    assert_teaches_nothing(&lab, &teacher, Api::Chat, &["ask", "--provider", name, "hello"], &cases);
}

/// The agent's requests carry its tools (and a system prompt of its own, which may differ
/// between processes): neither goes, whatever names them.
#[test]
fn an_agents_tools_and_instructions_cannot_be_taught_away() {
    let lab = Lab::new(vec![]);
    let teacher = Teacher::start();
    let name = use_provider(&lab, &teacher, Api::Chat);
    let cases = [
        openai("tools.0.function.parameters"),
        openai("tools.0.function"),
        unrecognized("tools.0"),
        openai("tools"),
        openai("parameters"),
        openai("function"),
        openai("messages.0.content"),
    ];
    for refusal in &cases {
        let case = format!("refused as {}", refusal.1);
        let (seen, first, later) = teach(&lab, &teacher, refusal, &["ask", "--agent", "--provider", name, "hello"]);
        assert!(seen.len() >= 2, "{case}: {} requests\n{}\n{}", seen.len(), text(&first), text(&later));
        let tools = &seen[0]["tools"];
        assert!(tools.as_array().is_some_and(|t| !t.is_empty() && t.iter().all(|t| t["function"]["parameters"].is_object())), "{case}: {tools}");
        for request in &seen {
            assert_eq!(&request["tools"], tools, "{case}: the tools offered");
            let system = &request["messages"][0];
            assert!(system["role"] == "system" && system["content"].as_str().is_some_and(|c| c.len() > 100), "{case}: the instructions: {system}");
            assert_eq!(Api::Chat.limit(request), Api::Chat.limit(&seen[0]), "{case}: the output limit");
        }
        assert!(text(&first).contains("(HTTP 400)"), "{case}: the provider's error is shown\n{}", text(&first));
        assert_eq!(kept(&lab), Vec::<String>::new(), "{case}: nothing kept for later");
    }
}

#[test]
fn a_responses_api_provider_cannot_teach_cowork_to_drop_the_instructions_the_input_the_limit_or_store() {
    let lab = Lab::new(vec![]);
    let teacher = Teacher::start();
    let name = use_provider(&lab, &teacher, Api::Responses);
    let cases = [
        ("instructions", unknown_parameter("instructions")),
        ("input.0", unknown_parameter("input.0")),
        ("input.0.content", unknown_parameter("input.0.content")),
        ("input.0.content", openai("input.0.content")),
        ("input", openai("input")),
        ("max_output_tokens", unknown_parameter("max_output_tokens")),
        ("max_output_tokens", openai_instead("max_output_tokens", "max_tokens")),
        ("store", unknown_parameter("store")),
    ];
    assert_teaches_nothing(&lab, &teacher, Api::Responses, &["ask", "--provider", name, "hello"], &cases);
}

#[test]
fn an_anthropic_provider_cannot_teach_cowork_to_drop_the_system_prompt_or_the_limit() {
    let lab = Lab::new(vec![]);
    let teacher = Teacher::start();
    let name = use_provider(&lab, &teacher, Api::Anthropic);
    let cases = [
        ("system", anthropic("system")),
        ("system.0.text", anthropic("system.0.text")),
        ("system.0.text", openai("system.0.text")),
        ("system.0", openai("system.0")),
        ("messages.0.content", anthropic("messages.0.content")),
        ("max_tokens", anthropic("max_tokens")),
        ("max_tokens", openai_instead("max_tokens", "max_completion_tokens")),
    ];
    assert_teaches_nothing(&lab, &teacher, Api::Anthropic, &["ask", "--provider", name, "hello"], &cases);
}

#[test]
fn a_gemini_provider_cannot_teach_cowork_to_drop_the_system_instruction_or_the_limit() {
    let lab = Lab::new(vec![]);
    let teacher = Teacher::start();
    let name = use_provider(&lab, &teacher, Api::Gemini);
    let cases = [
        ("generationConfig.maxOutputTokens", gemini("generationConfig.maxOutputTokens", None)),
        ("generationConfig.maxOutputTokens", openai("generationConfig.maxOutputTokens")),
        ("maxOutputTokens", gemini("maxOutputTokens", Some("generation_config"))),
        ("maxOutputTokens", openai_instead("maxOutputTokens", "max_tokens")),
        ("generationConfig", gemini("generationConfig", None)),
        // A plain name one level down: the system instruction's text.
        ("parts", gemini("parts", Some("system_instruction"))),
        ("systemInstruction.parts", gemini("systemInstruction.parts", None)),
        ("systemInstruction", gemini("systemInstruction", None)),
        ("contents.0.parts", gemini("contents.0.parts", None)),
    ];
    assert_teaches_nothing(&lab, &teacher, Api::Gemini, &["ask", "--provider", name, "hello"], &cases);
}

#[test]
fn an_ollama_server_cannot_teach_cowork_to_drop_the_output_limit_or_the_system_prompt() {
    let lab = Lab::new(vec![]);
    let teacher = Teacher::start();
    let name = use_provider(&lab, &teacher, Api::Ollama);
    let cases = [
        // The review's reproduction B, and other spellings of the same.
        ("options.num_predict", openai("options.num_predict")),
        ("options.num_predict", unrecognized("options.num_predict")),
        ("options.num_predict", ollama("options.num_predict")),
        ("options", openai("options")),
        ("num_predict", openai("num_predict")),
        // The old client renamed it one level down, to a name Ollama ignores.
        ("num_predict", openai_instead("num_predict", "max_tokens")),
        ("messages.0.content", openai("messages.0.content")),
    ];
    assert_teaches_nothing(&lab, &teacher, Api::Ollama, &["ask", "--provider", name, "hello"], &cases);
}

/// The control: a provider that refuses an optional setting it does not take still has
/// it left out of the retry and of every later request, the rest untouched.
#[test]
fn an_optional_setting_a_provider_refuses_is_still_learned_and_left_out_for_good() {
    let lab = Lab::new(vec![]);
    let teacher = Teacher::start();
    let cases = [
        (Api::Chat, "/reasoning_effort", openai("reasoning_effort")),
        (Api::Chat, "/reasoning_effort", mistral("reasoning_effort")),
        (Api::Responses, "/reasoning/summary", (400, json!({"error": {"message": "Your organization must be verified to generate reasoning summaries.", "type": "invalid_request_error", "param": "reasoning.summary", "code": "unsupported_value"}}))),
        (Api::Anthropic, "/thinking", anthropic("thinking")),
        (Api::Gemini, "/generationConfig/thinkingConfig", gemini("thinkingConfig", Some("generation_config"))),
        (Api::Ollama, "/think", openai("think")),
    ];
    for (api, pointer, refusal) in &cases {
        let case = format!("{api:?}, {pointer} refused as {}", refusal.1);
        let name = use_provider(&lab, &teacher, *api);
        let (seen, first, later) = teach(&lab, &teacher, refusal, &["ask", "--provider", name, "hello"]);
        assert!(first.status.success() && later.status.success(), "{case}\n{}\n{}", text(&first), text(&later));
        assert_eq!(seen.len(), 3, "{case}: refused, retried without it, then right the first time");
        assert!(seen[0].pointer(pointer).is_some(), "{case}: the first request had it: {}", seen[0]);
        assert!(seen[1].pointer(pointer).is_none() && seen[2].pointer(pointer).is_none(), "{case}: left out of the retry and the new process");
        for request in &seen[1..] {
            assert_eq!(api.essentials(request), api.essentials(&seen[0]), "{case}");
        }
        assert_eq!(kept(&lab).len(), 1, "{case}: one lesson kept");
    }
    // A limit renamed to the other name chat completions takes for it keeps its value.
    let name = use_provider(&lab, &teacher, Api::Chat);
    let (seen, first, later) = teach(&lab, &teacher, &openai_instead("max_completion_tokens", "max_tokens"), &["ask", "--provider", name, "hello"]);
    assert!(first.status.success() && later.status.success());
    assert_eq!(seen.len(), 3);
    assert_eq!((seen[2].get("max_completion_tokens"), &seen[2]["max_tokens"]), (None, &seen[0]["max_completion_tokens"]));
}

/// Lessons an older cowork wrote (before they were checked) are ignored when read, while
/// the sound ones in the same file still apply.
#[test]
fn lessons_an_older_cowork_kept_are_ignored_when_loaded() {
    let lab = Lab::new(vec![]);
    let teacher = Teacher::start();
    let older = json!({
        "scripted/o3-mini": {"drop": ["messages.0.content", "stream_options", "max_completion_tokens", "reasoning_effort"]},
        "openai/o3-mini": {"drop": ["instructions", "input.0.content", "store", "reasoning.summary"], "rename": {"max_output_tokens": "max_tokens"}},
        "anthropic/claude-sonnet-4-5": {"drop": ["system.0.text", "thinking"], "rename": {"max_tokens": "max_completion_tokens"}},
        "gemini/gemini-2.5-flash": {"drop": ["generationConfig.maxOutputTokens", "parts", "systemInstruction.parts", "thinkingConfig"]},
        "scripted/scripted": {"drop": ["options.num_predict", "messages.0.content", "think"], "rename": {"num_predict": "max_tokens"}},
    });
    let cases = [
        (Api::Chat, "/reasoning_effort"),
        (Api::Responses, "/reasoning/summary"),
        (Api::Anthropic, "/thinking"),
        (Api::Gemini, "/generationConfig/thinkingConfig"),
        (Api::Ollama, "/think"),
    ];
    for (api, sound) in cases {
        std::fs::write(lab.data.join(ADAPTATIONS), older.to_string()).unwrap();
        let name = use_provider(&lab, &teacher, api);
        teacher.state.lock().seen.clear();
        let out = lab.run(&["ask", "--provider", name, "hello"]);
        assert!(out.status.success(), "{api:?}\n{}", text(&out));
        let seen = teacher.seen();
        assert_eq!(seen.len(), 1, "{api:?}");
        let request = &seen[0];
        assert!(request.to_string().contains(SYSTEM), "{api:?}: the system prompt was sent: {request}");
        assert!(api.limit(request).is_u64(), "{api:?}: the output limit was sent: {request}");
        for key in ["store", "input", "messages", "contents"] {
            if let Some(part) = request.get(key) {
                assert!(!part.is_null(), "{api:?}: {key}");
            }
        }
        assert!(request.pointer(sound).is_none(), "{api:?}: the sound lesson in the same file still applies: {request}");
    }
    // The Responses request kept store false and its input's text; chat completions its usage report.
    std::fs::write(lab.data.join(ADAPTATIONS), older.to_string()).unwrap();
    let name = use_provider(&lab, &teacher, Api::Responses);
    teacher.state.lock().seen.clear();
    assert!(lab.run(&["ask", "--provider", name, "hello"]).status.success());
    let request = &teacher.seen()[0];
    assert_eq!((request["store"].as_bool(), request["input"][0]["content"].as_str()), (Some(false), Some("hello")), "{request}");
    // Chat completions without the usage report (a sound lesson): the answer is still counted, by its size.
    let name = use_provider(&lab, &teacher, Api::Chat);
    teacher.state.lock().seen.clear();
    assert!(lab.run(&["ask", "--provider", name, "hello"]).status.success());
    assert!(teacher.seen()[0].get("stream_options").is_none());
}

// ---------------------------------------------------------------------------
// The review's smaller observation: `cowork audit | head -1` panicked.

/// `args` run with standard output a pipe whose reader has already gone.
fn with_reader_gone(lab: &Lab, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    lab.command(args).stdout(writer).stderr(Stdio::piped()).output().unwrap()
}

#[test]
fn a_command_whose_reader_has_gone_ends_quietly_with_status_0() {
    let mut lab = Lab::new(vec![calls(&[("run_command", json!({"command": "touch /nonexistent/cowork-epipe"}))])]);
    // Something in the audit log: a call waiting for approval.
    let out = lab.run(&["ask", "--agent", "touch it"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    lab.allow_command("git status");
    lab.script(vec![Step::Text("a long enough answer".into())]);
    let commands: [&[&str]; 7] = [
        &["audit"],
        &["audit", "--json"],
        &["settings", "list"],
        &["tools"],
        &["search", "--json", "plants"],
        &["rules", "list"],
        // Its writes fail as errors (`?`), not as println!'s panics.
        &["ask", "--provider", "scripted", "hello"],
    ];
    for args in commands {
        // With a reader, each prints something (so without one, a write fails).
        let shown = lab.run(args);
        assert!(shown.status.success() && !shown.stdout.is_empty(), "{args:?}\n{}", text(&shown));
        let out = with_reader_gone(&lab, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?} ends with status 0\n{stderr}");
        for word in ["panicked", "Broken pipe", "failed printing", "os error 32"] {
            assert!(!stderr.contains(word), "{args:?}: {word:?} on stderr\n{stderr}");
        }
    }
}

/// The fix is not SIGPIPE's default action: a pipe to a child that has gone (an MCP
/// server that exited at once) is an error cowork handles, and it answers.
#[test]
fn a_closed_pipe_to_a_child_does_not_end_cowork() {
    let lab = Lab::new(vec![Step::Text("answered".into())]);
    std::fs::write(lab.data.join("mcp-servers.json"), json!({"mcpServers": {"gone": {"command": "true", "args": []}}}).to_string()).unwrap();
    let out = lab.run(&["ask", "--agent", "hello"]);
    assert_eq!(out.status.signal(), None, "not killed by a signal\n{}", text(&out));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("answered"), "{}", text(&out));
}
