//! LeaveGroup: members leave, classic or consumer-protocol groups alike.

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
    r: LeaveGroupRequest,
    v: i16,
) -> LeaveGroupResponse {
    let group = r.group_id.0.to_string();
    // Read on the group (`KafkaApis`), checked before the coordinator sees the request.
    if !auth::allowed(&shard.broker, caller, Op::Read, Rt::Group, &group) {
        return LeaveGroupResponse::default()
            .with_error_code(kafka_protocol::ResponseError::GroupAuthorizationFailed.code());
    }
    match call_group(shard, caller, v, &group, GroupRequest::Leave(r)).await {
        Ok(GroupResponse::Leave(resp)) => resp,
        other => LeaveGroupResponse::default().with_error_code(fail_code(&other)),
    }
}
