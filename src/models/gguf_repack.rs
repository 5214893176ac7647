//! Lossless repack of a GGUF file's Q5_0 tensors as Q8_0, at install time.
//!
//! Why: candle 0.10 has AVX2 kernels for Q8_0 but runs Q5_0 in generic Rust,
//! and the published "Q4_K_M" Qwen2.5-Coder-0.5B file is mostly Q5_0 (133 of
//! 158 quantized tensors: its 896-wide rows are not a multiple of 256). The
//! repacked file decodes 1.6× faster with a 2.5× faster first token in
//! mistralrs (docs/engine.md, "Models"), for ~30 % more bytes.
//!
//! Lossless: a Q5_0 block is an f16 scale `d` and 32 five-bit values `q`
//! meaning `d · (q − 16)`; a Q8_0 block is the same `d` and 32 int8 values
//! meaning `d · v`. So `v = q − 16` with the scale copied keeps every weight
//! bit for bit (llama.cpp gives identical greedy output on both files).
//! Every other tensor and all metadata are copied unchanged; the output is
//! deterministic (metadata sorted by key, tensors in file order), so the
//! manifest can pin its sha256. Runs on the calling thread (`cowork models convert`).

use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::{Context, bail};
use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor, ggml_file::qtensor_from_ggml, gguf_file};

const Q5_0_BLOCK_BYTES: usize = 22;
const Q8_0_BLOCK_BYTES: usize = 34;

/// What a repack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repacked {
    pub tensors: usize,
    pub repacked: usize,
    pub bytes_written: u64,
}

/// One Q5_0 block as a Q8_0 block.
fn q5_0_block_to_q8_0(block: &[u8], out: &mut [u8]) {
    out[..2].copy_from_slice(&block[..2]);
    let high = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
    let low = &block[6..22];
    for j in 0..16 {
        let high0 = (((high >> j) << 4) & 0x10) as u8;
        let high1 = ((high >> (j + 12)) & 0x10) as u8;
        let v0 = ((low[j] & 0x0f) | high0) as i16 - 16;
        let v1 = ((low[j] >> 4) | high1) as i16 - 16;
        out[2 + j] = v0 as i8 as u8;
        out[2 + j + 16] = v1 as i8 as u8;
    }
}

/// Q5_0 tensor bytes as Q8_0 tensor bytes.
pub fn q5_0_to_q8_0(raw: &[u8]) -> anyhow::Result<Vec<u8>> {
    if !raw.len().is_multiple_of(Q5_0_BLOCK_BYTES) {
        bail!("{} bytes are not whole Q5_0 blocks", raw.len());
    }
    let mut out = vec![0u8; raw.len() / Q5_0_BLOCK_BYTES * Q8_0_BLOCK_BYTES];
    for (block, target) in raw.chunks_exact(Q5_0_BLOCK_BYTES).zip(out.chunks_exact_mut(Q8_0_BLOCK_BYTES)) {
        q5_0_block_to_q8_0(block, target);
    }
    Ok(out)
}

/// Reads `input`, writes `output` (through a temporary file renamed into
/// place, so a crash leaves no half file under the final name).
pub fn repack_q5_0_as_q8_0(input: &Path, output: &Path) -> anyhow::Result<Repacked> {
    let file = std::fs::File::open(input).with_context(|| format!("cannot open {}", input.display()))?;
    let mut reader = BufReader::new(file);
    let content = gguf_file::Content::read(&mut reader).with_context(|| format!("{} is not a GGUF file", input.display()))?;
    if let Some(alignment) = content.metadata.get("general.alignment")
        && alignment.to_u32().ok() != Some(32)
    {
        bail!("{} uses a tensor alignment other than 32, which the writer cannot keep", input.display());
    }
    let mut infos: Vec<(&String, &gguf_file::TensorInfo)> = content.tensor_infos.iter().collect();
    infos.sort_by_key(|(_, info)| info.offset);
    let mut tensors = Vec::with_capacity(infos.len());
    let mut repacked = 0;
    for (name, info) in &infos {
        let elements = info.shape.elem_count();
        let block = info.ggml_dtype.block_size();
        if elements % block != 0 {
            bail!("tensor {name}: {elements} elements are not whole blocks of {block}");
        }
        let mut raw = vec![0u8; elements / block * info.ggml_dtype.type_size()];
        reader.seek(SeekFrom::Start(content.tensor_data_offset + info.offset))?;
        reader.read_exact(&mut raw).with_context(|| format!("tensor {name} is cut short in {}", input.display()))?;
        let (dtype, raw) = if info.ggml_dtype == GgmlDType::Q5_0 {
            repacked += 1;
            (GgmlDType::Q8_0, q5_0_to_q8_0(&raw)?)
        } else {
            (info.ggml_dtype, raw)
        };
        let tensor: QTensor = qtensor_from_ggml(dtype, &raw, info.shape.dims().to_vec(), &Device::Cpu)
            .with_context(|| format!("tensor {name}"))?;
        tensors.push((name.as_str(), tensor));
    }
    let mut metadata: Vec<(&str, &gguf_file::Value)> = content.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    metadata.sort_by_key(|(key, _)| *key);
    let partial = output.with_extension("gguf.part");
    {
        let file = std::fs::File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
        let mut writer = BufWriter::new(file);
        let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(name, tensor)| (*name, tensor)).collect();
        gguf_file::write(&mut writer, &metadata, &refs)?;
        let file = writer.into_inner().map_err(|err| err.into_error())?;
        file.sync_all()?;
    }
    std::fs::rename(&partial, output).with_context(|| format!("cannot move the repacked file to {}", output.display()))?;
    let bytes_written = std::fs::metadata(output)?.len();
    Ok(Repacked { tensors: tensors.len(), repacked, bytes_written })
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Tensor;

    #[test]
    fn q5_0_tensors_become_q8_0_with_every_weight_unchanged_and_the_rest_copied() {
        let dir = tempfile::tempdir().unwrap();
        let device = Device::Cpu;
        let values: Vec<f32> = (0..4 * 64).map(|i| ((i * 37 % 101) as f32 - 50.0) / 13.0).collect();
        let weights = Tensor::from_vec(values.clone(), (4, 64), &device).unwrap();
        let q5 = QTensor::quantize(&weights, GgmlDType::Q5_0).unwrap();
        let kept = QTensor::quantize(&weights, GgmlDType::Q8_0).unwrap();
        let source = dir.path().join("in.gguf");
        let name = gguf_file::Value::String("tiny".into());
        let layers = gguf_file::Value::U32(2);
        {
            let mut file = std::fs::File::create(&source).unwrap();
            gguf_file::write(&mut file, &[("general.name", &name), ("tiny.block_count", &layers)], &[("a.weight", &q5), ("b.weight", &kept)])
                .unwrap();
        }
        let output = dir.path().join("out.gguf");
        let report = repack_q5_0_as_q8_0(&source, &output).unwrap();
        assert_eq!((report.tensors, report.repacked), (2, 1));

        let mut reader = std::fs::File::open(&output).unwrap();
        let content = gguf_file::Content::read(&mut reader).unwrap();
        assert_eq!(content.metadata["general.name"].to_string().unwrap(), "tiny");
        assert_eq!(content.metadata["tiny.block_count"].to_u32().unwrap(), 2);
        let a = content.tensor(&mut reader, "a.weight", &device).unwrap();
        let b = content.tensor(&mut reader, "b.weight", &device).unwrap();
        assert_eq!(a.dtype(), GgmlDType::Q8_0);
        let before: Vec<f32> = q5.dequantize(&device).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let after: Vec<f32> = a.dequantize(&device).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(before, after, "every weight bit for bit");
        assert_eq!(b.data().unwrap(), kept.data().unwrap(), "other tensors copied unchanged");
        // Deterministic: the same input gives the same bytes.
        let again = dir.path().join("again.gguf");
        repack_q5_0_as_q8_0(&source, &again).unwrap();
        assert_eq!(std::fs::read(&output).unwrap(), std::fs::read(&again).unwrap());
        // Not a GGUF file: a clear error, nothing written.
        std::fs::write(dir.path().join("bad.gguf"), b"not a model").unwrap();
        let err = repack_q5_0_as_q8_0(&dir.path().join("bad.gguf"), &dir.path().join("bad-out.gguf")).unwrap_err();
        assert!(format!("{err:#}").contains("is not a GGUF file"), "{err:#}");
        assert!(!dir.path().join("bad-out.gguf").exists());
    }
}
