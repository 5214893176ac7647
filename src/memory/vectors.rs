//! Vector indexes with faiss: exact inner product (`IDMap,Flat`) over unit
//! vectors, so scores are cosine similarities. Ids are the rows' own ids
//! (session, chunk, message), so a deletion removes exactly its vectors.
//! An index persists next to the database and records the generation of the
//! data it was built from, so a stale or missing one is rebuilt from SQLite.
//! A large namespace uses `IDMap,HNSW32` instead (see `memory::index`). Each
//! search runs with faiss's OpenMP team limited to the calling thread: its
//! spinning threads took the cores from the query's embedding.

use std::path::Path;

use anyhow::{Context, bail};
use faiss::index::{FromInnerPtr, IndexImpl};
use faiss::selector::IdSelector;
use faiss::{Idx, Index, MetricType, index_factory};

use crate::sealed::{self, SealKey, SealedReader, SealedWriter};

pub struct VectorIndex {
    index: IndexImpl,
    dimensions: usize,
    kind: Kind,
}

/// Exact search, or HNSW's approximate graph search (faster on large sets,
/// but faiss cannot remove from it: callers filter removed ids instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Flat,
    Hnsw,
}

/// HNSW graph degree, construction and search breadth (see `benches/memory.rs`).
pub const HNSW_M: usize = 32;
pub const HNSW_EF_CONSTRUCTION: usize = 64;
pub const HNSW_EF_SEARCH: usize = 96;

impl VectorIndex {
    /// An empty exact index for `dimensions`-wide vectors.
    pub fn flat(dimensions: usize) -> anyhow::Result<Self> {
        let index = index_factory(dimensions as u32, "IDMap,Flat", MetricType::InnerProduct).context("faiss: cannot create a flat index")?;
        Ok(Self { index, dimensions, kind: Kind::Flat })
    }

    /// An empty HNSW index for `dimensions`-wide vectors.
    pub fn hnsw(dimensions: usize) -> anyhow::Result<Self> {
        let description = format!("IDMap,HNSW{HNSW_M}");
        let index = index_factory(dimensions as u32, &description, MetricType::InnerProduct).context("faiss: cannot create an HNSW index")?;
        let mut made = Self { index, dimensions, kind: Kind::Hnsw };
        made.tune()?;
        Ok(made)
    }

    pub fn new(kind: Kind, dimensions: usize) -> anyhow::Result<Self> {
        match kind {
            Kind::Flat => Self::flat(dimensions),
            Kind::Hnsw => Self::hnsw(dimensions),
        }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    fn tune(&mut self) -> anyhow::Result<()> {
        if self.kind == Kind::Hnsw {
            let space = faiss::index::autotune::ParameterSpace::new().context("faiss: parameter space")?;
            space.set_index_parameter(&self.index, "efSearch", HNSW_EF_SEARCH as f64).context("faiss: efSearch")?;
            space.set_index_parameter(&self.index, "efConstruction", HNSW_EF_CONSTRUCTION as f64).context("faiss: efConstruction")?;
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.index.ntotal() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `vectors` (row-major, one per id).
    pub fn add(&mut self, ids: &[i64], vectors: &[f32]) -> anyhow::Result<()> {
        if vectors.len() != ids.len() * self.dimensions {
            bail!("{} vectors of width {} do not match {} ids", vectors.len() / self.dimensions.max(1), self.dimensions, ids.len());
        }
        let ids: Vec<Idx> = ids.iter().map(|id| Idx::new(*id as u64)).collect();
        self.index.add_with_ids(vectors, &ids).context("faiss: add failed")
    }

    /// Removes the vectors of `ids`; returns how many there were. Flat only
    /// (faiss's HNSW cannot remove).
    pub fn remove(&mut self, ids: &[i64]) -> anyhow::Result<usize> {
        if ids.is_empty() {
            return Ok(0);
        }
        if self.kind == Kind::Hnsw {
            bail!("an HNSW index cannot remove vectors");
        }
        let ids: Vec<Idx> = ids.iter().map(|id| Idx::new(*id as u64)).collect();
        let selector = IdSelector::batch(&ids).context("faiss: id selector")?;
        self.index.remove_ids(&selector).context("faiss: remove failed")
    }

    /// The `k` nearest ids with their cosine similarity, best first.
    pub fn search(&mut self, query: &[f32], k: usize) -> anyhow::Result<Vec<(i64, f32)>> {
        if self.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let result = on_this_thread_only(|| self.index.search(query, k)).context("faiss: search failed")?;
        Ok(result
            .labels
            .iter()
            .zip(result.distances)
            .filter_map(|(label, score)| label.get().map(|id| (id as i64, score)))
            .collect())
    }

    /// Writes the index to `path`, sealed as faiss streams it (a new file
    /// synced and renamed over the old; see `crate::sealed`).
    pub fn save(&self, path: &Path, key: &SealKey) -> anyhow::Result<()> {
        let writer = SealedWriter::create(path, key)?;
        let ((), writer) = sealed::with_file_writer(writer, |file| {
            // SAFETY: a live index and a FILE open for writing until this returns.
            let status = unsafe { faiss_sys::faiss_write_index(self.index.inner_ptr(), file as *mut faiss_sys::FILE) };
            faiss_status(status).with_context(|| format!("cannot write {}", path.display()))
        })?;
        writer.finish()
    }

    /// Reads an index written by `save`; a damaged file, one sealed with
    /// another key or one from before sealing is an error (the caller rebuilds).
    pub fn load(path: &Path, dimensions: usize, kind: Kind, key: &SealKey) -> anyhow::Result<Self> {
        let reader = SealedReader::open(path, key)?;
        let index = sealed::with_file_reader(reader, |file| {
            let mut inner = std::ptr::null_mut();
            // SAFETY: a FILE open for reading until this returns; faiss hands back a new index or an error.
            let status = unsafe { faiss_sys::faiss_read_index(file as *mut faiss_sys::FILE, 0, &mut inner) };
            faiss_status(status)?;
            // SAFETY: a CPU index faiss just made, owned by nothing else.
            Ok(unsafe { IndexImpl::from_inner_ptr(inner) })
        })
        .with_context(|| format!("cannot read the vector index {}", path.display()))?;
        if index.d() as usize != dimensions {
            bail!("{} holds {}-wide vectors, expected {dimensions}", path.display(), index.d());
        }
        let mut loaded = Self { index, dimensions, kind };
        loaded.tune()?;
        Ok(loaded)
    }
}

/// faiss's C API status as a result, with faiss's own message.
fn faiss_status(status: std::ffi::c_int) -> anyhow::Result<()> {
    if status == 0 {
        return Ok(());
    }
    // SAFETY: faiss's last error is a thread-local C string (or null).
    let message = unsafe {
        let text = faiss_sys::faiss_get_last_error();
        if text.is_null() { String::new() } else { std::ffi::CStr::from_ptr(text).to_string_lossy().into_owned() }
    };
    bail!("faiss: {}", message.lines().next().unwrap_or("an error"))
}

unsafe extern "C" {
    // OpenMP, which faiss is built with (libgomp).
    fn omp_get_max_threads() -> std::ffi::c_int;
    fn omp_set_num_threads(threads: std::ffi::c_int);
}

/// Runs `f` with faiss's OpenMP team limited to the calling thread.
///
/// One query gains nothing from the team, but its threads then spin for
/// milliseconds waiting for more work, on the same two cores where the query
/// embedding's gemm runs: hybrid search p95 at 10k went from 20 ms to 10 ms
/// without them. The setting is per thread, so index builds (the only
/// bulk faiss work, on whichever thread rebuilds) keep every core.
fn on_this_thread_only<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: plain OpenMP runtime calls on the calling thread's own setting.
    let before = unsafe { omp_get_max_threads() };
    unsafe { omp_set_num_threads(1) };
    let out = f();
    unsafe { omp_set_num_threads(before) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random unit vectors.
    fn vectors(n: usize, d: usize, seed: u64) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut out = Vec::with_capacity(n * d);
        for _ in 0..n {
            let row: Vec<f32> = (0..d)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state % 2000) as f32 / 1000.0 - 1.0
                })
                .collect();
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            out.extend(row.iter().map(|x| x / norm));
        }
        out
    }

    #[test]
    fn exact_search_finds_itself_deletions_stick_and_the_file_round_trips() {
        let d = 32;
        let data = vectors(500, d, 7);
        let ids: Vec<i64> = (0..500).map(|i| 1_000_000 + i * 3).collect();
        let mut index = VectorIndex::flat(d).unwrap();
        index.add(&ids, &data).unwrap();
        assert_eq!(index.len(), 500);
        let query = &data[42 * d..43 * d];
        let hits = index.search(query, 5).unwrap();
        assert_eq!(hits[0].0, ids[42]);
        assert!((hits[0].1 - 1.0).abs() < 1e-4, "{hits:?}");
        assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!(index.remove(&[ids[42], 5]).unwrap(), 1);
        assert!(index.search(query, 5).unwrap().iter().all(|(id, _)| *id != ids[42]), "a deleted vector is never found");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("activity.faiss");
        let key = SealKey::from_bytes(&[3; 32]);
        index.save(&path, &key).unwrap();
        let mut again = VectorIndex::load(&path, d, Kind::Flat, &key).unwrap();
        assert_eq!(again.len(), 499);
        assert_eq!(again.search(&data[7 * d..8 * d], 1).unwrap()[0].0, ids[7]);
        assert!(VectorIndex::load(&path, 64, Kind::Flat, &key).err().unwrap().to_string().contains("expected 64"));
        let err = VectorIndex::load(&path, d, Kind::Flat, &SealKey::from_bytes(&[4; 32])).err().unwrap();
        assert!(format!("{err:#}").contains("does not open"), "{err:#}");
        // The vectors are not on disk as floats.
        let raw = std::fs::read(&path).unwrap();
        let floats: Vec<u8> = data[7 * d..7 * d + 8].iter().flat_map(|f| f.to_le_bytes()).collect();
        assert!(!raw.windows(floats.len()).any(|w| w == floats.as_slice()));
        std::fs::write(&path, b"garbage").unwrap();
        assert!(VectorIndex::load(&path, d, Kind::Flat, &key).is_err());
        assert!(index.add(&[1], &data[..d - 1]).is_err());
    }
}
