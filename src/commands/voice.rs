//! `cowork transcribe FILE…`: WAV files to text with the same guards as the
//! microphone (VAD, thresholds, filters), the model loaded once.

use std::path::PathBuf;
use std::time::Instant;

use crate::audio::transcribe::{DecodeSettings, Heard, SpeechModels, Transcriber};
use crate::audio::{millis_for_samples, wav};
use crate::config::Paths;
use crate::models::Manifest;

pub struct TranscribeOptions {
    pub files: Vec<PathBuf>,
    pub model: Option<String>,
    pub json: bool,
    /// Whisper's full 30 s window even for short clips.
    pub full_context: bool,
    /// Skip the VAD (the energy gate and Whisper's own guards remain).
    pub no_vad: bool,
}

/// Transcribes each file; false when one could not be read.
pub fn transcribe(paths: &Paths, options: TranscribeOptions) -> anyhow::Result<bool> {
    let manifest = Manifest::bundled()?;
    let mut models = SpeechModels::resolve(&manifest, &paths.models_dir, options.model.as_deref())?;
    if options.no_vad {
        models.vad = None;
    } else if models.vad.is_none() {
        eprintln!("no VAD model (run models/fetch): only the energy gate and Whisper's own guards keep silence out");
    }
    let started = Instant::now();
    let settings = DecodeSettings { short_clip_context: !options.full_context, ..DecodeSettings::default() };
    let mut transcriber = Transcriber::load(&models, settings)?;
    eprintln!("loaded {} in {} ms", models.whisper.display(), started.elapsed().as_millis());
    let mut all_read = true;
    for file in &options.files {
        let samples = match wav::read_16k_mono(file) {
            Ok(samples) => samples,
            Err(err) => {
                eprintln!("{err:#}");
                all_read = false;
                continue;
            }
        };
        let heard = transcriber.transcribe(&samples, None)?;
        let audio_millis = millis_for_samples(samples.len());
        if options.json {
            let value = match &heard {
                Heard::Speech(t) => serde_json::json!({
                    "file": file, "heard": true, "text": t.text, "confidence": t.confidence, "language": t.language, "audio_millis": audio_millis,
                    "speech_millis": t.speech_millis, "audio_ctx": t.audio_ctx, "elapsed_millis": t.elapsed_millis,
                    "segments": t.segments.iter().map(|s| serde_json::json!({"start_millis": s.start_millis, "end_millis": s.end_millis, "text": s.text, "confidence": s.confidence})).collect::<Vec<_>>(),
                }),
                Heard::Nothing(why) => serde_json::json!({"file": file, "heard": false, "why": why.describe(), "audio_millis": audio_millis}),
            };
            println!("{value}");
        } else {
            match &heard {
                Heard::Speech(t) => {
                    println!("{}", t.text);
                    let factor = audio_millis as f64 / t.elapsed_millis.max(1) as f64;
                    eprintln!("{}: confidence {:.2}, {} ms of audio in {} ms ({factor:.1}× real time)", file.display(), t.confidence, audio_millis, t.elapsed_millis);
                }
                Heard::Nothing(why) => eprintln!("{}: {}", file.display(), why.describe()),
            }
        }
    }
    Ok(all_read)
}
