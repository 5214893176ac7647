//! The desktop family: `clipboard_read` and `list_windows` (safe, but what
//! they return is captured text), `clipboard_write`, `focus_window` and
//! `open` (sensitive), `notify` (safe: a desktop notification through the
//! freedesktop Notifications service on the session bus). `open` hands a
//! path or URL to `xdg-open`, or starts an installed app by its desktop entry
//! (its `Exec` split into argv, without a shell).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::LazyLock;

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::ToolOutput;
use crate::desktop::x11::X11Desktop;

pub const TOOLS: [&str; 7] = ["clipboard_read", "clipboard_write", "list_windows", "focus_window", "open", "notify", "screenshot"];

pub fn schema(tool: &str) -> Option<Value> {
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    Some(match tool {
        "clipboard_read" | "list_windows" => object(json!({}), &[]),
        "clipboard_write" => object(json!({"text": {"type": "string", "maxLength": 1_000_000}}), &["text"]),
        "focus_window" => object(json!({"window_id": {"type": "integer", "minimum": 1}}), &["window_id"]),
        "open" => object(json!({"target": {"type": "string", "minLength": 1}}), &["target"]),
        "notify" => object(json!({"title": {"type": "string", "minLength": 1, "maxLength": 200}, "body": {"type": "string", "maxLength": 2000}}), &["title"]),
        "screenshot" => object(json!({"of": {"type": "string", "enum": ["focused", "window", "screen"]}, "window_id": {"type": "integer", "minimum": 1}}), &[]),
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

/// `open`'s target: a URL as it is, a path resolved (for the policy and the
/// data-directory check), or an installed app by its desktop entry (its
/// command line is what the policy sees).
pub enum OpenTarget {
    Url(String),
    Path(PathBuf),
    App { name: String, argv: Vec<String> },
}

pub fn open_target(args: &Value, files: &super::files::FilesEnv) -> Result<OpenTarget, String> {
    let target = args.get("target").and_then(Value::as_str).ok_or("open needs a \"target\"")?;
    let lower = target.trim_start().to_ascii_lowercase();
    if lower.starts_with("http:") || lower.starts_with("https:") {
        // Read as a browser reads it (WHATWG), and opened as read: the gate and the browser see one host.
        return crate::net::web_url(target).map(OpenTarget::Url).map_err(|err| err.to_string());
    }
    if lower.starts_with("mailto:") {
        return Ok(OpenTarget::Url(target.to_owned()));
    }
    if lower.starts_with("file:") {
        let path = super::own_data::file_url_path(target.trim()).ok_or_else(|| format!("{target} is not a file URL cowork can read"))?;
        return super::files::resolve(&path.to_string_lossy(), files).map(OpenTarget::Path);
    }
    // "app:NAME", or a bare name that is no file here but an installed app.
    let app = target.strip_prefix("app:").map(str::trim);
    let bare = (!target.contains('/') && !files.cwd.join(target).exists()).then_some(target);
    if let Some(name) = app.or(bare) {
        match find_app(name, &application_dirs(&files.home)) {
            Some((name, argv)) => return Ok(OpenTarget::App { name, argv }),
            None if app.is_some() => return Err(format!("no installed app is called {name} (looked for {name}.desktop and its Name in the applications folders)")),
            None => {}
        }
    }
    super::files::resolve(target, files).map(OpenTarget::Path)
}

/// Where desktop entries live: `$XDG_DATA_HOME` (default `~/.local/share`)
/// and `$XDG_DATA_DIRS` (default `/usr/local/share:/usr/share`), each `/applications`.
pub fn application_dirs(home: &std::path::Path) -> Vec<PathBuf> {
    let home = home.to_string_lossy().into_owned();
    crate::desktop::session::xdg_application_dirs(&|key| if key == "HOME" { Some(home.clone()) } else { std::env::var(key).ok() })
}

/// An app by its desktop entry's id (`firefox` for `firefox.desktop`) or its
/// `Name` (any case): the entry's name and its command line, field codes
/// dropped. Hidden entries and ones without `Exec` do not count.
pub fn find_app(wanted: &str, dirs: &[PathBuf]) -> Option<(String, Vec<String>)> {
    let wanted_lower = wanted.to_lowercase();
    let entries = dirs.iter().filter_map(|dir| std::fs::read_dir(dir).ok()).flatten().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "desktop"));
    let mut by_name = None;
    for path in entries {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let Some((name, argv)) = parse_desktop_entry(&text) else { continue };
        let id = path.file_stem().map(|s| s.to_string_lossy().to_lowercase()).unwrap_or_default();
        if id == wanted_lower {
            return Some((name, argv));
        }
        if by_name.is_none() && name.to_lowercase() == wanted_lower {
            by_name = Some((name, argv));
        }
    }
    by_name
}

/// `Name` and `Exec` of a `[Desktop Entry]` (not hidden), `Exec` split into
/// words (double quotes group, `\\` escapes) with its field codes dropped.
fn parse_desktop_entry(text: &str) -> Option<(String, Vec<String>)> {
    let mut in_entry = false;
    let (mut name, mut exec, mut hidden) = (None, None, false);
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_entry = line == "[Desktop Entry]";
            continue;
        }
        if !in_entry {
            continue;
        }
        if let Some(value) = line.strip_prefix("Name=") {
            name.get_or_insert_with(|| value.to_owned());
        } else if let Some(value) = line.strip_prefix("Exec=") {
            exec.get_or_insert_with(|| value.to_owned());
        } else if line == "NoDisplay=true" || line == "Hidden=true" {
            hidden = true;
        }
    }
    let exec = exec?;
    if hidden {
        return None;
    }
    let mut words = Vec::new();
    let (mut word, mut quoted, mut escaped, mut any) = (String::new(), false, false, false);
    for c in exec.chars() {
        match c {
            _ if escaped => {
                word.push(c);
                escaped = false;
            }
            '\\' => escaped = true,
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    let argv: Vec<String> = words
        .into_iter()
        .filter(|w| !(w.len() == 2 && w.starts_with('%') && w != "%%"))
        .map(|w| w.replace("%%", "%"))
        .collect();
    (!argv.is_empty()).then(|| (name.unwrap_or_else(|| argv[0].clone()), argv))
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
        "list_windows" | "focus_window" => window_tool(tool, args),
        "open" => open_target(args, files).and_then(|target| {
            let shown = match &target {
                OpenTarget::Url(url) => url.clone(),
                OpenTarget::Path(path) => path.display().to_string(),
                OpenTarget::App { name, argv } => return launch(argv).map(|()| format!("started {name}")),
            };
            let purpose = matches!(&target, OpenTarget::Url(url) if !url.starts_with("mailto:")).then_some("open a page in the browser for the agent");
            xdg_open(&shown, purpose, gate).map(|()| format!("opened {shown}"))
        }),
        "notify" => {
            let title = args.get("title").and_then(Value::as_str).unwrap_or_default();
            let body = args.get("body").and_then(Value::as_str).unwrap_or_default();
            notify(title, body).map(|id| format!("shown as notification {id}"))
        }
        "screenshot" => Err("a screenshot is taken by the agent for its approval card".into()),
        other => Err(format!("{other} is not a desktop tool")),
    };
    match result {
        Ok(text) => ToolOutput::ok(text),
        Err(err) => ToolOutput::error(err),
    }
}

/// What a `screenshot` call asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shot {
    Focused,
    Window(u32),
    Screen,
}

impl Shot {
    pub fn of(args: &Value) -> Result<Shot, String> {
        let id = args.get("window_id").and_then(Value::as_u64).map(|id| id as u32);
        match (args.get("of").and_then(Value::as_str).unwrap_or(if id.is_some() { "window" } else { "focused" }), id) {
            ("focused", _) => Ok(Shot::Focused),
            ("window", Some(id)) => Ok(Shot::Window(id)),
            ("window", None) => Err("a screenshot of a window needs its window_id (list_windows gives them)".into()),
            ("screen", _) => Ok(Shot::Screen),
            (other, _) => Err(format!("a screenshot is of \"focused\", \"window\" or \"screen\", not {other:?}")),
        }
    }
}

/// A taken screenshot: the picture (PNG) and what it is of.
pub struct Screenshot {
    pub image: crate::media::Image,
    pub of: String,
}

/// Takes the screenshot `shot` asks for on `display` (None: `$DISPLAY`), when
/// the privacy rules allow it: a window they exclude is never read, and the
/// whole screen is read only when no window on it is excluded. On Wayland,
/// the focused window alone (`wayland_shot`).
pub fn screenshot(shot: Shot, display: Option<&str>, rules: &crate::capture::firewall::Rules, local_minute: u32) -> Result<Screenshot, String> {
    if display.is_none() && std::env::var_os("WAYLAND_DISPLAY").is_some() {
        let (picture, of) = wayland_shot(shot, rules, local_minute)?;
        return encode(picture, of);
    }
    let mut x11 = X11Desktop::connect(display).map_err(|e| e.to_string())?;
    let (picture, of) = match shot {
        Shot::Screen => {
            for window in x11.list_windows().map_err(|e| e.to_string())? {
                crate::capture::screen::allowed(rules, &window, local_minute).map_err(|e| format!("the screen is not read: {e}"))?;
            }
            (x11.capture_screen()?, "the whole screen".to_owned())
        }
        shot => {
            let window = match shot {
                Shot::Window(id) => x11.listed_window(id).map_err(|e| e.to_string())?,
                _ => x11.active_window().map_err(|e| e.to_string())?.ok_or("no window has the focus")?,
            };
            crate::capture::screen::allowed(rules, &window, local_minute).map_err(|e| e.to_string())?;
            let picture = x11.capture_window(window.window_id)?;
            (picture, format!("window {} ({} — {})", window.window_id, window.app, window.title))
        }
    };
    encode(picture, of)
}

fn encode(picture: image::RgbaImage, of: String) -> Result<Screenshot, String> {
    let mut png = Vec::new();
    image::DynamicImage::ImageRgba8(picture).write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).map_err(|e| format!("the screenshot could not be encoded: {e}"))?;
    Ok(Screenshot { image: crate::media::Image { mime: "image/png".into(), data: png }, of })
}

/// A screenshot on Wayland: the focused window alone, through what this
/// desktop lends (sway's screencopy of its region, cowork's GNOME Shell
/// extension, KWin's ScreenShot2), judged by the rules first. The whole
/// screen and unfocused windows are not read on Wayland.
fn wayland_shot(shot: Shot, rules: &crate::capture::firewall::Rules, local_minute: u32) -> Result<(image::RgbaImage, String), String> {
    use crate::desktop::session::Family;
    let only_focused = "on Wayland cowork reads the focused window alone: focus the window first (focus_window), then take its screenshot";
    let wanted = match shot {
        Shot::Screen => return Err(format!("the whole screen is not read here: {only_focused}")),
        Shot::Window(id) => Some(id),
        Shot::Focused => None,
    };
    let desktop = crate::desktop::session::current(false);
    let check = |window: &crate::records::ActiveWindow| -> Result<(), String> {
        if wanted.is_some_and(|id| id != window.window_id) {
            return Err(format!("window {} does not have the focus: {only_focused}", wanted.unwrap_or_default()));
        }
        // A browser's address is not known here: with domain rules, its page cannot be judged.
        if !rules.denied_domains.is_empty() && crate::capture::a11y::is_browser(&window.app) && window.url.is_none() {
            return Err(format!("{} is not read: its page's address is not known here, and your rules name domains", window.app));
        }
        crate::capture::screen::allowed(rules, window, local_minute).map_err(|e| e.to_string())
    };
    let of = |window: &crate::records::ActiveWindow| format!("window {} ({} — {})", window.window_id, window.app, window.title);
    match (&desktop.family, desktop.wayland.as_ref().and_then(|t| t.ipc.clone())) {
        (Family::Gnome, _) => {
            let extension = crate::desktop::gnome::Extension::session()?;
            let window = extension.focused()?.ok_or("no window has the focus")?.active();
            check(&window)?;
            Ok((extension.read_focused(&window.title, window.pid.unwrap_or_default())?, of(&window)))
        }
        (Family::Kde, _) => {
            let conn = crate::desktop::observed::session_bus()?;
            let focused = crate::desktop::kwin::focused_window(&conn)?.ok_or("no window has the focus")?;
            let window = focused.active();
            check(&window)?;
            Ok((crate::desktop::kwin::capture_window(&conn, &focused.id)?, of(&window)))
        }
        (_, Some(crate::desktop::ipc::Ipc::Sway(swaysock))) => {
            let socket = desktop.wayland.as_ref().map(|t| t.socket.clone()).ok_or("no Wayland socket")?;
            let focused = crate::desktop::wlr_pixels::focused(&swaysock)?.ok_or("no window has the focus")?;
            let window = crate::records::ActiveWindow {
                window_id: crate::desktop::observed::window_key(&focused.app_id, &focused.title),
                app: focused.app_id.clone(),
                title: focused.title.clone(),
                pid: focused.pid,
                url: None,
                url_source: None,
            };
            check(&window)?;
            Ok((crate::desktop::wlr_pixels::capture_focused(&socket, &swaysock, &focused)?, of(&window)))
        }
        _ => Err(format!("this desktop lends cowork no window's pixels: {}", desktop.state(crate::desktop::session::Capability::ScreenText).text())),
    }
}

/// `list_windows` and `focus_window` through the session's backend: EWMH on
/// X11, the foreign-toplevel list on wlroots, a refusal with the reason elsewhere.
fn window_tool(tool: &str, args: &Value) -> Result<String, String> {
    use crate::desktop::session::Capability;
    let desktop = crate::desktop::session::current(false);
    let state = desktop.state(Capability::WindowTools);
    if !state.is_ok() {
        return Err(format!("windows cannot be listed or focused here: {}", state.text()));
    }
    let id = args.get("window_id").and_then(Value::as_u64).unwrap_or_default() as u32;
    if desktop.family == crate::desktop::session::Family::Gnome {
        let extension = crate::desktop::gnome::Extension::session()?;
        return match tool {
            "list_windows" => extension.list_windows().map(|windows| {
                let me = std::process::id();
                describe_windows(&windows.iter().filter(|(w, _)| w.pid != me).map(|(w, _)| w.active()).collect::<Vec<_>>())
            }),
            _ => extension.activate(id).map(|()| format!("asked GNOME Shell to focus window {id}")),
        };
    }
    if desktop.family == crate::desktop::session::Family::Kde {
        let conn = crate::desktop::observed::session_bus()?;
        return match tool {
            "list_windows" => crate::desktop::kwin::list_windows(&conn).map(|windows| describe_windows(&windows)),
            _ => crate::desktop::kwin::activate(&conn, id).map(|()| format!("asked KWin to focus window {id}")),
        };
    }
    match (&desktop.wayland, tool) {
        (Some(target), "list_windows") => crate::desktop::wlr::list_windows(target).map(|windows| describe_windows(&windows)),
        (Some(target), _) => crate::desktop::wlr::activate(target, id).map(|()| format!("asked the compositor to focus window {id}")),
        (None, "list_windows") => X11Desktop::connect(None).and_then(|desktop| desktop.list_windows()).map_err(|e| e.to_string()).map(|w| describe_windows(&w)),
        (None, _) => X11Desktop::connect(None)
            .and_then(|desktop| desktop.activate(id))
            .map_err(|e| e.to_string())
            .map(|()| format!("asked the window manager to focus window {id}")),
    }
}

fn describe_windows(windows: &[crate::records::ActiveWindow]) -> String {
    if windows.is_empty() {
        return "(no windows are open)".to_owned();
    }
    windows.iter().map(|w| format!("window {}: {} — {}", w.window_id, w.app, w.title)).collect::<Vec<_>>().join("\n")
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

/// Starts an app's command line (no shell), detached from this thread.
fn launch(argv: &[String]) -> Result<(), String> {
    let (program, args) = argv.split_first().ok_or("the app has no command")?;
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| format!("cannot start {program}: {err}"))
        .map(|mut child| {
            let _ = std::thread::Builder::new().name("app-reaper".into()).spawn(move || child.wait());
        })
}

/// Opens a URL or a file with the desktop's handler (`xdg-open`). A web
/// URL passes the network gate first (`purpose` is what its log says).
pub fn xdg_open(target: &str, purpose: Option<&str>, gate: &crate::net::OutboundGate) -> Result<(), String> {
    if let Some(purpose) = purpose {
        let admission = gate.admit(target, purpose).map_err(|err| err.to_string())?;
        gate.finish(admission, 0, 0);
    }
    // xdg-open returns once the app has started: reaped off this thread.
    launch(&["xdg-open".to_owned(), target.to_owned()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_is_found_by_its_entry_or_its_name_and_started_without_a_shell() {
        let dir = tempfile::tempdir().unwrap();
        let apps = dir.path().join("applications");
        std::fs::create_dir_all(&apps).unwrap();
        let marker = dir.path().join("started; rm -rf x");
        std::fs::write(
            apps.join("org.example.Notes.desktop"),
            format!("[Desktop Entry]\nType=Application\nName=Quick Notes\nExec=touch \"{}\" %U\n[Desktop Action new]\nExec=false\n", marker.display()),
        )
        .unwrap();
        std::fs::write(apps.join("hidden.desktop"), "[Desktop Entry]\nName=Hidden\nExec=true\nNoDisplay=true\n").unwrap();
        let dirs = [apps.clone()];
        let (name, argv) = find_app("quick notes", &dirs).unwrap();
        assert_eq!((name.as_str(), argv.clone()), ("Quick Notes", vec!["touch".to_owned(), marker.display().to_string()]));
        assert_eq!(find_app("org.example.notes", &dirs).unwrap().1, argv);
        assert!(find_app("hidden", &dirs).is_none() && find_app("nothing", &dirs).is_none());
        launch(&argv).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !marker.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(marker.exists(), "started, with the quoted word whole and no shell reading the ';'");
        assert!(!dir.path().join("x").exists());
    }

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
