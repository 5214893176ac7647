//! The files family: `read`, `list`, `search` and `info` (safe); `write`,
//! `edit` and `mkdir` (sensitive); `delete` and `move` (dangerous).
//!
//! Every path is resolved before anything is checked or touched: `~` and
//! relative paths expanded, symlinks followed (for a path that does not exist
//! yet, through its nearest existing ancestor), and `..` refused in the part
//! that does not exist. cowork's own data directory (database, rules, audit
//! log, secrets) is refused for every tool, whatever the path's spelling; the
//! policy refuses it too (phase 1), this is the executor's own check.
//!
//! Everything that replaces, edits or deletes is undoable: the old version
//! goes to the trash first (`undo`), and a move records where a thing went,
//! across file systems too.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Component, Path, PathBuf};

use regex::Regex;
use serde_json::{Value, json};

use super::{Risk, ToolOutput};
use crate::documents::write::Formulas;

/// Where the files tools work from.
#[derive(Clone, Debug)]
pub struct FilesEnv {
    /// Relative paths start here.
    pub cwd: PathBuf,
    pub home: PathBuf,
    /// cowork's data directory: never read or written.
    pub data_dir: PathBuf,
}

pub const TOOLS: [&str; 9] = ["read", "list", "search", "info", "write", "edit", "mkdir", "delete", "move"];

/// Files larger than this are not read whole.
const READ_LIMIT: u64 = 32 << 20;
/// `search` stops after this many files or matches.
const SEARCH_FILES: usize = 20_000;
const SEARCH_MATCHES: usize = 200;

pub fn schema(tool: &str) -> Option<Value> {
    let path = json!({"type": "string", "minLength": 1});
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    Some(match tool {
        "read" | "list" | "info" | "mkdir" => object(json!({"path": path}), &["path"]),
        "search" => object(json!({"path": path, "glob": {"type": "string"}, "text": {"type": "string"}}), &["path"]),
        "write" => object(json!({"path": path, "content": {"type": "string"}}), &["path", "content"]),
        "edit" => object(json!({"path": path, "find": {"type": "string", "minLength": 1}, "replace": {"type": "string"}, "all": {"type": "boolean"}}), &["path", "find", "replace"]),
        "delete" => object(json!({"path": path, "recursive": {"type": "boolean"}}), &["path"]),
        "move" => object(json!({"from": path, "to": path}), &["from", "to"]),
        _ => return None,
    })
}

/// Reads are safe; changes are sensitive; delete and move are dangerous, and
/// so are a write over a file that exists (it replaces it) and a change to a
/// dotfile in the home directory or under `/etc`.
pub fn classify(tool: &str, paths: &[PathBuf], env: &FilesEnv) -> Risk {
    match tool {
        "read" | "list" | "search" | "info" => Risk::Safe,
        "delete" | "move" => Risk::Dangerous,
        "write" if paths.iter().any(|p| fs::symlink_metadata(p).is_ok()) => Risk::Dangerous,
        _ => {
            let touchy = paths.iter().any(|p| {
                p.starts_with("/etc") || p.strip_prefix(&env.home).ok().and_then(|rest| rest.components().next()).is_some_and(|c| c.as_os_str().to_string_lossy().starts_with('.'))
            });
            if touchy { Risk::Dangerous } else { Risk::Sensitive }
        }
    }
}

/// Resolves a path argument: `~` and relative paths expanded, symlinks
/// followed, `..` refused where the path does not exist yet, and cowork's own
/// data refused.
pub fn resolve(arg: &str, env: &FilesEnv) -> Result<PathBuf, String> {
    let expanded = match arg.strip_prefix("~") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => env.home.join(rest.trim_start_matches('/')),
        _ => env.cwd.join(arg),
    };
    // `..` only where the path up to it exists (a missing part could be anything).
    if let Some(last) = expanded.components().enumerate().filter(|(_, c)| *c == Component::ParentDir).map(|(i, _)| i).last() {
        let prefix: PathBuf = expanded.components().take(last + 1).collect();
        if prefix.canonicalize().is_err() {
            return Err(format!("{arg}: \"..\" in a path that does not exist yet is not accepted"));
        }
    }
    // The nearest ancestor that exists, canonicalised; the rest appended as written.
    let mut existing = expanded.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    let base = loop {
        match existing.canonicalize() {
            Ok(base) => break base,
            Err(_) => {
                let Some(name) = existing.file_name() else { return Err(format!("{arg}: no such path")) };
                rest.push(name);
                existing = existing.parent().ok_or_else(|| format!("{arg}: no such path"))?;
            }
        }
    };
    let resolved = rest.iter().rev().fold(base, |path, name| path.join(name));
    let data_dir = env.data_dir.canonicalize().unwrap_or_else(|_| env.data_dir.clone());
    // The resolved path, and for a file with several names, its identity (a hard link is another spelling).
    if (super::own_data::OwnData { data_dir: &data_dir, home: &env.home }).inside(&resolved) {
        return Err(format!("{arg}: cowork's own data (database, keys, rules, audit log, skills) is never read or written by a tool"));
    }
    Ok(resolved)
}

/// The entry an argument names, without following a symlink in its last
/// component: `delete`, `move` and `info` act on a link itself, not on what it
/// points to. Refused like `resolve` when the link's target is cowork's data.
fn entry(arg: &str, env: &FilesEnv) -> Result<PathBuf, String> {
    let followed = resolve(arg, env)?;
    let Some(name) = Path::new(arg).file_name() else { return Ok(followed) };
    let parent = Path::new(arg).parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let link = resolve(&parent, env)?.join(name);
    Ok(if fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) { link } else { followed })
}

/// The resolved paths a call touches, for the policy (`Call::paths`).
pub fn paths(tool: &str, args: &Value, env: &FilesEnv) -> Result<Vec<PathBuf>, String> {
    let keys: &[&str] = if tool == "move" { &["from", "to"] } else { &["path"] };
    keys.iter()
        .map(|key| {
            let arg = args.get(*key).and_then(Value::as_str).ok_or_else(|| format!("{tool} needs {key:?}"))?;
            match (tool, *key) {
                ("delete" | "info", _) | ("move", "from") => entry(arg, env),
                _ => resolve(arg, env),
            }
        })
        .collect()
}

/// Runs a call whose arguments fit its schema, with what the agent writes
/// into CSV files neutralised (`run_with`, `Formulas::AsText`).
pub fn run(tool: &str, args: &Value, env: &FilesEnv) -> ToolOutput {
    run_with(tool, args, env, Formulas::AsText)
}

/// Runs a call; CSV and TSV text it writes keeps what starts like a formula
/// only when the user's own request asked for formulas (`Formulas::Keep`).
pub fn run_with(tool: &str, args: &Value, env: &FilesEnv, formulas: Formulas) -> ToolOutput {
    let resolved = match paths(tool, args, env) {
        Ok(paths) => paths,
        Err(err) => return ToolOutput::error(err),
    };
    let path = &resolved[0];
    let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default();
    let flag = |key: &str| args.get(key).and_then(Value::as_bool).unwrap_or(false);
    let shown = path.display();
    let mut undo = Vec::new();
    let result: Result<String, String> = match tool {
        "read" => read(path),
        "list" => list(path),
        "info" => fs::symlink_metadata(path).map_err(|e| format!("{shown}: {e}")).map(|m| {
            let kind = if m.is_dir() { "a folder" } else if m.file_type().is_symlink() { "a symlink" } else { "a file" };
            let modified = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_millis() as i64);
            let size = if m.is_dir() { counted(fs::read_dir(path).map_or(0, Iterator::count), "entry", "entries") } else { format!("{} bytes", m.len()) };
            let read_only = if m.permissions().readonly() { ", read-only" } else { "" };
            format!("{shown} is {kind}: {size}, last modified {} (local time){read_only}", crate::ids::format_local_datetime(modified))
        }),
        "search" => search(path, args.get("glob").and_then(Value::as_str), args.get("text").and_then(Value::as_str), env),
        "write" => write(path, text("content"), formulas, &mut undo),
        "edit" => edit(path, text("find"), text("replace"), flag("all"), formulas, &mut undo),
        "mkdir" => fs::create_dir_all(path).map_err(|e| format!("{shown}: {e}")).map(|_| format!("created {shown}")),
        "delete" => match fs::symlink_metadata(path) {
            Err(e) => Err(format!("{shown}: {e}")),
            Ok(m) if m.is_dir() && !flag("recursive") && fs::read_dir(path).is_ok_and(|mut d| d.next().is_some()) => {
                Err(format!("{shown}: the folder is not empty (a folder that is not empty needs \"recursive\": true)"))
            }
            // To the trash, not gone: Undo in the chat and `cowork undo` put it back.
            Ok(m) => super::undo::trash(path).map(|step| {
                let what = if m.is_dir() { format!("{shown} and everything in it") } else { shown.to_string() };
                undo.push(step);
                format!("moved {what} to the trash (the user can undo this)")
            }),
        },
        "move" => {
            let to = &resolved[1];
            super::undo::move_path(path, to).map(|step| {
                undo.push(step);
                format!("moved {shown} to {}", to.display())
            })
        }
        other => Err(format!("no files tool named {other:?}")),
    };
    match result {
        Ok(text) => ToolOutput { undo, ..ToolOutput::ok(text) },
        Err(err) => ToolOutput::error(err),
    }
}

fn read(path: &Path) -> Result<String, String> {
    let meta = fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.is_dir() {
        return Err(format!("{} is a directory; use list", path.display()));
    }
    if meta.len() > READ_LIMIT {
        return Err(format!("{} is {} MiB, over the {} MiB a tool reads", path.display(), meta.len() >> 20, READ_LIMIT >> 20));
    }
    let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(format!("{} looks binary ({} bytes); not shown", path.display(), bytes.len()));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn list(path: &Path) -> Result<String, String> {
    let mut entries: Vec<String> = fs::read_dir(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .filter_map(Result::ok)
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            match entry.metadata() {
                Ok(m) if m.is_dir() => format!("{name}/"),
                Ok(m) => format!("{name} ({} bytes)", m.len()),
                Err(_) => name,
            }
        })
        .collect();
    entries.sort();
    if entries.is_empty() {
        return Ok(format!("{} is empty", path.display()));
    }
    // The count first, said in words a small model copies rather than works out.
    let folders = entries.iter().filter(|e| e.ends_with('/')).count();
    let files = entries.len() - folders;
    Ok(format!("{} holds {} ({} and {}):\n{}", path.display(), counted(entries.len(), "entry", "entries"), counted(files, "file", "files"), counted(folders, "folder", "folders"), entries.join("\n")))
}

/// "1 file", "3 files".
fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A glob (`*`, `**`, `?`) over paths relative to the search root, as a regex.
pub fn glob_regex(glob: &str) -> Result<Regex, String> {
    let mut re = String::from("^");
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                if chars.peek() == Some(&'/') {
                    chars.next();
                    re.push_str("(?:.*/)?");
                } else {
                    re.push_str(".*");
                }
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    Regex::new(&re).map_err(|e| format!("the glob {glob:?} is not valid: {e}"))
}

fn search(root: &Path, glob: Option<&str>, text: Option<&str>, env: &FilesEnv) -> Result<String, String> {
    let by_name = glob.is_some_and(|g| !g.contains('/'));
    let glob = glob.map(glob_regex).transpose()?;
    // Smart case, as ripgrep: a needle in lower case matches any case.
    let fold = text.is_some_and(|t| !t.chars().any(char::is_uppercase));
    let needle = text.map(|t| if fold { t.to_lowercase() } else { t.to_owned() });
    let mut files_hit: Vec<String> = Vec::new();
    let data_dir = env.data_dir.canonicalize().unwrap_or_else(|_| env.data_dir.clone());
    let own = super::own_data::OwnData { data_dir: &data_dir, home: &env.home };
    let (mut stack, mut seen, mut found) = (vec![root.to_path_buf()], 0usize, Vec::new());
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
        for entry in entries {
            let path = entry.path();
            // Symlinks are not followed while walking, and cowork's data is skipped.
            let Ok(kind) = entry.file_type() else { continue };
            if path.starts_with(&data_dir) || kind.is_symlink() {
                continue;
            }
            // Another name (a hard link) of one of cowork's files is skipped as the file itself is.
            if kind.is_file() && entry.metadata().is_ok_and(|m| own.is_hard_link_inside(&m)) {
                continue;
            }
            if kind.is_dir() {
                stack.push(path);
                continue;
            }
            seen += 1;
            if seen > SEARCH_FILES || found.len() >= SEARCH_MATCHES {
                found.push(format!("[stopped after {} files and {} matches]", seen.min(SEARCH_FILES), found.len()));
                return Ok(found.join("\n"));
            }
            let relative = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
            // A glob without a `/` is a file name at any depth (`*.md`, as `find -name`); with one, a path.
            let matched_name = if by_name { entry.file_name().to_string_lossy().into_owned() } else { relative.clone() };
            if glob.as_ref().is_some_and(|g| !g.is_match(&matched_name)) {
                continue;
            }
            match &needle {
                None => found.push(relative),
                Some(needle) => {
                    let Ok(file) = fs::File::open(&path) else { continue };
                    let before = found.len();
                    for (n, line) in BufReader::new(file).lines().map_while(Result::ok).enumerate() {
                        let hit = if fold { line.to_lowercase().contains(needle.as_str()) } else { line.contains(needle.as_str()) };
                        if hit {
                            found.push(format!("{relative}:{}: {}", n + 1, line.trim()));
                            if found.len() >= SEARCH_MATCHES {
                                break;
                            }
                        }
                    }
                    if found.len() > before {
                        files_hit.push(relative);
                    }
                }
            }
        }
    }
    if found.is_empty() {
        return Ok(format!("no file under {} matches", root.display()));
    }
    // Which files first, in words, then the lines: what a question about "which file" wants.
    Ok(match needle {
        Some(needle) => format!("{:?} is in {}: {}\n{}", needle, counted(files_hit.len(), "file", "files"), files_hit.join(", "), found.join("\n")),
        None => format!("{}:\n{}", counted(found.len(), "file matches", "files match"), found.join("\n")),
    })
}

/// Writes `content` to `path`. A file that exists is copied to the trash
/// first (its step puts it back); a new one is a step that trashes it.
fn write(path: &Path, content: &str, formulas: Formulas, undo: &mut Vec<super::undo::UndoStep>) -> Result<String, String> {
    let shown = path.display();
    let (content, guarded) = guarded_csv(path, "", content, formulas);
    let content = content.as_str();
    let existed = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => return Err(format!("{shown} is a folder; write_file writes files")),
        Ok(_) => {
            undo.push(super::undo::keep_before_change(path)?);
            true
        }
        Err(_) => false,
    };
    path.parent().map_or(Ok(()), fs::create_dir_all).and_then(|_| fs::write(path, content)).map_err(|e| format!("{shown}: {e}"))?;
    let note = guarded_note(guarded);
    if existed {
        Ok(format!("replaced {shown} with {} bytes (the earlier version is in the trash; the user can undo this){note}", content.len()))
    } else {
        undo.push(super::undo::UndoStep::Created { path: path.to_path_buf() });
        Ok(format!("wrote {} bytes to {shown}{note}", content.len()))
    }
}

/// CSV or TSV text the agent writes, its new fields that start like a formula neutralised unless the user asked for formulas.
fn guarded_csv(path: &Path, original: &str, text: &str, formulas: Formulas) -> (String, usize) {
    match formulas {
        Formulas::Keep => (text.to_owned(), 0),
        Formulas::AsText => crate::documents::write::guard_csv_text(path, original, text),
    }
}

fn guarded_note(guarded: usize) -> String {
    if guarded == 0 {
        return String::new();
    }
    format!("; {guarded} field(s) starting like a formula (=, +, -, @) got a leading ' so a spreadsheet shows them as text: the user's request did not ask for formulas")
}

/// Replaces `find` with `replace` in a text file, after copying it to the trash.
fn edit(path: &Path, find: &str, replace: &str, all: bool, formulas: Formulas, undo: &mut Vec<super::undo::UndoStep>) -> Result<String, String> {
    let text = read(path)?;
    let count = text.matches(find).count();
    match count {
        0 => Err(format!("{}: the text to find does not occur; read the file and copy it exactly", path.display())),
        n if n > 1 && !all => Err(format!("{}: the text to find occurs {n} times; give more context or set \"all\": true", path.display())),
        n => {
            let edited = if all { text.replace(find, replace) } else { text.replacen(find, replace, 1) };
            let (edited, guarded) = guarded_csv(path, &text, &edited, formulas);
            undo.push(super::undo::keep_before_change(path)?);
            fs::write(path, edited).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(format!("replaced {n} occurrence(s) in {} (the earlier version is in the trash; the user can undo this){}", path.display(), guarded_note(guarded)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, FilesEnv) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["home/work", "data"] {
            fs::create_dir_all(root.join(sub)).unwrap();
        }
        fs::write(root.join("data/cowork.db"), "captured secrets").unwrap();
        let env = FilesEnv { cwd: root.join("home/work"), home: root.join("home"), data_dir: root.join("data") };
        (dir, env)
    }

    #[test]
    fn paths_that_escape_into_cowork_data_are_refused_however_they_are_spelled() {
        let (_dir, env) = setup();
        std::os::unix::fs::symlink(env.data_dir.join("cowork.db"), env.cwd.join("innocent.txt")).unwrap();
        std::os::unix::fs::symlink(&env.data_dir, env.cwd.join("notes")).unwrap();
        for (tool, args) in [
            ("read", json!({"path": "../../data/cowork.db"})),
            ("read", json!({"path": "innocent.txt"})),
            ("read", json!({"path": "notes/cowork.db"})),
            ("write", json!({"path": "notes/new.txt", "content": "x"})),
            ("list", json!({"path": env.data_dir.display().to_string()})),
            ("move", json!({"from": "innocent.txt", "to": "elsewhere.txt"})),
        ] {
            let out = run(tool, &args, &env);
            assert!(out.is_error && out.content.contains("cowork's own data"), "{tool} {args}: {}", out.content);
        }
        assert!(!env.data_dir.join("new.txt").exists());
        let out = run("write", &json!({"path": "missing/../../escape.txt", "content": "x"}), &env);
        assert!(out.is_error && out.content.contains("\"..\""), "{}", out.content);
        // The home directory's `~` works, and a path that stays outside is fine.
        assert!(!run("write", &json!({"path": "~/todo.md", "content": "buy milk"}), &env).is_error);
        assert_eq!(fs::read_to_string(env.home.join("todo.md")).unwrap(), "buy milk");
    }

    #[test]
    fn each_tool_does_what_it_says_and_explains_what_it_cannot_do() {
        let (_dir, env) = setup();
        let ok = |tool: &str, args: Value| {
            let out = run(tool, &args, &env);
            assert!(!out.is_error, "{tool} {args}: {}", out.content);
            out.content
        };
        ok("mkdir", json!({"path": "src/deep"}));
        ok("write", json!({"path": "src/deep/main.rs", "content": "fn main() {\n    total(1);\n    total(2);\n}\n"}));
        ok("write", json!({"path": "README.md", "content": "total docs\n"}));
        assert_eq!(ok("read", json!({"path": "README.md"})), "total docs\n");
        let root = env.cwd.canonicalize().unwrap();
        assert_eq!(ok("list", json!({"path": "."})), format!("{} holds 2 entries (1 file and 1 folder):\nREADME.md (11 bytes)\nsrc/", root.display()));
        assert_eq!(
            ok("search", json!({"path": ".", "text": "total", "glob": "**/*.rs"})),
            "\"total\" is in 1 file: src/deep/main.rs\nsrc/deep/main.rs:2: total(1);\nsrc/deep/main.rs:3: total(2);"
        );
        assert_eq!(ok("search", json!({"path": ".", "glob": "*.md"})), "1 file matches:\nREADME.md");
        // A name glob matches at any depth; a lower-case needle any case; an upper-case one exactly.
        assert_eq!(ok("search", json!({"path": ".", "glob": "*.rs"})), "1 file matches:\nsrc/deep/main.rs");
        assert!(ok("search", json!({"path": ".", "text": "TOTAL"})).starts_with("no file under"));
        assert!(ok("search", json!({"path": ".", "text": "docs"})).starts_with("\"docs\" is in 1 file: README.md"));
        assert!(ok("search", json!({"path": ".", "text": "Docs"})).starts_with("no file under"));
        let twice = run("edit", &json!({"path": "src/deep/main.rs", "find": "total", "replace": "sum"}), &env);
        assert!(twice.is_error && twice.content.contains("occurs 2 times"), "{}", twice.content);
        ok("edit", json!({"path": "src/deep/main.rs", "find": "total(2)", "replace": "sum(2)"}));
        ok("edit", json!({"path": "src/deep/main.rs", "find": "(", "replace": "[", "all": true}));
        assert_eq!(fs::read_to_string(env.cwd.join("src/deep/main.rs")).unwrap(), "fn main[) {\n    total[1);\n    sum[2);\n}\n");
        assert!(run("edit", &json!({"path": "README.md", "find": "absent", "replace": "x"}), &env).content.contains("does not occur"));
        let info = ok("info", json!({"path": "README.md"}));
        let today = crate::ids::format_local_datetime(crate::ids::now_millis());
        assert!(info.contains("is a file: 11 bytes, last modified ") && info.contains(&today[..14]), "in local time, with the date: {info}");
        assert!(ok("info", json!({"path": "src"})).contains("is a folder: 1 entry"));
        ok("move", json!({"from": "README.md", "to": "docs.md"}));
        assert!(run("move", &json!({"from": "docs.md", "to": "src"}), &env).content.contains("already exists"));
        assert!(run("delete", &json!({"path": "src"}), &env).content.contains("\"recursive\": true"));
        ok("delete", json!({"path": "src", "recursive": true}));
        ok("delete", json!({"path": "docs.md"}));
        assert_eq!(ok("list", json!({"path": "."})), format!("{} is empty", env.cwd.display()));
        // A symlink is deleted or moved itself, never what it points to.
        fs::write(env.home.join("keep.txt"), "kept").unwrap();
        std::os::unix::fs::symlink(env.home.join("keep.txt"), env.cwd.join("link")).unwrap();
        assert!(ok("info", json!({"path": "link"})).contains("symlink"));
        ok("move", json!({"from": "link", "to": "link2"}));
        assert!(fs::symlink_metadata(env.cwd.join("link2")).unwrap().file_type().is_symlink());
        ok("delete", json!({"path": "link2"}));
        assert!(!env.cwd.join("link2").exists() && env.home.join("keep.txt").exists(), "the link's target was touched");
        fs::write(env.cwd.join("blob.bin"), [0u8, 1, 2, 3]).unwrap();
        assert!(run("read", &json!({"path": "blob.bin"}), &env).content.contains("looks binary"));
        for tool in TOOLS {
            super::super::schema::check_schema(&schema(tool).unwrap()).unwrap();
        }
    }

    #[test]
    fn reads_are_safe_changes_sensitive_and_deletes_moves_and_dotfiles_dangerous() {
        let (_dir, env) = setup();
        let at = |p: &str| vec![env.home.join(p)];
        assert_eq!(classify("read", &at(".ssh/id_ed25519"), &env), Risk::Safe);
        assert_eq!(classify("write", &at("work/notes.md"), &env), Risk::Sensitive);
        assert_eq!(classify("write", &at(".bashrc"), &env), Risk::Dangerous);
        assert_eq!(classify("edit", &[PathBuf::from("/etc/hosts")], &env), Risk::Dangerous);
        assert_eq!(classify("delete", &at("work/tmp.txt"), &env), Risk::Dangerous);
        assert_eq!(classify("move", &at("work/a"), &env), Risk::Dangerous);
    }
}
