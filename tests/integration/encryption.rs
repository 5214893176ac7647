//! Encrypted at rest (issue 18): after a capture burst and a chat nothing
//! captured is readable anywhere in the data directory; the data reads back
//! after a restart; a plaintext database converts whole under kill -9; a
//! missing or wrong key is a clear message that replaces nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cowork::store::key::{self, FileState};
use egui_kittest::kittest::Queryable;

use super::agent::{answer, fixture};
use super::providers::scripted;
use super::support::{models_dir, require, temp_dir};

fn cowork(data: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cowork"))
        .env("COWORK_LOG", "warn")
        .arg("--data-dir")
        .arg(data)
        .arg("--models-dir")
        .arg(models_dir())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

const TITLE: &str = "Flamingo ledger 7731 - Quarterly forecast";
const COPIED: &str = "IBAN DE44 5001 0517 5407 3249 31";
const TYPED: &str = "marmalade pelican contract renewal";
const BURST_TITLE: &str = "Okapi roadmap draft 2027";
const BURST_COPY: &str = "the narwhal launch code is 4417";
const ANSWER: &str = "The Flamingo ledger forecast is due on the zeppelin review.";

#[test]
fn after_a_capture_burst_and_a_chat_nothing_captured_is_readable_in_the_data_directory() {
    let server = scripted(vec![answer(ANSWER)]);
    let (data, _paths) = fixture(&server, TITLE, COPIED);
    // A capture burst through the real pipeline (firewall, tracker, store worker).
    let script = data.path().join("burst.jsonl");
    let mut lines = String::new();
    for i in 0..40 {
        lines.push_str(&format!("{{\"window\": {{\"app\": \"gedit\", \"title\": \"{BURST_TITLE} part {i}\"}}}}\n{{\"work_secs\": 30}}\n"));
    }
    lines.push_str(&format!("{{\"type\": \"{TYPED}\"}}\n{{\"copy\": \"{BURST_COPY}\"}}\n{{\"work_secs\": 30}}\n{{\"window\": {{\"app\": \"XTerm\", \"title\": \"shell\"}}}}\n"));
    std::fs::write(&script, lines).unwrap();
    let out = cowork(data.path(), &["capture", "simulate", "--script", script.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_file(&script).unwrap();
    // A chat whose question and answer are stored.
    let out = cowork(data.path(), &["ask", "--agent", "what is due on the Flamingo ledger?"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("zeppelin"));
    // Vectors in the database, then the faiss indexes written beside it.
    let out = cowork(data.path(), &["memory", "embed"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let db = data.path().join("cowork.db");
    {
        let conn = cowork::store::open_read_only(&db).unwrap();
        let (mut indexes, _) = cowork::memory::index::IndexSet::open(&cowork::memory::index::index_dir(data.path()), &conn).unwrap();
        assert!(indexes.total() > 40, "{} vectors", indexes.total());
        indexes.save().unwrap();
    }
    let files = files_under(data.path());
    assert!(files.iter().any(|f| f.extension().is_some_and(|e| e == "faiss") && std::fs::metadata(f).unwrap().len() > 10_000), "{files:?}");

    // The sqlite3 shell cannot read the database.
    if require(super::support::have_program("sqlite3"), "the sqlite3 shell (scripts/test installs it)") {
        let out = Command::new("sqlite3").arg(&db).arg("SELECT count(*) FROM activity_sessions;").output().unwrap();
        assert!(!out.status.success(), "sqlite3 read it: {}", String::from_utf8_lossy(&out.stdout));
        assert!(String::from_utf8_lossy(&out.stderr).contains("not a database"), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // Byte for byte: no captured title, typed text, copy or chat in any file.
    for needle in [TITLE, "Flamingo ledger", COPIED, "5407 3249", TYPED, "marmalade", BURST_TITLE, "Okapi roadmap", BURST_COPY, "narwhal", "zeppelin"] {
        for file in &files {
            let bytes = std::fs::read(file).unwrap();
            assert!(!bytes.windows(needle.len()).any(|w| w == needle.as_bytes()), "{needle:?} is readable in {}", file.display());
        }
    }
    eprintln!("checked {} files: {:?}", files.len(), files.iter().map(|f| f.strip_prefix(data.path()).unwrap().display().to_string()).collect::<Vec<_>>());

    // A restart (another process, the key from custody) reads it all back.
    let out = cowork(data.path(), &["search", "--json", "Okapi roadmap"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(BURST_TITLE), "{}", String::from_utf8_lossy(&out.stdout));
    key::forget(&db);
    let conn = cowork::store::open_read_only(&db).unwrap();
    let typed: String = conn.query_row("SELECT text FROM keystroke_chunks WHERE text LIKE '%pelican%'", [], |r| r.get(0)).unwrap();
    let copied: i64 = conn.query_row("SELECT count(*) FROM clipboard_events WHERE text IN (?1, ?2)", [COPIED, BURST_COPY], |r| r.get(0)).unwrap();
    let answered: i64 = conn.query_row("SELECT count(*) FROM chat_messages WHERE content LIKE '%zeppelin%'", [], |r| r.get(0)).unwrap();
    assert_eq!((typed.as_str(), copied, answered), (TYPED, 2, 1));
}

/// A plaintext database as an older cowork left it: `sessions` windows, WAL mode.
fn plaintext_database(db: &Path, sessions: i64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    cowork::store::migrate(&conn).unwrap();
    let tx = conn.unchecked_transaction().unwrap();
    for i in 0..sessions {
        let session = cowork::records::ActivitySession {
            session_id: i + 1,
            app: "firefox".into(),
            title: format!("Plaintext history window {i} with a title of a usual length"),
            window_id: 1,
            started_at_millis: 1_700_000_000_000 + i * 1000,
            ended_at_millis: Some(1_700_000_000_000 + i * 1000 + 500),
            ..Default::default()
        };
        cowork::capture::db::upsert_session(&tx, &session).unwrap();
    }
    tx.commit().unwrap();
    assert_eq!(key::file_state(db).unwrap(), FileState::Plaintext);
}

/// The database at `db` is whole: plaintext or encrypted (its key from custody), with every session.
fn whole(db: &Path, sessions: i64) -> FileState {
    key::forget(db);
    let state = key::file_state(db).unwrap();
    // A plaintext file opens as SQLite would open it (a hot journal rolled back);
    // an encrypted one with the key from custody.
    let conn = match state {
        FileState::Plaintext => rusqlite::Connection::open(db).unwrap(),
        _ => cowork::store::open_read_only(db).unwrap_or_else(|err| panic!("{state:?} does not open: {err:#}")),
    };
    let count: i64 = conn.query_row("SELECT count(*) FROM activity_sessions", [], |r| r.get(0)).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!((count, check.as_str()), (sessions, "ok"), "{state:?}");
    let hits = cowork::capture::db::search_sessions(&conn, "Plaintext history", 5).unwrap();
    assert_eq!(hits.len(), 5, "full-text search works in the {state:?} database");
    state
}

#[test]
fn converting_a_plaintext_database_leaves_one_whole_database_under_kill_9() {
    const SESSIONS: i64 = 150_000;
    let pristine_dir = temp_dir();
    let pristine = pristine_dir.path().join("cowork.db");
    plaintext_database(&pristine, SESSIONS);
    let size = std::fs::metadata(&pristine).unwrap().len() + std::fs::metadata(pristine.with_extension("db-wal")).map(|m| m.len()).unwrap_or(0);
    let fresh = || {
        let data = temp_dir();
        for name in ["cowork.db", "cowork.db-wal"] {
            if pristine_dir.path().join(name).exists() {
                std::fs::copy(pristine_dir.path().join(name), data.path().join(name)).unwrap();
            }
        }
        data
    };
    // How long a whole conversion takes in a new process (start-up included).
    let data = fresh();
    let started = Instant::now();
    let out = cowork(data.path(), &["rules", "list"]);
    let full = started.elapsed();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(whole(&data.path().join("cowork.db"), SESSIONS), FileState::Encrypted);
    eprintln!("converting {} MB of plaintext database: {} ms, start-up included", size >> 20, full.as_millis());

    let mut outcomes = Vec::new();
    let kills = 15;
    for i in 0..kills {
        let data = fresh();
        let db = data.path().join("cowork.db");
        let mut child = Command::new(env!("CARGO_BIN_EXE_cowork"))
            .env("COWORK_LOG", "warn")
            .arg("--data-dir")
            .arg(data.path())
            .args(["rules", "list"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kills at spread times, and as the conversion's steps show on disk:
        // the encrypted copy being written, the plaintext kept aside.
        let started = Instant::now();
        let (deadline, marker): (Duration, Option<&str>) = match i % 3 {
            0 => (full.mul_f64(1.3 * i as f64 / kills as f64), None),
            1 => (full * 3, Some("cowork.db.encrypting")),
            _ => (full * 3, Some("cowork.db.plaintext")),
        };
        loop {
            if started.elapsed() >= deadline || marker.is_some_and(|m| data.path().join(m).exists()) || child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if i % 3 == 1 {
            std::thread::sleep(Duration::from_millis(i as u64));
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let state = whole(&db, SESSIONS);
        // Whatever the kill left, the next start finishes the job.
        let out = cowork(data.path(), &["rules", "list"]);
        assert!(out.status.success(), "after kill {i} ({state:?}): {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(whole(&db, SESSIONS), FileState::Encrypted);
        let leftovers: Vec<_> = files_under(data.path()).into_iter().filter(|f| f.to_string_lossy().contains(".plaintext") || f.to_string_lossy().contains(".encrypting")).collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        outcomes.push(state);
    }
    eprintln!("kill -9 left: {outcomes:?}");
    assert!(outcomes.contains(&FileState::Plaintext) && outcomes.contains(&FileState::Encrypted), "kills landed before and after the rename: {outcomes:?}");
}

#[test]
fn a_missing_or_wrong_key_is_a_clear_message_and_nothing_is_replaced() {
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    {
        let conn = cowork::store::open_writer(&db).unwrap();
        let session = cowork::records::ActivitySession { session_id: 1, app: "XTerm".into(), title: "kept history".into(), window_id: 1, started_at_millis: 1, ended_at_millis: Some(2), ..Default::default() };
        cowork::capture::db::upsert_session(&conn, &session).unwrap();
    }
    key::forget(&db);
    let sha = |path: &Path| -> Vec<u8> {
        use sha2::Digest;
        sha2::Sha256::digest(std::fs::read(path).unwrap()).to_vec()
    };
    let before = sha(&db);
    let listing = || -> Vec<String> {
        let mut names: Vec<String> = files_under(data.path()).iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };

    // Missing: the key file and its store moved away (a data directory copied without them).
    let aside = temp_dir();
    for name in ["secrets.key", "secrets.enc"] {
        std::fs::rename(data.path().join(name), aside.path().join(name)).unwrap();
    }
    let files_before = listing();
    let out = cowork(data.path(), &["rules", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is encrypted and its key is missing") && stderr.contains("secrets.enc") && stderr.contains("did not create a new database"), "{stderr}");
    assert_eq!(sha(&db), before, "the database is untouched");
    assert_eq!(listing(), files_before, "no key, no database made in its place");
    let doctor = cowork::commands::doctor::key_check(&cowork::config::Paths::resolve(Some(data.path().to_owned()), None).unwrap());
    assert_eq!(doctor.status, cowork::commands::doctor::Status::Fail);
    assert!(doctor.detail.contains("key is missing"), "{}", doctor.detail);
    key::forget(&db);

    // The locked window says the same, and Try again opens once the key is back.
    let problem = key::unlock(&db).unwrap_err();
    let app = cowork::ui::locked::LockedApp::new(db.clone(), &problem);
    let unlocked = app.unlocked.clone();
    let mut harness = egui_kittest::Harness::builder().with_size(egui::vec2(420.0, 320.0)).build_eframe(move |_cc| app);
    harness.run();
    harness.get_by_label("cowork cannot open your history");
    assert!(harness.query_by_label_contains("its key is missing").is_some());
    harness.get_by_label("Try again").click();
    harness.run();
    assert!(harness.query_by_label_contains("Tried again 1 times").is_some());
    assert!(!unlocked.load(std::sync::atomic::Ordering::SeqCst));
    for name in ["secrets.key", "secrets.enc"] {
        std::fs::rename(aside.path().join(name), data.path().join(name)).unwrap();
    }
    harness.get_by_label("Try again").click();
    harness.run();
    assert!(unlocked.load(std::sync::atomic::Ordering::SeqCst), "the key is back: cowork starts");
    drop(harness);

    // Wrong: another data directory's key files.
    let other = temp_dir();
    drop(cowork::store::open_writer(&other.path().join("cowork.db")).unwrap());
    for name in ["secrets.key", "secrets.enc"] {
        std::fs::copy(other.path().join(name), data.path().join(name)).unwrap();
    }
    key::forget(&db);
    let out = cowork(data.path(), &["rules", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("does not open") && stderr.contains("did not replace the file"), "{stderr}");
    assert_eq!(sha(&db), before);
    let doctor = cowork::commands::doctor::key_check(&cowork::config::Paths::resolve(Some(data.path().to_owned()), None).unwrap());
    assert_eq!(doctor.status, cowork::commands::doctor::Status::Fail, "{}", doctor.detail);
    key::forget(&db);
}

/// Opening an encrypted database costs no more than a plaintext one by much
/// (the raw key skips SQLCipher's passphrase derivation).
#[test]
fn opening_the_encrypted_database_is_fast() {
    let data = temp_dir();
    let db = data.path().join("cowork.db");
    drop(cowork::store::open_writer(&db).unwrap());
    let started = Instant::now();
    for _ in 0..20 {
        drop(cowork::store::open_read_only(&db).unwrap());
    }
    let each = started.elapsed() / 20;
    // What start-up adds: the key looked up in custody, then tried on the file.
    key::forget(&db);
    let started = Instant::now();
    key::unlock(&db).unwrap();
    let unlock = started.elapsed();
    eprintln!("a keyed read-only open: {each:?}; unlock at start-up (key from custody, tried on the file): {unlock:?}");
    assert!(each < Duration::from_millis(50), "{each:?}");
    assert!(unlock < Duration::from_millis(200), "{unlock:?}");
}

/// The key in a real Secret Service (gnome-keyring, unlocked): nothing of it
/// in the data directory; the database opens again through the keyring; a
/// locked keyring is named in the message, and nothing is replaced.
#[test]
fn the_database_key_lives_in_a_real_unlocked_keyring_and_a_locked_one_is_named() {
    if !super::providers::keyring_prerequisites() {
        return;
    }
    let home = temp_dir();
    let (_bus, address) = super::support::bare_session_bus(home.path());
    let data = temp_dir();
    let run = |dbus: Option<&str>, args: &[&str]| -> std::process::Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cowork"));
        command.env("COWORK_LOG", "warn").env_remove("DBUS_SESSION_BUS_ADDRESS").arg("--data-dir").arg(data.path()).arg("--models-dir").arg(models_dir()).args(args);
        if let Some(address) = dbus {
            command.env("DBUS_SESSION_BUS_ADDRESS", address);
        }
        command.stdin(Stdio::null()).output().unwrap()
    };
    let script = home.path().join("burst.jsonl");
    std::fs::write(&script, format!("{{\"window\": {{\"app\": \"gedit\", \"title\": \"{BURST_TITLE}\"}}}}\n{{\"work_secs\": 60}}\n{{\"window\": {{\"app\": \"XTerm\", \"title\": \"shell\"}}}}\n")).unwrap();
    // Asked before any keyring answers (a login still starting one): nothing is made in the data directory,
    // or the key would go there instead of into the keyring that answers a moment later.
    let out = run(Some(&address), &["secrets", "list"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!data.path().join("secrets.key").exists(), "listing secrets made a key file");
    {
        let _keyring = super::providers::gnome_keyring(home.path(), &address, Some("test-password"));
        // Ready when cowork's own connect succeeds: the name owned, the default collection there and
        // unlocked (gnome-keyring makes and unlocks the login keyring before it takes the name). Keeping
        // the new key is a write the keyring answers only after syncing its file (seconds on a loaded
        // disk): cowork waits for that itself, as it must at a real login too.
        assert!(
            super::support::eventually(Duration::from_secs(20), || super::providers::secret_store_seen(data.path(), &address).contains("secrets in the system secret store")),
            "gnome-keyring serves the Secret Service"
        );
        let out = run(Some(&address), &["capture", "simulate", "--script", script.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(key::file_state(&data.path().join("cowork.db")).unwrap(), FileState::Encrypted);
        assert!(!data.path().join("secrets.key").exists() && !data.path().join("secrets.enc").exists(), "the key is in the keyring, not beside the database: {}", String::from_utf8_lossy(&out.stderr));
        let out = run(Some(&address), &["search", "--json", "Okapi roadmap"]);
        assert!(String::from_utf8_lossy(&out.stdout).contains(BURST_TITLE), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(eventually_file(&home.path().join("share/keyrings/login.keyring")), "the login keyring is on disk");
        // Forget everything for a second data directory: its database key leaves the keyring, and the
        // secrets the first one shares (an API key) stay, as the list said before anything went.
        let other = temp_dir();
        let cowork = |args: &[&str], stdin: &str| {
            let mut child = Command::new(env!("CARGO_BIN_EXE_cowork"))
                .env("COWORK_LOG", "warn")
                .env("DBUS_SESSION_BUS_ADDRESS", &address)
                .arg("--data-dir")
                .arg(other.path())
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            std::io::Write::write_all(&mut child.stdin.take().unwrap(), stdin.as_bytes()).unwrap();
            let out = child.wait_with_output().unwrap();
            (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
        };
        let (ok, said) = cowork(&["secrets", "set", "provider:groq"], "gsk-test-123456789");
        assert!(ok, "{said}");
        let (ok, said) = cowork(&["capture", "simulate", "--script", script.to_str().unwrap()], "");
        assert!(ok && !other.path().join("secrets.key").exists(), "{said}");
        let own_key = format!("database-key:{}", other.path().display());
        let (ok, said) = cowork(&["forget-everything", "--yes"], "");
        assert!(ok, "{said}");
        assert!(said.contains(&format!("from the system secret store: {own_key}")) && said.contains("kept: 1 secret another cowork data directory shares"), "{said}");
        assert!(!other.path().exists(), "{said}");
        let listed = String::from_utf8_lossy(&run(Some(&address), &["secrets", "list"]).stdout).into_owned();
        assert!(listed.contains("provider:groq") && !listed.contains(&own_key), "{listed}");
        let out = run(Some(&address), &["search", "--json", "Okapi roadmap"]);
        assert!(String::from_utf8_lossy(&out.stdout).contains(BURST_TITLE), "the first data directory still opens: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::remove_dir_all(other.path()).ok();
    }
    let before = std::fs::read(data.path().join("cowork.db")).unwrap();
    // No session bus at all: the key cannot be reached, and the message says where it would be.
    let out = run(None, &["search", "Okapi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("key is missing") && stderr.contains("system secret store is not usable"), "{stderr}");
    // The keyring locked (a login that did not unlock it): named, nothing replaced.
    // The bus must have let go of the first keyring's name, or the second one cannot take it and quits.
    assert!(
        super::support::eventually(Duration::from_secs(20), || !super::support::bus_name_owned(&address, "org.freedesktop.secrets")),
        "the bus let go of the stopped keyring's name"
    );
    let mut keyring = super::providers::gnome_keyring(home.path(), &address, None);
    assert!(
        super::support::eventually(Duration::from_secs(20), || {
            let out = run(Some(&address), &["search", "Okapi"]);
            String::from_utf8_lossy(&out.stderr).contains("the default keyring is locked")
        }),
        "a locked keyring is named: {} (the keyring daemon: {:?})",
        String::from_utf8_lossy(&run(Some(&address), &["search", "Okapi"]).stderr),
        keyring.0.try_wait()
    );
    assert_eq!(std::fs::read(data.path().join("cowork.db")).unwrap(), before, "the database is untouched");
    assert!(!data.path().join("secrets.key").exists(), "no key was made in its place");
}

fn eventually_file(path: &Path) -> bool {
    super::support::eventually(Duration::from_secs(10), || path.is_file())
}
