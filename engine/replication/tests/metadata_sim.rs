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
//!
//! Replicas compact their logs at random points to a snapshot of their state
//! (`MetadataState::encode_snapshot`, as `engine::runtime::metadata_log` does), so a node that
//! was down or cut off catches up by installing the leader's snapshot, and a restart starts from
//! its own; the checks above then hold against the history of every index any node applied.

mod common;
use common::{
    assert_seeds_repeat, compact, fault_phase, heal_and_settle, lose_commit, persist, seeded,
    seeds, Faulty, Net, Rng, STEPS_PER_TICK, VOTERS,
};
use coordinator::topics::{Topic, CONSUMER_OFFSETS};
use replication::eraftpb::{Entry, Message};
use replication::metadata::{Applied, Command, MetaError, MetadataState, Proposal};
use replication::{Durable, LogSnapshot, NodeId, Replica, Work};
use std::collections::BTreeMap;
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
    nodes: BTreeMap<NodeId, Node>,
    net: Net,
    /// (origin, seq) → (index, result) the origin answered its client with.
    answered: BTreeMap<(NodeId, u64), (u64, Result<(), MetaError>)>,
    /// Every index any node applied, and what applying it did (the same on every node).
    history: BTreeMap<u64, Applied>,
    /// The command of every such index that held one.
    commands: BTreeMap<u64, Command>,
    /// Per mille of drives after which a node compacts its log to a snapshot of its state.
    compact_per_mille: u64,
    compactions: usize,
    installs: usize,
}

/// A node's state as its disk holds it: the snapshot's, or the first state.
fn restored(disk: &Durable) -> MetadataState {
    match &disk.snapshot {
        Some(s) => MetadataState::decode_snapshot(&s.data, &offsets()).unwrap(),
        None => MetadataState::new(&VOTERS, offsets()),
    }
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = Rng(seed);
        let nodes = VOTERS
            .iter()
            .map(|&id| {
                let n = Node {
                    replica: Some(seeded(Replica::new(id, &VOTERS).unwrap(), &mut rng)),
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
            rng,
            step: 0,
            nodes,
            net: Net::default(),
            answered: BTreeMap::new(),
            history: BTreeMap::new(),
            commands: BTreeMap::new(),
            compact_per_mille: 0,
            compactions: 0,
            installs: 0,
        }
    }

    /// Compact `id`'s log to everything it applied, as the broker's metadata log does.
    fn compact(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).unwrap();
        let r = node.replica.as_mut().unwrap();
        let index = r.applied_index();
        if index <= r.snapshot_index() {
            return;
        }
        let snap = LogSnapshot {
            index,
            term: r.term_at(index),
            data: node.state.encode_snapshot(index),
            conf: Some(r.conf_at(index)),
        };
        compact(&mut node.disk, &snap);
        r.compact(index, snap.data);
        self.compactions += 1;
    }

    fn send(&mut self, msgs: Vec<Message>) {
        self.net.send(&mut self.rng, self.step, msgs);
    }

    fn apply(&mut self, id: NodeId, committed: Vec<Entry>) {
        for e in committed {
            let node = self.nodes.get_mut(&id).unwrap();
            let applied = node.state.apply(e.index, &e.data);
            // Determinism: the same result at this index on every node that applied it.
            let first = self
                .history
                .entry(e.index)
                .or_insert_with(|| applied.clone());
            assert_eq!(first, &applied, "node {id} differs at {}", e.index);
            if let Ok(p) = Proposal::decode(&e.data) {
                self.commands.entry(e.index).or_insert(p.command);
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
                if let Some(s) = &work.snapshot {
                    // The leader's state replaces this node's (the broker's `install`).
                    node.state = MetadataState::decode_snapshot(&s.data, &offsets()).unwrap();
                    assert!(node.state.applied_index() <= s.index);
                    // What it applies from now on follows the snapshot.
                    node.applied.clear();
                    self.installs += 1;
                }
                self.apply(id, work.committed.clone());
                let node = self.nodes.get_mut(&id).unwrap();
                let after = node.replica.as_mut().unwrap().persisted(&work);
                self.send(after.send);
                self.apply(id, after.committed);
                if self.rng.chance(self.compact_per_mille) {
                    self.compact(id);
                }
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
        match self.rng.below(12) {
            10 => Command::Reassign {
                name,
                partition: self.rng.below(4) as i32,
                // Mostly two of the three nodes (some the same as now), sometimes a
                // cancellation, a wrong size or an unknown node.
                replicas: match self.rng.below(6) {
                    0 => None,
                    1 => Some(vec![1, 2, 3]),
                    2 => Some(vec![1, 9]),
                    _ => {
                        let a = 1 + self.rng.below(3);
                        Some(vec![a, a % 3 + 1])
                    }
                },
            },
            11 => Command::Reassigned {
                name,
                partition: self.rng.below(4) as i32,
                replicas: vec![1 + self.rng.below(3), 1 + self.rng.below(3)],
            },
            0..=4 => Command::CreateTopic {
                name,
                // A small id space, so an id already used comes up too.
                id: Uuid::from_u128(2 + self.rng.below(500) as u128),
                partitions: 1 + self.rng.below(6) as i32,
                configs: BTreeMap::new(),
                first_leader: self.rng.below(3) as u32,
                // 2 gives each partition a replica set of its own, 3 one on every voter, 4 is
                // refused: every node must place and refuse alike, replays and snapshots too.
                replication_factor: 1 + self.rng.below(4) as i16,
                assignment: None,
            },
            5..=6 => Command::DeleteTopic { name },
            7..=8 => Command::CreatePartitions {
                changes: vec![(name, 1 + self.rng.below(12) as i32)],
                assignments: BTreeMap::new(),
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
        n.replica = Some(seeded(
            Replica::restart(id, &VOTERS, n.disk.clone()).unwrap(),
            &mut self.rng,
        ));
        // The registry is rebuilt from the snapshot and the log, as committed entries are
        // handed out again.
        n.state = restored(&n.disk);
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
        // The state machine's: a node that installed a snapshot applied no entry below it, but
        // its state says which entry it holds last.
        Some(self.nodes[&id].state.applied_index())
    }

    /// As every simulation's, and no node is still writing (its write hands the state machine
    /// entries that Raft already counts as applied).
    fn agreed(&self) -> bool {
        let members = VOTERS;
        members.iter().all(|&id| {
            self.alive(id)
                && self.nodes[&id].writing.is_none()
                && self.commit_index(id) == self.commit_index(members[0])
                && self.last_applied(id) == self.last_applied(members[0])
        })
    }
}

/// (answered Ok, answered with an error, faults, duplicates refused)
fn run(seed: u64, steps: u64, compact_per_mille: u64) -> (Sim, usize, usize, usize, usize) {
    let mut sim = Sim::new(seed);
    sim.compact_per_mille = compact_per_mille;
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
        // What it applied since its last start is the history from some index on (a restart
        // or a snapshot starts it later).
        let mut mine = n.applied.iter();
        if let Some((from, _)) = n.applied.iter().next() {
            let theirs: Vec<_> = sim.history.range(from..).collect();
            assert!(
                mine.by_ref().eq(theirs.into_iter()),
                "seed {seed}: node {id} applied differently"
            );
        }
    }
    let history = &sim.history;
    // No answered change lost, and answered as every node applied it.
    let (mut ok, mut err) = (0, 0);
    for ((origin, seq), (index, result)) in &sim.answered {
        let a = history.get(index).unwrap_or_else(|| {
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
    // A restart replays the log into the state its snapshot holds: the same state again.
    let mut replayed = restored(&first.disk);
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
    // Creates of a name that existed failed (checked by replaying the answers in log order,
    // from the start of the history: every index was applied by some node).
    let mut names: BTreeMap<String, bool> = BTreeMap::new();
    for (index, command) in &sim.commands {
        let result = &history[index].result;
        match command.clone() {
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
    let mut effective = std::collections::BTreeSet::new();
    for (index, a) in history {
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
    let duplicates = history
        .values()
        .filter(|a| matches!(a.result, Err(MetaError::Duplicate(..))))
        .count();
    (sim, ok, err, faults, duplicates)
}

#[test]
fn three_nodes_agree_on_every_topic_change_under_faults() {
    let seeds = seeds(40);
    let (mut ok, mut err, mut faults, mut dups) = (0, 0, 0, 0);
    for seed in 0..seeds {
        let (_, o, e, f, d) = run(seed, 4_000, 0);
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

/// A seed repeats: faults, delays and elections (`common::seeded`), so a failing seed fails
/// again.
#[test]
fn a_seed_runs_the_same_every_time() {
    let fingerprint = |seed| {
        let (sim, ok, err, faults, dups) = run(seed, 2_000, 20);
        format!(
            "step {} ok {ok} err {err} faults {faults} dups {dups} compactions {} installs {} \
             answered {:?} state {:?}",
            sim.step, sim.compactions, sim.installs, sim.answered, sim.nodes[&1].state
        )
    };
    assert_seeds_repeat(3, fingerprint);
}

#[test]
fn nodes_catch_up_and_restart_from_snapshots_of_the_metadata_state() {
    let seeds = seeds(40);
    let (mut ok, mut compactions, mut installs) = (0, 0, 0);
    for seed in 0..seeds {
        let (sim, o, ..) = run(seed, 4_000, 30);
        ok += o;
        compactions += sim.compactions;
        installs += sim.installs;
    }
    eprintln!(
        "{seeds} seeds: {ok} changes answered ok, {compactions} compactions, \
         {installs} snapshots installed"
    );
    assert!(ok > seeds as usize * 5, "only {ok} changes answered ok");
    assert!(
        compactions > seeds as usize * 5,
        "only {compactions} compactions"
    );
    // A node down or cut off while the others compact can only catch up by snapshot.
    assert!(
        installs > seeds as usize / 4,
        "only {installs} snapshots installed"
    );
}
