//! The `calendar` worker: reads the sources named in `calendar.sources` when
//! they change, when a file source's modification time changes, and every
//! `calendar.refresh_minutes`; replaces each source's rows of
//! `calendar_events` through the store; tells the UI each source's state and
//! the next events (`CalendarView`). A failing source keeps its last good
//! events; its error is shown in Settings and, once per new error, as a notice.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use rusqlite::Connection;

use super::{CalendarView, Source, SourceStatus};
use crate::net::OutboundGate;
use crate::runtime::{EventSink, Supervised, WorkerContext};
use crate::store::StoreCommand;

pub enum CalendarCommand {
    /// Read every source now (Settings' "Read now", tests).
    Refresh,
    Shutdown,
}

pub fn channel() -> (Sender<CalendarCommand>, Receiver<CalendarCommand>) {
    bounded(8)
}

/// How often the settings are read for changed sources.
const SETTINGS_EVERY: Duration = Duration::from_secs(3);
/// How often the UI is told the next events (they come closer as time passes).
const PUBLISH_EVERY: Duration = Duration::from_secs(30);
/// The window of events kept: two weeks back (the week view, recaps), two months ahead.
pub const KEEP_BEFORE_MILLIS: i64 = 14 * 86_400_000;
pub const KEEP_AHEAD_MILLIS: i64 = 60 * 86_400_000;
/// The most events one source keeps in that window.
const MAX_EVENTS: usize = 20_000;

/// Where a CalDAV password comes from (the secret store; tests give their own).
pub type Passwords = Box<dyn Fn(&str) -> Option<String> + Send>;
/// Who hears of a call the calendar has (listen mode, in the sidebar; it must not block).
pub type CallHook = Box<dyn Fn(super::CallStarting) + Send>;

/// The secret store of `data_dir`, opened when a password is needed.
pub fn secret_store(data_dir: PathBuf) -> Passwords {
    Box::new(move |name| crate::secrets::Secrets::open(&data_dir).ok().and_then(|s| s.get(name).ok().flatten()))
}

struct Known {
    source: Source,
    status: SourceStatus,
    /// When it was last tried, and a file's modification time then.
    tried: Option<Instant>,
    modified: Option<SystemTime>,
}

pub struct CalendarWorker {
    db_path: PathBuf,
    store: Sender<StoreCommand>,
    sink: EventSink<CalendarView>,
    gate: &'static OutboundGate,
    passwords: Passwords,
    conn: Option<Connection>,
    /// The sources as last read from the settings, and how often to read them.
    configured: String,
    refresh_every: Duration,
    known: Vec<Known>,
    settings_read: Option<Instant>,
    published: Option<Instant>,
    /// Errors already told as a notice, by source key (a repeat is not told again).
    told: HashMap<String, String>,
    /// Listen mode, told when an event with a call's address starts (it offers to listen).
    on_call: Option<CallHook>,
    /// The events listen mode was told of (uid, start).
    announced: std::collections::HashSet<(String, i64)>,
}

impl CalendarWorker {
    pub fn open(db_path: PathBuf, store: Sender<StoreCommand>, sink: EventSink<CalendarView>, gate: &'static OutboundGate, passwords: Passwords) -> Self {
        CalendarWorker {
            db_path,
            store,
            sink,
            gate,
            passwords,
            conn: None,
            configured: String::new(),
            refresh_every: Duration::from_secs(15 * 60),
            known: Vec::new(),
            settings_read: None,
            published: None,
            told: HashMap::new(),
            on_call: None,
            announced: Default::default(),
        }
    }

    /// Listen mode hears of calls the calendar has (the sidebar).
    pub fn with_calls(mut self, on_call: CallHook) -> Self {
        self.on_call = Some(on_call);
        self
    }

    fn connection(&mut self) -> Option<&Connection> {
        if self.conn.is_none() {
            self.conn = crate::store::open_read_only(&self.db_path).ok();
        }
        self.conn.as_ref()
    }

    /// Reads the settings; a change of sources replaces the list (and drops
    /// the events of sources no longer named).
    fn read_settings(&mut self) {
        let first = self.settings_read.is_none();
        self.settings_read = Some(Instant::now());
        // A database that cannot be read now changes nothing (it would read as "no calendars").
        let Some(pairs) = self.connection().and_then(|c| crate::store::all_settings(c).ok()) else { return };
        let setting = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        let minutes = setting(super::REFRESH_KEY).and_then(|v| v.trim().parse::<u32>().ok()).unwrap_or(super::DEFAULT_REFRESH_MINUTES).clamp(1, 1440);
        self.refresh_every = Duration::from_secs(u64::from(minutes) * 60);
        let sources = setting(super::SOURCES_KEY).unwrap_or_default();
        if sources == self.configured && !first {
            return;
        }
        self.configured = sources.to_owned();
        // The setting was checked when saved; a bad one read here (an older cowork wrote it) reads as none.
        let sources = super::parse_sources(&self.configured).unwrap_or_default();
        self.known = sources
            .into_iter()
            .map(|source| Known { status: SourceStatus { label: source.label(), ..SourceStatus::default() }, source, tried: None, modified: None })
            .collect();
        let keys: Vec<String> = self.known.iter().map(|k| k.source.key()).collect();
        let _ = self.store.send_timeout(StoreCommand::write("calendar sources", move |tx| super::db::keep_only(tx, &keys).map(|_| ())), Duration::from_secs(5));
        self.published = None;
    }

    /// Which sources are due: never tried, past their refresh time, or a file changed since.
    fn due(&self) -> Vec<usize> {
        (0..self.known.len())
            .filter(|&i| {
                let known = &self.known[i];
                match known.tried {
                    None => true,
                    Some(at) if at.elapsed() >= self.refresh_every => true,
                    Some(_) => matches!(&known.source, Source::File(path) if modified(path) != known.modified),
                }
            })
            .collect()
    }

    /// Reads source `index` and queues its events; its status says how it went.
    fn read_source(&mut self, index: usize) {
        let now = crate::ids::now_millis();
        let window = (now - KEEP_BEFORE_MILLIS, now + KEEP_AHEAD_MILLIS);
        let source = self.known[index].source.clone();
        self.known[index].tried = Some(Instant::now());
        if let Source::File(path) = &source {
            self.known[index].modified = modified(path);
        }
        let password = source.secret_name().and_then(|name| (self.passwords)(&name));
        let zone = jiff::tz::TimeZone::system();
        let read = super::fetch::read(&source, password.as_deref(), self.gate, window).and_then(|texts| {
            let mut events: Vec<crate::day::calendar::Event> = texts.iter().flat_map(|text| crate::day::calendar::events(text, window.0, window.1, &zone)).collect();
            events.sort_by(|a, b| (a.start_millis, &a.uid).cmp(&(b.start_millis, &b.uid)));
            events.dedup_by(|a, b| a.uid == b.uid && a.start_millis == b.start_millis);
            // A calendar of millions of tiny events keeps its soonest (the window starts two weeks back).
            events.truncate(MAX_EVENTS);
            if events.is_empty() && !texts.iter().any(|t| t.contains("BEGIN:VCALENDAR")) {
                return Err("what it gave is not a calendar (no BEGIN:VCALENDAR)".to_owned());
            }
            Ok(events)
        });
        let key = source.key();
        let status = &mut self.known[index].status;
        match read {
            Ok(events) => {
                status.read_at_millis = Some(now);
                status.events = events.len();
                status.error = None;
                self.told.remove(&key);
                let write = StoreCommand::write("calendar events", move |tx| super::db::replace(tx, &key, window, &events));
                if self.store.send_timeout(write, Duration::from_secs(5)).is_err() {
                    status.error = Some("the database did not take the events".into());
                }
            }
            Err(err) => {
                tracing::warn!(source = %status.label, %err, "a calendar could not be read");
                if self.told.get(&key) != Some(&err) {
                    self.sink.notice(format!("Calendar {}: {err}", status.label));
                    self.told.insert(key, err.clone());
                }
                status.error = Some(err);
            }
        }
        self.published = None;
    }

    /// Reads every source now (the command line, "Read now").
    pub fn read_all(&mut self) -> Vec<SourceStatus> {
        self.read_settings();
        for index in 0..self.known.len() {
            self.read_source(index);
        }
        self.statuses()
    }

    pub fn statuses(&self) -> Vec<SourceStatus> {
        self.known.iter().map(|k| k.status.clone()).collect()
    }

    fn publish(&mut self) {
        self.published = Some(Instant::now());
        let now = crate::ids::now_millis();
        let upcoming = self.connection().map(|c| super::db::upcoming(c, now, 86_400_000, 8)).unwrap_or_default();
        // A timed event, from 2.5 minutes before it: listen mode offers to listen to a call it has
        // when the microphone is in use, and names a call window's call by it.
        if let Some(on_call) = &self.on_call {
            for event in upcoming.iter().filter(|e| !e.all_day && e.start_millis - now <= 150_000) {
                if self.announced.insert((event.uid.clone(), event.start_millis)) {
                    on_call(super::CallStarting { title: event.title.clone(), join_url: event.join_url.clone(), start_millis: event.start_millis, end_millis: event.end_millis });
                }
            }
        }
        let view = CalendarView { sources: self.statuses(), upcoming };
        self.sink.send(view);
    }

    fn step(&mut self) {
        if self.settings_read.is_none_or(|at| at.elapsed() >= SETTINGS_EVERY) {
            self.read_settings();
        }
        // One source a step: a slow server does not hold up Shutdown for more than its timeout.
        if let Some(index) = self.due().into_iter().next() {
            self.read_source(index);
        }
        if self.published.is_none_or(|at| at.elapsed() >= PUBLISH_EVERY) {
            self.publish();
        }
    }
}

fn modified(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(super::expand_home(path)).and_then(|m| m.modified()).ok()
}

impl Supervised for CalendarWorker {
    type Command = CalendarCommand;

    fn run(&mut self, commands: &Receiver<CalendarCommand>, _ctx: &WorkerContext) -> anyhow::Result<()> {
        loop {
            self.step();
            match commands.recv_timeout(Duration::from_secs(1)) {
                Ok(CalendarCommand::Shutdown) | Err(RecvTimeoutError::Disconnected) => return Ok(()),
                Ok(CalendarCommand::Refresh) => {
                    self.read_settings();
                    for known in &mut self.known {
                        known.tried = None;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

pub fn spawn_calendar(
    db_path: PathBuf,
    data_dir: PathBuf,
    store: Sender<StoreCommand>,
    on_call: impl Fn(super::CallStarting) + Clone + Send + 'static,
    channel: (Sender<CalendarCommand>, Receiver<CalendarCommand>),
    sink: EventSink<CalendarView>,
    policy: crate::runtime::RestartPolicy,
) -> std::io::Result<crate::runtime::WorkerHandle<CalendarCommand>> {
    crate::runtime::spawn_supervised::<CalendarWorker, _, _>(crate::runtime::WorkerName::Calendar, policy, sink.runtime_only(), channel, move |_ctx| {
        Ok(CalendarWorker::open(db_path.clone(), store.clone(), sink.clone(), OutboundGate::global(), secret_store(data_dir.clone())).with_calls(Box::new(on_call.clone())))
    })
}
