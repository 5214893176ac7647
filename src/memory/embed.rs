//! Local sentence embeddings with all-MiniLM-L6-v2: BERT from
//! candle-transformers on the CPU, mean pooling over the attention mask, then
//! L2 normalisation, so a dot product is the cosine similarity.
//!
//! Texts are embedded in batches padded to the longest in the batch (the
//! shipped tokenizer pads to a fixed 128, which wastes work on short texts) and
//! truncated at 256 word pieces, the length the model was trained on. The
//! linear weights are held column-major (a transposed view), so gemm reads them
//! in place instead of repacking each matrix on every call.
//!
//! `SharedEmbedder` loads the model once for the process and drops it after 5
//! minutes without use when no worker holds it (the idle `embed` worker wakes
//! in time to ask), trimming glibc's heap so the ~90 MB really leave; the next
//! search or embedding loads it again.

use std::path::{Path, PathBuf};

use anyhow::Context;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Width of every vector.
pub const DIMENSIONS: usize = 384;
/// Word pieces kept per text.
pub const MAX_TOKENS: usize = 256;

pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

/// The model files, relative to the models directory.
pub fn model_dir(models_dir: &Path) -> PathBuf {
    models_dir.join("all-minilm-l6-v2")
}

impl Embedder {
    /// Loads config, tokenizer and weights from `dir`; any missing or damaged
    /// file is a clear error (search then falls back to keywords).
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let config_path = dir.join("config.json");
        let config: Config = serde_json::from_str(
            &std::fs::read_to_string(&config_path).with_context(|| format!("cannot read {}", config_path.display()))?,
        )
        .with_context(|| format!("{} is not a BERT config", config_path.display()))?;
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|err| anyhow::anyhow!("cannot load {}: {err}", tokenizer_path.display()))?;
        tokenizer.with_padding(Some(PaddingParams { strategy: PaddingStrategy::BatchLongest, ..Default::default() }));
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
            .map_err(|err| anyhow::anyhow!("tokenizer truncation: {err}"))?;
        let weights = dir.join("model.safetensors");
        if !weights.is_file() {
            anyhow::bail!("{} is missing (Models in Settings, or `cowork models fetch`, downloads it)", weights.display());
        }
        let device = Device::Cpu;
        // SAFETY: the file is mapped read-only and not modified while cowork runs.
        let tensors = unsafe { candle_core::safetensors::MmapedSafetensors::new(&weights) }
            .with_context(|| format!("cannot read {}", weights.display()))?;
        let vb = VarBuilder::from_backend(Box::new(ColumnMajorLinears(tensors)), DType::F32, device.clone());
        let model = BertModel::load(vb, &config).with_context(|| format!("{} does not hold the expected weights", weights.display()))?;
        Ok(Self { model, tokenizer, device })
    }

    /// One unit-length vector per text, in order.
    pub fn embed(&self, texts: &[&str]) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|err| anyhow::anyhow!("tokenizing: {err}"))?;
        let rows = encodings.len();
        let width = encodings[0].get_ids().len();
        let flat = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Vec<u32> { encodings.iter().flat_map(|e| f(e).to_vec()).collect() };
        let ids = Tensor::from_vec(flat(&|e| e.get_ids()), (rows, width), &self.device)?;
        let types = Tensor::from_vec(flat(&|e| e.get_type_ids()), (rows, width), &self.device)?;
        let mask = Tensor::from_vec(flat(&|e| e.get_attention_mask()), (rows, width), &self.device)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?; // (rows, width, 384)
        // Mean over real tokens only: padding must not dilute short texts.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (rows, width, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (rows, 384)
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?; // (rows, 1)
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        let unit = mean.broadcast_div(&norms)?;
        Ok(unit.to_vec2::<f32>()?)
    }
}

/// Hands BERT its linear-layer weights stored column-major (the transpose of
/// the file's layout, shown through a transposed view with the same shape).
///
/// candle computes `x · Wᵀ` with gemm, which turns the problem around so the
/// weight becomes its left operand; stored row-major, gemm copies the whole
/// weight into its packed layout on every call — 60 % of embedding one
/// search query (perf). Column-major, the microkernel reads it in place:
/// a query's embedding gets several times faster, batches are unchanged.
struct ColumnMajorLinears(candle_core::safetensors::MmapedSafetensors);

impl candle_nn::var_builder::SimpleBackend for ColumnMajorLinears {
    fn get(&self, shape: candle_core::Shape, name: &str, init: candle_nn::Init, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        let tensor = candle_nn::var_builder::SimpleBackend::get(&self.0, shape, name, init, dtype, dev)?;
        // Embedding tables are gathered by row, so they stay as stored.
        if tensor.rank() == 2 && name.ends_with(".weight") && !name.contains("embeddings") {
            tensor.t()?.contiguous()?.t()
        } else {
            Ok(tensor)
        }
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        candle_nn::var_builder::SimpleBackend::get_unchecked(&self.0, name, dtype, dev)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        candle_nn::var_builder::SimpleBackend::contains_tensor(&self.0, name)
    }
}

/// Dot product of two unit vectors: their cosine similarity.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// One embedder for the process, loaded on first use by whichever worker
/// needs it first (`embed` for chunks, `search` for queries): the weights are
/// ~90 MB, so they are held once, and dropped again after `EMBEDDER_IDLE_UNLOAD`
/// without use (the embed worker asks), like the chat model. A failed load is
/// remembered for a minute, then tried again (the model may have been fetched meanwhile).
#[derive(Clone)]
pub struct SharedEmbedder {
    dir: PathBuf,
    slot: std::sync::Arc<parking_lot::Mutex<Slot>>,
}

enum Slot {
    Empty,
    Ready { model: std::sync::Arc<Embedder>, last_used: std::time::Instant },
    Failed { error: String, at: std::time::Instant },
}

const RETRY_LOAD_AFTER: std::time::Duration = std::time::Duration::from_secs(60);
/// How long the embedding model stays in memory without use. Reloading it
/// costs about 150 ms (`benches/memory.rs` `reload`), paid by the first search
/// or embedding after a quiet spell.
pub const EMBEDDER_IDLE_UNLOAD: std::time::Duration = std::time::Duration::from_secs(300);

impl SharedEmbedder {
    /// For the model in `dir` (see `model_dir`).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir, slot: std::sync::Arc::new(parking_lot::Mutex::new(Slot::Empty)) }
    }

    /// The loaded model (loading it if needed), or why it cannot load.
    pub fn get(&self) -> Result<std::sync::Arc<Embedder>, String> {
        let mut slot = self.slot.lock();
        match &mut *slot {
            Slot::Ready { model, last_used } => {
                *last_used = std::time::Instant::now();
                return Ok(model.clone());
            }
            Slot::Failed { error, at } if at.elapsed() < RETRY_LOAD_AFTER => return Err(error.clone()),
            _ => {}
        }
        let started = std::time::Instant::now();
        match Embedder::load(&self.dir) {
            Ok(model) => {
                tracing::debug!(load_millis = started.elapsed().as_millis() as u64, "loaded the embedding model");
                let model = std::sync::Arc::new(model);
                *slot = Slot::Ready { model: model.clone(), last_used: std::time::Instant::now() };
                Ok(model)
            }
            Err(err) => {
                let error = format!("{err:#}");
                tracing::warn!(%error, "the embedding model did not load; search is keyword-only");
                *slot = Slot::Failed { error: error.clone(), at: std::time::Instant::now() };
                Err(error)
            }
        }
    }

    /// Whether the model is in memory now (does not load it).
    pub fn is_loaded(&self) -> bool {
        matches!(&*self.slot.lock(), Slot::Ready { .. })
    }

    /// Drops the model if it was not used for `idle` and no worker holds it
    /// now; true when it was dropped.
    pub fn unload_if_idle(&self, idle: std::time::Duration) -> bool {
        let mut slot = self.slot.lock();
        let Slot::Ready { model, last_used } = &*slot else { return false };
        if last_used.elapsed() < idle || std::sync::Arc::strong_count(model) > 1 {
            return false;
        }
        tracing::info!(idle_secs = last_used.elapsed().as_secs(), "unloaded the embedding model after a quiet spell");
        *slot = Slot::Empty;
        // glibc keeps freed heap in its arenas; without a trim about half of
        // the ~90 MB stays resident (benches/memory.rs `reload` measures it).
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim only releases free memory back to the kernel.
        unsafe {
            libc::malloc_trim(0);
        }
        true
    }

    /// How long until `unload_if_idle(idle)` would drop the model; `None` when none is loaded.
    pub fn unload_due_in(&self, idle: std::time::Duration) -> Option<std::time::Duration> {
        match &*self.slot.lock() {
            Slot::Ready { last_used, .. } => Some(idle.saturating_sub(last_used.elapsed())),
            _ => None,
        }
    }
}

