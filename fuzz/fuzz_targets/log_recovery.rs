//! Recovery of a `__consumer_offsets` partition log (`storage::log::PartitionLog::open_from`) on
//! a directory of arbitrary segment files (see `ringleader_fuzz::dir_image` for the input;
//! flag 6: open with the start offset in bytes 1-4, as after loading a snapshot; flag 7: small
//! limits, 200-byte batches and 300-byte segments).
//!
//! The contract checked, against a model written from the documentation of `open` (scan each
//! segment in offset order, keep whole CRC-valid batches whose records all parse and whose
//! offsets neither go back nor fall below the segment's base, cut the first segment that has
//! anything else at that batch, remove every later segment):
//! - recovery never panics and, on a disk that does not fail, never errors;
//! - what remains on disk is exactly that prefix: each kept file is a prefix of what it was,
//!   files after the cut are gone; a cut is reported iff something was cut;
//! - the records replayed are exactly those of the kept batches (from the start offset on), in
//!   order, and the next offset is one past the last kept batch (at least the last segment's base
//!   and the start offset);
//! - reopening is idempotent: no cut, same files, same records, same next offset;
//! - the log continues: an append gets the next offset, and after reopening it is there too
//!   (unless the next offset is past i64::MAX: then the append fails and changes nothing).

#![no_main]

use futures_lite::future::block_on;
use libfuzzer_sys::fuzz_target;
use ringleader_fuzz::dir_image::{base_of, dir_files, DirImage};
use std::collections::BTreeMap;
use storage::batch::{for_each_record, peek_batch, Peek};
use storage::io::MemDir;
use storage::log::{LogConfig, PartitionLog, RecoveryReport};

type Rec = (u64, i64, Option<Vec<u8>>, Option<Vec<u8>>);

fn open(
    dir: &MemDir,
    cfg: &LogConfig,
    start: u64,
) -> (PartitionLog<MemDir>, RecoveryReport, Vec<Rec>) {
    let mut seen = Vec::new();
    let (log, rep) = block_on(PartitionLog::open_from(
        dir.clone(),
        cfg.clone(),
        start,
        |o, t, k, v| seen.push((o, t, k.map(<[u8]>::to_vec), v.map(<[u8]>::to_vec))),
    ))
    .expect("recovery on a disk that does not fail succeeds");
    (log, rep, seen)
}

struct Model {
    files: BTreeMap<String, Vec<u8>>,
    records: Vec<Rec>,
    batches: u64,
    next: u64,
    cut: bool,
}

fn model(img: &DirImage, max_batch: usize, start: u64) -> Model {
    let mut m = Model {
        files: BTreeMap::new(),
        records: Vec::new(),
        batches: 0,
        next: img.segments().next().map_or(0, |(n, _)| base_of(n)),
        cut: false,
    };
    for (name, bytes) in img.segments() {
        if m.cut {
            continue; // removed
        }
        m.next = m.next.max(base_of(name));
        let mut pos = 0usize;
        while pos < bytes.len() {
            let mut recs = Vec::new();
            let ok = match peek_batch(&bytes[pos..], pos as u64, max_batch) {
                Ok(Peek::Batch(h)) if h.base_offset >= m.next => {
                    for_each_record(&bytes[pos..pos + h.size], &h, pos as u64, |o, t, k, v| {
                        recs.push((o, t, k.map(<[u8]>::to_vec), v.map(<[u8]>::to_vec)))
                    })
                    .is_ok()
                    .then_some(h)
                }
                _ => None,
            };
            let Some(h) = ok else {
                m.cut = true;
                break;
            };
            m.records.extend(recs.into_iter().filter(|r| r.0 >= start));
            m.batches += 1;
            m.next = h.last_offset() + 1;
            pos += h.size;
        }
        m.files.insert(name.clone(), bytes[..pos].to_vec());
    }
    m.next = m.next.max(start);
    m
}

fuzz_target!(|data: &[u8]| {
    let img = DirImage::parse(data);
    let start = if img.flag6() { u64::from(img.extra) } else { 0 };
    let cfg = LogConfig {
        segment_bytes: if img.flag7() { 300 } else { 1 << 20 },
        max_batch_bytes: if img.flag7() { 200 } else { 1 << 20 },
        read_chunk_bytes: img.read_chunk(),
    };
    let want = model(&img, cfg.max_batch_bytes, start);
    let dir = img.to_dir();

    let (log, rep, seen) = open(&dir, &cfg, start);
    assert_eq!(
        dir_files(&dir),
        want.files,
        "what remains is not the valid prefix"
    );
    assert_eq!(
        rep.truncated.is_some(),
        want.cut,
        "cut reported: {:?}",
        rep.truncated
    );
    assert_eq!(rep.segments, want.files.len());
    assert_eq!(rep.batches, want.batches);
    assert!(
        seen == want.records,
        "replayed records differ from the kept batches'"
    );
    assert_eq!(log.next_offset(), want.next, "next offset");
    drop(log);

    let (mut log, rep, seen2) = open(&dir, &cfg, start);
    assert_eq!(rep.truncated, None, "a second recovery cut again");
    assert_eq!(
        dir_files(&dir),
        want.files,
        "a second recovery changed the files"
    );
    assert!(seen2 == seen, "a second recovery replayed other records");
    assert_eq!(log.next_offset(), want.next);

    let appended = block_on(log.append(&[(Some(b"fuzz-key"), Some(b"fuzz-value"))], 42));
    if want.next > i64::MAX as u64 {
        // No offset left (a corrupt log got there): the append must fail and change nothing.
        assert!(appended.is_err(), "appended past i64::MAX");
        drop(log);
        let (log, rep, seen3) = open(&dir, &cfg, start);
        assert_eq!(rep.truncated, None, "a failed append left something behind");
        assert!(seen3 == seen, "a failed append changed the records");
        assert_eq!(log.next_offset(), want.next);
        return;
    }
    let (first, last) = appended.expect("append on a disk that does not fail");
    assert_eq!((first, last), (want.next, want.next), "append offsets");
    drop(log);
    let (log, rep, seen3) = open(&dir, &cfg, start);
    assert_eq!(rep.truncated, None, "recovery cut an acknowledged append");
    let mut expect = seen;
    expect.push((
        want.next,
        42,
        Some(b"fuzz-key".to_vec()),
        Some(b"fuzz-value".to_vec()),
    ));
    assert!(
        seen3 == expect,
        "the appended record is not replayed after the others"
    );
    assert_eq!(log.next_offset(), want.next + 1);
});
