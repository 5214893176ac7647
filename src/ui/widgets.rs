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
