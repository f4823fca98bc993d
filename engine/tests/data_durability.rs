//! Durability of topic data against the real `ringleader` binary: producers write as fast as they
//! can with acks=-1, the broker is killed with SIGKILL at a random moment, restarted on the same
//! data directory, and every acknowledged record must be read back at the offset it was
//! acknowledged with; then a corrupt tail is cut at the last good batch and reported.
//!
//! `RINGLEADER_KILL_ROUNDS` raises the number of kill -9 rounds (default 4).

mod common;
use common::*;

use bytes::Bytes;
use kafka_protocol::messages::*;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::batch::{decode_records, encode_batch, peek_batch, Peek};
use wire::{Request, Response};

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);

const TOPIC: &str = "kill9-data";
const PARTITIONS: i32 = 4;
const RECORDS_PER_BATCH: usize = 20;

fn produce_request(partition: i32, values: &[String]) -> Request {
    let recs: Vec<(Option<&[u8]>, Option<&[u8]>)> =
        values.iter().map(|v| (None, Some(v.as_bytes()))).collect();
    let mut batch = Vec::new();
    encode_batch(0, 1_700_000_000_000, &recs, &mut batch);
    Request::Produce(
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![produce_request::TopicProduceData::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(Bytes::from(batch))),
                ])]),
    )
}

/// What one producer thread saw: acknowledged (base offset, values) batches.
#[derive(Default)]
struct Acked {
    batches: Vec<(i64, Vec<String>)>,
}

fn produce_until_broken(
    addr: std::net::SocketAddr,
    partition: i32,
    round: usize,
    stop: Arc<AtomicBool>,
) -> Acked {
    let mut acked = Acked::default();
    let Ok(sock) = std::net::TcpStream::connect(addr) else {
        return acked;
    };
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut c = Client { sock, next_cid: 1 };
    let mut seq = 0;
    while !stop.load(Ordering::Relaxed) {
        let values: Vec<String> = (0..RECORDS_PER_BATCH)
            .map(|i| format!("r{round}-p{partition}-{seq}-{i}"))
            .collect();
        seq += 1;
        let Ok(Response::Produce(r)) = c.try_call(9, produce_request(partition, &values)) else {
            break; // killed: this batch's outcome is unknown
        };
        let p = &r.responses[0].partition_responses[0];
        if p.error_code != 0 {
            break;
        }
        acked.batches.push((p.base_offset, values));
    }
    acked
}

/// Every record of `partition` from offset 0, with Fetch v11.
fn read_partition(c: &mut Client, partition: i32) -> Vec<(i64, String)> {
    read_partition_from(c, partition, 0)
}

fn read_partition_from(c: &mut Client, partition: i32, from: i64) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    let mut offset = from;
    loop {
        let req = Request::Fetch(
            FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(0)
                .with_min_bytes(1)
                .with_max_bytes(8 << 20)
                .with_topics(vec![fetch_request::FetchTopic::default()
                    .with_topic(TopicName(s(TOPIC)))
                    .with_partitions(vec![fetch_request::FetchPartition::default()
                        .with_partition(partition)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(4 << 20)])]),
        );
        let Response::Fetch(r) = c.call(11, req) else {
            panic!("Fetch")
        };
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch error at offset {offset}");
        let records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            assert_eq!(
                offset, p.high_watermark,
                "empty read before the high watermark"
            );
            return out;
        }
        let mut pos = 0;
        while pos < records.len() {
            let Ok(Peek::Batch(h)) = peek_batch(&records[pos..], 0, 1 << 24) else {
                panic!("a partial or corrupt batch was served at offset {offset}")
            };
            for rec in decode_records(&records[pos..pos + h.size], &h, 0).unwrap() {
                if rec.offset as i64 >= offset {
                    out.push((
                        rec.offset as i64,
                        String::from_utf8(rec.value.unwrap()).unwrap(),
                    ));
                }
            }
            offset = h.last_offset() as i64 + 1;
            pos += h.size;
        }
    }
}

#[test]
fn kill_9_under_produce_load_loses_no_acknowledged_record() {
    let rounds: usize = std::env::var("RINGLEADER_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let started = Instant::now();
    let dir = data_dir("kill9-data");
    // Small segments so rolls happen under load too.
    let sets = ["log.segment.bytes=65536"];
    let mut rng = Rng::from_clock();
    let mut broker = Broker::start(&dir, &sets);
    create_topic(&mut Client::connect(broker.addr), TOPIC, PARTITIONS);
    // offset → value of every acknowledged record, per partition.
    let mut acked: Vec<BTreeMap<i64, String>> = vec![BTreeMap::new(); PARTITIONS as usize];
    let mut total = 0usize;
    for round in 1..=rounds + 1 {
        let graceful = round > rounds;
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..PARTITIONS)
            .map(|p| {
                let (addr, stop) = (broker.addr, stop.clone());
                std::thread::spawn(move || produce_until_broken(addr, p, round, stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200 + rng.next() % 600));
        if graceful {
            broker.stop();
        } else {
            broker.kill9();
        }
        stop.store(true, Ordering::Relaxed);
        for (p, h) in handles.into_iter().enumerate() {
            for (base, values) in h.join().unwrap().batches {
                for (i, v) in values.into_iter().enumerate() {
                    assert!(
                        acked[p].insert(base + i as i64, v).is_none(),
                        "offset reused"
                    );
                    total += 1;
                }
            }
        }
        broker = Broker::start(&dir, &sets);
        let mut c = Client::connect(broker.addr);
        for p in 0..PARTITIONS {
            let got = read_partition(&mut c, p);
            for (i, (o, _)) in got.iter().enumerate() {
                assert_eq!(*o, i as i64, "partition {p}: offsets are not contiguous");
            }
            let got: BTreeMap<i64, String> = got.into_iter().collect();
            for (o, v) in &acked[p as usize] {
                assert_eq!(
                    got.get(o),
                    Some(v),
                    "round {round} partition {p}: acknowledged record at offset {o} lost"
                );
            }
        }
    }
    assert!(total > 0, "no record was acknowledged at all");
    println!(
        "{rounds} kill -9 rounds + 1 SIGTERM: {total} acknowledged records, none lost ({:.1}s)",
        started.elapsed().as_secs_f64()
    );
    broker.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_corrupt_tail_segment_is_truncated_on_restart_and_reported() {
    let dir = data_dir("data-corrupt");
    let mut broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    create_topic(&mut c, TOPIC, 1);
    for b in 0..5 {
        let values: Vec<String> = (0..3).map(|i| format!("b{b}-{i}")).collect();
        let Response::Produce(r) = c.call(9, produce_request(0, &values)) else {
            panic!("Produce")
        };
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    }
    broker.stop();
    let seg = dir
        .join(format!("{TOPIC}-0"))
        .join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&seg).unwrap();
    let n = bytes.len();
    bytes[n - 5] ^= 0xff; // inside the last batch's records: its CRC no longer matches
    std::fs::write(&seg, &bytes).unwrap();
    let broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    let got = read_partition(&mut c, 0);
    assert_eq!(got.len(), 12, "the four good batches remain");
    assert_eq!(got[11].1, "b3-2");
    let cut = broker.log_lines("truncated a torn or corrupt log tail");
    assert!(
        cut.iter().any(|l| l.contains(&format!("{TOPIC}"))),
        "the truncation is logged:\n{}",
        broker.log_text()
    );
    // Appends continue after the cut.
    let Response::Produce(r) = c.call(9, produce_request(0, &["after".to_string()])) else {
        panic!("Produce")
    };
    assert_eq!(r.responses[0].partition_responses[0].base_offset, 12);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

fn create_topic_with(c: &mut Client, name: &str, partitions: i32, configs: &[(&str, &str)]) {
    use create_topics_request::{CreatableTopic, CreatableTopicConfig};
    let req = Request::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            ),
    ]));
    let Response::CreateTopics(r) = c.call(7, req) else {
        panic!("CreateTopics")
    };
    assert_eq!(r.topics[0].error_code, 0, "CreateTopics {name}");
}

fn earliest_offset(c: &mut Client, topic: &str) -> i64 {
    let req = Request::ListOffsets(
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-2),
                ])]),
    );
    let Response::ListOffsets(r) = c.call(7, req) else {
        panic!("ListOffsets")
    };
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

#[test]
fn retention_removes_old_segments_and_topic_deletion_frees_the_directory() {
    let dir = data_dir("data-retention");
    // Small segments so there are closed ones: from the broker default, since a topic's
    // segment.bytes below 1 MiB is refused as Kafka 4 refuses it (KIP-1030).
    let broker = Broker::start(
        &dir,
        &[
            "log.retention.check.interval.ms=200",
            "log.segment.bytes=1024",
        ],
    );
    let mut c = Client::connect(broker.addr);
    // Records are stamped 2023 (produce_request), so with retention.ms of an hour every closed
    // segment is expired.
    create_topic_with(&mut c, TOPIC, 1, &[("retention.ms", "3600000")]);
    for b in 0..40 {
        let values: Vec<String> = (0..5).map(|i| format!("b{b}-{i}")).collect();
        let Response::Produce(r) = c.call(9, produce_request(0, &values)) else {
            panic!("Produce")
        };
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let start = loop {
        let start = earliest_offset(&mut c, TOPIC);
        if start > 0 || Instant::now() > deadline {
            break start;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        start > 0 && start < 200,
        "log start moved by retention: {start}"
    );
    let got = read_partition_from(&mut c, 0, start);
    assert_eq!(
        got.last().map(|r| r.0),
        Some(199),
        "the active segment stays"
    );
    assert!(
        !broker.log_lines("retention removed segments").is_empty(),
        "{}",
        broker.log_text()
    );
    let part_dir = dir.join(format!("{TOPIC}-0"));
    assert!(part_dir.exists());
    let req = Request::DeleteTopics(
        DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(s(TOPIC))])
            .with_timeout_ms(5000),
    );
    let Response::DeleteTopics(r) = c.call(4, req) else {
        panic!("DeleteTopics")
    };
    assert_eq!(r.responses[0].error_code, 0);
    assert!(
        !part_dir.exists(),
        "the deleted topic's partition directory is removed"
    );
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fetching_the_offsets_topic_reads_empty_and_never_touches_the_coordinators_files() {
    let dir = data_dir("data-internal");
    let broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    let parts: Vec<fetch_request::FetchPartition> = (0..50)
        .map(|p| {
            fetch_request::FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)
        })
        .collect();
    let started = Instant::now();
    let req = Request::Fetch(
        FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(300)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(TopicName(s("__consumer_offsets")))
                .with_partitions(parts)]),
    );
    let Response::Fetch(r) = c.call(11, req) else {
        panic!("Fetch")
    };
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "an empty fetch waits max_wait_ms instead of spinning or answering at once"
    );
    for p in &r.responses[0].partitions {
        assert_eq!((p.error_code, p.high_watermark), (0, 0));
        assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0));
    }
    for p in 0..50 {
        let d = dir.join(format!("__consumer_offsets-{p}"));
        assert!(
            !d.join("partition.metadata").exists(),
            "the coordinator's directory {} was opened as a topic log",
            d.display()
        );
    }
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}
