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
//! compacted on the way (the compaction points are what every replica held, so no node ever
//! needs a snapshot of records, which would stop it).

mod common;
use common::{
    compact, fault_phase, heal_and_settle, lose_commit, persist, seeds, Faulty, Net, Rng,
    STEPS_PER_TICK, VOTERS,
};
use futures_lite::future::block_on;
use replication::topic::{Apply, TopicReplica};
use replication::{Durable, LogSnapshot, NodeId, Replica};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
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
}

/// A produce a serving leader staged: acknowledged once its high watermark passes `last`, unless
/// the node stopped leading first.
struct Pending {
    node: NodeId,
    value: Vec<u8>,
    offset: u64,
    deposed: u64,
}

struct Sim {
    rng: Rng,
    step: u64,
    nodes: HashMap<NodeId, Node>,
    net: Net,
    pending: Vec<Pending>,
    /// value → the offset it was acknowledged at.
    acked: BTreeMap<Vec<u8>, u64>,
    next_value: u64,
    /// term → the node that served in it.
    served: HashMap<u64, NodeId>,
    compactions: u64,
}

fn config() -> TopicLogConfig {
    TopicLogConfig {
        segment_bytes: 4096,
        ..TopicLogConfig::default()
    }
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut nodes = HashMap::new();
        for id in VOTERS {
            let dir = MemDir::new();
            let log = block_on(TopicLog::open(dir.clone(), config())).unwrap().0;
            nodes.insert(
                id,
                Node {
                    replica: Some(TopicReplica::new(
                        Replica::new(id, &VOTERS).unwrap(),
                        SNAPSHOT_BYTES,
                    )),
                    log: Some(RefCell::new(log)),
                    dir,
                    disk: Durable::default(),
                },
            );
        }
        Self {
            rng: Rng(seed),
            step: 0,
            nodes,
            net: Net::default(),
            pending: Vec::new(),
            acked: BTreeMap::new(),
            next_value: 0,
            served: HashMap::new(),
            compactions: 0,
        }
    }

    fn now_ms(&self) -> i64 {
        (self.step * 100 / STEPS_PER_TICK) as i64
    }

    /// A producer's batch at whichever node serves, if one does (a client retries elsewhere).
    fn produce(&mut self) {
        let id = VOTERS[self.rng.below(3) as usize];
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

    /// Carry out node `id`'s work until it has none, as the broker's writer does.
    fn run_node(&mut self, id: NodeId) {
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
                    "node {id} was sent a snapshot of records it lacks"
                );
            }
            let mut flush_to = None;
            for a in &tw.apply {
                if let Apply::Batches { end, .. } = a {
                    log.borrow_mut().stage_replicated(a.batches()).unwrap();
                    flush_to = Some(*end);
                }
            }
            persist(&mut n.disk, &tw.work);
            let after = r.persisted(&tw.work);
            if let Some(end) = flush_to {
                block_on(TopicLog::flush_upto(log, end)).unwrap();
            }
            for a in &tw.apply {
                if let Apply::Compact { index, end } = a {
                    if *index > r.replica().snapshot_index() {
                        assert!(log.borrow().high_watermark() >= *end);
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
        lose_commit(&mut n.disk, &mut self.rng);
        self.net.forget_to(id);
    }
    fn restart(&mut self, id: NodeId) {
        let n = self.nodes.get_mut(&id).unwrap();
        let log = block_on(TopicLog::open(n.dir.clone(), config())).unwrap().0;
        n.log = Some(RefCell::new(log));
        n.replica = Some(TopicReplica::new(
            Replica::restart(id, &VOTERS, n.disk.clone()).unwrap(),
            SNAPSHOT_BYTES,
        ));
    }
    fn run_step(&mut self, propose_per_mille: u64) {
        self.step += 1;
        for m in self.net.due(self.step) {
            if let Some(r) = self.nodes.get_mut(&m.to).unwrap().replica.as_mut() {
                let _ = r.replica_mut().step(m);
            }
        }
        if self.step.is_multiple_of(STEPS_PER_TICK) {
            let now = self.now_ms();
            for id in VOTERS {
                if let Some(r) = self.nodes.get_mut(&id).unwrap().replica.as_mut() {
                    r.replica_mut().tick(now);
                }
            }
        }
        if self.rng.chance(propose_per_mille) {
            self.produce();
        }
        for id in VOTERS {
            self.run_node(id);
        }
        self.settle_pending();
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
    let (mut acked, mut compactions, mut faults) = (0usize, 0u64, 0usize);
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
        let (first, bytes) = sim.contents(VOTERS[0]);
        for id in &VOTERS[1..] {
            let (records, other) = sim.contents(*id);
            assert_eq!(records, first, "seed {seed}: node {id}'s records differ");
            assert_eq!(other, bytes, "seed {seed}: node {id}'s log bytes differ");
        }
        for (value, offset) in &sim.acked {
            assert_eq!(
                first.get(offset),
                Some(value),
                "seed {seed}: the record acknowledged at offset {offset} is gone"
            );
        }
        assert!(!sim.acked.is_empty(), "seed {seed}: nothing acknowledged");
        acked += sim.acked.len();
        compactions += sim.compactions;
    }
    assert!(compactions > 0, "the Raft logs never compacted");
    eprintln!(
        "topic_sim: {acked} records acknowledged, {compactions} compactions, {faults} faults"
    );
}
