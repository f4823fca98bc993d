//! AlterPartitionReassignments: move partitions to other nodes (`kafka-reassign-partitions
//! --execute`, `Admin.alterPartitionReassignments`), or cancel a move under way (a null replica
//! list, `--cancel`).
//!
//! Kafka's answer (`ControllerApis.handleAlterPartitionReassignments`,
//! `ReplicationControlManager.alterPartitionReassignments` in
//! `metadata/src/main/java/org/apache/kafka/controller/`): ALTER on the cluster, else
//! CLUSTER_AUTHORIZATION_FAILED for the whole request; then each partition on its own: an unknown
//! one UNKNOWN_TOPIC_OR_PARTITION, replicas that are empty, duplicated or name a node that is not
//! registered INVALID_REPLICA_ASSIGNMENT, a cancellation with nothing under way
//! NO_REASSIGNMENT_IN_PROGRESS; the same replicas as now, in any order, do nothing and succeed.
//! The answer comes once the target is recorded; the move itself goes on after it
//! (ListPartitionReassignments shows it until done).
//!
//! Here the target goes to the metadata log (`Command::Reassign`, one entry per partition, so each
//! gets its own answer), and the partition's Raft leader moves its group to it
//! (docs/replication.md, "Moving partitions"). What differs from Kafka 4.4, each refused with a
//! message rather than half done:
//! - a partition moves if it has a replica set of its own (a topic created with a factor between
//!   1 and the nodes) or one replica (factor 1: its target copies the records, then takes over,
//!   `data::moving`); a topic replicated on every node has nowhere else to go;
//! - a partition's number of replicas stays (INVALID_REPLICATION_FACTOR), whatever v1's
//!   `allow_replication_factor_change` says;
//! - a cancellation whose original replicas include a node removed from the cluster since.
//!
//! A single node holds every partition's one replica: moving it to itself is a no-op, anywhere
//! else names a node that is not registered.

use super::auth;
use super::common::{code, node_ids, s};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use crate::topics::RegistryError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

/// The most partitions one request moves: each is one metadata log entry, proposed in turn.
/// Partitions past it are answered INVALID_REQUEST and can be asked for again.
pub const MAX_PARTITIONS: usize = 1_000;

/// AlterPartitionReassignments v0–v1.
pub(super) async fn handle(
    broker: &Broker,
    caller: &Caller,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    // The crate's default message is "", where Kafka sends null.
    let mut resp = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(req.allow_replication_factor_change)
        .with_error_message(None);
    if !auth::cluster(broker, caller, auth::Op::Alter) {
        // As Kafka's `getErrorResponse`: the error at the top and on every partition asked.
        let e = ResponseError::ClusterAuthorizationFailed;
        resp.error_code = code(e);
        resp.error_message = Some(s("Cluster authorization failed."));
        resp.responses = req
            .topics
            .into_iter()
            .map(|t| {
                ReassignableTopicResponse::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                ReassignablePartitionResponse::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code(e))
                                    .with_error_message(Some(s("Cluster authorization failed.")))
                            })
                            .collect(),
                    )
            })
            .collect();
        return resp;
    }
    let mut asked = 0usize;
    for topic in req.topics {
        let name = topic.name.0.to_string();
        let mut out = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            asked += 1;
            let verdict = if asked > MAX_PARTITIONS {
                Err((
                    ResponseError::InvalidRequest,
                    Some(format!(
                        "at most {MAX_PARTITIONS} partitions are reassigned per request; ask again \
                         for this one"
                    )),
                ))
            } else {
                reassign(broker, &name, p.partition_index, p.replicas).await
            };
            let mut r = ReassignablePartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_error_message(None);
            if let Err((e, message)) = verdict {
                r.error_code = code(e);
                r.error_message = message.map(s);
            }
            out.push(r);
        }
        resp.responses.push(
            ReassignableTopicResponse::default()
                .with_name(TopicName(s(name)))
                .with_partitions(out),
        );
    }
    resp
}

/// One partition's reassignment (`replicas` None: its cancellation). An error's message is
/// None where Kafka sends none (its exception's text is the error's own).
async fn reassign(
    broker: &Broker,
    name: &str,
    partition: i32,
    replicas: Option<Vec<BrokerId>>,
) -> Result<(), (ResponseError, Option<String>)> {
    // `ReplicationControlManager`'s wording.
    let unknown = || {
        let known = broker
            .topics
            .snapshot()
            .get(name)
            .is_some_and(|t| !t.internal);
        let m = if known {
            format!("Unable to find partition {name}:{partition}.")
        } else {
            format!("Unable to find a topic named {name}.")
        };
        (ResponseError::UnknownTopicOrPartition, Some(m))
    };
    let invalid = |m: String| (ResponseError::InvalidReplicaAssignment, Some(m));
    let replicas = match replicas {
        None => None,
        Some(r) => Some(node_ids(&r).map_err(invalid)?),
    };
    if broker.cluster.is_none() {
        // One node, one replica of everything.
        let t = broker.topics.snapshot().get(name).cloned();
        if t.is_none_or(|t| t.internal || !(0..t.partitions).contains(&partition)) {
            return Err(unknown());
        }
        let me = broker.node_id as u64;
        return match replicas {
            None => Err((ResponseError::NoReassignmentInProgress, None)),
            // [me] passes; anything else is a duplicate or a node not registered.
            Some(r) => replication::metadata::MetadataState::check_assignment(&r, &[me], Some(1))
                .map_err(invalid),
        };
    }
    match broker.topics.reassign(name, partition, replicas).await {
        Ok(()) => Ok(()),
        Err(RegistryError::UnknownPartition(_)) => Err(unknown()),
        Err(RegistryError::InvalidAssignment(m)) => Err(invalid(m)),
        Err(RegistryError::NoReassignment(_)) => {
            Err((ResponseError::NoReassignmentInProgress, None))
        }
        Err(RegistryError::InvalidReplicationFactor(m)) => {
            Err((ResponseError::InvalidReplicationFactor, Some(m)))
        }
        Err(e) => Err((ResponseError::RequestTimedOut, Some(e.to_string()))),
    }
}
