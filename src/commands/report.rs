//! `cowork report`: time per project — a day, a week, or any span of days —
//! as a table to read (text), to paste (Markdown) or to invoice from (CSV:
//! one row per stretch of work with its project and why, whose seconds add
//! up to the totals).

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Context as _;

use crate::config::Paths;
use crate::day::ledger::{Ledger, hms, next_midnight, week_start};
use crate::day::projects::ProjectRules;
use crate::ids::{format_clock, local_date, local_weekday_name};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Text,
    Md,
    Csv,
}

/// Which days a report covers.
#[derive(Clone, Debug, Default)]
pub struct Span {
    /// The week holding this date (or this week).
    pub week: bool,
    /// From this date (YYYY-MM-DD; default today, or the week's Monday).
    pub from: Option<String>,
    /// Until this date, included.
    pub until: Option<String>,
}

impl Span {
    /// Local midnights: the first day, and the day after the last.
    pub fn bounds(&self, now_millis: i64) -> anyhow::Result<(i64, i64)> {
        let from = match &self.from {
            Some(date) => crate::ids::local_midnight_of(date).map_err(anyhow::Error::msg)?,
            None => crate::ids::local_day_start_millis(now_millis),
        };
        let from = if self.week { week_start(from) } else { from };
        let until = match &self.until {
            Some(date) => next_midnight(crate::ids::local_midnight_of(date).map_err(anyhow::Error::msg)?),
            None if self.week => (0..7).fold(from, |day, _| next_midnight(day)),
            None => next_midnight(from),
        };
        anyhow::ensure!(until > from, "the report ends before it starts");
        anyhow::ensure!(until - from <= 400 * 86_400_000, "a report covers at most 400 days");
        Ok((from, until))
    }
}

pub fn report(paths: &Paths, span: &Span, format: ReportFormat, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let now = crate::ids::now_millis();
    let (from, until) = span.bounds(now)?;
    let rules_text = crate::workers::read_settings(paths).0.projects;
    let rules = ProjectRules::parse(&rules_text).map_err(|err| anyhow::anyhow!("the project rules (projects.rules): {err}"))?;
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let ledger = crate::capture::db::ledger_between(&conn, &rules, from, until, now).context("reading the sessions")?;
    let text = match format {
        ReportFormat::Csv => csv(&ledger),
        ReportFormat::Md => markdown(&ledger, from, until),
        ReportFormat::Text => text(&ledger, from, until),
    };
    out.write_all(text.as_bytes())?;
    Ok(())
}


/// Projects by time over the whole ledger, most first; no project last.
fn projects_by_time(ledger: &Ledger) -> Vec<(String, i64)> {
    let mut projects: Vec<(String, i64)> = ledger.totals().into_iter().collect();
    projects.sort_by_key(|(name, seconds)| (name == crate::day::ledger::UNATTRIBUTED, -seconds, name.clone()));
    projects
}

fn title(from: i64, until: i64) -> String {
    let last = until - 1;
    if next_midnight(from) == until { format!("{} {}", local_weekday_name(from), local_date(from)) } else { format!("{} to {}", local_date(from), local_date(last)) }
}

fn text(ledger: &Ledger, from: i64, until: i64) -> String {
    let mut out = format!("Time by project, {} ({} tracked)\n", title(from, until), hms(ledger.seconds()));
    for (project, seconds) in projects_by_time(ledger) {
        let _ = writeln!(out, "  {:>9}  {project}", hms(seconds));
    }
    if ledger.days.len() > 1 {
        for day in ledger.days.iter().filter(|d| d.seconds() > 0) {
            let _ = writeln!(out, "\n{} {} ({})", local_weekday_name(day.start_millis), local_date(day.start_millis), hms(day.seconds()));
            let mut totals: Vec<(&String, &i64)> = day.totals.iter().collect();
            totals.sort_by_key(|(name, seconds)| (name.as_str() == crate::day::ledger::UNATTRIBUTED, -**seconds));
            for (project, seconds) in totals {
                let _ = writeln!(out, "  {:>9}  {project}", hms(*seconds));
            }
        }
    }
    out
}

/// Markdown: a table of projects by day with totals, then each day's stretches per project.
fn markdown(ledger: &Ledger, from: i64, until: i64) -> String {
    let days: Vec<_> = ledger.days.iter().filter(|d| d.seconds() > 0).collect();
    let mut out = format!("# Time by project, {}\n\n| Project |", title(from, until));
    for day in &days {
        let _ = write!(out, " {} {} |", local_weekday_name(day.start_millis), &local_date(day.start_millis)[5..]);
    }
    out.push_str(" Total |\n|---|");
    out.push_str(&"---:|".repeat(days.len() + 1));
    out.push('\n');
    for (project, seconds) in projects_by_time(ledger) {
        let _ = write!(out, "| {} |", cell(&project));
        for day in &days {
            let _ = write!(out, " {} |", day.totals.get(&project).map(|s| hms(*s)).unwrap_or_default());
        }
        let _ = writeln!(out, " **{}** |", hms(seconds));
    }
    let _ = write!(out, "| **Total** |");
    for day in &days {
        let _ = write!(out, " **{}** |", hms(day.seconds()));
    }
    let _ = writeln!(out, " **{}** |", hms(ledger.seconds()));
    for day in &days {
        let _ = writeln!(out, "\n## {} {}\n", local_weekday_name(day.start_millis), local_date(day.start_millis));
        let mut totals: Vec<(&String, &i64)> = day.totals.iter().collect();
        totals.sort_by_key(|(name, seconds)| (name.as_str() == crate::day::ledger::UNATTRIBUTED, -**seconds));
        for (project, seconds) in totals {
            let (project, seconds) = (project.as_str(), *seconds);
            let _ = writeln!(out, "### {} ({})\n", cell(project), hms(seconds));
            for entry in day.entries.iter().filter(|e| e.project() == project) {
                let _ = writeln!(
                    out,
                    "- {}–{} ({}) {}: {} — {}",
                    format_clock(entry.start_millis),
                    format_clock(entry.end_millis),
                    hms(entry.seconds),
                    cell(&entry.app),
                    cell(&entry.title),
                    entry.attribution.why.describe()
                );
            }
            out.push('\n');
        }
    }
    out
}

/// Markdown cell text: no pipes or line breaks.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// CSV (RFC 4180): one row per stretch of one session within one day.
fn csv(ledger: &Ledger) -> String {
    let mut out = String::from("date,project,start,end,seconds,duration,app,title,url,session_id,why\r\n");
    for day in &ledger.days {
        for entry in &day.entries {
            let fields = [
                local_date(entry.start_millis),
                entry.project().to_owned(),
                crate::ids::rfc3339(entry.start_millis),
                crate::ids::rfc3339(entry.end_millis),
                entry.seconds.to_string(),
                hms(entry.seconds),
                entry.app.clone(),
                entry.title.clone(),
                entry.url.clone().unwrap_or_default(),
                entry.session_id.to_string(),
                entry.attribution.why.describe(),
            ];
            out.push_str(&fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(","));
            out.push_str("\r\n");
        }
    }
    out
}

fn csv_field(text: &str) -> String {
    // A leading =, +, -, @, tab or carriage return would be a formula to a spreadsheet: a title is data.
    let text = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{text}") } else { text.to_owned() };
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text }
}

/// Writes the report to stdout (a reader gone away is main's to judge, as for every command).
pub fn print(paths: &Paths, span: &Span, format: ReportFormat) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    report(paths, span, format, &mut stdout)?;
    Ok(stdout.flush()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_and_formulas_defused() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a, \"b\""), "\"a, \"\"b\"\"\"");
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("-rf"), "'-rf");
    }

    #[test]
    fn a_week_runs_monday_to_sunday() {
        let span = Span { week: true, from: Some("2026-11-26".into()), until: None };
        let (from, until) = span.bounds(0).unwrap();
        assert_eq!((local_date(from), local_date(until - 1)), ("2026-11-23".to_owned(), "2026-11-29".to_owned()));
        let day = Span { week: false, from: Some("2026-11-26".into()), until: None }.bounds(0).unwrap();
        assert_eq!(local_date(day.0), "2026-11-26");
        assert_eq!(next_midnight(day.0), day.1);
        assert!(Span { week: false, from: Some("2026-02-30".into()), until: None }.bounds(0).is_err());
        assert!(Span { week: false, from: Some("2026-11-26".into()), until: Some("2026-11-20".into()) }.bounds(0).is_err());
    }
}
