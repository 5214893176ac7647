//! The clipboard stream: the `clipboard` worker watches X11 CLIPBOARD ownership
//! (XFixes selection events on its own X connection) or, on wlroots compositors
//! (and KWin's data-control), the data-control selection on its own Wayland
//! connection, and hears copy shortcuts from the keys worker over a bounded(8)
//! channel; each time it reads the clipboard text (arboard). On GNOME cowork's
//! Shell extension pushes the text itself (`ClipboardSource::Gnome`). It caps
//! the text's size, drops a repeat of the previous text (`ClipFilter`), and
//! records it with the source app; a window the firewall excluded (capture says
//! which window with `ClipboardCommand::Window`) records nothing.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded};
use x11rb::connection::Connection;
use x11rb::protocol::Event;
use x11rb::protocol::xfixes::{ConnectionExt as _, SelectionEventMask};
use x11rb::protocol::xproto::ConnectionExt as _;
use x11rb::rust_connection::RustConnection;

use crate::capture::events::CaptureEvent;
use crate::capture::health::StreamStats;
use crate::ids::{next_id, now_millis};
use crate::records::{ActiveWindow, ClipTrigger, ClipboardEvent};
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, WorkerState, spawn_supervised};
use crate::store::StoreCommand;

/// Longest clipboard text kept; longer text is cut and marked truncated.
pub const MAX_CLIP_BYTES: usize = 64 * 1024;
/// A copy shortcut is followed by the app taking the selection; give it a moment.
const SHORTCUT_SETTLE: Duration = Duration::from_millis(150);
const WAKE: Duration = Duration::from_millis(500);

/// Pure dedup-and-cap logic: what to record for a clipboard reading.
#[derive(Default)]
pub struct ClipFilter {
    last_text: Option<String>,
}

impl ClipFilter {
    pub fn accept(
        &mut self,
        text: &str,
        window: Option<&ActiveWindow>,
        trigger: ClipTrigger,
        at_millis: i64,
    ) -> Option<ClipboardEvent> {
        if text.trim().is_empty() || self.last_text.as_deref() == Some(text) {
            return None;
        }
        self.last_text = Some(text.to_owned());
        // No focused window, or one the firewall excluded: nothing is recorded.
        let window = window?;
        let mut cut = text.len().min(MAX_CLIP_BYTES);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        Some(ClipboardEvent {
            clip_id: next_id(),
            app: window.app.clone(),
            title: window.title.clone(),
            pid: window.pid,
            at_millis,
            text: text[..cut].to_owned(),
            truncated: cut < text.len(),
            trigger,
        })
    }
}

#[derive(Debug)]
pub enum ClipboardCommand {
    /// The focused window capture allowed (None: nothing, or excluded).
    Window(Option<ActiveWindow>),
    /// Switch the clipboard stream on or off.
    SetRecording(bool),
    InjectPanic,
    Shutdown,
}

/// Where clipboard changes are heard (the text is read through arboard either way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClipboardSource {
    /// XFixes selection events on the X display.
    X11,
    /// Data-control selection events on a wlroots compositor.
    Wayland(crate::desktop::session::WaylandTarget),
    /// GNOME: cowork's Shell extension pushes the text (asked only while recording).
    Gnome,
    /// Not watched, and why (capture watches another display than arboard's
    /// `$DISPLAY`; a desktop that offers no clipboard watching).
    Off(String),
}

/// A live watch on clipboard ownership.
enum Watch {
    X11(Box<RustConnection>),
    Wayland(crate::desktop::wlr::SelectionWatch),
    Gnome(crate::desktop::gnome::ClipboardWatch),
}

impl Watch {
    /// Waits up to `timeout`; true when something new was copied.
    fn wait(&mut self, timeout: Duration) -> anyhow::Result<bool> {
        match self {
            Watch::X11(conn) => {
                let drain = |conn: &RustConnection| -> anyhow::Result<bool> {
                    let mut changed = false;
                    while let Some(event) = conn.poll_for_event()? {
                        changed |= matches!(event, Event::XfixesSelectionNotify(_));
                    }
                    Ok(changed)
                };
                if drain(conn)? {
                    return Ok(true);
                }
                let mut poll_fd = libc::pollfd { fd: conn.stream().as_raw_fd(), events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd for the duration of the call.
                unsafe { libc::poll(&mut poll_fd, 1, timeout.as_millis() as i32) };
                drain(conn)
            }
            Watch::Wayland(watch) => watch.wait_for_change(timeout).map_err(|err| anyhow::anyhow!(err)),
            Watch::Gnome(watch) => Ok(watch.wait_for_change(timeout)),
        }
    }
}

pub struct ClipboardWorker {
    display: Option<String>,
    source: ClipboardSource,
    recording: bool,
    store: Sender<StoreCommand>,
    copy_signals: Receiver<()>,
    window: Option<ActiveWindow>,
    filter: ClipFilter,
    stats: StreamStats,
    sink: EventSink<CaptureEvent>,
}

impl ClipboardWorker {
    /// Applies the commands waiting; false on Shutdown.
    fn take_commands(&mut self, commands: &Receiver<ClipboardCommand>) -> bool {
        loop {
            match commands.try_recv() {
                Ok(ClipboardCommand::Window(window)) => self.window = window,
                Ok(ClipboardCommand::SetRecording(on)) => self.recording = on,
                Ok(ClipboardCommand::InjectPanic) => panic!("injected clipboard fault"),
                Ok(ClipboardCommand::Shutdown) | Err(TryRecvError::Disconnected) => return false,
                Err(TryRecvError::Empty) => return true,
            }
        }
    }

    fn read_and_record(&mut self, clipboard: &mut arboard::Clipboard, trigger: ClipTrigger) {
        if self.recording {
            self.record_unless_ours(clipboard.get_text(), trigger);
        }
        self.report_health();
    }

    fn report_health(&mut self) {
        if let Some(health) = self.stats.due(now_millis()) {
            self.sink.send(CaptureEvent::StreamHealth(health));
        }
    }

    fn record_unless_ours(&mut self, text: Result<String, arboard::Error>, trigger: ClipTrigger) {
        let now = now_millis();
        match text {
            // The agent's own clipboard_write: not something the user copied.
            Ok(text) if written_by_cowork(&text) => {}
            Ok(text) => {
                if let Some(event) = self.filter.accept(&text, self.window.as_ref(), trigger, now) {
                    if self.store.send_timeout(crate::capture::db::clip_write(event), Duration::from_millis(200)).is_err() {
                        self.stats.drop_one();
                        tracing::warn!("store queue full: dropped a clipboard event");
                    } else {
                        self.stats.event(now);
                    }
                }
            }
            // Non-text content (an image, files) is not an error; anything else is counted.
            Err(arboard::Error::ContentNotAvailable) => {}
            Err(err) => self.stats.error(err.to_string()),
        }
    }
}

/// A hash of the text cowork's agent last put on the clipboard (0: none).
static WRITTEN_BY_COWORK: AtomicU64 = AtomicU64::new(0);

fn text_hash(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish().max(1)
}

/// The agent is about to put `text` on the clipboard: capture records that
/// change as cowork's, not as a copy the user made (text an agent took from a
/// web page would otherwise come back from memory as the user's own).
pub fn mark_written_by_cowork(text: &str) {
    WRITTEN_BY_COWORK.store(text_hash(text), Ordering::SeqCst);
}

/// Whether `text` is what the agent last wrote; the mark is used once.
fn written_by_cowork(text: &str) -> bool {
    let hash = text_hash(text);
    WRITTEN_BY_COWORK.compare_exchange(hash, 0, Ordering::SeqCst, Ordering::SeqCst).is_ok()
}

fn watch_clipboard(display: Option<&str>) -> Result<RustConnection, String> {
    let (conn, screen) = x11rb::connect(display).map_err(|err| format!("no X display for the clipboard: {err}"))?;
    let root = conn.setup().roots[screen].root;
    let clipboard = conn
        .intern_atom(false, b"CLIPBOARD")
        .map_err(|e| e.to_string())?
        .reply()
        .map_err(|e| e.to_string())?
        .atom;
    conn.xfixes_query_version(5, 0).map_err(|e| e.to_string())?.reply().map_err(|e| format!("XFixes missing: {e}"))?;
    conn.xfixes_select_selection_input(root, clipboard, SelectionEventMask::SET_SELECTION_OWNER)
        .map_err(|e| e.to_string())?;
    conn.flush().map_err(|e| e.to_string())?;
    Ok(conn)
}

impl Supervised for ClipboardWorker {
    type Command = ClipboardCommand;

    fn run(&mut self, commands: &Receiver<ClipboardCommand>, ctx: &WorkerContext) -> anyhow::Result<()> {
        let watched = match &self.source {
            ClipboardSource::X11 => watch_clipboard(self.display.as_deref()).map(|conn| Watch::X11(Box::new(conn))),
            ClipboardSource::Wayland(target) => crate::desktop::wlr::SelectionWatch::connect(target).map(Watch::Wayland),
            ClipboardSource::Gnome => crate::desktop::gnome::ClipboardWatch::connect().map(Watch::Gnome),
            ClipboardSource::Off(reason) => Err(reason.clone()),
        };
        let clipboard = match watched {
            // The extension sends the text itself (GNOME offers apps no clipboard watching to read it by).
            Ok(Watch::Gnome(_)) => Ok(None),
            Ok(_) => arboard::Clipboard::new().map(Some).map_err(|err| err.to_string()),
            Err(ref reason) => Err(reason.clone()),
        };
        let (mut watch, mut clipboard) = match (watched, clipboard) {
            (Ok(watch), Ok(clipboard)) => (Some(watch), clipboard),
            (Err(reason), _) | (_, Err(reason)) => {
                ctx.report(WorkerState::Degraded(format!("clipboard not recorded: {reason}")));
                (None, None)
            }
        };
        loop {
            // Commands and copy shortcuts first.
            if !self.take_commands(commands) {
                return Ok(());
            }
            let mut shortcut = false;
            while self.copy_signals.try_recv().is_ok() {
                shortcut = true;
            }
            let Some(watch) = watch.as_mut() else {
                match commands.recv_timeout(Duration::from_secs(3600)) {
                    Ok(ClipboardCommand::Window(window)) => self.window = window,
                    Ok(ClipboardCommand::SetRecording(on)) => self.recording = on,
                    Ok(ClipboardCommand::InjectPanic) => panic!("injected clipboard fault"),
                    Ok(ClipboardCommand::Shutdown) | Err(_) => return Ok(()),
                }
                continue;
            };
            if let Watch::Gnome(gnome) = watch
                && let Err(err) = gnome.set_recording(self.recording)
            {
                anyhow::bail!("cowork's GNOME extension: {err}");
            }
            // Sleep until the selection changes, or a command or a shortcut may be waiting.
            let owner_changed = watch.wait(if shortcut { Duration::ZERO } else { WAKE })?;
            // The focus change that came while waiting decides whose copy this is.
            if !self.take_commands(commands) {
                return Ok(());
            }
            if let Watch::Gnome(gnome) = watch {
                if let Some(text) = gnome.take_text().filter(|_| self.recording) {
                    self.record_unless_ours(Ok(text), ClipTrigger::OwnerChange);
                }
                self.report_health();
            } else if let Some(clipboard) = clipboard.as_mut() {
                if shortcut {
                    std::thread::sleep(SHORTCUT_SETTLE);
                    self.read_and_record(clipboard, ClipTrigger::Shortcut);
                } else if owner_changed {
                    self.read_and_record(clipboard, ClipTrigger::OwnerChange);
                }
            }
        }
    }
}

/// Starts the clipboard worker on a thread named `clipboard`. It hears
/// changes from `source` and reads the text through arboard; with
/// `ClipboardSource::Off` it is degraded, and says why.
pub fn spawn_clipboard(
    display: Option<String>,
    source: ClipboardSource,
    store: Sender<StoreCommand>,
    copy_signals: Receiver<()>,
    sink: EventSink<CaptureEvent>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<ClipboardCommand>> {
    let channel = bounded(64);
    spawn_supervised::<ClipboardWorker, _, _>(WorkerName::Clipboard, policy, sink.clone(), channel, move |_ctx| {
        Ok(ClipboardWorker {
            display: display.clone(),
            source: source.clone(),
            recording: true,
            store: store.clone(),
            copy_signals: copy_signals.clone(),
            window: None,
            filter: ClipFilter::default(),
            stats: StreamStats::new("clipboard"),
            sink: sink.clone(),
        })
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_agents_own_clipboard_write_is_recognised_once() {
        mark_written_by_cowork("text the agent copied");
        assert!(!written_by_cowork("something the user copied"));
        assert!(written_by_cowork("text the agent copied"));
        assert!(!written_by_cowork("text the agent copied"), "the user copying the same text later is theirs");
    }

    use super::*;

    fn window() -> ActiveWindow {
        ActiveWindow { window_id: 1, app: "firefox".into(), title: "Docs".into(), pid: Some(3), ..Default::default() }
    }

    #[test]
    fn repeats_are_dropped_large_text_is_capped_and_excluded_windows_record_nothing() {
        let mut filter = ClipFilter::default();
        let w = window();
        let first = filter.accept("hello", Some(&w), ClipTrigger::OwnerChange, 1).unwrap();
        assert_eq!((first.app.as_str(), first.text.as_str(), first.truncated), ("firefox", "hello", false));
        assert!(filter.accept("hello", Some(&w), ClipTrigger::Shortcut, 2).is_none(), "consecutive duplicate");
        let big = "é".repeat(MAX_CLIP_BYTES);
        let capped = filter.accept(&big, Some(&w), ClipTrigger::Shortcut, 3).unwrap();
        assert!(capped.truncated && capped.text.len() <= MAX_CLIP_BYTES);
        assert!(filter.accept("secret", None, ClipTrigger::OwnerChange, 4).is_none());
        assert!(filter.accept("   ", Some(&w), ClipTrigger::OwnerChange, 5).is_none());
    }
}
