//! The invariants, checked after every step (for the groups the step touched), at every load of
//! a partition, at quiescent points, and after the settle phase.
//!
//! (a) **Single ownership (KIP-848).** The coordinator never lists a partition in two members'
//!     assigned ∪ pending-revocation sets. And for every client *in good standing* — the
//!     coordinator would accept its next heartbeat: it knows the member id and the client's
//!     epoch is the member's epoch, or the previous one with owned ⊆ assigned (a lost response)
//!     — everything the client owns (was told and has not yet revoked) is in that member's
//!     assigned ∪ pending-revocation set. Together: no partition is owned by two members in good
//!     standing at once; a partition is handed on only after its previous owner acknowledged the
//!     revocation or was fenced. A fenced member (session or revocation timeout, or a stale
//!     request that reset it) may still believe it owns partitions until its next heartbeat —
//!     exactly as in Kafka, where the guarantee against such zombies is that their commits are
//!     refused (STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID), not that they stop reading at once.
//!     Classic groups get the analogous check: members of the current generation hold
//!     disjoint assignments.
//! (b) **Epochs never go back.** Within one load of a partition, a classic group's generation
//!     and a consumer group's group epoch, assignment epoch and each member's epoch never
//!     decrease (and member epoch ≤ assignment epoch ≤ group epoch). Across crashes and reloads
//!     they never fall below what was acknowledged: a released SyncGroup makes its generation
//!     durable, a released heartbeat its member epoch. Clients: a KIP-848 member never accepts
//!     a smaller member epoch than one it accepted before, over its whole life (rejoins and
//!     broker crashes included); a classic member never gets a smaller generation from the
//!     same coordinator load, and no released JoinGroup carries a generation below the last
//!     acknowledged one. (A classic generation that was never synced is not durable in Kafka
//!     either — `completeClassicGroupJoin` writes nothing — so a crash may hand it out again.)
//! (c) **Acknowledged commits survive.** After every crash + restart and every reload after a
//!     failed write, OffsetFetch through the coordinator returns, per group and partition, the
//!     last acknowledged (released, error-free) commit, or a commit applied after it whose
//!     response was never released (it may have landed). Between loads, OffsetFetch returns
//!     exactly the last commit the coordinator applied.
//! (d) **Replay reproduces the state.** At quiescent points (nothing pending or in flight),
//!     replaying the partition's snapshot + log from the disk into a fresh coordinator gives the
//!     live coordinator's `durable_view()` (when its classic groups are Stable or Empty; the
//!     last written GroupMetadata otherwise), and so does replaying `snapshot_records()`. After
//!     a crash or reload, the loaded state equals the replay of a prefix of the records that
//!     includes every batch some released response relied on.
//! (t) **Transactions** (issue 17): the oracle's own model of pending transactional offsets per
//!     producer, and each transaction's outcome once its prepare record is durable. (t0) that
//!     outcome never changes; (t1) no OffsetFetch returns an offset written only by transactions
//!     that did not commit, and a COMMIT marker makes visible only its own transaction's
//!     offsets, all at once (then (c) holds OffsetFetch to them); (t2) after a load every pending
//!     offset was written by its producer, and a producer's acknowledged pending offsets survive
//!     whole or not at all; (t3) `require_stable` answers UNSTABLE_OFFSET_COMMIT exactly for
//!     partitions with pending offsets; (t5) after the settle phase every transaction has ended.
//! (e) **Convergence.** After the fault-free settle phase every group is stable with exactly its
//!     live clients as members, every subscribed partition owned by exactly one of them, and
//!     client and coordinator agreeing on generations, epochs and assignments.

use super::broker::{Route, RouteKind};
use super::clients::{CState, Phase, Proto};
use super::txn::TxnKey;
use super::world::{Protocol, World};
use engine::group::classic::State;
use engine::group::{Coordinator, GroupRequest, GroupResponse, Output, RequestContext};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;
use wire::records::GroupMetadataValue;

/// Where recovery cut a log: (segment file, byte position, reason).
type Truncation = (String, u64, String);

/// The commits of one (group, topic, partition), in the order the coordinator applied them.
#[derive(Debug, Default)]
struct History {
    values: Vec<i64>,
    index: BTreeMap<i64, usize>,
    last_acked: Option<usize>,
    /// What the coordinator holds in memory now (None: nothing committed).
    expected: Option<i64>,
}

/// Watermarks of one group within one load of its partition.
#[derive(Debug, Default, Clone)]
struct Watermark {
    load: u64,
    /// What the coordinator held the group as (a mixed group changes): epochs are compared
    /// only within one kind, since converting an empty group starts its epochs afresh.
    kind: Option<Protocol>,
    generation: i32,
    group_epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, i32>,
}

#[derive(Debug, Default)]
pub(super) struct Oracle {
    commits: BTreeMap<(usize, String, i32), History>,
    /// Classic: the highest generation a released, successful SyncGroup acknowledged.
    synced_generation: BTreeMap<usize, i32>,
    /// Consumer: the highest member epoch a released heartbeat carried, per group and member.
    acked_epoch: BTreeMap<usize, i32>,
    acked_member_epoch: BTreeMap<(usize, String), i32>,
    uptime: BTreeMap<usize, Watermark>,
    txn: TxnModel,
}

/// One producer's pending offsets in one partition: (group, topic, partition) → offset.
type ProducerOffsets = BTreeMap<(usize, String, i32), i64>;

/// (t) The oracle's own model of transactional offsets (issue 17): which offsets each producer
/// has pending in each partition, and which transaction each came from. Offsets are globally
/// unique, so a value names the request that sent it.
#[derive(Debug, Default)]
struct TxnModel {
    /// Log order of committed and pending offset records (the coordinator applies records in
    /// the order it writes them): at COMMIT a pending offset replaces the committed one only
    /// if its record is later (`OffsetMetadataManager.replayEndTransactionMarker`).
    seq: u64,
    value_seq: BTreeMap<i64, u64>,
    committed_seq: BTreeMap<(usize, String, i32), u64>,
    /// Offsets of TxnOffsetCommit requests: their producer, and each transaction the
    /// verification found the producer in when the request went on to the group. A client
    /// resends a timed-out request with the same offsets, and a late copy of it may land in a
    /// later transaction of the producer (as in Kafka with transactions version 1), so one
    /// offset may belong to several transactions.
    origin: BTreeMap<i64, (i64, BTreeSet<Option<TxnKey>>)>,
    /// slot → producer → (group, topic, partition) → pending offset.
    pending: BTreeMap<usize, BTreeMap<i64, ProducerOffsets>>,
    /// Pending offsets whose TxnOffsetCommit was acknowledged (durable).
    acked: BTreeSet<i64>,
    /// The outcome of each transaction whose prepare record is durable.
    decisions: BTreeMap<TxnKey, bool>,
    /// Offsets a commit marker made visible, until the marker's answer is released.
    marker_applied: BTreeMap<engine::group::ReqId, Vec<(usize, String, i32, i64)>>,
}

impl TxnModel {
    fn pending_on(&self, s: usize, g: usize, t: &str, p: i32) -> bool {
        let k = (g, t.to_string(), p);
        self.pending
            .get(&s)
            .is_some_and(|m| m.values().any(|x| x.contains_key(&k)))
    }
}

/// A state projection that is exact at any moment: classic groups by their last written
/// GroupMetadata (the in-memory group may be mid-rebalance, which no record describes), consumer
/// groups and offsets as `durable_view` gives them.
type Projection = (
    Vec<(String, GroupMetadataValue)>,
    Vec<(String, String, i32, wire::records::OffsetCommitValue)>,
    Vec<engine::group::consumer::ConsumerGroup>,
);

fn projection(c: &Coordinator) -> Projection {
    let (_, offsets, consumer) = c.durable_view();
    let classic = c
        .groups
        .iter()
        .filter_map(|(id, g)| g.last_record.clone().map(|v| (id.clone(), v)))
        .collect();
    (classic, offsets, consumer)
}

/// The pending transactional offsets: (producer, epoch, group, topic, partition, offset,
/// stale). Their `order` is left out: it counts records since the coordinator was created, and
/// only its relative order matters (`stale` records its effect).
type TxnProjection = BTreeSet<(i64, i16, String, String, i32, i64, bool)>;

fn txn_projection(c: &Coordinator) -> TxnProjection {
    let mut out = BTreeSet::new();
    for (pid, t) in &c.txn.by_producer {
        for (g, offsets) in &t.offsets {
            for ((topic, p), x) in offsets {
                out.insert((
                    *pid,
                    t.producer_epoch,
                    g.clone(),
                    topic.clone(),
                    *p,
                    x.value.offset,
                    x.stale,
                ));
            }
        }
    }
    out
}

/// Whether `durable_view()` (which describes classic groups by their in-memory state) is
/// meaningful: every classic group is settled in a state its last record describes.
fn classic_settled(c: &Coordinator) -> bool {
    c.groups
        .values()
        .all(|g| matches!(g.state, State::Stable | State::Empty | State::Dead))
}

/// The first difference between two projections, for failure messages.
fn diff(a: &Projection, b: &Projection) -> String {
    let ca: BTreeMap<_, _> = a.0.iter().cloned().collect();
    let cb: BTreeMap<_, _> = b.0.iter().cloned().collect();
    for k in ca.keys().chain(cb.keys()) {
        if ca.get(k) != cb.get(k) {
            return format!(
                "classic group {k}: {:?} vs {:?}",
                ca.get(k).map(|v| (v.generation, v.members.len())),
                cb.get(k).map(|v| (v.generation, v.members.len()))
            );
        }
    }
    if a.1 != b.1 {
        let sa: BTreeSet<_> = a.1.iter().map(|o| (&o.0, &o.1, o.2, o.3.offset)).collect();
        let sb: BTreeSet<_> = b.1.iter().map(|o| (&o.0, &o.1, o.2, o.3.offset)).collect();
        return format!(
            "offsets differ: only left {:?}, only right {:?}",
            sa.difference(&sb).take(3).collect::<Vec<_>>(),
            sb.difference(&sa).take(3).collect::<Vec<_>>()
        );
    }
    let ga: BTreeMap<_, _> = a.2.iter().map(|g| (g.group_id.clone(), g)).collect();
    let gb: BTreeMap<_, _> = b.2.iter().map(|g| (g.group_id.clone(), g)).collect();
    for k in ga.keys().chain(gb.keys()) {
        let (x, y) = (ga.get(k), gb.get(k));
        if x != y {
            let brief = |g: Option<&&engine::group::consumer::ConsumerGroup>| {
                g.map(|g| {
                    (
                        g.group_epoch,
                        g.assignment_epoch,
                        g.members
                            .values()
                            .map(|m| (m.member_id.clone(), m.member_epoch))
                            .collect::<Vec<_>>(),
                    )
                })
            };
            if brief(x) == brief(y) {
                // Same epochs and members: show the fields that differ.
                let (dx, dy) = (format!("{x:#?}"), format!("{y:#?}"));
                let lines: Vec<String> = dx
                    .lines()
                    .zip(dy.lines())
                    .filter(|(l, r)| l != r)
                    .take(6)
                    .map(|(l, r)| format!("{} | {}", l.trim(), r.trim()))
                    .collect();
                return format!("consumer group {k} differs in: {}", lines.join("; "));
            }
            return format!("consumer group {k}: {:?} vs {:?}", brief(x), brief(y));
        }
    }
    "no difference".into()
}

/// The (topic, partition, offset) an OffsetCommit response accepted: each partition without an
/// error, with the offset the request sent for it (`parts`).
fn committed(
    r: &kafka_protocol::messages::OffsetCommitResponse,
    parts: &[(String, i32, i64)],
) -> Vec<(String, i32, i64)> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
        .filter(|(_, p)| p.error_code == 0)
        .filter_map(|(t, p)| {
            parts
                .iter()
                .find(|(tt, pp, _)| tt == t.name.as_str() && *pp == p.partition_index)
                .map(|x| (t.name.to_string(), p.partition_index, x.2))
        })
        .collect()
}

impl World {
    /// Right after the coordinator handled a request (or a tick): commits it applied, and
    /// (c) exact OffsetFetch answers between loads.
    pub(super) fn after_handle(
        &mut self,
        s: usize,
        id: engine::group::ReqId,
        fetch_group: Option<&str>,
        out: &Output,
    ) {
        let Some(route) = self.routes.get(&id).cloned() else {
            return;
        };
        let Some((_, resp)) = out.replies.iter().find(|(i, _)| *i == id) else {
            return;
        };
        match (resp, &route.kind) {
            (GroupResponse::OffsetCommit(r), RouteKind::Commit(parts)) => {
                for (topic, partition, offset) in committed(r, parts) {
                    let h = self
                        .oracle
                        .commits
                        .entry((route.group, topic.clone(), partition))
                        .or_default();
                    h.index.insert(offset, h.values.len());
                    h.values.push(offset);
                    h.expected = Some(offset);
                    let m = &mut self.oracle.txn;
                    m.seq += 1;
                    m.value_seq.insert(offset, m.seq);
                    m.committed_seq
                        .insert((route.group, topic, partition), m.seq);
                }
            }
            (
                GroupResponse::TxnOffsetCommit(r),
                RouteKind::TxnCommit {
                    producer_id,
                    tag,
                    parts,
                },
            ) => {
                let accepted: Vec<(String, i32, i64)> = r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
                    .filter(|(_, p)| p.error_code == 0)
                    .filter_map(|(t, p)| {
                        parts
                            .iter()
                            .find(|(tt, pp, _)| tt == t.name.as_str() && *pp == p.partition_index)
                            .cloned()
                    })
                    .collect();
                let m = &mut self.oracle.txn;
                for (topic, partition, offset) in accepted {
                    m.seq += 1;
                    m.value_seq.insert(offset, m.seq);
                    m.origin
                        .entry(offset)
                        .or_insert_with(|| (*producer_id, BTreeSet::new()))
                        .1
                        .insert(tag.clone());
                    m.pending
                        .entry(s)
                        .or_default()
                        .entry(*producer_id)
                        .or_default()
                        .insert((route.group, topic, partition), offset);
                }
            }
            (GroupResponse::TxnMarker(0), RouteKind::Marker { job }) => {
                self.oracle_marker_applied(s, id, *job);
            }
            (GroupResponse::OffsetFetch(f), _) if fetch_group.is_some() && f.error_code == 0 => {
                let stable = matches!(
                    route.kind,
                    RouteKind::TxnFetch {
                        require_stable: true
                    }
                );
                for (t, p, offset, _, _, code) in &f.partitions {
                    // (t3) require_stable: a partition with pending transactional offsets
                    // answers UNSTABLE_OFFSET_COMMIT, and only such a partition does.
                    let pending = self.oracle.txn.pending_on(s, route.group, t, *p);
                    let unstable =
                        *code == kafka_protocol::ResponseError::UnstableOffsetCommit.code();
                    if stable {
                        self.stats.checks += 1;
                        if pending != unstable {
                            let g = self.groups[route.group].name.clone();
                            return self.fail(format!(
                                "(t3) OffsetFetch {g} {t}-{p} with require_stable answered code \
                                 {code} offset {offset}, but the partition {} pending \
                                 transactional offsets",
                                if pending { "has" } else { "has no" }
                            ));
                        }
                        if unstable {
                            self.stats.unstable_answers += 1;
                        }
                    } else if unstable {
                        return self.fail(format!(
                            "(t3) OffsetFetch without require_stable answered \
                             UNSTABLE_OFFSET_COMMIT for {t}-{p}"
                        ));
                    }
                    if *code != 0 {
                        continue;
                    }
                    if let Some(msg) = self.oracle_txn_visible(*offset) {
                        return self.fail(msg);
                    }
                    self.stats.checks += 1;
                    let expected = self
                        .oracle
                        .commits
                        .get(&(route.group, t.clone(), *p))
                        .and_then(|h| h.expected)
                        .unwrap_or(-1);
                    if *offset != expected {
                        let g = self.groups[route.group].name.clone();
                        return self.fail(format!(
                            "(c) OffsetFetch {g} {t}-{p} returned {offset}, but the last commit \
                             the coordinator applied is {expected}"
                        ));
                    }
                }
            }
            _ => {}
        }
    }

    /// A response leaves the broker: it is acknowledged (everything before it is durable).
    pub(super) fn on_release(
        &mut self,
        _s: usize,
        id: engine::group::ReqId,
        route: &Route,
        resp: &GroupResponse,
    ) {
        let g = route.group;
        match (resp, &route.kind) {
            (GroupResponse::TxnOffsetCommit(r), RouteKind::TxnCommit { parts, .. }) => {
                for t in &r.topics {
                    for p in t.partitions.iter().filter(|p| p.error_code == 0) {
                        if let Some(x) = parts
                            .iter()
                            .find(|(tt, pp, _)| tt == t.name.as_str() && *pp == p.partition_index)
                        {
                            self.oracle.txn.acked.insert(x.2);
                        }
                    }
                }
            }
            (GroupResponse::TxnMarker(code), RouteKind::Marker { .. }) => {
                let applied = self.oracle.txn.marker_applied.remove(&id);
                if *code == 0 {
                    // The commit marker is durable: what it made visible is acknowledged.
                    for (g, t, p, v) in applied.into_iter().flatten() {
                        if let Some(h) = self.oracle.commits.get_mut(&(g, t, p)) {
                            if let Some(&i) = h.index.get(&v) {
                                h.last_acked = Some(h.last_acked.map_or(i, |a| a.max(i)));
                            }
                        }
                    }
                }
            }
            (GroupResponse::OffsetCommit(r), RouteKind::Commit(parts)) => {
                for (topic, partition, offset) in committed(r, parts) {
                    if let Some(h) = self.oracle.commits.get_mut(&(g, topic, partition)) {
                        if let Some(&i) = h.index.get(&offset) {
                            h.last_acked = Some(h.last_acked.map_or(i, |a| a.max(i)));
                            self.stats.acked_commits += 1;
                        }
                    }
                }
            }
            (GroupResponse::Sync(r), RouteKind::Sync { generation }) if r.error_code == 0 => {
                let e = self
                    .oracle
                    .synced_generation
                    .entry(g)
                    .or_insert(*generation);
                *e = (*e).max(*generation);
            }
            // In a mixed group a classic member's generation is its member epoch, which may
            // trail the epochs other members acknowledged; the window checks cover it.
            (GroupResponse::Join(r), RouteKind::Join)
                if r.error_code == 0 && !self.groups[g].mixed =>
            {
                self.stats.checks += 1;
                let synced = self.oracle.synced_generation.get(&g).copied().unwrap_or(0);
                if r.generation_id < synced {
                    let name = self.groups[g].name.clone();
                    self.fail(format!(
                        "(b) {name}: a JoinGroup response carries generation {}, below the \
                         acknowledged (synced) generation {synced}",
                        r.generation_id
                    ));
                }
            }
            (GroupResponse::ConsumerHeartbeat(r), RouteKind::ConsumerHeartbeat { member })
                if r.error_code == 0 && r.member_epoch > 0 =>
            {
                let e = self.oracle.acked_epoch.entry(g).or_default();
                *e = (*e).max(r.member_epoch);
                let m = self
                    .oracle
                    .acked_member_epoch
                    .entry((g, member.clone()))
                    .or_default();
                *m = (*m).max(r.member_epoch);
            }
            _ => {}
        }
    }

    /// A partition was loaded (restart after a crash, or reload after a failed write): (d) the
    /// state is a prefix replay, (b) nothing acknowledged went back, (c) acknowledged commits
    /// are there.
    pub(super) fn after_load(&mut self, s: usize, after_crash: bool) {
        self.slots[s].load += 1;
        let live = self.slots[s].coordinator().expect("just loaded");
        let (loaded, loaded_txn) = (projection(live), txn_projection(live));
        // (d) Which prefix of the unacknowledged tail did the disk keep? (Pending
        // transactional offsets included: a batch of them changes nothing else.)
        let mut base = self.slots[s].shadow.clone();
        let tail = std::mem::take(&mut self.slots[s].tail);
        let mut matched = None;
        self.stats.checks += 1;
        if projection(&base) == loaded && txn_projection(&base) == loaded_txn {
            matched = Some(0);
        }
        for (j, (txn, batch)) in tail.iter().enumerate() {
            super::broker::replay_batch(&mut base, *txn, batch);
            // The shortest prefix that explains the state: a batch that changes nothing (a
            // marker for a producer with nothing pending here) cannot be told apart.
            if matched.is_none()
                && projection(&base) == loaded
                && txn_projection(&base) == loaded_txn
            {
                matched = Some(j + 1);
            }
        }
        let Some(kept) = matched else {
            let shadow = projection(&self.slots[s].shadow);
            return self.fail(format!(
                "(d) partition {s} loaded a state that is no prefix of its log ({} unacknowledged \
                 batches after the acknowledged state); first difference from the acknowledged \
                 state: {}; recovery: {:?}",
                tail.len(),
                diff(&loaded, &shadow),
                self.slots[s].last_report
            ));
        };
        if after_crash {
            // After a crash the disk holds only durable bytes: the loaded state is the new
            // acknowledged base.
            self.slots[s].shadow = self.slots[s].coordinator().cloned().expect("loaded");
        } else if kept > 0 {
            // The failed batch reached the file without its fsync: serving it would answer
            // clients from state a power loss can still take back.
            return self.fail(format!(
                "(d) partition {s}: the reload after a failed write replayed {kept} batch(es) \
                 that were never acknowledged as durable"
            ));
        }
        self.check_load_epochs(s);
        self.check_load_commits(s);
        if self.failure.is_none() {
            self.check_load_txn(s);
        }
        let groups: Vec<usize> = (0..self.groups.len())
            .filter(|g| self.groups[*g].partition == s)
            .collect();
        for g in groups {
            self.oracle.uptime.remove(&g);
            self.touched.insert(g);
        }
    }

    /// (b) after a load: nothing acknowledged went back.
    fn check_load_epochs(&mut self, s: usize) {
        let c = self.slots[s].coordinator().expect("loaded");
        let mut failures = Vec::new();
        for (g, spec) in self.groups.iter().enumerate() {
            // A mixed group's acknowledged epochs may legitimately restart: an empty group
            // converted to the other protocol starts anew (the window checks cover it).
            if spec.partition != s || spec.mixed {
                continue;
            }
            match spec.protocol {
                Protocol::Classic => {
                    let synced = self.oracle.synced_generation.get(&g).copied().unwrap_or(0);
                    let generation = c.groups.get(&spec.name).map_or(0, |x| x.generation);
                    if generation < synced {
                        failures.push(format!(
                            "(b) {} loaded at generation {generation}, below the acknowledged \
                             generation {synced}",
                            spec.name
                        ));
                    }
                }
                Protocol::Consumer => {
                    let acked = self.oracle.acked_epoch.get(&g).copied().unwrap_or(0);
                    let (ge, ae) = c
                        .consumer_groups
                        .get(&spec.name)
                        .map_or((0, 0), |x| (x.group_epoch, x.assignment_epoch));
                    if ae < acked || ge < ae {
                        failures.push(format!(
                            "(b) {} loaded with group epoch {ge} / assignment epoch {ae}, but \
                             member epoch {acked} was acknowledged",
                            spec.name
                        ));
                    }
                    if let Some(cg) = c.consumer_groups.get(&spec.name) {
                        for m in cg.members.values() {
                            let acked = self
                                .oracle
                                .acked_member_epoch
                                .get(&(g, m.member_id.clone()))
                                .copied()
                                .unwrap_or(0);
                            if m.member_epoch >= 0 && m.member_epoch < acked {
                                failures.push(format!(
                                    "(b) {} member {} loaded at epoch {}, below its acknowledged \
                                     epoch {acked}",
                                    spec.name, m.member_id, m.member_epoch
                                ));
                            }
                        }
                    }
                }
            }
        }
        self.stats.checks += 1;
        if let Some(f) = failures.into_iter().next() {
            self.fail(f);
        }
    }

    /// (c) after a load: OffsetFetch through the coordinator returns the last acknowledged
    /// commit, or a later one that may have landed.
    fn check_load_commits(&mut self, s: usize) {
        let groups: Vec<usize> = (0..self.groups.len())
            .filter(|g| self.groups[*g].partition == s)
            .collect();
        for g in groups {
            let name = self.groups[g].name.clone();
            let ctx = RequestContext {
                client_id: "oracle".into(),
                client_host: "/127.0.0.1".into(),
                api_version: 8,
                topics: self.topics.clone(),
                group_configs: Default::default(),
                topic_filter: None,
            };
            let mut out = Output::default();
            let c = self.slots[s].coordinator_mut().expect("loaded");
            c.handle(
                u64::MAX,
                &ctx,
                GroupRequest::OffsetFetch {
                    group: name.clone(),
                    topics: None,
                    member_id: None,
                    member_epoch: -1,
                    require_stable: false,
                },
                self.now,
                &mut out,
            );
            let fetched: BTreeMap<(String, i32), i64> = match out.replies.pop() {
                Some((_, GroupResponse::OffsetFetch(f))) if f.error_code == 0 => f
                    .partitions
                    .iter()
                    .map(|(t, p, o, ..)| ((t.clone(), *p), *o))
                    .collect(),
                other => {
                    return self.fail(format!("(c) OffsetFetch {name} after a load: {other:?}"))
                }
            };
            if !out.records.is_empty() {
                return self.fail(format!("(c) OffsetFetch {name} produced records"));
            }
            let keys: Vec<(String, i32)> = self
                .oracle
                .commits
                .range((g, String::new(), i32::MIN)..)
                .take_while(|((gg, _, _), _)| *gg == g)
                .map(|((_, t, p), _)| (t.clone(), *p))
                .collect();
            for (t, p) in fetched.keys() {
                if !keys.contains(&(t.clone(), *p)) {
                    return self.fail(format!(
                        "(c) {name} {t}-{p} has a committed offset nobody committed"
                    ));
                }
            }
            for (t, p) in keys {
                self.stats.checks += 1;
                let value = fetched.get(&(t.clone(), p)).copied();
                let h = self
                    .oracle
                    .commits
                    .get_mut(&(g, t.clone(), p))
                    .expect("listed");
                let ok = match (value, h.last_acked) {
                    (None, None) => true,
                    (None, Some(_)) => false,
                    (Some(v), acked) => h
                        .index
                        .get(&v)
                        .is_some_and(|&i| acked.is_none_or(|a| i >= a)),
                };
                if !ok {
                    let acked = h.last_acked.map(|i| h.values[i]);
                    let later = h
                        .last_acked
                        .map(|a| h.values[a + 1..].to_vec())
                        .unwrap_or_else(|| h.values.clone());
                    return self.fail(format!(
                        "(c) after a load, {name} {t}-{p} has offset {value:?}, but commit \
                         {acked:?} was acknowledged (later commits applied: {later:?})"
                    ));
                }
                h.expected = value;
            }
        }
    }

    /// After each step: the touched groups, and (d) for quiescent partitions now and then.
    pub(super) fn check_touched(&mut self) {
        let touched: Vec<usize> = self.touched.iter().copied().collect();
        let mut parts = BTreeSet::new();
        for g in touched {
            self.check_group(g);
            parts.insert(self.groups[g].partition);
            if self.failure.is_some() {
                return;
            }
        }
        for s in parts {
            if self.quiescent(s) && self.now >= self.slots[s].next_d_check {
                let gap = self.rng.range(500, 5000);
                self.slots[s].next_d_check = self.now + gap;
                self.check_replay(s);
            }
        }
    }

    pub(super) fn check_all(&mut self) {
        for g in 0..self.groups.len() {
            self.check_group(g);
        }
        for s in 0..self.slots.len() {
            if self.quiescent(s) {
                self.check_replay(s);
            }
        }
    }

    /// (a) and (b) for one group.
    fn check_group(&mut self, g: usize) {
        if !self.broker_up {
            return;
        }
        let s = self.groups[g].partition;
        let load = self.slots[s].load;
        let Some(c) = self.slots[s].coordinator() else {
            return;
        };
        let name = &self.groups[g].name;
        let mut failures: Vec<String> = Vec::new();
        let wm = self
            .oracle
            .uptime
            .get(&g)
            .filter(|w| w.load == load)
            .cloned();
        let kind = self.kind(g, c);
        if wm
            .as_ref()
            .is_some_and(|w| w.kind.is_some_and(|k| k != kind))
        {
            self.stats.conversions += 1;
        }
        let wm = wm.filter(|w| w.kind.is_none_or(|k| k == kind));
        let mut next = Watermark {
            load,
            kind: Some(kind),
            ..Default::default()
        };
        match kind {
            Protocol::Consumer => {
                let Some(cg) = c.consumer_groups.get(name) else {
                    if let Some(w) = wm.filter(|w| w.group_epoch > 0) {
                        failures.push(format!(
                            "(b) {name} vanished after reaching group epoch {}",
                            w.group_epoch
                        ));
                    }
                    return self.report(failures);
                };
                // (a) coordinator side: one holder per partition.
                let mut holder: BTreeMap<(Uuid, i32), &str> = BTreeMap::new();
                for m in cg.members.values() {
                    for a in [&m.assigned, &m.pending_revocation] {
                        for (t, ps) in a {
                            for p in ps {
                                if let Some(other) = holder.insert((*t, *p), &m.member_id) {
                                    failures.push(format!(
                                        "(a) {name}: partition {t}:{p} is held by both {other} \
                                         and {} in the coordinator",
                                        m.member_id
                                    ));
                                }
                            }
                        }
                    }
                }
                // (b) epochs within this load.
                next.group_epoch = cg.group_epoch;
                next.assignment_epoch = cg.assignment_epoch;
                if cg.assignment_epoch > cg.group_epoch {
                    failures.push(format!(
                        "(b) {name}: assignment epoch {} is ahead of group epoch {}",
                        cg.assignment_epoch, cg.group_epoch
                    ));
                }
                for m in cg.members.values() {
                    next.members.insert(m.member_id.clone(), m.member_epoch);
                    if m.member_epoch > cg.assignment_epoch {
                        failures.push(format!(
                            "(b) {name}: member {} has epoch {} beyond the assignment epoch {}",
                            m.member_id, m.member_epoch, cg.assignment_epoch
                        ));
                    }
                }
                if let Some(w) = &wm {
                    if cg.group_epoch < w.group_epoch || cg.assignment_epoch < w.assignment_epoch {
                        failures.push(format!(
                            "(b) {name}: epochs went back from {}/{} to {}/{}",
                            w.group_epoch, w.assignment_epoch, cg.group_epoch, cg.assignment_epoch
                        ));
                    }
                    for (id, e) in &w.members {
                        if let Some(m) = cg.members.get(id) {
                            if m.member_epoch >= 0 && m.member_epoch < *e {
                                failures.push(format!(
                                    "(b) {name}: member {id} epoch went back from {e} to {}",
                                    m.member_epoch
                                ));
                            }
                        }
                    }
                }
                // (a) client side: members in good standing own only what the coordinator
                // lists for them, so no two own the same partition.
                let mut owners: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
                for &ci in &self.groups[g].clients {
                    let cl = &self.clients[ci];
                    if let Proto::Classic(x) = &cl.proto {
                        // A classic member of a consumer group (online migration): in good
                        // standing at its member epoch, it owns only what the coordinator lists.
                        let Some(m) = cg.members.get(&x.member_id) else {
                            continue;
                        };
                        if cl.phase != Phase::Active
                            || x.state != CState::Stable
                            || x.generation != m.member_epoch
                        {
                            continue;
                        }
                        for (t, p) in self.client_owned(ci) {
                            let listed = m.assigned.get(&t).is_some_and(|a| a.contains(&p))
                                || m.pending_revocation.get(&t).is_some_and(|a| a.contains(&p));
                            if !listed {
                                failures.push(format!(
                                    "(a) {name}: classic client c{ci} (member {}, generation {}) \
                                     owns {t}:{p}, which the coordinator does not list for it",
                                    x.member_id, x.generation
                                ));
                            }
                            if let Some(other) = owners.insert((t, p), ci) {
                                failures.push(format!(
                                    "(a) {name}: partition {t}:{p} is owned by clients c{other} \
                                     and c{ci}, both in good standing"
                                ));
                            }
                        }
                        continue;
                    }
                    let Proto::Consumer(x) = &cl.proto else {
                        continue;
                    };
                    if cl.phase != Phase::Active || x.owned.is_empty() {
                        continue;
                    }
                    let Some(m) = cg.members.get(&x.member_id) else {
                        continue; // fenced: unknown member
                    };
                    let subset = x
                        .owned
                        .iter()
                        .all(|(t, ps)| m.assigned.get(t).is_some_and(|a| ps.is_subset(a)));
                    let good =
                        m.member_epoch == x.epoch || (x.epoch == m.previous_member_epoch && subset);
                    if !good {
                        continue;
                    }
                    for (t, ps) in &x.owned {
                        for p in ps {
                            let listed = m.assigned.get(t).is_some_and(|a| a.contains(p))
                                || m.pending_revocation.get(t).is_some_and(|a| a.contains(p));
                            if !listed {
                                failures.push(format!(
                                    "(a) {name}: client c{ci} (member {}, epoch {}) owns {t}:{p}, \
                                     which the coordinator does not list for it (member epoch {}, \
                                     assigned {:?}, revoking {:?})",
                                    x.member_id,
                                    x.epoch,
                                    m.member_epoch,
                                    m.assigned,
                                    m.pending_revocation
                                ));
                            }
                            if let Some(other) = owners.insert((*t, *p), ci) {
                                failures.push(format!(
                                    "(a) {name}: partition {t}:{p} is owned by clients c{other} \
                                     and c{ci}, both in good standing"
                                ));
                            }
                        }
                    }
                }
            }
            Protocol::Classic => {
                let Some(cg) = c.groups.get(name) else {
                    return;
                };
                next.generation = cg.generation;
                if let Some(w) = &wm {
                    if cg.generation < w.generation {
                        failures.push(format!(
                            "(b) {name}: generation went back from {} to {}",
                            w.generation, cg.generation
                        ));
                    }
                }
                // (a) for classic: members of the current generation hold disjoint partitions.
                let mut owners: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
                for &ci in &self.groups[g].clients {
                    let cl = &self.clients[ci];
                    let Proto::Classic(x) = &cl.proto else {
                        continue;
                    };
                    if cl.phase != Phase::Active
                        || x.state != CState::Stable
                        || x.generation != cg.generation
                        || !cg.members.contains_key(&x.member_id)
                    {
                        continue;
                    }
                    for tp in self.client_owned(ci) {
                        if let Some(other) = owners.insert(tp, ci) {
                            failures.push(format!(
                                "(a) {name}: partition {}:{} is owned by clients c{other} and c{ci} \
                                 of the current generation {}",
                                tp.0, tp.1, cg.generation
                            ));
                        }
                    }
                }
            }
        }
        self.stats.checks += 3;
        self.oracle.uptime.insert(g, next);
        self.report(failures);
    }

    fn report(&mut self, failures: Vec<String>) {
        if let Some(f) = failures.into_iter().next() {
            self.fail(f);
        }
    }

    /// (d) at a quiescent point: the disk (snapshot + log) replays to the live state, and so do
    /// the live coordinator's snapshot records.
    fn check_replay(&mut self, s: usize) {
        let (fresh, truncated) = match self.replay_from_disk(s) {
            Ok(x) => x,
            Err(e) => {
                return self.fail(format!("(d) partition {s}: replaying the disk failed: {e}"))
            }
        };
        let live = self.slots[s].coordinator().expect("quiescent");
        self.stats.checks += 3;
        if let Some(t) = truncated {
            return self.fail(format!(
                "(d) partition {s}: at a quiescent point the log has a torn tail: {t:?}"
            ));
        }
        let (pl, pf) = (projection(live), projection(&fresh));
        if pl != pf {
            return self.fail(format!(
                "(d) partition {s}: replaying the disk does not give the live state: {}",
                diff(&pl, &pf)
            ));
        }
        let (tl, tf) = (txn_projection(live), txn_projection(&fresh));
        if tl != tf {
            return self.fail(format!(
                "(d) partition {s}: replaying the disk does not give the live pending \
                 transactional offsets: live {tl:?}, replayed {tf:?}"
            ));
        }
        if classic_settled(live) {
            let (a, b) = (live.durable_view(), fresh.durable_view());
            if a != b {
                let la: BTreeMap<_, _> = a.0.into_iter().collect();
                let lb: BTreeMap<_, _> = b.0.into_iter().collect();
                let first = la
                    .keys()
                    .chain(lb.keys())
                    .find(|k| la.get(*k) != lb.get(*k))
                    .map(|k| format!("{k}: live {:?}\n  replayed {:?}", la.get(k), lb.get(k)));
                return self.fail(format!(
                    "(d) partition {s}: durable_view() of the live coordinator differs from the \
                     replay of its disk: {}",
                    first.unwrap_or_else(|| "(in offsets or consumer groups)".into())
                ));
            }
        }
        let mut snap = Coordinator::new(live.partition, live.config.clone());
        for r in live.snapshot_records() {
            snap.replay(&r);
        }
        if projection(&snap) != pl {
            return self.fail(format!(
                "(d) partition {s}: replaying snapshot_records() does not give the live state: {}",
                diff(&pl, &projection(&snap))
            ));
        }
        if self.slots[s].tail.is_empty() && projection(&self.slots[s].shadow) != pl {
            let d = diff(&pl, &projection(&self.slots[s].shadow));
            self.fail(format!(
                "(d) partition {s}: the live state differs from the acknowledged records: {d}"
            ));
        }
    }

    /// What a restart would load right now (without changing the disk: the log is quiescent,
    /// so opening it finds nothing to cut).
    fn replay_from_disk(&mut self, s: usize) -> std::io::Result<(Coordinator, Option<Truncation>)> {
        use futures_lite::future::block_on;
        let slot = &self.slots[s];
        let mut c = Coordinator::new(slot.partition, self.p.gcfg.clone());
        let mut start = 0;
        let mut bad = 0u64;
        if let Some(snap) = &slot.snapshot {
            for r in &snap.records {
                if !c.replay_bytes(&r.key, Some(&r.value)) {
                    bad += 1;
                }
            }
            start = snap.offset + 1;
        }
        // As a load replays: transactional batches and markers by their batch header.
        let (_, report) = block_on(storage::log::PartitionLog::open_from_batches(
            slot.dir.clone(),
            self.p.log_cfg.clone(),
            start,
            |h, _, _, k, v| {
                if !c.replay_in_batch(h.attributes, h.producer_id, h.producer_epoch, k, v) {
                    bad += 1;
                }
            },
        ))?;
        if bad > 0 {
            return Err(std::io::Error::other(format!(
                "{bad} records did not decode"
            )));
        }
        Ok((c, report.truncated))
    }

    /// (e) After the settle phase: every group converged.
    pub(super) fn check_converged(&mut self) {
        if !self.broker_up {
            return self.fail("(e) the broker is still down after the settle phase".into());
        }
        for s in 0..self.slots.len() {
            if !self.quiescent(s) || !(self.slots[s].parked_len() == 0) {
                return self.fail(format!(
                    "(e) partition {s} is not quiet after the settle phase (available {}, \
                     pending {}, parked {})",
                    self.slots[s].available(),
                    self.slots[s].pending_len(),
                    self.slots[s].parked_len()
                ));
            }
        }
        for g in 0..self.groups.len() {
            self.stats.checks += 1;
            let f = self.converged(g);
            if let Err(msg) = f {
                let name = self.groups[g].name.clone();
                return self.fail(format!("(e) {name} did not converge: {msg}"));
            }
        }
        self.stats.checks += 1;
        if let Err(msg) = self.txn_converged() {
            self.fail(format!(
                "(t5) transactions did not end after the settle phase: {msg}"
            ));
        }
    }

    /// What the coordinator holds group `g` as: its protocol, or for a mixed group whichever
    /// kind it is now.
    fn kind(&self, g: usize, c: &Coordinator) -> Protocol {
        let spec = &self.groups[g];
        if !spec.mixed {
            return spec.protocol;
        }
        if c.consumer_groups.contains_key(&spec.name) {
            Protocol::Consumer
        } else {
            Protocol::Classic
        }
    }

    pub(super) fn converged(&self, g: usize) -> Result<(), String> {
        let spec = &self.groups[g];
        let c = self.slots[spec.partition]
            .coordinator()
            .expect("quiescent partitions have coordinators");
        let live: Vec<usize> = spec
            .clients
            .iter()
            .copied()
            .filter(|ci| self.clients[*ci].phase == Phase::Active)
            .collect();
        let mut owned_union: BTreeSet<(Uuid, i32)> = BTreeSet::new();
        let mut wanted: BTreeSet<String> = BTreeSet::new();
        match self.kind(g, c) {
            Protocol::Consumer => {
                let members: BTreeMap<String, &engine::group::consumer::ConsumerMember> = c
                    .consumer_groups
                    .get(&spec.name)
                    .map(|cg| cg.members.iter().map(|(k, v)| (k.clone(), v)).collect())
                    .unwrap_or_default();
                let mut expect = BTreeSet::new();
                for &ci in &live {
                    if let Proto::Classic(x) = &self.clients[ci].proto {
                        expect.insert(x.member_id.clone());
                        wanted.extend(x.subscription.iter().cloned());
                        let Some(m) = members.get(&x.member_id) else {
                            return Err(format!(
                                "live classic client c{ci} ({}) is not a member",
                                x.member_id
                            ));
                        };
                        let owned = self.client_owned(ci);
                        let listed: BTreeSet<(Uuid, i32)> = m
                            .assigned
                            .iter()
                            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
                            .collect();
                        if x.state != CState::Stable
                            || x.generation != m.member_epoch
                            || owned != listed
                            || m.state != engine::group::consumer::MemberState::Stable
                        {
                            return Err(format!(
                                "classic client c{ci} ({:?} at generation {}, owns {owned:?}) and \
                                 member {} (epoch {}, state {:?}, assigned {:?}) disagree",
                                x.state,
                                x.generation,
                                m.member_id,
                                m.member_epoch,
                                m.state,
                                m.assigned
                            ));
                        }
                        owned_union.extend(owned);
                        continue;
                    }
                    let Proto::Consumer(x) = &self.clients[ci].proto else {
                        continue;
                    };
                    expect.insert(x.member_id.clone());
                    wanted.extend(x.subscription.iter().cloned());
                    let Some(m) = members.get(&x.member_id) else {
                        return Err(format!(
                            "live client c{ci} ({}) is not a member",
                            x.member_id
                        ));
                    };
                    if m.member_epoch != x.epoch
                        || m.assigned != x.owned
                        || !m.pending_revocation.is_empty()
                        || m.state != engine::group::consumer::MemberState::Stable
                    {
                        return Err(format!(
                            "client c{ci} (epoch {}, owns {:?}) and member {} (epoch {}, state \
                             {:?}, assigned {:?}) disagree",
                            x.epoch, x.owned, m.member_id, m.member_epoch, m.state, m.assigned
                        ));
                    }
                    owned_union.extend(self.client_owned(ci));
                }
                let actual: BTreeSet<String> = members.keys().cloned().collect();
                if actual != expect {
                    return Err(format!("members {actual:?}, live clients {expect:?}"));
                }
                if let Some(cg) = c.consumer_groups.get(&spec.name) {
                    if !cg.members.is_empty() && cg.assignment_epoch != cg.group_epoch {
                        return Err(format!(
                            "group epoch {} but assignment epoch {}",
                            cg.group_epoch, cg.assignment_epoch
                        ));
                    }
                }
            }
            Protocol::Classic => {
                let group = c.groups.get(&spec.name);
                let members: BTreeSet<String> = group
                    .map(|x| x.members.keys().cloned().collect())
                    .unwrap_or_default();
                let mut expect = BTreeSet::new();
                for &ci in &live {
                    let Proto::Classic(x) = &self.clients[ci].proto else {
                        if spec.mixed {
                            return Err(format!(
                                "live consumer-protocol client c{ci} in a group held as classic"
                            ));
                        }
                        continue;
                    };
                    expect.insert(x.member_id.clone());
                    wanted.extend(x.subscription.iter().cloned());
                    let gen = group.map_or(-1, |x| x.generation);
                    if x.state != CState::Stable || x.generation != gen {
                        return Err(format!(
                            "client c{ci} ({}) is {:?} at generation {}, the group at {gen} ({:?})",
                            x.member_id,
                            x.state,
                            x.generation,
                            group.map(|x| x.state)
                        ));
                    }
                    owned_union.extend(self.client_owned(ci));
                }
                if members != expect {
                    return Err(format!("members {members:?}, live clients {expect:?}"));
                }
                if !live.is_empty() && group.is_some_and(|x| x.state != State::Stable) {
                    return Err(format!("state {:?}", group.map(|x| x.state)));
                }
            }
        }
        let all: BTreeSet<(Uuid, i32)> = wanted
            .iter()
            .filter_map(|t| self.topics.get(t))
            .flat_map(|t| (0..t.partitions).map(move |p| (t.id, p)))
            .collect();
        if owned_union != all {
            return Err(format!(
                "owned partitions {} of {} subscribed (missing {:?})",
                owned_union.len(),
                all.len(),
                all.difference(&owned_union).take(5).collect::<Vec<_>>()
            ));
        }
        Ok(())
    }
}

impl World {
    /// A marker was applied to slot `s` (request `id` of marker job `job`): the producer's
    /// pending offsets become visible (COMMIT, each unless a later committed offset landed on
    /// its partition) or are dropped (ABORT).
    fn oracle_marker_applied(&mut self, s: usize, id: engine::group::ReqId, job: u64) {
        let Some(run) = self.txn.jobs.get(&job) else {
            return self.fail(format!("(t1) a marker of unknown job {job} was applied"));
        };
        let (pid, commit, key) = (run.job.producer_id, run.job.commit, run.key.clone());
        let pending = self
            .oracle
            .txn
            .pending
            .get_mut(&s)
            .and_then(|m| m.remove(&pid))
            .unwrap_or_default();
        if !commit {
            return;
        }
        let mut applied = Vec::new();
        for ((g, t, p), v) in pending {
            self.stats.checks += 1;
            let m = &mut self.oracle.txn;
            let origin = m.origin.get(&v).map(|o| o.1.clone()).unwrap_or_default();
            if !origin.contains(&Some(key.clone())) {
                return self.fail(format!(
                    "(t1) the COMMIT marker of transaction {key:?} made offset {v} of {} \
                     {t}-{p} visible, but that offset was written in transaction {origin:?}",
                    self.groups[g].name
                ));
            }
            let vs = m.value_seq.get(&v).copied().unwrap_or(0);
            let cs = m
                .committed_seq
                .get(&(g, t.clone(), p))
                .copied()
                .unwrap_or(0);
            if vs <= cs {
                continue; // a later committed offset wins
            }
            m.committed_seq.insert((g, t.clone(), p), vs);
            let h = self.oracle.commits.entry((g, t.clone(), p)).or_default();
            h.index.insert(v, h.values.len());
            h.values.push(v);
            h.expected = Some(v);
            applied.push((g, t, p, v));
        }
        self.oracle.txn.marker_applied.insert(id, applied);
    }

    /// (t1) An offset an OffsetFetch returned: if a transaction wrote it, that transaction
    /// committed (its durable prepare record says so). `Some(message)` if not.
    fn oracle_txn_visible(&mut self, v: i64) -> Option<String> {
        let (pid, keys) = self.oracle.txn.origin.get(&v)?.clone();
        self.stats.checks += 1;
        let decided: Vec<Option<bool>> = keys
            .iter()
            .map(|k| {
                k.as_ref()
                    .and_then(|k| self.oracle.txn.decisions.get(k))
                    .copied()
            })
            .collect();
        (!decided.contains(&Some(true))).then(|| {
            format!(
                "(t1) OffsetFetch returned offset {v}, written by producer {pid} in \
                 transaction(s) {keys:?}, whose outcomes are {decided:?} (none committed)"
            )
        })
    }

    /// A transactional client read these offsets (after the network): none may come from a
    /// transaction that did not commit.
    pub(super) fn oracle_txn_observed(&mut self, _c: usize, values: &[i64]) {
        for &v in values {
            self.stats.txn_reads_checked += 1;
            if let Some(msg) = self.oracle_txn_visible(v) {
                return self.fail(msg);
            }
        }
    }

    /// (t0) A transaction's prepare record is durable: its outcome never changes after that.
    pub(super) fn oracle_txn_decided(&mut self, key: &TxnKey, commit: bool) {
        self.stats.checks += 1;
        match self.oracle.txn.decisions.insert(key.clone(), commit) {
            Some(before) if before != commit => self.fail(format!(
                "(t0) transaction {key:?} was decided {} after its durable prepare record said {}",
                if commit { "COMMIT" } else { "ABORT" },
                if before { "COMMIT" } else { "ABORT" }
            )),
            _ => {}
        }
    }

    /// (t2) After a load of slot `s`: every pending transactional offset was written by its
    /// producer; a producer's acknowledged pending offsets are all still pending or none is
    /// (its marker landed whole or not at all); then the model restarts from the loaded state.
    fn check_load_txn(&mut self, s: usize) {
        let c = self.slots[s].coordinator().expect("loaded");
        let mut loaded: BTreeMap<i64, ProducerOffsets> = BTreeMap::new();
        for (pid, t) in &c.txn.by_producer {
            for (group, offsets) in &t.offsets {
                let Some(g) = self.group_index(group) else {
                    continue;
                };
                for ((topic, partition), p) in offsets {
                    loaded
                        .entry(*pid)
                        .or_default()
                        .insert((g, topic.clone(), *partition), p.value.offset);
                }
            }
        }
        let mut failure = None;
        for (pid, m) in &loaded {
            for v in m.values() {
                self.stats.checks += 1;
                if self.oracle.txn.origin.get(v).map(|o| o.0) != Some(*pid) {
                    failure = Some(format!(
                        "(t2) after a load of partition {s}, offset {v} is pending for producer \
                         {pid}, which never wrote it"
                    ));
                }
            }
        }
        for (pid, m) in self.oracle.txn.pending.get(&s).into_iter().flatten() {
            let acked: Vec<i64> = m
                .values()
                .copied()
                .filter(|v| self.oracle.txn.acked.contains(v))
                .collect();
            let kept: Vec<bool> = acked
                .iter()
                .map(|v| loaded.get(pid).is_some_and(|l| l.values().any(|x| x == v)))
                .collect();
            self.stats.checks += 1;
            if kept.iter().any(|k| *k) && kept.iter().any(|k| !*k) {
                failure = Some(format!(
                    "(t2) after a load of partition {s}, producer {pid} kept only part of its \
                     acknowledged pending offsets {acked:?} (kept: {kept:?})"
                ));
            }
        }
        if let Some(f) = failure {
            return self.fail(f);
        }
        self.oracle.txn.pending.insert(s, loaded);
        // Committed offsets now: the log order of their records, as before the load.
        let keys: Vec<(usize, String, i32)> = self
            .oracle
            .commits
            .keys()
            .filter(|(g, _, _)| self.groups[*g].partition == s)
            .cloned()
            .collect();
        for k in keys {
            let seq = self.oracle.commits[&k]
                .expected
                .and_then(|v| self.oracle.txn.value_seq.get(&v).copied())
                .unwrap_or(0);
            self.oracle.txn.committed_seq.insert(k, seq);
        }
    }

    /// (t5) Transactions end: after the settle phase no transaction is open or ending, no
    /// marker job is under way, and no partition holds pending transactional offsets (an
    /// offset no marker will end would block `require_stable` readers forever).
    pub(super) fn txn_converged(&self) -> Result<(), String> {
        if !self.txn.jobs.is_empty() {
            return Err(format!("{} marker jobs under way", self.txn.jobs.len()));
        }
        if let Some(c) = self.txn.coord.as_ref() {
            for tc in &self.tclients {
                if let Some(m) = c.get(&tc.tid) {
                    use engine::txn::TxnState as S;
                    if matches!(m.state, S::Ongoing | S::PrepareCommit | S::PrepareAbort) {
                        return Err(format!("{} is still {:?}", tc.tid, m.state));
                    }
                }
            }
        }
        for (s, slot) in self.slots.iter().enumerate() {
            if let Some(c) = slot.coordinator() {
                if !c.txn.is_empty() {
                    return Err(format!(
                        "partition {s} holds pending offsets of producers {:?}",
                        c.txn.by_producer.keys().collect::<Vec<_>>()
                    ));
                }
            }
        }
        Ok(())
    }
}
