//! Snapshots: the live key → value set of a partition log at an offset, so a restart loads the
//! snapshot and replays only the log after it.
//!
//! File `DATA/__consumer_offsets-<p>/<20-digit offset>.snapshot`: a 32-byte header — magic
//! `RLSNAP01`, format version u32, covered offset u64 (the last offset the snapshot includes),
//! body length u64, CRC-32C u32 of the body — then the body, an rkyv archive of the records.
//! Written to a temporary name, fsynced, renamed, and the directory fsynced, so a crash leaves
//! either the previous snapshot or the new one. Read back validated (CRC, then rkyv's bytecheck)
//! and used in place: keys and values are read straight out of the archive, without
//! deserializing into owned values.

use rkyv::util::AlignedVec;
use std::io;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"RLSNAP01";
const FORMAT_VERSION: u32 = 1;
const HEADER_LEN: usize = 32;

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRecord {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SnapshotBody {
    pub records: Vec<SnapshotRecord>,
}

pub fn snapshot_name(offset: u64) -> String {
    format!("{offset:020}.snapshot")
}

fn parse_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".snapshot")?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// Write a snapshot covering offsets up to and including `offset`. Blocking file I/O: call it
/// off the reactor (it runs rarely, every `offsets.snapshot.interval.records` records).
pub fn write(dir: &Path, offset: u64, records: &[SnapshotRecord]) -> io::Result<PathBuf> {
    let all = encode(offset, records)?;
    let path = dir.join(snapshot_name(offset));
    crate::durable_file::write_atomic(&path, &all)?;
    Ok(path)
}

/// The bytes of a snapshot file covering offsets up to and including `offset`: header, then the
/// archive of `records`.
pub fn encode(offset: u64, records: &[SnapshotRecord]) -> io::Result<Vec<u8>> {
    let body = SnapshotBody {
        records: records.to_vec(),
    };
    let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&body)
        .map_err(|e| io::Error::other(e.to_string()))?;
    let mut all = Vec::with_capacity(HEADER_LEN + bytes.len());
    all.extend_from_slice(MAGIC);
    all.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
    all.extend_from_slice(&offset.to_be_bytes());
    all.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    all.extend_from_slice(&crc32c::crc32c(&bytes).to_be_bytes());
    all.extend_from_slice(&bytes);
    Ok(all)
}

/// A validated snapshot held in memory; records are read in place from the archive.
pub struct Snapshot {
    pub offset: u64,
    pub path: PathBuf,
    body: AlignedVec,
}

impl Snapshot {
    pub fn records(&self) -> &rkyv::Archived<Vec<SnapshotRecord>> {
        // Validated in `read`; access is checked again here because it is cheap relative to I/O
        // and keeps this function safe without an unsafe unchecked access.
        &rkyv::access::<ArchivedSnapshotBody, rkyv::rancor::Error>(&self.body)
            .expect("validated on read")
            .records
    }
    pub fn len(&self) -> usize {
        self.records().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn size_bytes(&self) -> usize {
        self.body.len() + HEADER_LEN
    }
}

/// Read and validate one snapshot file.
pub fn read(path: &Path) -> Result<Snapshot, String> {
    let data = std::fs::read(path).map_err(|e| e.to_string())?;
    parse(&data, path)
}

/// Validate the bytes of a snapshot file (read from `path`, which only names it in the result):
/// header, CRC, then rkyv's bytecheck of the archive. The bytes are untrusted: any content gives
/// a snapshot or an error.
pub fn parse(data: &[u8], path: &Path) -> Result<Snapshot, String> {
    if data.len() < HEADER_LEN || &data[..8] != MAGIC {
        return Err("bad magic".into());
    }
    let version = u32::from_be_bytes(data[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(format!("unknown format version {version}"));
    }
    let offset = u64::from_be_bytes(data[12..20].try_into().expect("8 bytes"));
    let len = u64::from_be_bytes(data[20..28].try_into().expect("8 bytes"));
    let crc = u32::from_be_bytes(data[28..32].try_into().expect("4 bytes"));
    // Compared without adding to the untrusted length: HEADER_LEN + len can overflow.
    let body_len = data.len() - HEADER_LEN;
    if body_len as u64 != len {
        return Err(format!("length {body_len} does not match header {len}"));
    }
    let body_bytes = &data[HEADER_LEN..];
    if crc32c::crc32c(body_bytes) != crc {
        return Err("CRC mismatch".into());
    }
    // rkyv needs its archive aligned; the file read gives no such guarantee.
    let mut body = AlignedVec::with_capacity(body_len);
    body.extend_from_slice(body_bytes);
    rkyv::access::<ArchivedSnapshotBody, rkyv::rancor::Error>(&body)
        .map_err(|e| format!("archive invalid: {e}"))?;
    Ok(Snapshot {
        offset,
        path: path.to_path_buf(),
        body,
    })
}

/// The newest valid snapshot in `dir`, if any; invalid ones are reported and skipped (an older
/// snapshot plus a longer log replay still gives the right state).
pub fn latest(dir: &Path) -> io::Result<(Option<Snapshot>, Vec<(PathBuf, String)>)> {
    let mut offsets: Vec<u64> = Vec::new();
    if dir.exists() {
        for e in std::fs::read_dir(dir)? {
            if let Some(o) = e?.file_name().to_str().and_then(parse_name) {
                offsets.push(o);
            }
        }
    }
    offsets.sort_unstable_by(|a, b| b.cmp(a));
    let mut bad = Vec::new();
    for o in offsets {
        let path = dir.join(snapshot_name(o));
        match read(&path) {
            Ok(s) => return Ok((Some(s), bad)),
            Err(reason) => bad.push((path, reason)),
        }
    }
    Ok((None, bad))
}

/// The offset of the newest snapshot file by name (not validated), if any.
pub fn latest_offset(dir: &Path) -> Option<u64> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str().and_then(parse_name))
        .max()
}

/// Remove snapshots older than `keep_offset` (the newest one is kept), and temporary files a
/// crash left half-written (the caller writes one snapshot at a time, so none is in progress).
pub fn remove_older(dir: &Path, keep_offset: u64) -> io::Result<usize> {
    let mut removed = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let older = parse_name(name).is_some_and(|o| o < keep_offset);
        let leftover = name
            .strip_suffix(".tmp")
            .is_some_and(|n| parse_name(n).is_some());
        if older || leftover {
            std::fs::remove_file(e.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_older_keeps_the_newest_and_drops_leftover_temporaries() {
        let dir = std::env::temp_dir().join(format!("rl-snap-rm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir, 5, &[]).unwrap();
        write(&dir, 9, &[]).unwrap();
        std::fs::write(dir.join(format!("{}.tmp", snapshot_name(7))), b"half").unwrap();
        std::fs::write(dir.join("00000000000000000003.log"), b"").unwrap();
        assert_eq!(remove_older(&dir, 9).unwrap(), 2);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            vec!["00000000000000000003.log".to_string(), snapshot_name(9)]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn write_read_validate_and_fall_back() {
        let dir = std::env::temp_dir().join(format!("rl-snap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let recs: Vec<SnapshotRecord> = (0..1000u32)
            .map(|i| SnapshotRecord {
                key: i.to_be_bytes().to_vec(),
                value: vec![i as u8; (i % 7) as usize],
            })
            .collect();
        write(&dir, 41, &recs[..10]).unwrap();
        write(&dir, 999, &recs).unwrap();
        let (s, bad) = latest(&dir).unwrap();
        let s = s.unwrap();
        assert!(bad.is_empty());
        assert_eq!((s.offset, s.len()), (999, 1000));
        let r = &s.records()[123];
        assert_eq!(r.key.as_slice(), &123u32.to_be_bytes());
        assert_eq!(r.value.len(), 123 % 7);
        // Corrupt the newest: the older one is used and the bad one reported.
        let p = dir.join(snapshot_name(999));
        let mut data = std::fs::read(&p).unwrap();
        let n = data.len();
        data[n - 3] ^= 1;
        std::fs::write(&p, data).unwrap();
        let (s, bad) = latest(&dir).unwrap();
        assert_eq!(s.unwrap().offset, 41);
        assert_eq!(bad.len(), 1);
        assert!(bad[0].1.contains("CRC"));
        assert_eq!(remove_older(&dir, 999).unwrap(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_huge_length_in_the_header_is_an_error_not_an_overflow() {
        // fuzz/snapshot_read: a header claiming a body of u64::MAX bytes made `HEADER_LEN + len`
        // overflow (a panic where overflow checks are on, as in debug builds and tests).
        let mut data = b"RLSNAP01".to_vec();
        data.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
        data.extend_from_slice(&0u64.to_be_bytes());
        data.extend_from_slice(&u64::MAX.to_be_bytes());
        data.extend_from_slice(&0u32.to_be_bytes());
        let err = parse(&data, Path::new("x.snapshot")).err().unwrap();
        assert!(err.contains("does not match header"), "{err}");
        // A correct header over the same body length still parses.
        let ok = encode(7, &[]).unwrap();
        assert_eq!(parse(&ok, Path::new("y.snapshot")).unwrap().offset, 7);
    }
}
