//! Apps (issue 17): small programs in the Apps tab. WebAssembly components
//! run by wasmtime against cowork's WIT world (`assets/sdk/wit`), or apps
//! without code (a manifest binding lane queries to a view). `runtime`
//! compiles (with an on-disk cache), links only the capabilities the user
//! granted, and calls `render`/`handle` with a time limit and a memory cap;
//! `manifest` reads packages and derives the disclosure from the imports;
//! `lane` serves the read lane through the privacy rules; `view` parses what
//! an app returns; `worker` is the `apps` thread.

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
