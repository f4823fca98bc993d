//! What several handlers share: the authorized-operations sets Kafka reports without an
//! authorizer, the data APIs' sentinel offsets and epochs, the node ids of a manual replica
//! assignment, the partitions a request names, and small response helpers.

use crate::topics::{Topic, CONSUMER_OFFSETS};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::sync::Arc;

/// Kafka's "authorized operations not requested" marker (`Integer.MIN_VALUE`).
pub(crate) const AUTHORIZED_OPS_OMITTED: i32 = i32::MIN;

/// An `AclOperation` set as the 32-bit field the protocol carries (`Utils.to32BitField`).
pub(crate) const fn ops(codes: &[u8]) -> i32 {
    let mut bits = 0i32;
    let mut i = 0;
    while i < codes.len() {
        bits |= 1 << codes[i];
        i += 1;
    }
    bits
}

// `AclOperation` codes.
pub(crate) const READ: u8 = 3;

pub(crate) const WRITE: u8 = 4;

pub(crate) const CREATE: u8 = 5;

pub(crate) const DELETE: u8 = 6;

pub(crate) const ALTER: u8 = 7;

pub(crate) const DESCRIBE: u8 = 8;

pub(crate) const CLUSTER_ACTION: u8 = 9;

pub(crate) const DESCRIBE_CONFIGS: u8 = 10;

pub(crate) const ALTER_CONFIGS: u8 = 11;

pub(crate) const IDEMPOTENT_WRITE: u8 = 12;

// What a client asking for its authorized operations is told. Ringleader has no authorizer,
// and with none Kafka allows, and reports, every operation the resource type supports
// (`AuthHelper.authorizedOperations` → `AclEntry.supportedOperations`): topic 3576, group
// 3400, as the reference broker answers.
pub const TOPIC_AUTHORIZED_OPS: i32 = ops(&[
    READ,
    WRITE,
    CREATE,
    DELETE,
    ALTER,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
]);

pub const GROUP_AUTHORIZED_OPS: i32 =
    ops(&[READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]);

pub const CLUSTER_AUTHORIZED_OPS: i32 = ops(&[
    CREATE,
    ALTER,
    DESCRIBE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
]);

pub(crate) fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub(crate) fn code(e: ResponseError) -> i16 {
    e.code()
}

/// The node ids of one partition's manual replicas (CreateTopics, CreatePartitions,
/// AlterPartitionReassignments). A node id is positive; any other names no node, refused in
/// Kafka's words for a broker that is not registered. The rest of Kafka's checks is
/// `replication::metadata::MetadataState::check_assignment`.
pub(crate) fn node_ids(ids: &[kafka_protocol::messages::BrokerId]) -> Result<Vec<u64>, String> {
    ids.iter()
        .map(|b| {
            u64::try_from(b.0).ok().filter(|n| *n > 0).ok_or_else(|| {
                format!(
                    "The manual partition assignment includes broker {}, but no such broker is \
                     registered.",
                    b.0
                )
            })
        })
        .collect()
}

/// The partitions a request names, by topic (DescribeLogDirs, ListPartitionReassignments): a
/// null list names every partition of every topic; a topic named twice is asked for with both
/// lists.
pub(crate) struct Asked(
    Option<std::collections::BTreeMap<String, std::collections::BTreeSet<i32>>>,
);

impl Asked {
    pub(crate) fn new(topics: Option<impl IntoIterator<Item = (String, Vec<i32>)>>) -> Self {
        Asked(topics.map(|topics| {
            let mut m: std::collections::BTreeMap<String, std::collections::BTreeSet<i32>> =
                Default::default();
            for (name, partitions) in topics {
                m.entry(name).or_default().extend(partitions);
            }
            m
        }))
    }

    /// `partition` of topic `name` is asked for.
    pub(crate) fn wants(&self, name: &str, partition: i32) -> bool {
        self.0
            .as_ref()
            .is_none_or(|m| m.get(name).is_some_and(|ps| ps.contains(&partition)))
    }
}

/// The internal offsets topic name, re-exported for callers that check it.
pub fn is_internal(name: &str) -> bool {
    name == CONSUMER_OFFSETS
}

/// A ListOffsets lookup's answer: (offset, timestamp) with offset -1 when no record qualifies,
/// or an error code.
pub type Lookup = Result<(i64, i64), i16>;

/// Every partition's leader epoch: the one Metadata reports for a partition that never changed
/// leader.
pub(crate) const LEADER_EPOCH: i32 = 0;

/// "No such offset / timestamp / epoch" on the wire (`ListOffsetsResponse.UNKNOWN_OFFSET`,
/// `UNKNOWN_TIMESTAMP`, `RecordBatch.NO_PARTITION_LEADER_EPOCH`, `FetchResponse.INVALID_*`).
pub(crate) const UNKNOWN_OFFSET: i64 = -1;

pub(crate) const NO_TIMESTAMP: i64 = -1;

pub(crate) const NO_EPOCH: i32 = -1;

/// The partition, if `topic` exists and has it.
pub(crate) fn has_partition(topic: Option<&Arc<Topic>>, partition: i32) -> Option<&Arc<Topic>> {
    topic.filter(|t| partition >= 0 && partition < t.partitions)
}

/// Kafka's check of a request's CurrentLeaderEpoch against the leader's (`Partition`
/// `checkCurrentLeaderEpoch`): older → FENCED_LEADER_EPOCH, newer → UNKNOWN_LEADER_EPOCH. `None`
/// means the request did not name an epoch; how a request says that differs per API (see the
/// callers).
pub(crate) fn leader_epoch_error(requested: Option<i32>) -> Option<ResponseError> {
    match requested {
        Some(e) if e < LEADER_EPOCH => Some(ResponseError::FencedLeaderEpoch),
        Some(e) if e > LEADER_EPOCH => Some(ResponseError::UnknownLeaderEpoch),
        _ => None,
    }
}
