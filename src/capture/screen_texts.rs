//! The `screen_texts` stream (issue 57): what the focused window showed,
//! one row per distinct text, with the activity session it was seen in and
//! how it was read (the accessibility tree, or OCR with its confidence).
//! Plain functions over a connection like the other streams' queries; only
//! the store worker runs the writing ones (`screen_write` is the screen
//! worker's command). Rows are searched through FTS5 and embedded by the
//! triggers every stream has (migration 0020).

use rusqlite::{Connection, params};

/// How a window's text was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The application's own accessibility tree (AT-SPI): exact text.
    Accessibility,
    /// OCR of the window's pixels.
    Ocr,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Accessibility => "accessibility",
            Method::Ocr => "ocr",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "accessibility" => Some(Method::Accessibility),
            "ocr" => Some(Method::Ocr),
            _ => None,
        }
    }
}

/// One window's text as it was on screen.
#[derive(Clone, Debug, PartialEq)]
pub struct ScreenRow {
    pub screen_id: i64,
    pub session_id: Option<i64>,
    pub seen_at_millis: i64,
    pub app: String,
    pub title: String,
    pub url: Option<String>,
    pub method: Method,
    /// 0..100 (OCR's mean word confidence; the tree's text is 100).
    pub confidence: u8,
    pub text: String,
}

const COLUMNS: &str = "screen_id, session_id, seen_at_ms, app, title, url, method, confidence, text";

pub fn insert(conn: &Connection, row: &ScreenRow) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO screen_texts (screen_id, session_id, seen_at_ms, app, title, url, method, confidence, text)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (screen_id) DO NOTHING",
    )?
    .execute(params![row.screen_id, row.session_id, row.seen_at_millis, row.app, row.title, row.url, row.method.as_str(), row.confidence, row.text])?;
    Ok(())
}

fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ScreenRow> {
    let method: String = row.get(6)?;
    Ok(ScreenRow {
        screen_id: row.get(0)?,
        session_id: row.get(1)?,
        seen_at_millis: row.get(2)?,
        app: row.get(3)?,
        title: row.get(4)?,
        url: row.get(5)?,
        method: Method::parse(&method).unwrap_or(Method::Ocr),
        confidence: row.get::<_, i64>(7)?.clamp(0, 100) as u8,
        text: row.get(8)?,
    })
}

/// Rows seen in `[since, until)`, newest first, at most `limit`.
pub fn seen_between(conn: &Connection, since_millis: i64, until_millis: i64, limit: usize) -> rusqlite::Result<Vec<ScreenRow>> {
    let sql = format!("SELECT {COLUMNS} FROM screen_texts WHERE seen_at_ms >= ?1 AND seen_at_ms < ?2 ORDER BY seen_at_ms DESC LIMIT ?3");
    let mut stmt = conn.prepare_cached(&sql)?;
    stmt.query_map(params![since_millis, until_millis, limit as i64], from_row)?.collect()
}

/// What one window session showed, in the order it was seen.
pub fn of_session(conn: &Connection, session_id: i64) -> rusqlite::Result<Vec<ScreenRow>> {
    let sql = format!("SELECT {COLUMNS} FROM screen_texts WHERE session_id = ?1 ORDER BY seen_at_ms");
    let mut stmt = conn.prepare_cached(&sql)?;
    stmt.query_map(params![session_id], from_row)?.collect()
}

/// Rows whose text matches an FTS5 query, best first.
pub fn search(conn: &Connection, query: &str, limit: usize) -> rusqlite::Result<Vec<ScreenRow>> {
    let columns = COLUMNS.split(", ").map(|c| format!("s.{c}")).collect::<Vec<_>>().join(", ");
    let sql = format!("SELECT {columns} FROM screen_fts f JOIN screen_texts s ON s.screen_id = f.rowid WHERE screen_fts MATCH ?1 ORDER BY bm25(screen_fts) LIMIT ?2");
    let mut stmt = conn.prepare_cached(&sql)?;
    stmt.query_map(params![crate::store::fts_phrase(query), limit as i64], from_row)?.collect()
}

/// Deletes what was seen in `[since, until)` (a range deletion); FTS entries,
/// chunks and vectors go by the triggers.
pub fn delete_range(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<usize> {
    conn.execute("DELETE FROM screen_texts WHERE seen_at_ms >= ?1 AND seen_at_ms < ?2", params![since_millis, until_millis])
}

/// Retention: what was seen before `cutoff`.
pub fn delete_seen_before(conn: &Connection, cutoff_millis: i64) -> rusqlite::Result<usize> {
    conn.execute("DELETE FROM screen_texts WHERE seen_at_ms < ?1", params![cutoff_millis])
}

/// A window's text for the next batch; dropped when a deletion in this run covered its time.
pub fn screen_write(row: ScreenRow) -> crate::store::StoreCommand {
    crate::store::StoreCommand::write_during("screen text", (row.seen_at_millis, row.seen_at_millis), move |tx| insert(tx, &row))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, at: i64, text: &str) -> ScreenRow {
        ScreenRow {
            screen_id: id,
            session_id: Some(7),
            seen_at_millis: at,
            app: "XTerm".into(),
            title: "build".into(),
            url: None,
            method: Method::Ocr,
            confidence: 91,
            text: text.into(),
        }
    }

    #[test]
    fn screen_text_is_searched_embedded_and_deleted_by_range_and_retention() {
        let conn = crate::store::test_db();
        insert(&conn, &row(1, 1_000, "error[E0308]: mismatched types in ledger.rs")).unwrap();
        insert(&conn, &row(2, 2_000, "Invoice 4471 approved by Dana")).unwrap();
        insert(&conn, &row(3, 3_000, "Quarterly plan draft")).unwrap();
        assert_eq!(search(&conn, "mismatched", 5).unwrap()[0].screen_id, 1);
        assert_eq!(of_session(&conn, 7).unwrap().len(), 3);
        let queued: i64 = conn.query_row("SELECT count(*) FROM embed_queue WHERE source = 'screen'", [], |r| r.get(0)).unwrap();
        assert_eq!(queued, 3, "every row waits to be embedded");
        assert_eq!(delete_range(&conn, 1_500, 2_500).unwrap(), 1);
        assert!(search(&conn, "invoice", 5).unwrap().is_empty(), "its search entry went with it");
        let queued: i64 = conn.query_row("SELECT count(*) FROM embed_queue WHERE source = 'screen'", [], |r| r.get(0)).unwrap();
        assert_eq!(queued, 2);
        assert_eq!(delete_seen_before(&conn, 2_000).unwrap(), 1);
        let left: Vec<i64> = seen_between(&conn, 0, i64::MAX, 10).unwrap().into_iter().map(|r| r.screen_id).collect();
        assert_eq!(left, [3]);
        // The chunk table takes the new source.
        conn.execute("INSERT INTO embed_jobs (job_id, state, total_chunks, created_at_ms, updated_at_ms) VALUES (1, 'done', 1, 0, 0)", []).unwrap();
        conn.execute("INSERT INTO memory_chunks (namespace, source, source_id, text, at_ms, job_id) VALUES ('activity', 'screen', 3, 'x', 0, 1)", []).unwrap();
    }
}
