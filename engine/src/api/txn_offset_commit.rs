//! TxnOffsetCommit: a transactional producer commits offsets for a group as part of its
//! transaction. The group's shard writes them as the producer's transactional batch; they stay
//! pending (invisible to OffsetFetch) until the transaction coordinator's marker for the
//! producer commits or aborts them (`coordinator::group::txn`). The answer leaves once the
//! records are durable.
//!
//! Not checked here (Kafka's `KafkaApis.handleTxnOffsetCommitRequest` does, through the
//! transaction coordinator's state): that the group was added to the transaction
//! (AddOffsetsToTxn) and that the transactional id, producer id and epoch are the current ones
//! — that belongs to the transaction coordinator, which calls into the group coordinator.

use super::calls::{call_group, fail_code};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use std::rc::Rc;

pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: TxnOffsetCommitRequest,
    v: i16,
) -> TxnOffsetCommitResponse {
    let group = r.group_id.0.to_string();
    // There is no top-level error: a group-level failure goes into every partition.
    let fallback = |topics: &[txn_offset_commit_request::TxnOffsetCommitRequestTopic],
                    code: i16| {
        TxnOffsetCommitResponse::default().with_topics(
            topics
                .iter()
                .map(|t| {
                    TxnOffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    TxnOffsetCommitResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
    };
    let shape = r.topics.clone();
    match call_group(shard, caller, v, &group, GroupRequest::TxnOffsetCommit(r)).await {
        Ok(GroupResponse::TxnOffsetCommit(resp)) => resp,
        other => fallback(&shape, fail_code(&other)),
    }
}
