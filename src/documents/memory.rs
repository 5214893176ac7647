//! Documents in memory: an attached or agent-read document is stored part
//! by part (`document_parts`), found by keywords (FTS5) and, once the embed
//! worker reaches its parts, by meaning (the `documents` namespace), and
//! cited with its page. Reading the same path again replaces the old copy
//! unless its content (SHA-256) is unchanged; forgetting a document removes
//! its parts, chunks and vectors. `withheld` says why a document is not kept
//! (keeping switched off, the privacy rules on its path, excluded globs).
//! The writes are store commands (`remember_command`, `forget_command`,
//! `forget_at_command`), sent by the chat's attachments, the agent's
//! `read_document` (on a `remember-document` thread) and the folders worker.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::read::{DEADLINE, Document, ReadError, Selection, read_with_deadline, read_with_deadline_as};

/// Why a document is not kept in memory, when it is not: keeping documents
/// is off, capture is paused, a privacy rule covers its path (a title rule
/// matches it, or it names a denied app or domain), or an excluded path.
pub fn withheld(path: &Path, settings: &crate::config::Settings) -> Option<String> {
    if !settings.remember_documents {
        return Some("keeping documents in memory is off (Settings → Memory)".into());
    }
    let shown = path.display().to_string();
    match settings.privacy.compile() {
        Ok(rules) if rules.paused => return Some("capture is paused".into()),
        Ok(rules) if rules.withholds(None, &shown, None) || rules.mentions(&shown) => return Some("your privacy rules cover it".into()),
        Ok(_) => {}
        Err(err) => return Some(format!("the privacy rules do not compile ({err})")),
    }
    excluded(path, &settings.document_exclude)
}

/// The first exclude pattern (a glob over the full path, `~` for home) that covers `path`.
pub fn excluded(path: &Path, patterns: &str) -> Option<String> {
    let home = std::env::var("HOME").unwrap_or_default();
    let shown = path.display().to_string();
    patterns.lines().map(str::trim).filter(|p| !p.is_empty()).find_map(|pattern| {
        let expanded = match pattern.strip_prefix('~') {
            Some(rest) => format!("{}{rest}", home.trim_end_matches('/')),
            None => pattern.to_owned(),
        };
        let glob = expanded.trim_start_matches('/');
        let re = crate::tools::files::glob_regex(glob).ok()?;
        re.is_match(shown.trim_start_matches('/')).then(|| format!("it matches the excluded path {pattern}"))
    })
}

/// What is stored of a document.
#[derive(Clone, Debug)]
pub struct Remembered {
    pub path: String,
    pub name: String,
    pub kind: String,
    pub title: Option<String>,
    pub bytes: u64,
    pub sha256: String,
    pub origin: &'static str,
    /// (number, label, text) of each part with text.
    pub parts: Vec<(u32, String, String)>,
}

/// Reads the whole of `path` for memory (its every part), off the store's thread.
pub fn prepare(path: &Path, origin: &'static str) -> Result<Remembered, ReadError> {
    let doc: Document = read_with_deadline(path, &Selection::default(), DEADLINE)?;
    from_document(&doc, origin)
}

/// Reads a file already opened and checked (the folders worker opens it
/// without following links and checks what it opened): through `io_path`
/// (`/proc/self/fd/N`), kept under `name`, with its size and SHA-256 as they
/// were read from the open file.
pub fn prepare_opened(io_path: &Path, name: &Path, bytes: u64, sha256: String, origin: &'static str) -> Result<Remembered, ReadError> {
    let doc: Document = read_with_deadline_as(io_path, name, &Selection::default(), DEADLINE)?;
    Ok(remembered(&doc, bytes, sha256, origin))
}

/// What memory keeps of a document already read whole (an attachment is read
/// once for the chat and for memory); the file is hashed as it is streamed.
pub fn from_document(doc: &Document, origin: &'static str) -> Result<Remembered, ReadError> {
    let path = &doc.path;
    let io = |e: std::io::Error| ReadError::Io(format!("{}: {e}", path.display()));
    let mut hasher = Sha256::new();
    let bytes = std::io::copy(&mut std::fs::File::open(path).map_err(io)?, &mut hasher).map_err(io)?;
    Ok(remembered(doc, bytes, hex::encode(hasher.finalize()), origin))
}

fn remembered(doc: &Document, bytes: u64, sha256: String, origin: &'static str) -> Remembered {
    let path = &doc.path;
    Remembered {
        path: path.display().to_string(),
        name: path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        kind: format!("{:?}", doc.kind).to_lowercase(),
        title: doc.title.clone(),
        bytes,
        sha256,
        origin,
        parts: doc.parts.iter().filter(|p| !p.text.trim().is_empty()).map(|p| (p.number, p.label.clone(), p.text.clone())).collect(),
    }
}

/// Stores a prepared document in one transaction (the caller's), replacing an
/// earlier copy of the same path unless it is unchanged; an unchanged one is
/// kept again now (so deleting the last hour also deletes a document first
/// kept earlier but attached or read again within it). Returns its id.
pub fn store(conn: &Connection, doc: &Remembered, now_millis: i64) -> rusqlite::Result<i64> {
    let existing: Option<(i64, String)> =
        conn.query_row("SELECT document_id, sha256 FROM documents WHERE path = ?1", params![doc.path], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
    if let Some((id, sha)) = &existing
        && *sha == doc.sha256
    {
        conn.execute("UPDATE documents SET added_at_ms = max(added_at_ms, ?2) WHERE document_id = ?1", params![id, now_millis])?;
        conn.execute("UPDATE document_parts SET added_at_ms = max(added_at_ms, ?2) WHERE document_id = ?1", params![id, now_millis])?;
        return Ok(*id);
    }
    if let Some((id, _)) = existing {
        forget(conn, id)?;
    }
    conn.execute(
        "INSERT INTO documents (path, name, kind, title, bytes, sha256, origin, added_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![doc.path, doc.name, doc.kind, doc.title, doc.bytes as i64, doc.sha256, doc.origin, now_millis],
    )?;
    let id = conn.last_insert_rowid();
    let mut insert = conn.prepare_cached("INSERT INTO document_parts (document_id, number, label, text, added_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)")?;
    for (number, label, text) in &doc.parts {
        insert.execute(params![id, number, label, text, now_millis])?;
    }
    Ok(id)
}

/// Removes a document, its parts and (by trigger) their chunks and vectors.
pub fn forget(conn: &Connection, document_id: i64) -> rusqlite::Result<bool> {
    conn.execute("DELETE FROM document_parts WHERE document_id = ?1", params![document_id])?;
    Ok(conn.execute("DELETE FROM documents WHERE document_id = ?1", params![document_id])? > 0)
}

/// One remembered document, for lists.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Listed {
    pub document_id: i64,
    pub path: String,
    pub name: String,
    pub kind: String,
    pub parts: i64,
    pub origin: String,
    pub added_at_ms: i64,
    /// Parts whose chunks all have vectors (searchable by meaning).
    pub embedded_parts: i64,
}

pub fn list(conn: &Connection) -> rusqlite::Result<Vec<Listed>> {
    let mut stmt = conn.prepare(
        "SELECT d.document_id, d.path, d.name, d.kind, d.origin, d.added_at_ms,
                (SELECT count(*) FROM document_parts p WHERE p.document_id = d.document_id),
                (SELECT count(*) FROM document_parts p WHERE p.document_id = d.document_id
                   AND EXISTS (SELECT 1 FROM memory_chunks c WHERE c.source = 'document' AND c.source_id = p.part_id)
                   AND NOT EXISTS (SELECT 1 FROM memory_chunks c WHERE c.source = 'document' AND c.source_id = p.part_id AND c.vector IS NULL))
         FROM documents d ORDER BY d.added_at_ms DESC, d.document_id DESC",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(Listed { document_id: r.get(0)?, path: r.get(1)?, name: r.get(2)?, kind: r.get(3)?, origin: r.get(4)?, added_at_ms: r.get(5)?, parts: r.get(6)?, embedded_parts: r.get(7)? })
    })?;
    rows.collect()
}

/// Keeps a document read whole (attached, or read by the agent) searchable in memory; its id to `reply`.
pub fn remember_command(doc: Remembered, reply: Option<crossbeam_channel::Sender<Result<i64, String>>>) -> crate::store::StoreCommand {
    crate::store::StoreCommand::run(format!("remember {}", doc.name), move |writer| {
        let outcome = writer.transaction(|tx| Ok(store(tx, &doc, crate::ids::now_millis())?)).map_err(|err| err.to_string());
        match reply {
            Some(reply) => {
                let _ = reply.try_send(outcome);
            }
            None => {
                if let Err(err) = &outcome {
                    writer.notice(format!("{} was not kept in memory: {err}", doc.name));
                }
            }
        }
    })
}

/// Forgets a remembered document (its parts, chunks and vectors).
pub fn forget_command(document_id: i64, reply: Option<crossbeam_channel::Sender<Result<bool, String>>>) -> crate::store::StoreCommand {
    crate::store::StoreCommand::run("forget a document", move |writer| {
        let outcome = forget(writer.conn(), document_id).map_err(|err| err.to_string());
        if let Some(reply) = reply {
            let _ = reply.try_send(outcome);
        }
    })
}

/// Forgets the document read from `path` (gone from a followed folder).
pub fn forget_at_command(path: String) -> crate::store::StoreCommand {
    crate::store::StoreCommand::run("forget a document at its path", move |writer| {
        let id: Option<i64> = writer.conn().query_row("SELECT document_id FROM documents WHERE path = ?1", rusqlite::params![path], |r| r.get(0)).ok();
        if let Some(id) = id
            && let Err(err) = forget(writer.conn(), id)
        {
            writer.notice(format!("{path} was not forgotten: {err}"));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_kept_again_unchanged_counts_as_kept_now_so_a_range_deletion_takes_it() {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        let doc = Remembered {
            path: "/home/ana/plan.md".into(),
            name: "plan.md".into(),
            kind: "markdown".into(),
            title: None,
            bytes: 10,
            sha256: "abc".into(),
            origin: "attached",
            parts: vec![(1, "section 1".into(), "the plan".into())],
        };
        let id = store(&conn, &doc, 1_000).unwrap();
        assert_eq!(store(&conn, &doc, 9_000).unwrap(), id, "unchanged: the same document");
        let added: i64 = conn.query_row("SELECT added_at_ms FROM documents WHERE document_id = ?1", [id], |r| r.get(0)).unwrap();
        let part_added: i64 = conn.query_row("SELECT added_at_ms FROM document_parts WHERE document_id = ?1", [id], |r| r.get(0)).unwrap();
        assert_eq!((added, part_added), (9_000, 9_000));
        crate::erase::delete_range(&conn, 8_000, 10_000).unwrap();
        assert_eq!(list(&conn).unwrap().len(), 0, "deleting the range it was kept again in removed it");
    }
}
