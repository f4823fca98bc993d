//! Simulated clients: classic members (Kafka's `ConsumerCoordinator`/`AbstractCoordinator`
//! behaviour, eager "range" assignment) and KIP-848 members (the `ConsumerMembershipManager`
//! behaviour: heartbeat with the member epoch, revoke-then-acknowledge, fence-then-rejoin).
//!
//! A client accepts a response only for the request it is still waiting for (its correlation
//! id): a response that arrives after the request timed out, or a duplicate, is ignored, as a
//! Kafka client ignores whatever comes back on a connection it has abandoned.

use super::world::{Protocol, Reply, World};
use bytes::Bytes;
use engine::group::assignor::Assignment;
use engine::group::{GroupRequest, GroupResponse};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as HbTopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::{BTreeMap, BTreeSet};

/// Kafka's "no error" code. `ResponseError` has no variant for it (`try_from_code(0)` is `None`);
/// every other code a client reacts to is a `ResponseError` variant.
const NONE: i16 = 0;

/// The coordinator could not answer; a Kafka client looks the coordinator up again and retries.
use wire::error::is_coordinator_unavailable as coordinator_error;

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Active,
    /// The process died: it sends nothing and owns nothing.
    Crashed,
    /// Closed after leaving the group.
    Left,
}

#[derive(Debug, Clone)]
pub(super) enum PendKind {
    Join,
    Sync,
    Heartbeat,
    /// `revocation`: the commit a KIP-848 member makes before giving partitions up.
    Commit {
        revocation: bool,
    },
    Fetch,
    Leave,
    ConsumerHeartbeat {
        owned: Option<Assignment>,
        subscription: Option<u32>,
    },
}

#[derive(Debug, Clone)]
pub(super) struct Pending {
    pub kind: PendKind,
    pub deadline: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CState {
    Unjoined,
    Joining,
    Syncing,
    Stable,
}

/// A classic member (eager rebalancing: everything is revoked before rejoining).
#[derive(Debug, Clone)]
pub(super) struct Classic {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub state: CState,
    pub owned: BTreeSet<(String, i32)>,
    pub subscription: Vec<String>,
    pub session_timeout: i32,
    pub rebalance_timeout: i32,
    pub join_v: i16,
    pub sync_v: i16,
    pub hb_v: i16,
    pub commit_v: i16,
    pub leave_v: i16,
    pub next_hb: i64,
    pub hb_corr: Option<u64>,
    pub retry_at: i64,
    /// The last generation accepted from a JoinGroup, with the partition load that gave it.
    pub seen: Option<(u64, i32)>,
}

/// A KIP-848 member.
#[derive(Debug, Clone)]
pub(super) struct Consumer {
    pub member_id: String,
    pub epoch: i32,
    pub owned: Assignment,
    /// The latest assignment received and not yet reconciled.
    pub target: Option<Assignment>,
    /// Waiting for the commit of partitions being revoked (its correlation id).
    pub revoking: Option<u64>,
    pub subscription: Vec<String>,
    /// Bumped when the subscription changes; the heartbeat that carries it acknowledges it.
    pub sub_version: u32,
    pub sub_acked: u32,
    /// The next heartbeat must carry every field (after an error or a timeout).
    pub full: bool,
    /// What the coordinator last acknowledged we own.
    pub acked_owned: Option<Assignment>,
    pub rebalance_timeout: i32,
    pub interval: i64,
    pub next_hb: i64,
    pub hb_corr: Option<u64>,
    /// Highest member epoch this client ever accepted (they must never go back).
    pub max_epoch: i32,
    pub commit_on_revoke: bool,
}

#[derive(Debug, Clone)]
pub(super) enum Proto {
    Classic(Classic),
    Consumer(Consumer),
}

#[derive(Debug, Clone)]
pub(super) struct Client {
    pub idx: usize,
    pub group: usize,
    pub client_id: String,
    pub phase: Phase,
    /// Until then the client's messages are lost both ways (a network partition: a zombie).
    pub cut_off_until: i64,
    pub wake_at: Option<i64>,
    pub outstanding: BTreeMap<u64, Pending>,
    pub incarnation: u32,
    pub restart_at: Option<i64>,
    pub request_timeout: i64,
    pub commit_interval: i64,
    pub next_commit: i64,
    pub commit_corr: Option<u64>,
    pub proto: Proto,
    /// Requests of this client the coordinator already handled (the most recent ones).
    pub processed: BTreeSet<u64>,
}

fn subscription_bytes(topics: &[String]) -> Bytes {
    wire::consumer_protocol::encode_subscription(topics.iter().map(|t| sb(t)), 0)
}

fn assignment_bytes(parts: &BTreeMap<String, Vec<i32>>) -> Bytes {
    wire::consumer_protocol::encode_assignment(parts.iter().map(|(t, ps)| (sb(t), ps.clone())), 0)
}

fn decode_assignment(bytes: &Bytes) -> Option<BTreeSet<(String, i32)>> {
    if bytes.is_empty() {
        return Some(BTreeSet::new());
    }
    let a = wire::consumer_protocol::decode_assignment(bytes).ok()?;
    Some(
        a.assigned_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.to_string(), *p)))
            .collect(),
    )
}

fn assignment_of(a: &consumer_group_heartbeat_response::Assignment) -> Assignment {
    a.topic_partitions
        .iter()
        .map(|t| {
            (
                t.topic_id,
                t.partitions.iter().copied().collect::<BTreeSet<i32>>(),
            )
        })
        .filter(|(_, p)| !p.is_empty())
        .collect()
}

fn minus(a: &Assignment, b: &Assignment) -> Assignment {
    a.iter()
        .map(|(t, ps)| {
            let rest: BTreeSet<i32> = match b.get(t) {
                Some(bs) => ps.difference(bs).copied().collect(),
                None => ps.clone(),
            };
            (*t, rest)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect()
}

fn intersect(a: &Assignment, b: &Assignment) -> Assignment {
    a.iter()
        .filter_map(|(t, ps)| {
            let common: BTreeSet<i32> = ps.intersection(b.get(t)?).copied().collect();
            (!common.is_empty()).then_some((*t, common))
        })
        .collect()
}

impl Client {
    pub fn new(w: &mut World, idx: usize, group: usize) -> Self {
        let spec = &w.groups[group];
        let topics = spec.topics.clone();
        let protocol = spec.protocol;
        let rng = &mut w.rng;
        // Most members subscribe to all the group's topics; some to a subset.
        let subscription = pick_subscription(rng, &topics);
        let proto = new_proto(rng, idx, protocol, subscription);
        let mut c = Client {
            idx,
            group,
            client_id: format!("client-{idx}"),
            phase: Phase::Active,
            cut_off_until: 0,
            wake_at: None,
            outstanding: BTreeMap::new(),
            incarnation: 0,
            restart_at: None,
            // Below every session timeout, as in Kafka (30 s against 45 s): a client must be able
            // to time a heartbeat out and send another before its session runs out.
            request_timeout: rng.range(1500, 4001),
            commit_interval: rng.range(500, 5001),
            next_commit: 0,
            commit_corr: None,
            proto,
            processed: BTreeSet::new(),
        };
        c.reset_for_incarnation(w.now);
        c
    }

    /// Remember that the coordinator handled request `corr`; false if it already had. Over TCP
    /// a request is answered once: a second copy can only be a late retry on a connection the
    /// client gave up, so only the first processing is answered to the client.
    pub fn note_processed(&mut self, corr: u64) -> bool {
        let fresh = self.processed.insert(corr);
        while self.processed.len() > 512 {
            self.processed.pop_first();
        }
        fresh
    }

    /// A fresh process: a new KIP-848 member id (Kafka clients make their own, KIP-1082), an
    /// unknown classic member id (a static member keeps its instance id).
    fn reset_for_incarnation(&mut self, now: i64) {
        self.phase = Phase::Active;
        self.outstanding.clear();
        self.commit_corr = None;
        self.restart_at = None;
        self.next_commit = now + self.commit_interval;
        match &mut self.proto {
            Proto::Classic(c) => {
                c.member_id.clear();
                c.generation = -1;
                c.state = CState::Unjoined;
                c.owned.clear();
                c.hb_corr = None;
                c.retry_at = now;
                c.seen = None;
            }
            Proto::Consumer(c) => {
                c.member_id = format!("m{}-{}", self.idx, self.incarnation);
                c.epoch = 0;
                c.owned.clear();
                c.target = None;
                c.revoking = None;
                c.full = true;
                c.acked_owned = None;
                c.hb_corr = None;
                c.next_hb = now;
                c.sub_acked = c.sub_version;
            }
        }
    }
}

/// A new process's protocol state: a classic member (maybe static) or a KIP-848 member, with
/// versions and timeouts drawn from `rng`.
fn new_proto(
    rng: &mut super::rng::Rng,
    idx: usize,
    protocol: Protocol,
    subscription: Vec<String>,
) -> Proto {
    match protocol {
        Protocol::Classic => {
            let is_static = rng.chance(0.2);
            let join_v = if is_static {
                *rng.pick(&[5, 7, 9])
            } else {
                *rng.pick(&[1, 3, 4, 5, 7, 9])
            };
            let session_timeout = rng.range(6000, 15_001) as i32;
            Proto::Classic(Classic {
                member_id: String::new(),
                instance_id: is_static.then(|| format!("inst-{idx}")),
                generation: -1,
                state: CState::Unjoined,
                owned: BTreeSet::new(),
                subscription,
                session_timeout,
                rebalance_timeout: rng.range(6000, 20_001) as i32,
                join_v,
                sync_v: if join_v >= 5 { *rng.pick(&[3, 5]) } else { 1 },
                hb_v: if join_v >= 5 { 3 } else { 1 },
                commit_v: if join_v >= 5 {
                    *rng.pick(&[7, 8, 9])
                } else {
                    *rng.pick(&[2, 5, 6])
                },
                leave_v: if join_v >= 5 { *rng.pick(&[3, 5]) } else { 1 },
                next_hb: 0,
                hb_corr: None,
                retry_at: 0,
                seen: None,
            })
        }
        Protocol::Consumer => Proto::Consumer(Consumer {
            member_id: String::new(),
            epoch: 0,
            owned: Assignment::new(),
            target: None,
            revoking: None,
            subscription,
            sub_version: 0,
            sub_acked: 0,
            full: true,
            acked_owned: None,
            rebalance_timeout: rng.range(5000, 20_001) as i32,
            interval: 1000,
            next_hb: 0,
            hb_corr: None,
            max_epoch: 0,
            commit_on_revoke: rng.chance(0.7),
        }),
    }
}

fn pick_subscription(rng: &mut super::rng::Rng, topics: &[String]) -> Vec<String> {
    if topics.len() > 1 && rng.chance(0.3) {
        let keep: Vec<String> = topics.iter().filter(|_| rng.chance(0.6)).cloned().collect();
        if !keep.is_empty() {
            return keep;
        }
    }
    topics.to_vec()
}

impl World {
    fn classic(&mut self, c: usize) -> &mut Classic {
        match &mut self.clients[c].proto {
            Proto::Classic(x) => x,
            Proto::Consumer(_) => unreachable!("client {c} is a classic member"),
        }
    }

    fn consumer(&mut self, c: usize) -> &mut Consumer {
        match &mut self.clients[c].proto {
            Proto::Consumer(x) => x,
            Proto::Classic(_) => unreachable!("client {c} is a consumer member"),
        }
    }

    fn send_tracked(&mut self, c: usize, version: i16, req: GroupRequest, kind: PendKind) -> u64 {
        let timeout = match kind {
            // A JoinGroup waits for the join phase; a follower's SyncGroup for the leader's.
            PendKind::Join | PendKind::Sync => match &self.clients[c].proto {
                Proto::Classic(x) => x.rebalance_timeout as i64 + 5000,
                Proto::Consumer(_) => self.clients[c].request_timeout,
            },
            _ => self.clients[c].request_timeout,
        };
        let corr = self.send_request(c, version, req);
        let deadline = self.now + timeout;
        self.clients[c]
            .outstanding
            .insert(corr, Pending { kind, deadline });
        corr
    }

    fn backoff(&mut self) -> i64 {
        self.rng.range(50, 500)
    }

    /// Time to act: restart, time requests out, heartbeat, commit.
    pub(super) fn client_wake(&mut self, c: usize) {
        match self.clients[c].phase {
            Phase::Crashed | Phase::Left => {
                if let Some(at) = self.clients[c].restart_at {
                    if at <= self.now {
                        self.clients[c].incarnation += 1;
                        let g = self.clients[c].group;
                        if self.groups[g].mixed && self.rng.chance(0.5) {
                            // Restarted with the other `group.protocol`: the rolling upgrade
                            // (or downgrade) that online migration serves.
                            let (other, subscription) = match &self.clients[c].proto {
                                Proto::Classic(x) => (Protocol::Consumer, x.subscription.clone()),
                                Proto::Consumer(x) => (Protocol::Classic, x.subscription.clone()),
                            };
                            self.clients[c].proto =
                                new_proto(&mut self.rng, c, other, subscription);
                            self.stats.protocol_switches += 1;
                            self.trace(|| format!("c{c} switches to {other:?}"));
                        }
                        let now = self.now;
                        self.clients[c].reset_for_incarnation(now);
                        self.trace(|| format!("c{c} starts again"));
                    } else {
                        self.wake_client_at(c, at);
                        return;
                    }
                } else {
                    return;
                }
            }
            Phase::Active => {}
        }
        let expired: Vec<(u64, Pending)> = self.clients[c]
            .outstanding
            .iter()
            .filter(|(_, p)| p.deadline <= self.now)
            .map(|(k, p)| (*k, p.clone()))
            .collect();
        for (corr, p) in expired {
            self.clients[c].outstanding.remove(&corr);
            self.on_timeout(c, corr, p.kind);
        }
        if self.clients[c].phase == Phase::Active {
            if self.is_classic(c) {
                self.classic_drive(c);
            } else {
                self.consumer_drive(c);
            }
        }
        self.reschedule(c);
    }

    fn reschedule(&mut self, c: usize) {
        let cl = &self.clients[c];
        let mut next: Option<i64> = None;
        let mut at = |t: i64| next = Some(next.map_or(t, |n: i64| n.min(t)));
        match cl.phase {
            Phase::Crashed | Phase::Left => {
                if let Some(r) = cl.restart_at {
                    at(r);
                }
            }
            Phase::Active => {
                for p in cl.outstanding.values() {
                    at(p.deadline);
                }
                match &cl.proto {
                    Proto::Classic(x) => match x.state {
                        CState::Unjoined => at(x.retry_at),
                        CState::Stable => {
                            if x.hb_corr.is_none() {
                                at(x.next_hb);
                            }
                            if cl.commit_corr.is_none() && !x.owned.is_empty() {
                                at(cl.next_commit);
                            }
                        }
                        CState::Joining | CState::Syncing => {}
                    },
                    Proto::Consumer(x) => {
                        if x.hb_corr.is_none() {
                            at(x.next_hb);
                        }
                        if cl.commit_corr.is_none()
                            && x.epoch > 0
                            && !x.owned.is_empty()
                            && x.revoking.is_none()
                        {
                            at(cl.next_commit);
                        }
                    }
                }
            }
        }
        if let Some(t) = next {
            self.wake_client_at(c, t);
        }
    }

    fn on_timeout(&mut self, c: usize, corr: u64, kind: PendKind) {
        self.trace(|| format!("c{c} #{corr} timed out ({kind:?})"));
        if self.clients[c].commit_corr == Some(corr) {
            self.clients[c].commit_corr = None;
        }
        match kind {
            PendKind::Join | PendKind::Sync => {
                // The client gives up on this round and joins again (same member id).
                self.classic_reset(c, false);
            }
            PendKind::Heartbeat => {
                let x = self.classic(c);
                x.hb_corr = None;
            }
            PendKind::ConsumerHeartbeat { .. } => {
                let b = self.backoff();
                let now = self.now;
                let x = self.consumer(c);
                x.hb_corr = None;
                x.full = true;
                x.next_hb = now + b;
            }
            PendKind::Commit { revocation } => {
                if revocation {
                    self.finish_revocation(c, corr);
                }
            }
            PendKind::Fetch | PendKind::Leave => {}
        }
    }

    pub(super) fn client_reply(&mut self, c: usize, corr: u64, reply: Reply, load: u64) {
        if self.clients[c].phase != Phase::Active {
            return;
        }
        let Some(p) = self.clients[c].outstanding.remove(&corr) else {
            return; // stale or duplicate: the client no longer waits for it
        };
        if self.clients[c].commit_corr == Some(corr) {
            self.clients[c].commit_corr = None;
        }
        match p.kind {
            PendKind::Join => self.on_join_reply(c, reply, load),
            PendKind::Sync => self.on_sync_reply(c, reply),
            PendKind::Heartbeat => self.on_classic_heartbeat_reply(c, reply),
            PendKind::Commit { revocation } => self.on_commit_reply(c, corr, reply, revocation),
            PendKind::Fetch | PendKind::Leave => {}
            PendKind::ConsumerHeartbeat {
                owned,
                subscription,
            } => self.on_consumer_heartbeat_reply(c, reply, owned, subscription),
        }
        if self.clients[c].phase == Phase::Active {
            if self.is_classic(c) {
                self.classic_drive(c);
            } else {
                self.consumer_drive(c);
            }
        }
        self.reschedule(c);
    }

    /// A decision point (at each heartbeat): crash, leave, get cut off, change subscription.
    /// Returns false when the client stopped.
    fn maybe_misbehave(&mut self, c: usize) -> bool {
        if self.settling {
            return true;
        }
        if self.rng.chance(self.p.client_crash_p) {
            self.crash_client(c);
            return false;
        }
        if self.rng.chance(self.p.leave_p) {
            self.leave(c);
            return false;
        }
        if self.rng.chance(self.p.cutoff_p) {
            let d = self.rng.range(1000, 40_000);
            self.clients[c].cut_off_until = self.now + d;
            self.trace(|| format!("c{c} cut off from the network for {d} ms"));
        }
        if self.rng.chance(self.p.sub_change_p) {
            let topics = self.groups[self.clients[c].group].topics.clone();
            let sub = pick_subscription(&mut self.rng, &topics);
            self.trace(|| format!("c{c} subscribes to {sub:?}"));
            match &mut self.clients[c].proto {
                Proto::Classic(x) => {
                    if x.subscription != sub {
                        x.subscription = sub;
                        // New protocol metadata: commit, revoke everything, rejoin.
                        self.classic_rejoin(c, true);
                        return true;
                    }
                }
                Proto::Consumer(x) => {
                    if x.subscription != sub {
                        x.subscription = sub;
                        x.sub_version += 1;
                    }
                }
            }
        }
        true
    }

    fn crash_client(&mut self, c: usize) {
        self.stats.client_crashes += 1;
        self.trace(|| format!("c{c} crashes"));
        let restart = self
            .rng
            .chance(0.8)
            .then(|| self.now + self.rng.range(500, 20_000));
        let cl = &mut self.clients[c];
        cl.phase = Phase::Crashed;
        cl.outstanding.clear();
        cl.commit_corr = None;
        cl.restart_at = restart;
        match &mut cl.proto {
            Proto::Classic(x) => x.owned.clear(),
            Proto::Consumer(x) => x.owned.clear(),
        }
        self.touched.insert(self.clients[c].group);
    }

    /// Close: commit what is owned, give it up, leave the group (a static classic member just
    /// stops: Kafka's static members do not send LeaveGroup on close).
    fn leave(&mut self, c: usize) {
        self.trace(|| format!("c{c} leaves"));
        let group = self.groups[self.clients[c].group].name.clone();
        self.commit_owned(c, false);
        let restart = self
            .rng
            .chance(0.5)
            .then(|| self.now + self.rng.range(500, 20_000));
        match self.clients[c].proto.clone() {
            Proto::Classic(x) => {
                if x.instance_id.is_none() && !x.member_id.is_empty() {
                    let req = if x.leave_v >= 3 {
                        LeaveGroupRequest::default()
                            .with_group_id(GroupId(sb(&group)))
                            .with_members(vec![MemberIdentity::default()
                                .with_member_id(sb(&x.member_id))
                                .with_group_instance_id(x.instance_id.as_deref().map(sb))])
                    } else {
                        LeaveGroupRequest::default()
                            .with_group_id(GroupId(sb(&group)))
                            .with_member_id(sb(&x.member_id))
                    };
                    self.send_tracked(c, x.leave_v, GroupRequest::Leave(req), PendKind::Leave);
                }
                self.classic(c).owned.clear();
            }
            Proto::Consumer(x) => {
                if x.epoch > 0 || !x.member_id.is_empty() {
                    let req = ConsumerGroupHeartbeatRequest::default()
                        .with_group_id(GroupId(sb(&group)))
                        .with_member_id(sb(&x.member_id))
                        .with_member_epoch(-1);
                    self.send_request(c, 1, GroupRequest::ConsumerHeartbeat(req));
                }
                self.consumer(c).owned.clear();
            }
        }
        let cl = &mut self.clients[c];
        cl.phase = Phase::Left;
        cl.outstanding.clear();
        cl.commit_corr = None;
        cl.restart_at = restart;
        self.touched.insert(self.clients[c].group);
    }

    /// Commit every owned partition with a fresh (globally unique) offset.
    fn commit_owned(&mut self, c: usize, tracked: bool) -> Option<u64> {
        let group = self.groups[self.clients[c].group].name.clone();
        let (parts, member, epoch, instance, version): (Vec<(String, i32)>, String, i32, _, i16) =
            match &self.clients[c].proto {
                Proto::Classic(x) => {
                    if x.state != CState::Stable || x.owned.is_empty() {
                        return None;
                    }
                    (
                        x.owned.iter().cloned().collect(),
                        x.member_id.clone(),
                        x.generation,
                        x.instance_id.clone(),
                        x.commit_v,
                    )
                }
                Proto::Consumer(x) => {
                    if x.epoch <= 0 || x.owned.is_empty() {
                        return None;
                    }
                    let names = self.named_partitions(&x.owned);
                    (names, x.member_id.clone(), x.epoch, None, 9)
                }
            };
        Some(self.send_commit(
            c, &group, parts, member, epoch, instance, version, tracked, false,
        ))
    }

    /// The (topic name, partition) pairs of an assignment keyed by topic id, as OffsetCommit
    /// names them.
    fn named_partitions(&self, a: &Assignment) -> Vec<(String, i32)> {
        a.iter()
            .flat_map(|(t, ps)| {
                let name = self
                    .topics
                    .get_by_id(t)
                    .map(|t| t.name.clone())
                    .unwrap_or_default();
                ps.iter().map(move |p| (name.clone(), *p))
            })
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn send_commit(
        &mut self,
        c: usize,
        group: &str,
        parts: Vec<(String, i32)>,
        member: String,
        epoch: i32,
        instance: Option<String>,
        version: i16,
        tracked: bool,
        revocation: bool,
    ) -> u64 {
        let mut topics: BTreeMap<String, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for (t, p) in parts {
            let offset = self.next_offset;
            self.next_offset += 1;
            topics.entry(t).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(offset)
                    .with_committed_metadata(Some(sb(&format!("c{c}")))),
            );
        }
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb(group)))
            .with_member_id(sb(&member))
            .with_generation_id_or_member_epoch(epoch)
            .with_group_instance_id(instance.as_deref().filter(|_| version >= 7).map(sb))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(sb(&t)))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let req = GroupRequest::OffsetCommit(req);
        if tracked || revocation {
            let corr = self.send_tracked(c, version, req, PendKind::Commit { revocation });
            if tracked {
                self.clients[c].commit_corr = Some(corr);
            }
            corr
        } else {
            self.send_request(c, version, req)
        }
    }

    fn send_fetch(&mut self, c: usize, parts: Vec<(String, i32)>) {
        let group = self.groups[self.clients[c].group].name.clone();
        let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (t, p) in parts {
            by_topic.entry(t).or_default().push(p);
        }
        let req = GroupRequest::OffsetFetch {
            group,
            topics: Some(by_topic.into_iter().collect()),
            member_id: None,
            member_epoch: -1,
            require_stable: false,
        };
        self.send_tracked(c, 8, req, PendKind::Fetch);
    }

    // ---- classic ----

    fn classic_drive(&mut self, c: usize) {
        let now = self.now;
        let (state, retry_at, hb_due, commit_due) = {
            let cl = &self.clients[c];
            let Proto::Classic(x) = &cl.proto else {
                unreachable!()
            };
            (
                x.state,
                x.retry_at,
                x.hb_corr.is_none() && now >= x.next_hb,
                cl.commit_corr.is_none() && now >= cl.next_commit && !x.owned.is_empty(),
            )
        };
        match state {
            CState::Unjoined => {
                if now >= retry_at {
                    self.send_join(c);
                }
            }
            CState::Stable => {
                if hb_due {
                    if !self.maybe_misbehave(c) {
                        return;
                    }
                    if self.classic(c).state != CState::Stable {
                        return;
                    }
                    self.send_classic_heartbeat(c);
                }
                if commit_due {
                    let interval = self.clients[c].commit_interval;
                    self.clients[c].next_commit = now + interval;
                    self.commit_owned(c, true);
                }
            }
            CState::Joining | CState::Syncing => {}
        }
    }

    fn send_join(&mut self, c: usize) {
        let group = self.groups[self.clients[c].group].name.clone();
        let x = self.classic(c).clone();
        let req = JoinGroupRequest::default()
            .with_group_id(GroupId(sb(&group)))
            .with_session_timeout_ms(x.session_timeout)
            .with_rebalance_timeout_ms(x.rebalance_timeout)
            .with_member_id(sb(&x.member_id))
            .with_group_instance_id(x.instance_id.as_deref().map(sb))
            .with_protocol_type(sb("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(sb("range"))
                .with_metadata(subscription_bytes(&x.subscription))]);
        self.classic(c).state = CState::Joining;
        self.send_tracked(c, x.join_v, GroupRequest::Join(req), PendKind::Join);
    }

    /// Eager rejoin: commit (optionally), revoke everything, send JoinGroup.
    fn classic_rejoin(&mut self, c: usize, commit: bool) {
        if commit {
            self.commit_owned(c, false);
        }
        let x = self.classic(c);
        x.owned.clear();
        x.hb_corr = None;
        self.send_join(c);
        self.touched.insert(self.clients[c].group);
    }

    /// The member was told it is no longer part of the generation: what it owned is lost.
    fn classic_reset(&mut self, c: usize, forget_member_id: bool) {
        let b = self.backoff();
        let now = self.now;
        let x = self.classic(c);
        x.owned.clear();
        x.hb_corr = None;
        x.state = CState::Unjoined;
        x.retry_at = now + b;
        if forget_member_id {
            x.member_id.clear();
        }
        self.touched.insert(self.clients[c].group);
    }

    /// FENCED_INSTANCE_ID: another process took over the static member's instance id; a Kafka
    /// client fails fatally. The simulator restarts it later as a new process.
    fn classic_fatal(&mut self, c: usize) {
        self.client_fatal(c, "fenced (instance id taken over)");
    }

    /// The client failed with an error a Kafka client treats as fatal: what it owned is lost,
    /// it sends nothing more, and the application starts a new consumer (a new process, with a
    /// new member id) a little later.
    fn client_fatal(&mut self, c: usize, why: &str) {
        self.trace(|| format!("c{c} {why}: stops, restarted later"));
        self.stats.fatal_errors += 1;
        let restart = self.now + self.rng.range(500, 10_000);
        let cl = &mut self.clients[c];
        cl.phase = Phase::Crashed;
        cl.outstanding.clear();
        cl.commit_corr = None;
        cl.restart_at = Some(restart);
        match &mut cl.proto {
            Proto::Classic(x) => x.owned.clear(),
            Proto::Consumer(x) => {
                x.owned.clear();
                x.target = None;
                x.revoking = None;
            }
        }
        self.touched.insert(self.clients[c].group);
    }

    fn on_join_reply(&mut self, c: usize, reply: Reply, load: u64) {
        let r = match reply {
            Reply::Resp(GroupResponse::Join(r)) => r,
            Reply::Err(code) if coordinator_error(code) => return self.classic_reset(c, false),
            other => return self.fail(format!("c{c}: JoinGroup got {other:?}")),
        };
        let code = r.error_code;
        match ResponseError::try_from_code(code) {
            None => {
                let gen = r.generation_id;
                // (b) classic: within one load of the partition, the generations a member is
                // given never go back (a reload may return to the last durable generation).
                // In a mixed group the generation is the member's epoch in the consumer group,
                // which starts again at 0 for a static member that takes over its slot.
                let mixed = self.groups[self.clients[c].group].mixed;
                if let Some((l, g)) = self.classic(c).seen {
                    if l == load && gen < g && !mixed {
                        return self.fail(format!(
                            "(b) classic client c{c} was given generation {gen} after {g} by the \
                             same coordinator load"
                        ));
                    }
                }
                let member_id = r.member_id.to_string();
                let is_leader = r.leader.as_str() == member_id;
                let assignments = if is_leader && !r.skip_assignment {
                    self.range_assign(&r.members)
                } else {
                    Vec::new()
                };
                let group = self.groups[self.clients[c].group].name.clone();
                let x = self.classic(c);
                x.seen = Some((load, gen));
                x.member_id = member_id.clone();
                x.generation = gen;
                x.state = CState::Syncing;
                let sync_v = x.sync_v;
                let req = SyncGroupRequest::default()
                    .with_group_id(GroupId(sb(&group)))
                    .with_generation_id(gen)
                    .with_member_id(sb(&member_id))
                    .with_group_instance_id(x.instance_id.as_deref().map(sb))
                    .with_protocol_type((sync_v >= 5).then(|| sb("consumer")))
                    .with_protocol_name((sync_v >= 5).then(|| sb("range")))
                    .with_assignments(assignments);
                self.send_tracked(c, sync_v, GroupRequest::Sync(req), PendKind::Sync);
            }
            Some(ResponseError::MemberIdRequired) => {
                self.classic(c).member_id = r.member_id.to_string();
                self.send_join(c);
            }
            Some(ResponseError::UnknownMemberId) => self.classic_reset(c, true),
            Some(ResponseError::FencedInstanceId) => self.classic_fatal(c),
            Some(e) if coordinator_error(code) || e == ResponseError::RebalanceInProgress => {
                self.classic_reset(c, false)
            }
            Some(_) => self.fail(format!("c{c}: unexpected JoinGroup error {code}: {r:?}")),
        }
    }

    /// The leader's assignment: per topic, the subscribed members in the order the coordinator
    /// listed them share the partitions in contiguous ranges (Kafka's `RangeAssignor`).
    fn range_assign(
        &self,
        members: &[join_group_response::JoinGroupResponseMember],
    ) -> Vec<SyncGroupRequestAssignment> {
        let subs: Vec<(String, Vec<String>)> = members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    engine::group::classic::decode_subscription_topics(&m.metadata)
                        .unwrap_or_default(),
                )
            })
            .collect();
        let mut topics: BTreeSet<&String> = BTreeSet::new();
        for (_, ts) in &subs {
            topics.extend(ts.iter());
        }
        let mut per_member: Vec<BTreeMap<String, Vec<i32>>> = vec![BTreeMap::new(); subs.len()];
        for t in topics {
            let Some(n) = self.topics.get(t).map(|x| x.partitions) else {
                continue;
            };
            let who: Vec<usize> = (0..subs.len()).filter(|i| subs[*i].1.contains(t)).collect();
            if who.is_empty() {
                continue;
            }
            let k = who.len() as i32;
            let (each, extra) = (n / k, n % k);
            let mut next = 0;
            for (j, &i) in who.iter().enumerate() {
                let count = each + i32::from((j as i32) < extra);
                if count > 0 {
                    per_member[i].insert(t.clone(), (next..next + count).collect());
                }
                next += count;
            }
        }
        subs.iter()
            .zip(per_member)
            .map(|((m, _), parts)| {
                SyncGroupRequestAssignment::default()
                    .with_member_id(sb(m))
                    .with_assignment(assignment_bytes(&parts))
            })
            .collect()
    }

    fn on_sync_reply(&mut self, c: usize, reply: Reply) {
        let r = match reply {
            Reply::Resp(GroupResponse::Sync(r)) => r,
            Reply::Err(code) if coordinator_error(code) => return self.classic_reset(c, false),
            other => return self.fail(format!("c{c}: SyncGroup got {other:?}")),
        };
        let code = r.error_code;
        match ResponseError::try_from_code(code) {
            None => {
                let Some(owned) = decode_assignment(&r.assignment) else {
                    return self.fail(format!(
                        "c{c}: SyncGroup returned an assignment that does not decode"
                    ));
                };
                let now = self.now;
                let interval = {
                    let x = self.classic(c);
                    x.owned = owned.clone();
                    x.state = CState::Stable;
                    (x.session_timeout / 4) as i64
                };
                self.classic(c).next_hb = now + interval;
                let ci = self.clients[c].commit_interval;
                self.clients[c].next_commit = now + ci;
                self.touched.insert(self.clients[c].group);
                if !owned.is_empty() && self.rng.chance(0.5) {
                    // Where to start reading: what a real consumer asks right after a rebalance.
                    self.send_fetch(c, owned.into_iter().collect());
                }
            }
            Some(ResponseError::RebalanceInProgress | ResponseError::IllegalGeneration) => {
                self.classic_reset(c, false)
            }
            Some(ResponseError::UnknownMemberId) => self.classic_reset(c, true),
            Some(ResponseError::FencedInstanceId) => self.classic_fatal(c),
            Some(_) if coordinator_error(code) => self.classic_reset(c, false),
            Some(_) => self.fail(format!("c{c}: unexpected SyncGroup error {code}: {r:?}")),
        }
    }

    fn send_classic_heartbeat(&mut self, c: usize) {
        let group = self.groups[self.clients[c].group].name.clone();
        let now = self.now;
        let x = self.classic(c);
        let interval = (x.session_timeout / 4) as i64;
        x.next_hb = now + interval;
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(sb(&group)))
            .with_member_id(sb(&x.member_id))
            .with_generation_id(x.generation)
            .with_group_instance_id(x.instance_id.as_deref().map(sb));
        let v = x.hb_v;
        let corr = self.send_tracked(c, v, GroupRequest::Heartbeat(req), PendKind::Heartbeat);
        self.classic(c).hb_corr = Some(corr);
    }

    fn on_classic_heartbeat_reply(&mut self, c: usize, reply: Reply) {
        self.classic(c).hb_corr = None;
        if self.classic(c).state != CState::Stable {
            return;
        }
        let code = match reply {
            Reply::Resp(GroupResponse::Heartbeat(r)) => r.error_code,
            Reply::Err(code) => code,
            other => return self.fail(format!("c{c}: Heartbeat got {other:?}")),
        };
        match ResponseError::try_from_code(code) {
            None => {}
            Some(ResponseError::RebalanceInProgress) => self.classic_rejoin(c, true),
            Some(ResponseError::IllegalGeneration) => self.classic_reset(c, false),
            Some(ResponseError::UnknownMemberId) => self.classic_reset(c, true),
            Some(ResponseError::FencedInstanceId) => self.classic_fatal(c),
            Some(_) if coordinator_error(code) => {}
            Some(_) => self.fail(format!("c{c}: unexpected Heartbeat error {code}")),
        }
    }

    fn on_commit_reply(&mut self, c: usize, corr: u64, reply: Reply, revocation: bool) {
        let codes: Vec<i16> = match &reply {
            Reply::Resp(GroupResponse::OffsetCommit(r)) => r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect(),
            Reply::Err(code) => vec![*code],
            other => return self.fail(format!("c{c}: OffsetCommit got {other:?}")),
        };
        let classic = self.is_classic(c);
        for code in codes {
            let err = ResponseError::try_from_code(code);
            let expected = err.is_none()
                || coordinator_error(code)
                || if classic {
                    matches!(
                        err,
                        Some(
                            ResponseError::IllegalGeneration
                                | ResponseError::UnknownMemberId
                                | ResponseError::RebalanceInProgress
                                | ResponseError::FencedInstanceId
                                | ResponseError::GroupIdNotFound
                        )
                    )
                } else {
                    matches!(
                        err,
                        Some(ResponseError::StaleMemberEpoch | ResponseError::UnknownMemberId)
                    )
                };
            if !expected {
                return self.fail(format!("c{c}: unexpected OffsetCommit error {code}"));
            }
        }
        if revocation {
            self.finish_revocation(c, corr);
            return;
        }
        if classic && self.classic(c).state == CState::Stable {
            // `CommitFailedException`: the generation is gone; rejoin.
            let first = match &reply {
                Reply::Resp(GroupResponse::OffsetCommit(r)) => r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .find(|c| *c != NONE),
                _ => None,
            };
            match first.and_then(ResponseError::try_from_code) {
                Some(ResponseError::RebalanceInProgress) => self.classic_rejoin(c, false),
                Some(ResponseError::IllegalGeneration) => self.classic_reset(c, false),
                Some(ResponseError::UnknownMemberId | ResponseError::GroupIdNotFound) => {
                    self.classic_reset(c, true)
                }
                Some(ResponseError::FencedInstanceId) => self.classic_fatal(c),
                _ => {}
            }
        }
    }

    // ---- KIP-848 ----

    fn consumer_drive(&mut self, c: usize) {
        let now = self.now;
        let (hb_due, commit_due) = {
            let cl = &self.clients[c];
            let Proto::Consumer(x) = &cl.proto else {
                unreachable!()
            };
            (
                x.hb_corr.is_none() && now >= x.next_hb,
                cl.commit_corr.is_none()
                    && now >= cl.next_commit
                    && x.epoch > 0
                    && !x.owned.is_empty()
                    && x.revoking.is_none(),
            )
        };
        if hb_due {
            if self.consumer(c).epoch > 0 && !self.maybe_misbehave(c) {
                return;
            }
            self.send_consumer_heartbeat(c);
        }
        if commit_due {
            let interval = self.clients[c].commit_interval;
            self.clients[c].next_commit = now + interval;
            self.commit_owned(c, true);
        }
    }

    fn send_consumer_heartbeat(&mut self, c: usize) {
        let spec = &self.groups[self.clients[c].group];
        let group = spec.name.clone();
        let assignor = spec.assignor.clone();
        let now = self.now;
        let x = self.consumer(c).clone();
        let joining = x.epoch == 0;
        let full = joining || x.full;
        let send_owned = if joining {
            Some(Assignment::new())
        } else if full || x.acked_owned.as_ref() != Some(&x.owned) {
            Some(x.owned.clone())
        } else {
            None
        };
        let send_sub = (full || x.sub_acked != x.sub_version).then_some(x.sub_version);
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb(&group)))
            .with_member_id(sb(&x.member_id))
            .with_member_epoch(x.epoch)
            .with_rebalance_timeout_ms(if full { x.rebalance_timeout } else { -1 })
            .with_subscribed_topic_names(
                send_sub.map(|_| x.subscription.iter().map(|t| TopicName(sb(t))).collect()),
            )
            .with_server_assignor(if joining {
                assignor.as_deref().map(sb)
            } else {
                None
            })
            .with_topic_partitions(send_owned.as_ref().map(|o| {
                o.iter()
                    .map(|(t, ps)| {
                        HbTopicPartitions::default()
                            .with_topic_id(*t)
                            .with_partitions(ps.iter().copied().collect())
                    })
                    .collect()
            }));
        let kind = PendKind::ConsumerHeartbeat {
            owned: send_owned,
            subscription: send_sub,
        };
        let corr = self.send_tracked(c, 1, GroupRequest::ConsumerHeartbeat(req), kind);
        let x = self.consumer(c);
        x.hb_corr = Some(corr);
        x.next_hb = now + x.interval;
    }

    fn on_consumer_heartbeat_reply(
        &mut self,
        c: usize,
        reply: Reply,
        owned_sent: Option<Assignment>,
        sub_sent: Option<u32>,
    ) {
        self.consumer(c).hb_corr = None;
        let now = self.now;
        let r = match reply {
            Reply::Resp(GroupResponse::ConsumerHeartbeat(r)) => r,
            Reply::Err(code) if coordinator_error(code) => {
                let b = self.backoff();
                let x = self.consumer(c);
                x.full = true;
                x.next_hb = now + b;
                return;
            }
            other => return self.fail(format!("c{c}: ConsumerGroupHeartbeat got {other:?}")),
        };
        let code = r.error_code;
        match ResponseError::try_from_code(code) {
            None => {
                let x = self.consumer(c);
                if r.member_epoch < x.max_epoch {
                    let (e, m) = (r.member_epoch, x.max_epoch);
                    return self.fail(format!(
                        "(b) consumer client c{c} was given member epoch {e} after {m}"
                    ));
                }
                x.max_epoch = r.member_epoch;
                x.epoch = r.member_epoch;
                if let Some(o) = owned_sent {
                    x.acked_owned = Some(o);
                }
                if let Some(v) = sub_sent {
                    x.sub_acked = x.sub_acked.max(v);
                }
                x.full = false;
                x.interval = (r.heartbeat_interval_ms as i64).max(1);
                x.next_hb = now + x.interval;
                if let Some(a) = &r.assignment {
                    x.target = Some(assignment_of(a));
                    self.reconcile(c);
                }
            }
            Some(ResponseError::FencedMemberEpoch | ResponseError::UnknownMemberId) => {
                // Fenced: the partitions are lost (no commit), and the member rejoins with
                // epoch 0 and the same member id.
                self.trace(|| format!("c{c} fenced ({code}): rejoins"));
                let b = self.backoff();
                let x = self.consumer(c);
                x.owned.clear();
                x.target = None;
                x.revoking = None;
                x.epoch = 0;
                x.acked_owned = None;
                x.full = true;
                x.next_hb = now + b;
                self.touched.insert(self.clients[c].group);
            }
            // The group is no longer a consumer group: it went back to the classic protocol
            // (online downgrade) once this member was fenced and only classic members were left,
            // and the member's next heartbeat (epoch > 0) is "Group G is not a consumer group."
            // Both clients give up: the Java client 4.4 treats GROUP_ID_NOT_FOUND as fatal unless
            // it is unsubscribed (`AbstractHeartbeatRequestManager.onErrorResponse`), librdkafka
            // unless its leave heartbeat was sent (`rd_kafka_cgrp_handle_ConsumerGroupHeartbeat`).
            // The application then starts a new consumer, whose join (epoch 0) converts the group
            // back.
            Some(ResponseError::GroupIdNotFound) if self.consumer(c).epoch > 0 => {
                self.client_fatal(
                    c,
                    &format!("fatal GROUP_ID_NOT_FOUND {:?}", r.error_message),
                );
            }
            Some(_) if coordinator_error(code) => {
                let b = self.backoff();
                let x = self.consumer(c);
                x.full = true;
                x.next_hb = now + b;
            }
            Some(_) => self.fail(format!(
                "c{c}: unexpected ConsumerGroupHeartbeat error {code}: {:?}",
                r.error_message
            )),
        }
    }

    /// `ConsumerMembershipManager.reconcile`: revoke what is no longer assigned (committing its
    /// offsets first), then take the rest, then acknowledge with the next heartbeat.
    fn reconcile(&mut self, c: usize) {
        let x = self.consumer(c).clone();
        let Some(target) = x.target.clone() else {
            return;
        };
        if x.revoking.is_some() {
            return; // finish the revocation under way first
        }
        let revoke = minus(&x.owned, &target);
        if !revoke.is_empty() && x.commit_on_revoke && x.epoch > 0 {
            let group = self.groups[self.clients[c].group].name.clone();
            let parts = self.named_partitions(&revoke);
            let corr = self.send_commit(
                c,
                &group,
                parts,
                x.member_id.clone(),
                x.epoch,
                None,
                9,
                false,
                true,
            );
            self.consumer(c).revoking = Some(corr);
            return;
        }
        self.apply_target(c);
    }

    fn finish_revocation(&mut self, c: usize, corr: u64) {
        if self.consumer(c).revoking != Some(corr) {
            return;
        }
        self.consumer(c).revoking = None;
        self.apply_target(c);
    }

    fn apply_target(&mut self, c: usize) {
        let now = self.now;
        let x = self.consumer(c);
        let Some(target) = x.target.take() else {
            return;
        };
        let before = x.owned.clone();
        let kept = intersect(&x.owned, &target);
        debug_assert!(minus(&kept, &target).is_empty());
        x.owned = target;
        if x.acked_owned.as_ref() != Some(&x.owned) {
            // Acknowledge at once: the coordinator waits for it to hand partitions on.
            x.next_hb = now;
        }
        let gained: Vec<(uuid::Uuid, i32)> = minus(&x.owned, &before)
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            .collect();
        self.touched.insert(self.clients[c].group);
        if !gained.is_empty() && self.rng.chance(0.3) {
            let parts = gained
                .into_iter()
                .filter_map(|(t, p)| self.topics.get_by_id(&t).map(|x| (x.name.clone(), p)))
                .collect();
            self.send_fetch(c, parts);
        }
    }

    /// (a) helper: what a client owns, as (topic id, partition) pairs.
    pub(super) fn client_owned(&self, c: usize) -> BTreeSet<(uuid::Uuid, i32)> {
        match &self.clients[c].proto {
            Proto::Consumer(x) => x
                .owned
                .iter()
                .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
                .collect(),
            Proto::Classic(x) => x
                .owned
                .iter()
                .filter_map(|(t, p)| self.topics.get(t).map(|x| (x.id, *p)))
                .collect(),
        }
    }
}
