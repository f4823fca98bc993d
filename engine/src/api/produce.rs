//! Produce: each partition's batch appended by the partition's shard; the answer leaves once the
//! batch is durable (acks=0 gets none).

use super::calls::call_all;
use super::common::code;
use crate::data::{owner_shard, DataOp, DataReply};
use crate::runtime::shard::Shard;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// Produce v3–v13. Per partition, in Kafka's order (`ReplicaManager.appendRecords`,
/// `KafkaApis.handleProduceRequest`): unknown topic (id) → ResponseError::UnknownTopicOrPartition.code()
/// (UNKNOWN_TOPIC_ID from v13), the internal topic → INVALID_TOPIC_EXCEPTION, acks other than
/// 0/1/-1 → INVALID_REQUIRED_ACKS, then the shard validates and appends (`topic_data`).
/// Transactions are not supported: transactional batches get ResponseError::InvalidRecord.code().
pub(super) async fn handle(
    shard: &Rc<Shard>,
    req: ProduceRequest,
    version: i16,
) -> ProduceResponse {
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
                _ => (ResponseError::NotLeaderOrFollower.code(), None, -1, -1, -1),
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
