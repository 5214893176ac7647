//! The SQLite file `cowork.db`: schema, query functions and the `store` worker,
//! the only thread of the sidebar that writes to it. Other threads read through
//! read-only connections and write by sending it commands (`StoreCommand`) or
//! calls that wait for their result (`StoreLink`).
//!
//! - `schema`: `open_writer`, `open_read_only`, `write_transaction`, and the
//!   numbered migrations of `assets/migrations/`, each applied in its own
//!   transaction (`PRAGMA user_version`); WAL, a busy timeout, FTS5 tables kept
//!   in sync with their rows by triggers.
//! - `key`: the database key and the encryption of the file (SQLCipher);
//!   `crate::sealed` seals the files derived from the database.
//! - `queries`: the store's own SQL (settings rows). Each domain keeps its SQL
//!   beside it (`capture::db`, `chat`, `erase`, `memory::commands`,
//!   `agent::store`, …): plain `fn(&Connection, …)`, tested on migrated
//!   in-memory databases (`test_db`).
//! - `worker`: the `store` worker; `link`: `StoreLink`.
//!
//! In the sidebar process the `store` thread is the one writer: capture, keys,
//! clipboard, listen, the agent, folders and the UI send it `StoreCommand`s
//! (Undo is one: a job run on the writer); the automations, notify, apps and
//! embed workers, whose next step reads what they wrote, use `StoreLink::call`.
//! Every other connection of the process is read-only. A separate process (a
//! CLI command, `cowork mcp serve`) opens a writer of its own, so every writing
//! transaction starts with `write_transaction` (`BEGIN IMMEDIATE`): with two
//! processes writing one WAL file, a deferred transaction that reads first and
//! writes later fails with SQLITE_BUSY, without waiting, when the other
//! committed in between.

pub mod events;
pub mod key;
mod link;
mod queries;
mod schema;
mod worker;

pub use queries::*;
pub use schema::{DB_FILE_NAME, SCHEMA_VERSION, migrate, open_read_only, open_writer, write_transaction};
pub use link::StoreLink;
#[cfg(test)]
pub(crate) use link::test_store;
pub use worker::{Periodic, StoreCommand, StoreHooks, StoreWorker, Writer, data_dir, spawn_store};

/// A migrated database in memory, for unit tests of the SQL beside each domain.
#[cfg(test)]
pub(crate) fn test_db() -> rusqlite::Connection {
    let conn = rusqlite::Connection::open_in_memory().expect("an in-memory database opens");
    migrate(&conn).expect("the migrations apply");
    conn
}
