//! The group APIs at the connection edge: split a request by group, route each share to the
//! shard owning that group's `__consumer_offsets` partition, and assemble the response in the
//! shape of the request's version.

use crate::group::{FetchedOffsets, GroupRequest, GroupResponse, RequestContext};
use crate::partition::{PartitionOp, PartitionReply};
use crate::shard::Shard;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// Who is asking, for the member records Kafka keeps (client id, "/ip" host).
#[derive(Debug, Clone)]
pub struct Caller {
    pub client_id: String,
    pub client_host: String,
}

fn not_available() -> i16 {
    ResponseError::CoordinatorNotAvailable.code()
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn call(
    shard: &Rc<Shard>,
    caller: &Caller,
    version: i16,
    group: &str,
    req: GroupRequest,
) -> Result<GroupResponse, i16> {
    let partition = wire::partition_for(group, shard.broker.config.offsets_topic_num_partitions);
    call_partition(shard, caller, version, partition, req).await
}

async fn call_partition(
    shard: &Rc<Shard>,
    caller: &Caller,
    version: i16,
    partition: i32,
    req: GroupRequest,
) -> Result<GroupResponse, i16> {
    let ctx = RequestContext {
        client_id: caller.client_id.clone(),
        client_host: caller.client_host.clone(),
        api_version: version,
        topics: shard.broker.topics.snapshot(),
    };
    match shard
        .router
        .call(partition, PartitionOp::Group { ctx, req })
        .await
    {
        PartitionReply::Group(r) => Ok(r),
        PartitionReply::Loading => Err(ResponseError::CoordinatorLoadInProgress.code()),
        _ => Err(not_available()),
    }
}

/// The error a request gets when its partition could not answer it: still loading
/// (COORDINATOR_LOAD_IN_PROGRESS, retriable), or unavailable (COORDINATOR_NOT_AVAILABLE).
fn fail_code(r: &Result<GroupResponse, i16>) -> i16 {
    match r {
        Err(code) => *code,
        Ok(_) => not_available(),
    }
}

pub async fn join_group(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: JoinGroupRequest,
    v: i16,
) -> JoinGroupResponse {
    let group = r.group_id.0.to_string();
    let member_id = r.member_id.clone();
    match call(shard, caller, v, &group, GroupRequest::Join(r)).await {
        Ok(GroupResponse::Join(resp)) => resp,
        other => JoinGroupResponse::default()
            .with_error_code(fail_code(&other))
            .with_generation_id(-1)
            .with_member_id(member_id)
            .with_protocol_name(if v >= 7 { None } else { Some(s("")) }),
    }
}

pub async fn sync_group(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: SyncGroupRequest,
    v: i16,
) -> SyncGroupResponse {
    let group = r.group_id.0.to_string();
    match call(shard, caller, v, &group, GroupRequest::Sync(r)).await {
        Ok(GroupResponse::Sync(resp)) => resp,
        other => SyncGroupResponse::default().with_error_code(fail_code(&other)),
    }
}

pub async fn heartbeat(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: HeartbeatRequest,
    v: i16,
) -> HeartbeatResponse {
    let group = r.group_id.0.to_string();
    match call(shard, caller, v, &group, GroupRequest::Heartbeat(r)).await {
        Ok(GroupResponse::Heartbeat(resp)) => resp,
        other => HeartbeatResponse::default().with_error_code(fail_code(&other)),
    }
}

pub async fn leave_group(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: LeaveGroupRequest,
    v: i16,
) -> LeaveGroupResponse {
    let group = r.group_id.0.to_string();
    match call(shard, caller, v, &group, GroupRequest::Leave(r)).await {
        Ok(GroupResponse::Leave(resp)) => resp,
        other => LeaveGroupResponse::default().with_error_code(fail_code(&other)),
    }
}

pub async fn offset_commit(
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
    match call(shard, caller, v, &group, GroupRequest::OffsetCommit(r)).await {
        Ok(GroupResponse::OffsetCommit(resp)) => resp,
        other => fallback(&shape, fail_code(&other)),
    }
}

/// OffsetFetch v1–v9: v8+ batches groups; each group is answered by its own partition.
pub async fn offset_fetch(
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
            let fetched =
                fetch_one(shard, caller, v, &group, topics, member_id, g.member_epoch).await;
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
    let fetched = fetch_one(shard, caller, v, &group, requested.clone(), None, -1).await;
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

async fn fetch_one(
    shard: &Rc<Shard>,
    caller: &Caller,
    v: i16,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    member_id: Option<String>,
    member_epoch: i32,
) -> FetchedOffsets {
    match call(
        shard,
        caller,
        v,
        group,
        GroupRequest::OffsetFetch {
            group: group.to_string(),
            topics,
            member_id,
            member_epoch,
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

pub async fn offset_delete(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: OffsetDeleteRequest,
    v: i16,
) -> OffsetDeleteResponse {
    let group = r.group_id.0.to_string();
    match call(shard, caller, v, &group, GroupRequest::OffsetDelete(r)).await {
        Ok(GroupResponse::OffsetDelete(resp)) => resp,
        other => OffsetDeleteResponse::default().with_error_code(fail_code(&other)),
    }
}

pub async fn describe_groups(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: DescribeGroupsRequest,
    v: i16,
) -> DescribeGroupsResponse {
    let mut resp = DescribeGroupsResponse::default();
    let with_ops = v >= 3 && r.include_authorized_operations;
    for g in r.groups {
        let group = g.0.to_string();
        let d = match call(
            shard,
            caller,
            v,
            &group,
            GroupRequest::Describe {
                group: group.clone(),
            },
        )
        .await
        {
            Ok(GroupResponse::Describe(mut d)) => {
                if with_ops {
                    d.authorized_operations = crate::broker::GROUP_AUTHORIZED_OPS;
                }
                d
            }
            other => DescribedGroup::default()
                .with_group_id(g.clone())
                .with_error_code(fail_code(&other))
                .with_authorized_operations(i32::MIN),
        };
        resp.groups.push(d);
    }
    resp
}

/// ListGroups asks every partition (each owned by some shard) and concatenates.
pub async fn list_groups(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: ListGroupsRequest,
    v: i16,
) -> ListGroupsResponse {
    let states: Vec<String> = if v >= 4 {
        r.states_filter
            .iter()
            .map(|x| x.to_ascii_lowercase())
            .collect()
    } else {
        Vec::new()
    };
    let types: Vec<String> = if v >= 5 {
        r.types_filter
            .iter()
            .map(|x| x.to_ascii_lowercase())
            .collect()
    } else {
        Vec::new()
    };
    let mut resp = ListGroupsResponse::default();
    for p in 0..shard.broker.config.offsets_topic_num_partitions {
        let req = GroupRequest::List {
            states: states.clone(),
            types: types.clone(),
        };
        match call_partition(shard, caller, v, p, req).await {
            Ok(GroupResponse::List(groups)) => resp.groups.extend(groups),
            other => resp.error_code = fail_code(&other),
        }
    }
    resp
}

pub async fn delete_groups(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: DeleteGroupsRequest,
    v: i16,
) -> DeleteGroupsResponse {
    let mut resp = DeleteGroupsResponse::default();
    for g in r.groups_names {
        let group = g.0.to_string();
        let code = match call(
            shard,
            caller,
            v,
            &group,
            GroupRequest::Delete {
                group: group.clone(),
            },
        )
        .await
        {
            Ok(GroupResponse::Delete(code)) => code,
            other => fail_code(&other),
        };
        resp.results.push(
            delete_groups_response::DeletableGroupResult::default()
                .with_group_id(g)
                .with_error_code(code),
        );
    }
    resp
}

pub async fn consumer_group_heartbeat(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: ConsumerGroupHeartbeatRequest,
    v: i16,
) -> ConsumerGroupHeartbeatResponse {
    let group = r.group_id.0.to_string();
    match call(shard, caller, v, &group, GroupRequest::ConsumerHeartbeat(r)).await {
        Ok(GroupResponse::ConsumerHeartbeat(resp)) => resp,
        other => ConsumerGroupHeartbeatResponse::default().with_error_code(fail_code(&other)),
    }
}

pub async fn consumer_group_describe(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: ConsumerGroupDescribeRequest,
    v: i16,
) -> ConsumerGroupDescribeResponse {
    let mut resp = ConsumerGroupDescribeResponse::default();
    let with_ops = r.include_authorized_operations;
    for g in r.group_ids {
        let group = g.0.to_string();
        let d = match call(
            shard,
            caller,
            v,
            &group,
            GroupRequest::ConsumerDescribe {
                group: group.clone(),
            },
        )
        .await
        {
            Ok(GroupResponse::ConsumerDescribe(mut d)) => {
                if with_ops && d.error_code == 0 {
                    d.authorized_operations = crate::broker::GROUP_AUTHORIZED_OPS;
                }
                d
            }
            other => consumer_group_describe_response::DescribedGroup::default()
                .with_group_id(g.clone())
                .with_error_code(fail_code(&other))
                .with_authorized_operations(i32::MIN),
        };
        resp.groups.push(d);
    }
    resp
}
