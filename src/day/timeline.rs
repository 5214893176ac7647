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

/// The runs of `sessions` (oldest first or any order) over `[start, end)` in a bar `width` pixels wide.
pub fn runs(sessions: &[ActivitySession], start: i64, end: i64, now_millis: i64, width: f32) -> Vec<Run> {
    let columns = (width.max(1.0).ceil() as usize).min(MAX_COLUMNS);
    let span = (end - start).max(1) as f64;
    let column_millis = span / columns as f64;
    // Per column: the session with the most time in it, and that time.
    let mut best: Vec<Option<(usize, i64)>> = vec![None; columns];
    for (index, session) in sessions.iter().enumerate() {
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
    }
}
