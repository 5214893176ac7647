//! MCP: the servers the user configured (`config`), their connections
//! (`connection`, over stdio or streamable HTTP, with `oauth` for sign-in)
//! owned by the `mcp` worker (`worker`), orphan cleanup after a crash
//! (`orphans`), their tools as the agent sees them (`tools`), the integrations
//! catalog (`catalog`), the built-in Browser (`browser`), a server's requests
//! for input (`elicit`) and prompts typed as `/name` (`slash`), and `cowork mcp
//! serve` (`serve`), cowork's memory served to other assistants. `list_tools`
//! is `cowork mcp-tools`.
//!
//! Servers start with PATH, HOME and LANG and their configured variables only
//! (`server_env`); npx and uvx also get what fetching a package needs (the
//! proxy, the registry, the cache, a CA file), never tokens or passwords.
//!
//! Invariants:
//! - Only the mcp worker's runtime talks to MCP servers; the agent decides
//!   every MCP call (policy, approvals, audit) exactly as a built-in one, in
//!   `agent::integrations`, before asking the worker to run it.
//! - An MCP server never inherits cowork's environment beyond that, and an HTTP
//!   server (and its authorization server) is reached only through the outbound
//!   gate (offline: loopback only). OAuth tokens live only in the secret store
//!   and are sent only to the URL they were made for.
//! - A `secret:` value in `mcp-servers.json` resolves only to the name cowork
//!   computes for it, `mcp/<server>/<env|headers>/<key>`
//!   (`config::secret_name`); a file never names which secret a server gets,
//!   and an imported file's `secret:` values are refused.

pub mod browser;
pub mod catalog;
pub mod config;
pub mod connection;
pub mod elicit;
pub mod events;
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
/// so API keys and cowork's own variables never reach a server. (npx and uvx
/// get a few more, to fetch the package: `stdio_env`.)
const PASSED_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

/// The whole environment a server starts with: PATH, HOME and LANG as cowork
/// has them, then what its configuration names (resolved secrets included),
/// and the marker that makes cowork's own program refuse to read its data
/// when a server (or what it starts) runs it (`own_data::TOOL_CHILD_VAR`).
pub fn server_env(configured: &std::collections::BTreeMap<String, String>) -> Vec<(String, String)> {
    let marker = crate::tools::own_data::TOOL_CHILD_VAR;
    let mut env: Vec<(String, String)> = PASSED_ENV.iter().filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v))).collect();
    env.retain(|(k, _)| !configured.contains_key(k));
    env.extend(configured.iter().filter(|(k, _)| k.as_str() != marker).map(|(k, v)| (k.clone(), v.clone())));
    env.push((marker.to_owned(), "1".to_owned()));
    env
}

/// The runners of the catalog's packages: they fetch a package (npm's, or
/// PyPI's) and then start it — with their own environment, so whatever a
/// runner gets from cowork, the third-party server package gets too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
    Npx,
    Uvx,
}

impl Runner {
    /// The runner `command` is (by its file name: `/usr/bin/npx` is npx).
    pub fn of(command: &str) -> Option<Runner> {
        match std::path::Path::new(command).file_name().and_then(|n| n.to_str()) {
            Some("npx") => Some(Runner::Npx),
            Some("uvx") => Some(Runner::Uvx),
            _ => None,
        }
    }

    fn program(self) -> &'static str {
        match self {
            Runner::Npx => "npx",
            Runner::Uvx => "uvx",
        }
    }

    /// Whether fetching a package needs `key` of cowork's environment: the
    /// registry, the cache, the offline switches, a CA file, the proxy. Nothing
    /// else passes (npm's and uv's tokens, passwords, publish settings).
    fn fetches_with(self, key: &str) -> bool {
        if PROXY_VARS.contains(&key) {
            return true;
        }
        match self {
            Runner::Npx => {
                // npm reads its `npm_config_*` variables in any case, with - or _.
                let lower = key.to_ascii_lowercase().replace('-', "_");
                let Some(setting) = lower.strip_prefix("npm_config_") else { return key == "NODE_EXTRA_CA_CERTS" };
                // A scope's registry: `npm_config_@scope:registry`.
                let scoped_registry = setting.starts_with('@') && setting.ends_with(":registry") && setting.matches(':').count() == 1;
                scoped_registry || NPM_FETCH_SETTINGS.contains(&setting)
            }
            Runner::Uvx => UV_FETCH_VARS.contains(&key),
        }
    }

    /// Whether `key` switches the runner between its cache and the network
    /// (what offline mode decides, whatever else says).
    fn is_offline_switch(self, key: &str) -> bool {
        match self {
            Runner::Npx => {
                let lower = key.to_ascii_lowercase().replace('-', "_");
                matches!(lower.as_str(), "npm_config_offline" | "npm_config_prefer_offline" | "npm_config_prefer_online")
            }
            Runner::Uvx => key.eq_ignore_ascii_case("UV_OFFLINE"),
        }
    }

    /// Offline mode: the runner uses only its cache.
    fn offline_switch(self) -> (&'static str, &'static str) {
        match self {
            Runner::Npx => ("npm_config_offline", "true"),
            Runner::Uvx => ("UV_OFFLINE", "1"),
        }
    }
}

/// The proxy variables curl, npm and uv read.
const PROXY_VARS: [&str; 8] = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"];
/// npm's settings (after `npm_config_`) that fetching a package needs.
const NPM_FETCH_SETTINGS: [&str; 10] = ["registry", "cache", "offline", "prefer_offline", "prefer_online", "cafile", "proxy", "https_proxy", "noproxy", "update_notifier"];
/// uv's variables that fetching a package needs (an index, the caches, offline, TLS trust).
const UV_FETCH_VARS: [&str; 11] =
    ["UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS", "UV_CACHE_DIR", "UV_OFFLINE", "UV_PYTHON_INSTALL_DIR", "UV_TOOL_DIR", "UV_NATIVE_TLS", "SSL_CERT_FILE"];

/// Whether a variable's name says it holds a credential: such a variable never
/// passes, whatever list it is on (npm's `//registry.example/:_authToken` too).
fn names_a_credential(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    ["auth", "token", "password", "passwd", "secret", "//"].iter().any(|word| lower.contains(word))
}

/// `value` with the user name and password taken out of every URL in it
/// (`http://alice:pw@proxy:3128` → `http://proxy:3128`, also without a scheme
/// and in lists: `a=https://u:p@host/simple b=…`), and whether any was.
fn without_credentials(value: &str) -> (String, bool) {
    fn token(token: &str) -> (String, bool) {
        let start = match token.find("://") {
            Some(at) => at + 3,
            // uv's `name=url`, or a bare `user:pw@host:port`.
            None => token.find('=').map_or(0, |at| at + 1),
        };
        // The last @ ends the user information. A password may hold a / (unescaped, which
        // curl takes), so an @ after a / still counts when a : came before it; only an @
        // in a plain path (`https://host/@scope/pkg`) is not user information.
        match token[start..].rfind('@') {
            Some(at) if !token[start..start + at].contains('/') || token[start..start + at].contains(':') => (format!("{}{}", &token[..start], &token[start + at + 1..]), true),
            _ => (token.to_owned(), false),
        }
    }
    let (mut out, mut stripped, mut current) = (String::with_capacity(value.len()), false, String::new());
    for c in value.chars().chain(std::iter::once('\0')) {
        if c.is_whitespace() || c == ',' || c == '\0' {
            let (clean, changed) = token(&current);
            out.push_str(&clean);
            stripped |= changed;
            current.clear();
            if c != '\0' {
                out.push(c);
            }
        } else {
            current.push(c);
        }
    }
    (out, stripped)
}

/// A stdio server's whole environment, and what cowork says about it (put at
/// the head of the server's stderr tail, where Settings and `cowork mcp test`
/// show it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StdioEnv {
    pub vars: Vec<(String, String)>,
    pub notes: Vec<String>,
}

/// The environment a stdio server started as `command` gets: `server_env`;
/// for npx and uvx, before it, what fetching the package needs of cowork's
/// environment (never a credential: see `Runner::fetches_with`); in offline
/// mode, no proxy and the runner's switch to use only its cache, which the
/// server's own settings cannot turn off.
pub fn stdio_env(command: &str, configured: &std::collections::BTreeMap<String, String>, offline: bool) -> StdioEnv {
    // A variable that is not UTF-8 is none of the names passed.
    let inherited: Vec<(String, String)> = std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect();
    stdio_env_from(command, configured, offline, &inherited)
}

fn stdio_env_from(command: &str, configured: &std::collections::BTreeMap<String, String>, offline: bool, inherited: &[(String, String)]) -> StdioEnv {
    let Some(runner) = Runner::of(command) else { return StdioEnv { vars: server_env(configured), notes: Vec::new() } };
    let program = runner.program();
    let mut env = std::collections::BTreeMap::new();
    let mut notes = Vec::new();
    let mut held_back = Vec::new();
    for (key, value) in inherited {
        if !runner.fetches_with(key) || names_a_credential(key) {
            continue;
        }
        // Offline, nothing is fetched: no proxy, and the switch is cowork's.
        if offline && (PROXY_VARS.contains(&key.as_str()) || key.to_ascii_lowercase().ends_with("proxy") || runner.is_offline_switch(key)) {
            continue;
        }
        let (value, stripped) = without_credentials(value);
        if stripped {
            held_back.push(key.as_str());
        }
        env.insert(key.clone(), value);
    }
    if !held_back.is_empty() {
        notes.push(format!(
            "{program} gets these without the user name and password in them: {}. {program} starts the server package with its own environment, \
             and a third-party package must not see them; a proxy or registry that needs them refuses {program} started by cowork: \
             fetch the package once outside cowork (it then starts from {program}'s cache), or let this machine through without a password",
            held_back.join(", ")
        ));
    }
    env.extend(server_env(configured));
    if offline {
        env.retain(|key, _| !runner.is_offline_switch(key));
        let (key, value) = runner.offline_switch();
        env.insert(key.to_owned(), value.to_owned());
        notes.push(format!("offline mode: {program} uses only its cache ({key}={value}); a package it has not fetched before cannot start until offline mode is off"));
    }
    StdioEnv { vars: env.into_iter().collect(), notes }
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
        assert!(keys.iter().all(|k| ["PATH", "HOME", "LANG", "TOKEN", "COWORK_TOOL_CHILD"].contains(k)), "{keys:?}");
        assert!(env.contains(&("LANG".to_owned(), "de_DE.UTF-8".to_owned())), "the configuration wins");
        assert!(!keys.contains(&"CARGO_MANIFEST_DIR"));
    }

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    /// A user's environment with npm's and uv's credentials, a proxy with a password and an API key.
    fn users_environment() -> Vec<(String, String)> {
        vars(&[
            ("npm_config__authToken", "npm_SECRET1"),
            ("npm_config_//registry.npmjs.org/:_authToken", "npm_SECRET2"),
            ("NPM_CONFIG__AUTH", "c2VjcmV0Mw=="),
            ("npm_config__password", "SECRET4"),
            ("npm_config_email", "me@example.com"),
            ("npm_config_registry", "https://alice:SECRET5@registry.example/npm/"),
            ("npm_config_@corp:registry", "https://npm.corp.example/"),
            ("npm_config_cache", "/home/me/.npm"),
            ("npm_config_prefer_offline", "true"),
            ("npm_config_cafile", "/etc/ssl/corp.pem"),
            ("npm_config_otp", "123456"),
            ("npm_config_proxy", "alice:SECRET6@proxy.example:3128"),
            ("NPM_TOKEN", "npm_SECRET7"),
            ("HTTPS_PROXY", "http://alice:SECRET8@proxy.example:3128"),
            ("http_proxy", "http://bob:SEC/RET9@proxy.example:3128/"),
            ("NO_PROXY", "localhost,.corp.example"),
            ("UV_PUBLISH_TOKEN", "pypi-SECRET10"),
            ("UV_PUBLISH_PASSWORD", "SECRET11"),
            ("UV_INDEX_PRIVATE_PASSWORD", "SECRET12"),
            ("UV_INDEX_PRIVATE_USERNAME", "alice"),
            ("UV_INDEX", "private=https://alice:SECRET13@pypi.corp.example/simple other=https://pypi.org/simple"),
            ("UV_CACHE_DIR", "/home/me/.cache/uv"),
            ("UV_KEYRING_PROVIDER", "subprocess"),
            ("SSL_CERT_FILE", "/etc/ssl/corp.pem"),
            ("OPENAI_API_KEY", "sk-SECRET14"),
            ("COWORK_LOG", "debug"),
            ("PATH", "/usr/bin"),
        ])
    }

    #[test]
    fn npx_and_uvx_get_what_fetching_needs_and_no_credential_in_any_spelling() {
        let configured = std::collections::BTreeMap::from([("SERVER_SETTING".to_owned(), "x".to_owned())]);
        for (command, passed) in [
            (
                "/usr/bin/npx",
                vec![
                    ("HTTPS_PROXY", "http://proxy.example:3128"),
                    ("NO_PROXY", "localhost,.corp.example"),
                    ("http_proxy", "http://proxy.example:3128/"),
                    ("npm_config_@corp:registry", "https://npm.corp.example/"),
                    ("npm_config_cache", "/home/me/.npm"),
                    ("npm_config_cafile", "/etc/ssl/corp.pem"),
                    ("npm_config_prefer_offline", "true"),
                    ("npm_config_proxy", "proxy.example:3128"),
                    ("npm_config_registry", "https://registry.example/npm/"),
                ],
            ),
            (
                "uvx",
                vec![
                    ("HTTPS_PROXY", "http://proxy.example:3128"),
                    ("NO_PROXY", "localhost,.corp.example"),
                    ("SSL_CERT_FILE", "/etc/ssl/corp.pem"),
                    ("UV_CACHE_DIR", "/home/me/.cache/uv"),
                    ("UV_INDEX", "private=https://pypi.corp.example/simple other=https://pypi.org/simple"),
                    ("http_proxy", "http://proxy.example:3128/"),
                ],
            ),
        ] {
            let env = super::stdio_env_from(command, &configured, false, &users_environment());
            let text = format!("{:?}", env.vars);
            // cowork's own variables never pass; its marker for the programs its tools start is set by cowork itself.
            let others = text.replace("(\"COWORK_TOOL_CHILD\", \"1\")", "");
            assert!(!text.contains("SECRET") && !text.contains("alice") && !text.contains("sk-") && !others.contains("COWORK"), "{command}: {text}");
            for (key, value) in passed {
                assert!(env.vars.contains(&(key.to_owned(), value.to_owned())), "{command}: {key}={value} should pass: {text}");
            }
            assert!(env.vars.contains(&("SERVER_SETTING".to_owned(), "x".to_owned())), "its own settings pass: {text}");
            assert!(!text.contains("npm_config_email") && !text.contains("UV_KEYRING_PROVIDER") && !text.contains("npm_config_otp"), "{text}");
            assert!(env.notes.iter().any(|n| n.contains("gets these without the user name and password in them") && n.contains("HTTPS_PROXY")), "{:?}", env.notes);
        }
        // A server started directly gets none of it.
        let direct = super::stdio_env_from("node", &configured, false, &users_environment());
        assert!(direct.vars.iter().all(|(k, _)| ["PATH", "HOME", "LANG", "SERVER_SETTING", "COWORK_TOOL_CHILD"].contains(&k.as_str())), "{:?}", direct.vars);
    }

    #[test]
    fn offline_a_runner_uses_only_its_cache_whatever_the_servers_settings_say() {
        let configured = std::collections::BTreeMap::from([("NPM_CONFIG_OFFLINE".to_owned(), "false".to_owned()), ("npm_config_prefer_online".to_owned(), "true".to_owned()), ("UV_OFFLINE".to_owned(), "0".to_owned())]);
        let npx = super::stdio_env_from("npx", &configured, true, &users_environment());
        let keys: Vec<&str> = npx.vars.iter().map(|(k, _)| k.as_str()).collect();
        assert!(npx.vars.contains(&("npm_config_offline".to_owned(), "true".to_owned())), "{keys:?}");
        assert!(!keys.iter().any(|k| k.to_ascii_lowercase().contains("proxy") || k.eq_ignore_ascii_case("npm_config_prefer_offline") || *k == "NPM_CONFIG_OFFLINE"), "{keys:?}");
        assert!(npx.notes.iter().any(|n| n.starts_with("offline mode: npx uses only its cache")), "{:?}", npx.notes);
        let uvx = super::stdio_env_from("uvx", &configured, true, &users_environment());
        assert!(uvx.vars.contains(&("UV_OFFLINE".to_owned(), "1".to_owned())) && !uvx.vars.contains(&("UV_OFFLINE".to_owned(), "0".to_owned())), "{:?}", uvx.vars);
        // Online, nothing is forced.
        let online = super::stdio_env_from("npx", &std::collections::BTreeMap::new(), false, &vars(&[("PATH", "/usr/bin")]));
        assert!(!online.vars.iter().any(|(k, _)| k == "npm_config_offline") && online.notes.is_empty(), "{online:?}");
    }

    #[test]
    fn credentials_come_out_of_every_url_and_nothing_else_changes() {
        for (value, clean, stripped) in [
            ("http://alice:pw@proxy:3128", "http://proxy:3128", true),
            ("http://alice@proxy:3128/", "http://proxy:3128/", true),
            ("alice:pw@proxy:3128", "proxy:3128", true),
            ("http://a:p@ss@proxy", "http://proxy", true),
            ("http://a:p/w@proxy:1", "http://proxy:1", true),
            ("a=https://u:p@h/simple b=https://h2/simple", "a=https://h/simple b=https://h2/simple", true),
            ("https://registry.npmjs.org/", "https://registry.npmjs.org/", false),
            ("https://host/@scope/pkg", "https://host/@scope/pkg", false),
            ("localhost,.corp.example", "localhost,.corp.example", false),
            ("/home/me/.npm", "/home/me/.npm", false),
        ] {
            assert_eq!(super::without_credentials(value), (clean.to_owned(), stripped), "{value}");
        }
    }
}
