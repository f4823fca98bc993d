//! The cluster's metadata log on a node of a cluster: one more Raft group over every voter, on
//! shard 0, whose entries are topic changes (`replication::metadata`). Every node applies the
//! committed entries in order and installs the resulting topics in its registry
//! (`topics::TopicRegistry::install`), so every node has the same topics with the same ids.
//!
//! A change comes from any node: CreateTopics, DeleteTopics, CreatePartitions, a topic's configs
//! and auto-creation call the registry on a blocking thread, which queues the change in the
//! [`MetaInbox`] and waits; shard 0 takes it from there every [`INBOX_POLL`], proposes it (a
//! follower hands it to the leader, `Replica::propose_or_forward`) and answers the waiting call
//! when the entry applies on this node, with the result every node computed alike. A proposal
//! that may be lost (the leader it went to is no longer leader, or [`RETRY`] passed) is proposed
//! again with the same sequence number, which the log applies once; one not applied by the caller's deadline
//! (`topics::META_TIMEOUT`) is answered REQUEST_TIMED_OUT, and the client retries.
//!
//! Storage is a Raft log like a replicated `__consumer_offsets` partition's
//! (`storage::raft_log`, in `DATA/__cluster_metadata-0/`; the name of KRaft's own metadata log):
//! each entry is a Kafka record batch of one record whose value is the encoded proposal, so
//! `kafka-dump-log` reads it. The log compacts to a snapshot of the state
//! (`MetadataState::encode_snapshot`) every `raft_io::snapshot_min_bytes()` of entries applied; a
//! restart starts from it, and a node that fell behind installs the leader's. Peer messages
//! travel the shard-0 links with the partition number [`METADATA_PARTITION`].
//!
//! Must not: decide a change's result (`MetadataState::apply` does, alike on every node), or
//! answer a change before its entry applied here.

use crate::cluster::{Cluster, NodeId};
use crate::raft_io::{compact, durable, persist};
use crate::runtime::peers::{Links, METADATA_PARTITION};
use crate::topics::{MetaInbox, MetaOutcome, MetaRequest};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use replication::eraftpb::Entry;
use replication::metadata::{Command, MetaError, MetadataState, Proposal};
use replication::{ProposeError, Replica};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::io::GlommioDir;
use storage::log::LogConfig;
use storage::raft_log::RaftLog;
use uuid::Uuid;

/// The directory of the metadata log under the data directory.
pub const METADATA_DIR: &str = "__cluster_metadata-0";
/// How often shard 0 looks for queued changes.
pub const INBOX_POLL: Duration = Duration::from_millis(5);
/// Changes proposed and not applied yet, before new ones are refused.
const MAX_PENDING: usize = 1024;
/// A pending change is forgotten after this (its caller gave up at `topics::META_TIMEOUT`).
const PENDING_TTL: Duration = Duration::from_secs(60);
/// A pending change is proposed again, with the same sequence number, when the leader it went to
/// is no longer the leader (its entry may be lost with it), or when it is still not applied
/// this long after it was (last) proposed (a forwarded proposal also dies with a dropped
/// message). The metadata log applies a repeat only once (`MetaError::Duplicate`); retrying on
/// a leader change rather than on a short timer keeps a slow but healthy leader from collecting
/// repeats in its log.
const RETRY: Duration = Duration::from_millis(3000);
/// Between two proposals of this node's own incarnation while the log holds none
/// ([`MetadataLog::record_incarnation`]); each is also retried as any proposal is ([`RETRY`]).
const INCARNATION_RETRY: Duration = Duration::from_secs(10);

struct Pending {
    reply: std::sync::mpsc::SyncSender<MetaOutcome>,
    /// The entry's bytes, to propose again.
    batch: Vec<u8>,
    /// The term and leader it was last proposed to; None while it waits for a leader.
    proposed_to: Option<(u64, Option<NodeId>)>,
    since: Instant,
    proposed_at: Instant,
}

/// `__consumer_offsets`'s topic id on a cluster: the same on every node, from `cluster.id`, as
/// the metadata log's state starts from it (a single node's registry draws a random one).
pub fn offsets_topic_id(cluster_id: &str) -> Uuid {
    crate::cluster::derived_id(&format!("{cluster_id}/__consumer_offsets"))
}

pub struct MetadataLog {
    node: NodeId,
    replica: RefCell<Replica>,
    /// `__consumer_offsets` as every node's state starts with it (a snapshot must hold it).
    offsets: crate::topics::Topic,
    state: RefCell<MetadataState>,
    /// Bytes of entries applied since the log was last compacted ([`MetadataLog::compact`]).
    since_snapshot: Cell<usize>,
    broker: Arc<crate::broker::Broker>,
    links: Rc<Links>,
    inbox: Arc<MetaInbox>,
    /// Our proposals not applied yet, by sequence number.
    pending: RefCell<HashMap<u64, Pending>>,
    next_seq: Cell<u64>,
    /// When this node last proposed its own incarnation (`Command::Incarnation`).
    incarnation_proposed: Cell<Option<Instant>>,
    doorbell: LocalSender<()>,
    bad_messages: Cell<u64>,
}

impl MetadataLog {
    /// Open the log in `DATA/__cluster_metadata-0/`, make the registry its view and start its
    /// writer. The first voter stands for election at once.
    pub async fn open(
        broker: Arc<crate::broker::Broker>,
        cluster: Arc<Cluster>,
        links: Rc<Links>,
        data_dir: &std::path::Path,
        log_config: LogConfig,
    ) -> anyhow::Result<Rc<MetadataLog>> {
        let dir = GlommioDir::new(data_dir.join(METADATA_DIR))?;
        let (log, hs, snapshot, stored) = RaftLog::open(dir, log_config)
            .await
            .map_err(|e| anyhow::anyhow!("{METADATA_DIR}: opening its Raft log: {e}"))?;
        let voters = cluster.voter_ids();
        let durable =
            durable(hs, snapshot, stored).map_err(|e| anyhow::anyhow!("{METADATA_DIR}: {e}"))?;
        let offsets = crate::topics::Topic {
            name: crate::topics::CONSUMER_OFFSETS.into(),
            id: offsets_topic_id(&cluster.cluster_id),
            partitions: broker.config.offsets_topic_num_partitions,
            internal: true,
            configs: Default::default(),
            replication_factor: 1,
        };
        // The state as of the log's snapshot (the entries after it replay on top), or the
        // first state.
        let state = match &durable.snapshot {
            Some(s) => MetadataState::decode_snapshot(&s.data, &offsets).map_err(|e| {
                anyhow::anyhow!("{METADATA_DIR}: its snapshot at index {}: {e}", s.index)
            })?,
            None => MetadataState::new(&voters, offsets.clone()),
        };
        // Every Raft group started from `controller.quorum.voters` restarts from it (plus the
        // configuration changes in its log), so the list must stay as the cluster began, a
        // removed node included.
        let placement = state.placement();
        let bootstrap = &placement.bootstrap;
        if *bootstrap != voters {
            anyhow::bail!(
                "controller.quorum.voters names nodes {voters:?}; this cluster started with \
                 {bootstrap:?} and must keep that list (a removed node stays in it, RemoveRaftVoter \
                 took it out of the cluster)"
            );
        }
        let mut replica = Replica::restart(cluster.node_id, &voters, durable)
            .map_err(|e| anyhow::anyhow!("{METADATA_DIR}: {e}"))?;
        // The placement it applies is current once it caught up (`TopicRegistry::is_current`).
        replica.track_caught_up();
        // The first node of the cluster now stands at once (a removed one stays quiet).
        if state.voters().first() == Some(&cluster.node_id) {
            let _ = replica.campaign();
        }
        let removed = state.removed();
        cluster.set_members(state.voters(), &removed, state.joined());
        cluster.set_incarnations(state.incarnations());
        if !state.voters().contains(&cluster.node_id) && !removed.contains(&cluster.node_id) {
            // What AddRaftVoter must name (`kafka-metadata-quorum add-controller`, or Admin's
            // addRaftVoter): logged for the operator. (A joined node restarted before its
            // snapshot held its addition logs it too: the entries after the snapshot replay
            // after this.)
            tracing::info!(
                node = cluster.node_id,
                directory_id = %cluster.directory_id(cluster.node_id),
                controller_listener = %cluster.own_addr(),
                "this node waits to be added to the cluster: AddRaftVoter with its node id, \
                 directory id and controller listener"
            );
        }
        // Topics the snapshot's deletions removed (a crash may have come between a deletion
        // and its sweep before that snapshot was taken).
        if let Some(dir) = &broker.data_dir {
            crate::data::sweep_topic_ids(dir, state.deleted_ids());
        }
        let inbox = Arc::new(MetaInbox::default());
        broker
            .topics
            .use_metadata_log(inbox.clone(), state.snapshot(), placement);
        let (tx, rx) = local_channel::new_bounded(1);
        // Sequence numbers only grow, across restarts too (a proposal from before a restart can
        // still apply after it, and must not be taken for a new one).
        let first_seq = (crate::clock::wall_clock_ms().max(0) as u64) * 1000;
        let meta = Rc::new(MetadataLog {
            node: cluster.node_id,
            replica: RefCell::new(replica),
            offsets,
            state: RefCell::new(state),
            since_snapshot: Cell::new(0),
            broker,
            links,
            inbox,
            pending: RefCell::default(),
            next_seq: Cell::new(first_seq),
            incarnation_proposed: Cell::new(None),
            doorbell: tx,
            bad_messages: Cell::new(0),
        });
        glommio::spawn_local(writer(meta.clone(), log, rx)).detach();
        meta.ring();
        Ok(meta)
    }

    fn ring(&self) {
        let _ = self.doorbell.try_send(());
    }

    fn ring_if_work(&self) {
        if self.replica.borrow().has_work() {
            self.ring();
        }
    }

    /// A Raft message from a peer (`peers::serve`, frames of [`METADATA_PARTITION`]).
    pub fn step(&self, bytes: &[u8]) {
        let stepped = replication::decode(bytes)
            .map_err(|e| e.to_string())
            .and_then(|m| self.replica.borrow_mut().step(m).map_err(|e| e.to_string()));
        match stepped {
            Ok(()) => self.ring_if_work(),
            Err(e) => {
                let n = self.bad_messages.get() + 1;
                self.bad_messages.set(n);
                if n % 1000 == 1 {
                    tracing::warn!(error = %e, refused_so_far = n, "metadata log: Raft message refused");
                }
            }
        }
    }

    /// One Raft tick (every `replicated::RAFT_TICK`): proposes again what may have been lost
    /// (see [`RETRY`]), forgets what was given up long ago.
    pub fn raft_tick(&self, now_ms: i64) {
        let mut replica = self.replica.borrow_mut();
        replica.tick(now_ms);
        // A node added to or removed from the cluster joins or leaves the metadata log's group
        // too (its leader changes the group once the change applied here).
        if let Some(cluster) = &self.broker.cluster {
            replica.follow_members(&cluster.members(), &cluster.removed());
            let m = replica.membership();
            let role = replica.role();
            let view = crate::cluster::QuorumView {
                leader: role.leader,
                term: role.term,
                commit: replica.commit_index(),
                last: replica.last_index(),
                voters: m
                    .voters
                    .iter()
                    .chain(&m.outgoing)
                    .copied()
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect(),
                learners: m.learners,
                matched: replica.matched(),
                activity: {
                    // Ticks ago to wall-clock times (a tick is `TICK_MS`; timers run late
                    // rather than early, so these are at worst a little recent).
                    let now = crate::clock::wall_clock_ms();
                    let at = |ago: Option<u64>| {
                        ago.map_or(-1, |t| now - t as i64 * replication::TICK_MS)
                    };
                    replica
                        .activity()
                        .into_iter()
                        .map(|(id, heard, caught_up)| (id, at(heard), at(caught_up)))
                        .collect()
                },
            };
            // The leader tells the other members its view every tick, so DescribeQuorum asked of
            // any node answers as the leader would (a Kafka broker forwards it to the leader).
            if role.leader == Some(self.node) {
                let bytes = view.encode();
                for to in view.voters.iter().chain(&view.learners) {
                    if *to != self.node {
                        self.links
                            .send(*to, crate::runtime::peers::QUORUM_VIEW, &bytes);
                    }
                }
            }
            cluster.set_quorum(view);
        }
        let mut pending = self.pending.borrow_mut();
        pending.retain(|_, p| p.since.elapsed() < PENDING_TTL);
        let role = replica.role();
        let now_leader = (role.term, role.leader);
        for p in pending.values_mut() {
            let due = match p.proposed_to {
                None => role.leader.is_some(),
                Some(to) => to != now_leader || p.proposed_at.elapsed() >= RETRY,
            };
            if due && replica.propose_or_forward(p.batch.clone()).is_ok() {
                p.proposed_at = Instant::now();
                p.proposed_to = Some(now_leader);
            }
        }
        drop((replica, pending));
        self.record_incarnation();
        self.ring_if_work();
    }

    /// This node's data directory in the log (`Command::Incarnation`), so every node, one that
    /// joins later included, refuses another directory under this node id: proposed once the
    /// log here is current and holds none for this node (a voter), again every
    /// [`INCARNATION_RETRY`] until it does. One of another id recorded means this directory is
    /// not the one the cluster knew as this node: it stops (`peers::stop_fenced`).
    fn record_incarnation(&self) {
        if !self.broker.topics.is_current() {
            return; // a restarted node replays first; the record may be there
        }
        let own = self.broker.incarnation;
        let (recorded, voter) = {
            let state = self.state.borrow();
            (
                state.incarnations().get(&self.node).copied(),
                state.voters().contains(&self.node),
            )
        };
        match recorded {
            Some(id) if id == own => {}
            Some(id) => crate::runtime::peers::stop_fenced(&format!(
                "the metadata log recorded node {} as incarnation.id {}, and this data \
                 directory is {}",
                self.node,
                coordinator::base64_uuid(id),
                coordinator::base64_uuid(own)
            )),
            None if voter && !incarnation_record_held_back() => {
                let due = self
                    .incarnation_proposed
                    .get()
                    .is_none_or(|at| at.elapsed() >= INCARNATION_RETRY);
                if due {
                    self.incarnation_proposed.set(Some(Instant::now()));
                    // Nobody waits for the answer: the record shows in the state once applied.
                    let (reply, _) = std::sync::mpsc::sync_channel(1);
                    self.propose(
                        Command::Incarnation {
                            node: self.node,
                            id: own,
                        },
                        reply,
                    );
                }
            }
            None => {} // not added yet, or removed
        }
    }

    /// Propose what the registry queued (every [`INBOX_POLL`]).
    pub fn take_inbox(&self) {
        let queued: Vec<MetaRequest> = {
            let mut q = self.inbox.queue.lock().unwrap_or_else(|p| p.into_inner());
            if q.is_empty() {
                return;
            }
            q.drain(..).collect()
        };
        for MetaRequest { command, reply } in queued {
            self.propose(command, reply);
        }
        self.ring_if_work();
    }

    fn propose(&self, command: Command, reply: std::sync::mpsc::SyncSender<MetaOutcome>) {
        // The caller answers REQUEST_TIMED_OUT (retriable) with the reason.
        let refuse = |why: &str| {
            let _ = reply.try_send(MetaOutcome::NotProposed(why.into()));
        };
        if self.pending.borrow().len() >= MAX_PENDING {
            return refuse("too many topic changes in flight");
        }
        let seq = self.next_seq.get() + 1;
        self.next_seq.set(seq);
        let proposal = Proposal {
            origin: self.node,
            seq,
            command,
        };
        let bytes = match proposal.encode() {
            Ok(b) => b,
            Err(e) => return refuse(&e.to_string()),
        };
        let mut batch = Vec::with_capacity(bytes.len() + storage::batch::BATCH_OVERHEAD + 16);
        storage::batch::encode_batch(
            0,
            crate::clock::wall_clock_ms(),
            &[(None, Some(&bytes[..]))],
            &mut batch,
        );
        // No leader known yet (an election under way): kept, and proposed by the tick's retry
        // once one is; the caller's deadline bounds the wait.
        let now = Instant::now();
        let mut replica = self.replica.borrow_mut();
        let proposed_to = match replica.propose_or_forward(batch.clone()) {
            Ok(_) => Some((replica.role().term, replica.role().leader)),
            Err(ProposeError::NotLeader { .. }) | Err(ProposeError::Dropped) => None,
        };
        drop(replica);
        self.pending.borrow_mut().insert(
            seq,
            Pending {
                reply,
                batch,
                proposed_to,
                since: now,
                proposed_at: now,
            },
        );
    }

    /// Apply committed entries in order: install the topics, answer our own proposals.
    fn apply(&self, committed: Vec<Entry>) {
        if committed.is_empty() {
            return;
        }
        let mut state = self.state.borrow_mut();
        let mut answers = Vec::new();
        let mut deleted = Vec::new();
        for e in committed {
            self.since_snapshot
                .set(self.since_snapshot.get() + e.data.len());
            // An entry whose batch does not hold a proposal is applied as empty: reported as
            // undecodable, alike on every node.
            let value = proposal_bytes(&e.data);
            let applied = state.apply(e.index, value.as_deref().unwrap_or(&[]));
            deleted.extend(applied.deleted);
            if let (Some(e), Some(cluster)) = (&applied.elect, &self.broker.cluster) {
                // Also when a restarted node replays its log: its replicas lead nothing then,
                // and a handover to the preferred replica is what the rebalancing does anyway.
                let until = crate::runtime::replicated::mono_ms() + i64::from(e.within_ms);
                cluster.want_elections(&e.groups, until);
            }
            let duplicate = matches!(applied.result, Err(MetaError::Duplicate(..)));
            if let Err(err) = &applied.result {
                if !duplicate {
                    tracing::debug!(index = e.index, error = %err, "metadata change refused");
                }
            }
            if let Some((origin, seq)) = applied.proposal {
                if origin == self.node && !duplicate {
                    if let Some(p) = self.pending.borrow_mut().remove(&seq) {
                        answers.push((p.reply, applied.result));
                    }
                }
            }
        }
        // Installed before the answers: a caller reads its new topic at once.
        self.publish(&state);
        // Topics these entries deleted (also when a restarted node replays its log): their
        // directories go (the shards close their open logs at their next retention pass, or
        // at once on the node whose DeleteTopics request it was).
        if let Some(dir) = &self.broker.data_dir {
            crate::data::sweep_topic_ids(dir, deleted);
        }
        for (reply, result) in answers {
            let _ = reply.try_send(MetaOutcome::Applied(result));
        }
    }

    /// What the broker reads of `state`: the registry's topics and placement, and the cluster's
    /// members.
    fn publish(&self, state: &MetadataState) {
        self.broker
            .topics
            .install(state.snapshot(), state.placement());
        if let Some(cluster) = &self.broker.cluster {
            cluster.set_members(state.voters(), &state.removed(), state.joined());
            cluster.set_incarnations(state.incarnations());
        }
    }

    /// A leader's snapshot replaced this node's log (it was down or cut off while the others
    /// compacted theirs): its state becomes this node's. Topics deleted in the entries it
    /// replaces are swept from the disk here, as `apply` sweeps each deletion. A proposal of
    /// ours that applied among those entries is not answered: its caller times out
    /// (REQUEST_TIMED_OUT) and retries, as after a lost proposal.
    fn install(&self, snap: &replication::LogSnapshot) {
        let state = match MetadataState::decode_snapshot(&snap.data, &self.offsets) {
            Ok(s) => s,
            // Made durable already: this node cannot go on with a state it cannot read, nor
            // restart into one.
            Err(e) => panic!(
                "{METADATA_DIR}: the leader's snapshot at index {} does not decode ({e}); \
                 stopping this node",
                snap.index
            ),
        };
        self.publish(&state);
        if let Some(dir) = &self.broker.data_dir {
            crate::data::sweep_topic_ids(dir, state.deleted_ids());
        }
        *self.state.borrow_mut() = state;
        self.since_snapshot.set(0);
        tracing::info!(
            index = snap.index,
            "metadata log: leader's snapshot installed"
        );
    }

    /// Compact the log to everything applied once the entries applied since the last
    /// compaction weigh `raft_io::snapshot_min_bytes()`: the snapshot is the state, which is
    /// small (topics, their placement and configs), so a restart or a lagging node replays
    /// from it instead of from the cluster's first entry. None when not due, or when the
    /// state is past what one node-to-node frame carries (`partition::MAX_SNAPSHOT_BYTES`).
    fn snapshot_due(&self) -> Option<replication::LogSnapshot> {
        let replica = self.replica.borrow();
        // Due at once when a node added since the last snapshot needs one (it refuses one
        // whose configuration leaves it out).
        if self.since_snapshot.get() < crate::raft_io::snapshot_min_bytes()
            && !replica.snapshot_wanted()
        {
            return None;
        }
        let index = replica.applied_index();
        if index <= replica.snapshot_index() {
            return None;
        }
        let data = self.state.borrow().encode_snapshot(index);
        if data.len() > replication::partition::MAX_SNAPSHOT_BYTES {
            // It could not travel to a lagging node (a node-to-node frame holds at most that):
            // the log keeps its entries, and the next try waits for another interval.
            self.since_snapshot.set(0);
            tracing::warn!(
                bytes = data.len(),
                "metadata log: its state is too large to snapshot; the log is not compacted"
            );
            return None;
        }
        Some(replication::LogSnapshot {
            index,
            term: replica.term_at(index),
            data,
            conf: Some(replica.conf_at(index)),
        })
    }

    fn send(&self, msgs: &[replication::eraftpb::Message]) {
        for m in msgs {
            self.links
                .send(m.to, METADATA_PARTITION, &replication::encode(m));
        }
    }
}

/// The proposal inside an entry's record batch (the value of its one record).
fn proposal_bytes(batch: &[u8]) -> Option<Vec<u8>> {
    let storage::batch::Peek::Batch(h) = storage::batch::peek_batch(batch, 0, batch.len()).ok()?
    else {
        return None;
    };
    storage::batch::decode_records(batch, &h, 0)
        .ok()?
        .into_iter()
        .next()?
        .value
}

/// The metadata log's writer: one durable write at a time, as a replicated partition's.
async fn writer(meta: Rc<MetadataLog>, mut log: RaftLog<GlommioDir>, doorbell: LocalReceiver<()>) {
    while doorbell.recv().await.is_some() {
        loop {
            let work = meta.replica.borrow_mut().work();
            let Some(work) = work else { break };
            if let Some(role) = &work.role {
                // Logged at info: operators (and test_cluster.py) read who leads the log here.
                tracing::info!(leader = ?role.leader, term = role.term, "metadata log: leader");
            }
            meta.send(&work.send_now);
            let leader = meta.replica.borrow().role().leader.map_or(-1, |l| l as i32);
            if let Err(e) = persist(&mut log, &work, leader).await {
                panic!(
                    "{METADATA_DIR}: the Raft log could not be written ({e}); stopping this node"
                );
            }
            if let Some(snap) = &work.snapshot {
                meta.install(snap);
            }
            meta.apply(work.committed.clone());
            let after = meta.replica.borrow_mut().persisted(&work);
            meta.send(&after.send);
            meta.apply(after.committed);
            if !meta.broker.topics.is_current() && meta.replica.borrow().caught_up() {
                // What this node decides from the placement alone (a move's copy dropped or
                // started) waits for this: a restarted node replays states long past.
                meta.broker.topics.set_current();
            }
            if let Some(snap) = meta.snapshot_due() {
                // Durable before the replica drops the entries it covers; this task is the
                // log's only writer.
                if let Err(e) = compact(&mut log, &snap).await {
                    panic!(
                        "{METADATA_DIR}: the Raft snapshot could not be written ({e}); stopping \
                         this node"
                    );
                }
                meta.replica.borrow_mut().compact(snap.index, snap.data);
                meta.since_snapshot.set(0);
                tracing::debug!(index = snap.index, "metadata log compacted");
            }
        }
    }
}

/// A test failpoint: with `RINGLEADER_FAILPOINT_NO_INCARNATION_RECORD` set, this node never
/// proposes its own incarnation record, standing for a node lost before its record applied (the
/// first second or so of a cluster; `tests/clients/test_cluster.py` checks that its peers still
/// refuse its successor). Read once; unset in production, where this costs one branch.
fn incarnation_record_held_back() -> bool {
    static HELD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HELD.get_or_init(|| std::env::var_os("RINGLEADER_FAILPOINT_NO_INCARNATION_RECORD").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offsets_topic_id_is_one_per_cluster() {
        let a = offsets_topic_id("rl-demo");
        assert_eq!(a, offsets_topic_id("rl-demo"));
        assert_ne!(a, offsets_topic_id("rl-demo2"));
        assert!(!a.is_nil());
        assert_eq!(a.get_version_num(), 4);
    }

    #[test]
    fn a_proposal_round_trips_through_its_record_batch() {
        let bytes = Proposal {
            origin: 2,
            seq: 9,
            command: Command::DeleteTopic { name: "t".into() },
        }
        .encode()
        .unwrap();
        let mut batch = Vec::new();
        storage::batch::encode_batch(0, 1, &[(None, Some(&bytes[..]))], &mut batch);
        assert_eq!(proposal_bytes(&batch), Some(bytes));
        assert_eq!(proposal_bytes(b"garbage"), None);
        assert_eq!(proposal_bytes(&[]), None);
    }
}
