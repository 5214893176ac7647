//! The calendar (issue 58), pure: an iCalendar file (RFC 5545: what an `.ics`
//! file, a calendar's secret address and a CalDAV server all give) read into
//! events — title, start and end, all-day, place, organizer and attendees,
//! the call's address when it has one — with repeating events expanded within
//! a window of time (`RRULE` with FREQ daily, weekly, monthly or yearly,
//! INTERVAL, COUNT, UNTIL, BYDAY, BYMONTHDAY; `EXDATE`; a `RECURRENCE-ID`
//! that moves or cancels one occurrence). Times in a named zone (`TZID`) go
//! through the system's time zone database (jiff), so a 09:00 in
//! Europe/Berlin stays 09:00 there across its clock changes; floating times
//! are the user's local time. A calendar's words are data: what it says is
//! never an instruction.

use std::collections::HashMap;

use jiff::civil::{Date, DateTime, Weekday};
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

/// One occurrence of an event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub uid: String,
    pub title: String,
    pub start_millis: i64,
    pub end_millis: i64,
    pub all_day: bool,
    pub location: String,
    pub description: String,
    pub organizer: String,
    pub attendees: Vec<String>,
    /// A call's address found in the event (its URL, location or description).
    pub join_url: Option<String>,
}

/// The most occurrences one repeating event gives, whatever its rule says.
const MAX_OCCURRENCES: usize = 2_000;

/// A time as the file gives it.
#[derive(Clone, Debug, PartialEq)]
enum When {
    Date(Date),
    /// A wall-clock time in a zone (None: floating, the user's local time).
    Local(DateTime, Option<String>),
    Utc(DateTime),
}

impl When {
    fn date(&self) -> Date {
        match self {
            When::Date(d) => *d,
            When::Local(dt, _) | When::Utc(dt) => dt.date(),
        }
    }

    fn with_date(&self, date: Date) -> When {
        match self {
            When::Date(_) => When::Date(date),
            When::Local(dt, tz) => When::Local(date.to_datetime(dt.time()), tz.clone()),
            When::Utc(dt) => When::Utc(date.to_datetime(dt.time())),
        }
    }

    fn millis(&self, local: &TimeZone) -> Option<i64> {
        let zoned = match self {
            When::Date(d) => d.to_datetime(jiff::civil::Time::midnight()).to_zoned(local.clone()).ok()?,
            When::Local(dt, Some(name)) => dt.to_zoned(TimeZone::get(name).ok().unwrap_or_else(|| local.clone())).ok()?,
            When::Local(dt, None) => dt.to_zoned(local.clone()).ok()?,
            When::Utc(dt) => dt.to_zoned(TimeZone::UTC).ok()?,
        };
        Some(zoned.timestamp().as_millisecond())
    }
}

/// One content line: its name, parameters and value.
struct Property {
    name: String,
    params: HashMap<String, String>,
    value: String,
}

/// The lines of an iCalendar text, unfolded (a line starting with a space or tab continues the one before).
fn unfold(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for raw in text.split('\n') {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        match (raw.strip_prefix(' ').or_else(|| raw.strip_prefix('\t')), lines.last_mut()) {
            (Some(rest), Some(last)) => last.push_str(rest),
            _ => lines.push(raw.to_owned()),
        }
    }
    lines
}

fn property(line: &str) -> Option<Property> {
    // The value starts at the first ':' outside a quoted parameter value.
    let mut quoted = false;
    let colon = line.char_indices().find(|(_, c)| {
        if *c == '"' {
            quoted = !quoted;
        }
        *c == ':' && !quoted
    })?.0;
    let (head, value) = (&line[..colon], &line[colon + 1..]);
    let mut parts = head.split(';');
    let name = parts.next()?.trim().to_ascii_uppercase();
    let params = parts
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim().to_ascii_uppercase(), v.trim().trim_matches('"').to_owned()))
        .collect();
    Some(Property { name, params, value: value.to_owned() })
}

/// A TEXT value with its escapes undone.
fn text(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n' | 'N') => out.push('\n'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn when(property: &Property) -> Option<When> {
    let value = property.value.trim();
    if property.params.get("VALUE").is_some_and(|v| v.eq_ignore_ascii_case("DATE")) || value.len() == 8 {
        return parse_date(value).map(When::Date);
    }
    let (date, time) = value.split_once('T')?;
    let date = parse_date(date)?;
    let utc = time.ends_with('Z');
    let time = time.trim_end_matches('Z');
    if time.len() < 6 {
        return None;
    }
    let field = |range: std::ops::Range<usize>| time.get(range).and_then(|t| t.parse::<i8>().ok());
    let time = jiff::civil::Time::new(field(0..2)?, field(2..4)?, field(4..6)?.min(59), 0).ok()?;
    let datetime = date.to_datetime(time);
    Some(if utc { When::Utc(datetime) } else { When::Local(datetime, property.params.get("TZID").cloned()) })
}

fn parse_date(text: &str) -> Option<Date> {
    let text = text.trim();
    if text.len() != 8 || !text.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Date::new(text[0..4].parse().ok()?, text[4..6].parse().ok()?, text[6..8].parse().ok()?).ok()
}

/// `P1D`, `PT1H30M`, `P2W`, `-PT15M` → milliseconds.
fn duration_millis(text: &str) -> Option<i64> {
    let text = text.trim();
    let (sign, text) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    let text = text.strip_prefix('P')?;
    let (mut total, mut number, mut in_time) = (0i64, String::new(), false);
    for c in text.chars() {
        match c {
            'T' => in_time = true,
            '0'..='9' => number.push(c),
            unit => {
                let n: i64 = number.parse().ok()?;
                number.clear();
                total += n * match (unit, in_time) {
                    ('W', false) => 7 * 86_400_000,
                    ('D', false) => 86_400_000,
                    ('H', true) => 3_600_000,
                    ('M', true) => 60_000,
                    ('S', true) => 1_000,
                    _ => return None,
                };
            }
        }
    }
    Some(sign * total)
}

#[derive(Clone, Debug, Default, PartialEq)]
struct Rule {
    freq: String,
    interval: i64,
    count: Option<usize>,
    until: Option<When>,
    /// (nth, weekday): nth 0 is every such weekday of the period.
    by_day: Vec<(i8, Weekday)>,
    by_month_day: Vec<i8>,
}

fn weekday(code: &str) -> Option<Weekday> {
    Some(match code {
        "MO" => Weekday::Monday,
        "TU" => Weekday::Tuesday,
        "WE" => Weekday::Wednesday,
        "TH" => Weekday::Thursday,
        "FR" => Weekday::Friday,
        "SA" => Weekday::Saturday,
        "SU" => Weekday::Sunday,
        _ => return None,
    })
}

fn rule(value: &str) -> Option<Rule> {
    let mut rule = Rule { interval: 1, ..Rule::default() };
    for part in value.split(';') {
        let (key, val) = part.split_once('=')?;
        match key.trim().to_ascii_uppercase().as_str() {
            "FREQ" => rule.freq = val.trim().to_ascii_uppercase(),
            "INTERVAL" => rule.interval = val.trim().parse::<i64>().ok()?.max(1),
            "COUNT" => rule.count = Some(val.trim().parse().ok()?),
            "UNTIL" => rule.until = when(&Property { name: "UNTIL".into(), params: HashMap::new(), value: val.to_owned() }),
            "BYDAY" => {
                for day in val.split(',') {
                    let day = day.trim().to_ascii_uppercase();
                    let (nth, code) = day.split_at(day.len().saturating_sub(2));
                    let nth: i8 = if nth.is_empty() { 0 } else { nth.trim_start_matches('+').parse().ok()? };
                    rule.by_day.push((nth, weekday(code)?));
                }
            }
            "BYMONTHDAY" => rule.by_month_day = val.split(',').filter_map(|d| d.trim().parse().ok()).collect(),
            _ => {}
        }
    }
    matches!(rule.freq.as_str(), "DAILY" | "WEEKLY" | "MONTHLY" | "YEARLY").then_some(rule)
}

/// The dates a rule gives from `first` on (in order), at most `MAX_OCCURRENCES`
/// and none after `last` (the window's end, or UNTIL).
fn dates(rule: &Rule, first: Date, last: Date) -> Vec<Date> {
    let mut out = Vec::new();
    let mut period = 0i64;
    let push = |out: &mut Vec<Date>, d: Date| {
        if d >= first && d <= last && out.last().is_none_or(|l| *l < d) {
            out.push(d);
        }
    };
    loop {
        let mut candidates: Vec<Date> = match rule.freq.as_str() {
            "DAILY" => first.checked_add(jiff::Span::new().days(period * rule.interval)).ok().into_iter().collect(),
            "WEEKLY" => {
                let monday = first.checked_sub(jiff::Span::new().days(i64::from(first.weekday().to_monday_zero_offset()))).ok();
                let Some(week) = monday.and_then(|m| m.checked_add(jiff::Span::new().weeks(period * rule.interval)).ok()) else { break };
                let days: Vec<Weekday> = if rule.by_day.is_empty() { vec![first.weekday()] } else { rule.by_day.iter().map(|(_, w)| *w).collect() };
                days.iter().filter_map(|w| week.checked_add(jiff::Span::new().days(i64::from(w.to_monday_zero_offset()))).ok()).collect()
            }
            "MONTHLY" => {
                let Some(month) = first.first_of_month().checked_add(jiff::Span::new().months(period * rule.interval)).ok() else { break };
                if !rule.by_day.is_empty() {
                    rule.by_day.iter().flat_map(|(nth, w)| month_weekdays(month, *nth, *w)).collect()
                } else {
                    let days = if rule.by_month_day.is_empty() { vec![first.day()] } else { rule.by_month_day.clone() };
                    days.iter().filter_map(|d| month_day(month, *d)).collect()
                }
            }
            _ => {
                // YEARLY: the same day of the same month (a 29 February only in leap years).
                let year = first.year() as i64 + period * rule.interval;
                i16::try_from(year).ok().and_then(|y| Date::new(y, first.month(), first.day()).ok()).into_iter().collect()
            }
        };
        candidates.sort();
        let period_start = candidates.first().copied();
        for d in candidates {
            push(&mut out, d);
            if out.len() >= rule.count.unwrap_or(MAX_OCCURRENCES).min(MAX_OCCURRENCES) {
                return out;
            }
        }
        period += 1;
        // Past the end (or a period with no date at all, far along): done.
        if period_start.is_some_and(|d| d > last) || period > 50_000 {
            break;
        }
    }
    out
}

/// The `nth` `weekday` of `month` (0: every one; negative: from the end).
fn month_weekdays(month: Date, nth: i8, weekday: Weekday) -> Vec<Date> {
    let all: Vec<Date> = (0..month.days_in_month())
        .filter_map(|i| month.checked_add(jiff::Span::new().days(i64::from(i))).ok())
        .filter(|d| d.weekday() == weekday)
        .collect();
    match nth {
        0 => all,
        n if n > 0 => all.get(n as usize - 1).copied().into_iter().collect(),
        n => all.len().checked_sub(n.unsigned_abs() as usize).and_then(|i| all.get(i)).copied().into_iter().collect(),
    }
}

fn month_day(month: Date, day: i8) -> Option<Date> {
    let days = month.days_in_month();
    let day = if day < 0 { days + 1 + day } else { day };
    (1..=days).contains(&day).then(|| Date::new(month.year(), month.month(), day).ok()).flatten()
}

/// A call's address in any of `texts` (Meet, Zoom, Teams, Jitsi, Webex, Whereby).
pub fn join_url(texts: &[&str]) -> Option<String> {
    for text in texts {
        for word in text.split(|c: char| c.is_whitespace() || matches!(c, '<' | '>' | '"' | '(' | ')')) {
            let word = word.trim_end_matches(['.', ',', ';']);
            if word.starts_with("https://")
                && crate::day::meetings::call_service("", "", Some(word)).is_some()
            {
                return Some(word.to_owned());
            }
        }
    }
    None
}

/// The events of `ics` that overlap `[from_millis, until_millis)`, repeating
/// ones expanded, cancelled ones left out, soonest first. `local` is the
/// user's zone (floating times and all-day dates).
pub fn events(ics: &str, from_millis: i64, until_millis: i64, local: &TimeZone) -> Vec<Event> {
    struct Raw {
        event: Event,
        start: Option<When>,
        end: Option<When>,
        duration: Option<i64>,
        rule: Option<Rule>,
        exdates: Vec<When>,
        recurrence_id: Option<When>,
        cancelled: bool,
    }
    let mut raws: Vec<Raw> = Vec::new();
    let mut current: Option<Raw> = None;
    let mut depth = 0;
    for line in unfold(ics) {
        let Some(p) = property(&line) else { continue };
        match (p.name.as_str(), p.value.trim().to_ascii_uppercase().as_str()) {
            ("BEGIN", "VEVENT") => {
                current = Some(Raw { event: Event::default(), start: None, end: None, duration: None, rule: None, exdates: Vec::new(), recurrence_id: None, cancelled: false });
                depth = 0;
                continue;
            }
            ("END", "VEVENT") => {
                if let Some(raw) = current.take() {
                    raws.push(raw);
                }
                continue;
            }
            // An alarm inside an event has its own DESCRIPTION and TRIGGER: not the event's.
            ("BEGIN", _) if current.is_some() => depth += 1,
            ("END", _) if current.is_some() => depth -= 1,
            _ => {}
        }
        let Some(raw) = current.as_mut() else { continue };
        if depth > 0 {
            continue;
        }
        let cn = || p.params.get("CN").cloned().unwrap_or_else(|| p.value.trim().trim_start_matches("mailto:").trim_start_matches("MAILTO:").to_owned());
        match p.name.as_str() {
            "UID" => raw.event.uid = p.value.trim().to_owned(),
            "SUMMARY" => raw.event.title = text(&p.value),
            "DESCRIPTION" => raw.event.description = text(&p.value),
            "LOCATION" => raw.event.location = text(&p.value),
            "URL" => raw.event.join_url = join_url(&[p.value.trim()]),
            "ORGANIZER" => raw.event.organizer = cn(),
            "ATTENDEE" => raw.event.attendees.push(cn()),
            "DTSTART" => raw.start = when(&p),
            "DTEND" => raw.end = when(&p),
            "DURATION" => raw.duration = duration_millis(&p.value),
            "RRULE" => raw.rule = rule(&p.value),
            "EXDATE" => raw.exdates.extend(p.value.split(',').filter_map(|v| when(&Property { name: "EXDATE".into(), params: p.params.clone(), value: v.to_owned() }))),
            "RECURRENCE-ID" => raw.recurrence_id = when(&p),
            "STATUS" => raw.cancelled = p.value.trim().eq_ignore_ascii_case("CANCELLED"),
            _ => {}
        }
    }
    // Occurrences moved or cancelled by their own VEVENT (same UID, RECURRENCE-ID).
    let mut overridden: HashMap<String, Vec<i64>> = HashMap::new();
    for raw in raws.iter().filter(|r| r.recurrence_id.is_some()) {
        if let Some(at) = raw.recurrence_id.as_ref().and_then(|w| w.millis(local)) {
            overridden.entry(raw.event.uid.clone()).or_default().push(at);
        }
    }
    let mut out = Vec::new();
    for raw in &raws {
        let Some(start) = &raw.start else { continue };
        let Some(first_millis) = start.millis(local) else { continue };
        let all_day = matches!(start, When::Date(_));
        let length = match (&raw.end, raw.duration) {
            (Some(end), _) => end.millis(local).map(|e| (e - first_millis).max(0)),
            (None, Some(d)) => Some(d.max(0)),
            (None, None) if all_day => Some(86_400_000),
            _ => Some(0),
        }
        .unwrap_or(0);
        let found = |at: i64, out: &mut Vec<Event>| {
            if !raw.cancelled && at < until_millis && at + length.max(1) > from_millis {
                let mut event = raw.event.clone();
                event.start_millis = at;
                event.end_millis = at + length;
                event.all_day = all_day;
                if event.join_url.is_none() {
                    event.join_url = join_url(&[&event.location, &event.description]);
                }
                out.push(event);
            }
        };
        match (&raw.rule, raw.recurrence_id.is_some()) {
            (Some(rule), false) => {
                let window_end = jiff::Timestamp::from_millisecond(until_millis).ok().map(|t| t.to_zoned(local.clone()).date());
                let until = rule.until.as_ref().map(When::date);
                let last = match (window_end, until) {
                    (Some(w), Some(u)) => w.min(u),
                    (Some(w), None) => w,
                    (None, Some(u)) => u,
                    (None, None) => continue,
                };
                let until_millis_rule = rule.until.as_ref().and_then(|u| u.millis(local));
                let excluded: Vec<i64> = raw.exdates.iter().filter_map(|w| w.millis(local)).collect();
                let moved = overridden.get(&raw.event.uid);
                for date in dates(rule, start.date(), last) {
                    let Some(at) = start.with_date(date).millis(local) else { continue };
                    if until_millis_rule.is_some_and(|u| at > u) || excluded.contains(&at) || moved.is_some_and(|m| m.contains(&at)) {
                        continue;
                    }
                    found(at, &mut out);
                }
            }
            _ => found(first_millis, &mut out),
        }
    }
    out.sort_by_key(|e| (e.start_millis, e.title.clone()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> i64 {
        crate::ids::parse_time(text, 0).unwrap()
    }

    const ICS: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Test//EN\r\n\
BEGIN:VTIMEZONE\r\nTZID:Europe/Berlin\r\nEND:VTIMEZONE\r\n\
BEGIN:VEVENT\r\nUID:standup@acme\r\nSUMMARY:Atlas stand-up\r\nDTSTART;TZID=Europe/Berlin:20261019T093000\r\nDTEND;TZID=Europe/Berlin:20261019T094500\r\n\
RRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;UNTIL=20261231T235959Z\r\nEXDATE;TZID=Europe/Berlin:20261028T093000\r\n\
LOCATION:https://meet.google.com/abc-defg-hij\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:standup@acme\r\nRECURRENCE-ID;TZID=Europe/Berlin:20261030T093000\r\nSUMMARY:Atlas stand-up (moved)\r\n\
DTSTART;TZID=Europe/Berlin:20261030T110000\r\nDTEND;TZID=Europe/Berlin:20261030T111500\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:review@acme\r\nSUMMARY:Q3 review with Sam\\, Priya\r\nDTSTART:20261027T130000Z\r\nDURATION:PT1H\r\n\
ORGANIZER;CN=Sam Lee:mailto:sam@acme.example\r\nATTENDEE;CN=\"Priya N\";ROLE=REQ-PARTICIPANT:mailto:priya@acme.example\r\n\
DESCRIPTION:Agenda:\\n1. numbers\\nJoin: https://acme.zoom.us/j/8123456789?pwd=x\r\n\
BEGIN:VALARM\r\nTRIGGER:-PT10M\r\nDESCRIPTION:Reminder\r\nEND:VALARM\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:offsite\r\nSUMMARY:Offsite\r\nDTSTART;VALUE=DATE:20261029\r\nDTEND;VALUE=DATE:20261031\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:gone\r\nSUMMARY:Cancelled sync\r\nSTATUS:CANCELLED\r\nDTSTART:20261027T150000Z\r\nDTEND:20261027T153000Z\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:monthly\r\nSUMMARY:Steering\r\nDTSTART:20260904T080000Z\r\nDURATION:PT30M\r\n\
 \r\nRRULE:FREQ=MONTHLY;BYDAY=-1FR;COUNT=3\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

    #[test]
    fn a_calendar_reads_with_its_zones_repeats_exceptions_and_people() {
        let utc_zone = TimeZone::UTC;
        let week = events(ICS, utc("2026-10-26"), utc("2026-11-02"), &utc_zone);
        let titles: Vec<&str> = week.iter().map(|e| e.title.as_str()).collect();
        // Berlin leaves summer time on 25 October: 09:30 there is 08:30 UTC from then on.
        assert_eq!(week[0].title, "Atlas stand-up");
        assert_eq!(week[0].start_millis, utc("2026-10-26T08:30:00Z"));
        assert_eq!(week[0].end_millis - week[0].start_millis, 15 * 60_000);
        assert_eq!(week[0].join_url.as_deref(), Some("https://meet.google.com/abc-defg-hij"));
        assert!(!titles.contains(&"Cancelled sync"));
        // Wednesday's stand-up is excluded, Friday's moved to 11:00.
        let standups: Vec<i64> = week.iter().filter(|e| e.uid == "standup@acme").map(|e| e.start_millis).collect();
        assert_eq!(standups, [utc("2026-10-26T08:30:00Z"), utc("2026-10-30T10:00:00Z")], "{titles:?}");
        assert_eq!(week.iter().find(|e| e.start_millis == utc("2026-10-30T10:00:00Z")).unwrap().title, "Atlas stand-up (moved)");
        let review = week.iter().find(|e| e.uid == "review@acme").unwrap();
        assert_eq!(review.title, "Q3 review with Sam, Priya");
        assert_eq!((review.start_millis, review.end_millis), (utc("2026-10-27T13:00:00Z"), utc("2026-10-27T14:00:00Z")));
        assert_eq!((review.organizer.as_str(), review.attendees.as_slice()), ("Sam Lee", &["Priya N".to_owned()][..]));
        assert!(review.description.starts_with("Agenda:\n1. numbers"), "the alarm's description is not the event's: {:?}", review.description);
        assert_eq!(review.join_url.as_deref(), Some("https://acme.zoom.us/j/8123456789?pwd=x"));
        let offsite = week.iter().find(|e| e.uid == "offsite").unwrap();
        assert!(offsite.all_day);
        assert_eq!((offsite.start_millis, offsite.end_millis), (utc("2026-10-29"), utc("2026-10-31")));
        // Before summer time ended, the same 09:30 was 07:30 UTC.
        let october = events(ICS, utc("2026-10-19"), utc("2026-10-20"), &utc_zone);
        assert_eq!(october[0].start_millis, utc("2026-10-19T07:30:00Z"));
        // The last Friday of the month, three times.
        let steering: Vec<i64> = events(ICS, utc("2026-01-01"), utc("2027-06-01"), &utc_zone).iter().filter(|e| e.uid == "monthly").map(|e| e.start_millis).collect();
        assert_eq!(steering, [utc("2026-09-25T08:00:00Z"), utc("2026-10-30T08:00:00Z"), utc("2026-11-27T08:00:00Z")]);
    }

    #[test]
    fn broken_and_hostile_input_gives_what_it_can_and_never_runs_away() {
        assert!(events("", 0, i64::MAX / 2, &TimeZone::UTC).is_empty());
        assert!(events("not a calendar at all\n\u{0}\u{7}", 0, i64::MAX / 2, &TimeZone::UTC).is_empty());
        let endless = "BEGIN:VEVENT\nUID:x\nSUMMARY:Every day forever\nDTSTART:20200101T090000Z\nRRULE:FREQ=DAILY\nEND:VEVENT\n";
        let all = events(endless, 0, utc("2100-01-01"), &TimeZone::UTC);
        assert_eq!(all.len(), MAX_OCCURRENCES, "a rule with no end stops at the cap");
        let broken = "BEGIN:VEVENT\nSUMMARY:No start\nEND:VEVENT\nBEGIN:VEVENT\nSUMMARY:Bad rule\nDTSTART:20261027T090000Z\nRRULE:FREQ=SECONDLY\nEND:VEVENT\n";
        let got = events(broken, utc("2026-10-27"), utc("2026-10-28"), &TimeZone::UTC);
        assert_eq!(got.iter().map(|e| e.title.as_str()).collect::<Vec<_>>(), ["Bad rule"], "an unknown rule is one occurrence");
        assert_eq!(duration_millis("P1DT2H"), Some(26 * 3_600_000));
        assert_eq!(duration_millis("-PT15M"), Some(-15 * 60_000));
        assert_eq!(duration_millis("1 hour"), None);
    }
}
