//! Small widgets the panels share.

/// A labelled one-line setting, applied at once: checked as it is typed
/// (the reason shown under it), stored when the field is left or Enter is
/// pressed. No Save button.
pub fn setting_row_ui(
    ui: &mut egui::Ui,
    label: &str,
    key: &str,
    current: &str,
    draft: &mut Option<String>,
    actions: &mut Vec<crate::state::UiAction>,
) {
    setting_text_ui(ui, label, key, current, draft, "", false, actions);
}

/// A setting typed as text (one line, or several for lists), applied at once.
#[allow(clippy::too_many_arguments)]
pub fn setting_text_ui(
    ui: &mut egui::Ui,
    label: &str,
    key: &str,
    current: &str,
    draft: &mut Option<String>,
    hint: &str,
    multiline: bool,
    actions: &mut Vec<crate::state::UiAction>,
) {
    use egui::RichText;
    use crate::ui::theme;
    let label = ui.label(label);
    let mut text = draft.clone().unwrap_or_else(|| current.to_owned());
    let field = if multiline { egui::TextEdit::multiline(&mut text).desired_rows(2) } else { egui::TextEdit::singleline(&mut text) };
    let response = ui.add(field.desired_width(ui.available_width().min(360.0)).hint_text(hint)).labelled_by(label.id);
    if response.changed() {
        *draft = Some(text.clone());
    }
    // Only what is being typed is checked (the privacy lists compile their
    // regexes to check): the stored value was checked when it was applied.
    let checked = draft.as_ref().map(|_| crate::config::check(key, text.trim()));
    if let Some(Err(reason)) = &checked {
        ui.label(RichText::new(reason).small().color(theme::error()));
    }
    if response.lost_focus() && matches!(checked, Some(Ok(()))) {
        if text.trim() != current {
            actions.push(crate::state::UiAction::SaveSetting { key: key.to_owned(), value: text.trim().to_owned() });
        }
        *draft = None;
    }
    if crate::config::needs_restart(key) {
        ui.label(RichText::new("Applies when cowork starts again").small().color(theme::muted()));
    }
}
