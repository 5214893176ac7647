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
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(config.join("autostart").join(ENTRY_NAME))
}

/// Whether cowork starts at login: our entry is there and not switched off
/// (`Hidden=true` or `X-GNOME-Autostart-enabled=false`, as desktops' own editors write).
pub fn enabled_at(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else { return false };
    let off = |key: &str, value: &str| text.lines().any(|line| line.trim().strip_prefix(key).and_then(|rest| rest.trim().strip_prefix('=')).is_some_and(|v| v.trim() == value));
    !off("Hidden", "true") && !off("X-GNOME-Autostart-enabled", "false")
}

pub fn enabled() -> bool {
    entry_path().is_some_and(|path| enabled_at(&path))
}

/// The entry that starts `program` at login.
pub fn entry(program: &Path) -> String {
    let exec = quote_exec(&program.to_string_lossy());
    format!(
        "[Desktop Entry]\nType=Application\nName=cowork\nComment=Start cowork's sidebar when you log in\nTryExec={try_exec}\nExec={exec} --autostart\n\
         Icon=app.cowork.Cowork\nTerminal=false\nNoDisplay=true\nX-GNOME-Autostart-enabled=true\nX-KDE-autostart-phase=2\n",
        try_exec = program.to_string_lossy().replace('\\', "\\\\"),
    )
}

/// Writes (whole, then renamed over) or removes the entry at `path`.
pub fn set_at(path: &Path, on: bool, program: &Path) -> Result<String, String> {
    if on {
        let dir = path.parent().ok_or("the autostart entry has no folder")?;
        std::fs::create_dir_all(dir).map_err(|err| format!("cannot make {}: {err}", dir.display()))?;
        let partial = path.with_extension("desktop.part");
        std::fs::write(&partial, entry(program)).map_err(|err| format!("cannot write {}: {err}", partial.display()))?;
        std::fs::rename(&partial, path).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
        Ok(format!("cowork starts when you log in ({})", path.display()))
    } else {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(format!("cowork no longer starts when you log in (removed {})", path.display())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok("cowork was not set to start when you log in".into()),
            Err(err) => Err(format!("cannot remove {}: {err}", path.display())),
        }
    }
}

/// `set_at` for this user and this program.
pub fn set(on: bool) -> Result<String, String> {
    let path = entry_path().ok_or("no home folder to keep the autostart entry in")?;
    let program = std::env::current_exe().map_err(|err| format!("cannot find this program: {err}"))?;
    set_at(&path, on, &program)
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
        set_at(&path, true, Path::new("/usr/bin/cowork")).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\nExec=/usr/bin/cowork --autostart\n") && text.contains("\nTryExec=/usr/bin/cowork\n"), "{text}");
        assert!(enabled_at(&path));
        // GNOME's Tweaks and KDE switch an entry off in place.
        std::fs::write(&path, text.replace("X-GNOME-Autostart-enabled=true", "X-GNOME-Autostart-enabled=false")).unwrap();
        assert!(!enabled_at(&path));
        std::fs::write(&path, format!("{text}Hidden=true\n")).unwrap();
        assert!(!enabled_at(&path));
        assert!(set_at(&path, false, Path::new("/usr/bin/cowork")).unwrap().contains("removed"));
        assert!(!path.exists());
        assert!(set_at(&path, false, Path::new("/usr/bin/cowork")).unwrap().contains("was not set"));
    }

    #[test]
    fn a_program_path_with_spaces_or_quotes_is_quoted_for_exec() {
        assert_eq!(quote_exec("/opt/my apps/cowork"), "\"/opt/my apps/cowork\"");
        assert_eq!(quote_exec("/home/a\"b/cowork"), "\"/home/a\\\\\"b/cowork\"");
        assert_eq!(quote_exec("/x/50%/cowork"), "\"/x/50%%/cowork\"");
    }
}
