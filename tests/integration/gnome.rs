//! cowork on GNOME Shell 43, headless (`--headless --virtual-monitor`), with
//! its real extension installed by `cowork gnome-extension install` and
//! loaded by gnome-shell: focus, title, pid, fullscreen and clipboard pushed
//! to cowork and nobody else; Mutter's IdleMonitor for away; the sidebar
//! docked by the extension. A test-only driver extension moves the focus and
//! reads where windows are, as a user and a screenshot would.

use std::path::Path;
use std::time::Duration;

use cowork::store;

use super::support::{ChildGuard, eventually, require};
use super::wayland::{Compositor, capturing_data_dir, doctor_check, on_disk, stop};

fn sessions(db: &Path) -> Vec<cowork::records::ActivitySession> {
    store::open_read_only(db).ok().and_then(|c| cowork::capture::db::sessions_between(&c, 0, i64::MAX).ok()).unwrap_or_default()
}

/// A zbus connection to the GNOME session's bus, as any other program on it would have.
fn bus(gnome: &Compositor) -> zbus::blocking::Connection {
    zbus::blocking::connection::Builder::address(gnome.bus.as_deref().unwrap()).unwrap().method_timeout(Duration::from_secs(5)).build().unwrap()
}

#[test]
fn on_gnome_coworks_extension_turns_focus_and_title_changes_into_sessions_with_pids_for_cowork_only() {
    if !require(Compositor::gnome_available(), "gnome-shell, weston-terminal, dbus-daemon, unshare and gsettings") {
        return;
    }
    let mut gnome = Compositor::gnome();
    let (data, db) = capturing_data_dir(&[("privacy.denied_titles", "KeePassXC")]);
    let focused = doctor_check(&gnome, data.path(), "focused window");
    assert!(focused.0 == "ok" && focused.1.contains("GNOME Shell extension"), "{focused:?}\n{}", gnome.gnome_log());
    let away = doctor_check(&gnome, data.path(), "away detection");
    assert!(away.0 == "ok" && away.1.contains("IdleMonitor"), "{away:?}");
    let capture = ChildGuard(gnome.cowork(data.path()).args(["capture", "run"]).spawn().unwrap());

    let has = |title: &str, pid: u32| sessions(&db).iter().any(|s| s.title == title && s.pid == Some(pid) && s.app == "org.freedesktop.weston.wayland-terminal");
    let (alpha, alpha_titles) = gnome.weston_terminal("Alpha document");
    assert!(eventually(Duration::from_secs(10), || gnome.gnome_focus("Alpha document")), "{:?}", gnome.gnome_windows());
    assert!(eventually(Duration::from_secs(15), || has("Alpha document", alpha)), "{:?}\n{}", sessions(&db), gnome.gnome_log());
    let (beta, beta_titles) = gnome.weston_terminal("Beta notes");
    assert!(eventually(Duration::from_secs(10), || gnome.gnome_focus("Beta notes")));
    assert!(eventually(Duration::from_secs(10), || has("Beta notes", beta)), "{:?}", sessions(&db));
    // The focused window's title changes: a new session.
    std::fs::write(&beta_titles, "Beta notes, edited\n").unwrap();
    assert!(eventually(Duration::from_secs(5), || has("Beta notes, edited", beta)), "{:?}", sessions(&db));
    // A window without the focus changes its title: nothing yet ...
    std::fs::write(&alpha_titles, "Alpha renamed\n").unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert!(!sessions(&db).iter().any(|s| s.title == "Alpha renamed"), "{:?}", sessions(&db));
    // ... until it has the focus again.
    assert!(gnome.gnome_focus("Alpha renamed"));
    assert!(eventually(Duration::from_secs(5), || has("Alpha renamed", alpha)), "{:?}", sessions(&db));

    // Another program on the bus gets nothing from the extension: not the focused window, not a subscription.
    let other = bus(&gnome);
    for (method, refused) in [
        ("Focused", other.call_method(Some("org.gnome.Shell"), "/org/cowork/Desktop", Some("org.cowork.Desktop1"), "Focused", &())),
        ("ListWindows", other.call_method(Some("org.gnome.Shell"), "/org/cowork/Desktop", Some("org.cowork.Desktop1"), "ListWindows", &())),
        ("Subscribe", other.call_method(Some("org.gnome.Shell"), "/org/cowork/Desktop", Some("org.cowork.Desktop1"), "Subscribe", &(vec!["focus", "clipboard"],))),
    ] {
        let err = refused.expect_err(method).to_string();
        assert!(err.contains("NotCowork") && err.contains("answers cowork only"), "{method}: {err}");
    }
    // Nor can it pose as GNOME Shell to cowork: its report is refused by every connection of cowork's, and nothing is recorded.
    let cowork_names: Vec<String> = {
        let dbus = zbus::blocking::fdo::DBusProxy::new(&other).unwrap();
        let me = capture.0.id();
        dbus.list_names()
            .unwrap()
            .into_iter()
            .map(|n| n.to_string())
            .filter(|n| n.starts_with(':'))
            .filter(|n| dbus.get_connection_unix_process_id(n.as_str().try_into().unwrap()).ok() == Some(me))
            .collect()
    };
    let mut refused = 0;
    for name in &cowork_names {
        let forged = other.call_method(Some(name.as_str()), "/org/cowork/Desktop", Some("org.cowork.DesktopEvents1"), "Focused", &("Forged window", "evil", "", "", 1u32, false, "666"));
        let err = forged.expect_err("no connection of cowork's takes a report from another program").to_string();
        refused += usize::from(err.contains("AccessDenied"));
    }
    assert!(refused >= 1, "the connection that takes GNOME Shell's reports refused it: {cowork_names:?}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(!sessions(&db).iter().any(|s| s.title == "Forged window"), "{:?}", sessions(&db));

    // A password manager's window, by the firewall's title rule: nothing of it.
    let (vault, _) = gnome.weston_terminal("Passwords.kdbx - KeePassXC");
    assert!(eventually(Duration::from_secs(10), || gnome.gnome_focus("Passwords.kdbx - KeePassXC")));
    std::thread::sleep(Duration::from_millis(1_000));
    gnome.close(vault);
    assert!(gnome.gnome_focus("Beta notes, edited"));

    // The clipboard, pushed by the extension while the stream records.
    let clips = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::db::clips_between(&c, 0, i64::MAX).ok()).unwrap_or_default();
    gnome.shell_eval("imports.gi.St.Clipboard.get_default().set_text(imports.gi.St.ClipboardType.CLIPBOARD, 'standup moved to 10:30')").unwrap();
    assert!(eventually(Duration::from_secs(5), || clips().iter().any(|c| c.text == "standup moved to 10:30")), "{:?}", clips());

    // GNOME disables the extension and enables it again (an update, the user in Extensions):
    // cowork is told nothing is focused, then subscribes again at its Ready and records on.
    let toggled = gnome.shell_eval("imports.ui.main.extensionManager.disableExtension('cowork@cowork.app')");
    assert!(toggled.is_some());
    std::thread::sleep(Duration::from_millis(500));
    gnome.shell_eval("imports.ui.main.extensionManager.enableExtension('cowork@cowork.app')").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(gnome.gnome_focus("Alpha renamed"));
    let after = sessions(&db).iter().filter(|s| s.title == "Alpha renamed").count();
    assert!(gnome.gnome_focus("Beta notes, edited"));
    assert!(gnome.gnome_focus("Alpha renamed"));
    assert!(eventually(Duration::from_secs(5), || sessions(&db).iter().filter(|s| s.title == "Alpha renamed").count() > after), "{:?}", sessions(&db));

    stop(capture);
    let titles: Vec<String> = sessions(&db).into_iter().map(|s| s.title).collect();
    assert!(titles.iter().all(|t| !t.contains("KeePassXC") && !t.contains("Passwords")), "{titles:?}");
    assert!(!on_disk(data.path(), "Passwords.kdbx"));
}

/// GNOME: with nobody at the keyboard, Mutter's IdleMonitor watch marks the
/// user away after the threshold (10 s), back-dated to the last input —
/// unless the focused window fills the screen (a film keeps the user
/// present), which the extension reports as the window's state changes.
#[test]
fn on_gnome_mutters_idle_monitor_marks_away_unless_a_fullscreen_window_has_the_focus() {
    use cowork::capture::heartbeat::AfkStatus;
    if !require(Compositor::gnome_available(), "gnome-shell, weston-terminal, dbus-daemon, unshare and gsettings") {
        return;
    }
    let mut gnome = Compositor::gnome();
    gnome.weston_terminal("Film");
    assert!(eventually(Duration::from_secs(10), || gnome.gnome_focus("Film")));
    let fullscreen = |on: bool| {
        let code = format!("(() => {{ const w = global.display.focus_window; if ({on}) w.make_fullscreen(); else w.unmake_fullscreen(); return w.is_fullscreen(); }})()");
        assert_eq!(gnome.shell_eval(&code), Some(serde_json::Value::Bool(on)));
    };
    fullscreen(true);
    let (data, db) = capturing_data_dir(&[("capture.afk_secs", "10")]);
    let capture = ChildGuard(gnome.cowork(data.path()).args(["capture", "run"]).spawn().unwrap());
    let afk = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::db::afk_between(&c, 0, i64::MAX).ok()).unwrap_or_default();
    std::thread::sleep(Duration::from_secs(16));
    assert!(!afk().iter().any(|e| e.data == AfkStatus::Afk), "a fullscreen window keeps the user present: {:?}", afk());
    let windowed = cowork::ids::now_millis();
    fullscreen(false);
    assert!(eventually(Duration::from_secs(20), || afk().iter().any(|e| e.data == AfkStatus::Afk)), "nobody typed, so the user went away: {:?}", afk());
    let gone = afk().into_iter().find(|e| e.data == AfkStatus::Afk).unwrap();
    assert!(gone.start_millis < windowed, "away is back-dated to the last input, not to when the film ended: {gone:?}");
    stop(capture);
}

/// GNOME: the sidebar is kept above, on every workspace and docked to the
/// right edge of the work area at its full height by the extension; a
/// terminal beside it is left alone; the quick prompt opens centred, above
/// and focused.
#[test]
fn on_gnome_the_extension_docks_the_sidebar_right_on_every_workspace_and_opens_the_prompt_focused() {
    if !require(Compositor::gnome_available(), "gnome-shell, weston-terminal, dbus-daemon, unshare and gsettings") {
        return;
    }
    let mut gnome = Compositor::gnome();
    let (notes, _) = gnome.weston_terminal("Meeting notes");
    let data = super::support::temp_dir();
    let placement = doctor_check(&gnome, data.path(), "sidebar placement");
    assert!(placement.0 == "ok" && placement.1.contains("GNOME Shell extension"), "{placement:?}");
    let log = data.path().join("sidebar.log");
    let sidebar = gnome
        .cowork(data.path())
        .arg("--models-dir")
        .arg(super::support::models_dir())
        .env("COWORK_LOG", "cowork=debug")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let pid = sidebar.id();
    gnome.children.push(ChildGuard(sidebar));
    let placed = || std::fs::read_to_string(&log).unwrap_or_default().lines().filter(|l| l.contains("place")).collect::<Vec<_>>().join("\n");
    let window = |windows: &[serde_json::Value], pid: u32, title: &str| windows.iter().find(|w| w["pid"] == pid && w["title"] == title).cloned();
    let mut last = (Vec::new(), serde_json::Value::Null);
    let docked = eventually(Duration::from_secs(30), || {
        last = gnome.gnome_windows();
        let (windows, area) = &last;
        window(windows, pid, "cowork").is_some_and(|w| {
            w["above"] == true
                && w["sticky"] == true
                && w["x"].as_i64().unwrap() + w["width"].as_i64().unwrap() == area["x"].as_i64().unwrap() + area["width"].as_i64().unwrap()
                && w["y"] == area["y"]
                && w["height"] == area["height"]
                && w["width"].as_i64().unwrap() < area["width"].as_i64().unwrap() / 2
        })
    });
    assert!(docked, "the sidebar is above, on all workspaces, docked right at full height: {last:?}\n{}\n{}", placed(), gnome.gnome_log());
    let terminal = window(&last.0, notes, "Meeting notes").expect("the terminal");
    assert!(terminal["above"] == false && terminal["sticky"] == false, "only cowork's own window is touched: {terminal}");

    let out = gnome.cowork(data.path()).args(["trigger", "quick-prompt"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let opened = eventually(Duration::from_secs(15), || {
        last = gnome.gnome_windows();
        let (windows, area) = &last;
        window(windows, pid, "cowork quick prompt").is_some_and(|w| {
            let centre = w["x"].as_i64().unwrap() + w["width"].as_i64().unwrap() / 2;
            let middle = area["x"].as_i64().unwrap() + area["width"].as_i64().unwrap() / 2;
            w["above"] == true && w["focused"] == true && (centre - middle).abs() <= 1
        })
    });
    assert!(opened, "the quick prompt is centred, above and focused: {last:?}\n{}", placed());
    let sidebar = gnome.children.iter_mut().find(|c| c.0.id() == pid).unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    assert!(sidebar.0.wait().unwrap().success());
}

/// The extension's shared logic under node with GNOME Shell's objects faked
/// (what the GNOME 45+ variant shares with the 43 one gnome-shell runs
/// above), and both variants as cowork writes them parse: the 45+ one as an
/// ES module, the 43 one as a script (GNOME 45+ cannot run on Debian 12).
#[test]
fn the_gnome_extension_logic_holds_under_node_and_both_variants_parse() {
    if !require(super::support::have_program("node"), "node") {
        return;
    }
    let repo = super::support::repo_dir();
    let out = std::process::Command::new("node").arg(repo.join("tests/integration/gnome/core_test.js")).arg(repo.join("assets/gnome/core.js")).output().unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).matches("ok - ").count(), 9, "{}", String::from_utf8_lossy(&out.stdout));
    let dir = super::support::temp_dir();
    for (major, name) in [(43, "extension-43.js"), (44, "extension-44.js"), (45, "extension-45.mjs"), (48, "extension-48.mjs")] {
        let source = cowork::desktop::gnome::extension_source(major);
        assert!(!source.contains("@COWORK_CORE@") && source.contains("class CoworkDesktop"), "{major}: the core is written in");
        assert_eq!(source.contains("export default class"), major >= 45, "{major}");
        assert_eq!(source.contains("function init()"), major < 45, "{major}");
        let path = dir.path().join(name);
        std::fs::write(&path, source).unwrap();
        let out = std::process::Command::new("node").arg("--check").arg(&path).output().unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// `cowork gnome-extension` as a user runs it, without gnome-shell running:
/// install writes the GNOME 45+ variant for GNOME 47, allows this program,
/// enables it in GNOME's settings (kept beside what was enabled) and says
/// to log out and in, as status does then; installing again changes the
/// variant and adds nothing twice; remove disables it and leaves nothing.
#[test]
fn cowork_gnome_extension_installs_enables_and_removes_itself_keeping_the_users_other_extensions() {
    if !require(super::support::have_program("gsettings") && Path::new("/usr/share/glib-2.0/schemas/org.gnome.shell.gschema.xml").exists(), "gsettings and GNOME Shell's schemas") {
        return;
    }
    let home = super::support::temp_dir();
    let schemas = home.path().join("schemas");
    std::fs::create_dir_all(&schemas).unwrap();
    for entry in std::fs::read_dir("/usr/share/glib-2.0/schemas").unwrap().flatten() {
        if entry.file_name().to_string_lossy().ends_with(".xml") {
            std::fs::copy(entry.path(), schemas.join(entry.file_name())).unwrap();
        }
    }
    assert!(std::process::Command::new("glib-compile-schemas").arg(&schemas).status().unwrap().success());
    let data = super::support::temp_dir();
    let cowork = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cowork"))
            .arg("--data-dir")
            .arg(data.path())
            .args(args)
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env_remove("XDG_DATA_HOME")
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join(".config"))
            .env("GSETTINGS_BACKEND", "keyfile")
            .env("GSETTINGS_SCHEMA_DIR", &schemas)
            .env("XDG_SESSION_TYPE", "wayland")
            .env("XDG_CURRENT_DESKTOP", "GNOME")
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    };
    let gsettings = |args: &[&str]| {
        let out = std::process::Command::new("gsettings")
            .args(args)
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join(".config"))
            .env("GSETTINGS_BACKEND", "keyfile")
            .env("GSETTINGS_SCHEMA_DIR", &schemas)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    gsettings(&["set", "org.gnome.shell", "enabled-extensions", "['appindicatorsupport@rgcjonas.gmail.com']"]);
    let (ok, said) = cowork(&["gnome-extension", "install"]);
    assert!(!ok && said.contains("--shell-version"), "without a running GNOME Shell the version must be given: {said}");
    let (ok, said) = cowork(&["gnome-extension", "install", "--shell-version", "47.2"]);
    assert!(ok && said.contains("GNOME 45 and later") && said.contains("log out and in once"), "{said}");
    let dir = home.path().join(".local/share/gnome-shell/extensions/cowork@cowork.app");
    let source = std::fs::read_to_string(dir.join("extension.js")).unwrap();
    assert!(source.contains("export default class CoworkExtension extends Extension"));
    let metadata: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("metadata.json")).unwrap()).unwrap();
    assert_eq!(metadata["uuid"], "cowork@cowork.app");
    assert!(metadata["shell-version"].as_array().unwrap().iter().any(|v| v == "47"), "{metadata}");
    let allowed = std::fs::read_to_string(dir.join("allowed-executables")).unwrap();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_cowork")).unwrap();
    assert!(allowed.lines().any(|l| Path::new(l) == exe), "{allowed}");
    assert_eq!(gsettings(&["get", "org.gnome.shell", "enabled-extensions"]), "['appindicatorsupport@rgcjonas.gmail.com', 'cowork@cowork.app']");
    let (_, status) = cowork(&["gnome-extension", "status"]);
    assert!(status.contains("installed") && status.contains("log out and in"), "{status}");
    // Installing again (another build of cowork, say) adds nothing twice.
    assert!(cowork(&["gnome-extension", "install", "--shell-version", "43.9"]).0);
    assert_eq!(std::fs::read_to_string(dir.join("allowed-executables")).unwrap().lines().filter(|l| !l.starts_with('#')).count(), 1);
    assert!(std::fs::read_to_string(dir.join("extension.js")).unwrap().contains("function init()"), "the GNOME 43 variant now");
    assert_eq!(gsettings(&["get", "org.gnome.shell", "enabled-extensions"]), "['appindicatorsupport@rgcjonas.gmail.com', 'cowork@cowork.app']");

    let (ok, removed) = cowork(&["gnome-extension", "remove"]);
    assert!(ok && removed.contains("Removed"), "{removed}");
    assert!(!dir.exists());
    assert_eq!(gsettings(&["get", "org.gnome.shell", "enabled-extensions"]), "['appindicatorsupport@rgcjonas.gmail.com']", "what the user had enabled stays");
    let (_, status) = cowork(&["gnome-extension", "status"]);
    assert!(status.contains("not installed"), "{status}");

    // GNOME before 48: cowork's hotkeys as custom shortcuts running this cowork, beside the user's own.
    let media_keys = "org.gnome.settings-daemon.plugins.media-keys";
    let mine = "/org/gnome/settings-daemon/plugins/media-keys/custom-keybindings/custom0/";
    gsettings(&["set", media_keys, "custom-keybindings", &format!("['{mine}']")]);
    for _ in 0..2 {
        let (ok, said) = cowork(&["gnome-extension", "add-shortcuts"]);
        assert!(ok && said.contains("tap to start"), "{said}");
    }
    let listed = gsettings(&["get", media_keys, "custom-keybindings"]);
    let base = "/org/gnome/settings-daemon/plugins/media-keys/custom-keybindings";
    assert_eq!(listed, format!("['{mine}', '{base}/cowork-quick-prompt/', '{base}/cowork-pause/', '{base}/cowork-talk/']"), "added once, after the user's own");
    let key = |id: &str, key: &str| gsettings(&["get", &format!("{media_keys}.custom-keybinding:{base}/{id}/"), key]);
    assert_eq!(key("cowork-quick-prompt", "binding"), "'<Control><Alt>space'");
    // (GVariant text: a string holding quotes is printed in double quotes.)
    assert_eq!(key("cowork-quick-prompt", "command"), format!("\"'{}' trigger quick-prompt\"", exe.display()), "this very program");
    assert!(key("cowork-talk", "command").ends_with("trigger talk-tap\"") && key("cowork-talk", "name").contains("tap"));
    let (ok, said) = cowork(&["gnome-extension", "remove-shortcuts"]);
    assert!(ok && said.contains("Removed 3"), "{said}");
    assert_eq!(gsettings(&["get", media_keys, "custom-keybindings"]), format!("['{mine}']"), "the user's own shortcut stays");
}

/// GNOME: dictation sends what was heard through Mutter's RemoteDesktop,
/// keysym by keysym, each as a key press and release that reaches GNOME
/// Shell's input path (its stage sees them); what the layout has no key for
/// (Mutter would drop it silently) is not sent but said;
/// a line break becomes a space and nothing submits; each dictation's
/// session is closed after it; doctor says how. A headless Mutter has no
/// physical keyboard, so its seat offers apps no wl_keyboard and no app can
/// receive keys here: what reaches the stage is what is checked.
#[test]
fn on_gnome_dictation_sends_keysyms_through_mutters_remote_desktop_says_what_the_layout_lacks_and_never_submits() {
    if !require(Compositor::gnome_available(), "gnome-shell, weston-terminal, dbus-daemon, unshare and gsettings") {
        return;
    }
    let mut gnome = Compositor::gnome();
    let data = super::support::temp_dir();
    let dictation = doctor_check(&gnome, data.path(), "dictation typing");
    assert!(dictation.0 == "ok" && dictation.1.contains("Mutter's RemoteDesktop"), "{dictation:?}");
    gnome.weston_terminal("Dictation sink");
    assert!(eventually(Duration::from_secs(10), || gnome.gnome_focus("Dictation sink")));
    // What GNOME Shell's input path sees: each key press's keysym and each release.
    let hooked = gnome.shell_eval(
        "globalThis.coworkKeys = []; global.stage.connect('captured-event', (a, e) => { const t = e.type(); \
         if (t === imports.gi.Clutter.EventType.KEY_PRESS) globalThis.coworkKeys.push(e.get_key_symbol()); \
         if (t === imports.gi.Clutter.EventType.KEY_RELEASE) globalThis.coworkKeys.push(-e.get_key_symbol()); return false; }); true",
    );
    assert_eq!(hooked, Some(serde_json::Value::Bool(true)));
    let seen = || -> Vec<i64> { gnome.shell_eval("globalThis.coworkKeys").and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default() };
    let said = "héllo wörld €5";
    let conn = bus(&gnome);
    // GNOME's layout here is the default US one: é, ö and € have no key on it, and Mutter
    // drops a keysym without a key, so they are not sent but said.
    let us = cowork::desktop::ei::KeyTable::for_layout("us", "").unwrap();
    let typed = cowork::desktop::gnome::type_text_on(&conn, &us, &cowork::audio::dictate::typeable(said)).unwrap();
    let on_us: String = said.chars().filter(|c| us.key(*c).is_some()).collect();
    assert!(typed.untypeable.contains(&'é') && typed.untypeable.contains(&'ö'), "{typed:?}");
    assert_eq!(typed.typed, on_us.chars().count());
    let expected: Vec<i64> = on_us.chars().flat_map(|c| {
        let keysym = i64::from(cowork::desktop::keysym::keysym_for(c).unwrap());
        [keysym, -keysym]
    }).collect();
    assert!(eventually(Duration::from_secs(5), || seen() == expected), "GNOME Shell saw {:?}, not {expected:?}", seen());
    // A line break in a transcript is a space (and the text is trimmed): dictation never submits.
    cowork::desktop::gnome::type_text_on(&conn, &us, &cowork::audio::dictate::typeable(" ok\nno")).unwrap();
    let mut more = expected.clone();
    more.extend("ok no".chars().flat_map(|c| [i64::from(c as u32), -i64::from(c as u32)]));
    assert!(eventually(Duration::from_secs(5), || seen() == more), "{:?}", seen());
    // Each session was for its dictation only: none is left open (GNOME's sharing indicator goes).
    let sessions = || {
        let reply = conn
            .call_method(Some("org.gnome.Mutter.RemoteDesktop"), "/org/gnome/Mutter/RemoteDesktop/Session", Some("org.freedesktop.DBus.Introspectable"), "Introspect", &())
            .unwrap();
        reply.body().deserialize::<String>().unwrap().matches("<node name=").count()
    };
    assert!(eventually(Duration::from_secs(3), || sessions() == 0), "{} sessions left open", sessions());
}

/// GNOME: cowork's notifications go to GNOME Shell's own notification
/// server; an approval shows with its Accept action, and Accept in GNOME
/// Shell's banner approves that call in cowork.
#[test]
fn on_gnome_notifications_show_in_gnome_shell_and_its_accept_approves_the_call() {
    use cowork::automations::flow::NotifyTier;
    use cowork::automations::steps::{Notice, NoticeAction, Notifier};
    if !require(Compositor::gnome_available(), "gnome-shell, weston-terminal, dbus-daemon, unshare and gsettings") {
        return;
    }
    let mut gnome = Compositor::gnome();
    let data = super::support::temp_dir();
    let db = data.path().join("cowork.db");
    drop(store::open_writer(&db).unwrap());
    let policy = cowork::notify::gate::Policy { cooldown_millis: 0, bundle_millis: 0, ..Default::default() };
    let config = cowork::notify::NotifyConfig { store: super::support::store_link(&db), bus: gnome.bus.clone(), policy };
    let (approved_tx, approved) = crossbeam_channel::bounded(8);
    let (mut worker, client) = super::notify::spawn_worker(config, approved_tx);
    let notice = Notice {
        source: "approval".into(),
        tier: NotifyTier::Urgent,
        title: "\"tidy\" waits for your approval".into(),
        body: "delete 3 files in Downloads".into(),
        action: NoticeAction::Approve { call_id: 42 },
        why: String::new(),
    };
    // GNOME Shell serves org.freedesktop.Notifications through its small gjs helper, which
    // the session bus starts on first use (this test's bus starts nothing: it is started here).
    gnome.spawn("gjs", &["/usr/share/gnome-shell/org.gnome.Shell.Notifications"]);
    assert!(
        eventually(Duration::from_secs(10), || super::support::bus_name_owned(gnome.bus.as_deref().unwrap(), "org.freedesktop.Notifications")),
        "GNOME Shell's notification service did not start"
    );
    let id = client.post(notice).unwrap();
    assert!(eventually(Duration::from_secs(10), || super::notify::state(&db, id).0 == "shown"), "{:?}", super::notify::state(&db, id));
    let shown = || {
        gnome.shell_eval(
            "imports.ui.main.messageTray.getSources().flatMap(s => s.notifications.map(n => ({title: n.title, body: n.bannerBodyText, actions: (n.actions || []).map(a => a.label)})))",
        )
    };
    let mut last = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            last = shown();
            last.as_ref().and_then(|v| v.as_array()).is_some_and(|list| list.iter().any(|n| n["title"] == "\"tidy\" waits for your approval"))
        }),
        "GNOME Shell shows: {last:?}"
    );
    let shown_one = last.unwrap().as_array().unwrap().iter().find(|n| n["title"] == "\"tidy\" waits for your approval").cloned().unwrap();
    assert_eq!(shown_one["body"], "delete 3 files in Downloads");
    assert!(shown_one["actions"].as_array().unwrap().iter().any(|a| a == "Accept"), "{shown_one}");
    // The user clicks Accept in GNOME Shell's banner.
    let clicked = gnome.shell_eval(
        "(() => { for (const s of imports.ui.main.messageTray.getSources()) for (const n of s.notifications) for (const a of (n.actions || [])) \
         if (a.label === 'Accept') { a.callback(); return true; } return false; })()",
    );
    assert_eq!(clicked, Some(serde_json::Value::Bool(true)));
    assert_eq!(approved.recv_timeout(Duration::from_secs(5)).ok(), Some(42), "Accept in GNOME Shell approved call 42");
    assert!(eventually(Duration::from_secs(5), || super::notify::state(&db, id).0 == "accepted"));
    assert!(worker.shutdown(cowork::notify::NotifyCommand::Shutdown, Duration::from_secs(5)));
}

#[test]
fn on_gnome_the_screen_stream_reads_the_focused_window_alone_through_the_extension_and_never_an_excluded_one() {
    if !require(Compositor::gnome_available(), "gnome-shell, weston-terminal, dbus-daemon, unshare and gsettings") {
        return;
    }
    if !require(cowork::ocr::status().is_ok(), "Tesseract (libtesseract5 and tesseract-ocr-eng)") {
        return;
    }
    let mut gnome = Compositor::gnome();
    let (data, db) = capturing_data_dir(&[("privacy.denied_titles", "(?i)private notes"), ("capture.screen.enabled", "true"), ("capture.screen.consented", "true")]);
    let screen = doctor_check(&gnome, data.path(), "screen text");
    assert!(screen.0 == "ok" && screen.1.contains("GNOME Shell extension"), "{screen:?}");
    for (title, text) in [("Private notes", "SECRET-PIN 90210 Lighthouse"), ("deploy notes", "Ticket ENG-4471 assigned to Dana Whitfield")] {
        gnome.terminal_showing(title, text);
        assert!(eventually(Duration::from_secs(15), || gnome.gnome_windows().0.iter().any(|w| w["title"] == title)), "{title}: {:?}", gnome.gnome_windows());
    }
    let capture = ChildGuard(gnome.cowork(data.path()).args(["capture", "run"]).spawn().unwrap());
    let rows = || store::open_read_only(&db).ok().and_then(|c| cowork::capture::screen_texts::seen_between(&c, 0, i64::MAX, 100).ok()).unwrap_or_default();
    assert!(gnome.gnome_focus("Private notes"));
    std::thread::sleep(Duration::from_secs(3));
    assert!(gnome.gnome_focus("deploy notes"));
    assert!(eventually(Duration::from_secs(20), || rows().iter().any(|r| r.title == "deploy notes" && r.text.contains("Whitfield"))), "{:?}\n{}", rows(), gnome.gnome_log());
    // Another program on the bus cannot have the extension read a window.
    let refused = bus(&gnome).call_method(Some("org.gnome.Shell"), "/org/cowork/Desktop", Some("org.cowork.Desktop1"), "ReadFocused", &("deploy notes", 0u32));
    let err = refused.expect_err("refused").to_string();
    assert!(err.contains("NotCowork"), "{err}");
    stop(capture);
    // `cowork ocr --focused` (the screenshot tool's way on Wayland): through the extension.
    let out = gnome.cowork(data.path()).args(["ocr", "--focused", "--json"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && said.contains("Whitfield"), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(gnome.gnome_focus("Private notes"));
    let out = gnome.cowork(data.path()).args(["ocr", "--focused", "--json"]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("is not read"), "{}", String::from_utf8_lossy(&out.stderr));
    let all = rows();
    eprintln!("kept: {all:?}");
    assert!(all.iter().all(|r| r.title == "deploy notes" && !r.text.contains("90210") && !r.text.contains("Lighthouse")), "{all:?}");
    assert_eq!(all[0].method, cowork::capture::screen_texts::Method::Ocr);
}
