//! Dictation: typing a transcript into the focused app. `Typing` is what the
//! desktop allows: the X server's XTest extension, as xdotool does, without
//! the xdotool program (this file's `Typist`); on wlroots compositors a
//! virtual keyboard (`desktop::wlr::type_text`); on GNOME Mutter's
//! RemoteDesktop (`desktop::gnome::type_text`); elsewhere the RemoteDesktop
//! portal with libei (`desktop::portal`, `desktop::ei`).
//!
//! Each character becomes its keysym. One the keyboard has (on its plain or
//! its shifted level) is typed with that key, Shift added when needed. One
//! it lacks (é on a US layout, €, —) is put for the moment on a keycode that
//! carries nothing, typed, and the keycode is emptied again a little later
//! (`restore`), after the app has had time to read the new mapping: X
//! clients translate a key when they process it, with the mapping they last
//! fetched, so restoring at once would lose those characters.
//!
//! Safety: the transcript is data. Line breaks and tabs become spaces and no
//! other control character is typed, so dictation never presses Enter or Tab
//! (a misheard phrase cannot submit a form or run a command in a terminal),
//! and nothing is typed while Ctrl, Alt or Super is held, where letters
//! would be shortcuts.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::xproto::{self, ConnectionExt as _};
use x11rb::protocol::xtest::ConnectionExt as _;
use x11rb::rust_connection::RustConnection;

/// Where dictation types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Typing {
    /// XTest on this X display (None: `$DISPLAY`); under XWayland, X apps only.
    X11(Option<String>),
    /// A virtual keyboard on a wlroots compositor.
    Wayland(crate::desktop::session::WaylandTarget),
    /// GNOME: keysyms through Mutter's RemoteDesktop.
    Mutter,
    /// The RemoteDesktop portal with libei (KDE Plasma, and wherever a portal offers it);
    /// its restore token kept in the secret store of this data directory.
    Portal(std::path::PathBuf),
    /// Nowhere, and why.
    Off(String),
}

impl Typing {
    /// What the desktop allows: XTest on X11, the virtual keyboard where the
    /// compositor has one, XTest into XWayland's apps where only those can
    /// be reached, else nothing (with the reason).
    pub fn for_desktop(desktop: &crate::desktop::session::Report, display: Option<String>, data_dir: &std::path::Path) -> Typing {
        use crate::desktop::session::Capability;
        let state = desktop.state(Capability::Dictation);
        match &desktop.wayland {
            _ if desktop.x11_decides() => Typing::X11(display),
            _ if desktop.family == crate::desktop::session::Family::Gnome && state.is_ok() && state.text().contains("Mutter") => Typing::Mutter,
            _ if state.is_ok() && state.text().contains("RemoteDesktop portal") => Typing::Portal(data_dir.to_owned()),
            Some(target) if state.is_ok() => Typing::Wayland(target.clone()),
            _ if desktop.xwayland => Typing::X11(None),
            _ => Typing::Off(state.text()),
        }
    }
}

/// How long remapped keycodes keep their symbols after the last key.
pub const RESTORE_AFTER: Duration = Duration::from_millis(400);
/// How long to wait for held modifiers to be released before refusing.
const MODIFIER_WAIT: Duration = Duration::from_millis(1500);
const SHIFT_L: u32 = 0xffe1;

pub use crate::desktop::keysym::keysym_for;

/// What dictation types for a transcript: line breaks and tabs become
/// spaces, other control characters are dropped, runs of spaces collapse.
pub fn typeable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.trim().chars() {
        let c = if matches!(c, '\n' | '\r' | '\t') { ' ' } else { c };
        if keysym_for(c).is_none() || (c == ' ' && out.ends_with(' ')) {
            continue;
        }
        out.push(c);
    }
    out
}

/// The core keyboard mapping: keysyms per keycode from `min` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyMap {
    pub min: u8,
    pub per: usize,
    pub keysyms: Vec<u32>,
}

/// How to type one keysym.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stroke {
    Key { keycode: u8, shift: bool },
    /// Not on the keyboard: needs a spare keycode.
    Missing(u32),
}

impl KeyMap {
    fn row(&self, keycode: u8) -> &[u32] {
        let start = (keycode - self.min) as usize * self.per;
        &self.keysyms[start..start + self.per]
    }

    fn keycodes(&self) -> impl Iterator<Item = u8> + '_ {
        (0..self.keysyms.len() / self.per.max(1)).map(|i| self.min + i as u8)
    }

    /// The key that types `keysym`: its plain level first, then its shifted one.
    pub fn stroke(&self, keysym: u32) -> Stroke {
        for (level, shift) in [(0, false), (1, true)] {
            if let Some(keycode) = self.keycodes().find(|&k| self.row(k).get(level) == Some(&keysym)) {
                return Stroke::Key { keycode, shift };
            }
        }
        Stroke::Missing(keysym)
    }

    /// Keycodes that carry no symbol at all, highest first (the low ones
    /// are more often claimed by an odd keyboard).
    pub fn spare(&self) -> Vec<u8> {
        let mut spare: Vec<u8> = self.keycodes().filter(|&k| self.row(k).iter().all(|&s| s == 0)).collect();
        spare.reverse();
        spare
    }
}

/// A connection to the X server that types through XTest.
pub struct Typist {
    conn: RustConnection,
    root: xproto::Window,
    min: u8,
    max: u8,
    /// Keycodes given a symbol for the last text, to empty at `restore_at`.
    remapped: Vec<u8>,
    restore_at: Option<Instant>,
}

impl Typist {
    /// Connects to `display` (None: $DISPLAY) and checks for XTest.
    pub fn connect(display: Option<&str>) -> anyhow::Result<Self> {
        let (conn, screen) = x11rb::connect(display).context("dictation needs an X display (on Wayland, only apps running under XWayland can be typed into)")?;
        if conn.extension_information(x11rb::protocol::xtest::X11_EXTENSION_NAME)?.is_none() {
            bail!("the X server has no XTest extension, which dictation types with");
        }
        conn.xtest_get_version(2, 2)?.reply().context("XTest did not answer")?;
        let setup = conn.setup();
        let root = setup.roots[screen].root;
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        Ok(Self { conn, root, min, max, remapped: Vec::new(), restore_at: None })
    }

    /// The keyboard mapping as the server has it now.
    pub fn keymap(&self) -> anyhow::Result<KeyMap> {
        let reply = self.conn.get_keyboard_mapping(self.min, self.max - self.min + 1)?.reply()?;
        Ok(KeyMap { min: self.min, per: reply.keysyms_per_keycode as usize, keysyms: reply.keysyms })
    }

    /// Waits (briefly) until no Ctrl, Alt, Super or other modifier key is
    /// held: the push-to-talk hotkey may still be down.
    fn wait_for_modifiers(&self) -> anyhow::Result<()> {
        let mapping = self.conn.get_modifier_mapping()?.reply()?;
        let modifier_keys: Vec<u8> = mapping.keycodes.iter().copied().filter(|&k| k != 0).collect();
        let deadline = Instant::now() + MODIFIER_WAIT;
        loop {
            let keys = self.conn.query_keymap()?.reply()?.keys;
            let held = modifier_keys.iter().any(|&k| keys[k as usize / 8] & (1 << (k % 8)) != 0);
            if !held {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("a modifier key (Ctrl, Alt, Shift or Super) is still held: dictation types nothing while one is, since letters would be shortcuts");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn key(&self, keycode: u8, press: bool) -> anyhow::Result<()> {
        let kind = if press { xproto::KEY_PRESS_EVENT } else { xproto::KEY_RELEASE_EVENT };
        self.conn.xtest_fake_input(kind, keycode, x11rb::CURRENT_TIME, self.root, 0, 0, 0)?;
        Ok(())
    }

    /// Types `text` (as [`typeable`] makes it) into whatever has the
    /// keyboard focus. Returns the characters typed.
    pub fn type_text(&mut self, text: &str) -> anyhow::Result<usize> {
        let text = typeable(text);
        if text.is_empty() {
            return Ok(0);
        }
        self.wait_for_modifiers()?;
        let mut map = self.keymap()?;
        // Keycodes remapped for an earlier text are still ours.
        let ours = std::mem::take(&mut self.remapped);
        for &keycode in &ours {
            let start = (keycode - map.min) as usize * map.per;
            map.keysyms[start..start + map.per].fill(0);
        }
        let shift = match map.stroke(SHIFT_L) {
            Stroke::Key { keycode, .. } => Some(keycode),
            Stroke::Missing(_) => None,
        };
        let mut spare = map.spare();
        let mut extra: Vec<(u32, u8)> = Vec::new();
        let mut strokes = Vec::with_capacity(text.len());
        for c in text.chars() {
            let keysym = keysym_for(c).expect("typeable keeps only characters with keysyms");
            let stroke = match map.stroke(keysym) {
                Stroke::Key { shift: true, .. } if shift.is_none() => Stroke::Missing(keysym),
                stroke => stroke,
            };
            let stroke = match stroke {
                Stroke::Missing(keysym) => match extra.iter().find(|(s, _)| *s == keysym) {
                    Some(&(_, keycode)) => Stroke::Key { keycode, shift: false },
                    None => {
                        let Some(keycode) = spare.pop() else {
                            self.remapped = extra.iter().map(|(_, k)| *k).chain(ours.iter().copied()).collect();
                            self.restore()?;
                            bail!("more distinct characters than free keycodes: {c:?} cannot be typed");
                        };
                        extra.push((keysym, keycode));
                        Stroke::Key { keycode, shift: false }
                    }
                },
                key => key,
            };
            strokes.push(stroke);
        }
        for &(keysym, keycode) in &extra {
            let mut row = vec![0u32; map.per];
            row[0] = keysym;
            if map.per > 1 {
                row[1] = keysym;
            }
            self.conn.change_keyboard_mapping(1, keycode, map.per as u8, &row)?;
        }
        self.remapped = extra.iter().map(|(_, k)| *k).chain(ours).collect();
        if !extra.is_empty() {
            // The round trip makes the new mapping (and its MappingNotify) precede the keys.
            self.conn.get_input_focus()?.reply()?;
        }
        for stroke in &strokes {
            let Stroke::Key { keycode, shift: shifted } = *stroke else { unreachable!("every stroke has a key") };
            if shifted && let Some(shift) = shift {
                self.key(shift, true)?;
            }
            self.key(keycode, true)?;
            self.key(keycode, false)?;
            if shifted && let Some(shift) = shift {
                self.key(shift, false)?;
            }
        }
        self.conn.get_input_focus()?.reply()?;
        self.restore_at = (!self.remapped.is_empty()).then(|| Instant::now() + RESTORE_AFTER);
        Ok(strokes.len())
    }

    /// When the remapped keycodes are due to be emptied.
    pub fn restore_due(&self) -> Option<Instant> {
        self.restore_at
    }

    /// Empties the keycodes dictation gave symbols to.
    pub fn restore(&mut self) -> anyhow::Result<()> {
        self.restore_at = None;
        if self.remapped.is_empty() {
            return Ok(());
        }
        let per = self.conn.get_keyboard_mapping(self.min, 1)?.reply()?.keysyms_per_keycode;
        for keycode in std::mem::take(&mut self.remapped) {
            self.conn.change_keyboard_mapping(1, keycode, per, &vec![0u32; per as usize])?;
        }
        self.conn.get_input_focus()?.reply()?;
        Ok(())
    }
}

impl Drop for Typist {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_become_their_x_keysyms() {
        assert_eq!(keysym_for('a'), Some(0x61));
        assert_eq!(keysym_for('é'), Some(0xe9));
        assert_eq!(keysym_for('€'), Some(0x0100_20ac));
        assert_eq!(keysym_for('\n'), None);
        assert_eq!(keysym_for('\u{7f}'), None);
    }

    #[test]
    fn line_breaks_and_controls_never_reach_the_keyboard() {
        assert_eq!(typeable("  rm -rf /\nyes\r\n\tok\u{1b}[A "), "rm -rf / yes ok[A");
        assert_eq!(typeable("\n\n"), "");
    }

    #[test]
    fn strokes_use_the_plain_level_then_shift_then_a_spare_key() {
        // keycode 10: a / A; 11: 1 / !; 12: empty; 13: Shift_L; 14: empty.
        let map = KeyMap { min: 10, per: 2, keysyms: vec![0x61, 0x41, 0x31, 0x21, 0, 0, SHIFT_L, 0, 0, 0] };
        assert_eq!(map.stroke(0x61), Stroke::Key { keycode: 10, shift: false });
        assert_eq!(map.stroke(0x41), Stroke::Key { keycode: 10, shift: true });
        assert_eq!(map.stroke(0x21), Stroke::Key { keycode: 11, shift: true });
        assert_eq!(map.stroke(0xe9), Stroke::Missing(0xe9));
        assert_eq!(map.spare(), vec![14, 12]);
    }
}
