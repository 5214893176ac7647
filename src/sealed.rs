//! Sealed files (issue 18): what cowork keeps beside its encrypted database
//! and derived from it — the faiss vector indexes (vectors can be inverted
//! back towards their text) and kept audio — is written encrypted with
//! AES-256-GCM under a key derived from the database key (`store::key`).
//!
//! Format: `CWSEALv1` and an 8-byte random nonce prefix, then chunks of
//! 1 MiB of plaintext, each encrypted with the nonce `prefix ‖ chunk number`
//! and the final chunk marked in its associated data, so a reordered,
//! truncated or extended file does not open. A writer goes to `*.partial`,
//! is synced and renamed over the old file: a crash leaves one or the other.
//!
//! faiss streams through a C `FILE*`; `with_file_writer` and
//! `with_file_reader` give it one (glibc's `fopencookie`) that seals and
//! opens chunk by chunk, so no plaintext index ever touches the disk and no
//! second copy of it sits in memory.

use std::ffi::{c_char, c_int, c_void};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, KeyInit, OsRng, Payload, rand_core::RngCore};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use anyhow::{Context, bail};

const MAGIC: &[u8; 8] = b"CWSEALv1";
const CHUNK: usize = 1 << 20;
const TAG: usize = 16;

/// The key sealed files use, derived from a database's key.
#[derive(Clone)]
pub struct SealKey(Aes256Gcm);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(…)")
    }
}

impl SealKey {
    pub fn from_bytes(bytes: &[u8; 32]) -> Self {
        SealKey(Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(bytes)))
    }

    /// The sealing key for the files of the database at `db` (its key must be
    /// in this process's key ring or in custody).
    pub fn for_database(db: &Path) -> anyhow::Result<Self> {
        let keyed = crate::store::key::key_for(db, false)?;
        Ok(Self::from_bytes(&keyed.key.derive("sealed files")))
    }

    /// The sealing key for the database `conn` is connected to.
    pub fn for_connection(conn: &rusqlite::Connection) -> anyhow::Result<Self> {
        match conn.path().filter(|p| !p.is_empty()) {
            Some(path) => Self::for_database(Path::new(path)),
            None => bail!("an in-memory database has no key to seal files with"),
        }
    }
}

fn nonce(prefix: &[u8; 8], chunk: u32) -> [u8; 12] {
    let mut nonce = [0u8; 12];
    nonce[..8].copy_from_slice(prefix);
    nonce[8..].copy_from_slice(&chunk.to_be_bytes());
    nonce
}

fn aad(last: bool) -> [u8; 9] {
    let mut aad = [0u8; 9];
    aad[..8].copy_from_slice(MAGIC);
    aad[8] = last as u8;
    aad
}

/// Writes a sealed file: to `<path>.partial` until `finish` renames it.
pub struct SealedWriter {
    key: SealKey,
    file: std::io::BufWriter<std::fs::File>,
    partial: PathBuf,
    path: PathBuf,
    prefix: [u8; 8],
    chunk: u32,
    buffer: Vec<u8>,
}

impl SealedWriter {
    pub fn create(path: &Path, key: &SealKey) -> anyhow::Result<Self> {
        let partial = partial_path(path);
        let file = std::fs::File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
        let mut prefix = [0u8; 8];
        OsRng.fill_bytes(&mut prefix);
        let mut file = std::io::BufWriter::with_capacity(CHUNK + TAG, file);
        file.write_all(MAGIC)?;
        file.write_all(&prefix)?;
        Ok(Self { key: key.clone(), file, partial, path: path.to_owned(), prefix, chunk: 0, buffer: Vec::with_capacity(CHUNK) })
    }

    fn seal(&mut self, last: bool) -> std::io::Result<()> {
        let sealed = self
            .key
            .0
            .encrypt(Nonce::from_slice(&nonce(&self.prefix, self.chunk)), Payload { msg: &self.buffer, aad: &aad(last) })
            .map_err(|_| std::io::Error::other("encryption failed"))?;
        self.file.write_all(&sealed)?;
        self.buffer.clear();
        self.chunk = self.chunk.checked_add(1).ok_or_else(|| std::io::Error::other("a sealed file has at most 4 PiB"))?;
        Ok(())
    }

    /// Seals the last chunk, syncs the file and renames it into place.
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.seal(true)?;
        let file = self.file.into_inner().map_err(|err| err.into_error())?;
        file.sync_all().with_context(|| format!("cannot sync {}", self.partial.display()))?;
        std::fs::rename(&self.partial, &self.path).with_context(|| format!("cannot replace {}", self.path.display()))?;
        Ok(())
    }
}

impl Write for SealedWriter {
    fn write(&mut self, mut data: &[u8]) -> std::io::Result<usize> {
        let total = data.len();
        while !data.is_empty() {
            let room = CHUNK - self.buffer.len();
            let take = room.min(data.len());
            self.buffer.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buffer.len() == CHUNK {
                self.seal(false)?;
            }
        }
        Ok(total)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".partial");
    path.with_file_name(name)
}

/// Reads a sealed file, checking each chunk as it comes.
pub struct SealedReader {
    key: SealKey,
    file: std::io::BufReader<std::fs::File>,
    path: PathBuf,
    prefix: [u8; 8],
    chunk: u32,
    plain: Vec<u8>,
    at: usize,
    ended: bool,
}

impl SealedReader {
    pub fn open(path: &Path, key: &SealKey) -> anyhow::Result<Self> {
        let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let mut file = std::io::BufReader::with_capacity(CHUNK + TAG, file);
        let mut header = [0u8; 16];
        file.read_exact(&mut header).with_context(|| format!("{} is not a sealed file", path.display()))?;
        if &header[..8] != MAGIC {
            bail!("{} is not a sealed file (written before encryption, or damaged)", path.display());
        }
        let prefix: [u8; 8] = header[8..].try_into().unwrap_or_default();
        Ok(Self { key: key.clone(), file, path: path.to_owned(), prefix, chunk: 0, plain: Vec::new(), at: 0, ended: false })
    }

    fn next_chunk(&mut self) -> std::io::Result<()> {
        let mut sealed = vec![0u8; CHUNK + TAG];
        let mut got = 0;
        while got < sealed.len() {
            match self.file.read(&mut sealed[got..])? {
                0 => break,
                n => got += n,
            }
        }
        sealed.truncate(got);
        let last = got < CHUNK + TAG;
        if got < TAG {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{} is cut short", self.path.display())));
        }
        self.plain = self
            .key
            .0
            .decrypt(Nonce::from_slice(&nonce(&self.prefix, self.chunk)), Payload { msg: &sealed, aad: &aad(last) })
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{} does not open with this database's key (another key, or damaged)", self.path.display())))?;
        self.at = 0;
        self.chunk += 1;
        self.ended = last;
        Ok(())
    }
}

impl Read for SealedReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.plain.len() {
            if self.ended {
                return Ok(0);
            }
            self.next_chunk()?;
        }
        let n = out.len().min(self.plain.len() - self.at);
        out[..n].copy_from_slice(&self.plain[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Writes `bytes` sealed to `path` (through `*.partial` and a rename).
pub fn write(path: &Path, key: &SealKey, bytes: &[u8]) -> anyhow::Result<()> {
    let mut writer = SealedWriter::create(path, key)?;
    writer.write_all(bytes)?;
    writer.finish()
}

/// Reads a whole sealed file.
pub fn read(path: &Path, key: &SealKey) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    SealedReader::open(path, key)?.read_to_end(&mut out)?;
    Ok(out)
}

// ------------------------------------------------------------- C FILE bridge

type ReadFn = unsafe extern "C" fn(*mut c_void, *mut c_char, usize) -> isize;
type WriteFn = unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> isize;
type SeekFn = unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int;
type CloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;

/// glibc's `cookie_io_functions_t`.
#[repr(C)]
struct CookieFunctions {
    read: Option<ReadFn>,
    write: Option<WriteFn>,
    seek: Option<SeekFn>,
    close: Option<CloseFn>,
}

unsafe extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, functions: CookieFunctions) -> *mut libc::FILE;
}

/// What a cookie holds: the stream and the first error it met (C sees -1).
struct Cookie<S> {
    stream: S,
    error: Option<std::io::Error>,
}

unsafe extern "C" fn cookie_write<W: Write>(cookie: *mut c_void, data: *const c_char, size: usize) -> isize {
    // SAFETY: `cookie` is the `Cookie<W>` that `with_file_writer` keeps alive
    // until after `fclose`, and `data` holds `size` bytes (stdio's buffer).
    let cookie = unsafe { &mut *(cookie as *mut Cookie<W>) };
    let data = unsafe { std::slice::from_raw_parts(data as *const u8, size) };
    match cookie.stream.write_all(data) {
        Ok(()) => size as isize,
        Err(err) => {
            cookie.error.get_or_insert(err);
            // 0, not -1: glibc's write path takes -1 as a huge count (its bug 2074).
            0
        }
    }
}

unsafe extern "C" fn cookie_read<R: Read>(cookie: *mut c_void, out: *mut c_char, size: usize) -> isize {
    // SAFETY: as in `cookie_write`; `out` has room for `size` bytes.
    let cookie = unsafe { &mut *(cookie as *mut Cookie<R>) };
    let out = unsafe { std::slice::from_raw_parts_mut(out as *mut u8, size) };
    match cookie.stream.read(out) {
        Ok(n) => n as isize,
        Err(err) => {
            cookie.error.get_or_insert(err);
            -1
        }
    }
}

/// Closes a FILE on the way out, also when `body` panics: stdio's exit-time
/// flush must never reach a cookie that is gone.
struct Closing(*mut libc::FILE);

impl Closing {
    /// Closes now; fclose's status (0: flushed and closed).
    fn close(mut self) -> c_int {
        let file = std::mem::replace(&mut self.0, std::ptr::null_mut());
        // SAFETY: a FILE from fopencookie, closed exactly once (the pointer is taken).
        unsafe { libc::fclose(file) }
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: as in `close`.
            unsafe { libc::fclose(self.0) };
        }
    }
}

/// Runs `body` with a `FILE*` whose writes go into `stream`.
pub fn with_file_writer<W: Write, T>(stream: W, body: impl FnOnce(*mut libc::FILE) -> anyhow::Result<T>) -> anyhow::Result<(T, W)> {
    let mut cookie = Box::new(Cookie { stream, error: None });
    let functions = CookieFunctions { read: None, write: Some(cookie_write::<W>), seek: None, close: None };
    // SAFETY: the cookie outlives the FILE (closed below, before the box is dropped).
    let file = unsafe { fopencookie(&mut *cookie as *mut Cookie<W> as *mut c_void, c"w".as_ptr(), functions) };
    if file.is_null() {
        bail!("fopencookie failed: {}", std::io::Error::last_os_error());
    }
    let closing = Closing(file);
    let result = body(file);
    // Closing flushes stdio's buffer into the cookie.
    let closed = closing.close();
    if let Some(err) = cookie.error.take() {
        return Err(err.into());
    }
    let value = result?;
    if closed != 0 {
        bail!("closing the stream failed");
    }
    Ok((value, cookie.stream))
}

/// Runs `body` with a `FILE*` whose reads come from `stream`.
pub fn with_file_reader<R: Read, T>(stream: R, body: impl FnOnce(*mut libc::FILE) -> anyhow::Result<T>) -> anyhow::Result<T> {
    let mut cookie = Box::new(Cookie { stream, error: None });
    let functions = CookieFunctions { read: Some(cookie_read::<R>), write: None, seek: None, close: None };
    // SAFETY: as in `with_file_writer`.
    let file = unsafe { fopencookie(&mut *cookie as *mut Cookie<R> as *mut c_void, c"r".as_ptr(), functions) };
    if file.is_null() {
        bail!("fopencookie failed: {}", std::io::Error::last_os_error());
    }
    let closing = Closing(file);
    let result = body(file);
    closing.close();
    if let Some(err) = cookie.error.take() {
        return Err(err.into());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_file_reads_back_and_refuses_another_key_truncation_and_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let key = SealKey::from_bytes(&[7; 32]);
        let path = dir.path().join("x.sealed");
        // Two full chunks and a part: every boundary case of the reader.
        let data: Vec<u8> = (0..CHUNK * 2 + 1234).map(|i| (i % 251) as u8).collect();
        write(&path, &key, &data).unwrap();
        assert!(!partial_path(&path).exists());
        assert_eq!(read(&path, &key).unwrap(), data);
        let on_disk = std::fs::read(&path).unwrap();
        assert!(!on_disk.windows(64).any(|w| w == &data[1000..1064]), "the plaintext is not on disk");
        assert!(read(&path, &SealKey::from_bytes(&[8; 32])).unwrap_err().to_string().contains("does not open"));
        // Cut at a chunk boundary: the last chunk is missing, which its mark tells.
        std::fs::write(&path, &on_disk[..16 + CHUNK + TAG]).unwrap();
        assert!(read(&path, &key).is_err());
        let mut flipped = on_disk.clone();
        flipped[100] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        assert!(read(&path, &key).is_err());
        // Exactly one chunk, and nothing at all.
        for size in [CHUNK, 0] {
            write(&path, &key, &data[..size]).unwrap();
            assert_eq!(read(&path, &key).unwrap(), &data[..size]);
        }
        std::fs::write(&path, b"plain old file").unwrap();
        assert!(read(&path, &key).unwrap_err().to_string().contains("not a sealed file"));
    }

    #[test]
    fn a_c_stream_writes_and_reads_through_the_seal() {
        let dir = tempfile::tempdir().unwrap();
        let key = SealKey::from_bytes(&[9; 32]);
        let path = dir.path().join("c.sealed");
        let writer = SealedWriter::create(&path, &key).unwrap();
        let ((), writer) = with_file_writer(writer, |file| {
            for i in 0..100_000u32 {
                // SAFETY: a valid FILE from with_file_writer; four bytes from a local.
                let written = unsafe { libc::fwrite(i.to_le_bytes().as_ptr() as *const c_void, 4, 1, file) };
                assert_eq!(written, 1);
            }
            Ok(())
        })
        .unwrap();
        writer.finish().unwrap();
        let sum = with_file_reader(SealedReader::open(&path, &key).unwrap(), |file| {
            let mut sum = 0u64;
            let mut word = [0u8; 4];
            // SAFETY: as above.
            while unsafe { libc::fread(word.as_mut_ptr() as *mut c_void, 4, 1, file) } == 1 {
                sum += u32::from_le_bytes(word) as u64;
            }
            Ok(sum)
        })
        .unwrap();
        assert_eq!(sum, (0..100_000u64).sum::<u64>());
    }
}
