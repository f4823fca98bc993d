//! ListGroups: every shard's partitions asked for their groups, the filters applied there.

use super::auth::{self, Op, Rt};
use super::calls::{call_partition, fail_code};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::*;
use std::rc::Rc;

/// ListGroups asks every partition (each owned by some shard) and concatenates.
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: ListGroupsRequest,
    v: i16,
) -> ListGroupsResponse {
    let states: Vec<String> = if v >= 4 {
        r.states_filter
            .iter()
            .map(|x| x.to_ascii_lowercase())
            .collect()
    } else {
        Vec::new()
    };
    let types: Vec<String> = if v >= 5 {
        r.types_filter
            .iter()
            .map(|x| x.to_ascii_lowercase())
            .collect()
    } else {
        Vec::new()
    };
    // Describe on the cluster lists every group; without it, only the groups the caller may
    // Describe (`KafkaApis.handleListGroupsRequest`).
    let b = &shard.broker;
    let every_group = auth::cluster(b, caller, Op::Describe);
    let mut resp = ListGroupsResponse::default();
    for p in 0..shard.broker.config.offsets_topic_num_partitions {
        let req = GroupRequest::List {
            states: states.clone(),
            types: types.clone(),
        };
        match call_partition(shard, caller, v, p, req).await {
            Ok(GroupResponse::List(groups)) => resp.groups.extend(groups.into_iter().filter(|g| {
                every_group || auth::allowed(b, caller, Op::Describe, Rt::Group, &g.group_id)
            })),
            other => resp.error_code = fail_code(&other),
        }
    }
    resp
}
