//! What the audio, speech and listen workers tell the UI (`VoiceEvent`).

/// Where a transcript goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoiceTarget {
    QuickPrompt,
    Chat,
    /// Typed into the focused app (Settings → Voice → Dictation).
    Dictation,
}

/// What the `audio` and `speech` workers report about an utterance.
#[derive(Clone, Debug, PartialEq)]
pub enum VoiceEvent {
    /// The microphone is open (the indicator shows) for `target`.
    Opened { target: VoiceTarget, device: String },
    /// The first samples arrived, `millis` after the key press.
    FirstSample { millis: u64 },
    /// The input level for the meter, 0–1.
    Level(f32),
    /// The microphone closed; unless cancelled, transcription follows.
    Closed { cancelled: bool },
    Transcribing { target: VoiceTarget },
    /// What was heard, and how long after the release it was ready.
    Heard { target: VoiceTarget, heard: crate::audio::transcribe::Heard, release_to_text_millis: u64 },
    /// No microphone, a busy one, a refused one, a model that would not load.
    Failed { target: Option<VoiceTarget>, error: String },
    /// Listen mode's state, sent when it changes.
    Listening(ListenStatus),
    /// The input devices (Settings → Voice), or why they cannot be listed.
    Devices(Result<Vec<crate::audio::mic::InputDevice>, String>),
    /// Dictation typed this many characters into the focused app.
    Typed { chars: usize },
}

/// What listen mode is doing: the streams open (device names), why it is
/// held, its last error, and what it stored.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListenStatus {
    pub mic: Option<String>,
    pub system: Option<String>,
    /// Why nothing is open although listen mode is on (pause, quiet hours).
    pub held: Option<String>,
    pub error: Option<String>,
    /// Chunks stored since the app started, and chunks not stored (an
    /// excluded window was focused, or transcription fell behind).
    pub stored: u64,
    pub skipped: u64,
    /// The last thing heard, "You: …" or "Others: …".
    pub last: Option<String>,
    /// The call being listened to (the user clicked Listen on its offer): "Google Meet: Q3 review, since 14:02".
    pub call: Option<String>,
}

impl ListenStatus {
    pub fn open(&self) -> bool {
        self.mic.is_some() || self.system.is_some()
    }
}
