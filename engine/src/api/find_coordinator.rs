//! FindCoordinator: a single node coordinates every group and transactional id; on a node of a
//! cluster a group's coordinator is the leader of its `__consumer_offsets` partition.

use super::auth::{self, Op, Rt};
use super::common::{code, s};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

/// FindCoordinator v0–v6. A single node owns every partition, so every group's and every
/// transactional id's coordinator is us. On a node of a cluster, a group's coordinator is the
/// node this node's replica of the group's partition knows as leader, at that node's endpoint on
/// the listener the request came in on (Kafka answers from its metadata cache the same way:
/// `KafkaApis.getCoordinator`); no known leader is COORDINATOR_NOT_AVAILABLE, which clients
/// retry.
pub(super) fn handle(
    broker: &Broker,
    caller: &Caller,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let listener = &caller.listener;
    let key_type = if version >= 1 { req.key_type } else { 0 };
    let answer = |key: &StrBytes| -> (i16, Option<String>) {
        // Describe on the group / transactional id (`KafkaApis.getCoordinator`).
        let refused = match key_type {
            0 if !auth::allowed(broker, caller, Op::Describe, Rt::Group, key) => {
                Some(ResponseError::GroupAuthorizationFailed)
            }
            1 if !auth::allowed(broker, caller, Op::Describe, Rt::TransactionalId, key) => {
                Some(ResponseError::TransactionalIdAuthorizationFailed)
            }
            _ => None,
        };
        if let Some(e) = refused {
            return (code(e), Some(e.to_string()));
        }
        match (key_type, &broker.cluster) {
            (0 | 1, None) => (0, None),
            (0, Some(_)) => (0, None),
            (1, Some(_)) => (
                code(ResponseError::CoordinatorNotAvailable),
                Some("Transactions are not replicated on a cluster yet".into()),
            ),
            _ => match key_type {
                2 if version < 6 => (
                    code(ResponseError::InvalidRequest),
                    Some("Share keys need FindCoordinator v6".into()),
                ),
                2 => (
                    code(ResponseError::CoordinatorNotAvailable),
                    Some(format!("Share groups are not supported: {key}")),
                ),
                other => (
                    code(ResponseError::InvalidRequest),
                    Some(format!("Unknown key type {other}")),
                ),
            },
        }
    };
    // Where the coordinator of `key` is: (node, host, port), or why it is not known.
    let locate = |key: &StrBytes| -> Result<(i32, String, i32), (i16, String)> {
        let Some(cluster) = &broker.cluster else {
            return Ok((
                broker.node_id,
                listener.advertised_host.clone(),
                listener.advertised_port,
            ));
        };
        let partition =
            wire::partition_for(key.as_str(), broker.config.offsets_topic_num_partitions);
        let unknown = |why: String| (code(ResponseError::CoordinatorNotAvailable), why);
        let leader = cluster
            .leader(partition)
            .ok_or_else(|| unknown(format!("__consumer_offsets-{partition} has no leader now")))?;
        // A leader known here whose node is down (no node-to-node connection from it): its
        // replicas elect another within an election timeout, and a client sent there would
        // chase a dead node (the Java Admin waits out its whole call timeout on one). Kafka
        // stops naming a broker once its controller fenced it.
        if !cluster.is_up(leader) {
            return Err(unknown(format!(
                "node {leader} led __consumer_offsets-{partition} and is down; a new leader is \
                 being elected"
            )));
        }
        let ep = cluster.endpoint(leader, &listener.name).ok_or_else(|| {
            unknown(format!(
                "node {leader} leads __consumer_offsets-{partition} but its {} endpoint is not known yet",
                listener.name
            ))
        })?;
        Ok((leader as i32, ep.host, ep.port))
    };
    let answer = |key: &StrBytes| -> (i16, Option<String>, i32, String, i32) {
        let (err, msg) = answer(key);
        if err != 0 {
            return (err, msg, -1, String::new(), -1);
        }
        match locate(key) {
            Ok((node, host, port)) => (0, None, node, host, port),
            Err((err, msg)) => (err, Some(msg), -1, String::new(), -1),
        }
    };
    let mut resp = FindCoordinatorResponse::default();
    if version < 4 {
        let (err, msg, node, host, port) = answer(&req.key);
        resp.error_code = err;
        if err == 0 {
            resp.node_id = BrokerId(node);
            resp.host = s(host);
            resp.port = port;
        } else {
            resp.node_id = BrokerId(-1);
            resp.host = s("");
            resp.port = -1;
            resp.error_message = msg.map(s);
        }
        return resp;
    }
    resp.coordinators = req
        .coordinator_keys
        .iter()
        .map(|key| {
            let (err, msg, node, host, port) = answer(key);
            let c = Coordinator::default()
                .with_key(key.clone())
                .with_error_code(err);
            if err == 0 {
                c.with_node_id(BrokerId(node))
                    .with_host(s(host))
                    .with_port(port)
            } else {
                c.with_node_id(BrokerId(-1))
                    .with_host(s(""))
                    .with_port(-1)
                    .with_error_message(msg.map(s))
            }
        })
        .collect();
    resp
}
