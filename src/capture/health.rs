//! Per-stream health: when the stream last recorded something, how many events
//! it recorded in the last minute, and what it dropped or failed. Each stream
//! worker owns one `StreamStats` and reports snapshots to the UI, at most once
//! a second per stream.

use std::collections::VecDeque;

use crate::capture::events::StreamHealth;

const MINUTE_MILLIS: i64 = 60_000;
/// Snapshots go to the UI at most this often per stream.
const REPORT_EVERY_MILLIS: i64 = 1_000;

pub struct StreamStats {
    stream: &'static str,
    recent: VecDeque<i64>,
    last_event_at: Option<i64>,
    drops: u64,
    errors: u64,
    last_error: Option<String>,
    reported_at: Option<i64>,
}

impl StreamStats {
    pub fn new(stream: &'static str) -> Self {
        Self { stream, recent: VecDeque::new(), last_event_at: None, drops: 0, errors: 0, last_error: None, reported_at: None }
    }

    pub fn event(&mut self, now_millis: i64) {
        self.last_event_at = Some(now_millis);
        self.recent.push_back(now_millis);
        self.trim(now_millis);
    }

    pub fn drop_one(&mut self) {
        self.drops += 1;
    }

    pub fn error(&mut self, message: impl Into<String>) {
        self.errors += 1;
        self.last_error = Some(message.into());
    }

    fn trim(&mut self, now_millis: i64) {
        while self.recent.front().is_some_and(|&at| now_millis - at >= MINUTE_MILLIS) {
            self.recent.pop_front();
        }
    }

    pub fn snapshot(&mut self, now_millis: i64) -> StreamHealth {
        self.trim(now_millis);
        StreamHealth {
            stream: self.stream.to_owned(),
            last_event_at_millis: self.last_event_at,
            events_last_minute: self.recent.len() as u32,
            drops: self.drops,
            errors: self.errors,
            last_error: self.last_error.clone(),
        }
    }

    /// A snapshot when the last report is older than a second, else None.
    pub fn due(&mut self, now_millis: i64) -> Option<StreamHealth> {
        if self.reported_at.is_some_and(|at| now_millis - at < REPORT_EVERY_MILLIS) {
            return None;
        }
        self.reported_at = Some(now_millis);
        Some(self.snapshot(now_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_last_minute_and_keeps_drops_and_errors() {
        let mut stats = StreamStats::new("keys");
        for at in [0, 10_000, 50_000, 70_000] {
            stats.event(at);
        }
        stats.drop_one();
        stats.error("store queue full");
        let health = stats.snapshot(80_000);
        assert_eq!(health.events_last_minute, 2, "0 s and 10 s are more than a minute before 80 s");
        assert_eq!((health.last_event_at_millis, health.drops, health.errors), (Some(70_000), 1, 1));
        assert!(stats.due(80_000).is_some());
        assert!(stats.due(80_500).is_none(), "throttled to one report a second");
        assert!(stats.due(81_000).is_some());
    }
}
