//! Wayland connections of cowork's own (one per worker that needs one, each
//! on that worker's thread), and the registry probe session detection uses.

use std::collections::BTreeMap;
use std::time::Duration;

use wayland_client::globals::{GlobalListContents, registry_queue_init};
use wayland_client::protocol::wl_registry::WlRegistry;
use wayland_client::{Connection, Dispatch, QueueHandle};

/// How long the registry probe waits for a compositor that does not answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

struct Probe;

impl Dispatch<WlRegistry, GlobalListContents> for Probe {
    fn event(_: &mut Self, _: &WlRegistry, _: <WlRegistry as wayland_client::Proxy>::Event, _: &GlobalListContents, _: &Connection, _: &QueueHandle<Self>) {}
}

/// The globals of the compositor at `socket` (interface → version).
pub fn globals(socket: &std::path::Path) -> Result<BTreeMap<String, u32>, String> {
    let socket = socket.to_path_buf();
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("wayland-probe".into())
        .spawn(move || {
            let listed = (|| {
                let stream = std::os::unix::net::UnixStream::connect(&socket).map_err(|err| format!("{}: {err}", socket.display()))?;
                let conn = Connection::from_socket(stream).map_err(|err| err.to_string())?;
                let (globals, _queue) = registry_queue_init::<Probe>(&conn).map_err(|err| err.to_string())?;
                Ok::<_, String>(globals.contents().clone_list().into_iter().map(|g| (g.interface, g.version)).collect())
            })();
            let _ = tx.send(listed);
        })
        .map_err(|err| err.to_string())?;
    rx.recv_timeout(PROBE_TIMEOUT).map_err(|_| format!("the compositor did not answer within {} s", PROBE_TIMEOUT.as_secs()))?
}
