//! The compositors' own IPC, for what the Wayland protocols do not say: the
//! pid behind a window, and placing cowork's own windows. sway speaks i3's
//! protocol (`i3-ipc`, a length and a type, JSON) on `$SWAYSOCK`; Hyprland
//! answers one request per connection on `.socket.sock` in its instance
//! directory. Each call has a short timeout (500 ms): a compositor that hangs
//! costs a pid, never capture.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

const TIMEOUT: Duration = Duration::from_millis(500);
/// Replies bigger than this are refused (a get_tree of hundreds of windows is ~1 MB).
const MAX_REPLY: usize = 16 << 20;

const MAGIC: &[u8; 6] = b"i3-ipc";
const RUN_COMMAND: u32 = 0;
const GET_WORKSPACES: u32 = 1;
const GET_TREE: u32 = 4;

/// Which compositor answers, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ipc {
    Sway(PathBuf),
    Hyprland(PathBuf),
}

/// A window as the compositor's IPC describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpcWindow {
    /// sway's con_id; Hyprland's address (as a number).
    pub id: u64,
    pub app_id: String,
    pub title: String,
    pub pid: Option<u32>,
    pub focused: bool,
    /// Where the compositor has it (None when it does not say).
    pub rect: Option<Rect>,
}

/// A rectangle in the compositor's global coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub width: i32,
    pub height: i32,
}

impl Ipc {
    /// The IPC of the session in `env` (`SWAYSOCK`, or Hyprland's instance
    /// signature under `XDG_RUNTIME_DIR/hypr` or, before 0.40, `/tmp/hypr`).
    pub fn from_env(swaysock: Option<&str>, hyprland: Option<&str>, runtime_dir: Option<&str>) -> Option<Ipc> {
        if let Some(sock) = swaysock {
            return Some(Ipc::Sway(PathBuf::from(sock)));
        }
        let signature = hyprland?;
        let candidates = [runtime_dir.map(|r| Path::new(r).join("hypr")), Some(PathBuf::from("/tmp/hypr"))];
        candidates.into_iter().flatten().map(|dir| dir.join(signature).join(".socket.sock")).find(|p| p.exists()).map(Ipc::Hyprland)
    }

    pub fn name(&self) -> &'static str {
        match self {
            Ipc::Sway(_) => "sway",
            Ipc::Hyprland(_) => "Hyprland",
        }
    }

    /// Every window the compositor manages.
    pub fn windows(&self) -> Result<Vec<IpcWindow>, String> {
        match self {
            Ipc::Sway(path) => {
                let tree = sway_request(path, GET_TREE, "")?;
                let mut windows = Vec::new();
                sway_windows(&tree, &mut windows);
                Ok(windows)
            }
            Ipc::Hyprland(path) => {
                let clients = hyprland_request(path, "j/clients")?;
                let active = hyprland_request(path, "j/activewindow").ok();
                let active_address = active.as_ref().and_then(|a| a["address"].as_str()).map(str::to_owned);
                Ok(clients
                    .as_array()
                    .map(|clients| {
                        clients
                            .iter()
                            .map(|c| {
                                let address = c["address"].as_str().unwrap_or_default();
                                IpcWindow {
                                    id: u64::from_str_radix(address.trim_start_matches("0x"), 16).unwrap_or_default(),
                                    app_id: c["class"].as_str().unwrap_or_default().to_owned(),
                                    title: c["title"].as_str().unwrap_or_default().to_owned(),
                                    pid: c["pid"].as_i64().and_then(|p| u32::try_from(p).ok()).filter(|p| *p > 0),
                                    focused: active_address.as_deref() == Some(address),
                                    rect: hyprland_rect(c),
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default())
            }
        }
    }

    /// The focused window's pid, when the focused window is the one described
    /// (`app_id` and `title` as the Wayland protocol said them): a focus
    /// change between the protocol's event and this call gives None, not a
    /// wrong pid.
    pub fn focused_pid(&self, app_id: &str, title: &str) -> Option<u32> {
        let windows = self.windows().map_err(|err| tracing::debug!("{} IPC: {err}", self.name())).ok()?;
        let focused = windows.iter().find(|w| w.focused)?;
        (focused.app_id == app_id && focused.title == title).then_some(focused.pid).flatten()
    }

    /// The usable area of the focused output (panels and bars left out).
    pub fn work_area(&self) -> Result<Rect, String> {
        match self {
            Ipc::Sway(path) => {
                let workspaces = sway_request(path, GET_WORKSPACES, "")?;
                let focused = workspaces.as_array().and_then(|w| w.iter().find(|w| w["focused"] == true)).ok_or("sway names no focused workspace")?;
                rect(&focused["rect"]).ok_or_else(|| "sway's workspace has no rect".into())
            }
            Ipc::Hyprland(path) => {
                let monitors = hyprland_request(path, "j/monitors")?;
                let monitor = monitors.as_array().and_then(|m| m.iter().find(|m| m["focused"] == true)).ok_or("Hyprland names no focused monitor")?;
                let reserved: Vec<i32> =
                    monitor["reserved"].as_array().map(|r| r.iter().filter_map(|v| v.as_i64()).map(|v| v as i32).collect()).unwrap_or_default();
                let [left, top, right, bottom] = <[i32; 4]>::try_from(reserved).unwrap_or([0; 4]);
                let scale = monitor["scale"].as_f64().unwrap_or(1.0).max(0.1);
                let logical = |key: &str| (monitor[key].as_f64().unwrap_or(0.0) / scale) as i32;
                let (x, y) = (monitor["x"].as_i64().unwrap_or(0) as i32, monitor["y"].as_i64().unwrap_or(0) as i32);
                Ok(Rect { x: x + left, y: y + top, width: logical("width") - left - right, height: logical("height") - top - bottom })
            }
        }
    }

    /// Runs compositor commands on one window (sway: criteria + commands;
    /// Hyprland: dispatchers naming the window by address).
    pub fn place(&self, window: &IpcWindow, placement: &Placement) -> Result<(), String> {
        match self {
            Ipc::Sway(path) => {
                let r = placement.rect;
                let mut commands = vec![
                    "floating enable".to_owned(),
                    "border none".to_owned(),
                    format!("resize set width {} px height {} px", r.width, r.height),
                    format!("move absolute position {} {}", r.x, r.y),
                ];
                if placement.sticky {
                    commands.push("sticky enable".into());
                }
                if placement.focus {
                    commands.push("focus".into());
                }
                let command = format!("[con_id={}] {}", window.id, commands.join(", "));
                let reply = sway_request(path, RUN_COMMAND, &command)?;
                let failed: Vec<String> = reply
                    .as_array()
                    .map(|r| r.iter().filter(|r| r["success"] != true).map(|r| r["error"].as_str().unwrap_or("failed").to_owned()).collect())
                    .unwrap_or_default();
                if failed.is_empty() { Ok(()) } else { Err(format!("sway refused `{command}`: {}", failed.join("; "))) }
            }
            Ipc::Hyprland(path) => {
                let target = format!("address:0x{:x}", window.id);
                let r = placement.rect;
                let mut batch = vec![
                    format!("dispatch setfloating {target}"),
                    format!("dispatch resizewindowpixel exact {} {},{target}", r.width, r.height),
                    format!("dispatch movewindowpixel exact {} {},{target}", r.x, r.y),
                ];
                if placement.sticky {
                    batch.push(format!("dispatch pin {target}"));
                }
                if placement.focus {
                    batch.push(format!("dispatch focuswindow {target}"));
                }
                let reply = hyprland_raw(path, &format!("[[BATCH]]{}", batch.join(";")))?;
                if reply.lines().all(|l| l.trim() == "ok" || l.trim().is_empty()) { Ok(()) } else { Err(format!("Hyprland answered: {reply}")) }
            }
        }
    }

    /// Brings a window to the front and gives it the keyboard.
    pub fn focus(&self, window: &IpcWindow) -> Result<(), String> {
        match self {
            Ipc::Sway(path) => sway_request(path, RUN_COMMAND, &format!("[con_id={}] focus", window.id)).map(|_| ()),
            Ipc::Hyprland(path) => hyprland_raw(path, &format!("dispatch focuswindow address:0x{:x}", window.id)).map(|_| ()),
        }
    }
}

/// Where and how one of cowork's windows goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub rect: Rect,
    /// On every workspace (sway's sticky, Hyprland's pin).
    pub sticky: bool,
    pub focus: bool,
}

fn rect(value: &Value) -> Option<Rect> {
    let get = |key: &str| value[key].as_i64().map(|v| v as i32);
    Some(Rect { x: get("x")?, y: get("y")?, width: get("width")?, height: get("height")? })
}

/// Windows are the nodes with a pid or an app id (or X11's window
/// properties), in `nodes` and `floating_nodes`, depth first.
fn sway_windows(node: &Value, out: &mut Vec<IpcWindow>) {
    let is_window = node["type"] == "con" || node["type"] == "floating_con";
    let app_id = node["app_id"].as_str().map(str::to_owned).or_else(|| node["window_properties"]["class"].as_str().map(str::to_owned));
    if is_window && (node["pid"].is_number() || app_id.is_some()) && node["nodes"].as_array().is_none_or(|n| n.is_empty()) {
        out.push(IpcWindow {
            id: node["id"].as_u64().unwrap_or_default(),
            app_id: app_id.unwrap_or_default(),
            title: node["name"].as_str().unwrap_or_default().to_owned(),
            pid: node["pid"].as_i64().and_then(|p| u32::try_from(p).ok()).filter(|p| *p > 0),
            focused: node["focused"] == true,
            rect: rect_of(&node["rect"]),
        });
    }
    for key in ["nodes", "floating_nodes"] {
        for child in node[key].as_array().into_iter().flatten() {
            sway_windows(child, out);
        }
    }
}

/// sway's `{"x", "y", "width", "height"}`.
pub(crate) fn rect_of(value: &Value) -> Option<Rect> {
    let int = |key: &str| value[key].as_i64().and_then(|v| i32::try_from(v).ok());
    Some(Rect { x: int("x")?, y: int("y")?, width: int("width")?, height: int("height")? })
}

/// Hyprland's `at: [x, y]` and `size: [w, h]`.
fn hyprland_rect(client: &Value) -> Option<Rect> {
    let pair = |key: &str| -> Option<(i32, i32)> {
        let a = client[key].as_array()?;
        Some((i32::try_from(a.first()?.as_i64()?).ok()?, i32::try_from(a.get(1)?.as_i64()?).ok()?))
    };
    let ((x, y), (width, height)) = (pair("at")?, pair("size")?);
    Some(Rect { x, y, width, height })
}

fn connect(path: &Path) -> Result<UnixStream, String> {
    let stream = UnixStream::connect(path).map_err(|err| format!("cannot reach {}: {err}", path.display()))?;
    stream.set_read_timeout(Some(TIMEOUT)).and_then(|()| stream.set_write_timeout(Some(TIMEOUT))).map_err(|err| err.to_string())?;
    Ok(stream)
}

/// One request on sway's socket and its JSON reply.
pub fn sway_request(path: &Path, kind: u32, payload: &str) -> Result<Value, String> {
    let mut stream = connect(path)?;
    let mut message = Vec::with_capacity(14 + payload.len());
    message.extend_from_slice(MAGIC);
    message.extend_from_slice(&(payload.len() as u32).to_ne_bytes());
    message.extend_from_slice(&kind.to_ne_bytes());
    message.extend_from_slice(payload.as_bytes());
    stream.write_all(&message).map_err(|err| format!("sway IPC: {err}"))?;
    let mut header = [0u8; 14];
    stream.read_exact(&mut header).map_err(|err| format!("sway IPC: {err}"))?;
    if &header[..6] != MAGIC {
        return Err("sway IPC: the reply is not i3-ipc".into());
    }
    let length = u32::from_ne_bytes(header[6..10].try_into().expect("4 bytes")) as usize;
    if length > MAX_REPLY {
        return Err(format!("sway IPC: a reply of {length} bytes is refused"));
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).map_err(|err| format!("sway IPC: {err}"))?;
    serde_json::from_slice(&body).map_err(|err| format!("sway IPC: unreadable reply: {err}"))
}

fn hyprland_raw(path: &Path, request: &str) -> Result<String, String> {
    let mut stream = connect(path)?;
    stream.write_all(request.as_bytes()).map_err(|err| format!("Hyprland IPC: {err}"))?;
    let mut reply = Vec::new();
    stream.take(MAX_REPLY as u64).read_to_end(&mut reply).map_err(|err| format!("Hyprland IPC: {err}"))?;
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

fn hyprland_request(path: &Path, request: &str) -> Result<Value, String> {
    let reply = hyprland_raw(path, request)?;
    serde_json::from_str(&reply).map_err(|err| format!("Hyprland IPC: unreadable reply to {request}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sway_trees_give_their_windows_with_pids_and_focus() {
        let tree = serde_json::json!({
            "id": 1, "type": "root", "nodes": [{
                "id": 3, "type": "output", "nodes": [{
                    "id": 4, "type": "workspace",
                    "nodes": [
                        {"id": 7, "type": "con", "name": "Alpha document", "app_id": "test-alpha", "pid": 4242, "focused": true, "nodes": []},
                        {"id": 8, "type": "con", "name": "xterm", "app_id": null, "window_properties": {"class": "XTerm"}, "pid": 99, "focused": false, "nodes": []}
                    ],
                    "floating_nodes": [{"id": 9, "type": "floating_con", "name": "cowork", "app_id": "cowork", "pid": 7, "focused": false, "nodes": []}]
                }]
            }]
        });
        let mut windows = Vec::new();
        sway_windows(&tree, &mut windows);
        let summary: Vec<(u64, &str, Option<u32>, bool)> = windows.iter().map(|w| (w.id, w.app_id.as_str(), w.pid, w.focused)).collect();
        assert_eq!(summary, [(7, "test-alpha", Some(4242), true), (8, "XTerm", Some(99), false), (9, "cowork", Some(7), false)]);
    }

    #[test]
    fn a_sway_socket_that_answers_garbage_or_nothing_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sway.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::Builder::new()
            .name("fake-sway".into())
            .spawn(move || {
                let (mut first, _) = listener.accept().unwrap();
                let _ = first.write_all(b"not-ipc-at-all");
                let (_silent, _) = listener.accept().unwrap();
                std::thread::sleep(Duration::from_millis(800));
            })
            .unwrap();
        assert!(sway_request(&path, GET_TREE, "").unwrap_err().contains("not i3-ipc"));
        let started = std::time::Instant::now();
        assert!(sway_request(&path, GET_TREE, "").is_err());
        assert!(started.elapsed() < Duration::from_millis(750), "{:?}", started.elapsed());
        server.join().unwrap();
    }
}
