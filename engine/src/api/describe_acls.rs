//! DescribeAcls: the ACLs a filter selects, grouped by resource pattern
//! (`core/src/main/scala/kafka/server/AclApis.scala` `handleDescribeAcls`).

use super::auth::{self, Op};
use super::common::{code, s};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use security::acl::*;

/// Kafka's message when no authorizer is configured.
pub(super) const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

/// The filter a DescribeAcls request carries; None when Kafka refuses to parse it (an UNKNOWN
/// element: `DescribeAclsRequest.validate`), which closes the connection.
fn filter_of(r: &DescribeAclsRequest) -> Option<AclBindingFilter> {
    let f = AclBindingFilter {
        pattern: ResourcePatternFilter {
            resource_type: ResourceType::from_code(r.resource_type_filter),
            name: r.resource_name_filter.as_ref().map(|n| n.to_string()),
            pattern_type: PatternType::from_code(r.pattern_type_filter),
        },
        entry: AccessControlEntryFilter {
            principal: r.principal_filter.as_ref().map(|n| n.to_string()),
            host: r.host_filter.as_ref().map(|n| n.to_string()),
            operation: AclOperation::from_code(r.operation),
            permission: AclPermissionType::from_code(r.permission_type),
        },
    };
    (!f.is_unknown()).then_some(f)
}

pub(super) fn handle(
    b: &Broker,
    caller: &Caller,
    r: DescribeAclsRequest,
) -> Result<DescribeAclsResponse, String> {
    let filter = filter_of(&r).ok_or("DescribeAcls filter contains UNKNOWN elements")?;
    let resp = DescribeAclsResponse::default();
    if !auth::cluster(b, caller, Op::Describe) {
        return Ok(resp
            .with_error_code(code(ResponseError::ClusterAuthorizationFailed))
            .with_error_message(Some(s(
                ResponseError::ClusterAuthorizationFailed.to_string()
            ))));
    }
    let Some(store) = b.acls.as_deref() else {
        return Ok(resp
            .with_error_code(code(ResponseError::SecurityDisabled))
            .with_error_message(Some(s(NO_AUTHORIZER))));
    };
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for binding in store.load().describe(&filter) {
        let p = &binding.pattern;
        let acl = AclDescription::default()
            .with_principal(s(binding.entry.principal.clone()))
            .with_host(s(binding.entry.host.clone()))
            .with_operation(binding.entry.operation.code())
            .with_permission_type(binding.entry.permission.code());
        match resources.iter_mut().find(|r| {
            r.resource_type == p.resource_type.code()
                && r.pattern_type == p.pattern_type.code()
                && *r.resource_name == *p.name
        }) {
            Some(r) => r.acls.push(acl),
            None => resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(p.resource_type.code())
                    .with_resource_name(s(p.name.clone()))
                    .with_pattern_type(p.pattern_type.code())
                    .with_acls(vec![acl]),
            ),
        }
    }
    Ok(resp.with_error_message(None).with_resources(resources))
}
