//! Speech to text on the device: whisper.cpp (through whisper-rs) gated by
//! its own Silero VAD, with every guard the peers added only after users
//! reported invented "Thank you"s on silence. In order:
//!
//! 1. a clip under 100 ms, or one whose loudest 30 ms stays under the
//!    microphone's self-noise (RMS 0.005), is "heard nothing" at once;
//! 2. Silero VAD (2 threads, not whisper.cpp's default 4) keeps the speech and
//!    100 ms around it; no speech is "heard nothing" and Whisper never runs.
//!    Nothing is padded: padding short clips with silence is what made Handy
//!    hallucinate (its PR #1229);
//! 3. Whisper decodes with `no_context` (no earlier text as a prompt),
//!    `suppress_blank`, non-speech tokens suppressed, temperature 0 with a
//!    fallback ladder of 0.2, the entropy, log-probability and no-speech
//!    thresholds; for clips up to 22.5 s the encoder's window shrinks to
//!    `max(50·s + 128, 384)` frames (voxtype's rule) when the setting is on;
//! 4. segments whisper.cpp marks as likely non-speech are dropped, bracketed
//!    annotations (`[BLANK_AUDIO]`, `(music)`) removed, a phrase repeated three
//!    or more times in a row kept once, and a lone stock phrase ("thank you",
//!    "thanks for watching") heard with low confidence dropped.
//!
//! Each kept utterance carries its confidence: the mean probability of its
//! text tokens. Runs on the `speech` worker.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, anyhow};
use whisper_rs::{FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters, WhisperState, WhisperVadContext, WhisperVadContextParams, WhisperVadParams};

use super::{millis_for_samples, rms, samples_for_millis};

/// A clip shorter than this is not transcribed (whisper.cpp's own floor).
pub const MIN_CLIP_MILLIS: u64 = 100;
/// Below this RMS in every 30 ms frame, a clip is the microphone's self-noise
/// (~0.0001–0.001); whispered speech starts around 0.01 (Handy PR #1229).
pub const SILENCE_RMS: f32 = 0.005;
/// Speech kept before and after what the VAD marks, in milliseconds.
const SPEECH_PAD_MILLIS: i32 = 100;
/// A gap this long between two stretches of speech is shortened to `GAP_KEPT_MILLIS`.
const GAP_SHORTENED_MILLIS: u64 = 600;
const GAP_KEPT_MILLIS: u64 = 300;
/// A segment whisper.cpp rates this likely to be non-speech is dropped,
/// whatever its log-probability (whisper.cpp drops it only when both agree).
const NO_SPEECH_DROP: f32 = 0.8;
/// A lone stock phrase below this confidence is taken for a hallucination.
const STOCK_PHRASE_CONFIDENCE: f32 = 0.7;
/// Phrases Whisper invents on silence and noise (screenpipe #86/#525, Handy #402).
const STOCK_PHRASES: &[&str] = &[
    "thank you",
    "thank you very much",
    "thanks",
    "thanks for watching",
    "thank you for watching",
    "thank you so much for watching",
    "please subscribe",
    "you",
    "bye",
    "so",
    "okay",
    "subtitles by the amaraorg community",
];

/// The models a transcriber loads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpeechModels {
    /// whisper.cpp's ggml Whisper file.
    pub whisper: PathBuf,
    /// whisper.cpp's ggml Silero VAD file; without it only the energy gate guards.
    pub vad: Option<PathBuf>,
    /// An English-only (`.en`) model: the language is fixed to English.
    pub english_only: bool,
}

impl SpeechModels {
    /// The speech model called `chosen` (else the manifest's first) and the
    /// VAD model, when their files are present; an error names what is missing.
    pub fn resolve(manifest: &crate::models::Manifest, models_dir: &Path, chosen: Option<&str>) -> anyhow::Result<Self> {
        use crate::models::{ModelRole, check_file};
        let speech: Vec<_> = manifest.models.iter().filter(|m| m.role == ModelRole::Speech).collect();
        let model = match chosen {
            Some(name) => speech.iter().find(|m| m.name == name).with_context(|| {
                let names: Vec<&str> = speech.iter().map(|m| m.name.as_str()).collect();
                format!("no speech model named {name:?}; the manifest has {}", names.join(", "))
            })?,
            None => speech.first().context("the model manifest lists no speech model")?,
        };
        let (size, sha256) = model.primary_size_and_sha();
        let whisper = crate::models::safe_join(models_dir, model.primary_path())?;
        let check = check_file(&whisper, size, sha256, false);
        anyhow::ensure!(check.is_ok(), "speech model {}: {}", model.name, check.describe(&whisper));
        let vad = manifest.by_role(ModelRole::Vad).and_then(|vad| {
            let (size, sha256) = vad.primary_size_and_sha();
            let path = crate::models::safe_join(models_dir, vad.primary_path()).ok()?;
            check_file(&path, size, sha256, false).is_ok().then_some(path)
        });
        Ok(Self { whisper, vad, english_only: model.name.ends_with("-en") })
    }
}

/// Whether Whisper knows `code` as a language (`en`, `de`, `pt`…).
pub fn is_language(code: &str) -> bool {
    !code.contains('\0') && code != "auto" && whisper_rs::get_lang_id(code).is_some()
}

/// How a transcriber decodes.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeSettings {
    /// Shrink the encoder window for clips up to 22.5 s.
    pub short_clip_context: bool,
    /// Whisper's threads (2 on this machine kind: one per core).
    pub threads: i32,
    /// Silero VAD's threads, at most 2.
    pub vad_threads: i32,
    /// An ISO code, or None to detect (multilingual models only).
    pub language: Option<String>,
}

impl Default for DecodeSettings {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        Self { short_clip_context: true, threads: cores.clamp(1, 4) as i32, vad_threads: cores.clamp(1, 2) as i32, language: None }
    }
}

/// Why nothing was transcribed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Silence {
    TooShort,
    /// Below the microphone's self-noise throughout.
    TooQuiet,
    /// The VAD found no speech.
    NoSpeech,
    /// Whisper's output was dropped by a guard.
    Filtered(&'static str),
}

impl Silence {
    pub fn describe(self) -> String {
        match self {
            Silence::TooShort => "heard nothing (too short)".into(),
            Silence::TooQuiet => "heard nothing (only silence)".into(),
            Silence::NoSpeech => "heard nothing (no speech)".into(),
            Silence::Filtered(why) => format!("heard nothing ({why})"),
        }
    }
}

/// One stretch of text with its time in the clip that was given.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub start_millis: u64,
    pub end_millis: u64,
    pub text: String,
    pub confidence: f32,
}

/// What was said in a clip.
#[derive(Clone, Debug, PartialEq)]
pub struct Transcript {
    pub text: String,
    /// Mean probability of the text tokens, 0–1.
    pub confidence: f32,
    pub segments: Vec<Segment>,
    /// Speech the VAD kept (what Whisper decoded), in milliseconds.
    pub speech_millis: u64,
    /// The encoder window used (1500 is Whisper's full 30 s).
    pub audio_ctx: i32,
    /// VAD and Whisper together.
    pub elapsed_millis: u64,
    /// The language spoken (ISO 639-1): fixed for an English-only model,
    /// detected by a multilingual one unless Settings fixes it.
    pub language: String,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Heard {
    Speech(Transcript),
    Nothing(Silence),
}

impl Heard {
    pub fn text(&self) -> Option<&str> {
        match self {
            Heard::Speech(t) => Some(&t.text),
            Heard::Nothing(_) => None,
        }
    }
}

/// Whisper (and the VAD) loaded, with one decoding state reused across clips.
pub struct Transcriber {
    state: WhisperState,
    vad: Option<WhisperVadContext>,
    settings: DecodeSettings,
    english_only: bool,
    token_eot: i32,
    pub models: SpeechModels,
}

impl Transcriber {
    /// Loads the models after checking their files in Rust (whisper.cpp trusts
    /// the shapes it reads).
    pub fn load(models: &SpeechModels, settings: DecodeSettings) -> anyhow::Result<Self> {
        crate::models::whisper_convert::validate_ggml(&models.whisper)?;
        whisper_rs::install_logging_hooks();
        let context = WhisperContext::new_with_params(path_str(&models.whisper)?, WhisperContextParameters::default())
            .map_err(|err| anyhow!("whisper.cpp cannot load {}: {err}", models.whisper.display()))?;
        let state = context.create_state().map_err(|err| anyhow!("whisper.cpp cannot create a decoding state: {err}"))?;
        let vad = models.vad.as_deref().map(|path| load_vad(path, settings.vad_threads)).transpose()?;
        let token_eot = context.token_eot();
        // The state holds the model (an Arc inside whisper-rs), so the context itself need not be kept.
        Ok(Self { state, vad, settings, english_only: models.english_only, token_eot, models: models.clone() })
    }

    pub fn set_settings(&mut self, settings: DecodeSettings) {
        self.settings = settings;
    }

    /// Transcribes 16 kHz mono samples. `cancel` stops a decode early (an error).
    pub fn transcribe(&mut self, samples: &[f32], cancel: Option<Arc<AtomicBool>>) -> anyhow::Result<Heard> {
        let started = Instant::now();
        if millis_for_samples(samples.len()) < MIN_CLIP_MILLIS {
            return Ok(Heard::Nothing(Silence::TooShort));
        }
        if loudest_frame_rms(samples) < SILENCE_RMS {
            return Ok(Heard::Nothing(Silence::TooQuiet));
        }
        let speech = match self.vad.as_mut() {
            Some(vad) => {
                let spans = speech_spans(vad, samples)?;
                if spans.is_empty() {
                    return Ok(Heard::Nothing(Silence::NoSpeech));
                }
                SpeechClip::from_spans(samples, &spans)
            }
            None => SpeechClip::whole(samples),
        };
        if millis_for_samples(speech.samples.len()) < MIN_CLIP_MILLIS {
            return Ok(Heard::Nothing(Silence::TooShort));
        }
        let audio_ctx = if self.settings.short_clip_context { short_clip_audio_ctx(speech.samples.len()) } else { 0 };
        let mut params = FullParams::new(SamplingStrategy::Greedy { best_of: 1 });
        params.set_n_threads(self.settings.threads.max(1));
        params.set_no_context(true);
        params.set_suppress_blank(true);
        params.set_suppress_nst(true);
        params.set_temperature(0.0);
        params.set_temperature_inc(0.2);
        params.set_entropy_thold(2.4);
        params.set_logprob_thold(-1.0);
        params.set_no_speech_thold(0.6);
        params.set_audio_ctx(audio_ctx);
        params.set_print_progress(false);
        params.set_print_realtime(false);
        params.set_print_special(false);
        params.set_print_timestamps(false);
        let language = if self.english_only { Some("en") } else { self.settings.language.as_deref() };
        match language {
            Some(language) => params.set_language(Some(language)),
            None => params.set_language(Some("auto")),
        }
        if let Some(cancel) = cancel {
            params.set_abort_callback_safe(move || cancel.load(Ordering::Relaxed));
        }
        self.state.full(params, &speech.samples).map_err(|err| anyhow!("whisper.cpp could not transcribe: {err}"))?;
        let mut segments = Vec::new();
        let mut token_probabilities = Vec::new();
        for segment in self.state.as_iter() {
            if segment.no_speech_probability() > NO_SPEECH_DROP {
                continue;
            }
            let mut probabilities = Vec::new();
            for index in 0..segment.n_tokens() {
                if let Some(token) = segment.get_token(index)
                    && token.token_id() < self.token_eot
                {
                    probabilities.push(token.token_probability());
                }
            }
            let text = clean_text(&segment.to_str_lossy().map_err(|err| anyhow!("whisper.cpp returned unreadable text: {err}"))?);
            if text.is_empty() {
                continue;
            }
            let confidence = mean(&probabilities);
            token_probabilities.extend(probabilities);
            // Centiseconds in the speech clip, back to milliseconds in the clip given.
            let start = speech.original_millis(segment.start_timestamp().max(0) as u64 * 10);
            let end = speech.original_millis(segment.end_timestamp().max(0) as u64 * 10);
            segments.push(Segment { start_millis: start, end_millis: end.max(start), text, confidence });
        }
        let joined = segments.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join(" ");
        let text = collapse_repeats(&joined);
        if text.is_empty() {
            return Ok(Heard::Nothing(Silence::Filtered("only non-speech")));
        }
        let confidence = mean(&token_probabilities);
        if is_stock_phrase(&text) && confidence < STOCK_PHRASE_CONFIDENCE {
            return Ok(Heard::Nothing(Silence::Filtered("a phrase Whisper invents on silence")));
        }
        Ok(Heard::Speech(Transcript {
            text,
            confidence,
            segments,
            speech_millis: millis_for_samples(speech.samples.len()),
            audio_ctx: if audio_ctx == 0 { 1500 } else { audio_ctx },
            elapsed_millis: started.elapsed().as_millis() as u64,
            language: match language {
                Some(language) => language.to_owned(),
                None => whisper_rs::get_lang_str(self.state.full_lang_id_from_state()).unwrap_or("unknown").to_owned(),
            },
        }))
    }

    /// Stretches of speech in `samples` (start, end in samples), for callers
    /// that only need to know whether anyone spoke (listen mode's gate).
    pub fn detect_speech(&mut self, samples: &[f32]) -> anyhow::Result<Option<Vec<(usize, usize)>>> {
        match self.vad.as_mut() {
            Some(vad) => speech_spans(vad, samples).map(Some),
            None => Ok(None),
        }
    }

    /// Whether these are the models loaded.
    pub fn is_loaded(&self, models: &SpeechModels) -> bool {
        &self.models == models
    }
}

/// Loads the Silero VAD model after checking its file in Rust, on at most 2 threads.
pub fn load_vad(path: &Path, threads: i32) -> anyhow::Result<WhisperVadContext> {
    crate::models::silero_convert::validate(path)?;
    whisper_rs::install_logging_hooks();
    let mut params = WhisperVadContextParams::new();
    params.set_n_threads(threads.clamp(1, 2));
    WhisperVadContext::new(path_str(path)?, params).map_err(|err| anyhow!("whisper.cpp cannot load the VAD model {}: {err}", path.display()))
}

fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str().with_context(|| format!("the model path is not UTF-8: {}", path.display()))
}

fn mean(values: &[f32]) -> f32 {
    if values.is_empty() { 0.0 } else { values.iter().sum::<f32>() / values.len() as f32 }
}

/// RMS of the loudest 30 ms frame.
pub fn loudest_frame_rms(samples: &[f32]) -> f32 {
    samples.chunks(samples_for_millis(30)).map(rms).fold(0.0, f32::max)
}

/// The encoder window for a clip of `samples` (0 means Whisper's full 1500):
/// voxtype's `max(50·s + 128, 384)`, rounded up to a multiple of 8, up to 22.5 s.
pub fn short_clip_audio_ctx(samples: usize) -> i32 {
    let seconds = samples as f64 / super::SAMPLE_RATE as f64;
    if seconds > 22.5 {
        return 0;
    }
    let frames = (50.0 * seconds + 128.0).ceil().max(384.0) as i32;
    ((frames + 7) / 8 * 8).min(1500)
}

/// Speech stretches the VAD finds, padded, in samples.
pub fn speech_spans(vad: &mut WhisperVadContext, samples: &[f32]) -> anyhow::Result<Vec<(usize, usize)>> {
    let mut params = WhisperVadParams::new();
    params.set_threshold(0.5);
    params.set_min_speech_duration(250);
    params.set_min_silence_duration(100);
    params.set_speech_pad(SPEECH_PAD_MILLIS);
    let segments = vad.segments_from_samples(params, samples).map_err(|err| anyhow!("the VAD could not run: {err}"))?;
    let to_sample = |centis: f32| ((centis.max(0.0) as f64 * 160.0) as usize).min(samples.len());
    Ok(segments.map(|s| (to_sample(s.start), to_sample(s.end))).filter(|(start, end)| end > start).collect())
}

/// The speech Whisper decodes, and where each piece came from.
struct SpeechClip {
    samples: Vec<f32>,
    /// (offset in the clip, offset in the original, length), in samples.
    pieces: Vec<(usize, usize, usize)>,
}

impl SpeechClip {
    fn whole(samples: &[f32]) -> Self {
        Self { samples: samples.to_vec(), pieces: vec![(0, 0, samples.len())] }
    }

    /// Joins the spans, shortening long pauses between them to 300 ms.
    fn from_spans(samples: &[f32], spans: &[(usize, usize)]) -> Self {
        let mut clip = Self { samples: Vec::new(), pieces: Vec::new() };
        let mut previous_end: Option<usize> = None;
        for &(start, end) in spans {
            let start = previous_end.map_or(start, |p| start.max(p));
            if start >= end {
                continue;
            }
            if let Some(previous) = previous_end {
                let gap = start - previous;
                if gap > samples_for_millis(GAP_SHORTENED_MILLIS) {
                    clip.samples.extend(std::iter::repeat_n(0.0, samples_for_millis(GAP_KEPT_MILLIS)));
                } else {
                    clip.pieces.push((clip.samples.len(), previous, gap));
                    clip.samples.extend_from_slice(&samples[previous..start]);
                }
            }
            clip.pieces.push((clip.samples.len(), start, end - start));
            clip.samples.extend_from_slice(&samples[start..end]);
            previous_end = Some(end);
        }
        clip
    }

    /// Maps a time in the decoded clip back to the clip that was given.
    fn original_millis(&self, clip_millis: u64) -> u64 {
        let at = samples_for_millis(clip_millis);
        let piece = self.pieces.iter().rev().find(|(offset, _, _)| *offset <= at).or(self.pieces.first());
        match piece {
            Some(&(offset, original, length)) => millis_for_samples(original + (at.saturating_sub(offset)).min(length)),
            None => clip_millis,
        }
    }
}

/// Removes annotations Whisper writes for non-speech (`[BLANK_AUDIO]`,
/// `(music)`, `*laughs*`, `♪`) and tidies the spaces.
pub fn clean_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut closing: Option<char> = None;
    for c in text.chars() {
        match closing {
            Some(close) if c == close => closing = None,
            Some(_) => {}
            None => match c {
                '[' => closing = Some(']'),
                '(' => closing = Some(')'),
                '*' => closing = Some('*'),
                '♪' | '♫' => {}
                _ => out.push(c),
            },
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Keeps once a phrase (1–8 words) that repeats three or more times in a row.
pub fn collapse_repeats(text: &str) -> String {
    let mut words: Vec<&str> = text.split_whitespace().collect();
    let key = |w: &str| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    let mut changed = true;
    while changed {
        changed = false;
        'outer: for width in 1..=8usize {
            let mut start = 0;
            while start + width * 3 <= words.len() {
                let same = |a: usize, b: usize| (0..width).all(|i| key(words[a + i]) == key(words[b + i]));
                let mut repeats = 1;
                while start + width * (repeats + 1) <= words.len() && same(start, start + width * repeats) {
                    repeats += 1;
                }
                if repeats >= 3 {
                    words.drain(start + width..start + width * repeats);
                    changed = true;
                    break 'outer;
                }
                start += 1;
            }
        }
    }
    words.join(" ")
}

fn is_stock_phrase(text: &str) -> bool {
    let normalised: String = text.chars().filter(|c| c.is_alphanumeric() || c.is_whitespace()).collect::<String>().to_lowercase();
    let normalised = normalised.split_whitespace().collect::<Vec<_>>().join(" ");
    STOCK_PHRASES.contains(&normalised.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_for_non_speech_are_removed() {
        assert_eq!(clean_text(" [BLANK_AUDIO] "), "");
        assert_eq!(clean_text("(music) Hello *laughs* there ♪"), "Hello there");
        assert_eq!(clean_text("Open the  calendar."), "Open the calendar.");
    }

    #[test]
    fn a_phrase_repeated_three_times_is_kept_once() {
        assert_eq!(collapse_repeats("thank you thank you thank you"), "thank you");
        assert_eq!(collapse_repeats("I'm going to use the other side. I'm going to use the other side. I'm going to use the other side."), "I'm going to use the other side.");
        assert_eq!(collapse_repeats("so so so so so what"), "so what");
        // Twice is how people speak; it stays.
        assert_eq!(collapse_repeats("very very good"), "very very good");
        assert_eq!(collapse_repeats("open it, open it now"), "open it, open it now");
    }

    #[test]
    fn stock_phrases_match_whatever_the_punctuation() {
        assert!(is_stock_phrase("Thank you."));
        assert!(is_stock_phrase(" Thanks for watching!"));
        assert!(!is_stock_phrase("Thank you for the report on billing."));
    }

    #[test]
    fn the_encoder_window_shrinks_only_for_short_clips() {
        let samples = |s: f64| (s * 16_000.0) as usize;
        assert_eq!(short_clip_audio_ctx(samples(1.0)), 384);
        assert_eq!(short_clip_audio_ctx(samples(5.0)), 384);
        assert_eq!(short_clip_audio_ctx(samples(10.0)), 632);
        assert_eq!(short_clip_audio_ctx(samples(22.5)), 1256);
        assert_eq!(short_clip_audio_ctx(samples(23.0)), 0);
        assert!(short_clip_audio_ctx(samples(12.3)) % 8 == 0);
    }

    #[test]
    fn joined_speech_maps_back_to_the_original_time() {
        let samples = vec![0.1f32; samples_for_millis(5_000)];
        // Speech at 0.5–1.0 s and 3.0–3.5 s: the 2 s pause becomes 300 ms.
        let spans = [(samples_for_millis(500), samples_for_millis(1_000)), (samples_for_millis(3_000), samples_for_millis(3_500))];
        let clip = SpeechClip::from_spans(&samples, &spans);
        assert_eq!(millis_for_samples(clip.samples.len()), 500 + 300 + 500);
        assert_eq!(clip.original_millis(0), 500);
        assert_eq!(clip.original_millis(400), 900);
        assert_eq!(clip.original_millis(800), 3_000);
        assert_eq!(clip.original_millis(1_300), 3_500);
        // A short pause is kept as it was.
        let near = [(samples_for_millis(500), samples_for_millis(1_000)), (samples_for_millis(1_200), samples_for_millis(1_500))];
        let clip = SpeechClip::from_spans(&samples, &near);
        assert_eq!(millis_for_samples(clip.samples.len()), 1_000);
        assert_eq!(clip.original_millis(900), 1_400);
    }

    #[test]
    fn silence_is_below_the_gate_and_a_voice_is_above() {
        assert!(loudest_frame_rms(&vec![0.0005; 16_000]) < SILENCE_RMS);
        let mut clip = vec![0.0; 16_000];
        clip[8_000..8_480].iter_mut().enumerate().for_each(|(i, s)| *s = (i as f32 * 0.2).sin() * 0.05);
        assert!(loudest_frame_rms(&clip) > SILENCE_RMS);
    }
}
