//! What every shard shares: the configuration, the topic registry, the cluster identity, the
//! producer id block, connection accounting, the metrics hub and the SCRAM credentials. Plain state; the API layer
//! (`api/`) answers requests with it.

use crate::config::Config;
use crate::topics::TopicRegistry;
use wire::Versions;

/// Everything the handlers share across shards. Immutable except for the topic registry and the
/// feature levels.
#[derive(Debug)]
pub struct Broker {
    pub config: Config,
    pub versions: Versions,
    pub topics: TopicRegistry,
    /// Per-group config overrides (GROUP config resources).
    pub group_configs: crate::group_configs::GroupConfigRegistry,
    pub cluster_id: String,
    pub node_id: i32,
    /// This data directory's incarnation (`meta::Meta::incarnation`): a node of a cluster says
    /// it in its node-to-node hello, and its peers refuse another under the same node id.
    pub incarnation: uuid::Uuid,
    /// What clients are told to connect to (advertised.listeners, else the listen address).
    /// The first listener's advertised endpoint (handlers answer with the endpoint of the
    /// listener a request arrived on: `Caller::listener`).
    pub host: String,
    pub port: i32,
    /// The listeners served, in configured order (every shard accepts on each).
    pub listeners: Vec<std::sync::Arc<crate::listeners::Listener>>,
    /// Where `__consumer_offsets-<p>` logs live; None keeps group state in memory only (tests).
    pub data_dir: Option<std::path::PathBuf>,
    /// Where shards publish their measurements (read by `--metrics-listen`).
    pub metrics: std::sync::Arc<crate::metrics::MetricsHub>,
    /// Idempotent producer ids (InitProducerId).
    pub producer_ids: crate::producer_ids::ProducerIds,
    /// Finalized feature levels (`transaction.version`), changed by UpdateFeatures.
    pub features: crate::features::Features,
    /// `max.connections` / `max.connections.per.ip` accounting across shards.
    pub connections: std::sync::Arc<crate::limits::ConnectionLimits>,
    /// SCRAM credentials (AlterUserScramCredentials writes, SCRAM authentications read).
    pub scram: crate::scram_store::ScramStore,
    /// The ACLs, when `authorizer.class.name` names the standard authorizer; None authorizes
    /// everything (Kafka without an authorizer).
    pub acls: Option<std::sync::Arc<crate::acls::AclStore>>,
    /// The cluster this node is one voter of (`controller.quorum.voters` naming other nodes);
    /// None for a single node, which replicates nothing.
    pub cluster: Option<std::sync::Arc<crate::cluster::Cluster>>,
}

/// What Metadata says of one topic partition: its leader (−1 when none can serve it now), its
/// replicas and in-sync replicas, and the partition's error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub error: i16,
}

impl Broker {
    /// Whether this node serves the data of `partition` of `topic` (Produce, Fetch, ListOffsets,
    /// DeleteRecords, DescribeProducers). A single node serves everything; a node of a cluster
    /// serves the partitions the metadata log placed on it (one of replication factor 1 moving
    /// to another node: its source until it hands over, its target once that has every record,
    /// `TopicRegistry::serving`), and answers the rest
    /// NOT_LEADER_OR_FOLLOWER so the client refreshes its metadata and goes to the leader, as
    /// Kafka's `ReplicaManager.getPartitionOrException` does. `__consumer_offsets` is read where
    /// it is asked (every node holds a replica of each of its partitions).
    ///
    /// A topic replicated over the nodes (replication factor above 1) is served by the shard
    /// that holds this node's replica, which answers NOT_LEADER_OR_FOLLOWER itself unless its
    /// replica is the partition's leader (`data::replica`).
    pub fn serves(&self, topic: &crate::topics::Topic, partition: i32) -> bool {
        topic.internal
            || !self.topics.is_replicated()
            || self.topics.serving(topic, partition) == Some(self.node_id as u64)
            || (topic.replication_factor > 1
                && self
                    .topics
                    .replicas(topic, partition)
                    .is_some_and(|r| r.contains(&(self.node_id as u64))))
    }

    /// `partition` of `topic` as Metadata reports it. A topic of replication factor 1 has one
    /// replica per partition, the node the metadata log placed it on; while that node is down
    /// its partitions have no leader (LEADER_NOT_AVAILABLE, leader −1, empty ISR, as Kafka
    /// reports a partition whose only replica is fenced). A topic with a replica on every voter
    /// ([`crate::topics::TopicRegistry::replicas`]), like `__consumer_offsets`, is led by each
    /// partition's Raft leader as this node's replica knows it (`Cluster::topic_leader`).
    pub fn partition_view(&self, topic: &crate::topics::Topic, partition: i32) -> PartitionView {
        const LEADER_NOT_AVAILABLE: i16 = 5;
        let me = self.node_id;
        let Some(cluster) = &self.cluster else {
            return PartitionView {
                leader: me,
                replicas: vec![me],
                isr: vec![me],
                error: 0,
            };
        };
        // While a node joins or leaves, a group's replicas are its configuration as the replica
        // here applied it (a leaving node stays listed until its group let it go, a joining one
        // is listed at once), and a joining node is in the ISR once it caught up (no longer a
        // learner), as Kafka lists a reassignment's adding and removing replicas.
        let group = if topic.internal {
            uuid::Uuid::nil()
        } else {
            topic.id
        };
        let ids = |v: Vec<u64>| -> Vec<i32> { v.into_iter().map(|n| n as i32).collect() };
        if topic.internal {
            let (mut all, learners) = cluster.replicas_of(group, partition, &cluster.members());
            // The preferred replica first, the others after it in voter order, wrapping, as
            // Kafka lists a partition's replicas (the first is the preferred one, which
            // `kafka-topics --describe` and `kafka-leader-election` go by).
            if let Some(at) = self
                .topics
                .preferred_offsets_leader(partition)
                .and_then(|pref| all.iter().position(|n| *n == pref))
            {
                all.rotate_left(at);
            }
            let isr = all
                .iter()
                .copied()
                .filter(|n| !learners.contains(n))
                .collect();
            return match cluster.leader(partition) {
                Some(l) => PartitionView {
                    leader: l as i32,
                    replicas: ids(all),
                    isr: ids(isr),
                    error: 0,
                },
                None => PartitionView {
                    leader: -1,
                    replicas: ids(all),
                    isr: Vec::new(),
                    error: LEADER_NOT_AVAILABLE,
                },
            };
        }
        if topic.replication_factor > 1 {
            let placed = self.topics.replicas(topic, partition).unwrap_or_default();
            let (replicas, learners) = cluster.replicas_of(group, partition, &placed);
            // A leader known here but cut off from this node may have been replaced already
            // (this node would not hear of it): reported as none, as for a placed partition,
            // until a new one is known. The ISR is what is up (Raft's commit needs a majority
            // of it, not all; a node that is back is caught up by its leader) and not a
            // learner: Kafka's ISR is the replicas the leader has seen caught up, which we do
            // not track per partition.
            // A node without a replica (a topic with fewer replicas than nodes) knows the
            // leader from the leader's own word, repeated every second (`Cluster::topic_hint`).
            let known = if replicas.contains(&(me as u64)) {
                cluster.topic_leader(topic.id, partition)
            } else {
                cluster.topic_hint(topic.id, partition)
            };
            return match known.filter(|l| cluster.is_up(*l) && replicas.contains(l)) {
                Some(l) => PartitionView {
                    leader: l as i32,
                    isr: ids(replicas
                        .iter()
                        .copied()
                        .filter(|r| cluster.is_up(*r) && !learners.contains(r))
                        .collect()),
                    replicas: ids(replicas),
                    error: 0,
                },
                None => PartitionView {
                    leader: -1,
                    replicas: ids(replicas),
                    isr: Vec::new(),
                    error: LEADER_NOT_AVAILABLE,
                },
            };
        }
        // A partition moving to another node lists its target first, then its source, as Kafka
        // lists a reassignment's replicas (`PartitionReassignmentReplicas`: target, then the
        // ones leaving); the source leads, the only one in sync, until it hands over; then no
        // node does until the target has copied the rest (`TopicRegistry::moving`).
        if let Some(m) = self.topics.moving(topic, partition) {
            let replicas = vec![m.to as i32, m.from as i32];
            return if !m.handing_over && cluster.is_up(m.from) {
                PartitionView {
                    leader: m.from as i32,
                    replicas,
                    isr: vec![m.from as i32],
                    error: 0,
                }
            } else {
                PartitionView {
                    leader: -1,
                    replicas,
                    isr: Vec::new(),
                    error: LEADER_NOT_AVAILABLE,
                }
            };
        }
        match self.topics.placed(topic, partition) {
            Some(n) if cluster.is_up(n) => PartitionView {
                leader: n as i32,
                replicas: vec![n as i32],
                isr: vec![n as i32],
                error: 0,
            },
            // As the reference broker answers once it has fenced the only replica (Kafka 4.4, 3
            // KRaft nodes, replication factor 1, one node SIGKILLed: leader -1, replicas [it],
            // ISR [], LEADER_NOT_AVAILABLE, about 9 s after the kill, broker.session.timeout.ms).
            Some(n) => PartitionView {
                leader: -1,
                replicas: vec![n as i32],
                isr: Vec::new(),
                error: LEADER_NOT_AVAILABLE,
            },
            None => PartitionView {
                leader: -1,
                replicas: Vec::new(),
                isr: Vec::new(),
                error: LEADER_NOT_AVAILABLE,
            },
        }
    }
}
