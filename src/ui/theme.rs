//! Colours and spacing, in one place. Light or dark: `apply` at the start of
//! each frame, from the user's choice (`ui.theme`) or the desktop's preference
//! (`DesktopEvent::ColorScheme`, from `desktop::appearance`); the colour
//! functions read the frame's choice (a thread-local on the UI thread).

use egui::Color32;

use crate::runtime::WorkerState;

pub const SIDEBAR_WIDTH: f32 = 380.0;
pub const QUICK_PROMPT_SIZE: [f32; 2] = [560.0, 64.0];
pub const SPACING: f32 = 6.0;

thread_local! {
    /// Whether this frame is drawn dark (set by `apply` at the start of each frame, on the UI thread).
    static DARK: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Light or dark for this frame: the user's choice, else the desktop's
/// preference (`desktop_dark`, from the settings portal or GTK), else dark.
pub fn apply(ctx: &egui::Context, choice: &str, desktop_dark: Option<bool>) {
    let dark = match choice {
        "light" => false,
        "dark" => true,
        _ => desktop_dark.unwrap_or(true),
    };
    if ctx.global_style().visuals.dark_mode != dark {
        ctx.set_theme(if dark { egui::Theme::Dark } else { egui::Theme::Light });
    }
    DARK.with(|d| d.set(dark));
}

fn pick(dark: Color32, light: Color32) -> Color32 {
    if DARK.with(std::cell::Cell::get) { dark } else { light }
}

pub fn user_bubble() -> Color32 {
    pick(Color32::from_rgb(38, 52, 74), Color32::from_rgb(222, 232, 246))
}

pub fn assistant_bubble() -> Color32 {
    pick(Color32::from_rgb(34, 38, 44), Color32::from_rgb(240, 241, 243))
}

/// Secondary text: readable on both backgrounds (at least 4.5:1 against the panel).
/// The calendars' meetings on the timeline.
pub fn calendar() -> Color32 {
    Color32::from_rgb(70, 130, 220)
}

pub fn muted() -> Color32 {
    pick(Color32::from_rgb(150, 156, 166), Color32::from_rgb(90, 96, 106))
}

pub fn error() -> Color32 {
    pick(Color32::from_rgb(235, 110, 100), Color32::from_rgb(180, 40, 30))
}

pub fn ok() -> Color32 {
    pick(Color32::from_rgb(110, 200, 130), Color32::from_rgb(30, 125, 55))
}

pub fn warn() -> Color32 {
    pick(Color32::from_rgb(230, 190, 90), Color32::from_rgb(150, 95, 0))
}

/// What listen mode heard, marked on the timeline.
pub fn accent() -> Color32 {
    pick(Color32::from_rgb(180, 150, 255), Color32::from_rgb(100, 60, 190))
}

/// Marks that must stand out on any app colour (typing on the timeline).
pub fn strong() -> Color32 {
    pick(Color32::from_rgb(235, 235, 235), Color32::from_rgb(20, 20, 20))
}

/// The ring around the control the keyboard focus is on.
pub fn focus_ring() -> Color32 {
    pick(Color32::from_rgb(120, 170, 255), Color32::from_rgb(20, 90, 200))
}

/// Draws the focus ring around the focused control while the keyboard is
/// driving (after Tab or an arrow key, until the pointer is pressed).
pub fn focus_ring_ui(ctx: &egui::Context, keyboard_driving: &mut bool) {
    ctx.input(|i| {
        if i.pointer.any_pressed() {
            *keyboard_driving = false;
        }
        if i.events.iter().any(|e| matches!(e, egui::Event::Key { key: egui::Key::Tab | egui::Key::ArrowUp | egui::Key::ArrowDown, pressed: true, .. })) {
            *keyboard_driving = true;
        }
    });
    if !*keyboard_driving {
        return;
    }
    let Some(rect) = ctx.memory(|m| m.focused()).and_then(|id| ctx.read_response(id)).map(|r| r.rect) else { return };
    let painter = ctx.layer_painter(egui::LayerId::new(egui::Order::Foreground, egui::Id::unique("focus_ring")));
    painter.rect_stroke(rect.expand(2.0), 4.0, egui::Stroke::new(2.0, focus_ring()), egui::StrokeKind::Outside);
}

pub fn worker_colour(state: &WorkerState) -> Color32 {
    match state {
        WorkerState::Running => ok(),
        WorkerState::Starting | WorkerState::Degraded(_) | WorkerState::Restarting { .. } => warn(),
        WorkerState::Failed { .. } | WorkerState::Stopped => error(),
    }
}

/// A stable colour per app name, for the timeline.
pub fn app_colour(app: &str) -> Color32 {
    let hash = app.bytes().fold(2166136261u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16777619));
    let hue = (hash % 360) as f32 / 360.0;
    egui::ecolor::Hsva::new(hue, 0.55, 0.75, 1.0).into()
}

/// The app icon for the window (X11 shows it in the task switcher; Wayland
/// compositors take it from the desktop entry instead).
pub fn window_icon() -> std::sync::Arc<egui::IconData> {
    const PNG: &[u8] = include_bytes!("../../assets/icons/hicolor/64x64/apps/app.cowork.Cowork.png");
    let decoded = (|| -> Result<egui::IconData, png::DecodingError> {
        let mut decoder = png::Decoder::new(std::io::Cursor::new(PNG));
        decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::ALPHA | png::Transformations::STRIP_16);
        let mut reader = decoder.read_info()?;
        let mut buffer = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buffer)?;
        buffer.truncate(info.buffer_size());
        Ok(egui::IconData { rgba: buffer, width: info.width, height: info.height })
    })();
    std::sync::Arc::new(decoded.unwrap_or_default())
}
