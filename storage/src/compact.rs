//! Key compaction of a partition log, as Kafka's log cleaner does it for a `cleanup.policy=compact`
//! topic such as `__consumer_offsets`: every record whose key appears again later in the log is
//! dropped, and a tombstone (a record with a null value) is dropped too once it is older than
//! `delete.retention.ms`, so that a reader of the log always saw the delete first.
//!
//! A pass works on the segments that were closed when it started (never the active one) and is
//! done in slices of bounded reading so the caller can interleave it with appends: a shard's
//! requests are never held up by more than one slice.
//!
//! 1. **Map:** read every segment up to its durable size at the start of the pass and remember,
//!    for each key, the offset of its last record.
//! 2. **Clean:** rewrite each closed segment, oldest first, keeping the records that are still
//!    the last for their key (and tombstones that are not yet expired). Batches keep their
//!    headers (base offset, last offset delta, base timestamp), so offsets never move and the log
//!    reads as Kafka's cleaner would have left it. The cleaned bytes go to `<segment>.cleaned`,
//!    are fsynced, renamed over the segment, and the directory is fsynced; a segment with
//!    nothing left is removed. A crash at any point leaves either the old segment or the new one.
//!
//! Why it is safe: a record is dropped only when a later record with the same key is durable in
//! the log (the map only reads durable bytes), and segments are cleaned oldest first, each made
//! durable before the next, so a tombstone is removed only after every older value of its key.
//! Replaying the cleaned log gives the same last value per key as replaying the whole log.
//!
//! Transactions (TxnOffsetCommit): a transactional batch holds offset commits a producer's
//! transaction made pending, and a control batch holds the marker that ended it (commit or
//! abort). Kafka's cleaner never cleans past the first open transaction and drops aborted
//! transactional records (`LogCleaner`, `CleanedTransactionMetadata`); this pass gets the same
//! replay result per key without an offset bound:
//! - only plain records enter the per-key map; a plain record is kept while it is the last
//!   plain record of its key, and a tombstone whose key also has a transactional record in the
//!   log is never removed (it deletes that record's pending offset on replay);
//! - a transactional record is kept while its transaction has no marker in the mapped log
//!   (still open); dropped once its transaction aborted; once committed, dropped when a later
//!   plain record of its key exists (on replay that record wins anyway: the coordinator keeps
//!   the committed offset written last, `OffsetMetadataManager.replayEndTransactionMarker`);
//! - a marker goes once its producer has no transactional record before it (since its previous
//!   marker), under the same age and snapshot rules as a tombstone: a marker with nothing to
//!   end replays as nothing.
//!
//! Snapshots: a partition that loads from a snapshot at offset S replays only the records after
//! S, and the snapshot may hold a value that a tombstone after S deletes. Such a tombstone must
//! stay however old it is, so a pass is told the snapshot it may be loaded from and removes only
//! tombstones at or below it. (Every later snapshot covers everything the pass looked at.)

use crate::batch::{peek_batch, retain_records, BatchHeader, Peek};
use crate::io::{LogDir, LogFile};
use crate::log::{segment_name, PartitionLog};
use hashbrown::HashMap;
use std::io;

/// Suffix of a segment's cleaned copy before it replaces the segment.
pub const CLEANED_SUFFIX: &str = ".cleaned";

#[derive(Debug, Clone)]
pub struct CompactConfig {
    /// Tombstones are kept this long after their timestamp (`delete.retention.ms`).
    pub delete_retention_ms: i64,
    /// Bytes read per slice; a slice also never cleans more than one segment.
    pub slice_bytes: usize,
}

impl Default for CompactConfig {
    fn default() -> Self {
        Self {
            delete_retention_ms: 86_400_000,
            slice_bytes: 1 << 20,
        }
    }
}

/// What a pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CompactStats {
    pub segments_cleaned: u64,
    pub segments_removed: u64,
    pub records_read: u64,
    pub records_kept: u64,
    pub tombstones_removed: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Distinct keys seen by the map phase.
    pub keys: u64,
    /// The earliest time (ms) at which a tombstone this pass kept becomes removable.
    pub next_tombstone_expiry: Option<i64>,
}

enum Phase {
    Map {
        seg: usize,
        pos: u64,
    },
    Clean {
        seg: usize,
        pos: u64,
        out: Vec<u8>,
        before: u64,
    },
    Done,
}

/// One compaction pass in progress; advance it with [`PartitionLog::compact_slice`].
pub struct Compaction {
    config: CompactConfig,
    now: i64,
    /// Tombstones above this offset are kept: a snapshot at it may hold what they delete.
    tombstone_limit: Option<u64>,
    /// Every segment at the start as (base offset, durable size): what the map reads.
    mapped: Vec<(u64, u64)>,
    /// How many of `mapped` (the oldest) are cleaned: all but the active segment.
    closed: usize,
    latest: HashMap<Box<[u8]>, u64>,
    txn: TxnMap,
    phase: Phase,
    pub stats: CompactStats,
}

/// What the map phase learnt about transactions (see the module documentation).
#[derive(Default)]
struct TxnMap {
    /// Keys of transactional records.
    keys: hashbrown::HashSet<Box<[u8]>>,
    /// Per producer id: its markers in log order as (offset, commit, whether a transactional
    /// record of the producer lies between the previous marker and this one).
    markers: HashMap<i64, Vec<(u64, bool, bool)>>,
    /// Producers with a transactional record after their last marker so far.
    open: hashbrown::HashSet<i64>,
}

impl TxnMap {
    /// The marker that ends the transactional record at `offset` of `producer`, if mapped.
    fn end_of(&self, producer: i64, offset: u64) -> Option<(u64, bool, bool)> {
        let m = self.markers.get(&producer)?;
        let i = m.partition_point(|x| x.0 < offset);
        m.get(i).copied()
    }
}

/// The result a control record's key names: `Some(true)` commit, `Some(false)` abort
/// (`ControlRecordType`: key = version int16, type int16; 0 = ABORT, 1 = COMMIT).
pub fn marker_commit(key: Option<&[u8]>) -> Option<bool> {
    let k = key?;
    if k.len() < 4 {
        return None;
    }
    match i16::from_be_bytes([k[2], k[3]]) {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

impl Compaction {
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }
}

impl<D: LogDir> PartitionLog<D> {
    /// Start a pass over the segments closed now, or `None` when only the active one exists.
    /// `now` (ms) decides which tombstones have expired; `snapshot` is the covered offset of the
    /// snapshot the partition would load from (only tombstones at or below it may go), or
    /// `None` when it loads from the log alone.
    pub fn start_compaction(
        &self,
        config: CompactConfig,
        now: i64,
        snapshot: Option<u64>,
    ) -> Option<Compaction> {
        if self.segments.len() < 2 {
            return None;
        }
        let mapped: Vec<(u64, u64)> = self
            .segments
            .iter()
            .map(|s| (s.base_offset, s.size))
            .collect();
        Some(Compaction {
            config,
            now,
            tombstone_limit: snapshot,
            closed: mapped.len() - 1,
            mapped,
            latest: HashMap::new(),
            txn: TxnMap::default(),
            phase: Phase::Map { seg: 0, pos: 0 },
            stats: CompactStats::default(),
        })
    }

    /// Do one slice of `c`: read at most about `slice_bytes` (more only for a larger batch) and,
    /// at the end of a segment's cleaning, replace it. Returns true once the pass is done. On an
    /// error the pass must be dropped; the log itself is unchanged by a failed slice (a segment
    /// is replaced only by an atomic rename of a complete, synced file).
    pub async fn compact_slice(&mut self, c: &mut Compaction) -> io::Result<bool> {
        match std::mem::replace(&mut c.phase, Phase::Done) {
            Phase::Done => Ok(true),
            Phase::Map { seg, pos } => {
                let Some(&(base, size)) = c.mapped.get(seg) else {
                    c.stats.keys = c.latest.len() as u64;
                    c.phase = Phase::Clean {
                        seg: 0,
                        pos: 0,
                        out: Vec::new(),
                        before: 0,
                    };
                    return Ok(false);
                };
                // A segment a snapshot removed meanwhile has nothing left to map.
                let Some(file) = self.segment_file(base) else {
                    c.phase = Phase::Map {
                        seg: seg + 1,
                        pos: 0,
                    };
                    return Ok(false);
                };
                let latest = &mut c.latest;
                let txn = &mut c.txn;
                let next = read_slice(file, pos, size, &c.config, &self.config, |b, h, p| {
                    let pid = h.producer_id;
                    crate::batch::for_each_record(b, h, p, |offset, _, key, _| {
                        if h.is_control() {
                            if let Some(commit) = marker_commit(key) {
                                let data = txn.open.remove(&pid);
                                txn.markers
                                    .entry(pid)
                                    .or_default()
                                    .push((offset, commit, data));
                            }
                        } else if h.is_transactional() {
                            txn.open.insert(pid);
                            if let Some(k) = key {
                                if !txn.keys.contains(k) {
                                    txn.keys.insert(k.into());
                                }
                            }
                        } else if let Some(k) = key {
                            match latest.get_mut(k) {
                                Some(o) => *o = offset,
                                None => {
                                    latest.insert(k.into(), offset);
                                }
                            }
                        }
                    })
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
                })
                .await?;
                c.phase = if next >= size {
                    Phase::Map {
                        seg: seg + 1,
                        pos: 0,
                    }
                } else {
                    Phase::Map { seg, pos: next }
                };
                Ok(false)
            }
            Phase::Clean {
                seg,
                pos,
                mut out,
                mut before,
            } => {
                if seg >= c.closed {
                    c.latest = HashMap::new();
                    c.txn = TxnMap::default();
                    return Ok(true);
                }
                let (base, size) = c.mapped[seg];
                let Some(file) = self.segment_file(base) else {
                    c.phase = Phase::Clean {
                        seg: seg + 1,
                        pos: 0,
                        out: Vec::new(),
                        before: 0,
                    };
                    return Ok(false);
                };
                let (latest, txn, now, retention, limit) = (
                    &c.latest,
                    &c.txn,
                    c.now,
                    c.config.delete_retention_ms,
                    c.tombstone_limit,
                );
                let stats = &mut c.stats;
                let next = read_slice(file, pos, size, &c.config, &self.config, |b, h, p| {
                    before += h.size as u64;
                    let pid = h.producer_id;
                    let (kept, dropped) = retain_records(
                        b,
                        h,
                        p,
                        |offset, ts, key, value| {
                            if h.is_control() {
                                // A marker with transactional records before it still ends
                                // them; one with nothing to end goes like an old tombstone.
                                let ended_data = txn
                                    .end_of(pid, offset)
                                    .filter(|m| m.0 == offset)
                                    .is_none_or(|m| m.2);
                                return ended_data
                                    || limit.is_some_and(|s| offset > s)
                                    || ts.saturating_add(retention) > now;
                            }
                            let Some(k) = key else { return false };
                            if h.is_transactional() {
                                return match txn.end_of(pid, offset) {
                                    None => true,                 // still open
                                    Some((_, false, _)) => false, // aborted
                                    Some(_) => latest.get(k).is_none_or(|&o| o < offset),
                                };
                            }
                            if latest.get(k) != Some(&offset) {
                                return false;
                            }
                            if value.is_none() && limit.is_some_and(|s| offset > s) {
                                return true; // the snapshot below may hold the value
                            }
                            if value.is_none() && txn.keys.contains(k) {
                                return true; // it still deletes a transactional record
                            }
                            if value.is_none() {
                                let expiry = ts.saturating_add(retention);
                                if expiry <= now {
                                    stats.tombstones_removed += 1;
                                    return false;
                                }
                                stats.next_tombstone_expiry = Some(
                                    stats
                                        .next_tombstone_expiry
                                        .map_or(expiry, |e| e.min(expiry)),
                                );
                            }
                            true
                        },
                        &mut out,
                    )
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                    stats.records_read += (kept + dropped) as u64;
                    stats.records_kept += kept as u64;
                    Ok(())
                })
                .await?;
                if next < size {
                    c.phase = Phase::Clean {
                        seg,
                        pos: next,
                        out,
                        before,
                    };
                    return Ok(false);
                }
                c.stats.bytes_before += before;
                c.stats.bytes_after += out.len() as u64;
                self.replace_segment(base, before, out, &mut c.stats)
                    .await?;
                c.phase = Phase::Clean {
                    seg: seg + 1,
                    pos: 0,
                    out: Vec::new(),
                    before: 0,
                };
                Ok(false)
            }
        }
    }

    fn segment_file(&self, base: u64) -> Option<&D::File> {
        self.segments
            .iter()
            .find(|s| s.base_offset == base)
            .map(|s| &s.file)
    }

    /// Put the cleaned bytes of segment `base` in its place (or remove it when nothing is left).
    async fn replace_segment(
        &mut self,
        base: u64,
        before: u64,
        cleaned: Vec<u8>,
        stats: &mut CompactStats,
    ) -> io::Result<()> {
        let name = segment_name(base);
        if cleaned.len() as u64 == before {
            return Ok(()); // nothing dropped
        }
        let Some(idx) = self.segments.iter().position(|s| s.base_offset == base) else {
            return Ok(());
        };
        // Appends during the pass go to the active segment only; a closed segment's size is
        // what the pass read.
        debug_assert!(idx + 1 < self.segments.len(), "never the active segment");
        // The segment list follows the directory as soon as a file is gone or replaced, even if
        // the directory sync after it fails.
        if cleaned.is_empty() {
            self.dir.remove(&name).await?;
            self.segments.remove(idx);
            stats.segments_removed += 1;
            return self.dir.sync_dir().await;
        }
        let tmp = format!("{name}{CLEANED_SUFFIX}");
        let len = cleaned.len() as u64;
        {
            let f = self.dir.open(&tmp).await?;
            f.truncate(0).await?;
            f.write_at(0, cleaned).await?;
            f.sync().await?;
        }
        self.dir.rename(&tmp, &name).await?;
        let file = self.dir.open(&name).await?;
        let seg = &mut self.segments[idx];
        seg.file = file;
        seg.size = len;
        stats.segments_cleaned += 1;
        self.dir.sync_dir().await
    }
}

/// Read whole batches of `file` from `pos` (bounded by `size`) up to about one slice, handing
/// each to `on_batch(bytes, header, position)`. Returns the position after the last batch
/// handled. Closed segments were validated when the log was opened, so anything but whole valid
/// batches here is an error that stops the pass.
async fn read_slice<F: LogFile>(
    file: &F,
    pos: u64,
    size: u64,
    config: &CompactConfig,
    log: &crate::log::LogConfig,
    mut on_batch: impl FnMut(&[u8], &BatchHeader, u64) -> io::Result<()>,
) -> io::Result<u64> {
    if pos >= size {
        return Ok(size);
    }
    let mut want = config.slice_bytes.max(1).min((size - pos) as usize);
    loop {
        let buf = file.read_at(pos, want).await?;
        let mut off = 0usize;
        while off < buf.len() {
            match peek_batch(&buf[off..], pos + off as u64, log.max_batch_bytes) {
                Ok(Peek::Batch(h)) => {
                    on_batch(&buf[off..off + h.size], &h, pos + off as u64)?;
                    off += h.size;
                }
                Ok(Peek::Incomplete { needed }) => {
                    if off == 0 {
                        // One batch larger than a slice: read it whole.
                        if pos + needed as u64 > size || needed <= buf.len() {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("torn batch at {pos} in a closed segment"),
                            ));
                        }
                        want = needed;
                        break;
                    }
                    return Ok(pos + off as u64);
                }
                Err(e) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string()));
                }
            }
        }
        if off > 0 || buf.is_empty() {
            if buf.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("segment shorter than {size} bytes"),
                ));
            }
            return Ok(pos + off as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemDir;
    use crate::log::LogConfig;
    use futures_lite::future::block_on;
    use std::collections::BTreeMap;

    type Seen = Vec<(u64, i64, Vec<u8>, Option<Vec<u8>>)>;

    fn cfg() -> LogConfig {
        LogConfig {
            segment_bytes: 400,
            max_batch_bytes: 1 << 20,
            read_chunk_bytes: 131,
        }
    }

    fn ccfg(retention: i64, slice: usize) -> CompactConfig {
        CompactConfig {
            delete_retention_ms: retention,
            slice_bytes: slice,
        }
    }

    fn open(dir: &MemDir) -> (PartitionLog<MemDir>, Seen) {
        let mut seen = Vec::new();
        let (log, rep) = block_on(PartitionLog::open(dir.clone(), cfg(), |o, t, k, v| {
            seen.push((o, t, k.expect("keyed").to_vec(), v.map(<[u8]>::to_vec)))
        }))
        .unwrap();
        assert_eq!(rep.truncated, None, "a compacted log recovers whole");
        (log, seen)
    }

    /// Last value per key (tombstones delete), the state a replay rebuilds.
    fn last_values(seen: &Seen) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut m = BTreeMap::new();
        for (_, _, k, v) in seen {
            match v {
                Some(v) => m.insert(k.clone(), v.clone()),
                None => m.remove(k),
            };
        }
        m
    }

    fn run(log: &mut PartitionLog<MemDir>, mut c: Compaction) -> io::Result<CompactStats> {
        let mut slices = 0;
        while !block_on(log.compact_slice(&mut c))? {
            slices += 1;
            assert!(slices < 100_000, "a pass ends");
        }
        Ok(c.stats)
    }

    fn put(log: &mut PartitionLog<MemDir>, key: &str, value: Option<&str>, ts: i64) {
        block_on(log.append(&[(Some(key.as_bytes()), value.map(str::as_bytes))], ts)).unwrap();
    }

    fn put_as(log: &mut PartitionLog<MemDir>, attrs: i16, pid: i64, key: &[u8], value: &[u8]) {
        let producer = crate::batch::BatchProducer::coordinator(attrs, pid, 0);
        let batch = log
            .prepare_as(producer, &[(Some(key), Some(value))], 0)
            .unwrap();
        block_on(log.append_prepared(batch)).unwrap();
        block_on(log.sync()).unwrap();
    }

    const TXN: i16 = crate::batch::ATTR_TRANSACTIONAL;
    const CTRL: i16 = crate::batch::ATTR_TRANSACTIONAL | crate::batch::ATTR_CONTROL;
    const COMMIT: &[u8] = &[0, 0, 0, 1];
    const ABORT: &[u8] = &[0, 0, 0, 0];

    #[test]
    fn transactions_keep_what_their_replay_needs() {
        let dir = MemDir::new();
        let (mut log, _) = open(&dir);
        put(&mut log, "k-open", Some("committed"), 0); // 0: stays under an open txn
        put_as(&mut log, TXN, 1, b"k-open", b"pending"); // 1: open: kept
        put(&mut log, "k-abort", Some("committed"), 0); // 2: stays (the txn aborts)
        put_as(&mut log, TXN, 2, b"k-abort", b"aborted"); // 3: dropped
        put_as(&mut log, CTRL, 2, ABORT, b"\0\0\0\0\0\0"); // 4: kept (ends 3)
        put_as(&mut log, TXN, 3, b"k-won", b"txn"); // 5: dropped (a later plain commit)
        put_as(&mut log, CTRL, 3, COMMIT, b"\0\0\0\0\0\0"); // 6: kept (ends 5)
        put(&mut log, "k-won", Some("plain"), 0); // 7: kept
        put_as(&mut log, CTRL, 9, COMMIT, b"\0\0\0\0\0\0"); // 8: nothing to end: dropped
        for i in 0..40 {
            put(&mut log, &format!("filler-{i}"), Some("x"), 0);
        }
        let c = log.start_compaction(ccfg(0, 200), 10_000, None).unwrap();
        run(&mut log, c).unwrap();
        drop(log);
        let (_, seen) = open(&dir);
        let offsets: Vec<u64> = seen.iter().map(|r| r.0).filter(|&o| o < 9).collect();
        assert_eq!(offsets, [0, 1, 2, 4, 6, 7]);
        // A second pass: the markers whose records are gone go too.
        let (mut log, _) = open(&dir);
        let c = log.start_compaction(ccfg(0, 200), 10_000, None).unwrap();
        run(&mut log, c).unwrap();
        drop(log);
        let (_, seen) = open(&dir);
        let offsets: Vec<u64> = seen.iter().map(|r| r.0).filter(|&o| o < 9).collect();
        assert_eq!(offsets, [0, 1, 2, 7]);
    }

    #[test]
    fn keeps_the_last_value_per_key_at_the_same_offsets() {
        let dir = MemDir::new();
        let (mut log, _) = open(&dir);
        for round in 0..30 {
            for k in 0..5 {
                put(
                    &mut log,
                    &format!("key-{k}"),
                    Some(&format!("v{round}")),
                    1000,
                );
            }
        }
        put(&mut log, "once", Some("x"), 1000);
        let next = log.next_offset();
        let segments_before = log.segment_count();
        assert!(segments_before > 5);
        let (_, full) = {
            drop(log);
            open(&dir)
        };
        let (mut log, _) = open(&dir);
        let c = log.start_compaction(ccfg(0, 200), 2000, None).unwrap();
        let stats = run(&mut log, c).unwrap();
        assert_eq!(stats.keys, 6);
        assert!(stats.segments_removed > 0 && stats.bytes_after < stats.bytes_before);
        assert_eq!(log.next_offset(), next);
        drop(log);
        let (log, compacted) = open(&dir);
        assert_eq!(log.next_offset(), next, "offsets do not move");
        assert_eq!(last_values(&compacted), last_values(&full));
        assert!(compacted.len() < full.len() / 4);
        // Every surviving record is one the full log had at that offset.
        for r in &compacted {
            assert!(full.contains(r), "{r:?} kept its offset and timestamp");
        }
        // In closed segments each key appears at most once.
        let active_base = log.segments().last().unwrap().0;
        let mut keys: Vec<_> = compacted
            .iter()
            .filter(|r| r.0 < active_base)
            .map(|r| r.2.clone())
            .collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n);
    }

    #[test]
    fn tombstones_go_only_after_delete_retention() {
        let dir = MemDir::new();
        let (mut log, _) = open(&dir);
        put(&mut log, "gone-old", Some("a"), 1_000);
        put(&mut log, "gone-old", None, 1_000);
        put(&mut log, "gone-new", Some("b"), 1_000);
        put(&mut log, "gone-new", None, 50_000);
        for i in 0..40 {
            put(&mut log, &format!("fill-{}", i % 3), Some("f"), 60_000);
        }
        let c = log
            .start_compaction(ccfg(10_000, 1 << 20), 55_000, None)
            .unwrap();
        let stats = run(&mut log, c).unwrap();
        assert_eq!(stats.tombstones_removed, 1);
        assert_eq!(stats.next_tombstone_expiry, Some(60_000));
        drop(log);
        let (mut log, seen) = open(&dir);
        assert!(
            !seen.iter().any(|r| r.2 == b"gone-old"),
            "value and tombstone both gone"
        );
        let new: Vec<_> = seen.iter().filter(|r| r.2 == b"gone-new").collect();
        assert_eq!(new.len(), 1, "only the tombstone is left");
        assert_eq!(new[0].3, None);
        // Later, the kept tombstone expires too.
        let c = log
            .start_compaction(ccfg(10_000, 1 << 20), 60_000, None)
            .unwrap();
        assert_eq!(run(&mut log, c).unwrap().tombstones_removed, 1);
        drop(log);
        let (_, seen) = open(&dir);
        assert!(!seen.iter().any(|r| r.2 == b"gone-new"));
    }

    #[test]
    fn tombstones_above_the_snapshot_stay_whatever_their_age() {
        // A snapshot at offset 1 holds "k" = "a"; the tombstone at offset 2 is what deletes it
        // for a load from that snapshot, so it must outlive delete.retention.ms.
        let dir = MemDir::new();
        let (mut log, _) = open(&dir);
        put(&mut log, "k", Some("a"), 0);
        put(&mut log, "j", None, 0);
        put(&mut log, "k", None, 0);
        for i in 0..40 {
            put(&mut log, &format!("fill-{}", i % 3), Some("f"), 0);
        }
        let c = log
            .start_compaction(ccfg(0, 1 << 20), 1_000, Some(1))
            .unwrap();
        let stats = run(&mut log, c).unwrap();
        assert_eq!(
            stats.tombstones_removed, 1,
            "only the one at or below the snapshot"
        );
        drop(log);
        let (mut log, seen) = open(&dir);
        let left: Vec<_> = seen.iter().filter(|r| r.3.is_none()).map(|r| r.0).collect();
        assert_eq!(left, vec![2]);
        // Once a snapshot covers it, it goes.
        let c = log
            .start_compaction(ccfg(0, 1 << 20), 1_000, Some(2))
            .unwrap();
        assert_eq!(run(&mut log, c).unwrap().tombstones_removed, 1);
    }

    #[test]
    fn the_active_segment_is_never_touched_and_appends_may_run_between_slices() {
        let dir = MemDir::new();
        let (mut log, _) = open(&dir);
        let mut model = BTreeMap::new();
        let mut i = 0u64;
        for _ in 0..60 {
            let k = format!("k{}", i % 7);
            let v = format!("v{i}");
            put(&mut log, &k, Some(&v), 0);
            model.insert(k.into_bytes(), v.into_bytes());
            i += 1;
        }
        let mut c = log.start_compaction(ccfg(0, 64), 0, None).unwrap();
        while !block_on(log.compact_slice(&mut c)).unwrap() {
            // An append between every slice, rolling segments as it goes.
            let k = format!("k{}", i % 7);
            let v = format!("v{i}");
            put(&mut log, &k, Some(&v), 0);
            model.insert(k.into_bytes(), v.into_bytes());
            i += 1;
        }
        let next = log.next_offset();
        drop(log);
        let (log, seen) = open(&dir);
        assert_eq!(log.next_offset(), next);
        assert_eq!(last_values(&seen), model);
    }

    #[test]
    fn a_crash_at_any_point_of_a_pass_loses_nothing() {
        // The state replay rebuilds must be the same whatever step of the pass fails or where
        // power is lost, and the log must always recover whole.
        let build = |dir: &MemDir| {
            let (mut log, _) = open(dir);
            for i in 0..50u64 {
                // Keys written once (kept by every pass) among keys rewritten often.
                let k = if i % 5 == 0 {
                    format!("u{i}")
                } else {
                    format!("k{}", i % 4)
                };
                let v = if i % 9 == 8 {
                    None
                } else {
                    Some(format!("v{i}"))
                };
                put(&mut log, &k, v.as_deref(), (i * 100) as i64);
            }
            log
        };
        let expect = {
            let dir = MemDir::new();
            drop(build(&dir));
            last_values(&open(&dir).1)
        };
        let mut failed_some = false;
        for fail_at in 0..200u64 {
            for torn in [false, true] {
                let dir = MemDir::new();
                let mut log = build(&dir);
                let c = log
                    .start_compaction(ccfg(6_000, 150), 10_000, None)
                    .unwrap();
                dir.fail_after(fail_at);
                let r = run(&mut log, c);
                failed_some |= r.is_err();
                drop(log);
                dir.crash(|_, n| if torn { n / 2 } else { 0 });
                let (_, seen) = open(&dir);
                assert_eq!(last_values(&seen), expect, "fail_at {fail_at} torn {torn}");
                // A second, undisturbed pass after recovery still agrees.
                let (mut log, _) = open(&dir);
                if let Some(c) = log.start_compaction(ccfg(6_000, 150), 10_000, None) {
                    run(&mut log, c).unwrap();
                }
                drop(log);
                assert_eq!(last_values(&open(&dir).1), expect);
            }
        }
        assert!(failed_some);
        // The pass did rewrite segments (not only remove them), so renames were exercised.
        let dir = MemDir::new();
        let mut log = build(&dir);
        let c = log
            .start_compaction(ccfg(6_000, 150), 10_000, None)
            .unwrap();
        let stats = run(&mut log, c).unwrap();
        assert!(stats.segments_cleaned > 0, "{stats:?}");
    }

    #[test]
    fn leftover_cleaned_files_are_removed_on_open() {
        let dir = MemDir::new();
        let (mut log, _) = open(&dir);
        put(&mut log, "a", Some("1"), 0);
        drop(log);
        let f = block_on(dir.open("00000000000000000000.log.cleaned")).unwrap();
        block_on(f.write_at(0, b"partial".to_vec())).unwrap();
        let (_, seen) = open(&dir);
        assert_eq!(seen.len(), 1);
        assert!(!block_on(dir.list())
            .unwrap()
            .iter()
            .any(|n| n.ends_with(CLEANED_SUFFIX)));
    }
}
