//! What the runtime tells the UI: a worker's health, a notice any worker may
//! give, and a request to shut down; and the names of the workers.

use super::WorkerState;

#[derive(Clone, Debug)]
pub enum RuntimeEvent {
    Worker { worker: WorkerName, state: WorkerState },
    /// Something a user should see that is not tied to one worker's health.
    Notice(String),
    /// SIGTERM or SIGINT: close the window so workers can flush.
    ShutdownRequested,
}

/// Which worker a health event is about. The thread name is the worker name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkerName {
    Store,
    Capture,
    Keys,
    Clipboard,
    A11y,
    Llm,
    Agent,
    Models,
    Search,
    Embed,
    Mcp,
    Audio,
    Speech,
    Listen,
    Automations,
    Notify,
    Apps,
    Folders,
    Screen,
    Calendar,
}

impl WorkerName {
    pub const ALL: [WorkerName; 20] = [
        WorkerName::Store,
        WorkerName::Capture,
        WorkerName::Keys,
        WorkerName::Clipboard,
        WorkerName::A11y,
        WorkerName::Llm,
        WorkerName::Agent,
        WorkerName::Models,
        WorkerName::Search,
        WorkerName::Embed,
        WorkerName::Mcp,
        WorkerName::Audio,
        WorkerName::Speech,
        WorkerName::Listen,
        WorkerName::Automations,
        WorkerName::Notify,
        WorkerName::Apps,
        WorkerName::Folders,
        WorkerName::Screen,
        WorkerName::Calendar,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WorkerName::Store => "store",
            WorkerName::Capture => "capture",
            WorkerName::Keys => "keys",
            WorkerName::Clipboard => "clipboard",
            WorkerName::A11y => "a11y",
            WorkerName::Llm => "llm",
            WorkerName::Agent => "agent",
            WorkerName::Models => "models",
            WorkerName::Search => "search",
            WorkerName::Embed => "embed",
            WorkerName::Mcp => "mcp",
            WorkerName::Audio => "audio",
            WorkerName::Speech => "speech",
            WorkerName::Listen => "listen",
            WorkerName::Automations => "automations",
            WorkerName::Notify => "notify",
            WorkerName::Apps => "apps",
            WorkerName::Folders => "folders",
            WorkerName::Screen => "screen",
            WorkerName::Calendar => "calendar",
        }
    }
}

impl WorkerName {
    /// What the user calls it (the status bar, Settings → About).
    pub fn title(self) -> &'static str {
        self.describe().0
    }

    /// Its name and one line on what it does.
    pub fn describe(self) -> (&'static str, &'static str) {
        match self {
            WorkerName::Store => ("Database", "keeps everything in the one encrypted cowork.db"),
            WorkerName::Capture => ("Window capture", "which app and window you are in, and when you are away"),
            WorkerName::Keys => ("Typing capture", "what you type, in chunks, outside password fields"),
            WorkerName::Clipboard => ("Clipboard capture", "what you copy, and from which app"),
            WorkerName::A11y => ("Browser addresses", "the address bar of your browser, through desktop accessibility"),
            WorkerName::Llm => ("Local model", "answers on this computer"),
            WorkerName::Agent => ("Agent", "answers, and calls tools behind your approvals"),
            WorkerName::Models => ("Model downloads", "fetches and checks the model files"),
            WorkerName::Search => ("Search", "finds what you saw, typed or copied, by words and meaning"),
            WorkerName::Embed => ("Memory indexing", "turns new activity into searchable meaning"),
            WorkerName::Mcp => ("Integrations", "the MCP servers cowork uses, and serves"),
            WorkerName::Audio => ("Microphone", "records only while you talk to cowork"),
            WorkerName::Speech => ("Speech to text", "Whisper, on this computer"),
            WorkerName::Listen => ("Listen mode", "transcribes what is said near the computer, when you turned it on"),
            WorkerName::Automations => ("Automations", "runs routines on their schedule or trigger"),
            WorkerName::Notify => ("Notifications", "tells you what needs you, quietly when you are busy"),
            WorkerName::Apps => ("Apps", "runs the small apps you installed, each in its sandbox"),
            WorkerName::Folders => ("Document folders", "keeps the documents of the folders you named searchable as they change"),
            WorkerName::Screen => ("Screen text", "reads the focused window's text, when you turned it on"),
            WorkerName::Calendar => ("Calendar", "reads the calendars you named, to know your meetings"),
        }
    }
}

impl std::fmt::Display for WorkerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
