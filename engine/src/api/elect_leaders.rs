//! ElectLeaders: preferred leader election (`kafka-leader-election --election-type preferred`,
//! `Admin.electLeaders`). Each named partition (or, with a null list, every partition of every
//! topic) is checked as Kafka's controller checks it (`ReplicationControlManager.electLeader` in
//! `metadata/src/main/java/org/apache/kafka/controller/`): an unknown one is
//! UNKNOWN_TOPIC_OR_PARTITION, one its preferred replica leads already ELECTION_NOT_NEEDED
//! (left out of the answer to a null list, as Kafka leaves it out), one whose preferred replica
//! is not in sync and up PREFERRED_LEADER_NOT_AVAILABLE. The rest go to the metadata log as one
//! `Command::ElectLeaders`, which carries the request to every node: the current leader of each
//! partition, wherever it is, hands it over (`Replica::hand_to_preferred`) within milliseconds
//! of applying it. The answer waits until this node sees each preferred replica lead.
//!
//! The preferred replica is the first of the partition's replicas, as in Kafka: where the
//! metadata log placed a topic's partition, and for `__consumer_offsets` where it placed it
//! (or `metadata::first_offsets_leader` before any membership change).
//!
//! Where it differs from Kafka 4.4:
//! - Kafka answers once the controller committed the new leader; brokers follow. Here Raft
//!   elects leaders, so the answer waits for the handover itself, up to the request's timeout
//!   (at most [`MAX_WAIT_MS`], below the Admin's request timeout); a partition whose preferred
//!   replica did not take over by then is answered REQUEST_TIMED_OUT, which says it honestly.
//! - Unclean election (type 1) never elects a replica that may lack committed records: Raft's
//!   leaders hold every committed entry, so a partition without a leader waits for a majority of
//!   its replicas, and the answer is ELIGIBLE_LEADERS_NOT_AVAILABLE; one with a leader is
//!   ELECTION_NOT_NEEDED, as in Kafka.
//! - A single node leads every partition it has, each one's only replica: every named partition
//!   is ELECTION_NOT_NEEDED.

use super::auth::{self, Op};
use super::common::{code, s};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use crate::topics::Topic;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::sync::Arc;

/// The longest the answer waits for the handovers: below the Java Admin's default request
/// timeout (30 s), so the client hears the outcome rather than timing out itself.
pub const MAX_WAIT_MS: i32 = 15_000;
/// The shortest time every node keeps asking a partition's leader to hand it over: a few Raft
/// ticks, for a request sent with a tiny timeout.
const MIN_WAIT_MS: i32 = 1_000;
/// The most partitions one request elects, Kafka's bound on the records one admin operation
/// writes (`QuorumController.MAX_RECORDS_PER_USER_OP`): the election is one metadata log entry.
/// Partitions past it are answered with INVALID_REQUEST and can be asked for again.
pub const MAX_ELECTIONS: usize = 10_000;
/// How often the answer looks at who leads.
const POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// ElectLeaders v0–v2.
pub(super) async fn handle(
    broker: &Broker,
    caller: &Caller,
    req: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    // Kafka: ALTER on the cluster (`ControllerApis.handleElectLeaders`, and the broker's
    // `KafkaApis` before forwarding), every named partition then carrying the error.
    if !auth::cluster(broker, caller, Op::Alter) {
        return refused(
            &req,
            version,
            ResponseError::ClusterAuthorizationFailed,
            None,
        );
    }
    let unclean = match req.election_type {
        0 => false,
        1 => true,
        other => {
            let why = format!("Unknown election type {other}");
            return refused(&req, version, ResponseError::InvalidRequest, Some(why));
        }
    };
    let snapshot = broker.topics.snapshot();
    // (result index, topic, partition, preferred replica) of each election to carry out.
    let mut wanted: Vec<(usize, usize, Arc<Topic>, i32, i32)> = Vec::new();
    let mut results: Vec<ReplicaElectionResult> = Vec::new();
    let all = req.topic_partitions.is_none();
    let asked: Vec<(String, Vec<i32>)> = match &req.topic_partitions {
        Some(list) => list
            .iter()
            .map(|t| (t.topic.to_string(), t.partitions.clone()))
            .collect(),
        None => snapshot
            .iter()
            .map(|t| (t.name.clone(), (0..t.partitions).collect()))
            .collect(),
    };
    for (name, partitions) in asked {
        let mut out = Vec::new();
        let topic = snapshot.get(&name).cloned();
        for p in partitions {
            let verdict = match &topic {
                None => Err((
                    ResponseError::UnknownTopicOrPartition,
                    Some(format!("No such topic as {name}")),
                )),
                Some(t) if !(0..t.partitions).contains(&p) => Err((
                    ResponseError::UnknownTopicOrPartition,
                    Some(format!("No such partition as {name}-{p}")),
                )),
                Some(t) => check(broker, t, p, unclean),
            };
            match verdict {
                // Kafka leaves out what needs no election when asked for everything.
                Err((ResponseError::ElectionNotNeeded, _)) if all => {}
                // Kafka sends the message only where it wrote one (`ApiError.message()`, null
                // for ELECTION_NOT_NEEDED and PREFERRED_LEADER_NOT_AVAILABLE); clients fall
                // back to the error's own text.
                Err((e, message)) => out.push(
                    PartitionResult::default()
                        .with_partition_id(p)
                        .with_error_code(code(e))
                        .with_error_message(message.map(s)),
                ),
                Ok(_) if wanted.len() >= MAX_ELECTIONS => out.push(
                    PartitionResult::default()
                        .with_partition_id(p)
                        .with_error_code(code(ResponseError::InvalidRequest))
                        .with_error_message(Some(s(format!(
                            "at most {MAX_ELECTIONS} partitions are elected per request; ask \
                             again for this one"
                        )))),
                ),
                Ok(preferred) => {
                    let t = topic.clone().expect("checked above");
                    wanted.push((results.len(), out.len(), t, p, preferred));
                    out.push(PartitionResult::default().with_partition_id(p));
                }
            }
        }
        results.push(
            ReplicaElectionResult::default()
                .with_topic(TopicName(s(name)))
                .with_partition_result(out),
        );
    }
    if !wanted.is_empty() {
        let wait = req.timeout_ms.clamp(MIN_WAIT_MS, MAX_WAIT_MS);
        let outcome = elect(broker, &wanted, wait).await;
        for ((r, i, t, p, preferred), done) in wanted.iter().zip(outcome) {
            let slot = &mut results[*r].partition_result[*i];
            match done {
                Ok(true) => {}
                Ok(false) => {
                    slot.error_code = code(ResponseError::RequestTimedOut);
                    slot.error_message = Some(s(format!(
                        "node {preferred}, the preferred replica of {}-{p}, did not take over \
                         within {wait} ms (it must be in sync with the leader)",
                        t.name
                    )));
                }
                Err(why) => {
                    slot.error_code = code(ResponseError::RequestTimedOut);
                    slot.error_message = Some(s(why.clone()));
                }
            }
        }
    }
    let mut resp = ElectLeadersResponse::default().with_replica_election_results(results);
    if version >= 1 {
        resp.error_code = 0;
    }
    resp
}

/// Whether `partition` of `topic` needs and can have the election asked for: its preferred
/// replica when a preferred election is to be carried out, else the error it is answered with.
fn check(
    broker: &Broker,
    topic: &Topic,
    partition: i32,
    unclean: bool,
) -> Result<i32, (ResponseError, Option<String>)> {
    let view = broker.partition_view(topic, partition);
    if unclean {
        return Err(if view.leader >= 0 {
            (ResponseError::ElectionNotNeeded, None)
        } else {
            (
                ResponseError::EligibleLeadersNotAvailable,
                Some(format!(
                    "{}-{partition} has no leader: Raft elects one once a majority of its \
                     replicas is up, and never a replica that may lack committed records \
                     (unclean election is not offered)",
                    topic.name
                )),
            )
        });
    }
    let preferred = match &broker.cluster {
        None => Some(broker.node_id as u64),
        Some(_) if topic.internal => broker.topics.preferred_offsets_leader(partition),
        Some(_) => broker.topics.placed(topic, partition),
    };
    let Some(preferred) = preferred.and_then(|p| i32::try_from(p).ok()) else {
        return Err((ResponseError::PreferredLeaderNotAvailable, None));
    };
    if view.leader == preferred {
        return Err((ResponseError::ElectionNotNeeded, None));
    }
    let up = broker
        .cluster
        .as_ref()
        .is_some_and(|c| c.is_up(preferred as u64));
    if !up || !view.isr.contains(&preferred) {
        return Err((ResponseError::PreferredLeaderNotAvailable, None));
    }
    Ok(preferred)
}

/// Carry out the elections `wanted` names through the metadata log and wait up to `wait_ms`
/// for each preferred replica to lead, as this node sees it: per election, whether it did, or
/// why the request could not be carried to the others.
async fn elect(
    broker: &Broker,
    wanted: &[(usize, usize, Arc<Topic>, i32, i32)],
    wait_ms: i32,
) -> Vec<Result<bool, String>> {
    let mut by_topic: Vec<(String, Vec<i32>)> = Vec::new();
    for (_, _, t, p, _) in wanted {
        match by_topic.iter_mut().find(|(n, _)| *n == t.name) {
            Some((_, ps)) => ps.push(*p),
            None => by_topic.push((t.name.clone(), vec![*p])),
        }
    }
    // Only a node of a cluster has an election to carry out (see `check`).
    if !broker.topics.is_replicated() {
        let why = "this node has no metadata log".to_string();
        return wanted.iter().map(|_| Err(why.clone())).collect();
    }
    let start = std::time::Instant::now();
    if let Err(e) = broker
        .topics
        .elect_leaders(by_topic, wait_ms.unsigned_abs())
        .await
    {
        let why = format!("the election could not be carried to the other nodes: {e}");
        return wanted.iter().map(|_| Err(why.clone())).collect();
    }
    let deadline = start + std::time::Duration::from_millis(wait_ms.unsigned_abs().into());
    let leads = |(_, _, t, p, preferred): &(usize, usize, Arc<Topic>, i32, i32)| {
        broker.partition_view(t, *p).leader == *preferred
    };
    // Once a preferred replica leads it stays counted: a later move does not undo the election.
    let mut done = vec![false; wanted.len()];
    loop {
        for (d, w) in done.iter_mut().zip(wanted) {
            *d = *d || leads(w);
        }
        if done.iter().all(|d| *d) || std::time::Instant::now() >= deadline {
            return done.into_iter().map(Ok).collect();
        }
        glommio::timer::sleep(POLL).await;
    }
}

/// The answer to a request refused as a whole: every named partition with `error` (v1+ also
/// at the top), none for a null list (`KafkaApis`' `electLeadersErrorResponse` shape).
fn refused(
    req: &ElectLeadersRequest,
    version: i16,
    error: ResponseError,
    message: Option<String>,
) -> ElectLeadersResponse {
    let results = req
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            ReplicaElectionResult::default()
                .with_topic(t.topic.clone())
                .with_partition_result(
                    t.partitions
                        .iter()
                        .map(|p| {
                            PartitionResult::default()
                                .with_partition_id(*p)
                                .with_error_code(code(error))
                                .with_error_message(message.clone().map(s))
                        })
                        .collect(),
                )
        })
        .collect();
    let mut resp = ElectLeadersResponse::default().with_replica_election_results(results);
    if version >= 1 {
        resp.error_code = code(error);
    }
    resp
}
