//! A flow: a trigger and a list of steps (tool, agent, condition, delay,
//! notify), stored as JSON. Each step's output is a variable for the steps
//! after it — `${steps.<id>.data.path}`, `${trigger.data.x}`, brackets for
//! arrays — and every reference is checked when the flow is saved, so a typo is
//! an error then, not at 9 a.m. At run time a reference that does not resolve
//! stays literal. Pure: no I/O.
//!
//! A trigger is a schedule, the focus of an app or title, back from away, the
//! day's first activity, an MCP notification, manual, or one of the watches
//! over time (an approval waiting, a long stretch in one app, many switches). A
//! condition jumps only forward (to `next`, `end` or a later step), so a run
//! has no loops and each step runs at most once; its position is the run's
//! `step_index`. `Scope::fill` records where each filled-in value came from (a
//! captured window is `Capture`, a tool's output `ToolResult`), and those
//! origins travel with the step to the agent's policy.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::schedule::Schedule;
use crate::tools::Origin;

/// A routine the user described once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    /// Lowercase letters, digits and `_`; the agent's tool is `flow_<name>`.
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub trigger: Trigger,
    pub steps: Vec<Step>,
    #[serde(default)]
    pub mode: RunMode,
    /// The flow is offered to the agent as the tool `flow_<name>`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub agent_tool: bool,
    /// Typed inputs: what a manual run or the agent passes as `trigger.data`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<Input>,
    /// A failed run sends a notification (on by default).
    #[serde(default = "yes")]
    pub notify_on_failure: bool,
}

fn yes() -> bool {
    true
}

/// What starts a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Trigger {
    /// `every 15m`, `every 2h` or five cron fields, in local time.
    Schedule { schedule: String },
    /// A window gains focus whose app and title match (regexes, case-insensitive).
    Focus {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        app: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// The user is back after being away at least this long.
    Back {
        #[serde(default = "five")]
        away_minutes: u32,
    },
    /// The first activity of the local day.
    FirstActivity,
    /// An MCP server's notification: a resource it updated, or a list it changed.
    Mcp {
        server: String,
        event: McpEvent,
        /// For `resource_updated`: the resource (none: any).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
    },
    /// Only "Run now", the command line or the agent.
    Manual,
    /// A tool call has waited this long for the user's approval.
    ApprovalWaiting {
        #[serde(default = "ten")]
        minutes: u32,
    },
    /// One app has had focus this long without a break (a switch or being away).
    FocusStretch {
        #[serde(default = "ninety")]
        minutes: u32,
    },
    /// The focus moved between apps at least `count` times within `minutes`.
    ContextSwitches {
        #[serde(default = "twelve")]
        count: u32,
        #[serde(default = "ten")]
        minutes: u32,
    },
    /// A call started (a call window and the microphone in use: cowork offered
    /// to listen) or ended (the microphone free for 30 s).
    Meeting {
        #[serde(default)]
        event: MeetingEvent,
    },
    /// The end of the working day: the first time the user goes away (no
    /// input, a locked screen) for `away_minutes` after `after_hour` o'clock;
    /// once a day.
    DayEnd {
        #[serde(default = "sixteen")]
        after_hour: u32,
        #[serde(default = "twenty")]
        away_minutes: u32,
    },
    /// A timed event of the user's calendars starts in this many minutes
    /// (`title`: a regex its title must match, case-insensitive; none: any).
    Calendar {
        #[serde(default = "ten")]
        minutes_before: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeetingEvent {
    Started,
    #[default]
    Ended,
}

impl MeetingEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            MeetingEvent::Started => "started",
            MeetingEvent::Ended => "ended",
        }
    }
}

fn five() -> u32 {
    5
}

fn ten() -> u32 {
    10
}

fn ninety() -> u32 {
    90
}

fn twelve() -> u32 {
    12
}

fn sixteen() -> u32 {
    16
}

fn twenty() -> u32 {
    20
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpEvent {
    ResourceUpdated,
    ToolsChanged,
    ResourcesChanged,
    PromptsChanged,
}

/// What happens when a trigger fires while the flow is still running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunMode {
    /// The new start is skipped.
    #[default]
    Single,
    /// It waits its turn.
    Queued,
    /// The running one is cancelled and the new one starts.
    Restart,
    /// Up to `limit` at once; beyond that a start is skipped.
    Parallel { limit: u32 },
}

/// One typed input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: InputKind,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default = "yes")]
    pub required: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    String,
    Number,
    Integer,
    Boolean,
}

impl InputKind {
    fn as_str(self) -> &'static str {
        match self {
            InputKind::String => "string",
            InputKind::Number => "number",
            InputKind::Integer => "integer",
            InputKind::Boolean => "boolean",
        }
    }
}

/// One step of a flow. (serde cannot refuse unknown fields next to a
/// flattened enum; `Flow::from_json` checks them itself.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub id: String,
    #[serde(flatten)]
    pub kind: StepKind,
    /// The longest the step may take (waiting for an approval does not count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// The flow ends after this step, with its output.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end: bool,
}

/// Where a condition goes: on to the next step, to a later step, or the end.
pub const NEXT: &str = "next";
pub const END: &str = "end";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepKind {
    /// A built-in or MCP tool; string values in `args` may hold `${…}`.
    Tool {
        tool: String,
        #[serde(default = "empty_object")]
        args: Value,
    },
    /// A prompt the agent works on with these tools, on this tier.
    Agent {
        prompt: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tools: Vec<String>,
        #[serde(default)]
        tier: Tier,
    },
    /// If `left op right` then go to `then`, else to `else` (`next`, `end` or a later step's id).
    Condition {
        left: String,
        op: Op,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        right: String,
        #[serde(default = "next_step", rename = "then")]
        then_go: String,
        #[serde(default = "next_step", rename = "else")]
        else_go: String,
    },
    Delay { seconds: u64 },
    Notify {
        title: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        body: String,
        #[serde(default)]
        tier: NotifyTier,
        /// What Accept starts: a chat with this request, whose risky calls
        /// still ask. The flow's own words only (no `${…}`): what triggered it
        /// must not write what the agent is asked to do.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        task: String,
    },
}

fn empty_object() -> Value {
    json!({})
}

fn next_step() -> String {
    NEXT.into()
}

/// Which brain an agent step uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// The bundled model, offline.
    #[default]
    Local,
    /// The router decides, as for a question.
    Auto,
    /// The cloud provider the user allowed.
    Cloud,
}

/// How much a notification may interrupt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyTier {
    Informational,
    #[default]
    Helpful,
    Urgent,
}

impl NotifyTier {
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyTier::Informational => "informational",
            NotifyTier::Helpful => "helpful",
            NotifyTier::Urgent => "urgent",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Equals,
    NotEquals,
    Contains,
    NotContains,
    Matches,
    Gt,
    Gte,
    Lt,
    Lte,
    Empty,
    NotEmpty,
}

/// Step timeouts when the flow names none.
pub const TOOL_TIMEOUT_SECS: u64 = 120;
pub const AGENT_TIMEOUT_SECS: u64 = 600;
/// The longest delay a step may ask for.
pub const MAX_DELAY_SECS: u64 = 7 * 86_400;

impl Step {
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            StepKind::Tool { .. } => "tool",
            StepKind::Agent { .. } => "agent",
            StepKind::Condition { .. } => "condition",
            StepKind::Delay { .. } => "delay",
            StepKind::Notify { .. } => "notify",
        }
    }

    pub fn timeout_millis(&self) -> i64 {
        let default = match self.kind {
            StepKind::Agent { .. } => AGENT_TIMEOUT_SECS,
            _ => TOOL_TIMEOUT_SECS,
        };
        self.timeout_secs.unwrap_or(default) as i64 * 1000
    }

    /// The keys a later step may read under `steps.<id>.data` (None: any, a tool's output).
    fn data_keys(&self) -> Option<&'static [&'static str]> {
        match self.kind {
            StepKind::Tool { .. } => None,
            StepKind::Agent { .. } => Some(&["text"]),
            StepKind::Condition { .. } => Some(&["result"]),
            StepKind::Delay { .. } => Some(&["waited_seconds"]),
            StepKind::Notify { .. } => Some(&["notification_id", "delivered"]),
        }
    }

    /// Every template of the step: what `${…}` may appear in.
    fn templates(&self) -> Vec<&str> {
        match &self.kind {
            StepKind::Tool { args, .. } => {
                let mut out = Vec::new();
                strings_in(args, &mut out);
                out
            }
            StepKind::Agent { prompt, .. } => vec![prompt.as_str()],
            StepKind::Condition { left, right, .. } => vec![left.as_str(), right.as_str()],
            StepKind::Delay { .. } => Vec::new(),
            StepKind::Notify { title, body, .. } => vec![title.as_str(), body.as_str()],
        }
    }
}

fn strings_in<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings_in(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings_in(v, out)),
        _ => {}
    }
}

impl Trigger {
    /// The keys of `trigger.data` this trigger provides (the flow's inputs come on top).
    pub fn data_keys(&self) -> &'static [&'static str] {
        match self {
            Trigger::Schedule { .. } => &["scheduled_for", "missed"],
            Trigger::Focus { .. } => &["app", "title", "url"],
            Trigger::Back { .. } => &["away_minutes"],
            Trigger::FirstActivity => &["at"],
            Trigger::Mcp { .. } => &["server", "event", "uri"],
            Trigger::Manual => &[],
            Trigger::ApprovalWaiting { .. } => &["tool", "call_id", "waited_minutes", "why"],
            Trigger::FocusStretch { .. } => &["app", "minutes"],
            Trigger::ContextSwitches { .. } => &["switches", "minutes", "apps"],
            Trigger::Meeting { .. } => &["service", "title", "start", "end", "start_ms", "end_ms", "listened"],
            Trigger::DayEnd { .. } => &["away_since", "away_minutes", "date"],
            Trigger::Calendar { .. } => &["title", "start", "end", "start_ms", "end_ms", "minutes", "location", "attendees", "join_url"],
        }
    }

    /// Where the trigger's data comes from, for the approval policy: captured
    /// windows and an MCP server's words are data, never instructions.
    pub fn origin(&self) -> Origin {
        match self {
            Trigger::Focus { .. } | Trigger::Back { .. } | Trigger::FirstActivity | Trigger::FocusStretch { .. } | Trigger::ContextSwitches { .. } | Trigger::Meeting { .. } | Trigger::DayEnd { .. } => Origin::Capture,
            // A calendar's words were written by whoever sent the invitation.
            Trigger::Calendar { .. } => Origin::ToolResult,
            // A waiting call's tool and reason were written by a model that may have read anything.
            Trigger::Mcp { .. } | Trigger::ApprovalWaiting { .. } => Origin::ToolResult,
            Trigger::Schedule { .. } | Trigger::Manual => Origin::Instructions,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Trigger::Schedule { schedule } => schedule.clone(),
            Trigger::Focus { app, title } => match (app, title) {
                (Some(app), Some(title)) => format!("when {app} with \"{title}\" gains focus"),
                (Some(app), None) => format!("when {app} gains focus"),
                (None, Some(title)) => format!("when a window titled \"{title}\" gains focus"),
                (None, None) => "at every focus change".into(),
            },
            Trigger::Back { away_minutes } => format!("back after {away_minutes} minutes away"),
            Trigger::FirstActivity => "first activity of the day".into(),
            Trigger::Mcp { server, event, .. } => format!("{server}: {}", serde_json::to_value(event).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()),
            Trigger::Manual => "manual".into(),
            Trigger::ApprovalWaiting { minutes } => format!("an approval waiting over {minutes} minutes"),
            Trigger::FocusStretch { minutes } => format!("{minutes} minutes in one app without a break"),
            Trigger::ContextSwitches { count, minutes } => format!("{count} app switches within {minutes} minutes"),
            Trigger::Meeting { event } => format!("a call {}", event.as_str()),
            Trigger::DayEnd { after_hour, away_minutes } => format!("the end of the day (away {away_minutes} minutes after {after_hour}:00)"),
            Trigger::Calendar { minutes_before, title } => match title {
                Some(title) => format!("{minutes_before} minutes before a calendar event titled \"{title}\""),
                None => format!("{minutes_before} minutes before a meeting in your calendar"),
            },
        }
    }
}

/// One `${…}` reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ref {
    Trigger(Vec<Segment>),
    Step { id: String, path: Vec<Segment> },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// Reads the inside of `${…}`: `trigger.data.x`, `steps.<id>.data.a[0].b`.
pub fn parse_ref(inner: &str) -> Result<Ref, String> {
    let path = parse_path(inner).ok_or_else(|| format!("\"${{{inner}}}\" is not a reference (use ${{steps.<id>.data.…}} or ${{trigger.data.…}})"))?;
    let key = |i: usize| match path.get(i) {
        Some(Segment::Key(k)) => Some(k.as_str()),
        _ => None,
    };
    match (key(0), key(1), key(2)) {
        (Some("trigger"), Some("data"), _) => Ok(Ref::Trigger(path[2..].to_vec())),
        (Some("steps"), Some(id), Some("data")) => Ok(Ref::Step { id: id.to_owned(), path: path[3..].to_vec() }),
        _ => Err(format!("\"${{{inner}}}\" is not a reference (use ${{steps.<id>.data.…}} or ${{trigger.data.…}})")),
    }
}

fn parse_path(text: &str) -> Option<Vec<Segment>> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            if out.is_empty() {
                return None;
            }
            let end = after.find(']')?;
            out.push(Segment::Index(after[..end].trim().parse().ok()?));
            rest = &after[end + 1..];
        } else {
            // The first key stands alone; every later one follows a dot.
            let rest_key = if out.is_empty() { rest } else { rest.strip_prefix('.')? };
            let end = rest_key.find(['.', '[']).unwrap_or(rest_key.len());
            let key = &rest_key[..end];
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return None;
            }
            out.push(Segment::Key(key.to_owned()));
            rest = &rest_key[end..];
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The `${…}` spans of a template: (byte range, inside).
fn spans(template: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(start) = template[from..].find("${").map(|i| from + i) {
        let Some(len) = template[start + 2..].find('}') else { break };
        let end = start + 2 + len + 1;
        out.push((start..end, &template[start + 2..end - 1]));
        from = end;
    }
    out
}

/// What the steps of a run can read: the trigger's data and each finished step's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scope {
    pub trigger: Value,
    pub steps: BTreeMap<String, Value>,
    /// Where the trigger's data came from.
    #[serde(default = "instructions")]
    pub trigger_origin: Origin,
    /// Where each step's data came from.
    #[serde(default)]
    pub step_origins: BTreeMap<String, Origin>,
}

fn instructions() -> Origin {
    Origin::Instructions
}

impl Default for Scope {
    fn default() -> Self {
        Scope { trigger: Value::Null, steps: BTreeMap::new(), trigger_origin: Origin::Instructions, step_origins: BTreeMap::new() }
    }
}

fn walk<'a>(mut value: &'a Value, path: &[Segment]) -> Option<&'a Value> {
    for segment in path {
        value = match segment {
            Segment::Key(k) => value.get(k)?,
            Segment::Index(i) => value.get(*i)?,
        };
    }
    Some(value)
}

impl Scope {
    fn lookup(&self, r: &Ref) -> Option<(&Value, Origin)> {
        match r {
            Ref::Trigger(path) => walk(&self.trigger, path).map(|v| (v, self.trigger_origin)),
            Ref::Step { id, path } => {
                let data = self.steps.get(id)?;
                walk(data, path).map(|v| (v, self.step_origins.get(id).copied().unwrap_or(Origin::ToolResult)))
            }
        }
    }

    /// A template with every reference that resolves filled in (strings as
    /// they are, other values as JSON); one that does not stays literal.
    /// Returns the origins of what was filled in.
    pub fn fill(&self, template: &str) -> (String, Vec<Origin>) {
        let mut out = String::with_capacity(template.len());
        let mut origins = Vec::new();
        let mut last = 0;
        for (range, inner) in spans(template) {
            out.push_str(&template[last..range.start]);
            match parse_ref(inner).ok().and_then(|r| self.lookup(&r).map(|(v, o)| (v.clone(), o))) {
                Some((value, origin)) => {
                    match value {
                        Value::String(s) => out.push_str(&s),
                        other => out.push_str(&other.to_string()),
                    }
                    if !origins.contains(&origin) {
                        origins.push(origin);
                    }
                }
                None => out.push_str(&template[range.clone()]),
            }
            last = range.end;
        }
        out.push_str(&template[last..]);
        (out, origins)
    }

    /// A tool's arguments filled in: a string that is exactly one reference
    /// takes the referenced value itself (a list stays a list).
    pub fn fill_value(&self, value: &Value, origins: &mut Vec<Origin>) -> Value {
        match value {
            Value::String(s) => {
                let spans = spans(s);
                if let [(range, inner)] = spans.as_slice()
                    && *range == (0..s.len())
                    && let Some((v, origin)) = parse_ref(inner).ok().and_then(|r| self.lookup(&r).map(|(v, o)| (v.clone(), o)))
                {
                    if !origins.contains(&origin) {
                        origins.push(origin);
                    }
                    return v;
                }
                let (text, found) = self.fill(s);
                for o in found {
                    if !origins.contains(&o) {
                        origins.push(o);
                    }
                }
                Value::String(text)
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.fill_value(v, origins)).collect()),
            Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), self.fill_value(v, origins))).collect::<Map<_, _>>()),
            other => other.clone(),
        }
    }
}

/// A condition's verdict on filled-in operands.
pub fn compare(left: &str, op: Op, right: &str) -> Result<bool, String> {
    let number = |s: &str| s.trim().parse::<f64>().map_err(|_| format!("\"{s}\" is not a number"));
    Ok(match op {
        Op::Equals => left.trim() == right.trim(),
        Op::NotEquals => left.trim() != right.trim(),
        Op::Contains => left.to_lowercase().contains(&right.to_lowercase()),
        Op::NotContains => !left.to_lowercase().contains(&right.to_lowercase()),
        Op::Matches => regex::RegexBuilder::new(right).case_insensitive(true).size_limit(1 << 20).build().map_err(|e| format!("the pattern does not compile: {e}"))?.is_match(left),
        Op::Gt => number(left)? > number(right)?,
        Op::Gte => number(left)? >= number(right)?,
        Op::Lt => number(left)? < number(right)?,
        Op::Lte => number(left)? <= number(right)?,
        Op::Empty => is_empty(left),
        Op::NotEmpty => !is_empty(left),
    })
}

fn is_empty(text: &str) -> bool {
    matches!(text.trim(), "" | "[]" | "{}" | "null" | "0" | "false") || (text.trim().starts_with("${") && text.trim().ends_with('}'))
}

/// What the flow's checks found: each a sentence naming the step.
pub type Problems = Vec<String>;

/// Which tool names exist: the built-ins and the MCP tools offered now.
pub trait Tools {
    fn exists(&self, name: &str) -> bool;
}

/// The built-in tools; an MCP tool (`mcp__server__tool`) is taken on trust
/// at save time, since its server may not be connected yet, and checked when it runs.
pub struct BuiltIn;

impl Tools for BuiltIn {
    fn exists(&self, name: &str) -> bool {
        crate::tools::registry::get(name).is_some() || name.starts_with("mcp__")
    }
}

pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 48 && name.starts_with(|c: char| c.is_ascii_lowercase()) && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl Flow {
    /// Reads a flow from JSON, with serde's message when it does not fit.
    pub fn from_json(text: &str) -> Result<Flow, String> {
        let flow: Flow = serde_json::from_str(text).map_err(|err| format!("the flow is not valid JSON for a flow: {err}"))?;
        // A misspelt step field would otherwise be dropped without a word.
        let value: Value = serde_json::from_str(text).map_err(|err| format!("the flow is not valid JSON: {err}"))?;
        for (step, raw) in flow.steps.iter().zip(value["steps"].as_array().into_iter().flatten()) {
            let own: &[&str] = match step.kind {
                StepKind::Tool { .. } => &["tool", "args"],
                StepKind::Agent { .. } => &["prompt", "tools", "tier"],
                StepKind::Condition { .. } => &["left", "op", "right", "then", "else"],
                StepKind::Delay { .. } => &["seconds"],
                StepKind::Notify { .. } => &["title", "body", "tier", "task"],
            };
            if let Some(unknown) = raw.as_object().into_iter().flat_map(|o| o.keys()).find(|k| !own.contains(&k.as_str()) && !["id", "kind", "timeout_secs", "end"].contains(&k.as_str())) {
                return Err(format!("the flow is not valid JSON for a flow: step \"{}\" has an unknown field `{unknown}` (a {} step has {})", step.id, step.kind_name(), own.join(", ")));
            }
        }
        Ok(flow)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Every check a flow must pass before it is saved.
    pub fn validate(&self, tools: &dyn Tools) -> Result<(), Problems> {
        let mut problems = Vec::new();
        if !valid_name(&self.name) {
            problems.push(format!("the name \"{}\" must start with a letter and hold only lowercase letters, digits and _ (at most 48)", self.name));
        }
        match &self.trigger {
            Trigger::Schedule { schedule } => {
                if let Err(err) = Schedule::parse(schedule) {
                    problems.push(format!("the schedule: {err}"));
                }
            }
            Trigger::Focus { app, title } => {
                for (what, pattern) in [("app", app), ("title", title)] {
                    if let Some(p) = pattern
                        && let Err(err) = regex::RegexBuilder::new(p).size_limit(1 << 20).build()
                    {
                        problems.push(format!("the trigger's {what} pattern does not compile: {err}"));
                    }
                }
            }
            Trigger::Mcp { server, .. } if server.trim().is_empty() => problems.push("the MCP trigger names no server".into()),
            Trigger::ApprovalWaiting { minutes: 0 } | Trigger::FocusStretch { minutes: 0 } | Trigger::ContextSwitches { minutes: 0, .. } => problems.push("the trigger needs at least one minute".into()),
            Trigger::ContextSwitches { count, .. } if *count < 2 => problems.push("the trigger needs at least two switches".into()),
            Trigger::DayEnd { after_hour, .. } if *after_hour > 23 => problems.push("the day ends after an hour from 0 to 23".into()),
            Trigger::DayEnd { away_minutes: 0, .. } => problems.push("the trigger needs at least one minute".into()),
            Trigger::Calendar { minutes_before: 0, .. } => problems.push("the calendar trigger runs at least one minute before the event".into()),
            Trigger::Calendar { minutes_before, .. } if *minutes_before > 24 * 60 => problems.push("the trigger looks at most a day ahead (1440 minutes)".into()),
            Trigger::Calendar { title: Some(title), .. } if regex::RegexBuilder::new(title).size_limit(1 << 20).build().is_err() => problems.push(format!("the title pattern \"{title}\" is not a regex")),
            _ => {}
        }
        if let RunMode::Parallel { limit: 0 } = self.mode {
            problems.push("parallel runs need a limit of at least 1".into());
        }
        let mut inputs: Vec<&str> = Vec::new();
        for input in &self.inputs {
            if !valid_name(&input.name) {
                problems.push(format!("the input \"{}\" needs a name of lowercase letters, digits and _", input.name));
            }
            if inputs.contains(&input.name.as_str()) {
                problems.push(format!("the input \"{}\" is declared twice", input.name));
            }
            inputs.push(&input.name);
        }
        if self.steps.is_empty() {
            problems.push("the flow has no steps".into());
        }
        let ids: Vec<&str> = self.steps.iter().map(|s| s.id.as_str()).collect();
        for (i, step) in self.steps.iter().enumerate() {
            let name = format!("step \"{}\"", step.id);
            if !valid_name(&step.id) || step.id == NEXT || step.id == END {
                problems.push(format!("{name}: an id is lowercase letters, digits and _ (not \"next\" or \"end\")"));
            }
            if ids[..i].contains(&step.id.as_str()) {
                problems.push(format!("{name}: the id is used twice"));
            }
            match &step.kind {
                StepKind::Tool { tool, args } => {
                    if !tools.exists(tool) {
                        problems.push(format!("{name}: there is no tool \"{tool}\""));
                    }
                    if !args.is_object() {
                        problems.push(format!("{name}: args must be an object"));
                    } else if let Some(schema) = crate::tools::registry::schema(tool)
                        && !args.to_string().contains("${")
                    {
                        let errors = crate::tools::schema::validate(&schema, args);
                        if !errors.is_empty() {
                            problems.push(format!("{name}: {}", errors.join("; ")));
                        }
                    }
                }
                StepKind::Agent { prompt, tools: offered, .. } => {
                    if prompt.trim().is_empty() {
                        problems.push(format!("{name}: the prompt is empty"));
                    }
                    for tool in offered {
                        if !tools.exists(tool) {
                            problems.push(format!("{name}: there is no tool \"{tool}\""));
                        }
                    }
                }
                StepKind::Condition { then_go, else_go, op, right, .. } => {
                    for target in [then_go, else_go] {
                        if target != NEXT && target != END {
                            match ids.iter().position(|id| id == target) {
                                Some(j) if j > i => {}
                                Some(_) => problems.push(format!("{name}: it can only go forward, not back to \"{target}\"")),
                                None => problems.push(format!("{name}: there is no step \"{target}\" to go to")),
                            }
                        }
                    }
                    if *op == Op::Matches
                        && !right.contains("${")
                        && let Err(err) = regex::RegexBuilder::new(right).size_limit(1 << 20).build()
                    {
                        problems.push(format!("{name}: the pattern does not compile: {err}"));
                    }
                }
                StepKind::Delay { seconds } => {
                    if *seconds == 0 || *seconds > MAX_DELAY_SECS {
                        problems.push(format!("{name}: a delay is between 1 second and 7 days"));
                    }
                }
                StepKind::Notify { title, task, .. } => {
                    if title.trim().is_empty() {
                        problems.push(format!("{name}: the notification has no title"));
                    }
                    if task.contains("${") {
                        problems.push(format!("{name}: a notification's task is your own words: no ${{…}} in it (what triggered the flow must not write what the agent is asked to do)"));
                    }
                }
            }
            if step.timeout_secs == Some(0) {
                problems.push(format!("{name}: a timeout of 0 seconds"));
            }
            for template in step.templates() {
                for (_, inner) in spans(template) {
                    if let Err(err) = self.check_ref(inner, i, &inputs) {
                        problems.push(format!("{name}: {err}"));
                    }
                }
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    fn check_ref(&self, inner: &str, at: usize, inputs: &[&str]) -> Result<(), String> {
        match parse_ref(inner)? {
            Ref::Trigger(path) => {
                let Some(Segment::Key(key)) = path.first() else {
                    return Err(format!("\"${{{inner}}}\" names no field of the trigger's data"));
                };
                if self.trigger.data_keys().contains(&key.as_str()) || inputs.contains(&key.as_str()) {
                    return Ok(());
                }
                let mut known: Vec<&str> = self.trigger.data_keys().to_vec();
                known.extend_from_slice(inputs);
                Err(format!("\"${{{inner}}}\": the trigger has no \"{key}\" (it has {})", if known.is_empty() { "no data".into() } else { known.join(", ") }))
            }
            Ref::Step { id, path } => {
                let Some(j) = self.steps.iter().position(|s| s.id == id) else {
                    return Err(format!("\"${{{inner}}}\": there is no step \"{id}\""));
                };
                if j >= at {
                    return Err(format!("\"${{{inner}}}\": step \"{id}\" has not run yet at this point"));
                }
                match (self.steps[j].data_keys(), path.first()) {
                    (Some(keys), Some(Segment::Key(key))) if !keys.contains(&key.as_str()) => {
                        {
                        let kind = self.steps[j].kind_name();
                        let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
                        Err(format!("\"${{{inner}}}\": {article} {kind} step's data has {}, not \"{key}\"", keys.join(", ")))
                    }
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    /// The variables a step can insert: everything the trigger and the steps before it provide.
    pub fn variables_at(&self, index: usize) -> Vec<String> {
        let mut out: Vec<String> = self.trigger.data_keys().iter().map(|k| format!("${{trigger.data.{k}}}")).collect();
        out.extend(self.inputs.iter().map(|i| format!("${{trigger.data.{}}}", i.name)));
        for step in self.steps.iter().take(index) {
            match step.data_keys() {
                Some(keys) => out.extend(keys.iter().map(|k| format!("${{steps.{}.data.{k}}}", step.id))),
                None => out.push(format!("${{steps.{}.data}}", step.id)),
            }
        }
        out
    }

    /// The inputs as a JSON schema (the agent's `flow_<name>` tool, the run form).
    pub fn input_schema(&self) -> Value {
        let properties: Map<String, Value> = self
            .inputs
            .iter()
            .map(|i| {
                let mut p = json!({"type": i.kind.as_str()});
                if !i.description.is_empty() {
                    p["description"] = json!(i.description);
                }
                (i.name.clone(), p)
            })
            .collect();
        let required: Vec<&str> = self.inputs.iter().filter(|i| i.required).map(|i| i.name.as_str()).collect();
        json!({"type": "object", "properties": properties, "required": required})
    }

    /// Checks a run's inputs against their types.
    pub fn check_inputs(&self, data: &Value) -> Result<(), String> {
        if self.inputs.is_empty() {
            return Ok(());
        }
        let errors = crate::tools::schema::validate(&self.input_schema(), data);
        if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(json: &str) -> Flow {
        Flow::from_json(json).unwrap()
    }

    const MORNING: &str = r#"{
        "name": "morning_summary",
        "trigger": {"kind": "schedule", "schedule": "0 9 * * 1-5"},
        "steps": [
            {"id": "recent", "kind": "tool", "tool": "recent_activity", "args": {"minutes": 60}},
            {"id": "any", "kind": "condition", "left": "${steps.recent.data.sessions}", "op": "not_empty", "else": "end"},
            {"id": "summary", "kind": "agent", "prompt": "Summarise: ${steps.recent.data.sessions[0].title}", "tools": ["search_memory"]},
            {"id": "tell", "kind": "notify", "title": "Your morning", "body": "${steps.summary.data.text}"}
        ]
    }"#;

    #[test]
    fn a_flow_reads_from_json_and_round_trips() {
        let f = flow(MORNING);
        assert_eq!(f.mode, RunMode::Single);
        assert!(f.notify_on_failure, "failures notify by default");
        assert!(matches!(&f.steps[1].kind, StepKind::Condition { then_go, else_go, .. } if then_go == NEXT && else_go == END));
        assert_eq!(Flow::from_json(&f.to_json()).unwrap(), f);
        f.validate(&BuiltIn).unwrap();
        let err = Flow::from_json(r#"{"name": "x", "trigger": {"kind": "manual"}, "steps": [], "colour": "red"}"#).unwrap_err();
        assert!(err.contains("unknown field `colour`"), "{err}");
        let err = Flow::from_json(r#"{"name": "x", "trigger": {"kind": "manual"}, "steps": [{"id": "a", "kind": "delay", "secs": 5, "seconds": 5}]}"#).unwrap_err();
        assert!(err.contains("step \"a\" has an unknown field `secs`"), "{err}");
    }

    #[test]
    fn references_are_checked_when_the_flow_is_saved() {
        let mut f = flow(MORNING);
        f.steps[3].kind = StepKind::Notify { title: "${steps.sumary.data.text}".into(), body: "${steps.summary.data.txt} ${trigger.data.when}".into(), tier: NotifyTier::Helpful, task: String::new() };
        f.steps[0].kind = StepKind::Tool { tool: "recent_activty".into(), args: json!({"minutes": "${steps.tell.data.delivered}"}) };
        let problems = f.validate(&BuiltIn).unwrap_err();
        let all = problems.join("\n");
        assert!(all.contains("there is no step \"sumary\""), "{all}");
        assert!(all.contains("an agent step's data has text, not \"txt\""), "{all}");
        assert!(all.contains("the trigger has no \"when\" (it has scheduled_for, missed)"), "{all}");
        assert!(all.contains("there is no tool \"recent_activty\""), "{all}");
        assert!(all.contains("step \"tell\" has not run yet"), "{all}");
        assert_eq!(problems.len(), 5, "{all}");

        let bad_jump = r#"{"name": "j", "trigger": {"kind": "manual"}, "steps": [
            {"id": "a", "kind": "delay", "seconds": 1},
            {"id": "b", "kind": "condition", "left": "1", "op": "equals", "right": "1", "then": "a", "else": "zz"}]}"#;
        let all = flow(bad_jump).validate(&BuiltIn).unwrap_err().join("\n");
        assert!(all.contains("only go forward, not back to \"a\"") && all.contains("no step \"zz\""), "{all}");
        let schema = r#"{"name": "s", "trigger": {"kind": "manual"}, "steps": [{"id": "a", "kind": "tool", "tool": "recent_activity", "args": {"minutes": "lots"}}]}"#;
        assert!(flow(schema).validate(&BuiltIn).unwrap_err()[0].contains("minutes"), "literal arguments meet the tool's schema at save time");
        let schedule = r#"{"name": "t", "trigger": {"kind": "schedule", "schedule": "0 25 * * *"}, "steps": [{"id": "a", "kind": "delay", "seconds": 1}]}"#;
        assert!(flow(schedule).validate(&BuiltIn).unwrap_err()[0].contains("the hour field"));
    }

    #[test]
    fn inputs_become_trigger_data_and_a_typed_schema() {
        let f = flow(r#"{"name": "draft_reply", "trigger": {"kind": "manual"}, "agent_tool": true,
            "inputs": [{"name": "ticket", "type": "string", "description": "The ticket's text"}, {"name": "urgent", "type": "boolean", "required": false}],
            "steps": [{"id": "draft", "kind": "agent", "prompt": "Draft a reply to: ${trigger.data.ticket}"}]}"#);
        f.validate(&BuiltIn).unwrap();
        assert_eq!(f.input_schema()["required"], json!(["ticket"]));
        f.check_inputs(&json!({"ticket": "printer on fire"})).unwrap();
        assert!(f.check_inputs(&json!({"urgent": "yes"})).unwrap_err().contains("ticket"));
        assert_eq!(f.variables_at(1), ["${trigger.data.ticket}", "${trigger.data.urgent}", "${steps.draft.data.text}"]);
    }

    #[test]
    fn a_notifications_task_is_the_flows_own_words_never_filled_in() {
        let with = |task: &str| {
            Flow::from_json(&format!(
                r#"{{"name": "t", "trigger": {{"kind": "focus", "title": "x"}}, "steps": [{{"id": "n", "kind": "notify", "title": "Hi", "task": {}}}]}}"#,
                serde_json::to_string(task).unwrap()
            ))
            .unwrap()
        };
        assert!(with("Look at what I switched between and pick one thing").validate(&BuiltIn).is_ok());
        // What triggered the flow (a window's title, a tool's output) must not write the agent's request.
        for task in ["Do ${trigger.data.title}", "${steps.x.data.text}", "first ${trigger.data.app} then"] {
            let problems = with(task).validate(&BuiltIn).unwrap_err().join("\n");
            assert!(problems.contains("task is your own words"), "{task}: {problems}");
        }
    }

    #[test]
    fn filling_keeps_unresolved_references_literal_and_tracks_origins() {
        let mut scope = Scope { trigger: json!({"title": "Invoices – Files", "n": 3}), trigger_origin: Origin::Capture, ..Scope::default() };
        scope.steps.insert("list".into(), json!({"items": [{"name": "a.pdf"}, {"name": "b.pdf"}], "count": 2}));
        scope.step_origins.insert("list".into(), Origin::ToolResult);
        let (text, origins) = scope.fill("In ${trigger.data.title}: ${steps.list.data.items[1].name} (${steps.list.data.count}) ${steps.nope.data.x} ${trigger.data.n");
        assert_eq!(text, "In Invoices – Files: b.pdf (2) ${steps.nope.data.x} ${trigger.data.n");
        assert_eq!(origins, [Origin::Capture, Origin::ToolResult]);
        let (plain, none) = scope.fill("no references here");
        assert_eq!((plain.as_str(), none.len()), ("no references here", 0));

        let mut origins = Vec::new();
        let args = scope.fill_value(&json!({"paths": "${steps.list.data.items}", "note": "count=${steps.list.data.count}", "k": 5}), &mut origins);
        assert_eq!(args, json!({"paths": [{"name": "a.pdf"}, {"name": "b.pdf"}], "note": "count=2", "k": 5}), "a whole reference keeps its type");
        assert_eq!(origins, [Origin::ToolResult]);
    }

    #[test]
    fn conditions_compare_text_numbers_and_patterns() {
        assert!(compare("3", Op::Gt, "2.5").unwrap());
        assert!(!compare("10", Op::Lt, "9").unwrap());
        assert!(compare("Invoices 2026", Op::Contains, "invoices").unwrap());
        assert!(compare("INV-0042", Op::Matches, r"inv-\d+").unwrap());
        assert!(compare("[]", Op::Empty, "").unwrap() && compare("${steps.x.data.y}", Op::Empty, "").unwrap(), "an unresolved reference counts as empty");
        assert!(compare("[1]", Op::NotEmpty, "").unwrap());
        assert!(compare("lots", Op::Gt, "1").unwrap_err().contains("not a number"));
    }

    #[test]
    fn reference_syntax_is_strict() {
        assert_eq!(parse_ref("steps.a.data.x[2].y").unwrap(), Ref::Step { id: "a".into(), path: vec![Segment::Key("x".into()), Segment::Index(2), Segment::Key("y".into())] });
        assert_eq!(parse_ref("trigger.data").unwrap(), Ref::Trigger(vec![]));
        for bad in ["steps.a.output", "env.HOME", "steps..data", "trigger.data.x[one]", "steps.a.data.x y"] {
            assert!(parse_ref(bad).is_err(), "{bad}");
        }
    }
}
