//! Meetings (issue 58), pure: whether a window is a call — a call app, or a
//! browser on a call's address or with a call's title — and the detector
//! that turns what is seen every few seconds (the focused window; whether an
//! app other than cowork is recording from a microphone) into an offer to
//! listen, once per call, and the call's end. Nothing here listens: the offer
//! is a question to the user, and only their click starts listen mode.
//! Afterwards the meeting note: the transcript numbered (You for the
//! microphone, Others for the computer's output) in parts that fit a small
//! model's prompt, and the model's summary, decisions and action items read
//! back strictly (each must cite transcript lines; an owner must be the user
//! or a name said in the call).

use crate::day::cites::{cites, without_cites};

/// A window that is a call, or an app that makes them: the service's name.
pub fn call_service(app: &str, title: &str, url: Option<&str>) -> Option<&'static str> {
    let app = app.to_lowercase();
    let title_lower = title.to_lowercase();
    // Apps that exist for calls.
    const CALL_APPS: [(&str, &str); 8] = [
        ("zoom", "Zoom"),
        ("teams", "Microsoft Teams"),
        ("skype", "Skype"),
        ("webex", "Webex"),
        ("jitsi", "Jitsi Meet"),
        ("whereby", "Whereby"),
        ("bluejeans", "BlueJeans"),
        ("gotomeeting", "GoTo Meeting"),
    ];
    if let Some((_, name)) = CALL_APPS.iter().find(|(key, _)| app.contains(key)) {
        return Some(name);
    }
    // Chat apps with calls: a call only while the microphone is in use (the detector's other half).
    const CHAT_APPS: [(&str, &str); 7] =
        [("slack", "Slack"), ("discord", "Discord"), ("signal", "Signal"), ("telegram", "Telegram"), ("whatsapp", "WhatsApp"), ("element", "Element"), ("mattermost", "Mattermost")];
    if let Some((_, name)) = CHAT_APPS.iter().find(|(key, _)| app.contains(key)) {
        return Some(name);
    }
    if let Some(url) = url
        && let Some(name) = call_url(url)
    {
        return Some(name);
    }
    call_title(title, &title_lower)
}

/// A call's address: a meeting room, not the service's home page.
fn call_url(url: &str) -> Option<&'static str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = host.split(':').next().unwrap_or(host).to_lowercase();
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let first = path.split('/').next().unwrap_or_default();
    let ends = |domain: &str| host == domain || host.ends_with(&format!(".{domain}"));
    if host == "meet.google.com" && is_meet_code(first) {
        return Some("Google Meet");
    }
    if ends("zoom.us") && (path.starts_with("j/") || path.starts_with("wc/") || path.starts_with("s/")) {
        return Some("Zoom");
    }
    if (ends("teams.microsoft.com") || ends("teams.live.com")) && (path.contains("meetup-join") || path.starts_with("meet/") || path.contains("/meet")) {
        return Some("Microsoft Teams");
    }
    if ends("webex.com") && (path.starts_with("meet/") || path.contains("j.php") || path.starts_with("wbxmjs/")) {
        return Some("Webex");
    }
    if (host == "meet.jit.si" || host == "8x8.vc") && !first.is_empty() {
        return Some("Jitsi Meet");
    }
    if ends("whereby.com") && !first.is_empty() && !matches!(first, "information" | "user" | "org") {
        return Some("Whereby");
    }
    if host == "app.slack.com" && path.starts_with("huddle/") {
        return Some("Slack");
    }
    if host == "call.element.io" && !first.is_empty() {
        return Some("Element");
    }
    if path.contains("html5client/join") || (path.starts_with("b/") && host.contains("bbb")) {
        return Some("BigBlueButton");
    }
    None
}

/// `abc-defg-hij`: a Google Meet room.
fn is_meet_code(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    parts.len() == 3 && parts.iter().zip([3, 4, 3]).all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_lowercase()))
}

/// A browser's title for a call (its address is not always known).
fn call_title(title: &str, lower: &str) -> Option<&'static str> {
    let first = lower.split([' ', '\u{2013}', '\u{2014}']).next().unwrap_or_default();
    if first == "meet" && title.split([' ', '\u{2013}', '\u{2014}']).any(is_meet_code) {
        return Some("Google Meet");
    }
    if lower.contains("zoom meeting") || lower.contains("zoom webinar") {
        return Some("Zoom");
    }
    if lower.contains("| microsoft teams") && (lower.contains("meeting") || lower.contains("call")) {
        return Some("Microsoft Teams");
    }
    if lower.contains("jitsi meet") {
        return Some("Jitsi Meet");
    }
    if lower.contains("huddle") && lower.contains("slack") {
        return Some("Slack");
    }
    None
}

/// How long the microphone may be quiet before a call counts as over.
pub const END_AFTER_MILLIS: i64 = 30_000;
/// A call window focused this recently still counts (the user looks at notes during a call).
pub const CALL_WINDOW_GRACE_MILLIS: i64 = 120_000;

/// What the detector says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    /// A call: offer to listen (once per call).
    Offer { service: &'static str, title: String, since_millis: i64 },
    /// The call that was offered is over (the microphone has been free for `END_AFTER_MILLIS`).
    Ended { service: &'static str, title: String, started_millis: i64, ended_millis: i64 },
}

/// One call's state: seen (a call window and the microphone in use by
/// another app), offered, and when the microphone was last in use.
#[derive(Clone, Debug, Default)]
pub struct Detector {
    /// The last call window focused: its service, title and when.
    window: Option<(&'static str, String, i64)>,
    /// The call offered: service, title, since, and the microphone last seen in use.
    call: Option<(&'static str, String, i64, i64)>,
}

impl Detector {
    /// What was seen at `now`: the focused window's call service and title
    /// (`call_service`), and whether an app other than cowork records from a
    /// microphone. Returns an offer when a call starts and the end when it
    /// ends; nothing while it goes on.
    pub fn observe(&mut self, now: i64, focused: Option<(&'static str, &str)>, microphone_in_use: bool) -> Option<Signal> {
        if let Some((service, title)) = focused {
            self.window = Some((service, title.to_owned(), now));
        }
        if let Some((service, title, since, last_mic)) = &mut self.call {
            if microphone_in_use {
                *last_mic = now;
                return None;
            }
            if now - *last_mic >= END_AFTER_MILLIS {
                let ended = Signal::Ended { service, title: std::mem::take(title), started_millis: *since, ended_millis: *last_mic };
                self.call = None;
                return Some(ended);
            }
            return None;
        }
        let recent = self.window.as_ref().filter(|(_, _, at)| now - at <= CALL_WINDOW_GRACE_MILLIS);
        match recent {
            Some((service, title, _)) if microphone_in_use => {
                let (service, title) = (*service, title.clone());
                self.call = Some((service, title.clone(), now, now));
                Some(Signal::Offer { service, title, since_millis: now })
            }
            _ => None,
        }
    }

    /// A call window was focused within the grace period (the sound server is worth asking).
    pub fn window_recent(&self, now: i64) -> bool {
        self.window.as_ref().is_some_and(|(_, _, at)| now - at <= CALL_WINDOW_GRACE_MILLIS)
    }

    /// The call under way, if one was offered: service, title, since.
    pub fn current(&self) -> Option<(&'static str, &str, i64)> {
        self.call.as_ref().map(|(s, t, since, _)| (*s, t.as_str(), *since))
    }
}

/// One line of what was said: who (the microphone is the user, the
/// computer's output everyone else) and when, from the call's start.
#[derive(Clone, Debug, PartialEq)]
pub struct Said {
    pub at_secs: f64,
    /// The user (the microphone); false: the others (what the computer played).
    pub you: bool,
    pub text: String,
}

/// An action item: who does what, by when, and the lines that say so.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Action {
    /// "You", a name said in the call, or "unassigned".
    pub owner: String,
    pub item: String,
    pub due: Option<String>,
    /// Transcript lines (1-based) it stands on.
    pub lines: Vec<usize>,
}

/// A meeting note as kept: the summary, decisions and action items, each
/// with the transcript lines it stands on; what was dropped and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Note {
    /// The meeting's title: its calendar event's when one overlaps the call, else the window's.
    #[serde(default)]
    pub title: String,
    pub summary: Vec<(String, Vec<usize>)>,
    pub decisions: Vec<(String, Vec<usize>)>,
    pub actions: Vec<Action>,
    pub dropped: Vec<(String, String)>,
}

/// At most this much transcript goes into one prompt (≈ 1,500 tokens);
/// a longer call is read in parts and their notes joined.
pub const PART_CHARS: usize = 6_000;

/// The transcript, numbered, cut into parts of at most `PART_CHARS`: each part
/// is (first line's number, its text).
pub fn numbered_parts(said: &[Said]) -> Vec<(usize, String)> {
    let mut parts: Vec<(usize, String)> = Vec::new();
    for (i, line) in said.iter().enumerate() {
        let who = if line.you { "You" } else { "Others" };
        let at = line.at_secs.max(0.0) as u64;
        let text = crate::records::visible(&line.text, false).replace('\n', " ");
        let row = format!("[{}] {:02}:{:02} {who}: {}\n", i + 1, at / 60, at % 60, text.trim());
        match parts.last_mut() {
            Some((_, part)) if part.len() + row.len() <= PART_CHARS => part.push_str(&row),
            _ => parts.push((i + 1, row)),
        }
    }
    parts
}

/// The system prompt and the user's turn for one part of the call: its
/// summary and decisions (the action items are asked apart, `action_prompt`).
pub fn note_prompt(title: &str, part: &str, instructions: &str) -> (String, String) {
    let system = "You write meeting notes from a numbered transcript. \"You\" is the user (their microphone); \"Others\" is everyone else on the call. \
                  Use only what the transcript says. Every line ends with the numbers of the transcript lines it is based on, like [3][7]."
        .to_owned();
    let mut user = format!(
        "Meeting: {title}\nTranscript:\n{part}\nWrite these lines, one thing per line, in your own words:\n\
         Summary: what the meeting was about and where it got to [n]\n\
         Decision: something that was decided [n]\n"
    );
    if !instructions.trim().is_empty() {
        user.push_str(&format!("\n{}\n", instructions.trim()));
    }
    (system, user)
}

/// What someone says when they take something on, or ask another to.
const COMMITMENTS: [&str; 24] = [
    "i'll ", "i will ", "i can ", "i'm going to", "i am going to", "let me ", "we'll ", "will do", "on it", "i'll have", "can you", "could you", "would you",
    "will you", "please ", "do you think you could", "do you think we could", "can we get", "take that", "action item", "follow up", "to do", "on me", "you take",
];
/// At most this many lines where something may have been agreed go to the action items' prompt.
const MAX_COMMITMENT_LINES: usize = 28;

/// The numbers (1-based) of the lines where something may have been agreed
/// (someone takes something on, or asks another to), each with the line
/// before it (who was asked) and after it (the answer), in order.
pub fn commitment_lines(said: &[Said]) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    for (i, line) in said.iter().enumerate() {
        let text = format!(" {} ", line.text.to_lowercase().replace(['’', '‘'], "'"));
        if !COMMITMENTS.iter().any(|c| text.contains(c)) {
            continue;
        }
        for n in [i, i + 1, i + 2] {
            if (1..=said.len()).contains(&n) && !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out.sort_unstable();
    out.truncate(MAX_COMMITMENT_LINES);
    out
}

/// The people the call addresses by name ("Linda, can you …", "hi Greg",
/// "thanks, Sam"): the owners an action item may name besides You.
pub fn names_said(said: &[Said]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for line in said {
        for name in addressed(&line.text) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// The names `text` addresses ("Linda, can you …", "hi Greg", "thanks, Sam"), in order.
fn addressed(text: &str) -> Vec<String> {
    const BEFORE: [&str; 8] = ["hi", "hey", "thanks", "okay", "so", "and", "but", "you"];
    const AFTER: [&str; 11] = ["can", "could", "would", "will", "do", "did", "you", "is", "are", "has", "have"];
    const NOT_NAMES: [&str; 40] = [
        "Okay", "Yes", "Yeah", "Sure", "Right", "Well", "And", "But", "Perfect", "Great", "Thanks", "Hey", "Sorry", "Good", "Cool", "Monday", "Tuesday", "Wednesday",
        "Thursday", "Friday", "What", "That", "This", "There", "Can", "Could", "Would", "Will", "Did", "Does", "Should", "How", "Why", "When", "Where", "Who", "Are",
        "Have", "Has", "Then",
    ];
    let mut names: Vec<String> = Vec::new();
    let tokens: Vec<&str> = text.split_whitespace().collect();
    for (i, token) in tokens.iter().enumerate() {
        let word = token.trim_end_matches([',', '.', '!', '?', ';', ':']);
        let mut chars = word.chars();
        let looks = chars.next().is_some_and(|c| c.is_ascii_uppercase()) && word.len() >= 3 && chars.all(|c| c.is_ascii_lowercase());
        if !looks || NOT_NAMES.contains(&word) {
            continue;
        }
        let before = i == 0 || tokens[i - 1].ends_with([',', '.', '!', '?', ';']) || BEFORE.contains(&tokens[i - 1].to_lowercase().as_str());
        let after = token.ends_with([',', '?']) || tokens.get(i + 1).is_some_and(|next| AFTER.contains(&next.to_lowercase().as_str()));
        if before && after && !names.iter().any(|n| n == word) {
            names.push(word.to_owned());
        }
    }
    names
}

/// The prompt for the call's action items alone: the lines where something
/// may have been agreed (`commitment_lines`), numbered as in the transcript,
/// and the people named. None when no line sounds like one.
pub fn action_prompt(title: &str, said: &[Said], instructions: &str) -> Option<(String, String)> {
    let numbers = commitment_lines(said);
    if numbers.is_empty() {
        return None;
    }
    let system = "You find the action items of a meeting: what a person agreed to do after the call. \"You\" is the user (their microphone); \"Others\" is everyone else. \
                  Use only what the lines say. Every line ends with the numbers of the lines it is based on, like [3][4]."
        .to_owned();
    let names = names_said(said);
    let mut user = format!("Meeting: {title}\n");
    if !names.is_empty() {
        user.push_str(&format!("People named in the call: {}\n", names.join(", ")));
    }
    user.push_str("Lines where something may have been agreed:\n");
    for n in numbers {
        let line = &said[n - 1];
        // Who answers: the one person the line before asked by name.
        let asked = if n >= 2 { addressed(&said[n - 2].text) } else { Vec::new() };
        let who = match (line.you, asked.as_slice()) {
            (true, _) => "You".to_owned(),
            (false, [name]) if !said[n - 2].text.trim().is_empty() => format!("Others (likely {name}, asked just before)"),
            (false, _) => "Others".to_owned(),
        };
        let text = crate::records::visible(&line.text, false).replace('\n', " ");
        user.push_str(&format!("[{n}] {who}: {}\n", text.trim()));
    }
    user.push_str(
        "\nWrite one line for each thing a person agreed to do after the call, in this form:\n\
         Action: owner | what to do | when, or none [n]\n\
         The owner is You when You took it on; when Others did, the person asked by name; else unassigned. \
         Leave out what is already done, was turned down, or was only an idea.\n",
    );
    if !instructions.trim().is_empty() {
        user.push_str(&format!("\n{}\n", instructions.trim()));
    }
    Some((system, user))
}

/// Reads a part's answer against the transcript (`said`, all of it): lines
/// must cite transcript lines that exist; an owner must be the user, a name
/// said in the call, or "unassigned" (another is written as unassigned, and
/// said so in `dropped`).
pub fn read_note(said: &[Said], output: &str, into: &mut Note) {
    let everything: String = said.iter().map(|s| s.text.to_lowercase()).collect::<Vec<_>>().join(" ");
    for raw in output.lines() {
        let line = raw.trim().trim_start_matches(['-', '*', '•']).trim().trim_matches('*').trim();
        let Some((head, body)) = line.split_once(':') else { continue };
        let head = head.trim().trim_matches('*').trim().to_lowercase();
        let cited: Vec<usize> = cites(body).into_iter().filter(|n| (1..=said.len()).contains(n)).collect();
        let text = without_cites(body).trim_end_matches('.').trim().to_owned();
        if text.len() < 3 {
            continue;
        }
        if cited.is_empty() {
            if matches!(head.as_str(), "summary" | "decision" | "action") {
                into.dropped.push((line.to_owned(), "cites no line of the transcript".into()));
            }
            continue;
        }
        match head.as_str() {
            "summary" => into.summary.push((text, cited)),
            "decision" => into.decisions.push((text, cited)),
            "action" => {
                let mut fields = text.split('|').map(str::trim);
                let (owner, item, due) = (fields.next().unwrap_or_default(), fields.next().unwrap_or_default(), fields.next());
                let (owner, item) = if item.is_empty() { ("unassigned", owner) } else { (owner, item) };
                if item.len() < 3 {
                    continue;
                }
                let owner = match owner.to_lowercase().as_str() {
                    "you" | "i" | "me" | "the user" | "user" => "You".to_owned(),
                    "unassigned" | "none" | "nobody" | "" | "-" => "unassigned".to_owned(),
                    name if everything.contains(name) => owner.to_owned(),
                    _ => {
                        into.dropped.push((line.to_owned(), format!("{owner:?} is not named in the call: unassigned")));
                        "unassigned".to_owned()
                    }
                };
                let due = due.map(str::to_owned).filter(|d| !matches!(d.to_lowercase().as_str(), "" | "none" | "no date" | "n/a" | "-" | "null"));
                if !into.actions.iter().any(|a| a.item.eq_ignore_ascii_case(item)) {
                    into.actions.push(Action { owner, item: item.to_owned(), due, lines: cited });
                }
            }
            _ => {}
        }
    }
}

impl Note {
    /// The note as kept in memory, each line with its transcript lines' times.
    pub fn render(&self, title: &str, said: &[Said]) -> String {
        let at = |lines: &[usize]| -> String {
            let times: Vec<String> = lines.iter().filter_map(|n| said.get(n - 1)).map(|s| format!("{:02}:{:02}", s.at_secs as u64 / 60, s.at_secs as u64 % 60)).collect();
            if times.is_empty() { String::new() } else { format!(" (at {})", times.join(", ")) }
        };
        let mut out = format!("Meeting note: {title}");
        for (text, lines) in &self.summary {
            out.push_str(&format!("\n{text}{}", at(lines)));
        }
        if !self.decisions.is_empty() {
            out.push_str("\nDecided:");
            for (text, lines) in &self.decisions {
                out.push_str(&format!("\n- {text}{}", at(lines)));
            }
        }
        if !self.actions.is_empty() {
            out.push_str("\nAction items:");
            for a in &self.actions {
                let due = a.due.as_deref().map(|d| format!(", due {d}")).unwrap_or_default();
                out.push_str(&format!("\n- {}: {}{due}{}", a.owner, a.item, at(&a.lines)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_told_from_their_apps_addresses_and_titles_and_home_pages_are_not() {
        assert_eq!(call_service("zoom", "Zoom Meeting", None), Some("Zoom"));
        assert_eq!(call_service("teams-for-linux", "Chat | Microsoft Teams", None), Some("Microsoft Teams"));
        assert_eq!(call_service("firefox", "Meet - abc-defg-hij", Some("https://meet.google.com/abc-defg-hij?authuser=0")), Some("Google Meet"));
        assert_eq!(call_service("chromium", "Meet – abc-defg-hij", None), Some("Google Meet"), "the title alone, as a window without an address says it");
        assert_eq!(call_service("firefox", "Google Meet", Some("https://meet.google.com/landing")), None, "the home page is no call");
        assert_eq!(call_service("firefox", "Launch Meeting - Zoom", Some("https://acme.zoom.us/j/81234567890?pwd=x")), Some("Zoom"));
        assert_eq!(call_service("firefox", "Zoom", Some("https://zoom.us/pricing")), None);
        assert_eq!(call_service("firefox", "Q3 review | Microsoft Teams", Some("https://teams.microsoft.com/l/meetup-join/19%3ameeting")), Some("Microsoft Teams"));
        assert_eq!(call_service("firefox", "standup", Some("https://meet.jit.si/acme-standup")), Some("Jitsi Meet"));
        assert_eq!(call_service("firefox", "Jitsi Meet", Some("https://meet.jit.si/")), Some("Jitsi Meet"), "its title says it");
        assert_eq!(call_service("firefox", "Huddle with Sam - Slack", Some("https://app.slack.com/huddle/T1/C2")), Some("Slack"));
        assert_eq!(call_service("firefox", "Pull request #12 - GitHub", Some("https://github.com/acme/meet")), None);
        assert_eq!(call_service("code", "meeting-notes.md - atlas - Visual Studio Code", None), None);
        assert_eq!(call_service("Slack", "general - Acme - Slack", None), Some("Slack"), "a chat app: a call only with the microphone in use");
    }

    #[test]
    fn a_call_is_offered_once_when_the_microphone_is_in_use_and_ends_when_it_is_free() {
        let mut detector = Detector::default();
        let meet = Some(("Google Meet", "Meet - abc-defg-hij"));
        assert_eq!(detector.observe(0, meet, false), None, "a call window without the microphone: not yet");
        assert_eq!(detector.observe(2_000, None, false), None);
        let offer = detector.observe(4_000, None, true);
        assert_eq!(offer, Some(Signal::Offer { service: "Google Meet", title: "Meet - abc-defg-hij".into(), since_millis: 4_000 }), "the window was focused 4 s ago");
        assert_eq!(detector.observe(6_000, meet, true), None, "offered once");
        assert_eq!(detector.observe(60_000, None, true), None);
        assert_eq!(detector.observe(70_000, None, false), None, "a short silence is no end");
        assert_eq!(detector.observe(72_000, None, true), None);
        assert_eq!(detector.observe(95_000, None, false), None);
        let ended = detector.observe(102_000, None, false);
        assert_eq!(ended, Some(Signal::Ended { service: "Google Meet", title: "Meet - abc-defg-hij".into(), started_millis: 4_000, ended_millis: 72_000 }));
        // The microphone alone (a dictation app) is no call; a window long gone neither.
        assert_eq!(detector.observe(400_000, None, true), None);
        let mut fresh = Detector::default();
        assert_eq!(fresh.observe(0, None, true), None);
        assert_eq!(fresh.observe(1_000, Some(("Zoom", "Zoom Meeting")), true).map(|s| matches!(s, Signal::Offer { .. })), Some(true));
    }

    fn said(lines: &[(bool, &str)]) -> Vec<Said> {
        lines.iter().enumerate().map(|(i, (you, text))| Said { at_secs: i as f64 * 10.0, you: *you, text: (*text).to_owned() }).collect()
    }

    #[test]
    fn a_meeting_note_keeps_cited_lines_and_owners_said_in_the_call() {
        let call = said(&[
            (false, "Okay so Priya can you take the migration script"),
            (false, "Yes I'll have it by Thursday"),
            (true, "And I'll send the client the revised estimate"),
            (false, "We decided not to move the launch"),
        ]);
        let output = "Summary: the team planned the migration and the estimate [1][3]\n\
                      Decision: the launch date stays [4]\n\
                      Action: Priya | write the migration script | Thursday [1][2]\n\
                      Action: I | send the client the revised estimate | none [3]\n\
                      Action: Marcus | book the venue | Friday [4]\n\
                      Action: You | invent something []\n\
                      Decision: nothing cited\n";
        let mut note = Note::default();
        read_note(&call, output, &mut note);
        assert_eq!(note.summary, [("the team planned the migration and the estimate".to_owned(), vec![1, 3])]);
        assert_eq!(note.decisions.len(), 1);
        assert_eq!(note.actions[0], Action { owner: "Priya".into(), item: "write the migration script".into(), due: Some("Thursday".into()), lines: vec![1, 2] });
        assert_eq!((note.actions[1].owner.as_str(), note.actions[1].due.as_deref()), ("You", None));
        assert_eq!(note.actions[2].owner, "unassigned", "a name nobody said is not an owner");
        assert_eq!(note.actions.len(), 3, "an item citing nothing is dropped");
        assert_eq!(note.dropped.len(), 3, "{:?}", note.dropped);
        let text = note.render("Sprint planning", &call);
        assert!(text.contains("Action items:\n- Priya: write the migration script, due Thursday (at 00:00, 00:10)"), "{text}");
        // The action items are asked apart, from the lines where something was taken on, with who was named.
        let call = said(&[
            (true, "Hi Greg, hi Linda. Status first."),
            (true, "The homepage is on staging."),
            (true, "Linda, do you think we could get the rest of the bios by Friday?"),
            (false, "Friday, yeah. I'll chase them."),
            (false, "The widget is already in."),
            (true, "Okay, Sam, can you check the mobile menu?"),
            (false, "Sure."),
        ]);
        assert_eq!(names_said(&call), ["Greg", "Linda", "Sam"]);
        assert_eq!(commitment_lines(&call), [2, 3, 4, 5, 6, 7], "each with the line before (who was asked) and after (the answer)");
        let (_, user) = action_prompt("Weekly status", &call, "").unwrap();
        assert!(user.contains("People named in the call: Greg, Linda, Sam\n"), "{user}");
        assert!(user.contains("[3] You: Linda, do you think we could get the rest of the bios by Friday?\n[4] Others (likely Linda, asked just before): Friday, yeah. I'll chase them."), "{user}");
        assert!(user.contains("[5] Others: The widget is already in."), "nobody was asked by name just before: {user}");
        assert!(names_said(&said(&[(true, "Can you send it? Could Marek take it?")])).is_empty(), "a question's first word is no name");
        assert!(!user.contains("[1]"), "a line where nothing is agreed is not sent: {user}");
        assert!(action_prompt("Chat", &said(&[(true, "Nice weather."), (false, "It is.")]), "").is_none());
        // A long call is read in parts that each fit a prompt.
        let long: Vec<Said> = (0..400).map(|i| Said { at_secs: i as f64, you: i % 2 == 0, text: "word ".repeat(10) }).collect();
        let parts = numbered_parts(&long);
        assert!(parts.len() > 1 && parts.iter().all(|(_, p)| p.len() <= PART_CHARS));
        assert_eq!(parts[1].0, parts[0].1.lines().count() + 1, "numbering runs on across parts");
    }
}
