//! A replicated topic partition on three nodes through crashes (with torn writes), partitions,
//! drops and duplicates: the same `replication::topic::TopicReplica` the broker runs, over the
//! same `storage::topic_log::TopicLog` it writes, on in-memory directories that lose what was
//! not synced when a node crashes. The shell's steps are the broker's (`engine::data::replica`):
//! propose what the leader staged, send, drop the staged batches on stepping down, stage the
//! committed batches, persist, flush the topic log up to them, compact, settle. Deterministic
//! per seed (but for raft-rs's own election jitter, as in `cluster_sim`).
//!
//! Checked: at most one replica serves per term; a produce is acknowledged only once the
//! serving leader flushed it (its high watermark passed it) without stepping down in between,
//! and every acknowledged record is, after healing, in every node's topic log at the offset it
//! was acknowledged with; the three topic logs end byte for byte the same; the Raft logs are
//! compacted on the way (the compaction points are what every replica held, so no first
//! replica ever needs a snapshot of records).
//!
//! DeleteRecords run too: a serving leader proposes moving the log start up to an offset at
//! most its high watermark, acknowledged once its own start is there without stepping down in
//! between; after healing every node's log starts at the same offset, no earlier than any
//! acknowledged deletion.
//!
//! A fourth node added after the logs compacted is re-seeded: it refuses the leader's snapshot
//! (it holds none of the records), asks for the records over the same faulty network (requests
//! and chunks are lost, duplicated, delayed and cut off like Raft's messages), appends them as
//! the broker's shell does (`engine::data::replica::apply_seed`), takes the snapshot, becomes a
//! voter, and ends with the same log, byte for byte, through crashes of its own.

mod common;
use common::{
    assert_seeds_repeat, compact, fault_phase, heal_and_settle, lose_commit, persist, seeded,
    seeds, Faulty, Net, Rng, STEPS_PER_TICK, VOTERS,
};
use futures_lite::future::block_on;
use replication::topic::{decode_seed, seed_chunk, Apply, SeedMsg, Stepped, TopicReplica};
use replication::{Durable, LogSnapshot, NodeId, Replica};
use std::cell::RefCell;
use std::collections::BTreeMap;
use storage::batch::{decode_records, encode_batch, peek_batch, Peek};
use storage::io::MemDir;
use storage::topic_log::{Read, TopicLog, TopicLogConfig};

/// Compact every few entries, so the failovers run over compacted Raft logs.
const SNAPSHOT_BYTES: usize = 2048;

struct Node {
    replica: Option<TopicReplica>,
    log: Option<RefCell<TopicLog<MemDir>>>,
    dir: MemDir,
    disk: Durable,
    /// A re-seeding chunk received and not appended yet: (the sender's log start, batches).
    chunk: Option<(u64, Vec<u8>)>,
}

/// A re-seeding message in flight: (deliver at step, from, to, bytes).
type SeedInFlight = (u64, NodeId, NodeId, Vec<u8>);

/// A produce a serving leader staged: acknowledged once its high watermark passes `last`, unless
/// the node stopped leading first.
struct Pending {
    node: NodeId,
    value: Vec<u8>,
    offset: u64,
    deposed: u64,
}

/// A DeleteRecords a serving leader proposed: acknowledged once its log starts at `offset`.
struct PendingDelete {
    node: NodeId,
    offset: u64,
    deposed: u64,
}

struct Sim {
    rng: Rng,
    step: u64,
    nodes: BTreeMap<NodeId, Node>,
    net: Net,
    pending: Vec<Pending>,
    /// value → the offset it was acknowledged at.
    acked: BTreeMap<Vec<u8>, u64>,
    next_value: u64,
    /// term → the node that served in it.
    served: BTreeMap<u64, NodeId>,
    compactions: u64,
    /// The nodes that exist: the three first replicas, then any added.
    ids: Vec<NodeId>,
    seeds: Vec<SeedInFlight>,
    /// Chunks appended by a re-seeded replica.
    chunks: u64,
    deletes: Vec<PendingDelete>,
    /// The highest offset a DeleteRecords was acknowledged to, and how many were.
    deleted_to: u64,
    deletes_acked: u64,
    /// Re-seeded logs that restarted where the sender's started (its records before were
    /// deleted).
    restarts: u64,
    /// DeleteRecords are offered with the produces (one for every 20).
    deleting: bool,
}

fn config() -> TopicLogConfig {
    TopicLogConfig {
        segment_bytes: 4096,
        ..TopicLogConfig::default()
    }
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut rng = Rng(seed);
        let mut nodes = BTreeMap::new();
        for id in VOTERS {
            let dir = MemDir::new();
            let log = block_on(TopicLog::open(dir.clone(), config())).unwrap().0;
            nodes.insert(
                id,
                Node {
                    replica: Some(TopicReplica::new(
                        seeded(Replica::new(id, &VOTERS).unwrap(), &mut rng),
                        SNAPSHOT_BYTES,
                    )),
                    log: Some(RefCell::new(log)),
                    dir,
                    disk: Durable::default(),
                    chunk: None,
                },
            );
        }
        Self {
            rng,
            step: 0,
            nodes,
            net: Net::default(),
            pending: Vec::new(),
            acked: BTreeMap::new(),
            next_value: 0,
            served: BTreeMap::new(),
            compactions: 0,
            ids: VOTERS.to_vec(),
            seeds: Vec::new(),
            chunks: 0,
            deletes: Vec::new(),
            deleted_to: 0,
            deletes_acked: 0,
            restarts: 0,
            deleting: true,
        }
    }

    /// Add node `id` with an empty disk: it starts from the first voters, as a joined node's
    /// replica does, and every leader takes it into the group (`follow_members` on each tick).
    fn add_node(&mut self, id: NodeId) {
        let dir = MemDir::new();
        let log = block_on(TopicLog::open(dir.clone(), config())).unwrap().0;
        self.nodes.insert(
            id,
            Node {
                replica: Some(TopicReplica::new(
                    seeded(
                        Replica::restart(id, &VOTERS, Durable::default()).unwrap(),
                        &mut self.rng,
                    ),
                    SNAPSHOT_BYTES,
                )),
                log: Some(RefCell::new(log)),
                dir,
                disk: Durable::default(),
                chunk: None,
            },
        );
        self.ids.push(id);
    }

    /// Queue a re-seeding message, through the faults Raft's messages meet.
    fn send_seed(&mut self, from: NodeId, to: NodeId, bytes: Vec<u8>) {
        let net = &self.net;
        if net.isolated.is_some_and(|i| i == from || i == to) || self.rng.chance(net.drop_per_mille)
        {
            return;
        }
        let at = self.step + 1 + self.rng.below(3);
        if net.drop_per_mille > 0 && self.rng.chance(20) {
            let later = at + self.rng.below(5);
            self.seeds.push((later, from, to, bytes.clone()));
        }
        self.seeds.push((at, from, to, bytes));
    }

    /// Deliver the re-seeding messages due: a request is answered from the receiver's topic log
    /// (up to its high watermark), a chunk is kept for the receiver's next work if it is being
    /// re-seeded (the broker's `engine::data::replica::seed`).
    fn deliver_seeds(&mut self) {
        let step = self.step;
        let mut due = Vec::new();
        self.seeds.retain(|m| {
            if m.0 <= step {
                due.push(m.clone());
                false
            } else {
                true
            }
        });
        for (_, from, to, bytes) in due {
            let n = self.nodes.get_mut(&to).unwrap();
            let (Some(r), Some(log)) = (&n.replica, &n.log) else {
                continue; // crashed: lost
            };
            match decode_seed(&bytes).unwrap() {
                SeedMsg::Request { from: offset, upto } => {
                    let chunk = replication::topic::SEED_CHUNK_BYTES;
                    let (plan, start) = log.borrow().read_for_seed(offset, upto, chunk);
                    // The broker's answer (`engine::data::replica::seed`).
                    let batches = match plan {
                        Read::Data(plan) => Some(block_on(plan.read()).unwrap()),
                        _ => None,
                    };
                    if let Some(chunk) = seed_chunk(offset, upto, start, batches.as_deref()) {
                        self.send_seed(to, from, chunk);
                    }
                }
                SeedMsg::Chunk {
                    log_start, batches, ..
                } => {
                    if r.seeding() {
                        n.chunk = Some((log_start, batches.to_vec()));
                    }
                }
                // Moves of factor-1 partitions are not replicas' messages.
                SeedMsg::MoveRequest { .. } | SeedMsg::MoveChunk { .. } => {
                    unreachable!("a replica sent a move message")
                }
            }
        }
    }

    /// Append node `id`'s pending chunk as the broker's shell does, then ask for the next.
    fn apply_chunk(&mut self, id: NodeId) {
        let now = self.now_ms();
        let n = self.nodes.get_mut(&id).unwrap();
        let (Some(r), Some(log)) = (n.replica.as_mut(), n.log.as_ref()) else {
            return;
        };
        let Some((log_start, batches)) = n.chunk.take() else {
            return;
        };
        // The broker's own append (`engine::data::replica::apply_seed`).
        let seeded = block_on(TopicLog::append_seed(log, log_start, &batches)).unwrap();
        if seeded.restarted_at.is_some() {
            self.restarts += 1;
        }
        if seeded.appended.is_ok() {
            self.chunks += 1;
        }
        let next = r.seeded(log.borrow().next_offset(), now);
        if let Some((to, request)) = next {
            self.send_seed(id, to, request);
        }
    }

    fn now_ms(&self) -> i64 {
        (self.step * 100 / STEPS_PER_TICK) as i64
    }

    /// A producer's batch at whichever node serves, if one does (a client retries elsewhere).
    fn produce(&mut self) {
        let id = self.ids[self.rng.below(self.ids.len() as u64) as usize];
        let now = self.now_ms();
        let n = self.nodes.get_mut(&id).unwrap();
        let (Some(r), Some(log)) = (&n.replica, &n.log) else {
            return;
        };
        if !r.serving() {
            return;
        }
        let value = format!("v{}", self.next_value).into_bytes();
        self.next_value += 1;
        let mut batch = Vec::new();
        encode_batch(0, now, &[(None, Some(&value))], &mut batch);
        // A producer without an id: accepted as it is (no sequence to check).
        batch[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        let staged = log.borrow_mut().stage(&mut batch, now, false).unwrap();
        self.pending.push(Pending {
            node: id,
            value,
            offset: staged.base_offset,
            deposed: r.deposed(),
        });
    }

    /// A DeleteRecords at whichever node serves, if one does, to an offset between its log
    /// start and its high watermark (the broker checks the same bounds).
    fn delete(&mut self) {
        let id = self.ids[self.rng.below(self.ids.len() as u64) as usize];
        let now = self.now_ms();
        let n = self.nodes.get_mut(&id).unwrap();
        let (Some(r), Some(log)) = (n.replica.as_mut(), &n.log) else {
            return;
        };
        let (start, hw) = {
            let l = log.borrow();
            (l.log_start_offset(), l.high_watermark())
        };
        if !r.serving() || hw <= start {
            return;
        }
        let offset = start + 1 + self.rng.below(hw - start);
        if r.propose_delete(offset, now).is_some() {
            self.deletes.push(PendingDelete {
                node: id,
                offset,
                deposed: r.deposed(),
            });
        }
    }

    /// Carry out node `id`'s work until it has none, as the broker's writer does.
    fn run_node(&mut self, id: NodeId) {
        self.apply_chunk(id);
        let now = self.now_ms();
        loop {
            let n = self.nodes.get_mut(&id).unwrap();
            let (Some(r), Some(log)) = (n.replica.as_mut(), n.log.as_ref()) else {
                return;
            };
            {
                let l = log.borrow();
                r.propose_staged(
                    |from| {
                        l.pending_from(from, replication::topic::MAX_ENTRY_BATCHES_BYTES)
                            .map(|(_, last, b)| (last, b))
                    },
                    now,
                );
            }
            let Some(tw) = r.work() else { return };
            let send = tw.work.send_now.clone();
            if tw.stepped_down && log.borrow().next_offset() > log.borrow().high_watermark() {
                // Back to what was flushed (the broker reopens the log the same way).
                let hw = log.borrow().high_watermark();
                let dir = n.dir.clone();
                block_on(storage::log::discard_unacknowledged(
                    &dir,
                    &storage::log::LogConfig {
                        segment_bytes: config().segment_bytes,
                        max_batch_bytes: 4 << 20,
                        read_chunk_bytes: config().read_chunk_bytes,
                    },
                    hw,
                ))
                .unwrap();
                *log.borrow_mut() = block_on(TopicLog::open(dir, config())).unwrap().0;
            }
            if let Some(s) = &tw.work.snapshot {
                assert_eq!(
                    replication::topic::snapshot_end(&s.data),
                    Some(log.borrow().next_offset()),
                    "node {id} installed a snapshot of records it lacks"
                );
            }
            let mut flush_to = None;
            for a in &tw.apply {
                if let Apply::Batches { end, .. } = a {
                    log.borrow_mut().stage_replicated(a.batches()).unwrap();
                    flush_to = Some(*end);
                }
            }
            if tw.work.snapshot.is_some() {
                // The snapshot replaces the entries a restart would replay: synced first (the
                // broker's `engine::data::replica::writer`).
                block_on(TopicLog::sync(log)).unwrap();
            }
            persist(&mut n.disk, &tw.work);
            let after = r.persisted(&tw.work);
            if let Some(end) = flush_to {
                // Unsynced, as the broker writes it: a crash may tear it, and the Raft log's
                // replay brings it back.
                block_on(TopicLog::write_upto(log, end)).unwrap();
            }
            for a in &tw.apply {
                if let Apply::DeleteRecords { offset, .. } = a {
                    // The broker's step (`engine::data::replica::delete_records`).
                    assert!(
                        *offset <= log.borrow().high_watermark(),
                        "node {id}: a deletion past its high watermark"
                    );
                    block_on(TopicLog::delete_records(log, *offset)).unwrap();
                }
            }
            for a in &tw.apply {
                if let Apply::Compact { index, end } = a {
                    if *index > r.replica().snapshot_index() {
                        assert!(log.borrow().high_watermark() >= *end);
                        // Synced before the Raft log forgets the entries (the broker's
                        // `engine::data::replica::compact`).
                        block_on(TopicLog::sync(log)).unwrap();
                        let snap = LogSnapshot {
                            index: *index,
                            term: r.replica().term_at(*index),
                            data: replication::topic::snapshot_data(*end),
                            conf: Some(r.replica().conf_at(*index)),
                        };
                        compact(&mut n.disk, &snap);
                        r.compacted(*index, snap.data);
                        self.compactions += 1;
                    }
                }
            }
            r.settle(log.borrow().next_offset(), now);
            if r.serving() {
                let term = r.role().term;
                let first = *self.served.entry(term).or_insert(id);
                assert_eq!(first, id, "two replicas served in term {term}");
            }
            self.net.send(&mut self.rng, self.step, send);
            self.net.send(&mut self.rng, self.step, after.send);
        }
    }

    /// Acknowledge what a serving leader flushed, refuse what a deposed one staged.
    fn settle_pending(&mut self) {
        let nodes = &self.nodes;
        let acked = &mut self.acked;
        self.pending.retain(|p| {
            let n = &nodes[&p.node];
            let (Some(r), Some(log)) = (&n.replica, &n.log) else {
                return false; // crashed: the client never heard
            };
            if r.deposed() != p.deposed {
                return false; // refused with NOT_LEADER_OR_FOLLOWER
            }
            if log.borrow().high_watermark() > p.offset {
                acked.insert(p.value.clone(), p.offset);
                return false;
            }
            true
        });
        let (deleted_to, deletes_acked) = (&mut self.deleted_to, &mut self.deletes_acked);
        self.deletes.retain(|d| {
            let n = &nodes[&d.node];
            let (Some(r), Some(log)) = (&n.replica, &n.log) else {
                return false;
            };
            if r.deposed() != d.deposed {
                return false;
            }
            if log.borrow().log_start_offset() >= d.offset {
                *deleted_to = (*deleted_to).max(d.offset);
                *deletes_acked += 1;
                return false;
            }
            true
        });
    }

    /// Every record of node `id`'s topic log: offset → value, and the raw bytes.
    fn contents(&self, id: NodeId) -> (BTreeMap<u64, Vec<u8>>, Vec<u8>) {
        let log = self.nodes[&id].log.as_ref().unwrap().borrow();
        let mut records = BTreeMap::new();
        let mut bytes = Vec::new();
        let mut offset = log.log_start_offset();
        while offset < log.high_watermark() {
            let Read::Data(plan) = log.read(offset, 1 << 20, true) else {
                panic!("node {id}: nothing to read at {offset}")
            };
            let chunk = block_on(plan.read()).unwrap();
            let mut pos = 0;
            while pos < chunk.len() {
                let Ok(Peek::Batch(h)) = peek_batch(&chunk[pos..], 0, chunk.len() - pos) else {
                    panic!("node {id}: a torn batch at {offset}")
                };
                for rec in decode_records(&chunk[pos..pos + h.size], &h, 0).unwrap() {
                    records.insert(rec.offset, rec.value.unwrap_or_default());
                }
                offset = h.last_offset() + 1;
                pos += h.size;
            }
            bytes.extend_from_slice(&chunk);
        }
        (records, bytes)
    }
}

impl Sim {
    /// Every node's topic log holds the same records, byte for byte, and every acknowledged
    /// record is there at the offset it was acknowledged with.
    fn assert_converged(&self, seed: u64) {
        let start = |id: &NodeId| {
            let n = &self.nodes[id];
            n.log.as_ref().unwrap().borrow().log_start_offset()
        };
        let log_start = start(&self.ids[0]);
        for id in &self.ids {
            assert_eq!(
                start(id),
                log_start,
                "seed {seed}: node {id}'s log start differs"
            );
        }
        assert!(
            log_start >= self.deleted_to,
            "seed {seed}: an acknowledged deletion to {} undone (start {log_start})",
            self.deleted_to
        );
        let (first, bytes) = self.contents(self.ids[0]);
        for id in &self.ids[1..] {
            let (records, other) = self.contents(*id);
            assert_eq!(records, first, "seed {seed}: node {id}'s records differ");
            assert_eq!(other, bytes, "seed {seed}: node {id}'s log bytes differ");
        }
        for (value, offset) in self.acked.iter().filter(|(_, &o)| o >= log_start) {
            assert_eq!(
                first.get(offset),
                Some(value),
                "seed {seed}: the record acknowledged at offset {offset} is gone"
            );
        }
        assert!(!self.acked.is_empty(), "seed {seed}: nothing acknowledged");
    }
}

impl Faulty for Sim {
    fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }
    fn net(&mut self) -> &mut Net {
        &mut self.net
    }
    fn alive(&self, id: NodeId) -> bool {
        self.nodes[&id].replica.is_some()
    }
    fn crash(&mut self, id: NodeId) {
        let n = self.nodes.get_mut(&id).unwrap();
        n.replica = None;
        n.log = None;
        // Power loss: unsynced bytes are torn at a random length.
        let seed = self.rng.next();
        let mut torn = Rng(seed);
        n.dir.crash(|_, len| torn.below(len as u64 + 1) as usize);
        n.chunk = None;
        lose_commit(&mut n.disk, &mut self.rng);
        self.net.forget_to(id);
    }
    fn restart(&mut self, id: NodeId) {
        let n = self.nodes.get_mut(&id).unwrap();
        let log = block_on(TopicLog::open(n.dir.clone(), config())).unwrap().0;
        n.log = Some(RefCell::new(log));
        n.replica = Some(TopicReplica::new(
            seeded(
                Replica::restart(id, &VOTERS, n.disk.clone()).unwrap(),
                &mut self.rng,
            ),
            SNAPSHOT_BYTES,
        ));
    }
    fn run_step(&mut self, propose_per_mille: u64) {
        self.step += 1;
        let now = self.now_ms();
        for m in self.net.due(self.step) {
            let to = m.to;
            let n = self.nodes.get_mut(&to).unwrap();
            let (Some(r), Some(log)) = (n.replica.as_mut(), n.log.as_ref()) else {
                continue;
            };
            let log_end = log.borrow().next_offset();
            if let Stepped::Seed {
                to: from,
                request: Some(request),
            } = r.step(m, log_end, now)
            {
                self.send_seed(to, from, request);
            }
        }
        self.deliver_seeds();
        if self.step.is_multiple_of(STEPS_PER_TICK) {
            for id in self.ids.clone() {
                if let Some(r) = self.nodes.get_mut(&id).unwrap().replica.as_mut() {
                    r.replica_mut().tick(now);
                    r.replica_mut().follow_members(&self.ids, &[]);
                }
            }
        }
        if self.rng.chance(propose_per_mille) {
            self.produce();
        }
        if self.deleting && self.rng.chance(propose_per_mille / 20) {
            self.delete();
        }
        for id in self.ids.clone() {
            self.run_node(id);
        }
        self.settle_pending();
    }
    fn nodes(&self) -> Vec<NodeId> {
        self.ids.clone()
    }
    fn members(&self) -> Vec<NodeId> {
        self.ids.clone()
    }
    fn commit_index(&self, id: NodeId) -> u64 {
        self.nodes[&id]
            .replica
            .as_ref()
            .map_or(0, |r| r.replica().commit_index())
    }
    fn last_applied(&self, id: NodeId) -> Option<u64> {
        self.nodes[&id]
            .replica
            .as_ref()
            .map(|r| r.replica().applied_index())
    }
}

#[test]
fn acknowledged_records_survive_faults_and_the_replicas_converge() {
    let (mut acked, mut compactions, mut faults, mut deletes) = (0usize, 0u64, 0usize, 0u64);
    for seed in 0..seeds(60) {
        let mut sim = Sim::new(seed);
        for _ in 0..4 {
            faults += fault_phase(&mut sim, 2_500, 300);
        }
        assert!(heal_and_settle(&mut sim), "seed {seed}: never agreed");
        // What is still pending was staged by the leader that serves now: it commits too.
        for _ in 0..200 {
            sim.run_step(0);
        }
        sim.assert_converged(seed);
        acked += sim.acked.len();
        compactions += sim.compactions;
        deletes += sim.deletes_acked;
    }
    assert!(compactions > 0, "the Raft logs never compacted");
    assert!(deletes > 0, "no DeleteRecords was ever acknowledged");
    eprintln!(
        "topic_sim: {acked} records acknowledged, {compactions} compactions, {deletes} deletions, \
         {faults} faults"
    );
}

/// A seed repeats: faults, delays and elections (`common::seeded`), so a failing seed fails
/// again.
#[test]
fn a_seed_runs_the_same_every_time() {
    let fingerprint = |seed| {
        let mut sim = Sim::new(seed);
        let faults = fault_phase(&mut sim, 2_500, 300);
        assert!(heal_and_settle(&mut sim), "seed {seed}: never agreed");
        format!(
            "step {} faults {faults} acked {:?} served {:?} compactions {} deletes {}",
            sim.step, sim.acked, sim.served, sim.compactions, sim.deletes_acked
        )
    };
    assert_seeds_repeat(3, fingerprint);
}

#[test]
fn a_replica_added_after_compaction_is_re_seeded_through_faults_and_converges() {
    let (mut chunks, mut acked, mut restarts) = (0u64, 0usize, 0u64);
    for seed in 0..seeds(20) {
        let mut sim = Sim::new(1_000 + seed);
        // Half the seeds delete records: node 4 then restarts its log where the others' start;
        // the other half re-seed it from offset 0.
        sim.deleting = seed % 2 == 0;
        fault_phase(&mut sim, 2_500, 300);
        assert!(heal_and_settle(&mut sim), "seed {seed}: never agreed");
        assert!(
            sim.compactions > 0,
            "seed {seed}: nothing compacted before the join"
        );
        sim.add_node(4);
        for _ in 0..3 {
            fault_phase(&mut sim, 2_500, 300);
        }
        assert!(
            heal_and_settle(&mut sim),
            "seed {seed}: never agreed with node 4"
        );
        for _ in 0..200 {
            sim.run_step(0);
        }
        let leader = sim
            .ids
            .iter()
            .copied()
            .find(|id| sim.nodes[id].replica.as_ref().is_some_and(|r| r.serving()))
            .unwrap_or_else(|| panic!("seed {seed}: no leader serves"));
        let membership = sim.nodes[&leader]
            .replica
            .as_ref()
            .unwrap()
            .replica()
            .membership();
        assert!(
            membership.voters.contains(&4),
            "seed {seed}: node 4 never became a voter ({membership:?})"
        );
        sim.assert_converged(seed);
        chunks += sim.chunks;
        acked += sim.acked.len();
        restarts += sim.restarts;
    }
    assert!(chunks > 0, "no replica was ever re-seeded");
    assert!(
        restarts > 0,
        "no re-seeded log ever restarted past deleted records"
    );
    eprintln!(
        "topic_sim join: {acked} records acknowledged, {chunks} chunks appended by node 4, \
         {restarts} re-seeded logs restarted at the sender's start"
    );
}
