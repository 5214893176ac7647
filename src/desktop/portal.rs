//! The XDG desktop portal's GlobalShortcuts: on GNOME 48+, KDE Plasma and
//! Hyprland an app may ask the desktop for global shortcuts and is told
//! each press *and* release (`Activated` / `Deactivated`), so push-to-talk
//! keeps its release. A host (non-Flatpak) app first registers its app id
//! with the portal's host registry (`org.freedesktop.host.portal.Registry`,
//! before any other portal call: newer portals refuse GlobalShortcuts
//! sessions without one), then creates a session and binds its shortcuts;
//! the desktop asks the user once and remembers. Signals are believed only
//! from the portal's own connection.
//!
//! RemoteDesktop, for dictation where the desktop gives apps no virtual
//! keyboard: a keyboard-only session, consent asked once and restored with
//! a token kept in the secret store, then libei on the socket `ConnectToEIS`
//! gives (`desktop::ei`).
//!
//! Hand-written zbus calls (blocking, like the rest of cowork's D-Bus):
//! the portal's request/response dance is a call that returns a request
//! path, then a `Response` signal on that path, subscribed to before the call.
//! The shortcuts' `Activated`/`Deactivated` signals are read on a `shortcuts`
//! thread and become the hotkeys' events. `desktop::session` probes the
//! portal's interfaces only when a portal already runs. The FileChooser here
//! picks the files the chat attaches.

use std::collections::HashMap;
use std::time::Duration;

use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

use super::events::DesktopEvent;
use super::trigger::Trigger;

pub use super::session::{PORTAL, PORTAL_GLOBAL_SHORTCUTS as GLOBAL_SHORTCUTS, PORTAL_PATH, portal_global_shortcuts_version as global_shortcuts_version};
const REGISTRY: &str = "org.freedesktop.host.portal.Registry";
const REQUEST: &str = "org.freedesktop.portal.Request";
/// cowork's app id, as its desktop entry (`assets/app.cowork.Cowork.desktop`) is named.
pub const APP_ID: &str = "app.cowork.Cowork";
/// How long the user has to answer the desktop's shortcut dialog.
const ANSWER_WITHIN: Duration = Duration::from_secs(300);

/// One of cowork's shortcuts: its id, what it does, the keys it would like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shortcut {
    pub id: &'static str,
    pub description: &'static str,
    /// In the XDG shortcuts format (`CTRL+ALT+space`).
    pub preferred_trigger: String,
}

/// cowork's three shortcuts, with the keys its settings hold (global-hotkey's names: `ctrl+alt+Space`).
pub fn shortcuts(quick_prompt: &str, pause: &str, talk: &str) -> Vec<Shortcut> {
    vec![
        Shortcut { id: "quick-prompt", description: "Open cowork's quick prompt", preferred_trigger: xdg_trigger(quick_prompt) },
        Shortcut { id: "pause", description: "Pause or resume what cowork records", preferred_trigger: xdg_trigger(pause) },
        Shortcut { id: "talk", description: "Talk to cowork while held (push to talk)", preferred_trigger: xdg_trigger(talk) },
    ]
}

/// `ctrl+alt+KeyV` → `CTRL+ALT+v` (the XDG shortcuts format: CTRL, ALT, SHIFT, LOGO, then an xkb key name).
pub fn xdg_trigger(hotkey: &str) -> String {
    let parts: Vec<&str> = hotkey.split('+').map(str::trim).filter(|p| !p.is_empty()).collect();
    let Some((key, mods)) = parts.split_last() else { return String::new() };
    let mut out: Vec<String> = mods
        .iter()
        .map(|m| match m.to_lowercase().as_str() {
            "ctrl" | "control" => "CTRL".to_owned(),
            "alt" | "option" => "ALT".to_owned(),
            "shift" => "SHIFT".to_owned(),
            "super" | "meta" | "cmd" | "command" | "win" | "logo" => "LOGO".to_owned(),
            other => other.to_uppercase(),
        })
        .collect();
    let key = if let Some(letter) = key.strip_prefix("Key") {
        letter.to_lowercase()
    } else if let Some(digit) = key.strip_prefix("Digit") {
        digit.to_owned()
    } else if key.len() == 1 {
        key.to_lowercase()
    } else {
        match *key {
            "Space" => "space".to_owned(),
            "Enter" => "Return".to_owned(),
            "Escape" => "Escape".to_owned(),
            other => other.to_owned(),
        }
    };
    out.push(key);
    out.join("+")
}

/// What a shortcut's press or release means to cowork.
pub fn trigger_for(id: &str, pressed: bool) -> Option<Trigger> {
    match (id, pressed) {
        ("quick-prompt", true) => Some(Trigger::QuickPrompt),
        ("pause", true) => Some(Trigger::Pause),
        ("talk", true) => Some(Trigger::TalkPress),
        ("talk", false) => Some(Trigger::TalkRelease),
        _ => None,
    }
}

/// The portal's request path for `token` on this connection (known before the call, so its
/// `Response` is subscribed to first).
fn request_path(conn: &zbus::blocking::Connection, token: &str) -> Result<String, String> {
    let unique = conn.unique_name().ok_or("the session bus gave cowork no name")?;
    Ok(format!("{PORTAL_PATH}/request/{}/{token}", unique.trim_start_matches(':').replace('.', "_")))
}

fn portal_error(what: &str) -> impl Fn(zbus::Error) -> String + '_ {
    move |err| format!("the desktop portal's {what}: {err}")
}

/// A call that answers with a request, and the request's `Response` results.
fn request(
    conn: &zbus::blocking::Connection,
    portal: &str,
    method: &str,
    token: &str,
    call: impl FnOnce() -> zbus::Result<zbus::message::Message>,
) -> Result<HashMap<String, OwnedValue>, String> {
    let path = request_path(conn, token)?;
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender(portal)
        .and_then(|b| b.interface(REQUEST))
        .and_then(|b| b.member("Response"))
        .and_then(|b| b.path(path.clone()))
        .map_err(|err| err.to_string())?
        .build();
    let responses = zbus::blocking::MessageIterator::for_match_rule(rule, conn, Some(4)).map_err(portal_error(method))?;
    let reply = call().map_err(portal_error(method))?;
    let handle: OwnedObjectPath = reply.body().deserialize().map_err(portal_error(method))?;
    if handle.as_str() != path {
        return Err(format!("the desktop portal's {method} answered on {handle}, not {path}"));
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("portal-wait".into())
        .spawn(move || {
            if let Some(message) = responses.flatten().next() {
                let answer = message.body().deserialize::<(u32, HashMap<String, OwnedValue>)>().map_err(|err| err.to_string());
                let _ = tx.send(answer);
            }
        })
        .map_err(|err| err.to_string())?;
    let Ok(answer) = rx.recv_timeout(ANSWER_WITHIN) else {
        // Nobody answered the desktop's dialog: it is closed rather than left up.
        let _ = conn.call_method(Some(PORTAL), path.as_str(), Some(REQUEST), "Close", &());
        return Err(format!("the desktop did not answer {method} within {} s", ANSWER_WITHIN.as_secs()));
    };
    let (code, results) = answer?;
    match code {
        0 => Ok(results),
        1 => Err(format!("you declined cowork's {method} in the desktop's dialog")),
        _ => Err(format!("the desktop portal ended {method} (code {code})")),
    }
}

/// The portal's unique name (signals are believed from it only).
pub(super) fn portal_owner(conn: &zbus::blocking::Connection) -> Result<String, String> {
    let dbus = zbus::blocking::fdo::DBusProxy::new(conn).map_err(|err| err.to_string())?;
    Ok(dbus.get_name_owner(PORTAL.try_into().expect("a valid bus name")).map_err(|err| format!("no desktop portal on the session bus: {err}"))?.to_string())
}

/// cowork's desktop entry, which the portal's host registry looks its app id up by.
pub const DESKTOP_ENTRY: &str = include_str!("../../assets/app.cowork.Cowork.desktop");

/// Makes sure a desktop entry for cowork's app id exists (an installed package ships one);
/// when none does, writes the user's own, running `exe`. The path written, if any.
pub fn ensure_desktop_entry(env: &dyn Fn(&str) -> Option<String>, exe: &std::path::Path) -> Result<Option<std::path::PathBuf>, String> {
    let name = format!("{APP_ID}.desktop");
    let dirs = super::session::xdg_application_dirs(env);
    if dirs.iter().any(|dir| dir.join(&name).is_file()) {
        return Ok(None);
    }
    let dir = dirs.first().ok_or("neither XDG_DATA_HOME nor HOME is set")?;
    std::fs::create_dir_all(dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    // Each Exec (the entry's and its actions') runs this program with the same arguments.
    let program = super::autostart::quote_exec(&exe.to_string_lossy());
    let entry: String = DESKTOP_ENTRY
        .lines()
        .map(|line| match line.strip_prefix("Exec=cowork") {
            Some(arguments) => format!("Exec={program}{arguments}\n"),
            None => format!("{line}\n"),
        })
        .collect();
    let path = dir.join(&name);
    let part = dir.join(format!(".{name}.part"));
    std::fs::write(&part, entry).and_then(|()| std::fs::rename(&part, &path)).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(Some(path))
}

/// Registers cowork's app id with the portal's host registry, before any other call. A
/// portal that predates the registry (before 1.19) knows a host app by other means.
fn register_host(conn: &zbus::blocking::Connection) -> Result<(), String> {
    if let Ok(exe) = std::env::current_exe()
        && let Err(err) = ensure_desktop_entry(&|key| std::env::var(key).ok(), &exe)
    {
        tracing::warn!("the desktop portal may not know cowork by name: {err}");
    }
    let registered = conn.call_method(Some(PORTAL), PORTAL_PATH, Some(REGISTRY), "Register", &(APP_ID, HashMap::<&str, Value>::new()));
    match registered {
        Ok(_) => Ok(()),
        Err(zbus::Error::MethodError(name, _, _)) if name.as_str().ends_with("UnknownMethod") || name.as_str().ends_with("UnknownInterface") => Ok(()),
        Err(err) => Err(format!("the desktop portal would not register cowork as {APP_ID}: {err}")),
    }
}

/// A handle token unique in this process (the portal's request paths are made from it).
fn token(what: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!("cowork_{what}_{}_{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

fn string_result(results: &HashMap<String, OwnedValue>, key: &str) -> Option<String> {
    let value = results.get(key)?.try_clone().ok()?;
    String::try_from(value.try_clone().ok()?).ok().or_else(|| OwnedObjectPath::try_from(value).ok().map(|p| p.to_string()))
}

// --- RemoteDesktop: typing through libei -----------------------------------------

const REMOTE_DESKTOP: &str = "org.freedesktop.portal.RemoteDesktop";
const SESSION: &str = "org.freedesktop.portal.Session";
/// The RemoteDesktop device type asked for: the keyboard only (no pointer, no screen).
const KEYBOARD: u32 = 1;
/// Remember the user's yes until they revoke it (the restore token says so next time).
const PERSIST_UNTIL_REVOKED: u32 = 2;

/// Where the portal's restore token is kept between dictations (the secret store).
pub trait TokenStore {
    fn load(&self) -> Option<String>;
    fn save(&self, token: &str);
}

/// The name of the restore token in the secret store.
pub const RESTORE_TOKEN_SECRET: &str = "portal-remote-desktop-restore-token";

impl TokenStore for crate::secrets::Secrets {
    fn load(&self) -> Option<String> {
        self.get(RESTORE_TOKEN_SECRET).ok().flatten()
    }

    fn save(&self, token: &str) {
        if let Err(err) = self.set(RESTORE_TOKEN_SECRET, token) {
            tracing::warn!("the desktop's remote-desktop permission was not kept: {err:#}");
        }
    }
}

/// Types `text` into the focused window through the RemoteDesktop portal and
/// libei: a session for the keyboard only, the user's consent asked once and
/// then restored with the stored token (a new one each time: tokens are single
/// use), the compositor's EIS socket from `ConnectToEIS`, then closed.
pub fn type_text(conn: &zbus::blocking::Connection, tokens: &dyn TokenStore, text: &str) -> Result<super::ei::Typed, String> {
    let portal = portal_owner(conn)?;
    register_host(conn)?;
    let create = token("rd");
    let created = request(conn, &portal, "CreateSession", &create, || {
        let options: HashMap<&str, Value> = HashMap::from([("handle_token", Value::from(create.as_str())), ("session_handle_token", Value::from(token("rd_session")))]);
        conn.call_method(Some(PORTAL), PORTAL_PATH, Some(REMOTE_DESKTOP), "CreateSession", &(options,))
    })?;
    let session = string_result(&created, "session_handle").ok_or("the desktop portal created no remote-desktop session")?;
    let session = OwnedObjectPath::try_from(session).map_err(|err| format!("the portal's session handle: {err}"))?;
    let typed = (|| {
        let select = token("rd_select");
        let mut options: HashMap<&str, Value> =
            HashMap::from([("handle_token", Value::from(select.as_str())), ("types", Value::from(KEYBOARD)), ("persist_mode", Value::from(PERSIST_UNTIL_REVOKED))]);
        if let Some(restore) = tokens.load() {
            options.insert("restore_token", Value::from(restore));
        }
        request(conn, &portal, "SelectDevices", &select, || conn.call_method(Some(PORTAL), PORTAL_PATH, Some(REMOTE_DESKTOP), "SelectDevices", &(&session, options)))?;
        let start = token("rd_start");
        let started = request(conn, &portal, "Start", &start, || {
            let options: HashMap<&str, Value> = HashMap::from([("handle_token", Value::from(start.as_str()))]);
            conn.call_method(Some(PORTAL), PORTAL_PATH, Some(REMOTE_DESKTOP), "Start", &(&session, "", options))
        })?;
        if let Some(restore) = string_result(&started, "restore_token") {
            tokens.save(&restore);
        }
        let devices = started.get("devices").and_then(|v| u32::try_from(v.try_clone().ok()?).ok()).unwrap_or(0);
        if devices & KEYBOARD == 0 {
            return Err("the desktop did not let cowork use the keyboard".to_owned());
        }
        let reply = conn
            .call_method(Some(PORTAL), PORTAL_PATH, Some(REMOTE_DESKTOP), "ConnectToEIS", &(&session, HashMap::<&str, Value>::new()))
            .map_err(portal_error("ConnectToEIS"))?;
        let fd: zbus::zvariant::OwnedFd = reply.body().deserialize().map_err(portal_error("ConnectToEIS"))?;
        super::ei::type_text(std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(fd)), text)
    })();
    let _ = conn.call_method(Some(PORTAL), session.as_str(), Some(SESSION), "Close", &());
    typed
}

/// cowork's shortcuts, bound through the portal.
pub struct GlobalShortcuts {
    conn: zbus::blocking::Connection,
    portal: String,
    session: OwnedObjectPath,
    /// What the desktop bound each id to (its words for the keys).
    pub bound: Vec<(String, String)>,
}

impl GlobalShortcuts {
    /// Registers cowork's app id, creates a session and binds `shortcuts` (the desktop may ask the user).
    pub fn bind(conn: zbus::blocking::Connection, shortcuts: &[Shortcut]) -> Result<Self, String> {
        let portal = portal_owner(&conn)?;
        register_host(&conn)?;
        let pid = std::process::id();
        let token = self::token("create");
        let session_token = format!("cowork_shortcuts_{pid}");
        let created = request(&conn, &portal, "CreateSession", &token, || {
            let options: HashMap<&str, Value> = HashMap::from([("handle_token", Value::from(token.as_str())), ("session_handle_token", Value::from(session_token.as_str()))]);
            conn.call_method(Some(PORTAL), PORTAL_PATH, Some(GLOBAL_SHORTCUTS), "CreateSession", &(options,))
        })?;
        let session = string_result(&created, "session_handle").ok_or("the desktop portal created no shortcut session")?;
        let session = OwnedObjectPath::try_from(session).map_err(|err| format!("the portal's session handle: {err}"))?;
        let token = self::token("bind");
        let wanted: Vec<(&str, HashMap<&str, Value>)> = shortcuts
            .iter()
            .map(|s| {
                let mut options = HashMap::from([("description", Value::from(s.description))]);
                if !s.preferred_trigger.is_empty() {
                    options.insert("preferred_trigger", Value::from(s.preferred_trigger.as_str()));
                }
                (s.id, options)
            })
            .collect();
        let results = request(&conn, &portal, "BindShortcuts", &token, || {
            let options: HashMap<&str, Value> = HashMap::from([("handle_token", Value::from(token.as_str()))]);
            conn.call_method(Some(PORTAL), PORTAL_PATH, Some(GLOBAL_SHORTCUTS), "BindShortcuts", &(&session, wanted, "", options))
        })?;
        let bound = results
            .get("shortcuts")
            .and_then(|v| <Vec<(String, HashMap<String, OwnedValue>)>>::try_from(v.try_clone().ok()?).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|(id, props)| {
                let keys = props.get("trigger_description").and_then(|v| String::try_from(v.try_clone().ok()?).ok()).unwrap_or_default();
                (id, keys)
            })
            .collect();
        Ok(Self { conn, portal, session, bound })
    }

    /// Calls `on` with each trigger as the desktop reports its shortcuts' presses and releases,
    /// until the connection ends or `on` returns false.
    pub fn listen(&self, mut on: impl FnMut(Trigger) -> bool) -> Result<(), String> {
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .interface(GLOBAL_SHORTCUTS)
            .and_then(|b| b.path(PORTAL_PATH))
            .map_err(|err| err.to_string())?
            .build();
        let signals = zbus::blocking::MessageIterator::for_match_rule(rule, &self.conn, Some(16)).map_err(portal_error("shortcut signals"))?;
        for message in signals {
            let Ok(message) = message else { continue };
            let header = message.header();
            // Only the portal says which keys were pressed: anyone may emit a signal of this name.
            if header.sender().map(|s| s.as_str()) != Some(self.portal.as_str()) {
                tracing::warn!(sender = ?header.sender().map(|s| s.to_string()), "ignored a shortcut signal that did not come from the desktop portal");
                continue;
            }
            let pressed = match header.member().map(|m| m.as_str()) {
                Some("Activated") => true,
                Some("Deactivated") => false,
                _ => continue,
            };
            let Ok((session, id, _timestamp, _options)) = message.body().deserialize::<(OwnedObjectPath, String, u64, HashMap<String, OwnedValue>)>() else { continue };
            if session != self.session {
                continue;
            }
            if let Some(trigger) = trigger_for(&id, pressed)
                && !on(trigger)
            {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Binds cowork's shortcuts through the portal on a `shortcuts` thread and
/// sends each press and release as the hotkey's event; a failure (no portal,
/// the user declined) is said once in the UI.
pub fn spawn(shortcuts: Vec<Shortcut>, sink: crate::runtime::EventSink<DesktopEvent>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("shortcuts".into()).spawn(move || {
        let bound = super::observed::session_bus().and_then(|conn| GlobalShortcuts::bind(conn, &shortcuts));
        match bound {
            Ok(bound) => {
                let keys: Vec<String> = bound.bound.iter().map(|(id, keys)| format!("{id}: {keys}")).collect();
                tracing::info!(bound = %keys.join(", "), "global shortcuts bound through the desktop portal");
                if let Err(err) = bound.listen(|trigger| {
                    for event in trigger.events() {
                        sink.send(event);
                    }
                    true
                }) {
                    sink.notice(format!("global shortcuts stopped: {err}"));
                }
            }
            Err(err) => {
                sink.notice(format!("global shortcuts unavailable: {err}"));
            }
        }
    })
}

// --- FileChooser: files to attach to a chat ---------------------------------------

const FILE_CHOOSER: &str = "org.freedesktop.portal.FileChooser";

/// Asks the desktop's file chooser (the portal's `OpenFile`, which GNOME, KDE
/// and wlroots desktops answer with their own dialog) for files to attach.
/// Cancelling is an empty list, not an error.
pub fn choose_files(conn: &zbus::blocking::Connection, title: &str) -> Result<Vec<std::path::PathBuf>, String> {
    portal_owner(conn)?;
    let _ = register_host(conn);
    let handle = token("open_file");
    // What the sidebar attaches: documents first, anything readable as text too.
    let patterns: Vec<(u32, String)> = ["pdf", "docx", "odt", "xlsx", "xls", "ods", "pptx", "odp", "epub", "html", "md", "csv", "txt"].iter().map(|e| (0u32, format!("*.{e}"))).collect();
    let filters = vec![("Documents".to_owned(), patterns), ("All files".to_owned(), vec![(0u32, "*".to_owned())])];
    let options: HashMap<&str, Value> = HashMap::from([
        ("handle_token", Value::from(handle.as_str())),
        ("multiple", Value::from(true)),
        ("modal", Value::from(false)),
        ("filters", Value::from(filters)),
    ]);
    let answer = request(conn, PORTAL, "OpenFile", &handle, || conn.call_method(Some(PORTAL), PORTAL_PATH, Some(FILE_CHOOSER), "OpenFile", &("", title, options)));
    let results = match answer {
        Ok(results) => results,
        Err(err) if err.starts_with("you declined") => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let uris: Vec<String> = results.get("uris").and_then(|v| v.try_clone().ok()).and_then(|v| Vec::<String>::try_from(v).ok()).unwrap_or_default();
    Ok(uris.iter().filter_map(|uri| file_uri_path(uri)).collect())
}

/// `file:///home/a/My%20report.pdf` → `/home/a/My report.pdf` (other schemes: none).
pub fn file_uri_path(uri: &str) -> Option<std::path::PathBuf> {
    let url = url::Url::parse(uri).ok()?;
    (url.scheme() == "file").then(|| url.to_file_path().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_desktop_entry_is_written_once_for_this_program_unless_one_is_installed() {
        let home = tempfile::tempdir().unwrap();
        let system = tempfile::tempdir().unwrap();
        let env = |key: &str| match key {
            "HOME" => Some(home.path().to_string_lossy().into_owned()),
            "XDG_DATA_DIRS" => Some(system.path().to_string_lossy().into_owned()),
            _ => None,
        };
        let written = ensure_desktop_entry(&env, std::path::Path::new("/opt/my \"apps\"/cowork")).unwrap().expect("written");
        assert_eq!(written, home.path().join(".local/share/applications/app.cowork.Cowork.desktop"));
        let text = std::fs::read_to_string(&written).unwrap();
        // The spec's quoting, then its string escapes: `\"` inside quotes is written `\\"`.
        assert!(text.contains("\nExec=\"/opt/my \\\\\"apps\\\\\"/cowork\"\n"), "{text}");
        assert!(text.contains("\nExec=\"/opt/my \\\\\"apps\\\\\"/cowork\" --quick-prompt\n"), "the action keeps its arguments: {text}");
        assert!(text.starts_with("[Desktop Entry]\n") && text.contains("StartupWMClass=cowork"));
        assert_eq!(ensure_desktop_entry(&env, std::path::Path::new("/other")).unwrap(), None, "kept once there");
        std::fs::remove_file(&written).unwrap();
        std::fs::create_dir_all(system.path().join("applications")).unwrap();
        std::fs::write(system.path().join("applications/app.cowork.Cowork.desktop"), DESKTOP_ENTRY).unwrap();
        assert_eq!(ensure_desktop_entry(&env, std::path::Path::new("/other")).unwrap(), None, "an installed package's entry is used");
    }

    #[test]
    fn hotkeys_become_xdg_triggers_and_presses_and_releases_become_triggers() {
        assert_eq!(xdg_trigger("ctrl+alt+Space"), "CTRL+ALT+space");
        assert_eq!(xdg_trigger("ctrl+alt+KeyV"), "CTRL+ALT+v");
        assert_eq!(xdg_trigger("super+shift+Digit5"), "LOGO+SHIFT+5");
        assert_eq!(xdg_trigger("F9"), "F9");
        assert_eq!(xdg_trigger(""), "");
        assert_eq!(trigger_for("talk", true), Some(Trigger::TalkPress));
        assert_eq!(trigger_for("talk", false), Some(Trigger::TalkRelease), "push to talk keeps its release");
        assert_eq!(trigger_for("quick-prompt", true), Some(Trigger::QuickPrompt));
        assert_eq!(trigger_for("quick-prompt", false), None, "a release opens nothing twice");
        assert_eq!(trigger_for("pause", false), None);
        assert_eq!(trigger_for("something-else", true), None);
        let ids: Vec<&str> = shortcuts("ctrl+alt+Space", "ctrl+alt+KeyP", "ctrl+alt+KeyV").iter().map(|s| s.id).collect();
        assert_eq!(ids, ["quick-prompt", "pause", "talk"]);
    }
}
