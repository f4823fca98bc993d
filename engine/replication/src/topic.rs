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
//!   ([`Apply::Compact`]): no replica ever needs a snapshot of records it lacks, unless it lost
//!   its disk ([`snapshot_end`] lets the shell tell).
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
/// A topic partition's Raft snapshot: this magic, then the topic log's end offset at its index.
pub const SNAPSHOT_MAGIC: &[u8; 4] = b"RLTS";
/// The most bytes of staged batches one entry carries (a single larger batch goes alone).
pub const MAX_ENTRY_BATCHES_BYTES: usize = 1 << 20;

/// What applying a committed entry asks of the shell, in order.
#[derive(Debug)]
pub enum Apply {
    /// Stage the batches of `entry` (its value, [`Apply::batches`]) the topic log does not hold
    /// yet, then flush it up to `end` (before any later [`Apply::Compact`]).
    Batches { index: u64, end: u64, entry: Entry },
    /// Once the topic log has flushed everything before it: compact the Raft log to `index`,
    /// with the snapshot [`snapshot_data`]`(end)`, then call [`TopicReplica::compacted`].
    Compact { index: u64, end: u64 },
}

impl Apply {
    /// The producer batches of a [`Apply::Batches`] (empty for a compaction).
    pub fn batches(&self) -> &[u8] {
        match self {
            Apply::Batches { entry, .. } => decode_entry(&entry.data)
                .map(|(_, v)| v)
                .expect("decoded when it was handed out"),
            Apply::Compact { .. } => &[],
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
        }
    }

    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// For what the shell feeds Raft directly: peer messages, ticks, a campaign.
    pub fn replica_mut(&mut self) -> &mut Replica {
        &mut self.replica
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
}
