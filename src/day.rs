//! Your day (issue 58): which project each stretch of work belongs to
//! (`projects`, the user's rules first, then what titles and addresses say),
//! time per project per day and week (`ledger`), which `cowork report`
//! prints, and the timeline's layout (`timeline`), which the Context panel draws.

pub mod ledger;
pub mod projects;
pub mod timeline;
