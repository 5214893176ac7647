//! Layer-1 context: a compact description of what the user is doing, built
//! by direct SQL from recent capture and cut to a token budget.

use rusqlite::Connection;

use crate::ids::{format_clock, format_duration_millis, format_when};
use crate::records::ActivitySession;

/// How many recent sessions are considered before the budget cuts them.
const RECENT_SESSIONS: usize = 40;

use crate::memory::tokens::estimate_tokens;

/// Layer-1 context in two parts, so the engine's prefix cache can keep the first prefilled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer1 {
    /// Finished windows, oldest first: it only grows at its end as the user
    /// switches windows, and its start moves in half-hour steps when the budget
    /// cuts it, so it goes into the stable system prompt.
    pub log: Option<String>,
    /// The clock and the current window: different for every question.
    pub now: String,
}

/// Where a budget-cut log starts: on a half-hour boundary, so the start (and
/// with it every prompt token after it) stays put while the user works.
const LOG_START_STEP_MILLIS: i64 = 30 * 60_000;
/// Finer boundaries for a user who switches windows often: the coarsest of
/// these that keeps at least half of the lines that fit is the start (a
/// half-hour start would leave nothing once a half hour's windows outgrow the
/// budget).
const LOG_START_STEPS_MILLIS: [i64; 5] = [LOG_START_STEP_MILLIS, 10 * 60_000, 5 * 60_000, 2 * 60_000, 60_000];

/// Builds layer-1 context within `budget_tokens`; `None` when nothing has been captured yet.
pub fn layer1_context(conn: &Connection, now_millis: i64, budget_tokens: usize) -> anyhow::Result<Option<Layer1>> {
    let sessions = crate::capture::db::recent_sessions(conn, RECENT_SESSIONS)?;
    let layer = render(&sessions, now_millis, budget_tokens);
    // The calendars' next meeting, when one is on or comes within the horizon.
    let upcoming = crate::calendar::db::upcoming(conn, now_millis, NEXT_MEETING_HORIZON_MILLIS, 4);
    Ok(with_next_meeting(layer, crate::calendar::next_meeting_line(&upcoming, now_millis, NEXT_MEETING_HORIZON_MILLIS), now_millis))
}

/// How far ahead the prompt looks for the next meeting.
const NEXT_MEETING_HORIZON_MILLIS: i64 = 3 * 3_600_000;

/// The clock part with the next meeting's line after it (a calendar alone is context too).
fn with_next_meeting(layer: Option<Layer1>, meeting: Option<String>, now_millis: i64) -> Option<Layer1> {
    let Some(meeting) = meeting else { return layer };
    Some(match layer {
        Some(Layer1 { log, now }) => Layer1 { log, now: format!("{now} {meeting}") },
        None => Layer1 { log: None, now: format!("It is {} now. {meeting}", format_clock(now_millis)) },
    })
}

fn log_line(session: &ActivitySession, now_millis: i64) -> String {
    format!(
        "{} {}: {} ({})\n",
        format_when(session.started_at_millis, now_millis),
        session.app,
        session.title,
        format_duration_millis(session.duration_millis(now_millis))
    )
}

/// Pure rendering. The log keeps the newest finished windows that fit the
/// budget, from a half-hour boundary on, and lists them oldest first.
pub fn render(sessions_newest_first: &[ActivitySession], now_millis: i64, budget_tokens: usize) -> Option<Layer1> {
    let (current, finished) = match sessions_newest_first.split_first() {
        None => return None,
        Some((first, rest)) if first.ended_at_millis.is_none() => (Some(first), rest),
        Some(_) => (None, sessions_newest_first),
    };
    let now = match current {
        Some(current) => format!(
            "It is {} now. The user is in {}: {} (for {}).",
            format_clock(now_millis),
            current.app,
            current.title,
            format_duration_millis(current.duration_millis(now_millis))
        ),
        None => match finished.first() {
            Some(last) => format!(
                "It is {} now. No window is focused (the user is away or using cowork). The last window the user was in: {}: {} (until {}).",
                format_clock(now_millis),
                last.app,
                last.title,
                format_when(last.ended_at_millis.unwrap_or(now_millis), now_millis)
            ),
            None => format!("It is {} now.", format_clock(now_millis)),
        },
    };
    let header = "Activity log, oldest first (start, app: window title (time spent)):\n";
    // Newest first, each line rendered once, while the budget lasts.
    let mut used = estimate_tokens(header);
    let mut lines: Vec<String> = Vec::new();
    for session in finished {
        let line = log_line(session, now_millis);
        used += estimate_tokens(&line);
        if used > budget_tokens {
            break;
        }
        lines.push(line);
    }
    if lines.len() < finished.len()
        && let Some(oldest) = lines.len().checked_sub(1).map(|i| &finished[i])
    {
        let kept = |step: i64| {
            let start = -(-oldest.started_at_millis).div_euclid(step) * step;
            finished.iter().take(lines.len()).take_while(|s| s.started_at_millis >= start).count()
        };
        let keep = LOG_START_STEPS_MILLIS.iter().map(|&step| kept(step)).find(|&keep| 2 * keep >= lines.len()).unwrap_or(lines.len());
        lines.truncate(keep);
    }
    let log = (!lines.is_empty()).then(|| {
        let mut text = header.to_owned();
        for line in lines.iter().rev() {
            text.push_str(line);
        }
        text.truncate(text.trim_end().len());
        text
    });
    Some(Layer1 { log, now })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::SessionEnd;

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
    fn the_log_lists_finished_windows_oldest_first_and_the_current_one_apart() {
        let now = 10_000_000;
        let sessions = vec![
            session(3, "Invoice 2291 - Mail", now - 5_000, None),
            session(2, "Pull request #1193", now - 200_000, Some(now - 5_000)),
            session(1, "Flights to Lisbon", now - 400_000, Some(now - 200_000)),
        ];
        let layer = render(&sessions, now, 400).unwrap();
        assert!(layer.now.contains("Firefox: Invoice 2291 - Mail (for 5s)"), "{}", layer.now);
        let log = layer.log.unwrap();
        let (lisbon, pr) = (log.find("Flights to Lisbon").unwrap(), log.find("Pull request #1193").unwrap());
        assert!(lisbon < pr, "oldest first: {log}");
        assert!(!log.contains("Invoice 2291"), "the current window is not in the stable log");
    }

    #[test]
    fn a_cut_log_starts_on_a_half_hour_and_keeps_its_start_as_windows_are_added() {
        let minute = 60_000;
        // Eight in the morning local time, so the hour of new windows stays on one day in any time zone.
        let base = crate::ids::local_day_start_millis(1_000 * LOG_START_STEP_MILLIS) + 8 * 60 * minute;
        // One finished window every 5 minutes, newest first.
        let day = |count: i64| -> Vec<ActivitySession> {
            (0..count).rev().map(|i| session(i, &format!("Tab {i}"), base + i * 5 * minute, Some(base + (i + 1) * 5 * minute))).collect()
        };
        let now = |count: i64| base + count * 5 * minute;
        let logs: Vec<String> = (30..=42).map(|count| render(&day(count), now(count), 150).unwrap().log.unwrap()).collect();
        let starts: Vec<&str> = logs.iter().map(|log| log.lines().nth(1).unwrap()).collect();
        for (log, start) in logs.iter().zip(&starts) {
            assert!(estimate_tokens(log) <= 150);
            let minute_of_hour: i64 = start[3..5].parse().unwrap();
            assert!(minute_of_hour % 30 == 0, "starts on a half hour: {start}");
        }
        // An hour of new windows (12) moves the start at most twice; otherwise a new window only appends.
        let moves = starts.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(moves <= 2, "{starts:?}");
        for pair in logs.windows(2).filter(|w| w[0].lines().nth(1) == w[1].lines().nth(1)) {
            assert!(pair[1].starts_with(&pair[0]), "{}\n---\n{}", pair[0], pair[1]);
        }
    }

    #[test]
    fn a_user_who_switches_every_20_seconds_keeps_half_a_log_or_more_whose_start_moves_seldom() {
        let (minute, second) = (60_000, 1_000);
        let base = crate::ids::local_day_start_millis(1_000 * LOG_START_STEP_MILLIS) + 8 * 60 * minute;
        // A new window every 20 s for half an hour, newest first (the 40 newest, as `recent_sessions` gives).
        let day = |count: i64| -> Vec<ActivitySession> {
            (0..count).rev().take(40).map(|i| session(i, &format!("Ticket {i} - Jira"), base + i * 20 * second, Some(base + (i + 1) * 20 * second))).collect()
        };
        let now = |count: i64| base + count * 20 * second;
        let logs: Vec<String> = (45..=90).map(|count| render(&day(count), now(count), 150).unwrap().log.expect("never an empty log")).collect();
        let fits = |log: &str| log.lines().count() - 1;
        let most = logs.iter().map(|log| fits(log)).max().unwrap();
        for log in &logs {
            assert!(estimate_tokens(log) <= 150);
            assert!(2 * fits(log) >= most - 1, "at least half of what fits: {log}");
        }
        // 45 new windows in 15 minutes: the start moves far less often than a window is added.
        let moves = logs.windows(2).filter(|w| w[0].lines().nth(1) != w[1].lines().nth(1)).count();
        assert!(moves <= 15, "{moves} moves");
        for pair in logs.windows(2).filter(|w| w[0].lines().nth(1) == w[1].lines().nth(1)) {
            assert!(pair[1].starts_with(&pair[0]), "an unmoved start only appends");
        }
    }

    #[test]
    fn nothing_captured_means_no_context() {
        assert_eq!(render(&[], 0, 100), None);
    }

    #[test]
    fn the_calendars_next_meeting_follows_the_clock_and_a_calendar_alone_is_context() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = crate::store::open_writer(&dir.path().join("cowork.db")).unwrap();
        let now = 1_800_000_000_000;
        let review = crate::day::calendar::Event { uid: "r".into(), title: "Q3 review".into(), start_millis: now + 12 * 60_000, end_millis: now + 42 * 60_000, attendees: vec!["Sam".into()], ..Default::default() };
        let later = crate::day::calendar::Event { uid: "l".into(), title: "Offsite".into(), start_millis: now + 5 * 3_600_000, end_millis: now + 6 * 3_600_000, ..Default::default() };
        assert_eq!(layer1_context(&conn, now, 500).unwrap(), None, "nothing captured, no calendar");
        let tx = conn.transaction().unwrap();
        crate::calendar::db::replace(&tx, "s", (now - 86_400_000, now + 86_400_000), &[review, later]).unwrap();
        tx.commit().unwrap();
        let layer = layer1_context(&conn, now, 500).unwrap().unwrap();
        assert_eq!(layer.now, format!("It is {} now. Your next meeting is in 12 min ({}): \"Q3 review\" with Sam.", format_clock(now), format_clock(now + 12 * 60_000)));
        // Beyond the horizon it says nothing.
        assert_eq!(layer1_context(&conn, now + 45 * 60_000, 500).unwrap(), None);
        let session = session(1, "ledger-svc", now - 600_000, None);
        let with = with_next_meeting(render(&[session], now, 500), Some("Your next meeting is in 12 min: X.".into()), now).unwrap();
        assert!(with.now.starts_with("It is ") && with.now.ends_with(" Your next meeting is in 12 min: X."), "{}", with.now);
    }
}
