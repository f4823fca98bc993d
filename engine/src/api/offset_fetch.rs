//! OffsetFetch: committed offsets of one or many groups (v8+ batches groups), each fetched from
//! the group's shard.

use super::auth::{self, Op, Rt};
use super::calls::{call_group, fail_code};
use super::common::s;
use crate::group::{FetchedOffsets, GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// OffsetFetch v1–v9: v8+ batches groups; each group is answered by its own partition.
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: OffsetFetchRequest,
    v: i16,
) -> OffsetFetchResponse {
    if v >= 8 {
        let mut resp = OffsetFetchResponse::default();
        for g in r.groups {
            let group = g.group_id.0.to_string();
            let topics = g.topics.map(|ts| {
                ts.into_iter()
                    .map(|t| (t.name.0.to_string(), t.partition_indexes))
                    .collect()
            });
            let member_id = g.member_id.as_ref().map(|m| m.to_string());
            let fetched = fetch_one(
                shard,
                caller,
                v,
                &group,
                topics,
                member_id,
                g.member_epoch,
                r.require_stable,
            )
            .await;
            let mut topics_out: Vec<OffsetFetchResponseTopics> = Vec::new();
            for (t, p, off, epoch, meta, code) in fetched.partitions {
                let part = OffsetFetchResponsePartitions::default()
                    .with_partition_index(p)
                    .with_committed_offset(off)
                    .with_committed_leader_epoch(epoch)
                    .with_metadata(Some(s(&meta)))
                    .with_error_code(code);
                match topics_out.iter_mut().find(|x| x.name.0.as_str() == t) {
                    Some(x) => x.partitions.push(part),
                    None => topics_out.push(
                        OffsetFetchResponseTopics::default()
                            .with_name(TopicName(s(&t)))
                            .with_partitions(vec![part]),
                    ),
                }
            }
            resp.groups.push(
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id)
                    .with_topics(topics_out)
                    .with_error_code(fetched.error_code),
            );
        }
        return resp;
    }
    let group = r.group_id.0.to_string();
    let requested: Option<Vec<(String, Vec<i32>)>> = r.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect()
    });
    // `require_stable` is v7+; the crate reads it as false below that.
    let fetched = fetch_one(
        shard,
        caller,
        v,
        &group,
        requested.clone(),
        None,
        -1,
        r.require_stable,
    )
    .await;
    let mut resp = OffsetFetchResponse::default();
    let mut topics_out: Vec<OffsetFetchResponseTopic> = Vec::new();
    let mut push = |t: &str, part: OffsetFetchResponsePartition| match topics_out
        .iter_mut()
        .find(|x| x.name.0.as_str() == t)
    {
        Some(x) => x.partitions.push(part),
        None => topics_out.push(
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(s(t)))
                .with_partitions(vec![part]),
        ),
    };
    if fetched.error_code != 0 && v < 2 {
        // v1 has no top-level error code: report it on every requested partition.
        for (t, parts) in requested.unwrap_or_default() {
            for p in parts {
                push(
                    &t,
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(-1)
                        .with_metadata(Some(s("")))
                        .with_error_code(fetched.error_code),
                );
            }
        }
    } else {
        for (t, p, off, epoch, meta, code) in fetched.partitions {
            push(
                &t,
                OffsetFetchResponsePartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(off)
                    .with_committed_leader_epoch(epoch)
                    .with_metadata(Some(s(&meta)))
                    .with_error_code(code),
            );
        }
        resp.error_code = fetched.error_code;
    }
    resp.topics = topics_out;
    resp
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn fetch_one(
    shard: &Rc<Shard>,
    caller: &Caller,
    v: i16,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    member_id: Option<String>,
    member_epoch: i32,
    require_stable: bool,
) -> FetchedOffsets {
    // Describe on the group; then Describe on each topic: named ones the caller may not
    // Describe answer TOPIC_AUTHORIZATION_FAILED, and "all topics" leaves them out
    // (`KafkaApis.handleOffsetFetchRequest*`).
    let b = &shard.broker;
    if !auth::allowed(b, caller, Op::Describe, Rt::Group, group) {
        return FetchedOffsets {
            error_code: ResponseError::GroupAuthorizationFailed.code(),
            partitions: Vec::new(),
        };
    }
    let mut refused = Vec::new();
    let topics = match topics {
        Some(ts) if auth::on(b) => {
            let (ok, no): (Vec<_>, Vec<_>) = ts
                .into_iter()
                .partition(|(t, _)| auth::allowed(b, caller, Op::Describe, Rt::Topic, t));
            for (t, parts) in no {
                for p in parts {
                    let code = ResponseError::TopicAuthorizationFailed.code();
                    refused.push((t.clone(), p, -1, -1, String::new(), code));
                }
            }
            Some(ok)
        }
        other => other,
    };
    let all_topics = topics.is_none();
    let mut fetched = fetch_routed(
        shard,
        caller,
        v,
        group,
        topics,
        member_id,
        member_epoch,
        require_stable,
    )
    .await;
    if auth::on(b) && all_topics {
        fetched
            .partitions
            .retain(|(t, ..)| auth::allowed(b, caller, Op::Describe, Rt::Topic, t));
    }
    if !refused.is_empty() && fetched.error_code == 0 {
        refused.append(&mut fetched.partitions);
        fetched.partitions = refused;
    }
    fetched
}

#[allow(clippy::too_many_arguments)]
async fn fetch_routed(
    shard: &Rc<Shard>,
    caller: &Caller,
    v: i16,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    member_id: Option<String>,
    member_epoch: i32,
    require_stable: bool,
) -> FetchedOffsets {
    match call_group(
        shard,
        caller,
        v,
        group,
        GroupRequest::OffsetFetch {
            group: group.to_string(),
            topics,
            member_id,
            member_epoch,
            require_stable,
        },
    )
    .await
    {
        Ok(GroupResponse::OffsetFetch(f)) => f,
        other => FetchedOffsets {
            error_code: fail_code(&other),
            partitions: Vec::new(),
        },
    }
}
