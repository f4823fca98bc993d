//! Tests of the data APIs' pure planning (`list_offsets::list_offsets_with`,
//! `fetch::fetch_with`): every answer Kafka gives, with lookups answered by a test log.

use super::common::{Lookup, NO_TIMESTAMP, UNKNOWN_OFFSET};
use crate::broker::Broker;
use crate::data::PartitionRead;
use crate::topics::Topic;
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use uuid::Uuid;

use super::fetch::*;
use super::list_offsets::*;
use crate::config::Config;
use bytes::BytesMut;
use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::list_offsets_request::ListOffsetsTopic;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A broker opened like `open_broker` does, on a private data dir removed on drop, with
/// "orders" (3 partitions).
struct TestBroker {
    broker: Arc<Broker>,
    dir: PathBuf,
    orders: Uuid,
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn broker(tag: &str) -> TestBroker {
    let dir = std::env::temp_dir().join(format!("rl-data-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let broker =
        crate::open_broker(Config::default(), &dir, "127.0.0.1:9092".parse().unwrap()).unwrap();
    let orders = broker
        .topics
        .create("orders", 3, BTreeMap::new())
        .unwrap()
        .id;
    TestBroker {
        broker,
        dir,
        orders,
    }
}

/// The answers of an empty log: start = high watermark = 0, no record for any timestamp.
fn empty_log(_: &Arc<Topic>, _: i32, ts: i64) -> Lookup {
    match ts {
        LATEST_TIMESTAMP | EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => Ok((0, NO_TIMESTAMP)),
        _ => Ok((UNKNOWN_OFFSET, NO_TIMESTAMP)),
    }
}

fn list_offsets(b: &Broker, req: ListOffsetsRequest, v: i16) -> ListOffsetsResponse {
    list_offsets_with(b, &req, v, empty_log)
}

/// Fetch against empty logs: offset 0 reads nothing, anything else is out of range.
fn fetch(b: &Broker, req: FetchRequest, v: i16) -> FetchPlan {
    fetch_with(b, &req, v, |_, p| PartitionRead {
        error: if p.fetch_offset == 0 { 0 } else { 1 },
        high_watermark: 0,
        last_stable_offset: 0,
        log_start_offset: 0,
        aborted: Vec::new(),
        records: Bytes::new(),
    })
}

#[test]
fn records_read_are_returned_with_the_logs_offsets_and_capped_by_max_bytes() {
    let tb = broker("records");
    // Partition 0 has 300 bytes, partition 1 has 300 bytes; response max_bytes 400: the
    // first is sent whole, the second would overflow and is sent empty.
    let mut req = fetch_req(11, vec![("orders", tb.orders, vec![(0, 0), (1, 0)])], 500);
    req.max_bytes = 400;
    let plan = fetch_with(&tb.broker, &req, 11, |_, _| PartitionRead {
        error: 0,
        high_watermark: 7,
        last_stable_offset: 7,
        log_start_offset: 2,
        aborted: Vec::new(),
        records: Bytes::from(vec![1u8; 300]),
    });
    assert_eq!(plan.wait_ms, 0, "min_bytes is met: answer at once");
    let parts = &plan.response.responses[0].partitions;
    assert_eq!(parts[0].records.as_ref().map(|r| r.len()), Some(300));
    assert_eq!(
        (
            parts[0].high_watermark,
            parts[0].last_stable_offset,
            parts[0].log_start_offset
        ),
        (7, 7, 2)
    );
    assert_eq!(parts[1].records.as_ref().map(|r| r.len()), Some(0));
    encodes_fetch(&plan.response, 11);
}

#[test]
fn list_offsets_by_timestamp_reports_the_found_record_with_epoch_zero() {
    let tb = broker("lo-found");
    let resp = list_offsets_with(
        &tb.broker,
        &lo_req(&[("orders", &[(0, 1_000)])]),
        7,
        |_, _, _| Ok((42, 1_234)),
    );
    let p = &resp.topics[0].partitions[0];
    assert_eq!(
        (p.error_code, p.offset, p.timestamp, p.leader_epoch),
        (0, 42, 1_234, 0)
    );
}

fn name(n: &str) -> TopicName {
    TopicName(StrBytes::from_string(n.to_string()))
}

fn lo_req(topics: &[(&str, &[(i32, i64)])]) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(
            topics
                .iter()
                .map(|(t, parts)| {
                    ListOffsetsTopic::default()
                        .with_name(name(t))
                        .with_partitions(
                            parts
                                .iter()
                                .map(|&(p, ts)| {
                                    ListOffsetsPartition::default()
                                        .with_partition_index(p)
                                        .with_timestamp(ts)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

fn encodes_lo(resp: &ListOffsetsResponse, version: i16) {
    let r = wire::encode_response(
        1,
        version,
        &wire::Response::ListOffsets(resp.clone()),
        &mut BytesMut::new(),
    );
    assert!(r.is_ok(), "ListOffsets v{version} does not encode: {r:?}");
}

fn encodes_fetch(resp: &FetchResponse, version: i16) {
    let r = wire::encode_response(
        1,
        version,
        &wire::Response::Fetch(resp.clone()),
        &mut BytesMut::new(),
    );
    assert!(r.is_ok(), "Fetch v{version} does not encode: {r:?}");
}

fn part(resp: &ListOffsetsResponse, topic: &str, p: i32) -> ListOffsetsPartitionResponse {
    resp.topics
        .iter()
        .filter(|t| t.name.0.as_str() == topic)
        .flat_map(|t| t.partitions.iter())
        .find(|x| x.partition_index == p)
        .cloned()
        .unwrap_or_else(|| panic!("no answer for {topic}-{p}"))
}

#[test]
fn list_offsets_earliest_latest_and_lookup_across_versions() {
    let tb = broker("lo-basic");
    for version in [1i16, 2, 4, 5, 6, 7, 8, 9, 10] {
        let resp = list_offsets(
            &tb.broker,
            lo_req(&[(
                "orders",
                &[
                    (0, EARLIEST_TIMESTAMP),
                    (1, LATEST_TIMESTAMP),
                    (2, 1_700_000_000_000),
                ],
            )]),
            version,
        );
        encodes_lo(&resp, version);
        assert_eq!(resp.topics.len(), 1);
        assert_eq!(resp.topics[0].partitions.len(), 3);
        let epoch = if version >= 4 { 0 } else { -1 };
        for p in [0, 1] {
            let r = part(&resp, "orders", p);
            assert_eq!(
                (r.error_code, r.offset, r.timestamp, r.leader_epoch),
                (0, 0, -1, epoch),
                "v{version} p{p}"
            );
        }
        let r = part(&resp, "orders", 2);
        assert_eq!(
            (r.error_code, r.offset, r.timestamp, r.leader_epoch),
            (0, -1, -1, -1),
            "v{version} timestamp lookup"
        );
    }
}

#[test]
fn list_offsets_unknown_topic_and_partition() {
    let tb = broker("lo-unknown");
    for version in [1i16, 4, 7, 10] {
        let resp = list_offsets(
            &tb.broker,
            lo_req(&[
                ("nope", &[(0, LATEST_TIMESTAMP)]),
                (
                    "orders",
                    &[(3, EARLIEST_TIMESTAMP), (-1, LATEST_TIMESTAMP), (0, 5)],
                ),
            ]),
            version,
        );
        encodes_lo(&resp, version);
        for (t, p) in [("nope", 0), ("orders", 3), ("orders", -1)] {
            let r = part(&resp, t, p);
            assert_eq!(
                (r.error_code, r.offset, r.timestamp, r.leader_epoch),
                (3, -1, -1, -1),
                "v{version} {t}-{p}"
            );
        }
        assert_eq!(part(&resp, "orders", 0).error_code, 0);
    }
}

#[test]
fn list_offsets_special_timestamps_follow_their_versions() {
    let tb = broker("lo-special");
    let ask = |ts: i64, version: i16| {
        let resp = list_offsets(&tb.broker, lo_req(&[("orders", &[(0, ts)])]), version);
        encodes_lo(&resp, version);
        let r = part(&resp, "orders", 0);
        (r.error_code, r.offset, r.timestamp, r.leader_epoch)
    };
    let unsupported = (35, -1, -1, -1);
    // Max timestamp: v7+, empty partition → nothing qualifies.
    assert_eq!(ask(MAX_TIMESTAMP, 1), unsupported);
    assert_eq!(ask(MAX_TIMESTAMP, 6), unsupported);
    assert_eq!(ask(MAX_TIMESTAMP, 7), (0, -1, -1, -1));
    // Earliest local: v8+, same as earliest without tiered storage.
    assert_eq!(ask(EARLIEST_LOCAL_TIMESTAMP, 7), unsupported);
    assert_eq!(ask(EARLIEST_LOCAL_TIMESTAMP, 8), (0, 0, -1, 0));
    // Latest tiered: v9+, no remote storage → -1 with epoch -1.
    assert_eq!(ask(LATEST_TIERED_TIMESTAMP, 8), unsupported);
    assert_eq!(ask(LATEST_TIERED_TIMESTAMP, 10), (0, -1, -1, -1));
    // Unknown negative timestamps, including v11's -6.
    assert_eq!(ask(-6, 10), unsupported);
    assert_eq!(ask(i64::MIN, 10), unsupported);
    // Timestamp 0 is a lookup, not a special value.
    assert_eq!(ask(0, 1), (0, -1, -1, -1));
    assert_eq!(ask(i64::MAX, 10), (0, -1, -1, -1));
}

#[test]
fn list_offsets_current_leader_epoch() {
    let tb = broker("lo-epoch");
    let ask = |epoch: i32, version: i16| {
        let mut req = lo_req(&[("orders", &[(1, LATEST_TIMESTAMP)])]);
        req.topics[0].partitions[0].current_leader_epoch = epoch;
        let resp = list_offsets(&tb.broker, req, version);
        encodes_lo(&resp, version);
        let r = part(&resp, "orders", 1);
        (r.error_code, r.offset)
    };
    assert_eq!(ask(-1, 4), (0, 0));
    assert_eq!(ask(0, 4), (0, 0));
    assert_eq!(ask(1, 4), (75, -1));
    assert_eq!(ask(i32::MAX, 10), (75, -1));
    assert_eq!(ask(-2, 7), (74, -1));
    // Before v4 the field does not exist on the wire: ignored.
    assert_eq!(ask(5, 3), (0, 0));
}

#[test]
fn list_offsets_duplicate_partition_is_invalid_request() {
    let tb = broker("lo-dup");
    let resp = list_offsets(
        &tb.broker,
        lo_req(&[
            ("orders", &[(0, LATEST_TIMESTAMP), (1, LATEST_TIMESTAMP)]),
            (
                "orders",
                &[(0, EARLIEST_TIMESTAMP), (2, EARLIEST_TIMESTAMP)],
            ),
        ]),
        7,
    );
    encodes_lo(&resp, 7);
    assert_eq!(resp.topics.len(), 1, "one entry per topic");
    let parts: Vec<_> = resp.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    assert_eq!(parts, vec![(0, 42), (1, 0), (2, 0)]);
}

/// (topic name, topic id, [(partition, fetch offset)]); the version picks name or id.
type FetchSpec<'a> = Vec<(&'a str, Uuid, Vec<(i32, i64)>)>;

fn fetch_req(version: i16, topics: FetchSpec<'_>, max_wait_ms: i32) -> FetchRequest {
    let topics = topics
        .into_iter()
        .map(|(n, id, parts)| {
            let mut t = FetchTopic::default().with_partitions(
                parts
                    .into_iter()
                    .map(|(p, off)| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(off)
                            .with_partition_max_bytes(1_048_576)
                    })
                    .collect(),
            );
            if version >= 13 {
                t.topic_id = id;
            } else {
                t.topic = name(n);
            }
            t
        })
        .collect();
    let mut req = FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(52_428_800)
        .with_topics(topics);
    if version >= 7 {
        req.session_id = 0;
        req.session_epoch = 0;
    }
    req
}

fn all_partitions(resp: &FetchResponse) -> Vec<&PartitionData> {
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .collect()
}

fn assert_empty_ok(p: &PartitionData) {
    assert_eq!(p.error_code, 0, "partition {}", p.partition_index);
    assert_eq!(p.high_watermark, 0);
    assert_eq!(p.last_stable_offset, 0);
    assert_eq!(p.log_start_offset, 0);
    assert_eq!(p.preferred_read_replica, -1);
    assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0));
}

#[test]
fn fetch_by_name_at_offset_zero_waits_max_wait() {
    let tb = broker("f-name");
    let plan = fetch(
        &tb.broker,
        fetch_req(
            11,
            vec![("orders", Uuid::nil(), vec![(0, 0), (1, 0), (2, 0)])],
            500,
        ),
        11,
    );
    encodes_fetch(&plan.response, 11);
    assert_eq!(plan.wait_ms, 500);
    assert_eq!(plan.response.error_code, 0);
    assert_eq!(plan.response.session_id, 0);
    assert_eq!(plan.response.responses.len(), 1);
    assert_eq!(plan.response.responses[0].topic.0.as_str(), "orders");
    assert_eq!(plan.response.responses[0].topic_id, tb.orders);
    let parts = all_partitions(&plan.response);
    assert_eq!(parts.len(), 3);
    for p in parts {
        assert_empty_ok(p);
        assert_eq!(p.aborted_transactions, None, "read_uncommitted: null");
    }

    // read_committed: an empty aborted-transaction array.
    let mut req = fetch_req(11, vec![("orders", Uuid::nil(), vec![(0, 0)])], 500);
    req.isolation_level = 1;
    let plan = fetch(&tb.broker, req, 11);
    encodes_fetch(&plan.response, 11);
    assert_eq!(
        all_partitions(&plan.response)[0].aborted_transactions,
        Some(vec![])
    );
}

#[test]
fn fetch_by_id_v13_and_v17() {
    let tb = broker("f-id");
    for version in [13i16, 15, 16, 17, 18] {
        let plan = fetch(
            &tb.broker,
            fetch_req(version, vec![("", tb.orders, vec![(0, 0), (2, 0)])], 100),
            version,
        );
        encodes_fetch(&plan.response, version);
        assert_eq!(plan.wait_ms, 100, "v{version}");
        let t = &plan.response.responses[0];
        assert_eq!(t.topic_id, tb.orders);
        assert_eq!(t.topic.0.as_str(), "orders");
        assert_eq!(t.partitions.len(), 2);
        t.partitions.iter().for_each(assert_empty_ok);
    }
}

#[test]
fn fetch_offset_out_of_range_answers_at_once() {
    let tb = broker("f-oor");
    for (version, id) in [(11i16, Uuid::nil()), (13, tb.orders), (17, tb.orders)] {
        let plan = fetch(
            &tb.broker,
            fetch_req(
                version,
                vec![("orders", id, vec![(0, 5), (1, 0), (2, -1)])],
                500,
            ),
            version,
        );
        encodes_fetch(&plan.response, version);
        assert_eq!(plan.wait_ms, 0, "v{version}: an error answers at once");
        let parts = all_partitions(&plan.response);
        let codes: Vec<_> = parts
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        assert_eq!(codes, vec![(0, 1), (1, 0), (2, 1)]);
        assert_eq!(parts[0].high_watermark, -1);
        assert_eq!(parts[0].log_start_offset, -1);
        assert_eq!(parts[0].records.as_ref().map(|r| r.len()), Some(0));
        assert_empty_ok(parts[1]);
    }
}

#[test]
fn fetch_unknown_topic_id_and_name() {
    let tb = broker("f-unknown");
    let stranger = Uuid::from_u128(0x1234);
    // Only unknown ids: UNKNOWN_TOPIC_ID at partition level, answered at once.
    for version in [13i16, 17] {
        let plan = fetch(
            &tb.broker,
            fetch_req(version, vec![("", stranger, vec![(0, 0), (1, 0)])], 500),
            version,
        );
        encodes_fetch(&plan.response, version);
        assert_eq!(plan.wait_ms, 0);
        assert_eq!(plan.response.error_code, 0);
        assert_eq!(plan.response.responses.len(), 1);
        assert_eq!(plan.response.responses[0].topic_id, stranger);
        for p in all_partitions(&plan.response) {
            assert_eq!(p.error_code, 100);
            assert_eq!(p.high_watermark, -1);
            assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0));
        }
    }
    // The nil id is no topic either.
    let plan = fetch(
        &tb.broker,
        fetch_req(13, vec![("", Uuid::nil(), vec![(0, 0)])], 500),
        13,
    );
    assert_eq!(all_partitions(&plan.response)[0].error_code, 100);

    // By name: unknown topic or partition.
    let plan = fetch(
        &tb.broker,
        fetch_req(
            11,
            vec![
                ("nope", Uuid::nil(), vec![(0, 0)]),
                ("orders", Uuid::nil(), vec![(3, 0)]),
            ],
            500,
        ),
        11,
    );
    encodes_fetch(&plan.response, 11);
    assert_eq!(plan.wait_ms, 0);
    let codes: Vec<_> = all_partitions(&plan.response)
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, vec![3, 3]);
    assert_eq!(plan.response.responses[0].topic.0.as_str(), "nope");

    // Mixed with a readable partition: Kafka still holds the fetch for the readable one and
    // lists the rejected partitions after it.
    let plan = fetch(
        &tb.broker,
        fetch_req(
            17,
            vec![
                ("", stranger, vec![(0, 0)]),
                ("", tb.orders, vec![(1, 0), (7, 0)]),
            ],
            250,
        ),
        17,
    );
    encodes_fetch(&plan.response, 17);
    assert_eq!(plan.wait_ms, 250);
    let got: Vec<_> = plan
        .response
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic_id, p.partition_index, p.error_code))
        })
        .collect();
    assert_eq!(
        got,
        vec![(tb.orders, 1, 0), (stranger, 0, 100), (tb.orders, 7, 3)]
    );
    assert_eq!(plan.response.responses.len(), 3);
}

#[test]
fn fetch_sessions() {
    let tb = broker("f-session");
    let with_session = |version: i16, id: i32, epoch: i32| {
        let mut req = fetch_req(version, vec![("orders", tb.orders, vec![(0, 0)])], 500);
        req.session_id = id;
        req.session_epoch = epoch;
        let plan = fetch(&tb.broker, req, version);
        encodes_fetch(&plan.response, version);
        plan
    };
    // Incremental fetches name a session we never created.
    for (version, id, epoch) in [(7i16, 7, 3), (11, 7, 1), (13, 0, 1), (17, 42, -2)] {
        let plan = with_session(version, id, epoch);
        assert_eq!(plan.response.error_code, 70, "v{version} {id}/{epoch}");
        assert_eq!(plan.response.session_id, 0);
        assert!(plan.response.responses.is_empty());
        assert_eq!(plan.wait_ms, 0);
    }
    // Full fetches, including one that closes a session (epoch -1): sessionless answers.
    for (version, id, epoch) in [(7i16, 0, 0), (11, 0, -1), (17, 7, -1), (17, 7, 0)] {
        let plan = with_session(version, id, epoch);
        assert_eq!(plan.response.error_code, 0, "v{version} {id}/{epoch}");
        assert_eq!(plan.response.session_id, 0);
        assert_eq!(all_partitions(&plan.response).len(), 1);
        assert_eq!(plan.wait_ms, 500);
    }
    // Before v7 there are no session fields: whatever the struct holds is ignored.
    let mut req = fetch_req(6, vec![("orders", Uuid::nil(), vec![(0, 0)])], 500);
    req.session_epoch = 9;
    let plan = fetch(&tb.broker, req, 6);
    assert_eq!(plan.response.error_code, 0);
    encodes_fetch(&plan.response, 6);
}

#[test]
fn fetch_current_leader_epoch() {
    let tb = broker("f-epoch");
    let ask = |version: i16, epoch: i32| {
        let mut req = fetch_req(version, vec![("orders", tb.orders, vec![(0, 0)])], 500);
        req.topics[0].partitions[0].current_leader_epoch = epoch;
        let plan = fetch(&tb.broker, req, version);
        encodes_fetch(&plan.response, version);
        (all_partitions(&plan.response)[0].error_code, plan.wait_ms)
    };
    assert_eq!(ask(9, -1), (0, 500));
    assert_eq!(ask(11, 0), (0, 500));
    assert_eq!(ask(12, 1), (75, 0));
    assert_eq!(ask(17, i32::MAX), (75, 0));
    // Any negative epoch means "none" in Fetch.
    assert_eq!(ask(16, -2), (0, 500));
    // Before v9 the field does not exist: ignored.
    assert_eq!(ask(8, 3), (0, 500));
}

#[test]
fn fetch_wait_follows_max_wait_and_min_bytes() {
    let tb = broker("f-wait");
    let wait = |max_wait: i32, min_bytes: i32, max_bytes: i32| {
        let mut req = fetch_req(11, vec![("orders", Uuid::nil(), vec![(0, 0)])], max_wait);
        req.min_bytes = min_bytes;
        req.max_bytes = max_bytes;
        fetch(&tb.broker, req, 11).wait_ms
    };
    assert_eq!(wait(500, 1, 1 << 20), 500);
    assert_eq!(wait(60_000, 1, 1 << 20), MAX_FETCH_WAIT_MS);
    assert_eq!(wait(i32::MAX, 1, 1 << 20), MAX_FETCH_WAIT_MS);
    assert_eq!(wait(0, 1, 1 << 20), 0);
    assert_eq!(wait(-5, 1, 1 << 20), 0);
    assert_eq!(wait(500, 0, 1 << 20), 0, "min_bytes 0 is satisfied at once");
    assert_eq!(wait(500, -1, 1 << 20), 0);
    assert_eq!(wait(500, 1, 0), 0, "Kafka caps min_bytes by max_bytes");
    // Nothing to read at all.
    let plan = fetch(&tb.broker, fetch_req(11, vec![], 500), 11);
    assert_eq!(plan.wait_ms, 0);
    assert!(plan.response.responses.is_empty());
}

#[test]
fn fetch_repeated_partition_keeps_first_position_and_last_parameters() {
    let tb = broker("f-dup");
    let plan = fetch(
        &tb.broker,
        fetch_req(
            11,
            vec![
                ("orders", Uuid::nil(), vec![(0, 9), (1, 0)]),
                ("orders", Uuid::nil(), vec![(0, 0)]),
            ],
            500,
        ),
        11,
    );
    encodes_fetch(&plan.response, 11);
    let got: Vec<_> = all_partitions(&plan.response)
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    assert_eq!(got, vec![(0, 0), (1, 0)]);
    assert_eq!(plan.response.responses.len(), 1);
    assert_eq!(plan.wait_ms, 500);
}

#[test]
fn every_response_encodes_at_every_version() {
    let tb = broker("encode");
    let stranger = Uuid::from_u128(7);
    for version in 4i16..=18 {
        // Good, out-of-range, unknown partition, epoch error, unknown topic/id.
        let mut req = fetch_req(
            version,
            vec![
                ("orders", tb.orders, vec![(0, 0), (1, 3), (9, 0), (2, 0)]),
                ("ghost", stranger, vec![(0, 0)]),
            ],
            500,
        );
        req.topics[0].partitions[3].current_leader_epoch = 4;
        for isolation in [0i8, 1] {
            req.isolation_level = isolation;
            let plan = fetch(&tb.broker, req.clone(), version);
            encodes_fetch(&plan.response, version);
            // And the bytes decode back with non-null records everywhere.
            let mut out = BytesMut::new();
            wire::encode_response(
                1,
                version,
                &wire::Response::Fetch(plan.response.clone()),
                &mut out,
            )
            .unwrap();
            let frame = out.freeze().slice(4..);
            let (_, decoded) = wire::codec::decode_response(1, version, &frame).unwrap();
            let wire::Response::Fetch(decoded) = decoded else {
                panic!("not a fetch response")
            };
            assert_eq!(all_partitions(&decoded).len(), 5, "v{version}");
            for p in all_partitions(&decoded) {
                assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0), "v{version}");
            }
        }
        if version >= 7 {
            let mut req = req.clone();
            req.session_id = 3;
            req.session_epoch = 4;
            encodes_fetch(&fetch(&tb.broker, req, version).response, version);
        }
    }
    for version in 1i16..=10 {
        let mut req = lo_req(&[
            (
                "orders",
                &[
                    (0, EARLIEST_TIMESTAMP),
                    (1, LATEST_TIMESTAMP),
                    (2, MAX_TIMESTAMP),
                    (5, EARLIEST_TIMESTAMP),
                ],
            ),
            (
                "ghost",
                &[(0, EARLIEST_LOCAL_TIMESTAMP), (1, LATEST_TIERED_TIMESTAMP)],
            ),
            ("orders", &[(0, 1234)]),
        ]);
        req.topics[0].partitions[1].current_leader_epoch = 2;
        encodes_lo(&list_offsets(&tb.broker, req, version), version);
    }
}

#[test]
fn odd_inputs_do_not_panic() {
    let tb = broker("odd");
    for version in [-1i16, 0, 1, 3, 4, 12, 13, 18, 19, i16::MAX, i16::MIN] {
        let req = FetchRequest::default()
            .with_max_wait_ms(i32::MIN)
            .with_min_bytes(i32::MAX)
            .with_max_bytes(i32::MIN)
            .with_session_id(i32::MIN)
            .with_session_epoch(i32::MIN)
            .with_isolation_level(i8::MIN)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(name(""))
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(i32::MIN)
                        .with_fetch_offset(i64::MIN)
                        .with_current_leader_epoch(i32::MIN)]),
                FetchTopic::default()
                    .with_topic(name("orders"))
                    .with_topic_id(tb.orders)
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(i32::MAX)
                        .with_fetch_offset(i64::MAX)
                        .with_current_leader_epoch(i32::MAX)]),
            ]);
        let _ = fetch(&tb.broker, req, version);
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(i32::MIN))
            .with_isolation_level(i8::MAX)
            .with_timeout_ms(i32::MIN)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name(""))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(i32::MIN)
                    .with_timestamp(i64::MIN)
                    .with_current_leader_epoch(i32::MIN)])]);
        let _ = list_offsets(&tb.broker, req, version);
    }
}

/// A batch of `n` records from producer `pid` (epoch 0, base sequence `seq`), transactional or
/// not, as a client sends it.
fn producer_batch(n: usize, pid: i64, seq: i32, transactional: bool) -> Bytes {
    let vals: Vec<Vec<u8>> = (0..n).map(|i| format!("p{pid}-{i}").into_bytes()).collect();
    let recs: Vec<_> = vals.iter().map(|v| (None, Some(v.as_slice()))).collect();
    let mut b = Vec::new();
    storage::batch::encode_batch(0, 1_000 + pid, &recs, &mut b);
    storage::batch::stamp_producer(&mut b, pid, 0, seq, transactional);
    Bytes::from(b)
}

/// (base offset, attributes, producer id) of every batch in `records`.
fn batches(records: &[u8]) -> Vec<(u64, i16, i64)> {
    use storage::batch::{peek_batch, Peek};
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < records.len() {
        let Ok(Peek::Batch(h)) = peek_batch(&records[pos..], 0, 1 << 20) else {
            panic!("a whole batch at {pos}")
        };
        let b = &records[pos..pos + h.size];
        let pid = i64::from_be_bytes(b[43..51].try_into().unwrap());
        out.push((h.base_offset, h.attributes, pid));
        pos += h.size;
    }
    out
}

/// Run `f` on a glommio executor with a `DataStore` for shard 0 of a one-shard broker, so the
/// partitions' logs, writer tasks and waits are the real ones.
fn with_store<F, Fut>(tb: &TestBroker, f: F)
where
    F: FnOnce(std::rc::Rc<crate::data::DataStore>, Arc<Topic>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let broker = tb.broker.clone();
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("data-tests")
        .spawn(move || async move {
            let topic = broker.topics.snapshot().get("orders").cloned().unwrap();
            let store = crate::data::DataStore::new(broker, 0);
            f(store, topic).await
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn read_committed_fetch_returns_committed_data_and_the_aborted_transactions() {
    use crate::data::{DataOp, DataReply, ReadItem};
    let tb = broker("txn-fetch");
    let orders = tb.orders;
    let broker = tb.broker.clone();
    with_store(&tb, move |store, topic| async move {
        let append = |records: Bytes| {
            store.execute(DataOp::Append {
                topic: topic.clone(),
                partition: 0,
                records,
            })
        };
        let marker = |pid: i64, epoch: i16, commit: bool, coordinator_epoch: i32| {
            store.execute(DataOp::WriteMarker {
                topic: topic.clone(),
                partition: 0,
                producer_id: pid,
                producer_epoch: epoch,
                commit,
                coordinator_epoch,
            })
        };
        let read = |offset: i64, read_committed: bool| {
            store.execute(DataOp::Read {
                items: vec![ReadItem {
                    topic: topic.clone(),
                    partition: 0,
                    offset,
                    max_bytes: 1 << 20,
                    read_committed,
                }],
            })
        };
        let one = |r: DataReply| match r {
            DataReply::Read(mut v) => v.remove(0),
            other => panic!("{other:?}"),
        };
        let appended = |r: DataReply| match r {
            DataReply::Append(a) => (a.error, a.base_offset),
            other => panic!("{other:?}"),
        };
        // Producer 1's transaction (0..=1, aborted below), producer 2's (2, ongoing), a
        // plain batch (3).
        assert_eq!(
            appended(append(producer_batch(2, 1, 0, true)).await),
            (0, 0)
        );
        assert_eq!(
            appended(append(producer_batch(1, 2, 0, true)).await),
            (0, 2)
        );
        assert_eq!(
            appended(append(producer_batch(1, -1, 0, false)).await),
            (0, 3)
        );
        // A plain batch from producer 2 inside its transaction: INVALID_TXN_STATE.
        assert_eq!(appended(append(producer_batch(1, 2, 1, false)).await).0, 48);
        assert_eq!(marker(1, 0, false, 3).await, DataReply::Marker(0));

        let rc = one(read(0, true).await);
        assert_eq!(rc.error, 0);
        assert_eq!((rc.high_watermark, rc.last_stable_offset), (5, 2));
        assert_eq!(batches(&rc.records), vec![(0, 0x10, 1)], "stops at the LSO");
        assert_eq!(rc.aborted, vec![(1, 0)]);
        let ru = one(read(0, false).await);
        assert_eq!(
            ru.last_stable_offset, 2,
            "reported for read_uncommitted too"
        );
        assert_eq!(
            batches(&ru.records),
            vec![(0, 0x10, 1), (2, 0x10, 2), (3, 0, -1), (4, 0x30, 1)]
        );
        assert!(ru.aborted.is_empty());
        // At the LSO a read_committed fetch reads nothing (and is not out of range).
        let at = one(read(2, true).await);
        assert_eq!((at.error, at.records.len()), (0, 0));
        assert!(at.aborted.is_empty());

        // The Fetch answer: aborted transactions and LSO for read_committed; null aborted list
        // for read_uncommitted.
        for (level, read) in [(1i8, rc.clone()), (0, ru.clone())] {
            let mut req = fetch_req(11, vec![("orders", orders, vec![(0, 0)])], 500);
            req.isolation_level = level;
            let plan = fetch_with(&broker, &req, 11, |_, _| read.clone());
            let p = &plan.response.responses[0].partitions[0];
            assert_eq!((p.high_watermark, p.last_stable_offset), (5, 2));
            let aborted = p.aborted_transactions.as_ref().map(|a| {
                a.iter()
                    .map(|t| (t.producer_id.0, t.first_offset))
                    .collect::<Vec<_>>()
            });
            if level == 1 {
                assert_eq!(aborted, Some(vec![(1, 0)]));
            } else {
                assert_eq!(aborted, None);
            }
            encodes_fetch(&plan.response, 11);
        }

        // ListOffsets: latest is the LSO for read_committed, the high watermark otherwise; a
        // timestamp lookup finding an offset at or past the LSO finds nothing.
        let list = |timestamp: i64, read_committed: bool| {
            store.execute(DataOp::ListOffset {
                topic: topic.clone(),
                partition: 0,
                timestamp,
                read_committed,
            })
        };
        assert_eq!(list(-1, true).await, DataReply::Offset(Ok((2, -1))));
        assert_eq!(list(-1, false).await, DataReply::Offset(Ok((5, -1))));
        // Batch 2 (producer 2) carries timestamp 1002.
        assert_eq!(list(1_002, false).await, DataReply::Offset(Ok((2, 1_002))));
        assert_eq!(list(1_002, true).await, DataReply::Offset(Ok((-1, -1))));
        assert_eq!(list(1_001, true).await, DataReply::Offset(Ok((0, 1_001))));
        assert_eq!(list(-2, true).await, DataReply::Offset(Ok((0, -1))));

        // A read_committed wait at the LSO is not woken by data above it, only by the LSO
        // moving; a read_uncommitted one returns at once.
        let wait = |read_committed: bool, timeout_ms: u64| {
            store.execute(DataOp::Wait {
                items: vec![(topic.clone(), 0, 2, read_committed)],
                timeout_ms,
            })
        };
        let t = std::time::Instant::now();
        wait(false, 5_000).await;
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        let t = std::time::Instant::now();
        wait(true, 150).await;
        assert!(t.elapsed() >= std::time::Duration::from_millis(150));
        let t = std::time::Instant::now();
        let waiter = glommio::spawn_local(wait(true, 10_000));
        glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
        // Fenced markers first: a coordinator epoch older than producer 1's last marker's,
        // then an older producer epoch.
        assert_eq!(marker(1, 0, true, 2).await, DataReply::Marker(52));
        assert_eq!(appended(append(producer_batch(1, 5, 0, true)).await).0, 0);
        // Producer 5 moves to epoch 3 (its transaction, from offset 5, goes on).
        let mut bumped = producer_batch(1, 5, 0, true).to_vec();
        storage::batch::stamp_producer(&mut bumped, 5, 3, 0, true);
        assert_eq!(appended(append(Bytes::from(bumped)).await).0, 0);
        assert_eq!(marker(5, 2, false, 0).await, DataReply::Marker(47));
        assert_eq!(marker(2, 0, true, 3).await, DataReply::Marker(0));
        waiter.await;
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "the durable marker woke the read_committed wait"
        );

        // Producer 2 committed (marker at 7): everything below producer 5's ongoing
        // transaction (5) is readable; the abort overlapping the read is still reported.
        let rc = one(read(0, true).await);
        assert_eq!(rc.last_stable_offset, 5);
        assert_eq!(
            batches(&rc.records),
            vec![(0, 0x10, 1), (2, 0x10, 2), (3, 0, -1), (4, 0x30, 1)]
        );
        assert_eq!(rc.aborted, vec![(1, 0)]);
        let rc = one(read(5, true).await);
        assert!(
            rc.records.is_empty(),
            "producer 5's transaction holds the LSO"
        );
        assert_eq!(list(-1, true).await, DataReply::Offset(Ok((5, -1))));
        // A marker for a partition the topic does not have.
        let bad = store
            .execute(DataOp::WriteMarker {
                topic: topic.clone(),
                partition: 7,
                producer_id: 2,
                producer_epoch: 0,
                commit: true,
                coordinator_epoch: 3,
            })
            .await;
        assert_eq!(bad, DataReply::Marker(3));
    });
}

fn dp_req(topics: &[(&str, &[i32])]) -> DescribeProducersRequest {
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    DescribeProducersRequest::default().with_topics(
        topics
            .iter()
            .map(|(t, ps)| {
                TopicRequest::default()
                    .with_name(name(t))
                    .with_partition_indexes(ps.to_vec())
            })
            .collect(),
    )
}

/// (partition, error code, error message, producer ids) of each partition of each topic.
type DpView = Vec<(String, Vec<(i32, i16, Option<String>, Vec<i64>)>)>;

fn dp_view(resp: &DescribeProducersResponse) -> DpView {
    resp.topics
        .iter()
        .map(|t| {
            let parts = t
                .partitions
                .iter()
                .map(|p| {
                    (
                        p.partition_index,
                        p.error_code,
                        p.error_message.as_ref().map(|m| m.to_string()),
                        p.active_producers.iter().map(|a| a.producer_id.0).collect(),
                    )
                })
                .collect();
            (t.name.0.to_string(), parts)
        })
        .collect()
}

#[test]
fn describe_producers_errors_follow_kafka() {
    use super::describe_producers::describe_producers_with;
    use crate::data::ProducerState;
    let tb = broker("dp-errors");
    let long = "x".repeat(250);
    let req = dp_req(&[
        ("orders", &[0, 3, -1, 0, 1]),
        ("ghost", &[0, 1]),
        ("bad topic", &[0]),
        ("", &[2]),
        ("..", &[0]),
        (&long, &[0]),
        ("__consumer_offsets", &[0]),
    ]);
    let mut asked = Vec::new();
    let resp = describe_producers_with(&tb.broker, &req, &|_| false, |t, p| {
        asked.push((t.name.clone(), p));
        match p {
            0 => Ok(vec![ProducerState {
                producer_id: 77,
                epoch: 3,
                last_sequence: 9,
                last_timestamp: 1_234,
                coordinator_epoch: -1,
                txn_start_offset: Some(40),
            }]),
            _ => Err(kafka_protocol::ResponseError::KafkaStorageError.code()),
        }
    });
    // Only partitions that exist reach the log, repeats included (the handler reads each once).
    assert_eq!(
        asked,
        vec![
            ("orders".to_string(), 0),
            ("orders".to_string(), 0),
            ("orders".to_string(), 1),
            ("__consumer_offsets".to_string(), 0),
        ]
    );
    let unknown = Some("This server does not host this topic-partition.".to_string());
    let invalid = |why: &str| Some(format!("Topic name is invalid: {why}"));
    let want: DpView = vec![
        (
            "orders".into(),
            vec![
                (0, 0, None, vec![77]),
                (3, 3, None, vec![]),
                (-1, 3, None, vec![]),
                (0, 0, None, vec![77]),
                (1, 56, None, vec![]),
            ],
        ),
        (
            "ghost".into(),
            vec![(0, 3, unknown.clone(), vec![]), (1, 3, unknown, vec![])],
        ),
        (
            "bad topic".into(),
            vec![(
                0,
                17,
                invalid(
                    "'bad topic' contains one or more characters other than ASCII \
                     alphanumerics, '.', '_' and '-'",
                ),
                vec![],
            )],
        ),
        (
            "".into(),
            vec![(2, 17, invalid("the empty string is not allowed"), vec![])],
        ),
        (
            "..".into(),
            vec![(0, 17, invalid("'..' is not allowed"), vec![])],
        ),
        (
            long.clone(),
            vec![(
                0,
                17,
                invalid(&format!(
                    "the length of '{long}' is longer than the max allowed length 249"
                )),
                vec![],
            )],
        ),
        ("__consumer_offsets".into(), vec![(0, 0, None, vec![77])]),
    ];
    assert_eq!(dp_view(&resp), want);
    let p = &resp.topics[0].partitions[0].active_producers[0];
    assert_eq!(
        (
            p.producer_epoch,
            p.last_sequence,
            p.last_timestamp,
            p.coordinator_epoch,
            p.current_txn_start_offset
        ),
        (3, 9, 1_234, -1, 40)
    );
    let mut out = BytesMut::new();
    wire::encode_response(1, 0, &wire::Response::DescribeProducers(resp), &mut out).unwrap();
}

#[test]
fn describe_producers_reads_the_producer_state_after_produce_commit_and_replay() {
    use crate::data::{DataOp, DataReply, ProducerState};
    let tb = broker("dp-store");
    let broker = tb.broker.clone();
    with_store(&tb, move |store, topic| async move {
        let producers = |store: std::rc::Rc<crate::data::DataStore>, partitions: Vec<i32>| {
            let items = partitions.into_iter().map(|p| (topic.clone(), p)).collect();
            async move {
                match store.execute(DataOp::Producers { items }).await {
                    DataReply::Producers(r) => r,
                    other => panic!("{other:?}"),
                }
            }
        };
        let append = |records: Bytes| {
            store.execute(DataOp::Append {
                topic: topic.clone(),
                partition: 0,
                records,
            })
        };
        let ok = |r: DataReply| match r {
            DataReply::Append(a) => assert_eq!(a.error, 0, "{a:?}"),
            other => panic!("{other:?}"),
        };
        // Nothing written yet: no producers; a partition the topic lacks is an error.
        assert_eq!(
            producers(store.clone(), vec![1, 5]).await,
            vec![Ok(vec![]), Err(3)]
        );
        // Idempotent producer 11: sequences 0..=2 then 3..=4 at offsets 0..=4 (timestamps
        // 1011); transactional producer 12 at offsets 5..=7, so its transaction starts at 5.
        ok(append(producer_batch(3, 11, 0, false)).await);
        ok(append(producer_batch(2, 11, 3, false)).await);
        ok(append(producer_batch(2, 12, 0, true)).await);
        ok(append(producer_batch(1, 12, 2, true)).await);
        let idempotent = ProducerState {
            producer_id: 11,
            epoch: 0,
            last_sequence: 4,
            last_timestamp: 1_011,
            coordinator_epoch: -1,
            txn_start_offset: None,
        };
        let open = ProducerState {
            producer_id: 12,
            epoch: 0,
            last_sequence: 2,
            last_timestamp: 1_012,
            coordinator_epoch: -1,
            txn_start_offset: Some(5),
        };
        assert_eq!(
            producers(store.clone(), vec![0]).await,
            vec![Ok(vec![idempotent, open])]
        );
        // The commit marker (coordinator epoch 4) ends the transaction: no start offset, the
        // coordinator epoch and the marker's timestamp (now).
        let before = crate::clock::wall_clock_ms();
        let marker = store
            .execute(DataOp::WriteMarker {
                topic: topic.clone(),
                partition: 0,
                producer_id: 12,
                producer_epoch: 0,
                commit: true,
                coordinator_epoch: 4,
            })
            .await;
        assert_eq!(marker, DataReply::Marker(0));
        let after = producers(store.clone(), vec![0]).await;
        let [Ok(ps)] = &after[..] else {
            panic!("{after:?}")
        };
        assert_eq!(ps[0], idempotent);
        assert_eq!(
            (
                ps[1].coordinator_epoch,
                ps[1].txn_start_offset,
                ps[1].last_sequence
            ),
            (4, None, 2)
        );
        let marker_ts = ps[1].last_timestamp;
        assert!(
            marker_ts >= before && marker_ts <= crate::clock::wall_clock_ms(),
            "{marker_ts}"
        );
        // A second store on the same data opens the log from disk: recovery rebuilds the same
        // producer state.
        let replayed = crate::data::DataStore::new(broker, 0);
        assert_eq!(producers(replayed, vec![0]).await, after);
    });
}
