//! The text of office XML: WordprocessingML (DOCX), DrawingML (PPTX),
//! OpenDocument (ODT, ODP) and XHTML. One walker over quick-xml's events,
//! keyed on local names, turns a part into blocks: paragraphs, headings,
//! table rows and page breaks. Text deleted in tracked changes, field codes
//! and an annotation's own text are skipped.

use quick_xml::Reader;
use quick_xml::events::{BytesEnd, BytesRef, BytesStart, Event};

/// A piece of a document's body.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    Paragraph(String),
    /// A heading and its level (1 is a chapter).
    Heading(u8, String),
    /// One table row, its cells' text.
    Row(Vec<String>),
    /// Where a new page starts (an explicit break, or where the writing app last laid one out).
    PageBreak,
    /// A slide or drawing page starts (ODP's `draw:page`).
    Slide,
}

/// Which XML family: it decides where text lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// OOXML: text only inside `w:t`/`a:t`; paragraphs `w:p`/`a:p`.
    OfficeOpen,
    /// ODF: text directly inside `text:p`/`text:h` and their spans.
    OpenDocument,
}

fn attr(e: &BytesStart<'_>, local: &[u8]) -> Option<String> {
    e.attributes().flatten().find(|a| a.key.local_name().as_ref() == local).map(|a| {
        let raw = String::from_utf8_lossy(&a.value).into_owned();
        quick_xml::escape::unescape(&raw).map(|v| v.into_owned()).unwrap_or(raw)
    })
}

/// The blocks of one XML part. Malformed XML is an error with its position.
pub fn blocks(xml: &str, dialect: Dialect) -> Result<Vec<Block>, String> {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().trim_text(false);
    let mut walker = Walker::new(dialect);
    loop {
        let event = reader.read_event().map_err(|e| format!("malformed XML at byte {}: {e}", reader.buffer_position()))?;
        if let Event::Eof = event {
            break;
        }
        walker.event(&event)?;
    }
    walker.flush();
    Ok(walker.out)
}

/// The walk over one part's events: the blocks so far, and where in the
/// paragraphs and tables the walk is.
struct Walker {
    dialect: Dialect,
    out: Vec<Block>,
    /// The paragraph being read and its heading level.
    para: Option<(String, u8)>,
    /// How deep inside OOXML text elements (`w:t`, `a:t`) the walk is.
    in_text: u32,
    /// Tables nest; the innermost row and cell are read, an inner table's text joins its cell.
    rows: Vec<Vec<String>>,
    cell: Vec<String>,
    /// How deep inside an element whose text is not the body (0: not in one).
    skip: u32,
}

impl Walker {
    /// A walk at the start of a part.
    fn new(dialect: Dialect) -> Self {
        Self { dialect, out: Vec::new(), para: None, in_text: 0, rows: Vec::new(), cell: Vec::new(), skip: 0 }
    }

    /// Takes one event (end of file excepted).
    fn event(&mut self, event: &Event<'_>) -> Result<(), String> {
        if self.skip > 0 {
            // Inside an element whose text is not the body: its depth only.
            match event {
                Event::Start(_) => self.skip += 1,
                Event::End(_) => self.skip -= 1,
                _ => {}
            }
            return Ok(());
        }
        match event {
            Event::Start(e) => self.start(e),
            Event::Empty(e) => self.empty(e),
            Event::End(e) => self.end(e),
            Event::Text(t) if self.reading() => {
                let text = t.decode().map_err(|e| format!("text that is not valid: {e}"))?;
                self.push_text(&text);
            }
            Event::CData(t) if self.para.is_some() => self.push_text(&String::from_utf8_lossy(t.as_ref())),
            Event::GeneralRef(r) if self.reading() => self.push_text(&resolve_reference(r)),
            _ => {}
        }
        Ok(())
    }

    /// Whether text met now is the body's: inside `w:t`/`a:t` (OOXML) or a paragraph (ODF).
    fn reading(&self) -> bool {
        match self.dialect {
            Dialect::OfficeOpen => self.in_text > 0,
            Dialect::OpenDocument => self.para.is_some(),
        }
    }

    /// An element opens: a paragraph, a text run, a table row or cell, a slide, or one to skip.
    fn start(&mut self, e: &BytesStart<'_>) {
        let name = e.local_name();
        match name.as_ref() {
            // Deleted text in tracked changes, field codes, and an ODF annotation's own text are not the body.
            b"delText" | b"instrText" | b"annotation" | b"tracked-changes" | b"script" | b"style" => self.skip = 1,
            b"p" | b"h" => {
                let level = match name.as_ref() {
                    b"h" => attr(e, b"outline-level").and_then(|l| l.parse().ok()).unwrap_or(1),
                    _ => 0,
                };
                self.para = Some((String::new(), level));
            }
            b"t" if self.dialect == Dialect::OfficeOpen => self.in_text += 1,
            b"span" | b"a" if self.dialect == Dialect::OpenDocument => {}
            b"tr" | b"table-row" => self.rows.push(Vec::new()),
            b"tc" | b"table-cell" => self.cell.push(String::new()),
            b"page" if self.dialect == Dialect::OpenDocument => self.out.push(Block::Slide),
            _ => {}
        }
    }

    /// An empty element: tabs, line and page breaks, spaces, a paragraph's style, an empty paragraph.
    fn empty(&mut self, e: &BytesStart<'_>) {
        let name = e.local_name();
        match name.as_ref() {
            b"tab" => self.push_text("\t"),
            b"br" | b"line-break" | b"cr" if attr(e, b"type").as_deref() == Some("page") => self.page_break(),
            b"br" | b"line-break" | b"cr" => self.push_text("\n"),
            b"s" if self.dialect == Dialect::OpenDocument => {
                let n = attr(e, b"c").and_then(|c| c.parse::<usize>().ok()).unwrap_or(1).min(64);
                self.push_text(&" ".repeat(n));
            }
            b"lastRenderedPageBreak" | b"soft-page-break" => self.rendered_page_break(),
            b"pStyle" if self.dialect == Dialect::OfficeOpen => {
                let style = attr(e, b"val").unwrap_or_default().to_ascii_lowercase();
                if let Some((_, level)) = self.para.as_mut() {
                    *level = heading_level(&style);
                }
            }
            b"pageBreakBefore" if attr(e, b"val").is_none_or(|v| v != "0" && v != "false") => self.out.push(Block::PageBreak),
            b"page" if self.dialect == Dialect::OpenDocument => self.out.push(Block::Slide),
            b"p" | b"h" => self.out.push(Block::Paragraph(String::new())),
            _ => {}
        }
    }

    /// An explicit page break: the paragraph goes on, on the next page.
    fn page_break(&mut self) {
        let level = self.para.as_ref().map(|(_, l)| *l);
        if self.para.as_ref().is_some_and(|(t, _)| !t.trim().is_empty()) {
            self.flush();
        }
        self.out.push(Block::PageBreak);
        if let Some(level) = level {
            self.para = Some((String::new(), level));
        }
    }

    /// Where the writing app last laid out a new page.
    fn rendered_page_break(&mut self) {
        // Mid-paragraph: the page starts with the paragraph's rest, the break goes before it.
        if let Some((text, level)) = self.para.take_if(|(t, _)| !t.trim().is_empty()) {
            self.emit(text, level);
            self.out.push(Block::PageBreak);
            self.para = Some((String::new(), level));
        } else {
            self.out.push(Block::PageBreak);
        }
    }

    /// An element closes: a paragraph is emitted, a cell joins its row, a row its table (or the outer cell).
    fn end(&mut self, e: &BytesEnd<'_>) {
        let name = e.local_name();
        match name.as_ref() {
            b"p" | b"h" => self.flush(),
            b"t" if self.dialect == Dialect::OfficeOpen => self.in_text = self.in_text.saturating_sub(1),
            b"tc" | b"table-cell" => {
                if let Some(text) = self.cell.pop() {
                    match self.rows.last_mut() {
                        Some(row) => row.push(text.trim().to_owned()),
                        None => self.out.push(Block::Paragraph(text)),
                    }
                }
            }
            b"tr" | b"table-row" => {
                if let Some(row) = self.rows.pop() {
                    match self.cell.last_mut() {
                        // A row of a table inside a cell joins that cell.
                        Some(outer) => append(outer, &row.join(" | ")),
                        None if row.iter().any(|c| !c.is_empty()) => self.out.push(Block::Row(row)),
                        None => {}
                    }
                }
            }
            _ => {}
        }
    }

    /// Text joins the paragraph being read, if any.
    fn push_text(&mut self, text: &str) {
        if let Some((buffer, _)) = self.para.as_mut() {
            buffer.push_str(text);
        }
    }

    /// A finished paragraph goes to the cell it is in, or the body.
    fn emit(&mut self, text: String, level: u8) {
        if let Some(current) = self.cell.last_mut() {
            append(current, &text);
            return;
        }
        let text = text.trim_end().to_owned();
        if level > 0 && !text.trim().is_empty() {
            self.out.push(Block::Heading(level, text.trim().to_owned()));
        } else {
            self.out.push(Block::Paragraph(text));
        }
    }

    /// Emits the paragraph being read, if any.
    fn flush(&mut self) {
        if let Some((text, level)) = self.para.take() {
            self.emit(text, level);
        }
    }
}

/// A character or entity reference as text (the XML entities and `&nbsp;`; others are dropped).
pub(crate) fn resolve_reference(reference: &BytesRef<'_>) -> String {
    match reference.resolve_char_ref() {
        Ok(Some(c)) => c.to_string(),
        _ => match reference.decode().unwrap_or_default().as_ref() {
            "amp" => "&".into(),
            "lt" => "<".into(),
            "gt" => ">".into(),
            "quot" => "\"".into(),
            "apos" => "'".into(),
            "nbsp" => "\u{a0}".into(),
            _ => String::new(),
        },
    }
}

fn heading_level(style: &str) -> u8 {
    if style == "title" {
        return 1;
    }
    style.strip_prefix("heading").or_else(|| style.strip_prefix("berschrift")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

fn append(to: &mut String, text: &str) {
    if text.trim().is_empty() {
        return;
    }
    if !to.is_empty() {
        to.push(' ');
    }
    to.push_str(text.trim());
}

/// Blocks as plain text: paragraphs on their lines, headings marked as in
/// Markdown, table rows as `a | b | c`.
pub fn to_text(blocks: &[Block]) -> String {
    let mut text = String::new();
    for block in blocks {
        match block {
            Block::Paragraph(p) => {
                text.push_str(p);
                text.push('\n');
            }
            Block::Heading(level, h) => {
                text.push_str(&"#".repeat((*level).clamp(1, 6) as usize));
                text.push(' ');
                text.push_str(h);
                text.push('\n');
            }
            Block::Row(cells) => {
                text.push_str(&cells.join(" | "));
                text.push('\n');
            }
            Block::PageBreak | Block::Slide => {}
        }
    }
    tidy(&text)
}

/// Lines without trailing blanks, runs of empty lines made one, the whole trimmed.
pub fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wordprocessing_paragraphs_headings_tables_and_breaks() {
        let xml = r#"<w:document xmlns:w="w"><w:body>
            <w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Budget &amp; plan</w:t></w:r></w:p>
            <w:p><w:r><w:t xml:space="preserve">Spend </w:t></w:r><w:r><w:delText>not this</w:delText><w:t>less</w:t><w:tab/><w:t>now</w:t></w:r></w:p>
            <w:tbl><w:tr><w:tc><w:p><w:r><w:t>Item</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Cost</w:t></w:r></w:p></w:tc></w:tr>
            <w:tr><w:tc><w:p><w:r><w:t>Desk</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>120</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
            <w:p><w:r><w:br w:type="page"/><w:t>Second page</w:t></w:r></w:p>
        </w:body></w:document>"#;
        let blocks = blocks(xml, Dialect::OfficeOpen).unwrap();
        assert_eq!(blocks[0], Block::Heading(1, "Budget & plan".into()));
        assert_eq!(blocks[1], Block::Paragraph("Spend less\tnow".into()));
        assert_eq!(blocks[2], Block::Row(vec!["Item".into(), "Cost".into()]));
        assert_eq!(blocks[3], Block::Row(vec!["Desk".into(), "120".into()]));
        assert!(blocks.contains(&Block::PageBreak));
        assert_eq!(blocks.last(), Some(&Block::Paragraph("Second page".into())));
    }

    #[test]
    fn opendocument_text_spaces_and_soft_page_breaks() {
        let xml = r#"<office:document-content xmlns:text="t" xmlns:table="tb"><office:body><office:text>
            <text:h text:outline-level="2">Intro</text:h>
            <text:p>One<text:s text:c="2"/>two <text:span>three</text:span></text:p>
            <text:soft-page-break/>
            <text:p>Next page<office:annotation><text:p>a comment</text:p></office:annotation></text:p>
        </office:text></office:body></office:document-content>"#;
        let blocks = blocks(xml, Dialect::OpenDocument).unwrap();
        assert_eq!(blocks[0], Block::Heading(2, "Intro".into()));
        assert_eq!(blocks[1], Block::Paragraph("One  two three".into()));
        assert_eq!(blocks[2], Block::PageBreak);
        assert_eq!(blocks[3], Block::Paragraph("Next page".into()));
    }

    #[test]
    fn malformed_xml_is_an_error_not_a_panic() {
        assert!(blocks("<w:p><w:t>open", Dialect::OfficeOpen).is_ok_and(|b| b.is_empty() || matches!(b[0], Block::Paragraph(_))));
        assert!(blocks("<w:p><w:t>x</w:p></w:t>", Dialect::OfficeOpen).is_err());
    }
}
