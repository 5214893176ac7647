//! The built-in Browser integration: Playwright's MCP server (npm
//! `@playwright/mcp`) driving the system Chromium (Debian `chromium`, through
//! `--executable-path`) with a persistent profile under cowork's data
//! directory. It is an ordinary MCP server to the worker — `"browser":
//! {"builtin": "browser"}` in mcp-servers.json, its command filled in here at
//! load — with cowork's own rules on top:
//! - risk by what a call does, not by the server's annotations: reading a
//!   page is safe, opening one, clicking and typing are sensitive, and
//!   submitting a form (typing with submit, Enter, a click on a submit-like
//!   control or on one it does not describe), running page JavaScript or
//!   uploading a file are dangerous;
//! - offline mode reaches the browser too: Chromium gets a proxy that does
//!   not exist, so any page off loopback fails (loopback bypasses it, named,
//!   since Playwright otherwise proxies loopback as well); a flip of offline
//!   mode restarts a running Browser with the new command line;
//! - a headed window when there is a display, headless otherwise;
//! - the chat's action log reads each call's page title from its result.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::config::ServerConfig;
use crate::tools::Risk;

/// The `builtin` value (and the usual server name) of the Browser integration.
pub const BUILTIN: &str = super::config::BUILTIN_BROWSER;
/// The @playwright/mcp release scripts/setup installs and the tests run.
pub const PLAYWRIGHT_MCP_VERSION: &str = "0.0.83";

/// Where Playwright's MCP server is: `COWORK_PLAYWRIGHT_MCP` (its cli.js),
/// else an npm install under the data directory.
pub fn entry_point(data_dir: &Path) -> PathBuf {
    match std::env::var_os("COWORK_PLAYWRIGHT_MCP") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => data_dir.join("integrations/playwright-mcp/node_modules/@playwright/mcp/cli.js"),
    }
}

/// The Chromium to drive: `COWORK_CHROMIUM`, else Debian's.
pub fn chromium() -> PathBuf {
    match std::env::var_os("COWORK_CHROMIUM") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from("/usr/bin/chromium"),
    }
}

/// What the browser needs that cowork has: a display for a visible window.
const DISPLAY_ENV: [&str; 3] = ["DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY"];

/// Fills in the built-in's command line; an error says what is missing and how to get it.
pub fn fill(config: &mut ServerConfig, data_dir: &Path, offline: bool) -> anyhow::Result<()> {
    let entry = entry_point(data_dir);
    anyhow::ensure!(
        entry.is_file(),
        "Playwright's MCP server is not installed at {}: run `npm install --prefix {} @playwright/mcp@{PLAYWRIGHT_MCP_VERSION}` (scripts/setup does), or set COWORK_PLAYWRIGHT_MCP",
        entry.display(),
        data_dir.join("integrations/playwright-mcp").display()
    );
    let browser = chromium();
    anyhow::ensure!(browser.is_file(), "Chromium is not installed at {} (Debian: apt install chromium), or set COWORK_CHROMIUM", browser.display());
    let env: BTreeMap<String, String> = DISPLAY_ENV.iter().filter_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()).map(|v| ((*k).to_owned(), v))).collect();
    let display = env.contains_key("DISPLAY") || env.contains_key("WAYLAND_DISPLAY");
    config.command = Some("node".into());
    config.args = args(&entry, &browser, data_dir, display, offline);
    config.env = env;
    config.url = None;
    Ok(())
}

fn args(entry: &Path, browser: &Path, data_dir: &Path, display: bool, offline: bool) -> Vec<String> {
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let mut args = vec![
        path(entry),
        "--executable-path".into(),
        path(browser),
        "--user-data-dir".into(),
        path(&data_dir.join("browser/profile")),
        "--output-dir".into(),
        path(&data_dir.join("browser/output")),
    ];
    if !display {
        args.push("--headless".into());
    }
    // Chromium refuses to start as root with its sandbox on (containers, CI).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        args.push("--no-sandbox".into());
    }
    if offline {
        // Nothing listens on port 9 ("discard"). Playwright makes Chromium
        // proxy loopback too (`<-loopback>`) unless the bypass names it, so
        // loopback pages are named here, and they still open offline.
        args.extend(["--proxy-server".into(), "http://127.0.0.1:9".into(), "--proxy-bypass".into(), "localhost,127.0.0.1,[::1]".into()]);
    }
    args
}

/// Words on a control that mean "send this": a click on one submits.
const SUBMITTING: [&str; 14] = ["submit", "send", "buy", "pay", "order", "checkout", "confirm", "delete", "sign in", "log in", "post", "publish", "save", "search"];

/// What a call of the built-in browser does, by tool and arguments.
pub fn classify(tool: &str, args: &Value) -> Risk {
    let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default().to_lowercase();
    match tool {
        "browser_snapshot" | "browser_take_screenshot" | "browser_console_messages" | "browser_network_requests" | "browser_wait_for" | "browser_tabs"
        | "browser_close" | "browser_resize" | "browser_navigate_back" => Risk::Safe,
        "browser_type" if args.get("submit").and_then(Value::as_bool) == Some(true) => Risk::Dangerous,
        "browser_press_key" if matches!(text("key").as_str(), "enter" | "numpadenter") => Risk::Dangerous,
        // A click that may send a form, or one whose control is not described (it cannot be told apart).
        "browser_click" if text("element").trim().is_empty() || SUBMITTING.iter().any(|word| text("element").contains(word)) => Risk::Dangerous,
        "browser_navigate" | "browser_click" | "browser_type" | "browser_press_key" | "browser_hover" | "browser_select_option" | "browser_drag" | "browser_fill_form"
        | "browser_handle_dialog" => Risk::Sensitive,
        // Page JavaScript, uploads, anything new: the most guarded.
        _ => Risk::Dangerous,
    }
}

/// "Page Title: …" from a call's result, for the chat's action log.
pub fn page_title(output: &str) -> Option<&str> {
    output.lines().find_map(|line| line.trim_start_matches(['-', ' ']).strip_prefix("Page Title:")).map(str::trim).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reading_is_safe_acting_is_sensitive_and_submitting_is_dangerous() {
        assert_eq!(classify("browser_snapshot", &json!({})), Risk::Safe);
        assert_eq!(classify("browser_navigate", &json!({"url": "http://127.0.0.1/"})), Risk::Sensitive);
        assert_eq!(classify("browser_click", &json!({"element": "About us link", "ref": "e5"})), Risk::Sensitive);
        assert_eq!(classify("browser_click", &json!({"element": "Submit order button", "ref": "e9"})), Risk::Dangerous);
        assert_eq!(classify("browser_click", &json!({"target": "e9"})), Risk::Dangerous, "an undescribed click");
        assert_eq!(classify("browser_type", &json!({"element": "Query", "ref": "e3", "text": "shoes"})), Risk::Sensitive);
        assert_eq!(classify("browser_type", &json!({"element": "Query", "ref": "e3", "text": "shoes", "submit": true})), Risk::Dangerous);
        assert_eq!(classify("browser_press_key", &json!({"key": "Enter"})), Risk::Dangerous);
        assert_eq!(classify("browser_press_key", &json!({"key": "ArrowDown"})), Risk::Sensitive);
        assert_eq!(classify("browser_evaluate", &json!({"function": "() => document.cookie"})), Risk::Dangerous);
        assert_eq!(classify("browser_something_new", &json!({})), Risk::Dangerous);
    }

    #[test]
    fn the_command_line_keeps_the_profile_under_the_data_directory_and_offline_blocks_the_web() {
        let joined = args(Path::new("/opt/pw/cli.js"), Path::new("/usr/bin/chromium"), Path::new("/data"), false, true).join(" ");
        assert!(joined.starts_with("/opt/pw/cli.js --executable-path /usr/bin/chromium --user-data-dir /data/browser/profile"), "{joined}");
        assert!(joined.contains("--headless") && joined.contains("--proxy-server http://127.0.0.1:9"), "{joined}");
        let online = args(Path::new("/opt/pw/cli.js"), Path::new("/usr/bin/chromium"), Path::new("/data"), true, false).join(" ");
        assert!(!online.contains("--headless") && !online.contains("--proxy-server"), "{online}");
        assert_eq!(page_title("### Page\n- Page URL: http://x/\n- Page Title: About Loopback\n"), Some("About Loopback"));
        assert_eq!(page_title("no page here"), None);
    }
}
