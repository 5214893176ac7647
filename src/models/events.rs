//! What the models worker tells the UI: downloads, installs and added files.

#[derive(Clone, Debug)]
pub enum ModelsEvent {
    /// Download progress of one model file (or why it failed).
    ModelDownload { path: String, done_bytes: u64, total_bytes: u64, error: Option<String> },
    /// The models worker finished an install, a removal (`name`) or fetching
    /// everything (empty name): what to tell the user. Settings → Models checks the files again.
    ModelsChanged { name: String, outcome: Result<String, String> },
    /// A GGUF file the user added (Settings → Models), or why it was refused.
    ModelAdded(Result<crate::models::user::UserModel, String>),
}
