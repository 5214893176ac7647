//! Voice numbers (issue 15), run with `cargo bench --profile dev --bench voice`
//! (needs the models from models/fetch, espeak-ng and sox):
//!
//! - key release → text for a 5 s utterance with tiny.en: what the speech
//!   worker does after the release (VAD, Whisper, the filters), p50/p95 over
//!   20 runs, with the short-clip encoder window and with Whisper's full 30 s;
//! - real-time factor of tiny.en, and of base when installed;
//! - the VAD alone on a minute of quiet room noise, as CPU share of one core
//!   (what listen mode spends while nobody talks);
//! - RSS before Whisper loads, with it loaded (after a transcription), and
//!   after it unloads;
//! - criterion's estimate for the 5 s utterance.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use cowork::audio::transcribe::{DecodeSettings, SpeechModels, Transcriber};
use cowork::audio::wav;
use criterion::{Criterion, criterion_group, criterion_main};

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
        .unwrap_or(0.0)
        / 1024.0
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

/// An espeak-ng utterance cut or padded to exactly `seconds`, at 16 kHz.
fn utterance(dir: &Path, text: &str, seconds: f64) -> Vec<f32> {
    let path = dir.join("utterance.wav");
    let status = Command::new("espeak-ng").arg("-w").arg(&path).arg(text).status().expect("espeak-ng runs");
    assert!(status.success());
    let mut samples = wav::read_16k_mono(&path).unwrap();
    samples.resize((seconds * 16_000.0) as usize, 0.0);
    samples
}

fn bench(c: &mut Criterion) {
    let models_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let manifest = cowork::models::Manifest::bundled().unwrap();
    let models = match SpeechModels::resolve(&manifest, &models_dir, None) {
        Ok(models) => models,
        Err(err) => {
            eprintln!("skipping the voice bench: {err:#}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let five = utterance(dir.path(), "Please open the calendar and schedule a meeting with the design team for tomorrow at ten.", 5.0);

    let before = rss_mib();
    let started = Instant::now();
    let mut transcriber = Transcriber::load(&models, DecodeSettings::default()).unwrap();
    let load_millis = started.elapsed().as_millis();
    let text = transcriber.transcribe(&five, None).unwrap();
    let loaded = rss_mib();
    println!("tiny.en + Silero VAD: loaded in {load_millis} ms; RSS {before:.1} MiB before, {loaded:.1} MiB loaded (+{:.1}); heard {:?}", loaded - before, text.text());

    for short in [true, false] {
        transcriber.set_settings(DecodeSettings { short_clip_context: short, ..DecodeSettings::default() });
        let mut samples: Vec<f64> = (0..20)
            .map(|_| {
                let started = Instant::now();
                let heard = transcriber.transcribe(&five, None).unwrap();
                assert!(heard.text().is_some());
                started.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        let (p50, p95) = (percentile(&mut samples, 0.5), percentile(&mut samples, 0.95));
        println!(
            "release → text, 5 s utterance, tiny.en, {} window: p50 {p50:.0} ms, p95 {p95:.0} ms (real-time factor {:.3})",
            if short { "short-clip" } else { "full 30 s" },
            p50 / 5000.0
        );
    }

    // The VAD alone over a minute of quiet room noise (above the silence gate, below speech).
    let noise_path = dir.path().join("room.wav");
    let status = Command::new("sox").args(["-n", "-r", "16000", "-c", "1"]).arg(&noise_path).args(["synth", "60", "brownnoise", "vol", "0.05"]).status().unwrap();
    assert!(status.success());
    let room = wav::read_16k_mono(&noise_path).unwrap();
    let started = Instant::now();
    let spans = transcriber.detect_speech(&room).unwrap().unwrap();
    let vad_millis = started.elapsed().as_secs_f64() * 1000.0;
    println!("VAD alone on 60 s of room noise: {vad_millis:.0} ms ({:.2} % of one core), {} speech spans", vad_millis / 60_000.0 * 100.0, spans.len());

    drop(transcriber);
    println!("RSS after Whisper unloads: {:.1} MiB", rss_mib());

    // base (multilingual) when installed (models/fetch --with whisper-base): the
    // language fixed to English, and detected (what Settings does), 5 runs each.
    match SpeechModels::resolve(&manifest, &models_dir, Some("whisper-base")) {
        Ok(base) => {
            let rss_before = rss_mib();
            let started = Instant::now();
            let mut transcriber = Transcriber::load(&base, DecodeSettings::default()).unwrap();
            let load_millis = started.elapsed().as_millis();
            for (language, label) in [(Some("en".to_owned()), "English fixed"), (None, "language detected")] {
                transcriber.set_settings(DecodeSettings { language, ..DecodeSettings::default() });
                let mut runs: Vec<f64> = (0..5)
                    .map(|_| {
                        let started = Instant::now();
                        transcriber.transcribe(&five, None).unwrap();
                        started.elapsed().as_secs_f64() * 1000.0
                    })
                    .collect();
                let p50 = percentile(&mut runs, 0.5);
                println!("base, {label}: 5 s in p50 {p50:.0} ms (real-time factor {:.3})", p50 / 5000.0);
            }
            println!("base: loaded in {load_millis} ms, RSS +{:.0} MiB", rss_mib() - rss_before);
        }
        Err(err) => println!("base: not measured ({err:#})"),
    }

    let mut transcriber = Transcriber::load(&models, DecodeSettings::default()).unwrap();
    c.bench_function("transcribe a 5 s utterance (tiny.en, short-clip window)", |b| b.iter(|| transcriber.transcribe(&five, None).unwrap()));
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
