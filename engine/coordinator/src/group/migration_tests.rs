//! Fake-clock tests of online migration: a classic group upgraded by a consumer-protocol
//! joiner, classic members living inside the consumer group, and the downgrade when the last
//! consumer-protocol member leaves — with records replayed (log, snapshot, compacted log) at each
//! step and no partition ever held by two members of either protocol.

use super::consumer_tests::K;
use super::migration::MigrationPolicy;
use super::*;
use bytes::Bytes;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTp;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, BTreeSet};

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A cooperative consumer's subscription to `orders`, owning `owned` (version 1+ carries it).
fn subscription(owned: &[i32]) -> Bytes {
    let sub = ConsumerProtocolSubscription::default()
        .with_topics(vec![sb("orders")])
        .with_owned_partitions(if owned.is_empty() {
            vec![]
        } else {
            vec![OwnedTp::default()
                .with_topic(TopicName(sb("orders")))
                .with_partitions(owned.to_vec())]
        });
    wire::consumer_protocol::encode(&sub, 1)
}

fn assignment(parts: &[i32]) -> Bytes {
    wire::consumer_protocol::encode_assignment([(sb("orders"), parts.to_vec())], 1)
}

fn decode(bytes: &Bytes) -> Vec<i32> {
    if bytes.is_empty() {
        return vec![];
    }
    let a = wire::consumer_protocol::decode_assignment(bytes).unwrap();
    a.assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().copied())
        .collect()
}

/// Requests that may be parked (classic joins), on top of the consumer-group harness.
struct M {
    k: K,
    replies: BTreeMap<ReqId, GroupResponse>,
}

impl M {
    fn new(policy: MigrationPolicy) -> Self {
        let cfg = GroupConfig {
            migration_policy: policy,
            ..K::cfg()
        };
        Self {
            k: K::new(cfg),
            replies: BTreeMap::new(),
        }
    }
    fn absorb(&mut self, out: Output) {
        self.k.records.extend(out.records);
        self.replies.extend(out.replies);
        self.k.assert_single_owner();
        self.assert_single_owner_across_protocols();
    }
    fn send(&mut self, v: i16, req: GroupRequest) -> ReqId {
        let id = self.k.next;
        self.k.next += 1;
        let mut out = Output::default();
        let ctx = self.k.ctx(v);
        self.k.c.handle(id, &ctx, req, self.k.now, &mut out);
        self.k.c.tick(self.k.now, &mut out);
        self.absorb(out);
        id
    }
    fn advance(&mut self, ms: i64) {
        self.k.now += ms;
        let mut out = Output::default();
        self.k.c.tick(self.k.now, &mut out);
        self.absorb(out);
    }
    fn take(&mut self, id: ReqId) -> Option<GroupResponse> {
        self.replies.remove(&id)
    }
    fn join(&mut self, member: &str, owned: &[i32]) -> ReqId {
        self.join_as(member, None, owned)
    }
    fn join_as(&mut self, member: &str, instance: Option<&str>, owned: &[i32]) -> ReqId {
        let req = JoinGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(member))
            .with_group_instance_id(instance.map(sb))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(30_000)
            .with_protocol_type(sb("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(sb("cooperative-sticky"))
                .with_metadata(subscription(owned))]);
        self.send(7, GroupRequest::Join(req))
    }
    fn joined(&mut self, id: ReqId) -> JoinGroupResponse {
        match self.take(id) {
            Some(GroupResponse::Join(r)) => r,
            other => panic!("join {id}: {other:?}"),
        }
    }
    fn sync(&mut self, member: &str, generation: i32, assignments: &[(&str, &[i32])]) -> ReqId {
        let req = SyncGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(member))
            .with_generation_id(generation)
            .with_protocol_type(Some(sb("consumer")))
            .with_protocol_name(Some(sb("cooperative-sticky")))
            .with_assignments(
                assignments
                    .iter()
                    .map(|(m, a)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(sb(m))
                            .with_assignment(assignment(a))
                    })
                    .collect(),
            );
        self.send(5, GroupRequest::Sync(req))
    }
    fn synced(&mut self, id: ReqId) -> (i16, Vec<i32>) {
        match self.take(id) {
            Some(GroupResponse::Sync(r)) => (r.error_code, decode(&r.assignment)),
            other => panic!("sync {id}: {other:?}"),
        }
    }
    /// A consumer-protocol join whose side effects (replies to parked requests) are kept.
    fn consumer_join(&mut self, member: &str) -> ConsumerGroupHeartbeatResponse {
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(member))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(sb("orders"))]))
            .with_topic_partitions(Some(vec![]));
        let id = self.send(1, GroupRequest::ConsumerHeartbeat(req));
        match self.take(id) {
            Some(GroupResponse::ConsumerHeartbeat(r)) => r,
            other => panic!("{other:?}"),
        }
    }
    fn heartbeat(&mut self, member: &str, generation: i32) -> i16 {
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(member))
            .with_generation_id(generation);
        let id = self.send(4, GroupRequest::Heartbeat(req));
        match self.take(id) {
            Some(GroupResponse::Heartbeat(r)) => r.error_code,
            other => panic!("{other:?}"),
        }
    }
    /// Partitions held by members of the classic group (by their last assignment) and of the
    /// consumer group never overlap — the two never coexist for one id, so this checks each.
    fn assert_single_owner_across_protocols(&self) {
        assert!(
            !(self.k.c.groups.contains_key("g") && self.k.c.consumer_groups.contains_key("g")),
            "g is both a classic and a consumer group"
        );
        if let Some(g) = self.k.c.groups.get("g") {
            let mut seen = BTreeSet::new();
            for m in g.members.values() {
                for p in decode(&m.assignment) {
                    assert!(seen.insert(p), "partition {p} assigned twice: {g:#?}");
                }
            }
        }
    }
    /// A classic group of two cooperative members, A holding 0-2 and B 3-5, generation 1.
    fn classic_pair(&mut self) -> (String, String) {
        let mut ids = Vec::new();
        for _ in 0..2 {
            let j = self.join("", &[]);
            let r = self.joined(j);
            assert_eq!(r.error_code, ResponseError::MemberIdRequired.code());
            ids.push(r.member_id.to_string());
        }
        let a = self.join(&ids[0], &[]);
        let b = self.join(&ids[1], &[]);
        // The initial rebalance delay, re-armed while members arrive.
        for _ in 0..10 {
            if self.replies.contains_key(&a) && self.replies.contains_key(&b) {
                break;
            }
            self.advance(3000);
        }
        let (ra, rb) = (self.joined(a), self.joined(b));
        assert_eq!((ra.error_code, rb.error_code), (0, 0));
        let (a, b) = (ra.member_id.to_string(), rb.member_id.to_string());
        let (leader, follower) = if ra.leader == ra.member_id {
            (a.clone(), b.clone())
        } else {
            (b.clone(), a.clone())
        };
        let ls = self.sync(&leader, 1, &[(&a, &[0, 1, 2]), (&b, &[3, 4, 5])]);
        let fs = self.sync(&follower, 1, &[]);
        assert_eq!(self.synced(ls).0, 0);
        assert_eq!(self.synced(fs).0, 0);
        assert_eq!(self.k.c.groups["g"].state, classic::State::Stable);
        (a, b)
    }
}

#[test]
fn a_consumer_member_upgrades_a_classic_group_and_it_downgrades_when_it_leaves() {
    let mut m = M::new(MigrationPolicy::Bidirectional);
    let (a, b) = m.classic_pair();
    // C joins with the consumer protocol: the group converts at generation 1 and C's join
    // bumps it to 2 with a target computed at once. C gets nothing yet: A and B still hold it.
    let c = m.k.join("C", None, &["orders"]);
    assert_eq!((c.error_code, c.member_epoch), (0, 2), "{c:?}");
    assert!(!m.k.c.groups.contains_key("g"));
    let g = &m.k.c.consumer_groups["g"];
    assert_eq!((g.group_epoch, g.assignment_epoch), (2, 2));
    assert!(g.members[&a].uses_classic() && g.members[&b].uses_classic());
    assert_eq!(g.members[&a].member_epoch, 1);
    assert_eq!(
        g.members[&a].assignment_epoch(&m.k.topic_id("orders"), 0),
        Some(1)
    );
    // The records Kafka writes for the conversion, in its order.
    let kinds: Vec<&str> = m
        .k
        .records
        .iter()
        .skip_while(|r| !matches!(r.key, RecordKey::GroupMetadata { .. } if r.value.is_none()))
        .take(9)
        .map(|r| match (&r.key, &r.value) {
            (RecordKey::GroupMetadata { .. }, None) => "classic-tombstone",
            (RecordKey::ConsumerGroupMemberMetadata { .. }, Some(_)) => "member",
            (RecordKey::ConsumerGroupMetadata { .. }, Some(_)) => "epoch",
            (RecordKey::ConsumerGroupTargetAssignmentMember { .. }, Some(_)) => "target",
            (RecordKey::ConsumerGroupTargetAssignmentMetadata { .. }, Some(_)) => "target-epoch",
            (RecordKey::ConsumerGroupCurrentMemberAssignment { .. }, Some(_)) => "current",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "classic-tombstone",
            "member",
            "member",
            "epoch",
            "target",
            "target",
            "target-epoch",
            "current",
            "current"
        ]
    );
    m.k.assert_replay_matches();
    // The classic members learn of it from their heartbeat and rejoin, owning what they hold;
    // each is reconciled in its JoinGroup: first revoking (same generation), then moving on.
    let mut gens = BTreeMap::from([(a.clone(), 1), (b.clone(), 1)]);
    let mut held = BTreeMap::from([(a.clone(), vec![0, 1, 2]), (b.clone(), vec![3, 4, 5])]);
    for _round in 0..4 {
        for id in [&a, &b] {
            let code = m.heartbeat(id, gens[id]);
            if code == 0 {
                continue;
            }
            assert_eq!(code, ResponseError::RebalanceInProgress.code());
            let j = m.join(id, &held[id]);
            let r = m.joined(j);
            assert_eq!(
                (r.error_code, r.protocol_name.as_deref()),
                (0, Some("cooperative-sticky"))
            );
            assert_eq!(r.leader.as_str(), "", "no leader in a consumer group");
            let s = m.sync(id, r.generation_id, &[]);
            let (code, parts) = m.synced(s);
            assert_eq!(code, 0);
            gens.insert(id.clone(), r.generation_id);
            held.insert(id.clone(), parts);
        }
        // C takes what was released.
        let epoch = m.k.member("C").member_epoch;
        m.k.hb("C", epoch, Some(vec![]));
    }
    let g = &m.k.c.consumer_groups["g"];
    assert_eq!(g.state_name(), "Stable", "{g:#?}");
    let mut all: Vec<i32> = held.values().flatten().copied().collect();
    all.extend(
        m.k.member("C")
            .assigned
            .iter()
            .flat_map(|(_, ps)| ps.iter().copied()),
    );
    all.sort();
    assert_eq!(all, vec![0, 1, 2, 3, 4, 5]);
    assert!(held.values().all(|p| p.len() == 2), "{held:?}");
    m.k.assert_replay_matches();
    // C leaves: only classic members remain, so the group is classic again, at the group
    // epoch, each member holding its target, and rebalancing.
    let epoch = m.k.c.consumer_groups["g"].group_epoch;
    let left = m.k.hb("C", -1, None);
    assert_eq!(left.error_code, 0);
    assert!(!m.k.c.consumer_groups.contains_key("g"));
    let g = &m.k.c.groups["g"];
    assert_eq!(g.state, classic::State::PreparingRebalance);
    assert_eq!(g.generation, epoch);
    assert_eq!(g.protocol_name.as_deref(), Some("cooperative-sticky"));
    assert_eq!(g.members.len(), 2);
    for id in [&a, &b] {
        assert_eq!(decode(&g.members[id].assignment), held[id]);
    }
    m.k.assert_replay_matches();
    // Both rejoin and the classic protocol takes over: a new generation, a leader, a sync.
    let ja = m.join(&a, &held[&a]);
    let jb = m.join(&b, &held[&b]);
    let (ra, rb) = (m.joined(ja), m.joined(jb));
    assert_eq!((ra.error_code, rb.error_code), (0, 0));
    assert_eq!(ra.generation_id, epoch + 1);
    assert!(!ra.leader.is_empty());
    assert_eq!(m.k.c.groups["g"].state, classic::State::CompletingRebalance);
}

#[test]
fn upgrade_is_refused_by_policy_protocol_type_and_size() {
    let mut m = M::new(MigrationPolicy::Downgrade);
    m.classic_pair();
    let r = m.k.join("C", None, &["orders"]);
    assert_eq!(r.error_code, ResponseError::GroupIdNotFound.code());
    assert_eq!(
        r.error_message.as_deref(),
        Some(
            "Cannot upgrade classic group g to consumer group because online upgrade is disabled."
        )
    );
    assert!(m.k.c.groups.contains_key("g") && !m.k.c.consumer_groups.contains_key("g"));

    let mut m = M::new(MigrationPolicy::Bidirectional);
    m.k.c.config.consumer_max_size = 2;
    m.classic_pair();
    let r = m.k.join("C", None, &["orders"]);
    assert_eq!(
        r.error_code,
        ResponseError::GroupMaxSizeReached.code(),
        "{r:?}"
    );
    assert!(m.k.c.groups.contains_key("g"), "nothing converted");
    m.k.c.config.consumer_max_size = 1;
    let r = m.k.join("C", None, &["orders"]);
    assert_eq!(r.error_code, ResponseError::GroupIdNotFound.code());
    assert!(r
        .error_message
        .unwrap()
        .contains("exceeds the consumer group maximum size"));
    // A joiner that fails for its own reasons converts nothing either.
    m.k.c.config.consumer_max_size = 10;
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb("R"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_regex(Some(sb("(")))
        .with_topic_partitions(Some(vec![]));
    let id = m.send(1, GroupRequest::ConsumerHeartbeat(req));
    let Some(GroupResponse::ConsumerHeartbeat(r)) = m.take(id) else {
        panic!()
    };
    assert_eq!(r.error_code, ResponseError::InvalidRegularExpression.code());
    assert!(m.k.c.groups.contains_key("g") && !m.k.c.consumer_groups.contains_key("g"));
}

#[test]
fn pending_joins_fail_with_rebalance_in_progress_on_upgrade() {
    let mut m = M::new(MigrationPolicy::Bidirectional);
    let (a, _b) = m.classic_pair();
    // A rejoins (a rebalance starts); its join is parked waiting for B when C converts the group.
    let parked = m.join(&a, &[0, 1, 2]);
    assert!(m.take(parked).is_none());
    assert_eq!(m.consumer_join("C").error_code, 0);
    let r = m.joined(parked);
    assert_eq!(r.error_code, ResponseError::RebalanceInProgress.code());
    assert!(m.k.c.consumer_groups.contains_key("g"));
    m.k.assert_replay_matches();
}

#[test]
fn classic_joins_into_a_consumer_group_follow_the_policy() {
    for (policy, want) in [
        (
            MigrationPolicy::Disabled,
            ResponseError::InconsistentGroupProtocol,
        ),
        (MigrationPolicy::Upgrade, ResponseError::MemberIdRequired),
    ] {
        let mut m = M::new(policy);
        m.k.join("C", None, &["orders"]);
        let j = m.join("", &[]);
        let r = m.joined(j);
        assert_eq!(r.error_code, want.code(), "{policy:?}");
        if policy == MigrationPolicy::Disabled {
            continue;
        }
        // Known id: it joins the consumer group as a classic member, with the epoch as generation.
        let id = r.member_id.to_string();
        let j = m.join(&id, &[]);
        let r = m.joined(j);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.generation_id, m.k.member(&id).member_epoch);
        assert!(m.k.member(&id).uses_classic());
        // A sync with another generation is ILLEGAL_GENERATION; an unknown member is told so.
        let s = m.sync(&id, r.generation_id + 5, &[]);
        assert_eq!(m.synced(s).0, ResponseError::IllegalGeneration.code());
        assert_eq!(
            m.heartbeat("nobody", 1),
            ResponseError::UnknownMemberId.code()
        );
        // A consumer-protocol member is no classic member.
        assert_eq!(m.heartbeat("C", 2), ResponseError::UnknownMemberId.code());
        // Upgrade only: C leaving leaves a consumer group of one classic member.
        m.k.hb("C", -1, None);
        assert!(
            m.k.c.consumer_groups.contains_key("g"),
            "downgrade is disabled"
        );
        m.k.assert_replay_matches();
    }
}

#[test]
fn a_classic_member_that_does_not_rejoin_in_time_is_fenced() {
    let mut m = M::new(MigrationPolicy::Bidirectional);
    let (a, b) = m.classic_pair();
    m.k.join("C", None, &["orders"]);
    assert_eq!(
        m.heartbeat(&a, 1),
        ResponseError::RebalanceInProgress.code()
    );
    // B rejoins and keeps heartbeating; A never rejoins: its rebalance timeout (30 s) fences it.
    assert_eq!(
        m.heartbeat(&b, 1),
        ResponseError::RebalanceInProgress.code()
    );
    let j = m.join(&b, &[3, 4, 5]);
    let mut generation = m.joined(j).generation_id;
    let s = m.sync(&b, generation, &[]);
    assert_eq!(m.synced(s).0, 0);
    for _ in 0..7 {
        m.advance(5_000);
        if m.heartbeat(&b, generation) != 0 {
            let j = m.join(&b, &[3, 4, 5]);
            generation = m.joined(j).generation_id;
            let s = m.sync(&b, generation, &[]);
            m.synced(s);
        }
    }
    assert!(!m.k.c.consumer_groups["g"].members.contains_key(&a));
    assert!(m.k.c.consumer_groups["g"].members.contains_key(&b));
    m.k.assert_replay_matches();
}

#[test]
fn classic_members_of_a_consumer_group_commit_with_their_generation_at_any_version() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    let mut m = M::new(MigrationPolicy::Bidirectional);
    let (a, _b) = m.classic_pair();
    m.consumer_join("C");
    let commit = |m: &mut M, generation: i32, version: i16| {
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(&a))
            .with_generation_id_or_member_epoch(generation)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(sb("orders")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(42)])]);
        let id = m.send(version, GroupRequest::OffsetCommit(req));
        match m.take(id) {
            Some(GroupResponse::OffsetCommit(r)) => r.topics[0].partitions[0].error_code,
            other => panic!("{other:?}"),
        }
    };
    // `ConsumerGroup.validateOffsetCommit`: v9 is required of consumer-protocol members only;
    // a classic member hears ILLEGAL_GENERATION (not STALE_MEMBER_EPOCH) for a wrong one.
    assert_eq!(
        commit(&mut m, 1, 8),
        0,
        "its generation is its member epoch"
    );
    assert_eq!(
        commit(&mut m, 2, 8),
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(commit(&mut m, 1, 2), 0);
    m.k.assert_replay_matches();
}

#[test]
fn a_static_classic_member_replacing_the_last_consumer_member_downgrades_the_group() {
    let mut m = M::new(MigrationPolicy::Bidirectional);
    // B, classic; then C, a static consumer-protocol member, converts the group.
    let j = m.join("", &[]);
    let b = m.joined(j).member_id.to_string();
    let j = m.join(&b, &[]);
    m.advance(3000);
    let r = m.joined(j);
    let s = m.sync(&b, r.generation_id, &[(&b, &[0, 1, 2, 3, 4, 5])]);
    assert_eq!(m.synced(s).0, 0);
    let c = m.k.join("C", Some("i1"), &["orders"]);
    assert_eq!(c.error_code, 0);
    assert!(m.k.c.consumer_groups.contains_key("g"));
    // C's instance comes back as a classic consumer, without a member id: it takes C's place,
    // no consumer-protocol member is left, and the group is classic again at once.
    let j = m.join_as("", Some("i1"), &[]);
    let r = m.joined(j);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_ne!(r.member_id.as_str(), "C");
    assert!(!m.k.c.consumer_groups.contains_key("g"));
    let g = &m.k.c.groups["g"];
    assert_eq!(g.members.len(), 2);
    assert!(g.members.contains_key(&b) && g.members.contains_key(r.member_id.as_str()));
    assert_eq!(
        g.members[r.member_id.as_str()].instance_id.as_deref(),
        Some("i1")
    );
    m.k.assert_replay_matches();
}
