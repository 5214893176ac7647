//! Apps (issue 17): small programs in the Apps tab, WebAssembly components
//! run by wasmtime against cowork's WIT world (`assets/sdk/wit`). `runtime`
//! compiles (with an on-disk cache), links only the capabilities the user
//! granted, and calls `render`/`handle` with a time limit and a memory cap.

pub mod runtime;

pub use runtime::{AppError, Capability, Lane, Runtime};
