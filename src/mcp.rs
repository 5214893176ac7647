//! MCP client plumbing (rmcp over a child process). This issue uses it to
//! list an MCP server's tools (`cowork mcp-tools`); the `mcp` worker, apps and
//! approval gates build on it later.

pub mod config;

use std::time::Duration;

use anyhow::Context;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;

/// One tool an MCP server offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
}

/// Starts `program args…` as an MCP server over stdio, lists its tools, and stops it.
pub fn list_tools(program: &str, args: &[String], timeout: Duration) -> anyhow::Result<Vec<ToolInfo>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let mut command = tokio::process::Command::new(program);
        command.args(args).kill_on_drop(true);
        let transport = TokioChildProcess::new(command).with_context(|| format!("cannot start MCP server {program}"))?;
        let client = tokio::time::timeout(timeout, ().serve(transport))
            .await
            .context("MCP server did not finish the handshake in time")?
            .context("MCP handshake failed")?;
        let tools = tokio::time::timeout(timeout, client.list_all_tools())
            .await
            .context("MCP server did not list its tools in time")?
            .context("MCP tools/list failed")?;
        let _ = client.cancel().await;
        Ok(tools
            .into_iter()
            .map(|tool| ToolInfo {
                name: tool.name.into_owned(),
                description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
            })
            .collect())
    })
}
