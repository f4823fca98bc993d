//! A partition's append-only log: segment files of record batches, named by their first offset
//! (`<20-digit base offset>.log`, Kafka's naming), written with one write and one fdatasync per
//! batch, recovered by scanning batches and truncating at the first torn or corrupt one.
//!
//! Group commit lives in the caller: while one `append` is in flight, new records queue up and
//! become the next batch, so one fdatasync serves every request that arrived meanwhile.

use crate::batch::{for_each_record_checked, peek_batch, BatchHeader, Peek};
use crate::io::{LogDir, LogFile};
use std::io;

#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Roll to a new segment once the active one reaches this size (`offsets.topic.segment.bytes`).
    pub segment_bytes: u64,
    /// Largest batch accepted on read; a length above it is corruption.
    pub max_batch_bytes: usize,
    /// Recovery reads segments in chunks of this size (large sequential reads).
    pub read_chunk_bytes: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 100 * 1024 * 1024,
            max_batch_bytes: 64 * 1024 * 1024,
            read_chunk_bytes: 8 * 1024 * 1024,
        }
    }
}

/// A record to append: key and value (a `None` value is a tombstone).
pub type RecordRef<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Borrow owned (key, value) pairs, as the coordinator's record encoder produces them, as
/// records to encode.
pub fn pair_refs(records: &[(Vec<u8>, Option<Vec<u8>>)]) -> Vec<RecordRef<'_>> {
    records
        .iter()
        .map(|(k, v)| (Some(k.as_slice()), v.as_deref()))
        .collect()
}

pub fn segment_name(base_offset: u64) -> String {
    format!("{base_offset:020}.log")
}

/// The base offset a segment file name (`<20-digit base offset>.log`) stands for.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".log")?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

pub(crate) struct Segment<F> {
    pub(crate) base_offset: u64,
    pub(crate) file: F,
    /// Bytes of whole batches written (durable once synced; see [`PartitionLog::append_unsynced`]).
    pub(crate) size: u64,
}

/// What recovery found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments: usize,
    pub batches: u64,
    pub records: u64,
    pub bytes: u64,
    /// Where the log was cut: (segment file, byte position, reason).
    pub truncated: Option<(String, u64, String)>,
    /// The snapshot loaded before the log, if the caller used one: (covered offset, records,
    /// bytes). Filled in by the caller; the log itself does not read snapshots.
    pub snapshot: Option<(u64, u64, u64)>,
}

pub struct PartitionLog<D: LogDir> {
    pub(crate) dir: D,
    pub(crate) config: LogConfig,
    pub(crate) segments: Vec<Segment<D::File>>,
    next_offset: u64,
    /// Segments created by appends since open (compaction starts a pass after a roll).
    rolls: u64,
    /// The last segment holds bytes written since its last sync.
    unsynced: bool,
}

impl<D: LogDir> PartitionLog<D> {
    /// Open (or create) the log in `dir`, calling `on_record(offset, timestamp, key, value)` for
    /// every record of every valid batch in order. A torn or corrupt batch ends the log: its
    /// segment is truncated there and later segments are removed, so what remains is exactly a
    /// prefix of what was written. A valid batch is whole, CRC-valid, has records that all parse,
    /// and offsets that neither go back nor fall below its segment's base offset.
    pub async fn open(
        dir: D,
        config: LogConfig,
        on_record: impl FnMut(u64, i64, Option<&[u8]>, Option<&[u8]>),
    ) -> io::Result<(Self, RecoveryReport)> {
        Self::open_from(dir, config, 0, on_record).await
    }

    /// Like `open`, for a log whose records before `start_offset` are covered by a snapshot:
    /// those are skipped (not passed to `on_record`), and the next offset is at least
    /// `start_offset` even when every segment was removed.
    pub async fn open_from(
        dir: D,
        config: LogConfig,
        start_offset: u64,
        mut on_record: impl FnMut(u64, i64, Option<&[u8]>, Option<&[u8]>),
    ) -> io::Result<(Self, RecoveryReport)> {
        Self::open_from_batches(dir, config, start_offset, |_, o, t, k, v| {
            on_record(o, t, k, v)
        })
        .await
    }

    /// [`Self::open_from`], also passing each record's batch header: a coordinator tells a
    /// transactional batch (pending offsets of a producer) and a control batch (a transaction
    /// marker) from a plain one by its attributes and producer id.
    pub async fn open_from_batches(
        dir: D,
        config: LogConfig,
        start_offset: u64,
        mut on_record: impl FnMut(&BatchHeader, u64, i64, Option<&[u8]>, Option<&[u8]>),
    ) -> io::Result<(Self, RecoveryReport)> {
        let mut bases: Vec<u64> = dir
            .list()
            .await?
            .iter()
            .filter_map(|n| parse_segment_name(n))
            .collect();
        bases.sort_unstable();
        // A compaction interrupted before its rename leaves a `.cleaned` file: the segment it
        // was made from is still whole, so the leftover is dropped.
        for name in dir.list().await? {
            if name.ends_with(crate::compact::CLEANED_SUFFIX) {
                dir.remove(&name).await?;
            }
        }
        let mut report = RecoveryReport::default();
        let mut segments = Vec::new();
        let mut spans = Vec::new();
        let mut next_offset = bases.first().copied().unwrap_or(0);
        let mut cut = false;
        for base in bases {
            let name = segment_name(base);
            if cut {
                // Everything after a cut is unreachable: offsets must stay contiguous.
                dir.remove(&name).await?;
                continue;
            }
            // A segment holds offsets from its base on: a batch below it (the base offset is
            // not covered by the CRC) is corrupt, and keeping it would let the next roll reuse
            // this segment's name and truncate it.
            next_offset = next_offset.max(base);
            let file = dir.open(&name).await?;
            let len = file.len().await?;
            let (pos, stop) = scan_batches(
                &file,
                len,
                config.read_chunk_bytes,
                config.max_batch_bytes,
                |pos, h, batch| {
                    if h.base_offset < next_offset {
                        return Err(format!(
                            "batch base offset {} goes back (expected >= {next_offset})",
                            h.base_offset
                        ));
                    }
                    // Every record is validated before any is replayed: a batch that fails
                    // half-way is cut from the log, so none of it may reach the caller.
                    for_each_record_checked(batch, h, pos, &mut spans, |o, t, k, v| {
                        if o >= start_offset {
                            on_record(h, o, t, k, v)
                        }
                    })
                    .map_err(|e| e.to_string())?;
                    report.batches += 1;
                    report.records += h.records_count as u64;
                    report.bytes += h.size as u64;
                    next_offset = h.last_offset() + 1;
                    Ok(())
                },
            )
            .await?;
            if let Some(reason) = stop {
                file.truncate(pos).await?;
                file.sync().await?;
                report.truncated = Some((name.clone(), pos, reason));
                cut = true;
            }
            segments.push(Segment {
                base_offset: base,
                file,
                size: pos,
            });
        }
        if cut {
            dir.sync_dir().await?;
        }
        report.segments = segments.len();
        let next_offset = next_offset.max(start_offset);
        Ok((
            Self {
                dir,
                config,
                segments,
                next_offset,
                rolls: 0,
                // What the last segment holds may not be durable yet (a reload after a failed
                // write reopens a log whose journaled tail was never synced): the first roll
                // syncs it before creating the next segment.
                unsynced: true,
            },
            report,
        ))
    }

    /// The offset the next record will get.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// How many segments appends have rolled to since the log was opened.
    pub fn rolls(&self) -> u64 {
        self.rolls
    }

    /// (base offset, bytes) of each segment, oldest first.
    pub fn segments(&self) -> Vec<(u64, u64)> {
        self.segments
            .iter()
            .map(|s| (s.base_offset, s.size))
            .collect()
    }

    /// [`PartitionLog::append`] for owned key and value bytes (a `None` value is a tombstone),
    /// as the coordinator's record encoder produces them.
    pub async fn append_pairs(
        &mut self,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
        timestamp: i64,
    ) -> io::Result<(u64, u64)> {
        let refs = pair_refs(records);
        self.append(&refs, timestamp).await
    }

    /// [`PartitionLog::append_pairs`] with the batch's producer fields (for
    /// [`crate::batch::BatchProducer::NO_SEQUENCE`], the transaction log's batches).
    pub async fn append_pairs_as(
        &mut self,
        producer: crate::batch::BatchProducer,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
        timestamp: i64,
    ) -> io::Result<(u64, u64)> {
        if records.is_empty() {
            return Ok((self.next_offset, self.next_offset));
        }
        let batch = self.prepare_pairs_as(producer, records, timestamp)?;
        let (first, last) = self.append_prepared(batch).await?;
        self.sync().await?;
        Ok((first, last))
    }

    /// [`PartitionLog::prepare`] for owned key and value bytes.
    pub fn prepare_pairs(
        &self,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
        timestamp: i64,
    ) -> io::Result<Vec<u8>> {
        self.prepare(&pair_refs(records), timestamp)
    }

    /// [`PartitionLog::prepare_pairs`] for a batch written on behalf of a producer (a
    /// transactional batch or a transaction marker, see [`crate::batch::encode_batch_as`]).
    pub fn prepare_pairs_as(
        &self,
        producer: crate::batch::BatchProducer,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
        timestamp: i64,
    ) -> io::Result<Vec<u8>> {
        self.prepare_as(producer, &pair_refs(records), timestamp)
    }

    /// [`PartitionLog::append_unsynced`] for owned key and value bytes.
    pub async fn append_pairs_unsynced(
        &mut self,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
        timestamp: i64,
    ) -> io::Result<(u64, u64, Vec<u8>)> {
        let refs = pair_refs(records);
        self.append_unsynced(&refs, timestamp).await
    }

    /// Append `records` as one batch, durably: one write, one fdatasync. Returns the first and
    /// last offsets. On error the log must be reopened (what reached the disk is unknown); the
    /// caller fails the requests waiting on this batch.
    pub async fn append(
        &mut self,
        records: &[(Option<&[u8]>, Option<&[u8]>)],
        timestamp: i64,
    ) -> io::Result<(u64, u64)> {
        if records.is_empty() {
            return Ok((self.next_offset, self.next_offset));
        }
        let (first, last, _) = self.append_unsynced(records, timestamp).await?;
        self.sync().await?;
        Ok((first, last))
    }

    /// Append `records` as one batch with one write and no sync: the caller makes the batch
    /// durable elsewhere (the shard's journal, [`crate::journal`]) before acknowledging it.
    /// Returns the first and last offsets and the batch's bytes as written. A segment is synced
    /// before the next one is created, so only the last segment can ever lack unsynced bytes.
    /// On error the log must be reopened, as for [`Self::append`].
    pub async fn append_unsynced(
        &mut self,
        records: &[RecordRef<'_>],
        timestamp: i64,
    ) -> io::Result<(u64, u64, Vec<u8>)> {
        let batch = self.prepare(records, timestamp)?;
        let (first, last) = self.append_prepared(batch.clone()).await?;
        Ok((first, last, batch))
    }

    /// Encode `records` as the next batch (at [`Self::next_offset`]) without writing it, so the
    /// caller can hand the bytes to the journal while [`Self::append_prepared`] writes them.
    pub fn prepare(&self, records: &[RecordRef<'_>], timestamp: i64) -> io::Result<Vec<u8>> {
        self.prepare_as(crate::batch::BatchProducer::NONE, records, timestamp)
    }

    /// [`Self::prepare`] with the batch's producer fields and attributes.
    pub fn prepare_as(
        &self,
        producer: crate::batch::BatchProducer,
        records: &[RecordRef<'_>],
        timestamp: i64,
    ) -> io::Result<Vec<u8>> {
        assert!(!records.is_empty(), "a batch holds at least one record");
        // Offsets are i64 on disk: a batch past i64::MAX would be written and then lost as
        // corrupt by the next recovery. (Only a corrupt log gets this far.)
        let last = self.next_offset.checked_add(records.len() as u64 - 1);
        if last.is_none_or(|l| l > i64::MAX as u64) {
            return Err(io::Error::other(format!(
                "offsets exhausted: {} records at offset {}",
                records.len(),
                self.next_offset
            )));
        }
        let mut batch = Vec::with_capacity(64 + records.len() * 64);
        crate::batch::encode_batch_as(self.next_offset, timestamp, producer, records, &mut batch);
        Ok(batch)
    }

    /// Write a batch [`Self::prepare`] encoded (nothing appended in between), unsynced, as
    /// [`Self::append_unsynced`] does. Returns its first and last offsets.
    pub async fn append_prepared(&mut self, batch: Vec<u8>) -> io::Result<(u64, u64)> {
        let header = match crate::batch::peek_batch(&batch, 0, usize::MAX) {
            Ok(crate::batch::Peek::Batch(h)) => h,
            other => panic!("append_prepared takes a batch prepare() encoded: {other:?}"),
        };
        assert_eq!(
            header.base_offset, self.next_offset,
            "a prepared batch is appended before any other"
        );
        let roll = match self.segments.last() {
            None => true,
            Some(s) => s.size > 0 && s.size + batch.len() as u64 > self.config.segment_bytes,
        };
        if roll {
            // The closing segment becomes durable before the next one exists: recovery from
            // the journal relies on every segment but the last being whole on disk.
            self.sync().await?;
            let file = self.dir.open(&segment_name(self.next_offset)).await?;
            // A leftover file with this name (from a cut) must not keep stale bytes.
            file.truncate(0).await?;
            self.dir.sync_dir().await?;
            self.segments.push(Segment {
                base_offset: self.next_offset,
                file,
                size: 0,
            });
            self.rolls += 1;
        }
        let seg = self.segments.last_mut().expect("an active segment");
        let len = batch.len() as u64;
        seg.file.write_at(seg.size, batch).await?;
        self.unsynced = true;
        seg.size += len;
        let first = self.next_offset;
        self.next_offset = header.last_offset() + 1;
        Ok((first, self.next_offset - 1))
    }

    /// Make every batch appended so far durable (fdatasync of the last segment, the only one
    /// that can hold unsynced bytes).
    pub async fn sync(&mut self) -> io::Result<()> {
        if !self.unsynced {
            return Ok(());
        }
        if let Some(seg) = self.segments.last() {
            seg.file.sync().await?;
        }
        self.unsynced = false;
        Ok(())
    }

    /// Cut the log back so that `offset` is the next offset: the batch starting at `offset` and
    /// everything after it go, durably (the cut segment is synced, later segments removed and
    /// the directory synced) before this returns. A replica does this when its leader's log
    /// conflicts with its own suffix (Raft §5.3, Kafka's follower truncation to the leader's
    /// epoch end offset). `offset` must be the base offset of a batch or the log's end; a cut
    /// inside a batch is refused (`InvalidInput`), as is one below the log's first segment.
    pub async fn truncate_from(&mut self, offset: u64) -> io::Result<()> {
        let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
        if offset == self.next_offset {
            return Ok(());
        }
        if offset > self.next_offset {
            return Err(invalid(format!(
                "cut at {offset} is past the log's end {}",
                self.next_offset
            )));
        }
        let Some(idx) = self.segments.iter().rposition(|s| s.base_offset <= offset) else {
            return Err(invalid(format!(
                "cut at {offset} is below the log's first segment"
            )));
        };
        // Find the byte position of the batch that starts at `offset` in its segment.
        let seg = &self.segments[idx];
        let mut at = None;
        let mut inside = false;
        let (_, stop) = scan_batches(
            &seg.file,
            seg.size,
            self.config.read_chunk_bytes,
            self.config.max_batch_bytes,
            |pos, h, _| {
                if h.base_offset == offset {
                    at = Some(pos);
                    return Err("found".into());
                }
                if h.base_offset < offset && h.last_offset() >= offset {
                    inside = true;
                    return Err("inside".into());
                }
                Ok(())
            },
        )
        .await?;
        let pos = match (at, inside) {
            (Some(pos), _) => pos,
            (None, true) => return Err(invalid(format!("cut at {offset} falls inside a batch"))),
            // A segment that starts at `offset` with no batch yet (just rolled): cut it whole.
            (None, false) if seg.base_offset == offset && seg.size == 0 => 0,
            (None, false) => {
                return Err(invalid(format!(
                    "no batch starts at {offset} ({})",
                    stop.unwrap_or_else(|| "end of segment".into())
                )))
            }
        };
        // Later segments first: a crash half-way leaves a log that is still a prefix.
        let mut removed = false;
        while self.segments.len() > idx + 1 {
            let s = self.segments.pop().expect("a later segment");
            self.dir.remove(&segment_name(s.base_offset)).await?;
            removed = true;
        }
        if removed {
            self.dir.sync_dir().await?;
        }
        let seg = &mut self.segments[idx];
        seg.file.truncate(pos).await?;
        seg.file.sync().await?;
        seg.size = pos;
        self.next_offset = offset;
        self.unsynced = false;
        Ok(())
    }

    /// The file name of the last segment (the one appends go to), if any.
    pub fn active_segment(&self) -> Option<String> {
        self.segments.last().map(|s| segment_name(s.base_offset))
    }

    /// Remove whole segments whose records all come before `offset` (once a snapshot covers
    /// them). The active segment is never removed.
    pub async fn remove_segments_before(&mut self, offset: u64) -> io::Result<usize> {
        let mut removed = 0;
        while self.segments.len() > 1 && self.segments[1].base_offset <= offset {
            let s = self.segments.remove(0);
            self.dir.remove(&segment_name(s.base_offset)).await?;
            removed += 1;
        }
        if removed > 0 {
            self.dir.sync_dir().await?;
        }
        Ok(removed)
    }
}

/// Scan the batches of one segment file (`len` bytes) from its start in large sequential reads
/// of `chunk` bytes, calling `on_batch(position, header, bytes)` for every whole, CRC-valid
/// batch. Stops at the first torn or corrupt batch, or when `on_batch` refuses one (`Err`
/// with the reason). Returns the length of the valid prefix and why the scan stopped early.
///
/// Batches are handed out from the read buffer itself ([`LogFile::read_buf`]: glommio's, for
/// files), never copied: a batch cut by the end of a chunk is read again from its start with
/// the next chunk, and a batch larger than `chunk` is read whole. (Copying every chunk into a
/// buffer of our own, and the read into a `Vec` before that, took a fifth of a load's CPU.)
pub async fn scan_batches<F: LogFile>(
    file: &F,
    len: u64,
    chunk: usize,
    max_batch_bytes: usize,
    mut on_batch: impl FnMut(u64, &BatchHeader, &[u8]) -> Result<(), String>,
) -> io::Result<(u64, Option<String>)> {
    let mut pos: u64 = 0;
    let mut want = chunk.max(1);
    // A read that ended short of the batch at its start; a second one in a row is an error.
    let mut short = false;
    while pos < len {
        let ask = want.min((len - pos) as usize);
        want = chunk.max(1);
        let data = file.read_buf(pos, ask).await?;
        if data.is_empty() {
            return Ok((pos, Some("short read".into())));
        }
        let mut off = 0usize;
        loop {
            match peek_batch(&data[off..], pos, max_batch_bytes) {
                Ok(Peek::Batch(h)) => {
                    if let Err(reason) = on_batch(pos, &h, &data[off..off + h.size]) {
                        return Ok((pos, Some(reason)));
                    }
                    off += h.size;
                    pos += h.size as u64;
                    if off == data.len() {
                        break;
                    }
                }
                Ok(Peek::Incomplete { needed }) => {
                    if pos + needed as u64 > len {
                        let reason = format!("torn batch: {} of {needed} bytes present", len - pos);
                        return Ok((pos, Some(reason)));
                    }
                    if off == 0 {
                        // Not even one batch in this read: ask for all of it next time.
                        if data.len() < ask {
                            if short {
                                return Ok((pos, Some("short read".into())));
                            }
                            short = true;
                        }
                        want = needed.max(chunk);
                    }
                    break; // read on from `pos`
                }
                Err(e) => return Ok((pos, Some(e.to_string()))),
            }
        }
        if off > 0 {
            short = false;
        }
    }
    Ok((pos, None))
}

/// Synchronous scan of one segment file for tools (`ringleader dump-log`): calls `on_batch` for
/// each valid batch with its byte position, and returns the first problem with its byte position.
pub fn scan_segment_file(
    path: &std::path::Path,
    max_batch_bytes: usize,
    mut on_batch: impl FnMut(u64, &crate::batch::BatchHeader, &[u8]),
) -> io::Result<Option<(u64, String)>> {
    let data = std::fs::read(path)?;
    let mut pos = 0usize;
    while pos < data.len() {
        match peek_batch(&data[pos..], pos as u64, max_batch_bytes) {
            Ok(Peek::Batch(h)) => {
                on_batch(pos as u64, &h, &data[pos..pos + h.size]);
                pos += h.size;
            }
            Ok(Peek::Incomplete { needed }) => {
                return Ok(Some((
                    pos as u64,
                    format!("torn batch: {} of {needed} bytes present", data.len() - pos),
                )));
            }
            Err(e) => return Ok(Some((pos as u64, e.to_string()))),
        }
    }
    Ok(None)
}

pub fn is_segment_file(name: &str) -> bool {
    parse_segment_name(name).is_some()
}

/// Cut a partition log back to offset `end` after an append of a batch starting there failed:
/// truncate the segment holding it, remove segments created for it, and make that durable.
///
/// What the failed append left in the file may not be durable (the write can land while the
/// fsync fails; on Linux the page cache keeps serving those bytes even though they may never
/// reach the disk). A reload that replayed them answered clients from state a power loss could
/// still take back; and when the next append rolled to a new segment, a torn copy of them in the
/// old one made recovery cut the log there and drop every later segment — acknowledged commits
/// included. Returns the number of bytes and segment files removed.
pub async fn discard_unacknowledged<D: LogDir>(
    dir: &D,
    config: &LogConfig,
    end: u64,
) -> std::io::Result<(u64, usize)> {
    let mut bases: Vec<u64> = dir
        .list()
        .await?
        .iter()
        .filter_map(|n| parse_segment_name(n))
        .collect();
    bases.sort_unstable();
    let (mut bytes, mut files) = (0u64, 0usize);
    for base in bases.iter().filter(|b| **b >= end) {
        dir.remove(&segment_name(*base)).await?;
        files += 1;
    }
    // Only the last segment that starts before `end` can hold bytes at or after it.
    if let Some(base) = bases.iter().rev().find(|b| **b < end) {
        let file = dir.open(&segment_name(*base)).await?;
        let len = file.len().await?;
        let mut cut_at = None;
        let (valid, _) = scan_batches(
            &file,
            len,
            config.read_chunk_bytes,
            config.max_batch_bytes,
            |pos, h, _| {
                if h.base_offset >= end {
                    cut_at = Some(pos);
                    return Err("the failed batch".into());
                }
                Ok(())
            },
        )
        .await?;
        let keep = cut_at.unwrap_or(valid);
        if keep < len {
            file.truncate(keep).await?;
            file.sync().await?;
            bytes = len - keep;
        }
    }
    if files > 0 {
        dir.sync_dir().await?;
    }
    Ok((bytes, files))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::encode_batch;
    use crate::io::MemDir;
    use futures_lite::future::block_on;

    type Rec = (u64, Option<Vec<u8>>, Option<Vec<u8>>);

    fn open(dir: &MemDir, cfg: LogConfig) -> (PartitionLog<MemDir>, RecoveryReport, Vec<Rec>) {
        let mut seen = Vec::new();
        let (log, rep) = block_on(PartitionLog::open(dir.clone(), cfg, |o, _, k, v| {
            seen.push((o, k.map(<[u8]>::to_vec), v.map(<[u8]>::to_vec)))
        }))
        .unwrap();
        (log, rep, seen)
    }

    fn small() -> LogConfig {
        LogConfig {
            segment_bytes: 300,
            max_batch_bytes: 1 << 20,
            read_chunk_bytes: 97,
        }
    }

    #[test]
    fn truncate_from_cuts_at_a_batch_durably_and_refuses_inside_one() {
        let dir = MemDir::new();
        let (mut log, _, _) = open(&dir, small());
        // 30 batches of two records: batch i holds offsets 2i and 2i+1, over several segments.
        for i in 0u64..30 {
            let k = format!("key-{i}");
            block_on(log.append(&[(Some(k.as_bytes()), Some(b"v")), (Some(b"t"), None)], 0))
                .unwrap();
        }
        let segments = log.segment_count();
        assert!(segments > 3);
        // Inside a batch, past the end: refused, nothing changes.
        for bad in [41, 61, 100] {
            let err = block_on(log.truncate_from(bad)).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}: {err}");
        }
        assert_eq!(log.next_offset(), 60);
        // At the end: nothing to do.
        block_on(log.truncate_from(60)).unwrap();
        // At batch 20 (offset 40), in an earlier segment: later segments go.
        block_on(log.truncate_from(40)).unwrap();
        assert_eq!(log.next_offset(), 40);
        assert!(log.segment_count() < segments);
        // Appends continue from the cut, and a crash right after recovers exactly that log.
        block_on(log.append(&[(Some(b"after"), Some(b"cut"))], 0)).unwrap();
        block_on(log.sync()).unwrap();
        dir.crash(|_, unsynced| unsynced);
        let (log, rep, seen) = open(&dir, small());
        assert_eq!(rep.truncated, None);
        assert_eq!(log.next_offset(), 41);
        assert_eq!(seen.len(), 41);
        assert!(seen.iter().enumerate().all(|(i, r)| r.0 == i as u64));
        assert_eq!(seen[39].1.as_deref(), Some(&b"t"[..]));
        assert_eq!(
            seen[40],
            (40, Some(b"after".to_vec()), Some(b"cut".to_vec()))
        );
        // A cut is durable when it returns: a crash that loses every unsynced byte right after
        // it still recovers the cut log.
        let (mut log, _, _) = open(&dir, small());
        block_on(log.truncate_from(20)).unwrap();
        drop(log);
        dir.crash(|_, _| 0);
        let (log, _, seen) = open(&dir, small());
        assert_eq!((log.next_offset(), seen.len()), (20, 20));
        drop(log);
        // Back to the very start.
        let (mut log, _, _) = open(&dir, small());
        block_on(log.truncate_from(0)).unwrap();
        drop(log);
        let (log, _, seen) = open(&dir, small());
        assert_eq!((log.next_offset(), seen.len()), (0, 0));
    }

    #[test]
    fn appends_roll_and_recover_in_order() {
        let dir = MemDir::new();
        let (mut log, rep, seen) = open(&dir, small());
        assert_eq!((rep.records, seen.len(), log.next_offset()), (0, 0, 0));
        for i in 0u64..40 {
            let k = format!("key-{i}");
            let v = format!("value-{i}");
            let (a, b) = block_on(log.append(
                &[(Some(k.as_bytes()), Some(v.as_bytes())), (Some(b"t"), None)],
                i as i64,
            ))
            .unwrap();
            assert_eq!((a, b), (2 * i, 2 * i + 1));
        }
        assert!(log.segment_count() > 3, "rolled at segment_bytes");
        drop(log);
        let (log, rep, seen) = open(&dir, small());
        assert_eq!(rep.truncated, None);
        assert_eq!(rep.records, 80);
        assert_eq!(seen.len(), 80);
        assert!(seen.iter().enumerate().all(|(i, r)| r.0 == i as u64));
        assert_eq!(
            seen[2],
            (2, Some(b"key-1".to_vec()), Some(b"value-1".to_vec()))
        );
        assert_eq!(seen[3].2, None);
        assert_eq!(log.next_offset(), 80);
    }

    #[test]
    fn every_crash_point_recovers_a_prefix_with_every_acknowledged_batch() {
        // Run a workload, failing every operation after N, for every N; then crash with a torn
        // tail of each possible length class and recover. Acknowledged appends must all be there,
        // and what is there must be a prefix of what was attempted.
        for fail_at in 0..60u64 {
            for torn_mode in 0..3 {
                let dir = MemDir::new();
                let (mut log, _, _) = open(&dir, small());
                dir.fail_after(fail_at);
                let mut acked = 0u64;
                for i in 0u64..20 {
                    let k = format!("k{i}");
                    match block_on(log.append(&[(Some(k.as_bytes()), Some(b"v"))], 0)) {
                        Ok(_) => acked += 1,
                        Err(_) => break,
                    }
                }
                dir.crash(|_, unsynced| match torn_mode {
                    0 => 0,
                    1 => unsynced / 2,
                    _ => unsynced,
                });
                let (log, _, seen) = open(&dir, small());
                assert!(
                    seen.len() as u64 >= acked,
                    "fail_at {fail_at} mode {torn_mode}: lost acknowledged records"
                );
                for (i, r) in seen.iter().enumerate() {
                    assert_eq!(r.0, i as u64);
                    assert_eq!(
                        r.1.as_deref(),
                        Some(format!("k{i}").as_bytes()),
                        "not a prefix"
                    );
                }
                assert_eq!(log.next_offset(), seen.len() as u64);
            }
        }
    }

    fn put_file(dir: &MemDir, name: &str, bytes: Vec<u8>) {
        block_on(async {
            let f = dir.open(name).await?;
            f.write_at(0, bytes).await?;
            f.sync().await?;
            dir.sync_dir().await
        })
        .unwrap();
    }

    #[test]
    fn a_batch_below_its_segments_base_is_cut_and_the_next_roll_keeps_the_log() {
        // fuzz/log_recovery: segment 10 held a CRC-valid batch at offset 2 (the base offset is
        // outside the CRC). Recovery replayed it and set the next offset to 10, so the first
        // append rolled to a segment named 10 -- the same file -- and truncated it: a record
        // that recovery had replayed was gone after the next restart.
        let dir = MemDir::new();
        let mut seg0 = Vec::new();
        encode_batch(
            0,
            1,
            &[(Some(b"a"), Some(b"1")), (Some(b"b"), Some(b"2"))],
            &mut seg0,
        );
        put_file(&dir, &segment_name(0), seg0);
        let mut seg10 = Vec::new();
        encode_batch(2, 1, &[(Some(b"c"), Some(b"3"))], &mut seg10);
        put_file(&dir, &segment_name(10), seg10);
        let cfg = LogConfig {
            segment_bytes: 100,
            ..LogConfig::default()
        };
        let (mut log, rep, seen) = open(&dir, cfg.clone());
        assert_eq!(seen.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1]);
        let (seg, pos, reason) = rep.truncated.unwrap();
        assert_eq!((seg, pos), (segment_name(10), 0));
        assert!(reason.contains("goes back"), "{reason}");
        assert_eq!(log.next_offset(), 10);
        assert_eq!(
            block_on(log.append(&[(Some(b"d"), None)], 2)).unwrap(),
            (10, 10)
        );
        drop(log);
        let (log, rep, seen) = open(&dir, cfg);
        assert_eq!(rep.truncated, None);
        assert_eq!(seen.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1, 10]);
        assert_eq!(log.next_offset(), 11);
    }

    #[test]
    fn appends_stop_at_i64_max_instead_of_writing_a_batch_recovery_drops() {
        // fuzz/log_recovery: a log recovered with a batch at offset i64::MAX appended its next
        // batch at offset 2^63, encoded as a negative offset, which the next recovery cut: an
        // acknowledged append was lost.
        let dir = MemDir::new();
        let mut seg = Vec::new();
        encode_batch(i64::MAX as u64, 1, &[(Some(b"a"), Some(b"1"))], &mut seg);
        put_file(&dir, &segment_name(0), seg);
        let (mut log, rep, seen) = open(&dir, LogConfig::default());
        assert_eq!((rep.truncated, seen.len()), (None, 1));
        assert_eq!(log.next_offset(), i64::MAX as u64 + 1);
        let err = block_on(log.append(&[(Some(b"b"), None)], 2)).unwrap_err();
        assert!(err.to_string().contains("offsets exhausted"), "{err}");
        drop(log);
        let (_, rep, seen) = open(&dir, LogConfig::default());
        assert_eq!((rep.truncated, seen.len()), (None, 1));
    }

    #[test]
    fn every_chunk_size_sees_the_same_batches_and_the_same_cut() {
        // scan_batches hands batches out of each read and reads a batch cut by a chunk's end
        // again from its start: whatever the chunk size (smaller than a batch, a batch and a
        // bit, larger than the file), the batches, their positions and a torn tail's cut
        // must be the same.
        let dir = MemDir::new();
        let (mut log, _, _) = open(&dir, LogConfig::default());
        for i in 0..12usize {
            let value = vec![b'v'; i * 7];
            let recs = vec![(Some(&b"key"[..]), Some(&value[..])); i % 4 + 1];
            block_on(log.append(&recs, 0)).unwrap();
        }
        drop(log);
        let name = segment_name(0);
        let whole = dir.with_file(&name, |b| b.clone()).unwrap();
        let scan = |len: u64, chunk: usize| {
            let file = block_on(dir.open(&name)).unwrap();
            let mut seen = Vec::new();
            let r = block_on(scan_batches(&file, len, chunk, 1 << 20, |pos, h, b| {
                seen.push((pos, h.clone(), b.to_vec()));
                Ok(())
            }))
            .unwrap();
            (r, seen)
        };
        for cut in [
            whole.len() as u64,
            whole.len() as u64 - 1,
            whole.len() as u64 / 2,
        ] {
            dir.with_file(&name, |b| {
                b.clear();
                b.extend_from_slice(&whole[..cut as usize]);
            });
            let expected = scan(cut, 1 << 20);
            assert!(!expected.1.is_empty());
            if cut < whole.len() as u64 {
                assert!(
                    expected.0 .1.as_deref().unwrap().contains("torn"),
                    "{expected:?}"
                );
            }
            for chunk in (1..400).chain([whole.len(), whole.len() + 1]) {
                assert_eq!(
                    scan(cut, chunk),
                    expected,
                    "chunk {chunk}, file cut at {cut}"
                );
                // A file shorter than the length the caller believes: the same batches, then
                // "short read" where the bytes end.
                let (r, seen) = scan(whole.len() as u64 + 50, chunk);
                assert_eq!(seen, expected.1, "chunk {chunk}, file cut at {cut}");
                assert_eq!(r.1.as_deref(), Some("short read"), "chunk {chunk}");
            }
        }
    }

    #[test]
    fn corruption_truncates_to_the_last_good_batch() {
        let dir = MemDir::new();
        let (mut log, _, _) = open(&dir, LogConfig::default());
        for i in 0..10u8 {
            block_on(log.append(&[(Some(&[i]), Some(b"value"))], 0)).unwrap();
        }
        drop(log);
        let name = segment_name(0);
        let batch_len = dir.with_file(&name, |b| b.len() / 10).unwrap();
        dir.with_file(&name, |b| b[batch_len * 6 + 30] ^= 0xff);
        let (mut log, rep, seen) = open(&dir, LogConfig::default());
        assert_eq!(seen.len(), 6);
        let (seg, pos, reason) = rep.truncated.unwrap();
        assert_eq!((seg.as_str(), pos), (name.as_str(), (batch_len * 6) as u64));
        assert!(reason.contains("CRC"), "{reason}");
        // Appends continue from the cut.
        assert_eq!(
            block_on(log.append(&[(Some(b"n"), None)], 0)).unwrap(),
            (6, 6)
        );
        drop(log);
        let (_, rep, seen) = open(&dir, LogConfig::default());
        assert_eq!((seen.len(), rep.truncated), (7, None));
    }

    #[test]
    fn a_failed_append_is_cut_before_the_reload_so_later_batches_survive_a_crash() {
        // Found by the simulator (engine/sim): an append whose write landed but whose fsync
        // failed left the batch in a new segment; the reload replayed it, the next appends
        // rolled to newer segments and were acknowledged, and a power loss then tore the
        // unsynced batch: recovery cut the log there and removed every later segment.
        use crate::io::MemDir;
        use futures_lite::future::block_on;
        let dir = MemDir::new();
        let cfg = LogConfig {
            segment_bytes: 150,
            max_batch_bytes: 1 << 20,
            read_chunk_bytes: 64,
        };
        let open = |dir: &MemDir| {
            let mut keys = Vec::new();
            let (log, _) = block_on(PartitionLog::open(
                dir.clone(),
                cfg.clone(),
                |_, _, k, _| keys.push(k.map(<[u8]>::to_vec).unwrap_or_default()),
            ))
            .expect("the log opens");
            (log, keys)
        };
        let value = vec![7u8; 100];
        let (mut log, _) = open(&dir);
        block_on(log.append(&[(Some(b"a"), Some(&value))], 0)).expect("a healthy append");
        // The next append rolls (open, truncate, dir sync), writes, and its fsync fails.
        dir.fail_after(4);
        let end = log.next_offset();
        assert!(block_on(log.append(&[(Some(b"f"), Some(&value))], 0)).is_err());
        dir.heal();
        // What a partition writer does next: cut the failed batch, then reload.
        let (_, removed) = block_on(discard_unacknowledged(&dir, &cfg, end)).expect("cut");
        assert_eq!(removed, 1, "the segment rolled for the failed batch goes");
        let (mut log, keys) = open(&dir);
        assert_eq!(
            keys,
            [b"a".to_vec()],
            "the reload must not see the failed batch"
        );
        for k in [b"b", b"c"] {
            block_on(log.append(&[(Some(k), Some(&value))], 0)).expect("acknowledged append");
        }
        // Power loss: unsynced bytes are torn half-way.
        dir.crash(|_, unsynced| unsynced / 2);
        let (_, keys) = open(&dir);
        assert_eq!(
            keys,
            [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
            "every acknowledged batch must survive the crash"
        );
    }
}
