//! Converts Silero VAD's 16 kHz weights, as the `silero-vad` PyPI package ships
//! them (`silero_vad/data/silero_vad_16k.safetensors`), into the ggml file
//! whisper.cpp's own VAD loads (`whisper_vad_init_from_file_with_params`).
//!
//! The layout follows whisper.cpp's `models/convert-silero-vad-to-ggml.py`,
//! which reads the same weights from the TorchScript model under other names:
//! a header (magic, model type `silero-16k`, version, window 512, context 64,
//! the four encoder convolutions' channels and kernel, the LSTM and final
//! convolution sizes), then each tensor as (n_dims, name length, type, dims
//! reversed, name, data). Convolution weights and the STFT basis are f16, the
//! rest f32. [`validate`] reads a file back the same way, so a damaged one is
//! refused in Rust rather than handed to native code that trusts its shapes.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail, ensure};
use half::f16;
use safetensors::{Dtype, SafeTensors};

const GGML_MAGIC: u32 = 0x6767_6d6c;
const MODEL_TYPE: &str = "silero-16k";
/// Samples per VAD window at 16 kHz, and the context carried between windows.
const WINDOW_SAMPLES: i32 = 512;
const CONTEXT_SAMPLES: i32 = 64;

/// One tensor as whisper.cpp names and stores it.
struct Planned {
    /// Name in `silero_vad_16k.safetensors`.
    source: &'static str,
    /// Name whisper.cpp looks up.
    target: &'static str,
    /// Shape in ggml order (innermost first), as whisper.cpp creates it.
    ggml_shape: &'static [usize],
    half: bool,
}

/// Every tensor whisper.cpp's loader creates, in the reference converter's order.
const PLAN: &[Planned] = &[
    Planned { source: "conv1.weight", target: "_model.encoder.0.reparam_conv.weight", ggml_shape: &[3, 129, 128], half: true },
    Planned { source: "conv1.bias", target: "_model.encoder.0.reparam_conv.bias", ggml_shape: &[128], half: false },
    Planned { source: "conv2.weight", target: "_model.encoder.1.reparam_conv.weight", ggml_shape: &[3, 128, 64], half: true },
    Planned { source: "conv2.bias", target: "_model.encoder.1.reparam_conv.bias", ggml_shape: &[64], half: false },
    Planned { source: "conv3.weight", target: "_model.encoder.2.reparam_conv.weight", ggml_shape: &[3, 64, 64], half: true },
    Planned { source: "conv3.bias", target: "_model.encoder.2.reparam_conv.bias", ggml_shape: &[64], half: false },
    Planned { source: "conv4.weight", target: "_model.encoder.3.reparam_conv.weight", ggml_shape: &[3, 64, 128], half: true },
    Planned { source: "conv4.bias", target: "_model.encoder.3.reparam_conv.bias", ggml_shape: &[128], half: false },
    Planned { source: "lstm_cell.weight_ih", target: "_model.decoder.rnn.weight_ih", ggml_shape: &[128, 512], half: false },
    Planned { source: "lstm_cell.weight_hh", target: "_model.decoder.rnn.weight_hh", ggml_shape: &[128, 512], half: false },
    Planned { source: "lstm_cell.bias_ih", target: "_model.decoder.rnn.bias_ih", ggml_shape: &[512], half: false },
    Planned { source: "lstm_cell.bias_hh", target: "_model.decoder.rnn.bias_hh", ggml_shape: &[512], half: false },
    Planned { source: "final_conv.weight", target: "_model.decoder.decoder.2.weight", ggml_shape: &[128], half: true },
    Planned { source: "final_conv.bias", target: "_model.decoder.decoder.2.bias", ggml_shape: &[1], half: false },
    Planned { source: "stft_conv.weight", target: "_model.stft.forward_basis_buffer", ggml_shape: &[256, 1, 258], half: true },
];

/// The hyper-parameters after the version: window, context, the encoder
/// layers (in, out, kernel each), LSTM input and hidden, final conv in and out.
fn hyper_parameters() -> Vec<i32> {
    let mut values = vec![WINDOW_SAMPLES, CONTEXT_SAMPLES, 4];
    for (input, output) in [(129, 128), (128, 64), (64, 64), (64, 128)] {
        values.extend([input, output, 3]);
    }
    values.extend([128, 128, 128, 1]);
    values
}

/// Parses `6.2.3` (or `silero-vad==6.2.3`) into the three numbers the header carries.
pub fn parse_version(text: &str) -> anyhow::Result<[i32; 3]> {
    let version = text.rsplit("==").next().unwrap_or(text);
    let parts: Vec<i32> = version.split('.').map(str::parse).collect::<Result<_, _>>().with_context(|| format!("not a version: {text:?}"))?;
    let [major, minor, patch] = parts[..] else { bail!("not a major.minor.patch version: {text:?}") };
    Ok([major, minor, patch])
}

/// Converts `safetensors` (the package's 16 kHz weights) into `output`,
/// written beside it first and renamed when complete.
pub fn convert(safetensors: &Path, version: [i32; 3], output: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(safetensors).with_context(|| format!("cannot read {}", safetensors.display()))?;
    let ggml = to_ggml(&bytes, version).with_context(|| format!("cannot convert {}", safetensors.display()))?;
    let partial = output.with_extension("part");
    let mut file = std::fs::File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
    file.write_all(&ggml)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&partial, output).with_context(|| format!("cannot rename {} into place", partial.display()))?;
    Ok(())
}

/// The ggml file for the weights in `safetensors_bytes`.
pub fn to_ggml(safetensors_bytes: &[u8], version: [i32; 3]) -> anyhow::Result<Vec<u8>> {
    let tensors = SafeTensors::deserialize(safetensors_bytes).context("not a safetensors file")?;
    let mut out = Vec::with_capacity(1_300_000);
    let int = |out: &mut Vec<u8>, value: i32| out.extend_from_slice(&value.to_le_bytes());
    out.extend_from_slice(&GGML_MAGIC.to_le_bytes());
    int(&mut out, MODEL_TYPE.len() as i32);
    out.extend_from_slice(MODEL_TYPE.as_bytes());
    for part in version {
        int(&mut out, part);
    }
    for value in hyper_parameters() {
        int(&mut out, value);
    }
    let expected_names: std::collections::HashSet<_> = PLAN.iter().map(|p| p.source).collect();
    if let Some(extra) = tensors.names().into_iter().find(|name| !expected_names.contains(*name)) {
        bail!("unexpected tensor {extra:?}: not Silero VAD's 16 kHz model");
    }
    for planned in PLAN {
        let view = tensors.tensor(planned.source).with_context(|| format!("tensor {} is missing", planned.source))?;
        ensure!(view.dtype() == Dtype::F32, "tensor {} is {:?}, expected F32", planned.source, view.dtype());
        let elements: usize = view.shape().iter().product();
        let expected: usize = planned.ggml_shape.iter().product();
        ensure!(elements == expected, "tensor {} has shape {:?}, expected {expected} values", planned.source, view.shape());
        // The source's non-unit dims, innermost first, must be the ggml shape's (the reference squeezes them).
        let squeezed: Vec<usize> = view.shape().iter().rev().copied().filter(|&d| d != 1).collect();
        let wanted: Vec<usize> = planned.ggml_shape.iter().copied().filter(|&d| d != 1).collect();
        ensure!(squeezed == wanted, "tensor {} has shape {:?}, not {:?} in ggml order", planned.source, view.shape(), planned.ggml_shape);
        int(&mut out, planned.ggml_shape.len() as i32);
        int(&mut out, planned.target.len() as i32);
        int(&mut out, i32::from(planned.half));
        for &dim in planned.ggml_shape {
            int(&mut out, dim as i32);
        }
        out.extend_from_slice(planned.target.as_bytes());
        for value in view.data().chunks_exact(4) {
            let value = f32::from_le_bytes([value[0], value[1], value[2], value[3]]);
            ensure!(value.is_finite(), "tensor {} holds a non-finite value", planned.source);
            if planned.half {
                out.extend_from_slice(&f16::from_f32(value).to_le_bytes());
            } else {
                out.extend_from_slice(&value.to_le_bytes());
            }
        }
    }
    Ok(out)
}

/// Reads a Silero ggml file as whisper.cpp would and checks that it holds
/// exactly the tensors, shapes and sizes its loader creates.
pub fn validate(path: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read the VAD model {}", path.display()))?;
    validate_bytes(&bytes).with_context(|| format!("not a Silero VAD model whisper.cpp can load: {}", path.display()))
}

/// A cursor over a ggml file's little-endian fields.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> anyhow::Result<&'a [u8]> {
        let end = self.at.checked_add(len).context("the file ends early")?;
        let slice = self.bytes.get(self.at..end).context("the file ends early")?;
        self.at = end;
        Ok(slice)
    }

    fn int(&mut self) -> anyhow::Result<i32> {
        let value = self.take(4)?;
        Ok(i32::from_le_bytes([value[0], value[1], value[2], value[3]]))
    }
}

fn validate_bytes(bytes: &[u8]) -> anyhow::Result<()> {
    let mut reader = Reader { bytes, at: 0 };
    ensure!(reader.int()? as u32 == GGML_MAGIC, "bad magic");
    let type_len = reader.int()?;
    ensure!(type_len == MODEL_TYPE.len() as i32, "model type of {type_len} bytes");
    ensure!(reader.take(MODEL_TYPE.len())? == MODEL_TYPE.as_bytes(), "model type is not {MODEL_TYPE}");
    for _ in 0..3 {
        reader.int()?;
    }
    for expected in hyper_parameters() {
        let value = reader.int()?;
        ensure!(value == expected, "hyper-parameter {value}, expected {expected}");
    }
    for planned in PLAN {
        let n_dims = reader.int()?;
        let name_len = reader.int()?;
        let half = reader.int()?;
        ensure!(n_dims == planned.ggml_shape.len() as i32, "tensor {} has {n_dims} dims", planned.target);
        ensure!(half == i32::from(planned.half), "tensor {} has type {half}", planned.target);
        for &dim in planned.ggml_shape {
            ensure!(reader.int()? == dim as i32, "tensor {} has the wrong shape", planned.target);
        }
        ensure!(name_len == planned.target.len() as i32, "tensor name of {name_len} bytes, expected {}", planned.target);
        let name = reader.take(planned.target.len())?;
        ensure!(name == planned.target.as_bytes(), "tensor {:?}, expected {}", String::from_utf8_lossy(name), planned.target);
        let size = planned.ggml_shape.iter().product::<usize>() * if planned.half { 2 } else { 4 };
        reader.take(size).with_context(|| format!("tensor {} is cut short", planned.target))?;
    }
    ensure!(reader.at == bytes.len(), "{} bytes after the last tensor", bytes.len() - reader.at);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safetensors file with Silero's tensor names and shapes, filled with `value`.
    fn fake_weights(value: f32) -> Vec<u8> {
        let shapes: &[(&str, &[usize])] = &[
            ("stft_conv.weight", &[258, 1, 256]),
            ("conv1.weight", &[128, 129, 3]),
            ("conv1.bias", &[128]),
            ("conv2.weight", &[64, 128, 3]),
            ("conv2.bias", &[64]),
            ("conv3.weight", &[64, 64, 3]),
            ("conv3.bias", &[64]),
            ("conv4.weight", &[128, 64, 3]),
            ("conv4.bias", &[128]),
            ("lstm_cell.weight_ih", &[512, 128]),
            ("lstm_cell.weight_hh", &[512, 128]),
            ("lstm_cell.bias_ih", &[512]),
            ("lstm_cell.bias_hh", &[512]),
            ("final_conv.weight", &[1, 128, 1]),
            ("final_conv.bias", &[1]),
        ];
        let data: Vec<(String, Vec<usize>, Vec<u8>)> = shapes
            .iter()
            .map(|(name, shape)| {
                let count: usize = shape.iter().product();
                (name.to_string(), shape.to_vec(), value.to_le_bytes().repeat(count))
            })
            .collect();
        let views: Vec<(String, safetensors::tensor::TensorView)> = data
            .iter()
            .map(|(name, shape, bytes)| (name.clone(), safetensors::tensor::TensorView::new(Dtype::F32, shape.clone(), bytes).unwrap()))
            .collect();
        safetensors::serialize(views, None).unwrap()
    }

    #[test]
    fn converted_weights_validate_and_every_cut_is_refused() {
        let ggml = to_ggml(&fake_weights(0.25), [6, 2, 3]).unwrap();
        validate_bytes(&ggml).unwrap();
        // The f16 STFT basis is the last tensor: its last value reads back.
        let tail = f16::from_le_bytes([ggml[ggml.len() - 2], ggml[ggml.len() - 1]]);
        assert_eq!(tail.to_f32(), 0.25);
        for cut in [0, 3, 20, 100, ggml.len() / 2, ggml.len() - 1] {
            assert!(validate_bytes(&ggml[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = ggml.clone();
        longer.push(0);
        assert!(validate_bytes(&longer).is_err());
    }

    #[test]
    fn wrong_weights_are_refused_with_the_reason() {
        let nan = to_ggml(&fake_weights(f32::NAN), [6, 2, 3]).unwrap_err();
        assert!(format!("{nan:#}").contains("non-finite"), "{nan:#}");
        let not_safetensors = to_ggml(b"PK\x03\x04 a zip", [6, 2, 3]).unwrap_err();
        assert!(format!("{not_safetensors:#}").contains("not a safetensors file"));
    }

    #[test]
    fn versions_come_from_the_package_requirement() {
        assert_eq!(parse_version("silero-vad==6.2.3").unwrap(), [6, 2, 3]);
        assert_eq!(parse_version("5.1.2").unwrap(), [5, 1, 2]);
        assert!(parse_version("6.2").is_err());
    }
}
