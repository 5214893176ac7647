//! `cowork trigger quick-prompt|pause|talk-press|talk-release|talk-tap|show`: on Wayland no
//! app may grab keys, so the compositor binds them (`bindsym … exec cowork
//! trigger quick-prompt`) and this small local IPC carries the press to the
//! running cowork: a Unix socket in `$XDG_RUNTIME_DIR` (mode 0600 in a 0700
//! directory), one line per connection, and only a process of the same user
//! (`SO_PEERCRED`) is heard. The socket is
//! `$XDG_RUNTIME_DIR/cowork/trigger-<id>.sock`, one per data directory, so two
//! coworks with different data directories never take each other's presses;
//! `desktop::instance` hands a second cowork's request over the same socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::desktop::events::DesktopEvent;
use crate::runtime::EventSink;

const TIMEOUT: Duration = Duration::from_secs(1);
const MAX_LINE: u64 = 64;

/// What a compositor binding asks of the running cowork.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    QuickPrompt,
    Pause,
    TalkPress,
    TalkRelease,
    /// A press and its release at once: where the desktop runs a command on
    /// press only (GNOME's custom shortcuts), push-to-talk in its auto mode
    /// takes the tap as "start", the next as "stop".
    TalkTap,
    /// Show and focus the sidebar: what a second `cowork` started while one
    /// runs asks of the first (the launcher's icon clicked again).
    Show,
}

impl Trigger {
    pub const ALL: [Trigger; 6] = [Trigger::QuickPrompt, Trigger::Pause, Trigger::TalkPress, Trigger::TalkRelease, Trigger::TalkTap, Trigger::Show];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::QuickPrompt => "quick-prompt",
            Trigger::Pause => "pause",
            Trigger::TalkPress => "talk-press",
            Trigger::TalkRelease => "talk-release",
            Trigger::TalkTap => "talk-tap",
            Trigger::Show => "show",
        }
    }

    pub fn parse(text: &str) -> Option<Trigger> {
        Trigger::ALL.into_iter().find(|t| t.as_str() == text)
    }

    /// The events the hotkey would have sent.
    pub fn events(self) -> Vec<DesktopEvent> {
        match self {
            Trigger::QuickPrompt => vec![DesktopEvent::QuickPromptHotkey],
            Trigger::Pause => vec![DesktopEvent::TogglePause],
            Trigger::TalkPress => vec![DesktopEvent::VoiceHotkey { pressed: true }],
            Trigger::TalkRelease => vec![DesktopEvent::VoiceHotkey { pressed: false }],
            Trigger::TalkTap => vec![DesktopEvent::VoiceHotkey { pressed: true }, DesktopEvent::VoiceHotkey { pressed: false }],
            Trigger::Show => vec![DesktopEvent::ShowSidebar],
        }
    }

    /// The names, for an error that lists them.
    pub fn names() -> String {
        Trigger::ALL.map(Trigger::as_str).join(", ")
    }
}

/// Where the cowork of `data_dir` listens: `$XDG_RUNTIME_DIR/cowork/trigger-<id>.sock`,
/// `<id>` naming the data directory (one cowork runs per data directory, and
/// two with different ones must not take each other's presses), else the data
/// directory itself (a desktop session always has the former).
pub fn socket_path(data_dir: &Path) -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => {
            use sha2::Digest;
            let absolute = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_owned());
            let id = hex::encode(&sha2::Sha256::digest(absolute.as_os_str().as_encoded_bytes())[..8]);
            PathBuf::from(dir).join("cowork").join(format!("trigger-{id}.sock"))
        }
        None => data_dir.join("trigger.sock"),
    }
}

/// Sends `trigger` to the cowork listening at `path`; its answer.
pub fn send(path: &Path, trigger: Trigger) -> Result<String, String> {
    let mut stream = UnixStream::connect(path).map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            format!("no cowork sidebar is running for this user ({} is not there: {err})", path.display())
        }
        _ => format!("cannot reach cowork at {}: {err}", path.display()),
    })?;
    stream.set_read_timeout(Some(TIMEOUT)).and_then(|()| stream.set_write_timeout(Some(TIMEOUT))).map_err(|e| e.to_string())?;
    stream.write_all(format!("{}\n", trigger.as_str()).as_bytes()).map_err(|err| format!("cowork did not take the trigger: {err}"))?;
    let mut answer = String::new();
    BufReader::new(stream.take(MAX_LINE * 4)).read_line(&mut answer).map_err(|err| format!("cowork did not answer: {err}"))?;
    match answer.trim() {
        "ok" => Ok("ok".into()),
        "" => Err("cowork closed the connection without an answer".into()),
        other => Err(other.to_owned()),
    }
}

/// The listening side, in the sidebar's process; removes its socket when dropped.
#[derive(Debug)]
pub struct TriggerServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TriggerServer {
    /// Listens at `path`. Another cowork already listening there keeps it
    /// (an error says so); a socket left by a crashed one is replaced.
    pub fn spawn(path: PathBuf, sink: EventSink<DesktopEvent>) -> Result<TriggerServer, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|err| format!("cannot make {}: {err}", dir.display()))?;
            std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .map_err(|err| format!("cannot make {} private: {err}", dir.display()))?;
        }
        if UnixStream::connect(&path).is_ok() {
            return Err(format!("another cowork already listens for triggers at {}", path.display()));
        }
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(|err| format!("cannot listen at {}: {err}", path.display()))?;
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("trigger".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if thread_stop.load(Ordering::SeqCst) {
                        break;
                    }
                    match stream {
                        Ok(stream) => serve(stream, &sink),
                        Err(err) => tracing::warn!("trigger socket: {err}"),
                    }
                }
            })
            .map_err(|err| err.to_string())?;
        Ok(TriggerServer { path, stop, thread: Some(thread) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TriggerServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept so the thread sees the flag.
        let _ = UnixStream::connect(&self.path);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The uid of the process at the other end.
fn peer_uid(stream: &UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket and a ucred-sized buffer with its length.
    let rc = unsafe { libc::getsockopt(stream.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len) };
    (rc == 0).then_some(cred.uid)
}

fn serve(mut stream: UnixStream, sink: &EventSink<DesktopEvent>) {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let peer = peer_uid(&stream);
    if peer != Some(me) {
        tracing::warn!(?peer, "trigger socket: refused a process of another user");
        let _ = stream.write_all(b"refused: another user's process\n");
        return;
    }
    let _ = stream.set_read_timeout(Some(TIMEOUT));
    let _ = stream.set_write_timeout(Some(TIMEOUT));
    let mut line = String::new();
    let read = BufReader::new((&stream).take(MAX_LINE)).read_line(&mut line);
    let answer = match (read, Trigger::parse(line.trim())) {
        (Ok(_), Some(trigger)) => {
            tracing::info!(trigger = trigger.as_str(), "trigger from the compositor");
            for event in trigger.events() {
                sink.send(event);
            }
            "ok".to_owned()
        }
        (Ok(0), None) => return,
        (Ok(_), None) => format!("unknown trigger {:?}: one of {}", line.trim(), Trigger::names()),
        (Err(err), _) => format!("unreadable trigger: {err}"),
    };
    let _ = stream.write_all(format!("{answer}\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::AppEvent;
    use crate::desktop::events::DesktopEvent;

    #[test]
    fn a_trigger_reaches_the_sink_and_a_wrong_one_is_refused_with_the_list() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cowork").join("trigger.sock");
        let (tx, rx) = crossbeam_channel::bounded(8);
        let server = TriggerServer::spawn(path.clone(), crate::runtime::EventSink::<crate::events::AppEvent>::new(tx, || {}).narrow()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(send(&path, Trigger::QuickPrompt).unwrap(), "ok");
        assert!(matches!(rx.recv_timeout(TIMEOUT).unwrap(), AppEvent::Desktop(DesktopEvent::QuickPromptHotkey)));
        assert_eq!(send(&path, Trigger::TalkRelease).unwrap(), "ok");
        assert!(matches!(rx.recv_timeout(TIMEOUT).unwrap(), AppEvent::Desktop(DesktopEvent::VoiceHotkey { pressed: false })));
        let mut raw = UnixStream::connect(&path).unwrap();
        raw.write_all(b"rm -rf /\n").unwrap();
        let mut answer = String::new();
        BufReader::new(raw).read_line(&mut answer).unwrap();
        assert!(answer.starts_with("unknown trigger") && answer.contains("talk-release"), "{answer}");
        assert!(rx.try_recv().is_err(), "nothing reached the app");
        // A second cowork does not take the socket over.
        assert!(TriggerServer::spawn(path.clone(), EventSink::ignored()).unwrap_err().contains("another cowork"));
        drop(server);
        assert!(!path.exists(), "the socket goes with the server");
        assert!(send(&path, Trigger::Pause).unwrap_err().contains("no cowork sidebar is running"));
    }

    #[test]
    fn a_socket_left_by_a_crashed_cowork_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trigger.sock");
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let (tx, rx) = crossbeam_channel::bounded(8);
        let _server = TriggerServer::spawn(path.clone(), crate::runtime::EventSink::<crate::events::AppEvent>::new(tx, || {}).narrow()).unwrap();
        assert_eq!(send(&path, Trigger::Pause).unwrap(), "ok");
        assert!(matches!(rx.recv_timeout(TIMEOUT).unwrap(), AppEvent::Desktop(DesktopEvent::TogglePause)));
    }
}
