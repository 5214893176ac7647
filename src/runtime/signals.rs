//! Graceful shutdown on SIGTERM and SIGINT for the sidebar. The handler only
//! writes the signal number to a pipe (async-signal-safe); a named thread
//! (`signals`) reads it and sends `ShutdownRequested`, the UI closes, and
//! `Workers::shutdown` stops the workers that write (capture, the agent, llm,
//! …) before the store, so nothing queued is lost. A handler rather than a
//! blocked mask plus `sigwait`: OpenBLAS starts threads before `main`, and a
//! mask set later would not cover them.

use std::sync::atomic::{AtomicI32, Ordering};

use crate::runtime::{EventSink, RuntimeEvent};

static PIPE_WRITE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = PIPE_WRITE_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = signal as u8;
        // SAFETY: write(2) is async-signal-safe; one byte from a local.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Installs the handlers and starts the `signals` thread: the first signal asks
/// the UI to close; a second one (the UI did not manage) exits at once.
pub fn spawn_signal_thread(sink: EventSink<RuntimeEvent>) -> std::io::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills the two descriptors we pass.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let [read_fd, write_fd] = fds;
    PIPE_WRITE_FD.store(write_fd, Ordering::Relaxed);
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed sigaction with our handler and an empty mask is valid.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        let mut received = 0;
        loop {
            let mut byte = 0u8;
            // SAFETY: reading one byte into a local from our own pipe.
            let read = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
            if read == 1 {
                received += 1;
                if received > 1 {
                    std::process::exit(128 + i32::from(byte));
                }
                tracing::info!(signal = byte, "shutting down on signal");
                sink.send(RuntimeEvent::ShutdownRequested);
            } else if read < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            } else {
                return;
            }
        }
    })?;
    Ok(())
}
