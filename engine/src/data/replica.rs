//! A replicated topic partition's Raft side, on the shard that owns the partition: its replica
//! (`replication::Replica`), its Raft log (`storage::raft_log`, in `<partition dir>/raft/`) and
//! the writer task that carries out the replica's work and applies what commits to the
//! partition's topic log.
//!
//! The model (docs/replication.md, "Topic partitions"): the topic log is the state machine of
//! the partition's Raft group, and every replica — the leader too — writes a batch to its topic
//! log only once the Raft entry holding it is committed, so the high watermark (what consumers
//! read, what a producer's acks=all waits for) is Kafka's: what a majority holds.
//! - The leader validates and places a producer's batch as a single node does
//!   (`TopicLog::stage`: sequence checks, offsets, timestamps) and then proposes the staged
//!   batches, in offset order, as Raft entries. When an entry commits, the leader flushes its
//!   topic log up to that entry's end (`TopicLog::flush_upto`) and the producer is answered.
//! - A follower appends a committed entry's batches as they are (`TopicLog::stage_replicated`,
//!   Kafka's `appendAsFollower`: offsets and producer state as the leader placed them) and
//!   flushes. Re-applying an entry whose batches the log already holds changes nothing, which
//!   is what a restart does: the replica hands out its committed entries again and the ones the
//!   topic log had flushed before the crash are skipped.
//! - A replica that becomes leader serves only once every entry before its term's first one is
//!   applied (Raft §8's empty entry), so its next offset follows everything ever committed. A
//!   leader that stops leading drops what it staged and did not see commit (reopening its topic
//!   log from disk) and refuses the producers waiting on it with NOT_LEADER_OR_FOLLOWER: an entry
//!   of theirs that a majority holds commits under the next leader, and an idempotent
//!   producer's retry finds it there as a duplicate.
//!
//! Must not: decide anything Raft decides, write a batch to the topic log before its entry is
//! committed, or answer a producer before its batch is flushed.

use super::partition::{DataPartition, RaftPart};
use crate::cluster::{Cluster, NodeId};
use replication::eraftpb::Entry;
use replication::{Replica, Role};

use std::rc::{Rc, Weak};
use std::sync::Arc;
use storage::batch::{for_each_record, peek_batch, Peek};
use storage::io::GlommioDir;
use storage::raft_log::RaftLog;
use storage::topic_log::TopicLog;

/// The first byte of an entry's key: what the entry's value holds. Producer batches, offsets
/// assigned:
const KIND_BATCHES: u8 = 0;
/// A compaction point every replica holds (see [`propose_compaction`]): the index (u64) and the
/// topic log's end offset after it (u64).
const KIND_COMPACT: u8 = 1;
/// A topic partition's Raft snapshot: this magic, then the topic log's end offset at its index.
/// The records themselves stay in the topic log (no replica is ever sent such a snapshot for
/// records it lacks: the log is compacted only to what every replica holds).
const SNAPSHOT_MAGIC: &[u8; 4] = b"RLTS";
/// The most bytes of staged batches one entry carries (a single larger batch goes alone).
const MAX_ENTRY_BATCHES_BYTES: usize = 1 << 20;
/// The largest batch a replicated partition takes: its entry must fit one node-to-node frame
/// (`runtime::peers::MAX_FRAME_BYTES`) and one Raft log batch.
pub const MAX_REPLICATED_BATCH_BYTES: usize = 32 << 20;
/// The largest segment of a topic partition's Raft log.
pub const MAX_RAFT_SEGMENT_BYTES: u64 = 16 << 20;
/// The Raft log's bound on one stored entry (a bigger length reads as corruption).
pub const MAX_ENTRY_BYTES: usize = 64 << 20;

/// Hands a Raft message (raft-rs's encoding) of (topic id, partition) to the node-to-node link
/// to a node (the runtime's `peers::Links::send_topic`): never waits, may drop.
pub type SendTopic = Rc<dyn Fn(NodeId, uuid::Uuid, i32, &[u8])>;

/// What a shard's replicated topic partitions share: where their messages go and where their
/// leaders are published.
pub struct ClusterCtx {
    pub send: SendTopic,
    pub cluster: Arc<Cluster>,
    pub shards: usize,
}

/// An entry's kind and value (the one record of its batch).
fn decode_entry(data: &[u8]) -> Result<(Option<u8>, &[u8]), String> {
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

/// The producer batches an entry carries, if it is a batches entry.
#[cfg(test)]
fn entry_batches(data: &[u8]) -> Result<Option<&[u8]>, String> {
    Ok(match decode_entry(data)? {
        (Some(KIND_BATCHES), v) => Some(v),
        _ => None,
    })
}

/// The end offset (last offset + 1) of the last of `batches`, if there is one.
fn batches_end(batches: &[u8]) -> Option<u64> {
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

/// One entry's data: a one-record batch (what `storage::raft_log` stores) whose key is the
/// entry's kind and whose value is its content.
fn encode_entry_of(kind: u8, value: &[u8], now_ms: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 96);
    storage::batch::encode_batch(0, now_ms, &[(Some(&[kind][..]), Some(value))], &mut out);
    out
}

/// A [`KIND_BATCHES`] entry: producer batches, offsets assigned.
fn encode_entry(batches: &[u8], now_ms: i64) -> Vec<u8> {
    encode_entry_of(KIND_BATCHES, batches, now_ms)
}

/// Leader: propose every staged batch not proposed yet.
fn propose_staged(p: &DataPartition, raft: &RaftPart) {
    if !raft.serving.get() {
        return;
    }
    loop {
        let data = {
            let log = p.log.borrow();
            match log.pending_from(raft.proposed.get(), MAX_ENTRY_BATCHES_BYTES) {
                Some((_, last, bytes)) => {
                    (last + 1, encode_entry(bytes, crate::clock::wall_clock_ms()))
                }
                None => return,
            }
        };
        match raft.replica.borrow_mut().propose(data.1) {
            Ok(_) => raft.proposed.set(data.0),
            // Not leading any more: the next work says so and this replica steps down.
            Err(_) => return,
        }
    }
}

/// The partition's writer: propose what the leader staged, carry out the replica's work (send,
/// make durable, apply what committed), one piece at a time. The only task that writes the
/// partition's Raft log or flushes its topic log.
pub(super) async fn writer(
    part: Weak<DataPartition>,
    ctx: Rc<ClusterCtx>,
    mut log: RaftLog<GlommioDir>,
) {
    loop {
        let Some(p) = part.upgrade() else { return };
        if p.closed.get() {
            return;
        }
        let raft = p.raft.as_ref().expect("a replicated partition");
        propose_staged(&p, raft);
        let work = raft.replica.borrow_mut().work();
        let Some(work) = work else {
            let w = p.kick.register();
            drop(p);
            w.wait().await;
            continue;
        };
        send(&ctx, &p, &work.send_now);
        if let Some(role) = work.role {
            role_changed(&p, raft, role).await;
        }
        if let Some(snap) = &work.snapshot {
            check_snapshot(&p, raft, snap);
        }
        // Committed entries go into the topic log now, before anything awaits: a replica that
        // starts serving in this step must place new batches after them.
        let mut flush_to = None;
        let mut compactions = Vec::new();
        for e in &work.committed {
            match apply(&p, raft, e) {
                Applied::Batches(end) => flush_to = Some(end),
                Applied::Compact(index, end) => compactions.push((index, end)),
                Applied::Nothing => {}
            }
        }
        let leader = raft.role().leader.map_or(-1, |l| l as i32);
        if let Err(e) = crate::raft_io::persist(&mut log, &work, leader).await {
            // Fail-stop, as a `__consumer_offsets` replica does (`runtime::replicated`).
            panic!(
                "{}-{}: the Raft log could not be written ({e}); stopping this node",
                p.topic.name, p.partition
            );
        }
        let after = raft.replica.borrow_mut().persisted(&work);
        send(&ctx, &p, &after.send);
        if let Some(end) = flush_to {
            if let Err(e) = TopicLog::flush_upto(&p.log, end).await {
                // The entries are durable in the Raft log; a topic log that cannot be written
                // would serve less than is committed.
                panic!(
                    "{}-{}: the topic log could not be written ({e}); stopping this node",
                    p.topic.name, p.partition
                );
            }
            p.changed.notify_all();
        }
        for (index, end) in compactions {
            compact(&p, raft, &mut log, index, end).await;
        }
        if let Some((term, at)) = raft.led.get() {
            let r = raft.replica.borrow();
            if !raft.serving.get()
                && r.role().is_leader
                && r.term() == term
                && r.applied_index() >= at
            {
                raft.proposed.set(p.log.borrow().next_offset());
                raft.serving.set(true);
                tracing::debug!(topic = %p.topic.name, partition = p.partition, term, "leading");
            }
        }
        propose_compaction(raft);
        publish(&ctx, &p, raft);
    }
}

/// What applying a committed entry asks of the writer.
enum Applied {
    Nothing,
    /// Batches staged: flush the topic log up to this offset.
    Batches(u64),
    /// Compact the Raft log to (index, topic log end offset) once what precedes is flushed.
    Compact(u64, u64),
}

/// Apply one committed entry: stage its batches the topic log does not hold yet.
fn apply(p: &DataPartition, raft: &RaftPart, e: &Entry) -> Applied {
    let fail = |why: String| -> ! {
        panic!(
            "{}-{}: committed entry {} does not decode ({why}); stopping this node",
            p.topic.name, p.partition, e.index
        )
    };
    let (kind, value) = decode_entry(&e.data).unwrap_or_else(|why| fail(why));
    match kind {
        Some(KIND_BATCHES) => {
            let Some(end) = batches_end(value) else {
                return Applied::Nothing;
            };
            if let Err(err) = p.log.borrow_mut().stage_replicated(value) {
                // Committed entries are contiguous in offsets; a gap means this replica's topic
                // log lost what it had flushed, which no restart can make good.
                panic!(
                    "{}-{}: committed entry {} does not follow the topic log ({}); stopping \
                     this node",
                    p.topic.name,
                    p.partition,
                    e.index,
                    err.message()
                );
            }
            raft.applied
                .borrow_mut()
                .push_back((e.index, end, e.data.len()));
            Applied::Batches(end)
        }
        Some(KIND_COMPACT) if value.len() == 16 => Applied::Compact(
            u64::from_be_bytes(value[..8].try_into().expect("8 bytes")),
            u64::from_be_bytes(value[8..].try_into().expect("8 bytes")),
        ),
        Some(KIND_COMPACT) => fail(format!("a compaction entry of {} bytes", value.len())),
        // A kind a newer node wrote: nothing this node knows to apply.
        _ => Applied::Nothing,
    }
}

/// Leader: once the entries every replica holds weigh `raft_io::snapshot_min_bytes()`,
/// propose compacting to the last of them. Every replica compacts when the proposal applies,
/// so a replica that becomes leader later never has to send a follower a snapshot: the
/// records below a compaction point are on every replica's disk, in its topic log.
fn propose_compaction(raft: &RaftPart) {
    if !raft.serving.get() {
        return;
    }
    let mut r = raft.replica.borrow_mut();
    let Some(matched) = r.all_matched() else {
        return;
    };
    let (at, end, bytes) = {
        let applied = raft.applied.borrow();
        let mut best = None;
        let mut bytes = 0usize;
        for &(index, end, b) in applied.iter() {
            if index > matched || index <= raft.compaction_proposed.get() {
                continue;
            }
            bytes += b;
            best = Some((index, end));
        }
        match best {
            Some((index, end)) => (index, end, bytes),
            None => return,
        }
    };
    if bytes < crate::raft_io::snapshot_min_bytes() {
        return;
    }
    let mut value = Vec::with_capacity(16);
    value.extend_from_slice(&at.to_be_bytes());
    value.extend_from_slice(&end.to_be_bytes());
    let entry = encode_entry_of(KIND_COMPACT, &value, crate::clock::wall_clock_ms());
    if r.propose(entry).is_ok() {
        raft.compaction_proposed.set(at);
    }
}

/// Compact the Raft log to `index`, whose entries the topic log holds durably up to `end`.
async fn compact(
    p: &DataPartition,
    raft: &RaftPart,
    log: &mut RaftLog<GlommioDir>,
    index: u64,
    end: u64,
) {
    if index <= raft.replica.borrow().snapshot_index() {
        return; // compacted to it already (a repeated proposal)
    }
    assert!(
        p.log.borrow().high_watermark() >= end,
        "{}-{}: compacting to offset {end} before the topic log holds it",
        p.topic.name,
        p.partition
    );
    let term = raft.replica.borrow().term_at(index);
    let mut data = SNAPSHOT_MAGIC.to_vec();
    data.extend_from_slice(&end.to_be_bytes());
    if let Err(e) = log.compact(index, term, &data).await {
        panic!(
            "{}-{}: the Raft snapshot could not be written ({e}); stopping this node",
            p.topic.name, p.partition
        );
    }
    raft.replica.borrow_mut().compact(index, data);
    raft.applied.borrow_mut().retain(|&(i, _, _)| i > index);
    tracing::debug!(topic = %p.topic.name, partition = p.partition, index, end, "raft log compacted");
}

/// A leader's snapshot reached this replica: its index is past everything this replica holds in
/// its Raft log. That happens only to a replica that lost its disk (compaction points are what
/// every replica held), and the snapshot does not carry the records.
fn check_snapshot(p: &DataPartition, raft: &RaftPart, snap: &replication::LogSnapshot) {
    let end = (snap.data.len() == 12 && &snap.data[..4] == SNAPSHOT_MAGIC)
        .then(|| u64::from_be_bytes(snap.data[4..].try_into().expect("8 bytes")));
    let have = p.log.borrow().next_offset();
    if end != Some(have) {
        panic!(
            "{}-{}: the leader sent a Raft snapshot at index {} (topic log end {end:?}) and this \
             replica's topic log ends at {have}: it lost records the others hold, and a \
             replica cannot be re-seeded from the others yet; stopping this node",
            p.topic.name, p.partition, snap.index
        );
    }
    raft.applied.borrow_mut().clear();
}

async fn role_changed(p: &DataPartition, raft: &RaftPart, role: Role) {
    if role.is_leader && raft.led.get().is_some_and(|(t, _)| t == role.term) {
        return;
    }
    let was_leading = raft.led.get().is_some();
    raft.led.set(None);
    raft.serving.set(false);
    if was_leading {
        raft.deposed.set(raft.deposed.get() + 1);
        let staged = {
            let log = p.log.borrow();
            log.next_offset() > log.high_watermark()
        };
        if staged {
            // Batches staged here and not known to be committed: they may never be (a later
            // leader's entries take their offsets), so the log goes back to what is flushed,
            // which is all committed; committed entries re-stage what of it a majority had.
            let config = p.log_config();
            let durable_end = p.log.borrow().high_watermark();
            match super::partition::reopen_after_failed_flush(&p.dir, &config, durable_end).await {
                Ok(log) => *p.log.borrow_mut() = log,
                Err(e) => panic!(
                    "{}-{}: reloading the topic log after losing leadership failed ({e}); \
                     stopping this node",
                    p.topic.name, p.partition
                ),
            }
        }
        p.changed.notify_all();
    }
    if role.is_leader {
        // raft-rs appended this term's empty entry when it won: once it is applied, every entry
        // before it is.
        let at = raft.replica.borrow().last_index();
        raft.led.set(Some((role.term, at)));
    }
}

fn send(ctx: &ClusterCtx, p: &DataPartition, msgs: &[replication::eraftpb::Message]) {
    for m in msgs {
        (ctx.send)(m.to, p.topic.id, p.partition, &replication::encode(m));
    }
}

/// Publish the leader this replica knows of (itself only once it serves) for Metadata and
/// FindCoordinator on this node.
fn publish(ctx: &ClusterCtx, p: &DataPartition, raft: &RaftPart) {
    let role = raft.role();
    let leader = match role.leader {
        Some(l) if l == ctx.cluster.node_id => raft.serving.get().then_some(l),
        other => other,
    };
    if raft.published.get() != Some(leader) {
        raft.published.set(Some(leader));
        ctx.cluster
            .set_topic_leader(p.topic.id, p.partition, leader);
        tracing::debug!(topic = %p.topic.name, partition = p.partition, ?leader, "topic partition leader");
    }
}

/// Open the Raft side of a replicated partition in `dir/raft`: its log, and a replica restarted
/// from it over `voters`. The preferred replica (the first, the node the metadata log placed the
/// partition on) stands for election at once, so leaders start spread over the nodes.
/// The Raft log rolls every four compaction intervals (`raft_io::snapshot_min_bytes()`, 16
/// MiB by default): compaction removes whole segments, so a replica's Raft log keeps about five
/// intervals on disk and the topic log holds the records.
pub(super) async fn open(
    dir: &std::path::Path,
    node: NodeId,
    voters: &[NodeId],
) -> std::io::Result<(RaftPart, RaftLog<GlommioDir>)> {
    let raft_dir = GlommioDir::new(dir.join("raft"))?;
    let segment_bytes = 4 * crate::raft_io::snapshot_min_bytes() as u64;
    let config = storage::log::LogConfig {
        segment_bytes: segment_bytes.clamp(4096, MAX_RAFT_SEGMENT_BYTES),
        max_batch_bytes: MAX_ENTRY_BYTES,
        ..storage::log::LogConfig::default()
    };
    let (log, hs, snapshot, stored) = RaftLog::open(raft_dir, config).await?;
    let mut replica = Replica::restart(node, voters, crate::raft_io::durable(hs, snapshot, stored))
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    if voters.first() == Some(&node) {
        let _ = replica.campaign();
    }
    Ok((RaftPart::new(replica), log))
}

/// Step a peer's message; false if it does not decode or step.
pub(super) fn step(raft: &RaftPart, message: &[u8]) -> bool {
    match replication::decode(message) {
        Ok(m) => raft.replica.borrow_mut().step(m).is_ok(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_carries_its_batches_and_their_end() {
        let mut batches = Vec::new();
        storage::batch::encode_batch(
            5,
            1,
            &[(None, Some(b"a")), (None, Some(b"b"))],
            &mut batches,
        );
        storage::batch::encode_batch(7, 1, &[(None, Some(b"c"))], &mut batches);
        let entry = encode_entry(&batches, 42);
        assert_eq!(entry_batches(&entry).unwrap(), Some(&batches[..]));
        assert_eq!(batches_end(&batches), Some(8));
        assert_eq!(batches_end(&[]), None);
        assert!(entry_batches(&entry[..entry.len() - 1]).is_err());
        let mut other = Vec::new();
        storage::batch::encode_batch(0, 1, &[(Some(b"\x07"), Some(b"x"))], &mut other);
        assert_eq!(entry_batches(&other).unwrap(), None, "an unknown kind");
    }
}
