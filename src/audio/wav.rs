//! WAV files in and out: any rate, channel count and sample format read as
//! 16 kHz mono (`cowork transcribe FILE`), and 16 kHz mono written back.

use std::path::Path;

use anyhow::{Context, bail};

use super::{SAMPLE_RATE, resample};

/// Reads a WAV file as 16 kHz mono f32 samples.
pub fn read_16k_mono(path: &Path) -> anyhow::Result<Vec<f32>> {
    let reader = hound::WavReader::open(path).with_context(|| format!("not a readable WAV file: {}", path.display()))?;
    let spec = reader.spec();
    if spec.channels == 0 {
        bail!("a WAV file without channels: {}", path.display());
    }
    let interleaved: Vec<f32> = match (spec.sample_format, spec.bits_per_sample) {
        (hound::SampleFormat::Float, 32) => reader.into_samples::<f32>().collect::<Result<_, _>>(),
        (hound::SampleFormat::Int, bits @ 1..=32) => {
            let scale = 1.0 / (1u64 << (bits - 1)) as f32;
            reader.into_samples::<i32>().map(|s| s.map(|s| s as f32 * scale)).collect::<Result<_, _>>()
        }
        (format, bits) => bail!("unsupported WAV sample format {format:?} with {bits} bits: {}", path.display()),
    }
    .with_context(|| format!("a damaged WAV file: {}", path.display()))?;
    let mut mono = Vec::with_capacity(interleaved.len() / spec.channels as usize);
    resample::downmix_into(&interleaved, spec.channels as usize, &mut mono);
    resample::to_16k(&mono, spec.sample_rate)
}

/// Writes 16 kHz mono samples as a 16-bit WAV file.
pub fn write_16k_mono(path: &Path, samples: &[f32]) -> anyhow::Result<()> {
    std::fs::write(path, wav_bytes(samples)?).with_context(|| format!("cannot write {}", path.display()))
}

/// 16 kHz mono samples as the bytes of a 16-bit WAV file.
pub fn wav_bytes(samples: &[f32]) -> anyhow::Result<Vec<u8>> {
    let spec = hound::WavSpec { channels: 1, sample_rate: SAMPLE_RATE, bits_per_sample: 16, sample_format: hound::SampleFormat::Int };
    let mut bytes = std::io::Cursor::new(Vec::with_capacity(44 + samples.len() * 2));
    let mut writer = hound::WavWriter::new(&mut bytes, spec)?;
    for sample in samples {
        writer.write_sample((sample.clamp(-1.0, 1.0) * i16::MAX as f32) as i16)?;
    }
    writer.finalize()?;
    Ok(bytes.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_clip_reads_back_and_garbage_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clip.wav");
        let clip: Vec<f32> = (0..1600).map(|i| (i as f32 / 10.0).sin() * 0.3).collect();
        write_16k_mono(&path, &clip).unwrap();
        let back = read_16k_mono(&path).unwrap();
        assert_eq!(back.len(), clip.len());
        assert!(back.iter().zip(&clip).all(|(a, b)| (a - b).abs() < 1e-3));
        let junk = dir.path().join("junk.wav");
        std::fs::write(&junk, b"RIFF....not audio").unwrap();
        let err = read_16k_mono(&junk).unwrap_err();
        assert!(format!("{err:#}").contains("not a readable WAV file"), "{err:#}");
    }
}
