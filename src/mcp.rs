//! MCP: the servers the user configured (`config`), their connections
//! (`connection`, over stdio or streamable HTTP) owned by the `mcp` worker
//! (`worker`), orphan cleanup after a crash (`orphans`), and their tools as
//! the agent sees them (`tools`). `list_tools` is `cowork mcp-tools`.

pub mod browser;
pub mod catalog;
pub mod config;
pub mod connection;
pub mod elicit;
pub mod oauth;
pub mod orphans;
pub mod serve;
pub mod slash;
pub mod tools;
pub mod worker;

use std::time::Duration;

use anyhow::Context;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;

/// What a server's process inherits from cowork's environment: nothing else,
/// so API keys and cowork's own variables never reach a server.
const PASSED_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

/// The whole environment a server starts with: PATH, HOME and LANG as cowork
/// has them, then what its configuration names (resolved secrets included).
pub fn server_env(configured: &std::collections::BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = PASSED_ENV.iter().filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v))).collect();
    env.retain(|(k, _)| !configured.contains_key(k));
    env.extend(configured.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// What npx and uvx themselves need to fetch a package (the user's proxy, npm's
/// and uv's own settings: a registry, a cache): passed to those two runners
/// only, never to a server started directly.
pub fn runner_env(command: &str) -> Vec<(String, String)> {
    let program = std::path::Path::new(command).file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if !matches!(program, "npx" | "uvx") {
        return Vec::new();
    }
    let prefix = if program == "npx" { "npm_config_" } else { "UV_" };
    std::env::vars()
        .filter(|(key, _)| {
            key.starts_with(prefix) || matches!(key.as_str(), "HTTP_PROXY" | "HTTPS_PROXY" | "NO_PROXY" | "http_proxy" | "https_proxy" | "no_proxy")
        })
        .collect()
}

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
        command.args(args).env_clear().envs(server_env(&Default::default())).kill_on_drop(true);
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_server_gets_path_home_lang_and_its_own_variables_only() {
        // cargo runs tests with its own variables set: none of them may pass.
        assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
        let configured = [("LANG".to_owned(), "de_DE.UTF-8".to_owned()), ("TOKEN".to_owned(), "t".to_owned())].into_iter().collect();
        let env = super::server_env(&configured);
        let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert!(keys.iter().all(|k| ["PATH", "HOME", "LANG", "TOKEN"].contains(k)), "{keys:?}");
        assert!(env.contains(&("LANG".to_owned(), "de_DE.UTF-8".to_owned())), "the configuration wins");
        assert!(!keys.contains(&"CARGO_MANIFEST_DIR"));
    }
}
