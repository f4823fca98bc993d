//! DescribeGroups: each group described by the shard that owns it.

use super::auth::{self, Op, Rt};
use super::calls::{call_group, fail_code};
use super::common::GROUP_AUTHORIZED_OPS;
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::*;
use std::rc::Rc;

pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: DescribeGroupsRequest,
    v: i16,
) -> DescribeGroupsResponse {
    let mut resp = DescribeGroupsResponse::default();
    let with_ops = v >= 3 && r.include_authorized_operations;
    for g in r.groups {
        let group = g.0.to_string();
        // Describe on each group (`KafkaApis.handleDescribeGroupsRequest`).
        if !auth::allowed(&shard.broker, caller, Op::Describe, Rt::Group, &group) {
            resp.groups.push(
                DescribedGroup::default()
                    .with_group_id(g.clone())
                    .with_error_code(kafka_protocol::ResponseError::GroupAuthorizationFailed.code())
                    .with_authorized_operations(i32::MIN),
            );
            continue;
        }
        let d = match call_group(
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
                    d.authorized_operations = auth::operations(
                        &shard.broker,
                        caller,
                        Rt::Group,
                        &group,
                        GROUP_AUTHORIZED_OPS,
                    );
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
