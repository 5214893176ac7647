//! The integrations catalog (`assets/integrations.json`, compiled in):
//! well-known MCP servers — the reference servers and popular ones — each with
//! a runner and the short form of exactly the keys and paths it needs. Filling
//! the form makes a `ServerConfig` (`npx -y package@version …`, `uvx
//! package@version …`, an HTTP URL with headers, or the built-in Browser), with
//! paths checked, a text field one line and an optional field left out.
//! Settings' "Test and add" sends `McpCommand::AddFromCatalog`: the mcp worker
//! builds the config, tests it with one connection and one `tools/list`
//! (`test_server`), and only when that answered applies
//! `McpEdit::AddConfigured` (`McpConfig::save` moves every key into the secret
//! store) and reports `McpEvent::McpCatalogAdded`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

use super::config::ServerConfig;

const CATALOG: &str = include_str!("../../assets/integrations.json");

/// What one form field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldKind {
    /// A key or token: a password field, kept in the secret store.
    Secret,
    Folder,
    /// Several folders, one per line (each its own argument).
    Folders,
    File,
    Text,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Field {
    pub key: String,
    pub label: String,
    pub kind: FieldKind,
    #[serde(default)]
    pub required: bool,
    /// Used when the field is left empty (`{data_dir}` is cowork's data folder).
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub help: String,
}

/// How the server is started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runner {
    Npx,
    Uvx,
    Http,
    Builtin,
}

impl Runner {
    /// The program that must be on PATH, and how to get it.
    pub fn program(self) -> Option<(&'static str, &'static str)> {
        match self {
            Runner::Npx => Some(("npx", "npx comes with Node.js: install it (Debian and Ubuntu: `sudo apt install npm`; or from nodejs.org)")),
            Runner::Uvx => Some(("uvx", "uvx comes with uv: install it (`pipx install uv`, or see docs.astral.sh/uv)")),
            Runner::Http | Runner::Builtin => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Entry {
    pub id: String,
    pub name: String,
    pub description: String,
    pub runner: Runner,
    #[serde(default)]
    pub package: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub builtin: Option<String>,
    #[serde(default)]
    pub fields: Vec<Field>,
    /// The server itself reaches the internet (said in the list).
    #[serde(default)]
    pub network: bool,
    #[serde(default)]
    pub homepage: String,
}

#[derive(Deserialize)]
struct CatalogFile {
    integrations: Vec<Entry>,
}

/// The shipped catalog (checked by a unit test: a broken file fails the build's tests).
pub fn entries() -> &'static [Entry] {
    static ENTRIES: std::sync::OnceLock<Vec<Entry>> = std::sync::OnceLock::new();
    ENTRIES.get_or_init(|| match serde_json::from_str::<CatalogFile>(CATALOG) {
        Ok(file) => file.integrations,
        Err(err) => {
            tracing::error!(%err, "the integrations catalog is broken");
            Vec::new()
        }
    })
}

pub fn find(id: &str) -> Option<&'static Entry> {
    entries().iter().find(|e| e.id == id)
}

/// The catalog entry a configured server runs, whatever version it names and
/// however it was added (the form, an import, by hand): its package among the
/// arguments of a stdio server (`npx -y pkg@1`, `uvx pkg==1`, `uvx --from pkg
/// cmd`, `node …/node_modules/pkg/…`) or as its command, or its URL's host.
/// The built-in Browser is left out: it has its own offline mode (a dead proxy).
pub fn entry_of(config: &ServerConfig) -> Option<&'static Entry> {
    entry_in(entries(), config)
}

fn entry_in<'a>(entries: &'a [Entry], config: &ServerConfig) -> Option<&'a Entry> {
    if config.builtin.is_some() {
        return None;
    }
    entries.iter().find(|entry| match (entry.runner, &config.command, &config.url) {
        (Runner::Npx | Runner::Uvx, Some(command), None) => {
            let Some(package) = entry.package.as_deref().filter(|p| !p.is_empty()) else { return false };
            let names = |word: &str| {
                word == package
                    || word.strip_prefix(package).is_some_and(|rest| rest.starts_with('@') || rest.starts_with("==") || rest.starts_with('['))
                    || word.contains(&format!("node_modules/{package}/"))
            };
            let program = std::path::Path::new(command).file_name().and_then(|n| n.to_str()).unwrap_or_default();
            names(program) || config.args.iter().any(|arg| names(arg))
        }
        (Runner::Http, None, Some(url)) => {
            let host = |url: &str| url::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase));
            entry.url.as_deref().and_then(host).is_some_and(|wanted| host(url).as_deref() == Some(wanted.as_str()))
        }
        _ => false,
    })
}

/// Why a server may not run in offline mode: its catalog entry says it needs the network.
pub fn offline_refusal(config: &ServerConfig) -> Option<String> {
    // A server over HTTP that is not on this computer: a connection made while online is
    // dropped when offline mode comes on, not kept open past it.
    if let Ok(super::config::Transport::Http { url }) = config.transport() {
        let host = crate::net::host_of_url(url).unwrap_or_else(|| url.to_owned());
        if !crate::net::is_loopback(&host) {
            return Some(format!("offline mode: this server is at {host}, not on this computer; it starts when offline mode is off"));
        }
    }
    entry_of(config).filter(|entry| entry.network).map(|entry| format!("offline mode: this integration needs the network ({}); it starts when offline mode is off", entry.name))
}

/// Where `program` is on PATH.
pub fn on_path(program: &str) -> Option<PathBuf> {
    on_path_in(program, std::env::var_os("PATH").as_deref())
}

fn on_path_in(program: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?).map(|dir| dir.join(program)).find(|candidate| {
        use std::os::unix::fs::PermissionsExt;
        candidate.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Whether npx and uvx are on PATH, looked up at most every 5 s: Settings asks
/// for each entry every frame, and a walk of PATH is a stat per folder.
fn runner_found(program: &'static str) -> bool {
    /// When PATH was last walked, and each runner's answer then.
    type Found = Option<(std::time::Instant, Vec<(&'static str, bool)>)>;
    static FOUND: parking_lot::Mutex<Found> = parking_lot::Mutex::new(None);
    let mut found = FOUND.lock();
    if found.as_ref().is_none_or(|(at, _)| at.elapsed() > std::time::Duration::from_secs(5)) {
        *found = Some((std::time::Instant::now(), Vec::new()));
    }
    let (_, known) = found.as_mut().expect("just filled");
    if let Some((_, here)) = known.iter().find(|(p, _)| *p == program) {
        return *here;
    }
    let here = on_path(program).is_some();
    known.push((program, here));
    here
}

impl Entry {
    /// Whether it can start here; else what to install, in one sentence.
    pub fn missing(&self) -> Option<String> {
        self.missing_with(runner_found)
    }

    fn missing_with(&self, found: impl Fn(&'static str) -> bool) -> Option<String> {
        let (program, how) = self.runner.program()?;
        (!found(program)).then(|| format!("{} needs {program}, which is not installed: {how}.", self.name))
    }

    /// The command line as it will run (`npx -y @scope/pkg@1.2.3 …`), for the form.
    pub fn describe(&self) -> String {
        match self.runner {
            Runner::Npx | Runner::Uvx => {
                let (program, _) = self.runner.program().expect("a runner with a program");
                let flag = if self.runner == Runner::Npx { " -y" } else { "" };
                format!("{program}{flag} {} {}", self.pinned(), self.args.join(" ")).trim_end().to_owned()
            }
            Runner::Http => self.url.clone().unwrap_or_default(),
            Runner::Builtin => "built in".to_owned(),
        }
    }

    fn pinned(&self) -> String {
        let package = self.package.clone().unwrap_or_default();
        match &self.version {
            Some(version) => format!("{package}@{version}"),
            None => package,
        }
    }

    /// The server's configuration from the form's values (by field key).
    /// Required fields must be filled; folders and files must be absolute
    /// (a `~/` is the home folder) and folders must exist.
    pub fn config(&self, values: &BTreeMap<String, String>, data_dir: &Path) -> anyhow::Result<ServerConfig> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut filled: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for field in &self.fields {
            let given = values.get(&field.key).map(|v| v.trim()).unwrap_or_default();
            let default = field.default.as_deref().map(|d| d.replace("{data_dir}", &data_dir.display().to_string()));
            let value = if given.is_empty() { default.unwrap_or_default() } else { given.to_owned() };
            if value.is_empty() {
                if field.required {
                    bail!("{} needs {}", self.name, field.label.to_lowercase());
                }
                continue;
            }
            // "secret:…" is how mcp-servers.json names a value in the secret store: typed into a form it
            // would hand this server another server's key.
            if value.starts_with("secret:") {
                bail!("{}: a value cannot start with \"secret:\"", field.label);
            }
            let items: Vec<String> = match field.kind {
                FieldKind::Folders => value.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect(),
                _ => vec![value],
            };
            let mut checked = Vec::new();
            for item in items {
                if matches!(field.kind, FieldKind::Folder | FieldKind::Folders | FieldKind::File) {
                    let path = match (item.strip_prefix("~/"), &home) {
                        (Some(rest), Some(home)) => home.join(rest),
                        _ => PathBuf::from(&item),
                    };
                    if !path.is_absolute() {
                        bail!("{}: {item:?} is not a full path (start it with / or ~/)", field.label);
                    }
                    if matches!(field.kind, FieldKind::Folder | FieldKind::Folders) && !path.is_dir() {
                        bail!("{}: there is no folder {}", field.label, path.display());
                    }
                    checked.push(path.display().to_string());
                } else {
                    if item.contains(['\n', '\r', '\0']) {
                        bail!("{}: one line only", field.label);
                    }
                    checked.push(item);
                }
            }
            filled.insert(field.key.as_str(), checked);
        }
        // `{key}` → the value; None when an optional field was left empty (the argument is left out).
        let fill = |template: &str| -> anyhow::Result<Option<Vec<String>>> {
            let Some(start) = template.find('{') else { return Ok(Some(vec![template.to_owned()])) };
            let end = template[start..].find('}').map(|e| start + e).with_context(|| format!("catalog entry {}: unclosed {{ in {template:?}", self.id))?;
            let key = &template[start + 1..end];
            if !self.fields.iter().any(|f| f.key == key) {
                bail!("catalog entry {}: {template:?} names no field", self.id);
            }
            Ok(filled.get(key).map(|values| {
                if template == format!("{{{key}}}") {
                    values.clone()
                } else {
                    vec![format!("{}{}{}", &template[..start], values.join(","), &template[end + 1..])]
                }
            }))
        };
        let mut config = ServerConfig::default();
        match self.runner {
            Runner::Npx | Runner::Uvx => {
                let (program, _) = self.runner.program().expect("a runner with a program");
                config.command = Some(program.to_owned());
                if self.runner == Runner::Npx {
                    config.args.push("-y".into());
                }
                config.args.push(self.pinned());
                for arg in &self.args {
                    config.args.extend(fill(arg)?.unwrap_or_default());
                }
                // npx and uvx fetch the package on first start: more time than a server that is there.
                config.startup_timeout_secs = config.startup_timeout_secs.max(120);
            }
            Runner::Http => {
                let url = self.url.as_deref().with_context(|| format!("catalog entry {} has no url", self.id))?;
                config.url = Some(fill(url)?.and_then(|v| v.into_iter().next()).with_context(|| format!("{} needs its address", self.name))?);
            }
            Runner::Builtin => config.builtin = self.builtin.clone(),
        }
        for (name, template) in &self.env {
            if let Some(value) = fill(template)?.map(|v| v.join(",")) {
                config.env.insert(name.clone(), value);
            }
        }
        for (name, template) in &self.headers {
            if let Some(value) = fill(template)?.map(|v| v.join(",")) {
                config.headers.insert(name.clone(), value);
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalog_reads_and_every_entry_makes_a_valid_configuration() {
        let ids: Vec<&str> = entries().iter().map(|e| e.id.as_str()).collect();
        for wanted in ["filesystem", "git", "fetch", "memory", "time", "sqlite", "github", "slack", "brave-search", "playwright"] {
            assert!(ids.contains(&wanted), "{wanted} missing from {ids:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().display().to_string();
        for entry in entries() {
            let values: BTreeMap<String, String> = entry
                .fields
                .iter()
                .map(|f| {
                    let value = match f.kind {
                        FieldKind::Folder | FieldKind::Folders => folder.clone(),
                        FieldKind::File => format!("{folder}/x.db"),
                        _ => "value".to_owned(),
                    };
                    (f.key.clone(), value)
                })
                .collect();
            let config = entry.config(&values, dir.path()).unwrap_or_else(|e| panic!("{}: {e:#}", entry.id));
            if entry.runner != Runner::Builtin {
                config.check().unwrap_or_else(|e| panic!("{}: {e:#}", entry.id));
            }
            // Packages are pinned.
            if matches!(entry.runner, Runner::Npx | Runner::Uvx) {
                assert!(entry.version.is_some(), "{} is not pinned", entry.id);
            }
        }
    }

    #[test]
    fn the_form_fills_arguments_env_and_headers_and_refuses_what_is_missing_or_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let files = find("filesystem").unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let values = BTreeMap::from([("folders".to_owned(), format!("{}\n\n{}\n", a.display(), b.display()))]);
        let config = files.config(&values, dir.path()).unwrap();
        assert_eq!(config.command.as_deref(), Some("npx"));
        assert_eq!(config.args, vec!["-y".to_owned(), "@modelcontextprotocol/server-filesystem@2026.8.31".into(), a.display().to_string(), b.display().to_string()]);
        assert!(files.config(&BTreeMap::new(), dir.path()).unwrap_err().to_string().contains("needs folders"));
        let relative = BTreeMap::from([("folders".to_owned(), "notes".to_owned())]);
        assert!(files.config(&relative, dir.path()).unwrap_err().to_string().contains("not a full path"));
        let gone = BTreeMap::from([("folders".to_owned(), "/no/such/folder".to_owned())]);
        assert!(files.config(&gone, dir.path()).unwrap_err().to_string().contains("no folder"));

        // An optional field left empty leaves its argument out; a default fills another.
        let time = find("time").unwrap().config(&BTreeMap::new(), dir.path()).unwrap();
        assert_eq!(time.args, vec!["mcp-server-time@2026.10.19"]);
        let memory = find("memory").unwrap().config(&BTreeMap::new(), dir.path()).unwrap();
        assert_eq!(memory.env.get("MEMORY_FILE_PATH").map(String::as_str), Some(dir.path().join("mcp-memory.jsonl").to_str().unwrap()));
        let slack = find("slack").unwrap().config(&BTreeMap::from([("bot_token".into(), "xoxb-1".into()), ("team_id".into(), "T1".into())]), dir.path()).unwrap();
        assert_eq!(slack.env.keys().collect::<Vec<_>>(), vec!["SLACK_BOT_TOKEN", "SLACK_TEAM_ID"]);
        let github = find("github").unwrap().config(&BTreeMap::from([("token".into(), "ghp_x".into())]), dir.path()).unwrap();
        assert_eq!((github.url.as_deref(), github.headers.get("Authorization").map(String::as_str)), (Some("https://api.githubcopilot.com/mcp/"), Some("Bearer ghp_x")));
        // Without npx or uvx the entry says which is missing and how to get it; HTTP and built-in ones need neither.
        let nowhere = |program: &str| on_path_in(program, Some(std::ffi::OsStr::new("/nonexistent"))).is_some();
        assert_eq!(find("git").unwrap().missing_with(nowhere).unwrap(), "Git needs uvx, which is not installed: uvx comes with uv: install it (`pipx install uv`, or see docs.astral.sh/uv).");
        assert!(find("filesystem").unwrap().missing_with(nowhere).unwrap().contains("npx comes with Node.js"));
        assert!(find("github").unwrap().missing_with(nowhere).is_none() && find("playwright").unwrap().missing_with(nowhere).is_none());
        // A value cannot name another server's secret.
        let stolen = BTreeMap::from([("bot_token".to_owned(), "secret:mcp/github/headers/Authorization".to_owned()), ("team_id".to_owned(), "T1".to_owned())]);
        assert!(find("slack").unwrap().config(&stolen, dir.path()).unwrap_err().to_string().contains("cannot start with"));
        // A text field cannot smuggle a second line into an argument.
        let bad = BTreeMap::from([("timezone".to_owned(), "UTC\n--evil".to_owned())]);
        assert!(find("time").unwrap().config(&bad, dir.path()).is_err());
    }

    #[test]
    fn a_server_is_known_as_its_catalog_entry_however_it_was_added_and_network_ones_are_refused_offline() {
        let stdio = |command: &str, args: &[&str]| ServerConfig { command: Some(command.into()), args: args.iter().map(|a| (*a).to_owned()).collect(), ..ServerConfig::default() };
        let id = |config: &ServerConfig| entry_of(config).map(|e| e.id.as_str());
        // The form's own command lines.
        let dir = tempfile::tempdir().unwrap();
        for entry in entries().iter().filter(|e| e.runner != Runner::Builtin) {
            let value = |kind: FieldKind| match kind {
                FieldKind::Folder | FieldKind::Folders => dir.path().display().to_string(),
                FieldKind::File => dir.path().join("x.db").display().to_string(),
                _ => "v".to_owned(),
            };
            let values: BTreeMap<String, String> = entry.fields.iter().map(|f| (f.key.clone(), value(f.kind))).collect();
            let config = entry.config(&values, dir.path()).unwrap();
            assert_eq!(id(&config), Some(entry.id.as_str()), "{}", entry.id);
            assert_eq!(offline_refusal(&config).is_some(), entry.network, "{}", entry.id);
        }
        // Other versions and other ways of starting the same package.
        assert_eq!(id(&stdio("npx", &["-y", "@modelcontextprotocol/server-slack"])), Some("slack"));
        assert_eq!(id(&stdio("/usr/local/bin/npx", &["--yes", "@brave/brave-search-mcp-server@9.9.9"])), Some("brave-search"));
        assert_eq!(id(&stdio("uvx", &["mcp-server-fetch==2025.1.1"])), Some("fetch"));
        assert_eq!(id(&stdio("uvx", &["--from", "mcp-server-fetch", "mcp-server-fetch"])), Some("fetch"));
        assert_eq!(id(&stdio("mcp-server-fetch", &[])), Some("fetch"));
        assert_eq!(id(&stdio("node", &["/opt/mcp/node_modules/@modelcontextprotocol/server-slack/dist/index.js"])), Some("slack"));
        let github = ServerConfig { url: Some("https://API.githubcopilot.com/mcp/x".into()), ..ServerConfig::default() };
        assert_eq!(id(&github), Some("github"));
        assert!(offline_refusal(&stdio("uvx", &["mcp-server-fetch"])).unwrap().starts_with("offline mode: this integration needs the network (Fetch)"));
        // Not these: another package whose name begins the same, a folder argument, the built-in Browser.
        assert_eq!(id(&stdio("npx", &["-y", "@modelcontextprotocol/server-slack-extra"])), None);
        assert_eq!(id(&stdio("npx", &["-y", "@modelcontextprotocol/server-filesystem@1", "/home/me/mcp-server-fetch"])), Some("filesystem"));
        assert_eq!(id(&ServerConfig { builtin: Some("browser".into()), ..ServerConfig::default() }), None);
        assert!(offline_refusal(&stdio("npx", &["-y", "@modelcontextprotocol/server-filesystem@1", "/tmp"])).is_none());
    }

    #[test]
    fn a_server_over_http_that_is_not_on_this_computer_does_not_run_offline() {
        let http = |url: &str| ServerConfig { url: Some(url.to_owned()), ..ServerConfig::default() };
        assert!(offline_refusal(&http("https://mcp.example.com/mcp")).is_some_and(|why| why.contains("mcp.example.com")));
        assert!(offline_refusal(&http("http://10.231.77.2:9/mcp")).is_some());
        assert_eq!(offline_refusal(&http("http://127.0.0.1:8080/mcp")), None);
        assert_eq!(offline_refusal(&http("http://localhost:8080/mcp")), None);
    }
}