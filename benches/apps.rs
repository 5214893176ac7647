//! Apps' numbers (issue 17), with a JavaScript app built from source by
//! componentize-js (scripts/test installs it; COWORK_TEST_COMPONENTIZE_JS
//! points at its node_modules):
//! - first open (Cranelift compiles the component) and a cached open;
//! - instantiating it;
//! - `render` of a 100-item list (the app reads 100 sessions through the
//!   lane and returns the list as JSON), and parsing that view;
//! - memory per running app: its linear memory, and the process's RSS
//!   growth per instance over 10 instances.
//!
//! `source scripts/common.sh; setup_app_toolchain; cargo bench --profile dev --bench apps`

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use cowork::apps::runtime::{context, data};
use cowork::apps::{Lane, Runtime};

const APP: &str = r#"
import { recentActivity, now } from 'cowork:app/context@0.1.0';
export function render(state) {
  const items = recentActivity(0n, now(), undefined, 100).map(a => ({ title: a.title, subtitle: a.app, accessory: String(Number(a.endMs - a.startMs) / 60000) + " min" }));
  return JSON.stringify([{ type: "text", text: "Today", style: "heading" }, { type: "list", items }]);
}
export function handle(action, state) { return state; }
"#;

struct Hundred;

impl Lane for Hundred {
    fn active_window(&self) -> Option<context::Window> {
        None
    }
    fn recent_activity(&self, _since_ms: i64, _until_ms: i64, _app: Option<&str>, limit: u32) -> Vec<context::Activity> {
        (0..limit.min(100) as i64).map(|i| context::Activity { app: format!("app {}", i % 7), title: format!("Window title number {i} — a document"), start_ms: i * 60_000, end_ms: i * 60_000 + 45_000 }).collect()
    }
    fn now(&self) -> i64 {
        1_795_000_000_000
    }
    fn day_start(&self) -> i64 {
        0
    }
    fn profile(&self) -> String {
        String::new()
    }
    fn preferences(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    fn search(&self, _query: &str, _filters: &data::Filters, _limit: u32) -> Vec<data::Hit> {
        Vec::new()
    }
    fn conversations(&self, _app_id: &str) -> Vec<data::Conversation> {
        Vec::new()
    }
    fn storage_get(&self, _app_id: &str, _key: &str) -> Option<String> {
        None
    }
    fn storage_set(&self, _app_id: &str, _key: &str, _value: &str) {}
    fn complete(&self, _app_id: &str, _prompt: &str) -> Result<String, String> {
        Err("none".into())
    }
    fn fetch(&self, _url: &str) -> Result<String, String> {
        Err("none".into())
    }
}

fn build(dir: &Path) -> Option<Vec<u8>> {
    let toolchain = PathBuf::from(std::env::var_os("COWORK_TEST_COMPONENTIZE_JS")?);
    std::fs::write(dir.join("app.js"), APP).ok()?;
    let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/sdk/wit");
    let script = format!(
        "import {{ componentize }} from '@bytecodealliance/componentize-js';\nimport {{ writeFile }} from 'node:fs/promises';\n\
         const {{ component }} = await componentize({{ sourcePath: {:?}, witPath: {:?}, worldName: 'app', disableFeatures: ['stdio', 'random', 'clocks', 'http', 'fetch-event'] }});\n\
         await writeFile({:?}, component);\n",
        dir.join("app.js").to_str()?,
        wit.to_str()?,
        dir.join("app.wasm").to_str()?
    );
    let build = toolchain.parent()?.join("build-bench-apps.mjs");
    std::fs::write(&build, script).ok()?;
    let ok = std::process::Command::new("node").arg(&build).status().ok()?.success();
    let _ = std::fs::remove_file(&build);
    ok.then(|| std::fs::read(dir.join("app.wasm")).ok()).flatten()
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let Some(wasm) = build(dir.path()) else {
        eprintln!("apps bench skipped: componentize-js is not installed (source scripts/common.sh; setup_app_toolchain)");
        return;
    };
    println!("component: {:.1} MB", wasm.len() as f64 / 1e6);
    let cache = dir.path().join("cache");
    let runtime = Runtime::new(Some(cache.clone())).unwrap();
    let (_, first) = runtime.open(&wasm).unwrap();
    let cached_runtime = Runtime::new(Some(cache)).unwrap();
    let mut cached = Vec::new();
    for _ in 0..10 {
        let started = Instant::now();
        let _ = cached_runtime.open(&wasm).unwrap();
        cached.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    cached.sort_by(f64::total_cmp);
    println!("open: first (compile) {} ms; cached p50 {:.1} ms", first.millis, percentile(&cached, 0.5));

    let (component, _) = cached_runtime.open(&wasm).unwrap();
    let lane: Arc<dyn Lane> = Arc::new(Hundred);
    let started = Instant::now();
    let mut app = cached_runtime.instantiate(&component, "bench", &[], lane.clone()).unwrap();
    println!("instantiate: {:.1} ms", started.elapsed().as_secs_f64() * 1000.0);
    let mut renders = Vec::new();
    let mut parses = Vec::new();
    for _ in 0..200 {
        let started = Instant::now();
        let json = app.render("").unwrap();
        renders.push(started.elapsed().as_secs_f64() * 1000.0);
        let started = Instant::now();
        let view = cowork::apps::view::View::parse(&json);
        parses.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(view.size(), 102);
    }
    renders.sort_by(f64::total_cmp);
    parses.sort_by(f64::total_cmp);
    println!("render a 100-item list: p50 {:.2} ms, p95 {:.2} ms; parse the view: p50 {:.3} ms", percentile(&renders, 0.5), percentile(&renders, 0.95), percentile(&parses, 0.5));
    println!("linear memory of a running app: {:.1} MiB", app.memory_bytes() as f64 / (1 << 20) as f64);
    let before = rss_kib();
    let mut apps = Vec::new();
    for i in 0..10 {
        let mut app = cached_runtime.instantiate(&component, &format!("bench{i}"), &[], lane.clone()).unwrap();
        app.render("").unwrap();
        apps.push(app);
    }
    let after = rss_kib();
    println!("RSS per running app (10 instances, rendered once): {:.1} MiB", (after.saturating_sub(before)) as f64 / 10.0 / 1024.0);
}
