//! What the agent deleted, moved or replaced can be put back (issue 44):
//! `delete_path` and the documents tools move the old file to the
//! FreeDesktop trash (the `trash` crate: `~/.local/share/Trash`, or the
//! mount's `.Trash-UID`), `move_path` records where a thing went, and each
//! such change is an `UndoStep` the agent stores with its operation. The
//! chat's Undo (five minutes) and `cowork undo` put the last operation's
//! steps back, newest first.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How long the chat offers Undo after an operation changed files.
pub const UNDO_WINDOW_MS: i64 = 5 * 60 * 1000;

/// One change that can be reversed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum UndoStep {
    /// `original` went to the trash; `trash_info` is its `.trashinfo` file (the trash's own id).
    Trashed { original: PathBuf, trash_info: PathBuf },
    /// `from` was moved to `to`.
    Moved { from: PathBuf, to: PathBuf },
    /// A new file was written where nothing was: undone by trashing it.
    Created { path: PathBuf },
    /// `path` was changed or replaced; its earlier content went to the trash
    /// as `backup` (a hidden sibling), entry `trash_info`.
    Replaced { path: PathBuf, backup: PathBuf, trash_info: PathBuf },
}

impl UndoStep {
    pub fn kind(&self) -> &'static str {
        match self {
            UndoStep::Trashed { .. } => "trashed",
            UndoStep::Moved { .. } => "moved",
            UndoStep::Created { .. } => "created",
            UndoStep::Replaced { .. } => "replaced",
        }
    }

    pub fn describe(&self) -> String {
        match self {
            UndoStep::Trashed { original, .. } => format!("{} (from the trash)", original.display()),
            UndoStep::Moved { from, to } => format!("{} back from {}", from.display(), to.display()),
            UndoStep::Created { path } => format!("{} (created; moved to the trash)", path.display()),
            UndoStep::Replaced { path, .. } => format!("{} (its earlier version)", path.display()),
        }
    }
}

/// Moves `path` (a file, a folder with everything in it, or a symlink itself)
/// to the trash and returns the step that puts it back.
pub fn trash(path: &Path) -> Result<UndoStep, String> {
    let shown = path.display();
    fs::symlink_metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    let before: Vec<PathBuf> = items_for(path).into_iter().map(|i| PathBuf::from(&i.id)).collect();
    trash::delete(path).map_err(|e| format!("{shown} could not be moved to the trash: {e}"))?;
    // The trash names its entry by the original path; the newest one this call made is ours.
    let ours = items_for(path).into_iter().filter(|i| !before.contains(&PathBuf::from(&i.id))).max_by_key(|i| i.time_deleted);
    match ours {
        Some(item) => Ok(UndoStep::Trashed { original: path.to_path_buf(), trash_info: PathBuf::from(&item.id) }),
        None => Err(format!("{shown} went to the trash but its entry was not found there; look for it in the trash")),
    }
}

/// Before `path` is changed in place or replaced: its current content, copied
/// to a hidden sibling that goes to the trash, and the step that brings it back.
pub fn keep_before_change(path: &Path) -> Result<UndoStep, String> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let backup = path.with_file_name(format!(".{name}.before-cowork-{}", crate::ids::now_millis()));
    fs::copy(path, &backup).map_err(|e| format!("the earlier version of {} could not be kept: {e}", path.display()))?;
    match trash(&backup) {
        Ok(UndoStep::Trashed { trash_info, .. }) => Ok(UndoStep::Replaced { path: path.to_path_buf(), backup, trash_info }),
        Ok(_) => unreachable!("trash returns Trashed"),
        Err(err) => {
            let _ = fs::remove_file(&backup);
            Err(err)
        }
    }
}

fn items_for(path: &Path) -> Vec<trash::TrashItem> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else { return Vec::new() };
    trash::os_limited::list().unwrap_or_default().into_iter().filter(|i| i.original_parent == parent && i.name == name).collect()
}

/// Moves `from` to `to` (which must not exist), across file systems too: a
/// rename, or when the two are on different devices a copy of everything
/// (files, folders, symlinks, permissions) and then the source removed.
pub fn move_path(from: &Path, to: &Path) -> Result<UndoStep, String> {
    if to.exists() || fs::symlink_metadata(to).is_ok() {
        return Err(format!("{} already exists; delete it first or choose another name", to.display()));
    }
    match fs::rename(from, to) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            if let Err(err) = copy_all(from, to) {
                // Nothing half-copied is left behind.
                let _ = remove_all(to);
                return Err(format!("{} → {}: {err}", from.display(), to.display()));
            }
            remove_all(from).map_err(|e| format!("{} was copied to {} but could not be removed: {e}", from.display(), to.display()))?;
        }
        Err(e) => return Err(format!("{} → {}: {e}", from.display(), to.display())),
    }
    Ok(UndoStep::Moved { from: from.to_path_buf(), to: to.to_path_buf() })
}

fn copy_all(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(from)?, to)?;
    } else if meta.is_dir() {
        fs::create_dir(to)?;
        for entry in fs::read_dir(from)? {
            let entry = entry?;
            copy_all(&entry.path(), &to.join(entry.file_name()))?;
        }
        fs::set_permissions(to, meta.permissions())?;
    } else {
        fs::copy(from, to)?;
        let file = fs::File::open(to)?;
        file.sync_all()?;
    }
    Ok(())
}

fn remove_all(path: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Puts one step back. A place that is taken again is not overwritten: the step fails and says so.
pub fn undo(step: &UndoStep) -> Result<String, String> {
    match step {
        UndoStep::Trashed { original, trash_info } => {
            if fs::symlink_metadata(original).is_ok() {
                return Err(format!("{} exists again; move it away to restore the trashed one", original.display()));
            }
            let item = trash::os_limited::list()
                .map_err(|e| format!("the trash cannot be read: {e}"))?
                .into_iter()
                .find(|i| Path::new(&i.id) == trash_info)
                .ok_or_else(|| format!("{} is no longer in the trash (it was emptied or restored)", original.display()))?;
            trash::os_limited::restore_all([item]).map_err(|e| format!("{} could not be restored: {e}", original.display()))?;
            Ok(format!("restored {}", original.display()))
        }
        UndoStep::Moved { from, to } => {
            if fs::symlink_metadata(to).is_err() {
                return Err(format!("{} is no longer there to move back", to.display()));
            }
            move_path(to, from).map(|_| format!("moved {} back to {}", to.display(), from.display()))
        }
        UndoStep::Created { path } => {
            if fs::symlink_metadata(path).is_err() {
                return Ok(format!("{} is gone already", path.display()));
            }
            trash(path).map(|_| format!("moved {} (which the task created) to the trash", path.display()))
        }
        UndoStep::Replaced { path, backup, trash_info } => {
            // The newer version goes to the trash too, so nothing is lost either way.
            if fs::symlink_metadata(path).is_ok() {
                trash(path)?;
            }
            undo(&UndoStep::Trashed { original: backup.clone(), trash_info: trash_info.clone() })?;
            fs::rename(backup, path).map_err(|e| format!("{} could not be put back: {e}", path.display()))?;
            Ok(format!("put back the earlier version of {}", path.display()))
        }
    }
}

/// Undoes steps newest first; returns what was done and what failed.
pub fn undo_all(steps: &[UndoStep]) -> (Vec<String>, Vec<String>) {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for step in steps.iter().rev() {
        match undo(step) {
            Ok(text) => done.push(text),
            Err(err) => failed.push(err),
        }
    }
    (done, failed)
}
