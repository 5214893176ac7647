//! A window's pixels on X11 (the core protocol's GetImage of the window, as
//! the screen shows it): only its own content — every window stacked above
//! it that overlaps (`_NET_CLIENT_LIST_STACKING`), an always-on-top sidebar
//! or an excluded app among them, and every unmanaged window shown above it
//! (menus, tooltips, notification bubbles: override-redirect), is painted
//! over before the picture leaves this function.
//!
//! Every read counts in `READS` (and the window it read in `LAST_READ`), so a
//! test can prove that a window the privacy rules exclude is never read.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use x11rb::connection::Connection;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, ImageFormat, ImageOrder, Window};
use x11rb::rust_connection::RustConnection;

/// How many times any window's pixels were read in this process.
pub static READS: AtomicU64 = AtomicU64::new(0);
/// The window read last (0: none yet).
pub static LAST_READ: AtomicU32 = AtomicU32::new(0);

/// The grey that covers what is not the window's own.
const COVER: [u8; 4] = [128, 128, 128, 255];

/// A window's rectangle on the screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
}

impl Rect {
    fn intersect(&self, other: &Rect) -> Option<Rect> {
        let (x0, y0) = (self.x.max(other.x), self.y.max(other.y));
        let x1 = (self.x + self.width as i32).min(other.x + other.width as i32);
        let y1 = (self.y + self.height as i32).min(other.y + other.height as i32);
        (x1 > x0 && y1 > y0).then(|| Rect { x: x0, y: y0, width: (x1 - x0) as u32, height: (y1 - y0) as u32 })
    }
}

/// Where `window` is on the screen (its content, not the window manager's frame).
pub fn rect_of(conn: &RustConnection, root: Window, window: Window) -> Result<Rect, String> {
    let geometry = conn.get_geometry(window).map_err(|e| e.to_string())?.reply().map_err(|e| format!("window {window}: {e}"))?;
    let origin = conn.translate_coordinates(window, root, 0, 0).map_err(|e| e.to_string())?.reply().map_err(|e| format!("window {window}: {e}"))?;
    Ok(Rect { x: i32::from(origin.dst_x), y: i32::from(origin.dst_y), width: u32::from(geometry.width), height: u32::from(geometry.height) })
}

/// The managed windows in stacking order, bottom first.
fn stacking(conn: &RustConnection, root: Window) -> Vec<Window> {
    let atom = conn.intern_atom(false, b"_NET_CLIENT_LIST_STACKING").ok().and_then(|c| c.reply().ok()).map(|r| r.atom);
    let Some(atom) = atom else { return Vec::new() };
    conn.get_property(false, root, atom, AtomEnum::WINDOW, 0, 4096)
        .ok()
        .and_then(|c| c.reply().ok())
        .and_then(|r| r.value32().map(|v| v.collect()))
        .unwrap_or_default()
}

/// The whole screen (the root window), RGBA.
pub fn capture_screen(conn: &RustConnection, root: Window) -> Result<image::RgbaImage, String> {
    let screen = conn.setup().roots.iter().find(|s| s.root == root).ok_or("no such screen")?;
    let (w, h) = (screen.width_in_pixels, screen.height_in_pixels);
    READS.fetch_add(1, Ordering::SeqCst);
    LAST_READ.store(root, Ordering::SeqCst);
    read_rgba(conn, root, 0, 0, w, h)
}

/// The pixels of `window` that are on the screen, RGBA, with the windows
/// stacked above it covered. An unmapped or off-screen window is an error.
pub fn capture(conn: &RustConnection, root: Window, window: Window) -> Result<image::RgbaImage, String> {
    let screen = conn.setup().roots.iter().find(|s| s.root == root).ok_or("no such screen")?;
    let whole = Rect { x: 0, y: 0, width: u32::from(screen.width_in_pixels), height: u32::from(screen.height_in_pixels) };
    let rect = rect_of(conn, root, window)?;
    let shown = rect.intersect(&whole).ok_or_else(|| format!("window {window} is not on the screen"))?;
    let (w, h) = (u16::try_from(shown.width).map_err(|_| "too wide")?, u16::try_from(shown.height).map_err(|_| "too tall")?);
    READS.fetch_add(1, Ordering::SeqCst);
    LAST_READ.store(window, Ordering::SeqCst);
    // Whatever is stacked above the window and overlaps it is not the window's:
    // covered, as it was just before the read and just after (a popup that
    // opened or closed meanwhile is covered either way).
    let before = covering(conn, root, window);
    let mut picture = read_rgba(conn, window, (shown.x - rect.x) as i16, (shown.y - rect.y) as i16, w, h)?;
    let after = covering(conn, root, window);
    for other in before.into_iter().chain(after) {
        if let Some(overlap) = other.intersect(&shown) {
            for y in overlap.y..overlap.y + overlap.height as i32 {
                for x in overlap.x..overlap.x + overlap.width as i32 {
                    picture.put_pixel((x - shown.x) as u32, (y - shown.y) as u32, image::Rgba(COVER));
                }
            }
        }
    }
    Ok(picture)
}

/// What is shown above `window`: the managed windows stacked above it with
/// their window manager's frames (title bars name what they show), and the
/// unmanaged ones (`popups_above`).
fn covering(conn: &RustConnection, root: Window, window: Window) -> Vec<Rect> {
    let mut above: Vec<Rect> = Vec::new();
    let order = stacking(conn, root);
    if let Some(at) = order.iter().position(|w| *w == window) {
        above.extend(order[at + 1..].iter().filter_map(|w| framed_rect_of(conn, root, *w)));
    }
    above.extend(popups_above(conn, root, window));
    above
}

/// A managed window's rectangle with its frame (`_NET_FRAME_EXTENTS`: left, right, top, bottom).
fn framed_rect_of(conn: &RustConnection, root: Window, window: Window) -> Option<Rect> {
    let r = rect_of(conn, root, window).ok()?;
    let atom = conn.intern_atom(false, b"_NET_FRAME_EXTENTS").ok()?.reply().ok()?.atom;
    let extents: Vec<u32> = conn
        .get_property(false, window, atom, AtomEnum::CARDINAL, 0, 4)
        .ok()
        .and_then(|c| c.reply().ok())
        .and_then(|p| p.value32().map(|v| v.collect()))
        .unwrap_or_default();
    let [left, right, top, bottom] = <[u32; 4]>::try_from(extents).unwrap_or([0; 4]).map(|e| e.min(512));
    Some(Rect { x: r.x - left as i32, y: r.y - top as i32, width: r.width + left + right, height: r.height + top + bottom })
}

/// Windows no window manager lists that are shown above `window`: menus,
/// tooltips, notification bubbles, lock screens (override-redirect children
/// of the root, in the server's stacking order). Without a compositing
/// manager their pixels are in the window's own area of the screen; with
/// one (`_NET_WM_CM_Sn` owned), the window's pixels are its own, and the
/// compositor's overlay window must not blank them.
fn popups_above(conn: &RustConnection, root: Window, window: Window) -> Vec<Rect> {
    let screen = conn.setup().roots.iter().position(|s| s.root == root).unwrap_or(0);
    let compositing = conn
        .intern_atom(false, format!("_NET_WM_CM_S{screen}").as_bytes())
        .ok()
        .and_then(|c| c.reply().ok())
        .and_then(|a| conn.get_selection_owner(a.atom).ok()?.reply().ok())
        .is_some_and(|owner| owner.owner != x11rb::NONE);
    if compositing {
        return Vec::new();
    }
    let Some(children) = conn.query_tree(root).ok().and_then(|c| c.reply().ok()).map(|t| t.children) else { return Vec::new() };
    // The window's own top-level (its window manager's frame, or itself).
    let mut top = window;
    for _ in 0..16 {
        match conn.query_tree(top).ok().and_then(|c| c.reply().ok()) {
            Some(tree) if tree.parent != root && tree.parent != x11rb::NONE => top = tree.parent,
            _ => break,
        }
    }
    let Some(at) = children.iter().position(|w| *w == top) else { return Vec::new() };
    children[at + 1..]
        .iter()
        .filter(|w| {
            conn.get_window_attributes(**w).ok().and_then(|c| c.reply().ok()).is_some_and(|a| {
                a.override_redirect && a.map_state == x11rb::protocol::xproto::MapState::VIEWABLE && a.class == x11rb::protocol::xproto::WindowClass::INPUT_OUTPUT
            })
        })
        .filter_map(|w| {
            let g = conn.get_geometry(*w).ok()?.reply().ok()?;
            let border = i32::from(g.border_width);
            Some(Rect { x: i32::from(g.x), y: i32::from(g.y), width: (i32::from(g.width) + 2 * border).max(0) as u32, height: (i32::from(g.height) + 2 * border).max(0) as u32 })
        })
        .collect()
}

/// GetImage of `drawable`'s rectangle as RGBA (32-bit pixels, either byte order).
fn read_rgba(conn: &RustConnection, drawable: Window, x: i16, y: i16, w: u16, h: u16) -> Result<image::RgbaImage, String> {
    let reply = conn
        .get_image(ImageFormat::Z_PIXMAP, drawable, x, y, w, h, !0)
        .map_err(|e| e.to_string())?
        .reply()
        .map_err(|e| format!("window {drawable}'s pixels cannot be read ({e}): is it shown?"))?;
    let setup = conn.setup();
    let format = setup.pixmap_formats.iter().find(|f| f.depth == reply.depth).ok_or_else(|| format!("no pixmap format for depth {}", reply.depth))?;
    if format.bits_per_pixel != 32 {
        return Err(format!("a {}-bit display (cowork reads 24- and 32-bit ones)", format.bits_per_pixel));
    }
    let pad = u32::from(format.scanline_pad).max(8);
    let stride = ((u32::from(w) * 32).div_ceil(pad) * pad / 8) as usize;
    if reply.data.len() < stride * usize::from(h) {
        return Err("the X server sent fewer pixels than asked".into());
    }
    let lsb = setup.image_byte_order == ImageOrder::LSB_FIRST;
    let mut picture = image::RgbaImage::new(u32::from(w), u32::from(h));
    for (y, row) in reply.data.chunks(stride).take(usize::from(h)).enumerate() {
        for x in 0..usize::from(w) {
            let p = &row[x * 4..x * 4 + 4];
            let (r, g, b) = if lsb { (p[2], p[1], p[0]) } else { (p[1], p[2], p[3]) };
            picture.put_pixel(x as u32, y as u32, image::Rgba([r, g, b, 255]));
        }
    }
    Ok(picture)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rectangles_intersect_or_not() {
        let a = Rect { x: 0, y: 0, width: 100, height: 50 };
        assert_eq!(a.intersect(&Rect { x: 90, y: 40, width: 30, height: 30 }), Some(Rect { x: 90, y: 40, width: 10, height: 10 }));
        assert_eq!(a.intersect(&Rect { x: 100, y: 0, width: 10, height: 10 }), None, "touching is not overlapping");
        assert_eq!(a.intersect(&Rect { x: -20, y: -20, width: 30, height: 30 }), Some(Rect { x: 0, y: 0, width: 10, height: 10 }));
    }
}
