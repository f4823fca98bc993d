//! ConsumerGroupHeartbeat (KIP-848): one member's heartbeat, joined and answered by the group's
//! coordinator (`coordinator::group::consumer`).

use super::auth::{self, Op, Rt};
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
    // Read on the group, then Describe on every subscribed topic name: a client may not learn
    // about topics it cannot see (`KafkaApis.handleConsumerGroupHeartbeat`, Kafka 4.x).
    let b = &shard.broker;
    let refused = if !auth::allowed(b, caller, Op::Read, Rt::Group, &r.group_id) {
        Some(kafka_protocol::ResponseError::GroupAuthorizationFailed)
    } else if auth::on(b)
        && r.subscribed_topic_names.as_ref().is_some_and(|names| {
            names
                .iter()
                .any(|t| !auth::allowed(b, caller, Op::Describe, Rt::Topic, t))
        })
    {
        Some(kafka_protocol::ResponseError::TopicAuthorizationFailed)
    } else {
        None
    };
    if let Some(e) = refused {
        return Handled::Done(Ok(Response::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(e.code())
                .with_error_message(Some(kafka_protocol::protocol::StrBytes::from_static_str(
                    if e == kafka_protocol::ResponseError::GroupAuthorizationFailed {
                        "Group authorization failed."
                    } else {
                        "Topic authorization failed."
                    },
                ))),
        )));
    }
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
