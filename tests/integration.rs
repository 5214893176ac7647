//! The one integration-test binary: real SQLite files, real models from
//! `models/`, real X11 windows under Xvfb, real HTTP and MCP servers on loopback.
//!
//! Tests that need models, X or node skip with a message when those are absent,
//! unless `COWORK_TEST_FULL=1` (set by scripts/test and CI), where absence fails.

// clippy.toml's rules are for the program: tests spawn plain threads, use
// unbounded channels and std locks for their servers, and catch a panic to
// check that one is contained.
#[allow(clippy::disallowed_types, clippy::disallowed_methods)]
mod integration {
    pub mod support;

    mod agent;
    mod agent_memory;
    mod apps;
    mod automations;
    mod calendar;
    mod capture_desktop;
    mod capture_x11;
    mod cli;
    mod day;
    mod cloud;
    mod documents;
    mod encryption;
    mod install;
    mod layout;
    mod llm_real;
    mod mcp;
    mod memory;
    mod models;
    mod notify;
    mod provider_mocks;
    mod providers;
    mod render;
    mod screen;
    mod screen_stream;
    mod security;
    mod security2;
    mod security2_documents;
    mod security2_mcp;
    mod security2_providers;
    mod store_worker;
    mod supervisor;
    mod ui;
    mod voice;
    mod gnome;
    mod portal;
    mod wayland;
}
