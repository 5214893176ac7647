//! Bundled models: the manifest in `models/manifest.json` (compiled in: each
//! model's files, sizes, sha256, licence and sources), locating and verifying
//! model files, fetching them from upstream URLs with resume (`fetch`; the
//! Python `models/fetch` takes the package route on machines that reach only
//! package registries), and making the converted files (`convert`): CTranslate2
//! Whisper weights and Silero VAD's safetensors to whisper.cpp's ggml formats,
//! a GGUF's Q5_0 tensors repacked as Q8_0. Converters are named in the manifest
//! (`converted.converter`) and their output is pinned by sha256. `gguf` reads a
//! GGUF header and grades the memory preflight, `user` records GGUF files the
//! user adds, and `worker` is the `models` thread.
//!
//! A model marked `optional` in the manifest (Qwen2.5-Coder 1.5B, whisper-base)
//! is installed only on request and verified only once present. The manifest's
//! `kv_bytes_per_token` lets the first run grade a chat model against this
//! machine (`gguf::verdict`) before its file is here. Which chat model answers
//! is `config::resolve_chat_model`: the chosen one, else the first installed
//! manifest model the preflight accepts that is fast enough here
//! (`config::fast_enough`: its median first token once it has answered five
//! times here, else an estimate from its size and the cores).
//!
//! Invariant: every path from the manifest goes through `safe_join`; nothing is
//! written outside the models directory.

pub mod convert;
pub mod events;
pub mod fetch;
pub mod gguf;
pub mod gguf_repack;
pub mod manifest;
pub mod silero_convert;
pub mod user;
pub mod whisper_convert;
pub mod worker;

pub use manifest::{Manifest, ManifestFile, ManifestModel, ModelRole, safe_join};

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Lowercase hex sha256 of a file, streamed.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The state of one model file on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileCheck {
    Ok,
    Missing,
    WrongSize { expected: u64, actual: u64 },
    WrongChecksum { expected: String, actual: String },
    Unreadable(String),
}

impl FileCheck {
    pub fn is_ok(&self) -> bool {
        matches!(self, FileCheck::Ok)
    }

    /// A sentence a user can act on.
    pub fn describe(&self, path: &Path) -> String {
        match self {
            FileCheck::Ok => format!("ok {}", path.display()),
            FileCheck::Missing => format!("missing; download it under Models in Settings (or `cowork models fetch`): {}", path.display()),
            FileCheck::WrongSize { expected, actual } => format!(
                "corrupt or incomplete: {actual} bytes, expected {expected}; download it again under Models in Settings (or `cowork models fetch`): {}",
                path.display()
            ),
            FileCheck::WrongChecksum { expected, actual } => format!(
                "corrupt: sha256 {actual}, expected {expected}; download it again under Models in Settings (or `cowork models fetch`): {}",
                path.display()
            ),
            FileCheck::Unreadable(err) => format!("unreadable ({err}): {}", path.display()),
        }
    }
}

/// Checks size, and the sha256 too when `full` (slower: reads the whole file).
pub fn check_file(path: &Path, size: u64, sha256: &str, full: bool) -> FileCheck {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return FileCheck::Missing,
        Err(err) => return FileCheck::Unreadable(err.to_string()),
    };
    if metadata.len() != size {
        return FileCheck::WrongSize { expected: size, actual: metadata.len() };
    }
    if full {
        match sha256_file(path) {
            Ok(actual) if actual.eq_ignore_ascii_case(sha256) => {}
            Ok(actual) => return FileCheck::WrongChecksum { expected: sha256.to_owned(), actual },
            Err(err) => return FileCheck::Unreadable(err.to_string()),
        }
    }
    FileCheck::Ok
}
