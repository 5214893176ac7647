//! Ingest through the real store worker into a real SQLite file (WAL, FTS5
//! triggers): activity-session rows per second, batched as the worker batches.

use std::time::{Duration, Instant};

use cowork::records::{ActivitySession, SessionEnd};
use cowork::runtime::{EventSink, RestartPolicy};
use cowork::store::StoreCommand;
use cowork::workers::spawn_store;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use crossbeam_channel::bounded;

fn session(session_id: i64) -> ActivitySession {
    ActivitySession {
        session_id,
        app: "firefox".into(),
        title: format!("Issue #{session_id} · cowork — Mozilla Firefox"),
        pid: Some(4242),
        window_id: 77,
        started_at_millis: session_id,
        ended_at_millis: Some(session_id + 1),
        end_reason: Some(SessionEnd::Switch),
        ..Default::default()
    }
}

fn ingest(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (events, _events_rx) = bounded(1 << 16);
    let sink = EventSink::<cowork::events::AppEvent>::new(events, || {});
    let mut store = spawn_store(dir.path().join("cowork.db"), sink, RestartPolicy::default()).unwrap();
    let batch = 10_000i64;
    let mut next = 0i64;
    let mut group = c.benchmark_group("store");
    group.throughput(Throughput::Elements(batch as u64));
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    group.bench_function("ingest_10k_sessions_through_worker", |b| {
        b.iter_custom(|iterations| {
            let started = Instant::now();
            for _ in 0..iterations {
                for _ in 0..batch {
                    next += 1;
                    store.commands.send(cowork::capture::db::session_write(session(next))).unwrap();
                }
                let (ack, done) = bounded(1);
                store.commands.send(StoreCommand::Flush(ack)).unwrap();
                done.recv().unwrap();
            }
            started.elapsed()
        })
    });
    group.finish();
    store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10));
}

/// From handing a finished session to the store worker to finding it through
/// FTS5 on a separate read-only connection (what search will see). Prints p95.
fn capture_to_searchable(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cowork.db");
    let (events, _events_rx) = bounded(1 << 16);
    let mut store = spawn_store(db.clone(), EventSink::<cowork::events::AppEvent>::new(events, || {}), RestartPolicy::default()).unwrap();
    let (ack, done) = bounded(1);
    store.commands.send(StoreCommand::Flush(ack)).unwrap();
    done.recv().unwrap();
    let reader = cowork::store::open_read_only(&db).unwrap();
    let mut next = 10_000_000i64;
    let mut samples = Vec::new();
    let one = |next: &mut i64| -> Duration {
        *next += 1;
        let mut s = session(*next);
        s.title = format!("searchable{next} window");
        let word = format!("searchable{next}");
        let started = Instant::now();
        store.commands.send(cowork::capture::db::session_write(s)).unwrap();
        while cowork::capture::db::search_sessions(&reader, &word, 1).unwrap().is_empty() {
            std::thread::sleep(Duration::from_micros(200));
        }
        started.elapsed()
    };
    for _ in 0..200 {
        samples.push(one(&mut next));
    }
    samples.sort();
    println!(
        "capture -> full-text searchable: p50 {:?}, p95 {:?}, max {:?} (200 samples)",
        samples[100],
        samples[190],
        samples[199]
    );
    c.bench_function("capture_to_searchable", |b| b.iter_custom(|n| (0..n).map(|_| one(&mut next)).sum()));
    store.shutdown(StoreCommand::Shutdown, Duration::from_secs(10));
}

criterion_group!(benches, ingest, capture_to_searchable);
criterion_main!(benches);
