//! Small widgets the panels share.

/// A text box over a stored value: shows `current` until the user types, so
/// a value that arrives after the first frame is not hidden behind a stale
/// copy. Returns the edited text when it differs from `current`.
pub fn draft_edit(
    ui: &mut egui::Ui,
    draft: &mut Option<String>,
    current: &str,
    widget: impl FnOnce(&mut String) -> egui::TextEdit<'_>,
    label: egui::Id,
) -> Option<String> {
    let mut text = draft.clone().unwrap_or_else(|| current.to_owned());
    if ui.add(widget(&mut text)).labelled_by(label).changed() {
        *draft = Some(text.clone());
    }
    (text != current).then_some(text)
}

/// A labelled one-line setting with its Save button (saved as typed, trimmed).
pub fn setting_row_ui(
    ui: &mut egui::Ui,
    label: &str,
    key: &str,
    current: &str,
    draft: &mut Option<String>,
    actions: &mut Vec<crate::state::UiAction>,
) {
    ui.horizontal(|ui| {
        let label = ui.label(label);
        let edited = draft_edit(ui, draft, current, |text| egui::TextEdit::singleline(text).desired_width(120.0), label.id);
        if ui.add_enabled(edited.is_some(), egui::Button::new("Save")).clicked()
            && let Some(text) = edited
        {
            actions.push(crate::state::UiAction::SaveSetting { key: key.to_owned(), value: text.trim().to_owned() });
            *draft = None;
        }
    });
}
