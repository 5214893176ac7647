//! cowork patch (PATCH.md, change 4): a token-embedding table that stays
//! quantized on CPU.
//!
//! The quantized GGUF models dequantized `token_embd.weight` to F32 at load:
//! 151,936 × 896 × 4 bytes = 545 MB for Qwen2.5-0.5B, 113 MB for SmolLM2-135M,
//! most of the gap to llama.cpp's peak RSS, to look up a few rows per step.
//! On CPU the table is now kept as it is in the file and only the looked-up
//! rows are dequantized (the same arithmetic, so the same values). When the
//! output head is tied to the embeddings, the head and the table share one
//! copy of the tensor (before, the file's tensor was read twice). Other
//! devices keep the dense table.

use std::sync::Arc;

use candle_core::quantized::{ggml_file::qtensor_from_ggml, QTensor};
use candle_core::{DType, Result, Tensor};
use candle_nn::{Embedding, Module};

pub enum QEmbedding {
    Dense(Embedding),
    Quantized {
        table: Arc<QTensor>,
        rows: usize,
        hidden: usize,
        row_bytes: usize,
    },
}

impl QEmbedding {
    /// Keeps `table` quantized on CPU; dequantizes it elsewhere.
    pub fn new(table: Arc<QTensor>) -> Result<Self> {
        let (rows, hidden) = table.shape().dims2()?;
        let dtype = table.dtype();
        if !table.device().is_cpu() || hidden % dtype.block_size() != 0 {
            return Ok(Self::Dense(Embedding::new(
                table.dequantize(&table.device())?,
                hidden,
            )));
        }
        let row_bytes = hidden / dtype.block_size() * dtype.type_size();
        Ok(Self::Quantized {
            table,
            rows,
            hidden,
            row_bytes,
        })
    }
}

impl Module for QEmbedding {
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let (table, rows, hidden, row_bytes) = match self {
            Self::Dense(embedding) => return embedding.forward(ids),
            Self::Quantized {
                table,
                rows,
                hidden,
                row_bytes,
            } => (table, *rows, *hidden, *row_bytes),
        };
        let mut dims = ids.dims().to_vec();
        let ids = ids.flatten_all()?.to_dtype(DType::U32)?.to_vec1::<u32>()?;
        let data = table.data()?;
        let mut bytes = Vec::with_capacity(ids.len() * row_bytes);
        for &id in &ids {
            let id = id as usize;
            if id >= rows {
                candle_core::bail!("token id {id} is outside the embedding table ({rows} rows)");
            }
            bytes.extend_from_slice(&data[id * row_bytes..(id + 1) * row_bytes]);
        }
        let picked = qtensor_from_ggml(table.dtype(), &bytes, vec![ids.len(), hidden], &table.device())?;
        dims.push(hidden);
        picked.dequantize(&table.device())?.reshape(dims)
    }
}
