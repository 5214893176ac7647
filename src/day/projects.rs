//! Which project a stretch of work belongs to (issue 58), pure.
//!
//! In order: the user's rules (Settings → Projects, one per line: `Atlas:
//! ledger-svc, ATL, acme.example, /regex/` — words match whole words of the
//! title, app or address; capitals alone are a ticket key (`ATL` is ATL-142);
//! a rule's project name is one of its terms; `No project: …` keeps matching
//! windows out of every project);
//! then what the window says itself — a source folder in its title
//! (`~/src/NAME`), an editor's workspace (`file - NAME - Visual Studio Code`,
//! `NAME – file` in JetBrains IDEs), a forge's repository in its address
//! (`github.com/OWNER/NAME`), a ticket key (`ATL-142`, joined to the
//! repository it shows up with elsewhere in the same stretch of days), a
//! known project's name in a document's or page's title; then the work around
//! it: a stretch without a cue (documentation, a terminal at `~`, at most 45
//! minutes; a call, at most two hours) between two stretches of one project
//! less than an hour apart (besides the calls; a document left open over
//! lunch and taken up again) belongs to it, unless it is time off (a leisure
//! site or app); a detour of five minutes or less to what is no project does
//! not end a stretch; a call joined within five minutes of a project's window
//! is its meeting; a window that never names its file takes the one project
//! its same window always had; and again between stretches, with those; last,
//! a message takes its mail thread's project (`Re:`, `Fwd:`, the draft).
//! Every attribution says why.

use std::collections::{BTreeMap, HashMap};

use regex::Regex;

use crate::records::ActivitySession;

/// A stretch without a cue between two of one project counts for it up to this long
/// (a call, an hour's reading of documentation, a terminal at `~`) ...
pub const LOOKUP_MAX_MILLIS: i64 = 45 * 60_000;
/// ... when the two stretches of the project are at most this far apart.
const BETWEEN_MAX_MILLIS: i64 = 60 * 60_000;
/// A break: this long or longer with no window in use (lunch, a walk).
const BREAK_MIN_MILLIS: i64 = 15 * 60_000;
/// Two stretches of a project around a break are at most this far apart for a
/// window left open over it to count (`left_open_over_a_break`).
const BREAK_SPAN_MAX_MILLIS: i64 = 3 * 60 * 60_000;
/// A call (a call app, or a meeting's address or title) between two stretches of one
/// project counts for it up to this long, and the time in calls does not count in
/// `BETWEEN_MAX_MILLIS`: meetings run to the hour and past it.
const CALL_MAX_MILLIS: i64 = 2 * 60 * 60_000;
/// A stretch the user's rules (or the window) say is no project, this short or
/// shorter, does not end the stretch of a project around it: a glance at the
/// inbox or a chat in the middle of an hour's design work.
const DETOUR_MAX_MILLIS: i64 = 5 * 60_000;
/// A call joined this soon after a message of a project is that project's meeting.
const INVITED_MAX_MILLIS: i64 = 5 * 60_000;

/// The name rules use for "not a project".
const NO_PROJECT: &str = "no project";

/// One rule line: a project (None: no project) and the terms that mean it.
#[derive(Clone, Debug)]
struct Rule {
    project: Option<String>,
    line: String,
    terms: Vec<Term>,
}

#[derive(Clone, Debug)]
enum Term {
    /// Lower-cased words with a space either side (` ledger svc `), matched
    /// at word boundaries in the title, app or address.
    Words(String),
    /// A ticket key or name in capitals (`ATL`): `ATL-142` or `ATL` in the title or address, in capitals.
    Ticket(Regex),
    Pattern(Regex),
}

/// The user's project rules, compiled.
#[derive(Clone, Debug, Default)]
pub struct ProjectRules {
    rules: Vec<Rule>,
}

impl ProjectRules {
    /// Parses the rules' text (Settings' `projects.rules`); an error names its line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((name, terms)) = line.split_once(':') else {
                return Err(format!("line {}: write it as `Project: term, term` ({line:?})", index + 1));
            };
            let name = name.trim();
            if name.is_empty() {
                return Err(format!("line {}: the project has no name", index + 1));
            }
            let project = (!name.eq_ignore_ascii_case(NO_PROJECT)).then(|| name.to_owned());
            let mut compiled: Vec<Term> = project.iter().map(|p| Term::Words(padded(p))).collect();
            for term in split_terms(terms).iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
                match term.strip_prefix('/').and_then(|t| t.strip_suffix('/')) {
                    Some(pattern) => compiled.push(Term::Pattern(
                        Regex::new(&format!("(?i){pattern}")).map_err(|err| format!("line {}: {term} is not a regular expression ({err})", index + 1))?,
                    )),
                    // Capitals (and digits) alone are a ticket key or a name in capitals: `PORT` means PORT-12 or PORT, not a port.
                    None if term.len() >= 2 && term.len() <= 10 && term.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) && term.starts_with(|c: char| c.is_ascii_uppercase()) => {
                        compiled.push(Term::Ticket(Regex::new(&format!(r"\b{term}(?:-[0-9]+)?\b")).map_err(|err| format!("line {}: {term}: {err}", index + 1))?))
                    }
                    None => compiled.push(Term::Words(padded(term))),
                }
            }
            compiled.retain(|t| !matches!(t, Term::Words(w) if w.trim().is_empty()));
            rules.push(Rule { project, line: line.to_owned(), terms: compiled });
        }
        Ok(Self { rules })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The projects the rules name, in their order.
    pub fn projects(&self) -> Vec<String> {
        self.rules.iter().filter_map(|r| r.project.clone()).collect()
    }

    /// The first rule matching the window (app, title, address), and its line.
    fn matching(&self, window: &Window) -> Option<(&Rule, &str)> {
        self.rules.iter().find_map(|rule| {
            rule.terms.iter().any(|term| match term {
                Term::Words(words) => window.words.contains_words(words),
                Term::Pattern(regex) | Term::Ticket(regex) => regex.is_match(&window.title) || regex.is_match(&window.app) || window.url.as_deref().is_some_and(|u| regex.is_match(u)),
            })
            .then_some((rule, rule.line.as_str()))
        })
    }
}

/// The rules' text with windows titled `title` always counted for `project`
/// ("No project" keeps them out): the title as an exact pattern, on a line of
/// its own first (it wins over the lines below), and out of any other line.
pub fn with_title_rule(rules: &str, project: &str, title: &str) -> String {
    // No `/` inside (it would end the term early): a slash is matched as `[/]`.
    let term = format!("/^{}$/", regex::escape(title.trim()).replace('/', "[/]"));
    let project = project.trim().replace([':', '\n', '\r'], " ");
    // Out of any line where it was already (the newest choice counts); a line left with no term goes.
    let mut lines: Vec<String> = Vec::new();
    for line in rules.lines() {
        match line.split_once(':') {
            Some((name, terms)) if !line.trim_start().starts_with('#') && split_terms(terms).iter().any(|t| t.trim() == term) => {
                let kept: Vec<String> = split_terms(terms).into_iter().filter(|t| t.trim() != term).collect();
                if kept.iter().any(|t| !t.trim().is_empty()) {
                    lines.push(format!("{name}:{}", kept.join(",")));
                }
            }
            _ => lines.push(line.to_owned()),
        }
    }
    // A line of its own, first: it wins over the lines below.
    let own = format!("{project}: {term}");
    lines.retain(|l| l.trim() != own);
    lines.insert(0, own);
    lines.join("\n")
}

/// A rule's terms, split at commas outside `/…/` (a regular expression may hold one).
fn split_terms(terms: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for piece in terms.split(',') {
        match out.last_mut() {
            Some(last) if open => {
                last.push(',');
                last.push_str(piece);
            }
            _ => out.push(piece.to_owned()),
        }
        let term = out.last().map(|t| t.trim()).unwrap_or_default();
        open = term.starts_with('/') && (term.len() < 2 || !term.ends_with('/'));
    }
    out
}

/// Why a stretch of work counts for its project (or for none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// The user's rule (its line).
    Rule(String),
    /// A source folder in the title (`~/src/NAME`).
    Folder(String),
    /// An editor's open folder.
    Workspace(String),
    /// A forge's repository in the address.
    Repository(String),
    /// A ticket key, and the project it was seen with (when it was).
    Ticket(String),
    /// The project's name in the title.
    Named,
    /// No cue; between two stretches of this project.
    Between,
    /// A call joined right after a window of this project (its invitation, its reminder, its work).
    Invited,
    /// No cue; the same window counted for this project every other time.
    SameWindow,
    /// No cue; the rest of its mail thread counted for this project.
    Thread,
    /// Nothing says which.
    Unknown,
}

impl Why {
    pub fn describe(&self) -> String {
        match self {
            Why::Rule(line) => format!("your rule \u{201c}{line}\u{201d}"),
            Why::Folder(name) => format!("the folder {name} in its title"),
            Why::Workspace(name) => format!("the editor's folder {name}"),
            Why::Repository(name) => format!("the repository {name} in its address"),
            Why::Ticket(key) => format!("the ticket {key}"),
            Why::Named => "the project's name in its title".into(),
            Why::Between => "between two stretches of the project, with no cue of its own".into(),
            Why::Invited => "a call joined right after a window of the project".into(),
            Why::SameWindow => "the same window counted for the project every other time".into(),
            Why::Thread => "its mail thread counted for the project".into(),
            Why::Unknown => "nothing in it names a project".into(),
        }
    }
}

/// A stretch of work's project, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attribution {
    pub project: Option<String>,
    pub why: Why,
}

/// A window's text as matched: lower-cased words of its title, app and address.
#[derive(Clone, Debug, PartialEq)]
struct Words(String);

impl Words {
    fn of(parts: &[&str]) -> Self {
        Words(format!(" {} ", parts.iter().map(|p| normalise(p)).collect::<Vec<_>>().join(" ")))
    }

    /// Whether `words` (`padded`) appear as whole words.
    fn contains_words(&self, words: &str) -> bool {
        !words.trim().is_empty() && self.0.contains(words)
    }
}

/// `normalise`d, with a space either side: what `Words::contains_words` looks for.
fn padded(text: &str) -> String {
    format!(" {} ", normalise(text))
}

/// Lower-case words separated by one space (`Route-Planner_v2` → `route planner v2`).
fn normalise(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect::<Vec<_>>().join(" ")
}

#[derive(Clone, Debug, PartialEq)]
struct Window {
    app: String,
    /// The app, lower-cased (`code` under Wayland is `Code` under X11).
    app_key: String,
    title: String,
    url: Option<String>,
    words: Words,
    /// A call app, or a meeting's address or title (read once, with the rest,
    /// like the three below: the fills ask for each session on every attribution).
    call: bool,
    /// Mail or chat (`is_talk`).
    talk: bool,
    /// Time off (`is_leisure`).
    leisure: bool,
    /// Mail or chat: its thread's subject, and whether it is a reply (`thread_subject`).
    thread: Option<(String, bool)>,
}

impl Window {
    fn of(session: &ActivitySession) -> Self {
        let url = session.url.clone();
        let words = Words::of(&[&session.app, &session.title, url.as_deref().unwrap_or("")]);
        let call = crate::day::meetings::call_service(&session.app, &session.title, url.as_deref()).is_some();
        let app_key = session.app.to_lowercase();
        let mut window = Window { app: session.app.clone(), app_key, title: session.title.clone(), url, words, call, talk: false, leisure: false, thread: None };
        window.talk = is_talk(&window);
        window.leisure = is_leisure(&window);
        window.thread = if window.talk { thread_subject(&window) } else { None };
        window
    }
}

/// What a window says about its project by itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Cues {
    /// A folder, workspace or repository, and which.
    name: Option<(String, Why)>,
    /// Ticket keys (`ATL`), and the tickets (`ATL-142`).
    tickets: Vec<String>,
    numbered: Vec<String>,
}

/// Folders under which people keep their projects.
const SOURCE_ROOTS: [&str; 12] = ["src", "code", "projects", "project", "work", "repos", "repositories", "dev", "git", "workspace", "clients", "source"];
/// Forges whose addresses are `HOST/OWNER/REPOSITORY/…`.
const FORGES: [&str; 6] = ["github.com", "gitlab.com", "codeberg.org", "bitbucket.org", "sr.ht", "gitea.com"];
/// Path parts of a forge's address that are not an owner.
const FORGE_PAGES: [&str; 14] = ["settings", "notifications", "orgs", "users", "explore", "marketplace", "login", "search", "dashboard", "new", "issues", "pulls", "topics", "sponsors"];
/// How the titles of editors that show ` - FOLDER - EDITOR` end (lower-cased).
const WORKSPACE_EDITORS: [&str; 6] = [" - visual studio code", " - vscodium", " - code - oss", " - cursor", " - sublime text", " - zed"];
/// Mail and chat: never counted for a project by what is around them (a call is: it is usually about the work around it).
const TALK_APPS: [&str; 12] = ["slack", "thunderbird", "evolution", "geary", "discord", "telegram", "signal", "element", "mattermost", "mailspring", "betterbird", "kmail"];
const TALK_SITES: [&str; 6] = ["mail.google.com", "outlook.", "slack.com", "discord.com", "web.whatsapp.com", "fastmail.com"];
/// Time off, whatever is around it: never counted for a project by its neighbours.
const LEISURE: [&str; 16] = ["youtube.com", "reddit.com", "news.ycombinator.com", "netflix.com", "twitter.com", "x.com", "facebook.com", "instagram.com", "tiktok.com", "twitch.tv", "open.spotify.com", "mastodon", "tokodon", "tuba", "spotify", "steam"];

fn ticket_regex() -> &'static Regex {
    static TICKET: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    TICKET.get_or_init(|| Regex::new(r"\b([A-Z][A-Z0-9]{1,9})-[0-9]{1,6}\b").expect("a valid pattern"))
}

fn folder_regex() -> &'static Regex {
    static FOLDER: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    FOLDER.get_or_init(|| Regex::new(r"(?:~|/home/[^/\s]+|/Users/[^/\s]+)/([A-Za-z0-9._-]+)(?:/([A-Za-z0-9._-]+))?").expect("a valid pattern"))
}

/// What `window`'s title and address name by themselves.
fn cues(window: &Window) -> Cues {
    let mut cues = Cues::default();
    let title = window.title.as_str();
    // A source folder: ~/src/NAME (or ~/NAME when it is not a home folder everyone has).
    for found in folder_regex().captures_iter(title) {
        let first = &found[1];
        let name = match found.get(2) {
            Some(second) if SOURCE_ROOTS.contains(&first.to_lowercase().as_str()) => second.as_str(),
            _ if SOURCE_ROOTS.contains(&first.to_lowercase().as_str()) => continue,
            _ if is_home_folder(first) || first.starts_with('.') || first.contains('.') => continue,
            _ => first,
        };
        cues.name = Some((name.to_owned(), Why::Folder(name.to_owned())));
        break;
    }
    // An editor's workspace: `file - FOLDER - Visual Studio Code`, JetBrains' `FOLDER – file`.
    if cues.name.is_none() {
        let lower = title.to_lowercase();
        let app = window.app.to_lowercase();
        if let Some(editor) = WORKSPACE_EDITORS.iter().find(|e| lower.ends_with(*e))
            && let Some(head) = title.get(..title.len().saturating_sub(editor.len()))
            && let Some(folder) = head.rsplit_once(" - ").map(|(_, folder)| folder).or_else(|| {
                // `FOLDER - Visual Studio Code` with no file open (not a tab of its own, not a file).
                let alone = head.trim();
                (!alone.contains(['.', ' ']) && !["Welcome", "Settings", "Extensions", "Untitled-1"].contains(&alone)).then_some(alone)
            })
        {
            // `folder [SSH: host]`, `folder (Workspace)`: the folder's name.
            let folder = folder.split(" [").next().unwrap_or(folder).split(" (").next().unwrap_or(folder).trim_start_matches('\u{25cf}').trim();
            if !folder.is_empty() {
                cues.name = Some((folder.to_owned(), Why::Workspace(folder.to_owned())));
            }
        } else if (app.starts_with("jetbrains") || app.contains("android-studio"))
            && let Some((folder, _)) = title.split_once(" \u{2013} ")
            && !folder.trim().is_empty()
            && !folder.trim().contains(' ')
        {
            cues.name = Some((folder.trim().to_owned(), Why::Workspace(folder.trim().to_owned())));
        }
    }
    // A forge's repository: HOST/OWNER/NAME.
    if cues.name.is_none()
        && let Some(url) = &window.url
    {
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        let path = rest.split(['?', '#']).next().unwrap_or(rest);
        let mut parts = path.split('/');
        let host = parts.next().unwrap_or("").trim_start_matches("www.").to_lowercase();
        let parts: Vec<&str> = parts.filter(|p| !p.is_empty()).collect();
        let owner = parts.first().copied().unwrap_or("");
        // GitLab nests groups (`group/sub/repo/-/merge_requests/12`): the repository is the part before `-`.
        let repo = match parts.iter().position(|p| *p == "-") {
            Some(dash) if dash >= 2 => parts[dash - 1],
            _ if host == "gitlab.com" && parts.len() >= 2 => {
                let page = parts.iter().position(|p| ["issues", "merge_requests", "tree", "blob", "commits", "commit", "pipelines", "jobs", "wikis", "boards"].contains(p));
                page.filter(|&i| i >= 2).map_or(parts[parts.len() - 1], |i| parts[i - 1])
            }
            _ => parts.get(1).copied().unwrap_or(""),
        };
        if FORGES.contains(&host.as_str()) && !owner.is_empty() && !repo.is_empty() && !FORGE_PAGES.contains(&owner) {
            let repo = repo.trim_end_matches(".git");
            cues.name = Some((repo.to_owned(), Why::Repository(repo.to_owned())));
        }
    }
    for text in [Some(title), window.url.as_deref()].into_iter().flatten() {
        for found in ticket_regex().captures_iter(text) {
            let key = found[1].to_owned();
            // Not a ticket: dates, versions, HTTP codes, and the like.
            if ["UTF", "ISO", "SHA", "RFC", "CVE", "HTTP", "TLS", "AES", "MD"].contains(&key.as_str()) {
                continue;
            }
            if !cues.numbered.iter().any(|n| n == &found[0]) {
                cues.numbered.push(found[0].to_owned());
            }
            if !cues.tickets.contains(&key) {
                cues.tickets.push(key);
            }
        }
    }
    cues
}

fn is_home_folder(name: &str) -> bool {
    ["Downloads", "Documents", "Desktop", "Pictures", "Music", "Videos", "Public", "Templates", "tmp", "bin", "snap"].iter().any(|h| h.eq_ignore_ascii_case(name))
}

fn is_talk(window: &Window) -> bool {
    TALK_APPS.iter().any(|t| window.app_key.contains(t)) || window.url.as_deref().is_some_and(|u| TALK_SITES.iter().any(|s| u.contains(s)))
}

/// Time off: a leisure site (by its host) or app.
fn is_leisure(window: &Window) -> bool {
    // An app with a leisure name as one of its parts (`org.gnome.Steam`, `tokodon`).
    if window.app_key.split(['.', '-', ' ']).any(|part| LEISURE.contains(&part)) {
        return true;
    }
    let Some(url) = window.url.as_deref() else { return false };
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?', '#', ':']).next().unwrap_or("").trim_start_matches("www.");
    // Read once per window of a span: no allocation unless the host has capitals.
    let host: std::borrow::Cow<str> = if host.chars().any(char::is_uppercase) { host.to_lowercase().into() } else { host.into() };
    // The site or a subdomain of it, or a name without a dot as a part of the host (`mastodon.social`).
    LEISURE.iter().any(|l| *host == **l || host.strip_suffix(l).is_some_and(|rest| rest.ends_with('.')))
        || host.split('.').any(|part| LEISURE.iter().any(|l| !l.contains('.') && part == *l))
}

/// Each session's project, in the sessions' order. Sessions are read
/// together: a ticket key counts for the project it was seen with, a
/// project's name found anywhere is looked for everywhere, and a short
/// stretch without a cue takes the project around it.
pub fn attribute(sessions: &[ActivitySession], rules: &ProjectRules) -> Vec<Attribution> {
    attribute_with(&mut Prepared::default(), sessions, rules)
}

/// What `attribute` reads of each session by itself (its words and cues),
/// kept between calls: a finished session does not change, so a timeline
/// that grows by one session prepares one (a week's 14,000 are read once).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prepared {
    ids: Vec<i64>,
    windows: Vec<Window>,
    cues: Vec<Cues>,
}

impl Prepared {
    /// Brings the prepared sessions in line with `sessions`: the ones already
    /// prepared (the same ids and titles, in order) are kept, the rest read.
    fn sync(&mut self, sessions: &[ActivitySession]) {
        let kept = self.ids.iter().zip(&self.windows).zip(sessions).take_while(|((id, window), s)| **id == s.session_id && window.title == s.title).count();
        self.ids.truncate(kept);
        self.windows.truncate(kept);
        self.cues.truncate(kept);
        for session in &sessions[kept..] {
            let window = Window::of(session);
            self.cues.push(cues(&window));
            self.windows.push(window);
            self.ids.push(session.session_id);
        }
    }
}

/// `attribute`, with what was prepared of the sessions kept in `prepared`.
pub fn attribute_with(prepared: &mut Prepared, sessions: &[ActivitySession], rules: &ProjectRules) -> Vec<Attribution> {
    prepared.sync(sessions);
    let (windows, cues) = (&prepared.windows, &prepared.cues);
    // The projects' names: the rules', then the names windows show of themselves (first spelling kept).
    let mut names: Vec<String> = Vec::new();
    let mut spelling: HashMap<String, String> = HashMap::new();
    for name in rules.projects().into_iter().chain(cues.iter().filter_map(|cue| cue.name.as_ref().map(|(name, _)| name.clone()))) {
        if let std::collections::hash_map::Entry::Vacant(slot) = spelling.entry(normalise(&name)) {
            slot.insert(name.clone());
            names.push(name);
        }
    }
    // Each name as looked for in titles (four letters at least), the longest first: `route planner` before `route`.
    let mut looked_for: Vec<(String, &String)> = names.iter().map(|n| (padded(n), n)).filter(|(p, _)| p.len() >= 4 + 2).collect();
    looked_for.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    // Without tickets first; then a ticket key goes with the project it is most often seen with.
    let first: Vec<Option<Attribution>> = windows.iter().zip(cues).map(|(window, cue)| direct(window, cue, rules, &looked_for)).collect();
    let mut seen_with: HashMap<&str, BTreeMap<&str, usize>> = HashMap::new();
    for (cue, found) in cues.iter().zip(&first) {
        if let Some(Attribution { project: Some(project), .. }) = found {
            for key in &cue.tickets {
                *seen_with.entry(key.as_str()).or_default().entry(project.as_str()).or_default() += 1;
            }
        }
    }
    // A key seen alone is a project of its own only with two tickets or more (ATL-141, ATL-142; not GPT-4 once).
    let mut tickets_of: HashMap<&str, std::collections::HashSet<&str>> = HashMap::new();
    for cue in cues {
        for ticket in &cue.numbered {
            if let Some((key, _)) = ticket.split_once('-') {
                tickets_of.entry(key).or_default().insert(ticket.as_str());
            }
        }
    }
    let ticket_projects: HashMap<&str, &str> =
        seen_with.iter().filter_map(|(key, projects)| projects.iter().max_by_key(|(_, n)| **n).map(|(p, _)| (*key, *p))).collect();
    let mut found: Vec<Attribution> = first
        .iter()
        .zip(cues)
        .map(|(first, cue)| {
            let known_ticket = cue.tickets.iter().find_map(|key| ticket_projects.get(key.as_str()).map(|p| (key, *p)));
            match (first, known_ticket) {
                // The user's rule and the window's own folder or repository come first.
                (Some(found), _) if found.why != Why::Named => found.clone(),
                (_, Some((key, project))) => Attribution { project: Some(project.to_owned()), why: Why::Ticket(key.clone()) },
                (Some(found), None) => found.clone(),
                (None, None) => match cue.tickets.iter().find(|key| tickets_of.get(key.as_str()).is_some_and(|t| t.len() >= 2)) {
                    Some(key) => Attribution { project: Some(key.clone()), why: Why::Ticket(key.clone()) },
                    None => Attribution { project: None, why: Why::Unknown },
                },
            }
        })
        .collect();
    for attribution in &mut found {
        if let Some(project) = &mut attribution.project
            && let Some(first) = spelling.get(&normalise(project))
        {
            project.clone_from(first);
        }
    }
    fill_between(sessions, windows, &mut found);
    fill_invited(sessions, windows, &mut found);
    fill_same_window(sessions, windows, &mut found);
    // Again, with the windows the same-window fill gave a project as ends of a stretch.
    fill_between(sessions, windows, &mut found);
    fill_thread(windows, &mut found);
    found
}

/// A call joined from a project's window counts for it: a cue-less call (at
/// most `CALL_MAX_MILLIS`) starting at most `INVITED_MAX_MILLIS` after a
/// window the rules or its title give a project (the invitation, the
/// reminder, "join now?", or the project's own work: the lecture joined
/// from its course page), across other cue-less windows (a reminder that
/// names nothing, the volume control, the call app's lobby).
fn fill_invited(sessions: &[ActivitySession], windows: &[Window], found: &mut [Attribution]) {
    let end_of = |s: &ActivitySession| s.ended_at_millis.unwrap_or(s.started_at_millis);
    let cued: Vec<bool> = found.iter().map(|f| f.why != Why::Unknown).collect();
    for i in 0..sessions.len() {
        let s = &sessions[i];
        if cued[i] || end_of(s) - s.started_at_millis > CALL_MAX_MILLIS || !windows[i].call {
            continue;
        }
        if windows[i].talk || windows[i].leisure {
            continue;
        }
        let Some(j) = (0..i).rev().find(|&j| cued[j]) else { continue };
        if found[j].project.is_some() && s.started_at_millis - end_of(&sessions[j]) <= INVITED_MAX_MILLIS {
            found[i] = Attribution { project: found[j].project.clone(), why: Why::Invited };
        }
    }
}

/// A cue-less window counts for the project its very same window (app and
/// title) counted for every other time it could be told: an app whose title
/// never names its file ("Figma") used for one client's work. At least two
/// such stretches, all of one project, and none the user's rules call no
/// project; never mail, chat, time off or a call (each call is its own).
fn fill_same_window(sessions: &[ActivitySession], windows: &[Window], found: &mut [Attribution]) {
    let key = |i: usize| (windows[i].app_key.as_str(), windows[i].title.trim());
    let eligible = |i: usize| !windows[i].talk && !windows[i].leisure && !windows[i].call;
    let open: Vec<usize> = (0..sessions.len()).filter(|&i| found[i].why == Why::Unknown && eligible(i)).collect();
    if open.is_empty() {
        return;
    }
    // Per window: the projects it was given (None: a rule said no project), and how often.
    let mut seen: HashMap<(&str, &str), (Option<String>, usize, bool)> = HashMap::new();
    for (i, f) in found.iter().enumerate() {
        if f.why == Why::Unknown || !eligible(i) {
            continue;
        }
        let entry = seen.entry(key(i)).or_insert((f.project.clone(), 0, true));
        entry.1 += 1;
        entry.2 &= entry.0 == f.project && f.project.is_some();
    }
    for i in open {
        if let Some((Some(project), count, true)) = seen.get(&key(i))
            && *count >= 2
        {
            found[i] = Attribution { project: Some(project.clone()), why: Why::SameWindow };
        }
    }
}

/// A mail's subject as its thread is known by: without the app's name, and
/// without "Re:", "Fwd:" and the composer's "Write:" (None: too short to
/// tell); and whether it had one of those (a reply, a forward or a draft).
fn thread_subject(window: &Window) -> Option<(String, bool)> {
    let app = &window.app_key;
    let mut title = window.title.trim();
    for separator in [" - ", " \u{2014} ", " \u{2013} "] {
        if let Some((head, tail)) = title.rsplit_once(separator)
            && tail.to_lowercase().split_whitespace().any(|word| word.len() >= 4 && app.contains(word))
        {
            title = head;
        }
    }
    let mut subject = title.trim().to_lowercase();
    let mut replied = false;
    while let Some(rest) = ["write:", "re:", "fwd:", "fw:", "aw:", "wg:", "sv:", "tr:", "antw:"].iter().find_map(|p| subject.strip_prefix(p)) {
        subject = rest.trim_start().to_owned();
        replied = true;
    }
    (subject.chars().count() >= 8).then_some((subject, replied))
}

/// A message with no cue takes the project the rest of its thread (the same
/// subject in the same app, with a reply, a forward or a draft among them:
/// not a folder's view) was given, when all of it that was given one was
/// given the same.
fn fill_thread(windows: &[Window], found: &mut [Attribution]) {
    // A thread: a subject in one app with a reply, a forward or a draft among its messages.
    let threads: std::collections::HashSet<(&str, &str)> =
        windows.iter().filter_map(|w| w.thread.as_ref().filter(|(_, replied)| *replied).map(|(s, _)| (w.app_key.as_str(), s.as_str()))).collect();
    let subject = |i: usize| windows[i].thread.as_ref().map(|(s, _)| (windows[i].app_key.as_str(), s.as_str())).filter(|key| threads.contains(key));
    let mut seen: HashMap<(&str, &str), (Option<String>, bool)> = HashMap::new();
    for (i, f) in found.iter().enumerate() {
        if let (Some(key), false) = (subject(i), f.why == Why::Unknown) {
            let entry = seen.entry(key).or_insert((f.project.clone(), true));
            entry.1 &= entry.0 == f.project && f.project.is_some();
        }
    }
    for (i, f) in found.iter_mut().enumerate() {
        if f.why != Why::Unknown {
            continue;
        }
        if let Some(key) = subject(i)
            && let Some((Some(project), true)) = seen.get(&key)
        {
            *f = Attribution { project: Some(project.clone()), why: Why::Thread };
        }
    }
}

/// A window's project from its rule, its own folder or repository, or a
/// known project's name in its title (None: none of these).
fn direct(window: &Window, cue: &Cues, rules: &ProjectRules, names: &[(String, &String)]) -> Option<Attribution> {
    if let Some((rule, line)) = rules.matching(window) {
        return Some(Attribution { project: rule.project.clone(), why: Why::Rule(line.to_owned()) });
    }
    if let Some((name, why)) = &cue.name {
        return Some(Attribution { project: Some(name.clone()), why: why.clone() });
    }
    // The longest name that fits (they come longest first).
    names.iter().find(|(padded, _)| window.words.contains_words(padded)).map(|(_, name)| Attribution { project: Some((*name).clone()), why: Why::Named })
}

/// Stretches without a cue between two of one project count for it: each at
/// most `LOOKUP_MAX_MILLIS` long (a call `CALL_MAX_MILLIS`), the two at most
/// `BETWEEN_MAX_MILLIS` apart besides the calls between them (or a window
/// left open over a break: `left_open_over_a_break`), and not time off. Mail
/// and chat there count too (a reply to the colleague in the middle of the
/// work). A short detour to no project does not end a stretch.
fn fill_between(sessions: &[ActivitySession], windows: &[Window], found: &mut [Attribution]) {
    let known: Vec<Option<String>> = found.iter().map(|f| f.project.clone()).collect();
    let end_of = |s: &ActivitySession| s.ended_at_millis.unwrap_or(s.started_at_millis);
    // Which stretches have a cue of their own (those filled here do not count as one).
    let cued: Vec<bool> = found.iter().map(|f| f.why != Why::Unknown).collect();
    // Which of those end a project's stretch: all but short detours to no project.
    let ends: Vec<bool> = (0..sessions.len())
        .map(|j| cued[j] && (known[j].is_some() || end_of(&sessions[j]) - sessions[j].started_at_millis > DETOUR_MAX_MILLIS))
        .collect();
    let length = |s: &ActivitySession| end_of(s) - s.started_at_millis;
    // The time each cue-less stretch spends in a call.
    let in_call: Vec<i64> = sessions
        .iter()
        .zip(windows.iter().zip(&cued))
        .map(|(s, (window, cued))| if !cued && window.call { length(s) } else { 0 })
        .collect();
    for i in 0..sessions.len() {
        if cued[i] || windows[i].leisure {
            continue;
        }
        if length(&sessions[i]) > if in_call[i] > 0 { CALL_MAX_MILLIS } else { LOOKUP_MAX_MILLIS } {
            continue;
        }
        // The nearest stretches before and after with a project of their own, across other cue-less ones.
        let before = (0..i).rev().find(|&j| ends[j]);
        let after = (i + 1..sessions.len()).find(|&j| ends[j]);
        let (Some(before), Some(after)) = (before, after) else { continue };
        if known[before].is_none() || known[before] != known[after] {
            continue;
        }
        let calls: i64 = in_call[before + 1..after].iter().sum();
        let apart = sessions[after].started_at_millis - end_of(&sessions[before]) - calls;
        if apart <= BETWEEN_MAX_MILLIS || left_open_over_a_break(sessions, windows, before, i, after, calls) {
            found[i] = Attribution { project: known[before].clone(), why: Why::Between };
        }
    }
}

/// Whether the cue-less window `i`, between two stretches of a project
/// (`before`, `after`) further apart than `BETWEEN_MAX_MILLIS`, is one the
/// user left open over a break (`BREAK_MIN_MILLIS` or longer without a
/// window) and went back to: the very same window on both sides of the
/// break, at most `BETWEEN_MAX_MILLIS` of work between the two stretches
/// besides calls, at most `BREAK_SPAN_MAX_MILLIS` apart in all. The document
/// being translated before lunch and after it; not the news read before lunch.
fn left_open_over_a_break(sessions: &[ActivitySession], windows: &[Window], before: usize, i: usize, after: usize, calls: i64) -> bool {
    let end_of = |s: &ActivitySession| s.ended_at_millis.unwrap_or(s.started_at_millis);
    if sessions[after].started_at_millis - end_of(&sessions[before]) > BREAK_SPAN_MAX_MILLIS {
        return false;
    }
    let worked: i64 = sessions[before + 1..after].iter().map(|s| end_of(s) - s.started_at_millis).sum();
    if worked - calls > BETWEEN_MAX_MILLIS {
        return false;
    }
    // The breaks between the two stretches: where one window ends long before the next starts.
    let breaks: Vec<usize> = (before..after).filter(|&k| sessions[k + 1].started_at_millis - end_of(&sessions[k]) >= BREAK_MIN_MILLIS).collect();
    let uses: Vec<usize> = (before + 1..after).filter(|&k| windows[k].app == windows[i].app && windows[k].title == windows[i].title).collect();
    // Used before the break and after it; the window the break left in front (k, then k + 1) is one use.
    breaks.iter().any(|&k| uses.iter().any(|&a| a <= k && uses.iter().any(|&b| b > k && (a, b) != (k, k + 1))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(app: &str, title: &str, url: Option<&str>, start_min: i64, minutes: i64) -> ActivitySession {
        ActivitySession {
            session_id: start_min,
            app: app.into(),
            title: title.into(),
            started_at_millis: start_min * 60_000,
            ended_at_millis: Some((start_min + minutes) * 60_000),
            url: url.map(str::to_owned),
            ..ActivitySession::default()
        }
    }

    fn projects(sessions: &[ActivitySession], rules: &str) -> Vec<Option<String>> {
        attribute(sessions, &ProjectRules::parse(rules).unwrap()).into_iter().map(|a| a.project).collect()
    }

    #[test]
    fn time_off_is_a_leisure_site_or_its_subdomain_never_a_name_that_ends_like_one() {
        let leisure = |app: &str, url: Option<&str>| Window::of(&session(app, "t", url, 0, 1)).leisure;
        assert!(leisure("firefox", Some("https://www.youtube.com/watch?v=1")));
        assert!(leisure("firefox", Some("https://m.youtube.com/watch?v=1")));
        assert!(leisure("firefox", Some("https://old.reddit.com:443/r/rust")));
        assert!(leisure("firefox", Some("https://fosstodon.mastodon.social/@a")));
        assert!(leisure("org.gnome.Steam", None));
        assert!(!leisure("firefox", Some("https://notyoutube.com/watch")));
        assert!(!leisure("firefox", Some("https://youtube.com.example.org/")));
        assert!(!leisure("firefox", Some("https://docs.rs/ratatui")));
        assert!(!leisure("steamroller", None));
    }

    #[test]
    fn windows_name_their_projects_by_folder_workspace_repository_and_ticket() {
        let sessions = [
            session("code", "● ledger.rs - ledger-svc - Visual Studio Code", None, 0, 30),
            session("kitty", "dana@thinkpad: ~/src/ledger-svc/crates/core", None, 30, 10),
            session("jetbrains-idea", "billing-api \u{2013} InvoiceService.kt", None, 40, 10),
            session("firefox", "Pull request #88 · northwind/route-planner · GitHub — Mozilla Firefox", Some("https://github.com/northwind/route-planner/pull/88"), 50, 10),
            session("firefox", "git checkout ATL-142 in ledger-svc", None, 60, 5),
            session("firefox", "ATL-150 Empty invoice crashes export - Jira — Mozilla Firefox", Some("https://acme.atlassian.net/browse/ATL-150"), 65, 5),
            session("firefox", "OPS-7 Rotate keys - Jira — Mozilla Firefox", Some("https://ops.atlassian.net/browse/OPS-7"), 70, 5),
            session("firefox", "OPS-8 Renew certificates - Jira — Mozilla Firefox", Some("https://ops.atlassian.net/browse/OPS-8"), 75, 5),
            // One mention of something key-shaped is not a project.
            session("firefox", "GPT-4 - Wikipedia — Mozilla Firefox", Some("https://en.wikipedia.org/wiki/GPT-4"), 80, 5),
            session("kitty", "dana@thinkpad: ~/Downloads", None, 200, 5),
            session("code-oss", "globex-api - Code - OSS", None, 210, 5),
            session("firefox", "MR !12 · globex-inc / payments / billing-api · GitLab", Some("https://gitlab.com/globex-inc/payments/billing-api/-/merge_requests/12"), 215, 5),
        ];
        assert_eq!(
            projects(&sessions, ""),
            [
                Some("ledger-svc"),
                Some("ledger-svc"),
                Some("billing-api"),
                Some("route-planner"),
                Some("ledger-svc"),
                Some("ledger-svc"),
                Some("OPS"),
                Some("OPS"),
                None,
                None,
                Some("globex-api"),
                Some("billing-api")
            ]
            .map(|p| p.map(str::to_owned))
        );
    }

    #[test]
    fn rules_come_first_and_a_projects_name_is_found_in_documents_and_meetings() {
        let rules = "Atlas: ledger-svc, ATL, acme.example\nNo project: /^general \\(channel\\)/\nRoute planner: route-planner";
        let sessions = [
            session("code", "ledger.rs - ledger-svc - Visual Studio Code", None, 0, 30),
            session("libreoffice-writer", "Atlas SOW 2026.odt - LibreOffice Writer", None, 30, 20),
            session("firefox", "Staging — Mozilla Firefox", Some("https://staging.acme.example/invoices"), 50, 5),
            session("Slack", "general (Channel) - Acme - Slack", None, 55, 5),
            session("firefox", "Meet – Route planner weekly — Mozilla Firefox", Some("https://meet.google.com/abc-defg-hij"), 60, 30),
        ];
        let found = attribute(&sessions, &ProjectRules::parse(rules).unwrap());
        let names: Vec<Option<&str>> = found.iter().map(|a| a.project.as_deref()).collect();
        assert_eq!(names, [Some("Atlas"), Some("Atlas"), Some("Atlas"), None, Some("Route planner")]);
        assert_eq!(found[0].why, Why::Rule("Atlas: ledger-svc, ATL, acme.example".into()));
        assert!(found[0].why.describe().contains("Atlas: ledger-svc"));
    }

    #[test]
    fn a_lookup_a_call_or_a_message_between_two_stretches_of_a_project_counts_for_it_but_time_off_does_not() {
        let sessions = [
            session("code", "ledger.rs - ledger-svc - Visual Studio Code", None, 0, 30),
            session("firefox", "rust - How do I sum a Vec<u64>? - Stack Overflow — Mozilla Firefox", Some("https://stackoverflow.com/q/1"), 30, 4),
            session("Slack", "random (Channel) - Acme - Slack", None, 34, 3),
            session("code", "main.rs - ledger-svc - Visual Studio Code", None, 37, 30),
            // Time off is not counted, however short.
            session("firefox", "Hacker News — Mozilla Firefox", Some("https://news.ycombinator.com/"), 67, 10),
            session("code", "main.rs - ledger-svc - Visual Studio Code", None, 77, 30),
            // Half an hour of documentation and a call between two stretches are; 50 minutes of it is not.
            session("firefox", "tokio::sync - Rust — Mozilla Firefox", Some("https://docs.rs/tokio/latest/tokio/sync/"), 107, 30),
            session("zoom", "Zoom Meeting", None, 137, 10),
            session("code", "main.rs - ledger-svc - Visual Studio Code", None, 147, 30),
            session("firefox", "The Rust Reference — Mozilla Firefox", Some("https://doc.rust-lang.org/reference/"), 177, 50),
            session("code", "main.rs - ledger-svc - Visual Studio Code", None, 227, 30),
            // Nor is what lies between two stretches more than an hour apart.
            session("kitty", "dana@thinkpad: ~", None, 257, 20),
            session("firefox", "Weather — Mozilla Firefox", Some("https://weather.example/"), 277, 45),
            session("code", "main.rs - ledger-svc - Visual Studio Code", None, 322, 30),
        ];
        let l = || Some("ledger-svc");
        let expected = [l(), l(), l(), l(), None, l(), l(), l(), l(), None, l(), None, None, l()];
        assert_eq!(projects(&sessions, ""), expected.map(|p| p.map(str::to_owned)));
    }

    #[test]
    fn a_meeting_of_an_hour_counts_and_a_glance_at_no_project_does_not_end_a_stretch() {
        let rules = "Halden: HOB\nNo project: /^Inbox\\b/, Signal";
        let sessions = [
            session("firefox", "HOB-61 Progress steps - Jira", None, 0, 10),
            // A glance at the inbox and a chat: no project, and the stretch goes on.
            session("thunderbird", "Inbox - maren@holt.design - Mozilla Thunderbird", None, 10, 1),
            session("Signal", "Signal", None, 11, 2),
            session("figma-linux", "Figma", None, 13, 40),
            session("firefox", "HOB-62 Copy for the ID step - Jira", None, 53, 5),
            // A call of 55 minutes (more than a lookup's 45) with its app's window before it.
            session("zoom", "Zoom Workplace", None, 58, 1),
            session("zoom", "Zoom Meeting", None, 59, 55),
            session("firefox", "HOB-62 Copy for the ID step - Jira", None, 114, 5),
            // Ten minutes of no project does end it.
            session("Signal", "Signal", None, 119, 10),
            session("figma-linux", "Figma", None, 129, 20),
            session("firefox", "HOB-63 Empty state - Jira", None, 149, 5),
            // A call of two and a half hours is not a meeting of the project by its neighbours alone.
            session("zoom", "Zoom Meeting", None, 154, 150),
            session("firefox", "HOB-63 Empty state - Jira", None, 304, 5),
        ];
        let h = || Some("Halden");
        let expected = [h(), None, None, h(), h(), h(), h(), h(), None, None, h(), None, h()];
        assert_eq!(projects(&sessions, rules), expected.map(|p| p.map(str::to_owned)));
        let found = attribute(&sessions, &ProjectRules::parse(rules).unwrap());
        assert_eq!(found[6].why, Why::Between);
    }

    #[test]
    fn a_call_joined_from_its_invitation_and_a_window_that_never_names_its_file_take_their_project() {
        let rules = "Pinecrest: Pinecrest\nHalden: HOB";
        let sessions = [
            session("code", "atlas.tf - acme-infra - Visual Studio Code", None, 0, 30),
            // The reminder names the project; the call after it (past the lobby) is its meeting.
            session("thunderbird", "Pinecrest: findings walkthrough – 16:00 - Mozilla Thunderbird", None, 30, 1),
            session("zoom", "Zoom Workplace", None, 31, 1),
            session("zoom", "Zoom Meeting", None, 32, 50),
            session("code", "atlas.tf - acme-infra - Visual Studio Code", None, 82, 10),
            // A call long after a message is not its meeting.
            session("thunderbird", "Pinecrest: findings walkthrough – 16:00 - Mozilla Thunderbird", None, 92, 1),
            session("firefox", "Weather — Mozilla Firefox", Some("https://weather.example/"), 93, 10),
            session("zoom", "Zoom Meeting", None, 103, 30),
            // "Figma" names no file: twice between Halden's stretches, so the third time (before lunch) too.
            session("firefox", "HOB-1 Steps - Jira", None, 200, 5),
            session("figma-linux", "Figma", None, 205, 20),
            session("firefox", "HOB-2 Copy - Jira", None, 225, 5),
            session("figma-linux", "Figma", None, 230, 20),
            session("firefox", "HOB-3 Empty state - Jira", None, 250, 5),
            session("figma-linux", "Figma", None, 255, 30),
        ];
        let found = attribute(&sessions, &ProjectRules::parse(rules).unwrap());
        let got: Vec<(Option<&str>, &Why)> = found.iter().map(|a| (a.project.as_deref(), &a.why)).collect();
        assert_eq!(got[3], (Some("Pinecrest"), &Why::Invited));
        assert_eq!(got[2], (Some("Pinecrest"), &Why::Invited), "the call app's lobby on the way in too");
        assert_eq!(got[7], (None, &Why::Unknown));
        assert_eq!(got[13], (Some("Halden"), &Why::SameWindow));
        // One stretch of another project in that same window: it could be either, so neither.
        let mut mixed = sessions.to_vec();
        mixed.push(session("firefox", "Pinecrest report — Mozilla Firefox", None, 400, 5));
        mixed.push(session("figma-linux", "Figma", None, 405, 20));
        mixed.push(session("firefox", "Pinecrest report — Mozilla Firefox", None, 425, 5));
        let found = attribute(&mixed, &ProjectRules::parse(rules).unwrap());
        assert_eq!((found[13].project.as_deref(), &found[13].why), (None, &Why::Unknown));
    }

    #[test]
    fn a_call_from_a_projects_work_a_document_left_open_over_lunch_and_a_mail_thread_take_their_project() {
        let rules = "FH Teaching: TS-WS26\nLingua: /LA-26-\\d{4}/\nKrenn: KS-400\nNo project: orf.at";
        let sessions = [
            // The lecture joined from the course page, past a reminder that names nothing.
            session("firefox", "TS-WS26: Übung 7 | FHD Moodle — Mozilla Firefox", None, 0, 10),
            session("org.gnome.Evolution-alarm-notify", "Reminders", None, 10, 1),
            session("zoom", "Zoom Meeting", None, 11, 90),
            // The translation before lunch and after it: the document left open counts, the news does not.
            session("org-omegat-Main", "OmegaT 6.0.1 :: LA-26-1187_Brandner", None, 200, 20),
            session("libreoffice-writer", "Hinweise_EN.docx - LibreOffice Writer", None, 220, 15),
            session("firefox", "news.ORF.at — Mozilla Firefox", Some("https://orf.at/"), 295, 3),
            session("libreoffice-writer", "Hinweise_EN.docx - LibreOffice Writer", None, 298, 16),
            session("firefox", "Job LA-26-1187 | Vendor Portal — Mozilla Firefox", None, 314, 2),
            // The news read before a lunch, its tab in front over it, is not the project's.
            session("org-omegat-Main", "OmegaT 6.0.1 :: LA-26-1190_Lenz", None, 400, 20),
            session("firefox", "Der Standard — Mozilla Firefox", None, 420, 5),
            session("firefox", "Der Standard — Mozilla Firefox", None, 490, 1),
            session("firefox", "Job LA-26-1190 | Vendor Portal — Mozilla Firefox", None, 491, 2),
            // A message between two stretches of Krenn; its reply, days later, alone.
            session("firefox", "KS-400 Operating Manual — Mozilla Firefox", None, 600, 10),
            session("org.gnome.Evolution", "chapter 4 for review", None, 610, 2),
            session("firefox", "KS-400 Operating Manual — Mozilla Firefox", None, 612, 10),
            session("org.gnome.Evolution", "Re: chapter 4 for review", None, 3000, 2),
            // The same subject in another app, and a thread nobody named, are not.
            session("thunderbird", "Write: Re: chapter 4 for review - Thunderbird", None, 4000, 2),
            session("org.gnome.Evolution", "Re: quick question", None, 5000, 2),
        ];
        let found = attribute(&sessions, &ProjectRules::parse(rules).unwrap());
        let got: Vec<(Option<&str>, &Why)> = found.iter().map(|a| (a.project.as_deref(), &a.why)).collect();
        assert_eq!(got[2], (Some("FH Teaching"), &Why::Invited), "{got:?}");
        assert_eq!(got[4], (Some("Lingua"), &Why::Between), "left open over lunch: {got:?}");
        assert_eq!(got[6], (Some("Lingua"), &Why::Between));
        assert_eq!(got[5].0, None, "the rules say no project");
        assert_eq!(got[9], (None, &Why::Unknown), "read before lunch and left in front: {got:?}");
        assert_eq!(got[13], (Some("Krenn"), &Why::Between), "a message between two stretches");
        assert_eq!(got[15], (Some("Krenn"), &Why::Thread), "its reply");
        assert_eq!(got[16], (None, &Why::Unknown));
        assert_eq!(got[17], (None, &Why::Unknown));
    }

    #[test]
    fn a_rule_may_hold_a_regular_expression_with_commas_and_capitals_are_a_key_or_a_name() {
        let rules = ProjectRules::parse("Atlas: /inv-[0-9]{1,3}/, ATL\nAcme Portal: PORT\nNASA: NASA").unwrap();
        let sessions = [
            session("firefox", "INV-42 draft", None, 0, 5),
            session("firefox", "ATL-9 Fix totals", None, 5, 5),
            session("firefox", "Port 8080 already in use - Stack Overflow", None, 100, 5),
            session("firefox", "NASA Earthdata login", None, 200, 5),
        ];
        let found: Vec<Option<String>> = attribute(&sessions, &rules).into_iter().map(|a| a.project).collect();
        assert_eq!(found, [Some("Atlas".to_owned()), Some("Atlas".to_owned()), None, Some("NASA".to_owned())]);
        assert_eq!(split_terms("a, /x{1,2}/, b"), ["a", " /x{1,2}/", " b"]);
    }

    #[test]
    fn always_count_this_window_as_a_project_edits_the_rules() {
        let rules = "Atlas: ledger-svc\nKestrel: kestrel";
        let title = "Budget, Q3 (draft) - LibreOffice Calc";
        let counted = with_title_rule(rules, "Kestrel", title);
        assert!(counted.starts_with("Kestrel: /^Budget"), "{counted}");
        let parsed = ProjectRules::parse(&counted).unwrap();
        let found = attribute(&[session("libreoffice-calc", title, None, 0, 5)], &parsed);
        assert_eq!(found[0].project.as_deref(), Some("Kestrel"));
        // Moved to another project: out of the first, into the second; twice is once.
        let moved = with_title_rule(&with_title_rule(&counted, "Atlas", title), "Atlas", title);
        assert_eq!(moved.matches("Budget").count(), 1, "{moved}");
        let found = attribute(&[session("libreoffice-calc", title, None, 0, 5)], &ProjectRules::parse(&moved).unwrap());
        assert_eq!(found[0].project.as_deref(), Some("Atlas"));
        // No project, and a new project's line.
        let out = with_title_rule(&moved, "No project", title);
        assert_eq!(attribute(&[session("libreoffice-calc", title, None, 0, 5)], &ProjectRules::parse(&out).unwrap())[0].project, None);
        assert!(with_title_rule("", "Osprey", "x").starts_with("Osprey: /^x$/"));
        // A title with slashes and commas stays one term.
        let path = "~/src/a/, b - kitty";
        let counted = ProjectRules::parse(&with_title_rule("", "Osprey", path)).unwrap();
        assert_eq!(attribute(&[session("kitty", path, None, 0, 5)], &counted)[0].project.as_deref(), Some("Osprey"));
    }

    #[test]
    fn bad_rules_say_which_line() {
        assert!(ProjectRules::parse("Atlas: ok\nno colon here").unwrap_err().contains("line 2"));
        assert!(ProjectRules::parse("Atlas: /(broken/").unwrap_err().contains("line 1"));
        assert!(ProjectRules::parse(": x").unwrap_err().contains("no name"));
        assert_eq!(ProjectRules::parse("# a comment\n\nAtlas: a, b").unwrap().projects(), ["Atlas"]);
    }

    #[test]
    fn what_was_prepared_is_kept_as_sessions_are_added_and_read_again_when_they_change() {
        let rules = ProjectRules::parse("Atlas: ledger-svc").unwrap();
        let mut sessions: Vec<ActivitySession> = [
            ("code", "export.rs - ledger-svc - Visual Studio Code"),
            ("firefox", "ATL-142 Rounding - Jira"),
            ("kitty", "dana@thinkpad: ~/src/route-planner"),
            ("firefox", "ATL-143 Totals - Jira"),
        ]
        .iter()
        .enumerate()
        .map(|(i, (app, title))| ActivitySession { session_id: i as i64 + 1, ..session(app, title, None, i as i64 * 10, 10) })
        .collect();
        let mut prepared = Prepared::default();
        assert_eq!(attribute_with(&mut prepared, &sessions[..2], &rules), attribute(&sessions[..2], &rules));
        assert_eq!(prepared.ids, [1, 2]);
        // Two more: the first two are kept, and the result is what a fresh reading gives.
        assert_eq!(attribute_with(&mut prepared, &sessions, &rules), attribute(&sessions, &rules));
        assert_eq!(prepared.ids, [1, 2, 3, 4]);
        // A session replaced in the middle (a reload, a deletion): read again from there.
        sessions[1] = ActivitySession { session_id: 9, ..session("firefox", "Weather - Mozilla Firefox", None, 10, 10) };
        sessions.remove(2);
        assert_eq!(attribute_with(&mut prepared, &sessions, &rules), attribute(&sessions, &rules));
        assert_eq!(prepared.ids, [1, 9, 4]);
        assert_eq!(prepared.windows[1].title, "Weather - Mozilla Firefox");
    }
}
