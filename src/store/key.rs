//! The database key (issue 18). `cowork.db` is a SQLCipher database under a
//! random 256-bit key kept in the Secret Service when one is unlocked, else in
//! the owner-only secret file (`secrets.rs`): never in a log, the config or a
//! command line. The key is looked up once per database and held in this
//! process's key ring by the database's path (zeroed when dropped);
//! `open_writer` and `open_read_only` key every connection from it with the raw
//! key (`sqlite3_key`, no passphrase derivation per open) and check that it
//! reads. Files derived from the database (vector indexes, kept audio) are
//! sealed with a key derived from it (`crate::sealed`).
//!
//! `prepare` runs once per database and process, under an exclusive `flock` on
//! `cowork.db.keylock` from the key's look-up until the database exists
//! encrypted (a new one's first page is written under it), so two processes
//! starting together neither make two keys nor convert one file twice. A
//! plaintext `cowork.db` from an older cowork is converted then, crash-safely:
//! its WAL folded in and journal mode DELETE (which fails while another process
//! has it open), `sqlcipher_export` into `cowork.db.encrypting`, synced,
//! checked, renamed over `cowork.db`; the plaintext is kept aside by a hard
//! link until the rename, then zeroed and removed (with the key in a Secret
//! Service, at the next start, once the key is known to be kept), so a kill at
//! any point leaves one whole database, plaintext or encrypted. `unlock` is
//! what `main` calls before anything else: a `KeyError` becomes the locked
//! window (`ui::locked`) or a command's error.
//!
//! Invariants:
//! - A database that is encrypted but whose key cannot be found is an error
//!   that says where cowork looked: `key_for` makes a key only for a missing,
//!   empty or plaintext file, and a key is kept (and read back) before any
//!   database uses it. No code path creates a new, empty database in place of
//!   an encrypted one.
//! - Once a process has prepared a database, nothing but SQLite opens that file
//!   (`PREPARED`, `known`): closing any descriptor on it would drop the POSIX
//!   locks SQLite holds in this process.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use rusqlite::Connection;
use zeroize::Zeroizing;

use crate::secrets::{SecretFile, SecretService};

/// The secret's name in the file store (which lives in the data directory).
const FILE_SECRET: &str = "database-key";
/// The plaintext SQLite header; an encrypted file starts with random salt.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// A 256-bit key, zeroed when dropped, never printed.
#[derive(Clone)]
pub struct DbKey(Zeroizing<[u8; 32]>);

impl std::fmt::Debug for DbKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DbKey(…)")
    }
}

impl DbKey {
    pub fn random() -> Self {
        use aes_gcm::aead::rand_core::RngCore;
        let mut bytes = Zeroizing::new([0u8; 32]);
        aes_gcm::aead::OsRng.fill_bytes(bytes.as_mut());
        DbKey(bytes)
    }

    fn from_hex(text: &str) -> Option<Self> {
        let bytes = Zeroizing::new(hex::decode(text.trim()).ok()?);
        let array: [u8; 32] = bytes.as_slice().try_into().ok()?;
        Some(DbKey(Zeroizing::new(array)))
    }

    fn to_hex(&self) -> Zeroizing<String> {
        Zeroizing::new(hex::encode(self.0.as_ref()))
    }

    /// A key for another purpose (`label`), derived one way from this one, so a
    /// sealed file's key reveals nothing of the database's.
    pub fn derive(&self, label: &str) -> Zeroizing<[u8; 32]> {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        hasher.update(b"cowork key derivation v1\0");
        hasher.update(label.as_bytes());
        hasher.update([0]);
        hasher.update(self.0.as_ref());
        Zeroizing::new(hasher.finalize().into())
    }
}

/// Why a database cannot be opened for want of its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error(
        "{db} is encrypted and its key is missing: cowork looked in {looked}. cowork did not create a new database, and your history is still in that file: {hint}"
    )]
    Missing { db: String, looked: String, hint: String },
    #[error(
        "the key in {custody} does not open {db} (a different key, or a damaged file). cowork did not replace the file, and your history is still in it: put back the key it was created with, or move the file away to start a new history"
    )]
    Wrong { db: String, custody: String },
    #[error("{db} is not a database: neither SQLite nor an encrypted cowork database (damaged, or another program's file). cowork left it in place")]
    NotADatabase { db: String },
    #[error("cannot keep a key for {db}: {reason}")]
    Custody { db: String, reason: String },
    #[error("cannot encrypt {db}: {reason}. It is unchanged")]
    Conversion { db: String, reason: String },
}

/// A database's key and where it is kept (in words, for messages).
#[derive(Debug)]
pub struct Keyed {
    pub key: DbKey,
    pub custody: String,
}

/// Databases this process has prepared (converted if need be, and created
/// under the lock if new). After that no code here opens the file itself:
/// closing any descriptor on a database file drops every POSIX lock SQLite
/// holds on it in this process, which lets another process think it is alone.
static PREPARED: LazyLock<Mutex<std::collections::HashSet<PathBuf>>> = LazyLock::new(|| Mutex::new(std::collections::HashSet::new()));

/// The process's keys, by database path.
static RING: LazyLock<Mutex<HashMap<PathBuf, Arc<Keyed>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));
/// One lookup, creation or conversion at a time: five workers open writers at start.
static RESOLVING: Mutex<()> = parking_lot::const_mutex(());

/// The path the ring knows a database by: the file's real path when it
/// exists (as SQLite reports it, symlinks followed), else its folder's.
fn ring_path(db: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(db) {
        return real;
    }
    let name = db.file_name().map(PathBuf::from).unwrap_or_default();
    let dir = db.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned()).join(name)
}

/// The key this process already holds for `db`, without touching the file.
pub fn known(db: &Path) -> Option<Arc<Keyed>> {
    RING.lock().get(&ring_path(db)).cloned()
}

/// Whether this process has prepared `db` (see `PREPARED`).
pub fn is_prepared(db: &Path) -> bool {
    PREPARED.lock().contains(&ring_path(db))
}

/// What is on disk at a database's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState {
    Missing,
    Empty,
    Plaintext,
    Encrypted,
    /// Neither: too short, or not whole pages (SQLCipher writes 4 KiB pages).
    NotADatabase,
}

pub fn file_state(db: &Path) -> std::io::Result<FileState> {
    let mut file = match std::fs::File::open(db) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(FileState::Missing),
        Err(err) => return Err(err),
    };
    let mut header = [0u8; 16];
    let mut read = 0;
    while read < header.len() {
        match file.read(&mut header[read..])? {
            0 => break,
            n => read += n,
        }
    }
    let length = file.metadata()?.len();
    Ok(match read {
        0 => FileState::Empty,
        16 if &header == SQLITE_HEADER => FileState::Plaintext,
        _ if length < 1024 || length % 512 != 0 => FileState::NotADatabase,
        _ => FileState::Encrypted,
    })
}

/// Uses `key` for `db` in this process only, stored nowhere (doctor's scratch
/// database, tests of a missing key).
pub fn use_ephemeral(db: &Path, key: DbKey) {
    RING.lock().insert(ring_path(db), Arc::new(Keyed { key, custody: "this process's memory".into() }));
}

/// Forgets the key this process holds for `db`: the next open looks again.
/// Only with no connection to it open (the next look reads the file).
pub fn forget(db: &Path) {
    let at = ring_path(db);
    RING.lock().remove(&at);
    PREPARED.lock().remove(&at);
}

/// The key for `db`: from the ring, else from custody. `create` makes and
/// keeps a new one when there is none and the file holds nothing encrypted
/// (a new database, or a plaintext one about to be converted).
///
/// Keys found in both stores (a Secret Service that was locked when a later
/// key went to the file): an encrypted database takes the one that opens it.
/// Only `prepare` creates, holding the lock between processes.
pub fn key_for(db: &Path, create: bool) -> Result<Arc<Keyed>, KeyError> {
    let at = ring_path(db);
    if let Some(found) = RING.lock().get(&at) {
        return Ok(found.clone());
    }
    let _one = RESOLVING.lock();
    if let Some(found) = RING.lock().get(&at) {
        return Ok(found.clone());
    }
    let data_dir = at.parent().unwrap_or(Path::new(".")).to_owned();
    let shown = at.display().to_string();
    let state = file_state(&at).map_err(|err| KeyError::Custody { db: shown.clone(), reason: format!("cannot read it: {err}") })?;
    if state == FileState::NotADatabase {
        return Err(KeyError::NotADatabase { db: shown });
    }
    let found = find(&data_dir);
    let keyed = match (found.keys.len(), state) {
        (0, _) => {
            if let Some(reason) = found.unreadable {
                return Err(KeyError::Custody { db: shown, reason });
            }
            if state == FileState::Encrypted || !create {
                return Err(KeyError::Missing { db: shown, looked: found.looked, hint: found.hint });
            }
            keep_new(&data_dir).map_err(|reason| KeyError::Custody { db: shown, reason })?
        }
        (1, _) => found.keys.into_iter().next().expect("one key"),
        (_, FileState::Encrypted) => {
            let custody = found.keys.iter().map(|k| k.custody.clone()).collect::<Vec<_>>().join(" or ");
            found.keys.into_iter().find(|keyed| opens(&at, keyed)).ok_or(KeyError::Wrong { db: shown, custody })?
        }
        _ => found.keys.into_iter().next().expect("a key"),
    };
    let keyed = Arc::new(keyed);
    RING.lock().insert(at, keyed.clone());
    Ok(keyed)
}

/// Whether `keyed` opens the encrypted database at `db`.
fn opens(db: &Path, keyed: &Keyed) -> bool {
    Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .ok()
        .is_some_and(|conn| apply(&conn, keyed).is_ok() && check(&conn, db, keyed).is_ok())
}

/// An exclusive `flock` on `<db>.keylock` while a key is looked up or made
/// (held by the open file; released when it closes).
struct ProcessLock(#[allow(dead_code)] std::fs::File);

impl ProcessLock {
    fn take(db: &Path) -> Result<Self, String> {
        use std::os::fd::AsRawFd;
        let path = db.with_extension("db.keylock");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        }
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(|err| format!("cannot open {}: {err}", path.display()))?;
        // SAFETY: flock on a descriptor this function owns; released when the file closes.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(format!("cannot lock {}: {}", path.display(), std::io::Error::last_os_error()));
        }
        Ok(ProcessLock(file))
    }
}

/// What custody holds for a data directory.
struct Found {
    /// The Secret Service's key first, then the file's.
    keys: Vec<Keyed>,
    looked: String,
    hint: String,
    /// A store that has cowork's secrets but cannot be read now: not "missing".
    unreadable: Option<String>,
}

/// The Secret Service's name for a data directory's key: one keyring serves
/// every data directory of the user.
pub fn service_secret(data_dir: &Path) -> String {
    format!("database-key:{}", data_dir.display())
}

/// Looks for the key in the Secret Service and in the secret file.
fn find(data_dir: &Path) -> Found {
    let mut found = Found { keys: Vec::new(), looked: String::new(), hint: String::new(), unreadable: None };
    let mut looked = Vec::new();
    match SecretService::connect() {
        Ok(service) => {
            looked.push("the system secret store (Secret Service)".to_owned());
            match service.get(&service_secret(data_dir)) {
                Ok(Some(text)) => match DbKey::from_hex(&Zeroizing::new(text)) {
                    Some(key) => found.keys.push(Keyed { key, custody: "the system secret store (Secret Service)".into() }),
                    None => found.unreadable = Some("the key in the system secret store is not 64 hexadecimal digits".into()),
                },
                Ok(None) => {}
                Err(err) => found.hint = format!("the system secret store could not be read ({err:#}). "),
            }
        }
        Err(err) => found.hint = format!("the system secret store is not usable ({err:#}): if the key was kept there, unlock it and start cowork again. "),
    }
    let file_key = data_dir.join(SecretFile::KEY);
    let file_store = data_dir.join(SecretFile::STORE);
    looked.push(format!("{} (key file {})", file_store.display(), file_key.display()));
    if file_key.exists() {
        match SecretFile::open(data_dir).and_then(|store| store.get(FILE_SECRET)) {
            Ok(Some(text)) => match DbKey::from_hex(&Zeroizing::new(text)) {
                Some(key) => found.keys.push(Keyed { key, custody: file_store.display().to_string() }),
                None => found.unreadable = Some(format!("the key in {} is not 64 hexadecimal digits", file_store.display())),
            },
            Ok(None) => {}
            Err(err) => found.unreadable = Some(format!("{err:#}")),
        }
    }
    found.hint.push_str("put back the secret store or secrets.key and secrets.enc from where this database came from (a backup of the data directory has them, unless the key was in the system secret store)");
    found.looked = looked.join(" and ");
    found
}

/// Makes a key and keeps it: the Secret Service when one is unlocked (read
/// back to be sure), else the secret file. Only then may a database use it.
fn keep_new(data_dir: &Path) -> Result<Keyed, String> {
    let key = DbKey::random();
    let hex = key.to_hex();
    // A keyring unlocked a moment ago (at login) can refuse for a moment:
    // ask again before the key goes to the file for good.
    // No bus or no service stays so; a running one that refused is asked again.
    let absent = |err: &anyhow::Error| {
        let text = format!("{err:#}");
        text.contains("no D-Bus session bus") || text.contains("no Secret Service is running")
    };
    let mut service = SecretService::connect();
    for _ in 0..5 {
        match &service {
            Err(err) if !absent(err) => {
                std::thread::sleep(std::time::Duration::from_millis(200));
                service = SecretService::connect();
            }
            _ => break,
        }
    }
    match &service {
        Err(err) if absent(err) => tracing::info!("{err:#}; the new database key goes to the secret file"),
        Err(err) => tracing::warn!("the system secret store refused ({err:#}); the new database key goes to the secret file"),
        Ok(_) => {}
    }
    if let Ok(service) = service {
        let name = service_secret(data_dir);
        // The keyring syncs its file before it answers, which a loaded disk makes slow: `set` waits for
        // that (secrets::KEEP). One that answers later still may keep the key: the file then holds the
        // same key, and `key_for` takes whichever opens the database.
        match service.set(&name, &hex).and_then(|()| service.get(&name)).map(|back| back.map(Zeroizing::new)) {
            Ok(Some(back)) if back.as_str() == hex.as_str() => {
                tracing::info!("a new database key is kept in the system secret store");
                return Ok(Keyed { key, custody: "the system secret store (Secret Service)".into() });
            }
            Ok(_) => tracing::warn!("the system secret store did not give the new database key back; keeping it in the secret file"),
            Err(err) => tracing::warn!("the system secret store did not keep the new database key ({err:#}); keeping it in the secret file"),
        }
    }
    let store = SecretFile::open(data_dir).map_err(|err| format!("{err:#}"))?;
    store.set(FILE_SECRET, &hex).map_err(|err| format!("{err:#}"))?;
    match store.get(FILE_SECRET).map(|back| back.map(Zeroizing::new)) {
        Ok(Some(back)) if back.as_str() == hex.as_str() => {}
        _ => return Err(format!("{} did not give the new key back", data_dir.join(SecretFile::STORE).display())),
    }
    tracing::info!("a new database key is kept in {}", data_dir.join(SecretFile::STORE).display());
    Ok(Keyed { key, custody: data_dir.join(SecretFile::STORE).display().to_string() })
}

/// Keys a new connection. The key goes in as a raw 256-bit key (no passphrase
/// derivation: it is random already, and each open stays fast).
pub fn apply(conn: &Connection, keyed: &Keyed) -> rusqlite::Result<()> {
    // sqlite3_key rather than `PRAGMA key`: no SQL text holds the key, and no
    // error message can quote it.
    let mut raw = Zeroizing::new(Vec::with_capacity(67));
    raw.extend_from_slice(b"x'");
    raw.extend_from_slice(keyed.key.to_hex().as_bytes());
    raw.extend_from_slice(b"'");
    // SAFETY: a live connection's handle; SQLCipher copies the key bytes.
    let status = unsafe { rusqlite::ffi::sqlite3_key(conn.handle(), raw.as_ptr() as *const std::ffi::c_void, raw.len() as std::ffi::c_int) };
    if status == rusqlite::ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(status), Some("the key was not accepted".into())))
    }
}

/// Reads the schema once: with a wrong key SQLCipher answers "file is not a database".
pub fn check(conn: &Connection, db: &Path, keyed: &Keyed) -> Result<(), KeyError> {
    match conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get::<_, i64>(0)) {
        Ok(_) => Ok(()),
        Err(rusqlite::Error::SqliteFailure(err, _)) if err.code == rusqlite::ErrorCode::NotADatabase => {
            Err(KeyError::Wrong { db: db.display().to_string(), custody: keyed.custody.clone() })
        }
        Err(err) => Err(KeyError::Custody { db: db.display().to_string(), reason: err.to_string() }),
    }
}

/// Before cowork uses `db`: its key found or made, and a plaintext database
/// converted. What every command and the sidebar call first.
pub fn prepare(db: &Path) -> Result<Arc<Keyed>, KeyError> {
    if is_prepared(db) {
        return key_for(db, false);
    }
    // One process at a time from the look-up to a database that exists
    // encrypted: two starting together (the sidebar and a command) neither
    // make two keys for one new database nor convert the same file twice.
    let _between_processes = ProcessLock::take(db).map_err(|reason| KeyError::Custody { db: db.display().to_string(), reason })?;
    let keyed = key_for(db, true)?;
    let _one = RESOLVING.lock();
    let at = ring_path(db);
    if PREPARED.lock().contains(&at) {
        return Ok(keyed);
    }
    let fail = |err: &dyn std::fmt::Display| KeyError::Custody { db: at.display().to_string(), reason: err.to_string() };
    wipe_leftovers(&at, &keyed);
    match file_state(&at).map_err(|err| fail(&format!("cannot read it: {err}")))? {
        FileState::Plaintext => convert(&at, &keyed)?,
        FileState::Missing | FileState::Empty => {
            // The first page written now, with this key, while the lock is held.
            let conn = Connection::open(&at).map_err(|err| fail(&err))?;
            apply(&conn, &keyed).map_err(|err| fail(&err))?;
            let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)).map_err(|err| fail(&err))?;
        }
        FileState::Encrypted | FileState::NotADatabase => {}
    }
    let at = ring_path(db);
    PREPARED.lock().insert(at);
    Ok(keyed)
}

/// `prepare`, then the key tried on the file: what start-up and the locked
/// window's Try again call to tell a missing or wrong key before anything
/// else runs (`cowork doctor` only looks, see its `key_check`).
pub fn unlock(db: &Path) -> Result<(), KeyError> {
    // No database yet: its key is made when the first writer creates it.
    if matches!(file_state(db), Ok(FileState::Missing | FileState::Empty)) {
        return Ok(());
    }
    let keyed = prepare(db)?;
    if file_state(db).ok() == Some(FileState::Encrypted) {
        let conn = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(|err| KeyError::Custody { db: db.display().to_string(), reason: err.to_string() })?;
        apply(&conn, &keyed).map_err(|err| KeyError::Custody { db: db.display().to_string(), reason: err.to_string() })?;
        check(&conn, db, &keyed)?;
    }
    Ok(())
}

fn partial_path(db: &Path) -> PathBuf {
    db.with_extension("db.encrypting")
}

fn plaintext_path(db: &Path) -> PathBuf {
    db.with_extension("db.plaintext")
}

/// Converts a plaintext database in place. Steps, each leaving one whole database:
/// 1. the WAL folded into the file and journal mode DELETE (this fails while
///    another process has it open: nothing is converted under a running cowork);
/// 2. `cowork.db.encrypting` written by `sqlcipher_export`, synced;
/// 3. the plaintext file kept under a second name (a hard link, or moved
///    aside where there are none), the encrypted one renamed over
///    `cowork.db`, the folder synced;
/// 4. the plaintext copy overwritten with zeros, synced and removed: now with
///    a key in the synced secret file, at the next start with one in a Secret
///    Service (`wipe_leftovers`, once the key is known to be kept).
fn convert(db: &Path, keyed: &Keyed) -> Result<(), KeyError> {
    let fail = |reason: String| KeyError::Conversion { db: db.display().to_string(), reason };
    let started = std::time::Instant::now();
    let partial = partial_path(db);
    for stale in [partial.clone(), partial.with_extension("encrypting-journal")] {
        let _ = std::fs::remove_file(stale);
    }
    let conn = Connection::open(db).map_err(|err| fail(err.to_string()))?;
    conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(|err| fail(err.to_string()))?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(|err| fail(err.to_string()))?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(|err| fail(format!("cannot fold its WAL in: {err}")))?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = DELETE", [], |row| row.get(0))
        .map_err(|err| fail(format!("another process has it open ({err}); quit it and start cowork again")))?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(fail(format!("another process has it open (journal mode stays {mode}); quit it and start cowork again")));
    }
    // Other processes may read but not write until this connection closes.
    conn.pragma_update(None, "locking_mode", "EXCLUSIVE").map_err(|err| fail(err.to_string()))?;
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get::<_, i64>(0)).map_err(|err| fail(err.to_string()))?;
    let attach = Zeroizing::new(format!(
        "ATTACH DATABASE '{}' AS encrypted KEY \"x'{}'\";",
        partial.display().to_string().replace('\'', "''"),
        keyed.key.to_hex().as_str()
    ));
    conn.execute_batch(&attach).map_err(|err| fail(format!("cannot create {}: {err}", partial.display())))?;
    conn.query_row("SELECT sqlcipher_export('encrypted')", [], |_| Ok(())).map_err(|err| fail(format!("the export failed: {err}")))?;
    conn.execute_batch(&format!("PRAGMA encrypted.user_version = {version}; DETACH DATABASE encrypted;")).map_err(|err| fail(err.to_string()))?;
    sync_file(&partial).map_err(|err| fail(format!("cannot sync {}: {err}", partial.display())))?;
    // The copy must open with the key and hold the same schema before it replaces anything.
    {
        let check_conn = Connection::open_with_flags(&partial, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|err| fail(err.to_string()))?;
        apply(&check_conn, keyed).map_err(|err| fail(err.to_string()))?;
        let copied: i64 = check_conn.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(|err| fail(format!("the encrypted copy does not open: {err}")))?;
        if copied != version {
            return Err(fail(format!("the encrypted copy has schema {copied}, not {version}")));
        }
    }
    let plaintext = plaintext_path(db);
    let _ = std::fs::remove_file(&plaintext);
    if std::fs::hard_link(db, &plaintext).is_err() {
        // No hard links here (exFAT, some FUSE): move it aside instead; a
        // kill before the next rename is undone by `wipe_leftovers`.
        std::fs::rename(db, &plaintext).map_err(|err| fail(format!("cannot keep the plaintext copy aside: {err}")))?;
    }
    std::fs::rename(&partial, db).map_err(|err| fail(format!("cannot rename {}: {err}", partial.display())))?;
    sync_dir(db).map_err(|err| fail(format!("cannot sync the folder: {err}")))?;
    drop(conn);
    // The plaintext goes once the key is durable: the secret file is synced
    // before a key is used; a Secret Service writes its keyring in its own
    // time, so there the next start (`wipe_leftovers`) wipes it.
    if keyed.custody.contains("Secret Service") {
        tracing::info!("the plaintext copy is wiped at the next start, once the key is known to be kept");
    } else {
        wipe(&plaintext);
    }
    tracing::info!(millis = started.elapsed().as_millis() as u64, "converted the plaintext database to an encrypted one");
    Ok(())
}

/// What a conversion killed part-way left: a stale partial copy, or the
/// plaintext copy kept aside (wiped only once `db` itself opens with the key,
/// and never when it is `db`'s own file).
fn wipe_leftovers(db: &Path, keyed: &Keyed) {
    let partial = partial_path(db);
    if partial.exists() {
        let _ = std::fs::remove_file(&partial);
        let _ = std::fs::remove_file(partial.with_extension("encrypting-journal"));
    }
    let plaintext = plaintext_path(db);
    let Ok(aside) = std::fs::metadata(&plaintext) else { return };
    if !db.exists() {
        // Killed between moving the plaintext aside and renaming the copy in.
        let _ = std::fs::rename(&plaintext, db);
        return;
    }
    let same_file = std::fs::metadata(db).is_ok_and(|m| m.ino() == aside.ino() && m.dev() == aside.dev());
    if same_file {
        let _ = std::fs::remove_file(&plaintext);
        return;
    }
    if file_state(db).ok() == Some(FileState::Encrypted) {
        let opens = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()
            .is_some_and(|conn| apply(&conn, keyed).is_ok() && check(&conn, db, keyed).is_ok());
        if opens {
            wipe(&plaintext);
        }
    }
}

/// Overwrites a file with zeros, syncs and removes it (best effort: a
/// journaling file system or an SSD may keep old blocks elsewhere).
fn wipe(path: &Path) {
    if let Ok(mut file) = std::fs::OpenOptions::new().write(true).open(path) {
        let length = file.metadata().map(|m| m.len()).unwrap_or(0);
        let zeros = vec![0u8; 1 << 20];
        let mut left = length;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            if file.write_all(&zeros[..n]).is_err() {
                break;
            }
            left -= n as u64;
        }
        let _ = file.sync_all();
    }
    let _ = std::fs::remove_file(path);
}

fn sync_file(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

fn sync_dir(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_print_nothing_and_derived_keys_differ_by_label() {
        let key = DbKey::random();
        assert_eq!(format!("{key:?}"), "DbKey(…)");
        assert_ne!(key.derive("vectors").as_ref(), key.derive("audio").as_ref());
        assert_ne!(key.derive("vectors").as_ref(), key.0.as_ref());
        let back = DbKey::from_hex(&key.to_hex()).unwrap();
        assert_eq!(back.0.as_ref(), key.0.as_ref());
        assert!(DbKey::from_hex("abcd").is_none());
    }

    #[test]
    fn a_plaintext_database_converts_and_an_encrypted_one_without_its_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("cowork.db");
        {
            let conn = Connection::open(&db).unwrap();
            conn.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x); CREATE VIRTUAL TABLE f USING fts5(body); PRAGMA user_version = 7;").unwrap();
            for i in 0..1000 {
                conn.execute("INSERT INTO t VALUES (?1)", [format!("secret row {i}")]).unwrap();
                conn.execute("INSERT INTO f VALUES (?1)", [format!("quarterly invoice {i}")]).unwrap();
            }
        }
        assert_eq!(file_state(&db).unwrap(), FileState::Plaintext);
        let keyed = prepare(&db).unwrap();
        assert_eq!(file_state(&db).unwrap(), FileState::Encrypted);
        assert!(!plaintext_path(&db).exists() && !partial_path(&db).exists() && !db.with_extension("db-wal").exists());
        let conn = Connection::open(&db).unwrap();
        apply(&conn, &keyed).unwrap();
        let rows: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        let hits: i64 = conn.query_row("SELECT count(*) FROM f WHERE f MATCH 'invoice'", [], |r| r.get(0)).unwrap();
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!((rows, hits, version), (1000, 1000, 7));
        drop(conn);
        let bytes = std::fs::read(&db).unwrap();
        assert!(!bytes.windows(10).any(|w| w == b"secret row"), "no plaintext left in the file");

        // Another process (here: the ring forgotten) finds the key in the secret file.
        RING.lock().remove(&ring_path(&db));
        assert!(unlock(&db).is_ok());
        // The key gone: refused with where it looked, the file untouched.
        RING.lock().remove(&ring_path(&db));
        std::fs::rename(dir.path().join(SecretFile::KEY), dir.path().join("moved.key")).unwrap();
        let err = prepare(&db).unwrap_err();
        assert!(matches!(err, KeyError::Missing { .. }), "{err}");
        assert!(err.to_string().contains("secrets.enc") && err.to_string().contains("did not create a new database"), "{err}");
        assert_eq!(std::fs::read(&db).unwrap(), bytes);
        // A wrong key: refused as wrong.
        use_ephemeral(&db, DbKey::random());
        let err = unlock(&db).unwrap_err();
        assert!(matches!(err, KeyError::Wrong { .. }), "{err}");
        assert_eq!(std::fs::read(&db).unwrap(), bytes);
        RING.lock().remove(&ring_path(&db));
    }
}
