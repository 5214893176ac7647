//! When a scheduled flow fires: cron-style (`0 9 * * 1-5`) or "every N
//! minutes" (`every 15m`, `every 2h`), always in local time, through the C
//! library's time zone database so daylight-saving changes fall where the
//! user's clock says (`mktime`/`localtime_r`). Pure: time comes in as
//! arguments. `Schedule::due` turns any number of missed times (a suspend, a
//! clock jump) into one run for the latest, with how many it stands for.

use std::fmt;

/// A parsed schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Every `minutes`, counted from local midnight (every 15m: :00, :15, :30, :45).
    Every { minutes: u32 },
    Cron(Cron),
}

/// The five cron fields as sets (bit n set: value n allowed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    days_of_week: u8,
    /// Both day fields were restricted: a day matches either (Vixie cron).
    either_day: bool,
    text: String,
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Every { minutes } if minutes % 60 == 0 => write!(f, "every {}h", minutes / 60),
            Schedule::Every { minutes } => write!(f, "every {minutes}m"),
            Schedule::Cron(cron) => f.write_str(&cron.text),
        }
    }
}

const DAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const MONTH_NAMES: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

impl Schedule {
    /// Reads `every 15m`, `every 2h`, `every 1 minute`, `@hourly`, `@daily`,
    /// `@weekly`, `@weekdays` or five cron fields (numbers, `*`, ranges, steps,
    /// lists, day and month names).
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let text = text.trim().to_ascii_lowercase();
        if let Some(rest) = text.strip_prefix("every") {
            return parse_every(rest.trim()).map(|minutes| Schedule::Every { minutes });
        }
        let spelled = match text.as_str() {
            "@hourly" => "0 * * * *",
            "@daily" | "@midnight" => "0 0 * * *",
            "@weekly" => "0 0 * * 0",
            "@weekdays" => "0 9 * * 1-5",
            "@monthly" => "0 0 1 * *",
            other => other,
        };
        let fields: Vec<&str> = spelled.split_whitespace().collect();
        let [minute, hour, dom, month, dow] = fields[..] else {
            return Err(format!("\"{text}\" is neither \"every N minutes\" nor five cron fields (minute hour day month weekday)"));
        };
        let minutes = field(minute, 0, 59, &[], "minute")?;
        let hours = field(hour, 0, 23, &[], "hour")? as u32;
        let days_of_month = field(dom, 1, 31, &[], "day of month")? as u32;
        let months = field(month, 1, 12, &MONTH_NAMES, "month")? as u16;
        // 7 is Sunday too.
        let dow_bits = field(dow, 0, 7, &DAY_NAMES, "weekday")?;
        let days_of_week = ((dow_bits | (dow_bits >> 7)) & 0x7f) as u8;
        Ok(Schedule::Cron(Cron {
            minutes,
            hours,
            days_of_month,
            months,
            days_of_week,
            either_day: dom != "*" && dow != "*",
            text: spelled.to_owned(),
        }))
    }

    /// The first fire time strictly after `after_millis` (within five years).
    pub fn next_after(&self, after_millis: i64) -> Option<i64> {
        match self {
            Schedule::Every { minutes } => Some(next_every(*minutes, after_millis)),
            Schedule::Cron(cron) => cron.next_after(after_millis),
        }
    }

    /// What is due at `now_millis` for a flow whose next fire time was
    /// `next_millis`: nothing yet, or one run (for the latest time due) and how
    /// many earlier times it stands for. After a suspend or a clock jump that
    /// skipped several times, that is still one run.
    pub fn due(&self, next_millis: i64, now_millis: i64) -> Option<Due> {
        if now_millis < next_millis {
            return None;
        }
        let mut latest = next_millis;
        let mut missed = 0u32;
        while let Some(after) = self.next_after(latest) {
            if after > now_millis || missed >= 10_000 {
                break;
            }
            latest = after;
            missed += 1;
        }
        Some(Due { fire_at_millis: latest, missed, next_millis: self.next_after(now_millis.max(latest)) })
    }
}

/// One scheduled run to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    /// The scheduled time this run is for (the latest one due).
    pub fire_at_millis: i64,
    /// Earlier scheduled times that passed while cowork was not running or the machine slept.
    pub missed: u32,
    /// The next time after now.
    pub next_millis: Option<i64>,
}

fn parse_every(rest: &str) -> Result<u32, String> {
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let unit = rest[digits.len()..].trim();
    let n: u32 = digits.parse().map_err(|_| format!("\"every {rest}\" needs a number, as in \"every 15m\""))?;
    let minutes = match unit {
        "m" | "min" | "mins" | "minute" | "minutes" => n,
        "h" | "hour" | "hours" => n.saturating_mul(60),
        "d" | "day" | "days" => n.saturating_mul(1440),
        _ => return Err(format!("\"every {rest}\": the unit is m, h or d")),
    };
    if minutes == 0 || minutes > 7 * 1440 {
        return Err(format!("\"every {rest}\": between 1 minute and 7 days"));
    }
    Ok(minutes)
}

/// One cron field as a bit set over `lo..=hi`.
fn field(text: &str, lo: u32, hi: u32, names: &[&str], what: &str) -> Result<u64, String> {
    let value = |s: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| *n == s) {
            // Month names count from 1, day names from 0.
            return Ok(i as u32 + if names.len() == 12 { 1 } else { 0 });
        }
        let n: u32 = s.parse().map_err(|_| format!("the {what} field has \"{s}\", not a number"))?;
        if n < lo || n > hi {
            return Err(format!("the {what} field has {n}, outside {lo}-{hi}"));
        }
        Ok(n)
    };
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step.parse().map_err(|_| format!("the {what} field's step \"{step}\" is not a number"))?;
                if step == 0 {
                    return Err(format!("the {what} field has a step of 0"));
                }
                (range, step)
            }
            None => (part, 1),
        };
        let (start, end) = match range {
            "*" => (lo, hi),
            _ => match range.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                // "5/15": from 5 to the end.
                None if step > 1 => (value(range)?, hi),
                None => {
                    let v = value(range)?;
                    (v, v)
                }
            },
        };
        if start > end {
            return Err(format!("the {what} field's range {start}-{end} runs backwards"));
        }
        let mut v = start;
        while v <= end {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

/// Local broken-down time of a Unix second.
fn local_tm(secs: i64) -> libc::tm {
    let t = secs as libc::time_t;
    // SAFETY: localtime_r only writes into the tm we pass; a zeroed tm is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&t, &mut tm) };
    tm
}

/// The Unix second of a local date and time (mktime normalises overflowing
/// fields; a time inside a daylight-saving gap comes out just after it).
fn local_secs(year: i32, month0: i32, mday: i32, hour: i32, minute: i32) -> i64 {
    // SAFETY: a zeroed tm is a valid value; mktime reads and normalises it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = year - 1900;
    tm.tm_mon = month0;
    tm.tm_mday = mday;
    tm.tm_hour = hour;
    tm.tm_min = minute;
    tm.tm_isdst = -1;
    unsafe { libc::mktime(&mut tm) as i64 }
}

fn next_every(minutes: u32, after_millis: i64) -> i64 {
    let step = minutes as i64 * 60_000;
    let mut day = crate::ids::local_day_start_millis(after_millis);
    loop {
        let since = after_millis - day;
        let candidate = day + (since.div_euclid(step) + 1) * step;
        let next_day = crate::ids::local_day_start_millis(day + 36 * 3_600_000);
        // Counting restarts at each local midnight.
        if candidate < next_day {
            return candidate;
        }
        if next_day > after_millis {
            return next_day;
        }
        day = next_day;
    }
}

impl Cron {
    fn next_after(&self, after_millis: i64) -> Option<i64> {
        let start = local_tm(after_millis.div_euclid(1000));
        for day in 0..(5 * 366) {
            // Noon of the day, so the date is right whatever daylight saving does.
            let noon = local_tm(local_secs(start.tm_year + 1900, start.tm_mon, start.tm_mday + day, 12, 0));
            if !self.day_matches(&noon) {
                continue;
            }
            for hour in (0..24).filter(|h| self.hours & (1 << h) != 0) {
                for minute in (0..60).filter(|m| self.minutes & (1u64 << m) != 0) {
                    let at = local_secs(noon.tm_year + 1900, noon.tm_mon, noon.tm_mday, hour, minute) * 1000;
                    if at > after_millis {
                        return Some(at);
                    }
                }
            }
        }
        None
    }

    fn day_matches(&self, tm: &libc::tm) -> bool {
        if self.months & (1 << (tm.tm_mon + 1)) == 0 {
            return false;
        }
        let dom = self.days_of_month & (1 << tm.tm_mday) != 0;
        let dow = self.days_of_week & (1 << tm.tm_wday) != 0;
        if self.either_day { dom || dow } else { dom && dow }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::local_day_start_millis;

    const MIN: i64 = 60_000;
    const HOUR: i64 = 3_600_000;

    /// A local midnight some days ago (whatever the machine's zone is).
    fn midnight() -> i64 {
        local_day_start_millis(1_795_000_000_000)
    }

    #[test]
    fn every_n_minutes_counts_from_local_midnight_and_restarts_there() {
        let day = midnight();
        let every = Schedule::parse("every 15m").unwrap();
        assert_eq!(every.next_after(day), Some(day + 15 * MIN));
        assert_eq!(every.next_after(day + 15 * MIN), Some(day + 30 * MIN), "strictly after");
        assert_eq!(every.next_after(day + 16 * MIN + 30_000), Some(day + 30 * MIN));
        // 7 hours does not divide a day: the last one is 21:00, then midnight.
        let seven = Schedule::parse("every 7h").unwrap();
        assert_eq!(seven.next_after(day + 21 * HOUR), local_day_start_millis(day + 30 * HOUR).into());
        assert_eq!(Schedule::parse("every 1 minute").unwrap(), Schedule::Every { minutes: 1 });
        assert_eq!(every.to_string(), "every 15m");
        assert_eq!(seven.to_string(), "every 7h");
    }

    #[test]
    fn cron_fields_read_ranges_steps_lists_and_names() {
        let day = midnight();
        let at_nine = Schedule::parse("0 9 * * *").unwrap();
        let first = at_nine.next_after(day).unwrap();
        assert_eq!(crate::ids::format_clock(first), "09:00");
        assert_eq!(at_nine.next_after(first), at_nine.next_after(first + MIN), "the next day's");
        assert!(at_nine.next_after(first).unwrap() - first >= 23 * HOUR);

        let quarter = Schedule::parse("*/15 8-9 * * *").unwrap();
        let times: Vec<String> = std::iter::successors(quarter.next_after(day), |t| quarter.next_after(*t)).take(9).map(crate::ids::format_clock).collect();
        assert_eq!(times, ["08:00", "08:15", "08:30", "08:45", "09:00", "09:15", "09:30", "09:45", "08:00"]);

        // Weekdays only: five fires in any seven days, none on a weekend.
        let weekdays = Schedule::parse("30 9 * * mon-fri").unwrap();
        let week: Vec<i64> = std::iter::successors(weekdays.next_after(day), |t| weekdays.next_after(*t)).take_while(|t| *t < day + 7 * 24 * HOUR).collect();
        assert_eq!(week.len(), 5);
        assert!(week.iter().all(|t| { let wd = local_tm(t / 1000).tm_wday; (1..=5).contains(&wd) }));
        assert_eq!(Schedule::parse("0 9 * * 1-5").unwrap().next_after(day).map(crate::ids::format_clock).as_deref(), Some("09:00"));
        // Sunday is 0 and 7.
        assert_eq!(Schedule::parse("0 0 * * 7").unwrap(), Schedule::parse("0 0 * * sun").unwrap().with_text("0 0 * * 7"));
        // Both day fields: either matches (the 1st, and every Monday).
        let either = Schedule::parse("0 0 1 * mon").unwrap();
        let days: Vec<i64> = std::iter::successors(either.next_after(day), |t| either.next_after(*t)).take_while(|t| *t < day + 62 * 24 * HOUR).collect();
        assert!(days.len() >= 9, "about eight Mondays and two firsts: {}", days.len());
        assert_eq!(Schedule::parse("@hourly").unwrap().next_after(day + 5 * MIN), Some(day + HOUR));
    }

    #[test]
    fn bad_schedules_say_what_is_wrong() {
        for (text, says) in [
            ("every", "needs a number"),
            ("every 0m", "between 1 minute"),
            ("every 5 fortnights", "the unit"),
            ("0 9 * *", "five cron fields"),
            ("61 * * * *", "outside 0-59"),
            ("0 25 * * *", "the hour field"),
            ("0 9 * * funday", "not a number"),
            ("*/0 * * * *", "step of 0"),
            ("0 9-5 * * *", "runs backwards"),
        ] {
            let err = Schedule::parse(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
        // February 30th never comes: no next time, not a hang.
        assert_eq!(Schedule::parse("0 0 30 2 *").unwrap().next_after(midnight()), None);
    }

    #[test]
    fn after_a_sleep_that_skipped_many_times_one_run_is_due_for_the_latest() {
        let day = midnight();
        let every = Schedule::parse("every 1m").unwrap();
        let next = day + 10 * MIN;
        assert_eq!(every.due(next, next - 1), None, "not yet");
        assert_eq!(every.due(next, next + 20_000), Some(Due { fire_at_millis: next, missed: 0, next_millis: Some(next + MIN) }), "on time");
        // Asleep for three hours: one run, for the latest time, standing for 180 missed.
        let woke = next + 3 * HOUR + 30_000;
        let due = every.due(next, woke).unwrap();
        assert_eq!((due.fire_at_millis, due.missed, due.next_millis), (next + 3 * HOUR, 180, Some(next + 3 * HOUR + MIN)));
    }

    impl Schedule {
        fn with_text(self, text: &str) -> Schedule {
            match self {
                Schedule::Cron(cron) => Schedule::Cron(Cron { text: text.into(), ..cron }),
                other => other,
            }
        }
    }
}
