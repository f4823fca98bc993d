//! The data path as seen by a consumer before Produce exists: ListOffsets (v1–v10) and Fetch
//! (v4–v18).
//!
//! Consumers do not stop at the group APIs: after joining they ask ListOffsets where to start
//! (`auto.offset.reset`) and then Fetch in a loop. Ringleader does not store records yet, so every
//! partition of every existing topic is empty: log start offset = high watermark = last stable
//! offset = log end offset = 0, and the partition leader epoch is 0 (what Metadata reports). The
//! answers below are what Apache Kafka gives for an empty partition on a single broker without
//! tiered storage, so every client treats Ringleader as a broker with nothing to read yet instead
//! of a broken one. (`__consumer_offsets` is answered the same way, empty.)
//!
//! Kafka source paths cited below are relative to the Apache Kafka tree (reference §0): `KafkaApis`
//! = `core/src/main/scala/kafka/server/KafkaApis.scala`, `ReplicaManager` =
//! `core/src/main/scala/kafka/server/ReplicaManager.scala`, `Partition` =
//! `core/src/main/scala/kafka/cluster/Partition.scala`, `UnifiedLog` =
//! `core/src/main/scala/kafka/log/UnifiedLog.scala`, `FetchRequest` / `FetchResponse` =
//! `clients/src/main/java/org/apache/kafka/common/requests/{FetchRequest,FetchResponse}.java`.
//!
//! Both handlers are pure functions of (broker, request, version); Fetch returns how long to hold
//! the response and the caller does the waiting, so no clock is read here.

use crate::broker::Broker;
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
use std::sync::Arc;
use uuid::Uuid;

/// Every partition's leader epoch: the one Metadata reports for a partition that never changed
/// leader.
const LEADER_EPOCH: i32 = 0;
/// Offsets of an empty log. They are all the same number until Produce exists.
const LOG_START_OFFSET: i64 = 0;
const HIGH_WATERMARK: i64 = 0;
const LAST_STABLE_OFFSET: i64 = 0;

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
) -> ListOffsetsPartitionResponse {
    let partition = req.partition_index;
    let Some(query) = offset_query(req.timestamp, version) else {
        return no_offset(partition, code(ResponseError::UnsupportedVersion));
    };
    if has_partition(topic, partition).is_none() {
        return no_offset(partition, code(ResponseError::UnknownTopicOrPartition));
    }
    // CurrentLeaderEpoch exists from v4; only -1 means "none" here (`ReplicaManager.fetchOffset`
    // compares with `ListOffsetsResponse.UNKNOWN_EPOCH`), so -2 is an old epoch: fenced.
    let requested =
        (version >= 4 && req.current_leader_epoch != NO_EPOCH).then_some(req.current_leader_epoch);
    if let Some(e) = leader_epoch_error(requested) {
        return no_offset(partition, code(e));
    }
    // (offset, timestamp, leader epoch). Earliest and latest carry the leader epoch of that
    // offset, which for an empty log is the current one (the leader epoch cache holds (0, 0)
    // from the moment the partition got its leader). Every lookup that needs a record finds
    // none: `UnifiedLog.fetchOffsetByTimestamp` returns nothing and `ReplicaManager.fetchOffset`
    // answers offset -1, timestamp -1 with no epoch.
    let (offset, timestamp, epoch) = match query {
        // No tiered storage: the local log starts where the log starts (`UnifiedLog`).
        OffsetQuery::Earliest | OffsetQuery::EarliestLocal => {
            (LOG_START_OFFSET, NO_TIMESTAMP, LEADER_EPOCH)
        }
        // HW for read_uncommitted, LSO for read_committed, LEO for a replica
        // (`Partition.fetchOffsetForTimestamp`): all 0 here, so the isolation level and the
        // replica id do not matter.
        OffsetQuery::Latest => (HIGH_WATERMARK, NO_TIMESTAMP, LEADER_EPOCH),
        // Without remote storage Kafka answers offset -1 with epoch -1 (`UnifiedLog`).
        OffsetQuery::LatestTiered => (UNKNOWN_OFFSET, NO_TIMESTAMP, NO_EPOCH),
        OffsetQuery::MaxTimestamp | OffsetQuery::ByTimestamp => {
            (UNKNOWN_OFFSET, NO_TIMESTAMP, NO_EPOCH)
        }
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
pub fn list_offsets(broker: &Broker, req: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
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
                list_offset(topic, p, version)
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
fn read_partition(req: &FetchPartition, version: i16, isolation_level: i8) -> PartitionData {
    let partition = req.partition;
    // CurrentLeaderEpoch exists from v9; any negative value means "none"
    // (`FetchRequest.optionalEpoch`). So a Fetch can only be newer than our epoch 0, never
    // fenced, and the v16+ current-leader hint Kafka adds to FENCED_LEADER_EPOCH never applies.
    let requested =
        (version >= 9 && req.current_leader_epoch >= 0).then_some(req.current_leader_epoch);
    if let Some(e) = leader_epoch_error(requested) {
        return read_failed(partition, e);
    }
    // The log holds offsets [0, 0): the only valid position is 0. Kafka rejects an offset above
    // the log end or below the log start with OFFSET_OUT_OF_RANGE (`LocalLog.read`,
    // `UnifiedLog.checkLogStartOffset`); the consumer then resets through ListOffsets.
    if req.fetch_offset != HIGH_WATERMARK {
        return read_failed(partition, ResponseError::OffsetOutOfRange);
    }
    // At the log end Kafka returns empty records; the aborted-transaction list is an empty array
    // for read_committed and null otherwise (`LocalLog.emptyFetchDataInfo`).
    let aborted = (isolation_level == READ_COMMITTED).then(Vec::new);
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(0)
        .with_high_watermark(HIGH_WATERMARK)
        .with_last_stable_offset(LAST_STABLE_OFFSET)
        .with_log_start_offset(LOG_START_OFFSET)
        .with_aborted_transactions(aborted)
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(Bytes::new()))
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
pub fn fetch(broker: &Broker, req: FetchRequest, version: i16) -> FetchPlan {
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
        } else if has_partition(topic, p.partition).is_none() {
            rejected.push(answer(unreadable(
                p.partition,
                ResponseError::UnknownTopicOrPartition,
            )));
        } else {
            let data = read_partition(p, version, req.isolation_level);
            read_error |= data.error_code != 0;
            read.push(answer(data));
        }
    }

    // `ReplicaManager.fetchMessages` answers at once when the wait is not positive, nothing was
    // readable, enough bytes are readable (0 >= min_bytes, where `KafkaApis` caps min_bytes by
    // max_bytes) or a read failed; otherwise the fetch waits in purgatory for max_wait_ms.
    let min_bytes = req.min_bytes.min(req.max_bytes);
    let wait_ms = if read.is_empty() || read_error || req.max_wait_ms <= 0 || min_bytes <= 0 {
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
