//! `AppEvent`: everything workers tell the UI, as one enum of per-domain enums.
//! Each domain defines its own events beside its code and sends them through a
//! typed `runtime::EventSink<ItsEvent>`; only the UI side (`state.rs`,
//! `app.rs`, `workers.rs`, the CLI) names this bus, and the files that define
//! the carried types never import it. No egui types: the reducer that applies
//! these (`state.rs`) is tested without a window.

/// Declares `AppEvent` with one variant per domain and the `From` impl that
/// lets `EventSink::narrow` give each worker a sink of its own events.
macro_rules! bus {
    ($($(#[doc = $doc:expr])* $variant:ident($event:ty),)*) => {
        /// Everything workers tell the UI. Summaries, not payloads.
        #[derive(Clone, Debug)]
        pub enum AppEvent {
            $($(#[doc = $doc])* $variant($event),)*
        }

        $(impl From<$event> for AppEvent {
            fn from(event: $event) -> Self {
                AppEvent::$variant(event)
            }
        })*
    };
}

bus! {
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
    /// The calendars: each source's state and the next events.
    Calendar(crate::calendar::CalendarView),
}
