//! What is on the screen (issue 57), read on request: a window's text by OCR
//! of its own pixels (`desktop::x11_pixels`; the X11 path first), for
//! `cowork ocr --window` and the measurements. The privacy rules decide on
//! the window's app, title and URL before a single pixel is read: a window
//! they exclude (or any window while capture is paused or in quiet hours) is
//! refused without a read, which `x11_pixels::READS` lets a test count.

use std::time::{Duration, Instant};

use crate::capture::firewall::{Decision, Observation, Rules};
use crate::desktop::x11::X11Desktop;
use crate::ocr::{Ocr, OcrError, Source};
use crate::records::ActiveWindow;

/// A window's text as OCR read it from the screen.
#[derive(Clone, Debug)]
pub struct ScreenText {
    pub window: ActiveWindow,
    pub text: String,
    pub confidence: u8,
    /// Reading the pixels, and reading their text.
    pub capture: Duration,
    pub ocr: Duration,
    pub picture: image::RgbaImage,
}

#[derive(Debug, thiserror::Error)]
pub enum ScreenError {
    /// The privacy rules exclude the window: nothing was read.
    #[error("window {window} ({title}) is not read: {rule}")]
    Withheld { window: u32, title: String, rule: String },
    #[error("{0}")]
    Desktop(String),
    #[error(transparent)]
    Ocr(#[from] OcrError),
}

/// Whether the rules let cowork read `window` now.
pub fn allowed(rules: &Rules, window: &ActiveWindow, local_minute: u32) -> Result<(), ScreenError> {
    match rules.decide(&Observation { app: &window.app, title: &window.title, url: window.url.as_deref(), local_minute }) {
        Decision::Record => Ok(()),
        Decision::Exclude { rule } => Err(ScreenError::Withheld { window: window.window_id, title: window.title.clone(), rule }),
    }
}

/// The X11 window `window` (None: the focused one) read by OCR with `ocr`, if `rules` allow it.
pub fn read_x11_window(display: Option<&str>, window: Option<u32>, rules: &Rules, local_minute: u32, ocr: &mut Ocr) -> Result<ScreenText, ScreenError> {
    let mut desktop = X11Desktop::connect(display).map_err(|e| ScreenError::Desktop(e.to_string()))?;
    let described = match window {
        Some(id) => desktop.listed_window(id).map_err(|e| ScreenError::Desktop(e.to_string()))?,
        None => desktop.active_window().map_err(|e| ScreenError::Desktop(e.to_string()))?.ok_or_else(|| ScreenError::Desktop("no window has the focus".into()))?,
    };
    allowed(rules, &described, local_minute)?;
    let started = Instant::now();
    let picture = desktop.capture_window(described.window_id).map_err(ScreenError::Desktop)?;
    let capture = started.elapsed();
    let picture = image::DynamicImage::ImageRgba8(picture);
    let read = ocr.read(&picture, Source::Screen)?;
    Ok(ScreenText { window: described, text: read.text, confidence: read.confidence, capture, ocr: read.took, picture: picture.into_rgba8() })
}

/// The X11 window `window` (None: the focused one) read from its
/// accessibility tree, as the screen-text stream reads it, if `rules` allow
/// it; how long the tree took. Nothing is read while a password field has focus.
pub fn read_x11_window_tree(display: Option<&str>, window: Option<u32>, rules: &Rules, local_minute: u32) -> Result<(ActiveWindow, crate::capture::a11y::TreeText, Duration), ScreenError> {
    let mut desktop = X11Desktop::connect(display).map_err(|e| ScreenError::Desktop(e.to_string()))?;
    let described = match window {
        Some(id) => desktop.listed_window(id).map_err(|e| ScreenError::Desktop(e.to_string()))?,
        None => desktop.active_window().map_err(|e| ScreenError::Desktop(e.to_string()))?.ok_or_else(|| ScreenError::Desktop("no window has the focus".into()))?,
    };
    allowed(rules, &described, local_minute)?;
    let pid = described.pid.ok_or_else(|| ScreenError::Desktop(format!("window {} names no process, so its accessibility tree cannot be found", described.window_id)))?;
    let bus = crate::capture::a11y::A11yBus::connect().map_err(|e| ScreenError::Desktop(format!("{e:#}")))?;
    let started = Instant::now();
    let tree = bus
        .window_text(pid, &described.title)
        .map_err(|e| ScreenError::Desktop(format!("the accessibility tree did not answer: {e}")))?
        .ok_or_else(|| ScreenError::Desktop(format!("{} exposes no accessibility tree for this window", described.app)))?;
    if tree.secret_focused {
        return Err(ScreenError::Withheld { window: described.window_id, title: described.title.clone(), rule: "a password field has focus".into() });
    }
    Ok((described, tree, started.elapsed()))
}
