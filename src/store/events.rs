//! What the store worker tells the UI after a read or a write.

use crate::records::{ActivitySession, ChatMessage, ChatThread};

#[derive(Clone, Debug)]
pub enum StoreEvent {
    /// What was typed and copied during one session (Context panel, on click).
    SessionDetail { session_id: i64, typed: Vec<(i64, String)>, copied: Vec<(i64, String)> },
    SessionsLoaded(Vec<ActivitySession>),
    ThreadsLoaded(Vec<ChatThread>),
    MessagesLoaded { thread_id: i64, messages: Vec<ChatMessage> },
    /// Hot memory as stored (after a load or an edit).
    HotMemory(Vec<crate::memory::hot::Fact>),
    /// What is pinned to a thread (after opening it, a pin or an unpin).
    ThreadPins { thread_id: i64, items: Vec<crate::memory::rag::Item> },
    /// A setting as stored, after the store worker read or wrote it.
    Setting { key: String, value: String },
    /// Everything in the range was deleted (and purged from disk).
    RangeDeleted { since_millis: i64, until_millis: i64, sessions: usize, messages: usize },
    /// A tool call as stored, when a thread's calls are loaded again.
    ToolCall(Box<crate::agent::events::ToolCallView>),
}
