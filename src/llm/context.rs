//! Layer-1 context: a compact description of what the user is doing, built
//! by direct SQL from recent capture and cut to a token budget.

use rusqlite::Connection;

use crate::events::ActivitySession;
use crate::ids::{format_clock, format_duration_millis};
use crate::store;

/// How many recent sessions are considered before the budget cuts them.
const RECENT_SESSIONS: usize = 40;

/// Rough token count (≈ 4 characters per token for English text); good
/// enough for a budget, and costs nothing on the hot path.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Builds the context text, newest first, within `budget_tokens`.
/// Returns `None` when nothing has been captured yet.
pub fn layer1_context(conn: &Connection, now_millis: i64, budget_tokens: usize) -> anyhow::Result<Option<String>> {
    let sessions = store::recent_sessions(conn, RECENT_SESSIONS)?;
    Ok(render(&sessions, now_millis, budget_tokens))
}

/// Pure rendering, newest session first, stopping before the budget is exceeded.
pub fn render(sessions_newest_first: &[ActivitySession], now_millis: i64, budget_tokens: usize) -> Option<String> {
    if sessions_newest_first.is_empty() {
        return None;
    }
    let mut text = format!("What the user is doing on this computer (local time {}):\n", format_clock(now_millis));
    let mut rest = sessions_newest_first;
    if let Some(current) = rest.first().filter(|s| s.ended_at_millis.is_none()) {
        text.push_str(&format!(
            "Current window: {} — \"{}\" (for {})\n",
            current.app,
            current.title,
            format_duration_millis(current.duration_millis(now_millis))
        ));
        rest = &rest[1..];
    } else {
        text.push_str("Current window: none focused now (away, or using cowork); the most recent is listed first\n");
    }
    if !rest.is_empty() {
        text.push_str("Earlier (newest first):\n");
    }
    let mut used = estimate_tokens(&text);
    for session in rest {
        let line = format!(
            "- {} {} — \"{}\" ({})\n",
            format_clock(session.started_at_millis),
            session.app,
            session.title,
            format_duration_millis(session.duration_millis(now_millis))
        );
        let cost = estimate_tokens(&line);
        if used + cost > budget_tokens {
            break;
        }
        used += cost;
        text.push_str(&line);
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::SessionEnd;

    fn session(id: i64, title: &str, start: i64, end: Option<i64>) -> ActivitySession {
        ActivitySession {
            session_id: id,
            app: "Firefox".into(),
            title: title.into(),
            pid: None,
            window_id: 1,
            started_at_millis: start,
            ended_at_millis: end,
            end_reason: end.map(|_| SessionEnd::Switch),
            ..Default::default()
        }
    }

    #[test]
    fn current_window_comes_first_then_history_within_budget() {
        let now = 10_000_000;
        let mut sessions = vec![session(100, "Invoice 2291 - Mail", now - 5_000, None)];
        for i in 0..30 {
            sessions.push(session(i, &format!("Old tab {i}"), now - 100_000 * (i + 1), Some(now - 100_000 * i - 50_000)));
        }
        let text = render(&sessions, now, 120).unwrap();
        assert!(text.contains("Current window: Firefox — \"Invoice 2291 - Mail\" (for 5s)"), "{text}");
        assert!(text.contains("Old tab 0"));
        assert!(!text.contains("Old tab 29"), "budget must cut old history");
        assert!(estimate_tokens(&text) <= 120);
    }

    #[test]
    fn nothing_captured_means_no_context() {
        assert_eq!(render(&[], 0, 100), None);
    }
}
