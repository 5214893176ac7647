//! Voice in, on the device: the microphone and the computer's own output
//! (`mic`, through cpal's PulseAudio host), their conversion to 16 kHz mono
//! (`resample`, and `wav` for files), and transcription with whisper.cpp gated
//! by its Silero VAD (`transcribe`). The `audio` worker (`worker`) owns the
//! microphone and opens it only while the user talks to cowork (`ptt` turns
//! presses into starts and stops), and types dictation (`dictate`); the
//! `speech` worker owns the Whisper and VAD models, loaded while needed; the
//! `listen` worker is listen mode (`segment` cuts its audio into chunks,
//! `transcripts` keeps what was heard). No egui in here: the UI's `VoiceView`
//! (`state.rs`, `ui::voice`) shows the indicator, the meter and the last
//! outcome, and a transcript lands in the input it was spoken into, to edit,
//! unless "send when I release" is on.
//!
//! Invariants:
//! - A microphone stream exists only inside the `audio` worker's recording
//!   (while the user talks to cowork) or the `listen` worker's open streams
//!   (while listen mode is on, consented, and neither paused nor in quiet
//!   hours); the status bar and the tray show whenever one does.
//! - Audio never leaves the process; it is written to disk only by the `listen`
//!   worker, only when the user keeps audio, only for chunks in which Whisper
//!   heard speech, and every file belongs to a row (the store removes orphans).
//!   The `speech` worker is the only place Whisper runs.
//! - whisper.cpp reads only model files that Rust has validated first
//!   (`models::whisper_convert::validate_ggml`,
//!   `models::silero_convert::validate`).
//! - Dictation types only what the user said, only into the display the user is
//!   on, never a line break, tab or other control key, and never while a
//!   modifier key is held.
//!
//! whisper.cpp's threads spin while they wait for each other: two
//! transcriptions at once on two cores slow each other down many times over (a
//! test saw 24 s for a 3 s clip), so there is one speech worker, and the tests
//! that run Whisper take turns (`support::whisper_turn`).

pub mod dictate;
pub mod events;
pub mod inuse;
pub mod listen;
pub mod mic;
pub mod ptt;
pub mod resample;
pub mod segment;
pub mod transcribe;
pub mod transcripts;
pub mod wav;
pub mod worker;

/// The rate Whisper and Silero VAD take, in samples per second.
pub const SAMPLE_RATE: u32 = 16_000;

/// Samples in `millis` of 16 kHz audio.
pub const fn samples_for_millis(millis: u64) -> usize {
    (millis * SAMPLE_RATE as u64 / 1000) as usize
}

/// Milliseconds of 16 kHz audio in `samples`.
pub const fn millis_for_samples(samples: usize) -> u64 {
    samples as u64 * 1000 / SAMPLE_RATE as u64
}

/// Root mean square of `samples` (0 for none).
pub fn rms(samples: &[f32]) -> f32 {
    if samples.is_empty() {
        return 0.0;
    }
    (samples.iter().map(|s| s * s).sum::<f32>() / samples.len() as f32).sqrt()
}
