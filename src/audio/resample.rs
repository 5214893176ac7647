//! Any device rate and channel count to 16 kHz mono: channels are averaged,
//! then rubato's FFT resampler (anti-aliased, unlike linear interpolation)
//! changes the rate. A resampler is made per recording, so no tail of the
//! previous one leaks into the next.

use anyhow::Context;
use rubato::{FftFixedIn, Resampler};

use super::SAMPLE_RATE;

/// Input frames per FFT chunk: about 21 ms at 48 kHz.
const CHUNK_FRAMES: usize = 1024;

/// Averages interleaved `channels` into mono, appended to `out`.
pub fn downmix_into(interleaved: &[f32], channels: usize, out: &mut Vec<f32>) {
    if channels <= 1 {
        out.extend_from_slice(interleaved);
        return;
    }
    let scale = 1.0 / channels as f32;
    out.extend(interleaved.chunks_exact(channels).map(|frame| frame.iter().sum::<f32>() * scale));
}

/// Streams mono samples at `input_rate` into 16 kHz.
pub struct To16k {
    resampler: Option<FftFixedIn<f32>>,
    pending: Vec<f32>,
    /// Output samples still to drop: the resampler's delay.
    to_skip: usize,
    /// Input samples taken and output samples given, to flush exactly.
    input_total: usize,
    output_total: usize,
    input_rate: u32,
}

impl To16k {
    pub fn new(input_rate: u32) -> anyhow::Result<Self> {
        anyhow::ensure!((4_000..=384_000).contains(&input_rate), "unsupported sample rate {input_rate} Hz");
        let resampler = if input_rate == SAMPLE_RATE {
            None
        } else {
            Some(
                FftFixedIn::<f32>::new(input_rate as usize, SAMPLE_RATE as usize, CHUNK_FRAMES, 2, 1)
                    .with_context(|| format!("cannot resample {input_rate} Hz to 16 kHz"))?,
            )
        };
        let to_skip = resampler.as_ref().map(|r| r.output_delay()).unwrap_or(0);
        Ok(Self { resampler, pending: Vec::new(), to_skip, input_total: 0, output_total: 0, input_rate })
    }

    /// Feeds mono samples; whatever 16 kHz output is ready is appended to `out`.
    pub fn push(&mut self, mono: &[f32], out: &mut Vec<f32>) {
        self.input_total += mono.len();
        let Some(resampler) = self.resampler.as_mut() else {
            out.extend_from_slice(mono);
            return;
        };
        self.pending.extend_from_slice(mono);
        let mut used = 0;
        while self.pending.len() - used >= resampler.input_frames_next() {
            let take = resampler.input_frames_next();
            // Cannot fail: the input holds exactly the frames asked for, in one channel.
            if let Ok(chunk) = resampler.process(&[&self.pending[used..used + take]], None) {
                Self::emit(&mut self.to_skip, &mut self.output_total, &chunk[0], out);
            }
            used += take;
        }
        self.pending.drain(..used);
    }

    /// Flushes what is buffered: the output then holds every input sample's worth.
    pub fn finish(&mut self, out: &mut Vec<f32>) {
        let Some(resampler) = self.resampler.as_mut() else { return };
        let wanted = (self.input_total as u64 * SAMPLE_RATE as u64 / self.input_rate as u64) as usize;
        let mut pending = std::mem::take(&mut self.pending);
        // Zeros push the last real samples through the resampler's delay.
        while self.output_total < wanted {
            let chunk = if pending.is_empty() { None } else { Some(std::mem::take(&mut pending)) };
            let produced = match chunk {
                Some(input) => resampler.process_partial(Some(&[input.as_slice()]), None),
                None => resampler.process_partial::<&[f32]>(None, None),
            };
            let Ok(produced) = produced else { break };
            if produced[0].is_empty() {
                break;
            }
            let room = wanted - self.output_total + self.to_skip;
            let slice = &produced[0][..produced[0].len().min(room)];
            Self::emit(&mut self.to_skip, &mut self.output_total, slice, out);
        }
    }

    fn emit(to_skip: &mut usize, output_total: &mut usize, chunk: &[f32], out: &mut Vec<f32>) {
        let skip = (*to_skip).min(chunk.len());
        *to_skip -= skip;
        out.extend_from_slice(&chunk[skip..]);
        *output_total += chunk.len() - skip;
    }
}

/// Converts a whole mono clip at `input_rate` to 16 kHz.
pub fn to_16k(mono: &[f32], input_rate: u32) -> anyhow::Result<Vec<f32>> {
    let mut resampler = To16k::new(input_rate)?;
    let mut out = Vec::with_capacity(mono.len() * SAMPLE_RATE as usize / input_rate as usize + 16);
    resampler.push(mono, &mut out);
    resampler.finish(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(rate: u32, hz: f32, seconds: f32) -> Vec<f32> {
        (0..(rate as f32 * seconds) as usize).map(|i| (i as f32 / rate as f32 * hz * std::f32::consts::TAU).sin() * 0.5).collect()
    }

    /// The strength of `hz` in `samples` at 16 kHz (a single DFT bin, normalised).
    fn strength(samples: &[f32], hz: f32) -> f32 {
        let (mut re, mut im) = (0.0f64, 0.0f64);
        for (i, s) in samples.iter().enumerate() {
            let phase = i as f64 / 16_000.0 * hz as f64 * std::f64::consts::TAU;
            re += *s as f64 * phase.cos();
            im += *s as f64 * phase.sin();
        }
        ((re * re + im * im).sqrt() * 2.0 / samples.len() as f64) as f32
    }

    #[test]
    fn a_tone_keeps_its_pitch_length_and_timing_from_every_common_rate() {
        for rate in [8_000, 22_050, 44_100, 48_000, 16_000] {
            let tone = sine(rate, 440.0, 1.0);
            let out = to_16k(&tone, rate).unwrap();
            assert_eq!(out.len(), 16_000, "{rate} Hz");
            // The delay is removed: the tone starts at the start.
            assert!(out[40..200].iter().any(|s| s.abs() > 0.2), "{rate} Hz: the start is silent");
            assert!((strength(&out, 440.0) - 0.5).abs() < 0.05, "{rate} Hz: {}", strength(&out, 440.0));
        }
    }

    #[test]
    fn what_16k_cannot_hold_is_filtered_not_folded_back() {
        // 12 kHz at 48 kHz would alias to 4 kHz with naive decimation.
        let out = to_16k(&sine(48_000, 12_000.0, 1.0), 48_000).unwrap();
        assert!(strength(&out, 4_000.0) < 0.01, "aliased: {}", strength(&out, 4_000.0));
    }

    #[test]
    fn streaming_in_odd_pieces_equals_one_pass() {
        let tone = sine(44_100, 300.0, 0.7);
        let whole = to_16k(&tone, 44_100).unwrap();
        let mut resampler = To16k::new(44_100).unwrap();
        let mut pieces = Vec::new();
        for piece in tone.chunks(333) {
            resampler.push(piece, &mut pieces);
        }
        resampler.finish(&mut pieces);
        assert_eq!(whole.len(), pieces.len());
        assert!(whole.iter().zip(&pieces).all(|(a, b)| (a - b).abs() < 1e-4));
    }

    #[test]
    fn stereo_is_averaged() {
        let mut out = Vec::new();
        downmix_into(&[1.0, 0.0, 0.5, 0.5, -1.0, 1.0], 2, &mut out);
        assert_eq!(out, vec![0.5, 0.5, 0.0]);
    }
}
