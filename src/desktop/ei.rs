//! Typing through libei: where a Wayland desktop gives apps no virtual
//! keyboard (KDE Plasma, GNOME 46+), the RemoteDesktop portal hands cowork a
//! socket to the compositor's EIS server (`ConnectToEIS`), and cowork speaks
//! the libei protocol on it (`reis`, pure Rust): a sender context, the seat's
//! keyboard bound, the keymap the compositor sends read (`kbvm`, a pure-Rust
//! XKB compiler) to find each character's evdev keycode and whether it needs
//! Shift, then one frame per key change. Characters the keymap cannot type
//! are typed as text where the server offers libei's text interface, else
//! they are counted and said, never guessed.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;

use reis::ei;
use reis::ei::keyboard::KeyState;
use reis::event::{DeviceCapability, EiEvent};

/// Which key types each character, and Shift's key.
#[derive(Debug, Default)]
pub struct KeyTable {
    by_sym: HashMap<kbvm::Keysym, (u32, bool)>,
    shift: Option<u32>,
}

impl KeyTable {
    /// From an XKB keymap's text (as a compositor sends it: complete, maybe NUL-terminated).
    pub fn from_keymap(text: &str) -> Result<KeyTable, String> {
        use kbvm::xkb::diagnostic::WriteToLog;
        let text = text.trim_end_matches('\0');
        let keymap = kbvm::xkb::Context::default().keymap_from_bytes(WriteToLog, None, text.as_bytes()).map_err(|err| format!("the keyboard's keymap: {err}"))?;
        Ok(Self::from_compiled(&keymap))
    }

    fn from_compiled(keymap: &kbvm::xkb::Keymap) -> KeyTable {
        use kbvm::{Keysym, ModifierMask, syms};
        let mut by_sym: HashMap<Keysym, (u32, bool)> = HashMap::new();
        let mut shift = None;
        for key in keymap.keys() {
            let code = key.keycode().to_evdev();
            // Keys past X's 255 keycodes (media keys such as KEY_EURO) are not typed with:
            // Mutter's virtual keyboard drops them.
            if code > 255 - 8 {
                continue;
            }
            // The first group (layout) only: it is the one in use unless the user switched.
            let Some(Some(group)) = key.groups().next() else { continue };
            for (level_index, level) in group.levels().enumerate() {
                let needs_shift = if level_index == 0 {
                    false
                } else if group.ty().mappings().any(|m| m.level() == level_index && m.mask() == ModifierMask::SHIFT) {
                    true
                } else {
                    // AltGr and other levels: not typed this way.
                    continue;
                };
                for &sym in level.symbols() {
                    if sym == syms::Shift_L {
                        shift.get_or_insert(code);
                    }
                    let entry = by_sym.entry(sym).or_insert((code, needs_shift));
                    if entry.1 && !needs_shift {
                        *entry = (code, false);
                    }
                }
            }
        }
        KeyTable { by_sym, shift }
    }

    /// For an XKB layout and variant by name (`us`, `de` + `nodeadkeys`), compiled from the
    /// system's XKB data as the desktop compiles it.
    pub fn for_layout(layout: &str, variant: &str) -> Result<KeyTable, String> {
        use kbvm::xkb::diagnostic::WriteToLog;
        let groups = [kbvm::xkb::rmlvo::Group { layout, variant }];
        let keymap = kbvm::xkb::Context::default().keymap_from_names(WriteToLog, None, None, Some(&groups), None);
        let table = Self::from_compiled(&keymap);
        // An unknown name still compiles (to the keys' codes with no letters on them).
        if !table.by_sym.keys().any(|sym| sym.char().is_some_and(char::is_alphabetic)) {
            return Err(format!("no keyboard layout {layout:?} in the system's XKB data"));
        }
        Ok(table)
    }

    /// The keysym the layout names `c` by (a legacy keysym such as Cyrillic_ya where one exists).
    pub fn keysym(&self, c: char) -> u32 {
        kbvm::Keysym::from_char(c).0
    }

    /// The key for `c` and whether Shift is held for it (None: this layout cannot type it).
    pub fn key(&self, c: char) -> Option<(u32, bool)> {
        let (code, shifted) = *self.by_sym.get(&kbvm::Keysym::from_char(c))?;
        (!shifted || self.shift.is_some()).then_some((code, shifted))
    }
}

fn now_micros() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000 + now.tv_nsec as u64 / 1_000
}

/// What typing did: how many characters were typed, and which could not be.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Typed {
    pub typed: usize,
    pub untypeable: Vec<char>,
}

/// Types `text` on the EIS connection `socket` (a sender context named
/// "cowork"): binds the first seat's keyboard, waits for the device to be
/// resumed, presses and releases each character's key (Shift around it
/// where its level needs it), one frame per change, and disconnects.
pub fn type_text(socket: UnixStream, text: &str) -> Result<Typed, String> {
    // A compositor that never resumes the keyboard (a locked session) must not hold
    // dictation for ever: the socket is shut after a while, which ends the wait with an error.
    let watched = socket.try_clone().map_err(|err| format!("the EIS socket: {err}"))?;
    let (done, finished) = crossbeam_channel::bounded::<()>(0);
    let watchdog = std::thread::Builder::new()
        .name("ei-watchdog".into())
        .spawn(move || {
            if matches!(finished.recv_timeout(TYPE_WITHIN), Err(crossbeam_channel::RecvTimeoutError::Timeout)) {
                let _ = watched.shutdown(std::net::Shutdown::Both);
            }
        })
        .map_err(|err| format!("cannot start the EIS watchdog: {err}"))?;
    let typed = type_on(socket, text);
    drop(done);
    let _ = watchdog.join();
    typed
}

/// How long the compositor has to hand cowork a keyboard and take the keys.
const TYPE_WITHIN: std::time::Duration = std::time::Duration::from_secs(15);

fn type_on(socket: UnixStream, text: &str) -> Result<Typed, String> {
    let context = ei::Context::new(socket).map_err(|err| format!("the EIS socket: {err}"))?;
    let (connection, mut events) =
        context.handshake_blocking("cowork", ei::handshake::ContextType::Sender).map_err(|err| format!("the compositor's EIS server refused cowork: {err}"))?;
    let mut keymap: Option<String> = None;
    let mut sequence = 0u32;
    for event in events.by_ref() {
        match event.map_err(|err| format!("the EIS connection: {err}"))? {
            EiEvent::SeatAdded(added) => {
                added.seat.bind_capabilities(DeviceCapability::Keyboard.into());
                connection.flush().map_err(|err| format!("the EIS connection: {err}"))?;
            }
            EiEvent::DeviceAdded(added) => {
                if let Some(map) = added.device.keymap() {
                    let mut bytes = vec![0u8; map.size as usize];
                    let file = File::from(map.fd.try_clone().map_err(|err| err.to_string())?);
                    // At offset 0 whatever the descriptor's position (the server may have moved it).
                    file.read_exact_at(&mut bytes, 0).map_err(|err| format!("the keyboard's keymap: {err}"))?;
                    keymap = Some(String::from_utf8_lossy(&bytes).into_owned());
                }
            }
            EiEvent::DeviceResumed(resumed) => {
                let Some(keyboard) = resumed.device.interface::<ei::Keyboard>() else { continue };
                let table = KeyTable::from_keymap(keymap.as_deref().ok_or("the compositor sent the keyboard without a keymap")?)?;
                let device = resumed.device.device();
                sequence += 1;
                device.start_emulating(connection.serial(), sequence);
                let mut done = Typed::default();
                let change = |code: u32, state: KeyState| {
                    keyboard.key(code, state);
                    device.frame(connection.serial(), now_micros());
                };
                for c in text.chars() {
                    let Some((code, shifted)) = table.key(c) else {
                        done.untypeable.push(c);
                        continue;
                    };
                    let shift = table.shift.filter(|_| shifted);
                    if let Some(shift) = shift {
                        change(shift, KeyState::Press);
                    }
                    change(code, KeyState::Press);
                    change(code, KeyState::Released);
                    if let Some(shift) = shift {
                        change(shift, KeyState::Released);
                    }
                    done.typed += 1;
                }
                device.stop_emulating(connection.serial());
                connection.connection().disconnect();
                flush_all(&connection)?;
                return Ok(done);
            }
            EiEvent::Disconnected(gone) => return Err(format!("the compositor ended the EIS connection: {:?} {:?}", gone.reason, gone.explanation)),
            _ => {}
        }
    }
    Err("the EIS connection ended before a keyboard was ready".to_owned())
}

/// Flushes what is buffered, waiting while the socket is full.
fn flush_all(connection: &reis::event::Connection) -> Result<(), String> {
    for _ in 0..200 {
        match connection.flush() {
            Ok(()) => return Ok(()),
            Err(err) if err.raw_os_error() == libc::EAGAIN => std::thread::sleep(std::time::Duration::from_millis(5)),
            Err(err) => return Err(format!("the EIS connection: {err}")),
        }
    }
    Err("the compositor's EIS server stopped reading".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small US-like keymap: h, 1/!, é on AltGr (not typed), Shift (keycodes are evdev + 8).
    const KEYMAP: &str = r#"xkb_keymap {
    xkb_keycodes "t" { minimum = 8; maximum = 255; <AE01> = 10; <AC06> = 43; <LFSH> = 50; <AC01> = 38; };
    xkb_types "t" {
        virtual_modifiers NumLock,LevelThree;
        type "ONE_LEVEL" { modifiers = none; level_name[Level1] = "Any"; };
        type "TWO_LEVEL" { modifiers = Shift; map[Shift] = Level2; level_name[Level1] = "Base"; level_name[Level2] = "Shift"; };
        type "THREE_LEVEL" { modifiers = Shift+LevelThree; map[Shift] = Level2; map[LevelThree] = Level3; level_name[Level1] = "Base"; level_name[Level2] = "Shift"; level_name[Level3] = "AltGr"; };
    };
    xkb_compatibility "t" { };
    xkb_symbols "t" {
        key <AE01> { type = "TWO_LEVEL", [ 1, exclam ] };
        key <AC06> { type = "TWO_LEVEL", [ h, H ] };
        key <AC01> { type = "THREE_LEVEL", [ a, A, eacute ] };
        key <LFSH> { type = "ONE_LEVEL", [ Shift_L ] };
    };
};
"#;

    #[test]
    fn a_named_layout_is_compiled_from_the_systems_xkb_data() {
        if !std::path::Path::new("/usr/share/X11/xkb/rules/evdev").exists() {
            return;
        }
        let us = KeyTable::for_layout("us", "").unwrap();
        assert_eq!(us.key('€'), None, "only on the Euro media key (KEY_EURO, 435), beyond what X-style keycodes reach");
        assert_eq!(us.key('a'), Some((30, false)));
        assert_eq!(us.key('A'), Some((30, true)));
        assert_eq!(us.key('é'), None);
        let de = KeyTable::for_layout("de", "").unwrap();
        assert_eq!(de.key('z'), Some((21, false)), "y and z swap places on a German keyboard");
        assert!(de.key('ö').is_some());
        assert!(KeyTable::for_layout("no-such-layout", "").is_err());
    }

    #[test]
    fn the_keymap_gives_each_characters_key_and_shift_and_nothing_it_cannot_type() {
        let table = KeyTable::from_keymap(&format!("{KEYMAP}\0")).unwrap();
        assert_eq!(table.key('h'), Some((35, false)));
        assert_eq!(table.key('H'), Some((35, true)));
        assert_eq!(table.key('!'), Some((2, true)));
        assert_eq!(table.key('a'), Some((30, false)));
        assert_eq!(table.key('é'), None, "AltGr levels are not typed this way");
        assert_eq!(table.key('z'), None);
        assert_eq!(table.shift, Some(42));
        assert!(KeyTable::from_keymap("xkb_keymap { nonsense").is_err());
    }
}
