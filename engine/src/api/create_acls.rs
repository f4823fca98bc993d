//! CreateAcls: validated as Kafka validates (`core/src/main/scala/kafka/server/AclApis.scala`
//! `handleCreateAcls`, `AclControlManager.validateNewAcl`), then added durably in one write.

use super::auth::{self, Op};
use super::common::{code, s};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use security::acl::*;
use std::sync::Arc;

/// Kafka's message when no authorizer is configured (`SecurityDisabledException`).
const NO_AUTHORIZER: &str = "No Authorizer is configured.";

pub(super) async fn handle(
    b: &Arc<Broker>,
    caller: &Caller,
    r: CreateAclsRequest,
) -> Result<CreateAclsResponse, String> {
    let bindings: Vec<AclBinding> = r
        .creations
        .iter()
        .map(|c| AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::from_code(c.resource_type),
                name: c.resource_name.to_string(),
                pattern_type: PatternType::from_code(c.resource_pattern_type),
            },
            entry: AccessControlEntry {
                principal: c.principal.to_string(),
                host: c.host.to_string(),
                operation: AclOperation::from_code(c.operation),
                permission: AclPermissionType::from_code(c.permission_type),
            },
        })
        .collect();
    // `CreateAclsRequest.validate`: Kafka refuses to parse a creation with an UNKNOWN element.
    if bindings.iter().any(|b| {
        b.pattern.resource_type == ResourceType::Unknown
            || b.pattern.pattern_type == PatternType::Unknown
            || b.entry.operation == AclOperation::Unknown
            || b.entry.permission == AclPermissionType::Unknown
    }) {
        return Err("CreateAcls creations contain unknown elements".into());
    }
    let all = |err: ResponseError, msg: String| {
        CreateAclsResponse::default().with_results(
            bindings
                .iter()
                .map(|_| {
                    AclCreationResult::default()
                        .with_error_code(code(err))
                        .with_error_message(Some(s(msg.clone())))
                })
                .collect(),
        )
    };
    if !auth::cluster(b, caller, Op::Alter) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return Ok(all(e, e.to_string()));
    }
    let Some(store) = b.acls.clone() else {
        return Ok(all(ResponseError::SecurityDisabled, NO_AUTHORIZER.into()));
    };
    let checked: Vec<Result<(), String>> = bindings.iter().map(validate_new_acl).collect();
    let valid: Vec<AclBinding> = bindings
        .iter()
        .zip(&checked)
        .filter(|(_, c)| c.is_ok())
        .map(|(b, _)| b.clone())
        .collect();
    let written = if valid.is_empty() {
        Ok(())
    } else {
        glommio::executor()
            .spawn_blocking(move || store.create(valid))
            .await
    };
    let write_error = written.err().map(|e| {
        tracing::error!(error = %e, "creating ACLs failed");
        e.to_string()
    });
    let results = checked
        .into_iter()
        .map(|c| match (c, &write_error) {
            (Err(m), _) => AclCreationResult::default()
                .with_error_code(code(ResponseError::InvalidRequest))
                .with_error_message(Some(s(m))),
            (Ok(()), Some(m)) => AclCreationResult::default()
                .with_error_code(code(ResponseError::UnknownServerError))
                .with_error_message(Some(s(m.clone()))),
            (Ok(()), None) => AclCreationResult::default().with_error_message(None),
        })
        .collect();
    Ok(CreateAclsResponse::default().with_results(results))
}
