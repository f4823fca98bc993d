//! KIP-848 server assignor and member memory (issue targets in docs/performance.md):
//! - uniform, full assignment: 10,000 members × 10 partitions each over 1,000 topics, and
//!   5,000 members × 50 partitions each (Kafka's JMH shapes: 4.3 ms and 7.5 ms);
//! - uniform, incremental: one member joins a 5,000-member group (Kafka: 4.7–6.7 ms);
//! - memory per idle consumer-protocol member at 100,000 members (bytes held by the
//!   coordinator, measured with a counting allocator).
//!
//! `cargo bench -p ringleader-benches --bench assignor`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use engine::group::assignor::{self, AssignMember, Assignment};
use ringleader_benches::counting_alloc::{self, CountingAlloc};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use uuid::Uuid;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn shape(
    members: usize,
    topics: usize,
    partitions_per_topic: i32,
) -> (Vec<AssignMember>, BTreeMap<Uuid, i32>) {
    let ids: Vec<Uuid> = (0..topics)
        .map(|i| Uuid::from_u128(i as u128 + 1))
        .collect();
    let all: BTreeSet<Uuid> = ids.iter().copied().collect();
    let ms = (0..members)
        .map(|i| AssignMember {
            member_id: format!("member-{i:06}"),
            instance_id: None,
            topics: all.clone(),
        })
        .collect();
    (ms, ids.iter().map(|t| (*t, partitions_per_topic)).collect())
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("uniform_assignor");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    // 10,000 members × 10 partitions each over 1,000 topics = 100,000 partitions.
    let (m1, p1) = shape(10_000, 1_000, 100);
    g.bench_function("full_10k_members_x10_over_1000_topics", |b| {
        b.iter(|| assignor::uniform(&m1, &p1, &BTreeMap::new()))
    });
    // 5,000 members × 50 partitions each = 250,000 partitions over 1,000 topics.
    let (m2, p2) = shape(5_000, 1_000, 250);
    g.bench_function("full_5k_members_x50", |b| {
        b.iter(|| assignor::uniform(&m2, &p2, &BTreeMap::new()))
    });
    // Incremental: one member joins a 5,000-member group that already has a target.
    let (m3, p3) = shape(5_000, 1_000, 50);
    let previous = assignor::uniform(&m3, &p3, &BTreeMap::new());
    let mut joined = m3.clone();
    joined.push(AssignMember {
        member_id: "member-new".into(),
        instance_id: None,
        topics: m3[0].topics.clone(),
    });
    let out = assignor::uniform(&joined, &p3, &previous);
    let moved: usize = m3
        .iter()
        .map(|m| {
            assignor::count(&previous[&m.member_id])
                - common(&previous[&m.member_id], &out[&m.member_id])
        })
        .sum();
    println!(
        "uniform_assignor/incremental: the newcomer got {} partitions; {moved} moved in all",
        assignor::count(&out["member-new"])
    );
    g.bench_function("incremental_one_joins_5k_members", |b| {
        b.iter_batched(
            || previous.clone(),
            |prev| assignor::uniform(&joined, &p3, &prev),
            BatchSize::LargeInput,
        )
    });
    g.finish();
    memory_per_member();
}

fn common(a: &Assignment, b: &Assignment) -> usize {
    a.iter()
        .map(|(t, ps)| b.get(t).map_or(0, |bs| ps.intersection(bs).count()))
        .sum()
}

/// Bytes the coordinator holds per idle member: 100,000 members in 100 groups, each member
/// subscribed to one topic and owning one partition, built through real heartbeats.
fn memory_per_member() {
    use engine::group::{Coordinator, GroupConfig, GroupRequest, Output, RequestContext};
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    let dir = std::env::temp_dir().join(format!("rl-bench-mem-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let reg = engine::topics::TopicRegistry::open(&dir, 50).unwrap();
    reg.create("t", 1000, Default::default()).unwrap();
    let ctx = RequestContext {
        client_id: "bench-client".into(),
        client_host: "/127.0.0.1".into(),
        api_version: 1,
        topics: reg.snapshot(),
        group_configs: Default::default(),
    };
    let (members, groups) = (100_000usize, 100usize);
    let (a0, b0) = counting_alloc::snapshot();
    let mut c = Coordinator::new(
        0,
        GroupConfig {
            consumer_assignment_interval_ms: 0,
            ..GroupConfig::default()
        },
    );
    let mut out = Output::default();
    for i in 0..members {
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(format!(
                "group-{}",
                i % groups
            ))))
            .with_member_id(StrBytes::from_string(format!("m{i:021}")))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("t"))]))
            .with_topic_partitions(Some(vec![]));
        c.handle(
            i as u64,
            &ctx,
            GroupRequest::ConsumerHeartbeat(req),
            1_000_000 + i as i64,
            &mut out,
        );
        out.records.clear();
        out.replies.clear();
    }
    let (a1, b1) = counting_alloc::snapshot();
    let members_held: usize = c.consumer_groups.values().map(|g| g.members.len()).sum();
    println!(
        "consumer_members/memory: {members_held} members in {groups} groups; {:.0} bytes allocated per member while building (upper bound on what is held: freed memory is not subtracted), {:.1} allocations per member",
        (b1 - b0) as f64 / members as f64,
        (a1 - a0) as f64 / members as f64
    );
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(assignor_benches, benches);
criterion_main!(assignor_benches);
