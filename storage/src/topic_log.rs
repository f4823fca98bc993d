//! A topic partition's log: the record batches producers send, stored as they came (after offset
//! assignment) in the same segment files as `__consumer_offsets` (`<20-digit base offset>.log`,
//! Kafka's batch format v2), so Fetch serves them byte for byte without re-encoding.
//!
//! What it keeps in memory, rebuilt by one sequential scan on open:
//! - an index of every batch (base and last offset, file position, size, max timestamp): the
//!   offset index and the time index at once. Lookups are binary searches; 40 bytes per batch.
//! - the idempotent-producer state: per producer id, its epoch and the sequence ranges of its
//!   last five batches (Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`), so a retried batch
//!   is answered with its first offset instead of being stored twice.
//!
//! Writes are staged, then flushed: `stage` validates a batch, assigns offsets and appends it to
//! an in-memory buffer; `flush` writes everything staged since the last flush with one write and
//! one fdatasync. Only flushed batches are visible (the high watermark is the durable end), so a
//! consumer never reads what a crash could take back. A failed flush leaves the log unusable:
//! the caller reopens it from disk and fails every request that waited on unflushed batches.
//!
//! The log start offset (moved by DeleteRecords and retention) is kept in a 16-byte file
//! `log-start-offset` (magic, offset, CRC-32C), one small write and a sync.

use crate::batch::{for_each_record, peek_batch, BatchHeader, Peek, BATCH_OVERHEAD, LOG_OVERHEAD};
use crate::io::{LogDir, LogFile};
use crate::log::{parse_segment_name, scan_batches, segment_name};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::rc::Rc;

const CRC_START: usize = 21;
const ATTR_COMPRESSION: i16 = 0x07;
const ATTR_LOG_APPEND_TIME: i16 = 0x08;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;
/// Kafka keeps the sequence ranges of a producer's last five batches for duplicate detection.
const PRODUCER_BATCHES_KEPT: usize = 5;
const START_FILE: &str = "log-start-offset";
const START_MAGIC: &[u8; 4] = b"RLSO";

#[derive(Debug, Clone)]
pub struct TopicLogConfig {
    /// Roll to a new segment once the active one reaches this size (`segment.bytes`).
    pub segment_bytes: u64,
    /// Largest batch a producer may send (`message.max.bytes`); larger is MESSAGE_TOO_LARGE.
    pub max_message_bytes: usize,
    /// Bytes staged and not yet flushed before `stage` answers `Busy` (backpressure).
    pub max_pending_bytes: usize,
    /// Recovery reads segments in chunks of this size.
    pub read_chunk_bytes: usize,
}

impl Default for TopicLogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1 << 30,
            max_message_bytes: 1_048_588,
            max_pending_bytes: 32 << 20,
            read_chunk_bytes: 8 << 20,
        }
    }
}

/// Why a batch was not accepted. Each maps to one Kafka error code (`code`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendError {
    /// CRC mismatch, bad magic, lengths that do not add up: CORRUPT_MESSAGE.
    Corrupt(String),
    /// Larger than `message.max.bytes`: MESSAGE_TOO_LARGE.
    TooLarge(usize),
    /// Well-formed but not acceptable (control batch, offsets not contiguous): INVALID_RECORD.
    Invalid(String),
    /// A sequence gap for an idempotent producer: OUT_OF_ORDER_SEQUENCE_NUMBER.
    OutOfOrderSequence { expected: i32, got: i32 },
    /// An epoch older than the producer's current one: INVALID_PRODUCER_EPOCH.
    StaleProducerEpoch { current: i16, got: i16 },
    /// Too many bytes staged; wait for the flush in progress and stage again.
    Busy,
}

impl AppendError {
    /// The Kafka error code (reference §3; `Errors.java`).
    pub fn code(&self) -> i16 {
        match self {
            AppendError::Corrupt(_) => 2,
            AppendError::TooLarge(_) => 10,
            AppendError::Invalid(_) => 87,
            AppendError::OutOfOrderSequence { .. } => 45,
            AppendError::StaleProducerEpoch { .. } => 47,
            AppendError::Busy => 7, // REQUEST_TIMED_OUT: only if the caller gives up waiting
        }
    }
    pub fn message(&self) -> String {
        match self {
            AppendError::Corrupt(m) | AppendError::Invalid(m) => m.clone(),
            AppendError::TooLarge(n) => format!("batch of {n} bytes is over message.max.bytes"),
            AppendError::OutOfOrderSequence { expected, got } => {
                format!("out of order sequence number: expected {expected}, got {got}")
            }
            AppendError::StaleProducerEpoch { current, got } => {
                format!("producer epoch {got} is older than the current {current}")
            }
            AppendError::Busy => "too many bytes waiting for the disk".into(),
        }
    }
}

/// What `stage` did with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Staged {
    pub base_offset: u64,
    pub last_offset: u64,
    /// The batch's timestamp if the broker set it (LogAppendTime), else -1 (Kafka's response).
    pub log_append_time: i64,
    /// A retry of a batch already in the log: nothing was added; the offsets are the original's.
    pub duplicate: bool,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    base: u64,
    last: u64,
    pos: u64,
    size: u32,
    max_ts: i64,
}

struct Segment<F> {
    base: u64,
    file: Rc<F>,
    size: u64,
    entries: Vec<Entry>,
    max_ts: i64,
}

#[derive(Debug, Clone, Default)]
struct Producer {
    epoch: i16,
    /// (first sequence, last sequence, base offset, last offset), oldest first.
    batches: VecDeque<(i32, i32, u64, u64)>,
}

/// A contiguous byte range of one segment to read: whole batches.
pub struct ReadPlan<F> {
    file: Rc<F>,
    pos: u64,
    len: usize,
}

impl<F: LogFile> ReadPlan<F> {
    pub async fn read(self) -> io::Result<Vec<u8>> {
        self.file.read_at(self.pos, self.len).await
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The answer to a read.
pub enum Read<F> {
    Data(ReadPlan<F>),
    /// Nothing at or after the offset yet (it is the high watermark).
    Empty,
    /// The offset is before the log start or after the high watermark.
    OutOfRange,
}

/// What a reopened log found on disk.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TopicRecovery {
    pub segments: usize,
    pub batches: u64,
    pub bytes: u64,
    pub log_start_offset: u64,
    pub next_offset: u64,
    /// Where the log was cut: (segment file, byte position, reason).
    pub truncated: Option<(String, u64, String)>,
}

pub struct TopicLog<D: LogDir> {
    dir: D,
    config: TopicLogConfig,
    segments: Vec<Segment<D::File>>,
    log_start: u64,
    /// Next offset to assign (staged batches included).
    next_offset: u64,
    /// End of what is durable and readable.
    high_watermark: u64,
    pending: Vec<u8>,
    pending_entries: Vec<Entry>,
    producers: HashMap<i64, Producer>,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The producer fields of a batch header: (producer id, epoch, base sequence).
fn producer_fields(batch: &[u8]) -> (i64, i16, i32) {
    (be_i64(batch, 43), be_i16(batch, 51), be_i32(batch, 53))
}

/// `seq + n` with Kafka's wrap-around at i32::MAX (`DefaultRecordBatch.incrementSequence`).
fn add_seq(seq: i32, n: i32) -> i32 {
    if seq > i32::MAX - n {
        n - (i32::MAX - seq) - 1
    } else {
        seq + n
    }
}

impl<D: LogDir + Clone> TopicLog<D> {
    /// Open (or create) the log in `dir`: scan every segment, truncate a torn or corrupt tail
    /// (later segments are removed so offsets stay contiguous), rebuild the index and the
    /// producer state.
    pub async fn open(dir: D, config: TopicLogConfig) -> io::Result<(Self, TopicRecovery)> {
        let names = dir.list().await?;
        let mut bases: Vec<u64> = names.iter().filter_map(|n| parse_segment_name(n)).collect();
        bases.sort_unstable();
        let stored_start = if names.iter().any(|n| n == START_FILE) {
            read_start_file(&dir).await?
        } else {
            None
        };
        let mut report = TopicRecovery::default();
        let mut segments: Vec<Segment<D::File>> = Vec::new();
        let mut producers: HashMap<i64, Producer> = HashMap::new();
        let mut next_offset = bases.first().copied().unwrap_or(0);
        let mut cut = false;
        let max_batch = config.max_message_bytes.max(1 << 20) * 4;
        for (i, &base) in bases.iter().enumerate() {
            let name = segment_name(base);
            if cut {
                dir.remove(&name).await?;
                continue;
            }
            // A segment holds the offsets from its base up to the next segment's base: a batch
            // outside them (the base offset is not covered by the CRC) is corrupt. One below
            // would let the next roll reuse this segment's name and truncate it; one at or past
            // the next base could not be found by `read`, which picks the segment by base.
            next_offset = next_offset.max(base);
            let limit = bases.get(i + 1).copied();
            let file = dir.open(&name).await?;
            let len = file.len().await?;
            let mut entries = Vec::new();
            let mut seg_max_ts = i64::MIN;
            let (valid, stop) = scan_batches(
                &file,
                len,
                config.read_chunk_bytes,
                max_batch,
                |pos, h, b| {
                    if h.base_offset < next_offset {
                        return Err(format!(
                            "batch base offset {} goes back (expected >= {next_offset})",
                            h.base_offset
                        ));
                    }
                    if let Some(limit) = limit.filter(|&l| h.last_offset() >= l) {
                        return Err(format!(
                            "batch offsets {}..={} reach the next segment's base {limit}",
                            h.base_offset,
                            h.last_offset()
                        ));
                    }
                    let max_ts = be_i64(b, 35);
                    entries.push(Entry {
                        base: h.base_offset,
                        last: h.last_offset(),
                        pos,
                        size: h.size as u32,
                        max_ts,
                    });
                    seg_max_ts = seg_max_ts.max(max_ts);
                    remember_producer(&mut producers, b, h);
                    report.batches += 1;
                    report.bytes += h.size as u64;
                    next_offset = h.last_offset() + 1;
                    Ok(())
                },
            )
            .await?;
            if let Some(reason) = stop {
                file.truncate(valid).await?;
                file.sync().await?;
                report.truncated = Some((name.clone(), valid, reason));
                cut = true;
            }
            segments.push(Segment {
                base,
                file: Rc::new(file),
                size: valid,
                entries,
                max_ts: seg_max_ts,
            });
        }
        if cut {
            dir.sync_dir().await?;
        }
        let first = segments.first().map_or(next_offset, |s| s.base);
        let log_start = stored_start.unwrap_or(first).max(first);
        // A log that ends before its stored start (its segments were removed, or recovery cut
        // its tail) continues from the start, as Kafka's LogLoader does: offsets below the start
        // are never served, so new records must not get them.
        next_offset = next_offset.max(log_start);
        report.segments = segments.len();
        report.log_start_offset = log_start;
        report.next_offset = next_offset;
        Ok((
            Self {
                dir,
                config,
                segments,
                log_start,
                next_offset,
                high_watermark: next_offset,
                pending: Vec::new(),
                pending_entries: Vec::new(),
                producers,
            },
            report,
        ))
    }

    pub fn log_start_offset(&self) -> u64 {
        self.log_start
    }

    /// Take new per-topic limits (an altered `segment.bytes` or `max.message.bytes`): the next
    /// staged batch is checked against the new maximum and the next roll uses the new size.
    pub fn set_limits(&mut self, segment_bytes: u64, max_message_bytes: usize) {
        self.config.segment_bytes = segment_bytes;
        self.config.max_message_bytes = max_message_bytes;
    }
    pub fn high_watermark(&self) -> u64 {
        self.high_watermark
    }
    /// The log end offset including staged, not yet durable batches.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Validate one producer batch (`batch` holds exactly one), assign its offsets and stage it
    /// for the next flush. `now_ms` stamps it when `log_append_time` (the topic's
    /// `message.timestamp.type`). Follows Kafka's `LogValidator` and `ProducerAppendInfo`.
    pub fn stage(
        &mut self,
        batch: &mut [u8],
        now_ms: i64,
        log_append_time: bool,
    ) -> Result<Staged, AppendError> {
        if batch.len() > self.config.max_message_bytes {
            return Err(AppendError::TooLarge(batch.len()));
        }
        let h = match peek_batch(batch, 0, batch.len().max(BATCH_OVERHEAD)) {
            Ok(Peek::Batch(h)) if h.size == batch.len() => h,
            Ok(Peek::Batch(h)) => {
                return Err(AppendError::Corrupt(format!(
                    "batch length {} does not match the {} bytes sent",
                    h.size,
                    batch.len()
                )))
            }
            Ok(Peek::Incomplete { .. }) => {
                return Err(AppendError::Corrupt("truncated record batch".into()))
            }
            Err(e) => return Err(AppendError::Corrupt(e.to_string())),
        };
        // Codecs 0-4: none, gzip, snappy, lz4, zstd. Anything else no consumer can read
        // (Kafka: `CompressionType.forId` fails, CORRUPT_MESSAGE).
        if h.attributes & ATTR_COMPRESSION > 4 {
            return Err(AppendError::Corrupt(format!(
                "unknown compression codec {}",
                h.attributes & ATTR_COMPRESSION
            )));
        }
        if h.attributes & ATTR_CONTROL != 0 {
            return Err(AppendError::Invalid(
                "control batches may only be written by the broker".into(),
            ));
        }
        if h.attributes & ATTR_TRANSACTIONAL != 0 {
            return Err(AppendError::Invalid(
                "transactional batches are not supported by this broker".into(),
            ));
        }
        if h.records_count == 0 || h.last_offset_delta != h.records_count - 1 {
            return Err(AppendError::Invalid(format!(
                "batch of {} records has last offset delta {}",
                h.records_count, h.last_offset_delta
            )));
        }
        if h.attributes & ATTR_COMPRESSION == 0 {
            // Uncompressed: every record must parse and sit inside the batch.
            let mut n = 0i32;
            let mut contiguous = true;
            for_each_record(batch, &h, 0, |o, _, _, _| {
                contiguous &= o == h.base_offset + n as u64;
                n += 1;
            })
            .map_err(|e| AppendError::Corrupt(e.to_string()))?;
            if !contiguous {
                return Err(AppendError::Invalid(
                    "record offset deltas are not 0..n".into(),
                ));
            }
        }
        let (pid, epoch, first_seq) = producer_fields(batch);
        if pid >= 0 {
            let last_seq = add_seq(first_seq, h.last_offset_delta);
            if let Some(p) = self.producers.get(&pid) {
                if epoch < p.epoch {
                    return Err(AppendError::StaleProducerEpoch {
                        current: p.epoch,
                        got: epoch,
                    });
                }
                if epoch == p.epoch {
                    if let Some(&(_, _, base, last)) = p
                        .batches
                        .iter()
                        .find(|b| b.0 == first_seq && b.1 == last_seq)
                    {
                        return Ok(Staged {
                            base_offset: base,
                            last_offset: last,
                            log_append_time: -1,
                            duplicate: true,
                        });
                    }
                    let expected = p.batches.back().map_or(0, |b| add_seq(b.1, 1));
                    if first_seq != expected {
                        return Err(AppendError::OutOfOrderSequence {
                            expected,
                            got: first_seq,
                        });
                    }
                } else if first_seq != 0 {
                    // A new epoch starts its sequences at 0.
                    return Err(AppendError::OutOfOrderSequence {
                        expected: 0,
                        got: first_seq,
                    });
                }
            }
            // An unknown producer (new, or its state went with old segments) starts anywhere:
            // Kafka accepts it rather than failing producers whose history was deleted.
        }
        if self.pending.len() + batch.len() > self.config.max_pending_bytes
            && !self.pending.is_empty()
        {
            return Err(AppendError::Busy);
        }
        // Offsets are i64 on disk: a batch past i64::MAX would be written and then lost as
        // corrupt by the next recovery. (Only a corrupt log gets this far.)
        let last = self.next_offset.checked_add(h.last_offset_delta as u64);
        if last.is_none_or(|l| l > i64::MAX as u64) {
            return Err(AppendError::Invalid(format!(
                "offsets exhausted: {} records at offset {}",
                h.records_count, self.next_offset
            )));
        }
        let base = self.next_offset;
        batch[0..8].copy_from_slice(&(base as i64).to_be_bytes());
        // Partition leader epoch: this single broker leads at epoch 0 (what Metadata says).
        batch[12..16].copy_from_slice(&0i32.to_be_bytes());
        let mut append_time = -1;
        if log_append_time {
            let attrs = h.attributes | ATTR_LOG_APPEND_TIME;
            batch[21..23].copy_from_slice(&attrs.to_be_bytes());
            batch[35..43].copy_from_slice(&now_ms.to_be_bytes());
            let crc = crc32c::crc32c(&batch[CRC_START..]);
            batch[17..21].copy_from_slice(&crc.to_be_bytes());
            append_time = now_ms;
        }
        let header = BatchHeader {
            base_offset: base,
            ..h
        };
        remember_producer(&mut self.producers, batch, &header);
        self.pending_entries.push(Entry {
            base,
            last: header.last_offset(),
            pos: self.pending.len() as u64,
            size: batch.len() as u32,
            max_ts: be_i64(batch, 35),
        });
        self.pending.extend_from_slice(batch);
        self.next_offset = header.last_offset() + 1;
        Ok(Staged {
            base_offset: base,
            last_offset: header.last_offset(),
            log_append_time: append_time,
            duplicate: false,
        })
    }

    /// Write everything staged, then make it readable: one write and one fdatasync per segment
    /// touched (a new segment is started before any batch that would take the active one past
    /// `segment.bytes`, as Kafka rolls). Returns the new high watermark, or `None` when nothing
    /// was staged. Only one flush may run at a time (the caller's writer task). On error the log
    /// must be reopened.
    pub async fn flush(this: &RefCell<Self>) -> io::Result<Option<u64>> {
        let (bytes, entries, segment_bytes) = {
            let mut me = this.borrow_mut();
            if me.pending.is_empty() {
                return Ok(None);
            }
            let bytes = std::mem::take(&mut me.pending);
            let entries = std::mem::take(&mut me.pending_entries);
            (bytes, entries, me.config.segment_bytes)
        };
        let mut hw = None;
        let mut start = 0;
        while start < entries.len() {
            let active = this
                .borrow()
                .segments
                .last()
                .map(|s| (s.file.clone(), s.size));
            let roll = match &active {
                None => true,
                Some((_, size)) => *size > 0 && size + entries[start].size as u64 > segment_bytes,
            };
            let mut size = if roll {
                0
            } else {
                active.as_ref().map_or(0, |a| a.1)
            };
            let mut end = start;
            while end < entries.len()
                && (end == start || size + entries[end].size as u64 <= segment_bytes)
            {
                size += entries[end].size as u64;
                end += 1;
            }
            let (file, pos) = if roll {
                let base = entries[start].base;
                // The directory handle is cloned so no borrow is held across the await.
                let dir = this.borrow().dir.clone();
                let file = Rc::new(dir.open(&segment_name(base)).await?);
                // A leftover file with this name (from a cut) must not keep stale bytes.
                file.truncate(0).await?;
                dir.sync_dir().await?;
                this.borrow_mut().segments.push(Segment {
                    base,
                    file: file.clone(),
                    size: 0,
                    entries: Vec::new(),
                    max_ts: i64::MIN,
                });
                (file, 0)
            } else {
                active.expect("a segment exists when not rolling")
            };
            let from = entries[start].pos as usize;
            let last = &entries[end - 1];
            let to = last.pos as usize + last.size as usize;
            file.write_at(pos, bytes[from..to].to_vec()).await?;
            file.sync().await?;
            let mut me = this.borrow_mut();
            let seg = me.segments.last_mut().expect("the segment just written");
            for e in &entries[start..end] {
                let mut e = *e;
                e.pos = e.pos - from as u64 + pos;
                seg.max_ts = seg.max_ts.max(e.max_ts);
                seg.entries.push(e);
            }
            seg.size = pos + (to - from) as u64;
            me.high_watermark = last.last + 1;
            hw = Some(me.high_watermark);
            start = end;
        }
        Ok(hw)
    }

    /// Whole batches starting with the one that holds `offset`, up to `max_bytes` (the first
    /// batch is returned whole even when larger, as Kafka does since KIP-74, when `min_one`).
    /// Stops at the end of a segment; the next fetch continues in the next one.
    pub fn read(&self, offset: u64, max_bytes: usize, min_one: bool) -> Read<D::File> {
        if offset < self.log_start || offset > self.high_watermark {
            return Read::OutOfRange;
        }
        let si = self
            .segments
            .partition_point(|s| s.base <= offset)
            .saturating_sub(1);
        for seg in self.segments.get(si..).unwrap_or_default() {
            let ei = seg.entries.partition_point(|e| e.last < offset);
            if ei == seg.entries.len() {
                continue;
            }
            let start = seg.entries[ei].pos;
            let mut end = start;
            for e in &seg.entries[ei..] {
                let next = e.pos + e.size as u64;
                if (next - start) as usize > max_bytes && !(min_one && end == start) {
                    break;
                }
                end = next;
            }
            if end == start {
                return Read::Empty;
            }
            return Read::Data(ReadPlan {
                file: seg.file.clone(),
                pos: start,
                len: (end - start) as usize,
            });
        }
        Read::Empty
    }

    /// The first batch whose max timestamp is at least `ts` (ListOffsets by timestamp).
    fn batch_at_or_after(&self, ts: i64) -> Option<(Entry, Rc<D::File>)> {
        for seg in &self.segments {
            if seg.max_ts < ts {
                continue;
            }
            for e in &seg.entries {
                if e.max_ts >= ts && e.last >= self.log_start {
                    return Some((*e, seg.file.clone()));
                }
            }
        }
        None
    }

    /// The batch holding the largest timestamp (the first such, as Kafka's time index keeps).
    fn batch_with_max_timestamp(&self) -> Option<(Entry, Rc<D::File>)> {
        let mut best: Option<(Entry, Rc<D::File>)> = None;
        for seg in &self.segments {
            if best.as_ref().is_some_and(|(b, _)| seg.max_ts <= b.max_ts) {
                continue;
            }
            for e in &seg.entries {
                if e.last >= self.log_start
                    && best.as_ref().is_none_or(|(b, _)| e.max_ts > b.max_ts)
                {
                    best = Some((*e, seg.file.clone()));
                }
            }
        }
        best
    }

    /// ListOffsets by timestamp: the first offset whose record timestamp is >= `ts`, with that
    /// timestamp; `None` when every record is older. Compressed batches are not opened: their
    /// first offset and max timestamp answer (the consumer skips older records it reads).
    pub async fn offset_for_timestamp(
        this: &RefCell<Self>,
        ts: i64,
    ) -> io::Result<Option<(u64, i64)>> {
        let found = this.borrow().batch_at_or_after(ts);
        let Some((e, file)) = found else {
            return Ok(None);
        };
        let start = this.borrow().log_start;
        let bytes = file.read_at(e.pos, e.size as usize).await?;
        Ok(Some(
            scan_for(&bytes, e, |o, t| o >= start && t >= ts)
                .unwrap_or((e.base.max(start), e.max_ts)),
        ))
    }

    /// ListOffsets MAX_TIMESTAMP (-3): the offset of the record with the largest timestamp.
    pub async fn max_timestamp(this: &RefCell<Self>) -> io::Result<Option<(u64, i64)>> {
        let found = this.borrow().batch_with_max_timestamp();
        let Some((e, file)) = found else {
            return Ok(None);
        };
        let bytes = file.read_at(e.pos, e.size as usize).await?;
        Ok(Some(
            scan_for(&bytes, e, |_, t| t == e.max_ts).unwrap_or((e.last, e.max_ts)),
        ))
    }

    /// Move the log start offset to `offset` (DeleteRecords; `offset` <= high watermark) and
    /// remove the segments wholly before it. The new start is durable before this returns.
    pub async fn delete_records(this: &RefCell<Self>, offset: u64) -> io::Result<u64> {
        let (target, file) = {
            let me = this.borrow();
            if offset <= me.log_start {
                return Ok(me.log_start);
            }
            (offset.min(me.high_watermark), me.dir.clone())
        };
        let file = file.open(START_FILE).await?;
        let mut rec = Vec::with_capacity(16);
        rec.extend_from_slice(START_MAGIC);
        rec.extend_from_slice(&target.to_be_bytes());
        let crc = crc32c::crc32c(&rec);
        rec.extend_from_slice(&crc.to_be_bytes());
        file.write_at(0, rec).await?;
        file.sync().await?;
        this.borrow_mut().log_start = target;
        Self::remove_segments_below(this, target).await?;
        Ok(target)
    }

    /// Retention (`retention.ms`, `retention.bytes`; negative = unlimited): remove the oldest
    /// segments whose newest record is older than `now_ms - retention_ms`, and while the log is
    /// larger than `retention_bytes` by at least a whole segment. The active segment stays, as
    /// in Kafka until it rolls. Returns how many segments went.
    pub async fn apply_retention(
        this: &RefCell<Self>,
        now_ms: i64,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> io::Result<usize> {
        let new_start = {
            let me = this.borrow();
            let mut total: u64 = me.size_bytes();
            let mut start = None;
            for (i, seg) in me.segments.iter().enumerate() {
                if i + 1 == me.segments.len() {
                    break;
                }
                let expired = retention_ms >= 0 && seg.max_ts < now_ms.saturating_sub(retention_ms);
                let too_big = retention_bytes >= 0
                    && total.saturating_sub(seg.size) >= retention_bytes as u64;
                if !(expired || too_big) {
                    break;
                }
                total -= seg.size;
                start = Some(me.segments[i + 1].base);
            }
            start
        };
        match new_start {
            Some(o) => {
                let before = this.borrow().segments.len();
                Self::delete_records(this, o).await?;
                Ok(before - this.borrow().segments.len())
            }
            None => Ok(0),
        }
    }

    async fn remove_segments_below(this: &RefCell<Self>, offset: u64) -> io::Result<()> {
        let mut removed = false;
        loop {
            let name = {
                let mut me = this.borrow_mut();
                if me.segments.len() > 1 && me.segments[1].base <= offset {
                    let s = me.segments.remove(0);
                    segment_name(s.base)
                } else {
                    break;
                }
            };
            // A reader holding the file keeps reading it; unlinking does not disturb it.
            let dir = this.borrow().dir.clone();
            dir.remove(&name).await?;
            removed = true;
        }
        if removed {
            let dir = this.borrow().dir.clone();
            dir.sync_dir().await?;
        }
        Ok(())
    }
}

/// The first record of an uncompressed batch matching `pred(offset, timestamp)`.
fn scan_for(batch: &[u8], e: Entry, mut pred: impl FnMut(u64, i64) -> bool) -> Option<(u64, i64)> {
    let Ok(Peek::Batch(h)) = peek_batch(batch, e.pos, batch.len().max(BATCH_OVERHEAD)) else {
        return None;
    };
    if h.attributes & ATTR_COMPRESSION != 0 {
        return None;
    }
    let log_append = h.attributes & ATTR_LOG_APPEND_TIME != 0;
    let mut hit = None;
    let _ = for_each_record(batch, &h, e.pos, |o, t, _, _| {
        let t = if log_append { e.max_ts } else { t };
        if hit.is_none() && pred(o, t) {
            hit = Some((o, t));
        }
    });
    hit
}

fn remember_producer(producers: &mut HashMap<i64, Producer>, batch: &[u8], h: &BatchHeader) {
    let (pid, epoch, first_seq) = producer_fields(batch);
    if pid < 0 {
        return;
    }
    let p = producers.entry(pid).or_default();
    if epoch != p.epoch {
        p.epoch = epoch;
        p.batches.clear();
    }
    let last_seq = add_seq(first_seq, h.last_offset_delta);
    if p.batches.len() == PRODUCER_BATCHES_KEPT {
        p.batches.pop_front();
    }
    p.batches
        .push_back((first_seq, last_seq, h.base_offset, h.last_offset()));
}

async fn read_start_file<D: LogDir>(dir: &D) -> io::Result<Option<u64>> {
    let f = dir.open(START_FILE).await?;
    let b = f.read_at(0, 16).await?;
    if b.len() < 16 || &b[0..4] != START_MAGIC {
        return Ok(None);
    }
    let crc = u32::from_be_bytes(b[12..16].try_into().expect("4 bytes"));
    if crc != crc32c::crc32c(&b[0..12]) {
        return Ok(None);
    }
    Ok(Some(u64::from_be_bytes(
        b[4..12].try_into().expect("8 bytes"),
    )))
}

const _: () = assert!(LOG_OVERHEAD == 12);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{decode_records, encode_batch};
    use crate::io::MemDir;
    use futures_lite::future::block_on;

    /// A producer batch of `n` records with timestamps `ts..`, as a client would send it.
    fn producer_batch(n: usize, ts: i64, pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
        let vals: Vec<Vec<u8>> = (0..n).map(|i| format!("v{i}").into_bytes()).collect();
        let recs: Vec<(Option<&[u8]>, Option<&[u8]>)> =
            vals.iter().map(|v| (None, Some(v.as_slice()))).collect();
        let mut b = Vec::new();
        encode_batch(0, ts, &recs, &mut b);
        b[43..51].copy_from_slice(&pid.to_be_bytes());
        b[51..53].copy_from_slice(&epoch.to_be_bytes());
        b[53..57].copy_from_slice(&seq.to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    fn small() -> TopicLogConfig {
        TopicLogConfig {
            segment_bytes: 400,
            read_chunk_bytes: 101,
            ..TopicLogConfig::default()
        }
    }

    fn open(dir: &MemDir) -> (RefCell<TopicLog<MemDir>>, TopicRecovery) {
        let (log, rep) = block_on(TopicLog::open(dir.clone(), small())).unwrap();
        (RefCell::new(log), rep)
    }

    fn stage(log: &RefCell<TopicLog<MemDir>>, mut b: Vec<u8>) -> Result<Staged, AppendError> {
        log.borrow_mut().stage(&mut b, 1_000, false)
    }

    fn read_all(log: &RefCell<TopicLog<MemDir>>, from: u64) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut next = from;
        loop {
            let plan = match log.borrow().read(next, 1 << 20, true) {
                Read::Data(p) => p,
                Read::Empty => break,
                Read::OutOfRange => panic!("out of range at {next}"),
            };
            let bytes = block_on(plan.read()).unwrap();
            let mut pos = 0;
            while pos < bytes.len() {
                let Ok(Peek::Batch(h)) = peek_batch(&bytes[pos..], 0, 1 << 20) else {
                    panic!("bad batch in read")
                };
                for r in decode_records(&bytes[pos..pos + h.size], &h, 0).unwrap() {
                    if r.offset >= next {
                        out.push((r.offset, r.value.unwrap()));
                    }
                }
                next = h.last_offset() + 1;
                pos += h.size;
            }
        }
        out
    }

    #[test]
    fn staged_batches_are_invisible_until_flushed_then_read_back_across_segments() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        for i in 0..30 {
            let s = stage(&log, producer_batch(3, 100 + i, -1, -1, 0)).unwrap();
            assert_eq!(
                (s.base_offset, s.last_offset),
                (3 * i as u64, 3 * i as u64 + 2)
            );
            if i % 4 == 3 {
                assert!(block_on(TopicLog::flush(&log)).unwrap().is_some());
            }
        }
        assert_eq!(log.borrow().high_watermark(), 84);
        assert_eq!(log.borrow().next_offset(), 90);
        assert_eq!(
            read_all(&log, 0).len(),
            84,
            "unflushed records are not readable"
        );
        assert_eq!(block_on(TopicLog::flush(&log)).unwrap(), Some(90));
        assert!(log.borrow().segment_count() > 3, "rolled at segment.bytes");
        let all = read_all(&log, 5);
        assert_eq!(all.len(), 85);
        assert_eq!(all[0], (5, b"v2".to_vec()));
        drop(log);
        let (log, rep) = open(&dir);
        assert_eq!((rep.next_offset, rep.truncated.clone()), (90, None));
        assert_eq!(read_all(&log, 0).len(), 90);
        assert!(matches!(log.borrow().read(91, 100, true), Read::OutOfRange));
        assert!(matches!(log.borrow().read(90, 100, true), Read::Empty));
    }

    #[test]
    fn one_flush_of_many_batches_rolls_at_segment_bytes() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        for i in 0..30 {
            stage(&log, producer_batch(3, i, -1, -1, 0)).unwrap();
        }
        assert_eq!(block_on(TopicLog::flush(&log)).unwrap(), Some(90));
        let names = block_on(dir.list()).unwrap();
        let sizes: Vec<usize> = names
            .iter()
            .filter(|n| n.ends_with(".log"))
            .map(|n| dir.with_file(n, |b| b.len()).unwrap())
            .collect();
        assert!(sizes.len() > 3, "rolled: {sizes:?}");
        assert!(
            sizes.iter().all(|&s| s <= 400),
            "no segment past segment.bytes: {sizes:?}"
        );
        drop(log);
        let (log, rep) = open(&dir);
        assert_eq!((rep.next_offset, rep.truncated), (90, None));
        assert_eq!(read_all(&log, 0).len(), 90);
    }

    #[test]
    fn validation_maps_to_kafka_errors() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        let mut bad_crc = producer_batch(2, 0, -1, -1, 0);
        bad_crc[70] ^= 1;
        assert_eq!(stage(&log, bad_crc).unwrap_err().code(), 2);
        let mut control = producer_batch(1, 0, -1, -1, 0);
        control[22] |= 0x20;
        let crc = crc32c::crc32c(&control[CRC_START..]);
        control[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(stage(&log, control).unwrap_err().code(), 87);
        let big = producer_batch(2000, 0, -1, -1, 0);
        let mut cfg = small();
        cfg.max_message_bytes = 1000;
        let (mut tiny, _) = block_on(TopicLog::open(MemDir::new(), cfg)).unwrap();
        assert_eq!(
            tiny.stage(&mut big.clone(), 0, false).unwrap_err().code(),
            10
        );
        let mut codec7 = producer_batch(1, 0, -1, -1, 0);
        codec7[22] |= 0x07;
        let crc = crc32c::crc32c(&codec7[CRC_START..]);
        codec7[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(stage(&log, codec7).unwrap_err().code(), 2);
        let mut short = producer_batch(2, 0, -1, -1, 0);
        short.pop();
        assert_eq!(stage(&log, short).unwrap_err().code(), 2);
        assert_eq!(log.borrow().next_offset(), 0, "nothing was staged");
    }

    #[test]
    fn idempotent_producer_retries_are_deduplicated_and_gaps_refused() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        let a = stage(&log, producer_batch(5, 0, 7, 0, 0)).unwrap();
        let b = stage(&log, producer_batch(5, 0, 7, 0, 5)).unwrap();
        // A retry of the first batch (lost response) gets the original offsets back.
        let dup = stage(&log, producer_batch(5, 0, 7, 0, 0)).unwrap();
        assert!(dup.duplicate);
        assert_eq!(
            (dup.base_offset, dup.last_offset),
            (a.base_offset, a.last_offset)
        );
        assert_eq!(
            stage(&log, producer_batch(1, 0, 7, 0, 11)).unwrap_err(),
            AppendError::OutOfOrderSequence {
                expected: 10,
                got: 11
            }
        );
        // A new epoch must start at 0; an old epoch is fenced.
        assert_eq!(
            stage(&log, producer_batch(1, 0, 7, 1, 3))
                .unwrap_err()
                .code(),
            45
        );
        stage(&log, producer_batch(1, 0, 7, 1, 0)).unwrap();
        assert_eq!(
            stage(&log, producer_batch(1, 0, 7, 0, 10))
                .unwrap_err()
                .code(),
            47
        );
        block_on(TopicLog::flush(&log)).unwrap();
        assert_eq!(b.base_offset, 5);
        // The producer state survives a restart: it is rebuilt from the batch headers.
        drop(log);
        let (log, _) = open(&dir);
        assert!(
            stage(&log, producer_batch(1, 0, 7, 1, 0))
                .unwrap()
                .duplicate
        );
        assert_eq!(
            stage(&log, producer_batch(1, 0, 7, 1, 1))
                .unwrap()
                .base_offset,
            11
        );
    }

    #[test]
    fn log_append_time_restamps_and_keeps_a_valid_crc() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        let mut b = producer_batch(2, 5, -1, -1, 0);
        let s = log.borrow_mut().stage(&mut b, 999_000, true).unwrap();
        assert_eq!(s.log_append_time, 999_000);
        block_on(TopicLog::flush(&log)).unwrap();
        drop(log);
        let (log, rep) = open(&dir);
        assert_eq!(rep.truncated, None, "the rewritten CRC is valid");
        assert_eq!(
            block_on(TopicLog::max_timestamp(&log)).unwrap(),
            Some((0, 999_000))
        );
    }

    #[test]
    fn timestamps_delete_records_and_retention() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        for i in 0..20i64 {
            stage(&log, producer_batch(2, 1000 * i, -1, -1, 0)).unwrap();
            block_on(TopicLog::flush(&log)).unwrap();
        }
        assert_eq!(
            block_on(TopicLog::offset_for_timestamp(&log, 5000)).unwrap(),
            Some((10, 5000))
        );
        assert_eq!(
            block_on(TopicLog::offset_for_timestamp(&log, 4500)).unwrap(),
            Some((10, 5000))
        );
        assert_eq!(
            block_on(TopicLog::offset_for_timestamp(&log, 99_999)).unwrap(),
            None
        );
        assert_eq!(
            block_on(TopicLog::max_timestamp(&log)).unwrap(),
            Some((38, 19_000))
        );
        assert_eq!(block_on(TopicLog::delete_records(&log, 13)).unwrap(), 13);
        assert!(matches!(log.borrow().read(12, 100, true), Read::OutOfRange));
        assert_eq!(read_all(&log, 13)[0].0, 13);
        let segs = log.borrow().segment_count();
        drop(log);
        let (log, rep) = open(&dir);
        assert_eq!(rep.log_start_offset, 13, "the log start offset is durable");
        assert_eq!(log.borrow().segment_count(), segs);
        // Retention by time: everything older than 15 s at now = 30 s goes, except the active
        // segment.
        let removed = block_on(TopicLog::apply_retention(&log, 30_000, 15_000, -1)).unwrap();
        assert!(removed > 0);
        let start = log.borrow().log_start_offset();
        assert!(start > 13 && start <= 38, "start {start}");
        assert_eq!(read_all(&log, start).last().unwrap().0, 39);
        // Retention by size keeps at most one segment over the limit.
        block_on(TopicLog::apply_retention(&log, 30_000, -1, 0)).unwrap();
        assert_eq!(log.borrow().segment_count(), 1);
        assert_eq!(log.borrow().high_watermark(), 40);
    }

    #[test]
    fn every_crash_point_keeps_every_flushed_batch() {
        for fail_at in 0..40u64 {
            for torn in 0..3 {
                let dir = MemDir::new();
                let (log, _) = open(&dir);
                dir.fail_after(fail_at);
                let mut acked = 0u64;
                for i in 0..12i64 {
                    stage(&log, producer_batch(2, i, -1, -1, 0)).unwrap();
                    match block_on(TopicLog::flush(&log)) {
                        Ok(Some(hw)) => acked = hw,
                        _ => break,
                    }
                }
                dir.crash(|_, unsynced| match torn {
                    0 => 0,
                    1 => unsynced / 2,
                    _ => unsynced,
                });
                dir.heal();
                let (log, _) = open(&dir);
                let got = read_all(&log, 0);
                assert!(
                    got.len() as u64 >= acked,
                    "fail_at {fail_at}: lost acknowledged records"
                );
                for (i, (o, _)) in got.iter().enumerate() {
                    assert_eq!(*o, i as u64, "not a prefix");
                }
            }
        }
    }

    #[test]
    fn a_batch_below_its_segments_base_is_cut_and_the_next_roll_keeps_the_log() {
        // fuzz/topic_log_recovery: segment 10 held a CRC-valid batch at offset 2 (the base
        // offset is outside the CRC). Recovery indexed it and set the next offset to 10, so the
        // next flush rolled to a segment named 10 -- the same file -- and truncated it.
        let dir = MemDir::new();
        let mut seg0 = producer_batch(2, 0, -1, -1, 0);
        let mut seg10 = producer_batch(1, 0, -1, -1, 0);
        seg10[0..8].copy_from_slice(&2i64.to_be_bytes());
        block_on(async {
            for (name, bytes) in [(segment_name(0), &mut seg0), (segment_name(10), &mut seg10)] {
                let f = dir.open(&name).await?;
                f.write_at(0, bytes.clone()).await?;
                f.sync().await?;
            }
            dir.sync_dir().await
        })
        .unwrap();
        let cfg = TopicLogConfig {
            segment_bytes: 100,
            ..small()
        };
        let (log, rep) = block_on(TopicLog::open(dir.clone(), cfg.clone())).unwrap();
        let (seg, pos, reason) = rep.truncated.unwrap();
        assert_eq!((seg, pos), (segment_name(10), 0));
        assert!(reason.contains("goes back"), "{reason}");
        assert_eq!(rep.next_offset, 10);
        let log = RefCell::new(log);
        assert_eq!(
            stage(&log, producer_batch(1, 0, -1, -1, 0))
                .unwrap()
                .base_offset,
            10
        );
        block_on(TopicLog::flush(&log)).unwrap();
        drop(log);
        let (log, rep) = block_on(TopicLog::open(dir.clone(), cfg)).unwrap();
        assert_eq!((rep.truncated, rep.next_offset), (None, 11));
        let offsets: Vec<u64> = read_all(&RefCell::new(log), 0)
            .iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(offsets, [0, 1, 10]);
    }

    #[test]
    fn a_batch_past_the_next_segments_base_is_cut() {
        // fuzz/topic_log_recovery: a batch in segment 0 whose offsets (outside the CRC) reached
        // the base of the next segment was kept, and `read` (which picks the segment by base)
        // answered an offset of it with the next segment's batches or nothing at all.
        let dir = MemDir::new();
        let mut seg0 = producer_batch(2, 0, -1, -1, 0);
        let mut far = producer_batch(1, 0, -1, -1, 0);
        far[0..8].copy_from_slice(&(1i64 << 40).to_be_bytes());
        seg0.extend_from_slice(&far);
        let mut seg10 = producer_batch(1, 0, -1, -1, 0);
        seg10[0..8].copy_from_slice(&10i64.to_be_bytes());
        block_on(async {
            for (name, bytes) in [(segment_name(0), &seg0), (segment_name(10), &seg10)] {
                let f = dir.open(&name).await?;
                f.write_at(0, bytes.clone()).await?;
                f.sync().await?;
            }
            dir.sync_dir().await
        })
        .unwrap();
        let (log, rep) = open(&dir);
        let (seg, pos, reason) = rep.truncated.unwrap();
        assert_eq!(
            (seg, pos),
            (segment_name(0), (seg0.len() - far.len()) as u64)
        );
        assert!(reason.contains("next segment"), "{reason}");
        assert_eq!(rep.next_offset, 2);
        assert_eq!(
            log.borrow().segment_count(),
            1,
            "the segment after the cut is removed"
        );
        assert_eq!(
            read_all(&log, 0).iter().map(|r| r.0).collect::<Vec<_>>(),
            [0, 1]
        );
    }

    #[test]
    fn staging_stops_at_i64_max_instead_of_writing_a_batch_recovery_drops() {
        // fuzz/topic_log_recovery: a log recovered with a batch at offset i64::MAX staged its
        // next batch at offset 2^63, encoded as a negative offset, which the next recovery cut.
        let dir = MemDir::new();
        let mut seg = producer_batch(1, 0, -1, -1, 0);
        seg[0..8].copy_from_slice(&i64::MAX.to_be_bytes());
        block_on(async {
            let f = dir.open(&segment_name(0)).await?;
            f.write_at(0, seg).await?;
            f.sync().await?;
            dir.sync_dir().await
        })
        .unwrap();
        let (log, rep) = open(&dir);
        assert_eq!(
            (rep.truncated, rep.next_offset),
            (None, i64::MAX as u64 + 1)
        );
        let err = stage(&log, producer_batch(1, 0, -1, -1, 0)).unwrap_err();
        assert!(err.message().contains("offsets exhausted"), "{err:?}");
        assert!(!log.borrow().has_pending());
    }

    #[test]
    fn a_log_that_ends_before_its_stored_start_continues_from_the_start() {
        // fuzz/topic_log_recovery: the log start was 4 (DeleteRecords) but recovery cut the log
        // back to offset 2. The start was clamped to 2, the next batch got offsets 2..=3, and
        // after a restart the start was 4 again: the acknowledged batch was out of range.
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        for _ in 0..3 {
            stage(&log, producer_batch(2, 0, -1, -1, 0)).unwrap();
            block_on(TopicLog::flush(&log)).unwrap();
        }
        assert_eq!(block_on(TopicLog::delete_records(&log, 4)).unwrap(), 4);
        drop(log);
        let name = segment_name(0);
        let one_batch = producer_batch(2, 0, -1, -1, 0).len();
        dir.with_file(&name, |b| b.truncate(one_batch + 5));
        let (log, rep) = open(&dir);
        assert!(rep.truncated.is_some());
        assert_eq!((rep.log_start_offset, rep.next_offset), (4, 4));
        assert_eq!(
            stage(&log, producer_batch(2, 0, -1, -1, 0))
                .unwrap()
                .base_offset,
            4
        );
        block_on(TopicLog::flush(&log)).unwrap();
        drop(log);
        let (log, rep) = open(&dir);
        assert_eq!((rep.log_start_offset, rep.next_offset), (4, 6));
        assert_eq!(
            read_all(&log, 4).iter().map(|r| r.0).collect::<Vec<_>>(),
            [4, 5]
        );
    }

    #[test]
    fn a_corrupt_tail_is_cut_at_the_last_good_batch() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        for _ in 0..3 {
            stage(&log, producer_batch(2, 0, -1, -1, 0)).unwrap();
            block_on(TopicLog::flush(&log)).unwrap();
        }
        drop(log);
        let name = segment_name(0);
        let len = dir.with_file(&name, |b| b.len()).unwrap();
        dir.with_file(&name, |b| b[len - 3] ^= 0xff);
        let (log, rep) = open(&dir);
        let (seg, pos, reason) = rep.truncated.unwrap();
        assert_eq!((seg, pos), (name, (len / 3 * 2) as u64));
        assert!(reason.contains("CRC"), "{reason}");
        assert_eq!(log.borrow().high_watermark(), 4);
    }
}
