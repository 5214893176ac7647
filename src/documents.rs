//! Documents (issue 44): reading the office files, PDFs, e-books, web pages and
//! tables people hand an assistant, writing DOCX, XLSX, Markdown and CSV, and
//! exporting an answer.
//!
//! - `read`: a file becomes `Document` — its parts (PDF pages, slides, sheets
//!   as tables with their cell ranges, sections), each labelled so an answer
//!   can cite "page 3". Size, time and decompression are capped, so a corrupt,
//!   encrypted or huge file is a clear error, never a hang.
//! - `pictures`: the text of attached pictures and of scanned PDF pages, by
//!   OCR (`crate::ocr`), with the PDF's pictures decoded under bounds.
//! - `xml`: the text of the XML inside DOCX, ODT, PPTX, ODP and EPUB.
//! - `write`: new DOCX, XLSX, Markdown and CSV files, edits of DOCX (text
//!   replaced in place, formatting kept) and XLSX (cells set), and an answer
//!   exported as DOCX or, through LibreOffice, PDF.
//! - `memory`: documents kept searchable in cowork.db, and what is withheld.
//! - `folders`: the `folders` worker, which follows the folders the user named.
//!
//! The tools are elsewhere: `tools::documents` (`read_document`,
//! `write_document`, `edit_document`), `tools::web_search`, and `tools::undo`
//! with `cowork undo` (`commands::documents`). A file the user attaches (the
//! portal's FileChooser on a `file-chooser` thread, or dropped on the window)
//! is read on an `attach-document` thread and, unless `memory::withheld` says
//! otherwise, remembered through the store. A tool that deletes, moves or
//! replaces records its `UndoStep`s with its call (`AgentWrite::Undo`), and the
//! chat offers Undo for five minutes (`AgentEvent::Undoable`).
//!
//! Invariants:
//! - What a document, a search result or an attachment says is data
//!   (`Origin::Document`, `Origin::Web`, an attachment's turn
//!   `Origin::ToolResult`): a sensitive call in a step that holds it asks.
//! - A tool that deletes, moves, replaces or edits a file leaves an `UndoStep`;
//!   nothing the agent changes on disk is gone for good until the user empties
//!   the trash.

pub mod folders;
pub mod memory;
pub mod pictures;
pub mod read;
pub mod write;
pub mod xml;

pub use read::{Document, Kind, Part, ReadError, Selection, read, read_with_deadline};
