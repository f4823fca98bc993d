//! ListPartitionReassignments: the partition moves under way (`kafka-reassign-partitions
//! --verify` and `--list`, `Admin.listPartitionReassignments`).
//!
//! Kafka's answer (`ReplicationControlManager.listPartitionReassignments`): DESCRIBE on the
//! cluster, else CLUSTER_AUTHORIZATION_FAILED; every partition under reassignment (or those of
//! the named ones that are; names that are not topics are left out), each with its replicas
//! (the new ones, then those still to leave), the replicas being added and those being removed.
//!
//! Here a reassignment is under way from its `Command::Reassign` until the partition's Raft
//! leader reports its group settled on the new replicas (`Command::Reassigned`), or for a
//! partition of replication factor 1, until its target copied every record (`data::moving`),
//! as the metadata log applied both on this node. A single node has none.

use super::auth;
use super::common::{code, s, Asked};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;

/// ListPartitionReassignments v0.
pub(super) async fn handle(
    broker: &Broker,
    caller: &Caller,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    // The crate's default message is "", where Kafka sends null.
    let mut resp = ListPartitionReassignmentsResponse::default().with_error_message(None);
    if !auth::cluster(broker, caller, auth::Op::Describe) {
        // As Kafka's `getErrorResponse`: every partition asked echoed, with nothing moving.
        resp.error_code = code(ResponseError::ClusterAuthorizationFailed);
        resp.error_message = Some(s("Cluster authorization failed."));
        resp.topics = req
            .topics
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                OngoingTopicReassignment::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partition_indexes
                            .iter()
                            .map(|p| {
                                OngoingPartitionReassignment::default().with_partition_index(*p)
                            })
                            .collect(),
                    )
            })
            .collect();
        return resp;
    }
    let asked = Asked::new(req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
    }));
    let snap = broker.topics.snapshot();
    let ongoing: BTreeMap<String, BTreeMap<i32, Vec<u64>>> =
        broker.topics.reassigning().into_iter().collect();
    for (name, moving) in ongoing {
        let Some(topic) = snap.get(&name) else {
            continue;
        };
        let mut partitions = Vec::new();
        for (p, before) in moving {
            if !asked.wants(&name, p) {
                continue;
            }
            // A partition of replication factor 1 moves to the node it is placed on now.
            let Some(target) = broker
                .topics
                .assigned_replicas(topic, p)
                .or_else(|| broker.topics.moving(topic, p).map(|m| vec![m.to]))
            else {
                continue;
            };
            let ids = |v: Vec<u64>| v.into_iter().map(|n| BrokerId(n as i32)).collect();
            let adding: Vec<u64> = target
                .iter()
                .copied()
                .filter(|n| !before.contains(n))
                .collect();
            let removing: Vec<u64> = before
                .iter()
                .copied()
                .filter(|n| !target.contains(n))
                .collect();
            let replicas: Vec<u64> = target.iter().chain(&removing).copied().collect();
            partitions.push(
                OngoingPartitionReassignment::default()
                    .with_partition_index(p)
                    .with_replicas(ids(replicas))
                    .with_adding_replicas(ids(adding))
                    .with_removing_replicas(ids(removing)),
            );
        }
        if !partitions.is_empty() {
            resp.topics.push(
                OngoingTopicReassignment::default()
                    .with_name(TopicName(s(name)))
                    .with_partitions(partitions),
            );
        }
    }
    resp
}
