//! The `models` worker (`ModelsCommand`, bounded(4)): downloads missing or
//! damaged model files on request (Settings → Models, `FetchAll`), through the
//! outbound gate, reporting progress, makes the converted files, installs and
//! removes the optional models (`Install`, `Remove`;
//! `ModelsEvent::ModelsChanged` makes the app check Settings → Models' list
//! again), and adds the user's own GGUF files off the UI thread (`AddUser` →
//! `ModelsEvent::ModelAdded`). The first run's `Download` installs the models
//! it names from the upstream or a mirror, with a cancel flag the fetcher reads
//! between reads (the partial file stays, to resume), answered by
//! `ModelsChanged { name: DOWNLOAD_JOB }`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crossbeam_channel::{Receiver, bounded};

use crate::models::{Manifest, ManifestModel, safe_join};
use crate::models::events::ModelsEvent;
use crate::models::fetch::{Fetcher, Progress};
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, spawn_supervised};

#[derive(Debug)]
pub enum ModelsCommand {
    /// Fetch every file of the required models that is missing or fails its
    /// check, then make the converted files.
    FetchAll,
    /// Fetch and convert one optional model (Settings → Models → Install).
    Install(String),
    /// Delete an optional model's files (Settings → Models → Remove).
    Remove(String),
    /// Download, verify and convert these models of the manifest in order
    /// (the first run's local brain), from `mirror` when given instead of
    /// huggingface.co; `cancel` stops it between reads (the partial files
    /// stay, and the next attempt resumes them). Answered by
    /// `ModelsChanged { name: DOWNLOAD_JOB, .. }`.
    Download { names: Vec<String>, mirror: Option<String>, cancel: Arc<AtomicBool> },
    /// Where the list of added models lives (sent once at start).
    SetDataDir(PathBuf),
    /// Check and record a GGUF file the user has (`ModelsEvent::ModelAdded` answers).
    AddUser(PathBuf),
    Shutdown,
}

/// The name `ModelsChanged` carries for a `Download`'s outcome.
pub const DOWNLOAD_JOB: &str = "download";

pub struct ModelsWorker {
    manifest: Manifest,
    data_dir: Option<PathBuf>,
    models_dir: PathBuf,
    fetcher: Fetcher,
    sink: EventSink<ModelsEvent>,
}

impl ModelsWorker {
    /// Installs `model` with a progress bar per file in Settings; a failure
    /// shows on the bar of the file it stopped at.
    fn fetch_model(&self, model: &ManifestModel) -> anyhow::Result<()> {
        self.fetch_model_with(&self.fetcher, model)
    }

    fn fetch_model_with(&self, fetcher: &Fetcher, model: &ManifestModel) -> anyhow::Result<()> {
        let mut last: Option<(String, u64, u64)> = None;
        let result = fetcher.install(&self.models_dir, model, &mut |path: &str, p: Progress| {
            // At most every 2 %: the UI needs a bar, not every packet.
            let step = p.done_bytes * 50 / p.total_bytes.max(1);
            if last.as_ref().is_none_or(|(at, shown, _)| at != path || *shown != step) {
                self.sink.send(ModelsEvent::ModelDownload { path: path.to_owned(), done_bytes: p.done_bytes, total_bytes: p.total_bytes, error: None });
            }
            last = Some((path.to_owned(), step, p.total_bytes));
        });
        if let Err(err) = &result {
            let (path, total_bytes) = last.map(|(path, _, total)| (path, total)).unwrap_or_else(|| (model.name.clone(), 0));
            self.sink.send(ModelsEvent::ModelDownload { path, done_bytes: 0, total_bytes, error: Some(format!("{err:#}")) });
        }
        result
    }

    fn fetch_all(&self) {
        for model in self.manifest.models.iter().filter(|m| !m.optional) {
            if let Err(err) = self.fetch_model(model) {
                self.sink.send(ModelsEvent::ModelsChanged { name: model.name.clone(), outcome: Err(format!("{err:#}")) });
                return;
            }
        }
        self.sink.send(ModelsEvent::ModelsChanged { name: String::new(), outcome: Ok("every model file is present and verified".into()) });
    }

    /// The first run's download: each named model in turn, then what is there.
    fn download(&self, names: &[String], mirror: Option<String>, cancel: Arc<AtomicBool>) -> Result<String, String> {
        let fetcher = Fetcher::new(mirror).with_cancel(cancel);
        let mut bytes = 0;
        for name in names {
            let model = self.manifest.model(name).ok_or_else(|| format!("no model named {name}"))?;
            self.fetch_model_with(&fetcher, model).map_err(|err| {
                let text = format!("{err:#}");
                if text.contains(crate::models::fetch::CANCELLED) {
                    format!("{}: what was downloaded stays, and the next download goes on from there", crate::models::fetch::CANCELLED)
                } else {
                    format!("{name} was not installed: {text}")
                }
            })?;
            bytes += model.download_bytes();
        }
        Ok(format!("{} downloaded and verified ({:.0} MB)", names.join(", "), bytes as f64 / 1e6))
    }

    fn optional(&self, name: &str) -> anyhow::Result<&ManifestModel> {
        match self.manifest.model(name) {
            Some(model) if model.optional => Ok(model),
            Some(_) => anyhow::bail!("{name} is not an optional model"),
            None => anyhow::bail!("no model named {name}"),
        }
    }

    fn install(&self, name: &str) -> anyhow::Result<String> {
        let model = self.optional(name)?;
        self.fetch_model(model)?;
        Ok(format!("{name} is installed and verified"))
    }

    /// Removes the model's files and the folders they leave empty.
    fn remove(&self, name: &str) -> anyhow::Result<String> {
        let model = self.optional(name)?;
        let paths = model.files.iter().map(|f| f.path.as_str()).chain(model.converted.iter().map(|c| c.path.as_str()));
        let mut freed = 0;
        for relative in paths {
            let path = safe_join(&self.models_dir, relative)?;
            for candidate in [path.clone(), crate::models::fetch::partial_path(&path)] {
                match std::fs::metadata(&candidate) {
                    Ok(meta) => {
                        std::fs::remove_file(&candidate).map_err(|err| anyhow::anyhow!("cannot remove {}: {err}", candidate.display()))?;
                        freed += meta.len();
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                    Err(err) => anyhow::bail!("cannot read {}: {err}", candidate.display()),
                }
            }
            let mut dir = path.parent();
            while let Some(parent) = dir.filter(|d| *d != self.models_dir && d.starts_with(&self.models_dir)) {
                if std::fs::remove_dir(parent).is_err() {
                    break;
                }
                dir = parent.parent();
            }
        }
        Ok(format!("{name} removed ({:.0} MB freed)", freed as f64 / 1e6))
    }
}

impl Supervised for ModelsWorker {
    type Command = ModelsCommand;

    fn run(&mut self, commands: &Receiver<ModelsCommand>, _ctx: &WorkerContext) -> anyhow::Result<()> {
        while let Ok(command) = commands.recv() {
            match command {
                ModelsCommand::FetchAll => self.fetch_all(),
                ModelsCommand::Install(name) => {
                    let outcome = self.install(&name).map_err(|err| format!("{name} was not installed: {err:#}"));
                    self.sink.send(ModelsEvent::ModelsChanged { name, outcome });
                }
                ModelsCommand::Remove(name) => {
                    let outcome = self.remove(&name).map_err(|err| format!("{name} was not removed: {err:#}"));
                    self.sink.send(ModelsEvent::ModelsChanged { name, outcome });
                }
                ModelsCommand::Download { names, mirror, cancel } => {
                    let outcome = self.download(&names, mirror, cancel);
                    self.sink.send(ModelsEvent::ModelsChanged { name: DOWNLOAD_JOB.to_owned(), outcome });
                }
                ModelsCommand::SetDataDir(dir) => self.data_dir = Some(dir),
                ModelsCommand::AddUser(path) => {
                    let result = match &self.data_dir {
                        Some(dir) => crate::models::user::add(dir, &path, crate::llm::memory::meminfo()).map(|(model, _)| model).map_err(|err| format!("{err:#}")),
                        None => Err("no data directory to record the model in".to_owned()),
                    };
                    self.sink.send(ModelsEvent::ModelAdded(result));
                }
                ModelsCommand::Shutdown => break,
            }
        }
        Ok(())
    }
}

/// Starts the `models` worker for the models of `manifest` under `models_dir`.
pub fn spawn_models(
    manifest: Manifest,
    models_dir: PathBuf,
    mirror: Option<String>,
    sink: EventSink<ModelsEvent>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<ModelsCommand>> {
    spawn_supervised::<ModelsWorker, _, _>(WorkerName::Models, policy, sink.clone(), bounded(4), move |_ctx| {
        Ok(ModelsWorker { manifest: manifest.clone(), data_dir: None, models_dir: models_dir.clone(), fetcher: Fetcher::new(mirror.clone()), sink: sink.clone() })
    })
}
