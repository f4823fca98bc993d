//! OffsetDelete: remove a group's committed offsets for partitions it no longer consumes.

use super::auth::{self, Op, Rt};
use super::calls::{call_group, fail_code};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::*;
use std::rc::Rc;

pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: OffsetDeleteRequest,
    v: i16,
) -> OffsetDeleteResponse {
    let group = r.group_id.0.to_string();
    // Delete on the group (`KafkaApis.handleOffsetDeleteRequest`), then Read on each topic.
    let b = &shard.broker;
    if !auth::allowed(b, caller, Op::Delete, Rt::Group, &group) {
        return OffsetDeleteResponse::default()
            .with_error_code(kafka_protocol::ResponseError::GroupAuthorizationFailed.code());
    }
    let mut r = r;
    let mut refused = Vec::new();
    if auth::on(b) {
        let (ok, no): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
            .into_iter()
            .partition(|t| auth::allowed(b, caller, Op::Read, Rt::Topic, &t.name));
        r.topics = ok;
        refused = no;
    }
    let refused: Vec<_> = refused
        .into_iter()
        .map(|t| {
            offset_delete_response::OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            offset_delete_response::OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(
                                    kafka_protocol::ResponseError::TopicAuthorizationFailed.code(),
                                )
                        })
                        .collect(),
                )
        })
        .collect();
    if r.topics.is_empty() && !refused.is_empty() {
        return OffsetDeleteResponse::default().with_topics(refused);
    }
    let mut resp = match call_group(shard, caller, v, &group, GroupRequest::OffsetDelete(r)).await {
        Ok(GroupResponse::OffsetDelete(resp)) => resp,
        other => OffsetDeleteResponse::default().with_error_code(fail_code(&other)),
    };
    if resp.error_code == 0 {
        let mut topics = refused;
        topics.append(&mut resp.topics);
        resp.topics = topics;
    }
    resp
}
