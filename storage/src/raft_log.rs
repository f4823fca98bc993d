//! The durable Raft log of one replicated partition, kept in the partition's own segment log so
//! Kafka's tools read Raft's persistence as an ordinary partition (docs/replication.md, "Not
//! built yet", step 1).
//!
//! Owns: the mapping between Raft entries (index, term, data) and the batches of a
//! [`PartitionLog`], and the partition's hard state (term, vote, commit) in a small file of its
//! own. Raft index *i* (from 1) is the *i*-th record batch of the log; the entry's term is the
//! batch's partitionLeaderEpoch (Kafka's meaning for that field); a non-empty entry's data is a
//! Kafka record batch (v2, base offset 0, as [`crate::batch::encode_batch_as`] writes it) stored
//! with its base offset and leader epoch rewritten; an empty entry (a new leader's no-op) is
//! stored as a KRaft LeaderChange control batch ([`crate::batch::encode_leader_change`]). A
//! conflicting suffix is cut with [`PartitionLog::truncate_from`]. The hard state lives in
//! [`STATE_FILE`], two checksummed slots written in place, never over the last durable one, so an
//! update never destroys the previous durable value.
//!
//! Only the term and the vote must be durable before Raft acts on them (a node must never vote
//! twice in a term or forget a term it took part in); the commit index is volatile state in Raft
//! (Ongaro's thesis, Figure 3.1: commitIndex is re-learnt from the leader). So a hard state that
//! changes only the commit index is written without making the next [`RaftLog::sync`] fdatasync
//! the state file: most writes of a busy partition (a follower's append advances its commit
//! index every time) then cost one fdatasync, of the log, instead of two. Such a write goes to
//! the slot that does not hold the last *synced* state, so whatever survives a crash is either
//! that synced state or a newer one with the same term and vote.
//!
//! Must not: decide what is committed, what is acknowledged, who leads or whom to vote for (the
//! caller's Raft does); talk to the network; read a clock (the caller passes `now_ms`); know the
//! Raft library (entries are plain (index, term, data), no `raft` crate). Nothing else may
//! remove or rewrite the segments of a Raft log (key compaction, retention): a batch that
//! disappears shifts every later index.

use crate::batch::{encode_leader_change, for_each_record, is_leader_change, peek_batch, Peek};
use crate::io::{LogDir, LogFile};
use crate::log::{scan_batches, LogConfig, PartitionLog};
use std::io;

/// The hard state's file, next to the segments (not a segment name, so the log ignores it).
pub const STATE_FILE: &str = "raft-state";

/// Bytes of one hard state slot: seq u64, term u64, vote u64, commit u64 (big-endian), then
/// CRC-32C (u32) of those 32 bytes.
const SLOT_BYTES: usize = 36;

/// Distance between the two slots' starts in [`STATE_FILE`]: slot 0 at byte 0, slot 1 at 4096.
/// The files `GlommioDir` opens are buffered (no O_DIRECT), so writes need no alignment and
/// only the 36 bytes of a slot are written; the slots sit a page apart so that writing one
/// never rewrites the page, or any disk sector, the other one lives in — a torn write of the
/// newer slot cannot take the older one with it.
pub const SLOT_SIZE: u64 = 4096;

/// Raft's hard state: the current term, the node voted for in it (0 = none) and the highest
/// index known committed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HardState {
    pub term: u64,
    pub vote: u64,
    pub commit: u64,
}

/// One entry as found in the log: empty `data` is a leader's no-op entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    pub index: u64,
    pub term: u64,
    pub data: Vec<u8>,
}

/// The Raft log and hard state of one partition (see the module documentation).
pub struct RaftLog<D: LogDir> {
    log: PartitionLog<D>,
    /// `bases[i - 1]` is the base offset of index `i`'s batch.
    bases: Vec<u64>,
    state: D::File,
    /// The last hard state written (durable once synced) and its slot's sequence number (0 =
    /// none written yet).
    hard_state: HardState,
    seq: u64,
    /// The slot holding the last hard state known durable: every write goes to the other one.
    durable_slot: u64,
    log_unsynced: bool,
    state_unsynced: bool,
}

fn invalid_input(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

fn invalid_data(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// A leader change control batch (one record whose key is a LeaderChange): how an empty entry
/// is stored. `Err` when the batch's records do not parse.
fn is_leader_change_batch(
    h: &crate::batch::BatchHeader,
    batch: &[u8],
    pos: u64,
) -> Result<bool, crate::batch::BatchError> {
    if !h.is_control() || h.records_count != 1 {
        return Ok(false);
    }
    let mut leader_change = false;
    for_each_record(batch, h, pos, |_, _, k, _| {
        leader_change = is_leader_change(k)
    })?;
    Ok(leader_change)
}

fn encode_slot(seq: u64, hs: HardState) -> Vec<u8> {
    let mut b = Vec::with_capacity(SLOT_BYTES);
    for v in [seq, hs.term, hs.vote, hs.commit] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    b
}

/// A whole, CRC-valid slot: (seq, hard state). `None` for a torn, never written or corrupt one.
fn decode_slot(b: &[u8]) -> Option<(u64, HardState)> {
    if b.len() < SLOT_BYTES {
        return None;
    }
    let word = |i: usize| u64::from_be_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let crc = u32::from_be_bytes(b[32..36].try_into().expect("4 bytes"));
    if crc != crc32c::crc32c(&b[..32]) || word(0) == 0 {
        return None;
    }
    let hs = HardState {
        term: word(1),
        vote: word(2),
        commit: word(3),
    };
    Some((word(0), hs))
}

/// The valid slot with the higher sequence number: (seq, hard state, slot); (0, zeros, 1) when
/// neither is valid (a new file, or only a first write that never became whole), so the first
/// write goes to slot 0.
async fn read_state<F: LogFile>(file: &F) -> io::Result<(u64, HardState, u64)> {
    let mut best = (0, HardState::default(), 1);
    for slot in 0..2 {
        let bytes = file.read_at(slot * SLOT_SIZE, SLOT_BYTES).await?;
        if let Some((seq, hs)) = decode_slot(&bytes) {
            if seq > best.0 {
                best = (seq, hs, slot);
            }
        }
    }
    Ok(best)
}

impl<D: LogDir> RaftLog<D> {
    /// Open (or create) the Raft log in `dir`. Returns the log, the hard state (zeros when none
    /// was ever written) and every entry, from index 1, for the caller's Raft to restart from.
    ///
    /// A torn or corrupt tail of the segment log is cut ([`PartitionLog::open_from_batches`]):
    /// it just means fewer entries. Whatever is returned is made durable (both files synced)
    /// before this returns: after a process crash, bytes never synced can still be in the page
    /// cache, and an entry handed to Raft as durable must not be lost by a later power loss.
    /// The segments are read twice: once by the log's recovery, which validates and cuts, then
    /// once here for the batches' bytes and epochs, which its record callback does not carry.
    ///
    /// `InvalidData` for a log whose first batch is not at offset 0 (segments removed from its
    /// front would shift every index) or whose leader epoch is negative (not a term).
    pub async fn open(
        dir: D,
        config: LogConfig,
    ) -> io::Result<(Self, HardState, Vec<StoredEntry>)> {
        let state = dir.open(STATE_FILE).await?;
        if state.len().await? == 0 {
            // Possibly created just now: its directory entry must survive a power loss.
            dir.sync_dir().await?;
        }
        let (seq, hard_state, durable_slot) = read_state(&state).await?;
        let (mut log, _) =
            PartitionLog::open_from_batches(dir, config, 0, |_, _, _, _, _| {}).await?;
        let mut entries: Vec<StoredEntry> = Vec::new();
        let mut bases = Vec::new();
        for seg in &log.segments {
            let (_, stop) = scan_batches(
                &seg.file,
                seg.size,
                log.config.read_chunk_bytes,
                log.config.max_batch_bytes,
                |pos, h, batch| {
                    if bases.is_empty() && h.base_offset != 0 {
                        return Err(format!(
                            "the log starts at offset {}, not 0: Raft index 1 is gone",
                            h.base_offset
                        ));
                    }
                    let epoch = i32::from_be_bytes(batch[12..16].try_into().expect("4 bytes"));
                    if epoch < 0 {
                        return Err(format!(
                            "batch at offset {} has leader epoch {epoch}: not a Raft term",
                            h.base_offset
                        ));
                    }
                    let data =
                        if is_leader_change_batch(h, batch, pos).map_err(|e| e.to_string())? {
                            Vec::new()
                        } else {
                            // Back to the bytes the entry was written with (see `append`).
                            let mut data = batch.to_vec();
                            data[0..8].fill(0);
                            data[12..16].fill(0);
                            data
                        };
                    bases.push(h.base_offset);
                    entries.push(StoredEntry {
                        index: bases.len() as u64,
                        term: epoch as u64,
                        data,
                    });
                    Ok(())
                },
            )
            .await?;
            if let Some(why) = stop {
                // A log this module did not write (not from offset 0, a negative epoch): Raft
                // must not restart from a guess. Recovery validated every batch, so nothing
                // torn or corrupt gets here.
                return Err(invalid_data(format!("raft log: {why}")));
            }
        }
        if bases.is_empty() && log.next_offset() != 0 {
            return Err(invalid_data(format!(
                "raft log: no batch, yet the log starts at offset {}",
                log.next_offset()
            )));
        }
        log.sync().await?;
        state.sync().await?;
        Ok((
            Self {
                log,
                bases,
                state,
                hard_state,
                seq,
                durable_slot,
                log_unsynced: false,
                state_unsynced: false,
            },
            hard_state,
            entries,
        ))
    }

    /// The index of the last entry (0 when the log is empty). The first index is always 1.
    pub fn last_index(&self) -> u64 {
        self.bases.len() as u64
    }

    /// The offset of index `index`'s batch in the partition's log, if it holds that index.
    pub fn base_offset(&self, index: u64) -> Option<u64> {
        let i = usize::try_from(index.checked_sub(1)?).ok()?;
        self.bases.get(i).copied()
    }

    /// The last hard state written (durable once [`Self::sync`] returned).
    pub fn hard_state(&self) -> HardState {
        self.hard_state
    }

    /// The segment log underneath, for readers (a Kafka fetch of the partition).
    pub fn log(&self) -> &PartitionLog<D> {
        &self.log
    }

    /// Check a non-empty entry's data before anything is written: one whole, CRC-valid,
    /// uncompressed v2 batch of at least one record, at base offset 0 and leader epoch 0 (so
    /// it reads back byte for byte), that recovery will accept and that is not a leader change
    /// (that would read back as an empty entry). Returns the batch's last offset delta.
    fn check_data(&self, index: u64, data: &[u8]) -> io::Result<u64> {
        let bad = |why: String| invalid_data(format!("entry {index}: {why}"));
        let h = match peek_batch(data, 0, self.log.config.max_batch_bytes) {
            Ok(Peek::Batch(h)) => h,
            Ok(Peek::Incomplete { needed }) => {
                return Err(bad(format!(
                    "{} bytes, not the whole batch of {needed}",
                    data.len()
                )))
            }
            Err(e) => return Err(bad(e.to_string())),
        };
        if h.size != data.len() {
            return Err(bad(format!(
                "{} bytes after its batch of {}",
                data.len() - h.size,
                h.size
            )));
        }
        if h.records_count < 1 {
            return Err(bad("a batch of no records".into()));
        }
        let epoch = i32::from_be_bytes(data[12..16].try_into().expect("4 bytes"));
        if h.base_offset != 0 || epoch != 0 {
            return Err(bad(format!(
                "base offset {} and leader epoch {epoch}, not 0 and 0",
                h.base_offset
            )));
        }
        // What recovery checks of each record (uncompressed, every record parses), or the next
        // open would cut this entry and everything after it.
        for_each_record(data, &h, 0, |_, _, _, _| {}).map_err(|e| bad(e.to_string()))?;
        if is_leader_change_batch(&h, data, 0).map_err(|e| bad(e.to_string()))? {
            return Err(bad(
                "a leader change batch (an empty entry is written as one)".into(),
            ));
        }
        Ok(h.last_offset_delta as u64)
    }

    /// Append `entries` (index, term, data), contiguous, cutting first whatever the log holds
    /// from the first one's index on (a conflicting suffix, Raft §5.3; the cut is durable when
    /// it returns). Unsynced until [`Self::sync`]. An empty `data` is a no-op entry, written as
    /// a LeaderChange control batch naming `leader` (-1 if unknown) and stamped `now_ms`.
    ///
    /// Refused before anything is written or cut: an index below 1, past `last_index() + 1`
    /// (a gap) or not following the previous entry, and a term above `i32::MAX` (it must fit
    /// the leader epoch), all `InvalidInput`; data that is not one batch as `check_data`
    /// describes, `InvalidData`. On an I/O error the log must be reopened, as
    /// [`PartitionLog::append`] says.
    pub async fn append(
        &mut self,
        entries: &[(u64, u64, &[u8])],
        leader: i32,
        now_ms: i64,
    ) -> io::Result<()> {
        let Some(&(first, _, _)) = entries.first() else {
            return Ok(());
        };
        let last = self.last_index();
        if first == 0 {
            return Err(invalid_input(
                "entry index 0: Raft indexes start at 1".into(),
            ));
        }
        if first > last + 1 {
            return Err(invalid_input(format!(
                "append at index {first} leaves a gap after {last}"
            )));
        }
        let cut_at = if first <= last {
            Some(self.bases[first as usize - 1])
        } else {
            None
        };
        // Every check first, offsets included, so a refused append changes nothing.
        let mut next = cut_at.unwrap_or(self.log.next_offset());
        for (i, &(index, term, data)) in entries.iter().enumerate() {
            if index != first + i as u64 {
                return Err(invalid_input(format!(
                    "entry {index} does not follow entry {}",
                    first + i as u64 - 1
                )));
            }
            if term > i32::MAX as u64 {
                return Err(invalid_input(format!(
                    "entry {index}: term {term} does not fit a leader epoch (i32)"
                )));
            }
            let delta = if data.is_empty() {
                0
            } else {
                self.check_data(index, data)?
            };
            match next.checked_add(delta) {
                Some(l) if l <= i64::MAX as u64 => next = l + 1,
                _ => {
                    return Err(io::Error::other(format!(
                        "offsets exhausted: entry {index} at offset {next}"
                    )))
                }
            }
        }
        if let Some(offset) = cut_at {
            self.log.truncate_from(offset).await?;
            self.bases.truncate(first as usize - 1);
        }
        for &(_, term, data) in entries {
            let offset = self.log.next_offset();
            let epoch = (term as i32).to_be_bytes();
            let batch = if data.is_empty() {
                let mut b = Vec::with_capacity(96);
                encode_leader_change(offset, now_ms, term as i32, leader, &mut b);
                b
            } else {
                // Neither field is covered by the batch's CRC (it starts at the attributes).
                let mut b = data.to_vec();
                b[0..8].copy_from_slice(&(offset as i64).to_be_bytes());
                b[12..16].copy_from_slice(&epoch);
                b
            };
            self.log_unsynced = true;
            self.log.append_prepared(batch).await?;
            self.bases.push(offset);
        }
        Ok(())
    }

    /// Write the hard state into the slot not holding the last durable one; nothing is written
    /// when it has not changed. A new term or vote is durable after the next [`Self::sync`]; a
    /// change of the commit index alone does not make that sync touch the state file (see the
    /// module documentation): it reaches the disk with the next term or vote, or whenever the
    /// kernel writes the page back.
    pub async fn set_hard_state(&mut self, hs: HardState) -> io::Result<()> {
        if hs == self.hard_state {
            return Ok(());
        }
        let seq = self.seq + 1;
        if (hs.term, hs.vote) != (self.hard_state.term, self.hard_state.vote) {
            self.state_unsynced = true;
        }
        // Never over `durable_slot`: a commit-only write there, torn by a crash, would leave
        // only the other slot, which may hold an older term. A failed write leaves `seq` as it
        // was, and the next write goes to the same slot again.
        let slot = 1 - self.durable_slot;
        self.state
            .write_at(slot * SLOT_SIZE, encode_slot(seq, hs))
            .await?;
        self.seq = seq;
        self.hard_state = hs;
        Ok(())
    }

    /// Make the entries and the term and vote written so far durable: one fdatasync of the
    /// active segment and one of the state file, each only if it has unsynced writes (a
    /// commit-only hard state is not one). The log goes first. A commit index found after a
    /// crash can still point past the surviving log (a commit-only write reached the disk
    /// before the entries did); the caller clamps it to the last index on restart, which is
    /// safe: the entries were committed by a majority, and the leader tells this node again.
    pub async fn sync(&mut self) -> io::Result<()> {
        if self.log_unsynced {
            self.log.sync().await?;
            self.log_unsynced = false;
        }
        if self.state_unsynced {
            self.state.sync().await?;
            self.state_unsynced = false;
            // The slot written last now holds the newest term and vote, durably.
            self.durable_slot = 1 - self.durable_slot;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{
        decode_records, encode_batch_as, encode_marker, BatchProducer, ATTR_TRANSACTIONAL,
    };
    use crate::io::MemDir;
    use crate::log::parse_segment_name;
    use futures_lite::future::block_on;

    /// Small segments, so the log rolls over several files.
    fn small() -> LogConfig {
        LogConfig {
            segment_bytes: 300,
            max_batch_bytes: 1 << 20,
            read_chunk_bytes: 97,
        }
    }

    fn open_with(dir: &MemDir, cfg: LogConfig) -> (RaftLog<MemDir>, HardState, Vec<StoredEntry>) {
        block_on(RaftLog::open(dir.clone(), cfg)).expect("the raft log opens")
    }

    fn open(dir: &MemDir) -> (RaftLog<MemDir>, HardState, Vec<StoredEntry>) {
        open_with(dir, small())
    }

    fn batch(records: &[(&str, Option<&str>)]) -> Vec<u8> {
        let recs: Vec<_> = records
            .iter()
            .map(|(k, v)| (Some(k.as_bytes()), v.map(str::as_bytes)))
            .collect();
        let mut out = Vec::new();
        encode_batch_as(0, 1_700_000_000_000, BatchProducer::NONE, &recs, &mut out);
        out
    }

    fn entry(index: u64, term: u64, data: Vec<u8>) -> StoredEntry {
        StoredEntry { index, term, data }
    }

    fn append(log: &mut RaftLog<MemDir>, entries: &[StoredEntry]) -> io::Result<()> {
        let refs: Vec<(u64, u64, &[u8])> = entries
            .iter()
            .map(|e| (e.index, e.term, e.data.as_slice()))
            .collect();
        block_on(log.append(&refs, 3, 42))
    }

    fn hs(term: u64, vote: u64, commit: u64) -> HardState {
        HardState { term, vote, commit }
    }

    /// Entries 1..=n at `term`, each a one-record batch keyed `{prefix}{index}`.
    fn run(from: u64, to: u64, term: u64, prefix: &str) -> Vec<StoredEntry> {
        (from..=to)
            .map(|i| entry(i, term, batch(&[(&format!("{prefix}{i}"), Some("v"))])))
            .collect()
    }

    /// Every kind of entry: no-ops, batches of one and several records, a transactional batch,
    /// a transaction marker (a control batch that is data), the largest term.
    fn mixed() -> Vec<StoredEntry> {
        let one = batch(&[("k1", Some("v1"))]);
        let several = batch(&[("a", Some("1")), ("b", None), ("c", Some("333"))]);
        let mut marker = Vec::new();
        encode_marker(0, 5, 4242, 3, true, 17, &mut marker);
        let mut txn = Vec::new();
        encode_batch_as(
            0,
            6,
            BatchProducer::coordinator(ATTR_TRANSACTIONAL, 4242, 3),
            &[(Some(b"t"), Some(b"x"))],
            &mut txn,
        );
        let max = i32::MAX as u64;
        vec![
            entry(1, 1, vec![]),
            entry(2, 1, one.clone()),
            entry(3, 1, several),
            entry(4, 2, vec![]),
            entry(5, 2, txn),
            entry(6, 2, marker),
            entry(7, max, vec![]),
            entry(8, max, one),
        ]
    }

    #[test]
    fn mixed_entries_read_back_as_written() {
        let dir = MemDir::new();
        let (mut log, hard, entries) = open(&dir);
        assert_eq!((hard, entries.len(), log.last_index()), (hs(0, 0, 0), 0, 0));
        let want = mixed();
        append(&mut log, &want[..3]).unwrap();
        append(&mut log, &want[3..]).unwrap();
        assert_eq!(log.last_index(), 8);
        // Index 3 holds three records (offsets 2..=4), the others one each.
        let bases: Vec<_> = (0..=9).map(|i| log.base_offset(i)).collect();
        let expect = [0, 1, 2, 5, 6, 7, 8, 9].map(Some);
        assert_eq!(bases[0], None);
        assert_eq!(&bases[1..9], &expect[..]);
        assert_eq!(bases[9], None);
        assert_eq!(log.log().next_offset(), 10);
        assert!(log.log().segment_count() > 1, "the log rolled");
        block_on(log.sync()).unwrap();
        drop(log);
        let (log, hard, entries) = open(&dir);
        assert_eq!(entries, want);
        assert_eq!((hard, log.last_index()), (hs(0, 0, 0), 8));
        assert_eq!(log.base_offset(4), Some(5));
        // And again: a reopened log appends after what it found.
        let mut log = log;
        let more = entry(9, i32::MAX as u64, batch(&[("z", None)]));
        append(&mut log, std::slice::from_ref(&more)).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        let (_, _, entries) = open(&dir);
        assert_eq!(entries.len(), 9);
        assert_eq!(entries[..8], want[..]);
        assert_eq!(entries[8], more);
    }

    #[test]
    fn the_segments_are_a_kafka_partition_log_with_terms_as_leader_epochs() {
        let dir = MemDir::new();
        let (mut log, _, _) = open(&dir);
        append(&mut log, &mixed()).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        // Every batch, as the log's own scanner reads the segment files.
        let mut names: Vec<_> = block_on(dir.list())
            .unwrap()
            .into_iter()
            .filter(|n| parse_segment_name(n).is_some())
            .collect();
        names.sort();
        assert!(names.len() > 1);
        let mut batches = Vec::new();
        for name in &names {
            let file = block_on(dir.open(name)).unwrap();
            let len = block_on(file.len()).unwrap();
            let (end, stop) = block_on(scan_batches(&file, len, 1 << 20, 1 << 20, |pos, h, b| {
                let epoch = i32::from_be_bytes(b[12..16].try_into().unwrap());
                let recs = decode_records(b, h, pos).map_err(|e| e.to_string())?;
                batches.push((h.clone(), epoch, recs));
                Ok(())
            }))
            .unwrap();
            assert_eq!((end, stop), (len, None), "{name}");
        }
        let bases: Vec<u64> = batches.iter().map(|b| b.0.base_offset).collect();
        assert_eq!(bases, [0, 1, 2, 5, 6, 7, 8, 9]);
        let mut next = 0;
        for (h, _, _) in &batches {
            assert_eq!(h.base_offset, next, "contiguous offsets");
            next = h.last_offset() + 1;
        }
        let max = i32::MAX;
        let epochs: Vec<i32> = batches.iter().map(|b| b.1).collect();
        assert_eq!(epochs, [1, 1, 1, 2, 2, 2, max, max]);
        // The no-ops are LeaderChange control batches naming leader 3, stamped `now_ms`.
        for i in [0, 3, 6] {
            let (h, _, recs) = &batches[i];
            assert!(h.is_control() && !h.is_transactional(), "batch {i}");
            assert_eq!((h.producer_id, h.records_count), (-1, 1));
            assert_eq!(recs[0].key.as_deref(), Some(&[0u8, 0, 0, 2][..]));
            assert_eq!(
                recs[0].value.as_deref(),
                Some(&[0u8, 0, 0, 0, 0, 3, 1, 1, 0][..])
            );
            assert_eq!(recs[0].timestamp, 42);
        }
        // The data batches keep their records, at their offsets.
        let keys: Vec<_> = batches[2]
            .2
            .iter()
            .map(|r| (r.offset, r.key.clone()))
            .collect();
        assert_eq!(
            keys,
            [
                (2, Some(b"a".to_vec())),
                (3, Some(b"b".to_vec())),
                (4, Some(b"c".to_vec()))
            ]
        );
        assert!(batches[5].0.is_control() && batches[5].0.is_transactional());
        // A plain PartitionLog replays the same records at the same offsets.
        let mut offsets = Vec::new();
        block_on(PartitionLog::open(dir.clone(), small(), |o, _, _, _| {
            offsets.push(o)
        }))
        .unwrap();
        assert_eq!(offsets, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_conflicting_suffix_is_cut_durably_before_the_new_entries() {
        let dir = MemDir::new();
        let (mut log, _, _) = open(&dir);
        append(&mut log, &run(1, 5, 1, "a")).unwrap();
        block_on(log.sync()).unwrap();
        // The new leader's 3..4 replace 3..5; not synced yet, and the power goes.
        let new = run(3, 4, 2, "b");
        append(&mut log, &new).unwrap();
        assert_eq!(log.last_index(), 4);
        drop(log);
        dir.crash(|_, _| 0);
        // The cut was durable when append returned: old 3..5 never come back.
        let (mut log, _, entries) = open(&dir);
        assert_eq!(entries, run(1, 2, 1, "a"));
        append(&mut log, &new).unwrap();
        block_on(log.sync()).unwrap();
        assert_eq!(
            (1..=5).map(|i| log.base_offset(i)).collect::<Vec<_>>(),
            [Some(0), Some(1), Some(2), Some(3), None]
        );
        drop(log);
        let (mut log, _, entries) = open(&dir);
        let mut want = run(1, 2, 1, "a");
        want.extend(new);
        assert_eq!(entries, want);
        // A cut at index 1 takes everything.
        append(&mut log, &[entry(1, 3, vec![])]).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        let (log, _, entries) = open(&dir);
        assert_eq!(entries, [entry(1, 3, vec![])]);
        assert_eq!(log.log().next_offset(), 1);
    }

    #[test]
    fn a_refused_append_changes_nothing() {
        let dir = MemDir::new();
        let (mut log, _, _) = open(&dir);
        let old = run(1, 5, 1, "a");
        append(&mut log, &old).unwrap();
        block_on(log.sync()).unwrap();
        let good = batch(&[("g", Some("v"))]);
        let kind = |log: &mut RaftLog<MemDir>, entries: &[StoredEntry]| {
            append(log, entries).expect_err("refused").kind()
        };
        use io::ErrorKind::{InvalidData, InvalidInput};
        // A gap, index 0, entries not following each other, a term past i32::MAX.
        assert_eq!(kind(&mut log, &[entry(7, 1, good.clone())]), InvalidInput);
        assert_eq!(kind(&mut log, &[entry(0, 1, good.clone())]), InvalidInput);
        let skip = [entry(3, 2, good.clone()), entry(5, 2, good.clone())];
        assert_eq!(kind(&mut log, &skip), InvalidInput);
        let big = entry(6, i32::MAX as u64 + 1, good.clone());
        assert_eq!(kind(&mut log, &[big]), InvalidInput);
        // Data that is not one whole batch this log can read back byte for byte.
        let mut bad: Vec<(&str, Vec<u8>)> = vec![
            ("garbage", b"not a record batch at all, no".to_vec()),
            ("torn", good[..good.len() - 1].to_vec()),
            ("trailing", [good.clone(), vec![0]].concat()),
        ];
        let mut at7 = Vec::new();
        encode_batch_as(7, 1, BatchProducer::NONE, &[(Some(b"k"), None)], &mut at7);
        bad.push(("base offset 7", at7));
        let mut epoch = good.clone();
        epoch[12..16].copy_from_slice(&1i32.to_be_bytes());
        bad.push(("leader epoch 1", epoch));
        let restamp = |mut b: Vec<u8>| {
            let crc = crc32c::crc32c(&b[21..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
            b
        };
        let mut empty = good.clone();
        empty[57..61].copy_from_slice(&0i32.to_be_bytes());
        bad.push(("no records", restamp(empty)));
        let mut compressed = good.clone();
        compressed[22] |= 1; // gzip
        bad.push(("compressed", restamp(compressed)));
        let mut leader_change = Vec::new();
        encode_leader_change(0, 1, 0, 1, &mut leader_change);
        bad.push(("leader change", leader_change));
        for (what, data) in &bad {
            // Behind a valid entry that would cut the log: the cut must not happen either.
            let entries = [entry(3, 2, good.clone()), entry(4, 2, data.clone())];
            assert_eq!(kind(&mut log, &entries), InvalidData, "{what}");
        }
        assert_eq!(log.last_index(), 5);
        drop(log);
        let (_, _, entries) = open(&dir);
        assert_eq!(entries, old);
    }

    #[test]
    fn a_log_this_module_did_not_write_is_refused_at_open() {
        let put = |dir: &MemDir, base: u64, batch: Vec<u8>| {
            block_on(async {
                let f = dir.open(&crate::log::segment_name(base)).await?;
                f.write_at(0, batch).await?;
                f.sync().await?;
                dir.sync_dir().await
            })
            .unwrap()
        };
        let open_err = |dir: &MemDir| match block_on(RaftLog::open(dir.clone(), small())) {
            Ok(_) => panic!("opened"),
            Err(e) => e,
        };
        // A Kafka producer's "no epoch" (-1) is not a term.
        let dir = MemDir::new();
        let mut b = batch(&[("k", None)]);
        b[12..16].copy_from_slice(&(-1i32).to_be_bytes());
        put(&dir, 0, b);
        let err = open_err(&dir);
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("epoch -1"), "{err}");
        // Segments removed from the front: index 1 would be some later entry.
        let dir = MemDir::new();
        let mut b = Vec::new();
        encode_batch_as(10, 1, BatchProducer::NONE, &[(Some(b"k"), None)], &mut b);
        put(&dir, 10, b);
        let err = open_err(&dir);
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("offset 10"), "{err}");
    }

    #[test]
    fn the_last_hard_state_written_comes_back() {
        let dir = MemDir::new();
        let (mut log, hard, _) = open(&dir);
        assert_eq!(hard, hs(0, 0, 0));
        for s in [hs(1, 1, 0), hs(2, 2, 3), hs(2, 2, 5)] {
            block_on(log.set_hard_state(s)).unwrap();
            block_on(log.sync()).unwrap();
        }
        assert_eq!(log.hard_state(), hs(2, 2, 5));
        // An unchanged hard state is not written again.
        let ops = dir.ops();
        block_on(log.set_hard_state(hs(2, 2, 5))).unwrap();
        block_on(log.sync()).unwrap();
        assert_eq!(dir.ops(), ops);
        drop(log);
        let (mut log, hard, _) = open(&dir);
        assert_eq!(hard, hs(2, 2, 5));
        // Written, not synced, and the process stops: the page cache still has it, and the
        // open makes it durable before handing it out.
        block_on(log.set_hard_state(hs(3, 0, 5))).unwrap();
        drop(log);
        let (log, hard, _) = open(&dir);
        assert_eq!(hard, hs(3, 0, 5));
        drop(log);
        dir.crash(|_, _| 0);
        let (_, hard, _) = open(&dir);
        assert_eq!(hard, hs(3, 0, 5));
    }

    #[test]
    fn a_crash_before_the_sync_brings_back_the_previous_hard_state() {
        let a = hs(4, 2, 10);
        let b = hs(5, 3, 10);
        // How much of the unsynced bytes survive: none, B's slot torn, all of it.
        for (keep_all_but, want) in [(None, a), (Some(10), a), (Some(0), b)] {
            let dir = MemDir::new();
            let (mut log, _, _) = open(&dir);
            block_on(log.set_hard_state(a)).unwrap();
            block_on(log.sync()).unwrap();
            block_on(log.set_hard_state(b)).unwrap();
            drop(log);
            dir.crash(|_, n| keep_all_but.map_or(0, |k| n - k));
            let (mut log, hard, _) = open(&dir);
            assert_eq!(hard, want, "{keep_all_but:?}");
            // An unsynced overwrite of the older slot is lost whole: the newer one stays.
            block_on(log.set_hard_state(hs(9, 9, 9))).unwrap();
            drop(log);
            dir.crash(|_, _| 0);
            let (_, hard, _) = open(&dir);
            assert_eq!(hard, want, "{keep_all_but:?}, second crash");
        }
    }

    #[test]
    fn a_torn_slot_falls_back_to_the_other_one() {
        let dir = MemDir::new();
        let (mut log, _, _) = open(&dir);
        // Each synced: seq 1 → slot 0, seq 2 → slot 1, seq 3 → slot 0.
        for s in [hs(1, 1, 0), hs(2, 2, 0), hs(3, 3, 1)] {
            block_on(log.set_hard_state(s)).unwrap();
            block_on(log.sync()).unwrap();
        }
        drop(log);
        // The write of seq 3 tore: its slot's tail never reached the disk.
        dir.with_file(STATE_FILE, |b| b[20..36].fill(0)).unwrap();
        let (mut log, hard, _) = open(&dir);
        assert_eq!(hard, hs(2, 2, 0));
        // The next write goes over the torn slot, not over the one just read.
        block_on(log.set_hard_state(hs(4, 0, 1))).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        let slot1 = dir
            .with_file(STATE_FILE, |b| b[4096..4096 + 36].to_vec())
            .unwrap();
        assert_eq!(decode_slot(&slot1), Some((2, hs(2, 2, 0))));
        let (_, hard, _) = open(&dir);
        assert_eq!(hard, hs(4, 0, 1));
        // A flipped bit in the newer slot (seq 3, slot 0): the older one again.
        dir.with_file(STATE_FILE, |b| b[9] ^= 1).unwrap();
        let (_, hard, _) = open(&dir);
        assert_eq!(hard, hs(2, 2, 0));
    }

    #[test]
    fn a_commit_only_hard_state_is_not_synced_and_never_costs_the_term() {
        let slot = |dir: &MemDir, i: usize| {
            dir.with_file(STATE_FILE, |b| decode_slot(&b[i * 4096..]))
                .unwrap()
        };
        let dir = MemDir::new();
        let (mut log, _, _) = open(&dir);
        block_on(log.set_hard_state(hs(3, 2, 0))).unwrap();
        block_on(log.sync()).unwrap();
        // Only the commit index moves: the sync leaves the state file alone, so a power loss
        // takes the new commit index (the model loses unsynced overwrites whole) and keeps the
        // term and vote.
        block_on(log.set_hard_state(hs(3, 2, 5))).unwrap();
        block_on(log.sync()).unwrap();
        assert_eq!(log.hard_state(), hs(3, 2, 5));
        dir.crash(|_, _| 0);
        let (mut log, hard, _) = open(&dir);
        assert_eq!(hard, hs(3, 2, 0));
        // Commit-only writes go over the other slot, never the durable one; the kernel writing
        // them back (made durable here by hand) brings the newer commit index back.
        for c in [6, 7, 8] {
            block_on(log.set_hard_state(hs(3, 2, c))).unwrap();
            block_on(log.sync()).unwrap();
        }
        drop(log);
        dir.with_file(STATE_FILE, |_| ()).unwrap();
        assert_eq!(slot(&dir, 0), Some((1, hs(3, 2, 0))));
        assert_eq!(slot(&dir, 1), Some((4, hs(3, 2, 8))));
        let (mut log, hard, _) = open(&dir);
        assert_eq!(hard, hs(3, 2, 8));
        // A new term is synced; the next commit-only write then goes over the older slot.
        block_on(log.set_hard_state(hs(4, 0, 8))).unwrap();
        block_on(log.sync()).unwrap();
        block_on(log.set_hard_state(hs(4, 0, 9))).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        dir.crash(|_, _| 0);
        let (_, hard, _) = open(&dir);
        assert_eq!(hard, hs(4, 0, 8));
    }

    #[test]
    fn unsynced_entries_are_lost_in_a_crash_and_synced_ones_kept() {
        // One segment, so the unsynced bytes are the tail of one file.
        let cfg = LogConfig::default();
        let tail = run(4, 5, 1, "x"); // two batches of the same size
        let size = tail[0].data.len();
        assert_eq!(tail[1].data.len(), size);
        // How many unsynced bytes survive → entries found.
        for (keep, found) in [
            (0, 3),
            (size - 1, 3),
            (size, 4),
            (2 * size - 1, 4),
            (2 * size, 5),
        ] {
            let dir = MemDir::new();
            let (mut log, _, _) = open_with(&dir, cfg.clone());
            append(&mut log, &run(1, 3, 1, "x")).unwrap();
            block_on(log.sync()).unwrap();
            append(&mut log, &tail).unwrap();
            drop(log);
            dir.crash(|_, n| {
                assert_eq!(n, 2 * size);
                keep
            });
            let (mut log, _, entries) = open_with(&dir, cfg.clone());
            assert_eq!(entries, run(1, found, 1, "x"), "{keep} bytes kept");
            // The log goes on after what survived.
            let next = entry(found + 1, 2, vec![]);
            append(&mut log, std::slice::from_ref(&next)).unwrap();
            block_on(log.sync()).unwrap();
            assert_eq!(log.base_offset(found + 1), Some(found));
        }
        // A process crash (no power loss): the unsynced entries are still in the page cache;
        // the open that returns them makes them durable.
        let dir = MemDir::new();
        let (mut log, _, _) = open_with(&dir, cfg.clone());
        append(&mut log, &run(1, 5, 1, "x")).unwrap();
        drop(log);
        let (log, _, entries) = open_with(&dir, cfg.clone());
        assert_eq!(entries.len(), 5);
        drop(log);
        dir.crash(|_, _| 0);
        let (_, _, entries) = open_with(&dir, cfg);
        assert_eq!(entries, run(1, 5, 1, "x"));
    }
}
