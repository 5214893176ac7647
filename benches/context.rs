//! Layer-1 context assembly: direct SQL over recent sessions plus rendering
//! within the token budget, on a database holding 100k sessions.

use cowork::llm::context::layer1_context;
use cowork::records::{ActivitySession, SessionEnd};
use cowork::capture::db::upsert_session;
use cowork::store::open_writer;
use criterion::{Criterion, criterion_group, criterion_main};

fn context(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    // Encrypted, as cowork keeps it.
    let conn = open_writer(&dir.path().join("cowork.db")).unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    for i in 0..100_000i64 {
        let session = ActivitySession {
            session_id: i,
            app: ["firefox", "XTerm", "code", "slack"][i as usize % 4].into(),
            title: format!("Window number {i} with a realistic length title"),
            pid: Some(1),
            window_id: 1,
            started_at_millis: i * 1_000,
            ended_at_millis: (i < 99_999).then_some(i * 1_000 + 900),
            end_reason: (i < 99_999).then_some(SessionEnd::Switch),
            ..Default::default()
        };
        upsert_session(&tx, &session).unwrap();
    }
    tx.commit().unwrap();
    let now = 100_000 * 1_000;
    c.bench_function("layer1_context_100k_sessions_400_tokens", |b| {
        b.iter(|| layer1_context(&conn, now, 400).unwrap().unwrap())
    });
}

criterion_group!(benches, context);
criterion_main!(benches);
