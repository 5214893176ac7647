//! Reading a calendar source into iCalendar texts: a file, an address (GET,
//! redirects followed by hand so each hop passes the gate), or a CalDAV
//! account (a `calendar-query` REPORT for the window wanted; when the address
//! is an account's home rather than one calendar, a PROPFIND lists the
//! calendars in it and each is asked). Every request goes through the
//! outbound gate with the purpose "read your calendar"; bodies are capped.

use std::io::Read;
use std::time::Duration;

use quick_xml::Reader;
use quick_xml::events::Event as Xml;

use super::Source;
use crate::net::OutboundGate;

/// The most a calendar may weigh, as a file or an answer.
const MAX_BYTES: u64 = 16 << 20;
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Redirects followed, each admitted by the gate.
const MAX_REDIRECTS: usize = 3;
/// Calendars read from one CalDAV home.
const MAX_CALENDARS: usize = 20;
/// What one CalDAV account may answer in all, and how long its reading may take.
const SOURCE_BYTES: u64 = 32 << 20;
const SOURCE_DEADLINE: Duration = Duration::from_secs(120);
const PURPOSE: &str = "read your calendar";

/// The iCalendar texts of `source` (one for a file or an address, one per
/// event for CalDAV), for events overlapping `[from, until)` where the
/// server can filter. `password` is the CalDAV account's, from the secret store.
pub fn read(source: &Source, password: Option<&str>, gate: &OutboundGate, (from, until): (i64, i64)) -> Result<Vec<String>, String> {
    match source {
        Source::File(path) => read_file(path).map(|text| vec![text]),
        Source::Url(url) => {
            let (status, body) = request(gate, "GET", url, None, &[])?;
            match status {
                200..=299 => Ok(vec![body]),
                401 | 403 => Err(format!("{} refused the address (HTTP {status}): it may have been reset", super::Source::Url(url.clone()).label())),
                _ => Err(format!("{} answered HTTP {status}", super::Source::Url(url.clone()).label())),
            }
        }
        Source::CalDav { url, user } => {
            let password = password.ok_or_else(|| format!("no password for {user}: store it in Settings → Memory → Calendar or with `cowork secrets set {}`", source.secret_name().unwrap_or_default()))?;
            caldav(gate, url, user, password, (from, until))
        }
    }
}

fn read_file(path: &std::path::Path) -> Result<String, String> {
    let path = super::expand_home(path);
    let file = std::fs::File::open(&path).map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(format!("{} is not a file", path.display()));
    }
    // Read once, through the cap: a file that grows meanwhile is still cut at it.
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes).map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("{} is larger than {} MB", path.display(), MAX_BYTES >> 20));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The account a CalDAV request speaks for: its user and password, and the
/// origin (scheme, host, port) they were given for.
#[derive(Clone, Copy)]
struct Account<'a> {
    user: &'a str,
    password: &'a str,
    origin: &'a str,
}

/// Whether an address may be asked at all: https anywhere, plain http only
/// on loopback; and loopback only when the request began there (a server
/// elsewhere cannot send cowork to this computer's own services).
fn hop_allowed(url: &str, began_on_loopback: bool) -> Result<(), String> {
    let loopback = crate::net::host_of_url(url).is_some_and(|h| crate::net::is_loopback(&h));
    match (url.starts_with("https://"), loopback) {
        (_, true) if !began_on_loopback => Err(format!("{} sends cowork to this computer's own services: not followed", host_label(url))),
        (true, _) | (false, true) => Ok(()),
        (false, false) => Err(format!("{} is plain http: a calendar is read over https only", host_label(url))),
    }
}

/// One request through the gate, redirects followed by hand (each hop
/// normalised, allowed and admitted again; the password goes only to the
/// account's own origin). Returns the final status and body. Errors name
/// hosts, never whole addresses (an address can be the calendar's key).
fn request(gate: &OutboundGate, method: &str, url: &str, account: Option<Account<'_>>, extra: &[(&str, &str, &str)]) -> Result<(u16, String), String> {
    use base64::Engine;
    let began_on_loopback = crate::net::host_of_url(url).is_some_and(|h| crate::net::is_loopback(&h));
    let mut url = crate::net::web_url(url).map_err(|_| format!("{} is not a usable address", host_label(url)))?;
    for _ in 0..=MAX_REDIRECTS {
        hop_allowed(&url, began_on_loopback)?;
        let admission = gate.admit(&url, PURPOSE).map_err(|err| match err {
            crate::net::GateError::Offline { .. } => format!("offline mode: {} is not reachable (only this computer is)", host_label(&url)),
            _ => format!("{} cannot be reached: {}", host_label(&url), match err {
                crate::net::GateError::BadProxy(_) => "the proxy named in the environment is not usable",
                _ => "not a usable address",
            }),
        })?;
        let agent = admission.agent(|config| config.timeout_global(Some(TIMEOUT)).http_status_as_error(false).max_redirects(0).allow_non_standard_methods(true).user_agent("cowork"));
        let method_value = ureq::http::Method::from_bytes(method.as_bytes()).map_err(|err| err.to_string())?;
        let mut builder = ureq::http::Request::builder().method(method_value).uri(&url);
        if let Some(account) = account.filter(|a| origin(&url).as_deref() == Some(a.origin)) {
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", account.user, account.password));
            builder = builder.header("Authorization", format!("Basic {token}"));
        }
        let mut body = String::new();
        for (name, value, content) in extra {
            builder = builder.header(*name, *value);
            if !content.is_empty() {
                body = (*content).to_owned();
            }
        }
        let request = builder.body(body.clone()).map_err(|_| format!("{} is not a usable address", host_label(&url)))?;
        let answered = agent.run(request);
        let response = match answered {
            Ok(response) => response,
            Err(err) => {
                gate.finish(admission, body.len() as u64, 0);
                // ureq's words may quote the address: only its host is said.
                let said = err.to_string().replace(url.as_str(), &host_label(&url));
                return Err(format!("{}: {said}", host_label(&url)));
            }
        };
        let status = response.status().as_u16();
        let location = response.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let mut text = Vec::new();
        let read = response.into_body().into_reader().take(MAX_BYTES + 1).read_to_end(&mut text);
        gate.finish(admission, body.len() as u64, text.len() as u64);
        read.map_err(|err| format!("the answer from {} broke off: {err}", host_label(&url)))?;
        if text.len() as u64 > MAX_BYTES {
            return Err(format!("{} answered more than {} MB", host_label(&url), MAX_BYTES >> 20));
        }
        if (300..400).contains(&status)
            && let Some(location) = location
        {
            let next = crate::net::resolve_location(&url, &location).ok_or_else(|| format!("{} redirects to an address that cannot be read", host_label(&url)))?;
            url = crate::net::web_url(&next).map_err(|_| format!("{} redirects to an address that cannot be read", host_label(&url)))?;
            continue;
        }
        return Ok((status, String::from_utf8_lossy(&text).into_owned()));
    }
    Err(format!("{} redirects more than {MAX_REDIRECTS} times", host_label(&url)))
}

/// `https://host:port` of an address (lowercase; the default port spelled out).
fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?.rsplit('@').next()?.to_ascii_lowercase();
    let scheme = scheme.to_ascii_lowercase();
    let default = if scheme == "https" { ":443" } else { ":80" };
    let with_port = if authority.rsplit_once(':').is_some_and(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()) && !authority.ends_with(']')) { authority } else { format!("{authority}{default}") };
    Some(format!("{scheme}://{with_port}"))
}

fn host_label(url: &str) -> String {
    crate::net::host_of_url(url).unwrap_or_else(|| "the calendar's server".into())
}

/// `20261201T000000Z`.
fn caldav_time(millis: i64) -> String {
    jiff::Timestamp::from_millisecond(millis).map(|t| t.strftime("%Y%m%dT%H%M%SZ").to_string()).unwrap_or_else(|_| "19700101T000000Z".into())
}

fn calendar_query(from: i64, until: i64) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?>
<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">
  <D:prop><C:calendar-data/></D:prop>
  <C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT">
    <C:time-range start="{}" end="{}"/>
  </C:comp-filter></C:comp-filter></C:filter>
</C:calendar-query>"#,
        caldav_time(from),
        caldav_time(until)
    )
}

const LIST_CALENDARS: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/></D:prop></D:propfind>"#;

fn caldav(gate: &OutboundGate, url: &str, user: &str, password: &str, (from, until): (i64, i64)) -> Result<Vec<String>, String> {
    let query = calendar_query(from, until);
    let home = origin(url).ok_or_else(|| format!("{} is not a usable address", host_label(url)))?;
    let account = Account { user, password, origin: &home };
    let started = std::time::Instant::now();
    let mut weight = 0usize;
    let report = |at: &str, weight: &mut usize| -> Result<Option<Vec<String>>, String> {
        if started.elapsed() > SOURCE_DEADLINE {
            return Err(format!("{user}@{} took longer than {} s: read again later", host_label(url), SOURCE_DEADLINE.as_secs()));
        }
        let (status, body) = request(gate, "REPORT", at, Some(account), &[("Depth", "1", ""), ("Content-Type", "application/xml; charset=utf-8", &query)])?;
        *weight += body.len();
        if *weight as u64 > SOURCE_BYTES {
            return Err(format!("{user}@{} answered more than {} MB in all", host_label(url), SOURCE_BYTES >> 20));
        }
        match status {
            207 => parse_multistatus(&body).map(|m| Some(m.calendar_data)),
            401 => Err(format!("{user}@{} refused the password (HTTP 401)", host_label(at))),
            403 | 404 | 405 | 415 | 501 => Ok(None),
            _ => Err(format!("{} answered HTTP {status} to the calendar query", host_label(at))),
        }
    };
    // One calendar's address answers the query; an account's home holds calendars.
    if let Some(data) = report(url, &mut weight)?
        && !data.is_empty()
    {
        return Ok(data);
    }
    let (status, body) = request(gate, "PROPFIND", url, Some(account), &[("Depth", "1", ""), ("Content-Type", "application/xml; charset=utf-8", LIST_CALENDARS)])?;
    match status {
        207 => {}
        401 => return Err(format!("{user}@{} refused the password (HTTP 401)", host_label(url))),
        _ => return Err(format!("{} answered HTTP {status}: not a CalDAV calendar or account", host_label(url))),
    }
    let listed = parse_multistatus(&body)?;
    let mut texts = Vec::new();
    for href in listed.calendars.iter().take(MAX_CALENDARS) {
        let Some(at) = crate::net::resolve_location(url, href) else { continue };
        // Only the account's own server: a listed calendar elsewhere would get its password.
        if origin(&at).as_deref() != Some(home.as_str()) {
            tracing::warn!(host = %host_label(&at), "a CalDAV account listed a calendar on another server: not read");
            continue;
        }
        if at.trim_end_matches('/') == url.trim_end_matches('/') {
            continue;
        }
        texts.extend(report(&at, &mut weight)?.unwrap_or_default());
    }
    Ok(texts)
}

/// What a WebDAV multistatus answer holds for cowork.
#[derive(Debug, Default, PartialEq)]
struct Multistatus {
    /// Each response's `calendar-data` (an iCalendar text).
    calendar_data: Vec<String>,
    /// The hrefs of responses whose resourcetype includes a CalDAV `calendar`.
    calendars: Vec<String>,
}

/// Reads a 207 answer by local names (servers differ in prefixes).
fn parse_multistatus(xml: &str) -> Result<Multistatus, String> {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().trim_text(false);
    let mut out = Multistatus::default();
    let mut path: Vec<Vec<u8>> = Vec::new();
    let (mut href, mut data, mut is_calendar) = (String::new(), String::new(), false);
    loop {
        let event = reader.read_event().map_err(|e| format!("the server's answer is not XML (at byte {}): {e}", reader.buffer_position()))?;
        let inside = |path: &[Vec<u8>], name: &[u8]| path.last().is_some_and(|n| n == name);
        match event {
            Xml::Eof => break,
            Xml::Start(e) => {
                let name = e.local_name().as_ref().to_vec();
                if name == b"response" {
                    (href, data, is_calendar) = (String::new(), String::new(), false);
                }
                path.push(name);
            }
            Xml::Empty(e) if e.local_name().as_ref() == b"calendar" && path.iter().any(|n| n == b"resourcetype") => is_calendar = true,
            Xml::End(e) => {
                if e.local_name().as_ref() == b"response" {
                    if !data.trim().is_empty() {
                        out.calendar_data.push(std::mem::take(&mut data));
                    }
                    if is_calendar && !href.trim().is_empty() {
                        out.calendars.push(href.trim().to_owned());
                    }
                }
                path.pop();
            }
            Xml::Text(t) => {
                let text = t.decode().map_err(|e| format!("text that is not valid: {e}"))?;
                if inside(&path, b"href") {
                    href.push_str(&text);
                } else if inside(&path, b"calendar-data") {
                    data.push_str(&text);
                }
            }
            Xml::CData(t) if inside(&path, b"calendar-data") => data.push_str(&String::from_utf8_lossy(t.as_ref())),
            Xml::GeneralRef(r) => {
                let text = crate::documents::xml::resolve_reference(&r);
                if inside(&path, b"href") {
                    href.push_str(&text);
                } else if inside(&path, b"calendar-data") {
                    data.push_str(&text);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multistatus_gives_calendar_data_and_calendars_whatever_the_prefixes() {
        let xml = r#"<?xml version="1.0"?>
<multistatus xmlns="DAV:" xmlns:CAL="urn:ietf:params:xml:ns:caldav">
 <response><href>/alice/</href><propstat><prop><resourcetype><collection/></resourcetype></prop></propstat></response>
 <response><href>/alice/work/</href><propstat><prop><resourcetype><collection/><CAL:calendar/></resourcetype></prop></propstat></response>
 <response><href>/alice/work/a.ics</href><propstat><prop><CAL:calendar-data>BEGIN:VCALENDAR&#13;
SUMMARY:Q3 review &amp; budget&#13;
END:VCALENDAR</CAL:calendar-data></prop></propstat></response>
 <response><href>/alice/work/b.ics</href><propstat><prop><CAL:calendar-data><![CDATA[BEGIN:VCALENDAR
END:VCALENDAR]]></CAL:calendar-data></prop></propstat></response>
</multistatus>"#;
        let parsed = parse_multistatus(xml).unwrap();
        assert_eq!(parsed.calendars, vec!["/alice/work/".to_owned()]);
        assert_eq!(parsed.calendar_data.len(), 2);
        assert!(parsed.calendar_data[0].contains("SUMMARY:Q3 review & budget\r\n"), "{:?}", parsed.calendar_data[0]);
        assert!(parse_multistatus("<multistatus><response>").is_err() || parse_multistatus("<multistatus><response>").unwrap().calendar_data.is_empty());
        assert!(parse_multistatus("<a></b>").is_err());
    }

    #[test]
    fn queries_ask_for_the_window_in_utc_and_locations_resolve_against_their_origin() {
        let query = calendar_query(1_764_547_200_000, 1_764_633_600_000);
        assert!(query.contains(r#"start="20251201T000000Z" end="20251202T000000Z""#), "{query}");
        assert_eq!(crate::net::resolve_location("https://dav.example.org/alice/", "/alice/work/").as_deref(), Some("https://dav.example.org/alice/work/"));
        assert_eq!(crate::net::resolve_location("https://a.example/x", "https://b.example/y").as_deref(), Some("https://b.example/y"));
        assert_eq!(crate::net::resolve_location("https://a.example/x", "relative"), None);
    }

    /// A loopback server answering every request with `answer`; sends each request's head to `heads`.
    fn server(answer: String, heads: std::sync::mpsc::Sender<String>) -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::Builder::new()
            .name("test-dav".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        head.push_str(&line);
                    }
                    let length = head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0))).unwrap_or(0);
                    let mut body = vec![0; length];
                    let _ = std::io::Read::read_exact(&mut reader, &mut body);
                    let _ = heads.send(head);
                    let mut stream = stream;
                    let _ = std::io::Write::write_all(&mut stream, answer.as_bytes());
                }
            })
            .unwrap();
        port
    }

    #[test]
    fn a_password_never_follows_a_redirect_to_another_port_or_host() {
        let (heads_tx, heads) = std::sync::mpsc::channel();
        let elsewhere = server("HTTP/1.1 207 Multi-Status\r\nContent-Length: 22\r\nConnection: close\r\n\r\n<multistatus xmlns=\"DAV:\"/>".replace("22", &"<multistatus xmlns=\"DAV:\"/>".len().to_string()), heads_tx.clone());
        let first = server(format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{elsewhere}/alice/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"), heads_tx);
        let gate = OutboundGate::new(true);
        let source = Source::CalDav { url: format!("http://127.0.0.1:{first}/alice/"), user: "alice".into() };
        let _ = read(&source, Some("s3cret"), &gate, (0, 1));
        let seen: Vec<String> = heads.try_iter().collect();
        let to = |port: u16| -> Vec<String> { seen.iter().filter(|h| h.contains(&format!("host: 127.0.0.1:{port}\r\n"))).map(|h| h.to_ascii_lowercase()).collect() };
        let (own, other) = (to(first), to(elsewhere));
        assert!(!own.is_empty() && !other.is_empty(), "the redirect was followed: {seen:?}");
        assert!(own.iter().all(|h| h.contains("authorization: basic")), "the account's own server gets it: {seen:?}");
        assert!(other.iter().all(|h| !h.contains("authorization")), "another port never does: {seen:?}");
        assert_eq!(origin("https://Dav.Example.org/a"), origin("https://dav.example.org:443/b"));
        assert_ne!(origin("http://127.0.0.1:5232/"), origin("http://127.0.0.1:5233/"));
        assert_ne!(origin("https://a.example/"), origin("https://a.example.evil/"));
        assert_ne!(origin("http://a.example/"), origin("https://a.example/"));
    }

    #[test]
    fn a_calendar_listed_on_another_server_is_not_read_and_gets_no_password() {
        let (heads_tx, heads) = std::sync::mpsc::channel();
        let elsewhere = server("HTTP/1.1 207 Multi-Status\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into(), heads_tx.clone());
        let listing = format!(
            "<multistatus xmlns=\"DAV:\" xmlns:C=\"urn:ietf:params:xml:ns:caldav\"><response><href>http://127.0.0.1:{elsewhere}/cal/</href><propstat><prop><resourcetype><collection/><C:calendar/></resourcetype></prop></propstat></response></multistatus>"
        );
        let home = server(format!("HTTP/1.1 207 Multi-Status\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{listing}", listing.len()), heads_tx);
        let gate = OutboundGate::new(true);
        let source = Source::CalDav { url: format!("http://127.0.0.1:{home}/alice/"), user: "alice".into() };
        let texts = read(&source, Some("s3cret"), &gate, (0, 1)).unwrap();
        assert!(texts.is_empty());
        let seen: Vec<String> = heads.try_iter().collect();
        assert!(seen.iter().all(|h| h.contains(&format!("host: 127.0.0.1:{home}\r\n"))), "only the account's server was asked: {seen:?}");
    }

    #[test]
    fn every_hop_is_https_or_loopback_and_only_loopback_leads_to_loopback() {
        assert!(hop_allowed("https://dav.example.org/a/", false).is_ok());
        assert!(hop_allowed("http://127.0.0.1:5232/a/", true).is_ok());
        assert!(hop_allowed("https://127.0.0.1/a/", true).is_ok());
        for (url, began) in [("http://dav.example.org/a/", false), ("http://dav.example.org/a/", true), ("http://127.0.0.1:631/", false), ("https://localhost/admin", false), ("http://[::1]:8080/", false)] {
            let err = hop_allowed(url, began).unwrap_err();
            assert!(!err.contains("/a/") && !err.contains("admin"), "a host, never the address: {err}");
        }
    }

    #[test]
    fn a_file_is_read_and_a_missing_folder_or_huge_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("team.ics");
        std::fs::write(&file, "BEGIN:VCALENDAR\nEND:VCALENDAR\n").unwrap();
        let gate = OutboundGate::new(true);
        assert_eq!(read(&Source::File(file.clone()), None, &gate, (0, 1)).unwrap().len(), 1);
        assert!(read(&Source::File(dir.path().join("none.ics")), None, &gate, (0, 1)).unwrap_err().contains("cannot read"));
        assert!(read(&Source::File(dir.path().to_path_buf()), None, &gate, (0, 1)).unwrap_err().contains("is not a file"));
        let big = std::fs::File::create(dir.path().join("big.ics")).unwrap();
        big.set_len(MAX_BYTES + 1).unwrap();
        assert!(read(&Source::File(dir.path().join("big.ics")), None, &gate, (0, 1)).unwrap_err().contains("larger than"));
        // Offline, an address elsewhere is refused by the gate and the log shows it.
        let err = read(&Source::Url("https://calendar.example.org/x.ics".into()), None, &gate, (0, 1)).unwrap_err();
        assert!(err.contains("offline"), "{err}");
        assert!(gate.log().iter().any(|r| r.purpose == PURPOSE && r.refused.is_some()));
        let err = read(&Source::CalDav { url: "https://dav.example.org/a/".into(), user: "a".into() }, None, &gate, (0, 1)).unwrap_err();
        assert!(err.contains("calendar:a@dav.example.org"), "{err}");
    }
}
