//! `cowork doctor`: checks the display, the database, each model, each worker
//! and each native library by exercising it, and says what to do about failures.

use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use serde::Serialize;

use crate::{native, store};
use crate::desktop::x11::X11Desktop;
use crate::config::{Paths, resolve_model};
use crate::events::AppEvent;
use crate::llm::LlmCommand;
use crate::llm::events::{LocalModelEvent, ModelStatus};
use crate::models::{Manifest, ModelRole};
use crate::runtime::{EventSink, RestartPolicy, RuntimeEvent, WorkerName, WorkerState};
use crate::workers::{WorkerOptions, Workers};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub area: &'static str,
    pub name: String,
    pub status: Status,
    pub detail: String,
}

fn check(area: &'static str, name: impl Into<String>, result: anyhow::Result<String>) -> Check {
    match result {
        Ok(detail) => Check { area, name: name.into(), status: Status::Ok, detail },
        Err(err) => Check { area, name: name.into(), status: Status::Fail, detail: format!("{err:#}") },
    }
}

pub fn run_checks(paths: &Paths, display: Option<&str>) -> Vec<Check> {
    let mut checks = Vec::new();
    let desktop_accessibility = crate::workers::read_settings(paths).0.desktop_accessibility;
    let desktop = crate::desktop::session::for_display(display, desktop_accessibility);
    checks.push(display_check(display, &desktop));
    checks.extend(desktop_checks(&desktop));
    checks.push(key_check(paths));
    checks.push(database_check(paths));
    checks.push(accessibility_check(desktop_accessibility));
    checks.push(secrets_check(paths));
    checks.extend(mcp_trust_checks(paths));
    checks.extend(stream_checks(paths));
    let manifest = Manifest::bundled();
    match &manifest {
        Ok(manifest) => {
            for (path, file_check) in super::models::verify_all(manifest, &paths.models_dir) {
                let full = paths.models_dir.join(&path);
                let status = if file_check.is_ok() { Status::Ok } else { Status::Fail };
                checks.push(Check { area: "model", name: path, status, detail: file_check.describe(&full) });
            }
        }
        Err(err) => checks.push(Check { area: "model", name: "manifest".into(), status: Status::Fail, detail: format!("{err:#}") }),
    }
    checks.push(check("native", "sqlite", native::sqlite_probe()));
    checks.push(check("native", "faiss", native::faiss_probe()));
    let speech = manifest.as_ref().ok().and_then(|m| resolve_model(m, &paths.models_dir, ModelRole::Speech));
    checks.push(match speech {
        Some(model) if model.path.is_file() => check("native", "whisper", native::whisper_probe(&model.path)),
        Some(model) => Check {
            area: "native",
            name: "whisper".into(),
            status: Status::Fail,
            detail: format!("speech model missing; download it under Models in Settings (or `cowork models fetch`): {}", model.path.display()),
        },
        None => Check { area: "native", name: "whisper".into(), status: Status::Fail, detail: "no speech model in the manifest".into() },
    });
    if let Ok(manifest) = &manifest {
        checks.push(vad_check(manifest, &paths.models_dir));
    }
    checks.push(microphone_check());
    checks.push(ocr_check());
    let chat = manifest.as_ref().ok().and_then(|m| crate::workers::chat_model(m, paths));
    checks.extend(worker_checks(paths, display, chat, desktop_accessibility));
    checks
}

/// What each configured MCP server's trust allows, in one sentence each.
fn mcp_trust_checks(paths: &Paths) -> Vec<Check> {
    let config = match crate::mcp::config::McpConfig::load(&paths.data_dir) {
        Ok(config) => config,
        Err(err) => return vec![Check { area: "mcp", name: "mcp-servers.json".into(), status: Status::Fail, detail: format!("{err:#}") }],
    };
    config
        .servers
        .iter()
        .map(|(name, server)| {
            let detail = if server.disabled {
                "disabled: none of its tools is offered".to_owned()
            } else {
                format!("{} {}", crate::mcp::tools::trust_text(server.trusted), crate::mcp::tools::UNTRUSTED_TEXT)
            };
            Check { area: "mcp", name: name.clone(), status: Status::Ok, detail }
        })
        .collect()
}

/// The VAD model loads in whisper.cpp (its file checked in Rust first).
fn vad_check(manifest: &crate::models::Manifest, models_dir: &std::path::Path) -> Check {
    let check = |status, detail: String| Check { area: "native", name: "silero-vad".into(), status, detail };
    let Some(model) = manifest.by_role(ModelRole::Vad) else { return check(Status::Fail, "no VAD model in the manifest".into()) };
    let path = models_dir.join(model.primary_path());
    if !path.is_file() {
        return check(Status::Fail, format!("VAD model missing; download it under Models in Settings (or `cowork models fetch`): {}", path.display()));
    }
    match native::vad_probe(&path) {
        Ok(detail) => check(Status::Ok, detail),
        Err(err) => check(Status::Fail, format!("{err:#}")),
    }
}

/// Tesseract for text in pictures (scanned pages, attached pictures, screen
/// text where a window has no accessible text): its version and languages, or
/// what to install. A warning, not a failure: cowork works without it.
fn ocr_check() -> Check {
    match crate::ocr::status() {
        Ok(status) => Check {
            area: "native",
            name: "tesseract".into(),
            status: Status::Ok,
            detail: format!("Tesseract {} reads {} (installed: {}; {})", status.version, status.languages, status.installed.join(", "), status.tessdata.display()),
        },
        Err(err) => Check { area: "native", name: "tesseract".into(), status: Status::Warn, detail: format!("{err}; scanned pages and pictures are not read") },
    }
}

/// The sound server and the default microphone, without opening it.
fn microphone_check() -> Check {
    let check = |status, detail: String| Check { area: "audio", name: "microphone".into(), status, detail };
    match crate::audio::mic::SoundServer::connect().and_then(|server| server.describe_default_input()) {
        Ok(input) => check(Status::Ok, format!("default input {input} (opened only while you talk to cowork)")),
        Err(err) => check(Status::Warn, format!("{}: {err}; voice input is unavailable", err.label())),
    }
}

fn display_check(display: Option<&str>, desktop: &crate::desktop::session::Report) -> Check {
    if !desktop.x11_decides() {
        let detail = match (&desktop.family, desktop.xwayland) {
            (family, true) => format!("{}: XWayland is there, but it sees only X apps, so it decides nothing", family.describe()),
            (family, false) => format!("{}: no X display is used", family.describe()),
        };
        return Check { area: "display", name: "x11".into(), status: Status::Ok, detail };
    }
    match X11Desktop::connect(display) {
        Ok(desktop) => match desktop.has_active_window_support() {
            Ok(true) => Check { area: "display", name: "x11".into(), status: Status::Ok, detail: "connected; the window manager publishes _NET_ACTIVE_WINDOW".into() },
            _ => Check {
                area: "display",
                name: "x11".into(),
                status: Status::Warn,
                detail: "connected, but no window manager publishes _NET_ACTIVE_WINDOW: windows are not tracked".into(),
            },
        },
        Err(err) => Check { area: "display", name: "x11".into(), status: Status::Warn, detail: format!("{err}; capture runs degraded") },
    }
}

/// The session and each capability: `ok`, `degraded: why; fix` or
/// `unavailable: why` (a warning: cowork runs, knowingly without it).
fn desktop_checks(desktop: &crate::desktop::session::Report) -> Vec<Check> {
    let mut session = desktop.family.describe();
    if !desktop.desktop.is_empty() {
        session.push_str(&format!(", XDG_CURRENT_DESKTOP={}", desktop.desktop));
    }
    let mut checks = vec![Check { area: "desktop", name: "session".into(), status: Status::Ok, detail: session }];
    checks.extend(desktop.capabilities.iter().map(|(capability, state)| Check {
        area: "desktop",
        name: capability.label().into(),
        status: if state.is_ok() { Status::Ok } else { Status::Warn },
        detail: format!("{}: {}", state.word(), state.text()),
    }));
    let (shown, tray) = desktop.tray();
    checks.push(Check { area: "display", name: "tray".into(), status: if shown { Status::Ok } else { Status::Warn }, detail: tray });
    checks
}

/// AT-SPI: browser URLs from address bars and password-field detection need
/// the accessibility bus; browsers expose their address bar only when desktop
/// accessibility was on as they started.
fn accessibility_check(turn_on: bool) -> Check {
    let check = |status, detail: String| Check { area: "display", name: "at-spi".into(), status, detail };
    let bus = match crate::capture::a11y::A11yBus::connect() {
        Ok(bus) => bus,
        Err(err) => {
            return check(
                Status::Warn,
                format!(
                    "{err:#}; browser URLs come from window titles only and password fields are not detected \
                     (install at-spi2-core and run cowork inside a desktop session with a D-Bus session bus)"
                ),
            );
        }
    };
    match crate::capture::a11y::desktop_accessibility(bus.session()) {
        Ok(true) => check(
            Status::Ok,
            "accessibility bus reachable and desktop accessibility on: password fields are detected; browsers started \
             since it came on show their address bar (restart one opened before; Chromium also needs \
             --force-renderer-accessibility)"
                .into(),
        ),
        Ok(false) if turn_on => check(
            Status::Ok,
            "accessibility bus reachable; desktop accessibility is off now and cowork turns it on while it runs \
             (browsers opened before that show no address bar until restarted; Chromium also needs \
             --force-renderer-accessibility)"
                .into(),
        ),
        Ok(false) => check(
            Status::Warn,
            format!("accessibility bus reachable, but {}", crate::capture::ACCESSIBILITY_OFF),
        ),
        Err(err) => check(Status::Warn, format!("accessibility bus reachable, desktop accessibility unknown ({err}): browser URLs may come from titles")),
    }
}

/// Where API keys go: the Secret Service when one is unlocked, else the
/// encrypted file, and why.
fn secrets_check(paths: &Paths) -> Check {
    let check = |status, detail: String| Check { area: "secrets", name: "store".into(), status, detail };
    match crate::secrets::SecretService::connect() {
        Ok(_) => check(Status::Ok, "API keys go to the system secret store (Secret Service, unlocked)".into()),
        Err(why) => {
            let file = paths.data_dir.join(crate::secrets::SecretFile::STORE);
            let key = paths.data_dir.join(crate::secrets::SecretFile::KEY);
            let mode = std::fs::metadata(&key).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777);
            match mode {
                Ok(mode) if mode & 0o077 != 0 => check(
                    Status::Fail,
                    format!("no usable Secret Service ({why:#}), and {} is readable by others (mode {mode:o}): fix with chmod 600", key.display()),
                ),
                _ => check(
                    Status::Warn,
                    format!(
                        "no usable Secret Service ({why:#}): API keys go to {} (AES-256-GCM, key in {}, owner-only); \
                         unlock or install a keyring (gnome-keyring, KeePassXC) to keep them there instead",
                        file.display(),
                        key.display()
                    ),
                ),
            }
        }
    }
}

/// Whether cowork.db is encrypted and its key opens it (without converting
/// or creating anything: doctor only looks).
pub fn key_check(paths: &Paths) -> Check {
    use crate::store::key::{self, FileState};
    let path = paths.db_path();
    let name = "encryption".to_owned();
    let area = "database";
    match key::file_state(&path) {
        Ok(FileState::Missing | FileState::Empty) => Check { area, name, status: Status::Warn, detail: "no database yet: the first start creates it encrypted".into() },
        Ok(FileState::Plaintext) => Check {
            area,
            name,
            status: Status::Warn,
            detail: format!("not encrypted yet: the next start of cowork encrypts it in place: {}", path.display()),
        },
        Ok(FileState::Encrypted) => {
            let result = key::key_for(&path, false).map_err(anyhow::Error::from).and_then(|keyed| {
                let conn = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
                key::apply(&conn, &keyed)?;
                key::check(&conn, &path, &keyed)?;
                Ok(format!("SQLCipher (AES-256), key in {}; vector indexes and kept audio sealed with a key derived from it", keyed.custody))
            });
            check(area, name, result)
        }
        Ok(FileState::NotADatabase) => Check { area, name, status: Status::Fail, detail: key::KeyError::NotADatabase { db: path.display().to_string() }.to_string() },
        Err(err) => Check { area, name, status: Status::Fail, detail: format!("cannot read {}: {err}", path.display()) },
    }
}

fn database_check(paths: &Paths) -> Check {
    let path = paths.db_path();
    if !path.exists() {
        return Check { area: "database", name: "cowork.db".into(), status: Status::Warn, detail: format!("not created yet (the first start creates it): {}", path.display()) };
    }
    let result = (|| -> anyhow::Result<String> {
        let conn = store::open_read_only(&path)?;
        let version: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let quick: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
        anyhow::ensure!(quick == "ok", "integrity check failed: {quick}");
        let sessions = crate::capture::db::session_count(&conn)?;
        Ok(format!("schema v{version}, {sessions} sessions, integrity ok: {}", path.display()))
    })();
    check("database", "cowork.db", result)
}

/// Per stream, from the database: when it last recorded and how much in the last minute.
fn stream_checks(paths: &Paths) -> Vec<Check> {
    let Ok(conn) = store::open_read_only(&paths.db_path()) else { return Vec::new() };
    let now = crate::ids::now_millis();
    let streams = [
        ("windows", "SELECT max(coalesce(ended_at_ms, last_seen_ms)), count(CASE WHEN coalesce(ended_at_ms, last_seen_ms) >= ?1 THEN 1 END) FROM activity_sessions"),
        ("typing", "SELECT max(ended_at_ms), count(CASE WHEN ended_at_ms >= ?1 THEN 1 END) FROM keystroke_chunks"),
        ("clipboard", "SELECT max(at_ms), count(CASE WHEN at_ms >= ?1 THEN 1 END) FROM clipboard_events"),
        ("afk", "SELECT max(ended_at_ms), count(CASE WHEN ended_at_ms >= ?1 THEN 1 END) FROM afk_events"),
        ("screen", "SELECT max(seen_at_ms), count(CASE WHEN seen_at_ms >= ?1 THEN 1 END) FROM screen_texts"),
    ];
    // The screen-text stream is off until the user turns it on: no row for it then.
    let screen_on = crate::workers::read_settings(paths).0.screen.active();
    streams
        .iter()
        .filter(|(name, _)| *name != "screen" || screen_on)
        .map(|(name, sql)| {
            let row: rusqlite::Result<(Option<i64>, i64)> = conn.query_row(sql, [now - 60_000], |r| Ok((r.get(0)?, r.get(1)?)));
            match row {
                Ok((Some(last), per_minute)) => Check {
                    area: "stream",
                    name: (*name).into(),
                    status: Status::Ok,
                    detail: format!("last event {} ago, {per_minute} in the last minute", crate::ids::format_duration_millis(now - last)),
                },
                Ok((None, _)) => Check { area: "stream", name: (*name).into(), status: Status::Warn, detail: "nothing recorded yet".into() },
                Err(err) => Check { area: "stream", name: (*name).into(), status: Status::Fail, detail: err.to_string() },
            }
        })
        .collect()
}

/// Starts every worker against a scratch data directory and exercises it:
/// the store migrates a new database, capture connects, llm loads the model.
fn worker_checks(paths: &Paths, display: Option<&str>, chat: Option<crate::config::ResolvedModel>, desktop_accessibility: bool) -> Vec<Check> {
    let scratch = std::env::temp_dir().join(format!("cowork-doctor-{}", std::process::id()));
    let scratch_paths = Paths { data_dir: scratch.clone(), models_dir: paths.models_dir.clone() };
    // The scratch database records the real desktop for a moment: encrypted
    // too, under a key that lives only in this process.
    let _ = std::fs::create_dir_all(&scratch);
    crate::store::key::use_ephemeral(&scratch_paths.db_path(), crate::store::key::DbKey::random());
    // The scratch workers act on the real desktop: a user who switched desktop
    // accessibility off must not see doctor's a11y worker switch it on.
    if !desktop_accessibility {
        let off = std::fs::create_dir_all(&scratch).map_err(anyhow::Error::from).and_then(|()| {
            let conn = store::open_writer(&scratch_paths.db_path())?;
            Ok(store::set_setting(&conn, crate::config::keys::DESKTOP_ACCESSIBILITY, "false", 0)?)
        });
        if let Err(err) = off {
            tracing::warn!("doctor: cannot carry the accessibility setting to its scratch workers: {err:#}");
        }
    }
    let (events_tx, events) = bounded(1024);
    let sink = EventSink::new(events_tx, || {});
    let options = WorkerOptions {
        capture: true,
        display: display.map(str::to_owned),
        chat_model: chat,
        policy: RestartPolicy { max_restarts: 0, ..RestartPolicy::default() },
        require_consent: false,
        automations: false,
    };
    let workers = match Workers::start(&scratch_paths, options, sink) {
        Ok((workers, _, _)) => workers,
        Err(err) => return vec![Check { area: "worker", name: "all".into(), status: Status::Fail, detail: format!("{err:#}") }],
    };
    let _ = workers.llm.commands.try_send(LlmCommand::Preload);
    // The automations, notify, apps, folders and calendar workers run only in the process that executes automations (the sidebar).
    let started_here: Vec<WorkerName> = WorkerName::ALL
        .iter()
        .copied()
        .filter(|w| match w {
            WorkerName::Automations => workers.automations.is_some(),
            WorkerName::Notify => workers.notify.is_some(),
            WorkerName::Apps => workers.apps.is_some(),
            WorkerName::Folders => workers.folders.is_some(),
            WorkerName::Calendar => workers.calendar.is_some(),
            _ => true,
        })
        .collect();
    let mut states = std::collections::BTreeMap::new();
    let mut model = None;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    while Instant::now() < deadline {
        let Ok(event) = events.recv_timeout(Duration::from_millis(200)) else { continue };
        match event {
            AppEvent::Runtime(RuntimeEvent::Worker { worker, state }) => {
                states.insert(worker, state);
            }
            AppEvent::LocalModel(LocalModelEvent::Model(status @ (ModelStatus::Ready { .. } | ModelStatus::Unavailable(_)))) => model = Some(status),
            _ => {}
        }
        let settled = started_here.iter().all(|w| states.get(w).is_some_and(|s| !matches!(s, WorkerState::Starting)));
        if settled && model.is_some() {
            break;
        }
    }
    workers.shutdown(Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&scratch);
    let mut checks: Vec<Check> = started_here
        .iter()
        .map(|worker| {
            let state = states.get(worker).cloned().unwrap_or(WorkerState::Starting);
            let (status, detail) = match &state {
                WorkerState::Running | WorkerState::Stopped => (Status::Ok, "started and ran".to_owned()),
                WorkerState::Degraded(reason) => (Status::Warn, format!("degraded: {reason}")),
                WorkerState::Starting => (Status::Fail, "did not start in time".to_owned()),
                WorkerState::Restarting { error, .. } | WorkerState::Failed { error } => (Status::Fail, error.clone()),
            };
            Check { area: "worker", name: worker.as_str().into(), status, detail }
        })
        .collect();
    checks.push(match model {
        Some(ModelStatus::Ready { load_millis, .. }) => Check { area: "native", name: "mistralrs".into(), status: Status::Ok, detail: format!("chat model loaded in {load_millis} ms") },
        Some(ModelStatus::Unavailable(reason)) => Check { area: "native", name: "mistralrs".into(), status: Status::Fail, detail: reason },
        _ => Check { area: "native", name: "mistralrs".into(), status: Status::Fail, detail: "the model did not load in time".into() },
    });
    checks
}

/// Prints the checks; returns false if any failed.
pub fn print(checks: &[Check], json: bool) -> anyhow::Result<bool> {
    if json {
        println!("{}", serde_json::to_string_pretty(checks)?);
    } else {
        for c in checks {
            let mark = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            println!("{mark} {:<9} {:<44} {}", c.area, c.name, c.detail);
        }
    }
    Ok(checks.iter().all(|c| c.status != Status::Fail))
}
