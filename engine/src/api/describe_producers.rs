//! DescribeProducers: the producers each requested partition's log remembers (producer id,
//! epoch, last sequence, last timestamp, coordinator epoch, open transaction's first offset),
//! checked as Kafka does ([`describe_producers_with`], pure) and read on the partition's shard.
//! What `Admin.describeProducers`, `kafka-transactions.sh describe-producers` and
//! `find-hanging` use.

use super::calls::call_all;
use super::common::{code, has_partition};
use crate::broker::Broker;
use crate::data::{owner_shard, DataOp, DataReply, ProducerState};
use crate::runtime::shard::Shard;
use crate::topics::{Topic, MAX_NAME_LENGTH};
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState as WireProducer, TopicResponse,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use uuid::Uuid;

/// `Errors.UNKNOWN_TOPIC_OR_PARTITION.message()`, what `new ApiError(error)` carries.
const UNKNOWN_TOPIC_MESSAGE: &str = "This server does not host this topic-partition.";

/// One partition's producers as its shard read them, or an error code.
pub type Producers = Result<Vec<ProducerState>, i16>;

/// Why Kafka's `Topic.validate` refuses `name` (`Topic.detectInvalidTopic`, with the
/// "Topic name is invalid: " prefix of `InvalidTopicException`), or `None` for a valid name.
/// DescribeProducers answers such a topic with INVALID_TOPIC_EXCEPTION and this message; the
/// wording differs from CreateTopics', which Kafka words differently too. The length is Java's
/// (UTF-16 units), checked before the characters as Kafka does.
pub(crate) fn invalid_topic_reason(name: &str) -> Option<String> {
    let reason = if name.is_empty() {
        "the empty string is not allowed".to_string()
    } else if name == "." || name == ".." {
        format!("'{name}' is not allowed")
    } else if name.encode_utf16().count() > MAX_NAME_LENGTH {
        format!("the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}")
    } else if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
    {
        format!("'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'")
    } else {
        return None;
    };
    Some(format!("Topic name is invalid: {reason}"))
}

/// The wire form of one producer (`UnifiedLog.activeProducers`): no open transaction is -1.
fn wire_producer(p: &ProducerState) -> WireProducer {
    WireProducer::default()
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(i32::from(p.epoch))
        .with_last_sequence(p.last_sequence)
        .with_last_timestamp(p.last_timestamp)
        .with_coordinator_epoch(p.coordinator_epoch)
        .with_current_txn_start_offset(p.txn_start_offset.map_or(-1, |o| o as i64))
}

fn failed(partition: i32, error: ResponseError, message: Option<&str>) -> PartitionResponse {
    PartitionResponse::default()
        .with_partition_index(partition)
        .with_error_code(code(error))
        .with_error_message(message.map(|m| StrBytes::from_string(m.to_string())))
}

/// DescribeProducers v0, answered in the request's shape (`KafkaApis`
/// `handleDescribeProducersRequest`): one topic entry per requested topic and one partition entry
/// per requested partition, repeats included, in request order. Per topic: an invalid name →
/// INVALID_TOPIC_EXCEPTION with Kafka's validation message; an unknown topic →
/// UNKNOWN_TOPIC_OR_PARTITION with its default message, for each of its partitions. Per
/// partition of a known topic: one it does not have (negative too) → UNKNOWN_TOPIC_OR_PARTITION
/// with no message (`ReplicaManager.getPartitionOrError`); else the partition's producers from
/// `lookup`, or the error code it gives. Without an authorizer there is no
/// TOPIC_AUTHORIZATION_FAILED.
///
/// Size: one entry per producer each partition remembers (37 bytes on the wire), the answer Kafka
/// gives, for the partitions the request names. A log's producers are not expired yet (see
/// `TopicLog::active_producers`), so that list grows with the producer ids that wrote to it.
///
/// `refused`: topics the caller may not Read, answered TOPIC_AUTHORIZATION_FAILED after the name
/// check and before the existence check (`KafkaApis.handleDescribeProducersRequest`).
pub fn describe_producers_with(
    broker: &Broker,
    req: &DescribeProducersRequest,
    refused: &dyn Fn(&str) -> bool,
    mut lookup: impl FnMut(&Arc<Topic>, i32) -> Producers,
) -> DescribeProducersResponse {
    let snap = broker.topics.snapshot();
    let unknown_topic = ResponseError::UnknownTopicOrPartition;
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let topic_error = match invalid_topic_reason(name) {
                Some(reason) => Some((ResponseError::InvalidTopicException, reason)),
                None if refused(name) => Some((
                    ResponseError::TopicAuthorizationFailed,
                    ResponseError::TopicAuthorizationFailed.to_string(),
                )),
                None if snap.get(name).is_none() => {
                    Some((unknown_topic, UNKNOWN_TOPIC_MESSAGE.to_string()))
                }
                None => None,
            };
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    if let Some((error, message)) = &topic_error {
                        return failed(p, *error, Some(message));
                    }
                    let Some(topic) = has_partition(snap.get(name), p) else {
                        return failed(p, unknown_topic, None);
                    };
                    match lookup(topic, p) {
                        Ok(producers) => PartitionResponse::default()
                            .with_partition_index(p)
                            .with_error_code(0)
                            .with_active_producers(producers.iter().map(wire_producer).collect()),
                        Err(e) => PartitionResponse::default()
                            .with_partition_index(p)
                            .with_error_code(e),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default()
        .with_throttle_time_ms(0)
        .with_topics(topics)
}

/// DescribeProducers v0: [`describe_producers_with`], each partition read by its shard (one call
/// per shard, a partition named twice read once).
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &crate::runtime::shard::Caller,
    req: DescribeProducersRequest,
    _version: i16,
) -> DescribeProducersResponse {
    let broker = &shard.broker;
    let refused = |name: &str| {
        !super::auth::allowed(
            broker,
            caller,
            super::auth::Op::Read,
            super::auth::Rt::Topic,
            name,
        )
    };
    let shards = shard.router.shards();
    // First pass: which partitions to read, grouped by owning shard.
    let mut by_shard: HashMap<usize, Vec<(Arc<Topic>, i32)>> = HashMap::new();
    let mut seen: std::collections::HashSet<(Uuid, i32)> = std::collections::HashSet::new();
    describe_producers_with(broker, &req, &refused, |t, p| {
        // One placed on another node of the cluster is not read: NOT_LEADER_OR_FOLLOWER below.
        if broker.serves(t, p) && seen.insert((t.id, p)) {
            by_shard
                .entry(owner_shard(&t.name, p, shards))
                .or_default()
                .push((t.clone(), p));
        }
        Ok(Vec::new())
    });
    let (owners, calls): (Vec<Vec<(Arc<Topic>, i32)>>, Vec<(usize, DataOp)>) = by_shard
        .into_iter()
        .map(|(owner, items)| (items.clone(), (owner, DataOp::Producers { items })))
        .unzip();
    let answers = call_all(shard, calls).await;
    let mut found: HashMap<(Uuid, i32), Producers> = HashMap::new();
    for (items, answer) in owners.into_iter().zip(answers) {
        let results = match answer {
            Some(DataReply::Producers(r)) if r.len() == items.len() => r,
            // The shard could not answer: what Kafka says of a partition it does not lead.
            _ => vec![Err(code(ResponseError::NotLeaderOrFollower)); items.len()],
        };
        for ((t, p), r) in items.into_iter().zip(results) {
            found.insert((t.id, p), r);
        }
    }
    describe_producers_with(broker, &req, &refused, |t, p| {
        found
            .get(&(t.id, p))
            .cloned()
            .unwrap_or(Err(code(ResponseError::NotLeaderOrFollower)))
    })
}
