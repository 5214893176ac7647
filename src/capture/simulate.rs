//! `cowork capture simulate`: replays a scripted day through the real
//! pipeline — firewall, session tracker, store worker — on a simulated clock,
//! for demos, tests and benches.
//!
//! A script is JSON Lines, one step per line:
//! `{"window": {"app": "firefox", "title": "Inbox", "url": "https://mail.example/"}}` focuses a window,
//! `{"work_secs": 300}` passes time with the user active,
//! `{"idle_secs": 900}` passes time with no input (AFK after the threshold, back-dated),
//! `{"unfocus": true}` leaves nothing focused,
//! `{"type": "text"}` types into the focused window (one chunk, flushed by Enter; `<private>` redacted),
//! `{"copy": "text"}` copies from it (the clipboard stream, repeats dropped),
//! `{"heard": {"source": "mic", "text": "…", "secs": 3.5}}` is what listen mode
//! heard over the next `secs` (`mic`: the user, `system`: the others; it
//! passes that much time, as a transcript of a call would),
//! `{"summary": {"hours_before": 72, "text": "…"}}` stores an observational
//! summary of the hour that many hours before the script's start, as the
//! local model would write it (evaluations of memory from earlier days).
//! Blank lines and lines starting with `#` are skipped. Windows, typing and
//! clipboard all pass the same firewall as live capture; idle time also
//! drives the AFK heartbeat stream.

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::capture::clipboard::ClipFilter;
use crate::capture::firewall::{Observation, Rules};
use crate::records::redact_private;
use crate::capture::heartbeat::{AfkEvent, AfkStatus, Heartbeats};
use crate::capture::tracker::{SessionTracker, TrackerOutput};
use crate::ids::{local_minute_of_day, next_id};
use crate::records::{ActiveWindow, ClipTrigger, ClipboardEvent, FlushReason, KeystrokeChunk};

/// Simulated typing speed: 5 characters a second.
const TYPING_MILLIS_PER_CHAR: i64 = 200;

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
    Type(String),
    Copy(String),
    Summary(ScriptSummary),
    Heard(ScriptHeard),
}

/// What listen mode heard over the next `secs`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptHeard {
    /// `mic` (the user) or `system` (the others).
    pub source: String,
    pub text: String,
    pub secs: f64,
}

/// An observational summary of an hour before the script starts.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptSummary {
    pub hours_before: u32,
    pub text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    window: Option<ScriptWindow>,
    work_secs: Option<f64>,
    idle_secs: Option<f64>,
    unfocus: Option<bool>,
    #[serde(rename = "type")]
    typed: Option<String>,
    copy: Option<String>,
    summary: Option<ScriptSummary>,
    heard: Option<ScriptHeard>,
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
        let given = usize::from(raw.window.is_some())
            + usize::from(raw.work_secs.is_some())
            + usize::from(raw.idle_secs.is_some())
            + usize::from(raw.unfocus.is_some())
            + usize::from(raw.typed.is_some())
            + usize::from(raw.copy.is_some())
            + usize::from(raw.summary.is_some())
            + usize::from(raw.heard.is_some());
        let step = match raw {
            _ if given != 1 => bail!("{}: give exactly one of window, work_secs, idle_secs, unfocus, type, copy, summary, heard", at()),
            RawStep { heard: Some(heard), .. } if !matches!(heard.source.as_str(), "mic" | "system") => bail!("{}: heard's source is mic or system", at()),
            RawStep { heard: Some(heard), .. } if heard.secs.is_nan() || heard.secs < 0.0 => bail!("{}: heard's secs must be ≥ 0", at()),
            RawStep { heard: Some(heard), .. } => Step::Heard(heard),
            RawStep { window: Some(window), .. } => Step::Window(window),
            RawStep { work_secs: Some(secs), .. } if secs >= 0.0 => Step::Work { secs },
            RawStep { idle_secs: Some(secs), .. } if secs >= 0.0 => Step::Idle { secs },
            RawStep { unfocus: Some(true), .. } => Step::Unfocus,
            RawStep { typed: Some(text), .. } => Step::Type(text),
            RawStep { copy: Some(text), .. } => Step::Copy(text),
            RawStep { summary: Some(summary), .. } if !summary.text.trim().is_empty() => Step::Summary(summary),
            RawStep { summary: Some(_), .. } => bail!("{}: a summary needs its text", at()),
            _ => bail!("{}: work_secs and idle_secs must be ≥ 0, unfocus must be true", at()),
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
            Step::Heard(heard) => (heard.secs * 1000.0) as i64,
            Step::Type(text) => text.chars().count() as i64 * TYPING_MILLIS_PER_CHAR,
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
    pub chunks: usize,
    pub clips: usize,
}

/// One row a replay produces, for the store.
#[derive(Clone, Debug, PartialEq)]
pub enum Replayed {
    Window(TrackerOutput),
    Chunk(KeystrokeChunk),
    Clip(ClipboardEvent),
    Afk(AfkEvent),
    /// An observational summary: its hour (start, end) and text.
    Summary { start_millis: i64, end_millis: i64, text: String },
    /// What listen mode heard: the source (`mic` or `system`), the focused
    /// window (app, title), when, and the text.
    Heard { source: String, app: String, title: String, start_millis: i64, end_millis: i64, text: String },
}

/// Replays `steps` from `start_millis`, sending every row to `emit`.
pub fn replay(
    steps: &[Step],
    start_millis: i64,
    rules: &Rules,
    afk_secs: u64,
    mut emit: impl FnMut(Replayed),
) -> ReplayStats {
    let mut tracker = SessionTracker::default();
    let mut stats = ReplayStats::default();
    let mut now = start_millis;
    let mut window_id = 0u32;
    // The window typing and copying go to: None when nothing is focused or the firewall excluded it.
    let mut focused: Option<ActiveWindow> = None;
    let mut clips = ClipFilter::default();
    let mut afk = Heartbeats::new(afk_secs as i64 * 1000 + 2_000);
    let send = |outputs: Vec<TrackerOutput>, stats: &mut ReplayStats, emit: &mut dyn FnMut(Replayed)| {
        for output in outputs {
            if let TrackerOutput::Session(session) = &output
                && session.ended_at_millis.is_some()
            {
                stats.sessions += 1;
            }
            emit(Replayed::Window(output));
        }
    };
    // The user was active over [from, to]: one heartbeat spanning it (the store upserts by id).
    let present = |from: i64, to: i64, afk: &mut Heartbeats<AfkStatus>, emit: &mut dyn FnMut(Replayed)| {
        let (event, _) = afk.beat(AfkStatus::NotAfk { held_by: None }, from, to);
        emit(Replayed::Afk(event.clone()));
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
                focused = allowed.then(|| ActiveWindow {
                    window_id,
                    app: window.app.clone(),
                    title: window.title.clone(),
                    pid: window.pid,
                    url: window.url.clone(),
                    url_source: window.url.as_ref().map(|_| crate::records::UrlSource::Script),
                });
                present(now, now, &mut afk, &mut emit);
                send(tracker.came_back(now), &mut stats, &mut emit);
                send(tracker.observe(focused.clone(), now), &mut stats, &mut emit);
            }
            Step::Unfocus => {
                focused = None;
                send(tracker.observe(None, now), &mut stats, &mut emit);
            }
            Step::Work { secs } => {
                send(tracker.came_back(now), &mut stats, &mut emit);
                let from = now;
                now += (secs * 1000.0) as i64;
                present(from, now, &mut afk, &mut emit);
            }
            Step::Type(text) => {
                send(tracker.came_back(now), &mut stats, &mut emit);
                let started = now;
                now += text.chars().count() as i64 * TYPING_MILLIS_PER_CHAR;
                present(started, now, &mut afk, &mut emit);
                let text = redact_private(text);
                if let Some(window) = focused.as_ref().filter(|_| !text.is_empty()) {
                    stats.chunks += 1;
                    emit(Replayed::Chunk(KeystrokeChunk {
                        chunk_id: next_id(),
                        app: window.app.clone(),
                        title: window.title.clone(),
                        pid: window.pid,
                        started_at_millis: started,
                        ended_at_millis: now,
                        text,
                        shortcuts: Vec::new(),
                        flush_reason: FlushReason::Enter,
                    }));
                }
            }
            Step::Copy(text) => {
                send(tracker.came_back(now), &mut stats, &mut emit);
                present(now, now, &mut afk, &mut emit);
                if let Some(event) = clips.accept(text, focused.as_ref(), ClipTrigger::Shortcut, now) {
                    stats.clips += 1;
                    emit(Replayed::Clip(event));
                }
            }
            Step::Heard(heard) => {
                send(tracker.came_back(now), &mut stats, &mut emit);
                let started = now;
                now += (heard.secs * 1000.0) as i64;
                present(started, now, &mut afk, &mut emit);
                let (app, title) = focused.as_ref().map(|w| (w.app.clone(), w.title.clone())).unwrap_or_default();
                emit(Replayed::Heard { source: heard.source.clone(), app, title, start_millis: started, end_millis: now, text: heard.text.clone() });
            }
            Step::Summary(summary) => {
                const HOUR: i64 = 3_600_000;
                let start = (start_millis - i64::from(summary.hours_before) * HOUR).div_euclid(HOUR) * HOUR;
                emit(Replayed::Summary { start_millis: start, end_millis: start + HOUR, text: summary.text.clone() });
            }
            Step::Idle { secs } => {
                let last_input = now;
                now += (secs * 1000.0) as i64;
                if *secs >= afk_secs as f64 {
                    stats.afk_periods += 1;
                    send(tracker.went_away(last_input), &mut stats, &mut emit);
                    let (away, _) = afk.beat(AfkStatus::Afk, last_input, now);
                    emit(Replayed::Afk(away.clone()));
                }
            }
        }
    }
    send(tracker.shutdown(now), &mut stats, &mut emit);
    // The last AFK-stream event, grown to its end.
    if let Some(last) = afk.last() {
        emit(Replayed::Afk(last.clone()));
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::SessionEnd;

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
        let mut afk = Vec::new();
        let stats = replay(&steps, 0, &Rules::default(), 180, |output| match output {
            Replayed::Window(TrackerOutput::Session(s)) if s.ended_at_millis.is_some() => closed.push(s),
            Replayed::Afk(event) => afk.push(event),
            _ => {}
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
        assert_eq!(stats, ReplayStats { sessions: 3, excluded_windows: 1, afk_periods: 1, chunks: 0, clips: 0 });
        // The AFK stream: present until the last input, away for the idle stretch, present again.
        let mut last: std::collections::HashMap<i64, AfkEvent> = Default::default();
        for event in afk {
            last.insert(event.id, event);
        }
        let mut events: Vec<AfkEvent> = last.into_values().collect();
        events.sort_by_key(|e| e.start_millis);
        let spans: Vec<(&str, i64, i64)> = events.iter().map(|e| (e.data.as_str(), e.start_millis / 1000, e.end_millis / 1000)).collect();
        assert_eq!(spans, [("not-afk", 0, 1830), ("afk", 1830, 2730), ("not-afk", 2730, 2790)]);
    }

    #[test]
    fn typing_and_copying_replay_into_their_window_and_respect_the_firewall() {
        let script = r#"
{"window": {"app": "code", "title": "notes.md"}}
{"type": "ship it <private>pin 1234</private> friday"}
{"copy": "release checklist"}
{"copy": "release checklist"}
{"window": {"app": "KeePassXC", "title": "Passwords.kdbx"}}
{"type": "correct horse"}
{"copy": "s3cret"}
"#;
        let steps = parse_script(script).unwrap();
        let mut rows = Vec::new();
        let stats = replay(&steps, 0, &Rules::default(), 180, |output| rows.push(output));
        let typed: Vec<(&str, &str)> = rows
            .iter()
            .filter_map(|r| match r {
                Replayed::Chunk(c) => Some((c.text.as_str(), c.title.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(typed, [("ship it  friday", "notes.md")]);
        let copied: Vec<(&str, &str)> = rows
            .iter()
            .filter_map(|r| match r {
                Replayed::Clip(c) => Some((c.text.as_str(), c.app.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(copied, [("release checklist", "code")], "repeats dropped, the password manager excluded");
        assert_eq!((stats.chunks, stats.clips), (1, 1));
    }

    #[test]
    fn a_bad_line_names_its_number() {
        let err = parse_script("{\"work_secs\": 5}\n{\"work_secs\": 1, \"idle_secs\": 2}").unwrap_err();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
        assert!(parse_script("{\"wait\": 1}").is_err());
        assert!(format!("{:#}", parse_script("{\"summary\": {\"hours_before\": 3, \"text\": \" \"}}").unwrap_err()).contains("needs its text"));
    }

    #[test]
    fn a_summary_step_dates_its_hour_before_the_start() {
        let steps = parse_script("{\"summary\": {\"hours_before\": 72, \"text\": \"Met Kestrel Freight\"}}\n{\"work_secs\": 60}").unwrap();
        let start = 1_795_000_000_000 + 1_234;
        let mut summaries = Vec::new();
        replay(&steps, start, &Rules::default(), 180, |row| {
            if let Replayed::Summary { start_millis, end_millis, text } = row {
                summaries.push((start_millis, end_millis, text));
            }
        });
        let hour = 3_600_000;
        let expected = (start - 72 * hour) / hour * hour;
        assert_eq!(summaries, [(expected, expected + hour, "Met Kestrel Freight".to_owned())]);
    }
}
