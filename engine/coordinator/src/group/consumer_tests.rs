//! Fake-clock tests of the KIP-848 rules (reference §5.6 and the seed's 13 steps), with the
//! records replayed into a fresh coordinator after every scenario.

use super::consumer::MemberState;
use super::*;
use crate::topics::MemoryTopics;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as ReqTp;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, BTreeSet};

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub(super) struct K {
    pub(super) c: Coordinator,
    pub(super) now: i64,
    pub(super) next: ReqId,
    pub(super) records: Vec<Record>,
    pub(super) reg: MemoryTopics,
    /// Per-group config overrides every request carries.
    pub(super) group_configs: Arc<GroupOverridesMap>,
    /// Target assignments offloaded and not run yet (see `run_assignments`).
    pub(super) jobs: Vec<target::AssignmentJob>,
    _dir: std::path::PathBuf,
}

type Parts = Vec<(uuid::Uuid, Vec<i32>)>;

impl K {
    pub(super) fn new(cfg: GroupConfig) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "rl-cg-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let reg = MemoryTopics::new(50);
        reg.create("orders", 6, Default::default()).unwrap();
        Self {
            c: Coordinator::new(0, cfg),
            now: 1_000_000,
            next: 1,
            records: Vec::new(),
            reg,
            group_configs: Arc::default(),
            jobs: Vec::new(),
            _dir: dir,
        }
    }
    pub(super) fn cfg() -> GroupConfig {
        GroupConfig {
            consumer_assignment_interval_ms: 1000,
            ..GroupConfig::default()
        }
    }
    pub(super) fn topic_id(&self, name: &str) -> uuid::Uuid {
        self.reg.snapshot().get(name).unwrap().id
    }
    pub(super) fn ctx(&self, v: i16) -> RequestContext {
        RequestContext {
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            api_version: v,
            topics: self.reg.snapshot(),
            group_configs: self.group_configs.clone(),
            topic_filter: None,
        }
    }
    pub(super) fn send(&mut self, v: i16, req: GroupRequest) -> GroupResponse {
        let id = self.next;
        self.next += 1;
        let mut out = Output::default();
        self.c.handle(id, &self.ctx(v), req, self.now, &mut out);
        self.c.tick(self.now, &mut out);
        self.records.extend(out.records);
        self.jobs.extend(out.jobs);
        self.assert_single_owner();
        out.replies
            .into_iter()
            .find(|(i, _)| *i == id)
            .map(|(_, r)| r)
            .expect("answered at once")
    }
    pub(super) fn hb(
        &mut self,
        member: &str,
        epoch: i32,
        owned: Option<Parts>,
    ) -> ConsumerGroupHeartbeatResponse {
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(member))
            .with_member_epoch(epoch)
            .with_topic_partitions(owned.map(|o| {
                o.into_iter()
                    .map(|(t, p)| ReqTp::default().with_topic_id(t).with_partitions(p))
                    .collect()
            }));
        match self.send(1, GroupRequest::ConsumerHeartbeat(req)) {
            GroupResponse::ConsumerHeartbeat(r) => r,
            other => panic!("{other:?}"),
        }
    }
    pub(super) fn join(
        &mut self,
        member: &str,
        instance: Option<&str>,
        topics: &[&str],
    ) -> ConsumerGroupHeartbeatResponse {
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(member))
            .with_member_epoch(0)
            .with_instance_id(instance.map(sb))
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(topics.iter().map(|t| TopicName(sb(t))).collect()))
            .with_topic_partitions(Some(vec![]));
        match self.send(1, GroupRequest::ConsumerHeartbeat(req)) {
            GroupResponse::ConsumerHeartbeat(r) => r,
            other => panic!("{other:?}"),
        }
    }
    pub(super) fn advance(&mut self, ms: i64) {
        self.now += ms;
        let mut out = Output::default();
        self.c.tick(self.now, &mut out);
        self.records.extend(out.records);
        self.jobs.extend(out.jobs);
        self.assert_single_owner();
    }
    /// Run the offloaded target assignments and hand their results back, as a shell does.
    pub(super) fn run_assignments(&mut self) {
        for job in std::mem::take(&mut self.jobs) {
            let mut out = Output::default();
            self.c.assignment_done(job.run(), self.now, &mut out);
            assert!(out.replies.is_empty() && out.jobs.is_empty());
            self.records.extend(out.records);
            self.assert_single_owner();
        }
    }
    pub(super) fn member(&self, id: &str) -> &consumer::ConsumerMember {
        &self.c.consumer_groups["g"].members[id]
    }
    /// The invariant above all: a partition is never owned by two members at once.
    pub(super) fn assert_single_owner(&self) {
        for g in self.c.consumer_groups.values() {
            let mut seen = BTreeSet::new();
            for m in g.members.values() {
                for a in [&m.assigned, &m.pending_revocation] {
                    for (t, ps) in a {
                        for p in ps {
                            assert!(
                                seen.insert((*t, *p)),
                                "partition {t}:{p} owned twice in {:#?}",
                                g.members
                            );
                        }
                    }
                }
            }
        }
    }
    pub(super) fn assert_replay_matches(&self) {
        let mut fresh = Coordinator::new(0, self.c.config.clone());
        for r in &self.records {
            let back = Record::decode(
                &r.encode_key().unwrap(),
                r.encode_value().unwrap().as_deref(),
            )
            .unwrap();
            assert_eq!(&back, r);
            fresh.replay(&back);
        }
        assert_eq!(fresh.durable_view(), self.c.durable_view());
        let mut snap = Coordinator::new(0, self.c.config.clone());
        for r in self.c.snapshot_records() {
            snap.replay(&r);
        }
        assert_eq!(snap.durable_view(), self.c.durable_view());
        super::tests::assert_compacted_replay_matches(&self.records, &self.c);
    }
}

fn parts(r: &ConsumerGroupHeartbeatResponse) -> Option<Vec<i32>> {
    r.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().copied())
            .collect()
    })
}

#[test]
fn seed_two_consumers_sequence() {
    let mut k = K::new(K::cfg());
    let t = k.topic_id("orders");
    let a = k.join("A", None, &["orders"]);
    assert_eq!(
        (a.error_code, a.member_epoch, parts(&a)),
        (0, 2, Some(vec![0, 1, 2, 3, 4, 5]))
    );
    // Stable, but its target is new: A comes back when the next one can be computed (1 s).
    assert_eq!(a.heartbeat_interval_ms, 1000);
    let a = k.hb("A", 2, Some(vec![(t, vec![0, 1, 2, 3, 4, 5])]));
    assert_eq!(
        (a.error_code, parts(&a)),
        (0, None),
        "no change: no assignment sent"
    );
    // (1)-(3) B joins within the assignment interval: group epoch 2, target kept, B gets the
    // current assignment epoch and nothing.
    k.advance(100);
    let b = k.join("B", None, &["orders"]);
    assert_eq!(
        (b.error_code, b.member_epoch, parts(&b)),
        (0, 2, Some(vec![]))
    );
    let g = &k.c.consumer_groups["g"];
    assert_eq!(
        (g.group_epoch, g.assignment_epoch, g.state_name()),
        (3, 2, "Assigning")
    );
    // (4)-(6) A's next heartbeat after the interval recomputes the target; A must revoke 3,4,5.
    k.advance(1000);
    let a = k.hb("A", 2, Some(vec![(t, vec![0, 1, 2, 3, 4, 5])]));
    assert_eq!((a.member_epoch, parts(&a)), (2, Some(vec![0, 1, 2])));
    assert_eq!(k.member("A").state, MemberState::UnrevokedPartitions);
    // (8)-(9) B moves to epoch 2 but A still owns 3,4,5: UNRELEASED, nothing yet.
    let b = k.hb("B", 2, Some(vec![]));
    assert_eq!(b.member_epoch, 3);
    assert_eq!(k.member("B").state, MemberState::UnreleasedPartitions);
    assert!(parts(&b).is_none_or(|p| p.is_empty()));
    // (10)-(11) A acknowledges (owns only 0,1,2): epoch 2, STABLE.
    let a = k.hb("A", 2, Some(vec![(t, vec![0, 1, 2])]));
    assert_eq!(a.member_epoch, 3);
    assert_eq!(k.member("A").state, MemberState::Stable);
    // (12)-(13) B's next heartbeat gets 3,4,5.
    let b = k.hb("B", 3, Some(vec![]));
    assert_eq!((b.member_epoch, parts(&b)), (3, Some(vec![3, 4, 5])));
    assert_eq!(k.c.consumer_groups["g"].state_name(), "Stable");
    // B leaves: A gets everything back at the next target.
    let b = k.hb("B", -1, None);
    assert_eq!(b.member_epoch, -1);
    k.advance(1000);
    let a = k.hb("A", 3, Some(vec![(t, vec![0, 1, 2])]));
    assert_eq!(parts(&a), Some(vec![0, 1, 2, 3, 4, 5]));
    k.assert_replay_matches();
}

#[test]
fn lost_response_is_tolerated_and_bad_epochs_are_fenced() {
    let mut k = K::new(K::cfg());
    let t = k.topic_id("orders");
    k.join("A", None, &["orders"]);
    k.hb("A", 2, Some(vec![(t, vec![0, 1, 2, 3, 4, 5])]));
    k.advance(1000);
    k.join("B", None, &["orders"]);
    k.advance(1000);
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    let a = k.hb("A", 2, Some(vec![(t, vec![0, 1, 2])]));
    assert_eq!(a.member_epoch, 3);
    // The response carrying epoch 3 is lost; A retries with epoch 2 owning a subset: accepted.
    let again = k.hb("A", 2, Some(vec![(t, vec![0, 1, 2])]));
    assert_eq!((again.error_code, again.member_epoch), (0, 3));
    // Owning something it should not have, with the old epoch: fenced.
    let bad = k.hb("A", 2, Some(vec![(t, vec![0, 1, 2, 5])]));
    assert_eq!(bad.error_code, ResponseError::FencedMemberEpoch.code());
    // An epoch from the future: fenced. An unknown member: UNKNOWN_MEMBER_ID.
    assert_eq!(
        k.hb("A", 8, None).error_code,
        ResponseError::FencedMemberEpoch.code()
    );
    assert_eq!(
        k.hb("nobody", 2, None).error_code,
        ResponseError::UnknownMemberId.code()
    );
    k.assert_replay_matches();
}

#[test]
fn a_previous_epoch_without_owned_partitions_is_fenced() {
    // Found by the simulator (engine/sim): a delayed duplicate of an old heartbeat moved A
    // to a new epoch with more partitions, and its response (the only one carrying them) went
    // to a request A no longer waited for. A's next heartbeat, with the previous epoch and no
    // owned partitions, was accepted and answered without the assignment: A kept consuming its
    // old partitions and the new ones stayed unconsumed. Kafka fences such a heartbeat.
    let mut k = K::new(K::cfg());
    let t = k.topic_id("orders");
    k.join("A", None, &["orders"]);
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    k.advance(1000);
    k.join("B", None, &["orders"]);
    k.advance(1000);
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    k.hb("A", 2, Some(vec![(t, vec![0, 1, 2])]));
    assert_eq!(k.member("A").member_epoch, 3);
    let r = k.hb("A", 2, None);
    assert_eq!(
        r.error_code,
        ResponseError::FencedMemberEpoch.code(),
        "a previous-epoch heartbeat must show its owned partitions to be taken as a retry"
    );
    let r = k.hb("A", 2, Some(vec![(t, vec![0, 1, 2])]));
    assert_eq!(
        (r.error_code, r.member_epoch),
        (0, 3),
        "with them it is a retry"
    );
}

#[test]
fn an_assignment_is_resent_until_the_member_reports_owning_it() {
    // Found by the simulator (engine/sim): the response that handed B the partitions A had
    // just released went to a stale request of B's that B no longer waited for. The assignment
    // was only sent when it changed, so B's next heartbeats (epoch unchanged, nothing new to
    // report) were answered without it: B never consumed those partitions.
    let mut k = K::new(K::cfg());
    let t = k.topic_id("orders");
    k.join("A", None, &["orders"]);
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    k.advance(1000);
    let b = k.join("B", None, &["orders"]);
    assert_eq!((b.error_code, b.member_epoch), (0, 3));
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    k.hb("B", 3, Some(vec![]));
    assert_eq!(k.member("B").state, MemberState::UnreleasedPartitions);
    k.hb("A", 2, Some(vec![(t, vec![0, 1, 2])]));
    // A stale heartbeat of B's is processed now: it takes 3,4,5 — but B never sees the answer.
    let lost = k.hb("B", 3, None);
    assert_eq!(parts(&lost), Some(vec![3, 4, 5]));
    assert_eq!(k.member("B").state, MemberState::Stable);
    // B's own next heartbeat reports nothing new; the answer must carry the assignment.
    let b = k.hb("B", 3, None);
    assert_eq!(
        parts(&b),
        Some(vec![3, 4, 5]),
        "the assignment must be resent until B reports owning it"
    );
    let b = k.hb("B", 3, Some(vec![(t, vec![3, 4, 5])]));
    assert_eq!(parts(&b), None, "acknowledged: no more resending");
    assert_eq!(parts(&k.hb("B", 3, None)), None);
}

#[test]
fn zombie_commits_are_rejected() {
    let mut k = K::new(K::cfg());
    let t = k.topic_id("orders");
    k.join("A", None, &["orders"]);
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    k.advance(1000);
    k.join("B", None, &["orders"]);
    k.advance(1000);
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    k.hb("A", 2, Some(vec![(t, vec![0, 1, 2])]));
    assert_eq!(k.member("A").member_epoch, 3);
    let commit_p = |member: &str, epoch: i32, partition: i32| {
        GroupRequest::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(GroupId(sb("g")))
                .with_member_id(sb(member))
                .with_generation_id_or_member_epoch(epoch)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(TopicName(sb("orders")))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(partition)
                        .with_committed_offset(5)])]),
        )
    };
    let commit = |member: &str, epoch: i32| commit_p(member, epoch, 0);
    let code = |r: GroupResponse| match r {
        GroupResponse::OffsetCommit(r) => r.topics[0].partitions[0].error_code,
        other => panic!("{other:?}"),
    };
    // Kafka 4.3+ assignment epochs: an older epoch commits a partition the member already
    // held at that epoch (A has had partition 0 since epoch 2) ...
    assert_eq!(code(k.send(9, commit("A", 2))), 0, "held since epoch 2");
    // ... and nothing it no longer holds, or got only later.
    assert_eq!(
        code(k.send(9, commit_p("A", 2, 5))),
        ResponseError::StaleMemberEpoch.code(),
        "a zombie committing a partition that moved to B"
    );
    assert_eq!(
        code(k.send(9, commit("A", 1))),
        ResponseError::StaleMemberEpoch.code(),
        "an epoch older than the partition's assignment epoch"
    );
    assert_eq!(k.member("A").assignment_epoch(&t, 0), Some(2));
    assert_eq!(
        code(k.send(9, commit("A", 4))),
        ResponseError::StaleMemberEpoch.code(),
        "an epoch from the future"
    );
    assert_eq!(
        code(k.send(8, commit("A", 3))),
        ResponseError::UnsupportedVersion.code(),
        "KIP-848 members commit with v9+"
    );
    assert_eq!(
        code(k.send(9, commit("ghost", 3))),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(code(k.send(9, commit("A", 3))), 0);
    k.assert_replay_matches();
}

#[test]
fn static_member_leaves_with_minus_two_and_returns_without_a_rebalance() {
    let mut k = K::new(K::cfg());
    let t = k.topic_id("orders");
    k.join("S1", Some("inst"), &["orders"]);
    k.hb("S1", 2, Some(vec![(t, (0..6).collect())]));
    k.advance(1000);
    k.join("B", None, &["orders"]);
    k.advance(1000);
    k.hb("S1", 2, Some(vec![(t, (0..6).collect())]));
    k.hb("S1", 2, Some(vec![(t, vec![0, 1, 2])]));
    k.hb("B", 2, Some(vec![]));
    k.hb("B", 3, Some(vec![]));
    let epoch_before = k.c.consumer_groups["g"].group_epoch;
    // While S1 is active, another incarnation of "inst" is refused.
    assert_eq!(
        k.join("S2", Some("inst"), &["orders"]).error_code,
        ResponseError::UnreleasedInstanceId.code()
    );
    // S1 leaves temporarily.
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb("S1"))
        .with_member_epoch(-2)
        .with_instance_id(Some(sb("inst")));
    let GroupResponse::ConsumerHeartbeat(r) = k.send(1, GroupRequest::ConsumerHeartbeat(req))
    else {
        panic!()
    };
    assert_eq!((r.error_code, r.member_epoch), (0, -2));
    // It comes back as S2 with the same instance id: same partitions, same epoch, no new group epoch.
    let s2 = k.join("S2", Some("inst"), &["orders"]);
    assert_eq!(
        (s2.error_code, s2.member_epoch, parts(&s2)),
        (0, 3, Some(vec![0, 1, 2]))
    );
    assert_eq!(k.c.consumer_groups["g"].group_epoch, epoch_before);
    assert!(!k.c.consumer_groups["g"].members.contains_key("S1"));
    let b = k.hb("B", 3, Some(vec![(t, vec![3, 4, 5])]));
    assert_eq!((b.error_code, parts(&b)), (0, None), "B saw nothing");
    k.assert_replay_matches();
}

#[test]
fn a_burst_of_joins_makes_one_new_target() {
    let mut k = K::new(K::cfg());
    let t = k.topic_id("orders");
    k.join("A", None, &["orders"]);
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    let targets_before = k
        .records
        .iter()
        .filter(|r| {
            matches!(
                r.key,
                RecordKey::ConsumerGroupTargetAssignmentMetadata { .. }
            )
        })
        .count();
    for m in ["B", "C", "D", "E"] {
        k.advance(50);
        k.join(m, None, &["orders"]);
    }
    let g = &k.c.consumer_groups["g"];
    assert_eq!(
        (g.group_epoch, g.assignment_epoch),
        (6, 2),
        "joins inside the interval only bump the group epoch"
    );
    // Nothing happens when the interval passes: the next heartbeat after it computes the
    // target (Kafka's `maybeUpdateTargetAssignment` runs in a request, no timer).
    k.advance(1000);
    assert_eq!(k.c.consumer_groups["g"].assignment_epoch, 2);
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    let targets = k
        .records
        .iter()
        .filter(|r| {
            matches!(
                r.key,
                RecordKey::ConsumerGroupTargetAssignmentMetadata { .. }
            )
        })
        .count();
    assert_eq!(
        targets,
        targets_before + 1,
        "one target for the whole burst"
    );
    let g = &k.c.consumer_groups["g"];
    assert_eq!(g.assignment_epoch, 6);
    let sizes: Vec<usize> = g.target.values().map(|a| a.count()).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 6);
    assert!(sizes.iter().all(|s| (1..=2).contains(s)), "{sizes:?}");
    k.assert_replay_matches();
}

#[test]
fn regex_subscription_is_re_resolved_when_topics_appear() {
    let mut k = K::new(K::cfg());
    k.reg.create("orders-a", 2, Default::default()).unwrap();
    let req = regex_join_req("R", "orders-.*");
    let GroupResponse::ConsumerHeartbeat(r) = k.send(1, GroupRequest::ConsumerHeartbeat(req))
    else {
        panic!()
    };
    assert_eq!((r.error_code, parts(&r).map(|p| p.len())), (0, Some(2)));
    let a = k.topic_id("orders-a");
    // A new matching topic: the next heartbeat re-resolves the regex and the target grows.
    k.reg.create("orders-b", 3, Default::default()).unwrap();
    k.advance(1000);
    let r = k.hb("R", 2, Some(vec![(a, vec![0, 1])]));
    assert_eq!(
        (r.error_code, r.member_epoch, parts(&r).map(|p| p.len())),
        (0, 3, Some(5))
    );
    assert_eq!(
        k.c.consumer_groups["g"].regexes["orders-.*"],
        vec!["orders-a".to_string(), "orders-b".to_string()]
    );
    // An invalid expression is refused with INVALID_REGULAR_EXPRESSION.
    let bad = regex_join_req("X", "orders-(");
    let GroupResponse::ConsumerHeartbeat(r) = k.send(1, GroupRequest::ConsumerHeartbeat(bad))
    else {
        panic!()
    };
    assert_eq!(r.error_code, ResponseError::InvalidRegularExpression.code());
    k.assert_replay_matches();
}

#[test]
fn regex_resolves_only_to_topics_the_member_may_describe() {
    // With ACLs on, the broker passes the topics the caller may Describe; a regex matches only
    // those (Kafka 4.x `GroupMetadataManager.refreshRegularExpressions`), so a member is never
    // assigned, nor told the name of, a topic it cannot see.
    let mut k = K::new(K::cfg());
    k.reg.create("orders-a", 2, Default::default()).unwrap();
    k.reg
        .create("orders-secret", 3, Default::default())
        .unwrap();
    let req = regex_join_req("R", "orders-.*");
    let ctx = RequestContext {
        topic_filter: Some(super::TopicFilter(std::sync::Arc::new(|t: &str| {
            !t.ends_with("-secret")
        }))),
        ..k.ctx(1)
    };
    let mut out = Output::default();
    k.c.handle(
        1,
        &ctx,
        GroupRequest::ConsumerHeartbeat(req),
        k.now,
        &mut out,
    );
    k.c.tick(k.now, &mut out);
    let Some((_, GroupResponse::ConsumerHeartbeat(r))) = out.replies.pop() else {
        panic!("no heartbeat reply")
    };
    k.records.extend(out.records);
    assert_eq!((r.error_code, parts(&r).map(|p| p.len())), (0, Some(2)));
    let a = k.topic_id("orders-a");
    let topics: Vec<_> = r
        .assignment
        .as_ref()
        .unwrap()
        .topic_partitions
        .iter()
        .map(|t| t.topic_id)
        .collect();
    assert_eq!(topics, vec![a]);
    assert_eq!(
        k.c.consumer_groups["g"].regexes["orders-.*"],
        vec!["orders-a".to_string()]
    );
    k.assert_replay_matches();
}

/// A 10 s session: A owns orders 0..6, then B joins and A is asked to revoke 3,4,5 (A is
/// `UnrevokedPartitions`). Returns the harness and the topic id.
fn a_revoking_for_b() -> (K, uuid::Uuid) {
    let cfg = GroupConfig {
        consumer_session_timeout_ms: 10_000,
        ..K::cfg()
    };
    let mut k = K::new(cfg);
    let t = k.topic_id("orders");
    k.join("A", None, &["orders"]);
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    k.advance(1000);
    k.join("B", None, &["orders"]);
    k.advance(1000);
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    assert_eq!(k.member("A").state, MemberState::UnrevokedPartitions);
    (k, t)
}

#[test]
fn silent_and_stuck_members_are_fenced() {
    let (mut k, t) = a_revoking_for_b();
    // A keeps heartbeating but never gives 3,4,5 up: fenced after its rebalance timeout (30 s).
    for _ in 0..3 {
        k.advance(8000);
        k.hb("B", 3, Some(vec![]));
        let r = k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
        assert_eq!(r.error_code, 0);
    }
    k.advance(6000);
    k.hb("B", 3, Some(vec![]));
    assert_eq!(
        k.hb("A", 2, Some(vec![(t, (0..6).collect())])).error_code,
        ResponseError::UnknownMemberId.code(),
        "fenced members are unknown"
    );
    assert!(
        !k.c.consumer_groups["g"].members.contains_key("A"),
        "A was fenced for not revoking"
    );
    // B goes silent: its session expires.
    k.advance(10_000);
    assert!(k.c.consumer_groups["g"].members.is_empty());
    assert_eq!(k.c.consumer_groups["g"].state_name(), "Empty");
    k.assert_replay_matches();
}

#[test]
fn members_loaded_from_the_log_still_time_out() {
    // Found by the simulator (engine/sim): after a restart, consumer-protocol members
    // loaded from the log had no session deadline, so a member whose client died before the
    // restart stayed in the group with its partitions forever. Kafka's `onLoaded` schedules
    // every loaded member's session, and the revocation deadline of a member still revoking.
    let (mut k, _) = a_revoking_for_b();
    // Restart: a fresh coordinator from the records.
    let mut fresh = Coordinator::new(0, k.c.config.clone());
    for r in &k.records {
        fresh.replay(r);
    }
    fresh.on_loaded(k.now);
    k.c = fresh;
    // B keeps heartbeating; A (revoking) never comes back: its revocation deadline (30 s) or
    // session (10 s) removes it and B gets everything.
    for _ in 0..4 {
        k.advance(4000);
        k.hb("B", 3, Some(vec![]));
    }
    assert!(
        !k.c.consumer_groups["g"].members.contains_key("A"),
        "a loaded member that never heartbeats again must be fenced"
    );
    k.advance(1000);
    let b = k.hb("B", 3, Some(vec![]));
    assert_eq!(parts(&b), Some(vec![0, 1, 2, 3, 4, 5]));
}

#[test]
fn validation_errors() {
    let mut k = K::new(K::cfg());
    let base = || {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb("M"))
            .with_member_epoch(0)
    };
    let code = |k: &mut K, r: ConsumerGroupHeartbeatRequest| match k
        .send(1, GroupRequest::ConsumerHeartbeat(r))
    {
        GroupResponse::ConsumerHeartbeat(r) => r.error_code,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        code(
            &mut k,
            base()
                .with_subscribed_topic_names(Some(vec![]))
                .with_topic_partitions(Some(vec![]))
        ),
        ResponseError::InvalidRequest.code(),
        "no rebalance timeout"
    );
    assert_eq!(
        code(
            &mut k,
            base()
                .with_rebalance_timeout_ms(1)
                .with_topic_partitions(Some(vec![]))
        ),
        ResponseError::InvalidRequest.code(),
        "no subscription"
    );
    assert_eq!(
        code(
            &mut k,
            base()
                .with_member_id(sb(""))
                .with_rebalance_timeout_ms(1)
                .with_subscribed_topic_names(Some(vec![]))
                .with_topic_partitions(Some(vec![]))
        ),
        ResponseError::InvalidRequest.code(),
        "v1 needs a member id"
    );
    assert_eq!(
        code(&mut k, base().with_member_epoch(-3)),
        ResponseError::InvalidRequest.code()
    );
    assert_eq!(
        code(
            &mut k,
            base()
                .with_group_id(GroupId(sb("")))
                .with_rebalance_timeout_ms(1)
                .with_subscribed_topic_names(Some(vec![]))
                .with_topic_partitions(Some(vec![]))
        ),
        ResponseError::InvalidRequest.code(),
        "an empty group id is INVALID_REQUEST, as Kafka's request validation says"
    );
    assert_eq!(
        code(
            &mut k,
            base()
                .with_rebalance_timeout_ms(1)
                .with_subscribed_topic_names(Some(vec![]))
                .with_topic_partitions(Some(vec![]))
                .with_server_assignor(Some(sb("sticky")))
        ),
        ResponseError::UnsupportedAssignor.code()
    );
    assert_eq!(
        code(&mut k, base().with_member_epoch(3)),
        ResponseError::GroupIdNotFound.code(),
        "unknown group for a non-join"
    );
}

#[test]
fn random_sequences_keep_single_ownership_monotonic_epochs_and_replay() {
    // A small deterministic PRNG so failures reproduce from the seed.
    for seed in 0..40u64 {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut k = K::new(GroupConfig {
            consumer_assignment_interval_ms: 500,
            ..K::cfg()
        });
        let names = ["m0", "m1", "m2", "m3"];
        let mut epochs: std::collections::BTreeMap<&str, i32> = Default::default();
        for _ in 0..120 {
            k.advance(rnd(400) as i64);
            let who = names[rnd(4) as usize];
            let live =
                k.c.consumer_groups
                    .get("g")
                    .and_then(|g| g.members.get(who))
                    .cloned();
            match (live, rnd(10)) {
                (None, _) => {
                    let r = k.join(who, None, &["orders"]);
                    assert_eq!(r.error_code, 0);
                    epochs.insert(who, r.member_epoch);
                }
                (Some(_), 0) => {
                    k.hb(who, -1, None);
                    epochs.remove(who);
                }
                (Some(m), _) => {
                    // Acknowledge exactly what it was told it owns (a well-behaved client).
                    let owned: Parts = m
                        .assigned
                        .iter()
                        .map(|(t, ps)| (*t, ps.iter().copied().collect()))
                        .collect();
                    let r = k.hb(who, m.member_epoch, Some(owned));
                    assert_eq!(r.error_code, 0, "seed {seed}");
                    let prev = epochs.insert(who, r.member_epoch).unwrap_or(0);
                    assert!(
                        r.member_epoch >= prev,
                        "seed {seed}: epoch went back {prev} -> {}",
                        r.member_epoch
                    );
                }
            }
        }
        k.assert_replay_matches();
    }
}

/// Bytes held by the coordinator per consumer-protocol member, measured with glibc's
/// `mallinfo2` (the test binary uses the system allocator). Not a pass/fail test: run it with
/// `cargo test -p ringleader-engine --lib held_bytes_per_member -- --ignored --nocapture
/// --test-threads=1`; `RL_MEM_GROUPS`, `RL_MEM_MEMBERS`, `RL_MEM_TOPICS`, `RL_MEM_PARTITIONS`
/// set the shape (default 100 groups × 100 members, 1 topic × 100 partitions).
#[test]
#[ignore]
fn held_bytes_per_member() {
    fn in_use() -> i64 {
        // SAFETY: mallinfo2 only reads the allocator's counters.
        let m = unsafe { libc::mallinfo2() };
        (m.uordblks + m.hblkhd) as i64
    }
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (groups, members) = (env("RL_MEM_GROUPS", 100), env("RL_MEM_MEMBERS", 100));
    let (n_topics, n_parts) = (env("RL_MEM_TOPICS", 1), env("RL_MEM_PARTITIONS", 100));
    let dir = std::env::temp_dir().join(format!("rl-mem-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let reg = MemoryTopics::new(50);
    let names: Vec<String> = (0..n_topics).map(|i| format!("loadgen-t{i}")).collect();
    for n in &names {
        reg.create(n, n_parts as i32, Default::default()).unwrap();
    }
    let ctx = |v: i16| RequestContext {
        client_id: "loadgen".into(),
        client_host: "/127.0.0.1".into(),
        api_version: v,
        topics: reg.snapshot(),
        group_configs: Default::default(),
        topic_filter: None,
    };
    let (c0, c1, c9) = (ctx(0), ctx(1), ctx(9));
    let mut now = 1_000_000i64;
    let mut id = 0u64;
    // Client side: (group, member id, epoch, owned).
    struct Cl {
        g: String,
        m: String,
        epoch: i32,
        owned: Vec<(uuid::Uuid, Vec<i32>)>,
    }
    let mut clients = Vec::new();
    for g in 0..groups {
        for i in 0..members {
            clients.push(Cl {
                g: format!("loadgen-g{g}"),
                // Random-looking ids, like real clients' (the order of inserts shapes the maps).
                m: format!(
                    "{:016x}{:06}",
                    (g * members + i).wrapping_mul(0x9e37_79b9_7f4a_7c15usize),
                    i
                ),
                epoch: 0,
                owned: Vec::new(),
            });
        }
    }
    // Room for the clients' owned partitions, so their growth is not counted.
    for cl in clients.iter_mut() {
        cl.owned.reserve(n_topics);
    }
    let base = in_use();
    let mut c = Coordinator::new(0, GroupConfig::default());
    let step = |c: &mut Coordinator, cl: &mut Cl, now: i64, id: &mut u64, first: bool| {
        *id += 1;
        let mut req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb(&cl.g)))
            .with_member_id(sb(&cl.m))
            .with_member_epoch(cl.epoch)
            .with_topic_partitions(Some(
                cl.owned
                    .iter()
                    .map(|(t, p)| {
                        ReqTp::default()
                            .with_topic_id(*t)
                            .with_partitions(p.clone())
                    })
                    .collect(),
            ));
        if first {
            req = req
                .with_rebalance_timeout_ms(300_000)
                .with_subscribed_topic_names(Some(
                    names.iter().map(|n| TopicName(sb(n))).collect(),
                ));
        }
        let mut out = Output::default();
        c.handle(
            *id,
            &c1,
            GroupRequest::ConsumerHeartbeat(req),
            now,
            &mut out,
        );
        let Some((_, GroupResponse::ConsumerHeartbeat(r))) = out.replies.pop() else {
            panic!("no answer")
        };
        assert_eq!(r.error_code, 0, "{r:?}");
        cl.epoch = r.member_epoch;
        if let Some(a) = r.assignment {
            cl.owned = a
                .topic_partitions
                .into_iter()
                .map(|t| (t.topic_id, t.partitions))
                .collect();
        }
    };
    for cl in clients.iter_mut() {
        step(&mut c, cl, now, &mut id, true);
    }
    for _round in 0..12 {
        now += 1_000;
        let mut out = Output::default();
        c.tick(now, &mut out);
        for cl in clients.iter_mut() {
            step(&mut c, cl, now, &mut id, false);
        }
    }
    let unstable = c
        .consumer_groups
        .values()
        .flat_map(|g| g.members.values().map(move |m| (g, m)))
        .filter(|(g, m)| m.state != MemberState::Stable || m.member_epoch != g.assignment_epoch)
        .count();
    assert_eq!(unstable, 0, "every member stable");
    // One commit of its partitions per member.
    for cl in &clients {
        id += 1;
        let topics = cl
            .owned
            .iter()
            .map(|(t, ps)| {
                let name = c9.topics.get_by_id(t).unwrap().name.clone();
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(sb(&name)))
                    .with_topic_id(*t)
                    .with_partitions(
                        ps.iter()
                            .map(|p| {
                                OffsetCommitRequestPartition::default()
                                    .with_partition_index(*p)
                                    .with_committed_offset(1000)
                            })
                            .collect(),
                    )
            })
            .collect();
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb(&cl.g)))
            .with_member_id(sb(&cl.m))
            .with_generation_id_or_member_epoch(cl.epoch)
            .with_topics(topics);
        let mut out = Output::default();
        c.handle(id, &c9, GroupRequest::OffsetCommit(req), now, &mut out);
    }
    drop((c0, c1, c9));
    let n = (groups * members) as i64;
    // What dropping each part frees; together they are the whole coordinator ("other" is what
    // is left after them). Growth measured from `base` would also count the test's own churn.
    let grown = in_use() - base;
    let mut report = Vec::new();
    let mut part = |name: &str, f: &mut dyn FnMut(&mut Coordinator)| {
        let before = in_use();
        f(&mut c);
        report.push((name.to_string(), before - in_use()));
    };
    part("timers", &mut |c| drop(std::mem::take(&mut c.timers)));
    part("sent (last reported)", &mut |c| {
        for g in c.consumer_groups.values_mut() {
            for m in g.members.values_mut() {
                drop(m.sent.take());
            }
        }
    });
    part("offsets", &mut |c| drop(std::mem::take(&mut c.offsets)));
    part("targets", &mut |c| {
        for g in c.consumer_groups.values_mut() {
            drop(std::mem::take(&mut g.target));
        }
    });
    part("member assignments", &mut |c| {
        for g in c.consumer_groups.values_mut() {
            for m in g.members.values_mut() {
                drop(std::mem::take(&mut m.assigned));
                drop(std::mem::take(&mut m.pending_revocation));
            }
        }
    });
    part("members and groups (rest)", &mut |c| {
        drop(std::mem::take(&mut c.consumer_groups))
    });
    part("other", &mut |c| {
        *c = Coordinator::new(0, GroupConfig::default());
    });
    let total: i64 = report.iter().map(|(_, v)| v).sum();
    println!(
        "{groups} groups x {members} members, {n_topics} topics x {n_parts} partitions: \
         coordinator holds {} bytes per member (heap grew {} per member during the run)",
        total / n,
        grown / n
    );
    for (k, v) in report {
        println!("  {k:<28} {:>12} bytes  {:>7} per member", v, v / n);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_member_rejoining_with_epoch_zero_goes_on_as_it_is() {
    // Kafka 4.4 (`GroupMetadataManager.consumerGroupHeartbeat`: `getOrMaybeCreateMember` returns
    // the member, epoch 0 is never fenced, an unchanged reconciled member is not touched): a
    // client that rejoins with its id while the group still knows it — after a fenced
    // heartbeat, or with the rejoin ahead of its own leave — gets its epoch and its whole
    // assignment back in the same reply, and nothing is written.
    let mut k = K::new(K::cfg());
    let t = k.topic_id("orders");
    let epoch = k.join("A", None, &["orders"]).member_epoch;
    let a = k.hb("A", epoch, Some(vec![(t, (0..6).collect())]));
    assert_eq!((a.error_code, a.member_epoch), (0, epoch));
    k.advance(1000);
    let written = k.records.len();
    let back = k.join("A", None, &["orders"]);
    assert_eq!(back.error_code, 0);
    assert_eq!(back.member_epoch, epoch, "the epoch it had");
    assert_eq!(
        parts(&back),
        Some((0..6).collect()),
        "its whole assignment, in this reply"
    );
    assert_eq!(
        k.records.len(),
        written,
        "an unchanged member writes nothing"
    );
    // A member that was revoking counts the empty owned list as revoked and moves on.
    k.join("B", None, &["orders"]);
    k.advance(1000);
    let r = k.hb("A", epoch, Some(vec![(t, (0..6).collect())]));
    assert_eq!(r.member_epoch, epoch, "A must first give up what B gets");
    assert_eq!(
        k.member("A").state,
        consumer::MemberState::UnrevokedPartitions
    );
    let back = k.join("A", None, &["orders"]);
    assert!(
        back.member_epoch > epoch,
        "revoked by rejoining: the target epoch"
    );
    assert_eq!(parts(&back).map(|p| p.len()), Some(3));
    k.assert_replay_matches();
}

#[test]
fn a_groups_own_configs_apply_from_its_next_heartbeat() {
    let mut k = K::new(K::cfg());
    let t = k.topic_id("orders");
    let a = k.join("A", None, &["orders"]);
    assert_eq!(
        a.heartbeat_interval_ms, 1000,
        "a new target: back when the next may come"
    );
    // `consumer.heartbeat.interval.ms` and `consumer.session.timeout.ms` set for g (and another
    // value for an unrelated group): the next heartbeat carries them.
    k.group_configs = Arc::new(
        [
            (
                "g".to_string(),
                GroupOverrides {
                    heartbeat_interval_ms: Some(2000),
                    session_timeout_ms: Some(3000),
                    assignment_interval_ms: Some(0),
                },
            ),
            (
                "other".to_string(),
                GroupOverrides {
                    heartbeat_interval_ms: Some(9000),
                    ..Default::default()
                },
            ),
        ]
        .into_iter()
        .collect(),
    );
    let a = k.hb("A", a.member_epoch, Some(vec![(t, (0..6).collect())]));
    assert_eq!(a.heartbeat_interval_ms, 2000);
    // With an assignment interval of 0 a joiner's target is computed in its own request, even
    // right after the last one.
    let b = k.join("B", None, &["orders"]);
    assert_eq!(k.c.consumer_groups["g"].assignment_epoch, b.member_epoch);
    assert_eq!(k.c.consumer_groups["g"].group_epoch, b.member_epoch);
    // The group's session timeout (3 s), not the broker's 45 s: B goes silent and is fenced.
    for _ in 0..4 {
        k.advance(1000);
        let e = k.member("A").member_epoch;
        let owned: Vec<i32> = k
            .member("A")
            .assigned
            .iter()
            .flat_map(|(_, ps)| ps.iter().copied())
            .collect();
        k.hb("A", e, Some(vec![(t, owned)]));
    }
    assert!(!k.c.consumer_groups["g"].members.contains_key("B"));
    assert!(k.c.consumer_groups["g"].members.contains_key("A"));
    k.assert_replay_matches();
}

// ---- target assignments off the request path (`target`) -----------------------------------

/// Every assignment offloaded, whatever its size.
fn offload_cfg(interval_ms: i32) -> GroupConfig {
    GroupConfig {
        assignment_offload_min_work: 0,
        consumer_assignment_interval_ms: interval_ms,
        ..GroupConfig::default()
    }
}

fn owned_now(k: &K, member: &str) -> Parts {
    k.member(member)
        .assigned
        .iter()
        .map(|(t, ps)| (*t, ps.iter().copied().collect()))
        .collect()
}

/// Heartbeats from every member, owning what it was given, until nothing changes.
fn settle(k: &mut K) {
    for _ in 0..6 {
        let ids: Vec<String> = k.c.consumer_groups["g"].members.keys().cloned().collect();
        for id in ids {
            let e = k.member(&id).member_epoch;
            let owned = owned_now(k, &id);
            k.hb(&id, e, Some(owned));
            k.run_assignments();
        }
    }
}

#[test]
fn an_offloaded_target_is_the_inline_target() {
    // The same requests at the same times, once with targets computed inline and once with
    // every target computed off the request path and handed back before the next request.
    let mut inline = K::new(K::cfg());
    let mut off = K::new(offload_cfg(1000));
    for k in [&mut inline, &mut off] {
        k.reg.create("other", 5, Default::default()).unwrap();
        k.join("A", None, &["orders"]);
        k.run_assignments();
        k.advance(10);
        k.join("B", None, &["orders", "other"]);
        k.run_assignments();
        k.join("C", Some("ic"), &["other"]);
        k.run_assignments();
        k.advance(1500);
        settle(k);
        k.advance(1500);
        settle(k);
    }
    // Topic ids are random per registry: compare by name.
    let named = |k: &K, a: assignor::Assignment| -> BTreeMap<String, BTreeSet<i32>> {
        let topics = k.reg.snapshot();
        a.into_iter()
            .map(|(t, ps)| (topics.get_by_id(&t).unwrap().name.clone(), ps))
            .collect()
    };
    let (a, b) = (&inline.c.consumer_groups["g"], &off.c.consumer_groups["g"]);
    assert_eq!(a.assignment_epoch, b.assignment_epoch);
    assert_eq!(a.target.len(), b.target.len());
    for (id, t) in &a.target {
        assert_eq!(
            named(&inline, t.to_assignment()),
            named(&off, b.target[id].to_assignment()),
            "{id}"
        );
    }
    for (id, m) in &a.members {
        assert_eq!(
            named(&inline, m.assigned.to_assignment()),
            named(&off, b.members[id].assigned.to_assignment()),
            "{id}"
        );
        assert_eq!(m.member_epoch, b.members[id].member_epoch, "{id}");
    }
    assert!(a
        .members
        .values()
        .all(|m| m.state == consumer::MemberState::Stable));
    assert_eq!(off.c.assignments_running(), 0);
    inline.assert_replay_matches();
    off.assert_replay_matches();
}

#[test]
fn a_group_keeps_its_target_while_its_assignment_runs() {
    let mut k = K::new(offload_cfg(0));
    let t = k.topic_id("orders");
    // The first member of a new group reconciles to the group's initial empty target (epoch
    // 1) while the first real one is computed: never to epoch 0, which means "joining".
    let a = k.join("A", None, &["orders"]);
    assert_eq!((a.member_epoch, parts(&a)), (1, Some(vec![])));
    assert_eq!(k.jobs.len(), 1);
    assert!(k
        .records
        .iter()
        .all(|r| !matches!(r.key, RecordKey::ConsumerGroupTargetAssignmentMember { .. })));
    // While it runs, no second assignment starts, whatever happens to the group.
    let a = k.hb("A", 1, Some(vec![]));
    assert_eq!(a.member_epoch, 1);
    k.join("B", None, &["orders"]);
    assert_eq!(k.jobs.len(), 1);
    assert_eq!(k.c.assignments_running(), 1);
    // Its result is the target of the epoch it was captured at (A alone), although B joined.
    k.run_assignments();
    let g = &k.c.consumer_groups["g"];
    assert_eq!((g.assignment_epoch, g.group_epoch), (2, 3));
    assert_eq!(g.target["A"].count(), 6);
    assert!(!g.target.contains_key("B"));
    let a = k.hb("A", 1, Some(vec![]));
    assert_eq!((a.member_epoch, parts(&a).map(|p| p.len())), (2, Some(6)));
    // That heartbeat started the next one (the interval is 0), which gives B its half.
    assert_eq!(k.jobs.len(), 1);
    k.run_assignments();
    assert_eq!(k.c.consumer_groups["g"].assignment_epoch, 3);
    settle(&mut k);
    let (pa, pb) = (owned_now(&k, "A"), owned_now(&k, "B"));
    assert_eq!(pa.iter().chain(&pb).map(|(_, p)| p.len()).sum::<usize>(), 6);
    assert_eq!(pa[0].1.len(), 3);
    assert_eq!(pa[0].0, t);
    k.assert_replay_matches();
}

#[test]
fn a_late_result_skips_members_that_left_or_resubscribed_and_follows_a_replaced_static_member() {
    let mut k = K::new(offload_cfg(0));
    k.reg.create("other", 4, Default::default()).unwrap();
    k.join("A", Some("ia"), &["orders"]);
    k.join("B", None, &["orders"]);
    k.join("D", None, &["orders"]);
    k.run_assignments();
    settle(&mut k);
    let before = k.c.consumer_groups["g"].target.clone();
    // C joins: an assignment of A, B, C and D starts.
    k.join("C", None, &["orders"]);
    assert_eq!(k.jobs.len(), 1);
    // Before it ends: B leaves, D subscribes to another topic, and A's instance comes back under
    // a new member id (a static leave, then a join with the same instance id).
    let e = k.member("B").member_epoch;
    k.hb("B", -1, None);
    let e_d = k.member("D").member_epoch;
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb("D"))
        .with_member_epoch(e_d)
        .with_subscribed_topic_names(Some(vec![TopicName(sb("other"))]));
    k.send(1, GroupRequest::ConsumerHeartbeat(req));
    let e_a = k.member("A").member_epoch;
    let leave = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb("A"))
        .with_instance_id(Some(sb("ia")))
        .with_member_epoch(-2);
    k.send(1, GroupRequest::ConsumerHeartbeat(leave));
    k.join("A2", Some("ia"), &["orders"]);
    assert!(e > 0 && e_a > 0);
    assert!(!k.c.consumer_groups["g"].members.contains_key("A"));
    let jobs_before = k.jobs.len();
    k.run_assignments();
    let g = &k.c.consumer_groups["g"];
    // Nothing for B (it left: its target stays removed), D keeps its old target (its new
    // subscription brings a new one), A's slot's new target went to A2, C has one.
    assert!(!g.target.contains_key("B"));
    assert!(!g.target.contains_key("A"));
    assert_eq!(g.target["D"], before["D"]);
    assert!(g.target.contains_key("C") && g.target.contains_key("A2"));
    assert!(jobs_before >= 1);
    // The next assignment, over the group as it is now, settles everything.
    k.advance(1);
    settle(&mut k);
    let g = &k.c.consumer_groups["g"];
    assert_eq!(g.assignment_epoch, g.group_epoch);
    let other = k.topic_id("other");
    assert_eq!(g.target["D"].count(), 4);
    assert!(g.target["D"].get(&other).is_some());
    k.assert_replay_matches();
}

#[test]
fn a_result_for_a_deleted_group_is_dropped() {
    let mut k = K::new(offload_cfg(0));
    k.join("A", None, &["orders"]);
    assert_eq!(k.jobs.len(), 1);
    k.hb("A", -1, None);
    match k.send(1, GroupRequest::Delete { group: "g".into() }) {
        GroupResponse::Delete(code) => assert_eq!(code, 0),
        other => panic!("{other:?}"),
    }
    assert_eq!(k.c.assignments_running(), 0);
    // A new group of the same name: the old result must not land in it.
    k.join("Z", None, &["orders"]);
    let old = k.jobs.remove(0);
    let mut out = Output::default();
    k.c.assignment_done(old.run(), k.now, &mut out);
    assert!(out.records.is_empty());
    k.run_assignments();
    assert_eq!(k.c.consumer_groups["g"].target["Z"].count(), 6);
    assert!(!k.c.consumer_groups["g"].target.contains_key("A"));
    k.assert_replay_matches();
}

/// The intervals one rebalance hands out, step by step: the group's (5 s) to a member with
/// nothing left to do, `group.consumer.reconciliation.heartbeat.interval.ms` (100 ms) to one
/// with partitions to revoke or to receive, and the time until the next target can be computed
/// to a stable member while the assignment interval since the last one runs.
#[test]
fn a_member_with_a_step_left_is_told_to_come_back_sooner() {
    let mut k = K::new(K::cfg());
    let t = k.topic_id("orders");
    let owned = |k: &K, m: &str| -> Parts {
        vec![(
            t,
            k.member(m)
                .assigned
                .iter()
                .flat_map(|(_, ps)| ps.iter().copied())
                .collect(),
        )]
    };
    let a = k.join("A", None, &["orders"]);
    assert_eq!((a.member_epoch, a.heartbeat_interval_ms), (2, 1000));
    k.advance(400);
    let a = k.hb("A", 2, Some(owned(&k, "A")));
    assert_eq!(
        a.heartbeat_interval_ms, 600,
        "back when the next target can be computed"
    );
    // B joins inside the assignment interval: nothing for it yet, and the same deadline.
    k.advance(200);
    let b = k.join("B", None, &["orders"]);
    assert_eq!((b.member_epoch, b.heartbeat_interval_ms), (2, 400));
    // At the deadline A's heartbeat computes the target: A must revoke 3,4,5, B waits for them.
    k.advance(400);
    let a = k.hb("A", 2, Some(owned(&k, "A")));
    assert_eq!(k.member("A").state, MemberState::UnrevokedPartitions);
    assert_eq!(a.heartbeat_interval_ms, 100, "partitions to revoke");
    let b = k.hb("B", 2, Some(vec![]));
    assert_eq!(k.member("B").state, MemberState::UnreleasedPartitions);
    assert_eq!(b.heartbeat_interval_ms, 100, "partitions still owned by A");
    // A acknowledges: stable, back when a next target could come (1 s after this one).
    let a = k.hb("A", 2, Some(vec![(t, vec![0, 1, 2])]));
    assert_eq!((a.member_epoch, a.heartbeat_interval_ms), (3, 1000));
    // B's next heartbeat, one short interval later, has them.
    k.advance(100);
    let b = k.hb("B", 3, Some(vec![]));
    assert_eq!(parts(&b), Some(vec![3, 4, 5]));
    assert_eq!(b.heartbeat_interval_ms, 900);
    // Once the assignment interval has passed, stable members get the group's interval.
    k.advance(1000);
    assert_eq!(
        k.hb("B", 3, Some(owned(&k, "B"))).heartbeat_interval_ms,
        5000
    );
    assert_eq!(
        k.hb("A", 3, Some(owned(&k, "A"))).heartbeat_interval_ms,
        5000
    );
    // A member joining the stable group long after: its target is computed at once, but A and
    // B hold everything, so it waits (100 ms) while they revoke (100 ms each).
    k.advance(10_000);
    let c = k.join("C", None, &["orders"]);
    assert_eq!(k.member("C").state, MemberState::UnreleasedPartitions);
    assert_eq!((parts(&c), c.heartbeat_interval_ms), (Some(vec![]), 100));
    for m in ["A", "B"] {
        let e = k.member(m).member_epoch;
        let r = k.hb(m, e, Some(owned(&k, m)));
        assert_eq!(r.heartbeat_interval_ms, 100, "{m} revokes");
        let e = k.member(m).member_epoch;
        let keep = k.c.consumer_groups["g"].members[m].assigned.clone();
        let keep: Parts = keep
            .iter()
            .map(|(t, ps)| (*t, ps.iter().copied().collect()))
            .collect();
        let r = k.hb(m, e, Some(keep));
        assert_eq!(k.member(m).state, MemberState::Stable);
        assert_eq!(
            r.heartbeat_interval_ms, 1000,
            "{m} done; a new target came just now"
        );
    }
    k.advance(100);
    let c = k.hb("C", k.member("C").member_epoch, None);
    assert_eq!(parts(&c).map(|p| p.len()), Some(2));
    assert_eq!(k.member("C").state, MemberState::Stable);
    k.assert_replay_matches();
}

/// 0, or a value not below the group's heartbeat interval, turns the short interval off: every
/// response carries the group's interval, as Kafka's do. The short interval never exceeds a
/// group's own (shorter) `consumer.heartbeat.interval.ms`.
#[test]
fn the_short_interval_is_off_at_zero_and_never_above_the_groups() {
    for short in [0, 5000, 7000] {
        let cfg = GroupConfig {
            consumer_reconciliation_heartbeat_interval_ms: short,
            ..K::cfg()
        };
        let mut k = K::new(cfg);
        let t = k.topic_id("orders");
        let mut seen = BTreeSet::new();
        seen.insert(k.join("A", None, &["orders"]).heartbeat_interval_ms);
        seen.insert(
            k.hb("A", 2, Some(vec![(t, (0..6).collect())]))
                .heartbeat_interval_ms,
        );
        k.advance(1000);
        seen.insert(k.join("B", None, &["orders"]).heartbeat_interval_ms);
        seen.insert(
            k.hb("A", 2, Some(vec![(t, (0..6).collect())]))
                .heartbeat_interval_ms,
        );
        assert_eq!(k.member("A").state, MemberState::UnrevokedPartitions);
        seen.insert(k.hb("B", 3, Some(vec![])).heartbeat_interval_ms);
        assert_eq!(k.member("B").state, MemberState::UnreleasedPartitions);
        assert_eq!(seen, BTreeSet::from([5000]), "short = {short}");
    }
    // A group whose own interval (80 ms) is below the short one: 80 ms for everyone.
    let mut k = K::new(K::cfg());
    k.group_configs = Arc::new(
        [(
            "g".to_string(),
            GroupOverrides {
                heartbeat_interval_ms: Some(80),
                ..Default::default()
            },
        )]
        .into_iter()
        .collect(),
    );
    let t = k.topic_id("orders");
    assert_eq!(k.join("A", None, &["orders"]).heartbeat_interval_ms, 80);
    k.advance(1000);
    k.join("B", None, &["orders"]);
    let a = k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    assert_eq!(k.member("A").state, MemberState::UnrevokedPartitions);
    assert_eq!(a.heartbeat_interval_ms, 80);
}

/// The group's subscription hash is memoised per topics snapshot (`consumer::HashMemo`): after
/// every step — steady heartbeats, a topic nobody reads, a new subscription, a member leaving, a
/// regex resolving to a new topic — what the memo holds is what walking the members gives, and
/// the group epoch moves exactly when that hash or a subscription changed.
#[test]
fn the_subscription_hash_memo_never_goes_stale() {
    let mut k = K::new(K::cfg());
    let t = k.topic_id("orders");
    k.reg.create("audit", 2, Default::default()).unwrap();
    let check = |k: &K| {
        let g = &k.c.consumer_groups["g"];
        let snap = k.reg.snapshot();
        let fresh = consumer::metadata_hash(&g.subscribed_names(), &snap);
        if let Some((at, memo)) = g.hash_memo.0 {
            if at == snap.id() {
                assert_eq!(memo, fresh, "memo for this snapshot is stale");
            }
        }
        assert_eq!(g.metadata_hash, fresh, "record 3 carries the current hash");
    };
    let epoch = |k: &K| k.c.consumer_groups["g"].group_epoch;
    k.join("A", None, &["orders"]);
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    check(&k);
    let e = epoch(&k);
    for _ in 0..3 {
        k.advance(100);
        k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
        check(&k);
    }
    assert_eq!(epoch(&k), e, "steady heartbeats change nothing");
    // A topic nobody subscribes to: a new snapshot, the same hash, no new epoch.
    k.reg.create("unread", 4, Default::default()).unwrap();
    k.hb("A", 2, Some(vec![(t, (0..6).collect())]));
    check(&k);
    assert_eq!(epoch(&k), e);
    // B subscribes to a second topic: the group's names and hash change.
    k.join("B", None, &["orders", "audit"]);
    check(&k);
    assert_eq!(epoch(&k), e + 1);
    k.advance(100);
    k.hb("A", 2, None);
    check(&k);
    // B leaves: "audit" is no longer subscribed.
    let leave = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb("B"))
        .with_member_epoch(-1);
    k.send(1, GroupRequest::ConsumerHeartbeat(leave));
    check(&k);
    assert_eq!(epoch(&k), e + 2);
    k.hb("A", 2, None);
    check(&k);
    // A regex member: its resolution (record 16) adds topics as they appear.
    let re = regex_join_req("R", "aud.*");
    k.send(1, GroupRequest::ConsumerHeartbeat(re));
    check(&k);
    let before = epoch(&k);
    k.reg.create("audit-2", 1, Default::default()).unwrap();
    k.advance(100);
    k.hb("A", 2, None);
    check(&k);
    assert_eq!(
        epoch(&k),
        before,
        "A's heartbeat does not resolve R's regex"
    );
    let r = k.member("R").member_epoch;
    let re = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb("R"))
        .with_member_epoch(r);
    k.send(1, GroupRequest::ConsumerHeartbeat(re));
    check(&k);
    k.assert_replay_matches();
}

/// A member's first heartbeat (epoch 0) to group "g", subscribing by regular expression.
fn regex_join_req(member: &str, regex: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_regex(Some(sb(regex)))
        .with_topic_partitions(Some(vec![]))
}
