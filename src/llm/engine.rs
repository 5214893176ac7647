//! The inference engine behind the llm worker: mistralrs on CPU with a GGUF
//! file (its `GGUFLoaderBuilder`, F32 activations, no token source, greedy
//! sampling, its own tokio runtime `llm-rt`), behind a small trait
//! (`ChatEngine`) so worker logic can be tested without a model. The file is
//! checked (it exists, a GGUF header, the recorded size and sha256) before
//! mistralrs sees it, because mistralrs reads a missing path as a hub model id
//! and would go to the network. `LlmCommand::SetModel` swaps the file (Settings
//! → Models). A request's `Shape` may constrain the output with a grammar
//! (llguidance through mistralrs); Stop is polled every token and every 50 ms.
//!
//! mistralrs-core and candle-core are vendored with documented changes, wired
//! in by `[patch.crates-io]`: `src/vendor/mistralrs-core/` (0.8.1: the forward
//! pass on a rayon worker, CPU attention in the global pool, vectorised and
//! tiled CPU attention, quantized token embeddings, one KV cache and a bounded
//! prefix cache, prompts prefilled in chunks, …) and `src/vendor/candle-core/`
//! (0.10.2: AVX2 and tiled quantized matmul kernels), each described in its
//! `PATCH.md`. They are not part of this crate's module tree; their tests run
//! in `scripts/test` (the matmul's bit-identity in this file's unit tests, with
//! and without AVX-512), and `benches/kernels.rs` measures the matmul. Change
//! them only to carry an upstreamable fix, and say so in `PATCH.md`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mistralrs::{ChatCompletionChunkResponse, Model, RequestBuilder, Response, TextMessageRole, TokenSource};
use thiserror::Error;

use super::tool_calls::Shape;
use crate::models::{FileCheck, check_file};
use crate::records::{GenerationStats, Role};

#[derive(Debug, Error, Clone, PartialEq)]
pub enum EngineError {
    /// The model file is missing or damaged; the message says how to fix it.
    #[error("{0}")]
    ModelUnavailable(String),
    #[error("model failed to load: {0}")]
    Load(String),
    #[error("generation failed: {0}")]
    Generation(String),
    /// A background generation stopped for someone waiting (`GenerateRequest::give_way`).
    #[error("stopped to let a question go first")]
    GaveWay,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptMessage {
    pub role: PromptRole,
    pub content: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptRole {
    System,
    User,
    Assistant,
}

impl From<Role> for PromptRole {
    fn from(role: Role) -> Self {
        match role {
            Role::User => PromptRole::User,
            Role::Assistant => PromptRole::Assistant,
        }
    }
}

/// What the token callback wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamControl {
    Continue,
    Stop,
}

/// A chat model that streams tokens.
pub trait ChatEngine {
    /// Loads the model if needed; returns the load time when it loaded now.
    fn ensure_loaded(&mut self) -> Result<Option<Duration>, EngineError>;
    fn is_loaded(&self) -> bool;
    fn unload(&mut self);
    /// Streams an answer; `on_token` is called per text delta and may stop it.
    /// `should_stop` is polled while waiting for the next token. `shape`
    /// constrains what the model may write.
    fn stream(
        &mut self,
        messages: &[PromptMessage],
        max_tokens: usize,
        shape: &Shape,
        on_token: &mut dyn FnMut(&str) -> StreamControl,
        should_stop: &dyn Fn() -> bool,
    ) -> Result<GenerationStats, EngineError>;
    fn name(&self) -> String;
    /// Answer with another model file from now on (unloads the current one).
    fn set_model(&mut self, path: PathBuf, expected: Option<(u64, String)>);
    /// Whether the generations from now on are work no one is waiting for,
    /// to run below the desktop's priority.
    fn set_background(&mut self, _background: bool) {}
}

/// mistralrs with a local GGUF file, forced onto the CPU, never touching the network.
pub struct MistralEngine {
    runtime: tokio::runtime::Runtime,
    model: Option<Model>,
    model_path: PathBuf,
    /// Size and sha256 from the manifest, when the file is a bundled model.
    expected: Option<(u64, String)>,
    verified: bool,
    /// Whether the loaded model's vocabulary has `<tool_call>` as one token (asked once).
    tags_are_tokens: Option<bool>,
    /// Where background generations run their forward passes: as many threads
    /// as rayon's global pool, at nice 10 (`llm-low-N`), made on first use.
    low_pool: Option<std::sync::Arc<rayon::ThreadPool>>,
}

/// How often the stream loop looks at the stop flag while no token arrives.
const STOP_POLL: Duration = Duration::from_millis(50);

impl MistralEngine {
    pub fn new(model_path: PathBuf, expected: Option<(u64, String)>) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("llm-rt")
            .enable_all()
            .build()?;
        Ok(Self { runtime, model: None, model_path, expected, verified: false, tags_are_tokens: None, low_pool: None })
    }

    /// Checks the file before mistralrs sees it: mistralrs reads a path that does
    /// not exist as a hub model id and would go to the network.
    fn preflight(&mut self) -> Result<(), EngineError> {
        let path = &self.model_path;
        if !path.is_file() {
            return Err(EngineError::ModelUnavailable(format!(
                "chat model missing; download it under Models in Settings (or `cowork models fetch`): {}",
                path.display()
            )));
        }
        check_gguf_header(path).map_err(EngineError::ModelUnavailable)?;
        if let Some((size, sha256)) = &self.expected
            && !self.verified
        {
            let check = check_file(path, *size, sha256, true);
            if check != FileCheck::Ok {
                return Err(EngineError::ModelUnavailable(format!("chat model {}", check.describe(path))));
            }
            self.verified = true;
        }
        Ok(())
    }
}

/// A GGUF file starts with "GGUF" and a version we know.
pub fn check_gguf_header(path: &Path) -> Result<(), String> {
    let mut header = [0u8; 8];
    let mut file = std::fs::File::open(path).map_err(|err| format!("cannot open chat model ({err}): {}", path.display()))?;
    file.read_exact(&mut header)
        .map_err(|_| format!("chat model is too short to be GGUF (corrupt?): {}", path.display()))?;
    if &header[..4] != b"GGUF" {
        return Err(format!("chat model is not a GGUF file (corrupt?): {}", path.display()));
    }
    let version = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if !(2..=3).contains(&version) {
        return Err(format!("chat model has unsupported GGUF version {version}: {}", path.display()));
    }
    Ok(())
}

/// Loads a GGUF file on the CPU with F32 activations and KV cache.
///
/// `GgufModelBuilder` hard-codes `ModelDType::Auto`, which picks F16 on CPU;
/// this is the same construction with F32 (mistralrs's lower-level loader),
/// no hub access and one sequence at a time. F32 matches llama.cpp's CPU
/// activations: Qwen answered 2 more of the 25 grounded questions, decode is
/// 5–10 % faster, and the KV cache doubles (≈ 100 MB for Qwen at 4,096 tokens).
async fn load_f32(dir: String, file: String) -> anyhow::Result<Model> {
    use mistralrs::core::{
        AddModelConfig, AutoDeviceMapParams, DefaultSchedulerMethod, DeviceMapSetting, EngineConfig, GGUFLoaderBuilder,
        GGUFSpecificConfig, ModelDType, SchedulerConfig,
    };
    let loader = GGUFLoaderBuilder::new(None, None, dir, vec![file], GGUFSpecificConfig { topology: None }, false, None).build();
    let pipeline = loader.load_model_from_hf(
        None,
        TokenSource::None,
        &ModelDType::F32,
        &mistralrs::Device::Cpu,
        true,
        DeviceMapSetting::Auto(AutoDeviceMapParams::default_text()),
        None,
        None,
    )?;
    let scheduler = SchedulerConfig::DefaultScheduler { method: DefaultSchedulerMethod::Fixed(1.try_into()?) };
    let config = AddModelConfig {
        engine_config: EngineConfig {
            throughput_logging_enabled: false,
            // For measurements: `scripts/measure` times a follow-up with and without it.
            no_prefix_cache: std::env::var_os("COWORK_NO_PREFIX_CACHE").is_some(),
            ..EngineConfig::default()
        },
        mcp_client_config: None,
        loader_config: None,
    };
    Ok(mistralrs::model_builder_trait::build_model_from_pipeline(pipeline, scheduler, config).await)
}

impl ChatEngine for MistralEngine {
    fn ensure_loaded(&mut self) -> Result<Option<Duration>, EngineError> {
        if self.model.is_some() {
            return Ok(None);
        }
        self.preflight()?;
        let started = Instant::now();
        let dir = self.model_path.parent().unwrap_or(Path::new(".")).to_string_lossy().into_owned();
        let file = self.model_path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let model = self.runtime.block_on(load_f32(dir, file)).map_err(|err| EngineError::Load(format!("{err:#}")))?;
        self.model = Some(model);
        Ok(Some(started.elapsed()))
    }

    fn is_loaded(&self) -> bool {
        self.model.is_some()
    }

    fn unload(&mut self) {
        self.model = None;
    }

    fn stream(
        &mut self,
        messages: &[PromptMessage],
        max_tokens: usize,
        shape: &Shape,
        on_token: &mut dyn FnMut(&str) -> StreamControl,
        should_stop: &dyn Fn() -> bool,
    ) -> Result<GenerationStats, EngineError> {
        let model = self.model.as_ref().ok_or_else(|| EngineError::Generation("model is not loaded".into()))?;
        // Greedy, without frequency or presence penalties: mistralrs 0.8 counts
        // the prompt's tokens in those penalties, so they pushed the model away
        // from every name, number and code its context gave it (docs/engine.md,
        // "The local model's prompt"). Answers are short; max_len bounds a loop.
        let mut request = RequestBuilder::new().set_deterministic_sampler().set_sampler_max_len(max_tokens);
        for message in messages {
            let role = match message.role {
                PromptRole::System => TextMessageRole::System,
                PromptRole::User => TextMessageRole::User,
                PromptRole::Assistant => TextMessageRole::Assistant,
            };
            request = request.add_message(role, &message.content);
        }
        if *shape != Shape::Free {
            let tags_are_tokens = *self.tags_are_tokens.get_or_insert_with(|| {
                self.runtime
                    .block_on(model.tokenize(either::Either::Right("<tool_call>".into()), None, false, false, None))
                    .is_ok_and(|ids| ids.len() == 1)
            });
            if let Some(grammar) = shape.grammar(tags_are_tokens) {
                request = request.set_constraint(mistralrs::Constraint::Lark(grammar));
            }
        }
        self.runtime.block_on(async {
            let started = Instant::now();
            let mut stats = GenerationStats::default();
            let mut stream = model
                .stream_chat_request(request)
                .await
                .map_err(|err| EngineError::Generation(format!("{err:#}")))?;
            let mut first_token_at = None;
            let mut tokens = 0usize;
            loop {
                if should_stop() {
                    // Dropping the stream makes mistralrs cancel the sequence at its next token.
                    break;
                }
                let next = match tokio::time::timeout(STOP_POLL, stream.next()).await {
                    Ok(next) => next,
                    Err(_elapsed) => continue,
                };
                let Some(response) = next else { break };
                match response {
                    Response::Chunk(ChatCompletionChunkResponse { choices, usage, .. }) => {
                        if let Some(usage) = usage {
                            stats.prompt_tokens = usage.prompt_tokens;
                            stats.completion_tokens = usage.completion_tokens;
                            stats.tokens_per_sec = usage.avg_compl_tok_per_sec;
                            // The prompt rate counts the tokens read, not the prefix cache's (PATCH.md change 16).
                            let read = (usage.avg_prompt_tok_per_sec * usage.total_prompt_time_sec).round() as usize;
                            stats.cached_prompt_tokens = usage.prompt_tokens.saturating_sub(read);
                            stats.prompt_millis = (usage.total_prompt_time_sec * 1000.0).round() as u64;
                        }
                        let mut finished = false;
                        for choice in choices {
                            if let Some(text) = choice.delta.content.as_deref()
                                && !text.is_empty()
                            {
                                first_token_at.get_or_insert_with(Instant::now);
                                tokens += 1;
                                if on_token(text) == StreamControl::Stop {
                                    finished = true;
                                }
                            }
                            finished |= choice.finish_reason.is_some();
                        }
                        if finished {
                            break;
                        }
                    }
                    Response::Done(_) => break,
                    Response::ModelError(message, _) => return Err(EngineError::Generation(message)),
                    Response::InternalError(err) | Response::ValidationError(err) => {
                        return Err(EngineError::Generation(err.to_string()));
                    }
                    _ => {}
                }
            }
            if let Some(first) = first_token_at {
                stats.first_token_millis = first.duration_since(started).as_millis() as u64;
                if stats.completion_tokens == 0 {
                    stats.completion_tokens = tokens;
                }
                if stats.tokens_per_sec == 0.0 && tokens > 1 {
                    stats.tokens_per_sec = (tokens - 1) as f32 / first.elapsed().as_secs_f32().max(1e-3);
                }
            }
            Ok(stats)
        })
    }

    fn name(&self) -> String {
        self.model_path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
    }

    /// A background generation's forward passes, and the parallel loops under
    /// them, run on the low-priority pool (mistralrs-core PATCH.md change 17):
    /// on a busy machine the user's programs and cowork's interface come first.
    fn set_background(&mut self, background: bool) {
        if background && self.low_pool.is_none() {
            let built = rayon::ThreadPoolBuilder::new()
                .num_threads(rayon::current_num_threads())
                .thread_name(|i| format!("llm-low-{i}"))
                .start_handler(|_| crate::runtime::lower_thread_priority())
                .build();
            match built {
                Ok(pool) => self.low_pool = Some(std::sync::Arc::new(pool)),
                Err(err) => tracing::warn!(%err, "no low-priority threads: background work runs at normal priority"),
            }
        }
        mistralrs_core::set_forward_pool(self.low_pool.clone().filter(|_| background));
    }

    fn set_model(&mut self, path: PathBuf, expected: Option<(u64, String)>) {
        self.model = None;
        self.tags_are_tokens = None;
        self.model_path = path;
        self.expected = expected;
        self.verified = false;
    }
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
    use candle_core::{Device, Module, Tensor};

    fn values(len: usize, mut seed: u64) -> Vec<f32> {
        (0..len)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// The vendored candle-core quantizes activations with AVX2
    /// (src/vendor/candle-core/PATCH.md, change 7): every block must equal
    /// candle's portable loop bit for bit — the scale from the first element of
    /// largest magnitude (ties of +x and -x), rounding half away from zero
    /// (exact halves, both signs), the clamp at 127, NaN skipped, zero blocks.
    #[test]
    fn activation_quantization_matches_the_portable_loop() {
        use candle_core::quantized::GgmlType;
        use candle_core::quantized::k_quants::{BlockQ8K, QK_K};
        let mut rows: Vec<Vec<f32>> = (0..40).map(|seed| values(QK_K * 3, seed + 10)).collect();
        // The largest magnitude twice, negative first: the scale's sign comes from the first.
        rows[0][5] = -3.0;
        rows[0][300] = 3.0;
        // Values that land on exact halves after scaling by -128 / max (max = -128 here: scale 1).
        let mut halves: Vec<f32> = (0..QK_K).map(|i| (i as f32 - 128.0) + 0.5).collect();
        halves[0] = -128.0;
        rows[1] = [halves.clone(), halves.iter().map(|v| -v).collect(), vec![0.0; QK_K]].concat();
        // NaN among ordinary values, an all-zero block, a block of one value, tiny values.
        rows[2][17] = f32::NAN;
        rows[3][..QK_K].fill(0.0);
        rows[4][QK_K..2 * QK_K].fill(-0.25);
        rows[5].iter_mut().for_each(|v| *v *= 1e-30);
        for (r, row) in rows.iter().enumerate() {
            let mut fast = vec![BlockQ8K::zeros(); 3];
            let mut reference = vec![BlockQ8K::zeros(); 3];
            BlockQ8K::from_float(row, &mut fast);
            BlockQ8K::from_float_reference(row, &mut reference);
            for (b, (fast, reference)) in fast.iter().zip(&reference).enumerate() {
                let (fd, fq, fs) = fast.parts();
                let (rd, rq, rs) = reference.parts();
                assert_eq!(fd.to_bits(), rd.to_bits(), "row {r} block {b}: scale");
                assert_eq!(fq, rq, "row {r} block {b}: values");
                assert_eq!(fs, rs, "row {r} block {b}: sums");
            }
        }
        // The halves row really has halves to round (not vacuous): its first block's scale is 1.
        let mut block = vec![BlockQ8K::zeros(); 3];
        BlockQ8K::from_float(&rows[1], &mut block);
        assert_eq!(block[0].parts().0, 1.0);
        assert_eq!(block[0].parts().1[1], -127, "-126.5 rounds away from zero");
        assert_eq!(block[0].parts().1[200], 73, "72.5 rounds away from zero");
        assert_eq!(block[0].parts().1[255], 127, "127.5 rounds to 128, clamped to 127");
        assert_eq!(block[1].parts().1[1], -127, "126.5 scaled by -1");
    }

    /// The quantized kernels take an AVX-512 VNNI path or an AVX2 one, chosen
    /// once per process (`CANDLE_NO_AVX512` forces AVX2); both share one
    /// arithmetic (exact per-block integer sums, one FMA per block and output),
    /// so a model answers the same on any x86-64 CPU. This test computes a
    /// prompt's and a decode step's products for each type with a VNNI path and
    /// runs itself again in a child process on the AVX2 path: the bits must be
    /// equal. (On a CPU without AVX-512 VNNI both processes take AVX2, and the
    /// comparison says nothing new; it prints which.)
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn quantized_kernels_give_the_same_bits_on_the_avx2_and_vnni_paths() -> anyhow::Result<()> {
        const CHILD: &str = "COWORK_KERNEL_BITS_CHILD";
        let (m, k, n) = (9, 1_024, 70);
        let x = Tensor::from_vec(values(m * k, 5), (m, k), &Device::Cpu)?;
        let mut bits = Vec::new();
        for dtype in [GgmlDType::Q8_0, GgmlDType::Q4K, GgmlDType::Q6K] {
            let w = Tensor::from_vec(values(n * k, 6), (n, k), &Device::Cpu)?;
            let q = QMatMul::from_qtensor(QTensor::quantize(&w, dtype)?)?;
            for out in [q.forward(&x)?, q.forward(&x.narrow(0, 0, 1)?.contiguous()?)?] {
                bits.extend(out.flatten_all()?.to_vec1::<f32>()?.iter().map(|v| v.to_bits()));
            }
        }
        let digest = bits.iter().fold(0xcbf29ce484222325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x100000001b3));
        if std::env::var_os(CHILD).is_some() {
            println!("kernel bits: {digest:016x}");
            return Ok(());
        }
        let child = std::process::Command::new(std::env::current_exe()?)
            .args(["--exact", "llm::engine::tests::quantized_kernels_give_the_same_bits_on_the_avx2_and_vnni_paths", "--nocapture", "--test-threads", "1"])
            .env(CHILD, "1")
            .env("CANDLE_NO_AVX512", "1")
            .output()?;
        let stdout = String::from_utf8_lossy(&child.stdout);
        // The harness prints "test <name> ... " on the line the child's digest follows.
        let theirs = stdout.lines().find_map(|l| l.split("kernel bits: ").nth(1)).map(|d| d.trim().to_owned());
        assert!(child.status.success() && theirs.is_some(), "the AVX2 child failed: {stdout}");
        let vnni = std::env::var_os("CANDLE_NO_AVX512").is_none() && is_x86_feature_detected!("avx512vnni");
        eprintln!("this process: {} path; the child: AVX2 path", if vnni { "AVX-512 VNNI" } else { "AVX2" });
        assert_eq!(theirs.as_deref(), Some(format!("{digest:016x}").as_str()), "the AVX2 path's products differ from this process's");
        Ok(())
    }

    /// The vendored candle-core multiplies a prompt (several rows) in a tiled
    /// loop with four-row kernels, and one row (a decode step) four weight rows
    /// at a time (src/vendor/candle-core/PATCH.md). Each row must come out
    /// bit-identical to the same row alone, and close to the product with the
    /// dequantized weights.
    #[test]
    fn quantized_prefill_matmul_matches_row_by_row_and_dense() -> candle_core::Result<()> {
        // 70 rows cross a 64-row tile and end in a partial group of four;
        // 203 columns end in a partial chunk of 16 of eleven columns (two
        // 4 × 4 output tiles, a 2 × 4 one and an odd column; the decode
        // gemv's groups of four columns leave three). scripts/test runs it again with
        // CANDLE_NO_AVX512=1, for the AVX2 kernels on a CPU with AVX-512 VNNI.
        let (m, k, n) = (70, 768, 203);
        let x = Tensor::from_vec(values(m * k, 2), (m, k), &Device::Cpu)?;
        for dtype in [GgmlDType::Q4_1, GgmlDType::Q8_0, GgmlDType::Q4_0, GgmlDType::Q6K, GgmlDType::Q4K] {
            let w = Tensor::from_vec(values(n * k, 1), (n, k), &Device::Cpu)?;
            let qw = QTensor::quantize(&w, dtype)?;
            let dequantized = qw.dequantize(&Device::Cpu)?;
            let q = QMatMul::from_qtensor(qw)?;
            let all = q.forward(&x)?;
            for r in 0..m {
                let alone = q.forward(&x.narrow(0, r, 1)?.contiguous()?)?;
                assert_eq!(
                    all.narrow(0, r, 1)?.to_vec2::<f32>()?,
                    alone.to_vec2::<f32>()?,
                    "{dtype:?}: row {r} of the prompt differs from the row alone"
                );
            }
            let dense = x.matmul(&dequantized.t()?)?;
            let err = (&all - &dense)?.abs()?.max_all()?.to_scalar::<f32>()?;
            let scale = dense.abs()?.max_all()?.to_scalar::<f32>()?;
            assert!(err <= 0.02 * scale, "{dtype:?}: max error {err} against {scale}");
        }
        Ok(())
    }
}
