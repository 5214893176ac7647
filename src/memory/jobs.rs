//! The SQLite side of embedding, as plain functions over a connection: triggers
//! queue every written row in `embed_queue`; `create_job` cuts queued rows into
//! chunks and makes a job of them; `commit_batch` stores a batch's vectors
//! together with the job's checkpoint, so a crash loses at most the batch in
//! flight; deletions leave tombstones for the faiss indexes.
//!
//! Job states: pending → processing → done, or paused (shutdown, crash) and
//! failed (an error, or stuck for over 5 minutes). Start-up recovery
//! (`recover`) turns processing jobs into paused (or failed when they began
//! over 5 minutes ago) and paused into pending.
//!
//! Chunks are cut by `chunking`, each prefixed with where its text came from
//! (typed text: "Typed in app (title): "). Deleting a source row deletes its
//! chunks, and a deleted embedded chunk leaves a tombstone and bumps its
//! namespace's generation. Pinning a row the embed worker has not reached yet
//! cuts it into chunks at once (`chunk_now`). In the sidebar the embed worker
//! runs these on the store's writer thread (`StoreLink::call`).

use rusqlite::{Connection, OptionalExtension, params};

use super::{Namespace, Source};
use super::chunking::pieces;
use crate::memory::embed::DIMENSIONS;

/// Chunks per job: small enough to finish well within the stuck limit.
pub const JOB_MAX_CHUNKS: usize = 256;
/// A job still processing this long after it began is stuck.
pub const STUCK_AFTER_MILLIS: i64 = 5 * 60 * 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    pub job_id: i64,
    pub total_chunks: i64,
    pub chunks_embedded: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PendingChunk {
    pub chunk_id: i64,
    pub namespace: Namespace,
    pub text: String,
}

/// Vectors that a batch added (or a rebuild read), for one namespace's index.
#[derive(Clone, Debug, PartialEq)]
pub struct Added {
    pub namespace: Namespace,
    pub ids: Vec<i64>,
    /// Row-major, `DIMENSIONS` per id.
    pub vectors: Vec<f32>,
    /// The namespace's generation after this change.
    pub generation: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Removed {
    pub namespace: Namespace,
    pub ids: Vec<i64>,
    pub generation: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    pub failed: usize,
    pub resumed: usize,
}

/// How far embedding has got, for Settings and `doctor`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    pub queued_rows: i64,
    pub chunks_waiting: i64,
    pub chunks_embedded: i64,
    pub jobs_pending: i64,
    pub jobs_failed: i64,
    pub last_error: Option<String>,
}

pub fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn from_blob(blob: &[u8]) -> Option<Vec<f32>> {
    (blob.len() == DIMENSIONS * 4)
        .then(|| blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

/// Start-up recovery: processing jobs began over 5 minutes ago → failed, the
/// other processing jobs → paused, then every paused job → pending.
pub fn recover(conn: &Connection, now_millis: i64) -> rusqlite::Result<Recovered> {
    let failed = conn.execute(
        "UPDATE embed_jobs SET state = 'failed', updated_at_ms = ?1,
             error = 'stuck: still processing 5 minutes after it began'
         WHERE state = 'processing' AND started_at_ms < ?1 - ?2",
        params![now_millis, STUCK_AFTER_MILLIS],
    )?;
    conn.execute("UPDATE embed_jobs SET state = 'paused', updated_at_ms = ?1 WHERE state = 'processing'", params![now_millis])?;
    let resumed = conn.execute("UPDATE embed_jobs SET state = 'pending', updated_at_ms = ?1 WHERE state = 'paused'", params![now_millis])?;
    Ok(Recovered { failed, resumed })
}

/// Clean shutdown: the job in progress is paused, to resume next start.
pub fn pause_processing(conn: &Connection, now_millis: i64) -> rusqlite::Result<usize> {
    conn.execute("UPDATE embed_jobs SET state = 'paused', updated_at_ms = ?1 WHERE state = 'processing'", params![now_millis])
}

/// Failed jobs go back to pending with a fresh start time (Settings → Memory "Retry").
pub fn retry_failed(conn: &Connection, now_millis: i64) -> rusqlite::Result<usize> {
    conn.execute(
        "UPDATE embed_jobs SET state = 'pending', started_at_ms = NULL, error = NULL, updated_at_ms = ?1 WHERE state = 'failed'",
        params![now_millis],
    )
}

/// The text pieces of one source row and when it happened; `None` if the row is gone.
pub fn source_pieces(conn: &Connection, source: Source, id: i64) -> rusqlite::Result<Option<(i64, Vec<String>)>> {
    let row = match source {
        Source::Window => conn
            .prepare_cached("SELECT started_at_ms, app, title, url FROM activity_sessions WHERE session_id = ?1")?
            .query_row(params![id], |r| {
                let (app, title, url): (String, String, Option<String>) = (r.get(1)?, r.get(2)?, r.get(3)?);
                let body = match url {
                    Some(url) => format!("{title} ({url})"),
                    None => title,
                };
                Ok((r.get(0)?, format!("Window in {app}: "), body))
            })
            .optional()?,
        Source::Typing => conn
            .prepare_cached("SELECT started_at_ms, app, title, text FROM keystroke_chunks WHERE chunk_id = ?1")?
            .query_row(params![id], |r| {
                Ok((r.get(0)?, format!("Typed in {} ({}): ", r.get::<_, String>(1)?, r.get::<_, String>(2)?), r.get(3)?))
            })
            .optional()?,
        Source::Clipboard => conn
            .prepare_cached("SELECT at_ms, app, title, text FROM clipboard_events WHERE clip_id = ?1")?
            .query_row(params![id], |r| {
                Ok((r.get(0)?, format!("Copied in {} ({}): ", r.get::<_, String>(1)?, r.get::<_, String>(2)?), r.get(3)?))
            })
            .optional()?,
        Source::Audio => conn
            .prepare_cached("SELECT started_at_ms, source, app, text FROM audio_transcripts WHERE transcript_id = ?1")?
            .query_row(params![id], |r| {
                let who = if r.get::<_, String>(1)? == "mic" { "You said" } else { "Heard on the computer" };
                let app: String = r.get(2)?;
                let prefix = if app.is_empty() { format!("{who}: ") } else { format!("{who} (in {app}): ") };
                Ok((r.get(0)?, prefix, r.get(3)?))
            })
            .optional()?,
        Source::Screen => conn
            .prepare_cached("SELECT seen_at_ms, app, title, method, text FROM screen_texts WHERE screen_id = ?1")?
            .query_row(params![id], |r| {
                let how = if r.get::<_, String>(3)? == "ocr" { "read by OCR" } else { "read" };
                Ok((r.get(0)?, format!("On screen in {} ({}, {how}): ", r.get::<_, String>(1)?, r.get::<_, String>(2)?), r.get(4)?))
            })
            .optional()?,
        Source::Document => conn
            .prepare_cached("SELECT p.added_at_ms, d.name, p.label, p.text FROM document_parts p JOIN documents d ON d.document_id = p.document_id WHERE p.part_id = ?1")?
            .query_row(params![id], |r| Ok((r.get(0)?, format!("From the document {} ({}): ", r.get::<_, String>(1)?, r.get::<_, String>(2)?), r.get(3)?)))
            .optional()?,
        Source::Chat => conn
            .prepare_cached("SELECT created_at_ms, role, content FROM chat_messages WHERE message_id = ?1 AND refusal = 0")?
            .query_row(params![id], |r| {
                let prefix = if r.get::<_, String>(1)? == "user" { "You asked cowork: " } else { "cowork answered: " };
                Ok((r.get(0)?, prefix.to_owned(), r.get(2)?))
            })
            .optional()?,
        Source::Summary => conn
            .prepare_cached("SELECT period_start_ms, kind, text FROM observations WHERE observation_id = ?1")?
            .query_row(params![id], |r| Ok((r.get(0)?, format!("Summary of {}: ", r.get::<_, String>(1)?), r.get(2)?)))
            .optional()?,
    };
    Ok(row.map(|(at, prefix, body): (i64, String, String)| (at, pieces(&prefix, &body))))
}

/// Cuts queued rows into chunks (up to about `max_chunks`) and makes them one
/// pending job, in one transaction. `None` when the queue held nothing to embed.
pub fn create_job(conn: &Connection, now_millis: i64, max_chunks: usize) -> rusqlite::Result<Option<Job>> {
    let tx = crate::store::write_transaction(conn)?;
    let queued: Vec<(String, i64)> = tx
        .prepare_cached("SELECT source, source_id FROM embed_queue LIMIT ?1")?
        .query_map(params![max_chunks as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let job = job_from(&tx, queued, now_millis, max_chunks)?;
    tx.commit()?;
    Ok(job)
}

/// Cuts one source row into chunks now if it is still queued (a pin needs its
/// chunks before the embed worker reaches it), inside the caller's transaction.
pub fn chunk_now(conn: &Connection, source: Source, source_id: i64, now_millis: i64) -> rusqlite::Result<Option<Job>> {
    let queued: Option<String> = conn
        .prepare_cached("SELECT source FROM embed_queue WHERE source = ?1 AND source_id = ?2")?
        .query_row(params![source.as_str(), source_id], |r| r.get(0))
        .optional()?;
    match queued {
        Some(name) => job_from(conn, vec![(name, source_id)], now_millis, usize::MAX),
        None => Ok(None),
    }
}

/// Takes `queued` rows off the queue (up to about `max_chunks` pieces) and
/// stores their chunks under a new pending job.
fn job_from(conn: &Connection, queued: Vec<(String, i64)>, now_millis: i64, max_chunks: usize) -> rusqlite::Result<Option<Job>> {
    if queued.is_empty() {
        return Ok(None);
    }
    let mut chunks: Vec<(Source, i64, usize, String, i64)> = Vec::new();
    let mut consumed = Vec::new();
    for (source_name, id) in queued {
        if !chunks.is_empty() && chunks.len() >= max_chunks {
            break;
        }
        consumed.push((source_name.clone(), id));
        let Some(source) = Source::parse(&source_name) else { continue };
        if let Some((at, texts)) = source_pieces(conn, source, id)? {
            chunks.extend(texts.into_iter().enumerate().map(|(part, text)| (source, id, part, text, at)));
        }
    }
    let mut dequeue = conn.prepare_cached("DELETE FROM embed_queue WHERE source = ?1 AND source_id = ?2")?;
    for (source, id) in &consumed {
        dequeue.execute(params![source, id])?;
    }
    if chunks.is_empty() {
        return Ok(None);
    }
    conn.execute(
        "INSERT INTO embed_jobs (state, total_chunks, created_at_ms, updated_at_ms) VALUES ('pending', ?1, ?2, ?2)",
        params![chunks.len() as i64, now_millis],
    )?;
    let job_id = conn.last_insert_rowid();
    let mut insert = conn.prepare_cached(
        "INSERT INTO memory_chunks (namespace, source, source_id, part, text, at_ms, job_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (source, id, part, text, at) in &chunks {
        insert.execute(params![source.namespace().as_str(), source.as_str(), id, *part as i64, text, at, job_id])?;
    }
    Ok(Some(Job { job_id, total_chunks: chunks.len() as i64, chunks_embedded: 0 }))
}

/// The oldest job still to do (pending, or processing in this run).
pub fn next_job(conn: &Connection) -> rusqlite::Result<Option<Job>> {
    conn.prepare_cached(
        "SELECT job_id, total_chunks, chunks_embedded FROM embed_jobs
         WHERE state IN ('pending', 'processing') ORDER BY job_id LIMIT 1",
    )?
    .query_row([], |r| Ok(Job { job_id: r.get(0)?, total_chunks: r.get(1)?, chunks_embedded: r.get(2)? }))
    .optional()
}

/// Marks a job processing; its start time is kept from the first time.
pub fn begin(conn: &Connection, job_id: i64, now_millis: i64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE embed_jobs SET state = 'processing', started_at_ms = coalesce(started_at_ms, ?2), updated_at_ms = ?2 WHERE job_id = ?1",
        params![job_id, now_millis],
    )?;
    Ok(())
}

/// The next `limit` chunks of a job without a vector, in order.
pub fn next_batch(conn: &Connection, job_id: i64, limit: usize) -> rusqlite::Result<Vec<PendingChunk>> {
    conn.prepare_cached(
        "SELECT chunk_id, namespace, text FROM memory_chunks WHERE job_id = ?1 AND vector IS NULL ORDER BY chunk_id LIMIT ?2",
    )?
    .query_map(params![job_id, limit as i64], |r| {
        let namespace: String = r.get(1)?;
        Ok(PendingChunk { chunk_id: r.get(0)?, namespace: Namespace::parse(&namespace).unwrap_or(Namespace::Activity), text: r.get(2)? })
    })?
    .collect()
}

pub fn generation(conn: &Connection, namespace: Namespace) -> rusqlite::Result<u64> {
    conn.prepare_cached("SELECT generation FROM index_generations WHERE namespace = ?1")?
        .query_row(params![namespace.as_str()], |r| r.get::<_, i64>(0))
        .map(|g| g as u64)
}

/// Stores a batch's vectors and the job's checkpoint in one transaction.
/// Chunks deleted meanwhile are skipped; the rest is returned per namespace
/// for the indexes, with the generation it brings them to.
pub fn commit_batch(conn: &Connection, job_id: i64, batch: &[PendingChunk], vectors: &[Vec<f32>], now_millis: i64) -> rusqlite::Result<Vec<Added>> {
    let tx = crate::store::write_transaction(conn)?;
    let mut added: Vec<Added> = Vec::new();
    {
        let mut update = tx.prepare_cached("UPDATE memory_chunks SET vector = ?2 WHERE chunk_id = ?1 AND vector IS NULL")?;
        for (chunk, vector) in batch.iter().zip(vectors) {
            if update.execute(params![chunk.chunk_id, to_blob(vector)])? == 0 {
                continue;
            }
            match added.iter_mut().find(|a| a.namespace == chunk.namespace) {
                Some(entry) => {
                    entry.ids.push(chunk.chunk_id);
                    entry.vectors.extend_from_slice(vector);
                }
                None => added.push(Added { namespace: chunk.namespace, ids: vec![chunk.chunk_id], vectors: vector.clone(), generation: 0 }),
            }
        }
    }
    let stored: usize = added.iter().map(|a| a.ids.len()).sum();
    tx.execute(
        "UPDATE embed_jobs SET chunks_embedded = chunks_embedded + ?2, updated_at_ms = ?3 WHERE job_id = ?1",
        params![job_id, stored as i64, now_millis],
    )?;
    for entry in &mut added {
        tx.execute("UPDATE index_generations SET generation = generation + 1 WHERE namespace = ?1", params![entry.namespace.as_str()])?;
        entry.generation = generation(&tx, entry.namespace)?;
    }
    tx.commit()?;
    Ok(added)
}

pub fn finish(conn: &Connection, job_id: i64, now_millis: i64) -> rusqlite::Result<()> {
    conn.execute("UPDATE embed_jobs SET state = 'done', updated_at_ms = ?2 WHERE job_id = ?1", params![job_id, now_millis])?;
    Ok(())
}

pub fn fail(conn: &Connection, job_id: i64, error: &str, now_millis: i64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE embed_jobs SET state = 'failed', error = ?2, updated_at_ms = ?3 WHERE job_id = ?1",
        params![job_id, error, now_millis],
    )?;
    Ok(())
}

/// Takes (and clears) the tombstones of deleted embedded chunks, per namespace.
pub fn take_tombstones(conn: &Connection) -> rusqlite::Result<Vec<Removed>> {
    let tx = crate::store::write_transaction(conn)?;
    let rows: Vec<(i64, String)> =
        tx.prepare_cached("SELECT chunk_id, namespace FROM vector_tombstones")?.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut removed: Vec<Removed> = Vec::new();
    for (id, name) in rows {
        let Some(namespace) = Namespace::parse(&name) else { continue };
        match removed.iter_mut().find(|r| r.namespace == namespace) {
            Some(entry) => entry.ids.push(id),
            None => removed.push(Removed { namespace, ids: vec![id], generation: 0 }),
        }
    }
    for entry in &mut removed {
        entry.generation = generation(&tx, entry.namespace)?;
    }
    tx.execute("DELETE FROM vector_tombstones", [])?;
    tx.commit()?;
    Ok(removed)
}

/// Embedded vectors of a namespace with ids above `after`, in id order (rebuilds page through this).
pub fn stored_vectors(conn: &Connection, namespace: Namespace, after: i64, limit: usize) -> rusqlite::Result<(Vec<i64>, Vec<f32>)> {
    let mut stmt = conn.prepare_cached(
        "SELECT chunk_id, vector FROM memory_chunks WHERE namespace = ?1 AND chunk_id > ?2 AND vector IS NOT NULL ORDER BY chunk_id LIMIT ?3",
    )?;
    let mut rows = stmt.query(params![namespace.as_str(), after, limit as i64])?;
    let (mut ids, mut vectors) = (Vec::new(), Vec::with_capacity(limit.min(4096) * DIMENSIONS));
    while let Some(row) = rows.next()? {
        let blob = row.get_ref(1)?.as_blob()?;
        if let Some(vector) = from_blob(blob) {
            ids.push(row.get(0)?);
            vectors.extend(vector);
        }
    }
    Ok((ids, vectors))
}

/// Whether any vector exists at all (grounded answers refuse without).
pub fn any_embedded(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row("SELECT EXISTS (SELECT 1 FROM memory_chunks WHERE vector IS NOT NULL)", [], |r| r.get(0))
}

pub fn progress(conn: &Connection) -> rusqlite::Result<Progress> {
    // Both counts walk indexes (all chunks: the narrowest index; waiting:
    // the partial one), never the table with its vectors.
    conn.query_row(
        "SELECT (SELECT count(*) FROM embed_queue),
                (SELECT count(*) FROM memory_chunks WHERE vector IS NULL),
                (SELECT count(*) FROM memory_chunks) - (SELECT count(*) FROM memory_chunks WHERE vector IS NULL),
                (SELECT count(*) FROM embed_jobs WHERE state IN ('pending', 'processing', 'paused')),
                (SELECT count(*) FROM embed_jobs WHERE state = 'failed'),
                (SELECT error FROM embed_jobs WHERE state = 'failed' ORDER BY updated_at_ms DESC LIMIT 1)",
        [],
        |r| {
            Ok(Progress {
                queued_rows: r.get(0)?,
                chunks_waiting: r.get(1)?,
                chunks_embedded: r.get(2)?,
                jobs_pending: r.get(3)?,
                jobs_failed: r.get(4)?,
                last_error: r.get(5)?,
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ActivitySession;

    fn session(id: i64, title: &str) -> ActivitySession {
        ActivitySession { session_id: id, app: "firefox".into(), title: title.into(), window_id: 1, started_at_millis: id * 1000, ..Default::default() }
    }

    fn unit(seed: f32) -> Vec<f32> {
        let mut v: Vec<f32> = (0..DIMENSIONS).map(|i| ((i as f32 + seed) * 0.37).sin()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    #[test]
    fn the_embed_connection_and_the_store_write_at_the_same_time_without_errors() {
        // Two writers on one WAL file: a transaction that reads before it writes
        // must hold the write lock from its start, or a commit by the other
        // connection in between fails it with SQLITE_BUSY (snapshot), which no
        // busy timeout waits out.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cowork.db");
        let conn = crate::store::open_writer(&path).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let store = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let store = crate::store::open_writer(&path).unwrap();
                let mut id = 1;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let tx = crate::store::write_transaction(&store).unwrap();
                    crate::capture::db::upsert_session(&tx, &session(id, &format!("Window {id}"))).unwrap();
                    tx.commit().unwrap();
                    id += 1;
                }
                id
            })
        };
        let (mut jobs, mut tombstones) = (0, 0);
        let started = std::time::Instant::now();
        // At least 1.5 s, and on a loaded machine until the embed side has written enough too.
        while started.elapsed() < std::time::Duration::from_millis(1500) || (jobs <= 10 && started.elapsed() < std::time::Duration::from_secs(15)) {
            jobs += create_job(&conn, 1, 4).expect("create_job beside the store").is_some() as usize;
            tombstones += take_tombstones(&conn).expect("take_tombstones beside the store").len();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let written = store.join().unwrap();
        assert!(jobs > 10 && written > 100, "both wrote: {jobs} jobs beside {written} sessions");
        assert_eq!(tombstones, 0);
    }

    #[test]
    fn queued_rows_become_a_job_whose_checkpoints_survive_and_deletions_leave_tombstones() {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        for id in 1..=5 {
            crate::capture::db::upsert_session(&conn, &session(id, &format!("Quarterly report draft {id}"))).unwrap();
        }
        // Updating a session's end does not queue it again.
        crate::capture::db::upsert_session(&conn, &ActivitySession { ended_at_millis: Some(9_000), ..session(1, "Quarterly report draft 1") }).unwrap();
        assert_eq!(progress(&conn).unwrap().queued_rows, 5);
        let job = create_job(&conn, 100, 3).unwrap().unwrap();
        assert_eq!(job.total_chunks, 3);
        assert_eq!(progress(&conn).unwrap().queued_rows, 2, "only what the job took left the queue");
        assert_eq!(next_job(&conn).unwrap(), Some(job));
        begin(&conn, job.job_id, 200).unwrap();
        let batch = next_batch(&conn, job.job_id, 2).unwrap();
        assert_eq!(batch.len(), 2);
        assert!(batch[0].text.starts_with("Window in firefox: Quarterly report draft"), "{:?}", batch[0]);
        let added = commit_batch(&conn, job.job_id, &batch, &[unit(1.0), unit(2.0)], 300).unwrap();
        assert_eq!(added.len(), 1);
        assert_eq!((added[0].namespace, added[0].ids.len(), added[0].generation), (Namespace::Activity, 2, 1));
        // A crash now: the job is processing with 2 of 3 done.
        let recovered = recover(&conn, 400).unwrap();
        assert_eq!(recovered, Recovered { failed: 0, resumed: 1 });
        let resumed = next_job(&conn).unwrap().unwrap();
        assert_eq!(resumed.chunks_embedded, 2, "resumes from the checkpoint");
        assert_eq!(next_batch(&conn, job.job_id, 10).unwrap().len(), 1);
        // Stuck: began more than 5 minutes ago.
        begin(&conn, job.job_id, 500).unwrap();
        assert_eq!(recover(&conn, 200 + STUCK_AFTER_MILLIS + 1).unwrap(), Recovered { failed: 1, resumed: 0 });
        assert_eq!(progress(&conn).unwrap().jobs_failed, 1);
        assert!(next_job(&conn).unwrap().is_none());
        assert_eq!(retry_failed(&conn, 600).unwrap(), 1);
        assert!(next_job(&conn).unwrap().is_some());
        // Deleting an embedded source leaves a tombstone and bumps the generation.
        conn.execute("DELETE FROM activity_sessions WHERE session_id = ?1", [1]).unwrap();
        let removed = take_tombstones(&conn).unwrap();
        assert_eq!(removed, vec![Removed { namespace: Namespace::Activity, ids: vec![batch[0].chunk_id], generation: 2 }]);
        assert!(take_tombstones(&conn).unwrap().is_empty());
        let (ids, vectors) = stored_vectors(&conn, Namespace::Activity, 0, 10).unwrap();
        assert_eq!(ids, vec![batch[1].chunk_id]);
        assert_eq!(vectors, unit(2.0));
        // Rewriting a message (an answer written again when it finishes) through the
        // store's upsert requeues it without tripping the queue's uniqueness.
        let thread = crate::records::ChatThread { thread_id: 1, title: "t".into(), updated_at_millis: 0 };
        crate::chat::upsert_thread(&conn, &thread, 0).unwrap();
        let mut message = crate::records::ChatMessage {
            message_id: 9,
            thread_id: 1,
            role: crate::records::Role::Assistant,
            content: "draft".into(),
            context: None,
            status: crate::records::MessageStatus::Stopped,
            created_at_millis: 1,
            ask_id: None,
            provider: None,
            cost_usd: None,
            citations: None,
            refusal: false,
        };
        crate::chat::upsert_message(&conn, &message, None).unwrap();
        message.content = "the final answer".into();
        crate::chat::upsert_message(&conn, &message, None).unwrap();
        crate::chat::upsert_message(&conn, &message, None).unwrap();
        let queued: i64 = conn.query_row("SELECT count(*) FROM embed_queue WHERE source = 'chat'", [], |r| r.get(0)).unwrap();
        assert_eq!(queued, 1);
        conn.execute("DELETE FROM chat_messages", []).unwrap();
        // A deleted, not yet chunked row simply leaves the queue.
        conn.execute("DELETE FROM activity_sessions WHERE session_id = 5", []).unwrap();
        assert_eq!(progress(&conn).unwrap().queued_rows, 1);
    }
}
