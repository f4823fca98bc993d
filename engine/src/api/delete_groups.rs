//! DeleteGroups: each group deleted by the shard that owns it (only empty or dead groups).

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
    r: DeleteGroupsRequest,
    v: i16,
) -> DeleteGroupsResponse {
    let mut resp = DeleteGroupsResponse::default();
    for g in r.groups_names {
        let group = g.0.to_string();
        // Delete on each group (`KafkaApis.handleDeleteGroupsRequest`).
        if !auth::allowed(&shard.broker, caller, Op::Delete, Rt::Group, &group) {
            resp.results.push(
                delete_groups_response::DeletableGroupResult::default()
                    .with_group_id(g)
                    .with_error_code(
                        kafka_protocol::ResponseError::GroupAuthorizationFailed.code(),
                    ),
            );
            continue;
        }
        let code = match call_group(
            shard,
            caller,
            v,
            &group,
            GroupRequest::Delete {
                group: group.clone(),
            },
        )
        .await
        {
            Ok(GroupResponse::Delete(code)) => code,
            other => fail_code(&other),
        };
        resp.results.push(
            delete_groups_response::DeletableGroupResult::default()
                .with_group_id(g)
                .with_error_code(code),
        );
    }
    resp
}
