//! `StoreLink`: how a worker whose next step reads what it just wrote (the
//! automations, notify, apps and embed workers) writes through the store's one
//! writer thread instead of holding a writer of its own. `call` runs the work
//! on the writer connection after the queued batch is committed and waits for
//! its result (5 s for room in the queue, 60 s for the answer); reads that need
//! no fresh write go to the worker's own read-only connection (`read_only`).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crossbeam_channel::{Sender, bounded};
use rusqlite::Connection;

use super::worker::StoreCommand;

/// How long a call waits for room in the store's queue.
const SEND_WAIT: Duration = Duration::from_secs(5);
/// How long a call waits for its answer: the store may be committing a large
/// batch or retrying a full disk; past this the caller says so and goes on.
const ANSWER_WAIT: Duration = Duration::from_secs(60);

/// A worker's line to the store's writer thread.
#[derive(Clone)]
pub struct StoreLink {
    commands: Sender<StoreCommand>,
    /// The database file, for the caller's read-only connection.
    path: PathBuf,
}

impl std::fmt::Debug for StoreLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreLink")
    }
}

impl StoreLink {
    /// A link to the store worker reading `commands`, which writes `path`.
    pub fn new(path: PathBuf, commands: Sender<StoreCommand>) -> Self {
        Self { commands, path }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A read-only connection of the caller's, once the store has the file open.
    pub fn read_only(&self) -> anyhow::Result<Connection> {
        self.opened()?;
        crate::store::open_read_only(&self.path)
    }

    /// Runs `work` on the writer (in autocommit: each statement commits, or the
    /// work opens its own transaction) and returns its result. Errors when the
    /// store is gone, restarting, or does not answer in time.
    pub fn call<T: Send + 'static>(&self, what: impl Into<Cow<'static, str>>, work: impl FnOnce(&Connection) -> anyhow::Result<T> + Send + 'static) -> anyhow::Result<T> {
        let what = what.into();
        let (reply, answer) = bounded(1);
        // A command is Sync (it may travel inside an error); the work need not be.
        let work = parking_lot::Mutex::new(Some(work));
        let command = StoreCommand::run(what.clone(), move |writer| {
            if let Some(work) = work.lock().take() {
                let _ = reply.send(work(writer.conn()));
            }
        });
        self.commands.send_timeout(command, SEND_WAIT).map_err(|_| anyhow::anyhow!("{what}: the store is not taking writes"))?;
        answer.recv_timeout(ANSWER_WAIT).map_err(|_| anyhow::anyhow!("{what}: the store did not answer"))?
    }

    /// `call` for work that is plain SQL (its error is SQLite's).
    pub fn write<T: Send + 'static>(&self, what: impl Into<Cow<'static, str>>, work: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static) -> anyhow::Result<T> {
        self.call(what, move |conn| Ok(work(conn)?))
    }

    /// Waits until the store has the database open (and made, on a first
    /// start), so that a read-only connection opened next finds it.
    pub fn opened(&self) -> anyhow::Result<()> {
        self.call("open", |_| Ok(()))
    }
}

/// A store worker on `path` and a link to it, for the tests of the workers that
/// write through one. The worker ends once the handle and every link are dropped.
#[cfg(test)]
pub(crate) fn test_store(path: &std::path::Path) -> (crate::runtime::WorkerHandle<StoreCommand>, StoreLink) {
    let sink = crate::runtime::EventSink::<crate::runtime::RuntimeEvent>::ignored();
    let handle = super::spawn_store(path.to_path_buf(), sink, crate::runtime::RestartPolicy::default(), super::StoreHooks::default()).expect("the store starts");
    let link = StoreLink::new(path.to_path_buf(), handle.commands.clone());
    link.opened().expect("the store opens the database");
    (handle, link)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_sees_what_was_queued_before_it_and_returns_its_result() {
        let dir = tempfile::tempdir().unwrap();
        let (store, link) = test_store(&dir.path().join("cowork.db"));
        store.commands.send(crate::store::setting_write("profile".into(), "queued first".into())).unwrap();
        let read = link.write("read profile", |conn| conn.query_row("SELECT value FROM settings WHERE key = 'profile'", [], |r| r.get::<_, String>(0))).unwrap();
        assert_eq!(read, "queued first");
        let failed = link.write("bad sql", |conn| conn.execute("INSERT INTO no_such_table VALUES (1)", []));
        assert!(failed.unwrap_err().to_string().contains("no_such_table"));
    }

    #[test]
    fn a_call_to_a_stopped_store_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, link) = test_store(&dir.path().join("cowork.db"));
        assert!(store.shutdown(StoreCommand::Shutdown, Duration::from_secs(5)));
        let started = std::time::Instant::now();
        let err = link.call("after shutdown", |_| Ok(())).unwrap_err();
        assert!(err.to_string().contains("the store"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
