//! Integration with the desktop outside our window: the global quick-prompt
//! hotkey and the sidebar's default placement from the X11 work area.

use global_hotkey::hotkey::HotKey;
use global_hotkey::{GlobalHotKeyEvent, GlobalHotKeyManager, HotKeyState};

use crate::capture::x11::{WorkArea, X11Desktop};
use crate::events::AppEvent;
use crate::runtime::EventSink;

/// Keeps the global hotkey registered while alive.
pub struct QuickPromptHotkey {
    manager: GlobalHotKeyManager,
    hotkey: HotKey,
}

impl QuickPromptHotkey {
    /// Registers `spec` (e.g. `ctrl+alt+Space`); presses arrive as `AppEvent::QuickPromptHotkey`.
    pub fn register(spec: &str, sink: EventSink) -> anyhow::Result<Self> {
        let hotkey: HotKey = spec.parse().map_err(|err| anyhow::anyhow!("hotkey {spec:?} is not valid: {err}"))?;
        let manager = GlobalHotKeyManager::new().map_err(|err| anyhow::anyhow!("global hotkeys unavailable: {err}"))?;
        manager
            .register(hotkey)
            .map_err(|err| anyhow::anyhow!("cannot register {spec} (taken by another program?): {err}"))?;
        let id = hotkey.id();
        GlobalHotKeyEvent::set_event_handler(Some(move |event: GlobalHotKeyEvent| {
            if event.id() == id && event.state() == HotKeyState::Pressed {
                sink.send(AppEvent::QuickPromptHotkey);
            }
        }));
        Ok(Self { manager, hotkey })
    }
}

impl Drop for QuickPromptHotkey {
    fn drop(&mut self) {
        let _ = self.manager.unregister(self.hotkey);
        GlobalHotKeyEvent::set_event_handler(None::<fn(GlobalHotKeyEvent)>);
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
    fn docks_to_the_right_edge_of_the_work_area() {
        let area = WorkArea { x: 0, y: 30, width: 1920, height: 1050 };
        assert_eq!(dock_right(area, 380.0), [1540.0, 30.0, 380.0, 1050.0]);
        let narrow = WorkArea { x: 0, y: 0, width: 300, height: 600 };
        assert_eq!(dock_right(narrow, 380.0), [0.0, 0.0, 300.0, 600.0]);
    }
}
