//! The web family: `fetch_url` reads a page as text, through the outbound
//! gate (offline mode refuses anything but loopback, and the outbound log
//! shows every fetch). Sensitive by default: a URL can carry data out.
//! What a page says is data (`Origin::Web`), never instructions. HTML becomes
//! readable text; the request runs on its own thread, so Stop abandons it at
//! once.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::ToolOutput;
use crate::net::OutboundGate;

pub const NAME: &str = "fetch_url";
/// Bytes read from a response at most.
const BODY_LIMIT: u64 = 5 << 20;
const TIMEOUT: Duration = Duration::from_secs(20);

pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"url": {"type": "string", "minLength": 8, "maxLength": 4000}},
        "required": ["url"],
        "additionalProperties": false
    })
}

/// Fetches `url` and returns its readable text (HTML without markup, scripts
/// and styles; plain text and JSON as they are).
pub fn run(args: &Value, gate: &OutboundGate, stop: &AtomicBool) -> ToolOutput {
    let Some(url) = args.get("url").and_then(Value::as_str) else { return ToolOutput::error("fetch_url needs a \"url\"") };
    fetch(url, "fetch a page for the agent", gate, stop)
}

/// Fetches `url` as readable text; `purpose` is what the outbound log says.
pub fn fetch(url: &str, purpose: &str, gate: &OutboundGate, stop: &AtomicBool) -> ToolOutput {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return ToolOutput::error(format!("only http and https URLs can be fetched, not {url}"));
    }
    // The URL as the gate reads it (WHATWG) is the one requested, so the two cannot disagree on the host.
    let target = match crate::net::web_url(url) {
        Ok(target) => target,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    let admission = match gate.admit(&target, purpose) {
        Ok(admission) => admission,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    // The request runs on its own thread so that Stop returns at once; an
    // abandoned request ends by its own timeout and its bytes are not used.
    let (done, answer) = crossbeam_channel::bounded(1);
    let agent = admission.agent(|config| config.timeout_global(Some(TIMEOUT)).http_status_as_error(false).max_redirects(0).user_agent("cowork"));
    let spawned = std::thread::Builder::new().name("fetch".into()).spawn(move || {
        let _ = done.send(request(&agent, &target));
    });
    if let Err(err) = spawned {
        gate.finish(admission, 0, 0);
        return ToolOutput::error(format!("could not fetch {url}: {err}"));
    }
    let fetched = loop {
        if stop.load(Ordering::SeqCst) {
            gate.finish(admission, 0, 0);
            return ToolOutput::error("stopped");
        }
        match answer.recv_timeout(Duration::from_millis(50)) {
            Ok(fetched) => break fetched,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break Err(format!("could not fetch {url}: the request ended without an answer")),
        }
    };
    let Fetched { status, location, content_type, body, read } = match fetched {
        Ok(fetched) => fetched,
        Err(err) => {
            gate.finish(admission, 0, 0);
            return ToolOutput::error(err);
        }
    };
    gate.finish(admission, 0, body.len() as u64);
    if (300..400).contains(&status) {
        return match crate::net::resolve_location(url, &location) {
            Some(next) => ToolOutput::error(format!("{url} redirects (HTTP {status}) to {next}; fetch that URL to follow it")),
            None => ToolOutput::error(format!("{url} answered HTTP {status} without a usable Location")),
        };
    }
    if let Err(err) = read {
        return ToolOutput::error(format!("the response from {url} broke off: {err}"));
    }
    let text = String::from_utf8_lossy(&body);
    let readable = if content_type.contains("html") || (content_type.is_empty() && text.trim_start().starts_with('<')) { html_to_text(&text) } else { text.into_owned() };
    if !(200..300).contains(&status) {
        let start: String = readable.chars().take(500).collect();
        return ToolOutput::error(format!("{url} answered HTTP {status}: {start}"));
    }
    ToolOutput::ok(readable)
}

/// What the fetch thread brings back.
struct Fetched {
    status: u16,
    location: String,
    content_type: String,
    body: Vec<u8>,
    /// How reading the body ended (an error: it broke off).
    read: Result<(), String>,
}

/// One GET, no redirect followed (the gate admitted this URL only, so a
/// redirect goes back to the model as a new URL to fetch: gate and policy again).
fn request(agent: &ureq::Agent, url: &str) -> Result<Fetched, String> {
    let response = agent.get(url).call().map_err(|err| format!("could not fetch {url}: {err}"))?;
    let status = response.status().as_u16();
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let (location, content_type) = (header("location"), header("content-type").to_ascii_lowercase());
    let mut body = Vec::new();
    let read = if (300..400).contains(&status) {
        Ok(())
    } else {
        response.into_body().into_reader().take(BODY_LIMIT).read_to_end(&mut body).map(|_| ()).map_err(|err| err.to_string())
    };
    Ok(Fetched { status, location, content_type, body, read })
}


/// Readable text from HTML: the title, then the text of the body with
/// blocks on their own lines; scripts, styles and other non-text elements
/// dropped, entities decoded, runs of blank space collapsed.
pub fn html_to_text(html: &str) -> String {
    const SKIPPED: [&str; 7] = ["script", "style", "noscript", "svg", "template", "head", "iframe"];
    const BLOCKS: [&str; 22] = [
        "p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table", "section", "article", "header", "footer", "pre", "blockquote", "hr", "title",
    ];
    let lower = html.to_ascii_lowercase();
    let title = lower.find("<title").and_then(|start| {
        let open_end = start + lower[start..].find('>')? + 1;
        let close = open_end + lower[open_end..].find("</title")?;
        Some(decode_entities(html[open_end..close].trim()))
    });
    let mut out = String::new();
    let mut i = 0;
    let bytes = html.as_bytes();
    while i < bytes.len() {
        if bytes[i] == b'<' {
            if lower[i..].starts_with("<!--") {
                i = lower[i..].find("-->").map_or(bytes.len(), |end| i + end + 3);
                continue;
            }
            let Some(end) = lower[i..].find('>').map(|e| i + e) else { break };
            let tag = lower[i + 1..end].trim_start_matches('/');
            let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            let closing = lower[i + 1..].starts_with('/');
            if !closing && SKIPPED.contains(&name.as_str()) {
                let close = format!("</{name}");
                i = lower[end..].find(&close).map_or(bytes.len(), |c| end + c);
                i = lower[i..].find('>').map_or(bytes.len(), |e| i + e + 1);
                continue;
            }
            if BLOCKS.contains(&name.as_str()) {
                out.push('\n');
            }
            i = end + 1;
        } else {
            let next = lower[i..].find('<').map_or(bytes.len(), |n| i + n);
            out.push_str(&decode_entities(&html[i..next]));
            i = next;
        }
    }
    let mut lines: Vec<String> = Vec::new();
    for line in out.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if !line.is_empty() {
            lines.push(line);
        }
    }
    let body = lines.join("\n");
    match title {
        Some(title) if !title.is_empty() && !body.starts_with(&title) => format!("# {title}\n{body}"),
        _ => body,
    }
}

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let Some(semi) = after.find(';').filter(|&s| s <= 10) else {
            out.push('&');
            rest = after;
            continue;
        };
        let entity = &after[..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" | "#39" => Some('\''),
            "nbsp" => Some(' '),
            _ if entity.starts_with("#x") || entity.starts_with("#X") => u32::from_str_radix(&entity[2..], 16).ok().and_then(char::from_u32),
            _ if entity.starts_with('#') => entity[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &after[semi + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_readable_text_without_scripts_or_styles() {
        let html = "<html><head><title>Notes &amp; plans</title><style>p{color:red}</style></head>\
            <body><script>steal()</script><h1>Plan</h1><p>Ship   the <b>agent</b>&nbsp;today.</p><!-- hidden --><ul><li>one</li><li>two &#x263A;</li></ul></body></html>";
        assert_eq!(html_to_text(html), "# Notes & plans\nPlan\nShip the agent today.\none\ntwo ☺");
    }

    #[test]
    fn offline_mode_refuses_a_page_on_the_internet_and_other_schemes_are_refused() {
        let gate = OutboundGate::new(true);
        let stop = AtomicBool::new(false);
        let out = run(&json!({"url": "https://example.com/"}), &gate, &stop);
        assert!(out.is_error && out.content.contains("offline"), "{out:?}");
        assert!(gate.log().last().unwrap().refused.is_some());
        let out = run(&json!({"url": "file:///etc/passwd"}), &gate, &stop);
        assert!(out.is_error && out.content.contains("only http"), "{out:?}");
    }

    #[test]
    fn a_redirect_is_not_followed_past_the_gate_but_named_for_the_model() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            stream.write_all(b"HTTP/1.1 302 Found\r\nLocation: https://example.com/exfiltrate?d=secret\r\nContent-Length: 0\r\n\r\n").unwrap();
        });
        // Offline: loopback is admitted, the internet is not.
        let gate = OutboundGate::new(true);
        let out = run(&json!({"url": format!("http://127.0.0.1:{port}/start")}), &gate, &AtomicBool::new(false));
        server.join().unwrap();
        assert!(out.is_error && out.content.contains("redirects (HTTP 302) to https://example.com/exfiltrate"), "{out:?}");
        assert!(gate.log().iter().all(|r| r.host == "127.0.0.1"), "nothing reached example.com: {:?}", gate.log());
        assert_eq!(crate::net::resolve_location("http://h:1/a/b", "/c"), Some("http://h:1/c".into()));
    }

    #[test]
    fn stop_abandons_a_fetch_that_hangs() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // Accepts and never answers.
        let _server = std::thread::spawn(move || {
            let held: Vec<_> = listener.incoming().take(1).collect();
            std::thread::sleep(Duration::from_secs(30));
            drop(held);
        });
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stopper = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            stopper.store(true, Ordering::SeqCst);
        });
        let gate = OutboundGate::new(true);
        let started = std::time::Instant::now();
        let out = run(&json!({"url": format!("http://127.0.0.1:{port}/slow")}), &gate, &stop);
        assert!(out.is_error && out.content == "stopped", "{out:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "Stop ended the fetch at once: {:?}", started.elapsed());
        assert_eq!(gate.log().len(), 1, "the abandoned fetch is in the outbound log");
    }
}
