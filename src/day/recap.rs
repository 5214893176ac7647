//! The daily and weekly recap (issue 58), pure: what a day or a week's
//! ledger says (`facts`: time per project, and the windows that took the
//! most of it, numbered as sources), the prompt that asks a model to say
//! what was done per project and what was left open (`prompt`), and the
//! model's answer read back strictly (`read`): a line counts only when it
//! names a project of the period (or "Open") and cites sources of that
//! project; citations are checked against the sources, lines that cite
//! nothing or name a project the period does not have are dropped and
//! counted. A project the model said nothing usable about gets a line
//! cowork writes from its largest source, so every project is there and
//! every line is traceable. `render` gives the text kept in memory (each
//! line with its sessions, `(session N)`, which answers show as sources).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::day::cites::{cites, without_cites};
use crate::day::ledger::{Ledger, UNATTRIBUTED};

/// A recap covers a local day or a week (Monday to Sunday).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Period {
    Day,
    Week,
}

impl Period {
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
        }
    }

    /// The observation kind a recap of this period is kept as.
    pub fn kind(self) -> &'static str {
        match self {
            Period::Day => "recap_day",
            Period::Week => "recap_week",
        }
    }

    pub fn parse(text: &str) -> Option<Period> {
        match text {
            "day" => Some(Period::Day),
            "week" => Some(Period::Week),
            _ => None,
        }
    }

    /// At most this many sources go to the model: each is ~30 tokens to read,
    /// which a 1.5B on two cores does at ~40 a second (the recap's target is a minute).
    fn max_sources(self) -> usize {
        match self {
            Period::Day => 20,
            Period::Week => 32,
        }
    }
}

/// The local day, or the week (Monday to Monday), holding `at_millis`.
pub fn bounds(period: Period, at_millis: i64) -> (i64, i64) {
    use crate::day::ledger::{next_midnight, week_start};
    match period {
        Period::Day => {
            let start = crate::ids::local_day_start_millis(at_millis);
            (start, next_midnight(start))
        }
        Period::Week => {
            let start = week_start(at_millis);
            (start, (0..7).fold(start, |day, _| next_midnight(day)))
        }
    }
}

/// The name recap lines use for time no project claims.
pub const OTHER: &str = "Other";
/// What a line about something left open starts with.
pub const OPEN: &str = "Open";
/// The model writes about at most this many projects ...
const ASKED_PROJECTS: usize = 5;
/// ... each with at least this share of the period's time ...
const ASKED_SHARE_PERCENT: i64 = 5;
/// ... from at most this many of its sources.
const ASKED_SOURCES: usize = 3;
/// Windows shorter than this in all are not offered as sources.
const MIN_SOURCE_SECONDS: i64 = 60;
/// The longest line kept.
const MAX_LINE_CHARS: usize = 220;

/// One window (app and title), summed over the period, as the model sees it: `[n]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    pub n: usize,
    pub project: String,
    pub app: String,
    pub title: String,
    pub seconds: i64,
    pub first_millis: i64,
    /// Its sessions, longest first (a citation opens the first).
    pub session_ids: Vec<i64>,
}

/// What the period's ledger says, for the model and for checking what it wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    pub period: Period,
    pub start_millis: i64,
    pub end_millis: i64,
    /// Project (`OTHER` for no project) and seconds, most time first.
    pub projects: Vec<(String, i64)>,
    pub sources: Vec<Source>,
}

impl Facts {
    /// The period's sources, the most time first within each project, projects by time:
    /// each project gets a share of `max_sources` by its time (at least one).
    pub fn of(ledger: &Ledger, period: Period, start_millis: i64, end_millis: i64) -> Facts {
        // (project, app, title) → (seconds, first start, sessions with their seconds)
        type Key = (String, String, String);
        type Window = (i64, i64, BTreeMap<i64, i64>);
        let mut windows: BTreeMap<Key, Window> = BTreeMap::new();
        let mut totals: BTreeMap<String, i64> = BTreeMap::new();
        for day in &ledger.days {
            for entry in &day.entries {
                let project = if entry.project() == UNATTRIBUTED { OTHER.to_owned() } else { entry.project().to_owned() };
                *totals.entry(project.clone()).or_default() += entry.seconds;
                let window = windows.entry((project, entry.app.clone(), entry.title.trim().to_owned())).or_insert((0, entry.start_millis, BTreeMap::new()));
                window.0 += entry.seconds;
                window.1 = window.1.min(entry.start_millis);
                *window.2.entry(entry.session_id).or_default() += entry.seconds;
            }
        }
        let mut projects: Vec<(String, i64)> = totals.into_iter().filter(|(_, s)| *s >= MIN_SOURCE_SECONDS).collect();
        // Most time first; "Other" after every project.
        projects.sort_by_key(|(name, seconds)| (name == OTHER, std::cmp::Reverse(*seconds), name.clone()));
        let mut by_project: BTreeMap<&str, Vec<(&Key, &Window)>> = BTreeMap::new();
        for (key, window) in &windows {
            if window.0 >= MIN_SOURCE_SECONDS && !key.2.is_empty() {
                by_project.entry(key.0.as_str()).or_default().push((key, window));
            }
        }
        for list in by_project.values_mut() {
            list.sort_by_key(|(key, w)| (std::cmp::Reverse(w.0), w.1, key.2.clone()));
        }
        let total: i64 = projects.iter().map(|p| p.1).sum::<i64>().max(1);
        let budget = period.max_sources();
        let mut sources = Vec::new();
        for (project, seconds) in &projects {
            let share = ((budget as i64 * seconds) / total).max(1) as usize;
            let take = share.min(if project == OTHER { 4 } else { 6 });
            for (key, window) in by_project.get(project.as_str()).map(|l| l.as_slice()).unwrap_or_default().iter().take(take) {
                let mut sessions: Vec<(i64, i64)> = window.2.iter().map(|(id, s)| (*id, *s)).collect();
                sessions.sort_by_key(|(id, s)| (std::cmp::Reverse(*s), *id));
                sources.push(Source {
                    n: 0,
                    project: project.clone(),
                    app: key.1.clone(),
                    title: key.2.clone(),
                    seconds: window.0,
                    first_millis: window.1,
                    session_ids: sessions.into_iter().map(|(id, _)| id).collect(),
                });
            }
        }
        sources.truncate(budget.max(projects.len()));
        for (i, source) in sources.iter_mut().enumerate() {
            source.n = i + 1;
        }
        Facts { period, start_millis, end_millis, projects, sources }
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// The projects the model writes about: the period's largest, at most
    /// `ASKED_PROJECTS`, each with `ASKED_SHARE_PERCENT` of the time or more, not
    /// `OTHER`. The rest get cowork's own line: a small model reads and writes
    /// a few tokens a second, and the recap has a minute.
    pub fn asked(&self) -> Vec<&str> {
        let total = self.projects.iter().map(|p| p.1).sum::<i64>().max(1);
        self.projects
            .iter()
            .filter(|(p, seconds)| p != OTHER && seconds * 100 >= total * ASKED_SHARE_PERCENT)
            .take(ASKED_PROJECTS)
            .map(|(p, _)| p.as_str())
            .collect()
    }

    /// The sources the model reads: the asked projects' largest, `ASKED_SOURCES` each.
    pub fn asked_sources(&self) -> Vec<&Source> {
        let asked = self.asked();
        let mut taken: BTreeMap<&str, usize> = BTreeMap::new();
        self.sources
            .iter()
            .filter(|s| {
                let Some(project) = asked.iter().find(|p| **p == s.project) else { return false };
                let count = taken.entry(project).or_default();
                *count += 1;
                *count <= ASKED_SOURCES
            })
            .collect()
    }

    /// What the model's answer may run to: a line for each asked project and a few open loops.
    pub fn answer_tokens(&self) -> usize {
        (45 + 35 * self.asked().len()).min(220)
    }

    fn project_named(&self, name: &str) -> Option<&str> {
        let wanted = squash(name);
        self.projects.iter().map(|(p, _)| p.as_str()).find(|p| squash(p) == wanted)
    }

    /// "Tuesday 2026-12-01" or "the week of 2026-11-30".
    pub fn title(&self) -> String {
        match self.period {
            Period::Day => format!("{} {}", crate::ids::local_weekday_name(self.start_millis), crate::ids::local_date(self.start_millis)),
            Period::Week => format!("the week of {}", crate::ids::local_date(self.start_millis)),
        }
    }
}

/// Lowercase letters and digits only: "Acme Portal" = "acme-portal" = "ACME PORTAL".
fn squash(text: &str) -> String {
    text.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// `2 h 05 min`, `25 min`.
pub fn span(seconds: i64) -> String {
    let minutes = (seconds + 30) / 60;
    if minutes >= 60 { format!("{} h {:02} min", minutes / 60, minutes % 60) } else { format!("{minutes} min") }
}

/// `title` without a last part that only names its app ("… — Mozilla Firefox" of
/// firefox, "… - Visual Studio Code" of code): the model reads the app once.
fn without_app<'a>(app: &str, title: &'a str) -> &'a str {
    let app = app.rsplit('.').next().unwrap_or(app).to_lowercase();
    if app.len() < 3 {
        return title;
    }
    [" — ", " - ", " – "]
        .iter()
        .filter_map(|sep| title.rsplit_once(sep))
        .filter(|(head, tail)| !head.trim().is_empty() && tail.to_lowercase().contains(&app))
        .map(|(head, _)| head)
        .max_by_key(|head| head.len())
        .unwrap_or(title)
}

/// The system prompt and the user's turn. `instructions` (the automation's own
/// words, which the user may edit) go after the fixed format.
pub fn prompt(facts: &Facts, instructions: &str) -> (String, String) {
    let system = "You write a short, factual work recap from numbered sources: windows the user worked in, with time. \
                  Use only what the sources say. Never name a project that is not listed. \
                  Every line ends with the numbers of the sources it is based on, like [2][5]."
        .to_owned();
    let asked = facts.asked();
    let mut user = format!("Projects on {} (time tracked):\n", facts.title());
    for (project, seconds) in facts.projects.iter().filter(|(p, _)| asked.contains(&p.as_str())) {
        user.push_str(&format!("- {project}: {}\n", span(*seconds)));
    }
    user.push_str("\nSources:\n");
    for s in facts.asked_sources() {
        let title: String = crate::records::visible(without_app(&s.app, &s.title), false).replace('\n', " ").chars().take(100).collect();
        user.push_str(&format!("[{}] {}, {}: {} — {}\n", s.n, s.project, span(s.seconds), s.app, title));
    }
    let first = asked.first().copied().unwrap_or("Atlas");
    user.push_str(&format!(
        "\nWrite one line per project, in this form:\n{first}: what was done, in a few words [1][2]\n\
         Then, only if a source shows something left unfinished (a draft, a review or reply waiting, a failing build), one line each, three at most:\n\
         {OPEN}: what is left [n]\n"
    ));
    let instructions = instructions.trim();
    if !instructions.is_empty() {
        user.push_str(&format!("\n{instructions}\n"));
    }
    (system, user)
}

/// What a recap call came to.
#[derive(Debug)]
pub enum Outcome {
    Written(Box<Recap>),
    /// Nothing was written, and why (nothing recorded, no brain).
    Skipped(String),
}

/// One line of the recap: its text and the sources it stands on (numbers of `Facts::sources`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    pub text: String,
    pub sources: Vec<usize>,
    /// Written by the model (false: cowork's own, from the largest source).
    pub by_model: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    pub project: String,
    pub seconds: i64,
    pub lines: Vec<Line>,
}

/// A recap as kept: per project, what was done; what was left open; what was dropped and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recap {
    pub facts: Facts,
    pub sections: Vec<Section>,
    pub open: Vec<Line>,
    /// The model's lines that were not kept, each with why.
    pub dropped: Vec<(String, String)>,
    /// The model that wrote it ("" when no model did).
    pub model: String,
    pub made_in_millis: i64,
}

/// Reads the model's `output` against `facts`.
pub fn read(facts: &Facts, output: &str) -> Recap {
    let mut sections: Vec<Section> = facts.projects.iter().map(|(p, s)| Section { project: p.clone(), seconds: *s, lines: Vec::new() }).collect();
    let mut open: Vec<Line> = Vec::new();
    let mut dropped = Vec::new();
    for raw in output.lines() {
        let line = raw.trim().trim_start_matches(['-', '*', '•']).trim();
        let line = line.trim_start_matches(|c: char| c.is_ascii_digit()).trim_start_matches(['.', ')']).trim().trim_matches('*').trim();
        if line.is_empty() {
            continue;
        }
        let Some((head, body)) = line.split_once(':') else {
            // A heading ("Open loops") or prose without a project: nothing to check it against.
            if cites(line).is_empty() {
                continue;
            }
            dropped.push((line.to_owned(), "names no project".to_owned()));
            continue;
        };
        // "Atlas (2 h 20 min)" is Atlas.
        let head = head.split('(').next().unwrap_or_default().trim().trim_matches('*').trim();
        let (numbers, text) = (cites(body), without_cites(body));
        if text.chars().count() < 3 {
            continue;
        }
        let valid: Vec<usize> = numbers.iter().copied().filter(|n| (1..=facts.sources.len()).contains(n)).collect();
        let is_open = squash(head).starts_with("open") || squash(head) == "todo" || squash(head) == "leftopen";
        if is_open {
            if valid.is_empty() {
                dropped.push((line.to_owned(), "cites no source".to_owned()));
            } else if let Some(valid) = traced(facts, &text, &valid, None) {
                if !open.iter().any(|l| l.text == text) {
                    open.push(Line { text: clip(&text), sources: dedup(valid), by_model: true });
                }
            } else {
                dropped.push((line.to_owned(), "its words are not in the sources".to_owned()));
            }
            continue;
        }
        let Some(project) = facts.project_named(head).or_else(|| (squash(head) == squash(UNATTRIBUTED) || squash(head) == "noproject").then_some(OTHER).filter(|_| facts.project_named(OTHER).is_some())) else {
            dropped.push((line.to_owned(), format!("{head:?} is not a project of {}", facts.title())));
            continue;
        };
        let own: Vec<usize> = valid.iter().copied().filter(|n| facts.sources[n - 1].project == project).collect();
        if own.is_empty() {
            let why = if numbers.is_empty() { "cites no source".to_owned() } else { format!("cites no source of {project}") };
            dropped.push((line.to_owned(), why));
            continue;
        }
        let Some(own) = traced(facts, &text, &own, Some(project)) else {
            dropped.push((line.to_owned(), format!("its words are not in the sources of {project}")));
            continue;
        };
        let section = sections.iter_mut().find(|s| s.project == project).expect("projects come from facts");
        if section.lines.len() < 3 && !section.lines.iter().any(|l| l.text == text) {
            section.lines.push(Line { text: clip(&text), sources: dedup(own), by_model: true });
        }
    }
    // Every project says something: cowork's own line from its largest windows.
    for section in &mut sections {
        if section.lines.is_empty() {
            let own: Vec<&Source> = facts.sources.iter().filter(|s| s.project == section.project).take(2).collect();
            if own.is_empty() {
                continue;
            }
            let names: Vec<String> = own.iter().map(|s| format!("{} — {}", s.app, s.title.chars().take(80).collect::<String>())).collect();
            section.lines.push(Line { text: format!("worked in {}", names.join("; ")), sources: own.iter().map(|s| s.n).collect(), by_model: false });
        }
    }
    sections.retain(|s| !s.lines.is_empty());
    Recap { facts: facts.clone(), sections, open, dropped, model: String::new(), made_in_millis: 0 }
}

/// Words a line may use without a source saying them: how work is described, not what it was.
const PLAIN_WORDS: &str = "work worked working works made make making done doing spent spend time with from into onto about over \
    under after before then than that this these those their there where which while what when also more most some much many across \
    between during other others again still just only very well good first last next same each every both such them they were been \
    being have having your user users day days week today morning afternoon evening hours hour minutes minute mins reviewed review \
    reviewing updated update updating fixed fixing wrote write writing read reading checked checking looked looking continued continue \
    went handled handling started start finished finish progress tasks task items item various several things thing stuff related \
    project projects code coding meeting meetings call calls email emails mail mails message messages chat chats notes note document \
    documents docs page pages file files open left waiting pending unfinished draft drafts reply replies";

/// The words of `text` that say what was worked on: 4 characters or more, not plain words.
fn claim_words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut out: Vec<String> = Vec::new();
    let is_word = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.');
    for word in lower.split(|c: char| !is_word(c)) {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric());
        if word.chars().count() >= 4 && !PLAIN_WORDS.split_whitespace().any(|w| w == word) && !out.iter().any(|w| w == word) {
            out.push(word.to_owned());
        }
    }
    out
}

/// `word` is said in `haystack` (lowercase), or its stem is ("exports" for "export", "invoicing" for "invoice").
fn said(word: &str, haystack: &str) -> bool {
    haystack.contains(word) || (word.chars().count() >= 6 && haystack.contains(&word.chars().take(5).collect::<String>()))
}

/// The text a source says: its project, app and title, lowercase.
fn says(source: &Source) -> String {
    format!("{} {} {}", source.project, source.app, source.title).to_lowercase()
}

/// The citations a line keeps when its words are traced to sources: those of
/// `cited` that say any of them, and then (when most of its words are not yet
/// said) the sources of `project` (any project for an open loop) that say the
/// most of what is missing, up to three. `None` when most of its words are in
/// no source: the line is the model's own, and is not kept.
fn traced(facts: &Facts, text: &str, cited: &[usize], project: Option<&str>) -> Option<Vec<usize>> {
    let words = claim_words(text);
    if words.is_empty() {
        return Some(cited.to_vec());
    }
    let enough = words.len().div_ceil(2);
    let saying = |n: usize| -> Vec<&str> {
        let haystack = says(&facts.sources[n - 1]);
        words.iter().map(String::as_str).filter(|w| said(w, &haystack)).collect()
    };
    let mut kept: Vec<usize> = cited.iter().copied().filter(|n| !saying(*n).is_empty()).collect();
    let mut covered: Vec<&str> = kept.iter().flat_map(|n| saying(*n)).collect();
    covered.sort_unstable();
    covered.dedup();
    for _ in 0..3 {
        if covered.len() >= enough {
            break;
        }
        let best = facts
            .sources
            .iter()
            .filter(|s| project.is_none_or(|p| s.project == p) && !kept.contains(&s.n))
            .map(|s| (saying(s.n).into_iter().filter(|w| !covered.contains(w)).count(), s.n))
            .filter(|(new, _)| *new > 0)
            .max_by_key(|(new, n)| (*new, std::cmp::Reverse(*n)));
        let Some((_, n)) = best else { break };
        kept.push(n);
        covered.extend(saying(n));
        covered.sort_unstable();
        covered.dedup();
    }
    (covered.len() >= enough).then_some(kept)
}

fn dedup(mut numbers: Vec<usize>) -> Vec<usize> {
    let mut seen = Vec::new();
    numbers.retain(|n| {
        let new = !seen.contains(n);
        seen.push(*n);
        new
    });
    numbers
}

fn clip(text: &str) -> String {
    let visible = crate::records::visible(text, false).replace('\n', " ");
    if visible.chars().count() <= MAX_LINE_CHARS {
        return visible;
    }
    let mut cut: String = visible.chars().take(MAX_LINE_CHARS - 1).collect();
    cut.push('…');
    cut
}

impl Recap {
    /// Every line with its section's project (`Open` for open loops).
    pub fn lines(&self) -> impl Iterator<Item = (&str, &Line)> {
        self.sections.iter().flat_map(|s| s.lines.iter().map(move |l| (s.project.as_str(), l))).chain(self.open.iter().map(|l| (OPEN, l)))
    }

    /// The sessions a line stands on: each cited source's longest session.
    pub fn sessions_of(&self, line: &Line) -> Vec<i64> {
        line.sources.iter().filter_map(|n| self.facts.sources.get(n - 1)).filter_map(|s| s.session_ids.first().copied()).collect()
    }

    /// The text kept in memory: searchable, embedded, and recalled with its sessions.
    pub fn render(&self) -> String {
        let mut out = format!("Recap of {}", self.facts.title());
        for section in &self.sections {
            out.push_str(&format!("\n{} ({}):", section.project, span(section.seconds)));
            for line in &section.lines {
                out.push_str(&format!("\n- {}{}", line.text, refs(&self.sessions_of(line))));
            }
        }
        if !self.open.is_empty() {
            out.push_str("\nLeft open:");
            for line in &self.open {
                out.push_str(&format!("\n- {}{}", line.text, refs(&self.sessions_of(line))));
            }
        }
        out
    }
}

fn refs(sessions: &[i64]) -> String {
    sessions.iter().map(|id| format!(" (session {id})")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::day::projects::ProjectRules;
    use crate::records::ActivitySession;

    const HOUR: i64 = 3_600_000;

    fn day() -> (Vec<ActivitySession>, i64) {
        let midnight = crate::ids::local_day_start_millis(1_764_000_000_000);
        let at = |h: i64, m: i64| midnight + h * HOUR + m * 60_000;
        let s = |id: i64, app: &str, title: &str, from: i64, to: i64| ActivitySession {
            session_id: id,
            app: app.into(),
            title: title.into(),
            started_at_millis: from,
            ended_at_millis: Some(to),
            ..ActivitySession::default()
        };
        let sessions = vec![
            s(1, "code", "export.rs - ledger-svc - Visual Studio Code", at(9, 0), at(10, 30)),
            s(2, "firefox", "ATL-212 Export rounds cents wrong - Jira", at(10, 30), at(10, 50)),
            s(3, "code", "export.rs - ledger-svc - Visual Studio Code", at(10, 50), at(11, 40)),
            s(4, "code", "App.tsx - acme-portal - Visual Studio Code", at(13, 0), at(14, 0)),
            // The mail after the day's last stretch of a project: it is no project's (Other).
            s(6, "code", "README.md - acme-portal - Visual Studio Code", at(14, 0), at(14, 0) + 30_000),
            s(5, "thunderbird", "Re: invoice for November - Thunderbird", at(14, 0) + 30_000, at(14, 20) + 30_000),
        ];
        (sessions, midnight)
    }

    fn facts() -> Facts {
        let (sessions, midnight) = day();
        let rules = ProjectRules::parse("Atlas: ledger-svc, ATL\nAcme Portal: acme-portal").unwrap();
        let ledger = Ledger::of(&sessions, &rules, midnight, midnight + 24 * HOUR, midnight + 24 * HOUR);
        Facts::of(&ledger, Period::Day, midnight, midnight + 24 * HOUR)
    }

    #[test]
    fn the_sources_are_the_projects_largest_windows_summed_over_their_sessions() {
        let facts = facts();
        let names: Vec<&str> = facts.projects.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, ["Atlas", "Acme Portal", OTHER], "most time first, no project last");
        assert_eq!(facts.projects[0].1, 160 * 60);
        let first = &facts.sources[0];
        assert_eq!((first.n, first.project.as_str(), first.seconds), (1, "Atlas", 140 * 60));
        assert_eq!(first.session_ids, [1, 3], "longest session first");
        assert!(!facts.sources.iter().any(|s| s.title.starts_with("README")), "under a minute is not a source");
        let (_, user) = prompt(&facts, "Keep it short.");
        assert!(user.contains("[1] Atlas, 2 h 20 min: code — export.rs - ledger-svc"), "{user}");
        assert!(user.ends_with("Keep it short.\n"));
        // The model is asked about the projects, not about time no project claims (cowork writes that line).
        assert_eq!(facts.asked(), ["Atlas", "Acme Portal"]);
        assert!(!user.contains("Re: invoice") && !user.contains(OTHER), "{user}");
        assert_eq!(facts.answer_tokens(), 45 + 2 * 35);
    }

    #[test]
    fn a_line_counts_only_with_a_project_of_the_day_and_its_own_sources() {
        let facts = facts();
        let n = |title: &str| facts.sources.iter().find(|s| s.title.starts_with(title)).unwrap().n;
        let (export, ticket, portal, mail) = (n("export.rs"), n("ATL-212"), n("App.tsx"), n("Re: invoice"));
        let output = format!(
            "Here is the recap:\n\
             - **Atlas**: fixed the export's rounding of cents [{export}][{ticket}]\n\
             - Acme Portal: worked on App.tsx [{portal}, 99]\n\
             - Zephyr: planned the launch [{export}]\n\
             - Other: answered the November invoice mail\n\
             - Acme Portal: also fixed the ledger [{export}]\n\
             Open: reply on the November invoice [{mail}]\n"
        );
        let recap = read(&facts, &output);
        let atlas = &recap.sections[0];
        assert_eq!(atlas.lines, [Line { text: "fixed the export's rounding of cents".into(), sources: vec![export, ticket], by_model: true }]);
        assert_eq!(recap.sections[1].lines[0].sources, [portal], "an unknown number is dropped, the line kept");
        assert_eq!(recap.sections[1].lines.len(), 1, "a line citing another project's source is dropped");
        let why: Vec<&str> = recap.dropped.iter().map(|d| d.1.as_str()).collect();
        assert!(why.iter().any(|w| w.contains("\"Zephyr\" is not a project")), "{why:?}");
        assert!(why.contains(&"cites no source"), "{why:?}");
        assert!(why.contains(&"cites no source of Acme Portal"), "{why:?}");
        // Other said nothing usable: cowork's own line, from its largest window.
        let other = &recap.sections[2];
        assert_eq!((other.project.as_str(), other.lines[0].by_model), (OTHER, false));
        assert_eq!(other.lines[0].sources, [mail]);
        assert_eq!(recap.open[0].text, "reply on the November invoice");
        let text = recap.render();
        assert!(text.contains("Atlas (2 h 40 min):\n- fixed the export's rounding of cents (session 1) (session 2)"), "{text}");
        assert!(text.contains("Left open:\n- reply on the November invoice (session 5)"), "{text}");
        // Every kept line cites sessions of the day.
        for (_, line) in recap.lines() {
            assert!(!recap.sessions_of(line).is_empty());
        }
    }

    #[test]
    fn a_line_stands_on_the_sources_that_say_it_or_is_not_kept() {
        let facts = facts();
        let n = |title: &str| facts.sources.iter().find(|s| s.title.starts_with(title)).unwrap().n;
        let (export, ticket, portal, mail) = (n("export.rs"), n("ATL-212"), n("App.tsx"), n("Re: invoice"));
        let output = format!(
            "Atlas: ATL-212 rounds cents wrong - Jira [{export}]\n\
             Atlas: rewrote the Kubernetes deployment pipeline for staging [{export}][{ticket}]\n\
             Acme Portal: App.tsx in acme-portal [{portal}]\n\
             Open: the November invoice [{export}]\n\
             Open: migrate Postgres clusters tonight [{mail}]\n"
        );
        let recap = read(&facts, &output);
        let atlas = &recap.sections[0].lines;
        assert_eq!(atlas.len(), 1, "{atlas:?}");
        assert_eq!(atlas[0].sources, [ticket], "a title copied from one source while citing another cites the one that says it");
        assert_eq!(recap.sections[1].lines[0].sources, [portal]);
        assert_eq!(recap.open.len(), 1);
        assert_eq!(recap.open[0].sources, [mail], "an open loop is re-cited to whichever source says it");
        let why: Vec<&str> = recap.dropped.iter().map(|d| d.1.as_str()).collect();
        assert_eq!(why, ["its words are not in the sources of Atlas", "its words are not in the sources"], "{:?}", recap.dropped);
        // Plain words alone ("worked on it") need no source to say them.
        assert_eq!(read(&facts, &format!("Atlas: worked on it all morning [{export}]")).sections[0].lines[0].sources, [export]);
    }

    #[test]
    fn no_model_output_still_gives_every_project_a_cited_line() {
        let facts = facts();
        let recap = read(&facts, "");
        assert_eq!(recap.sections.len(), 3);
        assert!(recap.sections.iter().all(|s| s.lines.len() == 1 && !s.lines[0].by_model && !s.lines[0].sources.is_empty()));
        assert!(recap.sections[0].lines[0].text.starts_with("worked in code — export.rs"));
    }

    #[test]
    fn a_title_loses_only_the_part_that_names_its_app() {
        assert_eq!(without_app("firefox", "ATL-212 Export - Jira — Mozilla Firefox"), "ATL-212 Export - Jira");
        assert_eq!(without_app("code", "export.rs - ledger-svc - Visual Studio Code"), "export.rs - ledger-svc");
        assert_eq!(without_app("org.kde.okular", "Forecasting.pdf — Okular"), "Forecasting.pdf");
        assert_eq!(without_app("firefox", "Mozilla Firefox"), "Mozilla Firefox", "a title that is only its app stays");
        assert_eq!(without_app("zoom", "Zoom Meeting"), "Zoom Meeting");
        assert_eq!(without_app("kitty", "terraform plan - infra"), "terraform plan - infra");
    }
}
