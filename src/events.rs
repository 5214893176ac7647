//! `AppEvent`: everything workers tell the UI, as one enum of per-domain
//! enums. Each domain defines its own events beside its code and sends them
//! through a typed `runtime::EventSink<ItsEvent>`; only the UI side
//! (`state.rs`, `app.rs`, `workers.rs`, the CLI) names this bus.

/// Everything workers tell the UI. Summaries, not payloads.
#[derive(Clone, Debug)]
pub enum AppEvent {
    /// The agent: answers, operations, tool calls, consent, drafts.
    Agent(crate::agent::events::AgentEvent),
    /// Capture: the focused window, stream health, finished sessions.
    Capture(crate::capture::events::CaptureEvent),
    /// The store's own commands: a setting as stored, a deleted range.
    Store(crate::store::events::StoreEvent),
    /// The chat's threads and messages, as loaded.
    Chat(crate::chat::ChatEvent),
    /// The local model: its state, preflight and speed.
    LocalModel(crate::llm::events::LocalModelEvent),
    /// Model files: downloads, installs, added files.
    Models(crate::models::events::ModelsEvent),
    /// Memory: search results and indexing progress.
    Memory(crate::memory::events::MemoryEvent),
    /// Integrations: MCP servers, clients, elicitations, resources, prompts.
    Mcp(crate::mcp::events::McpEvent),
    /// The desktop: hotkeys, the tray, the colour scheme, what this desktop is.
    Desktop(crate::desktop::events::DesktopEvent),
    /// Workers' health, notices, and a request to shut down.
    Runtime(crate::runtime::RuntimeEvent),
    /// Push-to-talk, dictation and listen mode.
    Voice(crate::audio::events::VoiceEvent),
    /// The automations and their newest runs (Apps → Automations).
    Automations(crate::automations::events::AutomationsView),
    /// The installed apps, the install dialog, the open apps' views.
    Apps(Box<crate::apps::AppsView>),
    /// The notification inbox, newest first (Apps → Inbox).
    Inbox(Vec<crate::notify::events::InboxItem>),
}

impl From<crate::agent::events::AgentEvent> for AppEvent {
    fn from(event: crate::agent::events::AgentEvent) -> Self {
        AppEvent::Agent(event)
    }
}

impl From<crate::capture::events::CaptureEvent> for AppEvent {
    fn from(event: crate::capture::events::CaptureEvent) -> Self {
        AppEvent::Capture(event)
    }
}

impl From<crate::store::events::StoreEvent> for AppEvent {
    fn from(event: crate::store::events::StoreEvent) -> Self {
        AppEvent::Store(event)
    }
}

impl From<crate::llm::events::LocalModelEvent> for AppEvent {
    fn from(event: crate::llm::events::LocalModelEvent) -> Self {
        AppEvent::LocalModel(event)
    }
}

impl From<crate::models::events::ModelsEvent> for AppEvent {
    fn from(event: crate::models::events::ModelsEvent) -> Self {
        AppEvent::Models(event)
    }
}

impl From<crate::memory::events::MemoryEvent> for AppEvent {
    fn from(event: crate::memory::events::MemoryEvent) -> Self {
        AppEvent::Memory(event)
    }
}

impl From<crate::mcp::events::McpEvent> for AppEvent {
    fn from(event: crate::mcp::events::McpEvent) -> Self {
        AppEvent::Mcp(event)
    }
}

impl From<crate::desktop::events::DesktopEvent> for AppEvent {
    fn from(event: crate::desktop::events::DesktopEvent) -> Self {
        AppEvent::Desktop(event)
    }
}

impl From<crate::runtime::RuntimeEvent> for AppEvent {
    fn from(event: crate::runtime::RuntimeEvent) -> Self {
        AppEvent::Runtime(event)
    }
}

impl From<crate::audio::events::VoiceEvent> for AppEvent {
    fn from(event: crate::audio::events::VoiceEvent) -> Self {
        AppEvent::Voice(event)
    }
}

impl From<crate::automations::events::AutomationsView> for AppEvent {
    fn from(event: crate::automations::events::AutomationsView) -> Self {
        AppEvent::Automations(event)
    }
}

impl From<Box<crate::apps::AppsView>> for AppEvent {
    fn from(event: Box<crate::apps::AppsView>) -> Self {
        AppEvent::Apps(event)
    }
}

impl From<Vec<crate::notify::events::InboxItem>> for AppEvent {
    fn from(event: Vec<crate::notify::events::InboxItem>) -> Self {
        AppEvent::Inbox(event)
    }
}

impl From<crate::chat::ChatEvent> for AppEvent {
    fn from(event: crate::chat::ChatEvent) -> Self {
        AppEvent::Chat(event)
    }
}
