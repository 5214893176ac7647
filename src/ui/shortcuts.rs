//! Keyboard shortcuts: one table, used both to handle keys and to list them in Settings.

use egui::{Key, KeyboardShortcut, Modifiers};

use crate::state::{Tab, UiAction};

pub struct Shortcut {
    pub keys: KeyboardShortcut,
    pub description: &'static str,
    pub action: fn() -> UiAction,
}

pub const SHORTCUTS: &[Shortcut] = &[
    Shortcut { keys: KeyboardShortcut::new(Modifiers::COMMAND, Key::Num1), description: "Show Chat", action: || UiAction::SwitchTab(Tab::Chat) },
    Shortcut { keys: KeyboardShortcut::new(Modifiers::COMMAND, Key::Num2), description: "Show Context", action: || UiAction::SwitchTab(Tab::Context) },
    Shortcut { keys: KeyboardShortcut::new(Modifiers::COMMAND, Key::Num3), description: "Show Apps", action: || UiAction::SwitchTab(Tab::Apps) },
    Shortcut { keys: KeyboardShortcut::new(Modifiers::COMMAND, Key::Num4), description: "Show Settings", action: || UiAction::SwitchTab(Tab::Settings) },
    Shortcut { keys: KeyboardShortcut::new(Modifiers::COMMAND, Key::N), description: "New chat", action: || UiAction::NewThread },
    Shortcut { keys: KeyboardShortcut::new(Modifiers::COMMAND, Key::Period), description: "Stop the answer", action: || UiAction::Stop },
    Shortcut { keys: KeyboardShortcut::new(Modifiers::COMMAND, Key::K), description: "Open the quick prompt", action: || UiAction::OpenQuickPrompt },
    Shortcut { keys: KeyboardShortcut::new(Modifiers::COMMAND, Key::L), description: "Load the local model now", action: || UiAction::LoadModel },
];

/// Keys handled by widgets rather than the table, listed for completeness.
pub const WIDGET_KEYS: &[(&str, &str)] = &[
    ("Enter", "Send the message (chat input, quick prompt)"),
    ("Shift+Enter", "New line in the chat input"),
    ("Escape", "Stop the answer; close the quick prompt"),
    ("Ctrl+Shift+R", "Retry every failed worker"),
];

/// Consumes any table shortcut pressed this frame and returns its actions.
pub fn consume(ctx: &egui::Context) -> Vec<UiAction> {
    ctx.input_mut(|input| {
        SHORTCUTS.iter().filter(|s| input.consume_shortcut(&s.keys)).map(|s| (s.action)()).collect()
    })
}

pub fn format(ctx: &egui::Context, shortcut: &KeyboardShortcut) -> String {
    ctx.format_shortcut(shortcut)
}
