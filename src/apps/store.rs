//! The apps tables (migration 15) and the installed files: plain functions
//! over a connection and the apps folder, shared by the `apps` worker and
//! `cowork apps`. Installing writes the package's files into a fresh folder
//! and renames it into place, so an interrupted install or update leaves the
//! old app whole.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::manifest::{Disclosure, MANIFEST_FILE, Manifest, Package};
use super::runtime::Capability;

/// A value an app stores: at most this long.
pub const VALUE_LIMIT: usize = 1 << 20;
/// Keys one app may keep.
pub const KEY_LIMIT: i64 = 1000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppRow {
    pub app_id: String,
    pub name: String,
    pub version: String,
    pub manifest: String,
    pub component_sha256: Option<String>,
    pub imports: Vec<String>,
    pub granted: Vec<Capability>,
    pub enabled: bool,
    pub installed_at_millis: i64,
    pub updated_at_millis: i64,
}

impl AppRow {
    pub fn manifest(&self) -> Result<Manifest, String> {
        Manifest::parse(&self.manifest).map_err(|err| err.to_string())
    }
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AppRow> {
    let json = |i: usize| -> rusqlite::Result<String> { r.get(i) };
    Ok(AppRow {
        app_id: r.get(0)?,
        name: r.get(1)?,
        version: r.get(2)?,
        manifest: r.get(3)?,
        component_sha256: r.get(4)?,
        imports: serde_json::from_str(&json(5)?).unwrap_or_default(),
        granted: serde_json::from_str(&json(6)?).unwrap_or_default(),
        enabled: r.get(7)?,
        installed_at_millis: r.get(8)?,
        updated_at_millis: r.get(9)?,
    })
}

const COLUMNS: &str = "app_id, name, version, manifest, component_sha256, imports, granted, enabled, installed_at_ms, updated_at_ms";

pub fn apps(conn: &Connection) -> rusqlite::Result<Vec<AppRow>> {
    conn.prepare(&format!("SELECT {COLUMNS} FROM apps ORDER BY name COLLATE NOCASE, app_id"))?.query_map([], row)?.collect()
}

pub fn app(conn: &Connection, app_id: &str) -> rusqlite::Result<Option<AppRow>> {
    conn.query_row(&format!("SELECT {COLUMNS} FROM apps WHERE app_id = ?1"), [app_id], row).optional()
}

pub fn set_enabled(conn: &Connection, app_id: &str, enabled: bool, now: i64) -> rusqlite::Result<bool> {
    Ok(conn.execute("UPDATE apps SET enabled = ?2, updated_at_ms = ?3 WHERE app_id = ?1", params![app_id, enabled, now])? == 1)
}

pub fn storage_get(conn: &Connection, app_id: &str, key: &str) -> rusqlite::Result<Option<String>> {
    conn.query_row("SELECT value FROM app_storage WHERE app_id = ?1 AND key = ?2", [app_id, key], |r| r.get(0)).optional()
}

/// Stores a value under the app's own key; refused past the limits.
pub fn storage_set(conn: &Connection, app_id: &str, key: &str, value: &str, now: i64) -> Result<(), String> {
    if value.len() > VALUE_LIMIT || key.len() > 256 {
        return Err(format!("a stored value is at most {} KiB and a key 256 bytes", VALUE_LIMIT >> 10));
    }
    let keys: i64 = conn.query_row("SELECT count(*) FROM app_storage WHERE app_id = ?1 AND key != ?2", [app_id, key], |r| r.get(0)).map_err(|e| e.to_string())?;
    if keys >= KEY_LIMIT {
        return Err(format!("an app keeps at most {KEY_LIMIT} keys"));
    }
    conn.execute(
        "INSERT INTO app_storage (app_id, key, value, updated_at_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (app_id, key) DO UPDATE SET value = excluded.value, updated_at_ms = excluded.updated_at_ms",
        params![app_id, key, value, now],
    )
    .map_err(|e| e.to_string())?;
    Ok(())
}

/// A chat the app opened.
pub fn link_thread(conn: &Connection, app_id: &str, thread_id: i64) -> rusqlite::Result<()> {
    conn.execute("INSERT OR IGNORE INTO app_threads (app_id, thread_id) SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM apps WHERE app_id = ?1)", params![app_id, thread_id])?;
    Ok(())
}

/// The chats an app opened (id, title, last change), newest first.
pub fn conversations(conn: &Connection, app_id: &str) -> rusqlite::Result<Vec<(i64, String, i64)>> {
    conn.prepare(
        "SELECT t.thread_id, t.title, t.updated_at_ms FROM app_threads a JOIN chat_threads t ON t.thread_id = a.thread_id
         WHERE a.app_id = ?1 ORDER BY t.updated_at_ms DESC LIMIT 100",
    )?
    .query_map([app_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
    .collect()
}

/// Where an installed app's files are.
pub fn app_dir(apps_dir: &Path, app_id: &str) -> PathBuf {
    apps_dir.join(app_id)
}

/// What an install changed.
#[derive(Clone, Debug, PartialEq)]
pub struct Installed {
    pub row: AppRow,
    /// It replaced an installed version.
    pub updated: bool,
}

/// Installs (or updates) a package with the capabilities the user granted
/// after seeing `disclosure`. A grant the code does not import is dropped;
/// an app that imports what cowork does not offer is refused.
pub fn install(conn: &Connection, apps_dir: &Path, package: &Package, disclosure: &Disclosure, granted: &[Capability], now: i64) -> Result<Installed, String> {
    if let Some(flag) = disclosure.flags.iter().find(|f| f.contains("cannot run")) {
        return Err(format!("{} cannot be installed: {flag}", package.manifest.name));
    }
    let app_id = package.manifest.app_id();
    let previous = app(conn, &app_id).map_err(|e| e.to_string())?;
    let mut granted: Vec<Capability> = granted.iter().copied().filter(|c| disclosure.capabilities.contains(c)).collect();
    granted.sort_by_key(|c| c.name());
    granted.dedup();
    let sha = package.component.as_deref().map(|wasm| {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(wasm))
    });
    // The files first, in a folder of their own, renamed over the old one.
    std::fs::create_dir_all(apps_dir).map_err(|e| format!("cannot create {}: {e}", apps_dir.display()))?;
    let staging = apps_dir.join(format!(".{app_id}.installing"));
    let _ = std::fs::remove_dir_all(&staging);
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(&staging)?;
        std::fs::write(staging.join(MANIFEST_FILE), &package.manifest_text)?;
        if let (Some(file), Some(wasm)) = (&package.manifest.component, &package.component) {
            std::fs::write(staging.join(file), wasm)?;
        }
        for entry in std::fs::read_dir(&staging)? {
            std::fs::File::open(entry?.path())?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| format!("cannot write the app's files: {e}"))?;
    let target = app_dir(apps_dir, &app_id);
    let old = apps_dir.join(format!(".{app_id}.old"));
    let _ = std::fs::remove_dir_all(&old);
    if target.exists() {
        std::fs::rename(&target, &old).map_err(|e| format!("cannot replace {}: {e}", target.display()))?;
    }
    std::fs::rename(&staging, &target).map_err(|e| format!("cannot install into {}: {e}", target.display()))?;
    let _ = std::fs::remove_dir_all(&old);
    let row = AppRow {
        app_id: app_id.clone(),
        name: package.manifest.name.clone(),
        version: package.manifest.version.clone(),
        manifest: package.manifest_text.clone(),
        component_sha256: sha,
        imports: disclosure.imports.clone(),
        granted,
        enabled: previous.as_ref().is_none_or(|p| p.enabled),
        installed_at_millis: previous.as_ref().map_or(now, |p| p.installed_at_millis),
        updated_at_millis: now,
    };
    conn.execute(
        &format!(
            "INSERT INTO apps ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT (app_id) DO UPDATE SET name = excluded.name, version = excluded.version, manifest = excluded.manifest,
               component_sha256 = excluded.component_sha256, imports = excluded.imports, granted = excluded.granted, updated_at_ms = excluded.updated_at_ms"
        ),
        params![
            row.app_id,
            row.name,
            row.version,
            row.manifest,
            row.component_sha256,
            serde_json::to_string(&row.imports).unwrap_or_default(),
            serde_json::to_string(&row.granted).unwrap_or_default(),
            row.enabled,
            row.installed_at_millis,
            row.updated_at_millis
        ],
    )
    .map_err(|e| format!("cannot record the app: {e}"))?;
    Ok(Installed { row, updated: previous.is_some() })
}

/// Removes an app with everything it kept: its storage, the chats it opened
/// (their messages too) and its files. Returns false if it was not installed.
pub fn remove(conn: &Connection, apps_dir: &Path, app_id: &str) -> Result<bool, String> {
    let tx = crate::store::write_transaction(conn).map_err(|e| e.to_string())?;
    let run = || -> rusqlite::Result<usize> {
        tx.execute("DELETE FROM chat_messages WHERE thread_id IN (SELECT thread_id FROM app_threads WHERE app_id = ?1)", [app_id])?;
        tx.execute("DELETE FROM chat_threads WHERE thread_id IN (SELECT thread_id FROM app_threads WHERE app_id = ?1)", [app_id])?;
        tx.execute("DELETE FROM app_threads WHERE app_id = ?1", [app_id])?;
        tx.execute("DELETE FROM app_storage WHERE app_id = ?1", [app_id])?;
        tx.execute("DELETE FROM apps WHERE app_id = ?1", [app_id])
    };
    let removed = run().map_err(|e| format!("cannot remove {app_id}: {e}"))?;
    tx.commit().map_err(|e| format!("cannot remove {app_id}: {e}"))?;
    let dir = app_dir(apps_dir, app_id);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("the app's records are gone, but not its files in {}: {e}", dir.display()))?;
    }
    Ok(removed == 1)
}

/// An installed app's component, as installed.
pub fn component(apps_dir: &Path, row: &AppRow) -> Result<Option<Vec<u8>>, String> {
    let manifest = row.manifest()?;
    let Some(file) = manifest.component else { return Ok(None) };
    let path = app_dir(apps_dir, &row.app_id).join(file);
    let wasm = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    use sha2::Digest;
    if row.component_sha256.as_deref() != Some(hex::encode(sha2::Sha256::digest(&wasm)).as_str()) {
        return Err(format!("{} changed since it was installed; install it again to see what it can do", path.display()));
    }
    Ok(Some(wasm))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "name = \"Notes\"\ndescription = \"d\"\ncategory = \"c\"\nversion = \"1\"\ncomponent = \"app.wasm\"\ndata_use = \"u\"\n";

    #[test]
    fn install_update_storage_and_removal_take_everything_the_app_kept() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::store::open_writer(&dir.path().join("cowork.db")).unwrap();
        let apps_dir = dir.path().join("apps");
        let package = Package { manifest: Manifest::parse(MANIFEST).unwrap(), manifest_text: MANIFEST.into(), component: Some(b"\0asm\x0d\0\x01\0".to_vec()) };
        let disclosure = Disclosure::new(&package.manifest, vec![super::super::runtime::DATA.into(), super::super::runtime::AI.into()]);
        let installed = install(&conn, &apps_dir, &package, &disclosure, &[Capability::Ai, Capability::Http], 10).unwrap();
        assert_eq!(installed.row.granted, [Capability::Ai], "http is not imported, so it is not granted");
        assert!(!installed.updated);
        assert_eq!(component(&apps_dir, &installed.row).unwrap().unwrap(), package.component.clone().unwrap());
        storage_set(&conn, "notes", "k", "v", 11).unwrap();
        assert_eq!(storage_get(&conn, "notes", "k").unwrap().as_deref(), Some("v"));
        assert_eq!(storage_get(&conn, "other", "k").unwrap(), None);
        assert!(storage_set(&conn, "notes", "big", &"x".repeat(VALUE_LIMIT + 1), 12).is_err());
        conn.execute("INSERT INTO chat_threads (thread_id, title, created_at_ms, updated_at_ms) VALUES (7, 'From Notes', 1, 2)", []).unwrap();
        conn.execute("INSERT INTO chat_messages (message_id, thread_id, role, content, status, created_at_ms) VALUES (70, 7, 'user', 'hello', 'done', 1)", []).unwrap();
        link_thread(&conn, "notes", 7).unwrap();
        assert_eq!(conversations(&conn, "notes").unwrap(), [(7, "From Notes".to_owned(), 2)]);

        let again = install(&conn, &apps_dir, &package, &disclosure, &[], 20).unwrap();
        assert!(again.updated && again.row.granted.is_empty() && again.row.installed_at_millis == 10);
        assert_eq!(storage_get(&conn, "notes", "k").unwrap().as_deref(), Some("v"), "an update keeps the app's data");

        assert!(remove(&conn, &apps_dir, "notes").unwrap());
        assert_eq!(storage_get(&conn, "notes", "k").unwrap(), None);
        let left: i64 = conn.query_row("SELECT (SELECT count(*) FROM chat_threads WHERE thread_id = 7) + (SELECT count(*) FROM chat_messages WHERE thread_id = 7)", [], |r| r.get(0)).unwrap();
        assert_eq!(left, 0, "the chats it opened go with it");
        assert!(!app_dir(&apps_dir, "notes").exists());
        assert!(!remove(&conn, &apps_dir, "notes").unwrap());
    }
}
