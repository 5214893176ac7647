//! Your day (issue 58): which project each stretch of work belongs to
//! (`projects`, the user's rules first, then what titles and addresses say),
//! time per project per day and week (`ledger`), which `cowork report`
//! prints, the timeline's layout (`timeline`), which the Context panel draws,
//! the daily and weekly recap's sources, prompt and checks (`recap`), and
//! which windows are calls and when a call starts and ends (`meetings`),
//! what a calendar file says, repeating events expanded (`calendar`), and
//! the citations both the recap and meeting notes read (`cites`).

pub mod calendar;
pub mod cites;
pub mod ledger;
pub mod meetings;
pub mod projects;
pub mod recap;
pub mod timeline;
