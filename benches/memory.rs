//! Memory and search: embedding throughput with all-MiniLM-L6-v2 on this CPU,
//! and exact (flat, inner product) faiss search at 10k and 100k vectors.

use std::path::PathBuf;

use cowork::embed::{DIMENSIONS, Embedder, model_dir};
use cowork::vectors::VectorIndex;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models")
}

fn embedding(c: &mut Criterion) {
    let Ok(embedder) = Embedder::load(&model_dir(&models_dir())) else {
        eprintln!("embedding model missing: models/fetch installs it");
        return;
    };
    // Chunks like capture produces: window titles and short typed passages.
    let texts: Vec<String> = (0..32)
        .map(|i| format!("Quarterly budget review {i} - Google Sheets - Chromium: revenue, hiring plan and travel costs for team {i}"))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut group = c.benchmark_group("embed");
    group.throughput(Throughput::Elements(refs.len() as u64));
    group.sample_size(10);
    group.bench_function("minilm_batch_32_chunks", |b| b.iter(|| embedder.embed(&refs).unwrap()));
    group.finish();
    // One search query, as search-as-you-type and recall embed it.
    let mut group = c.benchmark_group("embed_query");
    group.sample_size(20);
    group.bench_function("minilm_one_query", |b| b.iter(|| embedder.embed(&["flight and hotel for the trip"]).unwrap()));
    group.finish();
}

fn unit_vectors(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(n * DIMENSIONS);
    for _ in 0..n {
        let row: Vec<f32> = (0..DIMENSIONS)
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

fn flat_search(c: &mut Criterion) {
    let mut group = c.benchmark_group("faiss_flat");
    for n in [10_000usize, 100_000] {
        let data = unit_vectors(n, 42);
        let ids: Vec<i64> = (0..n as i64).collect();
        let mut index = VectorIndex::flat(DIMENSIONS).unwrap();
        index.add(&ids, &data).unwrap();
        let queries = unit_vectors(64, 7);
        let mut q = 0;
        group.bench_function(format!("top10_of_{n}"), |b| {
            b.iter(|| {
                q = (q + 1) % 64;
                index.search(&queries[q * DIMENSIONS..(q + 1) * DIMENSIONS], 10).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, embedding, flat_search);
criterion_main!(benches);
