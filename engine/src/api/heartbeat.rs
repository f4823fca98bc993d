//! Heartbeat (classic protocol): one member's heartbeat, answered by the group's coordinator.

use super::auth::{self, Op, Rt};
use super::calls::{answer, fail_code, partition_of, start_partition};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::{Caller, Handled, Shard};
use kafka_protocol::messages::*;
use std::rc::Rc;
use wire::Response;

/// Answered while it runs when the group is on this shard (it never waits for anything).
pub(super) fn handle(shard: &Rc<Shard>, caller: &Caller, r: HeartbeatRequest, v: i16) -> Handled {
    // Read on the group (`KafkaApis.handleHeartbeatRequest`), before the coordinator sees it.
    if !auth::allowed(&shard.broker, caller, Op::Read, Rt::Group, &r.group_id) {
        return Handled::Done(Ok(Response::Heartbeat(
            HeartbeatResponse::default()
                .with_error_code(kafka_protocol::ResponseError::GroupAuthorizationFailed.code()),
        )));
    }
    let partition = partition_of(shard, &r.group_id);
    let call = start_partition(shard, caller, v, partition, GroupRequest::Heartbeat(r));
    answer(call, |result| {
        Response::Heartbeat(match result {
            Ok(GroupResponse::Heartbeat(resp)) => resp,
            other => HeartbeatResponse::default().with_error_code(fail_code(&other)),
        })
    })
}
