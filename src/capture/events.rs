//! What capture tells the UI: the focused window, what capture does with it,
//! the health of each stream, and each finished session.

use crate::records::{ActiveWindow, ActivitySession};

#[derive(Clone, Debug)]
pub enum CaptureEvent {
    ActiveWindow(Option<ActiveWindow>),
    CaptureDecision(CaptureDecision),
    StreamHealth(StreamHealth),
    SessionFinished(ActivitySession),
    /// Today's finished sessions, read from the store.
    SessionsLoaded(Vec<ActivitySession>),
    /// The timeline's days, read from the store.
    DaysLoaded(Days),
    /// What was typed and copied during one session (Context panel, on click).
    SessionDetail { session_id: i64, typed: Vec<(i64, String)>, copied: Vec<(i64, String)>, seen: Vec<(i64, String)> },
    /// How the screen-text stream is doing (Settings, the Context panel).
    Screen(ScreenStatus),
}

/// What happened in some days, for the timeline.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Days {
    pub start_millis: i64,
    pub days: u32,
    pub sessions: Vec<ActivitySession>,
    /// Away spans (start, end).
    pub away: Vec<(i64, i64)>,
    /// When typing was recorded, and when listen mode heard someone.
    pub typed: Vec<i64>,
    pub heard: Vec<i64>,
    /// The recaps and meeting notes kept for these days (or their week).
    pub notes: Vec<KeptNote>,
    /// The calendars' events in these days, soonest first.
    pub events: Vec<crate::day::calendar::Event>,
}

/// A summary cowork wrote of a span: a day's or week's recap, a meeting's note.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeptNote {
    /// `recap_day`, `recap_week` or `meeting`.
    pub kind: String,
    pub start_millis: i64,
    pub end_millis: i64,
    pub text: String,
}

/// The screen-text stream's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScreenStatus {
    pub on: bool,
    /// Why the focused window is not read right now (a rule, a password field).
    pub held: Option<String>,
    /// Rows stored since cowork started.
    pub stored: u64,
    /// The last one: app — title (how read, size).
    pub last: Option<String>,
    /// What keeps part of the stream from working (no OCR engine).
    pub error: Option<String>,
}

/// What capture does with the focused window right now, for the Context panel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureDecision {
    /// The focused app (None: nothing focused, or cowork itself).
    pub app: Option<String>,
    /// The firewall rule that excludes it, if one does.
    pub excluded_by: Option<String>,
    /// Whether the window stream is switched on.
    pub recording: bool,
}

/// A capture stream's name as the user reads it ("typing" is "What you type").
pub fn stream_title(stream: &str) -> &str {
    match stream {
        "windows" => "Windows and apps",
        "typing" | "keys" => "What you type",
        "clipboard" => "What you copy",
        other => other,
    }
}

/// Health of one capture stream, for the Context panel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamHealth {
    pub stream: String,
    pub last_event_at_millis: Option<i64>,
    pub events_last_minute: u32,
    pub drops: u64,
    pub errors: u64,
    pub last_error: Option<String>,
}
