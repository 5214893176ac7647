//! What the llm worker tells the UI about the local model: its state, its
//! memory preflight and its speed here.

#[derive(Clone, Debug)]
pub enum LocalModelEvent {
    Model(ModelStatus),
    /// The local model's memory preflight (GREEN, YELLOW or RED, with the figures).
    ModelPreflight(String),
    /// A local chat model's speed here after its latest generation, by model file name (`llm::speed`).
    ModelSpeed { model: String, measured: crate::llm::speed::Measured },
}

/// Status of the local model as the llm worker sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelStatus {
    NotLoaded,
    Loading,
    /// Loaded in `load_millis`; the load added `resident_bytes` to the process (0: not measured).
    Ready { load_millis: u64, resident_bytes: u64 },
    /// Missing, corrupt or unloadable, with a message a user can act on.
    Unavailable(String),
}
