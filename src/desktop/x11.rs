//! The active window on X11, read with x11rb: `_NET_ACTIVE_WINDOW` on the root
//! window, `_NET_WM_NAME` (or `WM_NAME`) for the title, `WM_CLASS` for the app
//! and `_NET_WM_PID` for the process. Change notifications come as
//! PropertyNotify events on the X socket, so an idle desktop costs no polling
//! beyond capture's 1 s safety read. `X11Desktop` is the X11 `DesktopBackend`
//! (`desktop::backend`).

use std::os::fd::AsRawFd;
use std::time::Duration;

use thiserror::Error;
use x11rb::connection::Connection;
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{AtomEnum, ChangeWindowAttributesAux, ConnectionExt as _, EventMask, Window};
use x11rb::rust_connection::RustConnection;

use crate::records::ActiveWindow;

#[derive(Debug, Error)]
pub enum X11Error {
    #[error("no X display: {0}")]
    NoDisplay(String),
    #[error("X connection lost: {0}")]
    Connection(String),
}

impl From<x11rb::errors::ConnectionError> for X11Error {
    fn from(err: x11rb::errors::ConnectionError) -> Self {
        X11Error::Connection(err.to_string())
    }
}

impl From<x11rb::errors::ReplyError> for X11Error {
    fn from(err: x11rb::errors::ReplyError) -> Self {
        X11Error::Connection(err.to_string())
    }
}

struct Atoms {
    net_active_window: u32,
    net_client_list: u32,
    net_wm_name: u32,
    net_wm_pid: u32,
    net_workarea: u32,
    net_supported: u32,
    net_wm_state: u32,
    net_wm_state_fullscreen: u32,
    utf8_string: u32,
}

/// A connection to the X server that watches the active window.
pub struct X11Desktop {
    conn: RustConnection,
    root: Window,
    atoms: Atoms,
    /// The window whose title changes we are subscribed to.
    watched: Option<Window>,
}

/// The area of the screen not covered by panels, from `_NET_WORKAREA`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkArea {
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
}

impl X11Desktop {
    /// Connects to `display`, or to `$DISPLAY` when `None`.
    pub fn connect(display: Option<&str>) -> Result<Self, X11Error> {
        let shown = display.map(str::to_owned).or_else(|| std::env::var("DISPLAY").ok());
        if shown.as_deref().is_none_or(str::is_empty) {
            return Err(X11Error::NoDisplay(
                "DISPLAY is not set (Wayland without XWayland, or no desktop session)".into(),
            ));
        }
        let (conn, screen) = x11rb::connect(display)
            .map_err(|err| X11Error::NoDisplay(format!("cannot connect to {}: {err}", shown.unwrap_or_default())))?;
        let root = conn.setup().roots[screen].root;
        let intern = |name: &[u8]| -> Result<u32, X11Error> { Ok(conn.intern_atom(false, name)?.reply()?.atom) };
        let atoms = Atoms {
            net_active_window: intern(b"_NET_ACTIVE_WINDOW")?,
            net_client_list: intern(b"_NET_CLIENT_LIST")?,
            net_wm_name: intern(b"_NET_WM_NAME")?,
            net_wm_pid: intern(b"_NET_WM_PID")?,
            net_workarea: intern(b"_NET_WORKAREA")?,
            net_supported: intern(b"_NET_SUPPORTED")?,
            net_wm_state: intern(b"_NET_WM_STATE")?,
            net_wm_state_fullscreen: intern(b"_NET_WM_STATE_FULLSCREEN")?,
            utf8_string: intern(b"UTF8_STRING")?,
        };
        conn.change_window_attributes(root, &ChangeWindowAttributesAux::new().event_mask(EventMask::PROPERTY_CHANGE))?
            .check()?;
        Ok(Self { conn, root, atoms, watched: None })
    }

    /// Whether `window` is fullscreen (`_NET_WM_STATE_FULLSCREEN`): a film or
    /// a presentation keeps the user present without input.
    pub fn is_fullscreen(&self, window: u32) -> Result<bool, X11Error> {
        let reply = self.conn.get_property(false, window, self.atoms.net_wm_state, AtomEnum::ATOM, 0, 64)?.reply()?;
        Ok(reply.value32().is_some_and(|mut states| states.any(|s| s == self.atoms.net_wm_state_fullscreen)))
    }

    /// Whether a window manager supports `_NET_ACTIVE_WINDOW` (EWMH), from
    /// `_NET_SUPPORTED`: the property itself may be unset while nothing is focused.
    pub fn has_active_window_support(&self) -> Result<bool, X11Error> {
        let reply = self
            .conn
            .get_property(false, self.root, self.atoms.net_supported, AtomEnum::ATOM, 0, 4096)?
            .reply()?;
        Ok(reply.value32().is_some_and(|mut atoms| atoms.any(|atom| atom == self.atoms.net_active_window)))
    }

    /// The focused top-level window, or `None` when nothing is focused.
    pub fn active_window(&mut self) -> Result<Option<ActiveWindow>, X11Error> {
        let reply = self
            .conn
            .get_property(false, self.root, self.atoms.net_active_window, AtomEnum::WINDOW, 0, 1)?
            .reply()?;
        let window = reply.value32().and_then(|mut values| values.next()).unwrap_or(0);
        if window == 0 {
            self.watch(None);
            return Ok(None);
        }
        self.watch(Some(window));
        // The window can vanish between the two requests: treat that as no focus.
        match self.describe(window) {
            Ok(active) => Ok(Some(active)),
            Err(X11Error::Connection(text)) if text.contains("Window") => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// `window` described as capture sees a focused one (app, title, pid), if
    /// it is one of the windows the window manager lists: an id of the root,
    /// of a frame or of a window inside an app's (which would carry no app or
    /// title for the privacy rules to judge) is no window here.
    pub fn listed_window(&self, window: Window) -> Result<ActiveWindow, X11Error> {
        self.list_windows()?.into_iter().find(|w| w.window_id == window).ok_or_else(|| X11Error::Connection(format!("there is no window {window} among the open windows")))
    }

    /// The whole screen's pixels (`x11_pixels::capture_screen`).
    pub fn capture_screen(&self) -> Result<image::RgbaImage, String> {
        super::x11_pixels::capture_screen(&self.conn, self.root)
    }

    /// `window`'s own pixels on the screen, with windows stacked above it covered (`x11_pixels`).
    pub fn capture_window(&self, window: Window) -> Result<image::RgbaImage, String> {
        super::x11_pixels::capture(&self.conn, self.root, window)
    }

    fn describe(&self, window: Window) -> Result<ActiveWindow, X11Error> {
        let net_name = self
            .conn
            .get_property(false, window, self.atoms.net_wm_name, self.atoms.utf8_string, 0, 1024)?
            .reply()?;
        let title = if net_name.value.is_empty() {
            let name = self.conn.get_property(false, window, AtomEnum::WM_NAME, AtomEnum::ANY, 0, 1024)?.reply()?;
            String::from_utf8_lossy(&name.value).into_owned()
        } else {
            String::from_utf8_lossy(&net_name.value).into_owned()
        };
        let class = self.conn.get_property(false, window, AtomEnum::WM_CLASS, AtomEnum::STRING, 0, 256)?.reply()?;
        let app = parse_wm_class(&class.value);
        let pid = self
            .conn
            .get_property(false, window, self.atoms.net_wm_pid, AtomEnum::CARDINAL, 0, 1)?
            .reply()?
            .value32()
            .and_then(|mut values| values.next());
        Ok(ActiveWindow { window_id: window, app, title, pid, url: None, url_source: None })
    }

    /// Subscribes to property changes (title) of the active window only.
    fn watch(&mut self, window: Option<Window>) {
        if self.watched == window {
            return;
        }
        if let Some(old) = self.watched {
            // The old window may be gone already; an error here is harmless.
            let _ = self
                .conn
                .change_window_attributes(old, &ChangeWindowAttributesAux::new().event_mask(EventMask::NO_EVENT));
        }
        if let Some(new) = window {
            let _ = self
                .conn
                .change_window_attributes(new, &ChangeWindowAttributesAux::new().event_mask(EventMask::PROPERTY_CHANGE));
        }
        let _ = self.conn.flush();
        self.watched = window;
    }

    /// Waits up to `timeout` for X events. Returns true when the active window
    /// or its title may have changed.
    pub fn wait_for_change(&mut self, timeout: Duration) -> Result<bool, X11Error> {
        let mut changed = self.drain_events()?;
        if changed {
            return Ok(true);
        }
        let mut poll_fd = libc::pollfd { fd: self.conn.stream().as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let timeout_millis = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let ready = unsafe { libc::poll(&mut poll_fd, 1, timeout_millis) };
        if ready > 0 {
            changed = self.drain_events()?;
        }
        Ok(changed)
    }

    fn drain_events(&mut self) -> Result<bool, X11Error> {
        let mut changed = false;
        while let Some(event) = self.conn.poll_for_event()? {
            if let Event::PropertyNotify(notify) = event {
                let on_root = notify.window == self.root && notify.atom == self.atoms.net_active_window;
                let on_watched = Some(notify.window) == self.watched
                    && (notify.atom == self.atoms.net_wm_name || notify.atom == u32::from(AtomEnum::WM_NAME));
                changed |= on_root || on_watched;
            }
        }
        Ok(changed)
    }

    /// The top-level windows the window manager lists (`_NET_CLIENT_LIST`),
    /// described; a window that closes while being read is left out.
    pub fn list_windows(&self) -> Result<Vec<ActiveWindow>, X11Error> {
        let reply = self.conn.get_property(false, self.root, self.atoms.net_client_list, AtomEnum::WINDOW, 0, 1024)?.reply()?;
        let windows: Vec<Window> = reply.value32().map(|values| values.collect()).unwrap_or_default();
        Ok(windows.into_iter().filter_map(|window| self.describe(window).ok()).collect())
    }

    /// Asks the window manager to raise and focus `window` (a
    /// `_NET_ACTIVE_WINDOW` client message, source "pager" so it is honoured).
    pub fn activate(&self, window: Window) -> Result<(), X11Error> {
        use x11rb::protocol::xproto::ClientMessageEvent;
        self.listed_window(window)?;
        let event = ClientMessageEvent::new(32, window, self.atoms.net_active_window, [2, x11rb::CURRENT_TIME, 0, 0, 0]);
        self.conn.send_event(false, self.root, EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY, event)?;
        self.conn.flush()?;
        Ok(())
    }

    /// The work area of the first desktop, if the window manager publishes one.
    pub fn work_area(&self) -> Option<WorkArea> {
        let reply = self
            .conn
            .get_property(false, self.root, self.atoms.net_workarea, AtomEnum::CARDINAL, 0, 4)
            .ok()?
            .reply()
            .ok()?;
        let values: Vec<u32> = reply.value32()?.collect();
        if values.len() == 4 && values[2] > 0 && values[3] > 0 {
            return Some(WorkArea { x: values[0] as i32, y: values[1] as i32, width: values[2], height: values[3] });
        }
        None
    }

    /// The size of the root window (the whole screen).
    pub fn screen_size(&self) -> (u32, u32) {
        let screen = &self.conn.setup().roots[0];
        (u32::from(screen.width_in_pixels), u32::from(screen.height_in_pixels))
    }
}

/// `WM_CLASS` is "instance\0class\0"; the class names the application.
fn parse_wm_class(raw: &[u8]) -> String {
    let mut parts = raw.split(|&b| b == 0).filter(|part| !part.is_empty());
    let instance = parts.next();
    let class = parts.next().or(instance);
    class.map(|c| String::from_utf8_lossy(c).into_owned()).unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wm_class_prefers_the_class_part() {
        assert_eq!(parse_wm_class(b"xterm\0XTerm\0"), "XTerm");
        assert_eq!(parse_wm_class(b"solo\0"), "solo");
        assert_eq!(parse_wm_class(b""), "unknown");
    }

    #[test]
    fn connecting_to_a_display_that_does_not_exist_is_a_clear_error() {
        let err = X11Desktop::connect(Some(":4242")).err().expect("no server on :4242");
        assert!(err.to_string().starts_with("no X display"), "{err}");
    }
}
