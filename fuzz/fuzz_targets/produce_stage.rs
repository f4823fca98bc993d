//! Producer batch validation (`storage::topic_log::TopicLog::stage`): the bytes of a Produce
//! request's `records` field, which a client fully controls, on their way into a topic log.
//!
//! Input: byte 0 flags (bit 0: the topic uses LogAppendTime; bit 1: fix CRCs, so mutated
//! batches get past the CRC to the header, record and producer-sequence checks; bits 2-3:
//! `message.max.bytes` 1048588, 1000, 200 or 61; bit 4: at most 300 bytes staged before a flush),
//! then a sequence of batches, each a u16 BE length and that many bytes (the last may be short).
//! Each is staged into one log in turn (a `Busy` answer is followed by a flush and a retry).
//!
//! Checks, per batch: `stage` never panics; it accepts only a batch that is whole, magic 2,
//! CRC-32C-valid (checked here independently of `peek_batch`), not control, transactional only
//! with a producer id, with `last offset delta = records - 1` and, when uncompressed, records
//! that parse with offset deltas 0..n; an accepted batch gets the next offsets and is stored CRC-valid (also after the
//! LogAppendTime rewrite); a duplicate gets the offsets of an earlier batch and stages nothing; a
//! rejected batch changes neither the log nor the caller's bytes. At the end, after a flush and
//! a reopen, recovery cuts nothing, every accepted batch reads back byte for byte, and the
//! producer state came back (the last accepted idempotent batch, sent again, is a duplicate).

#![no_main]

use futures_lite::future::block_on;
use libfuzzer_sys::fuzz_target;
use ringleader_fuzz::dir_image::fix_crcs;
use std::cell::RefCell;
use storage::batch::{for_each_record, peek_batch, Peek};
use storage::io::MemDir;
use storage::topic_log::{AppendError, Read, TopicLog, TopicLogConfig};

const NOW: i64 = 1_700_000_000_000;
const MAX_MESSAGE: [usize; 4] = [1_048_588, 1000, 200, 61];

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// The independent part of the acceptance rule: a whole magic-2 batch with a correct CRC-32C.
fn crc_valid(b: &[u8]) -> bool {
    b.len() >= 61
        && be_i32(b, 8) as i64 == b.len() as i64 - 12
        && b[16] == 2
        && u32::from_be_bytes(b[17..21].try_into().unwrap()) == crc32c::crc32c(&b[21..])
}

fn read_one(log: &RefCell<TopicLog<MemDir>>, offset: u64) -> Option<Vec<u8>> {
    let plan = match log.borrow().read(offset, 1, true) {
        Read::Data(p) => p,
        _ => return None,
    };
    Some(block_on(plan.read()).expect("MemDir reads"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let log_append_time = flags & 1 != 0;
    let cfg = TopicLogConfig {
        segment_bytes: 400,
        max_message_bytes: MAX_MESSAGE[((flags >> 2) & 3) as usize],
        max_pending_bytes: if flags & 0x10 != 0 { 300 } else { 32 << 20 },
        read_chunk_bytes: 97,
    };
    let dir = MemDir::new();
    let (log, _) = block_on(TopicLog::open(dir.clone(), cfg.clone())).expect("empty log opens");
    let log = RefCell::new(log);
    // (first offset, last offset, stored bytes) of every accepted batch, and the original bytes
    // of the last accepted one from an idempotent producer.
    let mut accepted: Vec<(u64, u64, Vec<u8>)> = Vec::new();
    let mut last_idempotent: Option<(Vec<u8>, u64, u64)> = None;

    while !rest.is_empty() {
        let len = if rest.len() >= 2 {
            let n = u16::from_be_bytes([rest[0], rest[1]]) as usize;
            rest = &rest[2..];
            n.min(rest.len())
        } else {
            rest.len()
        };
        let (chunk, tail) = rest.split_at(len);
        rest = tail;
        let mut orig = chunk.to_vec();
        if flags & 2 != 0 {
            fix_crcs(&mut orig);
        }
        let mut buf = orig.clone();
        let before = log.borrow().next_offset();
        let mut result = log.borrow_mut().stage(&mut buf, NOW, log_append_time);
        if result == Err(AppendError::Busy) {
            assert!(log.borrow().has_pending(), "Busy with nothing staged");
            block_on(TopicLog::flush(&log)).expect("flush");
            result = log.borrow_mut().stage(&mut buf, NOW, log_append_time);
            assert_ne!(result, Err(AppendError::Busy), "Busy right after a flush");
        }
        let after = log.borrow().next_offset();
        let s = match result {
            Err(_) => {
                assert_eq!(after, before, "a rejected batch moved the log end");
                assert!(buf == orig, "a rejected batch was modified");
                continue;
            }
            Ok(s) => s,
        };
        assert!(
            crc_valid(&orig),
            "accepted a batch that is not whole, magic 2 and CRC-valid"
        );
        assert!(
            orig.len() <= cfg.max_message_bytes,
            "accepted a batch over message.max.bytes"
        );
        let attrs = be_i16(&orig, 21);
        let count = be_i32(&orig, 57);
        let delta = be_i32(&orig, 23);
        assert_eq!(attrs & 0x20, 0, "accepted a control batch");
        assert!(
            attrs & 0x10 == 0 || be_i64(&orig, 43) >= 0,
            "accepted a transactional batch without a producer id"
        );
        assert!(
            count > 0 && delta == count - 1,
            "accepted {count} records with delta {delta}"
        );
        if attrs & 7 == 0 {
            let Ok(Peek::Batch(h)) = peek_batch(&orig, 0, orig.len()) else {
                panic!("accepted a batch peek_batch refuses");
            };
            let mut n = 0u64;
            let mut in_order = true;
            for_each_record(&orig, &h, 0, |o, _, _, _| {
                in_order &= o == h.base_offset + n;
                n += 1;
            })
            .expect("accepted records that do not parse");
            assert!(
                in_order && n == count as u64,
                "accepted records out of order"
            );
        }
        if s.duplicate {
            assert_eq!(after, before, "a duplicate staged something");
            assert!(buf == orig, "a duplicate was modified");
            assert!(
                accepted
                    .iter()
                    .any(|(f, l, _)| (*f, *l) == (s.base_offset, s.last_offset)),
                "a duplicate answered offsets no batch has"
            );
            continue;
        }
        assert_eq!(s.base_offset, before, "offsets do not continue the log");
        assert_eq!(s.last_offset, before + delta as u64);
        assert_eq!(after, s.last_offset + 1);
        let Ok(Peek::Batch(h)) = peek_batch(&buf, 0, buf.len()) else {
            panic!("the stored batch is not CRC-valid");
        };
        assert_eq!((h.base_offset, h.size), (s.base_offset, buf.len()));
        if log_append_time {
            assert_eq!(s.log_append_time, NOW);
            assert_eq!(be_i64(&buf, 35), NOW, "max timestamp not stamped");
            assert_ne!(
                be_i16(&buf, 21) & 0x08,
                0,
                "timestamp type not LogAppendTime"
            );
        } else {
            assert_eq!(s.log_append_time, -1);
            assert!(
                buf[16..] == orig[16..],
                "a CreateTime batch changed past its header"
            );
        }
        if be_i64(&orig, 43) >= 0 {
            last_idempotent = Some((orig.clone(), s.base_offset, s.last_offset));
        }
        accepted.push((s.base_offset, s.last_offset, buf));
    }

    let end = log.borrow().next_offset();
    block_on(TopicLog::flush(&log)).expect("flush");
    drop(log);
    let (log, rep) = block_on(TopicLog::open(dir.clone(), cfg)).expect("reopen");
    assert_eq!(rep.truncated, None, "recovery cut accepted batches");
    assert_eq!(rep.next_offset, end);
    let log = RefCell::new(log);
    for (first, last, bytes) in &accepted {
        assert!(
            read_one(&log, *first).as_deref() == Some(bytes.as_slice()),
            "batch {first}..={last} does not read back"
        );
    }
    if let Some((mut orig, first, last)) = last_idempotent {
        let s = log
            .borrow_mut()
            .stage(&mut orig, NOW, log_append_time)
            .expect("a retry of the last idempotent batch is accepted");
        assert!(s.duplicate, "producer state was not recovered");
        assert_eq!((s.base_offset, s.last_offset), (first, last));
    }
});
