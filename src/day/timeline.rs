//! The timeline's layout (issue 58), pure: a span of time drawn `width`
//! pixels wide holds at most one run of colour per pixel column, whatever the
//! number of sessions — each column shows the session that filled most of it,
//! and neighbouring columns of one session are one run — so a day of 2,000
//! sessions costs the frame a few hundred rectangles, not 2,000.

use crate::records::ActivitySession;

/// One stretch of the bar: pixels `x0..x1` from its left, showing `session` (an index).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Run {
    pub x0: f32,
    pub x1: f32,
    pub session: usize,
}

/// Most columns a bar is laid out in (a wider bar is drawn at this resolution).
const MAX_COLUMNS: usize = 4_096;

/// The sessions (oldest first) that may lie in `[start, end)`: those that
/// start before `end`, from the last one starting at or before `start` (a
/// week's bar reads its day's sessions, not the week's).
pub fn within(sessions: &[ActivitySession], start: i64, end: i64) -> std::ops::Range<usize> {
    let last = sessions.partition_point(|s| s.started_at_millis < end);
    let mut first = sessions[..last].partition_point(|s| s.started_at_millis <= start).saturating_sub(1);
    // (That one, unless it ended before `start`.)
    if first < last && sessions[first].started_at_millis <= start && sessions[first].ended_at_millis.is_some_and(|end| end <= start) {
        first += 1;
    }
    first.min(last)..last
}

/// The runs of `sessions` (oldest first) over `[start, end)` in a bar `width` pixels wide.
pub fn runs(sessions: &[ActivitySession], start: i64, end: i64, now_millis: i64, width: f32) -> Vec<Run> {
    let columns = (width.max(1.0).ceil() as usize).min(MAX_COLUMNS);
    let span = (end - start).max(1) as f64;
    let column_millis = span / columns as f64;
    // Per column: the session with the most time in it, and that time.
    let mut best: Vec<Option<(usize, i64)>> = vec![None; columns];
    let range = within(sessions, start, end);
    for (index, session) in sessions.iter().enumerate().take(range.end).skip(range.start) {
        let (a, b) = (session.started_at_millis.max(start), session.ended_at_millis.unwrap_or(now_millis).min(end));
        if b <= a {
            continue;
        }
        let first = (((a - start) as f64 / column_millis) as usize).min(columns - 1);
        let last = ((((b - start) as f64 / column_millis).ceil() as usize).max(first + 1)).min(columns);
        for (column, slot) in best.iter_mut().enumerate().take(last).skip(first) {
            let column_start = start + (column as f64 * column_millis) as i64;
            let column_end = start + ((column + 1) as f64 * column_millis) as i64;
            let overlap = b.min(column_end) - a.max(column_start);
            if overlap > 0 && slot.is_none_or(|(_, most)| overlap > most) {
                *slot = Some((index, overlap));
            }
        }
    }
    let scale = width / columns as f32;
    let mut runs: Vec<Run> = Vec::new();
    for (column, slot) in best.iter().enumerate() {
        let Some((session, _)) = *slot else { continue };
        let (x0, x1) = (column as f32 * scale, (column + 1) as f32 * scale);
        match runs.last_mut() {
            Some(run) if run.session == session && (run.x1 - x0).abs() < 0.01 => run.x1 = x1,
            _ => runs.push(Run { x0, x1, session }),
        }
    }
    runs
}

/// Pixel columns of the `times` (oldest first) within `[start, end)`, each once.
pub fn marks(times: &[i64], start: i64, end: i64, width: f32) -> Vec<f32> {
    let (first, last) = (times.partition_point(|t| *t < start), times.partition_point(|t| *t < end));
    let mut columns: Vec<f32> = times[first..last.max(first)].iter().map(|t| ((*t - start) as f32 / (end - start).max(1) as f32 * width).floor()).collect();
    columns.dedup();
    columns
}

/// Pixel spans (`x0..x1`) of `spans` (start, end) over `[start, end)` in a bar `width` wide.
pub fn spans(spans: &[(i64, i64)], start: i64, end: i64, width: f32) -> Vec<(f32, f32)> {
    let span = (end - start).max(1) as f32;
    spans
        .iter()
        .filter(|(a, b)| *b > start && *a < end)
        .map(|(a, b)| (((*a).max(start) - start) as f32 / span * width, ((*b).min(end) - start) as f32 / span * width))
        .collect()
}

/// The session shown at pixel `x` of a bar, if any.
pub fn at(runs: &[Run], x: f32) -> Option<usize> {
    let i = runs.partition_point(|r| r.x1 <= x);
    runs.get(i).filter(|r| r.x0 <= x).map(|r| r.session)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: i64, start: i64, end: i64) -> ActivitySession {
        ActivitySession { session_id: id, app: "code".into(), title: format!("{id}"), started_at_millis: start, ended_at_millis: Some(end), ..ActivitySession::default() }
    }

    #[test]
    fn a_day_of_two_thousand_sessions_is_at_most_one_run_a_column() {
        let day = 86_400_000;
        let sessions: Vec<_> = (0..2_000).map(|i| session(i, i * 40_000, i * 40_000 + 30_000)).collect();
        for width in [320.0, 600.0] {
            let runs = runs(&sessions, 0, day, day, width);
            assert!(runs.len() <= width as usize && runs.len() > 100, "{} runs", runs.len());
            assert!(runs.windows(2).all(|w| w[0].x1 <= w[1].x0 + 0.01));
        }
        // A long session is one run; a short one still shows where it fills most of a column.
        let sessions = [session(1, 0, day / 2), session(2, day / 2, day / 2 + 1_000), session(3, day / 2 + 1_000, day)];
        let runs = runs(&sessions, 0, day, day, 100.0);
        assert_eq!(runs[0], Run { x0: 0.0, x1: 50.0, session: 0 });
        assert_eq!(at(&runs, 10.0), Some(0));
        assert_eq!(at(&runs, 75.0), Some(2));
        assert_eq!(spans(&[(day / 4, day / 2)], 0, day, 100.0), [(25.0, 50.0)]);
        // A week's second day reads its own sessions (and those running over its midnights).
        let week: Vec<_> = (0..7 * 24).map(|h| session(h, h * 3_600_000 - 1_800_000, h * 3_600_000 + 1_800_000)).collect();
        let second = within(&week, day, 2 * day);
        assert_eq!((second.start, second.end), (24, 49));
        assert_eq!(super::runs(&week, day, 2 * day, 8 * day, 24.0).iter().map(|r| r.session).collect::<Vec<_>>(), (24..48).collect::<Vec<_>>());
        assert_eq!(within(&week, 100 * day, 101 * day), 168..168);
        assert_eq!(marks(&[0, 1, day / 2, day / 2 + 1, day, 2 * day], 0, day, 100.0), [0.0, 50.0]);
    }
}
