//! Heartbeat (classic protocol): one member's heartbeat, answered by the group's coordinator.

use super::calls::{call_group, fail_code};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::*;
use std::rc::Rc;

pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: HeartbeatRequest,
    v: i16,
) -> HeartbeatResponse {
    let group = r.group_id.0.to_string();
    match call_group(shard, caller, v, &group, GroupRequest::Heartbeat(r)).await {
        Ok(GroupResponse::Heartbeat(resp)) => resp,
        other => HeartbeatResponse::default().with_error_code(fail_code(&other)),
    }
}
