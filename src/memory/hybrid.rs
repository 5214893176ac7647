//! Hybrid search: the keyword half (FTS5, BM25 per stream) runs on the
//! calling thread while the vector half (embed the query, faiss per
//! namespace) runs beside it; both lists meet in reciprocal rank fusion.
//! Vector hits are resolved through SQLite, so a chunk deleted a moment ago
//! can never come back, and the same filters (time, app, stream) apply.

use std::time::Instant;

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::index::IndexSet;
use super::{Namespace, Source};
use crate::memory::embed::Embedder;
use crate::memory::search::{Filters, Hit, keyword_lists, reciprocal_rank_fusion};

/// Nearest neighbours fetched per namespace before filtering.
pub const VECTOR_K: usize = 50;
/// Below this cosine similarity a neighbour is not a match (MiniLM puts
/// unrelated sentences at 0–0.15 and paraphrases above 0.45).
pub const MIN_SIMILARITY: f32 = 0.25;

/// A chunk found by meaning, with what a citation needs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChunkHit {
    pub chunk_id: i64,
    pub stream: Source,
    pub source_id: i64,
    pub at_millis: i64,
    pub app: Option<String>,
    pub title: String,
    pub text: String,
    pub score: f32,
    /// What opening it shows: the session (capture; the one around typed or
    /// copied text), the thread (chat), the summary.
    pub open_id: Option<i64>,
}

impl ChunkHit {
    /// The text without the "Typed in app (title): " prefix the embedder saw.
    /// The prefix is rebuilt from the hit's app and title (as `jobs::source_pieces`
    /// wrote it), so a title holding ": " (a mail's "Write: Re: …") is not cut
    /// into the body; other streams fall back to the first ": ".
    pub fn body(&self) -> &str {
        let app = self.app.as_deref().unwrap_or_default();
        let prefix = match self.stream {
            Source::Window => Some(format!("Window in {app}: ")),
            Source::Typing => Some(format!("Typed in {app} ({}): ", self.title)),
            Source::Clipboard => Some(format!("Copied in {app} ({}): ", self.title)),
            _ => None,
        };
        if let Some(body) = prefix.and_then(|p| self.text.strip_prefix(p.as_str())) {
            return body;
        }
        if self.stream == Source::Screen {
            // `jobs::source_pieces`' prefix, its title may hold ": ".
            for how in ["read by OCR", "read"] {
                if let Some(body) = self.text.strip_prefix(format!("On screen in {app} ({}, {how}): ", self.title).as_str()) {
                    return body;
                }
            }
        }
        self.text.split_once(": ").map_or(&self.text, |(_, body)| body)
    }

    pub fn to_hit(&self) -> Hit {
        let body = self.body();
        let snippet: String = body.chars().take(160).collect();
        Hit {
            stream: self.stream,
            id: self.source_id,
            at_millis: self.at_millis,
            app: self.app.clone(),
            title: self.title.clone(),
            snippet: if snippet.len() < body.len() { format!("{snippet}…") } else { snippet },
            score: self.score as f64,
            open_id: self.open_id,
        }
    }
}

/// The `k` nearest chunk ids across `namespaces`, best first.
pub fn nearest(embedder: &Embedder, indexes: &mut IndexSet, query: &str, namespaces: &[Namespace], k: usize) -> anyhow::Result<Vec<(i64, f32)>> {
    let vector = embedder.embed(&[query])?.pop().unwrap_or_default();
    let mut all = Vec::new();
    for namespace in namespaces {
        all.extend(indexes.search(*namespace, &vector, k)?);
    }
    all.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(all)
}

/// The `k` chunks nearest in meaning to `query` that pass the similarity floor.
pub fn recall(embedder: &Embedder, indexes: &mut IndexSet, conn: &Connection, query: &str, namespaces: &[Namespace], k: usize) -> Result<Vec<ChunkHit>, String> {
    let found = nearest(embedder, indexes, query, namespaces, VECTOR_K.max(k)).map_err(|err| format!("{err:#}"))?;
    let mut hits = resolve(conn, &found, &Filters::default(), MIN_SIMILARITY).map_err(|err| err.to_string())?;
    hits.truncate(k);
    Ok(hits)
}

/// Looks up found chunks in SQLite (gone ones drop out), keeping those the
/// filters admit at or above `min_similarity`; one hit per source row (its best piece).
pub fn resolve(conn: &Connection, found: &[(i64, f32)], filters: &Filters, min_similarity: f32) -> rusqlite::Result<Vec<ChunkHit>> {
    let mut stmt = conn.prepare_cached(
        "SELECT c.source, c.source_id, c.at_ms, c.text,
                CASE c.source
                    WHEN 'window' THEN (SELECT app FROM activity_sessions WHERE session_id = c.source_id)
                    WHEN 'typing' THEN (SELECT app FROM keystroke_chunks WHERE chunk_id = c.source_id)
                    WHEN 'clipboard' THEN (SELECT app FROM clipboard_events WHERE clip_id = c.source_id)
                    WHEN 'audio' THEN (SELECT nullif(app, '') FROM audio_transcripts WHERE transcript_id = c.source_id)
                    WHEN 'screen' THEN (SELECT app FROM screen_texts WHERE screen_id = c.source_id) END,
                CASE c.source
                    WHEN 'window' THEN (SELECT title FROM activity_sessions WHERE session_id = c.source_id)
                    WHEN 'typing' THEN (SELECT title FROM keystroke_chunks WHERE chunk_id = c.source_id)
                    WHEN 'clipboard' THEN (SELECT title FROM clipboard_events WHERE clip_id = c.source_id)
                    WHEN 'chat' THEN (SELECT t.title FROM chat_messages m JOIN chat_threads t ON t.thread_id = m.thread_id WHERE m.message_id = c.source_id)
                    WHEN 'audio' THEN (SELECT CASE source WHEN 'mic' THEN 'You (microphone)' ELSE 'Others (system audio)' END FROM audio_transcripts WHERE transcript_id = c.source_id)
                    WHEN 'screen' THEN (SELECT title FROM screen_texts WHERE screen_id = c.source_id)
                    ELSE 'Summary' END,
                CASE c.source
                    WHEN 'window' THEN (SELECT coalesce(ended_at_ms, last_seen_ms) FROM activity_sessions WHERE session_id = c.source_id)
                    WHEN 'typing' THEN (SELECT ended_at_ms FROM keystroke_chunks WHERE chunk_id = c.source_id)
                    WHEN 'summary' THEN (SELECT period_end_ms FROM observations WHERE observation_id = c.source_id)
                    WHEN 'audio' THEN (SELECT ended_at_ms FROM audio_transcripts WHERE transcript_id = c.source_id)
                    ELSE c.at_ms END,
                CASE c.source
                    WHEN 'window' THEN c.source_id
                    WHEN 'chat' THEN (SELECT thread_id FROM chat_messages WHERE message_id = c.source_id)
                    WHEN 'summary' THEN c.source_id
                    WHEN 'screen' THEN coalesce((SELECT session_id FROM screen_texts WHERE screen_id = c.source_id),
                        (SELECT session_id FROM activity_sessions WHERE started_at_ms <= c.at_ms ORDER BY started_at_ms DESC LIMIT 1))
                    ELSE (SELECT session_id FROM activity_sessions WHERE started_at_ms <= c.at_ms ORDER BY started_at_ms DESC LIMIT 1) END
         FROM memory_chunks c WHERE c.chunk_id = ?1",
    )?;
    let mut hits: Vec<ChunkHit> = Vec::new();
    for &(chunk_id, score) in found {
        if score < min_similarity {
            continue;
        }
        let row = stmt
            .query_row(params![chunk_id], |r| {
                let source: String = r.get(0)?;
                Ok((
                    (source, r.get(1)?, r.get(2)?, r.get(3)?),
                    (r.get::<_, Option<String>>(4)?, r.get::<_, Option<String>>(5)?, r.get::<_, Option<i64>>(6)?, r.get::<_, Option<i64>>(7)?),
                ))
            })
            .optional()?;
        let Some(((source, source_id, at_millis, text), (app, title, end, open_id))) = row else { continue };
        let Some(stream) = Source::parse(&source) else { continue };
        if !filters.admits(stream, app.as_deref(), at_millis, end.unwrap_or(at_millis)) {
            continue;
        }
        if hits.iter().any(|h| h.stream == stream && h.source_id == source_id) {
            continue;
        }
        hits.push(ChunkHit { chunk_id, stream, source_id, at_millis, app, title: title.unwrap_or_default(), text, score, open_id });
    }
    Ok(hits)
}

/// What a hybrid search found and how long each half took.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub hits: Vec<Hit>,
    pub keyword_millis: f64,
    pub vector_millis: f64,
    /// Why the vector half did not run (keyword results only), if it did not.
    pub keyword_only: Option<String>,
}

/// Keyword and vector search in parallel, fused. `semantic` is the embedder
/// and the indexes, or why they are unavailable (then keyword only, said so).
pub fn hybrid_search(
    conn: &Connection,
    semantic: Result<(&Embedder, &mut IndexSet), String>,
    query: &str,
    filters: &Filters,
    limit: usize,
) -> anyhow::Result<Outcome> {
    if query.split_whitespace().next().is_none() {
        return Ok(Outcome::default());
    }
    let namespaces: Vec<Namespace> = {
        let mut n: Vec<Namespace> = filters.streams().iter().map(|s| s.namespace()).collect();
        n.dedup();
        n
    };
    let (keyword, vector) = std::thread::scope(|scope| {
        let vector_half = semantic.map(|(embedder, indexes)| {
            scope.spawn(move || {
                let started = Instant::now();
                let found = nearest(embedder, indexes, query, &namespaces, VECTOR_K);
                (found, started.elapsed().as_secs_f64() * 1000.0)
            })
        });
        let started = Instant::now();
        let keyword = keyword_lists(conn, query, filters, limit).map(|lists| (lists, started.elapsed().as_secs_f64() * 1000.0));
        let vector = match vector_half {
            Ok(handle) => handle.join().map_err(|_| "the vector search panicked".to_owned()),
            Err(reason) => Err(reason),
        };
        (keyword, vector)
    });
    let (mut lists, keyword_millis) = keyword?;
    let mut outcome = Outcome { keyword_millis, ..Outcome::default() };
    match vector {
        Ok((Ok(found), millis)) => {
            outcome.vector_millis = millis;
            let hits = resolve(conn, &found, filters, MIN_SIMILARITY)?;
            lists.push(hits.iter().map(ChunkHit::to_hit).collect());
        }
        Ok((Err(err), _)) => outcome.keyword_only = Some(format!("{err:#}")),
        Err(reason) => outcome.keyword_only = Some(reason),
    }
    outcome.hits = reciprocal_rank_fusion(lists, limit);
    Ok(outcome)
}
