//! The guard every shell command runs under, so that nothing a command
//! starts outlives it: not a background job, not a `setsid` or double-forked
//! daemon, and not after cowork itself is killed with SIGKILL.
//!
//! `Command::spawn` forks a child whose `pre_exec` hook never returns: that
//! child is the guard. It marks itself a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`), so every orphan among its descendants is
//! re-parented to it rather than to init, whatever session or group it moved
//! to; it asks for SIGTERM when cowork's spawning thread dies
//! (`PR_SET_PDEATHSIG`); then it forks `sh`, closes every other descriptor
//! (so `spawn` returns and the output pipes end with the command), and waits.
//! When `sh` exits, or cowork sends SIGTERM (Stop, a timeout, cowork's own
//! death), it kills its children round after round until none is left (each
//! round's orphans come back to it) and exits with `sh`'s status.
//!
//! The guard runs between `fork` and `exec` of a multi-threaded process, so it
//! only makes system calls on stack buffers prepared before the fork: no
//! allocation, no locks. A command that kills its own guard (`kill -9 $PPID`)
//! can leave its children to init; that is the one way out, and it is the
//! command's own doing.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The exit status the guard reports when `sh` could not be started.
pub const EXEC_FAILED: i32 = 127;

/// What the guard's `sh` is started with, built before the fork.
pub struct Prepared {
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

// SAFETY: the pointers point into `_strings`, owned by the same value and never changed.
unsafe impl Send for Prepared {}
unsafe impl Sync for Prepared {}

impl Prepared {
    /// `sh -c LINE` with exactly `env` as its environment.
    pub fn shell(line: &str, env: &[(String, String)]) -> Result<Prepared, String> {
        let to_c = |s: &str| CString::new(s).map_err(|_| "the command holds a NUL byte".to_owned());
        let mut strings = vec![to_c("/bin/sh")?, to_c("-c")?, to_c(line)?];
        let argc = strings.len();
        for (key, value) in env {
            strings.push(to_c(&format!("{key}={value}"))?);
        }
        let mut argv: Vec<*const libc::c_char> = strings[..argc].iter().map(|s| s.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const libc::c_char> = strings[argc..].iter().map(|s| s.as_ptr()).collect();
        envp.push(std::ptr::null());
        Ok(Prepared { _strings: strings, argv, envp })
    }
}

/// Makes `command` (any program: it is never executed) start as the guard of
/// `prepared`. The caller sets stdio, the working directory and a process group.
///
/// # Safety
/// `prepared` must outlive the `spawn` of `command`.
pub unsafe fn install(command: &mut Command, prepared: &Prepared) {
    let argv = prepared.argv.as_ptr() as usize;
    let envp = prepared.envp.as_ptr() as usize;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure only makes system calls on stack data and the prepared arrays.
    unsafe {
        command.pre_exec(move || {
            guard(argv as *const *const libc::c_char, envp as *const *const libc::c_char, parent);
        });
    }
}

/// The guard's whole life; it never returns.
fn guard(argv: *const *const libc::c_char, envp: *const *const libc::c_char, parent: libc::pid_t) -> ! {
    // SAFETY: system calls only, on values prepared before the fork.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
        let mut wanted: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut wanted);
        for signal in [libc::SIGTERM, libc::SIGCHLD, libc::SIGHUP, libc::SIGINT] {
            libc::sigaddset(&mut wanted, signal);
        }
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(libc::SIG_BLOCK, &wanted, &mut before);
        // cowork died before the death signal was asked for.
        if libc::getppid() != parent {
            libc::_exit(128 + libc::SIGTERM);
        }
        let shell = libc::fork();
        if shell == 0 {
            libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
            libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0);
            libc::execve(*argv, argv, envp);
            libc::_exit(EXEC_FAILED);
        }
        if shell < 0 {
            libc::_exit(EXEC_FAILED);
        }
        // Only stdio stays open: std's exec-status pipe closes (spawn returns).
        close_from(3);
        let mut status_code = EXEC_FAILED;
        let mut shell_done = false;
        loop {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let timeout = libc::timespec { tv_sec: 1, tv_nsec: 0 };
            let signal = libc::sigtimedwait(&wanted, &mut info, &timeout);
            // Reap whatever ended; note sh's status.
            loop {
                let mut status = 0;
                let pid = libc::waitpid(-1, &mut status, libc::WNOHANG);
                if pid <= 0 {
                    break;
                }
                if pid == shell {
                    shell_done = true;
                    status_code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
                }
            }
            let parent_gone = libc::getppid() != parent;
            if shell_done || parent_gone || matches!(signal, libc::SIGTERM | libc::SIGHUP | libc::SIGINT) {
                break;
            }
        }
        kill_children();
        if !shell_done {
            status_code = 128 + libc::SIGKILL;
        }
        libc::_exit(status_code);
    }
}

/// Closes every descriptor from `first` up.
unsafe fn close_from(first: libc::c_int) {
    // SAFETY: closing descriptors this process owns.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first as libc::c_uint, libc::c_uint::MAX, 0) != 0 {
            let mut limit: libc::rlimit = std::mem::zeroed();
            let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 { limit.rlim_cur.min(65_536) as libc::c_int } else { 4096 };
            for fd in first..top {
                libc::close(fd);
            }
        }
    }
}

/// Kills the guard's children until it has none: each killed child's own
/// children are re-parented to the guard (a subreaper) and found next round.
unsafe fn kill_children() {
    // SAFETY: system calls on stack buffers.
    unsafe {
        let me = libc::getpid();
        for _ in 0..10_000 {
            let killed = for_each_child(me, |pid| {
                libc::kill(pid, libc::SIGKILL);
            });
            // Reap the dead (and zombies), then look again.
            let mut status = 0;
            while libc::waitpid(-1, &mut status, libc::WNOHANG) > 0 {}
            if killed == 0 {
                return;
            }
            let pause = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
            libc::nanosleep(&pause, std::ptr::null_mut());
            while libc::waitpid(-1, &mut status, libc::WNOHANG) > 0 {}
        }
    }
}

/// Calls `f` with each live (not zombie) process whose parent is `parent`;
/// returns how many. Reads /proc with getdents64 into a stack buffer.
unsafe fn for_each_child(parent: libc::pid_t, mut f: impl FnMut(libc::pid_t)) -> usize {
    // SAFETY: system calls on stack buffers; lengths checked before every read.
    unsafe {
        let dir = libc::open(c"/proc".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
        if dir < 0 {
            return 0;
        }
        let mut found = 0;
        let mut buf = [0u8; 8192];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                break;
            }
            let mut at = 0usize;
            while at + 19 < n as usize {
                // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
                let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
                if reclen == 0 {
                    break;
                }
                let name = &buf[at + 19..(at + reclen).min(n as usize)];
                let len = name.iter().position(|b| *b == 0).unwrap_or(name.len());
                if let Some(pid) = parse_pid(&name[..len])
                    && let Some((ppid, state)) = stat_of(pid)
                    && ppid == parent
                    && state != b'Z'
                {
                    f(pid);
                    found += 1;
                }
                at += reclen;
            }
        }
        libc::close(dir);
        found
    }
}

fn parse_pid(name: &[u8]) -> Option<libc::pid_t> {
    if name.is_empty() || name.len() > 10 || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut pid: i64 = 0;
    for b in name {
        pid = pid * 10 + (b - b'0') as i64;
    }
    libc::pid_t::try_from(pid).ok()
}

/// The parent and state of a process, from `/proc/PID/stat`.
unsafe fn stat_of(pid: libc::pid_t) -> Option<(libc::pid_t, u8)> {
    // "/proc/" + up to 10 digits + "/stat" + NUL
    let mut path = [0u8; 32];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut digits = [0u8; 10];
    let mut n = pid as u32;
    let mut count = 0;
    loop {
        digits[count] = b'0' + (n % 10) as u8;
        count += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut at = prefix.len();
    for i in (0..count).rev() {
        path[at] = digits[i];
        at += 1;
    }
    let suffix = b"/stat";
    path[at..at + suffix.len()].copy_from_slice(suffix);
    // SAFETY: a NUL-terminated path on the stack; a read into a stack buffer.
    unsafe {
        let fd = libc::open(path.as_ptr() as *const libc::c_char, libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let mut buf = [0u8; 1024];
        let n = libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len());
        libc::close(fd);
        if n <= 0 {
            return None;
        }
        let text = &buf[..n as usize];
        // After the command name's closing parenthesis: " S PPID ...".
        let close = text.iter().rposition(|b| *b == b')')?;
        let rest = text.get(close + 2..)?;
        let state = *rest.first()?;
        let ppid_text = rest.get(2..)?;
        let end = ppid_text.iter().position(|b| *b == b' ').unwrap_or(ppid_text.len());
        Some((parse_pid(&ppid_text[..end])?, state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stat_reader_finds_parents() {
        // SAFETY: reads /proc.
        let (ppid, state) = unsafe { stat_of(std::process::id() as libc::pid_t) }.unwrap();
        assert_eq!(ppid, std::os::unix::process::parent_id() as libc::pid_t);
        assert!(state.is_ascii_uppercase());
        assert_eq!(parse_pid(b"123"), Some(123));
        assert_eq!(parse_pid(b"self"), None);
        assert_eq!(parse_pid(b""), None);
    }
}
