//! DeleteAcls: every ACL each filter matches, removed durably in one write
//! (`core/src/main/scala/kafka/server/AclApis.scala` `handleDeleteAcls`,
//! `AclControlManager.deleteAcls`).

use super::auth::{self, Op};
use super::common::{code, s};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use security::acl::*;
use std::sync::Arc;

const NO_AUTHORIZER: &str = "No Authorizer is configured.";

pub(super) async fn handle(
    b: &Arc<Broker>,
    caller: &Caller,
    r: DeleteAclsRequest,
) -> Result<DeleteAclsResponse, String> {
    let filters: Vec<AclBindingFilter> = r
        .filters
        .iter()
        .map(|f| AclBindingFilter {
            pattern: ResourcePatternFilter {
                resource_type: ResourceType::from_code(f.resource_type_filter),
                name: f.resource_name_filter.as_ref().map(|n| n.to_string()),
                pattern_type: PatternType::from_code(f.pattern_type_filter),
            },
            entry: AccessControlEntryFilter {
                principal: f.principal_filter.as_ref().map(|n| n.to_string()),
                host: f.host_filter.as_ref().map(|n| n.to_string()),
                operation: AclOperation::from_code(f.operation),
                permission: AclPermissionType::from_code(f.permission_type),
            },
        })
        .collect();
    // `DeleteAclsRequest.validate`: Kafka refuses to parse a filter with an UNKNOWN element.
    if filters.iter().any(AclBindingFilter::is_unknown) {
        return Err("DeleteAcls filters contain UNKNOWN elements".into());
    }
    let all = |err: ResponseError, msg: &str| {
        DeleteAclsResponse::default().with_filter_results(
            filters
                .iter()
                .map(|_| {
                    DeleteAclsFilterResult::default()
                        .with_error_code(code(err))
                        .with_error_message(Some(s(msg)))
                })
                .collect(),
        )
    };
    if !auth::cluster(b, caller, Op::Alter) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return Ok(all(e, &e.to_string()));
    }
    let Some(store) = b.acls.clone() else {
        return Ok(all(ResponseError::SecurityDisabled, NO_AUTHORIZER));
    };
    let fs = filters.clone();
    let removed = glommio::executor()
        .spawn_blocking(move || store.delete(&fs))
        .await;
    let removed = match removed {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "deleting ACLs failed");
            return Ok(all(ResponseError::UnknownServerError, &e.to_string()));
        }
    };
    let results = removed
        .into_iter()
        .map(|bindings| {
            DeleteAclsFilterResult::default()
                .with_error_message(None)
                .with_matching_acls(
                    bindings
                        .into_iter()
                        .map(|b| {
                            DeleteAclsMatchingAcl::default()
                                .with_error_message(None)
                                .with_resource_type(b.pattern.resource_type.code())
                                .with_resource_name(s(b.pattern.name))
                                .with_pattern_type(b.pattern.pattern_type.code())
                                .with_principal(s(b.entry.principal))
                                .with_host(s(b.entry.host))
                                .with_operation(b.entry.operation.code())
                                .with_permission_type(b.entry.permission.code())
                        })
                        .collect(),
                )
        })
        .collect();
    Ok(DeleteAclsResponse::default().with_filter_results(results))
}
