//! API keys and other secrets: in the OS secret store (the freedesktop Secret
//! Service — GNOME Keyring, KeePassXC, KWallet — over D-Bus) when one is
//! running and unlocked, else in `secrets.enc`, AES-256-GCM encrypted with a
//! 256-bit key kept in `secrets.key` (owner-only permissions, 0600).
//! Never in the config file, the database or the logs: values only pass
//! through `get`, and `mask` is what anything shows.
//!
//! Wherever it names the store (`cowork secrets`, Settings → Network,
//! `cowork doctor`) it says which one holds the secrets and why (no session
//! bus, no keyring running, keyring locked). A question to the keyring gets
//! 5 s; a write (the keyring syncs its file before it answers) and a keyring
//! the bus is still starting get D-Bus's default 25 s; a bus with no keyring
//! says so at once, so the file costs no wait.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use anyhow::{Context, bail};
use base64::Engine;
use zbus::blocking::Connection;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

const SERVICE: &str = "org.freedesktop.secrets";
const SERVICE_PATH: &str = "/org/freedesktop/secrets";
const SERVICE_INTERFACE: &str = "org.freedesktop.Secret.Service";
/// How long the keyring may take to answer a question (open a session, name
/// its default collection, find or read an item): a running one answers in
/// milliseconds, and a hung one must not hold up every start for longer.
const ANSWER: Duration = Duration::from_secs(5);
/// How long it may take to keep or remove a secret, or to come up: gnome-keyring
/// writes its keyring file and syncs it (twice for a new item) before it answers
/// CreateItem, which on a loaded disk takes seconds (at 3 s a sync, a 5 s limit
/// sent the new database key to the file while the keyring kept it too); and a
/// bus that starts the service on demand (D-Bus activation, as a login session
/// does) holds the first call until it runs. 25 s is D-Bus's own default reply
/// timeout (libdbus, GDBus): what libsecret's callers wait.
const KEEP: Duration = Duration::from_secs(25);
/// The attribute that marks cowork's items in the Secret Service.
const APPLICATION: &str = "cowork";

/// Shows a secret without revealing it: `sk-…4f2a`.
pub fn mask(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() <= 8 {
        return "•".repeat(chars.len().max(4));
    }
    let head: String = chars[..3].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}…{tail}")
}

/// Where secrets live.
pub enum Secrets {
    Service(SecretService),
    File(SecretFile),
}

impl Secrets {
    /// The Secret Service when one answers on the session bus with an unlocked
    /// default collection; otherwise the encrypted file in `data_dir`.
    pub fn open(data_dir: &Path) -> anyhow::Result<Self> {
        match SecretService::connect() {
            Ok(service) => Ok(Secrets::Service(service)),
            Err(err) => {
                tracing::info!("no usable Secret Service ({err:#}); secrets go to the encrypted file");
                let mut file = SecretFile::open(data_dir)?;
                file.service_unusable = Some(format!("{err:#}"));
                Ok(Secrets::File(file))
            }
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Secrets::Service(_) => "the system secret store (Secret Service)".into(),
            Secrets::File(file) => {
                let why = file.service_unusable.as_ref().map(|why| format!(", because the system secret store is not usable: {why}"));
                format!("{} (AES-256-GCM, key in {}{})", file.store.display(), file.key_path.display(), why.unwrap_or_default())
            }
        }
    }

    pub fn get(&self, name: &str) -> anyhow::Result<Option<String>> {
        match self {
            Secrets::Service(service) => service.get(name),
            Secrets::File(file) => file.get(name),
        }
    }

    pub fn set(&self, name: &str, value: &str) -> anyhow::Result<()> {
        if value.is_empty() {
            bail!("an empty secret is not stored");
        }
        match self {
            Secrets::Service(service) => service.set(name, value),
            Secrets::File(file) => file.set(name, value),
        }
    }

    pub fn delete(&self, name: &str) -> anyhow::Result<bool> {
        match self {
            Secrets::Service(service) => service.delete(name),
            Secrets::File(file) => file.delete(name),
        }
    }

    /// Names of the stored secrets, with their masked values.
    pub fn list(&self) -> anyhow::Result<Vec<(String, String)>> {
        match self {
            Secrets::Service(service) => service.list(),
            Secrets::File(file) => Ok(file.read_all()?.into_iter().map(|(k, v)| (k, mask(&v))).collect()),
        }
    }
}

/// The secret name under which a provider's API key is kept.
pub fn provider_key_name(provider: &str) -> String {
    format!("provider:{provider}")
}

// ---------------------------------------------------------------- file store

pub struct SecretFile {
    store: PathBuf,
    key_path: PathBuf,
    /// None until a secret is first set: reading (`cowork secrets list`, a
    /// start-up that finds no keyring for a moment) never makes a key file.
    cipher: Option<Box<Aes256Gcm>>,
    /// Why the Secret Service was not used, when `Secrets::open` fell back here.
    service_unusable: Option<String>,
}

impl SecretFile {
    pub const STORE: &'static str = "secrets.enc";
    pub const KEY: &'static str = "secrets.key";

    /// Opens the key and the store in `dir`; the key is made when the first
    /// secret is set. A key file readable by others is refused, not silently used.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        let key_path = dir.join(Self::KEY);
        let cipher = load_key(&key_path)?.map(|key| Box::new(Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&key))));
        Ok(Self { store: dir.join(Self::STORE), key_path, cipher, service_unusable: None })
    }

    /// The cipher of the key on disk now (another process may have made it since `open`).
    fn cipher(&self) -> anyhow::Result<Option<Aes256Gcm>> {
        match &self.cipher {
            Some(cipher) => Ok(Some(Aes256Gcm::clone(cipher))),
            None => Ok(load_key(&self.key_path)?.map(|key| Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&key)))),
        }
    }

    /// The cipher, making the key file first if there is none (called with the store's lock held).
    fn cipher_or_create(&self) -> anyhow::Result<Aes256Gcm> {
        if let Some(cipher) = self.cipher()? {
            return Ok(cipher);
        }
        let dir = self.key_path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let key = Aes256Gcm::generate_key(OsRng);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.key_path)
            .with_context(|| format!("cannot create {}", self.key_path.display()))?;
        file.write_all(&key)?;
        file.sync_all()?;
        sync_dir(dir)?;
        Ok(Aes256Gcm::new(&key))
    }

    fn read_all(&self) -> anyhow::Result<BTreeMap<String, String>> {
        let text = match std::fs::read_to_string(&self.store) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(err) => return Err(err).with_context(|| format!("cannot read {}", self.store.display())),
        };
        let Some(cipher) = self.cipher()? else {
            bail!("{} is there but its key {} is missing: put the key back (from the backup that has the store)", self.store.display(), self.key_path.display());
        };
        self.unseal(&cipher, &text)
    }

    fn unseal(&self, cipher: &Aes256Gcm, text: &str) -> anyhow::Result<BTreeMap<String, String>> {
        let sealed: BTreeMap<String, String> =
            serde_json::from_str(text).with_context(|| format!("{} is damaged", self.store.display()))?;
        let b64 = base64::engine::general_purpose::STANDARD;
        sealed
            .into_iter()
            .map(|(name, blob)| {
                let bytes = b64.decode(blob).with_context(|| format!("secret {name:?} is damaged"))?;
                if bytes.len() < 12 {
                    bail!("secret {name:?} is damaged");
                }
                let (nonce, ciphertext) = bytes.split_at(12);
                // The name is the associated data: a value moved to another name does not decrypt.
                let plain = cipher
                    .decrypt(Nonce::from_slice(nonce), aes_gcm::aead::Payload { msg: ciphertext, aad: name.as_bytes() })
                    .map_err(|_| anyhow::anyhow!("secret {name:?} does not decrypt with {} (wrong key or tampered)", self.key_path.display()))?;
                Ok((name, String::from_utf8(plain).context("a secret is not UTF-8")?))
            })
            .collect()
    }

    fn write_all(&self, cipher: &Aes256Gcm, secrets: &BTreeMap<String, String>) -> anyhow::Result<()> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut sealed = BTreeMap::new();
        for (name, value) in secrets {
            let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
            let ciphertext = cipher
                .encrypt(&nonce, aes_gcm::aead::Payload { msg: value.as_bytes(), aad: name.as_bytes() })
                .map_err(|_| anyhow::anyhow!("encryption failed"))?;
            let mut blob = nonce.to_vec();
            blob.extend_from_slice(&ciphertext);
            sealed.insert(name.clone(), b64.encode(blob));
        }
        // Write a new file and rename it over the old: a crash leaves one or
        // the other, whole. The name is this process's own (the lock in
        // `update` keeps writers apart; a stale one from a crash is harmless).
        let partial = self.store.with_extension(format!("enc.{}.tmp", std::process::id()));
        let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&partial)?;
        file.write_all(serde_json::to_string_pretty(&sealed)?.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&partial, &self.store).with_context(|| format!("cannot replace {}", self.store.display()))?;
        // The rename itself is durable too: the database key lives here, and
        // an encrypted database must never outlive its key across a power cut.
        if let Some(dir) = self.store.parent() {
            sync_dir(dir)?;
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> anyhow::Result<Option<String>> {
        Ok(self.read_all()?.remove(name))
    }

    pub fn set(&self, name: &str, value: &str) -> anyhow::Result<()> {
        self.update(|all| {
            all.insert(name.to_owned(), value.to_owned());
            true
        })
        .map(|_| ())
    }

    pub fn delete(&self, name: &str) -> anyhow::Result<bool> {
        self.update(|all| all.remove(name).is_some())
    }

    /// Read, change, write, with an exclusive `flock` on `secrets.lock` held
    /// throughout: two writers (threads or processes) never lose each other's
    /// change — among them the database key. `change` says whether to write.
    fn update(&self, change: impl FnOnce(&mut BTreeMap<String, String>) -> bool) -> anyhow::Result<bool> {
        use std::os::fd::AsRawFd;
        let lock_path = self.store.with_file_name("secrets.lock");
        let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(&lock_path).with_context(|| format!("cannot open {}", lock_path.display()))?;
        // SAFETY: flock on a descriptor this function owns; released when it closes.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            bail!("cannot lock {}: {}", lock_path.display(), std::io::Error::last_os_error());
        }
        let mut all = self.read_all()?;
        let changed = change(&mut all);
        if changed {
            let cipher = self.cipher_or_create()?;
            self.write_all(&cipher, &all)?;
        }
        drop(lock);
        Ok(changed)
    }
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("cannot sync {}", dir.display()))
}

/// The key in `key_path`, if there is one; refused when others can read it or it is not 256 bits.
fn load_key(key_path: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    match std::fs::read(key_path) {
        Ok(bytes) => {
            let mode = std::fs::metadata(key_path)?.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                bail!("{} is readable by others (mode {mode:o}); fix with chmod 600", key_path.display());
            }
            if bytes.len() != 32 {
                bail!("{} is not a 256-bit key ({} bytes)", key_path.display(), bytes.len());
            }
            Ok(Some(bytes))
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err).with_context(|| format!("cannot read {}", key_path.display())),
    }
}

// ------------------------------------------------------------ Secret Service

/// The freedesktop Secret Service on the session bus, with a plain-text
/// session (the bus is local to the user's login).
pub struct SecretService {
    conn: Connection,
    session: OwnedObjectPath,
    collection: OwnedObjectPath,
}

type SecretStruct = (OwnedObjectPath, Vec<u8>, Vec<u8>, String);

impl SecretService {
    /// The service, with a session and its default collection, unlocked. With
    /// no keyring on the bus this fails at once (the bus itself answers that
    /// nothing provides the name); one the bus is starting is waited for.
    pub fn connect() -> anyhow::Result<Self> {
        // The connection's own limit is the longest any call may take; each call below has its own.
        let conn = within(ANSWER, async { zbus::connection::Builder::session()?.method_timeout(KEEP).build().await })
            .map(Connection::from)
            .map_err(|err| anyhow::anyhow!("no D-Bus session bus ({err})"))?;
        // Nobody owns the name yet: the bus either says at once that nothing provides it (no keyring on
        // this machine: the file, without a wait), or starts the keyring and holds the call until it
        // runs, which under load takes longer than an answer.
        let bus = Some("org.freedesktop.DBus");
        let owned = within(ANSWER, conn.inner().call_method(bus, "/org/freedesktop/DBus", bus, "NameHasOwner", &(SERVICE,)))
            .and_then(|reply| reply.body().deserialize::<bool>())
            .unwrap_or(true);
        let open = if owned { ANSWER } else { KEEP };
        let reply = call_service(&conn, open, SERVICE_PATH, SERVICE_INTERFACE, "OpenSession", &("plain", Value::from(""))).map_err(|err| match err {
            zbus::Error::MethodError(name, _, _) if name.as_str() == "org.freedesktop.DBus.Error.ServiceUnknown" => {
                anyhow::anyhow!("no Secret Service is running (gnome-keyring, KeePassXC or KWallet provide one)")
            }
            err => anyhow::Error::new(err).context("the Secret Service did not answer"),
        })?;
        let (_, session): (OwnedValue, OwnedObjectPath) = reply.body().deserialize()?;
        let collection: OwnedObjectPath = call_service(&conn, ANSWER, SERVICE_PATH, SERVICE_INTERFACE, "ReadAlias", &("default",))?.body().deserialize()?;
        if collection.as_str() == "/" {
            bail!("the Secret Service has no default collection");
        }
        let locked: bool = property(&conn, &collection, "org.freedesktop.Secret.Collection", "Locked")?;
        if locked {
            bail!("the default keyring is locked");
        }
        Ok(Self { conn, session, collection })
    }

    fn call<B, R>(&self, limit: Duration, path: &str, interface: &str, method: &str, body: &B) -> anyhow::Result<R>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: serde::de::DeserializeOwned + zbus::zvariant::Type,
    {
        Ok(call_service(&self.conn, limit, path, interface, method, body)?.body().deserialize()?)
    }

    fn items(&self, name: Option<&str>) -> anyhow::Result<Vec<OwnedObjectPath>> {
        let mut attributes = HashMap::from([("application", APPLICATION)]);
        if let Some(name) = name {
            attributes.insert("name", name);
        }
        let (unlocked, locked): (Vec<OwnedObjectPath>, Vec<OwnedObjectPath>) =
            self.call(ANSWER, SERVICE_PATH, SERVICE_INTERFACE, "SearchItems", &(attributes,))?;
        if !locked.is_empty() && unlocked.is_empty() {
            bail!("the secret is in a locked keyring");
        }
        Ok(unlocked)
    }

    fn secret_of(&self, item: &OwnedObjectPath) -> anyhow::Result<String> {
        let secret: SecretStruct = self.call(ANSWER, item.as_str(), "org.freedesktop.Secret.Item", "GetSecret", &(&self.session,))?;
        String::from_utf8(secret.2).context("a secret is not UTF-8")
    }

    pub fn get(&self, name: &str) -> anyhow::Result<Option<String>> {
        match self.items(Some(name))?.first() {
            Some(item) => Ok(Some(self.secret_of(item)?)),
            None => Ok(None),
        }
    }

    pub fn set(&self, name: &str, value: &str) -> anyhow::Result<()> {
        let attributes = HashMap::from([("application", APPLICATION), ("name", name)]);
        let properties: HashMap<&str, Value<'_>> = HashMap::from([
            ("org.freedesktop.Secret.Item.Label", Value::from(format!("cowork: {name}"))),
            ("org.freedesktop.Secret.Item.Attributes", Value::from(attributes)),
        ]);
        let secret: SecretStruct = (self.session.clone(), Vec::new(), value.as_bytes().to_vec(), "text/plain".into());
        let (_item, prompt): (OwnedObjectPath, OwnedObjectPath) =
            self.call(KEEP, self.collection.as_str(), "org.freedesktop.Secret.Collection", "CreateItem", &(properties, secret, true))?;
        if prompt.as_str() != "/" {
            bail!("the secret store wants to prompt (locked?); the key was not stored");
        }
        Ok(())
    }

    pub fn delete(&self, name: &str) -> anyhow::Result<bool> {
        let items = self.items(Some(name))?;
        for item in &items {
            let _prompt: OwnedObjectPath = self.call(KEEP, item.as_str(), "org.freedesktop.Secret.Item", "Delete", &())?;
        }
        Ok(!items.is_empty())
    }

    pub fn list(&self) -> anyhow::Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (item, name) in self.named_items()? {
            out.push((name, mask(&self.secret_of(&item)?)));
        }
        out.sort();
        Ok(out)
    }

    /// cowork's items by name, without reading a single secret.
    pub fn names(&self) -> anyhow::Result<Vec<String>> {
        let mut names: Vec<String> = self.named_items()?.into_iter().map(|(_, name)| name).collect();
        names.sort();
        Ok(names)
    }

    fn named_items(&self) -> anyhow::Result<Vec<(OwnedObjectPath, String)>> {
        let mut out = Vec::new();
        for item in self.items(None)? {
            let attributes: HashMap<String, String> = property(&self.conn, &item, "org.freedesktop.Secret.Item", "Attributes")?;
            if let Some(name) = attributes.get("name") {
                out.push((item, name.clone()));
            }
        }
        Ok(out)
    }
}

fn property<T>(conn: &Connection, path: &OwnedObjectPath, interface: &str, name: &str) -> anyhow::Result<T>
where
    T: TryFrom<OwnedValue>,
    T::Error: Into<zbus::zvariant::Error>,
{
    let reply = call_service(conn, ANSWER, path.as_str(), "org.freedesktop.DBus.Properties", "Get", &(interface, name))?;
    let value: OwnedValue = reply.body().deserialize()?;
    T::try_from(value).map_err(|err| anyhow::anyhow!("property {name}: {}", err.into()))
}

/// A method call on the Secret Service that may take up to `limit`.
fn call_service<B>(conn: &Connection, limit: Duration, path: &str, interface: &str, method: &str, body: &B) -> zbus::Result<zbus::Message>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    within(limit, conn.inner().call_method(Some(SERVICE), path, Some(interface), method, body))
}

/// `future`'s answer, or a time-out after `limit` (what zbus itself reports,
/// "timed out"): the connection's one limit cannot tell a question from a write.
fn within<T>(limit: Duration, future: impl std::future::Future<Output = zbus::Result<T>>) -> zbus::Result<T> {
    zbus::block_on(futures_lite::future::or(future, async move {
        async_io::Timer::after(limit).await;
        Err::<T, _>(zbus::Error::from(std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out")))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_store_encrypts_binds_names_and_refuses_a_shared_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretFile::open(dir.path()).unwrap();
        store.set("provider:openai", "sk-proj-abcdef123456").unwrap();
        store.set("provider:groq", "gsk_zzz999").unwrap();
        assert_eq!(store.get("provider:openai").unwrap().as_deref(), Some("sk-proj-abcdef123456"));
        let on_disk = std::fs::read_to_string(dir.path().join(SecretFile::STORE)).unwrap();
        assert!(!on_disk.contains("abcdef123456") && !on_disk.contains("zzz999"), "{on_disk}");
        let key_mode = std::fs::metadata(dir.path().join(SecretFile::KEY)).unwrap().permissions().mode() & 0o777;
        assert_eq!(key_mode, 0o600);
        // Reopened (a restart): the same key decrypts.
        let again = SecretFile::open(dir.path()).unwrap();
        assert_eq!(again.get("provider:groq").unwrap().as_deref(), Some("gsk_zzz999"));
        // A value moved under another name does not decrypt (the name is bound as associated data).
        let mut sealed: BTreeMap<String, String> = serde_json::from_str(&on_disk).unwrap();
        let moved = sealed.remove("provider:openai").unwrap();
        sealed.insert("provider:evil".into(), moved);
        std::fs::write(dir.path().join(SecretFile::STORE), serde_json::to_string(&sealed).unwrap()).unwrap();
        assert!(again.get("provider:evil").unwrap_err().to_string().contains("does not decrypt"));
        // A key file others can read is refused.
        std::fs::set_permissions(dir.path().join(SecretFile::KEY), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(SecretFile::open(dir.path()).err().unwrap().to_string().contains("readable by others"));
    }

    #[test]
    fn reading_makes_no_key_and_a_store_without_its_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretFile::open(dir.path()).unwrap();
        assert_eq!(store.get("provider:openai").unwrap(), None);
        assert!(store.read_all().unwrap().is_empty());
        assert!(!dir.path().join(SecretFile::KEY).exists(), "a read made a key file");
        // A second handle opened before the first secret was set sees it (the key made by the first).
        let early = SecretFile::open(dir.path()).unwrap();
        store.set("provider:groq", "gsk_zzz999").unwrap();
        assert_eq!(early.get("provider:groq").unwrap().as_deref(), Some("gsk_zzz999"));
        early.set("provider:openai", "sk-proj-abcdef123456").unwrap();
        assert_eq!(store.get("provider:openai").unwrap().as_deref(), Some("sk-proj-abcdef123456"), "one key, not two");
        std::fs::remove_file(dir.path().join(SecretFile::KEY)).unwrap();
        let err = SecretFile::open(dir.path()).unwrap().get("provider:groq").unwrap_err().to_string();
        assert!(err.contains("key") && err.contains("missing"), "{err}");
    }

    #[test]
    fn a_call_that_does_not_answer_in_time_times_out() {
        let started = std::time::Instant::now();
        let err = within(Duration::from_millis(50), std::future::pending::<zbus::Result<()>>()).unwrap_err();
        assert!(err.to_string().contains("timed out"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert_eq!(within(Duration::from_secs(5), async { Ok(7) }).unwrap(), 7);
    }

    #[test]
    fn masks_show_only_the_ends() {
        assert_eq!(mask("sk-proj-abcdef123456"), "sk-…3456");
        assert_eq!(mask("short"), "•••••");
    }
}
