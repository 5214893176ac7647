//! The wlroots backend (sway, Hyprland, river, niri, Wayfire, labwc): what
//! the compositor tells ordinary clients through wlroots' and the staging
//! protocols, each on a connection of its own, on its user's thread.
//!
//! - focus: `zwlr_foreign_toplevel_manager_v1` — titles, app ids, the
//!   `activated` and `fullscreen` states, double-buffered until `done`; the
//!   pid from the compositor's IPC (sway, Hyprland) for the focused window.
//! - presence: `ext_idle_notifier_v1`, else `org_kde_kwin_idle`, with a one
//!   second timeout: "active" until a second passes without input, "idle"
//!   until the next input. Capture's AFK logic back-dates as on X11.
//! - clipboard changes: `ext_data_control_v1` or `zwlr_data_control_v1`
//!   selection events (the text is read through arboard, as on X11).
//! - dictation: `zwp_virtual_keyboard_v1` with a keymap holding exactly the
//!   characters to type.
//! - the agent's window tools: the toplevel list and `activate` (ids hashed
//!   from app id and title, stable across connections).

use std::collections::HashMap;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wayland_client::{Connection, Dispatch, EventQueue, Proxy, QueueHandle, event_created_child};
use wayland_client::backend::ObjectId;
use wayland_client::globals::{GlobalList, GlobalListContents, registry_queue_init};
use wayland_client::protocol::wl_registry::WlRegistry;
use wayland_client::protocol::wl_seat::WlSeat;
use wayland_protocols::ext::data_control::v1::client::{ ext_data_control_device_v1::{self, ExtDataControlDeviceV1}, ext_data_control_manager_v1::ExtDataControlManagerV1, ext_data_control_offer_v1::ExtDataControlOfferV1, };
use wayland_protocols::ext::idle_notify::v1::client::{ ext_idle_notification_v1::{self, ExtIdleNotificationV1}, ext_idle_notifier_v1::ExtIdleNotifierV1, };
use wayland_protocols_misc::zwp_virtual_keyboard_v1::client::{zwp_virtual_keyboard_manager_v1::ZwpVirtualKeyboardManagerV1, zwp_virtual_keyboard_v1::ZwpVirtualKeyboardV1};
use wayland_protocols_plasma::idle::client::{ org_kde_kwin_idle::OrgKdeKwinIdle, org_kde_kwin_idle_timeout::{self, OrgKdeKwinIdleTimeout}, };
use wayland_protocols_wlr::data_control::v1::client::{ zwlr_data_control_device_v1::{self, ZwlrDataControlDeviceV1}, zwlr_data_control_manager_v1::ZwlrDataControlManagerV1, zwlr_data_control_offer_v1::ZwlrDataControlOfferV1, };
use wayland_protocols_wlr::foreign_toplevel::v1::client::{ zwlr_foreign_toplevel_handle_v1::{self, ZwlrForeignToplevelHandleV1}, zwlr_foreign_toplevel_manager_v1::{self, ZwlrForeignToplevelManagerV1}, };

use crate::records::ActiveWindow;

pub use super::observed::{IDLE_GRAIN, Presence, window_key};
/// cowork's own app id (its windows are not activity).
pub const OWN_APP_ID: &str = "cowork";

pub use super::session::WaylandTarget;

/// Connects to the compositor `target` names, with its registry.
fn connect(target: &WaylandTarget) -> Result<(Connection, GlobalList, EventQueue<Wlr>), String> {
    let socket = &target.socket;
    let stream = UnixStream::connect(socket).map_err(|err| format!("cannot reach the compositor at {}: {err}", socket.display()))?;
    let conn = Connection::from_socket(stream).map_err(|err| format!("the compositor's socket: {err}"))?;
    let (globals, queue) = registry_queue_init::<Wlr>(&conn).map_err(|err| format!("the compositor's registry: {err}"))?;
    Ok((conn, globals, queue))
}

/// One toplevel, as last committed (`done`) and as pending.
#[derive(Debug)]
struct Toplevel {
    handle: ZwlrForeignToplevelHandleV1,
    id: u32,
    title: String,
    app_id: String,
    activated: bool,
    fullscreen: bool,
    /// When it was last activated (a sequence number): with several
    /// activated (several seats), the newest wins.
    activated_seq: u64,
    committed: bool,
    pending_title: Option<String>,
    pending_app_id: Option<String>,
    pending_state: Option<Vec<u32>>,
    pid: Option<u32>,
    /// The IPC is asked once per change for a pid it did not give.
    pid_asked: bool,
}

/// Everything the connections' events update.
#[derive(Default)]
pub struct Wlr {
    toplevels: HashMap<ObjectId, Toplevel>,
    next_id: u32,
    seq: u64,
    /// The focused window or its title changed since last asked.
    changed: bool,
    /// The compositor ended the toplevel list.
    finished: bool,
    presence: Option<Arc<Presence>>,
    /// The clipboard's selection changed since last asked.
    selection_changed: bool,
    data_control_finished: bool,
}

impl Wlr {
    fn focused(&self) -> Option<&Toplevel> {
        self.toplevels.values().filter(|t| t.committed && t.activated).max_by_key(|t| t.activated_seq)
    }
}

impl Dispatch<WlRegistry, GlobalListContents> for Wlr {
    fn event(_: &mut Self, _: &WlRegistry, _: <WlRegistry as Proxy>::Event, _: &GlobalListContents, _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<WlSeat, ()> for Wlr {
    fn event(_: &mut Self, _: &WlSeat, _: <WlSeat as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<ZwlrForeignToplevelManagerV1, ()> for Wlr {
    fn event(
        state: &mut Self,
        _: &ZwlrForeignToplevelManagerV1,
        event: zwlr_foreign_toplevel_manager_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            zwlr_foreign_toplevel_manager_v1::Event::Toplevel { toplevel } => {
                state.next_id += 1;
                let toplevel = Toplevel {
                    handle: toplevel,
                    id: state.next_id,
                    title: String::new(),
                    app_id: String::new(),
                    activated: false,
                    fullscreen: false,
                    activated_seq: 0,
                    committed: false,
                    pending_title: None,
                    pending_app_id: None,
                    pending_state: None,
                    pid: None,
                    pid_asked: false,
                };
                state.toplevels.insert(toplevel.handle.id(), toplevel);
            }
            zwlr_foreign_toplevel_manager_v1::Event::Finished => state.finished = true,
            _ => {}
        }
    }

    event_created_child!(Wlr, ZwlrForeignToplevelManagerV1, [
        zwlr_foreign_toplevel_manager_v1::EVT_TOPLEVEL_OPCODE => (ZwlrForeignToplevelHandleV1, ()),
    ]);
}

/// The `state` array: native-endian u32 values (0 maximized, 1 minimized, 2 activated, 3 fullscreen).
fn states(raw: &[u8]) -> Vec<u32> {
    raw.chunks_exact(4).map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect()
}

const STATE_ACTIVATED: u32 = 2;
const STATE_FULLSCREEN: u32 = 3;

impl Dispatch<ZwlrForeignToplevelHandleV1, ()> for Wlr {
    fn event(
        state: &mut Self,
        handle: &ZwlrForeignToplevelHandleV1,
        event: zwlr_foreign_toplevel_handle_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let key = handle.id();
        match event {
            zwlr_foreign_toplevel_handle_v1::Event::Title { title } => {
                if let Some(t) = state.toplevels.get_mut(&key) {
                    t.pending_title = Some(title);
                }
            }
            zwlr_foreign_toplevel_handle_v1::Event::AppId { app_id } => {
                if let Some(t) = state.toplevels.get_mut(&key) {
                    t.pending_app_id = Some(app_id);
                }
            }
            zwlr_foreign_toplevel_handle_v1::Event::State { state: raw } => {
                if let Some(t) = state.toplevels.get_mut(&key) {
                    t.pending_state = Some(states(&raw));
                }
            }
            zwlr_foreign_toplevel_handle_v1::Event::Done => {
                state.seq += 1;
                let seq = state.seq;
                let Some(t) = state.toplevels.get_mut(&key) else { return };
                let was_focused = t.committed && t.activated;
                let mut described = false;
                if let Some(title) = t.pending_title.take() {
                    described |= title != t.title;
                    t.title = title;
                }
                if let Some(app_id) = t.pending_app_id.take() {
                    described |= app_id != t.app_id;
                    t.app_id = app_id;
                }
                if let Some(states) = t.pending_state.take() {
                    let activated = states.contains(&STATE_ACTIVATED);
                    if activated && !t.activated {
                        t.activated_seq = seq;
                    }
                    t.activated = activated;
                    t.fullscreen = states.contains(&STATE_FULLSCREEN);
                }
                t.committed = true;
                if described || (t.activated && !was_focused) {
                    t.pid_asked = false;
                }
                if (t.activated != was_focused) || (t.activated && described) {
                    state.changed = true;
                }
            }
            zwlr_foreign_toplevel_handle_v1::Event::Closed => {
                if let Some(t) = state.toplevels.remove(&key) {
                    state.changed |= t.committed && t.activated;
                    t.handle.destroy();
                }
            }
            _ => {}
        }
    }
}

fn idle_edge(presence: &Option<Arc<Presence>>, idle: bool) {
    if let Some(presence) = presence {
        presence.set_idle(idle);
    }
}

impl Dispatch<OrgKdeKwinIdle, ()> for Wlr {
    fn event(_: &mut Self, _: &OrgKdeKwinIdle, _: <OrgKdeKwinIdle as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<OrgKdeKwinIdleTimeout, ()> for Wlr {
    fn event(state: &mut Self, _: &OrgKdeKwinIdleTimeout, event: org_kde_kwin_idle_timeout::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {
        match event {
            org_kde_kwin_idle_timeout::Event::Idle => idle_edge(&state.presence, true),
            org_kde_kwin_idle_timeout::Event::Resumed => idle_edge(&state.presence, false),
            _ => {}
        }
    }
}

impl Dispatch<ExtIdleNotifierV1, ()> for Wlr {
    fn event(_: &mut Self, _: &ExtIdleNotifierV1, _: <ExtIdleNotifierV1 as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<ExtIdleNotificationV1, ()> for Wlr {
    fn event(state: &mut Self, _: &ExtIdleNotificationV1, event: ext_idle_notification_v1::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {
        match event {
            ext_idle_notification_v1::Event::Idled => idle_edge(&state.presence, true),
            ext_idle_notification_v1::Event::Resumed => idle_edge(&state.presence, false),
            _ => {}
        }
    }
}

impl Dispatch<ZwlrDataControlManagerV1, ()> for Wlr {
    fn event(_: &mut Self, _: &ZwlrDataControlManagerV1, _: <ZwlrDataControlManagerV1 as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<ZwlrDataControlDeviceV1, ()> for Wlr {
    fn event(state: &mut Self, _: &ZwlrDataControlDeviceV1, event: zwlr_data_control_device_v1::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {
        match event {
            zwlr_data_control_device_v1::Event::Selection { id } => {
                state.selection_changed |= id.is_some();
            }
            zwlr_data_control_device_v1::Event::Finished => state.data_control_finished = true,
            _ => {}
        }
    }

    event_created_child!(Wlr, ZwlrDataControlDeviceV1, [
        zwlr_data_control_device_v1::EVT_DATA_OFFER_OPCODE => (ZwlrDataControlOfferV1, ()),
    ]);
}

impl Dispatch<ZwlrDataControlOfferV1, ()> for Wlr {
    fn event(_: &mut Self, _: &ZwlrDataControlOfferV1, _: <ZwlrDataControlOfferV1 as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<ExtDataControlManagerV1, ()> for Wlr {
    fn event(_: &mut Self, _: &ExtDataControlManagerV1, _: <ExtDataControlManagerV1 as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<ExtDataControlDeviceV1, ()> for Wlr {
    fn event(state: &mut Self, _: &ExtDataControlDeviceV1, event: ext_data_control_device_v1::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {
        match event {
            ext_data_control_device_v1::Event::Selection { id } => {
                state.selection_changed |= id.is_some();
            }
            ext_data_control_device_v1::Event::Finished => state.data_control_finished = true,
            _ => {}
        }
    }

    event_created_child!(Wlr, ExtDataControlDeviceV1, [
        ext_data_control_device_v1::EVT_DATA_OFFER_OPCODE => (ExtDataControlOfferV1, ()),
    ]);
}

impl Dispatch<ExtDataControlOfferV1, ()> for Wlr {
    fn event(_: &mut Self, _: &ExtDataControlOfferV1, _: <ExtDataControlOfferV1 as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<ZwpVirtualKeyboardManagerV1, ()> for Wlr {
    fn event(_: &mut Self, _: &ZwpVirtualKeyboardManagerV1, _: <ZwpVirtualKeyboardManagerV1 as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<ZwpVirtualKeyboardV1, ()> for Wlr {
    fn event(_: &mut Self, _: &ZwpVirtualKeyboardV1, _: <ZwpVirtualKeyboardV1 as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

/// A connection whose events are read only when they are there: flush,
/// dispatch what is queued, wait on the socket up to `timeout`, read, dispatch.
struct Events {
    conn: Connection,
    queue: EventQueue<Wlr>,
    state: Wlr,
}

impl Events {
    fn pump(&mut self, timeout: Duration) -> Result<(), String> {
        let lost = |err: &dyn std::fmt::Display| format!("the Wayland connection was lost: {err}");
        self.conn.flush().map_err(|e| lost(&e))?;
        self.queue.dispatch_pending(&mut self.state).map_err(|e| lost(&e))?;
        if let Some(guard) = self.queue.prepare_read() {
            let mut poll_fd = libc::pollfd { fd: guard.connection_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 };
            let millis = timeout.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd for the duration of the call.
            let ready = unsafe { libc::poll(&mut poll_fd, 1, millis) };
            if ready > 0 {
                match guard.read() {
                    Ok(_) => {}
                    Err(wayland_client::backend::WaylandError::Io(err)) if err.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(err) => return Err(lost(&err)),
                }
            }
        }
        self.queue.dispatch_pending(&mut self.state).map_err(|e| lost(&e))?;
        Ok(())
    }

    fn roundtrip(&mut self) -> Result<(), String> {
        self.queue.roundtrip(&mut self.state).map(|_| ()).map_err(|err| format!("the compositor did not answer: {err}"))
    }
}

fn bind_seat(globals: &GlobalList, qh: &QueueHandle<Wlr>) -> Result<WlSeat, String> {
    globals.bind::<WlSeat, _, _>(qh, 1..=1, ()).map_err(|err| format!("the compositor has no seat: {err}"))
}

/// Binds the compositor's idle notification (ext-idle-notify, else KDE's) for `seat`, one grain long.
fn idle_object(globals: &GlobalList, qh: &QueueHandle<Wlr>, seat: &WlSeat) -> Option<IdleObject> {
    let timeout = IDLE_GRAIN.as_millis() as u32;
    if let Ok(notifier) = globals.bind::<ExtIdleNotifierV1, _, _>(qh, 1..=1, ()) {
        Some(IdleObject::Ext(notifier.get_idle_notification(timeout, seat, qh, ())))
    } else if let Ok(idle) = globals.bind::<OrgKdeKwinIdle, _, _>(qh, 1..=1, ()) {
        Some(IdleObject::Kde(idle.get_idle_timeout(seat, timeout, qh, ())))
    } else {
        None
    }
}

/// Presence alone, from the compositor's idle notification, on its own
/// `idle` thread (KDE Plasma: KWin offers ext-idle-notify but no window
/// list, which its script gives). The thread waits on the Wayland socket
/// and looks at its stop flag once a grain; dropping the watch ends it.
pub struct IdleWatch {
    presence: Arc<Presence>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl IdleWatch {
    pub fn connect(target: &WaylandTarget) -> Result<Self, String> {
        let (conn, globals, queue) = connect(target)?;
        let qh = queue.handle();
        let seat = bind_seat(&globals, &qh)?;
        let idle = idle_object(&globals, &qh, &seat).ok_or("the compositor offers no idle notifications")?;
        let presence = Arc::new(Presence::default());
        let state = Wlr { presence: Some(presence.clone()), ..Wlr::default() };
        let mut events = Events { conn, queue, state };
        events.roundtrip()?;
        let stop = Arc::new(AtomicBool::new(false));
        let ended = stop.clone();
        let thread = std::thread::Builder::new()
            .name("idle".into())
            .spawn(move || {
                let _kept = (idle, seat);
                while !ended.load(Ordering::Relaxed) {
                    if let Err(err) = events.pump(IDLE_GRAIN) {
                        tracing::warn!(error = %err, "idle notifications ended: you are no longer marked away");
                        return;
                    }
                }
            })
            .map_err(|err| format!("cannot start the idle thread: {err}"))?;
        Ok(Self { presence, stop, thread: Some(thread) })
    }

    pub fn presence(&self) -> Arc<Presence> {
        self.presence.clone()
    }
}

impl Drop for IdleWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The focused window and presence on a wlroots compositor (capture's backend there).
pub struct WlrDesktop {
    events: Events,
    ipc: Option<super::ipc::Ipc>,
    presence: Option<Arc<Presence>>,
    _idle: Option<IdleObject>,
}

enum IdleObject {
    Ext(ExtIdleNotificationV1),
    Kde(OrgKdeKwinIdleTimeout),
}

impl Drop for IdleObject {
    fn drop(&mut self) {
        match self {
            IdleObject::Ext(n) => n.destroy(),
            IdleObject::Kde(t) => t.release(),
        }
    }
}

impl WlrDesktop {
    /// Connects and reads the current windows. Fails when the compositor
    /// offers no foreign-toplevel list.
    pub fn connect(target: &WaylandTarget) -> Result<Self, String> {
        let (conn, globals, queue) = connect(target)?;
        let qh = queue.handle();
        globals
            .bind::<ZwlrForeignToplevelManagerV1, _, _>(&qh, 1..=3, ())
            .map_err(|err| format!("the compositor offers no zwlr_foreign_toplevel_manager_v1 ({err})"))?;
        let mut state = Wlr::default();
        let seat = bind_seat(&globals, &qh).ok();
        let presence = Arc::new(Presence::default());
        let idle = seat.as_ref().and_then(|seat| idle_object(&globals, &qh, seat));
        let presence = idle.as_ref().map(|_| presence);
        state.presence = presence.clone();
        let mut events = Events { conn, queue, state };
        // The toplevels, then their first `done`.
        events.roundtrip()?;
        events.roundtrip()?;
        events.state.changed = true;
        Ok(Self { events, ipc: target.ipc.clone(), presence, _idle: idle })
    }

    /// Presence for the AFK detector, when the compositor has idle notifications.
    pub fn presence(&self) -> Option<Arc<Presence>> {
        self.presence.clone()
    }

    /// Waits up to `timeout` for events; true when the focused window or its title changed.
    pub fn wait_for_change(&mut self, timeout: Duration) -> Result<bool, String> {
        if !std::mem::take(&mut self.events.state.changed) {
            self.events.pump(timeout)?;
        }
        if self.events.state.finished {
            return Err("the compositor ended its toplevel list".into());
        }
        Ok(std::mem::take(&mut self.events.state.changed))
    }

    /// The focused window, with its pid when the compositor's IPC gives it;
    /// None when nothing, or cowork itself, is focused.
    pub fn active_window(&mut self) -> Option<ActiveWindow> {
        let key = self.events.state.focused()?.handle.id();
        let toplevel = self.events.state.toplevels.get_mut(&key)?;
        if toplevel.pid.is_none() && !toplevel.pid_asked {
            toplevel.pid_asked = true;
            toplevel.pid = self.ipc.as_ref().and_then(|ipc| ipc.focused_pid(&toplevel.app_id, &toplevel.title));
        }
        if toplevel.pid == Some(std::process::id()) || (toplevel.pid.is_none() && toplevel.app_id == OWN_APP_ID) {
            return None;
        }
        let app = if toplevel.app_id.is_empty() { "unknown".to_owned() } else { toplevel.app_id.clone() };
        Some(ActiveWindow { window_id: toplevel.id, app, title: toplevel.title.clone(), pid: toplevel.pid, url: None, url_source: None })
    }

    pub fn is_fullscreen(&self, window: u32) -> bool {
        self.events.state.toplevels.values().any(|t| t.id == window && t.fullscreen)
    }
}

/// Every toplevel window, described (pids from the IPC where it gives them).
pub fn list_windows(target: &WaylandTarget) -> Result<Vec<ActiveWindow>, String> {
    let (events, _seat) = toplevel_snapshot(target)?;
    let ipc_windows = target.ipc.as_ref().and_then(|ipc| ipc.windows().ok()).unwrap_or_default();
    let mut windows: Vec<ActiveWindow> = events
        .state
        .toplevels
        .values()
        .filter(|t| t.committed)
        .map(|t| ActiveWindow {
            window_id: window_key(&t.app_id, &t.title),
            app: t.app_id.clone(),
            title: t.title.clone(),
            pid: ipc_windows.iter().find(|w| w.app_id == t.app_id && w.title == t.title).and_then(|w| w.pid),
            url: None,
            url_source: None,
        })
        .collect();
    windows.sort_by(|a, b| (&a.app, &a.title).cmp(&(&b.app, &b.title)));
    Ok(windows)
}

/// Asks the compositor to focus the window `key` names (from [`list_windows`]).
pub fn activate(target: &WaylandTarget, key: u32) -> Result<(), String> {
    let (mut events, seat) = toplevel_snapshot(target)?;
    let seat = seat.ok_or("the compositor has no seat to focus a window on")?;
    let toplevel = events
        .state
        .toplevels
        .values()
        .find(|t| t.committed && window_key(&t.app_id, &t.title) == key)
        .ok_or_else(|| format!("there is no window {key} (list the windows again: an id follows the title)"))?;
    toplevel.handle.activate(&seat);
    events.roundtrip()
}

fn toplevel_snapshot(target: &WaylandTarget) -> Result<(Events, Option<WlSeat>), String> {
    let (conn, globals, queue) = connect(target)?;
    let qh = queue.handle();
    globals.bind::<ZwlrForeignToplevelManagerV1, _, _>(&qh, 1..=3, ()).map_err(|err| format!("the compositor offers no window list ({err})"))?;
    let seat = bind_seat(&globals, &qh).ok();
    let mut events = Events { conn, queue, state: Wlr::default() };
    events.roundtrip()?;
    events.roundtrip()?;
    Ok((events, seat))
}

/// Clipboard changes on a wlroots compositor (the clipboard worker's watch there).
pub struct SelectionWatch {
    events: Events,
    _device: DataDevice,
}

enum DataDevice {
    Ext(ExtDataControlDeviceV1),
    Wlr(ZwlrDataControlDeviceV1),
}

impl Drop for DataDevice {
    fn drop(&mut self) {
        match self {
            DataDevice::Ext(d) => d.destroy(),
            DataDevice::Wlr(d) => d.destroy(),
        }
    }
}

impl SelectionWatch {
    /// Watches the clipboard selection through ext- or wlr-data-control. The
    /// selection as it is now is not a change.
    pub fn connect(target: &WaylandTarget) -> Result<Self, String> {
        let (conn, globals, queue) = connect(target)?;
        let qh = queue.handle();
        let seat = bind_seat(&globals, &qh)?;
        let device = if let Ok(manager) = globals.bind::<ExtDataControlManagerV1, _, _>(&qh, 1..=1, ()) {
            DataDevice::Ext(manager.get_data_device(&seat, &qh, ()))
        } else if let Ok(manager) = globals.bind::<ZwlrDataControlManagerV1, _, _>(&qh, 1..=2, ()) {
            DataDevice::Wlr(manager.get_data_device(&seat, &qh, ()))
        } else {
            return Err("the compositor offers no data-control protocol (ext or wlr)".into());
        };
        let mut events = Events { conn, queue, state: Wlr::default() };
        events.roundtrip()?;
        events.state.selection_changed = false;
        Ok(Self { events, _device: device })
    }

    /// Waits up to `timeout`; true when something new was copied.
    pub fn wait_for_change(&mut self, timeout: Duration) -> Result<bool, String> {
        if !self.events.state.selection_changed {
            self.events.pump(timeout)?;
        }
        if self.events.state.data_control_finished {
            return Err("the compositor ended clipboard watching".into());
        }
        Ok(std::mem::take(&mut self.events.state.selection_changed))
    }
}

/// Types `text` (already made typeable: no control characters) into the
/// focused window through a virtual keyboard whose keymap holds exactly its
/// characters. Returns the characters typed.
pub fn type_text(target: &WaylandTarget, text: &str) -> Result<usize, String> {
    let (conn, globals, queue) = connect(target)?;
    let qh = queue.handle();
    let seat = bind_seat(&globals, &qh)?;
    let manager = globals
        .bind::<ZwpVirtualKeyboardManagerV1, _, _>(&qh, 1..=1, ())
        .map_err(|err| format!("the compositor offers no virtual keyboard (zwp_virtual_keyboard_manager_v1: {err})"))?;
    let keyboard = manager.create_virtual_keyboard(&seat, &qh, ());
    let mut events = Events { conn, queue, state: Wlr::default() };
    let started = Instant::now();
    let time = || started.elapsed().as_millis() as u32;
    let chars: Vec<char> = text.chars().collect();
    let mut typed = 0;
    for chunk in keymap_chunks(&chars) {
        let keymap = Keymap::for_chars(chunk);
        let fd = keymap_fd(&keymap.text)?;
        keyboard.keymap(1, fd.as_fd(), keymap.text.len() as u32 + 1);
        // The modifiers make the seat switch to this keyboard and send its
        // keymap to the focused app before the first key (a key sent first
        // is lost), and say no modifier is held: a Ctrl held on the real
        // keyboard does not turn these letters into shortcuts.
        keyboard.modifiers(0, 0, 0, 0);
        events.roundtrip()?;
        std::thread::sleep(Duration::from_millis(30));
        for c in chunk {
            let code = keymap.code(*c).expect("every character of the chunk is in its keymap");
            keyboard.key(time(), code, 1);
            keyboard.key(time(), code, 0);
            typed += 1;
            if typed % 64 == 0 {
                events.roundtrip()?;
            }
        }
        events.roundtrip()?;
    }
    keyboard.destroy();
    events.roundtrip()?;
    Ok(typed)
}

/// Keycodes a keymap may use (evdev codes 1..=247, XKB keycodes 9..=255).
const MAX_KEYS: usize = 240;

/// Splits the text where a keymap would need more keys than it has.
fn keymap_chunks(chars: &[char]) -> Vec<&[char]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut seen = std::collections::HashSet::new();
    for (i, c) in chars.iter().enumerate() {
        if seen.insert(*c) && seen.len() > MAX_KEYS {
            chunks.push(&chars[start..i]);
            start = i;
            seen.clear();
            seen.insert(*c);
        }
    }
    if start < chars.len() {
        chunks.push(&chars[start..]);
    }
    chunks
}

/// An XKB keymap with one key per distinct character, and which key is which.
pub struct Keymap {
    pub text: String,
    chars: Vec<char>,
}

impl Keymap {
    pub fn for_chars(chars: &[char]) -> Keymap {
        let mut distinct: Vec<char> = Vec::new();
        for c in chars {
            if !distinct.contains(c) {
                distinct.push(*c);
            }
        }
        let mut text = String::from("xkb_keymap {\nxkb_keycodes \"cowork\" {\nminimum = 8;\nmaximum = 255;\n");
        for i in 0..distinct.len() {
            text.push_str(&format!("<K{}> = {};\n", i + 1, i + 9));
        }
        text.push_str("};\nxkb_types \"cowork\" { include \"complete\" };\nxkb_compatibility \"cowork\" { include \"complete\" };\nxkb_symbols \"cowork\" {\n");
        for (i, c) in distinct.iter().enumerate() {
            let keysym = super::keysym::keysym_for(*c).unwrap_or(0);
            text.push_str(&format!("key <K{}> {{ [ 0x{keysym:08x} ] }};\n", i + 1));
        }
        text.push_str("};\n};\n");
        Keymap { text, chars: distinct }
    }

    /// The evdev code that types `c`.
    pub fn code(&self, c: char) -> Option<u32> {
        self.chars.iter().position(|k| *k == c).map(|i| i as u32 + 1)
    }
}

/// A new anonymous memory file (memfd), for what a compositor reads or writes by descriptor.
pub(super) fn memory_file(name: &std::ffi::CStr) -> Result<OwnedFd, String> {
    // SAFETY: a valid C string; the returned descriptor is owned below.
    let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(format!("cannot make a memory file: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: memfd_create returned a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// The keymap in a sealed memory file, NUL-terminated as XKB readers expect.
fn keymap_fd(text: &str) -> Result<OwnedFd, String> {
    let mut file = std::fs::File::from(memory_file(c"cowork-keymap")?);
    file.write_all(text.as_bytes()).and_then(|()| file.write_all(&[0])).map_err(|err| format!("cannot write the keymap: {err}"))?;
    Ok(OwnedFd::from(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keymap_holds_each_character_once_with_its_keysym() {
        let chars: Vec<char> = "héllo wörld €5".chars().collect();
        let keymap = Keymap::for_chars(&chars);
        assert_eq!(keymap.code('h'), Some(1));
        assert_eq!(keymap.code('l'), keymap.code('l'));
        assert!(keymap.text.contains("[ 0x000000e9 ]"), "é is Latin-1: {}", keymap.text);
        assert!(keymap.text.contains("[ 0x010020ac ]"), "€ is a Unicode keysym: {}", keymap.text);
        assert!(keymap.text.contains("[ 0x00000020 ]"), "space");
        assert_eq!(keymap.code('x'), None);
        let distinct = chars.iter().collect::<std::collections::HashSet<_>>().len();
        assert_eq!(keymap.text.matches("key <K").count(), distinct);
    }

    #[test]
    fn text_with_more_distinct_characters_than_keys_is_typed_in_chunks() {
        let chars: Vec<char> = (0..600u32).map(|i| char::from_u32(0x4e00 + i).unwrap()).collect();
        let chunks = keymap_chunks(&chars);
        assert_eq!(chunks.iter().map(|c| c.len()).sum::<usize>(), 600);
        assert!(chunks.iter().all(|c| c.iter().collect::<std::collections::HashSet<_>>().len() <= MAX_KEYS));
        assert_eq!(chunks.concat(), chars);
    }

    #[test]
    fn window_keys_are_stable_and_tell_app_from_title() {
        assert_eq!(window_key("foot", "notes"), window_key("foot", "notes"));
        assert_ne!(window_key("foot", "notes"), window_key("footn", "otes"));
        assert!(window_key("", "") > 0);
    }
}
