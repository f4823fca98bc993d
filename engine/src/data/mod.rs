//! Topic partition data on the shard that owns it: the log of each partition
//! (`storage::topic_log`), its writer task (group commit), and the operations the data-path APIs
//! send it (append, read, wait for data, offsets, delete records, transaction markers, forget
//! deleted topics).
//!
//! Ownership: partition `p` of topic `t` lives on shard `(abs(java_hash(t)) + p) % shards`, so a
//! topic's partitions spread over the cores, and it is touched by no other thread. Requests reach
//! it through `runtime::router::Router::data` with that shard index as the route.
//!
//! Durability: a produced batch is staged in memory, the partition's writer task writes every
//! staged batch with one write and one fdatasync, and only then does the high watermark move,
//! the producer get its answer and fetchers see the records. With one broker, acks=1 and acks=-1
//! both answer once the batch is on disk (a stronger promise than Kafka's acks=1). A failed write
//! fails the waiting producers with KAFKA_STORAGE_ERROR (retriable) and reopens the log from disk,
//! so nothing unacknowledged is ever presented as written.
//!
//! Transactions: producers' transactional batches are appended like any other; the transaction
//! coordinator ends a transaction on each of its partitions with `WriteMarker` (a COMMIT or
//! ABORT control batch, answered once durable like an append). Each partition keeps its last
//! stable offset (LSO: the high watermark held back to the oldest transaction that is ongoing or
//! whose marker is not yet durable) and its aborted transactions; read_committed reads stop at
//! the LSO and carry the aborted transactions they overlap, and read_committed ListOffsets
//! latest is the LSO.
//!
//! Producer state: DescribeProducers reads each partition's producers (`TopicLog::active_producers`)
//! on its shard, from memory, as the log holds them (staged batches included, as Kafka's leader
//! reports what it appended).
//!
//! Partitions open on first use (one sequential scan of their segments, logged with what it
//! found and whether a torn tail was cut) and stay open.

use crate::topics::Topic;
use bytes::Bytes;
use std::sync::Arc;
pub use storage::topic_log::ProducerState;

mod moving;
mod partition;
pub mod replica;
pub mod store;
pub use store::{partition_dir, sweep_deleted_topics, sweep_topic_ids, DataStore};

/// The shard that owns partition `partition` of `topic`.
pub fn owner_shard(topic: &str, partition: i32, shards: usize) -> usize {
    let h = wire::partition::java_string_hash(topic).unsigned_abs() as usize;
    (h + partition.max(0) as usize) % shards.max(1)
}

/// An operation on topic data, executed by the owning shard.
#[derive(Debug)]
pub enum DataOp {
    /// One partition's records of a Produce request (one batch, as v3+ requires).
    Append {
        topic: Arc<Topic>,
        partition: i32,
        records: Bytes,
    },
    /// Reads of several partitions owned by this shard.
    Read { items: Vec<ReadItem> },
    /// Return once any of these partitions holds readable data at the given offset (below the
    /// high watermark, or below the last stable offset when the flag, read_committed, is set),
    /// or after the timeout (a Fetch waiting for min_bytes).
    Wait {
        items: Vec<WaitItem>,
        timeout_ms: u64,
    },
    /// ListOffsets for one partition; `timestamp` is the request's (-1, -2, -3, -4 or >= 0).
    /// read_committed: latest is the last stable offset, and a lookup finding an offset at or
    /// past it finds nothing (Kafka's `lastFetchableOffset`).
    ListOffset {
        topic: Arc<Topic>,
        partition: i32,
        timestamp: i64,
        read_committed: bool,
    },
    /// Write a transaction marker (control batch) to one partition; answered once durable.
    WriteMarker {
        topic: Arc<Topic>,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    },
    /// DeleteRecords for one partition; -1 means the high watermark. On a replicated
    /// partition the answer waits at most `timeout_ms` for the deletion to commit.
    DeleteRecords {
        topic: Arc<Topic>,
        partition: i32,
        offset: i64,
        timeout_ms: u64,
    },
    /// DescribeProducers for partitions owned by this shard: each one's producer state.
    Producers { items: Vec<(Arc<Topic>, i32)> },
    /// Close the partitions of topics that no longer exist and remove their directories.
    Forget,
    /// A Raft message from a peer for a replicated topic partition this shard owns
    /// (`runtime::peers::TOPIC_PARTITION`).
    Raft {
        topic: Arc<Topic>,
        partition: i32,
        message: Vec<u8>,
    },
    /// A re-seeding message (`replication::topic::SeedMsg`) from node `from` for a replicated
    /// topic partition this shard owns (`runtime::peers::TOPIC_SEED`).
    Seed {
        topic: Arc<Topic>,
        partition: i32,
        from: u64,
        message: Vec<u8>,
    },
}

/// One partition of a `DataOp::Wait`: (topic, partition, fetch offset, read_committed).
pub type WaitItem = (Arc<Topic>, i32, i64, bool);

#[derive(Debug)]
pub struct ReadItem {
    pub topic: Arc<Topic>,
    pub partition: i32,
    pub offset: i64,
    pub max_bytes: i32,
    /// Read only below the last stable offset and report the aborted transactions read.
    pub read_committed: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DataReply {
    Append(AppendOutcome),
    Read(Vec<PartitionRead>),
    Waited,
    /// (offset, timestamp), offset -1 when no record qualifies; or an error code.
    Offset(Result<(i64, i64), i16>),
    /// The new log start offset, or an error code.
    Deleted(Result<i64, i16>),
    /// 0 once the marker is durable, else the Kafka error code.
    Marker(i16),
    /// Per item of `DataOp::Producers`, in order: the producers its log remembers, or an
    /// error code.
    Producers(Vec<Result<Vec<ProducerState>, i16>>),
    Forgotten,
    /// A Raft message was stepped (or dropped: a partition this node does not replicate).
    Stepped,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AppendOutcome {
    pub error: i16,
    pub message: Option<String>,
    pub base_offset: i64,
    pub log_append_time: i64,
    pub log_start_offset: i64,
}

impl AppendOutcome {
    fn failed(error: i16, message: Option<String>) -> Self {
        Self {
            error,
            message,
            base_offset: -1,
            log_append_time: -1,
            log_start_offset: -1,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PartitionRead {
    pub error: i16,
    pub high_watermark: i64,
    /// Reported for both isolation levels, as Kafka does.
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// read_committed: the aborted transactions (producer id, first offset) overlapping the
    /// records read (`TransactionIndex.collectAbortedTxns`); empty otherwise.
    pub aborted: Vec<(i64, i64)>,
    pub records: Bytes,
}

impl PartitionRead {
    pub fn failed(error: i16) -> Self {
        Self {
            error,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted: Vec::new(),
            records: Bytes::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_of_a_topic_spread_over_shards() {
        let owners: std::collections::HashSet<usize> =
            (0..6).map(|p| owner_shard("orders", p, 2)).collect();
        assert_eq!(owners.len(), 2);
        assert_eq!(owner_shard("orders", 3, 1), 0);
    }
}
