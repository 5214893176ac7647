//! What memory's workers tell the UI: search results and indexing progress.

#[derive(Clone, Debug)]
pub enum MemoryEvent {
    /// Hot memory as stored (after a load or an edit).
    HotMemory(Vec<crate::memory::hot::Fact>),
    /// What is pinned to a thread (after opening it, a pin or an unpin).
    ThreadPins { thread_id: i64, items: Vec<crate::memory::rag::Item> },
    /// Results of search generation `generation` (older generations are stale).
    SearchResults {
        generation: u64,
        query: String,
        hits: Vec<crate::memory::search::Hit>,
        millis: f64,
        error: Option<String>,
        /// Why only keyword matches are shown (the vector half could not run).
        keyword_only: Option<String>,
    },
    /// Lines cowork proposes for the profile, for the user to add or dismiss.
    ProfileProposals(Vec<crate::memory::profile::Proposal>),
    /// How far embedding has got (Settings → Memory).
    MemoryProgress(crate::memory::jobs::Progress),
}
