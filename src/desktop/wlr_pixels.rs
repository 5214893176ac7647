//! A window's pixels on sway (issue 57): where the focused window is comes
//! from sway's IPC (its content rectangle, its output, the floating windows
//! above it), and only that region of its output is copied, with
//! wlr-screencopy into a shared-memory buffer — no portal, no PipeWire.
//! Floating windows stacked above the one read are painted grey before the
//! picture leaves this module, as on X11. Runs on the caller's thread (the
//! `screen` worker); every read is counted in `x11_pixels::READS`, which
//! counts pixel reads of any desktop.
//!
//! The focused window is read only while it is the window the caller judged
//! (its title as sway says it now): `focused` gives that description first,
//! and `capture_focused` refuses when focus or title moved since.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use wayland_client::globals::{GlobalListContents, registry_queue_init};
use wayland_client::protocol::wl_buffer::WlBuffer;
use wayland_client::protocol::wl_output::{self, WlOutput};
use wayland_client::protocol::wl_registry::WlRegistry;
use wayland_client::protocol::wl_shm::{self, WlShm};
use wayland_client::protocol::wl_shm_pool::WlShmPool;
use wayland_client::{Connection, Dispatch, Proxy, QueueHandle, WEnum};
use wayland_protocols_wlr::screencopy::v1::client::zwlr_screencopy_frame_v1::{self, ZwlrScreencopyFrameV1};
use wayland_protocols_wlr::screencopy::v1::client::zwlr_screencopy_manager_v1::ZwlrScreencopyManagerV1;

use super::ipc::{Rect, rect_of as rect};

/// How long a copy may take before the compositor is considered stuck.
const COPY_TIMEOUT: Duration = Duration::from_secs(3);
/// The largest region copied (a 8K screen).
const MAX_PIXELS: i64 = 7680 * 4320;

/// The focused window as sway describes it, with what a read needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Focused {
    pub con_id: u64,
    pub title: String,
    pub app_id: String,
    pub pid: Option<u32>,
    /// The window's content, in the layout's coordinates.
    pub content: Rect,
    /// Its output: name and rectangle.
    pub output: String,
    pub output_rect: Rect,
    /// Floating windows above it that overlap it (painted grey).
    pub above: Vec<Rect>,
}

/// The focused window of the sway at `swaysock`, if one is focused.
pub fn focused(swaysock: &Path) -> Result<Option<Focused>, String> {
    let tree = super::ipc::sway_request(swaysock, 4, "")?;
    Ok(focused_in(&tree))
}

/// A floating window with its title bar (`deco_rect`, drawn above its
/// `rect`) and its borders: everything of it that can be on screen.
fn decorated(node: &Value) -> Option<Rect> {
    let r = rect(&node["rect"])?;
    let title = rect(&node["deco_rect"]).map_or(0, |d| d.height.max(0));
    let border = node["current_border_width"].as_i64().map_or(0, |b| b.clamp(0, 64) as i32) + 2;
    Some(Rect { x: r.x - border, y: r.y - title - border, width: r.width + 2 * border, height: r.height + title + 2 * border })
}

fn overlaps(a: &Rect, b: &Rect) -> bool {
    a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height
}

/// Windows (leaves with a pid or app id) under `node`, with whether they float.
fn windows<'a>(node: &'a Value, floating: bool, out: &mut Vec<(&'a Value, bool)>) {
    let leaf = node["nodes"].as_array().is_none_or(|n| n.is_empty()) && node["floating_nodes"].as_array().is_none_or(|n| n.is_empty());
    if (node["type"] == "con" || node["type"] == "floating_con") && leaf && (node["pid"].is_number() || node["app_id"].is_string()) {
        out.push((node, floating));
        return;
    }
    for child in node["nodes"].as_array().into_iter().flatten() {
        windows(child, floating, out);
    }
    for child in node["floating_nodes"].as_array().into_iter().flatten() {
        windows(child, true, out);
    }
}

/// The focused window of a sway tree (`get_tree`), its output, and the floating windows over it.
pub fn focused_in(tree: &Value) -> Option<Focused> {
    for output in tree["nodes"].as_array().into_iter().flatten().filter(|o| o["type"] == "output") {
        let mut found = Vec::new();
        windows(output, false, &mut found);
        let Some(&(node, floating)) = found.iter().find(|(n, _)| n["focused"] == true) else { continue };
        let outer = rect(&node["rect"])?;
        let inner = rect(&node["window_rect"]).unwrap_or(Rect { x: 0, y: 0, width: outer.width, height: outer.height });
        let content = Rect { x: outer.x + inner.x, y: outer.y + inner.y, width: inner.width, height: inner.height };
        // Floating windows are above tiled ones; a focused floating window is raised above the rest.
        let above = if floating {
            Vec::new()
        } else {
            found
                .iter()
                .filter(|(n, float)| *float && n["id"] != node["id"] && n["visible"] != false)
                .filter_map(|(n, _)| decorated(n))
                .filter(|r| overlaps(r, &content))
                .collect()
        };
        return Some(Focused {
            con_id: node["id"].as_u64().unwrap_or_default(),
            title: node["name"].as_str().unwrap_or_default().to_owned(),
            app_id: node["app_id"].as_str().or_else(|| node["window_properties"]["class"].as_str()).unwrap_or_default().to_owned(),
            pid: node["pid"].as_i64().and_then(|p| u32::try_from(p).ok()).filter(|p| *p > 0),
            content,
            output: output["name"].as_str().unwrap_or_default().to_owned(),
            output_rect: rect(&output["rect"])?,
            above,
        });
    }
    None
}

/// The pixels of the window sway has focused, if it is still `expected`
/// (same container and title): its content region of its output, floating
/// windows above it painted grey.
pub fn capture_focused(socket: &Path, swaysock: &Path, expected: &Focused) -> Result<image::RgbaImage, String> {
    let now = focused(swaysock)?.ok_or("no window has the focus")?;
    if now.con_id != expected.con_id || now.title != expected.title {
        return Err("the focus moved before the window was read".into());
    }
    let region = Rect { x: now.content.x - now.output_rect.x, y: now.content.y - now.output_rect.y, width: now.content.width, height: now.content.height };
    let mut picture = capture_region(socket, &now.output, region)?;
    // The region is in the layout's (logical) units, the copy in the output's pixels (scale 2: twice as many).
    let (sx, sy) = (f64::from(picture.width()) / f64::from(region.width.max(1)), f64::from(picture.height()) / f64::from(region.height.max(1)));
    for r in &now.above {
        let (x0, y0) = ((f64::from(r.x - now.content.x) * sx).floor().max(0.0) as i32, (f64::from(r.y - now.content.y) * sy).floor().max(0.0) as i32);
        let x1 = ((f64::from(r.x + r.width - now.content.x) * sx).ceil() as i32).min(picture.width() as i32);
        let y1 = ((f64::from(r.y + r.height - now.content.y) * sy).ceil() as i32).min(picture.height() as i32);
        for y in y0..y1.max(y0) {
            for x in x0..x1.max(x0) {
                picture.put_pixel(x as u32, y as u32, image::Rgba([128, 128, 128, 255]));
            }
        }
    }
    Ok(picture)
}

#[derive(Default)]
struct Copy {
    outputs: Vec<(WlOutput, Option<String>)>,
    /// The shared-memory layout the compositor asked for: format, width, height, stride.
    buffer: Option<(wl_shm::Format, u32, u32, u32)>,
    /// Version 3 says when every buffer kind was offered.
    offered: bool,
    y_invert: bool,
    ready: bool,
    failed: bool,
}

impl Dispatch<WlRegistry, GlobalListContents> for Copy {
    fn event(_: &mut Self, _: &WlRegistry, _: <WlRegistry as Proxy>::Event, _: &GlobalListContents, _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<WlShm, ()> for Copy {
    fn event(_: &mut Self, _: &WlShm, _: wl_shm::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<WlShmPool, ()> for Copy {
    fn event(_: &mut Self, _: &WlShmPool, _: <WlShmPool as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<WlBuffer, ()> for Copy {
    fn event(_: &mut Self, _: &WlBuffer, _: <WlBuffer as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<ZwlrScreencopyManagerV1, ()> for Copy {
    fn event(_: &mut Self, _: &ZwlrScreencopyManagerV1, _: <ZwlrScreencopyManagerV1 as Proxy>::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {}
}

impl Dispatch<WlOutput, usize> for Copy {
    fn event(state: &mut Self, _: &WlOutput, event: wl_output::Event, index: &usize, _: &Connection, _: &QueueHandle<Self>) {
        if let wl_output::Event::Name { name } = event
            && let Some(output) = state.outputs.get_mut(*index)
        {
            output.1 = Some(name);
        }
    }
}

impl Dispatch<ZwlrScreencopyFrameV1, ()> for Copy {
    fn event(state: &mut Self, _: &ZwlrScreencopyFrameV1, event: zwlr_screencopy_frame_v1::Event, _: &(), _: &Connection, _: &QueueHandle<Self>) {
        match event {
            zwlr_screencopy_frame_v1::Event::Buffer { format: WEnum::Value(format), width, height, stride } => {
                state.buffer = Some((format, width, height, stride));
            }
            zwlr_screencopy_frame_v1::Event::BufferDone => state.offered = true,
            zwlr_screencopy_frame_v1::Event::Flags { flags: WEnum::Value(flags) } => {
                state.y_invert = flags.contains(zwlr_screencopy_frame_v1::Flags::YInvert);
            }
            zwlr_screencopy_frame_v1::Event::Ready { .. } => state.ready = true,
            zwlr_screencopy_frame_v1::Event::Failed => state.failed = true,
            _ => {}
        }
    }
}

/// Copies `region` (in the output's coordinates) of the output named
/// `output` (the only one when the compositor names none) at the socket.
pub fn capture_region(socket: &Path, output: &str, region: Rect) -> Result<image::RgbaImage, String> {
    if region.width <= 0 || region.height <= 0 || i64::from(region.width) * i64::from(region.height) > MAX_PIXELS {
        return Err(format!("a region of {}×{} is not read", region.width, region.height));
    }
    let stream = UnixStream::connect(socket).map_err(|err| format!("cannot reach the compositor at {}: {err}", socket.display()))?;
    let conn = Connection::from_socket(stream).map_err(|err| format!("the compositor's socket: {err}"))?;
    let (globals, mut queue) = registry_queue_init::<Copy>(&conn).map_err(|err| format!("the compositor's registry: {err}"))?;
    let qh = queue.handle();
    let shm: WlShm = globals.bind(&qh, 1..=1, ()).map_err(|_| "the compositor offers no shared memory".to_owned())?;
    let manager: ZwlrScreencopyManagerV1 =
        globals.bind(&qh, 1..=3, ()).map_err(|_| "the compositor offers no wlr-screencopy: a window's pixels cannot be read here".to_owned())?;
    let mut state = Copy::default();
    let names: Vec<u32> = globals.contents().with_list(|list| list.iter().filter(|g| g.interface == WlOutput::interface().name).map(|g| g.name).collect());
    for (index, name) in names.into_iter().enumerate() {
        let version = globals.contents().with_list(|list| list.iter().find(|g| g.name == name).map_or(1, |g| g.version.min(4)));
        let output = globals.registry().bind::<WlOutput, _, _>(name, version, &qh, index);
        state.outputs.push((output, None));
    }
    queue.roundtrip(&mut state).map_err(|err| format!("the compositor did not answer: {err}"))?;
    let chosen = match state.outputs.iter().find(|(_, name)| name.as_deref() == Some(output)) {
        Some((o, _)) => o.clone(),
        None if state.outputs.len() == 1 => state.outputs[0].0.clone(),
        None => return Err(format!("no output is named {output}")),
    };
    let frame = manager.capture_output_region(0, &chosen, region.x, region.y, region.width, region.height, &qh, ());
    let deadline = Instant::now() + COPY_TIMEOUT;
    let wait = |state: &mut Copy, queue: &mut wayland_client::EventQueue<Copy>, done: &dyn Fn(&Copy) -> bool| -> Result<(), String> {
        while !done(state) && !state.failed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("the compositor did not copy the window in time".into());
            }
            conn.flush().map_err(|err| format!("the Wayland connection was lost: {err}"))?;
            queue.dispatch_pending(state).map_err(|err| format!("the Wayland connection was lost: {err}"))?;
            if done(state) || state.failed {
                break;
            }
            if let Some(guard) = queue.prepare_read() {
                let mut poll_fd = libc::pollfd { fd: guard.connection_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd for the duration of the call.
                if unsafe { libc::poll(&mut poll_fd, 1, left.as_millis().min(1_000) as i32) } > 0 {
                    match guard.read() {
                        Ok(_) => {}
                        Err(wayland_client::backend::WaylandError::Io(err)) if err.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(err) => return Err(format!("the Wayland connection was lost: {err}")),
                    }
                }
            }
        }
        if state.failed { Err("the compositor refused to copy the window".into()) } else { Ok(()) }
    };
    let v3 = manager.version() >= 3;
    wait(&mut state, &mut queue, &|s: &Copy| if v3 { s.offered } else { s.buffer.is_some() })?;
    let (format, width, height, stride) = state.buffer.ok_or("the compositor offers no shared-memory buffer for the copy")?;
    let size = u64::from(stride) * u64::from(height);
    if u64::from(width) * u64::from(height) > MAX_PIXELS as u64 || size > (MAX_PIXELS as u64) * 4 || stride < width * 4 {
        return Err(format!("a buffer of {width}×{height} (stride {stride}) is refused"));
    }
    let memory = memfd(size)?;
    let pool = shm.create_pool(memory.as_fd(), size as i32, &qh, ());
    let buffer = pool.create_buffer(0, width as i32, height as i32, stride as i32, format, &qh, ());
    frame.copy(&buffer);
    super::x11_pixels::READS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let outcome = wait(&mut state, &mut queue, &|s: &Copy| s.ready);
    frame.destroy();
    buffer.destroy();
    pool.destroy();
    outcome?;
    let file = std::fs::File::from(memory);
    let mut bytes = vec![0u8; size as usize];
    file.read_exact_at(&mut bytes, 0).map_err(|err| format!("cannot read the copied pixels: {err}"))?;
    to_rgba(&bytes, format, width, height, stride, state.y_invert)
}

/// A shared-memory file of `size` bytes.
fn memfd(size: u64) -> Result<OwnedFd, String> {
    let fd = super::wlr::memory_file(c"cowork-screencopy")?;
    std::fs::File::from(fd.try_clone().map_err(|err| err.to_string())?).set_len(size).map_err(|err| format!("cannot size the copy's buffer: {err}"))?;
    Ok(fd)
}

/// Shared-memory pixels (little-endian 32-bit formats) as RGBA, upright.
pub fn to_rgba(bytes: &[u8], format: wl_shm::Format, width: u32, height: u32, stride: u32, y_invert: bool) -> Result<image::RgbaImage, String> {
    use wl_shm::Format;
    let order: [usize; 3] = match format {
        Format::Argb8888 | Format::Xrgb8888 => [2, 1, 0],
        Format::Abgr8888 | Format::Xbgr8888 => [0, 1, 2],
        other => return Err(format!("the compositor copies in {other:?}, which cowork does not read")),
    };
    let mut picture = image::RgbaImage::new(width, height);
    for y in 0..height {
        let row = if y_invert { height - 1 - y } else { y } as usize * stride as usize;
        for x in 0..width as usize {
            let p = &bytes[row + x * 4..row + x * 4 + 4];
            picture.put_pixel(x as u32, y, image::Rgba([p[order[0]], p[order[1]], p[order[2]], 255]));
        }
    }
    Ok(picture)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_focused_window_is_its_content_and_floating_windows_over_it_are_named() {
        let tree = serde_json::json!({"type": "root", "nodes": [{
            "type": "output", "name": "HEADLESS-1", "rect": {"x": 0, "y": 0, "width": 1280, "height": 720},
            "nodes": [{"type": "workspace", "nodes": [
                {"id": 7, "type": "con", "name": "notes", "app_id": "foot", "pid": 42, "focused": true, "nodes": [],
                 "rect": {"x": 0, "y": 0, "width": 640, "height": 720}, "window_rect": {"x": 2, "y": 2, "width": 636, "height": 716}},
                {"id": 8, "type": "con", "name": "other", "app_id": "foot", "pid": 43, "focused": false, "nodes": [],
                 "rect": {"x": 640, "y": 0, "width": 640, "height": 720}}
            ], "floating_nodes": [
                {"id": 9, "type": "floating_con", "name": "cowork", "app_id": "cowork", "pid": 5, "focused": false, "nodes": [], "visible": true,
                 "rect": {"x": 500, "y": 100, "width": 300, "height": 200}, "deco_rect": {"x": 0, "y": 0, "width": 300, "height": 24}, "current_border_width": 2},
                {"id": 10, "type": "floating_con", "name": "far", "app_id": "x", "pid": 6, "focused": false, "nodes": [], "visible": true,
                 "rect": {"x": 900, "y": 100, "width": 100, "height": 100}}
            ]}]
        }]});
        let focused = focused_in(&tree).unwrap();
        assert_eq!((focused.con_id, focused.title.as_str(), focused.pid, focused.output.as_str()), (7, "notes", Some(42), "HEADLESS-1"));
        assert_eq!(focused.content, Rect { x: 2, y: 2, width: 636, height: 716 });
        assert_eq!(focused.above, [Rect { x: 496, y: 72, width: 308, height: 232 }], "its title bar and borders too");
    }

    #[test]
    fn shared_memory_pixels_read_in_both_byte_orders_and_upside_down() {
        // Two pixels a row, two rows, stride 12 (4 bytes of padding): red, green / blue, white as XRGB.
        let mut bytes = vec![0u8; 24];
        for (i, bgra) in [[0, 0, 255, 0], [0, 255, 0, 0], [255, 0, 0, 0], [255, 255, 255, 0]].iter().enumerate() {
            let at = (i / 2) * 12 + (i % 2) * 4;
            bytes[at..at + 4].copy_from_slice(bgra);
        }
        let p = to_rgba(&bytes, wl_shm::Format::Xrgb8888, 2, 2, 12, false).unwrap();
        assert_eq!([p.get_pixel(0, 0).0, p.get_pixel(1, 0).0, p.get_pixel(0, 1).0], [[255, 0, 0, 255], [0, 255, 0, 255], [0, 0, 255, 255]]);
        let flipped = to_rgba(&bytes, wl_shm::Format::Xrgb8888, 2, 2, 12, true).unwrap();
        assert_eq!(flipped.get_pixel(0, 0).0, [0, 0, 255, 255]);
        let swapped = to_rgba(&bytes, wl_shm::Format::Xbgr8888, 2, 2, 12, false).unwrap();
        assert_eq!(swapped.get_pixel(0, 0).0, [0, 0, 255, 255]);
        assert!(to_rgba(&bytes, wl_shm::Format::Rgb565, 2, 2, 12, false).is_err());
    }
}
