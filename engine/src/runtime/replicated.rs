//! The replicated `__consumer_offsets` partitions a shard owns, when the node is one of several
//! voters (`controller.quorum.voters`): the glommio shell around each partition's
//! `replication::partition::ReplicatedPartition`.
//!
//! Each partition is one Raft group over every voter. Its log is the partition's segment log
//! (`storage::raft_log`: Raft index *i* is the *i*-th record batch, its term the batch's
//! partition leader epoch) and its hard state a small file beside it. The shell feeds the
//! replica what arrives (peer messages through `PartitionOp::Raft`, group requests, a Raft tick
//! every [`RAFT_TICK`], the coordinator's deadlines), and one writer task per partition carries
//! out what the replica asks for, in order: send the messages that may leave at once, append the
//! entries and store the hard state (`storage::raft_log` syncs a new term or vote, not a moved
//! commit index), then send what waited for that and
//! release the replies whose records a majority now holds (Kafka's high-watermark rule). A
//! write that fails stops the node: a replica that may have lost what it told a leader it had
//! must not vote or acknowledge again.
//!
//! Only the partition's leader, while it holds its lease, answers as the group coordinator;
//! every other replica answers NOT_COORDINATOR and the client finds the leader through
//! FindCoordinator (which reads `cluster::Cluster`, updated here on every role change).
//!
//! Must not: decide anything Raft decides (the replica does), or acknowledge a record before the
//! replica reports it committed.

use crate::cluster::{Cluster, NodeId};
use crate::group::{GroupConfig, ReqId};
use crate::oneshot::OneShot;
use crate::partition_core::Released;
pub(crate) use crate::raft_io::mono_ms;
use crate::raft_io::{compact, durable, persist, snapshot_min_bytes};
use crate::runtime::partition::{PartitionCall, PartitionOp, PartitionReply};
use crate::runtime::peers::Links;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use replication::partition::{NotServing, Progress, ReplicatedPartition};
use replication::Replica;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::io::GlommioDir;
use storage::log::LogConfig;
use storage::raft_log::RaftLog;

/// One Raft tick: `replication::ELECTION_TICKS` of them (1 s) without a leader start an
/// election, as Kafka's `controller.quorum.election.timeout.ms` default.
pub const RAFT_TICK: Duration = Duration::from_millis(replication::TICK_MS as u64);

struct Slot {
    partition: i32,
    part: RefCell<ReplicatedPartition<Instant>>,
    doorbell: LocalSender<()>,
    /// The leader last published to the cluster view.
    published: Cell<Option<NodeId>>,
}

pub struct ReplicaSet {
    shard: usize,
    shards: usize,
    cluster: Arc<Cluster>,
    links: Rc<Links>,
    slots: Vec<Slot>,
    waiters: RefCell<hashbrown::HashMap<ReqId, Rc<OneShot<PartitionReply>>>>,
    next_req: Cell<ReqId>,
    clock: fn() -> i64,
    /// Raft messages from peers that did not decode or step (logged once in a while).
    bad_messages: Cell<u64>,
}

impl ReplicaSet {
    /// Open every partition this shard owns from `DATA/__consumer_offsets-<p>/` and start its
    /// writer task. A partition's first preferred leader (`metadata::first_offsets_leader`)
    /// stands for election at once, so leaders start spread over the nodes; after a membership
    /// change the leaders' rebalancing moves each to where the metadata log placed it.
    #[allow(clippy::too_many_arguments)]
    pub async fn open(
        shard: usize,
        shards: usize,
        partitions: i32,
        mut config: GroupConfig,
        cluster: Arc<Cluster>,
        links: Rc<Links>,
        data_dir: &std::path::Path,
        log_config: LogConfig,
    ) -> anyhow::Result<Rc<ReplicaSet>> {
        // The coordinator's large target assignments run inline here: the offloading protocol
        // (take_assignments / assignment_done) is not wired through the replicated partition.
        config.assignment_offload_min_work = usize::MAX;
        let voters = cluster.voter_ids();
        let mut slots = Vec::new();
        let mut writers = Vec::new();
        // Opened side by side: each open syncs its files, and those syncs overlap on the disk
        // instead of queueing one partition after another.
        let mut opening = Vec::new();
        for p in (0..partitions.max(0)).filter(|p| *p as usize % shards == shard) {
            let dir = GlommioDir::new(data_dir.join(format!("__consumer_offsets-{p}")))?;
            let config = log_config.clone();
            opening.push((p, glommio::spawn_local(RaftLog::open(dir, config))));
        }
        for (p, open) in opening {
            let (log, hs, snapshot, stored) = open.await.map_err(|e| {
                anyhow::anyhow!("__consumer_offsets-{p}: opening its Raft log: {e}")
            })?;
            let mut replica = Replica::restart(
                cluster.node_id,
                &voters,
                durable(hs, snapshot, stored)
                    .map_err(|e| anyhow::anyhow!("__consumer_offsets-{p}: {e}"))?,
            )
            .map_err(|e| anyhow::anyhow!("__consumer_offsets-{p}: {e}"))?;
            if replication::metadata::first_offsets_leader(&voters, p as usize) == cluster.node_id {
                let _ = replica.campaign();
            }
            let (tx, rx) = local_channel::new_bounded(1);
            slots.push(Slot {
                partition: p,
                part: RefCell::new(ReplicatedPartition::new(
                    p,
                    config.clone(),
                    replica,
                    snapshot_min_bytes(),
                )),
                doorbell: tx,
                published: Cell::new(None),
            });
            writers.push((log, rx));
        }
        let set = Rc::new(ReplicaSet {
            shard,
            shards,
            cluster,
            links,
            slots,
            waiters: RefCell::default(),
            next_req: Cell::new(1),
            clock: crate::clock::wall_clock_ms,
            bad_messages: Cell::new(0),
        });
        for (idx, (log, rx)) in writers.into_iter().enumerate() {
            glommio::spawn_local(writer(set.clone(), idx, log, rx)).detach();
            set.ring(idx);
        }
        Ok(set)
    }

    fn slot_index(&self, partition: i32) -> Option<usize> {
        if partition < 0 || partition as usize % self.shards != self.shard {
            return None;
        }
        let idx = partition as usize / self.shards;
        (idx < self.slots.len()).then_some(idx)
    }

    fn ring(&self, idx: usize) {
        let _ = self.slots[idx].doorbell.try_send(()); // full = the writer is due to look
    }

    /// Wake partition `idx`'s writer if its replica has work for it.
    fn ring_if_work(&self, idx: usize) {
        if self.slots[idx].part.borrow().replica().has_work() {
            self.ring(idx);
        }
    }

    /// Run `op` on `partition`, which this shard owns.
    pub fn execute(&self, partition: i32, op: PartitionOp) -> PartitionCall {
        let ready = |reply| PartitionCall::Ready(Some(reply));
        let Some(idx) = self.slot_index(partition) else {
            return ready(PartitionReply::Unavailable);
        };
        let slot = &self.slots[idx];
        match op {
            PartitionOp::Status => ready(PartitionReply::Status {
                partition,
                shard: self.shard,
                ops_served: 0,
            }),
            PartitionOp::Raft(bytes) => {
                let stepped = replication::decode(&bytes)
                    .map_err(|e| e.to_string())
                    .and_then(|m| {
                        slot.part
                            .borrow_mut()
                            .replica_mut()
                            .step(m)
                            .map_err(|e| e.to_string())
                    });
                match stepped {
                    Ok(()) => self.ring_if_work(idx),
                    Err(e) => {
                        let n = self.bad_messages.get() + 1;
                        self.bad_messages.set(n);
                        if n % 1000 == 1 {
                            tracing::warn!(partition, error = %e, refused_so_far = n, "Raft message refused");
                        }
                    }
                }
                ready(PartitionReply::Accepted)
            }
            PartitionOp::Group { ctx, req } => {
                let id = self.next_req.get();
                self.next_req.set(id + 1);
                let now = (self.clock)();
                let handled =
                    slot.part
                        .borrow_mut()
                        .handle(id, &ctx, req, now, mono_ms(), Instant::now());
                let mut released = match handled {
                    Ok(r) => r,
                    Err(NotServing::Loading) => return ready(PartitionReply::Loading),
                    Err(NotServing::NotCoordinator { .. }) => {
                        return ready(PartitionReply::NotCoordinator)
                    }
                };
                self.ring(idx);
                let mine = released
                    .iter()
                    .position(|r| r.id == id)
                    .map(|i| released.remove(i).response);
                self.complete(released);
                match mine {
                    Some(response) => ready(PartitionReply::Group(response)),
                    None => {
                        let waiter = OneShot::new();
                        self.waiters.borrow_mut().insert(id, waiter.clone());
                        PartitionCall::Elsewhere(Box::pin(waiter.wait()))
                    }
                }
            }
        }
    }

    fn complete(&self, replies: Vec<Released<Instant>>) {
        if replies.is_empty() {
            return;
        }
        let mut waiters = self.waiters.borrow_mut();
        for r in replies {
            if let Some(w) = waiters.remove(&r.id) {
                w.complete(PartitionReply::Group(r.response));
            }
        }
    }

    /// What followed a durable write: messages out, replies released, requests that waited on a
    /// replica that stopped leading refused, the role published.
    fn after(&self, idx: usize, progress: Progress<Instant>) {
        let slot = &self.slots[idx];
        self.send(slot.partition, &progress.send);
        self.complete(progress.released);
        if !progress.refused.is_empty() {
            let mut waiters = self.waiters.borrow_mut();
            for d in progress.refused {
                if let Some(w) = waiters.remove(&d.id) {
                    w.complete(PartitionReply::NotCoordinator);
                }
            }
        }
        self.publish(idx);
    }

    fn publish(&self, idx: usize) {
        let slot = &self.slots[idx];
        let leader = slot.part.borrow().role().leader;
        if slot.published.get() != leader {
            slot.published.set(leader);
            self.cluster.set_leader(slot.partition, leader);
            tracing::debug!(
                partition = slot.partition,
                ?leader,
                "__consumer_offsets leader"
            );
        }
    }

    fn send(&self, partition: i32, msgs: &[replication::eraftpb::Message]) {
        for m in msgs {
            self.links.send(m.to, partition, &replication::encode(m));
        }
    }

    /// One Raft tick for every partition (elections, heartbeats, the lease).
    pub fn raft_tick(&self) {
        let now = mono_ms();
        let (members, removed) = (self.cluster.members(), self.cluster.removed());
        for idx in 0..self.slots.len() {
            let mut part = self.slots[idx].part.borrow_mut();
            part.replica_mut().tick(now);
            // A node added to the cluster joins every partition's group, a removed one leaves.
            part.replica_mut().follow_members(&members, &removed);
            let view = crate::cluster::GroupView::of(&part.replica().membership());
            self.cluster
                .set_group(uuid::Uuid::nil(), self.slots[idx].partition, view);
            drop(part);
            self.ring_if_work(idx);
        }
    }

    /// Kafka's automatic preferred leader election, for the partitions this shard leads: each
    /// hands its leadership to its preferred replica (`preferred(p)`) when that replica is a
    /// voter in sync (`Replica::hand_to_preferred`). Returns how many handovers started. The
    /// groups then move as on any change of leader (the new leader loads the partition, classic
    /// members rejoin).
    pub fn hand_to_preferred(&self, preferred: impl Fn(i32) -> Option<u64>) -> usize {
        let mut started = 0;
        for (idx, slot) in self.slots.iter().enumerate() {
            let Some(to) = preferred(slot.partition) else {
                continue;
            };
            if slot.part.borrow_mut().replica_mut().hand_to_preferred(to) {
                started += 1;
                self.ring_if_work(idx);
            }
        }
        started
    }

    /// Fire the coordinators' deadlines due at `now` (sessions, join phases, retention).
    pub fn tick(&self, now: i64) {
        for idx in 0..self.slots.len() {
            let released = self.slots[idx].part.borrow_mut().tick(now, Instant::now());
            if !released.is_empty() {
                self.complete(released);
            }
            self.ring_if_work(idx);
        }
    }

    /// Group and member counts of the partitions this node leads (the metrics gauges).
    pub fn gauges(&self) -> (u64, u64, u64, u64) {
        let (mut classic, mut consumer, mut members, mut rebalances) = (0, 0, 0, 0);
        for s in &self.slots {
            let part = s.part.borrow();
            if let Some(c) = part.coordinator() {
                classic += c.groups.len() as u64;
                consumer += c.consumer_groups.len() as u64;
                members += c
                    .groups
                    .values()
                    .map(|g| g.members.len() as u64)
                    .sum::<u64>();
                members += c
                    .consumer_groups
                    .values()
                    .map(|g| g.members.len() as u64)
                    .sum::<u64>();
                rebalances += c.rebalances;
            }
        }
        (classic, consumer, members, rebalances)
    }
}

/// One partition's writer: carries out the replica's work, one durable write at a time.
async fn writer(
    set: Rc<ReplicaSet>,
    idx: usize,
    mut log: RaftLog<GlommioDir>,
    doorbell: LocalReceiver<()>,
) {
    let partition = set.slots[idx].partition;
    while doorbell.recv().await.is_some() {
        loop {
            let work = set.slots[idx].part.borrow_mut().work();
            let Some(work) = work else { break };
            set.send(partition, &work.send_now);
            let leader = set.slots[idx]
                .part
                .borrow()
                .role()
                .leader
                .map_or(-1, |l| l as i32);
            if let Some(s) = &work.snapshot {
                tracing::info!(
                    partition,
                    index = s.index,
                    bytes = s.data.len(),
                    "raft snapshot from the leader installed in place of the log"
                );
            }
            if let Err(e) = persist(&mut log, &work, leader).await {
                // Fail-stop: a replica that may have lost what it promised a leader must not
                // take part again until an operator restarts it (Kafka halts on a failed
                // log directory of a partition it leads as well).
                panic!(
                    "__consumer_offsets-{partition}: the Raft log could not be written ({e}); \
                     stopping this node"
                );
            }
            let mut progress = set.slots[idx].part.borrow_mut().persisted(work);
            let snapshot = progress.snapshot.take();
            set.after(idx, progress);
            if let Some(snap) = snapshot {
                // Durable before the log drops what it covers; nothing else writes meanwhile
                // (this task is the partition's only writer).
                if let Err(e) = compact(&mut log, &snap).await {
                    panic!(
                        "__consumer_offsets-{partition}: the Raft snapshot could not be written \
                         ({e}); stopping this node"
                    );
                }
                tracing::debug!(
                    partition,
                    index = snap.index,
                    bytes = snap.data.len(),
                    "raft snapshot written, log compacted"
                );
                set.slots[idx].part.borrow_mut().compacted(snap);
            }
        }
    }
}
