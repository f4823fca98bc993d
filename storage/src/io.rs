//! The storage backend: the few file operations a segment log needs, as a trait, so the same
//! log code runs on io_uring files in the broker and on a fault-injecting in-memory disk in tests.
//!
//! `GlommioDir` writes and syncs through glommio's `BufferedFile` (io_uring `write` and
//! `fdatasync` submissions; no O_DIRECT alignment constraints, so a small batch is one small
//! write). `MemDir` keeps a *durable* image apart from the *live* one: writes change the live
//! image, `sync` copies it to the durable image, and `crash()` throws the live image away —
//! optionally keeping a torn prefix of the unsynced bytes — to model power loss at any point.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

#[allow(async_fn_in_trait)] // single-threaded (thread-per-core): futures need not be Send
pub trait LogFile {
    /// Bytes as a read returns them: glommio's own buffer for files (so a scan needs no copy),
    /// a `Vec` in memory.
    type Buf: std::ops::Deref<Target = [u8]>;
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>>;
    /// Like `read_at`, without copying into a `Vec`.
    async fn read_buf(&self, pos: u64, len: usize) -> io::Result<Self::Buf>;
    async fn write_at(&self, pos: u64, data: Vec<u8>) -> io::Result<()>;
    /// Make every completed write durable (fdatasync).
    async fn sync(&self) -> io::Result<()>;
    async fn truncate(&self, len: u64) -> io::Result<()>;
    async fn len(&self) -> io::Result<u64>;
}

#[allow(async_fn_in_trait)]
pub trait LogDir {
    type File: LogFile;
    async fn open(&self, name: &str) -> io::Result<Self::File>;
    /// File names in the directory (not paths).
    async fn list(&self) -> io::Result<Vec<String>>;
    async fn remove(&self, name: &str) -> io::Result<()>;
    /// Atomically replace `to` with `from` (rename(2)); durable once the directory is synced.
    /// Handles opened on the old `to` keep reading the old file.
    async fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// Make creations and removals of files durable (fsync of the directory).
    async fn sync_dir(&self) -> io::Result<()>;
    /// Make every completed write to the file `name` durable, through a handle of its own (a
    /// checkpoint syncs segments that a partition's writer holds open). A file that no longer
    /// exists has nothing to sync.
    async fn sync_file(&self, name: &str) -> io::Result<()>;
}

/// Cleared only by `ringleader serve --fsync=never` (see [`skip_fsync_for_benchmarks`]).
static FSYNC: AtomicBool = AtomicBool::new(true);

/// Benchmark-only: make [`GlommioFile::sync`] and [`GlommioDir::sync_dir`] return at once, so a
/// write is acknowledged from the page cache — what a one-node Kafka does — instead of after
/// fdatasync. Acknowledged data can then be lost on power loss or a kernel crash; it exists only
/// to measure what the fsync costs (`scripts/bench-kafka.sh`), never for real use. Process-wide
/// and one-way, set before any shard starts.
pub fn skip_fsync_for_benchmarks() {
    FSYNC.store(false, Ordering::Relaxed);
}

/// Whether writes are fsynced before they are acknowledged (always, unless benchmarking).
pub fn fsync_enabled() -> bool {
    FSYNC.load(Ordering::Relaxed)
}

fn gio(e: glommio::GlommioError<()>) -> io::Error {
    io::Error::other(e.to_string())
}

/// A directory of the real filesystem, written through io_uring.
#[derive(Debug, Clone)]
pub struct GlommioDir {
    path: PathBuf,
}

impl GlommioDir {
    /// Creates the directory if needed.
    pub fn new(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        if !path.exists() {
            std::fs::create_dir_all(path)?;
            // The new directory's entry must survive a power loss too.
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::File::open(parent)?.sync_all()?;
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
        })
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
}

pub struct GlommioFile(glommio::io::BufferedFile);

impl LogFile for GlommioFile {
    type Buf = glommio::io::ReadResult;
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        let r = self.0.read_at(pos, len).await.map_err(gio)?;
        Ok(r.to_vec())
    }
    async fn read_buf(&self, pos: u64, len: usize) -> io::Result<glommio::io::ReadResult> {
        self.0.read_at(pos, len).await.map_err(gio)
    }
    async fn write_at(&self, pos: u64, data: Vec<u8>) -> io::Result<()> {
        // glommio takes the buffer; it is not copied. A short write on a regular file means the
        // disk is full (or the file too large): that is an error for the caller, which fails the
        // batch and cuts whatever part of it landed, exactly as for a failed write.
        let len = data.len();
        let n = self.0.write_at(data, pos).await.map_err(gio)?;
        if n != len {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {n} of {len} bytes at {pos}"),
            ));
        }
        Ok(())
    }
    async fn sync(&self) -> io::Result<()> {
        if !fsync_enabled() {
            return Ok(());
        }
        self.0.fdatasync().await.map_err(gio)
    }
    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.0.truncate(len).await.map_err(gio)
    }
    async fn len(&self) -> io::Result<u64> {
        self.0.file_size().await.map_err(gio)
    }
}

impl LogDir for GlommioDir {
    type File = GlommioFile;
    async fn open(&self, name: &str) -> io::Result<GlommioFile> {
        let f = glommio::io::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .buffered_open(self.path.join(name))
            .await
            .map_err(gio)?;
        Ok(GlommioFile(f))
    }
    async fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for e in std::fs::read_dir(&self.path)? {
            if let Some(n) = e?.file_name().to_str() {
                names.push(n.to_string());
            }
        }
        names.sort();
        Ok(names)
    }
    async fn remove(&self, name: &str) -> io::Result<()> {
        std::fs::remove_file(self.path.join(name))
    }
    async fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        std::fs::rename(self.path.join(from), self.path.join(to))
    }
    async fn sync_dir(&self) -> io::Result<()> {
        if !fsync_enabled() {
            return Ok(());
        }
        // Through glommio (io_uring), not std's blocking fsync: a directory sync waits for a
        // journal commit, which on a busy disk takes long enough to stall the shard's every
        // other task (a replicated partition creates its files and segments at start-up).
        let d = glommio::io::Directory::open(&self.path)
            .await
            .map_err(gio)?;
        let synced = d.sync().await.map_err(gio);
        let _ = d.close().await;
        synced
    }
    async fn sync_file(&self, name: &str) -> io::Result<()> {
        if !fsync_enabled() {
            return Ok(());
        }
        let path = self.path.join(name);
        // fdatasync works on the inode, whichever descriptor asks; opened without `create`, so a
        // segment removed meanwhile is not brought back.
        let f = match glommio::io::OpenOptions::new()
            .read(true)
            .buffered_open(&path)
            .await
        {
            Ok(f) => f,
            Err(_) if !path.exists() => return Ok(()),
            Err(e) => return Err(gio(e)),
        };
        let synced = f.fdatasync().await.map_err(gio);
        let _ = f.close().await;
        synced
    }
}

/// One in-memory file: what is on "disk" after a crash, and what a reader sees now.
#[derive(Debug, Default, Clone)]
struct MemFileState {
    live: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Debug, Default)]
struct MemDisk {
    files: BTreeMap<String, MemFileState>,
    /// Names whose creation is durable (directory synced since).
    durable_names: std::collections::BTreeSet<String>,
    /// Renames not yet made durable by a directory sync, oldest first: (from, to, what `to`
    /// was before, if it was durable). A crash undoes them — rename(2) is atomic, so after power
    /// loss a directory shows either the old entry or the new one; this model picks the old.
    unsynced_renames: Vec<(String, String, Option<MemFileState>)>,
    /// Operations left before every further operation fails (None = never fail).
    fail_after: Option<u64>,
    ops: u64,
}

/// A fault-injecting in-memory directory for tests.
#[derive(Debug, Clone, Default)]
pub struct MemDir {
    disk: Rc<RefCell<MemDisk>>,
}

pub struct MemFile {
    name: String,
    disk: Rc<RefCell<MemDisk>>,
}

impl MemDisk {
    fn tick(&mut self) -> io::Result<()> {
        self.ops += 1;
        match self.fail_after {
            Some(n) if self.ops > n => Err(io::Error::other("injected I/O failure")),
            _ => Ok(()),
        }
    }
}

impl MemDir {
    pub fn new() -> Self {
        Self::default()
    }
    /// Every operation after the next `n` fails.
    pub fn fail_after(&self, n: u64) {
        let mut d = self.disk.borrow_mut();
        d.fail_after = Some(d.ops + n);
    }
    pub fn heal(&self) {
        self.disk.borrow_mut().fail_after = None;
    }
    pub fn ops(&self) -> u64 {
        self.disk.borrow().ops
    }
    /// Power loss: each file keeps its durable bytes plus, if `torn` is given, the first
    /// `torn(name, unsynced_len)` bytes of what was written but not synced (a torn write).
    /// Files never made durable by a directory sync may vanish.
    pub fn crash(&self, mut torn: impl FnMut(&str, usize) -> usize) {
        let mut d = self.disk.borrow_mut();
        while let Some((from, to, old_to)) = d.unsynced_renames.pop() {
            if let Some(moved) = d.files.remove(&to) {
                d.files.insert(from, moved);
            }
            match old_to {
                Some(old) => {
                    d.files.insert(to.clone(), old);
                    d.durable_names.insert(to);
                }
                None => {
                    d.durable_names.remove(&to);
                }
            }
        }
        let durable_names = d.durable_names.clone();
        d.files.retain(|name, _| durable_names.contains(name));
        for (name, f) in d.files.iter_mut() {
            let mut after = f.durable.clone();
            if f.live.len() > f.durable.len() && f.live.starts_with(&f.durable) {
                let extra = &f.live[f.durable.len()..];
                let keep = torn(name, extra.len()).min(extra.len());
                after.extend_from_slice(&extra[..keep]);
            }
            f.live = after.clone();
            f.durable = after;
        }
        d.fail_after = None;
    }
    /// The bytes a reader sees now (tests that corrupt files write through this).
    pub fn with_file<R>(&self, name: &str, f: impl FnOnce(&mut Vec<u8>) -> R) -> Option<R> {
        let mut d = self.disk.borrow_mut();
        d.files.get_mut(name).map(|s| {
            let r = f(&mut s.live);
            s.durable = s.live.clone();
            r
        })
    }
}

impl LogFile for MemFile {
    type Buf = Vec<u8>;
    async fn read_buf(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        self.read_at(pos, len).await
    }
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut d = self.disk.borrow_mut();
        d.tick()?;
        let f = d
            .files
            .get(&self.name)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let start = (pos as usize).min(f.live.len());
        let end = (start + len).min(f.live.len());
        Ok(f.live[start..end].to_vec())
    }
    async fn write_at(&self, pos: u64, data: Vec<u8>) -> io::Result<()> {
        let mut d = self.disk.borrow_mut();
        d.tick()?;
        let f = d
            .files
            .get_mut(&self.name)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let pos = pos as usize;
        if f.live.len() < pos + data.len() {
            f.live.resize(pos + data.len(), 0);
        }
        f.live[pos..pos + data.len()].copy_from_slice(&data);
        Ok(())
    }
    async fn sync(&self) -> io::Result<()> {
        let mut d = self.disk.borrow_mut();
        d.tick()?;
        let f = d
            .files
            .get_mut(&self.name)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        f.durable = f.live.clone();
        Ok(())
    }
    async fn truncate(&self, len: u64) -> io::Result<()> {
        let mut d = self.disk.borrow_mut();
        d.tick()?;
        let f = d
            .files
            .get_mut(&self.name)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        f.live.truncate(len as usize);
        Ok(())
    }
    async fn len(&self) -> io::Result<u64> {
        let d = self.disk.borrow();
        Ok(d.files
            .get(&self.name)
            .map(|f| f.live.len() as u64)
            .unwrap_or(0))
    }
}

impl LogDir for MemDir {
    type File = MemFile;
    async fn open(&self, name: &str) -> io::Result<MemFile> {
        let mut d = self.disk.borrow_mut();
        d.tick()?;
        d.files.entry(name.to_string()).or_default();
        Ok(MemFile {
            name: name.to_string(),
            disk: self.disk.clone(),
        })
    }
    async fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.disk.borrow().files.keys().cloned().collect())
    }
    async fn remove(&self, name: &str) -> io::Result<()> {
        let mut d = self.disk.borrow_mut();
        d.tick()?;
        d.files.remove(name);
        d.durable_names.remove(name);
        Ok(())
    }
    async fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut d = self.disk.borrow_mut();
        d.tick()?;
        let moved = d
            .files
            .remove(from)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let old_to = d.files.insert(to.to_string(), moved);
        let old_durable = old_to
            .filter(|_| d.durable_names.contains(to))
            .map(|mut f| {
                f.live = f.durable.clone();
                f
            });
        d.unsynced_renames
            .push((from.to_string(), to.to_string(), old_durable));
        Ok(())
    }
    async fn sync_dir(&self) -> io::Result<()> {
        let mut d = self.disk.borrow_mut();
        d.tick()?;
        d.durable_names = d.files.keys().cloned().collect();
        d.unsynced_renames.clear();
        Ok(())
    }
    async fn sync_file(&self, name: &str) -> io::Result<()> {
        let mut d = self.disk.borrow_mut();
        d.tick()?;
        if let Some(f) = d.files.get_mut(name) {
            f.durable = f.live.clone();
        }
        Ok(())
    }
}
