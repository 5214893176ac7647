//! Every built-in tool in one table: name, family, one-line description,
//! JSON schema and default risk; `classify` raises the risk by argument and
//! resolves what a call touches for the policy; `execute` runs a call whose
//! decision is recorded. The function definitions for cloud formats come from
//! here too; what the small local model is offered and how its turn is shaped
//! is `agent::local`'s.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use serde::Serialize;
use serde_json::{Value, json};

use super::files::FilesEnv;
use super::memory::MemoryEnv;
use super::skills::Skill;
use super::web_search::SearchConfig;
use super::{Origin, Risk, ToolOutput, desktop, documents, files, memory, policy, schema, shell, skills, web, web_search};
use crate::brains::ToolDef;
use crate::net::OutboundGate;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Memory,
    Files,
    Documents,
    Shell,
    Web,
    Desktop,
    Conversation,
    Skills,
    Agent,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct ToolSpec {
    pub name: &'static str,
    /// What the user calls it (Settings, the chat's tool chips).
    pub title: &'static str,
    pub family: Family,
    pub description: &'static str,
    /// The risk before arguments are looked at.
    pub risk: Risk,
}

const fn spec(name: &'static str, title: &'static str, family: Family, risk: Risk, description: &'static str) -> ToolSpec {
    ToolSpec { name, title, family, description, risk }
}

use Family::*;
use Risk::*;

pub const TOOLS: &[ToolSpec] = &[
    spec("recent_activity", "Recent activity", Memory, Safe, "What the user did today or this morning, or was just doing: the apps and windows they used, newest first."),
    spec("current_window", "Current window", Memory, Safe, "The app and window the user is in right now."),
    spec("search_memory", "Search memory", Memory, Safe, "Find something specific the user saw, typed or copied earlier (a name, a number, a topic) by words and meaning."),
    spec("read_session", "Read a session", Memory, Safe, "What was typed and copied during one window session (by its id)."),
    spec("remember", "Remember a fact", Memory, Safe, "Keep one lasting fact about the user or their work (at most 320 characters)."),
    spec("list_pins", "List pinned facts", Memory, Safe, "List remembered facts and the sources pinned to this chat."),
    spec("read_file", "Read a file", Files, Safe, "Read a text file."),
    spec("list_files", "List a folder", Files, Safe, "List a directory."),
    spec("search_files", "Find files", Files, Safe, "Find files under a directory by glob and/or text."),
    spec("file_info", "File details", Files, Safe, "Size, type and modification time of a path."),
    spec("write_file", "Write a file", Files, Sensitive, "Write a file (creates or replaces it)."),
    spec("edit_file", "Edit a file", Files, Sensitive, "Replace exact text in a file (one match, or all)."),
    spec("make_dir", "Make a folder", Files, Sensitive, "Create a directory and its parents."),
    spec("delete_path", "Delete", Files, Dangerous, "Delete a file, or a directory with recursive."),
    spec("move_path", "Move or rename", Files, Dangerous, "Move or rename a path (never over an existing one)."),
    spec("read_document", "Read a document", Documents, Safe, "Read a PDF, Word, OpenDocument, Excel, PowerPoint, EPUB, HTML, Markdown or CSV file, or a picture's text: pages, slides or sheets (with cell ranges), cited by page."),
    spec("write_document", "Write a document", Documents, Sensitive, "Create a Word (.docx), Excel (.xlsx), Markdown, CSV or PDF file in the user's folders, from Markdown text or rows."),
    spec("edit_document", "Edit a document", Documents, Sensitive, "Replace exact text in a Word, Markdown or CSV file, or set cells of an Excel workbook."),
    spec("run_command", "Run a command", Shell, Sensitive, "Run a shell command with a timeout and return its output."),
    spec("fetch_url", "Fetch a web page", Web, Sensitive, "Fetch a web page and return its readable text."),
    spec("web_search", "Search the web", Web, Sensitive, "Search the web: titles, links and snippets of the top results."),
    spec("clipboard_read", "Read the clipboard", Desktop, Safe, "The text on the clipboard."),
    spec("clipboard_write", "Copy to the clipboard", Desktop, Sensitive, "Put text on the clipboard."),
    spec("list_windows", "List windows", Desktop, Safe, "The open windows with their ids."),
    spec("focus_window", "Bring a window forward", Desktop, Sensitive, "Bring a window (by id) to the front."),
    spec("open", "Open", Desktop, Sensitive, "Open a file or URL with its default app, or start an installed app by name."),
    spec("notify", "Notify", Desktop, Safe, "Show a desktop notification."),
    spec("screenshot", "Take a screenshot", Desktop, Sensitive, "A picture of the focused window (or a window by id, or the whole screen) and the text in it; the user sees the picture before you do."),
    spec("ask_user", "Ask you", Conversation, Safe, "Ask the user a question and wait for the answer."),
    spec("update_todos", "Show the plan", Conversation, Safe, "Show the user your plan as a todo list (the whole list each time)."),
    spec("skill", "Use a skill", Skills, Safe, "Load the instructions of a skill by name."),
    spec("delegate", "Hand to a helper", Agent, Safe, "Hand a self-contained subtask to a helper with its own context; you get its summary."),
    spec("meeting_note", "Write a meeting note", Agent, Safe, "Write the note of a call cowork listened to (summary, decisions, action items with owners, each with the transcript lines it stands on) and keep it in memory."),
    spec("recap", "Write a recap", Agent, Safe, "Write the recap of a day or a week (per project, what was done and left open, each line with its sources) and keep it in memory."),
];

pub fn get(name: &str) -> Option<&'static ToolSpec> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The family's own name for a tool (the files family says `read`, the model `read_file`).
fn inner(name: &str) -> &str {
    match name {
        "read_file" => "read",
        "list_files" => "list",
        "search_files" => "search",
        "file_info" => "info",
        "write_file" => "write",
        "edit_file" => "edit",
        "make_dir" => "mkdir",
        "delete_path" => "delete",
        "move_path" => "move",
        other => other,
    }
}

pub fn schema(name: &str) -> Option<Value> {
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    match get(name)?.family {
        Memory => memory::schema(name),
        Files => files::schema(inner(name)),
        Documents => documents::schema(name),
        Shell => Some(shell::schema()),
        Web if name == "web_search" => Some(web_search::schema()),
        Web => Some(web::schema()),
        Desktop => desktop::schema(name),
        Skills => Some(skills::schema()),
        Conversation if name == "ask_user" => Some(object(json!({"question": {"type": "string", "minLength": 1, "maxLength": 2000}}), &["question"])),
        Conversation => Some(object(
            json!({"items": {"type": "array", "maxItems": 30, "items": {
                "type": "object",
                "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 300}, "done": {"type": "boolean"}},
                "required": ["text"], "additionalProperties": false
            }}}),
            &["items"],
        )),
        Agent if name == "meeting_note" => Some(object(
            json!({
                "start_ms": {"type": "integer", "description": "the call's start, milliseconds since 1970"},
                "end_ms": {"type": "integer"},
                "title": {"type": "string", "maxLength": 300},
                "instructions": {"type": "string", "maxLength": 2000}
            }),
            &["start_ms", "end_ms"],
        )),
        Agent if name == "recap" => Some(object(
            json!({
                "period": {"type": "string", "enum": ["day", "week"]},
                "date": {"type": "string", "minLength": 10, "maxLength": 10, "description": "a day of the period, YYYY-MM-DD (default today)"},
                "instructions": {"type": "string", "maxLength": 2000}
            }),
            &[],
        )),
        Agent => Some(object(
            json!({
                "task": {"type": "string", "minLength": 1, "maxLength": 4000},
                "tools": {"type": "array", "items": {"type": "string"}, "maxItems": 30}
            }),
            &["task"],
        )),
    }
}

/// Checks a call's name and arguments; the error is written for the model.
pub fn validate(name: &str, args: &Value) -> Result<(), String> {
    let Some(schema) = schema(name) else {
        return Err(format!("there is no tool named {name:?}; use one of the tools you were given"));
    };
    let problems = schema::validate(&schema, args);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("the arguments of {name} do not fit its schema: {}. Call it again with arguments that do.", problems.join("; ")))
    }
}

/// What a call touches, for the policy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Classified {
    pub risk: Risk,
    pub paths: Vec<PathBuf>,
    pub writes: bool,
    pub command: Option<String>,
    pub url: Option<String>,
    /// The tool does not type its arguments (MCP, flows): the policy reads every string in them.
    pub untyped: bool,
    /// Files that exist and that the call replaces, edits or trashes (the card says so).
    pub changes: Vec<policy::Change>,
}

impl Classified {
    pub fn call<'a>(&'a self, tool: &'a str, args: &'a Value) -> policy::Call<'a> {
        policy::Call { tool, args, risk: self.risk, paths: &self.paths, writes: self.writes, command: self.command.as_deref(), url: self.url.as_deref(), untyped: self.untyped, changes: &self.changes }
    }
}

/// The risk of a call by its arguments, with the paths (resolved), command
/// and URL it touches. An error (a path into cowork's data, `..` where
/// nothing exists) means the call cannot run; it is told to the model.
pub fn classify(name: &str, args: &Value, env: &FilesEnv) -> Result<Classified, String> {
    let spec = get(name).ok_or_else(|| format!("there is no tool named {name:?}"))?;
    let mut classified = Classified { risk: spec.risk, ..Classified::default() };
    match spec.family {
        Files => {
            let tool = inner(name);
            classified.paths = files::paths(tool, args, env)?;
            classified.risk = files::classify(tool, &classified.paths, env);
            classified.writes = !matches!(tool, "read" | "list" | "search" | "info");
            // An edit whose text to find is (nearly) the whole file replaces it.
            let whole = |p: &PathBuf| {
                let find = args.get("find").and_then(Value::as_str).map_or(0, str::len) as u64;
                std::fs::metadata(p).is_ok_and(|m| m.is_file() && find * 10 >= m.len() * 9)
            };
            let kind = match tool {
                "write" => Some(policy::ChangeKind::Replaces),
                "edit" if classified.paths.iter().any(whole) => Some(policy::ChangeKind::Replaces),
                "edit" => Some(policy::ChangeKind::Edits),
                "delete" => Some(policy::ChangeKind::Trashes),
                _ => None,
            };
            classified.changes = kind.into_iter().flat_map(|kind| classified.paths.iter().filter_map(move |p| policy::Change::of(p, kind))).collect();
        }
        Documents => {
            classified.paths = documents::paths(name, args, env)?;
            classified.risk = documents::classify(name, args, &classified.paths);
            classified.writes = name != "read_document";
            let kind = match name {
                // Without `replace` a write over a file that exists is refused by the tool itself.
                "write_document" if args.get("replace").and_then(Value::as_bool) == Some(true) => Some(policy::ChangeKind::Replaces),
                "edit_document" => Some(policy::ChangeKind::Edits),
                _ => None,
            };
            classified.changes = kind.into_iter().flat_map(|kind| classified.paths.iter().filter_map(move |p| policy::Change::of(p, kind))).collect();
        }
        Shell => {
            classified.risk = shell::classify(args, env);
            classified.command = args.get("command").and_then(Value::as_str).map(str::to_owned);
        }
        Web => classified.url = args.get("url").and_then(Value::as_str).map(str::to_owned),
        Desktop if name == "open" => match desktop::open_target(args, env)? {
            desktop::OpenTarget::Url(url) => classified.url = Some(url),
            desktop::OpenTarget::Path(path) => classified.paths = vec![path],
            // The policy sees the app's command line, as it sees a shell command.
            desktop::OpenTarget::App { argv, .. } => classified.command = Some(argv.join(" ")),
        },
        _ => {}
    }
    Ok(classified)
}

/// Where what a tool returns comes from: memory and the desktop hold
/// captured text, the web is the web, anything else is a tool's output. Only
/// the user's answer to `ask_user` is the user's own words.
pub fn origin(name: &str) -> Origin {
    match get(name).map(|s| s.family) {
        Some(Memory) => Origin::Memory,
        // A recap is made of what cowork recorded.
        Some(Agent) if matches!(name, "recap" | "meeting_note") => Origin::Memory,
        Some(Desktop) if matches!(name, "clipboard_read" | "list_windows" | "screenshot") => Origin::Capture,
        Some(Web) => Origin::Web,
        Some(Documents) => Origin::Document,
        Some(Conversation) if name == "ask_user" => Origin::User,
        // A skill's body is an instruction the user installed (or cowork ships).
        Some(Skills) => Origin::Instructions,
        _ => Origin::ToolResult,
    }
}

/// Everything but `delegate` (a helper does not delegate again).
pub fn cloud_set(depth: u32) -> Vec<&'static str> {
    TOOLS.iter().map(|t| t.name).filter(|n| depth == 0 || *n != "delegate").collect()
}

/// The model-facing definitions of `names`.
pub fn defs(names: &[&str]) -> Vec<ToolDef> {
    names
        .iter()
        .filter_map(|name| {
            let spec = get(name)?;
            Some(ToolDef { name: spec.name.to_owned(), description: spec.description.to_owned(), parameters: schema(name)? })
        })
        .collect()
}

/// What an executor needs.
pub struct Env<'a> {
    pub files: &'a FilesEnv,
    pub memory: Option<MemoryEnv<'a>>,
    pub gate: &'a OutboundGate,
    /// Set by Stop: a running command is killed, a fetch abandoned.
    pub stop: &'a AtomicBool,
    pub skills: &'a [Skill],
    /// The web search the user configured (none: `web_search` says how to set one up).
    pub search: &'a SearchConfig,
    /// The user's own request for this task asked for a formula
    /// (`documents::asks_for_formulas`): spreadsheet cells starting with "="
    /// stay formulas. Otherwise they are written as text.
    pub user_asked_for_formulas: bool,
}

/// Whether a tool can run off the agent thread (it needs no database connection).
pub fn runs_anywhere(name: &str) -> bool {
    // A screenshot is taken for the approval card and handed over from it: the agent's own.
    name != "screenshot" && matches!(get(name).map(|s| s.family), Some(Files | Documents | Shell | Web | Desktop | Skills))
}

/// Runs a call whose arguments validated and whose decision is recorded.
/// Conversation and `delegate` calls are the agent's own and never come here.
pub fn execute(name: &str, args: &Value, env: &Env<'_>) -> ToolOutput {
    let Some(spec) = get(name) else { return ToolOutput::error(format!("there is no tool named {name:?}")) };
    match spec.family {
        Memory => match &env.memory {
            Some(memory_env) => memory::run(name, args, memory_env),
            None => ToolOutput::error("cowork's memory cannot be read right now"),
        },
        Files => files::run_with(inner(name), args, env.files, if env.user_asked_for_formulas { crate::documents::write::Formulas::Keep } else { crate::documents::write::Formulas::AsText }),
        Documents => documents::run(name, args, env.files, env.user_asked_for_formulas),
        Shell => shell::run(args, &env.files.cwd, env.stop),
        Web if name == "web_search" => web_search::run(args, env.search, env.gate, env.stop),
        Web => web::run(args, env.gate, env.stop),
        Desktop => desktop::run(name, args, env.files, env.gate),
        Skills => skills::run(args, env.skills),
        Conversation | Agent => ToolOutput::error(format!("{name} is handled by the agent itself")),
    }
}

/// One line per tool for `cowork tools` and the docs.
#[derive(Serialize)]
pub struct Listed {
    pub name: &'static str,
    pub family: Family,
    pub risk: Risk,
    pub description: &'static str,
    pub schema: Value,
}

pub fn listing() -> Vec<Listed> {
    TOOLS
        .iter()
        .map(|t| Listed { name: t.name, family: t.family, risk: t.risk, description: t.description, schema: schema(t.name).unwrap_or(Value::Null) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_schema_the_validator_accepts_and_unique_name() {
        for (i, tool) in TOOLS.iter().enumerate() {
            let schema = schema(tool.name).unwrap_or_else(|| panic!("{} has no schema", tool.name));
            schema::check_schema(&schema).unwrap_or_else(|err| panic!("{}: {err}", tool.name));
            assert!(TOOLS[..i].iter().all(|t| t.name != tool.name), "{} twice", tool.name);
            assert!(tool.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{} is not a valid function name", tool.name);
        }
    }

    #[test]
    fn bad_arguments_and_unknown_tools_are_explained_to_the_model() {
        assert!(validate("search_memory", &json!({"query": "flight"})).is_ok());
        let err = validate("search_memory", &json!({"limit": "ten"})).unwrap_err();
        assert!(err.contains("query") && err.contains("Call it again"), "{err}");
        assert!(validate("rm_everything", &json!({})).unwrap_err().contains("no tool named"));
    }

    #[test]
    fn classify_escalates_by_argument_and_resolves_what_a_call_touches() {
        let home = tempfile::tempdir().unwrap();
        let env = FilesEnv { cwd: home.path().to_owned(), home: home.path().to_owned(), data_dir: home.path().join("data") };
        std::fs::create_dir_all(&env.data_dir).unwrap();
        let c = classify("run_command", &json!({"command": "ls -la"}), &env).unwrap();
        assert_eq!((c.risk, c.command.as_deref()), (Risk::Sensitive, Some("ls -la")));
        assert_eq!(classify("run_command", &json!({"command": "rm -rf ~/notes"}), &env).unwrap().risk, Risk::Dangerous);
        let c = classify("write_file", &json!({"path": "notes.md", "content": "x"}), &env).unwrap();
        assert_eq!((c.risk, c.writes, c.paths.clone()), (Risk::Sensitive, true, vec![home.path().canonicalize().unwrap().join("notes.md")]));
        assert_eq!(classify("read_file", &json!({"path": "notes.md"}), &env).unwrap().risk, Risk::Safe);
        assert!(classify("read_file", &json!({"path": "data/cowork.db"}), &env).is_err());
        let c = classify("fetch_url", &json!({"url": "https://example.com/?q=1"}), &env).unwrap();
        assert_eq!((c.risk, c.url.as_deref()), (Risk::Sensitive, Some("https://example.com/?q=1")));
        let c = classify("open", &json!({"target": "https://example.com/"}), &env).unwrap();
        assert_eq!(c.url.as_deref(), Some("https://example.com/"));
    }

    #[test]
    fn origins_mark_captured_and_fetched_text_as_untrusted() {
        assert!(!origin("search_memory").trusted());
        assert!(!origin("clipboard_read").trusted());
        assert!(!origin("fetch_url").trusted());
        assert!(!origin("run_command").trusted());
        assert!(origin("ask_user").trusted());
    }
}
