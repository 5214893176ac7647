//! The Apps panel: MCP apps the assistant can use. None can be installed yet.

use egui::RichText;

use crate::ui::theme;

pub fn apps_ui(ui: &mut egui::Ui) {
    ui.heading("Apps");
    ui.label("No apps are installed yet");
    ui.label(
        RichText::new(
            "Apps are MCP servers that let cowork act for you, each behind an approval gate. \
             Installing them arrives in a later version; `cowork mcp-tools -- COMMAND` already lists a server's tools.",
        )
        .small()
        .color(theme::MUTED),
    );
}
