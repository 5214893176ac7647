//! MCP client overhead against the reference server-everything (node), over
//! stdio and streamable HTTP: connect time, and a tool call's round trip
//! through the mcp worker (`McpClient::call`, as the agent makes it) for
//! `echo`, whose own work is nothing, so the time is cowork's overhead plus
//! the transport and node's JSON handling. Prints p50/p95 over 500 calls, then
//! criterion's estimate. Needs COWORK_TEST_MCP_EVERYTHING (scripts/test sets it
//! up): `source scripts/common.sh; setup_mcp_server; cargo bench --profile dev --bench mcp`.
//!
//! Then the other way round: `cowork mcp serve` over loopback HTTP (in this
//! process, as the command runs it) with COWORK_BENCH_SERVE_CHUNKS typed
//! chunks (default 100,000) in a real cowork.db with their vectors, and the
//! mcp worker as its client: `search_memory` p50/p95 end to end (transport,
//! consent check, hybrid search with the real MiniLM query embedding, the
//! firewall's rules, the audit write).
//!
//! And the built-in Browser (needs COWORK_PLAYWRIGHT_MCP and Debian chromium):
//! connect time, a page opened and a screenshot taken, the memory (PSS) of
//! Playwright's server and every Chromium process under it, and the time to
//! decode that screenshot into the chat's thumbnail (`media::thumbnail`, on
//! the agent thread, once per image).

use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use cowork::events::AppEvent;
use cowork::mcp::events::{McpEvent, McpServerStatus};
use cowork::mcp::worker::McpClient;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

#[path = "support/memory.rs"]
mod memory;

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

/// Waits (up to 60 s) for a report with `count` servers, all running (an error fails at once).
fn running(events: &crossbeam_channel::Receiver<AppEvent>, count: usize) -> Vec<cowork::mcp::events::McpServerView> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(AppEvent::Mcp(McpEvent::McpServers(servers))) if servers.len() == count && servers.iter().all(|s| s.status == McpServerStatus::Running) => return servers,
            Ok(AppEvent::Mcp(McpEvent::McpServers(servers))) if servers.iter().any(|s| matches!(s.status, McpServerStatus::Error(_))) => panic!("{servers:?}"),
            Ok(_) => {}
            Err(_) => panic!("the MCP servers did not start"),
        }
    }
}

fn bench(c: &mut Criterion) {
    let Ok(entry) = std::env::var("COWORK_TEST_MCP_EVERYTHING") else {
        eprintln!("COWORK_TEST_MCP_EVERYTHING is not set: source scripts/common.sh; setup_mcp_server");
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut http = Command::new("node").arg(&entry).arg("streamableHttp").env("PORT", port.to_string()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let data = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {
        "stdio": {"command": "node", "args": [entry, "stdio"]},
        "http": {"url": format!("http://127.0.0.1:{port}/mcp")}
    }});
    std::fs::write(data.path().join("mcp-servers.json"), config.to_string()).unwrap();
    let rss_before = rss_kib(std::process::id());
    let (events_tx, events) = crossbeam_channel::bounded(1024);
    let sink = cowork::runtime::EventSink::<cowork::events::AppEvent>::new(events_tx, || {}).narrow();
    let mut worker = cowork::mcp::worker::spawn_mcp(data.path().to_owned(), sink, cowork::runtime::RestartPolicy::default()).unwrap();
    let servers = running(&events, 2);
    for server in &servers {
        println!("mcp connect {}: {} ms (handshake + tools/list)", server.name, server.connect_millis.unwrap_or_default());
    }
    let lock = std::fs::read_to_string(cowork::mcp::orphans::lock_path(data.path(), "stdio")).unwrap();
    let pid: u32 = serde_json::from_str::<serde_json::Value>(&lock).unwrap()["pid"].as_u64().unwrap() as u32;
    println!(
        "mcp memory: cowork +{} KiB for two connections; the stdio server (node) {} KiB, the HTTP server (node) {} KiB",
        rss_kib(std::process::id()).saturating_sub(rss_before),
        rss_kib(pid),
        rss_kib(http.id())
    );
    let client = McpClient { commands: worker.commands.clone() };
    let stop = AtomicBool::new(false);
    for server in ["stdio", "http"] {
        let mut samples: Vec<Duration> = (0..500)
            .map(|i| {
                let started = Instant::now();
                let out = client.call(server, "echo", json!({"message": format!("m{i}")}), i, &stop, Duration::from_secs(10));
                assert!(!out.is_error, "{out:?}");
                started.elapsed()
            })
            .collect();
        samples.sort();
        println!("mcp echo round trip over {server}: p50 {:?}, p95 {:?}", samples[samples.len() / 2], samples[samples.len() * 95 / 100]);
        c.bench_function(&format!("mcp echo over {server}"), |b| b.iter(|| client.call(server, "echo", json!({"message": "x"}), 0, &stop, Duration::from_secs(10))));
    }
    worker.shutdown(cowork::mcp::worker::McpCommand::Shutdown, Duration::from_secs(5));
    let _ = http.kill();
    let _ = http.wait();
}

/// Proportional set size of `pid` and every process under it (Chromium's
/// processes share much; PSS counts shared pages once across them).
fn tree_pss_kib(root: u32) -> (u64, usize) {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // The fields after the command's closing parenthesis: state, ppid, ...
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok()).unwrap_or(0);
        parents.push((pid, ppid));
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(parents.iter().filter(|(_, ppid)| *ppid == parent).map(|(pid, _)| *pid));
        i += 1;
    }
    let pss = |pid: u32| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .ok()
            .and_then(|s| s.lines().find(|l| l.starts_with("Pss:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
            .unwrap_or(0)
    };
    (tree.iter().map(|pid| pss(*pid)).sum(), tree.len())
}

fn browser(c: &mut Criterion) {
    if std::env::var("COWORK_PLAYWRIGHT_MCP").is_err() || !std::path::Path::new("/usr/bin/chromium").exists() {
        eprintln!("COWORK_PLAYWRIGHT_MCP is not set or chromium is missing: source scripts/common.sh; setup_mcp_server");
        return;
    }
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("mcp-servers.json"), json!({"mcpServers": {"browser": {"builtin": "browser"}}}).to_string()).unwrap();
    let (events_tx, events) = crossbeam_channel::bounded(1024);
    let sink = cowork::runtime::EventSink::<cowork::events::AppEvent>::new(events_tx, || {}).narrow();
    let mut worker = cowork::mcp::worker::spawn_mcp(data.path().to_owned(), sink, cowork::runtime::RestartPolicy::default()).unwrap();
    let server = running(&events, 1).remove(0);
    println!("browser connect: {} ms (Playwright's server; Chromium starts at the first page)", server.connect_millis.unwrap_or_default());
    let lock = std::fs::read_to_string(cowork::mcp::orphans::lock_path(data.path(), "browser")).unwrap();
    let pid: u32 = serde_json::from_str::<serde_json::Value>(&lock).unwrap()["pid"].as_u64().unwrap() as u32;
    let (idle, _) = tree_pss_kib(pid);
    let client = McpClient { commands: worker.commands.clone() };
    let stop = AtomicBool::new(false);
    let page = "data:text/html,<title>Bench</title><h1>A page</h1><p>Some text to draw.</p>";
    let started = Instant::now();
    let opened = client.call("browser", "browser_navigate", json!({"url": page}), 1, &stop, Duration::from_secs(60));
    assert!(!opened.is_error, "{opened:?}");
    let first = started.elapsed();
    let started = Instant::now();
    let shot = client.call("browser", "browser_take_screenshot", json!({"type": "png"}), 2, &stop, Duration::from_secs(60));
    let shot_time = started.elapsed();
    let (open, processes) = tree_pss_kib(pid);
    println!(
        "browser: first page {first:?} (Chromium starting), screenshot {shot_time:?}; memory (PSS) {} MiB with Playwright alone, {} MiB with a page open ({processes} processes)",
        idle / 1024,
        open / 1024
    );
    worker.shutdown(cowork::mcp::worker::McpCommand::Shutdown, Duration::from_secs(10));
    let image = shot.images.into_iter().next().expect("the screenshot came back as an image");
    let size = image::load_from_memory(&image.data).map(|i| (i.width(), i.height())).unwrap_or_default();
    println!("browser screenshot: {} KiB png, {}x{}", image.data.len() / 1024, size.0, size.1);
    c.bench_function("thumbnail of a browser screenshot", |b| b.iter(|| cowork::media::thumbnail(&image.data, 480).unwrap()));
}

fn serve_search(c: &mut Criterion) {
    let n: usize = std::env::var("COWORK_BENCH_SERVE_CHUNKS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let data = tempfile::tempdir().unwrap();
    let started = Instant::now();
    memory::typed_chunks(data.path(), n);
    println!("serve: {n} typed chunks with vectors written in {:.0} s", started.elapsed().as_secs_f64());
    let paths = cowork::config::Paths { data_dir: data.path().to_owned(), models_dir: std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models") };
    let token = cowork::mcp::serve::token(data.path()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let options = cowork::mcp::serve::ServeOptions { http: Some(([127, 0, 0, 1], port).into()), allow: Vec::new(), consent_wait: Duration::ZERO };
    let served = paths.clone();
    std::thread::Builder::new().name("bench-mcp-serve".into()).spawn(move || cowork::mcp::serve::serve(&served, options)).unwrap();
    let client_dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"cowork": {"url": format!("http://127.0.0.1:{port}/mcp"), "headers": {"Authorization": format!("Bearer {token}")}}}});
    std::fs::write(client_dir.path().join("mcp-servers.json"), config.to_string()).unwrap();
    let (events_tx, events) = crossbeam_channel::bounded(1024);
    let sink = cowork::runtime::EventSink::<cowork::events::AppEvent>::new(events_tx, || {}).narrow();
    let mut worker = cowork::mcp::worker::spawn_mcp(client_dir.path().to_owned(), sink, cowork::runtime::RestartPolicy::default()).unwrap();
    running(&events, 1);
    let client = McpClient { commands: worker.commands.clone() };
    let stop = AtomicBool::new(false);
    let search = |query: &str| client.call("cowork", "search_memory", json!({"query": query, "limit": 8}), 0, &stop, Duration::from_secs(120));
    // The first call asks for consent; allow the client as the sidebar would.
    let refused = search("budget");
    assert!(refused.is_error, "{refused:?}");
    let conn = cowork::store::open_writer(&paths.db_path()).unwrap();
    for pending in cowork::agent::store::mcp_clients(&conn).unwrap() {
        let write = cowork::agent::store::AgentWrite::McpClientDecided { name: pending.name, allowed: true, by: "bench".into(), at_millis: cowork::ids::now_millis() };
        cowork::agent::store::apply(&conn, &write).unwrap();
    }
    // The first search opens (at 100k: builds) the vector index.
    let started = Instant::now();
    let first = search("budget meeting notes");
    assert!(!first.is_error && first.content.contains("note"), "{first:?}");
    println!("serve: first search (opens the vector index) {:.1} s", started.elapsed().as_secs_f64());
    let queries = ["budget meeting notes", "flight and hotel for the trip", "kubernetes deploy failed", "login bug on safari", "insurance and passport"];
    let mut samples: Vec<Duration> = (0..200)
        .map(|i| {
            let started = Instant::now();
            let out = search(queries[i % queries.len()]);
            assert!(!out.is_error, "{out:?}");
            started.elapsed()
        })
        .collect();
    samples.sort();
    println!("cowork mcp serve search_memory over HTTP at {n} chunks: p50 {:?}, p95 {:?}", samples[samples.len() / 2], samples[samples.len() * 95 / 100]);
    c.bench_function("cowork mcp serve search_memory", |b| b.iter(|| search("budget meeting notes")));
    worker.shutdown(cowork::mcp::worker::McpCommand::Shutdown, Duration::from_secs(5));
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(Duration::from_secs(5));
    targets = bench, browser, serve_search
}
criterion_main!(benches);
