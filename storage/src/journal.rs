//! One durable point per shard: a write-ahead journal whose single fdatasync per round makes
//! the batches of every `__consumer_offsets` partition of the shard durable at once.
//!
//! Why: each partition used to append and fdatasync its own segment file, so 64 groups spread
//! over ~40 partitions paid ~40 fdatasyncs per round, and a disk that does ~10k fdatasyncs/s in
//! parallel capped durable commits near that (docs/performance.md). With the journal, a
//! partition's writer writes its batch to its segment file *without* syncing it, then hands the
//! same bytes to the shard's journal; the journal writes everything handed to it since its last
//! round as one append and syncs once. A reply is released once the journal round holding its
//! records is durable — the same rule as before, with the journal as the durable copy.
//!
//! The segment files stay Kafka's format and stay the source replay reads; they are made
//! durable behind the journal:
//! - **at a roll**: a segment is synced before the next one is created ([`crate::log`]), so
//!   only a partition's last segment can ever lack journaled bytes;
//! - **at a checkpoint**: when a journal file has grown past its bound, the shard starts a new
//!   generation file, syncs every segment written since the previous checkpoint, and only then
//!   removes the older generations. The journal files present on disk therefore always cover
//!   every batch that is not yet durable in its segment file.
//!
//! Recovery ([`recover`]) runs before any partition loads: for each partition, every journaled
//! batch the log lacks is appended to the log again, cuts are applied, the touched segments are
//! synced, and the journal files are removed. A batch the log already holds is skipped: the log
//! can only hold different bytes at those offsets after a failed write, and a failed write is
//! always followed in the journal by a [`Entry::Cut`] (written before the partition serves
//! again), which recovery applies in order.
//!
//! File `<shard:04>-<generation:020>.journal`, a sequence of entries (little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | `length`: bytes after this field |
//! | 4 | CRC-32C of the `length - 4` bytes after this field |
//! | 8 | generation (must equal the file's) |
//! | 1 | kind: 1 = batch, 2 = cut |
//! | 4 | partition |
//! | 8 | batch: the batch's base offset; cut: the offset the log is cut back to |
//! | rest | batch: the record batch exactly as written to the segment; cut: nothing |
//!
//! A torn or corrupt entry ends its file: only the last round, never acknowledged, can be torn.
//!
//! Must not: know what a group or a record means, or decide when rounds happen (the shell does).

use crate::batch::{peek_batch, Peek};
use crate::io::{LogDir, LogFile};
use crate::log::{discard_unacknowledged, scan_batches, segment_name, LogConfig};
use std::collections::BTreeMap;
use std::io;

/// A journal file is closed for a checkpoint once it holds this many bytes: recovery then
/// re-applies at most about this much per shard, and the checkpoint's segment syncs are paid
/// once per this many journaled bytes.
pub const CHECKPOINT_BYTES: u64 = 64 * 1024 * 1024;

const ENTRY_HEADER: usize = 4 + 4 + 8 + 1 + 4 + 8;
const KIND_BATCH: u8 = 1;
const KIND_CUT: u8 = 2;
const SUFFIX: &str = ".journal";

/// One journaled operation on a partition log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry<'a> {
    /// A record batch appended at `base_offset` (the bytes are the whole Kafka batch).
    Batch {
        partition: i32,
        base_offset: u64,
        batch: &'a [u8],
    },
    /// The log was cut back to `offset` after a failed write: what a journal entry before this
    /// one put at or after `offset` was never acknowledged and must not come back.
    Cut { partition: i32, offset: u64 },
}

impl Entry<'_> {
    pub fn partition(&self) -> i32 {
        match self {
            Entry::Batch { partition, .. } | Entry::Cut { partition, .. } => *partition,
        }
    }

    /// Bytes this entry takes in a journal file.
    pub fn encoded_len(&self) -> usize {
        ENTRY_HEADER
            + match self {
                Entry::Batch { batch, .. } => batch.len(),
                Entry::Cut { .. } => 0,
            }
    }

    /// Append this entry, for a file of `generation`, to `out`.
    pub fn encode(&self, generation: u64, out: &mut Vec<u8>) {
        let start = out.len();
        let (kind, partition, offset, payload): (u8, i32, u64, &[u8]) = match self {
            Entry::Batch {
                partition,
                base_offset,
                batch,
            } => (KIND_BATCH, *partition, *base_offset, batch),
            Entry::Cut { partition, offset } => (KIND_CUT, *partition, *offset, &[]),
        };
        let length = (ENTRY_HEADER - 4 + payload.len()) as u32;
        out.extend_from_slice(&length.to_le_bytes());
        out.extend_from_slice(&[0; 4]); // CRC, patched below
        out.extend_from_slice(&generation.to_le_bytes());
        out.push(kind);
        out.extend_from_slice(&partition.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(payload);
        let crc = crc32c::crc32c(&out[start + 8..]);
        out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(out.len() - start, self.encoded_len());
    }
}

/// An entry read back from a file, owning its batch bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnedEntry {
    Batch {
        partition: i32,
        base_offset: u64,
        batch: Vec<u8>,
    },
    Cut {
        partition: i32,
        offset: u64,
    },
}

impl OwnedEntry {
    pub fn partition(&self) -> i32 {
        match self {
            OwnedEntry::Batch { partition, .. } | OwnedEntry::Cut { partition, .. } => *partition,
        }
    }
}

/// Parse the entries of one journal file of `generation`. Stops at the first entry that is torn
/// or corrupt and says where and why (what follows it is the unacknowledged tail of the last
/// round). `max_entry` bounds a length field, so a corrupt one cannot make the reader allocate
/// wildly.
pub fn parse_entries(
    bytes: &[u8],
    generation: u64,
    max_entry: usize,
) -> (Vec<OwnedEntry>, Option<(u64, String)>) {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let stop = |why: String| Some((pos as u64, why));
        let rest = &bytes[pos..];
        if rest.len() < 4 {
            return (out, stop(format!("torn entry: {} bytes", rest.len())));
        }
        let length = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
        if length < ENTRY_HEADER - 4 || length > max_entry {
            return (out, stop(format!("entry length {length} out of range")));
        }
        if rest.len() < 4 + length {
            return (
                out,
                stop(format!(
                    "torn entry: {} of {} bytes present",
                    rest.len(),
                    4 + length
                )),
            );
        }
        let e = &rest[..4 + length];
        let stored = u32::from_le_bytes(e[4..8].try_into().expect("4 bytes"));
        if crc32c::crc32c(&e[8..]) != stored {
            return (out, stop("entry CRC mismatch".into()));
        }
        let entry_gen = u64::from_le_bytes(e[8..16].try_into().expect("8 bytes"));
        if entry_gen != generation {
            return (
                out,
                stop(format!(
                    "entry of generation {entry_gen} in generation {generation}'s file"
                )),
            );
        }
        let kind = e[16];
        let partition = i32::from_le_bytes(e[17..21].try_into().expect("4 bytes"));
        let offset = u64::from_le_bytes(e[21..29].try_into().expect("8 bytes"));
        let payload = &e[ENTRY_HEADER..];
        let entry = match kind {
            KIND_BATCH => {
                // The batch must be whole, CRC-valid and at the offset the entry names.
                match peek_batch(payload, 0, max_entry) {
                    Ok(Peek::Batch(h)) if h.size == payload.len() && h.base_offset == offset => {
                        OwnedEntry::Batch {
                            partition,
                            base_offset: offset,
                            batch: payload.to_vec(),
                        }
                    }
                    other => {
                        return (
                            out,
                            stop(format!("journaled batch is not valid: {other:?}")),
                        )
                    }
                }
            }
            KIND_CUT if payload.is_empty() => OwnedEntry::Cut { partition, offset },
            _ => return (out, stop(format!("unknown entry kind {kind}"))),
        };
        if partition < 0 {
            return (out, stop(format!("negative partition {partition}")));
        }
        out.push(entry);
        pos += 4 + length;
    }
    (out, None)
}

pub fn file_name(shard: usize, generation: u64) -> String {
    format!("{shard:04}-{generation:020}{SUFFIX}")
}

/// (shard, generation) of a journal file name.
pub fn parse_file_name(name: &str) -> Option<(usize, u64)> {
    let stem = name.strip_suffix(SUFFIX)?;
    let (shard, generation) = stem.split_once('-')?;
    if shard.len() != 4 || generation.len() != 20 {
        return None;
    }
    Some((shard.parse().ok()?, generation.parse().ok()?))
}

/// One shard's journal: the file of the current generation, and the older generations a
/// checkpoint has not removed yet.
pub struct Journal<D: LogDir> {
    dir: D,
    shard: usize,
    generation: u64,
    file: D::File,
    /// Bytes written to the current file (rounds that failed included: their bytes may be in it).
    size: u64,
    /// A round failed: what the file holds after it is unknown, so the next round goes to a new
    /// generation.
    broken: bool,
    /// Generations older than the current one, still on disk (a checkpoint removes them).
    older: Vec<u64>,
}

impl<D: LogDir> Journal<D> {
    /// Start `shard`'s journal at `generation` in `dir` (after [`recover`] emptied it).
    pub async fn create(dir: D, shard: usize, generation: u64) -> io::Result<Self> {
        let file = Self::new_file(&dir, shard, generation).await?;
        Ok(Self {
            dir,
            shard,
            generation,
            file,
            size: 0,
            broken: false,
            older: Vec::new(),
        })
    }

    async fn new_file(dir: &D, shard: usize, generation: u64) -> io::Result<D::File> {
        let file = dir.open(&file_name(shard, generation)).await?;
        file.truncate(0).await?;
        // The new file's name must survive a power loss before anything in it counts.
        dir.sync_dir().await?;
        Ok(file)
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Generations that a checkpoint may remove once the segments are synced.
    pub fn older(&self) -> &[u64] {
        &self.older
    }

    /// Whether the current file is past [`CHECKPOINT_BYTES`] (time for [`Self::rotate`]).
    pub fn checkpoint_due(&self, bound: u64) -> bool {
        self.size >= bound
    }

    /// One round: `entries` in one write, then one sync. When this returns `Ok`, every entry is
    /// durable. On an error nothing in the round may be acknowledged, and the next round starts
    /// a new generation (what this file holds after a failed write or sync is unknown).
    pub async fn append(&mut self, entries: &[Entry<'_>]) -> io::Result<()> {
        assert!(!entries.is_empty(), "a round holds at least one entry");
        if self.broken {
            self.rotate().await?;
        }
        let mut bytes = Vec::with_capacity(entries.iter().map(Entry::encoded_len).sum());
        for e in entries {
            e.encode(self.generation, &mut bytes);
        }
        let pos = self.size;
        // The failed round's bytes may have landed: a new generation starts after a failure, so
        // later entries are never mixed with a torn one (recovery stops a file at a torn entry).
        self.size += bytes.len() as u64;
        let result = async {
            self.file.write_at(pos, bytes).await?;
            self.file.sync().await
        }
        .await;
        if result.is_err() {
            self.broken = true;
        }
        result
    }

    /// Start a new generation file; the current one becomes an older generation, removed by
    /// [`Self::remove_older`] once a checkpoint has synced every segment written before now.
    pub async fn rotate(&mut self) -> io::Result<()> {
        let next = self.generation + 1;
        let file = Self::new_file(&self.dir, self.shard, next).await?;
        self.older.push(self.generation);
        self.generation = next;
        self.file = file;
        self.size = 0;
        self.broken = false;
        Ok(())
    }

    /// Remove the generations older than the current one that existed when the checkpoint
    /// started (`upto` = the generation current before its rotation, inclusive). Call only after
    /// every segment written before that rotation is synced.
    pub async fn remove_older(&mut self, upto: u64) -> io::Result<usize> {
        let (gone, keep): (Vec<u64>, Vec<u64>) = self.older.iter().partition(|g| **g <= upto);
        for g in &gone {
            self.dir.remove(&file_name(self.shard, *g)).await?;
        }
        self.older = keep;
        if !gone.is_empty() {
            self.dir.sync_dir().await?;
        }
        Ok(gone.len())
    }
}

impl<D: LogDir> Journal<D> {
    /// A clean stop, once every segment written is synced: remove every generation, so a
    /// cleanly stopped broker leaves its partition logs whole on their own.
    pub async fn close(mut self) -> io::Result<()> {
        let current = self.generation;
        self.older.push(current);
        self.remove_older(current).await?;
        Ok(())
    }
}

/// What [`recover`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct JournalRecovery {
    pub files: usize,
    pub entries: u64,
    /// Batches appended to a partition log that lacked them.
    pub batches_applied: u64,
    /// Batches the log already held.
    pub batches_present: u64,
    /// Journaled batches a later cut entry voided (failed writes, never acknowledged).
    pub cuts_applied: u64,
    pub bytes_applied: u64,
    /// Partitions whose log changed.
    pub partitions: usize,
    /// Files whose tail was torn or corrupt: (file, position, reason).
    pub torn: Vec<(String, u64, String)>,
    /// Last segments whose torn or corrupt tail was cut before applying the journal:
    /// (partition, segment file, position, reason).
    pub truncated: Vec<(i32, String, u64, String)>,
}

/// Where a partition log ends, from its last segment (only the last one can lack journaled
/// bytes: a segment is synced before the next is created).
struct Tail<F> {
    file: F,
    size: u64,
    end: u64,
}

async fn open_tail<D: LogDir>(
    dir: &D,
    config: &LogConfig,
    cut: &mut Option<(String, u64, String)>,
) -> io::Result<Option<Tail<D::File>>> {
    let mut bases: Vec<u64> = dir
        .list()
        .await?
        .iter()
        .filter_map(|n| crate::log::parse_segment_name(n))
        .collect();
    bases.sort_unstable();
    let Some(&base) = bases.last() else {
        return Ok(None);
    };
    let file = dir.open(&segment_name(base)).await?;
    let len = file.len().await?;
    let mut end = base;
    let (valid, stop) = scan_batches(
        &file,
        len,
        config.read_chunk_bytes,
        config.max_batch_bytes,
        |_, h, _| {
            if h.base_offset < end {
                return Err(format!("batch base offset {} goes back", h.base_offset));
            }
            end = h.last_offset() + 1;
            Ok(())
        },
    )
    .await?;
    if let Some(reason) = stop.filter(|_| valid < len) {
        // A torn tail of the last segment: cut it, as the log's own recovery would.
        file.truncate(valid).await?;
        *cut = Some((segment_name(base), valid, reason));
    }
    Ok(Some(Tail {
        file,
        size: valid,
        end,
    }))
}

/// Bring every partition log up to date with the journal files in `journal_dir`, sync what
/// changed, and remove the journal files. `partition_dir(p)` gives partition `p`'s log
/// directory (an error refuses a partition the broker does not have). Run before any partition
/// loads. Journaled batches the log lacks are appended; a journaled batch that starts past the
/// end of its log means bytes were lost that no journal covers — that is reported as an error,
/// never skipped.
pub async fn recover<J: LogDir, D: LogDir>(
    journal_dir: &J,
    mut partition_dir: impl FnMut(i32) -> io::Result<D>,
    config: &LogConfig,
) -> io::Result<JournalRecovery> {
    let mut report = JournalRecovery::default();
    let mut files: Vec<(usize, u64, String)> = journal_dir
        .list()
        .await?
        .into_iter()
        .filter_map(|n| parse_file_name(&n).map(|(s, g)| (s, g, n)))
        .collect();
    files.sort();
    report.files = files.len();
    // Per partition, its entries in the order they were written. One partition belongs to one
    // shard for the whole of a run, and each run starts with an empty journal directory, so the
    // entries of one partition come from one shard's files, read in generation order.
    let mut ops: BTreeMap<i32, Vec<OwnedEntry>> = BTreeMap::new();
    let max_entry = config.max_batch_bytes + ENTRY_HEADER;
    for (_, generation, name) in &files {
        let file = journal_dir.open(name).await?;
        let len = file.len().await?;
        let mut bytes = Vec::with_capacity(len as usize);
        while (bytes.len() as u64) < len {
            let chunk = file
                .read_at(
                    bytes.len() as u64,
                    config
                        .read_chunk_bytes
                        .min((len - bytes.len() as u64) as usize),
                )
                .await?;
            if chunk.is_empty() {
                break;
            }
            bytes.extend_from_slice(&chunk);
        }
        let (entries, stop) = parse_entries(&bytes, *generation, max_entry);
        if let Some((pos, why)) = stop {
            report.torn.push((name.clone(), pos, why));
        }
        report.entries += entries.len() as u64;
        for e in entries {
            ops.entry(e.partition()).or_default().push(e);
        }
    }
    for (partition, entries) in ops {
        let dir = partition_dir(partition)?;
        if apply(&dir, partition, &entries, config, &mut report).await? {
            report.partitions += 1;
        }
    }
    for (_, _, name) in &files {
        journal_dir.remove(name).await?;
    }
    if !files.is_empty() {
        journal_dir.sync_dir().await?;
    }
    Ok(report)
}

/// The batches of one partition's entries that count: a cut removes the batches journaled
/// before it at or past its offset. Those failed (the batch in flight when a write failed) and
/// were never acknowledged; the shell had already cut them from the log, durably, before it
/// journaled the cut, so the cut itself never needs to touch the log again — it only keeps their
/// journal entries from bringing them back.
fn effective_batches(entries: &[OwnedEntry]) -> (Vec<(u64, &[u8])>, u64) {
    let mut out: Vec<(u64, &[u8])> = Vec::new();
    let mut dropped = 0;
    for e in entries {
        match e {
            OwnedEntry::Batch {
                base_offset, batch, ..
            } => out.push((*base_offset, batch)),
            OwnedEntry::Cut { offset, .. } => {
                let before = out.len();
                out.retain(|(base, _)| base < offset);
                dropped += (before - out.len()) as u64;
            }
        }
    }
    (out, dropped)
}

/// Apply one partition's journaled entries to its log; returns whether the log changed.
async fn apply<D: LogDir>(
    dir: &D,
    partition: i32,
    entries: &[OwnedEntry],
    config: &LogConfig,
    report: &mut JournalRecovery,
) -> io::Result<bool> {
    let (batches, dropped) = effective_batches(entries);
    report.cuts_applied += dropped;
    let mut cut = None;
    let mut tail = open_tail(dir, config, &mut cut).await?;
    let mut changed = false;
    let mut created = false;
    for (base_offset, batch) in batches {
        let Ok(Peek::Batch(h)) = peek_batch(batch, 0, config.max_batch_bytes) else {
            unreachable!("parse_entries checked the batch");
        };
        let end = tail.as_ref().map(|t| t.end);
        // The log is a prefix of what was written, and what was written is these same bytes
        // (failed batches are gone, above): a batch below its end is there.
        if end.is_some_and(|end| h.last_offset() < end) {
            report.batches_present += 1;
            continue;
        }
        if end.is_some_and(|end| base_offset < end) {
            // Other bytes where this batch starts (not expected: kept as a defence, the journal
            // wins): cut them first.
            discard_unacknowledged(dir, config, base_offset).await?;
            tail = open_tail(dir, config, &mut None).await?;
        }
        match tail.as_ref().map(|t| t.end) {
            Some(end) if end == base_offset => {}
            None => {
                // No segment at all (a partition never written before this run's journal
                // began): the batch starts the log.
                let file = dir.open(&segment_name(base_offset)).await?;
                file.truncate(0).await?;
                created = true;
                tail = Some(Tail {
                    file,
                    size: 0,
                    end: base_offset,
                });
            }
            Some(end) => {
                return Err(io::Error::other(format!(
                    "__consumer_offsets-{partition}: the journal's next batch starts at \
                     offset {base_offset} but the log ends at {end}: offsets {end}..{base_offset} \
                     are in neither (refusing to start rather than lose them)"
                )));
            }
        }
        let t = tail.as_mut().expect("a tail to append to");
        t.file.write_at(t.size, batch.to_vec()).await?;
        t.size += batch.len() as u64;
        t.end = h.last_offset() + 1;
        report.batches_applied += 1;
        report.bytes_applied += batch.len() as u64;
        changed = true;
    }
    // Synced even when every batch was already there: after a process crash the page cache
    // holds the segment's bytes, but only the journal about to be removed made them durable.
    if let Some(t) = &tail {
        t.file.sync().await?;
    }
    if created || changed {
        dir.sync_dir().await?;
    }
    if let Some((segment, pos, reason)) = cut {
        report.truncated.push((partition, segment, pos, reason));
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::encode_batch;
    use crate::io::MemDir;
    use crate::log::PartitionLog;
    use futures_lite::future::block_on;

    fn batch(base: u64, keys: &[&[u8]]) -> Vec<u8> {
        let recs: Vec<crate::log::RecordRef<'_>> =
            keys.iter().map(|k| (Some(*k), Some(&b"v"[..]))).collect();
        let mut out = Vec::new();
        encode_batch(base, 1_000, &recs, &mut out);
        out
    }

    fn cfg() -> LogConfig {
        LogConfig {
            segment_bytes: 1 << 20,
            max_batch_bytes: 1 << 20,
            read_chunk_bytes: 53,
        }
    }

    /// Append one record with `key` to partition 0's log without syncing, as the shell does,
    /// and journal its batch in a round of its own; the batch's base offset.
    async fn journaled(
        log: &mut PartitionLog<MemDir>,
        j: &mut Journal<MemDir>,
        key: &[u8],
    ) -> io::Result<u64> {
        let (base, _, batch) = log.append_unsynced(&[(Some(key), None)], 1).await.unwrap();
        j.append(&[Entry::Batch {
            partition: 0,
            base_offset: base,
            batch: &batch,
        }])
        .await?;
        Ok(base)
    }

    fn keys_in(dir: &MemDir) -> Vec<(u64, Vec<u8>)> {
        let mut seen = Vec::new();
        block_on(PartitionLog::open(dir.clone(), cfg(), |o, _, k, _| {
            seen.push((o, k.unwrap().to_vec()))
        }))
        .unwrap();
        seen
    }

    #[test]
    fn entries_round_trip_and_a_torn_tail_ends_the_file() {
        let b = batch(7, &[b"a", b"b"]);
        let mut round = Vec::new();
        Entry::Batch {
            partition: 4,
            base_offset: 7,
            batch: &b,
        }
        .encode(3, &mut round);
        Entry::Cut {
            partition: 4,
            offset: 8,
        }
        .encode(3, &mut round);
        let (got, stop) = parse_entries(&round, 3, 1 << 20);
        assert_eq!(stop, None);
        assert_eq!(
            got,
            vec![
                OwnedEntry::Batch {
                    partition: 4,
                    base_offset: 7,
                    batch: b.clone()
                },
                OwnedEntry::Cut {
                    partition: 4,
                    offset: 8
                }
            ]
        );
        // Every proper prefix parses to the whole entries before the cut point, never more.
        for cut in 0..round.len() {
            let (got, stop) = parse_entries(&round[..cut], 3, 1 << 20);
            let whole = usize::from(cut >= b.len() + ENTRY_HEADER);
            assert_eq!(got.len(), whole, "prefix {cut}");
            assert_eq!(stop.is_some(), cut != 0 && cut != b.len() + ENTRY_HEADER);
        }
        // A flipped byte anywhere is caught.
        for i in 0..round.len() {
            let mut bad = round.clone();
            bad[i] ^= 0x40;
            let (got, stop) = parse_entries(&bad, 3, 1 << 20);
            assert!(stop.is_some(), "flip at {i} not caught");
            assert!(got.len() <= 1);
        }
        // An entry of another generation is not taken (a stale file must not replay).
        assert_eq!(parse_entries(&round, 4, 1 << 20).0.len(), 0);
    }

    #[test]
    fn file_names_parse() {
        assert_eq!(parse_file_name(&file_name(3, 17)), Some((3, 17)));
        assert_eq!(parse_file_name("0003-17.journal"), None);
        assert_eq!(parse_file_name("00000000000000000000.log"), None);
    }

    /// The broker's order: segment write (not synced), journal round (synced), reply. A crash
    /// that drops every unsynced segment byte loses nothing a round made durable.
    #[test]
    fn recovery_restores_what_only_the_journal_holds() {
        let journal_dir = MemDir::new();
        let p0 = MemDir::new();
        let p1 = MemDir::new();
        block_on(async {
            let mut j = Journal::create(journal_dir.clone(), 0, 1).await.unwrap();
            let mut l0 = PartitionLog::open(p0.clone(), cfg(), |_, _, _, _| {})
                .await
                .unwrap()
                .0;
            let mut l1 = PartitionLog::open(p1.clone(), cfg(), |_, _, _, _| {})
                .await
                .unwrap()
                .0;
            for i in 0..5u8 {
                let k = [i];
                let a = l0
                    .append_unsynced(&[(Some(&k[..]), Some(&b"v"[..]))], 1)
                    .await
                    .unwrap();
                let b = l1
                    .append_unsynced(&[(Some(&k[..]), None)], 1)
                    .await
                    .unwrap();
                j.append(&[
                    Entry::Batch {
                        partition: 0,
                        base_offset: a.0,
                        batch: &a.2,
                    },
                    Entry::Batch {
                        partition: 1,
                        base_offset: b.0,
                        batch: &b.2,
                    },
                ])
                .await
                .unwrap();
            }
        });
        // Power loss: every segment loses all its unsynced bytes; the journal keeps its own.
        for d in [&journal_dir, &p0, &p1] {
            d.crash(|_, _| 0);
        }
        assert!(keys_in(&p0).is_empty());
        let dirs = [p0.clone(), p1.clone()];
        let rep = block_on(recover(
            &journal_dir,
            |p| Ok(dirs[p as usize].clone()),
            &cfg(),
        ))
        .unwrap();
        assert_eq!(rep.batches_applied, 10);
        assert_eq!(rep.partitions, 2);
        assert!(block_on(journal_dir.list()).unwrap().is_empty());
        // What recovery wrote is durable: another crash keeps it.
        for d in [&p0, &p1] {
            d.crash(|_, _| 0);
        }
        let got: Vec<u64> = keys_in(&p0).iter().map(|(o, _)| *o).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert_eq!(keys_in(&p1).len(), 5);
    }

    #[test]
    fn batches_the_log_holds_are_skipped_and_a_cut_undoes_a_failed_batch() {
        let journal_dir = MemDir::new();
        let p = MemDir::new();
        block_on(async {
            let mut j = Journal::create(journal_dir.clone(), 0, 1).await.unwrap();
            let mut log = PartitionLog::open(p.clone(), cfg(), |_, _, _, _| {})
                .await
                .unwrap()
                .0;
            journaled(&mut log, &mut j, b"a").await.unwrap();
            // A batch whose round "failed" (its entry landed anyway), then the cut the shell
            // journals before the partition serves again, then a different batch at the same offset.
            let bad = journaled(&mut log, &mut j, b"bad").await.unwrap();
            discard_unacknowledged(&p, &cfg(), bad).await.unwrap();
            j.append(&[Entry::Cut {
                partition: 0,
                offset: bad,
            }])
            .await
            .unwrap();
            let mut log = PartitionLog::open(p.clone(), cfg(), |_, _, _, _| {})
                .await
                .unwrap()
                .0;
            let good = journaled(&mut log, &mut j, b"good").await.unwrap();
            assert_eq!(good, bad);
        });
        journal_dir.crash(|_, _| 0);
        p.crash(|_, _| 0);
        let rep = block_on(recover(&journal_dir, |_| Ok(p.clone()), &cfg())).unwrap();
        assert_eq!(keys_in(&p), vec![(0, b"a".to_vec()), (1, b"good".to_vec())]);
        // The cut's fdatasync kept "a"; "good" lived only in the journal; "bad" is voided by the
        // cut although its entry is in the journal and would fit at the log's end.
        assert_eq!(rep.batches_applied, 1, "{rep:?}");
        assert_eq!(rep.batches_present, 1, "{rep:?}");
        assert_eq!(rep.cuts_applied, 1);
    }

    /// The failed batch's entry reached the journal, the shell cut the log and journaled the
    /// cut, and nothing was written after it: the failed batch would fit exactly at the log's
    /// end, and only the cut keeps it from coming back as if it had been acknowledged.
    #[test]
    fn a_cut_voids_a_failed_batch_that_would_fit_at_the_end() {
        let journal_dir = MemDir::new();
        let p = MemDir::new();
        block_on(async {
            let mut j = Journal::create(journal_dir.clone(), 0, 1).await.unwrap();
            let mut log = PartitionLog::open(p.clone(), cfg(), |_, _, _, _| {})
                .await
                .unwrap()
                .0;
            journaled(&mut log, &mut j, b"a").await.unwrap();
            let bad = journaled(&mut log, &mut j, b"bad").await.unwrap();
            discard_unacknowledged(&p, &cfg(), bad).await.unwrap();
            j.append(&[Entry::Cut {
                partition: 0,
                offset: bad,
            }])
            .await
            .unwrap();
        });
        journal_dir.crash(|_, _| 0);
        p.crash(|_, _| 0);
        let rep = block_on(recover(&journal_dir, |_| Ok(p.clone()), &cfg())).unwrap();
        assert_eq!(keys_in(&p), vec![(0, b"a".to_vec())], "{rep:?}");
        assert_eq!(rep.cuts_applied, 1);
    }

    #[test]
    fn a_gap_no_journal_covers_is_an_error_not_a_silent_loss() {
        let journal_dir = MemDir::new();
        let p = MemDir::new();
        block_on(async {
            let mut j = Journal::create(journal_dir.clone(), 0, 1).await.unwrap();
            let mut log = PartitionLog::open(p.clone(), cfg(), |_, _, _, _| {})
                .await
                .unwrap()
                .0;
            log.append(&[(Some(&b"a"[..]), None)], 1).await.unwrap();
            // Offset 1 written and lost with no journal entry (a broken checkpoint would do it).
            let b = batch(2, &[b"c"]);
            j.append(&[Entry::Batch {
                partition: 0,
                base_offset: 2,
                batch: &b,
            }])
            .await
            .unwrap();
        });
        let err = block_on(recover(&journal_dir, |_| Ok(p.clone()), &cfg())).unwrap_err();
        assert!(err.to_string().contains("are in neither"), "{err}");
        // The journal is kept for a later attempt.
        assert_eq!(block_on(journal_dir.list()).unwrap().len(), 1);
    }
}
