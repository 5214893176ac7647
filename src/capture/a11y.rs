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
}
