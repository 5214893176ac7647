//! Colours and spacing, in one place.

use egui::Color32;

use crate::runtime::WorkerState;

pub const SIDEBAR_WIDTH: f32 = 380.0;
pub const QUICK_PROMPT_SIZE: [f32; 2] = [560.0, 64.0];
pub const SPACING: f32 = 6.0;

pub const USER_BUBBLE: Color32 = Color32::from_rgb(38, 52, 74);
pub const ASSISTANT_BUBBLE: Color32 = Color32::from_rgb(34, 38, 44);
pub const MUTED: Color32 = Color32::from_rgb(150, 156, 166);
pub const ERROR: Color32 = Color32::from_rgb(235, 110, 100);
pub const OK: Color32 = Color32::from_rgb(110, 200, 130);
pub const WARN: Color32 = Color32::from_rgb(230, 190, 90);

pub fn worker_colour(state: &WorkerState) -> Color32 {
    match state {
        WorkerState::Running => OK,
        WorkerState::Starting | WorkerState::Degraded(_) | WorkerState::Restarting { .. } => WARN,
        WorkerState::Failed { .. } | WorkerState::Stopped => ERROR,
    }
}

/// A stable colour per app name, for the timeline.
pub fn app_colour(app: &str) -> Color32 {
    let hash = app.bytes().fold(2166136261u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16777619));
    let hue = (hash % 360) as f32 / 360.0;
    egui::ecolor::Hsva::new(hue, 0.55, 0.75, 1.0).into()
}
