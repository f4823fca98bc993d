//! A deterministic simulation of the cluster's metadata log (`replication::metadata`) on three
//! replicas: the same `Replica` and `MetadataState` a node of a cluster is to run, driven
//! through the faulty network of `cluster_sim.rs` (delays, drops, duplicates, an isolated node)
//! with crashes and restarts. Every node proposes topic changes; a follower hands its proposal
//! to the leader it knows (`Replica::propose_or_forward`), through the same faulty network. Names come from a small pool with
//! '.'/'_' collisions, so creates race, and deletes and growth interleave with them.
//!
//! Invariants checked:
//! - every node that applies an index gets the same result there (apply is deterministic);
//! - a proposal the network delivered twice takes effect once;
//! - a proposer's answer (the result it saw when its entry applied) is what every node applies;
//! - no answered change is lost: after healing every node has applied every answered entry;
//! - replicas converge to one state, and replaying the log into a fresh state (a restart)
//!   gives that state again;
//! - at most one topic per name at any point: a create of a name that exists always fails.

mod common;
use common::{
    fault_phase, heal_and_settle, lose_commit, persist, seeds, Faulty, Net, Rng, STEPS_PER_TICK,
    VOTERS,
};
use coordinator::topics::{Topic, CONSUMER_OFFSETS};
use replication::eraftpb::{Entry, Message};
use replication::metadata::{Applied, Command, MetaError, MetadataState, Proposal};
use replication::{Durable, NodeId, Replica, Work};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

const NAMES: [&str; 5] = ["orders", "a.b", "a_b", "clicks", "x"];

fn offsets() -> Topic {
    Topic {
        name: CONSUMER_OFFSETS.into(),
        id: Uuid::from_u128(1),
        partitions: 50,
        internal: true,
        configs: BTreeMap::new(),
        replication_factor: 1,
    }
}

struct Node {
    replica: Option<Replica>,
    disk: Durable,
    state: MetadataState,
    /// What this node applied since its last start: index → result.
    applied: BTreeMap<u64, Applied>,
    writing: Option<(Work, u64)>,
    next_seq: u64,
}

struct Sim {
    rng: Rng,
    step: u64,
    nodes: HashMap<NodeId, Node>,
    net: Net,
    /// (origin, seq) → (index, result) the origin answered its client with.
    answered: HashMap<(NodeId, u64), (u64, Result<(), MetaError>)>,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let nodes = VOTERS
            .iter()
            .map(|&id| {
                let n = Node {
                    replica: Some(Replica::new(id, &VOTERS).unwrap()),
                    disk: Durable::default(),
                    state: MetadataState::new(&VOTERS, offsets()),
                    applied: BTreeMap::new(),
                    writing: None,
                    next_seq: 0,
                };
                (id, n)
            })
            .collect();
        Sim {
            rng: Rng(seed),
            step: 0,
            nodes,
            net: Net::default(),
            answered: HashMap::new(),
        }
    }

    fn send(&mut self, msgs: Vec<Message>) {
        self.net.send(&mut self.rng, self.step, msgs);
    }

    fn apply(&mut self, id: NodeId, committed: Vec<Entry>) {
        for e in committed {
            let node = self.nodes.get_mut(&id).unwrap();
            let applied = node.state.apply(e.index, &e.data);
            // Determinism: the same result at this index on every node that applied it.
            for (other, n) in &self.nodes {
                if let Some(a) = n.applied.get(&e.index) {
                    assert_eq!(a, &applied, "nodes {id} and {other} differ at {}", e.index);
                }
            }
            let node = self.nodes.get_mut(&id).unwrap();
            if let Some((origin, seq)) = applied.proposal {
                // A duplicate of a forwarded proposal (the network delivered it twice) is
                // refused; its proposer answered at the first one.
                if origin == id && !matches!(applied.result, Err(MetaError::Duplicate(..))) {
                    // The proposer answers its client now, with this result.
                    let prev = self
                        .answered
                        .insert((origin, seq), (e.index, applied.result.clone()));
                    if let Some(prev) = prev {
                        assert_eq!(prev, (e.index, applied.result.clone()));
                    }
                }
            }
            node.applied.insert(e.index, applied);
        }
    }

    fn drive(&mut self, id: NodeId) {
        loop {
            let node = self.nodes.get_mut(&id).unwrap();
            if node.replica.is_none() {
                return;
            }
            if let Some((_, due)) = &node.writing {
                if *due > self.step {
                    return;
                }
                let (work, _) = node.writing.take().unwrap();
                persist(&mut node.disk, &work);
                self.apply(id, work.committed.clone());
                let node = self.nodes.get_mut(&id).unwrap();
                let after = node.replica.as_mut().unwrap().persisted(&work);
                self.send(after.send);
                self.apply(id, after.committed);
                continue;
            }
            let Some(work) = node.replica.as_mut().unwrap().work() else {
                return;
            };
            let send_now = work.send_now.clone();
            self.send(send_now);
            let due = self.step + self.rng.below(4);
            self.nodes.get_mut(&id).unwrap().writing = Some((work, due));
        }
    }

    fn random_command(&mut self) -> Command {
        let name = NAMES[self.rng.below(NAMES.len() as u64) as usize].to_string();
        match self.rng.below(10) {
            0..=4 => Command::CreateTopic {
                name,
                // A small id space, so an id already used comes up too.
                id: Uuid::from_u128(2 + self.rng.below(500) as u128),
                partitions: 1 + self.rng.below(6) as i32,
                configs: BTreeMap::new(),
                first_leader: self.rng.below(3) as u32,
                replication_factor: 1,
            },
            5..=6 => Command::DeleteTopic { name },
            7..=8 => Command::CreatePartitions {
                changes: vec![(name, 1 + self.rng.below(12) as i32)],
            },
            _ => Command::SetConfigs {
                name,
                configs: [("retention.ms".to_string(), self.rng.below(9).to_string())].into(),
            },
        }
    }

    /// A random live node proposes; a follower hands the proposal to the leader it knows.
    fn propose(&mut self) {
        let origin = VOTERS[self.rng.below(3) as usize];
        if self.nodes[&origin].replica.is_none() {
            return;
        }
        let command = self.random_command();
        let node = self.nodes.get_mut(&origin).unwrap();
        node.next_seq += 1;
        let data = Proposal {
            origin,
            seq: node.next_seq,
            command,
        }
        .encode()
        .unwrap();
        // A follower hands it to the leader in a message (raft-rs's proposal forwarding).
        let r = self
            .nodes
            .get_mut(&origin)
            .unwrap()
            .replica
            .as_mut()
            .unwrap();
        let _ = r.propose_or_forward(data);
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
        n.writing = None;
        lose_commit(&mut n.disk, &mut self.rng);
        self.net.forget_to(id);
    }

    fn restart(&mut self, id: NodeId) {
        let n = self.nodes.get_mut(&id).unwrap();
        n.replica = Some(Replica::restart(id, &VOTERS, n.disk.clone()).unwrap());
        // The registry is rebuilt from the log, as committed entries are handed out again.
        n.state = MetadataState::new(&VOTERS, offsets());
        n.applied.clear();
    }

    fn run_step(&mut self, propose_per_mille: u64) {
        self.step += 1;
        let now = self.step;
        for m in self.net.due(now) {
            let to = m.to;
            if let Some(r) = self.nodes.get_mut(&to).unwrap().replica.as_mut() {
                r.step(m).unwrap();
            }
        }
        if now % STEPS_PER_TICK == 0 {
            for id in VOTERS {
                if let Some(r) = self.nodes.get_mut(&id).unwrap().replica.as_mut() {
                    r.tick((now * 10) as i64);
                }
            }
        }
        if self.rng.chance(propose_per_mille) {
            self.propose();
        }
        for id in VOTERS {
            self.drive(id);
        }
    }

    fn commit_index(&self, id: NodeId) -> u64 {
        self.nodes[&id].replica.as_ref().unwrap().commit_index()
    }

    fn last_applied(&self, id: NodeId) -> Option<u64> {
        self.nodes[&id].applied.keys().next_back().copied()
    }
}

/// (answered Ok, answered with an error, faults, duplicates refused)
fn run(seed: u64, steps: u64) -> (usize, usize, usize, usize) {
    let mut sim = Sim::new(seed);
    let faults = fault_phase(&mut sim, steps, 150);
    assert!(
        heal_and_settle(&mut sim),
        "seed {seed}: the metadata log did not converge"
    );
    let first = &sim.nodes[&1];
    for id in VOTERS {
        let n = &sim.nodes[&id];
        assert_eq!(
            n.state, first.state,
            "seed {seed}: node {id}'s metadata differs"
        );
        assert_eq!(
            n.applied, first.applied,
            "seed {seed}: node {id} applied differently"
        );
    }
    // No answered change lost, and answered as every node applied it.
    let (mut ok, mut err) = (0, 0);
    for ((origin, seq), (index, result)) in &sim.answered {
        let a = first.applied.get(index).unwrap_or_else(|| {
            panic!("seed {seed}: answered entry {index} ({origin}, {seq}) lost")
        });
        assert_eq!(
            a.proposal,
            Some((*origin, *seq)),
            "seed {seed}: index {index}"
        );
        assert_eq!(&a.result, result, "seed {seed}: index {index}");
        if result.is_ok() {
            ok += 1;
        } else {
            err += 1;
        }
    }
    // A restart replays the log into a fresh state: the same state again.
    let mut replayed = MetadataState::new(&VOTERS, offsets());
    // Only what is applied: a follower's disk may still hold an uncommitted tail.
    let entries: Vec<&Entry> = first
        .disk
        .entries
        .iter()
        .filter(|e| !e.data.is_empty() && e.index <= first.state.applied_index())
        .collect();
    for e in &entries {
        replayed.apply(e.index, &e.data);
    }
    assert_eq!(replayed, first.state, "seed {seed}: replay differs");
    // Creates of a name that existed failed (checked by replaying the answers in log order).
    let mut names: BTreeMap<String, bool> = BTreeMap::new();
    for e in &entries {
        let p = Proposal::decode(&e.data).unwrap();
        let result = &first.applied[&e.index].result;
        match p.command {
            Command::CreateTopic { name, .. } => {
                if names.get(&name).copied().unwrap_or(false)
                    && !matches!(result, Err(MetaError::Duplicate(..)))
                {
                    assert_eq!(result, &Err(MetaError::AlreadyExists(name.clone())));
                }
                if result.is_ok() {
                    names.insert(name, true);
                }
            }
            Command::DeleteTopic { name } if result.is_ok() => {
                names.insert(name, false);
            }
            _ => {}
        }
    }
    // A proposal takes effect at one index only, however often it arrived.
    let mut effective = std::collections::HashSet::new();
    for (index, a) in &first.applied {
        if let (Some(p), false) = (
            a.proposal,
            matches!(a.result, Err(MetaError::Duplicate(..))),
        ) {
            assert!(
                effective.insert(p),
                "seed {seed}: {p:?} took effect twice, again at {index}"
            );
        }
    }
    let duplicates = first
        .applied
        .values()
        .filter(|a| matches!(a.result, Err(MetaError::Duplicate(..))))
        .count();
    (ok, err, faults, duplicates)
}

#[test]
fn three_nodes_agree_on_every_topic_change_under_faults() {
    let seeds = seeds(40);
    let (mut ok, mut err, mut faults, mut dups) = (0, 0, 0, 0);
    for seed in 0..seeds {
        let (o, e, f, d) = run(seed, 4_000);
        ok += o;
        err += e;
        faults += f;
        dups += d;
    }
    eprintln!(
        "{seeds} seeds: {ok} changes answered ok, {err} refused, {faults} faults, \
         {dups} duplicated proposals applied once"
    );
    // The runs must have done something of each kind.
    assert!(ok > seeds as usize * 5, "only {ok} changes answered ok");
    assert!(err > seeds as usize * 2, "only {err} changes refused");
    assert!(faults > seeds as usize, "only {faults} faults");
}
