//! Keystroke chunks: the `keys` worker polls key state with device_query on its
//! own thread (every 10 ms while typing, 25 ms while the user is active, 200 ms
//! after 30 s without input) and turns key transitions into text (shift, caps
//! lock, auto-repeat, backspace), shortcuts (Ctrl/Alt/Super + key) into
//! shortcut names, and flushes a chunk after a 2 s pause, on Enter/Tab/Escape,
//! on a window change, or at 1000 characters. `<private>…</private>` is
//! redacted. A chunk the store cannot take within 200 ms is dropped and
//! counted.
//!
//! Capture tells it the focused window after the firewall has decided
//! (`KeysCommand::Window`), so typing in an excluded window has nowhere to go;
//! the `a11y` worker tells it about password fields and, on Wayland, the text
//! entered into fields. Copy shortcuts go to the clipboard worker.
//!
//! Key names are positions on a US layout (device_query's keycodes); other
//! layouts record the US character for each key.

use std::collections::{HashMap, HashSet};
use std::time::Duration;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use device_query::{DeviceQuery, DeviceState, Keycode};

use crate::capture::events::CaptureEvent;
use crate::records::redact_private;
use crate::capture::health::StreamStats;
use crate::ids::{next_id, now_millis};
use crate::records::{ActiveWindow, FlushReason, KeystrokeChunk};
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, WorkerState, spawn_supervised};
use crate::store::StoreCommand;

pub const PAUSE_FLUSH_MILLIS: i64 = 2_000;
/// Characters typed this shortly before a password-field focus event are dropped with it.
const SECRET_GRACE_MILLIS: i64 = 60;
pub const MAX_CHUNK_CHARS: usize = 1_000;
/// X's default auto-repeat: 660 ms delay, then 25 characters a second.
const REPEAT_DELAY_MILLIS: i64 = 660;
const REPEAT_INTERVAL_MILLIS: i64 = 40;
/// Poll fast while the user types, slower when the keyboard has been still,
/// and slowly when the user has not touched keyboard or pointer for a while.
/// Polling can miss a press shorter than the interval: people hold keys
/// 50–150 ms, so 25 ms is safe; after a long idle the first key may be missed.
const TYPING_POLL: Duration = Duration::from_millis(10);
const ACTIVE_POLL: Duration = Duration::from_millis(25);
const AWAY_POLL: Duration = Duration::from_millis(200);
const TYPING_FOR_MILLIS: i64 = 5_000;
const ACTIVE_FOR_MILLIS: i64 = 30_000;

/// The poll interval for the time since the last key and since any input.
pub fn poll_interval(since_key_millis: i64, since_input_millis: i64) -> Duration {
    if since_key_millis < TYPING_FOR_MILLIS {
        TYPING_POLL
    } else if since_input_millis < ACTIVE_FOR_MILLIS {
        ACTIVE_POLL
    } else {
        AWAY_POLL
    }
}

/// Something the key stream noticed that other streams care about.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyOutput {
    Chunk(KeystrokeChunk),
    /// Ctrl+C, Ctrl+X or Ctrl+Insert: the clipboard probably changed.
    CopyShortcut,
}

fn is_modifier(key: Keycode) -> bool {
    use Keycode::*;
    matches!(key, LShift | RShift | LControl | RControl | LAlt | RAlt | LMeta | RMeta | Command | RCommand | LOption | ROption)
}

/// The character a key types on a US layout, without and with shift.
fn characters(key: Keycode) -> Option<(char, char)> {
    use Keycode::*;
    let pair = match key {
        A => ('a', 'A'), B => ('b', 'B'), C => ('c', 'C'), D => ('d', 'D'), E => ('e', 'E'), F => ('f', 'F'),
        G => ('g', 'G'), H => ('h', 'H'), I => ('i', 'I'), J => ('j', 'J'), K => ('k', 'K'), L => ('l', 'L'),
        M => ('m', 'M'), N => ('n', 'N'), O => ('o', 'O'), P => ('p', 'P'), Q => ('q', 'Q'), R => ('r', 'R'),
        S => ('s', 'S'), T => ('t', 'T'), U => ('u', 'U'), V => ('v', 'V'), W => ('w', 'W'), X => ('x', 'X'),
        Y => ('y', 'Y'), Z => ('z', 'Z'),
        Key0 => ('0', ')'), Key1 => ('1', '!'), Key2 => ('2', '@'), Key3 => ('3', '#'), Key4 => ('4', '$'),
        Key5 => ('5', '%'), Key6 => ('6', '^'), Key7 => ('7', '&'), Key8 => ('8', '*'), Key9 => ('9', '('),
        Space => (' ', ' '), Grave => ('`', '~'), Minus => ('-', '_'), Equal => ('=', '+'),
        LeftBracket => ('[', '{'), RightBracket => (']', '}'), BackSlash => ('\\', '|'), Semicolon => (';', ':'),
        Apostrophe => ('\'', '"'), Comma => (',', '<'), Dot => ('.', '>'), Slash => ('/', '?'),
        Numpad0 => ('0', '0'), Numpad1 => ('1', '1'), Numpad2 => ('2', '2'), Numpad3 => ('3', '3'),
        Numpad4 => ('4', '4'), Numpad5 => ('5', '5'), Numpad6 => ('6', '6'), Numpad7 => ('7', '7'),
        Numpad8 => ('8', '8'), Numpad9 => ('9', '9'), NumpadSubtract => ('-', '-'), NumpadAdd => ('+', '+'),
        NumpadDivide => ('/', '/'), NumpadMultiply => ('*', '*'), NumpadEquals => ('=', '='), NumpadDecimal => ('.', '.'),
        _ => return None,
    };
    Some(pair)
}

/// Pure key-state → text logic; the worker feeds it polled key sets.
#[derive(Default)]
pub struct KeyAssembler {
    window: Option<ActiveWindow>,
    held: HashMap<Keycode, i64>,
    /// When each held key last produced a character (auto-repeat).
    repeated_at: HashMap<Keycode, i64>,
    caps_lock: bool,
    /// Keyboard focus is in a password field of this process (AT-SPI): nothing typed is kept.
    secret_pid: Option<u32>,
    text: String,
    /// When each character of `text` was typed.
    typed_at: Vec<i64>,
    shortcuts: Vec<String>,
    started_at: Option<i64>,
    last_key_at: i64,
}

impl KeyAssembler {
    pub fn window(&self) -> Option<&ActiveWindow> {
        self.window.as_ref()
    }

    /// The focused window changed (None: nothing, or the firewall excluded it).
    pub fn set_window(&mut self, window: Option<ActiveWindow>, now_millis: i64, out: &mut Vec<KeyOutput>) {
        if self.window.as_ref().map(|w| (w.window_id, &w.title)) != window.as_ref().map(|w| (w.window_id, &w.title)) {
            self.flush(now_millis, FlushReason::WindowChange, out);
            self.window = window;
        }
    }

    /// Focus entered (`on`) or left a password field of process `pid`.
    /// Entering one drops what was typed in the last moment before the focus
    /// event arrived (it may be the first characters of the password) and
    /// flushes the rest, which belongs to the field before.
    pub fn set_secret_field(&mut self, pid: u32, on: bool, now_millis: i64, out: &mut Vec<KeyOutput>) {
        if on {
            while self.typed_at.last().is_some_and(|at| *at >= now_millis - SECRET_GRACE_MILLIS) {
                self.typed_at.pop();
                self.text.pop();
            }
            self.flush(now_millis, FlushReason::FieldChange, out);
            self.secret_pid = Some(pid);
        } else if self.secret_pid == Some(pid) {
            self.secret_pid = None;
        }
    }

    /// Text entered into a field of process `pid`: kept when that process
    /// owns the focused window and no password field has focus; a line break
    /// ends the chunk as Enter does, a tab as Tab does.
    pub fn enter(&mut self, pid: u32, text: &str, now_millis: i64, out: &mut Vec<KeyOutput>) {
        if self.secret() || self.window.as_ref().is_none_or(|w| w.pid != Some(pid)) {
            return;
        }
        self.last_key_at = now_millis;
        for c in text.chars() {
            match c {
                '\n' | '\r' => self.flush(now_millis, FlushReason::Enter, out),
                '\t' => self.flush(now_millis, FlushReason::Tab, out),
                c if c.is_control() => {}
                c => {
                    self.started_at.get_or_insert(now_millis);
                    self.text.push(c);
                    // Each insertion says which field it went into, so the grace a
                    // password field's focus takes from keys does not apply.
                    self.typed_at.push(i64::MIN);
                    if self.text.chars().count() >= MAX_CHUNK_CHARS {
                        self.flush(now_millis, FlushReason::Length, out);
                    }
                }
            }
        }
    }

    /// Whether text waits to be flushed.
    pub fn pending(&self) -> bool {
        !self.text.is_empty()
    }

    /// Typing is secret while a password field of the focused window's process has focus.
    fn secret(&self) -> bool {
        self.secret_pid.is_some() && self.window.as_ref().is_some_and(|w| w.pid == self.secret_pid)
    }

    pub fn last_key_at(&self) -> i64 {
        self.last_key_at
    }

    /// One poll of the held keys.
    pub fn observe(&mut self, keys: &[Keycode], now_millis: i64, out: &mut Vec<KeyOutput>) {
        // The common poll: nothing held before or now. Only a pause can be due.
        if keys.is_empty() && self.held.is_empty() {
            if !self.text.is_empty() && now_millis - self.last_key_at >= PAUSE_FLUSH_MILLIS {
                self.flush(now_millis, FlushReason::Pause, out);
            }
            return;
        }
        let current: HashSet<Keycode> = keys.iter().copied().collect();
        self.held.retain(|key, _| current.contains(key));
        self.repeated_at.retain(|key, _| current.contains(key));
        let shift = current.contains(&Keycode::LShift) || current.contains(&Keycode::RShift);
        let ctrl = current.contains(&Keycode::LControl) || current.contains(&Keycode::RControl);
        let alt = current.contains(&Keycode::LAlt) || current.contains(&Keycode::RAlt);
        let meta = [Keycode::LMeta, Keycode::RMeta, Keycode::Command, Keycode::RCommand].iter().any(|k| current.contains(k));
        let mut newly: Vec<Keycode> = current.iter().copied().filter(|k| !self.held.contains_key(k)).collect();
        newly.sort_by_key(|k| format!("{k:?}"));
        for key in newly {
            self.held.insert(key, now_millis);
            if is_modifier(key) {
                continue;
            }
            self.last_key_at = now_millis;
            self.press(key, shift, ctrl, alt, meta, now_millis, out);
        }
        // Auto-repeat for keys held past the delay (characters and Backspace only).
        let repeating: Vec<(Keycode, i64)> = self
            .held
            .iter()
            .filter(|(k, since)| !is_modifier(**k) && now_millis - **since >= REPEAT_DELAY_MILLIS)
            .map(|(k, since)| (*k, *since))
            .collect();
        for (key, since) in repeating {
            if ctrl || alt || meta || !(characters(key).is_some() || key == Keycode::Backspace) {
                continue;
            }
            let from = self.repeated_at.get(&key).copied().unwrap_or(since + REPEAT_DELAY_MILLIS - REPEAT_INTERVAL_MILLIS);
            let repeats = (now_millis - from) / REPEAT_INTERVAL_MILLIS;
            for _ in 0..repeats {
                self.type_key(key, shift, now_millis, out);
            }
            if repeats > 0 {
                self.repeated_at.insert(key, from + repeats * REPEAT_INTERVAL_MILLIS);
                self.last_key_at = now_millis;
            }
        }
        if !self.text.is_empty() && now_millis - self.last_key_at >= PAUSE_FLUSH_MILLIS {
            self.flush(now_millis, FlushReason::Pause, out);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn press(&mut self, key: Keycode, shift: bool, ctrl: bool, alt: bool, meta: bool, now: i64, out: &mut Vec<KeyOutput>) {
        if self.secret() {
            return;
        }
        if ctrl || alt || meta {
            let mut name = String::new();
            for (held, label) in [(ctrl, "Ctrl+"), (alt, "Alt+"), (meta, "Super+"), (shift, "Shift+")] {
                if held {
                    name.push_str(label);
                }
            }
            name.push_str(&key.to_string());
            self.started_at.get_or_insert(now);
            self.shortcuts.push(name);
            if ctrl && matches!(key, Keycode::C | Keycode::X | Keycode::Insert) {
                out.push(KeyOutput::CopyShortcut);
            }
            return;
        }
        match key {
            Keycode::CapsLock => self.caps_lock = !self.caps_lock,
            Keycode::Enter | Keycode::NumpadEnter => self.flush(now, FlushReason::Enter, out),
            Keycode::Tab => self.flush(now, FlushReason::Tab, out),
            Keycode::Escape => self.flush(now, FlushReason::Escape, out),
            _ => self.type_key(key, shift, now, out),
        }
    }

    fn type_key(&mut self, key: Keycode, shift: bool, now: i64, out: &mut Vec<KeyOutput>) {
        if self.window.is_none() || self.secret() {
            return;
        }
        if key == Keycode::Backspace {
            self.text.pop();
            self.typed_at.pop();
            return;
        }
        let Some((plain, shifted)) = characters(key) else { return };
        let letter = plain.is_ascii_alphabetic();
        let upper = if letter { shift ^ self.caps_lock } else { shift };
        self.started_at.get_or_insert(now);
        self.text.push(if upper { shifted } else { plain });
        self.typed_at.push(now);
        if self.text.chars().count() >= MAX_CHUNK_CHARS {
            self.flush(now, FlushReason::Length, out);
        }
    }

    /// Emits the pending chunk, if it has any text or shortcuts.
    pub fn flush(&mut self, now_millis: i64, reason: FlushReason, out: &mut Vec<KeyOutput>) {
        let text = redact_private(&std::mem::take(&mut self.text));
        self.typed_at.clear();
        let shortcuts = std::mem::take(&mut self.shortcuts);
        let started_at = self.started_at.take();
        let (Some(window), Some(started_at)) = (&self.window, started_at) else { return };
        if text.is_empty() && shortcuts.is_empty() {
            return;
        }
        out.push(KeyOutput::Chunk(KeystrokeChunk {
            chunk_id: next_id(),
            app: window.app.clone(),
            title: window.title.clone(),
            pid: window.pid,
            started_at_millis: started_at,
            ended_at_millis: now_millis,
            text,
            shortcuts,
            flush_reason: reason,
        }));
    }
}

#[derive(Debug)]
pub enum KeysCommand {
    /// The window capture allowed (None: nothing focused, or excluded by the firewall).
    Window(Option<ActiveWindow>),
    /// Switch the keystroke stream on or off.
    SetRecording(bool),
    /// Keyboard focus entered (`on`) or left a password field of process `pid` (from `a11y`).
    SecretField { pid: u32, on: bool },
    /// Text entered into an editable field of process `pid` (AT-SPI
    /// `text-changed:insert`, from `a11y`): the typing stream on Wayland,
    /// where no app may see another's keys.
    Entered { pid: u32, text: String },
    InjectPanic,
    Shutdown,
}

pub struct KeysWorker {
    device: Option<DeviceState>,
    /// Last pointer position and when any input (key or pointer) was last seen.
    pointer: (i32, i32),
    last_input_at: i64,
    recording: bool,
    stats: StreamStats,
    sink: EventSink<CaptureEvent>,
    assembler: KeyAssembler,
    store: Sender<StoreCommand>,
    /// Where copy shortcuts go (the clipboard stream), if anywhere.
    copy_signal: Option<Sender<()>>,
    /// Why key state is not read (a Wayland session, another display).
    off: Option<String>,
    /// When a key was last seen down, for other workers (`agent::warm` waits while the user types).
    keys_at_millis: Arc<AtomicI64>,
}

impl KeysWorker {
    fn emit(&mut self, outputs: Vec<KeyOutput>) {
        for output in outputs {
            match output {
                KeyOutput::Chunk(chunk) => {
                    // Capture never waits long on the store; a chunk it cannot hand over is dropped.
                    let now = now_millis();
                    if self.store.send_timeout(crate::capture::db::chunk_write(chunk), Duration::from_millis(200)).is_err() {
                        self.stats.drop_one();
                        tracing::warn!("store queue full: dropped a keystroke chunk");
                    } else {
                        self.stats.event(now);
                    }
                    if let Some(health) = self.stats.due(now) {
                        self.sink.send(CaptureEvent::StreamHealth(health));
                    }
                }
                KeyOutput::CopyShortcut => {
                    if let Some(signal) = &self.copy_signal {
                        let _ = signal.try_send(());
                    }
                }
            }
        }
    }
}

impl Supervised for KeysWorker {
    type Command = KeysCommand;

    fn run(&mut self, commands: &Receiver<KeysCommand>, ctx: &WorkerContext) -> anyhow::Result<()> {
        if self.device.is_none() {
            let why = self.off.clone().unwrap_or_else(|| "no X display for key state".into());
            ctx.report(WorkerState::Degraded(format!("keystrokes are not recorded: {why}")));
        }
        loop {
            let now = now_millis();
            let last_input = self.last_input_at.max(self.assembler.last_key_at());
            let poll = poll_interval(now - self.assembler.last_key_at(), now - last_input);
            let timeout = if self.device.is_some() && self.recording {
                poll
            } else if self.assembler.pending() {
                // Text entered into fields (no key state here): flush after the pause.
                Duration::from_millis((PAUSE_FLUSH_MILLIS - (now - self.assembler.last_key_at())).clamp(1, PAUSE_FLUSH_MILLIS) as u64)
            } else {
                Duration::from_secs(3600)
            };
            match commands.recv_timeout(timeout) {
                Ok(KeysCommand::Window(window)) => {
                    tracing::debug!(window = ?window.as_ref().map(|w| &w.title), "keys: focus changed");
                    let mut out = Vec::new();
                    self.assembler.set_window(window, now_millis(), &mut out);
                    self.emit(out);
                }
                Ok(KeysCommand::SetRecording(on)) => {
                    if !on {
                        let mut out = Vec::new();
                        self.assembler.flush(now_millis(), FlushReason::Shutdown, &mut out);
                        self.emit(out);
                    }
                    self.recording = on;
                }
                Ok(KeysCommand::SecretField { pid, on }) => {
                    let mut out = Vec::new();
                    self.assembler.set_secret_field(pid, on, now_millis(), &mut out);
                    self.emit(out);
                }
                Ok(KeysCommand::Entered { pid, text }) => {
                    if self.recording {
                        let mut out = Vec::new();
                        self.assembler.enter(pid, &text, now_millis(), &mut out);
                        self.emit(out);
                    }
                }
                Ok(KeysCommand::InjectPanic) => panic!("injected keys fault"),
                Ok(KeysCommand::Shutdown) | Err(RecvTimeoutError::Disconnected) => {
                    let mut out = Vec::new();
                    self.assembler.flush(now_millis(), FlushReason::Shutdown, &mut out);
                    self.emit(out);
                    return Ok(());
                }
                Err(RecvTimeoutError::Timeout) if self.device.is_none() => {
                    let mut out = Vec::new();
                    self.assembler.observe(&[], now_millis(), &mut out);
                    self.emit(out);
                }
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(device) = &self.device {
                        let now = now_millis();
                        if poll == AWAY_POLL {
                            // Slow mode: the pointer tells when the user is back.
                            let pointer = device.get_mouse().coords;
                            if pointer != self.pointer {
                                self.pointer = pointer;
                                self.last_input_at = now;
                            }
                        }
                        let keys = device.get_keys();
                        if !keys.is_empty() {
                            self.last_input_at = now;
                            self.keys_at_millis.store(now, Ordering::Relaxed);
                        }
                        let mut out = Vec::new();
                        self.assembler.observe(&keys, now, &mut out);
                        self.emit(out);
                    }
                }
            }
        }
    }
}

/// Starts the keys worker on a thread named `keys`. Key state comes from
/// `$DISPLAY`; with `off` (capture watches another display, a Wayland session) it is degraded.
pub fn spawn_keys(
    store: Sender<StoreCommand>,
    copy_signal: Option<Sender<()>>,
    off: Option<String>,
    keys_at_millis: Arc<AtomicI64>,
    sink: EventSink<CaptureEvent>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<KeysCommand>> {
    let channel = bounded(64);
    spawn_supervised::<KeysWorker, _, _>(WorkerName::Keys, policy, sink.clone(), channel, move |_ctx| {
        let device = if off.is_none() { DeviceState::checked_new() } else { None };
        let pointer = device.as_ref().map(|d| d.get_mouse().coords).unwrap_or_default();
        Ok(KeysWorker {
            device,
            pointer,
            last_input_at: now_millis(),
            recording: true,
            stats: StreamStats::new("typing"),
            sink: sink.clone(),
            assembler: KeyAssembler::default(),
            store: store.clone(),
            copy_signal: copy_signal.clone(),
            keys_at_millis: keys_at_millis.clone(),
            off: off.clone(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Keycode::*;

    fn window(title: &str) -> Option<ActiveWindow> {
        Some(ActiveWindow { window_id: 1, app: "XTerm".into(), title: title.into(), pid: Some(5), ..Default::default() })
    }

    /// Presses and releases each key set in turn, 50 ms apart.
    fn type_sequence(assembler: &mut KeyAssembler, presses: &[&[Keycode]], start: i64) -> (Vec<KeyOutput>, i64) {
        let mut out = Vec::new();
        let mut now = start;
        for keys in presses {
            assembler.observe(keys, now, &mut out);
            now += 50;
            assembler.observe(&[], now, &mut out);
            now += 50;
        }
        (out, now)
    }

    fn chunks(out: &[KeyOutput]) -> Vec<&KeystrokeChunk> {
        out.iter().filter_map(|o| if let KeyOutput::Chunk(c) = o { Some(c) } else { None }).collect()
    }

    #[test]
    fn shift_caps_lock_and_backspace_make_text_and_enter_flushes() {
        let mut a = KeyAssembler::default();
        let mut out = Vec::new();
        a.set_window(window("shell"), 0, &mut out);
        let (out, _) = type_sequence(
            &mut a,
            &[&[LShift, H], &[I], &[Space], &[CapsLock], &[Y], &[O], &[CapsLock], &[U], &[X], &[Backspace], &[LShift, Key1], &[Enter]],
            0,
        );
        let c = chunks(&out);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].text, "Hi YOu!");
        assert_eq!(c[0].flush_reason, FlushReason::Enter);
        assert_eq!((c[0].app.as_str(), c[0].title.as_str()), ("XTerm", "shell"));
    }

    #[test]
    fn a_pause_a_window_change_and_length_flush() {
        let mut a = KeyAssembler::default();
        let mut out = Vec::new();
        a.set_window(window("one"), 0, &mut out);
        let (_, now) = type_sequence(&mut a, &[&[A], &[B]], 0);
        a.observe(&[], now + PAUSE_FLUSH_MILLIS, &mut out);
        assert_eq!(chunks(&out)[0].flush_reason, FlushReason::Pause);
        let (_, now) = type_sequence(&mut a, &[&[C]], now + 3_000);
        a.set_window(window("two"), now, &mut out);
        let c = chunks(&out);
        assert_eq!((c[1].text.as_str(), c[1].title.as_str(), c[1].flush_reason), ("c", "one", FlushReason::WindowChange));
        let presses: Vec<&[Keycode]> = std::iter::repeat_n(&[Z][..], MAX_CHUNK_CHARS).collect();
        let (more, _) = type_sequence(&mut a, &presses, now + 10);
        let long = chunks(&more);
        assert_eq!((long[0].text.len(), long[0].flush_reason, long[0].title.as_str()), (MAX_CHUNK_CHARS, FlushReason::Length, "two"));
    }

    #[test]
    fn nothing_typed_into_a_password_field_is_kept() {
        let mut a = KeyAssembler::default();
        let mut out = Vec::new();
        a.set_window(window("login"), 0, &mut out);
        let (first, now) = type_sequence(&mut a, &[&[U], &[S], &[E], &[R], &[Tab]], 0);
        let pid = window("login").unwrap().pid.unwrap();
        // The focus event can arrive after the first key of the password: that key goes,
        // what was typed well before it (another field, no Tab seen yet) is kept.
        let (_, now) = type_sequence(&mut a, &[&[N], &[O], &[T], &[E]], now + 10);
        let (_, now) = type_sequence(&mut a, &[&[H]], now + 500);
        let mut kept = Vec::new();
        // 'h' was pressed 100 ms before `now`; the focus event arrives 20 ms after it.
        a.set_secret_field(pid, true, now - 80, &mut kept);
        assert_eq!((chunks(&kept)[0].text.as_str(), chunks(&kept)[0].flush_reason), ("note", FlushReason::FieldChange));
        let (secret, now) = type_sequence(&mut a, &[&[U], &[N], &[T], &[E], &[R], &[LControl, V], &[Enter]], now + 10);
        a.set_secret_field(pid, false, now, &mut Vec::new());
        let (after, _) = type_sequence(&mut a, &[&[O], &[K], &[Enter]], now + 10);
        assert_eq!(chunks(&first)[0].text, "user");
        assert!(chunks(&secret).is_empty(), "{secret:?}");
        assert_eq!(chunks(&after)[0].text, "ok");
        // A password field of another process does not silence this window.
        a.set_secret_field(pid + 1, true, now + 5_000, &mut Vec::new());
        let (other, _) = type_sequence(&mut a, &[&[O], &[K], &[Enter]], now + 5_000);
        assert_eq!(chunks(&other)[0].text, "ok");
    }

    #[test]
    fn text_entered_into_fields_is_kept_only_for_the_focused_process_and_never_in_a_password_field() {
        let mut assembler = KeyAssembler::default();
        let mut out = Vec::new();
        let mut focused = window("Sign in").unwrap();
        focused.pid = Some(41);
        assembler.set_window(Some(focused), 0, &mut out);
        assembler.enter(99, "from a background app", 10, &mut out);
        assert!(!assembler.pending(), "another process's field is not the focused window");
        assembler.enter(41, "ali", 20, &mut out);
        assembler.enter(41, "ce\tnext", 30, &mut out);
        assert_eq!(chunks(&out).iter().map(|c| (c.text.as_str(), c.flush_reason)).collect::<Vec<_>>(), [("alice", FlushReason::Tab)]);
        // Focus moving to a password field right after text went into this field keeps that text.
        assembler.set_secret_field(41, true, 31, &mut out);
        assembler.enter(41, "hunter2", 50, &mut out);
        assembler.set_secret_field(41, false, 60, &mut out);
        assembler.enter(41, "bob\n", 70, &mut out);
        let texts: Vec<&str> = chunks(&out).iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, ["alice", "next", "bob"], "the password field's text is never kept, the field's before it is");
        assembler.enter(41, "later", 100, &mut out);
        assembler.observe(&[], 100 + PAUSE_FLUSH_MILLIS, &mut out);
        assert_eq!(chunks(&out).last().map(|c| (c.text.as_str(), c.flush_reason)), Some(("later", FlushReason::Pause)));
    }

    #[test]
    fn shortcuts_are_named_not_typed_and_copy_is_signalled() {
        let mut a = KeyAssembler::default();
        let mut out = Vec::new();
        a.set_window(window("editor"), 0, &mut out);
        let (out, _) = type_sequence(&mut a, &[&[LControl, C], &[O], &[K], &[LControl, LShift, T], &[Tab]], 0);
        assert!(out.contains(&KeyOutput::CopyShortcut));
        let c = chunks(&out);
        assert_eq!(c[0].text, "ok");
        assert_eq!(c[0].shortcuts, ["Ctrl+C", "Ctrl+Shift+T"]);
        assert_eq!(c[0].flush_reason, FlushReason::Tab);
    }

    #[test]
    fn polling_slows_down_as_the_user_goes_quiet() {
        assert_eq!(poll_interval(100, 100), TYPING_POLL);
        assert_eq!(poll_interval(10_000, 1_000), ACTIVE_POLL);
        assert_eq!(poll_interval(60_000, 60_000), AWAY_POLL);
    }

    #[test]
    fn holding_a_key_repeats_it_like_x_does() {
        let mut a = KeyAssembler::default();
        let mut out = Vec::new();
        a.set_window(window("doc"), 0, &mut out);
        for t in (0..=1_000).step_by(10) {
            a.observe(&[Minus], t, &mut out);
        }
        a.observe(&[], 1_010, &mut out);
        a.flush(1_020, FlushReason::Shutdown, &mut out);
        // 1 press + (1000 - 660) / 40 repeats = 1 + 9
        assert_eq!(chunks(&out)[0].text, "-".repeat(1 + 9));
    }

    #[test]
    fn private_spans_are_redacted_and_nothing_is_kept_without_a_window() {
        let mut a = KeyAssembler::default();
        let mut out = Vec::new();
        a.set_window(window("chat"), 0, &mut out);
        // "<private>pw</private>" typed with shift for < and >
        let (out, _) = type_sequence(
            &mut a,
            &[&[A], &[LShift, Comma], &[P], &[R], &[I], &[V], &[A], &[T], &[E], &[LShift, Dot], &[P], &[W],
              &[LShift, Comma], &[Slash], &[P], &[R], &[I], &[V], &[A], &[T], &[E], &[LShift, Dot], &[B], &[Enter]],
            0,
        );
        assert_eq!(chunks(&out)[0].text, "ab");
        let mut none = KeyAssembler::default();
        let (out, _) = type_sequence(&mut none, &[&[S], &[E], &[C], &[Enter]], 0);
        assert!(chunks(&out).is_empty(), "no window (or an excluded one): nothing recorded");
    }
}
