//! Embedding with all-MiniLM-L6-v2 on this CPU: batch throughput and one
//! search query. Index and hybrid search speed: `benches/vectors.rs`.

use std::path::PathBuf;

use cowork::embed::{Embedder, model_dir};
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

criterion_group!(benches, embedding);
criterion_main!(benches);
