//! ConsumerGroupHeartbeat (KIP-848): one member's heartbeat, joined and answered by the group's
//! coordinator (`coordinator::group::consumer`).

use super::calls::{answer, fail_code, partition_of, start_partition};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::{Caller, Handled, Shard};
use kafka_protocol::messages::*;
use std::rc::Rc;
use wire::Response;

/// Answered while it runs when the group is on this shard and the heartbeat changed nothing;
/// one that wrote records waits for them to be durable.
pub(super) fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: ConsumerGroupHeartbeatRequest,
    v: i16,
) -> Handled {
    let partition = partition_of(shard, &r.group_id);
    let call = start_partition(
        shard,
        caller,
        v,
        partition,
        GroupRequest::ConsumerHeartbeat(r),
    );
    answer(call, |result| {
        Response::ConsumerGroupHeartbeat(match result {
            Ok(GroupResponse::ConsumerHeartbeat(resp)) => resp,
            other => ConsumerGroupHeartbeatResponse::default().with_error_code(fail_code(&other)),
        })
    })
}
