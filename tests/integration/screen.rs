//! What is on the screen (issue 57) against real X11 windows (Xvfb, openbox,
//! xterm drawing DejaVu Sans Mono as a desktop terminal does): a window's
//! text is read by OCR from its own pixels within 3 % character error at 100 %
//! and 150 % text size; a window the privacy rules exclude, or any window
//! while capture is paused, is refused without a single pixel read (counted);
//! and an always-on-top window over the one read is covered, never read. The
//! `screenshot` tool takes the focused window, a window or the screen, and
//! refuses the screen while an excluded window is on it.

use std::time::Duration;

use cowork::capture::firewall::Rules;
use cowork::capture::screen::{ScreenError, read_x11_window};
use cowork::desktop::x11_pixels::{LAST_READ, READS};
use cowork::ocr::{Ocr, character_error_rate};
use cowork::tools::desktop::{Shot, screenshot};

use super::support::{XSession, eventually, have_program, require, temp_dir};

const SHOWN: &str = "Build failed: error[E0308] in src/main.rs:42\nexpected u32, found String\nTicket ENG-4471 assigned to Dana Whitfield\nDeploy window closes Friday at 17:30";

/// An xterm showing `file` (and what is added to it) in DejaVu Sans Mono at `size` points; its window id.
fn terminal(x: &mut XSession, title: &str, size: &str, geometry: &str, file: &std::path::Path) -> u32 {
    x.spawn("xterm", &["-T", title, "-fa", "DejaVu Sans Mono", "-fs", size, "-geometry", geometry, "-e", "tail", "-n", "+1", "-f", &file.display().to_string()], None);
    x.wait_window(&format!("^{title}$"), Duration::from_secs(10)).parse().unwrap()
}

#[test]
fn a_windows_text_is_read_by_ocr_and_an_excluded_or_covering_window_is_never_read() {
    if !require(XSession::available() && have_program("xterm") && have_program("wmctrl"), "Xvfb, openbox, xdotool, xterm and wmctrl") {
        return;
    }
    if !require(cowork::ocr::status().is_ok(), "Tesseract (libtesseract5 and tesseract-ocr-eng)") {
        return;
    }
    let mut x = XSession::start();
    let dir = temp_dir();
    let shown = dir.path().join("shown.txt");
    std::fs::write(&shown, SHOWN).unwrap();
    let mut ocr = Ocr::for_user().unwrap();
    let display = x.display.clone();
    for (title, size) in [("cowork screen at 100", "11"), ("cowork screen at 150", "16.5")] {
        let window = terminal(&mut x, title, size, "60x8+40+40", &shown);
        x.activate(&window.to_string());
        std::thread::sleep(Duration::from_millis(700));
        let read = read_x11_window(Some(display.as_str()), None, &Rules::default(), 600, &mut ocr).unwrap();
        assert_eq!(read.window.window_id, window);
        let cer = character_error_rate(&read.text, SHOWN);
        eprintln!("{title}: {} × {} pixels, capture {:?}, OCR {:?}, CER {cer:.4}", read.picture.width(), read.picture.height(), read.capture, read.ocr);
        assert!(cer <= 0.03, "{title}: character error rate {cer:.3}: {:?}", read.text);
        // By id too, as `cowork ocr --window` asks.
        assert_eq!(read_x11_window(Some(display.as_str()), Some(window), &Rules::default(), 600, &mut ocr).unwrap().window.window_id, window);
    }

    // Excluded by a title rule, paused, in quiet hours: refused, and not one pixel read.
    let private = x.open_xterm("Private notes");
    x.activate(&private);
    let rules = Rules { denied_titles: vec![regex::Regex::new("(?i)private notes").unwrap()], ..Rules::default() };
    let paused = Rules { paused: true, ..Rules::default() };
    let quiet = Rules { quiet_hours: vec![(540, 720)], ..Rules::default() };
    for (what, rules, window) in [("title rule", &rules, None), ("title rule, asked by id", &rules, Some(private.parse().unwrap())), ("paused", &paused, None), ("quiet hours", &quiet, None)] {
        let before = READS.load(std::sync::atomic::Ordering::SeqCst);
        let refused = read_x11_window(Some(display.as_str()), window, rules, 600, &mut ocr).unwrap_err();
        assert!(matches!(refused, ScreenError::Withheld { .. }), "{what}: {refused}");
        assert_eq!(READS.load(std::sync::atomic::Ordering::SeqCst), before, "{what}: a pixel was read");
        assert_ne!(LAST_READ.load(std::sync::atomic::Ordering::SeqCst), private.parse::<u32>().unwrap(), "{what}");
    }

    // An always-on-top window over the one read: its pixels are covered, its text never read.
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "OVERLAY SECRET 90210\nOVERLAY SECRET 90210").unwrap();
    let base = terminal(&mut x, "cowork screen base", "11", "60x10+40+300", &shown);
    let over = terminal(&mut x, "cowork screen over", "11", "30x3+120+330", &secret);
    // The window manager lists a new window a moment after it is mapped (later on a loaded machine): asked until it has.
    let above = eventually(Duration::from_secs(10), || {
        std::process::Command::new("wmctrl").args(["-r", "cowork screen over", "-b", "add,above"]).env("DISPLAY", &display).status().is_ok_and(|s| s.success())
    });
    assert!(above, "wmctrl kept the window above");
    x.activate(&base.to_string());
    std::thread::sleep(Duration::from_millis(700));
    let read = read_x11_window(Some(display.as_str()), None, &Rules::default(), 600, &mut ocr).unwrap();
    assert_eq!(read.window.window_id, base);
    assert!(!read.text.contains("90210") && !read.text.to_ascii_uppercase().contains("SECRET"), "the covering window was read: {:?}", read.text);
    let over_rect = x11_rect(&display, over);
    let base_rect = x11_rect(&display, base);
    let (cx, cy) = (over_rect.x + over_rect.width as i32 / 2 - base_rect.x, over_rect.y + over_rect.height as i32 / 2 - base_rect.y);
    assert_eq!(read.picture.get_pixel(cx as u32, cy as u32).0, [128, 128, 128, 255], "the covering window's middle is covered");
    // Its window manager's frame too (the title bar names what the window shows).
    let top = frame_top(&display, over);
    assert!(top > 0, "openbox gives the window a title bar");
    let (tx, ty) = (over_rect.x + 4 - base_rect.x, over_rect.y - top as i32 / 2 - base_rect.y);
    assert!(ty > 0, "the title bar lies over the base window");
    assert_eq!(read.picture.get_pixel(tx as u32, ty as u32).0, [128, 128, 128, 255], "the covering window's title bar is covered");
    // An unmanaged window over it (a menu, a tooltip, another app's notification bubble): covered too.
    {
        use x11rb::connection::Connection as _;
        use x11rb::protocol::xproto::{ConnectionExt as _, CreateWindowAux, WindowClass};
        let (conn, screen_number) = x11rb::connect(Some(display.as_str())).unwrap();
        let screen = &conn.setup().roots[screen_number];
        let popup = conn.generate_id().unwrap();
        let (px, py) = (base_rect.x + 10, base_rect.y + base_rect.height as i32 - 40);
        conn.create_window(0, popup, screen.root, px as i16, py as i16, 120, 30, 0, WindowClass::INPUT_OUTPUT, 0, &CreateWindowAux::new().override_redirect(1).background_pixel(screen.black_pixel))
            .unwrap();
        conn.map_window(popup).unwrap();
        conn.flush().unwrap();
        std::thread::sleep(Duration::from_millis(400));
        let read = read_x11_window(Some(display.as_str()), None, &Rules::default(), 600, &mut ocr).unwrap();
        assert_eq!(read.picture.get_pixel((px + 60 - base_rect.x) as u32, (py + 15 - base_rect.y) as u32).0, [128, 128, 128, 255], "the popup over the window is covered");
        conn.destroy_window(popup).unwrap();
        conn.flush().unwrap();
    }

    // The screenshot tool: the focused window as a PNG of its size; the whole screen is refused
    // while a window the rules exclude is on it, without a pixel read, and read when none is.
    let shot = screenshot(Shot::Focused, Some(display.as_str()), &Rules::default(), 600).unwrap();
    assert_eq!(shot.image.mime, "image/png");
    let decoded = image::load_from_memory(&shot.image.data).unwrap();
    assert_eq!((decoded.width(), decoded.height()), (base_rect.width, base_rect.height), "{}", shot.of);
    assert!(shot.of.contains("cowork screen base"), "{}", shot.of);
    let before = READS.load(std::sync::atomic::Ordering::SeqCst);
    let refused = screenshot(Shot::Screen, Some(display.as_str()), &rules, 600).err().expect("refused");
    assert!(refused.contains("the screen is not read") && refused.contains("Private notes"), "{refused}");
    let refused = screenshot(Shot::Window(private.parse().unwrap()), Some(display.as_str()), &rules, 600).err().expect("refused");
    assert!(refused.contains("Private notes"), "{refused}");
    // Other ids into the same pixels: the root (the whole screen, excluded window and all) and a
    // window inside the excluded app's (it carries no title for the rules to judge) are no windows.
    let (conn, screen_number) = x11rb::connect(Some(display.as_str())).unwrap();
    let root = x11rb::connection::Connection::setup(&conn).roots[screen_number].root;
    let inside = x11rb::protocol::xproto::ConnectionExt::query_tree(&conn, private.parse().unwrap()).unwrap().reply().unwrap().children;
    assert!(!inside.is_empty(), "xterm draws in a window of its own");
    for id in std::iter::once(root).chain(inside) {
        let refused = screenshot(Shot::Window(id), Some(display.as_str()), &rules, 600).err().expect("refused");
        assert!(refused.contains("there is no window"), "{id}: {refused}");
        let refused = read_x11_window(Some(display.as_str()), Some(id), &rules, 600, &mut ocr).unwrap_err();
        assert!(refused.to_string().contains("there is no window"), "{id}: {refused}");
    }
    assert_eq!(READS.load(std::sync::atomic::Ordering::SeqCst), before, "a pixel of an excluded window was read");
    let whole = screenshot(Shot::Screen, Some(display.as_str()), &Rules::default(), 600).unwrap();
    let decoded = image::load_from_memory(&whole.image.data).unwrap();
    assert_eq!((decoded.width(), decoded.height()), (1280, 800));
    assert_eq!(Shot::of(&serde_json::json!({"of": "window"})).unwrap_err(), "a screenshot of a window needs its window_id (list_windows gives them)");

    stream_worker_reads_nothing_it_may_not(&x, private.parse().unwrap(), base, &shown, &rules);
}

/// The screen-text worker judges every read itself, and reads a window only
/// while the desktop still describes it as capture judged it: told of an
/// excluded window, of any window while paused or in quiet hours, of a
/// window renamed since (into a rule), or of one whose password field has the
/// focus, it reads no pixel and asks no accessibility tree; under rules that
/// allow the window, it reads and keeps it.
fn stream_worker_reads_nothing_it_may_not(x: &XSession, private: u32, base: u32, shown: &std::path::Path, rules: &Rules) {
    use cowork::capture::a11y::TREE_READS;
    use cowork::capture::screen_worker::{Focused, ScreenCommand, ScreenPlan, spawn_screen};
    let display = x.display.clone();
    let dir = temp_dir();
    let db = dir.path().join("cowork.db");
    let (sink, _events) = super::support::test_sink();
    let policy = cowork::runtime::RestartPolicy::default();
    let mut store = cowork::workers::spawn_store(db.clone(), sink.clone(), policy).unwrap();
    let plan = ScreenPlan { on: true, ocr: true };
    let secret_pid = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let latest = cowork::capture::screen_worker::ScreenLatest::new(plan, rules.clone());
    let mut screen = spawn_screen(cowork::capture::screen_worker::PixelSource::X11 { display: Some(display.clone()) }, latest, secret_pid.clone(), store.commands.clone(), sink.narrow(), policy).unwrap();
    let desktop = cowork::desktop::x11::X11Desktop::connect(Some(display.as_str())).unwrap();
    let focus = |window: u32| ScreenCommand::Focus(Some(Focused { window: desktop.listed_window(window).unwrap(), session_id: None, handle: None }));
    let counts = || (READS.load(std::sync::atomic::Ordering::SeqCst), TREE_READS.load(std::sync::atomic::Ordering::SeqCst));
    let rows = || cowork::store::open_read_only(&db).and_then(|c| Ok(cowork::capture::screen_texts::seen_between(&c, 0, i64::MAX, 100)?)).unwrap_or_default();
    let paused = Rules { paused: true, ..Rules::default() };
    let quiet = Rules { quiet_hours: vec![(0, 24 * 60)], ..Rules::default() };
    let before = counts();
    screen.commands.send(focus(private)).unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(counts(), before, "the excluded window was read");
    for (what, rules) in [("paused", paused), ("quiet hours", quiet)] {
        screen.commands.send(ScreenCommand::SetRules(rules)).unwrap();
        screen.commands.send(focus(base)).unwrap();
        std::thread::sleep(Duration::from_millis(1_500));
        assert_eq!(counts(), before, "{what}: a window was read");
        screen.commands.send(ScreenCommand::Focus(None)).unwrap();
    }
    // Renamed into the title rule after capture described it: judged by its title now.
    screen.commands.send(ScreenCommand::SetRules(rules.clone())).unwrap();
    let stale = focus(base);
    x.xdotool(&["set_window", "--name", "Private notes (copy)", &base.to_string()]);
    assert!(eventually(Duration::from_secs(5), || desktop.listed_window(base).is_ok_and(|w| w.title == "Private notes (copy)")));
    screen.commands.send(stale).unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(counts(), before, "a window renamed into a rule was read");
    assert!(rows().is_empty(), "{:?}", rows());
    // Allowed again by its title, but a password field of its process has the focus (as the a11y worker follows it): nothing read.
    x.xdotool(&["set_window", "--name", "cowork screen base", &base.to_string()]);
    assert!(eventually(Duration::from_secs(5), || desktop.listed_window(base).is_ok_and(|w| w.title == "cowork screen base")));
    secret_pid.store(desktop.listed_window(base).unwrap().pid.expect("xterm sets _NET_WM_PID"), std::sync::atomic::Ordering::SeqCst);
    screen.commands.send(focus(base)).unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(counts(), before, "a window whose password field has the focus was read");
    // The field loses the focus: read and kept.
    secret_pid.store(0, std::sync::atomic::Ordering::SeqCst);
    screen.commands.send(ScreenCommand::Focus(None)).unwrap();
    screen.commands.send(focus(base)).unwrap();
    assert!(eventually(Duration::from_secs(20), || rows().iter().any(|r| r.title == "cowork screen base" && r.text.contains("expected"))), "{:?}", rows());
    assert!(counts().0 > before.0, "the allowed window's pixels were read");
    // New lines of its log: only the rows that show them go to OCR, and only they are kept.
    let height = x11_rect(&x.display, base).height as u64;
    let ocr_rows = || cowork::capture::screen_worker::OCR_ROWS.load(std::sync::atomic::Ordering::SeqCst);
    let read_before = ocr_rows();
    let mut log = std::fs::OpenOptions::new().append(true).open(shown).unwrap();
    std::io::Write::write_all(&mut log, b"\ncanary healthy in eu-west\nrollback plan zanzibar approved").unwrap();
    assert!(eventually(Duration::from_secs(20), || rows().iter().any(|r| r.text.to_lowercase().contains("zanzibar"))), "{:?}", rows());
    let newest = rows().into_iter().find(|r| r.text.to_lowercase().contains("zanzibar")).unwrap();
    assert!(!newest.text.contains("expected"), "only the new lines are kept: {:?}", newest.text);
    let read = ocr_rows() - read_before;
    assert!(read > 0 && read * 2 <= height, "{read} of the window's {height} rows went to OCR for two new lines");
    assert!(screen.shutdown(ScreenCommand::Shutdown, Duration::from_secs(10)));
    assert!(store.shutdown(cowork::store::StoreCommand::Shutdown, Duration::from_secs(10)));
}

/// The height of the title bar the window manager draws above `window` (`_NET_FRAME_EXTENTS`' top).
fn frame_top(display: &str, window: u32) -> u32 {
    use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _};
    let (conn, _) = x11rb::connect(Some(display)).unwrap();
    let atom = conn.intern_atom(false, b"_NET_FRAME_EXTENTS").unwrap().reply().unwrap().atom;
    let reply = conn.get_property(false, window, atom, AtomEnum::CARDINAL, 0, 4).unwrap().reply().unwrap();
    reply.value32().and_then(|mut v| v.nth(2)).unwrap_or(0)
}

fn x11_rect(display: &str, window: u32) -> cowork::desktop::x11_pixels::Rect {
    let (conn, screen) = x11rb::connect(Some(display)).unwrap();
    let root = x11rb::connection::Connection::setup(&conn).roots[screen].root;
    cowork::desktop::x11_pixels::rect_of(&conn, root, window).unwrap()
}
