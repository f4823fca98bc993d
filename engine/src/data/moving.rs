//! Moving a partition of replication factor 1 to another node (AlterPartitionReassignments,
//! `replication::metadata::Command::Reassign`). Kafka moves a partition by adding the target as
//! a follower that fetches until it joins the ISR, then moving leadership and dropping the old
//! replica (`ReplicationControlManager`, `PartitionReassignmentReplicas` in Kafka's
//! `metadata` module). A partition of factor 1 here has no replication to follow, so:
//!
//! 1. **Copy.** The target asks the source for its batches from the target's log end
//!    ([`SeedMsg::MoveRequest`]) and appends the answer ([`SeedMsg::MoveChunk`]) as it is, offsets
//!    and all, durably, one chunk in flight at a time. The source serves meanwhile.
//! 2. **Hand over.** Once a chunk brought the target up to the source's high watermark as it
//!    was when read, the target proposes `Command::HandOver`: the source stops taking writes and
//!    no node serves the partition (clients see LEADER_NOT_AVAILABLE and retry).
//! 3. **Take over.** The source answers `sealed` once it takes no more writes and has written
//!    everything it staged; a target holding everything up to that answer's end holds every
//!    record the source acknowledged, and proposes `Command::Reassigned`, after which it serves.
//!    The source then drops its copy (`DataStore::raft_tick`).
//!
//! A cancelled or redirected move leaves the source serving (again); the target drops what it
//! copied. A copy always starts empty: what a node holds from an earlier time it had the
//! partition need not be a prefix of the source's log.
//!
//! The source's side and the messages are here; the target's copy loop is the shard's
//! (`DataStore::copy_in`), which opens, drops and serves partitions.
//!
//! Must not: serve the partition on the target before `Command::Reassigned` applied, or answer
//! `sealed` on a source that could still stage a batch.

use super::partition::{DataPartition, MovedChunk};
use super::replica::ClusterCtx;
use replication::topic::{encode_seed, SeedMsg, SEED_CHUNK_BYTES};
use replication::NodeId;
use std::time::Duration;
use storage::topic_log::Read;

/// How long the target waits for a chunk before it asks again (the request or its answer may
/// have been dropped: a link down or full).
pub(super) const ANSWER_WAIT: Duration = Duration::from_secs(1);
/// Between two proposals of the same step while the first has not applied yet.
pub(super) const PROPOSE_EVERY_MS: i64 = 1_000;
/// Between two requests of a target that holds everything the source had and waits for the
/// source to hand over.
pub(super) const CAUGHT_UP_PAUSE: Duration = Duration::from_millis(20);

/// On the source: answer node `to`'s request for the batches from `offset` on, at most
/// [`SEED_CHUNK_BYTES`] (or one larger batch). `sealed` says the source takes no more writes
/// (`DataPartition::stopped`, which the caller set from the metadata log) and has nothing
/// staged unwritten, read in the same step as the high watermark the answer reports.
pub(super) async fn answer(ctx: &ClusterCtx, p: &DataPartition, to: NodeId, offset: u64) {
    let (plan, log_start, end, sealed) = {
        let log = p.log.borrow();
        let (plan, start) = log.read_for_seed(offset, u64::MAX, SEED_CHUNK_BYTES);
        let hw = log.high_watermark();
        (plan, start, hw, p.stopped.get() && log.next_offset() == hw)
    };
    let batches = match plan {
        Read::Data(plan) => match plan.read().await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(topic = %p.topic.name, partition = p.partition, error = %e, "moving a partition: reading its log failed");
                return;
            }
        },
        Read::Empty | Read::OutOfRange => Vec::new(),
    };
    let chunk = SeedMsg::MoveChunk {
        from: offset,
        log_start,
        end,
        sealed,
        batches: &batches,
    };
    (ctx.seed)(to, p.topic.id, p.partition, &encode_seed(&chunk));
}

/// On the target: keep a chunk for its copy loop (`DataStore::copy_in`), replacing one it has
/// not taken.
pub(super) fn received(p: &DataPartition, chunk: MovedChunk) {
    *p.moved.borrow_mut() = Some(chunk);
    p.changed.notify_all();
}

/// On the target: the chunk answering the request just sent, or None after [`ANSWER_WAIT`].
pub(super) async fn wait_answer(p: &DataPartition) -> Option<MovedChunk> {
    let deadline = std::time::Instant::now() + ANSWER_WAIT;
    loop {
        if let Some(c) = p.moved.borrow_mut().take() {
            return Some(c);
        }
        let left = deadline.checked_duration_since(std::time::Instant::now())?;
        let w = p.changed.register();
        futures_lite::future::or(w.wait(), glommio::timer::sleep(left)).await;
    }
}
