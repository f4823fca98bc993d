//! DeleteRecords: move a partition's log start offset forward, on the partition's shard.

use super::calls::call_all;
use super::common::{code, has_partition, UNKNOWN_OFFSET};
use crate::data::{owner_shard, DataOp, DataReply};
use crate::runtime::shard::Shard;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// DeleteRecords v0–v2: move each partition's log start offset (-1 = the high watermark) and
/// free the segments before it. An offset beyond the high watermark is ResponseError::OffsetOutOfRange.code().
///
/// With an authorizer: Delete on each topic, else TOPIC_AUTHORIZATION_FAILED on its partitions
/// (`KafkaApis.handleDeleteRecordsRequest`).
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &crate::runtime::shard::Caller,
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
        let refused = !super::auth::allowed(
            &shard.broker,
            caller,
            super::auth::Op::Delete,
            super::auth::Rt::Topic,
            &t.name.0,
        );
        for p in &t.partitions {
            let early = match has_partition(topic, p.partition_index) {
                _ if refused => Err(code(ResponseError::TopicAuthorizationFailed)),
                None => Err(code(ResponseError::UnknownTopicOrPartition)),
                Some(t) if t.internal => Err(code(ResponseError::PolicyViolation)),
                Some(t) if !shard.broker.serves(t, p.partition_index) => {
                    Err(code(ResponseError::NotLeaderOrFollower))
                }
                Some(t) => {
                    calls.push((
                        owner_shard(&t.name, p.partition_index, shards),
                        DataOp::DeleteRecords {
                            topic: t.clone(),
                            partition: p.partition_index,
                            offset: p.offset,
                            timeout_ms: req.timeout_ms.max(0) as u64,
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
                _ => Err(ResponseError::NotLeaderOrFollower.code()),
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
