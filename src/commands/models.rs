//! `cowork models …`: verify, fetch from upstream, convert (Whisper, Silero VAD, Qwen).

use std::path::Path;

use anyhow::bail;
use rayon::prelude::*;

use crate::models::fetch::{Fetcher, Progress};
use crate::models::{FileCheck, Manifest, check_file, safe_join};

/// Verifies every file (size and sha256), in parallel. Returns (path, check) pairs.
pub fn verify_all(manifest: &Manifest, models_dir: &Path) -> Vec<(String, FileCheck)> {
    let mut targets = Vec::new();
    // An optional model is checked once the user has installed it (or begun to).
    for model in manifest.models.iter().filter(|m| !m.optional || m.any_file_present(models_dir)) {
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

/// The models `fetch` installs: every required one, and the optional ones named in `with`.
pub fn selected<'a>(manifest: &'a Manifest, with: &[String]) -> anyhow::Result<Vec<&'a crate::models::ManifestModel>> {
    for name in with {
        match manifest.model(name) {
            Some(model) if model.optional => {}
            Some(_) => bail!("{name} is installed by default; --with names an optional model"),
            None => {
                let optional: Vec<&str> = manifest.models.iter().filter(|m| m.optional).map(|m| m.name.as_str()).collect();
                bail!("no model named {name:?}; the optional models are {}", optional.join(", "))
            }
        }
    }
    Ok(manifest.models.iter().filter(|m| !m.optional || with.contains(&m.name)).collect())
}

/// Downloads the files of every required model and of the optional ones in
/// `with` from their upstream URLs (resuming), then makes the converted files.
pub fn fetch_upstream(manifest: &Manifest, models_dir: &Path, mirror: Option<String>, with: &[String], only: &[String]) -> anyhow::Result<()> {
    let fetcher = Fetcher::new(mirror);
    let models = if only.is_empty() {
        selected(manifest, with)?
    } else {
        only.iter().map(|name| manifest.model(name).ok_or_else(|| anyhow::anyhow!("no model named {name:?}"))).collect::<anyhow::Result<Vec<_>>>()?
    };
    for model in models {
        let mut last: Option<(String, u64)> = None;
        fetcher.install(models_dir, model, &mut |path: &str, p: Progress| {
            let tenth = p.done_bytes * 10 / p.total_bytes.max(1);
            if last.as_ref().is_none_or(|(at, shown)| at != path || *shown != tenth) {
                eprintln!("{path}: {}% of {} bytes", tenth * 10, p.total_bytes);
                last = Some((path.to_owned(), tenth));
            }
        })?;
    }
    Ok(())
}


/// `cowork models cloud PROVIDER [--use MODEL] [--json]`: what a configured
/// provider offers (its own list, through the outbound gate), each model with
/// its context window and prices where known; `--use` makes one the provider's model.
pub fn cloud(paths: &crate::config::Paths, name: &str, choose: Option<&str>, json: bool) -> anyhow::Result<()> {
    use crate::brains::Providers;
    let file = Providers::path(&paths.data_dir);
    let mut providers = Providers::load(&file)?;
    let Some(provider) = providers.get(name).cloned() else {
        let known: Vec<&str> = providers.list.iter().map(|p| p.name.as_str()).collect();
        bail!("no provider {name:?} in {} (configured: {})", file.display(), if known.is_empty() { "none".into() } else { known.join(", ") });
    };
    let key = crate::brains::provider_key(&paths.data_dir, &provider)?;
    let models = crate::brains::catalog::list_models(crate::net::OutboundGate::global(), &provider, key.as_deref())?;
    if let Some(model) = choose {
        if !models.iter().any(|m| m.id == model) {
            bail!("{name} does not offer {model:?} (it offers {} models; `cowork models cloud {name}` lists them)", models.len());
        }
        providers.upsert(crate::brains::ProviderConfig { model: model.to_owned(), ..provider })?;
        providers.save(&file)?;
        println!("{name} answers with {model} from now on");
        return Ok(());
    }
    for model in &models {
        if json {
            let line = serde_json::json!({
                "id": model.id, "name": model.display_name, "context": model.context,
                "price_in_per_mtok": model.price_in, "price_out_per_mtok": model.price_out,
                "reasoning": model.reasoning, "current": model.id == provider.model,
            });
            println!("{line}");
        } else {
            println!("{}{}", if model.id == provider.model { "* " } else { "  " }, model.describe());
        }
    }
    if !json {
        eprintln!("[{} models from {name}; prices per million tokens (in / out), known ones from {}; * is the one it answers with]", models.len(), crate::brains::prices::source());
    }
    Ok(())
}
