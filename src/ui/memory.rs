//! Settings → Memory: the profile (working memory), hot memory facts with
//! their files, grounded mode and budgets, embedding progress, and the
//! Memory view — exactly what the last question's prompt carried and what
//! the budgets dropped.

use egui::{RichText, TextEdit};

use crate::config::keys;
use crate::memory::hot::File;
use crate::state::{AppState, UiAction};
use crate::ui::theme;

#[derive(Default)]
pub struct MemoryPanel {
    pub profile: Option<String>,
    pub new_fact: String,
    pub new_fact_file: Option<File>,
}

pub fn memory_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut MemoryPanel, actions: &mut Vec<UiAction>) {
    let mut grounded = state.settings.grounded;
    if ui.checkbox(&mut grounded, "Grounded answers (refuse when memory has nothing)").changed() {
        actions.push(UiAction::SaveSetting { key: keys::GROUNDED.into(), value: grounded.to_string() });
    }

    crate::ui::widgets::setting_text_ui(
        ui,
        "Profile (preferences, goals, style; always in the prompt)",
        keys::PROFILE,
        &state.settings.profile,
        &mut panel.profile,
        "Goal: ship the release; prefers short answers",
        true,
        actions,
    );

    // Learned, never silently: each line is added only when the user says so.
    for proposal in &state.memory.profile_proposals {
        ui.horizontal_wrapped(|ui| {
            ui.label(&proposal.question);
            if ui.small_button("Add to profile").clicked() {
                actions.push(UiAction::ProfileProposal { text: proposal.text.clone(), accept: true });
            }
            if ui.small_button("Dismiss").clicked() {
                actions.push(UiAction::ProfileProposal { text: proposal.text.clone(), accept: false });
            }
        });
    }

    ui.add_space(theme::SPACING);
    ui.label(RichText::new("Hot memory (mirrored in USER.md and MEMORY.md in the data directory; edits there are read back)").small().color(theme::muted()));
    for fact in &state.memory.hot {
        ui.horizontal_wrapped(|ui| {
            ui.label(RichText::new(format!("{} · {}", fact.file.file_name(), fact.pinned_by)).small().color(theme::muted()));
            ui.label(&fact.text);
            if ui.small_button("Unpin").clicked() {
                actions.push(UiAction::UnpinFact(fact.memory_id));
            }
        });
    }
    let file = panel.new_fact_file.get_or_insert(File::User);
    ui.horizontal(|ui| {
        ui.label("Pin into");
        ui.selectable_value(file, File::User, "USER.md");
        ui.selectable_value(file, File::Memory, "MEMORY.md");
    });
    ui.horizontal(|ui| {
        let label = ui.label("Fact");
        ui.add(TextEdit::singleline(&mut panel.new_fact).char_limit(crate::memory::hot::MAX_CHARS).desired_width(ui.available_width() - 80.0))
            .labelled_by(label.id);
        if ui.button("Pin").clicked() && !panel.new_fact.trim().is_empty() {
            actions.push(UiAction::PinFact { file: *file, text: std::mem::take(&mut panel.new_fact) });
        }
    });

    ui.add_space(theme::SPACING);
    match &state.memory_progress {
        Some(p) => {
            ui.label(format!(
                "Embedded {} chunks; {} waiting, {} rows queued, {} unfinished jobs",
                p.chunks_embedded, p.chunks_waiting, p.queued_rows, p.jobs_pending
            ));
            if p.jobs_failed > 0 {
                ui.horizontal_wrapped(|ui| {
                    ui.label(RichText::new(format!("{} failed jobs: {}", p.jobs_failed, p.last_error.as_deref().unwrap_or("?"))).color(theme::warn()));
                    if ui.small_button("Retry failed").clicked() {
                        actions.push(UiAction::RetryEmbedding);
                    }
                });
            }
        }
        None => {
            ui.label(RichText::new("Embedding has not reported yet").color(theme::muted()));
        }
    }

    if ui.button("Summarise older activity now").on_hover_text("The local model writes dated summaries of older hours; they join the prompt and search").clicked() {
        actions.push(UiAction::SummariseNow);
    }

    egui::CollapsingHeader::new("Memory view: the last prompt").show(ui, |ui| last_prompt_ui(ui, state));
}

fn last_prompt_ui(ui: &mut egui::Ui, state: &AppState) {
    let Some(report) = &state.memory.last_report else {
        ui.label(RichText::new("Ask something first").color(theme::muted()));
        return;
    };
    if let Some(why) = &report.withheld {
        ui.label(RichText::new(why).color(theme::warn()));
    }
    ui.label(format!("Memory in the prompt: {} of {} tokens", report.used_tokens(), report.budget_tokens));
    for section in &report.injected {
        // Derived from what cowork recorded: a task reads it as data, never as the user's word.
        let data = if section.trusted { "" } else { ", data" };
        egui::CollapsingHeader::new(format!("{} ({} tokens{data})", section.title, section.tokens)).show(ui, |ui| {
            ui.label(RichText::new(&section.text).small());
        });
    }
    for section in &report.dropped {
        ui.label(RichText::new(format!("dropped by the budget: {} ({} tokens)", section.title, section.tokens)).small().color(theme::warn()));
    }
    ui.label(format!("Recalled for the question: {}", state.memory.last_recalled.len()));
    for (n, item) in state.memory.last_recalled.iter().enumerate() {
        ui.label(RichText::new(format!("[{}] {:?} · {} · {}", n + 1, item.origin, item.label, item.text.chars().take(120).collect::<String>())).small());
    }
    for item in &state.memory.last_dropped {
        ui.label(RichText::new(format!("dropped by the budget: {} · {}", item.label, item.text.chars().take(80).collect::<String>())).small().color(theme::warn()));
    }
}
