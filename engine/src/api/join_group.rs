//! JoinGroup (classic protocol): parked by the group's coordinator until the join phase ends.

use super::auth::{self, Op, Rt};
use super::calls::{call_group, fail_code};
use super::common::s;
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::*;
use std::rc::Rc;

pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: JoinGroupRequest,
    v: i16,
) -> JoinGroupResponse {
    let group = r.group_id.0.to_string();
    let member_id = r.member_id.clone();
    // Read on the group, before the coordinator sees the request (`KafkaApis.handleJoinGroupRequest`;
    // the refusal is `JoinGroupRequest.getErrorResponse`: no member id).
    if !auth::allowed(&shard.broker, caller, Op::Read, Rt::Group, &group) {
        return JoinGroupResponse::default()
            .with_error_code(kafka_protocol::ResponseError::GroupAuthorizationFailed.code())
            .with_generation_id(-1)
            .with_member_id(s(""))
            .with_leader(s(""))
            .with_protocol_name(if v >= 7 { None } else { Some(s("")) });
    }
    match call_group(shard, caller, v, &group, GroupRequest::Join(r)).await {
        Ok(GroupResponse::Join(resp)) => resp,
        other => JoinGroupResponse::default()
            .with_error_code(fail_code(&other))
            .with_generation_id(-1)
            .with_member_id(member_id)
            .with_protocol_name(if v >= 7 { None } else { Some(s("")) }),
    }
}
