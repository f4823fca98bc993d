//! OffsetCommit: each group's offsets committed by the shard that owns the group; the answer
//! leaves once the records are durable.

use super::calls::{call_group, fail_code};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use std::rc::Rc;

pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: OffsetCommitRequest,
    v: i16,
) -> OffsetCommitResponse {
    let group = r.group_id.0.to_string();
    // There is no top-level error: a group-level failure goes into every partition.
    let fallback = |r: &OffsetCommitRequest, code: i16| {
        OffsetCommitResponse::default().with_topics(
            r.topics
                .iter()
                .map(|t| {
                    OffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    OffsetCommitResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
    };
    let shape = OffsetCommitRequest::default().with_topics(r.topics.clone());
    match call_group(shard, caller, v, &group, GroupRequest::OffsetCommit(r)).await {
        Ok(GroupResponse::OffsetCommit(resp)) => resp,
        other => fallback(&shape, fail_code(&other)),
    }
}
