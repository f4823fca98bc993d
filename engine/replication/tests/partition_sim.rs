//! The group coordinator on three replicas of one `__consumer_offsets` partition, through
//! leader crashes: the same `PartitionCore` the broker runs, with "durable" meaning "committed by
//! a majority". Deterministic per seed.
//!
//! Checked: only the loaded leader serves (followers answer NOT_COORDINATOR, a leader still
//! replaying answers COORDINATOR_LOAD_IN_PROGRESS); a commit is answered only after its entry is
//! committed; after every crash of the leader the new leader's OffsetFetch returns at least the
//! last offset acknowledged before the crash, and only an offset some client sent; at most one
//! replica serves as coordinator at a time in this (partition-free) network.

mod common;
use common::compact;
use common::{
    assert_seeds_repeat, lose_commit, persist, seeded, seeds, Net, Rng, STEPS_PER_TICK, VOTERS,
};
use coordinator::group::{GroupConfig, GroupRequest, GroupResponse, RequestContext};
use coordinator::topics::MemoryTopics;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use replication::eraftpb::Message;
use replication::partition::{NotServing, ReplicatedPartition};
use replication::{Durable, NodeId, Replica};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One simulation step is 10 ms of the coordinator's clock (a 100 ms Raft tick).
const MS_PER_STEP: i64 = 10;

struct Node {
    part: Option<ReplicatedPartition<u32>>,
    disk: Durable,
}

struct Sim {
    rng: Rng,
    step: u64,
    nodes: BTreeMap<NodeId, Node>,
    net: Net,
    ctx: Arc<RequestContext>,
    next_req: u64,
    /// request id → the offset it commits
    commits: BTreeMap<u64, i64>,
    /// answers: request id → error code of the commit
    answered: BTreeMap<u64, i16>,
    /// Every offset a serving node took, in order (the offset of a commit is its position).
    offsets_sent: Vec<i64>,
    /// Answers to other requests ([`Sim::call`]).
    others: BTreeMap<u64, GroupResponse>,
    /// Every request a node served: (step, node, term).
    served: Vec<(u64, NodeId, u64)>,
    /// A node whose thread is stopped: it gets no ticks and runs nothing, and what is sent to
    /// it is lost, while time goes on.
    stalled: Option<NodeId>,
    /// Every replica snapshots once this many bytes of entries were applied since its last
    /// one: small, so the failovers run over compacted logs.
    snapshot_min_bytes: usize,
    compactions: u64,
    installs: u64,
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn commit_req(offset: i64) -> GroupRequest {
    let part = OffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(offset);
    let topic = OffsetCommitRequestTopic::default()
        .with_name(TopicName(sb("orders")))
        .with_partitions(vec![part]);
    GroupRequest::OffsetCommit(
        OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("solo")))
            .with_member_id(sb(""))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![topic]),
    )
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let topics = MemoryTopics::new(50);
        topics.create("orders", 1, Default::default()).unwrap();
        let ctx = Arc::new(RequestContext {
            client_id: "sim".into(),
            client_host: "/127.0.0.1".into(),
            api_version: 8,
            topics: topics.snapshot(),
            group_configs: Default::default(),
            topic_filter: None,
        });
        let mut sim = Sim {
            rng: Rng(seed),
            step: 0,
            nodes: BTreeMap::new(),
            net: Net::default(),
            ctx,
            next_req: 1,
            commits: BTreeMap::new(),
            answered: BTreeMap::new(),
            offsets_sent: Vec::new(),
            served: Vec::new(),
            stalled: None,
            others: BTreeMap::new(),
            snapshot_min_bytes: 2048,
            compactions: 0,
            installs: 0,
        };
        for id in VOTERS {
            sim.nodes.insert(
                id,
                Node {
                    part: None,
                    disk: Durable::default(),
                },
            );
            sim.start(id);
        }
        sim
    }

    fn start(&mut self, id: NodeId) {
        let n = self.nodes.get_mut(&id).unwrap();
        let replica = seeded(
            Replica::restart(id, &VOTERS, n.disk.clone()).unwrap(),
            &mut self.rng,
        );
        n.part = Some(ReplicatedPartition::new(
            0,
            GroupConfig::default(),
            replica,
            self.snapshot_min_bytes,
        ));
    }

    fn crash(&mut self, id: NodeId) {
        let n = self.nodes.get_mut(&id).unwrap();
        n.part = None;
        lose_commit(&mut n.disk, &mut self.rng);
        self.net.forget_to(id);
    }

    fn now(&self) -> i64 {
        1_000_000 + self.step as i64 * MS_PER_STEP
    }

    fn send(&mut self, msgs: Vec<Message>) {
        self.net.send(&mut self.rng, self.step, msgs);
    }

    fn answer(&mut self, released: Vec<coordinator::partition_core::Released<u32>>) {
        for r in released {
            match r.response {
                GroupResponse::OffsetCommit(resp) => {
                    let code = resp.topics[0].partitions[0].error_code;
                    assert!(
                        self.answered.insert(r.id, code).is_none(),
                        "request {} answered twice",
                        r.id
                    );
                }
                other => {
                    self.others.insert(r.id, other);
                }
            }
        }
    }

    fn drive(&mut self, id: NodeId) {
        loop {
            let Some(part) = self.nodes.get_mut(&id).unwrap().part.as_mut() else {
                return;
            };
            let Some(work) = part.work() else { return };
            let send_now = work.send_now.clone();
            if work.snapshot.is_some() {
                self.installs += 1;
            }
            let n = self.nodes.get_mut(&id).unwrap();
            persist(&mut n.disk, &work);
            let progress = n.part.as_mut().unwrap().persisted(work);
            if let Some(snap) = progress.snapshot.clone() {
                // The broker's writer makes it durable before the next write.
                compact(&mut n.disk, &snap);
                n.part.as_mut().unwrap().compacted(snap);
                self.compactions += 1;
            }
            assert!(
                progress.refused.is_empty(),
                "nothing is deferred at this load"
            );
            self.send(send_now);
            self.send(progress.send);
            self.answer(progress.released);
        }
    }

    fn serving(&self) -> Vec<NodeId> {
        VOTERS
            .iter()
            .copied()
            .filter(|id| {
                self.nodes[id]
                    .part
                    .as_ref()
                    .is_some_and(|p| p.serving(self.now()))
            })
            .collect()
    }

    fn run_step(&mut self, commit: bool) {
        self.step += 1;
        let now = self.step;
        let due = self.net.due(now);
        for m in due {
            if Some(m.to) == self.stalled {
                continue;
            }
            if let Some(p) = self.nodes.get_mut(&m.to).unwrap().part.as_mut() {
                p.replica_mut().step(m).unwrap();
            }
        }
        if now % STEPS_PER_TICK == 0 {
            let t = self.now();
            for id in VOTERS {
                if Some(id) == self.stalled {
                    continue;
                }
                if let Some(p) = self.nodes.get_mut(&id).unwrap().part.as_mut() {
                    p.replica_mut().tick(t);
                    let released = p.tick(t, 0);
                    self.answer(released);
                }
            }
        }
        let serving = self.serving();
        assert!(serving.len() <= 1, "two coordinators at once: {serving:?}");
        if commit {
            // Every node gets the request: followers must refuse it, the leader takes it.
            let offset = self.offsets_sent.len() as i64 + 1;
            let mut taken = false;
            for id in VOTERS {
                if Some(id) == self.stalled {
                    continue;
                }
                let t = self.now();
                let req_id = self.next_req;
                let ctx = self.ctx.clone();
                let Some(p) = self.nodes.get_mut(&id).unwrap().part.as_mut() else {
                    continue;
                };
                let role = p.role();
                match p.handle(req_id, &ctx, commit_req(offset), t, t, 0) {
                    Ok(released) => {
                        assert!(role.is_leader, "node {id} served while not leader");
                        self.served.push((self.step, id, role.term));
                        taken = true;
                        self.next_req += 1;
                        self.commits.insert(req_id, offset);
                        self.answer(released);
                    }
                    Err(NotServing::NotCoordinator { .. }) => {
                        assert!(!role.is_leader || !p.serving(t))
                    }
                    Err(NotServing::Loading) => assert!(role.is_leader),
                }
            }
            if taken {
                self.offsets_sent.push(offset);
            }
        }
        for id in VOTERS {
            if Some(id) != self.stalled {
                self.drive(id);
            }
        }
    }

    /// The highest offset acknowledged so far.
    fn acked(&self) -> i64 {
        self.answered
            .iter()
            .filter(|(_, c)| **c == 0)
            .map(|(id, _)| self.commits[id])
            .max()
            .unwrap_or(0)
    }

    fn fetch(&mut self, id: NodeId) -> i64 {
        let req = GroupRequest::OffsetFetch {
            group: "solo".into(),
            topics: Some(vec![("orders".into(), vec![0])]),
            member_id: None,
            member_epoch: -1,
            require_stable: false,
        };
        // A reply leaves once every record produced before it is committed.
        let GroupResponse::OffsetFetch(f) = self.call(id, req) else {
            panic!()
        };
        assert_eq!(f.error_code, 0, "{f:?}");
        f.partitions[0].2
    }

    /// Send `req` to node `id` (which must serve) and run until it is answered.
    fn call(&mut self, id: NodeId, req: GroupRequest) -> GroupResponse {
        let t = self.now();
        let req_id = 2_000_000 + self.next_req;
        self.next_req += 1;
        let ctx = self.ctx.clone();
        let p = self.nodes.get_mut(&id).unwrap().part.as_mut().unwrap();
        let released = p
            .handle(req_id, &ctx, req, t, t, 0)
            .expect("the coordinator serves");
        self.answer(released);
        for _ in 0..1_000 {
            if let Some(r) = self.others.remove(&req_id) {
                return r;
            }
            self.run_step(false);
        }
        panic!("request {req_id} was not answered");
    }

    fn run_until_serving(&mut self, max_steps: u64) -> NodeId {
        for _ in 0..max_steps {
            self.run_step(false);
            if let [id] = self.serving()[..] {
                return id;
            }
        }
        panic!("no coordinator within {max_steps} steps");
    }
}

fn run(seed: u64, rounds: usize) -> usize {
    run_sim(seed, rounds).1
}

fn run_sim(seed: u64, rounds: usize) -> (Sim, usize) {
    let mut sim = Sim::new(seed);
    let mut failovers = 0;
    for _ in 0..rounds {
        let leader = sim.run_until_serving(2_000);
        for _ in 0..200 {
            let c = sim.rng.below(3) == 0;
            sim.run_step(c);
        }
        let acked = sim.acked();
        let before = sim.fetch(leader);
        assert!(
            before >= acked,
            "seed {seed}: the leader fetches {before}, {acked} was acknowledged"
        );
        // Crash the leader with commits in flight.
        sim.run_step(true);
        sim.crash(leader);
        let acked = sim.acked();
        let new = sim.run_until_serving(3_000);
        assert_ne!(new, leader);
        failovers += 1;
        let got = sim.fetch(new);
        assert!(
            got >= acked,
            "seed {seed}: after failover {got} < acknowledged {acked}"
        );
        assert!(
            sim.offsets_sent.contains(&got),
            "seed {seed}: {got} was never sent"
        );
        sim.start(leader);
    }
    // Every commit was answered one way or another, except those lost with a crashed leader's
    // memory (their clients time out and retry, as with Kafka).
    let ok = sim.answered.values().filter(|c| **c == 0).count();
    assert!(
        ok > rounds * 20,
        "seed {seed}: only {ok} commits acknowledged"
    );
    let errors: BTreeMap<i16, usize> =
        sim.answered
            .values()
            .filter(|c| **c != 0)
            .fold(BTreeMap::new(), |mut m, c| {
                *m.entry(*c).or_default() += 1;
                m
            });
    eprintln!(
        "seed {seed}: {ok} commits acknowledged, {errors:?} refused, {} sent, {failovers} failovers, {} compactions, {} snapshots installed",
        sim.offsets_sent.len(),
        sim.compactions,
        sim.installs
    );
    assert!(
        sim.compactions > rounds as u64,
        "seed {seed}: only {} compactions",
        sim.compactions
    );
    for code in errors.keys() {
        assert_eq!(
            *code, 16,
            "seed {seed}: only NOT_COORDINATOR is expected, got {errors:?}"
        );
    }
    (sim, failovers)
}

/// A seed repeats: faults, delays and elections (`common::seeded`), so a failing seed fails
/// again.
#[test]
fn a_seed_runs_the_same_every_time() {
    let fingerprint = |seed| {
        let (sim, _) = run_sim(seed, 3);
        format!(
            "step {} answered {:?} sent {:?} served {:?} compactions {} installs {}",
            sim.step, sim.answered, sim.offsets_sent, sim.served, sim.compactions, sim.installs
        )
    };
    assert_seeds_repeat(3, fingerprint);
}

#[test]
fn commits_acknowledged_by_the_leader_survive_its_crash() {
    let seeds = seeds(10);
    let mut failovers = 0;
    for seed in 0..seeds {
        failovers += run(seed, 8);
    }
    assert_eq!(failovers, seeds as usize * 8);
}

#[test]
fn a_follower_cut_off_past_a_compaction_catches_up_by_snapshot_and_can_lead() {
    for seed in 0..seeds(5) {
        let mut sim = Sim::new(100 + seed);
        let leader = sim.run_until_serving(2_000);
        let behind = VOTERS.iter().copied().find(|&id| id != leader).unwrap();
        sim.net.isolated = Some(behind);
        let before = sim.compactions;
        for _ in 0..600 {
            let c = sim.rng.below(2) == 0;
            sim.run_step(c);
        }
        assert!(
            sim.compactions > before + 2,
            "seed {seed}: the others did not compact"
        );
        let first = sim.nodes[&leader]
            .part
            .as_ref()
            .unwrap()
            .replica()
            .snapshot_index();
        let last = sim.nodes[&behind]
            .part
            .as_ref()
            .unwrap()
            .replica()
            .last_index();
        assert!(
            first > last,
            "seed {seed}: the leader still holds what {behind} lacks"
        );
        // Heal: the leader has compacted what the follower lacks, so only a snapshot helps.
        sim.net.isolated = None;
        let installs = sim.installs;
        for _ in 0..300 {
            let c = sim.rng.below(2) == 0;
            sim.run_step(c);
        }
        assert!(
            sim.installs > installs,
            "seed {seed}: no snapshot installed"
        );
        // The follower caught up: with the old leader gone, it may lead and must know every
        // acknowledged commit (its snapshot holds them).
        let acked = sim.acked();
        let third = VOTERS
            .iter()
            .copied()
            .find(|&id| id != leader && id != behind)
            .unwrap();
        sim.crash(third);
        sim.crash(leader);
        sim.start(leader);
        // Only `behind` and `leader` are up: whichever leads, `behind` is a majority member.
        let new = sim.run_until_serving(3_000);
        let got = sim.fetch(new);
        assert!(
            got >= acked,
            "seed {seed}: after failover {got} < acknowledged {acked}"
        );
    }
}

#[test]
fn an_isolated_leader_stops_serving_before_a_new_leader_starts() {
    let seeds = seeds(10);
    let mut overlap_checked = 0;
    for seed in 0..seeds {
        let mut sim = Sim::new(100 + seed);
        let old = sim.run_until_serving(2_000);
        for _ in 0..100 {
            sim.run_step(true);
        }
        let acked = sim.acked();
        let cut = sim.step;
        sim.net.isolated = Some(old);
        // A commit offered to every node at every step: whoever serves, serves it.
        for _ in 0..(6 * replication::ELECTION_TICKS as u64 * STEPS_PER_TICK) {
            sim.run_step(true);
        }
        let new_served: Vec<&(u64, NodeId, u64)> = sim
            .served
            .iter()
            .filter(|(step, id, _)| *step > cut && *id != old)
            .collect();
        let first_new = new_served
            .first()
            .expect("another node serves after the leader is cut off")
            .0;
        let last_old = sim
            .served
            .iter()
            .filter(|(_, id, _)| *id == old)
            .map(|(s, _, _)| *s)
            .max()
            .unwrap();
        assert!(
            last_old < first_new,
            "seed {seed}: old leader {old} served at step {last_old}, a new one from step {first_new}"
        );
        // The old leader did go on serving for a while after the cut (its lease), so the order
        // above is what the lease enforces, not an accident of the old leader stopping at once.
        if last_old > cut {
            overlap_checked += 1;
        }
        // And nothing it acknowledged before the cut was lost.
        let new = new_served.last().unwrap().1;
        let got = sim.fetch(new);
        assert!(got >= acked, "seed {seed}: {got} < acknowledged {acked}");
    }
    assert!(
        overlap_checked > 0,
        "the old leader never served after the cut: the lease was not exercised"
    );
}

fn consumer_heartbeat(member: &str, epoch: i32, join: bool) -> GroupRequest {
    use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;
    let mut req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("g-consumer")))
        .with_member_id(sb(member))
        .with_member_epoch(epoch);
    if join {
        req = req
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(sb("orders"))]))
            .with_topic_partitions(Some(vec![]));
    }
    GroupRequest::ConsumerHeartbeat(req)
}

#[test]
fn a_consumer_group_keeps_its_epochs_across_failovers() {
    let mut sim = Sim::new(7);
    let mut leader = sim.run_until_serving(2_000);
    let member = "member-a-0000000000000";
    let GroupResponse::ConsumerHeartbeat(r) = sim.call(leader, consumer_heartbeat(member, 0, true))
    else {
        panic!()
    };
    assert_eq!(r.error_code, 0, "{r:?}");
    let mut epoch = r.member_epoch;
    assert!(epoch >= 1, "{r:?}");
    for round in 0..5 {
        sim.crash(leader);
        let new = sim.run_until_serving(3_000);
        sim.start(leader);
        leader = new;
        // The new coordinator knows the member and its epoch: a heartbeat at that epoch is not
        // fenced (a classic group's members rejoin instead, as with Kafka).
        let GroupResponse::ConsumerHeartbeat(r) =
            sim.call(leader, consumer_heartbeat(member, epoch, false))
        else {
            panic!()
        };
        assert_eq!(r.error_code, 0, "round {round}: {r:?}");
        assert!(
            r.member_epoch >= epoch,
            "round {round}: epoch went back from {epoch} to {}",
            r.member_epoch
        );
        epoch = r.member_epoch;
    }
}

#[test]
fn a_member_silent_after_a_failover_expires_on_the_new_coordinator() {
    // The new leader starts every loaded member's session when it loads (Kafka's `onLoaded`):
    // a member whose client died with the old leader must not keep its partitions forever.
    let mut sim = Sim::new(11);
    let leader = sim.run_until_serving(2_000);
    let member = "member-b-0000000000000";
    let GroupResponse::ConsumerHeartbeat(r) = sim.call(leader, consumer_heartbeat(member, 0, true))
    else {
        panic!()
    };
    assert_eq!(r.error_code, 0, "{r:?}");
    let epoch = r.member_epoch;
    sim.crash(leader);
    let new = sim.run_until_serving(3_000);
    sim.start(leader);
    // Silent for longer than the consumer session timeout (45 s by default).
    let session_ms = GroupConfig::default().consumer_session_timeout_ms as i64;
    let steps = (session_ms + 5_000) / MS_PER_STEP;
    for _ in 0..steps as u64 {
        sim.run_step(false);
    }
    let now_leader = sim.run_until_serving(3_000);
    assert_eq!(now_leader, new, "no further failover in this run");
    let GroupResponse::ConsumerHeartbeat(r) =
        sim.call(new, consumer_heartbeat(member, epoch, false))
    else {
        panic!()
    };
    assert_eq!(
        r.error_code,
        kafka_protocol::ResponseError::UnknownMemberId.code(),
        "the silent member was not expired: {r:?}"
    );
}

#[test]
fn a_leader_whose_thread_stalled_does_not_answer_once_another_may_lead() {
    // The lease is measured on the clock, not in the leader's own ticks: a leader that counted
    // no ticks while its thread was stopped would otherwise wake up believing in a lease the
    // followers stopped promising long ago, and answer next to the new coordinator.
    let mut sim = Sim::new(5);
    let old = sim.run_until_serving(2_000);
    sim.stalled = Some(old);
    // Stopped for a lease and a tick: by the clock its lease is over.
    let steps = (replication::LEASE_MS + replication::TICK_MS) / MS_PER_STEP;
    for _ in 0..steps as u64 {
        sim.run_step(false);
    }
    assert!(
        sim.serving().is_empty(),
        "{:?} serve while no lease can hold",
        sim.serving()
    );
    let new = sim.run_until_serving(5_000);
    assert_ne!(new, old, "the stalled leader still counted as serving");
    // It resumes: before it has heard anything, a client asks it.
    sim.stalled = None;
    let t = sim.now();
    let ctx = sim.ctx.clone();
    let p = sim.nodes.get_mut(&old).unwrap().part.as_mut().unwrap();
    assert!(p.role().is_leader, "it has not heard of the new leader yet");
    assert!(!p.serving(t));
    match p.handle(9_999_999, &ctx, commit_req(1), t, t, 0) {
        Err(NotServing::NotCoordinator { .. }) => {}
        other => panic!("the stalled leader answered: {other:?}"),
    }
    // Once it hears from the others it follows the new leader.
    let now_serving = sim.run_until_serving(3_000);
    assert_eq!(now_serving, new);
}

#[test]
fn a_removed_coordinator_hands_over_and_its_groups_load_across_the_change() {
    let mut sim = Sim::new(11);
    let old = sim.run_until_serving(2_000);
    let commit_some = |sim: &mut Sim| {
        for _ in 0..50 {
            sim.run_step(true);
        }
        for _ in 0..200 {
            sim.run_step(false);
        }
        sim.acked()
    };
    let before = commit_some(&mut sim);
    assert!(before > 0, "nothing acknowledged");
    // The cluster's metadata removes the coordinator's node: every replica is told, as the
    // broker tells them on every tick.
    let left: Vec<NodeId> = VOTERS.iter().copied().filter(|&id| id != old).collect();
    let mut new = None;
    for _ in 0..5_000 {
        sim.run_step(false);
        for node in sim.nodes.values_mut() {
            if let Some(p) = node.part.as_mut() {
                p.replica_mut().follow_members(&left, &[old]);
            }
        }
        if let [id] = sim.serving()[..] {
            let r = sim.nodes[&id].part.as_ref().unwrap().replica();
            if left.contains(&id) && r.membership().voters == left && r.membership_settled() {
                new = Some(id);
                break;
            }
        }
    }
    let new = new.expect("a coordinator among the nodes left, without the removed one");
    sim.crash(old);
    assert!(
        sim.fetch(new) >= before,
        "a commit made before the removal is lost"
    );
    let after = commit_some(&mut sim);
    assert!(after > before, "nothing acknowledged by the two nodes left");
    // The new coordinator crashes and restarts: the group loads from a log holding the
    // configuration change (an entry that is not a record batch), on whichever node leads.
    sim.crash(new);
    for _ in 0..300 {
        sim.run_step(false);
    }
    assert!(
        sim.serving().is_empty(),
        "one node of two cannot lead alone"
    );
    sim.start(new);
    let next = sim.run_until_serving(5_000);
    assert!(left.contains(&next), "node {next} coordinates");
    assert!(
        sim.fetch(next) >= after,
        "a commit made after the removal is lost"
    );
    let other = left.iter().copied().find(|&id| id != next).unwrap();
    sim.crash(next);
    sim.start(next);
    let last = sim.run_until_serving(5_000);
    assert!(
        left.contains(&last),
        "node {last} coordinates ({other} was the other)"
    );
    assert!(sim.fetch(last) >= after);
}
