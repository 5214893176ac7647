//! Headless subcommands, called by `main.rs`: here `mcp-tools` and `mcp …`,
//! `export`, `delete`, `capture simulate` and `capture run`; in the submodules
//! `doctor`, `ask` (and `agent`: `ask --agent`, `approve`, `tools`, `rules`,
//! `audit`), `models`, `voice` (`transcribe`), `memory` (`search`, `memory …`),
//! `documents` (and `undo`), `report` (time per project), `recap` (a day's or week's recap, written now), `settings`, `automations`, `apps` and `forget`
//! (`forget-everything`, also what Settings → Your data → Forget everything
//! runs). They run without the window: `ask`, `capture run`, `automations run`
//! and `doctor` start the same workers the sidebar does (`Workers::start`),
//! others a store worker of their own or a connection.

pub mod agent;
pub mod apps;
pub mod ask;
pub mod automations;
pub mod calendar;
pub mod doctor;
pub mod documents;
pub mod forget;
pub mod memory;
pub mod models;
pub mod recap;
pub mod report;
pub mod settings;
pub mod voice;

use std::path::Path;
use crate::runtime::RuntimeEvent;
use std::time::Duration;

use anyhow::Context;

use crate::config::Paths;
use crate::runtime::{EventSink, RestartPolicy};
use crate::erase::Deleted;
use crate::store::StoreCommand;
use crate::workers::spawn_store;

/// `cowork mcp-tools -- PROGRAM ARGS…`: list an MCP server's tools.
pub fn mcp_tools(command: &[String]) -> anyhow::Result<()> {
    let (program, args) = command.split_first().ok_or_else(|| anyhow::anyhow!("give the server command after --"))?;
    let tools = crate::mcp::list_tools(program, args, Duration::from_secs(30))?;
    for tool in &tools {
        println!("{}\t{}", tool.name, tool.description.lines().next().unwrap_or_default());
    }
    eprintln!("{} tools", tools.len());
    Ok(())
}

/// `cowork mcp import FILE [--allow-env NAME]…`: another assistant's servers
/// added to mcp-servers.json. A server whose values name one of cowork's
/// secrets (`secret:…`), or that wants a variable of cowork's environment the
/// user did not name with `--allow-env`, is refused and said so; the rest are added.
pub fn mcp_import(paths: &Paths, file: &Path, allow_env: &[String]) -> anyhow::Result<()> {
    use crate::mcp::config::{EnvAllowance, FILE_NAME, Imported, McpConfig, import};
    // A provider's key variable is one of cowork's secrets: never a server's bearer token.
    // Without --allow-env no variable is read, and the providers only make the refusals clearer.
    let providers = match crate::brains::Providers::load(&crate::brains::Providers::path(&paths.data_dir)) {
        Ok(providers) => providers,
        Err(_) if allow_env.is_empty() => crate::brains::Providers::default(),
        Err(err) => return Err(err.context("cowork checks that no variable named with --allow-env holds a provider's API key")),
    };
    let reserved = providers.list.iter().filter_map(|p| p.api_key_env.clone().map(|var| (var, p.name.clone()))).collect();
    let env = EnvAllowance::from_env(allow_env, reserved)?;
    let Imported { source, config: imported, refused } = import(file, &env)?;
    paths.ensure_data_dir()?;
    let mut config = McpConfig::load(&paths.data_dir)?;
    let (added, skipped) = config.merge(imported);
    let secrets = crate::secrets::Secrets::open(&paths.data_dir)?;
    config.save(&paths.data_dir, &secrets)?;
    for name in &added {
        println!("added {name}");
    }
    for name in &skipped {
        println!("kept {name}: a server of that name is already configured");
    }
    for crate::mcp::config::Refused { server, why } in &refused {
        println!("refused {server}: {why}");
    }
    eprintln!(
        "{} of {} servers from {source:?} in {}; their env and header values are in {}",
        added.len(),
        added.len() + skipped.len() + refused.len(),
        paths.data_dir.join(FILE_NAME).display(),
        secrets.describe()
    );
    Ok(())
}

/// `cowork mcp list`: the configured servers.
pub fn mcp_list(paths: &Paths) -> anyhow::Result<()> {
    use crate::mcp::config::McpConfig;
    // load() has checked every server's transport.
    let config = McpConfig::load(&paths.data_dir)?;
    for (name, server) in &config.servers {
        let how = server.endpoint();
        let tools = server.enabled_tools.as_ref().map(|t| format!(", tools: {}", t.join(" "))).unwrap_or_default();
        let off = if server.disabled { " (disabled)" } else { "" };
        println!("{name}{off}\t{how}\t(start {} s, call {} s{tools})", server.startup_timeout_secs, server.tool_timeout_secs);
    }
    if config.servers.is_empty() {
        eprintln!("no MCP servers; add some with `cowork mcp import FILE`");
    }
    Ok(())
}

/// `cowork mcp test NAME`: connects on its own, prints what it found; false if it failed.
pub fn mcp_test(paths: &Paths, name: &str) -> anyhow::Result<bool> {
    let config = crate::mcp::config::McpConfig::load(&paths.data_dir)?;
    let Some(server) = config.servers.get(name) else { anyhow::bail!("no MCP server named {name:?} in mcp-servers.json") };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let report = runtime.block_on(crate::mcp::worker::test_server(name, server, &paths.data_dir));
    let ok = match &report.result {
        Ok(figures) => {
            println!("server      {}", figures.server_name);
            println!("protocol    {}", figures.protocol_version);
            println!("tools       {}", figures.tools);
            println!("connect     {} ms", figures.connect_millis);
            println!("round trip  {:.2} ms", figures.round_trip_micros as f64 / 1000.0);
            true
        }
        Err(err) => {
            println!("error       {err}");
            false
        }
    };
    let lines = &report.stderr[report.stderr.len().saturating_sub(20)..];
    if !lines.is_empty() {
        println!("stderr (last {} lines):", lines.len());
        for line in lines {
            println!("  {line}");
        }
    }
    Ok(ok)
}

/// `cowork mcp login NAME`: the OAuth sign-in in the browser, from the terminal.
pub fn mcp_login(paths: &Paths, name: &str) -> anyhow::Result<()> {
    let config = crate::mcp::config::McpConfig::load(&paths.data_dir)?;
    let Some(server) = config.servers.get(name) else { anyhow::bail!("no MCP server named {name:?} in mcp-servers.json") };
    let crate::mcp::config::Transport::Http { url } = server.transport()? else { anyhow::bail!("{name} is not an HTTP server: only those sign in") };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let challenge = crate::mcp::oauth::probe_challenge(url).await?;
        let settings = server.oauth.clone().unwrap_or_default();
        crate::mcp::oauth::sign_in(name, url, challenge.as_deref(), &settings, &paths.data_dir, |link| {
            println!("Sign in to {name} in your browser; if it did not open, visit:\n{link}");
            if let Err(err) = crate::mcp::oauth::open_browser(link) {
                eprintln!("{err:#}");
            }
        })
        .await
    })?;
    println!("signed in to {name}; the tokens are in {}", crate::secrets::Secrets::open(&paths.data_dir)?.describe());
    Ok(())
}

/// `cowork export`: reads through a read-only connection and writes `out`.
pub fn export(paths: &Paths, format: crate::export::Format, since_millis: i64, until_millis: i64, out: &Path) -> anyhow::Result<usize> {
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let file = std::fs::File::create(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut writer = std::io::BufWriter::new(file);
    let count = crate::export::export(&conn, format, since_millis, until_millis, &mut writer)?;
    std::io::Write::flush(&mut writer)?;
    Ok(count)
}

/// `cowork delete`: goes through the store worker, the only writer.
pub fn delete(paths: &Paths, since_millis: i64, until_millis: i64) -> anyhow::Result<Deleted> {
    paths.ensure_data_dir()?;
    let mut store = spawn_store(paths.db_path(), EventSink::<crate::runtime::RuntimeEvent>::ignored(), RestartPolicy { max_restarts: 0, ..RestartPolicy::default() })?;
    let (reply, outcome) = crossbeam_channel::bounded(1);
    store.commands.send(crate::erase::delete_range_command(since_millis, until_millis, Some(reply), crate::runtime::EventSink::ignored()))?;
    let result = outcome.recv_timeout(Duration::from_secs(120)).context("the store did not answer")?;
    store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10));
    result.map_err(anyhow::Error::msg)
}

/// `cowork capture simulate`: the script through the firewall and tracker into
/// the store worker. With `progress`, prints `committed N` after each durable batch.
pub fn simulate(
    paths: &Paths,
    script: &Path,
    start_millis: Option<i64>,
    repeat: u32,
    progress: bool,
) -> anyhow::Result<crate::capture::simulate::ReplayStats> {
    use crate::capture::TrackerOutput;
    use crate::capture::simulate::{ReplayStats, Replayed, duration_millis, parse_script, replay};

    let text = std::fs::read_to_string(script).with_context(|| format!("cannot read {}", script.display()))?;
    let steps = parse_script(&text)?;
    let (workers_settings, _) = crate::workers::read_settings(paths);
    paths.ensure_data_dir()?;
    let mut store = spawn_store(paths.db_path(), EventSink::<crate::runtime::RuntimeEvent>::ignored(), RestartPolicy { max_restarts: 0, ..RestartPolicy::default() })?;
    let span = duration_millis(&steps);
    let mut at = start_millis.unwrap_or_else(|| crate::ids::now_millis() - span * i64::from(repeat));
    // The user's firewall rules, as live capture would apply them.
    let rules = workers_settings.rules();
    let mut total = ReplayStats::default();
    let mut committed = 0usize;
    let mut since_flush = 0usize;
    let flush = |store: &crossbeam_channel::Sender<StoreCommand>| -> anyhow::Result<()> {
        let (ack, done) = crossbeam_channel::bounded(1);
        store.send(StoreCommand::Flush(ack))?;
        done.recv_timeout(Duration::from_secs(60)).context("the store did not commit")?;
        Ok(())
    };
    for _ in 0..repeat {
        let mut send_error = None;
        let stats = replay(&steps, at, &rules, workers_settings.afk_secs, |output| {
            let (command, closed) = match output {
                Replayed::Window(TrackerOutput::Session(session)) => {
                    let closed = session.ended_at_millis.is_some();
                    (crate::capture::db::session_write(session), closed)
                }
                Replayed::Window(TrackerOutput::Active(_)) => return,
                Replayed::Chunk(chunk) => (crate::capture::db::chunk_write(chunk), false),
                Replayed::Clip(clip) => (crate::capture::db::clip_write(clip), false),
                Replayed::Afk(event) => (crate::capture::db::afk_write(event), false),
                Replayed::Summary { start_millis, end_millis, text } => {
                    let observation = crate::memory::Observation { kind: "activity".into(), period_start_millis: start_millis, period_end_millis: end_millis, text, model: Some("script".into()) };
                    (crate::memory::observation_write(observation), false)
                }
                Replayed::Heard { source, app, title, start_millis, end_millis, text } => {
                    let transcript = crate::audio::transcripts::AudioTranscript {
                        transcript_id: crate::ids::next_id(),
                        source: crate::audio::mic::Source::parse(&source).unwrap_or(crate::audio::mic::Source::Microphone),
                        started_at_millis: start_millis,
                        ended_at_millis: end_millis,
                        text,
                        confidence: 0.9,
                        app,
                        title,
                        audio_file: None,
                    };
                    (crate::audio::transcripts::transcript_write(transcript), false)
                }
            };
            {
                if let Err(err) = store.commands.send(command) {
                    send_error.get_or_insert(err.to_string());
                }
                if closed {
                    since_flush += 1;
                    if progress && since_flush >= 200 {
                        if let Err(err) = flush(&store.commands) {
                            send_error.get_or_insert(format!("{err:#}"));
                        }
                        committed += since_flush;
                        since_flush = 0;
                        println!("committed {committed}");
                    }
                }
            }
        });
        if let Some(err) = send_error {
            anyhow::bail!("the store stopped accepting sessions: {err}");
        }
        total.sessions += stats.sessions;
        total.excluded_windows += stats.excluded_windows;
        total.afk_periods += stats.afk_periods;
        total.chunks += stats.chunks;
        total.clips += stats.clips;
        at += span.max(1);
    }
    flush(&store.commands)?;
    if progress {
        println!("committed {}", committed + since_flush);
    }
    store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10));
    Ok(total)
}

/// `cowork capture run`: every capture stream without the window, until
/// SIGTERM or Ctrl+C; worker health goes to the log.
pub fn capture_run(paths: &Paths, display: Option<String>) -> anyhow::Result<()> {
    use crate::events::AppEvent;
    use crate::workers::{WorkerOptions, Workers};

    let (events_tx, events) = crossbeam_channel::bounded(4096);
    let sink = EventSink::new(events_tx, || {});
    let options = WorkerOptions { capture: true, display, chat_model: None, policy: RestartPolicy::default(), require_consent: false, automations: false };
    let (workers, _settings, warnings) = Workers::start(paths, options, sink.clone())?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    crate::runtime::signals::spawn_signal_thread(sink.runtime_only())?;
    tracing::info!(db = %paths.db_path().display(), "capturing until SIGTERM or Ctrl+C");
    while let Ok(event) = events.recv() {
        match event {
            AppEvent::Runtime(RuntimeEvent::ShutdownRequested) => break,
            AppEvent::Runtime(RuntimeEvent::Worker { worker, state }) => tracing::info!(worker = worker.as_str(), state = ?state, "worker"),
            _ => {}
        }
    }
    workers.shutdown(Duration::from_secs(10));
    Ok(())
}
