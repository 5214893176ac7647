//! Settings → Desktop and the status bar's desktop chip: which session this
//! is, and for each capability whether it works, why not, and how to fix it.

use egui::{Grid, RichText};

use crate::desktop::session::{CapState, Capability, Family, Hotkeys, Report, compositor_bindings};
use crate::state::{AppState, UiAction};
use crate::ui::theme;

fn colour(state: &CapState) -> egui::Color32 {
    match state {
        CapState::Ok { .. } => theme::ok(),
        CapState::Degraded { .. } => theme::warn(),
        CapState::Unavailable { .. } => theme::error(),
    }
}

/// One line per capability, for a hover or a list.
pub fn summary(report: &Report) -> String {
    let mut lines = vec![report.family.describe()];
    lines.extend(report.capabilities.iter().map(|(c, s)| format!("{}: {} — {}", c.label(), s.word(), s.text())));
    lines.join("\n")
}

/// The status bar chip: shown only when something is not fully there.
pub fn chip_ui(ui: &mut egui::Ui, state: &AppState) {
    let Some(report) = &state.desktop else { return };
    let limited = report.not_ok();
    if limited == 0 {
        return;
    }
    let text = format!("• {}: {limited} of {} limited", report.family.describe(), report.capabilities.len());
    // The hover's text is built only while hovered, not every frame.
    ui.label(RichText::new(text).small().color(theme::warn())).on_hover_ui(|ui| {
        ui.label(format!("{}\n(more in Settings, General)", summary(report)));
    });
}

pub fn desktop_ui(ui: &mut egui::Ui, state: &AppState, consent: &mut bool, actions: &mut Vec<UiAction>) {
    let Some(report) = &state.desktop else {
        ui.label(RichText::new("capture is off: no desktop is watched").color(theme::muted()));
        return;
    };
    let mut session = report.family.describe();
    if report.xwayland {
        session.push_str(" with XWayland (used for nothing but the sidebar, never to decide focus or presence)");
    }
    ui.label(session);
    Grid::new("desktop-capabilities").striped(true).num_columns(3).show(ui, |ui| {
        for (capability, cap_state) in &report.capabilities {
            ui.label(capability.label());
            ui.label(RichText::new(cap_state.word()).color(colour(cap_state)));
            ui.add(egui::Label::new(RichText::new(cap_state.text()).small()).wrap());
            ui.end_row();
        }
    });
    if report.family == Family::Gnome {
        gnome_extension_ui(ui, report, consent, actions);
        if !report.state(Capability::Hotkeys).is_ok() {
            ui.horizontal_wrapped(|ui| {
                if ui.button("Add cowork's shortcuts to GNOME's keyboard settings").clicked() {
                    actions.push(UiAction::GnomeShortcuts { add: true });
                }
                if ui.small_button("Remove them").clicked() {
                    actions.push(UiAction::GnomeShortcuts { add: false });
                }
            });
        }
    }
    let (shown, tray) = report.tray();
    let tray_colour = if shown { theme::ok() } else { theme::warn() };
    ui.add(egui::Label::new(RichText::new(format!("Tray: {tray}")).small().color(tray_colour)).wrap());
    let settings = &state.settings;
    let hotkeys = Hotkeys { quick_prompt: &settings.quick_prompt_hotkey, pause: &settings.pause_hotkey, talk: &settings.voice.hotkey };
    let lines = compositor_bindings(&report.family, &hotkeys);
    if !lines.is_empty() {
        ui.label("Wayland lets no app grab keys: the hotkeys work once these lines are in your compositor's config (then reload it).");
        for line in &lines {
            ui.add(egui::Label::new(RichText::new(line).monospace()).selectable(true));
        }
        if ui.small_button("Copy the lines").clicked() {
            ui.ctx().copy_text(lines.join("\n"));
        }
    } else if !report.x11_decides() && report.family.is_wayland() {
        ui.label(
            "Wayland lets no app grab keys: bind `cowork trigger quick-prompt`, `cowork trigger pause`, and \
             `cowork trigger talk-press` / `talk-release` to keys in your desktop's keyboard settings.",
        );
    }
}

/// GNOME: cowork's Shell extension, installed only after the user read what it does.
fn gnome_extension_ui(ui: &mut egui::Ui, report: &Report, consent: &mut bool, actions: &mut Vec<UiAction>) {
    let running = report.state(Capability::FocusedWindow).is_ok();
    if running {
        ui.horizontal_wrapped(|ui| {
            ui.label(RichText::new("cowork's GNOME Shell extension runs.").small().color(theme::ok()));
            if ui.small_button("Remove it").clicked() {
                actions.push(UiAction::GnomeExtension { install: false });
            }
        });
        return;
    }
    if !*consent {
        if ui.button("Install cowork's GNOME Shell extension…").clicked() {
            *consent = true;
        }
        return;
    }
    egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.add(
            egui::Label::new(
                "GNOME tells apps nothing about other windows, so cowork brings a small GNOME Shell extension of its own. \
                 It tells cowork, and no other program, which window has the focus (title, app and process), the clipboard's \
                 text while you let cowork record it, and keeps the sidebar docked. It is copied into your extensions folder \
                 (~/.local/share/gnome-shell/extensions/cowork@cowork.app) and enabled; you can remove it here at any time.",
            )
            .wrap(),
        );
        ui.label(RichText::new("GNOME on Wayland loads new extensions only at log-in: log out and in once after installing.").strong());
        ui.horizontal_wrapped(|ui| {
            if ui.button("Install").clicked() {
                actions.push(UiAction::GnomeExtension { install: true });
                *consent = false;
            }
            if ui.button("Not now").clicked() {
                *consent = false;
            }
        });
    });
}
