//! `cowork models …`: verify, fetch from upstream, convert (Whisper, Silero VAD, Qwen).

use std::path::Path;

use anyhow::{Context, bail};
use rayon::prelude::*;

use crate::models::fetch::{Fetcher, Progress};
use crate::models::{FileCheck, Manifest, check_file, safe_join, whisper_convert};

/// Verifies every file (size and sha256), in parallel. Returns (path, check) pairs.
pub fn verify_all(manifest: &Manifest, models_dir: &Path) -> Vec<(String, FileCheck)> {
    let mut targets = Vec::new();
    for model in &manifest.models {
        match &model.converted {
            // Sources of a converted model are only needed to convert it.
            Some(converted) => targets.push((converted.path.clone(), converted.size, converted.sha256.clone())),
            None => targets.extend(model.files.iter().map(|f| (f.path.clone(), f.size, f.sha256.clone()))),
        }
    }
    targets
        .par_iter()
        .map(|(path, size, sha256)| {
            let check = match safe_join(models_dir, path) {
                Ok(full) => check_file(&full, *size, sha256, true),
                Err(err) => FileCheck::Unreadable(format!("{err:#}")),
            };
            (path.clone(), check)
        })
        .collect()
}

pub fn verify(manifest: &Manifest, models_dir: &Path) -> anyhow::Result<()> {
    let results = verify_all(manifest, models_dir);
    let mut bad = 0;
    for (path, check) in &results {
        println!("{}", check.describe(&models_dir.join(path)));
        bad += usize::from(!check.is_ok());
    }
    if bad > 0 {
        bail!("{bad} model file(s) missing or corrupt");
    }
    Ok(())
}

/// Downloads every file from its upstream URL (resuming), then converts Whisper.
pub fn fetch_upstream(manifest: &Manifest, models_dir: &Path, mirror: Option<String>) -> anyhow::Result<()> {
    let fetcher = Fetcher::new(mirror);
    for model in &manifest.models {
        for file in &model.files {
            let url = fetcher.url_for(file);
            eprintln!("fetching {} from {url}", file.path);
            let mut last_percent = u64::MAX;
            fetcher.fetch(models_dir, file, &mut |p: Progress| {
                let percent = p.done_bytes * 100 / p.total_bytes.max(1);
                if percent / 10 != last_percent / 10 {
                    eprintln!("  {percent}% of {} bytes", p.total_bytes);
                    last_percent = percent;
                }
            })?;
        }
    }
    convert_all(manifest, models_dir)
}

/// The converter that makes a Whisper ggml file from CTranslate2 sources.
pub const WHISPER_CONVERTER: &str = "ct2-whisper-to-ggml";
/// The converter that makes whisper.cpp's Silero VAD file from the package's safetensors.
pub const SILERO_CONVERTER: &str = "silero-safetensors-to-ggml";
/// The converter that repacks a GGUF file's Q5_0 tensors as Q8_0.
pub const GGUF_Q8_0_CONVERTER: &str = "gguf-q5_0-to-q8_0";

/// Makes every converted file the manifest lists (Whisper's ggml file, Qwen's
/// Q8_0 repack) that is missing or does not verify, and checks each result
/// against the manifest.
pub fn convert_all(manifest: &Manifest, models_dir: &Path) -> anyhow::Result<()> {
    for model in &manifest.models {
        let Some(converted) = &model.converted else { continue };
        let output = safe_join(models_dir, &converted.path)?;
        if check_file(&output, converted.size, &converted.sha256, true).is_ok() {
            eprintln!("{} is already converted and verified", converted.path);
            continue;
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
    }
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
