//! The `mcp` worker: owns one connection per configured MCP server and the
//! tokio runtime rmcp needs (one I/O thread, `mcp-io`); crossbeam stays the
//! boundary. It starts the enabled servers from `mcp-servers.json` (after
//! ending the ones a crashed cowork left behind), keeps each server's state —
//! starting, running, stopped, error, waiting for sign-in — and its stderr
//! tail, refreshes a tool list on `tools/list_changed`, checks an idle
//! connection with a 1 s ping before reusing it, and runs the agent's calls:
//! many at once over one connection, each with its tool timeout, progress on
//! the chip, and Stop cancelling it on the server. In offline mode a catalog
//! server that needs the network (its entry says so) is not started and its
//! calls are refused; it starts when offline mode goes off. Settings →
//! Integrations shows `McpEvent::McpServers`.
//!
//! Its loop selects over the `McpCommand` channel (bounded(64): Reload,
//! Connect, Disconnect, Tools, Call, Test, AddFromCatalog, Edit, Elicited,
//! ReadResource, GetPrompt, SignIn, SignOut), two internal bounded channels fed
//! by the runtime's tasks (results: connections, tool lists, catalogs, sign-in
//! progress, a catalog server's test; notices: tools, resources or prompts
//! changed, a server's request for input, a sign-in that could not be renewed),
//! and a 1 s tick that restarts a server whose command line depends on offline
//! mode when the gate flipped, turns a closed connection into an error with the
//! server's stderr, reports the clients of `cowork mcp serve` (`mcp_clients`,
//! read-only) and drops requests for input nobody waits for any more.
//!
//! A server's resources and prompts (its catalog) are listed at connect and on
//! their list-changed notices and travel in `McpServerView`. `ReadResource`
//! answers `McpEvent::ResourceAttached` (the chat keeps it until the next
//! message, whose request carries it; the agent puts it into the prompt marked
//! as data from that server), `GetPrompt` answers `McpEvent::PromptFilled` (the
//! text goes into the chat input to edit). A server's `elicitation/create`
//! becomes `McpEvent::Elicitation` (the form is `elicit::Form`; one it cannot
//! draw is declined at once), and the user's answer comes back as
//! `McpCommand::Elicited`. Servers' notifications that automations wait on go
//! to the automations worker as `Signal::Mcp`.
//!
//! The agent reaches the worker through `McpClient` (a clone of the command
//! sender): `offered` at each operation's start (`ToolsNow`: the tools, and the
//! servers still starting), `offered_after_start` when a call's server is still
//! starting, and `call` from the step's tool threads, watching Stop.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded};

use super::config::{McpConfig, ServerConfig};
use super::connection::{self, Connection, Notice, Progress, StderrTail};
use super::tools::McpTool;
use crate::mcp::events::{McpEvent, McpServerStatus as ServerStatus, McpServerView as ServerView, McpTestFigures as TestFigures, McpTestReport as TestReport};
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, spawn_supervised};
use crate::tools::ToolOutput;

/// A connection unused this long is pinged (1 s) before the next call uses it.
const IDLE_BEFORE_PING: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(1);
/// A call's progress reaches the chip at most this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// A tool an agent may call, with whether its server is trusted.
#[derive(Clone, Debug, PartialEq)]
pub struct Offered {
    pub tool: McpTool,
    pub trusted: bool,
    pub tool_timeout_secs: u64,
    /// Which of cowork's built-ins serves it ("browser"): cowork's own risk rules apply.
    pub builtin: Option<String>,
}

/// The tools on offer now, and the servers still starting (their tools come later).
#[derive(Clone, Debug, Default)]
pub struct ToolsNow {
    pub offered: Vec<Offered>,
    pub starting: Vec<String>,
}

pub struct CallRequest {
    pub server: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    /// The agent's call id: progress is shown on its chip.
    pub call_id: i64,
    pub stop: Arc<AtomicBool>,
    pub reply: Sender<ToolOutput>,
}

pub enum McpCommand {
    /// Read mcp-servers.json again: start what is new or changed, stop what went.
    Reload,
    /// Reconnect one server (Settings' Reconnect).
    Connect(String),
    /// Stop one server until Reconnect or the next start.
    Disconnect(String),
    /// The enabled tools of the running servers.
    Tools(Sender<ToolsNow>),
    Call(CallRequest),
    /// Settings' Test: answers with `McpEvent::McpTested`.
    Test(String),
    /// Settings → Integrations → Add from the catalog: tested with one
    /// `tools/list` first and saved only when that worked; answers with
    /// `McpEvent::McpCatalogAdded`.
    /// `values` are the form's, by field (keys among them: saved into the secret store).
    AddFromCatalog { id: String, values: BTreeMap<String, String>, trusted: bool },
    /// A change from Settings → Integrations: written to mcp-servers.json, then reloaded.
    Edit(super::config::McpEdit),
    /// The user's answer to a server's request for input (`McpEvent::Elicitation`).
    Elicited { id: i64, answer: super::elicit::Answer },
    /// Read a resource to attach to the next message: `McpEvent::ResourceAttached`.
    ReadResource { server: String, uri: String, name: String },
    /// Fill in a prompt for the chat input: `McpEvent::PromptFilled`.
    GetPrompt { server: String, name: String, arguments: BTreeMap<String, String> },
    /// Sign in to an HTTP server with OAuth (the system browser, a loopback redirect).
    SignIn(String),
    /// Forget a server's OAuth sign-in.
    SignOut(String),
    Shutdown,
}

struct Server {
    config: ServerConfig,
    status: ServerStatus,
    connection: Option<Arc<Connection>>,
    tools: Vec<McpTool>,
    catalog: connection::Catalog,
    stderr: StderrTail,
    /// Bumped at each (re)connect: a late result of an older attempt is dropped.
    generation: u64,
    last_used: Instant,
    /// Calls that came while the server was starting.
    waiting: Vec<CallRequest>,
    /// The last 401's `WWW-Authenticate`, where a sign-in's discovery starts.
    challenge: Option<String>,
    /// A sign-in under way (aborted by Stop, a reconnect or a new sign-in).
    sign_in: Option<tokio::task::AbortHandle>,
    /// A built-in, or a catalog server that needs the network, started (or
    /// refused) online (false) or offline (true): started again when that flips.
    started_offline: Option<bool>,
    /// Not started because offline mode is on and it needs the network.
    refused_offline: bool,
}

/// What the runtime's tasks tell the worker.
enum Internal {
    Connected { server: String, generation: u64, result: Result<(Connection, Vec<McpTool>, connection::Catalog), String> },
    Tools { server: String, generation: u64, result: Result<Vec<McpTool>, String> },
    Catalog { server: String, generation: u64, catalog: connection::Catalog },
    Unresponsive { server: String, generation: u64 },
    /// The server answered 401: it wants an OAuth sign-in.
    NeedsSignIn { server: String, generation: u64, challenge: String, why: String },
    /// The sign-in's authorization URL (and why the browser did not open, if it did not).
    SignInUrl { server: String, generation: u64, url: String, not_opened: Option<String> },
    SignedIn { server: String, generation: u64, result: Result<(), String> },
    /// A catalog server's test before it is saved.
    Tested { name: String, config: Box<ServerConfig>, trusted: bool, report: TestReport },
}

pub struct McpWorker {
    runtime: tokio::runtime::Runtime,
    data_dir: PathBuf,
    /// Offline mode, and the log of HTTP servers reached.
    gate: &'static crate::net::OutboundGate,
    servers: BTreeMap<String, Server>,
    sink: EventSink<McpEvent>,
    internal: (Sender<Internal>, Receiver<Internal>),
    notices: (Sender<Notice>, Receiver<Notice>),
    /// The clients of `cowork mcp serve` (another process) as last reported.
    clients: Vec<crate::mcp::events::McpClientView>,
    clients_db: Option<rusqlite::Connection>,
    /// Requests for input the user has not answered: id → (server, reply).
    elicitations: BTreeMap<i64, (String, tokio::sync::oneshot::Sender<super::elicit::Answer>)>,
    /// Automations whose triggers wait for servers' notifications.
    signals: Option<Sender<crate::automations::AutomationsCommand>>,
}

impl McpWorker {
    pub fn new(data_dir: PathBuf, sink: EventSink<McpEvent>, gate: &'static crate::net::OutboundGate) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("mcp-io").enable_all().build()?;
        Ok(McpWorker {
            runtime,
            data_dir,
            gate,
            servers: BTreeMap::new(),
            sink,
            internal: bounded(256),
            notices: bounded(64),
            clients: Vec::new(),
            clients_db: None,
            elicitations: BTreeMap::new(),
            signals: None,
        })
    }

    /// The resources of `server` that enabled automations wait on (read from
    /// cowork.db at connect; a new trigger takes effect at the next connect).
    fn watched_resources(&mut self, server: &str) -> Vec<String> {
        if self.signals.is_none() {
            return Vec::new();
        }
        let path = self.data_dir.join(crate::store::DB_FILE_NAME);
        let Ok(conn) = crate::store::open_read_only(&path) else { return Vec::new() };
        crate::automations::store::watched_resources(&conn, server).unwrap_or_default()
    }

    /// Tells automations a server's notification (never waiting).
    fn signal(&self, server: &str, event: crate::automations::flow::McpEvent, uri: Option<String>) {
        if let Some(signals) = &self.signals {
            let signal = crate::automations::Signal::Mcp { server: server.to_owned(), event, uri, at_millis: crate::ids::now_millis() };
            if signals.try_send(crate::automations::AutomationsCommand::Signal(signal)).is_err() {
                tracing::debug!(server, "automations is busy: an MCP notification was not passed on");
            }
        }
    }

    /// Ends servers an earlier cowork left running, then starts the enabled ones.
    pub fn start(&mut self) {
        for swept in super::orphans::sweep(&self.data_dir) {
            tracing::info!(?swept, "MCP lockfile from an earlier run");
        }
        self.reload();
    }

    fn reload(&mut self) {
        let config = match McpConfig::load(&self.data_dir) {
            Ok(config) => config,
            Err(err) => {
                self.sink.notice(format!("mcp-servers.json was not read: {err:#}"));
                return;
            }
        };
        let gone: Vec<String> = self.servers.keys().filter(|name| !config.servers.contains_key(*name)).cloned().collect();
        for name in gone {
            self.disconnect(&name);
            self.servers.remove(&name);
        }
        for (name, server_config) in config.servers {
            match self.servers.get_mut(&name) {
                Some(server) if server.config == server_config => continue,
                // Trust or a tool switch: the running connection stays as it is.
                Some(server) if server.config.same_connection(&server_config) => {
                    server.config = server_config;
                    continue;
                }
                _ => {}
            }
            let entry = self.servers.entry(name.clone()).or_insert_with(|| Server {
                config: server_config.clone(),
                status: ServerStatus::Stopped,
                connection: None,
                tools: Vec::new(),
                catalog: connection::Catalog::default(),
                stderr: StderrTail::default(),
                generation: 0,
                last_used: Instant::now(),
                waiting: Vec::new(),
                challenge: None,
                sign_in: None,
                started_offline: None,
                refused_offline: false,
            });
            entry.config = server_config;
            if entry.config.disabled {
                self.disconnect(&name);
            } else {
                self.connect(&name);
            }
        }
        self.publish();
    }

    fn edit(&mut self, edit: &super::config::McpEdit) {
        let result = McpConfig::load(&self.data_dir).and_then(|mut config| {
            config.apply(edit)?;
            let secrets = crate::secrets::Secrets::open(&self.data_dir)?;
            config.save(&self.data_dir, &secrets)
        });
        match result {
            Ok(()) => self.reload(),
            Err(err) => {
                self.sink.notice(format!("the MCP servers were not changed: {err:#}"));
            }
        }
    }

    fn connect(&mut self, name: &str) {
        self.disconnect_quietly(name);
        let secrets = crate::secrets::Secrets::open(&self.data_dir);
        let Some(server) = self.servers.get_mut(name) else { return };
        server.generation += 1;
        server.status = ServerStatus::Starting;
        server.stderr = StderrTail::default();
        let generation = server.generation;
        let mut config = server.config.clone();
        let offline = self.gate.is_offline();
        let needs_network = super::catalog::offline_refusal(&config);
        // The Browser's command line depends on offline mode, and a server that needs the
        // network does not run offline: recorded to start them again when that flips.
        server.started_offline = (config.builtin.is_some() || needs_network.is_some()).then_some(offline);
        server.refused_offline = false;
        if offline && let Some(why) = needs_network {
            // Offline mode promises nothing leaves the machine: a server whose whole job is
            // the internet (Fetch, Slack, Brave Search) is not started, rather than started and trusted.
            server.status = ServerStatus::Error(why);
            server.refused_offline = true;
            return;
        }
        if let Err(err) = started_config(&mut config, &self.data_dir, offline) {
            server.status = ServerStatus::Error(format!("{err:#}"));
            return;
        }
        let resolved = secrets.and_then(|s| connection::resolve_secrets(name, &config, &s));
        let (env, headers) = match resolved {
            Ok(pair) => pair,
            Err(err) => {
                server.status = ServerStatus::Error(format!("its secrets could not be read: {err:#}"));
                return;
            }
        };
        let (stderr, notices, internal, data_dir, name, gate) = (server.stderr.clone(), self.notices.0.clone(), self.internal.0.clone(), self.data_dir.clone(), name.to_owned(), self.gate);
        let watched = self.watched_resources(&name);
        self.runtime.spawn(async move {
            let spawn = connection::Spawn { configured_as: &name, data_dir: &data_dir, env, headers, stderr, notices, gate, watched };
            let result = async {
                let connection = connection::connect(&name, &config, spawn).await?;
                let startup = config.startup_timeout();
                let tools = connection.tools(&name, startup).await?;
                let catalog = connection.catalog(&name, startup).await;
                anyhow::Ok((connection, tools, catalog))
            }
            .await;
            let message = match result {
                Err(err) if err.is::<super::oauth::SignInNeeded>() => {
                    let needed = err.downcast::<super::oauth::SignInNeeded>().expect("checked");
                    Internal::NeedsSignIn { why: needed.to_string(), server: name, generation, challenge: needed.challenge }
                }
                result => Internal::Connected { server: name, generation, result: result.map_err(|err| format!("{err:#}")) },
            };
            let _ = internal.send(message);
        });
    }

    /// Stops a server's connection (the child ends) and forgets its lockfile.
    fn disconnect_quietly(&mut self, name: &str) {
        let Some(server) = self.servers.get_mut(name) else { return };
        if let Some(connection) = server.connection.take() {
            let token = connection.service.cancellation_token();
            token.cancel();
        }
        if let Some(sign_in) = server.sign_in.take() {
            sign_in.abort();
        }
        super::orphans::forget(&self.data_dir, name);
        for call in server.waiting.drain(..) {
            let _ = call.reply.try_send(ToolOutput::error(format!("the MCP server {name} was stopped")));
        }
    }

    fn disconnect(&mut self, name: &str) {
        self.disconnect_quietly(name);
        if let Some(server) = self.servers.get_mut(name) {
            server.generation += 1;
            server.status = ServerStatus::Stopped;
            server.refused_offline = false;
        }
    }

    fn handle_internal(&mut self, message: Internal) {
        match message {
            Internal::Connected { server: name, generation, result } => {
                let Some(server) = self.servers.get_mut(&name) else { return };
                if server.generation != generation {
                    return; // an older attempt: its connection drops (and its child ends) here
                }
                match result {
                    Ok((connection, tools, catalog)) => {
                        tracing::info!(server = %name, millis = connection.connect_millis, tools = tools.len(), "MCP server connected");
                        server.connection = Some(Arc::new(connection));
                        server.tools = tools;
                        server.catalog = catalog;
                        server.status = ServerStatus::Running;
                        server.last_used = Instant::now();
                        let waiting: Vec<CallRequest> = server.waiting.drain(..).collect();
                        for call in waiting {
                            self.dispatch(call);
                        }
                    }
                    Err(err) => {
                        server.status = ServerStatus::Error(err.clone());
                        super::orphans::forget(&self.data_dir, &name);
                        for call in server.waiting.drain(..) {
                            let _ = call.reply.try_send(ToolOutput::error(format!("the MCP server {name} did not start: {err}")));
                        }
                    }
                }
            }
            Internal::Tools { server: name, generation, result } => {
                let Some(server) = self.servers.get_mut(&name) else { return };
                if server.generation == generation {
                    match result {
                        Ok(tools) => server.tools = tools,
                        Err(err) => tracing::warn!(server = %name, %err, "the changed tool list could not be read"),
                    }
                }
            }
            Internal::Catalog { server: name, generation, catalog } => {
                if let Some(server) = self.servers.get_mut(&name).filter(|s| s.generation == generation) {
                    server.catalog = catalog;
                }
            }
            Internal::Unresponsive { server: name, generation } => {
                if self.servers.get(&name).is_some_and(|s| s.generation == generation) {
                    tracing::warn!(server = %name, "the MCP server did not answer its health check; reconnecting");
                    self.connect(&name);
                }
            }
            Internal::NeedsSignIn { server: name, generation, challenge, why } => {
                let Some(server) = self.servers.get_mut(&name).filter(|s| s.generation == generation) else { return };
                tracing::info!(server = %name, "the MCP server wants an OAuth sign-in");
                server.challenge = Some(challenge);
                server.status = ServerStatus::NeedsSignIn(why.clone());
                for call in server.waiting.drain(..) {
                    let _ = call.reply.try_send(ToolOutput::error(format!("the MCP server {name} did not start: {why}")));
                }
            }
            Internal::SignInUrl { server: name, generation, url, not_opened } => {
                let Some(server) = self.servers.get_mut(&name).filter(|s| s.generation == generation) else { return };
                server.status = ServerStatus::SigningIn(url);
                if let Some(why) = not_opened {
                    self.sink.notice(format!("signing in to {name}: {why} (the link is under Settings · Integrations)"));
                }
            }
            Internal::Tested { name, config, trusted, report } => {
                let result = match report.result {
                    Ok(figures) => {
                        self.edit(&super::config::McpEdit::AddConfigured { name: name.clone(), config, trusted });
                        match McpConfig::load(&self.data_dir).map(|c| c.servers.contains_key(&name)) {
                            Ok(true) => Ok(figures.tools),
                            Ok(false) => Err("it answered, but it was not saved".to_owned()),
                            Err(err) => Err(format!("it answered, but it was not saved: {err:#}")),
                        }
                    }
                    Err(err) => Err(err),
                };
                self.sink.send(McpEvent::McpCatalogAdded { name, result, stderr: report.stderr });
            }
            Internal::SignedIn { server: name, generation, result } => {
                let Some(server) = self.servers.get_mut(&name).filter(|s| s.generation == generation) else { return };
                server.sign_in = None;
                match result {
                    Ok(()) => {
                        tracing::info!(server = %name, "signed in to the MCP server");
                        server.challenge = None;
                        self.connect(&name);
                    }
                    Err(err) => {
                        tracing::warn!(server = %name, %err, "the OAuth sign-in did not finish");
                        server.status = ServerStatus::NeedsSignIn(format!("the sign-in did not finish: {err}"));
                    }
                }
            }
        }
        self.publish();
    }

    /// Starts an OAuth sign-in: the authorization URL opens in the system
    /// browser (and shows in Settings); the code comes back on loopback; then
    /// the server is connected with its tokens.
    fn sign_in(&mut self, name: &str) {
        let url = match self.servers.get(name).map(|s| s.config.transport()) {
            Some(Ok(super::config::Transport::Http { url })) => url.to_owned(),
            Some(_) => {
                self.sink.notice(format!("{name} is not an HTTP server: there is nothing to sign in to"));
                return;
            }
            None => return,
        };
        self.disconnect_quietly(name);
        let Some(server) = self.servers.get_mut(name) else { return };
        server.generation += 1;
        server.status = ServerStatus::SigningIn(String::new());
        let generation = server.generation;
        let (challenge, settings) = (server.challenge.clone(), server.config.oauth.clone().unwrap_or_default());
        let (internal, data_dir, name) = (self.internal.0.clone(), self.data_dir.clone(), name.to_owned());
        let task = self.runtime.spawn(async move {
            let (shown, server) = (internal.clone(), name.clone());
            let show = move |link: &str| {
                let not_opened = super::oauth::open_browser(link).err().map(|err| format!("{err:#}"));
                let _ = shown.try_send(Internal::SignInUrl { server, generation, url: link.to_owned(), not_opened });
            };
            let result = async {
                // Discovery starts from the server's own challenge (some name their metadata only there).
                let challenge = match challenge {
                    Some(challenge) => Some(challenge),
                    None => super::oauth::probe_challenge(&url).await?,
                };
                super::oauth::sign_in(&name, &url, challenge.as_deref(), &settings, &data_dir, show).await
            }
            .await
            .map_err(|err| format!("{err:#}"));
            let _ = internal.send(Internal::SignedIn { server: name, generation, result });
        });
        server.sign_in = Some(task.abort_handle());
    }

    /// Forgets the sign-in; a connected server is connected again (and will ask for one).
    fn sign_out(&mut self, name: &str) {
        match super::oauth::sign_out(name, &self.data_dir) {
            Ok(_) => {
                if self.servers.get(name).is_some_and(|s| s.status != ServerStatus::Stopped) {
                    self.connect(name);
                }
            }
            Err(err) => {
                self.sink.notice(format!("the sign-in of {name} was not forgotten: {err:#}"));
            }
        }
    }

    fn handle_notice(&mut self, notice: Notice) {
        match notice {
            Notice::ToolsChanged(name) => {
                self.signal(&name, crate::automations::flow::McpEvent::ToolsChanged, None);
                let Some(server) = self.servers.get(&name) else { return };
                let Some(connection) = server.connection.clone() else { return };
                let (internal, generation, timeout) = (self.internal.0.clone(), server.generation, server.config.startup_timeout());
                self.runtime.spawn(async move {
                    let result = connection.tools(&name, timeout).await.map_err(|err| format!("{err:#}"));
                    let _ = internal.send(Internal::Tools { server: name, generation, result });
                });
            }
            Notice::ResourceUpdated { server, uri } => self.signal(&server, crate::automations::flow::McpEvent::ResourceUpdated, Some(uri)),
            Notice::CatalogChanged(name, event) => {
                self.signal(&name, event, None);
                let Some(server) = self.servers.get(&name) else { return };
                let Some(connection) = server.connection.clone() else { return };
                let (internal, generation, timeout) = (self.internal.0.clone(), server.generation, server.config.startup_timeout());
                self.runtime.spawn(async move {
                    let catalog = connection.catalog(&name, timeout).await;
                    let _ = internal.send(Internal::Catalog { server: name, generation, catalog });
                });
            }
            Notice::SignInNeeded { server: name, challenge } => {
                self.disconnect_quietly(&name);
                if let Some(server) = self.servers.get_mut(&name) {
                    server.generation += 1;
                    server.challenge = Some(challenge).filter(|c| !c.is_empty());
                    server.status = ServerStatus::NeedsSignIn("its sign-in expired and could not be renewed".into());
                }
                self.publish();
            }
            Notice::Elicit(request) => match super::elicit::Form::parse(&request.schema) {
                Ok(form) => {
                    // Unique across worker restarts: a form left from before never takes a new request's id.
                    let id = crate::ids::next_id();
                    let view = crate::mcp::events::ElicitationView { id, server: request.server.clone(), message: request.message, form };
                    self.elicitations.insert(id, (request.server, request.reply));
                    self.sink.send(McpEvent::Elicitation(Box::new(view)));
                }
                Err(why) => {
                    let _ = request.reply.send(super::elicit::Answer::Decline);
                    self.sink.notice(format!("{} asked for input in a form cowork cannot draw ({why}); cowork declined", request.server));
                }
            },
        }
    }

    /// The running connection of `server`, or why there is none.
    fn running(&self, server: &str) -> Result<(Arc<Connection>, Duration), String> {
        let found = self.servers.get(server).ok_or_else(|| format!("there is no MCP server named {server}"))?;
        let connection = found.connection.clone().filter(|_| found.status == ServerStatus::Running).ok_or_else(|| format!("the MCP server {server} is not running"))?;
        Ok((connection, found.config.tool_timeout()))
    }

    fn read_resource(&self, server: String, uri: String, name: String) {
        let sink = self.sink.clone();
        match self.running(&server) {
            Ok((connection, timeout)) => {
                self.runtime.spawn(async move {
                    let result = connection.read_resource(&server, &uri, &name, timeout).await.map_err(|err| format!("{name} from {server} was not read: {err:#}"));
                    sink.send(McpEvent::ResourceAttached(result));
                });
            }
            Err(why) => {
                sink.send(McpEvent::ResourceAttached(Err(why)));
            }
        }
    }

    fn get_prompt(&self, server: String, name: String, arguments: BTreeMap<String, String>) {
        let sink = self.sink.clone();
        match self.running(&server) {
            Ok((connection, timeout)) => {
                self.runtime.spawn(async move {
                    let result = connection.prompt(&name, arguments, timeout).await.map_err(|err| format!("/{name} from {server}: {err:#}"));
                    sink.send(McpEvent::PromptFilled(result));
                });
            }
            Err(why) => {
                sink.send(McpEvent::PromptFilled(Err(why)));
            }
        }
    }

    /// The user's answer goes back to the server that asked.
    fn elicited(&mut self, id: i64, answer: super::elicit::Answer) {
        if let Some((server, reply)) = self.elicitations.remove(&id)
            && reply.send(answer).is_err()
        {
            self.sink.notice(format!("{server} no longer waits for that answer"));
        }
        self.sink.send(McpEvent::ElicitationClosed { id });
    }

    /// Requests whose server stopped waiting (it was stopped, or the wait ran out) leave the chat.
    fn check_elicitations(&mut self) {
        let gone: Vec<i64> = self.elicitations.iter().filter(|(_, (_, reply))| reply.is_closed()).map(|(id, _)| *id).collect();
        for id in gone {
            self.elicitations.remove(&id);
            self.sink.send(McpEvent::ElicitationClosed { id });
        }
    }

    /// The running servers' enabled tools.
    pub fn offered(&self) -> Vec<Offered> {
        let offered: Vec<Offered> = self
            .servers
            .values()
            .filter(|s| s.status == ServerStatus::Running)
            .flat_map(|s| {
                s.tools
                    .iter()
                    .filter(|t| s.config.enabled_tools.as_ref().is_none_or(|enabled| enabled.contains(&t.name)))
                    .map(|t| Offered { tool: t.clone(), trusted: s.config.trusted, tool_timeout_secs: s.config.tool_timeout_secs, builtin: s.config.builtin.clone() })
            })
            .collect();
        // Two tools under one name: neither is offered (a call could reach either server).
        let clashes = crate::mcp::tools::clashing_names(offered.iter().map(|o| &o.tool));
        if clashes.is_empty() {
            return offered;
        }
        tracing::warn!(?clashes, "MCP tools of two servers share a name; neither is offered");
        offered.into_iter().filter(|o| !clashes.contains(&o.tool.qualified_name())).collect()
    }

    fn dispatch(&mut self, call: CallRequest) {
        let offline = self.gate.is_offline();
        let Some(server) = self.servers.get_mut(&call.server) else {
            let _ = call.reply.try_send(ToolOutput::error(format!("there is no MCP server named {}", call.server)));
            return;
        };
        // Offline mode may have come on since the last tick stopped it: the call is refused now, not after.
        if offline && let Some(why) = super::catalog::offline_refusal(&server.config) {
            let _ = call.reply.try_send(ToolOutput::error(format!("the MCP server {} is not running ({why})", call.server)));
            return;
        }
        match (&server.status, server.connection.clone()) {
            (ServerStatus::Starting, _) => server.waiting.push(call),
            (ServerStatus::Running, Some(connection)) => {
                let idle = server.last_used.elapsed() >= IDLE_BEFORE_PING;
                server.last_used = Instant::now();
                let timeout = server.config.tool_timeout();
                let (sink, internal, generation) = (self.sink.clone(), self.internal.0.clone(), server.generation);
                self.runtime.spawn(async move {
                    if (idle || connection.closed()) && !connection.alive(PING_TIMEOUT).await {
                        let _ = internal.send(Internal::Unresponsive { server: call.server.clone(), generation });
                        let _ = call.reply.send(ToolOutput::error(format!(
                            "the MCP server {} did not answer its health check; cowork is reconnecting it, so the call did not run",
                            call.server
                        )));
                        return;
                    }
                    let call_id = call.call_id;
                    // At most ten a second reach the UI (and the last one always):
                    // a chatty server must not flood the UI's queue from the I/O thread.
                    let last = parking_lot::Mutex::new(None::<Instant>);
                    let on_progress = Arc::new(move |progress: Progress| {
                        let done = progress.total.is_some_and(|total| progress.progress >= total);
                        let mut last = last.lock();
                        if done || last.is_none_or(|at: Instant| at.elapsed() >= PROGRESS_EVERY) {
                            *last = Some(Instant::now());
                            sink.send(McpEvent::ToolProgress { call_id, text: progress.describe() });
                        }
                    });
                    let output = connection.call(&call.tool, call.arguments, timeout, call.stop, on_progress).await;
                    let _ = call.reply.send(output);
                });
            }
            (status, _) => {
                let why = match status {
                    ServerStatus::Error(err) => format!("the MCP server {} is not running ({err})", call.server),
                    ServerStatus::NeedsSignIn(_) | ServerStatus::SigningIn(_) => format!("the MCP server {} is waiting for you to sign in (Settings · Integrations)", call.server),
                    _ => format!("the MCP server {} is stopped", call.server),
                };
                let _ = call.reply.try_send(ToolOutput::error(why));
            }
        }
    }

    /// A built-in started before offline mode flipped starts again with the
    /// new command line (offline, the Browser's Chromium gets its dead proxy;
    /// a call running in it ends: the web must stop now, not after it). A
    /// server that needs the network stops when offline mode comes on, and
    /// starts when it goes off.
    fn check_offline(&mut self) {
        let offline = self.gate.is_offline();
        let stale: Vec<String> = self
            .servers
            .iter()
            .filter(|(_, s)| s.started_offline.is_some_and(|was| was != offline) && (matches!(s.status, ServerStatus::Running | ServerStatus::Starting) || s.refused_offline))
            .map(|(name, _)| name.clone())
            .collect();
        for name in &stale {
            tracing::info!(server = %name, offline, "offline mode changed: restarting the server");
            self.connect(name);
        }
        if !stale.is_empty() {
            self.publish();
        }
    }

    /// A closed connection (the server exited) becomes an error with its stderr.
    /// `cowork mcp serve` records the clients that connect; a new one is
    /// pending until the user answers in the sidebar. Read at each idle tick.
    fn check_clients(&mut self) {
        if self.clients_db.is_none() {
            let path = self.data_dir.join(crate::store::DB_FILE_NAME);
            self.clients_db = path.exists().then(|| crate::store::open_read_only(&path).ok()).flatten();
        }
        let Some(conn) = &self.clients_db else { return };
        let rows = match crate::agent::store::mcp_clients(conn) {
            Ok(rows) => rows,
            Err(err) => {
                tracing::debug!(%err, "MCP clients not read");
                self.clients_db = None;
                return;
            }
        };
        let clients: Vec<crate::mcp::events::McpClientView> = rows
            .into_iter()
            .map(|c| crate::mcp::events::McpClientView {
                name: c.name,
                version: c.version,
                transport: c.transport,
                status: c.status.as_str().into(),
                asked_at_millis: c.asked_at_millis,
                last_seen_millis: c.last_seen_millis,
            })
            .collect();
        if clients != self.clients {
            self.clients = clients.clone();
            self.sink.send(McpEvent::McpClients(clients));
        }
    }

    fn check_closed(&mut self) {
        let mut changed = false;
        for (name, server) in &mut self.servers {
            if server.status == ServerStatus::Running && server.connection.as_ref().is_some_and(|c| c.closed()) {
                server.connection = None;
                let last = server.stderr.last(3);
                let why = if last.trim().is_empty() { "the server exited".to_owned() } else { format!("the server exited; its stderr ends with:\n{last}") };
                server.status = ServerStatus::Error(why);
                super::orphans::forget(&self.data_dir, name);
                changed = true;
            }
        }
        if changed {
            self.publish();
        }
    }

    fn views(&self) -> Vec<ServerView> {
        self.servers
            .iter()
            .map(|(name, s)| ServerView {
                name: name.clone(),
                endpoint: s.config.endpoint(),
                status: s.status.clone(),
                trusted: s.config.trusted,
                tools: s
                    .tools
                    .iter()
                    .map(|t| {
                        let risk = t.risk_of_call(s.config.trusted, s.config.builtin.as_deref(), &serde_json::Value::Null);
                        (t.name.clone(), t.description.clone(), s.config.enabled_tools.as_ref().is_none_or(|e| e.contains(&t.name)), risk.as_str().to_owned())
                    })
                    .collect(),
                stderr: s.stderr.lines(),
                protocol_version: s.connection.as_ref().map(|c| c.protocol_version.clone()).unwrap_or_default(),
                server_name: s.connection.as_ref().map(|c| c.server_name.clone()).unwrap_or_default(),
                connect_millis: s.connection.as_ref().map(|c| c.connect_millis),
                resources: s.catalog.resources.clone(),
                prompts: s.catalog.prompts.clone(),
                signed_in: s.status == ServerStatus::Running && s.connection.as_ref().is_some_and(|c| c.oauth),
            })
            .collect()
    }

    fn publish(&self) {
        self.sink.send(McpEvent::McpServers(self.views()));
    }

    fn test(&self, name: String) {
        let Some(server) = self.servers.get(&name) else { return };
        let (config, data_dir, sink) = (server.config.clone(), self.data_dir.clone(), self.sink.clone());
        self.runtime.spawn(async move {
            let report = test_server(&name, &config, &data_dir).await;
            sink.send(McpEvent::McpTested(report));
        });
    }

    /// Makes a server from the catalog and tests it on its own connection; saved when it lists its tools.
    fn add_from_catalog(&self, id: String, values: BTreeMap<String, String>, trusted: bool) {
        let made = super::catalog::find(&id)
            .ok_or_else(|| anyhow::anyhow!("no integration {id:?} in the catalog"))
            .and_then(|entry| entry.missing().map_or(Ok(()), |m| Err(anyhow::anyhow!(m))).and_then(|()| entry.config(&values, &self.data_dir)));
        let config = match made {
            Ok(config) => Box::new(config),
            Err(err) => {
                self.sink.send(McpEvent::McpCatalogAdded { name: id, result: Err(format!("{err:#}")), stderr: Vec::new() });
                return;
            }
        };
        let name = id;
        let (data_dir, internal) = (self.data_dir.clone(), self.internal.0.clone());
        self.runtime.spawn(async move {
            let report = test_server(&name, &config, &data_dir).await;
            let _ = internal.send(Internal::Tested { name, config, trusted, report });
        });
    }

    fn shutdown(&mut self) {
        let names: Vec<String> = self.servers.keys().cloned().collect();
        for name in names {
            self.disconnect(&name);
        }
        // Give the children their end (stdin closes, then kill) before the runtime goes.
        self.runtime.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });
    }
}

/// A built-in's command line, filled in as it starts (offline mode as it is now).
fn started_config(config: &mut ServerConfig, data_dir: &std::path::Path, offline: bool) -> anyhow::Result<()> {
    match config.builtin.as_deref() {
        Some(super::browser::BUILTIN) => super::browser::fill(config, data_dir, offline),
        _ => Ok(()),
    }
}

/// Connects to `name` on its own (a second connection for a running one),
/// lists its tools, times a round trip, and disconnects: Settings' Test and
/// `cowork mcp test`.
pub async fn test_server(name: &str, config: &ServerConfig, data_dir: &std::path::Path) -> TestReport {
    let stderr = StderrTail::default();
    let (notices, _) = bounded(8);
    let result = async {
        let mut config = config.clone();
        let offline = crate::net::OutboundGate::global().is_offline();
        if offline && let Some(why) = super::catalog::offline_refusal(&config) {
            anyhow::bail!(why);
        }
        started_config(&mut config, data_dir, offline)?;
        let config = &config;
        let secrets = crate::secrets::Secrets::open(data_dir)?;
        let (env, headers) = connection::resolve_secrets(name, config, &secrets)?;
        let test_name = format!("{name}.test");
        let spawn = connection::Spawn { configured_as: name, data_dir, env, headers, stderr: stderr.clone(), notices, gate: crate::net::OutboundGate::global(), watched: Vec::new() };
        let connection = connection::connect(&test_name, config, spawn).await?;
        let tools = connection.tools(name, config.startup_timeout()).await?;
        let started = Instant::now();
        let alive = connection.alive(Duration::from_secs(5)).await;
        let round_trip_micros = started.elapsed().as_micros() as u64;
        let figures = TestFigures {
            protocol_version: connection.protocol_version.clone(),
            server_name: connection.server_name.clone(),
            tools: tools.len(),
            connect_millis: connection.connect_millis,
            round_trip_micros,
        };
        connection.service.cancellation_token().cancel();
        super::orphans::forget(data_dir, &test_name);
        anyhow::ensure!(alive, "the server stopped answering after the handshake");
        anyhow::Ok(figures)
    }
    .await
    .map_err(|err| format!("{err:#}"));
    // Let the last stderr lines arrive.
    tokio::time::sleep(Duration::from_millis(50)).await;
    TestReport { server: name.to_owned(), result, stderr: stderr.lines() }
}

impl Supervised for McpWorker {
    type Command = McpCommand;

    fn run(&mut self, commands: &Receiver<McpCommand>, _ctx: &WorkerContext) -> anyhow::Result<()> {
        // rmcp's child-process guard spawns its kill on drop: drops here happen inside the runtime.
        let handle = self.runtime.handle().clone();
        let _entered = handle.enter();
        self.start();
        let internal = self.internal.1.clone();
        let notices = self.notices.1.clone();
        let tick = crossbeam_channel::tick(Duration::from_secs(1));
        loop {
            crossbeam_channel::select! {
                recv(commands) -> command => match command {
                    Ok(McpCommand::Reload) => self.reload(),
                    // A second Start while one is under way would race it (two children, one lockfile).
                    Ok(McpCommand::Connect(name)) if self.servers.get(&name).is_some_and(|s| s.status == ServerStatus::Starting) => {}
                    Ok(McpCommand::Connect(name)) => {
                        self.connect(&name);
                        self.publish();
                    }
                    Ok(McpCommand::Disconnect(name)) => {
                        self.disconnect(&name);
                        self.publish();
                    }
                    Ok(McpCommand::Tools(reply)) => {
                        let starting = self.servers.iter().filter(|(_, s)| s.status == ServerStatus::Starting).map(|(name, _)| name.clone()).collect();
                        let _ = reply.try_send(ToolsNow { offered: self.offered(), starting });
                    }
                    Ok(McpCommand::Call(call)) => self.dispatch(call),
                    Ok(McpCommand::Test(name)) => self.test(name),
                    Ok(McpCommand::AddFromCatalog { id, values, trusted }) => self.add_from_catalog(id, values, trusted),
                    Ok(McpCommand::Edit(edit)) => self.edit(&edit),
                    Ok(McpCommand::Elicited { id, answer }) => self.elicited(id, answer),
                    Ok(McpCommand::ReadResource { server, uri, name }) => self.read_resource(server, uri, name),
                    Ok(McpCommand::GetPrompt { server, name, arguments }) => self.get_prompt(server, name, arguments),
                    Ok(McpCommand::SignIn(name)) => {
                        self.sign_in(&name);
                        self.publish();
                    }
                    Ok(McpCommand::SignOut(name)) => {
                        self.sign_out(&name);
                        self.publish();
                    }
                    Ok(McpCommand::Shutdown) | Err(_) => break,
                },
                recv(internal) -> message => if let Ok(message) = message { self.handle_internal(message) },
                recv(notices) -> notice => if let Ok(notice) = notice { self.handle_notice(notice) },
                // Its own arm: steady traffic must not starve the checks.
                recv(tick) -> _ => {
                    self.check_offline();
                    self.check_closed();
                    self.check_clients();
                    self.check_elicitations();
                }
            }
        }
        self.shutdown();
        Ok(())
    }
}

pub fn channel() -> (Sender<McpCommand>, Receiver<McpCommand>) {
    bounded(64)
}

pub fn spawn_mcp(data_dir: PathBuf, sink: EventSink<McpEvent>, policy: RestartPolicy) -> std::io::Result<WorkerHandle<McpCommand>> {
    spawn_mcp_with_gate(data_dir, sink, policy, crate::net::OutboundGate::global())
}

/// The same with its own outbound gate (a test flips offline mode without touching the process's).
pub fn spawn_mcp_with_gate(data_dir: PathBuf, sink: EventSink<McpEvent>, policy: RestartPolicy, gate: &'static crate::net::OutboundGate) -> std::io::Result<WorkerHandle<McpCommand>> {
    spawn_mcp_signalling(data_dir, sink, policy, gate, None)
}

/// The same, passing servers' notifications on to automations' triggers.
pub fn spawn_mcp_signalling(
    data_dir: PathBuf,
    sink: EventSink<McpEvent>,
    policy: RestartPolicy,
    gate: &'static crate::net::OutboundGate,
    signals: Option<Sender<crate::automations::AutomationsCommand>>,
) -> std::io::Result<WorkerHandle<McpCommand>> {
    spawn_supervised::<McpWorker, _, _>(WorkerName::Mcp, policy, sink.clone(), channel(), move |_ctx| {
        let mut worker = McpWorker::new(data_dir.clone(), sink.clone(), gate)?;
        worker.signals = signals.clone();
        Ok(worker)
    })
}

/// The agent's side: calls through the worker, waiting for the answer while
/// watching Stop.
#[derive(Clone, Debug)]
pub struct McpClient {
    pub commands: Sender<McpCommand>,
}

impl McpClient {
    /// The tools to offer, or none when the worker does not answer in time.
    pub fn offered(&self, wait: Duration) -> ToolsNow {
        let (reply, answer) = bounded(1);
        if self.commands.send_timeout(McpCommand::Tools(reply), wait).is_err() {
            return ToolsNow::default();
        }
        answer.recv_timeout(wait).unwrap_or_default()
    }

    /// The tools once none of `servers` is starting any more (each is bounded
    /// by its own startup timeout in the worker; `up_to` bounds the wait here).
    pub fn offered_after_start(&self, servers: &[String], up_to: Duration) -> ToolsNow {
        let deadline = Instant::now() + up_to;
        loop {
            let now = self.offered(Duration::from_millis(300));
            if Instant::now() >= deadline || !now.starting.iter().any(|s| servers.contains(s)) {
                return now;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs one call; `stop` is the agent's Stop flag, `timeout` the server's tool timeout.
    pub fn call(&self, server: &str, tool: &str, arguments: serde_json::Value, call_id: i64, stop: &AtomicBool, timeout: Duration) -> ToolOutput {
        let (reply, answer) = bounded(1);
        let cancel = Arc::new(AtomicBool::new(false));
        let request = CallRequest { server: server.to_owned(), tool: tool.to_owned(), arguments, call_id, stop: cancel.clone(), reply };
        if self.commands.send_timeout(McpCommand::Call(request), Duration::from_secs(5)).is_err() {
            return ToolOutput::error("cowork's MCP worker is not running");
        }
        // The worker answers within the timeout (plus a start-up and a cancel); this bounds a stuck one.
        let deadline = Instant::now() + timeout + Duration::from_secs(60);
        loop {
            match answer.recv_timeout(Duration::from_millis(20)) {
                Ok(output) => return output,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return ToolOutput::error("cowork's MCP worker stopped during the call"),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    if stop.load(Ordering::SeqCst) {
                        cancel.store(true, Ordering::SeqCst);
                    }
                    if Instant::now() > deadline {
                        return ToolOutput::error("cowork's MCP worker did not answer");
                    }
                }
            }
        }
    }
}
