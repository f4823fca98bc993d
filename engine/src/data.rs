//! The data path's request side: Produce (v3–v13), Fetch (v4–v18), ListOffsets (v1–v10),
//! DeleteRecords (v0–v2) and InitProducerId (v0–v5).
//!
//! Each request is checked and shaped here, in Kafka's order and with Kafka's error codes, by
//! pure functions (`*_with`) that take the log lookups as closures, so every rule is testable
//! without a disk or a runtime. The async handlers around them send the lookups to the shards
//! that own the partitions (`topic_data`), run them in parallel, and feed the answers back in.
//!
//! Kafka source paths cited below are relative to the Apache Kafka tree (reference §0): `KafkaApis`
//! = `core/src/main/scala/kafka/server/KafkaApis.scala`, `ReplicaManager` =
//! `core/src/main/scala/kafka/server/ReplicaManager.scala`, `Partition` =
//! `core/src/main/scala/kafka/cluster/Partition.scala`, `UnifiedLog` =
//! `core/src/main/scala/kafka/log/UnifiedLog.scala`, `FetchRequest` / `FetchResponse` =
//! `clients/src/main/java/org/apache/kafka/common/requests/{FetchRequest,FetchResponse}.java`.
//!
//! Fetch's pure part returns how long to hold the response; the async handler does the waiting,
//! woken early by an append to any partition it reads.

use crate::broker::Broker;
use crate::partition::{PartitionOp, PartitionReply};
use crate::shard::Shard;
use crate::topic_data::{owner_shard, DataOp, DataReply, PartitionRead, ReadItem};
use crate::topics::Topic;
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use uuid::Uuid;

/// A ListOffsets lookup's answer: (offset, timestamp) with offset -1 when no record qualifies,
/// or an error code.
pub type Lookup = Result<(i64, i64), i16>;

/// Every partition's leader epoch: the one Metadata reports for a partition that never changed
/// leader.
const LEADER_EPOCH: i32 = 0;

/// "No such offset / timestamp / epoch" on the wire (`ListOffsetsResponse.UNKNOWN_OFFSET`,
/// `UNKNOWN_TIMESTAMP`, `RecordBatch.NO_PARTITION_LEADER_EPOCH`, `FetchResponse.INVALID_*`).
const UNKNOWN_OFFSET: i64 = -1;
const NO_TIMESTAMP: i64 = -1;
const NO_EPOCH: i32 = -1;

/// ListOffsets special timestamps (`ListOffsetsRequest.java`).
pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
pub const LATEST_TIERED_TIMESTAMP: i64 = -5;

/// Fetch session constants (`clients/.../requests/FetchMetadata.java`).
const INVALID_SESSION_ID: i32 = 0;
const INITIAL_EPOCH: i32 = 0;
const FINAL_EPOCH: i32 = -1;

/// `IsolationLevel.READ_COMMITTED`.
const READ_COMMITTED: i8 = 1;

/// Upper bound on how long a Fetch is held. Clients time a request out after
/// `request.timeout.ms` (30 s by default); holding longer than that would only turn an empty
/// answer into a client-side timeout and a reconnect.
pub const MAX_FETCH_WAIT_MS: u64 = 30_000;

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// The partition, if `topic` exists and has it.
fn has_partition(topic: Option<&Arc<Topic>>, partition: i32) -> Option<&Arc<Topic>> {
    topic.filter(|t| partition >= 0 && partition < t.partitions)
}

/// Kafka's check of a request's CurrentLeaderEpoch against the leader's (`Partition`
/// `checkCurrentLeaderEpoch`): older → FENCED_LEADER_EPOCH, newer → UNKNOWN_LEADER_EPOCH. `None`
/// means the request did not name an epoch; how a request says that differs per API (see the
/// callers).
fn leader_epoch_error(requested: Option<i32>) -> Option<ResponseError> {
    match requested {
        Some(e) if e < LEADER_EPOCH => Some(ResponseError::FencedLeaderEpoch),
        Some(e) if e > LEADER_EPOCH => Some(ResponseError::UnknownLeaderEpoch),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// ListOffsets
// ---------------------------------------------------------------------------------------------

/// What a ListOffsets timestamp asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OffsetQuery {
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
fn offset_query(timestamp: i64, version: i16) -> Option<OffsetQuery> {
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
fn no_offset(partition: i32, error: i16) -> ListOffsetsPartitionResponse {
    ListOffsetsPartitionResponse::default()
        .with_partition_index(partition)
        .with_error_code(error)
        .with_offset(UNKNOWN_OFFSET)
        .with_timestamp(NO_TIMESTAMP)
        .with_leader_epoch(NO_EPOCH)
}

/// One partition of ListOffsets, checked in Kafka's order (`ReplicaManager.fetchOffset`):
/// timestamp supported by this version, partition known, leader epoch, then the lookup.
fn list_offset(
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
        // latest is the high watermark for read_uncommitted, the last stable offset for
        // read_committed and the log end for a replica (`Partition.fetchOffsetForTimestamp`):
        // all the same here (no transactions, every write durable before it is visible).
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
/// UNKNOWN_TOPIC_OR_PARTITION; CurrentLeaderEpoch (v4+) other than -1 or 0 → FENCED_LEADER_EPOCH
/// (older) or UNKNOWN_LEADER_EPOCH (newer). Otherwise earliest (-2), earliest local (-4) and
/// latest (-1) → offset 0, timestamp -1, leader epoch 0; max timestamp (-3), latest tiered (-5)
/// and a lookup by timestamp (>= 0) → offset -1, timestamp -1, leader epoch -1, as Kafka answers
/// when no record qualifies. The isolation level and replica id change nothing while every
/// offset is 0; v10's timeout only bounds remote-storage lookups, which do not exist here.
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

// ---------------------------------------------------------------------------------------------
// Fetch
// ---------------------------------------------------------------------------------------------

/// What a Fetch decided: the response to send and how long to wait first.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchPlan {
    pub response: FetchResponse,
    pub wait_ms: u64,
}

/// How a Fetch request names a topic: by name before v13, by id from v13.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TopicKey<'a> {
    Name(&'a str),
    Id(Uuid),
}

/// One answered partition, with the topic it belongs to.
struct Answer<'a> {
    key: TopicKey<'a>,
    topic: Option<Arc<Topic>>,
    data: PartitionData,
}

/// A partition Kafka rejects before reading (`KafkaApis.handleFetchRequest`, the `erroneous`
/// list: unknown topic id, unknown topic or partition): `FetchResponse.partitionResponse`, i.e.
/// high watermark -1 and every other field at its default. Kafka leaves `records` null there;
/// we send empty records instead, because librdkafka fails the whole response on a negative
/// MessageSetSize (`src/rdkafka_fetcher.c`, "invalid MessageSetSize"), and empty is what Kafka
/// sends for every partition it did read.
fn unreadable(partition: i32, error: ResponseError) -> PartitionData {
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(code(error))
        .with_high_watermark(UNKNOWN_OFFSET)
        .with_last_stable_offset(UNKNOWN_OFFSET)
        .with_log_start_offset(UNKNOWN_OFFSET)
        .with_aborted_transactions(Some(Vec::new()))
        .with_records(Some(Bytes::new()))
}

/// A partition whose read failed: `ReplicaManager.createLogReadResult(e)`: high watermark, last
/// stable offset and log start offset unknown (-1), no aborted-transaction list, empty records.
fn read_failed(partition: i32, error: ResponseError) -> PartitionData {
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(code(error))
        .with_high_watermark(UNKNOWN_OFFSET)
        .with_last_stable_offset(UNKNOWN_OFFSET)
        .with_log_start_offset(UNKNOWN_OFFSET)
        .with_aborted_transactions(None)
        .with_records(Some(Bytes::new()))
}

/// Read one known partition: leader epoch first, then the offset (`Partition.fetchRecords` →
/// `localLogWithEpochOrThrow`, then the log read).
fn read_partition(
    topic: &Arc<Topic>,
    req: &FetchPartition,
    version: i16,
    isolation_level: i8,
    reader: &mut impl FnMut(&Arc<Topic>, &FetchPartition) -> PartitionRead,
) -> PartitionData {
    let partition = req.partition;
    // CurrentLeaderEpoch exists from v9; any negative value means "none"
    // (`FetchRequest.optionalEpoch`). So a Fetch can only be newer than our epoch 0, never
    // fenced, and the v16+ current-leader hint Kafka adds to FENCED_LEADER_EPOCH never applies.
    let requested =
        (version >= 9 && req.current_leader_epoch >= 0).then_some(req.current_leader_epoch);
    if let Some(e) = leader_epoch_error(requested) {
        return read_failed(partition, e);
    }
    // An offset above the high watermark or below the log start is OFFSET_OUT_OF_RANGE
    // (`LocalLog.read`, `UnifiedLog.checkLogStartOffset`); the consumer then resets through
    // ListOffsets.
    let read = reader(topic, req);
    if read.error != 0 {
        return read_failed(
            partition,
            ResponseError::try_from_code(read.error).unwrap_or(ResponseError::KafkaStorageError),
        );
    }
    // The aborted-transaction list is an empty array for read_committed and null otherwise
    // (`LocalLog.emptyFetchDataInfo`); there are no transactions to abort.
    let aborted = (isolation_level == READ_COMMITTED).then(Vec::new);
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(0)
        .with_high_watermark(read.high_watermark)
        .with_last_stable_offset(read.high_watermark)
        .with_log_start_offset(read.log_start_offset)
        .with_aborted_transactions(aborted)
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(read.records))
}

/// Fetch v4–v18 for partitions that hold no records.
///
/// Topics are named by name (v4–v12) or by topic id (v13+). Per partition: unknown topic id (v13+)
/// → UNKNOWN_TOPIC_ID; unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION; CurrentLeaderEpoch
/// (v9+) above 0 → UNKNOWN_LEADER_EPOCH; fetch offset other than 0 → OFFSET_OUT_OF_RANGE; offset
/// 0 → no records, high watermark = last stable offset = log start offset = 0.
///
/// Fetch sessions (v7+): no session is ever created. A full fetch (session epoch 0 or -1, whatever
/// session id it names) is answered sessionless with session id 0, which clients take as "no
/// session" and keep sending full fetches. An incremental fetch (any other epoch) names a session
/// we do not have: top-level FETCH_SESSION_ID_NOT_FOUND with no partitions, after which the client
/// starts over with a full fetch. `forgotten_topics_data` only matters inside a session: ignored.
///
/// `wait_ms`: Kafka holds a fetch until `min_bytes` are readable or `max_wait_ms` passes; no byte
/// will ever arrive, so a fetch that read at least one partition without error waits
/// `max_wait_ms` (clamped to [0, [`MAX_FETCH_WAIT_MS`]]). It is answered at once (0) when Kafka
/// would: a read error on any partition, nothing readable at all, a session error, `max_wait_ms`
/// <= 0, or `min(min_bytes, max_bytes)` <= 0 (`ReplicaManager.fetchMessages`, `KafkaApis`).
pub fn fetch_with(
    broker: &Broker,
    req: &FetchRequest,
    version: i16,
    mut reader: impl FnMut(&Arc<Topic>, &FetchPartition) -> PartitionRead,
) -> FetchPlan {
    // `FetchManager.newContext` (trunk: `server/src/main/java/org/apache/kafka/server/
    // FetchManager.java`; older: `core/.../server/FetchSession.scala`): epoch 0 or -1 is a full
    // fetch (a session id named with it is closed, which for us is a no-op); anything else looks
    // the session up and, finding none, answers FETCH_SESSION_ID_NOT_FOUND. Before v7 there are
    // no sessions.
    if version >= 7 && req.session_epoch != INITIAL_EPOCH && req.session_epoch != FINAL_EPOCH {
        return FetchPlan {
            response: FetchResponse::default()
                .with_throttle_time_ms(0)
                .with_error_code(code(ResponseError::FetchSessionIdNotFound))
                .with_session_id(INVALID_SESSION_ID),
            wait_ms: 0,
        };
    }

    let snap = broker.topics.snapshot();
    let by_id = version >= 13;

    // Kafka collects the request into a LinkedHashMap keyed by topic-partition
    // (`FetchRequest.fetchData`): a partition named twice keeps its first position and its last
    // parameters.
    let mut wanted: Vec<(TopicKey<'_>, &FetchPartition)> = Vec::new();
    let mut slot: HashMap<(TopicKey<'_>, i32), usize> = HashMap::new();
    for t in &req.topics {
        let key = if by_id {
            TopicKey::Id(t.topic_id)
        } else {
            TopicKey::Name(t.topic.0.as_str())
        };
        for p in &t.partitions {
            match slot.entry((key, p.partition)) {
                Entry::Occupied(e) => wanted[*e.get()].1 = p,
                Entry::Vacant(e) => {
                    e.insert(wanted.len());
                    wanted.push((key, p));
                }
            }
        }
    }

    // Kafka answers the partitions it read first and the ones it rejected up front after them
    // (`KafkaApis.handleFetchRequest`: `processResponseCallback` appends `erroneous` last).
    let mut read: Vec<Answer<'_>> = Vec::new();
    let mut rejected: Vec<Answer<'_>> = Vec::new();
    let mut read_error = false;
    let max_bytes = req.max_bytes.max(0) as usize;
    let mut total_bytes = 0usize;
    for (key, p) in wanted {
        let topic = match key {
            TopicKey::Id(id) => snap.get_by_id(&id),
            TopicKey::Name(name) => snap.get(name),
        };
        let answer = |data| Answer {
            key,
            topic: topic.cloned(),
            data,
        };
        if topic.is_none() && by_id {
            rejected.push(answer(unreadable(
                p.partition,
                ResponseError::UnknownTopicId,
            )));
        } else if let Some(t) = has_partition(topic, p.partition) {
            let mut data = read_partition(t, p, version, req.isolation_level, &mut reader);
            // The response's max_bytes: the first partition with data is sent whole (KIP-74);
            // after that a partition that would overflow is sent empty and read next time.
            let n = data.records.as_ref().map_or(0, |r| r.len());
            if n > 0 && total_bytes > 0 && total_bytes + n > max_bytes {
                data.records = Some(Bytes::new());
            } else {
                total_bytes += n;
            }
            read_error |= data.error_code != 0;
            read.push(answer(data));
        } else {
            rejected.push(answer(unreadable(
                p.partition,
                ResponseError::UnknownTopicOrPartition,
            )));
        }
    }

    // `ReplicaManager.fetchMessages` answers at once when the wait is not positive, nothing was
    // readable, enough bytes are readable (0 >= min_bytes, where `KafkaApis` caps min_bytes by
    // max_bytes) or a read failed; otherwise the fetch waits in purgatory for max_wait_ms.
    let min_bytes = req.min_bytes.min(req.max_bytes);
    let wait_ms = if read.is_empty()
        || read_error
        || req.max_wait_ms <= 0
        || min_bytes <= 0
        || total_bytes >= min_bytes as usize
    {
        0
    } else {
        u64::try_from(req.max_wait_ms)
            .unwrap_or(0)
            .min(MAX_FETCH_WAIT_MS)
    };

    // Consecutive partitions of the same topic share one topic entry, in answer order
    // (`FetchResponse.toMessage`). Both the name (v4–v12) and the id (v13+) are filled, from the
    // registry when the topic exists, so the response encodes at any version.
    let mut responses: Vec<FetchableTopicResponse> = Vec::new();
    let mut last_key: Option<TopicKey<'_>> = None;
    for a in read.into_iter().chain(rejected) {
        match responses.last_mut() {
            Some(last) if last_key == Some(a.key) => last.partitions.push(a.data),
            _ => {
                let (name, id) = match (&a.topic, a.key) {
                    (Some(t), _) => (TopicName(StrBytes::from_string(t.name.clone())), t.id),
                    (None, TopicKey::Name(n)) => {
                        (TopicName(StrBytes::from_string(n.to_string())), Uuid::nil())
                    }
                    (None, TopicKey::Id(id)) => (TopicName::default(), id),
                };
                responses.push(
                    FetchableTopicResponse::default()
                        .with_topic(name)
                        .with_topic_id(id)
                        .with_partitions(vec![a.data]),
                );
                last_key = Some(a.key);
            }
        }
    }

    FetchPlan {
        response: FetchResponse::default()
            .with_throttle_time_ms(0)
            .with_error_code(0)
            .with_session_id(INVALID_SESSION_ID)
            .with_responses(responses),
        wait_ms,
    }
}

// ---------------------------------------------------------------------------------------------
// The async handlers: the pure functions above, with lookups answered by the owning shards
// ---------------------------------------------------------------------------------------------

/// NOT_LEADER_OR_FOLLOWER: the owning shard did not answer (shutting down); clients refresh
/// their metadata and retry.
const NOT_LEADER: i16 = 6;

/// Run `op` on shard `owner`.
async fn call(shard: &Rc<Shard>, owner: usize, op: DataOp) -> Option<DataReply> {
    // The route of a data operation is the owning shard's index (`Router::call` sends a route r
    // to shard r % shards).
    match shard.router.call(owner as i32, PartitionOp::Data(op)).await {
        PartitionReply::Data(r) => Some(r),
        _ => None,
    }
}

/// Run several calls at once (each shard works on its own part); answers in the order given.
async fn call_all(shard: &Rc<Shard>, calls: Vec<(usize, DataOp)>) -> Vec<Option<DataReply>> {
    let tasks: Vec<_> = calls
        .into_iter()
        .map(|(owner, op)| {
            let shard = shard.clone();
            glommio::spawn_local(async move { call(&shard, owner, op).await })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await);
    }
    out
}

/// ListOffsets v1–v10: [`list_offsets_with`], each partition's lookup done by its shard.
pub async fn list_offsets(
    shard: &Rc<Shard>,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let broker = &shard.broker;
    let shards = shard.router.shards();
    let mut wanted: Vec<(Arc<Topic>, i32, i64)> = Vec::new();
    list_offsets_with(broker, &req, version, |t, p, ts| {
        wanted.push((t.clone(), p, ts));
        Ok((UNKNOWN_OFFSET, NO_TIMESTAMP))
    });
    let calls = wanted
        .iter()
        .map(|(t, p, ts)| {
            let op = DataOp::ListOffset {
                topic: t.clone(),
                partition: *p,
                timestamp: *ts,
            };
            (owner_shard(&t.name, *p, shards), op)
        })
        .collect();
    let answers = call_all(shard, calls).await;
    let mut found: HashMap<(Uuid, i32, i64), Lookup> = HashMap::new();
    for ((t, p, ts), a) in wanted.iter().zip(answers) {
        let r = match a {
            Some(DataReply::Offset(r)) => r,
            _ => Err(NOT_LEADER),
        };
        found.insert((t.id, *p, *ts), r);
    }
    list_offsets_with(broker, &req, version, |t, p, ts| {
        found
            .get(&(t.id, p, ts))
            .cloned()
            .unwrap_or(Err(NOT_LEADER))
    })
}

/// Fetch v4–v18: read every partition on its shard, and while fewer than `min_bytes` came back,
/// wait (up to `max_wait_ms`) for an append to any of them, then read again.
pub async fn fetch(shard: &Rc<Shard>, req: FetchRequest, version: i16) -> FetchResponse {
    let broker = shard.broker.clone();
    let shards = shard.router.shards();
    let started = std::time::Instant::now();
    loop {
        let mut items: Vec<ReadItem> = Vec::new();
        let first = fetch_with(&broker, &req, version, |t, p| {
            items.push(ReadItem {
                topic: t.clone(),
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
            });
            PartitionRead {
                error: 0,
                high_watermark: 0,
                log_start_offset: 0,
                records: Bytes::new(),
            }
        });
        if items.is_empty() {
            return first.response; // nothing to read: the answer does not depend on the logs
        }
        let mut by_owner: HashMap<usize, Vec<ReadItem>> = HashMap::new();
        let mut waits: HashMap<usize, Vec<(Arc<Topic>, i32, i64)>> = HashMap::new();
        for it in items {
            let owner = owner_shard(&it.topic.name, it.partition, shards);
            waits
                .entry(owner)
                .or_default()
                .push((it.topic.clone(), it.partition, it.offset));
            by_owner.entry(owner).or_default().push(it);
        }
        let mut keys: Vec<Vec<(Uuid, i32)>> = Vec::new();
        let calls: Vec<(usize, DataOp)> = by_owner
            .into_iter()
            .map(|(owner, items)| {
                keys.push(items.iter().map(|i| (i.topic.id, i.partition)).collect());
                (owner, DataOp::Read { items })
            })
            .collect();
        let answers = call_all(shard, calls).await;
        let mut reads: HashMap<(Uuid, i32), PartitionRead> = HashMap::new();
        for (keys, a) in keys.into_iter().zip(answers) {
            let results = match a {
                Some(DataReply::Read(r)) => r,
                _ => Vec::new(),
            };
            let mut results = results.into_iter();
            for k in keys {
                let r = results.next().unwrap_or_else(|| PartitionRead {
                    error: NOT_LEADER,
                    high_watermark: -1,
                    log_start_offset: -1,
                    records: Bytes::new(),
                });
                reads.insert(k, r);
            }
        }
        let plan = fetch_with(&broker, &req, version, |t, p| {
            reads
                .get(&(t.id, p.partition))
                .cloned()
                .unwrap_or(PartitionRead {
                    error: NOT_LEADER,
                    high_watermark: -1,
                    log_start_offset: -1,
                    records: Bytes::new(),
                })
        });
        let elapsed = started.elapsed().as_millis() as u64;
        if plan.wait_ms <= elapsed {
            return plan.response;
        }
        wait_for_append(shard, waits, plan.wait_ms - elapsed).await;
        if started.elapsed().as_millis() as u64 >= plan.wait_ms {
            // Timed out: one last read so the answer carries the current high watermarks.
            let plan = fetch_with(&broker, &req, version, |t, p| {
                reads.remove(&(t.id, p.partition)).unwrap_or(PartitionRead {
                    error: NOT_LEADER,
                    high_watermark: -1,
                    log_start_offset: -1,
                    records: Bytes::new(),
                })
            });
            return plan.response;
        }
    }
}

/// Wait until any shard reports an append to one of its partitions, or `timeout_ms`.
async fn wait_for_append(
    shard: &Rc<Shard>,
    waits: HashMap<usize, Vec<(Arc<Topic>, i32, i64)>>,
    timeout_ms: u64,
) {
    let done = crate::oneshot::OneShot::<()>::new();
    for (owner, items) in waits {
        let shard = shard.clone();
        let done = done.clone();
        glommio::spawn_local(async move {
            call(&shard, owner, DataOp::Wait { items, timeout_ms }).await;
            done.complete(());
        })
        .detach();
    }
    let timeout = glommio::timer::sleep(std::time::Duration::from_millis(timeout_ms));
    futures_lite::future::or(done.wait(), timeout).await;
}

/// Produce v3–v13. Per partition, in Kafka's order (`ReplicaManager.appendRecords`,
/// `KafkaApis.handleProduceRequest`): unknown topic (id) → UNKNOWN_TOPIC_OR_PARTITION
/// (UNKNOWN_TOPIC_ID from v13), the internal topic → INVALID_TOPIC_EXCEPTION, acks other than
/// 0/1/-1 → INVALID_REQUIRED_ACKS, then the shard validates and appends (`topic_data`).
/// Transactions are not supported: transactional batches get INVALID_RECORD.
pub async fn produce(shard: &Rc<Shard>, req: ProduceRequest, version: i16) -> ProduceResponse {
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    let snap = shard.broker.topics.snapshot();
    let shards = shard.router.shards();
    let by_id = version >= 13;
    let acks_ok = matches!(req.acks, 0 | 1 | -1);
    // (topic index, partition index, early error or the call's position)
    let mut slots: Vec<(usize, i32, Result<usize, i16>)> = Vec::new();
    let mut calls: Vec<(usize, DataOp)> = Vec::new();
    for (ti, t) in req.topic_data.iter().enumerate() {
        let topic = if by_id {
            snap.get_by_id(&t.topic_id)
        } else {
            snap.get(t.name.0.as_str())
        };
        for p in &t.partition_data {
            let early = match topic {
                None if by_id => Err(code(ResponseError::UnknownTopicId)),
                None => Err(code(ResponseError::UnknownTopicOrPartition)),
                Some(t) if p.index < 0 || p.index >= t.partitions => {
                    Err(code(ResponseError::UnknownTopicOrPartition))
                }
                Some(t) if t.internal => Err(code(ResponseError::InvalidTopicException)),
                Some(_) if !acks_ok => Err(code(ResponseError::InvalidRequiredAcks)),
                Some(t) => {
                    calls.push((
                        owner_shard(&t.name, p.index, shards),
                        DataOp::Append {
                            topic: t.clone(),
                            partition: p.index,
                            records: p.records.clone().unwrap_or_default(),
                        },
                    ));
                    Ok(calls.len() - 1)
                }
            };
            slots.push((ti, p.index, early));
        }
    }
    let answers = call_all(shard, calls).await;
    let mut responses: Vec<TopicProduceResponse> = req
        .topic_data
        .iter()
        .map(|t| {
            let mut r = TopicProduceResponse::default();
            if by_id {
                r.topic_id = t.topic_id;
            } else {
                r.name = t.name.clone();
            }
            r
        })
        .collect();
    for (ti, index, slot) in slots {
        let (error, message, base, append_time, start) = match slot {
            Err(e) => (e, None, -1, -1, -1),
            Ok(i) => match &answers[i] {
                Some(DataReply::Append(a)) => (
                    a.error,
                    a.message.clone(),
                    a.base_offset,
                    a.log_append_time,
                    a.log_start_offset,
                ),
                _ => (NOT_LEADER, None, -1, -1, -1),
            },
        };
        let mut pr = PartitionProduceResponse::default()
            .with_index(index)
            .with_error_code(error)
            .with_base_offset(base)
            .with_log_append_time_ms(append_time);
        // Fields the crate only encodes from the version that introduced them.
        if version >= 5 {
            pr.log_start_offset = start;
        }
        if version >= 8 {
            pr.error_message = message.map(StrBytes::from_string);
        }
        responses[ti].partition_responses.push(pr);
    }
    ProduceResponse::default()
        .with_throttle_time_ms(0)
        .with_responses(responses)
}

/// DeleteRecords v0–v2: move each partition's log start offset (-1 = the high watermark) and
/// free the segments before it. An offset beyond the high watermark is OFFSET_OUT_OF_RANGE.
pub async fn delete_records(
    shard: &Rc<Shard>,
    req: DeleteRecordsRequest,
    _version: i16,
) -> DeleteRecordsResponse {
    use kafka_protocol::messages::delete_records_response::{
        DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
    };
    let snap = shard.broker.topics.snapshot();
    let shards = shard.router.shards();
    let mut slots: Vec<(usize, i32, Result<usize, i16>)> = Vec::new();
    let mut calls = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let topic = snap.get(t.name.0.as_str());
        for p in &t.partitions {
            let early = match has_partition(topic, p.partition_index) {
                None => Err(code(ResponseError::UnknownTopicOrPartition)),
                Some(t) if t.internal => Err(code(ResponseError::PolicyViolation)),
                Some(t) => {
                    calls.push((
                        owner_shard(&t.name, p.partition_index, shards),
                        DataOp::DeleteRecords {
                            topic: t.clone(),
                            partition: p.partition_index,
                            offset: p.offset,
                        },
                    ));
                    Ok(calls.len() - 1)
                }
            };
            slots.push((ti, p.partition_index, early));
        }
    }
    let answers = call_all(shard, calls).await;
    let mut topics: Vec<DeleteRecordsTopicResult> = req
        .topics
        .iter()
        .map(|t| DeleteRecordsTopicResult::default().with_name(t.name.clone()))
        .collect();
    for (ti, index, slot) in slots {
        let result = match slot {
            Err(e) => Err(e),
            Ok(i) => match &answers[i] {
                Some(DataReply::Deleted(r)) => *r,
                _ => Err(NOT_LEADER),
            },
        };
        let (low, error) = match result {
            Ok(low) => (low, 0),
            Err(e) => (UNKNOWN_OFFSET, e),
        };
        topics[ti].partitions.push(
            DeleteRecordsPartitionResult::default()
                .with_partition_index(index)
                .with_low_watermark(low)
                .with_error_code(error),
        );
    }
    DeleteRecordsResponse::default()
        .with_throttle_time_ms(0)
        .with_topics(topics)
}

/// InitProducerId v0–v5 for idempotent producers: a new producer id with epoch 0, or (v3+, the
/// producer names its id and epoch after a fatal sequence error) the same id with the epoch
/// bumped (KIP-360). Transactional ids need a transaction coordinator, which this broker does
/// not have (FindCoordinator answers COORDINATOR_NOT_AVAILABLE for them): same answer here.
pub async fn init_producer_id(
    shard: &Rc<Shard>,
    req: InitProducerIdRequest,
    _version: i16,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_throttle_time_ms(0)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    if req.transactional_id.is_some() {
        return resp.with_error_code(code(ResponseError::CoordinatorNotAvailable));
    }
    if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX - 1 {
        return resp
            .with_error_code(0)
            .with_producer_id(req.producer_id)
            .with_producer_epoch(req.producer_epoch + 1);
    }
    let broker = shard.broker.clone();
    let id = glommio::executor()
        .spawn_blocking(move || broker.producer_ids.next())
        .await;
    match id {
        Ok(id) => resp
            .with_error_code(0)
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "could not reserve producer ids");
            resp.with_error_code(code(ResponseError::KafkaStorageError))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use bytes::BytesMut;
    use kafka_protocol::messages::fetch_request::FetchTopic;
    use kafka_protocol::messages::list_offsets_request::ListOffsetsTopic;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    /// A broker opened like `open_broker` does, on a private data dir removed on drop, with
    /// "orders" (3 partitions).
    struct TestBroker {
        broker: Arc<Broker>,
        dir: PathBuf,
        orders: Uuid,
    }

    impl Drop for TestBroker {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn broker(tag: &str) -> TestBroker {
        let dir = std::env::temp_dir().join(format!("rl-data-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let broker =
            crate::open_broker(Config::default(), &dir, "127.0.0.1:9092".parse().unwrap()).unwrap();
        let orders = broker
            .topics
            .create("orders", 3, BTreeMap::new())
            .unwrap()
            .id;
        TestBroker {
            broker,
            dir,
            orders,
        }
    }

    /// The answers of an empty log: start = high watermark = 0, no record for any timestamp.
    fn empty_log(_: &Arc<Topic>, _: i32, ts: i64) -> Lookup {
        match ts {
            LATEST_TIMESTAMP | EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => {
                Ok((0, NO_TIMESTAMP))
            }
            _ => Ok((UNKNOWN_OFFSET, NO_TIMESTAMP)),
        }
    }

    fn list_offsets(b: &Broker, req: ListOffsetsRequest, v: i16) -> ListOffsetsResponse {
        list_offsets_with(b, &req, v, empty_log)
    }

    /// Fetch against empty logs: offset 0 reads nothing, anything else is out of range.
    fn fetch(b: &Broker, req: FetchRequest, v: i16) -> FetchPlan {
        fetch_with(b, &req, v, |_, p| PartitionRead {
            error: if p.fetch_offset == 0 { 0 } else { 1 },
            high_watermark: 0,
            log_start_offset: 0,
            records: Bytes::new(),
        })
    }

    #[test]
    fn records_read_are_returned_with_the_logs_offsets_and_capped_by_max_bytes() {
        let tb = broker("records");
        // Partition 0 has 300 bytes, partition 1 has 300 bytes; response max_bytes 400: the
        // first is sent whole, the second would overflow and is sent empty.
        let mut req = fetch_req(11, vec![("orders", tb.orders, vec![(0, 0), (1, 0)])], 500);
        req.max_bytes = 400;
        let plan = fetch_with(&tb.broker, &req, 11, |_, _| PartitionRead {
            error: 0,
            high_watermark: 7,
            log_start_offset: 2,
            records: Bytes::from(vec![1u8; 300]),
        });
        assert_eq!(plan.wait_ms, 0, "min_bytes is met: answer at once");
        let parts = &plan.response.responses[0].partitions;
        assert_eq!(parts[0].records.as_ref().map(|r| r.len()), Some(300));
        assert_eq!(
            (
                parts[0].high_watermark,
                parts[0].last_stable_offset,
                parts[0].log_start_offset
            ),
            (7, 7, 2)
        );
        assert_eq!(parts[1].records.as_ref().map(|r| r.len()), Some(0));
        encodes_fetch(&plan.response, 11);
    }

    #[test]
    fn list_offsets_by_timestamp_reports_the_found_record_with_epoch_zero() {
        let tb = broker("lo-found");
        let resp = list_offsets_with(
            &tb.broker,
            &lo_req(&[("orders", &[(0, 1_000)])]),
            7,
            |_, _, _| Ok((42, 1_234)),
        );
        let p = &resp.topics[0].partitions[0];
        assert_eq!(
            (p.error_code, p.offset, p.timestamp, p.leader_epoch),
            (0, 42, 1_234, 0)
        );
    }

    fn name(n: &str) -> TopicName {
        TopicName(StrBytes::from_string(n.to_string()))
    }

    fn lo_req(topics: &[(&str, &[(i32, i64)])]) -> ListOffsetsRequest {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(
                topics
                    .iter()
                    .map(|(t, parts)| {
                        ListOffsetsTopic::default()
                            .with_name(name(t))
                            .with_partitions(
                                parts
                                    .iter()
                                    .map(|&(p, ts)| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(p)
                                            .with_timestamp(ts)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    }

    fn encodes_lo(resp: &ListOffsetsResponse, version: i16) {
        let r = wire::encode_response(
            1,
            version,
            &wire::Response::ListOffsets(resp.clone()),
            &mut BytesMut::new(),
        );
        assert!(r.is_ok(), "ListOffsets v{version} does not encode: {r:?}");
    }

    fn encodes_fetch(resp: &FetchResponse, version: i16) {
        let r = wire::encode_response(
            1,
            version,
            &wire::Response::Fetch(resp.clone()),
            &mut BytesMut::new(),
        );
        assert!(r.is_ok(), "Fetch v{version} does not encode: {r:?}");
    }

    fn part(resp: &ListOffsetsResponse, topic: &str, p: i32) -> ListOffsetsPartitionResponse {
        resp.topics
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|x| x.partition_index == p)
            .cloned()
            .unwrap_or_else(|| panic!("no answer for {topic}-{p}"))
    }

    #[test]
    fn list_offsets_earliest_latest_and_lookup_across_versions() {
        let tb = broker("lo-basic");
        for version in [1i16, 2, 4, 5, 6, 7, 8, 9, 10] {
            let resp = list_offsets(
                &tb.broker,
                lo_req(&[(
                    "orders",
                    &[
                        (0, EARLIEST_TIMESTAMP),
                        (1, LATEST_TIMESTAMP),
                        (2, 1_700_000_000_000),
                    ],
                )]),
                version,
            );
            encodes_lo(&resp, version);
            assert_eq!(resp.topics.len(), 1);
            assert_eq!(resp.topics[0].partitions.len(), 3);
            let epoch = if version >= 4 { 0 } else { -1 };
            for p in [0, 1] {
                let r = part(&resp, "orders", p);
                assert_eq!(
                    (r.error_code, r.offset, r.timestamp, r.leader_epoch),
                    (0, 0, -1, epoch),
                    "v{version} p{p}"
                );
            }
            let r = part(&resp, "orders", 2);
            assert_eq!(
                (r.error_code, r.offset, r.timestamp, r.leader_epoch),
                (0, -1, -1, -1),
                "v{version} timestamp lookup"
            );
        }
    }

    #[test]
    fn list_offsets_unknown_topic_and_partition() {
        let tb = broker("lo-unknown");
        for version in [1i16, 4, 7, 10] {
            let resp = list_offsets(
                &tb.broker,
                lo_req(&[
                    ("nope", &[(0, LATEST_TIMESTAMP)]),
                    (
                        "orders",
                        &[(3, EARLIEST_TIMESTAMP), (-1, LATEST_TIMESTAMP), (0, 5)],
                    ),
                ]),
                version,
            );
            encodes_lo(&resp, version);
            for (t, p) in [("nope", 0), ("orders", 3), ("orders", -1)] {
                let r = part(&resp, t, p);
                assert_eq!(
                    (r.error_code, r.offset, r.timestamp, r.leader_epoch),
                    (3, -1, -1, -1),
                    "v{version} {t}-{p}"
                );
            }
            assert_eq!(part(&resp, "orders", 0).error_code, 0);
        }
    }

    #[test]
    fn list_offsets_special_timestamps_follow_their_versions() {
        let tb = broker("lo-special");
        let ask = |ts: i64, version: i16| {
            let resp = list_offsets(&tb.broker, lo_req(&[("orders", &[(0, ts)])]), version);
            encodes_lo(&resp, version);
            let r = part(&resp, "orders", 0);
            (r.error_code, r.offset, r.timestamp, r.leader_epoch)
        };
        let unsupported = (35, -1, -1, -1);
        // Max timestamp: v7+, empty partition → nothing qualifies.
        assert_eq!(ask(MAX_TIMESTAMP, 1), unsupported);
        assert_eq!(ask(MAX_TIMESTAMP, 6), unsupported);
        assert_eq!(ask(MAX_TIMESTAMP, 7), (0, -1, -1, -1));
        // Earliest local: v8+, same as earliest without tiered storage.
        assert_eq!(ask(EARLIEST_LOCAL_TIMESTAMP, 7), unsupported);
        assert_eq!(ask(EARLIEST_LOCAL_TIMESTAMP, 8), (0, 0, -1, 0));
        // Latest tiered: v9+, no remote storage → -1 with epoch -1.
        assert_eq!(ask(LATEST_TIERED_TIMESTAMP, 8), unsupported);
        assert_eq!(ask(LATEST_TIERED_TIMESTAMP, 10), (0, -1, -1, -1));
        // Unknown negative timestamps, including v11's -6.
        assert_eq!(ask(-6, 10), unsupported);
        assert_eq!(ask(i64::MIN, 10), unsupported);
        // Timestamp 0 is a lookup, not a special value.
        assert_eq!(ask(0, 1), (0, -1, -1, -1));
        assert_eq!(ask(i64::MAX, 10), (0, -1, -1, -1));
    }

    #[test]
    fn list_offsets_current_leader_epoch() {
        let tb = broker("lo-epoch");
        let ask = |epoch: i32, version: i16| {
            let mut req = lo_req(&[("orders", &[(1, LATEST_TIMESTAMP)])]);
            req.topics[0].partitions[0].current_leader_epoch = epoch;
            let resp = list_offsets(&tb.broker, req, version);
            encodes_lo(&resp, version);
            let r = part(&resp, "orders", 1);
            (r.error_code, r.offset)
        };
        assert_eq!(ask(-1, 4), (0, 0));
        assert_eq!(ask(0, 4), (0, 0));
        assert_eq!(ask(1, 4), (75, -1));
        assert_eq!(ask(i32::MAX, 10), (75, -1));
        assert_eq!(ask(-2, 7), (74, -1));
        // Before v4 the field does not exist on the wire: ignored.
        assert_eq!(ask(5, 3), (0, 0));
    }

    #[test]
    fn list_offsets_duplicate_partition_is_invalid_request() {
        let tb = broker("lo-dup");
        let resp = list_offsets(
            &tb.broker,
            lo_req(&[
                ("orders", &[(0, LATEST_TIMESTAMP), (1, LATEST_TIMESTAMP)]),
                (
                    "orders",
                    &[(0, EARLIEST_TIMESTAMP), (2, EARLIEST_TIMESTAMP)],
                ),
            ]),
            7,
        );
        encodes_lo(&resp, 7);
        assert_eq!(resp.topics.len(), 1, "one entry per topic");
        let parts: Vec<_> = resp.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        assert_eq!(parts, vec![(0, 42), (1, 0), (2, 0)]);
    }

    /// (topic name, topic id, [(partition, fetch offset)]); the version picks name or id.
    type FetchSpec<'a> = Vec<(&'a str, Uuid, Vec<(i32, i64)>)>;

    fn fetch_req(version: i16, topics: FetchSpec<'_>, max_wait_ms: i32) -> FetchRequest {
        let topics = topics
            .into_iter()
            .map(|(n, id, parts)| {
                let mut t = FetchTopic::default().with_partitions(
                    parts
                        .into_iter()
                        .map(|(p, off)| {
                            FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(off)
                                .with_partition_max_bytes(1_048_576)
                        })
                        .collect(),
                );
                if version >= 13 {
                    t.topic_id = id;
                } else {
                    t.topic = name(n);
                }
                t
            })
            .collect();
        let mut req = FetchRequest::default()
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(52_428_800)
            .with_topics(topics);
        if version >= 7 {
            req.session_id = 0;
            req.session_epoch = 0;
        }
        req
    }

    fn all_partitions(resp: &FetchResponse) -> Vec<&PartitionData> {
        resp.responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .collect()
    }

    fn assert_empty_ok(p: &PartitionData) {
        assert_eq!(p.error_code, 0, "partition {}", p.partition_index);
        assert_eq!(p.high_watermark, 0);
        assert_eq!(p.last_stable_offset, 0);
        assert_eq!(p.log_start_offset, 0);
        assert_eq!(p.preferred_read_replica, -1);
        assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0));
    }

    #[test]
    fn fetch_by_name_at_offset_zero_waits_max_wait() {
        let tb = broker("f-name");
        let plan = fetch(
            &tb.broker,
            fetch_req(
                11,
                vec![("orders", Uuid::nil(), vec![(0, 0), (1, 0), (2, 0)])],
                500,
            ),
            11,
        );
        encodes_fetch(&plan.response, 11);
        assert_eq!(plan.wait_ms, 500);
        assert_eq!(plan.response.error_code, 0);
        assert_eq!(plan.response.session_id, 0);
        assert_eq!(plan.response.responses.len(), 1);
        assert_eq!(plan.response.responses[0].topic.0.as_str(), "orders");
        assert_eq!(plan.response.responses[0].topic_id, tb.orders);
        let parts = all_partitions(&plan.response);
        assert_eq!(parts.len(), 3);
        for p in parts {
            assert_empty_ok(p);
            assert_eq!(p.aborted_transactions, None, "read_uncommitted: null");
        }

        // read_committed: an empty aborted-transaction array.
        let mut req = fetch_req(11, vec![("orders", Uuid::nil(), vec![(0, 0)])], 500);
        req.isolation_level = 1;
        let plan = fetch(&tb.broker, req, 11);
        encodes_fetch(&plan.response, 11);
        assert_eq!(
            all_partitions(&plan.response)[0].aborted_transactions,
            Some(vec![])
        );
    }

    #[test]
    fn fetch_by_id_v13_and_v17() {
        let tb = broker("f-id");
        for version in [13i16, 15, 16, 17, 18] {
            let plan = fetch(
                &tb.broker,
                fetch_req(version, vec![("", tb.orders, vec![(0, 0), (2, 0)])], 100),
                version,
            );
            encodes_fetch(&plan.response, version);
            assert_eq!(plan.wait_ms, 100, "v{version}");
            let t = &plan.response.responses[0];
            assert_eq!(t.topic_id, tb.orders);
            assert_eq!(t.topic.0.as_str(), "orders");
            assert_eq!(t.partitions.len(), 2);
            t.partitions.iter().for_each(assert_empty_ok);
        }
    }

    #[test]
    fn fetch_offset_out_of_range_answers_at_once() {
        let tb = broker("f-oor");
        for (version, id) in [(11i16, Uuid::nil()), (13, tb.orders), (17, tb.orders)] {
            let plan = fetch(
                &tb.broker,
                fetch_req(
                    version,
                    vec![("orders", id, vec![(0, 5), (1, 0), (2, -1)])],
                    500,
                ),
                version,
            );
            encodes_fetch(&plan.response, version);
            assert_eq!(plan.wait_ms, 0, "v{version}: an error answers at once");
            let parts = all_partitions(&plan.response);
            let codes: Vec<_> = parts
                .iter()
                .map(|p| (p.partition_index, p.error_code))
                .collect();
            assert_eq!(codes, vec![(0, 1), (1, 0), (2, 1)]);
            assert_eq!(parts[0].high_watermark, -1);
            assert_eq!(parts[0].log_start_offset, -1);
            assert_eq!(parts[0].records.as_ref().map(|r| r.len()), Some(0));
            assert_empty_ok(parts[1]);
        }
    }

    #[test]
    fn fetch_unknown_topic_id_and_name() {
        let tb = broker("f-unknown");
        let stranger = Uuid::from_u128(0x1234);
        // Only unknown ids: UNKNOWN_TOPIC_ID at partition level, answered at once.
        for version in [13i16, 17] {
            let plan = fetch(
                &tb.broker,
                fetch_req(version, vec![("", stranger, vec![(0, 0), (1, 0)])], 500),
                version,
            );
            encodes_fetch(&plan.response, version);
            assert_eq!(plan.wait_ms, 0);
            assert_eq!(plan.response.error_code, 0);
            assert_eq!(plan.response.responses.len(), 1);
            assert_eq!(plan.response.responses[0].topic_id, stranger);
            for p in all_partitions(&plan.response) {
                assert_eq!(p.error_code, 100);
                assert_eq!(p.high_watermark, -1);
                assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0));
            }
        }
        // The nil id is no topic either.
        let plan = fetch(
            &tb.broker,
            fetch_req(13, vec![("", Uuid::nil(), vec![(0, 0)])], 500),
            13,
        );
        assert_eq!(all_partitions(&plan.response)[0].error_code, 100);

        // By name: unknown topic or partition.
        let plan = fetch(
            &tb.broker,
            fetch_req(
                11,
                vec![
                    ("nope", Uuid::nil(), vec![(0, 0)]),
                    ("orders", Uuid::nil(), vec![(3, 0)]),
                ],
                500,
            ),
            11,
        );
        encodes_fetch(&plan.response, 11);
        assert_eq!(plan.wait_ms, 0);
        let codes: Vec<_> = all_partitions(&plan.response)
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes, vec![3, 3]);
        assert_eq!(plan.response.responses[0].topic.0.as_str(), "nope");

        // Mixed with a readable partition: Kafka still holds the fetch for the readable one and
        // lists the rejected partitions after it.
        let plan = fetch(
            &tb.broker,
            fetch_req(
                17,
                vec![
                    ("", stranger, vec![(0, 0)]),
                    ("", tb.orders, vec![(1, 0), (7, 0)]),
                ],
                250,
            ),
            17,
        );
        encodes_fetch(&plan.response, 17);
        assert_eq!(plan.wait_ms, 250);
        let got: Vec<_> = plan
            .response
            .responses
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic_id, p.partition_index, p.error_code))
            })
            .collect();
        assert_eq!(
            got,
            vec![(tb.orders, 1, 0), (stranger, 0, 100), (tb.orders, 7, 3)]
        );
        assert_eq!(plan.response.responses.len(), 3);
    }

    #[test]
    fn fetch_sessions() {
        let tb = broker("f-session");
        let with_session = |version: i16, id: i32, epoch: i32| {
            let mut req = fetch_req(version, vec![("orders", tb.orders, vec![(0, 0)])], 500);
            req.session_id = id;
            req.session_epoch = epoch;
            let plan = fetch(&tb.broker, req, version);
            encodes_fetch(&plan.response, version);
            plan
        };
        // Incremental fetches name a session we never created.
        for (version, id, epoch) in [(7i16, 7, 3), (11, 7, 1), (13, 0, 1), (17, 42, -2)] {
            let plan = with_session(version, id, epoch);
            assert_eq!(plan.response.error_code, 70, "v{version} {id}/{epoch}");
            assert_eq!(plan.response.session_id, 0);
            assert!(plan.response.responses.is_empty());
            assert_eq!(plan.wait_ms, 0);
        }
        // Full fetches, including one that closes a session (epoch -1): sessionless answers.
        for (version, id, epoch) in [(7i16, 0, 0), (11, 0, -1), (17, 7, -1), (17, 7, 0)] {
            let plan = with_session(version, id, epoch);
            assert_eq!(plan.response.error_code, 0, "v{version} {id}/{epoch}");
            assert_eq!(plan.response.session_id, 0);
            assert_eq!(all_partitions(&plan.response).len(), 1);
            assert_eq!(plan.wait_ms, 500);
        }
        // Before v7 there are no session fields: whatever the struct holds is ignored.
        let mut req = fetch_req(6, vec![("orders", Uuid::nil(), vec![(0, 0)])], 500);
        req.session_epoch = 9;
        let plan = fetch(&tb.broker, req, 6);
        assert_eq!(plan.response.error_code, 0);
        encodes_fetch(&plan.response, 6);
    }

    #[test]
    fn fetch_current_leader_epoch() {
        let tb = broker("f-epoch");
        let ask = |version: i16, epoch: i32| {
            let mut req = fetch_req(version, vec![("orders", tb.orders, vec![(0, 0)])], 500);
            req.topics[0].partitions[0].current_leader_epoch = epoch;
            let plan = fetch(&tb.broker, req, version);
            encodes_fetch(&plan.response, version);
            (all_partitions(&plan.response)[0].error_code, plan.wait_ms)
        };
        assert_eq!(ask(9, -1), (0, 500));
        assert_eq!(ask(11, 0), (0, 500));
        assert_eq!(ask(12, 1), (75, 0));
        assert_eq!(ask(17, i32::MAX), (75, 0));
        // Any negative epoch means "none" in Fetch.
        assert_eq!(ask(16, -2), (0, 500));
        // Before v9 the field does not exist: ignored.
        assert_eq!(ask(8, 3), (0, 500));
    }

    #[test]
    fn fetch_wait_follows_max_wait_and_min_bytes() {
        let tb = broker("f-wait");
        let wait = |max_wait: i32, min_bytes: i32, max_bytes: i32| {
            let mut req = fetch_req(11, vec![("orders", Uuid::nil(), vec![(0, 0)])], max_wait);
            req.min_bytes = min_bytes;
            req.max_bytes = max_bytes;
            fetch(&tb.broker, req, 11).wait_ms
        };
        assert_eq!(wait(500, 1, 1 << 20), 500);
        assert_eq!(wait(60_000, 1, 1 << 20), MAX_FETCH_WAIT_MS);
        assert_eq!(wait(i32::MAX, 1, 1 << 20), MAX_FETCH_WAIT_MS);
        assert_eq!(wait(0, 1, 1 << 20), 0);
        assert_eq!(wait(-5, 1, 1 << 20), 0);
        assert_eq!(wait(500, 0, 1 << 20), 0, "min_bytes 0 is satisfied at once");
        assert_eq!(wait(500, -1, 1 << 20), 0);
        assert_eq!(wait(500, 1, 0), 0, "Kafka caps min_bytes by max_bytes");
        // Nothing to read at all.
        let plan = fetch(&tb.broker, fetch_req(11, vec![], 500), 11);
        assert_eq!(plan.wait_ms, 0);
        assert!(plan.response.responses.is_empty());
    }

    #[test]
    fn fetch_repeated_partition_keeps_first_position_and_last_parameters() {
        let tb = broker("f-dup");
        let plan = fetch(
            &tb.broker,
            fetch_req(
                11,
                vec![
                    ("orders", Uuid::nil(), vec![(0, 9), (1, 0)]),
                    ("orders", Uuid::nil(), vec![(0, 0)]),
                ],
                500,
            ),
            11,
        );
        encodes_fetch(&plan.response, 11);
        let got: Vec<_> = all_partitions(&plan.response)
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        assert_eq!(got, vec![(0, 0), (1, 0)]);
        assert_eq!(plan.response.responses.len(), 1);
        assert_eq!(plan.wait_ms, 500);
    }

    #[test]
    fn every_response_encodes_at_every_version() {
        let tb = broker("encode");
        let stranger = Uuid::from_u128(7);
        for version in 4i16..=18 {
            // Good, out-of-range, unknown partition, epoch error, unknown topic/id.
            let mut req = fetch_req(
                version,
                vec![
                    ("orders", tb.orders, vec![(0, 0), (1, 3), (9, 0), (2, 0)]),
                    ("ghost", stranger, vec![(0, 0)]),
                ],
                500,
            );
            req.topics[0].partitions[3].current_leader_epoch = 4;
            for isolation in [0i8, 1] {
                req.isolation_level = isolation;
                let plan = fetch(&tb.broker, req.clone(), version);
                encodes_fetch(&plan.response, version);
                // And the bytes decode back with non-null records everywhere.
                let mut out = BytesMut::new();
                wire::encode_response(
                    1,
                    version,
                    &wire::Response::Fetch(plan.response.clone()),
                    &mut out,
                )
                .unwrap();
                let frame = out.freeze().slice(4..);
                let (_, decoded) = wire::codec::decode_response(1, version, &frame).unwrap();
                let wire::Response::Fetch(decoded) = decoded else {
                    panic!("not a fetch response")
                };
                assert_eq!(all_partitions(&decoded).len(), 5, "v{version}");
                for p in all_partitions(&decoded) {
                    assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0), "v{version}");
                }
            }
            if version >= 7 {
                let mut req = req.clone();
                req.session_id = 3;
                req.session_epoch = 4;
                encodes_fetch(&fetch(&tb.broker, req, version).response, version);
            }
        }
        for version in 1i16..=10 {
            let mut req = lo_req(&[
                (
                    "orders",
                    &[
                        (0, EARLIEST_TIMESTAMP),
                        (1, LATEST_TIMESTAMP),
                        (2, MAX_TIMESTAMP),
                        (5, EARLIEST_TIMESTAMP),
                    ],
                ),
                (
                    "ghost",
                    &[(0, EARLIEST_LOCAL_TIMESTAMP), (1, LATEST_TIERED_TIMESTAMP)],
                ),
                ("orders", &[(0, 1234)]),
            ]);
            req.topics[0].partitions[1].current_leader_epoch = 2;
            encodes_lo(&list_offsets(&tb.broker, req, version), version);
        }
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        let tb = broker("odd");
        for version in [-1i16, 0, 1, 3, 4, 12, 13, 18, 19, i16::MAX, i16::MIN] {
            let req = FetchRequest::default()
                .with_max_wait_ms(i32::MIN)
                .with_min_bytes(i32::MAX)
                .with_max_bytes(i32::MIN)
                .with_session_id(i32::MIN)
                .with_session_epoch(i32::MIN)
                .with_isolation_level(i8::MIN)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic(name(""))
                        .with_partitions(vec![FetchPartition::default()
                            .with_partition(i32::MIN)
                            .with_fetch_offset(i64::MIN)
                            .with_current_leader_epoch(i32::MIN)]),
                    FetchTopic::default()
                        .with_topic(name("orders"))
                        .with_topic_id(tb.orders)
                        .with_partitions(vec![FetchPartition::default()
                            .with_partition(i32::MAX)
                            .with_fetch_offset(i64::MAX)
                            .with_current_leader_epoch(i32::MAX)]),
                ]);
            let _ = fetch(&tb.broker, req, version);
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(i32::MIN))
                .with_isolation_level(i8::MAX)
                .with_timeout_ms(i32::MIN)
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(name(""))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(i32::MIN)
                        .with_timestamp(i64::MIN)
                        .with_current_leader_epoch(i32::MIN)])]);
            let _ = list_offsets(&tb.broker, req, version);
        }
    }
}
