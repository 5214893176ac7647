//! The XDG desktop portal's GlobalShortcuts, against a fake portal served
//! on the test's own session bus (Debian 12's xdg-desktop-portal 1.16
//! predates GlobalShortcuts and the host registry): the exact calls in
//! their order, press and release, and signals from anyone but the portal
//! ignored.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cowork::desktop::portal::{APP_ID, GlobalShortcuts, PORTAL, PORTAL_PATH, TokenStore, shortcuts};
use cowork::desktop::trigger::Trigger;
use parking_lot::Mutex;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

use super::support::{bare_session_bus, temp_dir};

const REQUEST: &str = "org.freedesktop.portal.Request";

/// What the fake portal was asked, in order.
type Log = Arc<Mutex<Vec<String>>>;

struct Registry(Log);

#[zbus::interface(name = "org.freedesktop.host.portal.Registry")]
impl Registry {
    fn register(&self, app_id: String, _options: HashMap<String, OwnedValue>) {
        self.0.lock().push(format!("Register {app_id}"));
    }
}

struct Shortcuts {
    log: Log,
    /// The session path made for the client.
    session: Arc<Mutex<String>>,
    /// The answer BindShortcuts gives (0: bound, 1: the user declined).
    bind_answer: u32,
}

fn string(options: &HashMap<String, OwnedValue>, key: &str) -> String {
    options.get(key).and_then(|v| String::try_from(v.try_clone().unwrap()).ok()).unwrap_or_default()
}

/// Answers on the request path after a moment, as the portal does once the user has answered.
fn respond(conn: &zbus::Connection, sender: &str, path: &str, code: u32, results: HashMap<String, OwnedValue>) {
    let conn = zbus::blocking::Connection::from(conn.clone());
    let (sender, path) = (sender.to_owned(), path.to_owned());
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        conn.emit_signal(Some(sender.as_str()), path.as_str(), REQUEST, "Response", &(code, results)).unwrap();
    });
}

fn request_path(sender: &str, token: &str) -> String {
    format!("{PORTAL_PATH}/request/{}/{token}", sender.trim_start_matches(':').replace('.', "_"))
}

#[zbus::interface(name = "org.freedesktop.portal.GlobalShortcuts")]
impl Shortcuts {
    fn create_session(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        options: HashMap<String, OwnedValue>,
    ) -> OwnedObjectPath {
        let sender = header.sender().unwrap().to_string();
        let path = request_path(&sender, &string(&options, "handle_token"));
        let session = format!("{PORTAL_PATH}/session/{}/{}", sender.trim_start_matches(':').replace('.', "_"), string(&options, "session_handle_token"));
        self.log.lock().push(format!("CreateSession {}", string(&options, "session_handle_token")));
        *self.session.lock() = session.clone();
        respond(conn, &sender, &path, 0, HashMap::from([("session_handle".to_owned(), OwnedValue::try_from(Value::from(session)).unwrap())]));
        OwnedObjectPath::try_from(path).unwrap()
    }

    fn bind_shortcuts(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        session: OwnedObjectPath,
        shortcuts: Vec<(String, HashMap<String, OwnedValue>)>,
        _parent_window: String,
        options: HashMap<String, OwnedValue>,
    ) -> OwnedObjectPath {
        let sender = header.sender().unwrap().to_string();
        let path = request_path(&sender, &string(&options, "handle_token"));
        let described: Vec<String> = shortcuts.iter().map(|(id, o)| format!("{id}={}", string(o, "preferred_trigger"))).collect();
        self.log.lock().push(format!("BindShortcuts {} {}", session.as_str().rsplit('/').next().unwrap(), described.join(" ")));
        let bound: Vec<(String, HashMap<String, OwnedValue>)> = shortcuts
            .iter()
            .map(|(id, o)| (id.clone(), HashMap::from([("trigger_description".to_owned(), OwnedValue::try_from(Value::from(format!("Press {}", string(o, "preferred_trigger")))).unwrap())])))
            .collect();
        let results = HashMap::from([("shortcuts".to_owned(), OwnedValue::try_from(Value::from(bound)).unwrap())]);
        respond(conn, &sender, &path, self.bind_answer, if self.bind_answer == 0 { results } else { HashMap::new() });
        OwnedObjectPath::try_from(path).unwrap()
    }

    // The portal's properties are lower-case (zbus would name it Version).
    #[zbus(property, name = "version")]
    fn version(&self) -> u32 {
        1
    }
}

struct FakePortal {
    conn: zbus::blocking::Connection,
    log: Log,
    session: Arc<Mutex<String>>,
    /// The keys the compositor's EIS server received: (evdev code, pressed).
    keys: Keys,
}

impl FakePortal {
    /// A portal answering BindShortcuts with `bind_answer`; `registry`: a portal new enough to have the host registry.
    fn serve(address: &str, bind_answer: u32, registry: bool) -> FakePortal {
        let log: Log = Arc::default();
        let session: Arc<Mutex<String>> = Arc::default();
        let mut builder = zbus::blocking::connection::Builder::address(address).unwrap().name(PORTAL).unwrap();
        if registry {
            builder = builder.serve_at(PORTAL_PATH, Registry(log.clone())).unwrap();
        }
        let keys: Keys = Arc::default();
        let remote = RemoteDesktop { log: log.clone(), start_answer: bind_answer, starts: Default::default(), keys: keys.clone() };
        let conn = builder
            .serve_at(PORTAL_PATH, Shortcuts { log: log.clone(), session: session.clone(), bind_answer })
            .unwrap()
            .serve_at(PORTAL_PATH, remote)
            .unwrap()
            .build()
            .unwrap();
        FakePortal { conn, log, session, keys }
    }
}

/// A shortcut signal as `from` emits it, for `session`.
fn emit(from: &zbus::blocking::Connection, member: &str, session: &str, id: &str) {
    let session = OwnedObjectPath::try_from(session.to_owned()).unwrap();
    from.emit_signal(None::<&str>, PORTAL_PATH, "org.freedesktop.portal.GlobalShortcuts", member, &(session, id, 7u64, HashMap::<&str, Value>::new())).unwrap();
}

fn connect(address: &str) -> zbus::blocking::Connection {
    zbus::blocking::connection::Builder::address(address).unwrap().build().unwrap()
}

#[test]
fn global_shortcuts_register_first_bind_ours_and_turn_presses_and_releases_into_triggers() {
    let home = temp_dir();
    let (_bus, address) = bare_session_bus(home.path());
    let portal = FakePortal::serve(&address, 0, true);
    let client = connect(&address);
    assert_eq!(cowork::desktop::portal::global_shortcuts_version(&client), Some(1));
    let bound = GlobalShortcuts::bind(client, &shortcuts("ctrl+alt+Space", "ctrl+alt+KeyP", "ctrl+alt+KeyV")).unwrap();
    let pid = std::process::id();
    assert_eq!(
        *portal.log.lock(),
        [
            format!("Register {APP_ID}"),
            format!("CreateSession cowork_shortcuts_{pid}"),
            format!("BindShortcuts cowork_shortcuts_{pid} quick-prompt=CTRL+ALT+space pause=CTRL+ALT+p talk=CTRL+ALT+v"),
        ],
        "the host registry first, then the session, then cowork's three shortcuts with the keys its settings hold"
    );
    assert!(bound.bound.contains(&("talk".to_owned(), "Press CTRL+ALT+v".to_owned())), "{:?}", bound.bound);

    let (tx, rx) = crossbeam_channel::bounded(16);
    let listener = std::thread::spawn(move || bound.listen(|trigger| tx.send(trigger).is_ok()));
    std::thread::sleep(Duration::from_millis(300));
    let session = portal.session.lock().clone();
    // Another program on the bus cannot press cowork's keys: same signal, not from the portal.
    let other = connect(&address);
    emit(&other, "Activated", &session, "quick-prompt");
    // Nor does another session's shortcut count.
    emit(&portal.conn, "Activated", &format!("{PORTAL_PATH}/session/x/other"), "quick-prompt");
    emit(&portal.conn, "Activated", &session, "talk");
    emit(&portal.conn, "Deactivated", &session, "talk");
    emit(&portal.conn, "Activated", &session, "quick-prompt");
    emit(&portal.conn, "Deactivated", &session, "quick-prompt");
    emit(&portal.conn, "Activated", &session, "pause");
    let mut got = Vec::new();
    while let Ok(trigger) = rx.recv_timeout(Duration::from_secs(2)) {
        got.push(trigger);
        if got.len() == 4 {
            break;
        }
    }
    assert_eq!(got, [Trigger::TalkPress, Trigger::TalkRelease, Trigger::QuickPrompt, Trigger::Pause], "press and release, nothing forged");
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "nothing more");
    drop(portal);
    drop(_bus);
    let _ = listener.join();
}

#[test]
fn global_shortcuts_the_user_declined_are_said_and_an_old_portal_without_the_registry_still_binds() {
    let home = temp_dir();
    let (_bus, address) = bare_session_bus(home.path());
    let portal = FakePortal::serve(&address, 1, true);
    let err = GlobalShortcuts::bind(connect(&address), &shortcuts("ctrl+alt+Space", "ctrl+alt+KeyP", "ctrl+alt+KeyV")).err().unwrap();
    assert!(err.contains("declined"), "{err}");
    drop(portal);
    std::thread::sleep(Duration::from_millis(100));
    let old = FakePortal::serve(&address, 0, false);
    let bound = GlobalShortcuts::bind(connect(&address), &shortcuts("ctrl+alt+Space", "ctrl+alt+KeyP", "ctrl+alt+KeyV")).unwrap();
    assert_eq!(bound.bound.len(), 3);
    assert!(old.log.lock()[0].starts_with("CreateSession"), "{:?}", old.log.lock());
    drop(old);
    std::thread::sleep(Duration::from_millis(100));
    // No portal at all: said, not hung.
    let err = GlobalShortcuts::bind(connect(&address), &shortcuts("ctrl+alt+Space", "ctrl+alt+KeyP", "ctrl+alt+KeyV")).err().unwrap();
    assert!(err.contains("no desktop portal"), "{err}");
}

type Keys = Arc<Mutex<Vec<(u32, bool)>>>;

/// The RemoteDesktop portal as xdg-desktop-portal 1.18+ serves it, with a
/// compositor's EIS server (reis's server side) behind `ConnectToEIS`.
struct RemoteDesktop {
    log: Log,
    /// Start's answer (0: the user allowed it, 1: declined).
    start_answer: u32,
    starts: std::sync::atomic::AtomicU32,
    keys: Keys,
}

fn session_path(sender: &str, options: &HashMap<String, OwnedValue>) -> String {
    format!("{PORTAL_PATH}/session/{}/{}", sender.trim_start_matches(':').replace('.', "_"), string(options, "session_handle_token"))
}

fn number(options: &HashMap<String, OwnedValue>, key: &str) -> Option<u32> {
    options.get(key).and_then(|v| u32::try_from(v.try_clone().unwrap()).ok())
}

#[zbus::interface(name = "org.freedesktop.portal.RemoteDesktop")]
impl RemoteDesktop {
    fn create_session(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        options: HashMap<String, OwnedValue>,
    ) -> OwnedObjectPath {
        let sender = header.sender().unwrap().to_string();
        let path = request_path(&sender, &string(&options, "handle_token"));
        self.log.lock().push("RemoteDesktop.CreateSession".to_owned());
        let session = session_path(&sender, &options);
        respond(conn, &sender, &path, 0, HashMap::from([("session_handle".to_owned(), OwnedValue::try_from(Value::from(session)).unwrap())]));
        OwnedObjectPath::try_from(path).unwrap()
    }

    fn select_devices(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        _session: OwnedObjectPath,
        options: HashMap<String, OwnedValue>,
    ) -> OwnedObjectPath {
        let sender = header.sender().unwrap().to_string();
        let path = request_path(&sender, &string(&options, "handle_token"));
        let restore = string(&options, "restore_token");
        self.log.lock().push(format!(
            "RemoteDesktop.SelectDevices types={} persist={} restore={}",
            number(&options, "types").unwrap_or(0),
            number(&options, "persist_mode").unwrap_or(0),
            if restore.is_empty() { "-" } else { restore.as_str() }
        ));
        respond(conn, &sender, &path, 0, HashMap::new());
        OwnedObjectPath::try_from(path).unwrap()
    }

    fn start(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        _session: OwnedObjectPath,
        _parent_window: String,
        options: HashMap<String, OwnedValue>,
    ) -> OwnedObjectPath {
        let sender = header.sender().unwrap().to_string();
        let path = request_path(&sender, &string(&options, "handle_token"));
        self.log.lock().push("RemoteDesktop.Start".to_owned());
        if self.start_answer == 0 {
            let n = self.starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            let results = HashMap::from([
                ("devices".to_owned(), OwnedValue::from(1u32)),
                ("restore_token".to_owned(), OwnedValue::try_from(Value::from(format!("token-{n}"))).unwrap()),
            ]);
            respond(conn, &sender, &path, 0, results);
        } else {
            respond(conn, &sender, &path, self.start_answer, HashMap::new());
        }
        OwnedObjectPath::try_from(path).unwrap()
    }

    #[zbus(name = "ConnectToEIS")]
    fn connect_to_eis(&self, _session: OwnedObjectPath, _options: HashMap<String, OwnedValue>) -> zbus::zvariant::OwnedFd {
        self.log.lock().push("RemoteDesktop.ConnectToEIS".to_owned());
        let (server, client) = std::os::unix::net::UnixStream::pair().unwrap();
        let keys = self.keys.clone();
        std::thread::spawn(move || {
            let got = serve_eis(server, TEST_KEYMAP).unwrap();
            keys.lock().extend(got);
        });
        zbus::zvariant::OwnedFd::from(std::os::fd::OwnedFd::from(client))
    }

    // The portal's properties are lower-case (zbus would name it Version).
    #[zbus(property, name = "version")]
    fn version(&self) -> u32 {
        2
    }
}

/// A small US-like keymap: h, i, 1/!, space and Shift (keycodes are evdev + 8).
const TEST_KEYMAP: &str = r#"xkb_keymap {
    xkb_keycodes "test" {
        minimum = 8;
        maximum = 255;
        <AE01> = 10;
        <AD08> = 31;
        <AC06> = 43;
        <LFSH> = 50;
        <SPCE> = 65;
    };
    xkb_types "test" {
        virtual_modifiers NumLock;
        type "ONE_LEVEL" {
            modifiers = none;
            level_name[Level1] = "Any";
        };
        type "TWO_LEVEL" {
            modifiers = Shift;
            map[Shift] = Level2;
            level_name[Level1] = "Base";
            level_name[Level2] = "Shift";
        };
    };
    xkb_compatibility "test" {
    };
    xkb_symbols "test" {
        key <AE01> { type = "TWO_LEVEL", [ 1, exclam ] };
        key <AD08> { type = "TWO_LEVEL", [ i, I ] };
        key <AC06> { type = "TWO_LEVEL", [ h, H ] };
        key <LFSH> { type = "ONE_LEVEL", [ Shift_L ] };
        key <SPCE> { type = "ONE_LEVEL", [ space ] };
    };
};
"#;

/// The compositor's side: an EIS server (reis) with one seat and one keyboard
/// with `keymap`, recording each key the client sends until it disconnects.
fn serve_eis(socket: std::os::unix::net::UnixStream, keymap: &str) -> Result<Vec<(u32, bool)>, String> {
    use reis::request::{DeviceCapability, EisRequest, EisRequestConverter};
    use reis::{PendingRequestResult, eis, handshake::EisHandshaker};
    use std::io::Write;
    use std::os::fd::AsFd;
    let wait = |ctx: &eis::Context| {
        let mut poll = libc::pollfd { fd: std::os::fd::AsRawFd::as_raw_fd(&ctx.as_fd()), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd for the call.
        unsafe { libc::poll(&mut poll, 1, 5_000) };
    };
    let request = |r: PendingRequestResult<eis::Request>| match r {
        PendingRequestResult::Request(r) => Ok(Some(r)),
        PendingRequestResult::ParseError(e) => Err(format!("{e:?}")),
        PendingRequestResult::InvalidObject(_) => Ok(None),
    };
    let ctx = eis::Context::new(socket).map_err(|e| e.to_string())?;
    let mut handshaker = EisHandshaker::new(&ctx, 1);
    let done = 'handshake: loop {
        wait(&ctx);
        ctx.read().map_err(|e| e.to_string())?;
        while let Some(r) = ctx.pending_request() {
            if let Some(r) = request(r)?
                && let Some(done) = handshaker.handle_request(r).map_err(|e| format!("{e:?}"))?
            {
                break 'handshake done;
            }
        }
    };
    let mut converter = EisRequestConverter::new(&ctx, done, 1);
    let connection = converter.handle().clone();
    let _seat = connection.add_seat(Some("default"), DeviceCapability::Keyboard.into());
    connection.flush().map_err(|e| e.to_string())?;
    let mut file = tempfile::tempfile().map_err(|e| e.to_string())?;
    let mut bytes = keymap.as_bytes().to_vec();
    bytes.push(0);
    file.write_all(&bytes).map_err(|e| e.to_string())?;
    let mut keys = Vec::new();
    let mut _device = None;
    loop {
        while let Some(r) = ctx.pending_request() {
            let Some(r) = request(r)? else { continue };
            converter.handle_request(r).map_err(|e| format!("{e:?}"))?;
            while let Some(r) = converter.next_request() {
                match r {
                    EisRequest::Bind(bind) if bind.capabilities.contains(DeviceCapability::Keyboard) => {
                        let device = bind.seat.add_device(Some("keyboard"), eis::device::DeviceType::Virtual, DeviceCapability::Keyboard.into(), |d| {
                            d.interface::<eis::Keyboard>().unwrap().keymap(eis::keyboard::KeymapType::Xkb, bytes.len() as u32, file.as_fd());
                        });
                        device.resumed();
                        connection.flush().map_err(|e| e.to_string())?;
                        _device = Some(device);
                    }
                    EisRequest::KeyboardKey(key) => keys.push((key.key, key.state == eis::keyboard::KeyState::Press)),
                    EisRequest::Disconnect => return Ok(keys),
                    _ => {}
                }
            }
        }
        wait(&ctx);
        match ctx.read() {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(keys),
            Err(e) => return Err(e.to_string()),
            Ok(_) => {}
        }
    }
}

/// The secret store, in memory.
#[derive(Default)]
struct Tokens(Mutex<Option<String>>);

impl cowork::desktop::portal::TokenStore for Tokens {
    fn load(&self) -> Option<String> {
        self.0.lock().clone()
    }
    fn save(&self, token: &str) {
        *self.0.lock() = Some(token.to_owned());
    }
}

const SHIFT: u32 = 42;
const KEY_1: u32 = 2;
const KEY_I: u32 = 23;
const KEY_H: u32 = 35;

#[test]
fn dictation_through_the_remote_desktop_portal_types_with_libei_asks_once_and_keeps_the_restore_token() {
    let home = temp_dir();
    let (_bus, address) = bare_session_bus(home.path());
    let portal = FakePortal::serve(&address, 0, true);
    let tokens = Tokens::default();
    let conn = connect(&address);
    let typed = cowork::desktop::portal::type_text(&conn, &tokens, "Hi!").unwrap();
    assert_eq!(typed, cowork::desktop::ei::Typed { typed: 3, untypeable: Vec::new() });
    assert!(super::support::eventually(Duration::from_secs(5), || portal.keys.lock().len() == 10), "{:?}", portal.keys.lock());
    assert_eq!(
        *portal.keys.lock(),
        [(SHIFT, true), (KEY_H, true), (KEY_H, false), (SHIFT, false), (KEY_I, true), (KEY_I, false), (SHIFT, true), (KEY_1, true), (KEY_1, false), (SHIFT, false)],
        "H with Shift, i without, ! as Shift+1: evdev codes from the compositor's keymap"
    );
    assert_eq!(tokens.load().as_deref(), Some("token-1"), "the restore token is kept");
    // The second dictation restores the first consent with its token (and keeps the new one: tokens are single use).
    portal.keys.lock().clear();
    let typed = cowork::desktop::portal::type_text(&conn, &tokens, "hé").unwrap();
    assert_eq!(typed, cowork::desktop::ei::Typed { typed: 1, untypeable: vec!['é'] }, "what the layout cannot type is said, not guessed");
    assert_eq!(tokens.load().as_deref(), Some("token-2"));
    let log = portal.log.lock().clone();
    let remote: Vec<&String> = log.iter().filter(|l| !l.starts_with("Register")).collect();
    assert_eq!(
        remote,
        [
            "RemoteDesktop.CreateSession",
            "RemoteDesktop.SelectDevices types=1 persist=2 restore=-",
            "RemoteDesktop.Start",
            "RemoteDesktop.ConnectToEIS",
            "RemoteDesktop.CreateSession",
            "RemoteDesktop.SelectDevices types=1 persist=2 restore=token-1",
            "RemoteDesktop.Start",
            "RemoteDesktop.ConnectToEIS",
        ],
        "the keyboard only, remembered until revoked"
    );
    assert_eq!(log.iter().filter(|l| l.starts_with("Register")).count(), 2, "registered before each session: {log:?}");
    assert!(log[0].starts_with("Register"));
}

#[test]
fn dictation_the_user_declined_types_nothing_and_keeps_no_token() {
    let home = temp_dir();
    let (_bus, address) = bare_session_bus(home.path());
    let portal = FakePortal::serve(&address, 1, true);
    let tokens = Tokens::default();
    let err = cowork::desktop::portal::type_text(&connect(&address), &tokens, "Hi").unwrap_err();
    assert!(err.contains("declined"), "{err}");
    assert_eq!(tokens.load(), None);
    assert!(!portal.log.lock().iter().any(|l| l.contains("ConnectToEIS")), "no keyboard without consent");
}

/// The desktop entry the portal's host registry looks cowork's app id up by
/// passes desktop-file-validate, as shipped and as written for a user.
#[test]
fn the_desktop_entry_for_the_portals_app_id_validates() {
    if !super::support::require(super::support::have_program("desktop-file-validate"), "desktop-file-validate") {
        return;
    }
    let home = temp_dir();
    let shipped = home.path().join(format!("{APP_ID}.desktop"));
    std::fs::write(&shipped, cowork::desktop::portal::DESKTOP_ENTRY).unwrap();
    let env = |key: &str| (key == "HOME").then(|| home.path().join("home").to_string_lossy().into_owned());
    let written = cowork::desktop::portal::ensure_desktop_entry(&env, std::path::Path::new("/opt/cowork $1/cowork")).unwrap().unwrap();
    for entry in [shipped, written] {
        let out = std::process::Command::new("desktop-file-validate").arg(&entry).output().unwrap();
        assert!(out.status.success() && out.stdout.is_empty(), "{}: {}{}", entry.display(), String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
}

/// The settings portal's appearance, as a desktop serves it.
struct Appearance(Arc<std::sync::atomic::AtomicU32>);

#[zbus::interface(name = "org.freedesktop.portal.Settings")]
impl Appearance {
    fn read_one(&self, namespace: String, key: String) -> zbus::fdo::Result<OwnedValue> {
        if namespace == "org.freedesktop.appearance" && key == "color-scheme" {
            Ok(OwnedValue::from(self.0.load(std::sync::atomic::Ordering::SeqCst)))
        } else {
            Err(zbus::fdo::Error::Failed(format!("no setting {namespace} {key}")))
        }
    }

    #[zbus(property)]
    fn version(&self) -> u32 {
        2
    }
}

/// Light or dark from the desktop: read from the settings portal at start,
/// then each change it signals; the same signal from anyone else, or about
/// another setting, changes nothing.
#[test]
fn the_desktops_light_or_dark_preference_is_read_from_the_portal_and_followed_from_it_only() {
    use cowork::desktop::appearance::{follow, read_portal};
    let home = temp_dir();
    let (_bus, address) = bare_session_bus(home.path());
    let scheme = Arc::new(std::sync::atomic::AtomicU32::new(1));
    let portal = zbus::blocking::connection::Builder::address(address.as_str()).unwrap().name(PORTAL).unwrap().serve_at(PORTAL_PATH, Appearance(scheme.clone())).unwrap().build().unwrap();
    let client = connect(&address);
    assert_eq!(read_portal(&client), Ok(Some(true)), "1 prefers dark");
    scheme.store(2, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(read_portal(&client), Ok(Some(false)), "2 prefers light");
    let owner = zbus::blocking::fdo::DBusProxy::new(&client).unwrap().get_name_owner(PORTAL.try_into().unwrap()).unwrap().to_string();
    let (tx, rx) = crossbeam_channel::bounded(8);
    std::thread::spawn(move || follow(&client, &owner, |dark| tx.send(dark).unwrap_or_default()));
    let changed = |from: &zbus::blocking::Connection, namespace: &str, key: &str, value: u32| {
        from.emit_signal(None::<&str>, PORTAL_PATH, "org.freedesktop.portal.Settings", "SettingChanged", &(namespace, key, Value::from(value))).unwrap();
    };
    // The portal's change, sent until the follower (subscribing on its own thread) hears it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        changed(&portal, "org.freedesktop.appearance", "color-scheme", 1);
        if let Ok(dark) = rx.recv_timeout(Duration::from_millis(200)) {
            assert_eq!(dark, Some(true), "1 prefers dark");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the portal's change was never followed");
    }
    while rx.recv_timeout(Duration::from_millis(300)) == Ok(Some(true)) {}
    // Subscribed: an impostor's change and another key change nothing; the portal's next one counts.
    let other = connect(&address);
    changed(&other, "org.freedesktop.appearance", "color-scheme", 2);
    changed(&portal, "org.freedesktop.appearance", "accent-color", 2);
    changed(&portal, "org.freedesktop.appearance", "color-scheme", 0);
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(None), "0: no preference, and nothing from the impostor or another key before it");
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "nothing after it");
}

/// The file chooser as a desktop serves it: answers OpenFile with the
/// chosen files' URIs (or the user's cancel), and records what it was asked.
struct FileChooser {
    log: Log,
    /// None: the user cancels.
    chosen: Option<Vec<String>>,
}

#[zbus::interface(name = "org.freedesktop.portal.FileChooser")]
impl FileChooser {
    fn open_file(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        _parent_window: String,
        title: String,
        options: HashMap<String, OwnedValue>,
    ) -> OwnedObjectPath {
        let sender = header.sender().unwrap().to_string();
        let path = request_path(&sender, &string(&options, "handle_token"));
        let multiple = options.get("multiple").and_then(|v| bool::try_from(v.try_clone().unwrap()).ok()).unwrap_or(false);
        let filters = options.get("filters").and_then(|v| Vec::<(String, Vec<(u32, String)>)>::try_from(v.try_clone().unwrap()).ok()).unwrap_or_default();
        let globs: Vec<String> = filters.iter().flat_map(|(_, patterns)| patterns.iter().map(|(_, p)| p.clone())).collect();
        self.log.lock().push(format!("OpenFile {title} multiple={multiple} {}", globs.join(" ")));
        match &self.chosen {
            Some(uris) => respond(conn, &sender, &path, 0, HashMap::from([("uris".to_owned(), OwnedValue::try_from(Value::from(uris.clone())).unwrap())])),
            None => respond(conn, &sender, &path, 1, HashMap::new()),
        }
        OwnedObjectPath::try_from(path).unwrap()
    }

    #[zbus(property, name = "version")]
    fn version(&self) -> u32 {
        4
    }
}

/// Attaching files through the desktop's file chooser: the portal's OpenFile
/// with documents offered first and several files allowed; the URIs it
/// answers (spaces and all) become paths, a cancel is no files, and a
/// session without a portal says so (the sidebar then opens its own browser).
#[test]
fn files_to_attach_come_from_the_portals_file_chooser_and_a_cancel_is_no_files() {
    use cowork::desktop::portal::choose_files;
    let home = temp_dir();
    let (_bus, address) = bare_session_bus(home.path());
    let client = connect(&address);
    assert!(choose_files(&client, "Attach files").unwrap_err().contains("no desktop portal"), "no portal on this bus yet");
    let log: Log = Arc::default();
    let chosen = vec!["file:///home/ada/My%20Report.pdf".to_owned(), "file:///home/ada/budget.xlsx".to_owned(), "https://not.a.file/x".to_owned()];
    let portal = zbus::blocking::connection::Builder::address(address.as_str())
        .unwrap()
        .name(PORTAL)
        .unwrap()
        .serve_at(PORTAL_PATH, FileChooser { log: log.clone(), chosen: Some(chosen) })
        .unwrap()
        .build()
        .unwrap();
    let paths = choose_files(&client, "Attach files").unwrap();
    assert_eq!(paths, vec![std::path::PathBuf::from("/home/ada/My Report.pdf"), std::path::PathBuf::from("/home/ada/budget.xlsx")]);
    let asked = log.lock().clone();
    assert!(asked.iter().any(|l| l.starts_with("OpenFile Attach files multiple=true *.pdf *.docx") && l.ends_with(" *")), "{asked:?}");
    drop(portal);
    let _cancelling = zbus::blocking::connection::Builder::address(address.as_str())
        .unwrap()
        .name(PORTAL)
        .unwrap()
        .serve_at(PORTAL_PATH, FileChooser { log: log.clone(), chosen: None })
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(choose_files(&client, "Attach files"), Ok(Vec::new()), "the user closed the dialog");
}
