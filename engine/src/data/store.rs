//! The data path's shard side: each topic partition's log, its writer task (group commit) and
//! the operations of [`super::DataOp`], run by the shard that owns the partition.

use super::partition::{reopen_after_failed_flush, DataPartition};
use super::replica::ClusterCtx;
use super::{AppendOutcome, DataOp, DataReply, PartitionRead, ReadItem};
use crate::broker::Broker;
use crate::oneshot::Notify;
use crate::topics::Topic;
use bytes::Bytes;
use kafka_protocol::ResponseError;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;
use storage::io::GlommioDir;
use storage::topic_log::{AppendError, ProducerState, Read, Staged, TopicLog, TopicLogConfig};
use uuid::Uuid;

/// File Kafka writes in every partition directory naming the topic id it belongs to.
const PARTITION_METADATA: &str = "partition.metadata";

/// Effective per-topic settings: the topic's overrides, else the broker's defaults.
#[derive(Debug, Clone, Copy)]
struct TopicSettings {
    segment_bytes: u64,
    max_message_bytes: usize,
    retention_ms: i64,
    retention_bytes: i64,
    log_append_time: bool,
}

impl TopicSettings {
    fn of(topic: &Topic, broker: &Broker) -> Self {
        let c = &broker.config;
        let get = |k: &str| topic.configs.get(k).and_then(|v| v.parse::<i64>().ok());
        Self {
            segment_bytes: get("segment.bytes")
                .unwrap_or(c.log_segment_bytes as i64)
                .max(14) as u64,
            max_message_bytes: get("max.message.bytes")
                .unwrap_or(c.message_max_bytes as i64)
                .max(0) as usize,
            retention_ms: get("retention.ms").unwrap_or(c.log_retention_ms),
            retention_bytes: get("retention.bytes").unwrap_or(c.log_retention_bytes),
            log_append_time: topic
                .configs
                .get("message.timestamp.type")
                .unwrap_or(&c.log_message_timestamp_type)
                == "LogAppendTime",
        }
    }
    fn log_config(&self) -> TopicLogConfig {
        TopicLogConfig {
            segment_bytes: self.segment_bytes,
            max_message_bytes: self.max_message_bytes,
            ..TopicLogConfig::default()
        }
    }
}

enum Slot {
    Opening(Rc<Notify>),
    Ready(Rc<DataPartition>),
}

/// The topic partitions one shard owns.
pub struct DataStore {
    broker: Arc<Broker>,
    shard: usize,
    data_dir: PathBuf,
    parts: RefCell<hashbrown::HashMap<(Uuid, i32), Slot>>,
    /// Set on a node of a cluster once its node-to-node links are up (`set_cluster`).
    cluster: RefCell<Option<Rc<ClusterCtx>>>,
    /// The topics snapshot whose replicated partitions were last opened (`raft_tick`).
    opened_for: Cell<u64>,
    /// The topics snapshot after which this shard last dropped copies of partitions moved off
    /// this node (`raft_tick`, `Self::drop_moved_off`).
    dropped_for: Cell<u64>,
    /// Raft ticks so far (`raft_tick`), which pace the leaders' word to the nodes without a
    /// replica.
    ticks: Cell<u64>,
    /// Per partition led here with replicas on some of the nodes: the term in which this node
    /// last told the others it leads (an entry goes when the partition closes or stops leading).
    hinted: RefCell<hashbrown::HashMap<(Uuid, i32), u64>>,
    /// Per partition under reassignment led here whose group reached its new set: when (mono
    /// ms) this node last proposed that the reassignment is over (`raft_tick`), so it asks once
    /// a second at most until the metadata log applied it.
    finishing: RefCell<hashbrown::HashMap<(Uuid, i32), i64>>,
    /// Partitions of replication factor 1 moving to this node whose copy runs
    /// (`Self::copy_in`), one task each.
    movers: RefCell<hashbrown::HashSet<(Uuid, i32)>>,
}

fn storage_error(e: impl std::fmt::Display) -> i16 {
    tracing::error!(error = %e, "topic data storage error");
    ResponseError::KafkaStorageError.code()
}

impl DataStore {
    pub fn new(broker: Arc<Broker>, shard: usize) -> Rc<Self> {
        let data_dir = broker.data_dir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("ringleader-{}", std::process::id()))
        });
        Rc::new(Self {
            broker,
            shard,
            data_dir,
            parts: RefCell::default(),
            cluster: RefCell::default(),
            opened_for: Cell::new(0),
            dropped_for: Cell::new(0),
            ticks: Cell::new(0),
            hinted: RefCell::default(),
            finishing: RefCell::default(),
            movers: RefCell::default(),
        })
    }

    /// This node is one of a cluster: replicated topic partitions send their Raft messages
    /// through `ctx.links` and publish their leaders to `ctx.cluster`.
    pub fn set_cluster(&self, ctx: ClusterCtx) {
        *self.cluster.borrow_mut() = Some(Rc::new(ctx));
    }

    /// On a node of a cluster, a partition of replication factor 1 this node does not serve
    /// (`TopicRegistry::serving`): it takes no writes here (`DataPartition::stopped`).
    fn stops(&self, topic: &Topic, partition: i32) -> bool {
        !topic.internal
            && topic.replication_factor <= 1
            && self.broker.topics.is_replicated()
            && self.broker.topics.serving(topic, partition) != Some(self.broker.node_id as u64)
    }

    /// Close this node's copy of `partition` of `topic` if open, and remove its directory if it
    /// belongs to the topic: a copy a move's target gives up, or a source's once its target took
    /// over. Only for a partition of replication factor 1 this node does not serve, and only if
    /// `still` holds once no open of it is under way (checked in the same step as the removal:
    /// the placement may have changed while it waited).
    async fn drop_copy(&self, topic: &Topic, partition: i32, still: impl Fn(&Self) -> bool) {
        let key = (topic.id, partition);
        loop {
            let wait = match self.parts.borrow().get(&key) {
                Some(Slot::Opening(n)) => n.register(),
                _ => break,
            };
            wait.wait().await;
        }
        if !still(self) {
            return;
        }
        self.close(key);
        let path = partition_dir(&self.data_dir, &topic.name, partition);
        if remove_if_ours(&path, topic.id) {
            tracing::info!(topic = %topic.name, partition, "dropped this node's copy of a partition served elsewhere");
        }
    }

    /// Take the open partition `key` out of this shard and stop its tasks (its writer ends, its
    /// waiters wake); returned if it was open.
    fn close(&self, key: (Uuid, i32)) -> Option<Rc<DataPartition>> {
        let Some(Slot::Ready(p)) = self.parts.borrow_mut().remove(&key) else {
            return None;
        };
        p.closed.set(true);
        p.kick.notify_all();
        p.changed.notify_all();
        Some(p)
    }

    /// Whether this node holds no copy of `partition` of `topic` that the placement needs: the
    /// partition (of replication factor 1) is not served here, and no move has this node as
    /// its source or target.
    fn copy_unneeded(&self, topic: &Topic, partition: i32) -> bool {
        let me = self.broker.node_id as u64;
        self.broker.topics.serving(topic, partition) != Some(me)
            && self
                .broker
                .topics
                .moving(topic, partition)
                .is_none_or(|m| m.from != me && m.to != me)
    }

    /// A move's copy ended (`Self::copy_in`): served here if the move ended here, dropped
    /// otherwise (cancelled, sent elsewhere).
    async fn end_mover(&self, topic: &Topic, partition: i32) {
        let key = (topic.id, partition);
        // A deleted topic's partitions go with it (`Self::forget_deleted`).
        if self.broker.topics.snapshot().get_by_id(&topic.id).is_none() {
            self.movers.borrow_mut().remove(&key);
            return;
        }
        let not_here = |me_: &Self| me_.copy_unneeded(topic, partition);
        if not_here(self) {
            self.drop_copy(topic, partition, not_here).await;
        } else if let Some(Slot::Ready(p)) = self.parts.borrow().get(&key) {
            p.stopped.set(self.stops(topic, partition));
            tracing::info!(topic = %topic.name, partition, "moved a partition here: serving it");
        }
        self.movers.borrow_mut().remove(&key);
    }

    /// The target's side of a move (`super::moving`): copy `partition` of `topic` from its
    /// source until the move is over, then serve it (the move ended here) or drop the copy
    /// (cancelled or sent elsewhere). One runs per partition at a time (`Self::start_movers`).
    async fn copy_in(self: Rc<Self>, ctx: Rc<ClusterCtx>, topic: Arc<Topic>, partition: i32) {
        use super::moving::{wait_answer, ANSWER_WAIT, CAUGHT_UP_PAUSE, PROPOSE_EVERY_MS};
        use replication::topic::{encode_seed, SeedMsg};
        let broker = self.broker.clone();
        let me = broker.node_id as u64;
        let name = &topic.name;
        self.drop_copy(&topic, partition, |_| true).await;
        tracing::info!(topic = %name, partition, "moving a partition here: copying it from its source");
        let (mut proposed_hand_over, mut proposed_end) = (i64::MIN / 2, i64::MIN / 2);
        while let Some(m) = broker.topics.moving(&topic, partition) {
            if m.to != me || broker.topics.snapshot().get_by_id(&topic.id).is_none() {
                break;
            }
            let p = match self.partition(&topic, partition).await {
                Ok(p) => p,
                Err(code) => {
                    tracing::warn!(topic = %name, partition, code, "moving a partition: could not open its copy");
                    glommio::timer::sleep(ANSWER_WAIT).await;
                    continue;
                }
            };
            // It serves nothing before the move is over (`Broker::serves` says so too).
            p.stopped.set(true);
            let offset = p.log.borrow().next_offset();
            p.moved.borrow_mut().take();
            let ask = encode_seed(&SeedMsg::MoveRequest { from: offset });
            (ctx.seed)(m.from, topic.id, partition, &ask);
            let Some(c) = wait_answer(&p).await else {
                continue;
            };
            if c.from != offset {
                continue; // an answer to an earlier request
            }
            if offset > c.end {
                // Not a prefix of the source's log (the source lost records it had not
                // acknowledged, or this copy is not what it looks like): start again.
                tracing::warn!(topic = %name, partition, offset, source_end = c.end, "moving a partition: the copy runs past its source; copying again");
                self.drop_copy(&topic, partition, |_| true).await;
                continue;
            }
            if !c.batches.is_empty() || c.log_start > offset {
                match TopicLog::append_seed(&p.log, c.log_start, &c.batches).await {
                    Ok(s) => {
                        if let (Err(e), false) = (&s.appended, c.batches.is_empty()) {
                            tracing::debug!(topic = %name, partition, why = %e.message(), "moving a partition: a chunk that does not follow the copy; asked again");
                            continue;
                        }
                        p.changed.notify_all();
                    }
                    Err(e) => {
                        // What was flushed is durable; the copy is asked for from its end again.
                        tracing::warn!(topic = %name, partition, error = %e, "moving a partition: writing the copy failed");
                        glommio::timer::sleep(ANSWER_WAIT).await;
                        continue;
                    }
                }
            }
            if p.log.borrow().next_offset() < c.end {
                continue; // more to copy: ask at once
            }
            // Caught up with the source as it was. Each step is proposed once a second at most
            // until it applied here; in between (and while the source has not applied the
            // hand-over, or still writes what it staged before it) the target asks again shortly.
            let now = crate::raft_io::mono_ms();
            if c.sealed && now - proposed_end >= PROPOSE_EVERY_MS {
                // Everything the source will ever have is here, durable: over.
                proposed_end = now;
                if let Err(e) = broker.topics.reassigned(name, partition, vec![me]).await {
                    tracing::info!(topic = %name, partition, error = %e, "moving a partition: could not record its end yet");
                }
            } else if !c.sealed && !m.handing_over && now - proposed_hand_over >= PROPOSE_EVERY_MS {
                proposed_hand_over = now;
                if let Err(e) = broker.topics.hand_over(name, partition, me).await {
                    tracing::info!(topic = %name, partition, error = %e, "moving a partition: could not ask its source to hand over yet");
                }
            } else {
                glommio::timer::sleep(CAUGHT_UP_PAUSE).await;
            }
        }
        self.end_mover(&topic, partition).await;
    }

    /// Start copying each partition of replication factor 1 moving to this node that this shard
    /// owns and is not copying yet.
    fn start_movers(self: &Rc<Self>, ctx: &Rc<ClusterCtx>) {
        let placement = self.broker.topics.reassigning();
        if placement.is_empty() {
            return;
        }
        let me = self.broker.node_id as u64;
        let snap = self.broker.topics.snapshot();
        for (name, parts) in placement {
            let Some(topic) = snap.get(&name) else {
                continue;
            };
            for &p in parts.keys() {
                let key = (topic.id, p);
                if super::owner_shard(&topic.name, p, ctx.shards) != self.shard
                    || self.movers.borrow().contains(&key)
                    || self
                        .broker
                        .topics
                        .moving(topic, p)
                        .is_none_or(|m| m.to != me)
                {
                    continue;
                }
                self.movers.borrow_mut().insert(key);
                let (me, ctx, topic) = (self.clone(), ctx.clone(), topic.clone());
                glommio::spawn_local(me.copy_in(ctx, topic, p)).detach();
            }
        }
    }

    /// Drop this shard's copies of partitions of replication factor 1 served by another node
    /// and in no move with this node: a move's source once its target took over (at once, or
    /// after a restart).
    async fn drop_moved_off(self: &Rc<Self>, snap: &crate::topics::TopicsSnapshot, shards: usize) {
        for topic in snap
            .iter()
            .filter(|t| !t.internal && t.replication_factor <= 1)
        {
            for p in 0..topic.partitions {
                // Served elsewhere (not handing over, nor a placement not installed yet), in no
                // move with this node, and not being copied here.
                let drop = |me_: &Self| {
                    !me_.movers.borrow().contains(&(topic.id, p))
                        && me_.broker.topics.serving(topic, p).is_some()
                        && me_.copy_unneeded(topic, p)
                };
                if super::owner_shard(&topic.name, p, shards) != self.shard || !drop(self) {
                    continue;
                }
                let open = self.parts.borrow().contains_key(&(topic.id, p));
                if open || partition_dir(&self.data_dir, &topic.name, p).exists() {
                    self.drop_copy(topic, p, drop).await;
                }
            }
        }
    }

    /// The replicas of `partition` of `topic` when it is replicated over the cluster and this
    /// node holds one (this shard owns it), else None.
    fn raft_voters(&self, topic: &Topic, partition: i32) -> Option<Vec<u64>> {
        if topic.internal || topic.replication_factor <= 1 {
            return None;
        }
        self.cluster.borrow().as_ref()?;
        let voters = self.broker.topics.replicas(topic, partition)?;
        voters
            .contains(&(self.broker.node_id as u64))
            .then_some(voters)
    }

    /// One Raft tick for every replicated partition open here (elections, heartbeats), and the
    /// opening of the replicated partitions this shard owns that are not open yet (a new topic
    /// or partition, or the node's start): a replica must take part in its group's elections
    /// before any client asks for the partition.
    pub fn raft_tick(self: &Rc<Self>) {
        let Some(ctx) = self.cluster.borrow().clone() else {
            return;
        };
        let snap = self.broker.topics.snapshot();
        if snap.id() != self.opened_for.get() {
            self.opened_for.set(snap.id());
            // Leaders' words about partitions of topics deleted since (this node had no replica
            // of them, so nothing else forgets them).
            ctx.cluster
                .retain_topic_hints(|id| snap.get_by_id(&id).is_some());
            for topic in snap
                .iter()
                .filter(|t| !t.internal && t.replication_factor > 1)
            {
                for p in 0..topic.partitions {
                    // Only a replica opens it: a partition of a topic with fewer replicas than
                    // nodes has no files on the others (`Broker::serves` sends its clients to
                    // the leader).
                    if super::owner_shard(&topic.name, p, ctx.shards) != self.shard
                        || self.parts.borrow().contains_key(&(topic.id, p))
                        || self.raft_voters(topic, p).is_none()
                    {
                        continue;
                    }
                    let (me, topic) = (self.clone(), topic.clone());
                    glommio::spawn_local(async move {
                        // A failed open is tried again by the next peer message for the
                        // partition (`step`), so a replica that stays silent is visible here.
                        if let Err(code) = me.partition(&topic, p).await {
                            tracing::warn!(topic = %topic.name, partition = p, code, "could not open a replicated partition");
                        }
                    })
                    .detach();
                }
            }
        }
        let now = crate::raft_io::mono_ms();
        let (members, removed) = (ctx.cluster.members(), ctx.cluster.removed());
        let tick = self.ticks.get() + 1;
        self.ticks.set(tick);
        let mut hinted = self.hinted.borrow_mut();
        let mut still_leading = hashbrown::HashSet::new();
        // Copies are started and dropped from a placement that is current, never from a state
        // long past that the metadata log replays after a restart (`TopicRegistry::is_current`).
        if self.broker.topics.is_current() {
            self.start_movers(&ctx);
            if snap.id() != self.dropped_for.get() {
                self.dropped_for.set(snap.id());
                let (me, snap, shards) = (self.clone(), snap.clone(), ctx.shards);
                glommio::spawn_local(async move { me.drop_moved_off(&snap, shards).await })
                    .detach();
            }
        }
        for slot in self.parts.borrow().values() {
            if let Slot::Ready(p) = slot {
                if p.raft.is_none() && !self.movers.borrow().contains(&(p.topic.id, p.partition)) {
                    p.stopped.set(self.stops(&p.topic, p.partition));
                }
                if let Some(raft) = &p.raft {
                    let mut raft = raft.borrow_mut();
                    raft.replica_mut().tick(now);
                    let assigned = self.broker.topics.assigned_replicas(&p.topic, p.partition);
                    // A leader of a partition with replicas on some of the nodes tells the
                    // others, so their Metadata names it (`runtime::peers::TOPIC_LEADER`): at
                    // once in a new term, then every second.
                    if let Some(set) = assigned.as_ref().filter(|_| raft.serving()) {
                        let key = (p.topic.id, p.partition);
                        let term = raft.role().term;
                        still_leading.insert(key);
                        if hinted.get(&key) != Some(&term)
                            || tick.is_multiple_of(crate::cluster::TOPIC_HINT_EVERY_TICKS)
                        {
                            hinted.insert(key, term);
                            for to in members.iter().filter(|n| !set.contains(n)) {
                                (ctx.hint)(*to, p.topic.id, p.partition, &term.to_be_bytes());
                            }
                        }
                    }
                    // A node added to the cluster joins the partition's group, a removed one
                    // leaves it. A partition with replicas of its own follows its set: a node
                    // that took a removed one's place, or that a reassignment names, joins, and
                    // one the set no longer names leaves (it keeps its log: moved back later, it
                    // returns as a lagging replica). A topic deleted since is left alone.
                    match assigned {
                        Some(set) => {
                            raft.replica_mut().follow_set(&set, &removed);
                            self.finish_reassignment(&p.topic, p.partition, &raft, set, now);
                        }
                        None if snap.get_by_id(&p.topic.id).is_some() => {
                            raft.replica_mut().follow_members(&members, &removed);
                        }
                        None => {}
                    }
                    let view = crate::cluster::GroupView::of(&raft.replica().membership());
                    ctx.cluster.set_group(p.topic.id, p.partition, view);
                    if raft.replica().has_work() {
                        p.kick.notify_all();
                    }
                }
            }
        }
        hinted.retain(|k, _| still_leading.contains(k));
    }

    /// On the serving leader of a partition under reassignment whose group settled on its new
    /// set `set` (its voters exactly, no learner, no change under way): tell the metadata log the
    /// reassignment is over (`Command::Reassigned`), once a second at most until it applied.
    fn finish_reassignment(
        &self,
        topic: &Arc<Topic>,
        partition: i32,
        raft: &replication::topic::TopicReplica,
        set: Vec<u64>,
        now: i64,
    ) {
        let key = (topic.id, partition);
        if !self.broker.topics.is_reassigning(topic, partition) {
            self.finishing.borrow_mut().remove(&key);
            return;
        }
        let m = raft.replica().membership();
        let mut voters = m.voters.clone();
        voters.sort_unstable();
        let mut want = set.clone();
        want.sort_unstable();
        if !raft.serving()
            || !raft.replica().membership_settled()
            || !m.learners.is_empty()
            || voters != want
        {
            return;
        }
        let mut finishing = self.finishing.borrow_mut();
        if finishing.get(&key).is_some_and(|at| now - at < 1_000) {
            return;
        }
        finishing.insert(key, now);
        let (broker, name) = (self.broker.clone(), topic.name.clone());
        glommio::spawn_local(async move {
            if let Err(e) = broker.topics.reassigned(&name, partition, set).await {
                tracing::info!(topic = %name, partition, error = %e, "could not record the end of a reassignment yet");
            }
        })
        .detach();
    }

    /// The replicated partition a peer's message is for, opened if need be; None if this node
    /// holds no replica of it. A replica open here goes on hearing its group after this node was
    /// removed from the cluster: a leader handing over (`Replica::follow_members`) needs its
    /// peers' answers.
    async fn replica_for_peer(
        self: &Rc<Self>,
        topic: &Arc<Topic>,
        partition: i32,
    ) -> Option<(Rc<DataPartition>, Rc<ClusterCtx>)> {
        let open_here = matches!(
            self.parts.borrow().get(&(topic.id, partition)),
            Some(Slot::Ready(p)) if p.raft.is_some()
        );
        if !open_here && self.raft_voters(topic, partition).is_none() {
            return None;
        }
        let p = self.partition(topic, partition).await.ok()?;
        let ctx = self.cluster.borrow().clone()?;
        Some((p, ctx))
    }

    /// Kafka's preferred leader election, for the replicated topic partitions open here that
    /// this node leads and `wanted` names (by topic id and partition): each hands its
    /// leadership to the node the metadata log placed it on (`Topics::placed`) when that
    /// replica is a voter in sync. Returns how many handovers started.
    pub fn hand_to_preferred(&self, wanted: impl Fn(uuid::Uuid, i32) -> bool) -> usize {
        let mut started = 0;
        for slot in self.parts.borrow().values() {
            let Slot::Ready(p) = slot else { continue };
            let Some(raft) = &p.raft else { continue };
            if !wanted(p.topic.id, p.partition) {
                continue;
            }
            let Some(to) = self.broker.topics.placed(&p.topic, p.partition) else {
                continue;
            };
            if raft.borrow_mut().replica_mut().hand_to_preferred(to) {
                started += 1;
                p.kick.notify_all();
            }
        }
        started
    }

    /// A peer's Raft message for a replicated partition this shard owns.
    async fn step(self: &Rc<Self>, topic: Arc<Topic>, partition: i32, message: Vec<u8>) {
        if let Some((p, ctx)) = self.replica_for_peer(&topic, partition).await {
            super::replica::step(&ctx, &p, &message);
        }
    }

    /// A peer's re-seeding message for a replicated partition this shard owns (a request for
    /// records this replica holds, or a chunk of them for this replica).
    async fn seed(self: &Rc<Self>, topic: Arc<Topic>, partition: i32, from: u64, message: Vec<u8>) {
        if !topic.internal && topic.replication_factor <= 1 {
            return self.move_message(topic, partition, from, &message).await;
        }
        if let Some((p, ctx)) = self.replica_for_peer(&topic, partition).await {
            super::replica::seed(&ctx, &p, from, &message).await;
        }
    }

    /// A message of a move of a partition of replication factor 1 (`super::moving`) from node
    /// `from`: a request answered only by the move's source, a chunk taken only by the move's
    /// target while it copies. Anything else is dropped.
    async fn move_message(
        self: &Rc<Self>,
        topic: Arc<Topic>,
        partition: i32,
        from: u64,
        message: &[u8],
    ) {
        let Some(ctx) = self.cluster.borrow().clone() else {
            return;
        };
        let me = self.broker.node_id as u64;
        let Some(m) = self.broker.topics.moving(&topic, partition) else {
            return;
        };
        match replication::topic::decode_seed(message) {
            Ok(replication::topic::SeedMsg::MoveRequest { from: offset })
                if m.from == me && m.to == from =>
            {
                let Ok(p) = self.partition(&topic, partition).await else {
                    return;
                };
                // Set in the same step as the answer reads the log: once set, nothing stages.
                p.stopped.set(self.stops(&topic, partition));
                super::moving::answer(&ctx, &p, from, offset).await;
            }
            Ok(replication::topic::SeedMsg::MoveChunk {
                from: offset,
                log_start,
                end,
                sealed,
                batches,
            }) if m.to == me && m.from == from => {
                if let Some(Slot::Ready(p)) = self.parts.borrow().get(&(topic.id, partition)) {
                    super::moving::received(
                        p,
                        super::partition::MovedChunk {
                            from: offset,
                            log_start,
                            end,
                            sealed,
                            batches: batches.to_vec(),
                        },
                    );
                }
            }
            Ok(_) => {}
            Err(why) => {
                tracing::warn!(topic = %topic.name, partition, from, %why, "a move message does not decode; dropped");
            }
        }
    }

    pub fn execute(self: &Rc<Self>, op: DataOp) -> Pin<Box<dyn Future<Output = DataReply>>> {
        let me = self.clone();
        Box::pin(async move {
            match op {
                DataOp::Append {
                    topic,
                    partition,
                    records,
                } => DataReply::Append(me.append(topic, partition, records).await),
                DataOp::Read { items } => {
                    let mut out = Vec::with_capacity(items.len());
                    for it in items {
                        out.push(me.read(&it).await);
                    }
                    DataReply::Read(out)
                }
                DataOp::Wait { items, timeout_ms } => {
                    me.wait(items, timeout_ms).await;
                    DataReply::Waited
                }
                DataOp::ListOffset {
                    topic,
                    partition,
                    timestamp,
                    read_committed,
                } => DataReply::Offset(
                    me.list_offset(topic, partition, timestamp, read_committed)
                        .await,
                ),
                DataOp::WriteMarker {
                    topic,
                    partition,
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                } => DataReply::Marker(
                    me.write_marker(
                        topic,
                        partition,
                        producer_id,
                        producer_epoch,
                        commit,
                        coordinator_epoch,
                    )
                    .await,
                ),
                DataOp::DeleteRecords {
                    topic,
                    partition,
                    offset,
                    timeout_ms,
                } => DataReply::Deleted(
                    me.delete_records(topic, partition, offset, timeout_ms)
                        .await,
                ),
                DataOp::Producers { items } => {
                    let mut out = Vec::with_capacity(items.len());
                    for (topic, partition) in items {
                        out.push(me.producers(&topic, partition).await);
                    }
                    DataReply::Producers(out)
                }
                DataOp::Forget => {
                    me.forget_deleted();
                    DataReply::Forgotten
                }
                DataOp::Raft {
                    topic,
                    partition,
                    message,
                } => {
                    me.step(topic, partition, message).await;
                    DataReply::Stepped
                }
                DataOp::Seed {
                    topic,
                    partition,
                    from,
                    message,
                } => {
                    me.seed(topic, partition, from, message).await;
                    DataReply::Stepped
                }
            }
        })
    }

    /// The open partition, opening it (and waiting for a concurrent open) as needed.
    async fn partition(
        self: &Rc<Self>,
        topic: &Arc<Topic>,
        partition: i32,
    ) -> Result<Rc<DataPartition>, i16> {
        let key = (topic.id, partition);
        loop {
            let wait = match self.parts.borrow().get(&key) {
                Some(Slot::Ready(p)) => return Ok(p.clone()),
                Some(Slot::Opening(n)) => Some(n.register()),
                None => None,
            };
            match wait {
                Some(w) => w.wait().await,
                None => break,
            }
        }
        let opening = Rc::new(Notify::default());
        self.parts
            .borrow_mut()
            .insert(key, Slot::Opening(opening.clone()));
        let result = self.open_partition(topic, partition).await;
        let mut parts = self.parts.borrow_mut();
        let out = match result {
            Ok(p) => {
                parts.insert(key, Slot::Ready(p.clone()));
                Ok(p)
            }
            Err(code) => {
                parts.remove(&key);
                Err(code)
            }
        };
        drop(parts);
        opening.notify_all();
        out
    }

    async fn open_partition(
        self: &Rc<Self>,
        topic: &Arc<Topic>,
        partition: i32,
    ) -> Result<Rc<DataPartition>, i16> {
        // Never open the coordinator's own directories as a topic log: its recovery would
        // truncate segments the coordinator is writing.
        if topic.internal {
            return Err(ResponseError::UnknownTopicOrPartition.code());
        }
        let settings = TopicSettings::of(topic, &self.broker);
        let path = partition_dir(&self.data_dir, &topic.name, partition);
        let dir = prepare_dir(&path, topic.id).map_err(storage_error)?;
        let started = std::time::Instant::now();
        let (log, rep) = TopicLog::open(dir.clone(), settings.log_config())
            .await
            .map_err(storage_error)?;
        tracing::info!(
            shard = self.shard,
            batches = rep.batches,
            bytes = rep.bytes,
            segments = rep.segments,
            log_start_offset = rep.log_start_offset,
            next_offset = rep.next_offset,
            millis = started.elapsed().as_millis() as u64,
            "loaded {}-{}",
            topic.name,
            partition
        );
        if let Some((segment, pos, reason)) = &rep.truncated {
            tracing::warn!(
                topic = %topic.name,
                partition,
                segment = %segment,
                position = pos,
                %reason,
                "truncated a torn or corrupt log tail"
            );
        }
        let ctx = self.cluster.borrow().clone();
        let raft = match (self.raft_voters(topic, partition), ctx) {
            (Some(replicas), Some(ctx)) => {
                // The group restarts from the voters it started with (the configuration changes
                // in its log apply on top), and the first replica stands for election.
                let first = self
                    .broker
                    .topics
                    .first_voters(topic, partition)
                    .expect("a partition with replicas has first voters");
                let me = self.broker.node_id as u64;
                let (raft, raft_log) =
                    super::replica::open(&path, me, &first, replicas.first() == Some(&me))
                        .await
                        .map_err(storage_error)?;
                Some((raft, raft_log, ctx))
            }
            _ => None,
        };
        let (raft, raft_writer) = match raft {
            Some((raft, raft_log, ctx)) => (Some(raft), Some((raft_log, ctx))),
            None => (None, None),
        };
        let p = Rc::new(DataPartition {
            topic: topic.clone(),
            partition,
            dir,
            log: RefCell::new(log),
            config: settings.log_config(),
            changed: Notify::default(),
            kick: Notify::default(),
            failures: Cell::new(0),
            closed: Cell::new(false),
            raft,
            seed: RefCell::new(None),
            stopped: Cell::new(self.stops(topic, partition)),
            moved: RefCell::new(None),
        });
        match raft_writer {
            Some((raft_log, ctx)) => {
                glommio::spawn_local(super::replica::writer(Rc::downgrade(&p), ctx, raft_log))
                    .detach()
            }
            None => glommio::spawn_local(writer(Rc::downgrade(&p), settings.log_config())).detach(),
        };
        Ok(p)
    }

    async fn append(
        self: &Rc<Self>,
        topic: Arc<Topic>,
        partition: i32,
        records: Bytes,
    ) -> AppendOutcome {
        let settings = TopicSettings::of(&topic, &self.broker);
        // Produce v3+ carries exactly one batch per partition (`ProduceRequest.validateRecords`).
        let one_batch = records.len() >= 12 && {
            let len = i32::from_be_bytes(records[8..12].try_into().expect("4 bytes"));
            len >= 0 && 12 + len as usize == records.len()
        };
        if !one_batch {
            return AppendOutcome::failed(
                ResponseError::InvalidRecord.code(),
                Some("produce requests must carry exactly one record batch".into()),
            );
        }
        let p = match self.partition(&topic, partition).await {
            Ok(p) => p,
            Err(code) => return AppendOutcome::failed(code, None),
        };
        if p.raft.is_some() && records.len() > super::replica::MAX_REPLICATED_BATCH_BYTES {
            return AppendOutcome::failed(
                ResponseError::MessageTooLarge.code(),
                Some(format!(
                    "a replicated partition takes batches of at most {} bytes",
                    super::replica::MAX_REPLICATED_BATCH_BYTES
                )),
            );
        }
        // The topic's configs may have been altered since the log opened (AlterConfigs).
        p.log
            .borrow_mut()
            .set_limits(settings.segment_bytes, settings.max_message_bytes);
        let mut batch = records.to_vec();
        let staged = match stage_durably(&p, |log, now| {
            log.stage(&mut batch, now, settings.log_append_time)
        })
        .await
        {
            Ok(s) => s,
            Err((code, message)) => return AppendOutcome::failed(code, message),
        };
        let log = p.log.borrow();
        AppendOutcome {
            error: 0,
            message: None,
            base_offset: staged.base_offset as i64,
            log_append_time: staged.log_append_time,
            log_start_offset: log.log_start_offset() as i64,
        }
    }

    /// WriteTxnMarkers' work on one partition (`ReplicaManager.appendRecords` with origin
    /// COORDINATOR): stage the marker like an append (`TopicLog::stage_marker` checks the
    /// producer and coordinator epochs), then answer once it is durable: only then does it
    /// complete the transaction for the last stable offset. A failed write answers
    /// KAFKA_STORAGE_ERROR and the reloaded log has the transaction still ongoing, so the
    /// coordinator's retry writes it again.
    async fn write_marker(
        self: &Rc<Self>,
        topic: Arc<Topic>,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> i16 {
        if partition < 0 || partition >= topic.partitions {
            return ResponseError::UnknownTopicOrPartition.code();
        }
        let settings = TopicSettings::of(&topic, &self.broker);
        let p = match self.partition(&topic, partition).await {
            Ok(p) => p,
            Err(code) => return code,
        };
        let staged = stage_durably(&p, |log, now| {
            log.stage_marker(
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
                now,
                settings.log_append_time,
            )
        })
        .await;
        match staged {
            Ok(_) => 0,
            Err((code, message)) => {
                tracing::debug!(
                    topic = %topic.name,
                    partition,
                    producer_id,
                    code,
                    error = message.as_deref().unwrap_or(""),
                    "transaction marker not written"
                );
                code
            }
        }
    }

    async fn read(self: &Rc<Self>, it: &ReadItem) -> PartitionRead {
        if it.topic.internal {
            // `__consumer_offsets` belongs to the group coordinator (`partition.rs`), whose
            // records are not served to consumers: it reads as an empty topic.
            return if it.offset == 0 {
                PartitionRead {
                    error: 0,
                    high_watermark: 0,
                    last_stable_offset: 0,
                    log_start_offset: 0,
                    aborted: Vec::new(),
                    records: Bytes::new(),
                }
            } else {
                PartitionRead::failed(ResponseError::OffsetOutOfRange.code())
            };
        }
        let p = match self.partition(&it.topic, it.partition).await {
            Ok(p) => p,
            Err(code) => return PartitionRead::failed(code),
        };
        if let Err(code) = p.check_serving() {
            return PartitionRead::failed(code);
        }
        if it.offset < 0 {
            return PartitionRead::failed(ResponseError::OffsetOutOfRange.code());
        }
        // One borrow: the records, the LSO and the aborted list agree with each other.
        let (plan, hw, lso, start, aborted) = {
            let log = p.log.borrow();
            let max = it.max_bytes.max(0) as usize;
            let lso = log.last_stable_offset();
            // read_committed reads stop at the LSO (`FetchIsolation.TXN_COMMITTED`).
            let bound = if it.read_committed { lso } else { u64::MAX };
            let plan = log.read_upto(it.offset as u64, max, true, bound);
            // The aborted transactions overlapping [fetch offset, end of what was read)
            // (`LocalLog.addAbortedTransactions`); none when nothing was read.
            let aborted = match &plan {
                Read::Data(d) if it.read_committed => log
                    .aborted_transactions(it.offset as u64, d.last_offset() + 1)
                    .into_iter()
                    .map(|(pid, first)| (pid, first as i64))
                    .collect(),
                _ => Vec::new(),
            };
            (
                plan,
                log.high_watermark() as i64,
                lso as i64,
                log.log_start_offset() as i64,
                aborted,
            )
        };
        let records = match plan {
            Read::OutOfRange => {
                return PartitionRead::failed(ResponseError::OffsetOutOfRange.code())
            }
            Read::Empty => Bytes::new(),
            Read::Data(plan) => match plan.read().await {
                Ok(b) => Bytes::from(b),
                Err(e) => return PartitionRead::failed(storage_error(e)),
            },
        };
        PartitionRead {
            error: 0,
            high_watermark: hw,
            last_stable_offset: lso,
            log_start_offset: start,
            aborted,
            records,
        }
    }

    async fn wait(self: &Rc<Self>, items: Vec<super::WaitItem>, timeout_ms: u64) {
        let mut waiters = Vec::new();
        for (topic, partition, offset, read_committed) in &items {
            // A partition that cannot change (internal, or failing to open) is not waited on;
            // the timeout still bounds the wait, so a fetch never spins.
            if topic.internal {
                continue;
            }
            let Ok(p) = self.partition(topic, *partition).await else {
                continue;
            };
            // A read_committed fetch can read only below the LSO: waking it for data above
            // would make it read nothing and wait again at once. The LSO moves only when the
            // high watermark (a flush, e.g. of a marker) or the log start does, and both wake
            // `changed`.
            let readable_end = {
                let log = p.log.borrow();
                if *read_committed {
                    log.last_stable_offset()
                } else {
                    log.high_watermark()
                }
            };
            if readable_end as i64 > *offset {
                return;
            }
            waiters.push(Box::pin(p.changed.register().wait()));
        }
        // Whichever partition changes first ends the wait. All the waiters are dropped when this
        // returns, so a timed-out wait leaves nothing behind (the Notify lists prune them).
        let any = futures_lite::future::poll_fn(|cx| {
            for w in waiters.iter_mut() {
                if w.as_mut().poll(cx).is_ready() {
                    return std::task::Poll::Ready(());
                }
            }
            std::task::Poll::Pending
        });
        let timeout = glommio::timer::sleep(Duration::from_millis(timeout_ms));
        futures_lite::future::or(any, timeout).await;
    }

    async fn list_offset(
        self: &Rc<Self>,
        topic: Arc<Topic>,
        partition: i32,
        timestamp: i64,
        read_committed: bool,
    ) -> Result<(i64, i64), i16> {
        if topic.internal {
            // Read as empty, like Fetch (see `read`).
            return Ok(if matches!(timestamp, -1 | -2 | -4) {
                (0, -1)
            } else {
                (-1, -1)
            });
        }
        let p = self.partition(&topic, partition).await?;
        p.check_serving()?;
        // What a client may read (`Partition.fetchOffsetForTimestamp`'s lastFetchableOffset):
        // the LSO for read_committed, else the high watermark. Lookups only see flushed
        // batches, so only read_committed ever filters one out.
        let last_fetchable = {
            let log = p.log.borrow();
            if read_committed {
                log.last_stable_offset()
            } else {
                log.high_watermark()
            }
        };
        let found = match timestamp {
            -1 => return Ok((last_fetchable as i64, -1)),
            -2 | -4 => Some((p.log.borrow().log_start_offset(), -1)),
            -3 => TopicLog::max_timestamp(&p.log)
                .await
                .map_err(storage_error)?,
            t if t >= 0 => TopicLog::offset_for_timestamp(&p.log, t)
                .await
                .map_err(storage_error)?,
            _ => None,
        };
        // `ReplicaManager.fetchOffset`: a found offset at or past the last fetchable one is
        // answered as no offset (-1, -1).
        let found = found.filter(|&(o, _)| matches!(timestamp, -2 | -4) || o < last_fetchable);
        Ok(found.map_or((-1, -1), |(o, t)| (o as i64, t)))
    }

    /// DescribeProducers' work on one partition (`Partition.activeProducerState`): the producers
    /// its log remembers, opening (and so recovering) the log if this is its first use.
    async fn producers(
        self: &Rc<Self>,
        topic: &Arc<Topic>,
        partition: i32,
    ) -> Result<Vec<ProducerState>, i16> {
        if topic.internal {
            // `__consumer_offsets` belongs to the group coordinator (see `read`), whose batches
            // of transactional offset commits are not kept as a topic log's producer state.
            return Ok(Vec::new());
        }
        if partition < 0 || partition >= topic.partitions {
            return Err(ResponseError::UnknownTopicOrPartition.code());
        }
        let p = self.partition(topic, partition).await?;
        p.check_serving()?;
        let producers = p.log.borrow().active_producers();
        Ok(producers)
    }

    async fn delete_records(
        self: &Rc<Self>,
        topic: Arc<Topic>,
        partition: i32,
        offset: i64,
        timeout_ms: u64,
    ) -> Result<i64, i16> {
        let p = self.partition(&topic, partition).await?;
        p.check_serving()?;
        let (start, hw) = {
            let log = p.log.borrow();
            (log.log_start_offset(), log.high_watermark())
        };
        let target = if offset == -1 { hw as i64 } else { offset };
        if target < 0 || target > hw as i64 {
            return Err(ResponseError::OffsetOutOfRange.code());
        }
        let target = target as u64;
        let Some(raft) = &p.raft else {
            return TopicLog::delete_records(&p.log, target)
                .await
                .map(|o| o as i64)
                .map_err(storage_error);
        };
        if target <= start {
            return Ok(start as i64);
        }
        // Replicated: the new start travels through the partition's Raft log, so every replica
        // moves its start when it applies the entry (`replica::delete_records`), and the client
        // is answered once this leader applied it, i.e. once a majority holds it. Kafka's
        // leader answers once every live replica moved its start (`Partition.lowWatermarkIfLeader`,
        // `DelayedDeleteRecords`).
        let deposed = p.deposed();
        if raft
            .borrow_mut()
            .propose_delete(target, crate::clock::wall_clock_ms())
            .is_none()
        {
            return Err(ResponseError::NotLeaderOrFollower.code());
        }
        p.kick.notify_all();
        let failures = p.failures.get();
        let applied = async {
            loop {
                let start = p.log.borrow().log_start_offset();
                if start >= target {
                    return Ok(start as i64);
                }
                if p.deposed() != deposed {
                    // The entry may still commit under the next leader; the client retries there.
                    return Err(ResponseError::NotLeaderOrFollower.code());
                }
                if p.closed.get() {
                    return Err(ResponseError::UnknownTopicOrPartition.code());
                }
                if p.failures.get() != failures {
                    return Err(ResponseError::KafkaStorageError.code());
                }
                p.changed.register().wait().await;
            }
        };
        let timeout = async {
            glommio::timer::sleep(Duration::from_millis(timeout_ms)).await;
            Err(ResponseError::RequestTimedOut.code())
        };
        futures_lite::future::or(applied, timeout).await
    }

    /// Close partitions of deleted topics (a topic recreated with the same name has a new id)
    /// and remove their directories.
    fn forget_deleted(&self) {
        let snap = self.broker.topics.snapshot();
        let gone: Vec<(Uuid, i32)> = self
            .parts
            .borrow()
            .iter()
            .filter(|((id, _), slot)| {
                snap.get_by_id(id).is_none() && matches!(slot, Slot::Ready(_))
            })
            .map(|(k, _)| *k)
            .collect();
        for key in gone {
            if let Some(p) = self.close(key) {
                if let Some(ctx) = self.cluster.borrow().as_ref() {
                    ctx.cluster.forget_topic(key.0);
                }
                // Only while the directory still belongs to the deleted topic: on a cluster the
                // metadata log may have removed it already, and a topic recreated under the name
                // since (a new id) owns the directory now.
                remove_if_ours(p.dir.path(), key.0);
            }
        }
    }

    /// Retention for every open partition of this shard.
    pub async fn apply_retention(self: &Rc<Self>) {
        let parts: Vec<Rc<DataPartition>> = self
            .parts
            .borrow()
            .values()
            .filter_map(|s| match s {
                Slot::Ready(p) => Some(p.clone()),
                Slot::Opening(_) => None,
            })
            .collect();
        let snap = self.broker.topics.snapshot();
        for p in parts {
            // Settings may have changed since the partition opened; read them from the registry.
            let Some(topic) = snap.get_by_id(&p.topic.id) else {
                continue;
            };
            let s = TopicSettings::of(topic, &self.broker);
            if s.retention_ms < 0 && s.retention_bytes < 0 {
                continue;
            }
            let now = crate::clock::wall_clock_ms();
            match TopicLog::apply_retention(&p.log, now, s.retention_ms, s.retention_bytes).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    topic = %p.topic.name,
                    partition = p.partition,
                    segments = n,
                    log_start_offset = p.log.borrow().log_start_offset(),
                    "retention removed segments"
                ),
                Err(e) => {
                    tracing::error!(topic = %p.topic.name, partition = p.partition, error = %e, "retention failed")
                }
            }
        }
    }
}

/// Stage one batch on `p` with `stage` and wait until it is durable (a producer's batch, or a
/// transaction marker). While too many bytes wait for the disk (`Busy`), it waits for the flush
/// in flight and tries again. Errors: the log's refusal (code and message), KAFKA_STORAGE_ERROR
/// when a write fails meanwhile, UNKNOWN_TOPIC_OR_PARTITION when the topic was deleted (its
/// writer has stopped, so the batch would never be durable).
async fn stage_durably(
    p: &DataPartition,
    mut stage: impl FnMut(&mut TopicLog<GlommioDir>, i64) -> Result<Staged, AppendError>,
) -> Result<Staged, (i16, Option<String>)> {
    let failures = p.failures.get();
    let deposed = p.deposed();
    let storage_failed = || (ResponseError::KafkaStorageError.code(), None);
    let deleted = || (ResponseError::UnknownTopicOrPartition.code(), None);
    let not_leader = || (ResponseError::NotLeaderOrFollower.code(), None);
    // A replicated partition's leader that stopped leading since this request arrived: what it
    // staged was dropped (`replica::role_changed`).
    let lost_lead = || p.deposed() != deposed;
    let staged = loop {
        if p.check_serving().is_err() || lost_lead() {
            return Err(not_leader());
        }
        let r = stage(&mut p.log.borrow_mut(), crate::clock::wall_clock_ms());
        match r {
            Ok(s) => break s,
            Err(AppendError::Busy) => {
                let w = p.changed.register();
                p.kick.notify_all();
                w.wait().await;
                if p.failures.get() != failures {
                    return Err(storage_failed());
                }
                if p.closed.get() {
                    return Err(deleted());
                }
            }
            Err(e) => return Err((e.code(), Some(e.message()))),
        }
    };
    p.kick.notify_all();
    // Answer once the batch (or, for a retried duplicate, the original) is durable.
    loop {
        if p.failures.get() != failures {
            return Err(storage_failed());
        }
        if lost_lead() {
            return Err(not_leader());
        }
        if p.log.borrow().high_watermark() > staged.last_offset {
            return Ok(staged);
        }
        if p.closed.get() {
            return Err(deleted());
        }
        p.changed.register().wait().await;
    }
}

/// The partition's writer: flush whatever is staged, wake the waiters, repeat. One flush at a
/// time per partition; batches staged meanwhile form the next write (group commit).
async fn writer(part: Weak<DataPartition>, config: TopicLogConfig) {
    loop {
        let Some(p) = part.upgrade() else { return };
        if p.closed.get() {
            return;
        }
        if !p.log.borrow().has_pending() {
            let w = p.kick.register();
            drop(p);
            w.wait().await;
            continue;
        }
        match TopicLog::flush(&p.log).await {
            Ok(_) => p.changed.notify_all(),
            Err(e) => {
                tracing::error!(
                    topic = %p.topic.name,
                    partition = p.partition,
                    error = %e,
                    "write failed; failing the waiting producers and reloading the partition"
                );
                p.failures.set(p.failures.get() + 1);
                p.changed.notify_all();
                // Everything below the high watermark was synced; what the failed flush wrote
                // after it may sit in the file without its fdatasync and must not be served.
                let durable_end = p.log.borrow().high_watermark();
                let mut backoff = Duration::from_millis(50);
                loop {
                    if p.closed.get() {
                        return;
                    }
                    match reopen_after_failed_flush(&p.dir, &config, durable_end).await {
                        Ok(log) => {
                            *p.log.borrow_mut() = log;
                            break;
                        }
                        Err(e) => {
                            tracing::error!(topic = %p.topic.name, partition = p.partition, error = %e, "reload failed; retrying");
                            glommio::timer::sleep(backoff).await;
                            backoff = (backoff * 2).min(Duration::from_secs(5));
                        }
                    }
                }
                p.changed.notify_all();
            }
        }
    }
}

pub fn partition_dir(data_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    data_dir.join(format!("{topic}-{partition}"))
}

/// Kafka's `partition.metadata`: "version: 0\ntopic_id: <base64url id>".
/// Remove the partition directory `path` if its `partition.metadata` names topic `id` (a
/// directory another topic took since, or one already gone, stays as it is); true if removed.
fn remove_if_ours(path: &Path, id: Uuid) -> bool {
    let ours = std::fs::read_to_string(path.join(PARTITION_METADATA))
        .is_ok_and(|text| text == metadata_text(id));
    if !ours {
        return false;
    }
    match std::fs::remove_dir_all(path) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "could not remove a partition directory");
            false
        }
    }
}

fn metadata_text(id: Uuid) -> String {
    format!("version: 0\ntopic_id: {}\n", base64_url(id.as_bytes()))
}

fn base64_url(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        let chars = c.len() + 1;
        for i in 0..chars {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// The partition directory for `topic_id`, created with its metadata file. A directory left by
/// a deleted topic of the same name (another id) is removed first.
fn prepare_dir(path: &Path, topic_id: Uuid) -> std::io::Result<GlommioDir> {
    let meta = path.join(PARTITION_METADATA);
    let want = metadata_text(topic_id);
    match std::fs::read_to_string(&meta) {
        Ok(text) if text == want => return GlommioDir::new(path),
        Ok(_) => {
            tracing::warn!(path = %path.display(), "removing the data of a deleted topic with the same name");
            std::fs::remove_dir_all(path)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let dir = GlommioDir::new(path)?;
    storage::durable_file::write_atomic(&meta, want.as_bytes())?;
    Ok(dir)
}

/// Remove partition directories whose topic no longer exists (deleted while the broker was
/// down, or before its partitions were opened). Only directories carrying our
/// `partition.metadata` are considered. A single node's registry is the whole truth; a node of a
/// cluster uses [`sweep_topic_ids`] instead.
pub fn sweep_deleted_topics(data_dir: &Path, broker: &Broker) {
    let snap = broker.topics.snapshot();
    let live: std::collections::HashSet<String> =
        snap.iter().map(|t| metadata_text(t.id)).collect();
    sweep(data_dir, |text| !live.contains(text));
}

/// Remove the partition directories of these topic ids. On a node of a cluster, a topic its
/// registry does not list may be one whose creation the metadata log has not applied here yet
/// (after a restart it replays from its log, and the commit index it restarts with may be
/// behind), so only ids the metadata log has seen deleted are removed.
pub fn sweep_topic_ids(data_dir: &Path, ids: impl IntoIterator<Item = Uuid>) {
    let doomed: std::collections::HashSet<String> = ids.into_iter().map(metadata_text).collect();
    if !doomed.is_empty() {
        sweep(data_dir, |text| doomed.contains(text));
    }
}

fn sweep(data_dir: &Path, doomed: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(data_dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(text) = std::fs::read_to_string(path.join(PARTITION_METADATA)) else {
            continue;
        };
        if doomed(&text) {
            tracing::info!(path = %path.display(), "removing the partition of a deleted topic");
            if let Err(e) = std::fs::remove_dir_all(&path) {
                tracing::warn!(path = %path.display(), error = %e, "could not remove");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_metadata_matches_kafkas_encoding() {
        // Kafka writes the topic id in URL-safe base64 without padding (`Uuid.toString`).
        let id = Uuid::from_bytes([0xfb; 16]);
        assert_eq!(
            metadata_text(id),
            "version: 0\ntopic_id: -_v7-_v7-_v7-_v7-_v7-w\n"
        );
        assert_eq!(base64_url(b"Man"), "TWFu");
        assert_eq!(base64_url(b"Ma"), "TWE");
    }

    #[test]
    fn a_flush_whose_fdatasync_failed_is_not_served_after_the_reload() {
        use futures_lite::future::block_on;
        use storage::io::MemDir;
        let config = TopicLogConfig {
            segment_bytes: 1 << 20,
            read_chunk_bytes: 97,
            ..TopicLogConfig::default()
        };
        let batch = |n: u8| {
            let k = [n];
            let mut b = Vec::new();
            storage::batch::encode_batch(0, 1_000, &[(Some(&k[..]), Some(&b"v"[..]))], &mut b);
            b
        };
        // Fail at each I/O operation of the second flush in turn: whatever it managed to write,
        // the reload shows only the first, acknowledged batch.
        let mut saw_written_but_unsynced = false;
        for fail_at in 0..6u64 {
            let dir = MemDir::new();
            let log = RefCell::new(
                block_on(TopicLog::open(dir.clone(), config.clone()))
                    .unwrap()
                    .0,
            );
            log.borrow_mut().stage(&mut batch(1), 1_000, false).unwrap();
            block_on(TopicLog::flush(&log)).unwrap();
            let hw = log.borrow().high_watermark();
            assert_eq!(hw, 1);
            log.borrow_mut().stage(&mut batch(2), 1_000, false).unwrap();
            dir.fail_after(fail_at);
            if block_on(TopicLog::flush(&log)).is_ok() {
                continue;
            }
            dir.heal();
            let durable_end = log.borrow().high_watermark();
            assert_eq!(durable_end, hw);
            // Without the cut, a plain reopen may find the unsynced batch in the file.
            let plain = block_on(TopicLog::open(dir.clone(), config.clone()))
                .unwrap()
                .0;
            saw_written_but_unsynced |= plain.high_watermark() > hw;
            drop(plain);
            let reopened = block_on(reopen_after_failed_flush(&dir, &config, durable_end)).unwrap();
            assert_eq!(reopened.high_watermark(), hw, "fail_at {fail_at}");
            assert_eq!(reopened.next_offset(), hw);
        }
        assert!(
            saw_written_but_unsynced,
            "some case wrote the batch and failed its fdatasync"
        );
    }
}
