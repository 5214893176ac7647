//! Cloud-provider paths against real servers on loopback: llama.cpp's own
//! server (OpenAI chat completions and Anthropic Messages, both streaming) and
//! the LiteLLM proxy in front of it (Gemini's streamGenerateContent). Ollama
//! has no server installable here: its test replays a transcript written from
//! Ollama's documented `/api/chat` stream format, served by a loopback server,
//! and says so. Error paths (429 with retry-after, 5xx, 401, malformed and
//! truncated streams, cancel, offline) use a scripted loopback server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cowork::agent::events::AgentEvent;
use cowork::brains::{Delta, ProviderConfig, ProviderError, ProviderKind, Role, Turn, stream_chat};
use cowork::net::OutboundGate;

use super::support::{chat_model, eventually, require, temp_dir};

pub(super) fn python() -> Option<String> {
    std::env::var("COWORK_TEST_PYTHON").ok().filter(|p| std::path::Path::new(p).is_file())
}

pub(super) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Killed (with its children) on drop.
use super::support::ChildGuard as Server;

fn http_ok(url: &str) -> bool {
    ureq::get(url).call().is_ok_and(|r| r.status().as_u16() == 200)
}

/// llama.cpp's server (xllamacpp) on SmolLM2, one thread, on loopback,
/// requiring `key` when given; greedy, so an answer's length does not vary run to run
/// (sampled, SmolLM2 once answered "Name three colours." with "A colour.").
fn llama_server(python: &str, key: Option<&str>) -> (Server, u16) {
    llama_server_with(python, key, &chat_model(), 2048, 1, true)
}

/// llama.cpp's server with `model`, `n_ctx` and `threads`, its chat template applied (jinja).
/// `greedy`: requests that name no temperature (cowork's do not) sample greedily with a fixed
/// seed, so a run repeats (llama.cpp's default is 0.8 with a random seed).
pub(super) fn llama_server_with(python: &str, key: Option<&str>, model: &std::path::Path, n_ctx: u32, threads: u32, greedy: bool) -> (Server, u16) {
    let port = free_port();
    let script = format!(
        "import time, xllamacpp as xlc\n\
         p = xlc.CommonParams(); p.model.path = {model:?}; p.hostnames = ['127.0.0.1']; p.port = {port}\n\
         p.n_ctx = {n_ctx}; p.n_parallel = 1; p.cpuparams.n_threads = {threads}; p.cpuparams_batch.n_threads = {threads}; p.use_jinja = True\n\
         {keys}{sampling}\
         s = xlc.Server(p)\n\
         while True: time.sleep(3600)\n",
        model = model.display().to_string(),
        keys = key.map(|k| format!("p.api_keys = [{k:?}]\n")).unwrap_or_default(),
        sampling = if greedy { "s = p.sampling; s.temp = 0.0; s.seed = 7; p.sampling = s\n" } else { "" },
    );
    let child = Command::new(python).args(["-c", &script]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let server = Server(child);
    assert!(eventually(Duration::from_secs(60), || http_ok(&format!("http://127.0.0.1:{port}/health"))), "llama.cpp server did not start");
    (server, port)
}

fn provider(name: &str, kind: ProviderKind, base_url: String) -> ProviderConfig {
    ProviderConfig::new(name, kind, base_url, "smollm2")
}

fn question() -> Vec<Turn> {
    vec![Turn::new(Role::System, "You are terse."), Turn::new(Role::User, "Name three colours.")]
}

/// Streams an answer, returning the text deltas as they arrived.
fn ask(gate: &OutboundGate, provider: &ProviderConfig, key: Option<&str>) -> (Result<cowork::brains::Completion, ProviderError>, Vec<String>) {
    let mut pieces = Vec::new();
    let result = stream_chat(gate, provider, None, key, &question(), 48, &|| false, &mut |delta| {
        if let Delta::Text(text) = delta {
            pieces.push(text.clone());
        }
    });
    (result, pieces)
}

#[test]
fn llama_cpp_server_streams_in_openai_and_anthropic_formats_and_refuses_a_wrong_key() {
    let Some(python) = python() else {
        require(false, "COWORK_TEST_PYTHON with xllamacpp (scripts/test installs it)");
        return;
    };
    if !require(chat_model().is_file(), "the chat model") {
        return;
    }
    let (_server, port) = llama_server(&python, Some("sk-local"));
    let gate = OutboundGate::new(false);
    for (kind, base) in [(ProviderKind::Openai, format!("http://127.0.0.1:{port}/v1")), (ProviderKind::Anthropic, format!("http://127.0.0.1:{port}"))] {
        let llama = provider("llama", kind, base);
        match ask(&gate, &llama, Some("sk-wrong")).0 {
            Err(ProviderError::BadKey { status: 401, .. }) => {}
            other => panic!("{kind:?}: a wrong key is a BadKey error: {other:?}"),
        }
        let (result, pieces) = ask(&gate, &llama, Some("sk-local"));
        let completion = result.unwrap_or_else(|err| panic!("{kind:?}: {err}"));
        assert!(pieces.len() > 3, "{kind:?} streamed in pieces: {pieces:?}");
        assert_eq!(pieces.concat(), completion.answer.text);
        assert!(!completion.answer.text.trim().is_empty());
        assert!(completion.answer.output_tokens > 0, "{kind:?} usage: {:?}", completion.answer);
        assert!(completion.answer.finish.is_some(), "{kind:?} finish reason");
        assert!(completion.first_token.is_some());
    }
    // Every request went through the gate and is in its log.
    let log = gate.log();
    assert_eq!(log.len(), 4);
    assert!(log.iter().all(|r| r.host == "127.0.0.1" && r.bytes_in > 0 && r.refused.is_none()), "{log:?}");

    // The command line: providers.json in the data directory.
    let data = temp_dir();
    std::fs::write(
        data.path().join("providers.json"),
        format!(r#"{{"providers": [{{"name": "llamacpp", "base_url": "http://127.0.0.1:{port}/v1", "model": "smollm2", "api_key_env": "LOCAL_LLAMA_KEY"}}]}}"#),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cowork"))
        .args(["ask", "--provider", "llamacpp", "Say hello."])
        .arg("--data-dir")
        .arg(data.path())
        .env("LOCAL_LLAMA_KEY", "sk-local")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty());
    assert!(stderr.contains("captured context is not sent"), "{stderr}");
    // Offline mode still allows loopback providers.
    let out = Command::new(env!("CARGO_BIN_EXE_cowork"))
        .args(["--offline", "ask", "--provider", "llamacpp", "Say hello."])
        .arg("--data-dir")
        .arg(data.path())
        .env("LOCAL_LLAMA_KEY", "sk-local")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn litellm_proxy_speaks_gemini_and_anthropic_and_refuses_a_wrong_key() {
    let Some(python) = python() else {
        require(false, "COWORK_TEST_PYTHON with litellm (scripts/test installs it)");
        return;
    };
    if !require(chat_model().is_file(), "the chat model") {
        return;
    }
    let (_llama, llama_port) = llama_server(&python, None);
    let dir = temp_dir();
    let config = dir.path().join("litellm.yaml");
    std::fs::write(
        &config,
        format!(
            "model_list:\n  - model_name: smollm2\n    litellm_params:\n      model: openai/smollm2\n      api_base: http://127.0.0.1:{llama_port}/v1\n      api_key: none\n\
             litellm_settings:\n  drop_params: true\n  telemetry: false\n  use_chat_completions_url_for_anthropic_messages: true\n\
             general_settings:\n  master_key: sk-test\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let litellm = std::path::Path::new(&python).with_file_name("litellm");
    let child = Command::new(litellm)
        .args(["--config"])
        .arg(&config)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("NO_PROXY", "*")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _proxy = Server(child);
    assert!(
        eventually(Duration::from_secs(120), || http_ok(&format!("http://127.0.0.1:{port}/health/liveliness"))),
        "LiteLLM did not start"
    );
    let gate = OutboundGate::new(false);
    let gemini = provider("gemini-via-litellm", ProviderKind::Gemini, format!("http://127.0.0.1:{port}"));
    let (result, pieces) = ask(&gate, &gemini, Some("sk-test"));
    let completion = result.unwrap_or_else(|err| panic!("gemini: {err}"));
    assert!(!pieces.is_empty() && !completion.answer.text.trim().is_empty(), "{completion:?}");
    assert!(completion.answer.finish.is_some());
    // LiteLLM without its database answers an unknown key with 400 "No connected db.": refused, with its words.
    let (result, _) = ask(&gate, &gemini, Some("sk-wrong"));
    match result {
        Err(err @ (ProviderError::BadKey { .. } | ProviderError::Rejected { .. })) => assert!(!err.to_string().is_empty()),
        other => panic!("a wrong key is refused: {other:?}"),
    }
    let anthropic = provider("anthropic-via-litellm", ProviderKind::Anthropic, format!("http://127.0.0.1:{port}"));
    let (result, _) = ask(&gate, &anthropic, Some("sk-test"));
    assert!(!result.unwrap().answer.text.trim().is_empty());
}

/// A scripted HTTP server: each connection gets the next response from
/// `responses` (status line + headers + body, sent in `chunks` with a pause).
pub(super) struct Scripted {
    pub(super) port: u16,
    pub(super) hits: Arc<AtomicUsize>,
    /// The requests received (head, blank line, body), in order.
    pub(super) heads: Arc<parking_lot::Mutex<Vec<String>>>,
}

#[derive(Clone)]
pub(super) struct Reply {
    head: String,
    chunks: Vec<String>,
    pause: Duration,
}

pub(super) fn reply(status: &str, extra_headers: &str, chunks: &[&str]) -> Reply {
    Reply {
        head: format!("HTTP/1.1 {status}\r\ncontent-type: text/event-stream\r\nconnection: close\r\n{extra_headers}\r\n"),
        chunks: chunks.iter().map(|c| (*c).to_owned()).collect(),
        pause: Duration::from_millis(5),
    }
}

pub(super) fn scripted(replies: Vec<Reply>) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let heads = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen = heads.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let index = counter.fetch_add(1, Ordering::SeqCst);
            let Some(reply) = replies.get(index.min(replies.len() - 1)).cloned() else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                // Read the request head and body (content-length) before answering.
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(value) = line.to_lowercase().strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                    head.push_str(&line);
                }
                let mut body = vec![0u8; length];
                let _ = reader.read_exact(&mut body);
                head.push_str("\r\n");
                head.push_str(&String::from_utf8_lossy(&body));
                seen.lock().push(head);
                let _ = stream.write_all(reply.head.as_bytes());
                for chunk in &reply.chunks {
                    if stream.write_all(chunk.as_bytes()).is_err() {
                        return;
                    }
                    let _ = stream.flush();
                    std::thread::sleep(reply.pause);
                }
            });
        }
    });
    Scripted { port, hits, heads }
}

pub(super) const OPENAI_OK: &[&str] = &[
    "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
    "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
];

#[test]
fn rate_limits_server_errors_bad_keys_and_broken_streams_become_clear_errors() {
    let gate = OutboundGate::new(false);
    let openai = |port: u16| provider("scripted", ProviderKind::Openai, format!("http://127.0.0.1:{port}/v1"));

    // 429 with retry-after: 1 is honoured, then the answer comes.
    let server = scripted(vec![reply("429 Too Many Requests", "retry-after: 1\r\n", &["{\"error\":{\"message\":\"slow down\"}}"]), reply("200 OK", "", OPENAI_OK)]);
    let started = Instant::now();
    let (result, _) = ask(&gate, &openai(server.port), Some("k"));
    let completion = result.unwrap();
    assert_eq!((completion.answer.text.as_str(), completion.attempts), ("Hello", 2));
    assert!(started.elapsed() >= Duration::from_millis(950), "retry-after honoured");

    // A retry-after longer than we wait is the error, with the server's words.
    let server = scripted(vec![reply("429 Too Many Requests", "retry-after: 3600\r\n", &["{\"error\":{\"message\":\"quota exhausted\"}}"])]);
    match ask(&gate, &openai(server.port), Some("k")).0 {
        Err(ProviderError::RateLimited { retry_after, message, .. }) => {
            assert_eq!((retry_after, message.as_str()), (Some(Duration::from_secs(3600)), "quota exhausted"));
        }
        other => panic!("{other:?}"),
    }

    // 5xx: bounded retries with backoff, then the error names the attempts.
    let server = scripted(vec![reply("503 Service Unavailable", "", &["overloaded"])]);
    match ask(&gate, &openai(server.port), Some("k")).0 {
        Err(err @ ProviderError::Server { attempts: 3, status: 503, .. }) => assert!(err.to_string().contains("overloaded"), "{err}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.hits.load(Ordering::SeqCst), 3);

    // 401: no retry, a bad-key error.
    let server = scripted(vec![reply("401 Unauthorized", "", &["{\"error\":{\"message\":\"Incorrect API key provided\"}}"])]);
    let err = ask(&gate, &openai(server.port), Some("k")).0.unwrap_err();
    assert!(matches!(err, ProviderError::BadKey { status: 401, .. }), "{err:?}");
    assert!(err.to_string().contains("Incorrect API key"), "{err}");
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);

    // Malformed JSON in the stream, and a stream cut before its end marker.
    let server = scripted(vec![reply("200 OK", "", &["data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\n", "data: {oops\n\n"])]);
    let err = ask(&gate, &openai(server.port), None).0.unwrap_err();
    assert!(matches!(err, ProviderError::Malformed { .. }) && err.to_string().contains("not JSON"), "{err}");
    let server = scripted(vec![reply("200 OK", "", &OPENAI_OK[..2])]);
    let err = ask(&gate, &openai(server.port), None).0.unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");

    // An error event inside an Anthropic stream.
    let server = scripted(vec![reply(
        "200 OK",
        "",
        &["event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"],
    )]);
    let anthropic = provider("scripted", ProviderKind::Anthropic, format!("http://127.0.0.1:{}", server.port));
    let err = ask(&gate, &anthropic, Some("k")).0.unwrap_err();
    assert_eq!(err.to_string(), "scripted reported an error mid-stream: Overloaded");

    // Nobody listening: a network error, after bounded retries.
    let closed = free_port();
    let err = ask(&gate, &openai(closed), None).0.unwrap_err();
    assert!(matches!(err, ProviderError::Network { .. }), "{err:?}");
}

#[test]
fn cancel_stops_a_stream_mid_answer() {
    let mut slow = reply("200 OK", "", &[]);
    slow.chunks = (0..200).map(|i| format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"t{i} \"}}}}]}}\n\n")).collect();
    slow.pause = Duration::from_millis(50);
    let server = scripted(vec![slow]);
    let gate = OutboundGate::new(false);
    let stop = AtomicBool::new(false);
    let mut pieces = 0;
    let started = Instant::now();
    let result = stream_chat(
        &gate,
        &provider("slow", ProviderKind::Openai, format!("http://127.0.0.1:{}/v1", server.port)),
        None,
        None,
        &question(),
        400,
        &|| stop.load(Ordering::SeqCst),
        &mut |delta| {
            if matches!(delta, Delta::Text(_)) {
                pieces += 1;
                if pieces == 3 {
                    stop.store(true, Ordering::SeqCst);
                }
            }
        },
    );
    assert_eq!(result.unwrap_err(), ProviderError::Cancelled);
    assert!(pieces < 10, "stopped after {pieces} pieces");
    assert!(started.elapsed() < Duration::from_secs(2), "cancel took {:?}", started.elapsed());
}

/// Ollama's `/api/chat` stream as its API documentation gives it. No Ollama
/// server is installable here, so this transcript is replayed by a loopback
/// server instead of recorded from a live one.
const OLLAMA_TRANSCRIPT: &[&str] = &[
    "{\"model\":\"llama3.2\",\"created_at\":\"2026-11-22T08:00:00.000Z\",\"message\":{\"role\":\"assistant\",\"content\":\"Red\"},\"done\":false}\n",
    "{\"model\":\"llama3.2\",\"created_at\":\"2026-11-22T08:00:00.050Z\",\"message\":{\"role\":\"assistant\",\"content\":\", green\"},\"done\":false}\n",
    "{\"model\":\"llama3.2\",\"created_at\":\"2026-11-22T08:00:00.100Z\",\"message\":{\"role\":\"assistant\",\"content\":\" and blue.\"},\"done\":false}\n",
    "{\"model\":\"llama3.2\",\"created_at\":\"2026-11-22T08:00:00.150Z\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done_reason\":\"stop\",\"done\":true,\"total_duration\":150000000,\"prompt_eval_count\":26,\"eval_count\":7}\n",
];

#[test]
fn ollama_ndjson_replayed_from_its_documented_format() {
    let mut transcript = reply("200 OK", "", OLLAMA_TRANSCRIPT);
    transcript.head = transcript.head.replace("text/event-stream", "application/x-ndjson");
    let server = scripted(vec![transcript]);
    let gate = OutboundGate::new(true); // loopback is allowed offline
    let (result, pieces) = ask(&gate, &provider("ollama", ProviderKind::Ollama, format!("http://127.0.0.1:{}", server.port)), None);
    let completion = result.unwrap();
    assert_eq!(pieces, ["Red", ", green", " and blue."]);
    assert_eq!((completion.answer.input_tokens, completion.answer.output_tokens), (26, 7));
    assert_eq!(completion.answer.finish.as_deref(), Some("stop"));
}

#[test]
fn offline_mode_refuses_a_cloud_provider_before_any_connection() {
    let gate = OutboundGate::new(true);
    let cloud = provider("openai", ProviderKind::Openai, "https://api.openai.com/v1".into());
    let started = Instant::now();
    let err = ask(&gate, &cloud, Some("sk-x")).0.unwrap_err();
    assert!(matches!(err, ProviderError::Gate(cowork::net::GateError::Offline { .. })), "{err:?}");
    assert!(started.elapsed() < Duration::from_millis(100), "refused without trying to connect");
    let log = gate.log();
    assert_eq!((log.len(), log[0].host.as_str(), log[0].refused.as_deref()), (1, "api.openai.com", Some("offline mode")));
}

/// Every file in `dir` (recursively) and every text, searched for `needle`.
fn leaks(dir: &std::path::Path, texts: &[&str], needle: &str) -> Vec<String> {
    let mut found: Vec<String> = texts.iter().filter(|t| t.contains(needle)).map(|t| format!("output: {}", &t[..t.len().min(80)])).collect();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
        {
            found.push(path.display().to_string());
        }
    }
    found
}

/// Runs `cowork ARGS --data-dir DATA` on session bus `dbus` (none: no bus),
/// feeding `stdin`; returns stdout and stderr together, asserting success.
fn run_cowork(data: &std::path::Path, dbus: Option<&str>, log: &str, args: &[&str], stdin: Option<&str>) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cowork"));
    command.args(args).arg("--data-dir").arg(data).env("COWORK_LOG", log).env_remove("DBUS_SESSION_BUS_ADDRESS");
    if let Some(address) = dbus {
        command.env("DBUS_SESSION_BUS_ADDRESS", address);
    }
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{args:?}: {text}");
    text
}

/// Stores a key with `cowork secrets set`, asks a provider that needs it, and
/// checks the key went to the server and nowhere else: not the database, the
/// providers file, the secrets file, stdout or the debug log.
fn key_reaches_only_the_provider(data: &std::path::Path, dbus: Option<&str>) -> String {
    const KEY: &str = "sk-test-7c1d4e9f0a2b5c8d";
    let server = scripted(vec![reply("200 OK", "", OPENAI_OK)]);
    std::fs::write(
        data.join("providers.json"),
        format!(r#"{{"providers": [{{"name": "keyed", "kind": "openai", "base_url": "http://127.0.0.1:{}/v1", "model": "m"}}]}}"#, server.port),
    )
    .unwrap();
    let cowork = |args: &[&str], stdin: Option<&str>| run_cowork(data, dbus, "debug", args, stdin);
    let stored = cowork(&["secrets", "set", "provider:keyed"], Some(&format!("{KEY}\n")));
    let listed = cowork(&["secrets", "list"], None);
    assert!(listed.contains("provider:keyed") && listed.contains("sk-…5c8d"), "{listed}");
    let answered = cowork(&["ask", "--provider", "keyed", "hi"], None);
    assert!(answered.contains("Hello"), "{answered}");
    let heads = server.heads.lock().clone();
    assert!(heads.iter().any(|h| h.contains(&format!("authorization: Bearer {KEY}"))), "the key reached the provider: {heads:?}");
    // Make sure the database exists too, then look everywhere for the key.
    cowork(&["delete", "--last", "15m"], None);
    assert!(data.join("cowork.db").is_file());
    let found = leaks(data, &[&stored, &listed, &answered], KEY);
    assert!(found.is_empty(), "the key leaked into {found:?}");
    stored
}

#[test]
fn a_key_in_the_encrypted_file_store_reaches_the_provider_and_nowhere_else() {
    let data = temp_dir();
    let stored = key_reaches_only_the_provider(data.path(), None);
    assert!(stored.contains("AES-256-GCM"), "{stored}");
    assert!(data.path().join("secrets.enc").is_file());
}

/// A real gnome-keyring on a private bus with its own home. `password`:
/// unlock (creating the login keyring on first start) with it; `None`: start
/// without unlocking, as after a login that did not unlock the keyring.
pub(super) fn gnome_keyring(home: &std::path::Path, address: &str, password: Option<&str>) -> Server {
    let mut command = Command::new("gnome-keyring-daemon");
    command.arg("--foreground").arg("--components=secrets");
    if password.is_some() {
        command.arg("--unlock");
    }
    let mut keyring = command
        .env("DBUS_SESSION_BUS_ADDRESS", address)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("share"))
        .env("XDG_RUNTIME_DIR", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = keyring.stdin.take().unwrap();
    if let Some(password) = password {
        stdin.write_all(password.as_bytes()).unwrap();
    }
    drop(stdin);
    Server(keyring)
}

/// What `cowork secrets list` says about where secrets are kept, on `address`.
pub(super) fn secret_store_seen(data: &std::path::Path, address: &str) -> String {
    run_cowork(data, Some(address), "warn", &["secrets", "list"], None)
}

pub(super) fn keyring_prerequisites() -> bool {
    require(super::support::have_program("gnome-keyring-daemon") && super::support::have_program("dbus-daemon"), "gnome-keyring and dbus-daemon")
}

#[test]
fn a_key_in_a_real_secret_service_gnome_keyring_reaches_the_provider_and_nowhere_else() {
    if !keyring_prerequisites() {
        return;
    }
    let home = temp_dir();
    // Nothing is activatable on this bus: the keyring below is the only one that can answer.
    let (_bus, address) = super::support::bare_session_bus(home.path());
    let _keyring = gnome_keyring(home.path(), &address, Some("test-password"));
    let data = temp_dir();
    // Ready when cowork itself says it uses the Secret Service (not a log line that merely names it).
    assert!(
        eventually(Duration::from_secs(20), || secret_store_seen(data.path(), &address).contains("secrets in the system secret store")),
        "gnome-keyring serves the Secret Service: {}",
        secret_store_seen(data.path(), &address)
    );
    let stored = key_reaches_only_the_provider(data.path(), Some(&address));
    assert!(stored.contains("stored provider:keyed (sk-…5c8d) in the system secret store"), "{stored}");
    assert!(!data.path().join("secrets.enc").exists(), "nothing fell back to the file");
}

#[test]
fn a_locked_keyring_sends_keys_to_the_encrypted_file_and_doctor_says_why() {
    if !keyring_prerequisites() {
        return;
    }
    let home = temp_dir();
    let (_bus, address) = super::support::bare_session_bus(home.path());
    let data = temp_dir();
    // First login: the login keyring is created and unlocked, a key is stored
    // (which writes the keyring to disk); then the daemon ends.
    {
        let _keyring = gnome_keyring(home.path(), &address, Some("test-password"));
        assert!(
            eventually(Duration::from_secs(20), || secret_store_seen(data.path(), &address).contains("secrets in the system secret store")),
            "the login keyring was created"
        );
        let stored = run_cowork(data.path(), Some(&address), "warn", &["secrets", "set", "provider:earlier"], Some("sk-earlier-0000000000"));
        assert!(stored.contains("in the system secret store"), "{stored}");
        assert!(eventually(Duration::from_secs(10), || home.path().join("share/keyrings/login.keyring").is_file()), "the login keyring is on disk");
    }
    // Next login without unlocking: the keyring exists but is locked.
    let _keyring = gnome_keyring(home.path(), &address, None);
    assert!(
        eventually(Duration::from_secs(20), || secret_store_seen(data.path(), &address).contains("the default keyring is locked")),
        "a locked keyring is named: {}",
        secret_store_seen(data.path(), &address)
    );
    let stored = key_reaches_only_the_provider(data.path(), Some(&address));
    assert!(stored.contains("AES-256-GCM") && stored.contains("the default keyring is locked"), "{stored}");
    assert!(data.path().join("secrets.enc").is_file(), "the key went to the encrypted file");
    let doctor = Command::new(env!("CARGO_BIN_EXE_cowork"))
        .args(["doctor", "--json", "--data-dir"])
        .arg(data.path())
        .arg("--models-dir")
        .arg(super::support::models_dir())
        .env("DBUS_SESSION_BUS_ADDRESS", &address)
        .env_remove("DISPLAY")
        .env("COWORK_LOG", "warn")
        .output()
        .unwrap();
    let checks: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap_or_else(|err| panic!("doctor --json: {err}: {}", String::from_utf8_lossy(&doctor.stdout)));
    let secrets = checks.as_array().unwrap().iter().find(|c| c["area"] == "secrets").expect("doctor checks the secret store");
    assert_eq!(secrets["status"], "warn", "{secrets}");
    let detail = secrets["detail"].as_str().unwrap();
    assert!(detail.contains("the default keyring is locked") && detail.contains("secrets.enc"), "{detail}");
}

#[track_caller]
fn wait_event<T>(events: &crossbeam_channel::Receiver<cowork::events::AppEvent>, mut pick: impl FnMut(&cowork::events::AppEvent) -> Option<T>) -> T {
    super::support::wait_for(events, Duration::from_secs(20), |e| pick(e)).expect("the event came")
}

fn chat(ask_id: i64, text: &str) -> cowork::agent::ChatRequest {
    use cowork::ids::next_id;
    let thread = cowork::records::ChatThread { thread_id: 1, title: "t".into(), updated_at_millis: 0 };
    cowork::agent::ChatRequest::new(thread, true, ask_id, next_id(), text)
}

/// A data directory whose only provider is `provider_json`, with `settings`
/// stored and one captured window titled `window_title`.
fn cloud_fixture(provider_json: &str, settings: &[(&str, &str)], window_title: &str) -> (tempfile::TempDir, cowork::config::Paths) {
    let data = temp_dir();
    std::fs::write(data.path().join("providers.json"), format!(r#"{{"providers": [{provider_json}]}}"#)).unwrap();
    let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
    for (key, value) in settings {
        cowork::store::set_setting(&conn, key, value, 0).unwrap();
    }
    let session = cowork::records::ActivitySession {
        session_id: 1,
        app: "XTerm".into(),
        title: window_title.into(),
        window_id: 1,
        started_at_millis: cowork::ids::now_millis() - 60_000,
        ..Default::default()
    };
    cowork::capture::db::upsert_session(&conn, &session).unwrap();
    let paths = cowork::config::Paths::resolve(Some(data.path().to_owned()), Some(data.path().join("models"))).unwrap();
    (data, paths)
}

/// Store and llm workers (no capture, no local model) on `paths`.
fn start_brains(paths: &cowork::config::Paths) -> (cowork::workers::Workers, crossbeam_channel::Receiver<cowork::events::AppEvent>) {
    super::support::start_workers(paths)
}

#[test]
fn cloud_answers_ask_consent_respect_budgets_across_restarts_and_record_cost() {
    use cowork::events::AppEvent;
    use cowork::records::MessageStatus;
    use cowork::agent::AgentCommand;
    let server = scripted(vec![reply("200 OK", "", &[
        "data: {\"choices\":[{\"delta\":{\"content\":\"You were \"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"budgeting.\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":40}}\n\n",
        "data: [DONE]\n\n",
    ])]);
    let (data, paths) = cloud_fixture(
        &format!(r#"{{"name": "scripted", "kind": "openai", "base_url": "http://127.0.0.1:{}/v1", "model": "big-model", "price_in_per_mtok": 2.0, "price_out_per_mtok": 8.0}}"#, server.port),
        &[("brains.prefer", "cloud"), ("brains.tiers", "scripted"), ("budget.daily_usd", "0.004"), ("budget.per_interaction_usd", "0.01")],
        "Budget 2027.ods - mail dana@example.com",
    );
    let start = || start_brains(&paths);
    let (workers, events) = start();

    // First cloud question with captured context: consent first, nothing sent.
    workers.agent.commands.send(AgentCommand::Chat(chat(100, "What was I doing?"))).unwrap();
    let (preview, mut request) = wait_event(&events, |e| match e {
        AppEvent::Agent(AgentEvent::ConsentNeeded { preview, request, provider, .. }) if provider == "scripted" => Some((preview.clone(), (**request).clone())),
        _ => None,
    });
    assert!(preview.contains("Budget 2027.ods") && preview.contains("[email]") && !preview.contains("dana@"), "{preview}");
    assert_eq!(server.hits.load(Ordering::SeqCst), 0, "nothing left before consent");

    // "This time only": the redacted context goes with the question.
    request.consent_once = true;
    let answer_id = request.answer_id;
    workers.agent.commands.send(AgentCommand::Chat(request)).unwrap();
    let reason = wait_event(&events, |e| match e {
        AppEvent::Agent(AgentEvent::Routed { answer_id: id, answered_by, reason, .. }) if *id == answer_id => {
            assert_eq!(answered_by, "scripted · big-model");
            Some(reason.clone())
        }
        _ => None,
    });
    assert!(reason.contains("prefer cloud"), "{reason}");
    let cost = wait_event(&events, |e| match e {
        AppEvent::Agent(AgentEvent::AnswerCost { answer_id: id, usd }) if *id == answer_id => Some(*usd),
        _ => None,
    });
    assert!((cost - (900.0 * 2.0 + 40.0 * 8.0) / 1e6).abs() < 1e-12, "{cost}");
    wait_event(&events, |e| matches!(e, AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: id, status: MessageStatus::Done, .. }) if *id == answer_id).then_some(()));
    let sent = server.heads.lock()[0].clone();
    assert!(sent.contains("Budget 2027.ods") && !sent.contains("dana@example.com"), "{sent}");

    // A second question could pass the daily cap ($0.004: $0.0021 spent, up to $0.0034 more): refused, nothing sent.
    assert!(workers.flush_store(Duration::from_secs(5)));
    let check_refused = |workers: &cowork::workers::Workers, events: &crossbeam_channel::Receiver<AppEvent>, ask: i64| {
        let mut second = chat(ask, "And now?");
        second.consent_once = true;
        let id = second.answer_id;
        workers.agent.commands.send(AgentCommand::Chat(second)).unwrap();
        wait_event(events, |e| match e {
            AppEvent::Agent(AgentEvent::AnswerFinished { answer_id, status: MessageStatus::Failed, error: Some(error), .. }) if *answer_id == id => Some(error.clone()),
            _ => None,
        })
    };
    let error = check_refused(&workers, &events, 200);
    assert!(error.contains("over your daily budget"), "{error}");
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
    workers.shutdown(Duration::from_secs(5));

    // After a restart the spending is still there.
    let (workers, events) = start();
    let error = check_refused(&workers, &events, 300);
    assert!(error.contains("over your daily budget"), "after a restart: {error}");
    // Try harder from the only tier: there is no smarter model, and it says so.
    let mut harder = chat(100, "What was I doing?");
    harder.try_harder_from = Some(cowork::brains::Target::Cloud(0));
    harder.is_retry = true;
    let id = harder.answer_id;
    workers.agent.commands.send(AgentCommand::Chat(harder)).unwrap();
    let error = wait_event(&events, |e| match e {
        AppEvent::Agent(AgentEvent::AnswerFinished { answer_id, error: Some(error), .. }) if *answer_id == id => Some(error.clone()),
        _ => None,
    });
    assert!(error.contains("no smarter model"), "{error}");
    workers.shutdown(Duration::from_secs(5));
    let conn = cowork::store::open_read_only(&data.path().join("cowork.db")).unwrap();
    assert!((cowork::brains::budget::ask_cost(&conn, 100).unwrap() - cost).abs() < 1e-12);
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
}

#[test]
fn without_consent_the_question_goes_alone_and_the_chip_says_so() {
    use cowork::events::AppEvent;
    use cowork::agent::AgentCommand;
    let server = scripted(vec![reply("200 OK", "", OPENAI_OK)]);
    let (_data, paths) = cloud_fixture(
        &format!(r#"{{"name": "scripted", "kind": "openai", "base_url": "http://127.0.0.1:{}/v1", "model": "m"}}"#, server.port),
        &[("brains.prefer", "cloud"), ("brains.tiers", "scripted"), ("consent.scripted.activity", "never")],
        "secret-project notes",
    );
    let (workers, events) = start_brains(&paths);
    workers.agent.commands.send(AgentCommand::Chat(chat(1, "hello"))).unwrap();
    let chip = wait_event(&events, |e| match e {
        AppEvent::Agent(AgentEvent::ContextAttached { context, .. }) => Some(context.clone()),
        _ => None,
    });
    assert!(chip.contains("not sent to scripted"), "{chip}");
    wait_event(&events, |e| matches!(e, AppEvent::Agent(AgentEvent::AnswerFinished { .. })).then_some(()));
    workers.shutdown(Duration::from_secs(5));
    let sent = server.heads.lock()[0].clone();
    assert!(!sent.contains("secret-project"), "{sent}");
    assert!(sent.contains("hello"));
}

/// llama.cpp's server with the same default model (Qwen2.5-Coder-0.5B), as the agent's brain
/// through the OpenAI format: the model emits a real tool call and cowork executes it, decided
/// and audited like any other. (llama.cpp passes this model's calls on as the answer's text —
/// its parser wants `<tool_call>` tags the model does not write — and cowork reads an answer
/// that is only a call to an offered tool as that call.)
#[test]
fn llama_cpp_with_the_default_model_emits_a_tool_call_that_the_agent_runs() {
    use super::llm_real::{agent_calls, agent_steps, captured_morning, cowork_at_morning, qwen};
    let Some(python) = python() else {
        require(false, "COWORK_TEST_PYTHON with xllamacpp (scripts/test installs it)");
        return;
    };
    if !require(qwen().is_file(), "the Qwen chat model") || !require(super::support::have_program("faketime"), "faketime") {
        return;
    }
    let (_server, port) = llama_server_with(&python, None, &qwen(), 4096, 2, true);
    let data = captured_morning();
    std::fs::write(
        data.path().join("providers.json"),
        format!(r#"{{"providers": [{{"name": "llamacpp", "kind": "openai", "base_url": "http://127.0.0.1:{port}/v1", "model": "qwen"}}]}}"#),
    )
    .unwrap();
    let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
    for (key, value) in [("brains.prefer", "cloud"), ("brains.tiers", "llamacpp"), ("consent.llamacpp.activity", "always")] {
        cowork::store::set_setting(&conn, key, value, 0).unwrap();
    }
    drop(conn);
    // Named, because through llama.cpp this model calls a tool only when asked to (asked
    // "which flight did I look at?" it answers from nothing); it then repeats the call until
    // the "stuck" guardrail pauses the task, which is fine here.
    let out = cowork_at_morning(data.path(), &["ask", "--agent", "Use the recent_activity tool to find which flight I looked at."]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("exit {:?}; steps (prompt tokens, model ms): {:?}\nanswer: {}", out.status.code(), agent_steps(&stderr), String::from_utf8_lossy(&out.stdout));
    assert!(!stderr.contains("panicked"), "{stderr}");
    let calls = agent_calls(data.path());
    let (tool, arguments, status, output) = calls.first().expect("llama.cpp's model called a tool");
    assert_eq!(status, "done", "{tool} {arguments}: {output}");
    assert!(output.contains("Lufthansa") || output.contains("billing-service"), "the captured morning came back: {output}");
    let audit = cowork::agent::store::audit(&cowork::store::open_read_only(&data.path().join("cowork.db")).unwrap(), 10).unwrap();
    assert!(audit.iter().any(|a| &a.tool == tool && a.decision == "ran" && a.decided_by == "policy: default"), "safe: run at once, audited: {audit:?}");
}
