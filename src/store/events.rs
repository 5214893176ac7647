//! What the store worker's own commands tell the UI: a setting as stored,
//! and a stretch of time deleted.

#[derive(Clone, Debug)]
pub enum StoreEvent {
    /// A setting as stored, after the store worker read or wrote it.
    Setting { key: String, value: String },
    /// Everything in the range was deleted (and purged from disk).
    RangeDeleted { since_millis: i64, until_millis: i64, sessions: usize, messages: usize },
}
