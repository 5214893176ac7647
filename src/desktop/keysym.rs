//! Characters as keysyms, for the two typists (XTest on X11, the virtual
//! keyboard's generated keymap on wlroots).

/// The X keysym for a character (X11's keysymdef: Latin-1 maps to itself,
/// everything else to 0x0100_0000 + its code point). None for control characters.
pub fn keysym_for(c: char) -> Option<u32> {
    let code = c as u32;
    match code {
        0x20..=0x7e | 0xa0..=0xff => Some(code),
        0..=0x1f | 0x7f..=0x9f => None,
        _ => Some(0x0100_0000 + code),
    }
}
