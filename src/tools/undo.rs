//! What the agent deleted, moved or replaced can be put back (issue 44):
//! `delete_path` and the documents tools move the old file to the
//! FreeDesktop trash (the `trash` crate: `~/.local/share/Trash`, or the
//! mount's `.Trash-UID`), `move_path` records where a thing went, and each
//! such change is an `UndoStep` the agent stores with its operation. The
//! chat's Undo (five minutes) and `cowork undo` put the last operation's
//! steps back, newest first.
//!
//! Putting back is checked when it happens, not only when the task ran: the
//! folder a thing goes back into must still be where it was (no folder on
//! the way replaced by a symlink since; the last step is made through
//! folders opened without following links, and never replaces what is
//! there), a trash entry must still say it came from where the task
//! recorded (an edited `.trashinfo` is refused), and nothing goes into, or
//! comes out of, cowork's own data (`own_data`).

use std::ffi::CString;
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::own_data::{OwnData, resolve_existing};

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
    check_trash_folders(path)?;
    let before: Vec<PathBuf> = items_for(path).into_iter().map(|i| PathBuf::from(&i.id)).collect();
    trash::delete(path).map_err(|e| format!("{shown} could not be moved to the trash: {e}"))?;
    // The trash names its entry by the original path; the newest one this call made is ours.
    let ours = items_for(path).into_iter().filter(|i| !before.contains(&PathBuf::from(&i.id))).max_by_key(|i| i.time_deleted);
    match ours {
        Some(item) => Ok(UndoStep::Trashed { original: path.to_path_buf(), trash_info: PathBuf::from(&item.id) }),
        None => Err(format!("{shown} went to the trash but its entry was not found there; look for it in the trash")),
    }
}

/// The trash folders `path` may go into must be real folders: a link among
/// them (a `.Trash-1000/files` on a USB stick that leads into cowork's data,
/// a home trash replaced by a link) would have the trash move or copy the
/// file wherever the link points. Checked before anything goes there.
fn check_trash_folders(path: &Path) -> Result<(), String> {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let data_home = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()).map(PathBuf::from).or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")));
    let mut folders: Vec<PathBuf> = Vec::new();
    if let Some(home_trash) = data_home.map(|d| d.join("Trash")) {
        folders.extend([home_trash.join("files"), home_trash.join("info"), home_trash]);
    }
    if let Some(top) = mount_top(path) {
        for trash in [top.join(".Trash").join(uid.to_string()), top.join(format!(".Trash-{uid}"))] {
            folders.extend([trash.join("files"), trash.join("info"), trash]);
        }
        folders.push(top.join(".Trash"));
    }
    match folders.iter().find(|f| fs::symlink_metadata(f).is_ok_and(|m| m.file_type().is_symlink())) {
        Some(link) => Err(format!("{} is a link, not a trash folder: nothing was moved to the trash (it would have followed the link); remove the link", link.display())),
        None => Ok(()),
    }
}

/// The top of the mount `path` is on: the highest folder above it on the same device.
fn mount_top(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut top = path.parent()?.to_path_buf();
    let device = fs::metadata(&top).ok()?.dev();
    while let Some(up) = top.parent() {
        if fs::metadata(up).ok()?.dev() != device {
            break;
        }
        top = up.to_path_buf();
    }
    Some(top)
}

/// Before `path` is changed in place or replaced: its current content, copied
/// to a hidden sibling that goes to the trash, and the step that brings it back.
/// The sibling is a new file of a name nobody could have planted (random,
/// created with `O_EXCL | O_NOFOLLOW`), so a link waiting there is never written through.
pub fn keep_before_change(path: &Path) -> Result<UndoStep, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let kept = |e: std::io::Error| format!("the earlier version of {} could not be kept: {e}", path.display());
    let random = {
        use aes_gcm::aead::{OsRng, rand_core::RngCore};
        OsRng.next_u32()
    };
    let backup = path.with_file_name(format!(".{name}.before-cowork-{}-{random:08x}", crate::ids::now_millis()));
    let mut source = fs::File::open(path).map_err(kept)?;
    let mode = source.metadata().map_err(kept)?.permissions();
    let mut copy = fs::OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_NOFOLLOW).open(&backup).map_err(kept)?;
    let copied = std::io::copy(&mut source, &mut copy).and_then(|_| copy.set_permissions(mode)).and_then(|()| copy.sync_all());
    if let Err(err) = copied {
        let _ = fs::remove_file(&backup);
        return Err(kept(err));
    }
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

/// Puts one step back. A place that is taken again is not overwritten: the
/// step fails and says so, as it does when the place is no longer where the
/// task left it or is cowork's own data.
pub fn undo(step: &UndoStep, own: &OwnData<'_>) -> Result<String, String> {
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
            restore(&item, original, own)?;
            Ok(format!("restored {}", original.display()))
        }
        UndoStep::Moved { from, to } => {
            if fs::symlink_metadata(to).is_err() {
                return Err(format!("{} is no longer there to move back", to.display()));
            }
            check_place(to, own)?;
            check_place(from, own)?;
            match rename_within(to, from) {
                Ok(()) => {}
                // Moved across file systems: copied back, as it was copied there.
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                    move_path(to, from)?;
                }
                Err(e) => return Err(format!("{} could not be moved back to {}: {e}", to.display(), from.display())),
            }
            Ok(format!("moved {} back to {}", to.display(), from.display()))
        }
        UndoStep::Created { path } => {
            if fs::symlink_metadata(path).is_err() {
                return Ok(format!("{} is gone already", path.display()));
            }
            check_place(path, own)?;
            trash(path).map(|_| format!("moved {} (which the task created) to the trash", path.display()))
        }
        UndoStep::Replaced { path, backup, trash_info } => {
            check_place(path, own)?;
            check_place(backup, own)?;
            // The newer version goes to the trash too, so nothing is lost either way.
            if fs::symlink_metadata(path).is_ok() {
                trash(path)?;
            }
            undo(&UndoStep::Trashed { original: backup.clone(), trash_info: trash_info.clone() }, own)?;
            rename_within(backup, path).map_err(|e| format!("{} could not be put back: {e}", path.display()))?;
            Ok(format!("put back the earlier version of {}", path.display()))
        }
    }
}

/// Whether something may be put back at (or taken from) `path`: the folder
/// it is in still resolves to itself (recorded paths are resolved, so a
/// difference is a folder on the way replaced by a symlink since), and
/// neither it nor where it leads is cowork's own data.
fn check_place(path: &Path, own: &OwnData<'_>) -> Result<(), String> {
    let parent = path.parent().ok_or_else(|| format!("{} has no folder to go back into", path.display()))?;
    let resolved = resolve_existing(parent);
    if resolved != super::command::normalise(parent) {
        return Err(format!("{}: the folder it goes back into is not where it was ({} now leads to {}); nothing was changed", path.display(), parent.display(), resolved.display()));
    }
    if own.inside(path) || path.file_name().is_some_and(|name| own.inside(&resolved.join(name))) {
        return Err(format!("{}: that is cowork's own data, which Undo never writes; nothing was changed", path.display()));
    }
    Ok(())
}

/// Restores a trash entry to `expected`, the path the task recorded: refused
/// when the entry now says another place (its `.trashinfo` was edited), when
/// the place is not where it was or is cowork's data; never over something.
fn restore(item: &trash::TrashItem, expected: &Path, own: &OwnData<'_>) -> Result<(), String> {
    let said = item.original_parent.join(&item.name);
    if said != expected {
        return Err(format!("the trash entry of {} now says it came from {}; it was not restored (look for it in the trash)", expected.display(), said.display()));
    }
    let info = Path::new(&item.id);
    let (Some(info_dir), Some(stem)) = (info.parent(), info.file_stem()) else { return Err(format!("{} has an unusual trash entry; restore it from the trash", expected.display())) };
    let trash_dir = info_dir.parent().map(resolve_existing).ok_or_else(|| format!("{} has an unusual trash entry; restore it from the trash", expected.display()))?;
    let file = trash_dir.join("files").join(stem);
    if own.inside(&file) {
        return Err(format!("the trash entry of {} leads into cowork's own data; it was not restored", expected.display()));
    }
    check_place(expected, own)?;
    if let Some(parent) = expected.parent()
        && fs::symlink_metadata(parent).is_err()
    {
        fs::create_dir_all(parent).map_err(|e| format!("{} could not be made again: {e}", parent.display()))?;
        check_place(expected, own)?;
    }
    rename_within(&file, expected).map_err(|e| format!("{} could not be restored: {e}", expected.display()))?;
    fs::remove_file(info).map_err(|e| format!("{} was restored but its trash entry {} could not be removed: {e}", expected.display(), info.display()))?;
    Ok(())
}

/// A folder opened one component at a time, none of them followed if it is
/// a symlink (`O_NOFOLLOW`): a folder swapped for a link after it was checked
/// makes the kernel refuse, rather than lead somewhere else.
fn open_folder_nofollow(dir: &Path) -> std::io::Result<OwnedFd> {
    let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{} is not an absolute, plain path", dir.display()));
    let root = CString::new("/").map_err(|_| invalid())?;
    // SAFETY: a valid C string; the descriptor is owned below.
    let fd = unsafe { libc::open(root.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let mut current = unsafe { OwnedFd::from_raw_fd(fd) };
    for component in dir.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => {
                let name = CString::new(name.as_bytes()).map_err(|_| invalid())?;
                // SAFETY: a valid descriptor and C string; the new descriptor is owned below.
                let next = unsafe { libc::openat(current.as_raw_fd(), name.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
                if next < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // SAFETY: as above.
                current = unsafe { OwnedFd::from_raw_fd(next) };
            }
            _ => return Err(invalid()),
        }
    }
    Ok(current)
}

/// Renames `from` to `to` through their folders opened without following
/// links, never replacing what is at `to` (`RENAME_NOREPLACE`).
fn rename_within(from: &Path, to: &Path) -> std::io::Result<()> {
    let split = |path: &Path| -> std::io::Result<(OwnedFd, CString)> {
        let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{} has no name", path.display()));
        let (parent, name) = (path.parent().ok_or_else(invalid)?, path.file_name().ok_or_else(invalid)?);
        Ok((open_folder_nofollow(parent)?, CString::new(name.as_bytes()).map_err(|_| invalid())?))
    };
    let (from_dir, from_name) = split(from)?;
    let (to_dir, to_name) = split(to)?;
    // SAFETY: valid descriptors and C strings for the duration of the call.
    let done = unsafe { libc::renameat2(from_dir.as_raw_fd(), from_name.as_ptr(), to_dir.as_raw_fd(), to_name.as_ptr(), libc::RENAME_NOREPLACE) };
    if done == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Undoes steps newest first; returns what was done and what failed.
pub fn undo_all(steps: &[UndoStep], own: &OwnData<'_>) -> (Vec<String>, Vec<String>) {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for step in steps.iter().rev() {
        match undo(step, own) {
            Ok(text) => done.push(text),
            Err(err) => failed.push(err),
        }
    }
    (done, failed)
}
