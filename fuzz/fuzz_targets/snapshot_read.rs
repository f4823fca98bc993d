//! Snapshot files (`storage::snapshot::parse`, what `read` / `latest` run on a file at start-up).
//! The file is untrusted in the sense that matters: a torn or bit-rotted snapshot must be
//! rejected (the broker then falls back to an older snapshot and a longer replay), never crash
//! the broker or be used half-valid.
//!
//! Input: byte 0 selects the mode. Even: the rest is the whole file. Odd: the rest is the body
//! (the rkyv archive) and the target writes a correct header for it (magic, version, length,
//! CRC-32C), so mutated archives get past the CRC and reach rkyv's validation, which is what
//! stands between a corrupt-but-CRC-valid body and undefined behaviour in the in-place reads.
//!
//! Checks: no panic; a snapshot that validates can be read whole (every key and value byte is
//! touched; the address sanitizer checks the reads); its records written out again with
//! `snapshot::encode` validate and read back the same.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use storage::snapshot::{encode, parse, Snapshot, SnapshotRecord};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let file;
    let bytes = if mode & 1 == 0 {
        rest
    } else {
        let mut f = Vec::with_capacity(32 + rest.len());
        f.extend_from_slice(b"RLSNAP01");
        f.extend_from_slice(&1u32.to_be_bytes());
        f.extend_from_slice(&u64::from(mode >> 1).to_be_bytes());
        f.extend_from_slice(&(rest.len() as u64).to_be_bytes());
        f.extend_from_slice(&crc32c::crc32c(rest).to_be_bytes());
        f.extend_from_slice(rest);
        file = f;
        &file
    };
    let Ok(snap) = parse(bytes, Path::new("fuzz.snapshot")) else {
        return;
    };
    let records = owned(&snap);
    assert_eq!(records.len(), snap.len());
    assert_eq!(snap.is_empty(), records.is_empty());
    let again = encode(snap.offset, &records).expect("validated records re-encode");
    let back = parse(&again, Path::new("again.snapshot")).expect("re-encoded snapshot validates");
    assert_eq!(back.offset, snap.offset);
    let back_records = owned(&back);
    assert_eq!(back_records, records, "records changed across re-encoding");
});

/// The records of a snapshot read in place, copied out.
fn owned(snap: &Snapshot) -> Vec<SnapshotRecord> {
    snap.records()
        .iter()
        .map(|r| SnapshotRecord {
            key: r.key.as_slice().to_vec(),
            value: r.value.as_slice().to_vec(),
        })
        .collect()
}
