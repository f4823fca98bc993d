//! ConsumerGroupDescribe (KIP-848): each group described by the shard that owns it.

use super::auth::{self, Op, Rt};
use super::calls::{call_group, fail_code};
use super::common::GROUP_AUTHORIZED_OPS;
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::*;
use std::rc::Rc;

pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: ConsumerGroupDescribeRequest,
    v: i16,
) -> ConsumerGroupDescribeResponse {
    let mut resp = ConsumerGroupDescribeResponse::default();
    let with_ops = r.include_authorized_operations;
    for g in r.group_ids {
        let group = g.0.to_string();
        // Describe on each group (`KafkaApis.handleConsumerGroupDescribe`).
        if !auth::allowed(&shard.broker, caller, Op::Describe, Rt::Group, &group) {
            resp.groups.push(
                consumer_group_describe_response::DescribedGroup::default()
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
            GroupRequest::ConsumerDescribe {
                group: group.clone(),
            },
        )
        .await
        {
            Ok(GroupResponse::ConsumerDescribe(mut d)) => {
                if with_ops && d.error_code == 0 {
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
            other => consumer_group_describe_response::DescribedGroup::default()
                .with_group_id(g.clone())
                .with_error_code(fail_code(&other))
                .with_authorized_operations(i32::MIN),
        };
        resp.groups.push(d);
    }
    resp
}
