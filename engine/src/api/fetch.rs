//! Fetch: plan the read of every partition ([`fetch_with`], pure), read each on its owning shard,
//! and wait up to `max_wait_ms` for `min_bytes` when nothing is there yet.

use super::auth::{self, Op, Rt};
use super::calls::{call_all, call_data};
use super::common::{code, has_partition, leader_epoch_error, UNKNOWN_OFFSET};
use crate::broker::Broker;
use crate::data::{owner_shard, DataOp, DataReply, PartitionRead, ReadItem, WaitItem};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use crate::topics::Topic;
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use uuid::Uuid;

/// Fetch session constants (`clients/.../requests/FetchMetadata.java`).
pub(crate) const INVALID_SESSION_ID: i32 = 0;

pub(crate) const INITIAL_EPOCH: i32 = 0;

pub(crate) const FINAL_EPOCH: i32 = -1;

/// `IsolationLevel.READ_COMMITTED`.
pub(crate) const READ_COMMITTED: i8 = 1;

/// Upper bound on how long a Fetch is held. Clients time a request out after
/// `request.timeout.ms` (30 s by default); holding longer than that would only turn an empty
/// answer into a client-side timeout and a reconnect.
pub const MAX_FETCH_WAIT_MS: u64 = 30_000;

/// What a Fetch decided: the response to send and how long to wait first.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchPlan {
    pub response: FetchResponse,
    pub wait_ms: u64,
}

/// How a Fetch request names a topic: by name before v13, by id from v13.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TopicKey<'a> {
    Name(&'a str),
    Id(Uuid),
}

/// One answered partition, with the topic it belongs to.
pub(crate) struct Answer<'a> {
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
pub(crate) fn unreadable(partition: i32, error: ResponseError) -> PartitionData {
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
pub(crate) fn read_failed(partition: i32, error: ResponseError) -> PartitionData {
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
pub(crate) fn read_partition(
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
    // An offset above the high watermark or below the log start is ResponseError::OffsetOutOfRange.code()
    // (`LocalLog.read`, `UnifiedLog.checkLogStartOffset`); the consumer then resets through
    // ListOffsets.
    let read = reader(topic, req);
    if read.error != 0 {
        return read_failed(
            partition,
            ResponseError::try_from_code(read.error).unwrap_or(ResponseError::KafkaStorageError),
        );
    }
    // The aborted transactions overlapping what was read, for read_committed (an empty array
    // when none, `LocalLog.emptyFetchDataInfo`), null for read_uncommitted
    // (`FetchDataInfo.abortedTransactions` is empty then). The last stable offset is reported
    // for both (`ReplicaManager.readFromLog`).
    let aborted = (isolation_level == READ_COMMITTED).then(|| {
        read.aborted
            .iter()
            .map(|&(pid, first)| {
                AbortedTransaction::default()
                    .with_producer_id(ProducerId(pid))
                    .with_first_offset(first)
            })
            .collect()
    });
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(0)
        .with_high_watermark(read.high_watermark)
        .with_last_stable_offset(read.last_stable_offset)
        .with_log_start_offset(read.log_start_offset)
        .with_aborted_transactions(aborted)
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(read.records))
}

/// Fetch v4–v18 for partitions that hold no records.
///
/// Topics are named by name (v4–v12) or by topic id (v13+). Per partition: unknown topic id (v13+)
/// → UNKNOWN_TOPIC_ID; unknown topic or partition → ResponseError::UnknownTopicOrPartition.code(); CurrentLeaderEpoch
/// (v9+) above 0 → UNKNOWN_LEADER_EPOCH; fetch offset other than 0 → ResponseError::OffsetOutOfRange.code(); offset
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
#[cfg(test)]
pub fn fetch_with(
    broker: &Broker,
    req: &FetchRequest,
    version: i16,
    reader: impl FnMut(&Arc<Topic>, &FetchPartition) -> PartitionRead,
) -> FetchPlan {
    fetch_authorized(broker, req, version, |_| true, reader)
}

/// [`fetch_with`] where `may_read(topic)` says whether the caller may Read a topic: a partition
/// of one it may not is answered TOPIC_AUTHORIZATION_FAILED among the rejected ones, after the
/// unknown topic ids and before existence is looked at (`KafkaApis.handleFetchRequest`).
pub fn fetch_authorized(
    broker: &Broker,
    req: &FetchRequest,
    version: i16,
    may_read: impl Fn(&str) -> bool,
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
        } else if !may_read(match key {
            TopicKey::Name(name) => name,
            TopicKey::Id(_) => topic.map_or("", |t| t.name.as_str()),
        }) {
            rejected.push(answer(unreadable(
                p.partition,
                ResponseError::TopicAuthorizationFailed,
            )));
        } else if has_partition(topic, p.partition).is_some_and(|t| !broker.serves(t, p.partition))
        {
            // Placed on another node of the cluster: the client refreshes its metadata
            // (`ReplicaManager.readFromLog` → NOT_LEADER_OR_FOLLOWER on a non-leader).
            read_error = true;
            read.push(answer(read_failed(
                p.partition,
                ResponseError::NotLeaderOrFollower,
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

/// Fetch v4–v18: read every partition on its shard, and while fewer than `min_bytes` came back,
/// wait (up to `max_wait_ms`) for an append to any of them, then read again.
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    req: FetchRequest,
    version: i16,
) -> FetchResponse {
    let broker = shard.broker.clone();
    // Read on each topic (`KafkaApis.handleFetchRequest`); follower fetches do not exist here.
    let may_read = |t: &str| auth::allowed(&broker, caller, Op::Read, Rt::Topic, t);
    let shards = shard.router.shards();
    let started = std::time::Instant::now();
    loop {
        let mut items: Vec<ReadItem> = Vec::new();
        let first = fetch_authorized(&broker, &req, version, may_read, |t, p| {
            items.push(ReadItem {
                topic: t.clone(),
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                read_committed: req.isolation_level == READ_COMMITTED,
            });
            PartitionRead::failed(0)
        });
        if items.is_empty() {
            return first.response; // nothing to read: the answer does not depend on the logs
        }
        let mut by_owner: HashMap<usize, Vec<ReadItem>> = HashMap::new();
        let mut waits: HashMap<usize, Vec<WaitItem>> = HashMap::new();
        for it in items {
            let owner = owner_shard(&it.topic.name, it.partition, shards);
            waits.entry(owner).or_default().push((
                it.topic.clone(),
                it.partition,
                it.offset,
                it.read_committed,
            ));
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
                let r = results.next().unwrap_or_else(|| {
                    PartitionRead::failed(ResponseError::NotLeaderOrFollower.code())
                });
                reads.insert(k, r);
            }
        }
        let plan = fetch_authorized(&broker, &req, version, may_read, |t, p| {
            reads
                .get(&(t.id, p.partition))
                .cloned()
                .unwrap_or_else(|| PartitionRead::failed(ResponseError::NotLeaderOrFollower.code()))
        });
        let elapsed = started.elapsed().as_millis() as u64;
        if plan.wait_ms <= elapsed {
            return plan.response;
        }
        wait_for_append(shard, waits, plan.wait_ms - elapsed).await;
        if started.elapsed().as_millis() as u64 >= plan.wait_ms {
            // Timed out: one last read so the answer carries the current high watermarks.
            let plan = fetch_authorized(&broker, &req, version, may_read, |t, p| {
                reads.remove(&(t.id, p.partition)).unwrap_or_else(|| {
                    PartitionRead::failed(ResponseError::NotLeaderOrFollower.code())
                })
            });
            return plan.response;
        }
    }
}

/// Wait until any shard reports an append to one of its partitions (for read_committed: a move
/// of its last stable offset, e.g. a marker made durable), or `timeout_ms`.
pub(crate) async fn wait_for_append(
    shard: &Rc<Shard>,
    waits: HashMap<usize, Vec<WaitItem>>,
    timeout_ms: u64,
) {
    let done = crate::oneshot::OneShot::<()>::new();
    for (owner, items) in waits {
        let shard = shard.clone();
        let done = done.clone();
        glommio::spawn_local(async move {
            call_data(&shard, owner, DataOp::Wait { items, timeout_ms }).await;
            done.complete(());
        })
        .detach();
    }
    let timeout = glommio::timer::sleep(std::time::Duration::from_millis(timeout_ms));
    futures_lite::future::or(done.wait(), timeout).await;
}
