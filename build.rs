//! Embeds the git revision and the build date, for `cowork --version` and Settings → About.

use std::process::Command;

fn main() {
    let rev = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|out| out.status.success() && !out.stdout.is_empty());
    let rev = if dirty { format!("{rev}-dirty") } else { rev };
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=COWORK_GIT_REV={rev}");
    println!("cargo:rustc-env=COWORK_BUILD_DATE={date}");
    // Re-run when HEAD moves, so --version never names a stale commit. Only
    // files that exist are named: a missing one would re-run this on every build.
    for path in [".git/HEAD", ".git/index", ".git/packed-refs"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    if let Ok(head) = std::fs::read_to_string(".git/HEAD")
        && let Some(reference) = head.strip_prefix("ref: ")
        && std::path::Path::new(".git").join(reference.trim()).exists()
    {
        println!("cargo:rerun-if-changed=.git/{}", reference.trim());
    }
    println!("cargo:rerun-if-changed=build.rs");
}
