//! Fake-clock tests of the classic rules (reference §5.5) and offsets (§5.5.11). After every
//! scenario the records are encoded to bytes, decoded, replayed into a fresh coordinator, and the
//! durable state must match: the log alone rebuilds the state.

use super::*;
use crate::topics::MemoryTopics;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::protocol::{Encodable, StrBytes};

const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn subscription(topics: &[&str]) -> Bytes {
    let sub =
        ConsumerProtocolSubscription::default().with_topics(topics.iter().map(|t| sb(t)).collect());
    let mut b = BytesMut::new();
    b.extend_from_slice(&0i16.to_be_bytes());
    sub.encode(&mut b, 0).unwrap();
    b.freeze()
}

struct H {
    c: Coordinator,
    now: i64,
    next: ReqId,
    records: Vec<Record>,
    replies: hashbrown::HashMap<ReqId, GroupResponse>,
    topics: Arc<TopicsSnapshot>,
    _dir: std::path::PathBuf,
}

impl H {
    fn new(cfg: GroupConfig) -> Self {
        let dir =
            std::env::temp_dir().join(format!("rl-group-{}-{}", std::process::id(), rand_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        let reg = MemoryTopics::new(50);
        reg.create("orders", 6, Default::default()).unwrap();
        reg.create("other", 2, Default::default()).unwrap();
        let mut c = Coordinator::new(0, cfg);
        c.start(1_000_000);
        Self {
            c,
            now: 1_000_000,
            next: 1,
            records: Vec::new(),
            replies: Default::default(),
            topics: reg.snapshot(),
            _dir: dir,
        }
    }
    fn default_cfg() -> GroupConfig {
        GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        }
    }
    fn ctx(&self, v: i16, client: &str) -> RequestContext {
        RequestContext {
            client_id: client.into(),
            client_host: "/127.0.0.1".into(),
            api_version: v,
            topics: self.topics.clone(),
            group_configs: Default::default(),
            topic_filter: None,
        }
    }
    fn absorb(&mut self, out: Output) {
        self.records.extend(out.records);
        for (id, r) in out.replies {
            assert!(
                self.replies.insert(id, r).is_none(),
                "request {id} answered twice"
            );
        }
    }
    fn send(&mut self, v: i16, client: &str, req: GroupRequest) -> ReqId {
        let id = self.next;
        self.next += 1;
        let mut out = Output::default();
        let ctx = self.ctx(v, client);
        self.c.handle(id, &ctx, req, self.now, &mut out);
        // The runtime fires deadlines that are already due right after a request, as here.
        self.c.tick(self.now, &mut out);
        self.absorb(out);
        id
    }
    fn advance(&mut self, ms: i64) {
        self.now += ms;
        let mut out = Output::default();
        self.c.tick(self.now, &mut out);
        self.absorb(out);
    }
    fn take(&mut self, id: ReqId) -> Option<GroupResponse> {
        self.replies.remove(&id)
    }
    fn join_req(
        group: &str,
        member: &str,
        instance: Option<&str>,
        topics: &[&str],
    ) -> GroupRequest {
        GroupRequest::Join(
            JoinGroupRequest::default()
                .with_group_id(GroupId(sb(group)))
                .with_member_id(sb(member))
                .with_group_instance_id(instance.map(sb))
                .with_session_timeout_ms(SESSION)
                .with_rebalance_timeout_ms(REBALANCE)
                .with_protocol_type(sb("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(sb("range"))
                    .with_metadata(subscription(topics))]),
        )
    }
    fn join(&mut self, v: i16, group: &str, member: &str) -> ReqId {
        self.send(
            v,
            member_client(member),
            Self::join_req(group, member, None, &["orders"]),
        )
    }
    /// A v5 dynamic member's full first join: MEMBER_ID_REQUIRED, then the real join (parked).
    fn join_new(&mut self, group: &str, client: &str) -> (String, ReqId) {
        let id = self.send(5, client, Self::join_req(group, "", None, &["orders"]));
        let GroupResponse::Join(r) = self.take(id).expect("immediate") else {
            panic!()
        };
        assert_eq!(r.error_code, ResponseError::MemberIdRequired.code());
        let mid = r.member_id.to_string();
        assert!(mid.starts_with(&format!("{client}-")));
        let id = self.send(5, client, Self::join_req(group, &mid, None, &["orders"]));
        (mid, id)
    }
    fn join_resp(&mut self, id: ReqId) -> JoinGroupResponse {
        match self.take(id) {
            Some(GroupResponse::Join(r)) => r,
            other => panic!("join {id}: {other:?}"),
        }
    }
    fn sync(
        &mut self,
        group: &str,
        member: &str,
        generation: i32,
        assignments: &[(&str, &[u8])],
    ) -> ReqId {
        let req = SyncGroupRequest::default()
            .with_group_id(GroupId(sb(group)))
            .with_member_id(sb(member))
            .with_generation_id(generation)
            .with_assignments(
                assignments
                    .iter()
                    .map(|(m, a)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(sb(m))
                            .with_assignment(Bytes::copy_from_slice(a))
                    })
                    .collect(),
            );
        self.send(3, member_client(member), GroupRequest::Sync(req))
    }
    fn sync_resp(&mut self, id: ReqId) -> SyncGroupResponse {
        match self.take(id) {
            Some(GroupResponse::Sync(r)) => r,
            other => panic!("sync {id}: {other:?}"),
        }
    }
    fn heartbeat(&mut self, group: &str, member: &str, generation: i32) -> i16 {
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(sb(group)))
            .with_member_id(sb(member))
            .with_generation_id(generation);
        let id = self.send(3, member_client(member), GroupRequest::Heartbeat(req));
        match self.take(id) {
            Some(GroupResponse::Heartbeat(r)) => r.error_code,
            other => panic!("{other:?}"),
        }
    }
    fn commit(
        &mut self,
        v: i16,
        group: &str,
        member: &str,
        generation: i32,
        parts: &[(&str, i32, i64, Option<&str>)],
    ) -> Vec<i16> {
        let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
        for (t, p, o, m) in parts {
            let part = OffsetCommitRequestPartition::default()
                .with_partition_index(*p)
                .with_committed_offset(*o)
                .with_committed_metadata(m.map(sb));
            match topics.iter_mut().find(|x| x.name.0.as_str() == *t) {
                Some(x) => x.partitions.push(part),
                None => topics.push(
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(sb(t)))
                        .with_partitions(vec![part]),
                ),
            }
        }
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb(group)))
            .with_member_id(sb(member))
            .with_generation_id_or_member_epoch(generation)
            .with_topics(topics);
        let id = self.send(v, "c", GroupRequest::OffsetCommit(req));
        match self.take(id) {
            Some(GroupResponse::OffsetCommit(r)) => r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect(),
            other => panic!("{other:?}"),
        }
    }
    fn group(&self, g: &str) -> &classic::ClassicGroup {
        &self.c.groups[g]
    }
    /// Replay the bytes of every record into a fresh coordinator: same durable state.
    fn assert_replay_matches(&self) {
        let mut fresh = Coordinator::new(0, self.c.config.clone());
        for r in &self.records {
            let key = r.encode_key().unwrap();
            let value = r.encode_value().unwrap();
            let back = Record::decode(&key, value.as_deref()).unwrap();
            assert_eq!(&back, r);
            fresh.replay(&back);
        }
        assert_eq!(fresh.durable_view(), self.c.durable_view());
        // A snapshot (last value per key) rebuilds the same state as the whole log.
        let mut from_snapshot = Coordinator::new(0, self.c.config.clone());
        for r in self.c.snapshot_records() {
            from_snapshot.replay(&r);
        }
        assert_eq!(from_snapshot.durable_view(), self.c.durable_view());
        assert_compacted_replay_matches(&self.records, &self.c);
    }
}

/// What `storage::compact` leaves of a log — each key's last record, in log order, and with
/// expired tombstones gone too — must replay to the same durable state as the whole log.
pub(super) fn assert_compacted_replay_matches(records: &[Record], c: &Coordinator) {
    let keys: Vec<Vec<u8>> = records.iter().map(|r| r.encode_key().unwrap()).collect();
    let last: std::collections::HashMap<&[u8], usize> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_slice(), i))
        .collect();
    for drop_tombstones in [false, true] {
        let mut fresh = Coordinator::new(0, c.config.clone());
        for (i, r) in records.iter().enumerate() {
            if last[keys[i].as_slice()] == i && !(drop_tombstones && r.value.is_none()) {
                fresh.replay(r);
            }
        }
        assert_eq!(
            fresh.durable_view(),
            c.durable_view(),
            "compacted log (tombstones dropped: {drop_tombstones})"
        );
    }
}

fn member_client(member: &str) -> &str {
    member.split('-').next().unwrap_or("c")
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Bring a two-member group to Stable: A leader with [0,1,2], B with [3,4,5]; returns ids and gen.
fn two_member_stable(h: &mut H, group: &str) -> (String, String, i32) {
    let (a, ja) = h.join_new(group, "A");
    let r = h.join_resp(ja);
    assert_eq!((r.error_code, r.generation_id), (0, 1));
    let s = h.sync(group, &a, 1, &[(&a, b"all")]);
    assert_eq!(h.sync_resp(s).assignment.as_ref(), b"all");
    let (b, jb) = h.join_new(group, "B");
    assert!(h.take(jb).is_none(), "B waits for the join phase");
    assert_eq!(h.group(group).state, classic::State::PreparingRebalance);
    assert_eq!(
        h.heartbeat(group, &a, 1),
        ResponseError::RebalanceInProgress.code(),
        "A learns of the rebalance"
    );
    let ja = h.join(5, group, &a);
    let ra = h.join_resp(ja);
    let rb = h.join_resp(jb);
    assert_eq!((ra.generation_id, rb.generation_id), (2, 2));
    assert_eq!(ra.leader.as_str(), a);
    assert_eq!(ra.members.len(), 2, "the leader gets every subscription");
    assert!(rb.members.is_empty());
    let sb_ = h.sync(group, &b, 2, &[]);
    assert!(h.take(sb_).is_none(), "the follower waits for the leader");
    let sa = h.sync(group, &a, 2, &[(&a, b"012"), (&b, b"345")]);
    assert_eq!(h.sync_resp(sa).assignment.as_ref(), b"012");
    assert_eq!(h.sync_resp(sb_).assignment.as_ref(), b"345");
    assert_eq!(h.group(group).state, classic::State::Stable);
    (a, b, 2)
}

#[test]
fn seed_two_consumers_then_one_leaves() {
    let mut h = H::new(H::default_cfg());
    let (a, b, gen) = two_member_stable(&mut h, "g-classic");
    // B leaves; A is told to rejoin and gets everything back.
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(sb("g-classic")))
        .with_member_id(sb(&b));
    let id = h.send(1, "B", GroupRequest::Leave(leave));
    let Some(GroupResponse::Leave(r)) = h.take(id) else {
        panic!()
    };
    assert_eq!(r.error_code, 0);
    assert_eq!(
        h.heartbeat("g-classic", &a, gen),
        ResponseError::RebalanceInProgress.code()
    );
    let ja = h.join(5, "g-classic", &a);
    let r = h.join_resp(ja);
    assert_eq!((r.generation_id, r.members.len()), (3, 1));
    let s = h.sync("g-classic", &a, 3, &[(&a, b"all")]);
    assert_eq!(h.sync_resp(s).assignment.as_ref(), b"all");
    // A leaves too: the group goes Empty with a new generation and no protocol (seed record 37).
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(sb("g-classic")))
        .with_members(vec![MemberIdentity::default().with_member_id(sb(&a))]);
    let id = h.send(5, "A", GroupRequest::Leave(leave));
    let Some(GroupResponse::Leave(r)) = h.take(id) else {
        panic!()
    };
    assert_eq!(r.members[0].error_code, 0);
    let g = h.group("g-classic");
    assert_eq!(
        (g.state, g.generation, g.protocol_name.clone()),
        (classic::State::Empty, 4, None)
    );
    let last = h.records.last().unwrap();
    let Some(RecordValue::GroupMetadata(v)) = &last.value else {
        panic!()
    };
    assert_eq!(
        (v.generation, v.members.len(), v.protocol.clone()),
        (4, 0, None)
    );
    // Generations written: 0 (the empty group the first JoinGroup created), 1, 2, 3, 4 (seed
    // Example 3, records 0, 1, 8, 36, 37).
    let gens: Vec<i32> = h
        .records
        .iter()
        .filter_map(|r| match &r.value {
            Some(RecordValue::GroupMetadata(v)) => Some(v.generation),
            _ => None,
        })
        .collect();
    assert_eq!(gens, vec![0, 1, 2, 3, 4]);
    h.assert_replay_matches();
}

#[test]
fn replay_keeps_a_members_new_subscription() {
    // Found by the simulator (engine/sim): a member rejoined with a new subscription, the
    // generation's record carried it, but replaying the log kept the member's subscription from
    // the older record (replay preferred what an earlier record had put in memory). After a
    // restart the group then reported stale subscribed topics (offset expiry keys on them).
    let mut h = H::new(H::default_cfg());
    let (a, b, gen) = two_member_stable(&mut h, "g");
    let new_sub = H::join_req("g", &b, None, &["orders", "other"]);
    let jb = h.send(5, "B", new_sub);
    assert!(
        h.take(jb).is_none(),
        "a changed subscription starts a rebalance"
    );
    assert_eq!(
        h.heartbeat("g", &a, gen),
        ResponseError::RebalanceInProgress.code()
    );
    let ja = h.join(5, "g", &a);
    let (ra, rb) = (h.join_resp(ja), h.join_resp(jb));
    assert_eq!((ra.generation_id, rb.generation_id), (gen + 1, gen + 1));
    let sb_ = h.sync("g", &b, gen + 1, &[]);
    let sa = h.sync("g", &a, gen + 1, &[(&a, b"0"), (&b, b"1")]);
    assert_eq!(h.sync_resp(sa).error_code, 0);
    assert_eq!(h.sync_resp(sb_).error_code, 0);
    let mut fresh = Coordinator::new(0, h.c.config.clone());
    for r in &h.records {
        fresh.replay(r);
    }
    let topics = fresh.groups["g"]
        .subscribed_topics
        .clone()
        .unwrap_or_default();
    assert!(
        topics.contains("other"),
        "after a replay the group must subscribe to what its last record says: {topics:?}"
    );
    h.assert_replay_matches();
}

#[test]
fn initial_delay_rearms_while_members_arrive() {
    let cfg = GroupConfig {
        initial_rebalance_delay_ms: 3000,
        ..GroupConfig::default()
    };
    let mut h = H::new(cfg);
    let (a, ja) = h.join_new("g", "A");
    h.advance(2000);
    let (_b, jb) = h.join_new("g", "B");
    h.advance(1000); // t=3000: B arrived during the delay → re-armed for another 3000
    assert!(h.take(ja).is_none());
    h.advance(2999);
    assert!(h.take(ja).is_none(), "still inside the re-armed delay");
    h.advance(1);
    let ra = h.join_resp(ja);
    let rb = h.join_resp(jb);
    assert_eq!(
        (ra.generation_id, rb.generation_id, ra.leader.as_str()),
        (1, 1, a.as_str())
    );
    assert_eq!(ra.members.len(), 2);
}

#[test]
fn initial_delay_is_never_cut_short() {
    let cfg = GroupConfig {
        initial_rebalance_delay_ms: 3000,
        ..GroupConfig::default()
    };
    let mut h = H::new(cfg);
    let (_a, ja) = h.join_new("g", "A");
    h.advance(2999);
    assert!(
        h.take(ja).is_none(),
        "everyone joined, but the initial phase waits out its delay"
    );
    h.advance(1);
    assert_eq!(h.join_resp(ja).generation_id, 1);
}

#[test]
fn member_missing_the_join_phase_is_removed_after_the_rebalance_timeout() {
    let mut h = H::new(H::default_cfg());
    let (a, b, _) = two_member_stable(&mut h, "g");
    let (c, jc) = h.join_new("g", "C");
    let ja = h.join(5, "g", &a);
    // B keeps heartbeating but never rejoins.
    for _ in 0..5 {
        h.advance(5000);
        assert_eq!(
            h.heartbeat("g", &b, 2),
            ResponseError::RebalanceInProgress.code()
        );
    }
    assert!(h.take(ja).is_none());
    h.advance(REBALANCE as i64 - 25_000);
    let ra = h.join_resp(ja);
    let rc = h.join_resp(jc);
    assert_eq!((ra.generation_id, rc.generation_id), (3, 3));
    assert!(!h.group("g").members.contains_key(&b), "B was dropped");
    assert_eq!(
        h.heartbeat("g", &b, 3),
        ResponseError::UnknownMemberId.code()
    );
    let _ = c;
}

#[test]
fn leader_loss_elects_a_rejoined_member() {
    let mut h = H::new(H::default_cfg());
    let (a, b, _) = two_member_stable(&mut h, "g");
    // The leader's session runs out while B keeps heartbeating.
    for _ in 0..2 {
        h.advance(4000);
        assert_eq!(h.heartbeat("g", &b, 2), 0);
    }
    h.advance(2000);
    assert!(!h.group("g").members.contains_key(&a), "A expired");
    assert_eq!(
        h.heartbeat("g", &b, 2),
        ResponseError::RebalanceInProgress.code()
    );
    let jb = h.join(5, "g", &b);
    let rb = h.join_resp(jb);
    assert_eq!(
        (rb.generation_id, rb.leader.as_str(), rb.members.len()),
        (3, b.as_str(), 1)
    );
    let s = h.sync("g", &b, 3, &[(&b, b"all")]);
    assert_eq!(h.sync_resp(s).assignment.as_ref(), b"all");
    h.assert_replay_matches();
}

#[test]
fn sync_timeout_removes_members_that_never_sync() {
    let mut h = H::new(H::default_cfg());
    let (a, b, _) = two_member_stable(&mut h, "g");
    assert_eq!(h.heartbeat("g", &b, 2), 0);
    // Trigger a rebalance by B rejoining with different metadata.
    let jb = h.send(5, "B", H::join_req("g", &b, None, &["orders", "other"]));
    let ja = h.join(5, "g", &a);
    let ra = h.join_resp(ja);
    let _rb = h.join_resp(jb);
    assert_eq!(ra.generation_id, 3);
    // Only the leader syncs; B never does.
    let sa = h.sync("g", &a, 3, &[(&a, b"x"), (&b, b"y")]);
    assert_eq!(h.sync_resp(sa).error_code, 0);
    // Both stay alive with heartbeats until the sync deadline passes; B still never syncs.
    for _ in 0..5 {
        h.advance(5000);
        assert_eq!(h.heartbeat("g", &a, 3), 0);
        assert_eq!(h.heartbeat("g", &b, 3), 0);
    }
    h.advance(5000);
    assert!(
        !h.group("g").members.contains_key(&b),
        "B never synced and was removed"
    );
    assert_eq!(h.group("g").state, classic::State::PreparingRebalance);
    assert_eq!(
        h.heartbeat("g", &a, 3),
        ResponseError::RebalanceInProgress.code()
    );
}

#[test]
fn session_expiry_empties_the_group() {
    let mut h = H::new(H::default_cfg());
    let (a, ja) = h.join_new("g", "A");
    h.join_resp(ja);
    let s = h.sync("g", &a, 1, &[(&a, b"all")]);
    h.sync_resp(s);
    h.advance(SESSION as i64 - 1);
    assert_eq!(h.group("g").state, classic::State::Stable);
    h.advance(1);
    let g = h.group("g");
    assert_eq!(
        (g.state, g.generation, g.members.len()),
        (classic::State::Empty, 2, 0)
    );
    h.assert_replay_matches();
}

#[test]
fn pending_member_expires_without_rejoining() {
    let mut h = H::new(H::default_cfg());
    let id = h.send(5, "A", H::join_req("g", "", None, &["orders"]));
    let r = h.join_resp(id);
    assert_eq!(r.error_code, ResponseError::MemberIdRequired.code());
    assert_eq!(h.group("g").pending_members.len(), 1);
    h.advance(SESSION as i64);
    assert!(h.group("g").pending_members.is_empty());
    // Coming back with the expired id is refused.
    let j = h.send(
        5,
        "A",
        H::join_req("g", r.member_id.as_str(), None, &["orders"]),
    );
    assert_eq!(
        h.join_resp(j).error_code,
        ResponseError::UnknownMemberId.code()
    );
}

#[test]
fn static_member_rejoins_without_a_rebalance_and_its_old_id_is_fenced() {
    let mut h = H::new(H::default_cfg());
    let (a, b, gen) = two_member_stable(&mut h, "g");
    // A static member joins (v5: no MEMBER_ID_REQUIRED for static members).
    let js = h.send(5, "S", H::join_req("g", "", Some("inst-1"), &["orders"]));
    assert!(h.take(js).is_none());
    let ja = h.join(5, "g", &a);
    let jb = h.join(5, "g", &b);
    let rs = h.join_resp(js);
    let ra = h.join_resp(ja);
    h.join_resp(jb);
    let s_id = rs.member_id.to_string();
    assert!(s_id.starts_with("inst-1-"));
    let g3 = gen + 1;
    let sa = h.sync("g", &a, g3, &[(&a, b"a"), (&b, b"b"), (&s_id, b"s")]);
    let sb2 = h.sync("g", &b, g3, &[]);
    let ss = h.sync("g", &s_id, g3, &[]);
    assert_eq!(h.sync_resp(sa).error_code, 0);
    assert_eq!(h.sync_resp(sb2).error_code, 0);
    assert_eq!(h.sync_resp(ss).assignment.as_ref(), b"s");
    let _ = ra;
    // The instance restarts: same instance id, empty member id, same protocols.
    let records_before = h.records.len();
    let js2 = h.send(5, "S", H::join_req("g", "", Some("inst-1"), &["orders"]));
    let r2 = h.join_resp(js2);
    assert_eq!(r2.error_code, 0);
    assert_eq!(r2.generation_id, g3, "no new generation");
    let new_id = r2.member_id.to_string();
    assert_ne!(new_id, s_id);
    assert_eq!(
        h.group("g").state,
        classic::State::Stable,
        "the others are not rebalanced"
    );
    assert_eq!(h.heartbeat("g", &a, g3), 0);
    assert_eq!(
        h.records.len(),
        records_before + 1,
        "the replacement is recorded"
    );
    // Its assignment is kept for the new id.
    let s = h.sync("g", &new_id, g3, &[]);
    assert_eq!(h.sync_resp(s).assignment.as_ref(), b"s");
    // The old incarnation is fenced.
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb(&s_id))
        .with_generation_id(g3)
        .with_group_instance_id(Some(sb("inst-1")));
    let id = h.send(3, "S", GroupRequest::Heartbeat(hb));
    let Some(GroupResponse::Heartbeat(r)) = h.take(id) else {
        panic!()
    };
    assert_eq!(r.error_code, ResponseError::FencedInstanceId.code());
    h.assert_replay_matches();
}

#[test]
fn static_leader_rejoin_v9_skips_assignment() {
    let mut h = H::new(H::default_cfg());
    let js = h.send(9, "S", H::join_req("g", "", Some("i"), &["orders"]));
    let r = h.join_resp(js);
    let sid = r.member_id.to_string();
    assert_eq!(r.leader.as_str(), sid);
    let s = h.sync("g", &sid, 1, &[(&sid, b"all")]);
    h.sync_resp(s);
    let js2 = h.send(9, "S", H::join_req("g", "", Some("i"), &["orders"]));
    let r2 = h.join_resp(js2);
    assert!(r2.skip_assignment);
    assert_eq!(r2.leader, r2.member_id);
    assert_eq!(r2.members.len(), 1);
}

#[test]
fn join_validation_errors() {
    let mut h = H::new(GroupConfig {
        max_size: 1,
        ..H::default_cfg()
    });
    let bad_session = GroupRequest::Join(
        JoinGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_session_timeout_ms(100)
            .with_protocol_type(sb("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default().with_name(sb("range"))
            ]),
    );
    let id = h.send(5, "A", bad_session);
    assert_eq!(
        h.join_resp(id).error_code,
        ResponseError::InvalidSessionTimeout.code()
    );
    let id = h.send(5, "A", H::join_req("", "", None, &["orders"]));
    assert_eq!(
        h.join_resp(id).error_code,
        ResponseError::InvalidGroupId.code()
    );
    let id = h.send(5, "A", H::join_req("nope", "someone", None, &["orders"]));
    assert_eq!(
        h.join_resp(id).error_code,
        ResponseError::UnknownMemberId.code()
    );
    // One member fills the group (max size 1); a second is refused.
    let (a, ja) = h.join_new("g", "A");
    h.join_resp(ja);
    let s = h.sync("g", &a, 1, &[(&a, b"x")]);
    h.sync_resp(s);
    let id = h.send(3, "B", H::join_req("g", "", None, &["orders"]));
    assert_eq!(
        h.join_resp(id).error_code,
        ResponseError::GroupMaxSizeReached.code()
    );
    // A different protocol type is inconsistent.
    let mut req = JoinGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_session_timeout_ms(SESSION)
        .with_protocol_type(sb("connect"))
        .with_protocols(vec![JoinGroupRequestProtocol::default().with_name(sb("x"))]);
    req.member_id = sb("");
    let id = h.send(3, "B", GroupRequest::Join(req));
    assert_eq!(
        h.join_resp(id).error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
}

#[test]
fn heartbeat_and_sync_errors() {
    let mut h = H::new(H::default_cfg());
    assert_eq!(
        h.heartbeat("unknown", "m", 1),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        h.heartbeat("", "m", 1),
        ResponseError::InvalidGroupId.code()
    );
    let (a, b, gen) = two_member_stable(&mut h, "g");
    assert_eq!(
        h.heartbeat("g", &a, gen + 5),
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(
        h.heartbeat("g", "stranger", gen),
        ResponseError::UnknownMemberId.code()
    );
    let s = h.sync("g", &b, gen - 1, &[]);
    assert_eq!(
        h.sync_resp(s).error_code,
        ResponseError::IllegalGeneration.code()
    );
}

#[test]
fn offsets_commit_fetch_and_errors() {
    let mut h = H::new(H::default_cfg());
    let (a, _b, gen) = two_member_stable(&mut h, "g");
    assert_eq!(
        h.commit(
            8,
            "g",
            &a,
            gen,
            &[("orders", 0, 10, Some("m")), ("orders", 1, 9, None)]
        ),
        vec![0, 0]
    );
    assert_eq!(
        h.commit(8, "g", &a, gen - 1, &[("orders", 0, 11, None)]),
        vec![ResponseError::IllegalGeneration.code()],
        "wrong generation"
    );
    assert_eq!(
        h.commit(8, "g", "ghost", gen, &[("orders", 0, 11, None)]),
        vec![ResponseError::UnknownMemberId.code()],
        "unknown member"
    );
    assert_eq!(
        h.commit(8, "g", "", -1, &[("orders", 0, 11, None)]),
        vec![ResponseError::UnknownMemberId.code()],
        "no member info on a live group"
    );
    assert_eq!(
        h.commit(
            8,
            "g",
            &a,
            gen,
            &[("nope", 0, 1, None), ("orders", 6, 1, None)]
        ),
        vec![ResponseError::UnknownTopicOrPartition.code(); 2]
    );
    let big = "x".repeat(4097);
    assert_eq!(
        h.commit(8, "g", &a, gen, &[("orders", 2, 1, Some(big.as_str()))]),
        vec![ResponseError::OffsetMetadataTooLarge.code()]
    );
    // Unknown group with a generation: ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9.
    assert_eq!(
        h.commit(8, "nope", "m", 1, &[("orders", 0, 1, None)]),
        vec![ResponseError::IllegalGeneration.code()]
    );
    assert_eq!(
        h.commit(9, "nope", "m", 1, &[("orders", 0, 1, None)]),
        vec![ResponseError::GroupIdNotFound.code()]
    );
    // A standalone commit creates a simple group.
    assert_eq!(
        h.commit(8, "solo", "", -1, &[("orders", 3, 42, None)]),
        vec![0]
    );
    let id = h.send(
        8,
        "c",
        GroupRequest::OffsetFetch {
            group: "g".into(),
            topics: Some(vec![("orders".into(), vec![0, 1, 5])]),
            member_id: None,
            member_epoch: -1,
            require_stable: false,
        },
    );
    let Some(GroupResponse::OffsetFetch(f)) = h.take(id) else {
        panic!()
    };
    assert_eq!(
        f.partitions,
        vec![
            ("orders".to_string(), 0, 10, -1, "m".to_string(), 0),
            ("orders".to_string(), 1, 9, -1, String::new(), 0),
            ("orders".to_string(), 5, -1, -1, String::new(), 0),
        ]
    );
    let id = h.send(
        8,
        "c",
        GroupRequest::OffsetFetch {
            group: "solo".into(),
            topics: None,
            member_id: None,
            member_epoch: -1,
            require_stable: false,
        },
    );
    let Some(GroupResponse::OffsetFetch(f)) = h.take(id) else {
        panic!()
    };
    assert_eq!(
        f.partitions,
        vec![("orders".to_string(), 3, 42, -1, String::new(), 0)]
    );
    // A commit by a member in the middle of CompletingRebalance is refused.
    let (_c, jc) = h.join_new("g", "C");
    let ja = h.join(5, "g", &a);
    h.advance(REBALANCE as i64); // B never rejoins
    h.join_resp(ja);
    h.join_resp(jc);
    assert_eq!(h.group("g").state, classic::State::CompletingRebalance);
    assert_eq!(
        h.commit(8, "g", &a, gen + 1, &[("orders", 0, 12, None)]),
        vec![ResponseError::RebalanceInProgress.code()]
    );
    let s = h.sync("g", &a, gen + 1, &[(&a, b"a")]);
    assert_eq!(h.sync_resp(s).error_code, 0);
    assert_eq!(
        h.commit(8, "g", &a, gen + 1, &[("orders", 0, 12, None)]),
        vec![0]
    );
    h.assert_replay_matches();
}

#[test]
fn delete_groups_and_offsets() {
    let mut h = H::new(H::default_cfg());
    let (a, b, gen) = two_member_stable(&mut h, "g");
    h.commit(
        8,
        "g",
        &a,
        gen,
        &[("orders", 0, 5, None), ("other", 0, 7, None)],
    );
    let id = h.send(2, "admin", GroupRequest::Delete { group: "g".into() });
    assert_eq!(
        h.take(id),
        Some(GroupResponse::Delete(ResponseError::NonEmptyGroup.code()))
    );
    // The group reads "orders": its offsets cannot be deleted; "other" can.
    let del = OffsetDeleteRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_topics(vec![
            offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(TopicName(sb("orders")))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default()
                        .with_partition_index(0),
                ]),
            offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(TopicName(sb("other")))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default()
                        .with_partition_index(0),
                ]),
        ]);
    let id = h.send(0, "admin", GroupRequest::OffsetDelete(del));
    let Some(GroupResponse::OffsetDelete(r)) = h.take(id) else {
        panic!()
    };
    assert_eq!(
        (
            r.error_code,
            r.topics[0].partitions[0].error_code,
            r.topics[1].partitions[0].error_code
        ),
        (0, ResponseError::GroupSubscribedToTopic.code(), 0)
    );
    assert!(h.c.offsets.get("g", "other", 0).is_none());
    for m in [&a, &b] {
        let leave = LeaveGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(m));
        let id = h.send(1, "x", GroupRequest::Leave(leave));
        h.take(id);
    }
    assert_eq!(h.group("g").state, classic::State::Empty);
    let id = h.send(2, "admin", GroupRequest::Delete { group: "g".into() });
    assert_eq!(h.take(id), Some(GroupResponse::Delete(0)));
    assert!(!h.c.groups.contains_key("g"));
    assert!(!h.c.offsets.has_group("g"));
    let id = h.send(2, "admin", GroupRequest::Delete { group: "g".into() });
    assert_eq!(
        h.take(id),
        Some(GroupResponse::Delete(ResponseError::GroupIdNotFound.code()))
    );
    h.assert_replay_matches();
}

#[test]
fn offsets_expire_after_retention() {
    let cfg = GroupConfig {
        offsets_retention_ms: 60_000,
        offsets_retention_check_interval_ms: 1000,
        ..H::default_cfg()
    };
    let mut h = H::new(cfg);
    assert_eq!(
        h.commit(8, "solo", "", -1, &[("orders", 0, 1, None)]),
        vec![0]
    );
    h.advance(59_000);
    assert!(h.c.offsets.get("solo", "orders", 0).is_some());
    h.advance(1000);
    assert!(h.c.offsets.get("solo", "orders", 0).is_none());
    assert!(
        !h.c.groups.contains_key("solo"),
        "the empty simple group went with its offsets"
    );
    h.assert_replay_matches();
}

#[test]
fn describe_and_list() {
    let mut h = H::new(H::default_cfg());
    let (a, b, _) = two_member_stable(&mut h, "g");
    let id = h.send(5, "admin", GroupRequest::Describe { group: "g".into() });
    let Some(GroupResponse::Describe(d)) = h.take(id) else {
        panic!()
    };
    assert_eq!(
        (
            d.group_state.as_str(),
            d.protocol_type.as_str(),
            d.protocol_data.as_str()
        ),
        ("Stable", "consumer", "range")
    );
    let members: Vec<(String, Vec<u8>)> = d
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.member_assignment.to_vec()))
        .collect();
    assert_eq!(
        members,
        vec![(a.clone(), b"012".to_vec()), (b.clone(), b"345".to_vec())]
    );
    let id = h.send(
        6,
        "admin",
        GroupRequest::Describe {
            group: "missing".into(),
        },
    );
    let Some(GroupResponse::Describe(d)) = h.take(id) else {
        panic!()
    };
    assert_eq!(d.error_code, ResponseError::GroupIdNotFound.code());
    let id = h.send(
        5,
        "admin",
        GroupRequest::Describe {
            group: "missing".into(),
        },
    );
    let Some(GroupResponse::Describe(d)) = h.take(id) else {
        panic!()
    };
    assert_eq!((d.error_code, d.group_state.as_str()), (0, "Dead"));
    let id = h.send(
        5,
        "admin",
        GroupRequest::List {
            states: vec!["stable".into()],
            types: vec![],
        },
    );
    let Some(GroupResponse::List(l)) = h.take(id) else {
        panic!()
    };
    assert_eq!(l.len(), 1);
    let id = h.send(
        5,
        "admin",
        GroupRequest::List {
            states: vec!["empty".into()],
            types: vec![],
        },
    );
    let Some(GroupResponse::List(l)) = h.take(id) else {
        panic!()
    };
    assert!(l.is_empty());
    let id = h.send(
        5,
        "admin",
        GroupRequest::List {
            states: vec![],
            types: vec!["consumer".into()],
        },
    );
    let Some(GroupResponse::List(l)) = h.take(id) else {
        panic!()
    };
    assert!(l.is_empty(), "classic groups are not of type consumer");
}

#[test]
fn a_session_ends_one_timeout_after_the_last_heartbeat() {
    // Heartbeats move a member's session deadline without moving its timer (the timer re-arms
    // itself when it fires early): expiry must still come exactly one session timeout after the
    // last heartbeat, and not a millisecond before.
    let mut h = H::new(H::default_cfg());
    let (a, b, g) = two_member_stable(&mut h, "g");
    for step in [1, 999, 3_000, 7, 4_100, 2_500] {
        h.advance(step);
        assert_eq!(h.heartbeat("g", &a, g), 0);
        assert_eq!(h.heartbeat("g", &b, g), 0);
    }
    // Past several of the timers armed before, A stays alive by heartbeating; B stops.
    for _ in 0..4 {
        h.advance(2_499);
        assert_eq!(h.heartbeat("g", &a, g), 0);
    }
    let b_last = h.now - 4 * 2_499;
    h.advance(b_last + SESSION as i64 - 1 - h.now);
    assert!(h.group("g").members.contains_key(&b), "B expired early");
    h.advance(1);
    assert!(!h.group("g").members.contains_key(&b), "B expired on time");
    assert!(h.group("g").members.contains_key(&a));
}

#[test]
fn loading_recreates_a_simple_group_whose_tombstone_came_between_commits() {
    // replay_bytes remembers which groups an offset commit found existing; a record that
    // removes a group in between must make the next commit create it again, exactly as
    // replaying the same records one by one through `replay` does.
    use wire::records::OffsetCommitValue;
    let commit = |offset: i64| Record {
        key: RecordKey::OffsetCommit {
            group: "simple".into(),
            topic: "t".into(),
            partition: 0,
        },
        value: Some(RecordValue::OffsetCommit(OffsetCommitValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 1_000 + offset,
            expire_timestamp: -1,
            topic_id: Default::default(),
        })),
    };
    let tombstone = Record {
        key: RecordKey::GroupMetadata {
            group: "simple".into(),
        },
        value: None,
    };
    let records = [commit(1), commit(2), tombstone.clone(), commit(3)];
    let mut by_bytes = Coordinator::new(0, GroupConfig::default());
    let mut by_record = Coordinator::new(0, GroupConfig::default());
    for r in &records {
        let key = r.encode_key().unwrap();
        let value = r.encode_value().unwrap();
        assert!(by_bytes.replay_bytes(&key, value.as_deref()));
        by_record.replay(r);
    }
    assert!(
        by_bytes.groups.contains_key("simple"),
        "recreated by the last commit"
    );
    assert_eq!(by_bytes.durable_view(), by_record.durable_view());
    // Ending on the tombstone: the group is gone in both.
    let mut by_bytes = Coordinator::new(0, GroupConfig::default());
    let mut by_record = Coordinator::new(0, GroupConfig::default());
    for r in [commit(1), tombstone] {
        by_bytes.replay_bytes(
            &r.encode_key().unwrap(),
            r.encode_value().unwrap().as_deref(),
        );
        by_record.replay(&r);
    }
    assert_eq!(
        by_bytes.groups.contains_key("simple"),
        by_record.groups.contains_key("simple")
    );
}
