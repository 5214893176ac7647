//! Probes that exercise each native library for `cowork doctor`: faiss (a tiny
//! index search), whisper.cpp (a context from the model; the VAD on silence), SQLite (FTS5).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, ensure};
use faiss::{Index, MetricType, index_factory};

/// Builds a flat inner-product index, adds three vectors and checks the nearest.
pub fn faiss_probe() -> anyhow::Result<String> {
    let started = Instant::now();
    let mut index = index_factory(4, "Flat", MetricType::InnerProduct).context("faiss index_factory failed")?;
    let vectors = [1.0f32, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, std::f32::consts::FRAC_1_SQRT_2, std::f32::consts::FRAC_1_SQRT_2];
    index.add(&vectors).context("faiss add failed")?;
    let result = index.search(&[0.0, 0.1, 0.7, 0.7], 1).context("faiss search failed")?;
    let nearest = result.labels.first().and_then(|label| label.get());
    ensure!(nearest == Some(2), "faiss returned {nearest:?}, expected vector 2");
    Ok(format!("flat index search ok ({} µs)", started.elapsed().as_micros()))
}

/// Creates a whisper.cpp context (and state) from a ggml model file.
pub fn whisper_probe(model: &Path) -> anyhow::Result<String> {
    crate::models::whisper_convert::validate_ggml(model)?;
    whisper_rs::install_logging_hooks();
    let started = Instant::now();
    let path = model.to_str().context("model path is not UTF-8")?;
    let ctx = whisper_rs::WhisperContext::new_with_params(path, whisper_rs::WhisperContextParameters::default())
        .with_context(|| format!("whisper.cpp cannot load {}", model.display()))?;
    let _state = ctx.create_state().context("whisper.cpp cannot create a state")?;
    Ok(format!("context created in {} ms", started.elapsed().as_millis()))
}

/// Loads the Silero VAD model in whisper.cpp (2 threads) and runs it on a
/// second of silence, which must hold no speech.
pub fn vad_probe(model: &Path) -> anyhow::Result<String> {
    let started = Instant::now();
    let mut vad = crate::audio::transcribe::load_vad(model, 2)?;
    let spans = crate::audio::transcribe::speech_spans(&mut vad, &[0.0; 16_000])?;
    ensure!(spans.is_empty(), "the VAD heard speech in silence");
    Ok(format!("loaded and ran in {} ms", started.elapsed().as_millis()))
}

/// Checks that the linked SQLite has FTS5 and reports its version.
pub fn sqlite_probe() -> anyhow::Result<String> {
    let conn = rusqlite::Connection::open_in_memory()?;
    conn.execute_batch("CREATE VIRTUAL TABLE t USING fts5(x); INSERT INTO t VALUES ('hello world');")?;
    let hits: i64 = conn.query_row("SELECT count(*) FROM t WHERE t MATCH 'hello'", [], |r| r.get(0))?;
    ensure!(hits == 1, "FTS5 query returned {hits} rows");
    Ok(format!("SQLite {} with FTS5", rusqlite::version()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn faiss_finds_the_nearest_vector() {
        super::faiss_probe().unwrap();
    }

    #[test]
    fn sqlite_has_fts5() {
        super::sqlite_probe().unwrap();
    }
}
