//! Turns observations of the active window and of AFK into activity sessions.
//! Pure logic: no X, no threads, no clock of its own. An identical observation
//! within the 10 s pulse (`PULSE_MILLIS`) extends the open session, as a
//! heartbeat; after a longer gap (a suspend, a stalled capture) the session
//! ends where the window was last seen and a new one opens.

use crate::ids::next_id;
use crate::records::{ActiveWindow, ActivitySession, SessionEnd};

/// What the tracker wants recorded or shown.
#[derive(Clone, Debug, PartialEq)]
pub enum TrackerOutput {
    /// A session opened (ended_at is None) or closed.
    Session(ActivitySession),
    /// The window the UI should show as current (None while away or unfocused).
    Active(Option<ActiveWindow>),
}

/// Observations arrive at least once a second; identical ones further apart
/// than this (suspend, a stalled capture) do not extend the open session.
pub const PULSE_MILLIS: i64 = 10_000;

#[derive(Default)]
pub struct SessionTracker {
    open: Option<ActivitySession>,
    /// When the window was last observed (the heartbeat the pulse is measured from).
    last_observed: Option<i64>,
    /// The last window seen, kept while away so input can resume a session in it.
    window: Option<ActiveWindow>,
    away: bool,
}

impl SessionTracker {
    pub fn open_session(&self) -> Option<&ActivitySession> {
        self.open.as_ref()
    }

    pub fn is_away(&self) -> bool {
        self.away
    }

    /// A fresh reading of the active window.
    pub fn observe(&mut self, window: Option<ActiveWindow>, now_millis: i64) -> Vec<TrackerOutput> {
        let same = match (&self.window, &window) {
            (Some(a), Some(b)) => a.window_id == b.window_id && a.title == b.title && a.app == b.app && a.url == b.url,
            (None, None) => true,
            _ => false,
        };
        let last_observed = self.last_observed.replace(now_millis);
        let mut out = Vec::new();
        if same {
            // Heartbeat model: an identical observation within the pulse extends the session.
            let Some(seen) = last_observed.filter(|seen| now_millis - seen > PULSE_MILLIS) else { return out };
            if self.open.is_some() && !self.away {
                self.close(seen, SessionEnd::Afk, &mut out);
                self.open_for_current(now_millis, &mut out);
            }
            return out;
        }
        self.close(now_millis, SessionEnd::Switch, &mut out);
        self.window = window.clone();
        if !self.away {
            self.open_for_current(now_millis, &mut out);
        }
        out.push(TrackerOutput::Active(window));
        out
    }

    /// No input since `last_input_millis`: end the open session back then.
    pub fn went_away(&mut self, last_input_millis: i64) -> Vec<TrackerOutput> {
        if self.away {
            return Vec::new();
        }
        self.away = true;
        let mut out = Vec::new();
        self.close(last_input_millis, SessionEnd::Afk, &mut out);
        out.push(TrackerOutput::Active(None));
        out
    }

    /// Input again after being away: a new session starts in the current window.
    pub fn came_back(&mut self, now_millis: i64) -> Vec<TrackerOutput> {
        if !self.away {
            return Vec::new();
        }
        self.away = false;
        let mut out = Vec::new();
        self.open_for_current(now_millis, &mut out);
        out.push(TrackerOutput::Active(self.window.clone()));
        out
    }

    /// cowork is stopping: end the open session now.
    pub fn shutdown(&mut self, now_millis: i64) -> Vec<TrackerOutput> {
        let mut out = Vec::new();
        self.close(now_millis, SessionEnd::Shutdown, &mut out);
        out
    }

    fn open_for_current(&mut self, now_millis: i64, out: &mut Vec<TrackerOutput>) {
        if let Some(window) = &self.window {
            let session = ActivitySession {
                session_id: next_id(),
                app: window.app.clone(),
                title: window.title.clone(),
                pid: window.pid,
                window_id: window.window_id,
                started_at_millis: now_millis,
                ended_at_millis: None,
                end_reason: None,
                url: window.url.clone(),
                url_source: window.url_source,
            };
            out.push(TrackerOutput::Session(session.clone()));
            self.open = Some(session);
        }
    }

    fn close(&mut self, at_millis: i64, reason: SessionEnd, out: &mut Vec<TrackerOutput>) {
        if let Some(mut session) = self.open.take() {
            session.ended_at_millis = Some(at_millis.max(session.started_at_millis));
            session.end_reason = Some(reason);
            out.push(TrackerOutput::Session(session));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win(window_id: u32, title: &str) -> Option<ActiveWindow> {
        Some(ActiveWindow { window_id, app: "XTerm".into(), title: title.into(), pid: Some(1), ..Default::default() })
    }

    fn sessions(out: &[TrackerOutput]) -> Vec<&ActivitySession> {
        out.iter()
            .filter_map(|o| match o {
                TrackerOutput::Session(s) => Some(s),
                TrackerOutput::Active(_) => None,
            })
            .collect()
    }

    #[test]
    fn focus_and_title_changes_split_sessions() {
        let mut t = SessionTracker::default();
        let out = t.observe(win(1, "a"), 1_000);
        assert_eq!(sessions(&out).len(), 1);
        assert!(t.observe(win(1, "a"), 1_500).is_empty(), "no change, no output");
        let out = t.observe(win(1, "b"), 2_000);
        let s = sessions(&out);
        assert_eq!((s[0].title.as_str(), s[0].ended_at_millis), ("a", Some(2_000)));
        assert_eq!((s[1].title.as_str(), s[1].ended_at_millis), ("b", None));
        let out = t.observe(win(2, "b"), 3_000);
        assert_eq!(sessions(&out)[0].end_reason, Some(SessionEnd::Switch));
    }

    #[test]
    fn afk_back_dates_the_end_and_return_opens_a_new_session() {
        let mut t = SessionTracker::default();
        t.observe(win(1, "doc"), 0);
        let out = t.went_away(60_000);
        let closed = sessions(&out)[0];
        assert_eq!((closed.ended_at_millis, closed.end_reason), (Some(60_000), Some(SessionEnd::Afk)));
        // Focus changes while away are remembered but open nothing.
        assert!(sessions(&t.observe(win(2, "mail"), 300_000)).is_empty());
        let out = t.came_back(400_000);
        let reopened = sessions(&out)[0];
        assert_eq!((reopened.title.as_str(), reopened.started_at_millis), ("mail", 400_000));
    }

    #[test]
    fn identical_observations_past_the_pulse_split_the_session_at_the_gap() {
        let mut t = SessionTracker::default();
        t.observe(win(1, "doc"), 0);
        assert!(t.observe(win(1, "doc"), 1_000).is_empty());
        // The machine slept for a minute: the session ends where it was last seen.
        let out = t.observe(win(1, "doc"), 61_000);
        let s = sessions(&out);
        assert_eq!((s[0].ended_at_millis, s[0].end_reason), (Some(1_000), Some(SessionEnd::Afk)));
        assert_eq!((s[1].started_at_millis, s[1].ended_at_millis), (61_000, None));
    }

    #[test]
    fn a_new_url_in_the_same_window_is_a_new_session() {
        let mut t = SessionTracker::default();
        let mut page = win(1, "Docs - Chromium");
        page.as_mut().unwrap().url = Some("docs.example/a".into());
        t.observe(page.clone(), 0);
        page.as_mut().unwrap().url = Some("docs.example/b".into());
        let out = t.observe(page, 500);
        let s = sessions(&out);
        assert_eq!(s[1].url.as_deref(), Some("docs.example/b"));
    }

    #[test]
    fn shutdown_flushes_the_open_session() {
        let mut t = SessionTracker::default();
        t.observe(win(1, "doc"), 10);
        let out = t.shutdown(20);
        assert_eq!(sessions(&out)[0].end_reason, Some(SessionEnd::Shutdown));
        assert!(t.shutdown(30).is_empty());
    }
}
