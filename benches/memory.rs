//! Embedding with all-MiniLM-L6-v2 on this CPU: batch throughput and one
//! search query. Index and hybrid search speed: `benches/vectors.rs`.

use std::path::PathBuf;

use cowork::memory::embed::{Embedder, model_dir};
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

/// What unloading an idle embedding model gives back, and what loading it
/// again costs the first search after a quiet spell (printed, not a criterion
/// sample: a load is a one-off).
fn reload(_c: &mut Criterion) {
    let rss_kb = || {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
            .unwrap_or(0)
    };
    let shared = cowork::memory::embed::SharedEmbedder::new(model_dir(&models_dir()));
    let empty = rss_kb();
    let mut loads = Vec::new();
    let mut loaded_rss = 0;
    let mut unloaded_rss = 0;
    for _ in 0..5 {
        let started = std::time::Instant::now();
        let Ok(model) = shared.get() else {
            eprintln!("embedding model missing: models/fetch installs it");
            return;
        };
        model.embed(&["flight and hotel for the trip"]).unwrap();
        loads.push(started.elapsed().as_secs_f64() * 1000.0);
        loaded_rss = rss_kb();
        drop(model);
        shared.unload_if_idle(std::time::Duration::ZERO);
        unloaded_rss = rss_kb();
    }
    loads.sort_by(f64::total_cmp);
    println!(
        "embedder reload + first query: min {:.0} ms, median {:.0} ms, max {:.0} ms; RSS {} MB before any load, {} MB loaded, {} MB after unloading",
        loads[0],
        loads[loads.len() / 2],
        loads[loads.len() - 1],
        empty / 1024,
        loaded_rss / 1024,
        unloaded_rss / 1024
    );
}

criterion_group!(benches, embedding, reload);
criterion_main!(benches);
