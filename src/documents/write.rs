//! Writing documents: DOCX (docx-rs) from Markdown-like text, XLSX
//! (rust_xlsxwriter) from rows, Markdown and CSV as text; editing DOCX text in
//! place and XLSX cells; an answer exported as DOCX or PDF (LibreOffice,
//! headless, with a throwaway profile).
//!
//! Every write goes to a temporary file beside the target and is renamed over
//! it, so a full disk or a crash never leaves half a document.
//!
//! Cells are data unless the user asked for formulas: with `Formulas::AsText`
//! a cell that starts like a formula (`=`, `+`, `-`, `@`, a tab or a carriage
//! return, after any spaces) is written as text, and a CSV cell gets OWASP's
//! single-quote prefix, so a model steered by what it read cannot plant
//! `=WEBSERVICE(…)` or `=HYPERLINK(…)` that runs when the user opens the file.
//! The cached values cowork works out for formulas cost bounded work: each
//! cell once, a circular reference left without a value, a budget per
//! workbook (`formula`).

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::read::{csv_records, parse_cell};

/// One sheet to write: a name and rows of cells (text, numbers, booleans;
/// text starting with "=" is a formula unless its cell is in `as_text`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sheet {
    pub name: String,
    pub rows: Vec<Vec<Value>>,
    /// Cells (row, column) written as text whatever they start with: cowork
    /// neutralised them (`Formulas::AsText`).
    pub as_text: BTreeSet<(usize, usize)>,
}

/// What becomes of cell text that a spreadsheet would run as a formula.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Formulas {
    /// Written as formulas: the user's own request asked for them.
    Keep,
    /// Written as text (a CSV cell with a leading `'`), as OWASP recommends
    /// against CSV and formula injection.
    AsText,
}

/// What a spreadsheet app reads as the start of a formula: `=`, `+`, `-`, `@`
/// and their full-width forms (after spaces), or a leading tab or carriage return.
const FORMULA_STARTS: [char; 8] = ['=', '+', '-', '@', '\u{ff1d}', '\u{ff0b}', '\u{ff0d}', '\u{ff20}'];

/// Whether a spreadsheet app would read `text` as a formula (OWASP's CSV
/// injection list). A plain number ("-3.5", "+2", "-5%") and a lone sign
/// ("-" in an empty column) are data.
pub fn starts_like_formula(text: &str) -> bool {
    // Invisible format characters (a byte-order mark Excel strips, zero-width spaces) count as nothing.
    let text = text.trim_start_matches(|c: char| matches!(c, '\u{feff}' | '\u{200b}'..='\u{200f}' | '\u{2060}' | '\u{00ad}'));
    let trimmed = text.trim();
    if trimmed.chars().nth(1).is_none() || is_plain_number(trimmed) {
        return false;
    }
    // `sep=|` in a CSV's first line tells Excel which separator splits cells: a cell may not choose it.
    text.starts_with(['\t', '\r']) || trimmed.starts_with(FORMULA_STARTS) || trimmed.get(..4).is_some_and(|s| s.eq_ignore_ascii_case("sep="))
}

/// CSV or TSV text that `files`' write or edit puts in `path` (a `.csv` or
/// `.tsv` file), with each field that was not in `original` and starts like
/// a formula neutralised, as the documents tools do; how many were.
pub fn guard_csv_text(path: &Path, original: &str, text: &str) -> (String, usize) {
    match path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).as_deref() {
        Some("csv") => guard_new_fields(original, text, b','),
        Some("tsv") => guard_new_fields(original, text, b'\t'),
        _ => (text.to_owned(), 0),
    }
}

/// Digits with a sign, a point, thousands commas, an exponent or a trailing
/// percent sign, and nothing else: what spreadsheets read as a number.
fn is_plain_number(text: &str) -> bool {
    let body = text.strip_suffix('%').unwrap_or(text);
    body.chars().any(|c| c.is_ascii_digit())
        && body.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | ',' | '+' | '-' | 'e' | 'E'))
        && body.replace(',', "").parse::<f64>().is_ok_and(f64::is_finite)
}

/// "-3.5" or "+2" given as text: a number, written as one.
fn signed_number(text: &str) -> Option<f64> {
    let trimmed = text.trim();
    if !trimmed.starts_with(['-', '+']) || !is_plain_number(trimmed) || trimmed.ends_with('%') {
        return None;
    }
    trimmed.replace(',', "").parse().ok()
}

/// Neutralises one cell of `sheet` (`Formulas::AsText`): a signed number
/// given as text becomes a number, text that starts like a formula is marked
/// to be written as text. Whether it was marked.
fn guard_cell(sheet: &mut Sheet, r: usize, c: usize) -> bool {
    let Some(cell) = sheet.rows.get_mut(r).and_then(|row| row.get_mut(c)) else { return false };
    let Value::String(text) = &*cell else { return false };
    if let Some(n) = signed_number(text).and_then(serde_json::Number::from_f64) {
        *cell = Value::Number(n);
        return false;
    }
    if starts_like_formula(text) {
        sheet.as_text.insert((r, c));
        return true;
    }
    false
}

/// Every cell of `sheet` neutralised; how many were marked as text.
fn guard_sheet(sheet: &mut Sheet) -> usize {
    let cells: Vec<(usize, usize)> = sheet.rows.iter().enumerate().flat_map(|(r, row)| (0..row.len()).map(move |c| (r, c))).collect();
    cells.into_iter().filter(|&(r, c)| guard_cell(sheet, r, c)).count()
}

/// A CSV cell's text neutralised: a leading `'` when it starts like a
/// formula, and one after each `;` or tab inside it whose piece does (Excel
/// in a semicolon locale, or a tab-separated import, starts a cell there, and
/// quotes do not protect a field that does not start with one). None: unchanged.
fn guard_csv_cell(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 2);
    let mut changed = starts_like_formula(text);
    if changed {
        out.push('\'');
    }
    // Separators inside the leading white space are part of the start checked above.
    let lead = text.len() - text.trim_start().len();
    out.push_str(&text[..lead]);
    let mut rest = &text[lead..];
    while let Some(at) = rest.find([';', '\t']) {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let piece = &rest[..rest.find([';', '\t', ',', '\n', '\r']).unwrap_or(rest.len())];
        if starts_like_formula(piece.trim_start_matches([' ', '"'])) {
            out.push('\'');
            changed = true;
        }
    }
    out.push_str(rest);
    changed.then_some(out)
}

/// The formats cowork writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Docx,
    Xlsx,
    Markdown,
    Csv,
    Pdf,
}

impl Format {
    pub fn by_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "docx" => Format::Docx,
            "xlsx" => Format::Xlsx,
            "md" | "markdown" => Format::Markdown,
            "csv" => Format::Csv,
            "pdf" => Format::Pdf,
            _ => return None,
        })
    }
}

pub const WRITABLE: &str = "DOCX, XLSX, Markdown (.md), CSV or PDF";

/// Writes a new document at `path` (the caller decided it may replace one).
/// `text` is Markdown-like (headings, paragraphs, bullets, pipe tables, a
/// line with only `\f` or `<!-- pagebreak -->` for a page break); `sheets`
/// are tables for XLSX and CSV (text that is a pipe table or CSV works too).
/// Cells starting with "=" are formulas: this is for the user's own writes.
pub fn write(path: &Path, text: Option<&str>, sheets: &[Sheet]) -> Result<String, String> {
    write_with(path, text, sheets, Formulas::Keep).map(|(said, _)| said)
}

/// `write` with what becomes of cells that start like a formula; also how
/// many cells were written as text for that reason.
pub fn write_with(path: &Path, text: Option<&str>, sheets: &[Sheet], formulas: Formulas) -> Result<(String, usize), String> {
    let format = Format::by_path(path).ok_or_else(|| format!("{} is not a file cowork writes: name it .docx, .xlsx, .md, .csv or .pdf", path.display()))?;
    let mut sheets: Vec<Sheet> = if sheets.is_empty() { text.map(sheets_from_text).unwrap_or_default() } else { sheets.to_vec() };
    match format {
        Format::Docx => {
            let text = text.ok_or("a Word document needs \"text\"")?;
            atomic_write(path, |file| docx(text).pack(file).map_err(|e| e.to_string()))?;
            Ok((format!("wrote {} ({} paragraphs)", path.display(), text.lines().filter(|l| !l.trim().is_empty()).count()), 0))
        }
        Format::Xlsx => {
            if sheets.is_empty() || sheets.iter().all(|s| s.rows.is_empty()) {
                return Err("a spreadsheet needs \"sheets\" with rows (or \"text\" holding a table)".into());
            }
            let cells: usize = sheets.iter().map(|s| s.rows.iter().map(Vec::len).sum::<usize>()).sum();
            let as_text = if formulas == Formulas::AsText { sheets.iter_mut().map(guard_sheet).sum() } else { 0 };
            let bytes = xlsx(&sheets)?;
            atomic_write(path, |file| file.write_all(&bytes).map_err(|e| e.to_string()))?;
            Ok((format!("wrote {} ({} sheet{}, {cells} cells)", path.display(), sheets.len(), if sheets.len() == 1 { "" } else { "s" }), as_text))
        }
        Format::Csv => {
            let sheet = sheets.first().ok_or("a CSV file needs rows (\"sheets\", or \"text\" holding a table)")?;
            let (csv, guarded) = to_csv(&sheet.rows, formulas);
            atomic_write(path, |file| file.write_all(csv.as_bytes()).map_err(|e| e.to_string()))?;
            Ok((format!("wrote {} ({} rows)", path.display(), sheet.rows.len()), guarded))
        }
        Format::Markdown => {
            let text = text.ok_or("a Markdown file needs \"text\"")?;
            atomic_write(path, |file| file.write_all(text.as_bytes()).map_err(|e| e.to_string()))?;
            Ok((format!("wrote {} ({} bytes)", path.display(), text.len()), 0))
        }
        Format::Pdf => {
            let text = text.ok_or("a PDF needs \"text\"")?;
            to_pdf(text, path)?;
            Ok((format!("wrote {} (through LibreOffice)", path.display()), 0))
        }
    }
}

/// Writes through a temporary file in the same folder, renamed over `path` when complete.
fn atomic_write(path: &Path, fill: impl FnOnce(&mut fs::File) -> Result<(), String>) -> Result<(), String> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // A new file of a name nobody could have planted (random, `O_EXCL | O_NOFOLLOW`):
    // a link left at a predictable name is never written through.
    let random = {
        use aes_gcm::aead::{OsRng, rand_core::RngCore};
        OsRng.next_u64()
    };
    let temp = dir.join(format!(".{name}.cowork-{}-{random:016x}.part", std::process::id()));
    let result = (|| {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = fs::OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_NOFOLLOW).mode(0o644).open(&temp).map_err(|e| format!("{}: {e}", temp.display()))?;
        fill(&mut file)?;
        file.sync_all().map_err(|e| e.to_string())?;
        fs::rename(&temp, path).map_err(|e| e.to_string())
    })();
    if let Err(err) = result {
        let _ = fs::remove_file(&temp);
        return Err(format!("could not write {}: {err}", path.display()));
    }
    Ok(())
}

/// Rows from text that is a Markdown pipe table or CSV.
pub fn sheets_from_text(text: &str) -> Vec<Sheet> {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let rows: Vec<Vec<Value>> = if lines.iter().any(|l| l.starts_with('|')) {
        lines
            .iter()
            .filter(|l| l.starts_with('|'))
            .filter(|l| !l.trim_matches(|c| c == '|' || c == '-' || c == ':' || c == ' ').is_empty())
            .map(|l| l.trim_matches('|').split('|').map(|c| cell_value(c.trim())).collect())
            .collect()
    } else {
        csv_records(text, if text.contains('\t') && !text.contains(',') { '\t' } else { ',' }).into_iter().filter(|r| r.iter().any(|c| !c.trim().is_empty())).map(|r| r.iter().map(|c| cell_value(c.trim())).collect()).collect()
    };
    if rows.is_empty() { Vec::new() } else { vec![Sheet { name: "Sheet1".into(), rows, ..Sheet::default() }] }
}

/// "12", "3.5", "1,234.50" → numbers; "true"/"false" → booleans; the rest text.
fn cell_value(text: &str) -> Value {
    let plain = text.replace(',', "");
    if (!text.is_empty() && !text.starts_with('0') || text == "0" || text.starts_with("0."))
        && let Ok(n) = plain.parse::<f64>()
        && n.is_finite()
        && (text.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | ',' | '+' | 'e' | 'E')))
    {
        return serde_json::Number::from_f64(n).map(Value::Number).unwrap_or(Value::String(text.into()));
    }
    match text {
        "true" | "TRUE" => Value::Bool(true),
        "false" | "FALSE" => Value::Bool(false),
        _ => Value::String(text.to_owned()),
    }
}

/// Rows as CSV text, and how many cells were neutralised (`Formulas::AsText`).
fn to_csv(rows: &[Vec<Value>], formulas: Formulas) -> (String, usize) {
    let mut out = String::new();
    let mut guarded = 0;
    for row in rows {
        let fields: Vec<String> = row
            .iter()
            .map(|v| {
                let text = match v {
                    Value::String(s) if formulas == Formulas::AsText => guard_csv_cell(s).inspect(|_| guarded += 1).unwrap_or_else(|| s.clone()),
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                };
                if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text }
            })
            .collect();
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    }
    (out, guarded)
}

/// A workbook in memory from sheets of rows.
fn xlsx(sheets: &[Sheet]) -> Result<Vec<u8>, String> {
    use rust_xlsxwriter::{Format as CellFormat, Formula, Workbook};
    let mut book = Workbook::new();
    let bold = CellFormat::new().set_bold();
    // Excel's "quote prefix": the cell stays text when the user edits it.
    let (text, bold_text) = (CellFormat::new().set_quote_prefix(), CellFormat::new().set_bold().set_quote_prefix());
    // One budget for the whole workbook: cached values are a convenience, never a hang.
    let mut budget = formula::Budget::new(formula::WORK_BUDGET);
    for (i, sheet) in sheets.iter().enumerate() {
        let ws = book.add_worksheet();
        // A formula without a worked-out value gets an empty cached result, not the library's default "0".
        ws.set_formula_result_default("");
        let name = if sheet.name.trim().is_empty() { format!("Sheet{}", i + 1) } else { sheet.name.trim().chars().take(31).collect() };
        ws.set_name(name.replace(['[', ']', ':', '*', '?', '/', '\\'], "_")).map_err(|e| format!("sheet {:?}: {e}", sheet.name))?;
        // A first row of text over rows with numbers is a header: bold.
        let header = sheet.rows.len() > 1 && sheet.rows[0].iter().all(Value::is_string) && sheet.rows[1..].iter().any(|r| r.iter().any(Value::is_number));
        let mut evaluator = formula::Evaluator::new(&sheet.rows, &sheet.as_text);
        for (row_index, row) in sheet.rows.iter().enumerate() {
            for (column_index, value) in row.iter().enumerate() {
                let (r, c) = (row_index as u32, column_index as u16);
                let result = match value {
                    Value::Number(n) => ws.write_number(r, c, n.as_f64().unwrap_or(0.0)).map(|_| ()),
                    Value::Bool(b) => ws.write_boolean(r, c, *b).map(|_| ()),
                    Value::Null => Ok(()),
                    Value::String(s) if sheet.as_text.contains(&(row_index, column_index)) => ws.write_string_with_format(r, c, s, if header && r == 0 { &bold_text } else { &text }).map(|_| ()),
                    // The value is worked out where cowork can (sums, averages, arithmetic over this sheet's
                    // cells), so readers that do not recalculate (LibreOffice by default, calamine) show it;
                    // otherwise (a circular reference, a function cowork does not know, the budget spent)
                    // the cached result is empty rather than a misleading 0.
                    Value::String(s) if s.starts_with('=') && s.len() > 1 => {
                        let result = evaluator.value(row_index, column_index, &mut budget).map(formula::number_text).unwrap_or_default();
                        ws.write_formula(r, c, Formula::new(s).set_result(result)).map(|_| ())
                    }
                    Value::String(s) if header && r == 0 => ws.write_string_with_format(r, c, s, &bold).map(|_| ()),
                    Value::String(s) => ws.write_string(r, c, s).map(|_| ()),
                    other => ws.write_string(r, c, other.to_string()).map(|_| ()),
                };
                result.map_err(|e| format!("sheet {:?} cell {}{}: {e}", sheet.name, super::read::column_name(c as u32), r + 1))?;
            }
        }
        if header {
            let _ = ws.set_freeze_panes(1, 0);
        }
        // Widths from the first 200 rows: autofit looks at every column of every row it reads, and a
        // workbook with a cell in column XFD would make that billions of lookups.
        ws.set_autofit_max_row(200);
        let _ = ws.autofit();
    }
    book.save_to_buffer().map_err(|e| e.to_string())
}

/// A Word document from Markdown-like text.
fn docx(text: &str) -> docx_rs::Docx {
    use docx_rs::{BreakType, Docx, Paragraph, Run, Style, StyleType, Table, TableCell, TableRow};
    let mut doc = Docx::new();
    for level in 1..=3usize {
        let size = [0, 32, 28, 24][level];
        doc = doc.add_style(Style::new(format!("Heading{level}"), StyleType::Paragraph).name(format!("heading {level}")).bold().size(size).outline_lvl(level - 1));
    }
    let runs = |line: &str| -> Vec<Run> {
        // **bold** spans; the rest plain.
        line.split("**").enumerate().filter(|(_, s)| !s.is_empty()).map(|(i, s)| if i % 2 == 1 { Run::new().add_text(s).bold() } else { Run::new().add_text(s) }).collect()
    };
    let mut table: Vec<Vec<String>> = Vec::new();
    let mut page_break = false;
    let flush_table = |doc: Docx, table: &mut Vec<Vec<String>>| -> Docx {
        if table.is_empty() {
            return doc;
        }
        let rows: Vec<TableRow> = table.drain(..).map(|cells| TableRow::new(cells.into_iter().map(|c| TableCell::new().add_paragraph(Paragraph::new().style("Normal").add_run(Run::new().add_text(c)))).collect())).collect();
        doc.add_table(Table::new(rows))
    };
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('|') {
            if !trimmed.trim_matches(|c| c == '|' || c == '-' || c == ':' || c == ' ').is_empty() {
                table.push(trimmed.trim_matches('|').split('|').map(|c| c.trim().replace("**", "")).collect());
            }
            continue;
        }
        doc = flush_table(doc, &mut table);
        if trimmed == "\u{c}" || trimmed.eq_ignore_ascii_case("<!-- pagebreak -->") {
            page_break = true;
            continue;
        }
        let level = trimmed.chars().take_while(|c| *c == '#').count();
        let mut paragraph = if (1..=6).contains(&level) && trimmed[level..].starts_with(' ') {
            Paragraph::new().style(&format!("Heading{}", level.min(3))).add_run(Run::new().add_text(trimmed[level..].trim()))
        } else if let Some(item) = trimmed.strip_prefix("- ").or_else(|| trimmed.strip_prefix("* ")) {
            runs(item).into_iter().fold(Paragraph::new().style("Normal").add_run(Run::new().add_text("• ")), |p, r| p.add_run(r))
        } else {
            // Named: docx-rs's Normal is not marked the default, which readers like python-docx need.
            runs(line).into_iter().fold(Paragraph::new().style("Normal"), |p, r| p.add_run(r))
        };
        if page_break {
            paragraph = paragraph.page_break_before(true);
            page_break = false;
        }
        doc = doc.add_paragraph(paragraph);
    }
    doc = flush_table(doc, &mut table);
    if page_break {
        doc = doc.add_paragraph(Paragraph::new().add_run(Run::new().add_break(BreakType::Page)));
    }
    doc
}

/// Replaces text in a DOCX in place: within each paragraph, across the runs
/// that hold it (the first run's formatting carries the new text), the rest
/// of the document untouched. Returns how many places changed.
pub fn edit_docx(path: &Path, replacements: &[(String, String)]) -> Result<usize, String> {
    let shown = path.display();
    let file = fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| format!("{shown} is not a readable Word document ({e})"))?;
    let mut body = String::new();
    zip.by_name("word/document.xml").map_err(|_| format!("{shown} has no word/document.xml"))?.take(64 << 20).read_to_string(&mut body).map_err(|e| format!("{shown}: {e}"))?;
    let (edited, count) = replace_in_wordml(&body, replacements);
    if count == 0 {
        return Ok(0);
    }
    // The same archive with document.xml replaced, every other part copied as it was stored.
    atomic_write(path, |out| {
        let mut writer = zip::ZipWriter::new(out);
        for i in 0..zip.len() {
            let entry = zip.by_index_raw(i).map_err(|e| e.to_string())?;
            if entry.name() == "word/document.xml" {
                let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
                writer.start_file("word/document.xml", options).map_err(|e| e.to_string())?;
                writer.write_all(edited.as_bytes()).map_err(|e| e.to_string())?;
            } else {
                writer.raw_copy_file(entry).map_err(|e| e.to_string())?;
            }
        }
        writer.finish().map_err(|e| e.to_string())?;
        Ok(())
    })?;
    Ok(count)
}

/// The text replacement of `edit_docx` on WordprocessingML.
pub fn replace_in_wordml(xml: &str, replacements: &[(String, String)]) -> (String, usize) {
    let paragraph = regex::Regex::new(r"(?s)<w:p[ >].*?</w:p>").expect("valid");
    let text_node = regex::Regex::new(r"(?s)<w:t(?:\s[^>]*)?>(.*?)</w:t>|<w:t(?:\s[^>]*)?/>").expect("valid");
    let mut count = 0;
    let edited = paragraph.replace_all(xml, |p: &regex::Captures<'_>| {
        let p = &p[0];
        // The paragraph's text nodes: where each sits and what it says.
        let nodes: Vec<(std::ops::Range<usize>, String)> = text_node
            .captures_iter(p)
            .map(|c| {
                let inner = c.get(1).map_or(0..0, |m| m.range());
                (inner, c.get(1).map_or(String::new(), |m| quick_xml::escape::unescape(m.as_str()).map(|s| s.into_owned()).unwrap_or_else(|_| m.as_str().to_owned())))
            })
            .collect();
        let mut texts: Vec<String> = nodes.iter().map(|(_, t)| t.clone()).collect();
        let mut changed = false;
        for (find, replace) in replacements {
            if find.is_empty() {
                continue;
            }
            let mut from = 0;
            loop {
                let joined: String = texts.concat();
                let Some(found) = joined.get(from..).and_then(|rest| rest.find(find.as_str())) else { break };
                let at = from + found;
                // The nodes the match covers: the first gets the new text, the last keeps what follows it,
                // the ones between are emptied (each node keeps its run's formatting).
                let (mut start_node, mut offset) = (0, 0);
                while offset + texts[start_node].len() <= at {
                    offset += texts[start_node].len();
                    start_node += 1;
                }
                let start_in = at - offset;
                let end = at + find.len();
                let (mut end_node, mut end_offset) = (start_node, offset);
                while end_offset + texts[end_node].len() < end {
                    end_offset += texts[end_node].len();
                    end_node += 1;
                }
                let end_in = end - end_offset;
                let head = texts[start_node][..start_in].to_owned();
                if start_node == end_node {
                    let tail = texts[end_node][end_in..].to_owned();
                    texts[start_node] = format!("{head}{replace}{tail}");
                } else {
                    texts[start_node] = format!("{head}{replace}");
                    texts[end_node] = texts[end_node][end_in..].to_owned();
                    for text in texts.iter_mut().take(end_node).skip(start_node + 1) {
                        text.clear();
                    }
                }
                count += 1;
                changed = true;
                // Search on after the new text (which may contain what it replaced).
                from = at + replace.len();
            }
        }
        if !changed {
            return p.to_owned();
        }
        let mut out = String::with_capacity(p.len());
        let mut last = 0;
        for ((range, _), text) in nodes.iter().zip(&texts) {
            if range.is_empty() && !p[last..].contains("<w:t") {
                continue;
            }
            out.push_str(&p[last..range.start]);
            out.push_str(&quick_xml::escape::escape(text.as_str()));
            last = range.end;
        }
        out.push_str(&p[last..]);
        // Kept spaces at a run's edge (xml:space) on every edited node.
        out.replace("<w:t>", "<w:t xml:space=\"preserve\">")
    });
    (edited.into_owned(), count)
}

/// Excel's last row and column: no cell lies beyond them.
const MAX_ROWS: u32 = 1_048_576;
const MAX_COLUMNS: u32 = 16_384;
/// Rows and cells an edited workbook may span in memory (all sheets, empty
/// cells left of a used one counted): it is held whole while it is written again.
const EDIT_MAX_CELLS: usize = 5_000_000;

/// Sets cells of an XLSX: the workbook is read (values and formulas of every
/// sheet) and written again with the changes. Formatting is not kept. With
/// `Formulas::AsText` a changed cell that starts like a formula is written as
/// text; the workbook's own formulas stay formulas. Returns the cells set and
/// how many of them were written as text for that reason.
///
/// The sheets are streamed cell by cell, within Excel's limits and
/// `EDIT_MAX_CELLS`, so a workbook that declares a far corner (A1 and
/// XFD1048576) is a clear error or a small table, never a dense grid of
/// billions of cells.
pub fn edit_xlsx(path: &Path, changes: &[(Option<String>, String, Value)], formulas: Formulas) -> Result<(usize, usize), String> {
    use calamine::Reader as _;
    let shown = path.display();
    let size = fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?.len();
    if size > super::read::MAX_FILE_BYTES {
        return Err(format!("{shown} is {} MiB; cowork edits workbooks up to {} MiB", size >> 20, super::read::MAX_FILE_BYTES >> 20));
    }
    let mut book: calamine::Xlsx<_> = calamine::open_workbook(path).map_err(|e: calamine::XlsxError| format!("{shown} is not a readable workbook ({e})"))?;
    let names = book.sheet_names();
    let started = Instant::now();
    let too_large = || format!("{shown} is too large for cowork to edit (its sheets span more than {EDIT_MAX_CELLS} cells up to their last used ones); edit it in a spreadsheet app");
    let mut spanned = 0usize;
    let mut sheets = Vec::new();
    for name in &names {
        let mut reader = book.worksheet_cells_reader(name).map_err(|e| format!("{shown} sheet {name}: {e}"))?;
        let mut rows: Vec<Vec<Value>> = Vec::new();
        while let Some(cell) = reader.next_cell_with_formula().map_err(|e| format!("{shown} sheet {name}: {e}"))? {
            if started.elapsed() > super::read::DEADLINE {
                return Err(format!("reading {shown} to edit it took longer than {} s and was given up", super::read::DEADLINE.as_secs()));
            }
            let (r, c) = cell.pos;
            if r >= MAX_ROWS || c >= MAX_COLUMNS {
                return Err(format!("{shown} sheet {name} has a cell beyond a sheet's last row or column; it is damaged or was not made by a spreadsheet app"));
            }
            let value = match cell.formula.filter(|f| !f.is_empty()) {
                Some(f) => Value::String(format!("={f}")),
                None => match calamine::Data::from(cell.value) {
                    calamine::Data::Int(i) => Value::from(i),
                    calamine::Data::Float(f) => serde_json::Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null),
                    calamine::Data::Bool(b) => Value::Bool(b),
                    calamine::Data::Empty => Value::Null,
                    other => Value::String(other.to_string()),
                },
            };
            if value.is_null() {
                continue;
            }
            let (r, c) = (r as usize, c as usize);
            if rows.len() <= r {
                spanned += r + 1 - rows.len();
                rows.resize(r + 1, Vec::new());
            }
            let row = &mut rows[r];
            if row.len() <= c {
                spanned += c + 1 - row.len();
                row.resize(c + 1, Value::Null);
            }
            if spanned > EDIT_MAX_CELLS {
                return Err(too_large());
            }
            row[c] = value;
        }
        sheets.push(Sheet { name: name.clone(), rows, ..Sheet::default() });
    }
    let mut count = 0;
    let mut as_text = 0;
    for (sheet, cell, value) in changes {
        let index = match sheet {
            None => 0,
            Some(name) => names.iter().position(|n| n.eq_ignore_ascii_case(name)).ok_or_else(|| format!("{shown} has no sheet {name:?} (it has {})", names.join(", ")))?,
        };
        let (r, c) = parse_cell(cell).ok_or_else(|| format!("{cell:?} is not a cell like B3"))?;
        if r >= MAX_ROWS || c >= MAX_COLUMNS {
            return Err(format!("{cell:?} lies beyond a sheet's last row ({MAX_ROWS}) or column (XFD)"));
        }
        let sheet = sheets.get_mut(index).ok_or_else(|| format!("{shown} has no sheets"))?;
        let (r, c) = (r as usize, c as usize);
        if sheet.rows.len() <= r {
            spanned += r + 1 - sheet.rows.len();
            sheet.rows.resize(r + 1, Vec::new());
        }
        let row = &mut sheet.rows[r];
        if row.len() <= c {
            spanned += c + 1 - row.len();
            row.resize(c + 1, Value::Null);
        }
        if spanned > EDIT_MAX_CELLS {
            return Err(too_large());
        }
        row[c] = match value {
            Value::String(s) => cell_value(s),
            other => other.clone(),
        };
        // Set again: what the cell held before is gone, and so is its mark.
        sheet.as_text.remove(&(r, c));
        if formulas == Formulas::AsText && guard_cell(sheet, r, c) {
            as_text += 1;
        }
        count += 1;
    }
    let bytes = xlsx(&sheets)?;
    atomic_write(path, |file| file.write_all(&bytes).map_err(|e| e.to_string()))?;
    Ok((count, as_text))
}

/// Text files (Markdown, CSV, text): exact replacements.
pub fn edit_text(path: &Path, replacements: &[(String, String)]) -> Result<usize, String> {
    edit_csv(path, replacements, Formulas::Keep).map(|(count, _)| count)
}

/// Exact replacements in a text file; in a CSV or TSV file with
/// `Formulas::AsText`, each field the edit brought in that starts like a
/// formula gets OWASP's leading `'` (the file's own fields stay as they
/// were). Returns the places replaced and the fields neutralised.
pub fn edit_csv(path: &Path, replacements: &[(String, String)], formulas: Formulas) -> Result<(usize, usize), String> {
    let original = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = original.clone();
    let mut count = 0;
    for (find, replace) in replacements.iter().filter(|(f, _)| !f.is_empty()) {
        count += text.matches(find.as_str()).count();
        text = text.replace(find.as_str(), replace);
    }
    let extension = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    let mut guarded = 0;
    if count > 0 && formulas == Formulas::AsText && matches!(extension.as_str(), "csv" | "tsv") {
        (text, guarded) = guard_new_fields(&original, &text, if extension == "tsv" { b'\t' } else { b',' });
    }
    if count > 0 {
        atomic_write(path, |file| file.write_all(text.as_bytes()).map_err(|e| e.to_string()))?;
    }
    Ok((count, guarded))
}

/// `edited` with each field that is not one of `original`'s fields
/// neutralised (`guard_csv_cell`, on the field's text as stored: inside the
/// quotes of a quoted field); how many were.
fn guard_new_fields(original: &str, edited: &str, separator: u8) -> (String, usize) {
    let known: HashSet<&str> = csv_fields(original, separator).into_iter().map(|range| &original[range]).collect();
    let mut out = String::with_capacity(edited.len() + 16);
    let (mut last, mut guarded) = (0, 0);
    for range in csv_fields(edited, separator) {
        let field = &edited[range.clone()];
        if known.contains(field) {
            continue;
        }
        if let Some(safe) = guard_csv_cell(field) {
            out.push_str(&edited[last..range.start]);
            out.push_str(&safe);
            last = range.end;
            guarded += 1;
        }
    }
    out.push_str(&edited[last..]);
    (out, guarded)
}

/// Where each field of CSV text lies (byte ranges; a quoted field's is
/// inside its quotes, with its doubled quotes as stored).
fn csv_fields(text: &str, separator: u8) -> Vec<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let ends_field = |b: u8| b == separator || b == b'\n' || b == b'\r';
    let mut fields = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'"' {
            let start = at + 1;
            let mut end = start;
            while end < bytes.len() && !(bytes[end] == b'"' && bytes.get(end + 1) != Some(&b'"')) {
                end += if bytes[end] == b'"' { 2 } else { 1 };
            }
            let end = end.min(bytes.len());
            fields.push(start..end);
            at = end + 1;
            // Anything between the closing quote and the separator belongs to no field that starts a cell.
            while at < bytes.len() && !ends_field(bytes[at]) {
                at += 1;
            }
        } else {
            let start = at;
            while at < bytes.len() && !ends_field(bytes[at]) {
                at += 1;
            }
            fields.push(start..at);
        }
        if at < bytes.len() && bytes[at] == b'\r' && bytes.get(at + 1) == Some(&b'\n') {
            at += 1;
        }
        at += 1;
    }
    fields
}

/// LibreOffice's command, when installed.
pub fn soffice() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).flat_map(|dir| ["soffice", "libreoffice"].map(|n| dir.join(n))).find(|p| p.is_file())
}

/// Markdown-like text as a PDF: written as DOCX, converted by LibreOffice
/// headless (its own throwaway profile, so a running LibreOffice is not
/// disturbed), within two minutes.
pub fn to_pdf(text: &str, path: &Path) -> Result<(), String> {
    let soffice = soffice().ok_or("PDF export needs LibreOffice (the soffice command), which is not installed; export as DOCX instead, or install libreoffice-writer")?;
    let work = tempfile_dir()?;
    let source = work.join("answer.docx");
    docx(text).pack(fs::File::create(&source).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let profile = work.join("profile");
    let mut child = Command::new(&soffice)
        .arg(format!("-env:UserInstallation=file://{}", profile.display()))
        .args(["--headless", "--norestore", "--convert-to", "pdf", "--outdir"])
        .arg(&work)
        .arg(&source)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start {}: {e}", soffice.display()))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            let _ = fs::remove_dir_all(&work);
            return Err("LibreOffice did not finish converting within 2 minutes".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let produced = work.join("answer.pdf");
    let result = if status.success() && produced.is_file() {
        let bytes = fs::read(&produced).map_err(|e| e.to_string())?;
        atomic_write(path, |file| file.write_all(&bytes).map_err(|e| e.to_string()))
    } else {
        let mut why = String::new();
        if let Some(mut err) = child.stderr.take() {
            let _ = err.read_to_string(&mut why);
        }
        Err(format!("LibreOffice could not convert the answer to PDF ({status}): {}", why.trim()))
    };
    let _ = fs::remove_dir_all(&work);
    result
}

fn tempfile_dir() -> Result<PathBuf, String> {
    let base = std::env::temp_dir().join(format!("cowork-export-{}-{}", std::process::id(), crate::ids::now_millis()));
    fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    Ok(base)
}

/// An answer exported: DOCX or PDF by the name's extension (Markdown too).
pub fn export_answer(text: &str, path: &Path) -> Result<String, String> {
    match Format::by_path(path) {
        Some(Format::Docx | Format::Pdf | Format::Markdown) => write(path, Some(text), &[]),
        _ => Err(format!("{} : an answer is exported as .docx, .pdf or .md", path.display())),
    }
}

/// A small evaluator for the formulas people ask an assistant to put in a
/// sheet: + - * / and parentheses over numbers and this sheet's cells, and
/// SUM, AVERAGE, MIN, MAX, COUNT, PRODUCT, ABS and ROUND over cells and ranges.
/// Anything else (other sheets, text functions): None.
///
/// A workbook cowork did not write can be hostile (T9 of the second security
/// review: 30 cells of `=SUM(A1:A30)` cost 30^16 evaluations without a memo),
/// so the work is bounded: each cell is worked out once (a memo per sheet), in
/// an explicit depth-first order rather than by recursion (a chain of 5,000
/// cells costs no stack), a cell that reads itself through any path is
/// circular and gets no value (as Excel flags it), ranges stop at the sheet's
/// last used row and column (`A1:XFD1048576` costs what the sheet holds),
/// nesting and length are capped as Excel caps them, and the whole workbook
/// shares one `Budget`. What is not worked out keeps its formula with no
/// cached value: the spreadsheet app computes it on opening.
mod formula {
    use std::collections::{BTreeSet, HashMap, HashSet};

    use serde_json::Value;

    /// Work units (characters parsed, rows and cells of ranges looked at) one
    /// workbook's cached values may cost: well under a second, even in a debug build.
    pub const WORK_BUDGET: u64 = 5_000_000;
    /// Excel's own limit on a formula's length.
    const MAX_FORMULA_CHARS: usize = 8_192;
    /// Parentheses, signs and function calls nested deeper than this are not
    /// worked out (Excel allows 64 nested functions): the parser's recursion
    /// stays far inside a thread's stack.
    const MAX_NESTING: u32 = 100;

    pub fn number_text(v: f64) -> String {
        if v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v}") }
    }

    /// Work left for one workbook.
    pub struct Budget {
        left: u64,
    }

    impl Budget {
        pub fn new(units: u64) -> Budget {
            Budget { left: units }
        }

        /// Takes `units`; false (and nothing left) when there are not that many.
        fn spend(&mut self, units: u64) -> bool {
            if units > self.left {
                self.left = 0;
                return false;
            }
            self.left -= units;
            true
        }

        /// What a budget of `WORK_BUDGET` has spent.
        #[cfg(test)]
        pub fn spent(&self) -> u64 {
            WORK_BUDGET - self.left
        }
    }

    /// A formula cell: on the path being worked out, or done (None: no value).
    enum Memo {
        Open,
        Done(Option<f64>),
    }

    /// One sheet's formulas, each worked out at most once.
    pub struct Evaluator<'a> {
        rows: &'a [Vec<Value>],
        as_text: &'a BTreeSet<(usize, usize)>,
        memo: HashMap<(usize, usize), Memo>,
    }

    impl<'a> Evaluator<'a> {
        pub fn new(rows: &'a [Vec<Value>], as_text: &'a BTreeSet<(usize, usize)>) -> Self {
            Evaluator { rows, as_text, memo: HashMap::new() }
        }

        /// The formula (without its "=") a cell holds; text marked as text is not one.
        fn formula_at(&self, r: usize, c: usize) -> Option<&'a str> {
            match self.rows.get(r)?.get(c)? {
                Value::String(s) if s.len() > 1 && !self.as_text.contains(&(r, c)) => s.strip_prefix('='),
                _ => None,
            }
        }

        /// The value of the formula at (r, c); None when it cannot be worked
        /// out (not a formula, a function cowork does not know, circular, too
        /// long or deep, or the budget is spent).
        pub fn value(&mut self, r: usize, c: usize, budget: &mut Budget) -> Option<f64> {
            self.formula_at(r, c)?;
            // Depth first with an explicit stack: a cell is opened (its formula read once for the
            // formula cells it needs, which go on the stack), then closed when they are all done.
            // A needed cell that is open is on the path to this one: a circular reference.
            let mut stack: Vec<((usize, usize), bool)> = vec![((r, c), false)];
            let mut circular: HashSet<(usize, usize)> = HashSet::new();
            while let Some((cell, opened)) = stack.pop() {
                if opened {
                    let value = if circular.contains(&cell) { None } else { self.run(cell, budget, None) };
                    self.memo.insert(cell, Memo::Done(value));
                    continue;
                }
                if self.memo.contains_key(&cell) {
                    continue;
                }
                self.memo.insert(cell, Memo::Open);
                stack.push((cell, true));
                let mut needs = Vec::new();
                let _ = self.run(cell, budget, Some(&mut needs));
                for need in needs {
                    match self.memo.get(&need) {
                        Some(Memo::Done(_)) => {}
                        Some(Memo::Open) => {
                            circular.insert(cell);
                        }
                        None => stack.push((need, false)),
                    }
                }
            }
            match self.memo.get(&(r, c)) {
                Some(Memo::Done(value)) => *value,
                _ => None,
            }
        }

        /// Parses and works out one cell's formula. With `needs`, a first
        /// pass: formula cells not done yet are listed there (and count as 1).
        fn run(&self, (r, c): (usize, usize), budget: &mut Budget, needs: Option<&mut Vec<(usize, usize)>>) -> Option<f64> {
            let text = self.formula_at(r, c)?;
            if text.len() > MAX_FORMULA_CHARS || !budget.spend(text.len() as u64) {
                return None;
            }
            let tokens: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
            let mut parser = Parser { tokens, at: 0, evaluator: self, budget, needs, nesting: 0 };
            let value = parser.expr()?;
            (parser.at == parser.tokens.len() && value.is_finite()).then_some(value)
        }
    }

    struct Parser<'e, 'a, 'n> {
        tokens: Vec<char>,
        at: usize,
        evaluator: &'e Evaluator<'a>,
        budget: &'e mut Budget,
        needs: Option<&'n mut Vec<(usize, usize)>>,
        nesting: u32,
    }

    impl Parser<'_, '_, '_> {
        fn peek(&self) -> Option<char> {
            self.tokens.get(self.at).copied()
        }

        fn eat(&mut self, c: char) -> bool {
            if self.peek() == Some(c) {
                self.at += 1;
                true
            } else {
                false
            }
        }

        fn expr(&mut self) -> Option<f64> {
            let mut value = self.term()?;
            loop {
                if self.eat('+') {
                    value += self.term()?;
                } else if self.eat('-') {
                    value -= self.term()?;
                } else {
                    return Some(value);
                }
            }
        }

        fn term(&mut self) -> Option<f64> {
            let mut value = self.factor()?;
            loop {
                if self.eat('*') {
                    value *= self.factor()?;
                } else if self.eat('/') {
                    let d = self.factor()?;
                    // The first pass goes on past a zero, so it lists every cell the second may read.
                    if d == 0.0 && self.needs.is_none() {
                        return None;
                    }
                    value /= d;
                } else {
                    return Some(value);
                }
            }
        }

        /// Every recursion of the parser passes here: the nesting is counted once.
        fn factor(&mut self) -> Option<f64> {
            self.nesting += 1;
            let value = if self.nesting > MAX_NESTING { None } else { self.factor_inner() };
            self.nesting -= 1;
            value
        }

        fn factor_inner(&mut self) -> Option<f64> {
            if self.eat('-') {
                return Some(-self.factor()?);
            }
            if self.eat('+') {
                return self.factor();
            }
            if self.eat('(') {
                let value = self.expr()?;
                return self.eat(')').then_some(value);
            }
            let start = self.at;
            if self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
                while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
                    self.at += 1;
                }
                return self.tokens[start..self.at].iter().collect::<String>().parse().ok();
            }
            while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '$') {
                self.at += 1;
            }
            let word: String = self.tokens[start..self.at].iter().collect();
            if word.is_empty() {
                return None;
            }
            if self.eat('(') {
                let mut values = Vec::new();
                if !self.eat(')') {
                    loop {
                        values.extend(self.argument()?);
                        if self.eat(')') {
                            break;
                        }
                        if !(self.eat(',') || self.eat(';')) {
                            return None;
                        }
                    }
                }
                return function(&word.to_ascii_uppercase(), &values);
            }
            self.cell(&word)
        }

        /// A range's numbers, or one expression's value.
        fn argument(&mut self) -> Option<Vec<f64>> {
            let start = self.at;
            while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '$') {
                self.at += 1;
            }
            if self.eat(':') {
                let first: String = self.tokens[start..self.at - 1].iter().collect();
                let from = self.at;
                while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '$') {
                    self.at += 1;
                }
                let last: String = self.tokens[from..self.at].iter().collect();
                let (a, b) = (super::parse_cell(&first)?, super::parse_cell(&last)?);
                let (top, bottom) = (a.0.min(b.0) as usize, a.0.max(b.0) as usize);
                let (left, right) = (a.1.min(b.1) as usize, a.1.max(b.1) as usize);
                let rows = self.evaluator.rows;
                let mut values = Vec::new();
                // Only what the sheet holds: rows and cells past its last used ones are empty.
                for r in top..=bottom.min(rows.len().saturating_sub(1)) {
                    let row = rows.get(r)?;
                    let last = right.min(row.len().saturating_sub(1));
                    let cells = if row.is_empty() || left > last { 0 } else { last - left + 1 };
                    if !self.budget.spend(1 + cells as u64) {
                        return None;
                    }
                    for c in (0..cells).map(|i| left + i) {
                        // Text and empty cells are skipped, as spreadsheets do in a range.
                        if let Some(v) = self.value_at(r, c)? {
                            values.push(v);
                        }
                    }
                }
                return Some(values);
            }
            self.at = start;
            Some(vec![self.expr()?])
        }

        fn cell(&mut self, word: &str) -> Option<f64> {
            let (r, c) = super::parse_cell(word)?;
            Some(self.value_at(r as usize, c as usize)?.unwrap_or(0.0))
        }

        /// A cell's number (None inside: text or empty); None: it cannot be
        /// known (a formula without a value, or not done in the second pass).
        fn value_at(&mut self, r: usize, c: usize) -> Option<Option<f64>> {
            let evaluator = self.evaluator;
            if evaluator.formula_at(r, c).is_some() {
                return match (evaluator.memo.get(&(r, c)), &mut self.needs) {
                    (Some(Memo::Done(value)), _) => Some(Some((*value)?)),
                    (_, Some(needs)) => {
                        needs.push((r, c));
                        Some(Some(1.0))
                    }
                    (_, None) => None,
                };
            }
            Some(match evaluator.rows.get(r).and_then(|row| row.get(c)) {
                Some(Value::Number(n)) => n.as_f64(),
                Some(Value::Bool(b)) => Some(f64::from(u8::from(*b))),
                _ => None,
            })
        }
    }

    fn function(name: &str, values: &[f64]) -> Option<f64> {
        Some(match name {
            "SUM" => values.iter().sum(),
            "PRODUCT" => values.iter().product(),
            "AVERAGE" if !values.is_empty() => values.iter().sum::<f64>() / values.len() as f64,
            "MIN" => values.iter().copied().fold(f64::INFINITY, f64::min).min(if values.is_empty() { 0.0 } else { f64::INFINITY }),
            "MAX" => values.iter().copied().fold(f64::NEG_INFINITY, f64::max).max(if values.is_empty() { 0.0 } else { f64::NEG_INFINITY }),
            "COUNT" => values.len() as f64,
            "ABS" if values.len() == 1 => values[0].abs(),
            "ROUND" if values.len() == 2 => {
                let scale = 10f64.powi(values[1] as i32);
                (values[0] * scale).round() / scale
            }
            _ => return None,
        })
    }

    #[cfg(test)]
    mod tests {
        use std::collections::BTreeSet;
        use std::time::{Duration, Instant};

        use serde_json::{Value, json};

        use super::{Budget, Evaluator, WORK_BUDGET};

        fn rows(value: Value) -> Vec<Vec<Value>> {
            serde_json::from_value(value).unwrap()
        }

        /// Every cell's value, worked out in row order as `xlsx()` does, and the work spent.
        fn values(rows: &[Vec<Value>]) -> (Vec<Vec<Option<f64>>>, u64) {
            let none = BTreeSet::new();
            let mut evaluator = Evaluator::new(rows, &none);
            let mut budget = Budget::new(WORK_BUDGET);
            let out = rows.iter().enumerate().map(|(r, row)| (0..row.len()).map(|c| evaluator.value(r, c, &mut budget)).collect()).collect();
            (out, budget.spent())
        }

        /// One formula over `rows`, placed in a fresh row under them.
        fn eval(rows: &[Vec<Value>], formula: &str) -> Option<f64> {
            let mut all = rows.to_vec();
            all.push(vec![Value::from(format!("={formula}"))]);
            let none = BTreeSet::new();
            Evaluator::new(&all, &none).value(all.len() - 1, 0, &mut Budget::new(WORK_BUDGET))
        }

        #[test]
        fn sums_averages_and_arithmetic_over_cells() {
            let rows = rows(json!([["a", 10], ["b", 20.5], ["c", "=B1+B2"], ["", "x"]]));
            let eval = |f: &str| eval(&rows, f);
            assert_eq!(eval("SUM(B1:B2)"), Some(30.5));
            assert_eq!(eval("SUM(B1:B4)"), Some(61.0), "a formula cell counts, text does not");
            assert_eq!(eval("AVERAGE(B1:B2)*2"), Some(30.5));
            assert_eq!(eval("(B1-4)/3+MAX(B1,B2)"), Some(22.5));
            assert_eq!(eval("ROUND(B2/3, 2)"), Some(6.83));
            assert_eq!(eval("COUNT(A1:B4)"), Some(3.0));
            assert_eq!(eval("VLOOKUP(A1,A1:B2,2)"), None);
            assert_eq!(eval("Sheet2!A1"), None);
            assert_eq!(eval("B1/0"), None);
            assert_eq!(eval("B9+1"), Some(1.0), "an empty cell is 0");
        }

        #[test]
        fn a_formula_that_reads_an_unknown_one_has_no_value_rather_than_a_wrong_one() {
            // Before, a cell that could not be worked out was skipped in a range (or read as 0).
            let rows = rows(json!([[1, "=VLOOKUP(A1,A1:A2,1)"], [2, "=SUM(A1:B1)"], [3, "=B1*2"]]));
            let (values, _) = values(&rows);
            assert_eq!(values[1][1], None);
            assert_eq!(values[2][1], None);
        }

        #[test]
        fn the_hostile_workbook_of_t9_is_circular_and_costs_next_to_nothing() {
            // 30 cells of =SUM(A1:A30), each reading itself through the range: ~30^16 evaluations before.
            let rows: Vec<Vec<Value>> = (1..=30).map(|r| vec![Value::from("=SUM(A1:A30)"), Value::from(r)]).collect();
            let started = Instant::now();
            let (values, spent) = values(&rows);
            assert!(values.iter().all(|row| row[0].is_none()), "a circular reference gets no value: {values:?}");
            assert!(spent < 10_000, "each cell is read once: {spent} units");
            assert!(started.elapsed() < Duration::from_secs(1));
        }

        #[test]
        fn cycles_of_two_and_of_one_get_no_value_and_the_rest_of_the_sheet_does() {
            let (values, _) = values(&rows(json!([["=B1", "=A1", "=2+3"], ["=A2+1", "=C1*2", "=A1+C1"]])));
            assert_eq!(values[0], vec![None, None, Some(5.0)]);
            assert_eq!(values[1], vec![None, Some(10.0), None], "a self reference has no value; what reads a cycle has none either");
        }

        #[test]
        fn long_chains_are_worked_out_in_either_direction_without_recursion() {
            // A_n = A_(n-1) + 1 down the column, and B_n = B_(n+1) + 1 up it: 5,000 deep each way.
            let n = 5_000;
            let rows: Vec<Vec<Value>> = (0..n)
                .map(|r| {
                    let a = if r == 0 { Value::from(1) } else { Value::from(format!("=A{}+1", r)) };
                    let b = if r == n - 1 { Value::from(1) } else { Value::from(format!("=B{}+1", r + 2)) };
                    vec![a, b]
                })
                .collect();
            let none = BTreeSet::new();
            let mut budget = Budget::new(WORK_BUDGET);
            // Worked out from the far end first: the whole chain in one go, on a small stack.
            let run = std::thread::Builder::new()
                .stack_size(1 << 20)
                .spawn(move || {
                    let mut evaluator = Evaluator::new(&rows, &none);
                    (evaluator.value(n - 1, 0, &mut budget), evaluator.value(0, 1, &mut budget), evaluator.value(2_499, 0, &mut budget))
                })
                .unwrap();
            assert_eq!(run.join().unwrap(), (Some(5_000.0), Some(5_000.0), Some(2_500.0)));
        }

        #[test]
        fn a_range_over_the_whole_grid_costs_what_the_sheet_holds() {
            let mut rows: Vec<Vec<Value>> = (0..200).map(|r| (0..10).map(|c| Value::from(r * 10 + c)).collect()).collect();
            rows.push(vec![Value::from("=SUM(A1:J200)"), Value::from("=SUM(A1:XFD1048576)"), Value::from("=COUNT($A$1:$ZZZ$4294967295)")]);
            let (values, spent) = values(&rows);
            assert_eq!(values[200][0], Some((0..2000).sum::<i64>() as f64));
            assert_eq!(values[200][1], None, "the whole grid holds the formula itself: circular");
            assert_eq!(values[200][2], None, "so does this one");
            assert!(spent < 50_000, "{spent} units");
        }

        #[test]
        fn deep_nesting_and_long_formulas_are_not_worked_out_and_never_overflow_the_stack() {
            let rows = rows(json!([[2]]));
            let nested = |depth: usize| format!("{}A1{}", "(".repeat(depth), ")".repeat(depth));
            assert_eq!(eval(&rows, &nested(40)), Some(2.0));
            let signs = |depth: usize| format!("{}A1", "-".repeat(depth));
            assert_eq!(eval(&rows, &signs(40)), Some(2.0));
            // On a small stack: before, 4,000 parentheses recursed 12,000 frames deep.
            let run = std::thread::Builder::new()
                .stack_size(1 << 20)
                .spawn(move || (eval(&rows, &nested(4_000)), eval(&rows, &signs(8_000)), eval(&rows, &format!("A1{}", "+1".repeat(5_000))), eval(&rows, &nested(50_000))))
                .unwrap();
            assert_eq!(run.join().unwrap(), (None, None, None, None), "too deep, too deep, too long (10,002 characters), too long");
        }

        #[test]
        fn the_budget_bounds_a_sheet_of_wide_sums_and_leaves_the_rest_without_a_value() {
            // 1,000 rows of 100 numbers, and 2,000 formulas each summing all of them: 200 million cells read.
            let mut rows: Vec<Vec<Value>> = (0..1_000).map(|r| (0..100).map(|c| Value::from(r + c)).collect()).collect();
            for row in rows.iter_mut() {
                row.extend([Value::from("=SUM(A1:CV1000)"), Value::from("=SUM(A1:CV1000)")]);
            }
            let started = Instant::now();
            let (values, _) = values(&rows);
            let worked: usize = values.iter().map(|row| row[100..].iter().filter(|v| v.is_some()).count()).sum();
            assert!(worked > 0 && worked < 2_000, "the first ones have a value, the rest none: {worked}");
            assert_eq!(values[0][100], Some((0..1_000).flat_map(|r| (0..100).map(move |c| r + c)).sum::<i64>() as f64));
            assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_replaced_across_runs_keeps_the_rest_of_the_paragraph() {
        let xml = r#"<w:body><w:p><w:r><w:rPr><w:b/></w:rPr><w:t>Total: 1</w:t></w:r><w:r><w:t>20 EUR</w:t></w:r></w:p><w:p><w:r><w:t>A &amp; B</w:t></w:r></w:p></w:body>"#;
        let (out, n) = replace_in_wordml(xml, &[("120 EUR".into(), "150 EUR".into()), ("A & B".into(), "A & C".into())]);
        assert_eq!(n, 2);
        assert!(out.contains(r#"<w:t xml:space="preserve">Total: 150 EUR</w:t>"#), "{out}");
        assert!(out.contains(r#"<w:t xml:space="preserve"></w:t>"#), "the second run keeps what followed the match (nothing here): {out}");
        assert!(out.contains("<w:b/>"));
        assert!(out.contains("A &amp; C"), "{out}");
        let (_, none) = replace_in_wordml(xml, &[("missing".into(), "x".into())]);
        assert_eq!(none, 0);
    }

    #[test]
    fn tables_in_text_become_rows_with_numbers() {
        let sheets = sheets_from_text("| Month | Sales |\n|---|---|\n| Jan | 1,200 |\n| Feb | 950.5 |");
        assert_eq!(sheets[0].rows[0], vec![Value::from("Month"), Value::from("Sales")]);
        assert_eq!(sheets[0].rows[1][1], serde_json::json!(1200.0));
        assert_eq!(sheets[0].rows[2][1], serde_json::json!(950.5));
        let csv = sheets_from_text("a,b\n007,x\n");
        assert_eq!(csv[0].rows[1][0], Value::from("007"), "a leading zero is text (an id, not a number)");
        assert_eq!(to_csv(&[vec![Value::from("a,b"), Value::from(1)]], Formulas::Keep).0, "\"a,b\",1\r\n");
    }

    #[test]
    fn what_a_spreadsheet_would_run_is_told_from_data() {
        for text in ["=1+1", "+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)", " =1+1", "\u{a0}=1", "\t=1", "\tplain", "\rplain", "\n=1", "＝1+1", "＠SUM(A1)", "- item", "+1 555 0100", "=-3"] {
            assert!(starts_like_formula(text), "{text:?}");
        }
        for text in ["-3.5", "+2", "-1,234.50", "-5%", "1e-5", "-1E+3", " -7 ", "-", "=", "+", "", "plain", "a=1", "'=1", "0-1", "\u{200b}x"] {
            assert!(!starts_like_formula(text), "{text:?}");
        }
        assert_eq!(signed_number("-3.5"), Some(-3.5));
        assert_eq!(signed_number("+2"), Some(2.0));
        assert_eq!(signed_number("-5%"), None, "a percentage stays text");
        assert_eq!(signed_number("-inf"), None);
        assert_eq!(signed_number("-NaN"), None);
        assert_eq!(signed_number("12"), None, "only a signed number needs saving from the guard");
    }

    #[test]
    fn csv_cells_that_start_like_formulas_get_a_quote_and_numbers_stay_numbers() {
        let rows = vec![vec![
            Value::from("=WEBSERVICE(\"http://127.0.0.1:9/?\"&A1)"),
            Value::from("+cmd|' /C calc'!A0"),
            Value::from("-2+3"),
            Value::from("@SUM(1)"),
            Value::from("-3.5"),
            Value::from(-3.5),
            Value::from("x;=1+1"),
            Value::from("x,=1+1"),
            Value::from("Paris"),
        ]];
        let (csv, guarded) = to_csv(&rows, Formulas::AsText);
        assert_eq!(csv, "\"'=WEBSERVICE(\"\"http://127.0.0.1:9/?\"\"&A1)\",'+cmd|' /C calc'!A0,'-2+3,'@SUM(1),-3.5,-3.5,x;'=1+1,\"x,=1+1\",Paris\r\n");
        assert_eq!(guarded, 5);
        let (kept, none) = to_csv(&rows, Formulas::Keep);
        assert!(kept.starts_with("\"=WEBSERVICE(") && none == 0, "the user asked for formulas: as before: {kept}");
        assert_eq!(guard_csv_cell("\t=1"), Some("'\t=1".into()), "one quote for a start in leading white space");
        assert_eq!(guard_csv_cell("a;\"=1;b\t -2+3"), Some("a;'\"=1;b\t' -2+3".into()));
        assert_eq!(guard_csv_cell("a; -3.5; b"), None);
    }

    #[test]
    fn workbooks_written_as_text_hold_no_formula_and_kept_ones_do() {
        use calamine::Reader as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("book.xlsx");
        let rows = vec![
            vec![Value::from("Item"), Value::from("Value")],
            vec![Value::from("=HYPERLINK(\"http://127.0.0.1:9/\",\"x\")"), Value::from(1)],
            vec![Value::from("-2+3"), Value::from("-3.5")],
            vec![Value::from("=SUM(B2:B3)"), Value::from(-1)],
            vec![Value::from("=A5"), Value::from("=VLOOKUP(1,A1:B2,2)")],
        ];
        let sheets = [Sheet { name: "S".into(), rows, ..Sheet::default() }];
        let (_, as_text) = write_with(&path, None, &sheets, Formulas::AsText).unwrap();
        assert_eq!(as_text, 5);
        let mut book: calamine::Xlsx<_> = calamine::open_workbook(&path).unwrap();
        let formulas = book.worksheet_formula("S").unwrap();
        assert!(formulas.used_cells().all(|(_, _, f)| f.is_empty()), "no formula stored: {formulas:?}");
        let values = book.worksheet_range("S").unwrap();
        assert_eq!(values.get_value((1, 0)), Some(&calamine::Data::String("=HYPERLINK(\"http://127.0.0.1:9/\",\"x\")".into())));
        assert_eq!(values.get_value((2, 0)), Some(&calamine::Data::String("-2+3".into())));
        assert_eq!(values.get_value((2, 1)), Some(&calamine::Data::Float(-3.5)), "a signed number given as text is a number");
        // The user asked for formulas: as before, with the value worked out.
        write_with(&path, None, &sheets, Formulas::Keep).unwrap();
        let mut book: calamine::Xlsx<_> = calamine::open_workbook(&path).unwrap();
        assert_eq!(book.worksheet_formula("S").unwrap().get_value((3, 0)).map(String::as_str), Some("SUM(B2:B3)"));
        let values = book.worksheet_range("S").unwrap();
        assert_eq!(values.get_value((3, 0)), Some(&calamine::Data::Float(1.0)));
        // No value worked out (circular, unknown): an empty cached result, never the library's default 0.
        for cell in [(4, 0), (4, 1)] {
            assert!(matches!(values.get_value(cell), Some(calamine::Data::String(s)) if s.is_empty()) || matches!(values.get_value(cell), Some(calamine::Data::Empty) | None), "{cell:?}: {:?}", values.get_value(cell));
        }
    }

    #[test]
    fn an_edit_neutralises_the_cells_it_sets_and_keeps_the_workbooks_own_formulas() {
        use calamine::Reader as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("book.xlsx");
        let rows = vec![vec![Value::from(2), Value::from(3), Value::from("=A1*B1")]];
        write(&path, None, &[Sheet { name: "S".into(), rows, ..Sheet::default() }]).unwrap();
        let changes = [(None, "D1".to_owned(), Value::from("=WEBSERVICE(\"http://127.0.0.1:9/\")")), (None, "A1".to_owned(), Value::from("-4")), (Some("s".to_owned()), "E1".to_owned(), Value::from("@x"))];
        assert_eq!(edit_xlsx(&path, &changes, Formulas::AsText).unwrap(), (3, 2));
        let mut book: calamine::Xlsx<_> = calamine::open_workbook(&path).unwrap();
        let formulas = book.worksheet_formula("S").unwrap();
        assert_eq!(formulas.get_value((0, 2)).map(String::as_str), Some("A1*B1"), "the workbook's own formula stays");
        assert_eq!(formulas.get_value((0, 3)).map(String::as_str).unwrap_or_default(), "", "the new one is text");
        let values = book.worksheet_range("S").unwrap();
        assert_eq!(values.get_value((0, 2)), Some(&calamine::Data::Float(-12.0)), "worked out with the new -4");
        assert_eq!(values.get_value((0, 3)), Some(&calamine::Data::String("=WEBSERVICE(\"http://127.0.0.1:9/\")".into())));
        let far = [(None, "A1048577".to_owned(), Value::from(1))];
        assert!(edit_xlsx(&path, &far, Formulas::AsText).unwrap_err().contains("beyond a sheet's last row"));
    }

    #[test]
    fn a_csv_edit_neutralises_the_fields_it_brings_in_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        fs::write(&path, "name,amount,note\r\nrent,-900,\"=kept as the user had it\"\r\nfood,TBD,x\r\n").unwrap();
        let replaced = edit_csv(&path, &[("TBD".into(), "=HYPERLINK(\"\"http://127.0.0.1:9/\"\")".into()), ("x\r\n".into(), "\"@SUM(1)\"\r\nnew,-3.5,+cmd\r\n".into())], Formulas::AsText).unwrap();
        assert_eq!(replaced, (2, 3));
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "name,amount,note\r\nrent,-900,\"=kept as the user had it\"\r\nfood,'=HYPERLINK(\"\"http://127.0.0.1:9/\"\"),\"'@SUM(1)\"\r\nnew,-3.5,'+cmd\r\n"
        );
        let tsv = dir.path().join("t.tsv");
        fs::write(&tsv, "a\tb\n").unwrap();
        assert_eq!(edit_csv(&tsv, &[("b".into(), "-1+2\t=3+4".into())], Formulas::AsText).unwrap(), (1, 2));
        assert_eq!(fs::read_to_string(&tsv).unwrap(), "a\t'-1+2\t'=3+4\n");
        assert_eq!(edit_text(&tsv, &[("a".into(), "=9+9".into())]).unwrap(), 1, "the user's own edit (Keep) is as before");
        assert_eq!(fs::read_to_string(&tsv).unwrap(), "=9+9\t'-1+2\t'=3+4\n");
    }
}
