//! KIP-848 server assignors on the shapes of Kafka's own JMH benchmark, and memory per member.
//!
//! The shapes mirror `jmh-benchmarks/src/main/java/org/apache/kafka/jmh/assignor/
//! ServerSideAssignorBenchmark.java` (with `AssignorBenchmarkUtils.java`) in apache/kafka, so that
//! a figure here stands next to the same row of Kafka's `doAssignment`:
//! - `memberCount` ∈ {100, 500, 1000, 5000, 10000}, `partitionsToMemberRatio` ∈ {5, 10, 50},
//!   `topicCount` ∈ {10, 100, 1000}; every topic has `memberCount × ratio / topicCount`
//!   partitions; topics are `topic-<i>`, members `member<i>`;
//! - HOMOGENEOUS: every member subscribes to every topic; HETEROGENEOUS: members and topics are
//!   cut into `min(5, members)` buckets (`createHeterogeneousBucketedMembers`: ⌈topics/5⌉ topics
//!   and ⌈members/5⌉ members a bucket), a bucket's members subscribing to its topics;
//! - FULL: no previous assignment; INCREMENTAL: `memberCount − 1` members get a full assignment
//!   first, then `newMember` joins (subscribed to every topic, or to the topics of
//!   `member<memberCount − 2>` when heterogeneous) and the assignment is computed again;
//! - `isRackAware = false` (this broker has no racks).
//!
//! Kafka's figures for the same rows, where published: uniform homogeneous full 10,000 × 10 over
//! 1,000 topics 4.3 ms, 5,000 × 50 7.5 ms (apache/kafka PR 17133); incremental 5,000 × 5 over 10 to
//! 1,000 topics 4.7–6.7 ms (PR 20000). The JMH harness (branch h-jmh) runs Kafka's assignors on the
//! same shapes and machine.
//!
//! By default the rows of issue 16 run; `ASSIGNOR_SHAPES=all` runs Kafka's whole no-rack matrix
//! (5 × 3 × 3 sizes × 2 subscription types × 2 assignors × full/incremental).
//!
//! `cargo bench -p ringleader-benches --bench assignor`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use engine::group::assignor::{
    self, AssignSpec, Outcome, PackedAssignment, SpecBuilder, TopicTable,
};
use ringleader_benches::counting_alloc::{self, CountingAlloc};
use std::collections::BTreeMap;
use std::time::Duration;
use uuid::Uuid;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Uniform,
    Range,
}

#[derive(Debug, Clone, Copy)]
struct Shape {
    kind: Kind,
    heterogeneous: bool,
    incremental: bool,
    members: usize,
    ratio: usize,
    topics: usize,
}

impl Shape {
    fn name(&self) -> String {
        format!(
            "{}/{}/{}/{}_members_x{}_over_{}_topics",
            match self.kind {
                Kind::Uniform => "uniform",
                Kind::Range => "range",
            },
            if self.heterogeneous {
                "heterogeneous"
            } else {
                "homogeneous"
            },
            if self.incremental {
                "incremental"
            } else {
                "full"
            },
            self.members,
            self.ratio,
            self.topics
        )
    }
}

/// The group of a shape before the measured call: topics (id, partitions), and each member's id
/// with the topics (indexes) it subscribes to. For an incremental shape the last member is
/// `newMember`, and every other member's previous assignment is computed by the caller.
struct Group {
    topics: Vec<(Uuid, i32)>,
    members: Vec<(String, Vec<usize>)>,
}

fn group_of(s: &Shape) -> Group {
    let per_topic = (s.members * s.ratio / s.topics) as i32;
    // `new Uuid(0, i + 1)` as the latest benchmark does: stable ids, topic order = index order.
    let topics = (0..s.topics)
        .map(|i| (Uuid::from_u128(i as u128 + 1), per_topic))
        .collect();
    let existing = if s.incremental {
        s.members - 1
    } else {
        s.members
    };
    let all: Vec<usize> = (0..s.topics).collect();
    let mut members: Vec<(String, Vec<usize>)> = Vec::with_capacity(s.members);
    if s.heterogeneous {
        let buckets = 5.min(existing);
        let topics_per = s.topics.div_ceil(buckets);
        let members_per = existing.div_ceil(buckets);
        for b in 0..buckets {
            let ts: Vec<usize> = (b * topics_per..((b + 1) * topics_per).min(s.topics)).collect();
            for i in b * members_per..((b + 1) * members_per).min(existing) {
                members.push((format!("member{i}"), ts.clone()));
            }
        }
    } else {
        for i in 0..existing {
            members.push((format!("member{i}"), all.clone()));
        }
    }
    if s.incremental {
        let subscription = if s.heterogeneous {
            let last = format!("member{}", s.members - 2);
            members
                .iter()
                .find(|(id, _)| *id == last)
                .map(|(_, ts)| ts.clone())
                .expect("the last bucketed member")
        } else {
            all
        };
        members.push(("newMember".into(), subscription));
    }
    Group { topics, members }
}

fn shapes() -> Vec<Shape> {
    let all = std::env::var("ASSIGNOR_SHAPES").is_ok_and(|v| v == "all");
    let mut out = Vec::new();
    for kind in [Kind::Uniform, Kind::Range] {
        for heterogeneous in [false, true] {
            for incremental in [false, true] {
                let sizes: Vec<(usize, usize, usize)> = if all {
                    let mut v = Vec::new();
                    for m in [100, 500, 1000, 5000, 10000] {
                        for r in [5, 10, 50] {
                            for t in [10, 100, 1000] {
                                v.push((m, r, t));
                            }
                        }
                    }
                    v
                } else {
                    // Issue 16's rows: 10k × 10 and 5k × 50 over 1,000 topics, 1,000 members ×
                    // 1,000 topics × 50,000 partitions, and the incremental rows Kafka published.
                    let mut v = vec![(10_000, 10, 1000), (5000, 50, 1000), (1000, 50, 1000)];
                    if incremental && !heterogeneous && kind == Kind::Uniform {
                        v.push((5000, 5, 10));
                        v.push((5000, 5, 1000));
                    }
                    v
                };
                for (members, ratio, topics) in sizes {
                    out.push(Shape {
                        kind,
                        heterogeneous,
                        incremental,
                        members,
                        ratio,
                        topics,
                    });
                }
            }
        }
    }
    out
}

// ---- the assignor under test -------------------------------------------------------------

/// The assignor's input, prebuilt as Kafka's benchmark prebuilds its `GroupSpec`: topics
/// numbered, one interned subscription per bucket, previous targets as the coordinator stores
/// them (packed) reduced to integers.
fn run(kind: Kind, spec: &AssignSpec) -> Outcome {
    match kind {
        Kind::Uniform => assignor::uniform(spec),
        Kind::Range => assignor::range(spec),
    }
}

/// The spec of `g`'s members, with `previous` targets (packed, per member id) when given.
fn spec_of(
    g: &Group,
    members: &[(String, Vec<usize>)],
    previous: &BTreeMap<String, PackedAssignment>,
) -> AssignSpec {
    let mut b = SpecBuilder::new(TopicTable::new(g.topics.iter().copied()));
    let mut subs: BTreeMap<&[usize], u32> = BTreeMap::new();
    for (id, ts) in members {
        let sub = match subs.get(ts.as_slice()) {
            Some(s) => *s,
            None => {
                let numbers: Vec<u32> = ts
                    .iter()
                    .map(|t| b.topics().find(&g.topics[*t].0).expect("topic"))
                    .collect();
                let s = b.subscription(numbers);
                subs.insert(ts, s);
                s
            }
        };
        b.member(sub, None, previous.get(id).map(|p| p.iter()));
    }
    b.build()
}

/// The shape's input; for an incremental shape the previous targets are the full assignment
/// of every member but `newMember`.
fn input_of(s: &Shape) -> AssignSpec {
    let g = group_of(s);
    let mut previous = BTreeMap::new();
    if s.incremental {
        let before = &g.members[..g.members.len() - 1];
        let spec = spec_of(&g, before, &BTreeMap::new());
        let out = run(s.kind, &spec);
        for (i, (id, _)) in before.iter().enumerate() {
            previous.insert(
                id.clone(),
                PackedAssignment::from_globals(spec.topics(), out.target(&spec, i as u32)),
            );
        }
    }
    spec_of(&g, &g.members, &previous)
}

/// Partitions that moved: held before by a member that does not hold them now.
fn moved(spec: &AssignSpec, out: &Outcome) -> usize {
    out.changed()
        .map(|(m, now)| {
            spec.previous(m)
                .iter()
                .filter(|g| now.binary_search(g).is_err())
                .count()
        })
        .sum()
}

fn benches(c: &mut Criterion) {
    // `ASSIGNOR_ONESHOT=1`: time one run of each shape instead (for shapes too slow to sample).
    if std::env::var_os("ASSIGNOR_ONESHOT").is_some() {
        for s in shapes() {
            let input = input_of(&s);
            let t = std::time::Instant::now();
            std::hint::black_box(run(s.kind, &input));
            println!(
                "oneshot {}: {:.3} ms",
                s.name(),
                t.elapsed().as_secs_f64() * 1e3
            );
        }
        return;
    }
    let mut g = c.benchmark_group("assignor");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for s in shapes() {
        if !wanted(&format!("assignor/{}", s.name())) {
            continue;
        }
        let input = input_of(&s);
        if s.incremental {
            let out = run(s.kind, &input);
            let newcomer = input.members() as u32 - 1;
            println!(
                "{}: newMember got {} partitions; {} moved; {} members changed",
                s.name(),
                out.target(&input, newcomer).len(),
                moved(&input, &out),
                out.changed_count()
            );
        }
        g.bench_function(s.name(), |b| {
            b.iter_batched(|| (), |()| run(s.kind, &input), BatchSize::SmallInput)
        });
    }
    g.finish();
    end_to_end(c);
    if wanted("consumer_members/memory") {
        memory_per_member();
    }
}

// ---- end to end: the coordinator computes a new target -------------------------------------

const E2E_MEMBERS: usize = 10_000;
const E2E_TOPICS: usize = 1000;
const E2E_PARTITIONS: i32 = 100;
const E2E_EPOCH: i32 = 10;

fn e2e_topic(i: usize) -> String {
    format!("topic-{i}")
}

/// A coordinator holding one consumer group `g` of 10,000 members, every member subscribed to
/// the same 1,000 topics of 100 partitions (100,000 partitions, 10 a member), built by replaying
/// the records a broker would load: with `targets`, every member stable at epoch 10 with its
/// share as target and current assignment (member i: partitions 10·i .. 10·i + 9 in topic order);
/// without, members joined (epoch 11) and no target computed yet. `joined` adds `newMember`'s
/// metadata and bumps the group epoch, as its join heartbeat would have.
fn e2e_coordinator(
    targets: bool,
    joined: bool,
) -> (
    engine::group::Coordinator,
    std::sync::Arc<engine::topics::TopicsSnapshot>,
) {
    // The group's metadata hash (KIP-1101) as the coordinator computes it: with a wrong one
    // the first heartbeat would bump the group epoch and recompute the target.
    let (mut probe, topics) = e2e_build(targets, joined, 0);
    let _ = e2e_heartbeat(
        &mut probe,
        &topics,
        e2e_member_heartbeat("member00000", E2E_EPOCH),
        E2E_NOW,
    );
    let hash = probe.consumer_groups["g"].metadata_hash;
    drop(probe);
    let (mut c, topics) = e2e_build(targets, joined, hash);
    // A heartbeat within the assignment interval, as members send all the time: the group's
    // derived state (its metadata hash for this epoch) is as a running broker has it.
    let out = e2e_heartbeat(
        &mut c,
        &topics,
        e2e_member_heartbeat("member00001", E2E_EPOCH),
        E2E_ASSIGNED_AT + 500,
    );
    assert!(
        out.jobs.is_empty() && out.records.is_empty(),
        "a quiet heartbeat"
    );
    (c, topics)
}

/// When the group's last target was computed, and when the measured heartbeat comes: the
/// assignment interval (1 s) has passed.
const E2E_ASSIGNED_AT: i64 = 8_000;
const E2E_NOW: i64 = 10_000;

fn e2e_build(
    targets: bool,
    joined: bool,
    metadata_hash: i64,
) -> (
    engine::group::Coordinator,
    std::sync::Arc<engine::topics::TopicsSnapshot>,
) {
    use engine::group::{Coordinator, GroupConfig};
    use engine::topics::{Topic, TopicsSnapshot};
    use wire::records::*;
    let topics = std::sync::Arc::new(TopicsSnapshot::from_topics((0..E2E_TOPICS).map(|i| {
        Topic {
            name: e2e_topic(i),
            id: Uuid::from_u128(i as u128 + 1),
            partitions: E2E_PARTITIONS,
            internal: false,
            configs: BTreeMap::new(),
            replication_factor: 1,
        }
    })));
    let mut c = Coordinator::new(
        0,
        GroupConfig {
            consumer_assignment_interval_ms: 1000,
            ..GroupConfig::default()
        },
    );
    let group = "g".to_string();
    let mut names: Vec<String> = (0..E2E_TOPICS).map(e2e_topic).collect();
    names.sort();
    let mut put = |key: RecordKey, value: RecordValue| {
        c.replay(&Record {
            key,
            value: Some(value),
        })
    };
    let group_epoch = if targets { E2E_EPOCH } else { E2E_EPOCH + 1 };
    put(
        RecordKey::ConsumerGroupMetadata {
            group: group.clone(),
        },
        RecordValue::ConsumerGroupMetadata(ConsumerGroupMetadataValue {
            epoch: group_epoch + i32::from(joined),
            metadata_hash,
        }),
    );
    let metadata = |names: &[String]| ConsumerGroupMemberMetadataValue {
        instance_id: None,
        rack_id: None,
        client_id: "bench".into(),
        client_host: "/127.0.0.1".into(),
        subscribed_topic_names: names.to_vec(),
        subscribed_topic_regex: None,
        rebalance_timeout_ms: 30_000,
        server_assignor: None,
        classic_member_metadata: None,
    };
    let per_member = E2E_TOPICS * E2E_PARTITIONS as usize / E2E_MEMBERS;
    for i in 0..E2E_MEMBERS {
        let member_id = format!("member{i:05}");
        put(
            RecordKey::ConsumerGroupMemberMetadata {
                group: group.clone(),
                member_id: member_id.clone(),
            },
            RecordValue::ConsumerGroupMemberMetadata(metadata(&names)),
        );
        // Member i's share: `per_member` partitions from global index per_member·i, in topic
        // (id) order.
        let mut share: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
        for k in i * per_member..(i + 1) * per_member {
            let (t, p) = (
                k / E2E_PARTITIONS as usize,
                (k % E2E_PARTITIONS as usize) as i32,
            );
            share
                .entry(Uuid::from_u128(t as u128 + 1))
                .or_default()
                .push(p);
        }
        if targets {
            put(
                RecordKey::ConsumerGroupTargetAssignmentMember {
                    group: group.clone(),
                    member_id: member_id.clone(),
                },
                RecordValue::ConsumerGroupTargetAssignmentMember(
                    ConsumerGroupTargetAssignmentMemberValue {
                        topic_partitions: share
                            .iter()
                            .map(|(t, ps)| TargetTopicPartitions {
                                topic_id: *t,
                                partitions: ps.clone(),
                            })
                            .collect(),
                    },
                ),
            );
        }
        put(
            RecordKey::ConsumerGroupCurrentMemberAssignment {
                group: group.clone(),
                member_id,
            },
            RecordValue::ConsumerGroupCurrentMemberAssignment(
                ConsumerGroupCurrentMemberAssignmentValue {
                    member_epoch: E2E_EPOCH,
                    previous_member_epoch: E2E_EPOCH - 1,
                    state: 0,
                    assigned_partitions: if targets {
                        share
                            .iter()
                            .map(|(t, ps)| CurrentTopicPartitions {
                                topic_id: *t,
                                partitions: ps.clone(),
                                assignment_epochs: Some(vec![E2E_EPOCH; ps.len()]),
                            })
                            .collect()
                    } else {
                        Vec::new()
                    },
                    partitions_pending_revocation: Vec::new(),
                },
            ),
        );
    }
    if joined {
        put(
            RecordKey::ConsumerGroupMemberMetadata {
                group: group.clone(),
                member_id: "newMember".into(),
            },
            RecordValue::ConsumerGroupMemberMetadata(metadata(&names)),
        );
    }
    put(
        RecordKey::ConsumerGroupTargetAssignmentMetadata { group },
        RecordValue::ConsumerGroupTargetAssignmentMetadata(
            ConsumerGroupTargetAssignmentMetadataValue {
                assignment_epoch: E2E_EPOCH,
                assignment_timestamp: E2E_ASSIGNED_AT,
            },
        ),
    );
    (c, topics)
}

fn e2e_heartbeat(
    c: &mut engine::group::Coordinator,
    topics: &std::sync::Arc<engine::topics::TopicsSnapshot>,
    req: kafka_protocol::messages::ConsumerGroupHeartbeatRequest,
    now: i64,
) -> engine::group::Output {
    use engine::group::{GroupRequest, Output, RequestContext};
    let ctx = RequestContext {
        client_id: "bench".into(),
        client_host: "/127.0.0.1".into(),
        api_version: 1,
        topics: topics.clone(),
        group_configs: Default::default(),
        topic_filter: None,
    };
    let mut out = Output::default();
    c.handle(1, &ctx, GroupRequest::ConsumerHeartbeat(req), now, &mut out);
    out
}

fn e2e_member_heartbeat(
    member: &str,
    epoch: i32,
) -> kafka_protocol::messages::ConsumerGroupHeartbeatRequest {
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_member_id(StrBytes::from_string(member.into()))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
}

fn e2e_join() -> kafka_protocol::messages::ConsumerGroupHeartbeatRequest {
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    e2e_member_heartbeat("newMember", 0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(
            (0..E2E_TOPICS)
                .map(|i| TopicName(StrBytes::from_string(e2e_topic(i))))
                .collect(),
        ))
        .with_topic_partitions(Some(vec![]))
}

/// Which part of a target computation a row times.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Part {
    /// The heartbeat and, when the assignment was offloaded, applying its result: what the
    /// shard's thread spends.
    OnShard,
    /// All of it, the offloaded assignor included, as if it ran inline.
    Total,
}

/// One heartbeat on a clone of `base`, then any assignment it offloaded run and applied, as
/// the broker's shell does; the time of `part`. Prints the breakdown of the first run.
fn e2e_time(
    base: &engine::group::Coordinator,
    topics: &std::sync::Arc<engine::topics::TopicsSnapshot>,
    req: &kafka_protocol::messages::ConsumerGroupHeartbeatRequest,
    part: Part,
    iters: u64,
    report: Option<&str>,
) -> Duration {
    let mut total = Duration::ZERO;
    for i in 0..iters {
        let mut c = base.clone();
        let t = std::time::Instant::now();
        let mut out = e2e_heartbeat(&mut c, topics, req.clone(), E2E_NOW);
        let heartbeat = t.elapsed();
        let (mut run, mut apply, mut changed) = (Duration::ZERO, Duration::ZERO, 0);
        for job in std::mem::take(&mut out.jobs) {
            let t = std::time::Instant::now();
            let done = job.run();
            run += t.elapsed();
            changed += done.changed();
            let t = std::time::Instant::now();
            c.assignment_done(done, E2E_NOW, &mut out);
            apply += t.elapsed();
        }
        if i == 0 {
            if let Some(name) = report {
                println!(
                    "{name}: heartbeat {:.3} ms, offloaded assignor {:.3} ms, applying it {:.3} ms; {} members changed, {} records",
                    heartbeat.as_secs_f64() * 1e3,
                    run.as_secs_f64() * 1e3,
                    apply.as_secs_f64() * 1e3,
                    changed,
                    out.records.len()
                );
            }
        }
        total += heartbeat
            + apply
            + match part {
                Part::OnShard => Duration::ZERO,
                Part::Total => run,
            };
        drop(out);
        drop(c);
    }
    total
}

/// Whether a row is selected by the command line's filter (criterion's first free argument),
/// so that building the large groups of rows left out is skipped too.
fn wanted(id: &str) -> bool {
    // (A number is the value of a flag such as `--profile-time 5`.)
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-') && a.parse::<f64>().is_err());
    filter.is_none_or(|f| id.contains(&f) || f.contains(id))
}

/// The coordinator's whole path to a new target of a 10,000-member group.
fn end_to_end(c: &mut Criterion) {
    let mut g = c.benchmark_group("coordinator_target");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let name = format!("{E2E_MEMBERS}_members_x10_over_{E2E_TOPICS}_topics");
    let existing = e2e_member_heartbeat("member00000", E2E_EPOCH);
    let rows: [(
        &str,
        bool,
        bool,
        kafka_protocol::messages::ConsumerGroupHeartbeatRequest,
    ); 4] = [
        // A heartbeat that changes nothing: what every row below pays besides the target.
        ("heartbeat_no_change", true, false, existing.clone()),
        // One member joins a stable group: its join heartbeat computes the new target.
        ("join_heartbeat", true, false, e2e_join()),
        // `newMember` has joined (its records are in); an existing member's heartbeat computes
        // the target after the assignment interval.
        ("incremental_target", true, true, existing.clone()),
        // Every member joined, no target yet: the first target of the whole group.
        ("full_target", false, false, existing.clone()),
    ];
    for (row, targets, joined, req) in rows {
        if !wanted(&format!("coordinator_target/{row}/")) {
            continue;
        }
        let (base, topics) = e2e_coordinator(targets, joined);
        for part in [Part::OnShard, Part::Total] {
            let label = match part {
                Part::OnShard => "on_shard",
                Part::Total => "total",
            };
            let id = format!("{row}/{label}/{name}");
            let _ = e2e_time(&base, &topics, &req, part, 1, Some(&id));
            g.bench_function(id, |b| {
                b.iter_custom(|iters| e2e_time(&base, &topics, &req, part, iters, None))
            });
        }
    }
    g.finish();
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
        topic_filter: None,
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
