//! RemoveRaftVoter: take a node out of a cluster (KIP-853's `kafka-metadata-quorum
//! remove-controller`). The node leaves the metadata log's voters (`RemoveVoter`), which every
//! node applies; each Raft group it is a voter of (the metadata log, every `__consumer_offsets`
//! partition, every replicated topic partition) then loses it on its leader's next ticks, one
//! configuration change each, so no commit depends on it any more. docs/replication.md,
//! "Removing a node".
//!
//! Where it differs from Kafka 4.4: Kafka refuses voter changes on a quorum configured with a
//! static `controller.quorum.voters` (kraft.version 0); Ringleader's quorum is always that
//! list, so it removes from it. Kafka answers once the controllers' voter set committed the
//! change; this answers once the metadata log applied it on this node (each group's own
//! change follows within ticks: DescribeQuorum shows the metadata log's).

use super::common::{code, s};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use crate::topics::RegistryError;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

/// RemoveRaftVoter v0.
pub(super) async fn handle(
    broker: &Broker,
    caller: &Caller,
    req: RemoveRaftVoterRequest,
) -> RemoveRaftVoterResponse {
    let fail = |e: ResponseError, message: String| {
        RemoveRaftVoterResponse::default()
            .with_error_code(code(e))
            .with_error_message(Some(s(message)))
    };
    let cluster =
        match super::add_raft_voter::admit(broker, caller, req.cluster_id.as_ref(), "remove one") {
            Ok(c) => c,
            Err((e, message)) => {
                return RemoveRaftVoterResponse::default()
                    .with_error_code(code(e))
                    .with_error_message(message.map(s))
            }
        };
    let id = req.voter_id;
    let Some(node) = u64::try_from(id).ok().filter(|n| cluster.is_member(*n)) else {
        return fail(
            ResponseError::VoterNotFound,
            format!(
                "node {id} is not a voter of this cluster (voters {:?})",
                cluster.members()
            ),
        );
    };
    let directory = cluster.directory_id(node);
    if req.voter_directory_id != directory {
        return fail(
            ResponseError::VoterNotFound,
            format!(
                "voter {id} has directory id {directory} (DescribeQuorum reports it), not {}",
                req.voter_directory_id
            ),
        );
    }
    match broker.topics.remove_voter(node).await {
        // Kafka's success carries the error's message, "NONE" (`RaftUtil.removeVoterResponse`).
        Ok(()) => RemoveRaftVoterResponse::default().with_error_message(Some(s("NONE"))),
        Err(RegistryError::NotAVoter(m)) => fail(ResponseError::VoterNotFound, m),
        Err(RegistryError::CannotRemove(m)) => fail(ResponseError::InvalidRequest, m),
        // Not applied in time, or not proposed: retriable, and a retry finds it applied (then
        // VOTER_NOT_FOUND) or applies it.
        Err(e) => fail(ResponseError::RequestTimedOut, e.to_string()),
    }
}
