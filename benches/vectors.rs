//! Vector indexes and hybrid search at scale: a repeatable measurement
//! (percentiles and recall, which criterion does not report), run with
//!
//!     cargo bench --profile dev --bench vectors                 # 10k and 100k
//!     COWORK_BENCH_SIZES=10000,100000,1000000 cargo bench --profile dev --bench vectors
//!     COWORK_BENCH_ONLY=hybrid …                                # one part: index or hybrid
//!
//! For each size: build time, RSS the index adds, top-10 search p50/p95 for
//! exact (flat) and HNSW, and HNSW's recall@10 against exact. The vectors are
//! synthetic but shaped like sentence embeddings (unit vectors around 2,000
//! topic centres), because embedding a million real chunks takes 4 hours here.
//! Then hybrid search end to end (real MiniLM query embedding, FTS5 over the
//! same number of typed chunks, faiss, fusion) over a real SQLite file.

use std::time::Instant;

use cowork::memory::embed::{DIMENSIONS, Embedder, model_dir};
use cowork::memory::vectors::{Kind, VectorIndex};

#[path = "support/memory.rs"]
mod memory;
use memory::{Rng, clustered, normalise};

fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0.0);
    pages * 4096.0 / 1_048_576.0
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn timed_searches(index: &mut VectorIndex, queries: &[f32], k: usize) -> (Vec<Vec<i64>>, f64, f64) {
    let mut results = Vec::new();
    let mut millis = Vec::new();
    for q in queries.chunks(DIMENSIONS) {
        let started = Instant::now();
        let hits = index.search(q, k).unwrap();
        millis.push(started.elapsed().as_secs_f64() * 1000.0);
        results.push(hits.into_iter().map(|(id, _)| id).collect());
    }
    let p50 = percentile(&mut millis.clone(), 0.5);
    let p95 = percentile(&mut millis, 0.95);
    (results, p50, p95)
}

fn index_at(n: usize) {
    let data = clustered(n, 2_000, 42);
    let ids: Vec<i64> = (0..n as i64).collect();
    // Queries: perturbed copies of stored vectors, as a paraphrase would be.
    let mut rng = Rng(99);
    let mut queries = Vec::new();
    for i in 0..200 {
        let at = (i * 104_729) % n;
        let mut q: Vec<f32> = data[at * DIMENSIONS..(at + 1) * DIMENSIONS].iter().map(|x| x + 0.05 * rng.next()).collect();
        normalise(&mut q);
        queries.extend(q);
    }
    let mut report = Vec::new();
    let mut exact = Vec::new();
    for kind in [Kind::Flat, Kind::Hnsw] {
        let before = rss_mib();
        let started = Instant::now();
        let mut index = VectorIndex::new(kind, DIMENSIONS).unwrap();
        for (chunk_ids, chunk) in ids.chunks(50_000).zip(data.chunks(50_000 * DIMENSIONS)) {
            index.add(chunk_ids, chunk).unwrap();
        }
        let build = started.elapsed().as_secs_f64();
        let memory = rss_mib() - before;
        let (results, p50, p95) = timed_searches(&mut index, &queries, 10);
        let recall = if kind == Kind::Flat {
            exact = results;
            1.0
        } else {
            let hit: usize = results.iter().zip(&exact).map(|(r, e)| r.iter().filter(|id| e.contains(id)).count()).sum();
            hit as f64 / (exact.len() * 10) as f64
        };
        report.push(format!(
            "{n:>9} {:<5} build {build:>7.1} s  +RSS {memory:>7.0} MiB  top-10 p50 {p50:>7.3} ms  p95 {p95:>7.3} ms  recall@10 {recall:.3}",
            format!("{kind:?}").to_lowercase()
        ));
        drop(index);
    }
    for line in report {
        println!("{line}");
    }
}

/// Hybrid search over `n` typed chunks in a real SQLite file, each with a vector.
fn hybrid_at(n: usize, embedder: &Embedder) {
    use cowork::memory::{Namespace, index::IndexSet};
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let db = memory::typed_chunks(dir.path(), n);
    let filled = started.elapsed().as_secs_f64();
    let reader = cowork::store::open_read_only(&db).unwrap();
    let started = Instant::now();
    let (mut indexes, _) = IndexSet::open(&dir.path().join("vectors"), &reader).unwrap();
    let opened = started.elapsed().as_secs_f64();
    let kind = indexes.get(Namespace::Activity).kind();
    let queries = ["budget meeting notes", "flight and hotel for the trip", "kubernetes deploy failed", "login bug on safari", "insurance and passport"];
    let mut millis = Vec::new();
    let (mut keyword, mut vector) = (Vec::new(), Vec::new());
    for round in 0..20 {
        for q in queries {
            let started = Instant::now();
            let outcome = cowork::memory::hybrid::hybrid_search(&reader, Ok((embedder, &mut indexes)), q, &Default::default(), 20).unwrap();
            if round > 0 {
                millis.push(started.elapsed().as_secs_f64() * 1000.0);
                keyword.push(outcome.keyword_millis);
                vector.push(outcome.vector_millis);
            }
        }
    }
    println!(
        "hybrid over {n:>9} chunks ({kind:?}; filled in {filled:.0} s, index opened in {opened:.1} s): p50 {:.1} ms  p95 {:.1} ms  (keyword half p95 {:.1} ms, vector half incl. query embedding p95 {:.1} ms)",
        percentile(&mut millis.clone(), 0.5),
        percentile(&mut millis, 0.95),
        percentile(&mut keyword, 0.95),
        percentile(&mut vector, 0.95)
    );
}

fn main() {
    // `cargo bench` passes --bench; this is a plain program.
    let sizes: Vec<usize> = std::env::var("COWORK_BENCH_SIZES")
        .unwrap_or_else(|_| "10000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let only = std::env::var("COWORK_BENCH_ONLY").unwrap_or_default();
    println!("threads: {}", std::thread::available_parallelism().map_or(1, |n| n.get()));
    if only != "hybrid" {
        for &n in &sizes {
            index_at(n);
        }
    }
    if only == "index" {
        return;
    }
    let Ok(embedder) = Embedder::load(&model_dir(&std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models"))) else {
        eprintln!("embedding model missing: models/fetch installs it");
        return;
    };
    for &n in &sizes {
        hybrid_at(n, &embedder);
    }
}
