//! `cowork models …`: verify, fetch from upstream, convert Whisper.

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
    convert_whisper(manifest, models_dir)
}

/// Converts the speech model's CTranslate2 sources into its ggml file, and
/// checks the result against the manifest.
pub fn convert_whisper(manifest: &Manifest, models_dir: &Path) -> anyhow::Result<()> {
    for model in &manifest.models {
        let Some(converted) = &model.converted else { continue };
        let output = safe_join(models_dir, &converted.path)?;
        if check_file(&output, converted.size, &converted.sha256, true).is_ok() {
            eprintln!("{} is already converted and verified", converted.path);
            continue;
        }
        let source = |suffix: &str| -> anyhow::Result<std::path::PathBuf> {
            let file = model
                .files
                .iter()
                .find(|f| f.path.ends_with(suffix))
                .with_context(|| format!("model {} lists no {suffix}", model.name))?;
            safe_join(models_dir, &file.path)
        };
        let (model_bin, mel, vocab) = (source("model.bin")?, source("mel_filters.npz")?, source(".tiktoken")?);
        if let Some(parent) = output.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let size = whisper_convert::convert(&model_bin, &mel, &vocab, &output)?;
        let check = check_file(&output, converted.size, &converted.sha256, true);
        if !check.is_ok() {
            bail!("converted {} does not match the manifest: {}", model.name, check.describe(&output));
        }
        eprintln!("converted {} ({size} bytes, verified)", converted.path);
    }
    Ok(())
}
