//! `cowork forget-everything` and Settings → Your data → Forget everything:
//! removes what cowork keeps for one data directory — the directory itself
//! (the encrypted database, vector indexes, models, apps, kept audio, the
//! secret file), its database key and cowork's other secrets in the system
//! secret store, and the login autostart entry — after the user confirmed a
//! list that names each of them with its size. Removing the package never
//! does this (a package manager leaves home folders alone).
//!
//! It refuses a folder that is not cowork's alone (the root, the home folder
//! or one holding it, a folder with files but none of cowork's), and moves
//! the data directory aside in one rename before removing it, so a cowork
//! started meanwhile gets a new, empty one; the caller holds the instance
//! lock. Sizes are counted without following links; cowork's other secrets
//! stay when another data directory's key shares the store.

use std::path::{Path, PathBuf};

use crate::config::Paths;

/// What forgetting would remove, as shown before the user confirms.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    pub data_dir: PathBuf,
    /// Bytes and files under the data directory (0 when it is not there).
    pub bytes: u64,
    pub files: u64,
    /// cowork's items in the system secret store that go (names, never values).
    pub secrets: Vec<String>,
    /// Secrets kept because another data directory's database key shares the store.
    pub shared_kept: usize,
    /// The secret store could not be read: said, and the rest still goes.
    pub secret_store: Option<String>,
    pub autostart: Option<PathBuf>,
    /// Why the data directory may not be removed (`removable`); then nothing is.
    pub refusal: Option<String>,
}

impl Inventory {
    /// The confirmation's text: every thing that goes, one per line.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = vec![if self.files == 0 {
            format!("{} (not there)", self.data_dir.display())
        } else {
            format!(
                "{}: {} files, {} (the encrypted history, chats, memory, models, apps and settings)",
                self.data_dir.display(),
                self.files,
                crate::media::human_bytes(self.bytes)
            )
        }];
        if !self.secrets.is_empty() {
            lines.push(format!("from the system secret store: {}", self.secrets.join(", ")));
        }
        if self.shared_kept > 0 {
            let secrets = if self.shared_kept == 1 { "secret" } else { "secrets" };
            lines.push(format!("kept: {} {secrets} another cowork data directory shares", self.shared_kept));
        }
        if let Some(problem) = &self.secret_store {
            lines.push(format!("the system secret store could not be read ({problem}): anything of cowork's in it stays"));
        }
        if let Some(entry) = &self.autostart {
            lines.push(format!("starting at login ({})", entry.display()));
        }
        lines
    }
}

/// Sizes a tree without following links (a link's target is not ours to count or remove).
fn tree_size(dir: &Path) -> (u64, u64) {
    let mut total = (0, 0);
    let Ok(entries) = std::fs::read_dir(dir) else { return total };
    for entry in entries.flatten() {
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        if meta.is_dir() {
            let (bytes, files) = tree_size(&entry.path());
            total = (total.0 + bytes, total.1 + files);
        } else {
            total = (total.0 + meta.len(), total.1 + 1);
        }
    }
    total
}

/// The secret store's items for `data_dir`: its database key, and cowork's
/// other secrets unless another data directory's key is there too (they share them).
fn secrets_to_forget(data_dir: &Path) -> Result<(Vec<String>, usize), String> {
    let service = crate::secrets::SecretService::connect().map_err(|err| format!("{err:#}"))?;
    let names = service.names().map_err(|err| format!("{err:#}"))?;
    let own_key = crate::store::key::service_secret(data_dir);
    let other_keys = names.iter().any(|name| name.starts_with("database-key:") && *name != own_key);
    let (gone, kept): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|name| *name == own_key || (!other_keys && !name.starts_with("database-key:")));
    Ok((gone, kept.iter().filter(|name| !name.starts_with("database-key:")).count()))
}

pub fn inventory(paths: &Paths) -> Inventory {
    let (bytes, files) = tree_size(&paths.data_dir);
    let (secrets, shared_kept, secret_store) = match secrets_to_forget(&paths.data_dir) {
        Ok((gone, kept)) => (gone, kept, None),
        // No secret store at all: nothing of cowork's is in one.
        Err(err) if err.contains("no D-Bus session bus") || err.contains("no Secret Service is running") => (Vec::new(), 0, None),
        Err(err) => (Vec::new(), 0, Some(err)),
    };
    // Only an entry that starts this data directory's cowork: another one's login start stays.
    let autostart = crate::desktop::autostart::entry_path().filter(|path| crate::desktop::autostart::targets(path, paths.data_dir_if_not_default()));
    let refusal = removable(&paths.data_dir).err();
    Inventory { data_dir: paths.data_dir.clone(), bytes, files, secrets, shared_kept, secret_store, autostart, refusal }
}

/// Whether `dir` may be removed whole: never the filesystem's root, the home
/// folder or a folder that holds it, and never a folder with files in it but
/// none of cowork's (a `--data-dir` pointed at the wrong place must not cost
/// the user that place).
pub fn removable(dir: &Path) -> Result<(), String> {
    let Ok(real) = dir.canonicalize() else { return Ok(()) };
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from).and_then(|h| h.canonicalize().ok());
    if real.parent().is_none() || home.is_some_and(|home| home.starts_with(&real)) {
        return Err(format!("{} is not a folder of cowork's alone (it is the root or holds your home folder): nothing was removed", dir.display()));
    }
    let empty = std::fs::read_dir(&real).map(|mut entries| entries.next().is_none()).unwrap_or(true);
    let ours = [crate::store::DB_FILE_NAME, "cowork.lock", crate::secrets::SecretFile::KEY].iter().any(|name| real.join(name).symlink_metadata().is_ok());
    if !empty && !ours {
        return Err(format!("{} holds no cowork.db: it does not look like cowork's data directory, so nothing was removed", dir.display()));
    }
    Ok(())
}

/// Removes what `inventory` listed. The caller made sure no cowork runs on
/// this data directory (it holds the instance lock). Says what went.
pub fn forget(paths: &Paths, inventory: &Inventory) -> anyhow::Result<String> {
    removable(&paths.data_dir).map_err(|reason| anyhow::anyhow!(reason))?;
    let mut done = Vec::new();
    if !inventory.secrets.is_empty() {
        let service = crate::secrets::SecretService::connect()?;
        for name in &inventory.secrets {
            service.delete(name)?;
        }
        done.push(format!("{} secrets from the system secret store", inventory.secrets.len()));
    }
    if let Some(entry) = &inventory.autostart {
        crate::desktop::autostart::remove_at(entry).map_err(|err| anyhow::anyhow!(err))?;
        done.push("the login autostart entry".to_owned());
    }
    // Moved aside first, in one step, while the caller holds the instance lock: a cowork
    // started meanwhile (a login autostart) makes a new, empty folder instead of writing
    // into one being removed, and the removal itself may take as long as it takes.
    let dir = &paths.data_dir;
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let aside = dir.with_file_name(format!(".{name}.forgotten-{}", std::process::id()));
    let doomed = std::fs::rename(dir, &aside).map(|()| aside).unwrap_or_else(|_| dir.clone());
    match std::fs::remove_dir_all(&doomed) {
        Ok(()) => done.push(format!("{} ({})", dir.display(), crate::media::human_bytes(inventory.bytes))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => anyhow::bail!("cannot remove {}: {err} (removed so far: {})", doomed.display(), done.join(", ")),
    }
    crate::store::key::forget(&paths.db_path());
    Ok(if done.is_empty() { "there was nothing to forget".to_owned() } else { format!("forgot {}", done.join(", ")) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inventory_counts_the_tree_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(data.join("models/x")).unwrap();
        std::fs::write(data.join("cowork.db"), vec![0u8; 3000]).unwrap();
        std::fs::write(data.join("models/x/m.gguf"), vec![0u8; 5000]).unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("big"), vec![0u8; 100_000]).unwrap();
        std::os::unix::fs::symlink(&outside, data.join("link")).unwrap();
        assert_eq!(tree_size(&data), (8000 + std::fs::symlink_metadata(data.join("link")).unwrap().len(), 3));
        let paths = Paths { data_dir: data.clone(), models_dir: data.join("models") };
        let inventory = Inventory { data_dir: data.clone(), bytes: 8000, files: 3, ..Default::default() };
        assert!(inventory.describe()[0].contains("3 files"), "{:?}", inventory.describe());
        forget(&paths, &inventory).unwrap();
        assert!(!data.exists());
        assert!(outside.join("big").exists(), "a link's target is not removed");
    }

    #[test]
    fn a_folder_that_is_not_cowork_s_is_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        // A --data-dir pointed at someone's documents.
        let documents = dir.path().join("Documents");
        std::fs::create_dir(&documents).unwrap();
        std::fs::write(documents.join("thesis.odt"), b"years of work").unwrap();
        let paths = Paths { data_dir: documents.clone(), models_dir: documents.join("models") };
        let err = forget(&paths, &Inventory { data_dir: documents.clone(), ..Default::default() }).unwrap_err().to_string();
        assert!(err.contains("does not look like cowork's data directory") && documents.join("thesis.odt").exists(), "{err}");
        assert!(removable(Path::new("/")).unwrap_err().contains("root"));
        if let Some(home) = std::env::var_os("HOME") {
            assert!(removable(Path::new(&home)).is_err(), "the home folder itself");
        }
        // An empty folder, or one cowork made, may go.
        assert!(removable(&dir.path().join("missing")).is_ok());
        let fresh = dir.path().join("fresh");
        std::fs::create_dir(&fresh).unwrap();
        assert!(removable(&fresh).is_ok());
        std::fs::write(documents.join("cowork.lock"), b"1").unwrap();
        assert!(removable(&documents).is_ok());
    }
}
