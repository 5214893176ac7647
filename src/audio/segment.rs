//! Listen mode's segmenter: 16 kHz audio in, speech chunks out. Each second
//! is judged once — a quiet second (RMS below [`QUIET_RMS`]) is silence
//! without asking the VAD, anything louder goes to the speech detector — and
//! a chunk ends after [`END_SILENCE_MILLIS`] without speech or at
//! [`MAX_CHUNK_MILLIS`]. The 300 ms before speech is kept so a first
//! syllable is not cut. Pure: the detector and the clock come in as
//! arguments, so tests drive it with synthetic audio.

use super::{millis_for_samples, rms, samples_for_millis};

/// Audio judged at a time: one second.
pub const WINDOW: usize = samples_for_millis(1_000);
/// Below this RMS a second is silence, and the VAD is not run (room tone of a
/// real microphone is ~0.001–0.003; speech at a normal distance is > 0.02).
pub const QUIET_RMS: f32 = 0.002;
/// Audio kept before the first speech of a chunk.
pub const PREROLL_MILLIS: u64 = 300;
/// A chunk ends after this long without speech.
pub const END_SILENCE_MILLIS: u64 = 800;
/// A chunk is cut here even while someone is still talking.
pub const MAX_CHUNK_MILLIS: u64 = 30_000;
/// Silence kept after the last speech of a chunk.
const TAIL_MILLIS: u64 = 200;

/// Finds speech in one window: spans in samples, empty for none.
pub trait Detector {
    fn speech(&mut self, window: &[f32]) -> anyhow::Result<Vec<(usize, usize)>>;
}

/// Speech to transcribe, with when it was said (wall clock, milliseconds).
#[derive(Clone, Debug, PartialEq)]
pub struct Chunk {
    pub started_at_millis: i64,
    pub ended_at_millis: i64,
    pub samples: Vec<f32>,
}

struct Speaking {
    samples: Vec<f32>,
    started_at_millis: i64,
    /// Samples at the end of `samples` since the last speech.
    trailing_silence: usize,
}

/// What the segmenter did, for the CPU figures and the status line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentStats {
    pub windows: u64,
    /// Windows the VAD judged (the rest were quiet).
    pub vad_runs: u64,
    pub chunks: u64,
}

#[derive(Default)]
pub struct Segmenter {
    pending: Vec<f32>,
    pending_at_millis: i64,
    preroll: Vec<f32>,
    speaking: Option<Speaking>,
    pub stats: SegmentStats,
}

impl Segmenter {
    /// Adds `samples`, the first of which was heard at `at_millis` (used when
    /// nothing is pending: the stream is taken as continuous), and returns
    /// the chunks that ended.
    pub fn push(&mut self, samples: &[f32], at_millis: i64, detector: &mut dyn Detector) -> anyhow::Result<Vec<Chunk>> {
        if self.pending.is_empty() {
            self.pending_at_millis = at_millis;
        }
        self.pending.extend_from_slice(samples);
        let mut chunks = Vec::new();
        while self.pending.len() >= WINDOW {
            let window: Vec<f32> = self.pending.drain(..WINDOW).collect();
            let window_at = self.pending_at_millis;
            self.pending_at_millis += millis_for_samples(WINDOW) as i64;
            self.stats.windows += 1;
            let spans = if rms(&window) < QUIET_RMS {
                Vec::new()
            } else {
                self.stats.vad_runs += 1;
                detector.speech(&window)?
            };
            if let Some(chunk) = self.judge(window, window_at, &spans) {
                chunks.push(chunk);
            }
        }
        Ok(chunks)
    }

    fn judge(&mut self, window: Vec<f32>, window_at: i64, spans: &[(usize, usize)]) -> Option<Chunk> {
        let first_speech = spans.iter().map(|&(start, _)| start.min(window.len())).min();
        let last_speech_end = spans.iter().map(|&(_, end)| end.min(window.len())).max();
        match (&mut self.speaking, last_speech_end) {
            (None, None) => {
                self.keep_preroll(&window);
                return None;
            }
            (None, Some(end)) => {
                let mut samples = std::mem::take(&mut self.preroll);
                // From PREROLL before the first speech (which may be late in this second).
                let skip = (samples.len() + first_speech.unwrap_or(0)).saturating_sub(samples_for_millis(PREROLL_MILLIS));
                let started_at_millis = window_at - millis_for_samples(samples.len()) as i64 + millis_for_samples(skip) as i64;
                samples.extend_from_slice(&window);
                samples.drain(..skip.min(samples.len()));
                self.speaking = Some(Speaking { samples, started_at_millis, trailing_silence: window.len() - end });
            }
            (Some(speaking), end) => {
                speaking.samples.extend_from_slice(&window);
                speaking.trailing_silence = match end {
                    Some(end) => window.len() - end,
                    None => speaking.trailing_silence + window.len(),
                };
            }
        }
        let speaking = self.speaking.as_ref().expect("set above");
        let ended = speaking.trailing_silence >= samples_for_millis(END_SILENCE_MILLIS);
        let too_long = millis_for_samples(speaking.samples.len()) >= MAX_CHUNK_MILLIS;
        if !(ended || too_long) {
            return None;
        }
        if ended {
            self.keep_preroll(&window);
        } else {
            // Cut mid-speech: the next chunk starts where this one stopped.
            self.preroll.clear();
        }
        self.finish()
    }

    fn keep_preroll(&mut self, window: &[f32]) {
        let keep = samples_for_millis(PREROLL_MILLIS).min(window.len());
        self.preroll.clear();
        self.preroll.extend_from_slice(&window[window.len() - keep..]);
    }

    /// The chunk being spoken, trimmed to its speech and a short tail.
    fn finish(&mut self) -> Option<Chunk> {
        let mut speaking = self.speaking.take()?;
        let cut = speaking.trailing_silence.saturating_sub(samples_for_millis(TAIL_MILLIS));
        speaking.samples.truncate(speaking.samples.len() - cut.min(speaking.samples.len()));
        if speaking.samples.is_empty() {
            return None;
        }
        self.stats.chunks += 1;
        let ended_at_millis = speaking.started_at_millis + millis_for_samples(speaking.samples.len()) as i64;
        Some(Chunk { started_at_millis: speaking.started_at_millis, ended_at_millis, samples: speaking.samples })
    }

    /// The stream closed: what was being said becomes a chunk (with what is
    /// pending of the last second), and the rest is forgotten.
    pub fn flush(&mut self) -> Option<Chunk> {
        let pending = std::mem::take(&mut self.pending);
        self.preroll.clear();
        if let Some(speaking) = self.speaking.as_mut() {
            speaking.samples.extend_from_slice(&pending);
            speaking.trailing_silence = 0;
        }
        self.finish()
    }

    /// Whether someone is being heard right now.
    pub fn in_speech(&self) -> bool {
        self.speaking.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Speech wherever the signal is loud, at 100 ms resolution.
    struct Loudness;
    impl Detector for Loudness {
        fn speech(&mut self, window: &[f32]) -> anyhow::Result<Vec<(usize, usize)>> {
            let step = samples_for_millis(100);
            Ok(window
                .chunks(step)
                .enumerate()
                .filter(|(_, part)| rms(part) > 0.05)
                .map(|(i, part)| (i * step, i * step + part.len()))
                .collect())
        }
    }

    fn tone(millis: u64) -> Vec<f32> {
        (0..samples_for_millis(millis)).map(|i| 0.3 * (i as f32 * 0.05).sin()).collect()
    }

    fn quiet(millis: u64, level: f32) -> Vec<f32> {
        (0..samples_for_millis(millis)).map(|i| if i % 2 == 0 { level } else { -level }).collect()
    }

    #[test]
    fn speech_between_silences_is_one_chunk_with_its_time_and_a_little_before() {
        let mut segmenter = Segmenter::default();
        let mut audio = quiet(2_000, 0.0);
        audio.extend(quiet(500, 0.0));
        audio.extend(tone(2_500));
        audio.extend(quiet(3_000, 0.0));
        let chunks = segmenter.push(&audio, 1_000_000, &mut Loudness).unwrap();
        assert_eq!(chunks.len(), 1, "{:?}", chunks.iter().map(|c| (c.started_at_millis, c.ended_at_millis)).collect::<Vec<_>>());
        let chunk = &chunks[0];
        // Speech ran from 2.5 s to 5 s: the chunk starts 300 ms before and ends 200 ms after.
        assert_eq!(chunk.started_at_millis, 1_000_000 + 2_200);
        assert_eq!(chunk.ended_at_millis, 1_000_000 + 5_200);
        assert_eq!(chunk.samples.len(), samples_for_millis(3_000));
        assert!(!segmenter.in_speech());
    }

    #[test]
    fn silence_and_room_tone_never_reach_the_vad_and_never_make_a_chunk() {
        struct Never;
        impl Detector for Never {
            fn speech(&mut self, _: &[f32]) -> anyhow::Result<Vec<(usize, usize)>> {
                panic!("the VAD ran on silence")
            }
        }
        let mut segmenter = Segmenter::default();
        let chunks = segmenter.push(&quiet(60_000, 0.001), 0, &mut Never).unwrap();
        assert!(chunks.is_empty());
        assert_eq!(segmenter.stats, SegmentStats { windows: 60, vad_runs: 0, chunks: 0 });
        assert_eq!(segmenter.flush(), None);
    }

    #[test]
    fn noise_the_vad_rejects_makes_no_chunk() {
        let mut segmenter = Segmenter::default();
        // Loud enough to be judged, but the detector hears no speech in it.
        struct Nothing;
        impl Detector for Nothing {
            fn speech(&mut self, _: &[f32]) -> anyhow::Result<Vec<(usize, usize)>> {
                Ok(Vec::new())
            }
        }
        assert!(segmenter.push(&quiet(10_000, 0.2), 0, &mut Nothing).unwrap().is_empty());
        assert_eq!(segmenter.stats.vad_runs, 10);
    }

    #[test]
    fn long_talk_is_cut_at_the_limit_and_a_closing_stream_keeps_what_was_said() {
        let mut segmenter = Segmenter::default();
        let chunks = segmenter.push(&tone(45_000), 0, &mut Loudness).unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].samples.len(), samples_for_millis(MAX_CHUNK_MILLIS));
        assert!(segmenter.in_speech(), "still talking after the cut");
        let rest = segmenter.flush().unwrap();
        assert_eq!(rest.started_at_millis, 30_000, "no overlap with the cut chunk");
        assert_eq!(rest.ended_at_millis, 45_000);
    }

    #[test]
    fn a_short_pause_inside_a_sentence_does_not_split_it() {
        let mut segmenter = Segmenter::default();
        let mut audio = tone(1_000);
        audio.extend(quiet(500, 0.0));
        audio.extend(tone(1_500));
        audio.extend(quiet(2_000, 0.0));
        let chunks = segmenter.push(&audio, 0, &mut Loudness).unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].ended_at_millis, 3_200);
    }
}
