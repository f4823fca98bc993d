//! Seed corpora for the storage fuzz targets in `fuzz/fuzz_targets/`:
//!
//! - `log_recovery`, `topic_log_recovery`: segment directories the real append paths wrote
//!   (`PartitionLog::append`, `TopicLog::stage` + `flush` on a `MemDir`, small segments so there
//!   are several), whole, with a torn tail, and with a flipped bit, in the input format of
//!   `fuzz/src/dir_image.rs` (flags, u32, then per segment a u64 base, a u16 length but for the
//!   last, and the bytes);
//! - `produce_stage`: sequences of producer batches (plain, keyed with headers, idempotent with
//!   retries and a new epoch, a compressed-flagged one), each a u16 length and the batch;
//! - `snapshot_read`: snapshot files from `snapshot::encode`, whole and as a bare body.
//!
//! A handful of small files per target: libFuzzer mutates them into the rest.
//! `RINGLEADER_BLESS=1 cargo test -p ringleader-storage --test fuzz_seeds` rewrites
//! `fuzz/seeds/<target>/`; without it this test checks that the committed seeds are the ones this
//! file produces (so they follow the formats as the code evolves).

use futures_lite::future::block_on;
use std::cell::RefCell;
use std::path::PathBuf;
use storage::batch::encode_batch;
use storage::io::{LogDir, MemDir};
use storage::log::{LogConfig, PartitionLog};
use storage::snapshot::{self, SnapshotRecord};
use storage::topic_log::{TopicLog, TopicLogConfig};

#[path = "../../fuzz/seed_files.rs"]
mod seed_files;
use seed_files::Seeds;

/// Flags of the dir-image format (see `fuzz/src/dir_image.rs`).
const FIX_CRCS: u8 = 0x04;
const FLAG6: u8 = 0x40;
const FLAG7: u8 = 0x80;
/// Read chunk index 2: 61 bytes, so batches straddle chunk boundaries.
const CHUNK_61: u8 = 2 << 3;
/// Read chunk index 3: 100 bytes.
const CHUNK_100: u8 = 3 << 3;

/// Every file of `dir` (name → bytes).
fn files(dir: &MemDir) -> Vec<(String, Vec<u8>)> {
    block_on(dir.list())
        .unwrap()
        .into_iter()
        .map(|n| {
            let b = dir.with_file(&n, |b| b.clone()).unwrap();
            (n, b)
        })
        .collect()
}

/// A dir-image input from the segment files of `dir` (`.log` files only; at most four).
fn image(flags: u8, extra: u32, dir: &MemDir) -> Vec<u8> {
    let segs: Vec<(u64, Vec<u8>)> = files(dir)
        .into_iter()
        .filter_map(|(n, b)| Some((n.strip_suffix(".log")?.parse().ok()?, b)))
        .collect();
    image_of(flags, extra, &segs)
}

fn image_of(flags: u8, extra: u32, segs: &[(u64, Vec<u8>)]) -> Vec<u8> {
    assert!((1..=4).contains(&segs.len()), "{} segments", segs.len());
    let mut out = vec![(flags & !3) | (segs.len() - 1) as u8];
    out.extend_from_slice(&extra.to_be_bytes());
    for (i, (base, bytes)) in segs.iter().enumerate() {
        out.extend_from_slice(&base.to_be_bytes());
        if i + 1 < segs.len() {
            out.extend_from_slice(&u16::try_from(bytes.len()).unwrap().to_be_bytes());
        }
        out.extend_from_slice(bytes);
    }
    out
}

fn last_segment(dir: &MemDir) -> String {
    files(dir)
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| n.ends_with(".log"))
        .max()
        .unwrap()
}

/// A `__consumer_offsets`-like log: offset commits, a group record, a tombstone, in several
/// small segments.
fn offsets_log() -> MemDir {
    let dir = MemDir::new();
    let cfg = LogConfig {
        segment_bytes: 300,
        ..LogConfig::default()
    };
    let (mut log, _) = block_on(PartitionLog::open(dir.clone(), cfg, |_, _, _, _| {})).unwrap();
    for i in 0..6u8 {
        let key = [&[0, 1, 0, 1, b'g', 0, 6][..], b"orders", &[0, 0, 0, i]].concat();
        // OffsetCommitValue v3: offset, leader epoch, metadata "", commit timestamp.
        let value = [
            &[0, 3][..],
            &[0, 0, 0, 0, 0, 0, 0, 100 + i],
            &[0, 0, 0, 2, 0, 0],
            &1_700_000_000_000i64.to_be_bytes(),
        ]
        .concat();
        let group_key = [&[0, 2, 0, 1][..], b"g"].concat();
        block_on(log.append(
            &[
                (Some(&key), Some(&value)),
                (
                    Some(&group_key),
                    (i % 3 == 2).then_some(&b"\x00\x03\x00\x08consumer"[..]),
                ),
            ],
            1_700_000_000_000 + i64::from(i),
        ))
        .unwrap();
    }
    dir
}

fn log_recovery_seeds(out: &mut Seeds) {
    let dir = offsets_log();
    out.insert("log_recovery/whole.bin".into(), image(CHUNK_100, 0, &dir));
    out.insert(
        "log_recovery/whole_fix_crcs_small_limits.bin".into(),
        image(CHUNK_61 | FIX_CRCS | FLAG7, 0, &dir),
    );
    // From a snapshot covering offsets 0..=4: replay starts at 5.
    out.insert(
        "log_recovery/start_offset.bin".into(),
        image(CHUNK_61 | FLAG6, 5, &dir),
    );
    let last = last_segment(&dir);
    dir.with_file(&last, |b| b.truncate(b.len() - 9));
    out.insert(
        "log_recovery/torn_tail.bin".into(),
        image(CHUNK_100, 0, &dir),
    );
    let dir = offsets_log();
    let first = files(&dir)[0].0.clone();
    dir.with_file(&first, |b| b[40] ^= 0x10);
    out.insert("log_recovery/bit_flip.bin".into(), image(CHUNK_61, 0, &dir));
    // The end of the offset space: one more record fits, then appends must fail.
    let mut near_max = Vec::new();
    encode_batch(
        i64::MAX as u64 - 1,
        7,
        &[(Some(b"k"), Some(b"v"))],
        &mut near_max,
    );
    out.insert(
        "log_recovery/near_i64_max.bin".into(),
        image_of(CHUNK_100, 0, &[(0, near_max)]),
    );
}

/// A producer batch of `n` records (`key-i`, `value-i`, header `h: i`), timestamps `ts + i`, from
/// producer `pid` / `epoch` starting at sequence `seq` (`pid` -1: not idempotent).
fn producer_batch(n: usize, ts: i64, pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            out.push((z as u8 & 0x7f) | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
    }
    let mut b = Vec::new();
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    b.extend_from_slice(&0i32.to_be_bytes()); // length, patched
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes()); // crc, patched
    b.extend_from_slice(&0i16.to_be_bytes()); // attributes
    b.extend_from_slice(&(n as i32 - 1).to_be_bytes());
    b.extend_from_slice(&ts.to_be_bytes());
    b.extend_from_slice(&(ts + n as i64 - 1).to_be_bytes());
    b.extend_from_slice(&pid.to_be_bytes());
    b.extend_from_slice(&epoch.to_be_bytes());
    b.extend_from_slice(&seq.to_be_bytes());
    b.extend_from_slice(&(n as i32).to_be_bytes());
    for i in 0..n {
        let key = format!("key-{i}");
        let value = format!("value-{i}");
        let mut r = vec![0u8]; // attributes
        varint(&mut r, i as i64); // timestamp delta
        varint(&mut r, i as i64); // offset delta
        varint(&mut r, key.len() as i64);
        r.extend_from_slice(key.as_bytes());
        varint(&mut r, value.len() as i64);
        r.extend_from_slice(value.as_bytes());
        varint(&mut r, 1); // one header
        varint(&mut r, 1);
        r.push(b'h');
        varint(&mut r, 1);
        r.push(b'0' + i as u8);
        varint(&mut b, r.len() as i64);
        b.extend_from_slice(&r);
    }
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// A topic log of plain and idempotent batches (one stamped LogAppendTime) in small segments.
fn topic_log() -> MemDir {
    let dir = MemDir::new();
    let cfg = TopicLogConfig {
        segment_bytes: 400,
        ..TopicLogConfig::default()
    };
    let (log, _) = block_on(TopicLog::open(dir.clone(), cfg)).unwrap();
    let log = RefCell::new(log);
    let batches = [
        (producer_batch(2, 1_000, -1, -1, 0), false),
        (producer_batch(3, 2_000, 7, 0, 0), false),
        (producer_batch(1, 3_000, 7, 0, 3), true),
        (producer_batch(2, 4_000, -1, -1, 0), false),
        (producer_batch(2, 5_000, 7, 0, 4), false),
    ];
    for (mut b, lat) in batches {
        log.borrow_mut().stage(&mut b, 9_000, lat).unwrap();
        block_on(TopicLog::flush(&log)).unwrap();
    }
    dir
}

fn topic_log_recovery_seeds(out: &mut Seeds) {
    let dir = topic_log();
    out.insert(
        "topic_log_recovery/whole.bin".into(),
        image(CHUNK_100, 0, &dir),
    );
    out.insert(
        "topic_log_recovery/whole_fix_crcs_small_segments.bin".into(),
        image(CHUNK_61 | FIX_CRCS | FLAG7, 0, &dir),
    );
    // DeleteRecords moved the log start to 4.
    out.insert(
        "topic_log_recovery/log_start.bin".into(),
        image(CHUNK_61 | FLAG6, 4, &dir),
    );
    let last = last_segment(&dir);
    dir.with_file(&last, |b| b.truncate(b.len() - 20));
    out.insert(
        "topic_log_recovery/torn_tail.bin".into(),
        image(CHUNK_100, 0, &dir),
    );
    // The end of the offset space: one more batch fits, then staging must refuse.
    let mut near_max = producer_batch(1, 1_000, -1, -1, 0);
    near_max[0..8].copy_from_slice(&(i64::MAX - 1).to_be_bytes());
    out.insert(
        "topic_log_recovery/near_i64_max.bin".into(),
        image_of(CHUNK_100, 0, &[(0, near_max)]),
    );
}

fn stage_input(flags: u8, batches: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![flags];
    for b in batches {
        out.extend_from_slice(&u16::try_from(b.len()).unwrap().to_be_bytes());
        out.extend_from_slice(b);
    }
    out
}

fn produce_stage_seeds(out: &mut Seeds) {
    out.insert(
        "produce_stage/plain.bin".into(),
        stage_input(
            0,
            &[
                producer_batch(3, 1_000, -1, -1, 0),
                producer_batch(1, 2_000, -1, -1, 0),
            ],
        ),
    );
    // An idempotent producer: two batches, a retry of the first, a gap, a new epoch, a fenced
    // old epoch.
    out.insert(
        "produce_stage/idempotent.bin".into(),
        stage_input(
            0,
            &[
                producer_batch(2, 1_000, 7, 0, 0),
                producer_batch(2, 1_000, 7, 0, 2),
                producer_batch(2, 1_000, 7, 0, 0),
                producer_batch(1, 1_000, 7, 0, 9),
                producer_batch(1, 1_000, 7, 1, 0),
                producer_batch(1, 1_000, 7, 0, 4),
            ],
        ),
    );
    // LogAppendTime, CRCs fixed by the target, little room for pending bytes.
    out.insert(
        "produce_stage/log_append_time_fix_crcs.bin".into(),
        stage_input(
            0x01 | 0x02 | 0x10,
            &[
                producer_batch(4, 1_000, -1, -1, 0),
                producer_batch(2, 1_000, 3, 0, 0),
            ],
        ),
    );
    // A batch flagged gzip (its body is not a gzip stream: stored as sent, not parsed).
    let mut gz = producer_batch(2, 1_000, -1, -1, 0);
    gz[22] |= 1;
    let crc = crc32c::crc32c(&gz[21..]);
    gz[17..21].copy_from_slice(&crc.to_be_bytes());
    out.insert(
        "produce_stage/compressed_flag.bin".into(),
        stage_input(0, &[gz]),
    );
    // What the storage encoder writes (the coordinator's batches), twice.
    let mut plain = Vec::new();
    encode_batch(
        0,
        5,
        &[(Some(b"k"), Some(b"v")), (Some(b"t"), None)],
        &mut plain,
    );
    out.insert(
        "produce_stage/coordinator_batches.bin".into(),
        stage_input(0, &[plain.clone(), plain]),
    );
}

fn snapshot_seeds(out: &mut Seeds) {
    let recs: Vec<SnapshotRecord> = (0..3u8)
        .map(|i| SnapshotRecord {
            key: vec![0, 1, 0, 1, b'g', i],
            value: vec![i; usize::from(i) * 3],
        })
        .collect();
    let file = snapshot::encode(41, &recs).unwrap();
    out.insert(
        "snapshot_read/three_records.bin".into(),
        [&[0u8][..], &file].concat(),
    );
    // Mode 1: the body only; the target writes the header (offset = mode >> 1).
    out.insert(
        "snapshot_read/body_only.bin".into(),
        [&[1u8][..], &file[32..]].concat(),
    );
    let empty = snapshot::encode(0, &[]).unwrap();
    out.insert(
        "snapshot_read/empty.bin".into(),
        [&[0u8][..], &empty].concat(),
    );
}

fn seeds() -> Seeds {
    let mut out = Seeds::new();
    log_recovery_seeds(&mut out);
    topic_log_recovery_seeds(&mut out);
    produce_stage_seeds(&mut out);
    snapshot_seeds(&mut out);
    out
}

const TARGETS: [&str; 4] = [
    "log_recovery",
    "topic_log_recovery",
    "produce_stage",
    "snapshot_read",
];

#[test]
fn fuzz_seeds_are_current() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds");
    seed_files::check_or_bless(&root, &TARGETS, &seeds(), "ringleader-storage");
}
