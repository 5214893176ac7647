//! cowork's own data directory (database, keys, rules, audit log, skills,
//! MCP configuration, app cache), recognised however a tool's argument spells
//! it: `~`, `$HOME`, `..`, symlinks (the path is resolved), hard links (the
//! file's identity, `st_dev` and `st_ino`, is compared with the data
//! directory's files), `file:` URLs (percent-decoded by the WHATWG parser),
//! and paths inside longer text (`--file=/…`, a script's string). Pure
//! checks, called by the policy on the agent thread for every call.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::command::normalise;

/// Files of the data directory the identity cache walks at most.
const WALK_LIMIT: usize = 200_000;
/// A file with several names not found in the cache rebuilds it, at most this often.
const REBUILD_EVERY: Duration = Duration::from_millis(500);

/// The data directory as the checks see it.
#[derive(Clone, Debug)]
pub struct OwnData<'a> {
    /// Resolved (symlinks followed).
    pub data_dir: &'a Path,
    pub home: &'a Path,
}

/// How a path relates to the data directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// The data directory or something in it (or another name of a file in it).
    Inside,
    /// A folder that holds the data directory, below the home folder.
    Holds,
    /// The home folder or `/`, which hold it too.
    HomeOrRoot,
    Outside,
}

impl OwnData<'_> {
    /// How `path` (absolute) relates to the data directory: read lexically
    /// (`..` removed), resolved on disk, and by file identity.
    pub fn reach(&self, path: &Path) -> Reach {
        let lexical = normalise(path);
        let physical = resolve_existing(&lexical);
        if [&lexical, &physical].iter().any(|p| p.starts_with(self.data_dir)) || self.same_file_inside(&physical) {
            return Reach::Inside;
        }
        let holds = |p: &Path| p != self.data_dir && self.data_dir.starts_with(p);
        if holds(&lexical) || holds(&physical) {
            let home = resolve_existing(self.home);
            let top = |p: &Path| p == Path::new("/") || p == self.home || p == home;
            return if top(&lexical) || top(&physical) { Reach::HomeOrRoot } else { Reach::Holds };
        }
        Reach::Outside
    }

    pub fn inside(&self, path: &Path) -> bool {
        self.reach(path) == Reach::Inside
    }

    /// A file that has more than one name and is one of the data directory's files.
    fn same_file_inside(&self, path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|meta| self.is_hard_link_inside(&meta))
    }

    /// Whether a file (its metadata, symlinks followed) is another name of one
    /// of the data directory's files.
    pub fn is_hard_link_inside(&self, meta: &std::fs::Metadata) -> bool {
        meta.is_file() && meta.nlink() >= 2 && identities_contain(self.data_dir, (meta.dev(), meta.ino()))
    }

    /// Where a relative `text` could point when the directory it is read in is
    /// not known: into the data directory, if some folder on the way to it
    /// joined with `text` names something that exists there.
    pub fn reachable_from_unknown(&self, text: &str) -> bool {
        let text = text.trim_start_matches('/');
        if text.is_empty() || text == "." || text == ".." {
            return false;
        }
        self.data_dir.ancestors().any(|base| {
            let candidate = normalise(&base.join(text));
            candidate.starts_with(self.data_dir) && std::fs::symlink_metadata(&candidate).is_ok()
        })
    }

    /// A path named inside `text` (an option's value, a script's string, a
    /// `file:` URL) that reaches the data directory.
    pub fn embedded(&self, text: &str, cwd: &Path) -> Option<PathBuf> {
        for url in file_urls(text) {
            if let Some(path) = file_url_path(&url)
                && self.inside(&path)
            {
                return Some(path);
            }
        }
        for token in text.split(|c: char| c.is_whitespace() || "'\"`()[]{}<>,;|&=:".contains(c)) {
            let Some(path) = expand_path_token(token, self.home, cwd) else { continue };
            if self.inside(&path) {
                return Some(path);
            }
        }
        None
    }

    /// A string argument of a tool that does not say what its arguments are
    /// (an MCP server's, a flow's): as a path relative to `bases`, as a
    /// `file:` URL, or with paths inside it. Returns the path it reaches.
    pub fn in_text(&self, text: &str, bases: &[&Path]) -> Option<PathBuf> {
        if text.len() > 64 * 1024 {
            // Long text: only what it names with an absolute spelling.
            return bases.first().and_then(|cwd| self.embedded(text, cwd));
        }
        if let Some(path) = file_url_path(text.trim()) {
            return self.inside(&path).then_some(path);
        }
        let trimmed = text.trim();
        if !trimmed.is_empty() && !trimmed.contains('\n') {
            for base in bases {
                if let Some(path) = expand_path_token(trimmed, self.home, base).or_else(|| (!trimmed.starts_with('$')).then(|| base.join(trimmed)))
                    && self.inside(&path)
                {
                    return Some(path);
                }
            }
            if trimmed.contains('/') && !trimmed.starts_with('/') && !trimmed.contains("://") && self.reachable_from_unknown(trimmed) {
                return Some(PathBuf::from(trimmed));
            }
        }
        bases.first().and_then(|cwd| self.embedded(text, cwd))
    }
}

/// `~/x`, `~user/x`, `$HOME/x`, `${HOME}/x`, `/x`, `./x`, `../x` as a path; None for anything else.
pub fn expand_path_token(token: &str, home: &Path, cwd: &Path) -> Option<PathBuf> {
    let token = token.trim_matches(|c: char| "'\"".contains(c));
    if token.is_empty() {
        return None;
    }
    for prefix in ["$HOME", "${HOME}"] {
        if let Some(rest) = token.strip_prefix(prefix)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return Some(home.join(rest.trim_start_matches('/')));
        }
    }
    if let Some(rest) = token.strip_prefix('~') {
        let (user, rest) = rest.split_once('/').unwrap_or((rest, ""));
        let base = if user.is_empty() { home.to_path_buf() } else { super::command::home_of(user)? };
        return Some(base.join(rest));
    }
    if token.starts_with('/') {
        return Some(PathBuf::from(token));
    }
    if token.starts_with("./") || token.starts_with("../") || token == "." || token == ".." {
        return Some(cwd.join(token));
    }
    None
}

/// The `file:` URLs in a text.
fn file_urls(text: &str) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = lower[from..].find("file:") {
        let start = from + at;
        let end = text[start..].find(|c: char| c.is_whitespace() || "'\"<>`".contains(c)).map_or(text.len(), |e| start + e);
        out.push(text[start..end].to_owned());
        from = end.max(start + 5);
    }
    out
}

/// The local path of a `file:` URL, read by the WHATWG parser (percent-decoded, `..` resolved).
pub fn file_url_path(text: &str) -> Option<PathBuf> {
    if !text.get(..5).is_some_and(|s| s.eq_ignore_ascii_case("file:")) {
        return None;
    }
    let url = url::Url::parse(text).ok()?;
    if url.scheme() != "file" {
        return None;
    }
    // A host other than localhost is another machine's file; the path is still read as local by some apps.
    let mut local = url.clone();
    let _ = local.set_host(None);
    local.to_file_path().ok()
}

/// A path with its existing part resolved (symlinks followed) and the rest appended.
pub fn resolve_existing(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(base) = existing.canonicalize() {
            return rest.iter().rev().fold(base, |p, name| p.join(name));
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

struct Identities {
    data_dir: PathBuf,
    built: Instant,
    files: HashSet<(u64, u64)>,
}

fn identities() -> &'static Mutex<Option<Identities>> {
    static CACHE: OnceLock<Mutex<Option<Identities>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(None))
}

/// Whether `(dev, ino)` is a file of the data directory. The set is kept and
/// built again when a file is not in it and the set is older than
/// `REBUILD_EVERY` (a file made since is found on the next try).
fn identities_contain(data_dir: &Path, id: (u64, u64)) -> bool {
    let mut cache = identities().lock();
    let fresh = cache.as_ref().is_some_and(|c| c.data_dir == data_dir);
    if fresh && cache.as_ref().is_some_and(|c| c.files.contains(&id)) {
        return true;
    }
    if fresh && cache.as_ref().is_some_and(|c| c.built.elapsed() < REBUILD_EVERY) {
        return false;
    }
    let files = walk_identities(data_dir);
    let found = files.contains(&id);
    *cache = Some(Identities { data_dir: data_dir.to_path_buf(), built: Instant::now(), files });
    found
}

fn walk_identities(data_dir: &Path) -> HashSet<(u64, u64)> {
    let mut files = HashSet::new();
    let mut stack = vec![data_dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            seen += 1;
            if seen > WALK_LIMIT {
                tracing::warn!(limit = WALK_LIMIT, "the data directory has more files than the hard-link check walks");
                return files;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                files.insert((meta.dev(), meta.ino()));
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let data = home.join(".local/share/cowork");
        std::fs::create_dir_all(data.join("skills")).unwrap();
        std::fs::write(data.join("secrets.key"), "k").unwrap();
        std::fs::create_dir_all(home.join("notes")).unwrap();
        (dir, home, data)
    }

    #[test]
    fn every_spelling_of_the_data_directory_is_inside() {
        let (_dir, home, data) = setup();
        let own = OwnData { data_dir: &data, home: &home };
        std::os::unix::fs::symlink(&data, home.join("notes/link")).unwrap();
        std::fs::hard_link(data.join("secrets.key"), home.join("notes/k")).unwrap();
        for path in [
            data.join("secrets.key"),
            data.join("skills/new/SKILL.md"),
            home.join("notes/../.local/share/cowork/cowork.db"),
            home.join("notes/link/secrets.key"),
            home.join("notes/k"),
            PathBuf::from(format!("/proc/self/root{}", data.join("secrets.key").display())),
        ] {
            assert_eq!(own.reach(&path), Reach::Inside, "{}", path.display());
        }
        assert_eq!(own.reach(&home.join(".local/share")), Reach::Holds);
        assert_eq!(own.reach(&home), Reach::HomeOrRoot);
        assert_eq!(own.reach(Path::new("/")), Reach::HomeOrRoot);
        assert_eq!(own.reach(&home.join("notes/todo.md")), Reach::Outside);
        // A copy is another file; a second hard link made later is found.
        std::fs::copy(data.join("secrets.key"), home.join("notes/copy")).unwrap();
        assert_eq!(own.reach(&home.join("notes/copy")), Reach::Outside);
        std::fs::write(data.join("later.db"), "x").unwrap();
        std::thread::sleep(REBUILD_EVERY);
        std::fs::hard_link(data.join("later.db"), home.join("notes/later")).unwrap();
        assert!(own.inside(&home.join("notes/later")));
    }

    #[test]
    fn urls_text_and_unknown_places_are_read_too() {
        let (_dir, home, data) = setup();
        let own = OwnData { data_dir: &data, home: &home };
        let encoded = format!("file://{}", data.join("secrets.key").display()).replace("cowork", "cow%6Frk");
        assert_eq!(file_url_path(&encoded), Some(data.join("secrets.key")));
        assert!(own.in_text(&encoded, &[&home]).is_some());
        assert!(own.in_text(&format!("FILE://localhost{}", data.join("x").display()), &[&home]).is_some());
        assert!(own.in_text("~/.local/share/cowork/secrets.key", &[&home]).is_some());
        assert!(own.in_text("$HOME/.local/share/cowork", &[&home]).is_some());
        assert!(own.in_text(".local/share/cowork/secrets.key", &[&home]).is_some());
        assert!(own.in_text("cowork/secrets.key", &[Path::new("/nowhere")]).is_some(), "relative, from somewhere on the way");
        assert!(own.in_text(&format!("open('{}')", data.join("secrets.key").display()), &[&home]).is_some());
        assert!(own.in_text(&format!("--db={}/cowork.db", data.display()), &[&home]).is_some());
        for harmless in ["notes/todo.md", "what is in my notes?", "https://example.com/cowork/secrets.key", "/tmp/x", "secrets", ""] {
            assert!(own.in_text(harmless, &[&home]).is_none(), "{harmless}");
        }
        assert!(own.reachable_from_unknown("secrets.key"));
        assert!(own.reachable_from_unknown("/cowork/skills"));
        assert!(!own.reachable_from_unknown("notes.txt"));
        assert!(!own.reachable_from_unknown("."));
    }
}
