//! The store's own SQL: settings as key/value rows, the FTS phrase quoting
//! every keyword search uses, and making deletions physical.

use rusqlite::{Connection, OptionalExtension, params};

/// Quotes each word so user text cannot be misread as FTS5 query syntax.
pub fn fts_phrase(query: &str) -> String {
    query
        .split_whitespace()
        .map(|word| format!("\"{}\"", word.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn set_setting(conn: &Connection, key: &str, value: &str, at_millis: i64) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO settings (key, value, updated_at_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at_ms = excluded.updated_at_ms",
    )?
    .execute(params![key, value, at_millis])?;
    Ok(())
}

pub fn setting(conn: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    conn.query_row("SELECT value FROM settings WHERE key = ?1", params![key], |row| row.get(0))
        .optional()
}

pub fn all_settings(conn: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare_cached("SELECT key, value FROM settings ORDER BY key")?;
    let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

/// Makes deletions physical: merges FTS segments (so deleted terms leave the
/// index), checkpoints the WAL and vacuums, so no deleted text stays on disk.
pub fn purge_deleted(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "INSERT INTO activity_fts (activity_fts) VALUES ('optimize');
         INSERT INTO message_fts (message_fts) VALUES ('optimize');
         INSERT INTO keystroke_fts (keystroke_fts) VALUES ('optimize');
         INSERT INTO clipboard_fts (clipboard_fts) VALUES ('optimize');
         INSERT INTO document_fts (document_fts) VALUES ('optimize');
         INSERT INTO audio_fts (audio_fts) VALUES ('optimize');
         INSERT INTO screen_fts (screen_fts) VALUES ('optimize');
         PRAGMA wal_checkpoint(TRUNCATE);
         VACUUM;
         PRAGMA wal_checkpoint(TRUNCATE);",
    )
}

/// Stores a setting in the next batch.
pub fn setting_write(key: String, value: String) -> super::StoreCommand {
    super::StoreCommand::write(format!("setting {key} = {value}"), move |tx| set_setting(tx, &key, &value, crate::ids::now_millis()))
}

/// Sends every stored setting to the UI.
pub fn load_settings(sink: crate::runtime::EventSink<super::events::StoreEvent>) -> super::StoreCommand {
    super::StoreCommand::run("load settings", move |writer| match all_settings(writer.conn()) {
        Ok(settings) => {
            for (key, value) in settings {
                sink.send(super::events::StoreEvent::Setting { key, value });
            }
        }
        Err(err) => writer.notice(format!("cannot load settings: {err}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_db as db;

    #[test]
    fn settings_overwrite() {
        let conn = db();
        set_setting(&conn, "afk_secs", "180", 1).unwrap();
        set_setting(&conn, "afk_secs", "60", 2).unwrap();
        assert_eq!(setting(&conn, "afk_secs").unwrap().as_deref(), Some("60"));
        assert_eq!(setting(&conn, "missing").unwrap(), None);
    }
}
