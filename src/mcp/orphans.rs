//! Orphaned stdio MCP servers. cowork records each server it starts in a
//! lockfile (`<data>/mcp/run/<owner pid>-<server>.lock`: the child's pid, its
//! executable and a hash of its arguments, and the cowork process that owns
//! it, by pid and start time). Several cowork processes share one data
//! directory (the sidebar, `cowork ask`, `cowork mcp test`), so a lockfile
//! whose owner still runs is left alone. After a crash the servers may live
//! on; at start, `sweep` ends a live process that matches all three (SIGTERM,
//! 3 s, then SIGKILL) and removes every other dead owner's lockfile untouched,
//! so a pid the system reused for another program is never killed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How long a server has to exit after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(3);

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    pub pid: u32,
    /// The executable, as /proc/<pid>/exe resolved it when the server started.
    pub exe: PathBuf,
    /// sha256 of the command line (program and arguments, NUL-separated).
    pub cmdline_sha256: String,
    /// The cowork process that started the server. Lockfiles written before
    /// owners were recorded have none and count as a dead owner's.
    #[serde(default)]
    pub owner: Option<Owner>,
}

/// A process named so that a reused pid does not pass for it: its pid and its
/// start time (clock ticks after boot, /proc/<pid>/stat field 22).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: u32,
    pub start_ticks: u64,
}

impl Owner {
    /// This process.
    pub fn current() -> Option<Owner> {
        let pid = std::process::id();
        Some(Owner { pid, start_ticks: start_ticks(pid)? })
    }

    /// The owner is still running (the same process, not a reuse of its pid).
    fn alive(&self) -> bool {
        start_ticks(self.pid) == Some(self.start_ticks) && alive(self.pid as libc::pid_t)
    }
}

/// /proc/<pid>/stat field 22; the fields after the command's closing
/// parenthesis start at field 3.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// What `sweep` did with one lockfile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Swept {
    /// The recorded server was still running and was ended.
    Ended { server: String, pid: u32, killed: bool },
    /// Nothing matching runs (gone, or the pid now belongs to another program): only the file went.
    Stale { server: String, pid: u32 },
    /// Another cowork that still runs owns it: untouched.
    Owned { server: String, pid: u32, owner: u32 },
    /// The lockfile could not be read; removed.
    Unreadable { server: String, why: String },
}

pub fn run_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("mcp").join("run")
}

/// Where this process keeps the lockfile of stdio server `server`.
pub fn lock_path(data_dir: &Path, server: &str) -> PathBuf {
    owned_lock_path(data_dir, server, std::process::id())
}

fn owned_lock_path(data_dir: &Path, server: &str, owner: u32) -> PathBuf {
    run_dir(data_dir).join(format!("{owner}-{server}.lock"))
}

/// The server's name in a lockfile's name (`<owner pid>-<server>`; older ones are `<server>`).
fn server_of(stem: &str) -> &str {
    match stem.split_once('-') {
        Some((owner, server)) if !owner.is_empty() && owner.bytes().all(|b| b.is_ascii_digit()) => server,
        _ => stem,
    }
}

fn cmdline_hash(cmdline: &[u8]) -> String {
    hex::encode(Sha256::digest(cmdline))
}

/// The live process `pid` as a lock would describe it (None: no such process).
fn describe(pid: u32) -> Option<Lock> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let exe = std::fs::read_link(proc_dir.join("exe")).ok()?;
    let cmdline = std::fs::read(proc_dir.join("cmdline")).ok()?;
    Some(Lock { pid, exe, cmdline_sha256: cmdline_hash(&cmdline), owner: None })
}

/// The command line as /proc/<pid>/cmdline will show it: each word NUL-terminated.
fn cmdline_of(program: &str, args: &[String]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for word in std::iter::once(program).chain(args.iter().map(String::as_str)) {
        bytes.extend_from_slice(word.as_bytes());
        bytes.push(0);
    }
    bytes
}

/// Records a server cowork just started as `program args…` with `pid`. The
/// command line is hashed from what cowork ran: read from /proc right after
/// exec it can still be empty.
pub fn record(data_dir: &Path, server: &str, pid: u32, program: &str, args: &[String]) -> anyhow::Result<()> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).with_context(|| format!("process {pid} of MCP server {server} is already gone"))?;
    let lock = Lock { pid, exe, cmdline_sha256: cmdline_hash(&cmdline_of(program, args)), owner: Owner::current() };
    std::fs::create_dir_all(run_dir(data_dir))?;
    let path = lock_path(data_dir, server);
    // Whole or absent: a sweep by another cowork never reads half a lockfile.
    let partial = path.with_extension("lock.partial");
    std::fs::write(&partial, serde_json::to_vec(&lock)?).with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, &path).with_context(|| format!("cannot write {}", path.display()))
}

/// A server cowork stopped: its lockfile goes.
pub fn forget(data_dir: &Path, server: &str) {
    let _ = std::fs::remove_file(lock_path(data_dir, server));
}

/// Ends the servers a cowork that is no longer running left behind and clears
/// their lockfiles; a running cowork's lockfiles are left alone.
pub fn sweep(data_dir: &Path) -> Vec<Swept> {
    let Ok(entries) = std::fs::read_dir(run_dir(data_dir)) else { return Vec::new() };
    let mut swept = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Some(server) = path.file_stem().map(|s| server_of(&s.to_string_lossy()).to_owned()) else { continue };
        if path.extension().is_none_or(|e| e != "lock") {
            continue;
        }
        let lock: Result<Lock, String> = std::fs::read(&path).map_err(|e| e.to_string()).and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()));
        if let Ok(Lock { pid, owner: Some(owner), .. }) = &lock
            && owner.alive()
        {
            swept.push(Swept::Owned { server, pid: *pid, owner: owner.pid });
            continue;
        }
        swept.push(match lock {
            Err(why) => Swept::Unreadable { server, why },
            Ok(lock) => match describe(lock.pid) {
                Some(live) if (&live.exe, &live.cmdline_sha256) == (&lock.exe, &lock.cmdline_sha256) => {
                    let killed = end(lock.pid);
                    tracing::info!(%server, pid = lock.pid, killed, "ended an MCP server an earlier cowork left running");
                    Swept::Ended { server, pid: lock.pid, killed }
                }
                _ => Swept::Stale { server, pid: lock.pid },
            },
        });
        let _ = std::fs::remove_file(&path);
    }
    swept
}

/// SIGTERM, then SIGKILL after the grace time; true when SIGKILL was needed.
fn end(pid: u32) -> bool {
    let pid = pid as libc::pid_t;
    // SAFETY: kill(2) with a pid that was checked to be the recorded server a moment ago.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + TERM_GRACE;
    while Instant::now() < deadline {
        if !alive(pid) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above; it did not exit on SIGTERM.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    true
}

/// Alive and not a zombie.
fn alive(pid: libc::pid_t) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()).is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn reaped(child: &mut std::process::Child) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(_)) => return true,
                Ok(None) => {}
                // Reaped by someone else in this process: it is gone all the same.
                Err(err) if err.raw_os_error() == Some(libc::ECHILD) => return true,
                Err(err) => panic!("cannot wait for {}: {err}", child.id()),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn an_orphan_is_ended_and_a_reused_pid_is_never_touched() {
        let data = tempfile::tempdir().unwrap();
        let mut orphan = Command::new("sleep").arg("300").stdout(Stdio::null()).spawn().unwrap();
        record(data.path(), "everything", orphan.id(), "sleep", &["300".to_owned()]).unwrap();
        // A lockfile whose pid now runs another command line (a reused pid): only the file goes.
        let mut bystander = Command::new("sleep").arg("301").stdout(Stdio::null()).spawn().unwrap();
        let mut lie = describe(bystander.id()).unwrap();
        lie.cmdline_sha256 = cmdline_hash(&cmdline_of("sleep", &["300".to_owned()]));
        std::fs::write(owned_lock_path(data.path(), "filesystem", 1), serde_json::to_vec(&lie).unwrap()).unwrap();
        // A server that is gone, and a broken lockfile.
        std::fs::write(owned_lock_path(data.path(), "gone", 1), serde_json::to_vec(&Lock { pid: u32::MAX - 1, exe: "/bin/x".into(), cmdline_sha256: "0".into(), owner: None }).unwrap()).unwrap();
        std::fs::write(run_dir(data.path()).join("broken.lock"), "{").unwrap();
        // The orphan's owner is gone: this process's lock, rewritten as if an
        // earlier process with a pid of its own had written it.
        let mut lock: Lock = serde_json::from_slice(&std::fs::read(lock_path(data.path(), "everything")).unwrap()).unwrap();
        assert_eq!(lock.owner, Owner::current());
        lock.owner = Some(Owner { pid: std::process::id(), start_ticks: lock.owner.unwrap().start_ticks + 1 });
        std::fs::remove_file(lock_path(data.path(), "everything")).unwrap();
        std::fs::write(owned_lock_path(data.path(), "everything", 2), serde_json::to_vec(&lock).unwrap()).unwrap();
        // A server this (running) process owns.
        let mut mine = Command::new("sleep").arg("302").stdout(Stdio::null()).spawn().unwrap();
        record(data.path(), "mine", mine.id(), "sleep", &["302".to_owned()]).unwrap();

        let mut swept = sweep(data.path());
        swept.sort_by_key(|s| format!("{s:?}"));
        // Ended, by SIGTERM (or by SIGKILL when a loaded machine let the grace time pass first).
        assert!(swept.iter().any(|s| matches!(s, Swept::Ended { server, pid, .. } if server == "everything" && *pid == orphan.id())), "{swept:?}");
        assert!(swept.contains(&Swept::Stale { server: "filesystem".into(), pid: bystander.id() }), "{swept:?}");
        assert!(swept.iter().any(|s| matches!(s, Swept::Stale { server, .. } if server == "gone")));
        assert!(swept.iter().any(|s| matches!(s, Swept::Unreadable { server, .. } if server == "broken")));
        assert!(reaped(&mut orphan), "the orphan was ended");
        assert!(matches!(bystander.try_wait(), Ok(None)), "the reused pid's process runs on: {:?}", bystander.try_wait());
        assert!(swept.contains(&Swept::Owned { server: "mine".into(), pid: mine.id(), owner: std::process::id() }), "{swept:?}");
        assert!(matches!(mine.try_wait(), Ok(None)), "a running cowork's server runs on: {:?}", mine.try_wait());
        let left: Vec<_> = std::fs::read_dir(run_dir(data.path())).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(left, vec![lock_path(data.path(), "mine")], "only the running owner's lockfile is left");
        for mut child in [bystander, mine] {
            child.kill().unwrap();
            let _ = child.wait();
        }
    }
}
