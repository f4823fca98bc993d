//! The replay fast path (`Coordinator::replay_bytes`: raw key bytes, the specialised
//! OffsetCommit decoder, the interned offset store, group-existence marks) against the
//! straightforward one (`Record::decode` then `Coordinator::replay`) and against a plain map of
//! the offsets, on random mixes of records: offset commits at every value version (with
//! metadata, leader epochs, expiry, topic ids, unknown tagged fields), their tombstones, classic
//! and consumer group records and their tombstones (which delete groups that commits then
//! recreate), and records a load must skip (unknown types, unknown versions, trailing bytes,
//! keys that are not UTF-8).

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use wire::records::{
    ConsumerGroupMemberMetadataValue, ConsumerGroupMetadataValue, GroupMetadataValue,
    LegacyOffsetCommitValue,
};

const GROUPS: &[&str] = &[
    "g0",
    "g1",
    "g2",
    "",
    "grüppe-ü",
    "a-group-name-longer-than-sixteen-bytes",
];
const TOPICS: &[&str] = &["t0", "t1", "tö", "orders-topic-of-17"];

fn metadata(i: usize) -> String {
    match i {
        0 => String::new(),
        1 => "m".into(),
        2 => "métadonnée".into(),
        // Over 127 bytes: a two-byte compact length, the decoder's general path.
        _ => "x".repeat(200),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Commit {
        g: usize,
        t: usize,
        p: i32,
        version: i16,
        offset: i64,
        epoch: i32,
        meta: usize,
        ts: i64,
        expire: bool,
        topic_id: bool,
        extra_tag: bool,
    },
    CommitTombstone {
        g: usize,
        t: usize,
        p: i32,
    },
    GroupMetadata {
        g: usize,
        generation: i32,
        consumer: bool,
        ts: i64,
    },
    GroupTombstone {
        g: usize,
    },
    ConsumerMetadata {
        g: usize,
        epoch: i32,
    },
    ConsumerMember {
        g: usize,
        m: usize,
    },
    ConsumerTombstone {
        g: usize,
    },
    /// A share-group record (type 10): not ours, skipped.
    UnknownType {
        g: usize,
    },
    /// An OffsetCommit value at version 5, which no Kafka wrote.
    UnknownVersion {
        g: usize,
        t: usize,
        p: i32,
    },
    /// A valid v4 value with one byte after it.
    Trailing {
        g: usize,
        t: usize,
        p: i32,
    },
    /// An OffsetCommit key whose group is not UTF-8.
    NotUtf8 {
        t: usize,
        p: i32,
        tombstone: bool,
    },
    /// Type 0 (read-only in Kafka): decodes, changes nothing.
    Legacy {
        g: usize,
        t: usize,
        p: i32,
    },
}

fn arb_op() -> impl Strategy<Value = Op> {
    let g = 0..GROUPS.len();
    let t = 0..TOPICS.len();
    let p = prop_oneof![6 => 0i32..6, 1 => Just(-1), 1 => Just(1000)];
    prop_oneof![
        12 => (
            (g.clone(), t.clone(), p.clone(), 0i16..=4, any::<i64>(), -2i32..3),
            (0usize..4, any::<i64>(), any::<bool>(), any::<bool>(), any::<bool>()),
        )
            .prop_map(|((g, t, p, version, offset, epoch), (meta, ts, expire, topic_id, extra_tag))| Op::Commit {
                g, t, p, version, offset, epoch, meta, ts, expire, topic_id, extra_tag,
            }),
        3 => (g.clone(), t.clone(), p.clone()).prop_map(|(g, t, p)| Op::CommitTombstone { g, t, p }),
        2 => (g.clone(), 0i32..5, any::<bool>(), any::<i64>())
            .prop_map(|(g, generation, consumer, ts)| Op::GroupMetadata { g, generation, consumer, ts }),
        2 => g.clone().prop_map(|g| Op::GroupTombstone { g }),
        1 => (g.clone(), 0i32..5).prop_map(|(g, epoch)| Op::ConsumerMetadata { g, epoch }),
        1 => (g.clone(), 0usize..3).prop_map(|(g, m)| Op::ConsumerMember { g, m }),
        1 => g.clone().prop_map(|g| Op::ConsumerTombstone { g }),
        1 => g.clone().prop_map(|g| Op::UnknownType { g }),
        1 => (g.clone(), t.clone(), p.clone()).prop_map(|(g, t, p)| Op::UnknownVersion { g, t, p }),
        1 => (g.clone(), t.clone(), p.clone()).prop_map(|(g, t, p)| Op::Trailing { g, t, p }),
        1 => (t.clone(), p.clone(), any::<bool>()).prop_map(|(t, p, tombstone)| Op::NotUtf8 { t, p, tombstone }),
        1 => (g, t, p).prop_map(|(g, t, p)| Op::Legacy { g, t, p }),
    ]
}

fn commit_key(g: usize, t: usize, p: i32) -> Vec<u8> {
    RecordKey::OffsetCommit {
        group: GROUPS[g].into(),
        topic: TOPICS[t].into(),
        partition: p,
    }
    .to_bytes()
    .unwrap()
}

/// Append an unknown tagged field (tag 7) to a flexible value's tagged section.
fn with_unknown_tag(mut v: Vec<u8>, had_topic_id: bool) -> Vec<u8> {
    if had_topic_id {
        // count 1 → 2, then the topic id field stays, then ours.
        let section = v.len() - 19;
        v[section] = 2;
    } else {
        let section = v.len() - 1;
        v[section] = 1;
    }
    v.extend_from_slice(&[7, 3, 1, 2, 3]);
    v
}

/// The (key, value) bytes an op stands for.
fn encode(op: &Op) -> (Vec<u8>, Option<Vec<u8>>) {
    match *op {
        Op::Commit {
            g,
            t,
            p,
            version,
            offset,
            epoch,
            meta,
            ts,
            expire,
            topic_id,
            extra_tag,
        } => {
            let v = OffsetCommitValue {
                offset,
                leader_epoch: epoch,
                metadata: metadata(meta),
                commit_timestamp: ts,
                // Only v1 carries an expiry.
                expire_timestamp: if expire && version == 1 { ts / 2 } else { -1 },
                topic_id: if topic_id {
                    uuid::Uuid::from_u128(0x1234_5678_9abc_def0 ^ t as u128)
                } else {
                    uuid::Uuid::nil()
                },
            };
            let mut bytes = Vec::new();
            RecordValue::OffsetCommit(v)
                .encode_version(version, &mut bytes)
                .unwrap();
            if version == 4 && extra_tag {
                bytes = with_unknown_tag(bytes, topic_id);
            }
            (commit_key(g, t, p), Some(bytes))
        }
        Op::CommitTombstone { g, t, p } => (commit_key(g, t, p), None),
        Op::GroupMetadata {
            g,
            generation,
            consumer,
            ts,
        } => {
            let r = Record::new(
                RecordKey::GroupMetadata {
                    group: GROUPS[g].into(),
                },
                RecordValue::GroupMetadata(GroupMetadataValue {
                    protocol_type: if consumer {
                        "consumer".into()
                    } else {
                        String::new()
                    },
                    generation,
                    current_state_timestamp: ts,
                    ..Default::default()
                }),
            );
            (r.encode_key().unwrap(), r.encode_value().unwrap())
        }
        Op::GroupTombstone { g } => (
            RecordKey::GroupMetadata {
                group: GROUPS[g].into(),
            }
            .to_bytes()
            .unwrap(),
            None,
        ),
        Op::ConsumerMetadata { g, epoch } => {
            let r = Record::new(
                RecordKey::ConsumerGroupMetadata {
                    group: GROUPS[g].into(),
                },
                RecordValue::ConsumerGroupMetadata(ConsumerGroupMetadataValue {
                    epoch,
                    metadata_hash: 0,
                }),
            );
            (r.encode_key().unwrap(), r.encode_value().unwrap())
        }
        Op::ConsumerMember { g, m } => {
            let r = Record::new(
                RecordKey::ConsumerGroupMemberMetadata {
                    group: GROUPS[g].into(),
                    member_id: format!("member-{m}"),
                },
                RecordValue::ConsumerGroupMemberMetadata(ConsumerGroupMemberMetadataValue {
                    client_id: "c".into(),
                    subscribed_topic_names: vec![TOPICS[m % TOPICS.len()].into()],
                    ..Default::default()
                }),
            );
            (r.encode_key().unwrap(), r.encode_value().unwrap())
        }
        Op::ConsumerTombstone { g } => (
            RecordKey::ConsumerGroupMetadata {
                group: GROUPS[g].into(),
            }
            .to_bytes()
            .unwrap(),
            None,
        ),
        Op::UnknownType { g } => {
            let mut k = 10i16.to_be_bytes().to_vec();
            k.extend_from_slice(&(GROUPS[g].len() as i16).to_be_bytes());
            k.extend_from_slice(GROUPS[g].as_bytes());
            (k, Some(vec![0, 0, 1, 2, 3]))
        }
        Op::UnknownVersion { g, t, p } => {
            let mut bytes = Vec::new();
            RecordValue::OffsetCommit(OffsetCommitValue::default())
                .encode_version(4, &mut bytes)
                .unwrap();
            bytes[1] = 5;
            (commit_key(g, t, p), Some(bytes))
        }
        Op::Trailing { g, t, p } => {
            let mut bytes = RecordValue::OffsetCommit(OffsetCommitValue::default())
                .to_bytes()
                .unwrap();
            bytes.push(0);
            (commit_key(g, t, p), Some(bytes))
        }
        Op::NotUtf8 { t, p, tombstone } => {
            let mut k = 1i16.to_be_bytes().to_vec();
            k.extend_from_slice(&2i16.to_be_bytes());
            k.extend_from_slice(&[0xff, 0xfe]);
            k.extend_from_slice(&(TOPICS[t].len() as i16).to_be_bytes());
            k.extend_from_slice(TOPICS[t].as_bytes());
            k.extend_from_slice(&p.to_be_bytes());
            let v = (!tombstone).then(|| {
                RecordValue::OffsetCommit(OffsetCommitValue::default())
                    .to_bytes()
                    .unwrap()
            });
            (k, v)
        }
        Op::Legacy { g, t, p } => {
            let r = Record::new(
                RecordKey::LegacyOffsetCommit {
                    group: GROUPS[g].into(),
                    topic: TOPICS[t].into(),
                    partition: p,
                },
                RecordValue::LegacyOffsetCommit(LegacyOffsetCommitValue {
                    offset: 1,
                    metadata: String::new(),
                    commit_timestamp: 2,
                }),
            );
            (r.encode_key().unwrap(), r.encode_value().unwrap())
        }
    }
}

type Offsets = BTreeMap<(String, String, i32), OffsetCommitValue>;

/// Everything a load leaves behind that later requests read.
fn state(c: &Coordinator) -> (String, String, Vec<Record>) {
    (
        format!("{:?}", c.groups),
        format!("{:?}", c.consumer_groups),
        c.snapshot_records(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_replay_fast_path_loads_what_the_generic_path_loads(
        ops in proptest::collection::vec(arb_op(), 0..120),
    ) {
        let mut fast = Coordinator::new(0, GroupConfig::default());
        let mut slow = Coordinator::new(0, GroupConfig::default());
        let mut model = Offsets::new();
        for op in &ops {
            let (k, v) = encode(op);
            let taken_fast = fast.replay_bytes(&k, v.as_deref());
            let taken_slow = match Record::decode(&k, v.as_deref()) {
                Ok(r) => {
                    match (&r.key, &r.value) {
                        (RecordKey::OffsetCommit { group, topic, partition }, Some(RecordValue::OffsetCommit(v))) => {
                            model.insert((group.clone(), topic.clone(), *partition), v.clone());
                        }
                        (RecordKey::OffsetCommit { group, topic, partition }, None) => {
                            model.remove(&(group.clone(), topic.clone(), *partition));
                        }
                        _ => {}
                    }
                    slow.replay(&r);
                    true
                }
                Err(_) => false,
            };
            prop_assert_eq!(taken_fast, taken_slow, "{:?}", op);
        }
        fast.offsets.check();
        let all: Offsets = fast
            .offsets
            .all()
            .into_iter()
            .map(|(g, t, p, v)| ((g, t, p), v))
            .collect();
        prop_assert_eq!(&all, &model);
        prop_assert_eq!(fast.offsets.len(), model.len());
        prop_assert_eq!(state(&fast), state(&slow));
        prop_assert_eq!(fast.durable_view(), slow.durable_view());
        for g in GROUPS {
            let of_group: Vec<(String, i32)> = fast.offsets.keys_of(g);
            let expected: Vec<(String, i32)> = model
                .keys()
                .filter(|(mg, _, _)| mg == g)
                .map(|(_, t, p)| (t.clone(), *p))
                .collect();
            prop_assert_eq!(of_group, expected);
            prop_assert_eq!(fast.offsets.has_group(g), model.keys().any(|(mg, _, _)| mg == g));
        }
        // A snapshot of the loaded state, loaded through the fast path, is the same state —
        // unless an id is both a classic and a consumer group, which only a log no broker
        // writes (a classic group record after a consumer group's, with no conversion
        // between) produces: a snapshot lists classic groups first, and the consumer group's
        // records then replace the classic one.
        if fast.groups.keys().any(|g| fast.consumer_groups.contains_key(g)) {
            return Ok(());
        }
        let mut again = Coordinator::new(0, GroupConfig::default());
        for r in fast.snapshot_records() {
            let (k, v) = (r.encode_key().unwrap(), r.encode_value().unwrap());
            prop_assert!(again.replay_bytes(&k, v.as_deref()));
        }
        prop_assert_eq!(again.offsets.all(), fast.offsets.all());
        prop_assert_eq!(again.snapshot_records(), fast.snapshot_records());
    }
}

#[test]
fn the_offset_store_recycles_slots_and_keeps_its_indexes() {
    // Puts and removes in every order over a small key space: freed pairs, groups and topics
    // are reused, and the store always agrees with a plain map.
    let mut s = OffsetStore::default();
    let mut model = BTreeMap::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for step in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let g = GROUPS[(x % GROUPS.len() as u64) as usize];
        let t = TOPICS[((x >> 8) % TOPICS.len() as u64) as usize];
        let p = ((x >> 16) % 5) as i32;
        if (x >> 24).is_multiple_of(3) {
            s.remove(g, t, p);
            model.remove(&(g.to_string(), t.to_string(), p));
        } else {
            let v = OffsetCommitValue {
                offset: step,
                metadata: metadata(((x >> 32) % 4) as usize),
                ..Default::default()
            };
            s.put(g, t, p, v.clone());
            model.insert((g.to_string(), t.to_string(), p), v);
        }
        if step % 97 == 0 {
            s.check();
            let all: Vec<_> = model
                .iter()
                .map(|((g, t, p), v)| (g.clone(), t.clone(), *p, v.clone()))
                .collect();
            assert_eq!(s.all(), all, "step {step}");
        }
    }
    for ((g, t, p), v) in &model {
        assert_eq!(s.get(g, t, *p).map(|o| o.to_value()).as_ref(), Some(v));
    }
    let keys: Vec<_> = model.keys().cloned().collect();
    for (g, t, p) in keys {
        s.remove(&g, &t, p);
    }
    s.check();
    assert!(s.is_empty() && s.all().is_empty() && s.group_ids().is_empty());
}
