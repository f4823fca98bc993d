//! Seed corpus for `fuzz/fuzz_targets/frame_decode.rs`: a few valid request frames (length
//! prefix included) per api key the codec knows, plus some realistic group requests and a
//! multi-frame stream of them, and realistic data-path requests (Produce with a record batch,
//! InitProducerId, DeleteRecords).
//! `RINGLEADER_BLESS=1 cargo test -p ringleader-wire --test fuzz_seeds` rewrites
//! `fuzz/seeds/frame_decode/`; without it this test checks that the committed seeds are the ones
//! this file produces (so they keep decoding as the codec evolves).

use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;
use std::path::PathBuf;
use wire::codec::{encode_request, KNOWN_API_KEYS};
use wire::kafka_protocol::messages::*;
use wire::kafka_protocol::protocol::StrBytes;
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
        25 => Request::AddOffsetsToTxn(Default::default()),
        26 => Request::EndTxn(Default::default()),
        28 => Request::TxnOffsetCommit(Default::default()),
        32 => Request::DescribeConfigs(Default::default()),
        37 => Request::CreatePartitions(Default::default()),
        42 => Request::DeleteGroups(Default::default()),
        47 => Request::OffsetDelete(Default::default()),
        60 => Request::DescribeCluster(Default::default()),
        68 => Request::ConsumerGroupHeartbeat(Default::default()),
        69 => Request::ConsumerGroupDescribe(Default::default()),
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

fn seeds() -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for &key in KNOWN_API_KEYS {
        let range = ApiKey::try_from(key).unwrap().valid_versions();
        let req = default_request(key);
        // The crate claims a few versions its structs refuse (OffsetCommit 10, ...): skip those.
        for v in [range.min, range.max] {
            if let Some(f) = frame(key, v, &req, 1) {
                out.insert(format!("k{key:02}_v{v:02}_default.bin"), f);
            }
        }
    }
    let mut stream = Vec::new();
    for (i, (name, v, req)) in group_requests().iter().enumerate() {
        let f = frame(req.api_key(), *v, req, 100 + i as i32).expect("group seed encodes");
        stream.extend_from_slice(&f);
        out.insert(format!("k{:02}_v{v:02}_{name}.bin", req.api_key()), f);
    }
    out.insert("stream_group_requests.bin".into(), stream);
    for (i, (name, v, req)) in data_path_requests().iter().enumerate() {
        let f = frame(req.api_key(), *v, req, 200 + i as i32).expect("data-path seed encodes");
        out.insert(format!("k{:02}_v{v:02}_{name}.bin", req.api_key()), f);
    }
    out
}

fn seed_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/frame_decode")
}

#[test]
fn fuzz_seeds_are_current() {
    let want = seeds();
    let dir = seed_dir();
    if std::env::var("RINGLEADER_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        for (name, bytes) in &want {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        return;
    }
    let mut have = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds/frame_decode exists") {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        have.insert(name, std::fs::read(entry.path()).unwrap());
    }
    let want_names: Vec<_> = want.keys().collect();
    let have_names: Vec<_> = have.keys().collect();
    assert_eq!(
        have_names, want_names,
        "seed files differ; run RINGLEADER_BLESS=1 cargo test -p ringleader-wire --test fuzz_seeds"
    );
    for (name, bytes) in &want {
        assert_eq!(
            &have[name], bytes,
            "{name} is stale; run RINGLEADER_BLESS=1 cargo test -p ringleader-wire --test fuzz_seeds"
        );
    }
}
