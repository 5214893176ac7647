//! The `cowork` binary end to end: --version, doctor, ask, mcp-tools and the
//! --screenshot rendering of the real window under Xvfb.

use std::process::Command;

use super::support::{XSession, chat_model, have_program, models_dir, require, temp_dir};

fn cowork() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cowork"));
    command.env("COWORK_LOG", "warn");
    command
}

/// The sidebar on a test X server, with its own data directory and the real models.
fn sidebar(x: &XSession, data: &std::path::Path) -> Command {
    let mut command = x.command(env!("CARGO_BIN_EXE_cowork"));
    command.env("COWORK_LOG", "warn").arg("--data-dir").arg(data).arg("--models-dir").arg(models_dir());
    command
}

#[test]
fn version_names_the_git_revision_and_build_date() {
    let out = cowork().arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.starts_with("cowork 0.1.0 ("), "{text}");
    assert!(text.contains("built 20"), "{text}");
    assert!(!text.contains("(unknown"), "git revision embedded: {text}");
}

#[test]
fn doctor_exercises_every_part_and_reports_json() {
    if !require(chat_model().is_file(), "the models") {
        return;
    }
    let data = temp_dir();
    let out = cowork().args(["doctor", "--json"]).arg("--data-dir").arg(data.path()).output().unwrap();
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).expect("doctor --json prints JSON");
    let status = |area: &str, name: &str| -> String {
        checks
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["area"] == area && c["name"] == name)
            .map(|c| format!("{} {}", c["status"].as_str().unwrap(), c["detail"]))
            .unwrap_or_else(|| panic!("no check {area}/{name} in {checks}"))
    };
    for (area, name) in [
        ("native", "sqlite"),
        ("native", "faiss"),
        ("native", "whisper"),
        ("native", "mistralrs"),
        ("native", "tesseract"),
        ("worker", "store"),
        ("worker", "llm"),
        ("model", "smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"),
        ("model", "whisper-tiny-en/ggml-tiny.en.bin"),
    ] {
        let line = status(area, name);
        assert!(line.starts_with("ok"), "{area}/{name}: {line}");
    }
    // Display, database and capture depend on the machine; they must be reported either way.
    for (area, name) in [("display", "x11"), ("database", "cowork.db"), ("worker", "capture")] {
        status(area, name);
    }
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Without Tesseract: a warning that says what to install, and the rest still passes.
    let out = cowork().args(["doctor", "--json"]).arg("--data-dir").arg(data.path()).env("COWORK_TESSERACT_LIBRARY", data.path().join("libtesseract.so.5")).output().unwrap();
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).expect("doctor --json prints JSON");
    let ocr = checks.as_array().unwrap().iter().find(|c| c["name"] == "tesseract").unwrap();
    assert_eq!(ocr["status"], "warn", "{ocr}");
    assert!(ocr["detail"].as_str().unwrap().contains("install the packages libtesseract5 and tesseract-ocr-eng"), "{ocr}");
    assert!(out.status.success(), "a missing Tesseract is no failure: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn doctor_names_a_corrupt_model_and_exits_non_zero_without_crashing() {
    let models = temp_dir();
    let dir = models.path().join("smollm2-135m-instruct");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SmolLM2-135M-Instruct.Q4_1.gguf"), b"GGUF truncated").unwrap();
    let data = temp_dir();
    let out = cowork()
        .args(["doctor", "--json"])
        .arg("--data-dir")
        .arg(data.path())
        .arg("--models-dir")
        .arg(models.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("corrupt or incomplete"), "{text}");
    assert!(text.contains("missing"), "other models are reported missing: {text}");
}

#[test]
fn ask_streams_an_answer_to_stdout() {
    if !require(chat_model().is_file(), "the SmolLM2 model") {
        return;
    }
    let data = temp_dir();
    let out = cowork()
        .args(["ask", "--show-context", "What is the capital of France?"])
        .arg("--data-dir")
        .arg(data.path())
        .arg("--models-dir")
        .arg(models_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(!answer.trim().is_empty());
    assert!(stderr.contains("tokens/s"), "{stderr}");
    assert!(data.path().join("cowork.db").is_file(), "the exchange is saved");
}

#[test]
fn ask_answers_with_the_qwen_model_joined_from_six_packages_and_refuses_an_unknown_name() {
    let qwen = models_dir().join("qwen2.5-coder-0.5b-instruct/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    if !require(qwen.is_file(), "the Qwen2.5-Coder-0.5B model") {
        return;
    }
    let data = temp_dir();
    let ask = |model: &str| {
        cowork()
            .args(["ask", "--local-model", model, "What is the capital of France? Answer with one word."])
            .arg("--data-dir")
            .arg(data.path())
            .arg("--models-dir")
            .arg(models_dir())
            .output()
            .unwrap()
    };
    let out = ask("qwen2.5-coder-0.5b-instruct");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(answer.contains("Paris"), "{answer}");
    let out = ask("gpt-9");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("no chat model named \"gpt-9\"") && stderr.contains("qwen2.5-coder-0.5b-instruct"), "{stderr}");
}

#[test]
fn mcp_tools_lists_the_reference_servers_tools() {
    let server = std::env::var("COWORK_TEST_MCP_EVERYTHING").unwrap_or_default();
    if !require(!server.is_empty() && have_program("node"), "node and @modelcontextprotocol/server-everything") {
        return;
    }
    let out = cowork().args(["mcp-tools", "--", "node", &server, "stdio"]).env_clear().env("PATH", std::env::var("PATH").unwrap()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for tool in ["echo", "get-sum"] {
        assert!(text.lines().any(|l| l.starts_with(&format!("{tool}\t"))), "{tool} missing from {text}");
    }
}

#[test]
fn screenshot_renders_the_real_sidebar_window() {
    if !require(XSession::available(), "Xvfb") {
        return;
    }
    let x = XSession::start();
    let data = temp_dir();
    let png_path = data.path().join("sidebar.png");
    let out = sidebar(&x, data.path())
        .arg("--screenshot")
        .arg(&png_path)
        .env("COWORK_LOG", "info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("first frame"), "{stderr}");
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png_path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert!(info.width >= 200 && info.height >= 300, "{}x{}", info.width, info.height);
    let distinct: std::collections::HashSet<&[u8]> = pixels[..info.buffer_size()].chunks(4).collect();
    assert!(distinct.len() > 20, "the window is not blank: {} colours", distinct.len());
    // Keep a copy for people to look at.
    let _ = std::fs::copy(&png_path, std::env::temp_dir().join("cowork-sidebar.png"));
}

#[test]
fn the_global_hotkey_opens_the_quick_prompt_window_and_the_sidebar_is_always_on_top() {
    if !require(XSession::available(), "Xvfb") {
        return;
    }
    let x = XSession::start();
    let data = temp_dir();
    let mut app = sidebar(&x, data.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let find = |name: &str| x.xdotool(&["search", "--name", &format!("^{name}$")]).lines().next().map(str::to_owned);
    let found = super::support::eventually(std::time::Duration::from_secs(20), || find("cowork").is_some());
    let sidebar = find("cowork").unwrap_or_default();
    let wm_state = || {
        let out = Command::new("xprop").args(["-id", &sidebar, "_NET_WM_STATE"]).env("DISPLAY", &x.display).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The window manager applies the state shortly after mapping.
    let on_top = super::support::eventually(std::time::Duration::from_secs(10), || wm_state().contains("_NET_WM_STATE_ABOVE"));
    let state = wm_state();
    let geometry = x.xdotool(&["getwindowgeometry", &sidebar]);
    // The real X server grabs the key for us: press it as a user would.
    x.xdotool(&["key", "ctrl+alt+space"]);
    let opened = super::support::eventually(std::time::Duration::from_secs(10), || find("cowork quick prompt").is_some());
    let _ = app.kill();
    let output = app.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(found, "the sidebar window appeared: {stderr}");
    assert!(on_top, "the sidebar is always on top: {state}");
    assert!(geometry.contains("Geometry: 380x"), "default width 380: {geometry}");
    assert!(opened, "Ctrl+Alt+Space opened the quick prompt: {stderr}");
}

#[test]
fn sigterm_closes_the_sidebar_gracefully_and_flushes_the_open_session() {
    if !require(XSession::available(), "Xvfb") {
        return;
    }
    let mut x = XSession::start();
    let editor = x.open_xterm("notes.txt - editor");
    x.activate(&editor);
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    // The user answered the first-run question earlier: streams record.
    let conn = cowork::store::open_writer(&db).unwrap();
    cowork::store::set_setting(&conn, "capture.streams_confirmed", "true", 0).unwrap();
    drop(conn);
    let mut app = sidebar(&x, data.path())
        .spawn()
        .unwrap();
    let open_session = || {
        cowork::store::open_read_only(&db)
            .ok()
            .and_then(|c| cowork::capture::db::recent_sessions(&c, 5).ok())
            .is_some_and(|s| s.iter().any(|s| s.title == "notes.txt - editor" && s.ended_at_millis.is_none()))
    };
    assert!(super::support::eventually(std::time::Duration::from_secs(20), open_session), "capture recorded the editor");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(app.id() as i32, libc::SIGTERM) };
    let status = app.wait().unwrap();
    assert!(status.success(), "exit status {status:?}");
    let reader = cowork::store::open_read_only(&db).unwrap();
    let session = cowork::capture::db::recent_sessions(&reader, 5)
        .unwrap()
        .into_iter()
        .find(|s| s.title == "notes.txt - editor")
        .unwrap();
    assert_eq!(session.end_reason, Some(cowork::records::SessionEnd::Shutdown), "{session:?}");
}

#[test]
fn export_and_delete_from_the_command_line() {
    use cowork::records::{ActivitySession, SessionEnd};
    let data = temp_dir();
    let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
    let now = cowork::ids::now_millis();
    for (id, title, ago_secs, reason) in
        [(1, "design review", 7_200, SessionEnd::Afk), (2, "inbox", 3_000, SessionEnd::Switch), (3, "bank statement", 600, SessionEnd::Switch)]
    {
        let session = ActivitySession {
            session_id: id,
            app: "firefox".into(),
            title: title.into(),
            pid: None,
            window_id: 1,
            started_at_millis: now - ago_secs * 1000,
            ended_at_millis: Some(now - ago_secs * 1000 + 300_000),
            end_reason: Some(reason),
            ..Default::default()
        };
        cowork::capture::db::upsert_session(&conn, &session).unwrap();
    }
    drop(conn);
    let aw = data.path().join("aw.json");
    let out = cowork().args(["export", "--format", "activitywatch", "--out"]).arg(&aw).arg("--data-dir").arg(data.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&aw).unwrap()).unwrap();
    let buckets = doc["buckets"].as_object().unwrap();
    let window = buckets.values().find(|b| b["type"] == "currentwindow").unwrap();
    assert_eq!(window["events"].as_array().unwrap().len(), 3);
    assert!(buckets.values().any(|b| b["type"] == "afkstatus"));

    let out = cowork().args(["delete", "--last", "15m"]).arg("--data-dir").arg(data.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let jsonl = data.path().join("all.jsonl");
    let out = cowork().args(["export", "--since", "1d", "--out"]).arg(&jsonl).arg("--data-dir").arg(data.path()).output().unwrap();
    assert!(out.status.success());
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let titles: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["title"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(titles, ["design review", "inbox"], "the last 15 minutes are gone");
}

/// `cowork capture simulate` of `script` into `data`, starting at `start`.
fn simulate(script: &std::path::Path, data: &std::path::Path, start: &str) -> std::process::Output {
    cowork()
        .args(["capture", "simulate", "--start", start, "--script"])
        .arg(script)
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap()
}

#[test]
fn simulate_replays_a_day_through_the_firewall_into_the_database() {
    let data = temp_dir();
    let script = super::support::repo_dir().join("assets/scripts/sample-day.jsonl");
    let out = simulate(&script, data.path(), "2026-11-20T08:00:00Z");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("2 typed chunks, 1 clipboard events (2 windows excluded by the firewall, 1 AFK periods)"), "{stderr}");
    let reader = cowork::store::open_read_only(&data.path().join("cowork.db")).unwrap();
    let sessions = cowork::capture::db::sessions_since(&reader, 0, 100).unwrap();
    let titles: Vec<&str> = sessions.iter().map(|s| s.title.as_str()).collect();
    assert!(!titles.iter().any(|t| t.contains("Passwords") || t.contains("Private Browsing")), "{titles:?}");
    assert_eq!(sessions.first().unwrap().started_at_millis, cowork::ids::parse_time("2026-11-20T08:00:00Z", 0).unwrap());
    assert_eq!(cowork::capture::db::search_sessions(&reader, "budget", 5).unwrap().len(), 1);
    // Typing and copying replayed into their windows; the password manager's copy and the private span never stored.
    let typed = cowork::capture::db::search_chunks(&reader, "shipping", 5).unwrap();
    assert_eq!(typed.len(), 1);
    assert_eq!(typed[0].app, "Slack");
    assert_eq!(cowork::capture::db::search_chunks(&reader, "salary", 5).unwrap().len(), 0);
    let clips = cowork::capture::db::clips_between(&reader, 0, i64::MAX).unwrap();
    assert_eq!(clips.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(), ["https://ci.example/runs/4812"]);
    // `cowork search` finds the day across streams, as JSON.
    let out = cowork().args(["search", "--json", "release"]).arg("--data-dir").arg(data.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let streams: Vec<&str> = hits.as_array().unwrap().iter().map(|h| h["stream"].as_str().unwrap()).collect();
    assert!(streams.contains(&"window") && streams.contains(&"typing"), "{hits}");
    let out = cowork().args(["search", "release", "--stream", "typing", "--app", "slack"]).arg("--data-dir").arg(data.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().count() == 1 && text.contains("[release]"), "{text}");
    let afk = cowork::capture::db::afk_between(&reader, 0, i64::MAX).unwrap();
    assert_eq!(afk.iter().filter(|e| e.data == cowork::capture::heartbeat::AfkStatus::Afk).count(), 1, "{afk:?}");
}

#[test]
fn kill_9_during_a_capture_burst_loses_no_committed_row_and_keeps_the_database_sound() {
    use std::io::BufRead;
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    let script = super::support::repo_dir().join("assets/scripts/sample-day.jsonl");
    let count = || -> i64 {
        let conn = cowork::store::open_writer(&db).unwrap();
        conn.query_row("SELECT count(*) FROM activity_sessions", [], |r| r.get(0)).unwrap()
    };
    let mut before = 0i64;
    for iteration in 0..20u32 {
        let mut child = cowork()
            // Recent start: retention (90 days by default) must not take earlier rows.
            .args(["capture", "simulate", "--progress", "--repeat", "100000", "--start", "1h", "--script"])
            .arg(&script)
            .arg("--data-dir")
            .arg(data.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        // Let it commit a varying number of batches, then kill it mid-burst.
        let mut committed = 0i64;
        for _ in 0..(1 + iteration % 4) {
            let line = lines.next().expect("progress line").unwrap();
            committed = line.strip_prefix("committed ").unwrap().parse().unwrap();
        }
        // SAFETY: killing our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        let after = count();
        assert!(after >= before + committed, "iteration {iteration}: {after} rows, expected at least {before} + {committed}");
        before = after;
    }
    // The next start closes what the last kill left open (whether the kill
    // landed while a session was open depends on timing).
    let out = simulate(&script, data.path(), "1h");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let conn = cowork::store::open_writer(&db).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    let open: i64 = conn.query_row("SELECT count(*) FROM activity_sessions WHERE ended_at_ms IS NULL", [], |r| r.get(0)).unwrap();
    assert_eq!(open, 0, "sessions left open by a kill are closed at the next start");
}

#[test]
fn before_the_first_run_answer_the_sidebar_records_nothing() {
    if !require(XSession::available(), "Xvfb") {
        return;
    }
    let mut x = XSession::start();
    let editor = x.open_xterm("private plans");
    x.activate(&editor);
    let data = temp_dir();
    let mut app = sidebar(&x, data.path()).spawn().unwrap();
    // Long enough for capture to have recorded the window if it were allowed to.
    std::thread::sleep(std::time::Duration::from_secs(3));
    x.activate(&editor);
    std::thread::sleep(std::time::Duration::from_secs(1));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(app.id() as i32, libc::SIGTERM) };
    assert!(app.wait().unwrap().success());
    let reader = cowork::store::open_read_only(&data.path().join("cowork.db")).unwrap();
    assert_eq!(cowork::capture::db::session_count(&reader).unwrap(), 0);
}

#[test]
fn doctor_reports_each_streams_last_event_from_the_database() {
    use cowork::records::{ActivitySession, SessionEnd};
    let data = temp_dir();
    let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
    let now = cowork::ids::now_millis();
    let session = ActivitySession {
        session_id: 1,
        app: "XTerm".into(),
        title: "t".into(),
        pid: None,
        window_id: 1,
        started_at_millis: now - 20_000,
        ended_at_millis: Some(now - 10_000),
        end_reason: Some(SessionEnd::Switch),
        ..Default::default()
    };
    cowork::capture::db::upsert_session(&conn, &session).unwrap();
    drop(conn);
    let out = cowork().args(["doctor", "--json"]).arg("--data-dir").arg(data.path()).output().unwrap();
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let find = |name: &str| checks.as_array().unwrap().iter().find(|c| c["area"] == "stream" && c["name"] == name).cloned().unwrap();
    let windows = find("windows");
    assert_eq!(windows["status"], "ok");
    assert!(windows["detail"].as_str().unwrap().contains("1 in the last minute"), "{windows}");
    assert_eq!(find("typing")["status"], "warn");
}

/// Runs `cowork ARGS` inside network namespace `ns` (only loopback), offline.
fn in_netns(ns: &str, data: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(env!("CARGO_BIN_EXE_cowork"))
        .arg("--offline")
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env("COWORK_LOG", "info")
        .output()
        .unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn offline_in_a_loopback_only_network_namespace_everything_local_works_and_the_gate_refuses_the_rest() {
    let root = unsafe { libc::geteuid() } == 0;
    if !require(root && super::support::have_program("ip") && chat_model().is_file(), "root, iproute2 and the models") {
        return;
    }
    let ns = format!("cowork-test-{}", std::process::id());
    let created = Command::new("ip").args(["netns", "add", &ns]).status().unwrap().success();
    assert!(created, "ip netns add");
    struct Namespace(String);
    impl Drop for Namespace {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _guard = Namespace(ns.clone());
    assert!(Command::new("ip").args(["-n", &ns, "link", "set", "lo", "up"]).status().unwrap().success());
    let data = temp_dir();
    std::fs::write(
        data.path().join("providers.json"),
        r#"{"providers": [{"name": "openai", "model": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}]}"#,
    )
    .unwrap();
    let models = models_dir();
    let models_arg = models.to_str().unwrap();

    // The local model answers.
    let (ok, text) = in_netns(&ns, data.path(), &["--models-dir", models_arg, "ask", "Say hello in one word."]);
    assert!(ok, "{text}");
    // Capture's pipeline (a scripted day into the database) works.
    let script = super::support::repo_dir().join("assets/scripts/sample-day.jsonl");
    let (ok, text) = in_netns(&ns, data.path(), &["capture", "simulate", "--script", script.to_str().unwrap()]);
    assert!(ok, "{text}");
    // A cloud provider is refused by the gate, before any connection.
    let (ok, cloud) = Command::new("ip")
        .args(["netns", "exec", &ns])
        .arg(env!("CARGO_BIN_EXE_cowork"))
        .args(["--offline", "--data-dir"])
        .arg(data.path())
        .args(["ask", "--provider", "openai", "hi"])
        .env("OPENAI_API_KEY", "sk-test")
        .env("COWORK_LOG", "info")
        .output()
        .map(|o| (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))))
        .unwrap();
    assert!(!ok && cloud.contains("offline mode: refused a connection to api.openai.com"), "{cloud}");
    // A model download from upstream is refused by the gate too.
    let empty_models = temp_dir();
    let (ok, fetch) = in_netns(
        &ns,
        data.path(),
        &["--models-dir", empty_models.path().to_str().unwrap(), "models", "fetch"],
    );
    assert!(!ok && fetch.contains("offline mode: refused a connection to huggingface.co"), "{fetch}");
    // Nothing tried to go around the gate: no connection failed on the missing network.
    for text in [&cloud, &fetch] {
        assert!(!text.contains("Network is unreachable") && !text.contains("os error 101") && !text.contains("failed to lookup"), "{text}");
    }
}

/// A real aw-server (ActivityWatch 0.12, from PyPI) on loopback with its own home; killed on drop.
struct AwServer {
    _child: super::support::ChildGuard,
    _home: tempfile::TempDir,
    base: String,
}

impl AwServer {
    fn start(program: &str) -> AwServer {
        let home = temp_dir();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(program)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("XDG_CACHE_HOME", home.path().join("cache"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let server = AwServer { _child: super::support::ChildGuard(child), _home: home, base: format!("http://127.0.0.1:{port}/api/0") };
        assert!(
            super::support::eventually(std::time::Duration::from_secs(30), || ureq::get(format!("{}/info", server.base)).call().is_ok()),
            "aw-server answered on {}",
            server.base
        );
        server
    }

    fn get(&self, path: &str) -> serde_json::Value {
        let mut response = ureq::get(format!("{}{path}", self.base)).call().unwrap_or_else(|err| panic!("GET {path}: {err}"));
        serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap()
    }

    /// POSTs JSON; returns the status and the body (errors included).
    fn post(&self, path: &str, body: &serde_json::Value) -> (u16, String) {
        let response = ureq::post(format!("{}{path}", self.base))
            .config()
            .http_status_as_error(false)
            .build()
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .unwrap_or_else(|err| panic!("POST {path}: {err}"));
        let status = response.status().as_u16();
        (status, response.into_body().read_to_string().unwrap_or_default())
    }
}

#[test]
fn activitywatch_export_imports_into_a_real_aw_server_that_already_has_its_watchers_buckets() {
    use cowork::records::{ActivitySession, SessionEnd};
    let program = std::env::var("COWORK_TEST_AW_SERVER").unwrap_or_default();
    if !require(!program.is_empty() && std::path::Path::new(&program).is_file(), "aw-server (scripts/test installs it; COWORK_TEST_AW_SERVER)") {
        return;
    }
    let data = temp_dir();
    let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
    let now = cowork::ids::now_millis();
    for (id, title, url, ago_secs) in [(1, "Quarterly plan - Chromium", Some("https://plan.example/q3"), 3_600), (2, "notes.md - Editor", None, 1_800)] {
        let session = ActivitySession {
            session_id: id,
            app: if url.is_some() { "Chromium".into() } else { "Editor".into() },
            title: title.into(),
            window_id: id as u32,
            started_at_millis: now - ago_secs * 1000,
            ended_at_millis: Some(now - ago_secs * 1000 + 600_000),
            end_reason: Some(SessionEnd::Switch),
            url: url.map(str::to_owned),
            url_source: url.map(|_| cowork::records::UrlSource::Atspi),
            ..Default::default()
        };
        cowork::capture::db::upsert_session(&conn, &session).unwrap();
    }
    drop(conn);
    let file = data.path().join("aw.json");
    let out = cowork().args(["export", "--format", "activitywatch", "--out"]).arg(&file).arg("--data-dir").arg(data.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let export: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let host = export["buckets"].as_object().unwrap().values().next().unwrap()["hostname"].as_str().unwrap().to_owned();

    // The user already runs ActivityWatch here: its watchers' buckets exist, with an event each.
    let server = AwServer::start(&program);
    for (watcher, kind, data) in [
        ("aw-watcher-window", "currentwindow", serde_json::json!({"app": "Terminal", "title": "theirs"})),
        ("aw-watcher-afk", "afkstatus", serde_json::json!({"status": "not-afk"})),
        ("aw-watcher-web", "web.tab.current", serde_json::json!({"url": "https://theirs.example", "title": "theirs"})),
    ] {
        let id = format!("{watcher}_{host}");
        let (status, body) = server.post(&format!("/buckets/{id}"), &serde_json::json!({"client": watcher, "type": kind, "hostname": host}));
        assert!(status == 200 || status == 304, "create {id}: {status} {body}");
        let event = serde_json::json!([{"timestamp": cowork::ids::rfc3339(now - 60_000), "duration": 5.0, "data": data}]);
        let (status, body) = server.post(&format!("/buckets/{id}/events"), &event);
        assert_eq!(status, 200, "event in {id}: {body}");
    }

    let (status, body) = server.post("/import", &export);
    assert_eq!(status, 200, "the import is accepted beside the watchers' buckets: {body}");
    let buckets = server.get("/buckets/");
    let buckets = buckets.as_object().unwrap();
    for (id, kind) in [("cowork-window", "currentwindow"), ("cowork-afk", "afkstatus"), ("cowork-web", "web.tab.current")] {
        let bucket = &buckets[&format!("{id}_{host}")];
        assert_eq!(bucket["type"], kind, "{bucket}");
        assert_eq!(bucket["hostname"], host.as_str(), "{bucket}");
    }
    let windows = server.get(&format!("/buckets/cowork-window_{host}/events"));
    let mut titles: Vec<&str> = windows.as_array().unwrap().iter().map(|e| e["data"]["title"].as_str().unwrap()).collect();
    titles.sort();
    assert_eq!(titles, ["Quarterly plan - Chromium", "notes.md - Editor"]);
    let web = server.get(&format!("/buckets/cowork-web_{host}/events"));
    assert_eq!(web[0]["data"]["url"], "https://plan.example/q3");
    assert_eq!(web[0]["duration"].as_f64(), Some(600.0));
    // The watchers' own data is untouched.
    let theirs = server.get(&format!("/buckets/aw-watcher-window_{host}/events"));
    assert_eq!(theirs.as_array().unwrap().len(), 1);
    assert_eq!(theirs[0]["data"]["title"], "theirs");
}

/// `cowork mcp import` takes Claude Desktop's file as it is: the servers land in
/// mcp-servers.json, their secrets in the secret store (no byte of them in any file in
/// plain text), `cowork mcp list` shows them, and a second import keeps what is there.
#[test]
fn mcp_import_round_trips_claude_desktops_config_with_secrets_kept_out_of_files() {
    let dir = temp_dir();
    let claude = dir.path().join("claude_desktop_config.json");
    std::fs::write(
        &claude,
        r#"{"mcpServers": {
            "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]},
            "github": {"command": "github-mcp", "env": {"GITHUB_TOKEN": "ghp_SECRETSECRET1234"}},
            "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer tok_SECRETSECRET5678"}}
        }}"#,
    )
    .unwrap();
    let data = dir.path().join("data");
    let run = |args: &[&str]| cowork().arg("--data-dir").arg(&data).args(args).env("COWORK_LOG", "warn").output().unwrap();
    let out = run(&["mcp", "import", claude.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("added ")).count(), 3);
    for entry in std::fs::read_dir(&data).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("SECRETSECRET"), "a secret in plain text");
    }
    let list = run(&["mcp", "list"]);
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(listed.contains("everything\tstdio: npx -y @modelcontextprotocol/server-everything") && listed.contains("remote\thttp: http://127.0.0.1:9/mcp"), "{listed}");
    assert!(listed.contains("(start 30 s, call 300 s)"), "{listed}");
    let secrets = run(&["secrets", "list"]);
    assert!(String::from_utf8_lossy(&secrets.stdout).contains("mcp/github/env/GITHUB_TOKEN"), "{}", String::from_utf8_lossy(&secrets.stdout));
    let again = run(&["mcp", "import", claude.to_str().unwrap()]);
    assert_eq!(String::from_utf8_lossy(&again.stdout).lines().filter(|l| l.starts_with("kept ")).count(), 3);
}

/// `cowork rules add --until`: a span counts forward from now (30s, 2h, 3d); a time already
/// past is refused rather than saved as a rule that never applies.
#[test]
fn rules_until_a_span_counts_forward_and_a_past_time_is_refused() {
    let data = temp_dir();
    let add = |until: &str| {
        cowork()
            .arg("--data-dir")
            .arg(data.path())
            .args(["rules", "add", "run_command", "--action", "deny", "--until", until, "--example", r#"{"command": "ls"}"#])
            .output()
            .unwrap()
    };
    let before = cowork::ids::now_millis();
    let out = add("30s");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list = cowork().arg("--data-dir").arg(data.path()).args(["rules", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&list.stdout).into_owned();
    let until = listed.split(" until ").nth(1).map(str::trim).expect("the rule has its end");
    let at = cowork::ids::parse_time(until, before).unwrap();
    assert!(at >= before + 29_000 && at <= before + 120_000, "30 s from now: {listed}");
    let past = add("2020-01-01");
    assert!(!past.status.success() && String::from_utf8_lossy(&past.stderr).contains("already past"), "{}", String::from_utf8_lossy(&past.stderr));
}
