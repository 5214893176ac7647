//! Memory: what cowork remembers and how it finds it again.
//!
//! - `chunking`: cuts captured and said text into pieces sized for the embedder.
//! - `jobs`: the SQLite side of embedding — queue, jobs with checkpoints, vectors, tombstones.
//! - `embed_worker`: the `embed` thread that turns queued rows into vectors at low priority.
//! - `index`: one faiss index per namespace, persisted with the generation it holds.
//! - `hybrid`: keyword (FTS5) and vector search in parallel, fused by rank.
//! - `rag`: context assembly for a chat message, with citations and grounded refusal.
//! - `hot`: curated hot memory mirrored into USER.md and MEMORY.md.
//! - `synthesis`: the system prompt (identity, profile, hot memory, summaries) within a budget.
//!
//! Nothing here touches egui.

pub mod chunking;
pub mod embed_worker;
pub mod hot;
pub mod hybrid;
pub mod index;
pub mod jobs;
pub mod rag;
pub mod synthesis;

use serde::{Deserialize, Serialize};

/// A family of vectors with its own index: captured activity, conversations,
/// and the summaries of both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Namespace {
    Activity,
    Conversation,
    Observation,
}

impl Namespace {
    pub const ALL: [Namespace; 3] = [Namespace::Activity, Namespace::Conversation, Namespace::Observation];

    pub fn as_str(self) -> &'static str {
        match self {
            Namespace::Activity => "activity",
            Namespace::Conversation => "conversation",
            Namespace::Observation => "observation",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.as_str() == text)
    }
}

/// Where a chunk's text came from: the search streams.
pub use crate::search::Stream as Source;
