//! GGUF files the user already has (Settings → Models → Add, `cowork models
//! add PATH`), as Jan and LM Studio users expect: the header and architecture
//! are checked, the memory preflight is run, size and sha256 are recorded in
//! `user-models.json` in the data directory, and the file stays where it is.
//! Before each load the engine checks the file against the recorded sha256,
//! so a file changed or damaged since is refused with a clear message.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::models::gguf::{Preflight, Verdict};

/// GGUF architectures the local engine (mistralrs 0.8.1) runs.
pub const SUPPORTED_ARCHITECTURES: &[&str] = &["llama", "mistral3", "phi2", "phi3", "starcoder2", "qwen2", "qwen3", "qwen3moe"];

/// Context the preflight reserves a KV cache for.
pub const PREFLIGHT_TOKENS: u64 = 4_096;

/// A chat model the user added.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserModel {
    /// Unique among the manifest's and the user's models: the file name without `.gguf`, lowercased.
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub sha256: String,
    pub architecture: String,
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    models: Vec<UserModel>,
}

pub fn list_path(data_dir: &Path) -> PathBuf {
    data_dir.join("user-models.json")
}

/// The models the user added; none when the list does not exist yet.
pub fn list(data_dir: &Path) -> anyhow::Result<Vec<UserModel>> {
    let path = list_path(data_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
    };
    let file: File = serde_json::from_str(&text).with_context(|| format!("{} is not a valid list of added models", path.display()))?;
    Ok(file.models)
}

/// Checks `path` and records it under a name no bundled model uses. A file
/// added before is measured again and replaces its entry. `memory`:
/// (available, total) bytes for the preflight, when known.
pub fn add(data_dir: &Path, path: &Path, memory: Option<(u64, u64)>) -> anyhow::Result<(UserModel, Option<Preflight>)> {
    let path = std::fs::canonicalize(path).with_context(|| format!("cannot open {}", path.display()))?;
    if !path.is_file() {
        bail!("{} is not a file", path.display());
    }
    crate::llm::check_gguf_header(&path).map_err(anyhow::Error::msg)?;
    let info = crate::models::gguf::read_info(&path)?;
    if !SUPPORTED_ARCHITECTURES.contains(&info.architecture.as_str()) {
        bail!(
            "{}: architecture {:?} is not supported by the local engine (supported: {})",
            path.display(),
            info.architecture,
            SUPPORTED_ARCHITECTURES.join(", ")
        );
    }
    let preflight = memory.map(|(available, total)| crate::models::gguf::preflight(&info, PREFLIGHT_TOKENS, available, total));
    if let Some(check) = preflight.as_ref().filter(|p| p.verdict == Verdict::Red) {
        bail!("{}: does not fit in this machine's memory ({})", path.display(), check.describe());
    }
    let size = std::fs::metadata(&path)?.len();
    let sha256 = crate::models::sha256_file(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut models = list(data_dir)?;
    models.retain(|m| m.path != path);
    let stem = path.file_stem().map(|s| s.to_string_lossy().to_lowercase()).unwrap_or_else(|| "model".into());
    let bundled = crate::models::Manifest::bundled()?;
    let used = |name: &str| bundled.models.iter().any(|m| m.name == name) || models.iter().any(|m| m.name == name);
    let name = (1..).map(|n| if n == 1 { stem.clone() } else { format!("{stem}-{n}") }).find(|n| !used(n)).expect("unbounded");
    let model = UserModel { name, path, size, sha256, architecture: info.architecture };
    models.push(model.clone());
    save(data_dir, &models)?;
    Ok((model, preflight))
}

/// Writes the list atomically: a crash mid-write leaves the old list.
fn save(data_dir: &Path, models: &[UserModel]) -> anyhow::Result<()> {
    std::fs::create_dir_all(data_dir)?;
    let path = list_path(data_dir);
    let partial = path.with_extension("json.partial");
    let text = serde_json::to_string_pretty(&File { models: models.to_vec() })?;
    std::fs::write(&partial, text).with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, &path).with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_list_is_a_clear_error_and_a_missing_one_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(list(dir.path()).unwrap(), Vec::new());
        std::fs::write(list_path(dir.path()), "{not json").unwrap();
        let err = format!("{:#}", list(dir.path()).unwrap_err());
        assert!(err.contains("not a valid list of added models"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_gguf_is_refused_and_nothing_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.gguf");
        std::fs::write(&file, b"hello, not a model").unwrap();
        let err = format!("{:#}", add(dir.path(), &file, None).unwrap_err());
        assert!(err.contains("not a GGUF file"), "{err}");
        assert!(!list_path(dir.path()).exists());
    }
}
