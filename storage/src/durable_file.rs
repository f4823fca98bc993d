//! Small files that must survive a crash whole: written to a temporary name, fsynced, renamed
//! over the target, and the directory fsynced so the rename itself is durable. A reader therefore
//! sees either the previous version or the new one, never a torn mix.
//!
//! Used for broker metadata (the topic registry, the cluster id). These writes are rare admin
//! operations; the caller runs them off the reactor (glommio `spawn_blocking`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Replace `path` with `contents` atomically and durably.
pub fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let mut tmp_name = name.to_os_string();
    tmp_name.push(".tmp");
    let tmp = dir.join(tmp_name);
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    File::open(dir)?.sync_all()
}

/// Read a file written by [`write_atomic`]; `Ok(None)` when it does not exist yet. A leftover
/// temporary file from a crash before the rename is ignored (and overwritten by the next write).
pub fn read(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_ignores_leftover_tmp() {
        let dir = std::env::temp_dir().join(format!("rl-durable-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("topics.json");
        assert_eq!(read(&p).unwrap(), None);
        write_atomic(&p, b"one").unwrap();
        // A crash mid-write leaves only the temporary file behind.
        fs::write(dir.join("topics.json.tmp"), b"torn").unwrap();
        assert_eq!(read(&p).unwrap().as_deref(), Some(&b"one"[..]));
        write_atomic(&p, b"two").unwrap();
        assert_eq!(read(&p).unwrap().as_deref(), Some(&b"two"[..]));
        assert!(!dir.join("topics.json.tmp").exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
