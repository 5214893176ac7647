//! Which desktop cowork runs on, and what it can see and do there: the
//! session (X11 or Wayland), the compositor family, and for each capability
//! `ok`, `degraded` (why, and how to fix it) or `unavailable`.
//!
//! The session is decided from `XDG_SESSION_TYPE`, `XDG_CURRENT_DESKTOP`,
//! `WAYLAND_DISPLAY`, the Wayland registry's globals and the session bus's
//! names — never from "an X11 connection succeeded": under XWayland that
//! connection succeeds and sees only X clients, which is how peers came to
//! record native apps as "no window" and busy users as away. Pure once the
//! facts are read (`Facts`), so every family is unit-tested here; `probe`
//! reads the facts of the running session.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// What decides the session, read once at start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    pub session_type: String,
    pub current_desktop: String,
    pub wayland_display: Option<String>,
    pub x_display: Option<String>,
    /// The Wayland globals the compositor offers (interface → version); None: not reachable.
    pub globals: Option<BTreeMap<String, u32>>,
    /// Why the Wayland display could not be reached, when it could not.
    pub wayland_error: Option<String>,
    /// Well-known names on the session bus that tell a desktop (`org.gnome.Shell`, `org.kde.KWin`).
    pub bus_names: Vec<String>,
    pub swaysock: Option<String>,
    pub hyprland: Option<String>,
    pub niri: Option<String>,
    pub runtime_dir: Option<String>,
    /// GNOME: cowork's extension as the running gnome-shell serves it (its version), if it does.
    pub gnome_extension: Option<String>,
    /// GNOME: cowork's extension is in the user's extensions folder (served or not).
    pub gnome_extension_installed: bool,
    /// GNOME: gnome-shell's version ("43.9").
    pub gnome_shell_version: Option<String>,
    /// The desktop portal's GlobalShortcuts version, when a running portal offers it.
    pub portal_shortcuts: Option<u32>,
    /// The desktop portal's RemoteDesktop version (2 and later: `ConnectToEIS`, libei).
    pub portal_remote_desktop: Option<u32>,
}

impl Facts {
    /// The Wayland socket: `WAYLAND_DISPLAY` as a path, or a name in `XDG_RUNTIME_DIR`.
    pub fn wayland_socket(&self) -> Option<std::path::PathBuf> {
        let display = self.wayland_display.as_deref().unwrap_or("wayland-0");
        if display.starts_with('/') {
            return Some(display.into());
        }
        self.runtime_dir.as_ref().map(|dir| std::path::Path::new(dir).join(display))
    }

    fn ipc(&self) -> Option<super::ipc::Ipc> {
        super::ipc::Ipc::from_env(self.swaysock.as_deref(), self.hyprland.as_deref(), self.runtime_dir.as_deref())
    }
}

/// The compositor family, which decides the backend.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "family", content = "name")]
pub enum Family {
    /// An X11 session (or no Wayland display anywhere).
    X11,
    /// sway, Hyprland, river, niri, Wayfire, labwc and other wlroots-style compositors.
    Wlroots(String),
    Kde,
    Gnome,
    /// A Wayland compositor cowork has no backend for (weston, cage, …).
    OtherWayland(String),
    /// No display at all (a server, a TTY, CI).
    Headless,
}

impl Family {
    pub fn is_wayland(&self) -> bool {
        matches!(self, Family::Wlroots(_) | Family::Kde | Family::Gnome | Family::OtherWayland(_))
    }

    pub fn describe(&self) -> String {
        match self {
            Family::X11 => "X11".into(),
            Family::Wlroots(name) => format!("Wayland ({name})"),
            Family::Kde => "Wayland (KDE Plasma)".into(),
            Family::Gnome => "Wayland (GNOME)".into(),
            Family::OtherWayland(name) => format!("Wayland ({name})"),
            Family::Headless => "no display".into(),
        }
    }
}

/// One thing cowork does with the desktop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    FocusedWindow,
    Idle,
    ClipboardWatch,
    TypingStream,
    Hotkeys,
    Dictation,
    SidebarPlacement,
    BrowserUrl,
    WindowTools,
    /// The focused window's text (the screen-text stream): its accessibility tree, and its pixels for OCR.
    ScreenText,
}

impl Capability {
    pub const ALL: [Capability; 10] = [
        Capability::FocusedWindow,
        Capability::Idle,
        Capability::ClipboardWatch,
        Capability::TypingStream,
        Capability::Hotkeys,
        Capability::Dictation,
        Capability::SidebarPlacement,
        Capability::BrowserUrl,
        Capability::WindowTools,
        Capability::ScreenText,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Capability::FocusedWindow => "focused window",
            Capability::Idle => "away detection",
            Capability::ClipboardWatch => "clipboard",
            Capability::TypingStream => "typing",
            Capability::Hotkeys => "hotkeys",
            Capability::Dictation => "dictation typing",
            Capability::SidebarPlacement => "sidebar placement",
            Capability::BrowserUrl => "browser URLs",
            Capability::WindowTools => "agent window tools",
            Capability::ScreenText => "screen text",
        }
    }
}

/// How well a capability works here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum CapState {
    /// Works; `how` names the mechanism.
    Ok { how: String },
    /// Works in part, or not yet: why, and what the user can do.
    Degraded { why: String, fix: String },
    /// Cannot work here: why.
    Unavailable { why: String },
}

impl CapState {
    fn ok(how: impl Into<String>) -> Self {
        CapState::Ok { how: how.into() }
    }

    fn degraded(why: impl Into<String>, fix: impl Into<String>) -> Self {
        CapState::Degraded { why: why.into(), fix: fix.into() }
    }

    fn unavailable(why: impl Into<String>) -> Self {
        CapState::Unavailable { why: why.into() }
    }

    pub fn is_ok(&self) -> bool {
        matches!(self, CapState::Ok { .. })
    }

    pub fn word(&self) -> &'static str {
        match self {
            CapState::Ok { .. } => "ok",
            CapState::Degraded { .. } => "degraded",
            CapState::Unavailable { .. } => "unavailable",
        }
    }

    /// One line: the mechanism, or why and the fix.
    pub fn text(&self) -> String {
        match self {
            CapState::Ok { how } => how.clone(),
            CapState::Degraded { why, fix } if fix.is_empty() => why.clone(),
            CapState::Degraded { why, fix } => format!("{why}; {fix}"),
            CapState::Unavailable { why } => why.clone(),
        }
    }
}

/// Where a wlroots session is: its Wayland socket and its compositor's IPC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaylandTarget {
    pub socket: std::path::PathBuf,
    pub ipc: Option<super::ipc::Ipc>,
}

/// The session as decided, with every capability's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    pub family: Family,
    /// `XDG_CURRENT_DESKTOP` as the session set it.
    pub desktop: String,
    /// An X server beside a Wayland compositor (XWayland): never used for capture there.
    pub xwayland: bool,
    pub capabilities: Vec<(Capability, CapState)>,
    /// Where the wlroots backend connects, when it runs here.
    #[serde(skip)]
    pub wayland: Option<WaylandTarget>,
    /// A tray host (`org.kde.StatusNotifierWatcher`) is on the session bus.
    pub tray_host: bool,
}

/// The bus name of the tray host that shows StatusNotifierItems (KDE, most panels; GNOME only with an extension).
pub const TRAY_WATCHER: &str = "org.kde.StatusNotifierWatcher";

impl Report {
    pub fn state(&self, capability: Capability) -> &CapState {
        self.capabilities.iter().find(|(c, _)| *c == capability).map(|(_, s)| s).expect("every capability is reported")
    }

    /// Whether the X11 paths (capture, input polling, key grabs) may decide anything.
    pub fn x11_decides(&self) -> bool {
        self.family == Family::X11
    }

    /// Whether the tray icon can be seen here, and what that means for the user.
    pub fn tray(&self) -> (bool, String) {
        match (self.tray_host, &self.family) {
            (true, _) => (true, "a tray host shows cowork's icon (pause, show the sidebar, quit)".into()),
            (false, Family::Gnome) => (
                false,
                "GNOME shows no tray icons without an extension (AppIndicator): the sidebar and the hotkeys do everything the tray does".into(),
            ),
            (false, _) => (false, "no tray host (StatusNotifierWatcher) on the session bus: the sidebar and the hotkeys do everything the tray does".into()),
        }
    }

    /// How many capabilities are not fully there, for the status bar.
    pub fn not_ok(&self) -> usize {
        self.capabilities.iter().filter(|(_, s)| !s.is_ok()).count()
    }
}

/// Whether this build has the wlroots backend (focus, idle, clipboard, typing, placement).
const WLROOTS_BACKEND: bool = true;

/// What this build's Wayland backend can use, by the globals present.
mod globals {
    pub const FOREIGN_TOPLEVEL: &str = "zwlr_foreign_toplevel_manager_v1";
    pub const EXT_IDLE: &str = "ext_idle_notifier_v1";
    pub const KDE_IDLE: &str = "org_kde_kwin_idle";
    pub const WLR_DATA_CONTROL: &str = "zwlr_data_control_manager_v1";
    pub const EXT_DATA_CONTROL: &str = "ext_data_control_manager_v1";
    pub const VIRTUAL_KEYBOARD: &str = "zwp_virtual_keyboard_manager_v1";
    pub const SCREENCOPY: &str = "zwlr_screencopy_manager_v1";
}

/// Decides the family from the facts.
pub fn family(facts: &Facts) -> Family {
    let desktop = facts.current_desktop.to_lowercase();
    let wayland_session = facts.session_type.eq_ignore_ascii_case("wayland") || facts.wayland_display.is_some() || facts.globals.is_some();
    if !wayland_session {
        return if facts.x_display.is_some() { Family::X11 } else { Family::Headless };
    }
    let has = |global: &str| facts.globals.as_ref().is_some_and(|g| g.contains_key(global));
    let bus = |name: &str| facts.bus_names.iter().any(|n| n == name);
    if desktop.split(':').any(|d| d == "gnome" || d == "ubuntu" || d == "unity" || d == "pop") || (desktop.is_empty() && bus("org.gnome.Shell")) {
        return Family::Gnome;
    }
    if desktop.split(':').any(|d| d == "kde") || (desktop.is_empty() && bus("org.kde.KWin")) {
        return Family::Kde;
    }
    let named = if facts.swaysock.is_some() || desktop.contains("sway") {
        Some("sway")
    } else if facts.hyprland.is_some() || desktop.contains("hyprland") {
        Some("Hyprland")
    } else if facts.niri.is_some() || desktop.contains("niri") {
        Some("niri")
    } else {
        ["river", "wayfire", "labwc", "hikari", "dwl", "cage", "weston", "cosmic"].into_iter().find(|n| desktop.contains(n))
    };
    match named {
        Some(name) if has(globals::FOREIGN_TOPLEVEL) || matches!(name, "sway" | "Hyprland" | "niri" | "river" | "wayfire" | "labwc") => {
            Family::Wlroots(name.to_owned())
        }
        _ if has(globals::FOREIGN_TOPLEVEL) => Family::Wlroots(if desktop.is_empty() { "wlroots".into() } else { facts.current_desktop.clone() }),
        Some(name) => Family::OtherWayland(name.to_owned()),
        None => Family::OtherWayland(if desktop.is_empty() { "an unknown compositor".into() } else { facts.current_desktop.clone() }),
    }
}

/// Every capability's state for these facts, with what this build can do.
pub fn report(facts: &Facts, a11y_on: bool) -> Report {
    let family = family(facts);
    let has = |global: &str| facts.globals.as_ref().is_some_and(|g| g.contains_key(global));
    let xwayland = family.is_wayland() && facts.x_display.is_some();
    let mut capabilities = Vec::new();
    for capability in Capability::ALL {
        let state = match &family {
            Family::X11 => x11_state(capability, a11y_on),
            Family::Headless => CapState::unavailable("there is no display: cowork runs without watching a desktop"),
            _ if facts.globals.is_none() => CapState::unavailable(format!(
                "the Wayland display cannot be reached ({})",
                facts.wayland_error.as_deref().unwrap_or("WAYLAND_DISPLAY is not set")
            )),
            family => wayland_state(capability, family, &has, facts, xwayland, a11y_on),
        };
        capabilities.push((capability, state));
    }
    let wayland = match &family {
        Family::Wlroots(_) | Family::Kde if WLROOTS_BACKEND && facts.globals.is_some() => {
            facts.wayland_socket().map(|socket| WaylandTarget { socket, ipc: facts.ipc() })
        }
        _ => None,
    };
    let tray_host = facts.bus_names.iter().any(|n| n == TRAY_WATCHER);
    Report { family, desktop: facts.current_desktop.clone(), xwayland, capabilities, wayland, tray_host }
}

fn x11_state(capability: Capability, a11y_on: bool) -> CapState {
    match capability {
        Capability::FocusedWindow => CapState::ok("_NET_ACTIVE_WINDOW with its title, WM_CLASS and pid"),
        Capability::Idle => CapState::ok("input state polled once a second"),
        Capability::ClipboardWatch => CapState::ok("XFixes selection events"),
        Capability::TypingStream => CapState::ok("key state of the X server"),
        Capability::Hotkeys => CapState::ok("X key grabs"),
        Capability::Dictation => CapState::ok("XTest"),
        Capability::SidebarPlacement => CapState::ok("always on top, docked to the work area"),
        Capability::BrowserUrl if a11y_on => CapState::ok("the address bar over AT-SPI"),
        Capability::BrowserUrl => CapState::degraded("from window titles only", "turn on desktop accessibility in Settings, What cowork records & privacy"),
        Capability::WindowTools => CapState::ok("EWMH window list and activation"),
        Capability::ScreenText => CapState::ok("the window's accessibility tree, else OCR of its own pixels (GetImage)"),
    }
}

/// What a Wayland family offers, protocol by protocol (the backend of this
/// build: wlroots' and the staging protocols wherever they are offered).
fn wayland_state(capability: Capability, family: &Family, has_global: &dyn Fn(&str) -> bool, facts: &Facts, xwayland: bool, a11y_on: bool) -> CapState {
    // The wlroots backend runs on wlroots compositors only; GNOME and KDE
    // offer some of the same globals but no window list, so nothing of them is used.
    let has = |global: &str| WLROOTS_BACKEND && matches!(family, Family::Wlroots(_)) && has_global(global);
    let desktop_word = match family {
        Family::Gnome => "GNOME",
        Family::Kde => "KDE Plasma",
        _ => "this compositor",
    };
    let later = |what: &str| match family {
        Family::Gnome => format!("GNOME gives apps no {what}, and cowork's GNOME Shell extension does not run"),
        Family::Kde => format!("KDE Plasma gives apps no {what}, and cowork does not read it through KWin yet"),
        _ if !WLROOTS_BACKEND => format!("cowork cannot read the {what} on Wayland yet (the wlroots backend is being built)"),
        _ => format!("{desktop_word} offers no {what} to apps"),
    };
    let ipc = WLROOTS_BACKEND && facts.ipc().is_some();
    // KWin offers the data-control protocols too (the clipboard is watched as on wlroots).
    let kde_has = |global: &str| WLROOTS_BACKEND && matches!(family, Family::Kde) && has_global(global);
    // KDE Plasma: KWin runs cowork's script when it is on the session bus.
    let kwin = matches!(family, Family::Kde) && facts.bus_names.iter().any(|n| n == "org.kde.KWin");
    // GNOME: cowork's own Shell extension, once gnome-shell runs it.
    let gnome = matches!(family, Family::Gnome);
    let extension = gnome && facts.gnome_extension.is_some();
    if gnome && !extension && matches!(capability, Capability::FocusedWindow | Capability::ClipboardWatch | Capability::SidebarPlacement | Capability::WindowTools) {
        return gnome_waiting(capability, facts);
    }
    let idle_monitor = gnome && facts.bus_names.iter().any(|n| n == "org.gnome.Mutter.IdleMonitor");
    match capability {
        Capability::FocusedWindow if extension => CapState::ok("cowork's GNOME Shell extension: title, app id and pid, pushed by GNOME Shell"),
        Capability::Idle if idle_monitor => CapState::ok("Mutter's IdleMonitor watches"),
        Capability::ClipboardWatch if extension => CapState::ok("cowork's GNOME Shell extension, while the clipboard stream is on"),
        Capability::SidebarPlacement if extension => CapState::ok("kept above, on every workspace and docked right by cowork's GNOME Shell extension"),
        Capability::WindowTools if extension => CapState::ok("cowork's GNOME Shell extension lists and activates windows"),
        Capability::BrowserUrl if extension && a11y_on => CapState::ok("the address bar over AT-SPI"),
        Capability::FocusedWindow if has(globals::FOREIGN_TOPLEVEL) => {
            if ipc {
                CapState::ok("wlr-foreign-toplevel, with the pid from the compositor's IPC")
            } else {
                CapState::ok("wlr-foreign-toplevel (titles and app ids; no pid on this compositor)")
            }
        }
        Capability::FocusedWindow if kwin => CapState::ok("cowork's KWin script: caption, app id and pid, pushed by KWin"),
        Capability::FocusedWindow => CapState::unavailable(format!("{}; no window is recorded rather than a wrong one", later("focused window"))),
        Capability::Idle if has(globals::EXT_IDLE) || kwin && kde_has(globals::EXT_IDLE) => CapState::ok("ext-idle-notify"),
        Capability::Idle if has(globals::KDE_IDLE) || kwin && kde_has(globals::KDE_IDLE) => CapState::ok("org_kde_kwin_idle"),
        Capability::Idle => CapState::unavailable(format!("{}; you are never marked away rather than wrongly", later("idle notifications"))),
        Capability::ClipboardWatch if has(globals::EXT_DATA_CONTROL) || kde_has(globals::EXT_DATA_CONTROL) => CapState::ok("ext-data-control"),
        Capability::ClipboardWatch if has(globals::WLR_DATA_CONTROL) || kde_has(globals::WLR_DATA_CONTROL) => CapState::ok("wlr-data-control"),
        Capability::ClipboardWatch => CapState::unavailable(later("clipboard watching")),
        Capability::TypingStream if a11y_on => CapState::degraded(
            "Wayland lets no app see another's keys: text entered into fields is read from the accessibility bus instead",
            "apps without accessibility support are not seen",
        ),
        Capability::TypingStream => {
            CapState::unavailable("Wayland lets no app see another's keys, and desktop accessibility is off (Settings, What cowork records & privacy)")
        }
        Capability::Hotkeys if facts.portal_shortcuts.is_some() => {
            CapState::ok("the desktop portal's GlobalShortcuts: press and release (the desktop asks you once)")
        }
        Capability::Hotkeys if gnome => CapState::degraded(
            "GNOME before 48 offers apps no global shortcuts (no GlobalShortcuts portal)",
            "add cowork's shortcuts to GNOME's keyboard settings (Settings, General, Desktop, or `cowork gnome-extension add-shortcuts`): \
             GNOME runs them on press only, so push-to-talk is a tap to start and a tap to stop",
        ),
        Capability::Hotkeys => CapState::degraded(
            "Wayland lets no app grab keys",
            match family {
                Family::Wlroots(name) => format!("bind them in {name}'s config to `cowork trigger …` (Settings, General, Desktop, has the lines)"),
                _ => "bind `cowork trigger quick-prompt`, `pause`, `talk-press` and `talk-release` to keys in your desktop's keyboard settings".to_owned(),
            },
        ),
        Capability::Dictation if has(globals::VIRTUAL_KEYBOARD) => CapState::ok("zwp-virtual-keyboard"),
        Capability::Dictation if facts.portal_remote_desktop.is_some_and(|v| v >= 2) => {
            CapState::ok("the RemoteDesktop portal with libei (the desktop asks you once; the answer is remembered)")
        }
        Capability::Dictation if gnome && facts.bus_names.iter().any(|n| n == "org.gnome.Mutter.RemoteDesktop") => {
            CapState::ok("keysyms through Mutter's RemoteDesktop (GNOME shows its sharing indicator while it types)")
        }

        Capability::Dictation if xwayland => {
            CapState::degraded(format!("{desktop_word} offers no virtual keyboard"), "only apps running under XWayland can be typed into")
        }
        Capability::Dictation => CapState::unavailable(format!("{desktop_word} offers no virtual keyboard")),
        Capability::SidebarPlacement if has(globals::FOREIGN_TOPLEVEL) && matches!(facts.ipc(), Some(super::ipc::Ipc::Sway(_))) => {
            CapState::ok("a floating, sticky window docked right through sway's IPC")
        }
        Capability::SidebarPlacement if has(globals::FOREIGN_TOPLEVEL) && matches!(facts.ipc(), Some(super::ipc::Ipc::Hyprland(_))) => {
            CapState::ok("a pinned, floating window docked right through Hyprland's IPC")
        }
        Capability::SidebarPlacement if kwin => CapState::ok("kept above, on every desktop and docked right by cowork's KWin script"),
        Capability::SidebarPlacement if xwayland => {
            CapState::degraded("the sidebar runs under XWayland so it can stay on top and docked", "it may look soft with fractional scaling")
        }
        Capability::SidebarPlacement => CapState::degraded(format!("{desktop_word} places windows itself"), "the sidebar may be covered or moved"),
        Capability::BrowserUrl if !a11y_on => CapState::degraded("from window titles only", "turn on desktop accessibility in Settings, What cowork records & privacy"),
        Capability::BrowserUrl if has(globals::FOREIGN_TOPLEVEL) && ipc => CapState::ok("the address bar over AT-SPI"),
        Capability::BrowserUrl if has(globals::FOREIGN_TOPLEVEL) => {
            CapState::degraded("the window's pid is unknown here: URLs come from the address bar matched by title", "")
        }
        Capability::BrowserUrl if kwin => CapState::ok("the address bar over AT-SPI"),
        Capability::BrowserUrl => CapState::unavailable("no focused window is known"),
        Capability::WindowTools if has(globals::FOREIGN_TOPLEVEL) => CapState::ok("wlr-foreign-toplevel list and activate"),
        Capability::WindowTools if kwin => CapState::ok("a KWin script lists and focuses windows"),
        Capability::WindowTools => CapState::unavailable(later("window list")),
        Capability::ScreenText if !(extension || has(globals::FOREIGN_TOPLEVEL) || kwin) => CapState::unavailable("no focused window is known"),
        Capability::ScreenText if kwin => {
            CapState::ok("the window's accessibility tree, else OCR of the window alone, rendered by KWin (ScreenShot2; cowork's desktop entry allows it)")
        }
        Capability::ScreenText if extension => {
            CapState::ok("the window's accessibility tree, else OCR of the window alone, read by cowork's GNOME Shell extension")
        }
        Capability::ScreenText if has(globals::SCREENCOPY) && matches!(facts.ipc(), Some(super::ipc::Ipc::Sway(_))) => {
            CapState::ok("the window's accessibility tree, else OCR of its region of the output (wlr-screencopy; sway's IPC says where it is)")
        }
        Capability::ScreenText => CapState::degraded(
            "the focused window's accessibility tree only: windows without accessible text (xterm, canvases, some Electron apps) are not read",
            format!("OCR of their pixels on {desktop_word} needs the ScreenCast portal, which cowork does not use yet"),
        ),
    }
}

/// A GNOME capability that needs cowork's extension while it does not run: why, and the one thing to do.
fn gnome_waiting(capability: Capability, facts: &Facts) -> CapState {
    let why = format!("waiting for cowork's GNOME Shell extension (GNOME gives apps no {})", capability.label());
    let fix = if facts.gnome_extension_installed {
        "it is installed: log out and in once, since GNOME on Wayland loads new extensions only at log-in"
    } else {
        "install it from Settings, General (or `cowork gnome-extension install`), then log out and in once"
    };
    CapState::degraded(why, fix)
}

/// The report for the display capture watches: an X display named on the
/// command line is X11 whatever the session; otherwise the session decides.
pub fn for_display(display: Option<&str>, a11y_on: bool) -> Report {
    match display {
        Some(display) => report(&Facts { session_type: "x11".into(), x_display: Some(display.to_owned()), ..Facts::default() }, a11y_on),
        None => current(a11y_on),
    }
}

/// The hotkeys as cowork's settings hold them (`ctrl+alt+Space`, global-hotkey's names).
pub struct Hotkeys<'a> {
    pub quick_prompt: &'a str,
    pub pause: &'a str,
    pub talk: &'a str,
}

/// The lines that bind cowork's hotkeys in a wlroots compositor's config
/// (sway and compatible; Hyprland's own syntax), empty where the desktop's
/// settings bind commands instead. Push-to-talk binds both edges.
pub fn compositor_bindings(family: &Family, hotkeys: &Hotkeys) -> Vec<String> {
    let binds = [(hotkeys.quick_prompt, "quick-prompt", false), (hotkeys.pause, "pause", false), (hotkeys.talk, "talk-press", true)];
    match family {
        Family::Wlroots(name) if name == "Hyprland" => binds
            .iter()
            .flat_map(|(keys, command, release)| {
                let (mods, key) = split_hotkey(keys, |m| m.to_uppercase(), " ");
                let mut lines = vec![format!("bind = {mods}, {key}, exec, cowork trigger {command}")];
                if *release {
                    lines.push(format!("bindr = {mods}, {key}, exec, cowork trigger talk-release"));
                }
                lines
            })
            .collect(),
        Family::Wlroots(_) => binds
            .iter()
            .flat_map(|(keys, command, release)| {
                let (mods, key) = split_hotkey(keys, sway_modifier, "+");
                let combo = if mods.is_empty() { key } else { format!("{mods}+{key}") };
                let mut lines = vec![format!("bindsym --no-repeat {combo} exec cowork trigger {command}")];
                if *release {
                    lines.push(format!("bindsym --release {combo} exec cowork trigger talk-release"));
                }
                lines
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn sway_modifier(modifier: &str) -> String {
    match modifier {
        "ctrl" | "control" => "Ctrl".into(),
        "alt" | "option" => "Mod1".into(),
        "shift" => "Shift".into(),
        "super" | "meta" | "cmd" | "command" | "win" => "Mod4".into(),
        other => other.to_owned(),
    }
}

/// `ctrl+alt+KeyV` → (modifiers joined by `join`, the key as an xkb keysym name).
fn split_hotkey(hotkey: &str, modifier: impl Fn(&str) -> String, join: &str) -> (String, String) {
    let parts: Vec<&str> = hotkey.split('+').map(str::trim).filter(|p| !p.is_empty()).collect();
    let Some((key, mods)) = parts.split_last() else {
        return (String::new(), String::new());
    };
    let mods: Vec<String> = mods.iter().map(|m| modifier(&m.to_lowercase())).collect();
    let key = if let Some(letter) = key.strip_prefix("Key") {
        letter.to_lowercase()
    } else if let Some(digit) = key.strip_prefix("Digit") {
        digit.to_owned()
    } else {
        match *key {
            "Space" | "space" => "space".into(),
            "Enter" => "Return".into(),
            "Backquote" => "grave".into(),
            "Minus" => "minus".into(),
            "Equal" => "equal".into(),
            "Comma" => "comma".into(),
            "Period" => "period".into(),
            "Slash" => "slash".into(),
            "Semicolon" => "semicolon".into(),
            other => other.to_owned(),
        }
    };
    (mods.join(join), key)
}

/// The facts of this process's session, read once (they do not change while it runs).
pub fn facts() -> &'static Facts {
    static FACTS: std::sync::OnceLock<Facts> = std::sync::OnceLock::new();
    FACTS.get_or_init(probe)
}

/// This process's session and capabilities (`a11y_on`: desktop accessibility is switched on).
pub fn current(a11y_on: bool) -> Report {
    report(facts(), a11y_on)
}

/// The facts of the running session: environment, the Wayland registry and the session bus.
pub fn probe() -> Facts {
    probe_with(&|key| std::env::var(key).ok())
}

/// The facts of the session `env` describes (tests point it at a compositor of their own).
pub fn probe_with(env: &dyn Fn(&str) -> Option<String>) -> Facts {
    let env = |key: &str| env(key).filter(|v| !v.is_empty());
    let mut facts = Facts {
        session_type: env("XDG_SESSION_TYPE").unwrap_or_default(),
        current_desktop: env("XDG_CURRENT_DESKTOP").unwrap_or_default(),
        wayland_display: env("WAYLAND_DISPLAY"),
        x_display: env("DISPLAY"),
        swaysock: env("SWAYSOCK"),
        hyprland: env("HYPRLAND_INSTANCE_SIGNATURE"),
        niri: env("NIRI_SOCKET"),
        runtime_dir: env("XDG_RUNTIME_DIR"),
        ..Facts::default()
    };
    if facts.wayland_display.is_some() || facts.session_type.eq_ignore_ascii_case("wayland") {
        match facts.wayland_socket().ok_or_else(|| "XDG_RUNTIME_DIR is not set".to_owned()).and_then(|socket| wayland_globals(&socket)) {
            Ok(globals) => facts.globals = Some(globals),
            Err(err) => facts.wayland_error = Some(err),
        }
    }
    let bus = bus_facts(Duration::from_millis(500));
    facts.bus_names = bus.names;
    facts.gnome_extension = bus.gnome_extension;
    facts.gnome_shell_version = bus.gnome_shell_version;
    facts.portal_shortcuts = bus.portal_shortcuts;
    facts.portal_remote_desktop = bus.portal_remote_desktop;
    facts.gnome_extension_installed = gnome_extension_dir(&env).is_some_and(|dir| dir.join("extension.js").is_file());
    facts
}

/// The registry probe's dispatch state: it only lists globals (the wlroots
/// backend's own connections live in `wlr`, which this module must not need).
struct Probe;

impl wayland_client::Dispatch<wayland_client::protocol::wl_registry::WlRegistry, wayland_client::globals::GlobalListContents> for Probe {
    fn event(
        _: &mut Self,
        _: &wayland_client::protocol::wl_registry::WlRegistry,
        _: wayland_client::protocol::wl_registry::Event,
        _: &wayland_client::globals::GlobalListContents,
        _: &wayland_client::Connection,
        _: &wayland_client::QueueHandle<Self>,
    ) {
    }
}

/// How long the registry probe waits for a compositor that does not answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The globals of the compositor at `socket` (interface → version).
fn wayland_globals(socket: &std::path::Path) -> Result<BTreeMap<String, u32>, String> {
    let socket = socket.to_path_buf();
    let (tx, rx) = crossbeam_channel::bounded(1);
    // On a thread of its own: a compositor that never answers must not hold start-up.
    std::thread::Builder::new()
        .name("wayland-probe".into())
        .spawn(move || {
            let listed = (|| {
                let stream = std::os::unix::net::UnixStream::connect(&socket).map_err(|err| format!("{}: {err}", socket.display()))?;
                let conn = wayland_client::Connection::from_socket(stream).map_err(|err| err.to_string())?;
                let (globals, _queue) = wayland_client::globals::registry_queue_init::<Probe>(&conn).map_err(|err| err.to_string())?;
                Ok::<_, String>(globals.contents().clone_list().into_iter().map(|g| (g.interface, g.version)).collect())
            })();
            let _ = tx.send(listed);
        })
        .map_err(|err| err.to_string())?;
    rx.recv_timeout(PROBE_TIMEOUT).map_err(|_| format!("the compositor did not answer within {} s", PROBE_TIMEOUT.as_secs()))?
}

/// cowork's GNOME Shell extension as the session probe sees it (`gnome.rs` installs and talks to it).
pub const GNOME_EXTENSION_UUID: &str = "cowork@cowork.app";
pub const GNOME_EXTENSION_PATH: &str = "/org/cowork/Desktop";
pub const GNOME_EXTENSION_INTERFACE: &str = "org.cowork.Desktop1";
pub const GNOME_SHELL: &str = "org.gnome.Shell";

/// The user's data folder: `$XDG_DATA_HOME` when absolute (the spec ignores a relative one), else `~/.local/share`.
pub fn xdg_data_home(env: &dyn Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
    env("XDG_DATA_HOME").filter(|d| d.starts_with('/')).map(std::path::PathBuf::from).or_else(|| env("HOME").map(|h| std::path::Path::new(&h).join(".local/share")))
}

/// Where desktop entries live, the user's first: `applications` in the data home and in
/// each of `$XDG_DATA_DIRS` (default `/usr/local/share:/usr/share`).
pub fn xdg_application_dirs(env: &dyn Fn(&str) -> Option<String>) -> Vec<std::path::PathBuf> {
    let system = env("XDG_DATA_DIRS").filter(|d| !d.is_empty()).unwrap_or_else(|| "/usr/local/share:/usr/share".to_owned());
    let system = system.split(':').filter(|d| d.starts_with('/')).map(std::path::PathBuf::from).collect::<Vec<_>>();
    xdg_data_home(env).into_iter().chain(system).map(|dir| dir.join("applications")).collect()
}

/// The user's extensions folder for cowork's extension (`$XDG_DATA_HOME`, else `~/.local/share`).
pub fn gnome_extension_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
    Some(xdg_data_home(env)?.join("gnome-shell/extensions").join(GNOME_EXTENSION_UUID))
}

/// The extension's version if the running gnome-shell serves it (anyone may read it; nothing else is answered to anyone).
pub fn gnome_extension_version(conn: &zbus::blocking::Connection) -> Option<String> {
    let proxy = zbus::blocking::fdo::PropertiesProxy::builder(conn).destination(GNOME_SHELL).ok()?.path(GNOME_EXTENSION_PATH).ok()?.build().ok()?;
    let value = proxy.get(GNOME_EXTENSION_INTERFACE.try_into().ok()?, "Version").ok()?;
    String::try_from(value).ok()
}

/// gnome-shell's version ("43.9").
pub fn gnome_shell_version(conn: &zbus::blocking::Connection) -> Option<String> {
    let proxy = zbus::blocking::fdo::PropertiesProxy::builder(conn).destination(GNOME_SHELL).ok()?.path("/org/gnome/Shell").ok()?.build().ok()?;
    let value = proxy.get("org.gnome.Shell".try_into().ok()?, "ShellVersion").ok()?;
    String::try_from(value).ok()
}

/// The XDG desktop portal, as the session probe sees it (`portal.rs` talks to it).
pub const PORTAL: &str = "org.freedesktop.portal.Desktop";
pub const PORTAL_PATH: &str = "/org/freedesktop/portal/desktop";
pub const PORTAL_GLOBAL_SHORTCUTS: &str = "org.freedesktop.portal.GlobalShortcuts";
pub const PORTAL_REMOTE_DESKTOP: &str = "org.freedesktop.portal.RemoteDesktop";

/// A portal interface's version, read without starting anything (None: not offered).
pub fn portal_version(conn: &zbus::blocking::Connection, interface: &str) -> Option<u32> {
    let proxy = zbus::blocking::fdo::PropertiesProxy::builder(conn).destination(PORTAL).ok()?.path(PORTAL_PATH).ok()?.build().ok()?;
    let value = proxy.get(interface.try_into().ok()?, "version").ok()?;
    u32::try_from(value).ok()
}

/// Whether the desktop portal on this bus offers GlobalShortcuts (its version, read without starting anything).
pub fn portal_global_shortcuts_version(conn: &zbus::blocking::Connection) -> Option<u32> {
    let proxy = zbus::blocking::fdo::PropertiesProxy::builder(conn).destination(PORTAL).ok()?.path(PORTAL_PATH).ok()?.build().ok()?;
    let value = proxy.get(PORTAL_GLOBAL_SHORTCUTS.try_into().ok()?, "version").ok()?;
    u32::try_from(value).ok()
}

/// What the session bus tells about the desktop.
#[derive(Default)]
struct BusFacts {
    names: Vec<String>,
    gnome_extension: Option<String>,
    gnome_shell_version: Option<String>,
    portal_shortcuts: Option<u32>,
    portal_remote_desktop: Option<u32>,
}

/// The desktop-telling names on the session bus, and on GNOME whether cowork's extension runs (nothing without a bus).
fn bus_facts(timeout: Duration) -> BusFacts {
    let (tx, rx) = crossbeam_channel::bounded(1);
    // zbus has no connect timeout of its own: a bus that never answers must not hold start-up.
    let spawned = std::thread::Builder::new().name("desktop-probe".into()).spawn(move || {
        let Ok(conn) = zbus::blocking::Connection::session() else {
            let _ = tx.send(BusFacts::default());
            return;
        };
        let listed = zbus::blocking::fdo::DBusProxy::new(&conn).ok().and_then(|dbus| dbus.list_names().ok());
        let names: Vec<String> = listed
            .map(|names| {
                names
                    .into_iter()
                    .map(|n| n.to_string())
                    .filter(|n| {
                        n.starts_with("org.gnome.Shell") || n.starts_with("org.gnome.Mutter") || n.starts_with("org.kde.KWin") || n == TRAY_WATCHER || n == PORTAL
                    })
                    .collect()
            })
            .unwrap_or_default();
        let gnome = names.iter().any(|n| n == GNOME_SHELL);
        // Only a portal already running is asked (asking one that is not would start it and wait).
        let portal = names.iter().any(|n| n == PORTAL);
        let facts = BusFacts {
            portal_shortcuts: portal.then(|| portal_global_shortcuts_version(&conn)).flatten(),
            portal_remote_desktop: portal.then(|| portal_version(&conn, PORTAL_REMOTE_DESKTOP)).flatten(),
            gnome_extension: gnome.then(|| gnome_extension_version(&conn)).flatten(),
            gnome_shell_version: gnome.then(|| gnome_shell_version(&conn)).flatten(),
            names,
        };
        let _ = tx.send(facts);
    });
    if spawned.is_err() {
        return BusFacts::default();
    }
    rx.recv_timeout(timeout).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn globals(names: &[&str]) -> Option<BTreeMap<String, u32>> {
        Some(names.iter().map(|n| ((*n).to_owned(), 1)).collect())
    }

    fn sway() -> Facts {
        Facts {
            session_type: "wayland".into(),
            current_desktop: "sway".into(),
            wayland_display: Some("wayland-1".into()),
            x_display: Some(":0".into()),
            globals: globals(&[
                "wl_seat",
                "zwlr_foreign_toplevel_manager_v1",
                "org_kde_kwin_idle",
                "zwlr_data_control_manager_v1",
                "zwp_virtual_keyboard_manager_v1",
                "zwlr_layer_shell_v1",
            ]),
            swaysock: Some("/run/user/1000/sway-ipc.sock".into()),
            ..Facts::default()
        }
    }

    #[test]
    fn the_session_is_decided_by_the_session_not_by_an_x_connection() {
        let x11 = Facts { session_type: "x11".into(), x_display: Some(":0".into()), ..Facts::default() };
        assert_eq!(family(&x11), Family::X11);
        assert!(report(&x11, true).x11_decides());
        assert_eq!(family(&Facts::default()), Family::Headless);
        // XWayland's DISPLAY is there, but the session is Wayland: X11 decides nothing.
        let on_sway = report(&sway(), true);
        assert_eq!(on_sway.family, Family::Wlroots("sway".into()));
        assert!(on_sway.xwayland && !on_sway.x11_decides());
        // GNOME and KDE by their desktop name, or their bus names when it is missing.
        let gnome = Facts {
            session_type: "wayland".into(),
            current_desktop: "ubuntu:GNOME".into(),
            wayland_display: Some("wayland-0".into()),
            globals: globals(&["wl_seat"]),
            ..Facts::default()
        };
        assert_eq!(family(&gnome), Family::Gnome);
        let kde = Facts {
            wayland_display: Some("wayland-0".into()),
            globals: globals(&["wl_seat", "ext_idle_notifier_v1", "zwlr_layer_shell_v1"]),
            bus_names: vec!["org.kde.KWin".into()],
            ..Facts::default()
        };
        assert_eq!(family(&kde), Family::Kde);
        let weston = Facts { wayland_display: Some("wayland-w".into()), globals: globals(&["wl_seat", "xdg_wm_base"]), ..Facts::default() };
        assert_eq!(family(&weston), Family::OtherWayland("an unknown compositor".into()));
        let hyprland = Facts { hyprland: Some("abc".into()), current_desktop: "Hyprland".into(), ..sway() };
        let hyprland = Facts { swaysock: None, ..hyprland };
        assert_eq!(family(&hyprland), Family::Wlroots("Hyprland".into()));
    }

    #[test]
    fn on_kde_plasma_the_focused_window_comes_from_coworks_kwin_script_when_kwin_is_on_the_bus() {
        use super::super::backend::{Backend, backend_for};
        let kde = Facts {
            session_type: "wayland".into(),
            current_desktop: "KDE".into(),
            wayland_display: Some("wayland-0".into()),
            globals: globals(&["wl_seat", "ext_idle_notifier_v1", "zwlr_data_control_manager_v1"]),
            bus_names: vec!["org.kde.KWin".into()],
            runtime_dir: Some("/run/user/1000".into()),
            ..Facts::default()
        };
        let with_kwin = report(&kde, true);
        assert!(with_kwin.state(Capability::FocusedWindow).text().contains("KWin script"), "{:?}", with_kwin.state(Capability::FocusedWindow));
        assert!(matches!(backend_for(&with_kwin, Capability::FocusedWindow), Backend::KWin(Some(_))));
        assert_eq!(with_kwin.state(Capability::Idle).text(), "ext-idle-notify");
        assert!(with_kwin.state(Capability::BrowserUrl).is_ok());
        assert!(with_kwin.state(Capability::SidebarPlacement).text().contains("KWin script"));
        // KWin's data-control: the clipboard is watched as on wlroots.
        assert!(matches!(backend_for(&with_kwin, Capability::ClipboardWatch), Backend::Wlroots(_)));
        assert!(with_kwin.state(Capability::WindowTools).text().contains("KWin script"));
        // A portal with RemoteDesktop 2 (ConnectToEIS): dictation types through libei.
        let with_portal = report(&Facts { portal_remote_desktop: Some(2), ..kde.clone() }, true);
        assert!(with_portal.state(Capability::Dictation).text().contains("RemoteDesktop portal"));
        assert!(!report(&Facts { portal_remote_desktop: Some(1), ..kde.clone() }, true).state(Capability::Dictation).is_ok(), "version 1 has no libei");
        // What is not done on KDE yet says so (KWin gives apps no virtual keyboard to type with).
        assert_ne!(with_kwin.state(Capability::Dictation).word(), "ok");
        // KWin not (yet) on the bus: nothing is recorded rather than a wrong window.
        let without = report(&Facts { bus_names: Vec::new(), ..kde }, true);
        assert_eq!(without.state(Capability::FocusedWindow).word(), "unavailable");
        assert!(matches!(backend_for(&without, Capability::FocusedWindow), Backend::Blind(_)));
    }

    #[test]
    fn the_tray_is_said_to_be_missing_where_no_host_shows_it() {
        let gnome = Facts { session_type: "wayland".into(), current_desktop: "GNOME".into(), globals: globals(&["wl_seat"]), ..Facts::default() };
        let (shown, why) = report(&gnome, false).tray();
        assert!(!shown && why.contains("AppIndicator"), "{why}");
        let with_host = Facts { bus_names: vec![TRAY_WATCHER.into()], ..gnome };
        assert!(report(&with_host, false).tray().0);
        let (shown, why) = report(&sway(), false).tray();
        assert!(!shown && why.contains("StatusNotifierWatcher"), "{why}");
    }

    #[test]
    fn every_capability_says_ok_degraded_or_unavailable_with_a_reason() {
        let on_sway = report(&sway(), true);
        for capability in [Capability::FocusedWindow, Capability::Idle].into_iter().filter(|_| !WLROOTS_BACKEND) {
            assert_eq!(on_sway.state(capability).word(), "unavailable", "{capability:?}");
        }
        for capability in [
            Capability::FocusedWindow,
            Capability::Idle,
            Capability::ClipboardWatch,
            Capability::Dictation,
            Capability::SidebarPlacement,
            Capability::WindowTools,
            Capability::BrowserUrl,
        ] {
            assert!(on_sway.state(capability).is_ok() || !WLROOTS_BACKEND, "{capability:?}: {:?}", on_sway.state(capability));
        }
        assert!(on_sway.state(Capability::Hotkeys).text().contains("sway's config"), "{:?}", on_sway.state(Capability::Hotkeys));
        let keys = Hotkeys { quick_prompt: "ctrl+alt+Space", pause: "ctrl+alt+KeyP", talk: "super+KeyV" };
        assert_eq!(
            compositor_bindings(&on_sway.family, &keys),
            [
                "bindsym --no-repeat Ctrl+Mod1+space exec cowork trigger quick-prompt",
                "bindsym --no-repeat Ctrl+Mod1+p exec cowork trigger pause",
                "bindsym --no-repeat Mod4+v exec cowork trigger talk-press",
                "bindsym --release Mod4+v exec cowork trigger talk-release",
            ]
        );
        let hyprland = compositor_bindings(&Family::Wlroots("Hyprland".into()), &keys);
        assert_eq!(hyprland[0], "bind = CTRL ALT, space, exec, cowork trigger quick-prompt");
        assert_eq!(hyprland[3], "bindr = SUPER, v, exec, cowork trigger talk-release");
        assert!(compositor_bindings(&Family::Gnome, &keys).is_empty());
        assert_eq!(on_sway.state(Capability::TypingStream).word(), "degraded");
        // The unknown compositor: nothing claimed, every reason said.
        let weston = Facts { wayland_display: Some("wayland-w".into()), globals: globals(&["wl_seat", "xdg_wm_base"]), ..Facts::default() };
        let r = report(&weston, true);
        assert_eq!(r.state(Capability::FocusedWindow).word(), "unavailable");
        assert!(r.state(Capability::FocusedWindow).text().contains("no window is recorded rather than a wrong one"));
        assert!(r.state(Capability::Idle).text().contains("never marked away"));
        assert!(r.capabilities.iter().all(|(_, s)| !s.text().is_empty()));
        // GNOME names what it needs.
        let gnome = Facts {
            session_type: "wayland".into(),
            current_desktop: "GNOME".into(),
            wayland_display: Some("wayland-0".into()),
            globals: globals(&["wl_seat"]),
            ..Facts::default()
        };
        assert!(report(&gnome, true).state(Capability::FocusedWindow).text().contains("GNOME Shell extension"));
        // A Wayland session whose display cannot be reached says so for everything.
        let lost = Facts { session_type: "wayland".into(), wayland_error: Some("connection refused".into()), ..Facts::default() };
        assert!(report(&lost, true).capabilities.iter().all(|(_, s)| s.text().contains("connection refused")));
    }

    #[test]
    fn on_gnome_every_capability_of_the_extension_waits_for_it_with_the_one_step_to_take_then_works() {
        use crate::desktop::backend::{Backend, backend_for};
        let gnome = Facts {
            session_type: "wayland".into(),
            current_desktop: "GNOME".into(),
            wayland_display: Some("wayland-0".into()),
            globals: globals(&["wl_seat"]),
            bus_names: vec!["org.gnome.Shell".into(), "org.gnome.Mutter.IdleMonitor".into()],
            gnome_shell_version: Some("47.2".into()),
            ..Facts::default()
        };
        let needs = [Capability::FocusedWindow, Capability::ClipboardWatch, Capability::SidebarPlacement, Capability::WindowTools];
        let missing = report(&gnome, true);
        assert!(missing.state(Capability::Idle).is_ok(), "Mutter's IdleMonitor needs no extension");
        for capability in needs {
            let state = missing.state(capability);
            assert!(matches!(state, CapState::Degraded { .. }) && state.text().contains("waiting for cowork's GNOME Shell extension"), "{capability:?}: {state:?}");
            assert!(state.text().contains("install it from Settings, General") && state.text().contains("log out and in once"), "{state:?}");
        }
        assert!(matches!(backend_for(&missing, Capability::FocusedWindow), Backend::Blind(why) if why.contains("waiting")), "nothing is guessed meanwhile");
        let installed = report(&Facts { gnome_extension_installed: true, ..gnome.clone() }, true);
        let state = installed.state(Capability::FocusedWindow);
        assert!(state.text().contains("it is installed: log out and in once") && !state.text().contains("install it from"), "{state:?}");
        let running = report(&Facts { gnome_extension: Some("1".into()), gnome_extension_installed: true, ..gnome.clone() }, true);
        for capability in needs {
            assert!(running.state(capability).is_ok(), "{capability:?}: {:?}", running.state(capability));
        }
        assert!(running.state(Capability::Idle).text().contains("IdleMonitor"));
        assert_eq!(backend_for(&running, Capability::FocusedWindow), Backend::Gnome);
        assert_eq!(backend_for(&running, Capability::ClipboardWatch), Backend::Gnome);
        // Without Mutter's IdleMonitor on the bus, away is not claimed.
        let no_idle = report(&Facts { gnome_extension: Some("1".into()), bus_names: vec!["org.gnome.Shell".into()], ..gnome }, true);
        assert!(!no_idle.state(Capability::Idle).is_ok());
    }
}
