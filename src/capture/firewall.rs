//! The privacy firewall: one rule engine (pause, quiet hours, app allow and
//! deny lists, private windows, title patterns, domains), evaluated before
//! anything is recorded. A window it excludes is treated as if nothing were
//! focused: the previous session ends and no row is written for it, anywhere.
//! The rules are settings, and a change reaches capture as
//! `CaptureCommand::SetRules`.
//!
//! Pure logic (no I/O, no clock): the capture worker passes the observation and
//! the local time; tests drive it directly.

use regex::Regex;

/// What capture knows about the window it is about to record.
#[derive(Clone, Debug, Default)]
pub struct Observation<'a> {
    pub app: &'a str,
    pub title: &'a str,
    pub url: Option<&'a str>,
    /// Minutes since local midnight, for quiet hours.
    pub local_minute: u32,
}

/// Why something was (not) recorded: the rule that decided it, for the
/// Context panel's "what would be recorded right now".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Record,
    Exclude { rule: String },
}

impl Decision {
    pub fn is_record(&self) -> bool {
        matches!(self, Decision::Record)
    }
}

/// Password managers are excluded unless the user removes them from the deny list.
pub const DEFAULT_DENIED_APPS: &[&str] =
    &["keepassxc", "keepass2", "bitwarden", "1password", "lastpass", "enpass", "seahorse", "proton pass"];

#[derive(Clone, Debug)]
pub struct Rules {
    /// Global pause (hotkey, tray): nothing is recorded.
    pub paused: bool,
    /// When non-empty, only these apps are recorded (case-insensitive, by WM_CLASS).
    pub allowed_apps: Vec<String>,
    pub denied_apps: Vec<String>,
    pub denied_titles: Vec<Regex>,
    /// Domains excluded with their subdomains (`bank.example` also covers `www.bank.example`).
    pub denied_domains: Vec<String>,
    pub exclude_private_windows: bool,
    /// Local-time ranges [start, end) in minutes since midnight; may wrap midnight.
    pub quiet_hours: Vec<(u32, u32)>,
    /// Path patterns of documents memory does not keep (`memory.document_exclude`,
    /// one glob per line): what was kept before a pattern was added is withheld
    /// from other assistants and apps by it too (`tools::memory`).
    pub document_exclude: String,
}

impl Default for Rules {
    fn default() -> Self {
        Self {
            paused: false,
            allowed_apps: Vec::new(),
            denied_apps: DEFAULT_DENIED_APPS.iter().map(|s| (*s).to_owned()).collect(),
            denied_titles: Vec::new(),
            denied_domains: Vec::new(),
            exclude_private_windows: true,
            quiet_hours: Vec::new(),
            document_exclude: String::new(),
        }
    }
}

impl Rules {
    /// Decides one observation; the first rule that excludes it wins.
    pub fn decide(&self, observation: &Observation<'_>) -> Decision {
        let exclude = |rule: String| Decision::Exclude { rule };
        if let Some(rule) = self.time_exclusion(observation.local_minute) {
            return exclude(rule);
        }
        self.standing_exclusion(Some(observation.app), observation.title, observation.url).map_or(Decision::Record, exclude)
    }

    /// Pause and quiet hours: the rules that hold whatever is focused (listen
    /// mode closes the microphone under them).
    pub fn time_exclusion(&self, local_minute: u32) -> Option<String> {
        if self.paused {
            return Some("capture is paused".into());
        }
        self.quiet_hours
            .iter()
            .find(|(s, e)| in_range(local_minute, *s, *e))
            .map(|&(start, end)| format!("quiet hours {}–{}", clock(start), clock(end)))
    }

    /// The rules that do not depend on the time (everything but pause and
    /// quiet hours); `app` None skips the app lists.
    fn standing_exclusion(&self, app: Option<&str>, title: &str, url: Option<&str>) -> Option<String> {
        if let Some(app) = app {
            let lower = app.to_lowercase();
            if !self.allowed_apps.is_empty() && !self.allowed_apps.iter().any(|a| a.eq_ignore_ascii_case(&lower)) {
                return Some(format!("app {app} is not on the allow list"));
            }
            if let Some(denied) = self.denied_apps.iter().find(|d| lower.contains(&d.to_lowercase())) {
                return Some(format!("app deny list: {denied}"));
            }
        }
        if self.exclude_private_windows && is_private_window(title) {
            return Some("private or incognito window".into());
        }
        if let Some(pattern) = self.denied_titles.iter().find(|p| p.is_match(title)) {
            return Some(format!("title matches /{}/", pattern.as_str()));
        }
        if let Some(host) = url.and_then(host_of)
            && let Some(domain) = self.denied_domains.iter().find(|d| domain_matches(&host, d))
        {
            return Some(format!("domain deny list: {domain}"));
        }
        None
    }

    /// Whether something already recorded is now withheld from those who read
    /// memory from outside (`cowork mcp serve`): the rules as they are today,
    /// without the time-bound ones (pause, quiet hours). A rule the user adds
    /// later covers what was recorded before it. `app` is None for what no
    /// app owns (chat messages): then only the title rules apply.
    pub fn withholds(&self, app: Option<&str>, title: &str, url: Option<&str>) -> bool {
        self.standing_exclusion(app, title, url).is_some()
    }

    /// Whether free text (a chat message, a summary, what a tool returned)
    /// names something the rules withhold: a denied app or domain as a word,
    /// a denied title pattern, a private window.
    pub fn mentions(&self, text: &str) -> bool {
        let lower = text.to_lowercase();
        self.denied_apps.iter().any(|app| contains_word(&lower, &app.trim().to_lowercase()))
            || self.denied_domains.iter().any(|domain| contains_word(&lower, domain.trim().trim_start_matches('.').to_lowercase().as_str()))
            || self.denied_titles.iter().any(|pattern| pattern.is_match(text))
            || (self.exclude_private_windows && is_private_window(text))
    }
}

/// The firewall's rules as the user writes them in Settings: lists one item
/// per line or comma, quiet hours as `22:00-07:00`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleText {
    pub paused: bool,
    pub allowed_apps: String,
    pub denied_apps: String,
    pub denied_titles: String,
    pub denied_domains: String,
    pub quiet_hours: String,
    pub exclude_private_windows: bool,
}

impl Default for RuleText {
    fn default() -> Self {
        Self {
            paused: false,
            allowed_apps: String::new(),
            denied_apps: DEFAULT_DENIED_APPS.join(", "),
            denied_titles: String::new(),
            denied_domains: String::new(),
            quiet_hours: String::new(),
            exclude_private_windows: true,
        }
    }
}

impl RuleText {
    /// Compiles the text into rules; the error names the line that is wrong.
    pub fn compile(&self) -> Result<Rules, String> {
        Ok(Rules {
            paused: self.paused,
            allowed_apps: parse_list(&self.allowed_apps),
            denied_apps: parse_list(&self.denied_apps),
            denied_titles: parse_title_patterns(&self.denied_titles)?,
            denied_domains: parse_list(&self.denied_domains).into_iter().map(|d| d.to_lowercase()).collect(),
            exclude_private_windows: self.exclude_private_windows,
            quiet_hours: parse_quiet_hours(&self.quiet_hours)?,
            // Kept with the documents settings; `Settings::rules` fills it in.
            document_exclude: String::new(),
        })
    }
}

/// Items separated by commas or newlines, trimmed, empty ones dropped.
pub fn parse_list(text: &str) -> Vec<String> {
    text.split([',', '\n']).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// One regular expression per line (commas are part of a pattern).
pub fn parse_title_patterns(text: &str) -> Result<Vec<Regex>, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| Regex::new(line).map_err(|err| format!("title pattern /{line}/ is not a regular expression: {err}")))
        .collect()
}

/// `22:00-07:00, 12:30-13:00` → minute ranges.
pub fn parse_quiet_hours(text: &str) -> Result<Vec<(u32, u32)>, String> {
    fn minute(hhmm: &str) -> Option<u32> {
        let (h, m) = hhmm.trim().split_once(':')?;
        let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
        (h < 24 && m < 60).then_some(h * 60 + m)
    }
    parse_list(text)
        .iter()
        .map(|range| {
            range
                .split_once(['-', '–'])
                .and_then(|(a, b)| Some((minute(a)?, minute(b)?)))
                .filter(|(a, b)| a != b)
                .ok_or_else(|| format!("quiet hours {range:?} is not a range like 22:00-07:00"))
        })
        .collect()
}

fn in_range(minute: u32, start: u32, end: u32) -> bool {
    if start <= end { minute >= start && minute < end } else { minute >= start || minute < end }
}

fn clock(minute: u32) -> String {
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

/// Titles browsers give private windows.
pub fn is_private_window(title: &str) -> bool {
    let lower = title.to_lowercase();
    lower.contains("private browsing") || lower.contains("(incognito)") || lower.ends_with("incognito")
}

/// The host of a URL, lowercased, without port or credentials.
pub fn host_of(url: &str) -> Option<String> {
    // As a browser reads it, when it parses (`http://a\@b/` is a page of a).
    if let Ok(parsed) = url::Url::parse(url)
        && let Some(host) = parsed.host_str()
    {
        return Some(host.trim_start_matches('[').trim_end_matches(']').to_lowercase());
    }
    let rest = url.split_once("://").map(|(_, rest)| rest).unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    let host = host.split(':').next()?.trim_end_matches('.');
    (!host.is_empty()).then(|| host.to_lowercase())
}

/// Whether `needle` occurs in `haystack` with no letter or digit right before or after it.
fn contains_word(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let mut from = 0;
    while let Some(at) = haystack[from..].find(needle) {
        let start = from + at;
        let end = start + needle.len();
        let before = haystack[..start].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let after = haystack[end..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        if before && after {
            return true;
        }
        from = start + haystack[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

fn domain_matches(host: &str, domain: &str) -> bool {
    let domain = domain.trim_start_matches('.').to_lowercase();
    host == domain || host.ends_with(&format!(".{domain}"))
}

/// A chat message containing `<no-memory>` is answered but not stored in memory.
pub fn wants_no_memory(text: &str) -> bool {
    text.contains("<no-memory>")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs<'a>(app: &'a str, title: &'a str, url: Option<&'a str>) -> Observation<'a> {
        Observation { app, title, url, local_minute: 12 * 60 }
    }

    #[test]
    fn password_managers_are_excluded_by_default() {
        let rules = Rules::default();
        assert!(!rules.decide(&obs("KeePassXC", "Passwords.kdbx", None)).is_record());
        assert!(!rules.decide(&obs("Bitwarden", "Vault", None)).is_record());
        assert!(rules.decide(&obs("XTerm", "bash", None)).is_record());
    }

    #[test]
    fn what_was_recorded_is_withheld_by_todays_rules_but_not_by_pause_or_quiet_hours() {
        let rules = Rules {
            paused: true,
            quiet_hours: vec![(0, 24 * 60)],
            allowed_apps: vec!["firefox".into()],
            denied_titles: vec![Regex::new("(?i)salary").unwrap()],
            denied_domains: vec!["bank.example".into()],
            ..Rules::default()
        };
        assert!(!rules.withholds(Some("Firefox"), "Flights to Lisbon", Some("https://tap.example/")), "pause and quiet hours are about recording");
        assert!(rules.withholds(Some("XTerm"), "bash", None), "not on the allow list");
        assert!(rules.withholds(Some("firefox"), "Salary review", None));
        assert!(rules.withholds(Some("firefox"), "Account", Some("https://www.bank.example/login")));
        assert!(!rules.withholds(None, "a chat about flights", None), "the app lists do not cover chat");
        assert!(rules.withholds(None, "my salary question", None));
    }

    #[test]
    fn every_rule_kind_names_itself() {
        let rules = Rules {
            allowed_apps: vec![],
            denied_titles: vec![Regex::new("(?i)salary").unwrap()],
            denied_domains: vec!["bank.example".into()],
            quiet_hours: vec![(22 * 60, 7 * 60)],
            ..Rules::default()
        };
        let reason = |d: Decision| match d {
            Decision::Exclude { rule } => rule,
            Decision::Record => "record".into(),
        };
        assert_eq!(reason(rules.decide(&obs("LibreOffice", "Salary review.ods", None))), "title matches /(?i)salary/");
        assert_eq!(
            reason(rules.decide(&obs("firefox", "Login", Some("https://user@www.Bank.example:443/login")))),
            "domain deny list: bank.example"
        );
        assert_eq!(reason(rules.decide(&obs("firefox", "notbank", Some("https://notbank.example/")))), "record");
        assert_eq!(
            reason(rules.decide(&obs("firefox", "Mozilla Firefox Private Browsing", None))),
            "private or incognito window"
        );
        let late = Observation { local_minute: 23 * 60, ..obs("XTerm", "bash", None) };
        assert_eq!(reason(rules.decide(&late)), "quiet hours 22:00–07:00");
        let early = Observation { local_minute: 6 * 60 + 59, ..obs("XTerm", "bash", None) };
        assert!(!rules.decide(&early).is_record());
        let paused = Rules { paused: true, ..Rules::default() };
        assert_eq!(reason(paused.decide(&obs("XTerm", "bash", None))), "capture is paused");
        let allow = Rules { allowed_apps: vec!["xterm".into()], ..Rules::default() };
        assert!(allow.decide(&obs("XTerm", "bash", None)).is_record());
        assert_eq!(reason(allow.decide(&obs("firefox", "x", None))), "app firefox is not on the allow list");
    }

    #[test]
    fn no_memory_is_detected() {
        assert!(wants_no_memory("remember nothing <no-memory> please"));
        assert!(!wants_no_memory("normal"));
    }

    #[test]
    fn rule_text_compiles_and_names_the_broken_line() {
        let text = RuleText {
            denied_titles: "(?i)salary\nbank statement".into(),
            denied_domains: "Bank.example, mail.example".into(),
            quiet_hours: "22:00-07:00\n12:30–13:00".into(),
            ..RuleText::default()
        };
        let rules = text.compile().unwrap();
        assert_eq!(rules.denied_titles.len(), 2);
        assert_eq!(rules.denied_domains, vec!["bank.example", "mail.example"]);
        assert_eq!(rules.quiet_hours, vec![(22 * 60, 7 * 60), (12 * 60 + 30, 13 * 60)]);
        assert!(rules.denied_apps.iter().any(|a| a == "keepassxc"));
        let broken = RuleText { denied_titles: "ok\n(unclosed".into(), ..RuleText::default() };
        assert!(broken.compile().unwrap_err().contains("(unclosed"));
        let hours = RuleText { quiet_hours: "25:00-07:00".into(), ..RuleText::default() };
        assert!(hours.compile().unwrap_err().contains("25:00-07:00"));
    }

    #[test]
    fn hosts_are_parsed_without_port_or_credentials() {
        assert_eq!(host_of("https://u:p@Example.COM:8080/a?b#c").as_deref(), Some("example.com"));
        assert_eq!(host_of("example.org/path").as_deref(), Some("example.org"));
        // As a browser reads it: extra slashes after a special scheme are skipped, a backslash is a slash.
        assert_eq!(host_of("https:///nohost").as_deref(), Some("nohost"));
        assert_eq!(host_of("https://mybank.example\\@evil.example/").as_deref(), Some("mybank.example"));
        assert_eq!(host_of("https://").as_deref(), None);
    }
}
