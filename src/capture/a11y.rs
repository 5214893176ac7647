//! The accessibility tree over AT-SPI (D-Bus, zbus): the URL in a browser's
//! address bar, and whether keyboard focus is in a password field.
//!
//! AT-SPI lives on its own bus, whose address the session bus's `org.a11y.Bus`
//! hands out. Browsers register there only when desktop accessibility
//! (`org.a11y.Status.IsEnabled`) was on as they started — GTK apps always do —
//! and Chromium builds the tree of its own window (the address bar) only with
//! `--force-renderer-accessibility` (or for a screen reader it detects);
//! Firefox with accessibility on. A fresh desktop has desktop accessibility
//! off; the `a11y` worker turns it on while cowork runs (Settings → Privacy
//! rules). Otherwise capture falls back to what the title allows
//! (`url_from_title`) and records which source it used.

use std::collections::HashMap;
use std::time::Duration;

use serde::de::DeserializeOwned;
use zbus::blocking::Connection;
use zbus::blocking::connection::Builder;
use zbus::zvariant::{DynamicType, OwnedObjectPath, OwnedValue, Type};

/// AT-SPI roles (`AtspiRole`) cowork looks for.
pub const ROLE_FRAME: u32 = 23;
pub const ROLE_PASSWORD_TEXT: u32 = 40;
pub const ROLE_ENTRY: u32 = 79;
/// A terminal's text is what programs print as much as what was typed.
pub const ROLE_TERMINAL: u32 = 60;
/// The bit of `GetState`'s first word that says a text can be edited.
pub const STATE_EDITABLE: u32 = 7;
pub const ROLE_DOCUMENT_WEB: u32 = 95;

/// How long one AT-SPI call may take before the app is considered unresponsive.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);
/// At most this many accessibles are visited looking for an address bar.
const MAX_VISITS: usize = 600;
/// Accessible names browsers give their address bar.
const ADDRESS_BAR_NAMES: &[&str] = &["address and search bar", "search or enter address", "search with google or enter address"];

/// States cowork reads (`AtspiStateType`): keyboard focus, and on screen now.
const STATE_ACTIVE: u32 = 1;
const STATE_FOCUSED: u32 = 12;
const STATE_SHOWING: u32 = 25;
/// Subtrees a window's text leaves out: menus (closed ones are not on screen
/// anyway), scroll bars, tool tips, separators — and password fields, whose
/// text is never asked for.
const SKIPPED_ROLES: &[u32] = &[33, 34, 41, 48, 64, 50, ROLE_PASSWORD_TEXT];
/// Roles whose name is what the user reads when they hold no text of their
/// own: labels, buttons, headings, tabs, cells, list and tree items, links,
/// status bars, alerts, notifications, column headers.
const NAMED_ROLES: &[u32] = &[2, 7, 10, 29, 32, 37, 43, 44, 54, 56, 57, 62, 81, 83, 88, 91, 101, 102, 116];
/// A window's text is gathered from at most this many accessibles…
pub const MAX_TREE_NODES: usize = 1_500;
/// …within this time (a large web page is read in part, and says so).
pub const TREE_BUDGET: Duration = Duration::from_millis(1_200);
/// At most this much text is asked of one accessible…
pub const MAX_NODE_CHARS: usize = 32_000;
/// …and of one window (its text is then cut to what the stream keeps).
pub const MAX_WINDOW_CHARS: usize = 64_000;
/// An application's frames looked through for the window.
const MAX_FRAMES: usize = 64;
/// A terminal's text is its last lines (what is on screen, not the scrollback).
const TERMINAL_LINES: usize = 80;
/// The object replacement character: a hypertext's embedded child.
const EMBEDDED: char = '\u{FFFC}';

/// How many times a window's accessibility tree was asked for its text (the
/// firewall's test counts them: an excluded window is never asked).
pub static TREE_READS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A window's text as its accessibility tree gives it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeText {
    pub text: String,
    /// Accessibles visited.
    pub nodes: usize,
    /// Keyboard focus is in a password field: nothing was read.
    pub secret_focused: bool,
    /// The whole tree was read (not cut by `MAX_TREE_NODES` or `TREE_BUDGET`).
    pub complete: bool,
}

/// One accessible of a window as the structure pass found it.
struct Visited {
    node: Node,
    role: u32,
    /// Its children in order; None for one not read (hidden, skipped, or
    /// not saying what it is), which still holds its place.
    children: Vec<Option<usize>>,
}

/// WM_CLASS values of browsers whose URL capture looks for.
pub fn is_browser(app: &str) -> bool {
    let app = app.to_lowercase();
    ["chromium", "chrome", "firefox", "brave", "vivaldi", "microsoft-edge", "opera", "librewolf", "floorp", "waterfox", "navigator", "epiphany"]
        .iter()
        .any(|b| app.contains(b))
}

/// What a browser's title allows: a URL or bare host the page put in its title
/// (pages without a `<title>` show their address), after the browser's suffix.
pub fn url_from_title(title: &str) -> Option<String> {
    let page = strip_browser_suffix(title);
    if let Some(start) = page.find("http://").or_else(|| page.find("https://")) {
        let url = page[start..].split_whitespace().next()?;
        return Some(url.trim_end_matches([')', ']', ',', '.']).to_owned());
    }
    let candidate = page.trim();
    looks_like_address(candidate).then(|| candidate.to_owned())
}

fn strip_browser_suffix(title: &str) -> &str {
    for separator in [" - ", " — ", " – "] {
        if let Some((page, browser)) = title.rsplit_once(separator)
            && is_browser(&browser.replace(' ', "-"))
        {
            return page;
        }
    }
    title
}

/// `example.com`, `example.com/path`, `127.0.0.1:8080/x`: one token, a dotted host, no spaces.
fn looks_like_address(text: &str) -> bool {
    if text.is_empty() || text.contains(char::is_whitespace) {
        return false;
    }
    let host = text.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once(':').filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit())).map_or(host, |(h, _)| h);
    let labels: Vec<&str> = host.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        && labels.last().is_some_and(|tld| tld.chars().all(|c| c.is_ascii_digit()) || (tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic())))
}

/// One accessible: the application's bus name and the object path.
pub type Node = (String, OwnedObjectPath);

/// Whether desktop accessibility is on: `IsEnabled` of the session bus's
/// `org.a11y.Bus`. at-spi-bus-launcher keeps it in GSettings
/// (`org.gnome.desktop.interface toolkit-accessibility`), so it outlives the
/// session: one machine has it on from an earlier screen reader, another never had.
pub fn desktop_accessibility(session: &Connection) -> zbus::Result<bool> {
    let reply = session.call_method(
        Some("org.a11y.Bus"),
        "/org/a11y/bus",
        Some("org.freedesktop.DBus.Properties"),
        "Get",
        &("org.a11y.Status", "IsEnabled"),
    )?;
    let value: OwnedValue = reply.body().deserialize()?;
    bool::try_from(value).map_err(zbus::Error::from)
}

/// Switches desktop accessibility on or off (as a screen reader does).
pub fn set_desktop_accessibility(session: &Connection, on: bool) -> zbus::Result<()> {
    session.call_method(
        Some("org.a11y.Bus"),
        "/org/a11y/bus",
        Some("org.freedesktop.DBus.Properties"),
        "Set",
        &("org.a11y.Status", "IsEnabled", zbus::zvariant::Value::from(on)),
    )?;
    Ok(())
}

/// A connection to the accessibility bus (and to the session bus that hands it out).
pub struct A11yBus {
    session: Connection,
    conn: Connection,
    /// Address bars found before, per process: re-reading one costs a single call.
    address_bars: HashMap<u32, Node>,
}

impl A11yBus {
    /// Asks the session bus where the accessibility bus is and connects to it.
    pub fn connect() -> anyhow::Result<Self> {
        let session = Builder::session()
            .and_then(|b| b.method_timeout(CALL_TIMEOUT).build())
            .map_err(|err| anyhow::anyhow!("no D-Bus session bus ({err})"))?;
        let reply = session
            .call_method(Some("org.a11y.Bus"), "/org/a11y/bus", Some("org.a11y.Bus"), "GetAddress", &())
            .map_err(|err| anyhow::anyhow!("no accessibility bus (is at-spi2-core installed?): {err}"))?;
        let address: String = reply.body().deserialize()?;
        let conn = Builder::address(address.as_str())?
            .method_timeout(CALL_TIMEOUT)
            .build()
            .map_err(|err| anyhow::anyhow!("cannot connect to the accessibility bus at {address}: {err}"))?;
        Ok(Self { session, conn, address_bars: HashMap::new() })
    }

    /// The accessibility bus.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The session bus, where desktop accessibility is switched.
    pub fn session(&self) -> &Connection {
        &self.session
    }

    fn call<B, R>(&self, node: &Node, interface: &str, method: &str, body: &B) -> zbus::Result<R>
    where
        B: serde::Serialize + DynamicType,
        R: DeserializeOwned + Type,
    {
        let reply = self.conn.call_method(Some(node.0.as_str()), node.1.as_str(), Some(interface), method, body)?;
        reply.body().deserialize()
    }

    pub fn children(&self, node: &Node) -> zbus::Result<Vec<Node>> {
        self.call(node, "org.a11y.atspi.Accessible", "GetChildren", &())
    }

    pub fn role(&self, node: &Node) -> zbus::Result<u32> {
        self.call(node, "org.a11y.atspi.Accessible", "GetRole", &())
    }

    pub fn name(&self, node: &Node) -> zbus::Result<String> {
        let value: OwnedValue = self.call(node, "org.freedesktop.DBus.Properties", "Get", &("org.a11y.atspi.Accessible", "Name"))?;
        String::try_from(value).map_err(zbus::Error::from)
    }

    pub fn text(&self, node: &Node) -> zbus::Result<String> {
        self.call(node, "org.a11y.atspi.Text", "GetText", &(0i32, -1i32))
    }

    /// At most `MAX_NODE_CHARS` of an accessible's text: its start, or for a
    /// terminal (`tail`) its end, where the screen is — never the whole of a
    /// huge buffer an app offers.
    pub fn bounded_text(&self, node: &Node, tail: bool) -> zbus::Result<String> {
        let max = MAX_NODE_CHARS as i32;
        let text: String = if tail {
            let value: OwnedValue = self.call(node, "org.freedesktop.DBus.Properties", "Get", &("org.a11y.atspi.Text", "CharacterCount"))?;
            let count = i32::try_from(value).map_err(zbus::Error::from)?.max(0);
            self.call(node, "org.a11y.atspi.Text", "GetText", &(count.saturating_sub(max), count))?
        } else {
            self.call(node, "org.a11y.atspi.Text", "GetText", &(0i32, max))?
        };
        // An app may send more than asked: what is kept is cut here.
        Ok(if text.len() > MAX_NODE_CHARS * 4 || text.chars().count() > MAX_NODE_CHARS {
            if tail { text.chars().rev().take(MAX_NODE_CHARS).collect::<Vec<_>>().into_iter().rev().collect() } else { text.chars().take(MAX_NODE_CHARS).collect() }
        } else {
            text
        })
    }

    /// The accessible application of process `pid`, if it exposes one.
    fn application(&self, pid: u32) -> zbus::Result<Option<Node>> {
        let root: Node = ("org.a11y.atspi.Registry".into(), OwnedObjectPath::try_from("/org/a11y/atspi/accessible/root")?);
        let bus: Node = ("org.freedesktop.DBus".into(), OwnedObjectPath::try_from("/org/freedesktop/DBus")?);
        for app in self.children(&root)? {
            let owner: zbus::Result<u32> = self.call(&bus, "org.freedesktop.DBus", "GetConnectionUnixProcessID", &(app.0.as_str(),));
            if owner.is_ok_and(|p| p == pid) {
                return Ok(Some(app));
            }
        }
        Ok(None)
    }

    /// The process whose accessible application has a frame titled `title`
    /// (Wayland compositors without IPC give no pid; the title stands in).
    /// None when no frame, or more than one process's frame, has that title.
    pub fn pid_of_frame(&self, title: &str) -> zbus::Result<Option<u32>> {
        let root: Node = ("org.a11y.atspi.Registry".into(), OwnedObjectPath::try_from("/org/a11y/atspi/accessible/root")?);
        let bus: Node = ("org.freedesktop.DBus".into(), OwnedObjectPath::try_from("/org/freedesktop/DBus")?);
        let mut found = None;
        for app in self.children(&root)? {
            let frames = self.children(&app).unwrap_or_default();
            if frames.iter().any(|frame| self.name(frame).is_ok_and(|name| name == title)) {
                let pid: u32 = self.call(&bus, "org.freedesktop.DBus", "GetConnectionUnixProcessID", &(app.0.as_str(),))?;
                if found.is_some_and(|other| other != pid) {
                    return Ok(None);
                }
                found = Some(pid);
            }
        }
        Ok(found)
    }

    /// The text of the address bar in the window of process `pid` titled `title`.
    /// `Ok(None)`: the browser exposes no address bar (accessibility off).
    pub fn address_bar_url(&mut self, pid: u32, title: &str) -> zbus::Result<Option<String>> {
        if let Some(node) = self.address_bars.get(&pid).cloned() {
            match self.text(&node) {
                Ok(text) if !text.is_empty() => return Ok(Some(text)),
                _ => {
                    self.address_bars.remove(&pid);
                }
            }
        }
        let Some(app) = self.application(pid)? else { return Ok(None) };
        let frames = self.children(&app)?;
        // The frame whose name is the window title; others (other windows) after it.
        let mut ordered = Vec::with_capacity(frames.len());
        for frame in frames {
            if self.name(&frame).is_ok_and(|name| name == title) {
                ordered.insert(0, frame);
            } else {
                ordered.push(frame);
            }
        }
        let Some(frame) = ordered.into_iter().next() else { return Ok(None) };
        let Some(bar) = self.find_address_bar(frame)? else { return Ok(None) };
        let text = self.text(&bar)?;
        self.address_bars.insert(pid, bar);
        Ok((!text.is_empty()).then_some(text))
    }

    /// Breadth-first search for an entry named like an address bar; web
    /// content (documents) is not entered.
    fn find_address_bar(&self, frame: Node) -> zbus::Result<Option<Node>> {
        let mut queue = std::collections::VecDeque::from([frame]);
        let mut visits = 0;
        while let Some(node) = queue.pop_front() {
            visits += 1;
            if visits > MAX_VISITS {
                break;
            }
            let role = self.role(&node).unwrap_or(0);
            if role == ROLE_DOCUMENT_WEB {
                continue;
            }
            if role == ROLE_ENTRY {
                let name = self.name(&node).unwrap_or_default().to_lowercase();
                if ADDRESS_BAR_NAMES.iter().any(|n| name.contains(n)) {
                    return Ok(Some(node));
                }
            }
            queue.extend(self.children(&node).unwrap_or_default());
        }
        Ok(None)
    }

    /// The frame of process `pid` named `title` (the window capture judged),
    /// or the app's only frame while it is the active one; None when the app
    /// exposes none, or several could be it, or it has too many frames to
    /// look through in time.
    fn frame_of(&self, pid: u32, title: &str, started: std::time::Instant) -> zbus::Result<Option<Node>> {
        let Some(app) = self.application(pid)? else { return Ok(None) };
        let frames = self.children(&app)?;
        let mut named = None;
        for frame in frames.iter().take(MAX_FRAMES) {
            if started.elapsed() > TREE_BUDGET {
                return Ok(None);
            }
            if self.name(frame).is_ok_and(|name| name == title) {
                if named.is_some() {
                    return Ok(None);
                }
                named = Some(frame.clone());
            }
        }
        // A window whose accessible is named otherwise (a GTK message dialog is named by its
        // message): the app's only window, and only while it is the active one.
        if named.is_none()
            && let [only] = frames.as_slice()
            && self.states(only).is_ok_and(|states| states.first().is_some_and(|word| word & (1 << STATE_ACTIVE) != 0))
        {
            named = Some(only.clone());
        }
        Ok(named)
    }

    /// The text on screen in the window of process `pid` titled `title`:
    /// first its structure (roles, states, children of what is showing),
    /// and only when keyboard focus is not in a password field, the text of
    /// its accessibles in reading order (a hypertext's embedded children in
    /// their places). `Ok(None)`: the app exposes no such window.
    pub fn window_text(&self, pid: u32, title: &str) -> zbus::Result<Option<TreeText>> {
        TREE_READS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let started = std::time::Instant::now();
        let Some(frame) = self.frame_of(pid, title, started)? else { return Ok(None) };
        let mut nodes = vec![Visited { node: frame, role: ROLE_FRAME, children: Vec::new() }];
        let mut queue = std::collections::VecDeque::from([0usize]);
        let mut complete = true;
        'walk: while let Some(at) = queue.pop_front() {
            for child in self.children(&nodes[at].node).unwrap_or_default() {
                // An app that answers slowly or holds a huge tree is read in part.
                if nodes.len() >= MAX_TREE_NODES || started.elapsed() > TREE_BUDGET {
                    complete = false;
                    break 'walk;
                }
                // What does not say its role and state is not read (a password field must not slip by).
                let (Ok(role), Ok(states)) = (self.role(&child), self.states(&child)) else {
                    nodes[at].children.push(None);
                    continue;
                };
                let state = |bit: u32| states.first().is_some_and(|word| word & (1 << bit) != 0);
                if role == ROLE_PASSWORD_TEXT && state(STATE_FOCUSED) {
                    return Ok(Some(TreeText { nodes: nodes.len(), secret_focused: true, ..TreeText::default() }));
                }
                if !state(STATE_SHOWING) || SKIPPED_ROLES.contains(&role) {
                    // It keeps its place among a hypertext's embedded children.
                    nodes[at].children.push(None);
                    continue;
                }
                nodes.push(Visited { node: child, role, children: Vec::new() });
                let index = nodes.len() - 1;
                nodes[at].children.push(Some(index));
                queue.push_back(index);
            }
        }
        // The texts within twice the budget and up to `MAX_WINDOW_CHARS`: an app slow to answer or full of text is read in part.
        let mut total = 0;
        let texts: Vec<Option<String>> = nodes
            .iter()
            .map(|v| {
                if started.elapsed() > 2 * TREE_BUDGET || total > MAX_WINDOW_CHARS {
                    complete = false;
                    return None;
                }
                let own = self.bounded_text(&v.node, v.role == ROLE_TERMINAL).ok().filter(|t| !t.trim().is_empty());
                let text = match own {
                    Some(text) if v.role == ROLE_TERMINAL => Some(last_lines(&text, TERMINAL_LINES)),
                    Some(text) => Some(text),
                    None if NAMED_ROLES.contains(&v.role) => self.name(&v.node).ok().filter(|n| !n.trim().is_empty()).map(|n| n.chars().take(MAX_NODE_CHARS).collect()),
                    None => None,
                };
                total += text.as_ref().map_or(0, String::len);
                text
            })
            .collect();
        let mut out = String::new();
        render(&nodes, &texts, 0, &mut out);
        Ok(Some(TreeText { text: tidy(&out), nodes: nodes.len(), secret_focused: false, complete }))
    }

    /// The accessible's states as AT-SPI's two 32-bit words.
    pub fn states(&self, node: &Node) -> zbus::Result<Vec<u32>> {
        self.call(node, "org.a11y.atspi.Accessible", "GetState", &())
    }

    /// Subscribes to text inserted into fields (the typing stream on Wayland).
    pub fn register_text_events(&self) -> zbus::Result<()> {
        let registry: Node = ("org.a11y.atspi.Registry".into(), OwnedObjectPath::try_from("/org/a11y/atspi/registry")?);
        self.call::<_, ()>(&registry, "org.a11y.atspi.Registry", "RegisterEvent", &("object:text-changed:insert", Vec::<String>::new(), ""))
    }

    /// Subscribes to focus changes, so applications start sending them.
    pub fn register_focus_events(&self) -> zbus::Result<()> {
        let registry: Node = ("org.a11y.atspi.Registry".into(), OwnedObjectPath::try_from("/org/a11y/atspi/registry")?);
        self.call::<_, ()>(&registry, "org.a11y.atspi.Registry", "RegisterEvent", &("object:state-changed:focused", Vec::<String>::new(), ""))
    }
}

/// Node `at` and what is under it, a block per accessible with text; a
/// hypertext's embedded children are put where their characters stand.
fn render(nodes: &[Visited], texts: &[Option<String>], at: usize, out: &mut String) {
    let children = &nodes[at].children;
    match &texts[at] {
        Some(text) if text.contains(EMBEDDED) => {
            let mut next = children.iter();
            let mut line = String::new();
            for piece in text.split_inclusive(EMBEDDED) {
                line.push_str(piece.trim_end_matches(EMBEDDED));
                if piece.ends_with(EMBEDDED)
                    && let Some(&Some(child)) = next.next()
                {
                    let mut inner = String::new();
                    render(nodes, texts, child, &mut inner);
                    line.push_str(inner.trim());
                }
            }
            block(out, &line);
            for &child in next.flatten() {
                render(nodes, texts, child, out);
            }
        }
        own => {
            if let Some(text) = own {
                block(out, text);
            }
            for &child in children.iter().flatten() {
                render(nodes, texts, child, out);
            }
        }
    }
}

fn block(out: &mut String, text: &str) {
    if text.trim().is_empty() {
        return;
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(text);
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Lines trimmed, runs of blank lines made one, stray embedded characters dropped.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for line in text.lines().map(|l| l.replace(EMBEDDED, "")) {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank { "\n\n" } else { "\n" });
        }
        out.push_str(line);
        blank = false;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_come_out_of_titles_only_when_the_title_holds_one() {
        assert_eq!(url_from_title("127.0.0.1:8765/page/plan.html - Chromium").as_deref(), Some("127.0.0.1:8765/page/plan.html"));
        assert_eq!(url_from_title("example.com — Mozilla Firefox").as_deref(), Some("example.com"));
        assert_eq!(
            url_from_title("Docs (https://docs.example.org/a?b=1) - Google Chrome").as_deref(),
            Some("https://docs.example.org/a?b=1")
        );
        assert_eq!(url_from_title("Quarterly plan - Chromium"), None);
        assert_eq!(url_from_title("v1.2 release notes - Chromium"), None);
        assert_eq!(url_from_title("README.md - Chromium"), Some("README.md".into()), "a title can look like a host");
    }

    #[test]
    fn browsers_are_recognised_by_class() {
        for app in ["Chromium", "Google-chrome", "firefox", "Navigator", "Brave-browser"] {
            assert!(is_browser(app), "{app}");
        }
        assert!(!is_browser("XTerm"));
    }

    #[test]
    fn a_hypertext_has_its_links_in_place_and_blocks_on_their_own_lines() {
        let node = |n: &str| (n.to_owned(), OwnedObjectPath::try_from("/x").unwrap());
        let nodes = vec![
            Visited { node: node("frame"), role: ROLE_FRAME, children: vec![Some(1), Some(3)] },
            // A hidden link (not read) holds the first embedded place; the second is the shown one.
            Visited { node: node("p"), role: 73, children: vec![None, Some(2)] },
            Visited { node: node("a"), role: 88, children: vec![] },
            Visited { node: node("button"), role: 43, children: vec![] },
        ];
        let texts = vec![None, Some(format!("Read{EMBEDDED} the {EMBEDDED} before Friday.")), Some("release notes".into()), Some("Approve".into())];
        let mut out = String::new();
        render(&nodes, &texts, 0, &mut out);
        assert_eq!(tidy(&out), "Read the release notes before Friday.\nApprove");
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tidy("  one  \n\n\n\ntwo\n"), "  one\n\ntwo");
    }
}
