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
use cowork::events::{AppEvent, ApprovalChoice, CallStatus, McpServerStatus, McpServerView};
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
        AppEvent::McpServers(servers)
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

#[test]
fn the_agent_calls_server_everything_over_stdio_and_http_with_progress_and_stop() {
    let Some(entry) = everything() else { return };
    let port = free_port();
    let _http = ChildGuard(
        Command::new("node").arg(&entry).arg("streamableHttp").env("PORT", port.to_string()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap(),
    );
    assert!(eventually(Duration::from_secs(30), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()), "the HTTP server listens");
    let model = scripted(vec![
        calls(&[("mcp__everything__echo", json!({"message": "hello over stdio"})), ("mcp__remote__get-sum", json!({"a": 2, "b": 3}))]),
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
    workers.agent.commands.send(AgentCommand::Chat(request)).unwrap();
    let echo = wait_call(&events, |c| c.tool == "mcp__everything__echo" && c.status == CallStatus::Waiting);
    let sum = wait_call(&events, |c| c.tool == "mcp__remote__get-sum" && c.status == CallStatus::Waiting);
    assert_eq!((echo.risk.as_str(), sum.risk.as_str()), ("sensitive", "sensitive"));
    for call in [&echo, &sum] {
        workers.agent.commands.send(AgentCommand::Decide { call_id: call.call_id, choice: ApprovalChoice::Once }).unwrap();
    }
    let echoed = wait_call(&events, |c| c.call_id == echo.call_id && c.status.settled());
    assert_eq!(echoed.status, CallStatus::Done, "{echoed:?}");
    assert!(echoed.output.as_deref().unwrap_or_default().contains("hello over stdio"), "{echoed:?}");
    let summed = wait_call(&events, |c| c.call_id == sum.call_id && c.status.settled());
    assert!(summed.output.as_deref().unwrap_or_default().contains('5'), "{summed:?}");

    // A long call: its progress reaches the chip.
    let long = wait_call(&events, |c| c.tool == "mcp__everything__trigger-long-running-operation" && c.status == CallStatus::Waiting);
    workers.agent.commands.send(AgentCommand::Decide { call_id: long.call_id, choice: ApprovalChoice::Once }).unwrap();
    let progress = wait_for(&events, Duration::from_secs(30), |e| match e {
        AppEvent::ToolProgress { call_id, text } if *call_id == long.call_id => Some(text.clone()),
        _ => None,
    })
    .expect("progress came");
    assert!(progress.ends_with("/4"), "{progress}");
    let done = wait_call(&events, |c| c.call_id == long.call_id && c.status.settled());
    assert!(done.output.as_deref().unwrap_or_default().contains("Long running operation completed"), "{done:?}");

    // Stop cancels a running call on the server at once.
    let longer = wait_call(&events, |c| c.tool == "mcp__everything__trigger-long-running-operation" && c.status == CallStatus::Waiting && c.call_id != long.call_id);
    workers.agent.commands.send(AgentCommand::Decide { call_id: longer.call_id, choice: ApprovalChoice::Once }).unwrap();
    wait_for(&events, Duration::from_secs(30), |e| matches!(e, AppEvent::ToolProgress { call_id, .. } if *call_id == longer.call_id).then_some(())).expect("progress");
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
    let audit = cowork::agent::store::audit(&conn, 10).unwrap();
    assert!(audit.iter().any(|e| e.tool == "mcp__everything__echo" && e.decision == "ran" && e.decided_by == "user"), "{audit:?}");
    // Approving a call records the definition it was approved with (the rug-pull check's anchor).
    let anchored = cowork::agent::store::allowed_mcp_tool(&conn, "mcp__everything__echo").unwrap().expect("recorded");
    assert_eq!(anchored.description, "Echoes back the input string");
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

#[test]
fn a_python_server_times_out_crashes_and_reconnects_and_garbage_on_stdout_is_a_clear_error() {
    let Some(python) = python() else {
        require(false, "COWORK_TEST_PYTHON with the mcp package (scripts/test installs it)");
        return;
    };
    let data = temp_dir();
    let script = py_server(data.path());
    let config = json!({"mcpServers": {
        "py": {"command": python, "args": [script], "toolTimeoutSec": 1},
        "garbage": {"command": python, "args": ["-c", "import time; print('hello, this is not JSON-RPC', flush=True); time.sleep(60)"], "startupTimeoutSec": 3}
    }});
    std::fs::write(data.path().join("mcp-servers.json"), config.to_string()).unwrap();
    let (sink, events) = super::support::test_sink();
    let mut mcp = cowork::mcp::worker::spawn_mcp(data.path().to_owned(), sink, cowork::runtime::RestartPolicy::default()).unwrap();
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
        AppEvent::McpServers(servers) => servers.iter().find(|s| s.name == "py" && matches!(s.status, McpServerStatus::Error(_))).cloned(),
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
