//! cowork: a light, private desktop sidecar.
//!
//! The library holds everything; `main.rs` only parses arguments and starts
//! things. See ARCHITECTURE.md for the map of threads and channels.

// clippy.toml's rules (named threads, bounded channels, parking_lot, panics
// caught by the supervisor alone) are for the program; unit tests may spawn,
// lock and catch as they need.
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::disallowed_types))]
// A switchboard function grows with every feature; past 150 lines it is split along its seams.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod agent;
pub mod app;
pub mod apps;
pub mod audio;
pub mod automations;
pub mod brains;
pub mod build_info;
pub mod calendar;
pub mod capture;
pub mod chat;
pub mod commands;
pub mod config;
pub mod day;
pub mod desktop;
pub mod documents;
pub mod erase;
pub mod events;
pub mod export;
pub mod ids;
pub mod llm;
pub mod memory;
pub mod mcp;
pub mod media;
pub mod models;
pub mod native;
pub mod net;
pub mod notify;
pub mod ocr;
pub mod records;
pub mod runtime;
pub mod sealed;
pub mod secrets;
pub mod state;
pub mod store;
#[cfg(test)]
mod test_rng;
pub mod tools;
pub mod ui;
pub mod workers;
