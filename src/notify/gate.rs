//! The notification gate: one pure decision per notification, in this order —
//! the desktop is in do-not-disturb, presenting (a fullscreen window) or the
//! user is away → hold (only urgent passes); the user is in a focus session
//! (one app for a long stretch) → defer to the next natural break, but never
//! longer than the tier's bound; the tier's hourly cap; the source's cooldown;
//! a notification shown less than the bundling window ago → wait and go out
//! with whatever else arrives, as one; else deliver. Time and every counter
//! come in as arguments (the worker reads them from SQLite), so a restart
//! neither repeats nor bypasses anything.
//!
//! The default policy: a focus session is one app for 20 minutes while
//! present; a deferral lasts at most 15 minutes for a helpful notification
//! and an hour for an informational one (an urgent one is never deferred);
//! the hourly caps are 20 urgent, 6 helpful and 3 informational (past them,
//! the inbox only); a source's cooldown is 2 minutes; what comes within 30 s
//! of the last one shown is bundled with it.

use serde::{Deserialize, Serialize};

use crate::automations::flow::NotifyTier;

/// The numbers behind the gate (Settings could change them).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Notifications shown per hour at most: urgent, helpful, informational.
    pub caps_per_hour: [u32; 3],
    /// A source waits this long after one of its notifications was shown.
    pub cooldown_millis: i64,
    /// The longest a focus session defers: urgent (never), helpful, informational.
    pub max_defer_millis: [i64; 3],
    /// One app this long while present is a focus session.
    pub focus_after_millis: i64,
    /// What arrives within this window after a notification was shown goes out as one.
    pub bundle_millis: i64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            caps_per_hour: [20, 6, 3],
            cooldown_millis: 120_000,
            max_defer_millis: [0, 15 * 60_000, 60 * 60_000],
            focus_after_millis: 20 * 60_000,
            bundle_millis: 30_000,
        }
    }
}

fn index(tier: NotifyTier) -> usize {
    match tier {
        NotifyTier::Urgent => 0,
        NotifyTier::Helpful => 1,
        NotifyTier::Informational => 2,
    }
}

/// What the desktop and the user are doing right now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Situation {
    pub now_millis: i64,
    /// The notification server is paused (dunst) or inhibited (KDE).
    pub do_not_disturb: bool,
    /// A fullscreen window has focus.
    pub presenting: bool,
    pub away: bool,
    /// Since when the same app has had focus with the user present (None: no app, or away).
    pub same_app_since_millis: Option<i64>,
}

/// The counters that concern one notification (from SQLite).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Notifications of this tier shown in the last hour.
    pub tier_shown_last_hour: u32,
    /// When the first of those was shown (the cap lifts an hour after it).
    pub tier_first_in_hour_millis: Option<i64>,
    /// When this source's last notification was shown.
    pub source_last_shown_millis: Option<i64>,
    /// When any notification was last shown.
    pub any_last_shown_millis: Option<i64>,
    pub source_muted: bool,
}

/// The gate's word on a notification. It is in the inbox whatever the word.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    Deliver,
    /// Do-not-disturb, presenting or away: until that ends.
    Hold { why: String },
    /// A focus session: until the next break, or `until` at the latest.
    Defer { until_millis: i64 },
    /// The tier's cap for the hour is reached: the inbox only, until the hour has room.
    Capped { until_millis: i64 },
    /// The source spoke recently: until its cooldown ends.
    Cooldown { until_millis: i64 },
    /// Goes out with what else arrives until then, as one.
    Bundle { until_millis: i64 },
    /// The user muted the source: the inbox only.
    Muted,
}

/// The decision for a notification of `tier` created at `created_millis`.
pub fn decide(tier: NotifyTier, created_millis: i64, situation: &Situation, counts: &Counts, policy: &Policy) -> Verdict {
    let now = situation.now_millis;
    let urgent = tier == NotifyTier::Urgent;
    if counts.source_muted && !urgent {
        return Verdict::Muted;
    }
    if !urgent {
        let why = if situation.do_not_disturb {
            Some("do not disturb is on")
        } else if situation.presenting {
            Some("a fullscreen window has focus")
        } else if situation.away {
            Some("you are away")
        } else {
            None
        };
        if let Some(why) = why {
            return Verdict::Hold { why: why.into() };
        }
        if let Some(since) = situation.same_app_since_millis
            && now - since >= policy.focus_after_millis
        {
            let until = created_millis + policy.max_defer_millis[index(tier)];
            if now < until {
                return Verdict::Defer { until_millis: until };
            }
        }
    }
    let cap = policy.caps_per_hour[index(tier)];
    if counts.tier_shown_last_hour >= cap {
        let until = counts.tier_first_in_hour_millis.map_or(now + 3_600_000, |first| first + 3_600_000);
        return Verdict::Capped { until_millis: until };
    }
    if let Some(last) = counts.source_last_shown_millis
        && now - last < policy.cooldown_millis
        && !urgent
    {
        return Verdict::Cooldown { until_millis: last + policy.cooldown_millis };
    }
    if let Some(last) = counts.any_last_shown_millis
        && now - last < policy.bundle_millis
        && !urgent
    {
        return Verdict::Bundle { until_millis: last + policy.bundle_millis };
    }
    Verdict::Deliver
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn at(now: i64) -> Situation {
        Situation { now_millis: now, ..Situation::default() }
    }

    #[test]
    fn do_not_disturb_presenting_and_away_hold_all_but_urgent() {
        let policy = Policy::default();
        for situation in [Situation { do_not_disturb: true, ..at(0) }, Situation { presenting: true, ..at(0) }, Situation { away: true, ..at(0) }] {
            assert!(matches!(decide(NotifyTier::Helpful, 0, &situation, &Counts::default(), &policy), Verdict::Hold { .. }));
            assert_eq!(decide(NotifyTier::Urgent, 0, &situation, &Counts::default(), &policy), Verdict::Deliver);
        }
    }

    #[test]
    fn a_focus_session_defers_until_a_break_but_never_past_the_tiers_bound() {
        let policy = Policy::default();
        let focused = Situation { same_app_since_millis: Some(0), ..at(30 * MIN) };
        assert_eq!(decide(NotifyTier::Helpful, 30 * MIN, &focused, &Counts::default(), &policy), Verdict::Defer { until_millis: 45 * MIN });
        assert_eq!(decide(NotifyTier::Informational, 30 * MIN, &focused, &Counts::default(), &policy), Verdict::Defer { until_millis: 90 * MIN });
        // Fifteen minutes on, the bound has come: delivered even in the same session.
        let later = Situation { now_millis: 45 * MIN, ..focused };
        assert_eq!(decide(NotifyTier::Helpful, 30 * MIN, &later, &Counts::default(), &policy), Verdict::Deliver);
        // Ten minutes in one app is not a focus session yet.
        let short = Situation { same_app_since_millis: Some(25 * MIN), ..at(30 * MIN) };
        assert_eq!(decide(NotifyTier::Helpful, 30 * MIN, &short, &Counts::default(), &policy), Verdict::Deliver);
    }

    #[test]
    fn caps_cooldowns_bundling_and_mutes_in_that_order() {
        let policy = Policy::default();
        let now = 100 * MIN;
        let full = Counts { tier_shown_last_hour: 6, tier_first_in_hour_millis: Some(now - 50 * MIN), ..Counts::default() };
        assert_eq!(decide(NotifyTier::Helpful, now, &at(now), &full, &policy), Verdict::Capped { until_millis: now + 10 * MIN });
        let recent = Counts { source_last_shown_millis: Some(now - 30_000), any_last_shown_millis: Some(now - 30_000), ..Counts::default() };
        assert_eq!(decide(NotifyTier::Helpful, now, &at(now), &recent, &policy), Verdict::Cooldown { until_millis: now + 90_000 });
        let other = Counts { any_last_shown_millis: Some(now - 10_000), ..Counts::default() };
        assert_eq!(decide(NotifyTier::Helpful, now, &at(now), &other, &policy), Verdict::Bundle { until_millis: now + 20_000 });
        assert_eq!(decide(NotifyTier::Urgent, now, &at(now), &other, &policy), Verdict::Deliver, "urgent is not bundled");
        let muted = Counts { source_muted: true, ..Counts::default() };
        assert_eq!(decide(NotifyTier::Helpful, now, &at(now), &muted, &policy), Verdict::Muted);
        assert_eq!(decide(NotifyTier::Urgent, now, &at(now), &muted, &policy), Verdict::Deliver, "a muted source's urgent notice still comes");
    }
}
