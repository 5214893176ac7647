//! Voice in: the microphone and the computer's own output (`mic`, through
//! cpal's PulseAudio host), their conversion to 16 kHz mono (`resample`, and
//! `wav` for files), and transcription with whisper.cpp gated by its Silero
//! VAD (`transcribe`). The `audio` worker (`worker`) owns the microphone and
//! opens it only while the user talks to cowork; the `speech` worker owns the
//! Whisper and VAD models, loaded while needed. No egui in here.

pub mod dictate;
pub mod events;
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
