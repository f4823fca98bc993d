//! AddRaftVoter: add a node to a running cluster (KIP-853's `kafka-metadata-quorum
//! add-controller`). The node, started with the cluster's `controller.quorum.voters` and a
//! controller listener of its own (docs/replication.md, "Adding a node"), waits for its
//! peers; this request names it and its node-to-node address, the metadata log applies
//! `AddVoter` on every node, every node's address book learns the address, and each Raft group
//! (the metadata log, every `__consumer_offsets` partition, every topic replicated on every
//! voter) takes it in on its leader's next ticks: as a learner that copies the log (or the
//! leader's snapshot), then as a voter once caught up.
//!
//! Where it differs from Kafka 4.4: Kafka refuses voter changes on a quorum configured with a
//! static `controller.quorum.voters` (kraft.version 0); Ringleader's quorum is always that
//! list, so it adds to it. Kafka first checks that the new voter is reachable and caught up
//! and answers once the voter set with it committed; this answers once the metadata log
//! applied the addition on this node (a node that is not running yet stays a learner, which
//! no majority waits for, until it comes). The directory id must be the node's fixed one
//! (DescribeQuorum on the joining node reports it), as for RemoveRaftVoter.

use super::auth::{self, Op};
use super::common::{code, s};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use crate::topics::RegistryError;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

/// What AddRaftVoter and RemoveRaftVoter check first, as Kafka's controller does: ALTER on the
/// cluster (`ControllerApis.handleAddRaftVoter` / `handleRemoveRaftVoter`; the error carries no
/// message, as Kafka's `ApiError.fromThrowable` drops it), the cluster id if the request names
/// one, and a node of a cluster (a single node has no quorum to `change`, e.g. "add one").
pub(super) fn admit<'a>(
    broker: &'a Broker,
    caller: &Caller,
    cluster_id: Option<&kafka_protocol::protocol::StrBytes>,
    change: &str,
) -> Result<&'a std::sync::Arc<crate::cluster::Cluster>, (ResponseError, Option<String>)> {
    if !auth::cluster(broker, caller, Op::Alter) {
        return Err((ResponseError::ClusterAuthorizationFailed, None));
    }
    if let Some(id) = cluster_id {
        if id.as_str() != broker.cluster_id {
            return Err((
                ResponseError::InconsistentClusterId,
                Some(format!(
                    "cluster id {id} is not this cluster's ({})",
                    broker.cluster_id
                )),
            ));
        }
    }
    broker.cluster.as_ref().ok_or_else(|| {
        (
            ResponseError::UnsupportedVersion,
            Some(format!(
                "this node is not one of a cluster (controller.quorum.voters names it alone): \
                 start a cluster of several nodes to {change}"
            )),
        )
    })
}

/// AddRaftVoter v0.
pub(super) async fn handle(
    broker: &Broker,
    caller: &Caller,
    req: AddRaftVoterRequest,
) -> AddRaftVoterResponse {
    let fail = |e: ResponseError, message: String| {
        AddRaftVoterResponse::default()
            .with_error_code(code(e))
            .with_error_message(Some(s(message)))
    };
    let cluster = match admit(broker, caller, req.cluster_id.as_ref(), "add one") {
        Ok(c) => c,
        Err((e, message)) => {
            return AddRaftVoterResponse::default()
                .with_error_code(code(e))
                .with_error_message(message.map(s))
        }
    };
    let id = req.voter_id;
    let Some(node) = u64::try_from(id).ok().filter(|n| *n > 0) else {
        return fail(
            ResponseError::InvalidRequest,
            format!("{id} is not a node id"),
        );
    };
    if cluster.is_member(node) {
        return fail(
            ResponseError::DuplicateVoter,
            format!(
                "The voter id {id} is already part of the set of voters {:?}.",
                cluster.members()
            ),
        );
    }
    let directory = cluster.directory_id(node);
    if req.voter_directory_id != directory {
        return fail(
            ResponseError::InvalidRequest,
            format!(
                "node {id} has directory id {directory} (DescribeQuorum on it reports it, and \
                 it logs it at start), not {}",
                req.voter_directory_id
            ),
        );
    }
    // Its node-to-node address: the listener named as this node's controller listener (what
    // `kafka-metadata-quorum add-controller` sends from the joining node's config), else the
    // only one given.
    let Some(l) = req
        .listeners
        .iter()
        .find(|l| l.name.eq_ignore_ascii_case("CONTROLLER"))
        .or_else(|| (req.listeners.len() == 1).then(|| &req.listeners[0]))
    else {
        return fail(
            ResponseError::InvalidRequest,
            format!(
                "node {id}'s listeners {:?} name no CONTROLLER listener: its node-to-node \
                 address",
                req.listeners
                    .iter()
                    .map(|l| l.name.as_str())
                    .collect::<Vec<_>>()
            ),
        );
    };
    let addr = crate::cluster::node_addr(l.host.as_str(), l.port);
    if let Some(other) = cluster.member_at(&addr) {
        return fail(
            ResponseError::InvalidRequest,
            format!("{addr} is node {other}'s node-to-node address"),
        );
    }
    match broker.topics.add_voter(node, addr).await {
        // Kafka's success carries the error's message, "NONE" (`RaftUtil.addVoterResponse`).
        Ok(()) => AddRaftVoterResponse::default().with_error_message(Some(s("NONE"))),
        Err(RegistryError::DuplicateVoter(m)) => fail(ResponseError::DuplicateVoter, m),
        Err(RegistryError::CannotAdd(m)) => fail(ResponseError::InvalidRequest, m),
        // Not applied in time, or not proposed: retriable, and a retry finds it applied (then
        // DUPLICATE_VOTER) or applies it.
        Err(e) => fail(ResponseError::RequestTimedOut, e.to_string()),
    }
}
