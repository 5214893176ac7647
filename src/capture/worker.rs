//! The `capture` worker: owns the desktop backend (`DesktopBackend`), the input
//! probe and the session tracker; sends sessions to the store (through the
//! five-slot `ActivityBuffer`) and summaries to the UI, and tells the other
//! streams which allowed window has focus.
//!
//! The backend wakes it on a focus change; it reads the window again at least
//! once a second anyway, and input state for AFK once a second. The firewall
//! decides before anything is recorded: an excluded window is treated as if
//! nothing were focused. cowork's own windows (same pid) are not activity:
//! focusing the sidebar ends the previous session without opening one. Without
//! a display it reports `degraded` with the reason, serves its commands and
//! tries again every 10 s.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};

use crate::capture::a11y::{A11yBus, is_browser, url_from_title};
use crate::capture::afk::AfkDetector;
use crate::capture::buffer::ActivityBuffer;
use crate::capture::clipboard::ClipboardCommand;
use crate::capture::events::{CaptureDecision, CaptureEvent};
use crate::capture::firewall::{Decision, Observation, Rules};
use crate::capture::health::StreamStats;
use crate::capture::heartbeat::{AfkStatus, Heartbeats, HeldBy};
use crate::capture::keys::KeysCommand;
use crate::capture::media::MediaProbe;
use crate::capture::tracker::{SessionTracker, TrackerOutput};
use crate::desktop::backend::{Backend, DesktopBackend};
use crate::ids::{local_minute_of_day, now_millis};
use crate::records::{ActiveWindow, UrlSource};
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, WorkerState, spawn_supervised};
use crate::store::StoreCommand;

/// Re-read the active window at least this often, in case an event was missed.
/// Changes normally arrive as X events within milliseconds.
const SAFETY_POLL: Duration = Duration::from_secs(1);
/// How often input state is read for AFK detection.
const INPUT_POLL: Duration = Duration::from_secs(1);
/// How often an open session is confirmed to the store (crash recovery).
const HEARTBEAT: Duration = Duration::from_secs(30);
/// Without a display, how often to try connecting again.
const RECONNECT: Duration = Duration::from_secs(10);
/// At shutdown, how long capture waits for room in the store queue per row.
const STORE_SEND_TIMEOUT: Duration = Duration::from_millis(200);
/// How often the URL of a focused browser is re-read when nothing else changed.
const URL_POLL: Duration = Duration::from_secs(5);
/// Without an accessibility bus, how often to look for one again.
const A11Y_RECONNECT: Duration = Duration::from_secs(30);
/// Identical AFK-stream heartbeats closer than this extend one event
/// (ActivityWatch's afk pulse: the AFK threshold plus the poll interval, so
/// pauses shorter than the threshold stay inside one "present" event).
fn afk_pulse_millis(afk_secs: u64) -> i64 {
    afk_secs as i64 * 1000 + INPUT_POLL.as_millis() as i64 + 1_000
}

#[derive(Clone, Debug)]
pub struct CaptureConfig {
    /// X display to watch; `None` means `$DISPLAY`.
    pub display: Option<String>,
    pub afk_secs: u64,
    /// The privacy firewall's rules (password managers excluded by default).
    pub rules: Rules,
    /// The desktop backend this session's family decides (X11 uses `display`).
    /// Where none can see the focused window, capture records nothing, and
    /// nobody is marked away, rather than trusting XWayland's partial view.
    pub backend: Backend,
}

#[derive(Debug)]
pub enum CaptureCommand {
    SetAfkSecs(u64),
    /// New firewall rules (Settings, the pause hotkey, the tray); applied at once.
    SetRules(Rules),
    /// Switch the window stream on or off (focus still reaches the other streams).
    SetRecording(bool),
    /// Fault injection for supervisor tests: panic inside the worker.
    InjectPanic,
    Shutdown,
}

/// The URL last read for a window: (window id, title, URL and where it came from, when).
type UrlRead = (u32, String, Option<(String, UrlSource)>, Instant);

pub struct CaptureWorker {
    config: CaptureConfig,
    store: Sender<StoreCommand>,
    /// The other streams, told which (allowed) window has focus.
    streams: StreamSenders,
    sink: EventSink<CaptureEvent>,
    desktop: Option<Box<dyn DesktopBackend>>,
    afk: AfkDetector,
    tracker: SessionTracker,
    recording: bool,
    /// What the Context panel was last told about the focused window.
    last_decision: Option<CaptureDecision>,
    stats: StreamStats,
    /// Rows on their way to the store (5 slots, flushed on focus change).
    buffer: ActivityBuffer,
    /// The AFK stream, merged in memory as heartbeats.
    afk_beats: Heartbeats<AfkStatus>,
    /// What keeps a quiet user present: playing media, a fullscreen window.
    media: MediaProbe,
    held: Option<HeldBy>,
    /// AT-SPI, for browser URLs; `Err` holds when connecting last failed.
    a11y: Result<A11yBus, Instant>,
    /// The last URL read for the focused window, and when.
    url_cache: Option<UrlRead>,
    /// The pid found for a pid-less window (window id, title, pid).
    pid_cache: Option<(u32, String, Option<u32>)>,
    /// The focus listen mode was last told.
    listen_focus: Option<crate::audio::listen::Focus>,
    /// The last input before the user went away (for "back after N minutes").
    away_since: Option<i64>,
}

impl CaptureWorker {
    pub fn new(config: CaptureConfig, store: Sender<StoreCommand>, streams: StreamSenders, sink: EventSink<CaptureEvent>) -> Self {
        let afk = AfkDetector::new(None, config.afk_secs, now_millis());
        let afk_pulse = afk_pulse_millis(config.afk_secs);
        Self {
            config,
            store,
            streams,
            sink,
            desktop: None,
            afk,
            tracker: SessionTracker::default(),
            recording: true,
            last_decision: None,
            stats: StreamStats::new("windows"),
            buffer: ActivityBuffer::default(),
            afk_beats: Heartbeats::new(afk_pulse),
            media: MediaProbe::default(),
            held: None,
            a11y: Err(Instant::now() - A11Y_RECONNECT),
            url_cache: None,
            pid_cache: None,
            listen_focus: None,
            away_since: None,
        }
    }

    /// Tells automations (never waiting: a full queue drops the signal).
    fn signal(&self, signal: crate::automations::Signal) {
        if let Some(automations) = &self.streams.automations
            && automations.try_send(crate::automations::AutomationsCommand::Signal(signal)).is_err()
        {
            tracing::debug!("automations is busy: a capture signal was dropped");
        }
    }

    /// Tells the notification gate (never waiting).
    fn tell_notify(&self, activity: crate::notify::Activity) {
        if let Some(notify) = &self.streams.notify
            && notify.try_send(crate::notify::NotifyCommand::Activity(activity)).is_err()
        {
            tracing::debug!("notify is busy: an activity change was dropped");
        }
    }

    /// A window the firewall allowed gained focus (its session is the event's key).
    fn signal_focus(&self, window: Option<&ActiveWindow>) {
        if let Some(window) = window
            && self.streams.notify.is_some()
        {
            self.tell_notify(crate::notify::Activity::Focus { app: window.app.clone(), at_millis: now_millis() });
            let fullscreen = self.desktop.as_ref().is_some_and(|d| d.is_fullscreen(window.window_id));
            self.tell_notify(crate::notify::Activity::Presenting(fullscreen));
        }
        let (Some(window), Some(session)) = (window, self.tracker.open_session()) else { return };
        if !self.recording || self.streams.automations.is_none() {
            return;
        }
        self.signal(crate::automations::Signal::Focus {
            app: window.app.clone(),
            title: window.title.clone(),
            url: window.url.clone(),
            session_id: session.session_id,
            at_millis: session.started_at_millis,
        });
    }

    /// Connects the desktop backend. Returns the reason capture is degraded, if it is.
    fn connect(&mut self) -> Option<String> {
        match crate::desktop::backend::connect(&self.config.backend, self.config.display.as_deref()) {
            Ok(connected) => {
                self.desktop = Some(connected.desktop);
                self.afk = AfkDetector::new(connected.probe, self.config.afk_secs, now_millis());
                connected.limits
            }
            Err(reason) => {
                self.desktop = None;
                self.afk = AfkDetector::new(None, self.config.afk_secs, now_millis());
                Some(reason)
            }
        }
    }

    fn apply(&mut self, outputs: Vec<TrackerOutput>) {
        for output in outputs {
            match output {
                TrackerOutput::Session(_) if !self.recording => {}
                TrackerOutput::Session(session) => {
                    if session.ended_at_millis.is_some() {
                        self.sink.send(CaptureEvent::SessionFinished(session.clone()));
                    }
                    self.stats.event(now_millis());
                    self.buffer_row(crate::capture::db::session_write(session));
                }
                TrackerOutput::Active(window) => {
                    // A focus change: the buffer goes to the store.
                    self.flush_buffer();
                    self.signal_focus(window.as_ref());
                    if let Some(keys) = &self.streams.keys {
                        let _ = keys.try_send(KeysCommand::Window(window.clone()));
                    }
                    if let Some(clipboard) = &self.streams.clipboard {
                        let _ = clipboard.try_send(ClipboardCommand::Window(window.clone()));
                    }
                    if let Some(screen) = &self.streams.screen {
                        let session_id = self.recording.then(|| self.tracker.open_session().map(|s| s.session_id)).flatten();
                        let handle = window.as_ref().and_then(|w| self.desktop.as_ref().and_then(|d| d.handle(w.window_id)));
                        let focused = window.clone().map(|window| crate::capture::screen_worker::Focused { window, session_id, handle });
                        if let Some(latest) = &self.streams.screen_latest {
                            latest.set_focus(focused.clone());
                        }
                        let _ = screen.try_send(crate::capture::screen_worker::ScreenCommand::Focus(focused));
                    }
                    self.sink.send(CaptureEvent::ActiveWindow(window));
                }
            }
        }
    }

    fn buffer_row(&mut self, row: StoreCommand) {
        for _ in 0..self.buffer.push(row) {
            self.stats.drop_one();
            tracing::warn!("activity buffer full (the store is not keeping up): dropped the oldest row");
        }
    }

    fn flush_buffer(&mut self) {
        let (_, lost) = self.buffer.flush(&self.store);
        for _ in 0..lost {
            self.stats.drop_one();
        }
        if let Some(health) = self.stats.due(now_millis()) {
            self.sink.send(CaptureEvent::StreamHealth(health));
        }
    }

    /// A browser's URL: from its address bar over AT-SPI when it exposes one,
    /// else from the title when the title holds one. Cached per window and
    /// title, re-read every few seconds (pages change URL without a new title).
    fn browser_url(&mut self, window: &ActiveWindow) -> Option<(String, UrlSource)> {
        if !is_browser(&window.app) {
            return None;
        }
        if let Some((id, title, url, at)) = &self.url_cache
            && *id == window.window_id
            && *title == window.title
            && at.elapsed() < URL_POLL
        {
            return url.clone();
        }
        self.reconnect_a11y();
        let from_tree = match (&mut self.a11y, window.pid) {
            (Ok(bus), Some(pid)) => match bus.address_bar_url(pid, &window.title) {
                Ok(url) => url,
                Err(err) => {
                    tracing::debug!("capture: AT-SPI lookup failed: {err}");
                    if matches!(err, zbus::Error::InputOutput(_)) {
                        self.a11y = Err(Instant::now());
                    }
                    None
                }
            },
            _ => None,
        };
        let url = from_tree
            .map(|url| (url, UrlSource::Atspi))
            .or_else(|| url_from_title(&window.title).map(|url| (url, UrlSource::Title)));
        self.url_cache = Some((window.window_id, window.title.clone(), url.clone(), Instant::now()));
        url
    }

    /// Connects to the accessibility bus again, at most every `A11Y_RECONNECT` after a failure.
    fn reconnect_a11y(&mut self) {
        if let Err(failed_at) = &self.a11y
            && failed_at.elapsed() >= A11Y_RECONNECT
        {
            self.a11y = A11yBus::connect().map_err(|err| {
                tracing::debug!("capture: no AT-SPI: {err:#}");
                Instant::now()
            });
        }
    }

    /// The pid of a window the desktop gave none for (a Wayland compositor
    /// without IPC): the process whose accessible frame bears its title, if
    /// exactly one does. Asked once per window and title.
    fn pid_by_title(&mut self, window: &ActiveWindow) -> Option<u32> {
        if let Some((id, title, pid)) = &self.pid_cache
            && *id == window.window_id
            && *title == window.title
        {
            return *pid;
        }
        self.reconnect_a11y();
        let pid = self.a11y.as_ref().ok().and_then(|bus| bus.pid_of_frame(&window.title).ok().flatten());
        self.pid_cache = Some((window.window_id, window.title.clone(), pid));
        pid
    }

    /// Reads the active window now and records any change.
    fn observe(&mut self) -> anyhow::Result<()> {
        let Some(desktop) = self.desktop.as_mut() else { return Ok(()) };
        // cowork's own windows are not activity: focusing the sidebar ends the
        // previous session without opening one for cowork.
        let own_pid = std::process::id();
        let now = now_millis();
        let mut window = desktop.active_window().map_err(|err| anyhow::anyhow!(err))?;
        if let Some(w) = window.as_mut()
            && w.pid.is_none()
        {
            w.pid = self.pid_by_title(w);
        }
        let mut window = window.filter(|w| w.pid != Some(own_pid));
        if let Some(w) = window.as_mut()
            && let Some((url, source)) = self.browser_url(w)
        {
            w.url = Some(url);
            w.url_source = Some(source);
        }
        // The firewall decides before anything is recorded: an excluded window
        // is treated as if nothing were focused.
        let decision = window.as_ref().map(|w| {
            let observation =
                Observation { app: &w.app, title: &w.title, url: w.url.as_deref(), local_minute: local_minute_of_day(now) };
            (w.app.clone(), self.config.rules.decide(&observation))
        });
        let summary = CaptureDecision {
            app: decision.as_ref().map(|(app, _)| app.clone()),
            excluded_by: decision.as_ref().and_then(|(_, d)| match d {
                Decision::Exclude { rule } => Some(rule.clone()),
                Decision::Record => None,
            }),
            recording: self.recording,
        };
        if self.last_decision.as_ref() != Some(&summary) {
            self.sink.send(CaptureEvent::CaptureDecision(summary.clone()));
            self.last_decision = Some(summary);
        }
        let allowed = decision.as_ref().is_some_and(|(_, d)| d.is_record());
        let window = window.filter(|_| allowed);
        self.tell_listen(decision.is_some() && !allowed, window.as_ref());
        let outputs = self.tracker.observe(window, now);
        self.apply(outputs);
        Ok(())
    }

    /// Listen mode keeps what it hears with the focused window, and drops
    /// it while an excluded one is focused: it hears every change.
    fn tell_listen(&mut self, excluded: bool, window: Option<&ActiveWindow>) {
        use crate::audio::listen::{Focus, ListenCommand};
        let Some(listen) = &self.streams.listen else { return };
        // Asked at every observation: compare before building anything.
        let unchanged = match (&self.listen_focus, excluded, window) {
            (Some(Focus::Excluded), true, _) | (Some(Focus::Nothing), false, None) => true,
            (Some(Focus::Window { app, title }), false, Some(w)) => *app == w.app && *title == w.title,
            _ => false,
        };
        if unchanged {
            return;
        }
        let focus = match (excluded, window) {
            (true, _) => Focus::Excluded,
            (false, Some(w)) => Focus::Window { app: w.app.clone(), title: w.title.clone() },
            (false, None) => Focus::Nothing,
        };
        if listen.try_send(ListenCommand::Focus(focus.clone())).is_ok() {
            self.listen_focus = Some(focus);
        }
    }

    /// What keeps a user without input present right now, if anything.
    fn presence_hold(&mut self) -> Option<HeldBy> {
        let fullscreen = match (self.desktop.as_ref(), self.tracker.open_session().map(|s| s.window_id)) {
            (Some(desktop), Some(window)) => desktop.is_fullscreen(window),
            _ => false,
        };
        if fullscreen {
            return Some(HeldBy::Fullscreen);
        }
        self.media.playing().map(|player| {
            tracing::debug!(player, "capture: media playing keeps the user present");
            HeldBy::Media
        })
    }

    fn check_input(&mut self) {
        let now = now_millis();
        let moved = self.afk.poll(now);
        if !moved && self.afk.is_afk(now) && !self.tracker.is_away() {
            // Quiet for the threshold: playing media or a fullscreen window keep the user present.
            // Asked once per threshold: a hold restarts the AFK clock, so when
            // the media stops, AFK comes one threshold later, back-dated to the last hold.
            self.held = self.presence_hold();
            if self.held.is_some() {
                self.afk.hold(now);
            }
        }
        if moved {
            self.held = None;
        }
        if moved && self.tracker.is_away() {
            let away_millis = now - self.away_since.take().unwrap_or(now);
            self.signal(crate::automations::Signal::Back { away_millis, at_millis: now });
            self.tell_notify(crate::notify::Activity::Back { at_millis: now });
            let outputs = self.tracker.came_back(now);
            self.apply(outputs);
        } else if self.afk.is_afk(now) && !self.tracker.is_away() {
            self.away_since = Some(self.afk.last_input_millis());
            self.signal(crate::automations::Signal::Away { since_millis: self.afk.last_input_millis(), at_millis: now });
            self.tell_notify(crate::notify::Activity::Away { at_millis: now });
            let outputs = self.tracker.went_away(self.afk.last_input_millis());
            self.apply(outputs);
        }
        self.afk_heartbeat(now);
    }

    /// One heartbeat of the AFK stream; a new event (or a changed one) goes to
    /// the buffer at once, a growing one with the 30 s heartbeat.
    fn afk_heartbeat(&mut self, now: i64) {
        if !self.recording || !self.afk.is_available() {
            return;
        }
        let status = if self.tracker.is_away() {
            AfkStatus::Afk
        } else {
            AfkStatus::NotAfk { held_by: self.held }
        };
        // ActivityWatch's afk watcher: present is beaten at the last input, so a
        // present event ends there; away is back-dated to it and grows until now.
        let last_input = self.afk.last_input_millis().min(now);
        let end = if status == AfkStatus::Afk { now } else { last_input };
        let (event, new) = self.afk_beats.beat(status, last_input, end);
        if new {
            let event = event.clone();
            self.buffer_row(crate::capture::db::afk_write(event));
            self.flush_buffer();
        }
    }

    fn handle(&mut self, command: CaptureCommand) -> bool {
        match command {
            CaptureCommand::SetAfkSecs(secs) => {
                self.config.afk_secs = secs;
                self.afk.set_threshold_secs(secs);
                self.afk_beats.set_pulse_millis(afk_pulse_millis(secs));
                true
            }
            CaptureCommand::SetRules(rules) => {
                // The screen-text stream judges each read by the same rules: it hears them first.
                if let Some(latest) = &self.streams.screen_latest {
                    latest.set_rules(rules.clone());
                }
                if let Some(screen) = &self.streams.screen {
                    let _ = screen.try_send(crate::capture::screen_worker::ScreenCommand::SetRules(rules.clone()));
                }
                self.config.rules = rules;
                // Decide the focused window under the new rules now, not at the next poll.
                self.last_decision = None;
                if let Err(err) = self.observe() {
                    tracing::debug!("capture: observe after new rules failed: {err}");
                }
                true
            }
            CaptureCommand::SetRecording(on) => {
                if self.recording && !on {
                    // Close the open session while it can still be written.
                    let outputs = self.tracker.shutdown(now_millis());
                    self.apply(outputs);
                }
                if on && !self.recording {
                    // A fresh tracker opens a session for the current window at the next look.
                    self.tracker = SessionTracker::default();
                }
                self.recording = on;
                self.last_decision = None;
                true
            }
            CaptureCommand::InjectPanic => panic!("injected capture fault"),
            CaptureCommand::Shutdown => false,
        }
    }

    fn finish(&mut self) {
        let outputs = self.tracker.shutdown(now_millis());
        self.apply(outputs);
        self.write_growing_afk_event();
        self.flush_buffer();
        // Last chance: wait a little for room rather than lose the final rows.
        while let Some(row) = self.buffer.pop() {
            if self.store.send_timeout(row, STORE_SEND_TIMEOUT).is_err() {
                self.stats.drop_one();
                tracing::warn!("store queue full at shutdown: dropped a row");
            }
        }
    }

    fn write_growing_afk_event(&mut self) {
        if let Some(event) = self.afk_beats.last().cloned() {
            self.buffer_row(crate::capture::db::afk_write(event));
        }
    }
}

impl Supervised for CaptureWorker {
    type Command = CaptureCommand;

    fn run(&mut self, commands: &Receiver<CaptureCommand>, ctx: &WorkerContext) -> anyhow::Result<()> {
        let mut degraded = self.connect();
        if let Some(reason) = &degraded {
            ctx.report(WorkerState::Degraded(reason.clone()));
        }
        let mut last_observe = Instant::now() - SAFETY_POLL;
        let mut last_input_poll = Instant::now();
        let mut last_heartbeat = Instant::now();
        let mut last_connect = Instant::now();
        loop {
            // Commands first: a Shutdown must not wait behind X events.
            while let Ok(command) = commands.try_recv() {
                if !self.handle(command) {
                    self.finish();
                    return Ok(());
                }
            }
            if self.desktop.is_none() {
                // Degraded: no display. Serve commands and try again now and then.
                match commands.recv_timeout(RECONNECT.saturating_sub(last_connect.elapsed())) {
                    Ok(command) => {
                        if !self.handle(command) {
                            return Ok(());
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        last_connect = Instant::now();
                        let now_degraded = self.connect();
                        if now_degraded != degraded {
                            match &now_degraded {
                                Some(reason) => ctx.report(WorkerState::Degraded(reason.clone())),
                                None => ctx.report(WorkerState::Running),
                            }
                            degraded = now_degraded;
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => return Ok(()),
                }
                continue;
            }
            let until_observe = SAFETY_POLL.saturating_sub(last_observe.elapsed());
            let until_input = INPUT_POLL.saturating_sub(last_input_poll.elapsed());
            let wait = until_observe.min(until_input).min(Duration::from_millis(250));
            let changed = match self.desktop.as_mut().map(|d| d.wait_for_change(wait)) {
                Some(Ok(changed)) => changed,
                Some(Err(err)) => {
                    // The display went away: close the session where we last saw it and degrade.
                    self.finish();
                    self.desktop = None;
                    last_connect = Instant::now();
                    degraded = Some(err.to_string());
                    ctx.report(WorkerState::Degraded(err.to_string()));
                    continue;
                }
                None => false,
            };
            // Commands that came while waiting go before what woke us: a pause
            // (new rules) queued before a window opened must decide that window.
            while let Ok(command) = commands.try_recv() {
                if !self.handle(command) {
                    self.finish();
                    return Ok(());
                }
            }
            if self.desktop.is_none() {
                continue;
            }
            if changed || last_observe.elapsed() >= SAFETY_POLL {
                last_observe = Instant::now();
                if let Err(err) = self.observe() {
                    self.finish();
                    self.desktop = None;
                    degraded = Some(err.to_string());
                    ctx.report(WorkerState::Degraded(err.to_string()));
                    continue;
                }
            }
            if last_input_poll.elapsed() >= INPUT_POLL {
                last_input_poll = Instant::now();
                self.check_input();
            }
            if last_heartbeat.elapsed() >= HEARTBEAT {
                last_heartbeat = Instant::now();
                if let Some(open) = self.tracker.open_session() {
                    let row = crate::capture::db::heartbeat_write(open.session_id, now_millis());
                    self.buffer_row(row);
                }
                self.write_growing_afk_event();
                self.flush_buffer();
            }
        }
    }
}

/// Starts the capture worker under supervision on a thread named `capture`.
pub fn spawn_capture(
    config: CaptureConfig,
    store: Sender<StoreCommand>,
    sink: EventSink<CaptureEvent>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<CaptureCommand>> {
    spawn_capture_with_streams(config, store, StreamSenders::default(), sink, policy)
}

/// The workers of the other streams, which follow the focused window.
#[derive(Clone, Default)]
pub struct StreamSenders {
    pub keys: Option<Sender<KeysCommand>>,
    pub clipboard: Option<Sender<ClipboardCommand>>,
    pub listen: Option<Sender<crate::audio::listen::ListenCommand>>,
    /// The screen-text stream, which reads the focused window's text: its
    /// latest rules and focus are written into its shared state, the command wakes it.
    pub screen: Option<Sender<crate::capture::screen_worker::ScreenCommand>>,
    pub screen_latest: Option<crate::capture::screen_worker::ScreenLatest>,
    /// Automations whose triggers wait for focus changes and returns.
    pub automations: Option<Sender<crate::automations::AutomationsCommand>>,
    /// The notification gate, which defers during focus sessions and holds while you are away.
    pub notify: Option<Sender<crate::notify::NotifyCommand>>,
}

/// Starts capture with the other streams to tell about focus changes.
pub fn spawn_capture_with_streams(
    config: CaptureConfig,
    store: Sender<StoreCommand>,
    streams: StreamSenders,
    sink: EventSink<CaptureEvent>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<CaptureCommand>> {
    let channel = bounded(32);
    spawn_supervised::<CaptureWorker, _, _>(WorkerName::Capture, policy, sink.clone(), channel, move |_ctx| {
        Ok(CaptureWorker::new(config.clone(), store.clone(), streams.clone(), sink.clone()))
    })
}
