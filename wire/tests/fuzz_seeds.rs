//! Seed corpora for the wire fuzz targets in `fuzz/fuzz_targets/`:
//!
//! - `frame_decode`: a few valid request frames (length prefix included) per api key the codec
//!   knows, plus some realistic group requests and a multi-frame stream of them, and realistic
//!   data-path requests (Produce with a record batch, InitProducerId, DeleteRecords);
//! - `request_decode`: the same requests as bodies behind the target's two selector bytes (index
//!   in `SERVED`, version - min; see `fuzz/src/served.rs`), at the lowest and highest served
//!   version of every served key, and the realistic ones;
//! - `response_decode`: the golden response frames of `wire/tests/golden/*.hex` (lowest and
//!   highest version of each file stem) without their length prefix, behind the same selector;
//! - `offsets_record`: `__consumer_offsets` keys of every record type and values of every type at
//!   every version, behind the target's selector byte (even: key; odd: value of type index
//!   `b >> 1`).
//!
//! `RINGLEADER_BLESS=1 cargo test -p ringleader-wire --test fuzz_seeds` rewrites
//! `fuzz/seeds/<target>/`; without it this test checks that the committed seeds are the ones this
//! file produces (so they keep decoding as the codec evolves).

use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;
use std::path::PathBuf;
use wire::codec::{encode_request, KNOWN_API_KEYS};
use wire::kafka_protocol::messages::*;
use wire::kafka_protocol::protocol::StrBytes;
use wire::records::*;
use wire::versions::SERVED;
use wire::{Request, RequestHeader};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn default_request(api_key: i16) -> Request {
    match api_key {
        0 => Request::Produce(Default::default()),
        1 => Request::Fetch(Default::default()),
        2 => Request::ListOffsets(Default::default()),
        3 => Request::Metadata(Default::default()),
        8 => Request::OffsetCommit(Default::default()),
        9 => Request::OffsetFetch(Default::default()),
        10 => Request::FindCoordinator(Default::default()),
        11 => Request::JoinGroup(Default::default()),
        12 => Request::Heartbeat(Default::default()),
        13 => Request::LeaveGroup(Default::default()),
        14 => Request::SyncGroup(Default::default()),
        15 => Request::DescribeGroups(Default::default()),
        16 => Request::ListGroups(Default::default()),
        18 => Request::ApiVersions(Default::default()),
        19 => Request::CreateTopics(Default::default()),
        20 => Request::DeleteTopics(Default::default()),
        21 => Request::DeleteRecords(Default::default()),
        22 => Request::InitProducerId(Default::default()),
        23 => Request::OffsetForLeaderEpoch(Default::default()),
        24 => Request::AddPartitionsToTxn(Default::default()),
        25 => Request::AddOffsetsToTxn(Default::default()),
        26 => Request::EndTxn(Default::default()),
        28 => Request::TxnOffsetCommit(Default::default()),
        32 => Request::DescribeConfigs(Default::default()),
        33 => Request::AlterConfigs(Default::default()),
        37 => Request::CreatePartitions(Default::default()),
        42 => Request::DeleteGroups(Default::default()),
        44 => Request::IncrementalAlterConfigs(Default::default()),
        47 => Request::OffsetDelete(Default::default()),
        57 => Request::UpdateFeatures(Default::default()),
        60 => Request::DescribeCluster(Default::default()),
        61 => Request::DescribeProducers(Default::default()),
        65 => Request::DescribeTransactions(Default::default()),
        66 => Request::ListTransactions(Default::default()),
        50 => Request::DescribeUserScramCredentials(Default::default()),
        51 => Request::AlterUserScramCredentials(Default::default()),
        68 => Request::ConsumerGroupHeartbeat(Default::default()),
        69 => Request::ConsumerGroupDescribe(Default::default()),
        17 => Request::SaslHandshake(Default::default()),
        36 => Request::SaslAuthenticate(Default::default()),
        29 => Request::DescribeAcls(Default::default()),
        30 => Request::CreateAcls(Default::default()),
        31 => Request::DeleteAcls(Default::default()),
        48 => Request::DescribeClientQuotas(Default::default()),
        55 => Request::DescribeQuorum(Default::default()),
        81 => Request::RemoveRaftVoter(Default::default()),
        80 => Request::AddRaftVoter(Default::default()),
        43 => Request::ElectLeaders(Default::default()),
        35 => Request::DescribeLogDirs(Default::default()),
        45 => Request::AlterPartitionReassignments(Default::default()),
        46 => Request::ListPartitionReassignments(Default::default()),
        k => panic!("add a default request for api key {k}"),
    }
}

/// Realistic group traffic: (version, request).
fn group_requests() -> Vec<(&'static str, i16, Request)> {
    use consumer_group_heartbeat_request::TopicPartitions;
    use offset_commit_request::*;
    let topic_id = uuid::Uuid::from_bytes([7; 16]);
    vec![
        (
            "heartbeat",
            4,
            Request::Heartbeat(
                HeartbeatRequest::default()
                    .with_group_id(GroupId(s("g-classic")))
                    .with_generation_id(3)
                    .with_member_id(s("rdkafka-5f0c1b7e-8d2a-4c39-9a61-3e0f2b1c4d5e")),
            ),
        ),
        (
            "consumer_group_heartbeat",
            1,
            Request::ConsumerGroupHeartbeat(
                ConsumerGroupHeartbeatRequest::default()
                    .with_group_id(GroupId(s("g-consumer")))
                    .with_member_id(s("Qk9ZcW1uT2Z4aUJ1dG9rZQ"))
                    .with_member_epoch(0)
                    .with_rebalance_timeout_ms(300_000)
                    .with_subscribed_topic_names(Some(vec![TopicName(s("orders"))]))
                    .with_subscribed_topic_regex(Some(s("")))
                    .with_topic_partitions(Some(vec![TopicPartitions::default()
                        .with_topic_id(topic_id)
                        .with_partitions(vec![0, 1, 2])])),
            ),
        ),
        (
            "offset_commit",
            9,
            Request::OffsetCommit(
                OffsetCommitRequest::default()
                    .with_group_id(GroupId(s("g-consumer")))
                    .with_generation_id_or_member_epoch(5)
                    .with_member_id(s("Qk9ZcW1uT2Z4aUJ1dG9rZQ"))
                    .with_topics(vec![OffsetCommitRequestTopic::default()
                        .with_name(TopicName(s("orders")))
                        .with_partitions(
                            (0..3)
                                .map(|p| {
                                    OffsetCommitRequestPartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(100 + i64::from(p))
                                        .with_committed_leader_epoch(2)
                                        .with_committed_metadata(Some(s("")))
                                })
                                .collect(),
                        )]),
            ),
        ),
        (
            "metadata",
            12,
            Request::Metadata(MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default()
                    .with_topic_id(topic_id)
                    .with_name(None),
            ]))),
        ),
        (
            "api_versions",
            3,
            Request::ApiVersions(
                ApiVersionsRequest::default()
                    .with_client_software_name(s("librdkafka"))
                    .with_client_software_version(s("2.16.0")),
            ),
        ),
    ]
}

/// An uncompressed record batch of two keyed records from an idempotent producer.
fn record_batch() -> Bytes {
    use wire::kafka_protocol::records::*;
    let records: Vec<Record> = [
        ("order-1001", "{\"id\":1001}"),
        ("order-1002", "{\"id\":1002}"),
    ]
    .iter()
    .enumerate()
    .map(|(i, (k, v))| Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
        producer_id: 4001,
        producer_epoch: 0,
        timestamp_type: TimestampType::Creation,
        offset: i as i64,
        sequence: i as i32,
        timestamp: 1_700_000_000_000 + i as i64,
        key: Some(Bytes::from_static(k.as_bytes())),
        value: Some(Bytes::from_static(v.as_bytes())),
        headers: Default::default(),
    })
    .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("record batch encodes");
    out.freeze()
}

/// Realistic data-path traffic: (name, version, request).
fn data_path_requests() -> Vec<(&'static str, i16, Request)> {
    use delete_records_request::*;
    use produce_request::*;
    vec![
        (
            "init_producer_id",
            5,
            Request::InitProducerId(
                InitProducerIdRequest::default()
                    .with_transactional_id(None)
                    .with_transaction_timeout_ms(i32::MAX),
            ),
        ),
        (
            "produce",
            10,
            Request::Produce(
                ProduceRequest::default()
                    .with_transactional_id(None)
                    .with_acks(-1)
                    .with_timeout_ms(30_000)
                    .with_topic_data(vec![TopicProduceData::default()
                        .with_name(TopicName(s("orders")))
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(record_batch()))])]),
            ),
        ),
        (
            "delete_records",
            2,
            Request::DeleteRecords(
                DeleteRecordsRequest::default()
                    .with_topics(vec![DeleteRecordsTopic::default()
                        .with_name(TopicName(s("orders")))
                        .with_partitions(vec![
                            DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(17),
                            DeleteRecordsPartition::default()
                                .with_partition_index(1)
                                .with_offset(-1),
                        ])])
                    .with_timeout_ms(30_000),
            ),
        ),
    ]
}

fn frame(api_key: i16, version: i16, req: &Request, cid: i32) -> Option<Vec<u8>> {
    let header = RequestHeader {
        api_key,
        api_version: version,
        correlation_id: cid,
        client_id: Some("rdkafka".into()),
    };
    let mut out = BytesMut::new();
    encode_request(&header, req, &mut out).ok()?;
    Some(out.to_vec())
}

#[path = "../../fuzz/seed_files.rs"]
mod seed_files;
use seed_files::Seeds;

fn frame_seeds(out: &mut Seeds) {
    for &key in KNOWN_API_KEYS {
        let range = ApiKey::try_from(key).unwrap().valid_versions();
        let req = default_request(key);
        // The crate claims a few versions its structs refuse (OffsetCommit 10, ...): skip those.
        for v in [range.min, range.max] {
            if let Some(f) = frame(key, v, &req, 1) {
                out.insert(format!("frame_decode/k{key:02}_v{v:02}_default.bin"), f);
            }
        }
    }
    let mut stream = Vec::new();
    for (i, (name, v, req)) in group_requests().iter().enumerate() {
        let f = frame(req.api_key(), *v, req, 100 + i as i32).expect("group seed encodes");
        stream.extend_from_slice(&f);
        out.insert(
            format!("frame_decode/k{:02}_v{v:02}_{name}.bin", req.api_key()),
            f,
        );
    }
    out.insert("frame_decode/stream_group_requests.bin".into(), stream);
    for (i, (name, v, req)) in data_path_requests().iter().enumerate() {
        let f = frame(req.api_key(), *v, req, 200 + i as i32).expect("data-path seed encodes");
        out.insert(
            format!("frame_decode/k{:02}_v{v:02}_{name}.bin", req.api_key()),
            f,
        );
    }
}

/// The two selector bytes of `request_decode` / `response_decode` for a served key and version.
fn selector(api_key: i16, version: i16) -> Option<[u8; 2]> {
    let i = SERVED.iter().position(|r| r.api_key == api_key)?;
    let r = SERVED[i];
    (r.min..=r.max)
        .contains(&version)
        .then(|| [i as u8, (version - r.min) as u8])
}

fn request_seeds(out: &mut Seeds) {
    let mut add = |name: &str, v: i16, req: &Request| {
        let key = req.api_key();
        let sel = selector(key, v).expect("a served version");
        let mut body = BytesMut::new();
        req.encode_body(v, &mut body).expect("seed request encodes");
        out.insert(
            format!("request_decode/k{key:02}_v{v:02}_{name}.bin"),
            [&sel[..], &body].concat(),
        );
    };
    for r in SERVED {
        let req = default_request(r.api_key);
        add("default", r.min, &req);
        add("default", r.max, &req);
    }
    for (name, v, req) in group_requests().iter().chain(&data_path_requests()) {
        add(name, *v, req);
    }
}

/// The bytes of a hex dump written by `wire/tests/golden.rs` (`#` comments, offset column).
fn parse_hex(text: &str) -> Vec<u8> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .flat_map(|l| l.split_whitespace().skip(1))
        .map(|h| u8::from_str_radix(h, 16).expect("hex byte"))
        .collect()
}

/// Api key of a golden file stem (`<api>[_<variant>]`).
fn golden_api_key(stem: &str) -> i16 {
    const STEMS: &[(&str, i16)] = &[
        ("produce", 0),
        ("fetch", 1),
        ("list_offsets", 2),
        ("metadata", 3),
        ("offset_commit", 8),
        ("offset_fetch", 9),
        ("find_coordinator", 10),
        ("join_group", 11),
        ("heartbeat", 12),
        ("leave_group", 13),
        ("sync_group", 14),
        ("describe_groups", 15),
        ("list_groups", 16),
        ("api_versions", 18),
        ("create_topics", 19),
        ("delete_topics", 20),
        ("delete_records", 21),
        ("init_producer_id", 22),
        ("add_partitions_to_txn", 24),
        ("add_offsets_to_txn", 25),
        ("end_txn", 26),
        ("txn_offset_commit", 28),
        ("describe_configs", 32),
        ("alter_configs", 33),
        ("create_partitions", 37),
        ("delete_groups", 42),
        ("incremental_alter_configs", 44),
        ("offset_delete", 47),
        ("update_features", 57),
        ("describe_user_scram_credentials", 50),
        ("alter_user_scram_credentials", 51),
        ("sasl_handshake", 17),
        ("sasl_authenticate", 36),
        ("describe_acls", 29),
        ("create_acls", 30),
        ("delete_acls", 31),
        ("describe_client_quotas", 48),
        ("describe_cluster", 60),
        ("describe_producers", 61),
        ("describe_transactions", 65),
        ("list_transactions", 66),
        ("consumer_group_heartbeat", 68),
        ("consumer_group_describe", 69),
        ("describe_quorum", 55),
        ("remove_raft_voter", 81),
        ("add_raft_voter", 80),
        ("elect_leaders", 43),
        ("describe_log_dirs", 35),
        ("alter_partition_reassignments", 45),
        ("list_partition_reassignments", 46),
    ];
    STEMS
        .iter()
        .filter(|(s, _)| stem == *s || stem.strip_prefix(s).is_some_and(|r| r.starts_with('_')))
        .max_by_key(|(s, _)| s.len())
        .unwrap_or_else(|| panic!("golden file stem {stem} has no api key here"))
        .1
}

fn response_seeds(out: &mut Seeds) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    // stem → version → frame without its length prefix
    let mut by_stem: BTreeMap<String, BTreeMap<i16, Vec<u8>>> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(stem) = name.strip_suffix(".hex") else {
            continue;
        };
        let bytes = parse_hex(&std::fs::read_to_string(dir.join(&name)).unwrap());
        let (stem, v) = match stem.rsplit_once("_v") {
            Some((s, v)) if v.parse::<i16>().is_ok() => (s.to_string(), v.parse().unwrap()),
            // The KIP-511 fallback: an ApiVersions v0 response.
            _ => (stem.to_string(), 0),
        };
        by_stem
            .entry(stem)
            .or_default()
            .insert(v, bytes[4..].to_vec());
    }
    for (stem, versions) in by_stem {
        let key = golden_api_key(&stem);
        let (lo, hi) = (
            versions.first_key_value().unwrap(),
            versions.last_key_value().unwrap(),
        );
        for (v, frame) in [lo, hi] {
            let sel = selector(key, *v).expect("golden versions are served");
            out.insert(
                format!("response_decode/{stem}_v{v:02}.bin"),
                [&sel[..], frame].concat(),
            );
        }
    }
}

/// The record types of `offsets_record`'s value selector, in its order.
const VALUE_TYPES: [i16; 10] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 16];

fn offsets_record_seeds(out: &mut Seeds) {
    let g = || "group-1".to_string();
    let m = || "member-Qk9ZcW1u".to_string();
    let topic_id = uuid::Uuid::from_bytes([7; 16]);
    let keys = [
        RecordKey::LegacyOffsetCommit {
            group: g(),
            topic: "orders".into(),
            partition: 3,
        },
        RecordKey::OffsetCommit {
            group: g(),
            topic: "orders".into(),
            partition: 3,
        },
        RecordKey::GroupMetadata { group: g() },
        RecordKey::ConsumerGroupMetadata { group: g() },
        RecordKey::ConsumerGroupPartitionMetadata { group: g() },
        RecordKey::ConsumerGroupMemberMetadata {
            group: g(),
            member_id: m(),
        },
        RecordKey::ConsumerGroupTargetAssignmentMetadata { group: g() },
        RecordKey::ConsumerGroupTargetAssignmentMember {
            group: g(),
            member_id: m(),
        },
        RecordKey::ConsumerGroupCurrentMemberAssignment {
            group: g(),
            member_id: m(),
        },
        RecordKey::ConsumerGroupRegularExpression {
            group: g(),
            regex: "orders-.*".into(),
        },
    ];
    for k in &keys {
        let t = k.record_type();
        out.insert(
            format!("offsets_record/key_t{t:02}.bin"),
            [&[0u8][..], &k.to_bytes().unwrap()].concat(),
        );
    }
    let tps = |epochs: bool| CurrentTopicPartitions {
        topic_id,
        partitions: vec![0, 2],
        assignment_epochs: epochs.then(|| vec![4, 5]),
    };
    let values = [
        RecordValue::LegacyOffsetCommit(LegacyOffsetCommitValue {
            offset: 100,
            metadata: "m".into(),
            commit_timestamp: 1_700_000_000_000,
        }),
        RecordValue::OffsetCommit(OffsetCommitValue {
            offset: 100,
            leader_epoch: 2,
            metadata: String::new(),
            commit_timestamp: 1_700_000_000_000,
            expire_timestamp: -1,
            topic_id,
        }),
        RecordValue::GroupMetadata(GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: Some("range".into()),
            leader: Some(m()),
            current_state_timestamp: 1_700_000_000_000,
            members: vec![
                GroupMetadataMember {
                    member_id: m(),
                    group_instance_id: Some("instance-1".into()),
                    client_id: "rdkafka".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout: 300_000,
                    session_timeout: 45_000,
                    subscription: vec![0, 1, 0, 0, 0, 1, 0, 6, b'o', b'r', b'd', b'e', b'r', b's'],
                    assignment: vec![0, 1, 0, 0, 0, 0],
                },
                GroupMetadataMember::default(),
            ],
        }),
        RecordValue::ConsumerGroupMetadata(ConsumerGroupMetadataValue {
            epoch: 5,
            metadata_hash: 0x1234_5678_9abc,
        }),
        RecordValue::ConsumerGroupPartitionMetadata(ConsumerGroupPartitionMetadataValue {
            topics: vec![TopicMetadata {
                topic_id,
                topic_name: "orders".into(),
                num_partitions: 3,
                partition_metadata: vec![PartitionMetadata {
                    partition: 0,
                    racks: vec!["rack-a".into()],
                }],
            }],
        }),
        RecordValue::ConsumerGroupMemberMetadata(ConsumerGroupMemberMetadataValue {
            instance_id: Some("instance-1".into()),
            rack_id: None,
            client_id: "rdkafka".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topic_names: vec!["orders".into()],
            subscribed_topic_regex: None,
            rebalance_timeout_ms: 300_000,
            server_assignor: Some("uniform".into()),
            classic_member_metadata: Some(ClassicMemberMetadata {
                session_timeout_ms: 45_000,
                supported_protocols: vec![ClassicProtocol {
                    name: "range".into(),
                    metadata: vec![0, 1],
                }],
            }),
        }),
        RecordValue::ConsumerGroupTargetAssignmentMetadata(
            ConsumerGroupTargetAssignmentMetadataValue {
                assignment_epoch: 5,
                assignment_timestamp: 1_700_000_000_000,
            },
        ),
        RecordValue::ConsumerGroupTargetAssignmentMember(
            ConsumerGroupTargetAssignmentMemberValue {
                topic_partitions: vec![TargetTopicPartitions {
                    topic_id,
                    partitions: vec![0, 1, 2],
                }],
            },
        ),
        RecordValue::ConsumerGroupCurrentMemberAssignment(
            ConsumerGroupCurrentMemberAssignmentValue {
                member_epoch: 5,
                previous_member_epoch: 4,
                state: member_state::UNREVOKED_PARTITIONS,
                assigned_partitions: vec![tps(true)],
                partitions_pending_revocation: vec![tps(false)],
            },
        ),
        RecordValue::ConsumerGroupRegularExpression(ConsumerGroupRegularExpressionValue {
            topics: vec!["orders-eu".into(), "orders-us".into()],
            version: 42,
            timestamp: 1_700_000_000_000,
        }),
    ];
    for v in &values {
        let t = v.record_type();
        let idx = VALUE_TYPES.iter().position(|&x| x == t).unwrap() as u8;
        // Every version the type has: 0..=4 for offset commits and group metadata, else 0.
        for version in 0..=4 {
            let mut bytes = Vec::new();
            if v.encode_version(version, &mut bytes).is_err() {
                continue;
            }
            out.insert(
                format!("offsets_record/value_t{t:02}_v{version}.bin"),
                [&[1 | (idx << 1)][..], &bytes].concat(),
            );
        }
    }
}

fn seeds() -> Seeds {
    let mut out = Seeds::new();
    frame_seeds(&mut out);
    request_seeds(&mut out);
    response_seeds(&mut out);
    offsets_record_seeds(&mut out);
    out
}

const TARGETS: [&str; 4] = [
    "frame_decode",
    "request_decode",
    "response_decode",
    "offsets_record",
];

#[test]
fn fuzz_seeds_are_current() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds");
    seed_files::check_or_bless(&root, &TARGETS, &seeds(), "ringleader-wire");
}
