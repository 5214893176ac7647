//! The `models` worker: downloads missing or damaged model files on request
//! (Settings → Models), through the outbound gate, reporting progress.

use std::path::PathBuf;

use crossbeam_channel::{Receiver, bounded};

use crate::events::{AppEvent, WorkerName};
use crate::models::ManifestFile;
use crate::models::fetch::{Fetcher, Progress};
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, spawn_supervised};

#[derive(Debug)]
pub enum ModelsCommand {
    /// Fetch every file that is missing or fails its check.
    FetchAll,
    /// Where the list of added models lives (sent once at start).
    SetDataDir(PathBuf),
    /// Check and record a GGUF file the user has (`AppEvent::ModelAdded` answers).
    AddUser(PathBuf),
    Shutdown,
}

pub struct ModelsWorker {
    files: Vec<ManifestFile>,
    data_dir: Option<PathBuf>,
    models_dir: PathBuf,
    fetcher: Fetcher,
    sink: EventSink,
}

impl ModelsWorker {
    fn fetch_all(&self) {
        for file in &self.files {
            let mut reported = u64::MAX;
            let sink = self.sink.clone();
            let path = file.path.clone();
            let result = self.fetcher.fetch(&self.models_dir, file, &mut |p: Progress| {
                // At most every 2 %: the UI needs a bar, not every packet.
                let step = p.done_bytes * 50 / p.total_bytes.max(1);
                if step != reported {
                    reported = step;
                    sink.send(AppEvent::ModelDownload { path: path.clone(), done_bytes: p.done_bytes, total_bytes: p.total_bytes, error: None });
                }
            });
            if let Err(err) = result {
                self.sink.send(AppEvent::ModelDownload { path: file.path.clone(), done_bytes: 0, total_bytes: file.size, error: Some(format!("{err:#}")) });
                return;
            }
        }
        self.sink.send(AppEvent::Notice("every model file is present and verified".into()));
    }
}

impl Supervised for ModelsWorker {
    type Command = ModelsCommand;

    fn run(&mut self, commands: &Receiver<ModelsCommand>, _ctx: &WorkerContext) -> anyhow::Result<()> {
        while let Ok(command) = commands.recv() {
            match command {
                ModelsCommand::FetchAll => self.fetch_all(),
                ModelsCommand::SetDataDir(dir) => self.data_dir = Some(dir),
                ModelsCommand::AddUser(path) => {
                    let result = match &self.data_dir {
                        Some(dir) => crate::models::user::add(dir, &path, crate::llm::memory::meminfo()).map(|(model, _)| model).map_err(|err| format!("{err:#}")),
                        None => Err("no data directory to record the model in".to_owned()),
                    };
                    self.sink.send(AppEvent::ModelAdded(result));
                }
                ModelsCommand::Shutdown => break,
            }
        }
        Ok(())
    }
}

/// Starts the `models` worker for `files` under `models_dir`.
pub fn spawn_models(
    files: Vec<ManifestFile>,
    models_dir: PathBuf,
    mirror: Option<String>,
    sink: EventSink,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<ModelsCommand>> {
    spawn_supervised::<ModelsWorker, _>(WorkerName::Models, policy, sink.clone(), bounded(4), move |_ctx| {
        Ok(ModelsWorker { files: files.clone(), data_dir: None, models_dir: models_dir.clone(), fetcher: Fetcher::new(mirror.clone()), sink: sink.clone() })
    })
}
