//! Making the converted model files from their sources: Whisper's
//! CTranslate2 weights → ggml, Silero VAD's safetensors → ggml, Qwen's Q5_0
//! tensors → Q8_0. Used by `cowork models convert`, `models/fetch` and the
//! `models` worker (Settings → Models → Install).

use std::path::Path;

use anyhow::{Context, bail};

use crate::models::{Manifest, check_file, safe_join, whisper_convert};

/// The converter that makes a Whisper ggml file from CTranslate2 sources.
pub const WHISPER_CONVERTER: &str = "ct2-whisper-to-ggml";
/// The converter that makes whisper.cpp's Silero VAD file from the package's safetensors.
pub const SILERO_CONVERTER: &str = "silero-safetensors-to-ggml";
/// The converter that repacks a GGUF file's Q5_0 tensors as Q8_0.
pub const GGUF_Q8_0_CONVERTER: &str = "gguf-q5_0-to-q8_0";

/// Makes every converted file the manifest lists (Whisper's ggml file, Qwen's
/// Q8_0 repack) that is missing or does not verify, and checks each result
/// against the manifest. An optional model is converted only when its
/// sources are on disk (the user installed it).
pub fn convert_all(manifest: &Manifest, models_dir: &Path) -> anyhow::Result<()> {
    for model in &manifest.models {
        if model.optional && !model.files.iter().all(|f| safe_join(models_dir, &f.path).is_ok_and(|p| p.is_file())) {
            continue;
        }
        convert_model(model, models_dir)?;
    }
    Ok(())
}

/// Makes `model`'s converted file, unless it is there and verifies; the
/// result is checked against the manifest.
pub fn convert_model(model: &crate::models::ManifestModel, models_dir: &Path) -> anyhow::Result<()> {
    let Some(converted) = &model.converted else { return Ok(()) };
    let output = safe_join(models_dir, &converted.path)?;
    if check_file(&output, converted.size, &converted.sha256, true).is_ok() {
        eprintln!("{} is already converted and verified", converted.path);
        return Ok(());
    }
    if let Some(parent) = output.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let started = std::time::Instant::now();
    match converted.converter.as_str() {
        WHISPER_CONVERTER => convert_whisper(model, models_dir, &output)?,
        SILERO_CONVERTER => {
            let source = model.files.first().with_context(|| format!("model {} lists no file", model.name))?;
            let package = source.package.as_ref().with_context(|| format!("model {} names no package to take its version from", model.name))?;
            let version = crate::models::silero_convert::parse_version(&package.pypi)?;
            crate::models::silero_convert::convert(&safe_join(models_dir, &source.path)?, version, &output)?;
        }
        GGUF_Q8_0_CONVERTER => {
            let source = model.files.first().with_context(|| format!("model {} lists no file", model.name))?;
            let report = crate::models::gguf_repack::repack_q5_0_as_q8_0(&safe_join(models_dir, &source.path)?, &output)?;
            eprintln!("repacked {} of {} tensors from Q5_0 to Q8_0", report.repacked, report.tensors);
        }
        other => bail!("model {}: unknown converter {other:?}", model.name),
    }
    let check = check_file(&output, converted.size, &converted.sha256, true);
    if !check.is_ok() {
        bail!("converted {} does not match the manifest: {}", model.name, check.describe(&output));
    }
    eprintln!("converted {} ({} bytes, verified) in {:.1} s", converted.path, converted.size, started.elapsed().as_secs_f64());
    Ok(())
}

/// Converts the speech model's CTranslate2 sources into its ggml file.
fn convert_whisper(model: &crate::models::ManifestModel, models_dir: &Path, output: &Path) -> anyhow::Result<()> {
    let source = |suffix: &str| -> anyhow::Result<std::path::PathBuf> {
        let file = model.files.iter().find(|f| f.path.ends_with(suffix)).with_context(|| format!("model {} lists no {suffix}", model.name))?;
        safe_join(models_dir, &file.path)
    };
    let (model_bin, mel, vocab) = (source("model.bin")?, source("mel_filters.npz")?, source(".tiktoken")?);
    whisper_convert::convert(&model_bin, &mel, &vocab, output)?;
    Ok(())
}
