//! KDE Plasma on Wayland: KWin tells ordinary apps nothing about other
//! windows, so cowork loads its own KWin script (`assets/kwin/cowork-desktop.js`)
//! over D-Bus (`org.kde.KWin /Scripting loadScript` + `run`) and the script
//! calls cowork back on the session bus whenever the focus moves or the
//! focused window's caption or fullscreen state changes: caption, resource
//! class (the Wayland app id, or an X app's WM_CLASS), resource name, pid and
//! KWin's id. The calls go to cowork's unique bus name, written into the
//! script when it is loaded, and a call from anyone but the owner of
//! `org.kde.KWin` is refused. The script is unloaded when the backend is
//! dropped (at quit), and its file removed.
//!
//! Script files are written only into a directory private to the user (the
//! runtime directory, else one cowork makes with a random name and mode 0700),
//! as new files opened without following a symlink (`script_dir`, `write_script`).
//!
//! `Scripting` loads and unloads cowork's scripts (Plasma 6's
//! `/Scripting/ScriptN` or Plasma 5's `/N`). `place_script`
//! (`assets/kwin/cowork-place.js`) is a placement as a script: the sidebar
//! kept above, on every desktop and docked right, the quick prompt centred,
//! above and focused — cowork's windows only, by pid and title. The agent's
//! window tools run a one-shot script (`assets/kwin/cowork-windows.js`) that
//! answers on the request's own connection. The clipboard on KDE is KWin's
//! data-control, through `wlr`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::observed::{PushSlot, Pushed, pushed};
use crate::records::ActiveWindow;

const SCRIPT: &str = include_str!("../../assets/kwin/cowork-desktop.js");
/// Where cowork answers the script (its unique name is the destination).
pub const OBJECT_PATH: &str = "/org/cowork/KWin";
pub const INTERFACE: &str = "org.cowork.KWin1";
const KWIN: &str = "org.kde.KWin";

/// The focused window as KWin describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KWinWindow {
    pub caption: String,
    pub resource_class: String,
    pub resource_name: String,
    pub pid: u32,
    pub fullscreen: bool,
    /// KWin's id for the window (a UUID), stable while it lives.
    pub id: String,
}

impl KWinWindow {
    /// The id the rest of cowork knows the window by (nonzero, stable while it lives).
    pub fn key(&self) -> u32 {
        super::observed::window_key(&self.resource_class, &self.id)
    }

    pub fn active(&self) -> ActiveWindow {
        ActiveWindow { window_id: self.key(), app: self.app(), title: self.caption.clone(), pid: (self.pid > 0).then_some(self.pid), url: None, url_source: None }
    }

    fn app(&self) -> String {
        [&self.resource_class, &self.resource_name].into_iter().find(|s| !s.is_empty()).cloned().unwrap_or_else(|| "unknown".into())
    }
}

/// The object the script calls.
struct Listener {
    /// The unique name that owned `org.kde.KWin` when the script was loaded.
    kwin: String,
    slot: PushSlot<KWinWindow>,
}

// One call at a time, in order (a caption change must not overtake the activation before it).
#[zbus::interface(name = "org.cowork.KWin1", spawn = false)]
impl Listener {
    /// The focused window changed, or its caption or fullscreen state did (an empty `id`: nothing is focused).
    #[allow(clippy::too_many_arguments)]
    fn focused(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        caption: String,
        resource_class: String,
        resource_name: String,
        pid: i32,
        fullscreen: bool,
        id: String,
    ) -> zbus::fdo::Result<()> {
        if header.sender().map(|s| s.as_str()) != Some(self.kwin.as_str()) {
            tracing::warn!(sender = ?header.sender().map(|s| s.to_string()), "refused a window report that did not come from KWin");
            return Err(zbus::fdo::Error::AccessDenied("only KWin tells cowork about windows".into()));
        }
        self.slot.report((!id.is_empty()).then(|| KWinWindow { caption, resource_class, resource_name, pid: pid.max(0) as u32, fullscreen, id }));
        Ok(())
    }
}

/// Loading cowork's scripts into KWin and unloading them, over the session bus.
#[derive(Clone)]
pub struct Scripting {
    conn: zbus::blocking::Connection,
}

impl Scripting {
    pub fn new(conn: zbus::blocking::Connection) -> Self {
        Self { conn }
    }

    /// Over the session bus this process uses.
    pub fn session() -> Result<Self, String> {
        super::observed::session_bus().map(Self::new)
    }

    fn call(&self, method: &str, body: &(impl serde::Serialize + zbus::zvariant::DynamicType)) -> Result<zbus::message::Message, String> {
        self.conn.call_method(Some(KWIN), "/Scripting", Some("org.kde.kwin.Scripting"), method, body).map_err(kwin_error("KWin refused cowork's script"))
    }

    /// Writes `source` to `file` (in `script_dir`, see `write_script`) and runs it in KWin
    /// as `plugin`, replacing a script of that name.
    pub fn load(&self, plugin: &str, file: &std::path::Path, source: &str) -> Result<(), String> {
        write_script(file, source)?;
        self.unload(plugin);
        let path = file.to_string_lossy().into_owned();
        let reply = self.call("loadScript", &(path.as_str(), plugin))?;
        let id: i32 = reply.body().deserialize().map_err(kwin_error("KWin's answer to loadScript"))?;
        if id < 0 {
            return Err(format!("KWin did not load cowork's script {path} ({id})"));
        }
        // Plasma 6 serves the script at /Scripting/ScriptN, Plasma 5 at /N.
        let mut last = String::new();
        let ran = [format!("/Scripting/Script{id}"), format!("/{id}")].iter().any(|object| {
            self.conn.call_method(Some(KWIN), object.as_str(), Some("org.kde.kwin.Script"), "run", &()).map_err(|err| last = err.to_string()).is_ok()
        });
        // KWin 5 numbers a script by the length of its list, so after any script was unloaded a
        // new one can get the number, and the D-Bus path, of one still loaded: `run` then reaches
        // that one and ours never starts. `start` runs every loaded script not running yet
        // (and loads the user's enabled packaged scripts, which are loaded already).
        let started = self.call("start", &());
        if !ran && let Err(err) = started {
            return Err(format!("KWin loaded cowork's script but would not run it: {last}; {err}"));
        }
        Ok(())
    }

    /// Unloads the script `plugin`; whether KWin had it.
    pub fn unload(&self, plugin: &str) -> bool {
        self.call("unloadScript", &(plugin,)).ok().and_then(|reply| reply.body().deserialize::<bool>().ok()).unwrap_or(false)
    }
}

/// Where cowork writes the script `name` before KWin loads it: in `script_dir`.
pub fn script_path(name: &str) -> Result<PathBuf, String> {
    Ok(script_dir(std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from), &std::env::temp_dir())?.join(name))
}

/// The directory cowork writes its KWin scripts in (KWin runs as the user and reads them
/// from there), private to the user: the runtime directory `runtime` when it is a real
/// directory of this user's that no one else may enter, else one cowork makes itself in
/// `temp`, with a random name and mode 0700. Never the shared temporary directory itself:
/// anyone may put a file or a symlink at a predictable name there, and a write through
/// that link would overwrite whatever file it names.
fn script_dir(runtime: Option<PathBuf>, temp: &Path) -> Result<PathBuf, String> {
    if let Some(runtime) = runtime.filter(|dir| dir.is_absolute() && is_private(dir)) {
        return Ok(runtime);
    }
    // One per process and temporary directory, made again if it went.
    static MADE: parking_lot::Mutex<Vec<PathBuf>> = parking_lot::Mutex::new(Vec::new());
    let mut made = MADE.lock();
    made.retain(|dir| is_private(dir));
    if let Some(dir) = made.iter().find(|dir| dir.parent() == Some(temp)) {
        return Ok(dir.clone());
    }
    let dir = make_private_dir(temp)?;
    made.push(dir.clone());
    Ok(dir)
}

/// Whether `dir` is a directory (not a symlink to one) that this user owns and no one else may enter.
fn is_private(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.file_type().is_dir() && meta.uid() == me && meta.mode() & 0o077 == 0)
}

/// A new directory in `parent` with a random name, for this user only.
fn make_private_dir(parent: &Path) -> Result<PathBuf, String> {
    use aes_gcm::aead::{OsRng, rand_core::RngCore};
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let cannot = |err: std::io::Error| format!("cannot make a private directory for cowork's KWin scripts in {}: {err}", parent.display());
    for _ in 0..8 {
        let mut random = [0u8; 12];
        OsRng.fill_bytes(&mut random);
        let name: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let dir = parent.join(format!("cowork-kwin-{name}"));
        // mkdir makes a new directory or fails: whatever is at the name, a link included, is never used.
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(cannot(err)),
        }
        // 0700 whatever the umask, set on the directory just made (opened without following a link).
        let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW).open(&dir).map_err(cannot)?;
        opened.set_permissions(std::fs::Permissions::from_mode(0o700)).map_err(cannot)?;
        if !is_private(&dir) {
            return Err(format!("the directory cowork made for its KWin scripts is not private to this user: {}", dir.display()));
        }
        return Ok(dir);
    }
    Err(format!("cannot make a private directory for cowork's KWin scripts in {}: every random name was taken", parent.display()))
}

/// Writes `source` to `file` as a new file only this user may read, in a private
/// directory (`script_dir`): never through a symlink (`O_NOFOLLOW`) and never into a
/// file that was there (`O_EXCL`). A file left at that name (by a cowork that did not
/// quit) is removed first; removing a name never follows a link.
fn write_script(file: &Path, source: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if !file.parent().is_some_and(is_private) {
        return Err(format!("cowork writes KWin scripts only into a directory private to this user, not {}", file.display()));
    }
    let cannot = |err: std::io::Error| format!("cannot write the KWin script to {}: {err}", file.display());
    let create = || std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(file);
    let mut out = match create() {
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(file).map_err(cannot)?;
            create()
        }
        other => other,
    }
    .map_err(cannot)?;
    out.write_all(source.as_bytes()).map_err(cannot)
}

/// Which of cowork's windows a placement script is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaceKind {
    /// Kept above, on every desktop, docked right at the work area's full height, `width` wide.
    Sidebar { width: i32 },
    /// Kept above, centred a third of the way down, focused.
    Prompt { width: i32, height: i32 },
}

const PLACE_SCRIPT: &str = include_str!("../../assets/kwin/cowork-place.js");

/// The placement script for a window of this process titled `title`.
pub fn place_script(kind: PlaceKind, pid: u32, title: &str) -> String {
    let (name, width, height) = match kind {
        PlaceKind::Sidebar { width } => ("sidebar", width, 0),
        PlaceKind::Prompt { width, height } => ("prompt", width, height),
    };
    let title = title.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
    PLACE_SCRIPT
        .replace("@COWORK_PID@", &pid.to_string())
        .replace("@TITLE@", &title)
        .replace("@KIND@", name)
        .replace("@WIDTH@", &width.to_string())
        .replace("@HEIGHT@", &height.to_string())
}

const WINDOWS_SCRIPT: &str = include_str!("../../assets/kwin/cowork-windows.js");

/// Receives the window-list script's one call.
struct WindowsListener {
    kwin: String,
    answer: crossbeam_channel::Sender<String>,
}

#[zbus::interface(name = "org.cowork.KWinWindows1", spawn = false)]
impl WindowsListener {
    /// The normal windows, as JSON rows: caption, resource class, resource name, pid, KWin's id, focused.
    fn windows(&self, #[zbus(header)] header: zbus::message::Header<'_>, json: String) -> zbus::fdo::Result<()> {
        if header.sender().map(|s| s.as_str()) != Some(self.kwin.as_str()) {
            return Err(zbus::fdo::Error::AccessDenied("only KWin tells cowork about windows".into()));
        }
        let _ = self.answer.try_send(json);
        Ok(())
    }
}

/// The normal windows KWin has, with whether each has the focus, after focusing the one
/// whose KWin id is `activate` (empty: none): a one-shot script over `conn` (a connection
/// of this request's own, to the session's bus), which answers on it.
fn windows_script(conn: &zbus::blocking::Connection, activate: &str) -> Result<Vec<(KWinWindow, bool)>, String> {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dbus = zbus::blocking::fdo::DBusProxy::new(conn).map_err(kwin_error("the session bus does not answer"))?;
    let kwin = dbus.get_name_owner(KWIN.try_into().expect("a valid bus name")).map_err(|err| format!("KWin is not on the session bus: {err}"))?.to_string();
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let plugin = format!("cowork-windows-{}-{run}", std::process::id());
    let file = script_path(&format!("{plugin}.js"))?;
    let (answer, answers) = crossbeam_channel::bounded(1);
    conn.object_server().at(OBJECT_PATH, WindowsListener { kwin, answer }).map_err(kwin_error("cannot serve the window list's answer"))?;
    let unique = conn.unique_name().ok_or("the session bus gave cowork no name")?.to_string();
    let scripting = Scripting::new(conn.clone());
    let id = activate.replace(['\\', '"'], "");
    let loaded = scripting.load(&plugin, &file, &WINDOWS_SCRIPT.replace("@COWORK_BUS_NAME@", &unique).replace("@ACTIVATE@", &id));
    let json = loaded.and_then(|()| answers.recv_timeout(Duration::from_secs(3)).map_err(|_| "KWin did not list its windows within 3 s".to_owned()));
    scripting.unload(&plugin);
    let _ = std::fs::remove_file(&file);
    let _ = conn.object_server().remove::<WindowsListener, _>(OBJECT_PATH);
    let rows: Vec<(String, String, String, i64, String, bool)> = serde_json::from_str(&json?).map_err(|err| format!("KWin's window list: {err}"))?;
    Ok(rows
        .into_iter()
        .map(|(caption, resource_class, resource_name, pid, id, focused)| {
            (KWinWindow { caption, resource_class, resource_name, pid: pid.clamp(0, u32::MAX as i64) as u32, fullscreen: false, id }, focused)
        })
        .collect())
}

/// The agent's `list_windows` on KDE Plasma: the normal windows but cowork's own.
pub fn list_windows(conn: &zbus::blocking::Connection) -> Result<Vec<ActiveWindow>, String> {
    let me = std::process::id();
    Ok(windows_script(conn, "")?
        .into_iter()
        .filter(|(w, _)| w.pid != me)
        .map(|(w, _)| w.active())
        .collect())
}

/// The window KWin has focused now (a one-shot script asks it).
pub fn focused_window(conn: &zbus::blocking::Connection) -> Result<Option<KWinWindow>, String> {
    Ok(windows_script(conn, "")?.into_iter().find(|(_, focused)| *focused).map(|(w, _)| w))
}

/// The agent's `focus_window` on KDE Plasma: the window `key` names (from `list_windows`).
pub fn activate(conn: &zbus::blocking::Connection, key: u32) -> Result<(), String> {
    let windows = windows_script(conn, "")?;
    let (window, _) = windows.iter().find(|(w, _)| w.key() == key).ok_or_else(|| format!("no open window has the id {key}"))?;
    let after = windows_script(conn, &window.id)?;
    if after.iter().any(|(w, focused)| *focused && w.id == window.id) {
        Ok(())
    } else {
        Err(format!("KWin did not focus window {key}"))
    }
}

/// The focused window on KDE Plasma, from cowork's KWin script.
pub struct KWinDesktop {
    scripting: Scripting,
    plugin: String,
    script_file: PathBuf,
    pushed: Pushed<KWinWindow>,
    /// Presence from KWin's Wayland idle notification, kept as long as the backend.
    idle: Option<super::wlr::IdleWatch>,
}

fn kwin_error(what: &str) -> impl Fn(zbus::Error) -> String + '_ {
    move |err| format!("{what}: {err}")
}

impl KWinDesktop {
    /// Serves the listener, loads and runs the script, and waits (up to 2 s) for its first report.
    pub fn connect() -> Result<Self, String> {
        let conn = super::observed::session_bus()?;
        let dbus = zbus::blocking::fdo::DBusProxy::new(&conn).map_err(kwin_error("the session bus does not answer"))?;
        let kwin = dbus
            .get_name_owner(KWIN.try_into().expect("a valid bus name"))
            .map_err(|err| format!("KWin is not on the session bus ({err}): is this a KDE Plasma session?"))?
            .to_string();
        let (slot, pushed) = pushed();
        conn.object_server()
            .at(OBJECT_PATH, Listener { kwin, slot })
            .map_err(kwin_error("cannot serve the KWin script's calls"))?;
        let unique = conn.unique_name().ok_or("the session bus gave cowork no name")?.to_string();
        let pid = std::process::id();
        let script_file = script_path(&format!("cowork-kwin-{pid}.js"))?;
        let plugin = format!("cowork-desktop-{pid}");
        let scripting = Scripting::new(conn);
        scripting.load(&plugin, &script_file, &SCRIPT.replace("@COWORK_BUS_NAME@", &unique))?;
        let mut desktop = Self { scripting, plugin, script_file, pushed, idle: None };
        // The script tells the focused window as it starts.
        let _ = desktop.wait_for_change(Duration::from_secs(2));
        Ok(desktop)
    }

    /// Keeps the idle watch whose presence capture reads alive with the backend.
    pub fn with_idle(mut self, idle: Option<super::wlr::IdleWatch>) -> Self {
        self.idle = idle;
        self
    }

    /// Waits up to `timeout`; true when the focused window, its caption or its fullscreen state changed.
    pub fn wait_for_change(&mut self, timeout: Duration) -> Result<bool, String> {
        Ok(self.pushed.wait_for_change(timeout))
    }

    /// The focused window; None when nothing, or cowork itself, is focused.
    pub fn active_window(&self) -> Option<ActiveWindow> {
        self.pushed.current().filter(|w| w.pid != std::process::id()).map(KWinWindow::active)
    }

    pub fn is_fullscreen(&self, window: u32) -> bool {
        self.pushed.current().is_some_and(|w| w.key() == window && w.fullscreen)
    }

    /// KWin's UUID of `window`, when it is the focused one.
    pub fn handle(&self, window: u32) -> Option<String> {
        self.pushed.current().filter(|w| w.key() == window && !w.id.is_empty()).map(|w| w.id.clone())
    }
}

/// What KWin's ScreenShot2 interface hands back with a window's pixels.
const SCREENSHOT2_PATH: &str = "/org/kde/KWin/ScreenShot2";
const SCREENSHOT2: &str = "org.kde.KWin.ScreenShot2";

/// The pixels of the window KWin knows by `handle` (its UUID), and no other
/// window's: KWin renders that window alone (`ScreenShot2.CaptureWindow`,
/// without its decoration or the cursor) into a pipe. KWin answers only
/// programs whose desktop entry lists `org.kde.KWin.ScreenShot2` in
/// `X-KDE-DBUS-Restricted-Interfaces` (cowork's does).
pub fn capture_window(conn: &zbus::blocking::Connection, handle: &str) -> Result<image::RgbaImage, String> {
    use std::io::Read;
    use zbus::zvariant::{OwnedValue, Value};
    let (mut reader, writer) = std::io::pipe().map_err(|err| format!("cannot make a pipe: {err}"))?;
    let options: std::collections::HashMap<&str, Value<'_>> =
        [("include-decoration", Value::from(false)), ("include-cursor", Value::from(false)), ("native-resolution", Value::from(true))].into_iter().collect();
    // The picture arrives on the pipe while KWin answers: read it on a thread of its own.
    let drain = std::thread::Builder::new()
        .name("kwin-pixels".into())
        .spawn(move || {
            let mut bytes = Vec::new();
            (&mut reader).take(MAX_PICTURE_BYTES + 1).read_to_end(&mut bytes).map(|_| bytes)
        })
        .map_err(|err| err.to_string())?;
    let fd = zbus::zvariant::OwnedFd::from(std::os::fd::OwnedFd::from(writer));
    let reply = conn.call_method(Some(KWIN), SCREENSHOT2_PATH, Some(SCREENSHOT2), "CaptureWindow", &(handle, options, fd));
    // A KWin that keeps the pipe open does not hold the caller: the reader is left to end with it.
    let deadline = std::time::Instant::now() + PIPE_TIMEOUT;
    while !drain.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    if !drain.is_finished() {
        return Err("KWin did not finish sending the window's pixels".into());
    }
    let bytes = drain.join().map_err(|_| "the pipe reader failed".to_owned())?.map_err(|err| format!("cannot read the window's pixels: {err}"))?;
    let reply = reply.map_err(|err| match err {
        zbus::Error::MethodError(name, text, _) if name.as_str().ends_with("NoAuthorized") => {
            format!("KWin does not let cowork read windows ({}): cowork's desktop entry must be installed (the .deb installs it)", text.unwrap_or_default())
        }
        err => format!("KWin's ScreenShot2: {err}"),
    })?;
    let results: std::collections::HashMap<String, OwnedValue> = reply.body().deserialize().map_err(|err| format!("KWin's ScreenShot2 answer: {err}"))?;
    let number = |key: &str| results.get(key).and_then(|v| u32::try_from(v).ok()).ok_or_else(|| format!("KWin's ScreenShot2 gave no {key}"));
    let (width, height, stride, format) = (number("width")?, number("height")?, number("stride")?, number("format")?);
    if u64::from(stride) * u64::from(height) > bytes.len() as u64 || u64::from(stride) < u64::from(width) * 4 {
        return Err(format!("KWin's ScreenShot2 sent {} bytes for {width}×{height} (stride {stride})", bytes.len()));
    }
    // QImage formats: 4 RGB32, 5 ARGB32, 6 ARGB32 premultiplied — 0xAARRGGBB words, little-endian bytes B, G, R, A.
    if !matches!(format, 4..=6) {
        return Err(format!("KWin's ScreenShot2 sent QImage format {format}, which cowork does not read"));
    }
    super::wlr_pixels::to_rgba(&bytes, wayland_client::protocol::wl_shm::Format::Argb8888, width, height, stride, false)
}

/// How long KWin may take to send a window's pixels.
const PIPE_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest picture read from KWin (an 8K window, 4 bytes a pixel).
const MAX_PICTURE_BYTES: u64 = 7680 * 4320 * 4;

impl Drop for KWinDesktop {
    fn drop(&mut self) {
        if !self.scripting.unload(&self.plugin) {
            tracing::warn!(plugin = %self.plugin, "cowork's KWin script was not loaded at quit");
        }
        let _ = std::fs::remove_file(&self.script_file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_handles_plasma_5_and_6_and_calls_only_the_name_written_in() {
        assert_eq!(SCRIPT.matches("@COWORK_BUS_NAME@").count(), 1, "the one place cowork's name goes");
        for name in ["windowActivated", "clientActivated", "activeWindow", "activeClient", "windowRemoved", "clientRemoved", "captionChanged", "fullScreenChanged"] {
            assert!(SCRIPT.contains(name), "{name}");
        }
        // Every call goes to COWORK on our path and interface, with the arguments `focused` takes.
        let calls: Vec<&str> = SCRIPT.match_indices("callDBus(").map(|(i, _)| &SCRIPT[i..]).collect();
        assert_eq!(calls.len(), 2);
        for call in calls {
            assert!(call.starts_with("callDBus(COWORK, PATH, IFACE, \"Focused\","), "{}", &call[..60]);
        }
        assert!(SCRIPT.contains(&format!("var PATH = \"{OBJECT_PATH}\";")) && SCRIPT.contains(&format!("var IFACE = \"{INTERFACE}\";")));
    }

    #[test]
    fn the_placement_script_is_for_this_process_and_title_only() {
        let sidebar = place_script(PlaceKind::Sidebar { width: 380 }, 4242, "cowork");
        assert!(!sidebar.contains('@'), "every placeholder filled");
        for line in ["var PID = Number(\"4242\");", "var TITLE = \"cowork\";", "var KIND = \"sidebar\";", "var WIDTH = Number(\"380\");"] {
            assert!(sidebar.contains(line), "{line}");
        }
        assert!(sidebar.contains("window.pid !== PID || String(window.caption) !== TITLE"), "other windows are never touched");
        let prompt = place_script(PlaceKind::Prompt { width: 640, height: 120 }, 1, "cowork quick prompt");
        assert!(prompt.contains("var KIND = \"prompt\";") && prompt.contains("var HEIGHT = Number(\"120\");"));
        // A title cannot end the string it is written into.
        let odd = place_script(PlaceKind::Sidebar { width: 1 }, 1, "a\"; workspace.x = 1; \"\\");
        assert!(odd.contains(r#"var TITLE = "a\"; workspace.x = 1; \"\\";"#), "{}", odd.lines().find(|l| l.starts_with("var TITLE")).unwrap());
    }

    #[test]
    fn a_window_is_known_by_kwins_id_and_named_by_its_class() {
        let window = KWinWindow { caption: "Notes".into(), resource_class: "org.kde.kate".into(), resource_name: "kate".into(), pid: 7, fullscreen: false, id: "{a}".into() };
        let renamed = KWinWindow { caption: "Other".into(), ..window.clone() };
        assert_eq!(window.key(), renamed.key(), "a caption change keeps the window");
        assert_ne!(window.key(), KWinWindow { id: "{b}".into(), ..window.clone() }.key());
        assert_eq!(window.app(), "org.kde.kate");
        assert_eq!(KWinWindow { resource_class: String::new(), ..window.clone() }.app(), "kate");
        assert_eq!(KWinWindow::default().app(), "unknown");
    }

    #[test]
    fn scripts_go_only_into_a_private_directory_and_never_through_a_planted_symlink() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        // A shared temporary directory where another user planted symlinks at the names
        // cowork used to write (temp_dir()/cowork-kwin-PID.js and friends), aimed at a file of the user's.
        let temp = tempfile::tempdir().unwrap();
        let shared = temp.path();
        std::fs::set_permissions(shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let victim = shared.join("victim.txt");
        std::fs::write(&victim, "the user's file").unwrap();
        let pid = std::process::id();
        let names = [format!("cowork-kwin-{pid}.js"), format!("cowork-place-{pid}-sidebar.js"), format!("cowork-windows-{pid}-0.js")];
        for name in &names {
            symlink(&victim, shared.join(name)).unwrap();
        }
        // No runtime directory: a directory of cowork's own, 0700, random name, inside the shared one.
        let dir = script_dir(None, shared).unwrap();
        assert_ne!(dir, shared);
        assert_eq!(dir.parent(), Some(shared));
        assert_eq!(std::fs::symlink_metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert!(dir.file_name().unwrap().to_str().unwrap().len() > "cowork-kwin-".len() + 16, "a random name: {}", dir.display());
        assert_eq!(script_dir(None, shared).unwrap(), dir, "one per process");
        for name in &names {
            write_script(&dir.join(name), "workspace.x = 1;").unwrap();
            assert_eq!(std::fs::read_to_string(dir.join(name)).unwrap(), "workspace.x = 1;");
            assert!(std::fs::symlink_metadata(shared.join(name)).unwrap().file_type().is_symlink(), "the planted link is left alone");
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's file");
        // The old predictable path itself is refused (not a private directory), link or not.
        for name in &names {
            assert!(write_script(&shared.join(name), "x").is_err());
        }
        assert!(write_script(&shared.join("fresh.js"), "x").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's file");
        // Even inside the private directory a link at the name is replaced, never followed.
        let planted = dir.join("cowork-windows-again.js");
        symlink(&victim, &planted).unwrap();
        write_script(&planted, "y").unwrap();
        assert!(!std::fs::symlink_metadata(&planted).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's file");
        assert_eq!(std::fs::metadata(&planted).unwrap().permissions().mode() & 0o777, 0o600);
        // A runtime directory is used only when it is a real directory of this user's, 0700.
        let runtime = temp.path().join("runtime");
        std::fs::create_dir(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(script_dir(Some(runtime.clone()), shared).unwrap(), runtime);
        let open = temp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(script_dir(Some(open), shared).unwrap(), dir, "a runtime directory others may enter is not used");
        let linked = temp.path().join("linked");
        symlink(&runtime, &linked).unwrap();
        assert_eq!(script_dir(Some(linked), shared).unwrap(), dir, "nor a symlink to one");
        assert_eq!(script_dir(Some(PathBuf::from("relative")), shared).unwrap(), dir, "nor a relative path");
        // The private directory gone (a temp cleaner), a new one is made.
        std::fs::remove_dir_all(&dir).unwrap();
        let again = script_dir(None, shared).unwrap();
        assert!(again != dir && is_private(&again));
    }
}
