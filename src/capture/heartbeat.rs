//! Heartbeats (ActivityWatch's model): each observation says "this data held
//! from `start` to `end`"; one identical to the last event and within the pulse
//! time of its end extends it, anything else starts a new event. Merging
//! happens in memory; capture writes an event when it starts, every 30 s while
//! it grows, and when it ends. Capture uses it for the AFK stream
//! (`afk_events`). Pure: no I/O, no clock.

use crate::ids::next_id;

/// One event of a heartbeat stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Beat<D> {
    pub id: i64,
    pub data: D,
    pub start_millis: i64,
    pub end_millis: i64,
}

pub struct Heartbeats<D> {
    pulse_millis: i64,
    last: Option<Beat<D>>,
}

impl<D: Clone + PartialEq> Heartbeats<D> {
    pub fn new(pulse_millis: i64) -> Self {
        Self { pulse_millis, last: None }
    }

    /// Records that `data` held over `[start, end]`. Returns the event it
    /// extended or started, and whether it is new.
    pub fn beat(&mut self, data: D, start_millis: i64, end_millis: i64) -> (&Beat<D>, bool) {
        let extends = self
            .last
            .as_ref()
            .is_some_and(|last| last.data == data && start_millis <= last.end_millis + self.pulse_millis);
        if extends {
            let last = self.last.as_mut().expect("checked above");
            last.end_millis = last.end_millis.max(end_millis);
        } else {
            self.last = Some(Beat { id: next_id(), data, start_millis, end_millis: end_millis.max(start_millis) });
        }
        (self.last.as_ref().expect("set above"), !extends)
    }

    pub fn set_pulse_millis(&mut self, pulse_millis: i64) {
        self.pulse_millis = pulse_millis;
    }

    pub fn last(&self) -> Option<&Beat<D>> {
        self.last.as_ref()
    }
}

/// The AFK stream's data: away, or present (and what kept a quiet user present).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfkStatus {
    Afk,
    NotAfk { held_by: Option<HeldBy> },
}

/// Why a user without input still counts as present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeldBy {
    Media,
    Fullscreen,
}

impl HeldBy {
    pub fn as_str(self) -> &'static str {
        match self {
            HeldBy::Media => "media",
            HeldBy::Fullscreen => "fullscreen",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "media" => Some(HeldBy::Media),
            "fullscreen" => Some(HeldBy::Fullscreen),
            _ => None,
        }
    }
}

impl AfkStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AfkStatus::Afk => "afk",
            AfkStatus::NotAfk { .. } => "not-afk",
        }
    }

    pub fn held_by(self) -> Option<HeldBy> {
        match self {
            AfkStatus::Afk => None,
            AfkStatus::NotAfk { held_by } => held_by,
        }
    }
}

/// One row of `afk_events`.
pub type AfkEvent = Beat<AfkStatus>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_data_within_the_pulse_extends_and_anything_else_starts_anew() {
        let mut beats = Heartbeats::new(2_000);
        let (first, new) = beats.beat("a", 0, 0);
        let id = first.id;
        assert!(new);
        let (extended, new) = beats.beat("a", 1_000, 1_000);
        assert!(!new);
        assert_eq!((extended.id, extended.start_millis, extended.end_millis), (id, 0, 1_000));
        // Within the pulse of the end (1 000 + 2 000): still the same event.
        assert!(!beats.beat("a", 3_000, 3_000).1);
        // A gap longer than the pulse (suspend, capture stopped): a new event.
        let (gap, new) = beats.beat("a", 5_001, 5_001);
        assert!(new && gap.id != id);
        // Different data: a new event, even without a gap.
        assert!(beats.beat("b", 5_500, 5_500).1);
        assert_eq!(beats.last().unwrap().data, "b");
    }
}
