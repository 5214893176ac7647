//! Away-from-keyboard detection from input state, read once a second through an
//! `InputProbe` (`desktop::input`): device_query on X11, where any change of
//! pointer position, buttons or held keys between two polls counts as input;
//! the compositor's idle notification on Wayland (`active_now` until it says
//! idle). Playing media or a fullscreen window also keeps a quiet user present
//! (`hold`).

use crate::desktop::input::{InputProbe, InputSnapshot};

pub struct AfkDetector {
    probe: Option<Box<dyn InputProbe>>,
    last_snapshot: Option<InputSnapshot>,
    last_input_millis: i64,
    threshold_millis: i64,
}

impl AfkDetector {
    /// `probe` is `None` when input state cannot be read; the user then never counts as away.
    pub fn new(probe: Option<Box<dyn InputProbe>>, threshold_secs: u64, now_millis: i64) -> Self {
        Self { probe, last_snapshot: None, last_input_millis: now_millis, threshold_millis: threshold_secs as i64 * 1000 }
    }

    pub fn set_threshold_secs(&mut self, threshold_secs: u64) {
        self.threshold_millis = threshold_secs as i64 * 1000;
    }

    pub fn is_available(&self) -> bool {
        self.probe.is_some()
    }

    /// Reads input state; returns true when it changed since the last poll.
    pub fn poll(&mut self, now_millis: i64) -> bool {
        let Some(probe) = &self.probe else { return false };
        let snapshot = probe.snapshot();
        let changed = self.last_snapshot.as_ref().is_some_and(|last| *last != snapshot) || probe.active_now();
        if changed {
            self.last_input_millis = now_millis;
        }
        self.last_snapshot = Some(snapshot);
        changed
    }

    /// Something other than input (media, a fullscreen window) shows the user
    /// is present now: the AFK clock restarts, and a later AFK is back-dated here.
    pub fn hold(&mut self, now_millis: i64) {
        self.last_input_millis = self.last_input_millis.max(now_millis);
    }

    pub fn is_afk(&self, now_millis: i64) -> bool {
        self.probe.is_some() && now_millis - self.last_input_millis >= self.threshold_millis
    }

    pub fn last_input_millis(&self) -> i64 {
        self.last_input_millis
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    struct Scripted(Rc<RefCell<(i32, i32)>>);

    impl InputProbe for Scripted {
        fn snapshot(&self) -> InputSnapshot {
            InputSnapshot { pointer: *self.0.borrow(), buttons: vec![], keys: vec![] }
        }
    }

    #[test]
    fn afk_after_threshold_without_input_and_back_on_movement() {
        let pointer = Rc::new(RefCell::new((0, 0)));
        let mut afk = AfkDetector::new(Some(Box::new(Scripted(pointer.clone()))), 180, 0);
        assert!(!afk.poll(1_000));
        assert!(!afk.is_afk(179_999));
        assert!(afk.is_afk(180_000));
        *pointer.borrow_mut() = (5, 5);
        assert!(afk.poll(200_000));
        assert_eq!(afk.last_input_millis(), 200_000);
        assert!(!afk.is_afk(200_500));
    }

    /// A compositor's idle notification: active until it says idle.
    struct Idle(Rc<RefCell<bool>>);

    impl InputProbe for Idle {
        fn snapshot(&self) -> InputSnapshot {
            InputSnapshot { pointer: (0, 0), buttons: vec![], keys: vec![] }
        }

        fn active_now(&self) -> bool {
            !*self.0.borrow()
        }
    }

    #[test]
    fn a_compositor_that_has_not_said_idle_keeps_the_user_present_without_any_snapshot_change() {
        let idle = Rc::new(RefCell::new(false));
        let mut afk = AfkDetector::new(Some(Box::new(Idle(idle.clone()))), 3, 0);
        for second in 1..10 {
            assert!(afk.poll(second * 1_000), "typing without a pause counts as input every poll");
        }
        assert!(!afk.is_afk(9_500));
        *idle.borrow_mut() = true;
        assert!(!afk.poll(10_000));
        assert!(afk.is_afk(12_000), "away three seconds after the last active poll");
        assert_eq!(afk.last_input_millis(), 9_000);
    }

    #[test]
    fn without_a_probe_nobody_is_ever_away() {
        let afk = AfkDetector::new(None, 1, 0);
        assert!(!afk.is_afk(10_000_000));
    }
}
