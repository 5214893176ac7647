//! `cowork apps install|list|remove|render`: straight to the database and the
//! apps folder (the sidebar's apps worker lists them again when its panel
//! asks). `install` prints the disclosure (what the code can call, next to
//! what its manifest says) and asks before installing, unless `--yes`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use anyhow::{Context, bail};

use crate::apps::{Capability, Package, store as db};
use crate::config::Paths;
use crate::ids::now_millis;

fn writer(paths: &Paths) -> anyhow::Result<rusqlite::Connection> {
    paths.ensure_data_dir()?;
    crate::store::open_writer(&paths.db_path())
}

/// `cowork apps install PATH [--grant ai|http]… [--yes]`.
pub fn install(paths: &Paths, path: &Path, grants: &[String], yes: bool) -> anyhow::Result<()> {
    let granted: Vec<Capability> = grants.iter().map(|g| Capability::parse(g).with_context(|| format!("--grant {g}: the capabilities are ai and http"))).collect::<anyhow::Result<_>>()?;
    let package = Package::read(path)?;
    let disclosure = package.disclose()?;
    let conn = writer(paths)?;
    let previous = db::app(&conn, &package.manifest.app_id())?;
    let manifest = &package.manifest;
    println!("{} {} ({}) — {}", manifest.name, manifest.version, manifest.category, manifest.description);
    if let Some(previous) = &previous {
        println!("updates version {}", previous.version);
        for import in disclosure.imports.iter().filter(|i| !previous.imports.contains(i)) {
            println!("  new: it now imports {import}");
        }
    }
    println!("its code can:");
    for read in &disclosure.reads {
        println!("  read {read}");
    }
    for capability in &disclosure.capabilities {
        let mark = if granted.contains(capability) { "granted".to_owned() } else { format!("NOT granted (add --grant {})", capability.name()) };
        println!("  {} — {mark}", capability.describe());
    }
    for flag in &disclosure.flags {
        println!("  warning: {flag}");
    }
    println!("the app says: {}", disclosure.claim);
    for capability in &granted {
        if !disclosure.capabilities.contains(capability) {
            eprintln!("--grant {}: its code does not use it, so it is not granted", capability.name());
        }
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            bail!("nothing installed: add --yes to install without being asked");
        }
        print!("Install? [y/N] ");
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !answer.trim().eq_ignore_ascii_case("y") {
            bail!("nothing installed");
        }
    }
    let apps_dir = crate::apps::worker::apps_dir(&paths.data_dir);
    let installed = db::install(&conn, &apps_dir, &package, &disclosure, &granted, now_millis()).map_err(anyhow::Error::msg)?;
    if let Some(wasm) = &package.component {
        let runtime = crate::apps::Runtime::new(Some(apps_dir.join(".cache")))?;
        let (_, opened) = runtime.open(wasm)?;
        println!("compiled in {} ms", opened.millis);
    }
    println!("{} {} {}", if installed.updated { "updated" } else { "installed" }, installed.row.app_id, installed.row.version);
    Ok(())
}

/// `cowork apps describe "…" [--install [--yes]]`: the agent drafts an app
/// without code (checked); printed, and with `--install` shown and installed.
pub fn describe(paths: &Paths, description: &str, install_it: bool, yes: bool) -> anyhow::Result<()> {
    let workers = super::automations::headless(paths, false)?;
    let (reply, drafted) = crossbeam_channel::bounded(1);
    let sent = workers.agent.commands.send(crate::agent::AgentCommand::DraftApp { description: description.to_owned(), reply: Some(reply) });
    let draft = sent
        .map_err(|_| "the agent did not start".to_owned())
        .and_then(|()| drafted.recv_timeout(std::time::Duration::from_secs(600)).map_err(|_| "the agent did not answer in 10 minutes".to_owned()).and_then(|d| d));
    workers.shutdown(std::time::Duration::from_secs(5));
    let toml = draft.map_err(anyhow::Error::msg)?;
    println!("{toml}");
    if install_it {
        let dir = crate::apps::worker::write_draft(&crate::apps::worker::apps_dir(&paths.data_dir), &toml).map_err(anyhow::Error::msg)?;
        let installed = install(paths, &dir, &[], yes);
        let _ = std::fs::remove_dir_all(&dir);
        installed?;
    }
    Ok(())
}

/// `cowork apps list [--json]`.
pub fn list(paths: &Paths, as_json: bool) -> anyhow::Result<()> {
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let apps = db::apps(&conn)?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&apps)?);
        return Ok(());
    }
    for app in &apps {
        let granted: Vec<&str> = app.granted.iter().map(|c| c.name()).collect();
        let code = if app.component_sha256.is_some() { "component" } else { "no code" };
        println!("{}\t{}\t{}\t{}\t{code}\tgranted: {}", app.app_id, app.version, if app.enabled { "on" } else { "off" }, app.name, if granted.is_empty() { "nothing".into() } else { granted.join(", ") });
    }
    if apps.is_empty() {
        eprintln!("no apps; install one with `cowork apps install FOLDER_OR_ZIP`");
    }
    Ok(())
}

/// `cowork apps remove ID`: the app, its storage and the chats it opened.
pub fn remove(paths: &Paths, app_id: &str) -> anyhow::Result<()> {
    let conn = writer(paths)?;
    if !db::remove(&conn, &crate::apps::worker::apps_dir(&paths.data_dir), app_id).map_err(anyhow::Error::msg)? {
        bail!("{app_id} is not installed");
    }
    println!("removed {app_id} with its data");
    Ok(())
}

/// `cowork apps render ID [--action JSON]…`: the app's view as JSON, after the
/// actions, through the real lane (keyword search only; no model here).
pub fn render(paths: &Paths, app_id: &str, actions: &[String]) -> anyhow::Result<()> {
    // A writer thread as in the app, without its hooks (retention and crash recovery are the app's).
    let mut store = crate::store::spawn_store(paths.db_path(), crate::runtime::EventSink::<crate::runtime::RuntimeEvent>::ignored(), crate::runtime::RestartPolicy::default(), crate::store::StoreHooks::default())?;
    let rendered = render_through(paths, crate::store::StoreLink::new(paths.db_path(), store.commands.clone()), app_id, actions);
    // Joined before the process exits: a store thread still closing its connection
    // while the process tears down SQLCipher's crypto would crash it.
    store.shutdown(crate::store::StoreCommand::Shutdown, std::time::Duration::from_secs(30));
    rendered
}

fn render_through(paths: &Paths, store: crate::store::StoreLink, app_id: &str, actions: &[String]) -> anyhow::Result<()> {
    let sink = crate::runtime::EventSink::ignored();
    let config = crate::apps::worker::AppsConfig { store, apps_dir: crate::apps::worker::apps_dir(&paths.data_dir) };
    let mut worker = crate::apps::worker::AppsWorker::new(config, None, None, sink);
    worker.open()?;
    worker.handle(crate::apps::AppsCommand::Open { app_id: app_id.to_owned() });
    for action in actions {
        worker.handle(crate::apps::AppsCommand::Act { app_id: app_id.to_owned(), message: action.clone() });
    }
    let open = worker.view().open.iter().find(|o| o.app_id == app_id).context("the app did not open")?;
    if let Some(error) = &open.error {
        bail!("{error}");
    }
    let json: serde_json::Value = serde_json::from_str(&open.json).unwrap_or(serde_json::Value::String(open.json.clone()));
    println!("{}", serde_json::to_string_pretty(&json)?);
    eprintln!("{} ms, {} MiB", open.millis, open.memory_bytes >> 20);
    Ok(())
}
