//! Synthetic memory for the benches: vectors shaped like sentence
//! embeddings and a real cowork.db holding `n` typed chunks with them.
#![allow(dead_code)]

use cowork::memory::embed::DIMENSIONS;

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 20_000) as f32 / 10_000.0 - 1.0
    }
}

pub fn normalise(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
}

/// `n` unit vectors scattered around `centres` topics.
pub fn clustered(n: usize, centres: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed | 1);
    let mut centre_rng = Rng(0x9E37_79B9_7F4A_7C15);
    let centre_vectors: Vec<Vec<f32>> = (0..centres)
        .map(|_| {
            let mut c: Vec<f32> = (0..DIMENSIONS).map(|_| centre_rng.next()).collect();
            normalise(&mut c);
            c
        })
        .collect();
    let mut out = Vec::with_capacity(n * DIMENSIONS);
    for i in 0..n {
        let centre = &centre_vectors[(i * 7919) % centres];
        let mut v: Vec<f32> = centre.iter().map(|c| c + 0.09 * rng.next()).collect();
        normalise(&mut v);
        out.extend(v);
    }
    out
}

/// A cowork.db in `dir` with `n` typed chunks, each embedded (synthetic vectors).
pub fn typed_chunks(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    let db = dir.join("cowork.db");
    let conn = cowork::store::open_writer(&db).unwrap();
    let words = [
        "budget", "invoice", "meeting", "deploy", "release", "kubernetes", "recipe", "flight", "hotel", "report", "review", "design",
        "figma", "rust", "python", "bug", "login", "safari", "insurance", "passport", "podcast", "sleep", "trail", "laptop",
    ];
    let vectors = clustered(n, 2_000, 7);
    let tx = conn.unchecked_transaction().unwrap();
    {
        let mut typed = tx
            .prepare("INSERT INTO keystroke_chunks (chunk_id, app, title, started_at_ms, ended_at_ms, text, flush_reason) VALUES (?1, 'gedit', 'notes', ?2, ?2, ?3, 'enter')")
            .unwrap();
        let mut chunk = tx
            .prepare("INSERT INTO memory_chunks (chunk_id, namespace, source, source_id, text, at_ms, job_id, vector) VALUES (?1, 'activity', 'typing', ?1, ?2, ?3, 1, ?4)")
            .unwrap();
        tx.execute("INSERT INTO embed_jobs (job_id, state, total_chunks, created_at_ms, updated_at_ms) VALUES (1, 'done', 0, 0, 0)", []).unwrap();
        for i in 0..n {
            let text = format!("{} {} {} note {i}", words[i % words.len()], words[(i / 24) % words.len()], words[(i / 576) % words.len()]);
            let at = 1_700_000_000_000i64 + i as i64 * 1000;
            typed.execute(rusqlite::params![i as i64 + 1, at, text]).unwrap();
            let blob = cowork::memory::jobs::to_blob(&vectors[i * DIMENSIONS..(i + 1) * DIMENSIONS]);
            chunk.execute(rusqlite::params![i as i64 + 1, text, at, blob]).unwrap();
        }
    }
    tx.execute("DELETE FROM embed_queue", []).unwrap();
    tx.execute("UPDATE index_generations SET generation = 1 WHERE namespace = 'activity'", []).unwrap();
    tx.commit().unwrap();
    db
}
