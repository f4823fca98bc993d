//! Recovery of a topic partition log (`storage::topic_log::TopicLog::open`) on a directory of
//! arbitrary segment files (see `ringleader_fuzz::dir_image` for the input; flag 6: the directory
//! also holds a `log-start-offset` file for the offset in bytes 1-4 (bit 31 set: with a wrong
//! CRC); flag 7: 300-byte segments, so the append at the end rolls).
//!
//! The contract checked, against a model written from the documentation of `open` (scan each
//! segment in offset order, keep whole CRC-valid batches whose offsets do not go back and lie
//! between the segment's base and the next segment's, cut the first segment that has anything
//! else at that batch, remove every later segment; the log start is the stored one if valid and
//! not before the first segment, else the first segment's base; a log that ends before its start
//! continues from it):
//! - recovery never panics and, on a disk that does not fail, never errors;
//! - what remains on disk is exactly that prefix; a cut is reported iff something was cut;
//! - next offset = high watermark = one past the last kept batch (at least the last segment's
//!   base and the log start); the log start offset is as above;
//! - the rebuilt index serves every kept batch: a read at its first offset (or the log start)
//!   returns exactly that batch's bytes; a read at the high watermark is empty, past it or before
//!   the log start out of range;
//! - reopening is idempotent, and the log continues: a staged and flushed batch gets the next
//!   offset and is read back after another reopen (unless the next offset is past i64::MAX:
//!   then the batch is refused).

#![no_main]

use futures_lite::future::block_on;
use libfuzzer_sys::fuzz_target;
use ringleader_fuzz::dir_image::{base_of, dir_files, write_file, DirImage};
use std::cell::RefCell;
use std::collections::BTreeMap;
use storage::batch::{encode_batch, peek_batch, Peek};
use storage::io::MemDir;
use storage::topic_log::{AppendError, Read, TopicLog, TopicLogConfig, TopicRecovery};

const START_FILE: &str = "log-start-offset";

fn open(dir: &MemDir, cfg: &TopicLogConfig) -> (RefCell<TopicLog<MemDir>>, TopicRecovery) {
    let (log, rep) = block_on(TopicLog::open(dir.clone(), cfg.clone()))
        .expect("recovery on a disk that does not fail succeeds");
    (RefCell::new(log), rep)
}

/// One kept batch: first offset, last offset, bytes.
type Batch = (u64, u64, Vec<u8>);

struct Model {
    files: BTreeMap<String, Vec<u8>>,
    batches: Vec<Batch>,
    next: u64,
    log_start: u64,
    cut: bool,
}

fn model(img: &DirImage, max_batch: usize, stored_start: Option<u64>) -> Model {
    let mut m = Model {
        files: BTreeMap::new(),
        batches: Vec::new(),
        next: img.segments().next().map_or(0, |(n, _)| base_of(n)),
        log_start: 0,
        cut: false,
    };
    let names: Vec<&String> = img.files.keys().collect();
    for (i, (name, bytes)) in img.segments().enumerate() {
        if m.cut {
            continue;
        }
        m.next = m.next.max(base_of(name));
        let limit = names.get(i + 1).map_or(u64::MAX, |n| base_of(n));
        let mut pos = 0usize;
        while pos < bytes.len() {
            match peek_batch(&bytes[pos..], pos as u64, max_batch) {
                Ok(Peek::Batch(h)) if h.base_offset >= m.next && h.last_offset() < limit => {
                    m.batches.push((
                        h.base_offset,
                        h.last_offset(),
                        bytes[pos..pos + h.size].to_vec(),
                    ));
                    m.next = h.last_offset() + 1;
                    pos += h.size;
                }
                _ => {
                    m.cut = true;
                    break;
                }
            }
        }
        m.files.insert(name.clone(), bytes[..pos].to_vec());
    }
    let first = m.files.keys().next().map_or(m.next, |n| base_of(n));
    m.log_start = stored_start.unwrap_or(first).max(first);
    m.next = m.next.max(m.log_start);
    m
}

fn read_one(log: &RefCell<TopicLog<MemDir>>, offset: u64) -> Option<Vec<u8>> {
    let plan = match log.borrow().read(offset, 1, true) {
        Read::Data(p) => p,
        _ => return None,
    };
    Some(block_on(plan.read()).expect("MemDir reads"))
}

fn check_reads(log: &RefCell<TopicLog<MemDir>>, m: &Model) {
    let l = log.borrow();
    assert_eq!(l.log_start_offset(), m.log_start, "log start offset");
    assert_eq!(l.next_offset(), m.next, "next offset");
    assert_eq!(l.high_watermark(), m.next, "high watermark");
    assert!(
        matches!(l.read(m.next, 1 << 20, true), Read::Empty),
        "read at the high watermark"
    );
    if m.next < u64::MAX {
        assert!(matches!(l.read(m.next + 1, 1, true), Read::OutOfRange));
    }
    if m.log_start > 0 {
        assert!(matches!(l.read(m.log_start - 1, 1, true), Read::OutOfRange));
    }
    drop(l);
    for (first, last, bytes) in &m.batches {
        if *last < m.log_start {
            continue;
        }
        let at = (*first).max(m.log_start);
        let got = read_one(log, at);
        assert!(
            got.as_deref() == Some(bytes.as_slice()),
            "read at {at} does not return the batch {first}..={last}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let img = DirImage::parse(data);
    let cfg = TopicLogConfig {
        segment_bytes: if img.flag7() { 300 } else { 1 << 20 },
        read_chunk_bytes: img.read_chunk(),
        ..TopicLogConfig::default()
    };
    let max_batch = cfg.max_message_bytes.max(1 << 20) * 4;
    let dir = img.to_dir();
    let mut stored_start = None;
    if img.flag6() {
        let offset = u64::from(img.extra & 0x7fff_ffff);
        let mut rec = b"RLSO".to_vec();
        rec.extend_from_slice(&offset.to_be_bytes());
        let mut crc = crc32c::crc32c(&rec);
        if img.extra & 0x8000_0000 != 0 {
            crc ^= 1;
        } else {
            stored_start = Some(offset);
        }
        rec.extend_from_slice(&crc.to_be_bytes());
        write_file(&dir, START_FILE, &rec);
    }
    let mut want = model(&img, max_batch, stored_start);
    let before = dir_files(&dir);

    let (log, rep) = open(&dir, &cfg);
    let mut files = dir_files(&dir);
    let start_file = files.remove(START_FILE);
    assert_eq!(
        start_file.as_ref(),
        before.get(START_FILE),
        "start file changed"
    );
    assert_eq!(files, want.files, "what remains is not the valid prefix");
    assert_eq!(
        rep.truncated.is_some(),
        want.cut,
        "cut reported: {:?}",
        rep.truncated
    );
    assert_eq!(rep.segments, want.files.len());
    assert_eq!(rep.batches, want.batches.len() as u64);
    assert_eq!(
        (rep.next_offset, rep.log_start_offset),
        (want.next, want.log_start)
    );
    check_reads(&log, &want);
    drop(log);

    let (log, rep) = open(&dir, &cfg);
    assert_eq!(rep.truncated, None, "a second recovery cut again");
    let after = dir_files(&dir);
    let mut again = after.clone();
    again.remove(START_FILE);
    assert_eq!(again, want.files, "a second recovery changed the files");
    check_reads(&log, &want);

    let mut batch = Vec::new();
    encode_batch(
        0,
        42,
        &[(Some(b"fuzz-key"), Some(b"fuzz-value"))],
        &mut batch,
    );
    let result = log.borrow_mut().stage(&mut batch, 1_000, false);
    if want.next > i64::MAX as u64 {
        // No offset left (a corrupt log got there): the batch must be refused.
        assert!(
            matches!(result, Err(AppendError::Invalid(_))),
            "staged past i64::MAX: {result:?}"
        );
        assert!(!log.borrow().has_pending());
        return;
    }
    let staged = result.expect("a valid batch is accepted");
    assert_eq!(
        (staged.base_offset, staged.last_offset),
        (want.next, want.next)
    );
    assert_eq!(
        block_on(TopicLog::flush(&log)).expect("flush on a disk that does not fail"),
        Some(want.next + 1)
    );
    drop(log);
    let (log, rep) = open(&dir, &cfg);
    assert_eq!(rep.truncated, None, "recovery cut a flushed batch");
    want.batches.push((want.next, want.next, batch));
    want.next += 1;
    check_reads(&log, &want);
});
