//! The text of office XML: WordprocessingML (DOCX), DrawingML (PPTX),
//! OpenDocument (ODT, ODP) and XHTML. One walker over quick-xml's events,
//! keyed on local names, turns a part into blocks: paragraphs, headings,
//! table rows and page breaks.

use quick_xml::Reader;
use quick_xml::events::Event;

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

fn attr(e: &quick_xml::events::BytesStart<'_>, local: &[u8]) -> Option<String> {
    e.attributes().flatten().find(|a| a.key.local_name().as_ref() == local).map(|a| {
        let raw = String::from_utf8_lossy(&a.value).into_owned();
        quick_xml::escape::unescape(&raw).map(|v| v.into_owned()).unwrap_or(raw)
    })
}

/// The blocks of one XML part. Malformed XML is an error with its position.
pub fn blocks(xml: &str, dialect: Dialect) -> Result<Vec<Block>, String> {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().trim_text(false);
    let mut out: Vec<Block> = Vec::new();
    // The paragraph being read, its heading level, and whether text is read now.
    let mut para: Option<(String, u8)> = None;
    let mut in_text = 0u32;
    // Tables nest; the innermost row and cell are read, an inner table's text joins its cell.
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut cell: Vec<String> = Vec::new();
    let mut skip = 0u32;
    loop {
        let event = reader.read_event().map_err(|e| format!("malformed XML at byte {}: {e}", reader.buffer_position()))?;
        if skip > 0 {
            // Inside an element whose text is not the body: its depth only.
            match event {
                Event::Start(_) => skip += 1,
                Event::End(_) => skip -= 1,
                Event::Eof => break,
                _ => {}
            }
            continue;
        }
        match event {
            Event::Eof => break,
            Event::Start(ref e) => {
                let name = e.local_name();
                match name.as_ref() {
                    // Deleted text in tracked changes, field codes, and an ODF annotation's own text are not the body.
                    b"delText" | b"instrText" | b"annotation" | b"tracked-changes" | b"script" | b"style" => skip = 1,
                    b"p" | b"h" => {
                        let level = match name.as_ref() {
                            b"h" => attr(e, b"outline-level").and_then(|l| l.parse().ok()).unwrap_or(1),
                            _ => 0,
                        };
                        para = Some((String::new(), level));
                    }
                    b"t" if dialect == Dialect::OfficeOpen => in_text += 1,
                    b"span" | b"a" if dialect == Dialect::OpenDocument => {}
                    b"tr" | b"table-row" => rows.push(Vec::new()),
                    b"tc" | b"table-cell" => cell.push(String::new()),
                    b"page" if dialect == Dialect::OpenDocument => out.push(Block::Slide),
                    _ => {}
                }
            }
            Event::Empty(ref e) => {
                let name = e.local_name();
                match name.as_ref() {
                    b"tab" => push_text(&mut para, "\t"),
                    b"br" | b"line-break" | b"cr" => {
                        if attr(e, b"type").as_deref() == Some("page") {
                            // The paragraph goes on, on the next page.
                            let level = para.as_ref().map(|(_, l)| *l);
                            if para.as_ref().is_some_and(|(t, _)| !t.trim().is_empty()) {
                                flush(&mut para, &mut out, &mut rows, &mut cell);
                            }
                            out.push(Block::PageBreak);
                            if let Some(level) = level {
                                para = Some((String::new(), level));
                            }
                        } else {
                            push_text(&mut para, "\n");
                        }
                    }
                    b"s" if dialect == Dialect::OpenDocument => {
                        let n = attr(e, b"c").and_then(|c| c.parse::<usize>().ok()).unwrap_or(1).min(64);
                        push_text(&mut para, &" ".repeat(n));
                    }
                    b"lastRenderedPageBreak" | b"soft-page-break" => {
                        if para.as_ref().is_some_and(|(t, _)| !t.trim().is_empty()) {
                            // Mid-paragraph: the page starts with the paragraph's rest, the break goes before it.
                            let (text, level) = para.take().expect("checked");
                            emit(&mut out, &mut rows, &mut cell, text, level);
                            out.push(Block::PageBreak);
                            para = Some((String::new(), level));
                        } else {
                            out.push(Block::PageBreak);
                        }
                    }
                    b"pStyle" if dialect == Dialect::OfficeOpen => {
                        let style = attr(e, b"val").unwrap_or_default().to_ascii_lowercase();
                        if let Some((_, level)) = para.as_mut() {
                            *level = heading_level(&style);
                        }
                    }
                    b"pageBreakBefore" if attr(e, b"val").is_none_or(|v| v != "0" && v != "false") => out.push(Block::PageBreak),
                    b"page" if dialect == Dialect::OpenDocument => out.push(Block::Slide),
                    b"p" | b"h" => out.push(Block::Paragraph(String::new())),
                    _ => {}
                }
            }
            Event::End(ref e) => {
                let name = e.local_name();
                match name.as_ref() {
                    b"p" | b"h" => {
                        if let Some((text, level)) = para.take() {
                            emit(&mut out, &mut rows, &mut cell, text, level);
                        }
                    }
                    b"t" if dialect == Dialect::OfficeOpen => in_text = in_text.saturating_sub(1),
                    b"tc" | b"table-cell" => {
                        if let Some(text) = cell.pop() {
                            match rows.last_mut() {
                                Some(row) => row.push(text.trim().to_owned()),
                                None => emit_paragraph(&mut out, text),
                            }
                        }
                    }
                    b"tr" | b"table-row" => {
                        if let Some(row) = rows.pop() {
                            match cell.last_mut() {
                                // A row of a table inside a cell joins that cell.
                                Some(outer) => append(outer, &row.join(" | ")),
                                None if row.iter().any(|c| !c.is_empty()) => out.push(Block::Row(row)),
                                None => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
            Event::Text(ref t) => {
                let reading = match dialect {
                    Dialect::OfficeOpen => in_text > 0,
                    Dialect::OpenDocument => para.is_some(),
                };
                if reading {
                    let text = t.decode().map_err(|e| format!("text that is not valid: {e}"))?;
                    push_text(&mut para, &text);
                }
            }
            Event::CData(ref t) if para.is_some() => push_text(&mut para, &String::from_utf8_lossy(t.as_ref())),
            Event::GeneralRef(ref r) => {
                let reading = match dialect {
                    Dialect::OfficeOpen => in_text > 0,
                    Dialect::OpenDocument => para.is_some(),
                };
                if reading {
                    let resolved = match r.resolve_char_ref() {
                        Ok(Some(c)) => c.to_string(),
                        _ => match r.decode().unwrap_or_default().as_ref() {
                            "amp" => "&".into(),
                            "lt" => "<".into(),
                            "gt" => ">".into(),
                            "quot" => "\"".into(),
                            "apos" => "'".into(),
                            "nbsp" => "\u{a0}".into(),
                            _ => String::new(),
                        },
                    };
                    push_text(&mut para, &resolved);
                }
            }
            _ => {}
        }
    }
    flush(&mut para, &mut out, &mut rows, &mut cell);
    Ok(out)
}

fn heading_level(style: &str) -> u8 {
    if style == "title" {
        return 1;
    }
    style.strip_prefix("heading").or_else(|| style.strip_prefix("berschrift")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

fn push_text(para: &mut Option<(String, u8)>, text: &str) {
    if let Some((buffer, _)) = para.as_mut() {
        buffer.push_str(text);
    }
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

/// A finished paragraph goes to the cell it is in, or the body.
fn emit(out: &mut Vec<Block>, _rows: &mut [Vec<String>], cell: &mut [String], text: String, level: u8) {
    if let Some(current) = cell.last_mut() {
        append(current, &text);
        return;
    }
    let text = text.trim_end().to_owned();
    if level > 0 && !text.trim().is_empty() {
        out.push(Block::Heading(level, text.trim().to_owned()));
    } else {
        emit_paragraph(out, text);
    }
}

fn emit_paragraph(out: &mut Vec<Block>, text: String) {
    out.push(Block::Paragraph(text));
}

fn flush(para: &mut Option<(String, u8)>, out: &mut Vec<Block>, rows: &mut [Vec<String>], cell: &mut [String]) {
    if let Some((text, level)) = para.take() {
        emit(out, rows, cell, text, level);
    }
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
