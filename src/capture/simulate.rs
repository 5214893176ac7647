//! `cowork capture simulate`: replays a scripted day through the real
//! pipeline — firewall, session tracker, store worker — on a simulated clock,
//! for demos, tests and benches.
//!
//! A script is JSON Lines, one step per line:
//! `{"window": {"app": "firefox", "title": "Inbox", "url": "https://mail.example/"}}` focuses a window,
//! `{"work_secs": 300}` passes time with the user active,
//! `{"idle_secs": 900}` passes time with no input (AFK after the threshold, back-dated),
//! `{"unfocus": true}` leaves nothing focused. Blank lines and lines starting with `#` are skipped.

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::capture::firewall::{Observation, Rules};
use crate::capture::tracker::{SessionTracker, TrackerOutput};
use crate::events::ActiveWindow;
use crate::ids::local_minute_of_day;

#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ScriptWindow {
    pub app: String,
    pub title: String,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub pid: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Window(ScriptWindow),
    Work { secs: f64 },
    Idle { secs: f64 },
    Unfocus,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    window: Option<ScriptWindow>,
    work_secs: Option<f64>,
    idle_secs: Option<f64>,
    unfocus: Option<bool>,
}

pub fn parse_script(text: &str) -> anyhow::Result<Vec<Step>> {
    let mut steps = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = || format!("script line {}", index + 1);
        let raw: RawStep = serde_json::from_str(line).with_context(at)?;
        let step = match raw {
            RawStep { window: Some(window), work_secs: None, idle_secs: None, unfocus: None } => Step::Window(window),
            RawStep { window: None, work_secs: Some(secs), idle_secs: None, unfocus: None } if secs >= 0.0 => Step::Work { secs },
            RawStep { window: None, work_secs: None, idle_secs: Some(secs), unfocus: None } if secs >= 0.0 => Step::Idle { secs },
            RawStep { window: None, work_secs: None, idle_secs: None, unfocus: Some(true) } => Step::Unfocus,
            _ => bail!("{}: give exactly one of window, work_secs (≥ 0), idle_secs (≥ 0), unfocus", at()),
        };
        steps.push(step);
    }
    Ok(steps)
}

/// Total simulated time of a script, in milliseconds.
pub fn duration_millis(steps: &[Step]) -> i64 {
    steps
        .iter()
        .map(|step| match step {
            Step::Work { secs } | Step::Idle { secs } => (secs * 1000.0) as i64,
            _ => 0,
        })
        .sum()
}

/// What a replay did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    pub sessions: usize,
    pub excluded_windows: usize,
    pub afk_periods: usize,
}

/// Replays `steps` from `start_millis`, sending every tracker output to `emit`.
pub fn replay(
    steps: &[Step],
    start_millis: i64,
    rules: &Rules,
    afk_secs: u64,
    mut emit: impl FnMut(TrackerOutput),
) -> ReplayStats {
    let mut tracker = SessionTracker::default();
    let mut stats = ReplayStats::default();
    let mut now = start_millis;
    let mut window_id = 0u32;
    let send = |outputs: Vec<TrackerOutput>, stats: &mut ReplayStats, emit: &mut dyn FnMut(TrackerOutput)| {
        for output in outputs {
            if let TrackerOutput::Session(session) = &output
                && session.ended_at_millis.is_some()
            {
                stats.sessions += 1;
            }
            emit(output);
        }
    };
    for step in steps {
        match step {
            Step::Window(window) => {
                window_id += 1;
                let observation = Observation {
                    app: &window.app,
                    title: &window.title,
                    url: window.url.as_deref(),
                    local_minute: local_minute_of_day(now),
                };
                let allowed = rules.decide(&observation).is_record();
                stats.excluded_windows += usize::from(!allowed);
                let active = allowed.then(|| ActiveWindow {
                    window_id,
                    app: window.app.clone(),
                    title: window.title.clone(),
                    pid: window.pid,
                    url: window.url.clone(),
                    url_source: window.url.as_ref().map(|_| crate::events::UrlSource::Script),
                });
                send(tracker.came_back(now), &mut stats, &mut emit);
                send(tracker.observe(active, now), &mut stats, &mut emit);
            }
            Step::Unfocus => send(tracker.observe(None, now), &mut stats, &mut emit),
            Step::Work { secs } => {
                send(tracker.came_back(now), &mut stats, &mut emit);
                now += (secs * 1000.0) as i64;
            }
            Step::Idle { secs } => {
                let last_input = now;
                now += (secs * 1000.0) as i64;
                if *secs >= afk_secs as f64 {
                    stats.afk_periods += 1;
                    send(tracker.went_away(last_input), &mut stats, &mut emit);
                }
            }
        }
    }
    send(tracker.shutdown(now), &mut stats, &mut emit);
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::SessionEnd;

    const SCRIPT: &str = r#"
# a short morning
{"window": {"app": "firefox", "title": "Inbox - Mail"}}
{"work_secs": 600}
{"window": {"app": "KeePassXC", "title": "Passwords.kdbx"}}
{"work_secs": 30}
{"window": {"app": "code", "title": "main.rs - cowork"}}
{"work_secs": 1200}
{"idle_secs": 900}
{"work_secs": 60}
"#;

    #[test]
    fn a_script_replays_through_the_firewall_with_afk_back_dated() {
        let steps = parse_script(SCRIPT).unwrap();
        assert_eq!(duration_millis(&steps), (600 + 30 + 1200 + 900 + 60) * 1000);
        let mut closed = Vec::new();
        let stats = replay(&steps, 0, &Rules::default(), 180, |output| {
            if let TrackerOutput::Session(s) = output
                && s.ended_at_millis.is_some()
            {
                closed.push(s);
            }
        });
        let summary: Vec<(&str, i64, i64, Option<SessionEnd>)> = closed
            .iter()
            .map(|s| (s.title.as_str(), s.started_at_millis / 1000, s.ended_at_millis.unwrap() / 1000, s.end_reason))
            .collect();
        assert_eq!(
            summary,
            [
                ("Inbox - Mail", 0, 600, Some(SessionEnd::Switch)),
                ("main.rs - cowork", 630, 1830, Some(SessionEnd::Afk)),
                ("main.rs - cowork", 2730, 2790, Some(SessionEnd::Shutdown)),
            ],
            "the password manager is excluded; AFK ends at the last input"
        );
        assert_eq!(stats, ReplayStats { sessions: 3, excluded_windows: 1, afk_periods: 1 });
    }

    #[test]
    fn a_bad_line_names_its_number() {
        let err = parse_script("{\"work_secs\": 5}\n{\"work_secs\": 1, \"idle_secs\": 2}").unwrap_err();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
        assert!(parse_script("{\"wait\": 1}").is_err());
    }
}
