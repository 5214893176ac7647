//! One faiss index per namespace, kept next to the database as
//! `vectors/<namespace>.faiss` plus a small `.json` that records the
//! generation (see `index_generations`) the file holds, its kind and the ids
//! removed since it was built. Opening compares that with SQLite: equal → use
//! the file; only newer vectors missing (a crash before saving) → add them;
//! anything else → rebuild from the vectors stored in SQLite.
//!
//! Exact (flat) search while a namespace is small; past `HNSW_THRESHOLD`
//! vectors it is rebuilt as HNSW, which cannot delete, so removed ids are
//! remembered, filtered from results, and dropped at the next rebuild.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use super::Namespace;
use super::jobs::{self, Added, Removed};
use crate::memory::embed::DIMENSIONS;
use crate::memory::vectors::{Kind, VectorIndex};
use crate::sealed::SealKey;

/// Vectors above which a namespace switches from exact search to HNSW:
/// where exact top-10 search passes ~2 ms on this machine's 2 cores
/// (`cargo bench --profile dev --bench memory`, docs/performance.md → "Store,
/// memory and search").
pub const HNSW_THRESHOLD: usize = 40_000;
/// An HNSW index whose removed ids pass this share of it is rebuilt.
const REBUILD_REMOVED_SHARE: f64 = 0.2;
/// Rows read per page during a rebuild.
const REBUILD_PAGE: usize = 20_000;

#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    generation: u64,
    kind: Kind,
    max_id: i64,
    removed: Vec<i64>,
}

pub struct NamespaceIndex {
    index: VectorIndex,
    generation: u64,
    max_id: i64,
    removed: HashSet<i64>,
    dirty: bool,
}

impl NamespaceIndex {
    pub fn len(&self) -> usize {
        self.index.len() - self.removed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn kind(&self) -> Kind {
        self.index.kind()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// How an index was opened, for logs and `doctor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    Loaded,
    CaughtUp(usize),
    Rebuilt(String),
}

pub struct IndexSet {
    dir: PathBuf,
    indexes: HashMap<Namespace, NamespaceIndex>,
    /// The files are sealed with a key derived from the database's.
    key: SealKey,
}

pub fn index_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("vectors")
}

fn paths(dir: &Path, namespace: Namespace) -> (PathBuf, PathBuf) {
    (dir.join(format!("{}.faiss", namespace.as_str())), dir.join(format!("{}.json", namespace.as_str())))
}

fn stored_count(conn: &Connection, namespace: Namespace, up_to: i64) -> rusqlite::Result<usize> {
    conn.query_row(
        "SELECT count(*) FROM memory_chunks WHERE namespace = ?1 AND vector IS NOT NULL AND chunk_id <= ?2",
        rusqlite::params![namespace.as_str(), up_to],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as usize)
}

/// Adds every stored vector of `namespace` above `after` to `index`; returns (count, max id).
fn add_stored(conn: &Connection, namespace: Namespace, index: &mut VectorIndex, mut after: i64) -> anyhow::Result<(usize, i64)> {
    let mut count = 0;
    loop {
        let (ids, vectors) = jobs::stored_vectors(conn, namespace, after, REBUILD_PAGE)?;
        let Some(&last) = ids.last() else { break };
        index.add(&ids, &vectors)?;
        count += ids.len();
        after = last;
    }
    Ok((count, after))
}

/// Builds a namespace's index from SQLite, flat or HNSW by size.
fn rebuild(conn: &Connection, namespace: Namespace) -> anyhow::Result<NamespaceIndex> {
    let generation = jobs::generation(conn, namespace)?;
    let total = stored_count(conn, namespace, i64::MAX)?;
    let kind = if total > HNSW_THRESHOLD { Kind::Hnsw } else { Kind::Flat };
    let mut index = VectorIndex::new(kind, DIMENSIONS)?;
    let (_, max_id) = add_stored(conn, namespace, &mut index, 0)?;
    Ok(NamespaceIndex { index, generation, max_id, removed: HashSet::new(), dirty: true })
}

fn load(dir: &Path, conn: &Connection, namespace: Namespace, key: &SealKey) -> anyhow::Result<(NamespaceIndex, Opened)> {
    let (file, meta_file) = paths(dir, namespace);
    let meta: Meta = serde_json::from_slice(&std::fs::read(&meta_file).with_context(|| format!("no {}", meta_file.display()))?)
        .with_context(|| format!("{} is damaged", meta_file.display()))?;
    let index = VectorIndex::load(&file, DIMENSIONS, meta.kind, key)?;
    let mut loaded = NamespaceIndex { index, generation: meta.generation, max_id: meta.max_id, removed: meta.removed.into_iter().collect(), dirty: false };
    let current = jobs::generation(conn, namespace)?;
    if loaded.generation == current {
        return Ok((loaded, Opened::Loaded));
    }
    // Only additions missing? Then what SQLite holds up to max_id is what the file holds.
    if loaded.generation < current && stored_count(conn, namespace, loaded.max_id)? == loaded.len() {
        let (added, max_id) = add_stored(conn, namespace, &mut loaded.index, loaded.max_id)?;
        loaded.max_id = max_id;
        loaded.generation = current;
        loaded.dirty = true;
        return Ok((loaded, Opened::CaughtUp(added)));
    }
    anyhow::bail!("it holds generation {}, the database {current}", loaded.generation)
}

impl IndexSet {
    /// Opens every namespace's index from `dir`, rebuilding stale or damaged ones from `conn`.
    pub fn open(dir: &Path, conn: &Connection) -> anyhow::Result<(Self, Vec<(Namespace, Opened)>)> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let key = SealKey::for_connection(conn).context("the vector indexes are sealed with the database's key")?;
        let mut indexes = HashMap::new();
        let mut report = Vec::new();
        for namespace in Namespace::ALL {
            let started = Instant::now();
            let (index, opened) = match load(dir, conn, namespace, &key) {
                Ok(pair) => pair,
                Err(err) => (rebuild(conn, namespace)?, Opened::Rebuilt(format!("{err:#}"))),
            };
            tracing::info!(namespace = namespace.as_str(), vectors = index.len(), ?opened, millis = started.elapsed().as_millis() as u64, "vector index ready");
            report.push((namespace, opened));
            indexes.insert(namespace, index);
        }
        Ok((Self { dir: dir.to_owned(), indexes, key }, report))
    }

    pub fn get(&self, namespace: Namespace) -> &NamespaceIndex {
        &self.indexes[&namespace]
    }

    pub fn total(&self) -> usize {
        self.indexes.values().map(NamespaceIndex::len).sum()
    }

    /// Adds a committed batch; a namespace growing past the threshold is rebuilt as HNSW from `conn`.
    pub fn add(&mut self, added: &Added, conn: &Connection) -> anyhow::Result<()> {
        let entry = self.indexes.get_mut(&added.namespace).expect("every namespace has an index");
        if added.generation <= entry.generation {
            // Committed before this index was opened from SQLite: already in it.
            return Ok(());
        }
        entry.index.add(&added.ids, &added.vectors)?;
        entry.max_id = entry.max_id.max(added.ids.iter().copied().max().unwrap_or(0));
        entry.generation = entry.generation.max(added.generation);
        entry.dirty = true;
        if entry.kind() == Kind::Flat && entry.len() > HNSW_THRESHOLD {
            let started = Instant::now();
            *entry = rebuild(conn, added.namespace)?;
            tracing::info!(namespace = added.namespace.as_str(), vectors = entry.len(), millis = started.elapsed().as_millis() as u64, "switched to HNSW");
        }
        Ok(())
    }

    pub fn remove(&mut self, removed: &Removed, conn: &Connection) -> anyhow::Result<()> {
        let entry = self.indexes.get_mut(&removed.namespace).expect("every namespace has an index");
        match entry.kind() {
            Kind::Flat => {
                entry.index.remove(&removed.ids)?;
            }
            Kind::Hnsw => entry.removed.extend(removed.ids.iter().copied()),
        }
        entry.generation = entry.generation.max(removed.generation);
        entry.dirty = true;
        if entry.removed.len() as f64 > entry.index.len() as f64 * REBUILD_REMOVED_SHARE {
            *entry = rebuild(conn, removed.namespace)?;
        }
        Ok(())
    }

    /// The `k` nearest chunks of a namespace with their cosine similarity.
    pub fn search(&mut self, namespace: Namespace, query: &[f32], k: usize) -> anyhow::Result<Vec<(i64, f32)>> {
        let entry = self.indexes.get_mut(&namespace).expect("every namespace has an index");
        let fetch = k + entry.removed.len().min(k * 4);
        let mut hits = entry.index.search(query, fetch)?;
        hits.retain(|(id, _)| !entry.removed.contains(id));
        hits.truncate(k);
        Ok(hits)
    }

    /// Writes every changed index (file, then its generation).
    pub fn save(&mut self) -> anyhow::Result<usize> {
        let mut saved = 0;
        for (namespace, entry) in self.indexes.iter_mut().filter(|(_, e)| e.dirty) {
            let (file, meta_file) = paths(&self.dir, *namespace);
            entry.index.save(&file, &self.key)?;
            let meta = Meta { generation: entry.generation, kind: entry.kind(), max_id: entry.max_id, removed: entry.removed.iter().copied().collect() };
            let partial = meta_file.with_extension("json.tmp");
            std::fs::write(&partial, serde_json::to_vec(&meta)?).with_context(|| format!("cannot write {}", partial.display()))?;
            std::fs::rename(&partial, &meta_file)?;
            entry.dirty = false;
            saved += 1;
        }
        Ok(saved)
    }

    pub fn is_dirty(&self) -> bool {
        self.indexes.values().any(|e| e.dirty)
    }
}
