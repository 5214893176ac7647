//! Who is recording right now: the sound server's recording streams
//! (PulseAudio's source outputs; PipeWire serves the same list through
//! pipewire-pulse), each with its app, process and source, and whether it
//! reads a microphone (not the monitor of an output) and is running (not
//! corked). Meeting detection asks this every few seconds. One short
//! connection each time that opens no stream, so nothing is heard, and
//! blocking (timeouts of 2 s) over the server's unix socket with the
//! protocol's own messages (the vendored `pulseaudio` crate).

use std::io::BufReader;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use pulseaudio::protocol::{self, Command, Prop, Props};

/// One recording stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recording {
    /// The app's own name for itself (`application.name`, e.g. "Firefox", "ZOOM VoiceEngine").
    pub app: String,
    /// Its program (`application.process.binary`), when the server knows it.
    pub binary: String,
    pub pid: Option<u32>,
    /// The source's name (`alsa_input.…`, `mic_in`).
    pub source: String,
    /// It reads the monitor of an output (what the computer plays) that is not
    /// the default input: not a microphone.
    pub monitor: bool,
    /// Paused by the app.
    pub corked: bool,
}

impl Recording {
    /// A microphone in use: a running stream on a real input, not cowork's own.
    pub fn is_microphone_in_use(&self) -> bool {
        !self.monitor && !self.corked && self.pid != Some(std::process::id())
    }
}

const TIMEOUT: Duration = Duration::from_secs(2);

/// The server's recording streams now; an error says why none could be read
/// (no sound server, refused).
pub fn recordings() -> Result<Vec<Recording>, String> {
    let path = pulseaudio::socket_path_from_env().ok_or("no sound server (PulseAudio or pipewire-pulse) was found")?;
    let cookie = pulseaudio::cookie_path_from_env().and_then(|p| std::fs::read(p).ok()).unwrap_or_default();
    let socket = UnixStream::connect(&path).map_err(|err| format!("cannot reach the sound server at {}: {err}", path.display()))?;
    socket.set_read_timeout(Some(TIMEOUT)).and_then(|()| socket.set_write_timeout(Some(TIMEOUT))).map_err(|err| err.to_string())?;
    let mut reader = BufReader::new(socket);
    let auth = protocol::AuthParams { version: protocol::MAX_VERSION, supports_shm: false, supports_memfd: false, cookie };
    let reply: protocol::AuthReply = roundtrip(&mut reader, Command::Auth(auth), 0, protocol::MAX_VERSION)?;
    let version = protocol::MAX_VERSION.min(reply.version);
    let mut props = Props::new();
    props.set(Prop::ApplicationName, c"cowork (is a call on?)");
    let _: protocol::SetClientNameReply = roundtrip(&mut reader, Command::SetClientName(props), 1, version)?;
    let server: protocol::ServerInfo = roundtrip(&mut reader, Command::GetServerInfo, 2, version)?;
    let sources: protocol::SourceInfoList = roundtrip(&mut reader, Command::GetSourceInfoList, 3, version)?;
    let outputs: protocol::SourceOutputInfoList = roundtrip(&mut reader, Command::GetSourceOutputInfoList, 4, version)?;
    let clients: protocol::ClientInfoList = roundtrip(&mut reader, Command::GetClientInfoList, 5, version)?;
    let text = |props: &Props, prop: Prop| props.get(prop).map(|b| String::from_utf8_lossy(b.strip_suffix(&[0]).unwrap_or(b)).into_owned());
    Ok(outputs
        .iter()
        .map(|output| {
            let source = sources.iter().find(|s| s.index == output.source_index);
            let client = output.client_index.and_then(|i| clients.iter().find(|c| c.index == i));
            // The stream's own properties first, then its client's.
            let prop = |p: Prop| text(&output.props, p).or_else(|| client.and_then(|c| text(&c.props, p)));
            Recording {
                app: prop(Prop::ApplicationName).or_else(|| client.map(|c| c.name.to_string_lossy().into_owned())).unwrap_or_default(),
                binary: prop(Prop::ApplicationProcessBinary).unwrap_or_default(),
                pid: prop(Prop::ApplicationProcessId).and_then(|p| p.trim().parse().ok()),
                source: source.map(|s| s.name.to_string_lossy().into_owned()).unwrap_or_default(),
                // The default input is the microphone, whatever it is (a virtual one may be a monitor).
                monitor: source.is_some_and(|s| s.monitor_of_sink_index.is_some() && Some(&s.name) != server.default_source_name.as_ref()),
                corked: output.corked,
            }
        })
        .collect())
}

fn roundtrip<R: protocol::CommandReply>(reader: &mut BufReader<UnixStream>, command: Command, seq: u32, version: u16) -> Result<R, String> {
    protocol::write_command_message(reader.get_mut(), seq, &command, version).map_err(|err| format!("the sound server: {err}"))?;
    let (reply_seq, reply) = protocol::read_reply_message::<R>(reader, version).map_err(|err| format!("the sound server: {err}"))?;
    if reply_seq != seq {
        return Err("the sound server answered out of turn".into());
    }
    Ok(reply)
}
