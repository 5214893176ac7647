//! The small local model's turn, shaped. A half-billion- to 1.5-billion-
//! parameter model does well when it is given little to choose from and a
//! grammar to write in, and badly otherwise; everything cowork does for it
//! lives here, behind a few calls the agent makes:
//!
//! - `plan(request, files)`: the built-in tools a request is offered (each
//!   family only when its words call for it), and whether the question is
//!   answered from the grounded context in one pass instead of a tool step;
//! - `prompt_section(offered)` and `call_schema(offered, path_choices)`: the
//!   tools part of its prompt and the grammar its first step writes;
//! - `messages(turns, has_looked, question)`: the step's messages;
//! - `repair(tool, args, request)`: a call's filler arguments become the request's words;
//! - `complete(tool, output, answer)`: a list the answer names nothing of goes under it.
//!
//! `tools::registry` stays the tool table; the cloud path needs none of this.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::brains::{Role, Turn};
use crate::llm::{PromptMessage, PromptRole};
use crate::tools::Risk;
use crate::tools::files::{self, FilesEnv};
use crate::tools::registry::Family::{Desktop, Documents, Files, Memory, Shell, Web};
use crate::tools::registry::{TOOLS, get, schema};

/// What the small model is offered for a request, decided once before a task starts.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalPlan {
    /// The built-in tools offered (MCP tools and flows are added by their own rooms).
    pub offered: Vec<&'static str>,
    /// Answered from the grounded context in one pass, without a tool step.
    pub from_memory: bool,
}

/// The plan for a request of the interactive agent.
pub fn plan(request: &str, files: &FilesEnv) -> LocalPlan {
    let offered = offer(request, Some(files));
    let from_memory = answers_from_memory_given(request, files, &offered);
    LocalPlan { offered, from_memory }
}

/// The messages of a step: after a result, the question again, nearest the
/// answer (a small model otherwise answers the result's shape, more calls or
/// JSON, instead of the user).
pub fn messages(turns: &[Turn], has_looked: bool, question: &str) -> Vec<PromptMessage> {
    let mut messages = prompt_messages(turns);
    if has_looked
        && let Some(last) = messages.last_mut()
        && last.content.starts_with("<tool_response>")
    {
        last.content.push_str(&format!("\n\nFrom this result, answer the user's request in plain words: {question}"));
    }
    messages
}

/// The conversation in the local model's form (Qwen2.5's chat template):
/// calls written back as `<tool_call>` blocks after the step's text, and the
/// results of one step in one user turn of `<tool_response>` blocks.
pub fn prompt_messages(turns: &[Turn]) -> Vec<PromptMessage> {
    let mut out: Vec<PromptMessage> = Vec::new();
    for turn in turns {
        match turn.role {
            Role::System => out.push(PromptMessage { role: PromptRole::System, content: turn.content.clone() }),
            Role::User => out.push(PromptMessage { role: PromptRole::User, content: turn.content.clone() }),
            // The local brain's own output, kept verbatim, so the prefix cache matches it.
            Role::Assistant if turn.content.contains("<tool_call>") => out.push(PromptMessage { role: PromptRole::Assistant, content: turn.content.clone() }),
            Role::Assistant => {
                let mut content = turn.content.clone();
                for call in &turn.tool_calls {
                    let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Object(Default::default()));
                    if !content.is_empty() {
                        content.push('\n');
                    }
                    let name = Value::String(call.name.clone());
                    content.push_str(&format!("<tool_call>\n{{\"name\": {name}, \"arguments\": {arguments}}}\n</tool_call>"));
                }
                out.push(PromptMessage { role: PromptRole::Assistant, content });
            }
            Role::Tool => {
                // Session numbers are for `read_session`, which a local model is never offered.
                let block = format!("<tool_response>\n{}\n</tool_response>", crate::ids::without_session_refs(&turn.content).0);
                match out.last_mut() {
                    Some(last) if last.role == PromptRole::User && last.content.starts_with("<tool_response>") => {
                        last.content.push('\n');
                        last.content.push_str(&block);
                    }
                    _ => out.push(PromptMessage { role: PromptRole::User, content: block }),
                }
            }
        }
    }
    out
}

/// The grammar of the first step's one call: a tool of `offered`, its path
/// arguments one of `path_choices` when the request named any.
pub fn call_schema(offered: &[&str], path_choices: &[String]) -> Option<Value> {
    one_call_schema(offered).map(|schema| with_path_choices(schema, path_choices))
}

/// Tools that change something (files, the clipboard, the focus, apps):
/// offered to the local model only when the request asks for a change.
const CHANGES: &[&str] = &["write_document", "edit_document", "write_file", "edit_file", "make_dir", "delete_path", "move_path", "clipboard_write", "focus_window", "open"];

/// Verbs that ask for a change when they start a sentence of the request
/// (after "please", "can you", ...).
const CHANGE_VERBS: &[&str] = &[
    "create", "write", "make", "add", "append", "save", "put", "edit", "change", "replace", "update", "fix", "delete", "remove",
    "erase", "trash", "rename", "move", "copy", "duplicate", "open", "launch", "start", "focus", "switch", "show", "bring", "run", "execute",
    "install", "type", "paste", "insert", "set", "touch", "mkdir", "clear", "empty", "store", "note", "keep", "download", "close",
];

/// Words before the verb of a polite or indirect request.
const LEAD_INS: &[&str] = &["please", "can", "could", "would", "will", "you", "kindly", "i", "want", "need", "to", "let's", "lets", "go", "ahead", "and", "then", "now", "also", "hey", "cowork", "just", "quickly"];

/// Whether the request asks for a change: a sentence or clause of it starts
/// with a change verb ("Create ~/a.txt", "Could you delete it?", "read x, then
/// rename it"). "Which windows are open?" does not.
pub fn asks_for_change(request: &str) -> bool {
    let lower = request.to_lowercase();
    clause_verbs(&lower).iter().any(|verb| CHANGE_VERBS.contains(&verb.as_str()))
}

/// The first word of each sentence or clause of a lower-case request, after
/// the lead-ins ("please", "can you"): its verb when it is an imperative.
fn clause_verbs(lower: &str) -> Vec<String> {
    let clauses = lower.replace(", then ", ". ").replace(" and then ", ". ").replace(" then ", ". ");
    clauses
        .split(['.', '!', '?', ';', '\n', ':'])
        .filter_map(|clause| {
            clause.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()).find(|w| !LEAD_INS.contains(w)).map(str::to_owned)
        })
        .collect()
}

/// Words that name an office document, a PDF, a spreadsheet or slides.
const DOCUMENT_WORDS: &[&str] = &[
    "pdf", ".docx", "word document", "word file", "spreadsheet", "xlsx", "excel", ".xls", ".ods", ".odt", ".odp", "slides", "slide deck", "presentation", "pptx",
    "epub", "e-book", "ebook", "document", ".csv", " csv", "workbook",
];

fn mentions_document(text: &str) -> bool {
    DOCUMENT_WORDS.iter().any(|w| text.contains(w))
}

/// Words that ask for a web search rather than a page.
const SEARCH_WORDS: &[&str] = &["search the web", "web search", "search online", "on the web", "online", "internet", "look up", "google", "what does the web say", "latest news"];

/// The tools that make the changes a request's verbs ask for ("Delete ...":
/// `delete_path`; "Rename a to b": `move_path`), in the order of the verbs.
fn change_tools(text: &str) -> Vec<&'static str> {
    let folder = text.contains("folder") || text.contains("directory");
    let document = mentions_document(text);
    let mut tools: Vec<&'static str> = Vec::new();
    for verb in clause_verbs(text) {
        let add: &[&'static str] = match verb.as_str() {
            "create" | "make" | "mkdir" if folder => &["make_dir"],
            "create" | "write" | "save" | "put" | "make" | "export" if document => &["write_document"],
            "add" | "append" | "insert" | "edit" | "change" | "replace" | "update" | "fix" | "set" if document => &["edit_document", "read_document"],
            "create" | "write" | "save" | "put" | "store" | "note" | "keep" | "make" | "touch" => &["write_file"],
            "add" | "append" | "insert" | "edit" | "change" | "replace" | "update" | "fix" => &["edit_file", "write_file"],
            "delete" | "remove" | "erase" | "trash" | "clear" | "empty" => &["delete_path"],
            "rename" | "move" => &["move_path"],
            "copy" if text.contains("clipboard") => &["clipboard_write"],
            "open" | "launch" | "start" => &["open"],
            "focus" | "switch" | "bring" | "show" => &["list_windows", "focus_window"],
            "run" | "execute" | "install" => &["run_command"],
            "download" => &["fetch_url"],
            _ => &[],
        };
        for tool in add {
            if !tools.contains(tool) {
                tools.push(tool);
            }
        }
    }
    tools
}

/// Whether the request asks about what is on the screen now ("What's on my
/// screen?", "read this error", "what does this dialog say?").
fn reads_the_screen(text: &str) -> bool {
    const ASKS: &[&str] = &["on my screen", "on the screen", "on screen", "my screen", "screenshot", "what i'm looking at"];
    const THIS: &[&str] = &["this error", "this dialog", "this message", "this window", "this popup", "this warning", "this screen", "this page", "this chart", "this graph"];
    let reads = ["read", "what does", "what's", "what is", "explain", "say", "mean", "fix", "summar"].iter().any(|w| text.contains(w));
    ASKS.iter().any(|w| text.contains(w)) || (reads && THIS.iter().any(|w| text.contains(w)))
}

/// Whether the request is about the user, their past or their memory
/// (memory tools may know); "Which is larger, 17 or 71?" is not.
fn about_the_user(text: &str) -> bool {
    const WORDS: &[&str] = &[
        "i", "i'm", "i've", "i'd", "me", "my", "mine", "myself", "we", "our", "us", "today", "yesterday", "earlier", "morning", "afternoon",
        "evening", "tonight", "week", "ago", "recent", "recently", "last", "remember", "recall", "forgot", "before", "previous",
    ];
    text.split(|c: char| !c.is_alphanumeric() && c != '\'').any(|w| WORDS.contains(&w))
}

/// Whether the request carries all it needs (a list after a colon, "these
/// numbers", a sum, a unit conversion, a text to rewrite) and asks nothing
/// about the user: then no tool is offered and the model answers at once.
fn needs_no_tool(text: &str) -> bool {
    // "Rewrite this: …" (a colon before a space or the end), not the colon of "1:1" or "09:30".
    let colon = text.char_indices().find(|(i, c)| *c == ':' && text[i + 1..].chars().next().is_none_or(char::is_whitespace)).map(|(i, _)| i);
    let (head, material) = match colon {
        Some(at) => (&text[..at], text[at + 1..].split_whitespace().count() >= 2),
        None => (text, false),
    };
    if about_the_user(head) {
        return false;
    }
    let words: Vec<&str> = head.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let these = words.contains(&"these");
    let units = ["seconds", "minutes", "hours", "days", "weeks", "months", "years", "metres", "meters", "km", "kilometres", "kilometers", "miles", "feet", "inches", "grams", "kg", "pounds", "litres", "liters"];
    let conversion = words.windows(2).any(|w| w[0] == "many" && units.contains(&w[1]));
    let sum = words.iter().any(|w| ["plus", "minus", "times", "divided", "percent"].contains(w))
        || text.as_bytes().windows(3).any(|w| w[0].is_ascii_digit() && matches!(w[1], b'+' | b'-' | b'*' | b'/' | b'x') && w[2].is_ascii_digit());
    let asks_for_words = words.first().is_some_and(|w| ["rewrite", "translate", "rephrase", "shorten", "correct", "spell", "define", "calculate", "compute"].contains(w));
    material || these || conversion || sum || asks_for_words
}

/// What a request names in the file system: each path as written (`~/notes/a.txt`,
/// `/etc/hosts`, `projects/okapi`, or "~/Downloads" for the home folder's own
/// entry named by its name, "my Downloads folder") with what it resolves to.
/// cowork's own data is never among them.
fn written_paths(request: &str, files: &FilesEnv) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for token in request.split_whitespace() {
        let token = token.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '(' | ')' | ',' | ';' | ':' | '?' | '!' | '<' | '>')).trim_end_matches('.');
        if token.is_empty() || !(token.starts_with('~') || token.contains('/')) || token.contains("://") {
            continue;
        }
        if let Ok(path) = files::resolve(token, files)
            && !found.iter().any(|(_, p)| *p == path)
        {
            found.push((token.to_owned(), path));
        }
    }
    // A folder of the home named by its name ("my Downloads folder"), when no path is written.
    if let (true, Ok(entries)) = (found.is_empty(), std::fs::read_dir(&files.home)) {
        let words: Vec<String> = request.split(|c: char| !c.is_alphanumeric() && !matches!(c, '-' | '_' | '.')).map(str::to_lowercase).collect();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if !name.starts_with('.') && name.len() >= 3 && words.contains(&name.to_lowercase()) && !found.iter().any(|(_, p)| *p == path) {
                // Never cowork's own data directory, whatever it is called.
                if let Ok(path) = files::resolve(&path.to_string_lossy(), files) {
                    found.push((format!("~/{name}"), path));
                }
            }
        }
    }
    found
}

/// What a request names in the file system, that exists.
pub fn named_paths(request: &str, files: &FilesEnv) -> Vec<PathBuf> {
    written_paths(request, files).into_iter().map(|(_, path)| path).filter(|path| path.exists()).collect()
}

/// The paths a small model may write in a call for this request: those it
/// names (as written, existing or to be made) and what a named folder holds,
/// two levels down (at most `PATH_CHOICES`). Empty when it names none: then
/// any path may be written. A grammar made from them keeps a half-billion
/// model from inventing a home ("/home/user/…") or gluing `~` into a path.
pub fn path_choices(request: &str, files: &FilesEnv) -> Vec<String> {
    const PATH_CHOICES: usize = 60;
    let mut choices: Vec<String> = Vec::new();
    let add = |choice: String, choices: &mut Vec<String>| {
        if choices.len() < PATH_CHOICES && !choices.contains(&choice) {
            choices.push(choice);
        }
    };
    for (written, path) in written_paths(request, files) {
        add(written.clone(), &mut choices);
        if !path.is_dir() {
            continue;
        }
        let mut level = vec![(written.trim_end_matches('/').to_owned(), path)];
        for _ in 0..2 {
            let mut next = Vec::new();
            for (shown, dir) in level {
                let mut entries: Vec<_> = std::fs::read_dir(&dir).into_iter().flatten().flatten().collect();
                entries.sort_by_key(|e| e.file_name());
                for entry in entries {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if name.starts_with('.') || files::resolve(&entry.path().to_string_lossy(), files).is_err() {
                        continue;
                    }
                    let child = format!("{shown}/{name}");
                    add(child.clone(), &mut choices);
                    if entry.path().is_dir() {
                        next.push((child, entry.path()));
                    }
                }
            }
            level = next;
        }
    }
    choices
}

/// A small model's memory query that shares no word with the request ("search
/// memory", "your search term") is replaced by the request's own words: the
/// search is by words and meaning, and the request is what the user wants found.
///
/// A `search_files` call's filler is dropped the same way: a `text` of
/// "null" or "*", a glob of "*" or one the request does not speak of
/// ("*dark_theme"), and `dark_theme` is searched as the request wrote it.
pub fn repair(tool: &str, args: &mut Value, request: &str) {
    if tool == "search_files" {
        fix_local_search(args, request);
    }
    if tool != "search_memory" {
        return;
    }
    let wanted = content_words(request);
    let query = args.get("query").and_then(Value::as_str).unwrap_or_default();
    if wanted.is_empty() || content_words(query).iter().any(|w| wanted.contains(w)) {
        return;
    }
    args["query"] = Value::String(wanted.join(" "));
}

/// The words of a request a memory search looks for (question words and filler dropped).
pub(super) fn content_words(text: &str) -> Vec<String> {
    const STOP: &[&str] = &[
        "what", "which", "when", "where", "who", "whom", "how", "was", "were", "did", "does", "the", "and", "for", "that", "this", "with", "have",
        "has", "had", "about", "from", "into", "you", "your", "are", "is", "can", "could", "would", "there", "they", "them", "then", "than",
        "search", "memory", "query", "term", "find", "tell", "please", "look", "looked", "just", "today", "morning",
    ];
    text.split(|c: char| !c.is_alphanumeric() && c != '-').map(str::to_lowercase).filter(|w| w.len() >= 3 && !STOP.contains(&w.as_str())).collect()
}

/// Whether reading memory is all a local task can do: every offered tool
/// is `recent_activity`, `current_window` or `search_memory`. Such a
/// question is answered from the grounded context (the activity log and
/// recalled notes) in one pass: measured on scripts/eval-grounded with the
/// default model, 24/25 right with a first token p95 of 1.5 s, against 18/25
/// and 4.6 s when the small model first chooses a memory tool (16/25 when
/// cowork chose the read for it).
pub fn reads_memory_only(offered: &[&str]) -> bool {
    const READS: [&str; 3] = ["recent_activity", "current_window", "search_memory"];
    !offered.is_empty() && offered.iter().all(|t| READS.contains(t))
}

/// Whether a local question is answered from the grounded context: it can
/// only read memory (`reads_memory_only`), or it asks what the user did
/// ("which file was I editing", "what did I") without naming a path or
/// asking for a change, where the words "file" or "window" would otherwise
/// offer file and desktop tools that change nothing.
pub fn answers_from_memory(request: &str, files: &FilesEnv) -> bool {
    answers_from_memory_given(request, files, &offer(request, Some(files)))
}

/// Whether a request asks for no change and names no path (so memory may answer it).
pub fn names_no_path_or_change(request: &str, files: &FilesEnv) -> bool {
    !asks_for_change(request) && named_paths(request, files).is_empty()
}

fn answers_from_memory_given(request: &str, files: &FilesEnv, offered: &[&str]) -> bool {
    if reads_memory_only(offered) {
        return true;
    }
    // Only tools that change nothing are on offer (a fact to remember is a change of memory).
    let reads = offered.iter().all(|t| *t != "remember" && get(t).is_some_and(|spec| spec.risk == Risk::Safe));
    asks_what_user_did(request) && !asks_for_change(request) && named_paths(request, files).is_empty() && reads
}

/// Whether a request sets work for tools rather than asking what memory
/// knows: it starts with a verb of looking ("find my budget", "check the
/// build", "look up …") or names a file by its name ("how long is big.log?").
/// A cloud agent gets those; memory alone might answer them wrongly.
pub fn sets_tool_work(request: &str) -> bool {
    const LOOKING: &[&str] = &["find", "locate", "search", "look", "check", "fetch", "get", "list", "count", "grep", "scan", "browse"];
    let lower = request.to_lowercase();
    let looks = clause_verbs(&lower).iter().any(|verb| LOOKING.contains(&verb.as_str()));
    let file_name = lower.split_whitespace().any(|word| {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '_' && c != '-' && c != '.').trim_end_matches('.');
        match word.rsplit_once('.') {
            Some((stem, ext)) => {
                !stem.is_empty()
                    && (1..=5).contains(&ext.len())
                    && ext.chars().all(|c| c.is_ascii_alphanumeric())
                    && ext.chars().any(|c| c.is_ascii_alphabetic())
                    && stem.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
            }
            None => false,
        }
    });
    looks || file_name
}

/// Whether a message tells something about the user rather than asking
/// ("I am on leave all of next week.", "My flight is at 7:35."): nothing to
/// look up or do.
pub fn tells_about_user(request: &str) -> bool {
    let text = request.trim().to_lowercase();
    !text.ends_with('?') && ["i am ", "i'm ", "my ", "i will be ", "i'll be "].iter().any(|start| text.starts_with(start))
}

/// Whether a request asks what the user did or was doing ("which file was I
/// editing", "what did we decide"): a question about what cowork recorded.
pub fn asks_what_user_did(request: &str) -> bool {
    const PAST: &[&str] = &["was i ", "did i ", "have i ", "had i ", "i was ", "i did ", "i had ", "i've been ", "were we ", "did we ", "was my ", "were my ", "did my "];
    let text = format!("{} ", request.to_lowercase());
    PAST.iter().any(|w| text.contains(w))
}

fn fix_local_search(args: &mut Value, request: &str) {
    let lower = request.to_lowercase();
    let Some(object) = args.as_object_mut() else { return };
    if let Some(text) = object.get("text").and_then(Value::as_str).map(str::to_owned) {
        let spaced = text.replace('_', " ");
        if matches!(text.trim(), "" | "null" | "none" | "*" | "**") {
            object.remove("text");
        } else if !lower.contains(&text.to_lowercase()) && lower.contains(&spaced.to_lowercase()) {
            object.insert("text".into(), Value::String(spaced));
        }
    }
    // A "glob" with no wildcard that the request speaks of ("DEFAULT_PORT") is what to look for.
    if let Some(glob) = object.get("glob").and_then(Value::as_str).map(str::to_owned)
        && !glob.contains(['*', '?', '.', '/'])
        && !glob.is_empty()
        && lower.contains(&glob.to_lowercase())
        && !object.contains_key("text")
    {
        object.remove("glob");
        object.insert("text".into(), Value::String(glob));
    }
    if let Some(glob) = object.get("glob").and_then(Value::as_str).map(str::to_owned) {
        let extension = glob.strip_prefix("*.").is_some_and(|ext| !ext.is_empty() && ext.chars().all(char::is_alphanumeric));
        let spoken = lower.contains(&glob.to_lowercase());
        if !(extension || spoken) || matches!(glob.trim(), "*" | "**" | "**/*" | "null" | "") {
            object.remove("glob");
        }
    }
}

/// Most entries a list result puts under an answer that named none of them.
const LISTED_UNDER_ANSWER: usize = 20;

/// What a local answer leaves out of a list it was given: when the result of
/// `list_files`, `search_files` or `list_windows` names things and the
/// answer names none of them ("You have 2 recipes in ~/notes/recipes."),
/// the list to show under the answer, one per line. A small model often
/// counts or restates instead of naming; the user asked to see them.
pub fn complete(tool: &str, output: &str, answer: &str) -> Option<String> {
    let mut lines = output.lines();
    let header = lines.next().unwrap_or_default();
    // (what is shown, the words the answer may name it by)
    let items: Vec<(String, Vec<String>)> = match tool {
        "list_files" => lines
            .map(|line| line.rsplit_once(" (").filter(|(_, size)| size.ends_with(" bytes)")).map_or(line, |(name, _)| name))
            .map(|name| (name.to_owned(), file_names(name.trim_end_matches('/'))))
            .collect(),
        // `"dark theme" is in 1 file: notes/meeting.md` or, for a glob, one matching path per line.
        "search_files" => match header.split_once(" is in ").and_then(|(_, rest)| rest.split_once(": ")) {
            Some((_, files)) => files.split(", ").map(|f| (f.to_owned(), file_names(f))).collect(),
            None => lines.filter(|l| !l.starts_with('[')).map(|f| (f.to_owned(), file_names(f))).collect(),
        },
        // `window 7: Firefox — Quarterly numbers - Mozilla Firefox`
        "list_windows" => output
            .lines()
            .filter_map(|line| line.strip_prefix("window ").and_then(|l| l.split_once(": ")).map(|(_, w)| w))
            .map(|w| {
                let title = w.split_once(" — ").map_or(w, |(_, title)| title);
                let cut = [" - ", " — ", " | "].iter().filter_map(|sep| title.find(sep)).min().unwrap_or(title.len());
                let head = title[..cut].trim();
                (w.to_owned(), vec![title.trim().to_owned(), head.to_owned()])
            })
            .collect(),
        _ => return None,
    };
    let items: Vec<_> = items.into_iter().filter(|(shown, _)| !shown.trim().is_empty()).collect();
    let answer = answer.to_lowercase();
    let named = |names: &[String]| names.iter().any(|n| n.chars().count() >= 3 && answer.contains(&n.to_lowercase()));
    if items.is_empty() || items.iter().any(|(_, names)| named(names)) {
        return None;
    }
    let mut list: Vec<String> = items.iter().take(LISTED_UNDER_ANSWER).map(|(shown, _)| format!("- {shown}")).collect();
    if items.len() > LISTED_UNDER_ANSWER {
        list.push(format!("- … and {} more", items.len() - LISTED_UNDER_ANSWER));
    }
    Some(list.join("\n"))
}

/// The names a path is spoken of by: its file name, and that name without its extension.
fn file_names(path: &str) -> Vec<String> {
    let name = path.rsplit('/').next().unwrap_or(path).trim();
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    vec![name.to_owned(), stem.to_owned()]
}

/// A one-call schema (`one_call_schema`) whose path arguments may only be one of `choices`.
pub fn with_path_choices(mut schema: Value, choices: &[String]) -> Value {
    if choices.is_empty() {
        return schema;
    }
    for choice in schema["anyOf"].as_array_mut().into_iter().flatten() {
        if let Some(Value::Object(properties)) = choice.pointer_mut("/properties/arguments/properties") {
            for key in ["path", "from", "to"] {
                if let Some(property) = properties.get_mut(key) {
                    *property = json!({"enum": choices});
                }
            }
        }
    }
    schema
}

/// The tools offered to the small local model for a request: each family
/// only when the words of the request call for it (each tool's schema costs
/// prefill on every step, and every extra choice is one more a
/// half-billion-parameter model can take wrongly). With `files` (the
/// interactive agent), the request is read more closely: a path it names
/// that exists narrows the choice to reading that file or folder; tools that
/// change something are offered only when it asks for a change; and a
/// request that needs no tool (nothing about the user, their files, the web
/// or the desktop) gets none, so the model answers at once.
pub fn offer(request: &str, files: Option<&FilesEnv>) -> Vec<&'static str> {
    let text = request.to_lowercase();
    let wants = |words: &[&str]| words.iter().any(|w| text.contains(w));
    let change = files.is_none() || asks_for_change(request);
    let named = files.map(|files| named_paths(request, files)).unwrap_or_default();
    if !change && !named.is_empty() {
        // "What is in ~/notes/todo.txt?", "How many files are in ~/photos?": the file or folder it names, read,
        // by the one tool the question is about.
        let folder = named.iter().any(|p| p.is_dir());
        // A document's questions are about what it says ("How big is the budget in plan.docx?"),
        // unless they ask about the file itself.
        // (CSV, HTML, Markdown and text read as they are, with read_file.)
        use crate::documents::Kind;
        let document = !folder && named.iter().all(|p| Kind::by_extension(p).is_some_and(|k| !matches!(k, Kind::Text | Kind::Markdown | Kind::Csv | Kind::Html)));
        if document {
            // "How big is ~/report.pdf?" names the file right after the question; "how big is the budget in it" does not.
            let names_the_file = files.is_some_and(|files| {
                written_paths(request, files).iter().any(|(written, _)| {
                    let written = written.to_lowercase();
                    ["how big is ", "how large is ", "what size is ", "size of "].iter().any(|q| text.contains(&format!("{q}{written}")))
                })
            });
            let about_the_file = names_the_file || wants(&["file size", "size of the file", "how big is the file", "how large is the file", "bytes", "modified", "when was", "exist"]);
            return if about_the_file { vec!["file_info"] } else { vec!["read_document"] };
        }
        if wants(&["how big", "size", "bytes", "modified", "changed", "when was", "file or", "folder or", "exist", "is there"]) {
            return vec!["file_info"];
        }
        if folder && wants(&["mention", "contain", "talks about", "talk about", "defined", "find", "search", "where", "markdown files", "which file"]) {
            return vec!["search_files"];
        }
        // "Its Cargo.toml is in ~/projects/okapi": a file of the named folder, named by its name, is read.
        let names_a_file_inside = files.is_some_and(|files| {
            path_choices(request, files).iter().any(|choice| {
                let name = choice.rsplit('/').next().unwrap_or_default().to_lowercase();
                name.len() >= 4 && text.contains(&name) && files::resolve(choice, files).is_ok_and(|p| p.is_file())
            })
        });
        if folder && !names_a_file_inside && wants(&["how many", "list", "what files", "which files", "what folders", "which folders", "what is in", "what's in", "contents", "do i have"]) {
            return vec!["list_files"];
        }
        return if folder && !names_a_file_inside { vec!["read_file", "list_files"] } else { vec!["read_file"] };
    }
    // "What's on my screen?", "Read this error", "What does this dialog say?": what the screen shows, nothing else.
    if files.is_some() && !change && reads_the_screen(&text) {
        return vec!["screenshot"];
    }
    // Everything needed is in the request ("Rewrite this politely: ...", "Put these in order: ..."): answer at once.
    // ("Make a spreadsheet of these numbers: …" carries its material, but asks for a document.)
    if files.is_some() && named.is_empty() && needs_no_tool(&text) && !wants(&["file", "folder", "directory", "clipboard", "window", "~", "/"]) && !(change && mentions_document(&text)) {
        return Vec::new();
    }
    // A change, by its verb: only the tools that make it (and reading what the request names).
    if files.is_some() && change {
        let verbs = change_tools(&text);
        if !verbs.is_empty() {
            let mut names = verbs;
            if named.iter().any(|p| !p.is_dir()) && !names.contains(&"read_file") {
                names.push("read_file");
            }
            return names;
        }
    }
    // "Which windows are open?", "Is the build log window open?": the open windows, nothing else.
    if files.is_some() && !change && text.contains("window") && (text.contains("open") || text.contains("which windows")) {
        return vec!["list_windows"];
    }
    let mut families = Vec::new();
    if files.is_none() || !needs_no_tool(&text) {
        families.push(Memory);
    }
    if !named.is_empty() || wants(&["file", "folder", "directory", "write", "edit", "save", "note", "rename", "delete", "move ", ".md", ".txt", "/"]) || files.is_none() && wants(&["read "]) {
        families.push(Files);
    }
    // Documents by a path the request names, or to make one; "which document did I edit?" is memory.
    if mentions_document(&text) && (!named.is_empty() || change) {
        families.push(Documents);
    }
    if wants(&["run ", "command", "shell", "terminal", "git ", "install", "script", "execute", "compile", "build"]) {
        families.push(Shell);
    }
    // The web by a URL or by asking for it; "the page I read this morning" is memory.
    if wants(&["http", "www.", "url", "website", "web page", "webpage", "on the web", "online", "internet", "fetch", "download"])
        || files.is_none() && wants(&["web", "page", "site"])
    {
        families.push(Web);
    }
    if wants(&["clipboard", "copy", "paste", "window", "open ", "notify", "notification", "remind"]) {
        families.push(Desktop);
    }
    let mut names: Vec<&'static str> = TOOLS.iter().filter(|t| families.contains(&t.family)).map(|t| t.name).collect();
    // A search of the web by asking for one; a page by its URL.
    if families.contains(&Web) && !wants(SEARCH_WORDS) {
        names.retain(|n| *n != "web_search");
    } else if !families.contains(&Web) && wants(SEARCH_WORDS) {
        names.push("web_search");
    }
    if files.is_some() {
        // The window the user is in now only for "now"; what they were doing is the recent
        // activity; anything more particular (a reference, a ticket, a time) is searched for.
        if !wants(&["right now", "now", "current", "at the moment"]) {
            names.retain(|n| *n != "current_window");
        }
        if !wants(&["pin", "remembered", "what do you know", "facts"]) {
            names.retain(|n| *n != "list_pins");
        }
        let activity = wants(&["what was i", "what did i do", "what have i", "working on", "doing", " just ", "right before", "a moment ago", "last thing", "my day", "my morning"]);
        names.retain(|n| if activity { *n != "search_memory" } else { *n != "recent_activity" });
    }
    // The local model plans in its head: no todo list, no helpers, no skills;
    // it keeps a fact only when asked to (its first call is forced, see `one_call_schema`).
    names.retain(|n| !matches!(*n, "update_todos" | "delegate" | "skill" | "read_session" | "recap" | "meeting_note"));
    // A screenshot only when the screen is asked about (above): a window's name is not its pixels.
    names.retain(|n| *n != "screenshot");
    if !wants(&["remember", "note that", "don't forget", "keep in mind"]) {
        names.retain(|n| *n != "remember");
    }
    if !change {
        names.retain(|n| !CHANGES.contains(n));
    }
    names
}

/// A tool's parameters as the local model sees them. A half-billion-parameter
/// model fills every optional filter it is shown with invented values (an
/// `app` of "Microsoft Word", `since_minutes: 1`), which hides what it looks
/// for; so the memory tools, and `read_document` (whose page and sheet
/// filters it filled with "1"), offer it only their required arguments.
fn local_parameters(name: &str) -> Option<Value> {
    let mut parameters = schema(name)?;
    if get(name)?.family == Memory || name == "read_document" {
        let required: Vec<String> =
            parameters.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()).unwrap_or_default();
        if let Some(Value::Object(properties)) = parameters.get_mut("properties") {
            properties.retain(|key, _| required.contains(key));
        }
    }
    Some(parameters)
}

/// The tools part of the local model's system prompt: a plain list, one line
/// a tool. The local model's call is written under a grammar that carries
/// each schema (`one_call_schema`), so it needs only the names, arguments and
/// what each does; Qwen's own JSON signatures cost twice the prefill and, in
/// the prompt, made Qwen2.5-Coder-0.5B answer a tool's result with more JSON.
pub fn prompt_section(names: &[&str]) -> String {
    let lines: Vec<String> = names
        .iter()
        .filter_map(|name| Some((get(name)?, local_parameters(name)?)))
        .map(|(spec, parameters)| {
            let arguments: Vec<&str> = parameters.get("properties").and_then(Value::as_object).map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
            format!("- {}({}): {}", spec.name, arguments.join(", "), spec.description)
        })
        .collect();
    format!("Tools (cowork runs the one you call and gives you its result):\n{}", lines.join("\n"))
}

/// The JSON schema of one call to a tool of `offered`, which the local
/// model's first step must write (the llm worker makes it a grammar). The
/// small local model never chooses a tool on its own (Qwen2.5-Coder-0.5B
/// answers "what was I just doing?" by describing the tools it was shown),
/// but made to call one it picks a useful tool and arguments; after the
/// result it answers. This is a cloud API's `tool_choice: "required"`, for
/// the first step. None: no tool offered.
pub fn one_call_schema(offered: &[&str]) -> Option<Value> {
    let choices: Vec<Value> = offered
        .iter()
        .filter_map(|name| {
            let mut arguments = local_parameters(name)?;
            arguments["additionalProperties"] = Value::Bool(false);
            Some(json!({
                "type": "object",
                "properties": {"name": {"const": name}, "arguments": arguments},
                "required": ["name", "arguments"],
                "additionalProperties": false
            }))
        })
        .collect();
    (!choices.is_empty()).then(|| json!({"anyOf": choices}))
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_for_tools_is_told_from_a_question_for_memory() {
        for work in ["find my budget", "Please check the build", "how long is big.log?", "What is in plan.docx?", "look up the weather in Lisbon"] {
            assert!(sets_tool_work(work), "{work}");
        }
        for question in ["Who is my manager?", "What changed in Zig 0.15?", "Where is the flight going?", "Which file had the timezone bug?", "I am on leave all of next week."] {
            assert!(!sets_tool_work(question), "{question}");
        }
    }

    #[test]
    fn a_message_about_the_user_is_told_not_asked() {
        for told in ["I am on leave all of next week.", "I'm in Lisbon until Friday", "My flight is at 7:35.", "I'll be late tomorrow"] {
            assert!(tells_about_user(told), "{told}");
        }
        for asked in ["I am looking for what? ", "Am I free on Friday?", "My manager is who?", "Find my flight", "Is my flight on time?"] {
            assert!(!tells_about_user(asked), "{asked}");
        }
    }

    #[test]
    fn an_activity_question_offers_only_memory_reads_and_a_change_does_not() {
        let files = FilesEnv { cwd: "/tmp".into(), home: "/tmp".into(), data_dir: "/tmp/data".into() };
        for question in ["What did I do in the last three hours?", "Which hotel did I ask Priya to book?", "What was I just working on?"] {
            let offered = offer(question, Some(&files));
            assert!(reads_memory_only(&offered), "{question}: {offered:?}");
        }
        for question in ["Write my standup into ~/notes/standup.md", "Run cargo test in ~/projects/okapi", "Fetch https://example.com"] {
            assert!(!reads_memory_only(&offer(question, Some(&files))), "{question}");
        }
        assert!(!reads_memory_only(&[]));
        // The eval's questions about the user's morning, whatever words they use.
        for question in ["Which file was I editing before I ran the tests?", "How long was the 1:1 meeting?", "Which window was I in at 10:15?"] {
            assert!(answers_from_memory(question, &files), "{question}: {:?}", offer(question, Some(&files)));
        }
        for question in ["What does my note say?", "Rewrite this politely: send it now", "What is 12 plus 30?", "Which windows are open?", "Delete the file I was editing"] {
            assert!(!answers_from_memory(question, &files), "{question}");
        }
        // A summary or note memory holds for it answers a question that asks no change and names no path.
        assert!(names_no_path_or_change("Which file had the timezone bug in the nightly ETL job?", &files));
        for question in ["Delete the file with the timezone bug", "Which file in /tmp has the bug?"] {
            assert!(!names_no_path_or_change(question, &files), "{question}");
        }
    }

    #[test]
    fn documents_and_web_searches_are_offered_by_the_words_that_ask_for_them() {
        let home = std::env::temp_dir().join(format!("cowork-route-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("report.pdf"), "%PDF-1.4").unwrap();
        std::fs::write(home.join("notes.txt"), "x").unwrap();
        let files = FilesEnv { cwd: home.clone(), home: home.clone(), data_dir: home.join("data") };
        // A named document is read as a document, a named text file as a file.
        assert_eq!(offer(&format!("summarise {}", home.join("report.pdf").display()), Some(&files)), ["read_document"]);
        assert_eq!(offer(&format!("what does {} say?", home.join("notes.txt").display()), Some(&files)), ["read_file"]);
        // "How big" about what a document says is a read; about the file itself, its details.
        assert_eq!(offer(&format!("How big is the okapi budget in {}?", home.join("report.pdf").display()), Some(&files)), ["read_document"]);
        assert_eq!(offer(&format!("How big is the file {}?", home.join("report.pdf").display()), Some(&files)), ["file_info"]);
        assert_eq!(offer(&format!("How big is {}?", home.join("report.pdf").display()), Some(&files)), ["file_info"]);
        // "Make a spreadsheet": the document writer, not write_file.
        let sheet = offer("make a spreadsheet of these numbers: 1, 2, 3", Some(&files));
        assert!(sheet.contains(&"write_document") && !sheet.contains(&"write_file"), "{sheet:?}");
        let edit = offer("update the budget.xlsx workbook: set B2 to 20", Some(&files));
        assert!(edit.contains(&"edit_document"), "{edit:?}");
        // The web is searched when asked, a URL fetched when given; neither for memory questions.
        let search = offer("search the web for the egui 0.37 release notes", Some(&files));
        assert!(search.contains(&"web_search") && !search.contains(&"fetch_url"), "{search:?}");
        let page = offer("fetch https://example.com/notes and summarise it", Some(&files));
        assert!(page.contains(&"fetch_url") && !page.contains(&"web_search"), "{page:?}");
        assert!(!offer("what was I doing this morning?", Some(&files)).contains(&"web_search"));
        // A question about documents the user had open is memory: no document tool.
        let question = offer("which pdf did I read yesterday?", Some(&files));
        assert!(!question.iter().any(|t| t.ends_with("_document")), "{question:?}");
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn the_local_model_gets_memory_tools_and_more_only_when_the_request_needs_them() {
        let plain = offer("what was I doing this morning?", None);
        assert!(plain.contains(&"search_memory") && plain.contains(&"recent_activity"));
        assert!(!plain.contains(&"run_command") && !plain.contains(&"write_file"));
        let files = offer("save that to a file called plan.md", None);
        assert!(files.contains(&"write_file"));
        assert!(!plain.contains(&"remember") && offer("remember that I take tea", None).contains(&"remember"));
        let section = prompt_section(&plain);
        assert!(section.contains("- search_memory(query): ") && section.contains("- recent_activity(): "), "{section}");
        // The memory tools' section stays small for a 2-core prefill.
        let tokens = crate::memory::tokens::estimate_tokens(&section);
        assert!(tokens < 150, "{tokens} tokens");
        // The forced first call: one of the offered tools, with only the arguments shown.
        let schema = one_call_schema(&plain).unwrap();
        let names: Vec<&str> = schema["anyOf"].as_array().unwrap().iter().map(|c| c["properties"]["name"]["const"].as_str().unwrap()).collect();
        assert_eq!(names, plain);
        let search = &schema["anyOf"][names.iter().position(|n| *n == "search_memory").unwrap()]["properties"]["arguments"];
        assert_eq!(search["properties"].as_object().unwrap().keys().collect::<Vec<_>>(), ["query"]);
        assert_eq!(search["additionalProperties"], false);
    }

    #[test]
    fn a_request_is_read_for_the_paths_it_names_the_change_it_asks_for_and_whether_it_needs_a_tool() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("photos/2026")).unwrap();
        std::fs::write(home.path().join("photos/2026/a.jpg"), "j").unwrap();
        std::fs::create_dir_all(home.path().join("Downloads")).unwrap();
        std::fs::write(home.path().join("todo.txt"), "milk").unwrap();
        let env = FilesEnv { cwd: home.path().to_owned(), home: home.path().to_owned(), data_dir: home.path().join("data") };
        let offered = |request: &str| offer(request, Some(&env));
        // A file it names: read it (no memory, no changes); a folder: the one tool the question is about.
        assert_eq!(offered("What is the second line of ~/todo.txt?"), ["read_file"]);
        assert_eq!(offered("How many files are in ~/photos/2026?"), ["list_files"]);
        assert_eq!(offered("What files are in my Downloads folder?"), ["list_files"]);
        assert_eq!(offered("Which file in ~/photos mentions a flamingo?"), ["search_files"]);
        assert_eq!(offered("How big is ~/todo.txt?"), ["file_info"]);
        assert_eq!(offered("What version is the crate in ~/photos?"), ["read_file", "list_files"]);
        assert_eq!(offered("When was it taken? Its a.jpg is in the folder ~/photos/2026."), ["file_info"]);
        assert_eq!(offered("What does a.jpg say? It is in the folder ~/photos/2026."), ["read_file"]);
        // A change by its verb: the tools that make it.
        assert_eq!(offered("Delete ~/todo.txt"), ["delete_path", "read_file"]);
        assert_eq!(offered("Rename ~/todo.txt to ~/done.txt"), ["move_path", "read_file"]);
        assert_eq!(offered("Add 'stamps' as a new line at the end of ~/todo.txt"), ["edit_file", "write_file", "read_file"]);
        assert_eq!(offered("Make a new folder ~/photos/2027"), ["make_dir"]);
        assert_eq!(offered("Create a file ~/ideas.txt with the text: espresso"), ["write_file"]);
        // A change is offered only when asked for, and then the write tools are there.
        for request in ["Create ~/notes.txt with the text hi", "Could you delete ~/todo.txt?", "Please make a new folder ~/photos/2027", "read ~/todo.txt, then rename it"] {
            assert!(asks_for_change(request), "{request}");
        }
        for request in ["Which windows are open right now?", "What did I write in ~/todo.txt?", "Is a window about the numbers open?", "Who made the drill?"] {
            assert!(!asks_for_change(request), "{request}");
        }
        assert!(offered("Please make a new folder ~/photos/2027").contains(&"make_dir"));
        assert_eq!(offered("Which windows are open right now?"), ["list_windows"]);
        assert!(offered("Open the file ~/todo.txt").contains(&"open"));
        // What is on the screen: a screenshot (which the user sees before the model does).
        for request in ["What's on my screen?", "Read this error", "What does this dialog say?", "Explain this error message to me", "Summarize what I'm looking at"] {
            assert_eq!(offered(request), ["screenshot"], "{request}");
        }
        assert_ne!(offered("What did the error in the build log say yesterday?"), ["screenshot"]);
        // The window the user is in now only for "now"; their doings, or a particular thing searched for.
        assert_eq!(offered("Which hotel did I ask Priya to book?"), ["search_memory"]);
        assert!(offered("What am I looking at right now?").contains(&"current_window"));
        assert!(offered("What was I just working on?").contains(&"recent_activity") && !offered("What was I just working on?").contains(&"search_memory"));
        // A request that carries what it needs and asks nothing about the user: no tool at all.
        for request in [
            "Which is the largest of these numbers: 17, 71, 44?",
            "Put these words in alphabetical order: pear, apple, mango.",
            "How many minutes are there in two and a half hours?",
            "Rewrite this more politely: send me the report now",
            "What is 17*3?",
        ] {
            assert!(offered(request).is_empty(), "{request}: {:?}", offered(request));
        }
        // About the user or their world: memory.
        for request in ["Who was my 1:1 meeting with today?", "What time was standup moved to?", "Which drill did I look at: the Bosch or the Makita?", "How many minutes did I spend in Slack?"] {
            assert!(offered(request).contains(&"search_memory"), "{request}");
        }
        assert_eq!(offered("Do I have the build log window open?"), ["list_windows"]);
        // A path that does not exist is no reason to narrow; cowork's data is never named.
        assert!(named_paths("read ~/absent.txt and /nonexistent/x", &env).is_empty());
        std::fs::create_dir_all(&env.data_dir).unwrap();
        std::fs::write(env.data_dir.join("cowork.db"), "x").unwrap();
        assert!(named_paths("read ~/data/cowork.db", &env).is_empty());
        // The paths a call may name: as written, and what a named folder holds (not hidden, not cowork's data).
        std::fs::write(home.path().join("photos/2026/a.jpg"), "j").unwrap();
        std::fs::write(home.path().join("photos/.hidden"), "h").unwrap();
        assert_eq!(path_choices("How many files are in ~/photos?", &env), ["~/photos", "~/photos/2026", "~/photos/2026/a.jpg"]);
        assert_eq!(path_choices("Create ~/new.txt with hi", &env), ["~/new.txt"]);
        assert_eq!(path_choices("What files are in my Downloads folder?", &env), ["~/Downloads"]);
        assert!(path_choices("read ~/data/cowork.db", &env).is_empty());
        assert!(!path_choices("What is in ~?", &env).iter().any(|c| c.starts_with("~/data")), "cowork's data is never offered");
        assert!(path_choices("Which is larger, 3 or 4?", &env).is_empty());
        let schema = with_path_choices(one_call_schema(&["read_file", "list_files"]).unwrap(), &["~/photos".to_owned()]);
        assert_eq!(schema["anyOf"][0]["properties"]["arguments"]["properties"]["path"], json!({"enum": ["~/photos"]}));
    }

    #[test]
    fn a_small_models_filler_arguments_become_the_requests_words() {
        let mut args = json!({"query": "search memory"});
        repair("search_memory", &mut args, "Which Jira ticket did I have open this morning?");
        assert_eq!(args["query"], "jira ticket open");
        let mut args = json!({"query": "flight booking"});
        repair("search_memory", &mut args, "What was the booking reference of the flight?");
        assert_eq!(args["query"], "flight booking", "a query that shares a word is the model's");
        let mut args = json!({"path": "~/x"});
        repair("read_file", &mut args, "read ~/y");
        assert_eq!(args["path"], "~/x");
        let mut args = json!({"path": "~/notes", "glob": "*dark_theme", "text": "dark_theme"});
        repair("search_files", &mut args, "Find the file under ~/notes that mentions the dark theme.");
        assert_eq!(args, json!({"path": "~/notes", "text": "dark theme"}));
        let mut args = json!({"path": "~/notes", "glob": "*.md", "text": "null"});
        repair("search_files", &mut args, "Find all Markdown files under ~/notes.");
        assert_eq!(args, json!({"path": "~/notes", "glob": "*.md"}));
        let mut args = json!({"path": "~/p", "glob": "DEFAULT_PORT"});
        repair("search_files", &mut args, "Where is DEFAULT_PORT defined?");
        assert_eq!(args, json!({"path": "~/p", "text": "DEFAULT_PORT"}));
        let mut args = json!({"path": "~/p", "glob": "*", "text": "DEFAULT_PORT"});
        repair("search_files", &mut args, "Where is DEFAULT_PORT defined?");
        assert_eq!(args, json!({"path": "~/p", "text": "DEFAULT_PORT"}));
    }

    /// The outputs as the tools write them (files::tests and describe_windows hold their formats).
    #[test]
    fn a_list_the_answer_names_nothing_of_goes_under_it() {
        let listing = "/home/u/notes/recipes holds 3 entries (2 files and 1 folder):\nold/\npancakes.md (120 bytes)\nshakshuka.md (98 bytes)";
        assert_eq!(complete("list_files", listing, "You have 2 recipes in ~/notes/recipes.").as_deref(), Some("- old/\n- pancakes.md\n- shakshuka.md"));
        // Named by a file name or by its stem: the answer stands alone.
        assert_eq!(complete("list_files", listing, "Pancakes and shakshuka."), None);
        assert_eq!(complete("list_files", listing, "pancakes.md"), None);
        let found = "\"dark theme\" is in 1 file: meeting-2026-11-20.md\nmeeting-2026-11-20.md:4: we keep the dark theme";
        assert_eq!(complete("search_files", found, "Call the search_files tool.").as_deref(), Some("- meeting-2026-11-20.md"));
        assert_eq!(complete("search_files", found, "It is in meeting-2026-11-20.md."), None);
        let globbed = "2 files match:\nrecipes/pancakes.md\nrecipes/shakshuka.md\n[stopped after 2000 files and 2 matches]";
        assert_eq!(complete("search_files", globbed, "Markdown files under ~/notes.").as_deref(), Some("- recipes/pancakes.md\n- recipes/shakshuka.md"));
        assert_eq!(complete("search_files", "no file under /home/u matches", "Nothing."), None);
        let windows = "window 7: Firefox — Quarterly numbers - Mozilla Firefox\nwindow 9: XTerm — build log";
        assert_eq!(
            complete("list_windows", windows, "The user is asking for the list of open windows.").as_deref(),
            Some("- Firefox — Quarterly numbers - Mozilla Firefox\n- XTerm — build log")
        );
        assert_eq!(complete("list_windows", windows, "Quarterly numbers is open."), None);
        // Other tools' results are the model's to read.
        assert_eq!(complete("read_file", "1: milk\n2: eggs", "Nothing."), None);
        let many: String = (0..30).map(|i| format!("\nphoto-{i}.jpg (1 bytes)")).collect();
        let shown = complete("list_files", &format!("/p holds 30 entries (30 files and 0 folders):{many}"), "There are 30 photos.").unwrap();
        assert_eq!(shown.lines().count(), LISTED_UNDER_ANSWER + 1);
        assert!(shown.ends_with("- … and 10 more"), "{shown}");
    }

}
