//! Every setting in one table: a row per key with what it does, how its text
//! is read (a kind with its bounds or choices, or its domain's own check),
//! whether it needs a restart, and how it is read from and written into
//! `Settings`. `Settings::apply`/`value`, `check`, `cowork settings` and the
//! Settings tab's rows all read this table; nothing else lists settings.

use super::{Settings, keys};

/// How a setting's text is read.
#[derive(Clone, Copy)]
pub enum Kind {
    /// `true` or `false`.
    Flag,
    /// A whole number from `min` to `max`.
    Whole { min: u64, max: u64 },
    /// A decimal number from `min` to `max`.
    Decimal { min: f64, max: f64 },
    /// One of these words.
    Choice(&'static [&'static str]),
    /// Any text.
    Text,
    /// Text its domain checks (with the other settings at hand): `Err` says
    /// why in words, starting "is not …" when the value itself is wrong.
    Checked(fn(&Settings, &str) -> Result<(), String>),
}

/// One setting.
pub struct Setting {
    pub key: &'static str,
    /// What it does (`cowork settings`, the Settings rows); None: cowork keeps it, nobody edits it.
    pub description: Option<&'static str>,
    pub kind: Kind,
    /// It takes effect when cowork starts again (the rest apply at once).
    pub restart: bool,
    /// What a value that does not read leaves in place, in words.
    pub fallback: &'static str,
    /// A value that does not read resets the setting to its default (rather than keeping the last good one).
    pub reset: bool,
    /// The value as stored.
    pub get: fn(&Settings) -> String,
    /// Takes a value `kind` accepted.
    pub set: fn(&mut Settings, &str),
}

impl Setting {
    /// Whether `value` can be stored; if not, why ("is not a number from 10 to 86400").
    pub fn check(&self, settings: &Settings, value: &str) -> Result<(), String> {
        match self.kind {
            Kind::Flag => matches!(value.trim(), "true" | "false").then_some(()).ok_or_else(|| "is not true or false".to_owned()),
            Kind::Whole { min, max } => match value.trim().parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(()),
                _ => Err(format!("is not a number from {min} to {max}")),
            },
            Kind::Decimal { min, max } => match value.trim().parse::<f64>() {
                Ok(n) if n >= min && n <= max => Ok(()),
                _ => Err(format!("is not a number from {min} to {max}")),
            },
            Kind::Choice(choices) => choices.contains(&value.trim()).then_some(()).ok_or_else(|| format!("is not {}", words(choices))),
            Kind::Text => Ok(()),
            Kind::Checked(check) => check(settings, value),
        }
    }

    /// The warning `apply` gives for a value that does not read.
    fn warning(&self, value: &str, reason: &str) -> String {
        match reason.strip_prefix("is ") {
            Some(_) => format!("setting {} = {value:?} {reason}; {}", self.key, self.fallback),
            None => format!("setting {}: {reason}; {}", self.key, self.fallback),
        }
    }

    /// Stores `value` into `settings`, or says why not (and leaves or resets the setting).
    pub fn apply(&self, settings: &mut Settings, value: &str) -> Option<String> {
        match self.check(settings, value) {
            Ok(()) => {
                (self.set)(settings, value);
                None
            }
            Err(reason) => {
                if self.reset {
                    (self.set)(settings, &(self.get)(&Settings::default()));
                }
                Some(self.warning(value, &reason))
            }
        }
    }
}

/// "a, b or c".
fn words(choices: &[&str]) -> String {
    match choices.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The row for `key`.
pub fn row(key: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.key == key)
}

fn flag(on: bool) -> String {
    if on { "true" } else { "false" }.to_owned()
}

fn on(value: &str) -> bool {
    value.trim() == "true"
}

/// A number `check` accepted.
fn number<T: std::str::FromStr + Default>(value: &str) -> T {
    value.trim().parse().unwrap_or_default()
}

/// A privacy rule checked with the others as they are (the firewall compiles them together).
fn privacy_rule(settings: &Settings, key: &str, value: &str) -> Result<(), String> {
    let mut privacy = settings.privacy.clone();
    *privacy_field(&mut privacy, key) = value.to_owned();
    privacy.compile().map(|_| ())
}

fn privacy_field<'a>(privacy: &'a mut crate::capture::firewall::RuleText, key: &str) -> &'a mut String {
    match key {
        keys::ALLOWED_APPS => &mut privacy.allowed_apps,
        keys::DENIED_APPS => &mut privacy.denied_apps,
        keys::DENIED_TITLES => &mut privacy.denied_titles,
        keys::DENIED_DOMAINS => &mut privacy.denied_domains,
        _ => &mut privacy.quiet_hours,
    }
}

fn hotkey(_: &Settings, value: &str) -> Result<(), String> {
    value.parse::<global_hotkey::hotkey::HotKey>().map(|_| ()).map_err(|err| format!("is not a hotkey ({err})"))
}

/// A row that reads `true`/`false` into a field.
macro_rules! flag_row {
    ($key:expr, $about:expr, $($field:ident).+) => {
        Setting { key: $key, description: Some($about), kind: Kind::Flag, restart: false, fallback: "using the default", reset: false, get: |s| flag(s.$($field).+), set: |s, v| s.$($field).+ = on(v) }
    };
}

/// A row that reads a whole number from `min` to `max` into a field.
macro_rules! whole_row {
    ($key:expr, $about:expr, $min:expr, $max:expr, $($field:ident).+) => {
        Setting { key: $key, description: Some($about), kind: Kind::Whole { min: $min, max: $max }, restart: false, fallback: "using the default", reset: false, get: |s| s.$($field).+.to_string(), set: |s, v| s.$($field).+ = number(v) }
    };
}

/// A row that keeps the text as typed (or trimmed) in a field.
macro_rules! text_row {
    ($key:expr, $about:expr, $($field:ident).+) => {
        Setting { key: $key, description: Some($about), kind: Kind::Text, restart: false, fallback: "", reset: false, get: |s| s.$($field).+.clone(), set: |s, v| s.$($field).+ = v.to_owned() }
    };
    ($key:expr, $about:expr, trimmed $($field:ident).+) => {
        Setting { key: $key, description: Some($about), kind: Kind::Text, restart: false, fallback: "", reset: false, get: |s| s.$($field).+.clone(), set: |s, v| s.$($field).+ = v.trim().to_owned() }
    };
}

/// A privacy rule (the firewall's), kept only when all of them still compile.
macro_rules! privacy_row {
    ($key:expr, $about:expr, $field:ident) => {
        Setting {
            key: $key,
            description: Some($about),
            kind: Kind::Checked(|s, v| privacy_rule(s, $key, v)),
            restart: false,
            fallback: "keeping the previous rules",
            reset: false,
            get: |s| s.privacy.$field.clone(),
            set: |s, v| *privacy_field(&mut s.privacy, $key) = v.to_owned(),
        }
    };
}

/// A decimal budget in US dollars.
macro_rules! dollars_row {
    ($key:expr, $about:expr, $field:ident) => {
        Setting { key: $key, description: Some($about), kind: Kind::Decimal { min: 0.0, max: 1_000_000.0 }, restart: false, fallback: "using the default", reset: false, get: |s| s.budget.$field.to_string(), set: |s, v| s.budget.$field = number(v) }
    };
}

/// A global hotkey (registered at start).
macro_rules! hotkey_row {
    ($key:expr, $about:expr, $($field:ident).+) => {
        Setting { key: $key, description: Some($about), kind: Kind::Checked(hotkey), restart: true, fallback: "using the default", reset: false, get: |s| s.$($field).+.clone(), set: |s, v| s.$($field).+ = v.to_owned() }
    };
}

const DAYS: u64 = 36_500;
const WEEK_SECS: u64 = 7 * 86_400;

/// Every setting, in the order `cowork settings` lists them.
pub const SETTINGS: &[Setting] = &[
    flag_row!(keys::RECORD_WINDOWS, "record the focused window (app, title, URL): true or false", record_windows),
    flag_row!(keys::RECORD_KEYS, "record typed text: true or false", record_keys),
    flag_row!(keys::RECORD_CLIPBOARD, "record copied text: true or false", record_clipboard),
    flag_row!(keys::STREAMS_CONFIRMED, "the first-run choice of what to record was made: true or false", streams_confirmed),
    flag_row!(keys::RECORD_SCREEN, "record the focused window's text (accessibility tree, else OCR): true or false", screen.enabled),
    flag_row!(keys::SCREEN_CONSENTED, "the screen-text stream's own consent was given: true or false", screen.consented),
    flag_row!(keys::SCREEN_OCR, "read windows without accessible text by OCR: true or false", screen.ocr),
    Setting { restart: true, ..flag_row!(keys::DESKTOP_ACCESSIBILITY, "turn desktop accessibility on while cowork runs (browser URLs): true or false", desktop_accessibility) },
    flag_row!(keys::START_IN_TRAY, "started at login, show only the tray icon (the sidebar opens from it): true or false", start_in_tray),
    Setting {
        key: keys::THEME,
        description: Some("light or dark: system (follow the desktop), light or dark"),
        kind: Kind::Choice(&["system", "light", "dark"]),
        restart: false,
        fallback: "following the desktop",
        reset: false,
        get: |s| s.theme.clone(),
        set: |s, v| s.theme = v.trim().to_owned(),
    },
    flag_row!(keys::SETUP_DONE, "the first-run setup (brain, hotkeys, start at login) was finished or skipped: true or false", setup_done),
    whole_row!(keys::AFK_SECS, "seconds without input before you count as away", 10, 86_400, afk_secs),
    flag_row!(keys::PAUSED, "capture paused: true or false", privacy.paused),
    privacy_row!(keys::ALLOWED_APPS, "record only these apps (comma-separated; empty: all)", allowed_apps),
    privacy_row!(keys::DENIED_APPS, "never record these apps (comma-separated)", denied_apps),
    privacy_row!(keys::DENIED_TITLES, "never record windows whose title matches these regular expressions (one per line)", denied_titles),
    privacy_row!(keys::DENIED_DOMAINS, "never record pages of these domains (comma-separated)", denied_domains),
    privacy_row!(keys::QUIET_HOURS, "record nothing in these hours, e.g. 22:00-07:00", quiet_hours),
    flag_row!(keys::PRIVATE_WINDOWS, "never record private or incognito windows: true or false", privacy.exclude_private_windows),
    whole_row!(keys::WINDOW_RETENTION_DAYS, "days windows are kept (0: forever)", 0, DAYS, window_retention_days),
    whole_row!(keys::KEYSTROKE_RETENTION_DAYS, "days typed text is kept (0: forever)", 0, DAYS, keystroke_retention_days),
    whole_row!(keys::SCREEN_RETENTION_DAYS, "days screen text is kept (0: forever)", 0, DAYS, screen.retention_days),
    flag_row!(keys::OFFLINE, "offline mode: nothing but loopback is reached: true or false", offline),
    Setting {
        key: keys::PREFER,
        description: Some("who answers first: local or cloud"),
        kind: Kind::Checked(|_, v| crate::brains::Preference::parse(v).map(|_| ()).ok_or_else(|| "is not local or cloud".to_owned())),
        restart: false,
        fallback: "using local",
        reset: false,
        get: |s| match s.prefer {
            crate::brains::Preference::Local => "local".into(),
            _ => "cloud".into(),
        },
        set: |s, v| s.prefer = crate::brains::Preference::parse(v).unwrap_or(s.prefer),
    },
    Setting {
        key: keys::TIERS,
        description: Some("cloud providers to use, in order (names from providers.json, comma-separated)"),
        kind: Kind::Text,
        restart: false,
        fallback: "",
        reset: false,
        get: |s| s.tiers.join(", "),
        set: |s, v| s.tiers = crate::capture::firewall::parse_list(v),
    },
    dollars_row!(keys::BUDGET_INTERACTION, "most one answer may cost, in US dollars", per_interaction_usd),
    dollars_row!(keys::BUDGET_DAILY, "most a day may cost, in US dollars", daily_usd),
    dollars_row!(keys::BUDGET_WEEKLY, "most a week may cost, in US dollars", weekly_usd),
    dollars_row!(keys::BUDGET_MONTHLY, "most a month may cost, in US dollars", monthly_usd),
    whole_row!(keys::BUDGET_FREE_TOKENS, "tokens a month of free cloud tiers", 0, u64::MAX / 4, budget.monthly_free_tokens),
    text_row!(keys::CHAT_MODEL, "the local chat model (a manifest name or an added model; empty: the best that fits)", trimmed chat_model),
    whole_row!(keys::CONTEXT_BUDGET, "tokens of recent activity in each local prompt", 0, 8_000, context_budget_tokens),
    whole_row!(keys::MAX_ANSWER_TOKENS, "longest answer, in tokens", 16, 8_192, max_answer_tokens),
    whole_row!(keys::IDLE_UNLOAD_SECS, "seconds before an idle local model is unloaded (0: never)", 0, WEEK_SECS, idle_unload_secs),
    flag_row!(keys::KEEP_WARM, "keep the local model loaded and its prompt prefilled where the machine can afford it: true or false", keep_warm),
    flag_row!(keys::GROUNDED, "answer only from what cowork recorded: true or false", grounded),
    whole_row!(keys::PROMPT_BUDGET, "tokens of memory in each prompt", 200, 32_000, prompt_budget_tokens),
    whole_row!(keys::RECALL_BUDGET, "tokens of recalled notes in each prompt", 0, 16_000, recall_budget_tokens),
    text_row!(keys::PROFILE, "what cowork should know about you (free text)", profile),
    flag_row!(keys::AGENT, "let the model use tools (the agent): true or false", agent),
    whole_row!(keys::AGENT_MAX_STEPS, "steps one task may take", 1, 200, agent_max_steps),
    flag_row!(
        keys::AGENT_MEMORY_FROM_CONTEXT,
        "with the agent on, a local question that can only read memory is answered from the recorded context in one pass: true or false",
        agent_memory_from_context
    ),
    Setting {
        key: keys::WEB_SEARCH_PROVIDER,
        description: Some("web search for the agent: searxng, brave, tavily, kagi or openai (empty: none); its key with `cowork secrets set web_search.PROVIDER`"),
        kind: Kind::Checked(|_, v| match v.trim() {
            "" => Ok(()),
            name => crate::tools::web_search::Provider::parse(name).map(|_| ()).ok_or_else(|| "is not searxng, brave, tavily, kagi or openai".to_owned()),
        }),
        restart: false,
        fallback: "using none",
        reset: false,
        get: |s| s.web_search_provider.clone(),
        set: |s, v| s.web_search_provider = crate::tools::web_search::Provider::parse(v.trim()).map(|p| p.as_str().to_owned()).unwrap_or_default(),
    },
    Setting {
        key: keys::WEB_SEARCH_URL,
        description: Some("the web search's address (your SearXNG instance; the others' own when empty)"),
        kind: Kind::Checked(|_, v| match v.trim() {
            "" => Ok(()),
            url if url.starts_with("http://") || url.starts_with("https://") => Ok(()),
            _ => Err("is not an http or https address".to_owned()),
        }),
        restart: false,
        fallback: "using the provider's own",
        reset: false,
        get: |s| s.web_search_url.clone(),
        set: |s, v| s.web_search_url = v.trim().to_owned(),
    },
    flag_row!(keys::REMEMBER_DOCUMENTS, "keep documents you attach or the agent reads searchable in memory: true or false", remember_documents),
    Setting {
        key: keys::DOCUMENT_FOLDERS,
        description: Some("folders whose documents are kept searchable and followed as they change (one per line)"),
        kind: Kind::Checked(|_, v| {
            let bad: Vec<&str> = v.lines().map(str::trim).filter(|l| !(l.is_empty() || l.starts_with('/') || l.starts_with('~'))).collect();
            bad.is_empty().then_some(()).ok_or_else(|| format!("{} is not a full path (start it with / or ~)", bad.join(", ")))
        }),
        restart: false,
        fallback: "keeping the previous folders",
        reset: false,
        get: |s| s.document_folders.clone(),
        set: |s, v| s.document_folders = v.to_owned(),
    },
    Setting {
        key: keys::DOCUMENT_EXCLUDE,
        description: Some("paths never kept in memory (globs, one per line, e.g. ~/Taxes/** or **/*.kdbx)"),
        kind: Kind::Checked(|_, v| v.lines().map(str::trim).filter(|l| !l.is_empty()).map(crate::tools::files::glob_regex).find_map(Result::err).map_or(Ok(()), Err)),
        restart: false,
        fallback: "keeping the previous patterns",
        reset: false,
        get: |s| s.document_exclude.clone(),
        set: |s, v| s.document_exclude = v.to_owned(),
    },
    Setting {
        key: keys::PROJECT_RULES,
        description: Some("which windows count for which project, one per line: Atlas: ledger-svc, ATL, acme.example, /regex/ (No project: … keeps windows out)"),
        kind: Kind::Checked(|_, v| crate::day::projects::ProjectRules::parse(v).map(|_| ())),
        restart: false,
        fallback: "keeping the previous rules",
        reset: false,
        get: |s| s.projects.clone(),
        set: |s, v| s.projects = v.to_owned(),
    },
    whole_row!(keys::APPROVAL_TIMEOUT, "seconds an approval waits in the chat before it is denied", 10, WEEK_SECS, approval_timeout_secs),
    Setting {
        key: keys::CALENDAR_SOURCES,
        description: Some("calendars cowork reads (read-only), one per line: an .ics file's path, an https:// or webcal:// address, or `caldav URL USER` (its password: `cowork secrets set calendar:USER@HOST`)"),
        kind: Kind::Checked(|_, v| crate::calendar::parse_sources(v).map(|_| ())),
        restart: false,
        fallback: "keeping the previous calendars",
        reset: false,
        get: |s| s.calendar_sources.clone(),
        set: |s, v| s.calendar_sources = v.to_owned(),
    },
    whole_row!(keys::CALENDAR_REFRESH_MINUTES, "how often each calendar is read again, in minutes", 1, 1440, calendar_refresh_minutes),
    whole_row!(keys::NOTIFY_URGENT_PER_HOUR, "urgent notifications (approvals, calls) shown per hour at most; the rest wait in the inbox", 1, 120, notify_urgent_per_hour),
    whole_row!(keys::NOTIFY_HELPFUL_PER_HOUR, "helpful notifications shown per hour at most (0: the inbox only)", 0, 60, notify_helpful_per_hour),
    whole_row!(keys::NOTIFY_INFORMATIONAL_PER_HOUR, "informational notifications shown per hour at most (0: the inbox only)", 0, 60, notify_informational_per_hour),
    Setting {
        key: keys::ALWAYS_ASK,
        description: Some("tools that always ask, even when safe (comma-separated)"),
        kind: Kind::Text,
        restart: false,
        fallback: "",
        reset: false,
        get: |s| s.always_ask.join(", "),
        set: |s, v| s.always_ask = v.split([',', '\n']).map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect(),
    },
    whole_row!(keys::AUTOMATION_APPROVAL_HOURS, "hours an automation's approval waits before it expires", 1, 7 * 24, automation_approval_hours),
    hotkey_row!(keys::QUICK_PROMPT_HOTKEY, "the quick prompt's hotkey, e.g. ctrl+alt+Space", quick_prompt_hotkey),
    hotkey_row!(keys::PAUSE_HOTKEY, "the pause hotkey, e.g. ctrl+alt+KeyP", pause_hotkey),
    hotkey_row!(keys::VOICE_HOTKEY, "the push-to-talk hotkey", voice.hotkey),
    Setting {
        key: keys::VOICE_MODE,
        description: Some("push-to-talk: auto, hold or toggle"),
        kind: Kind::Checked(|_, v| crate::audio::ptt::PttMode::parse(v).map(|_| ()).ok_or_else(|| "is not auto, hold or toggle".to_owned())),
        restart: false,
        fallback: "using auto",
        reset: false,
        get: |s| s.voice.mode.as_str().to_owned(),
        set: |s, v| s.voice.mode = crate::audio::ptt::PttMode::parse(v).unwrap_or(s.voice.mode),
    },
    flag_row!(keys::VOICE_SEND_ON_RELEASE, "send what was said when the key is released: true or false", voice.send_on_release),
    flag_row!(keys::VOICE_DICTATION, "type what you said into the app you are in: true or false", voice.dictation),
    flag_row!(keys::VOICE_SHORT_CLIP_CONTEXT, "size Whisper's window to short clips: true or false", voice.short_clip_context),
    text_row!(keys::VOICE_MODEL, "the speech model (tiny.en, or an installed optional one)", trimmed voice.model),
    Setting {
        key: keys::VOICE_LANGUAGE,
        description: Some("the spoken language, an ISO 639-1 code (empty: detect)"),
        kind: Kind::Checked(|_, v| {
            let code = v.trim().to_lowercase();
            (code.is_empty() || crate::audio::transcribe::is_language(&code))
                .then_some(())
                .ok_or_else(|| "is not a language Whisper knows (an ISO 639-1 code such as de)".to_owned())
        }),
        restart: false,
        fallback: "detecting it instead",
        reset: true,
        get: |s| s.voice.language.clone(),
        set: |s, v| s.voice.language = v.trim().to_lowercase(),
    },
    text_row!(keys::VOICE_DEVICE, "the microphone (empty: the default input)", trimmed voice.device),
    whole_row!(keys::VOICE_IDLE_UNLOAD_SECS, "seconds before an idle speech model is unloaded", 0, WEEK_SECS, voice.idle_unload_secs),
    flag_row!(keys::LISTEN_ENABLED, "listen mode: transcribe what is said near the computer: true or false", listen.enabled),
    flag_row!(keys::LISTEN_CONSENTED, "listen mode's own consent was given: true or false", listen.consented),
    flag_row!(keys::LISTEN_MIC, "listen to the microphone: true or false", listen.mic),
    flag_row!(keys::LISTEN_SYSTEM, "listen to what the computer plays: true or false", listen.system),
    flag_row!(keys::LISTEN_KEEP_AUDIO, "keep the audio of transcripts as WAV files: true or false", listen.keep_audio),
    whole_row!(keys::LISTEN_RETENTION_DAYS, "days transcripts are kept (0: forever)", 0, DAYS, listen.retention_days),
    whole_row!(keys::LISTEN_AUDIO_RETENTION_DAYS, "days kept audio files are kept", 1, DAYS, listen.audio_retention_days),
    Setting {
        key: keys::SIDEBAR_GEOMETRY,
        description: None,
        kind: Kind::Checked(|_, v| geometry(v).map(|_| ()).ok_or_else(|| "is not a window geometry".to_owned())),
        restart: false,
        fallback: "using the default",
        reset: false,
        get: |s| s.sidebar_geometry.map(|g| g.map(|n| n.to_string()).join(",")).unwrap_or_default(),
        set: |s, v| s.sidebar_geometry = geometry(v),
    },
];

/// "x, y, width, height" of at least 200 × 200 points.
fn geometry(value: &str) -> Option<[f32; 4]> {
    let parts: Vec<f32> = value.split(',').filter_map(|p| p.trim().parse().ok()).collect();
    match parts.as_slice() {
        [x, y, w, h] if *w >= 200.0 && *h >= 200.0 && x.is_finite() && y.is_finite() => Some([*x, *y, *w, *h]),
        _ => None,
    }
}
