//! The input of the segment-recovery targets: a partition directory of one to four segment files.
//!
//! ```text
//! byte 0       flags
//!              bits 0-1  number of segment files - 1
//!              bit  2    fix CRCs: before writing, give every batch whose length field fits a
//!                        correct CRC-32C, so mutated batch contents pass the CRC and reach the
//!                        record, offset and index checks behind it
//!              bits 3-5  recovery read chunk: 1, 7, 61, 100, 512, 4096, 65536 or 8 MiB bytes
//!              bit  6    target-specific (see the target)
//!              bit  7    target-specific (see the target)
//! bytes 1-4    u32 BE, target-specific (a start offset)
//! per segment  u64 BE base offset (the file is named `<20-digit base>.log`), then for every
//!              segment but the last a u16 BE length and that many bytes; the last segment takes
//!              the rest of the input. A short input yields fewer or shorter segments.
//! ```
//!
//! Two segments with the same base are one file (the later wins). `storage/tests/fuzz_seeds.rs`
//! writes the seeds in this format from logs the real append path produced.

use futures_lite::future::block_on;
use std::collections::BTreeMap;
use storage::io::{LogDir, LogFile, MemDir};
use storage::log::segment_name;

const CHUNKS: [usize; 8] = [1, 7, 61, 100, 512, 4096, 65536, 8 << 20];

#[derive(Debug, Clone)]
pub struct DirImage {
    pub flags: u8,
    /// Bytes 1-4.
    pub extra: u32,
    /// File name → bytes (CRCs already fixed when the flag says so).
    pub files: BTreeMap<String, Vec<u8>>,
}

fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let n = n.min(data.len());
    let (a, b) = data.split_at(n);
    *data = b;
    a
}

fn be_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a[..b.len()].copy_from_slice(b);
    u32::from_be_bytes(a)
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a[..b.len()].copy_from_slice(b);
    u64::from_be_bytes(a)
}

impl DirImage {
    pub fn parse(mut data: &[u8]) -> Self {
        let flags = take(&mut data, 1).first().copied().unwrap_or(0);
        let extra = be_u32(take(&mut data, 4));
        let count = (flags & 3) as usize + 1;
        let fix = flags & 4 != 0;
        let mut files = BTreeMap::new();
        for i in 0..count {
            if data.is_empty() {
                break;
            }
            let base = be_u64(take(&mut data, 8));
            let bytes = if i + 1 == count {
                take(&mut data, usize::MAX)
            } else {
                let len = take(&mut data, 2);
                let len = if len.len() == 2 {
                    u16::from_be_bytes([len[0], len[1]]) as usize
                } else {
                    0
                };
                take(&mut data, len)
            };
            let mut bytes = bytes.to_vec();
            if fix {
                fix_crcs(&mut bytes);
            }
            files.insert(segment_name(base), bytes);
        }
        DirImage {
            flags,
            extra,
            files,
        }
    }

    pub fn read_chunk(&self) -> usize {
        CHUNKS[((self.flags >> 3) & 7) as usize]
    }

    pub fn flag6(&self) -> bool {
        self.flags & 0x40 != 0
    }

    pub fn flag7(&self) -> bool {
        self.flags & 0x80 != 0
    }

    /// The files in base-offset order (names sort like their offsets: 20 digits).
    pub fn segments(&self) -> impl Iterator<Item = (&String, &Vec<u8>)> {
        self.files.iter()
    }

    /// A fresh `MemDir` holding these files, durable (synced, directory synced).
    pub fn to_dir(&self) -> MemDir {
        let dir = MemDir::new();
        for (name, bytes) in &self.files {
            write_file(&dir, name, bytes);
        }
        dir
    }
}

/// Creates or replaces `name` in `dir` with `bytes`, durably.
/// The base offset a segment name of the image stands for (`segments()` yields only such
/// names). The models keep their own parsing rather than the code under test's.
pub fn base_of(name: &str) -> u64 {
    name[..20].parse().expect("segment name")
}

pub fn write_file(dir: &MemDir, name: &str, bytes: &[u8]) {
    block_on(async {
        let f = dir.open(name).await?;
        f.truncate(0).await?;
        f.write_at(0, bytes.to_vec()).await?;
        f.sync().await?;
        dir.sync_dir().await
    })
    .expect("MemDir does not fail unless told to");
}

/// Every file of `dir` with its bytes.
pub fn dir_files(dir: &MemDir) -> BTreeMap<String, Vec<u8>> {
    let names = block_on(dir.list()).expect("MemDir lists");
    names
        .into_iter()
        .map(|n| {
            let bytes = dir
                .with_file(&n, |b| b.clone())
                .expect("listed file exists");
            (n, bytes)
        })
        .collect()
}

/// Walks `bytes` as a sequence of batches by their length fields and stores the correct CRC-32C
/// in each one that fits; stops at the first length that does not.
pub fn fix_crcs(bytes: &mut [u8]) {
    let mut pos = 0usize;
    while bytes.len() - pos >= 61 {
        let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().expect("4 bytes"));
        if len < 49 || len as usize > bytes.len() - pos - 12 {
            return;
        }
        let end = pos + 12 + len as usize;
        let crc = crc32c::crc32c(&bytes[pos + 21..end]);
        bytes[pos + 17..pos + 21].copy_from_slice(&crc.to_be_bytes());
        pos = end;
    }
}
