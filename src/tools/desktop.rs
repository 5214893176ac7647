//! The desktop family: `clipboard_read` and `list_windows` (safe, but what
//! they return is captured text), `clipboard_write`, `focus_window` and
//! `open` (sensitive), `notify` (safe: a desktop notification through the
//! freedesktop Notifications service on the session bus).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::LazyLock;

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::ToolOutput;
use crate::capture::x11::X11Desktop;

pub const TOOLS: [&str; 6] = ["clipboard_read", "clipboard_write", "list_windows", "focus_window", "open", "notify"];

pub fn schema(tool: &str) -> Option<Value> {
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    Some(match tool {
        "clipboard_read" | "list_windows" => object(json!({}), &[]),
        "clipboard_write" => object(json!({"text": {"type": "string", "maxLength": 1_000_000}}), &["text"]),
        "focus_window" => object(json!({"window_id": {"type": "integer", "minimum": 1}}), &["window_id"]),
        "open" => object(json!({"target": {"type": "string", "minLength": 1}}), &["target"]),
        "notify" => object(json!({"title": {"type": "string", "minLength": 1, "maxLength": 200}, "body": {"type": "string", "maxLength": 2000}}), &["title"]),
        _ => return None,
    })
}

/// The clipboard cowork wrote last. On X11 a selection is served by the
/// process that owns it, so the `arboard::Clipboard` that set it has to live
/// as long as the text should stay pasteable: one per process, here.
static CLIPBOARD: LazyLock<Mutex<Option<arboard::Clipboard>>> = LazyLock::new(|| Mutex::new(None));

fn with_clipboard<T>(f: impl FnOnce(&mut arboard::Clipboard) -> Result<T, arboard::Error>) -> Result<T, String> {
    let mut slot = CLIPBOARD.lock();
    if slot.is_none() {
        *slot = Some(arboard::Clipboard::new().map_err(|err| format!("no clipboard: {err}"))?);
    }
    let clipboard = slot.as_mut().expect("set above");
    f(clipboard).map_err(|err| err.to_string())
}

/// `open`'s target: a URL as it is, a path resolved (for the policy and the data-directory check).
pub enum OpenTarget {
    Url(String),
    Path(PathBuf),
}

pub fn open_target(args: &Value, files: &super::files::FilesEnv) -> Result<OpenTarget, String> {
    let target = args.get("target").and_then(Value::as_str).ok_or("open needs a \"target\"")?;
    if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
        return Ok(OpenTarget::Url(target.to_owned()));
    }
    super::files::resolve(target, files).map(OpenTarget::Path)
}

/// `gate`: opening a web page sends the browser out, so offline mode refuses
/// it and the outbound log shows it, as for `fetch_url`.
pub fn run(tool: &str, args: &Value, files: &super::files::FilesEnv, gate: &crate::net::OutboundGate) -> ToolOutput {
    let result = match tool {
        "clipboard_read" => with_clipboard(|c| c.get_text()).map(|text| if text.is_empty() { "(the clipboard is empty)".to_owned() } else { text }),
        "clipboard_write" => {
            let text = args.get("text").and_then(Value::as_str).unwrap_or_default().to_owned();
            let chars = text.chars().count();
            crate::capture::clipboard::mark_written_by_cowork(&text);
            with_clipboard(|c| c.set_text(text)).map(|()| format!("copied {chars} characters to the clipboard"))
        }
        "list_windows" => X11Desktop::connect(None).and_then(|desktop| desktop.list_windows()).map_err(|e| e.to_string()).map(|windows| {
            if windows.is_empty() {
                return "(no windows are open)".to_owned();
            }
            windows.iter().map(|w| format!("window {}: {} — {}", w.window_id, w.app, w.title)).collect::<Vec<_>>().join("\n")
        }),
        "focus_window" => {
            let id = args.get("window_id").and_then(Value::as_u64).unwrap_or_default() as u32;
            X11Desktop::connect(None).and_then(|desktop| desktop.activate(id)).map_err(|e| e.to_string()).map(|()| format!("asked the window manager to focus window {id}"))
        }
        "open" => open_target(args, files).and_then(|target| {
            let shown = match &target {
                OpenTarget::Url(url) => url.clone(),
                OpenTarget::Path(path) => path.display().to_string(),
            };
            let purpose = matches!(&target, OpenTarget::Url(url) if url.starts_with("http")).then_some("open a page in the browser for the agent");
            xdg_open(&shown, purpose, gate).map(|()| format!("opened {shown}"))
        }),
        "notify" => {
            let title = args.get("title").and_then(Value::as_str).unwrap_or_default();
            let body = args.get("body").and_then(Value::as_str).unwrap_or_default();
            notify(title, body).map(|id| format!("shown as notification {id}"))
        }
        other => Err(format!("{other} is not a desktop tool")),
    };
    match result {
        Ok(text) => ToolOutput::ok(text),
        Err(err) => ToolOutput::error(err),
    }
}

/// A desktop notification through `org.freedesktop.Notifications`; returns its id.
pub fn notify(title: &str, body: &str) -> Result<u32, String> {
    let conn = zbus::blocking::Connection::session().map_err(|err| format!("no session bus for notifications: {err}"))?;
    let hints: std::collections::HashMap<&str, zbus::zvariant::Value<'_>> = std::collections::HashMap::new();
    let reply = conn
        .call_method(
            Some("org.freedesktop.Notifications"),
            "/org/freedesktop/Notifications",
            Some("org.freedesktop.Notifications"),
            "Notify",
            &("cowork", 0u32, "", title, body, Vec::<&str>::new(), hints, -1i32),
        )
        .map_err(|err| format!("no notification service answered: {err}"))?;
    reply.body().deserialize::<u32>().map_err(|err| format!("the notification service answered oddly: {err}"))
}

/// Opens a URL or a file with the desktop's handler (`xdg-open`). A web
/// URL passes the network gate first (`purpose` is what its log says).
pub fn xdg_open(target: &str, purpose: Option<&str>, gate: &crate::net::OutboundGate) -> Result<(), String> {
    if let Some(purpose) = purpose {
        let admission = gate.admit(target, purpose).map_err(|err| err.to_string())?;
        gate.finish(admission, 0, 0);
    }
    Command::new("xdg-open")
        .arg(target)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| format!("cannot run xdg-open: {err}"))
        .map(|mut child| {
            // Reap it off this thread: xdg-open returns once the app has started.
            let _ = std::thread::Builder::new().name("xdg-open-reaper".into()).spawn(move || child.wait());
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_mode_refuses_opening_a_web_page_and_the_log_shows_it() {
        let dir = tempfile::tempdir().unwrap();
        let files = super::super::files::FilesEnv { cwd: dir.path().into(), home: dir.path().into(), data_dir: dir.path().join("data") };
        let gate = crate::net::OutboundGate::new(true);
        let out = run("open", &json!({"target": "https://example.com/?d=secret"}), &files, &gate);
        assert!(out.is_error && out.content.contains("offline"), "{out:?}");
        assert!(gate.log().last().is_some_and(|r| r.host == "example.com" && r.refused.is_some()));
    }
}
