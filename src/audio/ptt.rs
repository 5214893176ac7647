//! Push-to-talk as a pure state machine: presses and releases of the voice
//! hotkey (or clicks on a microphone button) in, start/stop out. In `Auto`,
//! holding the key talks until release and a tap (shorter than
//! `TAP_MILLIS`) toggles: recording goes on until the next press.

use std::time::{Duration, Instant};

/// A press shorter than this is a tap.
pub const TAP_MILLIS: u64 = 300;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PttMode {
    /// Hold to talk, tap to toggle.
    #[default]
    Auto,
    Hold,
    Toggle,
}

impl PttMode {
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "auto" => Some(PttMode::Auto),
            "hold" => Some(PttMode::Hold),
            "toggle" => Some(PttMode::Toggle),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PttMode::Auto => "auto",
            PttMode::Hold => "hold",
            PttMode::Toggle => "toggle",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PttAction {
    Start,
    Stop,
}

#[derive(Debug, Default)]
pub struct PushToTalk {
    pub mode: PttMode,
    recording: bool,
    pressed_at: Option<Instant>,
    /// The press that started this recording (its release may stop it).
    started_by_this_press: bool,
}

impl PushToTalk {
    pub fn new(mode: PttMode) -> Self {
        Self { mode, ..Self::default() }
    }

    pub fn is_recording(&self) -> bool {
        self.recording
    }

    pub fn press(&mut self, now: Instant) -> Option<PttAction> {
        if self.pressed_at.is_some() {
            return None;
        }
        self.pressed_at = Some(now);
        if self.recording {
            // A press while recording (toggled on) stops it; its release does nothing.
            self.recording = false;
            self.started_by_this_press = false;
            return Some(PttAction::Stop);
        }
        self.recording = true;
        self.started_by_this_press = true;
        Some(PttAction::Start)
    }

    pub fn release(&mut self, now: Instant) -> Option<PttAction> {
        let pressed_at = self.pressed_at.take()?;
        if !self.recording || !self.started_by_this_press {
            return None;
        }
        let tap = now.saturating_duration_since(pressed_at) < Duration::from_millis(TAP_MILLIS);
        let stop = match self.mode {
            PttMode::Hold => true,
            PttMode::Toggle => false,
            PttMode::Auto => !tap,
        };
        self.started_by_this_press = false;
        if stop {
            self.recording = false;
            Some(PttAction::Stop)
        } else {
            None
        }
    }

    /// The recording ended elsewhere (Esc, a button, an error): start afresh.
    pub fn reset(&mut self) {
        self.recording = false;
        self.started_by_this_press = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(millis: u64, base: Instant) -> Instant {
        base + Duration::from_millis(millis)
    }

    #[test]
    fn auto_holds_to_talk_and_a_tap_toggles() {
        let t = Instant::now();
        let mut ptt = PushToTalk::new(PttMode::Auto);
        assert_eq!(ptt.press(at(0, t)), Some(PttAction::Start));
        assert_eq!(ptt.release(at(1_500, t)), Some(PttAction::Stop));
        // A tap starts and leaves the microphone on …
        assert_eq!(ptt.press(at(2_000, t)), Some(PttAction::Start));
        assert_eq!(ptt.release(at(2_100, t)), None);
        assert!(ptt.is_recording());
        // … until the next press, whose release does nothing.
        assert_eq!(ptt.press(at(5_000, t)), Some(PttAction::Stop));
        assert_eq!(ptt.release(at(5_050, t)), None);
        assert!(!ptt.is_recording());
    }

    #[test]
    fn hold_and_toggle_modes() {
        let t = Instant::now();
        let mut hold = PushToTalk::new(PttMode::Hold);
        assert_eq!(hold.press(at(0, t)), Some(PttAction::Start));
        assert_eq!(hold.release(at(50, t)), Some(PttAction::Stop));
        let mut toggle = PushToTalk::new(PttMode::Toggle);
        assert_eq!(toggle.press(at(0, t)), Some(PttAction::Start));
        assert_eq!(toggle.release(at(2_000, t)), None);
        assert_eq!(toggle.press(at(3_000, t)), Some(PttAction::Stop));
    }

    #[test]
    fn a_repeated_press_without_release_is_ignored_and_reset_starts_afresh() {
        let t = Instant::now();
        let mut ptt = PushToTalk::new(PttMode::Auto);
        assert_eq!(ptt.press(at(0, t)), Some(PttAction::Start));
        assert_eq!(ptt.press(at(30, t)), None);
        ptt.reset();
        assert_eq!(ptt.release(at(1_000, t)), None);
        assert_eq!(ptt.press(at(2_000, t)), Some(PttAction::Start));
    }
}
