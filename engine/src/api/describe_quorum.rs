//! DescribeQuorum: the cluster's metadata log as a KRaft quorum (`kafka-metadata-quorum
//! describe --status / --replication`): its leader and term, its high watermark, its voters
//! with their log end offsets, and (v2) each voter's directory id and node-to-node address.
//!
//! A Kafka broker forwards this to the active controller, so the answer is always the leader's.
//! Here the metadata log's leader sends its view of the group to the other members every Raft
//! tick (`runtime::peers::QUORUM_VIEW`), and any node answers from the leader's view as it last
//! received it (`Cluster::quorum_as_leader_sees_it`): at most a tick (100 ms) and a network hop
//! old. A node that has heard no leader for a second (cut off, or during an election) answers
//! from its own replica of the log instead: the high watermark is its own commit index, the
//! leader's log end offset is given as that high watermark (a lower bound), and the other
//! followers' log ends and every timestamp as -1 (unknown).
//!
//! Where it differs from Kafka 4.4: the leader reports each member's last fetch as when it last
//! heard from it and its last caught-up time as when it last held every entry the leader had, to
//! the 100 ms Raft tick (Kafka: the last fetch and the last time the fetch reached the leader's
//! log end). A single node has no metadata log: answered with an error.

use super::auth::{self, Op};
use super::common::{code, s};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

/// Kafka's metadata log topic, the one partition DescribeQuorum describes.
const METADATA_TOPIC: &str = "__cluster_metadata";
/// The listener name the voters' node-to-node addresses are reported under (v2).
const CONTROLLER_LISTENER: &str = "CONTROLLER";

/// DescribeQuorum v0–v2.
pub(super) fn handle(
    broker: &Broker,
    caller: &Caller,
    req: DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    // Kafka: DESCRIBE on the cluster (`KafkaApis.handleDescribeQuorumRequest`).
    if !auth::cluster(broker, caller, Op::Describe) {
        return DescribeQuorumResponse::default()
            .with_error_code(code(ResponseError::ClusterAuthorizationFailed));
    }
    let Some(cluster) = &broker.cluster else {
        // The message and the directory ids below are v2 fields: setting one on an older
        // version's response would fail its encoding (and close the connection).
        return DescribeQuorumResponse::default()
            .with_error_code(code(ResponseError::InvalidRequest))
            .with_error_message((version >= 2).then(|| {
                s(
                    "this node is not one of a cluster (controller.quorum.voters names it alone): \
                 it has no metadata quorum",
                )
            }));
    };
    // The leader's view, on the leader or as it last sent it here (within a second); else, on
    // a node that has heard nothing from a leader lately, this node's own.
    let q = cluster.quorum_as_leader_sees_it();
    // From the leader's view: what it knows each voter's log matches. From a follower's own:
    // its own log end, the high watermark for the leader (a lower bound of its log end, which
    // only the leader knows; Kafka's tool computes every lag from the leader's), and -1
    // (unknown) for the rest.
    let leo = |id: u64| -> i64 {
        if let Some((_, m)) = q.matched.iter().find(|(n, _)| *n == id) {
            *m as i64
        } else if id == cluster.node_id {
            q.last as i64
        } else if q.matched.is_empty() && q.leader == Some(id) {
            q.commit as i64
        } else {
            -1
        }
    };
    // On the leader: when each member was last heard from (Kafka's last fetch) and last held
    // everything the leader had (its last caught-up time); the leader itself, now. -1 elsewhere.
    let now = crate::clock::wall_clock_ms();
    let times = |id: u64| -> (i64, i64) {
        if q.matched.is_empty() {
            (-1, -1)
        } else if Some(id) == q.leader {
            (now, now)
        } else {
            q.activity
                .iter()
                .find(|(n, _, _)| *n == id)
                .map_or((-1, -1), |(_, f, c)| (*f, *c))
        }
    };
    let state = |id: u64| {
        let (fetch, caught_up) = times(id);
        ReplicaState::default()
            .with_replica_id(BrokerId(id as i32))
            .with_replica_directory_id(if version >= 2 {
                cluster.directory_id(id)
            } else {
                Default::default()
            })
            .with_log_end_offset(leo(id))
            .with_last_fetch_timestamp(fetch)
            .with_last_caught_up_timestamp(caught_up)
    };
    // Kafka answers a request for another partition with UNKNOWN_TOPIC_OR_PARTITION on it
    // (`KafkaRaftClient.handleDescribeQuorumRequest`).
    let mut resp = DescribeQuorumResponse::default();
    for t in req.topics {
        let mut topic = TopicData::default().with_topic_name(t.topic_name.clone());
        for p in t.partitions {
            let part = if t.topic_name.as_str() == METADATA_TOPIC && p.partition_index == 0 {
                PartitionData::default()
                    .with_leader_id(BrokerId(q.leader.map_or(-1, |l| l as i32)))
                    .with_leader_epoch(i32::try_from(q.term).unwrap_or(i32::MAX))
                    .with_high_watermark(q.commit as i64)
                    .with_current_voters(q.voters.iter().map(|v| state(*v)).collect())
                    .with_observers(q.learners.iter().map(|v| state(*v)).collect())
            } else {
                PartitionData::default()
                    .with_error_code(code(ResponseError::UnknownTopicOrPartition))
                    .with_leader_id(BrokerId(-1))
                    .with_leader_epoch(-1)
                    .with_high_watermark(-1)
            };
            topic
                .partitions
                .push(part.with_partition_index(p.partition_index));
        }
        resp.topics.push(topic);
    }
    if version >= 2 {
        resp.nodes = q
            .voters
            .iter()
            // Voters only, as Kafka lists them (`LeaderState.describeQuorum`), from the
            // address book (the first voters and the nodes joined since).
            .filter_map(|id| {
                let addr = cluster.address(*id)?;
                let (host, port) = addr.rsplit_once(':')?;
                let host = host.trim_start_matches('[').trim_end_matches(']');
                Some(
                    Node::default()
                        .with_node_id(BrokerId(*id as i32))
                        .with_listeners(vec![Listener::default()
                            .with_name(s(CONTROLLER_LISTENER))
                            .with_host(s(host))
                            .with_port(port.parse().ok()?)]),
                )
            })
            .collect();
    }
    resp
}
