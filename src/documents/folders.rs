//! The `folders` worker: documents in the folders the user names (Settings →
//! Memory → Documents) are kept searchable and followed as they change, through
//! inotify. At start (and when the folders change) each folder is walked: a
//! document whose content (SHA-256) is not the one in memory is read whole and
//! stored; one gone from disk is forgotten. Then inotify reports writes, moves
//! and deletions, handled 0.8 s after the last one (an editor writes in
//! bursts). Hidden folders, excluded paths and the privacy rules are honoured;
//! cowork's own data folder is never walked. It reads the settings (the
//! folders, the rules) every 3 s and writes through the store
//! (`documents::memory::remember_command`, `forget_at_command`).
//!
//! What is read is judged by what was opened, not by the name it came under
//! (`open_followed`): a file is opened without following a symlink, and then
//! the open file must be a regular file with one name (another name could be in
//! a folder the rules exclude), on the followed folder's own mount (no bind
//! mount or other file system inside it), and where the kernel says the open
//! file is must be under a followed folder, in no hidden folder, wanted by the
//! rules and the exclusions, and not cowork's own data. So a symlink, a hard
//! link or a bind mount that appears in a followed folder, or a folder swapped
//! for a link during a walk, never brings a file from elsewhere (`~/.ssh`, an
//! excluded folder) into memory.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use inotify::{Inotify, WatchDescriptor, WatchMask};
use rusqlite::{Connection, OptionalExtension, params};

use crate::config::Settings;
use crate::runtime::{Supervised, WorkerContext};
use crate::store::StoreCommand;

pub enum FoldersCommand {
    /// Walk the folders again now (tests; Settings after a change).
    Rescan,
    Shutdown,
}

/// How often the settings are read for changed folders or patterns.
const SETTINGS_EVERY: Duration = Duration::from_secs(3);
/// Changes are handled this long after the last event about a file.
const SETTLE: Duration = Duration::from_millis(800);
/// Files larger than this in a followed folder are passed over (said once in the log).
const MAX_FOLLOWED: u64 = 64 << 20;
/// Folders watched at most (inotify watches are a per-user kernel resource).
const MAX_WATCHES: usize = 4_096;

pub struct FoldersWorker {
    db_path: PathBuf,
    data_dir: PathBuf,
    store: Sender<StoreCommand>,
    conn: Option<Connection>,
    inotify: Inotify,
    watches: HashMap<WatchDescriptor, PathBuf>,
    /// The folders and patterns the watches were made for.
    configured: (String, String),
    settings: Settings,
    settings_read: Instant,
    /// Files with events waiting to settle: when the last one came.
    pending: BTreeMap<PathBuf, Instant>,
    /// The followed folders (resolved) and the mount each is on.
    roots: Vec<(PathBuf, Option<u64>)>,
}

/// A followed file, opened and checked.
#[derive(Debug)]
struct Opened {
    file: std::fs::File,
    /// Where the kernel says the open file is.
    real: PathBuf,
    bytes: u64,
}

impl FoldersWorker {
    pub fn open(db_path: PathBuf, data_dir: PathBuf, store: Sender<StoreCommand>) -> anyhow::Result<Self> {
        let inotify = Inotify::init().map_err(|e| anyhow::anyhow!("inotify: {e}"))?;
        Ok(FoldersWorker {
            db_path,
            data_dir,
            store,
            conn: None,
            inotify,
            watches: HashMap::new(),
            configured: (String::new(), String::new()),
            settings: Settings::default(),
            settings_read: Instant::now() - SETTINGS_EVERY,
            pending: BTreeMap::new(),
            roots: Vec::new(),
        })
    }

    fn connection(&mut self) -> Option<&Connection> {
        if self.conn.is_none() {
            self.conn = crate::store::open_read_only(&self.db_path).ok();
        }
        self.conn.as_ref()
    }

    fn read_settings(&mut self) {
        self.settings_read = Instant::now();
        let pairs = self.connection().and_then(|c| crate::store::all_settings(c).ok()).unwrap_or_default();
        self.settings = Settings::from_pairs(&pairs).0;
    }

    /// The folders named, `~` expanded, that exist.
    fn folders(&self) -> Vec<PathBuf> {
        let home = std::env::var("HOME").unwrap_or_default();
        self.settings
            .document_folders
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| match l.strip_prefix('~') {
                Some(rest) => PathBuf::from(format!("{}{rest}", home.trim_end_matches('/'))),
                None => PathBuf::from(l),
            })
            .filter_map(|p| p.canonicalize().ok())
            .filter(|p| p.is_dir())
            .collect()
    }

    /// Whether `path` is one cowork keeps: a document kind, not hidden, not
    /// excluded or covered by the privacy rules, not in cowork's own data.
    fn wanted(&self, path: &Path) -> bool {
        let data = self.data_dir.canonicalize().unwrap_or_else(|_| self.data_dir.clone());
        // Pictures are read when attached, not followed: a folder of photos would be hours of OCR for little text.
        crate::documents::Kind::by_extension(path).is_some_and(|kind| kind != crate::documents::Kind::Picture)
            && !path.starts_with(&data)
            && !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
            && crate::documents::memory::withheld(path, &self.settings).is_none()
    }

    /// Rebuilds the watches and walks every folder.
    fn rescan(&mut self) {
        for (wd, _) in self.watches.drain() {
            let _ = self.inotify.watches().remove(wd);
        }
        self.configured = (self.settings.document_folders.clone(), self.settings.document_exclude.clone());
        let mut seen: Vec<PathBuf> = Vec::new();
        let folders = if self.settings.remember_documents { self.folders() } else { Vec::new() };
        self.roots = folders.iter().map(|folder| (folder.clone(), mount_of_path(folder))).collect();
        for folder in &folders {
            self.walk(folder, &mut seen);
        }
        // Documents this worker kept that are no longer there (or no longer wanted) are forgotten.
        let kept: Vec<String> = self
            .connection()
            .and_then(|c| c.prepare("SELECT path FROM documents WHERE origin = 'folder'").ok().and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0)).ok().map(|rows| rows.flatten().collect())))
            .unwrap_or_default();
        for path in kept {
            let path = PathBuf::from(path);
            if !seen.contains(&path) {
                let _ = self.store.send_timeout(crate::documents::memory::forget_at_command(path.display().to_string()), Duration::from_secs(5));
            }
        }
    }

    fn walk(&mut self, dir: &Path, seen: &mut Vec<PathBuf>) {
        if self.watches.len() >= MAX_WATCHES {
            tracing::warn!(dir = %dir.display(), "too many folders to follow; the rest are not watched");
            return;
        }
        let data = self.data_dir.canonicalize().unwrap_or_else(|_| self.data_dir.clone());
        if dir.starts_with(&data) || crate::documents::memory::excluded(&dir.join("x"), &self.settings.document_exclude).is_some() {
            return;
        }
        // A folder that is (or became) a symlink, or another mount, is not followed into.
        if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) || !self.on_root_mount(dir, mount_of_path(dir)) {
            return;
        }
        let mask = WatchMask::CLOSE_WRITE
            | WatchMask::MOVED_TO
            | WatchMask::MOVED_FROM
            | WatchMask::DELETE
            | WatchMask::CREATE
            | WatchMask::DELETE_SELF
            | WatchMask::DONT_FOLLOW
            | WatchMask::ONLYDIR;
        match self.inotify.watches().add(dir, mask) {
            Ok(wd) => {
                self.watches.insert(wd, dir.to_path_buf());
            }
            Err(err) => tracing::warn!(dir = %dir.display(), %err, "a folder cannot be followed"),
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if entry.file_name().to_string_lossy().starts_with('.') || kind.is_symlink() {
                continue;
            }
            if kind.is_dir() {
                self.walk(&path, seen);
            } else if kind.is_file() && self.wanted(&path) && self.keep(&path) {
                seen.push(path.clone());
            }
        }
    }

    /// Whether `path`, on mount `mount`, is on the mount of the followed folder it is under.
    fn on_root_mount(&self, path: &Path, mount: Option<u64>) -> bool {
        self.roots.iter().filter(|(root, _)| path.starts_with(root)).max_by_key(|(root, _)| root.as_os_str().len()).is_some_and(|(_, root_mount)| *root_mount == mount)
    }

    /// Opens `path` for keeping and checks what was opened (see the module's
    /// documentation); the error says why it is passed over.
    fn open_followed(&self, path: &Path) -> Result<Opened, String> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let named = std::fs::symlink_metadata(path).map_err(|e| format!("it cannot be read ({e})"))?;
        if named.file_type().is_symlink() {
            return Err("it is a symlink".into());
        }
        if !named.is_file() {
            return Err("it is not a regular file".into());
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| format!("it cannot be opened without following a link ({e})"))?;
        let meta = file.metadata().map_err(|e| format!("it cannot be read ({e})"))?;
        if !meta.is_file() || (meta.dev(), meta.ino()) != (named.dev(), named.ino()) {
            return Err("it changed while it was opened".into());
        }
        if meta.nlink() > 1 {
            return Err(format!("it has {} names (hard links), and another may be in a folder your rules exclude", meta.nlink()));
        }
        let fd_path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        let real = std::fs::read_link(&fd_path).map_err(|e| format!("where it is cannot be told ({e})"))?;
        if real != path {
            return Err(format!("it is really {} (a folder on the way is a link)", real.display()));
        }
        let Some((root, _)) = self.roots.iter().filter(|(root, _)| real.starts_with(root)).max_by_key(|(root, _)| root.as_os_str().len()) else {
            return Err("it is outside the followed folders".into());
        };
        let below = real.strip_prefix(root).unwrap_or(&real);
        if below.components().any(|c| c.as_os_str().to_string_lossy().starts_with('.')) {
            return Err("it is in a hidden folder".into());
        }
        if !self.on_root_mount(&real, mount_of_fd(file.as_raw_fd())) {
            return Err("it is on another file system mounted inside the followed folder (a bind mount, say)".into());
        }
        let data = self.data_dir.canonicalize().unwrap_or_else(|_| self.data_dir.clone());
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
        let own = crate::tools::own_data::OwnData { data_dir: &data, home: &home };
        if own.inside(&real) || own.is_hard_link_inside(&meta) {
            return Err("it is cowork's own data".into());
        }
        if !self.wanted(&real) {
            return Err("the exclusions or your privacy rules cover it".into());
        }
        Ok(Opened { file, real, bytes: meta.len() })
    }

    /// Stores `path` when its content is not what memory holds; false when it
    /// is passed over (and anything kept from that path before is forgotten).
    fn keep(&mut self, path: &Path) -> bool {
        use std::io::Read as _;
        use std::os::fd::AsRawFd;
        let shown = path.display().to_string();
        let opened = match self.open_followed(path) {
            Ok(opened) => opened,
            Err(why) => {
                tracing::info!(path = %shown, %why, "a file in a followed folder was passed over");
                self.forget_if_kept(&shown);
                return false;
            }
        };
        if opened.bytes > MAX_FOLLOWED {
            tracing::info!(path = %shown, "a followed document is too large to keep in memory");
            return false;
        }
        let mut bytes = Vec::with_capacity(opened.bytes as usize);
        if (&opened.file).take(MAX_FOLLOWED + 1).read_to_end(&mut bytes).is_err() {
            return false;
        }
        use sha2::Digest;
        let sha = hex::encode(sha2::Sha256::digest(&bytes));
        let known: Option<String> = self.connection().and_then(|c| c.query_row("SELECT sha256 FROM documents WHERE path = ?1", params![shown], |r| r.get(0)).optional().ok().flatten());
        if known.as_deref() == Some(sha.as_str()) {
            return true;
        }
        // Read through the descriptor that was checked, never by the name again.
        let fd_path = PathBuf::from(format!("/proc/self/fd/{}", opened.file.as_raw_fd()));
        match crate::documents::memory::prepare_opened(&fd_path, &opened.real, bytes.len() as u64, sha, "folder") {
            Ok(doc) => {
                let _ = self.store.send_timeout(crate::documents::memory::remember_command(doc, None), Duration::from_secs(5));
            }
            Err(err) => tracing::info!(path = %shown, %err, "a followed document was not read"),
        }
        true
    }

    /// Forgets what this worker kept from `path`, if it kept anything.
    fn forget_if_kept(&mut self, shown: &str) {
        let kept = self.connection().and_then(|c| c.query_row("SELECT 1 FROM documents WHERE path = ?1 AND origin = 'folder'", params![shown], |_| Ok(())).optional().ok().flatten()).is_some();
        if kept {
            let _ = self.store.send_timeout(crate::documents::memory::forget_at_command(shown.to_owned()), Duration::from_secs(5));
        }
    }

    /// What inotify reported since the last look.
    fn drain_events(&mut self) -> anyhow::Result<()> {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let events = match self.inotify.read_events(&mut buffer) {
                Ok(events) => events,
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(err) => anyhow::bail!("inotify: {err}"),
            };
            let mut any = false;
            let mut new_dirs = Vec::new();
            for event in events {
                any = true;
                let Some(dir) = self.watches.get(&event.wd).cloned() else { continue };
                let Some(name) = event.name else { continue };
                let path = dir.join(name);
                if event.mask.contains(inotify::EventMask::ISDIR) {
                    if event.mask.intersects(inotify::EventMask::CREATE | inotify::EventMask::MOVED_TO) && !name.to_string_lossy().starts_with('.') {
                        new_dirs.push(path);
                    }
                    continue;
                }
                self.pending.insert(path, Instant::now());
            }
            for dir in new_dirs {
                let mut seen = Vec::new();
                self.walk(&dir, &mut seen);
            }
            if !any {
                return Ok(());
            }
        }
    }

    /// Files whose last event is older than `SETTLE`: kept, or forgotten when gone.
    fn settle(&mut self) {
        let now = Instant::now();
        let ready: Vec<PathBuf> = self.pending.iter().filter(|(_, at)| now.duration_since(**at) >= SETTLE).map(|(p, _)| p.clone()).collect();
        for path in ready {
            self.pending.remove(&path);
            // Judged by what is there now, a link not followed (`keep` opens and checks it).
            if std::fs::symlink_metadata(&path).is_err() {
                let _ = self.store.send_timeout(crate::documents::memory::forget_at_command(path.display().to_string()), Duration::from_secs(5));
            } else if self.wanted(&path) {
                self.keep(&path);
            } else {
                self.forget_if_kept(&path.display().to_string());
            }
        }
    }
}

/// The mount a path is on (not following a symlink in its last part), from `/proc/self/fdinfo`.
fn mount_of_path(path: &Path) -> Option<u64> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path).ok()?;
    mount_of_fd(file.as_raw_fd())
}

/// The mount an open descriptor's file is on (`mnt_id` in `/proc/self/fdinfo/N`).
fn mount_of_fd(fd: i32) -> Option<u64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    info.lines().find_map(|line| line.strip_prefix("mnt_id:")).and_then(|id| id.trim().parse().ok())
}

impl Supervised for FoldersWorker {
    type Command = FoldersCommand;

    fn run(&mut self, commands: &Receiver<FoldersCommand>, _ctx: &WorkerContext) -> anyhow::Result<()> {
        self.read_settings();
        self.rescan();
        loop {
            match commands.recv_timeout(Duration::from_millis(200)) {
                Ok(FoldersCommand::Shutdown) | Err(RecvTimeoutError::Disconnected) => return Ok(()),
                Ok(FoldersCommand::Rescan) => {
                    self.read_settings();
                    self.rescan();
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if self.settings_read.elapsed() >= SETTINGS_EVERY {
                self.read_settings();
                if (self.settings.document_folders.clone(), self.settings.document_exclude.clone()) != self.configured {
                    self.rescan();
                }
            }
            self.drain_events()?;
            self.settle();
        }
    }
}

pub fn spawn_folders(
    db_path: PathBuf,
    data_dir: PathBuf,
    store: Sender<StoreCommand>,
    channel: (Sender<FoldersCommand>, Receiver<FoldersCommand>),
    sink: crate::runtime::EventSink<crate::runtime::RuntimeEvent>,
    policy: crate::runtime::RestartPolicy,
) -> std::io::Result<crate::runtime::WorkerHandle<FoldersCommand>> {
    crate::runtime::spawn_supervised::<FoldersWorker, _, _>(crate::runtime::WorkerName::Folders, policy, sink, channel, move |_ctx| {
        FoldersWorker::open(db_path.clone(), data_dir.clone(), store.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker following `root/Documents`, with the default exclusions.
    fn worker(root: &Path) -> FoldersWorker {
        let (store, _) = crossbeam_channel::bounded(1);
        let mut worker = FoldersWorker::open(root.join("data/cowork.db"), root.join("data"), store).unwrap();
        let docs = root.join("Documents");
        worker.roots = vec![(docs.clone(), mount_of_path(&docs))];
        worker
    }

    #[test]
    fn what_is_opened_is_judged_not_the_name_it_came_under() {
        // Not tempdir(): its `.tmp…` name is a hidden folder, which the default exclusions cover.
        let dir = tempfile::Builder::new().prefix("cowork-folders-").tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let docs = root.join("Documents");
        for sub in ["Documents/notes", ".ssh", "data", "elsewhere"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(docs.join("notes/plan.md"), "plan").unwrap();
        std::fs::write(root.join(".ssh/id_ed25519.md"), "key").unwrap();
        std::fs::write(root.join("elsewhere/other.md"), "other").unwrap();
        std::fs::write(root.join("data/USER.md"), "cowork's").unwrap();
        let worker = worker(&root);
        assert!(worker.open_followed(&docs.join("notes/plan.md")).is_ok());
        // A folder swapped for a link between the walk's listing and the open: the name says
        // Documents/projects/…, the kernel says where the open file really is.
        std::os::unix::fs::symlink(root.join(".ssh"), docs.join("projects")).unwrap();
        let why = worker.open_followed(&docs.join("projects/id_ed25519.md")).unwrap_err();
        assert!(why.contains("really"), "{why}");
        std::os::unix::fs::symlink(root.join("data"), docs.join("data-link")).unwrap();
        assert!(worker.open_followed(&docs.join("data-link/USER.md")).is_err(), "cowork's data through a linked folder");
        // A link to a file, and a second name for a file elsewhere.
        std::os::unix::fs::symlink(root.join("elsewhere/other.md"), docs.join("notes/link.md")).unwrap();
        assert!(worker.open_followed(&docs.join("notes/link.md")).unwrap_err().contains("symlink"));
        std::fs::hard_link(root.join("elsewhere/other.md"), docs.join("notes/hard.md")).unwrap();
        assert!(worker.open_followed(&docs.join("notes/hard.md")).unwrap_err().contains("2 names"));
        // A hidden folder inside the followed one, and a file outside every followed folder.
        std::fs::create_dir_all(docs.join(".git")).unwrap();
        std::fs::write(docs.join(".git/notes.md"), "x").unwrap();
        assert!(worker.open_followed(&docs.join(".git/notes.md")).is_err());
        std::fs::write(root.join("elsewhere/third.md"), "third").unwrap();
        assert!(worker.open_followed(&root.join("elsewhere/third.md")).unwrap_err().contains("outside"));
        // A FIFO never blocks the worker.
        let fifo = docs.join("notes/pipe.md");
        let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        assert!(worker.open_followed(&fifo).unwrap_err().contains("not a regular file"));
    }
}
