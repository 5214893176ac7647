//! GGUF metadata (the header only: no tensor is read) and the memory
//! preflight before loading a local model: weights + KV cache for the context
//! actually used + runtime overhead, against what the machine has free.

use std::io::{BufReader, Read};
use std::path::Path;

use anyhow::{Context, bail};

/// What the preflight needs from a GGUF file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GgufInfo {
    pub architecture: String,
    pub name: Option<String>,
    pub block_count: u64,
    pub context_length: u64,
    pub embedding_length: u64,
    pub head_count: u64,
    pub head_count_kv: u64,
    pub file_bytes: u64,
}

/// Longest string or array the reader accepts (a corrupt length must not allocate gigabytes).
const MAX_STRING: u64 = 1 << 24;

fn u32_of(r: &mut impl Read) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn u64_of(r: &mut impl Read) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn string_of(r: &mut impl Read) -> anyhow::Result<String> {
    let len = u64_of(r)?;
    if len > MAX_STRING {
        bail!("a metadata string claims {len} bytes");
    }
    let mut bytes = vec![0u8; len as usize];
    r.read_exact(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A metadata value: integers widened, strings kept, the rest skipped.
enum Value {
    Int(u64),
    Str(String),
    Other,
}

fn skip(r: &mut impl Read, bytes: u64) -> std::io::Result<()> {
    std::io::copy(&mut r.take(bytes), &mut std::io::sink()).map(|_| ())
}

fn value_of(r: &mut impl Read, kind: u32) -> anyhow::Result<Value> {
    Ok(match kind {
        0 | 1 | 7 => {
            let mut b = [0u8; 1];
            r.read_exact(&mut b)?;
            Value::Int(u64::from(b[0]))
        }
        2 | 3 => {
            let mut b = [0u8; 2];
            r.read_exact(&mut b)?;
            Value::Int(u64::from(u16::from_le_bytes(b)))
        }
        4 | 5 => Value::Int(u64::from(u32_of(r)?)),
        6 => {
            skip(r, 4)?;
            Value::Other
        }
        8 => Value::Str(string_of(r)?),
        9 => {
            let item = u32_of(r)?;
            let len = u64_of(r)?;
            if len > MAX_STRING {
                bail!("a metadata array claims {len} items");
            }
            let width = match item {
                0 | 1 | 7 => Some(1),
                2 | 3 => Some(2),
                4..=6 => Some(4),
                10..=12 => Some(8),
                _ => None,
            };
            match width {
                Some(width) => skip(r, len * width)?,
                None => {
                    for _ in 0..len {
                        value_of(r, item)?;
                    }
                }
            }
            Value::Other
        }
        10 | 11 => Value::Int(u64_of(r)?),
        12 => {
            skip(r, 8)?;
            Value::Other
        }
        other => bail!("unknown metadata type {other}"),
    })
}

/// Reads the header of a GGUF file.
pub fn read_info(path: &Path) -> anyhow::Result<GgufInfo> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let file_bytes = file.metadata()?.len();
    let mut r = BufReader::with_capacity(1 << 16, file);
    let mut magic = [0u8; 4];
    r.read_exact(&mut magic).context("not a GGUF file (too short)")?;
    if &magic != b"GGUF" {
        bail!("{} is not a GGUF file", path.display());
    }
    let version = u32_of(&mut r)?;
    if !(2..=3).contains(&version) {
        bail!("GGUF version {version} is not supported");
    }
    let _tensors = u64_of(&mut r)?;
    let kv_count = u64_of(&mut r)?;
    let mut info = GgufInfo { file_bytes, ..GgufInfo::default() };
    let mut ints = std::collections::HashMap::new();
    for _ in 0..kv_count {
        let key = string_of(&mut r).with_context(|| format!("{} has a damaged header", path.display()))?;
        let kind = u32_of(&mut r)?;
        match value_of(&mut r, kind).with_context(|| format!("{} has a damaged header at {key}", path.display()))? {
            Value::Str(text) if key == "general.architecture" => info.architecture = text,
            Value::Str(text) if key == "general.name" => info.name = Some(text),
            Value::Int(n) => {
                ints.insert(key, n);
            }
            _ => {}
        }
    }
    let arch = &info.architecture;
    if arch.is_empty() {
        bail!("{} names no architecture", path.display());
    }
    let get = |suffix: &str| ints.get(&format!("{arch}.{suffix}")).copied().unwrap_or(0);
    info.block_count = get("block_count");
    info.context_length = get("context_length");
    info.embedding_length = get("embedding_length");
    info.head_count = get("attention.head_count");
    info.head_count_kv = match get("attention.head_count_kv") {
        0 => info.head_count,
        n => n,
    };
    Ok(info)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Fits with room to spare.
    Green,
    /// Fits, but leaves little for everything else.
    Yellow,
    /// Does not fit: loading is refused; a cloud provider can answer instead.
    Red,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Preflight {
    pub verdict: Verdict,
    pub weights_bytes: u64,
    pub kv_cache_bytes: u64,
    pub overhead_bytes: u64,
    pub available_bytes: u64,
    pub reserve_bytes: u64,
    pub context_tokens: u64,
}

impl Preflight {
    pub fn needed_bytes(&self) -> u64 {
        self.weights_bytes + self.kv_cache_bytes + self.overhead_bytes
    }

    pub fn describe(&self) -> String {
        let gb = |b: u64| b as f64 / 1e9;
        format!(
            "{:?}: needs {:.2} GB (weights {:.2}, KV cache {:.2} for {} tokens, runtime {:.2}) of {:.2} GB available ({:.2} GB kept free)",
            self.verdict,
            gb(self.needed_bytes()),
            gb(self.weights_bytes),
            gb(self.kv_cache_bytes),
            self.context_tokens,
            gb(self.overhead_bytes),
            gb(self.available_bytes),
            gb(self.reserve_bytes),
        )
        .replacen("Green", "GREEN", 1)
        .replacen("Yellow", "YELLOW", 1)
        .replacen("Red", "RED", 1)
    }
}

/// Runtime overhead of the engine (activations, tokenizer, scheduler), measured
/// with SmolLM2: peak RSS while answering minus the weights, rounded up.
pub const RUNTIME_OVERHEAD_BYTES: u64 = 300_000_000;

/// Weights + KV cache (keys and values, f32 on CPU, per layer and KV head)
/// for `context_tokens`, against `available_bytes` minus a reserve.
pub fn preflight(info: &GgufInfo, context_tokens: u64, available_bytes: u64, total_bytes: u64) -> Preflight {
    let context_tokens = if info.context_length > 0 { context_tokens.min(info.context_length) } else { context_tokens };
    let head_dim = info.embedding_length.checked_div(info.head_count).unwrap_or(0);
    let kv_cache_bytes = 2 * info.block_count * info.head_count_kv * head_dim * context_tokens * 4;
    let reserve_bytes = (total_bytes / 10).max(512_000_000);
    let mut result = Preflight {
        verdict: Verdict::Green,
        weights_bytes: info.file_bytes,
        kv_cache_bytes,
        overhead_bytes: RUNTIME_OVERHEAD_BYTES,
        available_bytes,
        reserve_bytes,
        context_tokens,
    };
    result.verdict = verdict(result.needed_bytes(), available_bytes, total_bytes);
    result
}

/// Whether `needed_bytes` fit in `available_bytes` once a reserve for the
/// rest of the desktop (a tenth of `total_bytes`, at least 512 MB) is kept.
pub fn verdict(needed_bytes: u64, available_bytes: u64, total_bytes: u64) -> Verdict {
    let usable = available_bytes.saturating_sub((total_bytes / 10).max(512_000_000));
    if needed_bytes * 2 <= usable {
        Verdict::Green
    } else if needed_bytes <= usable {
        Verdict::Yellow
    } else {
        Verdict::Red
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal GGUF header written by hand: llama, 30 blocks, 576 wide, 9 heads, 3 KV heads.
    fn tiny_gguf(path: &Path) {
        let mut b = Vec::new();
        b.extend_from_slice(b"GGUF");
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        let kvs: Vec<(&str, u32, Vec<u8>)> = vec![
            ("general.architecture", 8, [&5u64.to_le_bytes()[..], b"llama"].concat()),
            ("llama.block_count", 4, 30u32.to_le_bytes().to_vec()),
            ("llama.context_length", 4, 8192u32.to_le_bytes().to_vec()),
            ("llama.embedding_length", 4, 576u32.to_le_bytes().to_vec()),
            ("llama.attention.head_count", 4, 9u32.to_le_bytes().to_vec()),
            ("llama.attention.head_count_kv", 4, 3u32.to_le_bytes().to_vec()),
            // An array of strings to skip, like the tokenizer's.
            ("tokenizer.ggml.tokens", 9, [&8u32.to_le_bytes()[..], &2u64.to_le_bytes(), &1u64.to_le_bytes(), b"a", &2u64.to_le_bytes(), b"bc"].concat()),
            ("general.rope", 6, 1.0f32.to_le_bytes().to_vec()),
        ];
        b.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
        for (key, kind, value) in kvs {
            b.extend_from_slice(&(key.len() as u64).to_le_bytes());
            b.extend_from_slice(key.as_bytes());
            b.extend_from_slice(&kind.to_le_bytes());
            b.extend_from_slice(&value);
        }
        std::fs::write(path, b).unwrap();
    }

    #[test]
    fn the_header_gives_the_shape_and_the_preflight_grades_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        tiny_gguf(&path);
        let info = read_info(&path).unwrap();
        assert_eq!((info.architecture.as_str(), info.block_count, info.head_count_kv, info.context_length), ("llama", 30, 3, 8192));
        // KV cache: 2 × 30 layers × 3 KV heads × 64 per head × 2,048 tokens × 4 bytes.
        let fit = preflight(&info, 2_048, 16_000_000_000, 24_000_000_000);
        assert_eq!(fit.kv_cache_bytes, 2 * 30 * 3 * 64 * 2048 * 4);
        assert_eq!(fit.verdict, Verdict::Green);
        assert_eq!(preflight(&info, 2_048, 1_000_000_000, 8_000_000_000).verdict, Verdict::Red);
        let tight = preflight(&info, 2_048, 1_200_000_000, 4_000_000_000);
        assert_eq!(tight.verdict, Verdict::Yellow, "{}", tight.describe());
        assert!(fit.describe().starts_with("GREEN: needs"));
        // Damaged or foreign files fail clearly.
        std::fs::write(&path, b"GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff").unwrap();
        assert!(read_info(&path).unwrap_err().to_string().contains("damaged"));
        std::fs::write(&path, b"PK\x03\x04").unwrap();
        assert!(read_info(&path).unwrap_err().to_string().contains("not a GGUF"));
    }
}
