//! cowork patch (PATCH.md, change 7): long prompts go through the layers in
//! chunks of `PREFILL_CHUNK` tokens, as llama.cpp's micro-batches do.
//!
//! A 2,000-token prompt in one forward pass held every layer's activations for
//! all of its tokens at once: Qwen2.5-0.5B's feed-forward alone is
//! 2,000 × 4,864 × 4 bytes = 39 MB per tensor, with gate, up and their product
//! alive together, plus a 2,000 × 2,000 mask. In chunks the peak is a quarter
//! of that; the arithmetic is the same (each chunk attends to the keys cached
//! by the chunks before it, with the causal mask built for its offset).

use candle_core::{Result, Tensor};

/// Tokens per chunk (llama.cpp's default micro-batch).
pub(crate) const PREFILL_CHUNK: usize = 512;

/// `PREFILL_CHUNK`, or `MISTRALRS_PREFILL_CHUNK` from the environment when set (`0` runs every
/// prompt in one pass), read at each prompt so that a test or a measurement can compare both.
fn chunk_size() -> usize {
    match std::env::var("MISTRALRS_PREFILL_CHUNK").ok().map(|v| v.parse::<usize>()) {
        Some(Ok(0)) => usize::MAX,
        Some(Ok(n)) => n,
        _ => PREFILL_CHUNK,
    }
}

/// Runs `layers` (token ids, position offsets → hidden states) over `input_ids`
/// chunk by chunk and returns the last chunk's hidden states with `context_lens`
/// made relative to it. Falls back to one pass for a batch of several
/// sequences, a short prompt, or when logits are wanted for positions before
/// the last chunk.
pub(crate) fn run(
    input_ids: &Tensor,
    start_offsets: &[usize],
    context_lens: Vec<(usize, usize)>,
    mut layers: impl FnMut(&Tensor, &[usize]) -> Result<Tensor>,
) -> Result<(Tensor, Vec<(usize, usize)>)> {
    let (batch, seq_len) = input_ids.dims2()?;
    // A decode step (one token) returns before the environment is read.
    let chunk = if batch == 1 && seq_len > 1 { chunk_size() } else { usize::MAX };
    if seq_len <= chunk {
        return Ok((layers(input_ids, start_offsets)?, context_lens));
    }
    let last_start = (seq_len - 1) / chunk * chunk;
    if context_lens.iter().any(|&(start, _)| start < last_start) {
        return Ok((layers(input_ids, start_offsets)?, context_lens));
    }
    let mut start = 0;
    loop {
        let len = chunk.min(seq_len - start);
        let offsets: Vec<usize> = start_offsets.iter().map(|offset| offset + start).collect();
        let hidden = layers(&input_ids.narrow(1, start, len)?, &offsets)?;
        if start + len == seq_len {
            let context_lens = context_lens
                .into_iter()
                .map(|(ctx_start, ctx_len)| (ctx_start - start, ctx_len))
                .collect();
            return Ok((hidden, context_lens));
        }
        start += len;
    }
}

#[cfg(test)]
mod tests {
    use super::{run, PREFILL_CHUNK};
    use candle_core::{Device, Result, Tensor};

    /// A stand-in for the layers with a KV cache: each position's output is the sum of every
    /// token up to it (this call's and the cached ones) plus its position, so a chunk that
    /// missed the cache, repeated a token or got the wrong offset gives a different result.
    fn causal_sums(
        cached: &mut Vec<u32>,
        calls: &mut Vec<(usize, usize)>,
        ids: &Tensor,
        offsets: &[usize],
    ) -> Result<Tensor> {
        assert_eq!(
            offsets[0],
            cached.len(),
            "offset is the number of cached positions"
        );
        let ids = ids.squeeze(0)?.to_vec1::<u32>()?;
        calls.push((offsets[0], ids.len()));
        let mut out = Vec::new();
        for id in ids {
            cached.push(id);
            let sum: u32 = cached.iter().sum();
            out.push((sum + cached.len() as u32 - 1) as f32);
        }
        Tensor::from_vec(out.clone(), (1, out.len(), 1), &Device::Cpu)
    }

    fn forward(
        prefix: usize,
        prompt: &[u32],
        context_lens: Vec<(usize, usize)>,
    ) -> Result<(Vec<f32>, Vec<(usize, usize)>)> {
        let mut cached: Vec<u32> = vec![1; prefix];
        let mut calls = Vec::new();
        let ids = Tensor::new(prompt, &Device::Cpu)?.unsqueeze(0)?;
        let (hidden, context_lens) = run(&ids, &[prefix], context_lens, |ids, offsets| {
            causal_sums(&mut cached, &mut calls, ids, offsets)
        })?;
        let (start, len) = context_lens[0];
        let picked = hidden
            .narrow(1, start, len)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        Ok((picked, calls))
    }

    #[test]
    fn chunks_give_the_last_positions_of_one_pass() -> Result<()> {
        let prompt: Vec<u32> = (0..1_300u32).map(|i| i % 7 + 1).collect();
        let n = prompt.len();
        // The prompt step wants the last position's logits, after a 40-token cached prefix.
        let (chunked, calls) = forward(40, &prompt, vec![(n - 1, 1)])?;
        assert_eq!(
            calls,
            vec![
                (40, PREFILL_CHUNK),
                (40 + PREFILL_CHUNK, PREFILL_CHUNK),
                (40 + 2 * PREFILL_CHUNK, n - 2 * PREFILL_CHUNK)
            ]
        );
        // One pass (positions before the last chunk wanted, so no chunking) agrees.
        let (whole, calls) = forward(40, &prompt, vec![(0, n)])?;
        assert_eq!(calls, vec![(40, n)]);
        assert_eq!(chunked, whole[n - 1..].to_vec());
        Ok(())
    }

    #[test]
    fn short_prompts_run_in_one_pass() -> Result<()> {
        let prompt = vec![3u32; PREFILL_CHUNK];
        let (_, calls) = forward(0, &prompt, vec![(PREFILL_CHUNK - 1, 1)])?;
        assert_eq!(calls, vec![(0, PREFILL_CHUNK)]);
        Ok(())
    }
}
