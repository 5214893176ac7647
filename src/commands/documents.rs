//! `cowork documents …` and `cowork undo`.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use crate::config::Paths;
use crate::documents::{Selection, read_with_deadline};

/// `cowork documents read PATH`: the text the agent gets (or the parts as JSON).
pub fn read(path: &Path, selection: Selection, max_chars: usize, json: bool) -> anyhow::Result<ExitCode> {
    let doc = read_with_deadline(path, &selection, crate::documents::read::DEADLINE).map_err(|e| anyhow::anyhow!("{e}"))?;
    if json {
        println!("{}", serde_json::to_string(&doc)?);
    } else {
        print!("{}", doc.render(max_chars));
    }
    Ok(ExitCode::SUCCESS)
}

/// `cowork documents add PATH`: read whole and kept in memory; the embed worker (or `cowork memory embed`) makes it searchable by meaning.
pub fn add(paths: &Paths, path: &Path) -> anyhow::Result<ExitCode> {
    let path = path.canonicalize().with_context(|| format!("{}", path.display()))?;
    paths.ensure_data_dir()?;
    // Asked for by name, it is kept even with keeping documents switched off; the privacy rules still hold.
    let mut settings = crate::workers::read_settings(paths).0;
    settings.remember_documents = true;
    if let Some(why) = crate::documents::memory::withheld(&path, &settings) {
        anyhow::bail!("{} is not kept in memory: {why}", path.display());
    }
    let doc = crate::documents::memory::prepare(&path, "attached").map_err(|e| anyhow::anyhow!("{e}"))?;
    let conn = crate::store::open_writer(&paths.db_path())?;
    let tx = crate::store::write_transaction(&conn)?;
    let id = crate::documents::memory::store(&tx, &doc, crate::ids::now_millis())?;
    tx.commit()?;
    println!("{id}\t{}\t{} parts kept (searchable by words now, by meaning once embedded)", doc.name, doc.parts.len());
    Ok(ExitCode::SUCCESS)
}

pub fn list(paths: &Paths, json: bool) -> anyhow::Result<ExitCode> {
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let docs = crate::documents::memory::list(&conn)?;
    if json {
        println!("{}", serde_json::to_string(&docs)?);
    } else if docs.is_empty() {
        eprintln!("no documents are kept in memory");
    } else {
        for d in docs {
            println!("{}\t{}\t{} parts ({} embedded)\t{}\t{}", d.document_id, d.name, d.parts, d.embedded_parts, d.origin, d.path);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn forget(paths: &Paths, id: i64) -> anyhow::Result<ExitCode> {
    let conn = crate::store::open_writer(&paths.db_path())?;
    if crate::documents::memory::forget(&conn, id)? {
        println!("forgot document {id} (its text, chunks and vectors)");
        Ok(ExitCode::SUCCESS)
    } else {
        anyhow::bail!("there is no document {id} (see cowork documents list)")
    }
}

/// `cowork documents write PATH < text.md`.
pub fn write(path: &Path, replace: bool) -> anyhow::Result<ExitCode> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    if path.exists() && !replace {
        anyhow::bail!("{} exists; --replace replaces it (its earlier version goes to the trash)", path.display());
    }
    if path.exists() {
        crate::tools::undo::keep_before_change(path).map_err(anyhow::Error::msg)?;
    }
    let said = crate::documents::write::write(path, Some(&text), &[]).map_err(anyhow::Error::msg)?;
    println!("{said}");
    Ok(ExitCode::SUCCESS)
}

/// `cowork undo`: the last task's changes put back, newest first.
pub fn undo(paths: &Paths, operation: Option<i64>) -> anyhow::Result<ExitCode> {
    let conn = crate::store::open_writer(&paths.db_path())?;
    match crate::agent::store::undo_operation(&conn, operation, &paths.data_dir, crate::ids::now_millis())? {
        None => {
            eprintln!("nothing to undo: no task deleted, moved or wrote files{}", operation.map(|o| format!(" in task {o}")).unwrap_or_default());
            Ok(ExitCode::from(1))
        }
        Some((operation_id, done, failed)) => {
            for line in &done {
                println!("{line}");
            }
            for line in &failed {
                eprintln!("not undone: {line}");
            }
            eprintln!("task {operation_id}: {} put back, {} not", done.len(), failed.len());
            Ok(if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}
