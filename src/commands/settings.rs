//! `cowork settings list|get|set|reset`: every setting the Settings tab
//! edits, from the command line. A value is checked exactly as the sidebar
//! checks it before it is stored; a bad one is refused with the reason.

use anyhow::{Context, bail};

use crate::config::{Paths, Settings, described, known_setting, needs_restart};

fn current(paths: &Paths) -> Settings {
    crate::workers::read_settings(paths).0
}

/// Every setting with its value and what it does (`--json`: one object per line).
pub fn list(paths: &Paths, json: bool) -> anyhow::Result<()> {
    let settings = current(paths);
    let stored: Vec<(String, String)> = crate::store::open_read_only(&paths.db_path()).and_then(|c| Ok(crate::store::all_settings(&c)?)).unwrap_or_default();
    let mut keys: Vec<String> = described().map(|(k, _)| k.to_owned()).collect();
    // Consent per provider: those stored, and those of the configured providers.
    let providers = crate::brains::Providers::load(&crate::brains::Providers::path(&paths.data_dir)).unwrap_or_default();
    for key in stored.iter().map(|(k, _)| k.clone()).chain(providers.list.iter().map(|p| crate::config::consent_key(&p.name))) {
        if known_setting(&key) && !keys.contains(&key) {
            keys.push(key);
        }
    }
    for key in keys {
        let value = settings.value(&key).unwrap_or_default();
        let about = described().find(|(k, _)| *k == key).map_or("send what cowork recorded to this provider: always, never or ask", |(_, d)| d);
        let set = stored.iter().any(|(k, _)| *k == key);
        if json {
            println!("{}", serde_json::json!({"key": key, "value": value, "set": set, "about": about}));
        } else {
            // A value of several lines (the project rules) on one line, quoted with its `\n`s.
            let value = if value.contains(['\n', '\r']) { format!("{value:?}") } else { value };
            println!("{key} = {value}{}\n    {about}", if set { "" } else { "  (default)" });
        }
    }
    Ok(())
}

pub fn get(paths: &Paths, key: &str) -> anyhow::Result<()> {
    if !known_setting(key) {
        bail!("there is no setting {key:?} ({})", suggestion(key));
    }
    println!("{}", current(paths).value(key).unwrap_or_default());
    Ok(())
}

/// Checks and stores a value; a running sidebar reads it when its settings next change.
pub fn set(paths: &Paths, key: &str, value: &str) -> anyhow::Result<()> {
    if !known_setting(key) {
        bail!("there is no setting {key:?} ({})", suggestion(key));
    }
    let mut settings = current(paths);
    if let Some(problem) = settings.apply(key, value) {
        bail!("not saved: {problem}");
    }
    paths.ensure_data_dir()?;
    let conn = crate::store::open_writer(&paths.db_path())?;
    crate::store::set_setting(&conn, key, value, crate::ids::now_millis()).context("the setting was not saved")?;
    if needs_restart(key) {
        eprintln!("saved; it takes effect when cowork starts again");
    }
    Ok(())
}

/// Back to the default (the stored value is removed).
pub fn reset(paths: &Paths, key: &str) -> anyhow::Result<()> {
    if !known_setting(key) {
        bail!("there is no setting {key:?} ({})", suggestion(key));
    }
    let conn = crate::store::open_writer(&paths.db_path())?;
    conn.execute("DELETE FROM settings WHERE key = ?1", [key]).context("the setting was not reset")?;
    Ok(())
}

/// The closest known keys, for a typo.
fn suggestion(key: &str) -> String {
    let tail = key.rsplit('.').next().unwrap_or(key);
    let near: Vec<&str> = described().map(|(k, _)| k).filter(|k| k.contains(tail) || key.split('.').next().is_some_and(|head| k.starts_with(head))).take(6).collect();
    if near.is_empty() { "cowork settings list shows them all".into() } else { format!("did you mean {}?", near.join(", ")) }
}
