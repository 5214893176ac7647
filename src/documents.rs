//! Documents (issue 44): reading the office files, PDFs, e-books, web pages
//! and tables people hand an assistant, writing DOCX, XLSX, Markdown and CSV,
//! and exporting an answer.
//!
//! - `read`: a file becomes `Document` — its parts (PDF pages, slides,
//!   sheets as tables with their cell ranges, sections), each labelled so an
//!   answer can cite "page 3". Size, time and decompression are capped, so a
//!   corrupt, encrypted or huge file is a clear error, never a hang.
//! - `xml`: the text of the XML inside DOCX, ODT, PPTX, ODP and EPUB.
//! - `write`: new DOCX, XLSX, Markdown and CSV files, edits of DOCX (text
//!   replaced in place, formatting kept) and XLSX (cells set), and an
//!   answer exported as DOCX or, through LibreOffice, PDF.
//!
//! What a document says is data, never instructions (`Origin::Document`).

pub mod folders;
pub mod memory;
pub mod read;
pub mod write;
pub mod xml;

pub use read::{Document, Kind, Part, ReadError, Selection, read, read_with_deadline};
