//! Cost of the coordinator state machine itself (no sockets, no codec): applying one Heartbeat
//! and one 10-partition OffsetCommit to a stable group, and driving a 1,000-member classic group
//! through a full rebalance (a new member joins, all 1,000 rejoin, the leader assigns, everyone
//! syncs). Allocations per operation are printed from a counting allocator before the timed runs.
//!
//! Also the cost of resolving one subscription regex against 10,000 topics (the shape of Kafka's
//! `RegexResolutionBenchmark`): in full, as after a topic change, and from the cache every other
//! heartbeat of a regex member hits.
//!
//! `cargo bench -p ringleader-benches --bench coordinator`

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use engine::group::{
    Coordinator, GroupConfig, GroupRequest, GroupResponse, Output, RequestContext,
};
use engine::topics::TopicRegistry;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use ringleader_benches::counting_alloc::{self, CountingAlloc};
use std::hint::black_box;
use std::time::Duration;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const T0: i64 = 1_700_000_000_000;

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn subscription() -> Bytes {
    let sub = ConsumerProtocolSubscription::default().with_topics(vec![sb("orders")]);
    let mut b = BytesMut::new();
    b.extend_from_slice(&0i16.to_be_bytes());
    sub.encode(&mut b, 0).unwrap();
    b.freeze()
}

fn join(group: &str, member: &str) -> GroupRequest {
    GroupRequest::Join(
        JoinGroupRequest::default()
            .with_group_id(GroupId(sb(group)))
            .with_member_id(sb(member))
            .with_session_timeout_ms(45_000)
            .with_rebalance_timeout_ms(60_000)
            .with_protocol_type(sb("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(sb("range"))
                .with_metadata(subscription())]),
    )
}

struct Fixture {
    ctx: RequestContext,
    _dir: std::path::PathBuf,
}

fn fixture() -> Fixture {
    let dir = std::env::temp_dir().join(format!("rl-bench-coord-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let reg = TopicRegistry::open(&dir, 50).unwrap();
    reg.create("orders", 10, Default::default()).unwrap();
    let ctx = RequestContext {
        client_id: "bench".into(),
        client_host: "/127.0.0.1".into(),
        api_version: 3,
        topics: reg.snapshot(),
        group_configs: Default::default(),
        topic_filter: None,
    };
    Fixture { ctx, _dir: dir }
}

/// A Stable group of `n` members (v3 joins: no MEMBER_ID_REQUIRED round trip). Returns the
/// coordinator, the member ids (leader first) and the generation.
fn stable_group(f: &Fixture, n: usize) -> (Coordinator, Vec<String>, i32) {
    // A long initial delay lets every member join one phase.
    let cfg = GroupConfig {
        initial_rebalance_delay_ms: 3000,
        ..GroupConfig::default()
    };
    let mut c = Coordinator::new(0, cfg);
    let mut out = Output::default();
    let mut join_ids = Vec::new();
    for i in 0..n {
        let id = 1_000_000 + i as u64;
        c.handle(id, &f.ctx, join("g", ""), T0, &mut out);
        join_ids.push(id);
    }
    // The initial delay re-arms once because members kept arriving; the second expiry completes it.
    c.tick(T0 + 3000, &mut out);
    c.tick(T0 + 6000, &mut out);
    let mut members = Vec::new();
    let mut generation = 0;
    let mut leader = String::new();
    for (id, r) in out.replies.drain(..) {
        if let GroupResponse::Join(j) = r {
            assert_eq!(j.error_code, 0);
            generation = j.generation_id;
            leader = j.leader.to_string();
            members.push((id, j.member_id.to_string()));
        }
    }
    assert_eq!(members.len(), n);
    let ids: Vec<String> = {
        let mut v: Vec<String> = members.iter().map(|(_, m)| m.clone()).collect();
        v.sort_by_key(|m| m != &leader);
        v
    };
    sync_all(&mut c, f, &ids, generation, T0 + 6000);
    (c, ids, generation)
}

fn sync_all(c: &mut Coordinator, f: &Fixture, ids: &[String], generation: i32, now: i64) {
    let mut out = Output::default();
    for m in &ids[1..] {
        let req = SyncGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(m))
            .with_generation_id(generation);
        c.handle(2, &f.ctx, GroupRequest::Sync(req), now, &mut out);
    }
    let assignments = ids
        .iter()
        .map(|m| {
            SyncGroupRequestAssignment::default()
                .with_member_id(sb(m))
                .with_assignment(Bytes::from_static(b"a"))
        })
        .collect();
    let req = SyncGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb(&ids[0]))
        .with_generation_id(generation)
        .with_assignments(assignments);
    c.handle(3, &f.ctx, GroupRequest::Sync(req), now, &mut out);
    let ok = out
        .replies
        .iter()
        .filter(|(_, r)| matches!(r, GroupResponse::Sync(s) if s.error_code == 0))
        .count();
    assert_eq!(ok, ids.len(), "every member synced");
}

/// One full rebalance of an `n`-member stable group: a newcomer joins, everyone rejoins, the
/// leader assigns, everyone syncs.
fn rebalance(c: &mut Coordinator, f: &Fixture, ids: &[String], generation: i32) {
    let now = T0 + 10_000;
    let mut out = Output::default();
    c.handle(10, &f.ctx, join("g", ""), now, &mut out);
    for m in ids {
        c.handle(11, &f.ctx, join("g", m), now, &mut out);
    }
    let mut all: Vec<String> = ids.to_vec();
    let newcomer = out
        .replies
        .iter()
        .find_map(|(id, r)| match r {
            GroupResponse::Join(j) if *id == 10 => Some(j.member_id.to_string()),
            _ => None,
        })
        .expect("the join phase completed");
    all.push(newcomer);
    sync_all(c, f, &all, generation + 1, now);
}

fn benches(cr: &mut Criterion) {
    let f = fixture();
    let (stable, ids, generation) = stable_group(&f, 100);
    let hb = GroupRequest::Heartbeat(
        HeartbeatRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(&ids[7]))
            .with_generation_id(generation),
    );
    let commit = GroupRequest::OffsetCommit(
        OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(&ids[7]))
            .with_generation_id_or_member_epoch(generation)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(sb("orders")))
                .with_partitions(
                    (0..10)
                        .map(|p| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(1000 + p as i64)
                        })
                        .collect(),
                )]),
    );
    let mut c = stable.clone();
    let mut out = Output::default();
    let mut now = T0 + 7000;
    let (a, b) = counting_alloc::per_op(10_000, || {
        out.replies.clear();
        c.handle(1, &f.ctx, hb.clone(), now, &mut out);
    });
    println!("coordinator/heartbeat_apply: {a:.1} allocs/op, {b:.0} bytes/op (includes cloning the request)");
    let (a, b) = counting_alloc::per_op(10_000, || {
        out.replies.clear();
        out.records.clear();
        c.handle(1, &f.ctx, commit.clone(), now, &mut out);
    });
    println!("coordinator/offset_commit_10p_apply: {a:.1} allocs/op, {b:.0} bytes/op (includes cloning the request)");

    let mut g = cr.benchmark_group("coordinator");
    g.bench_function("heartbeat_apply", |bch| {
        bch.iter_batched(
            || hb.clone(),
            |req| {
                out.replies.clear();
                now += 1;
                c.handle(1, &f.ctx, req, now, &mut out);
                black_box(&out.replies);
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("offset_commit_10p_apply", |bch| {
        bch.iter_batched(
            || commit.clone(),
            |req| {
                out.replies.clear();
                out.records.clear();
                now += 1;
                c.handle(1, &f.ctx, req, now, &mut out);
                black_box(&out.records);
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();

    let (big, big_ids, big_gen) = stable_group(&f, 1000);
    let mut g = cr.benchmark_group("coordinator_rebalance");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("classic_1000_members_full_rebalance", |bch| {
        bch.iter_batched(
            || big.clone(),
            |mut c| rebalance(&mut c, &f, &big_ids, big_gen),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn regex_benches(cr: &mut Criterion) {
    use engine::group::regex_cache::RegexCache;
    use engine::topics::{Topic, TopicsSnapshot};
    use std::sync::Arc;
    // 10,000 topics over ten prefixes; the regex matches one prefix (1,000 topics).
    let topics = |extra: usize| {
        Arc::new(TopicsSnapshot::from_topics((0..10_000 + extra).map(|i| {
            Topic {
                name: format!(
                    "{}-events-{i}",
                    [
                        "orders", "payments", "users", "audit", "clicks", "views", "carts",
                        "stock", "mail", "logs"
                    ][i % 10]
                ),
                id: uuid::Uuid::from_u128(i as u128 + 1),
                partitions: 1,
                internal: false,
                configs: Default::default(),
                replication_factor: 1,
            }
        })))
    };
    let (a, b) = (topics(0), topics(1));
    let re = "orders-events-[0-9]+";
    let mut g = cr.benchmark_group("coordinator_regex");
    g.bench_function("resolve_1_regex_10k_topics_full", |bch| {
        let mut cache = RegexCache::default();
        let mut flip = false;
        bch.iter(|| {
            // Alternate snapshots: every call sees "new" topics and matches all of them.
            flip = !flip;
            black_box(cache.resolve(re, if flip { &a } else { &b }).unwrap());
        })
    });
    g.bench_function("resolve_1_regex_10k_topics_compile_and_full", |bch| {
        // What every heartbeat of a regex member paid before the cache: compile, then match.
        bch.iter(|| black_box(RegexCache::default().resolve(re, &a).unwrap()))
    });
    g.bench_function("resolve_1_regex_10k_topics_cached", |bch| {
        let mut cache = RegexCache::default();
        bch.iter(|| black_box(cache.resolve(re, &a).unwrap()))
    });
    g.finish();
}

criterion_group!(coordinator, benches, regex_benches);
criterion_main!(coordinator);
