//! The window cowork shows instead of the sidebar when its database's key is
//! missing or wrong (issue 18): what happened, where cowork looked, that the
//! history is untouched, and Try again. Nothing else starts: no capture, no
//! workers, no new database. Runs on the main thread like the sidebar.

use std::path::PathBuf;

use egui::RichText;

use crate::store::key::KeyError;

/// What the view shows.
pub struct LockedView {
    pub problem: String,
    pub attempts: u32,
}

pub enum LockedAction {
    TryAgain,
    Quit,
}

pub fn locked_ui(ui: &mut egui::Ui, view: &LockedView, actions: &mut Vec<LockedAction>) {
    ui.heading("cowork cannot open your history");
    ui.add_space(8.0);
    ui.label(RichText::new(&view.problem).color(ui.visuals().warn_fg_color));
    ui.add_space(8.0);
    ui.label("Nothing is being recorded, and no new database was made. Your history stays encrypted in its file until its key is back.");
    if view.attempts > 0 {
        ui.label(RichText::new(format!("Tried again {} times", view.attempts)).weak());
    }
    ui.add_space(8.0);
    ui.horizontal(|ui| {
        if ui.button("Try again").clicked() {
            actions.push(LockedAction::TryAgain);
        }
        if ui.button("Quit").clicked() {
            actions.push(LockedAction::Quit);
        }
    });
}

/// The eframe app around `locked_ui`: Try again looks for the key again, and
/// when it opens the database the window closes so `main` starts cowork.
pub struct LockedApp {
    db: PathBuf,
    view: LockedView,
    pub unlocked: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LockedApp {
    pub fn new(db: PathBuf, problem: &KeyError) -> Self {
        Self { db, view: LockedView { problem: problem.to_string(), attempts: 0 }, unlocked: Default::default() }
    }

    pub fn view(&self) -> &LockedView {
        &self.view
    }
}

impl eframe::App for LockedApp {
    fn logic(&mut self, _ctx: &egui::Context, _frame: &mut eframe::Frame) {}

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        let mut actions = Vec::new();
        egui::CentralPanel::default_margins().show(ui, |ui| locked_ui(ui, &self.view, &mut actions));
        for action in actions {
            match action {
                LockedAction::TryAgain => {
                    self.view.attempts += 1;
                    crate::store::key::forget(&self.db);
                    match crate::store::key::unlock(&self.db) {
                        Ok(_) => {
                            self.unlocked.store(true, std::sync::atomic::Ordering::SeqCst);
                            ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
                        }
                        Err(err) => self.view.problem = err.to_string(),
                    }
                }
                LockedAction::Quit => ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close),
            }
        }
    }
}
