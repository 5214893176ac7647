//! What the desktop tells the UI: hotkeys and tray clicks, the colour scheme,
//! and (once, at start) which desktop this is.

#[derive(Clone, Debug)]
pub enum DesktopEvent {
    /// Which desktop this is and what cowork can see and do there (once, at start).
    Report(Box<crate::desktop::session::Report>),
    /// The global quick-prompt hotkey was pressed.
    QuickPromptHotkey,
    /// The global voice hotkey went down (true) or up (false).
    VoiceHotkey { pressed: bool },
    /// The pause hotkey or the tray: pause capture, or resume it.
    TogglePause,
    /// The tray: bring the sidebar to the front.
    ShowSidebar,
    /// A suggestion's Accept: bring the sidebar forward with a new chat that asks this.
    StartTask(String),
    /// The desktop prefers dark (true) or light (false), or says nothing (None).
    ColorScheme(Option<bool>),
}
