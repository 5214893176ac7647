//! The read lane as the `apps` worker serves it: cowork.db through the privacy
//! firewall's current rules (a window the rules withhold is not there for an
//! app, whenever it was recorded), hybrid search through the search worker
//! (`tools::memory::search_hits`: the same fusion and withholding as
//! `search_memory` and `cowork mcp serve`), the app's own storage (written
//! through the store's one writer), completions through the agent
//! (`AgentCommand::AppComplete`, waiting 5 s for room; router, budgets,
//! consent) and fetches through the network gate. What was deleted is gone for
//! apps too: they read the same rows. Pause needs nothing here: paused capture
//! records nothing, and the current window ends.

use std::time::Duration;

use crossbeam_channel::{Sender, bounded};
use parking_lot::Mutex;
use rusqlite::Connection;

use super::runtime::{Lane, context, data};
use crate::capture::firewall::Rules;
use crate::memory::search::{Filters, Stream};
use crate::memory::search_worker::SearchCommand;
use crate::store::StoreLink;
use crate::tools::memory::MemoryEnv;

/// How long an app's completion may take (the agent may be loading the model).
const COMPLETE_WAIT: Duration = Duration::from_secs(180);
/// The most text a fetch hands an app.
const FETCH_LIMIT: usize = 1 << 20;

/// Asks the agent for a completion on an app's behalf.
pub trait Completer: Send + Sync {
    fn complete(&self, app_id: &str, prompt: &str) -> Result<String, String>;
}

impl Completer for Sender<crate::agent::AgentCommand> {
    fn complete(&self, app_id: &str, prompt: &str) -> Result<String, String> {
        let (reply, answer) = bounded(1);
        let command = crate::agent::AgentCommand::AppComplete { app_id: app_id.to_owned(), prompt: prompt.to_owned(), reply };
        self.send_timeout(command, Duration::from_secs(5)).map_err(|_| "the agent is busy or not running".to_owned())?;
        answer.recv_timeout(COMPLETE_WAIT).map_err(|_| "the model did not answer in time".to_owned())?
    }
}

pub struct HostLane {
    /// The apps worker's read-only connection.
    conn: Mutex<Connection>,
    /// Writes (the apps tables) go to the store's one writer.
    store: StoreLink,
    /// The firewall's rules, read again before each call into an app.
    rules: Mutex<Rules>,
    recall: Option<Sender<SearchCommand>>,
    completer: Option<Box<dyn Completer>>,
    gate: &'static crate::net::OutboundGate,
}

impl HostLane {
    pub fn new(conn: Connection, store: StoreLink, recall: Option<Sender<SearchCommand>>, completer: Option<Box<dyn Completer>>, gate: &'static crate::net::OutboundGate) -> Self {
        let lane = HostLane { conn: Mutex::new(conn), store, rules: Mutex::new(Rules::default()), recall, completer, gate };
        lane.refresh();
        lane
    }

    /// Reads the user's rules as they are now. Unreadable settings withhold
    /// every window: the defaults could be laxer than the user's rules.
    pub fn refresh(&self) {
        let pairs = crate::store::all_settings(&self.conn.lock());
        *self.rules.lock() = match pairs {
            Ok(pairs) => crate::config::Settings::from_pairs(&pairs).0.rules(),
            Err(err) => {
                tracing::warn!(%err, "the privacy rules cannot be read; apps see no activity");
                // A title rule that matches every title.
                Rules { denied_titles: vec![regex::Regex::new("").expect("the empty pattern")], ..Rules::default() }
            }
        };
    }

    /// The read-only connection, for the worker's own queries.
    pub fn with_conn<R>(&self, work: impl FnOnce(&Connection) -> R) -> R {
        work(&self.conn.lock())
    }

    /// Runs a write on the store's writer and waits for it.
    pub fn write<T: Send + 'static>(&self, what: &'static str, work: impl FnOnce(&Connection) -> Result<T, String> + Send + 'static) -> Result<T, String> {
        self.store.call(what, move |conn| Ok(work(conn))).unwrap_or_else(|err| Err(format!("{err:#}")))
    }

    fn withholds(&self, session: &crate::records::ActivitySession) -> bool {
        self.rules.lock().withholds(Some(&session.app), &session.title, session.url.as_deref())
    }
}

impl Lane for HostLane {
    fn active_window(&self) -> Option<context::Window> {
        let sessions = crate::capture::db::recent_sessions(&self.conn.lock(), 1).ok()?;
        let session = sessions.into_iter().next().filter(|s| s.ended_at_millis.is_none())?;
        if self.rules.lock().paused || self.withholds(&session) {
            return None;
        }
        Some(context::Window { app: session.app, title: session.title, url: session.url })
    }

    fn recent_activity(&self, since_ms: i64, until_ms: i64, app: Option<&str>, limit: u32) -> Vec<context::Activity> {
        let now = crate::ids::now_millis();
        let sessions = match crate::capture::db::sessions_between(&self.conn.lock(), since_ms, until_ms) {
            Ok(sessions) => sessions,
            Err(err) => {
                tracing::warn!(%err, "an app's activity could not be read");
                return Vec::new();
            }
        };
        sessions
            .into_iter()
            .filter(|s| app.is_none_or(|a| a == s.app) && !self.withholds(s))
            .take(limit as usize)
            .map(|s| context::Activity { end_ms: s.ended_at_millis.unwrap_or(now).max(s.started_at_millis), app: s.app, title: s.title, start_ms: s.started_at_millis })
            .collect()
    }

    fn now(&self) -> i64 {
        crate::ids::now_millis()
    }

    fn day_start(&self) -> i64 {
        crate::ids::local_day_start_millis(crate::ids::now_millis())
    }

    fn profile(&self) -> String {
        let conn = self.conn.lock();
        let settings = crate::store::all_settings(&conn).map(|pairs| crate::config::Settings::from_pairs(&pairs).0).unwrap_or_default();
        let facts = crate::memory::hot::facts(&conn).unwrap_or_default();
        let mut profile = settings.profile.trim().to_owned();
        for fact in facts.iter().filter(|f| f.file == crate::memory::hot::File::User) {
            profile.push_str(&format!("\n- {}", fact.text));
        }
        profile.trim().to_owned()
    }

    fn preferences(&self) -> Vec<(String, String)> {
        let conn = self.conn.lock();
        let settings = crate::store::all_settings(&conn).map(|pairs| crate::config::Settings::from_pairs(&pairs).0).unwrap_or_default();
        let offset_minutes = (self.day_start() - crate::ids::local_day_start_millis(0)).rem_euclid(86_400_000) / 60_000;
        vec![
            ("offline".into(), settings.offline.to_string()),
            ("language".into(), std::env::var("LANG").unwrap_or_default().split('.').next().unwrap_or_default().to_owned()),
            ("day_start_offset_minutes".into(), offset_minutes.to_string()),
        ]
    }

    fn search(&self, query: &str, filters: &data::Filters, limit: u32) -> Vec<data::Hit> {
        let conn = self.conn.lock();
        let rules = self.rules.lock().clone();
        let recall = self.recall.as_ref().map(|r| r as &dyn crate::tools::memory::Recall);
        let env = MemoryEnv { conn: &conn, recall, withheld: Some(&rules), store: None, thread_id: None, now_millis: crate::ids::now_millis() };
        let filters = Filters { since_millis: filters.since_ms, until_millis: filters.until_ms, app: filters.app.clone(), streams: filters.kind.as_deref().and_then(Stream::parse).into_iter().collect() };
        match crate::tools::memory::search_hits(&env, query.trim(), &filters, limit as usize) {
            Ok(hits) => hits.into_iter().map(|h| data::Hit { source: h.stream.as_str().to_owned(), title: h.title, snippet: h.snippet, at_ms: h.at_millis }).collect(),
            Err(err) => {
                tracing::warn!(%err, "an app's search failed");
                Vec::new()
            }
        }
    }

    fn conversations(&self, app_id: &str) -> Vec<data::Conversation> {
        let rows = super::store::conversations(&self.conn.lock(), app_id).unwrap_or_default();
        rows.into_iter().map(|(id, title, updated_ms)| data::Conversation { id, title, updated_ms }).collect()
    }

    fn storage_get(&self, app_id: &str, key: &str) -> Option<String> {
        super::store::storage_get(&self.conn.lock(), app_id, key).ok().flatten()
    }

    fn storage_set(&self, app_id: &str, key: &str, value: &str) {
        let (app, key, value) = (app_id.to_owned(), key.to_owned(), value.to_owned());
        if let Err(err) = self.write("app storage", move |conn| super::store::storage_set(conn, &app, &key, &value, crate::ids::now_millis())) {
            tracing::warn!(app = app_id, %err, "an app's value was not stored");
        }
    }

    fn complete(&self, app_id: &str, prompt: &str) -> Result<String, String> {
        let completer = self.completer.as_ref().ok_or("no model is running here")?;
        completer.complete(app_id, prompt)
    }

    fn fetch(&self, url: &str) -> Result<String, String> {
        let out = crate::tools::web::fetch(url, "an app's fetch", self.gate, &std::sync::atomic::AtomicBool::new(false));
        if out.is_error {
            return Err(out.content);
        }
        let mut text = out.content;
        if text.len() > FETCH_LIMIT {
            let mut end = FETCH_LIMIT;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        Ok(text)
    }
}
