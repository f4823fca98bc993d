//! A topic partition's log: the record batches producers send, stored as they came (after offset
//! assignment) in the same segment files as `__consumer_offsets` (`<20-digit base offset>.log`,
//! Kafka's batch format v2), so Fetch serves them byte for byte without re-encoding.
//!
//! What it keeps in memory, rebuilt by one sequential scan on open:
//! - an index of every batch (base and last offset, file position, size, max timestamp): the
//!   offset index and the time index at once. Lookups are binary searches; 40 bytes per batch.
//! - the idempotent-producer state: per producer id, its epoch and the sequence ranges of its
//!   last five batches (Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`), so a retried batch
//!   is answered with its first offset instead of being stored twice; for transactional
//!   producers also the coordinator epoch of its last marker and its ongoing transaction (the
//!   first offset of its first transactional batch since its last marker).
//! - the transactions (Kafka's `ProducerStateManager` and `TransactionIndex`, kept in memory):
//!   the ongoing ones, the ended ones whose marker is not yet durable, and the aborted ones
//!   (producer id, first offset, marker offset) for read_committed fetches. The aborted index
//!   grows by 32 bytes per abort and shrinks only when the log start passes a marker
//!   (retention, DeleteRecords): proportional to the aborts the log still holds.
//!
//! Transactions (`stage` accepts transactional batches from producers with an id;
//! `stage_marker` writes the COMMIT/ABORT control batch the transaction coordinator asks for,
//! in Kafka's byte format, `batch::encode_marker`): the last stable offset is the high
//! watermark held back to the first offset of the oldest transaction that is ongoing or whose
//! marker is not yet durable, so a read_committed consumer (which reads only below it,
//! `read_upto`) never sees data whose abort a crash could take back. Recovery rebuilds all of
//! it from the batches: a transaction whose marker never reached the disk stays ongoing.
//!
//! Writes are staged, then flushed: `stage` validates a batch, assigns offsets and appends it to
//! an in-memory buffer; `flush` writes everything staged since the last flush with one write and
//! one fdatasync. Only flushed batches are visible (the high watermark is the durable end), so a
//! consumer never reads what a crash could take back. A failed flush leaves the log unusable:
//! the caller reopens it from disk and fails every request that waited on unflushed batches.
//!
//! The log start offset (moved by DeleteRecords and retention) is kept in a 16-byte file
//! `log-start-offset` (magic, offset, CRC-32C), one small write and a sync.

use crate::batch::{
    encode_marker, for_each_record, parse_marker, peek_batch, BatchHeader, Peek, BATCH_OVERHEAD,
    LOG_OVERHEAD,
};
use crate::io::{LogDir, LogFile};
use crate::log::{parse_segment_name, scan_batches, segment_name};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
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
    /// An epoch older than the producer's current one, on a data batch or a transaction marker:
    /// INVALID_PRODUCER_EPOCH (`ProducerAppendInfo.checkProducerEpoch` throws
    /// `InvalidProducerEpochException` for both since Kafka 2.7, not PRODUCER_FENCED).
    StaleProducerEpoch { current: i16, got: i16 },
    /// A non-transactional batch from a producer with an ongoing transaction: INVALID_TXN_STATE
    /// (`ProducerAppendInfo.appendDataBatch`).
    InvalidTxnState { first_offset: u64 },
    /// A marker from a coordinator epoch older than the producer's last marker's:
    /// TRANSACTION_COORDINATOR_FENCED (`ProducerAppendInfo.checkCoordinatorEpoch`).
    CoordinatorFenced { current: i32, got: i32 },
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
            AppendError::InvalidTxnState { .. } => 48,
            AppendError::CoordinatorFenced { .. } => 52,
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
            AppendError::InvalidTxnState { first_offset } => format!(
                "a non-transactional batch from a producer whose transaction at offset \
                 {first_offset} is ongoing"
            ),
            AppendError::CoordinatorFenced { current, got } => {
                format!("coordinator epoch {got} is older than the current {current}")
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

#[derive(Debug, Clone)]
struct Producer {
    epoch: i16,
    /// (first sequence, last sequence, base offset, last offset), oldest first.
    batches: VecDeque<(i32, i32, u64, u64)>,
    /// The coordinator epoch of the producer's last marker (-1: none yet); a marker from an
    /// older coordinator is fenced.
    coordinator_epoch: i32,
    /// The ongoing transaction: the first offset of the first transactional batch since the
    /// producer's last marker (`ProducerStateEntry.currentTxnFirstOffset`).
    txn_first: Option<u64>,
    /// The max timestamp of the producer's last data batch, or the timestamp of its last marker,
    /// whichever came later; -1 before either (`ProducerStateEntry.lastTimestamp`).
    last_timestamp: i64,
}

impl Default for Producer {
    /// Kafka's `ProducerStateEntry.empty`: no epoch (-1), no coordinator epoch, no transaction,
    /// no timestamp.
    fn default() -> Self {
        Self {
            epoch: -1,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            txn_first: None,
            last_timestamp: -1,
        }
    }
}

/// One producer as the log remembers it: what DescribeProducers reports
/// (`UnifiedLog.activeProducers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerState {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last sequence of its last data batch in the current epoch; -1 when it has none (only
    /// markers seen, or a marker bumped the epoch).
    pub last_sequence: i32,
    /// See `Producer::last_timestamp`.
    pub last_timestamp: i64,
    /// The coordinator epoch of its last transaction marker; -1 before its first.
    pub coordinator_epoch: i32,
    /// The first offset of its ongoing transaction, if one is ongoing.
    pub txn_start_offset: Option<u64>,
}

/// One aborted transaction (`AbortedTxn` of Kafka's `TransactionIndex`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Aborted {
    producer_id: i64,
    first: u64,
    /// The offset of its ABORT marker.
    last: u64,
    /// The last stable offset right after the marker: the first offset of the oldest other
    /// ongoing transaction, else `last + 1` (`ProducerStateManager.lastStableOffset`). Every
    /// later abort starts at or after it, so a search stops there.
    stable_after: u64,
}

/// The partition's transactions: what the last stable offset and read_committed fetches need
/// (`ProducerStateManager`'s `ongoingTxns` and `unreplicatedTxns`, and the partition's
/// `TransactionIndex` files, kept in memory).
#[derive(Debug, Default)]
struct Txns {
    /// Ongoing transactions: first offset -> producer id.
    ongoing: BTreeMap<u64, i64>,
    /// Ended transactions whose marker is not yet durable: first offset -> marker offset. Until
    /// the marker is flushed they hold the last stable offset back: a crash could take the
    /// marker back and leave the transaction open.
    ending: BTreeMap<u64, u64>,
    /// Aborted transactions in marker order (so also ordered by `last`). Bound: one entry (32
    /// bytes) per aborted transaction still in the log; entries go when retention or
    /// DeleteRecords move the log start past their marker.
    aborted: VecDeque<Aborted>,
}

impl Txns {
    /// The first offset of the oldest ongoing or not yet durably ended transaction.
    fn first_unstable(&self) -> Option<u64> {
        let a = self.ongoing.keys().next().copied();
        let b = self.ending.keys().next().copied();
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    /// Markers below the high watermark are durable: their transactions are complete
    /// (`ProducerStateManager.onHighWatermarkUpdated`).
    fn on_high_watermark(&mut self, hw: u64) {
        self.ending.retain(|_, marker| *marker >= hw);
    }
}

/// A contiguous byte range of one segment to read: whole batches.
pub struct ReadPlan<F> {
    file: Rc<F>,
    pos: u64,
    len: usize,
    last_offset: u64,
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
    /// The last offset of the last batch read: a read_committed fetch asks for the aborted
    /// transactions below the next one.
    pub fn last_offset(&self) -> u64 {
        self.last_offset
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

/// What [`TopicLog::append_seed`] did.
#[derive(Debug)]
pub struct Seeded {
    /// The log restarted empty at this offset first.
    pub restarted_at: Option<u64>,
    /// The next offset after the chunk, or why nothing of it was appended.
    pub appended: Result<u64, AppendError>,
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
    /// End of what is written and readable: durable too, unless written by
    /// [`Self::write_upto`] and not synced since.
    high_watermark: u64,
    pending: Vec<u8>,
    pending_entries: Vec<Entry>,
    producers: HashMap<i64, Producer>,
    txns: Txns,
    /// The last segment may hold bytes [`Self::write_upto`] wrote and no sync covered yet (only
    /// the last one: a roll syncs the segment it leaves). Set at open: an earlier handle on the
    /// same files may have written without a sync.
    unsynced: bool,
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
        let mut txns = Txns::default();
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
                    remember_producer(&mut producers, &mut txns, b, h);
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
        // Everything found is durable, so every marker found completed its transaction; a
        // transaction without its marker stays ongoing (as Kafka reloads it), and aborts whose
        // marker is below the log start are no longer served.
        txns.on_high_watermark(next_offset);
        while txns.aborted.front().is_some_and(|a| a.last < log_start) {
            txns.aborted.pop_front();
        }
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
                txns,
                // A log reopened in the same process (a Raft replica that stepped down reloads
                // what it wrote) may hold bytes an earlier handle wrote without a sync: the
                // first [`Self::sync`] covers them.
                unsynced: true,
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
        let transactional = h.attributes & ATTR_TRANSACTIONAL != 0;
        if transactional && producer_fields(batch).0 < 0 {
            return Err(AppendError::Invalid(
                "a transactional batch needs a producer id".into(),
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
                } else if first_seq != 0 && p.epoch != -1 {
                    // A new epoch starts its sequences at 0 (unless the producer had no epoch:
                    // only markers of an unknown producer were seen).
                    return Err(AppendError::OutOfOrderSequence {
                        expected: 0,
                        got: first_seq,
                    });
                }
                // Checked after epoch and sequence, as `ProducerAppendInfo.appendDataBatch`
                // does; a new epoch does not end the transaction, only a marker does.
                if let (Some(first_offset), false) = (p.txn_first, transactional) {
                    return Err(AppendError::InvalidTxnState { first_offset });
                }
            }
            // An unknown producer (new, or its state went with old segments) starts anywhere:
            // Kafka accepts it rather than failing producers whose history was deleted.
        }
        self.check_room(batch.len(), h.last_offset_delta, h.records_count)?;
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
        self.push_pending(batch, &header);
        Ok(Staged {
            base_offset: base,
            last_offset: header.last_offset(),
            log_append_time: append_time,
            duplicate: false,
        })
    }

    /// Room for one more batch: `Busy` while too much waits for the disk, and never an offset
    /// past i64::MAX (it would be written and then lost as corrupt by the next recovery; only a
    /// corrupt log gets this far).
    fn check_room(&self, bytes: usize, last_delta: i32, records: i32) -> Result<(), AppendError> {
        if self.pending.len() + bytes > self.config.max_pending_bytes && !self.pending.is_empty() {
            return Err(AppendError::Busy);
        }
        let last = self.next_offset.checked_add(last_delta.max(0) as u64);
        if last.is_none_or(|l| l > i64::MAX as u64) {
            return Err(AppendError::Invalid(format!(
                "offsets exhausted: {records} records at offset {}",
                self.next_offset
            )));
        }
        Ok(())
    }

    /// Stage a validated batch whose offsets are assigned: producer and transaction state,
    /// index entry, bytes.
    fn push_pending(&mut self, batch: &[u8], header: &BatchHeader) {
        remember_producer(&mut self.producers, &mut self.txns, batch, header);
        self.pending_entries.push(Entry {
            base: header.base_offset,
            last: header.last_offset(),
            pos: self.pending.len() as u64,
            size: batch.len() as u32,
            max_ts: be_i64(batch, 35),
        });
        self.pending.extend_from_slice(batch);
        self.next_offset = header.last_offset() + 1;
    }

    /// Stage a transaction marker for `producer_id` (what WriteTxnMarkers writes to each
    /// partition of a transaction): a control batch in Kafka's format (`batch::encode_marker`)
    /// at the next offset, stamped `now_ms` (and flagged LogAppendTime on such topics, as
    /// Kafka's `LogValidator` does to every batch). It ends the producer's ongoing
    /// transaction; an ABORT adds it to the aborted-transactions index. The transaction counts
    /// as complete (stops holding the last stable offset back) once the marker is flushed.
    ///
    /// Kafka's rules (`ProducerAppendInfo.appendEndTxnMarker`, transaction versions 0/1): an
    /// epoch older than the producer's is INVALID_PRODUCER_EPOCH, a coordinator epoch older than
    /// the producer's last marker's is TRANSACTION_COORDINATOR_FENCED; a newer epoch becomes the
    /// producer's. A marker for a producer with no ongoing transaction (a retry, or a partition
    /// the producer never wrote to) is still written and changes nothing but the epochs.
    pub fn stage_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        now_ms: i64,
        log_append_time: bool,
    ) -> Result<Staged, AppendError> {
        if producer_id < 0 {
            return Err(AppendError::Invalid(
                "a transaction marker needs a producer id".into(),
            ));
        }
        if let Some(p) = self.producers.get(&producer_id) {
            if producer_epoch < p.epoch {
                return Err(AppendError::StaleProducerEpoch {
                    current: p.epoch,
                    got: producer_epoch,
                });
            }
            if coordinator_epoch < p.coordinator_epoch {
                return Err(AppendError::CoordinatorFenced {
                    current: p.coordinator_epoch,
                    got: coordinator_epoch,
                });
            }
        }
        self.check_room(crate::batch::MARKER_BATCH_BYTES, 0, 1)?;
        let base = self.next_offset;
        let mut batch = Vec::with_capacity(crate::batch::MARKER_BATCH_BYTES);
        encode_marker(
            base,
            now_ms,
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            &mut batch,
        );
        let mut append_time = -1;
        if log_append_time {
            // Both timestamps already are `now_ms`; only the timestamp type changes.
            let attrs = crate::batch::MARKER_ATTRIBUTES | ATTR_LOG_APPEND_TIME;
            batch[21..23].copy_from_slice(&attrs.to_be_bytes());
            let crc = crc32c::crc32c(&batch[CRC_START..]);
            batch[17..21].copy_from_slice(&crc.to_be_bytes());
            append_time = now_ms;
        }
        let header = BatchHeader {
            base_offset: base,
            size: batch.len(),
            last_offset_delta: 0,
            records_count: 1,
            attributes: be_i16(&batch, 21),
            producer_id,
            producer_epoch,
        };
        self.push_pending(&batch, &header);
        Ok(Staged {
            base_offset: base,
            last_offset: base,
            log_append_time: append_time,
            duplicate: false,
        })
    }

    /// Every producer the log remembers, by producer id: those with a batch or marker in the log
    /// (or staged), since the log opened or as recovery rebuilt them from the segments. Kafka
    /// reports the same set (`ProducerStateManager.activeProducers`); producers are never
    /// expired here (Kafka's `producer.id.expiration.ms` is not implemented), so the list has
    /// one entry per producer id that ever wrote to the partition's remaining segments or since
    /// it opened.
    pub fn active_producers(&self) -> Vec<ProducerState> {
        let mut out: Vec<ProducerState> = self
            .producers
            .iter()
            .map(|(&producer_id, p)| ProducerState {
                producer_id,
                epoch: p.epoch,
                last_sequence: p.batches.back().map_or(-1, |b| b.1),
                last_timestamp: p.last_timestamp,
                coordinator_epoch: p.coordinator_epoch,
                txn_start_offset: p.txn_first,
            })
            .collect();
        out.sort_unstable_by_key(|p| p.producer_id);
        out
    }

    /// The last stable offset: the high watermark, held back to the first offset of the oldest
    /// transaction that is ongoing or whose marker is not yet durable (never below the log
    /// start), as `UnifiedLog.lastStableOffset` with `maybeIncrementFirstUnstableOffset`.
    /// read_committed consumers read only below it.
    pub fn last_stable_offset(&self) -> u64 {
        match self.txns.first_unstable() {
            Some(first) => first.max(self.log_start).min(self.high_watermark),
            None => self.high_watermark,
        }
    }

    /// The aborted transactions a read_committed fetch of `[from_offset, upper_bound)` must be
    /// told about, as (producer id, first offset): those whose abort marker is at or after
    /// `from_offset` and whose first offset is before `upper_bound` (Kafka's
    /// `TransactionIndex.collectAbortedTxns`, stopping once an abort's stable offset reaches
    /// the bound). The list is proportional to the aborts in that range.
    pub fn aborted_transactions(&self, from_offset: u64, upper_bound: u64) -> Vec<(i64, u64)> {
        let aborted = &self.txns.aborted;
        let start = aborted.partition_point(|a| a.last < from_offset);
        let mut out = Vec::new();
        for a in aborted.range(start..) {
            if a.first < upper_bound {
                out.push((a.producer_id, a.first));
            }
            if a.stable_after >= upper_bound {
                break;
            }
        }
        out
    }

    /// Write everything staged, then make it readable: one write and one fdatasync per segment
    /// touched (a new segment is started before any batch that would take the active one past
    /// `segment.bytes`, as Kafka rolls). Returns the new high watermark, or `None` when nothing
    /// was staged. Only one flush may run at a time (the caller's writer task). On error the log
    /// must be reopened.
    pub async fn flush(this: &RefCell<Self>) -> io::Result<Option<u64>> {
        Self::flush_upto(this, u64::MAX).await
    }

    /// [`Self::flush`] of the staged batches wholly below `end_offset` (exclusive; batches are
    /// atomic, so one that straddles it stays staged): a Raft leader flushes what its committed
    /// entries hold while later batches wait for their own commit. The rest stays staged, as do
    /// batches staged while this awaits the disk. Returns the new high watermark, or `None`
    /// when no staged batch is below `end_offset`. Only one flush may run at a time; on error
    /// the log must be reopened.
    pub async fn flush_upto(this: &RefCell<Self>, end_offset: u64) -> io::Result<Option<u64>> {
        Self::write_staged(this, end_offset, true).await
    }

    /// [`Self::flush_upto`] without the fdatasync: the batches become readable (the high
    /// watermark moves) but may be lost by a crash. Only for a log whose batches are durable
    /// elsewhere until it is synced: a Raft replica's topic log, whose committed entries its Raft
    /// log holds and replays after a restart, and which is synced ([`Self::sync`]) before the
    /// Raft log forgets them (compaction). One fdatasync per entry instead of two.
    pub async fn write_upto(this: &RefCell<Self>, end_offset: u64) -> io::Result<Option<u64>> {
        Self::write_staged(this, end_offset, false).await
    }

    /// Make everything [`Self::write_upto`] wrote durable (nothing to do if it wrote nothing
    /// since the last sync).
    pub async fn sync(this: &RefCell<Self>) -> io::Result<()> {
        let file = {
            let me = this.borrow();
            if !me.unsynced {
                return Ok(());
            }
            me.segments.last().map(|s| s.file.clone())
        };
        if let Some(file) = file {
            file.sync().await?;
        }
        this.borrow_mut().unsynced = false;
        Ok(())
    }

    async fn write_staged(
        this: &RefCell<Self>,
        end_offset: u64,
        sync: bool,
    ) -> io::Result<Option<u64>> {
        // Only the qualifying prefix is taken out before the first await: `stage` may append
        // while this writes, and what it appends must land behind the remainder, not in the
        // buffer being written.
        let (bytes, entries, segment_bytes) = {
            let mut me = this.borrow_mut();
            let n = me.pending_entries.partition_point(|e| e.last < end_offset);
            if n == 0 {
                return Ok(None);
            }
            let (bytes, entries) = if n == me.pending_entries.len() {
                // Everything qualifies (always so for `flush`): no copy.
                (
                    std::mem::take(&mut me.pending),
                    std::mem::take(&mut me.pending_entries),
                )
            } else {
                // Copies the remainder, which backpressure bounds on a leader
                // (`max_pending_bytes`) and a follower flushes right after staging.
                let cut = me.pending_entries[n].pos;
                let rest = me.pending.split_off(cut as usize);
                let mut rest_entries = me.pending_entries.split_off(n);
                for e in &mut rest_entries {
                    e.pos -= cut;
                }
                (
                    std::mem::replace(&mut me.pending, rest),
                    std::mem::replace(&mut me.pending_entries, rest_entries),
                )
            };
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
                // Only the last segment may hold unsynced bytes ([`Self::sync`] syncs it alone).
                if let Some((left, _)) = active.as_ref().filter(|_| this.borrow().unsynced) {
                    left.sync().await?;
                    this.borrow_mut().unsynced = false;
                }
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
            if sync {
                file.sync().await?;
            }
            let mut me = this.borrow_mut();
            me.unsynced = !sync;
            let seg = me.segments.last_mut().expect("the segment just written");
            for e in &entries[start..end] {
                let mut e = *e;
                e.pos = e.pos - from as u64 + pos;
                seg.max_ts = seg.max_ts.max(e.max_ts);
                seg.entries.push(e);
            }
            seg.size = pos + (to - from) as u64;
            me.high_watermark = last.last + 1;
            let hw_now = me.high_watermark;
            me.txns.on_high_watermark(hw_now);
            hw = Some(hw_now);
            start = end;
        }
        Ok(hw)
    }

    /// The staged (not yet flushing) batches from the one whose base offset is `offset`, as
    /// one slice of whole, contiguous batches of at most `max_bytes` (the first is included
    /// whole even when larger): (its base offset, the last offset of the last batch, bytes).
    /// `None` when no staged batch starts at `offset`. A Raft leader reads here what to propose
    /// next, from the offset up to which it proposed.
    pub fn pending_from(&self, offset: u64, max_bytes: usize) -> Option<(u64, u64, &[u8])> {
        let entries = &self.pending_entries;
        let first = entries.partition_point(|e| e.base < offset);
        let head = entries.get(first).filter(|e| e.base == offset)?;
        let start = head.pos as usize;
        let mut end = start + head.size as usize;
        let mut last = head.last;
        // Staged batches are contiguous in offsets and in `pending`: each starts where the
        // previous ended, so whole batches make one slice.
        for e in &entries[first + 1..] {
            let to = e.pos as usize + e.size as usize;
            if to - start > max_bytes {
                break;
            }
            end = to;
            last = e.last;
        }
        Some((head.base, last, &self.pending[start..end]))
    }

    /// Stage batches a Raft leader already accepted (a follower applying committed entries, or
    /// any replica replaying them after a restart): `batches` is zero or more whole v2 batches
    /// back to back, with the offsets, epochs, timestamps and CRCs the leader gave them, staged
    /// as they are (Kafka's `appendAsFollower`). Batches wholly below the next offset are
    /// already in the log and skipped, so applying an entry twice changes nothing. The leader
    /// validated the producer sequences and transactions; only the producer and transaction
    /// state is updated here, as `stage` did on the leader. No backpressure: what was committed
    /// must be taken (the caller flushes right after). A malformed or truncated batch, or one
    /// that does not start at the next offset (a gap), is CORRUPT_MESSAGE and nothing of the
    /// call is staged. Returns the next offset after staging.
    pub fn stage_replicated(&mut self, batches: &[u8]) -> Result<u64, AppendError> {
        // Validate every batch before staging any: a refused call must leave no trace.
        let mut accepted: Vec<(usize, BatchHeader)> = Vec::new();
        let mut next = self.next_offset;
        let mut pos = 0;
        while pos < batches.len() {
            let rest = &batches[pos..];
            let h = match peek_batch(rest, pos as u64, rest.len().max(BATCH_OVERHEAD)) {
                Ok(Peek::Batch(h)) => h,
                Ok(Peek::Incomplete { .. }) => {
                    return Err(AppendError::Corrupt(format!(
                        "truncated replicated batch at byte {pos}"
                    )))
                }
                Err(e) => return Err(AppendError::Corrupt(e.to_string())),
            };
            let size = h.size;
            if h.last_offset() >= next {
                if h.base_offset != next {
                    return Err(AppendError::Corrupt(format!(
                        "replicated batch at offset {}, the log ends at {next}",
                        h.base_offset
                    )));
                }
                next = h.last_offset() + 1;
                accepted.push((pos, h));
            }
            pos += size;
        }
        for (pos, h) in accepted {
            self.push_pending(&batches[pos..pos + h.size], &h);
        }
        Ok(self.next_offset)
    }

    /// Whole batches starting with the one that holds `offset`, up to `max_bytes` (the first
    /// batch is returned whole even when larger, as Kafka does since KIP-74, when `min_one`).
    /// Stops at the end of a segment; the next fetch continues in the next one.
    pub fn read(&self, offset: u64, max_bytes: usize, min_one: bool) -> Read<D::File> {
        self.read_upto(offset, max_bytes, min_one, u64::MAX)
    }

    /// [`Self::read`] of the batches wholly below `max_offset` (exclusive; batches are atomic):
    /// a read_committed fetch passes the last stable offset (`LocalLog.read`'s
    /// `maxOffsetMetadata`). An offset in `[max_offset, high watermark]` reads as empty.
    pub fn read_upto(
        &self,
        offset: u64,
        max_bytes: usize,
        min_one: bool,
        max_offset: u64,
    ) -> Read<D::File> {
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
            let mut last_offset = 0;
            for e in &seg.entries[ei..] {
                if e.last >= max_offset {
                    break;
                }
                let next = e.pos + e.size as u64;
                if (next - start) as usize > max_bytes && !(min_one && end == start) {
                    break;
                }
                end = next;
                last_offset = e.last;
            }
            if end == start {
                return Read::Empty;
            }
            return Read::Data(ReadPlan {
                file: seg.file.clone(),
                pos: start,
                len: (end - start) as usize,
                last_offset,
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
        let (target, dir) = {
            let me = this.borrow();
            if offset <= me.log_start {
                return Ok(me.log_start);
            }
            (offset.min(me.high_watermark), me.dir.clone())
        };
        // The start must never be past what survives a crash: a log that reopened ending
        // before its stored start would continue from the start, and the batches a Raft replay
        // brings back for the offsets between would not follow it.
        Self::sync(this).await?;
        write_start_file(&dir, target).await?;
        {
            let mut me = this.borrow_mut();
            me.log_start = target;
            // Aborts wholly below the start are never asked for again (Kafka deletes their
            // transaction index with the segment).
            while me.txns.aborted.front().is_some_and(|a| a.last < target) {
                me.txns.aborted.pop_front();
            }
        }
        Self::remove_segments_below(this, target).await?;
        Ok(target)
    }

    /// A re-seeding request answered from this log: whole batches from `from` (or the log start,
    /// if later) up to `upto` (exclusive) and the high watermark, at most `max_bytes` (or one
    /// larger batch), and the log start to send with them. Everything below the high watermark
    /// is committed, on a Raft leader as on a follower.
    pub fn read_for_seed(&self, from: u64, upto: u64, max_bytes: usize) -> (Read<D::File>, u64) {
        let start = self.log_start;
        let bound = upto.min(self.high_watermark);
        (
            self.read_upto(from.max(start), max_bytes, true, bound),
            start,
        )
    }

    /// Append a re-seeding chunk (whole batches as the sender's log holds them, and the sender's
    /// log start) as a follower appends committed entries, durably. A chunk whose first batch
    /// starts past this log's end (the sender's retention moved its start) first restarts this
    /// log empty there ([`Self::restart_at`]); once appended, the log start moves up to the
    /// sender's. An empty chunk whose log start is past this log's end (the sender deleted
    /// every record this log lacks) restarts this log empty at that start. A chunk that does
    /// not follow the log appends nothing (`appended` is the error).
    pub async fn append_seed(
        this: &RefCell<Self>,
        sender_log_start: u64,
        batches: &[u8],
    ) -> io::Result<Seeded> {
        let first = match peek_batch(batches, 0, batches.len().max(BATCH_OVERHEAD)) {
            Ok(Peek::Batch(h)) => Some(h.base_offset),
            _ if batches.is_empty() => Some(sender_log_start),
            _ => None,
        };
        let restarted_at = {
            let me = this.borrow();
            first.filter(|&b| {
                b > me.next_offset && me.pending.is_empty() && me.high_watermark == me.next_offset
            })
        };
        if let Some(base) = restarted_at {
            Self::restart_at(this, base).await?;
        }
        let staged = this.borrow_mut().stage_replicated(batches);
        if let Ok(end) = staged {
            Self::flush_upto(this, end).await?;
            let (start, hw) = {
                let me = this.borrow();
                (me.log_start, me.high_watermark)
            };
            if sender_log_start > start && sender_log_start <= hw {
                Self::delete_records(this, sender_log_start).await?;
            }
        }
        Ok(Seeded {
            restarted_at,
            appended: staged,
        })
    }

    /// Drop every record and start the log empty at `offset` (Kafka's
    /// `UnifiedLog.truncateFullyAndStartAt`): a replica being re-seeded whose next record is
    /// before the sender's log start (retention or DeleteRecords removed it there) continues
    /// from that start. `offset` must not be before the next offset, and nothing may be staged:
    /// no offset is ever given to two records. The new start is durable before the old segments
    /// go, so a crash between leaves a log that opens at the new start.
    pub async fn restart_at(this: &RefCell<Self>, offset: u64) -> io::Result<()> {
        {
            let me = this.borrow();
            assert!(
                offset >= me.next_offset && me.pending.is_empty(),
                "restarting the log at {offset}, before its next offset {} or with {} bytes staged",
                me.next_offset,
                me.pending.len()
            );
        }
        let dir = this.borrow().dir.clone();
        write_start_file(&dir, offset).await?;
        let names: Vec<String> = {
            let mut me = this.borrow_mut();
            me.log_start = offset;
            me.next_offset = offset;
            me.high_watermark = offset;
            me.producers.clear();
            me.txns = Txns::default();
            me.unsynced = false;
            me.segments
                .drain(..)
                .map(|s| segment_name(s.base))
                .collect()
        };
        for name in &names {
            dir.remove(name).await?;
        }
        if !names.is_empty() {
            dir.sync_dir().await?;
        }
        Ok(())
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

/// Apply an accepted (or recovered) batch to the producer and transaction state, as Kafka's
/// `ProducerAppendInfo.append` does once a batch passed validation: a data batch is
/// remembered for duplicate detection and a transactional one starts the producer's
/// transaction if none is ongoing; a transaction marker ends it.
fn remember_producer(
    producers: &mut HashMap<i64, Producer>,
    txns: &mut Txns,
    batch: &[u8],
    h: &BatchHeader,
) {
    let (pid, epoch, first_seq) = producer_fields(batch);
    if pid < 0 {
        return;
    }
    if h.attributes & ATTR_CONTROL != 0 {
        // A control batch holds one record; anything that is not a transaction marker (or an
        // empty batch, what Kafka's cleaner leaves) changes nothing, and adds no producer.
        let mut marker = None;
        let _ = for_each_record(batch, h, 0, |_, t, k, v| {
            marker = marker.or_else(|| parse_marker(k, v).map(|m| (m, t)));
        });
        if let Some(((commit, coordinator_epoch), timestamp)) = marker {
            let p = producers.entry(pid).or_default();
            end_transaction(p, txns, pid, commit, h.base_offset);
            if epoch != p.epoch {
                p.epoch = epoch;
                p.batches.clear();
            }
            p.coordinator_epoch = coordinator_epoch;
            // The marker record's timestamp (`ProducerAppendInfo.append`: `record.timestamp()`,
            // which is the batch's max timestamp under LogAppendTime).
            p.last_timestamp = if h.attributes & ATTR_LOG_APPEND_TIME != 0 {
                be_i64(batch, 35)
            } else {
                timestamp
            };
        }
        return;
    }
    let p = producers.entry(pid).or_default();
    // `batch.maxTimestamp()` (`ProducerAppendInfo.appendDataBatch`): the max timestamp field,
    // which LogAppendTime batches carry stamped by `stage`.
    p.last_timestamp = be_i64(batch, 35);
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
    if h.attributes & ATTR_TRANSACTIONAL != 0 && p.txn_first.is_none() {
        p.txn_first = Some(h.base_offset);
        txns.ongoing.insert(h.base_offset, pid);
    }
}

/// A marker at `marker` ends the producer's ongoing transaction, if any (an empty one leaves no
/// trace, as Kafka emits no `CompletedTxn` for it): it holds the last stable offset back until
/// the marker is durable, and an abort is indexed.
fn end_transaction(p: &mut Producer, txns: &mut Txns, pid: i64, commit: bool, marker: u64) {
    let Some(first) = p.txn_first.take() else {
        return;
    };
    txns.ongoing.remove(&first);
    txns.ending.insert(first, marker);
    if !commit {
        let stable_after = txns.ongoing.keys().next().copied().unwrap_or(marker + 1);
        txns.aborted.push_back(Aborted {
            producer_id: pid,
            first,
            last: marker,
            stable_after,
        });
    }
}

/// Make `offset` the log start durably: [`START_MAGIC`], the offset, a CRC-32C of both.
async fn write_start_file<D: LogDir>(dir: &D, offset: u64) -> io::Result<()> {
    let file = dir.open(START_FILE).await?;
    let mut rec = Vec::with_capacity(16);
    rec.extend_from_slice(START_MAGIC);
    rec.extend_from_slice(&offset.to_be_bytes());
    let crc = crc32c::crc32c(&rec);
    rec.extend_from_slice(&crc.to_be_bytes());
    file.write_at(0, rec).await?;
    file.sync().await
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
        batch_of(n, ts, pid, epoch, seq, false)
    }

    /// A transactional producer batch (attributes 0x10), as a transactional producer sends it.
    fn txn_batch(n: usize, pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
        batch_of(n, 1_000, pid, epoch, seq, true)
    }

    fn batch_of(n: usize, ts: i64, pid: i64, epoch: i16, seq: i32, transactional: bool) -> Vec<u8> {
        let vals: Vec<Vec<u8>> = (0..n).map(|i| format!("v{i}").into_bytes()).collect();
        let recs: Vec<(Option<&[u8]>, Option<&[u8]>)> =
            vals.iter().map(|v| (None, Some(v.as_slice()))).collect();
        let mut b = Vec::new();
        encode_batch(0, ts, &recs, &mut b);
        crate::batch::stamp_producer(&mut b, pid, epoch, seq, transactional);
        b
    }

    fn marker(
        log: &RefCell<TopicLog<MemDir>>,
        pid: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> Result<Staged, AppendError> {
        log.borrow_mut()
            .stage_marker(pid, epoch, commit, coordinator_epoch, 5_000, false)
    }

    fn flush(log: &RefCell<TopicLog<MemDir>>) {
        block_on(TopicLog::flush(log)).unwrap();
    }

    fn lso(log: &RefCell<TopicLog<MemDir>>) -> u64 {
        log.borrow().last_stable_offset()
    }

    /// Every batch readable below `bound`: (base offset, attributes, producer id).
    fn batches_below(log: &RefCell<TopicLog<MemDir>>, bound: u64) -> Vec<(u64, i16, i64)> {
        let mut out = Vec::new();
        let mut next = log.borrow().log_start_offset();
        loop {
            let plan = match log.borrow().read_upto(next, 1 << 20, true, bound) {
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
                out.push((h.base_offset, h.attributes, be_i64(&bytes[pos..], 43)));
                next = h.last_offset() + 1;
                pos += h.size;
            }
        }
        out
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
    fn transactional_batches_hold_the_lso_until_their_marker_is_durable() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        // Producer 7 opens a transaction at offset 0; a plain batch and more of the
        // transaction follow.
        assert_eq!(stage(&log, txn_batch(3, 7, 0, 0)).unwrap().base_offset, 0);
        stage(&log, producer_batch(2, 0, -1, -1, 0)).unwrap();
        assert_eq!(stage(&log, txn_batch(2, 7, 0, 3)).unwrap().base_offset, 5);
        assert_eq!(lso(&log), 0, "nothing is durable yet");
        flush(&log);
        assert_eq!((log.borrow().high_watermark(), lso(&log)), (7, 0));
        // Kafka's checks: a transactional batch needs a producer id; a non-transactional one
        // from a producer inside a transaction is INVALID_TXN_STATE (after epoch and sequence).
        let err = stage(&log, txn_batch(1, -1, -1, 0)).unwrap_err();
        assert_eq!(err.code(), 87);
        let err = stage(&log, producer_batch(1, 0, 7, 0, 5)).unwrap_err();
        assert_eq!(err, AppendError::InvalidTxnState { first_offset: 0 });
        assert_eq!(err.code(), 48);
        assert_eq!(
            stage(&log, producer_batch(1, 0, 7, 0, 9))
                .unwrap_err()
                .code(),
            45,
            "the sequence is checked first"
        );
        // A retried transactional batch is still a duplicate.
        assert!(stage(&log, txn_batch(2, 7, 0, 3)).unwrap().duplicate);
        // COMMIT: staged at the next offset, but the LSO waits for it to be durable.
        let m = marker(&log, 7, 0, true, 5).unwrap();
        assert_eq!((m.base_offset, m.last_offset, m.duplicate), (7, 7, false));
        assert_eq!(lso(&log), 0);
        flush(&log);
        assert_eq!((log.borrow().high_watermark(), lso(&log)), (8, 8));
        assert!(log.borrow().aborted_transactions(0, 100).is_empty());
        // After its marker the producer may write without a transaction, continuing its
        // sequence.
        assert_eq!(
            stage(&log, producer_batch(1, 0, 7, 0, 5))
                .unwrap()
                .base_offset,
            8
        );
        flush(&log);
        assert_eq!(lso(&log), 9);
    }

    #[test]
    fn aborts_are_indexed_and_read_committed_reads_stop_at_the_lso() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        stage(&log, txn_batch(2, 8, 0, 0)).unwrap(); // 0..=1, aborted below
        stage(&log, txn_batch(2, 9, 0, 0)).unwrap(); // 2..=3, committed after the abort
        stage(&log, producer_batch(1, 0, -1, -1, 0)).unwrap(); // 4
        assert_eq!(marker(&log, 8, 0, false, 0).unwrap().base_offset, 5);
        flush(&log);
        assert_eq!(lso(&log), 2, "producer 9's transaction is ongoing");
        assert_eq!(log.borrow().aborted_transactions(0, 2), vec![(8, 0)]);
        // Kafka's range test: the abort's marker at or after the fetch offset, its first
        // offset before the upper bound.
        assert_eq!(log.borrow().aborted_transactions(5, 6), vec![(8, 0)]);
        assert!(log.borrow().aborted_transactions(6, 100).is_empty());
        assert!(log.borrow().aborted_transactions(0, 0).is_empty());
        // read_committed stops at the LSO: whole batches below it only.
        let b = batches_below(&log, lso(&log));
        assert_eq!(b, vec![(0, 0x10, 8)]);
        match log.borrow().read_upto(0, 1 << 20, true, 2) {
            Read::Data(p) => assert_eq!(p.last_offset(), 1),
            _ => panic!("batch 0..=1 is below the LSO"),
        }
        assert!(matches!(
            log.borrow().read_upto(2, 1 << 20, true, 2),
            Read::Empty
        ));
        assert!(matches!(
            log.borrow().read_upto(5, 1 << 20, true, 2),
            Read::Empty
        ));
        assert!(matches!(
            log.borrow().read_upto(7, 1 << 20, true, 2),
            Read::OutOfRange
        ));
        marker(&log, 9, 0, true, 0).unwrap(); // 6
        flush(&log);
        assert_eq!(lso(&log), 7);
        let b = batches_below(&log, lso(&log));
        assert_eq!(
            b,
            vec![
                (0, 0x10, 8),
                (2, 0x10, 9),
                (4, 0, -1),
                (5, 0x30, 8),
                (6, 0x30, 9)
            ]
        );
        // A second abort of producer 8, interleaved with an ongoing transaction of 9: the
        // search from the first abort stops once an abort's stable offset passes the bound.
        stage(&log, txn_batch(1, 9, 0, 2)).unwrap(); // 7
        stage(&log, txn_batch(1, 8, 0, 2)).unwrap(); // 8
        marker(&log, 8, 0, false, 0).unwrap(); // 9
        flush(&log);
        assert_eq!(lso(&log), 7);
        assert_eq!(
            log.borrow().aborted_transactions(0, 100),
            vec![(8, 0), (8, 8)]
        );
        assert_eq!(log.borrow().aborted_transactions(0, 8), vec![(8, 0)]);
        assert_eq!(log.borrow().aborted_transactions(6, 9), vec![(8, 8)]);
    }

    #[test]
    fn the_marker_in_the_log_is_kafkas_control_batch() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        stage(&log, txn_batch(1, 4242, 3, 0)).unwrap();
        log.borrow_mut()
            .stage_marker(4242, 3, false, 17, 1_700_000_000_123, false)
            .unwrap();
        flush(&log);
        let plan = match log.borrow().read(1, 1 << 20, true) {
            Read::Data(p) => p,
            _ => panic!("the marker is readable"),
        };
        let bytes = block_on(plan.read()).unwrap();
        let mut want = Vec::new();
        encode_marker(1, 1_700_000_000_123, 4242, 3, false, 17, &mut want);
        assert_eq!(bytes, want, "stored as encoded, leader epoch 0");
        let Ok(Peek::Batch(h)) = peek_batch(&bytes, 0, 1 << 20) else {
            panic!()
        };
        assert_eq!((h.base_offset, h.records_count, h.attributes), (1, 1, 0x30));
        assert_eq!(producer_fields(&bytes), (4242, 3, -1));
        assert_eq!(be_i64(&bytes, 27), 1_700_000_000_123);
        assert_eq!(be_i64(&bytes, 35), 1_700_000_000_123);
        let r = &decode_records(&bytes, &h, 0).unwrap()[0];
        assert_eq!(r.key.as_deref(), Some(&[0u8, 0, 0, 0][..]), "v0, ABORT");
        assert_eq!(r.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 17][..]));
        // On a LogAppendTime topic the marker carries the timestamp type too, CRC intact.
        let s = log
            .borrow_mut()
            .stage_marker(4242, 3, true, 17, 9_000, true)
            .unwrap();
        assert_eq!(s.log_append_time, 9_000);
        flush(&log);
        drop(log);
        let (_, rep) = open(&dir);
        assert_eq!((rep.truncated, rep.next_offset), (None, 3));
    }

    #[test]
    fn markers_are_fenced_by_producer_and_coordinator_epoch() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        stage(&log, txn_batch(1, 7, 2, 0)).unwrap();
        // An older producer epoch: INVALID_PRODUCER_EPOCH (Kafka 2.7+), nothing staged.
        let err = marker(&log, 7, 1, false, 0).unwrap_err();
        assert_eq!(err, AppendError::StaleProducerEpoch { current: 2, got: 1 });
        assert_eq!(err.code(), 47);
        assert_eq!(log.borrow().next_offset(), 1);
        // A newer epoch (the coordinator bumped it to abort) ends the transaction and becomes
        // the producer's: its old epoch is fenced from then on.
        marker(&log, 7, 3, false, 4).unwrap();
        assert_eq!(stage(&log, txn_batch(1, 7, 2, 1)).unwrap_err().code(), 47);
        // An older coordinator epoch: TRANSACTION_COORDINATOR_FENCED.
        let err = marker(&log, 7, 3, true, 3).unwrap_err();
        assert_eq!(err, AppendError::CoordinatorFenced { current: 4, got: 3 });
        assert_eq!(err.code(), 52);
        // A marker with no transaction ongoing (a retry) is written, and indexes nothing.
        assert_eq!(marker(&log, 7, 3, false, 4).unwrap().base_offset, 2);
        // So is one for a producer this partition never saw.
        assert_eq!(marker(&log, 99, 0, true, 0).unwrap().base_offset, 3);
        assert_eq!(marker(&log, -1, 0, true, 0).unwrap_err().code(), 87);
        flush(&log);
        assert_eq!(log.borrow().aborted_transactions(0, 100), vec![(7, 0)]);
        assert_eq!(lso(&log), 4);
        // The new epoch starts its sequence at 0.
        assert_eq!(stage(&log, txn_batch(1, 7, 3, 1)).unwrap_err().code(), 45);
        assert_eq!(stage(&log, txn_batch(1, 7, 3, 0)).unwrap().base_offset, 4);
    }

    #[test]
    fn recovery_rebuilds_ongoing_and_aborted_transactions() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        stage(&log, txn_batch(2, 1, 0, 0)).unwrap(); // 0..=1 aborted
        stage(&log, txn_batch(2, 2, 0, 0)).unwrap(); // 2..=3 committed
        marker(&log, 1, 0, false, 6).unwrap(); // 4
        marker(&log, 2, 0, true, 6).unwrap(); // 5
        stage(&log, txn_batch(1, 3, 5, 0)).unwrap(); // 6, ongoing at the end
        stage(&log, producer_batch(1, 0, -1, -1, 0)).unwrap(); // 7
        flush(&log);
        // A marker staged but never flushed is lost: producer 3's transaction stays open.
        marker(&log, 3, 5, true, 6).unwrap();
        assert_eq!(lso(&log), 6);
        drop(log);
        let (log, rep) = open(&dir);
        assert_eq!(rep.next_offset, 8);
        assert_eq!(lso(&log), 6, "the ongoing transaction survives the restart");
        assert_eq!(log.borrow().aborted_transactions(0, 100), vec![(1, 0)]);
        assert_eq!(
            stage(&log, producer_batch(1, 0, 3, 5, 1))
                .unwrap_err()
                .code(),
            48
        );
        assert_eq!(marker(&log, 1, 0, true, 5).unwrap_err().code(), 52);
        assert_eq!(marker(&log, 3, 4, true, 6).unwrap_err().code(), 47);
        assert_eq!(marker(&log, 3, 5, true, 6).unwrap().base_offset, 8);
        flush(&log);
        assert_eq!(lso(&log), 9);
        drop(log);
        let (log, _) = open(&dir);
        assert_eq!(lso(&log), 9);
        assert_eq!(log.borrow().aborted_transactions(0, 100), vec![(1, 0)]);
    }

    /// A transactional producer batch carrying `vals`.
    fn valued_batch(vals: &[Vec<u8>], pid: i64, seq: i32) -> Vec<u8> {
        let recs: Vec<_> = vals
            .iter()
            .map(|v| (None::<&[u8]>, Some(v.as_slice())))
            .collect();
        let mut b = Vec::new();
        encode_batch(0, 1_000, &recs, &mut b);
        let epoch = if pid >= 0 { 0 } else { -1 };
        crate::batch::stamp_producer(&mut b, pid, epoch, seq, pid >= 0);
        b
    }

    /// What a read_committed consumer gets: the batches below the last stable offset, minus
    /// those of aborted transactions, found as Kafka's consumer does (`CompletedFetch`: the
    /// aborted list the fetch returns, consumed up to each batch's last offset; an ABORT marker
    /// ends its producer's aborted run; control batches are never returned).
    fn read_committed(log: &RefCell<TopicLog<MemDir>>) -> Vec<Vec<u8>> {
        let lso = lso(log);
        let start = log.borrow().log_start_offset();
        let mut aborted: VecDeque<(i64, u64)> =
            log.borrow().aborted_transactions(start, lso).into();
        aborted.make_contiguous().sort_by_key(|a| a.1);
        let mut aborted_pids = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        let mut next = start;
        loop {
            let plan = match log.borrow().read_upto(next, 1 << 20, true, lso) {
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
                let batch = &bytes[pos..pos + h.size];
                next = h.last_offset() + 1;
                pos += h.size;
                assert!(
                    h.last_offset() < lso,
                    "read_upto returned a batch past the LSO"
                );
                while aborted.front().is_some_and(|a| a.1 <= h.last_offset()) {
                    aborted_pids.insert(aborted.pop_front().expect("front").0);
                }
                let records = decode_records(batch, &h, 0).unwrap();
                if h.is_control() {
                    let key = records[0].key.as_ref().expect("a marker has a key");
                    if i16::from_be_bytes([key[2], key[3]]) == 0 {
                        aborted_pids.remove(&h.producer_id);
                    }
                    continue;
                }
                if h.attributes & 0x10 != 0 && aborted_pids.contains(&h.producer_id) {
                    continue;
                }
                out.extend(records.into_iter().filter_map(|r| r.value));
            }
        }
        out
    }

    /// Issue 17 where the aborted-transactions index lives (the simulator has no topic data):
    /// seeded runs of interleaved transactional producers (each transaction's outcome drawn
    /// when it starts, as its coordinator would decide it), plain producers, markers, flushes
    /// and power losses keeping a random torn prefix of what was not flushed. After every step a
    /// read_committed consumer never gets a record of a transaction that aborts; at the end,
    /// with every transaction ended, it gets exactly the records in the log that are not
    /// aborted. A marker lost in a crash is written again, as the coordinator resends it.
    #[test]
    fn read_committed_never_returns_an_aborted_record_across_crashes() {
        struct Txn {
            pid: i64,
            commit: bool,
            seq: i32,
            /// No more data (its producer crashed): only its marker is left to write.
            closed: bool,
            marker: bool,
            durable: bool,
        }
        let (mut crashes, mut aborted_seen) = (0, 0);
        for seed in 0..60u64 {
            let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut next = |n: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % n
            };
            let dir = MemDir::new();
            let (mut log, _) = open(&dir);
            let mut txns: Vec<Txn> = Vec::new();
            // Every value written: Some(commit) for a transaction's, None for a plain one's.
            let mut fate: HashMap<Vec<u8>, Option<bool>> = HashMap::new();
            let mut k = 0u64;
            for step in 0..250 {
                let live: Vec<usize> = (0..txns.len())
                    .filter(|i| !txns[*i].marker && !txns[*i].closed)
                    .collect();
                match next(12) {
                    0..=4 => {
                        let i = if live.len() < 3 && (live.is_empty() || next(3) == 0) {
                            txns.push(Txn {
                                pid: 100 + txns.len() as i64,
                                commit: next(2) == 0,
                                seq: 0,
                                closed: false,
                                marker: false,
                                durable: false,
                            });
                            txns.len() - 1
                        } else {
                            live[next(live.len() as u64) as usize]
                        };
                        let n = 1 + next(3) as usize;
                        let vals: Vec<Vec<u8>> = (0..n)
                            .map(|_| {
                                k += 1;
                                format!("s{seed}-v{k}").into_bytes()
                            })
                            .collect();
                        let t = &mut txns[i];
                        stage(&log, valued_batch(&vals, t.pid, t.seq)).unwrap();
                        t.seq += n as i32;
                        for v in vals {
                            fate.insert(v, Some(t.commit));
                        }
                    }
                    5 => {
                        k += 1;
                        let v = format!("s{seed}-v{k}").into_bytes();
                        stage(&log, valued_batch(std::slice::from_ref(&v), -1, -1)).unwrap();
                        fate.insert(v, None);
                    }
                    6..=7 => {
                        let open: Vec<usize> =
                            (0..txns.len()).filter(|i| !txns[*i].marker).collect();
                        if let Some(&i) = open.get(next(open.len().max(1) as u64) as usize) {
                            let t = &mut txns[i];
                            marker(&log, t.pid, 0, t.commit, 0).unwrap();
                            t.marker = true;
                        }
                    }
                    8..=10 => {
                        flush(&log);
                        for t in txns.iter_mut().filter(|t| t.marker) {
                            t.durable = true;
                        }
                    }
                    _ => {
                        crashes += 1;
                        drop(log);
                        let mode = next(3);
                        let cut = next(1 << 20) as usize;
                        dir.crash(|_, unsynced| match mode {
                            0 => 0,
                            1 => unsynced,
                            _ => cut % (unsynced + 1),
                        });
                        log = open(&dir).0;
                        for t in txns.iter_mut() {
                            // Its producer is gone; a marker not known durable is resent.
                            t.closed = true;
                            t.marker &= t.durable;
                        }
                    }
                }
                for v in read_committed(&log) {
                    match fate.get(&v) {
                        Some(Some(true)) | Some(None) => {}
                        Some(Some(false)) => panic!(
                            "seed {seed} step {step}: read_committed returned {:?} of an \
                             aborted transaction",
                            String::from_utf8_lossy(&v)
                        ),
                        None => panic!("seed {seed} step {step}: a record nobody wrote"),
                    }
                }
            }
            for t in txns.iter_mut().filter(|t| !t.durable) {
                marker(&log, t.pid, 0, t.commit, 0).unwrap();
                t.durable = true;
            }
            flush(&log);
            assert_eq!(lso(&log), log.borrow().high_watermark(), "seed {seed}");
            let got: Vec<Vec<u8>> = read_committed(&log);
            let expected: Vec<Vec<u8>> = read_all(&log, 0)
                .into_iter()
                .map(|(_, v)| v)
                .filter(|v| {
                    let f = fate.get(v).copied();
                    aborted_seen += usize::from(f == Some(Some(false)));
                    matches!(f, Some(None) | Some(Some(true)))
                })
                .collect();
            assert_eq!(
                got, expected,
                "seed {seed}: read_committed after every marker"
            );
        }
        assert!(
            crashes > 20 && aborted_seen > 20,
            "the seeds must crash and leave aborted records in the log ({crashes} crashes, \
             {aborted_seen} aborted records)"
        );
    }

    #[test]
    fn active_producers_report_kafkas_producer_state_and_survive_recovery() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        let state = |log: &RefCell<TopicLog<MemDir>>| log.borrow().active_producers();
        let ps = |producer_id, epoch, last_sequence, last_timestamp, coordinator_epoch, txn| {
            ProducerState {
                producer_id,
                epoch,
                last_sequence,
                last_timestamp,
                coordinator_epoch,
                txn_start_offset: txn,
            }
        };
        assert!(state(&log).is_empty());
        // Offset 0: a plain batch (no producer id) is nobody's. 1..=5: idempotent producer 9,
        // sequences 0..=2 and 3..=4. 6..=8: transactional producer 4 (epoch 2), so its
        // transaction starts at 6. 9: a marker of producer 5, which never wrote here.
        stage(&log, producer_batch(1, 900, -1, -1, 0)).unwrap();
        stage(&log, producer_batch(3, 2_000, 9, 1, 0)).unwrap();
        stage(&log, producer_batch(2, 2_500, 9, 1, 3)).unwrap();
        stage(&log, batch_of(2, 3_000, 4, 2, 0, true)).unwrap();
        stage(&log, batch_of(1, 3_100, 4, 2, 2, true)).unwrap();
        marker(&log, 5, 1, false, 3).unwrap();
        assert_eq!(
            state(&log),
            vec![
                ps(4, 2, 2, 3_100, -1, Some(6)),
                ps(5, 1, -1, 5_000, 3, None),
                ps(9, 1, 4, 2_500, -1, None),
            ],
            "staged batches count, as Kafka's leader state does"
        );
        flush(&log);
        drop(log);
        // Recovery rebuilds the same state from the segments.
        let (log, _) = open(&dir);
        assert_eq!(
            state(&log),
            vec![
                ps(4, 2, 2, 3_100, -1, Some(6)),
                ps(5, 1, -1, 5_000, 3, None),
                ps(9, 1, 4, 2_500, -1, None),
            ]
        );
        // The commit ends producer 4's transaction and takes the marker's coordinator epoch and
        // timestamp; its sequence is kept (same epoch). A marker with a newer epoch (a bump on
        // abort) forgets the sequences of the old one.
        marker(&log, 4, 2, true, 7).unwrap();
        marker(&log, 9, 2, false, 7).unwrap();
        let after = vec![
            ps(4, 2, 2, 5_000, 7, None),
            ps(5, 1, -1, 5_000, 3, None),
            ps(9, 2, -1, 5_000, 7, None),
        ];
        assert_eq!(state(&log), after);
        flush(&log);
        drop(log);
        let (log, _) = open(&dir);
        assert_eq!(state(&log), after);
    }

    #[test]
    fn delete_records_drops_aborts_below_the_log_start() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        stage(&log, txn_batch(1, 1, 0, 0)).unwrap(); // 0
        marker(&log, 1, 0, false, 0).unwrap(); // 1
        stage(&log, txn_batch(1, 1, 0, 1)).unwrap(); // 2
        stage(&log, txn_batch(1, 2, 0, 0)).unwrap(); // 3, ongoing
        marker(&log, 1, 0, false, 0).unwrap(); // 4
        flush(&log);
        assert_eq!(log.borrow().aborted_transactions(0, 100).len(), 2);
        assert_eq!(block_on(TopicLog::delete_records(&log, 2)).unwrap(), 2);
        assert_eq!(log.borrow().aborted_transactions(0, 100), vec![(1, 2)]);
        // An ongoing transaction below the new start holds the LSO at the start, no lower.
        assert_eq!(block_on(TopicLog::delete_records(&log, 4)).unwrap(), 4);
        assert_eq!(lso(&log), 4);
        assert_eq!(log.borrow().aborted_transactions(0, 100), vec![(1, 2)]);
        block_on(TopicLog::delete_records(&log, 5)).unwrap();
        assert!(log.borrow().aborted_transactions(0, 100).is_empty());
        assert_eq!(lso(&log), 5);
        drop(log);
        let (log, _) = open(&dir);
        assert!(log.borrow().aborted_transactions(0, 100).is_empty());
        assert_eq!(lso(&log), 5, "still ongoing, held at the log start");
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
    fn written_batches_are_durable_once_synced_by_a_sync_a_roll_or_a_deletion() {
        let dir = MemDir::new();
        let lose_unsynced = |dir: &MemDir| {
            dir.crash(|_, _| 0);
            open(dir)
        };
        // Written unsynced: readable at once, gone after a crash.
        let (log, _) = open(&dir);
        for i in 0..2 {
            stage(&log, producer_batch(2, i, -1, -1, 0)).unwrap();
        }
        assert_eq!(
            block_on(TopicLog::write_upto(&log, u64::MAX)).unwrap(),
            Some(4)
        );
        assert_eq!(read_all(&log, 0).len(), 4);
        drop(log);
        let (log, rep) = lose_unsynced(&dir);
        assert_eq!(rep.next_offset, 0, "nothing was synced");
        // Synced: kept.
        for i in 0..2 {
            stage(&log, producer_batch(2, i, -1, -1, 0)).unwrap();
        }
        block_on(TopicLog::write_upto(&log, u64::MAX)).unwrap();
        block_on(TopicLog::sync(&log)).unwrap();
        drop(log);
        let (log, rep) = lose_unsynced(&dir);
        assert_eq!(rep.next_offset, 4);
        // Rolling to a new segment syncs the one left: a crash loses the last segment's bytes
        // at most.
        for i in 0..12 {
            stage(&log, producer_batch(2, i, -1, -1, 0)).unwrap();
        }
        block_on(TopicLog::write_upto(&log, u64::MAX)).unwrap();
        let (segments, last_base) = {
            let me = log.borrow();
            (me.segment_count(), me.segments.last().unwrap().base)
        };
        assert!(segments > 2, "rolled: {segments} segments");
        drop(log);
        let (log, rep) = lose_unsynced(&dir);
        assert_eq!(
            rep.next_offset, last_base,
            "every segment but the last was synced"
        );
        // A deletion syncs first, so the stored start is never past what a crash keeps.
        let end = log.borrow().next_offset();
        stage(&log, producer_batch(2, 0, -1, -1, 0)).unwrap();
        block_on(TopicLog::write_upto(&log, u64::MAX)).unwrap();
        assert_eq!(
            block_on(TopicLog::delete_records(&log, end + 1)).unwrap(),
            end + 1
        );
        drop(log);
        let (log, rep) = lose_unsynced(&dir);
        assert_eq!((rep.log_start_offset, rep.next_offset), (end + 1, end + 2));
        assert_eq!(read_all(&log, end + 1).len(), 1);
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

    /// The staged batches as (base offset, last offset) pairs, by walking `pending_from`.
    fn staged_ranges(log: &RefCell<TopicLog<MemDir>>, from: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut next = from;
        while let Some((base, last, _)) = log.borrow().pending_from(next, 0) {
            out.push((base, last));
            next = last + 1;
        }
        out
    }

    #[test]
    fn flush_upto_writes_the_batches_below_it_and_keeps_the_rest_staged() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        for i in 0..10 {
            stage(&log, producer_batch(3, 100 + i, -1, -1, 0)).unwrap();
        }
        let fu = |end| block_on(TopicLog::flush_upto(&log, end)).unwrap();
        // 4 is inside the batch 3..=5: that batch is atomic and stays staged.
        assert_eq!(fu(4), Some(3));
        assert_eq!(log.borrow().high_watermark(), 3);
        assert_eq!(read_all(&log, 0).len(), 3);
        assert_eq!(fu(3), None, "nothing staged is below 3");
        assert_eq!(fu(0), None);
        assert_eq!(staged_ranges(&log, 3).first(), Some(&(3, 5)));
        assert_eq!(staged_ranges(&log, 3).last(), Some(&(27, 29)));
        // Enough to go past the 400-byte segments.
        assert_eq!(fu(18), Some(18));
        assert_eq!(log.borrow().high_watermark(), 18);
        assert!(log.borrow().segment_count() > 1, "rolled at segment.bytes");
        let got = read_all(&log, 0);
        assert_eq!(
            got.iter().map(|r| r.0).collect::<Vec<_>>(),
            (0..18).collect::<Vec<_>>()
        );
        assert_eq!(got[17], (17, b"v2".to_vec()));
        // The remainder was rebased: its first batch is the whole batch at offset 18.
        {
            let me = log.borrow();
            let (base, last, bytes) = me.pending_from(18, usize::MAX).unwrap();
            assert_eq!((base, last), (18, 29));
            let Ok(Peek::Batch(h)) = peek_batch(bytes, 0, 1 << 20) else {
                panic!("the remainder does not start with a batch")
            };
            assert_eq!(h.base_offset, 18);
            assert_eq!(bytes.len(), 4 * h.size, "four equal batches left");
        }
        stage(&log, producer_batch(3, 500, -1, -1, 0)).unwrap();
        assert_eq!(fu(u64::MAX), Some(33));
        assert!(!log.borrow().has_pending());
        assert_eq!(fu(u64::MAX), None);
        let got = read_all(&log, 0);
        assert_eq!(
            got.iter().map(|r| r.0).collect::<Vec<_>>(),
            (0..33).collect::<Vec<_>>()
        );
        drop(log);
        let (log, rep) = open(&dir);
        assert_eq!((rep.next_offset, rep.truncated), (33, None));
        assert_eq!(read_all(&log, 0), got);
    }

    /// A directory whose writes wait once before they happen, so a test can act while a flush
    /// awaits its write.
    #[derive(Clone, Default)]
    struct YieldDir(MemDir);
    struct YieldFile(crate::io::MemFile);

    impl LogFile for YieldFile {
        type Buf = Vec<u8>;
        async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
            self.0.read_at(pos, len).await
        }
        async fn read_buf(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
            self.0.read_buf(pos, len).await
        }
        async fn write_at(&self, pos: u64, data: Vec<u8>) -> io::Result<()> {
            futures_lite::future::yield_now().await;
            self.0.write_at(pos, data).await
        }
        async fn sync(&self) -> io::Result<()> {
            self.0.sync().await
        }
        async fn truncate(&self, len: u64) -> io::Result<()> {
            self.0.truncate(len).await
        }
        async fn len(&self) -> io::Result<u64> {
            self.0.len().await
        }
    }

    impl LogDir for YieldDir {
        type File = YieldFile;
        async fn open(&self, name: &str) -> io::Result<YieldFile> {
            Ok(YieldFile(self.0.open(name).await?))
        }
        async fn list(&self) -> io::Result<Vec<String>> {
            self.0.list().await
        }
        async fn remove(&self, name: &str) -> io::Result<()> {
            self.0.remove(name).await
        }
        async fn rename(&self, from: &str, to: &str) -> io::Result<()> {
            self.0.rename(from, to).await
        }
        async fn sync_dir(&self) -> io::Result<()> {
            self.0.sync_dir().await
        }
        async fn sync_file(&self, name: &str) -> io::Result<()> {
            self.0.sync_file(name).await
        }
    }

    #[test]
    fn a_batch_staged_while_flush_upto_writes_stays_staged_behind_the_rest() {
        let dir = YieldDir::default();
        let (log, _) = block_on(TopicLog::open(dir.clone(), small())).unwrap();
        let log = RefCell::new(log);
        let stage_y = |n| {
            log.borrow_mut()
                .stage(&mut producer_batch(n, 0, -1, -1, 0), 1_000, false)
                .unwrap()
                .base_offset
        };
        for _ in 0..3 {
            stage_y(3);
        }
        {
            let mut flushing = std::pin::pin!(TopicLog::flush_upto(&log, 6));
            assert!(
                block_on(futures_lite::future::poll_once(&mut flushing)).is_none(),
                "the flush waits on its write"
            );
            // The flush has taken 0..=5 and waits on its write; 6..=8 is still staged.
            assert!(log.borrow().pending_from(0, usize::MAX).is_none());
            assert_eq!(
                log.borrow().pending_from(6, usize::MAX).map(|p| (p.0, p.1)),
                Some((6, 8))
            );
            assert_eq!(stage_y(2), 9);
            assert_eq!(block_on(flushing).unwrap(), Some(6));
        }
        assert_eq!(log.borrow().high_watermark(), 6);
        let (base, last, bytes) = {
            let me = log.borrow();
            let (b, l, bytes) = me.pending_from(6, usize::MAX).unwrap();
            (b, l, bytes.to_vec())
        };
        assert_eq!((base, last), (6, 10), "the new batch follows the remainder");
        let Ok(Peek::Batch(h)) = peek_batch(&bytes, 0, 1 << 20) else {
            panic!("bad remainder")
        };
        let Ok(Peek::Batch(h2)) = peek_batch(&bytes[h.size..], 0, 1 << 20) else {
            panic!("the batch staged during the flush is not whole")
        };
        assert_eq!(
            (h.base_offset, h2.base_offset, h2.last_offset()),
            (6, 9, 10)
        );
        assert_eq!(bytes.len(), h.size + h2.size);
        assert_eq!(block_on(TopicLog::flush(&log)).unwrap(), Some(11));
        drop(log);
        let (log, rep) = block_on(TopicLog::open(dir.0.clone(), small())).unwrap();
        assert_eq!((rep.next_offset, rep.truncated), (11, None));
        assert_eq!(
            read_all(&RefCell::new(log), 0)
                .iter()
                .map(|r| r.0)
                .collect::<Vec<_>>(),
            (0..11).collect::<Vec<_>>()
        );
    }

    #[test]
    fn pending_from_returns_whole_staged_batches_within_max_bytes() {
        let dir = MemDir::new();
        let (log, _) = open(&dir);
        let sizes: Vec<usize> = [1, 4, 2, 3]
            .iter()
            .map(|&n| {
                let b = producer_batch(n, 0, -1, -1, 0);
                let len = b.len();
                stage(&log, b).unwrap();
                len
            })
            .collect();
        // Offsets: 0, 1..=4, 5..=6, 7..=9.
        let me = log.borrow();
        let at = |offset, max| {
            me.pending_from(offset, max)
                .map(|(b, l, x)| (b, l, x.len()))
        };
        let total: usize = sizes.iter().sum();
        assert_eq!(at(0, usize::MAX), Some((0, 9, total)));
        assert_eq!(at(0, 0), Some((0, 0, sizes[0])), "the first batch is whole");
        assert_eq!(at(1, sizes[1] - 1), Some((1, 4, sizes[1])));
        assert_eq!(
            at(0, sizes[0] + sizes[1]),
            Some((0, 4, sizes[0] + sizes[1]))
        );
        assert_eq!(at(0, sizes[0] + sizes[1] - 1), Some((0, 0, sizes[0])));
        assert_eq!(at(5, usize::MAX), Some((5, 9, sizes[2] + sizes[3])));
        assert_eq!(at(7, 1), Some((7, 9, sizes[3])));
        assert_eq!(at(2, usize::MAX), None, "2 is inside a batch");
        assert_eq!(at(10, usize::MAX), None, "nothing staged past the end");
        // The bytes are the staged batches, offsets assigned.
        let (_, _, bytes) = me.pending_from(5, usize::MAX).unwrap();
        let Ok(Peek::Batch(h)) = peek_batch(bytes, 0, 1 << 20) else {
            panic!("bad batch")
        };
        assert_eq!((h.base_offset, h.last_offset(), h.size), (5, 6, sizes[2]));
        drop(me);
        assert_eq!(block_on(TopicLog::flush_upto(&log, 5)).unwrap(), Some(5));
        assert_eq!(log.borrow().pending_from(0, usize::MAX).map(|p| p.0), None);
        assert_eq!(
            log.borrow()
                .pending_from(5, usize::MAX)
                .map(|p| (p.0, p.1, p.2.len())),
            Some((5, 9, sizes[2] + sizes[3]))
        );
    }

    /// A leader log with data from a plain producer, an idempotent one and a transactional one
    /// (committed), staged and not flushed; returns the staged bytes taken in chunks of one
    /// batch each, as a leader proposes them.
    fn leader_chunks(log: &RefCell<TopicLog<MemDir>>) -> Vec<Vec<u8>> {
        stage(log, producer_batch(2, 900, -1, -1, 0)).unwrap();
        stage(log, producer_batch(3, 2_000, 9, 1, 0)).unwrap();
        stage(log, producer_batch(2, 2_500, 9, 1, 3)).unwrap();
        stage(log, batch_of(2, 3_000, 4, 2, 0, true)).unwrap();
        marker(log, 4, 2, true, 7).unwrap();
        stage(log, batch_of(1, 3_100, 4, 2, 2, true)).unwrap();
        let mut chunks = Vec::new();
        let mut next = 0;
        while let Some((_, last, bytes)) = log.borrow().pending_from(next, 0) {
            chunks.push(bytes.to_vec());
            next = last + 1;
        }
        chunks
    }

    #[test]
    fn a_follower_staging_the_leaders_batches_has_the_leaders_log() {
        let leader_dir = MemDir::new();
        let (leader, _) = open(&leader_dir);
        let chunks = leader_chunks(&leader);
        assert_eq!(chunks.len(), 6);
        let all = chunks.concat();
        assert_eq!(
            leader.borrow().pending_from(0, usize::MAX).unwrap().2,
            &all[..]
        );
        flush(&leader);
        let dir = MemDir::new();
        let (follower, _) = open(&dir);
        // The first two entries, then all of them again: the first two are skipped.
        assert_eq!(
            follower
                .borrow_mut()
                .stage_replicated(&chunks[..2].concat()),
            Ok(5)
        );
        assert_eq!(follower.borrow_mut().stage_replicated(&all), Ok(11));
        assert_eq!(
            follower.borrow().next_offset(),
            leader.borrow().next_offset()
        );
        assert_eq!(
            follower.borrow().pending_from(0, usize::MAX).unwrap().2,
            &all[..],
            "staged byte for byte, once"
        );
        let producers = leader.borrow().active_producers();
        assert_eq!(producers.len(), 2);
        assert_eq!(follower.borrow().active_producers(), producers);
        assert!(read_all(&follower, 0).is_empty(), "staged is not readable");
        flush(&follower);
        assert_eq!(follower.borrow().high_watermark(), 11);
        assert_eq!(lso(&follower), lso(&leader));
        assert_eq!(
            lso(&follower),
            10,
            "producer 4's second transaction is ongoing"
        );
        assert_eq!(read_all(&follower, 0), read_all(&leader, 0));
        assert_eq!(
            batches_below(&follower, u64::MAX),
            batches_below(&leader, u64::MAX)
        );
        // Applying a committed entry again (after a restart, or a retried apply) is a no-op.
        assert_eq!(follower.borrow_mut().stage_replicated(&all), Ok(11));
        assert_eq!(follower.borrow_mut().stage_replicated(&chunks[3]), Ok(11));
        assert_eq!(follower.borrow_mut().stage_replicated(&[]), Ok(11));
        assert!(!follower.borrow().has_pending());
        assert_eq!(follower.borrow().active_producers(), producers);
        drop(follower);
        let (follower, rep) = open(&dir);
        assert_eq!((rep.next_offset, rep.truncated), (11, None));
        assert_eq!(read_all(&follower, 0), read_all(&leader, 0));
        assert_eq!(follower.borrow().active_producers(), producers);
        // The idempotent producer's next batch is judged by the replicated sequences.
        assert_eq!(
            stage(&follower, producer_batch(2, 2_500, 9, 1, 3))
                .unwrap()
                .base_offset,
            5,
            "a retry of a replicated batch is a duplicate"
        );
    }

    #[test]
    fn a_log_restarted_at_a_later_offset_takes_the_leaders_batches_from_there() {
        let leader_dir = MemDir::new();
        let (leader, _) = open(&leader_dir);
        let chunks = leader_chunks(&leader);
        flush(&leader);
        let dir = MemDir::new();
        let (follower, _) = open(&dir);
        follower.borrow_mut().stage_replicated(&chunks[0]).unwrap();
        flush(&follower);
        let first_end = follower.borrow().next_offset();
        // The leader's log starts at chunk 2's base: the follower starts there, empty.
        let base = first_end + chunks[1..2].iter().map(|c| batches_count(c)).sum::<u64>();
        block_on(TopicLog::restart_at(&follower, base)).unwrap();
        {
            let me = follower.borrow();
            assert_eq!(
                (me.log_start_offset(), me.next_offset(), me.high_watermark()),
                (base, base, base)
            );
            assert_eq!(me.segment_count(), 0, "every old segment removed");
        }
        assert!(
            follower.borrow_mut().stage_replicated(&chunks[0]).is_ok(),
            "wholly below the start: skipped"
        );
        assert_eq!(
            follower
                .borrow_mut()
                .stage_replicated(&chunks[2..].concat()),
            Ok(11)
        );
        flush(&follower);
        assert_eq!(read_all(&follower, base), read_all(&leader, base));
        drop(follower);
        let (follower, rep) = open(&dir);
        assert_eq!(
            (rep.log_start_offset, rep.next_offset),
            (base, 11),
            "reopens the same"
        );
        assert_eq!(read_all(&follower, base), read_all(&leader, base));
        // A restart that would give an offset twice is a caller bug.
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            block_on(TopicLog::restart_at(&follower, 3))
        }));
        assert!(again.is_err());
    }

    #[test]
    fn a_seeding_chunk_past_the_log_restarts_it_at_the_senders_start() {
        let (leader, _) = open(&MemDir::new());
        let chunks = leader_chunks(&leader);
        flush(&leader);
        let base = batches_count(&chunks[..2].concat());
        let (follower, _) = open(&MemDir::new());
        // What the sender reads for a request from 0 up to 5, its log starting at 0.
        let (plan, start) = leader.borrow().read_for_seed(0, base, 1 << 20);
        let Read::Data(plan) = plan else {
            panic!("nothing read")
        };
        assert_eq!((start, plan.last_offset() + 1), (0, base));
        let s = block_on(TopicLog::append_seed(
            &follower,
            0,
            &block_on(plan.read()).unwrap(),
        ))
        .unwrap();
        assert_eq!((s.restarted_at, s.appended), (None, Ok(base)));
        // A repeated chunk appends nothing again.
        let s = block_on(TopicLog::append_seed(&follower, 0, &chunks[0])).unwrap();
        assert_eq!((s.restarted_at, s.appended), (None, Ok(base)));
        assert_eq!(
            read_all(&follower, 0),
            read_all(&leader, 0)[..base as usize].to_vec()
        );
        // A chunk starting past the log (the sender's retention moved its start there):
        // restarted empty at the chunk, its start the sender's.
        let (fresh, _) = open(&MemDir::new());
        let s = block_on(TopicLog::append_seed(
            &fresh,
            base + 1,
            &chunks[2..].concat(),
        ))
        .unwrap();
        assert_eq!((s.restarted_at, s.appended), (Some(base), Ok(11)));
        assert_eq!(fresh.borrow().log_start_offset(), base + 1);
        assert_eq!(read_all(&fresh, base + 1), read_all(&leader, base + 1));
        // An empty chunk (the sender deleted every record the asker lacks): restarted empty at
        // its start, which then reopens the same; one at or before the log's end changes
        // nothing.
        let dir = MemDir::new();
        let (empty, _) = open(&dir);
        let s = block_on(TopicLog::append_seed(&empty, 7, &[])).unwrap();
        assert_eq!((s.restarted_at, s.appended), (Some(7), Ok(7)));
        let s = block_on(TopicLog::append_seed(&empty, 7, &[])).unwrap();
        assert_eq!((s.restarted_at, s.appended), (None, Ok(7)));
        drop(empty);
        let (empty, rep) = open(&dir);
        assert_eq!((rep.log_start_offset, rep.next_offset), (7, 7));
        assert_eq!(empty.borrow().high_watermark(), 7);
    }

    /// How many offsets `batches` (whole batches back to back) cover.
    fn batches_count(batches: &[u8]) -> u64 {
        let mut pos = 0;
        let mut n = 0;
        while pos < batches.len() {
            let Ok(Peek::Batch(h)) = peek_batch(&batches[pos..], 0, batches.len() - pos) else {
                panic!("bad batch")
            };
            n += h.last_offset() + 1 - h.base_offset;
            pos += h.size;
        }
        n
    }

    #[test]
    fn replicated_batches_with_a_gap_or_a_torn_tail_are_refused_whole() {
        let (leader, _) = open(&MemDir::new());
        let chunks = leader_chunks(&leader);
        let (follower, _) = open(&MemDir::new());
        let refused = |bytes: &[u8]| {
            let err = follower.borrow_mut().stage_replicated(bytes).unwrap_err();
            let me = follower.borrow();
            assert_eq!(me.next_offset(), 0, "nothing staged");
            assert!(!me.has_pending());
            assert!(me.active_producers().is_empty());
            assert_eq!(err.code(), 2);
            err.message()
        };
        assert_eq!(
            refused(&chunks[1..].concat()),
            "replicated batch at offset 2, the log ends at 0"
        );
        assert_eq!(
            refused(&[&chunks[0][..], &chunks[1], &chunks[3]].concat()),
            "replicated batch at offset 7, the log ends at 5"
        );
        let all = chunks.concat();
        assert!(refused(&all[..all.len() - 1]).contains("truncated"));
        assert!(refused(&all[..all.len() - chunks[5].len() + 5]).contains("truncated"));
        let mut flipped = all.clone();
        flipped[chunks[0].len() + 70] ^= 1;
        assert!(refused(&flipped).contains("CRC"));
        assert_eq!(follower.borrow_mut().stage_replicated(&all), Ok(11));
    }
}
