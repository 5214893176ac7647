//! Light or dark, as the desktop prefers. First the XDG settings portal's
//! `org.freedesktop.appearance` `color-scheme` (GNOME 42+, KDE Plasma, and
//! every desktop whose portal has a Settings backend), followed live through
//! its `SettingChanged` signal, believed only from the portal's own
//! connection; without a portal, GTK's own setting: gsettings'
//! `color-scheme`, then `gtk-application-prefer-dark-theme` or a theme
//! named `…-dark` in `gtk-3.0/settings.ini`. Runs on an `appearance` thread.

use zbus::zvariant::OwnedValue;

use super::portal::{PORTAL, PORTAL_PATH};
use crate::desktop::events::DesktopEvent;

const SETTINGS: &str = "org.freedesktop.portal.Settings";
const NAMESPACE: &str = "org.freedesktop.appearance";
const KEY: &str = "color-scheme";

/// The portal's value: 1 prefers dark, 2 prefers light, 0 has no preference.
pub fn from_portal(value: u32) -> Option<bool> {
    match value {
        1 => Some(true),
        2 => Some(false),
        _ => None,
    }
}

/// A `u32`, also inside the variant in a variant that the older `Read` returns.
fn scheme_of(value: &OwnedValue) -> Option<u32> {
    use zbus::zvariant::Value;
    let mut value: &Value = value;
    while let Value::Value(inner) = value {
        value = inner;
    }
    u32::try_from(value).ok()
}

/// The portal's color-scheme: `ReadOne` (portal 1.15+), else `Read`.
pub fn read_portal(conn: &zbus::blocking::Connection) -> Result<Option<bool>, String> {
    let call = |method: &str| conn.call_method(Some(PORTAL), PORTAL_PATH, Some(SETTINGS), method, &(NAMESPACE, KEY));
    let reply = call("ReadOne").or_else(|_| call("Read")).map_err(|err| format!("the settings portal did not answer: {err}"))?;
    let value: OwnedValue = reply.body().deserialize().map_err(|err| format!("the settings portal's color-scheme: {err}"))?;
    Ok(scheme_of(&value).and_then(from_portal))
}

/// GTK's preference, from gsettings' answers (`'prefer-dark'`, a theme name)
/// and the text of `gtk-3.0/settings.ini`: None when none says.
pub fn from_gtk(color_scheme: Option<&str>, gtk_theme: Option<&str>, settings_ini: Option<&str>) -> Option<bool> {
    let unquoted = |s: &str| s.trim().trim_matches('\'').to_lowercase();
    match color_scheme.map(unquoted).as_deref() {
        Some("prefer-dark") => return Some(true),
        Some("prefer-light") => return Some(false),
        _ => {}
    }
    if let Some(theme) = gtk_theme.map(unquoted).filter(|t| !t.is_empty()) {
        return Some(theme.ends_with("-dark") || theme.ends_with(":dark"));
    }
    let ini = settings_ini?;
    let value = |key: &str| ini.lines().find_map(|line| line.split_once('=').filter(|(k, _)| k.trim() == key).map(|(_, v)| v.trim().to_lowercase()));
    if let Some(dark) = value("gtk-application-prefer-dark-theme") {
        return Some(dark == "1" || dark == "true");
    }
    value("gtk-theme-name").map(|theme| theme.ends_with("-dark"))
}

fn gsettings(key: &str) -> Option<String> {
    let out = std::process::Command::new("gsettings").args(["get", "org.gnome.desktop.interface", key]).stderr(std::process::Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// GTK's preference on this machine (gsettings, then settings.ini under `config_home`).
pub fn read_gtk(config_home: &std::path::Path) -> Option<bool> {
    let ini = std::fs::read_to_string(config_home.join("gtk-3.0/settings.ini")).ok();
    from_gtk(gsettings("color-scheme").as_deref(), gsettings("gtk-theme").as_deref(), ini.as_deref())
}

/// Sends the desktop's preference as `DesktopEvent::ColorScheme` now and at each
/// change the portal reports, until the bus closes.
pub fn spawn(config_home: std::path::PathBuf, sink: crate::runtime::EventSink<DesktopEvent>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("appearance".into()).spawn(move || {
        let portal = super::observed::session_bus().and_then(|conn| {
            let owner = super::portal::portal_owner(&conn)?;
            let dark = read_portal(&conn)?;
            Ok((conn, owner, dark))
        });
        let (conn, owner) = match portal {
            Ok((conn, owner, dark)) => {
                sink.send(DesktopEvent::ColorScheme(dark.or_else(|| read_gtk(&config_home))));
                (conn, owner)
            }
            Err(err) => {
                tracing::debug!(%err, "no settings portal: light or dark from GTK's settings");
                sink.send(DesktopEvent::ColorScheme(read_gtk(&config_home)));
                return;
            }
        };
        if let Err(err) = follow(&conn, &owner, |dark| {
            sink.send(DesktopEvent::ColorScheme(dark));
        }) {
            tracing::debug!(%err, "stopped following the desktop's color scheme");
        }
    })
}

/// Calls `on` with each color-scheme change the portal (`owner`) signals.
pub fn follow(conn: &zbus::blocking::Connection, owner: &str, mut on: impl FnMut(Option<bool>)) -> Result<(), String> {
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface(SETTINGS)
        .and_then(|b| b.member("SettingChanged"))
        .and_then(|b| b.path(PORTAL_PATH))
        .map_err(|err| err.to_string())?
        .build();
    let signals = zbus::blocking::MessageIterator::for_match_rule(rule, conn, Some(8)).map_err(|err| err.to_string())?;
    for message in signals {
        let Ok(message) = message else { continue };
        // Anyone may emit a signal of this name: only the portal's counts.
        if message.header().sender().map(|s| s.as_str()) != Some(owner) {
            continue;
        }
        let Ok((namespace, key, value)) = message.body().deserialize::<(String, String, OwnedValue)>() else { continue };
        if namespace == NAMESPACE && key == KEY {
            on(scheme_of(&value).and_then(from_portal));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtk_says_dark_by_color_scheme_then_theme_name_then_settings_ini() {
        assert_eq!(from_gtk(Some("'prefer-dark'"), Some("'Adwaita'"), None), Some(true));
        assert_eq!(from_gtk(Some("'prefer-light'"), None, None), Some(false));
        assert_eq!(from_gtk(Some("'default'"), Some("'Adwaita-dark'"), None), Some(true));
        assert_eq!(from_gtk(Some("'default'"), Some("'Adwaita'"), None), Some(false));
        assert_eq!(from_gtk(None, None, Some("[Settings]\ngtk-application-prefer-dark-theme=1\n")), Some(true));
        assert_eq!(from_gtk(None, None, Some("[Settings]\ngtk-theme-name=Arc-Dark\n")), Some(true));
        assert_eq!(from_gtk(None, None, Some("[Settings]\ngtk-font-name=Cantarell 11\n")), None);
        assert_eq!(from_gtk(None, None, None), None);
        assert_eq!((from_portal(1), from_portal(2), from_portal(0)), (Some(true), Some(false), None));
    }
}
