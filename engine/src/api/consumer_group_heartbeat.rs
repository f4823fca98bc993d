//! ConsumerGroupHeartbeat (KIP-848): one member's heartbeat, joined and answered by the group's
//! coordinator (`coordinator::group::consumer`).

use super::calls::{call_group, fail_code};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::*;
use std::rc::Rc;

pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: ConsumerGroupHeartbeatRequest,
    v: i16,
) -> ConsumerGroupHeartbeatResponse {
    let group = r.group_id.0.to_string();
    match call_group(shard, caller, v, &group, GroupRequest::ConsumerHeartbeat(r)).await {
        Ok(GroupResponse::ConsumerHeartbeat(resp)) => resp,
        other => ConsumerGroupHeartbeatResponse::default().with_error_code(fail_code(&other)),
    }
}
