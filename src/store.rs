//! The SQLite file `cowork.db`: schema, query functions and the `store` worker,
//! the only thread of the sidebar that writes to it. Other threads read through
//! read-only connections and write by sending it commands (`StoreCommand`) or
//! calls that wait for their result (`StoreLink`).

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
