//! The views: one file per panel. Views read `AppState`, keep only panel-local
//! state, and push `UiAction`s; they never send on channels or touch files.

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
