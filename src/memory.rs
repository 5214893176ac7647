//! Memory: what cowork remembers and how it finds it again.
//!
//! - `search`: keyword search over every stream (FTS5, BM25), fused by rank;
//!   filters.
//! - `embed`: the MiniLM embedder, loaded on demand and dropped when idle.
//! - `vectors`: one faiss index keyed by chunk id, persisted with an atomic
//!   rename.
//! - `search_worker`: the `search` thread (search-as-you-type, recall, the
//!   indexes).
//! - `chunking`: cuts captured and said text into pieces sized for the
//!   embedder.
//! - `jobs`: the SQLite side of embedding — queue, jobs with checkpoints,
//!   vectors, tombstones.
//! - `embed_worker`: the `embed` thread that turns queued rows into vectors at
//!   low priority.
//! - `index`: one faiss index per namespace, persisted with the generation it
//!   holds.
//! - `hybrid`: keyword (FTS5) and vector search in parallel, fused by rank.
//! - `rag`: context assembly for a chat message, with citations and grounded
//!   refusal.
//! - `hot`: curated hot memory mirrored into USER.md and MEMORY.md.
//! - `synthesis`: the system prompt (identity, profile, hot memory, summaries)
//!   within a budget.
//! - `commands`: what memory asks the store to do; `tokens`: token estimates.
//!
//! The vector namespaces are activity, conversation, observation (the agent
//! worker's dated summaries of older hours and quiet conversations, made by the
//! local engine; deleting a range deletes the summaries that overlap it) and
//! documents. The embed and search workers share one embedder
//! (`SharedEmbedder`).
//!
//! Invariants:
//! - SQLite holds every vector; the faiss files are caches that can always be
//!   rebuilt from it.
//! - A refusal is stored with `refusal = 1`: never embedded, never sent back as
//!   history.
//!
//! Nothing here touches egui.

pub mod chunking;
pub mod commands;
pub mod corrections;
pub mod embed;
pub mod embed_worker;
pub mod events;
pub mod hot;
pub mod hybrid;
pub mod profile;
pub mod index;
pub mod jobs;
pub mod rag;
pub mod search;
pub mod search_worker;
pub mod synthesis;
pub mod tokens;
pub mod vectors;

use serde::{Deserialize, Serialize};

/// A dated summary the local model wrote (observational memory).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// "activity" or "conversation".
    pub kind: String,
    pub period_start_millis: i64,
    pub period_end_millis: i64,
    pub text: String,
    pub model: Option<String>,
}

/// Stores a summary (a newer one for the same period replaces it).
pub fn insert_observation(conn: &rusqlite::Connection, observation: &Observation, at_millis: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO observations (kind, period_start_ms, period_end_ms, text, model, created_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (kind, period_start_ms) DO UPDATE SET period_end_ms = excluded.period_end_ms, text = excluded.text, model = excluded.model, created_at_ms = excluded.created_at_ms",
        rusqlite::params![observation.kind, observation.period_start_millis, observation.period_end_millis, observation.text, observation.model, at_millis],
    )?;
    Ok(())
}

/// A family of vectors with its own index: captured activity, conversations,
/// and the summaries of both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Namespace {
    Activity,
    Conversation,
    Observation,
    /// Documents the user attached or the agent read (issue 44).
    Documents,
}

impl Namespace {
    pub const ALL: [Namespace; 4] = [Namespace::Activity, Namespace::Conversation, Namespace::Observation, Namespace::Documents];

    pub fn as_str(self) -> &'static str {
        match self {
            Namespace::Activity => "activity",
            Namespace::Conversation => "conversation",
            Namespace::Observation => "observation",
            Namespace::Documents => "documents",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.as_str() == text)
    }
}

/// Where a chunk's text came from: the search streams.
pub use crate::memory::search::Stream as Source;

/// A summary the local model wrote of an older period, stored at once (and embedded).
pub fn observation_write(observation: Observation) -> crate::store::StoreCommand {
    crate::store::StoreCommand::run("summary", move |writer| match insert_observation(writer.conn(), &observation, crate::ids::now_millis()) {
        Ok(()) => writer.wrote(),
        Err(err) => writer.notice(format!("a summary was not saved: {err}")),
    })
}
