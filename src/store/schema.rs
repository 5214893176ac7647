//! Opening the database and applying numbered migrations.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use rusqlite::{Connection, OpenFlags};

pub const DB_FILE_NAME: &str = "cowork.db";

/// Migrations in order; migration `n` (1-based) brings `user_version` to `n`.
const MIGRATIONS: &[&str] = &[
    include_str!("../../assets/migrations/0001_init.sql"),
    include_str!("../../assets/migrations/0002_keystrokes.sql"),
    include_str!("../../assets/migrations/0003_clipboard.sql"),
    include_str!("../../assets/migrations/0004_urls_afk.sql"),
    include_str!("../../assets/migrations/0005_brains.sql"),
    include_str!("../../assets/migrations/0006_memory.sql"),
    include_str!("../../assets/migrations/0007_memory_fixes.sql"),
    include_str!("../../assets/migrations/0008_agent.sql"),
    include_str!("../../assets/migrations/0009_mcp.sql"),
    include_str!("../../assets/migrations/0010_mcp_clients.sql"),
    include_str!("../../assets/migrations/0011_call_images.sql"),
    include_str!("../../assets/migrations/0012_audio.sql"),
    include_str!("../../assets/migrations/0013_automations.sql"),
    include_str!("../../assets/migrations/0014_notifications.sql"),
    include_str!("../../assets/migrations/0015_apps.sql"),
    include_str!("../../assets/migrations/0016_agent_owners.sql"),
    include_str!("../../assets/migrations/0017_documents.sql"),
    include_str!("../../assets/migrations/0018_cached_tokens.sql"),
    include_str!("../../assets/migrations/0019_summary_fts_once.sql"),
    include_str!("../../assets/migrations/0020_screen.sql"),
    include_str!("../../assets/migrations/0021_your_day.sql"),
    include_str!("../../assets/migrations/0022_calendar.sql"),
];

pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens (creating if needed) the writable connection, keyed (a plaintext
/// database is encrypted first, see `key`), and migrates it.
pub fn open_writer(path: &Path) -> anyhow::Result<Connection> {
    let keyed = super::key::prepare(path)?;
    let conn = Connection::open(path).with_context(|| format!("cannot open database {}", path.display()))?;
    super::key::apply(&conn, &keyed).with_context(|| format!("cannot key database {}", path.display()))?;
    super::key::check(&conn, path, &keyed)?;
    configure_writer(&conn).with_context(|| format!("cannot use database {}", path.display()))?;
    migrate(&conn).with_context(|| format!("cannot migrate database {}", path.display()))?;
    Ok(conn)
}

/// WAL so readers never block the writer; NORMAL sync is durable across
/// process crashes (the WAL is fsynced at checkpoints) and much faster than FULL.
pub fn configure_writer(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // 16 MiB of page cache (default 2 MiB) and in-memory temp tables: FTS
    // segment merges during bursts stay off the disk.
    conn.pragma_update(None, "cache_size", -16_384)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(())
}

/// A read-only connection for a thread that is not the store worker.
pub fn open_read_only(path: &Path) -> anyhow::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    // A key this process holds is used without reading the file (see
    // `key::PREPARED`). Otherwise, before any connection of this call exists:
    // a plaintext database an older cowork left is read as it is (the first
    // writable open encrypts it), else the key comes from custody.
    use super::key::FileState;
    let keyed = match super::key::known(path) {
        Some(keyed) => Some(keyed),
        None => match super::key::file_state(path)? {
            FileState::Plaintext | FileState::Missing | FileState::Empty => None,
            FileState::Encrypted | FileState::NotADatabase => Some(super::key::key_for(path, false)?),
        },
    };
    let conn = Connection::open_with_flags(path, flags)
        .with_context(|| format!("cannot open database read-only {}", path.display()))?;
    if let Some(keyed) = keyed {
        super::key::apply(&conn, &keyed).with_context(|| format!("cannot key database {}", path.display()))?;
        super::key::check(&conn, path, &keyed)?;
    }
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Sorts and temporary tables stay in memory: no temp file on disk.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    let version: u32 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version == 0 {
        bail!("database has no schema yet {}", path.display());
    }
    Ok(conn)
}

/// A transaction that takes the write lock at its start (waiting up to the
/// busy timeout). Two processes may write this file (the sidebar's store
/// thread and a CLI command such as `cowork memory embed`): a deferred
/// transaction that reads first and writes later fails with SQLITE_BUSY,
/// without waiting, when the other committed in between.
pub fn write_transaction(conn: &Connection) -> rusqlite::Result<rusqlite::Transaction<'_>> {
    rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
}

/// Applies every migration above the stored `user_version`, each in its own transaction.
pub fn migrate(conn: &Connection) -> anyhow::Result<()> {
    let current: u32 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if current > SCHEMA_VERSION {
        bail!(
            "database schema version {current} is newer than this cowork understands ({SCHEMA_VERSION}); update cowork"
        );
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = index as u32 + 1;
        let tx = write_transaction(conn)?;
        tx.execute_batch(sql).with_context(|| format!("migration {version} failed"))?;
        if sql.contains("PRAGMA writable_schema = ON") {
            // A definition edited in place: bump the schema cookie so every
            // connection (this one included) parses the schema again.
            let cookie: i64 = tx.pragma_query_value(None, "schema_version", |row| row.get(0))?;
            tx.pragma_update(None, "schema_version", cookie + 1)?;
        }
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
        tracing::info!(version, "applied database migration");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_apply_once_and_set_user_version() {
        let conn = Connection::open_in_memory().unwrap();
        migrate(&conn).unwrap();
        migrate(&conn).unwrap();
        let version: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        // FTS5 is compiled in: the virtual tables exist and accept MATCH.
        conn.execute_batch("SELECT * FROM activity_fts WHERE activity_fts MATCH 'x'").unwrap();
    }

    #[test]
    fn memory_chunks_take_audio_after_the_in_place_edit_on_a_file_with_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE_NAME);
        {
            // A database as version 11 left it, with a chunk and a pin.
            let conn = Connection::open(&path).unwrap();
            configure_writer(&conn).unwrap();
            for (index, sql) in MIGRATIONS.iter().take(11).enumerate() {
                conn.execute_batch(sql).unwrap();
                conn.pragma_update(None, "user_version", index as u32 + 1).unwrap();
            }
            conn.execute_batch(
                "INSERT INTO embed_jobs (job_id, state, total_chunks, created_at_ms, updated_at_ms) VALUES (1, 'done', 1, 0, 0);
                 INSERT INTO memory_chunks (chunk_id, namespace, source, source_id, text, at_ms, job_id) VALUES (7, 'activity', 'window', 1, 'x', 0, 1);
                 INSERT INTO chat_threads (thread_id, title, created_at_ms, updated_at_ms) VALUES (3, 't', 0, 0);
                 INSERT INTO thread_pins (thread_id, chunk_id) VALUES (3, 7);",
            )
            .unwrap();
            assert!(conn.execute("INSERT INTO memory_chunks (namespace, source, source_id, text, at_ms, job_id) VALUES ('activity', 'audio', 1, 'x', 0, 1)", []).is_err());
        }
        let conn = open_writer(&path).unwrap();
        conn.execute("INSERT INTO memory_chunks (namespace, source, source_id, text, at_ms, job_id) VALUES ('activity', 'audio', 1, 'x', 0, 1)", []).unwrap();
        conn.execute("INSERT INTO memory_chunks (namespace, source, source_id, text, at_ms, job_id) VALUES ('activity', 'screen', 1, 'x', 0, 1)", []).unwrap();
        conn.execute("INSERT INTO memory_chunks (namespace, source, source_id, text, at_ms, job_id) VALUES ('documents', 'document', 1, 'x', 0, 1)", []).unwrap();
        assert!(conn.execute("INSERT INTO memory_chunks (namespace, source, source_id, text, at_ms, job_id) VALUES ('activity', 'nonsense', 1, 'x', 0, 1)", []).is_err());
        let pins: i64 = conn.query_row("SELECT count(*) FROM thread_pins", [], |r| r.get(0)).unwrap();
        assert_eq!(pins, 1, "nothing stored is touched");
        let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
        // Another connection opened before the edit reads the new definition too.
        let other = open_read_only(&path).unwrap();
        let sql: String = other.query_row("SELECT sql FROM sqlite_master WHERE name = 'memory_chunks'", [], |r| r.get(0)).unwrap();
        assert!(sql.contains("'audio'"), "{sql}");
    }

    #[test]
    fn newer_schema_is_refused_with_a_clear_error() {
        let conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        let err = migrate(&conn).unwrap_err();
        assert!(format!("{err:#}").contains("newer than this cowork understands"));
    }
}
