//! The cluster's metadata log as a state machine: the topics every node of a cluster must agree
//! on (names, ids, partition counts, configs) and which node leads each topic partition. It is
//! the first piece of the replicated topic registry (docs/replication.md, "Not built yet", item
//! 1): one more Raft group whose entries are [`Proposal`]s; every node applies the committed ones
//! in log order with [`MetadataState::apply`] and so holds the same registry, with the same
//! topic ids. The broker drives it from `engine::runtime::metadata_log`.
//!
//! KRaft's metadata log in spirit. Kafka's controller validates a CreateTopics request and
//! places its replicas before it writes the records
//! (`metadata/src/main/java/org/apache/kafka/controller/ReplicationControlManager.java`); here
//! the proposer chooses what needs randomness (the topic id, the node that leads partition 0)
//! and puts it in the command, and every node validates at apply time. So two nodes racing to
//! create one name agree which one won without asking a controller: the first in the log.
//!
//! Owns: the command encoding, validation at apply time, partition placement. Must not: touch a
//! disk, a socket or a clock; draw random numbers (applying must give every node the same
//! result); decide what is committed (Raft does).

use crate::NodeId;
use coordinator::topics::{validate_name, Topic, TopicsSnapshot, CONSUMER_OFFSETS};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// The encoding's version, the first byte of an entry: a node that reads a version it does not
/// know refuses the entry rather than guess (every node refuses it alike).
const VERSION: u8 = 1;
/// The first byte of a snapshot of the state ([`MetadataState::encode_snapshot`]).
const SNAPSHOT_VERSION: u8 = 1;
/// The largest proposal: bounds an entry of the metadata log (a topic's configs are the only
/// part a client sizes).
pub const MAX_PROPOSAL_BYTES: usize = 1 << 20;
/// Proposals remembered per proposing node to recognise a duplicate: a follower's proposal
/// travels to the leader in a message, and a message can arrive twice.
pub const DEDUP_WINDOW: usize = 1024;
/// The most partitions one topic may have, as the broker bounds one CreateTopics or
/// CreatePartitions request (`engine::api::create_partitions::MAX_PARTITIONS_PER_REQUEST`).
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 10_000;
/// Node ids a joining node may have are below this: the number of producer id lanes
/// (`engine::producer_ids::MAX_NODES`, which must be the same).
pub const MAX_NODES: NodeId = 1024;

/// A node may join a cluster that started with `first_voters` nodes under id `id`: its producer
/// id lane is its id, so the id lies past the first voters' lanes (their positions) and below
/// [`MAX_NODES`]. The joining node's config and the metadata log both apply it.
pub fn may_join(id: NodeId, first_voters: usize) -> bool {
    (first_voters as NodeId..MAX_NODES).contains(&id)
}

/// One change to the cluster's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Command {
    /// A new topic. `first_leader` is an index into the voters: partition *p* is led by voter
    /// `(first_leader + p) % n` (Kafka starts its round-robin placement at a random broker too,
    /// `StripedReplicaPlacer`). `replication_factor` is 1 (the partition lives on that voter
    /// alone), the number of voters (every voter holds a replica, Raft replicates it, and a
    /// node that joins gets one too), or in between: partition *p*'s replicas are then that
    /// many voters from its leader on, in voter order (`PlacedTopic::replicas`), fixed as Kafka
    /// fixes a partition's replica assignment. An entry written before the field existed reads
    /// as 1, what every topic had then.
    CreateTopic {
        name: String,
        id: Uuid,
        partitions: i32,
        configs: BTreeMap<String, String>,
        first_leader: u32,
        #[serde(default = "coordinator::topics::one_replica")]
        replication_factor: i16,
        /// Kafka's manual assignment (`kafka-topics --replica-assignment`, CreateTopics'
        /// `assignments`): each partition's replicas, its preferred leader first, all of one size
        /// (`replication_factor`, `partitions` of them). Replicated partitions then have sets of
        /// their own whatever their size (`PlacedTopic::replicas`); factor-1 ones are placed on
        /// their one node. `first_leader` is unused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        assignment: Option<Vec<Vec<NodeId>>>,
    },
    DeleteTopic {
        name: String,
    },
    /// Grow topics to new partition counts, all or none (Kafka applies one CreatePartitions
    /// request's topics independently; the broker sends one command per topic for that).
    CreatePartitions {
        changes: Vec<(String, i32)>,
        /// Manual assignments of the new partitions (CreatePartitions' `assignments`), by topic
        /// name: as many as it adds, each the topic's number of replicas.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        assignments: BTreeMap<String, Vec<Vec<NodeId>>>,
    },
    /// Replace a topic's config overrides.
    SetConfigs {
        name: String,
        configs: BTreeMap<String, String>,
    },
    /// Take a node out of the cluster (RemoveRaftVoter): it leaves the voters, every topic
    /// replicated on every voter keeps a replica on each remaining one (its replication factor
    /// drops by one), and the partitions it was placed on as preferred leader move to the next
    /// remaining voter. Each Raft group's leader then removes it from the group
    /// (`Replica::follow_members`); this entry only says where the cluster is going.
    RemoveVoter {
        id: NodeId,
    },
    /// Add a node to the cluster (AddRaftVoter): it joins the voters, after the others in
    /// placement order, with `addr` its node-to-node address (every node's address book learns
    /// it from here); every topic replicated on every voter gains a replica on it (its
    /// replication factor grows by one). Each Raft group's leader then adds it to the group,
    /// as a learner until it caught up (`Replica::follow_members`). Partitions already placed
    /// stay where they are; new topics and partitions are placed over it too.
    AddVoter {
        id: NodeId,
        addr: String,
    },
    /// Preferred leader election (ElectLeaders): every node hands the listed partitions it
    /// leads to their preferred replicas, asking again every few milliseconds for `within_ms` after
    /// it applied this, until the preferred replica leads (`Replica::hand_to_preferred` hands
    /// over only to a voter that holds every entry). Nothing in the state changes: in Kafka the
    /// controller writes the new leader (`ReplicationControlManager.electLeaders`); here Raft
    /// elects leaders, so the log carries the request to every node, which is how it reaches
    /// the partitions' current leaders wherever they are.
    ElectLeaders {
        partitions: Vec<(String, Vec<i32>)>,
        within_ms: u32,
    },
    /// AlterPartitionReassignments of one partition with a replica set of its own
    /// (`PlacedTopic::replicas`): its set becomes `replicas` (as many as it has; the first is its
    /// preferred leader), or, with None, a reassignment under way is cancelled (the set goes
    /// back to what it was before it). The partition's Raft leader then moves its group there
    /// (`Replica::follow_members`: new replicas join as learners and become voters once caught
    /// up, then the others leave), and says so with [`Command::Reassigned`]. Kafka's controller
    /// writes the target replicas to the partition's record
    /// (`ReplicationControlManager.alterPartitionReassignment`); so does this.
    Reassign {
        name: String,
        partition: i32,
        replicas: Option<Vec<NodeId>>,
    },
    /// A partition of replication factor 1 moving to node `to`, whose copy of the source's
    /// records caught up: the source stops taking writes (`PlacedTopic::handing_over`), so the
    /// target can copy the rest and take over. Changes nothing unless the partition is still
    /// moving to `to`.
    HandOver {
        name: String,
        partition: i32,
        to: NodeId,
    },
    /// The Raft group of a partition under reassignment is its set `replicas` now (its leader saw
    /// it settle there): the reassignment is over (ListPartitionReassignments stops listing it).
    /// For a partition of replication factor 1, `replicas` is its target, which holds every
    /// record the source held when it stopped taking writes (`Command::HandOver`) and serves it
    /// from now on. Changes nothing if the set is another by now.
    Reassigned {
        name: String,
        partition: i32,
        replicas: Vec<NodeId>,
    },
    /// Node `node` runs on the data directory of incarnation `id` (its `meta.properties`):
    /// proposed by that node itself once its metadata log is current, and recorded once. Every
    /// node then refuses a hello under that node id that names another incarnation (a node
    /// that lost its disk and came back under its old id), the ones that joined after it
    /// included: KIP-853 keeps each voter's directory id in the voter set for this. Refused
    /// when proposed by another node or for a node that is not a voter; a second record of
    /// another id is refused and changes nothing.
    Incarnation {
        node: NodeId,
        id: Uuid,
    },
}

/// A command and who asked: `origin` is the proposing node and `seq` its own counter, so the
/// proposer recognises its command when the entry applies (on any node, with any index) and
/// answers its client with the result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    pub origin: NodeId,
    pub seq: u64,
    pub command: Command,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("empty metadata entry")]
    Empty,
    #[error("metadata entry or snapshot of version {0}, this node reads version {VERSION}")]
    Version(u8),
    #[error("metadata entry of {0} bytes, more than {MAX_PROPOSAL_BYTES}")]
    TooLarge(usize),
    #[error("metadata entry does not parse: {0}")]
    Malformed(String),
}

impl Proposal {
    /// The entry's bytes: [`VERSION`], then the proposal as JSON (the same encoding as the
    /// broker's `topics.json`, readable with any tool).
    pub fn encode(&self) -> Result<Vec<u8>, DecodeError> {
        let mut b = vec![VERSION];
        serde_json::to_writer(&mut b, self).expect("a proposal always serialises");
        if b.len() > MAX_PROPOSAL_BYTES {
            return Err(DecodeError::TooLarge(b.len()));
        }
        Ok(b)
    }

    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let (&version, json) = b.split_first().ok_or(DecodeError::Empty)?;
        if version != VERSION {
            return Err(DecodeError::Version(version));
        }
        if b.len() > MAX_PROPOSAL_BYTES {
            return Err(DecodeError::TooLarge(b.len()));
        }
        serde_json::from_slice(json).map_err(|e| DecodeError::Malformed(e.to_string()))
    }
}

/// Why a command changed nothing, in Kafka's words where the broker's registry has them
/// (`engine::topics::RegistryError`); the broker maps each to the request's error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    #[error("Topic '{0}' already exists.")]
    AlreadyExists(String),
    #[error("{0}")]
    InvalidName(String),
    #[error("Topic '{0}' collides with existing topic: {1}")]
    Collides(String, String),
    #[error("This server does not host this topic: {0}")]
    Unknown(String),
    #[error("Cannot delete internal topic {0}")]
    Internal(String),
    #[error("The topic {name} currently has {current} partition(s); {requested} would not be an increase.")]
    NotAnIncrease {
        name: String,
        current: i32,
        requested: i32,
    },
    #[error("Number of partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}, not {0}.")]
    InvalidPartitions(i32),
    #[error("Topic id {0} is already in use.")]
    IdInUse(Uuid),
    /// Neither 1 nor the number of voters; the message is the client's (see
    /// [`MetadataState::check_replication_factor`]).
    #[error("{0}")]
    InvalidReplicationFactor(String),
    #[error("{0}")]
    Undecodable(DecodeError),
    /// The same proposal applied before (its proposer had its answer then), or one older than
    /// the last [`DEDUP_WINDOW`] of its proposer's.
    #[error("proposal {1} of node {0} was applied already")]
    Duplicate(NodeId, u64),
    /// RemoveVoter of a node that is not (or no longer) a voter: Kafka's VOTER_NOT_FOUND.
    #[error("Node {0} is not a voter of this cluster (voters {1:?}).")]
    NotAVoter(NodeId, Vec<NodeId>),
    /// RemoveVoter that would leave a partition without any replica, or the cluster without
    /// enough voters: the node must stay until that changes.
    #[error("{0}")]
    CannotRemove(String),
    /// AddVoter of a node that is a voter already: Kafka's DUPLICATE_VOTER.
    #[error("The voter id {0} is already part of the set of voters {1:?}.")]
    DuplicateVoter(NodeId, Vec<NodeId>),
    /// AddVoter that cannot be: a node id that was a member before, an id outside the
    /// producer id lanes, a bad address, a cluster at its size bound.
    #[error("{0}")]
    CannotAdd(String),
    /// A reassignment of a partition that does not exist (UNKNOWN_TOPIC_OR_PARTITION).
    #[error("Unknown topic or partition: {0}-{1}.")]
    UnknownPartition(String, i32),
    /// A reassignment to replicas that cannot be (INVALID_REPLICA_ASSIGNMENT; the message says).
    #[error("{0}")]
    InvalidAssignment(String),
    /// A cancellation of a partition not under reassignment (NO_REASSIGNMENT_IN_PROGRESS).
    #[error("No ongoing reassignment for partition {0}-{1}.")]
    NoReassignment(String, i32),
    /// An incarnation record that cannot be: proposed by another node than the one it names, for
    /// a node that is not a voter, or of another id than the one recorded.
    #[error("{0}")]
    Incarnation(String),
}

/// A topic and the node leading each of its partitions (`leaders[p]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedTopic {
    pub topic: Topic,
    pub leaders: Vec<NodeId>,
    /// For a topic replicated on every voter: the voters the Raft groups of its partitions
    /// started with, by the first partition they apply from, where those were not the
    /// cluster's first voters (`controller.quorum.voters`): a topic created, or grown, after a
    /// node was removed. A replica restarts from its partition's first voters plus the
    /// configuration changes in its log, so these must never change once written.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub first_voters: BTreeMap<i32, Vec<NodeId>>,
    /// For a topic whose replication factor was between 1 and the number of voters when it was
    /// created: each partition's replicas (`replicas[p]`, its preferred leader `leaders[p]`
    /// first), Kafka's replica assignment. They stay where they are when a node joins (Kafka
    /// leaves a new broker empty until a reassignment); a removed node's replica moves to
    /// another voter (`MetadataState::remove_voter`). Empty for a topic of factor 1 (its one
    /// replica is `leaders[p]`) and for one replicated on every voter (its replicas follow the
    /// voters). Each of these partitions' Raft groups started with its first replicas, kept in
    /// `first_voters` under its own partition number.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<Vec<NodeId>>,
    /// The partitions under reassignment (`Command::Reassign`), each with its replicas before it
    /// began: what ListPartitionReassignments lists (the new ones adding, the old ones leaving)
    /// until its Raft group settles on its new set (`Command::Reassigned`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reassigning: BTreeMap<i32, Vec<NodeId>>,
    /// Partitions of replication factor 1 moving to another node (in `reassigning`, their
    /// source there, their target in `leaders`) whose target has copied nearly all of the
    /// source's records (`Command::HandOver`): the source takes no more writes and nobody
    /// serves them until the target has copied the rest and says so (`Command::Reassigned`).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub handing_over: BTreeSet<i32>,
}

impl PlacedTopic {
    /// Its partitions have replica sets of their own ([`Self::replicas`]).
    pub fn assigned(&self) -> bool {
        !self.replicas.is_empty()
    }

    /// Its partitions have one replica each, on the node `leaders` names (replication factor 1,
    /// no sets of their own): moving one copies its records (`Command::HandOver`).
    pub fn single_replica(&self) -> bool {
        !self.topic.internal && !self.assigned() && self.topic.replication_factor <= 1
    }

    /// `partition` has one replica and is moving from the node `reassigning` names to the one
    /// `leaders` names.
    pub fn is_moving(&self, partition: i32) -> bool {
        self.single_replica() && self.reassigning.contains_key(&partition)
    }

    /// The node `partition` is moving to, if it has one replica and is moving.
    pub fn moving_to(&self, partition: i32) -> Option<NodeId> {
        if !self.is_moving(partition) {
            return None;
        }
        usize::try_from(partition)
            .ok()
            .and_then(|p| self.leaders.get(p))
            .copied()
    }
}

/// Where the metadata log put things, as a node's broker reads it: every placed topic's
/// partition leaders (`leaders[name][p]`), the first voters of the partitions of topics
/// replicated on every voter, and the cluster's voters now and at its start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    pub leaders: std::collections::HashMap<String, Vec<NodeId>>,
    pub first_voters: std::collections::HashMap<String, BTreeMap<i32, Vec<NodeId>>>,
    /// The nodes of the cluster now ([`MetadataState::voters`]).
    pub voters: Vec<NodeId>,
    /// `controller.quorum.voters`: the first voters of every Raft group not in `first_voters`.
    pub bootstrap: Vec<NodeId>,
    /// The nodes that joined since (AddVoter), in the order they did, with their node-to-node
    /// addresses: the rest of the address book.
    pub joined: Vec<(NodeId, String)>,
    /// The nodes removed so far ([`MetadataState::removed`]).
    pub removed: Vec<NodeId>,
    /// The replicas of each partition of the topics that have replica sets of their own
    /// (`PlacedTopic::replicas`), by name.
    pub replicas: std::collections::HashMap<String, Vec<Vec<NodeId>>>,
    /// The partitions under reassignment, by topic name: partition → its replicas before
    /// (`PlacedTopic::reassigning`).
    pub reassigning: std::collections::HashMap<String, BTreeMap<i32, Vec<NodeId>>>,
    /// The partitions of replication factor 1 whose source stopped taking writes for their
    /// target (`PlacedTopic::handing_over`), by topic name.
    pub handing_over: std::collections::HashMap<String, BTreeSet<i32>>,
}

impl Placement {
    /// The voters the Raft group of `partition` of `topic` started with.
    pub fn first_voters(&self, topic: &str, partition: i32) -> &[NodeId] {
        match self.first_voters.get(topic) {
            Some(ranges) => first_voters_of(ranges, &self.bootstrap, partition),
            None => &self.bootstrap,
        }
    }
}

/// The voter `__consumer_offsets` partition `partition` prefers as leader until a membership
/// change places the topic in the metadata log: voter `partition mod n` of
/// `controller.quorum.voters` (`bootstrap`), so leaders start spread over the nodes. Its
/// replicas campaign by it at their start, the leaders' rebalancing reads it until the topic is
/// placed, and AddVoter and RemoveVoter place the topic from it: one rule in one place.
pub fn first_offsets_leader(bootstrap: &[NodeId], partition: usize) -> NodeId {
    bootstrap[partition % bootstrap.len()]
}

/// `order[at]` if it is a voter, else the first voter after it in `order` (wrapping), else the
/// first voter.
fn next_voter(order: &[NodeId], voters: &[NodeId], at: usize) -> NodeId {
    (0..order.len())
        .map(|i| order[(at + i) % order.len()])
        .find(|n| voters.contains(n))
        .unwrap_or(voters[0])
}

/// Make `new` the preferred leader of its share of `leaders` (`len / voters`, rounded down),
/// taking each partition from the node preferred most often (the highest partition of it), so
/// the fewest partitions move and no node ends with more than it had. Kafka leaves a new
/// broker empty until a reassignment; here every replicated partition already has a replica on
/// it (a topic is replicated on every voter), so only its preferred leadership moves, which
/// the leaders' rebalancing then carries out (`leader.imbalance.check.interval.seconds`).
fn give_share(leaders: &mut [NodeId], new: NodeId, voters: usize) {
    let share = leaders.len() / voters.max(1);
    let mut counts: BTreeMap<NodeId, usize> = BTreeMap::new();
    for l in leaders.iter() {
        *counts.entry(*l).or_default() += 1;
    }
    while counts.get(&new).copied().unwrap_or(0) < share {
        // The most preferred node, the lowest id among equals (every node computes the same).
        let Some((&from, _)) = counts
            .iter()
            .filter(|(n, _)| **n != new)
            .max_by_key(|(n, c)| (**c, std::cmp::Reverse(**n)))
        else {
            return;
        };
        let p = leaders
            .iter()
            .rposition(|l| *l == from)
            .expect("a counted node prefers a partition");
        leaders[p] = new;
        *counts.get_mut(&from).expect("counted") -= 1;
        *counts.entry(new).or_default() += 1;
    }
}

/// The voters `partition`'s Raft group started with: those of the range it falls in
/// (`PlacedTopic::first_voters`, keyed by each range's first partition), else `bootstrap`.
fn first_voters_of<'a>(
    ranges: &'a BTreeMap<i32, Vec<NodeId>>,
    bootstrap: &'a [NodeId],
    partition: i32,
) -> &'a [NodeId] {
    ranges
        .range(..=partition)
        .next_back()
        .map_or(bootstrap, |(_, v)| v)
}

/// The Raft groups a preferred leader election moves (`Command::ElectLeaders`), as the broker
/// keys them: (topic id, partition), the nil id for `__consumer_offsets`. Only partitions that
/// exist when it applies; for how long each node keeps asking their leaders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    pub groups: Vec<(Uuid, i32)>,
    pub within_ms: u32,
}

/// What applying one entry did: whose proposal it was (`None` when it did not decode), its
/// result, and the id of the topic it deleted, if it did: what a node may remove from its disk
/// (a topic it does not list may be one whose creation it has not applied yet, so only the ids
/// of deletions it applied are safe to remove).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub index: u64,
    pub proposal: Option<(NodeId, u64)>,
    pub result: Result<(), MetaError>,
    /// A preferred leader election this entry asks every node for (`Command::ElectLeaders`).
    pub elect: Option<Election>,
    pub deleted: Option<Uuid>,
}

/// The metadata every node of a cluster holds once it has applied the log up to `applied`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataState {
    /// The nodes of the cluster now: `controller.quorum.voters` less every node removed since
    /// (in that order, the order partitions are placed over).
    voters: Vec<NodeId>,
    /// `controller.quorum.voters`, which every node starts from. Absent in a snapshot written
    /// before nodes could be removed, when it was `voters`.
    #[serde(default)]
    bootstrap: Vec<NodeId>,
    /// Every node that joined after the start (AddVoter), in order, with its node-to-node
    /// address; a joined node that was removed since stays (its id is never a member again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    joined: Vec<(NodeId, String)>,
    /// Each node's data directory as it recorded it (`Command::Incarnation`); a removed node's
    /// stays (its id never comes back). Bounded by the nodes the cluster ever had.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    incarnations: BTreeMap<NodeId, Uuid>,
    topics: BTreeMap<String, PlacedTopic>,
    ids: BTreeSet<Uuid>,
    /// Per proposing node, the sequence numbers of its last [`DEDUP_WINDOW`] proposals applied.
    seen: BTreeMap<NodeId, BTreeSet<u64>>,
    applied: u64,
}

impl MetadataState {
    /// The state before the first entry: only `offsets` (the internal `__consumer_offsets`,
    /// whose partitions are Raft groups over every voter, preferring voter `p mod n` of
    /// `voters`: it has no placed leaders until a node joins, see `add_voter`). Every node must
    /// start from the same `voters` and `offsets`.
    pub fn new(voters: &[NodeId], offsets: Topic) -> Self {
        assert!(!voters.is_empty(), "a cluster has voters");
        assert_eq!(offsets.name, CONSUMER_OFFSETS);
        assert!(offsets.internal, "{CONSUMER_OFFSETS} is internal");
        let mut s = Self {
            voters: voters.to_vec(),
            bootstrap: voters.to_vec(),
            joined: Vec::new(),
            incarnations: BTreeMap::new(),
            topics: BTreeMap::new(),
            ids: BTreeSet::new(),
            seen: BTreeMap::new(),
            applied: 0,
        };
        s.ids.insert(offsets.id);
        s.topics.insert(
            offsets.name.clone(),
            PlacedTopic {
                topic: offsets,
                leaders: Vec::new(),
                first_voters: BTreeMap::new(),
                replicas: Vec::new(),
                reassigning: BTreeMap::new(),
                handing_over: BTreeSet::new(),
            },
        );
        s
    }

    /// The index of the last entry applied (0 before the first).
    pub fn applied_index(&self) -> u64 {
        self.applied
    }

    /// The state as the metadata log's snapshot at `index` holds it: [`SNAPSHOT_VERSION`],
    /// then the state as JSON (like an entry, readable with any tool). `index` is the Raft
    /// index the snapshot is taken at, at or past the last entry applied (a leader's empty
    /// entries after it are never handed to [`Self::apply`]).
    pub fn encode_snapshot(&self, index: u64) -> Vec<u8> {
        assert!(
            index >= self.applied,
            "a snapshot at {index}, before entry {} it applied",
            self.applied
        );
        let mut b = vec![SNAPSHOT_VERSION];
        serde_json::to_writer(&mut b, self).expect("a state always serialises");
        b
    }

    /// What [`Self::encode_snapshot`] wrote. Refused: another version, bytes that do not
    /// parse, a state without voters or without `offsets` (every node starts from it, so a
    /// snapshot of another cluster's, or a corrupt one, is told apart here).
    pub fn decode_snapshot(b: &[u8], offsets: &Topic) -> Result<Self, DecodeError> {
        let (&version, json) = b.split_first().ok_or(DecodeError::Empty)?;
        if version != SNAPSHOT_VERSION {
            return Err(DecodeError::Version(version));
        }
        let mut state: Self =
            serde_json::from_slice(json).map_err(|e| DecodeError::Malformed(e.to_string()))?;
        if state.voters.is_empty() {
            return Err(DecodeError::Malformed("a snapshot without voters".into()));
        }
        if state.bootstrap.is_empty() {
            state.bootstrap = state.voters.clone();
        }
        match state.topics.get(&offsets.name).map(|t| &t.topic) {
            Some(t) if t == offsets => {}
            Some(t) => {
                return Err(DecodeError::Malformed(format!(
                    "the snapshot's {} is topic id {} with {} partitions, this node's is {} with \
                     {} (cluster.id and offsets.topic.num.partitions must not change)",
                    offsets.name, t.id, t.partitions, offsets.id, offsets.partitions
                )))
            }
            None => {
                return Err(DecodeError::Malformed(format!(
                    "a snapshot without {}",
                    offsets.name
                )))
            }
        }
        Ok(state)
    }

    /// The ids of the topics deleted so far: what a node that installs a snapshot may remove
    /// from its disk (the deletions inside it never reach [`Self::apply`] there). Ids stay in
    /// `ids` after a deletion (never reused), so these are the ids no topic holds now.
    pub fn deleted_ids(&self) -> Vec<Uuid> {
        let live: BTreeSet<Uuid> = self.topics.values().map(|t| t.topic.id).collect();
        self.ids.difference(&live).copied().collect()
    }

    /// The nodes of the cluster now, in `controller.quorum.voters` order then the order they
    /// joined: the voters every Raft group on every node moves to.
    pub fn voters(&self) -> &[NodeId] {
        &self.voters
    }

    /// The nodes removed from the cluster so far: the first and the joined nodes that are voters
    /// no more (a removed one is never a voter again: a replica id is never a member twice,
    /// `Replica::join`).
    pub fn removed(&self) -> Vec<NodeId> {
        self.bootstrap
            .iter()
            .copied()
            .chain(self.joined.iter().map(|(id, _)| *id))
            .filter(|n| !self.voters.contains(n))
            .collect()
    }

    /// The nodes that joined after the start, with their node-to-node addresses.
    pub fn joined(&self) -> &[(NodeId, String)] {
        &self.joined
    }

    /// Each node's data directory incarnation, as the node recorded it.
    pub fn incarnations(&self) -> &BTreeMap<NodeId, Uuid> {
        &self.incarnations
    }

    pub fn topic(&self, name: &str) -> Option<&PlacedTopic> {
        self.topics.get(name)
    }

    /// The node leading `partition` of `name`, if both exist and the topic is placed.
    pub fn leader(&self, name: &str, partition: i32) -> Option<NodeId> {
        let p = usize::try_from(partition).ok()?;
        self.topics.get(name)?.leaders.get(p).copied()
    }

    /// Every placed topic's partition leaders (`leaders[p]` leads partition *p*) and first
    /// voters, by name, and the voters.
    pub fn placement(&self) -> Placement {
        Placement {
            leaders: self
                .topics
                .iter()
                .filter(|(_, t)| !t.leaders.is_empty())
                .map(|(n, t)| (n.clone(), t.leaders.clone()))
                .collect(),
            first_voters: self
                .topics
                .iter()
                .filter(|(_, t)| !t.first_voters.is_empty())
                .map(|(n, t)| (n.clone(), t.first_voters.clone()))
                .collect(),
            voters: self.voters.clone(),
            bootstrap: self.bootstrap.clone(),
            joined: self.joined.clone(),
            removed: self.removed(),
            replicas: self
                .topics
                .iter()
                .filter(|(_, t)| t.assigned())
                .map(|(n, t)| (n.clone(), t.replicas.clone()))
                .collect(),
            reassigning: self
                .topics
                .iter()
                .filter(|(_, t)| !t.reassigning.is_empty())
                .map(|(n, t)| (n.clone(), t.reassigning.clone()))
                .collect(),
            handing_over: self
                .topics
                .iter()
                .filter(|(_, t)| !t.handing_over.is_empty())
                .map(|(n, t)| (n.clone(), t.handing_over.clone()))
                .collect(),
        }
    }

    /// The topics as the coordinator and the handlers read them.
    pub fn snapshot(&self) -> TopicsSnapshot {
        TopicsSnapshot::from_topics(self.topics.values().map(|t| t.topic.clone()))
    }

    /// Apply the committed entry at `index` (indexes only grow; a leader's empty entries are
    /// never handed here). Deterministic: every node applying the same entries in the same order
    /// ends in the same state with the same results. An entry that does not decode changes
    /// nothing and is reported, never a panic: it was committed, so every node sees it alike.
    pub fn apply(&mut self, index: u64, data: &[u8]) -> Applied {
        assert!(
            index > self.applied,
            "metadata entry {index} applied after {}",
            self.applied
        );
        self.applied = index;
        match Proposal::decode(data) {
            Err(e) => Applied {
                index,
                proposal: None,
                result: Err(MetaError::Undecodable(e)),
                deleted: None,
                elect: None,
            },
            Ok(p) => {
                let deleting = match &p.command {
                    Command::DeleteTopic { name } => self.topics.get(name).map(|t| t.topic.id),
                    _ => None,
                };
                let elect = match &p.command {
                    Command::ElectLeaders {
                        partitions,
                        within_ms,
                    } => Some(self.election(partitions, *within_ms)),
                    _ => None,
                };
                let seen = self.seen.entry(p.origin).or_default();
                let result = if seen.contains(&p.seq)
                    || (seen.len() >= DEDUP_WINDOW && seen.first().is_some_and(|f| p.seq < *f))
                {
                    Err(MetaError::Duplicate(p.origin, p.seq))
                } else {
                    seen.insert(p.seq);
                    if seen.len() > DEDUP_WINDOW {
                        seen.pop_first();
                    }
                    match p.command {
                        Command::Incarnation { node, .. } if node != p.origin => {
                            Err(MetaError::Incarnation(format!(
                                "node {} cannot record node {node}'s incarnation: a node records \
                                 only its own",
                                p.origin
                            )))
                        }
                        command => self.execute(command),
                    }
                };
                Applied {
                    index,
                    proposal: Some((p.origin, p.seq)),
                    deleted: deleting.filter(|_| result.is_ok()),
                    elect: elect.filter(|_| result.is_ok()),
                    result,
                }
            }
        }
    }

    /// Why a topic of `rf` replicas per partition cannot exist on a cluster of `voters` nodes, in
    /// the words the broker answers CreateTopics with (INVALID_REPLICATION_FACTOR): not
    /// positive, or above the voters. Kafka's messages (`ReplicationControlManager.
    /// createTopic` in `metadata/src/main/java/org/apache/kafka/controller/`, which prefixes
    /// "Unable to replicate the partition N time(s): " to `StripedReplicaPlacer`'s
    /// "The target replication factor of N cannot be reached ..."). `rf` is an i32 so a
    /// broker's `default.replication.factor` (an INT) is checked as it is.
    pub fn check_replication_factor(rf: i32, voters: usize) -> Result<(), String> {
        match rf {
            _ if rf <= 0 => Err(
                "Replication factor must be larger than 0, or -1 to use the default value.".into(),
            ),
            _ if rf as usize > voters => Err(format!(
                "Unable to replicate the partition {rf} time(s): The target replication factor \
                 of {rf} cannot be reached because only {voters} broker(s) are registered."
            )),
            _ => Ok(()),
        }
    }

    /// The replicas of partitions `from..to` of a topic of `rf` replicas per partition led
    /// from voter `first_leader` on: each partition's leader, then the voters after it in voter
    /// order, wrapping: Kafka's `StripedReplicaPlacer` without racks, which takes consecutive
    /// brokers in id order from a start that moves on by one per partition
    /// (`metadata/src/main/java/org/apache/kafka/metadata/placement/StripedReplicaPlacer.java`,
    /// `BrokerList.next`).
    fn assign(&self, first_leader: u32, from: i32, to: i32, rf: i16) -> Vec<Vec<NodeId>> {
        let n = self.voters.len();
        (from..to)
            .map(|p| {
                (0..rf as usize)
                    .map(|i| self.voters[(first_leader as usize + p as usize + i) % n])
                    .collect()
            })
            .collect()
    }

    /// Kafka's checks of one partition's manual replicas (`ReplicationControlManager.
    /// validateManualPartitionAssignment` in `metadata/src/main/java/org/apache/kafka/controller/`),
    /// with its messages: not empty, registered nodes (voters), none twice, and `expected` of them
    /// when the topic's other partitions have that many.
    pub fn check_assignment(
        replicas: &[NodeId],
        voters: &[NodeId],
        expected: Option<usize>,
    ) -> Result<(), String> {
        if replicas.is_empty() {
            return Err("The manual partition assignment includes an empty replica list.".into());
        }
        let mut sorted = replicas.to_vec();
        sorted.sort_unstable();
        for (i, n) in sorted.iter().enumerate() {
            if !voters.contains(n) {
                return Err(format!(
                    "The manual partition assignment includes broker {n}, but no such broker is \
                     registered."
                ));
            }
            if i > 0 && sorted[i - 1] == *n {
                return Err(format!(
                    "The manual partition assignment includes the broker {n} more than once."
                ));
            }
        }
        match expected {
            Some(want) if want != replicas.len() => Err(format!(
                "The manual partition assignment includes a partition with {} replica(s), but \
                 this is not consistent with previous partitions, which have {want} replica(s).",
                replicas.len()
            )),
            _ => Ok(()),
        }
    }

    fn placed(&self, first_leader: u32, from: i32, to: i32) -> Vec<NodeId> {
        let n = self.voters.len();
        (from..to)
            .map(|p| self.voters[(first_leader as usize + p as usize) % n])
            .collect()
    }

    /// Check everything, then change: a command that fails changes nothing.
    fn execute(&mut self, command: Command) -> Result<(), MetaError> {
        match command {
            Command::CreateTopic {
                name,
                id,
                partitions,
                configs,
                first_leader,
                replication_factor,
                assignment,
            } => {
                validate_name(&name).map_err(MetaError::InvalidName)?;
                if self.topics.contains_key(&name) {
                    return Err(MetaError::AlreadyExists(name));
                }
                if let Some(other) = self.colliding(&name) {
                    return Err(MetaError::Collides(name, other));
                }
                if !(1..=MAX_PARTITIONS_PER_TOPIC).contains(&partitions) {
                    return Err(MetaError::InvalidPartitions(partitions));
                }
                // The proposer checked too, but against its own view; the log decides alike on
                // every node.
                Self::check_replication_factor(replication_factor.into(), self.voters.len())
                    .map_err(MetaError::InvalidReplicationFactor)?;
                if let Some(a) = &assignment {
                    if a.len() != partitions as usize {
                        return Err(MetaError::InvalidAssignment(format!(
                            "{} manual assignment(s) for {partitions} partition(s).",
                            a.len()
                        )));
                    }
                    for set in a {
                        Self::check_assignment(
                            set,
                            &self.voters,
                            Some(replication_factor as usize),
                        )
                        .map_err(MetaError::InvalidAssignment)?;
                    }
                }
                // Kafka never hands out the all-zero id (it means "no id" on the wire).
                if id.is_nil() || !self.ids.insert(id) {
                    return Err(MetaError::IdInUse(id));
                }
                let mut leaders = self.placed(first_leader, 0, partitions);
                let mut first_voters = BTreeMap::new();
                let mut replicas = Vec::new();
                if let Some(a) = assignment {
                    leaders = a.iter().map(|set| set[0]).collect();
                    if replication_factor > 1 {
                        first_voters.extend((0..partitions).zip(a.iter().cloned()));
                        replicas = a;
                    }
                } else if replication_factor > 1
                    && (replication_factor as usize) < self.voters.len()
                {
                    replicas = self.assign(first_leader, 0, partitions, replication_factor);
                    first_voters.extend((0..partitions).zip(replicas.iter().cloned()));
                } else if replication_factor > 1 && self.voters != self.bootstrap {
                    first_voters.insert(0, self.voters.clone());
                }
                self.topics.insert(
                    name.clone(),
                    PlacedTopic {
                        first_voters,
                        replicas,
                        reassigning: BTreeMap::new(),
                        handing_over: BTreeSet::new(),
                        topic: Topic {
                            name,
                            id,
                            partitions,
                            internal: false,
                            configs,
                            replication_factor,
                        },
                        leaders,
                    },
                );
                Ok(())
            }
            Command::DeleteTopic { name } => {
                let t = self
                    .topics
                    .get(&name)
                    .ok_or_else(|| MetaError::Unknown(name.clone()))?;
                if t.topic.internal {
                    return Err(MetaError::Internal(name));
                }
                // The id stays in `ids`: a topic id is never reused (a client holding the old
                // id must get UNKNOWN_TOPIC_ID, not another topic's data).
                self.topics.remove(&name);
                Ok(())
            }
            Command::CreatePartitions {
                changes,
                assignments,
            } => {
                if let Some(name) = assignments
                    .keys()
                    .find(|n| !changes.iter().any(|(c, _)| c == *n))
                {
                    return Err(MetaError::InvalidAssignment(format!(
                        "A manual assignment for topic {name}, which gains no partitions."
                    )));
                }
                for (name, count) in &changes {
                    let t = self
                        .topics
                        .get(name)
                        .ok_or_else(|| MetaError::Unknown(name.clone()))?;
                    if t.topic.internal {
                        return Err(MetaError::Internal(name.clone()));
                    }
                    if *count <= t.topic.partitions {
                        return Err(MetaError::NotAnIncrease {
                            name: name.clone(),
                            current: t.topic.partitions,
                            requested: *count,
                        });
                    }
                    if *count > MAX_PARTITIONS_PER_TOPIC {
                        return Err(MetaError::InvalidPartitions(*count));
                    }
                    if let Some(a) = assignments.get(name) {
                        let adding = (*count - t.topic.partitions) as usize;
                        if a.len() != adding {
                            return Err(MetaError::InvalidAssignment(format!(
                                "Attempted to add {adding} additional partition(s), but only {} \
                                 assignment(s) were specified.",
                                a.len()
                            )));
                        }
                        if t.topic.replication_factor > 1 && !t.assigned() {
                            return Err(MetaError::InvalidAssignment(format!(
                                "Topic '{name}' has a replica on every node: its new partitions \
                                 do too, and cannot be assigned."
                            )));
                        }
                        for set in a {
                            Self::check_assignment(
                                set,
                                &self.voters,
                                Some(t.topic.replication_factor as usize),
                            )
                            .map_err(MetaError::InvalidAssignment)?;
                        }
                    } else if t.assigned() {
                        // Voters are never fewer than a set's replicas (`remove_voter`).
                        Self::check_replication_factor(
                            t.topic.replication_factor.into(),
                            self.voters.len(),
                        )
                        .map_err(MetaError::InvalidReplicationFactor)?;
                    }
                }
                for (name, count) in changes {
                    let first = {
                        let t = &self.topics[&name];
                        // Continue the topic's round robin where it stopped.
                        let last = *t.leaders.last().expect("a placed topic has partitions");
                        let at = self.voters.iter().position(|v| *v == last).unwrap_or(0);
                        (at as u32 + 1) % self.voters.len() as u32
                    };
                    let from = self.topics[&name].topic.partitions;
                    let rf = self.topics[&name].topic.replication_factor;
                    let (more, sets) = match assignments.get(&name) {
                        Some(a) => (a.iter().map(|set| set[0]).collect(), a.clone()),
                        None => (
                            self.placed(first, 0, count - from),
                            self.assign(first, 0, count - from, rf),
                        ),
                    };
                    let t = self.topics.get_mut(&name).expect("checked above");
                    t.leaders.extend(more);
                    t.topic.partitions = count;
                    if t.assigned() {
                        // Each new partition's Raft group starts with its own replicas.
                        t.first_voters
                            .extend((from..count).zip(sets.iter().cloned()));
                        t.replicas.extend(sets);
                    } else if t.topic.replication_factor > 1 {
                        // New partitions are new Raft groups, started with the voters there are now.
                        let last = first_voters_of(&t.first_voters, &self.bootstrap, from - 1);
                        if last != self.voters {
                            t.first_voters.insert(from, self.voters.clone());
                        }
                    }
                }
                Ok(())
            }
            Command::SetConfigs { name, configs } => {
                let t = self
                    .topics
                    .get_mut(&name)
                    .ok_or_else(|| MetaError::Unknown(name.clone()))?;
                t.topic.configs = configs;
                Ok(())
            }
            Command::RemoveVoter { id } => self.remove_voter(id),
            Command::AddVoter { id, addr } => self.add_voter(id, addr),
            // Acted on by each node as it applies it (`Applied::elect`); a topic deleted since
            // it was proposed is skipped there.
            Command::ElectLeaders { .. } => Ok(()),
            Command::Reassign {
                name,
                partition,
                replicas,
            } => self.reassign(name, partition, replicas),
            Command::Incarnation { node, id } => {
                if !self.voters.contains(&node) {
                    return Err(MetaError::Incarnation(format!(
                        "node {node} is not a voter (voters {:?})",
                        self.voters
                    )));
                }
                match self.incarnations.get(&node) {
                    Some(known) if *known == id => Ok(()),
                    Some(known) => Err(MetaError::Incarnation(format!(
                        "node {node} is known by incarnation {known}, not {id}"
                    ))),
                    None => {
                        self.incarnations.insert(node, id);
                        Ok(())
                    }
                }
            }
            Command::HandOver {
                name,
                partition,
                to,
            } => {
                if let Some(t) = self.topics.get_mut(&name) {
                    if t.moving_to(partition) == Some(to) {
                        t.handing_over.insert(partition);
                    }
                }
                Ok(())
            }
            Command::Reassigned {
                name,
                partition,
                replicas,
            } => {
                if let Some(t) = self.topics.get_mut(&name) {
                    if t.is_moving(partition) {
                        // Over once the target copied what the source held when it stopped.
                        if t.handing_over.contains(&partition)
                            && replicas.len() == 1
                            && t.moving_to(partition) == Some(replicas[0])
                        {
                            t.reassigning.remove(&partition);
                            t.handing_over.remove(&partition);
                        }
                        return Ok(());
                    }
                    let now = usize::try_from(partition)
                        .ok()
                        .and_then(|p| t.replicas.get(p));
                    if now == Some(&replicas) {
                        t.reassigning.remove(&partition);
                    }
                }
                Ok(())
            }
        }
    }

    /// Kafka's checks (`ReplicationControlManager.alterPartitionReassignment` and
    /// `validateManualPartitionAssignment`): the partition exists, the replicas are distinct
    /// registered nodes, not empty. Here also: the topic has replica sets of its own or one
    /// replica per partition (a topic replicated on every voter has no other node to move to),
    /// and the set keeps its size (a
    /// partition's factor does not change; Kafka's v1 can refuse that too,
    /// `allowReplicationFactorChange`). A new replica joins the partition's Raft group as a
    /// learner; one that leaves keeps what it stored (a node moved back later comes back with
    /// its log, as a lagging replica, never empty under an id the group knew).
    fn reassign(
        &mut self,
        name: String,
        partition: i32,
        replicas: Option<Vec<NodeId>>,
    ) -> Result<(), MetaError> {
        let voters = self.voters.clone();
        let t = match self.topics.get_mut(&name) {
            Some(t) if !t.topic.internal && (0..t.topic.partitions).contains(&partition) => t,
            _ => return Err(MetaError::UnknownPartition(name, partition)),
        };
        let p = partition as usize;
        let Some(replicas) = replicas else {
            let Some(before) = t.reassigning.get(&partition).cloned() else {
                return Err(MetaError::NoReassignment(name, partition));
            };
            if let Some(gone) = before.iter().find(|n| !voters.contains(n)) {
                return Err(MetaError::InvalidAssignment(format!(
                    "Cannot cancel the reassignment of {name}-{partition}: node {gone} of its \
                     replicas before it was removed from the cluster since."
                )));
            }
            t.reassigning.remove(&partition);
            t.handing_over.remove(&partition);
            t.leaders[p] = before[0];
            if t.assigned() {
                t.replicas[p] = before;
            }
            return Ok(());
        };
        let current = match (t.assigned(), t.topic.replication_factor) {
            (true, _) => t.replicas[p].clone(),
            (false, 1) => vec![t.leaders[p]],
            (false, _) => voters.clone(),
        };
        Self::check_assignment(&replicas, &voters, None).map_err(MetaError::InvalidAssignment)?;
        let mut distinct = replicas.clone();
        distinct.sort_unstable();
        let mut sorted_current = current.clone();
        sorted_current.sort_unstable();
        if t.single_replica() {
            if replicas.len() != 1 {
                return Err(MetaError::InvalidReplicationFactor(format!(
                    "Cannot change the replication factor of {name}-{partition} from 1 to {} by \
                     a reassignment.",
                    replicas.len()
                )));
            }
            // Its one replica moves: the target copies the source's records while the source
            // serves, then takes over (`Command::HandOver`, `Command::Reassigned`). Asked back
            // to the source, the move is cancelled; asked elsewhere, the new target copies from
            // the same source, which serves again meanwhile.
            let source = t.reassigning.get(&partition).map_or(current[0], |b| b[0]);
            let to = replicas[0];
            if to == current[0] {
                return Ok(());
            }
            t.handing_over.remove(&partition);
            if to == source {
                t.reassigning.remove(&partition);
            } else {
                t.reassigning.insert(partition, vec![source]);
            }
            t.leaders[p] = to;
            return Ok(());
        }
        if !t.assigned() {
            // Nothing moves: the same replicas (in any order) are a no-op, as in Kafka.
            return if distinct == sorted_current {
                Ok(())
            } else {
                Err(MetaError::InvalidAssignment(format!(
                    "Cannot reassign {name}-{partition}: its topic has a replica on every node \
                     ({current:?}), which it keeps."
                )))
            };
        }
        if replicas.len() != current.len() {
            return Err(MetaError::InvalidReplicationFactor(format!(
                "Cannot change the replication factor of {name}-{partition} from {} to {} by a \
                 reassignment.",
                current.len(),
                replicas.len()
            )));
        }
        if replicas == current {
            return Ok(());
        }
        t.reassigning.entry(partition).or_insert(current);
        if t.reassigning.get(&partition) == Some(&replicas) {
            // Back where it started: nothing is under way any more.
            t.reassigning.remove(&partition);
        }
        t.leaders[p] = replicas[0];
        t.replicas[p] = replicas;
        Ok(())
    }

    /// Kafka's controller refuses a voter it already has (`AddVoterHandler` in
    /// `raft/src/main/java/org/apache/kafka/raft/internals/`: DUPLICATE_VOTER). Here also:
    /// - an id that was a member before (removed since): a replica id is never a member twice
    ///   (`Replica::join`), a node that lost its disk or was removed comes back under a new id;
    /// - an id below the number of first voters or past [`MAX_NODES`]: a node's producer ids
    ///   are the lane of its id then (the first voters' lanes are their positions), so two
    ///   nodes never share a lane (`engine::producer_ids`);
    /// - an address that is not `host:port`, or is a joined voter's (the broker checks the
    ///   first voters', which the state does not hold);
    /// - a cluster of [`crate::MAX_VOTERS`] voters already.
    fn add_voter(&mut self, id: NodeId, addr: String) -> Result<(), MetaError> {
        if self.voters.contains(&id) {
            return Err(MetaError::DuplicateVoter(id, self.voters.clone()));
        }
        let refuse = |why: String| Err(MetaError::CannotAdd(why));
        if self.bootstrap.contains(&id) || self.joined.iter().any(|(j, _)| *j == id) {
            return refuse(format!(
                "Node {id} was a member of this cluster before and was removed: a node id is \
                 never a member twice; start the node under a new node.id."
            ));
        }
        if !may_join(id, self.bootstrap.len()) {
            return refuse(format!(
                "Node id {id} cannot join: a joining node's id is between {} (the number of \
                 nodes in controller.quorum.voters) and {}.",
                self.bootstrap.len(),
                MAX_NODES - 1
            ));
        }
        if self.voters.len() >= crate::MAX_VOTERS {
            return refuse(format!(
                "The cluster has {} voters, the most it may have.",
                self.voters.len()
            ));
        }
        let valid = addr
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        if !valid || addr.len() > 300 {
            return refuse(format!("Node {id}'s address {addr:?} is not host:port."));
        }
        // A removed node's address may serve a new node (a node replaced on the same host).
        if self
            .joined
            .iter()
            .any(|(j, a)| *a == addr && self.voters.contains(j))
        {
            return refuse(format!(
                "Node {id}'s address {addr} is another node's already."
            ));
        }
        let old_voters = self.voters.clone();
        self.voters.push(id);
        self.joined.push((id, addr));
        let n = i16::try_from(self.voters.len()).expect("voters are bounded");
        // Placed before the new voter counts, so a removed voter's partitions go where
        // RemoveVoter would have put them.
        self.place_offsets(&old_voters);
        let voters = &self.voters;
        for t in self.topics.values_mut() {
            if t.topic.internal {
                // Placed above; its share moves below.
            } else if t.assigned() {
                // Kafka leaves a new broker without replicas until a reassignment moves some
                // there; so do these partitions' sets.
                continue;
            } else if t.topic.replication_factor > 1 {
                t.topic.replication_factor = n;
            } else {
                continue; // a factor-1 partition's one replica does not move
            }
            give_share(&mut t.leaders, id, voters.len());
        }
        Ok(())
    }

    /// Kafka's controller refuses to remove a voter when the quorum would be left without one
    /// (`RemoveVoterHandler` in `raft/src/main/java/org/apache/kafka/raft/internals/`); here a
    /// node is also every replica of the topics replicated on every voter, and the only one
    /// of a partition of replication factor 1 placed on it, so:
    /// - at least two voters stay: a topic replicated on every voter stays a Raft group of two
    ///   or more (a factor of 1 is the unreplicated storage path, which a topic never switches
    ///   to);
    /// - no partition of replication factor 1 is placed on it (its records exist nowhere else:
    ///   delete the topic, or wait for partition reassignment, which is not built);
    /// - a partition with a replica set of its own (`PlacedTopic::replicas`) that has a replica
    ///   on it has a voter outside the set to take that replica's place: the first one after
    ///   the removed node in voter order. The new replica takes the removed one's place in the
    ///   set (so a preferred leader is replaced by a preferred leader, and leadership stays as
    ///   spread as it was); the partition's Raft leader adds it, as a learner until it caught up,
    ///   and removes the old one (`Replica::follow_members`). Kafka keeps a removed broker's
    ///   replicas assigned to it, offline, until a reassignment; a node removed here is gone
    ///   for good, so its replicas move at once.
    fn remove_voter(&mut self, id: NodeId) -> Result<(), MetaError> {
        let Some(at) = self.voters.iter().position(|v| *v == id) else {
            return Err(MetaError::NotAVoter(id, self.voters.clone()));
        };
        if self.voters.len() <= 2 {
            return Err(MetaError::CannotRemove(format!(
                "Cannot remove node {id}: the cluster would be left with {} voter(s); at least 2 \
                 must stay.",
                self.voters.len() - 1
            )));
        }
        for (name, t) in &self.topics {
            // `__consumer_offsets` has a replica on every voter whatever its factor says.
            if t.single_replica() {
                if let Some((p, _)) = t.reassigning.iter().find(|(_, b)| b.contains(&id)) {
                    return Err(MetaError::CannotRemove(format!(
                        "Cannot remove node {id}: partition {p} of topic '{name}' is moving off \
                         it; wait until the reassignment completes."
                    )));
                }
                if let Some(p) = t.leaders.iter().position(|l| *l == id) {
                    return Err(MetaError::CannotRemove(format!(
                        "Cannot remove node {id}: it holds the only replica of partition {p} of \
                         topic '{name}' (replication factor 1); move it to another node first \
                         (kafka-reassign-partitions) or delete the topic."
                    )));
                }
            }
        }
        let old = self.voters.clone();
        let replacement = |set: &[NodeId]| -> Option<NodeId> {
            (1..old.len())
                .map(|i| old[(at + i) % old.len()])
                .find(|v| !set.contains(v))
        };
        for (name, t) in self.topics.iter().filter(|(_, t)| t.assigned()) {
            for (p, set) in t.replicas.iter().enumerate() {
                if set.contains(&id) && replacement(set).is_none() {
                    return Err(MetaError::CannotRemove(format!(
                        "Cannot remove node {id}: partition {p} of topic '{name}' has {} \
                         replicas and no other node could take the one on it.",
                        set.len()
                    )));
                }
            }
        }
        let moved: Vec<Vec<Vec<NodeId>>> = self
            .topics
            .values()
            .map(|t| {
                t.replicas
                    .iter()
                    .map(|set| {
                        let new = replacement(set);
                        set.iter()
                            .map(|r| {
                                if *r == id {
                                    new.expect("checked above")
                                } else {
                                    *r
                                }
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        for (t, sets) in self.topics.values_mut().zip(moved) {
            if t.assigned() {
                t.leaders = sets.iter().map(|s| s[0]).collect();
                t.replicas = sets;
            }
        }
        // Placed first, so the removed voter's partitions move to the voter after it as a
        // placed topic's do, and every node's rebalancing agrees where each one goes.
        self.place_offsets(&old);
        self.voters = old.iter().copied().filter(|v| *v != id).collect();
        // The voter after the removed one in the old order (wrapping): its partitions move there,
        // so a topic's round robin stays a rotation of the voters that are left.
        let next = old[(at + 1) % old.len()];
        let n = i16::try_from(self.voters.len()).expect("voters are bounded");
        for t in self.topics.values_mut().filter(|t| !t.assigned()) {
            if !t.topic.internal && t.topic.replication_factor > 1 {
                t.topic.replication_factor = n;
            }
            for l in t.leaders.iter_mut().filter(|l| **l == id) {
                *l = next;
            }
        }
        Ok(())
    }

    /// The groups `partitions` name that exist now (a topic deleted, or a partition not
    /// created, since the election was asked for is left out).
    fn election(&self, partitions: &[(String, Vec<i32>)], within_ms: u32) -> Election {
        let mut groups = Vec::new();
        for (name, ps) in partitions {
            let Some(t) = self.topics.get(name) else {
                continue;
            };
            let id = if t.topic.internal {
                Uuid::nil()
            } else {
                t.topic.id
            };
            groups.extend(
                ps.iter()
                    .filter(|p| (0..t.topic.partitions).contains(*p))
                    .map(|p| (id, *p)),
            );
        }
        Election { groups, within_ms }
    }

    /// Place `__consumer_offsets` at the first membership change (it is placed by
    /// [`first_offsets_leader`] until then), `voters` being the voters before the change: a
    /// partition whose first preferred leader was removed since goes to the voter after it in
    /// `controller.quorum.voters` order that is still one.
    fn place_offsets(&mut self, voters: &[NodeId]) {
        let bootstrap = &self.bootstrap;
        for t in self.topics.values_mut().filter(|t| t.topic.internal) {
            if t.leaders.is_empty() {
                t.leaders = (0..t.topic.partitions.max(0) as usize)
                    .map(|p| {
                        let first = first_offsets_leader(bootstrap, p);
                        let at = bootstrap.iter().position(|b| *b == first).unwrap_or(0);
                        next_voter(bootstrap, voters, at)
                    })
                    .collect();
            }
        }
    }

    fn colliding(&self, name: &str) -> Option<String> {
        let key = name.replace('.', "_");
        self.topics
            .keys()
            .find(|t| t.as_str() != name && t.replace('.', "_") == key)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets() -> Topic {
        Topic {
            name: CONSUMER_OFFSETS.into(),
            id: Uuid::from_u128(7),
            partitions: 50,
            internal: true,
            configs: BTreeMap::new(),
            replication_factor: 1,
        }
    }

    fn entry(seq: u64, command: Command) -> Vec<u8> {
        Proposal {
            origin: 1,
            seq,
            command,
        }
        .encode()
        .unwrap()
    }

    fn create(name: &str, id: u128, partitions: i32, first_leader: u32) -> Command {
        Command::CreateTopic {
            name: name.into(),
            id: Uuid::from_u128(id),
            partitions,
            configs: BTreeMap::new(),
            first_leader,
            replication_factor: 1,
            assignment: None,
        }
    }

    #[test]
    fn partitions_are_placed_round_robin_and_growth_continues_it() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        let created = s.apply(1, &entry(1, create("orders", 100, 4, 2)));
        assert_eq!(created.result, Ok(()));
        assert_eq!(created.deleted, None);
        assert_eq!(s.topic("orders").unwrap().leaders, vec![3, 1, 2, 3]);
        assert_eq!(s.leader("orders", 1), Some(1));
        assert_eq!(s.leader("orders", 4), None);
        assert_eq!(s.leader("orders", -1), None);
        let grow = Command::CreatePartitions {
            changes: vec![("orders".into(), 6)],
            assignments: BTreeMap::new(),
        };
        assert_eq!(s.apply(2, &entry(2, grow)).result, Ok(()));
        assert_eq!(s.topic("orders").unwrap().leaders, vec![3, 1, 2, 3, 1, 2]);
        assert_eq!(s.topic("orders").unwrap().topic.partitions, 6);
        let snap = s.snapshot();
        assert_eq!(snap.get("orders").unwrap().id, Uuid::from_u128(100));
        assert_eq!(snap.get(CONSUMER_OFFSETS).unwrap().partitions, 50);
        assert_eq!(
            s.leader(CONSUMER_OFFSETS, 0),
            None,
            "placed by its own elections"
        );
        let placement = s.placement();
        assert_eq!(
            placement.leaders.len(),
            1,
            "only placed topics: {placement:?}"
        );
        assert_eq!(placement.leaders["orders"], vec![3, 1, 2, 3, 1, 2]);
        assert_eq!(placement.voters, [1, 2, 3]);
        assert_eq!(placement.first_voters("orders", 5), [1, 2, 3]);
    }

    #[test]
    fn a_snapshot_restores_the_state_and_names_what_was_deleted() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        s.apply(1, &entry(1, create("orders", 100, 4, 2)));
        s.apply(2, &entry(2, create("gone", 101, 1, 0)));
        s.apply(
            3,
            &entry(
                3,
                Command::DeleteTopic {
                    name: "gone".into(),
                },
            ),
        );
        let configs = BTreeMap::from([("retention.ms".to_string(), "60000".to_string())]);
        s.apply(
            4,
            &entry(
                4,
                Command::SetConfigs {
                    name: "orders".into(),
                    configs,
                },
            ),
        );
        assert_eq!(s.deleted_ids(), [Uuid::from_u128(101)]);
        // Taken at index 6 (two no-ops after the last change).
        let bytes = s.encode_snapshot(6);
        let mut back = MetadataState::decode_snapshot(&bytes, &offsets()).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.applied_index(), 4);
        assert_eq!(back.deleted_ids(), [Uuid::from_u128(101)]);
        // It goes on as the original does: the deleted id stays unusable, a repeated
        // proposal is still a duplicate.
        let again = entry(9, create("gone", 101, 1, 0));
        assert_eq!(back.apply(7, &again).result, s.apply(7, &again).result);
        assert_eq!(
            back.apply(
                8,
                &entry(
                    4,
                    Command::DeleteTopic {
                        name: "orders".into()
                    }
                )
            )
            .result,
            Err(MetaError::Duplicate(1, 4))
        );
        // Refused: another cluster's offsets topic, another version, garbage, nothing.
        let mut other = offsets();
        other.id = Uuid::from_u128(8);
        assert!(MetadataState::decode_snapshot(&bytes, &other).is_err());
        let mut newer = bytes.clone();
        newer[0] = 2;
        assert_eq!(
            MetadataState::decode_snapshot(&newer, &offsets()),
            Err(DecodeError::Version(2))
        );
        assert!(MetadataState::decode_snapshot(&bytes[..bytes.len() - 1], &offsets()).is_err());
        assert_eq!(
            MetadataState::decode_snapshot(&[], &offsets()),
            Err(DecodeError::Empty)
        );
    }

    #[test]
    fn the_first_of_two_racing_creates_wins_on_every_node() {
        let a = Proposal {
            origin: 1,
            seq: 1,
            command: create("t", 1, 1, 0),
        }
        .encode()
        .unwrap();
        let b = Proposal {
            origin: 2,
            seq: 1,
            command: create("t", 2, 3, 1),
        }
        .encode()
        .unwrap();
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        let first = s.apply(5, &a);
        let second = s.apply(9, &b);
        assert_eq!(first.proposal, Some((1, 1)));
        assert_eq!(first.result, Ok(()));
        assert_eq!(second.proposal, Some((2, 1)));
        assert_eq!(second.result, Err(MetaError::AlreadyExists("t".into())));
        assert_eq!(s.topic("t").unwrap().topic.id, Uuid::from_u128(1));
        assert_eq!(s.applied_index(), 9);
    }

    #[test]
    fn a_failed_command_changes_nothing() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        assert_eq!(s.apply(1, &entry(1, create("a", 10, 2, 0))).result, Ok(()));
        assert_eq!(
            s.apply(2, &entry(2, create("b.c", 11, 1, 0))).result,
            Ok(())
        );
        let invalid_name = validate_name("bad name").unwrap_err();
        let cases = [
            (
                create("b_c", 12, 1, 0),
                MetaError::Collides("b_c".into(), "b.c".into()),
            ),
            (
                create("bad name", 13, 1, 0),
                MetaError::InvalidName(invalid_name),
            ),
            (create("a", 13, 1, 0), MetaError::AlreadyExists("a".into())),
            (create("z", 14, 0, 0), MetaError::InvalidPartitions(0)),
            (
                create("z", 15, 10_001, 0),
                MetaError::InvalidPartitions(10_001),
            ),
            (
                create("z", 10, 1, 0),
                MetaError::IdInUse(Uuid::from_u128(10)),
            ),
            (create("z", 0, 1, 0), MetaError::IdInUse(Uuid::nil())),
            (create("z", 7, 1, 0), MetaError::IdInUse(Uuid::from_u128(7))),
            (
                // All or none: "a" would grow, but "missing" fails the command.
                Command::CreatePartitions {
                    changes: vec![("a".into(), 5), ("missing".into(), 2)],
                    assignments: BTreeMap::new(),
                },
                MetaError::Unknown("missing".into()),
            ),
            (
                Command::CreatePartitions {
                    changes: vec![("a".into(), 2)],
                    assignments: BTreeMap::new(),
                },
                MetaError::NotAnIncrease {
                    name: "a".into(),
                    current: 2,
                    requested: 2,
                },
            ),
            (
                Command::CreatePartitions {
                    changes: vec![(CONSUMER_OFFSETS.into(), 60)],
                    assignments: BTreeMap::new(),
                },
                MetaError::Internal(CONSUMER_OFFSETS.into()),
            ),
            (
                Command::DeleteTopic {
                    name: CONSUMER_OFFSETS.into(),
                },
                MetaError::Internal(CONSUMER_OFFSETS.into()),
            ),
            (
                Command::SetConfigs {
                    name: "missing".into(),
                    configs: BTreeMap::new(),
                },
                MetaError::Unknown("missing".into()),
            ),
        ];
        for (i, (command, want)) in cases.into_iter().enumerate() {
            let before = s.clone();
            let index = 3 + i as u64;
            let got = s.apply(index, &entry(index, command.clone()));
            assert_eq!(got.result, Err(want), "{command:?}");
            assert_eq!(s.applied_index(), index);
            // The topics are untouched (the proposal itself is remembered, as applied).
            assert_eq!(
                (&s.topics, &s.ids),
                (&before.topics, &before.ids),
                "{command:?} changed the topics"
            );
            assert!(s.seen[&1].contains(&index));
        }
    }

    #[test]
    fn a_proposal_applied_twice_takes_effect_once() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        let grow = |seq, count| {
            Proposal {
                origin: 2,
                seq,
                command: Command::CreatePartitions {
                    changes: vec![("a".into(), count)],
                    assignments: BTreeMap::new(),
                },
            }
            .encode()
            .unwrap()
        };
        s.apply(1, &entry(1, create("a", 10, 1, 0)));
        assert_eq!(s.apply(2, &grow(5, 3)).result, Ok(()));
        assert_eq!(
            s.apply(3, &grow(5, 3)).result,
            Err(MetaError::Duplicate(2, 5))
        );
        // The same sequence number from another node is another proposal.
        assert_eq!(
            s.apply(4, &entry(5, Command::DeleteTopic { name: "a".into() }))
                .result,
            Ok(())
        );
        // Past the window, an old sequence number counts as a duplicate too.
        for seq in 100..100 + DEDUP_WINDOW as u64 {
            s.apply(seq, &grow(seq, 1));
        }
        assert_eq!(
            s.apply(5_000, &grow(6, 9)).result,
            Err(MetaError::Duplicate(2, 6))
        );
        assert_eq!(s.seen[&2].len(), DEDUP_WINDOW);
    }

    #[test]
    fn a_deleted_topics_id_is_never_given_again() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        s.apply(1, &entry(1, create("a", 10, 1, 0)));
        let del = Command::DeleteTopic { name: "a".into() };
        let deleted = s.apply(2, &entry(2, del.clone()));
        assert_eq!(deleted.result, Ok(()));
        assert_eq!(deleted.deleted, Some(Uuid::from_u128(10)));
        let again = s.apply(3, &entry(3, del.clone()));
        assert_eq!(again.result, Err(MetaError::Unknown("a".into())));
        assert_eq!(again.deleted, None, "a failed deletion frees nothing");
        assert_eq!(
            s.apply(4, &entry(4, create("a", 10, 1, 0))).result,
            Err(MetaError::IdInUse(Uuid::from_u128(10)))
        );
        assert_eq!(s.apply(5, &entry(5, create("a", 11, 1, 0))).result, Ok(()));
        // A repeated proposal of a deletion deletes nothing either.
        s.apply(6, &entry(6, create("b", 12, 1, 0)));
        let del_b = entry(7, Command::DeleteTopic { name: "b".into() });
        assert_eq!(s.apply(7, &del_b).deleted, Some(Uuid::from_u128(12)));
        assert_eq!(s.apply(8, &del_b).deleted, None);
    }

    #[test]
    fn garbage_entries_are_reported_and_change_nothing() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        let before = s.clone();
        let mut too_big = vec![VERSION];
        too_big.resize(MAX_PROPOSAL_BYTES + 1, b' ');
        for (i, (bytes, want)) in [
            (vec![], DecodeError::Empty),
            (vec![9, b'{', b'}'], DecodeError::Version(9)),
            (too_big, DecodeError::TooLarge(MAX_PROPOSAL_BYTES + 1)),
        ]
        .into_iter()
        .enumerate()
        {
            let got = s.apply(i as u64 + 1, &bytes);
            assert_eq!(got.proposal, None);
            assert_eq!(got.result, Err(MetaError::Undecodable(want)));
        }
        let got = s.apply(10, b"\x01{\"origin\":1}");
        assert!(matches!(
            got.result,
            Err(MetaError::Undecodable(DecodeError::Malformed(_)))
        ));
        s.applied = 0;
        assert_eq!(s, before);
        // A proposal over the bound is refused before it is proposed.
        let huge = Proposal {
            origin: 1,
            seq: 1,
            command: Command::SetConfigs {
                name: "a".into(),
                configs: [("k".to_string(), "v".repeat(MAX_PROPOSAL_BYTES))].into(),
            },
        };
        assert!(matches!(huge.encode(), Err(DecodeError::TooLarge(_))));
    }

    #[test]
    fn a_topic_has_between_one_replica_and_one_on_every_voter() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        let with_rf = |name: &str, id: u128, rf: i16| Command::CreateTopic {
            name: name.into(),
            id: Uuid::from_u128(id),
            partitions: 2,
            configs: BTreeMap::new(),
            first_leader: 1,
            replication_factor: rf,
            assignment: None,
        };
        assert_eq!(s.apply(1, &entry(1, with_rf("all", 10, 3))).result, Ok(()));
        let all = s.topic("all").unwrap();
        assert_eq!(all.topic.replication_factor, 3);
        assert_eq!(
            all.leaders,
            vec![2, 3],
            "still placed: the preferred leaders"
        );
        // New partitions keep the topic's factor.
        let grow = Command::CreatePartitions {
            changes: vec![("all".into(), 4)],
            assignments: BTreeMap::new(),
        };
        assert_eq!(s.apply(2, &entry(2, grow)).result, Ok(()));
        let all = s.topic("all").unwrap();
        assert_eq!(all.topic.replication_factor, 3);
        assert_eq!(all.leaders, vec![2, 3, 1, 2]);
        assert_eq!(s.snapshot().get("all").unwrap().replication_factor, 3);
        assert_eq!(s.apply(3, &entry(3, with_rf("one", 11, 1))).result, Ok(()));
        assert_eq!(s.topic("one").unwrap().topic.replication_factor, 1);
        let before = s.clone();
        for (i, (rf, want)) in [
            (
                4,
                "Unable to replicate the partition 4 time(s): The target replication factor of 4 \
                 cannot be reached because only 3 broker(s) are registered.",
            ),
            (
                0,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ),
        ]
        .into_iter()
        .enumerate()
        {
            let index = 4 + i as u64;
            assert_eq!(
                s.apply(
                    index,
                    &entry(index, with_rf("some", 20 + index as u128, rf))
                )
                .result,
                Err(MetaError::InvalidReplicationFactor(want.into())),
                "rf {rf}"
            );
        }
        assert_eq!((&s.topics, &s.ids), (&before.topics, &before.ids));
        assert!(!s.topic("all").unwrap().assigned() && !s.topic("one").unwrap().assigned());
        // An entry written before the field existed replays as one replica.
        let old = format!(
            "\x01{}",
            r#"{"origin":1,"seq":99,"command":{"type":"CreateTopic","name":"old","id":"00000000-0000-0000-0000-000000000063","partitions":2,"configs":{},"first_leader":0}}"#
        );
        let decoded = Proposal::decode(old.as_bytes()).unwrap();
        assert!(matches!(
            decoded.command,
            Command::CreateTopic {
                replication_factor: 1,
                ..
            }
        ));
        assert_eq!(s.apply(10, old.as_bytes()).result, Ok(()));
        assert_eq!(s.topic("old").unwrap().topic.replication_factor, 1);
        // And so does a topic stored without it (`topics.json`).
        let t: Topic = serde_json::from_str(
            r#"{"name":"t","id":"00000000-0000-0000-0000-000000000005","partitions":1}"#,
        )
        .unwrap();
        assert_eq!(t.replication_factor, 1);
    }

    #[test]
    fn a_factor_between_one_and_the_voters_assigns_each_partition_its_replicas() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        let pairs = |first_leader| Command::CreateTopic {
            name: "pairs".into(),
            id: Uuid::from_u128(10),
            partitions: 4,
            configs: BTreeMap::new(),
            first_leader,
            replication_factor: 2,
            assignment: None,
        };
        assert_eq!(s.apply(1, &entry(1, pairs(1))).result, Ok(()));
        let t = s.topic("pairs").unwrap();
        assert!(t.assigned());
        assert_eq!(t.topic.replication_factor, 2);
        // Striped: each partition's leader, then the voter after it.
        assert_eq!(
            t.replicas,
            vec![vec![2, 3], vec![3, 1], vec![1, 2], vec![2, 3]]
        );
        assert_eq!(
            t.leaders,
            vec![2, 3, 1, 2],
            "each set's first is its leader"
        );
        // Every partition's group starts with its own replicas, whatever the cluster's voters.
        let placement = s.placement();
        for (p, set) in t.replicas.iter().enumerate() {
            assert_eq!(
                placement.first_voters("pairs", p as i32),
                &set[..],
                "partition {p}"
            );
        }
        assert_eq!(placement.replicas["pairs"], t.replicas);
        // Growth continues the stripe after the last leader.
        let grow = Command::CreatePartitions {
            changes: vec![("pairs".into(), 6)],
            assignments: BTreeMap::new(),
        };
        assert_eq!(s.apply(2, &entry(2, grow)).result, Ok(()));
        let t = s.topic("pairs").unwrap();
        assert_eq!(t.replicas[4..], [vec![3, 1], vec![1, 2]]);
        assert_eq!(t.leaders[4..], [3, 1]);
        assert_eq!(s.placement().first_voters("pairs", 5), &[1, 2]);

        // A joining node gets none of them (Kafka leaves it empty until a reassignment), and
        // the factor stays 2; a topic on every voter grows onto it as before.
        let all = replicated("all", 11, 3, 3);
        assert_eq!(s.apply(3, &entry(3, all)).result, Ok(()));
        let join = Command::AddVoter {
            id: 4,
            addr: "127.0.0.1:19004".into(),
        };
        assert_eq!(s.apply(4, &entry(4, join)).result, Ok(()));
        let before_removal = s.topic("pairs").unwrap().clone();
        assert_eq!(before_removal.topic.replication_factor, 2);
        assert!(before_removal.replicas.iter().all(|set| !set.contains(&4)));
        assert_eq!(s.topic("all").unwrap().topic.replication_factor, 4);
        // Three of four: now a set of its own, which a factor equal to the voters is not.
        let threes = replicated("threes", 12, 2, 3);
        assert_eq!(s.apply(5, &entry(5, threes)).result, Ok(()));
        assert_eq!(
            s.topic("threes").unwrap().replicas,
            vec![vec![1, 2, 3], vec![2, 3, 4]]
        );

        // Removing node 3 puts the voter after it (4, or the next one not in the set) in its
        // place in every set, leaders following the sets' first replicas.
        let remove = Command::RemoveVoter { id: 3 };
        assert_eq!(s.apply(6, &entry(6, remove)).result, Ok(()));
        let t = s.topic("pairs").unwrap();
        assert_eq!(
            t.replicas,
            vec![
                vec![2, 4],
                vec![4, 1],
                vec![1, 2],
                vec![2, 4],
                vec![4, 1],
                vec![1, 2]
            ]
        );
        assert_eq!(t.leaders, vec![2, 4, 1, 2, 4, 1]);
        assert_eq!(t.topic.replication_factor, 2);
        assert_eq!(
            t.first_voters, before_removal.first_voters,
            "a group's first voters never change"
        );
        assert_eq!(
            s.topic("threes").unwrap().replicas,
            vec![vec![1, 2, 4], vec![2, 1, 4]],
            "4, after 3, is in the second set already: the next voter not in it takes 3's place"
        );
        // Three voters left and a set of three: a fourth removal has no voter to move to.
        let before = s.clone();
        let remove = Command::RemoveVoter { id: 4 };
        assert_eq!(
            s.apply(7, &entry(7, remove)).result,
            Err(MetaError::CannotRemove(
                "Cannot remove node 4: partition 0 of topic 'threes' has 3 replicas and no \
                 other node could take the one on it."
                    .into()
            ))
        );
        assert_eq!(s.topics, before.topics, "a refused removal changes nothing");
        // The sets survive a snapshot.
        let back = MetadataState::decode_snapshot(&s.encode_snapshot(7), &offsets()).unwrap();
        assert_eq!(back.topics, s.topics);
    }

    #[test]
    fn manual_assignments_are_checked_as_kafka_checks_them_and_kept() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        let create = |name: &str, id, rf, a: Vec<Vec<NodeId>>| Command::CreateTopic {
            name: name.into(),
            id: Uuid::from_u128(id),
            partitions: a.len() as i32,
            configs: BTreeMap::new(),
            first_leader: 0,
            replication_factor: rf,
            assignment: Some(a),
        };
        let mut i = 0;
        let mut run = |s: &mut MetadataState, c: Command| {
            i += 1;
            s.apply(i, &entry(i, c)).result
        };
        let before = s.clone();
        for (c, why) in [
            (
                create("t", 10, 2, vec![vec![1, 2], vec![3]]),
                "The manual partition assignment includes a partition with 1 replica(s), but this \
                 is not consistent with previous partitions, which have 2 replica(s).",
            ),
            (
                create("t", 10, 2, vec![vec![1, 1]]),
                "The manual partition assignment includes the broker 1 more than once.",
            ),
            (
                create("t", 10, 2, vec![vec![1, 9]]),
                "The manual partition assignment includes broker 9, but no such broker is \
                 registered.",
            ),
            (
                create("t", 10, 1, vec![vec![]]),
                "The manual partition assignment includes an empty replica list.",
            ),
        ] {
            assert_eq!(
                run(&mut s, c),
                Err(MetaError::InvalidAssignment(why.into()))
            );
        }
        assert_eq!(s.topics, before.topics);
        // Factor 2: sets of their own as given (not striped), each group starting with them.
        let a = vec![vec![3, 1], vec![3, 2], vec![1, 3]];
        assert_eq!(run(&mut s, create("pairs", 11, 2, a.clone())), Ok(()));
        let t = s.topic("pairs").unwrap();
        assert_eq!((&t.replicas, &t.leaders), (&a, &vec![3, 3, 1]));
        assert_eq!(s.placement().first_voters("pairs", 1), &[3, 2]);
        // Factor equal to the voters, assigned: sets of their own too (a join adds nothing).
        let all = vec![vec![2, 3, 1]];
        assert_eq!(run(&mut s, create("three", 12, 3, all.clone())), Ok(()));
        assert!(s.topic("three").unwrap().assigned());
        // Factor 1: placed on the node named, unreplicated.
        assert_eq!(
            run(&mut s, create("solo", 13, 1, vec![vec![2], vec![2]])),
            Ok(())
        );
        let t = s.topic("solo").unwrap();
        assert!(!t.assigned());
        assert_eq!(t.leaders, vec![2, 2]);
        // Growing with assignments: as many as it adds, each the topic's size.
        let grow = |name: &str, count, a: Vec<Vec<NodeId>>| Command::CreatePartitions {
            changes: vec![(name.into(), count)],
            assignments: [(name.to_string(), a)].into(),
        };
        let before = s.clone();
        for (c, why) in [
            (
                grow("pairs", 5, vec![vec![1, 2]]),
                "Attempted to add 2 additional partition(s), but only 1 assignment(s) were \
                 specified.",
            ),
            (
                grow("pairs", 4, vec![vec![1, 2, 3]]),
                "The manual partition assignment includes a partition with 3 replica(s), but this \
                 is not consistent with previous partitions, which have 2 replica(s).",
            ),
            (
                grow("solo", 3, vec![vec![1, 2]]),
                "The manual partition assignment includes a partition with 2 replica(s), but this \
                 is not consistent with previous partitions, which have 1 replica(s).",
            ),
        ] {
            assert_eq!(
                run(&mut s, c),
                Err(MetaError::InvalidAssignment(why.into()))
            );
        }
        let every = replicated("every", 14, 1, 3);
        assert_eq!(run(&mut s, every), Ok(()));
        assert_eq!(
            run(&mut s, grow("every", 2, vec![vec![1, 2, 3]])),
            Err(MetaError::InvalidAssignment(
                "Topic 'every' has a replica on every node: its new partitions do too, and \
                 cannot be assigned."
                    .into()
            ))
        );
        let changes_only = Command::CreatePartitions {
            changes: vec![],
            assignments: [("pairs".to_string(), vec![vec![1, 2]])].into(),
        };
        assert_eq!(
            run(&mut s, changes_only),
            Err(MetaError::InvalidAssignment(
                "A manual assignment for topic pairs, which gains no partitions.".into()
            ))
        );
        assert_eq!(
            s.topics.iter().filter(|(n, _)| *n != "every").count(),
            before.topics.len()
        );
        assert_eq!(run(&mut s, grow("pairs", 4, vec![vec![2, 1]])), Ok(()));
        let t = s.topic("pairs").unwrap();
        assert_eq!((&t.replicas[3], t.leaders[3]), (&vec![2, 1], 2));
        assert_eq!(s.placement().first_voters("pairs", 3), &[2, 1]);
        assert_eq!(run(&mut s, grow("solo", 3, vec![vec![3]])), Ok(()));
        assert_eq!(s.topic("solo").unwrap().leaders, vec![2, 2, 3]);
    }

    #[test]
    fn a_single_replica_moves_by_a_hand_over_and_its_source_cannot_be_removed_meanwhile() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        let mut i = 0;
        let mut run = |s: &mut MetadataState, c: Command| {
            i += 1;
            s.apply(i, &entry(i, c)).result
        };
        let create = Command::CreateTopic {
            name: "one".into(),
            id: Uuid::from_u128(11),
            partitions: 3,
            configs: BTreeMap::new(),
            first_leader: 0,
            replication_factor: 1,
            assignment: None,
        };
        assert_eq!(run(&mut s, create), Ok(()));
        assert_eq!(s.topic("one").unwrap().leaders, vec![1, 2, 3]);
        let move_to = |partition, to: Option<NodeId>| Command::Reassign {
            name: "one".into(),
            partition,
            replicas: to.map(|n| vec![n]),
        };
        let hand_over = |partition, to| Command::HandOver {
            name: "one".into(),
            partition,
            to,
        };
        let done = |partition, to| Command::Reassigned {
            name: "one".into(),
            partition,
            replicas: vec![to],
        };
        // Partition 0 moves from node 1 to node 3: the target is named at once, the source kept.
        assert_eq!(run(&mut s, move_to(0, Some(3))), Ok(()));
        let t = s.topic("one").unwrap();
        assert_eq!((t.leaders[0], t.reassigning[&0].clone()), (3, vec![1]));
        assert_eq!(t.moving_to(0), Some(3));
        assert!(t.handing_over.is_empty());
        // Its source cannot leave the cluster while it moves, nor can the target of none.
        assert_eq!(
            run(&mut s, Command::RemoveVoter { id: 1 }),
            Err(MetaError::CannotRemove(
                "Cannot remove node 1: partition 0 of topic 'one' is moving off it; wait until \
                 the reassignment completes."
                    .into()
            ))
        );
        // The end is refused before the hand-over, and a hand-over to another node is ignored.
        assert_eq!(run(&mut s, done(0, 3)), Ok(()));
        assert_eq!(run(&mut s, hand_over(0, 2)), Ok(()));
        let t = s.topic("one").unwrap();
        assert!(t.reassigning.contains_key(&0) && t.handing_over.is_empty());
        // Handed over: listed as such in the placement; ended by the target.
        assert_eq!(run(&mut s, hand_over(0, 3)), Ok(()));
        assert_eq!(s.placement().handing_over["one"], [0].into());
        assert_eq!(run(&mut s, done(0, 2)), Ok(()), "another node's report");
        assert!(s.topic("one").unwrap().reassigning.contains_key(&0));
        assert_eq!(run(&mut s, done(0, 3)), Ok(()));
        let t = s.topic("one").unwrap();
        assert_eq!(t.leaders[0], 3);
        assert!(t.reassigning.is_empty() && t.handing_over.is_empty());
        assert!(s.placement().handing_over.is_empty());
        // Node 1 holds nothing now, but node 2 still holds partition 1.
        assert_eq!(
            run(&mut s, Command::RemoveVoter { id: 2 }),
            Err(MetaError::CannotRemove(
                "Cannot remove node 2: it holds the only replica of partition 1 of topic 'one' \
                 (replication factor 1); move it to another node first \
                 (kafka-reassign-partitions) or delete the topic."
                    .into()
            ))
        );
        // A second target during a hand-over copies from the same source, which serves again.
        assert_eq!(run(&mut s, move_to(1, Some(1))), Ok(()));
        assert_eq!(run(&mut s, hand_over(1, 1)), Ok(()));
        assert_eq!(run(&mut s, move_to(1, Some(3))), Ok(()));
        let t = s.topic("one").unwrap();
        assert_eq!((t.leaders[1], t.reassigning[&1].clone()), (3, vec![2]));
        assert!(t.handing_over.is_empty());
        assert_eq!(
            run(&mut s, done(1, 1)),
            Ok(()),
            "the first target's late report"
        );
        assert!(s.topic("one").unwrap().reassigning.contains_key(&1));
        // Snapshots keep a hand-over under way.
        assert_eq!(run(&mut s, hand_over(1, 3)), Ok(()));
        let at = s.applied_index();
        let back = MetadataState::decode_snapshot(&s.encode_snapshot(at), &offsets()).unwrap();
        assert_eq!(back.topics, s.topics);
        // Cancelled: back on its source at once; asked back to the source: the same.
        assert_eq!(run(&mut s, move_to(1, None)), Ok(()));
        let t = s.topic("one").unwrap();
        assert_eq!(t.leaders[1], 2);
        assert!(t.reassigning.is_empty() && t.handing_over.is_empty());
        assert_eq!(run(&mut s, move_to(1, Some(1))), Ok(()));
        assert_eq!(run(&mut s, move_to(1, Some(2))), Ok(()));
        let t = s.topic("one").unwrap();
        assert_eq!(t.leaders[1], 2);
        assert!(t.reassigning.is_empty());
        // With its partition moved off, node 2 can leave.
        assert_eq!(run(&mut s, move_to(1, Some(3))), Ok(()));
        assert_eq!(run(&mut s, hand_over(1, 3)), Ok(()));
        assert_eq!(run(&mut s, done(1, 3)), Ok(()));
        assert_eq!(run(&mut s, Command::RemoveVoter { id: 2 }), Ok(()));
    }

    #[test]
    fn a_reassignment_moves_a_set_until_its_group_settles_and_can_be_cancelled() {
        let mut s = MetadataState::new(&[1, 2, 3, 4], offsets());
        let create = |name: &str, id, rf| Command::CreateTopic {
            name: name.into(),
            id: Uuid::from_u128(id),
            partitions: 2,
            configs: BTreeMap::new(),
            first_leader: 0,
            replication_factor: rf,
            assignment: None,
        };
        let mut i = 0;
        let mut run = |s: &mut MetadataState, c: Command| {
            i += 1;
            s.apply(i, &entry(i, c)).result
        };
        assert_eq!(run(&mut s, create("pairs", 10, 2)), Ok(()));
        assert_eq!(run(&mut s, create("one", 11, 1)), Ok(()));
        assert_eq!(run(&mut s, create("all", 12, 4)), Ok(()));
        assert_eq!(
            s.topic("pairs").unwrap().replicas,
            vec![vec![1, 2], vec![2, 3]]
        );
        let move_to = |name: &str, partition, replicas: Option<Vec<NodeId>>| Command::Reassign {
            name: name.into(),
            partition,
            replicas,
        };
        let before = s.clone();
        for (c, want) in [
            (
                move_to("nope", 0, Some(vec![1, 2])),
                MetaError::UnknownPartition("nope".into(), 0),
            ),
            (
                move_to("pairs", 2, Some(vec![1, 2])),
                MetaError::UnknownPartition("pairs".into(), 2),
            ),
            (
                move_to(CONSUMER_OFFSETS, 0, Some(vec![1, 2])),
                MetaError::UnknownPartition(CONSUMER_OFFSETS.into(), 0),
            ),
            (
                move_to("pairs", 0, Some(vec![3, 3])),
                MetaError::InvalidAssignment(
                    "The manual partition assignment includes the broker 3 more than once.".into(),
                ),
            ),
            (
                move_to("pairs", 0, Some(vec![])),
                MetaError::InvalidAssignment(
                    "The manual partition assignment includes an empty replica list.".into(),
                ),
            ),
            (
                move_to("pairs", 0, Some(vec![3, 9])),
                MetaError::InvalidAssignment(
                    "The manual partition assignment includes broker 9, but no such broker is \
                     registered."
                        .into(),
                ),
            ),
            (
                move_to("pairs", 0, Some(vec![1, 2, 3])),
                MetaError::InvalidReplicationFactor(
                    "Cannot change the replication factor of pairs-0 from 2 to 3 by a \
                     reassignment."
                        .into(),
                ),
            ),
            (
                move_to("pairs", 0, None),
                MetaError::NoReassignment("pairs".into(), 0),
            ),
            (
                move_to("one", 0, Some(vec![2, 3])),
                MetaError::InvalidReplicationFactor(
                    "Cannot change the replication factor of one-0 from 1 to 2 by a \
                     reassignment."
                        .into(),
                ),
            ),
            (
                move_to("all", 0, Some(vec![1, 2])),
                MetaError::InvalidAssignment(
                    "Cannot reassign all-0: its topic has a replica on every node ([1, 2, 3, \
                     4]), which it keeps."
                        .into(),
                ),
            ),
        ] {
            assert_eq!(run(&mut s, c.clone()), Err(want), "{c:?}");
        }
        assert_eq!(s.topics, before.topics, "refusals change nothing");
        // The same replicas, in any order where nothing moves, are a no-op.
        assert_eq!(run(&mut s, move_to("one", 1, Some(vec![2]))), Ok(()));
        assert_eq!(
            run(&mut s, move_to("all", 1, Some(vec![4, 3, 2, 1]))),
            Ok(())
        );
        assert_eq!(run(&mut s, move_to("pairs", 0, Some(vec![1, 2]))), Ok(()));
        assert_eq!(s.topics, before.topics);

        // A move: the set and its preferred leader change at once, the old set is kept until
        // the group settles.
        assert_eq!(run(&mut s, move_to("pairs", 0, Some(vec![4, 2]))), Ok(()));
        let t = s.topic("pairs").unwrap();
        assert_eq!(t.replicas[0], vec![4, 2]);
        assert_eq!(t.leaders[0], 4);
        assert_eq!(t.reassigning, [(0, vec![1, 2])].into());
        assert_eq!(
            t.first_voters[&0],
            vec![1, 2],
            "the group started with these"
        );
        assert_eq!(s.placement().reassigning["pairs"], [(0, vec![1, 2])].into());
        // A second target while under way keeps the first origin.
        assert_eq!(run(&mut s, move_to("pairs", 0, Some(vec![3, 2]))), Ok(()));
        assert_eq!(s.topic("pairs").unwrap().reassigning[&0], vec![1, 2]);
        // A report of another set than the current one changes nothing; the current one ends it.
        let done = |replicas: Vec<NodeId>| Command::Reassigned {
            name: "pairs".into(),
            partition: 0,
            replicas,
        };
        assert_eq!(run(&mut s, done(vec![4, 2])), Ok(()));
        assert!(s.topic("pairs").unwrap().reassigning.contains_key(&0));
        assert_eq!(run(&mut s, done(vec![3, 2])), Ok(()));
        assert!(s.topic("pairs").unwrap().reassigning.is_empty());
        assert!(s.placement().reassigning.is_empty());
        // Moving back to where it started is a move like any other (node 1 kept its log).
        assert_eq!(run(&mut s, move_to("pairs", 0, Some(vec![1, 2]))), Ok(()));
        assert_eq!(s.topic("pairs").unwrap().reassigning[&0], vec![3, 2]);
        // Cancelled: the set goes back at once, nothing listed.
        assert_eq!(run(&mut s, move_to("pairs", 0, None)), Ok(()));
        let t = s.topic("pairs").unwrap();
        assert_eq!((t.replicas[0].clone(), t.leaders[0]), (vec![3, 2], 3));
        assert!(t.reassigning.is_empty());
        // Back to the origin by a new target ends the reassignment too.
        assert_eq!(run(&mut s, move_to("pairs", 1, Some(vec![4, 3]))), Ok(()));
        assert_eq!(run(&mut s, move_to("pairs", 1, Some(vec![2, 3]))), Ok(()));
        assert!(s.topic("pairs").unwrap().reassigning.is_empty());
        // A cancellation cannot bring back a node removed since.
        assert_eq!(run(&mut s, move_to("pairs", 1, Some(vec![2, 4]))), Ok(()));
        assert_eq!(run(&mut s, Command::RemoveVoter { id: 3 }), Ok(()));
        assert_eq!(
            run(&mut s, move_to("pairs", 1, None)),
            Err(MetaError::InvalidAssignment(
                "Cannot cancel the reassignment of pairs-1: node 3 of its replicas before it \
                 was removed from the cluster since."
                    .into()
            ))
        );
        // Snapshots keep what is under way; a deletion forgets it.
        let at = s.applied_index();
        let back = MetadataState::decode_snapshot(&s.encode_snapshot(at), &offsets()).unwrap();
        assert_eq!(back.topics, s.topics);
        assert_eq!(
            run(
                &mut s,
                Command::DeleteTopic {
                    name: "pairs".into()
                }
            ),
            Ok(())
        );
        assert!(s.placement().reassigning.is_empty());
    }

    fn replicated(name: &str, id: u128, partitions: i32, rf: i16) -> Command {
        Command::CreateTopic {
            name: name.into(),
            id: Uuid::from_u128(id),
            partitions,
            configs: BTreeMap::new(),
            first_leader: 0,
            replication_factor: rf,
            assignment: None,
        }
    }

    #[test]
    fn a_removed_voter_leaves_every_topic_and_new_groups_start_without_it() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        let mut i = 0;
        let mut run = |s: &mut MetadataState, c: Command| {
            i += 1;
            s.apply(i, &entry(i, c)).result
        };
        assert_eq!(run(&mut s, replicated("orders", 100, 3, 3)), Ok(()));
        assert_eq!(run(&mut s, create("solo", 101, 1, 2)), Ok(()));
        assert_eq!(s.topic("solo").unwrap().leaders, [3]);
        // Node 3 holds solo's only replica: refused, nothing changes.
        let before = s.clone();
        let refused = run(&mut s, Command::RemoveVoter { id: 3 });
        assert!(
            matches!(&refused, Err(MetaError::CannotRemove(m)) if m.contains("'solo'")),
            "{refused:?}"
        );
        assert_eq!(s.voters(), before.voters());
        assert_eq!(s.topic("orders"), before.topic("orders"));
        let gone = Command::DeleteTopic {
            name: "solo".into(),
        };
        assert_eq!(run(&mut s, gone), Ok(()));
        assert_eq!(run(&mut s, Command::RemoveVoter { id: 3 }), Ok(()));
        assert_eq!(s.voters(), [1, 2]);
        assert_eq!(s.removed(), [3]);
        let orders = s.topic("orders").unwrap();
        assert_eq!(
            orders.topic.replication_factor, 2,
            "a replica on each node left"
        );
        assert_eq!(
            orders.leaders,
            [1, 2, 1],
            "node 3's partition moves to the next voter"
        );
        assert_eq!(
            s.topic(CONSUMER_OFFSETS).unwrap().topic.replication_factor,
            1,
            "the internal topic's factor is the cluster's, not recorded"
        );
        // Its partitions' groups started with all three: that stays.
        assert_eq!(s.placement().first_voters("orders", 2), [1, 2, 3]);
        assert_eq!(
            run(&mut s, Command::RemoveVoter { id: 3 }),
            Err(MetaError::NotAVoter(3, vec![1, 2]))
        );
        assert!(matches!(
            run(&mut s, Command::RemoveVoter { id: 2 }),
            Err(MetaError::CannotRemove(_))
        ));
        assert_eq!(s.voters(), [1, 2]);
        // New topics and partitions: factors of the voters there are now, groups of them.
        assert!(matches!(
            run(&mut s, replicated("wide", 102, 1, 3)),
            Err(MetaError::InvalidReplicationFactor(_))
        ));
        assert_eq!(run(&mut s, replicated("late", 103, 2, 2)), Ok(()));
        let grow = |name: &str, n| Command::CreatePartitions {
            changes: vec![(name.into(), n)],
            assignments: BTreeMap::new(),
        };
        assert_eq!(run(&mut s, grow("orders", 5)), Ok(()));
        assert_eq!(run(&mut s, grow("late", 4)), Ok(()));
        let placement = s.placement();
        assert_eq!(placement.voters, [1, 2]);
        assert_eq!(placement.bootstrap, [1, 2, 3]);
        assert_eq!(placement.first_voters("late", 0), [1, 2]);
        assert_eq!(placement.first_voters("late", 3), [1, 2]);
        assert_eq!(placement.first_voters["late"].len(), 1, "one range");
        assert_eq!(placement.first_voters("orders", 2), [1, 2, 3]);
        assert_eq!(placement.first_voters("orders", 3), [1, 2]);
        assert_eq!(placement.first_voters("orders", 4), [1, 2]);
        assert_eq!(placement.leaders["orders"], [1, 2, 1, 2, 1]);
        // A snapshot keeps all of it.
        let at = s.applied_index();
        let back = MetadataState::decode_snapshot(&s.encode_snapshot(at), &offsets()).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.placement(), placement);
    }

    #[test]
    fn a_joined_voter_gets_a_replica_of_every_replicated_topic_and_is_never_added_twice() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        let mut i = 0;
        let mut run = |s: &mut MetadataState, c: Command| {
            i += 1;
            s.apply(i, &entry(i, c)).result
        };
        let add = |id, addr: &str| Command::AddVoter {
            id,
            addr: addr.into(),
        };
        assert_eq!(run(&mut s, replicated("orders", 100, 3, 3)), Ok(()));
        assert_eq!(run(&mut s, create("solo", 101, 2, 0)), Ok(()));
        let before = s.clone();
        for (bad, why) in [
            (add(2, "h:1"), "a voter"),
            (add(1, "h:1"), "a voter"),
            (add(0, "h:1"), "below the first voters' lanes"),
            (add(2000, "h:1"), "past the lanes"),
            (add(7, "nohost"), "no port"),
            (add(7, ":9"), "no host"),
            (add(7, "h:0"), "port 0"),
            (add(7, "h:x"), "bad port"),
        ] {
            assert!(run(&mut s, bad).is_err(), "{why}");
            assert_eq!(s.voters(), before.voters(), "{why}: nothing changed");
        }
        assert_eq!(
            run(&mut s, add(3, "h:1")),
            Err(MetaError::DuplicateVoter(3, vec![1, 2, 3]))
        );
        assert_eq!(run(&mut s, add(7, "127.0.0.1:19107")), Ok(()));
        assert_eq!(s.voters(), [1, 2, 3, 7]);
        assert_eq!(s.joined(), [(7, "127.0.0.1:19107".to_string())]);
        assert!(s.removed().is_empty());
        let orders = s.topic("orders").unwrap();
        assert_eq!(orders.topic.replication_factor, 4, "a replica on it too");
        assert_eq!(orders.leaders, [1, 2, 3], "too few partitions for a share");
        assert_eq!(s.topic("solo").unwrap().topic.replication_factor, 1);
        // __consumer_offsets, preferred by position in controller.quorum.voters until now, is
        // placed: node 7 is preferred for its share (50 / 4 = 12), taken from the others' last
        // partitions, the rest stay.
        let off = &s.topic(CONSUMER_OFFSETS).unwrap().leaders;
        let count = |n| off.iter().filter(|l| **l == n).count();
        assert_eq!([count(1), count(2), count(3), count(7)], [12, 13, 13, 12]);
        let moved = (0..50).filter(|p| off[*p] != [1, 2, 3][p % 3]).count();
        assert_eq!(moved, 12, "only node 7's share moves");
        assert!(off
            .iter()
            .enumerate()
            .all(|(p, l)| *l == 7 || *l == [1, 2, 3][p % 3]));
        assert!(matches!(
            run(&mut s, add(8, "127.0.0.1:19107")),
            Err(MetaError::CannotAdd(m)) if m.contains("another node's")
        ));
        // Its groups started with the first three; groups created now start with all four.
        let placement = s.placement();
        assert_eq!(placement.first_voters("orders", 2), [1, 2, 3]);
        assert_eq!(placement.joined, [(7, "127.0.0.1:19107".to_string())]);
        assert_eq!(run(&mut s, replicated("wide", 102, 5, 4)), Ok(()));
        assert_eq!(s.topic("wide").unwrap().leaders, [1, 2, 3, 7, 1]);
        assert_eq!(s.placement().first_voters("wide", 4), [1, 2, 3, 7]);
        // Removed, a joined node stays in the address book and never comes back.
        assert_eq!(run(&mut s, Command::RemoveVoter { id: 7 }), Ok(()));
        assert_eq!(s.removed(), [7]);
        assert_eq!(s.topic("orders").unwrap().topic.replication_factor, 3);
        assert_eq!(s.voters(), [1, 2, 3]);
        assert_eq!(s.topic("wide").unwrap().leaders, [1, 2, 3, 1, 1]);
        assert!(
            !s.topic(CONSUMER_OFFSETS).unwrap().leaders.contains(&7),
            "its offsets partitions go to the voter after it"
        );
        assert!(matches!(
            run(&mut s, add(7, "127.0.0.1:19107")),
            Err(MetaError::CannotAdd(m)) if m.contains("never a member twice")
        ));
        assert_eq!(
            run(&mut s, add(8, "127.0.0.1:19107")),
            Ok(()),
            "a removed node's address serves a new node"
        );
        assert_eq!(s.voters(), [1, 2, 3, 8]);
        let orders = s.topic("orders").unwrap();
        assert_eq!(orders.leaders, [1, 2, 3]);
        let wide = &s.topic("wide").unwrap().leaders;
        assert_eq!(
            wide,
            &[1, 2, 3, 1, 8],
            "node 1 preferred most: one of its partitions moves"
        );
        assert!(matches!(
            run(&mut s, add(3, "127.0.0.1:1")),
            Err(MetaError::DuplicateVoter(..))
        ));
        // A snapshot keeps all of it.
        let at = s.applied_index();
        let back = MetadataState::decode_snapshot(&s.encode_snapshot(at), &offsets()).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.placement(), s.placement());
    }

    #[test]
    fn each_node_records_its_own_incarnation_once() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        let mut i = 0;
        let mut run = |s: &mut MetadataState, origin: NodeId, node: NodeId, id: u128| {
            i += 1;
            let e = Proposal {
                origin,
                seq: i,
                command: Command::Incarnation {
                    node,
                    id: Uuid::from_u128(id),
                },
            }
            .encode()
            .unwrap();
            s.apply(i, &e).result
        };
        assert_eq!(run(&mut s, 2, 2, 20), Ok(()));
        assert_eq!(
            run(&mut s, 2, 2, 20),
            Ok(()),
            "the same again changes nothing"
        );
        assert!(matches!(
            run(&mut s, 2, 2, 21),
            Err(MetaError::Incarnation(m)) if m.contains("known by incarnation")
        ));
        assert!(matches!(
            run(&mut s, 1, 3, 30),
            Err(MetaError::Incarnation(m)) if m.contains("only its own")
        ));
        assert!(matches!(
            run(&mut s, 9, 9, 90),
            Err(MetaError::Incarnation(m)) if m.contains("not a voter")
        ));
        assert_eq!(run(&mut s, 3, 3, 30), Ok(()));
        let want = BTreeMap::from([(2, Uuid::from_u128(20)), (3, Uuid::from_u128(30))]);
        assert_eq!(s.incarnations(), &want);
        // A removed node's record stays: its id never comes back, under any directory.
        let remove = Proposal {
            origin: 1,
            seq: 100,
            command: Command::RemoveVoter { id: 3 },
        };
        assert_eq!(s.apply(100, &remove.encode().unwrap()).result, Ok(()));
        assert_eq!(s.incarnations(), &want);
        let back = MetadataState::decode_snapshot(&s.encode_snapshot(100), &offsets()).unwrap();
        assert_eq!(back, s, "a snapshot keeps the records");
    }

    #[test]
    fn a_first_removal_places_the_offsets_topic_by_the_rule_its_replicas_campaign_by() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        assert!(s.topic(CONSUMER_OFFSETS).unwrap().leaders.is_empty());
        let first = |p: usize| first_offsets_leader(&[1, 2, 3], p);
        assert_eq!((0..4).map(first).collect::<Vec<_>>(), [1, 2, 3, 1]);
        // Node 1 removed before any node joined: its partitions go to node 2 (the voter after it),
        // every other partition keeps the leader it campaigned for, and the placement says so
        // (the leaders' rebalancing reads it, so they are not left where elections put them).
        let removed = s.apply(1, &entry(1, Command::RemoveVoter { id: 1 }));
        assert_eq!(removed.result, Ok(()));
        let off = s.topic(CONSUMER_OFFSETS).unwrap().leaders.clone();
        assert_eq!(off.len(), 50);
        for (p, l) in off.iter().enumerate() {
            let want = if first(p) == 1 { 2 } else { first(p) };
            assert_eq!(*l, want, "partition {p}");
        }
        assert_eq!(s.placement().leaders[CONSUMER_OFFSETS], off);
        // A node joining then takes its share from that placement, not from the removed node's.
        let add = Command::AddVoter {
            id: 5,
            addr: "127.0.0.1:19105".into(),
        };
        assert_eq!(s.apply(2, &entry(2, add)).result, Ok(()));
        let off = &s.topic(CONSUMER_OFFSETS).unwrap().leaders;
        let count = |n| off.iter().filter(|l| **l == n).count();
        assert_eq!(
            [count(1), count(2), count(3), count(5)],
            [0, 18, 16, 16],
            "50 / 3 from node 2"
        );
    }

    #[test]
    fn an_election_names_the_groups_that_exist_and_changes_nothing() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        assert_eq!(
            s.apply(1, &entry(1, replicated("orders", 100, 3, 3)))
                .result,
            Ok(())
        );
        let before = s.placement();
        let elect = Command::ElectLeaders {
            partitions: vec![
                ("orders".into(), vec![2, 0, 9]),
                (CONSUMER_OFFSETS.into(), vec![7]),
                ("ghost".into(), vec![0]),
            ],
            within_ms: 4_000,
        };
        let applied = s.apply(2, &entry(2, elect.clone()));
        assert_eq!(applied.result, Ok(()));
        assert_eq!(
            applied.elect,
            Some(Election {
                // A partition out of range and an unknown topic are left out; the offsets topic
                // is keyed by the nil id, as the broker keys its groups.
                groups: vec![
                    (Uuid::from_u128(100), 2),
                    (Uuid::from_u128(100), 0),
                    (Uuid::nil(), 7)
                ],
                within_ms: 4_000,
            })
        );
        assert_eq!(s.placement(), before, "an election places nothing");
        // Applied again (a duplicate proposal): refused, and nothing to elect.
        let again = s.apply(3, &entry(2, elect));
        assert!(matches!(again.result, Err(MetaError::Duplicate(1, 2))));
        assert_eq!(again.elect, None);
    }

    #[test]
    fn a_snapshot_from_before_removals_reads_its_voters_as_the_first_ones() {
        let mut s = MetadataState::new(&[1, 2, 3], offsets());
        s.apply(1, &entry(1, replicated("orders", 100, 2, 3)));
        let bytes = s.encode_snapshot(1);
        let mut json: serde_json::Value = serde_json::from_slice(&bytes[1..]).unwrap();
        let obj = json.as_object_mut().unwrap();
        assert!(obj.remove("bootstrap").is_some());
        let mut old = vec![SNAPSHOT_VERSION];
        serde_json::to_writer(&mut old, &json).unwrap();
        let back = MetadataState::decode_snapshot(&old, &offsets()).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.placement().first_voters("orders", 1), [1, 2, 3]);
    }

    #[test]
    fn encoding_round_trips() {
        let p = Proposal {
            origin: 3,
            seq: 42,
            command: Command::CreateTopic {
                name: "orders".into(),
                id: Uuid::from_u128(0xfeed),
                partitions: 12,
                configs: [("cleanup.policy".to_string(), "compact".to_string())].into(),
                first_leader: 2,
                replication_factor: 3,
                assignment: None,
            },
        };
        let b = p.encode().unwrap();
        assert_eq!(b[0], VERSION);
        assert_eq!(Proposal::decode(&b), Ok(p));
    }
}
