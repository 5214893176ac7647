//! Apps: JavaScript apps built from source with the real toolchain (npm's
//! componentize-js), run by cowork's wasmtime runtime: the read lane, a
//! capability that was not granted, a time limit, a memory cap and the
//! compile cache.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cowork::apps::runtime::{context, data};
use cowork::apps::{AppError, Capability, Lane, Runtime};

use super::support::{require, temp_dir};

/// Builds `source` for `world` into a component with componentize-js (the
/// JavaScript engine with every WASI feature switched off: the component
/// imports cowork's interfaces and nothing else).
pub fn build_js(dir: &Path, name: &str, world: &str, source: &str) -> Option<Vec<u8>> {
    let toolchain = std::env::var_os("COWORK_TEST_COMPONENTIZE_JS").map(PathBuf::from);
    if !require(toolchain.as_ref().is_some_and(|t| t.join("@bytecodealliance/componentize-js").is_dir()), "componentize-js (scripts/test installs it)") {
        return None;
    }
    let app = dir.join(format!("{name}.js"));
    std::fs::write(&app, source).unwrap();
    let wit = super::support::repo_dir().join("assets/sdk/wit");
    let out = dir.join(format!("{name}.wasm"));
    let script = format!(
        "import {{ componentize }} from '@bytecodealliance/componentize-js';\n\
         import {{ writeFile }} from 'node:fs/promises';\n\
         const {{ component }} = await componentize({{ sourcePath: {app:?}, witPath: {wit:?}, worldName: {world:?}, disableFeatures: ['stdio', 'random', 'clocks', 'http', 'fetch-event'] }});\n\
         await writeFile({out:?}, component);\n",
        app = app.to_str().unwrap(),
        wit = wit.to_str().unwrap(),
        out = out.to_str().unwrap(),
    );
    // An ES module finds its packages from where it lives: next to the toolchain's node_modules.
    let unique = dir.path_file_name();
    let build = toolchain.as_ref().unwrap().parent().unwrap().join(format!("build-{unique}-{name}.mjs"));
    std::fs::write(&build, script).unwrap();
    let status = std::process::Command::new("node").arg(&build).output().unwrap();
    let _ = std::fs::remove_file(&build);
    assert!(status.status.success(), "componentize-js failed: {}", String::from_utf8_lossy(&status.stderr));
    Some(std::fs::read(&out).unwrap())
}

trait FileName {
    fn path_file_name(&self) -> String;
}

impl FileName for Path {
    fn path_file_name(&self) -> String {
        self.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }
}

/// A lane with fixed answers, keeping each app's storage apart.
#[derive(Default)]
struct FixedLane {
    storage: parking_lot::Mutex<std::collections::BTreeMap<(String, String), String>>,
}

impl Lane for FixedLane {
    fn active_window(&self) -> Option<context::Window> {
        Some(context::Window { app: "LibreOffice".into(), title: "Q3 report.odt".into(), url: None })
    }
    fn recent_activity(&self, _since_ms: i64, _until_ms: i64, _app: Option<&str>, limit: u32) -> Vec<context::Activity> {
        (0..limit.min(3)).map(|i| context::Activity { app: format!("app{i}"), title: format!("title {i}"), start_ms: i as i64 * 1000, end_ms: i as i64 * 1000 + 500 }).collect()
    }
    fn now(&self) -> i64 {
        1_795_000_000_000
    }
    fn profile(&self) -> String {
        "Works on the Q3 report".into()
    }
    fn preferences(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    fn search(&self, _query: &str, _limit: u32) -> Vec<data::Hit> {
        Vec::new()
    }
    fn storage_get(&self, app_id: &str, key: &str) -> Option<String> {
        self.storage.lock().get(&(app_id.to_owned(), key.to_owned())).cloned()
    }
    fn storage_set(&self, app_id: &str, key: &str, value: &str) {
        self.storage.lock().insert((app_id.to_owned(), key.to_owned()), value.to_owned());
    }
    fn complete(&self, _prompt: &str) -> Result<String, String> {
        Err("no model here".into())
    }
    fn fetch(&self, url: &str) -> Result<String, String> {
        Ok(format!("fetched {url}"))
    }
}

const CARD: &str = r#"
import { activeWindow, recentActivity, now } from 'cowork:app/context@0.1.0';
import { storageGet, storageSet } from 'cowork:app/data@0.1.0';
export function render(state) {
  const w = activeWindow();
  const items = recentActivity(0n, now(), undefined, 100).map(a => ({ title: a.title, subtitle: a.app }));
  return JSON.stringify({ kind: "list", title: w ? w.title : "nothing", items, seen: storageGet("seen") ?? "never" });
}
export function handle(action, state) {
  storageSet("seen", action);
  return state;
}
"#;

#[test]
fn a_javascript_app_reads_the_lane_renders_keeps_its_own_storage_and_opens_from_the_cache() {
    let dir = temp_dir();
    let Some(wasm) = build_js(dir.path(), "card", "app", CARD) else { return };
    let runtime = Runtime::new(Some(dir.path().join("cache"))).unwrap();
    let (component, first) = runtime.open(&wasm).unwrap();
    assert!(!first.from_cache);
    let mut imports = runtime.imports(&component);
    imports.sort();
    assert_eq!(imports, ["cowork:app/context@0.1.0", "cowork:app/data@0.1.0", "cowork:app/user@0.1.0"], "the read lane and nothing else: no WASI, no files, no clock");
    let (_, second) = Runtime::new(Some(dir.path().join("cache"))).unwrap().open(&wasm).unwrap();
    assert!(second.from_cache);
    eprintln!("open a JavaScript app: compiled {} ms, from the cache {} ms", first.millis, second.millis);
    assert!(second.millis * 5 < first.millis.max(1), "the cache makes the second open fast: {second:?} vs {first:?}");

    let lane: Arc<dyn Lane> = Arc::new(FixedLane::default());
    let mut app = runtime.instantiate(&component, "card", &[], lane.clone()).unwrap();
    let view: serde_json::Value = serde_json::from_str(&app.render("").unwrap()).unwrap();
    assert_eq!(view["title"], "Q3 report.odt");
    assert_eq!(view["items"][2]["title"], "title 2");
    assert_eq!(view["seen"], "never");
    app.handle("clicked", "").unwrap();
    let view: serde_json::Value = serde_json::from_str(&app.render("").unwrap()).unwrap();
    assert_eq!(view["seen"], "clicked");
    // Another app, the same code: its own storage.
    let mut other = runtime.instantiate(&component, "other", &[], lane).unwrap();
    let view: serde_json::Value = serde_json::from_str(&other.render("").unwrap()).unwrap();
    assert_eq!(view["seen"], "never", "one app cannot read another's storage");
    eprintln!("memory of a running JavaScript app: {} MiB", app.memory_bytes() >> 20);
}

#[test]
fn an_ungranted_capability_is_not_linked_a_loop_is_stopped_and_a_memory_bomb_is_capped() {
    let dir = temp_dir();
    let fetcher = r#"
import { fetch } from 'cowork:app/http@0.1.0';
// A result's ok value comes back as is; an error is thrown.
export function render(state) { let text; try { text = fetch("https://example.com/"); } catch (e) { text = "failed: " + e.payload; } return JSON.stringify({ kind: "detail", markdown: text }); }
export function handle(action, state) { return state; }
"#;
    let Some(wasm) = build_js(dir.path(), "fetcher", "app-with-http", fetcher) else { return };
    let runtime = Runtime::new(None).unwrap();
    let (component, _) = runtime.open(&wasm).unwrap();
    let lane: Arc<dyn Lane> = Arc::new(FixedLane::default());
    match runtime.instantiate(&component, "fetcher", &[], lane.clone()) {
        Err(err) => {
            assert_eq!(err, AppError::NotGranted("cowork:app/http@0.1.0".into()));
            assert_eq!(err.to_string(), "the app uses cowork:app/http@0.1.0, which it was not granted");
        }
        Ok(_) => panic!("an app without the grant ran"),
    }
    let mut granted = runtime.instantiate(&component, "fetcher", &[Capability::Http], lane.clone()).unwrap();
    assert!(granted.render("").unwrap().contains("fetched https://example.com/"));

    let spin = "export function render(state) { for (;;) {} }\nexport function handle(action, state) { return state; }\n";
    let wasm = build_js(dir.path(), "spin", "app", spin).unwrap();
    let (component, _) = runtime.open(&wasm).unwrap();
    let mut app = runtime.instantiate(&component, "spin", &[], lane.clone()).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(app.render(""), Err(AppError::OutOfTime));
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "stopped at the limit: {:?}", started.elapsed());

    // Large typed arrays: the cap is reached in a few allocations, well within the time limit even on a loaded machine.
    let bomb = "export function render(state) { const all = []; for (;;) { all.push(new Uint8Array(32 << 20)); } }\nexport function handle(action, state) { return state; }\n";
    let wasm = build_js(dir.path(), "bomb", "app", bomb).unwrap();
    let (component, _) = runtime.open(&wasm).unwrap();
    let mut app = runtime.instantiate(&component, "bomb", &[], lane).unwrap();
    let err = app.render("").unwrap_err();
    assert_eq!(err, AppError::OutOfMemory);
    assert!(app.memory_bytes() <= cowork::apps::runtime::MEMORY_CAP);
}
