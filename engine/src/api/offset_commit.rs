//! OffsetCommit: each group's offsets committed by the shard that owns the group; the answer
//! leaves once the records are durable.

use super::auth::{self, Op, Rt};
use super::calls::{call_group, fail_code};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
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
    // Read on the group, then Read on each topic: a refused topic's partitions answer
    // TOPIC_AUTHORIZATION_FAILED and are not committed; the group is not touched when nothing is
    // left (`KafkaApis.handleOffsetCommitRequest`).
    let b = &shard.broker;
    if !auth::allowed(b, caller, Op::Read, Rt::Group, &group) {
        return fallback(&r, ResponseError::GroupAuthorizationFailed.code());
    }
    let mut r = r;
    let mut refused = OffsetCommitRequest::default();
    if auth::on(b) {
        let (ok, no): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
            .into_iter()
            .partition(|t| auth::allowed(b, caller, Op::Read, Rt::Topic, &t.name));
        r.topics = ok;
        refused.topics = no;
    }
    let refused = fallback(&refused, ResponseError::TopicAuthorizationFailed.code());
    if r.topics.is_empty() && !refused.topics.is_empty() {
        return refused;
    }
    let shape = OffsetCommitRequest::default().with_topics(r.topics.clone());
    let mut resp = match call_group(shard, caller, v, &group, GroupRequest::OffsetCommit(r)).await {
        Ok(GroupResponse::OffsetCommit(resp)) => resp,
        other => fallback(&shape, fail_code(&other)),
    };
    if !refused.topics.is_empty() {
        let mut topics = refused.topics;
        topics.append(&mut resp.topics);
        resp.topics = topics;
    }
    resp
}
