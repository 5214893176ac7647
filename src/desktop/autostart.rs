//! "Start cowork when I log in": an XDG autostart entry
//! (`$XDG_CONFIG_HOME/autostart/app.cowork.Cowork.desktop`), which GNOME, KDE,
//! Xfce, LXQt and the session managers of sway and others read at login. The
//! file on disk is the setting (Startup Applications and KDE's Autostart page
//! show and edit the same file); it runs `cowork --autostart`, which opens the
//! sidebar or, when the user chose so, only the tray icon. `TryExec` names the
//! program, so a removed package leaves an entry the session skips.

use std::path::{Path, PathBuf};

/// The desktop entry's file name: the app id, as the portal and launchers know it.
pub const ENTRY_NAME: &str = "app.cowork.Cowork.desktop";

/// Where the entry goes: `$XDG_CONFIG_HOME/autostart`, else `~/.config/autostart`.
pub fn entry_path() -> Option<PathBuf> {
    directories::BaseDirs::new().map(|dirs| dirs.config_dir().join("autostart").join(ENTRY_NAME))
}

/// Whether cowork starts at login: our entry is there and not switched off
/// (`Hidden=true` or `X-GNOME-Autostart-enabled=false`, as desktops' own editors write).
pub fn enabled_at(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else { return false };
    let off = |key: &str, value: &str| text.lines().any(|line| line.trim().strip_prefix(key).and_then(|rest| rest.trim().strip_prefix('=')).is_some_and(|v| v.trim() == value));
    !off("Hidden", "true") && !off("X-GNOME-Autostart-enabled", "false")
}

/// The entry that starts `program` at login, on `data_dir` when it is not the default one.
pub fn entry(program: &Path, data_dir: Option<&Path>) -> Result<String, String> {
    // A program replaced while it ran (a package upgrade) reads as "… (deleted)".
    let program = program.to_string_lossy();
    let program = program.strip_suffix(" (deleted)").unwrap_or(&program);
    let data_dir = data_dir.map(|d| d.to_string_lossy().into_owned());
    // A line break or control character in a path would end the key and start another.
    if program.chars().chain(data_dir.iter().flat_map(|d| d.chars())).any(char::is_control) {
        return Err("the program's or the data directory's path holds a control character: no autostart entry can name it".into());
    }
    let exec = match &data_dir {
        Some(dir) => format!("{} --data-dir {} --autostart", quote_exec(program), quote_argument(dir)),
        None => format!("{} --autostart", quote_exec(program)),
    };
    Ok(format!(
        "[Desktop Entry]\nType=Application\nName=cowork\nComment=Start cowork's sidebar when you log in\nTryExec={try_exec}\nExec={exec}\n\
         Icon=app.cowork.Cowork\nTerminal=false\nNoDisplay=true\nX-GNOME-Autostart-enabled=true\nX-KDE-autostart-phase=2\n",
        try_exec = program.replace('\\', "\\\\"),
    ))
}

/// Whether the entry at `path` starts cowork on `data_dir` (None: the default one): Forget
/// everything for one data directory leaves the login start of another alone.
pub fn targets(path: &Path, data_dir: Option<&Path>) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else { return false };
    let Some(exec) = text.lines().find_map(|line| line.strip_prefix("Exec=")) else { return false };
    match data_dir {
        Some(dir) => exec.contains(&format!(" --data-dir {} ", quote_argument(&dir.to_string_lossy()))),
        None => !exec.contains(" --data-dir "),
    }
}

/// Writes (whole, then renamed over) or removes the entry at `path`.
pub fn set_at(path: &Path, on: bool, program: &Path, data_dir: Option<&Path>) -> Result<String, String> {
    if on {
        let entry = entry(program, data_dir)?;
        let dir = path.parent().ok_or("the autostart entry has no folder")?;
        std::fs::create_dir_all(dir).map_err(|err| format!("cannot make {}: {err}", dir.display()))?;
        let partial = path.with_extension("desktop.part");
        std::fs::write(&partial, entry).map_err(|err| format!("cannot write {}: {err}", partial.display()))?;
        std::fs::rename(&partial, path).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
        Ok(format!("cowork starts when you log in ({})", path.display()))
    } else {
        remove_at(path)
    }
}

/// Removes the entry at `path` (nothing there is fine).
pub fn remove_at(path: &Path) -> Result<String, String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(format!("cowork no longer starts when you log in (removed {})", path.display())),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok("cowork was not set to start when you log in".into()),
        Err(err) => Err(format!("cannot remove {}: {err}", path.display())),
    }
}

/// `set_at` for this user and this program.
pub fn set(on: bool, data_dir: Option<&Path>) -> Result<String, String> {
    let path = entry_path().ok_or("no home folder to keep the autostart entry in")?;
    let program = std::env::current_exe().map_err(|err| format!("cannot find this program: {err}"))?;
    set_at(&path, on, &program, data_dir)
}

/// An argument after the program: always quoted, with the spec's escapes.
fn quote_argument(argument: &str) -> String {
    let quoted = quote_exec(argument);
    if quoted.starts_with('"') { quoted } else { format!("\"{quoted}\"") }
}

/// A program path as an Exec key's first word (the desktop entry spec's quoting).
pub fn quote_exec(program: &str) -> String {
    if program.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c)) {
        return program.to_owned();
    }
    let mut quoted = String::from("\"");
    for c in program.chars() {
        if matches!(c, '"' | '`' | '$' | '\\') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    // The spec's general escape rule applies after the quoting one: each backslash doubles.
    quoted.replace('\\', "\\\\").replace('%', "%%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_is_written_whole_read_back_and_switched_off_as_desktops_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("autostart").join(ENTRY_NAME);
        assert!(!enabled_at(&path));
        // Written by a cowork whose file a package upgrade replaced while it ran.
        set_at(&path, true, Path::new("/usr/bin/cowork (deleted)"), None).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\nExec=/usr/bin/cowork --autostart\n") && text.contains("\nTryExec=/usr/bin/cowork\n"), "{text}");
        assert!(targets(&path, None) && !targets(&path, Some(Path::new("/data/other"))));
        assert!(enabled_at(&path));
        // GNOME's Tweaks and KDE switch an entry off in place.
        std::fs::write(&path, text.replace("X-GNOME-Autostart-enabled=true", "X-GNOME-Autostart-enabled=false")).unwrap();
        assert!(!enabled_at(&path));
        std::fs::write(&path, format!("{text}Hidden=true\n")).unwrap();
        assert!(!enabled_at(&path));
        assert!(set_at(&path, false, Path::new("/usr/bin/cowork"), None).unwrap().contains("removed"));
        assert!(!path.exists());
        assert!(set_at(&path, false, Path::new("/usr/bin/cowork"), None).unwrap().contains("was not set"));
        // Another data directory is named on the command line, and told apart.
        set_at(&path, true, Path::new("/usr/bin/cowork"), Some(Path::new("/data/my work"))).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\nExec=/usr/bin/cowork --data-dir \"/data/my work\" --autostart\n"), "{text}");
        assert!(targets(&path, Some(Path::new("/data/my work"))) && !targets(&path, None));
        // A path that would break the entry is refused.
        assert!(set_at(&path, true, Path::new("/usr/bin/cowork"), Some(Path::new("/data/x\nExec=evil"))).unwrap_err().contains("control character"));
    }

    #[test]
    fn a_program_path_with_spaces_or_quotes_is_quoted_for_exec() {
        assert_eq!(quote_exec("/opt/my apps/cowork"), "\"/opt/my apps/cowork\"");
        assert_eq!(quote_exec("/home/a\"b/cowork"), "\"/home/a\\\\\"b/cowork\"");
        assert_eq!(quote_exec("/x/50%/cowork"), "\"/x/50%%/cowork\"");
    }
}
