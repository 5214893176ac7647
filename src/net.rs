//! The one gate every outbound HTTP request goes through. In offline mode it
//! refuses anything that is not loopback (and says so in the log); in every
//! mode it records time, host, purpose and bytes for Settings → Network.
//!
//! Loopback means a literal loopback address or `localhost`: a name that
//! merely resolves to 127.0.0.1 is refused offline, so the promise does not
//! depend on DNS.
//!
//! The gate also decides the route, together with the offline decision: a
//! proxy named in the environment (`https_proxy`, `http_proxy`, `all_proxy`,
//! either case; `no_proxy` honoured) carries requests to other hosts, never
//! a loopback one, and offline mode judges where the connection really goes
//! (a proxy that is not loopback is refused, and logged as the destination).
//! The HTTP clients are built only from an `Admission` (`Admission::agent`,
//! `Admission::reqwest_client`, for MCP over HTTP and OAuth), with exactly
//! that route: no client reads the environment's proxy on its own.
//!
//! Invariant: every outbound HTTP request asks `OutboundGate::global().admit`
//! first and reports its bytes after; offline, only literal loopback is
//! admitted, through no proxy.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

/// How many requests the log keeps (oldest dropped first).
const LOG_CAPACITY: usize = 500;

/// One outbound request, as the log shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboundRecord {
    pub at_millis: i64,
    pub host: String,
    pub purpose: String,
    pub bytes_out: u64,
    pub bytes_in: u64,
    /// `None`: allowed; `Some(reason)`: refused by the gate.
    pub refused: Option<String>,
    /// The proxy the request went (or would have gone) through, `host:port`.
    pub via: Option<String>,
}

impl OutboundRecord {
    /// Where the connection goes: "api.openai.com through the proxy 10.0.0.5:3128".
    pub fn destination(&self) -> String {
        match &self.via {
            Some(proxy) => format!("{} through the proxy {proxy}", self.host),
            None => self.host.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GateError {
    #[error("offline mode: refused a connection to {host} ({purpose}); only loopback is allowed")]
    Offline { host: String, purpose: String },
    #[error("not a usable URL: {0}")]
    BadUrl(String),
    #[error("the proxy named in the environment is not usable: {0}; nothing was sent")]
    BadProxy(String),
}

pub struct OutboundGate {
    offline: AtomicBool,
    log: Mutex<VecDeque<OutboundRecord>>,
}

/// A request the gate let through, with its route; build its client from it
/// and report its bytes when it is done.
pub struct Admission {
    host: String,
    purpose: String,
    at_millis: i64,
    route: Route,
    /// Offline when admitted: the client follows no redirect (the next hop would pass no gate).
    offline: bool,
}

/// How a request reaches its host: straight, or through a proxy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Route {
    /// The proxy's URL as the environment gives it (credentials included).
    proxy_url: Option<String>,
    /// The proxy's `host:port`, for the log and the offline decision.
    pub proxy: Option<String>,
    proxy_host: Option<String>,
}

impl Route {
    /// Straight to the host, whatever the environment says.
    pub fn direct() -> Self {
        Route::default()
    }

    /// The host the connection is opened to.
    pub fn connects_to<'a>(&'a self, host: &'a str) -> &'a str {
        self.proxy_host.as_deref().unwrap_or(host)
    }
}

/// The route to `url` as the environment `var` names it, read as curl reads
/// it: for `https://` `https_proxy` then `HTTPS_PROXY`, for `http://`
/// `http_proxy` then `HTTP_PROXY`, then `all_proxy`/`ALL_PROXY`; straight for
/// a host that `no_proxy`/`NO_PROXY` covers (`*`, a name, `.suffix`,
/// `*.suffix`, an address), and always straight for loopback: another
/// machine cannot reach this one's loopback, and what a local model or
/// service is sent must not pass through a proxy elsewhere. A proxy value
/// that is not a usable URL (`scheme://host[:port]`) is refused: the request
/// goes nowhere rather than straight.
pub fn route_for(url: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<Route, GateError> {
    let parsed = url::Url::parse(url).map_err(|err| GateError::BadUrl(format!("{url} ({err})")))?;
    let host = host_of_url(url).ok_or_else(|| GateError::BadUrl(url.to_owned()))?;
    if is_loopback(&host) {
        return Ok(Route::direct());
    }
    let first = |names: &[&str]| names.iter().find_map(|name| var(name).filter(|v| !v.trim().is_empty()));
    let no_proxy = first(&["no_proxy", "NO_PROXY"]).unwrap_or_default();
    if covered_by_no_proxy(&host, &no_proxy) {
        return Ok(Route::direct());
    }
    let specific = if parsed.scheme() == "https" { first(&["https_proxy", "HTTPS_PROXY"]) } else { first(&["http_proxy", "HTTP_PROXY"]) };
    let Some(proxy_url) = specific.or_else(|| first(&["all_proxy", "ALL_PROXY"])) else { return Ok(Route::direct()) };
    let proxy_url = proxy_url.trim().to_owned();
    // "proxy:3128" without a scheme is an HTTP proxy, as curl reads it.
    let with_scheme = if proxy_url.contains("://") { proxy_url.clone() } else { format!("http://{proxy_url}") };
    let parsed_proxy = url::Url::parse(&with_scheme).map_err(|err| GateError::BadProxy(format!("{} ({err})", strip_credentials(&proxy_url))))?;
    let proxy_host = match parsed_proxy.host() {
        Some(url::Host::Domain(domain)) => domain.to_lowercase(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(GateError::BadProxy(strip_credentials(&proxy_url))),
    };
    if !matches!(parsed_proxy.scheme(), "http" | "https" | "socks4" | "socks4a" | "socks5" | "socks5h" | "socks") {
        return Err(GateError::BadProxy(format!("{} (cowork speaks to HTTP, HTTPS and SOCKS proxies)", strip_credentials(&proxy_url))));
    }
    let port = parsed_proxy.port_or_known_default().unwrap_or(match parsed_proxy.scheme() {
        "https" => 443,
        "http" => 80,
        _ => 1080,
    });
    let shown = if proxy_host.contains(':') { format!("[{proxy_host}]:{port}") } else { format!("{proxy_host}:{port}") };
    Ok(Route { proxy_url: Some(with_scheme), proxy: Some(shown), proxy_host: Some(proxy_host) })
}

/// A proxy URL without its user name and password, for messages and logs.
fn strip_credentials(proxy_url: &str) -> String {
    match proxy_url.rsplit_once('@') {
        Some((before, after)) => match before.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://{after}"),
            None => after.to_owned(),
        },
        None => proxy_url.to_owned(),
    }
}

/// Whether `no_proxy` (comma-separated, as curl and most tools read it)
/// covers `host`.
fn covered_by_no_proxy(host: &str, no_proxy: &str) -> bool {
    no_proxy.split([',', ' ']).map(|e| e.trim().to_ascii_lowercase()).filter(|e| !e.is_empty()).any(|entry| {
        if entry == "*" {
            return true;
        }
        // "host:port" entries: the port is not part of the decision here.
        let entry = match entry.rsplit_once(':') {
            Some((name, port)) if !name.contains(':') && port.chars().all(|c| c.is_ascii_digit()) => name.to_owned(),
            _ => entry.trim_matches(['[', ']']).to_owned(),
        };
        let suffix = entry.trim_start_matches('*').trim_start_matches('.');
        host == suffix || host.ends_with(&format!(".{suffix}"))
    })
}

impl OutboundGate {
    pub fn new(offline: bool) -> Self {
        Self { offline: AtomicBool::new(offline), log: Mutex::new(VecDeque::new()) }
    }

    /// The process's gate.
    pub fn global() -> &'static OutboundGate {
        static GATE: OnceLock<OutboundGate> = OnceLock::new();
        GATE.get_or_init(|| OutboundGate::new(false))
    }

    pub fn set_offline(&self, offline: bool) {
        self.offline.store(offline, Ordering::SeqCst);
        tracing::info!(offline, "outbound gate");
    }

    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::SeqCst)
    }

    /// Asks to open a connection to `url` for `purpose`, routed as the
    /// process's environment says (`route_for`).
    pub fn admit(&self, url: &str, purpose: &str) -> Result<Admission, GateError> {
        self.admit_with(url, purpose, &|name| std::env::var(name).ok())
    }

    /// `admit` with the environment read through `var` (tests).
    pub fn admit_with(&self, url: &str, purpose: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<Admission, GateError> {
        let host = host_of_url(url).ok_or_else(|| GateError::BadUrl(url.to_owned()))?;
        let at_millis = crate::ids::now_millis();
        let route = match route_for(url, var) {
            Ok(route) => route,
            Err(err) => {
                self.push(OutboundRecord { at_millis, host, purpose: purpose.to_owned(), bytes_out: 0, bytes_in: 0, refused: Some(err.to_string()), via: None });
                return Err(err);
            }
        };
        // Offline, both ends must be loopback: the host and, when there is one, the proxy the connection would open.
        if self.is_offline() && !(is_loopback(&host) && is_loopback(route.connects_to(&host))) {
            let record = OutboundRecord {
                at_millis,
                host: host.clone(),
                purpose: purpose.to_owned(),
                bytes_out: 0,
                bytes_in: 0,
                refused: Some("offline mode".into()),
                via: route.proxy.clone(),
            };
            let destination = record.destination();
            tracing::warn!(destination = %destination, purpose, "offline mode refused an outbound connection");
            self.push(record);
            return Err(GateError::Offline { host: destination, purpose: purpose.to_owned() });
        }
        Ok(Admission { host, purpose: purpose.to_owned(), at_millis, route, offline: self.is_offline() })
    }

    /// Records what an admitted request sent and received.
    pub fn finish(&self, admission: Admission, bytes_out: u64, bytes_in: u64) {
        let record = OutboundRecord {
            at_millis: admission.at_millis,
            host: admission.host,
            purpose: admission.purpose,
            bytes_out,
            bytes_in,
            refused: None,
            via: admission.route.proxy,
        };
        tracing::info!(destination = %record.destination(), purpose = %record.purpose, bytes_out, bytes_in, "outbound request");
        self.push(record);
    }

    fn push(&self, record: OutboundRecord) {
        let mut log = self.log.lock();
        if log.len() == LOG_CAPACITY {
            log.pop_front();
        }
        log.push_back(record);
    }

    /// The log, oldest first.
    pub fn log(&self) -> Vec<OutboundRecord> {
        self.log.lock().iter().cloned().collect()
    }
}

impl Admission {
    /// The route the gate judged.
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The HTTP client for this request (ureq): `tune` sets timeouts and the
    /// like; the route is set after it, so no caller can undo it, and the
    /// environment's proxy variables are never read by the client itself.
    pub fn agent(&self, tune: impl FnOnce(ureq::config::ConfigBuilder<ureq::typestate::AgentScope>) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope>) -> ureq::Agent {
        let proxy = self.route.proxy_url.as_deref().and_then(|url| match ureq::Proxy::new(url) {
            Ok(proxy) => Some(proxy),
            Err(err) => {
                tracing::warn!(%err, "the proxy could not be used");
                None
            }
        });
        // A proxy the client cannot use must not turn into a straight connection: it goes to a closed port instead.
        let proxy = match (&self.route.proxy_url, proxy) {
            (Some(_), None) => ureq::Proxy::new("http://127.0.0.1:9").ok(),
            (_, proxy) => proxy,
        };
        let config = tune(ureq::Agent::config_builder()).proxy(proxy);
        // Offline, a redirect would lead to a host the gate never saw: none is followed.
        let config = if self.offline { config.max_redirects(0) } else { config };
        ureq::Agent::new_with_config(config.build())
    }

    /// The HTTP client for this request (reqwest, which MCP over HTTP uses),
    /// from `builder`, with the route set the same way.
    pub fn reqwest_client(&self, builder: reqwest::ClientBuilder) -> reqwest::Result<reqwest::Client> {
        let builder = if self.offline { builder.redirect(reqwest::redirect::Policy::none()) } else { builder };
        match self.route.proxy_url.as_deref() {
            Some(url) => builder.no_proxy().proxy(reqwest::Proxy::all(url)?).build(),
            None => builder.no_proxy().build(),
        }
    }
}

/// A redirect's target as an absolute URL (a Location may be a path).
pub fn resolve_location(base: &str, location: &str) -> Option<String> {
    if location.starts_with("http://") || location.starts_with("https://") {
        return Some(location.to_owned());
    }
    let scheme_end = base.find("://")? + 3;
    let origin_end = base[scheme_end..].find('/').map_or(base.len(), |i| scheme_end + i);
    location.starts_with('/').then(|| format!("{}{location}", &base[..origin_end]))
}

/// A web URL as a browser reads it: the WHATWG parser (the `url` crate)
/// decides the host, so `http://evil.example\@127.0.0.1/` is a request to
/// evil.example, as Chromium and Firefox would send it. A backslash,
/// whitespace or a control character anywhere is refused outright: other
/// parsers (`http::Uri`, curl, an app) read such URLs differently.
pub fn web_url(url: &str) -> Result<String, GateError> {
    if url.chars().any(|c| c == '\\' || c.is_whitespace() || c.is_control()) {
        return Err(GateError::BadUrl(format!("{url} (a backslash, space or control character in a URL is refused)")));
    }
    let parsed = url::Url::parse(url).map_err(|err| GateError::BadUrl(format!("{url} ({err})")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
        return Err(GateError::BadUrl(url.to_owned()));
    }
    Ok(parsed.to_string())
}

/// The host of an `http(s)://` URL as a browser reads it, lowercased, IPv6 without brackets.
pub fn host_of_url(url: &str) -> Option<String> {
    let parsed = url::Url::parse(&web_url(url).ok()?).ok()?;
    Some(match parsed.host()? {
        url::Host::Domain(domain) => domain.to_lowercase(),
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => ip.to_string(),
    })
}

pub fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_admits_only_literal_loopback_and_logs_refusals() {
        let gate = OutboundGate::new(true);
        for url in ["http://127.0.0.1:8080/v1", "http://localhost:11434/api/chat", "http://[::1]:9/x", "http://127.9.9.9/"] {
            let admission = gate.admit(url, "test").unwrap_or_else(|e| panic!("{url}: {e}"));
            gate.finish(admission, 10, 20);
        }
        for url in ["https://api.openai.com/v1", "http://10.0.0.1/", "http://localhost.evil.example/", "https://huggingface.co/x"] {
            assert!(matches!(gate.admit(url, "test"), Err(GateError::Offline { .. })), "{url}");
        }
        // Parsed as a browser parses them (WHATWG): the host is what a browser would connect to.
        for url in [
            "http://evil.example\\@127.0.0.1/?d=secret",
            "http://evil.example\\\\@127.0.0.1/",
            "http://127.0.0.1:80@evil.example/",
            "http://localhost@evil.example/",
            "HTTP://EVIL.example/",
            "http://evil.example#@127.0.0.1/",
            "http://evil.example?@127.0.0.1/",
            "http://[::1].evil.example/",
            "http://127.0.0.1.evil.example/",
            "http:/\\evil.example/",
        ] {
            assert!(gate.admit(url, "test").is_err(), "{url}");
        }
        for url in ["http://0x7f.1/", "http://2130706433/", "http://127.1/", "http://user:pw@127.0.0.1/x"] {
            assert!(gate.admit(url, "test").is_ok(), "{url}: a browser reads these as loopback");
        }
        for url in ["http://a b/", "http://x/\u{0}", "http://x\r\n/", " http://127.0.0.1/"] {
            assert!(matches!(gate.admit(url, "test"), Err(GateError::BadUrl(_))), "{url}");
        }
        assert_eq!(host_of_url("http://evil.example\\@127.0.0.1/"), None);
        assert_eq!(url::Url::parse("http://evil.example\\@127.0.0.1/").unwrap().host_str(), Some("evil.example"));
        let log = gate.log();
        assert_eq!(log.iter().filter(|r| r.refused.is_some()).count(), 4 + 6);
        assert_eq!(log[0].bytes_in, 20);
        assert!(log.iter().any(|r| r.host == "huggingface.co" && r.refused.is_some()));
        gate.set_offline(false);
        assert!(gate.admit("https://api.openai.com/v1", "test").is_ok());
        assert!(matches!(gate.admit("ftp://x", "test"), Err(GateError::BadUrl(_))));
    }

    #[test]
    fn the_route_follows_the_environment_as_curl_reads_it_and_never_proxies_loopback() {
        let env = |pairs: &'static [(&'static str, &'static str)]| move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned());
        let via = |url: &str, pairs: &'static [(&'static str, &'static str)]| route_for(url, &env(pairs)).unwrap().proxy;
        // Each variable for its scheme, lower case first, then all_proxy.
        assert_eq!(via("https://api.example/v1", &[("https_proxy", "http://p1:3128"), ("HTTPS_PROXY", "http://p2:3128")]).as_deref(), Some("p1:3128"));
        assert_eq!(via("https://api.example/v1", &[("HTTPS_PROXY", "http://p2:3128")]).as_deref(), Some("p2:3128"));
        assert_eq!(via("http://api.example/v1", &[("https_proxy", "http://p1:3128")]), None, "an https proxy is not for http");
        assert_eq!(via("http://api.example/v1", &[("HTTP_PROXY", "p3:8080")]).as_deref(), Some("p3:8080"), "no scheme: an HTTP proxy");
        assert_eq!(via("http://api.example/v1", &[("ALL_PROXY", "socks5://p4")]).as_deref(), Some("p4:1080"));
        assert_eq!(via("https://api.example/v1", &[("all_proxy", "http://user:secret@p5:3128")]).as_deref(), Some("p5:3128"), "no password in the log");
        // Loopback is never proxied; no_proxy in its usual forms.
        for url in ["http://127.0.0.1:11434/api", "http://localhost:8080/v1", "http://[::1]:9/x", "http://127.7.7.7/"] {
            assert_eq!(via(url, &[("all_proxy", "http://p:1"), ("http_proxy", "http://p:1")]), None, "{url}");
        }
        for no_proxy in ["*", "api.example", ".example", "*.example", "other, api.example:443", "API.EXAMPLE"] {
            let pairs: &'static [(&'static str, &'static str)] = Box::leak(vec![("https_proxy", "http://p:1"), ("NO_PROXY", no_proxy)].into_boxed_slice());
            assert_eq!(via("https://api.example/v1", pairs), None, "{no_proxy}");
        }
        assert!(via("https://notapi.example.org/v1", &[("https_proxy", "http://p:1"), ("no_proxy", "api.example")]).is_some());
        // A proxy value that cannot be used is refused, not ignored: the request goes nowhere.
        assert!(matches!(route_for("https://api.example/", &env(&[("https_proxy", "ftp://p:21")])), Err(GateError::BadProxy(_))));
        assert!(matches!(route_for("https://api.example/", &env(&[("https_proxy", "http://")])), Err(GateError::BadProxy(_))));

        // Offline: a remote host is refused with the proxy named; a loopback one goes straight whatever the proxy is.
        let gate = OutboundGate::new(true);
        let proxy_env = env(&[("http_proxy", "http://10.231.77.2:3128"), ("https_proxy", "http://10.231.77.2:3128"), ("ALL_PROXY", "http://10.231.77.2:3128")]);
        let admitted = gate.admit_with("http://127.0.0.1:8080/v1", "chat", &proxy_env).unwrap();
        assert_eq!(admitted.route().proxy, None);
        gate.finish(admitted, 1, 1);
        let refused = gate.admit_with("https://api.openai.com/v1", "chat", &proxy_env).err().unwrap().to_string();
        assert!(refused.contains("api.openai.com through the proxy 10.231.77.2:3128"), "{refused}");
        assert_eq!(gate.log().last().unwrap().destination(), "api.openai.com through the proxy 10.231.77.2:3128");
        // Online the proxy carries the request and the log says so.
        gate.set_offline(false);
        let admitted = gate.admit_with("https://api.openai.com/v1", "chat", &proxy_env).unwrap();
        assert_eq!(admitted.route().proxy.as_deref(), Some("10.231.77.2:3128"));
        gate.finish(admitted, 1, 1);
        assert_eq!(gate.log().last().unwrap().via.as_deref(), Some("10.231.77.2:3128"));
    }
}
