//! OAuth 2.1 for MCP servers over streamable HTTP, with rmcp's `auth` on the
//! same reqwest and rustls as the transport (no second HTTP or TLS stack).
//!
//! A server that answers 401 with a Bearer challenge waits for the user to
//! sign in (`SignInNeeded`). Signing in discovers its authorization server
//! from the challenge (RFC 9728, then RFC 8414), registers cowork as a public
//! native client unless the config names a client id (dynamic registration),
//! opens the system browser on the authorization URL (PKCE S256, a random
//! state) and takes the code on a loopback redirect: `127.0.0.1`, a port of
//! the moment, one path, the state checked before anything else is done.
//! A sign-in runs as a task on the mcp worker's runtime (Settings →
//! Integrations) or on a runtime of its own (`cowork mcp login NAME`), and
//! waits up to 5 minutes for the redirect.
//!
//! Tokens go to the secret store (`mcp/<server>/oauth`, rmcp's
//! `CredentialStore`, cached in memory), bound to the server's URL: a token
//! is never sent to an endpoint it was not made for. Connections
//! send the access token and refresh it when it nears its end or the server
//! refuses it; when the refresh is refused too, the server waits for sign-in
//! again. Every request of the sign-in and of a refresh passes the outbound
//! gate: offline, an authorization server that is not on loopback is refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationRequest, AuthorizationSession, CredentialStore, OAuthHttpClient, OAuthHttpClientFuture,
    OAuthHttpRequest, StoredCredentials,
};
use rmcp::transport::streamable_http_client::StreamableHttpError;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::config::OAuthSettings;

/// How long a sign-in waits for the browser to come back.
pub const SIGN_IN_WAIT: Duration = Duration::from_secs(300);

/// What a server's MCP connection sends as a client: rmcp's HTTP client.
pub type HttpClient = AuthClient<reqwest::Client>;

/// The secret store's name for a server's OAuth tokens.
pub fn secret_name(server: &str) -> String {
    format!("mcp/{server}/oauth")
}

/// The server refused cowork for want of a token (HTTP 401, a Bearer challenge).
#[derive(Debug, thiserror::Error)]
#[error("{url} asks you to sign in (OAuth): Sign in under Settings · Integrations, or run `cowork mcp login {server}`")]
pub struct SignInNeeded {
    pub server: String,
    pub url: String,
    /// The `WWW-Authenticate` header, where discovery starts.
    pub challenge: String,
}

/// The challenge of a 401 inside a transport error, if that is what it was.
pub fn challenge_of(error: &rmcp::transport::DynamicTransportError) -> Option<String> {
    match error.error.downcast_ref::<StreamableHttpError<reqwest::Error>>()? {
        StreamableHttpError::AuthRequired(required) => Some(required.www_authenticate_header.clone()),
        _ => None,
    }
}

/// The challenge behind a failed handshake.
pub fn challenge_of_handshake(error: &rmcp::service::ClientInitializeError) -> Option<String> {
    match error {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => challenge_of(error),
        // server/discover answered, then initialize met the 401.
        rmcp::service::ClientInitializeError::LegacyFallbackFailed { fallback, .. } => challenge_of_handshake(fallback),
        _ => None,
    }
}

/// What the secret store holds for one server.
#[derive(Serialize, Deserialize)]
struct Kept {
    /// The server the tokens are for.
    url: String,
    credentials: StoredCredentials,
}

/// rmcp's credential store over cowork's secret store: read once, then kept
/// in memory (rmcp loads before every request); written through on save.
struct SecretCredentials {
    data_dir: PathBuf,
    server: String,
    url: String,
    cached: tokio::sync::Mutex<Option<Option<StoredCredentials>>>,
}

fn store_error(err: anyhow::Error) -> AuthError {
    AuthError::CredentialStoreError(format!("{err:#}"))
}

impl SecretCredentials {
    fn new(data_dir: &Path, server: &str, url: &str) -> Self {
        SecretCredentials { data_dir: data_dir.to_owned(), server: server.to_owned(), url: url.to_owned(), cached: tokio::sync::Mutex::new(None) }
    }

    /// Runs `job` on the secret store off the async threads (the Secret Service is D-Bus).
    async fn with_secrets<T: Send + 'static>(&self, job: impl FnOnce(crate::secrets::Secrets, String) -> anyhow::Result<T> + Send + 'static) -> Result<T, AuthError> {
        let (dir, name) = (self.data_dir.clone(), secret_name(&self.server));
        tokio::task::spawn_blocking(move || job(crate::secrets::Secrets::open(&dir)?, name)).await.map_err(|e| store_error(anyhow!("{e}")))?.map_err(store_error)
    }
}

#[async_trait::async_trait]
impl CredentialStore for SecretCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let mut cached = self.cached.lock().await;
        if let Some(credentials) = cached.as_ref() {
            return Ok(credentials.clone());
        }
        let text = self.with_secrets(|secrets, name| secrets.get(&name)).await?;
        let credentials = match text {
            None => None,
            Some(text) => {
                let kept: Kept = serde_json::from_str(&text).map_err(|e| store_error(anyhow!("the stored sign-in of {} is unreadable ({e}); sign in again", self.server)))?;
                // Tokens made for another endpoint are never sent to this one.
                (kept.url == self.url).then_some(kept.credentials)
            }
        };
        *cached = Some(credentials.clone());
        Ok(credentials)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = serde_json::to_string(&Kept { url: self.url.clone(), credentials: credentials.clone() }).map_err(|e| store_error(e.into()))?;
        self.with_secrets(move |secrets, name| secrets.set(&name, &text)).await?;
        *self.cached.lock().await = Some(Some(credentials));
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.with_secrets(|secrets, name| secrets.delete(&name).map(|_| ())).await?;
        *self.cached.lock().await = Some(None);
        Ok(())
    }
}

/// Every OAuth request (discovery, registration, token, refresh) through the
/// outbound gate, logged with its bytes, on a client the gate built for its
/// route (never one that reads the environment's proxy itself).
struct GatedHttp;

/// The most an OAuth response may hold (rmcp's own client caps it the same).
const OAUTH_BODY_LIMIT: usize = 1 << 20;

impl OAuthHttpClient for GatedHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let gate = crate::net::OutboundGate::global();
            let admission = gate.admit(&request.request.uri().to_string(), "MCP sign-in")?;
            // Offline, a redirect could leave loopback unseen by the gate: none is followed.
            let follow = request.redirect_policy == rmcp::transport::auth::OAuthHttpRedirectPolicy::Follow && !gate.is_offline();
            let redirect = if follow { reqwest::redirect::Policy::limited(10) } else { reqwest::redirect::Policy::none() };
            let client = admission.reqwest_client(reqwest::Client::builder().timeout(request.timeout.unwrap_or(Duration::from_secs(30))).redirect(redirect))?;
            let sent = request.request.body().len() as u64;
            let response = client.execute(reqwest::Request::try_from(request.request)?).await?;
            let mut builder = http::Response::builder().status(response.status()).version(response.version());
            for (name, value) in response.headers() {
                builder = builder.header(name, value);
            }
            let mut body = Vec::new();
            let mut response = response;
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > OAUTH_BODY_LIMIT {
                    gate.finish(admission, sent, body.len() as u64);
                    return Err(format!("an OAuth answer was larger than {OAUTH_BODY_LIMIT} bytes").into());
                }
                body.extend_from_slice(&chunk);
            }
            gate.finish(admission, sent, body.len() as u64);
            Ok(builder.body(body)?)
        })
    }
}

async fn manager(server: &str, url: &str, data_dir: &Path) -> anyhow::Result<AuthorizationManager> {
    let http = GatedHttp;
    let mut manager = AuthorizationManager::new_with_oauth_http_client(url, Arc::new(http)).await?;
    manager.set_credential_store(SecretCredentials::new(data_dir, server, url));
    Ok(manager)
}

/// The `WWW-Authenticate` challenge of a server that answers 401 (None: it did not).
pub async fn probe_challenge(url: &str) -> anyhow::Result<Option<String>> {
    let gate = crate::net::OutboundGate::global();
    let admission = gate.admit(url, "MCP sign-in")?;
    let body = r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#;
    let client = admission.reqwest_client(reqwest::Client::builder().timeout(Duration::from_secs(30)).redirect(reqwest::redirect::Policy::none()))?;
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body)
        .send()
        .await
        .with_context(|| format!("cannot reach {url}"))?;
    gate.finish(admission, body.len() as u64, 0);
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Ok(None);
    }
    Ok(response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).map(str::to_owned))
}

/// Whether the secret store holds a sign-in for `server` at `url`.
pub async fn signed_in(server: &str, url: &str, data_dir: &Path) -> anyhow::Result<bool> {
    let store = SecretCredentials::new(data_dir, server, url);
    Ok(store.load().await?.is_some_and(|c| c.token_response.is_some()))
}

/// The HTTP client for a server the user signed in to (None: no sign-in
/// kept), over `http`, the client the gate built for the server's route.
pub async fn client(server: &str, url: &str, data_dir: &Path, http: reqwest::Client) -> anyhow::Result<Option<HttpClient>> {
    if !signed_in(server, url, data_dir).await? {
        return Ok(None);
    }
    let mut manager = manager(server, url, data_dir).await?;
    // Reads the authorization server's metadata again; a changed issuer drops the tokens.
    if !manager.initialize_from_store().await.context("cannot reach the server's authorization server")? {
        return Ok(None);
    }
    Ok(Some(AuthClient::new(http, manager)))
}

/// Forgets the sign-in (the tokens leave the secret store). True if there was one.
pub fn sign_out(server: &str, data_dir: &Path) -> anyhow::Result<bool> {
    crate::secrets::Secrets::open(data_dir)?.delete(&secret_name(server))
}

/// Signs in to `server` at `url`: `show` gets the authorization URL (to open
/// in the browser and to show); returns once the tokens are in the secret store.
pub async fn sign_in(server: &str, url: &str, challenge: Option<&str>, settings: &OAuthSettings, data_dir: &Path, show: impl FnOnce(&str)) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await.context("cannot listen on loopback for the sign-in's redirect")?;
    let redirect = format!("http://127.0.0.1:{}/callback", listener.local_addr()?.port());
    let mut manager = manager(server, url, data_dir).await?;
    let resolution = manager.resolve_metadata_from_challenge(challenge).await.with_context(|| format!("cannot find the authorization server of {url}"))?;
    manager.set_metadata(resolution.metadata);
    let mut request = AuthorizationRequest::new(redirect).with_client_name("cowork").with_application_type("native");
    if let Some(id) = &settings.client_id {
        request = request.with_preregistered_client(id);
    }
    if !settings.scopes.is_empty() {
        request = request.with_scopes(settings.scopes.clone());
    }
    let session = AuthorizationSession::new(manager, request).await.map_err(|(_, err)| anyhow!(err)).context("the authorization server did not take cowork as a client")?;
    let authorize = session.get_authorization_url().to_owned();
    if !safe_to_open(&authorize) {
        bail!("the authorization server's sign-in page is not an https address ({authorize:.80}); cowork does not open it");
    }
    let state = query_value(&authorize, "state").ok_or_else(|| anyhow!("the authorization URL has no state"))?;
    show(&authorize);
    let callback = tokio::time::timeout(SIGN_IN_WAIT, redirected(&listener, &state))
        .await
        .map_err(|_| anyhow!("the browser did not come back within {} min", SIGN_IN_WAIT.as_secs() / 60))??;
    session
        .handle_callback_with_issuer(&callback.code, &callback.csrf_token, callback.issuer.as_deref())
        .await
        .map_err(|err| anyhow!(err))
        .context("the authorization server did not give tokens for the code")?;
    Ok(())
}

/// Whether a URL from a server's metadata may go to the browser: https, or
/// http on loopback. Anything else (`file:`, a custom scheme whose handler
/// would run, an option-like string) is never handed to xdg-open.
fn safe_to_open(url: &str) -> bool {
    let Ok(parsed) = url::Url::parse(url) else { return false };
    !url.chars().any(char::is_whitespace)
        && match (parsed.scheme(), parsed.host_str()) {
            ("https", Some(_)) => true,
            ("http", Some(host)) => crate::net::is_loopback(host.trim_start_matches('[').trim_end_matches(']')),
            _ => false,
        }
}

/// One query parameter of a URL, decoded.
fn query_value(url: &str, key: &str) -> Option<String> {
    url::Url::parse(url).ok()?.query_pairs().find(|(k, _)| k == key).map(|(_, v)| v.into_owned())
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Waits for the browser's redirect: a GET of `/callback` with this sign-in's
/// state. Anything else (a favicon, a stray or forged request) is answered
/// and ignored; an error from the authorization server ends the sign-in.
async fn redirected(listener: &tokio::net::TcpListener, state: &str) -> anyhow::Result<AuthorizationCallback> {
    // Each connection on its own task: one that says nothing must not hold up the real redirect.
    let (found, mut outcomes) = tokio::sync::mpsc::channel(4);
    loop {
        tokio::select! {
            outcome = outcomes.recv() => if let Some(outcome) = outcome { return outcome },
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let (found, state) = (found.clone(), state.to_owned());
                    tokio::spawn(async move {
                        if let Some(outcome) = answer(stream, &state).await {
                            let _ = found.send(outcome).await;
                        }
                    });
                }
                Err(err) => {
                    tracing::debug!(%err, "a connection to the sign-in listener failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
        }
    }
}

/// Reads one request and answers it; the sign-in's outcome if it was the redirect.
async fn answer(mut stream: tokio::net::TcpStream, state: &str) -> Option<anyhow::Result<AuthorizationCallback>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
    if !matches!(read, Ok(Ok(()))) {
        return None;
    }
    let text = String::from_utf8_lossy(&head);
    let target = text.lines().next().and_then(|line| line.strip_prefix("GET ")).and_then(|rest| rest.split(' ').next()).unwrap_or("");
    let (path, _) = target.split_once('?').unwrap_or((target, ""));
    let url = format!("http://127.0.0.1{target}");
    let (status, page, outcome) = if path != "/callback" || query_value(&url, "state").as_deref() != Some(state) {
        ("404 Not Found", "Not a cowork sign-in.".to_owned(), None)
    } else if let Some(error) = query_value(&url, "error") {
        let description = query_value(&url, "error_description").unwrap_or_default();
        let why = format!("the authorization server refused: {error} {description}").trim_end().to_owned();
        ("200 OK", format!("Sign-in did not work: {}. You can close this tab.", escape(&why)), Some(Err(anyhow!(why))))
    } else {
        match AuthorizationCallback::from_redirect_url(&url) {
            Ok(callback) => ("200 OK", "Signed in. You can close this tab and go back to cowork.".to_owned(), Some(Ok(callback))),
            Err(err) => ("400 Bad Request", format!("The redirect was incomplete: {}", escape(&err.to_string())), None),
        }
    };
    let body = format!("<!doctype html><meta charset=utf-8><title>cowork</title><p>{page}</p>");
    let response = format!("HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\ncache-control: no-store\r\n\r\n{body}", body.len());
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
    outcome
}

/// Opens `url` in the user's browser: `$BROWSER` (the usual convention:
/// commands separated by `:`, the first that starts wins), else `xdg-open`.
pub fn open_browser(url: &str) -> anyhow::Result<()> {
    let browsers = std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty()).unwrap_or_else(|| "xdg-open".into());
    let mut failures = Vec::new();
    for program in browsers.split(':').map(str::trim).filter(|p| !p.is_empty()) {
        match std::process::Command::new(program).arg(url).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn() {
            Ok(mut child) => {
                // Reaped when it ends; a browser that stays open is not waited for here.
                std::thread::Builder::new().name("browser-open".into()).spawn(move || child.wait()).ok();
                return Ok(());
            }
            Err(err) => failures.push(format!("{program}: {err}")),
        }
    }
    bail!("no browser could be opened ({}); open the link yourself", failures.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_pages_go_to_the_browser() {
        assert!(safe_to_open("https://auth.example/authorize?state=x"));
        assert!(safe_to_open("http://127.0.0.1:8080/authorize"));
        for url in ["http://auth.example/authorize", "file:///etc/passwd", "vscode://x", "-oProxyCommand=x", "https://auth.example/a b", "https://", "javascript:alert(1)"] {
            assert!(!safe_to_open(url), "{url}");
        }
    }

    #[test]
    fn query_values_are_decoded_and_missing_ones_are_none() {
        let url = "http://127.0.0.1:5000/callback?code=a%2Fb+c&state=xyz%3D&iss=https%3A%2F%2Fas.example";
        assert_eq!(query_value(url, "code").as_deref(), Some("a/b c"));
        assert_eq!(query_value(url, "state").as_deref(), Some("xyz="));
        assert_eq!(query_value(url, "iss").as_deref(), Some("https://as.example"));
        assert_eq!(query_value(url, "error"), None);
        assert_eq!(query_value("http://127.0.0.1/callback?a=100%", "a").as_deref(), Some("100%"));
        assert_eq!(query_value("http://127.0.0.1/callback?a=%zz", "a").as_deref(), Some("%zz"));
    }

    async fn get(port: u16, target: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.write_all(format!("GET {target} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    #[test]
    fn the_redirect_listener_ignores_strays_and_forged_states_and_takes_the_real_one() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let waiting = tokio::spawn(async move { redirected(&listener, "s3cret").await });
            // A connection that says nothing does not hold up the others.
            let _silent = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let stray = tokio::time::timeout(Duration::from_secs(3), get(port, "/favicon.ico")).await.expect("answered while another connection is silent");
            assert!(stray.starts_with("HTTP/1.1 404"));
            assert!(get(port, "/callback?code=evil&state=guess").await.starts_with("HTTP/1.1 404"), "a forged state is not taken");
            let page = get(port, "/callback?code=good%2F1&state=s3cret").await;
            assert!(page.starts_with("HTTP/1.1 200") && page.contains("Signed in"), "{page}");
            let callback = waiting.await.unwrap().unwrap();
            assert_eq!((callback.code.as_str(), callback.csrf_token.as_str()), ("good/1", "s3cret"));

            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let waiting = tokio::spawn(async move { redirected(&listener, "st").await });
            let page = get(port, "/callback?error=access_denied&error_description=%3Cb%3Eno%3C%2Fb%3E&state=st").await;
            assert!(page.contains("access_denied") && page.contains("&lt;b&gt;no") && !page.contains("<b>no"), "escaped: {page}");
            let err = waiting.await.unwrap().unwrap_err();
            assert!(format!("{err}").contains("refused: access_denied <b>no</b>"), "{err}");
        });
    }

    #[test]
    fn tokens_are_bound_to_the_url_they_were_made_for() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let store = SecretCredentials::new(dir.path(), "tracker", "http://127.0.0.1:1/mcp");
            assert!(store.load().await.unwrap().is_none());
            store.save(StoredCredentials::new("client-1".into(), None, vec!["read".into()], Some(1))).await.unwrap();
            let again = SecretCredentials::new(dir.path(), "tracker", "http://127.0.0.1:1/mcp");
            assert_eq!(again.load().await.unwrap().map(|c| c.client_id).as_deref(), Some("client-1"));
            let elsewhere = SecretCredentials::new(dir.path(), "tracker", "https://other.example/mcp");
            assert!(elsewhere.load().await.unwrap().is_none(), "a token never goes to another endpoint");
            again.clear().await.unwrap();
            assert!(SecretCredentials::new(dir.path(), "tracker", "http://127.0.0.1:1/mcp").load().await.unwrap().is_none());
        });
    }
}
