//! Apps (issue 17): small programs in the Apps tab. WebAssembly components run
//! by wasmtime against cowork's WIT world (`assets/sdk/wit`), or apps without
//! code (a manifest binding lane queries to a view). `runtime` compiles (with
//! an on-disk cache), links only the capabilities the user granted, and calls
//! `render`/`handle` with a time limit and a memory cap; `manifest` reads
//! packages and derives the disclosure from the imports; `store` installs,
//! updates and removes them (migration 15); `lane` serves the read lane through
//! the privacy rules; `nocode` fills a template from lane queries; `view`
//! parses what an app returns (`ui::app_view` draws it); `worker` is the `apps`
//! thread.
//!
//! The WIT world `cowork:app@0.1.0` is the only thing an app can call: the read
//! lane (`context`, `user`, `data`) and, when granted at install, `ai` and
//! `http`; an app exports `render(state) -> view` and `handle(action, state) ->
//! state`, both JSON. JavaScript and Python components import every interface
//! of the world they are built for, so each set of capabilities has its own
//! world (`app`, `app-with-ai`, `app-with-http`, `app-with-ai-and-http`), and
//! what a component imports is what it was built to call. No WASI is linked: a
//! component that imports it is refused at install (componentize-py builds with
//! `--stub-wasi`).
//!
//! Invariants:
//! - The host, never the app, names the app: storage, conversations and
//!   completions are scoped by the id the store holds, so no call can reach
//!   another app's data.
//! - The apps worker writes (through the store) only the apps tables and, on
//!   removal, the chat threads an app opened; apps get data, never tools:
//!   nothing an app returns reaches the agent's tools, and its host actions
//!   (copy, open a URL) ask the user first.
//! - An app reaches nothing but the interfaces its linker has: the read lane,
//!   and the capabilities the user granted (no files, no clock but
//!   `context.now`, no network but a granted `http`).

pub mod lane;
pub mod manifest;
pub mod nocode;
pub mod runtime;
pub mod store;
pub mod view;
pub mod worker;

pub use manifest::{Disclosure, Manifest, Package};
pub use runtime::{AppError, Capability, Lane, Runtime};
pub use worker::{AppsCommand, AppsView};
