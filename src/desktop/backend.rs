//! The seam between capture and the desktop: one backend per compositor
//! family gives the focused window (title, app id, pid where it can be had,
//! fullscreen), change events, and presence (polled input on X11, idle edges
//! from the compositor on Wayland). Capture's tracker, firewall, heartbeats
//! and AFK logic consume it unchanged; which backend runs is decided by
//! `desktop::session`, never by which connection happens to succeed.

use std::time::Duration;

use device_query::DeviceState;

use super::gnome::GnomeDesktop;
use super::kwin::KWinDesktop;
use super::session::{CapState, Capability, Family, Report, WaylandTarget};
use super::wlr::WlrDesktop;
use crate::desktop::input::InputProbe;
use crate::desktop::x11::X11Desktop;
use crate::records::ActiveWindow;

/// Which backend capture uses in this session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// X11: the display capture was given (None: `$DISPLAY`).
    X11,
    /// A wlroots compositor.
    Wlroots(WaylandTarget),
    /// KDE Plasma: cowork's KWin script over the session bus (`kwin`), and
    /// KWin's Wayland idle notification when its display is known.
    KWin(Option<WaylandTarget>),
    /// GNOME: cowork's GNOME Shell extension over the session bus, and
    /// Mutter's IdleMonitor for presence.
    Gnome,
    /// No backend sees the focused window here: why. Capture records no
    /// window and nobody away rather than guess.
    Blind(String),
}

/// The backend that gives `capability` in `report`'s session: X11 on an X
/// session, the wlroots backend where it offers the capability (fully or in
/// part), else none, and why.
pub fn backend_for(report: &Report, capability: Capability) -> Backend {
    if report.x11_decides() {
        return Backend::X11;
    }
    if report.family == Family::Kde && capability == Capability::FocusedWindow && report.state(capability).is_ok() {
        return Backend::KWin(report.wayland.clone());
    }
    if report.family == Family::Gnome && matches!(capability, Capability::FocusedWindow | Capability::ClipboardWatch) && report.state(capability).is_ok() {
        return Backend::Gnome;
    }
    match (&report.wayland, report.state(capability)) {
        (Some(target), state) if state.is_ok() || matches!(state, CapState::Degraded { .. }) => Backend::Wlroots(target.clone()),
        (_, state) => Backend::Blind(state.text()),
    }
}

/// What capture needs from a desktop.
pub trait DesktopBackend: Send {
    /// Waits up to `timeout`; true when the focused window or its title may have changed.
    fn wait_for_change(&mut self, timeout: Duration) -> Result<bool, String>;
    /// The focused top-level window, None when nothing is focused.
    fn active_window(&mut self) -> Result<Option<ActiveWindow>, String>;
    /// Whether `window` fills the screen (a film or a talk keeps the user present).
    fn is_fullscreen(&self, window: u32) -> bool;
    /// The desktop's own handle for `window` when it is the focused one
    /// (KWin's window UUID), for reading its pixels; None where there is none.
    fn handle(&self, _window: u32) -> Option<String> {
        None
    }
}

impl DesktopBackend for X11Desktop {
    fn wait_for_change(&mut self, timeout: Duration) -> Result<bool, String> {
        X11Desktop::wait_for_change(self, timeout).map_err(|err| err.to_string())
    }

    fn active_window(&mut self) -> Result<Option<ActiveWindow>, String> {
        X11Desktop::active_window(self).map_err(|err| err.to_string())
    }

    fn is_fullscreen(&self, window: u32) -> bool {
        X11Desktop::is_fullscreen(self, window).unwrap_or(false)
    }
}

impl DesktopBackend for KWinDesktop {
    fn wait_for_change(&mut self, timeout: Duration) -> Result<bool, String> {
        KWinDesktop::wait_for_change(self, timeout)
    }

    fn handle(&self, window: u32) -> Option<String> {
        KWinDesktop::handle(self, window)
    }

    fn active_window(&mut self) -> Result<Option<ActiveWindow>, String> {
        Ok(KWinDesktop::active_window(self))
    }

    fn is_fullscreen(&self, window: u32) -> bool {
        KWinDesktop::is_fullscreen(self, window)
    }
}

impl DesktopBackend for GnomeDesktop {
    fn wait_for_change(&mut self, timeout: Duration) -> Result<bool, String> {
        GnomeDesktop::wait_for_change(self, timeout)
    }

    fn active_window(&mut self) -> Result<Option<ActiveWindow>, String> {
        Ok(GnomeDesktop::active_window(self))
    }

    fn is_fullscreen(&self, window: u32) -> bool {
        GnomeDesktop::is_fullscreen(self, window)
    }
}

impl DesktopBackend for WlrDesktop {
    fn wait_for_change(&mut self, timeout: Duration) -> Result<bool, String> {
        WlrDesktop::wait_for_change(self, timeout)
    }

    fn active_window(&mut self) -> Result<Option<ActiveWindow>, String> {
        Ok(WlrDesktop::active_window(self))
    }

    fn is_fullscreen(&self, window: u32) -> bool {
        WlrDesktop::is_fullscreen(self, window)
    }
}

/// A connected backend, with where presence comes from and what it cannot do.
pub struct Connected {
    pub desktop: Box<dyn DesktopBackend>,
    /// None: presence cannot be seen, so nobody is ever marked away.
    pub probe: Option<Box<dyn InputProbe>>,
    /// What works only in part (capture then reports itself degraded with it).
    pub limits: Option<String>,
}

/// Connects the backend; `display` is X11's (None: `$DISPLAY`).
pub fn connect(backend: &Backend, display: Option<&str>) -> Result<Connected, String> {
    match backend {
        Backend::X11 => {
            let desktop = X11Desktop::connect(display).map_err(|err| err.to_string())?;
            let ewmh = desktop.has_active_window_support().unwrap_or(false);
            // device_query opens $DISPLAY itself; use it only when that is the display we watch.
            let same_display = display.is_none() || display == std::env::var("DISPLAY").ok().as_deref();
            let probe = if same_display { DeviceState::checked_new() } else { None };
            let limits = match (ewmh, probe.is_some()) {
                (false, _) => Some("the window manager does not publish _NET_ACTIVE_WINDOW; no window is tracked until one does".into()),
                (true, false) => Some("input state unavailable: AFK is not detected".into()),
                (true, true) => None,
            };
            Ok(Connected { desktop: Box::new(desktop), probe: probe.map(|p| Box::new(p) as Box<dyn InputProbe>), limits })
        }
        Backend::Wlroots(target) => {
            let desktop = WlrDesktop::connect(target)?;
            let presence = desktop.presence();
            let mut limits = Vec::new();
            if presence.is_none() {
                limits.push("the compositor offers no idle notifications: you are never marked away".to_owned());
            }
            if target.ipc.is_none() {
                limits.push("no compositor IPC for pids: browser URLs come from the address bar matched by title".to_owned());
            }
            Ok(Connected {
                desktop: Box::new(desktop),
                probe: presence.map(|p| Box::new(p) as Box<dyn InputProbe>),
                limits: (!limits.is_empty()).then(|| limits.join("; ")),
            })
        }
        Backend::KWin(target) => {
            let idle = target.as_ref().map(super::wlr::IdleWatch::connect).transpose();
            let (idle, limits) = match idle {
                Ok(Some(idle)) => (Some(idle), None),
                Ok(None) => (None, Some("KWin's display is not known: you are never marked away".to_owned())),
                Err(err) => (None, Some(format!("{err}: you are never marked away"))),
            };
            let probe = idle.as_ref().map(|idle| Box::new(idle.presence()) as Box<dyn InputProbe>);
            Ok(Connected { desktop: Box::new(KWinDesktop::connect()?.with_idle(idle)), probe, limits })
        }
        Backend::Gnome => {
            let (idle, limits) = match super::gnome::IdleMonitorWatch::connect() {
                Ok(idle) => (Some(idle), None),
                Err(err) => (None, Some(format!("{err}: you are never marked away"))),
            };
            let probe = idle.as_ref().map(|idle| Box::new(idle.presence()) as Box<dyn InputProbe>);
            Ok(Connected { desktop: Box::new(GnomeDesktop::connect()?.with_idle(idle)), probe, limits })
        }
        Backend::Blind(reason) => Err(reason.clone()),
    }
}
