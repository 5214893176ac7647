//! Headless subcommands: `doctor`, `ask`, `models`, `mcp-tools`.

pub mod ask;
pub mod doctor;
pub mod models;

use std::time::Duration;

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
