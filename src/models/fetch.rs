//! Downloading model files from their upstream URLs (the route a user with
//! internet takes): resumable, size- and sha256-verified, and confined to the
//! models directory. Progress is reported through a callback.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::models::manifest::{ManifestFile, safe_join};
use crate::models::{FileCheck, check_file, sha256_file};

/// Progress of one file: bytes on disk so far and the expected total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub done_bytes: u64,
    pub total_bytes: u64,
}

pub struct Fetcher {
    /// Replaces `https://huggingface.co` in upstream URLs (a mirror, or a test server).
    mirror: Option<String>,
    /// Set by the user (the first run's Cancel): the download stops at its
    /// next read, and what is on disk stays for the next attempt to resume.
    cancel: Option<Arc<AtomicBool>>,
}

/// What a cancelled download says (the caller tells it from a failure by this).
pub const CANCELLED: &str = "the download was cancelled";

const HUB: &str = "https://huggingface.co";

impl Fetcher {
    pub fn new(mirror: Option<String>) -> Self {
        Self { mirror, cancel: None }
    }

    pub fn with_cancel(mut self, cancel: Arc<AtomicBool>) -> Self {
        self.cancel = Some(cancel);
        self
    }

    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(|flag| flag.load(Ordering::SeqCst))
    }

    pub fn url_for(&self, file: &ManifestFile) -> String {
        match (&self.mirror, file.url.strip_prefix(HUB)) {
            (Some(mirror), Some(rest)) => format!("{}{rest}", mirror.trim_end_matches('/')),
            _ => file.url.clone(),
        }
    }

    /// Ensures `file` is present and verified under `models_dir`, downloading
    /// (or resuming) it if needed. Returns the final path.
    pub fn fetch(
        &self,
        models_dir: &Path,
        file: &ManifestFile,
        progress: &mut dyn FnMut(Progress),
    ) -> anyhow::Result<PathBuf> {
        let target = safe_join(models_dir, &file.path)?;
        if check_file(&target, file.size, &file.sha256, true) == FileCheck::Ok {
            progress(Progress { done_bytes: file.size, total_bytes: file.size });
            return Ok(target);
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let partial = partial_path(&target);
        let url = self.url_for(file);
        // Each attempt resumes from what is on disk; a connection cut mid-file costs only a retry.
        let mut last_error = None;
        for attempt in 0..5 {
            if self.cancelled() {
                bail!("{CANCELLED}");
            }
            if attempt > 0 {
                // The pause before a retry, in steps short enough for Cancel.
                let until = std::time::Instant::now() + Duration::from_millis(200 * (1 << attempt));
                while std::time::Instant::now() < until && !self.cancelled() {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            match self.download_once(&url, &partial, file.size, progress) {
                Ok(()) => {
                    last_error = None;
                    break;
                }
                Err(err) => {
                    tracing::warn!(%url, attempt, error = %format!("{err:#}"), "download interrupted");
                    last_error = Some(err);
                }
            }
        }
        if let Some(err) = last_error {
            return Err(err.context(format!("cannot download {url}")));
        }
        let actual = sha256_file(&partial)?;
        if !actual.eq_ignore_ascii_case(&file.sha256) {
            let _ = std::fs::remove_file(&partial);
            bail!("checksum mismatch for {url}: got sha256 {actual}, expected {}; the partial file was removed", file.sha256);
        }
        std::fs::rename(&partial, &target).with_context(|| format!("cannot move download into {}", target.display()))?;
        Ok(target)
    }

    /// Installs `model`: downloads what it lacks, then makes its converted
    /// file; a model whose converted file already verifies needs none of its
    /// sources. `progress` hears (path, progress) for each file from its
    /// start, and for the converted file before (0) and after (its size) converting.
    pub fn install(&self, models_dir: &Path, model: &crate::models::ManifestModel, progress: &mut dyn FnMut(&str, Progress)) -> anyhow::Result<()> {
        if let Some(converted) = &model.converted
            && check_file(&safe_join(models_dir, &converted.path)?, converted.size, &converted.sha256, true).is_ok()
        {
            return Ok(());
        }
        for file in &model.files {
            // Announced first, so a file that fails before its first byte is the one named.
            progress(&file.path, Progress { done_bytes: 0, total_bytes: file.size });
            self.fetch(models_dir, file, &mut |p| progress(&file.path, p))?;
        }
        if let Some(converted) = &model.converted {
            progress(&converted.path, Progress { done_bytes: 0, total_bytes: converted.size });
            crate::models::convert::convert_model(model, models_dir)?;
            progress(&converted.path, Progress { done_bytes: converted.size, total_bytes: converted.size });
        }
        Ok(())
    }

    fn download_once(
        &self,
        url: &str,
        partial: &Path,
        total: u64,
        progress: &mut dyn FnMut(Progress),
    ) -> anyhow::Result<()> {
        let have = std::fs::metadata(partial).map(|m| m.len()).unwrap_or(0);
        if have > total {
            std::fs::remove_file(partial)?;
            return self.download_once(url, partial, total, progress);
        }
        if have == total {
            return Ok(());
        }
        // Every download goes through the outbound gate (offline mode refuses it, the log records it).
        let admission = crate::net::OutboundGate::global().admit(url, "model download")?;
        let agent = admission.agent(|config| {
            config
                .timeout_connect(Some(Duration::from_secs(15)))
                .timeout_recv_response(Some(Duration::from_secs(60)))
                // A stalled body read fails instead of hanging; resume picks it up.
                .timeout_recv_body(Some(Duration::from_secs(120)))
                .http_status_as_error(false)
        });
        let mut request = agent.get(url);
        if have > 0 {
            request = request.header("Range", format!("bytes={have}-"));
        }
        let gate = crate::net::OutboundGate::global();
        let mut response = match request.call() {
            Ok(response) => response,
            Err(err) => {
                gate.finish(admission, 0, 0);
                return Err(err).with_context(|| format!("request failed {url}"));
            }
        };
        let mut received = 0u64;
        let outcome = self.receive(&mut response, partial, have, total, &mut received, progress);
        gate.finish(admission, 0, received);
        outcome
    }

    fn receive(
        &self,
        response: &mut ureq::http::Response<ureq::Body>,
        partial: &Path,
        have: u64,
        total: u64,
        received: &mut u64,
        progress: &mut dyn FnMut(Progress),
    ) -> anyhow::Result<()> {
        let status = response.status().as_u16();
        let mut file = match status {
            206 => OpenOptions::new().append(true).open(partial)?,
            // The server ignored the range (or we asked for none): start over.
            200 => OpenOptions::new().create(true).write(true).truncate(true).open(partial)?,
            416 => {
                // We hold more than the server has: our partial file is stale.
                std::fs::remove_file(partial)?;
                bail!("server refused the resume range (HTTP 416)");
            }
            other => bail!("server answered HTTP {other}"),
        };
        let mut done = if status == 206 { have } else { 0 };
        let mut reader = response.body_mut().as_reader();
        let mut buffer = vec![0u8; 256 * 1024];
        loop {
            if self.cancelled() {
                file.sync_all()?;
                bail!("{CANCELLED}");
            }
            let read = reader.read(&mut buffer).context("download stream broke")?;
            if read == 0 {
                break;
            }
            file.write_all(&buffer[..read]).with_context(|| format!("cannot write {}", partial.display()))?;
            done += read as u64;
            *received += read as u64;
            progress(Progress { done_bytes: done, total_bytes: total });
            if done > total {
                bail!("server sent more than the expected {total} bytes");
            }
        }
        file.sync_all()?;
        if done < total {
            bail!("connection closed after {done} of {total} bytes");
        }
        Ok(())
    }
}

pub fn partial_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".part");
    target.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_replaces_only_the_hub_prefix() {
        let file = ManifestFile {
            path: "a/b.gguf".into(),
            size: 1,
            sha256: String::new(),
            url: "https://huggingface.co/org/repo/resolve/main/b.gguf".into(),
            package: None,
            package_parts: Vec::new(),
        };
        let fetcher = Fetcher::new(Some("http://127.0.0.1:9/".into()));
        assert_eq!(fetcher.url_for(&file), "http://127.0.0.1:9/org/repo/resolve/main/b.gguf");
        let other = ManifestFile { url: "https://example.org/x".into(), ..file };
        assert_eq!(fetcher.url_for(&other), "https://example.org/x");
    }
}
