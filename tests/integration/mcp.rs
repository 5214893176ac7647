//! MCP against real servers: the reference server-everything over stdio and
//! streamable HTTP driven by the agent (a scripted model on loopback asks for
//! the calls), and a Python server written here with the official `mcp`
//! package (its FastMCP, now `MCPServer`) for timeouts, a crash and Reconnect,
//! and a server that writes garbage on stdout.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cowork::agent::AgentCommand;
use cowork::agent::events::{AgentEvent, ApprovalChoice, CallStatus};
use cowork::events::AppEvent;
use cowork::mcp::events::{McpEvent, McpServerStatus, McpServerView};
use cowork::mcp::worker::{McpClient, McpCommand};
use serde_json::json;

use super::agent::{answer, body, calls, fixture, task, wait_call};
use super::providers::{free_port, python, scripted};
use super::support::{ChildGuard, eventually, have_program, require, temp_dir, wait_for};

fn everything() -> Option<String> {
    let entry = std::env::var("COWORK_TEST_MCP_EVERYTHING").unwrap_or_default();
    require(!entry.is_empty() && have_program("node"), "node and @modelcontextprotocol/server-everything").then_some(entry)
}

/// Waits for a report in which every named server has left "starting".
#[track_caller]
fn settled(events: &crossbeam_channel::Receiver<AppEvent>, names: &[&str]) -> Vec<McpServerView> {
    wait_for(events, Duration::from_secs(60), |e| match e {
        AppEvent::Mcp(McpEvent::McpServers(servers))
            if names.iter().all(|n| servers.iter().any(|s| s.name == *n && s.status != McpServerStatus::Starting)) =>
        {
            Some(servers.clone())
        }
        _ => None,
    })
    .expect("the MCP servers started")
}

fn server<'a>(views: &'a [McpServerView], name: &str) -> &'a McpServerView {
    views.iter().find(|s| s.name == name).unwrap()
}

/// Also: an image result reaches the chat decoded and is kept in cowork.db, and
/// the server's request for input (elicitation) is a form the user answers —
/// Accept sends the checked content, Decline sends nothing.
#[test]
fn the_agent_calls_server_everything_over_stdio_and_http_with_progress_and_stop() {
    let Some(entry) = everything() else { return };
    let port = free_port();
    let _http = ChildGuard(
        Command::new("node").arg(&entry).arg("streamableHttp").env("PORT", port.to_string()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap(),
    );
    assert!(eventually(Duration::from_secs(30), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()), "the HTTP server listens");
    let model = scripted(vec![
        calls(&[
            ("mcp__everything__echo", json!({"message": "hello over stdio"})),
            ("mcp__remote__get-sum", json!({"a": 2, "b": 3})),
            ("mcp__remote__get-tiny-image", json!({})),
        ]),
        calls(&[("mcp__everything__trigger-elicitation-request", json!({}))]),
        calls(&[("mcp__everything__trigger-elicitation-request", json!({}))]),
        calls(&[("mcp__everything__trigger-long-running-operation", json!({"duration": 1, "steps": 4}))]),
        calls(&[("mcp__everything__trigger-long-running-operation", json!({"duration": 60, "steps": 60}))]),
        answer("Done."),
    ]);
    let (data, paths) = fixture(&model, "Terminal", "");
    let config = json!({"mcpServers": {
        "everything": {"command": "node", "args": [entry, "stdio"]},
        "remote": {"url": format!("http://127.0.0.1:{port}/mcp")}
    }});
    std::fs::write(data.path().join("mcp-servers.json"), config.to_string()).unwrap();
    let (workers, events) = super::support::start_workers(&paths);

    let views = settled(&events, &["everything", "remote"]);
    for name in ["everything", "remote"] {
        let view = server(&views, name);
        assert_eq!(view.status, McpServerStatus::Running, "{view:?}");
        assert!(!view.protocol_version.is_empty() && view.tools.iter().any(|t| t.0 == "echo"), "{view:?}");
        // echo says it is read-only; an untrusted server cannot make it run unasked.
        let echo = view.tools.iter().find(|t| t.0 == "echo").unwrap();
        assert_eq!(echo.3, "sensitive");
    }
    let lock = cowork::mcp::orphans::lock_path(data.path(), "everything");
    assert!(lock.is_file(), "a stdio server has a lockfile");
    assert!(!cowork::mcp::orphans::lock_path(data.path(), "remote").exists());
    assert!(server(&views, "everything").stderr.iter().any(|l| l.contains("Starting")), "its stderr is kept: {:?}", server(&views, "everything").stderr);

    let request = task("echo something and add two numbers");
    let thread_id = request.thread.thread_id;
    workers.agent.commands.send(AgentCommand::Chat(request)).unwrap();
    let echo = wait_call(&events, |c| c.tool == "mcp__everything__echo" && c.status == CallStatus::Waiting);
    let sum = wait_call(&events, |c| c.tool == "mcp__remote__get-sum" && c.status == CallStatus::Waiting);
    let image = wait_call(&events, |c| c.tool == "mcp__remote__get-tiny-image" && c.status == CallStatus::Waiting);
    assert_eq!((echo.risk.as_str(), sum.risk.as_str()), ("sensitive", "sensitive"));
    for call in [&echo, &sum, &image] {
        workers.agent.commands.send(AgentCommand::Decide { call_id: call.call_id, choice: ApprovalChoice::Once }).unwrap();
    }
    let echoed = wait_call(&events, |c| c.call_id == echo.call_id && c.status.settled());
    assert_eq!(echoed.status, CallStatus::Done, "{echoed:?}");
    assert!(echoed.output.as_deref().unwrap_or_default().contains("hello over stdio"), "{echoed:?}");
    let summed = wait_call(&events, |c| c.call_id == sum.call_id && c.status.settled());
    assert!(summed.output.as_deref().unwrap_or_default().contains('5'), "{summed:?}");
    // The image: named for the model, decoded for the chat (server-everything's 20 × 20 logo).
    let pictured = wait_call(&events, |c| c.call_id == image.call_id && c.status.settled());
    assert!(pictured.output.as_deref().unwrap_or_default().contains("[image image/png, "), "{:?}", pictured.output);
    assert_eq!(pictured.images.len(), 1);
    assert_eq!(pictured.images[0].shown.as_ref().map(|t| (t.width, t.height)), Ok((20, 20)));

    // The server asks for input: a form from its schema; Accept sends what the user filled in.
    for (round, accept) in [(0, true), (1, false)] {
        let asking = wait_call(&events, |c| c.tool == "mcp__everything__trigger-elicitation-request" && c.status == CallStatus::Waiting);
        workers.agent.commands.send(AgentCommand::Decide { call_id: asking.call_id, choice: ApprovalChoice::Once }).unwrap();
        let request = wait_for(&events, Duration::from_secs(30), |e| match e {
            AppEvent::Mcp(McpEvent::Elicitation(request)) => Some(request.clone()),
            _ => None,
        })
        .expect("the form came");
        assert_eq!((request.server.as_str(), round), ("everything", round));
        assert!(request.form.fields.iter().any(|f| f.name == "name" && f.required), "{:?}", request.form);
        let answer = if accept {
            let mut inputs = request.form.initial();
            // The schema's defaults fill the form; the required name is the user's.
            assert!(request.form.answer(&inputs).is_err(), "the required name is empty");
            inputs.insert("name".into(), cowork::mcp::elicit::Input::Text("Ada Lovelace".into()));
            cowork::mcp::elicit::Answer::Accept(request.form.answer(&inputs).unwrap())
        } else {
            cowork::mcp::elicit::Answer::Decline
        };
        workers.mcp.commands.send(McpCommand::Elicited { id: request.id, answer }).unwrap();
        wait_for(&events, Duration::from_secs(10), |e| matches!(e, AppEvent::Mcp(McpEvent::ElicitationClosed { id }) if *id == request.id).then_some(())).expect("the form closed");
        let answered = wait_call(&events, |c| c.call_id == asking.call_id && c.status.settled());
        let output = answered.output.unwrap_or_default();
        if accept {
            assert!(output.contains("- Name: Ada Lovelace") && output.contains("- Favorite Integer: 42"), "{output}");
        } else {
            assert!(output.contains("declined") && !output.contains("Ada"), "{output}");
        }
    }

    // A long call: its progress reaches the chip.
    let long = wait_call(&events, |c| c.tool == "mcp__everything__trigger-long-running-operation" && c.status == CallStatus::Waiting);
    workers.agent.commands.send(AgentCommand::Decide { call_id: long.call_id, choice: ApprovalChoice::Once }).unwrap();
    let progress = wait_for(&events, Duration::from_secs(30), |e| match e {
        AppEvent::Mcp(McpEvent::ToolProgress { call_id, text }) if *call_id == long.call_id => Some(text.clone()),
        _ => None,
    })
    .expect("progress came");
    assert!(progress.ends_with("/4"), "{progress}");
    let done = wait_call(&events, |c| c.call_id == long.call_id && c.status.settled());
    assert!(done.output.as_deref().unwrap_or_default().contains("Long running operation completed"), "{done:?}");

    // Stop cancels a running call on the server at once.
    let longer = wait_call(&events, |c| c.tool == "mcp__everything__trigger-long-running-operation" && c.status == CallStatus::Waiting && c.call_id != long.call_id);
    workers.agent.commands.send(AgentCommand::Decide { call_id: longer.call_id, choice: ApprovalChoice::Once }).unwrap();
    wait_for(&events, Duration::from_secs(30), |e| matches!(e, AppEvent::Mcp(McpEvent::ToolProgress { call_id, .. }) if *call_id == longer.call_id).then_some(())).expect("progress");
    let stopped_at = Instant::now();
    workers.stop_epoch.fetch_add(1, Ordering::SeqCst);
    let cut = wait_call(&events, |c| c.call_id == longer.call_id && c.status.settled());
    assert_eq!(cut.status, CallStatus::Cancelled, "{cut:?}");
    assert!(stopped_at.elapsed() < Duration::from_secs(3), "{:?}", stopped_at.elapsed());

    // The model saw the servers' tools, marked as theirs.
    let first = body(&model, 0);
    let offered: Vec<&serde_json::Value> = first["tools"].as_array().unwrap().iter().filter(|t| t["function"]["name"].as_str().unwrap_or_default().starts_with("mcp__")).collect();
    assert!(offered.iter().any(|t| t["function"]["name"] == "mcp__remote__get-sum"), "{first}");
    assert!(offered.iter().all(|t| t["function"]["description"].as_str().unwrap().starts_with("[MCP server ")));
    workers.shutdown(Duration::from_secs(5));
    assert!(!lock.exists(), "a stopped server's lockfile goes");

    let conn = cowork::store::open_read_only(&data.path().join("cowork.db")).unwrap();
    // (Each call that waited has a "waiting" entry before its outcome.)
    let audit = cowork::agent::store::audit(&conn, 50).unwrap();
    assert!(audit.iter().any(|e| e.tool == "mcp__everything__echo" && e.decision == "ran" && e.decided_by == "user"), "{audit:?}");
    // Approving a call records the definition it was approved with (the rug-pull check's anchor).
    let anchored = cowork::agent::store::allowed_mcp_tool(&conn, "mcp__everything__echo").unwrap().expect("recorded");
    assert_eq!(anchored.description, "Echoes back the input string");
    // The image is kept whole with its call, and comes back with the chat.
    let kept = cowork::agent::store::thread_calls(&conn, thread_id, 0).unwrap();
    let kept = kept.iter().find(|c| c.call_id == image.call_id).expect("the image call is kept");
    assert_eq!(kept.images, pictured.images);
}

/// server-everything's resources and prompts reach the chat: the worker lists
/// them, reads one for the next message and fills a prompt with its
/// arguments; the attached text reaches the model as data from its server,
/// and the question it rides in counts as untrusted.
#[test]
fn resources_are_read_and_attached_and_prompts_are_filled_in_from_server_everything() {
    let Some(entry) = everything() else { return };
    let model = scripted(vec![answer("It is about the architecture.")]);
    let (data, paths) = fixture(&model, "Terminal", "");
    let config = json!({"mcpServers": {"everything": {"command": "node", "args": [entry, "stdio"]}}});
    std::fs::write(data.path().join("mcp-servers.json"), config.to_string()).unwrap();
    let (workers, events) = super::support::start_workers(&paths);
    let views = settled(&events, &["everything"]);
    let view = server(&views, "everything");
    let resource = view.resources.iter().find(|r| r.uri.ends_with("/architecture.md")).unwrap_or_else(|| panic!("{:?}", view.resources)).clone();
    assert_eq!(resource.mime, "text/markdown");
    let prompt = view.prompts.iter().find(|p| p.name == "args-prompt").unwrap_or_else(|| panic!("{:?}", view.prompts));
    assert_eq!(prompt.arguments, vec![("city".to_owned(), true), ("state".to_owned(), false)]);

    // "/args-prompt Paris state=TX" as the chat input reads it, filled in by the server.
    let used = cowork::mcp::slash::parse("/args-prompt Paris state=TX", &[("everything", view.prompts.as_slice())]).unwrap().unwrap();
    workers.mcp.commands.send(McpCommand::GetPrompt { server: used.server, name: used.name, arguments: used.arguments }).unwrap();
    let filled = wait_for(&events, Duration::from_secs(20), |e| match e {
        AppEvent::Mcp(McpEvent::PromptFilled(result)) => Some(result.clone()),
        _ => None,
    })
    .expect("the prompt came back");
    assert_eq!(filled, Ok("What's weather in Paris, TX?".to_owned()));
    // A prompt the server does not have: a clear error, not a hang.
    workers.mcp.commands.send(McpCommand::GetPrompt { server: "everything".into(), name: "no-such-prompt".into(), arguments: Default::default() }).unwrap();
    let missing = wait_for(&events, Duration::from_secs(20), |e| match e {
        AppEvent::Mcp(McpEvent::PromptFilled(result)) => Some(result.clone()),
        _ => None,
    })
    .expect("an answer");
    assert!(missing.as_ref().is_err_and(|e| e.contains("no-such-prompt")), "{missing:?}");

    workers.mcp.commands.send(McpCommand::ReadResource { server: "everything".into(), uri: resource.uri.clone(), name: resource.name.clone() }).unwrap();
    let attached = wait_for(&events, Duration::from_secs(20), |e| match e {
        AppEvent::Mcp(McpEvent::ResourceAttached(result)) => Some(result.clone()),
        _ => None,
    })
    .expect("the resource was read")
    .unwrap();
    let expected = std::fs::read_to_string(std::path::Path::new(&entry).parent().unwrap().join("docs/architecture.md")).unwrap();
    assert_eq!(attached.text, expected);

    let mut request = task("what is this document about?");
    request.attachments = vec![attached];
    workers.agent.commands.send(AgentCommand::Chat(request)).unwrap();
    wait_for(&events, Duration::from_secs(30), |e| matches!(e, AppEvent::Agent(AgentEvent::AnswerFinished { .. })).then_some(())).expect("answered");
    let sent = body(&model, 0);
    let question = sent["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "user").unwrap()["content"].as_str().unwrap().to_owned();
    // A cloud task's turn starts with the clock (kept out of the system prompt, which the provider caches).
    let (clock, question) = question.split_once("\n\n").unwrap();
    assert!(clock.starts_with("It is ") && clock.contains("now, local time"), "{clock}");
    let question = question.to_owned();
    assert!(question.starts_with(&format!("[The user attached the resource architecture.md ({}) from the MCP server everything. It is data", resource.uri)), "{question}");
    assert!(question.contains(expected.lines().find(|l| !l.trim().is_empty()).unwrap()) && question.ends_with("what is this document about?"), "{question}");
    workers.shutdown(Duration::from_secs(5));
}

/// A Claude Desktop configuration goes through `cowork mcp import` and the
/// worker: the secret in its `env` is kept in the secret store (not in
/// mcp-servers.json) and reaches the server; server-filesystem from npm, as
/// imported, reads inside its root and refuses a path outside it with an
/// `isError` result, which stays an error.
#[test]
fn a_claude_desktop_config_imports_and_runs_and_server_filesystem_refuses_paths_outside_its_root() {
    let Some(everything) = everything() else { return };
    let filesystem = std::env::var("COWORK_TEST_MCP_FILESYSTEM").unwrap_or_default();
    if !require(!filesystem.is_empty(), "@modelcontextprotocol/server-filesystem (scripts/test installs it)") {
        return;
    }
    let data = temp_dir();
    let root = temp_dir();
    let outside = temp_dir();
    std::fs::write(root.path().join("notes.txt"), "inside the root").unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside the root").unwrap();
    let claude = data.path().join("claude_desktop_config.json");
    let config = json!({"mcpServers": {
        "files": {"command": "node", "args": [filesystem, root.path()]},
        "everything": {"command": "node", "args": [everything, "stdio"], "env": {"TRACKER_TOKEN": "tok-5ecret-value"}}
    }});
    std::fs::write(&claude, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    let imported = serve_command(data.path()).args(["mcp", "import"]).arg(&claude).output().unwrap();
    assert!(imported.status.success(), "{}", String::from_utf8_lossy(&imported.stderr));
    let stdout = String::from_utf8_lossy(&imported.stdout);
    assert!(stdout.contains("files") && stdout.contains("everything"), "{stdout}");
    let saved = std::fs::read_to_string(data.path().join("mcp-servers.json")).unwrap();
    assert!(!saved.contains("tok-5ecret-value") && saved.contains("TRACKER_TOKEN"), "{saved}");

    let (sink, events) = super::support::test_sink();
    let mut mcp = cowork::mcp::worker::spawn_mcp(data.path().to_owned(), sink.narrow(), cowork::runtime::RestartPolicy::default()).unwrap();
    let views = settled(&events, &["files", "everything"]);
    assert_eq!(server(&views, "files").status, McpServerStatus::Running, "{views:?}");
    assert_eq!(server(&views, "everything").status, McpServerStatus::Running, "{views:?}");
    let client = McpClient { commands: mcp.commands.clone() };
    let never = AtomicBool::new(false);
    let call = |server: &str, tool: &str, args: serde_json::Value| client.call(server, tool, args, 1, &never, Duration::from_secs(20));
    let env = call("everything", "get-env", json!({}));
    assert!(env.content.contains("tok-5ecret-value"), "the secret reached the server: {}", env.content);
    let inside = call("files", "read_text_file", json!({"path": root.path().join("notes.txt")}));
    assert_eq!((inside.content.as_str(), inside.is_error), ("inside the root", false));
    let refused = call("files", "read_text_file", json!({"path": outside.path().join("secret.txt")}));
    assert!(refused.is_error && refused.content.contains("outside allowed directories") && !refused.content.contains("outside the root"), "{refused:?}");
    let escaped = call("files", "read_text_file", json!({"path": format!("{}/../{}/secret.txt", root.path().display(), outside.path().file_name().unwrap().to_string_lossy())}));
    assert!(escaped.is_error, "a path that climbs out is refused too: {escaped:?}");
    assert!(mcp.shutdown(McpCommand::Shutdown, Duration::from_secs(5)));
}

/// Whether the Browser can run here (a skip otherwise, which a full run refuses).
fn browser_ready() -> bool {
    let playwright = std::env::var("COWORK_PLAYWRIGHT_MCP").unwrap_or_default();
    require(!playwright.is_empty() && have_program("node") && std::path::Path::new("/usr/bin/chromium").exists(), "node, @playwright/mcp and Debian chromium")
}

/// `dir` served on loopback (Python's http.server): its port and the server.
fn serve_site(dir: &std::path::Path) -> (u16, ChildGuard) {
    let port = free_port();
    let web = ChildGuard(
        Command::new("python3").args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1"]).current_dir(dir).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap(),
    );
    assert!(eventually(Duration::from_secs(10), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()));
    (port, web)
}

/// The built-in Browser: Playwright's MCP server driving Debian's Chromium,
/// headless here, with its profile under the data directory, against pages
/// on loopback. Through the agent, opening a page is sensitive and typing
/// with submit is dangerous (each waits for the user; the chat's log gets
/// the page title); through the worker it clicks a link and submits a form.
#[test]
fn the_builtin_browser_opens_clicks_and_types_in_chromium_and_submitting_is_dangerous() {
    if !browser_ready() {
        return;
    }
    let site = temp_dir();
    std::fs::write(
        site.path().join("index.html"),
        r#"<html><head><title>Loopback Shop</title></head><body><h1>Shop</h1>
<form action="/done.html"><input name="q" aria-label="Query"><button type="submit">Search</button></form>
<a href="/about.html">About us</a></body></html>"#,
    )
    .unwrap();
    std::fs::write(site.path().join("about.html"), "<html><head><title>About Loopback</title></head><body>About page</body></html>").unwrap();
    std::fs::write(site.path().join("done.html"), "<html><head><title>Results</title></head><body>Results</body></html>").unwrap();
    let (port, _web) = serve_site(site.path());
    let home = format!("http://127.0.0.1:{port}/index.html");
    let model = scripted(vec![
        calls(&[("mcp__browser__browser_navigate", json!({"url": home}))]),
        calls(&[("mcp__browser__browser_type", json!({"element": "Query", "target": "e3", "text": "shoes", "submit": true}))]),
        answer("I opened the shop."),
    ]);
    let (data, paths) = fixture(&model, "Terminal", "");
    std::fs::write(data.path().join("mcp-servers.json"), json!({"mcpServers": {"browser": {"builtin": "browser"}}}).to_string()).unwrap();
    let (workers, events) = super::support::start_workers(&paths);
    let views = settled(&events, &["browser"]);
    let view = server(&views, "browser");
    assert_eq!(view.status, McpServerStatus::Running, "{view:?}");
    assert!(view.endpoint.starts_with("built-in"), "{view:?}");

    let request = task("open the shop");
    workers.agent.commands.send(AgentCommand::Chat(request)).unwrap();
    let open = wait_call(&events, |c| c.tool == "mcp__browser__browser_navigate" && c.status == CallStatus::Waiting);
    assert_eq!(open.risk, "sensitive");
    workers.agent.commands.send(AgentCommand::Decide { call_id: open.call_id, choice: ApprovalChoice::Once }).unwrap();
    let opened = wait_call(&events, |c| c.call_id == open.call_id && c.status.settled());
    let page = opened.output.clone().unwrap_or_default();
    assert_eq!(opened.status, CallStatus::Done, "{page}");
    assert_eq!(cowork::mcp::browser::page_title(&page), Some("Loopback Shop"), "{page}");
    let submit = wait_call(&events, |c| c.tool == "mcp__browser__browser_type" && c.status == CallStatus::Waiting);
    assert_eq!(submit.risk, "dangerous", "typing with submit sends a form");
    workers.agent.commands.send(AgentCommand::Decide { call_id: submit.call_id, choice: ApprovalChoice::Deny { reason: "not now".into() } }).unwrap();
    wait_for(&events, Duration::from_secs(30), |e| matches!(e, AppEvent::Agent(AgentEvent::AnswerFinished { .. })).then_some(())).expect("answered");

    // The same browser through the worker: the page's own refs from its snapshot.
    let client = McpClient { commands: workers.mcp.commands.clone() };
    let never = AtomicBool::new(false);
    let call = |tool: &str, args: serde_json::Value| client.call("browser", tool, args, 1, &never, Duration::from_secs(60));
    let reference = |role: &str, name: &str| {
        let snapshot = call("browser_snapshot", json!({})).content;
        let pattern = regex::Regex::new(&format!(r#"{role} "{name}".*\[ref=([a-z0-9]+)\]"#)).unwrap();
        pattern.captures(&snapshot).map(|c| c[1].to_owned()).unwrap_or_else(|| panic!("no {role} {name} in {snapshot}"))
    };
    let link = reference("link", "About us");
    let clicked = call("browser_click", json!({"element": "About us link", "target": link}));
    assert_eq!(cowork::mcp::browser::page_title(&clicked.content), Some("About Loopback"), "{}", clicked.content);
    call("browser_navigate_back", json!({}));
    let query = reference("textbox", "Query");
    let typed = call("browser_type", json!({"element": "Query", "target": query, "text": "shoes", "submit": true}));
    let after = call("browser_snapshot", json!({})).content;
    assert!(after.contains("done.html?q=shoes") || typed.content.contains("done.html?q=shoes"), "{}\n{after}", typed.content);
    assert!(data.path().join("browser/profile").is_dir(), "the profile lives under the data directory");
    workers.shutdown(Duration::from_secs(10));
}

/// Offline mode reaches a running Browser: when it flips, the Browser starts
/// again behind the proxy that does not exist (a page off loopback fails, a
/// loopback page still opens), and again without it when it flips back. The
/// worker has its own gate: the process's stays as other tests expect it.
#[test]
fn the_builtin_browser_starts_again_behind_the_dead_proxy_when_offline_mode_flips() {
    if !browser_ready() {
        return;
    }
    let site = temp_dir();
    std::fs::write(site.path().join("index.html"), "<html><head><title>Still Here</title></head><body>loopback</body></html>").unwrap();
    let (port, _web) = serve_site(site.path());
    let data = temp_dir();
    std::fs::write(data.path().join("mcp-servers.json"), json!({"mcpServers": {"browser": {"builtin": "browser"}}}).to_string()).unwrap();
    let gate: &'static cowork::net::OutboundGate = Box::leak(Box::new(cowork::net::OutboundGate::new(false)));
    let (sink, events) = super::support::test_sink();
    let mut mcp = cowork::mcp::worker::spawn_mcp_with_gate(data.path().to_owned(), sink.narrow(), cowork::runtime::RestartPolicy::default(), gate).unwrap();
    assert_eq!(server(&settled(&events, &["browser"]), "browser").status, McpServerStatus::Running);
    // The running server's command line, from its lockfile's pid.
    let command_line = || -> (u32, String) {
        // None between a stop and the next start.
        let Some((_, lock)) = locks(data.path()).into_iter().next() else { return (0, String::new()) };
        (lock.pid, std::fs::read(format!("/proc/{}/cmdline", lock.pid)).map(|b| String::from_utf8_lossy(&b).replace('\0', " ")).unwrap_or_default())
    };
    let (online_pid, line) = command_line();
    assert!(line.contains("cli.js") && !line.contains("--proxy-server"), "{line}");

    gate.set_offline(true);
    let client = McpClient { commands: mcp.commands.clone() };
    let never = AtomicBool::new(false);
    assert!(eventually(Duration::from_secs(30), || { let (pid, line) = command_line(); pid != online_pid && line.contains("--proxy-server http://127.0.0.1:9 --proxy-bypass localhost,127.0.0.1,[::1]") }), "restarted behind the proxy: {:?}", command_line());
    status_of(&events, "browser", |s| *s == McpServerStatus::Running);
    let home = client.call("browser", "browser_navigate", json!({"url": format!("http://127.0.0.1:{port}/index.html")}), 1, &never, Duration::from_secs(60));
    assert_eq!(cowork::mcp::browser::page_title(&home.content), Some("Still Here"), "{}", home.content);
    let away = client.call("browser", "browser_navigate", json!({"url": "http://example.com/"}), 2, &never, Duration::from_secs(60));
    // The dead proxy refused it (not DNS, which this machine may lack anyway).
    assert!(away.content.contains("ERR_PROXY_CONNECTION_FAILED"), "offline, the web is out of reach: {}", away.content);
    assert!(!away.content.contains("Example Domain"), "{}", away.content);

    let (offline_pid, _) = command_line();
    gate.set_offline(false);
    assert!(eventually(Duration::from_secs(30), || { let (pid, line) = command_line(); pid != offline_pid && !line.is_empty() && !line.contains("--proxy-server") }), "restarted without the proxy");
    assert!(mcp.shutdown(McpCommand::Shutdown, Duration::from_secs(10)));
}

/// The test venv's Python, which has the `mcp` package (a skip when absent, which a full run refuses).
pub(super) fn mcp_python() -> Option<String> {
    let python = python();
    require(python.is_some(), "COWORK_TEST_PYTHON with the mcp package (scripts/test installs it)");
    python
}

fn py_server(dir: &std::path::Path) -> std::path::PathBuf {
    let script = dir.join("pyserver.py");
    std::fs::write(
        &script,
        r#"import os, sys, time
from mcp.server.mcpserver import MCPServer

app = MCPServer("pyserver")

@app.tool()
def slow(seconds: float) -> str:
    """Sleeps for the given seconds."""
    time.sleep(seconds)
    return "slept"

@app.tool()
def crash() -> str:
    """Ends the server at once."""
    print("pyserver: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)

if __name__ == "__main__":
    print("pyserver starting", file=sys.stderr, flush=True)
    app.run()
"#,
    )
    .unwrap();
    script
}

/// `tools/list_changed`: a Python server adds a tool while running and says
/// so; the worker lists the tools again, the new one is offered and runs.
/// The server speaks 2026-07-28, where the news comes only on the
/// `subscriptions/listen` stream cowork opens after `server/discover` (it
/// also sends the old notice, which that revision no longer carries).
#[test]
fn a_tool_added_while_the_server_runs_is_offered_after_its_list_changed_notice() {
    let Some(python) = mcp_python() else { return };
    let data = temp_dir();
    let script = data.path().join("growing.py");
    std::fs::write(
        &script,
        r#"from mcp.server.mcpserver import MCPServer, Context

app = MCPServer("growing")

def fresh() -> str:
    """A tool that was not there at the start."""
    return "fresh and new"

@app.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool fresh."""
    app.add_tool(fresh)
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "grown"

app.run()
"#,
    )
    .unwrap();
    std::fs::write(data.path().join("mcp-servers.json"), json!({"mcpServers": {"growing": {"command": python, "args": [script]}}}).to_string()).unwrap();
    let (sink, events) = super::support::test_sink();
    let mut mcp = cowork::mcp::worker::spawn_mcp(data.path().to_owned(), sink.narrow(), cowork::runtime::RestartPolicy::default()).unwrap();
    let views = settled(&events, &["growing"]);
    let view = server(&views, "growing");
    assert_eq!(view.status, McpServerStatus::Running, "{view:?}");
    assert_eq!(view.tools.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(), ["grow"]);
    let client = McpClient { commands: mcp.commands.clone() };
    let never = AtomicBool::new(false);
    assert_eq!(client.call("growing", "grow", json!({}), 1, &never, Duration::from_secs(20)).content, "grown");
    let grown = wait_for(&events, Duration::from_secs(20), |e| match e {
        AppEvent::Mcp(McpEvent::McpServers(servers)) if server(servers, "growing").tools.iter().any(|t| t.0 == "fresh") => Some(servers.clone()),
        _ => None,
    })
    .expect("the tool list was read again");
    assert_eq!(server(&grown, "growing").tools.len(), 2);
    assert!(client.offered(Duration::from_secs(5)).offered.iter().any(|o| o.tool.name == "fresh"));
    assert_eq!(client.call("growing", "fresh", json!({}), 2, &never, Duration::from_secs(20)).content, "fresh and new");
    assert_eq!(view.protocol_version, "2026-07-28", "discovered, not initialized");
    assert!(mcp.shutdown(McpCommand::Shutdown, Duration::from_secs(5)));
}

#[test]
fn a_python_server_times_out_crashes_and_reconnects_and_garbage_on_stdout_is_a_clear_error() {
    let Some(python) = mcp_python() else { return };
    let data = temp_dir();
    let script = py_server(data.path());
    let config = json!({"mcpServers": {
        "py": {"command": python, "args": [script], "toolTimeoutSec": 1},
        "garbage": {"command": python, "args": ["-c", "import time; print('hello, this is not JSON-RPC', flush=True); time.sleep(60)"], "startupTimeoutSec": 3}
    }});
    std::fs::write(data.path().join("mcp-servers.json"), config.to_string()).unwrap();
    let (sink, events) = super::support::test_sink();
    let mut mcp = cowork::mcp::worker::spawn_mcp(data.path().to_owned(), sink.narrow(), cowork::runtime::RestartPolicy::default()).unwrap();
    let client = McpClient { commands: mcp.commands.clone() };

    let started = Instant::now();
    let views = settled(&events, &["py", "garbage"]);
    assert_eq!(server(&views, "py").status, McpServerStatus::Running, "{views:?}");
    match &server(&views, "garbage").status {
        McpServerStatus::Error(why) => assert!(!why.is_empty(), "{why}"),
        other => panic!("garbage on stdout is an error, not {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10), "no hang: {:?}", started.elapsed());

    let stop = AtomicBool::new(false);
    // The tool timeout ends a slow call and cancels it on the server.
    let timed = Instant::now();
    let out = client.call("py", "slow", json!({"seconds": 3}), 1, &stop, Duration::from_secs(1));
    assert!(out.is_error && out.content.contains("tool timeout"), "{out:?}");
    assert!(timed.elapsed() < Duration::from_secs(4), "{:?}", timed.elapsed());
    // The same connection still works (a server that runs tools one at a time answers after its sleep).
    let out = client.call("py", "slow", json!({"seconds": 0.1}), 2, &stop, Duration::from_secs(5));
    assert_eq!((out.is_error, out.content.as_str()), (false, "slept"), "{out:?}");

    // A tool that kills the server: an error, then the server's state is an error with its stderr.
    let out = client.call("py", "crash", json!({}), 3, &stop, Duration::from_secs(1));
    assert!(out.is_error, "{out:?}");
    let crashed = wait_for(&events, Duration::from_secs(10), |e| match e {
        AppEvent::Mcp(McpEvent::McpServers(servers)) => servers.iter().find(|s| s.name == "py" && matches!(s.status, McpServerStatus::Error(_))).cloned(),
        _ => None,
    })
    .expect("the crash shows");
    assert!(crashed.stderr.iter().any(|l| l.contains("crashing on purpose")), "{crashed:?}");
    let out = client.call("py", "slow", json!({"seconds": 0.1}), 4, &stop, Duration::from_secs(1));
    assert!(out.is_error && out.content.contains("not running"), "{out:?}");

    // Reconnect.
    mcp.commands.send(McpCommand::Connect("py".into())).unwrap();
    let views = settled(&events, &["py"]);
    assert_eq!(server(&views, "py").status, McpServerStatus::Running);
    let out = client.call("py", "slow", json!({"seconds": 0.1}), 5, &stop, Duration::from_secs(1));
    assert_eq!(out.content, "slept", "{out:?}");
    // Stop from the agent's side cancels.
    let flag = Arc::new(AtomicBool::new(false));
    let setter = flag.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        setter.store(true, Ordering::SeqCst);
    });
    let cut = Instant::now();
    let out = client.call("py", "slow", json!({"seconds": 0.9}), 6, &flag, Duration::from_secs(30));
    stopper.join().unwrap();
    assert!(out.is_error && out.content.contains("stopped"), "{out:?}");
    assert!(cut.elapsed() < Duration::from_millis(850), "{:?}", cut.elapsed());
    assert!(mcp.shutdown(McpCommand::Shutdown, Duration::from_secs(5)));
}

/// The lockfiles in the data directory's MCP run folder, parsed.
fn locks(data: &std::path::Path) -> Vec<(std::path::PathBuf, cowork::mcp::orphans::Lock)> {
    let Ok(entries) = std::fs::read_dir(cowork::mcp::orphans::run_dir(data)) else { return Vec::new() };
    entries.flatten().filter_map(|e| Some((e.path(), serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?))).collect()
}

fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

#[test]
fn a_server_left_by_a_killed_cowork_is_ended_at_the_next_start_and_a_reused_pid_is_untouched() {
    if !require(super::support::XSession::available(), "Xvfb") {
        return;
    }
    let Some(python) = mcp_python() else { return };
    let x = super::support::XSession::start();
    let data = temp_dir();
    // A server that outlives its stdin (many do): the orphan a crash leaves.
    let script = data.path().join("stubborn.py");
    std::fs::write(
        &script,
        "import os, sys, time\nfrom mcp.server.mcpserver import MCPServer\napp = MCPServer('stubborn')\n\n@app.tool()\ndef ping() -> str:\n    return 'pong'\n\ntry:\n    app.run()\nexcept BaseException:\n    pass\n# Its pipes went with cowork: nothing more is written to them.\nsys.stdout = sys.stderr = open(os.devnull, 'w')\ntime.sleep(600)\n",
    )
    .unwrap();
    std::fs::write(data.path().join("mcp-servers.json"), json!({"mcpServers": {"stubborn": {"command": python, "args": [script]}}}).to_string()).unwrap();
    // `cowork capture run` starts every worker (the mcp worker too) without the window.
    let cowork = || {
        let mut command = x.command(env!("CARGO_BIN_EXE_cowork"));
        command.env("COWORK_LOG", "warn").arg("--data-dir").arg(data.path()).args(["capture", "run"]);
        ChildGuard(command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap())
    };
    let owned_by = |pid: u32| locks(data.path()).into_iter().find(|(_, lock)| lock.owner.is_some_and(|o| o.pid == pid));
    // If an assertion fails midway, no stubborn server is left behind.
    struct EndServers(Vec<u32>);
    impl Drop for EndServers {
        fn drop(&mut self) {
            for pid in &self.0 {
                if std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.windows(11).any(|w| w == b"stubborn.py")) {
                    unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
                }
            }
        }
    }
    let mut started = EndServers(Vec::new());

    let mut first = cowork();
    assert!(eventually(Duration::from_secs(60), || owned_by(first.0.id()).is_some()), "the first cowork recorded its server");
    let (_, lock) = owned_by(first.0.id()).unwrap();
    let orphan = lock.pid;
    started.0.push(orphan);
    assert!(running(orphan));
    // Another cowork process on the same data directory (a second capture is refused now: one
    // runs per data directory; a command such as `cowork automations run` beside it still starts
    // the workers) starts its own server and leaves the first one's alone.
    let flows = data.path().join("hold.json");
    std::fs::write(&flows, json!({"flows": [{"name": "hold", "trigger": {"kind": "manual"}, "steps": [{"id": "wait", "kind": "delay", "seconds": 20}]}]}).to_string()).unwrap();
    let imported = x.command(env!("CARGO_BIN_EXE_cowork")).env("COWORK_LOG", "warn").arg("--data-dir").arg(data.path()).args(["automations", "import"]).arg(&flows).output().unwrap();
    assert!(imported.status.success(), "{}", String::from_utf8_lossy(&imported.stderr));
    let refused = x.command(env!("CARGO_BIN_EXE_cowork")).env("COWORK_LOG", "warn").arg("--data-dir").arg(data.path()).args(["capture", "run"]).output().unwrap();
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("already runs"), "a second capture is refused");
    let mut other = ChildGuard(
        x.command(env!("CARGO_BIN_EXE_cowork"))
            .env("COWORK_LOG", "warn")
            .arg("--data-dir")
            .arg(data.path())
            .args(["automations", "run", "hold", "--wait-secs", "120"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(eventually(Duration::from_secs(60), || owned_by(other.0.id()).is_some()), "the second cowork recorded its server");
    let (_, its) = owned_by(other.0.id()).unwrap();
    started.0.push(its.pid);
    assert_ne!(its.pid, orphan);
    assert!(running(orphan), "another cowork process did not end the first one's server");
    // Its run done, it ends normally: it stops its own server and removes its lockfile.
    assert!(eventually(Duration::from_secs(90), || other.0.try_wait().ok().flatten().is_some()), "the run ended");
    assert!(other.0.wait().unwrap().success());
    assert!(eventually(Duration::from_secs(5), || !running(its.pid)), "a cowork that ends normally ends its servers");
    assert!(owned_by(other.0.id()).is_none(), "and removes their lockfiles");
    assert!(running(orphan));

    // kill -9: nothing of cowork's runs to stop the server.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(running(orphan), "the server outlived the killed cowork (the orphan this test is about)");

    // A lockfile whose pid now runs another program (a reused pid), owned by a dead cowork.
    let mut bystander = ChildGuard(Command::new("sleep").arg("300").spawn().unwrap());
    let mut reused = lock.clone();
    reused.pid = bystander.0.id();
    std::fs::write(cowork::mcp::orphans::run_dir(data.path()).join("1-reused.lock"), serde_json::to_vec(&reused).unwrap()).unwrap();

    let mut second = cowork();
    assert!(eventually(Duration::from_secs(60), || owned_by(second.0.id()).is_some()), "the second cowork started its own server");
    assert!(eventually(Duration::from_secs(5), || !running(orphan)), "the orphan was ended");
    assert!(bystander.0.try_wait().unwrap().is_none(), "the process that reused a recorded pid runs on");
    let left = locks(data.path());
    assert_eq!(left.len(), 1, "the dead owner's lockfiles are gone: {left:?}");
    let _ = bystander.0.kill();
    // A clean stop ends its server (which would outlive a kill -9, and has a clean environment the suite's leftover check cannot see).
    let (_, its) = owned_by(second.0.id()).unwrap();
    started.0.push(its.pid);
    unsafe { libc::kill(second.0.id() as i32, libc::SIGTERM) };
    assert!(second.0.wait().unwrap().success());
    assert!(eventually(Duration::from_secs(5), || !running(its.pid)), "the second cowork's server ended with it");
}

#[test]
fn a_call_approved_after_a_restart_waits_for_its_server_to_finish_starting() {
    let Some(python) = mcp_python() else { return };
    let model = scripted(vec![calls(&[("mcp__slowpy__ping", json!({}))]), answer("Done.")]);
    let (data, paths) = fixture(&model, "Terminal", "");
    // The server takes as long to start as the file next to it says.
    let delay = data.path().join("start-delay");
    let script = data.path().join("slowpy.py");
    std::fs::write(
        &script,
        format!(
            "import os, time\nfrom mcp.server.mcpserver import MCPServer\napp = MCPServer('slowpy')\n\n@app.tool()\ndef ping() -> str:\n    \"\"\"Answers pong.\"\"\"\n    return 'pong'\n\nif os.path.exists({delay:?}):\n    time.sleep(float(open({delay:?}).read()))\napp.run()\n"
        ),
    )
    .unwrap();
    std::fs::write(data.path().join("mcp-servers.json"), json!({"mcpServers": {"slowpy": {"command": python, "args": [script], "startupTimeoutSec": 20}}}).to_string()).unwrap();

    let (workers, events) = super::support::start_workers(&paths);
    settled(&events, &["slowpy"]);
    workers.agent.commands.send(AgentCommand::Chat(task("ping the slowpy server"))).unwrap();
    let waiting = wait_call(&events, |c| c.tool == "mcp__slowpy__ping" && c.status == CallStatus::Waiting);
    workers.shutdown(Duration::from_secs(5));
    // A clean shutdown is a Stop (waiting operations are cancelled); a crash
    // (kill -9, power loss) leaves them waiting, as here.
    {
        let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
        conn.execute("UPDATE operation_calls SET status = 'waiting', finished_at_ms = NULL WHERE call_id = ?1", [waiting.call_id]).unwrap();
        conn.execute("UPDATE operations SET status = 'waiting_for_human', error = NULL", []).unwrap();
    }

    // cowork starts again; this time the server needs 3 s to come up, and the
    // user approves the call the moment it is shown again.
    std::fs::write(&delay, "3").unwrap();
    let (workers, events) = super::support::start_workers(&paths);
    let shown = wait_call(&events, |c| c.call_id == waiting.call_id && c.status == CallStatus::Waiting);
    workers.agent.commands.send(AgentCommand::Decide { call_id: shown.call_id, choice: ApprovalChoice::Once }).unwrap();
    let done = wait_call(&events, |c| c.call_id == waiting.call_id && c.status.settled());
    assert_eq!(done.status, CallStatus::Done, "the call waited for its server: {done:?}");
    assert_eq!(done.output.as_deref(), Some("pong"), "{done:?}");
    workers.shutdown(Duration::from_secs(5));
}

/// A client of the official Python `mcp` package: runs `ops` against
/// `cowork mcp serve` (stdio) or a URL (streamable HTTP) and returns what
/// each answered, as the wire's JSON.
const PY_CLIENT: &str = r#"import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client, create_mcp_http_client

spec = json.loads(sys.argv[1])

def dump(x):
    return x.model_dump(by_alias=True, mode="json", exclude_none=True)

async def run(session):
    await session.initialize()
    out = []
    for op in spec["ops"]:
        try:
            if op[0] == "list_tools":
                out.append(dump(await session.list_tools()))
            elif op[0] == "call":
                out.append(dump(await session.call_tool(op[1], op[2])))
            elif op[0] == "list_resources":
                out.append(dump(await session.list_resources()))
            elif op[0] == "read":
                out.append(dump(await session.read_resource(op[1])))
        except Exception as e:
            out.append({"exception": repr(e)})
    return out

async def main():
    info = types.Implementation(name=spec["client"], version="1.0")
    if "url" in spec:
        async with create_mcp_http_client(headers=spec.get("headers")) as http:
            async with streamable_http_client(spec["url"], http_client=http) as streams:
                async with ClientSession(streams[0], streams[1], client_info=info) as s:
                    print(json.dumps(await run(s)))
    else:
        params = StdioServerParameters(command=spec["command"], args=spec["args"])
        async with stdio_client(params) as streams:
            async with ClientSession(streams[0], streams[1], client_info=info) as s:
                print(json.dumps(await run(s)))

asyncio.run(main())
"#;

pub(super) fn py_client(python: &str, dir: &std::path::Path, spec: serde_json::Value) -> Vec<serde_json::Value> {
    let script = dir.join("client.py");
    std::fs::write(&script, PY_CLIENT).unwrap();
    let out = Command::new(python).arg(&script).arg(spec.to_string()).stdin(Stdio::null()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the Python client failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The text of a tools/call result, and whether it is an error.
pub(super) fn call_text(result: &serde_json::Value) -> (String, bool) {
    let text = result["content"].as_array().map(|blocks| blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")).unwrap_or_default();
    (text, result["isError"].as_bool().unwrap_or(false))
}

/// A data directory holding the scripted morning (with its vectors when the embedding model is here).
fn remembered_morning() -> tempfile::TempDir {
    let data = temp_dir();
    let script = super::support::repo_dir().join("assets/scripts/grounded-morning.jsonl");
    for args in [vec!["capture", "simulate", "--script", script.to_str().unwrap()], vec!["memory", "embed"]] {
        let out = serve_command(data.path()).args(&args).output().unwrap();
        assert!(out.status.success(), "cowork {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    data
}

fn serve_command(data: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cowork"));
    command.env("COWORK_LOG", "warn").arg("--data-dir").arg(data).arg("--models-dir").arg(super::support::models_dir());
    command
}

pub(super) fn decide_client(data: &std::path::Path, name: &str, allowed: bool) {
    // What the sidebar's Allow / Deny sends the store.
    let conn = cowork::store::open_writer(&data.join("cowork.db")).unwrap();
    let write = cowork::agent::store::AgentWrite::McpClientDecided { name: name.into(), allowed, by: "user".into(), at_millis: cowork::ids::now_millis() };
    cowork::agent::store::apply(&conn, &write).unwrap();
}

fn clients(data: &std::path::Path) -> Vec<cowork::agent::store::McpClientRow> {
    let conn = cowork::store::open_read_only(&data.join("cowork.db")).unwrap();
    cowork::agent::store::mcp_clients(&conn).unwrap()
}

#[test]
fn cowork_serves_its_memory_to_the_python_client_only_once_allowed_and_within_the_privacy_rules() {
    use cowork::agent::store::ClientStatus;
    let Some(python) = mcp_python() else { return };
    let data = remembered_morning();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["--data-dir", data.path().to_str().unwrap(), "--models-dir", super::support::models_dir().to_str().unwrap(), "mcp", "serve"].map(String::from).to_vec();
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    };
    let stdio = |client: &str, ops: serde_json::Value| {
        py_client(&python, data.path(), json!({"client": client, "command": env!("CARGO_BIN_EXE_cowork"), "args": args(&["--consent-wait", "1"]), "ops": ops}))
    };

    // A new client sees the tools but reads nothing: it is pending, and the sidebar asks.
    let first = stdio("Claude Desktop", json!([["list_tools"], ["call", "search_memory", {"query": "flight to Lisbon"}]]));
    let tools: Vec<&str> = first[0]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(tools, ["search_memory", "recent_activity", "current_context", "get_session"]);
    assert!(first[0]["tools"].as_array().unwrap().iter().all(|t| t["annotations"]["readOnlyHint"] == true), "{}", first[0]);
    let (text, is_error) = call_text(&first[1]);
    assert!(is_error && text.contains("asking the user"), "{text}");
    assert!(!text.contains("LH1723"));
    let asked = clients(data.path());
    assert_eq!((asked[0].name.as_str(), asked[0].status, asked[0].transport.as_str()), ("Claude Desktop", ClientStatus::Pending, "stdio"), "{asked:?}");

    // Allowed: every tool and the timeline answer from the real database.
    decide_client(data.path(), "Claude Desktop", true);
    let served = stdio(
        "Claude Desktop",
        json!([
            ["call", "search_memory", {"query": "flight to Lisbon"}],
            ["call", "recent_activity", {"minutes": 1440, "limit": 50}],
            ["call", "current_context", {}],
            ["list_resources"],
            ["read", "cowork://timeline/today"],
            ["call", "search_memory", {"query": 42}]
        ]),
    );
    let (found, is_error) = call_text(&served[0]);
    assert!(!is_error && found.contains("LH1723"), "{found}");
    let (recent, _) = call_text(&served[1]);
    assert!(recent.contains("Lufthansa") && recent.contains("Thunderbird"), "{recent}");
    let (now, is_error) = call_text(&served[2]);
    assert!(!is_error && now.contains("The last 15 minutes"), "{now}");
    assert_eq!(served[3]["resources"][0]["uri"], "cowork://timeline/today");
    let timeline = served[4]["contents"][0]["text"].as_str().unwrap_or_default();
    // The morning ends now in the VS Code window, so whatever the hour (after midnight only the
    // newest sessions are "today") the timeline lists it, or says there was no window yet.
    assert!(timeline.contains("rounding.rs - billing-service") || timeline.starts_with("No window"), "{}", served[4]);
    let (bad, is_error) = call_text(&served[5]);
    assert!(is_error && bad.contains("schema"), "{bad}");
    // One session in full, by the id recent_activity gave.
    let session_id: i64 = recent.lines().find(|l| l.contains("Lufthansa")).and_then(|l| l.rsplit("(session ").next()).and_then(|s| s.trim_end_matches(')').parse().ok()).expect("a session id");
    let session = stdio("Claude Desktop", json!([["call", "get_session", {"session_id": session_id}]]));
    let (detail, is_error) = call_text(&session[0]);
    assert!(!is_error && detail.contains("QX7P2M"), "what was copied in it: {detail}");

    // A rule the user adds now withholds what was recorded before it.
    {
        let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
        cowork::store::set_setting(&conn, "privacy.denied_titles", "(?i)lisbon|LH1723", cowork::ids::now_millis()).unwrap();
    }
    let hidden = stdio(
        "Claude Desktop",
        json!([["call", "search_memory", {"query": "flight to Lisbon"}], ["call", "recent_activity", {"minutes": 1440, "limit": 50}], ["call", "get_session", {"session_id": session_id}]]),
    );
    for result in &hidden {
        let (text, _) = call_text(result);
        assert!(!text.contains("Lufthansa") && !text.contains("LH1723") && !text.contains("QX7P2M"), "withheld: {text}");
    }
    assert!(call_text(&hidden[2]).1 && call_text(&hidden[2]).0.contains("withheld"), "{:?}", hidden[2]);
    assert!(call_text(&hidden[1]).0.contains("Thunderbird"), "the rest is still served");

    // A denied client is refused at once.
    decide_client(data.path(), "Nosy", false);
    let refused = stdio("Nosy", json!([["call", "recent_activity", {}]]));
    let (why, is_error) = call_text(&refused[0]);
    assert!(is_error && why.contains("not allowed"), "{why}");

    // Every call is in the audit log, by client.
    let conn = cowork::store::open_read_only(&data.path().join("cowork.db")).unwrap();
    let audit = cowork::agent::store::audit(&conn, 100).unwrap();
    let by = |client: &str, decision: &str| audit.iter().filter(|e| e.decided_by.starts_with(&format!("MCP client {client}")) && e.decision == decision).count();
    assert_eq!(by("Claude Desktop", "refused"), 1, "{audit:?}");
    // Five calls and the timeline read (listing is not audited), one session, three withheld.
    assert_eq!(by("Claude Desktop", "served"), 5 + 1 + 3, "{audit:?}");
    assert_eq!(by("Nosy", "refused"), 1);
    assert!(audit.iter().any(|e| e.tool == "mcp serve: search_memory" && e.arguments["query"] == "flight to Lisbon" && e.result_bytes.unwrap_or(0) > 0));
}

#[test]
fn cowork_serves_over_loopback_http_only_with_its_token_and_to_the_mcp_inspector() {
    let Some(python) = mcp_python() else { return };
    let data = remembered_morning();
    let token = String::from_utf8(serve_command(data.path()).args(["mcp", "token"]).output().unwrap().stdout).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64, "{token}");
    assert!(!std::fs::read_dir(data.path()).unwrap().flatten().any(|f| f.path().is_file() && std::fs::read(f.path()).unwrap_or_default().windows(64).any(|w| w == token.as_bytes())), "the token is not written in plain text in the data directory");
    // Off loopback: refused.
    let out = serve_command(data.path()).args(["mcp", "serve", "--http", "0.0.0.0:0"]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("loopback"), "{}", String::from_utf8_lossy(&out.stderr));

    let mut server = ChildGuard(serve_command(data.path()).args(["mcp", "serve", "--http", "127.0.0.1:0", "--allow", "pyhttp"]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap());
    let mut url = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(server.0.stdout.take().unwrap()), &mut url).unwrap();
    let url = url.trim().to_owned();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"), "{url}");

    // Without the token (or with another): 401, nothing served.
    let port: u16 = url.trim_start_matches("http://127.0.0.1:").trim_end_matches("/mcp").parse().unwrap();
    for auth in ["", "Authorization: Bearer 0000\r\n"] {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        std::io::Write::write_all(&mut stream, request.as_bytes()).unwrap();
        let mut response = String::new();
        let _ = std::io::Read::read_to_string(&mut stream, &mut response);
        assert!(response.starts_with("HTTP/1.1 401"), "{response}");
    }
    let served = py_client(
        &python,
        data.path(),
        json!({"client": "pyhttp", "url": url, "headers": {"Authorization": format!("Bearer {token}")}, "ops": [["call", "search_memory", {"query": "flight to Lisbon"}]]}),
    );
    let (found, is_error) = call_text(&served[0]);
    assert!(!is_error && found.contains("LH1723"), "{found}");
    assert!(clients(data.path()).iter().any(|c| c.name == "pyhttp" && c.transport == "http" && c.status == cowork::agent::store::ClientStatus::Allowed));
    unsafe { libc::kill(server.0.id() as i32, libc::SIGTERM) };
    assert!(server.0.wait().unwrap().success(), "SIGTERM ends it cleanly");

    // The MCP Inspector's CLI over stdio: it names itself, is asked about, then served.
    let inspector = std::env::var("COWORK_TEST_MCP_INSPECTOR").unwrap_or_default();
    if !require(!inspector.is_empty() && have_program("node"), "node and @modelcontextprotocol/inspector") {
        return;
    }
    let inspect = |method: &[&str]| {
        let out = Command::new("node")
            .arg(&inspector)
            .arg("--cli")
            .arg(env!("CARGO_BIN_EXE_cowork"))
            .args(["mcp", "serve", "--consent-wait", "1"])
            .arg("-e")
            .arg(format!("COWORK_DATA_DIR={}", data.path().display()))
            .arg("-e")
            .arg(format!("COWORK_MODELS_DIR={}", super::support::models_dir().display()))
            .arg("-e")
            .arg("COWORK_LOG=warn")
            .args(method)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (listed, err) = inspect(&["--method", "tools/list"]);
    assert!(listed.contains("search_memory") && listed.contains("get_session"), "{listed}\n{err}");
    let call = ["--method", "tools/call", "--tool-name", "search_memory", "--tool-arg", "query=flight to Lisbon"];
    let (refused, _) = inspect(&call);
    assert!(!refused.contains("LH1723"), "{refused}");
    let pending: Vec<_> = clients(data.path()).into_iter().filter(|c| c.status == cowork::agent::store::ClientStatus::Pending).collect();
    assert_eq!(pending.len(), 1, "the Inspector is asked about: {pending:?}");
    decide_client(data.path(), &pending[0].name, true);
    let (found, err) = inspect(&call);
    assert!(found.contains("LH1723"), "{found}\n{err}");
    let (timeline, err) = inspect(&["--method", "resources/read", "--uri", "cowork://timeline/today"]);
    assert!(timeline.contains("cowork://timeline/today"), "{timeline}\n{err}");
}

/// An MCP server behind OAuth, written here with the Python `mcp` package:
/// its own authorization server routes (RFC 9728 and RFC 8414 discovery,
/// dynamic client registration, PKCE, a token endpoint that rotates refresh
/// tokens) in front of tools that want a bearer token. The user approves at
/// once; the log says what the authorization server did.
const OAUTH_SERVER: &str = r#"import secrets, sys, time
from mcp.server.mcpserver import MCPServer
from mcp.server.auth.provider import AccessToken, AuthorizationCode, RefreshToken, construct_redirect_uri
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.shared.auth import OAuthToken

port, log_path = int(sys.argv[1]), sys.argv[2]
base = f"http://127.0.0.1:{port}"

def log(*words):
    with open(log_path, "a") as f:
        f.write(" ".join(words) + "\n")

class Provider:
    def __init__(self):
        self.clients, self.codes, self.access, self.refresh = {}, {}, {}, {}
    async def get_client(self, client_id):
        return self.clients.get(client_id)
    async def register_client(self, info):
        self.clients[info.client_id] = info
        log("register", str(info.client_name), str(info.token_endpoint_auth_method))
    async def authorize(self, client, params):
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(code=code, scopes=params.scopes or ["notes"], expires_at=time.time() + 300, client_id=client.client_id,
            code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource)
        log("authorize", str(params.redirect_uri))
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)
    async def load_authorization_code(self, client, code):
        return self.codes.get(code)
    async def exchange_authorization_code(self, client, code):
        del self.codes[code.code]
        return self.issue(client.client_id, code.scopes, code.resource, "code")
    def issue(self, client_id, scopes, resource, how):
        access, refresh = "at-" + secrets.token_urlsafe(16), "rt-" + secrets.token_urlsafe(16)
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes, expires_at=int(time.time()) + 3600, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        log("token", how)
        return OAuthToken(access_token=access, expires_in=3600, scope=" ".join(scopes), refresh_token=refresh)
    async def load_refresh_token(self, client, token):
        return self.refresh.get(token)
    async def exchange_refresh_token(self, client, token, scopes):
        del self.refresh[token.token]
        return self.issue(client.client_id, scopes or token.scopes, token.resource, "refresh")
    async def load_access_token(self, token):
        return self.access.get(token)
    async def revoke_token(self, token):
        pass

provider = Provider()
app = MCPServer("notes", auth_server_provider=provider, auth=AuthSettings(
    issuer_url=base, resource_server_url=f"{base}/mcp", required_scopes=["notes"], validate_token_resource=False,
    client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=["notes"], default_scopes=["notes"])))

@app.tool()
def whoami() -> str:
    """Says which client's token came with the call."""
    return "signed in as " + get_access_token().client_id

@app.tool()
def expire_access() -> str:
    """Forgets every access token, as if they had run out."""
    provider.access.clear()
    return "expired"

@app.tool()
def revoke_all() -> str:
    """Forgets every token: only a new sign-in helps."""
    provider.access.clear()
    provider.refresh.clear()
    return "revoked"

app.run("streamable-http", host="127.0.0.1", port=port)
"#;

fn status_of(events: &crossbeam_channel::Receiver<AppEvent>, name: &str, what: impl Fn(&McpServerStatus) -> bool) -> McpServerView {
    wait_for(events, Duration::from_secs(60), |e| match e {
        AppEvent::Mcp(McpEvent::McpServers(servers)) => servers.iter().find(|s| s.name == name && what(&s.status)).cloned(),
        _ => None,
    })
    .unwrap_or_else(|| panic!("{name} did not reach the awaited state"))
}

fn count(log: &std::path::Path, line: &str) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|l| l.starts_with(line)).count()
}

/// OAuth 2.1: the server's 401 makes it wait for a sign-in; Sign in takes
/// the authorization URL (PKCE S256, a state, a loopback redirect) through a
/// browser to cowork's listener, the tokens land in the secret store (in no
/// file in plain text), calls carry them; an access token the server forgot
/// is refreshed once and the call goes through; a restart connects without a
/// browser; when everything is revoked, the call says to sign in again and the
/// server waits for it; `cowork mcp login` does the same from the terminal
/// with $BROWSER, `cowork mcp test` then connects, and `logout` forgets.
#[test]
fn an_http_server_behind_oauth_is_signed_in_to_refreshed_and_signed_in_to_again_when_everything_is_revoked() {
    let Some(python) = mcp_python() else { return };
    let data = temp_dir();
    let (port, log) = (free_port(), data.path().join("oauth.log"));
    let script = data.path().join("notes.py");
    std::fs::write(&script, OAUTH_SERVER).unwrap();
    let _server = ChildGuard(Command::new(&python).arg(&script).arg(port.to_string()).arg(&log).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    assert!(eventually(Duration::from_secs(30), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()), "the OAuth server listens");
    let url = format!("http://127.0.0.1:{port}/mcp");
    std::fs::write(data.path().join("mcp-servers.json"), json!({"mcpServers": {"notes": {"url": url}}}).to_string()).unwrap();

    let (sink, events) = super::support::test_sink();
    let mut mcp = cowork::mcp::worker::spawn_mcp(data.path().to_owned(), sink.narrow(), cowork::runtime::RestartPolicy::default()).unwrap();
    let waiting = server(&settled(&events, &["notes"]), "notes").clone();
    assert!(matches!(&waiting.status, McpServerStatus::NeedsSignIn(why) if why.contains("sign in")), "{waiting:?}");

    // Sign in: the suite's $BROWSER opens nothing, so the test is the browser.
    mcp.commands.send(McpCommand::SignIn("notes".into())).unwrap();
    let signing = status_of(&events, "notes", |s| matches!(s, McpServerStatus::SigningIn(link) if !link.is_empty()));
    let McpServerStatus::SigningIn(link) = signing.status else { unreachable!() };
    for part in ["code_challenge_method=S256", "code_challenge=", "state=", "redirect_uri=http%3A%2F%2F127.0.0.1%3A"] {
        assert!(link.contains(part), "{part} in {link}");
    }
    let page = ureq::get(&link).call().unwrap().body_mut().read_to_string().unwrap();
    assert!(page.contains("Signed in"), "{page}");
    let running = status_of(&events, "notes", |s| *s == McpServerStatus::Running);
    assert!(running.signed_in && running.tools.len() == 3, "{running:?}");
    assert_eq!((count(&log, "register cowork none"), count(&log, "authorize http://127.0.0.1:"), count(&log, "token code")), (1, 1, 1));
    let client = McpClient { commands: mcp.commands.clone() };
    let never = AtomicBool::new(false);
    let out = client.call("notes", "whoami", json!({}), 1, &never, Duration::from_secs(20));
    assert!(!out.is_error && out.content.starts_with("signed in as "), "{out:?}");

    // The tokens are in the secret store and in no file in plain text.
    let kept: serde_json::Value = serde_json::from_str(&cowork::secrets::Secrets::open(data.path()).unwrap().get("mcp/notes/oauth").unwrap().expect("kept")).unwrap();
    assert_eq!(kept["url"], json!(url));
    let access = kept["credentials"]["token_response"]["access_token"].as_str().unwrap().to_owned();
    let refresh = kept["credentials"]["token_response"]["refresh_token"].as_str().unwrap().to_owned();
    for entry in walk(data.path()) {
        let bytes = std::fs::read(&entry).unwrap();
        for secret in [&access, &refresh] {
            assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "{} holds a token in plain text", entry.display());
        }
    }

    // The server forgets the access token: one refresh, and the call goes through.
    assert_eq!(client.call("notes", "expire_access", json!({}), 2, &never, Duration::from_secs(20)).content, "expired");
    let out = client.call("notes", "whoami", json!({}), 3, &never, Duration::from_secs(20));
    assert!(!out.is_error && out.content.starts_with("signed in as "), "{out:?}");
    assert_eq!(count(&log, "token refresh"), 1);

    // A restart connects with the kept (rotated) tokens, no browser.
    assert!(mcp.shutdown(McpCommand::Shutdown, Duration::from_secs(5)));
    let (sink, events) = super::support::test_sink();
    let mut mcp = cowork::mcp::worker::spawn_mcp(data.path().to_owned(), sink.narrow(), cowork::runtime::RestartPolicy::default()).unwrap();
    let again = server(&settled(&events, &["notes"]), "notes").clone();
    assert!(again.status == McpServerStatus::Running && again.signed_in, "{again:?}");
    assert_eq!(count(&log, "authorize"), 1, "no second sign-in");

    // Everything revoked: the call says so and the server waits for a sign-in.
    let client = McpClient { commands: mcp.commands.clone() };
    assert_eq!(client.call("notes", "revoke_all", json!({}), 4, &never, Duration::from_secs(20)).content, "revoked");
    let out = client.call("notes", "whoami", json!({}), 5, &never, Duration::from_secs(20));
    assert!(out.is_error, "{out:?}");
    status_of(&events, "notes", |s| matches!(s, McpServerStatus::NeedsSignIn(_)));
    assert!(mcp.shutdown(McpCommand::Shutdown, Duration::from_secs(5)));

    // From the terminal: $BROWSER follows the link as a browser would.
    let browser = data.path().join("browser");
    std::fs::write(&browser, format!("#!{python}\nimport sys, urllib.request\nurllib.request.urlopen(sys.argv[1]).read()\n")).unwrap();
    std::fs::set_permissions(&browser, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cowork = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cowork")).env("COWORK_LOG", "warn").env("BROWSER", &browser).arg("--data-dir").arg(data.path()).args(args).stdin(Stdio::null()).output().unwrap()
    };
    let login = cowork(&["mcp", "login", "notes"]);
    let said = String::from_utf8_lossy(&login.stdout).into_owned() + &String::from_utf8_lossy(&login.stderr);
    assert!(login.status.success() && said.contains("signed in to notes"), "{said}");
    assert_eq!(count(&log, "authorize"), 2);
    let test = cowork(&["mcp", "test", "notes"]);
    let said = String::from_utf8_lossy(&test.stdout).into_owned();
    assert!(test.status.success() && said.contains("tools       3"), "{said}");
    let logout = cowork(&["mcp", "logout", "notes"]);
    assert!(String::from_utf8_lossy(&logout.stdout).contains("forgot the sign-in of notes"));
    let test = cowork(&["mcp", "test", "notes"]);
    let said = String::from_utf8_lossy(&test.stdout).into_owned();
    assert!(!test.status.success() && said.contains("asks you to sign in"), "{said}");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_servers_list_change_and_resource_update_start_the_automations_that_wait_for_them() {
    use cowork::automations::store::{self as db, RunStatus};
    let Some(python) = mcp_python() else { return };
    let data = temp_dir();
    let script = data.path().join("feed.py");
    std::fs::write(
        &script,
        r#"from mcp.server.mcpserver import MCPServer, Context

app = MCPServer("feed")

def fresh() -> str:
    """A tool that was not there at the start."""
    return "fresh"

@app.tool()
async def grow(ctx: Context) -> str:
    """Adds a tool."""
    app.add_tool(fresh)
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "grown"

@app.resource("feed://tickets")
def tickets() -> str:
    """The open tickets."""
    return "ticket 1: printer on fire"

@app.tool()
async def touch(ctx: Context) -> str:
    """A new ticket arrived in the feed."""
    await ctx.notify_resource_updated("feed://tickets")
    await ctx.session.send_resource_updated("feed://tickets")
    return "touched"

app.run()
"#,
    )
    .unwrap();
    std::fs::write(data.path().join("mcp-servers.json"), json!({"mcpServers": {"feed": {"command": python, "args": [script]}}}).to_string()).unwrap();
    let db_path = data.path().join("cowork.db");
    drop(cowork::store::open_writer(&db_path).unwrap());
    let conn = cowork::store::open_writer(&db_path).unwrap();
    for (name, event, uri) in [("new_tools", "tools_changed", None), ("new_ticket", "resource_updated", Some("feed://tickets")), ("other_feed", "resource_updated", Some("feed://other"))] {
        let flow = json!({"name": name, "trigger": {"kind": "mcp", "server": "feed", "event": event, "uri": uri},
            "steps": [{"id": "seen", "kind": "condition", "left": "${trigger.data.server}", "op": "equals", "right": "feed"}]});
        db::save_flow(&conn, &cowork::automations::Flow::from_json(&flow.to_string()).unwrap(), 1).unwrap();
    }
    let (sink, events) = super::support::test_sink();
    let channels = cowork::automations::worker::AutomationsChannels::default();
    let signals = channels.commands.0.clone();
    struct Nobody;
    impl cowork::automations::steps::StepRunner for Nobody {
        fn start(&self, _: cowork::automations::steps::StepRequest) -> Result<(), String> {
            Err("no agent here".into())
        }
        fn cancel(&self, _: i64) {}
    }
    impl cowork::automations::steps::Notifier for Nobody {
        fn post(&self, _: cowork::automations::steps::Notice) -> Result<i64, String> {
            Ok(0)
        }
    }
    let mut automations = cowork::automations::spawn_automations(
        cowork::automations::AutomationsConfig { store: super::support::store_link(&db_path) },
        channels,
        Arc::new(cowork::automations::steps::SystemClock),
        || Box::new(Nobody),
        || Box::new(Nobody),
        sink.narrow(),
        cowork::runtime::RestartPolicy::default(),
    )
    .unwrap();
    let mut mcp = cowork::mcp::worker::spawn_mcp_signalling(data.path().to_owned(), sink.narrow(), cowork::runtime::RestartPolicy::default(), cowork::net::OutboundGate::global(), Some(signals)).unwrap();
    let views = settled(&events, &["feed"]);
    assert_eq!(server(&views, "feed").status, McpServerStatus::Running);
    let client = McpClient { commands: mcp.commands.clone() };
    let never = AtomicBool::new(false);
    let runs = |name: &str| {
        let conn = cowork::store::open_read_only(&db_path).unwrap();
        let id = db::flow_by_name(&conn, name).unwrap().unwrap().automation_id;
        db::recent_runs(&conn, Some(id), 10).unwrap()
    };
    assert_eq!(client.call("feed", "grow", json!({}), 1, &never, Duration::from_secs(20)).content, "grown");
    assert!(eventually(Duration::from_secs(20), || runs("new_tools").iter().any(|r| r.status == RunStatus::Done)), "the tool list change started its flow");
    assert_eq!(client.call("feed", "touch", json!({}), 2, &never, Duration::from_secs(20)).content, "touched");
    assert!(eventually(Duration::from_secs(20), || runs("new_ticket").len() == 1), "the resource update started its flow");
    let ticket = runs("new_ticket").remove(0);
    assert_eq!((ticket.scope.trigger["uri"].as_str(), ticket.scope.trigger_origin), (Some("feed://tickets"), cowork::tools::Origin::ToolResult), "a server's notification is data");
    assert!(runs("other_feed").is_empty(), "another resource's flow did not run");
    assert!(mcp.shutdown(McpCommand::Shutdown, Duration::from_secs(5)));
    assert!(automations.shutdown(cowork::automations::AutomationsCommand::Shutdown, Duration::from_secs(5)));
}
