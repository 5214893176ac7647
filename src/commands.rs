//! Headless subcommands: `doctor`, `ask`, `models`, `mcp-tools`.

pub mod ask;
pub mod doctor;
pub mod models;

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use crate::config::Paths;
use crate::runtime::{EventSink, RestartPolicy};
use crate::store::{Deleted, StoreCommand, spawn_store};

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
    let (events, _ignored) = crossbeam_channel::bounded(64);
    let mut store = spawn_store(paths.db_path(), EventSink::new(events, || {}), RestartPolicy { max_restarts: 0, ..RestartPolicy::default() })?;
    let (reply, outcome) = crossbeam_channel::bounded(1);
    store.commands.send(StoreCommand::DeleteRange { since_millis, until_millis, reply: Some(reply) })?;
    let result = outcome.recv_timeout(Duration::from_secs(120)).context("the store did not answer")?;
    store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10));
    result.map_err(anyhow::Error::msg)
}
