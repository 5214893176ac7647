//! The documents family: `read_document` (safe) reads PDF, office files,
//! e-books, web pages, Markdown and CSV by page, slide, sheet or cell range;
//! `write_document` (sensitive) creates DOCX, XLSX, Markdown, CSV or PDF,
//! and `edit_document` (sensitive) changes text in a DOCX or cells in an
//! XLSX. Writes go into the user's own folders only (under home, not hidden,
//! never cowork's data); an existing file is replaced only when the call
//! says `replace` (dangerous: it always asks), and its earlier version goes
//! to the trash, so Undo brings it back. What a document says is data.
//!
//! Spreadsheet cells the agent writes are data too: unless the user's own
//! request for the task asked for a formula (`asks_for_formulas`, decided by
//! the agent from the user's words only), a cell that starts like a formula
//! is written as text (see `documents::write::Formulas`), and the answer to
//! the model says so.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::files::{FilesEnv, resolve};
use super::undo::{UndoStep, keep_before_change};
use super::{Risk, ToolOutput};
use crate::documents::write::{self, Formulas, Sheet};
use crate::documents::{Selection, read_with_deadline};

pub const TOOLS: [&str; 3] = ["read_document", "write_document", "edit_document"];

/// Characters of a document returned when the call does not say.
pub const DEFAULT_MAX_CHARS: usize = 24_000;

pub fn schema(tool: &str) -> Option<Value> {
    let path = json!({"type": "string", "minLength": 1});
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    let cell = json!({"type": ["string", "number", "boolean", "null"]});
    Some(match tool {
        "read_document" => object(
            json!({
                "path": path,
                "pages": {"type": "string", "maxLength": 200, "description": "pages, slides or sections, e.g. \"1-3,7\""},
                "sheet": {"type": "string", "maxLength": 200},
                "cells": {"type": "string", "maxLength": 40, "description": "a cell range, e.g. \"A1:D20\""},
                "max_chars": {"type": "integer", "minimum": 500, "maximum": 200000}
            }),
            &["path"],
        ),
        "write_document" => object(
            json!({
                "path": path,
                "text": {"type": "string", "maxLength": 2000000, "description": "Markdown: # headings, paragraphs, - bullets, | tables |"},
                "sheets": {"type": "array", "maxItems": 50, "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "maxLength": 31}, "rows": {"type": "array", "maxItems": 100000, "items": {"type": "array", "maxItems": 1000, "items": cell}}},
                    "required": ["rows"], "additionalProperties": false
                }},
                "replace": {"type": "boolean", "description": "replace an existing file (asks the user)"}
            }),
            &["path"],
        ),
        "edit_document" => object(
            json!({
                "path": path,
                "replacements": {"type": "array", "maxItems": 200, "items": {
                    "type": "object",
                    "properties": {"find": {"type": "string", "minLength": 1}, "replace": {"type": "string"}},
                    "required": ["find", "replace"], "additionalProperties": false
                }},
                "cells": {"type": "array", "maxItems": 10000, "items": {
                    "type": "object",
                    "properties": {"sheet": {"type": "string"}, "cell": {"type": "string", "minLength": 2, "maxLength": 10}, "value": cell},
                    "required": ["cell", "value"], "additionalProperties": false
                }}
            }),
            &["path"],
        ),
        _ => return None,
    })
}

/// The resolved path a call touches; a write or edit outside the user's own
/// folders is refused here, before the policy or the user is asked.
pub fn paths(tool: &str, args: &Value, env: &FilesEnv) -> Result<Vec<PathBuf>, String> {
    let arg = args.get("path").and_then(Value::as_str).ok_or_else(|| format!("{tool} needs \"path\""))?;
    let path = resolve(arg, env)?;
    if tool != "read_document" {
        users_folder(&path, env)?;
        if tool == "write_document" && write::Format::by_path(&path).is_none() {
            return Err(format!("{arg}: cowork writes {} files; name the file with one of their extensions", write::WRITABLE));
        }
    }
    Ok(vec![path])
}

/// Under the home folder, in no hidden folder (configuration, caches, keys).
fn users_folder(path: &Path, env: &FilesEnv) -> Result<(), String> {
    let home = env.home.canonicalize().unwrap_or_else(|_| env.home.clone());
    let rest = path.strip_prefix(&home).map_err(|_| format!("{}: documents are written only into your own folders (under {})", path.display(), home.display()))?;
    if rest.components().any(|c| c.as_os_str().to_string_lossy().starts_with('.')) {
        return Err(format!("{}: documents are not written into hidden folders or as hidden files", path.display()));
    }
    Ok(())
}

/// Reading is safe; writing and editing sensitive; replacing a file that
/// exists dangerous (it always asks).
pub fn classify(tool: &str, args: &Value, paths: &[PathBuf]) -> Risk {
    match tool {
        "read_document" => Risk::Safe,
        "write_document" if paths.iter().any(|p| p.exists()) => Risk::Dangerous,
        _ => Risk::Sensitive,
    }
    .max(if args.get("replace").and_then(Value::as_bool) == Some(true) { Risk::Dangerous } else { Risk::Safe })
}

/// Whether the user's own words ask for a formula in a spreadsheet: they
/// name one ("formula", and the word in a few other languages), or write one
/// out ("=SUM(", "=B2*1.2"). Give it the user's request for this task only,
/// never text from a tool, a document, the web or memory: what it allows is
/// what an injected model would want.
pub fn asks_for_formulas(words: &str) -> bool {
    static ASKS: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"(?i)\bf[oó]rmul(?:a|as|ae|e|es|er|en)?\b|\bformel(?:n|s|er|erne)?\b|=\s*(?:[a-z][a-z0-9._]*\s*\(|\$?[a-z]{1,3}\$?[0-9]+)").ok());
    // "Formula 1" (or "Formula One", "Formula E") is a sport, not a request for formulas.
    let sport = |after: &str| {
        let next = after.trim_start().split(|c: char| !c.is_alphanumeric()).next().unwrap_or_default().to_lowercase();
        next.chars().all(|c| c.is_ascii_digit()) && !next.is_empty() || matches!(next.as_str(), "one" | "e")
    };
    ASKS.as_ref().is_some_and(|re| re.find_iter(words).any(|m| m.as_str().starts_with('=') || !sport(&words[m.end()..])))
}

/// The note for the model when cells were written as text.
fn as_text_note(count: usize) -> String {
    if count == 0 {
        return String::new();
    }
    let (cells, were) = if count == 1 { ("cell", "was") } else { ("cells", "were") };
    format!(
        "; {count} {cells} starting like a formula (=, +, -, @, a tab) {were} written as text, not as formulas, because the user's request did not ask \
         for formulas (this keeps text from documents or the web from becoming formulas that run when the file is opened); if the user wants \
         formulas, they can ask for them"
    )
}

/// Runs a documents tool. `user_asked_for_formulas`: the user's own request
/// for this task asked for a formula (`asks_for_formulas`); otherwise cells
/// that start like one are written as text.
pub fn run(tool: &str, args: &Value, env: &FilesEnv, user_asked_for_formulas: bool) -> ToolOutput {
    let formulas = if user_asked_for_formulas { Formulas::Keep } else { Formulas::AsText };
    let path = match paths(tool, args, env) {
        Ok(paths) => paths.into_iter().next().expect("one path"),
        Err(err) => return ToolOutput::error(err),
    };
    let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
    match tool {
        "read_document" => {
            let selection = Selection { pages: text("pages"), sheet: text("sheet"), cells: text("cells") };
            let max = args.get("max_chars").and_then(Value::as_u64).map_or(DEFAULT_MAX_CHARS, |n| n as usize);
            match read_with_deadline(&path, &selection, crate::documents::read::DEADLINE) {
                Ok(doc) => ToolOutput::ok(doc.render(max)),
                Err(err) => ToolOutput::error(err.to_string()),
            }
        }
        "write_document" => {
            let exists = path.exists();
            if exists && args.get("replace").and_then(Value::as_bool) != Some(true) {
                return ToolOutput::error(format!("{} already exists; call again with \"replace\": true to replace it (the user is asked, and the old one goes to the trash)", path.display()));
            }
            let sheets: Vec<Sheet> = args
                .get("sheets")
                .and_then(Value::as_array)
                .map(|sheets| {
                    sheets
                        .iter()
                        .enumerate()
                        .map(|(i, s)| Sheet {
                            name: s.get("name").and_then(Value::as_str).map_or_else(|| format!("Sheet{}", i + 1), str::to_owned),
                            rows: s.get("rows").and_then(Value::as_array).map(|rows| rows.iter().map(|r| r.as_array().cloned().unwrap_or_default()).collect()).unwrap_or_default(),
                            ..Sheet::default()
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut undo = Vec::new();
            if exists {
                match keep_before_change(&path) {
                    Ok(step) => undo.push(step),
                    Err(err) => return ToolOutput::error(err),
                }
            }
            match write::write_with(&path, text("text").as_deref(), &sheets, formulas) {
                Ok((said, as_text)) => {
                    if !exists {
                        undo.push(UndoStep::Created { path: path.clone() });
                    }
                    ToolOutput { undo, ..ToolOutput::ok(format!("{said}{}", as_text_note(as_text))) }
                }
                Err(err) => ToolOutput::error(err),
            }
        }
        "edit_document" => {
            let replacements: Vec<(String, String)> = args
                .get("replacements")
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(|r| Some((r.get("find")?.as_str()?.to_owned(), r.get("replace")?.as_str()?.to_owned()))).collect())
                .unwrap_or_default();
            let cells: Vec<(Option<String>, String, Value)> = args
                .get("cells")
                .and_then(Value::as_array)
                .map(|items| {
                    items.iter().filter_map(|c| Some((c.get("sheet").and_then(Value::as_str).map(str::to_owned), c.get("cell")?.as_str()?.to_owned(), c.get("value")?.clone()))).collect()
                })
                .unwrap_or_default();
            if replacements.is_empty() && cells.is_empty() {
                return ToolOutput::error("edit_document needs \"replacements\" (text) or \"cells\" (a spreadsheet)");
            }
            if !path.is_file() {
                return ToolOutput::error(format!("{} does not exist; write_document creates a document", path.display()));
            }
            let kind = crate::documents::Kind::by_extension(&path);
            let step = match keep_before_change(&path) {
                Ok(step) => step,
                Err(err) => return ToolOutput::error(err),
            };
            // A failed edit puts the earlier version back through Undo's own checks.
            let data_dir = env.data_dir.canonicalize().unwrap_or_else(|_| env.data_dir.clone());
            let own = super::own_data::OwnData { data_dir: &data_dir, home: &env.home };
            use crate::documents::Kind;
            let result = match kind {
                Some(Kind::Xlsx) if !cells.is_empty() => write::edit_xlsx(&path, &cells, formulas).map(|(n, as_text)| {
                    format!("set {n} cell{} in {} (the workbook was rewritten: values and formulas kept, formatting not){}", if n == 1 { "" } else { "s" }, path.display(), as_text_note(as_text))
                }),
                Some(Kind::Docx) if !replacements.is_empty() => write::edit_docx(&path, &replacements).map(|n| format!("replaced text in {n} place{} in {}", if n == 1 { "" } else { "s" }, path.display())),
                Some(Kind::Csv) if !replacements.is_empty() => {
                    write::edit_csv(&path, &replacements, formulas).map(|(n, as_text)| format!("replaced text in {n} place{} in {}{}", if n == 1 { "" } else { "s" }, path.display(), as_text_note(as_text)))
                }
                Some(Kind::Markdown | Kind::Text | Kind::Html) if !replacements.is_empty() => write::edit_text(&path, &replacements).map(|n| format!("replaced text in {n} place{} in {}", if n == 1 { "" } else { "s" }, path.display())),
                _ => Err(format!("{}: cowork edits text in DOCX, Markdown, CSV and text files, and cells in XLSX workbooks", path.display())),
            };
            match result {
                Ok(said) if said.starts_with("replaced text in 0 places") => {
                    let _ = super::undo::undo(&step, &own);
                    ToolOutput::error(format!("none of the text to find is in {}; read it first and copy the text exactly", path.display()))
                }
                Ok(said) => ToolOutput { undo: vec![step], ..ToolOutput::ok(said) },
                Err(err) => {
                    let _ = super::undo::undo(&step, &own);
                    ToolOutput::error(err)
                }
            }
        }
        other => ToolOutput::error(format!("no documents tool named {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::asks_for_formulas;

    #[test]
    fn a_request_asks_for_formulas_when_it_names_or_writes_one() {
        for words in ["put a formula that sums column A", "use Formulas for the totals", "Summe als Formel", "añade una fórmula", "=SUM(A1:A3) in the last row", "make C1 = b2*1.2", "= average (B2:B9)"] {
            assert!(asks_for_formulas(words), "{words:?}");
        }
        for words in ["make a spreadsheet of my expenses", "sum column A and write the total", "a = b", "reformulate the intro", "formulaic prose", "cost: 5 = cheap"] {
            assert!(!asks_for_formulas(words), "{words:?}");
        }
    }
}
