//! `cowork documents …`, `cowork undo` and `cowork ocr`.

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

/// `cowork ocr`: the text of picture files, or of a window (on X11 by id or
/// the focused one; on Wayland the focused one) after the user's privacy rules allowed it.
pub fn ocr(paths: &Paths, files: &[std::path::PathBuf], window: Option<u32>, focused: bool, save: Option<&Path>, json: bool, accessible: bool) -> anyhow::Result<ExitCode> {
    if files.is_empty() && window.is_none() && !focused {
        anyhow::bail!("name picture files, or --window ID or --focused");
    }
    if accessible {
        // The window's accessibility tree, as the screen-text stream reads it (no OCR).
        let rules = crate::workers::read_settings(paths).0.rules();
        let minute = crate::ids::local_minute_of_day(crate::ids::now_millis());
        let (described, tree, took) = crate::capture::screen::read_x11_window_tree(None, window, &rules, minute).map_err(|e| anyhow::anyhow!("{e}"))?;
        let what = format!("window {} ({} — {}), accessibility tree of {} nodes{}", described.window_id, described.app, described.title, tree.nodes, if tree.complete { "" } else { ", cut at its bounds" });
        if json {
            println!("{}", serde_json::json!({"source": what, "text": tree.text, "confidence": 100, "method": "accessibility", "millis": {"tree": took.as_millis() as u64}}));
        } else {
            println!("== {what}\n{}", tree.text);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut ocr = crate::ocr::Ocr::for_user().map_err(|e| anyhow::anyhow!("{e}"))?;
    let print = |what: &str, text: &str, confidence: u8, millis: serde_json::Value| {
        if json {
            println!("{}", serde_json::json!({"source": what, "text": text, "confidence": confidence, "millis": millis}));
        } else {
            println!("== {what} ({confidence} % confidence)\n{text}");
        }
    };
    for file in files {
        let data = std::fs::read(file).with_context(|| file.display().to_string())?;
        let started = std::time::Instant::now();
        let read = ocr.read_encoded(&data).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        print(&file.display().to_string(), &read.text, read.confidence, serde_json::json!({"ocr": read.took.as_millis() as u64, "whole": started.elapsed().as_millis() as u64}));
    }
    if window.is_some() || focused {
        let rules = crate::workers::read_settings(paths).0.rules();
        let minute = crate::ids::local_minute_of_day(crate::ids::now_millis());
        if std::env::var_os("WAYLAND_DISPLAY").is_some() {
            // Wayland: the focused window, through what this desktop lends (the screenshot tool's way).
            let shot = window.map_or(crate::tools::desktop::Shot::Focused, crate::tools::desktop::Shot::Window);
            let started = std::time::Instant::now();
            let taken = crate::tools::desktop::screenshot(shot, None, &rules, minute).map_err(|e| anyhow::anyhow!("{e}"))?;
            let capture = started.elapsed();
            let picture = crate::media::decode(&taken.image.data).map_err(|e| anyhow::anyhow!("{e}"))?;
            if let Some(save) = save {
                picture.save_with_format(save, image::ImageFormat::Png).with_context(|| save.display().to_string())?;
            }
            let read = ocr.read(&picture, crate::ocr::Source::Screen).map_err(|e| anyhow::anyhow!("{e}"))?;
            let what = format!("{}, {} × {} pixels", taken.of, picture.width(), picture.height());
            print(&what, &read.text, read.confidence, serde_json::json!({"capture": capture.as_millis() as u64, "ocr": read.took.as_millis() as u64}));
            return Ok(ExitCode::SUCCESS);
        }
        let read = crate::capture::screen::read_x11_window(None, window, &rules, minute, &mut ocr).map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Some(save) = save {
            read.picture.save_with_format(save, image::ImageFormat::Png).with_context(|| save.display().to_string())?;
        }
        let what = format!("window {} ({} — {}), {} × {} pixels", read.window.window_id, read.window.app, read.window.title, read.picture.width(), read.picture.height());
        print(&what, &read.text, read.confidence, serde_json::json!({"capture": read.capture.as_millis() as u64, "ocr": read.ocr.as_millis() as u64}));
    }
    Ok(ExitCode::SUCCESS)
}
