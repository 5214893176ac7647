//! The calendar (issue 58), read-only. The user names their calendars in
//! Settings → Your day (`calendar.sources`, one per line): an `.ics` file on
//! this computer, an iCalendar address (a calendar's secret address;
//! `webcal://` is read as `https://`), or a CalDAV account (`caldav URL USER`,
//! its password or token in the secret store under `calendar:USER@HOST`).
//!
//! The `calendar` worker (`worker.rs`) reads each source when it changes and
//! every `calendar.refresh_minutes`, over the outbound gate (offline mode
//! refuses every address but loopback; plain `http://` is refused but for
//! loopback, since a calendar's address is itself a secret), parses it with
//! `day::calendar` (repeats expanded from 14 days back to 60 ahead) and
//! replaces that source's rows of `calendar_events` in one transaction
//! (`db.rs`): a source that fails keeps its last good events and says why,
//! in Settings and as a notice. From there the events are on the timeline
//! (`capture::db::load_days`), in the prompt's context ("Your next meeting is
//! in 12 min: …", `llm::context`), behind the automations' `calendar`
//! trigger ("10 minutes before a meeting"), and a meeting note takes its
//! title from the event it overlaps. A calendar's words are data, never
//! instructions.

pub mod db;
pub mod fetch;
pub mod worker;

use std::path::PathBuf;

use sha2::{Digest, Sha256};

/// At most this many sources are read.
pub const MAX_SOURCES: usize = 16;
/// The settings this room reads (`config::keys` names them the same).
pub const SOURCES_KEY: &str = "calendar.sources";
pub const REFRESH_KEY: &str = "calendar.refresh_minutes";
pub const DEFAULT_REFRESH_MINUTES: u32 = 15;

/// A timed calendar event about to start, for listen mode: one with a call's
/// address is a call by itself (an offer to listen when an app records from
/// the microphone); any other names the call a call window shows meanwhile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallStarting {
    pub title: String,
    pub join_url: Option<String>,
    pub start_millis: i64,
    pub end_millis: i64,
}

/// Where a calendar comes from: one line of `calendar.sources`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// An `.ics` file on this computer (`~` is the home folder).
    File(PathBuf),
    /// An iCalendar file at an address.
    Url(String),
    /// A CalDAV calendar, or an account's calendar home (every calendar in it is read).
    CalDav { url: String, user: String },
}

impl Source {
    /// The line as the user wrote it, reduced to what identifies it: the
    /// `source` of its rows in `calendar_events` (a hash; an address can be a secret).
    pub fn key(&self) -> String {
        let text = match self {
            Source::File(path) => format!("file {}", path.display()),
            Source::Url(url) => format!("url {url}"),
            Source::CalDav { url, user } => format!("caldav {url} {user}"),
        };
        hex::encode(&Sha256::digest(text.as_bytes())[..8])
    }

    /// What Settings and notices show: a file's path, an address's host only
    /// (the rest of a secret address is the secret), a CalDAV account.
    pub fn label(&self) -> String {
        match self {
            Source::File(path) => path.display().to_string(),
            Source::Url(url) => format!("{} (address)", crate::net::host_of_url(url).unwrap_or_else(|| "?".into())),
            Source::CalDav { url, user } => format!("{user}@{} (CalDAV)", crate::net::host_of_url(url).unwrap_or_else(|| "?".into())),
        }
    }

    /// The secret-store name of a CalDAV account's password or token.
    pub fn secret_name(&self) -> Option<String> {
        match self {
            Source::CalDav { url, user } => Some(secret_name(user, &crate::net::host_of_url(url).unwrap_or_default())),
            _ => None,
        }
    }
}

/// A file source's path with `~/` read as the home folder.
pub fn expand_home(path: &std::path::Path) -> PathBuf {
    match path.to_str().and_then(|p| p.strip_prefix("~/")) {
        Some(rest) => PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(rest),
        None => path.to_path_buf(),
    }
}

/// `calendar:USER@HOST`.
pub fn secret_name(user: &str, host: &str) -> String {
    format!("calendar:{user}@{host}")
}

/// An address a calendar may be read from: https anywhere, http on loopback only.
fn address(url: &str, line: usize) -> Result<String, String> {
    let url = match url.strip_prefix("webcal://") {
        Some(rest) => format!("https://{rest}"),
        None => url.to_owned(),
    };
    let parsed = crate::net::web_url(&url).map_err(|err| format!("line {line}: {err}"))?;
    let host = crate::net::host_of_url(&parsed).ok_or_else(|| format!("line {line}: {url} has no host"))?;
    match parsed.split_once("://").map(|(scheme, _)| scheme) {
        Some("https") => Ok(parsed),
        Some("http") if crate::net::is_loopback(&host) => Ok(parsed),
        Some("http") => Err(format!("line {line}: a calendar is read over https only (over http its address, which is its key, would cross the network readable)")),
        _ => Err(format!("line {line}: {url} is not an https address")),
    }
}

/// The sources of `calendar.sources`: one per line, blank lines and `#`
/// comments skipped. A line that is none of the three is an error naming it.
pub fn parse_sources(text: &str) -> Result<Vec<Source>, String> {
    let mut sources = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let number = index + 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let source = if let Some(rest) = line.strip_prefix("caldav ").or_else(|| line.strip_prefix("caldav\t")) {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let [url, user] = words[..] else {
                return Err(format!("line {number}: a CalDAV account is `caldav URL USER` (its password: `cowork secrets set calendar:USER@HOST`)"));
            };
            Source::CalDav { url: address(url, number)?, user: user.to_owned() }
        } else if line.starts_with("https://") || line.starts_with("http://") || line.starts_with("webcal://") {
            if line.contains(char::is_whitespace) {
                return Err(format!("line {number}: an address has no spaces"));
            }
            Source::Url(address(line, number)?)
        } else if let Some(path) = line.strip_prefix("file://") {
            Source::File(PathBuf::from(path))
        } else if line.starts_with('/') || line.starts_with("~/") {
            Source::File(PathBuf::from(line))
        } else {
            let shown: String = line.chars().take(60).collect();
            return Err(format!("line {number}: \"{shown}\" is not a file path, an https:// address or `caldav URL USER`"));
        };
        if !sources.contains(&source) {
            sources.push(source);
        }
    }
    if sources.len() > MAX_SOURCES {
        return Err(format!("at most {MAX_SOURCES} calendars are read"));
    }
    Ok(sources)
}

/// A source's state, as Settings shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceStatus {
    pub label: String,
    /// When it was last read whole, and how many events (in the window kept) it gave.
    pub read_at_millis: Option<i64>,
    pub events: usize,
    /// Why the last reading failed (its last good events are kept).
    pub error: Option<String>,
}

/// What the calendar worker tells the UI.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CalendarView {
    pub sources: Vec<SourceStatus>,
    /// The next events, soonest first (up to a day ahead, at most 8).
    pub upcoming: Vec<crate::day::calendar::Event>,
}

/// "Your next meeting is in 12 min (10:30): "Q3 review" with Sam.": a line
/// about the meeting that is on or comes next within `horizon_millis`, for
/// the prompt and the sidebar; its title quoted and on one line (whoever
/// sent the invitation wrote it). All-day events are not meetings.
pub fn next_meeting_line(events: &[crate::day::calendar::Event], now_millis: i64, horizon_millis: i64) -> Option<String> {
    let event = events.iter().filter(|e| !e.all_day && e.end_millis > now_millis && e.start_millis <= now_millis + horizon_millis).min_by_key(|e| e.start_millis)?;
    let people: Vec<String> = event.attendees.iter().map(|a| db::one_line(a, 60)).collect();
    let with = match people.len() {
        0 => String::new(),
        1..=3 => format!(" with {}", people.join(", ")),
        n => format!(" with {} and {} more", people[..2].join(", "), n - 2),
    };
    let title = db::one_line(&event.title, 120);
    let when = if event.start_millis <= now_millis {
        format!("is on now (since {}, until {})", crate::ids::format_clock(event.start_millis), crate::ids::format_clock(event.end_millis))
    } else {
        let minutes = (event.start_millis - now_millis + 59_999) / 60_000;
        match minutes {
            0..=90 => format!("is in {minutes} min ({})", crate::ids::format_clock(event.start_millis)),
            _ => format!("is at {}", crate::ids::format_clock(event.start_millis)),
        }
    };
    Some(format!("Your next meeting {when}: \"{title}\"{with}."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_files_https_addresses_or_caldav_accounts_and_anything_else_is_named() {
        let sources = parse_sources("# work\n~/cal/team.ics\nfile:///srv/a.ics\nwebcal://calendar.example.org/private-abc/basic.ics\n\ncaldav https://dav.example.org/alice/ alice\nhttp://127.0.0.1:5232/x.ics\n").unwrap();
        assert_eq!(
            sources,
            vec![
                Source::File("~/cal/team.ics".into()),
                Source::File("/srv/a.ics".into()),
                Source::Url("https://calendar.example.org/private-abc/basic.ics".into()),
                Source::CalDav { url: "https://dav.example.org/alice/".into(), user: "alice".into() },
                Source::Url("http://127.0.0.1:5232/x.ics".into()),
            ]
        );
        // A secret address shows its host only; its key is a hash that differs per address.
        assert_eq!(sources[2].label(), "calendar.example.org (address)");
        assert!(!sources[2].key().contains("private"));
        assert_ne!(sources[2].key(), Source::Url("https://calendar.example.org/private-abd/basic.ics".into()).key());
        assert_eq!(sources[3].secret_name().as_deref(), Some("calendar:alice@dav.example.org"));
        assert_eq!(sources[0].secret_name(), None);
        for (bad, says) in [
            ("http://calendar.example.org/x.ics", "https only"),
            ("caldav https://dav.example.org/", "caldav URL USER"),
            ("caldav http://dav.example.org/ bob", "https only"),
            ("Team calendar", "is not a file path"),
            ("ftp://x/y.ics", "is not a file path"),
            ("https://a.example/x y", "no spaces"),
        ] {
            let err = parse_sources(&format!("/ok.ics\n{bad}")).unwrap_err();
            assert!(err.starts_with("line 2:") && err.contains(says), "{bad}: {err}");
        }
        let many: String = (0..=MAX_SOURCES).map(|i| format!("/c{i}.ics\n")).collect();
        assert!(parse_sources(&many).is_err());
        assert_eq!(parse_sources("/a.ics\n/a.ics").unwrap().len(), 1);
    }

    #[test]
    fn the_next_meeting_line_names_it_its_time_and_people_and_skips_all_day_and_past_events() {
        let at = |h: i64, m: i64| crate::ids::local_day_start_millis(crate::ids::now_millis()) + (h * 60 + m) * 60_000;
        let event = |title: &str, start: i64, end: i64, all_day: bool, people: &[&str]| crate::day::calendar::Event {
            title: title.into(),
            start_millis: start,
            end_millis: end,
            all_day,
            attendees: people.iter().map(|p| p.to_string()).collect(),
            ..Default::default()
        };
        let events = vec![
            event("Offsite", at(0, 0), at(23, 59), true, &[]),
            event("Stand-up", at(9, 0), at(9, 15), false, &["Ana"]),
            event("Q3 review", at(10, 30), at(11, 0), false, &["Sam"]),
            event("Planning", at(14, 0), at(15, 0), false, &["Ana", "Bo", "Cy", "Di"]),
        ];
        let now = at(10, 18);
        assert_eq!(next_meeting_line(&events, now, 3 * 3_600_000).unwrap(), format!("Your next meeting is in 12 min ({}): \"Q3 review\" with Sam.", crate::ids::format_clock(at(10, 30))));
        let during = next_meeting_line(&events, at(10, 40), 3 * 3_600_000).unwrap();
        assert!(during.starts_with("Your next meeting is on now (since ") && during.contains("Q3 review"), "{during}");
        let later = next_meeting_line(&events, at(11, 30), 3 * 3_600_000).unwrap();
        assert!(later.contains("\"Planning\" with Ana, Bo and 2 more"), "{later}");
        assert_eq!(next_meeting_line(&events, at(11, 30), 3_600_000), None, "beyond the horizon");
        assert_eq!(next_meeting_line(&events, at(16, 0), 3 * 3_600_000), None, "the all-day event is not a meeting");
    }
}
