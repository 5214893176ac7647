//! One live connection to an MCP server, on the `mcp` worker's tokio runtime:
//! connecting over stdio (a child process with a clean environment, its stderr
//! kept as a 200-line tail, recorded for orphan cleanup) or streamable HTTP
//! (through the outbound gate: offline, only loopback), the client handler that
//! hears progress, list changes and requests for input (form elicitation only:
//! no sampling, and an empty roots list; an answer is awaited up to 10
//! minutes), a tool call with its timeout, progress and cancellation on the
//! server (on Stop or the timeout), and a result turned into what the agent
//! gives its model.
//!
//! Connections start with `server/discover` (revision 2026-07-28) and fall back
//! to `initialize` when the server answers that it is older or says nothing for
//! 10 s. On a 2026-07-28 connection list changes and resource updates come only
//! on a `subscriptions/listen` stream, which `listen` opens and feeds into the
//! same notices as the older handler callbacks (before it, resources are
//! subscribed to one by one).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parking_lot::Mutex;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt};
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ProgressNotificationParam, ProgressToken, ServerResult};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RoleClient, RunningService};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use super::config::{ServerConfig, Transport};
use super::tools::McpTool;
use crate::tools::ToolOutput;

/// Lines of a stdio server's stderr kept for Settings and errors.
pub const STDERR_LINES: usize = 200;

/// The last lines a server wrote to stderr (shared with the task that reads them).
#[derive(Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock();
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.lock().iter().cloned().collect()
    }

    /// The last `n` lines as one string, for an error message.
    pub fn last(&self, n: usize) -> String {
        let lines = self.0.lock();
        lines.iter().skip(lines.len().saturating_sub(n)).cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Progress a server reported for a running call.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

impl Progress {
    /// "3/10 · loading", "40 %", for the tool chip.
    pub fn describe(&self) -> String {
        let amount = match self.total {
            Some(total) if total > 0.0 => format!("{}/{}", trim_float(self.progress), trim_float(total)),
            _ => trim_float(self.progress),
        };
        match &self.message {
            Some(message) if !message.is_empty() => format!("{amount} · {message}"),
            _ => amount,
        }
    }
}

fn trim_float(value: f64) -> String {
    if value.fract() == 0.0 { format!("{value:.0}") } else { format!("{value:.1}") }
}

type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// What the handler tells the worker.
#[derive(Debug)]
pub enum Notice {
    ToolsChanged(String),
    /// Its resources or prompts changed (which, for automations' triggers).
    CatalogChanged(String, crate::automations::flow::McpEvent),
    /// A resource it serves changed (`notifications/resources/updated`).
    ResourceUpdated { server: String, uri: String },
    /// A server asks the user for input (form mode).
    Elicit(Elicitation),
    /// Its sign-in was refused and could not be refreshed.
    SignInNeeded { server: String, challenge: String },
}

/// A server's `elicitation/create`, waiting for the user's answer.
#[derive(Debug)]
pub struct Elicitation {
    pub server: String,
    pub message: String,
    pub schema: Value,
    pub reply: tokio::sync::oneshot::Sender<super::elicit::Answer>,
}

/// An elicitation nobody answers is cancelled after this long.
pub const ELICIT_WAIT: Duration = Duration::from_secs(600);

/// cowork's side of the protocol: it hears progress for its calls and
/// tool-list changes, and brings a server's request for input to the user.
/// Roots: an empty list (rmcp's default, not advertised); sampling: not
/// advertised, so a server cannot spend the user's model or budget.
pub struct Handler {
    server: String,
    progress: Arc<Mutex<HashMap<ProgressToken, ProgressSink>>>,
    notices: crossbeam_channel::Sender<Notice>,
}

impl ClientHandler for Handler {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let sink = self.progress.lock().get(&params.progress_token).cloned();
        if let Some(sink) = sink {
            sink(Progress { progress: params.progress, total: params.total, message: params.message });
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // A full channel already holds a refresh for the worker to do.
        let _ = self.notices.try_send(Notice::ToolsChanged(self.server.clone()));
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.notices.try_send(Notice::CatalogChanged(self.server.clone(), crate::automations::flow::McpEvent::ResourcesChanged));
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.notices.try_send(Notice::CatalogChanged(self.server.clone(), crate::automations::flow::McpEvent::PromptsChanged));
    }

    async fn on_resource_updated(&self, params: rmcp::model::ResourceUpdatedNotificationParam, _context: NotificationContext<RoleClient>) {
        let _ = self.notices.try_send(Notice::ResourceUpdated { server: self.server.clone(), uri: params.uri });
    }

    async fn create_elicitation(&self, request: ElicitRequestParams, _context: RequestContext<RoleClient>) -> Result<ElicitResult, rmcp::ErrorData> {
        // Only form mode is advertised; a URL request is declined.
        let ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap_or_default();
        let (reply, answer) = tokio::sync::oneshot::channel();
        if self.notices.try_send(Notice::Elicit(Elicitation { server: self.server.clone(), message, schema, reply })).is_err() {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        }
        Ok(match tokio::time::timeout(ELICIT_WAIT, answer).await {
            Ok(Ok(super::elicit::Answer::Accept(content))) => ElicitResult::new(ElicitationAction::Accept).with_content(content),
            Ok(Ok(super::elicit::Answer::Decline)) => ElicitResult::new(ElicitationAction::Decline),
            // Cancelled, unanswered in time, or the server was stopped.
            _ => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(capabilities(), rmcp::model::Implementation::new("cowork", env!("CARGO_PKG_VERSION")))
    }
}

/// What cowork tells servers it does: elicitation in form mode; no sampling, no roots.
fn capabilities() -> rmcp::model::ClientCapabilities {
    let mut capabilities = rmcp::model::ClientCapabilities::default();
    capabilities.elicitation = Some(rmcp::model::ElicitationCapability::new().with_form(rmcp::model::FormElicitationCapability::default()));
    capabilities
}

/// A connected server.
pub struct Connection {
    pub service: RunningService<RoleClient, Handler>,
    progress: Arc<Mutex<HashMap<ProgressToken, ProgressSink>>>,
    /// The child's pid, for a stdio server.
    pub pid: Option<u32>,
    pub protocol_version: String,
    pub server_name: String,
    pub connect_millis: u64,
    /// It goes with the user's OAuth sign-in.
    pub oauth: bool,
}

/// What a server offers besides tools.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Catalog {
    pub resources: Vec<crate::mcp::events::McpResource>,
    pub prompts: Vec<crate::mcp::events::McpPrompt>,
}

/// Where a stdio server is recorded for orphan cleanup.
pub struct Spawn<'a> {
    /// The server's name in mcp-servers.json (its sign-in is kept under it).
    pub configured_as: &'a str,
    pub data_dir: &'a std::path::Path,
    pub env: BTreeMap<String, String>,
    pub headers: BTreeMap<String, String>,
    pub stderr: StderrTail,
    pub notices: crossbeam_channel::Sender<Notice>,
    pub gate: &'a crate::net::OutboundGate,
    /// Resources whose updates automations wait for: subscribed to at connect.
    pub watched: Vec<String>,
}

/// Starts (stdio) or reaches (HTTP) `name` and finishes the handshake within
/// its startup timeout.
pub async fn connect(name: &str, config: &ServerConfig, spawn: Spawn<'_>) -> anyhow::Result<Connection> {
    let started = Instant::now();
    let startup = config.startup_timeout();
    let progress: Arc<Mutex<HashMap<ProgressToken, ProgressSink>>> = Arc::default();
    let handler = Handler { server: name.to_owned(), progress: progress.clone(), notices: spawn.notices.clone() };
    let mut oauth = false;
    let (service, pid) = match config.transport()? {
        Transport::Stdio { command, args } => {
            let mut cmd = tokio::process::Command::new(command);
            let env = super::stdio_env(command, &spawn.env, spawn.gate.is_offline());
            // What cowork held back or switched (a proxy's password, offline mode) heads the stderr tail.
            for note in env.notes {
                spawn.stderr.push(format!("cowork: {note}"));
            }
            cmd.args(args).env_clear().envs(env.vars).kill_on_drop(true);
            if let Some(home) = std::env::var_os("HOME") {
                cmd.current_dir(home);
            }
            let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .with_context(|| format!("cannot start {command}"))?;
            let pid = transport.id();
            if let Some(pid) = pid
                && let Err(err) = super::orphans::record(spawn.data_dir, name, pid, command, args)
            {
                tracing::warn!(server = name, error = %format!("{err:#}"), "the MCP server's lockfile was not written");
            }
            if let Some(stderr) = stderr {
                let tail = spawn.stderr.clone();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tail.push(line);
                    }
                });
            }
            let service = match tokio::time::timeout(startup, handler.serve_with_lifecycle(transport, lifecycle())).await {
                Ok(Ok(service)) => service,
                Ok(Err(err)) => bail!("the handshake failed: {err}{}", stderr_hint(&spawn.stderr)),
                Err(_) => bail!("no handshake within {} s (startup timeout){}", startup.as_secs(), stderr_hint(&spawn.stderr)),
            };
            (service, pid)
        }
        Transport::Http { url } => {
            // Offline, only loopback; online, the request is logged like any other.
            let admission = spawn.gate.admit(url, "MCP server").map_err(|err| anyhow::anyhow!("{err}"))?;
            // The client the gate built for this server's route (straight, or the proxy it judged and logged).
            // No redirect is followed: the next hop (the tool's arguments in its body) would pass no gate.
            let http = admission
                .reqwest_client(reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()))
                .with_context(|| format!("cannot make an HTTP client for {url}"))?;
            spawn.gate.finish(admission, 0, 0);
            let mut headers = HashMap::new();
            let mut auth = None;
            for (key, value) in &spawn.headers {
                if key.eq_ignore_ascii_case("authorization") {
                    auth = Some(value.strip_prefix("Bearer ").unwrap_or(value).to_owned());
                    continue;
                }
                let name = http::HeaderName::try_from(key.as_str()).with_context(|| format!("header name {key:?}"))?;
                let value = http::HeaderValue::try_from(value.as_str()).with_context(|| format!("the value of header {key}"))?;
                headers.insert(name, value);
            }
            let mut transport_config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
            // A configured Authorization header wins; else an OAuth sign-in the user made, if any.
            let signed_in = match &auth {
                Some(_) => None,
                None => super::oauth::client(spawn.configured_as, url, spawn.data_dir, http.clone()).await?,
            };
            if let Some(token) = &auth {
                transport_config = transport_config.auth_header(token.clone());
            }
            oauth = signed_in.is_some();
            let handshake = match signed_in {
                Some(client) => tokio::time::timeout(startup, handler.serve_with_lifecycle(rmcp::transport::StreamableHttpClientTransport::with_client(client, transport_config), lifecycle())).await,
                None => tokio::time::timeout(startup, handler.serve_with_lifecycle(rmcp::transport::StreamableHttpClientTransport::with_client(http, transport_config), lifecycle())).await,
            };
            let service = match handshake {
                Ok(Ok(service)) => service,
                Ok(Err(err)) => match super::oauth::challenge_of_handshake(&err) {
                    Some(_) if auth.is_some() => bail!("{url} refused the configured Authorization header (401)"),
                    Some(challenge) => return Err(super::oauth::SignInNeeded { server: spawn.configured_as.to_owned(), url: url.to_owned(), challenge }.into()),
                    None => bail!("the handshake with {url} failed: {err}"),
                },
                Err(_) => bail!("no handshake with {url} within {} s (startup timeout)", startup.as_secs()),
            };
            (service, None)
        }
    };
    let info = service.peer_info();
    let protocol_version = info.as_ref().map(|i| i.protocol_version.to_string()).unwrap_or_default();
    if let Some(info) = info.as_ref().filter(|i| i.protocol_version >= rmcp::model::ProtocolVersion::V_2026_07_28) {
        listen(name, &service, &info.capabilities, &spawn.watched, &spawn.notices, startup).await;
    } else {
        // Before 2026-07-28 a resource's updates are asked for one by one.
        for uri in &spawn.watched {
            let request = rmcp::model::SubscribeRequestParams::new(uri.clone());
            // Deprecated in rmcp for 2026-07-28 servers, which get the subscription through `listen` above.
            #[allow(deprecated)]
            let subscribed = service.peer().subscribe(request);
            match tokio::time::timeout(startup, subscribed).await {
                Ok(Ok(_)) => {}
                Ok(Err(err)) => tracing::warn!(server = name, uri, %err, "the server did not take cowork's subscription to a resource"),
                Err(_) => tracing::warn!(server = name, uri, "the server did not answer cowork's subscription to a resource in time"),
            }
        }
    }
    let server_name = info.as_ref().and_then(|i| i.server_info.as_ref().map(|s| format!("{} {}", s.name, s.version))).unwrap_or_default();
    Ok(Connection { service, progress, pid, protocol_version, server_name, connect_millis: started.elapsed().as_millis() as u64, oauth })
}

/// The revision rmcp speaks best first (`server/discover`), the handshake of
/// earlier ones (`initialize`) when the server answers that it does not know
/// it, or says nothing within 10 s.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto { preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28], legacy_version: None }
}

/// On 2026-07-28 a server tells of changed lists only on a `subscriptions/listen`
/// stream the client opens: the notices it carries go where the handler's go.
async fn listen(name: &str, service: &RunningService<RoleClient, Handler>, capabilities: &rmcp::model::ServerCapabilities, watched: &[String], notices: &crossbeam_channel::Sender<Notice>, wait: Duration) {
    let mut filter = rmcp::model::SubscriptionFilter::builder();
    let changes = |listed: Option<bool>| listed == Some(true);
    if capabilities.tools.as_ref().is_some_and(|t| changes(t.list_changed)) {
        filter = filter.tools_list_changed();
    }
    if capabilities.resources.as_ref().is_some_and(|r| changes(r.list_changed)) {
        filter = filter.resources_list_changed();
    }
    if capabilities.prompts.as_ref().is_some_and(|p| changes(p.list_changed)) {
        filter = filter.prompts_list_changed();
    }
    if !watched.is_empty() {
        filter = filter.resource_subscriptions(watched.iter().cloned());
    }
    let filter = filter.build();
    if filter == rmcp::model::SubscriptionFilter::default() {
        return;
    }
    // Within the startup timeout: a server that never acknowledges must not hold the connect.
    let mut subscription = match tokio::time::timeout(wait, service.peer().listen(filter)).await {
        Ok(Ok(subscription)) => subscription,
        Ok(Err(err)) => {
            tracing::warn!(server = name, %err, "the server did not take cowork's subscription to its list changes");
            return;
        }
        Err(_) => {
            tracing::warn!(server = name, "the server did not acknowledge cowork's subscription to its list changes in time");
            return;
        }
    };
    let (name, notices) = (name.to_owned(), notices.clone());
    // Ends with the connection (the stream closes) or when the server ends it.
    tokio::spawn(async move {
        while let Ok(Some(notification)) = subscription.next().await {
            let notice = match notification {
                rmcp::model::ServerNotification::ToolListChangedNotification(_) => Notice::ToolsChanged(name.clone()),
                rmcp::model::ServerNotification::ResourceListChangedNotification(_) => Notice::CatalogChanged(name.clone(), crate::automations::flow::McpEvent::ResourcesChanged),
                rmcp::model::ServerNotification::PromptListChangedNotification(_) => Notice::CatalogChanged(name.clone(), crate::automations::flow::McpEvent::PromptsChanged),
                rmcp::model::ServerNotification::ResourceUpdatedNotification(updated) => Notice::ResourceUpdated { server: name.clone(), uri: updated.params.uri },
                _ => continue,
            };
            let _ = notices.try_send(notice);
        }
        tracing::debug!(server = %name, end = ?subscription.end(), "the list-change subscription ended");
    });
}

fn stderr_hint(tail: &StderrTail) -> String {
    let last = tail.last(5);
    if last.trim().is_empty() { String::new() } else { format!("; its stderr ends with:\n{last}") }
}

impl Connection {
    /// Whether the connection ended (cancelled, or the server went away: its service loop ended).
    pub fn closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Lists every tool (all pages).
    pub async fn tools(&self, server: &str, timeout: Duration) -> anyhow::Result<Vec<McpTool>> {
        let tools = tokio::time::timeout(timeout, self.service.list_all_tools()).await.context("tools/list timed out")?.context("tools/list failed")?;
        Ok(tools
            .into_iter()
            .map(|tool| {
                let annotations = tool.annotations.clone().unwrap_or_default();
                McpTool {
                    server: server.to_owned(),
                    name: tool.name.into_owned(),
                    description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
                    input_schema: Value::Object((*tool.input_schema).clone()),
                    read_only: annotations.read_only_hint,
                    destructive: annotations.destructive_hint,
                    open_world: annotations.open_world_hint,
                }
            })
            .collect())
    }

    /// The resources and prompts the server offers (none when it does not
    /// say it has them; a failed list is logged and left empty).
    pub async fn catalog(&self, server: &str, timeout: Duration) -> Catalog {
        let capabilities = self.service.peer_info().map(|i| i.capabilities.clone()).unwrap_or_default();
        let mut catalog = Catalog::default();
        if capabilities.resources.is_some() {
            match tokio::time::timeout(timeout, self.service.list_all_resources()).await {
                Ok(Ok(list)) => {
                    catalog.resources = list
                        .into_iter()
                        .map(|r| crate::mcp::events::McpResource {
                            uri: r.uri.clone(),
                            name: r.title.clone().unwrap_or_else(|| r.name.clone()),
                            mime: r.mime_type.clone().unwrap_or_default(),
                            description: r.description.clone().unwrap_or_default(),
                        })
                        .collect()
                }
                Ok(Err(err)) => tracing::warn!(server, %err, "resources/list failed"),
                Err(_) => tracing::warn!(server, "resources/list timed out"),
            }
        }
        if capabilities.prompts.is_some() {
            match tokio::time::timeout(timeout, self.service.list_all_prompts()).await {
                Ok(Ok(list)) => {
                    catalog.prompts = list
                        .into_iter()
                        .map(|p| crate::mcp::events::McpPrompt {
                            name: p.name,
                            description: p.description.unwrap_or_default(),
                            arguments: p.arguments.unwrap_or_default().into_iter().map(|a| (a.name, a.required.unwrap_or(false))).collect(),
                        })
                        .collect()
                }
                Ok(Err(err)) => tracing::warn!(server, %err, "prompts/list failed"),
                Err(_) => tracing::warn!(server, "prompts/list timed out"),
            }
        }
        catalog
    }

    /// Reads a resource: its text contents joined (a binary one named with its size).
    pub async fn read_resource(&self, server: &str, uri: &str, name: &str, timeout: Duration) -> anyhow::Result<crate::records::Attachment> {
        let params = rmcp::model::ReadResourceRequestParams::new(uri);
        let result = tokio::time::timeout(timeout, self.service.read_resource(params)).await.context("resources/read timed out")?.context("resources/read failed")?;
        let mut parts = Vec::new();
        for contents in &result.contents {
            let value = serde_json::to_value(contents).unwrap_or_default();
            match value.get("text").and_then(Value::as_str) {
                Some(text) => parts.push(text.to_owned()),
                None => parts.extend(embedded_resource(&value, None)),
            }
        }
        anyhow::ensure!(!result.contents.is_empty(), "the server returned nothing for {uri}");
        Ok(crate::records::Attachment { server: server.to_owned(), uri: uri.to_owned(), name: name.to_owned(), text: parts.join("\n"), picture: None })
    }

    /// A prompt filled in with `arguments`: its messages as one text (an
    /// assistant message is marked as such; an embedded resource is inlined).
    pub async fn prompt(&self, name: &str, arguments: BTreeMap<String, String>, timeout: Duration) -> anyhow::Result<String> {
        let mut params = rmcp::model::GetPromptRequestParams::new(name);
        if !arguments.is_empty() {
            params.arguments = Some(arguments.into_iter().map(|(k, v)| (k, Value::String(v))).collect());
        }
        let result = tokio::time::timeout(timeout, self.service.get_prompt(params)).await.context("prompts/get timed out")?.context("prompts/get failed")?;
        let mut parts = Vec::new();
        for message in &result.messages {
            let content = block_parts(&serde_json::to_value(&message.content).unwrap_or_default(), None).join("\n");
            match message.role {
                rmcp::model::Role::Assistant => parts.push(format!("(assistant) {content}")),
                _ => parts.push(content),
            }
        }
        anyhow::ensure!(!parts.is_empty(), "the prompt {name} has no messages");
        Ok(parts.join("\n\n"))
    }

    /// Whether the server answers within `timeout`: any JSON-RPC answer counts
    /// (a server on a revision without `ping` says "method not found", and is alive).
    pub async fn alive(&self, timeout: Duration) -> bool {
        if self.closed() {
            return false;
        }
        let request = ClientRequest::PingRequest(Default::default());
        let Ok(handle) = self.service.peer().send_request_with_option(request, PeerRequestOptions::no_options()).await else { return false };
        matches!(tokio::time::timeout(timeout, handle.rx).await, Ok(Ok(Ok(_) | Err(rmcp::ServiceError::McpError(_)))))
    }

    /// Calls `tool` with `arguments`; progress goes to `on_progress`; `stop`
    /// (the user's Stop) cancels it on the server; `timeout` ends it with an error.
    pub async fn call(&self, tool: &str, arguments: Value, timeout: Duration, stop: Arc<AtomicBool>, on_progress: ProgressSink) -> ToolOutput {
        let arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => return ToolOutput::error(format!("the arguments must be an object, not {other}")),
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut handle = match self.service.peer().send_request_with_option(request, PeerRequestOptions::no_options()).await {
            Ok(handle) => handle,
            Err(err) => return ToolOutput::error(format!("the server is not reachable: {err}")),
        };
        let token = handle.progress_token.clone();
        self.progress.lock().insert(token.clone(), on_progress);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        let outcome = loop {
            tokio::select! {
                response = &mut handle.rx => break Ok(response),
                _ = &mut deadline => break Err(format!("no result within {} s (the tool timeout); cowork cancelled it on the server", timeout.as_secs())),
                _ = tick.tick() => if stop.load(Ordering::SeqCst) { break Err("stopped: cowork cancelled it on the server".to_owned()) },
            }
        };
        self.progress.lock().remove(&token);
        match outcome {
            Err(why) => {
                let _ = handle.cancel(Some(why.clone())).await;
                ToolOutput::error(why)
            }
            Ok(Err(_)) => ToolOutput::error("the server closed the connection during the call"),
            // Only a connection that went with a sign-in asks for one again (a
            // configured Authorization header refused is an ordinary error).
            Ok(Ok(Err(rmcp::ServiceError::TransportSend(err)))) if let Some(challenge) = super::oauth::challenge_of(&err).filter(|_| self.oauth) => {
                let handler = self.service.service();
                let _ = handler.notices.try_send(Notice::SignInNeeded { server: handler.server.clone(), challenge });
                ToolOutput::error("the server no longer takes cowork's sign-in and it could not be renewed: sign in again (Settings · Integrations)")
            }
            Ok(Ok(Err(err))) => ToolOutput::error(format!("the server refused the call: {err}")),
            Ok(Ok(Ok(ServerResult::CallToolResult(result)))) => result_output(&result),
            Ok(Ok(Ok(other))) => ToolOutput::error(format!("the server answered with something else than a tool result ({})", kind_of(&other))),
        }
    }
}

fn kind_of(result: &ServerResult) -> String {
    serde_json::to_value(result).ok().and_then(|v| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "))).unwrap_or_default()
}

/// A tool result as text for the model: text blocks as they are, images and
/// audio named with their size (images go whole to the chat, which shows
/// them), resource links and embedded resources with their URI (and text;
/// an embedded image is shown too), structured content as JSON when no text
/// block carries it. `isError` stays an error.
pub fn result_output(result: &rmcp::model::CallToolResult) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for block in &result.content {
        let Ok(value) = serde_json::to_value(block) else { continue };
        parts.extend(block_parts(&value, Some(&mut images)));
    }
    if let Some(structured) = &result.structured_content
        && parts.iter().all(|p| p.trim().is_empty())
    {
        parts = vec![structured.to_string()];
    }
    let content = parts.join("\n");
    let mut output = if result.is_error == Some(true) { ToolOutput::error(content) } else { ToolOutput::ok(content) };
    output.images = images;
    output
}

/// One content block (of a tool result or a prompt message) as text; its
/// images go to `images` when the caller keeps them.
fn block_parts(block: &Value, mut images: Option<&mut Vec<crate::media::Image>>) -> Vec<String> {
    let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    match block.get("type").and_then(Value::as_str).unwrap_or_default() {
        "text" => vec![text("text")],
        kind @ ("image" | "audio") => {
            let (mime, data) = (text("mimeType"), text("data"));
            let mut parts = vec![format!("[{kind} {mime}, {}]", crate::media::human_bytes((data.len() * 3 / 4) as u64))];
            if let Some(images) = images.as_deref_mut().filter(|_| kind == "image") {
                parts.extend(keep_image(images, mime, &data));
            }
            parts
        }
        "resource_link" => vec![format!("[resource {} {}]", text("uri"), text("name")).trim_end().replace(" ]", "]")],
        "resource" => embedded_resource(block.get("resource").unwrap_or(&Value::Null), images),
        other => vec![format!("[{other} content]")],
    }
}

/// An embedded resource (a tool result's, or a `resources/read` content) as
/// text: its URI and text, or its URI and size when binary; an image in it
/// goes to `images` when the caller keeps them.
fn embedded_resource(resource: &Value, images: Option<&mut Vec<crate::media::Image>>) -> Vec<String> {
    let field = |key: &str| resource.get(key).and_then(Value::as_str).unwrap_or_default();
    let (uri, mime) = (field("uri"), field("mimeType"));
    if let Some(body) = resource.get("text").and_then(Value::as_str) {
        return vec![format!("[resource {uri}]\n{body}")];
    }
    let blob = field("blob");
    let mut parts = vec![format!("[resource {uri}, {} binary, {}]", if mime.is_empty() { "unknown" } else { mime }, crate::media::human_bytes((blob.len() * 3 / 4) as u64))];
    if let Some(images) = images.filter(|_| mime.starts_with("image/")) {
        parts.extend(keep_image(images, mime.to_owned(), blob));
    }
    parts
}

/// Keeps a base64 image for the chat; a note for the model when it cannot.
fn keep_image(images: &mut Vec<crate::media::Image>, mime: String, base64_data: &str) -> Option<String> {
    use base64::Engine as _;
    if base64_data.len() / 4 * 3 > crate::media::MAX_IMAGE_BYTES {
        return Some("[the image is too large to keep]".into());
    }
    match base64::engine::general_purpose::STANDARD.decode(base64_data.trim()) {
        Ok(data) => {
            images.push(crate::media::Image { mime, data });
            None
        }
        Err(err) => Some(format!("[the image's data is not base64: {err}]")),
    }
}

/// Resolves the `env` and `headers` references of the server configured as
/// `name` from the secret store: each value reads only the secret computed
/// for it from (name, part, key), never a name the file wrote.
pub fn resolve_secrets(name: &str, config: &ServerConfig, secrets: &crate::secrets::Secrets) -> anyhow::Result<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    use super::config::{ENV, HEADERS, resolve};
    Ok((resolve(name, ENV, &config.env, secrets)?, resolve(name, HEADERS, &config.headers, secrets)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResult, ContentBlock as Content};

    #[test]
    fn results_become_text_for_the_model_and_errors_stay_errors() {
        let result = CallToolResult::success(vec![Content::text("hello"), Content::image("aGVsbG8gd29ybGQh", "image/png")]);
        let output = result_output(&result);
        assert_eq!(output.content, "hello\n[image image/png, 12 B]");
        assert_eq!(output.images, vec![crate::media::Image { mime: "image/png".into(), data: b"hello world!".to_vec() }]);
        let broken = result_output(&CallToolResult::success(vec![Content::image("not base64!", "image/png")]));
        assert!(broken.content.contains("not base64") && broken.images.is_empty(), "{broken:?}");
        let failed = CallToolResult::error(vec![Content::text("path outside allowed directories")]);
        assert!(result_output(&failed).is_error);
        let mut structured = CallToolResult::success(vec![]);
        structured.structured_content = Some(serde_json::json!({"sum": 5}));
        assert_eq!(result_output(&structured).content, r#"{"sum":5}"#);
    }

    #[test]
    fn cowork_offers_form_elicitation_and_neither_sampling_nor_roots() {
        let offered = serde_json::to_value(capabilities()).unwrap();
        assert_eq!(offered, serde_json::json!({"elicitation": {"form": {}}}));
    }

    #[test]
    fn progress_reads_as_a_fraction_with_its_message() {
        assert_eq!(Progress { progress: 3.0, total: Some(10.0), message: Some("step".into()) }.describe(), "3/10 · step");
        assert_eq!(Progress { progress: 0.5, total: None, message: None }.describe(), "0.5");
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_200_lines() {
        let tail = StderrTail::default();
        for i in 0..250 {
            tail.push(format!("line {i}"));
        }
        let lines = tail.lines();
        assert_eq!((lines.len(), lines[0].as_str(), lines[199].as_str()), (200, "line 50", "line 249"));
        assert_eq!(tail.last(2), "line 248\nline 249");
    }
}
