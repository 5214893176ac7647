//! Time per project per day (issue 58), pure: sessions cut at local
//! midnight and at the ledger's bounds, each counted in whole seconds as
//! `end / 1000 − start / 1000` (so adjacent stretches add up to the clock's
//! span, and a day's total is its entries' sum to the second), with its
//! project and why. `cowork report` prints it; the timeline draws it.

use std::collections::BTreeMap;

use crate::day::projects::{Attribution, ProjectRules, attribute};
use crate::records::ActivitySession;

/// What counts when no project does.
pub const UNATTRIBUTED: &str = "(no project)";

/// One stretch of one session within one day.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub session_id: i64,
    pub start_millis: i64,
    pub end_millis: i64,
    pub seconds: i64,
    pub app: String,
    pub title: String,
    pub url: Option<String>,
    pub attribution: Attribution,
}

impl Entry {
    pub fn project(&self) -> &str {
        self.attribution.project.as_deref().unwrap_or(UNATTRIBUTED)
    }
}

/// One local day's entries, and seconds per project.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Day {
    /// Local midnight.
    pub start_millis: i64,
    pub entries: Vec<Entry>,
    /// Project (or `UNATTRIBUTED`) → seconds, by name.
    pub totals: BTreeMap<String, i64>,
}

impl Day {
    pub fn seconds(&self) -> i64 {
        self.totals.values().sum()
    }
}

/// The days from `from_millis` to `until_millis` (local midnights), with what was tracked in them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    pub days: Vec<Day>,
}

impl Ledger {
    /// What of `sessions` (any order) lies within `[from_millis, until_millis)`,
    /// each attributed with `rules` among all of `sessions` (days around the
    /// span teach which project a ticket key or a name belongs to); an open
    /// session ends at `now_millis`.
    pub fn of(sessions: &[ActivitySession], rules: &ProjectRules, from_millis: i64, until_millis: i64, now_millis: i64) -> Ledger {
        let mut sessions: Vec<ActivitySession> = sessions
            .iter()
            .cloned()
            .map(|mut s| {
                s.ended_at_millis = Some(s.ended_at_millis.unwrap_or(now_millis).max(s.started_at_millis));
                s
            })
            .collect();
        sessions.sort_by_key(|s| (s.started_at_millis, s.session_id));
        let found = attribute(&sessions, rules);
        Self::cut(&sessions, &found, from_millis, until_millis, now_millis)
    }

    /// `sessions` (oldest first) with their attributions (`attribute`'s, in
    /// the same order) cut into the days of `[from_millis, until_millis)`; an
    /// open session ends at `now_millis`.
    pub fn cut(sessions: &[ActivitySession], found: &[Attribution], from_millis: i64, until_millis: i64, now_millis: i64) -> Ledger {
        let mut days: BTreeMap<i64, Day> = BTreeMap::new();
        let mut midnight = crate::ids::local_day_start_millis(from_millis);
        while midnight < until_millis {
            days.insert(midnight, Day { start_millis: midnight, ..Day::default() });
            midnight = next_midnight(midnight);
        }
        for (session, attribution) in sessions.iter().zip(found) {
            let mut start = session.started_at_millis.max(from_millis);
            let end = session.ended_at_millis.unwrap_or(now_millis).max(session.started_at_millis).min(until_millis);
            while start < end {
                let day_start = crate::ids::local_day_start_millis(start);
                // (A day that does not move forward, at a clock change the C library reads oddly, ends the session.)
                let piece_end = match next_midnight(day_start) {
                    next if next > start => end.min(next),
                    _ => end,
                };
                let seconds = piece_end / 1000 - start / 1000;
                let day = days.entry(day_start).or_insert_with(|| Day { start_millis: day_start, ..Day::default() });
                let entry = Entry {
                    session_id: session.session_id,
                    start_millis: start,
                    end_millis: piece_end,
                    seconds,
                    app: session.app.clone(),
                    title: session.title.clone(),
                    url: session.url.clone(),
                    attribution: attribution.clone(),
                };
                *day.totals.entry(entry.project().to_owned()).or_default() += seconds;
                day.entries.push(entry);
                start = piece_end;
            }
        }
        Ledger { days: days.into_values().collect() }
    }

    /// Project → seconds over every day.
    pub fn totals(&self) -> BTreeMap<String, i64> {
        let mut totals = BTreeMap::new();
        for day in &self.days {
            for (project, seconds) in &day.totals {
                *totals.entry(project.clone()).or_default() += seconds;
            }
        }
        totals
    }

    pub fn seconds(&self) -> i64 {
        self.days.iter().map(Day::seconds).sum()
    }
}

/// The local midnight after the day starting at `midnight` (23 or 25 hours on a clock change).
pub fn next_midnight(midnight: i64) -> i64 {
    crate::ids::local_day_start_millis(midnight + 36 * 3_600_000)
}

/// The local Monday midnight of the week holding `at_millis`.
pub fn week_start(at_millis: i64) -> i64 {
    let mut day = crate::ids::local_day_start_millis(at_millis);
    while crate::ids::local_weekday(day) != 0 {
        day = crate::ids::local_day_start_millis(day - 12 * 3_600_000);
    }
    day
}

/// `7:05:09` (hours may pass 24).
pub fn hms(seconds: i64) -> String {
    format!("{}:{:02}:{:02}", seconds / 3600, (seconds % 3600) / 60, seconds % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: i64, title: &str, start: i64, end: Option<i64>) -> ActivitySession {
        ActivitySession { session_id: id, app: "code".into(), title: title.into(), started_at_millis: start, ended_at_millis: end, ..ActivitySession::default() }
    }

    #[test]
    fn days_are_cut_at_midnight_and_add_up_to_the_second() {
        let midnight = crate::ids::local_day_start_millis(1_764_000_000_000);
        let tomorrow = next_midnight(midnight);
        let sessions = [
            session(1, "a.rs - atlas - Visual Studio Code", midnight + 3_600_000 + 400, Some(midnight + 7_200_000 + 900)),
            session(2, "Inbox - Mozilla Thunderbird", midnight + 7_200_000 + 900, Some(midnight + 7_260_000 + 100)),
            // Across midnight, and open (ends now).
            session(3, "b.rs - atlas - Visual Studio Code", tomorrow - 60_000, None),
        ];
        let now = tomorrow + 30_500;
        let ledger = Ledger::of(&sessions, &ProjectRules::default(), midnight, tomorrow + 86_400_000, now);
        assert_eq!(ledger.days.len(), 2);
        assert_eq!(ledger.days[0].totals["atlas"], 3600 + 60);
        assert_eq!(ledger.days[0].totals[UNATTRIBUTED], 60);
        assert_eq!(ledger.days[1].totals["atlas"], 30);
        assert_eq!(ledger.seconds(), 3600 + 60 + 60 + 30);
        assert_eq!(ledger.totals()["atlas"], 3600 + 60 + 30);
        // The bounds cut too.
        let first_day = Ledger::of(&sessions, &ProjectRules::default(), midnight, tomorrow, now);
        assert_eq!(first_day.days.len(), 1);
        assert_eq!(first_day.seconds(), 3600 + 60 + 60);
        assert_eq!(hms(3600 * 26 + 61), "26:01:01");
    }

    #[test]
    fn a_week_starts_on_monday() {
        let start = week_start(crate::ids::now_millis());
        assert_eq!(crate::ids::local_weekday(start), 0);
        assert!(crate::ids::now_millis() - start < 7 * 86_400_000 + 3_600_000);
    }
}
