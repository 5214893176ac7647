//! GNOME on Wayland: Mutter tells ordinary apps nothing about other windows
//! (Shell's Introspect is refused), so cowork ships a small GNOME Shell
//! extension of its own (`assets/gnome/`: the shared `core.js` inside a
//! GNOME 43–44 `imports` wrapper or a GNOME 45+ ES-module one). It serves
//! `org.cowork.Desktop1` at `/org/cowork/Desktop` on gnome-shell's session-bus
//! connection, answers only the executables the user installed it for (by
//! the running file's device and inode: it keeps ordinary apps out, not a
//! hostile program of the same user, which could read cowork's memory), and
//! pushes the focused window (title, WM class, app ids, pid, fullscreen,
//! Mutter's id) and, while cowork asks, the clipboard's text to the caller's
//! own unique name (`org.cowork.DesktopEvents1`, refused here unless it
//! comes from gnome-shell). Away detection uses Mutter's own IdleMonitor
//! watches, which need no extension. Nothing polls.
//!
//! Installing the extension copies it into the user's extensions folder and
//! adds it to `org.gnome.shell enabled-extensions`; GNOME on Wayland loads
//! new extensions only at log-in, so until the user logs out and in once
//! every capability that needs it says it is waiting for it. `install` writes
//! `core.js` into the 43–44 `imports` wrapper or the 45+ ES-module one, and
//! `allowed-executables`.
//!
//! Here: `GnomeDesktop` (capture's backend) serves `org.cowork.DesktopEvents1`
//! on its own connection and subscribes to "focus"; `ClipboardWatch` (the
//! clipboard worker's source) subscribes to "clipboard" only while the stream
//! records; `IdleMonitorWatch` turns Mutter's idle and user-active watches
//! into `Presence` on an `idle` thread; `Extension` is the client for the
//! agent's window tools and the `place` thread. Dictation is `type_text`
//! (Mutter's RemoteDesktop, one session per dictation, keysyms of the layout
//! GNOME uses, through `ei::KeyTable`); GNOME before 48 gets custom shortcuts
//! that run `cowork trigger` (`add_custom_shortcuts`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::observed::{Presence, PushSlot, Pushed, pushed};
use crate::records::ActiveWindow;

pub use super::session::{GNOME_EXTENSION_INTERFACE as INTERFACE, GNOME_EXTENSION_PATH as OBJECT_PATH, GNOME_EXTENSION_UUID as UUID, GNOME_SHELL as SHELL, gnome_extension_dir as extension_dir, gnome_extension_version as running_version, gnome_shell_version as shell_version};
const CORE: &str = include_str!("../../assets/gnome/core.js");
const LEGACY: &str = include_str!("../../assets/gnome/extension-43.js");
const MODULE: &str = include_str!("../../assets/gnome/extension-45.js");
const CORE_MARKER: &str = "// @COWORK_CORE@";
/// The file beside the extension naming the programs it answers, one path a line.
pub const ALLOWED_FILE: &str = "allowed-executables";

/// The focused window as the extension describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GnomeWindow {
    pub title: String,
    pub wm_class: String,
    /// The GTK application id, when the app set one.
    pub app_id: String,
    /// The Flatpak/Snap app id, when sandboxed.
    pub sandboxed_app_id: String,
    pub pid: u32,
    pub fullscreen: bool,
    /// Mutter's id for the window, stable while it lives.
    pub id: String,
}

type WindowTuple = (String, String, String, String, u32, bool, String);

impl GnomeWindow {
    fn from_tuple((title, wm_class, app_id, sandboxed_app_id, pid, fullscreen, id): WindowTuple) -> Option<Self> {
        (!id.is_empty()).then_some(Self { title, wm_class, app_id, sandboxed_app_id, pid, fullscreen, id })
    }

    /// The id the rest of cowork knows the window by (nonzero, stable while it lives).
    pub fn key(&self) -> u32 {
        super::observed::window_key(&self.wm_class, &self.id)
    }

    /// The app: its sandboxed id, its GTK id, its WM class (a Wayland app's app id), in that order.
    pub fn app(&self) -> String {
        [&self.sandboxed_app_id, &self.app_id, &self.wm_class].into_iter().find(|s| !s.is_empty()).cloned().unwrap_or_else(|| "unknown".into())
    }

    pub fn active(&self) -> ActiveWindow {
        ActiveWindow { window_id: self.key(), app: self.app(), title: self.title.clone(), pid: (self.pid > 0).then_some(self.pid), url: None, url_source: None }
    }
}

// --- the extension, installed ------------------------------------------------

/// The extension's source for a GNOME Shell of major version `major`.
pub fn extension_source(major: u32) -> String {
    let wrapper = if major >= 45 { MODULE } else { LEGACY };
    wrapper.replace(CORE_MARKER, CORE)
}

/// Its metadata for that GNOME (one variant covers 43–44, the other 45 on).
pub fn metadata(major: u32) -> String {
    let versions: &[&str] = if major >= 45 { &["45", "46", "47", "48", "49", "50"] } else { &["43", "44"] };
    serde_json::json!({
        "uuid": UUID,
        "name": "cowork",
        "description": "Tells the cowork assistant, and nothing else, which window has the focus, the clipboard while you let it record, and keeps its sidebar docked. Installed by cowork; remove it from cowork's Settings.",
        "shell-version": versions,
        // Kept running on the lock screen (where no window changes), so cowork's subscription survives a lock.
        "session-modes": ["user", "unlock-dialog"],
        "url": "https://github.com/cowork-app/cowork",
        "version": 1,
    })
    .to_string()
}

/// The major version in gnome-shell's `ShellVersion` ("43.9" → 43).
pub fn major_version(version: &str) -> Option<u32> {
    version.trim().trim_start_matches("GNOME Shell").trim().split('.').next()?.parse().ok()
}

/// What installing did, for the user.
#[derive(Debug, PartialEq, Eq)]
pub struct Installed {
    pub dir: PathBuf,
    /// The extension was not yet in `enabled-extensions`.
    pub newly_enabled: bool,
}

/// Writes the extension for GNOME `major` into `dir`, allowing `exe`
/// (kept with any programs allowed before), and enables it. Files are written
/// whole and renamed over, so a crash leaves the old copy or the new one.
pub fn install(dir: &Path, major: u32, exe: &Path, settings: &dyn GnomeSettings) -> Result<Installed, String> {
    std::fs::create_dir_all(dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let exe = exe.to_string_lossy();
    let allowed_path = dir.join(ALLOWED_FILE);
    let mut allowed: Vec<String> = std::fs::read_to_string(&allowed_path).unwrap_or_default().lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect();
    if !allowed.iter().any(|line| *line == exe) {
        allowed.push(exe.into_owned());
    }
    let allowed = format!("# The programs cowork's GNOME Shell extension answers, one path a line (written by `cowork gnome-extension install`).\n{}\n", allowed.iter().filter(|l| !l.starts_with('#')).cloned().collect::<Vec<_>>().join("\n"));
    for (name, text) in [("extension.js", extension_source(major)), ("metadata.json", metadata(major)), (ALLOWED_FILE, allowed)] {
        let path = dir.join(name);
        let part = dir.join(format!(".{name}.part"));
        std::fs::write(&part, text).and_then(|()| std::fs::rename(&part, &path)).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    }
    let mut enabled = enabled_extensions(settings)?;
    let newly_enabled = !enabled.iter().any(|u| u == UUID);
    if newly_enabled {
        enabled.push(UUID.to_owned());
        set_enabled_extensions(settings, &enabled)?;
    }
    Ok(Installed { dir: dir.to_owned(), newly_enabled })
}

/// Disables the extension and removes its folder.
pub fn remove(dir: &Path, settings: &dyn GnomeSettings) -> Result<(), String> {
    let enabled = enabled_extensions(settings)?;
    if enabled.iter().any(|u| u == UUID) {
        set_enabled_extensions(settings, &enabled.into_iter().filter(|u| u != UUID).collect::<Vec<_>>())?;
    }
    match std::fs::remove_dir_all(dir) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(format!("cannot remove {}: {err}", dir.display())),
        _ => Ok(()),
    }
}

fn env_var(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// Installs the extension for this program and the running GNOME (or `version`), and says what happens next.
pub fn install_here(version: Option<&str>) -> Result<String, String> {
    let dir = extension_dir(&env_var).ok_or("neither XDG_DATA_HOME nor HOME is set")?;
    let conn = super::observed::session_bus().ok();
    let version = match version {
        Some(version) => version.to_owned(),
        None => conn.as_ref().and_then(shell_version).ok_or("GNOME Shell does not answer on the session bus: give its version with --shell-version")?,
    };
    let major = major_version(&version).ok_or_else(|| format!("not a GNOME Shell version: {version}"))?;
    if major < 43 {
        return Err(format!("cowork's extension needs GNOME 43 or later; this is GNOME {version}"));
    }
    let exe = std::env::current_exe().map_err(|err| format!("cannot tell where this program is: {err}"))?;
    let installed = install(&dir, major, &exe, &Gsettings)?;
    let running = conn.as_ref().and_then(running_version).is_some();
    Ok(format!(
        "Installed cowork's GNOME Shell extension ({} variant) in {} for {}.\n{}",
        if major >= 45 { "GNOME 45 and later" } else { "GNOME 43-44" },
        installed.dir.display(),
        exe.display(),
        if running {
            "GNOME Shell already runs it: this program may use it now."
        } else {
            "GNOME on Wayland loads new extensions only at log-in: log out and in once, and cowork sees your windows from then on."
        }
    ))
}

/// Adds cowork's custom shortcuts for this program, and says what they do.
pub fn add_shortcuts_here(quick_prompt: &str, pause: &str, talk: &str) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|err| format!("cannot tell where this program is: {err}"))?;
    let shortcuts = custom_shortcuts(&exe, quick_prompt, pause, talk);
    add_custom_shortcuts(&shortcuts, &Gsettings)?;
    let listed: Vec<String> = shortcuts.iter().map(|s| format!("{} ({})", s.name, s.binding)).collect();
    Ok(format!(
        "Added to GNOME Settings, Keyboard, Custom Shortcuts: {}. GNOME runs them on press only, so push-to-talk is a tap to start and a tap to stop.",
        listed.join("; ")
    ))
}

pub fn remove_shortcuts_here() -> Result<String, String> {
    let removed = remove_custom_shortcuts(&Gsettings)?;
    Ok(format!("Removed {removed} of cowork's custom shortcuts from GNOME's keyboard settings; yours are untouched."))
}

pub fn remove_here() -> Result<String, String> {
    let dir = extension_dir(&env_var).ok_or("neither XDG_DATA_HOME nor HOME is set")?;
    remove(&dir, &Gsettings)?;
    Ok(format!("Removed cowork's GNOME Shell extension from {} and disabled it; GNOME Shell stops running it at your next log-in.", dir.display()))
}

pub fn status_here() -> String {
    let installed = extension_dir(&env_var).filter(|dir| dir.join("extension.js").is_file());
    let conn = super::observed::session_bus().ok();
    let running = conn.as_ref().and_then(running_version);
    match (installed, running) {
        (_, Some(version)) => format!("running (interface version {version})"),
        (Some(dir), None) => format!("installed in {} but not running: log out and in once (or it is disabled in Extensions)", dir.display()),
        (None, None) => "not installed: `cowork gnome-extension install`".to_owned(),
    }
}

/// GNOME's settings, key by key, values as GVariant text (`['a', 'b']`, `'text'`).
pub trait GnomeSettings {
    fn get(&self, schema: &str, key: &str) -> Result<String, String>;
    fn set(&self, schema: &str, key: &str, value: &str) -> Result<(), String>;
}

const SHELL_SCHEMA: &str = "org.gnome.shell";

fn enabled_extensions(settings: &dyn GnomeSettings) -> Result<Vec<String>, String> {
    parse_string_array(&settings.get(SHELL_SCHEMA, "enabled-extensions")?)
}

fn set_enabled_extensions(settings: &dyn GnomeSettings, uuids: &[String]) -> Result<(), String> {
    settings.set(SHELL_SCHEMA, "enabled-extensions", &format_string_array(uuids))
}

/// Through the `gsettings` program (GLib's, on every GNOME), which writes dconf as GNOME does.
pub struct Gsettings;

impl Gsettings {
    fn run(args: &[&str]) -> Result<String, String> {
        let out = std::process::Command::new("gsettings").args(args).output().map_err(|err| format!("cannot run gsettings (GLib's settings tool): {err}"))?;
        if !out.status.success() {
            return Err(format!("gsettings {}: {}", args[..args.len().min(3)].join(" "), String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

impl GnomeSettings for Gsettings {
    fn get(&self, schema: &str, key: &str) -> Result<String, String> {
        Self::run(&["get", schema, key])
    }

    fn set(&self, schema: &str, key: &str, value: &str) -> Result<(), String> {
        Self::run(&["set", schema, key, value]).map(|_| ())
    }
}

// --- GNOME before 48: custom keyboard shortcuts ------------------------------------

const MEDIA_KEYS: &str = "org.gnome.settings-daemon.plugins.media-keys";
const CUSTOM_KEYBINDING: &str = "org.gnome.settings-daemon.plugins.media-keys.custom-keybinding";
const CUSTOM_PATH: &str = "/org/gnome/settings-daemon/plugins/media-keys/custom-keybindings/";

/// One of cowork's entries in GNOME Settings → Keyboard → Custom Shortcuts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomShortcut {
    /// The last part of its settings path (`cowork-quick-prompt`).
    pub id: &'static str,
    pub name: &'static str,
    pub command: String,
    /// GNOME's accelerator (`<Control><Alt>space`).
    pub binding: String,
}

/// cowork's shortcuts as GNOME custom shortcuts running `EXE trigger …`. GNOME
/// runs a custom shortcut on press only, so push-to-talk is a tap: tap to
/// start talking, tap again to stop (said in its name).
pub fn custom_shortcuts(exe: &Path, quick_prompt: &str, pause: &str, talk: &str) -> Vec<CustomShortcut> {
    let run = |what: &str| format!("'{}' trigger {what}", exe.to_string_lossy().replace('\'', "'\\''"));
    vec![
        CustomShortcut { id: "cowork-quick-prompt", name: "cowork: quick prompt", command: run("quick-prompt"), binding: gnome_accelerator(quick_prompt) },
        CustomShortcut { id: "cowork-pause", name: "cowork: pause or resume recording", command: run("pause"), binding: gnome_accelerator(pause) },
        CustomShortcut {
            id: "cowork-talk",
            name: "cowork: talk (tap to start, tap again to stop)",
            command: run("talk-tap"),
            binding: gnome_accelerator(talk),
        },
    ]
}

/// `ctrl+alt+Space` → `<Control><Alt>space` (GTK's accelerator format, which GNOME's settings use).
pub fn gnome_accelerator(hotkey: &str) -> String {
    let trigger = super::portal::xdg_trigger(hotkey);
    let mut parts: Vec<&str> = trigger.split('+').collect();
    let Some(key) = parts.pop() else { return String::new() };
    let mods: String = parts
        .iter()
        .map(|m| match *m {
            "CTRL" => "<Control>",
            "ALT" => "<Alt>",
            "SHIFT" => "<Shift>",
            "LOGO" => "<Super>",
            _ => "",
        })
        .collect();
    format!("{mods}{key}")
}

fn gvariant_string(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Adds (or updates) cowork's custom shortcuts, keeping the user's own.
pub fn add_custom_shortcuts(shortcuts: &[CustomShortcut], settings: &dyn GnomeSettings) -> Result<(), String> {
    let mut paths = parse_string_array(&settings.get(MEDIA_KEYS, "custom-keybindings")?)?;
    for shortcut in shortcuts {
        let path = format!("{CUSTOM_PATH}{}/", shortcut.id);
        let schema = format!("{CUSTOM_KEYBINDING}:{path}");
        settings.set(&schema, "name", &gvariant_string(shortcut.name))?;
        settings.set(&schema, "command", &gvariant_string(&shortcut.command))?;
        settings.set(&schema, "binding", &gvariant_string(&shortcut.binding))?;
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    settings.set(MEDIA_KEYS, "custom-keybindings", &format_string_array(&paths))
}

/// Removes cowork's custom shortcuts (the ones under its ids), keeping the user's own.
pub fn remove_custom_shortcuts(settings: &dyn GnomeSettings) -> Result<usize, String> {
    let paths = parse_string_array(&settings.get(MEDIA_KEYS, "custom-keybindings")?)?;
    let (ours, theirs): (Vec<String>, Vec<String>) = paths.into_iter().partition(|p| p.starts_with(&format!("{CUSTOM_PATH}cowork-")));
    settings.set(MEDIA_KEYS, "custom-keybindings", &format_string_array(&theirs))?;
    Ok(ours.len())
}

/// A GVariant string array as gsettings prints it: `@as []`, `['a', 'b']`.
pub fn parse_string_array(text: &str) -> Result<Vec<String>, String> {
    let text = text.trim().trim_start_matches("@as").trim();
    let inner = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).ok_or_else(|| format!("not a list of names: {text}"))?;
    let mut items = Vec::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                let mut item = String::new();
                loop {
                    match chars.next() {
                        Some('\\') => item.extend(chars.next()),
                        Some(q) if q == c => break,
                        Some(other) => item.push(other),
                        None => return Err(format!("an unfinished name in {text}")),
                    }
                }
                items.push(item);
            }
            ',' | ' ' => {}
            other => return Err(format!("unexpected {other:?} in {text}")),
        }
    }
    Ok(items)
}

fn format_string_array(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("'{}'", i.replace('\\', "\\\\").replace('\'', "\\'"))).collect();
    format!("[{}]", quoted.join(", "))
}

// --- talking to the extension -------------------------------------------------

/// The object the extension calls.
struct Events {
    /// The unique name that owned `org.gnome.Shell` when cowork subscribed.
    shell: String,
    slot: PushSlot<GnomeWindow>,
    clipboard: Option<Sender<String>>,
}

impl Events {
    fn check_from_shell(&self, header: &zbus::message::Header<'_>) -> zbus::fdo::Result<()> {
        if header.sender().map(|s| s.as_str()) == Some(self.shell.as_str()) {
            return Ok(());
        }
        tracing::warn!(sender = ?header.sender().map(|s| s.to_string()), "refused a desktop report that did not come from GNOME Shell");
        Err(zbus::fdo::Error::AccessDenied("only GNOME Shell tells cowork about windows".into()))
    }
}

// One call at a time, in order (a title change must not overtake the focus change before it).
#[zbus::interface(name = "org.cowork.DesktopEvents1", spawn = false)]
impl Events {
    /// The focused window changed, or its title or fullscreen state did (an empty `id`: nothing is focused).
    #[allow(clippy::too_many_arguments)]
    fn focused(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        title: String,
        wm_class: String,
        app_id: String,
        sandboxed_app_id: String,
        pid: u32,
        fullscreen: bool,
        id: String,
    ) -> zbus::fdo::Result<()> {
        self.check_from_shell(&header)?;
        self.slot.report(GnomeWindow::from_tuple((title, wm_class, app_id, sandboxed_app_id, pid, fullscreen, id)));
        Ok(())
    }

    /// The clipboard changed owner: its text.
    fn clipboard(&self, #[zbus(header)] header: zbus::message::Header<'_>, text: String) -> zbus::fdo::Result<()> {
        self.check_from_shell(&header)?;
        if let Some(clipboard) = &self.clipboard
            && clipboard.try_send(text).is_err()
        {
            tracing::warn!("clipboard queue full: dropped a copy");
        }
        Ok(())
    }
}

/// The extension's methods, called by cowork.
#[derive(Clone)]
pub struct Extension {
    conn: zbus::blocking::Connection,
}

fn gnome_error(what: &str) -> impl Fn(zbus::Error) -> String + '_ {
    move |err| match err {
        zbus::Error::MethodError(name, Some(text), _) if name.as_str() == "org.cowork.Desktop1.Error.NotCowork" => {
            format!("{what}: cowork's GNOME extension refused this program ({text}); install it again from this cowork (`cowork gnome-extension install`)")
        }
        zbus::Error::MethodError(name, _, _) if name.as_str() == "org.freedesktop.DBus.Error.UnknownObject" || name.as_str() == "org.freedesktop.DBus.Error.UnknownMethod" => {
            format!("{what}: cowork's GNOME extension is not running (install it, then log out and in once)")
        }
        err => format!("{what}: {err}"),
    }
}

impl Extension {
    pub fn new(conn: zbus::blocking::Connection) -> Self {
        Self { conn }
    }

    pub fn session() -> Result<Self, String> {
        super::observed::session_bus().map(Self::new)
    }

    fn call<R: serde::de::DeserializeOwned + zbus::zvariant::Type>(&self, method: &str, body: &(impl serde::Serialize + zbus::zvariant::DynamicType)) -> Result<R, String> {
        let reply = self.conn.call_method(Some(SHELL), OBJECT_PATH, Some(INTERFACE), method, body).map_err(gnome_error("GNOME Shell"))?;
        reply.body().deserialize().map_err(|err| format!("the GNOME extension's answer to {method}: {err}"))
    }

    /// Asks for the `streams` ("focus", "clipboard"): pushed to this connection's `OBJECT_PATH`.
    pub fn subscribe(&self, streams: &[&str]) -> Result<String, String> {
        self.call("Subscribe", &(streams,))
    }

    pub fn unsubscribe(&self) {
        let _ = self.conn.call_method(Some(SHELL), OBJECT_PATH, Some(INTERFACE), "Unsubscribe", &());
    }

    pub fn focused(&self) -> Result<Option<GnomeWindow>, String> {
        self.call::<(WindowTuple,)>("Focused", &()).map(|(w,)| GnomeWindow::from_tuple(w))
    }

    /// The normal windows, with whether each has the focus.
    pub fn list_windows(&self) -> Result<Vec<(GnomeWindow, bool)>, String> {
        /// The extension's row: title, WM class, app id, sandbox, pid, focused, fullscreen, id.
        type Row = (String, String, String, String, u32, bool, bool, String);
        let windows: Vec<Row> = self.call("ListWindows", &())?;
        Ok(windows
            .into_iter()
            .filter_map(|(title, wm_class, app_id, sandboxed, pid, focused, fullscreen, id)| {
                GnomeWindow::from_tuple((title, wm_class, app_id, sandboxed, pid, fullscreen, id)).map(|w| (w, focused))
            })
            .collect())
    }

    /// Focuses the window `key` names (from `list_windows`).
    pub fn activate(&self, key: u32) -> Result<(), String> {
        let windows = self.list_windows()?;
        let window = windows.iter().find(|(w, _)| w.key() == key).ok_or_else(|| format!("no open window has the id {key}"))?;
        let done: bool = self.call("Activate", &(window.0.id.as_str(),))?;
        done.then_some(()).ok_or_else(|| format!("window {key} closed before it could be focused"))
    }

    /// The focused window's pixels, read by the extension only while the
    /// focused window still has this `title` and `pid` (the window the
    /// firewall judged); that window's own actor, so no other window is in them.
    pub fn read_focused(&self, title: &str, pid: u32) -> Result<image::RgbaImage, String> {
        let reply = self.conn.call_method(Some(SHELL), OBJECT_PATH, Some(INTERFACE), "ReadFocused", &(title, pid));
        let reply = match reply {
            Err(zbus::Error::MethodError(name, _, _)) if name.as_str() == "org.freedesktop.DBus.Error.UnknownMethod" => {
                return Err("cowork's GNOME extension is older than this cowork: install it again (`cowork gnome-extension install`), then log out and in".into());
            }
            other => other.map_err(gnome_error("GNOME Shell"))?,
        };
        let png: Vec<u8> = reply.body().deserialize().map_err(|err| format!("the GNOME extension's picture: {err}"))?;
        crate::media::decode(&png).map(|picture| picture.into_rgba8())
    }

    /// Places this process's window titled `title`; false while it is not mapped yet.
    pub fn place(&self, kind: &str, title: &str, width: i32, height: i32) -> Result<bool, String> {
        self.call("Place", &(kind, title, width, height))
    }
}

/// Serves the event object on a new connection and subscribes it to `streams`, again each
/// time the extension says it is ready (it was disabled and enabled: a screen lock, an update).
fn subscribed(streams: &[&'static str], clipboard: Option<Sender<String>>) -> Result<(Extension, Pushed<GnomeWindow>, Resubscriber), String> {
    let conn = super::observed::session_bus()?;
    let dbus = zbus::blocking::fdo::DBusProxy::new(&conn).map_err(|err| format!("the session bus does not answer: {err}"))?;
    let shell = dbus
        .get_name_owner(SHELL.try_into().expect("a valid bus name"))
        .map_err(|err| format!("GNOME Shell is not on the session bus ({err}): is this a GNOME session?"))?
        .to_string();
    let (slot, pushed) = pushed();
    conn.object_server()
        .at(OBJECT_PATH, Events { shell: shell.clone(), slot, clipboard })
        .map_err(|err| format!("cannot serve the GNOME extension's calls: {err}"))?;
    let extension = Extension::new(conn);
    let resubscriber = Resubscriber::spawn(extension.clone(), shell, streams.to_vec())?;
    extension.subscribe(streams)?;
    Ok((extension, pushed, resubscriber))
}

/// Subscribes again with the streams asked for now whenever the extension
/// says `Ready` (only GNOME Shell's own signal counts), on a `gnome-ready`
/// thread that ends when this is dropped.
struct Resubscriber {
    streams: Arc<parking_lot::Mutex<Vec<&'static str>>>,
    stop: Arc<AtomicBool>,
    extension: Extension,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The signals `interface.member` at `path` on `conn`, `capacity` of them queued at most.
fn signals(conn: &zbus::blocking::Connection, interface: &'static str, member: &'static str, path: &'static str, capacity: usize) -> zbus::Result<zbus::blocking::MessageIterator> {
    let rule = zbus::MatchRule::builder().msg_type(zbus::message::Type::Signal).interface(interface)?.member(member)?.path(path)?.build();
    zbus::blocking::MessageIterator::for_match_rule(rule, conn, Some(capacity))
}

impl Resubscriber {
    fn spawn(extension: Extension, shell: String, streams: Vec<&'static str>) -> Result<Self, String> {
        let ready = signals(&extension.conn, INTERFACE, "Ready", OBJECT_PATH, 4).map_err(|err| format!("cannot watch the GNOME extension: {err}"))?;
        let streams = Arc::new(parking_lot::Mutex::new(streams));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_streams, ended, again) = (streams.clone(), stop.clone(), extension.clone());
        let thread = std::thread::Builder::new()
            .name("gnome-ready".into())
            .spawn(move || {
                for message in ready {
                    if ended.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(message) = message else { continue };
                    if message.header().sender().map(|s| s.as_str()) != Some(shell.as_str()) {
                        continue;
                    }
                    let streams = thread_streams.lock().clone();
                    match again.subscribe(&streams) {
                        Ok(_) => tracing::info!("cowork's GNOME extension is back: subscribed again"),
                        Err(err) => tracing::warn!("cowork's GNOME extension is back but refused cowork: {err}"),
                    }
                }
            })
            .map_err(|err| format!("cannot start the gnome-ready thread: {err}"))?;
        Ok(Self { streams, stop, extension, thread: Some(thread) })
    }

    fn set_streams(&self, streams: &[&'static str]) {
        *self.streams.lock() = streams.to_vec();
    }
}

impl Drop for Resubscriber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The thread wakes at the next signal: one of our own (the bus delivers it to us too) wakes it now.
        let _ = self.extension.conn.emit_signal(None::<&str>, OBJECT_PATH, INTERFACE, "Ready", &());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The focused window on GNOME, from cowork's extension (capture's backend there).
pub struct GnomeDesktop {
    extension: Extension,
    pushed: Pushed<GnomeWindow>,
    _resubscriber: Resubscriber,
    idle: Option<IdleMonitorWatch>,
}

impl GnomeDesktop {
    /// Subscribes to focus reports and waits (up to 2 s) for the first.
    pub fn connect() -> Result<Self, String> {
        let (extension, pushed, resubscriber) = subscribed(&["focus"], None)?;
        let mut desktop = Self { extension, pushed, _resubscriber: resubscriber, idle: None };
        let _ = desktop.wait_for_change(Duration::from_secs(2));
        Ok(desktop)
    }

    pub fn with_idle(mut self, idle: Option<IdleMonitorWatch>) -> Self {
        self.idle = idle;
        self
    }

    pub fn wait_for_change(&mut self, timeout: Duration) -> Result<bool, String> {
        Ok(self.pushed.wait_for_change(timeout))
    }

    /// The focused window; None when nothing, or cowork itself, is focused.
    pub fn active_window(&self) -> Option<ActiveWindow> {
        self.pushed.current().filter(|w| w.pid != std::process::id()).map(GnomeWindow::active)
    }

    pub fn is_fullscreen(&self, window: u32) -> bool {
        self.pushed.current().is_some_and(|w| w.key() == window && w.fullscreen)
    }
}

impl Drop for GnomeDesktop {
    fn drop(&mut self) {
        self.extension.unsubscribe();
    }
}

/// The clipboard's text as the extension pushes it, while cowork records it.
pub struct ClipboardWatch {
    extension: Extension,
    resubscriber: Resubscriber,
    texts: Receiver<String>,
    on: bool,
    pending: Option<String>,
}

impl ClipboardWatch {
    /// Connected, asking for nothing until `set_recording(true)`.
    pub fn connect() -> Result<Self, String> {
        let (tx, texts) = bounded(16);
        let (extension, _, resubscriber) = subscribed(&[], Some(tx))?;
        Ok(Self { extension, resubscriber, texts, on: false, pending: None })
    }

    /// Asks the extension for the clipboard only while the stream is on.
    pub fn set_recording(&mut self, on: bool) -> Result<(), String> {
        if on != self.on {
            let streams: &[&'static str] = if on { &["clipboard"] } else { &[] };
            self.resubscriber.set_streams(streams);
            self.extension.subscribe(streams)?;
            self.on = on;
        }
        Ok(())
    }

    /// Waits up to `timeout`; true when a new text came.
    pub fn wait_for_change(&mut self, timeout: Duration) -> bool {
        match self.texts.recv_timeout(timeout) {
            Ok(text) => {
                // Several copies in a burst: the last is the clipboard now.
                self.pending = Some(self.texts.try_iter().last().unwrap_or(text));
                true
            }
            Err(_) => false,
        }
    }

    /// The text that came with the last change.
    pub fn take_text(&mut self) -> Option<String> {
        self.pending.take()
    }
}

impl Drop for ClipboardWatch {
    fn drop(&mut self) {
        self.extension.unsubscribe();
    }
}

// --- dictation -------------------------------------------------------------------

const REMOTE_DESKTOP: &str = "org.gnome.Mutter.RemoteDesktop";
const REMOTE_DESKTOP_PATH: &str = "/org/gnome/Mutter/RemoteDesktop";
const REMOTE_SESSION: &str = "org.gnome.Mutter.RemoteDesktop.Session";

/// Types `text` into the focused window through Mutter's RemoteDesktop:
/// a session opened for this dictation only (GNOME shows its sharing
/// indicator meanwhile) and closed after it, each character sent as its
/// keysym (Mutter finds the key and level in the layout in use). Mutter
/// silently drops a keysym its layout has no key for, so the characters the
/// user's layout (GNOME's input sources) cannot type are not sent but said.
pub fn type_text(text: &str) -> Result<super::ei::Typed, String> {
    let (layout, variant) = current_layout(&Gsettings);
    let table = super::ei::KeyTable::for_layout(&layout, &variant)?;
    type_text_on(&super::observed::session_bus()?, &table, text)
}

/// The XKB layout and variant GNOME uses now: the most recent of its input sources (`us` when none is set).
pub fn current_layout(settings: &dyn GnomeSettings) -> (String, String) {
    let first_xkb = |key: &str| {
        let text = settings.get("org.gnome.desktop.input-sources", key).ok()?;
        let rest = text.split("('xkb', '").nth(1)?;
        let name = rest.split('\'').next()?;
        let (layout, variant) = name.split_once('+').unwrap_or((name, ""));
        Some((layout.to_owned(), variant.to_owned()))
    };
    first_xkb("mru-sources").or_else(|| first_xkb("sources")).unwrap_or_else(|| ("us".to_owned(), String::new()))
}

/// [`type_text`] over `conn` (the session's bus) with the layout `table`.
pub fn type_text_on(conn: &zbus::blocking::Connection, table: &super::ei::KeyTable, text: &str) -> Result<super::ei::Typed, String> {
    let reply = conn
        .call_method(Some(REMOTE_DESKTOP), REMOTE_DESKTOP_PATH, Some(REMOTE_DESKTOP), "CreateSession", &())
        .map_err(|err| format!("Mutter's RemoteDesktop refused a session: {err}"))?;
    let session: zbus::zvariant::OwnedObjectPath = reply.body().deserialize().map_err(|err| format!("Mutter's RemoteDesktop answered oddly: {err}"))?;
    let session = session.as_str();
    session_call(conn, session, "Start", &())?;
    let typed = (|| -> Result<super::ei::Typed, String> {
        let mut done = super::ei::Typed::default();
        for c in text.chars() {
            if super::keysym::keysym_for(c).is_none() {
                continue;
            }
            // The keysym the layout names it by (Cyrillic_ya, not U+044F's Unicode keysym):
            // Mutter matches keysyms literally.
            let Some(keysym) = table.key(c).map(|_| table.keysym(c)) else {
                done.untypeable.push(c);
                continue;
            };
            session_call(conn, session, "NotifyKeyboardKeysym", &(keysym, true))?;
            session_call(conn, session, "NotifyKeyboardKeysym", &(keysym, false))?;
            done.typed += 1;
        }
        Ok(done)
    })();
    let stopped = session_call(conn, session, "Stop", &());
    let typed = typed?;
    stopped.map(|()| typed)
}

fn session_call(conn: &zbus::blocking::Connection, session: &str, method: &str, body: &(impl serde::Serialize + zbus::zvariant::DynamicType)) -> Result<(), String> {
    conn.call_method(Some(REMOTE_DESKTOP), session, Some(REMOTE_SESSION), method, body).map(|_| ()).map_err(|err| format!("Mutter's RemoteDesktop {method}: {err}"))
}

// --- away detection ---------------------------------------------------------------

const IDLE_MONITOR: &str = "org.gnome.Mutter.IdleMonitor";
const IDLE_MONITOR_PATH: &str = "/org/gnome/Mutter/IdleMonitor/Core";

/// Presence from Mutter's IdleMonitor: an idle watch fires after a grain
/// without input, then a user-active watch fires at the next input. The
/// watches and their signal are read on an `idle` thread; dropping ends it.
pub struct IdleMonitorWatch {
    presence: Arc<Presence>,
    stop: Arc<AtomicBool>,
    conn: zbus::blocking::Connection,
    idle_watch: u32,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn idle_call(conn: &zbus::blocking::Connection, method: &str, body: &(impl serde::Serialize + zbus::zvariant::DynamicType)) -> Result<u32, String> {
    let reply = conn.call_method(Some(IDLE_MONITOR), IDLE_MONITOR_PATH, Some(IDLE_MONITOR), method, body).map_err(|err| err.to_string())?;
    reply.body().deserialize::<u32>().map_err(|err| err.to_string())
}

impl IdleMonitorWatch {
    pub fn connect() -> Result<Self, String> {
        let conn = super::observed::session_bus()?;
        let dbus = zbus::blocking::fdo::DBusProxy::new(&conn).map_err(|err| format!("the session bus does not answer: {err}"))?;
        let mutter = dbus
            .get_name_owner(IDLE_MONITOR.try_into().expect("a valid bus name"))
            .map_err(|err| format!("Mutter's IdleMonitor is not on the session bus: {err}"))?
            .to_string();
        let fired = signals(&conn, IDLE_MONITOR, "WatchFired", IDLE_MONITOR_PATH, 8).map_err(|err| format!("cannot watch Mutter's IdleMonitor: {err}"))?;
        let idle_watch = idle_call(&conn, "AddIdleWatch", &(super::observed::IDLE_GRAIN.as_millis() as u64,)).map_err(|err| format!("Mutter's IdleMonitor: {err}"))?;
        let presence = Arc::new(Presence::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_presence, ended, thread_conn) = (presence.clone(), stop.clone(), conn.clone());
        let thread = std::thread::Builder::new()
            .name("idle".into())
            .spawn(move || {
                let mut active_watch: Option<u32> = None;
                for message in fired {
                    if ended.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(message) = message else { continue };
                    // Only Mutter's own signals count (anyone may emit one with this name).
                    if message.header().sender().map(|s| s.as_str()) != Some(mutter.as_str()) {
                        continue;
                    }
                    let Ok(id) = message.body().deserialize::<u32>() else { continue };
                    if id == idle_watch {
                        thread_presence.set_idle(true);
                        // A user-active watch fires once, at the next input.
                        match idle_call(&thread_conn, "AddUserActiveWatch", &()) {
                            Ok(watch) => active_watch = Some(watch),
                            Err(err) => tracing::warn!(error = %err, "Mutter's IdleMonitor refused a user-active watch"),
                        }
                    } else if Some(id) == active_watch {
                        active_watch = None;
                        thread_presence.set_idle(false);
                    }
                }
            })
            .map_err(|err| format!("cannot start the idle thread: {err}"))?;
        Ok(Self { presence, stop, conn, idle_watch, thread: Some(thread) })
    }

    pub fn presence(&self) -> Arc<Presence> {
        self.presence.clone()
    }
}

impl Drop for IdleMonitorWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.conn.call_method(Some(IDLE_MONITOR), IDLE_MONITOR_PATH, Some(IDLE_MONITOR), "RemoveWatch", &(self.idle_watch,));
        // The thread wakes at the next signal: one of our own (the bus delivers it to us too) wakes it now.
        let _ = self.conn.emit_signal(None::<&str>, IDLE_MONITOR_PATH, IDLE_MONITOR, "WatchFired", &(u32::MAX,));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn gsettings_lists_are_read_and_written_back_exactly() {
        assert_eq!(parse_string_array("@as []").unwrap(), Vec::<String>::new());
        assert_eq!(parse_string_array("['a@b.c', 'd@e']\n").unwrap(), vec!["a@b.c", "d@e"]);
        assert_eq!(parse_string_array(r#"["it's@x", 'q\'uote']"#).unwrap(), vec!["it's@x", "q'uote"]);
        assert!(parse_string_array("['unfinished").is_err());
        assert!(parse_string_array("nonsense").is_err());
        let odd = vec!["a'b".to_owned(), "c\\d".to_owned(), "e@f".to_owned()];
        assert_eq!(parse_string_array(&format_string_array(&odd)).unwrap(), odd, "a round trip keeps every name");
    }

    #[test]
    fn versions_pick_the_variant() {
        assert_eq!(major_version("43.9"), Some(43));
        assert_eq!(major_version("GNOME Shell 47.2"), Some(47));
        assert_eq!(major_version("48.alpha"), Some(48));
        assert_eq!(major_version("x"), None);
        assert!(extension_source(44).contains("imports.gi") && !extension_source(44).contains("export default"));
        assert!(extension_source(45).contains("import Gio from 'gi://Gio'") && extension_source(45).contains("export default class"));
        assert!(metadata(43).contains("\"44\"") && !metadata(43).contains("\"45\""));
        assert!(metadata(46).contains("\"46\"") && !metadata(46).contains("\"43\""));
    }

    /// GNOME's settings in memory (`read_only`: every write fails, as a locked dconf key does).
    #[derive(Default)]
    struct Fake {
        values: RefCell<std::collections::HashMap<String, String>>,
        read_only: bool,
    }

    impl Fake {
        fn with(schema: &str, key: &str, value: &str) -> Fake {
            let fake = Fake::default();
            fake.values.borrow_mut().insert(format!("{schema} {key}"), value.to_owned());
            fake
        }

        fn list(&self, schema: &str, key: &str) -> Vec<String> {
            parse_string_array(&self.get(schema, key).unwrap()).unwrap()
        }
    }

    impl GnomeSettings for Fake {
        fn get(&self, schema: &str, key: &str) -> Result<String, String> {
            Ok(self.values.borrow().get(&format!("{schema} {key}")).cloned().unwrap_or_else(|| "@as []".into()))
        }
        fn set(&self, schema: &str, key: &str, value: &str) -> Result<(), String> {
            if self.read_only {
                return Err("dconf is read-only".into());
            }
            self.values.borrow_mut().insert(format!("{schema} {key}"), value.to_owned());
            Ok(())
        }
    }

    #[test]
    fn the_layout_in_use_is_the_most_recent_xkb_input_source() {
        let settings = Fake::with("org.gnome.desktop.input-sources", "mru-sources", "[('ibus', 'mozc-jp'), ('xkb', 'de+nodeadkeys'), ('xkb', 'us')]");
        assert_eq!(current_layout(&settings), ("de".to_owned(), "nodeadkeys".to_owned()));
        let settings = Fake::with("org.gnome.desktop.input-sources", "sources", "[('xkb', 'fr')]");
        assert_eq!(current_layout(&settings), ("fr".to_owned(), String::new()), "no recent one: the first configured");
        assert_eq!(current_layout(&Fake::default()), ("us".to_owned(), String::new()));
    }

    #[test]
    fn install_keeps_earlier_programs_and_other_extensions_and_a_failure_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let ext = dir.path().join(UUID);
        let settings = Fake::with(SHELL_SCHEMA, "enabled-extensions", "['other@x']");
        let first = install(&ext, 43, Path::new("/usr/bin/cowork"), &settings).unwrap();
        assert!(first.newly_enabled);
        let again = install(&ext, 43, Path::new("/opt/cowork/bin/cowork"), &settings).unwrap();
        assert!(!again.newly_enabled);
        assert_eq!(settings.list(SHELL_SCHEMA, "enabled-extensions"), vec!["other@x".to_owned(), UUID.to_owned()]);
        let allowed = std::fs::read_to_string(ext.join(ALLOWED_FILE)).unwrap();
        let paths: Vec<&str> = allowed.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(paths, ["/usr/bin/cowork", "/opt/cowork/bin/cowork"]);
        assert!(!std::fs::read_dir(&ext).unwrap().flatten().any(|e| e.file_name().to_string_lossy().ends_with(".part")), "no partial file left");
        let read_only = Fake { read_only: true, ..Fake::default() };
        let err = install(&dir.path().join("second"), 45, Path::new("/usr/bin/cowork"), &read_only).unwrap_err();
        assert!(err.contains("read-only"), "{err}");
        remove(&ext, &settings).unwrap();
        assert_eq!(settings.list(SHELL_SCHEMA, "enabled-extensions"), vec!["other@x".to_owned()]);
        assert!(!ext.exists());
        remove(&ext, &settings).unwrap();
    }

    #[test]
    fn a_window_is_known_by_mutters_id_and_named_by_its_app() {
        let window = GnomeWindow { title: "Notes".into(), wm_class: "org.gnome.TextEditor".into(), pid: 7, id: "42".into(), ..Default::default() };
        assert_eq!(window.key(), GnomeWindow { title: "Other".into(), ..window.clone() }.key(), "a title change keeps the window");
        assert_ne!(window.key(), GnomeWindow { id: "43".into(), ..window.clone() }.key());
        assert_eq!(window.app(), "org.gnome.TextEditor");
        assert_eq!(GnomeWindow { sandboxed_app_id: "org.mozilla.firefox".into(), ..window.clone() }.app(), "org.mozilla.firefox");
        assert_eq!(GnomeWindow::default().app(), "unknown");
        assert!(GnomeWindow::from_tuple(("".into(), "".into(), "".into(), "".into(), 0, false, "".into())).is_none(), "an empty id: nothing focused");
    }
}

#[cfg(test)]
mod shortcut_tests {
    use super::*;

    #[test]
    fn custom_shortcuts_run_this_cowork_and_keep_the_users_own() {
        assert_eq!(gnome_accelerator("ctrl+alt+Space"), "<Control><Alt>space");
        assert_eq!(gnome_accelerator("super+shift+KeyV"), "<Super><Shift>v");
        let shortcuts = custom_shortcuts(Path::new("/opt/it's/cowork"), "ctrl+alt+Space", "ctrl+alt+KeyP", "ctrl+alt+KeyV");
        assert_eq!(shortcuts[0].command, "'/opt/it'\\''s/cowork' trigger quick-prompt", "a path with a quote stays one word");
        assert!(shortcuts[2].command.ends_with("trigger talk-tap") && shortcuts[2].name.contains("tap"), "push-to-talk is said to be a tap here");
        assert_eq!(gvariant_string("it's \\ here"), "'it\\'s \\\\ here'");
    }
}
