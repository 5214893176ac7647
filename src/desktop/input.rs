//! Where input state comes from, for away-from-keyboard detection:
//! device_query on X11, the compositor's idle notifications on Wayland
//! (`observed`), or a script in tests.

use device_query::{DeviceQuery, DeviceState};

/// One observation of the input devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputSnapshot {
    pub pointer: (i32, i32),
    pub buttons: Vec<bool>,
    pub keys: Vec<String>,
}

/// Where input state comes from: device_query on X11, the compositor's idle
/// notifications on Wayland, or a script in tests.
pub trait InputProbe {
    fn snapshot(&self) -> InputSnapshot;

    /// Input happened just now, whatever the snapshot says: a compositor that
    /// has not yet reported the user idle for its (short) timeout.
    fn active_now(&self) -> bool {
        false
    }
}

impl InputProbe for DeviceState {
    fn snapshot(&self) -> InputSnapshot {
        let mouse = self.get_mouse();
        let keys = self.get_keys().into_iter().map(|key| key.to_string()).collect();
        InputSnapshot { pointer: mouse.coords, buttons: mouse.button_pressed, keys }
    }
}
