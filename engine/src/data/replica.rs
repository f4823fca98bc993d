//! The glommio shell of a replicated topic partition, on the shard that owns the partition:
//! its replica (`replication::topic::TopicReplica`, which decides what to propose, what to
//! apply, when to serve and when to compact), its Raft log (`storage::raft_log`, in
//! `<partition dir>/raft/`), and the writer task that carries out the replica's work against the
//! Raft log and the partition's topic log. The model is in `replication::topic` and
//! docs/replication.md ("Topic partitions").
//!
//! Must not: decide anything the replica decides, write a batch to the topic log before its
//! entry is committed, or let a producer be answered before its batch is flushed.

use super::partition::DataPartition;
use crate::cluster::{Cluster, NodeId};
use replication::topic::{Apply, TopicReplica};
use replication::Replica;
use std::cell::RefCell;

use std::rc::{Rc, Weak};
use std::sync::Arc;
use storage::io::GlommioDir;
use storage::raft_log::RaftLog;
use storage::topic_log::TopicLog;

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

/// The partition's writer: propose what the leader staged, carry out the replica's work (send,
/// make durable, apply what committed, compact), one piece at a time, in the order
/// `replication::topic::TopicWork` gives. The only task that writes the partition's Raft log or
/// flushes its topic log.
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
        let work = {
            let topic_log = p.log.borrow();
            let mut r = raft.borrow_mut();
            r.propose_staged(
                |from| {
                    topic_log
                        .pending_from(from, replication::topic::MAX_ENTRY_BATCHES_BYTES)
                        .map(|(_, last, bytes)| (last, bytes))
                },
                crate::clock::wall_clock_ms(),
            );
            r.work()
        };
        let Some(tw) = work else {
            let w = p.kick.register();
            drop(p);
            w.wait().await;
            continue;
        };
        send(&ctx, &p, &tw.work.send_now);
        if tw.stepped_down {
            drop_staged(&p).await;
        }
        if let Some(snap) = &tw.work.snapshot {
            check_snapshot(&p, snap);
        }
        // Committed batches go into the topic log now, before anything awaits: a replica that
        // starts serving after this work must place new batches after them.
        let mut flush_to = None;
        for a in &tw.apply {
            if let Apply::Batches { index, end, .. } = a {
                if let Err(err) = p.log.borrow_mut().stage_replicated(a.batches()) {
                    // Committed entries are contiguous in offsets; a gap means this replica's
                    // topic log lost what it had flushed, which no restart can make good.
                    panic!(
                        "{}-{}: committed entry {index} does not follow the topic log ({}); \
                         stopping this node",
                        p.topic.name,
                        p.partition,
                        err.message()
                    );
                }
                flush_to = Some(*end);
            }
        }
        let leader = raft.borrow().role().leader.map_or(-1, |l| l as i32);
        if let Err(e) = crate::raft_io::persist(&mut log, &tw.work, leader).await {
            // Fail-stop, as a `__consumer_offsets` replica does.
            panic!(
                "{}-{}: the Raft log could not be written ({e}); stopping this node",
                p.topic.name, p.partition
            );
        }
        let after = raft.borrow_mut().persisted(&tw.work);
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
        for a in &tw.apply {
            if let Apply::Compact { index, end } = a {
                compact(&p, &mut log, *index, *end).await;
            }
        }
        let next_offset = p.log.borrow().next_offset();
        let mut r = raft.borrow_mut();
        let was_serving = r.serving();
        r.settle(next_offset, crate::clock::wall_clock_ms());
        if r.serving() && !was_serving {
            tracing::debug!(topic = %p.topic.name, partition = p.partition, term = r.role().term, "leading");
        }
        if let Some(leader) = r.leader_changed(ctx.cluster.node_id) {
            ctx.cluster
                .set_topic_leader(p.topic.id, p.partition, leader);
            tracing::debug!(topic = %p.topic.name, partition = p.partition, ?leader, "topic partition leader");
        }
    }
}

/// This replica stopped leading: the batches it staged and did not see commit may never commit
/// (a later leader's entries take their offsets), so the topic log goes back to what it
/// flushed, all of it committed (committed entries re-stage what of it a majority had), and the
/// producers waiting on them are woken to be refused (`DataPartition::deposed` moved).
async fn drop_staged(p: &DataPartition) {
    let staged = {
        let log = p.log.borrow();
        log.next_offset() > log.high_watermark()
    };
    if staged {
        let config = p.log_config();
        let durable_end = p.log.borrow().high_watermark();
        match super::partition::reopen_after_failed_flush(&p.dir, &config, durable_end).await {
            Ok(log) => *p.log.borrow_mut() = log,
            Err(e) => panic!(
                "{}-{}: reloading the topic log after losing leadership failed ({e}); stopping \
                 this node",
                p.topic.name, p.partition
            ),
        }
    }
    p.changed.notify_all();
}

/// Compact the Raft log to `index`, whose entries the topic log holds durably up to `end`.
async fn compact(p: &DataPartition, log: &mut RaftLog<GlommioDir>, index: u64, end: u64) {
    let raft = p.raft.as_ref().expect("a replicated partition");
    if index <= raft.borrow().replica().snapshot_index() {
        return; // compacted to it already (a repeated proposal)
    }
    assert!(
        p.log.borrow().high_watermark() >= end,
        "{}-{}: compacting to offset {end} before the topic log holds it",
        p.topic.name,
        p.partition
    );
    let snap = {
        let raft = raft.borrow();
        replication::LogSnapshot {
            index,
            term: raft.replica().term_at(index),
            data: replication::topic::snapshot_data(end),
            conf: Some(raft.replica().conf_at(index)),
        }
    };
    if let Err(e) = crate::raft_io::compact(log, &snap).await {
        panic!(
            "{}-{}: the Raft snapshot could not be written ({e}); stopping this node",
            p.topic.name, p.partition
        );
    }
    raft.borrow_mut().compacted(index, snap.data);
    tracing::debug!(topic = %p.topic.name, partition = p.partition, index, end, "raft log compacted");
}

/// A leader's snapshot reached this replica: its index is past everything this replica holds in
/// its Raft log. That happens only to a replica that lost its disk (compaction points are what
/// every replica held), and the snapshot does not carry the records.
fn check_snapshot(p: &DataPartition, snap: &replication::LogSnapshot) {
    let end = replication::topic::snapshot_end(&snap.data);
    let have = p.log.borrow().next_offset();
    if end != Some(have) {
        panic!(
            "{}-{}: the leader sent a Raft snapshot at index {} (topic log end {end:?}) and this \
             replica's topic log ends at {have}: it lost records the others hold, and a \
             replica cannot be re-seeded from the others yet; stopping this node",
            p.topic.name, p.partition, snap.index
        );
    }
}

fn send(ctx: &ClusterCtx, p: &DataPartition, msgs: &[replication::eraftpb::Message]) {
    for m in msgs {
        (ctx.send)(m.to, p.topic.id, p.partition, &replication::encode(m));
    }
}

/// The Raft log rolls every four compaction intervals (`raft_io::snapshot_min_bytes()`, 16
/// MiB by default): compaction removes whole segments, so a replica's Raft log keeps about five
/// intervals on disk and the topic log holds the records.
pub(super) async fn open(
    dir: &std::path::Path,
    node: NodeId,
    first_voters: &[NodeId],
    campaign: bool,
) -> std::io::Result<(RefCell<TopicReplica>, RaftLog<GlommioDir>)> {
    let raft_dir = GlommioDir::new(dir.join("raft"))?;
    let segment_bytes = 4 * crate::raft_io::snapshot_min_bytes() as u64;
    let config = storage::log::LogConfig {
        segment_bytes: segment_bytes.clamp(4096, MAX_RAFT_SEGMENT_BYTES),
        max_batch_bytes: MAX_ENTRY_BYTES,
        ..storage::log::LogConfig::default()
    };
    let (log, hs, snapshot, stored) = RaftLog::open(raft_dir, config).await?;
    let mut replica = Replica::restart(
        node,
        first_voters,
        crate::raft_io::durable(hs, snapshot, stored)?,
    )
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    if campaign {
        let _ = replica.campaign();
    }
    Ok((
        RefCell::new(TopicReplica::new(
            replica,
            crate::raft_io::snapshot_min_bytes(),
        )),
        log,
    ))
}

/// Step a peer's message; false if it does not decode or step, or is a snapshot this replica
/// must not take.
///
/// A leader's snapshot carries no records, only the topic log's end at its index
/// ([`replication::topic::snapshot_end`]); a replica whose topic log (ending at `log_end`)
/// does not end there would be left with a hole. That is a replica added to the partition
/// (a node that joined the cluster) after the others compacted their Raft logs: it is not
/// taken, so the new replica stays a learner (never counted in a majority, out of the ISR) and
/// the partition keeps its older replicas, until re-seeding a replica from the others'
/// topic logs is built. Logged once in a while.
pub(super) fn step(raft: &RefCell<TopicReplica>, message: &[u8], log_end: u64) -> bool {
    let Ok(m) = replication::decode(message) else {
        return false;
    };
    if m.get_msg_type() == replication::eraftpb::MessageType::MsgSnapshot {
        let end = replication::topic::snapshot_end(replication::shell_snapshot_data(
            m.get_snapshot().get_data(),
        ));
        let ahead = m.get_snapshot().get_metadata().index > raft.borrow().replica().last_index();
        if ahead && end != Some(log_end) {
            static REFUSED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = REFUSED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if n % 100 == 0 {
                tracing::warn!(
                    snapshot_end = ?end,
                    log_end,
                    refused_so_far = n + 1,
                    "a replicated topic partition's leader sent a snapshot past this replica's \
                     records (it joined after the others compacted): not taken; this replica \
                     stays a learner, as re-seeding a replica's records is not built"
                );
            }
            return false;
        }
    }
    raft.borrow_mut().replica_mut().step(m).is_ok()
}
