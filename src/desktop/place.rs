//! Placing cowork's own windows where the toolkit cannot: under Wayland,
//! winit ignores position and always-on-top, so on sway and Hyprland the
//! `place` thread asks the compositor over its IPC to make the sidebar a
//! floating, sticky window docked to the right edge of the work area, and
//! to float, centre and focus the quick prompt each time it opens; on KDE
//! Plasma a KWin script does the same (`kwin::place_script`), on GNOME
//! cowork's Shell extension (`gnome::Extension::place`). Windows are
//! found by cowork's own pid and their title, never by app id alone.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded};

use super::ipc::{Ipc, IpcWindow, Placement, Rect};

/// How long a window is looked for after it was asked for.
const FIND_FOR: Duration = Duration::from_secs(10);
const LOOK_EVERY: Duration = Duration::from_millis(50);
/// How long a placement is checked and asked again: a window found before
/// the toolkit's first commit is given the compositor's default floating
/// size when that commit lands, over what was asked.
const SETTLE_FOR: Duration = Duration::from_secs(5);
const CHECK_EVERY: Duration = Duration::from_millis(150);

pub const SIDEBAR_TITLE: &str = "cowork";
pub const QUICK_PROMPT_TITLE: &str = "cowork quick prompt";

#[derive(Debug)]
pub enum PlaceCommand {
    /// Dock the sidebar, `width` logical pixels wide, full height, on every workspace.
    Sidebar { width: i32 },
    /// Float the quick prompt of this size in the middle of the work area, focused.
    QuickPrompt { width: i32, height: i32 },
}

/// The handle of the `place` thread; it ends when the handle is dropped.
pub struct Placer {
    commands: Option<Sender<PlaceCommand>>,
    thread: Option<JoinHandle<()>>,
}

impl Placer {
    pub fn spawn(ipc: Ipc) -> std::io::Result<Placer> {
        let (tx, rx) = bounded(8);
        let thread = std::thread::Builder::new().name("place".into()).spawn(move || run(&ipc, &rx))?;
        Ok(Placer { commands: Some(tx), thread: Some(thread) })
    }

    /// On KDE Plasma: each placement is a KWin script (`kwin::place_script`),
    /// loaded over the session bus; KWin applies it when the window is there
    /// or as soon as it appears. The scripts are unloaded when the placer ends.
    pub fn spawn_kwin() -> std::io::Result<Placer> {
        let scripting = super::kwin::Scripting::session().map_err(std::io::Error::other)?;
        let (tx, rx) = bounded(8);
        let thread = std::thread::Builder::new().name("place".into()).spawn(move || run_kwin(&scripting, &rx))?;
        Ok(Placer { commands: Some(tx), thread: Some(thread) })
    }

    /// On GNOME: cowork's Shell extension places the window (and keeps the
    /// sidebar docked when the work area changes).
    pub fn spawn_gnome() -> std::io::Result<Placer> {
        let extension = super::gnome::Extension::session().map_err(std::io::Error::other)?;
        let (tx, rx) = bounded(8);
        let thread = std::thread::Builder::new().name("place".into()).spawn(move || run_gnome(&extension, &rx))?;
        Ok(Placer { commands: Some(tx), thread: Some(thread) })
    }

    /// Asks for a placement (never waits: a full queue drops it).
    pub fn place(&self, command: PlaceCommand) {
        if let Some(commands) = &self.commands
            && commands.try_send(command).is_err()
        {
            tracing::debug!("place: busy, a placement was dropped");
        }
    }
}

impl Drop for Placer {
    fn drop(&mut self) {
        self.commands.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(ipc: &Ipc, commands: &Receiver<PlaceCommand>) {
    for command in commands {
        let result = match command {
            PlaceCommand::Sidebar { width } => find(ipc, SIDEBAR_TITLE, commands).and_then(|window| {
                let area = ipc.work_area()?;
                settle(ipc, window, &Placement { rect: dock_right(area, width), sticky: true, focus: false }, commands)
            }),
            PlaceCommand::QuickPrompt { width, height } => find(ipc, QUICK_PROMPT_TITLE, commands).and_then(|window| {
                let area = ipc.work_area()?;
                settle(ipc, window, &Placement { rect: centred(area, width, height), sticky: false, focus: true }, commands)
            }),
        };
        match result {
            Ok(()) => tracing::debug!("place: done through {}'s IPC", ipc.name()),
            Err(err) => tracing::warn!("place: {err}"),
        }
    }
}

fn run_kwin(scripting: &super::kwin::Scripting, commands: &Receiver<PlaceCommand>) {
    use super::kwin::{PlaceKind, place_script, script_path};
    let pid = std::process::id();
    let mut loaded = Vec::new();
    for command in commands {
        let (name, kind, title) = match command {
            PlaceCommand::Sidebar { width } => ("sidebar", PlaceKind::Sidebar { width }, SIDEBAR_TITLE),
            PlaceCommand::QuickPrompt { width, height } => ("prompt", PlaceKind::Prompt { width, height }, QUICK_PROMPT_TITLE),
        };
        let plugin = format!("cowork-place-{pid}-{name}");
        let file = match script_path(&format!("{plugin}.js")) {
            Ok(file) => file,
            Err(err) => {
                tracing::warn!("place: {err}");
                continue;
            }
        };
        match scripting.load(&plugin, &file, &place_script(kind, pid, title)) {
            Ok(()) => tracing::debug!(%plugin, "place: asked KWin"),
            Err(err) => tracing::warn!("place: {err}"),
        }
        if !loaded.contains(&(plugin.clone(), file.clone())) {
            loaded.push((plugin, file));
        }
    }
    for (plugin, file) in loaded {
        scripting.unload(&plugin);
        let _ = std::fs::remove_file(file);
    }
}

fn run_gnome(extension: &super::gnome::Extension, commands: &Receiver<PlaceCommand>) {
    for command in commands {
        let (kind, title, width, height) = match command {
            PlaceCommand::Sidebar { width } => ("sidebar", SIDEBAR_TITLE, width, 0),
            PlaceCommand::QuickPrompt { width, height } => ("prompt", QUICK_PROMPT_TITLE, width, height),
        };
        // The window may not be mapped yet: ask until the extension finds it, then
        // once more after the toolkit's first frames (Mutter places a new window itself).
        let deadline = Instant::now() + FIND_FOR;
        let result = loop {
            match extension.place(kind, title, width, height) {
                Ok(true) => {
                    std::thread::sleep(CHECK_EVERY * 2);
                    break extension.place(kind, title, width, height).map(|_| ());
                }
                Ok(false) if Instant::now() < deadline && commands.is_empty() => std::thread::sleep(LOOK_EVERY),
                Ok(false) => break Err(format!("GNOME Shell shows no window of cowork titled {title:?}")),
                Err(err) => break Err(err),
            }
        };
        match result {
            Ok(()) => tracing::debug!(kind, "place: asked GNOME Shell"),
            Err(err) => tracing::warn!("place: {err}"),
        }
    }
}

/// Places `window` and checks that the compositor shows it there, asking
/// again until it does (or `SETTLE_FOR` passes, or a newer request comes).
fn settle(ipc: &Ipc, window: IpcWindow, placement: &Placement, commands: &Receiver<PlaceCommand>) -> Result<(), String> {
    let deadline = Instant::now() + SETTLE_FOR;
    loop {
        ipc.place(&window, placement)?;
        std::thread::sleep(CHECK_EVERY);
        let now = ipc.windows()?.into_iter().find(|w| w.id == window.id).ok_or("cowork's window went away while it was placed")?;
        match now.rect {
            // A compositor that does not say where windows are is taken at its word.
            None => return Ok(()),
            Some(rect) if rect == placement.rect => return Ok(()),
            Some(rect) if Instant::now() >= deadline => {
                return Err(format!("{} keeps cowork's window at {rect:?}, not at {:?}", ipc.name(), placement.rect));
            }
            Some(rect) => tracing::debug!(?rect, wanted = ?placement.rect, "place: not there yet, asking again"),
        }
        if !commands.is_empty() {
            return Err("a newer placement came first".into());
        }
    }
}

/// Looks for cowork's window titled `title` until it is mapped (or a newer
/// request comes, or `FIND_FOR` passes).
fn find(ipc: &Ipc, title: &str, commands: &Receiver<PlaceCommand>) -> Result<IpcWindow, String> {
    let me = std::process::id();
    let deadline = Instant::now() + FIND_FOR;
    loop {
        let windows = ipc.windows()?;
        if let Some(window) = windows.into_iter().find(|w| w.pid == Some(me) && w.title == title) {
            return Ok(window);
        }
        if Instant::now() >= deadline {
            return Err(format!("{}'s IPC shows no window of cowork titled {title:?}", ipc.name()));
        }
        if !commands.is_empty() {
            return Err("a newer placement came first".into());
        }
        std::thread::sleep(LOOK_EVERY);
    }
}

/// The sidebar's rectangle: the right edge of the work area, its full height.
pub fn dock_right(area: Rect, width: i32) -> Rect {
    let width = width.min(area.width).max(1);
    Rect { x: area.x + area.width - width, y: area.y, width, height: area.height }
}

fn centred(area: Rect, width: i32, height: i32) -> Rect {
    let (width, height) = (width.min(area.width), height.min(area.height));
    Rect { x: area.x + (area.width - width) / 2, y: area.y + (area.height - height) / 3, width, height }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sidebar_docks_right_within_the_work_area_and_the_prompt_sits_high_in_the_middle() {
        let area = Rect { x: 0, y: 30, width: 1280, height: 690 };
        assert_eq!(dock_right(area, 380), Rect { x: 900, y: 30, width: 380, height: 690 });
        assert_eq!(dock_right(Rect { x: 1920, y: 0, width: 300, height: 1080 }, 380).x, 1920, "never wider than the area");
        assert_eq!(centred(area, 560, 64), Rect { x: 360, y: 30 + 208, width: 560, height: 64 });
    }
}
