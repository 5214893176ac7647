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
];

pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens (creating if needed) the writable connection and migrates it.
pub fn open_writer(path: &Path) -> anyhow::Result<Connection> {
    let conn = Connection::open(path).with_context(|| format!("cannot open database {}", path.display()))?;
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
    let conn = Connection::open_with_flags(path, flags)
        .with_context(|| format!("cannot open database read-only {}", path.display()))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let version: u32 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version == 0 {
        bail!("database has no schema yet {}", path.display());
    }
    Ok(conn)
}

/// A transaction that takes the write lock at its start (waiting up to the
/// busy timeout). Two connections write this file (the store and the embed
/// worker; also a `cowork memory embed` beside the app): a deferred
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
    fn newer_schema_is_refused_with_a_clear_error() {
        let conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        let err = migrate(&conn).unwrap_err();
        assert!(format!("{err:#}").contains("newer than this cowork understands"));
    }
}
