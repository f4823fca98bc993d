//! OffsetDelete: remove a group's committed offsets for partitions it no longer consumes.

use super::calls::{call_group, fail_code};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::*;
use std::rc::Rc;

pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: OffsetDeleteRequest,
    v: i16,
) -> OffsetDeleteResponse {
    let group = r.group_id.0.to_string();
    match call_group(shard, caller, v, &group, GroupRequest::OffsetDelete(r)).await {
        Ok(GroupResponse::OffsetDelete(resp)) => resp,
        other => OffsetDeleteResponse::default().with_error_code(fail_code(&other)),
    }
}
