//! The one gate every outbound HTTP request goes through. In offline mode it
//! refuses anything that is not loopback (and says so in the log); in every
//! mode it records time, host, purpose and bytes for Settings → Network.
//!
//! Loopback means a literal loopback address or `localhost`: a name that
//! merely resolves to 127.0.0.1 is refused offline, so the promise does not
//! depend on DNS.

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
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GateError {
    #[error("offline mode: refused a connection to {host} ({purpose}); only loopback is allowed")]
    Offline { host: String, purpose: String },
    #[error("not a usable URL: {0}")]
    BadUrl(String),
}

pub struct OutboundGate {
    offline: AtomicBool,
    log: Mutex<VecDeque<OutboundRecord>>,
}

/// A request the gate let through; report its bytes when it is done.
pub struct Admission {
    host: String,
    purpose: String,
    at_millis: i64,
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

    /// Asks to open a connection to `url` for `purpose`.
    pub fn admit(&self, url: &str, purpose: &str) -> Result<Admission, GateError> {
        let host = host_of_url(url).ok_or_else(|| GateError::BadUrl(url.to_owned()))?;
        let at_millis = crate::ids::now_millis();
        if self.is_offline() && !is_loopback(&host) {
            tracing::warn!(%host, purpose, "offline mode refused an outbound connection");
            self.push(OutboundRecord {
                at_millis,
                host: host.clone(),
                purpose: purpose.to_owned(),
                bytes_out: 0,
                bytes_in: 0,
                refused: Some("offline mode".into()),
            });
            return Err(GateError::Offline { host, purpose: purpose.to_owned() });
        }
        Ok(Admission { host, purpose: purpose.to_owned(), at_millis })
    }

    /// Records what an admitted request sent and received.
    pub fn finish(&self, admission: Admission, bytes_out: u64, bytes_in: u64) {
        tracing::info!(host = %admission.host, purpose = %admission.purpose, bytes_out, bytes_in, "outbound request");
        self.push(OutboundRecord {
            at_millis: admission.at_millis,
            host: admission.host,
            purpose: admission.purpose,
            bytes_out,
            bytes_in,
            refused: None,
        });
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
}
