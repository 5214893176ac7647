//! The microphone and the computer's own output, through cpal's PulseAudio
//! host. That host speaks PulseAudio's protocol in Rust (no libpulse), and both
//! PulseAudio and PipeWire (through pipewire-pulse, which every desktop running
//! PipeWire ships) serve it, so one host covers both servers. It is preferred
//! over cpal's PipeWire host, which needs libpipewire and bindgen at build time
//! for no gain here, and over ALSA, whose `default` device under PipeWire is
//! the source of the "mic not found / silent" reports in Handy (#806, #1339).
//! What the computer plays is the monitor source of the default sink.
//!
//! `SoundServer::connect` opens no device; `open` starts a stream on the
//! default input (or a named one, or the monitor) in the device's own rate and
//! channels with 20 ms fragments (push-to-talk; the server converts only the
//! sample format to f32, the `audio` worker makes them 16 kHz mono), or as 16
//! kHz mono at the server's own pace (listen mode). The callback only gathers
//! pieces into a block and puts it on a bounded channel with `try_send`: a full
//! queue drops and logs, never blocks the server's thread. `MicError` names
//! what the user can act on: no sound server, no microphone, busy, permission
//! denied.

use std::time::{Duration, Instant};

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use crossbeam_channel::{Sender, TrySendError};

/// Fragment the server sends, in milliseconds: the delay before a sample
/// reaches cowork, and the granularity of the level meter.
pub const FRAGMENT_MILLIS: u32 = 20;
/// How long opening a stream may take before it is "busy".
const OPEN_TIMEOUT: Duration = Duration::from_secs(3);

/// Where the sound comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// The default input (or the one chosen in Settings).
    Microphone,
    /// What the computer plays: the monitor of the default output.
    SystemAudio,
}

impl Source {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "mic" => Some(Source::Microphone),
            "system" => Some(Source::SystemAudio),
            _ => None,
        }
    }

    /// Who is speaking, as far as the source tells: the user into the
    /// microphone, others through what the computer plays.
    pub fn speaker(self) -> &'static str {
        match self {
            Source::Microphone => "You (microphone)",
            Source::SystemAudio => "Others (system audio)",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Microphone => "mic",
            Source::SystemAudio => "system",
        }
    }
}

/// Why the microphone could not be used, in words a user can act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MicError {
    #[error("no sound server: PulseAudio or PipeWire (with pipewire-pulse) is not running ({0})")]
    NoServer(String),
    #[error("no microphone: the sound server has no input device")]
    NoDevice,
    #[error("the microphone is busy: another program holds it, or the sound server did not answer ({0})")]
    Busy(String),
    #[error("permission denied: the sound server refused cowork the microphone ({0})")]
    PermissionDenied(String),
    #[error("the microphone failed: {0}")]
    Other(String),
}

impl MicError {
    fn from_cpal(err: cpal::Error) -> Self {
        let text = err.to_string();
        match err.kind() {
            cpal::ErrorKind::HostUnavailable => MicError::NoServer(text),
            cpal::ErrorKind::DeviceNotAvailable => MicError::NoDevice,
            cpal::ErrorKind::DeviceBusy => MicError::Busy(text),
            cpal::ErrorKind::PermissionDenied => MicError::PermissionDenied(text),
            _ => MicError::Other(text),
        }
    }

    /// An error met while reaching the server: anything but a refusal means there is no server to speak to.
    fn unreachable(err: cpal::Error) -> Self {
        match MicError::from_cpal(err) {
            denied @ MicError::PermissionDenied(_) => denied,
            MicError::NoDevice => MicError::NoServer("the server did not answer".into()),
            other => MicError::NoServer(other.to_string()),
        }
    }

    /// A short label for the status bar and `cowork doctor`.
    pub fn label(&self) -> &'static str {
        match self {
            MicError::NoServer(_) => "no sound server",
            MicError::NoDevice => "no microphone",
            MicError::Busy(_) => "microphone busy",
            MicError::PermissionDenied(_) => "permission denied",
            MicError::Other(_) => "microphone error",
        }
    }
}

/// What a stream sends its owner.
#[derive(Debug)]
pub enum Block {
    /// Interleaved f32 samples at the device's rate, when they arrived.
    Samples { samples: Vec<f32>, source: Source, arrived: Instant },
    /// The stream broke (device gone, server restarted).
    Failed { source: Source, error: MicError },
}

/// An input device as Settings → Voice lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputDevice {
    /// The server's name, which `voice.device` stores.
    pub name: String,
    /// What people call it ("Built-in Audio Analog Stereo").
    pub description: String,
    /// The monitor of an output (what the computer plays), not a microphone.
    pub monitor: bool,
    /// The server's default input.
    pub default: bool,
}

/// A connection to the sound server. Connecting opens no device: the
/// microphone is open only while a [`Capture`] lives.
pub struct SoundServer {
    host: cpal::Host,
}

impl SoundServer {
    pub fn connect() -> Result<Self, MicError> {
        if !cpal::available_hosts().contains(&cpal::HostId::PulseAudio) {
            return Err(MicError::NoServer("no PulseAudio socket: set PULSE_SERVER, or start PulseAudio or pipewire-pulse".into()));
        }
        let host = cpal::host_from_id(cpal::HostId::PulseAudio).map_err(MicError::unreachable)?;
        Ok(Self { host })
    }

    /// The source's device: the default input, an input named `name`, or the
    /// monitor of the default output.
    fn device(&self, source: Source, name: Option<&str>) -> Result<cpal::Device, MicError> {
        let found = match (source, name) {
            (Source::Microphone, None) => self.host.default_input_device(),
            (Source::Microphone, Some(name)) => {
                let devices = self.host.input_devices().map_err(MicError::from_cpal)?;
                devices.into_iter().find(|d| device_name(d).as_deref() == Some(name))
            }
            (Source::SystemAudio, _) => match self.host.default_output_device().and_then(|sink| device_name(&sink)) {
                Some(sink) => {
                    let monitor = format!("{sink}.monitor");
                    let devices = self.host.input_devices().map_err(MicError::from_cpal)?;
                    devices.into_iter().find(|d| device_name(d).as_deref() == Some(monitor.as_str()))
                }
                None => None,
            },
        };
        match found {
            Some(device) => Ok(device),
            // cpal says "none" for a server it cannot reach too: ask again to tell the two apart.
            None => match self.host.devices() {
                Ok(_) => Err(MicError::NoDevice),
                Err(err) => Err(MicError::unreachable(err)),
            },
        }
    }

    /// The inputs the server offers, microphones and monitors, by name and
    /// description, without opening any.
    pub fn input_devices(&self) -> Result<Vec<InputDevice>, MicError> {
        let default = self.host.default_input_device().and_then(|d| device_name(&d));
        let devices = self.host.input_devices().map_err(MicError::from_cpal)?;
        Ok(devices
            .filter_map(|device| {
                let name = device_name(&device)?;
                let description = device.description().map(|d| d.name().to_owned()).unwrap_or_else(|_| name.clone());
                Some(InputDevice { monitor: name.ends_with(".monitor"), default: default.as_deref() == Some(name.as_str()), description, name })
            })
            .collect())
    }

    /// The default input's name and format, without opening it.
    pub fn describe_default_input(&self) -> Result<String, MicError> {
        let device = self.device(Source::Microphone, None)?;
        let config = device.default_input_config().map_err(MicError::from_cpal)?;
        Ok(format!("{} ({} Hz, {} channels)", device_name(&device).unwrap_or_default(), config.sample_rate(), config.channels()))
    }

    /// Opens `source` and streams its samples to `blocks` until the capture
    /// is dropped: in the device's own rate and channels, or with
    /// `speech_format` already 16 kHz mono (the server converts; for streams
    /// that run for hours, see `listen`). With `fragment_millis` the server
    /// is asked for that latency end to end (push-to-talk: the first word
    /// counts); without, it delivers at its own pace from its full-size
    /// buffer, so a slow reader loses nothing and a monitor does not drive
    /// its sink to a low latency (listen mode: nobody waits on it).
    pub fn open(&self, source: Source, name: Option<&str>, fragment_millis: Option<u32>, speech_format: bool, blocks: Sender<Block>) -> Result<Capture, MicError> {
        let device = self.device(source, name)?;
        let default = device.default_input_config().map_err(MicError::from_cpal)?;
        let (rate, channels) = if speech_format { (super::SAMPLE_RATE, 1) } else { (default.sample_rate(), default.channels().max(1)) };
        let buffer_size = match fragment_millis {
            Some(millis) => cpal::BufferSize::Fixed(rate * millis / 1000),
            None => cpal::BufferSize::Default,
        };
        let config = cpal::StreamConfig { channels, sample_rate: rate, buffer_size };
        let data_blocks = blocks.clone();
        // The server may deliver in smaller pieces than asked (a monitor
        // follows its sink's latency): they are gathered to a fragment here,
        // on cpal's thread, so the worker wakes once per fragment.
        let fragment = (rate * fragment_millis.unwrap_or(0) / 1000) as usize * channels as usize;
        let mut gathered: Vec<f32> = Vec::with_capacity(fragment * 2);
        let stream = device
            .build_input_stream::<f32, _, _>(
                config,
                move |data: &[f32], _info: &cpal::InputCallbackInfo| {
                    gathered.extend_from_slice(data);
                    if gathered.len() < fragment {
                        return;
                    }
                    let samples = std::mem::replace(&mut gathered, Vec::with_capacity(fragment * 2));
                    let block = Block::Samples { samples, source, arrived: Instant::now() };
                    // Full: the worker is behind by seconds; dropping is better than blocking the server's thread.
                    if let Err(TrySendError::Full(_)) = data_blocks.try_send(block) {
                        tracing::warn!("audio: a {source:?} block was dropped, the worker is behind");
                    }
                },
                move |err: cpal::Error| {
                    let _ = blocks.try_send(Block::Failed { source, error: MicError::from_cpal(err) });
                },
                Some(OPEN_TIMEOUT),
            )
            .map_err(MicError::from_cpal)?;
        stream.play().map_err(MicError::from_cpal)?;
        Ok(Capture { _stream: stream, rate, channels: channels as usize, device: device_name(&device).unwrap_or_default(), source })
    }
}

/// The server's name for a device (`alsa_input…`, `speakers.monitor`): the
/// id cpal's PulseAudio host gives, not the description shown to people.
fn device_name(device: &cpal::Device) -> Option<String> {
    device.id().ok().map(|id| id.id().to_owned())
}

/// An open stream: dropping it closes the device.
pub struct Capture {
    _stream: cpal::Stream,
    pub rate: u32,
    pub channels: usize,
    pub device: String,
    pub source: Source,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_failure_reads_as_what_the_user_can_do() {
        let cases = [
            (cpal::ErrorKind::HostUnavailable, "no sound server"),
            (cpal::ErrorKind::DeviceNotAvailable, "no microphone"),
            (cpal::ErrorKind::DeviceBusy, "the microphone is busy"),
            (cpal::ErrorKind::PermissionDenied, "permission denied"),
            (cpal::ErrorKind::BackendError, "the microphone failed"),
        ];
        for (kind, expected) in cases {
            let error = MicError::from_cpal(cpal::Error::with_message(kind, "detail"));
            assert!(error.to_string().starts_with(expected), "{kind:?}: {error}");
        }
    }
}
