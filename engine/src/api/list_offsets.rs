//! ListOffsets: plan each partition's lookup ([`list_offsets_with`], pure), answered by the
//! partition's shard (earliest, latest, by timestamp, max timestamp).

use super::calls::call_all;
use super::common::{
    code, has_partition, leader_epoch_error, Lookup, LEADER_EPOCH, NO_EPOCH, NO_TIMESTAMP,
    UNKNOWN_OFFSET,
};
use crate::broker::Broker;
use crate::data::{owner_shard, DataOp, DataReply};
use crate::runtime::shard::Shard;
use crate::topics::Topic;
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use uuid::Uuid;

/// ListOffsets special timestamps (`ListOffsetsRequest.java`).
pub const LATEST_TIMESTAMP: i64 = -1;

pub const EARLIEST_TIMESTAMP: i64 = -2;

pub const MAX_TIMESTAMP: i64 = -3;

pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;

pub const LATEST_TIERED_TIMESTAMP: i64 = -5;

/// What a ListOffsets timestamp asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OffsetQuery {
    Earliest,
    EarliestLocal,
    Latest,
    MaxTimestamp,
    LatestTiered,
    /// The first record with a timestamp at or after this one.
    ByTimestamp,
}

/// Classify a timestamp, or `None` when this request version may not ask for it. Kafka answers
/// UNSUPPORTED_VERSION for a special timestamp below the version that introduced it and for any
/// negative timestamp it does not know (`ReplicaManager.isListOffsetsTimestampUnsupported`,
/// `timestampMinSupportedVersion`: -1/-2 v1, -3 v7, -4 v8, -5 v9; -6 needs v11, which the crate
/// cannot carry).
pub(crate) fn offset_query(timestamp: i64, version: i16) -> Option<OffsetQuery> {
    let (query, since) = match timestamp {
        t if t >= 0 => return Some(OffsetQuery::ByTimestamp),
        LATEST_TIMESTAMP => (OffsetQuery::Latest, 1),
        EARLIEST_TIMESTAMP => (OffsetQuery::Earliest, 1),
        MAX_TIMESTAMP => (OffsetQuery::MaxTimestamp, 7),
        EARLIEST_LOCAL_TIMESTAMP => (OffsetQuery::EarliestLocal, 8),
        LATEST_TIERED_TIMESTAMP => (OffsetQuery::LatestTiered, 9),
        _ => return None,
    };
    (version >= since).then_some(query)
}

/// A partition answer with no offset: Kafka's `buildErrorResponse` (`KafkaApis`
/// `handleListOffsetRequestV1AndAbove`), which is also its answer when no offset qualifies
/// (with error NONE). The crate's default is already offset -1, timestamp -1, leader epoch -1.
pub(crate) fn no_offset(partition: i32, error: i16) -> ListOffsetsPartitionResponse {
    ListOffsetsPartitionResponse::default()
        .with_partition_index(partition)
        .with_error_code(error)
        .with_offset(UNKNOWN_OFFSET)
        .with_timestamp(NO_TIMESTAMP)
        .with_leader_epoch(NO_EPOCH)
}

/// One partition of ListOffsets, checked in Kafka's order (`ReplicaManager.fetchOffset`):
/// timestamp supported by this version, partition known, leader epoch, then the lookup.
pub(crate) fn list_offset(
    topic: Option<&Arc<Topic>>,
    req: &ListOffsetsPartition,
    version: i16,
    lookup: &mut impl FnMut(&Arc<Topic>, i32, i64) -> Lookup,
) -> ListOffsetsPartitionResponse {
    let partition = req.partition_index;
    let Some(query) = offset_query(req.timestamp, version) else {
        return no_offset(partition, code(ResponseError::UnsupportedVersion));
    };
    let Some(topic) = has_partition(topic, partition) else {
        return no_offset(partition, code(ResponseError::UnknownTopicOrPartition));
    };
    // CurrentLeaderEpoch exists from v4; only -1 means "none" here (`ReplicaManager.fetchOffset`
    // compares with `ListOffsetsResponse.UNKNOWN_EPOCH`), so -2 is an old epoch: fenced.
    let requested =
        (version >= 4 && req.current_leader_epoch != NO_EPOCH).then_some(req.current_leader_epoch);
    if let Some(e) = leader_epoch_error(requested) {
        return no_offset(partition, code(e));
    }
    // (offset, timestamp, leader epoch). An offset found carries the leader epoch of its
    // record, which is 0 on this broker (the leader epoch cache holds (0, 0) from the moment the
    // partition got its leader). When no record qualifies (a timestamp after every record, the
    // max timestamp of an empty log) Kafka answers offset -1, timestamp -1 with no epoch
    // (`UnifiedLog.fetchOffsetByTimestamp`, `ReplicaManager.fetchOffset`).
    let (offset, timestamp, epoch) = match query {
        // Without remote storage Kafka answers offset -1 with epoch -1 (`UnifiedLog`).
        OffsetQuery::LatestTiered => (UNKNOWN_OFFSET, NO_TIMESTAMP, NO_EPOCH),
        // Earliest (-2) and earliest local (-4) are the log start offset (no tiered storage);
        // latest is the high watermark for read_uncommitted and the last stable offset for
        // read_committed (`Partition.fetchOffsetForTimestamp`); the lookup (the partition's
        // shard, given the request's isolation level) answers it.
        _ => match lookup(topic, partition, req.timestamp) {
            Err(e) => return no_offset(partition, e),
            Ok((UNKNOWN_OFFSET, _)) => (UNKNOWN_OFFSET, NO_TIMESTAMP, NO_EPOCH),
            Ok((o, t)) => (o, t, LEADER_EPOCH),
        },
    };
    let mut resp = no_offset(partition, 0)
        .with_offset(offset)
        .with_timestamp(timestamp);
    // The field exists from v4; below that the crate refuses anything but its default -1.
    if version >= 4 {
        resp.leader_epoch = epoch;
    }
    resp
}

/// ListOffsets v1–v10 for partitions that hold no records.
///
/// Per partition: a partition named twice in the request → INVALID_REQUEST; a negative timestamp
/// this version may not use → UNSUPPORTED_VERSION; unknown topic or partition →
/// ResponseError::UnknownTopicOrPartition.code(); CurrentLeaderEpoch (v4+) other than -1 or 0 → FENCED_LEADER_EPOCH
/// (older) or UNKNOWN_LEADER_EPOCH (newer). Otherwise earliest (-2), earliest local (-4) and
/// latest (-1) → offset 0, timestamp -1, leader epoch 0; max timestamp (-3), latest tiered (-5)
/// and a lookup by timestamp (>= 0) → offset -1, timestamp -1, leader epoch -1, as Kafka answers
/// when no record qualifies. The isolation level (v2+) is the lookup's business: for
/// READ_COMMITTED latest is the last stable offset and a timestamp lookup finds nothing at or
/// past it ([`handle`] passes it to the shard). The replica id changes nothing; v10's timeout
/// only bounds remote-storage lookups, which do not exist here.
pub fn list_offsets_with(
    broker: &Broker,
    req: &ListOffsetsRequest,
    version: i16,
    mut lookup: impl FnMut(&Arc<Topic>, i32, i64) -> Lookup,
) -> ListOffsetsResponse {
    let snap = broker.topics.snapshot();

    // A partition named more than once is answered once, with INVALID_REQUEST
    // (`ListOffsetsRequest.duplicatePartitions`, `ReplicaManager.fetchOffset`).
    let mut seen = HashSet::new();
    let mut duplicated = HashSet::new();
    for t in &req.topics {
        for p in &t.partitions {
            let key = (t.name.0.as_str(), p.partition_index);
            if !seen.insert(key) {
                duplicated.insert(key);
            }
        }
    }

    // Kafka keys its answers by topic-partition and groups them by topic, so a topic named twice
    // comes back as one entry. Keep the request's order of first appearance.
    let mut topics: Vec<ListOffsetsTopicResponse> = Vec::new();
    let mut topic_slot: HashMap<&str, usize> = HashMap::new();
    let mut answered = HashSet::new();
    for t in &req.topics {
        let name = t.name.0.as_str();
        let slot = *topic_slot.entry(name).or_insert_with(|| {
            topics.push(ListOffsetsTopicResponse::default().with_name(t.name.clone()));
            topics.len() - 1
        });
        let topic = snap.get(name);
        for p in &t.partitions {
            let key = (name, p.partition_index);
            if !answered.insert(key) {
                continue;
            }
            let resp = if duplicated.contains(&key) {
                no_offset(p.partition_index, code(ResponseError::InvalidRequest))
            } else {
                list_offset(topic, p, version, &mut lookup)
            };
            topics[slot].partitions.push(resp);
        }
    }
    ListOffsetsResponse::default()
        .with_throttle_time_ms(0)
        .with_topics(topics)
}

/// ListOffsets v1–v10: [`list_offsets_with`], each partition's lookup done by its shard.
///
/// With an authorizer: Describe on each topic, else TOPIC_AUTHORIZATION_FAILED on its partitions,
/// answered after the others (`KafkaApis.handleListOffsetRequestV1AndAbove`).
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &crate::runtime::shard::Caller,
    mut req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let broker = &shard.broker;
    let mut refused = Vec::new();
    if super::auth::on(broker) {
        use super::auth::{Op, Rt};
        let (ok, no): (Vec<_>, Vec<_>) = std::mem::take(&mut req.topics)
            .into_iter()
            .partition(|t| super::auth::allowed(broker, caller, Op::Describe, Rt::Topic, &t.name));
        req.topics = ok;
        refused = no
            .into_iter()
            .map(|t| {
                ListOffsetsTopicResponse::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                no_offset(
                                    p.partition_index,
                                    ResponseError::TopicAuthorizationFailed.code(),
                                )
                            })
                            .collect(),
                    )
            })
            .collect();
    }
    let mut resp = lookups(shard, req, version).await;
    resp.topics.extend(refused);
    resp
}

async fn lookups(shard: &Rc<Shard>, req: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let broker = &shard.broker;
    let shards = shard.router.shards();
    // `IsolationLevel.READ_COMMITTED`; the field exists from v2 (0 before).
    let read_committed = req.isolation_level == super::fetch::READ_COMMITTED;
    let mut wanted: Vec<(Arc<Topic>, i32, i64)> = Vec::new();
    list_offsets_with(broker, &req, version, |t, p, ts| {
        // A partition placed on another node of the cluster is not looked up: the answer
        // below finds nothing for it, NOT_LEADER_OR_FOLLOWER.
        if broker.serves(t, p) {
            wanted.push((t.clone(), p, ts));
        }
        Ok((UNKNOWN_OFFSET, NO_TIMESTAMP))
    });
    let calls = wanted
        .iter()
        .map(|(t, p, ts)| {
            let op = DataOp::ListOffset {
                topic: t.clone(),
                partition: *p,
                timestamp: *ts,
                read_committed,
            };
            (owner_shard(&t.name, *p, shards), op)
        })
        .collect();
    let answers = call_all(shard, calls).await;
    let mut found: HashMap<(Uuid, i32, i64), Lookup> = HashMap::new();
    for ((t, p, ts), a) in wanted.iter().zip(answers) {
        let r = match a {
            Some(DataReply::Offset(r)) => r,
            _ => Err(ResponseError::NotLeaderOrFollower.code()),
        };
        found.insert((t.id, *p, *ts), r);
    }
    list_offsets_with(broker, &req, version, |t, p, ts| {
        found
            .get(&(t.id, p, ts))
            .cloned()
            .unwrap_or(Err(ResponseError::NotLeaderOrFollower.code()))
    })
}
