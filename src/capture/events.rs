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
    /// What was typed and copied during one session (Context panel, on click).
    SessionDetail { session_id: i64, typed: Vec<(i64, String)>, copied: Vec<(i64, String)> },
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
