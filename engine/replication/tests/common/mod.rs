//! What the replication simulations share: the seeded generator, the voters, the clock's steps,
//! and the simulated durable write.
#![allow(dead_code)] // each test binary uses its own part of this

use replication::eraftpb::Message;
use replication::{Durable, LogSnapshot, NodeId, Replica, Work};

/// splitmix64: small, seedable, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// `replica` with its election timeouts drawn from `rng` ([`Replica::seed_elections`]) rather
/// than from raft-rs's unseeded generator: a seed then repeats its elections as well as its
/// faults, so a failing seed fails again when run again.
pub fn seeded(mut replica: Replica, rng: &mut Rng) -> Replica {
    replica.seed_elections(rng.next());
    replica
}

/// A simulation's seeds repeat: each of the first `seeds` seeds, run twice, gives the same
/// `fingerprint` (what the run did), and seeds 0 and 1 differ (the fingerprint tells runs apart,
/// so the check can fail). With [`seeded`] replicas the elections repeat too.
pub fn assert_seeds_repeat(seeds: u64, fingerprint: impl Fn(u64) -> String) {
    for seed in 0..seeds {
        assert_eq!(
            fingerprint(seed),
            fingerprint(seed),
            "seed {seed} ran differently the second time"
        );
    }
    assert_ne!(fingerprint(0), fingerprint(1));
}

pub const VOTERS: [NodeId; 3] = [1, 2, 3];

/// Simulation steps per Raft tick: messages take a few steps, so many round trips fit in one
/// tick as on a real network (100 ms ticks, sub-millisecond loopback).
pub const STEPS_PER_TICK: u64 = 10;

/// The shell's durable write of `work`, on a simulated disk that a crash keeps: the entries
/// replace the log from their first index on, the hard state replaces the old one.
pub fn persist(disk: &mut Durable, work: &Work) {
    if let Some(s) = &work.snapshot {
        // A leader's snapshot replaces the whole log.
        disk.snapshot = Some(s.clone());
        disk.entries.clear();
    }
    if let Some(first) = work.entries.first() {
        let base = disk.snapshot.as_ref().map_or(1, |s| s.index + 1);
        disk.entries.truncate((first.index - base) as usize);
        disk.entries.extend(work.entries.iter().cloned());
    }
    if let Some(hs) = &work.hard_state {
        disk.hard_state = hs.clone();
    }
}

/// The shell's durable compaction: the snapshot replaces the entries it covers.
pub fn compact(disk: &mut Durable, snap: &LogSnapshot) {
    let base = disk.snapshot.as_ref().map_or(1, |s| s.index + 1);
    assert!(
        snap.index >= base,
        "compacting to {} behind the snapshot",
        snap.index
    );
    disk.entries.drain(..(snap.index + 1 - base) as usize);
    disk.snapshot = Some(snap.clone());
}

/// A crash's effect on the hard state's commit index: the broker's `RaftLog` writes a change of
/// the commit index alone without syncing it (Raft's commitIndex is volatile), so what survives
/// may be any earlier commit index. Any lower value is a superset of what the disk can hold.
pub fn lose_commit(disk: &mut Durable, rng: &mut Rng) {
    disk.hard_state.commit = rng.below(disk.hard_state.commit + 1);
}

/// Seeds per simulation test: `RINGLEADER_RAFT_SEEDS`, or `default`.
pub fn seeds(default: u64) -> u64 {
    std::env::var("RINGLEADER_RAFT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The simulated network between the nodes: each message arrives 1–3 steps after it is sent,
/// unless it touches the isolated node or is dropped; while drops are on, some arrive twice.
#[derive(Default)]
pub struct Net {
    /// (deliver at step, message)
    in_flight: Vec<(u64, Message)>,
    /// A node cut off from both others (none when healed).
    pub isolated: Option<NodeId>,
    pub drop_per_mille: u64,
}

impl Net {
    pub fn send(&mut self, rng: &mut Rng, step: u64, msgs: Vec<Message>) {
        for m in msgs {
            if self.isolated.is_some_and(|i| i == m.from || i == m.to)
                || rng.chance(self.drop_per_mille)
            {
                continue;
            }
            let at = step + 1 + rng.below(3);
            if self.drop_per_mille > 0 && rng.chance(20) {
                self.in_flight.push((at + rng.below(5), m.clone())); // a duplicate, later
            }
            self.in_flight.push((at, m));
        }
    }

    /// The messages due at `step`, taken off the network.
    pub fn due(&mut self, step: u64) -> Vec<Message> {
        let mut due = Vec::new();
        self.in_flight.retain(|(at, m)| {
            if *at <= step {
                due.push(m.clone());
                false
            } else {
                true
            }
        });
        due
    }

    /// A crashed node's incoming messages are lost.
    pub fn forget_to(&mut self, id: NodeId) {
        self.in_flight.retain(|(_, m)| m.to != id);
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }
}

/// A simulation of three nodes that the shared fault schedule can drive.
pub trait Faulty {
    /// The nodes that exist (up or down): what faults pick from.
    fn nodes(&self) -> Vec<NodeId> {
        VOTERS.to_vec()
    }
    /// The nodes that must agree once healed (the partition's replicas).
    fn members(&self) -> Vec<NodeId> {
        VOTERS.to_vec()
    }
    fn rng(&mut self) -> &mut Rng;
    fn net(&mut self) -> &mut Net;
    fn alive(&self, id: NodeId) -> bool;
    /// Crash a live node: it keeps only what it made durable.
    fn crash(&mut self, id: NodeId);
    fn restart(&mut self, id: NodeId);
    /// One step: deliver, tick, maybe propose (per mille), run work.
    fn run_step(&mut self, propose_per_mille: u64);
    /// The commit index a live node knows.
    fn commit_index(&self, id: NodeId) -> u64;
    /// The index of the last entry a node's state machine applied, if any.
    fn last_applied(&self, id: NodeId) -> Option<u64>;

    /// Every node has applied up to the same entry and knows the same commit index.
    fn agreed(&self) -> bool {
        let members = self.members();
        members.iter().all(|&id| {
            self.alive(id)
                && self.commit_index(id) == self.commit_index(members[0])
                && self.last_applied(id) == self.last_applied(members[0])
        })
    }
}

/// `steps` steps of faults: crashes (of a live node, sometimes leaving no majority), restarts,
/// isolating one node, healing, switching message drops (with duplicates) on and off; a
/// proposal offered at `propose_per_mille` per step. Returns the faults injected.
pub fn fault_phase<S: Faulty>(sim: &mut S, steps: u64, propose_per_mille: u64) -> usize {
    let mut faults = 0;
    for _ in 0..steps {
        let r = sim.rng().below(10_000);
        let nodes = sim.nodes();
        let pick = |sim: &mut S| nodes[sim.rng().below(nodes.len() as u64) as usize];
        if r < 8 {
            let id = pick(sim);
            if sim.alive(id) {
                sim.crash(id);
                faults += 1;
            }
        } else if r < 30 {
            let id = pick(sim);
            if !sim.alive(id) {
                sim.restart(id);
            }
        } else if r < 36 {
            let id = pick(sim);
            sim.net().isolated = Some(id);
            faults += 1;
        } else if r < 60 {
            sim.net().isolated = None;
        } else if r < 70 {
            let d = [0, 50, 200][sim.rng().below(3) as usize];
            sim.net().drop_per_mille = d;
        }
        sim.run_step(propose_per_mille);
    }
    faults
}

/// Heal (every node up, no isolation, no drops) and run until the nodes agree and the network
/// is empty; proposals in the first 2,000 steps commit everything from earlier terms (Raft
/// §5.4.2). False if they never agree within 20,000 steps.
pub fn heal_and_settle<S: Faulty>(sim: &mut S) -> bool {
    sim.net().isolated = None;
    sim.net().drop_per_mille = 0;
    for id in sim.nodes() {
        if !sim.alive(id) {
            sim.restart(id);
        }
    }
    for i in 0..20_000u64 {
        sim.run_step(if i < 2_000 { 50 } else { 0 });
        if i > 2_000 && sim.net().is_empty() && sim.agreed() {
            return true;
        }
    }
    false
}
