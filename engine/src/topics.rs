//! The topic registry: which topics exist, how many partitions each has, and its stable topic id.
//!
//! Persisted as `DATA/topics.json` through `storage::durable_file` (tmp + fsync + rename + dir
//! fsync), so a topic acknowledged as created survives a crash with the same id. Reads are far
//! more common than writes (every Metadata request reads; only admin calls write), so readers take
//! a lock-free snapshot (`ArcSwap`) from any shard, while writers serialise on a mutex and run on
//! a blocking thread (`spawn_blocking`) so the fsync never stalls a reactor.
//!
//! On a node of a cluster the registry is the cluster's metadata log instead
//! (`runtime::metadata_log`, `replication::metadata`): a change is proposed there with the
//! `*_replicated` methods, which wait (asynchronously) until the entry applies on this node; the
//! metadata log installs the applied topics here ([`TopicRegistry::install`]), and `topics.json`
//! is neither read nor written.

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use uuid::Uuid;

pub use coordinator::topics::{
    validate_name, Topic, TopicsSnapshot, CONSUMER_OFFSETS, MAX_NAME_LENGTH,
};

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
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
    /// A node of a cluster: neither 1 nor the number of voters (the message says which are
    /// possible, `replication::metadata::MetadataState::check_replication_factor`).
    #[error("{0}")]
    InvalidReplicationFactor(String),
    /// Kafka's wording (`ReplicationControlManager.createPartitions`).
    #[error("The topic {name} currently has {current} partition(s); {requested} would not be an increase.")]
    NotAnIncrease {
        name: String,
        current: i32,
        requested: i32,
    },
    #[error("could not persist topic registry at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("topic registry at {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// A node of a cluster: the change was not applied in time, or not proposed (the client
    /// gets REQUEST_TIMED_OUT and retries).
    #[error("the cluster's metadata log did not apply the change: {0}")]
    NotAvailable(String),
    /// RemoveRaftVoter of a node that is not one of the cluster's (VOTER_NOT_FOUND).
    #[error("{0}")]
    NotAVoter(String),
    /// RemoveRaftVoter that would strand a partition or leave too few nodes (the message says).
    #[error("{0}")]
    CannotRemove(String),
    /// AddRaftVoter of a node that is a voter already (DUPLICATE_VOTER).
    #[error("{0}")]
    DuplicateVoter(String),
    /// AddRaftVoter of a node that cannot join (the message says; INVALID_REQUEST).
    #[error("{0}")]
    CannotAdd(String),
    /// A reassignment of a partition that does not exist (UNKNOWN_TOPIC_OR_PARTITION).
    #[error("{0}")]
    UnknownPartition(String),
    /// A reassignment to replicas that cannot be (INVALID_REPLICA_ASSIGNMENT).
    #[error("{0}")]
    InvalidAssignment(String),
    /// A cancellation with no reassignment under way (NO_REASSIGNMENT_IN_PROGRESS).
    #[error("{0}")]
    NoReassignment(String),
}

#[derive(Serialize, Deserialize)]
struct OnDisk {
    version: u32,
    topics: Vec<Topic>,
}

/// How long a change proposed to the cluster's metadata log is waited for before the request is
/// answered REQUEST_TIMED_OUT (Kafka's CreateTopics default `timeout_ms` is 30 s; a change that
/// applies later is still applied, and a retry then finds it).
pub const META_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);
/// Changes queued for the metadata log and not yet taken by it: past this, refused.
pub const META_QUEUE: usize = 256;
/// How often a request waiting for its change looks for the outcome.
const META_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// What became of a change given to the cluster's metadata log.
#[derive(Debug)]
pub enum MetaOutcome {
    /// Its entry applied on this node, with this result (the same on every node).
    Applied(Result<(), replication::metadata::MetaError>),
    /// It was not proposed (no leader known yet, too many in flight, too large).
    NotProposed(String),
}

/// A change for the cluster's metadata log and where its outcome goes.
pub struct MetaRequest {
    pub command: replication::metadata::Command,
    pub reply: std::sync::mpsc::SyncSender<MetaOutcome>,
}

/// The changes waiting for the metadata log (shard 0 takes them, `runtime::metadata_log`).
#[derive(Default)]
pub struct MetaInbox {
    pub queue: Mutex<std::collections::VecDeque<MetaRequest>>,
}

impl std::fmt::Debug for MetaInbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaInbox").finish_non_exhaustive()
    }
}

/// A partition of replication factor 1 moving between two nodes ([`TopicRegistry::moving`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// The node that holds its records and serves it until it hands over.
    pub from: u64,
    /// The node copying them, which serves it once it has them all.
    pub to: u64,
    /// The source stopped taking writes: nobody serves the partition until the target has
    /// copied the rest.
    pub handing_over: bool,
}

#[derive(Debug)]
pub struct TopicRegistry {
    path: PathBuf,
    /// Shared with the shards' caches ([`Self::cache`]).
    current: Arc<ArcSwap<TopicsSnapshot>>,
    /// Serialises writers; the guarded value is the authoritative list written to disk.
    writer: Mutex<()>,
    /// Set on a node of a cluster: changes go through the metadata log.
    meta: std::sync::OnceLock<Arc<MetaInbox>>,
    /// On a node of a cluster: the node the metadata log placed each topic partition on, by
    /// topic name (`leaders[p]`), the first voters of each replicated partition's Raft group,
    /// and the cluster's voters now, in `controller.quorum.voters` order (the order a
    /// partition's replicas follow its placed node in, [`Self::replicas`]). Empty on a single
    /// node, which leads every partition.
    placement: ArcSwap<Placement>,
    /// See [`Self::is_current`].
    current_since_start: std::sync::atomic::AtomicBool,
}

/// Where the metadata log put each topic partition (`replication::metadata::MetadataState::placement`).
pub type Placement = replication::metadata::Placement;

impl TopicRegistry {
    /// Load (or create) the registry in `data_dir`, making sure `__consumer_offsets` exists with
    /// `offsets_partitions` partitions.
    pub fn open(data_dir: &Path, offsets_partitions: i32) -> Result<Self, RegistryError> {
        let path = data_dir.join("topics.json");
        let io = |source| RegistryError::Io {
            path: path.clone(),
            source,
        };
        let topics = match storage::durable_file::read(&path).map_err(io)? {
            None => Vec::new(),
            Some(bytes) => {
                let disk: OnDisk =
                    serde_json::from_slice(&bytes).map_err(|e| RegistryError::Corrupt {
                        path: path.clone(),
                        reason: e.to_string(),
                    })?;
                disk.topics
            }
        };
        let reg = Self {
            path: path.clone(),
            current: Arc::new(ArcSwap::from_pointee(TopicsSnapshot::from_topics(topics))),
            writer: Mutex::new(()),
            meta: std::sync::OnceLock::new(),
            placement: ArcSwap::from_pointee(Placement::default()),
            current_since_start: std::sync::atomic::AtomicBool::new(false),
        };
        if reg.snapshot().get(CONSUMER_OFFSETS).is_none() {
            let t = Topic {
                name: CONSUMER_OFFSETS.into(),
                id: new_topic_id(),
                partitions: offsets_partitions,
                internal: true,
                configs: BTreeMap::new(),
                replication_factor: 1,
            };
            reg.commit(|topics| topics.push(t))?;
        }
        Ok(reg)
    }

    /// Make this registry the view of the cluster's metadata log: from now on changes are
    /// proposed through `inbox`, and the topics are what [`Self::install`] puts here.
    pub fn use_metadata_log(
        &self,
        inbox: Arc<MetaInbox>,
        topics: TopicsSnapshot,
        placement: Placement,
    ) {
        assert!(!placement.voters.is_empty(), "a cluster has voters");
        assert!(self.meta.set(inbox).is_ok(), "the metadata log is set once");
        self.install(topics, placement);
    }

    /// On a node of a cluster: the topics the metadata log has applied on this node, and where
    /// it placed their partitions. The placement goes first, so a reader that sees a topic (or
    /// a new partition of one) finds where it lives.
    pub fn install(&self, topics: TopicsSnapshot, placement: Placement) {
        self.placement.store(Arc::new(placement));
        self.current.store(Arc::new(topics));
    }

    /// On a node of a cluster: the metadata log applied here every entry committed before this
    /// node started (`replication::Replica::caught_up`), so the placement is not a state long
    /// past that a restarted node replays. Once true, stays true.
    pub fn is_current(&self) -> bool {
        self.current_since_start
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// See [`Self::is_current`]; by the metadata log.
    pub fn set_current(&self) {
        self.current_since_start
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// On a node of a cluster: the node the metadata log placed `partition` of `topic` on. None
    /// on a single node (which leads everything), for `__consumer_offsets` (its leaders are
    /// elected), and for a partition whose placement this node has not installed yet. Lock-free.
    pub fn placed(&self, topic: &Topic, partition: i32) -> Option<u64> {
        let p = usize::try_from(partition).ok()?;
        self.placement
            .load()
            .leaders
            .get(&topic.name)?
            .get(p)
            .copied()
    }

    /// On a node of a cluster: the preferred leader of `__consumer_offsets` partition
    /// `partition`, where the leaders' rebalancing moves it (`leader.imbalance.check.interval.seconds`):
    /// as the metadata log placed it at the first membership change, else
    /// [`replication::metadata::first_offsets_leader`], as its replicas campaign at their start.
    /// None on a single node.
    pub fn preferred_offsets_leader(&self, partition: i32) -> Option<u64> {
        let p = usize::try_from(partition).ok()?;
        let placement = self.placement.load();
        match placement.leaders.get(CONSUMER_OFFSETS) {
            Some(leaders) => leaders.get(p).copied(),
            None if placement.bootstrap.is_empty() => None,
            None => Some(replication::metadata::first_offsets_leader(
                &placement.bootstrap,
                p,
            )),
        }
    }

    /// On a node of a cluster: the voters the Raft group of `partition` of `topic` started with
    /// (`controller.quorum.voters`, or the voters there were when a node had been removed before
    /// the partition was created), which its replica restarts from. None on a single node.
    pub fn first_voters(&self, topic: &Topic, partition: i32) -> Option<Vec<u64>> {
        let placement = self.placement.load();
        (!placement.bootstrap.is_empty())
            .then(|| placement.first_voters(&topic.name, partition).to_vec())
    }

    /// On a node of a cluster: the nodes holding a replica of `partition` of `topic`, the placed
    /// node (its preferred leader) first. A topic with replica sets of its own (a factor
    /// between 1 and the voters, `replication::metadata::PlacedTopic::replicas`) has them as the
    /// metadata log assigned them; any other, the voters after its leader in voter order,
    /// wrapping, `topic.replication_factor` of them (so with one on every voter, each
    /// partition's list starts at another node, as Kafka's `StripedReplicaPlacer` rotates
    /// them). None on a single node, for `__consumer_offsets` (every voter, from the cluster)
    /// and for a partition whose placement this node has not installed yet. Lock-free.
    pub fn replicas(&self, topic: &Topic, partition: i32) -> Option<Vec<u64>> {
        if topic.internal {
            return None;
        }
        if let Some(set) = self.assigned_replicas(topic, partition) {
            return Some(set);
        }
        let placement = self.placement.load();
        let voters = &placement.voters;
        let first = self.placed(topic, partition)?;
        let at = voters.iter().position(|v| *v == first)?;
        let n = usize::try_from(topic.replication_factor)
            .unwrap_or(1)
            .clamp(1, voters.len());
        Some((0..n).map(|i| voters[(at + i) % voters.len()]).collect())
    }

    /// On a node of a cluster: the replicas the metadata log assigned to `partition` of
    /// `topic`, if the topic has sets of its own (a factor between 1 and the voters): what its
    /// Raft group's leader moves the group to (`Replica::follow_members`), where any other
    /// replicated topic's group follows the cluster's voters. None otherwise. Lock-free.
    pub fn assigned_replicas(&self, topic: &Topic, partition: i32) -> Option<Vec<u64>> {
        let p = usize::try_from(partition).ok()?;
        self.placement
            .load()
            .replicas
            .get(&topic.name)?
            .get(p)
            .cloned()
    }

    /// This node is one of a cluster: changes go through the metadata log, with the
    /// `*_replicated` methods (async: the wait must not hold one of the executor's blocking
    /// threads, which the metadata log's own file operations may need).
    pub fn is_replicated(&self) -> bool {
        self.meta.get().is_some()
    }

    /// Propose `command` to the metadata log and wait (polling, off no thread) until it applies
    /// on this node, or [`META_TIMEOUT`].
    async fn propose(&self, command: replication::metadata::Command) -> Result<(), RegistryError> {
        use replication::metadata::MetaError;
        let inbox = self.meta.get().expect("a cluster node's registry");
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        {
            let mut q = inbox.queue.lock().unwrap_or_else(|p| p.into_inner());
            if q.len() >= META_QUEUE {
                return Err(RegistryError::NotAvailable(format!(
                    "{META_QUEUE} topic changes are already waiting"
                )));
            }
            q.push_back(MetaRequest { command, reply: tx });
        }
        let deadline = std::time::Instant::now() + META_TIMEOUT;
        let outcome = loop {
            match rx.try_recv() {
                Ok(o) => break o,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    break MetaOutcome::NotProposed("the metadata log stopped".into())
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
            }
            if std::time::Instant::now() >= deadline {
                return Err(RegistryError::NotAvailable(format!(
                    "no answer within {} s",
                    META_TIMEOUT.as_secs()
                )));
            }
            glommio::timer::sleep(META_POLL).await;
        };
        match outcome {
            MetaOutcome::Applied(Ok(())) => Ok(()),
            MetaOutcome::NotProposed(why) => Err(RegistryError::NotAvailable(why)),
            MetaOutcome::Applied(Err(e)) => Err(match e {
                MetaError::AlreadyExists(n) => RegistryError::AlreadyExists(n),
                MetaError::InvalidName(n) => RegistryError::InvalidName(n),
                MetaError::Collides(a, b) => RegistryError::Collides(a, b),
                MetaError::Unknown(n) => RegistryError::Unknown(n),
                MetaError::Internal(n) => RegistryError::Internal(n),
                MetaError::InvalidReplicationFactor(m) => {
                    RegistryError::InvalidReplicationFactor(m)
                }
                MetaError::NotAnIncrease {
                    name,
                    current,
                    requested,
                } => RegistryError::NotAnIncrease {
                    name,
                    current,
                    requested,
                },
                e @ MetaError::NotAVoter(..) => RegistryError::NotAVoter(e.to_string()),
                MetaError::CannotRemove(m) => RegistryError::CannotRemove(m),
                e @ MetaError::DuplicateVoter(..) => RegistryError::DuplicateVoter(e.to_string()),
                MetaError::CannotAdd(m) => RegistryError::CannotAdd(m),
                e @ MetaError::UnknownPartition(..) => {
                    RegistryError::UnknownPartition(e.to_string())
                }
                MetaError::InvalidAssignment(m) => RegistryError::InvalidAssignment(m),
                e @ MetaError::NoReassignment(..) => RegistryError::NoReassignment(e.to_string()),
                e => RegistryError::NotAvailable(e.to_string()),
            }),
        }
    }

    /// On a node of a cluster: take node `id` out of the cluster (RemoveRaftVoter), once the
    /// metadata log applied it here. The Raft groups it is a voter of follow on their leaders'
    /// ticks (`Replica::follow_members`).
    pub async fn remove_voter(&self, id: u64) -> Result<(), RegistryError> {
        self.propose(replication::metadata::Command::RemoveVoter { id })
            .await
    }

    /// On a node of a cluster: add node `id`, whose node-to-node address is `addr`, to the
    /// cluster (AddRaftVoter), once the metadata log applied it here. Every Raft group on every
    /// voter then takes it in, as a learner until it caught up (`Replica::follow_members`).
    pub async fn add_voter(&self, id: u64, addr: String) -> Result<(), RegistryError> {
        self.propose(replication::metadata::Command::AddVoter { id, addr })
            .await
    }

    /// On a node of a cluster: a preferred leader election of `partitions` (by topic name),
    /// which every node's leaders of them carry out for `within_ms` after applying it, once the
    /// metadata log applied it here (`api::elect_leaders`).
    pub async fn elect_leaders(
        &self,
        partitions: Vec<(String, Vec<i32>)>,
        within_ms: u32,
    ) -> Result<(), RegistryError> {
        self.propose(replication::metadata::Command::ElectLeaders {
            partitions,
            within_ms,
        })
        .await
    }

    /// On a node of a cluster: move `partition` of `name` to `replicas`, or cancel its
    /// reassignment (None), once the metadata log applied it here (AlterPartitionReassignments).
    pub async fn reassign(
        &self,
        name: &str,
        partition: i32,
        replicas: Option<Vec<u64>>,
    ) -> Result<(), RegistryError> {
        self.propose(replication::metadata::Command::Reassign {
            name: name.into(),
            partition,
            replicas,
        })
        .await
    }

    /// On a node of a cluster, by the leader of `partition` of `topic`'s Raft group: its group is
    /// its set `replicas` now, so its reassignment is over.
    pub async fn reassigned(
        &self,
        name: &str,
        partition: i32,
        replicas: Vec<u64>,
    ) -> Result<(), RegistryError> {
        self.propose(replication::metadata::Command::Reassigned {
            name: name.into(),
            partition,
            replicas,
        })
        .await
    }

    /// On a node of a cluster, for a partition of replication factor 1 moving to another node
    /// (AlterPartitionReassignments): where from, where to, and whether its source stopped
    /// taking writes for the target (`replication::metadata::Command::HandOver`). None for any
    /// other partition. Lock-free.
    pub fn moving(&self, topic: &Topic, partition: i32) -> Option<Move> {
        if topic.internal || topic.replication_factor > 1 {
            return None;
        }
        let placement = self.placement.load();
        if placement.replicas.contains_key(&topic.name) {
            return None;
        }
        let from = *placement
            .reassigning
            .get(&topic.name)?
            .get(&partition)?
            .first()?;
        let to = *placement
            .leaders
            .get(&topic.name)?
            .get(usize::try_from(partition).ok()?)?;
        let handing_over = placement
            .handing_over
            .get(&topic.name)
            .is_some_and(|h| h.contains(&partition));
        Some(Move {
            from,
            to,
            handing_over,
        })
    }

    /// On a node of a cluster: the node that takes `partition` of `topic`'s writes where the
    /// metadata log places it (`Self::placed`), except for a partition of replication factor 1
    /// that is moving: its source until it hands over, then none until its target has every
    /// record (`Self::moving`). None on a single node and where nothing is installed yet.
    pub fn serving(&self, topic: &Topic, partition: i32) -> Option<u64> {
        match self.moving(topic, partition) {
            Some(m) if m.handing_over => None,
            Some(m) => Some(m.from),
            None => self.placed(topic, partition),
        }
    }

    /// On a node of a cluster, by the target of a partition of replication factor 1 moving to
    /// it whose copy caught up: its source is to stop taking writes.
    pub async fn hand_over(
        &self,
        name: &str,
        partition: i32,
        to: u64,
    ) -> Result<(), RegistryError> {
        self.propose(replication::metadata::Command::HandOver {
            name: name.into(),
            partition,
            to,
        })
        .await
    }

    /// On a node of a cluster: `partition` of `topic` is under reassignment. Lock-free.
    pub fn is_reassigning(&self, topic: &Topic, partition: i32) -> bool {
        self.placement
            .load()
            .reassigning
            .get(&topic.name)
            .is_some_and(|r| r.contains_key(&partition))
    }

    /// On a node of a cluster: the partitions under reassignment, by topic name, each with its
    /// replicas before it began (`replication::metadata::PlacedTopic::reassigning`).
    pub fn reassigning(&self) -> std::collections::HashMap<String, BTreeMap<i32, Vec<u64>>> {
        self.placement.load().reassigning.clone()
    }

    /// [`Self::create`] on a node of a cluster, with `replication_factor` replicas per partition
    /// (1 or the number of voters; the metadata log refuses any other).
    ///
    /// `assignment`: each partition's replicas as the client assigned them (CreateTopics'
    /// `assignments`), `partitions` of them, each `replication_factor` long.
    pub async fn create_replicated(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        assignment: Option<Vec<Vec<u64>>>,
    ) -> Result<Arc<Topic>, RegistryError> {
        validate_name(name).map_err(RegistryError::InvalidName)?;
        let id = new_topic_id();
        self.propose(replication::metadata::Command::CreateTopic {
            name: name.into(),
            id,
            partitions,
            configs,
            // Where the round robin of partition leaders starts (Kafka starts it at a random
            // broker); any value, the metadata log takes it modulo the voters.
            first_leader: id.as_u128() as u32,
            replication_factor,
            assignment,
        })
        .await?;
        self.snapshot()
            .get(name)
            .cloned()
            .ok_or_else(|| RegistryError::NotAvailable(format!("{name} was deleted again at once")))
    }

    /// [`Self::delete`] on a node of a cluster.
    pub async fn delete_replicated(&self, name: &str) -> Result<Arc<Topic>, RegistryError> {
        let topic = self.snapshot().get(name).cloned();
        self.propose(replication::metadata::Command::DeleteTopic { name: name.into() })
            .await?;
        topic.ok_or_else(|| RegistryError::Unknown(name.into()))
    }

    /// [`Self::add_partitions`] on a node of a cluster.
    /// `assignments`: the new partitions' replicas as the client assigned them, by topic.
    pub async fn add_partitions_replicated(
        &self,
        changes: &[(String, i32)],
        assignments: BTreeMap<String, Vec<Vec<u64>>>,
    ) -> Result<(), RegistryError> {
        self.propose(replication::metadata::Command::CreatePartitions {
            changes: changes.to_vec(),
            assignments,
        })
        .await
    }

    /// [`Self::set_configs`] on a node of a cluster.
    pub async fn set_configs_replicated(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), RegistryError> {
        self.propose(replication::metadata::Command::SetConfigs {
            name: name.into(),
            configs,
        })
        .await
    }

    /// The current topics; cheap, lock-free, safe from any thread.
    pub fn snapshot(&self) -> Arc<TopicsSnapshot> {
        self.current.load_full()
    }

    /// A cache of the current snapshot for one thread: its `load` costs one relaxed read of the
    /// shared pointer while nothing changed, where [`Self::snapshot`] takes a reference on the
    /// snapshot every shard shares (an atomic on one cache line for all of them).
    pub fn cache(&self) -> arc_swap::Cache<Arc<ArcSwap<TopicsSnapshot>>, Arc<TopicsSnapshot>> {
        arc_swap::Cache::new(self.current.clone())
    }

    /// Create a topic and make it durable before returning. Blocking: call off the reactor.
    pub fn create(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<Topic>, RegistryError> {
        validate_name(name).map_err(RegistryError::InvalidName)?;
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.snapshot();
        if snap.get(name).is_some() {
            return Err(RegistryError::AlreadyExists(name.into()));
        }
        if let Some(other) = snap.colliding(name) {
            return Err(RegistryError::Collides(name.into(), other.name.clone()));
        }
        let topic = Topic {
            name: name.into(),
            id: new_topic_id(),
            partitions,
            internal: false,
            configs,
            replication_factor: 1,
        };
        self.commit_locked(&snap, |topics| topics.push(topic))?;
        Ok(self.snapshot().get(name).cloned().expect("just created"))
    }

    /// Delete a topic by name. Blocking: call off the reactor.
    pub fn delete(&self, name: &str) -> Result<Arc<Topic>, RegistryError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.snapshot();
        let Some(topic) = snap.get(name).cloned() else {
            return Err(RegistryError::Unknown(name.into()));
        };
        if topic.internal {
            return Err(RegistryError::Internal(name.into()));
        }
        self.commit_locked(&snap, |topics| topics.retain(|t| t.name != name))?;
        Ok(topic)
    }

    /// Grow topics to new partition counts, all in one durable write (Kafka adds the partitions
    /// of one CreatePartitions request atomically). Each count must exceed the topic's current
    /// one. Blocking: call off the reactor.
    pub fn add_partitions(&self, changes: &[(String, i32)]) -> Result<(), RegistryError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.snapshot();
        for (name, count) in changes {
            let Some(t) = snap.get(name) else {
                return Err(RegistryError::Unknown(name.clone()));
            };
            if *count <= t.partitions {
                return Err(RegistryError::NotAnIncrease {
                    name: name.clone(),
                    current: t.partitions,
                    requested: *count,
                });
            }
        }
        self.commit_locked(&snap, |topics| {
            for t in topics.iter_mut() {
                if let Some((_, count)) = changes.iter().find(|(n, _)| *n == t.name) {
                    t.partitions = *count;
                }
            }
        })
    }

    /// Replace a topic's configs, durably. Blocking: call off the reactor.
    pub fn set_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), RegistryError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.snapshot();
        if snap.get(name).is_none() {
            return Err(RegistryError::Unknown(name.into()));
        }
        self.commit_locked(&snap, |topics| {
            if let Some(t) = topics.iter_mut().find(|t| t.name == name) {
                t.configs = configs;
            }
        })
    }

    fn commit(&self, change: impl FnOnce(&mut Vec<Topic>)) -> Result<(), RegistryError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.snapshot();
        self.commit_locked(&snap, change)
    }

    /// Write the changed list durably, then publish it. Readers never see a topic that a crash
    /// could take back.
    fn commit_locked(
        &self,
        snap: &TopicsSnapshot,
        change: impl FnOnce(&mut Vec<Topic>),
    ) -> Result<(), RegistryError> {
        // On a node of a cluster the metadata log is the registry (the `*_replicated` methods):
        // a local change here would be overwritten by its next install.
        assert!(
            !self.is_replicated(),
            "a cluster node's topics change through the metadata log"
        );
        let mut topics: Vec<Topic> = snap.iter().map(|t| (**t).clone()).collect();
        change(&mut topics);
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        let bytes = serde_json::to_vec_pretty(&OnDisk {
            version: 1,
            topics: topics.clone(),
        })
        .map_err(|e| RegistryError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        storage::durable_file::write_atomic(&self.path, &bytes).map_err(|source| {
            RegistryError::Io {
                path: self.path.clone(),
                source,
            }
        })?;
        self.current
            .store(Arc::new(TopicsSnapshot::from_topics(topics)));
        Ok(())
    }
}

/// A random topic id. Kafka never hands out the all-zero id (it means "no id" on the wire) nor
/// its reserved metadata topic id (`Uuid.METADATA_TOPIC_ID` = 1); v4 UUIDs are never either.
fn new_topic_id() -> Uuid {
    Uuid::new_v4()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rl-topics-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn names_follow_kafka_rules() {
        assert!(validate_name("orders").is_ok());
        assert!(validate_name("a.b_c-D9").is_ok());
        assert!(validate_name("").is_err());
        assert!(validate_name(".").is_err());
        assert!(validate_name("..").is_err());
        assert!(validate_name("bad name!").is_err());
        assert!(validate_name(&"x".repeat(249)).is_ok());
        assert!(validate_name(&"x".repeat(250)).is_err());
    }

    #[test]
    fn replicas_follow_the_placed_node_in_voter_order() {
        let d = tmpdir("replicas");
        let reg = TopicRegistry::open(&d, 3).unwrap();
        let topic = |name: &str, rf: i16| Topic {
            name: name.into(),
            id: Uuid::new_v4(),
            partitions: 3,
            internal: false,
            configs: BTreeMap::new(),
            replication_factor: rf,
        };
        let (all, one) = (topic("all", 3), topic("one", 1));
        assert_eq!(reg.replicas(&all, 0), None, "a single node");
        let mut placement = Placement {
            leaders: [
                ("all".to_string(), vec![5, 9, 2]),
                ("one".to_string(), vec![9, 2, 5]),
            ]
            .into(),
            voters: vec![2, 5, 9],
            bootstrap: vec![2, 5, 9],
            ..Placement::default()
        };
        reg.use_metadata_log(
            Arc::new(MetaInbox::default()),
            TopicsSnapshot::from_topics([all.clone(), one.clone()]),
            placement.clone(),
        );
        assert_eq!(reg.replicas(&all, 0), Some(vec![5, 9, 2]));
        assert_eq!(reg.replicas(&all, 1), Some(vec![9, 2, 5]), "wraps");
        assert_eq!(reg.replicas(&all, 2), Some(vec![2, 5, 9]));
        assert_eq!(reg.replicas(&all, 3), None, "not placed (yet)");
        assert_eq!(reg.replicas(&one, 0), Some(vec![9]));
        assert_eq!(reg.replicas(&topic("unknown", 3), 0), None);
        let offsets = reg.snapshot().get(CONSUMER_OFFSETS).cloned();
        assert!(
            offsets.is_none(),
            "the metadata log's topics replace the file's"
        );
        let mut internal = topic("all", 3);
        internal.internal = true;
        assert_eq!(reg.replicas(&internal, 0), None);
        assert_eq!(reg.first_voters(&all, 2), Some(vec![2, 5, 9]));
        // Node 9 removed (the metadata log moved its partitions to the next voter, 2, and its
        // replicated topics' factor to 2); partition 3 was created after.
        let mut all2 = all.clone();
        all2.replication_factor = 2;
        all2.partitions = 4;
        placement.leaders.insert("all".into(), vec![5, 2, 2, 5]);
        placement.voters = vec![2, 5];
        placement
            .first_voters
            .insert("all".into(), [(3, vec![2, 5])].into());
        reg.install(TopicsSnapshot::from_topics([all2.clone()]), placement);
        assert_eq!(reg.replicas(&all2, 0), Some(vec![5, 2]));
        assert_eq!(reg.replicas(&all2, 1), Some(vec![2, 5]));
        assert_eq!(
            reg.first_voters(&all2, 2),
            Some(vec![2, 5, 9]),
            "as it started"
        );
        assert_eq!(reg.first_voters(&all2, 3), Some(vec![2, 5]));
        assert_eq!(reg.assigned_replicas(&all2, 0), None, "follows the voters");
        // A topic with sets of its own is read from them, not from the stripe.
        let pairs = topic("pairs", 2);
        let mut placement = reg.placement.load().as_ref().clone();
        placement.leaders.insert("pairs".into(), vec![5, 2, 5]);
        placement
            .replicas
            .insert("pairs".into(), vec![vec![5, 9], vec![2, 5], vec![5, 2]]);
        reg.install(TopicsSnapshot::from_topics([pairs.clone()]), placement);
        assert_eq!(
            reg.replicas(&pairs, 0),
            Some(vec![5, 9]),
            "9 is no voter now"
        );
        assert_eq!(reg.assigned_replicas(&pairs, 2), Some(vec![5, 2]));
        assert_eq!(reg.assigned_replicas(&pairs, 3), None);
        assert_eq!(reg.assigned_replicas(&pairs, -1), None);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn topics_survive_reopen_with_the_same_ids() {
        let d = tmpdir("reopen");
        let reg = TopicRegistry::open(&d, 50).unwrap();
        let offsets = reg.snapshot().get(CONSUMER_OFFSETS).cloned().unwrap();
        assert!(offsets.internal);
        assert_eq!(offsets.partitions, 50);
        let t = reg.create("orders", 6, BTreeMap::new()).unwrap();
        assert!(matches!(
            reg.create("orders", 1, BTreeMap::new()),
            Err(RegistryError::AlreadyExists(_))
        ));
        assert!(matches!(reg.create("ord.ers", 1, BTreeMap::new()), Ok(_)));
        assert!(matches!(
            reg.create("ord_ers", 1, BTreeMap::new()),
            Err(RegistryError::Collides(..))
        ));
        drop(reg);
        let reg = TopicRegistry::open(&d, 50).unwrap();
        let snap = reg.snapshot();
        assert_eq!(snap.get("orders").unwrap().id, t.id);
        assert_eq!(snap.get_by_id(&t.id).unwrap().partitions, 6);
        assert_eq!(snap.get(CONSUMER_OFFSETS).unwrap().id, offsets.id);
        assert!(matches!(
            reg.delete(CONSUMER_OFFSETS),
            Err(RegistryError::Internal(_))
        ));
        reg.delete("orders").unwrap();
        assert!(matches!(
            reg.delete("orders"),
            Err(RegistryError::Unknown(_))
        ));
        drop(reg);
        let reg = TopicRegistry::open(&d, 50).unwrap();
        assert!(reg.snapshot().get("orders").is_none());
        assert_eq!(reg.snapshot().len(), 2);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
