//! Orphaned stdio MCP servers. cowork records each server it starts in a
//! lockfile (`<data>/mcp/run/<server>.lock`: the child's pid, its executable
//! and a hash of its arguments). After a crash the servers may live on; at
//! start, `sweep` ends a live process that matches all three (SIGTERM, 3 s,
//! then SIGKILL) and removes every other lockfile untouched, so a pid the
//! system reused for another program is never killed.

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
}

/// What `sweep` did with one lockfile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Swept {
    /// The recorded server was still running and was ended.
    Ended { server: String, pid: u32, killed: bool },
    /// Nothing matching runs (gone, or the pid now belongs to another program): only the file went.
    Stale { server: String, pid: u32 },
    /// The lockfile could not be read; removed.
    Unreadable { server: String, why: String },
}

pub fn run_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("mcp").join("run")
}

/// Where the lockfile of stdio server `server` is.
pub fn lock_path(data_dir: &Path, server: &str) -> PathBuf {
    run_dir(data_dir).join(format!("{server}.lock"))
}

fn cmdline_hash(cmdline: &[u8]) -> String {
    hex::encode(Sha256::digest(cmdline))
}

/// The live process `pid` as a lock would describe it (None: no such process).
fn describe(pid: u32) -> Option<Lock> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let exe = std::fs::read_link(proc_dir.join("exe")).ok()?;
    let cmdline = std::fs::read(proc_dir.join("cmdline")).ok()?;
    Some(Lock { pid, exe, cmdline_sha256: cmdline_hash(&cmdline) })
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
    let lock = Lock { pid, exe, cmdline_sha256: cmdline_hash(&cmdline_of(program, args)) };
    std::fs::create_dir_all(run_dir(data_dir))?;
    let path = lock_path(data_dir, server);
    std::fs::write(&path, serde_json::to_vec(&lock)?).with_context(|| format!("cannot write {}", path.display()))
}

/// A server cowork stopped: its lockfile goes.
pub fn forget(data_dir: &Path, server: &str) {
    let _ = std::fs::remove_file(lock_path(data_dir, server));
}

/// Ends the servers an earlier cowork left running and clears every lockfile.
pub fn sweep(data_dir: &Path) -> Vec<Swept> {
    let Ok(entries) = std::fs::read_dir(run_dir(data_dir)) else { return Vec::new() };
    let mut swept = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Some(server) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else { continue };
        if path.extension().is_none_or(|e| e != "lock") {
            continue;
        }
        let lock: Result<Lock, String> = std::fs::read(&path).map_err(|e| e.to_string()).and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()));
        swept.push(match lock {
            Err(why) => Swept::Unreadable { server, why },
            Ok(lock) => match describe(lock.pid) {
                Some(live) if live == lock => {
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
            if child.try_wait().unwrap().is_some() {
                return true;
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
        std::fs::write(lock_path(data.path(), "filesystem"), serde_json::to_vec(&lie).unwrap()).unwrap();
        // A server that is gone, and a broken lockfile.
        std::fs::write(lock_path(data.path(), "gone"), serde_json::to_vec(&Lock { pid: u32::MAX - 1, exe: "/bin/x".into(), cmdline_sha256: "0".into() }).unwrap()).unwrap();
        std::fs::write(lock_path(data.path(), "broken"), "{").unwrap();

        let mut swept = sweep(data.path());
        swept.sort_by_key(|s| format!("{s:?}"));
        assert!(swept.contains(&Swept::Ended { server: "everything".into(), pid: orphan.id(), killed: false }), "{swept:?}");
        assert!(swept.contains(&Swept::Stale { server: "filesystem".into(), pid: bystander.id() }), "{swept:?}");
        assert!(swept.iter().any(|s| matches!(s, Swept::Stale { server, .. } if server == "gone")));
        assert!(swept.iter().any(|s| matches!(s, Swept::Unreadable { server, .. } if server == "broken")));
        assert!(reaped(&mut orphan), "the orphan was ended");
        assert!(bystander.try_wait().unwrap().is_none(), "the reused pid's process runs on");
        assert_eq!(std::fs::read_dir(run_dir(data.path())).unwrap().count(), 0, "every lockfile is gone");
        bystander.kill().unwrap();
        let _ = bystander.wait();
    }
}
