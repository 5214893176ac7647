//! Helpers shared by the integration tests: paths, sinks, Xvfb sessions, waiting.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cowork::events::AppEvent;
use cowork::runtime::EventSink;
use crossbeam_channel::{Receiver, bounded};

pub fn repo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn models_dir() -> PathBuf {
    repo_dir().join("models")
}

pub fn full_run() -> bool {
    std::env::var("COWORK_TEST_FULL").is_ok_and(|v| v == "1")
}

/// Returns false (and says why) when a prerequisite is missing on a developer
/// machine; in a full run (CI) a missing prerequisite fails the test.
pub fn require(available: bool, what: &str) -> bool {
    if !available {
        assert!(!full_run(), "COWORK_TEST_FULL=1 but {what} is missing; run scripts/setup");
        eprintln!("skipping: {what} is missing (run scripts/setup, or set COWORK_TEST_FULL=1 to make this fail)");
    }
    available
}

pub fn chat_model() -> PathBuf {
    models_dir().join("smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
}

pub fn whisper_model() -> PathBuf {
    models_dir().join("whisper-tiny-en/ggml-tiny.en.bin")
}

pub fn have_program(name: &str) -> bool {
    Command::new("sh").arg("-c").arg(format!("command -v {name}")).stdout(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// A sink whose events the test reads.
pub fn test_sink() -> (EventSink<AppEvent>, Receiver<AppEvent>) {
    let (tx, rx) = bounded(100_000);
    (EventSink::new(tx, || {}), rx)
}

/// Waits for the first event matching `pick`, up to `timeout`.
pub fn wait_for<T>(events: &Receiver<AppEvent>, timeout: Duration, mut pick: impl FnMut(&AppEvent) -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match events.recv_timeout(left) {
            Ok(event) => {
                if let Some(found) = pick(&event) {
                    return Some(found);
                }
            }
            Err(_) => return None,
        }
    }
    None
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes.
pub fn eventually(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("cowork-test-").tempdir().expect("temp dir")
}

static NEXT_DISPLAY: AtomicU32 = AtomicU32::new(0);

/// A private X server (Xvfb) with openbox, so `_NET_ACTIVE_WINDOW` is maintained,
/// and a private home: everything started through `command` gets its own
/// `HOME` and XDG directories, so no test reads what an earlier run, a
/// developer's desktop or a past session left in `$HOME` (a persisted
/// accessibility switch, a keyring, a dconf database), and none writes there.
/// Everything it started is killed on drop.
pub struct XSession {
    pub display: String,
    children: Vec<ChildGuard>,
    home: tempfile::TempDir,
    dbus: Option<String>,
}

impl XSession {
    pub fn available() -> bool {
        have_program("Xvfb") && have_program("openbox") && have_program("xdotool")
    }

    pub fn start() -> XSession {
        let number = 140 + (std::process::id() % 200) * 4 + NEXT_DISPLAY.fetch_add(1, Ordering::SeqCst);
        let display = format!(":{number}");
        let _ = std::fs::remove_file(format!("/tmp/.X11-unix/X{number}"));
        let _ = std::fs::remove_file(format!("/tmp/.X{number}-lock"));
        let home = temp_dir();
        for dir in [".config", ".cache", ".local/share", ".local/state", "runtime"] {
            std::fs::create_dir_all(home.path().join(dir)).expect("session home");
        }
        std::fs::set_permissions(home.path().join("runtime"), std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("runtime dir mode");
        let xvfb = Command::new("Xvfb")
            .args([display.as_str(), "-screen", "0", "1280x800x24", "-nolisten", "tcp"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Xvfb");
        let mut session = XSession { display: display.clone(), children: vec![ChildGuard(xvfb)], home, dbus: None };
        let xprop_root = |property: &str| {
            Command::new("xprop")
                .args(["-root", property])
                .env("DISPLAY", &display)
                .stderr(Stdio::null())
                .output()
                .map(|o| (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned()))
                .unwrap_or((false, String::new()))
        };
        // The socket appears before the server accepts clients: wait until one can talk to it.
        assert!(
            eventually(Duration::from_secs(30), || xprop_root("_NET_SUPPORTING_WM_CHECK").0),
            "Xvfb did not start on {display}"
        );
        // openbox is ready once it publishes _NET_SUPPORTING_WM_CHECK; start it
        // again if it gave up early.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let mut openbox = session
                .command("openbox")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start openbox");
            let ready = eventually(Duration::from_secs(10), || {
                xprop_root("_NET_SUPPORTING_WM_CHECK").1.contains("window id")
                    || openbox.try_wait().ok().flatten().is_some()
            });
            if ready && openbox.try_wait().ok().flatten().is_none() {
                session.children.push(ChildGuard(openbox));
                break;
            }
            let _ = openbox.kill();
            let _ = openbox.wait();
            assert!(std::time::Instant::now() < deadline, "openbox did not start on {display}");
        }
        session
    }

    /// The session's own home: `HOME` and the XDG directories, all inside one
    /// temporary directory (the runtime directory owner-only, as D-Bus and
    /// keyrings require).
    pub fn home_env(&self) -> Vec<(&'static str, PathBuf)> {
        let home = self.home.path();
        let vars = [
            ("HOME", home.to_path_buf()),
            ("XDG_CONFIG_HOME", home.join(".config")),
            ("XDG_CACHE_HOME", home.join(".cache")),
            ("XDG_DATA_HOME", home.join(".local/share")),
            ("XDG_STATE_HOME", home.join(".local/state")),
            ("XDG_RUNTIME_DIR", home.join("runtime")),
        ];
        vars.into()
    }

    /// `program` on this display, with the session's own home and its session
    /// bus when `start_dbus` made one (never the caller's bus: a test must not
    /// switch anything on the developer's desktop).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        // An X session, whatever the developer's desktop is (a Wayland one would make cowork ignore X).
        command
            .env("DISPLAY", &self.display)
            .env("XDG_SESSION_TYPE", "x11")
            .env_remove("WAYLAND_DISPLAY")
            .env_remove("XDG_CURRENT_DESKTOP")
            .env_remove("SWAYSOCK")
            .env_remove("HYPRLAND_INSTANCE_SIGNATURE")
            .envs(self.home_env());
        match &self.dbus {
            Some(address) => command.env("DBUS_SESSION_BUS_ADDRESS", address),
            None => command.env_remove("DBUS_SESSION_BUS_ADDRESS"),
        };
        command
    }

    /// Opens an xterm with `title` and returns its X window id (from xdotool).
    pub fn open_xterm(&mut self, title: &str) -> String {
        self.open_xterm_as(title, "XTerm")
    }

    /// Opens an xterm whose WM_CLASS names `class` as the application.
    pub fn open_xterm_as(&mut self, title: &str, class: &str) -> String {
        let child = self
            .command("xterm")
            // The shell ignores SIGINT so a Ctrl+C typed by a test does not close the window.
            .args(["-class", class, "-T", title, "-geometry", "60x10", "-e", "sh", "-c", "trap '' INT; sleep 600"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start xterm");
        self.children.push(ChildGuard(child));
        let mut window = String::new();
        assert!(
            eventually(Duration::from_secs(10), || {
                let out = self.xdotool(&["search", "--name", &format!("^{title}$")]);
                window = out.lines().next().unwrap_or_default().trim().to_owned();
                !window.is_empty()
            }),
            "window {title:?} did not appear"
        );
        window
    }

    /// Starts a private D-Bus session bus for this display (AT-SPI, MPRIS and
    /// the tray live there) and returns its address. Services it activates
    /// (the accessibility bus) inherit `DISPLAY` and the session's home, so
    /// the accessibility switch starts off, as on a fresh desktop.
    pub fn start_dbus(&mut self) -> String {
        let mut command = self.command("dbus-daemon");
        command.arg("--session");
        let (daemon, address) = launch_bus(command);
        self.children.push(daemon);
        self.dbus = Some(address.clone());
        address
    }

    /// Starts `program` on this display (and session bus, if given); killed on drop.
    pub fn spawn(&mut self, program: &str, args: &[&str], dbus: Option<&str>) {
        let mut command = self.command(program);
        command.args(args).stdout(Stdio::null()).stderr(Stdio::null());
        if let Some(address) = dbus {
            command.env("DBUS_SESSION_BUS_ADDRESS", address);
        }
        self.children.push(ChildGuard(command.spawn().unwrap_or_else(|err| panic!("start {program}: {err}"))));
    }

    /// Starts `program` on this display; its stdout comes back line by line. Killed on drop.
    pub fn spawn_reading(&mut self, program: &str, args: &[&str]) -> crossbeam_channel::Receiver<String> {
        let mut child = self.command(program).args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap_or_else(|err| panic!("start {program}: {err}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (lines_tx, lines) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        self.children.push(ChildGuard(child));
        lines
    }

    /// The first window whose title matches `pattern` (xdotool regex), waiting for it.
    pub fn wait_window(&self, pattern: &str, timeout: Duration) -> String {
        let mut window = String::new();
        assert!(
            eventually(timeout, || {
                window = self.xdotool(&["search", "--name", pattern]).lines().next().unwrap_or_default().trim().to_owned();
                !window.is_empty()
            }),
            "no window matching {pattern:?} appeared"
        );
        window
    }

    pub fn xdotool(&self, args: &[&str]) -> String {
        let out = Command::new("xdotool").args(args).env("DISPLAY", &self.display).output().expect("run xdotool");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Activates a window and waits until the WM reports it active. The request
    /// is repeated: openbox may still be settling a just-mapped window's focus.
    pub fn activate(&self, window: &str) {
        let mut attempt = 0;
        let active = eventually(Duration::from_secs(10), || {
            if attempt % 10 == 0 {
                self.xdotool(&["windowactivate", window]);
            }
            attempt += 1;
            self.xdotool(&["getactivewindow"]).trim() == window
        });
        assert!(active, "window {window} did not become active");
    }
}

impl Drop for XSession {
    /// Ends what the session started, newest first (the X server last, asked
    /// to end first so it removes its socket and lock file).
    fn drop(&mut self) {
        while self.children.len() > 1 {
            drop(self.children.pop());
        }
        if let Some(server) = self.children.first_mut() {
            server.end_gently(Duration::from_secs(2));
        }
        self.children.clear();
    }
}

/// Every worker but capture on `paths` (no local chat model), with the events they send.
pub fn start_workers(paths: &cowork::config::Paths) -> (cowork::workers::Workers, Receiver<AppEvent>) {
    let (sink, events) = test_sink();
    let options = cowork::workers::WorkerOptions {
        capture: false,
        display: None,
        chat_model: None,
        policy: cowork::runtime::RestartPolicy::default(),
        require_consent: false,
        automations: false,
    };
    let (workers, _, _) = cowork::workers::Workers::start(paths, options, sink).unwrap();
    (workers, events)
}

/// A private D-Bus session bus from which nothing can be activated (no service
/// directories): only what the test starts answers on it, so a keyring the
/// test did not start cannot answer in its place, and no accessibility bus
/// exists unless the test makes one. The bus is ended when the child is dropped
/// by the caller (`ChildGuard`); its socket is in `home`, so nothing of it
/// stays in /tmp.
pub fn bare_session_bus(home: &std::path::Path) -> (ChildGuard, String) {
    let config = home.join("bare-session.conf");
    std::fs::write(
        &config,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:dir={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
            home.display()
        ),
    )
    .expect("bus config");
    let mut command = Command::new("dbus-daemon");
    command.arg(format!("--config-file={}", config.display())).env("HOME", home);
    launch_bus(command)
}

/// Whether `name` has an owner on the bus at `address` (asked with `dbus-send`).
pub fn bus_name_owned(address: &str, name: &str) -> bool {
    let out = Command::new("dbus-send")
        .args([&format!("--bus={address}"), "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner"])
        .arg(format!("string:{name}"))
        .output()
        .expect("dbus-send");
    String::from_utf8_lossy(&out.stdout).contains("boolean true")
}

/// Starts the `dbus-daemon` in `command` in the foreground and reads the
/// address it prints once it listens.
pub fn launch_bus(mut command: Command) -> (ChildGuard, String) {
    use std::io::BufRead;
    let mut daemon = command
        .args(["--nofork", "--print-address=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start dbus-daemon");
    let mut address = String::new();
    std::io::BufReader::new(daemon.stdout.take().unwrap()).read_line(&mut address).expect("dbus-daemon address");
    (ChildGuard(daemon), address.trim().to_owned())
}

/// Kills and reaps its child on drop.
pub struct ChildGuard(pub Child);

impl ChildGuard {
    /// Asks the child to end (SIGTERM) and waits up to `wait` for it, so a
    /// server removes its sockets and lock files (and ends its own children);
    /// the drop kills it if it has not.
    pub fn end_gently(&mut self, wait: Duration) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        eventually(wait, || self.0.try_wait().is_ok_and(|status| status.is_some()));
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// whisper.cpp's threads spin while they wait for each other: two
/// transcriptions at once on two cores slow each other down many times over.
/// Tests that run Whisper take turns.
static WHISPER_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn whisper_turn() -> std::sync::MutexGuard<'static, ()> {
    WHISPER_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Only one test at a time owns the suite's sound server.
static PULSE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What a test's sound server offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PulseSetup {
    /// A virtual microphone (the monitor of the `mic_in` null sink, 48 kHz
    /// stereo: what is played into `mic_in` is what it hears) and speakers (`speakers`, 44.1 kHz stereo),
    /// both the defaults.
    Devices,
    /// A server with no device at all.
    NoDevices,
}

/// A real PulseAudio server at `$PULSE_SERVER` (scripts/test sets it inside
/// the suite's temporary home), started by the test and stopped on drop.
pub struct PulseAudio {
    child: Child,
    /// Plays silence into the virtual microphone, as a real one delivers
    /// samples all the time: an idle null sink clocks its monitor at up to
    /// 2 s, so a stream opened on it would wait that long for its first block.
    feeder: Option<Child>,
    dir: tempfile::TempDir,
    _lock: std::sync::MutexGuard<'static, ()>,
}

impl PulseAudio {
    /// The socket the suite's environment names, if any.
    pub fn socket() -> Option<PathBuf> {
        std::env::var("PULSE_SERVER").ok().and_then(|s| s.strip_prefix("unix:").map(PathBuf::from))
    }

    /// Holds the sound-server slot without starting a server (for "no server" tests).
    pub fn lock() -> Option<std::sync::MutexGuard<'static, ()>> {
        if !require(Self::socket().is_some() && have_program("pulseaudio"), "a sound server for tests (pulseaudio, and PULSE_SERVER as scripts/test sets it)") {
            return None;
        }
        Some(PULSE_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    pub fn start(setup: PulseSetup) -> Option<Self> {
        let lock = Self::lock()?;
        let socket = Self::socket()?;
        std::fs::create_dir_all(socket.parent()?).ok()?;
        let _ = std::fs::remove_file(&socket);
        let dir = tempfile::tempdir().expect("a directory for the sound server");
        let mut command = Command::new("pulseaudio");
        command
            .args(["-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no", "--disable-shm=yes", "--log-target=stderr"])
            .arg("-L")
            .arg(format!("module-native-protocol-unix socket={} auth-anonymous=1", socket.display()))
            .env("HOME", dir.path())
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env_remove("PULSE_SERVER")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("pulseaudio.log")).expect("a log file"));
        if setup == PulseSetup::Devices {
            command
                .arg("-L")
                .arg("module-null-sink sink_name=mic_in rate=48000 channels=2")
                .arg("-L")
                .arg("module-null-sink sink_name=speakers rate=44100 channels=2");
        }
        let child = command.spawn().expect("pulseaudio starts");
        let mut server = Self { child, feeder: None, dir, _lock: lock };
        let ready = eventually(Duration::from_secs(10), || server.pactl(&["info"]));
        assert!(ready, "pulseaudio did not come up: {}", std::fs::read_to_string(server.dir.path().join("pulseaudio.log")).unwrap_or_default());
        if setup == PulseSetup::Devices {
            assert!(server.pactl(&["set-default-sink", "speakers"]) && server.pactl(&["set-default-source", "mic_in.monitor"]));
            let zeros = std::fs::File::open("/dev/zero").expect("/dev/zero");
            let feeder = Command::new("pacat")
                .args(["--playback", "--device=mic_in", "--raw", "--format=s16le", "--rate=48000", "--channels=2", "--latency-msec=20"])
                .stdin(zeros)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("pacat runs");
            server.feeder = Some(feeder);
            let running = eventually(Duration::from_secs(10), || {
                let out = Command::new("pactl").args(["list", "short", "sinks"]).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
                out.lines().any(|l| l.contains("mic_in") && l.contains("RUNNING"))
            });
            assert!(running, "the virtual microphone did not start running");
            // A null sink clocks its monitor at its idle latency (about 2 s)
            // until a recording asks for less, and keeps the lower latency
            // afterwards: one short low-latency recording makes the virtual
            // microphone behave like a sound card, which delivers at once.
            let mut primer = Command::new("parec")
                .args(["--device=mic_in.monitor", "--latency-msec=20", "--raw"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("parec runs");
            std::thread::sleep(Duration::from_millis(2_500));
            let _ = primer.kill();
            let _ = primer.wait();
        }
        Some(server)
    }

    /// Runs pactl against this server (as root too: the cookie is not needed for anonymous servers).
    pub fn pactl(&self, args: &[&str]) -> bool {
        Command::new("pactl").args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    }

    /// Plays a WAV file into a sink (`mic_in`: the microphone hears it; `speakers`: the system plays it), to the end.
    pub fn play(&self, sink: &str, wav: &std::path::Path) {
        let status = Command::new("paplay").arg(format!("--device={sink}")).arg(wav).status().expect("paplay runs");
        assert!(status.success(), "paplay into {sink} failed");
    }

}

impl Drop for PulseAudio {
    fn drop(&mut self) {
        if let Some(feeder) = self.feeder.as_mut() {
            let _ = feeder.kill();
            let _ = feeder.wait();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(socket) = Self::socket() {
            let _ = std::fs::remove_file(socket);
        }
    }
}

/// Speaks `text` with espeak-ng (22,050 Hz mono) into `path`.
pub fn espeak(text: &str, path: &std::path::Path) {
    let status = Command::new("espeak-ng").arg("-w").arg(path).arg(text).status().expect("espeak-ng runs");
    assert!(status.success(), "espeak-ng failed");
}

/// Runs sox with `args`.
pub fn sox(args: &[&str]) {
    let status = Command::new("sox").args(args).status().expect("sox runs");
    assert!(status.success(), "sox {args:?} failed");
}

/// One HTTP request as a loopback test server reads it: the request line and
/// headers as they came (`head`, ending with the blank line) and the body of
/// `content-length` bytes (at most 1 MiB).
pub struct HttpRequest {
    pub head: String,
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// The request line: "POST /v1/chat/completions HTTP/1.1".
    pub fn line(&self) -> &str {
        self.head.lines().next().unwrap_or_default()
    }
}

/// Reads one request from `stream`; what cannot be read is left out.
pub fn read_request(stream: &std::net::TcpStream) -> HttpRequest {
    use std::io::{BufRead, Read};
    let mut reader = std::io::BufReader::new(stream);
    let (mut head, mut length) = (String::new(), 0usize);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0u8; length.min(1 << 20)];
    let _ = reader.read_exact(&mut body);
    HttpRequest { head, body }
}

/// An HTTP listener on loopback that keeps every request it gets (its head
/// and body, as text) and answers with `answer`: it stands for a host that
/// must receive nothing (a proxy, a host an imported file names) or a
/// service whose requests a test reads (a search service).
pub struct HttpRecorder {
    pub port: u16,
    /// `http://127.0.0.1:PORT/mcp`, for the MCP tests.
    pub url: String,
    seen: std::sync::Arc<parking_lot::Mutex<Vec<String>>>,
}

impl HttpRecorder {
    pub fn start(answer: &'static str) -> HttpRecorder {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let kept = kept.clone();
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let request = read_request(&stream);
                    kept.lock().push(format!("{}{}", request.head, String::from_utf8_lossy(&request.body)));
                    let _ = write!(stream, "HTTP/1.1 {answer}\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}");
                });
            }
        });
        HttpRecorder { port, url: format!("http://127.0.0.1:{port}/mcp"), seen }
    }

    /// Every request so far, head and body.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().clone()
    }

    /// Everything received, as one text.
    pub fn received(&self) -> String {
        self.seen().join("\n")
    }
}

/// cowork's workers (no capture) on a new data directory whose settings
/// follow `folder`, with `exclude` as the excluded path patterns when given.
pub fn following(folder: &std::path::Path, exclude: Option<&str>) -> (tempfile::TempDir, cowork::workers::Workers) {
    let data = temp_dir();
    let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
    cowork::store::set_setting(&conn, "memory.document_folders", &folder.display().to_string(), 0).unwrap();
    if let Some(exclude) = exclude {
        cowork::store::set_setting(&conn, "memory.document_exclude", exclude, 0).unwrap();
    }
    drop(conn);
    let paths = cowork::config::Paths::resolve(Some(data.path().to_owned()), Some(data.path().join("models"))).unwrap();
    let (sink, _events) = test_sink();
    let options = cowork::workers::WorkerOptions { capture: false, display: None, chat_model: None, policy: cowork::runtime::RestartPolicy::default(), require_consent: false, automations: true };
    let (workers, _, _) = cowork::workers::Workers::start(&paths, options, sink).unwrap();
    (data, workers)
}

/// The titles a keyword search of the database in `data` finds for `word` (none while it cannot be read).
pub fn found_titles(data: &std::path::Path, word: &str) -> Vec<String> {
    cowork::store::open_read_only(&data.join("cowork.db"))
        .ok()
        .and_then(|c| cowork::memory::search::search(&c, word, &cowork::memory::search::Filters::default(), 5).ok())
        .map(|hits| hits.iter().map(|h| h.title.clone()).collect())
        .unwrap_or_default()
}

/// A store worker on `db` and a line to it, for the workers that write
/// through the one writer (automations, notify, apps). The store thread ends
/// once every clone of the link is dropped.
pub fn store_link(db: &std::path::Path) -> cowork::store::StoreLink {
    let store = cowork::workers::spawn_store(db.to_path_buf(), EventSink::<cowork::runtime::RuntimeEvent>::ignored(), cowork::runtime::RestartPolicy::default()).expect("the store starts");
    let link = cowork::store::StoreLink::new(db.to_path_buf(), store.commands.clone());
    link.opened().expect("the store opens the database");
    link
}

/// What one thread of a watched process did: its name, CPU time and nice value.
#[derive(Clone, Debug, Default)]
pub struct ThreadUse {
    pub name: String,
    /// User and system time, in clock ticks (1/100 s), as last seen.
    pub cpu_ticks: u64,
    pub nice: i64,
}

/// Runs `command` to its end while reading its threads from `/proc` every
/// 20 ms: its output, and each thread ever seen (by thread id) with the CPU
/// time it had used when last seen.
pub fn run_watching_threads(mut command: Command) -> (std::process::Output, Vec<ThreadUse>) {
    let child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let tasks = PathBuf::from(format!("/proc/{}/task", child.id()));
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    let mut seen = std::collections::HashMap::<String, ThreadUse>::new();
    while !waiter.is_finished() {
        for task in std::fs::read_dir(&tasks).into_iter().flatten().flatten() {
            let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
            // `tid (name) state …`: the fields after the name, from the state (field 3) on.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
            let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
            let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<i64>().ok()).unwrap_or_default();
            let entry = seen.entry(task.file_name().to_string_lossy().into_owned()).or_default();
            entry.name = stat[open + 1..close].to_owned();
            entry.cpu_ticks = entry.cpu_ticks.max((field(14) + field(15)) as u64);
            entry.nice = field(19);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (waiter.join().unwrap(), seen.into_values().collect())
}
