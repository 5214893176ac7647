//! Cloud brains as the paid services behave (`provider_mocks`): OpenAI's
//! reasoning models, a refused parameter learned and kept across restarts,
//! reasoning and thinking shown apart from the answer and never sent back,
//! Anthropic's signed thinking and Gemini 3's thought signatures carried
//! through a tool loop, model lists with context and prices, prompt caching
//! measured on a ten-question session, and an integration from the catalog:
//! a real reference MCP server from npm, tested, saved and used by the agent.

use std::process::Command;
use std::time::Duration;

use cowork::agent::AgentCommand;
use cowork::agent::events::AgentEvent;
use cowork::brains::{Delta, ProviderConfig, ProviderKind, Role, Turn, stream_chat};
use cowork::events::AppEvent;
use cowork::mcp::events::McpEvent;
use cowork::net::OutboundGate;
use cowork::records::MessageStatus;
use serde_json::{Value, json};

use super::agent::task;
use super::provider_mocks::{Flavour, Mock, Say, mock};
use super::support::temp_dir;

fn provider(name: &str, kind: ProviderKind, mock: &Mock, model: &str) -> ProviderConfig {
    ProviderConfig::new(name, kind, mock.url(), model)
}

fn ask(provider: &ProviderConfig, turns: &[Turn]) -> (Result<cowork::brains::Completion, cowork::brains::ProviderError>, String, String) {
    let (mut text, mut reasoning) = (String::new(), String::new());
    let result = stream_chat(&OutboundGate::new(false), provider, None, Some("sk-test"), turns, 300, &|| false, &mut |delta| {
        if let Delta::Text(t) = delta {
            text.push_str(t);
        } else if let Some(thought) = delta.reasoning_text() {
            reasoning.push_str(thought);
        }
    });
    (result, text, reasoning)
}

fn question(text: &str) -> Vec<Turn> {
    vec![Turn::new(Role::System, "You are cowork."), Turn::new(Role::User, text)]
}

#[test]
fn openai_reasoning_models_get_max_completion_tokens_and_no_sampling_and_a_refused_parameter_is_learned_for_good() {
    let server = mock(Flavour::OpenAi);
    // GPT-5 at OpenAI: the Responses API, which streams a reasoning summary; room to think, nothing the model refuses.
    let gpt5 = provider("openai", ProviderKind::Openai, &server, "gpt-5");
    let (result, text, reasoning) = ask(&gpt5, &question("Say OK"));
    assert_eq!(text, "OK", "{result:?}");
    assert_eq!(reasoning, "**Reading the request**\n\nThe user wants a short answer.", "OpenAI's reasoning summary, apart from the answer");
    let seen = &server.chats()[0];
    assert_eq!(seen.path, "/v1/responses");
    let body = &seen.body;
    assert!(body.get("max_tokens").is_none() && body.get("temperature").is_none() && body.get("top_p").is_none(), "{body}");
    assert!(body["max_output_tokens"].as_u64().unwrap() > 300, "room to think beyond the answer: {body}");
    assert_eq!((body["reasoning"]["summary"].as_str(), body["store"].as_bool(), body["instructions"].as_str()), (Some("auto"), Some(false), Some("You are cowork.")));
    let answer = result.unwrap().answer;
    assert_eq!((answer.reasoning_tokens, answer.finish.as_deref()), (64, Some("stop")));
    // Tools go as non-strict functions (strict would make every argument required).
    let tool = cowork::brains::ToolDef { name: "read_file".into(), description: "Reads a file".into(), parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}) };
    let (result, text, _) = {
        let (mut text, mut thought) = (String::new(), String::new());
        let result = cowork::brains::stream_chat_with_tools(&OutboundGate::new(false), &gpt5, None, Some("sk-test"), &question("Say OK"), &[tool], 300, &|| false, &mut |d| {
            if let Delta::Text(t) = d { text.push_str(t) } else if let Some(r) = d.reasoning_text() { thought.push_str(r) }
        });
        (result, text, thought)
    };
    assert_eq!(text, "OK", "{result:?}");
    assert_eq!(server.chats().last().unwrap().body["tools"][0]["strict"], false);
    // An organisation OpenAI has not verified gets no summaries: refused once, then asked without, and remembered.
    let unverified = mock(Flavour::OpenAi);
    unverified.unverified();
    let model = ProviderConfig { base_url: unverified.url(), ..provider("openai", ProviderKind::Openai, &server, "gpt-5-nano") };
    for _ in 0..2 {
        let (result, text, reasoning) = ask(&model, &question("Say OK"));
        assert_eq!((text.as_str(), reasoning.as_str()), ("OK", ""), "{result:?}");
    }
    assert_eq!(unverified.chats().iter().map(|c| c.status).collect::<Vec<_>>(), vec![400, 200, 200], "the refusal is learned for that model");
    assert!(unverified.chats()[2].body.get("reasoning").is_none_or(|r| r.get("summary").is_none()));
    // An effort is passed as OpenAI names it; a non-reasoning model keeps chat completions and gets none.
    let effort = ProviderConfig { reasoning_effort: Some("low".into()), ..provider("openai", ProviderKind::Openai, &server, "o3-mini") };
    assert_eq!(ask(&effort, &question("Say OK")).1, "OK");
    assert_eq!(server.chats().last().unwrap().body["reasoning"]["effort"], "low");
    // A reasoning model at a gateway (chat completions): max_completion_tokens and reasoning_effort.
    let proxied = ProviderConfig { reasoning_effort: Some("high".into()), ..provider("azure", ProviderKind::Openai, &server, "o3-mini") };
    assert_eq!(ask(&proxied, &question("Say OK")).1, "OK");
    let body = server.chats().last().unwrap().body.clone();
    assert_eq!((body["reasoning_effort"].as_str(), body.get("max_tokens").is_none()), (Some("high"), true), "{body}");
    assert!(body["max_completion_tokens"].as_u64().unwrap() > 300);
    let mini = ProviderConfig { reasoning_effort: Some("low".into()), ..provider("openai", ProviderKind::Openai, &server, "gpt-4o-mini") };
    assert_eq!(ask(&mini, &question("Say OK")).1, "OK");
    let last = server.chats().last().unwrap().clone();
    assert!(last.path.ends_with("/chat/completions") && last.body.get("reasoning_effort").is_none());
    assert_eq!(last.body["max_tokens"], 300, "not a reasoning model, not api.openai.com: the parameter every compatible server takes");

    // A gateway cowork knows nothing about, serving a reasoning model under a name no rule knows:
    // the 400 is retried once with the parameter it asks for, and remembered.
    let data = temp_dir();
    let providers = format!(r#"{{"providers": [{{"name": "gateway", "kind": "openai", "base_url": "{}", "model": "acme-reasoner-2"}}]}}"#, server.url());
    std::fs::write(data.path().join("providers.json"), providers).unwrap();
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_cowork"))
            .env("COWORK_LOG", "warn")
            .arg("--data-dir")
            .arg(data.path())
            .args(["ask", "--provider", "gateway", "Say OK"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let before = server.chats().len();
    assert_eq!(run(), "OK");
    let tried: Vec<_> = server.chats()[before..].to_vec();
    assert_eq!(tried.len(), 2, "refused, then retried once");
    assert_eq!((tried[0].status, tried[1].status), (400, 200));
    assert!(tried[0].body.get("max_tokens").is_some() && tried[1].body.get("max_tokens").is_none() && tried[1].body.get("max_completion_tokens").is_some());
    let kept = std::fs::read_to_string(data.path().join("model-adaptations.json")).unwrap();
    assert!(kept.contains("gateway/acme-reasoner-2") && kept.contains("max_completion_tokens"), "{kept}");
    // A new process: right the first time.
    let before = server.chats().len();
    assert_eq!(run(), "OK");
    assert_eq!(server.chats()[before..].iter().map(|s| s.status).collect::<Vec<_>>(), vec![200]);

    // A value the user chose that the API calls invalid is a clear error, not something quietly dropped.
    let before = server.chats().len();
    let odd = ProviderConfig { reasoning_effort: Some("extreme".into()), ..provider("azure", ProviderKind::Openai, &server, "gpt-5") };
    let (result, _, _) = ask(&odd, &question("Say OK"));
    let err = result.unwrap_err().to_string();
    assert!(err.contains("rejected the request (HTTP 400)") && err.contains("extreme"), "{err}");
    assert_eq!(server.chats().len() - before, 1);
}

#[test]
fn reasoning_and_thinking_stream_apart_from_the_answer_for_every_provider_and_never_go_back() {
    // DeepSeek's reasoner: reasoning_content, which the API refuses to be sent back.
    let deepseek = mock(Flavour::DeepSeek);
    let reasoner = provider("deepseek", ProviderKind::Openai, &deepseek, "deepseek-reasoner");
    deepseek.script(vec![Say::Text("Paris.".into()), Say::Text("About 2 million.".into())]);
    let (result, text, reasoning) = ask(&reasoner, &question("Capital of France?"));
    let completion = result.unwrap();
    assert_eq!((text.as_str(), completion.answer.text.as_str()), ("Paris.", "Paris."));
    assert!(reasoning.starts_with("First I look") && completion.answer.reasoning == reasoning);
    // The conversation goes on with the answer only (the mock refuses reasoning_content).
    let mut turns = question("Capital of France?");
    turns.push(Turn::new(Role::Assistant, completion.answer.text.clone()));
    turns.push(Turn::new(Role::User, "How many live there?"));
    let (result, text, _) = ask(&reasoner, &turns);
    assert_eq!(text, "About 2 million.", "{result:?}");
    assert!(!deepseek.chats()[1].body.to_string().contains("First I look"));

    // OpenRouter's `reasoning`, Ollama's `thinking`, Gemini's thought parts, Anthropic's thinking blocks.
    let openrouter = mock(Flavour::OpenRouter);
    let routed = ProviderConfig { reasoning_effort: Some("high".into()), ..provider("openrouter", ProviderKind::Openai, &openrouter, "anthropic/claude-sonnet-4.5") };
    let (_, text, reasoning) = ask(&routed, &question("Hi"));
    assert_eq!((text.as_str(), reasoning.is_empty()), ("OK", false));
    assert_eq!(openrouter.chats()[0].body["reasoning"], json!({"effort": "high"}));
    let ollama = mock(Flavour::Ollama);
    let local = ProviderConfig { reasoning_effort: Some("medium".into()), ..provider("ollama", ProviderKind::Ollama, &ollama, "qwen3:8b") };
    let (_, text, reasoning) = ask(&local, &question("Hi"));
    assert_eq!((text.as_str(), reasoning.as_str()), ("OK", "Let me think. "));
    let gemini = mock(Flavour::Gemini);
    let flash = provider("gemini", ProviderKind::Gemini, &gemini, "gemini-2.5-flash");
    let (result, text, reasoning) = ask(&flash, &question("Hi"));
    assert_eq!(text, "OK", "{result:?}");
    assert!(reasoning.contains("Weighing the question"));
    let answer = result.unwrap().answer;
    assert!(answer.output_tokens > 40, "thinking tokens are billed as output: {answer:?}");
    assert_eq!(gemini.chats()[0].body.pointer("/generationConfig/thinkingConfig/includeThoughts"), Some(&json!(true)));
    // Each family's own thinking setting (the mock refuses a level on 2.5 and a zero budget on 2.5 Pro, as Gemini does).
    for (model, effort, expected) in [
        ("gemini-2.5-flash", "high", json!({"includeThoughts": true, "thinkingBudget": 24576})),
        ("gemini-2.5-flash", "off", json!({"thinkingBudget": 0})),
        ("gemini-2.5-pro", "off", json!({"includeThoughts": true, "thinkingBudget": 128})),
        ("gemini-3-pro-preview", "low", json!({"includeThoughts": true, "thinkingLevel": "low"})),
    ] {
        let chosen = ProviderConfig { reasoning_effort: Some(effort.into()), ..provider("gemini", ProviderKind::Gemini, &gemini, model) };
        let (result, text, _) = ask(&chosen, &question("Hi"));
        assert_eq!(text, "OK", "{model} {effort}: {result:?}");
        assert_eq!(gemini.chats().last().unwrap().body["generationConfig"]["thinkingConfig"], expected, "{model} {effort}");
    }
    let anthropic = mock(Flavour::Anthropic);
    let claude = ProviderConfig { reasoning_effort: Some("low".into()), ..provider("anthropic", ProviderKind::Anthropic, &anthropic, "claude-sonnet-4-5") };
    let (result, text, reasoning) = ask(&claude, &question("Hi"));
    assert_eq!((text.as_str(), reasoning.as_str()), ("OK", "The user wants a short answer."), "{result:?}");
    let sent = &anthropic.chats()[0].body;
    assert_eq!(sent["thinking"], json!({"type": "enabled", "budget_tokens": 1024}));
    assert!(sent["max_tokens"].as_u64().unwrap() > 1024 + 299, "{sent}");
    // Without an effort Claude is not asked to think (and its max_tokens is the answer's).
    let plain = provider("anthropic", ProviderKind::Anthropic, &anthropic, "claude-sonnet-4-5");
    let (_, _, reasoning) = ask(&plain, &question("Hi"));
    assert!(reasoning.is_empty() && anthropic.chats()[1].body.get("thinking").is_none() && anthropic.chats()[1].body["max_tokens"] == 300);
}

/// A data directory whose brain is `name` at `mock` (consent given), for the workers.
fn fixture(mock: &Mock, name: &str, kind: &str, model: &str, extra: &str) -> (tempfile::TempDir, cowork::config::Paths) {
    let data = temp_dir();
    let provider = format!(r#"{{"providers": [{{"name": "{name}", "kind": "{kind}", "base_url": "{}", "model": "{model}"{extra}}}]}}"#, mock.url());
    std::fs::write(data.path().join("providers.json"), provider).unwrap();
    let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
    for (key, value) in [("brains.prefer", "cloud"), ("brains.tiers", name), (&format!("consent.{name}.activity") as &str, "always")] {
        cowork::store::set_setting(&conn, key, value, 0).unwrap();
    }
    cowork::secrets::Secrets::open(data.path()).unwrap().set(&format!("provider:{name}"), "sk-test").unwrap();
    let paths = cowork::config::Paths::resolve(Some(data.path().to_owned()), Some(data.path().join("models"))).unwrap();
    (data, paths)
}

/// Runs one agent task to its end; returns the answer's text and its reasoning as the chat got them.
fn run_task(workers: &cowork::workers::Workers, events: &crossbeam_channel::Receiver<AppEvent>, text: &str) -> (MessageStatus, String, String) {
    let request = task(text);
    let answer_id = request.answer_id;
    workers.agent.commands.send(AgentCommand::Chat(request)).unwrap();
    let (mut answer, mut reasoning) = (String::new(), String::new());
    let status = super::support::wait_for(events, Duration::from_secs(60), |e| match e {
        AppEvent::Agent(AgentEvent::Token { answer_id: id, text }) if *id == answer_id => {
            answer.push_str(text);
            None
        }
        AppEvent::Agent(AgentEvent::Reasoning { answer_id: id, text }) if *id == answer_id => {
            reasoning.push_str(text);
            None
        }
        AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: id, status, error, .. }) if *id == answer_id => Some((*status, error.clone())),
        _ => None,
    })
    .expect("the task finished");
    assert_eq!(status.0, MessageStatus::Done, "{:?}", status.1);
    (status.0, answer, reasoning)
}

#[test]
fn signed_thinking_and_thought_signatures_go_back_with_the_agents_tool_calls() {
    // Claude with thinking on: the tool step's signed thinking block must lead the assistant turn sent back.
    let anthropic = mock(Flavour::Anthropic);
    anthropic.script(vec![Say::Call { name: "current_window".into(), arguments: json!({}) }, Say::Text("You are in XTerm.".into())]);
    let (_data, paths) = fixture(&anthropic, "anthropic", "anthropic", "claude-sonnet-4-5", r#", "reasoning_effort": "low""#);
    let (workers, events) = super::support::start_workers(&paths);
    let (_, answer, reasoning) = run_task(&workers, &events, "Which window am I in?");
    assert!(answer.contains("XTerm"), "{answer}");
    assert!(reasoning.contains("The user wants"), "the thinking reached the chat: {reasoning:?}");
    let chats = anthropic.chats();
    assert!(chats.iter().all(|c| c.status == 200), "{:?}", chats.iter().map(|c| (c.status, c.body.to_string())).collect::<Vec<_>>());
    let second = &chats[1].body;
    let assistant = second["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["content"][0]["type"], "thinking");
    assert!(!answer.contains("The user wants"), "thinking is not the answer");
    workers.shutdown(Duration::from_secs(10));

    // Gemini 3: the function call goes back with its thought signature.
    let gemini = mock(Flavour::Gemini);
    gemini.script(vec![Say::Call { name: "current_window".into(), arguments: json!({}) }, Say::Text("XTerm it is.".into())]);
    let (_data, paths) = fixture(&gemini, "gemini", "gemini", "gemini-3-pro-preview", "");
    let (workers, events) = super::support::start_workers(&paths);
    let (_, answer, _) = run_task(&workers, &events, "Which window am I in?");
    assert!(answer.contains("XTerm"), "{answer}");
    let chats = gemini.chats();
    assert!(chats.iter().all(|c| c.status == 200), "{:?}", chats.iter().map(|c| c.body.to_string()).collect::<Vec<_>>());
    let sent = chats[1].body.to_string();
    assert!(sent.contains("thoughtSignature"), "{sent}");
    workers.shutdown(Duration::from_secs(10));
}

#[test]
fn each_provider_lists_its_models_with_context_and_prices_and_the_cli_picks_one() {
    let gate = OutboundGate::new(false);
    let list = |p: &ProviderConfig| cowork::brains::catalog::list_models(&gate, p, Some("sk-test")).unwrap();
    // OpenAI: chat models only; prices and context from the shipped table (the provider is named openai).
    let openai = mock(Flavour::OpenAi);
    let models = list(&ProviderConfig { price_in_per_mtok: 0.0, ..provider("openai", ProviderKind::Openai, &openai, "gpt-5") });
    let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
    assert!(ids.contains(&"gpt-5") && !ids.iter().any(|i| i.contains("embedding") || i.contains("whisper")), "{ids:?}");
    let gpt5 = models.iter().find(|m| m.id == "gpt-5").unwrap();
    assert!(gpt5.reasoning && gpt5.context.is_some_and(|c| c >= 128_000), "{gpt5:?}");
    assert_eq!(openai.seen()[0].headers.get("authorization").map(String::as_str), Some("Bearer sk-test"));
    // Anthropic: both pages, the version header; Gemini: both pages, chat models only, its context windows.
    let anthropic = mock(Flavour::Anthropic);
    let models = list(&provider("anthropic", ProviderKind::Anthropic, &anthropic, "claude-sonnet-4-5"));
    assert_eq!(models.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), vec!["claude-haiku-4-5", "claude-opus-4-5", "claude-sonnet-4-5"]);
    assert!(models[0].describe().contains("Claude Haiku 4.5") && models[0].context.is_some(), "{:?}", models[0]);
    let gemini = mock(Flavour::Gemini);
    let models = list(&provider("gemini", ProviderKind::Gemini, &gemini, "gemini-2.5-flash"));
    assert_eq!(models.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), vec!["gemini-2.5-flash", "gemini-3-pro-preview"]);
    assert_eq!(models[0].context, Some(1_048_576));
    assert!(gemini.seen().iter().any(|s| s.path == "/v1beta/models") && gemini.seen().len() == 2, "followed the page token");
    // OpenRouter's own prices (per token in its list, per million here); Ollama's installed models.
    let openrouter = mock(Flavour::OpenRouter);
    let models = list(&provider("openrouter", ProviderKind::Openai, &openrouter, "x"));
    let sonnet = models.iter().find(|m| m.id == "anthropic/claude-sonnet-4.5").unwrap();
    assert_eq!((sonnet.price_in, sonnet.price_out, sonnet.context), (Some(3.0), Some(15.0), Some(1_000_000)));
    assert!(sonnet.describe().contains("$3.00 / $15.00 per M tokens"), "{}", sonnet.describe());
    // LM Studio: its own list says what is loaded and each model's context; embeddings are not for chat.
    let lmstudio = mock(Flavour::OpenAi);
    let models = list(&provider("lmstudio", ProviderKind::Openai, &lmstudio, "qwen2.5-7b-instruct"));
    assert_eq!(
        models.iter().map(|m| m.describe()).collect::<Vec<_>>(),
        vec!["llama-3.2-3b-instruct · 131k context · free", "qwen2.5-7b-instruct · 32k context · free · loaded"]
    );
    assert_eq!(lmstudio.seen()[0].path, "/api/v0/models");
    let ollama = mock(Flavour::Ollama);
    let models = list(&provider("ollama", ProviderKind::Ollama, &ollama, "qwen3:8b"));
    assert_eq!(models.iter().map(|m| m.describe()).collect::<Vec<_>>(), vec!["llama3.2:latest (3.2B Q4_K_M) · free", "qwen3:8b (8.2B Q4_K_M) · free"]);

    // `cowork models cloud`: the list, then --use makes one the provider's model (only one it offers).
    let data = temp_dir();
    std::fs::write(data.path().join("providers.json"), format!(r#"{{"providers": [{{"name": "anthropic", "base_url": "{}", "model": "claude-opus-4-5"}}]}}"#, anthropic.url())).unwrap();
    cowork::secrets::Secrets::open(data.path()).unwrap().set("provider:anthropic", "sk-ant-test").unwrap();
    let cowork = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cowork")).env("COWORK_LOG", "warn").arg("--data-dir").arg(data.path()).args(args).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, out, err) = cowork(&["models", "cloud", "anthropic"]);
    assert!(ok, "{err}");
    assert!(out.contains("* claude-opus-4-5") && out.contains("claude-haiku-4-5 (Claude Haiku 4.5)") && out.contains("per M tokens"), "{out}");
    assert!(err.contains("3 models from anthropic") && err.contains("litellm"), "{err}");
    let (ok, out, _) = cowork(&["models", "cloud", "anthropic", "--json"]);
    let first: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert!(ok && first["id"] == "claude-haiku-4-5" && first["price_in_per_mtok"].as_f64().is_some_and(|p| p > 0.0), "{out}");
    let (ok, _, err) = cowork(&["models", "cloud", "anthropic", "--use", "claude-nonexistent"]);
    assert!(!ok && err.contains("does not offer"), "{err}");
    let (ok, out, err) = cowork(&["models", "cloud", "anthropic", "--use", "claude-haiku-4-5"]);
    assert!(ok && out.contains("claude-haiku-4-5 from now on"), "{err}");
    let providers = cowork::brains::Providers::load(&data.path().join("providers.json")).unwrap();
    assert_eq!(providers.get("anthropic").unwrap().model, "claude-haiku-4-5");
    assert!(anthropic.seen().iter().all(|s| s.headers.get("x-api-key").map(String::as_str) != Some("sk-test") || s.method == "GET"));
    // A wrong key is said as such.
    let (ok, _, err) = cowork(&["models", "cloud", "nobody"]);
    assert!(!ok && err.contains("no provider \"nobody\""), "{err}");
}

/// Tokens one request reported: (input, output, cache read, cache write).
type Usage = (u64, u64, u64, u64);

/// Ten questions in one chat with an agent at `mock`; returns the usage the
/// provider reported per request and the usage rows cowork kept.
fn ten_questions(mock: &Mock, name: &str, kind: &str, model: &str, caching: bool, prices: (f64, f64)) -> (Vec<Usage>, f64, f64) {
    // The model's list prices (a loopback server is otherwise free).
    let extra = format!(r#", "prompt_caching": {caching}, "price_in_per_mtok": {}, "price_out_per_mtok": {}"#, prices.0, prices.1);
    let (_data, paths) = fixture(mock, name, kind, model, &extra);
    let (workers, events) = super::support::start_workers(&paths);
    let questions = [
        "What was I doing this morning?", "Which app did I use most?", "Summarise my last hour.", "What did I copy last?", "Any meetings today?",
        "What was the title of the last document?", "How long was I in the terminal?", "What should I do next?", "Did I read mail?", "Thanks, that is all.",
    ];
    let before = mock.chats().len();
    let mut shown_cached = 0;
    let mut history: Vec<(cowork::records::Role, String)> = Vec::new();
    for (n, text) in questions.iter().enumerate() {
        mock.script(vec![Say::Text(format!("Answer {n}: you were busy with several windows this morning, mostly the terminal."))]);
        let mut request = task(text);
        request.history = history.clone();
        request.thread.thread_id = 42;
        request.thread_is_new = n == 0;
        let answer_id = request.answer_id;
        workers.agent.commands.send(AgentCommand::Chat(request)).unwrap();
        let finished = super::support::wait_for(&events, Duration::from_secs(60), |e| match e {
            AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: id, status, error, stats }) if *id == answer_id => Some((*status, error.clone(), *stats)),
            _ => None,
        });
        assert!(matches!(finished, Some((MessageStatus::Done, _, _))), "{finished:?}");
        shown_cached += finished.unwrap().2.cached_prompt_tokens as u64;
        history.push((cowork::records::Role::User, (*text).to_owned()));
        history.push((cowork::records::Role::Assistant, format!("Answer {n}: you were busy with several windows this morning, mostly the terminal.")));
    }
    let usage: Vec<_> = mock.chats()[before..].iter().map(|s| s.usage).collect();
    std::thread::sleep(Duration::from_millis(300));
    workers.shutdown(Duration::from_secs(10));
    let db = cowork::store::open_read_only(&paths.db_path()).unwrap();
    let (cost, cached): (f64, i64) = db.query_row("SELECT coalesce(sum(cost_usd), 0), coalesce(sum(cached_input_tokens), 0) FROM usage", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    let reported_cached: u64 = usage.iter().map(|u| u.1).sum();
    assert_eq!(cached as u64, reported_cached, "the usage rows keep the cached tokens the provider reported");
    assert_eq!(shown_cached, reported_cached, "and the answers' footers show them");
    (usage, cost, cached as f64)
}

#[test]
fn prompt_caching_on_a_ten_question_session_bills_most_input_at_the_cached_price() {
    let measure = |flavour: Flavour, name: &str, kind: &str, model: &str, prices: (f64, f64)| {
        let off = ten_questions(&mock(flavour), name, kind, model, false, prices);
        let on = ten_questions(&mock(flavour), name, kind, model, true, prices);
        // Tokens billed at the full price: input neither read from the cache (nor, for Anthropic, written to it).
        let full = |u: &[(u64, u64, u64, u64)]| u.iter().map(|(input, read, write, _)| input - read - write).sum::<u64>();
        let total = |u: &[(u64, u64, u64, u64)]| u.iter().map(|(input, ..)| input).sum::<u64>();
        let line = format!(
            "{name} {model}: {} input tokens over 10 questions; billed at the full input price: {} without caching, {} with it ({} read from the cache, {} written to it); cost ${:.4} without, ${:.4} with ({:.0}% less)",
            total(&on.0),
            full(&off.0),
            full(&on.0),
            on.0.iter().map(|u| u.1).sum::<u64>(),
            on.0.iter().map(|u| u.2).sum::<u64>(),
            off.1,
            on.1,
            100.0 * (1.0 - on.1 / off.1.max(1e-12))
        );
        eprintln!("[prompt caching] {line}");
        let read: u64 = on.0.iter().map(|u| u.1).sum();
        (full(&off.0), full(&on.0), off.1, on.1, line, read)
    };
    // Anthropic caches only what cache_control marks: off, nothing is cached; on, most of every prompt after the first.
    let (before, after, cost_before, cost_after, line, _) = measure(Flavour::Anthropic, "anthropic", "anthropic", "claude-sonnet-4-5", (3.0, 15.0));
    assert!(after * 2 < before, "{line}");
    assert!(cost_after < cost_before * 0.75, "{line}");
    // OpenAI caches a stable head by itself: cowork's prompts keep it stable, so most input is cached either way.
    let (_, after, _, cost_after, line, read) = measure(Flavour::OpenAi, "openai", "openai", "gpt-5-mini", (0.25, 2.0));
    assert!(cost_after > 0.0 && read > after * 2, "{line}");
    // Gemini's implicit cache the same way.
    let (_, after, _, _, line, read) = measure(Flavour::Gemini, "gemini", "gemini", "gemini-2.5-flash", (0.30, 2.5));
    assert!(read > after * 2, "{line}");
}

#[test]
fn an_integration_from_the_catalog_is_tested_before_it_is_saved_and_the_agent_uses_it() {
    use cowork::agent::events::{ApprovalChoice, CallStatus};
    use cowork::mcp::events::McpServerStatus;
    use cowork::mcp::worker::McpCommand;
    if !super::support::require(cowork::mcp::catalog::on_path("npx").is_some(), "npx (Node.js)") {
        return;
    }
    let server = mock(Flavour::OpenAi);
    let (data, paths) = fixture(&server, "openai", "openai", "gpt-5-mini", "");
    // A folder of the user's (cowork's own data is never a tool's to read).
    let shared = temp_dir();
    let folder = shared.path().join("shared with the agent");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("report-2027.txt"), "quarterly numbers").unwrap();
    let (workers, events) = super::support::start_workers(&paths);
    let add = |values: &[(&str, String)], trusted: bool| {
        let values = values.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        workers.mcp.commands.send(McpCommand::AddFromCatalog { id: "filesystem".into(), values, trusted }).unwrap();
        super::support::wait_for(&events, Duration::from_secs(150), |e| match e {
            AppEvent::Mcp(McpEvent::McpCatalogAdded { name, result, .. }) if name == "filesystem" => Some(result.clone()),
            _ => None,
        })
        .expect("the catalog answered")
    };
    // What the form refuses is never saved: a folder that is not there.
    let refused = add(&[("folders", "/no/such/folder".into())], true).unwrap_err();
    assert!(refused.contains("no folder"), "{refused}");
    assert!(!data.path().join("mcp-servers.json").exists() || !std::fs::read_to_string(data.path().join("mcp-servers.json")).unwrap().contains("filesystem"));
    // The real reference server from npm, through npx: one tools/list, then saved with the user's trust choice.
    let tools = add(&[("folders", folder.display().to_string())], true).unwrap();
    assert!(tools >= 10, "the Files server lists its tools: {tools}");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(data.path().join("mcp-servers.json")).unwrap()).unwrap();
    let entry = &saved["mcpServers"]["filesystem"];
    assert_eq!(entry["command"], "npx");
    assert_eq!(entry["args"], json!(["-y", "@modelcontextprotocol/server-filesystem@2026.8.31", folder.display().to_string()]));
    assert_eq!(entry["trusted"], true);
    super::support::wait_for(&events, Duration::from_secs(60), |e| match e {
        AppEvent::Mcp(McpEvent::McpServers(servers)) => servers.iter().any(|s| s.name == "filesystem" && s.status == McpServerStatus::Running).then_some(()),
        _ => None,
    })
    .expect("it runs");
    // A Python reference server through uvx, not trusted: saved with its pinned package and the form's zone.
    if super::support::require(cowork::mcp::catalog::on_path("uvx").is_some(), "uvx (uv; scripts/test sets it up)") {
        let add_time = |values: Vec<(String, String)>| {
            workers.mcp.commands.send(McpCommand::AddFromCatalog { id: "time".into(), values: values.into_iter().collect(), trusted: false }).unwrap();
            super::support::wait_for(&events, Duration::from_secs(150), |e| match e {
                AppEvent::Mcp(McpEvent::McpCatalogAdded { name, result, .. }) if name == "time" => Some(result.clone()),
                _ => None,
            })
            .expect("the catalog answered")
        };
        let tools = add_time(vec![("timezone".into(), "Europe/Berlin".into())]).unwrap();
        assert!(tools >= 2, "get_current_time and convert_time: {tools}");
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(data.path().join("mcp-servers.json")).unwrap()).unwrap();
        assert_eq!(saved["mcpServers"]["time"]["args"], json!(["mcp-server-time@2026.10.19", "--local-timezone=Europe/Berlin"]));
        assert!(saved["mcpServers"]["time"].get("trusted").is_none(), "not trusted unless chosen");
        super::support::wait_for(&events, Duration::from_secs(60), |e| match e {
            AppEvent::Mcp(McpEvent::McpServers(servers)) => servers.iter().any(|s| s.name == "time" && s.status == McpServerStatus::Running).then_some(()),
            _ => None,
        })
        .expect("it runs");
    }
    let with_time = cowork::mcp::catalog::on_path("uvx").is_some();
    // The agent lists the folder through it (and asks the time server) and answers from what the servers returned.
    let mut says = vec![Say::Call { name: "mcp__filesystem__list_directory".into(), arguments: json!({"path": folder.display().to_string()}) }];
    if with_time {
        says.push(Say::Call { name: "mcp__time__get_current_time".into(), arguments: json!({"timezone": "Europe/Berlin"}) });
    }
    says.push(Say::Text("The folder holds report-2027.txt.".into()));
    server.script(says);
    let request = task("What is in the folder I share with you?");
    let answer_id = request.answer_id;
    workers.agent.commands.send(AgentCommand::Chat(request)).unwrap();
    let status = super::support::wait_for(&events, Duration::from_secs(60), |e| match e {
        AppEvent::Agent(AgentEvent::ToolCall(call)) if call.status == CallStatus::Waiting => {
            workers.agent.commands.send(AgentCommand::Decide { call_id: call.call_id, choice: ApprovalChoice::Once }).unwrap();
            None
        }
        AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: id, status, error, .. }) if *id == answer_id => Some((*status, error.clone())),
        _ => None,
    })
    .expect("the task finished");
    assert_eq!(status.0, MessageStatus::Done, "{:?}", status.1);
    let chats = server.chats();
    let offered = chats[0].body["tools"].to_string();
    assert!(offered.contains("mcp__filesystem__list_directory"), "the agent was offered the catalog server's tools");
    // GPT-5 mini at OpenAI speaks the Responses API: the tool results ride as function_call_output items.
    assert!(chats.iter().all(|c| c.path == "/v1/responses" && c.status == 200));
    let result = chats.last().unwrap().body["input"].to_string();
    assert!(result.contains("function_call_output"), "{result}");
    assert!(result.contains("[FILE] report-2027.txt"), "the real server's listing went back to the model: {result}");
    if with_time {
        assert!(result.contains("Europe/Berlin") && result.contains("datetime"), "the uvx server's answer went back too: {result}");
    }
    workers.shutdown(Duration::from_secs(10));
}

/// A small real PNG (a black bar on white).
fn bar_png() -> Vec<u8> {
    let mut pixels = image::RgbaImage::from_pixel(64, 32, image::Rgba([255, 255, 255, 255]));
    for x in 8..56 {
        for y in 12..20 {
            pixels.put_pixel(x, y, image::Rgba([0, 0, 0, 255]));
        }
    }
    let mut out = Vec::new();
    image::DynamicImage::ImageRgba8(pixels).write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png).unwrap();
    out
}

/// Pictures (issue 57): a picture the user attached reaches a cloud model that
/// sees as a picture — through the agent and the plain chat, to Anthropic's
/// and OpenAI's APIs, which refuse a picture that is not what it claims — only
/// while the provider may read captured content; without that consent the
/// model gets the attachment's text alone, and so does a model that does not see.
#[test]
fn an_attached_picture_reaches_a_model_that_sees_only_where_captured_content_may_go() {
    use base64::Engine as _;
    let png = bar_png();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&png);
    let attachment = || {
        let picture = cowork::media::Image::sniffed(png.clone()).unwrap();
        cowork::records::Attachment::picture(std::path::Path::new("/tmp/bar.png"), "bar.png — picture, 1 picture\n--- picture (no text found in the picture) ---".into(), picture)
    };
    for (flavour, name, kind, model) in [(Flavour::Anthropic, "anthropic", "anthropic", "claude-sonnet-4-5"), (Flavour::OpenAi, "openai", "openai", "gpt-4.1-mini")] {
        for agent in [true, false] {
            for consent in ["always", "never"] {
                let server = mock(flavour);
                server.script(vec![Say::Text("A black bar.".into())]);
                let (data, paths) = fixture(&server, name, kind, model, "");
                let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
                cowork::store::set_setting(&conn, &format!("consent.{name}.activity"), consent, 0).unwrap();
                drop(conn);
                let (workers, events) = super::support::start_workers(&paths);
                let mut request = task("What is in this picture?");
                request.agent = agent;
                request.attachments = vec![attachment()];
                let answer_id = request.answer_id;
                workers.agent.commands.send(AgentCommand::Chat(request)).unwrap();
                let status = super::support::wait_for(&events, Duration::from_secs(60), |e| match e {
                    AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: id, status, error, .. }) if *id == answer_id => Some((*status, error.clone())),
                    _ => None,
                })
                .expect("the answer finished");
                assert_eq!(status.0, MessageStatus::Done, "{name} agent={agent} consent={consent}: {:?}", status.1);
                let chats = server.chats();
                assert!(chats.iter().all(|c| c.status == 200), "{:?}", chats.iter().map(|c| (c.status, c.body.to_string())).collect::<Vec<_>>());
                let sent = chats.last().expect("a request").body.to_string();
                assert_eq!(sent.contains(&encoded), consent == "always", "{name} agent={agent} consent={consent}: {sent}");
                if consent == "always" {
                    assert!(sent.contains(if kind == "anthropic" { "\"media_type\":\"image/png\"" } else { "data:image/png;base64," }), "{sent}");
                }
                workers.shutdown(Duration::from_secs(10));
            }
        }
    }
    // A picture that is not what it says is refused as the service refuses it (the mock is that strict).
    let server = mock(Flavour::Anthropic);
    server.script(vec![Say::Text("?".into())]);
    let mut turn = Turn::new(Role::User, "look");
    turn.images = vec![cowork::brains::message::Picture::new("image/jpeg", png.clone())];
    let (result, _, _) = ask(&provider("anthropic", ProviderKind::Anthropic, &server, "claude-sonnet-4-5"), &[turn]);
    assert!(result.unwrap_err().to_string().contains("Image does not match the provided media type image/jpeg"));
}
