//! The `apps` worker (in the sidebar's process, with automations and notify):
//! installs, lists and removes apps, and runs the open ones. It owns the
//! wasmtime runtime (made when an app is first opened or installed), the
//! running instances with their state, and the read lane (`HostLane`), which
//! reads cowork.db on a read-only connection and writes the apps tables
//! (`apps`, `app_storage`, `app_threads`) through the store's one writer
//! (`StoreLink::call`). The UI sends `AppsCommand`s (bounded(32): Inspect,
//! InspectDraft, Install, SetEnabled, Remove, Open, Act, Close, LinkThread, …)
//! and gets `AppsView`s: the installed apps, the install dialog's disclosure,
//! and each open app's parsed view, or the error card that replaced it. A
//! failed instance is dropped and a new one made for the next call. `cowork
//! apps` uses the same plain functions (`store`) without the thread.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::lane::{Completer, HostLane};
use super::manifest::{Disclosure, Manifest, Package};
use super::runtime::{Capability, RunningApp, Runtime};
use super::store::{self as db, AppRow};
use super::view::View;
use crate::ids::now_millis;
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, spawn_supervised};

#[derive(Debug)]
pub enum AppsCommand {
    /// Read a package (a folder or a zip) and disclose what it can do.
    Inspect { path: PathBuf },
    /// A drafted app without code (its manifest): written to a drafts folder, then inspected.
    InspectDraft { manifest: String },
    /// Install (or update) a package with the capabilities the user granted after seeing its disclosure.
    Install { path: PathBuf, granted: Vec<Capability>, reply: Option<Sender<Result<AppRow, String>>> },
    SetEnabled { app_id: String, enabled: bool },
    /// Remove an app and everything it kept.
    Remove { app_id: String, reply: Option<Sender<Result<bool, String>>> },
    /// Open an app, or draw it again.
    Open { app_id: String },
    /// The user acted on an app's view: `message` goes to its `handle`.
    Act { app_id: String, message: String },
    Close { app_id: String },
    /// An app's "open a chat" became this thread.
    LinkThread { app_id: String, thread_id: i64 },
    /// The dialog was closed.
    ForgetInspection,
    /// Read the installed apps again (the Apps tab opened: `cowork apps` may have changed them).
    List,
    Shutdown,
}

/// What the install dialog shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Inspection {
    pub path: PathBuf,
    pub manifest: Manifest,
    pub disclosure: Disclosure,
    /// An update: the installed version, and the imports the new one adds.
    pub replaces: Option<String>,
    pub new_imports: Vec<String>,
}

/// One installed app as the panel lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct InstalledApp {
    pub row: AppRow,
    pub description: String,
    /// What it can do, in plain words ("read …", and what it was granted).
    pub reads: Vec<String>,
    pub without_code: bool,
}

/// An open app.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenApp {
    pub app_id: String,
    pub name: String,
    /// What the app returned, as it returned it (`cowork apps render`).
    pub json: String,
    pub view: View,
    /// Why the app could not answer (an error card replaces its view).
    pub error: Option<String>,
    /// A call into it is running.
    pub busy: bool,
    /// The last render or action, in milliseconds, and whether the component came from the cache.
    pub millis: u64,
    pub memory_bytes: usize,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct AppsView {
    pub installed: Vec<InstalledApp>,
    pub inspection: Option<Result<Inspection, String>>,
    pub open: Vec<OpenApp>,
    /// The outcome of the last install, update or removal.
    pub message: Option<String>,
}

#[derive(Clone, Debug)]
pub struct AppsConfig {
    /// Writes go to the store's one writer; reads use a read-only connection of this worker's.
    pub store: crate::store::StoreLink,
    /// Installed apps (`<data>/apps`); compiled components go in its `.cache`.
    pub apps_dir: PathBuf,
}

/// A running app: its instance (None after a failure: made again on the next call) and its state.
struct Running {
    instance: Option<RunningApp>,
    state: String,
}

pub struct AppsWorker {
    config: AppsConfig,
    lane: Option<std::sync::Arc<HostLane>>,
    recall: Option<Sender<crate::memory::search_worker::SearchCommand>>,
    completer: Option<Sender<crate::agent::AgentCommand>>,
    runtime: Option<Runtime>,
    running: HashMap<String, Running>,
    view: AppsView,
    sink: EventSink<Box<AppsView>>,
}

impl AppsWorker {
    pub fn new(config: AppsConfig, recall: Option<Sender<crate::memory::search_worker::SearchCommand>>, completer: Option<Sender<crate::agent::AgentCommand>>, sink: EventSink<Box<AppsView>>) -> Self {
        AppsWorker { config, lane: None, recall, completer, runtime: None, running: HashMap::new(), view: AppsView::default(), sink }
    }

    pub fn open(&mut self) -> anyhow::Result<()> {
        let conn = self.config.store.read_only()?;
        let completer = self.completer.clone().map(|c| Box::new(c) as Box<dyn Completer>);
        self.lane = Some(std::sync::Arc::new(HostLane::new(conn, self.config.store.clone(), self.recall.clone(), completer, crate::net::OutboundGate::global())));
        self.reload();
        Ok(())
    }

    fn lane(&self) -> &std::sync::Arc<HostLane> {
        self.lane.as_ref().expect("opened before commands")
    }

    fn publish(&self) {
        self.sink.send(Box::new(self.view.clone()));
    }

    /// Lists the installed apps again.
    fn reload(&mut self) {
        let rows = self.lane().with_conn(db::apps);
        self.view.installed = match rows {
            Ok(rows) => rows
                .into_iter()
                .map(|row| {
                    let manifest = row.manifest().ok();
                    let disclosure = manifest.as_ref().map(|m| Disclosure::new(m, row.imports.clone()));
                    let mut reads: Vec<String> = disclosure.map(|d| d.reads).unwrap_or_default().into_iter().map(|r| format!("read {r}")).collect();
                    reads.extend(row.granted.iter().map(|c| c.describe().to_owned()));
                    InstalledApp { description: manifest.as_ref().map(|m| m.description.clone()).unwrap_or_default(), without_code: row.component_sha256.is_none(), reads, row }
                })
                .collect(),
            Err(err) => {
                self.view.message = Some(format!("the installed apps cannot be read: {err}"));
                Vec::new()
            }
        };
    }

    /// Handles one command; false to stop.
    pub fn handle(&mut self, command: AppsCommand) -> bool {
        match command {
            AppsCommand::Inspect { path } => self.view.inspection = Some(self.inspect(&expand_home(&path))),
            AppsCommand::InspectDraft { manifest } => {
                let inspection = write_draft(&self.config.apps_dir, &manifest).and_then(|dir| self.inspect(&dir));
                self.view.inspection = Some(inspection);
            }
            AppsCommand::ForgetInspection => self.view.inspection = None,
            AppsCommand::List => self.reload(),
            AppsCommand::Install { path, granted, reply } => {
                let result = self.install(&path, &granted);
                self.view.message = Some(match &result {
                    Ok(row) => format!("Installed {} {}", row.name, row.version),
                    Err(err) => err.clone(),
                });
                if result.is_ok() {
                    self.view.inspection = None;
                }
                self.reload();
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            AppsCommand::SetEnabled { app_id, enabled } => {
                let switched = app_id.clone();
                let result = self.lane().write("app on or off", move |conn| db::set_enabled(conn, &switched, enabled, now_millis()).map_err(|e| e.to_string()));
                if let Err(err) = result {
                    self.view.message = Some(format!("cannot change {app_id}: {err}"));
                }
                if !enabled {
                    self.close(&app_id);
                }
                self.reload();
            }
            AppsCommand::Remove { app_id, reply } => {
                self.close(&app_id);
                let apps_dir = self.config.apps_dir.clone();
                let removed = app_id.clone();
                let result = self.lane().write("remove app", move |conn| db::remove(conn, &apps_dir, &removed));
                self.view.message = Some(match &result {
                    Ok(true) => format!("Removed {app_id} with its data"),
                    Ok(false) => format!("{app_id} is not installed"),
                    Err(err) => err.clone(),
                });
                self.reload();
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            AppsCommand::Open { app_id } => self.call(&app_id, None),
            AppsCommand::Act { app_id, message } => self.call(&app_id, Some(message)),
            AppsCommand::Close { app_id } => self.close(&app_id),
            AppsCommand::LinkThread { app_id, thread_id } => {
                let linked = app_id.clone();
                if let Err(err) = self.lane().write("link app thread", move |conn| db::link_thread(conn, &linked, thread_id).map_err(|e| e.to_string())) {
                    tracing::warn!(%err, app = app_id, "the app's chat was not linked to it");
                }
            }
            AppsCommand::Shutdown => return false,
        }
        true
    }

    fn close(&mut self, app_id: &str) {
        self.running.remove(app_id);
        self.view.open.retain(|o| o.app_id != app_id);
    }

    fn inspect(&self, path: &std::path::Path) -> Result<Inspection, String> {
        let package = Package::read(path).map_err(|e| e.to_string())?;
        let disclosure = package.disclose().map_err(|e| e.to_string())?;
        let previous = self.lane().with_conn(|conn| db::app(conn, &package.manifest.app_id())).map_err(|e| e.to_string())?;
        let new_imports = match &previous {
            Some(row) => disclosure.imports.iter().filter(|i| !row.imports.contains(i)).cloned().collect(),
            None => Vec::new(),
        };
        Ok(Inspection { path: path.to_owned(), replaces: previous.map(|row| row.version), new_imports, manifest: package.manifest, disclosure })
    }

    fn install(&mut self, path: &std::path::Path, granted: &[Capability]) -> Result<AppRow, String> {
        let package = Package::read(path).map_err(|e| e.to_string())?;
        let disclosure = package.disclose().map_err(|e| e.to_string())?;
        // What the user saw is what is installed: a package whose code changed since the dialog read it is refused.
        if let Some(Ok(seen)) = &self.view.inspection
            && seen.path == path
            && seen.disclosure != disclosure
        {
            return Err(format!("{} changed since you looked at it; inspect it again", path.display()));
        }
        let app_id = package.manifest.app_id();
        self.close(&app_id);
        let apps_dir = self.config.apps_dir.clone();
        let granted = granted.to_vec();
        let (installed, package) = self.lane().write("install app", move |conn| Ok((db::install(conn, &apps_dir, &package, &disclosure, &granted, now_millis()), package)))?;
        let installed = installed?;
        // Compile now, so the first open comes from the cache.
        if let Some(wasm) = &package.component {
            self.runtime()?.open(wasm).map_err(|e| e.to_string())?;
        }
        // A draft's folder served its purpose: the app's files are in its own folder now.
        if path.starts_with(self.config.apps_dir.join(".drafts")) {
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(installed.row)
    }

    fn runtime(&mut self) -> Result<&Runtime, String> {
        if self.runtime.is_none() {
            let runtime = Runtime::new(Some(self.config.apps_dir.join(".cache"))).map_err(|e| format!("the app runtime cannot start: {e:#}"))?;
            self.runtime = Some(runtime);
        }
        Ok(self.runtime.as_ref().expect("made above"))
    }

    /// Renders an app (after `action`, if any) and publishes its view or its error card.
    fn call(&mut self, app_id: &str, action: Option<String>) {
        let row = match self.lane().with_conn(|conn| db::app(conn, app_id)) {
            Ok(Some(row)) if row.enabled => row,
            Ok(Some(_)) => return self.show_error(app_id, app_id, format!("{app_id} is switched off")),
            Ok(None) => return self.show_error(app_id, app_id, format!("{app_id} is not installed")),
            Err(err) => return self.show_error(app_id, app_id, format!("cannot read {app_id}: {err}")),
        };
        // Say it is busy first: a completion can take a while.
        if let Some(open) = self.view.open.iter_mut().find(|o| o.app_id == app_id) {
            open.busy = true;
            self.publish();
        }
        self.lane().refresh();
        let started = Instant::now();
        let result = self.render(&row, action);
        let millis = started.elapsed().as_millis() as u64;
        match result {
            Ok((json, memory_bytes)) => {
                let open = OpenApp { app_id: app_id.to_owned(), name: row.name.clone(), view: View::parse(&json), json, error: None, busy: false, millis, memory_bytes };
                self.show(open);
            }
            Err(err) => {
                // A failed instance is not called again: the next call makes a new one.
                if let Some(running) = self.running.get_mut(app_id) {
                    running.instance = None;
                }
                self.show_error(app_id, &row.name, err);
            }
        }
    }

    /// Calls the app (its instance made first if it has none; the state it had is kept).
    fn render(&mut self, row: &AppRow, action: Option<String>) -> Result<(String, usize), String> {
        let manifest = row.manifest()?;
        let lane = self.lane().clone();
        if manifest.component.is_none() {
            self.running.insert(row.app_id.clone(), Running { instance: None, state: String::new() });
            return super::nocode::render(&manifest.query, manifest.view.as_deref().unwrap_or_default(), lane.as_ref()).map(|json| (json, 0));
        }
        if self.running.get(&row.app_id).is_none_or(|r| r.instance.is_none()) {
            let wasm = db::component(&self.config.apps_dir, row)?.ok_or("the app has no component")?;
            let runtime = self.runtime()?;
            let (component, opened) = runtime.open(&wasm).map_err(|e| e.to_string())?;
            tracing::info!(app = row.app_id, from_cache = opened.from_cache, millis = opened.millis, "opened an app");
            let instance = runtime.instantiate(&component, &row.app_id, &row.granted, lane).map_err(|e| e.to_string())?;
            let running = self.running.entry(row.app_id.clone()).or_insert(Running { instance: None, state: String::new() });
            running.instance = Some(instance);
        }
        let running = self.running.get_mut(&row.app_id).expect("made above");
        let instance = running.instance.as_mut().expect("made above");
        if let Some(action) = action {
            running.state = instance.handle(&action, &running.state).map_err(|e| e.to_string())?;
        }
        let json = instance.render(&running.state).map_err(|e| e.to_string())?;
        Ok((json, instance.memory_bytes()))
    }

    fn show(&mut self, open: OpenApp) {
        match self.view.open.iter_mut().find(|o| o.app_id == open.app_id) {
            Some(slot) => *slot = open,
            None => self.view.open.push(open),
        }
    }

    fn show_error(&mut self, app_id: &str, name: &str, error: String) {
        let (view, json) = self.view.open.iter().find(|o| o.app_id == app_id).map(|o| (o.view.clone(), o.json.clone())).unwrap_or_default();
        self.show(OpenApp { app_id: app_id.to_owned(), name: name.to_owned(), view, json, error: Some(error), busy: false, millis: 0, memory_bytes: 0 });
    }

    /// The state the panel shows (tests).
    pub fn view(&self) -> &AppsView {
        &self.view
    }
}

impl Supervised for AppsWorker {
    type Command = AppsCommand;

    fn run(&mut self, commands: &Receiver<AppsCommand>, ctx: &WorkerContext) -> anyhow::Result<()> {
        self.open()?;
        ctx.report(crate::runtime::WorkerState::Running);
        self.publish();
        while let Ok(command) = commands.recv() {
            if !self.handle(command) {
                break;
            }
            self.publish();
        }
        Ok(())
    }
}

/// Writes a drafted manifest into `<apps>/.drafts/<id>/`, for the install dialog.
pub fn write_draft(apps_dir: &std::path::Path, manifest: &str) -> Result<PathBuf, String> {
    let parsed = Manifest::parse(manifest).map_err(|e| e.to_string())?;
    if parsed.component.is_some() {
        return Err("a drafted app has no component".into());
    }
    let dir = apps_dir.join(".drafts").join(parsed.app_id());
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot write the draft: {e}"))?;
    std::fs::write(dir.join(super::manifest::MANIFEST_FILE), manifest).map_err(|e| format!("cannot write the draft: {e}"))?;
    Ok(dir)
}

/// `~/x` as the user means it.
fn expand_home(path: &std::path::Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => path.to_owned(),
    }
}

/// Where installed apps live in the data directory.
pub fn apps_dir(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("apps")
}

pub fn channel() -> (Sender<AppsCommand>, Receiver<AppsCommand>) {
    bounded(32)
}

pub fn spawn_apps(
    config: AppsConfig,
    channel: (Sender<AppsCommand>, Receiver<AppsCommand>),
    recall: Option<Sender<crate::memory::search_worker::SearchCommand>>,
    completer: Option<Sender<crate::agent::AgentCommand>>,
    sink: EventSink<Box<AppsView>>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<AppsCommand>> {
    spawn_supervised::<AppsWorker, _, _>(WorkerName::Apps, policy, sink.clone(), channel, move |_ctx| Ok(AppsWorker::new(config.clone(), recall.clone(), completer.clone(), sink.clone())))
}
