//! Integration with the desktop outside our window. This file holds the global
//! hotkeys (quick prompt, pause, push-to-talk: global-hotkey's key grabs, X
//! sessions only; their presses arrive as `DesktopEvent`s), the system tray
//! (ksni, a StatusNotifierItem on the session bus: Pause, Show, Quit) and the
//! sidebar's default placement from the X11 work area. The rest is which
//! desktop this is and what cowork can do there:
//!
//! - `session`: reads the facts once (`XDG_SESSION_TYPE`,
//!   `XDG_CURRENT_DESKTOP`, `WAYLAND_DISPLAY`, the compositor's globals from a
//!   registry probe on its own thread, 2 s at most, the session bus's names,
//!   whether cowork's GNOME extension answers and is installed, `SWAYSOCK`,
//!   Hyprland's signature, and the portal's interfaces when a portal already
//!   runs) and decides, purely, the family (X11, wlroots, KDE, GNOME, another
//!   Wayland compositor, none) and each of nine capabilities' `CapState` (ok,
//!   degraded with why and the fix, unavailable with why). The `Report` goes to
//!   the UI (`DesktopEvent::Report`), to `cowork doctor`, and decides each
//!   worker's backend (`backend::backend_for`).
//! - `x11_pixels`: a window's own pixels on X11, windows above it covered, reads counted.
//! - `backend`: the seam capture consumes (`DesktopBackend`); `x11`, `wlr`
//!   (wlroots), `kwin` (KDE Plasma, through cowork's KWin script), `gnome`
//!   (through cowork's GNOME Shell extension) are the backends; `observed` is
//!   what they share; `input` is where AFK's input state comes from.
//! - `portal`: the XDG desktop portal (GlobalShortcuts, RemoteDesktop, the
//!   FileChooser); `ei`: typing through libei; `keysym`: characters as keysyms.
//! - `appearance`: light or dark, as the desktop prefers.
//! - `ipc`: sway's and Hyprland's IPC; `place`: the `place` thread that docks
//!   the sidebar and centres the quick prompt.
//! - `trigger`: `cowork trigger`'s socket; `instance`: one cowork per data
//!   directory; `autostart`: the XDG autostart entry.
//!
//! Invariants:
//! - The session decides; an X11 connection that succeeds decides nothing on a
//!   Wayland session (XWayland sees only X apps). Where no backend sees
//!   something, the worker records nothing and says why.
//! - Two coworks never capture into one data directory (`instance`).

pub mod appearance;
pub mod autostart;
pub mod backend;
pub mod ei;
pub mod events;
pub mod gnome;
pub mod input;
pub mod instance;
pub mod ipc;
pub mod keysym;
pub mod kwin;
pub mod observed;
pub mod place;
pub mod portal;
pub mod session;
pub mod trigger;
pub mod wlr;
pub mod wlr_pixels;
pub mod x11;
pub mod x11_pixels;

use global_hotkey::hotkey::HotKey;
use crate::desktop::events::DesktopEvent;
use crate::runtime::RuntimeEvent;
use global_hotkey::{GlobalHotKeyEvent, GlobalHotKeyManager, HotKeyState};

use self::x11::{WorkArea, X11Desktop};
use crate::runtime::EventSink;

/// What a global hotkey does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HotkeyAction {
    QuickPrompt,
    TogglePause,
    /// Push-to-talk: both the press and the release matter.
    Voice,
}

impl HotkeyAction {
    fn event(self, pressed: bool) -> Option<DesktopEvent> {
        match (self, pressed) {
            (HotkeyAction::QuickPrompt, true) => Some(DesktopEvent::QuickPromptHotkey),
            (HotkeyAction::TogglePause, true) => Some(DesktopEvent::TogglePause),
            (HotkeyAction::Voice, pressed) => Some(DesktopEvent::VoiceHotkey { pressed }),
            (_, false) => None,
        }
    }
}

/// Keeps the global hotkeys registered while alive.
pub struct GlobalHotkeys {
    manager: GlobalHotKeyManager,
    registered: Vec<HotKey>,
}

impl GlobalHotkeys {
    /// Registers each `(spec, action)` (e.g. `ctrl+alt+Space`); presses arrive
    /// as the action's `AppEvent`. Returns the hotkeys that could not be
    /// registered, with why, next to the ones that were.
    pub fn register(bindings: &[(&str, HotkeyAction)], sink: EventSink<DesktopEvent>) -> anyhow::Result<(Self, Vec<String>)> {
        let manager = GlobalHotKeyManager::new().map_err(|err| anyhow::anyhow!("global hotkeys unavailable: {err}"))?;
        let mut registered = Vec::new();
        let mut actions = Vec::new();
        let mut errors = Vec::new();
        for (spec, action) in bindings {
            let hotkey: HotKey = match spec.parse() {
                Ok(hotkey) => hotkey,
                Err(err) => {
                    errors.push(format!("hotkey {spec:?} is not valid: {err}"));
                    continue;
                }
            };
            match manager.register(hotkey) {
                Ok(()) => {
                    registered.push(hotkey);
                    actions.push((hotkey.id(), *action));
                }
                Err(err) => errors.push(format!("cannot register {spec} (taken by another program?): {err}")),
            }
        }
        GlobalHotKeyEvent::set_event_handler(Some(move |event: GlobalHotKeyEvent| {
            let pressed = event.state() == HotKeyState::Pressed;
            if let Some((_, action)) = actions.iter().find(|(id, _)| *id == event.id())
                && let Some(event) = action.event(pressed)
            {
                sink.send(event);
            }
        }));
        Ok((Self { manager, registered }, errors))
    }
}

impl Drop for GlobalHotkeys {
    fn drop(&mut self) {
        for hotkey in &self.registered {
            let _ = self.manager.unregister(*hotkey);
        }
        GlobalHotKeyEvent::set_event_handler(None::<fn(GlobalHotKeyEvent)>);
    }
}

/// The system tray icon (StatusNotifierItem over D-Bus, via ksni): click shows
/// the sidebar, middle-click pauses or resumes capture, and the menu has
/// Pause, Show and Quit. While the agent waits for the user (an approval, a
/// question, a paused task) it asks for attention and says how many wait.
pub struct CoworkTray {
    paused: bool,
    waiting: usize,
    /// The microphone is open (push-to-talk or listen mode).
    microphone: bool,
    sink: EventSink<DesktopEvent>,
}

impl CoworkTray {
    fn waiting_text(&self) -> Option<String> {
        match self.waiting {
            0 => None,
            1 => Some("1 task waits for you".into()),
            n => Some(format!("{n} tasks wait for you")),
        }
    }
}

impl ksni::Tray for CoworkTray {
    fn id(&self) -> String {
        "cowork".into()
    }

    fn title(&self) -> String {
        let mic = if self.microphone { " · microphone on" } else { "" };
        match self.waiting {
            0 => format!("cowork{mic}"),
            n => format!("cowork ({n} waiting){mic}"),
        }
    }

    fn icon_name(&self) -> String {
        if self.microphone {
            "audio-input-microphone".into()
        } else if self.paused {
            "media-playback-pause".into()
        } else {
            "media-record".into()
        }
    }

    fn attention_icon_name(&self) -> String {
        "dialog-question".into()
    }

    fn status(&self) -> ksni::Status {
        if self.waiting > 0 {
            ksni::Status::NeedsAttention
        } else if self.paused {
            ksni::Status::Passive
        } else {
            ksni::Status::Active
        }
    }

    fn tool_tip(&self) -> ksni::ToolTip {
        let capture = match (self.microphone, self.paused) {
            (true, _) => "The microphone is on",
            (false, true) => "Capture is paused",
            (false, false) => "Recording your activity, privately",
        };
        let description = match self.waiting_text() {
            Some(waiting) => format!("{waiting}\n{capture}"),
            None => capture.to_owned(),
        };
        ksni::ToolTip { title: self.title(), description, ..Default::default() }
    }

    fn activate(&mut self, _x: i32, _y: i32) {
        let _ = self.sink.send(DesktopEvent::ShowSidebar);
    }

    fn secondary_activate(&mut self, _x: i32, _y: i32) {
        let _ = self.sink.send(DesktopEvent::TogglePause);
    }

    fn menu(&self) -> Vec<ksni::MenuItem<Self>> {
        use ksni::menu::{CheckmarkItem, StandardItem};
        vec![
            CheckmarkItem {
                label: "Pause capture".into(),
                checked: self.paused,
                activate: Box::new(|tray: &mut Self| {
                    tray.sink.send(DesktopEvent::TogglePause);
                }),
                ..Default::default()
            }
            .into(),
            StandardItem {
                label: match self.waiting_text() {
                    Some(waiting) => format!("Show sidebar ({waiting})"),
                    None => "Show sidebar".into(),
                },
                activate: Box::new(|tray: &mut Self| {
                    tray.sink.send(DesktopEvent::ShowSidebar);
                }),
                ..Default::default()
            }
            .into(),
            ksni::MenuItem::Separator,
            StandardItem {
                label: "Quit cowork".into(),
                activate: Box::new(|tray: &mut Self| {
                    tray.sink.runtime(RuntimeEvent::ShutdownRequested);
                }),
                ..Default::default()
            }
            .into(),
        ]
    }
}

/// Keeps the tray icon alive; tells it when capture is paused.
pub struct TrayIcon(ksni::blocking::Handle<CoworkTray>);

impl TrayIcon {
    /// Publishes the icon on the D-Bus session bus. It shows as soon as a tray
    /// host (a StatusNotifierWatcher) runs, now or later.
    pub fn spawn(paused: bool, sink: EventSink<DesktopEvent>) -> anyhow::Result<Self> {
        use ksni::blocking::TrayMethods;
        let handle = CoworkTray { paused, waiting: 0, microphone: false, sink }
            .assume_sni_available(true)
            .spawn()
            .map_err(|err| anyhow::anyhow!("no system tray (D-Bus session bus unavailable?): {err}"))?;
        Ok(Self(handle))
    }

    pub fn set_paused(&self, paused: bool) {
        self.0.update(|tray| tray.paused = paused);
    }

    /// Whether the microphone is open: the icon and title say so.
    pub fn set_microphone(&self, open: bool) {
        self.0.update(|tray| tray.microphone = open);
    }

    /// How many approvals, questions and paused tasks wait for the user (0: none).
    pub fn set_waiting(&self, waiting: usize) {
        self.0.update(|tray| tray.waiting = waiting);
    }
}

impl Drop for TrayIcon {
    fn drop(&mut self) {
        self.0.shutdown().wait();
    }
}

/// Default sidebar rectangle: docked right, full work-area height.
pub fn default_sidebar_rect(width: f32) -> Option<[f32; 4]> {
    let desktop = X11Desktop::connect(None).ok()?;
    let area = desktop.work_area().unwrap_or_else(|| {
        let (w, h) = desktop.screen_size();
        WorkArea { x: 0, y: 0, width: w, height: h }
    });
    Some(dock_right(area, width))
}

pub fn dock_right(area: WorkArea, width: f32) -> [f32; 4] {
    let width = width.min(area.width as f32);
    [area.x as f32 + area.width as f32 - width, area.y as f32, width, area.height as f32]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tray_asks_for_attention_while_agent_tasks_wait_and_says_how_many() {
        use ksni::Tray;
        let mut tray = CoworkTray { paused: true, waiting: 0, microphone: false, sink: EventSink::ignored() };
        assert!(matches!(tray.status(), ksni::Status::Passive));
        assert_eq!(tray.title(), "cowork");
        tray.waiting = 2;
        assert!(matches!(tray.status(), ksni::Status::NeedsAttention), "waiting beats paused");
        assert_eq!(tray.title(), "cowork (2 waiting)");
        let tip = tray.tool_tip();
        assert!(tip.description.starts_with("2 tasks wait for you") && tip.description.contains("Capture is paused"), "{}", tip.description);
        tray.waiting = 1;
        assert!(tray.tool_tip().description.starts_with("1 task waits for you"));
    }

    #[test]
    fn the_tray_shows_when_the_microphone_is_on() {
        use ksni::Tray;
        let (events, _rx) = crossbeam_channel::bounded(4);
        let mut tray = CoworkTray { paused: false, waiting: 0, microphone: false, sink: crate::runtime::EventSink::<crate::events::AppEvent>::new(events, || {}).narrow() };
        assert_eq!(tray.icon_name(), "media-record");
        tray.microphone = true;
        assert_eq!(tray.icon_name(), "audio-input-microphone");
        assert_eq!(tray.title(), "cowork · microphone on");
        assert!(tray.tool_tip().description.contains("microphone is on"));
    }

    #[test]
    fn docks_to_the_right_edge_of_the_work_area() {
        let area = WorkArea { x: 0, y: 30, width: 1920, height: 1050 };
        assert_eq!(dock_right(area, 380.0), [1540.0, 30.0, 380.0, 1050.0]);
        let narrow = WorkArea { x: 0, y: 0, width: 300, height: 600 };
        assert_eq!(dock_right(narrow, 380.0), [0.0, 0.0, 300.0, 600.0]);
    }
}
