//! The views: one file per panel (`chat`, `context`, `apps`, `settings` with
//! `memory` for its Memory section, `quick_prompt`, `status_bar`, `setup` for
//! the first run, …); colours in `theme`; the shortcut table in `shortcuts`
//! serves both key handling and the Settings list; `widgets` holds what panels
//! share. Views read `AppState`, keep only panel-local state, and push
//! `UiAction`s; they never send on channels, open files or touch the database.
//!
//! Invariant: nothing in a panel is wider than the panel from 320 to 600 px,
//! and every control has an accessible name (`tests/integration/layout.rs`
//! checks both on every tab, drawing each frame with a software renderer).

pub mod app_view;
pub mod apps;
pub mod agent;
pub mod chat;
pub mod consent;
pub mod context;
pub mod desktop;
pub mod flow_editor;
pub mod integrations;
pub mod locked;
pub mod mcp_chat;
pub mod memory;
pub mod quick_prompt;
pub mod settings;
pub mod setup;
pub mod shortcuts;
pub mod status_bar;
pub mod theme;
pub mod voice;
pub mod widgets;
