//! The MCP servers the user configured: `mcp-servers.json` in cowork's data
//! directory, in Claude Desktop's `mcpServers` format as it is (`command`,
//! `args`, `env`; `url` and `headers` for streamable HTTP), with Codex's
//! per-server settings beside them (`enabledTools`, `startupTimeoutSec`,
//! `toolTimeoutSec`) and cowork's own (`disabled`, `trusted`).
//!
//! Secret values — every `env` and `headers` value — live in the secret store;
//! the file holds a reference (`"secret:mcp/<server>/env/<NAME>"`) in their
//! place. `import` reads an existing Claude Desktop (or Claude Code) JSON file,
//! a Zed `settings.json` (comments and trailing commas allowed) or a Codex
//! `config.toml`, and `save` moves every plain value into the store before it
//! writes, so nothing secret is ever written in plain text.
//!
//! A reference is never a name read from the file: the one secret a value may
//! stand for is computed from (server, part, key) by `secret_name`, and a
//! `secret:` value that is not exactly that name is refused when the server
//! starts, when the file is saved and when another assistant's file is
//! imported. Otherwise a file — a project's `.mcp.json` above all — could name
//! the database key, a provider's API key or another server's token and have
//! cowork send it to the host it names.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::secrets::Secrets;

pub const FILE_NAME: &str = "mcp-servers.json";
const SECRET_PREFIX: &str = "secret:";
/// The parts of a server whose values are secrets, as `secret_name` names them.
pub const ENV: &str = "env";
pub const HEADERS: &str = "headers";
pub const DEFAULT_STARTUP_TIMEOUT_SECS: u64 = 30;
pub const DEFAULT_TOOL_TIMEOUT_SECS: u64 = 300;
/// The `builtin` value of the Browser integration (`browser.rs` fills it in).
pub const BUILTIN_BROWSER: &str = "browser";

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct McpConfig {
    #[serde(rename = "mcpServers", default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One server, as Claude Desktop writes it plus the per-server settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerConfig {
    /// A stdio server: the program (and `args`, `env`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// A streamable HTTP server: its URL (and `headers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Only these tools reach the agent (None: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    #[serde(default = "default_startup", rename = "startupTimeoutSec")]
    pub startup_timeout_secs: u64,
    #[serde(default = "default_tool", rename = "toolTimeoutSec")]
    pub tool_timeout_secs: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    /// The user trusts this server's annotations to lower a tool's risk.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trusted: bool,
    /// A server cowork brings ("browser": Playwright's MCP server and
    /// Chromium): its command line is cowork's, filled in when it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<String>,
    /// OAuth for an HTTP server, when its authorization server wants a client
    /// registered beforehand or particular scopes (else discovery decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthSettings>,
}

/// A server's OAuth settings (`"oauth": {"clientId": "…", "scopes": ["…"]}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthSettings {
    /// A client id registered with the authorization server out of band
    /// (cowork is a public client with PKCE: no client secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

fn default_startup() -> u64 {
    DEFAULT_STARTUP_TIMEOUT_SECS
}

fn default_tool() -> u64 {
    DEFAULT_TOOL_TIMEOUT_SECS
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            enabled_tools: None,
            startup_timeout_secs: DEFAULT_STARTUP_TIMEOUT_SECS,
            tool_timeout_secs: DEFAULT_TOOL_TIMEOUT_SECS,
            disabled: false,
            trusted: false,
            builtin: None,
            oauth: None,
        }
    }
}

/// How a server is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport<'a> {
    Stdio { command: &'a str, args: &'a [String] },
    Http { url: &'a str },
}

impl ServerConfig {
    pub fn transport(&self) -> anyhow::Result<Transport<'_>> {
        if let Some(builtin) = self.builtin.as_deref().filter(|_| self.command.is_none()) {
            bail!("the built-in {builtin} is filled in when it starts");
        }
        match (&self.command, &self.url) {
            (Some(command), None) => Ok(Transport::Stdio { command, args: &self.args }),
            (None, Some(url)) if url.starts_with("http://") || url.starts_with("https://") => Ok(Transport::Http { url }),
            (None, Some(url)) => bail!("url {url:?} is not http:// or https://"),
            (Some(_), Some(_)) => bail!("both command and url are set; a server is one or the other"),
            (None, None) => bail!("neither command nor url is set"),
        }
    }
}

impl ServerConfig {
    /// The startup timeout (at least a second).
    pub fn startup_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.startup_timeout_secs.max(1))
    }

    /// The tool timeout (at least a second).
    pub fn tool_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.tool_timeout_secs.max(1))
    }

    /// Whether `other` reaches the server the same way: trust and the
    /// enabled tools are the agent's business and need no reconnect.
    pub fn same_connection(&self, other: &ServerConfig) -> bool {
        let bare = |c: &ServerConfig| ServerConfig { trusted: false, enabled_tools: None, ..c.clone() };
        bare(self) == bare(other)
    }

    /// Whether the entry can be started: a command or a URL, or a built-in cowork knows.
    pub fn check(&self) -> anyhow::Result<()> {
        match self.builtin.as_deref() {
            Some(BUILTIN_BROWSER) => Ok(()),
            Some(other) => bail!("there is no built-in integration named {other:?}"),
            None => self.transport().map(|_| ()),
        }
    }

    /// "stdio: npx -y pkg" or "http: https://…", for lists and Settings.
    pub fn endpoint(&self) -> String {
        if self.builtin.as_deref() == Some(BUILTIN_BROWSER) {
            return "built-in: Playwright's MCP server driving Chromium".into();
        }
        match self.transport() {
            Ok(Transport::Stdio { command, args }) => format!("stdio: {command} {}", args.join(" ")).trim_end().to_owned(),
            Ok(Transport::Http { url }) => format!("http: {url}"),
            Err(err) => format!("invalid: {err}"),
        }
    }
}

/// The secret store's name for one `env` or `headers` value: the only secret
/// that value can ever stand for. A server name has no `/` (`check_name`), so
/// no server's names can fall among another's.
pub fn secret_name(server: &str, part: &str, key: &str) -> String {
    format!("mcp/{server}/{part}/{key}")
}

/// A value that names a secret other than its own (`secret_name`): the
/// database key, a provider's API key, `cowork mcp serve`'s token, another
/// server's header. It is never read, so it is never sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "server {server}: its {part} value {key} names the secret {named:?}, but a value of {server} can only come from its own secret ({own}); \
     cowork did not read it and sends nothing for it. Write the value itself in mcp-servers.json (it then moves to the secret store), or remove {key}"
)]
pub struct ForeignReference {
    pub server: String,
    pub part: String,
    pub key: String,
    pub named: String,
    pub own: String,
}

/// The secret `value` stands for: None for a plain value, the computed name
/// for a reference to it, an error for a reference to anything else.
fn reference(server: &str, part: &str, key: &str, value: &str) -> Result<Option<String>, ForeignReference> {
    let Some(named) = value.strip_prefix(SECRET_PREFIX) else { return Ok(None) };
    let own = secret_name(server, part, key);
    if named == own {
        return Ok(Some(own));
    }
    Err(ForeignReference { server: server.to_owned(), part: part.to_owned(), key: key.to_owned(), named: named.to_owned(), own })
}

/// Names a server may have: they become part of tool names (`mcp__<server>__<tool>`).
fn check_name(name: &str) -> anyhow::Result<()> {
    if name.is_empty() || name.len() > 40 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') || name.contains("__") {
        bail!("server name {name:?}: use letters, digits, - and _ (no double _), at most 40");
    }
    Ok(())
}

impl McpConfig {
    /// Reads `<data_dir>/mcp-servers.json`; a missing file is an empty configuration.
    pub fn load(data_dir: &Path) -> anyhow::Result<Self> {
        let path = data_dir.join(FILE_NAME);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
        };
        let config: McpConfig = serde_json::from_str(&text).with_context(|| format!("{} is not valid", path.display()))?;
        for (name, server) in &config.servers {
            check_name(name).with_context(|| path.display().to_string())?;
            server.check().with_context(|| format!("{}: server {name}", path.display()))?;
        }
        Ok(config)
    }

    /// Moves every plain `env` and `headers` value into `secrets`, leaving a
    /// reference, then writes the file (a new file, synced, renamed over the old).
    /// A reference to any secret but the value's own is refused before anything
    /// moves: the file never keeps one.
    pub fn save(&mut self, data_dir: &Path, secrets: &Secrets) -> anyhow::Result<()> {
        for (name, server) in &self.servers {
            check_name(name)?;
            server.check().with_context(|| format!("server {name}"))?;
            for (part, values) in [(ENV, &server.env), (HEADERS, &server.headers)] {
                for (key, value) in values {
                    reference(name, part, key, value)?;
                }
            }
        }
        for (name, server) in &mut self.servers {
            for (part, values) in [(ENV, &mut server.env), (HEADERS, &mut server.headers)] {
                for (key, value) in values.iter_mut() {
                    // An empty value holds nothing secret (and the store keeps no empty secret);
                    // a reference here is the value's own (checked above).
                    if !value.is_empty() && !value.starts_with(SECRET_PREFIX) {
                        let secret = secret_name(name, part, key);
                        secrets.set(&secret, value).with_context(|| format!("cannot keep {name}'s {part} {key} in the secret store"))?;
                        *value = format!("{SECRET_PREFIX}{secret}");
                    }
                }
            }
        }
        let path = data_dir.join(FILE_NAME);
        let partial = data_dir.join(format!("{FILE_NAME}.partial"));
        let text = serde_json::to_string_pretty(self)?;
        {
            use std::io::Write;
            let mut file = std::fs::File::create(&partial).with_context(|| format!("cannot write {}", partial.display()))?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
        }
        std::fs::rename(&partial, &path).with_context(|| format!("cannot replace {}", path.display()))?;
        Ok(())
    }

    /// Adds the servers of another assistant's configuration; a name already
    /// here is kept and reported. Returns the names added and those skipped.
    pub fn merge(&mut self, other: McpConfig) -> (Vec<String>, Vec<String>) {
        let (mut added, mut skipped) = (Vec::new(), Vec::new());
        for (name, server) in other.servers {
            if self.servers.contains_key(&name) {
                skipped.push(name);
            } else {
                self.servers.insert(name.clone(), server);
                added.push(name);
            }
        }
        (added, skipped)
    }
}

/// A change the user makes in Settings → Integrations.
#[derive(Clone, Debug, PartialEq)]
pub enum McpEdit {
    /// Add (or replace) a server: a command line (`npx -y pkg arg`) or an http(s) URL.
    Add { name: String, endpoint: String },
    Remove(String),
    SetTrusted(String, bool),
    SetDisabled(String, bool),
    /// Offer one tool of a server to the agent, or not.
    SetTool { server: String, tool: String, enabled: bool, all_tools: Vec<String> },
    /// Add the built-in Browser integration (as "browser").
    AddBrowser,
    /// Add (or replace) a server made from the integrations catalog, trusted or not.
    AddConfigured { name: String, config: Box<ServerConfig>, trusted: bool },
}

impl McpConfig {
    /// Applies `edit`; an error (a bad name, an empty command) changes nothing.
    pub fn apply(&mut self, edit: &McpEdit) -> anyhow::Result<()> {
        fn server<'a>(config: &'a mut McpConfig, name: &str) -> anyhow::Result<&'a mut ServerConfig> {
            config.servers.get_mut(name).ok_or_else(|| anyhow::anyhow!("no MCP server named {name:?}"))
        }
        match edit {
            McpEdit::Add { name, endpoint } => {
                check_name(name)?;
                let endpoint = endpoint.trim();
                let mut config = ServerConfig::default();
                if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
                    config.url = Some(endpoint.to_owned());
                } else {
                    let mut words = endpoint.split_whitespace().map(str::to_owned);
                    config.command = Some(words.next().ok_or_else(|| anyhow::anyhow!("give a command line or an http(s) URL"))?);
                    config.args = words.collect();
                }
                config.transport()?;
                match self.servers.get(name) {
                    // The same endpoint again: everything set for it stays.
                    Some(old) if old.builtin.is_none() && old.transport().ok() == config.transport().ok() => {}
                    // A new endpoint starts afresh: its old trust, tools, env and
                    // headers (secrets meant for the old host) do not carry over.
                    old => {
                        if let Some(old) = old {
                            (config.startup_timeout_secs, config.tool_timeout_secs) = (old.startup_timeout_secs, old.tool_timeout_secs);
                        }
                        self.servers.insert(name.clone(), config);
                    }
                }
            }
            McpEdit::AddConfigured { name, config, trusted } => {
                check_name(name)?;
                let config = ServerConfig { trusted: *trusted, ..(**config).clone() };
                if config.builtin.is_none() {
                    config.transport()?;
                }
                self.servers.insert(name.clone(), config);
            }
            McpEdit::AddBrowser => {
                let config = ServerConfig { builtin: Some(BUILTIN_BROWSER.into()), ..ServerConfig::default() };
                self.servers.insert(BUILTIN_BROWSER.into(), config);
            }
            McpEdit::Remove(name) => {
                self.servers.remove(name).ok_or_else(|| anyhow::anyhow!("no MCP server named {name:?}"))?;
            }
            McpEdit::SetTrusted(name, trusted) => server(self, name)?.trusted = *trusted,
            McpEdit::SetDisabled(name, disabled) => server(self, name)?.disabled = *disabled,
            McpEdit::SetTool { server: name, tool, enabled, all_tools } => {
                let config = server(self, name)?;
                let mut tools = config.enabled_tools.clone().unwrap_or_else(|| all_tools.clone());
                tools.retain(|t| t != tool);
                if *enabled {
                    tools.push(tool.clone());
                }
                tools.sort();
                let mut all = all_tools.clone();
                all.sort();
                config.enabled_tools = if tools == all { None } else { Some(tools) };
            }
        }
        Ok(())
    }
}

/// Server `server`'s `env` or `headers` (`part`: `ENV` or `HEADERS`) with each
/// reference read from the secret store. The only name read for a value is
/// the one computed for it (`secret_name`); a reference to any other secret is
/// a `ForeignReference` error, and a reference with nothing behind it is an
/// error that names it.
pub fn resolve(server: &str, part: &str, values: &BTreeMap<String, String>, secrets: &Secrets) -> anyhow::Result<BTreeMap<String, String>> {
    values
        .iter()
        .map(|(key, value)| match reference(server, part, key, value)? {
            Some(name) => match secrets.get(&name)? {
                Some(secret) => Ok((key.clone(), secret)),
                None => bail!("server {server}: {part} {key}: the secret store has nothing for {name} (import the server again, or set it in Settings)"),
            },
            None => Ok((key.clone(), value.clone())),
        })
        .collect()
}

/// Which assistant wrote a configuration file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Claude Desktop's `claude_desktop_config.json` (or Claude Code's `.mcp.json`).
    Claude,
    /// Zed's `settings.json`, `context_servers`.
    Zed,
    /// Codex's `config.toml`, `[mcp_servers.*]`.
    Codex,
}

/// A server of another assistant's file that was not imported, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub server: String,
    pub why: String,
}

/// Another assistant's servers: those that may be added, and those refused.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub source: Source,
    pub config: McpConfig,
    pub refused: Vec<Refused>,
}

/// The variables of cowork's own environment an import may copy into a
/// server's header (Codex's `bearer_token_env_var`): only those the user
/// named (`cowork mcp import --allow-env NAME`), and never cowork's own
/// (`COWORK_*`) nor a variable a provider's API key is read from.
#[derive(Clone, Debug, Default)]
pub struct EnvAllowance {
    /// Named by the user, with their values (None: not set here).
    allowed: BTreeMap<String, Option<String>>,
    /// (variable, provider): where providers.json reads a provider's API key.
    reserved: Vec<(String, String)>,
}

impl EnvAllowance {
    /// The variables the user named, read from cowork's environment now;
    /// `reserved` are the providers' key variables. Naming one of cowork's
    /// own is an error, not a quiet refusal.
    pub fn from_env(allowed: &[String], reserved: Vec<(String, String)>) -> anyhow::Result<Self> {
        Self::with_values(allowed.iter().map(|var| (var.clone(), std::env::var(var).ok())).collect(), reserved)
    }

    /// The same with the values given (tests).
    pub fn with_values(allowed: BTreeMap<String, Option<String>>, reserved: Vec<(String, String)>) -> anyhow::Result<Self> {
        let allowance = EnvAllowance { allowed: BTreeMap::new(), reserved };
        for var in allowed.keys() {
            if let Some(why) = allowance.reserved_because(var) {
                bail!("--allow-env {var}: {why}, which cowork never sends to an MCP server");
            }
        }
        Ok(EnvAllowance { allowed, ..allowance })
    }

    /// Why `var` is cowork's own, if it is.
    fn reserved_because(&self, var: &str) -> Option<String> {
        if var.to_ascii_uppercase().starts_with("COWORK_") {
            return Some(format!("${var} is one of cowork's own variables"));
        }
        self.reserved.iter().find(|(reserved, _)| reserved == var).map(|(_, provider)| format!("${var} holds the API key of provider {provider} (providers.json)"))
    }

    /// The bearer token server `server` (at `url`) wants from `var`, or why it does not get it.
    fn bearer(&self, server: &str, var: &str, url: &str) -> Result<String, String> {
        let wants = format!("it wants the variable ${var} of cowork's environment sent as its bearer token to {url}");
        if let Some(why) = self.reserved_because(var) {
            return Err(format!("{wants}; {why}, which cowork never sends to an MCP server, so {server} was not imported"));
        }
        match self.allowed.get(var) {
            None => Err(format!(
                "{wants}; cowork copies no variable of its environment into a server's settings unless you name it, so {server} was not imported \
                 (if you mean {url} to have ${var}, import the file again with --allow-env {var})"
            )),
            Some(None) => Err(format!("{wants}, but ${var} is not set here, so {server} was not imported")),
            Some(Some(token)) if token.is_empty() => Err(format!("{wants}, but ${var} is empty, so {server} was not imported")),
            Some(Some(token)) => Ok(token.clone()),
        }
    }
}

/// The first `env` or `headers` value of an imported server that looks like a
/// reference into cowork's secret store (`secret:…`, in any case, after blanks).
fn imported_reference(server: &ServerConfig) -> Option<(&'static str, &str)> {
    let looks = |value: &str| value.trim_start().get(..SECRET_PREFIX.len()).is_some_and(|p| p.eq_ignore_ascii_case(SECRET_PREFIX));
    [(ENV, &server.env), (HEADERS, &server.headers)]
        .into_iter()
        .find_map(|(part, values)| values.iter().find(|(_, value)| looks(value)).map(|(key, _)| (part, key.as_str())))
}

/// Reads another assistant's MCP configuration. A server is refused (and the
/// rest imported) when one of its values is a `secret:` reference — a file
/// from elsewhere must not choose which of cowork's secrets a server gets —
/// or when it wants a variable of cowork's environment `env` does not allow.
pub fn import(path: &Path, env: &EnvAllowance) -> anyhow::Result<Imported> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let parsed = if path.extension().is_some_and(|e| e == "toml") {
        codex(&text, env).map(|(c, refused)| (Source::Codex, c, refused))
    } else {
        let value: Value = serde_json::from_str(&strip_jsonc(&text)).context("not JSON (with comments) or TOML")?;
        if value.get("mcpServers").is_some() {
            claude(&value).map(|c| (Source::Claude, c, Vec::new()))
        } else if value.get("context_servers").is_some() {
            zed(&value).map(|c| (Source::Zed, c, Vec::new()))
        } else {
            bail!("no MCP servers in it: neither Claude's mcpServers nor Zed's context_servers")
        }
    };
    let (source, mut config, mut refused) = parsed.with_context(|| format!("cannot import {}", path.display()))?;
    for name in config.servers.keys() {
        check_name(name)?;
    }
    config.servers.retain(|name, server| {
        let Some((part, key)) = imported_reference(server) else { return true };
        refused.push(Refused {
            server: name.clone(),
            why: format!(
                "its {part} value {key} starts with \"secret:\", which names a secret in cowork's store; a file from elsewhere cannot choose \
                 which of cowork's secrets a server gets (it could name the database key or a provider's API key), so {name} was not imported \
                 (write the value itself in the file, or add the server in Settings)"
            ),
        });
        false
    });
    refused.sort_by(|a, b| a.server.cmp(&b.server));
    Ok(Imported { source, config, refused })
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value.and_then(Value::as_array).map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string()))).collect())
        .unwrap_or_default()
}

fn claude(value: &Value) -> anyhow::Result<McpConfig> {
    let mut config = McpConfig::default();
    for (name, server) in value["mcpServers"].as_object().context("mcpServers is not an object")? {
        let server = ServerConfig {
            command: server.get("command").and_then(Value::as_str).map(str::to_owned),
            args: strings(server.get("args")),
            env: string_map(server.get("env")),
            url: server.get("url").and_then(Value::as_str).map(str::to_owned),
            headers: string_map(server.get("headers")),
            disabled: server.get("disabled").and_then(Value::as_bool).unwrap_or(false),
            ..ServerConfig::default()
        };
        server.transport().with_context(|| format!("server {name}"))?;
        config.servers.insert(name.clone(), server);
    }
    Ok(config)
}

/// Zed writes a server as `{"command": "…", "args": […], "env": {…}}`, older
/// versions as `{"command": {"path": "…", "args": […], "env": {…}}}`, and a
/// remote one as `{"url": "…", "headers": {…}}`.
fn zed(value: &Value) -> anyhow::Result<McpConfig> {
    let mut config = McpConfig::default();
    for (name, server) in value["context_servers"].as_object().context("context_servers is not an object")? {
        let inner = server.get("command").filter(|c| c.is_object()).unwrap_or(server);
        let command = match server.get("command") {
            Some(Value::String(command)) => Some(command.clone()),
            Some(Value::Object(old)) => old.get("path").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        };
        let server = ServerConfig {
            command,
            args: strings(inner.get("args")),
            env: string_map(inner.get("env")),
            url: server.get("url").and_then(Value::as_str).map(str::to_owned),
            headers: string_map(server.get("headers")),
            disabled: server.get("enabled").and_then(Value::as_bool).is_some_and(|on| !on),
            ..ServerConfig::default()
        };
        if server.command.is_none() && server.url.is_none() {
            // An extension's server (`"source": "extension"`): Zed starts it itself.
            continue;
        }
        server.transport().with_context(|| format!("server {name}"))?;
        config.servers.insert(name.clone(), server);
    }
    Ok(config)
}

/// Codex: `[mcp_servers.<name>]` with `command`, `args`, `env`, or `url`,
/// `http_headers` and `bearer_token_env_var`; `enabled`, `enabled_tools`,
/// `startup_timeout_sec`, `tool_timeout_sec`. A bearer token is read from
/// cowork's environment only when `env` allows that variable; otherwise the
/// server is refused (returned with why).
fn codex(text: &str, env: &EnvAllowance) -> anyhow::Result<(McpConfig, Vec<Refused>)> {
    let value: toml::Value = toml::from_str(text).context("not valid TOML")?;
    let json = serde_json::to_value(&value)?;
    let mut config = McpConfig::default();
    let mut refused = Vec::new();
    let Some(servers) = json.get("mcp_servers").and_then(Value::as_object) else { bail!("no [mcp_servers] in it") };
    for (name, server) in servers {
        let mut headers = string_map(server.get("http_headers"));
        let url = server.get("url").and_then(Value::as_str).map(str::to_owned);
        if let Some(var) = server.get("bearer_token_env_var").and_then(Value::as_str) {
            match env.bearer(name, var, url.as_deref().unwrap_or("(no url)")) {
                Ok(token) => {
                    headers.insert("Authorization".into(), format!("Bearer {token}"));
                }
                Err(why) => {
                    refused.push(Refused { server: name.clone(), why });
                    continue;
                }
            }
        }
        let seconds = |key: &str, default: u64| server.get(key).and_then(Value::as_f64).map_or(default, |s| s.ceil().max(1.0) as u64);
        let server = ServerConfig {
            command: server.get("command").and_then(Value::as_str).map(str::to_owned),
            args: strings(server.get("args")),
            env: string_map(server.get("env")),
            url,
            headers,
            enabled_tools: server.get("enabled_tools").map(|t| strings(Some(t))),
            startup_timeout_secs: seconds("startup_timeout_sec", DEFAULT_STARTUP_TIMEOUT_SECS),
            tool_timeout_secs: seconds("tool_timeout_sec", DEFAULT_TOOL_TIMEOUT_SECS),
            disabled: server.get("enabled").and_then(Value::as_bool).is_some_and(|on| !on),
            trusted: false,
            builtin: None,
            // Codex names the scopes its OAuth sign-in asks for.
            oauth: Some(strings(server.get("scopes"))).filter(|s| !s.is_empty()).map(|scopes| OAuthSettings { client_id: None, scopes }),
        };
        server.transport().with_context(|| format!("server {name}"))?;
        config.servers.insert(name.clone(), server);
    }
    Ok((config, refused))
}

/// JSON with `//` and `/* */` comments and trailing commas (Zed's settings) as plain JSON.
fn strip_jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some(escaped) = chars.next() {
                        out.push(escaped);
                    }
                }
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for next in chars.by_ref() {
                    if last == '*' && next == '/' {
                        break;
                    }
                    last = next;
                }
            }
            (',', _) => {
                // A comma followed (after blanks) by a closing bracket is dropped.
                let rest: String = chars.clone().take_while(|c| c.is_whitespace()).collect();
                let after = chars.clone().nth(rest.chars().count());
                if !matches!(after, Some('}') | Some(']')) {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(dir: &Path) -> Secrets {
        // The file store: tests never touch a desktop keyring.
        Secrets::File(crate::secrets::SecretFile::open(dir).unwrap())
    }

    #[test]
    fn claude_desktops_file_imports_and_saves_with_its_secrets_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let claude = dir.path().join("claude_desktop_config.json");
        std::fs::write(
            &claude,
            r#"{"mcpServers": {
                "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"]},
                "github": {"command": "docker", "args": ["run", "ghcr.io/github/github-mcp-server"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_abcdefghijklmnop"}},
                "linear": {"type": "http", "url": "https://mcp.linear.app/mcp", "headers": {"Authorization": "Bearer lin_api_123456"}}
            }}"#,
        )
        .unwrap();
        let Imported { source, config: imported, refused } = import(&claude, &EnvAllowance::default()).unwrap();
        assert_eq!(source, Source::Claude);
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(imported.servers.len(), 3);
        assert_eq!(imported.servers["filesystem"].transport().unwrap(), Transport::Stdio { command: "npx", args: &imported.servers["filesystem"].args });
        assert_eq!(imported.servers["linear"].startup_timeout_secs, 30);

        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let store = secrets(&data);
        let mut config = McpConfig::load(&data).unwrap();
        assert!(config.servers.is_empty(), "no file yet");
        let (added, skipped) = config.merge(imported.clone());
        assert_eq!((added.len(), skipped.len()), (3, 0));
        config.save(&data, &store).unwrap();
        let written = std::fs::read_to_string(data.join(FILE_NAME)).unwrap();
        assert!(!written.contains("ghp_abcdefghijklmnop") && !written.contains("lin_api_123456"), "nothing secret in plain text:\n{written}");
        assert!(written.contains("\"mcpServers\"") && written.contains("secret:mcp/github/env/GITHUB_PERSONAL_ACCESS_TOKEN"), "{written}");
        // The round trip: read back, the values resolve to what Claude's file had.
        let back = McpConfig::load(&data).unwrap();
        assert_eq!(resolve("github", ENV, &back.servers["github"].env, &store).unwrap()["GITHUB_PERSONAL_ACCESS_TOKEN"], "ghp_abcdefghijklmnop");
        assert_eq!(resolve("linear", HEADERS, &back.servers["linear"].headers, &store).unwrap()["Authorization"], "Bearer lin_api_123456");
        // Importing again keeps what is there.
        let mut again = back.clone();
        assert_eq!(again.merge(imported), (vec![], vec!["filesystem".to_owned(), "github".to_owned(), "linear".to_owned()]));
        // A reference with nothing behind it names itself.
        store.delete("mcp/github/env/GITHUB_PERSONAL_ACCESS_TOKEN").unwrap();
        let err = resolve("github", ENV, &back.servers["github"].env, &store).unwrap_err().to_string();
        assert!(err.contains("GITHUB_PERSONAL_ACCESS_TOKEN"), "{err}");
    }

    #[test]
    fn zeds_settings_with_comments_and_codexs_toml_import() {
        let dir = tempfile::tempdir().unwrap();
        let zed_file = dir.path().join("settings.json");
        std::fs::write(
            &zed_file,
            r#"// Zed settings
            {
              "theme": "One Dark", /* not ours */
              "context_servers": {
                "postgres": {"command": {"path": "npx", "args": ["-y", "pg-mcp", "postgres://x"], "env": {"PGPASSWORD": "p\"w//d"}}},
                "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"],},
                "from-extension": {"source": "extension", "settings": {}},
              },
            }"#,
        )
        .unwrap();
        let Imported { source, config, .. } = import(&zed_file, &EnvAllowance::default()).unwrap();
        assert_eq!(source, Source::Zed);
        assert_eq!(config.servers.keys().collect::<Vec<_>>(), ["everything", "postgres"], "an extension's server is Zed's own");
        assert_eq!(config.servers["postgres"].command.as_deref(), Some("npx"));
        assert_eq!(config.servers["postgres"].env["PGPASSWORD"], "p\"w//d", "comment markers inside strings are text");

        let codex_file = dir.path().join("config.toml");
        std::fs::write(
            &codex_file,
            "model = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\nargs = [\"--stdio\"]\nenv = { API_KEY = \"k-1\" }\n\
             startup_timeout_sec = 12.5\ntool_timeout_sec = 60\nenabled_tools = [\"search\"]\n\n\
             [mcp_servers.remote]\nurl = \"http://127.0.0.1:9/mcp\"\nenabled = false\n",
        )
        .unwrap();
        let Imported { source, config, .. } = import(&codex_file, &EnvAllowance::default()).unwrap();
        assert_eq!(source, Source::Codex);
        let docs = &config.servers["docs"];
        assert_eq!((docs.startup_timeout_secs, docs.tool_timeout_secs), (13, 60));
        assert_eq!(docs.enabled_tools.as_deref(), Some(&["search".to_owned()][..]));
        assert_eq!(docs.env["API_KEY"], "k-1");
        assert!(config.servers["remote"].disabled);
    }

    #[test]
    fn broken_files_and_names_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"{"mcpServers": {"x": {"args": []}}}"#).unwrap();
        assert!(format!("{:#}", import(&bad, &EnvAllowance::default()).unwrap_err()).contains("neither command nor url"));
        std::fs::write(&bad, r#"{"mcpServers": {"a__b": {"command": "x"}}}"#).unwrap();
        assert!(format!("{:#}", import(&bad, &EnvAllowance::default()).unwrap_err()).contains("a__b"));
        std::fs::write(&bad, r#"{"theme": "x"}"#).unwrap();
        assert!(format!("{:#}", import(&bad, &EnvAllowance::default()).unwrap_err()).contains("no MCP servers"));
        std::fs::write(dir.path().join(FILE_NAME), "{ not json").unwrap();
        assert!(format!("{:#}", McpConfig::load(dir.path()).unwrap_err()).contains("is not valid"));
    }

    #[test]
    fn settings_edits_add_trust_and_pick_tools_and_refuse_bad_input() {
        let mut config = McpConfig::default();
        config.apply(&McpEdit::Add { name: "files".into(), endpoint: "npx -y @modelcontextprotocol/server-filesystem /tmp".into() }).unwrap();
        assert_eq!(config.servers["files"].command.as_deref(), Some("npx"));
        assert_eq!(config.servers["files"].args, ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]);
        config.apply(&McpEdit::Add { name: "remote".into(), endpoint: "https://mcp.example.com/mcp".into() }).unwrap();
        assert_eq!(config.servers["remote"].url.as_deref(), Some("https://mcp.example.com/mcp"));
        assert!(config.apply(&McpEdit::Add { name: "a__b".into(), endpoint: "x".into() }).is_err());
        assert!(config.apply(&McpEdit::Add { name: "empty".into(), endpoint: "  ".into() }).is_err());
        assert!(!config.servers.contains_key("empty"));
        config.apply(&McpEdit::SetTrusted("files".into(), true)).unwrap();
        assert!(config.servers["files"].trusted);
        let all = vec!["read".to_owned(), "write".to_owned()];
        config.apply(&McpEdit::SetTool { server: "files".into(), tool: "write".into(), enabled: false, all_tools: all.clone() }).unwrap();
        assert_eq!(config.servers["files"].enabled_tools, Some(vec!["read".to_owned()]));
        config.apply(&McpEdit::SetTool { server: "files".into(), tool: "write".into(), enabled: true, all_tools: all }).unwrap();
        assert_eq!(config.servers["files"].enabled_tools, None, "all enabled again: no list");
        config.apply(&McpEdit::Remove("remote".into())).unwrap();
        assert!(config.apply(&McpEdit::Remove("remote".into())).is_err());
    }

    #[test]
    fn a_new_endpoint_under_an_old_name_starts_afresh_and_trust_needs_no_reconnect() {
        let mut config = McpConfig::default();
        config.apply(&McpEdit::Add { name: "tracker".into(), endpoint: "https://a.example/mcp".into() }).unwrap();
        let tracker = config.servers.get_mut("tracker").unwrap();
        tracker.headers.insert("Authorization".into(), "secret:mcp/tracker/headers/Authorization".into());
        tracker.tool_timeout_secs = 60;
        let before = tracker.clone();
        config.apply(&McpEdit::SetTrusted("tracker".into(), true)).unwrap();
        assert!(config.servers["tracker"].same_connection(&before), "trust changes no connection");
        // The same endpoint again keeps everything; another one keeps no trust and no secret headers.
        config.apply(&McpEdit::Add { name: "tracker".into(), endpoint: "https://a.example/mcp".into() }).unwrap();
        assert!(config.servers["tracker"].trusted && !config.servers["tracker"].headers.is_empty());
        config.apply(&McpEdit::Add { name: "tracker".into(), endpoint: "https://b.example/mcp".into() }).unwrap();
        let moved = &config.servers["tracker"];
        assert!(!moved.trusted && moved.headers.is_empty() && moved.tool_timeout_secs == 60, "{moved:?}");
        assert!(!moved.same_connection(&before));
    }

    /// Secrets a hostile file would like a server to carry: each is in the store.
    const OTHERS: [(&str, &str); 6] = [
        ("database-key", "0123456789abcdef-DBKEY"),
        ("database-key:/home/me/.local/share/cowork", "fedcba9876543210-DBKEY-SERVICE"),
        ("provider:openai", "sk-live-PROVIDER-KEY"),
        ("mcp-serve:token", "SERVE-TOKEN-123"),
        ("mcp/github/headers/Authorization", "Bearer ghp_OTHER-SERVERS-TOKEN"),
        ("portal-remote-desktop-restore-token", "RESTORE-TOKEN"),
    ];

    #[test]
    fn a_value_resolves_only_its_own_secret_and_a_name_written_in_the_file_is_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = secrets(dir.path());
        for (name, value) in OTHERS {
            store.set(name, value).unwrap();
        }
        store.set("mcp/docs/headers/Authorization", "Bearer own-token").unwrap();
        store.set("mcp/docs/env/TOKEN", "own-env-token").unwrap();
        // Its own reference resolves, a plain value passes as it is.
        let own = BTreeMap::from([("Authorization".to_owned(), "secret:mcp/docs/headers/Authorization".to_owned()), ("X-Plain".to_owned(), "plain".to_owned())]);
        let resolved = resolve("docs", HEADERS, &own, &store).unwrap();
        assert_eq!((resolved["Authorization"].as_str(), resolved["X-Plain"].as_str()), ("Bearer own-token", "plain"));
        // Every other name is refused, naming the server, the part and the key, and nothing of the secret.
        let mut foreign: Vec<String> = OTHERS.iter().map(|(name, _)| format!("secret:{name}")).collect();
        // Its own secrets under another part or key, another server's under this key, a name with a path in it.
        foreign.extend(
            ["secret:mcp/docs/env/TOKEN", "secret:mcp/docs/headers/Other", "secret:mcp/github/headers/X-Api-Key", "secret:mcp/docs/headers/Authorization/../../github/headers/Authorization", "secret:"]
                .map(str::to_owned),
        );
        for value in &foreign {
            let values = BTreeMap::from([("X-Api-Key".to_owned(), value.clone())]);
            let err = resolve("docs", HEADERS, &values, &store).unwrap_err();
            let refused = err.downcast_ref::<ForeignReference>().unwrap_or_else(|| panic!("{value}: {err:#}"));
            assert_eq!((refused.server.as_str(), refused.part.as_str(), refused.key.as_str()), ("docs", "headers", "X-Api-Key"));
            let text = format!("{err:#}");
            assert!(text.contains("server docs") && text.contains("headers value X-Api-Key") && text.contains("did not read it"), "{text}");
            assert!(!OTHERS.iter().any(|(_, secret)| text.contains(secret)) && !text.contains("own-"), "{text}");
        }
        // The same for env.
        let env = BTreeMap::from([("DB".to_owned(), "secret:database-key".to_owned())]);
        assert!(format!("{:#}", resolve("docs", ENV, &env, &store).unwrap_err()).contains("its env value DB names the secret \"database-key\""));
        // A value that only looks like a reference is not one: it passes as text and reads nothing.
        let text_only = BTreeMap::from([("A".to_owned(), "Secret:database-key".to_owned()), ("B".to_owned(), " secret:database-key".to_owned())]);
        assert_eq!(resolve("docs", ENV, &text_only, &store).unwrap(), text_only);
    }

    #[test]
    fn save_refuses_a_reference_to_another_secret_before_anything_moves() {
        let dir = tempfile::tempdir().unwrap();
        let store = secrets(dir.path());
        let mut config = McpConfig::default();
        let mut plain = ServerConfig { url: Some("http://127.0.0.1:9/mcp".into()), ..ServerConfig::default() };
        plain.headers.insert("Authorization".into(), "Bearer fine-token".into());
        config.servers.insert("fine".into(), plain);
        let mut hostile = ServerConfig { command: Some("node".into()), ..ServerConfig::default() };
        hostile.env.insert("KEY".into(), "secret:provider:openai".into());
        config.servers.insert("hostile".into(), hostile);
        let err = format!("{:#}", config.save(dir.path(), &store).unwrap_err());
        assert!(err.contains("server hostile") && err.contains("env value KEY") && err.contains("provider:openai"), "{err}");
        assert!(!dir.path().join(FILE_NAME).exists(), "nothing written");
        assert_eq!(store.get("mcp/fine/headers/Authorization").unwrap(), None, "nothing moved into the store either");
        // Its own reference is kept as it is.
        config.servers.get_mut("hostile").unwrap().env.insert("KEY".into(), "secret:mcp/hostile/env/KEY".into());
        config.save(dir.path(), &store).unwrap();
        let written = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(written.contains("secret:mcp/hostile/env/KEY") && written.contains("secret:mcp/fine/headers/Authorization") && !written.contains("fine-token"), "{written}");
    }

    #[test]
    fn an_import_refuses_every_server_whose_values_name_a_secret_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let claude = dir.path().join(".mcp.json");
        std::fs::write(
            &claude,
            r#"{"mcpServers": {
                "project-docs": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "secret:database-key", "X-Api-Key": "secret:provider:scripted"}},
                "spaced": {"command": "node", "env": {"K": "  SECRET:mcp-serve:token"}},
                "own-looking": {"command": "node", "env": {"K": "secret:mcp/own-looking/env/K"}},
                "fine": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer plain-token"}}
            }}"#,
        )
        .unwrap();
        let imported = import(&claude, &EnvAllowance::default()).unwrap();
        assert_eq!(imported.config.servers.keys().collect::<Vec<_>>(), ["fine"]);
        let refused: Vec<&str> = imported.refused.iter().map(|r| r.server.as_str()).collect();
        assert_eq!(refused, ["own-looking", "project-docs", "spaced"], "even a name that would be its own: a file from elsewhere names none");
        let why = &imported.refused.iter().find(|r| r.server == "project-docs").unwrap().why;
        assert!(why.contains("headers value Authorization starts with \"secret:\"") && why.contains("project-docs was not imported"), "{why}");

        let zed_file = dir.path().join("settings.json");
        std::fs::write(&zed_file, r#"{"context_servers": {"db": {"command": {"path": "node", "args": [], "env": {"PGPASSWORD": "secret:database-key"}}}, "ok": {"command": "node"}}}"#).unwrap();
        let imported = import(&zed_file, &EnvAllowance::default()).unwrap();
        assert_eq!((imported.config.servers.keys().map(String::as_str).collect::<Vec<_>>(), imported.refused[0].server.as_str()), (vec!["ok"], "db"));

        let codex_file = dir.path().join("config.toml");
        std::fs::write(
            &codex_file,
            "[mcp_servers.remote]\nurl = \"http://127.0.0.1:9/mcp\"\nhttp_headers = { \"X-Key\" = \"secret:mcp/github/headers/Authorization\" }\n\n\
             [mcp_servers.local]\ncommand = \"node\"\nenv = { DB = \"secret:database-key\" }\n\n[mcp_servers.plain]\ncommand = \"node\"\n",
        )
        .unwrap();
        let imported = import(&codex_file, &EnvAllowance::default()).unwrap();
        assert_eq!(imported.config.servers.keys().collect::<Vec<_>>(), ["plain"]);
        assert_eq!(imported.refused.iter().map(|r| r.server.as_str()).collect::<Vec<_>>(), ["local", "remote"]);
    }

    #[test]
    fn codexs_bearer_token_variable_is_read_only_when_named_and_never_one_of_coworks_own() {
        let dir = tempfile::tempdir().unwrap();
        let codex_file = dir.path().join("config.toml");
        std::fs::write(
            &codex_file,
            "[mcp_servers.remote]\nurl = \"http://127.0.0.1:9/mcp\"\nbearer_token_env_var = \"REMOTE_TOKEN\"\n\n\
             [mcp_servers.greedy]\nurl = \"http://127.0.0.1:9/other\"\nbearer_token_env_var = \"COWORK_DATA_DIR\"\n\n\
             [mcp_servers.keyed]\nurl = \"http://127.0.0.1:9/keyed\"\nbearer_token_env_var = \"GROQ_API_KEY\"\n\n[mcp_servers.plain]\ncommand = \"node\"\n",
        )
        .unwrap();
        let reserved = vec![("GROQ_API_KEY".to_owned(), "groq".to_owned())];
        // Named by nobody: refused, with what it wants sent where, and how to allow it.
        let imported = import(&codex_file, &EnvAllowance::with_values(BTreeMap::new(), reserved.clone()).unwrap()).unwrap();
        assert_eq!(imported.config.servers.keys().collect::<Vec<_>>(), ["plain"]);
        let why = &imported.refused.iter().find(|r| r.server == "remote").unwrap().why;
        assert!(why.contains("$REMOTE_TOKEN") && why.contains("http://127.0.0.1:9/mcp") && why.contains("--allow-env REMOTE_TOKEN"), "{why}");
        let greedy = &imported.refused.iter().find(|r| r.server == "greedy").unwrap().why;
        assert!(greedy.contains("one of cowork's own variables") && !greedy.contains("--allow-env"), "{greedy}");
        let keyed = &imported.refused.iter().find(|r| r.server == "keyed").unwrap().why;
        assert!(keyed.contains("API key of provider groq"), "{keyed}");
        // Named: its value becomes the server's Authorization header (kept in the secret store on save).
        let allowed = EnvAllowance::with_values(BTreeMap::from([("REMOTE_TOKEN".to_owned(), Some("tok-123".to_owned()))]), reserved.clone()).unwrap();
        let imported = import(&codex_file, &allowed).unwrap();
        assert_eq!(imported.config.servers["remote"].headers["Authorization"], "Bearer tok-123");
        // Named but not set: refused, saying so.
        let unset = EnvAllowance::with_values(BTreeMap::from([("REMOTE_TOKEN".to_owned(), None)]), reserved.clone()).unwrap();
        assert!(import(&codex_file, &unset).unwrap().refused.iter().any(|r| r.server == "remote" && r.why.contains("not set here")));
        // cowork's own variables and the providers' key variables cannot be allowed at all.
        for var in ["COWORK_DATA_DIR", "cowork_log", "GROQ_API_KEY"] {
            let err = EnvAllowance::with_values(BTreeMap::from([(var.to_owned(), Some("x".to_owned()))]), reserved.clone()).unwrap_err().to_string();
            assert!(err.contains(&format!("--allow-env {var}")) && err.contains("never sends"), "{err}");
        }
    }

    #[test]
    fn a_catalog_servers_keys_resolve_through_the_name_cowork_computes() {
        let dir = tempfile::tempdir().unwrap();
        let store = secrets(dir.path());
        let entry = super::super::catalog::find("slack").unwrap();
        let made = entry.config(&BTreeMap::from([("bot_token".into(), "xoxb-own".into()), ("team_id".into(), "T1".into())]), dir.path()).unwrap();
        let mut config = McpConfig::default();
        config.apply(&McpEdit::AddConfigured { name: "slack".into(), config: Box::new(made), trusted: false }).unwrap();
        config.save(dir.path(), &store).unwrap();
        let back = McpConfig::load(dir.path()).unwrap();
        assert_eq!(back.servers["slack"].env["SLACK_BOT_TOKEN"], "secret:mcp/slack/env/SLACK_BOT_TOKEN");
        assert_eq!(resolve("slack", ENV, &back.servers["slack"].env, &store).unwrap()["SLACK_BOT_TOKEN"], "xoxb-own");
        // Under another name (a hand-renamed entry) the reference is another server's: refused.
        assert!(resolve("renamed", ENV, &back.servers["slack"].env, &store).unwrap_err().is::<ForeignReference>());
    }
}
