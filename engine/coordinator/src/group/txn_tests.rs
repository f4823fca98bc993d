//! TxnOffsetCommit and transaction markers (`txn`): pending offsets are invisible until their
//! marker, COMMIT applies them unless a later committed offset won, ABORT drops them, and the
//! log (transactional batches and control records) and snapshots rebuild the same state.

use super::*;
use crate::topics::MemoryTopics;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::protocol::StrBytes;

/// One log record as a shell writes it: its batch's attributes and producer, key, value.
type LogRecord = (i16, i64, i16, Vec<u8>, Option<Vec<u8>>);

struct T {
    c: Coordinator,
    now: i64,
    next: ReqId,
    log: Vec<LogRecord>,
    topics: Arc<TopicsSnapshot>,
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl T {
    fn new() -> Self {
        let reg = MemoryTopics::new(50);
        reg.create("orders", 4, Default::default()).unwrap();
        let mut c = Coordinator::new(0, GroupConfig::default());
        c.start(1_000);
        T {
            c,
            now: 1_000,
            next: 1,
            log: Vec::new(),
            topics: reg.snapshot(),
        }
    }

    fn send(&mut self, v: i16, req: GroupRequest) -> GroupResponse {
        let id = self.next;
        self.next += 1;
        let ctx = RequestContext {
            api_version: v,
            topics: self.topics.clone(),
            ..Default::default()
        };
        let mut out = Output::default();
        self.c.handle(id, &ctx, req, self.now, &mut out);
        let (attrs, pid, epoch) = out.txn.map_or((0, -1, -1), |t| t.batch_fields());
        if let Some(txn::TxnWrite::Marker {
            commit,
            coordinator_epoch,
            ..
        }) = out.txn
        {
            assert!(out.records.is_empty(), "a marker is a batch of its own");
            let (k, v) = txn::encode_marker(commit, coordinator_epoch);
            self.log.push((attrs, pid, epoch, k, Some(v)));
        }
        for r in &out.records {
            self.log.push((
                attrs,
                pid,
                epoch,
                r.encode_key().unwrap(),
                r.encode_value().unwrap(),
            ));
        }
        let (rid, resp) = out.replies.pop().expect("one reply");
        assert_eq!(rid, id);
        resp
    }

    fn txn_commit(
        &mut self,
        pid: i64,
        group: &str,
        generation: i32,
        member: &str,
        parts: &[(i32, i64)],
    ) -> Vec<i16> {
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(sb("tx")))
            .with_group_id(GroupId(sb(group)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(0)
            .with_generation_id(generation)
            .with_member_id(sb(member))
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(sb("orders")))
                .with_partitions(
                    parts
                        .iter()
                        .map(|(p, o)| {
                            TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(*p)
                                .with_committed_offset(*o)
                        })
                        .collect(),
                )]);
        let guard = self.begin(pid);
        match self.send(5, GroupRequest::TxnOffsetCommit(req, guard)) {
            GroupResponse::TxnOffsetCommit(r) => r.topics[0]
                .partitions
                .iter()
                .map(|p| p.error_code)
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    /// Begin a verification for `pid`: its guard.
    fn begin(&mut self, pid: i64) -> txn::TxnGuard {
        match self.send(5, GroupRequest::TxnGuard { producer_id: pid }) {
            GroupResponse::TxnGuard(Ok(g)) => g,
            other => panic!("{other:?}"),
        }
    }

    fn plain_commit(&mut self, group: &str, p: i32, o: i64) {
        use kafka_protocol::messages::offset_commit_request as oc;
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![oc::OffsetCommitRequestTopic::default()
                .with_name(TopicName(sb("orders")))
                .with_partitions(vec![oc::OffsetCommitRequestPartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(o)])]);
        match self.send(8, GroupRequest::OffsetCommit(req)) {
            GroupResponse::OffsetCommit(r) => assert_eq!(r.topics[0].partitions[0].error_code, 0),
            other => panic!("{other:?}"),
        }
    }

    fn marker(&mut self, pid: i64, commit: bool) -> i16 {
        match self.send(
            0,
            GroupRequest::TxnMarker {
                producer_id: pid,
                producer_epoch: 0,
                commit,
                coordinator_epoch: 3,
            },
        ) {
            GroupResponse::TxnMarker(code) => code,
            other => panic!("{other:?}"),
        }
    }

    /// (partition, offset, error) of `group`'s partitions 0..4.
    fn fetch(&mut self, group: &str, require_stable: bool) -> Vec<(i32, i64, i16)> {
        match self.send(
            8,
            GroupRequest::OffsetFetch {
                group: group.into(),
                topics: Some(vec![("orders".into(), vec![0, 1, 2, 3])]),
                member_id: None,
                member_epoch: -1,
                require_stable,
            },
        ) {
            GroupResponse::OffsetFetch(f) => f
                .partitions
                .into_iter()
                .map(|(_, p, o, _, _, e)| (p, o, e))
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    /// A fresh coordinator rebuilt from the log's bytes, as a partition load does.
    fn replayed(&self) -> Coordinator {
        let mut c = Coordinator::new(0, GroupConfig::default());
        for (attrs, pid, epoch, k, v) in &self.log {
            assert!(c.replay_in_batch(*attrs, *pid, *epoch, Some(k), v.as_deref()));
        }
        c
    }
}

fn same_state(a: &Coordinator, b: &Coordinator) {
    assert_eq!(a.offsets.all(), b.offsets.all(), "committed offsets");
    assert_eq!(a.txn.by_producer, b.txn.by_producer, "pending offsets");
    assert_eq!(a.txn.by_group, b.txn.by_group, "open transactions");
}

const UNSTABLE: i16 = 88;

#[test]
fn pending_offsets_are_invisible_until_commit_and_require_stable_says_unstable() {
    let mut t = T::new();
    t.plain_commit("g", 0, 5);
    assert_eq!(t.txn_commit(7, "g", -1, "", &[(0, 10), (1, 20)]), [0, 0]);
    // Without require_stable: the committed (stable) values.
    assert_eq!(
        t.fetch("g", false),
        [(0, 5, 0), (1, -1, 0), (2, -1, 0), (3, -1, 0)]
    );
    // With it: partitions with a pending offset are UNSTABLE_OFFSET_COMMIT, per partition.
    assert_eq!(
        t.fetch("g", true),
        [(0, -1, UNSTABLE), (1, -1, UNSTABLE), (2, -1, 0), (3, -1, 0)]
    );
    // A restart in the middle of the transaction keeps the offsets pending.
    same_state(&t.c, &t.replayed());
    assert!(t.replayed().txn.has_pending("g", "orders", 0));
    assert_eq!(t.marker(7, true), 0);
    assert_eq!(
        t.fetch("g", true),
        [(0, 10, 0), (1, 20, 0), (2, -1, 0), (3, -1, 0)]
    );
    assert!(t.c.txn.is_empty());
    same_state(&t.c, &t.replayed());
}

#[test]
fn abort_drops_pending_offsets_and_merges_keep_the_last() {
    let mut t = T::new();
    t.plain_commit("g", 0, 5);
    t.txn_commit(7, "g", -1, "", &[(0, 10)]);
    t.txn_commit(7, "g", -1, "", &[(0, 11)]);
    assert_eq!(
        t.c.txn.pending(7, "g", "orders", 0).map(|p| p.value.offset),
        Some(11),
        "several commits of one producer merge, the last one wins"
    );
    assert_eq!(t.marker(7, false), 0);
    assert_eq!(t.fetch("g", true)[0], (0, 5, 0));
    assert!(t.c.txn.is_empty() && !t.c.txn.has_open("g"));
    same_state(&t.c, &t.replayed());
    // The next transaction of the producer commits on its own.
    t.txn_commit(7, "g", -1, "", &[(0, 12)]);
    t.marker(7, true);
    assert_eq!(t.fetch("g", true)[0], (0, 12, 0));
    same_state(&t.c, &t.replayed());
}

#[test]
fn a_committed_offset_written_after_the_pending_one_wins_at_commit() {
    // `replayEndTransactionMarker`: the pending offset is materialised only if its record is
    // after the committed offset's.
    let mut t = T::new();
    t.txn_commit(7, "g", -1, "", &[(0, 10), (1, 10)]);
    t.plain_commit("g", 0, 30);
    t.marker(7, true);
    assert_eq!(t.fetch("g", false)[..2], [(0, 30, 0), (1, 10, 0)]);
    same_state(&t.c, &t.replayed());
    // Two producers: B commits first with a later record; A's earlier record then loses.
    let mut t = T::new();
    t.txn_commit(1, "g", -1, "", &[(0, 100)]);
    t.txn_commit(2, "g", -1, "", &[(0, 200)]);
    t.marker(2, true);
    // Mid-way: a reload gives the same stale flags.
    same_state(&t.c, &t.replayed());
    t.marker(1, true);
    assert_eq!(t.fetch("g", false)[0], (0, 200, 0));
    // ...and the other way round, A's later record wins over B's earlier one.
    let mut t = T::new();
    t.txn_commit(2, "g", -1, "", &[(0, 200)]);
    t.txn_commit(1, "g", -1, "", &[(0, 100)]);
    t.marker(2, true);
    t.marker(1, true);
    assert_eq!(t.fetch("g", false)[0], (0, 100, 0));
    same_state(&t.c, &t.replayed());
}

#[test]
fn a_marker_for_a_producer_with_nothing_pending_is_harmless() {
    let mut t = T::new();
    t.plain_commit("g", 0, 5);
    let before = t.c.offsets.all();
    assert_eq!(t.marker(99, true), 0);
    assert_eq!(t.marker(99, false), 0);
    assert_eq!(t.c.offsets.all(), before);
    assert_eq!(
        t.log.len(),
        3,
        "the markers are still written, as Kafka writes them"
    );
    same_state(&t.c, &t.replayed());
}

#[test]
fn generation_checks_follow_validate_transactional_offset_commit() {
    let mut t = T::new();
    // An unknown group with a generation: ILLEGAL_GENERATION at every version.
    assert_eq!(t.txn_commit(7, "nope", 3, "m", &[(0, 1)]), [22]);
    // An empty simple group takes commits without member and generation.
    t.plain_commit("simple", 0, 1);
    assert_eq!(t.txn_commit(7, "simple", -1, "", &[(0, 2)]), [0]);
    // A member id of an empty classic group names an unknown member.
    assert_eq!(t.txn_commit(7, "simple", 1, "who", &[(0, 2)]), [25]);
    // An unknown partition, per partition.
    assert_eq!(t.txn_commit(7, "simple", -1, "", &[(9, 2)]), [3]);
    // A fenced (older) producer epoch.
    let req = TxnOffsetCommitRequest::default()
        .with_group_id(GroupId(sb("simple")))
        .with_producer_id(ProducerId(7))
        .with_producer_epoch(-1)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(sb("orders")))
            .with_partitions(vec![
                TxnOffsetCommitRequestPartition::default().with_partition_index(1)
            ])]);
    let GroupResponse::TxnOffsetCommit(r) =
        t.send(5, GroupRequest::TxnOffsetCommit(req, txn::TxnGuard::NONE))
    else {
        panic!()
    };
    assert_eq!(r.topics[0].partitions[0].error_code, 47);
}

#[test]
fn expiry_and_deletion_respect_open_transactions() {
    let mut t = T::new();
    t.plain_commit("g", 0, 5);
    t.txn_commit(7, "g", -1, "", &[(0, 10), (1, 10)]);
    // Long past retention: the offset with a pending one on its partition stays, and so does
    // the group (it has an open transaction).
    t.now += t.c.config.offsets_retention_ms + t.c.config.offsets_retention_check_interval_ms;
    let mut out = Output::default();
    t.c.tick(t.now, &mut out);
    assert!(out.records.is_empty(), "{:?}", out.records);
    assert!(t.c.groups.contains_key("g"));
    // DeleteGroups tombstones the committed offsets and the pending-only partitions too.
    let GroupResponse::Delete(code) = t.send(0, GroupRequest::Delete { group: "g".into() }) else {
        panic!()
    };
    assert_eq!(code, 0);
    assert!(!t.c.txn.has_pending("g", "orders", 0));
    assert!(!t.c.txn.has_pending("g", "orders", 1));
    same_state(&t.c, &t.replayed());
    // A commit marker afterwards resurrects nothing.
    t.marker(7, true);
    assert_eq!(t.fetch("g", false)[..2], [(0, -1, 0), (1, -1, 0)]);
    same_state(&t.c, &t.replayed());
}

#[test]
fn a_snapshot_keeps_pending_offsets_and_their_stale_flags() {
    let mut t = T::new();
    t.plain_commit("g", 0, 5);
    t.txn_commit(1, "g", -1, "", &[(0, 10)]);
    t.txn_commit(2, "g", -1, "", &[(0, 20), (1, 20)]);
    t.plain_commit("g", 1, 30); // makes producer 2's partition 1 stale
    let mut b = crate::snapshot_build::SnapshotBuild::new(t.log.len() as u64 - 1);
    while !b.step(&t.c, 1).unwrap() {}
    let mut loaded = Coordinator::new(0, GroupConfig::default());
    for r in b.into_records() {
        assert!(loaded.replay_bytes(&r.key, Some(&r.value)));
    }
    same_state(&t.c, &loaded);
    // The loaded state ends the transactions as the live one does.
    let mut live = t.c.clone();
    for c in [&mut live, &mut loaded] {
        c.replay_marker(1, true);
        c.replay_marker(2, true);
    }
    same_state(&live, &loaded);
    assert_eq!(
        live.offsets.get("g", "orders", 1).map(|v| v.offset),
        Some(30)
    );
    assert_eq!(
        live.offsets.get("g", "orders", 0).map(|v| v.offset),
        Some(20)
    );
}

/// The write of a TxnOffsetCommit with the guard `g` (the commit helper begins its own).
fn guarded_write(t: &mut T, pid: i64, offset: i64, g: txn::TxnGuard) -> i16 {
    let req = TxnOffsetCommitRequest::default()
        .with_group_id(GroupId(sb("simple")))
        .with_producer_id(ProducerId(pid))
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(sb("orders")))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    match t.send(5, GroupRequest::TxnOffsetCommit(req, g)) {
        GroupResponse::TxnOffsetCommit(r) => r.topics[0].partitions[0].error_code,
        other => panic!("{other:?}"),
    }
}

/// The "ABA" race the guard closes (Kafka's `VerificationGuard`): a write verified before the
/// transaction's ABORT marker that lands after it is refused, with or without an open
/// transaction when the verification began.
#[test]
fn a_write_verified_before_an_abort_marker_is_refused_after_it() {
    let invalid_txn_state = ResponseError::InvalidTxnState.code();
    let mut t = T::new();
    // Fresh guard → ABORT marker → write: refused, nothing pending.
    let g = t.begin(7);
    assert_eq!(t.marker(7, false), 0);
    assert_eq!(guarded_write(&mut t, 7, 3, g), invalid_txn_state);
    assert!(t.c.txn.pending(7, "simple", "orders", 0).is_none());
    assert_eq!(t.c.txn.guards_len(), 0, "the marker dropped the guard");
    // Fresh guard → write: accepted, and the guard is consumed.
    let g = t.begin(7);
    assert_eq!(t.c.txn.guards_len(), 1);
    assert_eq!(guarded_write(&mut t, 7, 4, g), 0);
    assert_eq!(t.c.txn.guards_len(), 0);
    assert!(t.c.txn.pending(7, "simple", "orders", 0).is_some());
    // A second write of the same transaction with the same guard (a concurrent request that
    // shared it) still lands.
    assert_eq!(guarded_write(&mut t, 7, 5, g), 0);
    // Ongoing transaction: the guard names it → ABORT marker → write refused, even once the
    // same producer id and epoch (transactions v1) opened another transaction here.
    let ongoing = t.begin(7);
    assert_eq!(ongoing, g, "the open transaction's guard");
    assert_eq!(t.marker(7, false), 0);
    assert_eq!(guarded_write(&mut t, 7, 6, ongoing), invalid_txn_state);
    assert!(t.c.txn.pending(7, "simple", "orders", 0).is_none());
    let next = t.begin(7);
    assert_eq!(guarded_write(&mut t, 7, 7, next), 0);
    assert_eq!(guarded_write(&mut t, 7, 8, ongoing), invalid_txn_state);
    assert_eq!(t.marker(7, true), 0);
    assert_eq!(t.fetch("simple", false)[0], (0, 7, 0));
    // No guard at all.
    assert_eq!(
        guarded_write(&mut t, 8, 1, txn::TxnGuard::NONE),
        invalid_txn_state
    );
}

/// Guards are bounded per partition; past the bound a verification is refused, retriably.
#[test]
fn guards_are_bounded() {
    let mut t = T::new();
    for pid in 0..txn::MAX_GUARDS as i64 {
        t.c.txn.begin_guard(pid).expect("room");
    }
    assert_eq!(
        t.c.txn.begin_guard(-5),
        Err(ResponseError::ConcurrentTransactions.code())
    );
    // A producer that holds one gets it again.
    assert!(t.c.txn.begin_guard(3).is_ok());
    assert_eq!(t.marker(3, false), 0);
    assert!(t.c.txn.begin_guard(-5).is_ok());
}
