//! One replica of a replicated topic partition, as a sans-IO state machine: the Raft side of a
//! partition whose state machine is its topic log (`storage::topic_log`, driven by the shell).
//!
//! The model (docs/replication.md, "Topic partitions"): every replica, the leader too, writes a
//! batch into its topic log only once the Raft entry holding it is committed, so the high
//! watermark is what a majority holds.
//! - The leader's shell stages a producer's batch as a single node does (sequence checks,
//!   offsets) and calls [`TopicReplica::propose_staged`], which proposes the staged batches not
//!   proposed yet, in offset order. When an entry commits, the shell flushes its topic log up to
//!   the entry's end, and the producer is answered.
//! - A follower's shell appends a committed entry's batches as the leader placed them (Kafka's
//!   `appendAsFollower`), skipping those its log already holds, so re-applying an entry (a
//!   restart replays the committed entries) changes nothing.
//! - A replica that becomes leader serves ([`TopicReplica::serving`]) once every entry before
//!   its term's first one is applied (Raft §8's empty entry), so its next offset follows
//!   everything committed before it. A leader that stops leading is told to drop what it staged
//!   and did not see commit ([`TopicWork::stepped_down`]); an entry of it that a majority holds
//!   commits under the next leader.
//! - Compaction: a topic partition's snapshot cannot carry its records (the topic log is the
//!   state), so the leader proposes a compaction point once the entries every replica holds
//!   weigh `snapshot_min_bytes`, and every replica compacts there when it applies it
//!   ([`Apply::Compact`]): no replica of the partition's first members ever needs a snapshot of
//!   records it lacks, unless it lost its disk ([`snapshot_end`] lets the shell tell).
//! - Re-seeding: a replica added later (a node that joined the cluster) starts with nothing, and
//!   the leader's log no longer holds the entries it lacks. The leader then proposes a
//!   compaction point at once ([`Replica::snapshot_wanted`]: the stored snapshot predates the
//!   new member), so the snapshot it sends names the new replica. That replica does not take a
//!   snapshot past its records; it asks the sender for the records instead ([`Seeding`],
//!   [`SeedMsg`]), chunk by chunk, appends them as a follower does, and takes the snapshot the
//!   leader sends again once its topic log ends where the snapshot does (Kafka's follower
//!   likewise fetches what it lacks from the leader's log, from the leader's log start).
//!
//! Must not: touch a file, a socket, a task or a clock (`now_ms` is passed in); read the topic
//! log (the shell hands over what is staged, and the end offset, when asked).
//!
//! The broker's shell is `engine::data::replica`; the deterministic simulation
//! `tests/topic_sim.rs` drives this same type over real topic logs in memory.

use crate::eraftpb::Entry;
use crate::{AfterPersist, NodeId, Replica, Role, Work};
use std::collections::VecDeque;
use storage::batch::{encode_batch, for_each_record, peek_batch, Peek};

/// The first byte of an entry's key: what the entry's value holds. Producer batches, offsets
/// assigned:
pub const KIND_BATCHES: u8 = 0;
/// A compaction point every replica holds: the index (u64) and the topic log's end offset after
/// it (u64).
pub const KIND_COMPACT: u8 = 1;
/// DeleteRecords: the offset (u64) the topic log's start moves up to (at most the high
/// watermark the leader had when it proposed it, so every replica holds it when it applies it).
pub const KIND_DELETE: u8 = 2;
/// A topic partition's Raft snapshot: this magic, then the topic log's end offset at its index.
pub const SNAPSHOT_MAGIC: &[u8; 4] = b"RLTS";
/// The most bytes of staged batches one entry carries (a single larger batch goes alone).
pub const MAX_ENTRY_BATCHES_BYTES: usize = 1 << 20;
/// The most bytes of batches one re-seeding chunk carries (a single larger batch goes alone).
pub const SEED_CHUNK_BYTES: usize = 1 << 20;
/// A re-seeding request unanswered for this long is sent again (by the next refused snapshot:
/// chunks and requests travel as Raft messages do, and may be lost).
pub const SEED_RETRY_MS: i64 = 1_000;

/// What applying a committed entry asks of the shell, in order.
#[derive(Debug)]
pub enum Apply {
    /// Stage the batches of `entry` (its value, [`Apply::batches`]) the topic log does not hold
    /// yet, then flush it up to `end` (before any later [`Apply::Compact`]).
    Batches { index: u64, end: u64, entry: Entry },
    /// Once the topic log has flushed everything before it: compact the Raft log to `index`,
    /// with the snapshot [`snapshot_data`]`(end)`, then call [`TopicReplica::compacted`].
    Compact { index: u64, end: u64 },
    /// Once the topic log has flushed the batches of this work: move its log start up to
    /// `offset` (DeleteRecords; a start already there changes nothing, so a replay does not).
    DeleteRecords { index: u64, offset: u64 },
}

impl Apply {
    /// The producer batches of a [`Apply::Batches`] (empty for a compaction).
    pub fn batches(&self) -> &[u8] {
        match self {
            Apply::Batches { entry, .. } => decode_entry(&entry.data)
                .map(|(_, v)| v)
                .expect("decoded when it was handed out"),
            Apply::Compact { .. } | Apply::DeleteRecords { .. } => &[],
        }
    }
}

/// One piece of work for the shell, in order: send `work.send_now`; if `stepped_down`, drop
/// the batches staged and not flushed (and refuse the producers waiting on them); if
/// `work.snapshot`, check it ([`snapshot_end`]) against the topic log; stage what `apply`
/// holds; make `work` durable as for any replica; [`TopicReplica::persisted`]; flush the topic
/// log; compact; [`TopicReplica::settle`].
#[derive(Debug)]
pub struct TopicWork {
    pub work: Work,
    pub stepped_down: bool,
    pub apply: Vec<Apply>,
}

/// The Raft state of one replicated topic partition.
pub struct TopicReplica {
    replica: Replica,
    /// End (exclusive) of the batches this leader has proposed.
    proposed: u64,
    /// The term this replica leads and the index of its term's first entry.
    led: Option<(u64, u64)>,
    /// Leading, with every entry before its term applied.
    serving: bool,
    /// Bumped each time this replica stops leading.
    deposed: u64,
    /// Applied batch entries since the last compaction: (index, topic log end after it, bytes).
    applied: VecDeque<(u64, u64, usize)>,
    /// The highest compaction point this replica proposed as leader.
    compaction_proposed: u64,
    snapshot_min_bytes: usize,
    /// The leader last reported by [`Self::leader_changed`].
    published: Option<Option<NodeId>>,
    seeding: Seeding,
}

impl std::fmt::Debug for TopicReplica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicReplica")
            .field("replica", &self.replica)
            .field("serving", &self.serving)
            .field("proposed", &self.proposed)
            .finish_non_exhaustive()
    }
}

/// An entry's kind and value (the one record of its batch).
pub fn decode_entry(data: &[u8]) -> Result<(Option<u8>, &[u8]), String> {
    let h = match peek_batch(data, 0, data.len().max(61)) {
        Ok(Peek::Batch(h)) => h,
        Ok(Peek::Incomplete { .. }) => return Err("a truncated entry".into()),
        Err(e) => return Err(e.to_string()),
    };
    let mut found: Option<(usize, usize)> = None;
    let mut kind = None;
    for_each_record(data, &h, 0, |_, _, k, v| {
        kind = k.and_then(|k| k.first().copied());
        if let Some(v) = v {
            // The value is a slice of `data`: remember where, to hand out a borrow of it.
            let start = v.as_ptr() as usize - data.as_ptr() as usize;
            found = Some((start, v.len()));
        }
    })
    .map_err(|e| e.to_string())?;
    Ok((
        kind,
        found.map_or(&[][..], |(start, len)| &data[start..start + len]),
    ))
}

/// One entry's data: a one-record batch (what `storage::raft_log` stores) whose key is the
/// entry's kind and whose value is its content.
fn encode_entry(kind: u8, value: &[u8], now_ms: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 96);
    encode_batch(0, now_ms, &[(Some(&[kind][..]), Some(value))], &mut out);
    out
}

/// A [`KIND_BATCHES`] entry of producer batches, offsets assigned.
pub fn encode_batches(batches: &[u8], now_ms: i64) -> Vec<u8> {
    encode_entry(KIND_BATCHES, batches, now_ms)
}

/// The end offset (last offset + 1) of the last of `batches`, if there is one.
pub fn batches_end(batches: &[u8]) -> Option<u64> {
    let mut pos = 0;
    let mut end = None;
    while pos < batches.len() {
        match peek_batch(&batches[pos..], 0, batches.len() - pos) {
            Ok(Peek::Batch(h)) => {
                end = Some(h.last_offset() + 1);
                pos += h.size;
            }
            _ => break,
        }
    }
    end
}

/// The snapshot of a compaction to a point where the topic log ends at `end`.
pub fn snapshot_data(end: u64) -> Vec<u8> {
    let mut data = SNAPSHOT_MAGIC.to_vec();
    data.extend_from_slice(&end.to_be_bytes());
    data
}

/// The topic log end offset a snapshot stands for, None if it is not one of ours.
pub fn snapshot_end(data: &[u8]) -> Option<u64> {
    (data.len() == 12 && &data[..4] == SNAPSHOT_MAGIC)
        .then(|| u64::from_be_bytes(data[4..].try_into().expect("8 bytes")))
}

/// A re-seeding message between two replicas of a topic partition (the node-to-node link's
/// `TOPIC_SEED` frames carry them; [`encode_seed`] and [`decode_seed`] are their bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeedMsg<'a> {
    /// Send me the batches from offset `from` up to `upto` (exclusive, a batch boundary: the
    /// topic log end a snapshot stands for).
    Request { from: u64, upto: u64 },
    /// The answer: whole batches from `from` on, or from the sender's log start `log_start`
    /// when that is later (retention or DeleteRecords removed the offsets before it there).
    /// No batches: the sender deleted every record from `from` to the asked end, and the asker
    /// restarts its log empty at `log_start` (that end at most).
    Chunk {
        from: u64,
        log_start: u64,
        batches: &'a [u8],
    },
    /// From the target of a partition of replication factor 1 moving to it, to its source:
    /// send me your batches from offset `from` on.
    MoveRequest { from: u64 },
    /// The source's answer: whole batches from `from` (or its log start `log_start`, if later),
    /// its high watermark `end` when it read them, and whether it takes no more writes
    /// (`sealed`: it handed the partition over and nothing it staged is unwritten), so a target
    /// holding everything up to `end` holds every record the source will ever have.
    MoveChunk {
        from: u64,
        log_start: u64,
        end: u64,
        sealed: bool,
        batches: &'a [u8],
    },
}

const SEED_REQUEST: u8 = 0;
const SEED_CHUNK: u8 = 1;
const MOVE_REQUEST: u8 = 2;
const MOVE_CHUNK: u8 = 3;

/// A [`SeedMsg`]'s bytes: a kind byte, then big-endian u64s (and a chunk's batches).
pub fn encode_seed(m: &SeedMsg<'_>) -> Vec<u8> {
    match m {
        SeedMsg::Request { from, upto } => {
            let mut out = Vec::with_capacity(17);
            out.push(SEED_REQUEST);
            out.extend_from_slice(&from.to_be_bytes());
            out.extend_from_slice(&upto.to_be_bytes());
            out
        }
        SeedMsg::Chunk {
            from,
            log_start,
            batches,
        } => {
            let mut out = Vec::with_capacity(17 + batches.len());
            out.push(SEED_CHUNK);
            out.extend_from_slice(&from.to_be_bytes());
            out.extend_from_slice(&log_start.to_be_bytes());
            out.extend_from_slice(batches);
            out
        }
        SeedMsg::MoveRequest { from } => {
            let mut out = Vec::with_capacity(17);
            out.push(MOVE_REQUEST);
            out.extend_from_slice(&from.to_be_bytes());
            out.extend_from_slice(&0u64.to_be_bytes());
            out
        }
        SeedMsg::MoveChunk {
            from,
            log_start,
            end,
            sealed,
            batches,
        } => {
            let mut out = Vec::with_capacity(26 + batches.len());
            out.push(MOVE_CHUNK);
            out.extend_from_slice(&from.to_be_bytes());
            out.extend_from_slice(&log_start.to_be_bytes());
            out.extend_from_slice(&end.to_be_bytes());
            out.push(u8::from(*sealed));
            out.extend_from_slice(batches);
            out
        }
    }
}

/// A replica's answer to a re-seeding request for `from..upto` (a [`SeedMsg::Chunk`]'s bytes),
/// its log starting at `log_start`: `batches` is what it read for the request (None: nothing
/// readable there). With nothing read, when every record from `from` to `upto` was deleted here
/// (DeleteRecords), an empty chunk tells the asker to restart its log at this log's start, at
/// `upto` at most (the snapshot's end: the deletions past it are entries after the snapshot,
/// which the asker applies as everyone did). None: nothing to answer (asked past what this
/// replica holds; the asker asks again, of the next snapshot's sender).
pub fn seed_chunk(from: u64, upto: u64, log_start: u64, batches: Option<&[u8]>) -> Option<Vec<u8>> {
    let (batches, log_start) = match batches {
        Some(b) => (b, log_start),
        None if log_start.min(upto) > from => (&[][..], log_start.min(upto)),
        None => return None,
    };
    Some(encode_seed(&SeedMsg::Chunk {
        from,
        log_start,
        batches,
    }))
}

/// A [`SeedMsg`] from its bytes, or why they are not one.
pub fn decode_seed(b: &[u8]) -> Result<SeedMsg<'_>, String> {
    if b.len() < 17 {
        return Err(format!("a re-seeding message of {} bytes", b.len()));
    }
    let a = u64::from_be_bytes(b[1..9].try_into().expect("8 bytes"));
    let c = u64::from_be_bytes(b[9..17].try_into().expect("8 bytes"));
    match b[0] {
        SEED_REQUEST if b.len() == 17 && a <= c => Ok(SeedMsg::Request { from: a, upto: c }),
        SEED_REQUEST => Err("a malformed re-seeding request".into()),
        SEED_CHUNK => Ok(SeedMsg::Chunk {
            from: a,
            log_start: c,
            batches: &b[17..],
        }),
        MOVE_REQUEST if b.len() == 17 => Ok(SeedMsg::MoveRequest { from: a }),
        MOVE_REQUEST => Err("a malformed move request".into()),
        MOVE_CHUNK if b.len() >= 26 && b[25] <= 1 => Ok(SeedMsg::MoveChunk {
            from: a,
            log_start: c,
            end: u64::from_be_bytes(b[17..25].try_into().expect("8 bytes")),
            sealed: b[25] == 1,
            batches: &b[26..],
        }),
        MOVE_CHUNK => Err("a malformed move chunk".into()),
        k => Err(format!("a re-seeding message of kind {k}")),
    }
}

/// A replica being re-seeded: whom it asks and up to which offset (the topic log end of the
/// newest snapshot it was offered), and its request in flight. At most one request is in flight
/// per replica, so what a sender reads for it and what it holds for the shell are bounded by one
/// chunk.
#[derive(Debug, Default)]
struct Seeding {
    /// (the snapshot's sender, the topic log end it stands for).
    target: Option<(NodeId, u64)>,
    /// (the offset asked from, when).
    asked: Option<(u64, i64)>,
}

/// What [`TopicReplica::step`] did with a peer's message.
#[derive(Debug, PartialEq, Eq)]
pub enum Stepped {
    /// Raft took it.
    Taken,
    /// A snapshot past this replica's records, not taken: the records come first. Send
    /// `request` (a [`SeedMsg::Request`]) to `to`, if there is one (None: one is in flight).
    Seed {
        to: NodeId,
        request: Option<Vec<u8>>,
    },
    /// Refused: it does not decode, or Raft refused it.
    Refused,
    /// A snapshot not looked at yet: committed entries wait to be applied first, which move
    /// the topic log's end. Dropped; its sender offers it again.
    Deferred,
}

impl TopicReplica {
    /// A replica (new or restarted) that compacts once `snapshot_min_bytes` of entries every
    /// replica holds were applied.
    pub fn new(replica: Replica, snapshot_min_bytes: usize) -> Self {
        Self {
            replica,
            proposed: 0,
            led: None,
            serving: false,
            deposed: 0,
            applied: VecDeque::new(),
            compaction_proposed: 0,
            snapshot_min_bytes,
            published: None,
            seeding: Seeding::default(),
        }
    }

    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// For what the shell feeds Raft directly: ticks, a campaign, membership.
    pub fn replica_mut(&mut self) -> &mut Replica {
        &mut self.replica
    }

    /// Step a peer's message (raft-rs's encoding), this replica's topic log ending at
    /// `log_end`. A snapshot is taken only if the topic log ends exactly where the snapshot's
    /// index does (the snapshot carries no records); one past the records this replica holds
    /// starts or continues re-seeding from its sender instead (the sender offers it again
    /// every `SNAPSHOT_RETRY_TICKS` until it is taken). A snapshot that would leave a replica
    /// holding more than it stands for is refused, as no re-seeding can make that good.
    pub fn step(&mut self, m: crate::eraftpb::Message, log_end: u64, now_ms: i64) -> Stepped {
        use crate::eraftpb::MessageType;
        // raft-rs installs a snapshot past the commit index unless the log holds its entry
        // (then it only moves the commit index): past the last index, or over uncommitted
        // entries of another term. Judging only the first kind let the second through
        // unchecked: topic_sim's join test, at 300 seeds, failed in 3 of 8 runs with a replica
        // whose topic log ended two records short of a snapshot it installed over conflicting
        // entries (the broker stops the node there: `data::replica::check_snapshot`).
        let meta = m.get_snapshot().get_metadata();
        if m.get_msg_type() == MessageType::MsgSnapshot
            && meta.index > self.replica.commit_index()
            && !self.replica.holds_entry(meta.index, meta.term)
        {
            if self.replica.applied_index() < self.replica.commit_index() {
                // Committed entries not handed to the shell yet (a restart replays them into a
                // topic log whose unsynced tail a crash took): `log_end` is not where this
                // replica's log will end, so neither taking the snapshot nor asking for records
                // can be decided now. Its sender offers it again.
                return Stepped::Deferred;
            }
            let end = snapshot_end(crate::shell_snapshot_data(m.get_snapshot().get_data()));
            if end != Some(log_end) {
                return match end {
                    Some(end) if end > log_end => Stepped::Seed {
                        to: m.from,
                        request: self.seed_toward(m.from, end, log_end, now_ms),
                    },
                    _ => Stepped::Refused,
                };
            }
        }
        match self.replica.step(m) {
            Ok(()) => Stepped::Taken,
            Err(_) => Stepped::Refused,
        }
    }

    /// The request to send to `from` for the records up to `end`, if none is in flight.
    fn seed_toward(
        &mut self,
        from: NodeId,
        end: u64,
        log_end: u64,
        now_ms: i64,
    ) -> Option<Vec<u8>> {
        let s = &mut self.seeding;
        s.target = Some((from, end));
        if s.asked
            .is_some_and(|(at, when)| at == log_end && now_ms < when + SEED_RETRY_MS)
        {
            return None;
        }
        s.asked = Some((log_end, now_ms));
        Some(encode_seed(&SeedMsg::Request {
            from: log_end,
            upto: end,
        }))
    }

    /// This replica is being re-seeded: a chunk is welcome (one nobody asked for is dropped).
    pub fn seeding(&self) -> bool {
        self.seeding.target.is_some()
    }

    /// The shell appended a chunk (or found it useless); the topic log ends at `log_end` now.
    /// The next request and where it goes, until the topic log reaches the snapshot's end (then
    /// the snapshot is taken when its sender offers it again).
    pub fn seeded(&mut self, log_end: u64, now_ms: i64) -> Option<(NodeId, Vec<u8>)> {
        let (from, end) = self.seeding.target?;
        if log_end >= end {
            self.seeding = Seeding::default();
            return None;
        }
        self.seeding.asked = None;
        self.seed_toward(from, end, log_end, now_ms)
            .map(|r| (from, r))
    }

    /// This replica answers for the partition now (Produce, Fetch, ListOffsets).
    pub fn serving(&self) -> bool {
        self.serving
    }

    /// How many times this replica stopped leading: a producer that staged a batch before and
    /// finds a larger number after is refused (its batch was dropped).
    pub fn deposed(&self) -> u64 {
        self.deposed
    }

    pub fn role(&self) -> Role {
        self.replica.role()
    }

    /// Leader: propose the staged batches from the offset proposed so far on. `staged(from)`
    /// gives the last offset and the bytes of the staged batches starting at offset `from`
    /// (at most [`MAX_ENTRY_BATCHES_BYTES`] but at least one batch), or None.
    pub fn propose_staged<'a>(
        &mut self,
        mut staged: impl FnMut(u64) -> Option<(u64, &'a [u8])>,
        now_ms: i64,
    ) {
        if !self.serving {
            return;
        }
        while let Some((last, bytes)) = staged(self.proposed) {
            match self.replica.propose(encode_batches(bytes, now_ms)) {
                Ok(_) => self.proposed = last + 1,
                // Not leading any more: the next work says so and this replica steps down.
                Err(_) => return,
            }
        }
    }

    /// Leader, serving: propose moving every replica's log start up to `offset` (DeleteRecords;
    /// the caller checked it against the high watermark). The index of the entry, or None if
    /// this replica does not serve (the client is told NOT_LEADER_OR_FOLLOWER and finds the
    /// leader).
    pub fn propose_delete(&mut self, offset: u64, now_ms: i64) -> Option<u64> {
        if !self.serving {
            return None;
        }
        self.replica
            .propose(encode_entry(KIND_DELETE, &offset.to_be_bytes(), now_ms))
            .ok()
    }

    /// The next piece of work, if any (see [`TopicWork`]).
    pub fn work(&mut self) -> Option<TopicWork> {
        let mut work = self.replica.work()?;
        // Handed out here, in `apply`, without a copy (the shell needs nothing else of them).
        let committed = std::mem::take(&mut work.committed);
        let stepped_down = work.role.is_some_and(|role| self.role_changed(role));
        if work.snapshot.is_some() {
            // The log was replaced: nothing applied before it is compactable any more.
            self.applied.clear();
        }
        let mut apply = Vec::new();
        for e in committed {
            let (kind, value) = decode_entry(&e.data).unwrap_or_else(|why| {
                // Committed, so every replica sees the same bytes: a leader of ours wrote it.
                panic!("committed entry {} does not decode ({why})", e.index)
            });
            match kind {
                Some(KIND_BATCHES) => {
                    if let Some(end) = batches_end(value) {
                        self.applied.push_back((e.index, end, e.data.len()));
                        apply.push(Apply::Batches {
                            index: e.index,
                            end,
                            entry: e,
                        });
                    }
                }
                Some(KIND_COMPACT) if value.len() == 16 => apply.push(Apply::Compact {
                    index: u64::from_be_bytes(value[..8].try_into().expect("8 bytes")),
                    end: u64::from_be_bytes(value[8..].try_into().expect("8 bytes")),
                }),
                Some(KIND_COMPACT) => {
                    panic!(
                        "committed entry {}: a compaction of {} bytes",
                        e.index,
                        value.len()
                    )
                }
                Some(KIND_DELETE) if value.len() == 8 => apply.push(Apply::DeleteRecords {
                    index: e.index,
                    offset: u64::from_be_bytes(value.try_into().expect("8 bytes")),
                }),
                Some(KIND_DELETE) => {
                    panic!(
                        "committed entry {}: a DeleteRecords of {} bytes",
                        e.index,
                        value.len()
                    )
                }
                // A kind a newer node wrote: nothing this node knows to apply.
                _ => {}
            }
        }
        Some(TopicWork {
            work,
            stepped_down,
            apply,
        })
    }

    /// True if this replica led before (its staged batches must go).
    fn role_changed(&mut self, role: Role) -> bool {
        if role.is_leader && self.led.is_some_and(|(t, _)| t == role.term) {
            return false;
        }
        let was_leading = self.led.is_some();
        self.led = None;
        self.serving = false;
        if was_leading {
            self.deposed += 1;
        }
        if role.is_leader {
            // raft-rs appended this term's empty entry when it won: once it is applied, every
            // entry before it is.
            self.led = Some((role.term, self.replica.last_index()));
        }
        was_leading
    }

    /// The shell made the work's entries and hard state durable.
    pub fn persisted(&mut self, work: &Work) -> AfterPersist {
        self.replica.persisted(work)
    }

    /// The shell compacted its Raft log to `index` with `data` ([`Apply::Compact`]). A
    /// compaction point this replica is past already changes nothing.
    pub fn compacted(&mut self, index: u64, data: Vec<u8>) {
        if index <= self.replica.snapshot_index() {
            return;
        }
        self.replica.compact(index, data);
        self.applied.retain(|&(i, _, _)| i > index);
    }

    /// After a piece of work was carried out, with the topic log ending at `next_offset`: a
    /// leader whose term's first entry is applied starts serving (proposing from
    /// `next_offset`), and a serving leader proposes a compaction point once there is enough
    /// to compact.
    pub fn settle(&mut self, next_offset: u64, now_ms: i64) {
        if let Some((term, at)) = self.led {
            let r = &self.replica;
            if !self.serving && r.role().is_leader && r.term() == term && r.applied_index() >= at {
                self.proposed = next_offset;
                self.serving = true;
            }
        }
        self.propose_compaction(now_ms);
    }

    fn propose_compaction(&mut self, now_ms: i64) {
        if !self.serving {
            return;
        }
        if self.replica.snapshot_wanted() {
            // A member added since the stored snapshot was taken cannot take that one (raft-rs
            // restores only a snapshot whose configuration names it): compact at what this
            // leader applied, whatever it weighs and whoever lags. A replica that lacks records
            // before that point is re-seeded ([`Self::step`]).
            let at = self.replica.applied_index();
            let end = match self.applied.back() {
                Some(&(_, end, _)) => Some(end),
                None => self.replica.log().snapshot_data().and_then(snapshot_end),
            };
            if let Some(end) = end.filter(|_| at > self.compaction_proposed) {
                self.propose_compact(at, end, now_ms);
            }
            return;
        }
        let Some(matched) = self.replica.all_matched() else {
            return;
        };
        let mut best = None;
        let mut bytes = 0usize;
        for &(index, end, b) in &self.applied {
            if index > matched || index <= self.compaction_proposed {
                continue;
            }
            bytes += b;
            best = Some((index, end));
        }
        let Some((at, end)) = best else { return };
        if bytes < self.snapshot_min_bytes {
            return;
        }
        self.propose_compact(at, end, now_ms);
    }

    fn propose_compact(&mut self, at: u64, end: u64, now_ms: i64) {
        let mut value = Vec::with_capacity(16);
        value.extend_from_slice(&at.to_be_bytes());
        value.extend_from_slice(&end.to_be_bytes());
        if self
            .replica
            .propose(encode_entry(KIND_COMPACT, &value, now_ms))
            .is_ok()
        {
            self.compaction_proposed = at;
        }
    }

    /// The leader to publish for this partition if it changed since the last call: the one the
    /// replica knows of, `me` only once it serves.
    pub fn leader_changed(&mut self, me: NodeId) -> Option<Option<NodeId>> {
        let leader = match self.replica.role().leader {
            Some(l) if l == me => self.serving.then_some(l),
            other => other,
        };
        (self.published != Some(leader)).then(|| {
            self.published = Some(leader);
            leader
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_carries_its_batches_and_their_end() {
        let mut batches = Vec::new();
        encode_batch(
            5,
            1,
            &[(None, Some(b"a")), (None, Some(b"b"))],
            &mut batches,
        );
        encode_batch(7, 1, &[(None, Some(b"c"))], &mut batches);
        let entry = encode_batches(&batches, 42);
        assert_eq!(
            decode_entry(&entry).unwrap(),
            (Some(KIND_BATCHES), &batches[..])
        );
        assert_eq!(batches_end(&batches), Some(8));
        assert_eq!(batches_end(&[]), None);
        assert!(decode_entry(&entry[..entry.len() - 1]).is_err());
        assert_eq!(snapshot_end(&snapshot_data(77)), Some(77));
        assert_eq!(snapshot_end(b"RLTS"), None);
    }

    #[test]
    fn seeding_messages_read_back_and_garbage_is_refused() {
        let req = SeedMsg::Request { from: 3, upto: 90 };
        assert_eq!(decode_seed(&encode_seed(&req)).unwrap(), req);
        let chunk = SeedMsg::Chunk {
            from: 3,
            log_start: 10,
            batches: b"bytes",
        };
        assert_eq!(decode_seed(&encode_seed(&chunk)).unwrap(), chunk);
        let empty = SeedMsg::Chunk {
            from: 3,
            log_start: 0,
            batches: b"",
        };
        assert_eq!(decode_seed(&encode_seed(&empty)).unwrap(), empty);
        let bytes = encode_seed(&req);
        for cut in 0..bytes.len() {
            assert!(decode_seed(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode_seed(&long).is_err(), "trailing bytes");
        let backwards = encode_seed(&SeedMsg::Request { from: 9, upto: 8 });
        assert!(decode_seed(&backwards).is_err(), "from past upto");
        let mut unknown = bytes;
        unknown[0] = 7;
        assert!(decode_seed(&unknown).unwrap_err().contains("kind 7"));
        // A move's request and chunks (sealed or not, empty or not) read back; a cut chunk
        // header, a sealed flag other than 0 or 1 and a request with trailing bytes do not.
        let ask = SeedMsg::MoveRequest { from: 12 };
        assert_eq!(decode_seed(&encode_seed(&ask)).unwrap(), ask);
        let mut long = encode_seed(&ask);
        long.push(0);
        assert!(decode_seed(&long).is_err(), "trailing bytes");
        for (sealed, batches) in [(false, &b"bytes"[..]), (true, &b""[..])] {
            let chunk = SeedMsg::MoveChunk {
                from: 12,
                log_start: 4,
                end: 40,
                sealed,
                batches,
            };
            let bytes = encode_seed(&chunk);
            assert_eq!(decode_seed(&bytes).unwrap(), chunk);
            for cut in 0..26 {
                assert!(decode_seed(&bytes[..cut]).is_err(), "cut at {cut}");
            }
            let mut bad = bytes.clone();
            bad[25] = 2;
            assert!(decode_seed(&bad).is_err(), "a sealed flag of 2");
        }
    }

    /// Carry out `r`'s work as a shell would (nothing to store), returning what it applied.
    fn drain(r: &mut TopicReplica, next_offset: u64) -> Vec<Apply> {
        let mut applied = Vec::new();
        while let Some(tw) = r.work() {
            r.persisted(&tw.work);
            applied.extend(tw.apply);
            r.settle(next_offset, 0);
        }
        applied
    }

    #[test]
    fn a_deletion_is_proposed_only_by_a_serving_leader_and_applied_at_its_offset() {
        let mut r = TopicReplica::new(Replica::new(1, &[1]).unwrap(), 1 << 20);
        assert_eq!(r.propose_delete(5, 0), None, "not leading");
        r.replica_mut().campaign().unwrap();
        drain(&mut r, 10);
        assert!(r.serving());
        let index = r.propose_delete(7, 0).expect("proposed");
        let applied = drain(&mut r, 10);
        assert!(
            matches!(applied[..], [Apply::DeleteRecords { index: i, offset: 7 }] if i == index),
            "{applied:?}"
        );
        assert!(applied[0].batches().is_empty());
    }

    #[test]
    fn a_seed_answer_carries_what_was_read_or_where_to_restart_past_deleted_records() {
        let chunk = |from, log_start, batches| {
            Some(encode_seed(&SeedMsg::Chunk {
                from,
                log_start,
                batches,
            }))
        };
        assert_eq!(
            seed_chunk(3, 90, 10, Some(b"bytes")),
            chunk(3, 10, b"bytes")
        );
        // Everything from 3 to 90 deleted (the log starts at 120): restart at 90, not past it.
        assert_eq!(seed_chunk(3, 90, 120, None), chunk(3, 90, b""));
        // Deleted up to 40 only, nothing readable after: restart at 40.
        assert_eq!(seed_chunk(3, 90, 40, None), chunk(3, 40, b""));
        // Nothing deleted past the asked offset and nothing to read: no answer.
        assert_eq!(seed_chunk(50, 90, 40, None), None);
        assert_eq!(seed_chunk(40, 90, 40, None), None);
    }

    /// A leader's snapshot at `index` standing for a topic log ending at `end`, from node 1.
    fn snapshot_msg(index: u64, end: u64) -> crate::eraftpb::Message {
        let mut m = crate::eraftpb::Message::default();
        m.set_msg_type(crate::eraftpb::MessageType::MsgSnapshot);
        m.from = 1;
        m.to = 4;
        m.term = 2;
        let mut data = 0u64.to_be_bytes().to_vec();
        data.extend_from_slice(&snapshot_data(end));
        let snap = m.mut_snapshot();
        snap.data = data.into();
        snap.mut_metadata().index = index;
        snap.mut_metadata().term = 2;
        snap.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
        snap.mut_metadata().mut_conf_state().learners = vec![4];
        m
    }

    #[test]
    fn a_snapshot_past_the_records_is_not_taken_and_the_records_are_asked_for_chunk_by_chunk() {
        let mut r = TopicReplica::new(
            Replica::restart(4, &[1, 2, 3], Default::default()).unwrap(),
            1 << 20,
        );
        let ask = |from, upto| Some(encode_seed(&SeedMsg::Request { from, upto }));
        assert!(!r.seeding());
        // Nothing held, the snapshot stands for 500 records: ask node 1 for them.
        assert_eq!(
            r.step(snapshot_msg(40, 500), 0, 1_000),
            Stepped::Seed {
                to: 1,
                request: ask(0, 500)
            }
        );
        assert!(r.seeding());
        assert_eq!(r.replica().snapshot_index(), 0, "not taken");
        // Offered again before an answer: the request is in flight, none sent.
        assert_eq!(
            r.step(snapshot_msg(40, 500), 0, 1_500),
            Stepped::Seed {
                to: 1,
                request: None
            }
        );
        // ...but one unanswered for SEED_RETRY_MS is asked again (it may have been lost).
        assert_eq!(
            r.step(snapshot_msg(40, 500), 0, 1_000 + SEED_RETRY_MS),
            Stepped::Seed {
                to: 1,
                request: ask(0, 500)
            }
        );
        // A chunk took the log to 200: the next request follows at once.
        assert_eq!(r.seeded(200, 2_100), Some((1, ask(200, 500).unwrap())));
        // A useless chunk (nothing appended) asks again too, from where the log ends.
        assert_eq!(r.seeded(200, 2_200), Some((1, ask(200, 500).unwrap())));
        // The leader compacted further meanwhile: its newer snapshot moves the target.
        assert_eq!(
            r.step(snapshot_msg(60, 700), 200, 2_300),
            Stepped::Seed {
                to: 1,
                request: None
            },
            "the request from 200 is still in flight"
        );
        assert_eq!(r.seeded(700, 2_400), None, "every record held: done");
        assert!(!r.seeding());
        // Offered again now that the log ends where the snapshot does: taken.
        assert_eq!(r.step(snapshot_msg(60, 700), 700, 5_000), Stepped::Taken);
        assert!(r.replica().has_work());
        let work = r.work().expect("the snapshot to install");
        assert_eq!(
            work.work.snapshot.as_ref().map(|s| s.index),
            Some(60),
            "installed"
        );
        // A snapshot behind the records held cannot be made good by fetching: refused.
        let mut r = TopicReplica::new(
            Replica::restart(4, &[1, 2, 3], Default::default()).unwrap(),
            1 << 20,
        );
        assert_eq!(r.step(snapshot_msg(40, 500), 900, 1_000), Stepped::Refused);
        assert!(!r.seeding());
        // A chunk nobody asked for changes nothing.
        assert_eq!(r.seeded(100, 1_000), None);
    }
}
