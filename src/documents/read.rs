//! A file read as a document: its kind by content (its first bytes) checked
//! against its name, its parts labelled for citing, a selection of them, and a
//! cap on what is returned that says what it cut and how to read on
//! (`Document::render`).
//!
//! Parts: PDF pages (pdf-extract on lopdf, one page at a time; a page without
//! text is said to have no text layer), DOCX and ODT pages where the file marks
//! them (explicit breaks, Word's last layout, LibreOffice's soft breaks) else
//! sections by top-level heading, PPTX slides in the presentation's order and
//! ODP draw pages, EPUB chapters by its spine, XLSX streamed cell by cell
//! (calamine's cell reader, 2 million cells at most) and XLS/ODS through
//! calamine's ranges, each sheet a table with its cell range, HTML, Markdown
//! and text by heading, CSV by RFC 4180.
//!
//! Limits make a hostile file an error, not a hang: 256 MiB per file, 64 MiB
//! inflated per XML part and 128 MiB per file, a 60 s deadline (the read runs
//! on its own `document` thread), and a password-protected file recognised (an
//! encrypted PDF, or OOXML in a CFB wrapper).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use calamine::{Data, Reader as _};

use super::pictures::PictureText;
use super::xml::{self, Block, Dialect};

/// Files larger than this are refused before a byte is parsed.
pub const MAX_FILE_BYTES: u64 = 256 << 20;
/// One XML part of an office file is inflated to at most this (a zip bomb stops here).
const MAX_PART_BYTES: u64 = 64 << 20;
/// Text inflated from all the parts of one file at most (many chapters or slides, each under the part cap).
const MAX_TOTAL_BYTES: usize = 128 << 20;
/// Cells read from one sheet at most (a million-row sheet is read in part and said so).
const MAX_CELLS: usize = 2_000_000;
/// How long reading one document may take.
pub const DEADLINE: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Pdf,
    Docx,
    Odt,
    Xlsx,
    Xls,
    Ods,
    Pptx,
    Odp,
    Epub,
    Html,
    Markdown,
    Csv,
    Text,
    /// A PNG, JPEG, GIF or WebP picture: its text, by OCR.
    Picture,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pdf => "PDF",
            Kind::Docx => "Word document",
            Kind::Odt => "OpenDocument text",
            Kind::Xlsx => "Excel workbook",
            Kind::Xls => "Excel 97 workbook",
            Kind::Ods => "OpenDocument spreadsheet",
            Kind::Pptx => "PowerPoint presentation",
            Kind::Odp => "OpenDocument presentation",
            Kind::Epub => "EPUB book",
            Kind::Html => "web page",
            Kind::Markdown => "Markdown",
            Kind::Csv => "CSV table",
            Kind::Text => "text",
            Kind::Picture => "picture",
        }
    }

    /// What one part is called ("page 3", "slide 2", "sheet Budget").
    pub fn unit(self) -> &'static str {
        match self {
            Kind::Pdf => "page",
            Kind::Pptx | Kind::Odp => "slide",
            Kind::Xlsx | Kind::Xls | Kind::Ods | Kind::Csv => "sheet",
            Kind::Epub => "chapter",
            Kind::Picture => "picture",
            _ => "section",
        }
    }

    /// By the file's name; `detect` checks the content agrees.
    pub fn by_extension(path: &Path) -> Option<Kind> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "pdf" => Kind::Pdf,
            "docx" | "docm" => Kind::Docx,
            "odt" => Kind::Odt,
            "xlsx" | "xlsm" => Kind::Xlsx,
            "xls" => Kind::Xls,
            "ods" => Kind::Ods,
            "pptx" => Kind::Pptx,
            "odp" => Kind::Odp,
            "epub" => Kind::Epub,
            "html" | "htm" | "xhtml" => Kind::Html,
            "md" | "markdown" => Kind::Markdown,
            "csv" | "tsv" => Kind::Csv,
            "txt" | "text" | "log" | "rst" | "org" => Kind::Text,
            "png" | "jpg" | "jpeg" | "gif" | "webp" => Kind::Picture,
            _ => return None,
        })
    }

    pub fn is_sheet(self) -> bool {
        matches!(self, Kind::Xlsx | Kind::Xls | Kind::Ods | Kind::Csv)
    }
}

/// One page, slide, sheet or section.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Part {
    /// 1-based, in the document's order.
    pub number: u32,
    /// How it is cited: "page 3", "slide 2", "sheet Budget (A1:D12)", "section 2: Results".
    pub label: String,
    pub text: String,
    /// Said about it instead of text ("no text layer: a scanned page").
    pub note: Option<String>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Document {
    pub path: PathBuf,
    pub kind: Kind,
    pub title: Option<String>,
    /// Every part the document has (a selection keeps only some in `parts`).
    pub total_parts: u32,
    pub parts: Vec<Part>,
    /// What the reader could not do ("sheet Data was read up to row 20000").
    pub notes: Vec<String>,
}

/// Which parts to read and how much text to return.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// "1-3,7": pages, slides or sections by number.
    pub pages: Option<String>,
    /// A sheet by name (or number) for spreadsheets.
    pub sheet: Option<String>,
    /// A cell range like "A1:D20" within the sheet(s).
    pub cells: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Io(String),
    #[error("{path} is {size} MiB; cowork reads documents up to {} MiB", MAX_FILE_BYTES >> 20)]
    TooLarge { path: String, size: u64 },
    #[error("{0} is password-protected; cowork cannot read it (open it, remove the password and save a copy)")]
    Encrypted(String),
    #[error("{path} is not a readable {kind}: {why}")]
    Corrupt { path: String, kind: &'static str, why: String },
    #[error("{0} is not a kind of document cowork reads (PDF, DOCX, ODT, XLSX, XLS, ODS, PPTX, ODP, EPUB, HTML, Markdown, CSV, text, or a PNG, JPEG, GIF or WebP picture)")]
    Unsupported(String),
    #[error("reading {0} took longer than {secs} s and was given up", secs = DEADLINE.as_secs())]
    TimedOut(String),
    #[error("{0}")]
    Selection(String),
}

/// Reads `path` on its own thread and gives up after `deadline`: a document
/// built to make a parser spin costs a thread for a while, never the caller.
pub fn read_with_deadline(path: &Path, selection: &Selection, deadline: Duration) -> Result<Document, ReadError> {
    read_with_deadline_as(path, path, selection, deadline)
}

/// `read_with_deadline` of a file opened through `io_path` (a file already
/// opened and checked, as `/proc/self/fd/N`), named and kinded by `name`.
pub fn read_with_deadline_as(io_path: &Path, name: &Path, selection: &Selection, deadline: Duration) -> Result<Document, ReadError> {
    let path = name;
    let (done, answer) = crossbeam_channel::bounded(1);
    let (io_owned, owned, selection_owned) = (io_path.to_path_buf(), name.to_path_buf(), selection.clone());
    let deadline_at = Instant::now() + deadline;
    std::thread::Builder::new()
        .name("document".into())
        .spawn(move || {
            let _ = done.send(read_until(&io_owned, &owned, &selection_owned, deadline_at));
        })
        .map_err(|e| ReadError::Io(format!("cannot start reading {}: {e}", path.display())))?;
    match answer.recv_timeout(deadline + Duration::from_secs(1)) {
        Ok(result) => result,
        Err(_) => Err(ReadError::TimedOut(path.display().to_string())),
    }
}

/// Reads `path` (on this thread, within `DEADLINE`).
pub fn read(path: &Path, selection: &Selection) -> Result<Document, ReadError> {
    read_until(path, path, selection, Instant::now() + DEADLINE)
}

/// Reads through `io_path`; `name` gives the kind (its extension), the
/// messages and the document's path.
fn read_until(io_path: &Path, name: &Path, selection: &Selection, deadline: Instant) -> Result<Document, ReadError> {
    let shown = name.display().to_string();
    let path = io_path;
    let meta = fs::metadata(path).map_err(|e| ReadError::Io(format!("{shown}: {e}")))?;
    if meta.is_dir() {
        return Err(ReadError::Io(format!("{shown} is a folder, not a document")));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge { path: shown, size: meta.len() >> 20 });
    }
    let kind = detect(path, name)?;
    let corrupt = |why: String| ReadError::Corrupt { path: shown.clone(), kind: kind.name(), why };
    let mut notes = Vec::new();
    let (title, parts) = match kind {
        Kind::Pdf => (None, pdf(path, &shown, deadline, selection, &mut notes)?),
        Kind::Docx => {
            let mut zip = open_zip(path, &corrupt)?;
            let body = zip_text(&mut zip, "word/document.xml", &corrupt)?;
            let blocks = xml::blocks(&body, Dialect::OfficeOpen).map_err(corrupt)?;
            (core_title(&mut zip), paged(kind, &blocks))
        }
        Kind::Odt => {
            let mut zip = open_zip(path, &corrupt)?;
            let body = zip_text(&mut zip, "content.xml", &corrupt)?;
            let blocks = xml::blocks(&body, Dialect::OpenDocument).map_err(corrupt)?;
            (None, paged(kind, &blocks))
        }
        Kind::Pptx => {
            let mut zip = open_zip(path, &corrupt)?;
            (core_title(&mut zip), slides(&mut zip, &corrupt)?)
        }
        Kind::Odp => {
            let mut zip = open_zip(path, &corrupt)?;
            let body = zip_text(&mut zip, "content.xml", &corrupt)?;
            let blocks = xml::blocks(&body, Dialect::OpenDocument).map_err(corrupt)?;
            (None, split_at(&blocks, |b| matches!(b, Block::Slide), "slide"))
        }
        Kind::Epub => epub(path, &corrupt)?,
        Kind::Xlsx | Kind::Xls | Kind::Ods => (None, workbook(path, kind, selection, deadline, &corrupt, &mut notes)?),
        Kind::Csv => (None, vec![csv(path, name, &shown, selection)?]),
        Kind::Html => {
            let html = text_file(path, &shown)?;
            let title = regex::Regex::new(r"(?is)<title[^>]*>(.*?)</title>").ok().and_then(|re| re.captures(&html)).map(|c| crate::tools::web::html_to_text(&c[1]).trim().to_owned());
            (title, sections(&crate::tools::web::html_to_text(&html)))
        }
        Kind::Markdown | Kind::Text => (None, sections(&text_file(path, &shown)?)),
        Kind::Picture => (None, vec![picture(path, &shown)?]),
    };
    if Instant::now() > deadline {
        return Err(ReadError::TimedOut(shown));
    }
    let total_parts = parts.len() as u32;
    let parts = select(kind, parts, selection)?;
    Ok(Document { path: name.to_path_buf(), kind, title: title.filter(|t| !t.is_empty()), total_parts, parts, notes })
}

/// The kind by the first bytes, checked against the name: a ZIP named .pdf
/// or a PDF named .docx is read as what it is.
fn detect(path: &Path, name: &Path) -> Result<Kind, ReadError> {
    let shown = name.display().to_string();
    // Twelve bytes: WebP names itself at 8..12 (`media::sniff`).
    let mut head = [0u8; 12];
    let n = fs::File::open(path).and_then(|mut f| f.read(&mut head)).map_err(|e| ReadError::Io(format!("{shown}: {e}")))?;
    let head = &head[..n];
    let by_name = Kind::by_extension(name);
    if head.starts_with(b"%PDF") {
        return Ok(Kind::Pdf);
    }
    if crate::media::sniff(head).is_some() {
        return Ok(Kind::Picture);
    }
    // An OLE compound file: an old .xls, or an Office file encrypted with a password (OOXML in a CFB wrapper).
    if head.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
        return match by_name {
            Some(Kind::Xls) => Ok(Kind::Xls),
            Some(Kind::Docx | Kind::Xlsx | Kind::Pptx) => Err(ReadError::Encrypted(shown)),
            _ => Err(ReadError::Unsupported(shown)),
        };
    }
    if head.starts_with(b"PK") {
        return match by_name {
            Some(kind @ (Kind::Docx | Kind::Odt | Kind::Xlsx | Kind::Ods | Kind::Pptx | Kind::Odp | Kind::Epub)) => Ok(kind),
            _ => zip_kind(path).ok_or(ReadError::Unsupported(shown)),
        };
    }
    match by_name {
        Some(Kind::Pdf) => Err(ReadError::Corrupt { path: shown, kind: "PDF", why: "it does not start as a PDF does (%PDF)".into() }),
        Some(kind @ (Kind::Docx | Kind::Odt | Kind::Xlsx | Kind::Ods | Kind::Pptx | Kind::Odp | Kind::Epub)) => {
            Err(ReadError::Corrupt { path: shown, kind: kind.name(), why: "it is not a ZIP archive, as this kind of file is".into() })
        }
        Some(Kind::Picture) => Err(ReadError::Corrupt { path: shown, kind: "picture", why: "it does not start as a PNG, JPEG, GIF or WebP picture does".into() }),
        Some(kind) => Ok(kind),
        None if head.contains(&0) => Err(ReadError::Unsupported(shown)),
        None => Ok(Kind::Text),
    }
}

/// A picture's one part: the text OCR found in it, or why there is none.
fn picture(path: &Path, shown: &str) -> Result<Part, ReadError> {
    let data = fs::read(path).map_err(|e| ReadError::Io(format!("{shown}: {e}")))?;
    if data.len() > crate::media::MAX_IMAGE_BYTES {
        return Err(ReadError::TooLarge { path: shown.to_owned(), size: data.len() as u64 >> 20 });
    }
    let (text, note) = match super::pictures::Pictures::default().picture(&data) {
        PictureText::Read(read) if read.text.is_empty() => (String::new(), "no text found in the picture".to_owned()),
        PictureText::Read(read) => (read.text, format!("its text read by OCR, {} % confidence", read.confidence)),
        PictureText::NotRead(why) => (String::new(), format!("its text could not be read: {why}")),
    };
    Ok(Part { number: 1, label: "picture".into(), text, note: Some(note) })
}

/// A ZIP by what it holds (OpenDocument's mimetype, OOXML's main parts).
fn zip_kind(path: &Path) -> Option<Kind> {
    let zip = zip::ZipArchive::new(fs::File::open(path).ok()?).ok()?;
    let has = |name: &str| zip.index_for_name(name).is_some();
    if has("word/document.xml") {
        Some(Kind::Docx)
    } else if has("xl/workbook.xml") {
        Some(Kind::Xlsx)
    } else if has("ppt/presentation.xml") {
        Some(Kind::Pptx)
    } else if has("META-INF/container.xml") && !has("content.xml") {
        Some(Kind::Epub)
    } else {
        let mut zip = zip;
        let mime = zip.by_name("mimetype").ok().map(|mut f| {
            let mut s = String::new();
            let _ = f.read_to_string(&mut s);
            s
        })?;
        match mime.trim() {
            "application/vnd.oasis.opendocument.text" => Some(Kind::Odt),
            "application/vnd.oasis.opendocument.spreadsheet" => Some(Kind::Ods),
            "application/vnd.oasis.opendocument.presentation" => Some(Kind::Odp),
            "application/epub+zip" => Some(Kind::Epub),
            _ => None,
        }
    }
}

type Zip = zip::ZipArchive<fs::File>;

fn open_zip(path: &Path, corrupt: &dyn Fn(String) -> ReadError) -> Result<Zip, ReadError> {
    let file = fs::File::open(path).map_err(|e| ReadError::Io(format!("{}: {e}", path.display())))?;
    zip::ZipArchive::new(file).map_err(|e| corrupt(format!("its ZIP container is damaged ({e})")))
}

/// One part of a ZIP as text, inflated to `MAX_PART_BYTES` at most.
fn zip_text(zip: &mut Zip, name: &str, corrupt: &dyn Fn(String) -> ReadError) -> Result<String, ReadError> {
    let entry = zip.by_name(name).map_err(|_| corrupt(format!("it has no {name}")))?;
    if entry.encrypted() {
        return Err(corrupt(format!("{name} is encrypted")));
    }
    let mut bytes = Vec::new();
    entry.take(MAX_PART_BYTES + 1).read_to_end(&mut bytes).map_err(|e| corrupt(format!("{name} cannot be inflated ({e})")))?;
    if bytes.len() as u64 > MAX_PART_BYTES {
        return Err(corrupt(format!("{name} inflates to more than {} MiB (a ZIP bomb?)", MAX_PART_BYTES >> 20)));
    }
    String::from_utf8(bytes).map_err(|_| corrupt(format!("{name} is not UTF-8 text")))
}

/// The title an OOXML file records (docProps/core.xml's dc:title).
fn core_title(zip: &mut Zip) -> Option<String> {
    let core = zip_text(zip, "docProps/core.xml", &|why| ReadError::Io(why)).ok()?;
    let re = regex::Regex::new(r"(?s)<dc:title>(.*?)</dc:title>").ok()?;
    re.captures(&core).map(|c| unescape(&c[1]).trim().to_owned())
}

fn unescape(text: &str) -> String {
    quick_xml::escape::unescape(text).map(|c| c.into_owned()).unwrap_or_else(|_| text.to_owned())
}

/// Pages where the file marks them (explicit breaks, the writing app's last
/// layout), else sections by top-level heading.
fn paged(kind: Kind, blocks: &[Block]) -> Vec<Part> {
    if blocks.iter().any(|b| matches!(b, Block::PageBreak)) {
        return split_at(blocks, |b| matches!(b, Block::PageBreak), "page");
    }
    let _ = kind;
    let mut parts: Vec<Part> = Vec::new();
    let mut current: Vec<Block> = Vec::new();
    let mut heading: Option<String> = None;
    let close = |current: &mut Vec<Block>, heading: &Option<String>, parts: &mut Vec<Part>| {
        let text = xml::to_text(current);
        if !text.is_empty() || heading.is_some() {
            let number = parts.len() as u32 + 1;
            let label = match heading {
                Some(h) => format!("section {number}: {}", cut_chars(h, 60)),
                None => format!("section {number}"),
            };
            parts.push(Part { number, label, text, note: None });
        }
        current.clear();
    };
    for block in blocks {
        if let Block::Heading(1, h) = block {
            close(&mut current, &heading, &mut parts);
            heading = Some(h.clone());
        }
        current.push(block.clone());
    }
    close(&mut current, &heading, &mut parts);
    parts
}

fn split_at(blocks: &[Block], at: impl Fn(&Block) -> bool, unit: &str) -> Vec<Part> {
    let mut groups: Vec<Vec<Block>> = vec![Vec::new()];
    for block in blocks {
        if at(block) {
            groups.push(Vec::new());
        } else {
            groups.last_mut().expect("one").push(block.clone());
        }
    }
    // Before the first slide of an ODP there is nothing; a page break at the very start makes no empty page 1.
    if unit == "slide" || groups.first().is_some_and(|g| xml::to_text(g).is_empty()) && groups.len() > 1 {
        groups.remove(0);
    }
    groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let number = i as u32 + 1;
            Part { number, label: format!("{unit} {number}"), text: xml::to_text(g), note: None }
        })
        .collect()
}

/// Slides in the presentation's order (presentation.xml's list, through its relationships).
fn slides(zip: &mut Zip, corrupt: &dyn Fn(String) -> ReadError) -> Result<Vec<Part>, ReadError> {
    let presentation = zip_text(zip, "ppt/presentation.xml", corrupt)?;
    let rels = zip_text(zip, "ppt/_rels/presentation.xml.rels", corrupt).unwrap_or_default();
    let id_re = regex::Regex::new(r#"<p:sldId\b[^>]*\br:id="([^"]+)""#).expect("valid");
    let rel_re = regex::Regex::new(r#"<Relationship\b[^>]*>"#).expect("valid");
    let attr = |tag: &str, name: &str| regex::Regex::new(&format!(r#"\b{name}="([^"]*)""#)).ok().and_then(|re| re.captures(tag).map(|c| c[1].to_owned()));
    let targets: Vec<(String, String)> = rel_re.find_iter(&rels).filter_map(|m| Some((attr(m.as_str(), "Id")?, attr(m.as_str(), "Target")?))).collect();
    let mut files: Vec<String> = id_re
        .captures_iter(&presentation)
        .filter_map(|c| targets.iter().find(|(id, _)| *id == c[1]).map(|(_, t)| format!("ppt/{}", t.trim_start_matches("/ppt/").trim_start_matches("../"))))
        .collect();
    if files.is_empty() {
        // No list: the slide files by number.
        let mut numbered: Vec<(u32, String)> = zip
            .file_names()
            .filter_map(|n| n.strip_prefix("ppt/slides/slide").and_then(|r| r.strip_suffix(".xml")).and_then(|d| d.parse().ok()).map(|d| (d, n.to_owned())))
            .collect();
        numbered.sort();
        files = numbered.into_iter().map(|(_, n)| n).collect();
    }
    let mut total = 0usize;
    files
        .iter()
        .enumerate()
        .map(|(i, file)| {
            let body = zip_text(zip, file, corrupt)?;
            total += body.len();
            if total > MAX_TOTAL_BYTES {
                return Err(corrupt(format!("its slides inflate to more than {} MiB", MAX_TOTAL_BYTES >> 20)));
            }
            let blocks = xml::blocks(&body, Dialect::OfficeOpen).map_err(|e| corrupt(format!("{file}: {e}")))?;
            let number = i as u32 + 1;
            Ok(Part { number, label: format!("slide {number}"), text: xml::to_text(&blocks), note: None })
        })
        .collect()
}

/// An EPUB's chapters in reading order (container → package → spine).
fn epub(path: &Path, corrupt: &dyn Fn(String) -> ReadError) -> Result<(Option<String>, Vec<Part>), ReadError> {
    let mut zip = open_zip(path, corrupt)?;
    let container = zip_text(&mut zip, "META-INF/container.xml", corrupt)?;
    let opf_path = regex::Regex::new(r#"full-path="([^"]+)""#).expect("valid").captures(&container).map(|c| c[1].to_owned()).ok_or_else(|| corrupt("its container names no package".into()))?;
    let opf = zip_text(&mut zip, &opf_path, corrupt)?;
    let base = opf_path.rsplit_once('/').map(|(dir, _)| format!("{dir}/")).unwrap_or_default();
    let title = regex::Regex::new(r"(?s)<dc:title[^>]*>(.*?)</dc:title>").expect("valid").captures(&opf).map(|c| unescape(&c[1]).trim().to_owned());
    let item_re = regex::Regex::new(r"<item\b[^>]*>").expect("valid");
    let attr = |tag: &str, name: &str| regex::Regex::new(&format!(r#"\b{name}="([^"]*)""#)).ok().and_then(|re| re.captures(tag).map(|c| c[1].to_owned()));
    let items: Vec<(String, String)> = item_re.find_iter(&opf).filter_map(|m| Some((attr(m.as_str(), "id")?, attr(m.as_str(), "href")?))).collect();
    let spine: Vec<String> = regex::Regex::new(r#"<itemref\b[^>]*\bidref="([^"]+)""#).expect("valid").captures_iter(&opf).map(|c| c[1].to_owned()).collect();
    let mut parts = Vec::new();
    let mut total = 0usize;
    for idref in spine {
        let Some((_, href)) = items.iter().find(|(id, _)| *id == idref) else { continue };
        let file = format!("{base}{}", percent_decode(href));
        let Ok(html) = zip_text(&mut zip, &file, corrupt) else { continue };
        total += html.len();
        if total > MAX_TOTAL_BYTES {
            return Err(corrupt(format!("its chapters inflate to more than {} MiB", MAX_TOTAL_BYTES >> 20)));
        }
        let text = crate::tools::web::html_to_text(&html).trim().to_owned();
        if text.is_empty() {
            continue;
        }
        let number = parts.len() as u32 + 1;
        static HEADING: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| regex::Regex::new(r"(?is)<h[12][^>]*>(.*?)</h[12]>").expect("valid"));
        let heading = HEADING.captures(&html).map(|c| crate::tools::web::html_to_text(&c[1]).trim().to_owned()).filter(|h| !h.is_empty());
        let label = match heading {
            Some(h) => format!("chapter {number}: {}", cut_chars(&h, 60)),
            None => format!("chapter {number}"),
        };
        parts.push(Part { number, label, text, note: None });
    }
    if parts.is_empty() {
        return Err(corrupt("its spine names no readable chapter".into()));
    }
    Ok((title, parts))
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text).decode_utf8_lossy().into_owned()
}

/// A page's note when it had no text layer and OCR read none.
const NO_TEXT_LAYER: &str = "no text layer";
/// A page's note when its text came from OCR.
const SCANNED: &str = "scanned page";

fn pdf(path: &Path, shown: &str, deadline: Instant, selection: &Selection, notes: &mut Vec<String>) -> Result<Vec<Part>, ReadError> {
    let corrupt = |why: String| ReadError::Corrupt { path: shown.to_owned(), kind: "PDF", why };
    let mut doc = pdf_extract::Document::load(path).map_err(|e| match e {
        pdf_extract::Error::Decryption(_) => ReadError::Encrypted(shown.to_owned()),
        e => corrupt(e.to_string()),
    })?;
    if doc.is_encrypted() {
        // Encrypted with an empty user password (common for "no copying" PDFs): opens; otherwise it needs one.
        doc.decrypt("").map_err(|_| ReadError::Encrypted(shown.to_owned()))?;
    }
    let pages = doc.get_pages();
    let total = pages.len() as u32;
    let wanted = match &selection.pages {
        Some(spec) => parse_ranges(spec, total)?,
        None => (1..=total).collect(),
    };
    let mut parts = Vec::with_capacity(total as usize);
    let mut pictures = super::pictures::Pictures::default();
    for (number, page_id) in pages.iter().map(|(n, id)| (*n, *id)) {
        if !wanted.contains(&number) {
            // Counted, not read: the selection keeps its numbering.
            parts.push(Part { number, label: format!("page {number}"), text: String::new(), note: Some("not read".into()) });
            continue;
        }
        if Instant::now() > deadline {
            return Err(ReadError::TimedOut(shown.to_owned()));
        }
        let mut text = String::new();
        let result = {
            let mut output = pdf_extract::PlainTextOutput::new(&mut text);
            // A page whose content stream is broken is said, the rest still read.
            crate::runtime::contain("a PDF page", || pdf_extract::output_doc_page(&doc, &mut output, number))
        };
        let note = match result {
            // A scan: the text of its pictures, by OCR.
            Ok(Ok(())) if text.trim().is_empty() => match pictures.pdf_page(&doc, page_id, deadline) {
                PictureText::Read(read) if !read.text.is_empty() => {
                    text = read.text;
                    Some(format!("{SCANNED}: its text read by OCR, {} % confidence", read.confidence))
                }
                PictureText::Read(_) => Some(format!("{NO_TEXT_LAYER}: a scanned or image-only page, and no text found in its pictures")),
                PictureText::NotRead(why) => Some(format!("{NO_TEXT_LAYER}: a scanned or image-only page ({why})")),
            },
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("its text could not be read ({e})")),
            Err(_) => Some("its text could not be read (the page is malformed)".to_owned()),
        };
        parts.push(Part { number, label: format!("page {number}"), text: xml::tidy(&text), note });
    }
    let unread = parts.iter().filter(|p| p.note.as_deref().is_some_and(|n| n.starts_with(NO_TEXT_LAYER))).count();
    let scanned = unread + parts.iter().filter(|p| p.note.as_deref().is_some_and(|n| n.starts_with(SCANNED))).count();
    if scanned > 0 && scanned == wanted.len() {
        notes.push(if unread == 0 { "no page read has a text layer: a scanned document, its text read by OCR (check names and numbers against the pages)".into() } else { "no page read has a text layer: this looks like a scanned document".into() });
    }
    Ok(parts)
}

/// A spreadsheet's sheets as tables: each row `A | B | C` under a line that
/// names the range read.
fn workbook(path: &Path, kind: Kind, selection: &Selection, deadline: Instant, corrupt: &dyn Fn(String) -> ReadError, notes: &mut Vec<String>) -> Result<Vec<Part>, ReadError> {
    let limit = selection.cells.as_deref().map(parse_cells).transpose()?;
    if kind == Kind::Xlsx {
        // Streamed cell by cell: a large sheet is never held whole.
        let mut book: calamine::Xlsx<_> = calamine::open_workbook(path).map_err(|e: calamine::XlsxError| corrupt(e.to_string()))?;
        let names = book.sheet_names();
        let wanted = pick_sheets(&names, selection)?;
        let mut parts = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let number = index as u32 + 1;
            if !wanted.contains(&index) {
                parts.push(not_read(number, name));
                continue;
            }
            // Rows arrive in order: each becomes its line as soon as it is complete, so a large
            // sheet costs its text, not a cell map. Lines start at the sheet's declared first column.
            // A formula whose value was never computed (a file a library wrote) is shown as its
            // formula: seen once, the sheet is read again with its formulas at hand.
            let mut formulas: std::collections::HashMap<(u32, u32), String> = std::collections::HashMap::new();
            // A sheet whose declared dimensions leave out a column it uses is read again from column A.
            let mut from_a = false;
            let (lines, cut) = loop {
                let mut reader = book.worksheet_cells_reader(name).map_err(|e| corrupt(format!("sheet {name}: {e}")))?;
                let mut lines = Lines::new(if from_a { 0 } else { reader.dimensions().start.1 }, limit);
                let mut cut = false;
                while let Some(cell) = reader.next_cell().map_err(|e| corrupt(format!("sheet {name}: {e}")))? {
                    if lines.count >= MAX_CELLS || Instant::now() > deadline {
                        cut = true;
                        break;
                    }
                    let (row, col) = cell.get_position();
                    match (Data::from(cell.get_value().clone()), formulas.get(&(row, col))) {
                        (Data::Empty, Some(formula)) => lines.put(row, col, &Data::String(formula.clone())),
                        (value, _) => lines.put(row, col, &value),
                    }
                }
                drop(reader);
                if lines.left_of_start && !from_a {
                    from_a = true;
                    continue;
                }
                if !lines.empty_formulas || !formulas.is_empty() || cut {
                    break (lines, cut);
                }
                let Ok(range) = book.worksheet_formula(name) else { break (lines, cut) };
                let (f0, g0) = range.start().unwrap_or((0, 0));
                formulas = range.used_cells().filter(|(_, _, f)| !f.is_empty()).map(|(r, c, f)| ((f0 + r as u32, g0 + c as u32), format!("={f}"))).collect();
                if formulas.is_empty() {
                    break (lines, cut);
                }
            };
            let grid = lines.finish();
            if cut {
                notes.push(format!("sheet {name} was read up to row {} (it holds more than {MAX_CELLS} cells)", grid.last_row + 1));
            }
            parts.push(grid.part(number, name));
        }
        return Ok(parts);
    }
    // By content, not by the name's extension (a checked file may be read through `/proc/self/fd`).
    let file = std::io::BufReader::new(fs::File::open(path).map_err(|e| corrupt(e.to_string()))?);
    let mut book = match kind {
        Kind::Ods => calamine::Sheets::Ods(calamine::Reader::new(file).map_err(|e: calamine::OdsError| corrupt(e.to_string()))?),
        _ => calamine::Sheets::Xls(calamine::Reader::new(file).map_err(|e: calamine::XlsError| corrupt(e.to_string()))?),
    };
    let names = book.sheet_names();
    let wanted = pick_sheets(&names, selection)?;
    let mut parts = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let number = index as u32 + 1;
        if !wanted.contains(&index) {
            parts.push(not_read(number, name));
            continue;
        }
        let range = book.worksheet_range(name).map_err(|e| corrupt(format!("sheet {name}: {e}")))?;
        let mut grid = Grid::default();
        for (row, col, value) in range.used_cells() {
            let (start_row, start_col) = range.start().unwrap_or((0, 0));
            grid.put(start_row + row as u32, start_col + col as u32, value.clone(), limit);
        }
        parts.push(grid.part(number, name));
    }
    Ok(parts)
}

/// A sheet the selection left out: counted, not read.
fn not_read(number: u32, name: &str) -> Part {
    Part { number, label: format!("sheet {name}"), text: String::new(), note: Some("not read".into()) }
}

fn pick_sheets(names: &[String], selection: &Selection) -> Result<Vec<usize>, ReadError> {
    match &selection.sheet {
        None => Ok((0..names.len()).collect()),
        Some(wanted) => {
            let wanted = wanted.trim();
            if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(wanted)) {
                return Ok(vec![i]);
            }
            if let Ok(n) = wanted.parse::<usize>()
                && (1..=names.len()).contains(&n)
            {
                return Ok(vec![n - 1]);
            }
            Err(ReadError::Selection(format!("there is no sheet {wanted:?}; the sheets are {}", names.join(", "))))
        }
    }
}

/// The text of a sheet streamed row by row: each row's line is written when
/// the next row starts (trailing empty cells left off, so lines need not know
/// the last column), the column header prepended at the end.
struct Lines {
    text: String,
    start_col: u32,
    limit: Option<((u32, u32), (u32, u32))>,
    row: Option<u32>,
    cells: Vec<String>,
    count: usize,
    first_row: Option<u32>,
    last_row: u32,
    last_col: u32,
    /// A formula cell came without a value (the file was never recalculated).
    empty_formulas: bool,
    /// A cell came left of the declared first column.
    left_of_start: bool,
}

impl Lines {
    fn new(start_col: u32, limit: Option<((u32, u32), (u32, u32))>) -> Lines {
        let start_col = limit.map_or(start_col, |((_, c0), _)| c0.max(start_col));
        Lines { text: String::new(), start_col, limit, row: None, cells: Vec::new(), count: 0, first_row: None, last_row: 0, last_col: 0, empty_formulas: false, left_of_start: false }
    }

    fn put(&mut self, row: u32, col: u32, value: &Data) {
        if matches!(value, Data::Empty) {
            self.empty_formulas = true;
            return;
        }
        if col < self.start_col && self.limit.is_none() {
            self.left_of_start = true;
            return;
        }
        if col < self.start_col || self.limit.is_some_and(|((r0, c0), (r1, c1))| !(row >= r0 && row <= r1 && col >= c0 && col <= c1)) {
            return;
        }
        if self.row != Some(row) {
            self.flush();
            self.row = Some(row);
        }
        let at = (col - self.start_col) as usize;
        if self.cells.len() <= at {
            self.cells.resize(at + 1, String::new());
        }
        self.cells[at] = cell_text(value);
        self.count += 1;
        self.first_row.get_or_insert(row);
        self.last_row = self.last_row.max(row);
        self.last_col = self.last_col.max(col);
    }

    fn flush(&mut self) {
        if let Some(row) = self.row.take() {
            self.text.push_str(&format!("{} | {}\n", row + 1, self.cells.join(" | ")));
            self.cells.clear();
        }
    }

    fn finish(mut self) -> Grid {
        self.flush();
        Grid::from_lines(self)
    }
}

fn cell_text(value: &Data) -> String {
    let text = match value {
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        Data::DateTime(dt) => dt.as_datetime().map(|d| d.to_string()).unwrap_or_else(|| value.to_string()),
        _ => value.to_string(),
    };
    text.replace(['\n', '|'], " ")
}

/// Cells of a sheet kept as they come (row-major), within a range.
#[derive(Default)]
struct Grid {
    /// A streamed sheet's finished lines (no header yet), instead of `rows`.
    streamed: Option<(String, u32)>,
    rows: std::collections::BTreeMap<u32, Vec<(u32, String)>>,
    count: usize,
    first_row: Option<u32>,
    last_row: u32,
    first_col: Option<u32>,
    last_col: u32,
}

impl Grid {
    fn from_lines(lines: Lines) -> Grid {
        Grid {
            first_row: lines.first_row,
            last_row: lines.last_row,
            first_col: lines.first_row.map(|_| lines.start_col),
            last_col: lines.last_col,
            count: lines.count,
            streamed: Some((lines.text, lines.start_col)),
            ..Grid::default()
        }
    }

    fn put(&mut self, row: u32, col: u32, value: Data, limit: Option<((u32, u32), (u32, u32))>) {
        if matches!(value, Data::Empty) {
            return;
        }
        if let Some(((r0, c0), (r1, c1))) = limit
            && !(row >= r0 && row <= r1 && col >= c0 && col <= c1)
        {
            return;
        }
        self.rows.entry(row).or_default().push((col, cell_text(&value)));
        self.count += 1;
        self.first_row = Some(self.first_row.map_or(row, |r| r.min(row)));
        self.last_row = self.last_row.max(row);
        self.first_col = Some(self.first_col.map_or(col, |c| c.min(col)));
        self.last_col = self.last_col.max(col);
    }

    fn part(&self, number: u32, name: &str) -> Part {
        let (Some(r0), Some(c0)) = (self.first_row, self.first_col) else {
            return Part { number, label: format!("sheet {name}"), text: String::new(), note: Some("empty".into()) };
        };
        let range = format!("{}{}:{}{}", column_name(c0), r0 + 1, column_name(self.last_col), self.last_row + 1);
        let mut text = String::new();
        // A header line that names the columns, so "C" means something.
        let columns: Vec<String> = (c0..=self.last_col).map(column_name).collect();
        text.push_str(&format!("row | {}\n", columns.join(" | ")));
        if let Some((lines, _)) = &self.streamed {
            text.push_str(lines);
            return Part { number, label: format!("sheet {name} ({range})"), text: text.trim_end().to_owned(), note: None };
        }
        for (row, cells) in &self.rows {
            let mut line: Vec<String> = vec![String::new(); (self.last_col - c0 + 1) as usize];
            // (cells may arrive out of column order: a formula added after the values)
            for (col, value) in cells {
                line[(col - c0) as usize] = value.clone();
            }
            text.push_str(&format!("{} | {}\n", row + 1, line.join(" | ")));
        }
        Part { number, label: format!("sheet {name} ({range})"), text: text.trim_end().to_owned(), note: None }
    }
}

/// 0 → A, 25 → Z, 26 → AA.
pub fn column_name(mut col: u32) -> String {
    let mut name = Vec::new();
    loop {
        name.push(b'A' + (col % 26) as u8);
        if col < 26 {
            break;
        }
        col = col / 26 - 1;
    }
    name.reverse();
    String::from_utf8(name).expect("ASCII")
}

/// "B3" → (row 2, col 1), zero-based.
pub fn parse_cell(cell: &str) -> Option<(u32, u32)> {
    let cell = cell.trim().trim_start_matches('$').replace('$', "");
    let letters: String = cell.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    let digits = &cell[letters.len()..];
    if letters.is_empty() || letters.len() > 3 || digits.is_empty() {
        return None;
    }
    let col = letters.to_ascii_uppercase().bytes().fold(0u32, |acc, b| acc * 26 + (b - b'A' + 1) as u32) - 1;
    let row: u32 = digits.parse().ok()?;
    (row >= 1).then(|| (row - 1, col))
}

/// A cell as (row, column), from 0.
type Cell = (u32, u32);

/// "A1:D20" → ((0,0),(19,3)); one cell is a range of one.
fn parse_cells(spec: &str) -> Result<(Cell, Cell), ReadError> {
    let bad = || ReadError::Selection(format!("{spec:?} is not a cell range like A1:D20"));
    let (a, b) = spec.split_once(':').unwrap_or((spec, spec));
    let (a, b) = (parse_cell(a).ok_or_else(bad)?, parse_cell(b).ok_or_else(bad)?);
    Ok(((a.0.min(b.0), a.1.min(b.1)), (a.0.max(b.0), a.1.max(b.1))))
}

fn csv(path: &Path, name: &Path, shown: &str, selection: &Selection) -> Result<Part, ReadError> {
    let text = text_file(path, shown)?;
    let tab = name.extension().is_some_and(|e| e.eq_ignore_ascii_case("tsv"));
    let limit = selection.cells.as_deref().map(parse_cells).transpose()?;
    let mut grid = Grid::default();
    for (row, record) in csv_records(&text, if tab { '\t' } else { ',' }).into_iter().enumerate() {
        for (col, field) in record.into_iter().enumerate() {
            let value = match field.trim().parse::<f64>() {
                Ok(n) => Data::Float(n),
                Err(_) if field.is_empty() => Data::Empty,
                Err(_) => Data::String(field),
            };
            grid.put(row as u32, col as u32, value, limit);
        }
    }
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(grid.part(1, &name))
}

/// RFC 4180 records: quoted fields with doubled quotes and line breaks.
pub fn csv_records(text: &str, separator: char) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.trim_start_matches('\u{feff}').chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' if quoted => quoted = false,
            '"' if field.is_empty() => quoted = true,
            c if c == separator && !quoted => record.push(std::mem::take(&mut field)),
            '\r' if !quoted => {}
            '\n' if !quoted => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            c => field.push(c),
        }
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    records
}

fn text_file(path: &Path, shown: &str) -> Result<String, ReadError> {
    let bytes = fs::read(path).map_err(|e| ReadError::Io(format!("{shown}: {e}")))?;
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(ReadError::Unsupported(shown.to_owned()));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Markdown and text by heading ("# " lines), or in pieces of about 4,000 characters.
fn sections(text: &str) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    let mut current = String::new();
    let mut heading: Option<String> = None;
    let close = |current: &mut String, heading: &Option<String>, parts: &mut Vec<Part>| {
        if current.trim().is_empty() {
            current.clear();
            return;
        }
        let number = parts.len() as u32 + 1;
        let label = match heading {
            Some(h) => format!("section {number}: {}", cut_chars(h, 60)),
            None => format!("section {number}"),
        };
        parts.push(Part { number, label, text: current.trim().to_owned(), note: None });
        current.clear();
    };
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        let is_heading = !in_code && (line.starts_with("# ") || line.starts_with("## "));
        if is_heading || current.len() > 4_000 && line.trim().is_empty() {
            close(&mut current, &heading, &mut parts);
            if is_heading {
                heading = Some(line.trim_start_matches('#').trim().to_owned());
            }
        }
        current.push_str(line);
        current.push('\n');
    }
    close(&mut current, &heading, &mut parts);
    parts
}

/// "1-3, 7" → [1, 2, 3, 7], within 1..=total.
pub fn parse_ranges(spec: &str, total: u32) -> Result<Vec<u32>, ReadError> {
    let bad = |why: String| ReadError::Selection(why);
    let mut out = Vec::new();
    for piece in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = piece.split_once('-').unwrap_or((piece, piece));
        let a: u32 = a.trim().parse().map_err(|_| bad(format!("{piece:?} is not a page number or range like 2-5")))?;
        let b: u32 = if b.trim().is_empty() { total } else { b.trim().parse().map_err(|_| bad(format!("{piece:?} is not a page number or range like 2-5")))? };
        if a == 0 || a > b {
            return Err(bad(format!("{piece:?} is not a range from a lower to a higher number")));
        }
        if a > total {
            return Err(bad(format!("it has {total} in all; {a} is past the end")));
        }
        out.extend(a..=b.min(total));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn select(kind: Kind, parts: Vec<Part>, selection: &Selection) -> Result<Vec<Part>, ReadError> {
    if kind.is_sheet() {
        return Ok(parts.into_iter().filter(|p| p.note.as_deref() != Some("not read")).collect());
    }
    let Some(spec) = &selection.pages else { return Ok(parts) };
    let wanted = parse_ranges(spec, parts.len() as u32).map_err(|e| match e {
        ReadError::Selection(why) => ReadError::Selection(format!("{} ({}s): {why}", kind.name(), kind.unit())),
        other => other,
    })?;
    Ok(parts.into_iter().filter(|p| wanted.contains(&p.number)).collect())
}

fn cut_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max { text.to_owned() } else { format!("{}…", text.chars().take(max - 1).collect::<String>()) }
}

impl Document {
    /// The document as text for a model or a person, at most `max_chars`
    /// characters of its parts; what did not fit is said at the end with how
    /// to read on.
    pub fn render(&self, max_chars: usize) -> String {
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| self.path.display().to_string());
        // What the parts are: pages where the file marks them, else the kind's unit.
        let unit = self.parts.first().and_then(|p| p.label.split(' ').next()).filter(|u| ["page", "slide", "sheet", "chapter", "section"].contains(u)).unwrap_or(self.kind.unit());
        let plural = if self.total_parts == 1 { unit.to_owned() } else { format!("{unit}s") };
        let mut head = format!("{name} — {}, {} {plural}", self.kind.name(), self.total_parts);
        if let Some(title) = &self.title {
            head.push_str(&format!(", titled \"{title}\""));
        }
        if self.parts.len() as u32 != self.total_parts {
            let numbers: Vec<u32> = self.parts.iter().map(|p| p.number).collect();
            head.push_str(&format!(" (showing {})", describe_numbers(unit, &numbers)));
        }
        let mut out = head;
        out.push('\n');
        for note in &self.notes {
            out.push_str(&format!("Note: {note}\n"));
        }
        let mut used = out.chars().count();
        let mut left: Vec<&Part> = Vec::new();
        let mut cut_in: Option<(u32, usize)> = None;
        for part in &self.parts {
            if !left.is_empty() || cut_in.is_some() {
                left.push(part);
                continue;
            }
            let header = match &part.note {
                Some(note) if part.text.is_empty() => format!("--- {} ({note}) ---\n", part.label),
                Some(note) => format!("--- {} ({note}) ---\n", part.label),
                None => format!("--- {} ---\n", part.label),
            };
            let body_chars = part.text.chars().count();
            if used + header.len() + body_chars < max_chars {
                out.push_str(&header);
                if !part.text.is_empty() {
                    out.push_str(&part.text);
                    out.push('\n');
                }
                used += header.chars().count() + body_chars + 1;
            } else {
                let room = max_chars.saturating_sub(used + header.len() + 1);
                if room >= 200 {
                    out.push_str(&header);
                    out.push_str(&part.text.chars().take(room).collect::<String>());
                    out.push('\n');
                    cut_in = Some((part.number, body_chars - room));
                } else {
                    left.push(part);
                }
            }
        }
        if cut_in.is_some() || !left.is_empty() {
            let more: usize = left.iter().map(|p| p.text.chars().count()).sum::<usize>() + cut_in.map_or(0, |(_, n)| n);
            let mut numbers: Vec<u32> = cut_in.iter().map(|(n, _)| *n).collect();
            numbers.extend(left.iter().map(|p| p.number));
            out.push_str(&format!(
                "[cut: {more} more characters, of {}, not shown (the cap is {max_chars}); read them by asking for {}]\n",
                describe_numbers(unit, &numbers),
                if self.kind.is_sheet() { "one sheet and a cell range".to_owned() } else { format!("{unit}s {}", compact_ranges(&numbers)) }
            ));
        }
        out
    }
}

fn describe_numbers(unit: &str, numbers: &[u32]) -> String {
    match numbers {
        [one] => format!("{unit} {one}"),
        _ => format!("{unit}s {}", compact_ranges(numbers)),
    }
}

/// [1,2,3,7] → "1-3, 7".
pub fn compact_ranges(numbers: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < numbers.len() {
        let start = numbers[i];
        let mut end = start;
        while i + 1 < numbers.len() && numbers[i + 1] == end + 1 {
            i += 1;
            end = numbers[i];
        }
        out.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cells_and_columns() {
        assert_eq!(parse_ranges("1-3, 7", 10).unwrap(), vec![1, 2, 3, 7]);
        assert_eq!(parse_ranges("9-", 10).unwrap(), vec![9, 10]);
        assert!(parse_ranges("0", 10).is_err());
        assert!(parse_ranges("12", 10).is_err());
        assert!(parse_ranges("x", 10).is_err());
        assert_eq!(compact_ranges(&[1, 2, 3, 7, 9, 10]), "1-3, 7, 9-10");
        assert_eq!(column_name(0), "A");
        assert_eq!(column_name(25), "Z");
        assert_eq!(column_name(26), "AA");
        assert_eq!(column_name(701), "ZZ");
        assert_eq!(parse_cell("B3"), Some((2, 1)));
        assert_eq!(parse_cell("$AA$10"), Some((9, 26)));
        assert_eq!(parse_cells("D20:A1").unwrap(), ((0, 0), (19, 3)));
        assert!(parse_cells("A0").is_err());
    }

    #[test]
    fn csv_quotes_and_the_render_cap_says_what_it_cut() {
        assert_eq!(csv_records("a,\"b,c\",\"say \"\"hi\"\"\"\n1,2,3\n", ','), vec![vec!["a", "b,c", "say \"hi\""], vec!["1", "2", "3"]]);
        let parts: Vec<Part> = (1..=5).map(|n| Part { number: n, label: format!("page {n}"), text: "x".repeat(1000), note: None }).collect();
        let doc = Document { path: "/tmp/r.pdf".into(), kind: Kind::Pdf, title: None, total_parts: 5, parts, notes: vec![] };
        let text = doc.render(2600);
        assert!(text.contains("--- page 1 ---") && text.contains("--- page 2 ---"));
        assert!(text.contains("[cut:") && text.contains("pages 3-5"), "{text}");
        assert!(text.chars().count() < 2900);
    }
}
