//! `cowork calendar`: the calendars' events of the next days (or of a span),
//! read from the database; `--refresh` reads every source first, in this
//! process, as the sidebar's `calendar` worker does, and says how each went.

use std::time::Duration;

use crate::config::Paths;

pub struct CalendarOptions {
    pub refresh: bool,
    /// Days from today's start (1: today).
    pub days: u32,
    pub json: bool,
}

/// Prints the events; `Ok(false)` when a source could not be read.
pub fn calendar(paths: &Paths, options: &CalendarOptions) -> anyhow::Result<bool> {
    let mut all_read = true;
    if options.refresh {
        let sink: crate::runtime::EventSink<crate::calendar::CalendarView> = crate::runtime::EventSink::ignored();
        let mut store = crate::store::spawn_store(paths.db_path(), sink.runtime_only(), crate::runtime::RestartPolicy::default(), crate::store::StoreHooks::default())?;
        let mut worker = crate::calendar::worker::CalendarWorker::open(
            paths.db_path(),
            store.commands.clone(),
            sink,
            crate::net::OutboundGate::global(),
            crate::calendar::worker::secret_store(paths.data_dir.clone()),
        );
        let statuses = worker.read_all();
        let (ack, done) = crossbeam_channel::bounded(1);
        let flushed = store.commands.send_timeout(crate::store::StoreCommand::Flush(ack), Duration::from_secs(30)).is_ok() && done.recv_timeout(Duration::from_secs(60)).is_ok();
        store.shutdown(crate::store::StoreCommand::Shutdown, Duration::from_secs(30));
        anyhow::ensure!(flushed, "the database did not take the events");
        if statuses.is_empty() {
            eprintln!("no calendars: name them in Settings → Memory → Calendar or with `cowork settings set calendar.sources PATH-OR-URL`");
        }
        for status in &statuses {
            match &status.error {
                Some(error) => {
                    all_read = false;
                    eprintln!("{}: {error}", status.label);
                }
                None => eprintln!("{}: {} events", status.label, status.events),
            }
        }
    }
    let conn = crate::store::open_read_only(&paths.db_path())?;
    let now = crate::ids::now_millis();
    let start = crate::ids::local_day_start_millis(now);
    let end = (0..options.days.max(1)).fold(start, |day, _| crate::day::ledger::next_midnight(day));
    let events = crate::calendar::db::between(&conn, start, end)?;
    if options.json {
        println!("{}", serde_json::to_string_pretty(&events)?);
    } else {
        if let Some(line) = crate::calendar::next_meeting_line(&events, now, 12 * 3_600_000) {
            println!("{line}");
        }
        for event in &events {
            let when = if event.all_day {
                format!("{} all day   ", crate::ids::local_date(event.start_millis))
            } else {
                format!("{} {}–{}", crate::ids::local_date(event.start_millis), crate::ids::format_clock(event.start_millis), crate::ids::format_clock(event.end_millis))
            };
            let people = if event.attendees.is_empty() { String::new() } else { format!(" (with {})", event.attendees.join(", ")) };
            let join = event.join_url.as_deref().map(|u| format!(" {u}")).unwrap_or_default();
            println!("{when}  {}{people}{join}", event.title);
        }
    }
    Ok(all_read)
}
