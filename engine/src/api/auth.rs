//! Authorization for the handlers: Kafka's `AuthHelper` (`core/src/main/scala/kafka/server/
//! AuthHelper.scala`) over the broker's ACL store.
//!
//! Every check here is one branch on `Broker::acls` when no authorizer is configured, so the
//! handlers call them unconditionally. With one, a check reads the current ACL snapshot
//! (lock-free) and allocates nothing.

use crate::broker::Broker;
use crate::runtime::shard::Caller;
use security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

pub(crate) use security::acl::AclOperation as Op;
pub(crate) use security::acl::ResourceType as Rt;

/// May the caller do `op` on `(rt, name)`? (`AuthHelper.authorize`.)
#[inline]
pub(crate) fn allowed(
    b: &Broker,
    caller: &Caller,
    op: AclOperation,
    rt: ResourceType,
    name: &str,
) -> bool {
    crate::acls::allowed(
        b.acls.as_deref(),
        &caller.principal,
        &caller.client_host,
        op,
        rt,
        name,
    )
}

/// May the caller do `op` on the cluster? (`AuthHelper.authorize(…, CLUSTER, CLUSTER_NAME)`.)
#[inline]
pub(crate) fn cluster(b: &Broker, caller: &Caller, op: AclOperation) -> bool {
    allowed(b, caller, op, ResourceType::Cluster, CLUSTER_NAME)
}

/// Whether an authorizer is configured at all.
#[inline]
pub(crate) fn on(b: &Broker) -> bool {
    b.acls.is_some()
}

/// The authorized-operations field for a resource (`AuthHelper.authorizedOperations`): without
/// an authorizer, `without` (every supported operation, as Kafka reports then).
pub(crate) fn operations(
    b: &Broker,
    caller: &Caller,
    rt: ResourceType,
    name: &str,
    without: i32,
) -> i32 {
    match b.acls.as_deref() {
        None => without,
        Some(s) => s.load().authorized_operations(
            &caller.principal,
            crate::acls::host_of(&caller.client_host),
            rt,
            name,
        ),
    }
}

/// May the caller do `op` on some resource of type `rt`? (`AuthHelper.authorizeByResourceType`.)
pub(crate) fn by_type(b: &Broker, caller: &Caller, op: AclOperation, rt: ResourceType) -> bool {
    match b.acls.as_deref() {
        None => true,
        Some(s) => s.load().authorize_by_resource_type(
            &caller.principal,
            crate::acls::host_of(&caller.client_host),
            op,
            rt,
        ),
    }
}
