//! Writing documents: DOCX (docx-rs) from Markdown-like text, XLSX
//! (rust_xlsxwriter) from rows, Markdown and CSV as text; editing DOCX text in
//! place and XLSX cells; an answer exported as DOCX or PDF (LibreOffice).
//!
//! Every write goes to a temporary file beside the target and is renamed over
//! it, so a full disk or a crash never leaves half a document.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::read::{csv_records, parse_cell};

/// One sheet to write: a name and rows of cells (text, numbers, booleans;
/// text starting with "=" is a formula).
#[derive(Clone, Debug, PartialEq)]
pub struct Sheet {
    pub name: String,
    pub rows: Vec<Vec<Value>>,
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
pub fn write(path: &Path, text: Option<&str>, sheets: &[Sheet]) -> Result<String, String> {
    let format = Format::by_path(path).ok_or_else(|| format!("{} is not a file cowork writes: name it .docx, .xlsx, .md, .csv or .pdf", path.display()))?;
    let sheets: Vec<Sheet> = if sheets.is_empty() { text.map(sheets_from_text).unwrap_or_default() } else { sheets.to_vec() };
    match format {
        Format::Docx => {
            let text = text.ok_or("a Word document needs \"text\"")?;
            atomic_write(path, |file| docx(text).pack(file).map_err(|e| e.to_string()))?;
            Ok(format!("wrote {} ({} paragraphs)", path.display(), text.lines().filter(|l| !l.trim().is_empty()).count()))
        }
        Format::Xlsx => {
            if sheets.is_empty() || sheets.iter().all(|s| s.rows.is_empty()) {
                return Err("a spreadsheet needs \"sheets\" with rows (or \"text\" holding a table)".into());
            }
            let cells: usize = sheets.iter().map(|s| s.rows.iter().map(Vec::len).sum::<usize>()).sum();
            let bytes = xlsx(&sheets)?;
            atomic_write(path, |file| file.write_all(&bytes).map_err(|e| e.to_string()))?;
            Ok(format!("wrote {} ({} sheet{}, {cells} cells)", path.display(), sheets.len(), if sheets.len() == 1 { "" } else { "s" }))
        }
        Format::Csv => {
            let sheet = sheets.first().ok_or("a CSV file needs rows (\"sheets\", or \"text\" holding a table)")?;
            let csv = to_csv(&sheet.rows);
            atomic_write(path, |file| file.write_all(csv.as_bytes()).map_err(|e| e.to_string()))?;
            Ok(format!("wrote {} ({} rows)", path.display(), sheet.rows.len()))
        }
        Format::Markdown => {
            let text = text.ok_or("a Markdown file needs \"text\"")?;
            atomic_write(path, |file| file.write_all(text.as_bytes()).map_err(|e| e.to_string()))?;
            Ok(format!("wrote {} ({} bytes)", path.display(), text.len()))
        }
        Format::Pdf => {
            let text = text.ok_or("a PDF needs \"text\"")?;
            to_pdf(text, path)?;
            Ok(format!("wrote {} (through LibreOffice)", path.display()))
        }
    }
}

/// Writes through a temporary file in the same folder, renamed over `path` when complete.
fn atomic_write(path: &Path, fill: impl FnOnce(&mut fs::File) -> Result<(), String>) -> Result<(), String> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{name}.cowork-{}.part", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&temp).map_err(|e| format!("{}: {e}", temp.display()))?;
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
    if rows.is_empty() { Vec::new() } else { vec![Sheet { name: "Sheet1".into(), rows }] }
}

/// "12", "3.5", "1,234.50" → numbers; "true"/"false" → booleans; the rest text.
fn cell_value(text: &str) -> Value {
    let plain = text.replace(',', "");
    if !text.is_empty() && !text.starts_with('0') || text == "0" || text.starts_with("0.") {
        if let Ok(n) = plain.parse::<f64>()
            && n.is_finite()
            && (text.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | ',' | '+' | 'e' | 'E')))
        {
            return serde_json::Number::from_f64(n).map(Value::Number).unwrap_or(Value::String(text.into()));
        }
    }
    match text {
        "true" | "TRUE" => Value::Bool(true),
        "false" | "FALSE" => Value::Bool(false),
        _ => Value::String(text.to_owned()),
    }
}

fn to_csv(rows: &[Vec<Value>]) -> String {
    let mut out = String::new();
    for row in rows {
        let fields: Vec<String> = row
            .iter()
            .map(|v| {
                let text = match v {
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
    out
}

/// A workbook in memory from sheets of rows.
fn xlsx(sheets: &[Sheet]) -> Result<Vec<u8>, String> {
    use rust_xlsxwriter::{Format as CellFormat, Formula, Workbook};
    let mut book = Workbook::new();
    let bold = CellFormat::new().set_bold();
    for (i, sheet) in sheets.iter().enumerate() {
        let ws = book.add_worksheet();
        let name = if sheet.name.trim().is_empty() { format!("Sheet{}", i + 1) } else { sheet.name.trim().chars().take(31).collect() };
        ws.set_name(name.replace(['[', ']', ':', '*', '?', '/', '\\'], "_")).map_err(|e| format!("sheet {:?}: {e}", sheet.name))?;
        // A first row of text over rows with numbers is a header: bold.
        let header = sheet.rows.len() > 1 && sheet.rows[0].iter().all(Value::is_string) && sheet.rows[1..].iter().any(|r| r.iter().any(Value::is_number));
        for (r, row) in sheet.rows.iter().enumerate() {
            for (c, value) in row.iter().enumerate() {
                let (r, c) = (r as u32, c as u16);
                let result = match value {
                    Value::Number(n) => ws.write_number(r, c, n.as_f64().unwrap_or(0.0)).map(|_| ()),
                    Value::Bool(b) => ws.write_boolean(r, c, *b).map(|_| ()),
                    Value::Null => Ok(()),
                    // The value is worked out where cowork can (sums, averages, arithmetic over this sheet's
                    // cells), so readers that do not recalculate (LibreOffice by default, calamine) show it;
                    // otherwise the cached result is empty rather than a misleading 0.
                    Value::String(s) if s.starts_with('=') && s.len() > 1 => {
                        let result = formula::evaluate(&s[1..], &sheet.rows, 0).map(|v| formula::number_text(v)).unwrap_or_default();
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

/// Sets cells of an XLSX: the workbook is read (values and formulas of every
/// sheet) and written again with the changes. Formatting is not kept.
pub fn edit_xlsx(path: &Path, changes: &[(Option<String>, String, Value)]) -> Result<usize, String> {
    use calamine::Reader as _;
    let shown = path.display();
    let mut book: calamine::Xlsx<_> = calamine::open_workbook(path).map_err(|e: calamine::XlsxError| format!("{shown} is not a readable workbook ({e})"))?;
    let names = book.sheet_names();
    let mut sheets = Vec::new();
    for name in &names {
        let values = book.worksheet_range(name).map_err(|e| format!("{shown} sheet {name}: {e}"))?;
        let formulas = book.worksheet_formula(name).ok();
        let mut rows: Vec<Vec<Value>> = Vec::new();
        let put = |rows: &mut Vec<Vec<Value>>, r: usize, c: usize, v: Value| {
            if rows.len() <= r {
                rows.resize(r + 1, Vec::new());
            }
            if rows[r].len() <= c {
                rows[r].resize(c + 1, Value::Null);
            }
            rows[r][c] = v;
        };
        let (r0, c0) = values.start().unwrap_or((0, 0));
        for (r, c, v) in values.used_cells() {
            let value = match v {
                calamine::Data::Int(i) => Value::from(*i),
                calamine::Data::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number).unwrap_or(Value::Null),
                calamine::Data::Bool(b) => Value::Bool(*b),
                calamine::Data::Empty => Value::Null,
                other => Value::String(other.to_string()),
            };
            put(&mut rows, r0 as usize + r, c0 as usize + c, value);
        }
        if let Some(formulas) = formulas {
            let (f0, g0) = formulas.start().unwrap_or((0, 0));
            for (r, c, f) in formulas.used_cells() {
                if !f.is_empty() {
                    put(&mut rows, f0 as usize + r, g0 as usize + c, Value::String(format!("={f}")));
                }
            }
        }
        sheets.push(Sheet { name: name.clone(), rows });
    }
    let mut count = 0;
    for (sheet, cell, value) in changes {
        let index = match sheet {
            None => 0,
            Some(name) => names.iter().position(|n| n.eq_ignore_ascii_case(name)).ok_or_else(|| format!("{shown} has no sheet {name:?} (it has {})", names.join(", ")))?,
        };
        let (r, c) = parse_cell(cell).ok_or_else(|| format!("{cell:?} is not a cell like B3"))?;
        let rows = &mut sheets[index].rows;
        if rows.len() <= r as usize {
            rows.resize(r as usize + 1, Vec::new());
        }
        let row = &mut rows[r as usize];
        if row.len() <= c as usize {
            row.resize(c as usize + 1, Value::Null);
        }
        row[c as usize] = match value {
            Value::String(s) => cell_value(s),
            other => other.clone(),
        };
        count += 1;
    }
    let bytes = xlsx(&sheets)?;
    atomic_write(path, |file| file.write_all(&bytes).map_err(|e| e.to_string()))?;
    Ok(count)
}

/// Text files (Markdown, CSV, text): exact replacements.
pub fn edit_text(path: &Path, replacements: &[(String, String)]) -> Result<usize, String> {
    let mut text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut count = 0;
    for (find, replace) in replacements.iter().filter(|(f, _)| !f.is_empty()) {
        count += text.matches(find.as_str()).count();
        text = text.replace(find.as_str(), replace);
    }
    if count > 0 {
        atomic_write(path, |file| file.write_all(text.as_bytes()).map_err(|e| e.to_string()))?;
    }
    Ok(count)
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
mod formula {
    use serde_json::Value;

    pub fn number_text(v: f64) -> String {
        if v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v}") }
    }

    pub fn evaluate(formula: &str, rows: &[Vec<Value>], depth: u32) -> Option<f64> {
        if depth > 16 {
            return None;
        }
        let tokens: Vec<char> = formula.chars().filter(|c| !c.is_whitespace()).collect();
        let mut parser = Parser { tokens, at: 0, rows, depth };
        let value = parser.expr()?;
        (parser.at == parser.tokens.len() && value.is_finite()).then_some(value)
    }

    struct Parser<'a> {
        tokens: Vec<char>,
        at: usize,
        rows: &'a [Vec<Value>],
        depth: u32,
    }

    impl Parser<'_> {
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
                    if d == 0.0 {
                        return None;
                    }
                    value /= d;
                } else {
                    return Some(value);
                }
            }
        }

        fn factor(&mut self) -> Option<f64> {
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
                let mut values = Vec::new();
                for r in a.0.min(b.0)..=a.0.max(b.0) {
                    for c in a.1.min(b.1)..=a.1.max(b.1) {
                        // Text and empty cells are skipped, as spreadsheets do in a range.
                        if let Some(v) = self.value_at(r, c) {
                            values.push(v);
                        }
                    }
                }
                return Some(values);
            }
            self.at = start;
            Some(vec![self.expr()?])
        }

        fn cell(&self, word: &str) -> Option<f64> {
            let (r, c) = super::parse_cell(word)?;
            Some(self.value_at(r, c).unwrap_or(0.0))
        }

        fn value_at(&self, r: u32, c: u32) -> Option<f64> {
            match self.rows.get(r as usize)?.get(c as usize)? {
                Value::Number(n) => n.as_f64(),
                Value::Bool(b) => Some(f64::from(u8::from(*b))),
                Value::String(s) if s.starts_with('=') => evaluate(&s[1..], self.rows, self.depth + 1),
                _ => None,
            }
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
        use serde_json::json;

        #[test]
        fn sums_averages_and_arithmetic_over_cells() {
            let rows: Vec<Vec<serde_json::Value>> = serde_json::from_value(json!([["a", 10], ["b", 20.5], ["c", "=B1+B2"], ["", "x"]])).unwrap();
            let eval = |f: &str| super::evaluate(f, &rows, 0);
            assert_eq!(eval("SUM(B1:B2)"), Some(30.5));
            assert_eq!(eval("SUM(B1:B4)"), Some(61.0), "a formula cell counts, text does not");
            assert_eq!(eval("AVERAGE(B1:B2)*2"), Some(30.5));
            assert_eq!(eval("(B1-4)/3+MAX(B1,B2)"), Some(22.5));
            assert_eq!(eval("ROUND(B2/3, 2)"), Some(6.83));
            assert_eq!(eval("COUNT(A1:B4)"), Some(3.0));
            assert_eq!(eval("VLOOKUP(A1,A1:B2,2)"), None);
            assert_eq!(eval("Sheet2!A1"), None);
            assert_eq!(eval("B1/0"), None);
            let cycle: Vec<Vec<serde_json::Value>> = serde_json::from_value(json!([["=A1+1"]])).unwrap();
            assert!(super::evaluate("A1", &cycle, 0).is_some(), "a cycle ends (at the depth limit) without hanging");
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
        assert_eq!(to_csv(&[vec![Value::from("a,b"), Value::from(1)]]), "\"a,b\",1\r\n");
    }
}
