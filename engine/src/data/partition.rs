//! One topic partition open on its shard: its log, the notifications around it, and on a node
//! of a cluster for a replicated topic, the Raft state its replica keeps (`super::replica`
//! drives it). Shared by `super::store` (the operations) and `super::replica` (the Raft writer).

use crate::oneshot::Notify;
use crate::topics::Topic;
use kafka_protocol::ResponseError;
use replication::topic::TopicReplica;
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use storage::io::GlommioDir;
use storage::topic_log::{TopicLog, TopicLogConfig};

pub(super) struct DataPartition {
    pub(super) topic: Arc<Topic>,
    pub(super) partition: i32,
    pub(super) dir: GlommioDir,
    pub(super) log: RefCell<TopicLog<GlommioDir>>,
    /// What the log was opened with (a reload after a failure opens it the same way).
    pub(super) config: TopicLogConfig,
    /// Woken when the high watermark moves or a write fails.
    pub(super) changed: Notify,
    /// Wakes the writer task.
    pub(super) kick: Notify,
    /// Failed writes so far: a producer waiting across a failure gets ResponseError::KafkaStorageError.code().
    pub(super) failures: Cell<u64>,
    pub(super) closed: Cell<bool>,
    /// On a node of a cluster, for a topic replicated over its nodes: the partition's Raft
    /// replica (`super::replica`). None: the partition has one replica, this one.
    pub(super) raft: Option<RefCell<TopicReplica>>,
    /// A re-seeding chunk received and not appended yet (`super::replica`): the sender's log
    /// start and the batches. One at most (a replica has one request in flight; a later chunk
    /// replaces an earlier one, which is then asked for again).
    pub(super) seed: RefCell<Option<(u64, Vec<u8>)>>,
    /// On a node of a cluster, a partition of replication factor 1 that this node does not
    /// serve: one moved off it or handing over (nothing more is staged once set, so a move's
    /// source can say it wrote everything, `super::moving::answer`), or the copy of a move's
    /// target. Kept from the metadata log by `DataStore::raft_tick`.
    pub(super) stopped: Cell<bool>,
    /// On a move's target: the source's last answer, not taken yet (`super::moving`).
    pub(super) moved: RefCell<Option<MovedChunk>>,
}

/// A source's answer to a move's target (`replication::topic::SeedMsg::MoveChunk`), owned.
#[derive(Debug)]
pub(super) struct MovedChunk {
    pub(super) from: u64,
    pub(super) log_start: u64,
    pub(super) end: u64,
    pub(super) sealed: bool,
    pub(super) batches: Vec<u8>,
}

impl DataPartition {
    pub(super) fn log_config(&self) -> TopicLogConfig {
        self.config.clone()
    }

    /// NOT_LEADER_OR_FOLLOWER unless this replica answers for the partition (always, unless
    /// the partition is replicated and this replica is not its serving leader, or it is
    /// [`Self::stopped`]).
    pub(super) fn check_serving(&self) -> Result<(), i16> {
        match &self.raft {
            Some(r) if !r.borrow().serving() => Err(ResponseError::NotLeaderOrFollower.code()),
            _ if self.stopped.get() => Err(ResponseError::NotLeaderOrFollower.code()),
            _ => Ok(()),
        }
    }

    /// How many times this partition's replica stopped leading (0 for an unreplicated one).
    pub(super) fn deposed(&self) -> u64 {
        self.raft.as_ref().map_or(0, |r| r.borrow().deposed())
    }
}

/// Reopen a topic partition after a failed flush: first cut everything from `durable_end` on
/// (`partition::discard_unacknowledged`, the same cut `__consumer_offsets` makes), then recover
/// from what is left, which is exactly what was durable.
pub(super) async fn reopen_after_failed_flush<D: storage::io::LogDir + Clone>(
    dir: &D,
    config: &TopicLogConfig,
    durable_end: u64,
) -> std::io::Result<TopicLog<D>> {
    let scan = storage::log::LogConfig {
        segment_bytes: config.segment_bytes,
        max_batch_bytes: config.max_message_bytes.max(1 << 20) * 4,
        read_chunk_bytes: config.read_chunk_bytes,
    };
    storage::log::discard_unacknowledged(dir, &scan, durable_end).await?;
    Ok(TopicLog::open(dir.clone(), config.clone()).await?.0)
}
