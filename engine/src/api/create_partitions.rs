//! CreatePartitions: grow topics, checked as Kafka's controller checks them
//! (`ControllerApis.createPartitions`, `ReplicationControlManager.createPartitions` and
//! `validateManualPartitionAssignment` in Kafka 4.4), then written to the topic registry in one
//! durable step on a blocking thread.
//!
//! Nothing else has to be told: every request reads the registry's current snapshot, so Metadata
//! lists the new partitions at once, Produce and Fetch reach them (a partition's log opens on
//! first use, as a new topic's do), a consumer group's next heartbeat sees its subscribed topics'
//! metadata hash change and computes a new target, and a classic group's leader rejoins when its
//! client's metadata shows the new count. Committed offsets are keyed by partition and untouched.

use super::common::{node_ids, s};
use crate::broker::Broker;
use crate::topics::{RegistryError, CONSUMER_OFFSETS};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Kafka's bound on the partitions one request may add (`validateTotalNumberOfPartitions`,
/// `QuorumController.MAX_RECORDS_PER_USER_OP`).
pub(super) const MAX_PARTITIONS_PER_REQUEST: i64 = 10_000;

fn result(
    name: &TopicName,
    e: Option<(ResponseError, Option<String>)>,
) -> CreatePartitionsTopicResult {
    let mut r = CreatePartitionsTopicResult::default().with_name(name.clone());
    if let Some((e, msg)) = e {
        r.error_code = e.code();
        r.error_message = msg.map(s);
    }
    r
}

/// Why `topic`'s entry cannot be applied, or `None` if it can: Kafka's checks in its order.
fn check(
    broker: &Broker,
    t: &create_partitions_request::CreatePartitionsTopic,
    current: Option<i32>,
) -> Option<(ResponseError, Option<String>)> {
    let name = t.name.0.as_str();
    let Some(current) = current else {
        return Some((ResponseError::UnknownTopicOrPartition, None));
    };
    if name == CONSUMER_OFFSETS {
        // Kafka lets this through and breaks every group's coordinator mapping (a group's
        // partition is its hash modulo this count); here the count is a broker setting.
        return Some((
            ResponseError::InvalidPartitions,
            Some(format!(
                "The partition count of {CONSUMER_OFFSETS} is offsets.topic.num.partitions ({current}); a group's partition is its hash modulo that count, so it cannot change."
            )),
        ));
    }
    if t.count == current {
        return Some((
            ResponseError::InvalidPartitions,
            Some(format!("Topic already has {current} partition(s).")),
        ));
    }
    if t.count < current {
        let e = RegistryError::NotAnIncrease {
            name: name.to_string(),
            current,
            requested: t.count,
        };
        return Some((ResponseError::InvalidPartitions, Some(e.to_string())));
    }
    let additional = t.count - current;
    if let Some(assignments) = &t.assignments {
        if assignments.len() as i64 != additional as i64 {
            return Some((
                ResponseError::InvalidReplicaAssignment,
                Some(format!(
                    "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
                    assignments.len()
                )),
            ));
        }
        // The nodes that exist: the cluster's members, or this node alone. Each new partition
        // has the topic's number of replicas (on a cluster the metadata log checks again as it
        // applies it).
        let topic = broker.topics.snapshot().get(name).cloned()?;
        let invalid = |msg: String| Some((ResponseError::InvalidReplicaAssignment, Some(msg)));
        let nodes: Vec<u64> = match &broker.cluster {
            Some(cluster) => {
                if topic.replication_factor > 1
                    && broker.topics.assigned_replicas(&topic, 0).is_none()
                {
                    return invalid(format!(
                        "Topic '{name}' has a replica on every node: its new partitions do too, \
                         and cannot be assigned."
                    ));
                }
                cluster.members().to_vec()
            }
            None => vec![broker.node_id as u64],
        };
        for a in assignments {
            let checked = node_ids(&a.broker_ids).and_then(|ids| {
                replication::metadata::MetadataState::check_assignment(
                    &ids,
                    &nodes,
                    Some(topic.replication_factor as usize),
                )
            });
            if let Err(m) = checked {
                return invalid(m);
            }
        }
    }
    None
}

/// CreatePartitions v0–v3 (`validate_only` answers as the change would, and changes nothing).
///
/// With an authorizer: Alter on each topic (after the duplicate check), else
/// TOPIC_AUTHORIZATION_FAILED (Kafka 4.x `ControllerApis.createPartitions`).
pub(super) async fn handle(
    broker: &Arc<Broker>,
    caller: &crate::runtime::shard::Caller,
    req: CreatePartitionsRequest,
    _version: i16,
) -> CreatePartitionsResponse {
    let mut resp = CreatePartitionsResponse::default();
    let snap = broker.topics.snapshot();
    // Too many new partitions fails the whole request, every topic alike.
    let additional: i64 = req
        .topics
        .iter()
        .filter_map(|t| {
            let current = snap.get(t.name.0.as_str())?.partitions;
            (t.count > current).then(|| (t.count - current) as i64)
        })
        .sum();
    if additional > MAX_PARTITIONS_PER_REQUEST {
        let msg = "Excessively large number of additional partitions per request.";
        resp.results = req
            .topics
            .iter()
            .map(|t| {
                result(
                    &t.name,
                    Some((ResponseError::PolicyViolation, Some(msg.into()))),
                )
            })
            .collect();
        return resp;
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &req.topics {
        *seen.entry(t.name.0.as_str()).or_default() += 1;
    }
    // Kafka answers a duplicated name once, first, and does not apply it.
    for (name, n) in &seen {
        if *n > 1 {
            let name = TopicName(s(*name));
            resp.results.push(result(
                &name,
                Some((
                    ResponseError::InvalidRequest,
                    Some("Duplicate topic name.".into()),
                )),
            ));
        }
    }
    let mut changes = Vec::new();
    let mut assigned: BTreeMap<String, Vec<Vec<u64>>> = BTreeMap::new();
    let mut ok = Vec::new();
    for t in req.topics.iter().filter(|t| seen[t.name.0.as_str()] == 1) {
        use super::auth::{self, Op, Rt};
        if !auth::allowed(broker, caller, Op::Alter, Rt::Topic, &t.name.0) {
            resp.results.push(result(
                &t.name,
                Some((ResponseError::TopicAuthorizationFailed, None)),
            ));
            continue;
        }
        let current = snap.get(t.name.0.as_str()).map(|topic| topic.partitions);
        match check(broker, t, current) {
            Some(e) => resp.results.push(result(&t.name, Some(e))),
            None => {
                changes.push((t.name.0.to_string(), t.count));
                if let Some(a) = t.assignments.as_ref().filter(|_| broker.cluster.is_some()) {
                    assigned.insert(
                        t.name.0.to_string(),
                        a.iter()
                            .map(|a| node_ids(&a.broker_ids).expect("checked: positive ids"))
                            .collect(),
                    );
                }
                ok.push(t.name.clone());
            }
        }
    }
    if !changes.is_empty() && !req.validate_only {
        let written = if broker.topics.is_replicated() {
            broker
                .topics
                .add_partitions_replicated(&changes, assigned)
                .await
        } else {
            let b = broker.clone();
            glommio::executor()
                .spawn_blocking(move || b.topics.add_partitions(&changes))
                .await
        };
        if let Err(e) = written {
            // A topic deleted or grown by a concurrent request since the checks, or the disk.
            let code = match &e {
                RegistryError::Unknown(_) => ResponseError::UnknownTopicOrPartition,
                RegistryError::NotAnIncrease { .. } => ResponseError::InvalidPartitions,
                // A manual assignment the metadata log refused as it applied it (a node
                // removed since this node checked it, say).
                RegistryError::InvalidAssignment(_) => ResponseError::InvalidReplicaAssignment,
                RegistryError::InvalidReplicationFactor(_) => {
                    ResponseError::InvalidReplicationFactor
                }
                RegistryError::NotAvailable(_) => ResponseError::RequestTimedOut,
                _ => {
                    tracing::error!(error = %e, "adding partitions failed");
                    ResponseError::UnknownServerError
                }
            };
            let msg = e.to_string();
            for name in ok {
                resp.results
                    .push(result(&name, Some((code, Some(msg.clone())))));
            }
            return resp;
        }
    }
    for name in ok {
        resp.results.push(result(&name, None));
    }
    resp
}
