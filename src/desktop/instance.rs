//! One cowork per data directory. The sidebar (and `cowork capture run`)
//! holds an exclusive `flock` on `<data dir>/cowork.lock` for as long as it
//! runs; a second `cowork` started meanwhile (the launcher's icon clicked
//! again, the desktop entry's "Quick prompt" action, a login autostart after
//! a manual start) does not start a second capture: it hands its request to
//! the running one over the trigger socket and exits. The lock goes with the
//! process however it ends (the kernel drops it), so a crash leaves nothing
//! to clean up; the file holds the holder's pid and kind, for messages only.
//! A sidebar started while `cowork capture run` holds the lock (no window to
//! show) is told to stop that first. `Paths::resolve` canonicalises the data
//! directory, so the lock, the socket's name and the key's name in the secret
//! store agree however the path was spelled.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::desktop::trigger::{Trigger, send, socket_path};

/// Held by the running cowork; the lock is released when it is dropped.
#[derive(Debug)]
pub struct InstanceLock(#[allow(dead_code)] File);

impl Claim {
    /// Who holds the data directory, for a message: "pid 4242", or "another process".
    pub fn holder(pid: Option<u32>) -> String {
        pid.map_or_else(|| "another process".to_owned(), |pid| format!("pid {pid}"))
    }
}

/// What `claim` found.
#[derive(Debug)]
pub enum Claim {
    /// This process is the one: keep the lock while it runs.
    First(InstanceLock),
    /// Another cowork holds the data directory: its pid and what it is
    /// (`sidebar`, `capture`), as it wrote them.
    Running { pid: Option<u32>, kind: Option<String> },
}

pub fn lock_path(data_dir: &Path) -> PathBuf {
    data_dir.join("cowork.lock")
}

/// Takes the data directory's instance lock for a cowork of `kind`, or says
/// who holds it. Never waits.
pub fn claim(data_dir: &Path, kind: &str) -> std::io::Result<Claim> {
    std::fs::create_dir_all(data_dir)?;
    let path = lock_path(data_dir);
    let mut file = std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path)?;
    // SAFETY: flock on a descriptor this function owns; released when the file closes.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(err);
        }
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let mut words = text.split_whitespace();
        return Ok(Claim::Running { pid: words.next().and_then(|p| p.parse().ok()), kind: words.next().map(str::to_owned) });
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{} {kind}", std::process::id())?;
    Ok(Claim::First(InstanceLock(file)))
}

/// Hands `trigger` to the cowork running for `data_dir`. A cowork that has
/// just started may not listen yet: tried again for up to `patience`.
pub fn hand_over(data_dir: &Path, trigger: Trigger, patience: Duration) -> Result<(), String> {
    let socket = socket_path(data_dir);
    let started = Instant::now();
    loop {
        match send(&socket, trigger) {
            Ok(_) => return Ok(()),
            Err(err) if started.elapsed() >= patience => return Err(err),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_claim_names_the_first_and_the_lock_goes_with_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let Claim::First(lock) = claim(dir.path(), "sidebar").unwrap() else { panic!("the first claim is the first") };
        match claim(dir.path(), "sidebar").unwrap() {
            Claim::Running { pid, kind } => assert_eq!((pid, kind.as_deref()), (Some(std::process::id()), Some("sidebar"))),
            Claim::First(_) => panic!("two instances of one data directory"),
        }
        // Another data directory is another instance.
        let other = tempfile::tempdir().unwrap();
        assert!(matches!(claim(other.path(), "capture").unwrap(), Claim::First(_)));
        drop(lock);
        assert!(matches!(claim(dir.path(), "sidebar").unwrap(), Claim::First(_)), "released when dropped");
    }
}
