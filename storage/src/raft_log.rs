//! The durable Raft log of one replicated partition, kept in the partition's own segment log so
//! Kafka's tools read Raft's persistence as an ordinary partition (docs/replication.md, "Not
//! built yet", step 1).
//!
//! Owns: the mapping between Raft entries (index, term, data) and the batches of a
//! [`PartitionLog`], the partition's hard state (term, vote, commit) in a small file of its own,
//! and the Raft snapshot that compacts the log. The entry's term is the batch's
//! partitionLeaderEpoch (Kafka's meaning for that field); a non-empty entry's data is a Kafka
//! record batch (v2, base offset 0, as [`crate::batch::encode_batch_as`] writes it) stored with
//! its base offset and leader epoch rewritten; an empty entry (a new leader's no-op) is stored
//! as a KRaft LeaderChange control batch ([`crate::batch::encode_leader_change`]), and a
//! configuration change as a KRaft voters control batch naming the voters it leads to, the
//! caller's encoding of the change in a tagged field ([`crate::batch::encode_voters_change`]),
//! so Kafka's tools read it. A conflicting
//! suffix is cut with [`PartitionLog::truncate_from`]. The hard state lives in [`STATE_FILE`],
//! two checksummed slots written in place, never over the last durable one, so an update never
//! destroys the previous durable value.
//!
//! Snapshots (log compaction). [`SNAPSHOT_FILE`] holds the last snapshot: its index *S*, its
//! term, the caller's state machine data, the caller's encoding of the configuration as of *S*
//! (its membership, which the entries it replaces no longer say), and a start offset *B*. Batches whose offsets are all
//! below *B* are not part of the Raft log (they are covered by the snapshot, or were discarded
//! when a leader's snapshot was installed) and are skipped; the first batch at *B* is index
//! *S* + 1, and each later batch the next index. Without a snapshot *S* = 0 and *B* = 0: index
//! *i* is the *i*-th batch of the log, whose first batch must then be at offset 0. A batch
//! straddling *B*, or a first batch past *B* (an offset gap after the snapshot), is a log this
//! module did not write. [`RaftLog::compact`] (the caller's state machine snapshotted at *S*:
//! *B* is the offset of entry *S* + 1) and [`RaftLog::install`] (a leader's snapshot replaces the
//! whole log: *B* is the log's end) write the snapshot file crash-safely (a temporary file,
//! synced, renamed over [`SNAPSHOT_FILE`], the directory synced) *before* any segment goes;
//! then whole segments wholly below *B* are removed ([`PartitionLog::remove_segments_before`];
//! the active segment always stays, so the bytes below *B* in it stay too, skipped). A crash
//! between the two leaves extra segments below *B*: the next open skips them and removes them.
//! A crash before the rename leaves the previous snapshot (or none) and a leftover temporary
//! file, which open removes. Nothing else may remove or rewrite the segments of a Raft log (key
//! compaction, retention): a batch that disappears at or after *B* shifts every later index.
//!
//! Only the term and the vote must be durable before Raft acts on them (a node must never vote
//! twice in a term or forget a term it took part in); the commit index is volatile state in Raft
//! (Ongaro's thesis, Figure 3.1: commitIndex is re-learnt from the leader). So a hard state that
//! changes only the commit index is written without making the next [`RaftLog::sync`] fdatasync
//! the state file: most writes of a busy partition (a follower's append advances its commit
//! index every time) then cost one fdatasync, of the log, instead of two. Such a write goes to
//! the slot that does not hold the last *synced* state, so whatever survives a crash is either
//! that synced state or a newer one with the same term and vote. After a compaction or an
//! install the caller stores a commit index at least the snapshot's index (a snapshot holds only
//! committed entries); since a commit-only write may not survive a crash, a restarted caller
//! also raises the commit index it finds to the snapshot's index.
//!
//! Must not: decide what is committed, what is acknowledged, who leads or whom to vote for (the
//! caller's Raft does); take snapshots of the state machine or decide when to (the caller hands
//! the data over); talk to the network; read a clock (the caller passes `now_ms`); know the
//! Raft library (entries are plain (index, term, data), no `raft` crate).

use crate::batch::{
    encode_leader_change, encode_voters_change, for_each_record, is_leader_change, is_voters,
    parse_voters_change, peek_batch, Peek,
};
use crate::io::{LogDir, LogFile};
use crate::log::{scan_batches, LogConfig, PartitionLog};
use std::io;

/// The hard state's file, next to the segments (not a segment name, so the log ignores it).
pub const STATE_FILE: &str = "raft-state";

/// The snapshot's file, next to the segments: magic `RLSN`, version 2 (u8), then big-endian
/// index u64, term u64, start offset u64 (*B*, see the module documentation), data length u32,
/// the data, configuration length u32, the configuration (the caller's encoding of the
/// membership as of the snapshot; empty when it stores none), and CRC-32C (u32) of everything
/// before it. Version 1, read too, has no configuration: it ends with the data. Replaced whole
/// (see [`SNAPSHOT_TMP_FILE`]), never written in place.
pub const SNAPSHOT_FILE: &str = "raft-snapshot";

/// Where a new snapshot is written and synced before it is renamed over [`SNAPSHOT_FILE`]; one
/// left over by a crash is removed at open.
pub const SNAPSHOT_TMP_FILE: &str = "raft-snapshot.tmp";

const SNAPSHOT_MAGIC: &[u8; 4] = b"RLSN";
const SNAPSHOT_VERSION: u8 = 2;
/// Bytes of a snapshot file before its data: magic, version, index, term, start, length.
const SNAPSHOT_HEADER: usize = 4 + 1 + 8 + 8 + 8 + 4;

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
/// index known committed. After [`RaftLog::compact`] or [`RaftLog::install`] the caller stores a
/// commit index at least the snapshot's index.
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
    /// Some for a configuration change: `data` is the change in the caller's own encoding and
    /// this the voters it leads to (see [`EntryRef::voters`]).
    pub voters: Option<Vec<i32>>,
}

/// One entry to append: `data` a record batch, or empty for a no-op; with `voters`, a
/// configuration change instead, whose `data` is the caller's encoding of the change (any
/// bytes, kept as they are) and `voters` the voters of the configuration it leads to, written
/// as a KRaft voters control batch ([`crate::batch::encode_voters_change`]) so Kafka's tools
/// show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub index: u64,
    pub term: u64,
    pub data: &'a [u8],
    pub voters: Option<&'a [i32]>,
}

impl StoredEntry {
    pub fn as_ref(&self) -> EntryRef<'_> {
        EntryRef {
            index: self.index,
            term: self.term,
            data: &self.data,
            voters: self.voters.as_deref(),
        }
    }
}

/// The snapshot found at open: the caller's state machine `data` as of entry `index`, whose
/// term was `term`, and the configuration then in force as the caller encoded it (`conf`;
/// empty when none was stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSnapshot {
    pub index: u64,
    pub term: u64,
    pub data: Vec<u8>,
    pub conf: Vec<u8>,
}

/// The Raft log and hard state of one partition (see the module documentation).
pub struct RaftLog<D: LogDir> {
    log: PartitionLog<D>,
    /// The index of `bases[0]`: the snapshot's index + 1 (1 without a snapshot).
    first_index: u64,
    /// `bases[i - first_index]` is the base offset of index `i`'s batch, `terms[i - first_index]`
    /// its term.
    bases: Vec<u64>,
    terms: Vec<u64>,
    /// (index, term) of the snapshot in [`SNAPSHOT_FILE`], if any.
    snapshot: Option<(u64, u64)>,
    state: D::File,
    /// The last hard state written (durable once synced) and its slot's sequence number (0 =
    /// none written yet).
    hard_state: HardState,
    seq: u64,
    /// The slot holding the last hard state known durable: every write goes to the other one.
    durable_slot: u64,
    log_unsynced: bool,
    state_unsynced: bool,
    /// The state file was written since its last sync (a commit-only write, or one waiting
    /// for [`RaftLog::sync`]).
    state_written: bool,
}

fn invalid_input(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

fn invalid_data(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// What a batch of this module's own kinds stands for (everything else is a record batch).
#[derive(Debug, PartialEq, Eq)]
enum Special {
    /// A leader change control batch: how an empty entry is stored.
    NoOp,
    /// A voters control batch: how a configuration change is stored (voters, change).
    Voters(Vec<i32>, Vec<u8>),
}

/// Whether a batch is one of [`Special`]'s (a control batch of one record whose key is a
/// LeaderChange or a KRaft voters record). `Err` when the batch's records do not parse, or a
/// voters record is not one [`crate::batch::encode_voters_change`] wrote.
fn special(
    h: &crate::batch::BatchHeader,
    batch: &[u8],
    pos: u64,
) -> Result<Option<Special>, String> {
    if !h.is_control() || h.records_count != 1 {
        return Ok(None);
    }
    let mut found = Ok(None);
    for_each_record(batch, h, pos, |_, _, k, v| {
        found = if is_leader_change(k) {
            Ok(Some(Special::NoOp))
        } else if is_voters(k) {
            parse_voters_change(v.unwrap_or_default())
                .map(|(voters, change)| Some(Special::Voters(voters, change)))
                .map_err(|why| format!("voters record at offset {}: {why}", h.base_offset))
        } else {
            Ok(None)
        }
    })
    .map_err(|e| e.to_string())?;
    found
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

/// The bytes of [`SNAPSHOT_FILE`] (see there). `InvalidInput` for data or a configuration of
/// 4 GiB or more.
fn encode_snapshot(
    index: u64,
    term: u64,
    start: u64,
    data: &[u8],
    conf: &[u8],
) -> io::Result<Vec<u8>> {
    let length = |part: &[u8], what: &str| {
        u32::try_from(part.len()).map_err(|_| {
            invalid_input(format!(
                "snapshot at index {index}: {} bytes of {what}, more than a u32 length",
                part.len()
            ))
        })
    };
    let (len, conf_len) = (length(data, "data")?, length(conf, "configuration")?);
    let mut b = Vec::with_capacity(SNAPSHOT_HEADER + data.len() + 4 + conf.len() + 4);
    b.extend_from_slice(SNAPSHOT_MAGIC);
    b.push(SNAPSHOT_VERSION);
    for v in [index, term, start] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.extend_from_slice(&len.to_be_bytes());
    b.extend_from_slice(data);
    b.extend_from_slice(&conf_len.to_be_bytes());
    b.extend_from_slice(conf);
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    Ok(b)
}

/// A whole, CRC-valid snapshot file: (snapshot, start offset), or why it is not one.
fn decode_snapshot(b: &[u8]) -> Result<(StoredSnapshot, u64), String> {
    if b.len() < SNAPSHOT_HEADER + 4 {
        return Err(format!("{} bytes, shorter than any snapshot", b.len()));
    }
    let (body, crc) = b.split_at(b.len() - 4);
    let crc = u32::from_be_bytes(crc.try_into().expect("4 bytes"));
    if crc != crc32c::crc32c(body) {
        return Err("CRC mismatch".into());
    }
    let version = body[4];
    if &body[..4] != SNAPSHOT_MAGIC || !(1..=SNAPSHOT_VERSION).contains(&version) {
        return Err(format!(
            "magic {:?} version {version}, not {SNAPSHOT_MAGIC:?} version 1 to {SNAPSHOT_VERSION}",
            &body[..4],
        ));
    }
    let word = |at: usize| u64::from_be_bytes(body[at..at + 8].try_into().expect("8 bytes"));
    let (index, term, start) = (word(5), word(13), word(21));
    let len = u32::from_be_bytes(body[29..33].try_into().expect("4 bytes")) as usize;
    let rest = body.len() - SNAPSHOT_HEADER;
    let data_end = SNAPSHOT_HEADER + len;
    let conf = match version {
        1 if len == rest => Vec::new(),
        1 => return Err(format!("data length {len}, but {rest} bytes of data")),
        _ => {
            if rest < 4 || len > rest - 4 {
                return Err(format!(
                    "data length {len}, but {rest} bytes of data and configuration"
                ));
            }
            let conf_len =
                u32::from_be_bytes(body[data_end..data_end + 4].try_into().expect("4 bytes"))
                    as usize;
            if conf_len != rest - len - 4 {
                return Err(format!(
                    "configuration length {conf_len}, but {} bytes of it",
                    rest - len - 4
                ));
            }
            body[data_end + 4..].to_vec()
        }
    };
    if index == u64::MAX {
        return Err("index u64::MAX leaves no index for the next entry".into());
    }
    let snapshot = StoredSnapshot {
        index,
        term,
        data: body[SNAPSHOT_HEADER..data_end].to_vec(),
        conf,
    };
    Ok((snapshot, start))
}

impl<D: LogDir> RaftLog<D> {
    /// Open (or create) the Raft log in `dir`. Returns the log, the hard state (zeros when none
    /// was ever written), the snapshot if one was written, and every entry after it (from index
    /// 1 without a snapshot), for the caller's Raft to restart from.
    ///
    /// A torn or corrupt tail of the segment log is cut ([`PartitionLog::open_from_batches`]):
    /// it just means fewer entries. Whatever is returned is made durable (both files synced)
    /// before this returns: after a process crash, bytes never synced can still be in the page
    /// cache, and an entry handed to Raft as durable must not be lost by a later power loss.
    /// The segments are read twice: once by the log's recovery, which validates and cuts, then
    /// once here for the batches' bytes and epochs, which its record callback does not carry.
    /// Segments wholly below the snapshot's start offset (left by a crash between writing the
    /// snapshot and removing them) are removed; a leftover [`SNAPSHOT_TMP_FILE`] too.
    ///
    /// `InvalidData` for a snapshot file that is not whole and CRC-valid (it is renamed into
    /// place only once synced, so that is corruption, not a torn write); for a log whose first
    /// batch is not at offset 0 without a snapshot, or, with one, whose first batch from the
    /// snapshot's start offset on is not at that offset or that has a batch straddling it
    /// (entries would be missing or shifted); and for a batch whose leader epoch is negative
    /// (not a term).
    pub async fn open(
        dir: D,
        config: LogConfig,
    ) -> io::Result<(Self, HardState, Option<StoredSnapshot>, Vec<StoredEntry>)> {
        let state = dir.open(STATE_FILE).await?;
        if state.len().await? == 0 {
            // Possibly created just now: its directory entry must survive a power loss.
            dir.sync_dir().await?;
        }
        let (seq, hard_state, durable_slot) = read_state(&state).await?;
        // (Opening a file creates it: whether there is a snapshot is a matter of the listing.)
        let names = dir.list().await?;
        if names.iter().any(|n| n == SNAPSHOT_TMP_FILE) {
            // A crash before the rename: the snapshot file (or its absence) is still the last
            // one written whole. Whether the removal is durable does not matter.
            dir.remove(SNAPSHOT_TMP_FILE).await?;
        }
        let (snapshot, start) = if names.iter().any(|n| n == SNAPSHOT_FILE) {
            let file = dir.open(SNAPSHOT_FILE).await?;
            let len = file.len().await?;
            let bytes = file.read_at(0, len as usize).await?;
            let (snapshot, start) = decode_snapshot(&bytes)
                .map_err(|why| invalid_data(format!("raft log: {SNAPSHOT_FILE}: {why}")))?;
            (Some(snapshot), start)
        } else {
            (None, 0)
        };
        let first_index = snapshot.as_ref().map_or(1, |s| s.index + 1);
        let (mut log, _) =
            PartitionLog::open_from_batches(dir, config, start, |_, _, _, _, _| {}).await?;
        let mut entries: Vec<StoredEntry> = Vec::new();
        let mut bases = Vec::new();
        let mut terms = Vec::new();
        for seg in &log.segments {
            let (_, stop) = scan_batches(
                &seg.file,
                seg.size,
                log.config.read_chunk_bytes,
                log.config.max_batch_bytes,
                |pos, h, batch| {
                    if h.last_offset() < start {
                        return Ok(()); // covered by the snapshot
                    }
                    if h.base_offset < start {
                        return Err(format!(
                            "batch at offsets {}..={} straddles the snapshot's start offset \
                             {start}",
                            h.base_offset,
                            h.last_offset()
                        ));
                    }
                    if bases.is_empty() && h.base_offset != start {
                        return Err(if snapshot.is_some() {
                            format!(
                                "the first batch after the snapshot is at offset {}, not \
                                 {start}: Raft index {first_index} is gone",
                                h.base_offset
                            )
                        } else {
                            format!(
                                "the log starts at offset {}, not 0: Raft index 1 is gone",
                                h.base_offset
                            )
                        });
                    }
                    let epoch = i32::from_be_bytes(batch[12..16].try_into().expect("4 bytes"));
                    if epoch < 0 {
                        return Err(format!(
                            "batch at offset {} has leader epoch {epoch}: not a Raft term",
                            h.base_offset
                        ));
                    }
                    let (data, voters) = match special(h, batch, pos)? {
                        Some(Special::NoOp) => (Vec::new(), None),
                        Some(Special::Voters(voters, change)) => (change, Some(voters)),
                        None => {
                            // Back to the bytes the entry was written with (see `append`).
                            let mut data = batch.to_vec();
                            data[0..8].fill(0);
                            data[12..16].fill(0);
                            (data, None)
                        }
                    };
                    entries.push(StoredEntry {
                        index: first_index + bases.len() as u64,
                        term: epoch as u64,
                        data,
                        voters,
                    });
                    bases.push(h.base_offset);
                    terms.push(epoch as u64);
                    Ok(())
                },
            )
            .await?;
            if let Some(why) = stop {
                // A log this module did not write (not from the snapshot's start offset, a
                // negative epoch): Raft must not restart from a guess. Recovery validated every
                // batch, so nothing torn or corrupt gets here.
                return Err(invalid_data(format!("raft log: {why}")));
            }
        }
        if bases.is_empty() && log.next_offset() != start {
            return Err(invalid_data(format!(
                "raft log: no batch from offset {start} on, yet the log's next offset is {}",
                log.next_offset()
            )));
        }
        // Whole segments the snapshot covers, left by a crash before `compact` or `install`
        // removed them.
        log.remove_segments_before(start).await?;
        log.sync().await?;
        state.sync().await?;
        Ok((
            Self {
                log,
                first_index,
                bases,
                terms,
                snapshot: snapshot.as_ref().map(|s| (s.index, s.term)),
                state,
                hard_state,
                seq,
                durable_slot,
                log_unsynced: false,
                state_unsynced: false,
                state_written: false,
            },
            hard_state,
            snapshot,
            entries,
        ))
    }

    /// The index of the first entry the log holds or will hold: the snapshot's index + 1, or 1
    /// without a snapshot.
    pub fn first_index(&self) -> u64 {
        self.first_index
    }

    /// The index of the last entry: the snapshot's index (0 without one) when the log holds no
    /// entry after it.
    pub fn last_index(&self) -> u64 {
        self.first_index - 1 + self.bases.len() as u64
    }

    /// The offset of index `index`'s batch in the partition's log, if it holds that index
    /// (never for an index the snapshot covers).
    pub fn base_offset(&self, index: u64) -> Option<u64> {
        let i = usize::try_from(index.checked_sub(self.first_index)?).ok()?;
        self.bases.get(i).copied()
    }

    /// The term of entry `index`: of an entry the log holds, or of the snapshot's last entry.
    pub fn term(&self, index: u64) -> Option<u64> {
        match self.snapshot {
            Some((i, term)) if i == index => Some(term),
            _ => {
                let i = usize::try_from(index.checked_sub(self.first_index)?).ok()?;
                self.terms.get(i).copied()
            }
        }
    }

    /// (index, term) of the current snapshot, if one was written (the caller keeps its data).
    pub fn snapshot(&self) -> Option<(u64, u64)> {
        self.snapshot
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
        // Either would read back as another kind of entry.
        let mut special = None;
        if h.is_control() && h.records_count == 1 {
            for_each_record(data, &h, 0, |_, _, k, _| {
                if is_leader_change(k) {
                    special = Some("a leader change batch (an empty entry is written as one)");
                } else if is_voters(k) {
                    special = Some("a voters batch (a configuration change is written as one)");
                }
            })
            .map_err(|e| bad(e.to_string()))?;
        }
        if let Some(why) = special {
            return Err(bad(why.into()));
        }
        Ok(h.last_offset_delta as u64)
    }

    /// Append `entries`, contiguous, cutting first whatever the log holds from the first one's
    /// index on (a conflicting suffix, Raft §5.3; the cut is durable when it returns). Unsynced
    /// until [`Self::sync`]. An empty `data` is a no-op entry, written as a LeaderChange control
    /// batch naming `leader` (-1 if unknown) and stamped `now_ms`; a configuration change
    /// (`voters`) a voters control batch stamped `now_ms`.
    ///
    /// Refused before anything is written or cut: an index below [`Self::first_index`] (0, or
    /// one the snapshot covers: the cut never reaches into it), past `last_index() + 1` (a gap)
    /// or not following the previous entry, a term above `i32::MAX` (it must fit the leader
    /// epoch), a change naming more than [`crate::batch::MAX_VOTERS_IN_RECORD`] voters, all
    /// `InvalidInput`; data that is not one batch as `check_data` describes, `InvalidData`. On an I/O error the log must be reopened, as [`PartitionLog::append`]
    /// says.
    pub async fn append(
        &mut self,
        entries: &[EntryRef<'_>],
        leader: i32,
        now_ms: i64,
    ) -> io::Result<()> {
        let Some(first) = entries.first().map(|e| e.index) else {
            return Ok(());
        };
        let last = self.last_index();
        if first == 0 {
            return Err(invalid_input(
                "entry index 0: Raft indexes start at 1".into(),
            ));
        }
        if first < self.first_index {
            return Err(invalid_input(format!(
                "append at index {first}: the snapshot covers up to {}",
                self.first_index - 1
            )));
        }
        if first > last + 1 {
            return Err(invalid_input(format!(
                "append at index {first} leaves a gap after {last}"
            )));
        }
        let keep = (first - self.first_index) as usize;
        let cut_at = self.bases.get(keep).copied();
        // Every check first, offsets included, so a refused append changes nothing.
        let mut next = cut_at.unwrap_or(self.log.next_offset());
        for (
            i,
            &EntryRef {
                index,
                term,
                data,
                voters,
            },
        ) in entries.iter().enumerate()
        {
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
            let delta = match voters {
                Some(v) if v.len() > crate::batch::MAX_VOTERS_IN_RECORD => {
                    return Err(invalid_input(format!(
                        "entry {index}: {} voters, more than a voters record holds",
                        v.len()
                    )))
                }
                Some(_) => 0,
                None if data.is_empty() => 0,
                None => self.check_data(index, data)?,
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
            self.bases.truncate(keep);
            self.terms.truncate(keep);
        }
        for &EntryRef {
            term, data, voters, ..
        } in entries
        {
            let offset = self.log.next_offset();
            let epoch = (term as i32).to_be_bytes();
            let batch = if let Some(voters) = voters {
                let mut b = Vec::with_capacity(96 + voters.len() * 27 + data.len());
                encode_voters_change(offset, now_ms, term as i32, voters, data, &mut b);
                b
            } else if data.is_empty() {
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
            self.terms.push(term);
        }
        Ok(())
    }

    /// The caller's state machine holds `data`, a snapshot of every entry up to `index`, whose
    /// term is `term`, and `conf` is the configuration as of `index` in the caller's encoding
    /// (empty: none stored): make it the log's snapshot and drop the entries it covers. The snapshot
    /// file is durable before anything is dropped; then whole segments below entry `index + 1`'s
    /// offset (the log's end when `index` is the last entry) are removed. The log goes on
    /// from `index + 1`: entries after `index` stay, and appends continue as before. The caller
    /// then stores a commit index at least `index` (it applied `index`, so it is committed).
    ///
    /// `InvalidInput` before anything is written: an `index` the snapshot already covers or
    /// past [`Self::last_index`], a `term` that is not entry `index`'s, data of 4 GiB or more.
    /// On an I/O error the log must be reopened.
    pub async fn compact(
        &mut self,
        index: u64,
        term: u64,
        data: &[u8],
        conf: &[u8],
    ) -> io::Result<()> {
        let last = self.last_index();
        if index < self.first_index || index > last {
            return Err(invalid_input(format!(
                "snapshot at index {index}: the log holds entries {}..={last}",
                self.first_index
            )));
        }
        let at = (index - self.first_index) as usize;
        if self.terms[at] != term {
            return Err(invalid_input(format!(
                "snapshot at index {index} of term {term}: entry {index} is of term {}",
                self.terms[at]
            )));
        }
        let start = match self.bases.get(at + 1) {
            Some(&offset) => offset,
            None => self.log.next_offset(),
        };
        self.write_snapshot(index, term, start, data, conf).await?;
        self.bases.drain(..=at);
        self.terms.drain(..=at);
        self.first_index = index + 1;
        self.snapshot = Some((index, term));
        self.log.remove_segments_before(start).await?;
        Ok(())
    }

    /// Install a leader's snapshot: `data` holds every entry up to `index`, whose term is
    /// `term`, `conf` the configuration as of `index` (as in [`Self::compact`]). Every entry the log held is discarded, even those after `index` (Raft's restore
    /// replaces the whole log); the next entry is `index + 1`, appended at the log's current
    /// end offset (the discarded batches stay in the active segment, below the snapshot's start
    /// offset, skipped at open). The snapshot file is durable before anything is dropped; then
    /// every segment but the active one is removed. The caller then stores a commit index at
    /// least `index`.
    ///
    /// `InvalidInput` before anything is written: an `index` below the current snapshot's (an
    /// older snapshot) or `u64::MAX`, data of 4 GiB or more. On an I/O error the log must be
    /// reopened.
    pub async fn install(
        &mut self,
        index: u64,
        term: u64,
        data: &[u8],
        conf: &[u8],
    ) -> io::Result<()> {
        if index < self.first_index - 1 || index == u64::MAX {
            return Err(invalid_input(format!(
                "snapshot at index {index}: the current snapshot covers up to {}",
                self.first_index - 1
            )));
        }
        let start = self.log.next_offset();
        self.write_snapshot(index, term, start, data, conf).await?;
        self.bases.clear();
        self.terms.clear();
        self.first_index = index + 1;
        self.snapshot = Some((index, term));
        self.log.remove_segments_before(start).await?;
        Ok(())
    }

    /// Replace [`SNAPSHOT_FILE`] durably: the whole content into [`SNAPSHOT_TMP_FILE`], synced,
    /// renamed over it, the directory synced. A crash at any point leaves either the previous
    /// snapshot file or this one, whole.
    async fn write_snapshot(
        &mut self,
        index: u64,
        term: u64,
        start: u64,
        data: &[u8],
        conf: &[u8],
    ) -> io::Result<()> {
        let bytes = encode_snapshot(index, term, start, data, conf)?;
        let dir = &self.log.dir;
        let tmp = dir.open(SNAPSHOT_TMP_FILE).await?;
        // A leftover of a failed write must not keep bytes past the new content.
        tmp.truncate(0).await?;
        tmp.write_at(0, bytes).await?;
        tmp.sync().await?;
        drop(tmp);
        dir.rename(SNAPSHOT_TMP_FILE, SNAPSHOT_FILE).await?;
        dir.sync_dir().await
    }

    /// Write the hard state into the slot not holding the last durable one; nothing is written
    /// when it has not changed. A new term or vote is durable after the next [`Self::sync`]; a
    /// change of the commit index alone does not make that sync touch the state file (see the
    /// module documentation): it reaches the disk with the next term or vote, or whenever the
    /// kernel writes the page back. After [`Self::compact`] or [`Self::install`] the caller
    /// stores a commit index at least the snapshot's index.
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
        self.state_written = true;
        Ok(())
    }

    /// Make the next [`Self::sync`] sync the hard state even if only its commit index moved:
    /// a commit index that covers a membership change must survive a crash (a replica that
    /// applied the change must not come back under the configuration before it). Nothing to
    /// do when the newest hard state is already the durable one.
    pub fn keep_commit_durable(&mut self) {
        if self.state_written {
            self.state_unsynced = true;
        }
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
            self.state_written = false;
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
    use crate::log::{parse_segment_name, segment_name};
    use futures_lite::future::block_on;

    /// Small segments, so the log rolls over several files.
    fn small() -> LogConfig {
        LogConfig {
            segment_bytes: 300,
            max_batch_bytes: 1 << 20,
            read_chunk_bytes: 97,
        }
    }

    type Opened = (
        RaftLog<MemDir>,
        HardState,
        Option<StoredSnapshot>,
        Vec<StoredEntry>,
    );

    fn open_with(dir: &MemDir, cfg: LogConfig) -> Opened {
        block_on(RaftLog::open(dir.clone(), cfg)).expect("the raft log opens")
    }

    fn open(dir: &MemDir) -> Opened {
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
        StoredEntry {
            index,
            term,
            data,
            voters: None,
        }
    }

    fn append(log: &mut RaftLog<MemDir>, entries: &[StoredEntry]) -> io::Result<()> {
        let refs: Vec<EntryRef<'_>> = entries.iter().map(StoredEntry::as_ref).collect();
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
        let (mut log, hard, _, entries) = open(&dir);
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
        let (log, hard, _, entries) = open(&dir);
        assert_eq!(entries, want);
        assert_eq!((hard, log.last_index()), (hs(0, 0, 0), 8));
        assert_eq!(log.base_offset(4), Some(5));
        // And again: a reopened log appends after what it found.
        let mut log = log;
        let more = entry(9, i32::MAX as u64, batch(&[("z", None)]));
        append(&mut log, std::slice::from_ref(&more)).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        let (_, _, _, entries) = open(&dir);
        assert_eq!(entries.len(), 9);
        assert_eq!(entries[..8], want[..]);
        assert_eq!(entries[8], more);
    }

    #[test]
    fn the_segments_are_a_kafka_partition_log_with_terms_as_leader_epochs() {
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
        append(&mut log, &mixed()).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        assert!(segment_files(&dir).len() > 1);
        let batches = all_batches(&dir);
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
        let (mut log, _, _, _) = open(&dir);
        append(&mut log, &run(1, 5, 1, "a")).unwrap();
        block_on(log.sync()).unwrap();
        // The new leader's 3..4 replace 3..5; not synced yet, and the power goes.
        let new = run(3, 4, 2, "b");
        append(&mut log, &new).unwrap();
        assert_eq!(log.last_index(), 4);
        drop(log);
        dir.crash(|_, _| 0);
        // The cut was durable when append returned: old 3..5 never come back.
        let (mut log, _, _, entries) = open(&dir);
        assert_eq!(entries, run(1, 2, 1, "a"));
        append(&mut log, &new).unwrap();
        block_on(log.sync()).unwrap();
        assert_eq!(
            (1..=5).map(|i| log.base_offset(i)).collect::<Vec<_>>(),
            [Some(0), Some(1), Some(2), Some(3), None]
        );
        drop(log);
        let (mut log, _, _, entries) = open(&dir);
        let mut want = run(1, 2, 1, "a");
        want.extend(new);
        assert_eq!(entries, want);
        // A cut at index 1 takes everything.
        append(&mut log, &[entry(1, 3, vec![])]).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        let (log, _, _, entries) = open(&dir);
        assert_eq!(entries, [entry(1, 3, vec![])]);
        assert_eq!(log.log().next_offset(), 1);
    }

    #[test]
    fn a_refused_append_changes_nothing() {
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
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
        let (_, _, _, entries) = open(&dir);
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
        let (mut log, hard, _, _) = open(&dir);
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
        let (mut log, hard, _, _) = open(&dir);
        assert_eq!(hard, hs(2, 2, 5));
        // Written, not synced, and the process stops: the page cache still has it, and the
        // open makes it durable before handing it out.
        block_on(log.set_hard_state(hs(3, 0, 5))).unwrap();
        drop(log);
        let (log, hard, _, _) = open(&dir);
        assert_eq!(hard, hs(3, 0, 5));
        drop(log);
        dir.crash(|_, _| 0);
        let (_, hard, _, _) = open(&dir);
        assert_eq!(hard, hs(3, 0, 5));
    }

    #[test]
    fn a_crash_before_the_sync_brings_back_the_previous_hard_state() {
        let a = hs(4, 2, 10);
        let b = hs(5, 3, 10);
        // How much of the unsynced bytes survive: none, B's slot torn, all of it.
        for (keep_all_but, want) in [(None, a), (Some(10), a), (Some(0), b)] {
            let dir = MemDir::new();
            let (mut log, _, _, _) = open(&dir);
            block_on(log.set_hard_state(a)).unwrap();
            block_on(log.sync()).unwrap();
            block_on(log.set_hard_state(b)).unwrap();
            drop(log);
            dir.crash(|_, n| keep_all_but.map_or(0, |k| n - k));
            let (mut log, hard, _, _) = open(&dir);
            assert_eq!(hard, want, "{keep_all_but:?}");
            // An unsynced overwrite of the older slot is lost whole: the newer one stays.
            block_on(log.set_hard_state(hs(9, 9, 9))).unwrap();
            drop(log);
            dir.crash(|_, _| 0);
            let (_, hard, _, _) = open(&dir);
            assert_eq!(hard, want, "{keep_all_but:?}, second crash");
        }
    }

    #[test]
    fn a_torn_slot_falls_back_to_the_other_one() {
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
        // Each synced: seq 1 → slot 0, seq 2 → slot 1, seq 3 → slot 0.
        for s in [hs(1, 1, 0), hs(2, 2, 0), hs(3, 3, 1)] {
            block_on(log.set_hard_state(s)).unwrap();
            block_on(log.sync()).unwrap();
        }
        drop(log);
        // The write of seq 3 tore: its slot's tail never reached the disk.
        dir.with_file(STATE_FILE, |b| b[20..36].fill(0)).unwrap();
        let (mut log, hard, _, _) = open(&dir);
        assert_eq!(hard, hs(2, 2, 0));
        // The next write goes over the torn slot, not over the one just read.
        block_on(log.set_hard_state(hs(4, 0, 1))).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        let slot1 = dir
            .with_file(STATE_FILE, |b| b[4096..4096 + 36].to_vec())
            .unwrap();
        assert_eq!(decode_slot(&slot1), Some((2, hs(2, 2, 0))));
        let (_, hard, _, _) = open(&dir);
        assert_eq!(hard, hs(4, 0, 1));
        // A flipped bit in the newer slot (seq 3, slot 0): the older one again.
        dir.with_file(STATE_FILE, |b| b[9] ^= 1).unwrap();
        let (_, hard, _, _) = open(&dir);
        assert_eq!(hard, hs(2, 2, 0));
    }

    #[test]
    fn a_commit_only_hard_state_is_not_synced_and_never_costs_the_term() {
        let slot = |dir: &MemDir, i: usize| {
            dir.with_file(STATE_FILE, |b| decode_slot(&b[i * 4096..]))
                .unwrap()
        };
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
        block_on(log.set_hard_state(hs(3, 2, 0))).unwrap();
        block_on(log.sync()).unwrap();
        // Only the commit index moves: the sync leaves the state file alone, so a power loss
        // takes the new commit index (the model loses unsynced overwrites whole) and keeps the
        // term and vote.
        block_on(log.set_hard_state(hs(3, 2, 5))).unwrap();
        block_on(log.sync()).unwrap();
        assert_eq!(log.hard_state(), hs(3, 2, 5));
        dir.crash(|_, _| 0);
        let (mut log, hard, _, _) = open(&dir);
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
        let (mut log, hard, _, _) = open(&dir);
        assert_eq!(hard, hs(3, 2, 8));
        // A new term is synced; the next commit-only write then goes over the older slot.
        block_on(log.set_hard_state(hs(4, 0, 8))).unwrap();
        block_on(log.sync()).unwrap();
        block_on(log.set_hard_state(hs(4, 0, 9))).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        dir.crash(|_, _| 0);
        let (_, hard, _, _) = open(&dir);
        assert_eq!(hard, hs(4, 0, 8));
    }

    #[test]
    fn a_commit_index_kept_durable_survives_a_crash() {
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
        block_on(log.set_hard_state(hs(3, 2, 0))).unwrap();
        block_on(log.sync()).unwrap();
        // Nothing written since the sync: asking changes nothing (the durable slot stays).
        log.keep_commit_durable();
        block_on(log.sync()).unwrap();
        block_on(log.set_hard_state(hs(3, 2, 5))).unwrap();
        log.keep_commit_durable();
        block_on(log.sync()).unwrap();
        // The next commit-only write goes over the other slot, and is lost in the crash.
        block_on(log.set_hard_state(hs(3, 2, 7))).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        dir.crash(|_, _| 0);
        let (_, hard, _, _) = open(&dir);
        assert_eq!(hard, hs(3, 2, 5));
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
            let (mut log, _, _, _) = open_with(&dir, cfg.clone());
            append(&mut log, &run(1, 3, 1, "x")).unwrap();
            block_on(log.sync()).unwrap();
            append(&mut log, &tail).unwrap();
            drop(log);
            dir.crash(|_, n| {
                assert_eq!(n, 2 * size);
                keep
            });
            let (mut log, _, _, entries) = open_with(&dir, cfg.clone());
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
        let (mut log, _, _, _) = open_with(&dir, cfg.clone());
        append(&mut log, &run(1, 5, 1, "x")).unwrap();
        drop(log);
        let (log, _, _, entries) = open_with(&dir, cfg.clone());
        assert_eq!(entries.len(), 5);
        drop(log);
        dir.crash(|_, _| 0);
        let (_, _, _, entries) = open_with(&dir, cfg);
        assert_eq!(entries, run(1, 5, 1, "x"));
    }

    fn snap(index: u64, term: u64, data: &[u8]) -> StoredSnapshot {
        StoredSnapshot {
            index,
            term,
            data: data.to_vec(),
            conf: Vec::new(),
        }
    }

    /// The base offsets of the segment files in `dir`, in order.
    fn segment_files(dir: &MemDir) -> Vec<u64> {
        let mut bases: Vec<u64> = block_on(dir.list())
            .unwrap()
            .iter()
            .filter_map(|n| parse_segment_name(n))
            .collect();
        bases.sort_unstable();
        bases
    }

    /// Every batch in `dir`'s segments, as the log's own scanner reads them: header, leader
    /// epoch, records.
    fn all_batches(
        dir: &MemDir,
    ) -> Vec<(crate::batch::BatchHeader, i32, Vec<crate::batch::LogRecord>)> {
        let mut batches = Vec::new();
        for base in segment_files(dir) {
            let name = segment_name(base);
            let file = block_on(dir.open(&name)).unwrap();
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
        batches
    }

    fn has_file(dir: &MemDir, name: &str) -> bool {
        block_on(dir.list()).unwrap().iter().any(|n| n == name)
    }

    /// A file written and synced, its name durable.
    fn put_file(dir: &MemDir, name: &str, bytes: Vec<u8>) {
        block_on(async {
            let f = dir.open(name).await?;
            f.truncate(0).await?;
            f.write_at(0, bytes).await?;
            f.sync().await?;
            dir.sync_dir().await
        })
        .unwrap()
    }

    fn open_err(dir: &MemDir) -> io::Error {
        match block_on(RaftLog::open(dir.clone(), small())) {
            Ok(_) => panic!("opened"),
            Err(e) => e,
        }
    }

    #[test]
    fn configuration_changes_are_voters_batches_and_read_back_as_written() {
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
        let change = |index, term, change: &[u8], voters: &[i32]| StoredEntry {
            index,
            term,
            data: change.to_vec(),
            voters: Some(voters.to_vec()),
        };
        let want = vec![
            entry(1, 1, vec![]),
            change(2, 1, b"add 4 as a learner", &[1, 2, 3]),
            entry(3, 1, batch(&[("k", Some("v"))])),
            change(4, 2, b"promote 4, remove 1", &[2, 3, 4]),
            change(5, 2, b"", &[2, 3, 4]), // leave the joint configuration: an empty change
            change(6, 2, &[0xab; 700], &[]),
        ];
        append(&mut log, &want).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        let (mut log, _, _, entries) = open(&dir);
        assert_eq!(entries, want);
        // On disk: KRaft voters control batches, whose records name the voters.
        let mut seen = Vec::new();
        for (h, epoch, recs) in all_batches(&dir) {
            if is_voters(recs[0].key.as_deref()) {
                assert!(h.is_control() && epoch >= 1);
                seen.push(
                    parse_voters_change(recs[0].value.as_deref().unwrap())
                        .unwrap()
                        .0,
                );
            }
        }
        assert_eq!(seen, [&[1, 2, 3][..], &[2, 3, 4], &[2, 3, 4], &[]]);
        // A conflicting suffix cut through them, as through any entry.
        let new = vec![change(4, 3, b"remove 4", &[1, 2, 3])];
        append(&mut log, &new).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        let (mut log, _, _, entries) = open(&dir);
        assert_eq!(entries[..3], want[..3]);
        assert_eq!(entries[3..], new);
        // A record batch that is a voters batch is refused as data (it would read back as a
        // change), and so is a change naming more voters than a record holds.
        let mut voters_batch = Vec::new();
        encode_voters_change(0, 0, 0, &[1], b"x", &mut voters_batch);
        let err = append(&mut log, &[entry(5, 3, voters_batch)]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let many = vec![1; crate::batch::MAX_VOTERS_IN_RECORD + 1];
        let err = append(&mut log, &[change(5, 3, b"x", &many)]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(log.last_index(), 4);
    }

    #[test]
    fn a_version_1_snapshot_file_reads_with_no_configuration() {
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
        append(&mut log, &run(1, 4, 1, "a")).unwrap();
        block_on(log.compact(2, 1, b"two", b"conf")).unwrap();
        drop(log);
        // What version 1 wrote: the same header, the data, the CRC.
        let mut v1 = Vec::new();
        v1.extend_from_slice(SNAPSHOT_MAGIC);
        v1.push(1);
        for v in [2u64, 1, 2] {
            v1.extend_from_slice(&v.to_be_bytes());
        }
        v1.extend_from_slice(&3u32.to_be_bytes());
        v1.extend_from_slice(b"two");
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_be_bytes());
        let file = block_on(dir.open(SNAPSHOT_FILE)).unwrap();
        block_on(file.truncate(0)).unwrap();
        block_on(file.write_at(0, v1)).unwrap();
        let (_, _, snapshot, entries) = open(&dir);
        assert_eq!(snapshot, Some(snap(2, 1, b"two")));
        assert_eq!(entries, run(3, 4, 1, "a"));
        // Version 2 lengths that do not add up are refused.
        for (data_len, conf_len) in [(4u32, 4u32), (3, 5), (3, 3), (100, 4)] {
            let mut b = encode_snapshot(2, 1, 2, b"two", b"conf").unwrap();
            b.truncate(b.len() - 4);
            b[29..33].copy_from_slice(&data_len.to_be_bytes());
            b[36..40].copy_from_slice(&conf_len.to_be_bytes());
            let crc = crc32c::crc32c(&b);
            b.extend_from_slice(&crc.to_be_bytes());
            assert!(decode_snapshot(&b).is_err(), "{data_len} {conf_len}");
        }
    }

    #[test]
    fn a_compacted_log_reopens_from_its_snapshot_without_the_segments_it_covers() {
        let dir = MemDir::new();
        let (mut log, _, snapshot, _) = open(&dir);
        assert_eq!(
            (snapshot, log.first_index(), log.snapshot()),
            (None, 1, None)
        );
        let old = run(1, 30, 1, "a");
        append(&mut log, &old).unwrap();
        block_on(log.sync()).unwrap();
        let before = log.log().segments();
        assert!(before.len() > 4, "{before:?}");
        block_on(log.compact(20, 1, b"state at 20", b"voters at 20")).unwrap();
        assert_eq!(
            (log.first_index(), log.last_index(), log.snapshot()),
            (21, 30, Some((20, 1)))
        );
        // One record per entry: entry i is at offset i - 1.
        assert_eq!((log.base_offset(20), log.base_offset(21)), (None, Some(20)));
        assert_eq!(
            [19, 20, 21, 31].map(|i| log.term(i)),
            [None, Some(1), Some(1), None]
        );
        // Whole segments only: the one holding entry 21 stays, with the entries before it.
        let after = log.log().segments();
        assert!(after.len() < before.len());
        assert!(after[0].0 <= 20 && after[1].0 > 20, "{after:?}");
        assert_eq!(after, before[before.len() - after.len()..]);
        let bases: Vec<u64> = after.iter().map(|s| s.0).collect();
        assert_eq!(segment_files(&dir), bases);
        assert!(has_file(&dir, SNAPSHOT_FILE) && !has_file(&dir, SNAPSHOT_TMP_FILE));
        // The log goes on after the snapshot.
        let more = run(31, 33, 2, "b");
        append(&mut log, &more).unwrap();
        block_on(log.sync()).unwrap();
        assert_eq!(log.base_offset(31), Some(30));
        drop(log);
        let (mut log, _, snapshot, entries) = open(&dir);
        let conf = b"voters at 20".to_vec();
        assert_eq!(
            snapshot,
            Some(StoredSnapshot {
                conf,
                ..snap(20, 1, b"state at 20")
            })
        );
        let mut want = old[20..].to_vec();
        want.extend(more);
        assert_eq!(entries, want);
        assert_eq!(
            (log.first_index(), log.last_index(), log.snapshot()),
            (21, 33, Some((20, 1)))
        );
        assert_eq!(log.base_offset(21), Some(20));
        assert_eq!(
            segment_files(&dir)[0],
            bases[0],
            "the open removes nothing more"
        );
        // A second compaction replaces the snapshot.
        block_on(log.compact(32, 2, b"state at 32", b"")).unwrap();
        append(&mut log, &[entry(34, 2, vec![])]).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        let (log, _, snapshot, entries) = open(&dir);
        assert_eq!(snapshot, Some(snap(32, 2, b"state at 32")));
        assert_eq!(entries, [want[12].clone(), entry(34, 2, vec![])]);
        assert_eq!(
            (log.base_offset(33), log.base_offset(34)),
            (Some(32), Some(33))
        );
        // The segments are still a partition log a plain reader opens, from the first kept
        // segment on.
        drop(log);
        let mut offsets = Vec::new();
        block_on(PartitionLog::open(dir.clone(), small(), |o, _, _, _| {
            offsets.push(o)
        }))
        .unwrap();
        assert_eq!(offsets.last(), Some(&33));
        assert!(offsets.windows(2).all(|w| w[1] == w[0] + 1));
    }

    #[test]
    fn a_snapshot_of_every_entry_leaves_an_empty_log_that_goes_on_at_its_end() {
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
        append(&mut log, &run(1, 12, 1, "a")).unwrap();
        block_on(log.sync()).unwrap();
        assert!(log.log().segment_count() > 1);
        block_on(log.compact(12, 1, b"all", b"")).unwrap();
        assert_eq!((log.first_index(), log.last_index()), (13, 12));
        assert_eq!(
            log.log().segment_count(),
            1,
            "only the active segment stays"
        );
        drop(log);
        // Nothing after the snapshot: the next entry still lands at the log's end.
        let (mut log, _, snapshot, entries) = open(&dir);
        assert_eq!((snapshot, entries), (Some(snap(12, 1, b"all")), vec![]));
        assert_eq!(
            (log.first_index(), log.last_index(), log.log().next_offset()),
            (13, 12, 12)
        );
        append(&mut log, &run(13, 14, 2, "b")).unwrap();
        assert_eq!(log.base_offset(13), Some(12));
        block_on(log.compact(14, 2, b"all again", b"")).unwrap();
        append(&mut log, &[entry(15, 3, vec![])]).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        let (log, _, snapshot, entries) = open(&dir);
        assert_eq!(snapshot, Some(snap(14, 2, b"all again")));
        assert_eq!(entries, [entry(15, 3, vec![])]);
        assert_eq!(log.base_offset(15), Some(14));
    }

    #[test]
    fn an_installed_snapshot_replaces_the_whole_log() {
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
        append(&mut log, &run(1, 10, 1, "a")).unwrap();
        block_on(log.sync()).unwrap();
        // The leader's snapshot at 6, below the last index: entries 7..=10 go too.
        block_on(log.install(6, 2, b"leader state", b"leader voters")).unwrap();
        assert_eq!(
            (log.first_index(), log.last_index(), log.snapshot()),
            (7, 6, Some((6, 2)))
        );
        assert_eq!(
            (log.base_offset(6), log.base_offset(7)),
            (None, None),
            "no entry left"
        );
        assert_eq!((log.term(6), log.term(7)), (Some(2), None));
        assert_eq!(
            log.log().segment_count(),
            1,
            "only the active segment stays"
        );
        assert_eq!(log.log().next_offset(), 10);
        // The next entry goes after the discarded batches.
        let new = run(7, 8, 2, "b");
        append(&mut log, &new).unwrap();
        assert_eq!(log.base_offset(7), Some(10));
        block_on(log.sync()).unwrap();
        drop(log);
        let (mut log, _, snapshot, entries) = open(&dir);
        let conf = b"leader voters".to_vec();
        assert_eq!(
            snapshot,
            Some(StoredSnapshot {
                conf,
                ..snap(6, 2, b"leader state")
            })
        );
        assert_eq!(entries, new);
        assert_eq!((log.first_index(), log.last_index()), (7, 8));
        // An older snapshot is refused; one far past the log's end is fine.
        let err = block_on(log.install(5, 2, b"old", b"")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        block_on(log.install(20, 3, b"far ahead", b"")).unwrap();
        assert_eq!((log.first_index(), log.last_index()), (21, 20));
        append(&mut log, &[entry(21, 3, vec![])]).unwrap();
        assert_eq!(log.base_offset(21), Some(12));
        block_on(log.sync()).unwrap();
        drop(log);
        let (_, _, snapshot, entries) = open(&dir);
        assert_eq!(snapshot, Some(snap(20, 3, b"far ahead")));
        assert_eq!(entries, [entry(21, 3, vec![])]);

        // On a new log (nothing written yet): entry index + 1 is at offset 0.
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
        block_on(log.install(4, 1, b"", b"")).unwrap();
        append(&mut log, &run(5, 6, 1, "c")).unwrap();
        assert_eq!(log.base_offset(5), Some(0));
        block_on(log.sync()).unwrap();
        drop(log);
        let (_, _, snapshot, entries) = open(&dir);
        assert_eq!(
            (snapshot, entries),
            (Some(snap(4, 1, b"")), run(5, 6, 1, "c"))
        );
    }

    #[test]
    fn a_crash_at_any_point_of_a_compaction_leaves_the_old_log_or_the_snapshot() {
        let old = run(1, 30, 1, "a");
        // Crashes after the snapshot was durable but before the segments it covers went.
        let mut between = 0;
        let mut completed = false;
        for fail_at in 0..30 {
            let dir = MemDir::new();
            let (mut log, _, _, _) = open(&dir);
            append(&mut log, &old).unwrap();
            block_on(log.sync()).unwrap();
            let segments = segment_files(&dir);
            dir.fail_after(fail_at);
            let done = block_on(log.compact(20, 1, b"s", b"")).is_ok();
            drop(log);
            dir.crash(|_, _| 0);
            let snapshotted = has_file(&dir, SNAPSHOT_FILE);
            assert!(
                snapshotted || !done,
                "fail_at {fail_at}: compacted, not durable"
            );
            if snapshotted && segment_files(&dir) == segments {
                between += 1;
            }
            let (mut log, _, snapshot, entries) = open(&dir);
            if snapshotted {
                assert_eq!(snapshot, Some(snap(20, 1, b"s")), "fail_at {fail_at}");
                assert_eq!(entries, old[20..], "fail_at {fail_at}");
                // The segments below the snapshot's start are gone now.
                let left = segment_files(&dir);
                assert!(left.len() < segments.len(), "fail_at {fail_at}");
                assert!(left[0] <= 20 && left[1] > 20, "fail_at {fail_at}: {left:?}");
            } else {
                assert_eq!((snapshot, &entries[..]), (None, &old[..]), "{fail_at}");
            }
            assert!(!has_file(&dir, SNAPSHOT_TMP_FILE));
            // Either way the log goes on at index 31, at offset 30.
            append(&mut log, &[entry(31, 2, vec![])]).unwrap();
            assert_eq!(log.base_offset(31), Some(30));
            completed |= done;
        }
        assert!(
            between > 0,
            "no crash hit the window between snapshot and removal"
        );
        assert!(completed, "no compaction ran to its end");
    }

    #[test]
    fn a_leftover_temporary_snapshot_is_ignored_and_a_corrupt_snapshot_refused() {
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
        append(&mut log, &run(1, 5, 1, "a")).unwrap();
        block_on(log.sync()).unwrap();
        drop(log);
        // A crash while the first snapshot was written (its name made durable by some other
        // directory sync): torn, never renamed into place.
        let torn = encode_snapshot(3, 1, 3, b"torn", b"").unwrap()[..20].to_vec();
        put_file(&dir, SNAPSHOT_TMP_FILE, torn.clone());
        let (mut log, _, snapshot, entries) = open(&dir);
        assert_eq!((snapshot, entries), (None, run(1, 5, 1, "a")));
        assert!(!has_file(&dir, SNAPSHOT_TMP_FILE), "removed at open");
        block_on(log.compact(3, 1, b"three", b"")).unwrap();
        drop(log);
        // The same over an existing snapshot: the previous one stays.
        put_file(&dir, SNAPSHOT_TMP_FILE, torn);
        let (log, _, snapshot, entries) = open(&dir);
        assert_eq!(snapshot, Some(snap(3, 1, b"three")));
        assert_eq!(entries, run(4, 5, 1, "a"));
        assert!(!has_file(&dir, SNAPSHOT_TMP_FILE));
        drop(log);
        // Any flipped bit or cut in the snapshot file: InvalidData, never a guess.
        let whole = dir.with_file(SNAPSHOT_FILE, |b| b.clone()).unwrap();
        assert_eq!(whole, encode_snapshot(3, 1, 3, b"three", b"").unwrap());
        let bad_with = |f: &dyn Fn(&mut Vec<u8>)| {
            dir.with_file(SNAPSHOT_FILE, |b| {
                b.clone_from(&whole);
                f(b)
            });
            let err = open_err(&dir);
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
            assert!(err.to_string().contains(SNAPSHOT_FILE), "{err}");
        };
        for i in 0..whole.len() {
            bad_with(&|b| b[i] ^= 0x10);
        }
        for cut in [0, 1, SNAPSHOT_HEADER, whole.len() - 1] {
            bad_with(&|b| b.truncate(cut));
        }
        bad_with(&|b| b.push(0));
        // A valid CRC over a wrong magic, version or data length.
        let restamp = |b: &mut Vec<u8>| {
            let n = b.len() - 4;
            let crc = crc32c::crc32c(&b[..n]);
            b[n..].copy_from_slice(&crc.to_be_bytes());
        };
        bad_with(&|b| {
            b[0] = b'X';
            restamp(b)
        });
        for version in [0, SNAPSHOT_VERSION + 1] {
            bad_with(&|b| {
                b[4] = version;
                restamp(b)
            });
        }
        bad_with(&|b| {
            b[32] += 1;
            restamp(b)
        });
        // Whole again: it opens.
        dir.with_file(SNAPSHOT_FILE, |b| b.clone_from(&whole));
        let (_, _, snapshot, _) = open(&dir);
        assert_eq!(snapshot, Some(snap(3, 1, b"three")));
    }

    #[test]
    fn nothing_reaches_into_the_snapshot() {
        let dir = MemDir::new();
        let (mut log, _, _, _) = open(&dir);
        use io::ErrorKind::InvalidInput;
        let compact_err = |log: &mut RaftLog<MemDir>, index, term| {
            block_on(log.compact(index, term, b"x", b""))
                .expect_err("refused")
                .kind()
        };
        assert_eq!(compact_err(&mut log, 1, 1), InvalidInput, "no entry yet");
        append(&mut log, &run(1, 3, 1, "a")).unwrap();
        append(&mut log, &run(4, 6, 2, "b")).unwrap();
        block_on(log.sync()).unwrap();
        let ops = dir.ops();
        // A wrong term, past the last entry, index 0.
        for (index, term) in [(4, 1), (3, 2), (7, 2), (0, 0)] {
            assert_eq!(compact_err(&mut log, index, term), InvalidInput, "{index}");
        }
        assert_eq!(dir.ops(), ops, "nothing written");
        assert_eq!(log.snapshot(), None);
        assert!(!has_file(&dir, SNAPSHOT_FILE));
        block_on(log.compact(4, 2, b"four", b"")).unwrap();
        // At or below the snapshot: refused, the log unchanged.
        let good = batch(&[("g", Some("v"))]);
        for index in [0, 1, 4] {
            let err = append(&mut log, &[entry(index, 3, good.clone())]).unwrap_err();
            assert_eq!(err.kind(), InvalidInput, "{index}");
        }
        for (index, term) in [(4, 2), (3, 1)] {
            assert_eq!(compact_err(&mut log, index, term), InvalidInput, "{index}");
        }
        assert_eq!((log.first_index(), log.last_index()), (5, 6));
        assert_eq!(log.snapshot(), Some((4, 2)));
        // At the first index: everything after the snapshot is cut, never the snapshot.
        append(&mut log, &[entry(5, 3, vec![])]).unwrap();
        block_on(log.sync()).unwrap();
        assert_eq!((log.last_index(), log.base_offset(5)), (5, Some(4)));
        drop(log);
        let (_, _, snapshot, entries) = open(&dir);
        assert_eq!(snapshot, Some(snap(4, 2, b"four")));
        assert_eq!(entries, [entry(5, 3, vec![])]);
    }

    #[test]
    fn a_log_that_does_not_go_on_at_the_snapshots_start_is_refused_at_open() {
        // One segment of batches (base offset, records), and a snapshot at index 2 whose start
        // offset is `start`.
        let make = |batches: &[(u64, usize)], start: u64| {
            let dir = MemDir::new();
            let mut seg = Vec::new();
            for &(base, n) in batches {
                let recs = vec![(Some(&b"k"[..]), None); n];
                encode_batch_as(base, 1, BatchProducer::NONE, &recs, &mut seg);
            }
            put_file(&dir, &segment_name(0), seg);
            put_file(
                &dir,
                SNAPSHOT_FILE,
                encode_snapshot(2, 1, start, b"s", b"").unwrap(),
            );
            dir
        };
        // Entry 3 at the start offset, after a batch of three records.
        let dir = make(&[(0, 1), (1, 1), (2, 3), (5, 1)], 5);
        let (log, _, snapshot, entries) = open(&dir);
        assert_eq!(snapshot, Some(snap(2, 1, b"s")));
        assert_eq!(entries.iter().map(|e| e.index).collect::<Vec<_>>(), [3]);
        assert_eq!(log.base_offset(3), Some(5));
        // The start offset past the log's end (a crash took the unsynced tail a snapshot at
        // the last index covered): no entry, and the next one lands at the start offset.
        let dir = make(&[(0, 1), (1, 1), (2, 3)], 9);
        let (mut log, _, _, entries) = open(&dir);
        assert_eq!((entries.len(), log.last_index()), (0, 2));
        append(&mut log, &[entry(3, 1, vec![])]).unwrap();
        assert_eq!(log.base_offset(3), Some(9));
        block_on(log.sync()).unwrap();
        drop(log);
        let (_, _, _, entries) = open(&dir);
        assert_eq!(entries, [entry(3, 1, vec![])]);
        // A gap after the start offset (recovery allows gaps in offsets): entry 3 is gone.
        let err = open_err(&make(&[(0, 1), (1, 1), (2, 3), (7, 1)], 5));
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("offset 7, not 5"), "{err}");
        // A batch across the start offset.
        let err = open_err(&make(&[(0, 1), (1, 1), (2, 3), (5, 1)], 3));
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("straddles"), "{err}");
    }
}
