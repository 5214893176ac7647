//! The `screen` worker (issue 57): the text of the focused window, kept as
//! the `screen_texts` stream when the user turned it on (Settings, or the
//! first run) and answered its consent. Runs on a thread named `screen`.
//!
//! Capture tells it which window has focus (only windows the firewall
//! allowed, with their session); it reads that window a moment after focus
//! settles and again when its content changes, never at a fixed video rate:
//!
//! 1. The rules decide first, and the window is read only while the desktop
//!    still describes it as capture judged it (a title that changed since
//!    waits for capture's next word): an excluded window, a paused capture,
//!    quiet hours or a password field with the focus mean nothing is read —
//!    no pixel (`x11_pixels::READS`), no accessible (`a11y::TREE_READS`).
//!    The latest plan, rules and focus are shared state (`ScreenLatest`) its
//!    senders write directly, checked again before OCR and before storing.
//! 2. The window's pixels (windows stacked above it painted grey) — X11's
//!    GetImage, on sway its region of the output by wlr-screencopy, on GNOME
//!    the window's own actor read by cowork's Shell extension, on KDE the
//!    window alone rendered by KWin (`PixelSource`) — are reduced to a grid
//!    of cell brightnesses; an unchanged grid means an unchanged window, and
//!    nothing more is done. Without pixels (another compositor) the tree
//!    alone is read, again at most every `TREE_REFRESH`.
//! 3. The accessibility tree is asked first (exact text of documents,
//!    terminals, pages and labels); keyboard focus in a password field
//!    stops it before any text is read. OCR of the pixels only where the
//!    tree holds no text (xterm, canvases, remote desktops, some Electron
//!    and Qt apps).
//! 4. Text the window already showed (the same words) is not stored again;
//!    new text goes to the store as a row of its session.
//!
//! Looking and reading are held to a share of one core (`CPU_SHARE`, 2 %, a
//! token bucket of up to `MAX_BURST`): each check spends what it took, and
//! while the stream is over its share changed content waits for the next
//! check that may (a newly focused window is read at once unless the stream
//! is `MAX_DEBT` over; an unchanged one costs a grid).

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use parking_lot::Mutex;

use crate::capture::a11y::A11yBus;
use crate::capture::events::{CaptureEvent, ScreenStatus};
use crate::capture::firewall::Rules;
use crate::capture::screen_texts::{Method, ScreenRow, screen_write};
use crate::ids::{local_minute_of_day, next_id, now_millis};
use crate::records::ActiveWindow;
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, WorkerState, spawn_supervised};
use crate::store::StoreCommand;

/// How long focus rests on a window before it is read (alt-tab passes through windows).
pub const SETTLE: Duration = Duration::from_millis(250);
/// How often the focused window is looked at for changed content.
pub const CHECK_EVERY: Duration = Duration::from_secs(3);
/// Without pixels to compare, how often the tree is asked again.
pub const TREE_REFRESH: Duration = Duration::from_secs(15);
/// The share of one core looking and reading may take (the stream's budget).
pub const CPU_SHARE: f64 = 0.02;
/// What reading may spend at once after a quiet while (a few reads of changed content).
pub const MAX_BURST: Duration = Duration::from_millis(1_500);
/// Past this much overspent, even a new focus waits for its share.
pub const MAX_DEBT: Duration = Duration::from_secs(10);
/// The tree's text counts when it holds at least this many letters and digits.
pub const MIN_TREE_CHARS: usize = 40;
/// At most this much of a window's text is kept per row.
pub const MAX_TEXT_CHARS: usize = 16_000;
/// Windows whose last look is remembered.
const REMEMBERED: usize = 32;
/// Grid cells (of about `CELL` px) whose brightness changed by more than
/// `CELL_CHANGE` mean changed content when at least `CHANGED_CELLS` did (a
/// blinking cursor changes one or two).
const CELL: u32 = 16;
const CELL_CHANGE: u8 = 6;
const CHANGED_CELLS: usize = 3;
/// A band of changed rows grows to the one-colour rows around it (the gaps
/// between lines of text), by at most this many pixels each way.
const MAX_WIDEN: usize = 40;
/// One-colour rows kept above and below a band (Tesseract reads a line better with a margin).
const BAND_MARGIN: usize = 4;
/// Bands closer than this are read as one.
const BAND_GAP: usize = 12;
/// Past this share of the window's height changed, the whole window is read.
const MAX_BAND_SHARE: f64 = 0.5;
/// Lines remembered per window for "already shown" (a long-running log's).
const MAX_REMEMBERED_LINES: usize = 4_096;

/// Rows of pixels handed to OCR by the stream (a test's measure of what bands save).
pub static OCR_ROWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[derive(Debug)]
pub enum ScreenCommand {
    /// The focused window the firewall allowed, with its session (None:
    /// nothing, an excluded window, cowork's own, or the user is away).
    Focus(Option<Focused>),
    /// New firewall rules; applied before the next read.
    SetRules(Rules),
    /// The stream's switches.
    Configure(ScreenPlan),
    InjectPanic,
    Shutdown,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Focused {
    pub window: ActiveWindow,
    /// The window session recorded for it (None when the window stream is off).
    pub session_id: Option<i64>,
    /// The desktop's own handle for it, where pixels are asked for by one (KWin's UUID).
    pub handle: Option<String>,
}

/// What the stream may do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScreenPlan {
    /// Switched on, consented, and the first-run question answered.
    pub on: bool,
    /// OCR where the tree holds no text.
    pub ocr: bool,
}

/// The latest plan, rules and focus, written by whoever changes them
/// (capture, the app) straight into state the worker shares — a command only
/// wakes it — so a pause or a withdrawn consent is never lost to a full
/// queue, and a restarted worker starts from them.
#[derive(Clone, Debug, Default)]
struct Latest {
    plan: ScreenPlan,
    rules: Rules,
    focused: Option<Focused>,
}

/// A handle on the screen worker's latest state (cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct ScreenLatest(Arc<Mutex<Latest>>);

impl ScreenLatest {
    pub fn new(plan: ScreenPlan, rules: Rules) -> Self {
        Self(Arc::new(Mutex::new(Latest { plan, rules, focused: None })))
    }

    pub fn set_rules(&self, rules: Rules) {
        self.0.lock().rules = rules;
    }

    pub fn set_plan(&self, plan: ScreenPlan) {
        self.0.lock().plan = plan;
    }

    pub fn set_focus(&self, focused: Option<Focused>) {
        self.0.lock().focused = focused;
    }

    fn get(&self) -> Latest {
        self.0.lock().clone()
    }
}

/// What the last look at a window found.
struct Look {
    window_id: u32,
    title: String,
    grid: Option<Grid>,
    rows: Option<Rows>,
    at: Instant,
}

/// What reading a window's pixels gave.
enum Pixels {
    Read(image::RgbaImage),
    /// This desktop lends none, or the read failed.
    None,
    /// The desktop refused: the focus or the title moved since capture judged the window.
    Moved,
}

/// A window's pixels as cell brightnesses.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    width: u32,
    height: u32,
    cells: Vec<u8>,
}

impl Grid {
    pub fn of(picture: &image::RgbaImage) -> Self {
        let (width, height) = (picture.width().div_ceil(CELL).max(1), picture.height().div_ceil(CELL).max(1));
        let small = image::imageops::thumbnail(&image::imageops::grayscale(picture), width, height);
        Grid { width, height, cells: small.into_raw() }
    }

    /// Whether `other` shows different content (a resize always does).
    pub fn changed(&self, other: &Grid) -> bool {
        if (self.width, self.height) != (other.width, other.height) {
            return true;
        }
        self.cells.iter().zip(&other.cells).filter(|(a, b)| a.abs_diff(**b) > CELL_CHANGE).count() >= CHANGED_CELLS
    }
}

/// A window's pixel rows, each as a hash (which rows are new) and whether it
/// is of one colour (where a band of new rows may be cut without cutting a
/// line of text).
#[derive(Clone, Debug, PartialEq)]
pub struct Rows {
    width: u32,
    hashes: Vec<u64>,
    plain: Vec<bool>,
}

impl Rows {
    pub fn of(picture: &image::RgbaImage) -> Self {
        let width = picture.width();
        let stride = (width as usize * 4).max(4);
        let (mut hashes, mut plain) = (Vec::with_capacity(picture.height() as usize), Vec::with_capacity(picture.height() as usize));
        for row in picture.as_raw().chunks_exact(stride) {
            // FNV-1a over 8-byte words: a few hundred microseconds a window.
            let mut hash = 0xcbf2_9ce4_8422_2325_u64;
            let words = row.chunks_exact(8);
            let rest = words.remainder();
            for word in words {
                hash = (hash ^ u64::from_le_bytes(word.try_into().expect("8 bytes"))).wrapping_mul(0x0100_0000_01b3);
            }
            for &byte in rest {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
            hashes.push(hash);
            let first = &row[..4];
            plain.push(row.chunks_exact(4).all(|p| p.iter().zip(first).all(|(a, b)| a.abs_diff(*b) <= 16)));
        }
        Rows { width, hashes, plain }
    }

    /// The bands of rows (top, bottom exclusive) that show what `before` did
    /// not show anywhere (a new line of a log that scrolled, an edited
    /// paragraph), each grown to the one-colour rows around it; empty when
    /// every row was shown before (a scroll back); None when the window was
    /// resized or too much changed for bands to save anything.
    pub fn new_bands(&self, before: &Rows) -> Option<Vec<(u32, u32)>> {
        let height = self.hashes.len();
        if self.width != before.width || height != before.hashes.len() || height == 0 {
            return None;
        }
        let old: HashSet<u64> = before.hashes.iter().copied().collect();
        let mut bands: Vec<(usize, usize)> = Vec::new();
        let mut y = 0;
        while y < height {
            if self.plain[y] || old.contains(&self.hashes[y]) {
                y += 1;
                continue;
            }
            // A line of text whose top rows happen to match an old line's is read whole.
            let mut top = y;
            while top > 0 && !self.plain[top - 1] && y - top < MAX_WIDEN {
                top -= 1;
            }
            let mut bottom = y + 1;
            let mut widened = 0;
            while bottom < height && widened < MAX_WIDEN {
                if self.plain[bottom] {
                    break;
                }
                // Rows of the line that are new too continue it without counting against the widening.
                widened = if old.contains(&self.hashes[bottom]) { widened + 1 } else { 0 };
                bottom += 1;
            }
            let (top, bottom) = (top.saturating_sub(BAND_MARGIN), (bottom + BAND_MARGIN).min(height));
            match bands.last_mut() {
                Some(last) if top <= last.1 + BAND_GAP => last.1 = bottom,
                _ => bands.push((top, bottom)),
            }
            y = bottom;
        }
        let changed: usize = bands.iter().map(|(top, bottom)| bottom - top).sum();
        if changed as f64 > height as f64 * MAX_BAND_SHARE {
            return None;
        }
        Some(bands.into_iter().map(|(top, bottom)| (top as u32, bottom as u32)).collect())
    }
}

/// What a window showed when its text was last kept.
struct Shown {
    app: String,
    title: String,
    session_id: Option<i64>,
    lines: HashSet<String>,
    words: HashSet<String>,
}

/// A line as compared with the window's earlier text (case and spacing aside).
fn line_key(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// The words of a text, lower-cased, for "the same text again".
fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 1).map(str::to_lowercase).collect()
}


/// Where a window's pixels come from on this desktop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PixelSource {
    /// None: the accessibility tree alone.
    None,
    /// X11: GetImage of the window (`display`, or `$DISPLAY`).
    X11 { display: Option<String> },
    /// sway: its region of the output by wlr-screencopy, located by sway's IPC.
    Sway { socket: std::path::PathBuf, swaysock: std::path::PathBuf },
    /// GNOME: cowork's Shell extension reads the focused window's own actor.
    Gnome,
    /// KDE Plasma: KWin renders the window alone (ScreenShot2, by its UUID).
    KWin,
}

impl PixelSource {
    /// The source for the backend that tracks the focused window.
    pub fn for_backend(backend: &crate::desktop::backend::Backend, display: Option<String>) -> Self {
        use crate::desktop::backend::Backend;
        match backend {
            Backend::X11 => PixelSource::X11 { display },
            Backend::Wlroots(target) => match &target.ipc {
                Some(crate::desktop::ipc::Ipc::Sway(swaysock)) => PixelSource::Sway { socket: target.socket.clone(), swaysock: swaysock.clone() },
                _ => PixelSource::None,
            },
            Backend::Gnome => PixelSource::Gnome,
            Backend::KWin(_) => PixelSource::KWin,
            _ => PixelSource::None,
        }
    }
}

pub struct ScreenWorker {
    latest: ScreenLatest,
    /// The focus the last look was for (a change schedules a look after `SETTLE`).
    seen_focus: Option<Focused>,
    seen_plan: ScreenPlan,
    pixels: PixelSource,
    /// The process whose password field has keyboard focus (0: none), as the a11y worker follows it.
    secret_pid: Arc<std::sync::atomic::AtomicU32>,
    store: Sender<StoreCommand>,
    sink: EventSink<CaptureEvent>,
    desktop: Option<crate::desktop::x11::X11Desktop>,
    /// GNOME: the extension's client.
    gnome: Option<crate::desktop::gnome::Extension>,
    /// KDE: the session bus KWin answers on.
    session: Option<zbus::blocking::Connection>,
    a11y: Result<A11yBus, Instant>,
    ocr: Option<Result<crate::ocr::Ocr, String>>,
    looks: VecDeque<Look>,
    /// What each window (app and title) showed when its text was last kept.
    stored: VecDeque<Shown>,
    /// When the focused window is next looked at.
    next_check: Option<Instant>,
    /// The next look is the first at a newly focused window.
    focus_moved: bool,
    /// Seconds of reading the stream may still spend (its share of a core
    /// accrues, up to `MAX_BURST`; each read spends what it took; below
    /// zero, changed content waits).
    allowance: f64,
    refilled: Instant,
    status: ScreenStatus,
    /// What the UI was last told.
    sent: Option<ScreenStatus>,
}

impl ScreenWorker {
    fn new(latest: ScreenLatest, pixels: PixelSource, secret_pid: Arc<std::sync::atomic::AtomicU32>, store: Sender<StoreCommand>, sink: EventSink<CaptureEvent>) -> Self {
        Self {
            latest,
            seen_focus: None,
            seen_plan: ScreenPlan::default(),
            pixels,
            secret_pid,
            store,
            sink,
            desktop: None,
            gnome: None,
            session: None,
            a11y: Err(Instant::now() - Duration::from_secs(3600)),
            ocr: None,
            looks: VecDeque::new(),
            stored: VecDeque::new(),
            next_check: Some(Instant::now() + SETTLE),
            focus_moved: true,
            allowance: MAX_BURST.as_secs_f64(),
            refilled: Instant::now(),
            status: ScreenStatus::default(),
            sent: None,
        }
    }

    /// Handles one command (what it carries goes into the shared state, which
    /// its sender may have written already); false when the worker should stop.
    pub fn handle(&mut self, command: ScreenCommand) -> bool {
        match command {
            ScreenCommand::Focus(focused) => self.latest.set_focus(focused),
            ScreenCommand::SetRules(rules) => self.latest.set_rules(rules),
            ScreenCommand::Configure(plan) => self.latest.set_plan(plan),
            ScreenCommand::InjectPanic => panic!("injected screen fault"),
            ScreenCommand::Shutdown => return false,
        }
        self.follow();
        true
    }

    /// Acts on what changed in the shared state: a new focus is looked at
    /// after `SETTLE`; switched off, the engines and connections go.
    fn follow(&mut self) {
        let Latest { plan, focused, .. } = self.latest.get();
        if focused != self.seen_focus {
            self.seen_focus = focused;
            self.next_check = Some(Instant::now() + SETTLE);
            self.focus_moved = true;
        }
        if plan != self.seen_plan {
            if plan.on && !self.seen_plan.on {
                self.next_check = Some(Instant::now());
            }
            if !plan.on {
                self.ocr = None;
                self.desktop = None;
                self.looks.clear();
                self.stored.clear();
            }
            self.seen_plan = plan;
            self.report(None);
        }
    }

    /// Tells the UI how the stream is doing, when that changed.
    fn report(&mut self, held: Option<String>) {
        self.status.on = self.latest.get().plan.on;
        self.status.held = held;
        if self.sent.as_ref() != Some(&self.status) {
            self.sent = Some(self.status.clone());
            self.sink.send(CaptureEvent::Screen(self.status.clone()));
        }
    }

    fn x11(&mut self) -> Option<&crate::desktop::x11::X11Desktop> {
        let PixelSource::X11 { display } = &self.pixels else { return None };
        if self.desktop.is_none() {
            match crate::desktop::x11::X11Desktop::connect(display.as_deref()) {
                Ok(desktop) => self.desktop = Some(desktop),
                Err(err) => tracing::debug!("screen: no X display: {err}"),
            }
        }
        self.desktop.as_ref()
    }

    fn a11y(&mut self) -> Option<&A11yBus> {
        if let Err(failed_at) = &self.a11y
            && failed_at.elapsed() >= Duration::from_secs(30)
        {
            self.a11y = A11yBus::connect().map_err(|err| {
                tracing::debug!("screen: no AT-SPI: {err:#}");
                Instant::now()
            });
        }
        self.a11y.as_ref().ok()
    }

    /// Looks at the focused window once (`forced`: it just took the focus);
    /// returns how long that took.
    pub fn check(&mut self, forced: bool) -> Duration {
        let Latest { plan, focused, .. } = self.latest.get();
        if !plan.on {
            return Duration::ZERO;
        }
        let Some(focused) = focused else { return Duration::ZERO };
        let started = Instant::now();
        let window = focused.window.clone();
        // The window is read only while the desktop still describes it as
        // capture judged it (its title, on sway its pid too): a window that
        // moved on (a new title, another tab, another app) waits for
        // capture's next word, judged afresh with its URL.
        let mut sway = None;
        if let Some(desktop) = self.x11() {
            match desktop.listed_window(window.window_id) {
                Ok(now) if now.title == window.title => {}
                _ => return Duration::ZERO,
            }
        } else if let PixelSource::Sway { swaysock, .. } = &self.pixels {
            match crate::desktop::wlr_pixels::focused(swaysock) {
                Ok(Some(now)) if now.title == window.title && (window.pid.is_none() || now.pid == window.pid) => sway = Some(now),
                Ok(_) => return Duration::ZERO,
                Err(err) => {
                    tracing::debug!("screen: sway's IPC: {err}");
                    return Duration::ZERO;
                }
            }
        }
        if let Err(held) = self.may_read(&window) {
            self.report(Some(held));
            return Duration::ZERO;
        }
        let picture = match self.pixels_of(&window, focused.handle.as_deref(), sway.as_ref()) {
            Pixels::Read(picture) => Some(picture),
            Pixels::None => None,
            // The desktop refused because focus or title moved: nothing else of it is read either.
            Pixels::Moved => return started.elapsed(),
        };
        let grid = picture.as_ref().map(Grid::of);
        let previous = self.looks.iter().position(|l| l.window_id == window.window_id && l.title == window.title).and_then(|i| self.looks.remove(i));
        let unchanged = match (&previous, &grid) {
            (Some(Look { grid: Some(old), .. }), Some(new)) => !old.changed(new),
            (Some(look), None) => look.at.elapsed() < TREE_REFRESH,
            _ => false,
        };
        if unchanged && let Some(previous) = previous {
            self.remember(previous);
            return started.elapsed();
        }
        // Changed content waits while reading is over its share of a core (a
        // new focus is read at once); the last look stays, so the change is
        // seen again at the next check.
        if !forced && self.allowance < 0.0 {
            if let Some(previous) = previous {
                self.remember(previous);
            }
            return started.elapsed();
        }
        let rows = picture.as_ref().map(Rows::of);
        // What the window showed at its last kept read is remembered (in this focus
        // session or an earlier one: switching back to a log that grew one line
        // is one new line, not the whole window again): OCR reads only the bands
        // of rows it did not show (a log's new lines).
        let shown_here = self.stored.iter().any(|s| s.app == window.app && s.title == window.title);
        let bands = match (&previous, &rows) {
            (Some(Look { rows: Some(old), .. }), Some(new)) if shown_here => new.new_bands(old),
            _ => None,
        };
        // The rows bands are found against stay those of the last read whose text was kept
        // (a read that fails or is held back leaves them, so its rows are read next time).
        let base = previous.and_then(|p| p.rows);
        self.remember(Look { window_id: window.window_id, title: window.title.clone(), grid, rows: base, at: Instant::now() });
        let tree = match (window.pid, self.a11y()) {
            (Some(pid), Some(bus)) => bus.window_text(pid, &window.title).unwrap_or_else(|err| {
                tracing::debug!("screen: the tree of {} did not answer: {err}", window.app);
                None
            }),
            _ => None,
        };
        if tree.as_ref().is_some_and(|t| t.secret_focused) {
            self.report(Some("a password field has focus: nothing is read".into()));
            return started.elapsed();
        }
        let tree_text = tree.map(|t| t.text).filter(|t| t.chars().filter(|c| c.is_alphanumeric()).count() >= MIN_TREE_CHARS);
        // A pause, a new rule or a focus change that came while the window was read: nothing of it goes on.
        if let Err(held) = self.may_read(&window) {
            self.report(Some(held));
            return started.elapsed();
        }
        let read = match (tree_text, picture) {
            (Some(text), _) => Some((text, Method::Accessibility, 100, false)),
            (None, Some(picture)) if plan.ocr => match bands {
                // Every row was shown before (a scroll back, a repaint).
                Some(bands) if bands.is_empty() => None,
                Some(bands) => self.ocr_bands(&picture, &bands).map(|(text, confidence)| (text, Method::Ocr, confidence, true)),
                None => self.ocr_read(picture).map(|(text, confidence)| (text, Method::Ocr, confidence, false)),
            },
            _ => None,
        };
        if let Err(held) = self.may_read(&window) {
            self.report(Some(held));
            return started.elapsed();
        }
        self.report(None);
        if let Some((text, method, confidence, strips)) = read {
            let ocr = method == Method::Ocr;
            self.keep(&focused, &window, text, method, confidence, strips);
            if ocr && let Some(look) = self.looks.iter_mut().find(|l| l.window_id == window.window_id && l.title == window.title) {
                look.rows = rows;
            }
        }
        started.elapsed()
    }

    /// Whether `window` may be read now, by the latest state (the plan, the
    /// rules, the focus and a focused password field); else why not.
    fn may_read(&self, window: &ActiveWindow) -> Result<(), String> {
        let Latest { plan, rules, focused } = self.latest.get();
        if !plan.on {
            return Err("the stream is off".into());
        }
        if !focused.as_ref().is_some_and(|f| f.window.window_id == window.window_id && f.window.title == window.title) {
            return Err("the focus moved".into());
        }
        crate::capture::screen::allowed(&rules, window, local_minute_of_day(now_millis())).map_err(|err| err.to_string())?;
        let secret = self.secret_pid.load(std::sync::atomic::Ordering::SeqCst);
        if secret != 0 && window.pid == Some(secret) {
            return Err("a password field has focus: nothing is read".into());
        }
        Ok(())
    }

    /// The window's pixels, where this desktop gives them (the rules have allowed it).
    fn pixels_of(&mut self, window: &ActiveWindow, handle: Option<&str>, sway: Option<&crate::desktop::wlr_pixels::Focused>) -> Pixels {
        let Some(read) = self.read_pixels(window, handle, sway) else { return Pixels::None };
        match read {
            Ok(picture) => Pixels::Read(picture),
            Err(err) if err.contains("focus moved") => Pixels::Moved,
            Err(err) => {
                tracing::debug!("screen: cannot read the pixels of {}: {err}", window.title);
                Pixels::None
            }
        }
    }

    fn read_pixels(&mut self, window: &ActiveWindow, handle: Option<&str>, sway: Option<&crate::desktop::wlr_pixels::Focused>) -> Option<Result<image::RgbaImage, String>> {
        let read = match (&self.pixels, sway) {
            (PixelSource::Sway { socket, swaysock }, Some(focused)) => crate::desktop::wlr_pixels::capture_focused(socket, swaysock, focused),
            (PixelSource::X11 { .. }, _) => match self.x11() {
                Some(desktop) => desktop.capture_window(window.window_id),
                None => return None,
            },
            (PixelSource::KWin, _) => {
                let handle = handle?;
                if self.session.is_none() {
                    self.session = crate::desktop::observed::session_bus().map_err(|err| tracing::debug!("screen: {err}")).ok();
                }
                let read = crate::desktop::kwin::capture_window(self.session.as_ref()?, handle);
                if read.is_ok() {
                    crate::desktop::x11_pixels::READS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                read
            }
            (PixelSource::Gnome, _) => {
                let pid = window.pid?;
                if self.gnome.is_none() {
                    self.gnome = crate::desktop::gnome::Extension::session().map_err(|err| tracing::debug!("screen: {err}")).ok();
                }
                let read = self.gnome.as_ref()?.read_focused(&window.title, pid);
                if read.is_ok() {
                    crate::desktop::x11_pixels::READS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                read
            }
            _ => return None,
        };
        Some(read)
    }

    fn remember(&mut self, look: Look) {
        self.looks.push_front(look);
        self.looks.truncate(REMEMBERED);
    }

    fn engine(&mut self) -> Option<&mut crate::ocr::Ocr> {
        match self.ocr.get_or_insert_with(|| crate::ocr::Ocr::for_user().map_err(|err| err.to_string())) {
            Ok(engine) => Some(engine),
            Err(err) => {
                self.status.error = Some(format!("OCR is not available, so windows without accessible text are not read: {err}"));
                None
            }
        }
    }

    /// The whole window's text by OCR, and its confidence.
    fn ocr_read(&mut self, picture: image::RgbaImage) -> Option<(String, u8)> {
        let rows = picture.height();
        let engine = self.engine()?;
        OCR_ROWS.fetch_add(u64::from(rows), std::sync::atomic::Ordering::SeqCst);
        match engine.read(&image::DynamicImage::ImageRgba8(picture), crate::ocr::Source::Screen) {
            Ok(read) => Some((read.text, read.confidence)),
            Err(err) => {
                tracing::debug!("screen: OCR failed: {err}");
                None
            }
        }
    }

    /// The text of `bands` of the window's rows, top
    /// to bottom, and their least confidence.
    fn ocr_bands(&mut self, picture: &image::RgbaImage, bands: &[(u32, u32)]) -> Option<(String, u8)> {
        let engine = self.engine()?;
        let (mut texts, mut confidence) = (Vec::new(), 100u8);
        for &(top, bottom) in bands {
            let strip = image::imageops::crop_imm(picture, 0, top, picture.width(), bottom - top).to_image();
            OCR_ROWS.fetch_add(u64::from(bottom - top), std::sync::atomic::Ordering::SeqCst);
            match engine.read(&image::DynamicImage::ImageRgba8(strip), crate::ocr::Source::Screen) {
                Ok(read) if !read.text.is_empty() => {
                    texts.push(read.text);
                    confidence = confidence.min(read.confidence);
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::debug!("screen: OCR failed: {err}");
                    return None;
                }
            }
        }
        Some((texts.join("\n"), confidence))
    }

    /// Stores `text` as what `window` shows, unless it showed the same words last time.
    /// (`strips`: the text of the window's new bands of rows only, which adds to what it showed.)
    fn keep(&mut self, focused: &Focused, window: &ActiveWindow, text: String, method: Method, confidence: u8, strips: bool) {
        let text: String = text.trim().chars().take(MAX_TEXT_CHARS).collect();
        if text.chars().filter(|c| c.is_alphanumeric()).count() < 3 {
            return;
        }
        let mut lines: HashSet<String> = text.lines().map(line_key).filter(|l| !l.is_empty()).collect();
        let mut new_words = words(&text);
        let last = self.stored.iter().position(|s| s.app == window.app && s.title == window.title);
        // What the window showed before in this session: only what is new is kept (a log's
        // new lines, an edited paragraph); nothing when no new word came (a repaint, an
        // OCR reading of the same text, a scroll back).
        let text = match last.map(|i| &self.stored[i]) {
            Some(before) => {
                // (Strips of new rows are new by their pixels: a new line of words seen before counts.)
                if !strips && !new_words.iter().any(|w| w.len() >= 3 && !before.words.contains(w)) {
                    return;
                }
                if before.session_id == focused.session_id {
                    text.lines().filter(|l| !before.lines.contains(&line_key(l))).collect::<Vec<_>>().join("\n")
                } else {
                    text
                }
            }
            None => text,
        };
        if text.chars().filter(|c| c.is_alphanumeric()).count() < 3 {
            return;
        }
        if let Some(before) = last.and_then(|i| self.stored.remove(i))
            && strips
            && before.lines.len() + lines.len() <= MAX_REMEMBERED_LINES
        {
            lines.extend(before.lines);
            new_words.extend(before.words);
        }
        self.stored.push_front(Shown { app: window.app.clone(), title: window.title.clone(), session_id: focused.session_id, lines, words: new_words });
        self.stored.truncate(REMEMBERED);
        let row = ScreenRow {
            screen_id: next_id(),
            session_id: focused.session_id,
            seen_at_millis: now_millis(),
            app: window.app.clone(),
            title: window.title.clone(),
            url: window.url.clone(),
            method,
            confidence,
            text,
        };
        let summary = format!("{} — {} ({}, {} characters)", row.app, row.title, row.method.as_str(), row.text.chars().count());
        match self.store.send_timeout(screen_write(row), Duration::from_secs(1)) {
            Ok(()) => {
                self.status.stored += 1;
                self.status.last = Some(summary);
                self.status.error = None;
                self.report(None);
            }
            Err(_) => tracing::warn!("screen: the store is not keeping up; a window's text was dropped"),
        }
    }
}

impl Supervised for ScreenWorker {
    type Command = ScreenCommand;

    fn run(&mut self, commands: &Receiver<ScreenCommand>, ctx: &WorkerContext) -> anyhow::Result<()> {
        ctx.report(WorkerState::Running);
        self.follow();
        self.report(None);
        loop {
            let wait = self.next_check.map_or(CHECK_EVERY, |at| at.saturating_duration_since(Instant::now()));
            match commands.recv_timeout(wait) {
                Ok(command) => {
                    if !self.handle(command) {
                        return Ok(());
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
                Err(RecvTimeoutError::Timeout) => {}
            }
            // What changed without a command (a wake lost to a full queue) counts too.
            self.follow();
            if self.next_check.is_some_and(|at| at > Instant::now()) {
                continue;
            }
            self.allowance = (self.allowance + self.refilled.elapsed().as_secs_f64() * CPU_SHARE).min(MAX_BURST.as_secs_f64());
            self.refilled = Instant::now();
            // A new focus is read at once, unless reading is deep in debt (an app that keeps taking the focus).
            let forced = std::mem::take(&mut self.focus_moved) && self.allowance > -MAX_DEBT.as_secs_f64();
            let took = self.check(forced);
            self.allowance -= took.as_secs_f64();
            self.next_check = Some(Instant::now() + CHECK_EVERY);
        }
    }
}

/// Starts the `screen` worker, reading pixels from `pixels` (where there are
/// none, only the accessibility tree is read).
pub fn spawn_screen(
    pixels: PixelSource,
    latest: ScreenLatest,
    secret_pid: Arc<std::sync::atomic::AtomicU32>,
    store: Sender<StoreCommand>,
    sink: EventSink<CaptureEvent>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<ScreenCommand>> {
    let channel = bounded(32);
    spawn_supervised::<ScreenWorker, _, _>(WorkerName::Screen, policy, sink.clone(), channel, move |_ctx| {
        Ok(ScreenWorker::new(latest.clone(), pixels.clone(), secret_pid.clone(), store.clone(), sink.clone()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picture(lines: &[u32]) -> image::RgbaImage {
        let mut p = image::RgbaImage::from_pixel(320, 160, image::Rgba([255, 255, 255, 255]));
        for &y in lines {
            for x in 10..300 {
                for dy in 0..8 {
                    p.put_pixel(x, y + dy, image::Rgba([0, 0, 0, 255]));
                }
            }
        }
        p
    }

    #[test]
    fn a_new_line_changes_the_grid_and_a_cursor_does_not() {
        let before = Grid::of(&picture(&[20, 40]));
        assert!(!before.changed(&Grid::of(&picture(&[20, 40]))));
        assert!(before.changed(&Grid::of(&picture(&[20, 40, 60]))), "a new line of text");
        let mut cursor = picture(&[20, 40]);
        for x in 100..108 {
            for y in 60..76 {
                cursor.put_pixel(x, y, image::Rgba([0, 0, 0, 255]));
            }
        }
        assert!(!before.changed(&Grid::of(&cursor)), "a blinking cursor");
        let resized = image::RgbaImage::from_pixel(400, 160, image::Rgba([255, 255, 255, 255]));
        assert!(before.changed(&Grid::of(&resized)));
    }

    /// A picture of text-like lines: line `n` at `y` is a pattern of its own.
    fn lines_at(lines: &[(u32, u32)]) -> image::RgbaImage {
        let mut p = image::RgbaImage::from_pixel(320, 200, image::Rgba([255, 255, 255, 255]));
        for &(y, n) in lines {
            for x in 10..300 {
                for dy in 0..10 {
                    // Runs of n + 2 pixels, shifted by the row: no two rows of two lines alike.
                    if ((x + dy) / (n + 2)) % 2 == 0 {
                        p.put_pixel(x, y + dy, image::Rgba([0, 0, 0, 255]));
                    }
                }
            }
        }
        p
    }

    #[test]
    fn only_the_rows_a_window_did_not_show_before_are_read() {
        let before = Rows::of(&lines_at(&[(20, 1), (40, 2), (60, 3)]));
        // A new line under the others: one band around it, with its margin.
        let bands = Rows::of(&lines_at(&[(20, 1), (40, 2), (60, 3), (80, 4)])).new_bands(&before).unwrap();
        assert_eq!(bands, vec![(80 - BAND_MARGIN as u32, 90 + BAND_MARGIN as u32)]);
        // A log that scrolled: its old lines moved up, only the new one is read.
        let scrolled = Rows::of(&lines_at(&[(20, 2), (40, 3), (60, 4)])).new_bands(&before).unwrap();
        assert_eq!(scrolled, vec![(60 - BAND_MARGIN as u32, 70 + BAND_MARGIN as u32)]);
        // A scroll back to what was shown: nothing to read.
        assert_eq!(Rows::of(&lines_at(&[(30, 1), (50, 2)])).new_bands(&before), Some(vec![]));
        // A line whose top rows match an old line's is read whole, from the gap above it to the gap below.
        let mut edited = lines_at(&[(20, 1), (40, 2), (60, 3)]);
        for x in 10..150 {
            edited.put_pixel(x, 68, image::Rgba([0, 0, 0, 255]));
        }
        assert_eq!(Rows::of(&edited).new_bands(&before).unwrap(), vec![(60 - BAND_MARGIN as u32, 70 + BAND_MARGIN as u32)]);
        // Mostly new, or resized: the whole window.
        assert_eq!(Rows::of(&lines_at(&[(20, 5), (40, 6), (60, 7), (80, 8), (100, 9), (120, 10), (140, 11), (160, 12)])).new_bands(&before), None);
        assert_eq!(Rows::of(&image::RgbaImage::new(300, 200)).new_bands(&before), None);
    }

    #[test]
    fn lines_compare_without_case_or_spacing_and_words_are_lower_cased() {
        assert_eq!(line_key("  Build   FAILED at step 3 "), line_key("build failed at step 3"));
        let seen = words("error[E0308]: mismatched types --> src/ledger.rs:42:9");
        assert!(seen.contains("mismatched") && seen.contains("e0308") && !seen.contains("9"));
    }
}
