//! Converts Whisper weights from CTranslate2's `model.bin` (as shipped by
//! faster-whisper packages) into whisper.cpp's ggml file, so whisper-rs can
//! load them. Layout facts: ../shared/MODELS.md; tensor names follow
//! openai-whisper, which whisper.cpp looks up by name.

use std::collections::HashMap;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

use anyhow::{Context, anyhow, bail, ensure};
use base64::Engine as _;
use half::f16;
use rayon::prelude::*;

const GGML_MAGIC: u32 = 0x6767_6d6c;

/// CTranslate2 storage types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DType {
    F32,
    I8,
    I16,
    I32,
    F16,
}

impl DType {
    fn from_code(code: u8) -> anyhow::Result<Self> {
        Ok(match code {
            0 => DType::F32,
            1 => DType::I8,
            2 => DType::I16,
            3 => DType::I32,
            4 => DType::F16,
            other => bail!("unsupported CTranslate2 dtype code {other}"),
        })
    }

    fn width(self) -> usize {
        match self {
            DType::I8 => 1,
            DType::I16 | DType::F16 => 2,
            DType::F32 | DType::I32 => 4,
        }
    }
}

struct Variable {
    shape: Vec<usize>,
    dtype: DType,
    data: Vec<u8>,
}

impl Variable {
    fn scalar_int(&self) -> anyhow::Result<i64> {
        ensure!(self.data.len() == self.dtype.width(), "not a scalar");
        Ok(match self.dtype {
            DType::I8 => i64::from(self.data[0] as i8),
            DType::I16 => i64::from(i16::from_le_bytes([self.data[0], self.data[1]])),
            DType::I32 => i64::from(i32::from_le_bytes(self.data[..4].try_into()?)),
            DType::F32 => f32::from_le_bytes(self.data[..4].try_into()?) as i64,
            DType::F16 => f16::from_le_bytes([self.data[0], self.data[1]]).to_f32() as i64,
        })
    }
}

/// A little-endian reader over the whole file with bounds checks: a truncated
/// or corrupt file is an error, never a panic.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> anyhow::Result<&'a [u8]> {
        let end = self.at.checked_add(n).ok_or_else(|| anyhow!("length overflow"))?;
        let slice = self.bytes.get(self.at..end).ok_or_else(|| anyhow!("file truncated at byte {}", self.at))?;
        self.at = end;
        Ok(slice)
    }
    fn u8(&mut self) -> anyhow::Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> anyhow::Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into()?))
    }
    fn u32(&mut self) -> anyhow::Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into()?))
    }
    fn string(&mut self) -> anyhow::Result<String> {
        let len = self.u16()? as usize;
        let raw = self.take(len)?;
        let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
        Ok(String::from_utf8(raw.to_vec())?)
    }
}

fn read_ct2(bytes: &[u8]) -> anyhow::Result<HashMap<String, Variable>> {
    let mut cur = Cursor { bytes, at: 0 };
    let version = cur.u32()?;
    ensure!((5..=6).contains(&version), "unsupported CTranslate2 model version {version} (expected 5 or 6)");
    let spec = cur.string()?;
    ensure!(spec == "WhisperSpec", "not a Whisper model: spec is {spec:?}");
    let _revision = cur.u32()?;
    let count = cur.u32()? as usize;
    ensure!(count < 100_000, "implausible variable count {count}");
    let mut variables = HashMap::with_capacity(count);
    for _ in 0..count {
        let name = cur.string()?;
        let rank = cur.u8()? as usize;
        let shape = (0..rank).map(|_| cur.u32().map(|d| d as usize)).collect::<anyhow::Result<Vec<_>>>()?;
        let dtype = DType::from_code(cur.u8()?)?;
        let byte_count = cur.u32()? as usize;
        let elements: usize = shape.iter().product();
        ensure!(elements * dtype.width() == byte_count, "variable {name}: shape {shape:?} does not match {byte_count} bytes");
        let data = cur.take(byte_count)?.to_vec();
        variables.insert(name, Variable { shape, dtype, data });
    }
    Ok(variables)
}

/// Reads `mel_80` (f32, 80 × 201) from openai-whisper's `mel_filters.npz`.
pub fn read_mel_filters(npz: &Path, key: &str) -> anyhow::Result<(usize, usize, Vec<f32>)> {
    let file = std::fs::File::open(npz).with_context(|| format!("cannot open {}", npz.display()))?;
    let mut archive = zip::ZipArchive::new(file).context("mel filters are not a valid npz archive")?;
    let mut member = archive.by_name(&format!("{key}.npy")).with_context(|| format!("npz has no {key}"))?;
    let mut bytes = Vec::new();
    member.read_to_end(&mut bytes)?;
    let mut cur = Cursor { bytes: &bytes, at: 0 };
    ensure!(cur.take(6)? == b"\x93NUMPY", "{key}.npy is not a NumPy array");
    let major = cur.u8()?;
    let _minor = cur.u8()?;
    let header_len = if major == 1 { cur.u16()? as usize } else { cur.u32()? as usize };
    let header = std::str::from_utf8(cur.take(header_len)?)?;
    ensure!(header.contains("'descr': '<f4'"), "{key}: expected little-endian f32, header {header}");
    ensure!(header.contains("'fortran_order': False"), "{key}: Fortran order is not supported");
    let shape_text = header
        .split("'shape': (")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .ok_or_else(|| anyhow!("{key}: no shape in header"))?;
    let dims: Vec<usize> = shape_text
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    ensure!(dims.len() == 2, "{key}: expected a 2-D array, got {dims:?}");
    let data = cur.take(dims[0] * dims[1] * 4)?;
    let values = data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Ok((dims[0], dims[1], values))
}

/// Reads a `.tiktoken` vocabulary: one `base64 rank` per line, in rank order.
/// Padding is optional, as Python's decoder takes it: the multilingual
/// vocabulary's last line is `= 50256`, an empty token.
pub fn read_tiktoken(path: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut tokens = Vec::new();
    for (line_no, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let encoded = line.split_whitespace().next().unwrap_or_default();
        let token = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(encoded.trim_end_matches('='))
            .with_context(|| format!("{} line {}: bad base64", path.display(), line_no + 1))?;
        tokens.push(token);
    }
    Ok(tokens)
}

/// The ggml tensor a CTranslate2 variable (or part of it) becomes.
struct OutTensor {
    name: String,
    /// Source variable and which row slice of it (for fused q/k/v).
    source: String,
    part: Option<(usize, usize)>,
}

fn plan(n_audio_layer: usize, n_text_layer: usize) -> Vec<OutTensor> {
    let mut out = Vec::new();
    let mut push = |name: String, source: String, part: Option<(usize, usize)>| {
        out.push(OutTensor { name, source, part });
    };
    push("encoder.positional_embedding".into(), "encoder/position_encodings/encodings".into(), None);
    for conv in ["conv1", "conv2"] {
        push(format!("encoder.{conv}.weight"), format!("encoder/{conv}/weight"), None);
        push(format!("encoder.{conv}.bias"), format!("encoder/{conv}/bias"), None);
    }
    let attention = |push: &mut dyn FnMut(String, String, Option<(usize, usize)>), dst: &str, src: &str, cross: bool| {
        if cross {
            push(format!("{dst}.query.weight"), format!("{src}/linear_0/weight"), None);
            push(format!("{dst}.query.bias"), format!("{src}/linear_0/bias"), None);
            push(format!("{dst}.key.weight"), format!("{src}/linear_1/weight"), Some((0, 2)));
            push(format!("{dst}.value.weight"), format!("{src}/linear_1/weight"), Some((1, 2)));
            push(format!("{dst}.value.bias"), format!("{src}/linear_1/bias"), Some((1, 2)));
            push(format!("{dst}.out.weight"), format!("{src}/linear_2/weight"), None);
            push(format!("{dst}.out.bias"), format!("{src}/linear_2/bias"), None);
        } else {
            push(format!("{dst}.query.weight"), format!("{src}/linear_0/weight"), Some((0, 3)));
            push(format!("{dst}.query.bias"), format!("{src}/linear_0/bias"), Some((0, 3)));
            push(format!("{dst}.key.weight"), format!("{src}/linear_0/weight"), Some((1, 3)));
            push(format!("{dst}.value.weight"), format!("{src}/linear_0/weight"), Some((2, 3)));
            push(format!("{dst}.value.bias"), format!("{src}/linear_0/bias"), Some((2, 3)));
            push(format!("{dst}.out.weight"), format!("{src}/linear_1/weight"), None);
            push(format!("{dst}.out.bias"), format!("{src}/linear_1/bias"), None);
        }
        push(format!("{dst}_ln.weight"), format!("{src}/layer_norm/gamma"), None);
        push(format!("{dst}_ln.bias"), format!("{src}/layer_norm/beta"), None);
    };
    let mlp = |push: &mut dyn FnMut(String, String, Option<(usize, usize)>), dst: &str, src: &str| {
        push(format!("{dst}.mlp.0.weight"), format!("{src}/ffn/linear_0/weight"), None);
        push(format!("{dst}.mlp.0.bias"), format!("{src}/ffn/linear_0/bias"), None);
        push(format!("{dst}.mlp.2.weight"), format!("{src}/ffn/linear_1/weight"), None);
        push(format!("{dst}.mlp.2.bias"), format!("{src}/ffn/linear_1/bias"), None);
        push(format!("{dst}.mlp_ln.weight"), format!("{src}/ffn/layer_norm/gamma"), None);
        push(format!("{dst}.mlp_ln.bias"), format!("{src}/ffn/layer_norm/beta"), None);
    };
    for i in 0..n_audio_layer {
        let (dst, src) = (format!("encoder.blocks.{i}"), format!("encoder/layer_{i}"));
        attention(&mut push, &format!("{dst}.attn"), &format!("{src}/self_attention"), false);
        mlp(&mut push, &dst, &src);
    }
    push("encoder.ln_post.weight".into(), "encoder/layer_norm/gamma".into(), None);
    push("encoder.ln_post.bias".into(), "encoder/layer_norm/beta".into(), None);
    push("decoder.positional_embedding".into(), "decoder/position_encodings/encodings".into(), None);
    push("decoder.token_embedding.weight".into(), "decoder/embeddings/weight".into(), None);
    for i in 0..n_text_layer {
        let (dst, src) = (format!("decoder.blocks.{i}"), format!("decoder/layer_{i}"));
        attention(&mut push, &format!("{dst}.attn"), &format!("{src}/self_attention"), false);
        attention(&mut push, &format!("{dst}.cross_attn"), &format!("{src}/attention"), true);
        mlp(&mut push, &dst, &src);
    }
    push("decoder.ln.weight".into(), "decoder/layer_norm/gamma".into(), None);
    push("decoder.ln.bias".into(), "decoder/layer_norm/beta".into(), None);
    out
}

fn count_layers(variables: &HashMap<String, Variable>, prefix: &str) -> usize {
    (0..).take_while(|i| variables.contains_key(&format!("{prefix}/layer_{i}/ffn/linear_0/weight"))).count()
}

/// Converts `model_bin` (CTranslate2) + mel filters + vocabulary into `output` (ggml).
/// Writes to a temporary file first, so a failed conversion leaves no half file behind.
pub fn convert(model_bin: &Path, mel_filters_npz: &Path, tiktoken: &Path, output: &Path) -> anyhow::Result<u64> {
    let bytes = std::fs::read(model_bin).with_context(|| format!("cannot read {}", model_bin.display()))?;
    let variables = read_ct2(&bytes).with_context(|| format!("cannot parse {}", model_bin.display()))?;
    drop(bytes);
    let get = |name: &str| variables.get(name).ok_or_else(|| anyhow!("model.bin has no variable {name}"));

    let enc_pos = get("encoder/position_encodings/encodings")?;
    let dec_pos = get("decoder/position_encodings/encodings")?;
    let embeddings = get("decoder/embeddings/weight")?;
    let conv1 = get("encoder/conv1/weight")?;
    ensure!(enc_pos.shape.len() == 2 && dec_pos.shape.len() == 2 && embeddings.shape.len() == 2, "unexpected shapes");
    let n_audio_layer = count_layers(&variables, "encoder");
    let n_text_layer = count_layers(&variables, "decoder");
    ensure!(n_audio_layer > 0 && n_text_layer > 0, "model.bin has no encoder or decoder layers");
    let hparams: [i32; 11] = [
        embeddings.shape[0] as i32,             // n_vocab
        enc_pos.shape[0] as i32,                // n_audio_ctx
        enc_pos.shape[1] as i32,                // n_audio_state
        get("encoder/num_heads")?.scalar_int()? as i32,
        n_audio_layer as i32,
        dec_pos.shape[0] as i32,                // n_text_ctx
        dec_pos.shape[1] as i32,                // n_text_state
        get("decoder/num_heads")?.scalar_int()? as i32,
        n_text_layer as i32,
        conv1.shape[1] as i32,                  // n_mels
        1,                                      // ftype: mostly f16
    ];
    let n_mels = hparams[9] as usize;
    let (mel_rows, mel_cols, mel) = read_mel_filters(mel_filters_npz, &format!("mel_{n_mels}"))?;
    let mut vocab = read_tiktoken(tiktoken)?;
    let english_only = hparams[0] < 51865;
    if english_only {
        vocab.push(b"<|endoftext|>".to_vec());
    }

    let tmp = output.with_extension("bin.converting");
    let file = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let result = (|| -> anyhow::Result<()> {
        out.write_all(&GGML_MAGIC.to_le_bytes())?;
        for value in hparams {
            out.write_all(&value.to_le_bytes())?;
        }
        out.write_all(&(mel_rows as i32).to_le_bytes())?;
        out.write_all(&(mel_cols as i32).to_le_bytes())?;
        for value in &mel {
            out.write_all(&value.to_le_bytes())?;
        }
        out.write_all(&(vocab.len() as i32).to_le_bytes())?;
        for token in &vocab {
            out.write_all(&(token.len() as i32).to_le_bytes())?;
            out.write_all(token)?;
        }
        for tensor in plan(n_audio_layer, n_text_layer) {
            write_tensor(&mut out, &tensor, get(&tensor.source)?)?;
        }
        out.flush()?;
        out.get_ref().sync_all()?;
        Ok(())
    })();
    drop(out);
    if let Err(err) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(err);
    }
    std::fs::rename(&tmp, output).with_context(|| format!("cannot move converted model to {}", output.display()))?;
    Ok(std::fs::metadata(output)?.len())
}

fn write_tensor(out: &mut impl Write, tensor: &OutTensor, var: &Variable) -> anyhow::Result<()> {
    ensure!(matches!(var.dtype, DType::F16 | DType::F32), "{}: weights must be float", tensor.source);
    // Slice rows for fused projections.
    let (mut shape, data): (Vec<usize>, &[u8]) = match tensor.part {
        None => (var.shape.clone(), &var.data),
        Some((index, parts)) => {
            ensure!(var.shape[0].is_multiple_of(parts), "{}: cannot split {:?} in {parts}", tensor.source, var.shape);
            let rows = var.shape[0] / parts;
            let row_bytes = var.data.len() / var.shape[0];
            let mut shape = var.shape.clone();
            shape[0] = rows;
            (shape, &var.data[index * rows * row_bytes..(index + 1) * rows * row_bytes])
        }
    };
    // Squeeze size-1 dimensions; conv biases become (n, 1) as whisper.cpp expects.
    shape.retain(|&d| d != 1);
    let conv_bias = tensor.name.ends_with("conv1.bias") || tensor.name.ends_with("conv2.bias");
    if conv_bias {
        shape = vec![shape.iter().product(), 1];
    }
    let f32_out = shape.len() < 2 || conv_bias || tensor.name.ends_with("positional_embedding");
    let values: Vec<u8> = match (var.dtype, f32_out) {
        (DType::F16, false) | (DType::F32, true) => data.to_vec(),
        (DType::F16, true) => data
            .par_chunks_exact(2)
            .flat_map_iter(|c| f16::from_le_bytes([c[0], c[1]]).to_f32().to_le_bytes())
            .collect(),
        (DType::F32, false) => data
            .par_chunks_exact(4)
            .flat_map_iter(|c| f16::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes())
            .collect(),
        _ => unreachable!("checked above"),
    };
    out.write_all(&(shape.len() as i32).to_le_bytes())?;
    out.write_all(&(tensor.name.len() as i32).to_le_bytes())?;
    out.write_all(&(if f32_out { 0i32 } else { 1i32 }).to_le_bytes())?;
    for dim in shape.iter().rev() {
        out.write_all(&(*dim as i32).to_le_bytes())?;
    }
    out.write_all(tensor.name.as_bytes())?;
    out.write_all(&values)?;
    Ok(())
}

/// Checks a ggml Whisper file's header before handing it to whisper.cpp, whose
/// loader can abort the process on malformed input.
pub fn validate_ggml(path: &Path) -> anyhow::Result<()> {
    let mut file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut header = [0u8; 48];
    file.read_exact(&mut header).with_context(|| format!("too short to be a Whisper model: {}", path.display()))?;
    let magic = u32::from_le_bytes(header[0..4].try_into()?);
    ensure!(magic == GGML_MAGIC, "not a ggml Whisper model (bad magic): {}", path.display());
    let hparams: Vec<i32> = header[4..48].chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    ensure!(
        hparams[..10].iter().all(|&v| v > 0 && v < 1_000_000),
        "implausible Whisper hyper-parameters {hparams:?}: {}",
        path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_ct2_input_is_an_error_not_a_panic() {
        let mut bytes = 6u32.to_le_bytes().to_vec();
        bytes.extend_from_slice(&12u16.to_le_bytes());
        bytes.extend_from_slice(b"WhisperSpec\0");
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&3u32.to_le_bytes());
        for cut in 0..bytes.len() {
            assert!(read_ct2(&bytes[..cut]).is_err());
        }
        assert!(read_ct2(&bytes).is_err(), "promised 3 variables, has none");
    }

    #[test]
    fn tiktoken_lines_decode_with_or_without_padding_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vocab.tiktoken");
        std::fs::write(&path, "IQ== 0\nIg 1\nIGluZm9ybWFudHM= 2\n= 3\n").unwrap();
        assert_eq!(read_tiktoken(&path).unwrap(), vec![b"!".to_vec(), b"\"".to_vec(), b" informants".to_vec(), Vec::new()]);
        std::fs::write(&path, "IQ== 0\n*** 1\n").unwrap();
        assert!(format!("{:#}", read_tiktoken(&path).unwrap_err()).contains("line 2: bad base64"));
    }

    #[test]
    fn plan_names_every_tensor_once() {
        let plan = plan(4, 4);
        let mut names: Vec<_> = plan.iter().map(|t| t.name.as_str()).collect();
        let total = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), total);
        // 1 pos + 4 conv + 4×15 enc + 2 ln_post + 2 dec + 4×24 dec + 2 ln
        assert_eq!(total, 1 + 4 + 4 * 15 + 2 + 2 + 4 * 24 + 2);
    }
}
