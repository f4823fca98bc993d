//! The glommio shell of a replicated topic partition, on the shard that owns the partition:
//! its replica (`replication::topic::TopicReplica`, which decides what to propose, what to
//! apply, when to serve and when to compact), its Raft log (`storage::raft_log`, in
//! `<partition dir>/raft/`), and the writer task that carries out the replica's work against the
//! Raft log and the partition's topic log. The model is in `replication::topic` and
//! docs/replication.md ("Topic partitions").
//!
//! Must not: decide anything the replica decides, write a batch to the topic log before its
//! entry is committed, let a producer be answered before its batch is written there (its entry
//! durable in a majority's Raft logs), or let the Raft log forget entries (a compaction, an
//! installed snapshot) whose batches the topic log has not synced.

use super::partition::DataPartition;
use crate::cluster::{Cluster, NodeId};
use replication::topic::{
    decode_seed, seed_chunk, Apply, SeedMsg, Stepped, TopicReplica, SEED_CHUNK_BYTES,
};
use replication::Replica;
use std::cell::RefCell;

use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use storage::io::GlommioDir;
use storage::raft_log::RaftLog;
use storage::topic_log::{Read, TopicLog};

/// The largest batch a replicated partition takes: its entry must fit one node-to-node frame
/// (`runtime::peers::MAX_FRAME_BYTES`) and one Raft log batch.
pub const MAX_REPLICATED_BATCH_BYTES: usize = 32 << 20;
/// The largest segment of a topic partition's Raft log.
pub const MAX_RAFT_SEGMENT_BYTES: u64 = 16 << 20;
/// The Raft log's bound on one stored entry (a bigger length reads as corruption).
pub const MAX_ENTRY_BYTES: usize = 64 << 20;

/// Hands a Raft message (raft-rs's encoding) of (topic id, partition) to the node-to-node link
/// to a node (the runtime's `peers::Links::send_topic_frame`): never waits, may drop.
pub type SendTopic = Rc<dyn Fn(NodeId, uuid::Uuid, i32, &[u8])>;

/// What a shard's replicated topic partitions share: where their messages go and where their
/// leaders are published.
pub struct ClusterCtx {
    pub send: SendTopic,
    /// Where re-seeding messages go (`runtime::peers::Links::send_topic_frame` with
    /// `TOPIC_SEED`), as `send` for Raft's.
    pub seed: SendTopic,
    /// Where a leader's word to the nodes without a replica goes (`runtime::peers::
    /// TOPIC_LEADER`; the message is its term), as `send` for Raft's.
    pub hint: SendTopic,
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
        let chunk = p.seed.borrow_mut().take();
        if let Some((log_start, batches)) = chunk {
            apply_seed(&ctx, &p, log_start, &batches).await;
            continue;
        }
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
                    // Committed entries are contiguous in offsets, and a restart replays every
                    // one after the Raft snapshot, which the topic log synced before it was
                    // taken; a gap means the topic log lost what it had synced, which no
                    // restart can make good.
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
        if tw.work.snapshot.is_some() {
            // The installed snapshot replaces the Raft log's entries up to it, which a restart
            // would otherwise replay into the topic log.
            sync_before_forgetting(&p, "a snapshot").await;
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
            // Written without an fdatasync: the entries are durable in the Raft log, which
            // replays them after a crash, and the topic log is synced before the Raft log
            // forgets them (`compact`). One fdatasync per round of entries, not two.
            if let Err(e) = TopicLog::write_upto(&p.log, end).await {
                // A topic log that cannot be written would serve less than is committed.
                panic!(
                    "{}-{}: the topic log could not be written ({e}); stopping this node",
                    p.topic.name, p.partition
                );
            }
            p.changed.notify_all();
        }
        // DeleteRecords after the flush: the leader proposed an offset no later than its high
        // watermark, so every batch before it is flushed here by now.
        for a in &tw.apply {
            if let Apply::DeleteRecords { index, offset } = a {
                delete_records(&p, *index, *offset).await;
            }
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

/// A committed DeleteRecords (entry `index`): move the topic log's start up to `offset`, as
/// every replica does when it applies the entry, and wake the request waiting on the leader.
/// Replaying it after a restart changes nothing (the start is there already).
async fn delete_records(p: &DataPartition, index: u64, offset: u64) {
    let hw = p.log.borrow().high_watermark();
    if offset > hw {
        // The leader proposed at most its high watermark, and this replica applied and flushed
        // every entry before this one: a broken invariant, and serving on would serve a log
        // whose start differs from the others'.
        panic!(
            "{}-{}: committed DeleteRecords {index} to offset {offset} is past this replica's \
             high watermark {hw}; stopping this node",
            p.topic.name, p.partition
        );
    }
    match TopicLog::delete_records(&p.log, offset).await {
        Ok(start) => {
            tracing::debug!(topic = %p.topic.name, partition = p.partition, index, start, "records deleted")
        }
        // The entry is durable in the Raft log; a replica that cannot move its start would
        // serve records the others deleted.
        Err(e) => panic!(
            "{}-{}: DeleteRecords could not be written ({e}); stopping this node",
            p.topic.name, p.partition
        ),
    }
    p.changed.notify_all();
}

/// Make the topic log durable before the Raft log forgets entries whose batches it holds (`what`:
/// a compaction, a snapshot install): `writer` writes them without a sync, counting on the Raft
/// log to replay them after a crash. A topic log that cannot be synced stops the node.
async fn sync_before_forgetting(p: &DataPartition, what: &str) {
    if let Err(e) = TopicLog::sync(&p.log).await {
        panic!(
            "{}-{}: the topic log could not be synced before {what} ({e}); stopping this node",
            p.topic.name, p.partition
        );
    }
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
    // The entries up to `index` go from the Raft log.
    sync_before_forgetting(p, "compaction").await;
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

/// A leader's snapshot was installed: its index is past everything this replica held in its
/// Raft log. [`step`] takes only a snapshot whose topic log end is this log's (a replica short of
/// it is re-seeded first), so a mismatch here is a broken invariant, and serving on would serve
/// a log with a hole.
fn check_snapshot(p: &DataPartition, snap: &replication::LogSnapshot) {
    let end = replication::topic::snapshot_end(&snap.data);
    let have = p.log.borrow().next_offset();
    if end != Some(have) {
        panic!(
            "{}-{}: a Raft snapshot at index {} (topic log end {end:?}) was installed and this \
             replica's topic log ends at {have}; stopping this node",
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

/// Step a peer's Raft message. A snapshot past the records this replica holds (it was added to
/// the partition, a node that joined the cluster, after the others compacted their Raft logs)
/// is not taken: the replica asks the snapshot's sender for the records first
/// (`replication::topic::TopicReplica::step`, [`seed`]). Refusals are logged once in a while.
pub(super) fn step(ctx: &ClusterCtx, p: &DataPartition, message: &[u8]) {
    let Some(raft) = &p.raft else { return };
    let Ok(m) = replication::decode(message) else {
        return;
    };
    let log_end = p.log.borrow().next_offset();
    let now = crate::raft_io::mono_ms();
    let stepped = raft.borrow_mut().step(m, log_end, now);
    match stepped {
        Stepped::Taken | Stepped::Deferred => {}
        Stepped::Seed { to, request } => {
            if let Some(request) = request {
                tracing::debug!(topic = %p.topic.name, partition = p.partition, from = to, log_end, "re-seeding: records asked for");
                (ctx.seed)(to, p.topic.id, p.partition, &request);
            }
        }
        Stepped::Refused => {
            static REFUSED: AtomicU64 = AtomicU64::new(0);
            let n = REFUSED.fetch_add(1, Ordering::Relaxed);
            if n % 100 == 0 {
                tracing::warn!(
                    topic = %p.topic.name,
                    partition = p.partition,
                    log_end,
                    refused_so_far = n + 1,
                    "a replicated topic partition's Raft message was refused (a snapshot behind \
                     this replica's records, or one Raft does not take)"
                );
            }
        }
    }
    if raft.borrow().replica().has_work() {
        p.kick.notify_all();
    }
}

/// A re-seeding message from node `from` ([`SeedMsg`]). A request is answered from this
/// replica's topic log (everything in it up to the high watermark is committed, on a leader as
/// on a follower): whole batches from the asked offset (or this log's start, if later) up to the
/// asked end, at most [`SEED_CHUNK_BYTES`] (or one larger batch), or none but where to restart
/// when every record from the asked offset to the asked end was deleted here. A chunk is handed to the
/// writer ([`apply_seed`]) if this replica is being re-seeded, and dropped otherwise.
pub(super) async fn seed(ctx: &ClusterCtx, p: &DataPartition, from: NodeId, message: &[u8]) {
    let Some(raft) = &p.raft else { return };
    let msg = match decode_seed(message) {
        Ok(m) => m,
        Err(why) => {
            tracing::warn!(topic = %p.topic.name, partition = p.partition, from, %why, "a re-seeding message does not decode; dropped");
            return;
        }
    };
    match msg {
        SeedMsg::Request { from: offset, upto } => {
            let (plan, start) = p.log.borrow().read_for_seed(offset, upto, SEED_CHUNK_BYTES);
            let batches = match plan {
                Read::Data(plan) => match plan.read().await {
                    Ok(b) => Some(b),
                    Err(e) => {
                        tracing::warn!(topic = %p.topic.name, partition = p.partition, error = %e, "re-seeding: reading the topic log failed");
                        return;
                    }
                },
                _ => None,
            };
            if let Some(chunk) = seed_chunk(offset, upto, start, batches.as_deref()) {
                (ctx.seed)(from, p.topic.id, p.partition, &chunk);
            }
        }
        SeedMsg::Chunk {
            log_start, batches, ..
        } => {
            if raft.borrow().seeding() {
                *p.seed.borrow_mut() = Some((log_start, batches.to_vec()));
                p.kick.notify_all();
            }
        }
        // A move's messages are for partitions of replication factor 1 (`super::moving`).
        SeedMsg::MoveRequest { .. } | SeedMsg::MoveChunk { .. } => {}
    }
}

/// Append a re-seeding chunk (the sender's log start, whole batches) to the topic log, as a
/// follower appends committed entries, then ask for the next one. A chunk that starts after
/// this log's end (the sender's log starts later: retention or DeleteRecords) restarts this
/// log empty at the chunk's first offset and moves its start to the sender's. A chunk that does
/// not follow the log (a stale or repeated answer) appends nothing and the next request asks
/// from this log's end again.
async fn apply_seed(ctx: &ClusterCtx, p: &DataPartition, log_start: u64, batches: &[u8]) {
    let raft = p.raft.as_ref().expect("a replicated partition");
    let seeded = match TopicLog::append_seed(&p.log, log_start, batches).await {
        Ok(s) => s,
        // What was flushed is durable; a topic log that cannot be written would serve less than
        // it claims, as for committed entries.
        Err(e) => panic!(
            "{}-{}: re-seeding: the topic log could not be written ({e}); stopping this node",
            p.topic.name, p.partition
        ),
    };
    if let Some(offset) = seeded.restarted_at {
        tracing::info!(topic = %p.topic.name, partition = p.partition, offset, "re-seeding: the topic log restarts where the sender's starts");
    }
    match seeded.appended {
        Ok(_) => p.changed.notify_all(),
        Err(e) => {
            tracing::debug!(topic = %p.topic.name, partition = p.partition, why = %e.message(), "re-seeding: a chunk that does not follow the log; asked again");
        }
    }
    let log_end = p.log.borrow().next_offset();
    let next = raft.borrow_mut().seeded(log_end, crate::raft_io::mono_ms());
    match next {
        Some((to, request)) => (ctx.seed)(to, p.topic.id, p.partition, &request),
        None => {
            tracing::info!(topic = %p.topic.name, partition = p.partition, log_end, "re-seeding: every record the snapshot stands for is held")
        }
    }
}
