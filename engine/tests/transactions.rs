//! Transactions over the wire against the real `ringleader` binary, with raw requests (so every
//! step and error code is visible): a committed and an aborted transaction are told apart by a
//! read_committed Fetch, a zombie producer is fenced, unverified transactional batches are
//! refused, and a SIGKILL right after EndTxn loses neither the commit nor the state of the
//! transactional id — the restarted coordinator finishes writing the markers.

mod common;
use common::*;

use bytes::Bytes;
use kafka_protocol::messages::*;
use std::time::{Duration, Instant};
use storage::batch::{decode_records, encode_batch, peek_batch, stamp_producer, Peek};
use wire::{Request, Response};

const TOPIC: &str = "txn-it";

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(s(id))
}

fn init(c: &mut Client, id: &str) -> (i16, i64, i16) {
    let Response::InitProducerId(r) = c.call(
        4,
        Request::InitProducerId(
            InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id(id)))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
    ) else {
        panic!("InitProducerId")
    };
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

fn add_partition(c: &mut Client, id: &str, pid: i64, epoch: i16, partition: i32) -> i16 {
    let Response::AddPartitionsToTxn(r) = c.call(
        3,
        Request::AddPartitionsToTxn(
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(txn_id(id))
                .with_v3_and_below_producer_id(ProducerId(pid))
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(s(TOPIC)))
                        .with_partitions(vec![partition]),
                ]),
        ),
    ) else {
        panic!("AddPartitionsToTxn")
    };
    r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

/// A transactional batch of `values` with sequences from `seq`; the partition's error code.
#[allow(clippy::too_many_arguments)]
fn produce(
    c: &mut Client,
    id: &str,
    pid: i64,
    epoch: i16,
    seq: i32,
    partition: i32,
    values: &[&str],
) -> i16 {
    produce_v(c, 9, id, (pid, epoch), seq, partition, values)
}

fn end(c: &mut Client, id: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    end_at(c, 3, id, (pid, epoch), commit).0
}

fn state(c: &mut Client, id: &str) -> String {
    let Response::DescribeTransactions(r) = c.call(
        0,
        Request::DescribeTransactions(
            DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]),
        ),
    ) else {
        panic!("DescribeTransactions")
    };
    r.transaction_states[0].transaction_state.to_string()
}

/// (values read, last stable offset, aborted producer ids) of partition 0 from offset 0. With
/// read_committed the broker still returns an aborted transaction's batches and lists the
/// transaction (Kafka does the same): the values are filtered as a consumer filters them
/// (`CompletedFetch.nextFetchedRecord`: from an aborted transaction's first offset, skip that
/// producer's transactional batches until its ABORT marker).
fn fetch(c: &mut Client, read_committed: bool) -> (Vec<String>, i64, Vec<i64>) {
    let req = Request::Fetch(
        FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(8 << 20)
            .with_isolation_level(if read_committed { 1 } else { 0 })
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(TopicName(s(TOPIC)))
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(4 << 20)])]),
    );
    let Response::Fetch(r) = c.call(11, req) else {
        panic!("Fetch")
    };
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let records = p.records.clone().unwrap_or_default();
    let mut pending: Vec<(i64, i64)> = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.first_offset, a.producer_id.0))
        .collect();
    pending.sort();
    let aborted = pending.iter().map(|(_, pid)| *pid).collect();
    let mut skipping = std::collections::HashSet::new();
    let mut values = Vec::new();
    let mut pos = 0;
    while pos < records.len() {
        let Ok(Peek::Batch(h)) = peek_batch(&records[pos..], 0, 1 << 24) else {
            panic!("a partial batch was served")
        };
        while pending
            .first()
            .is_some_and(|(first, _)| *first <= h.base_offset as i64)
        {
            skipping.insert(pending.remove(0).1);
        }
        if h.attributes & 0x20 != 0 {
            // A marker: an ABORT (key type 0) ends the skipping of its producer.
            let rec = &decode_records(&records[pos..pos + h.size], &h, 0).unwrap()[0];
            if rec
                .key
                .as_deref()
                .is_some_and(|k| k.get(2..4) == Some(&[0, 0][..]))
            {
                skipping.remove(&h.producer_id);
            }
        } else if !(read_committed && h.attributes & 0x10 != 0 && skipping.contains(&h.producer_id))
        {
            for rec in decode_records(&records[pos..pos + h.size], &h, 0).unwrap() {
                values.push(String::from_utf8(rec.value.unwrap()).unwrap());
            }
        }
        pos += h.size;
    }
    (values, p.last_stable_offset, aborted)
}

/// Poll until `f` holds (markers are written after EndTxn is answered).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn commit_abort_fencing_and_a_kill_right_after_end_txn() {
    let dir = data_dir("txn");
    let mut broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    create_topic(&mut c, TOPIC, 2);

    // A committed transaction.
    let (err, pid, e0) = init(&mut c, "app-1");
    assert_eq!((err, e0), (0, 0));
    assert_eq!(add_partition(&mut c, "app-1", pid, e0, 0), 0);
    assert_eq!(produce(&mut c, "app-1", pid, e0, 0, 0, &["c1", "c2"]), 0);
    assert_eq!(state(&mut c, "app-1"), "Ongoing");
    // Open: read_committed sees nothing yet, read_uncommitted sees the records.
    let (vals, lso, _) = fetch(&mut c, true);
    assert!(vals.is_empty());
    assert_eq!(lso, 0);
    assert_eq!(fetch(&mut c, false).0, vec!["c1", "c2"]);
    assert_eq!(end(&mut c, "app-1", pid, e0, true), 0);
    eventually("the commit marker", || {
        fetch(&mut c, true).0 == ["c1", "c2"]
    });
    eventually("CompleteCommit", || {
        state(&mut c, "app-1") == "CompleteCommit"
    });

    // An aborted transaction: its records never reach read_committed; the aborted list names it.
    assert_eq!(add_partition(&mut c, "app-1", pid, e0, 0), 0);
    assert_eq!(produce(&mut c, "app-1", pid, e0, 2, 0, &["a1"]), 0);
    assert_eq!(end(&mut c, "app-1", pid, e0, false), 0);
    eventually("CompleteAbort", || {
        state(&mut c, "app-1") == "CompleteAbort"
    });
    let (vals, _, aborted) = fetch(&mut c, true);
    assert_eq!(vals, vec!["c1", "c2"], "aborted records are filtered");
    assert_eq!(aborted, vec![pid]);

    // A transactional batch for a partition the transaction never added is refused (KIP-890).
    assert_eq!(add_partition(&mut c, "app-1", pid, e0, 1), 0);
    assert_eq!(
        produce(&mut c, "app-1", pid, e0, 3, 0, &["unverified"]),
        48,
        "INVALID_TXN_STATE for partition 0, outside the transaction"
    );

    // A second producer with the same id fences the first and aborts its open transaction.
    assert_eq!(init(&mut c, "app-1").0, 51, "CONCURRENT_TRANSACTIONS first");
    let mut second = (51, 0, 0);
    eventually("the second producer's epoch", || {
        second = init(&mut c, "app-1");
        second.0 == 0
    });
    assert_eq!(second.1, pid);
    assert!(
        second.2 > e0 + 1,
        "fenced once by the abort, once by the retry"
    );
    assert_eq!(end(&mut c, "app-1", pid, e0, true), 90, "PRODUCER_FENCED");
    assert_eq!(
        produce(&mut c, "app-1", pid, e0, 3, 1, &["zombie"]),
        47,
        "INVALID_PRODUCER_EPOCH for the zombie's batch"
    );

    // SIGKILL right after EndTxn is answered: the commit survives and completes after restart.
    let e = second.2;
    assert_eq!(add_partition(&mut c, "app-1", pid, e, 0), 0);
    assert_eq!(produce(&mut c, "app-1", pid, e, 0, 0, &["k1"]), 0);
    assert_eq!(end(&mut c, "app-1", pid, e, true), 0);
    broker.kill9();
    let broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    eventually("the commit after the restart", || {
        fetch(&mut c, true).0 == ["c1", "c2", "k1"]
    });
    eventually("CompleteCommit after the restart", || {
        state(&mut c, "app-1") == "CompleteCommit"
    });
    // The id keeps its producer id and epoch: the next producer gets the next epoch.
    let (err, pid2, e2) = init(&mut c, "app-1");
    assert_eq!((err, pid2, e2), (0, pid, e + 1));
    let _ = std::fs::remove_dir_all(&dir);
}

fn txn_offset_commit(c: &mut Client, id: &str, pid: i64, epoch: i16, offset: i64) -> i16 {
    use txn_offset_commit_request::{TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic};
    let Response::TxnOffsetCommit(r) = c.call(
        3,
        Request::TxnOffsetCommit(
            TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id(id))
                .with_group_id(GroupId(s("etl")))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_generation_id(-1)
                .with_member_id(s(""))
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1)])]),
        ),
    ) else {
        panic!("TxnOffsetCommit")
    };
    r.topics[0].partitions[0].error_code
}

/// (offset, error) of partition 0 for group "etl", asking for stable offsets.
fn offset_fetch_stable(c: &mut Client) -> (i64, i16) {
    use offset_fetch_request::OffsetFetchRequestTopic;
    let Response::OffsetFetch(r) = c.call(
        7,
        Request::OffsetFetch(
            OffsetFetchRequest::default()
                .with_group_id(GroupId(s("etl")))
                .with_require_stable(true)
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partition_indexes(vec![0])])),
        ),
    ) else {
        panic!("OffsetFetch")
    };
    let p = &r.topics[0].partitions[0];
    (p.committed_offset, p.error_code)
}

#[test]
fn transactional_offsets_need_add_offsets_and_stay_invisible_until_the_commit() {
    let dir = data_dir("txn-offsets");
    let broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    create_topic(&mut c, TOPIC, 1);
    let (_, pid, e) = init(&mut c, "etl-1");
    assert_eq!(add_partition(&mut c, "etl-1", pid, e, 0), 0);
    // Without AddOffsetsToTxn the group's partition is not in the transaction (KIP-890).
    assert_eq!(txn_offset_commit(&mut c, "etl-1", pid, e, 5), 48);
    let Response::AddOffsetsToTxn(r) = c.call(
        3,
        Request::AddOffsetsToTxn(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn_id("etl-1"))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(e)
                .with_group_id(GroupId(s("etl"))),
        ),
    ) else {
        panic!("AddOffsetsToTxn")
    };
    assert_eq!(r.error_code, 0);
    assert_eq!(txn_offset_commit(&mut c, "etl-1", pid, e, 5), 0);
    // A stale epoch is refused before anything is written.
    assert_eq!(txn_offset_commit(&mut c, "etl-1", pid, e - 1, 9), 47);
    // Pending: a stable fetch is told to wait.
    assert_eq!(
        offset_fetch_stable(&mut c),
        (-1, 88),
        "UNSTABLE_OFFSET_COMMIT"
    );
    assert_eq!(end(&mut c, "etl-1", pid, e, true), 0);
    eventually("the committed offset", || {
        offset_fetch_stable(&mut c) == (5, 0)
    });

    // `ringleader transactions`, shaped like kafka-transactions.sh.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringleader"))
            .arg("transactions")
            .args(["--bootstrap", &broker.addr.to_string()])
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, list) = cli(&["--list"]);
    assert_eq!(code, Some(0), "{list}");
    let lines: Vec<Vec<String>> = list
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect();
    let want = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        lines,
        vec![
            want(&[
                "TransactionalId",
                "Coordinator",
                "ProducerId",
                "TransactionState"
            ]),
            want(&["etl-1", "1", &pid.to_string(), "CompleteCommit"]),
        ]
    );
    let (code, described) = cli(&["--describe", "--transactional-id", "etl-1"]);
    assert_eq!(code, Some(0), "{described}");
    let row: Vec<&str> = described
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..6],
        want(&[
            "1",
            "etl-1",
            &pid.to_string(),
            &e.to_string(),
            "CompleteCommit",
            "60000"
        ])[..]
    );
    let (code, missing) = cli(&["--describe", "--transactional-id", "nobody"]);
    assert_eq!(code, Some(1));
    assert!(missing.contains("TRANSACTIONAL_ID_NOT_FOUND"), "{missing}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `produce` at another Produce version: 12+ is what a transactions version 2 client sends.
#[allow(clippy::too_many_arguments)]
fn produce_v(
    c: &mut Client,
    version: i16,
    id: &str,
    (pid, epoch): (i64, i16),
    seq: i32,
    partition: i32,
    values: &[&str],
) -> i16 {
    let recs: Vec<(Option<&[u8]>, Option<&[u8]>)> =
        values.iter().map(|v| (None, Some(v.as_bytes()))).collect();
    let mut batch = Vec::new();
    encode_batch(0, 1_700_000_000_000, &recs, &mut batch);
    stamp_producer(&mut batch, pid, epoch, seq, true);
    let Response::Produce(r) = c.call(
        version,
        Request::Produce(
            ProduceRequest::default()
                .with_transactional_id(Some(txn_id(id)))
                .with_acks(-1)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![produce_request::TopicProduceData::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partition_data(vec![
                        produce_request::PartitionProduceData::default()
                            .with_index(partition)
                            .with_records(Some(Bytes::from(batch))),
                    ])]),
        ),
    ) else {
        panic!("Produce")
    };
    r.responses[0].partition_responses[0].error_code
}

/// EndTxn v5: (error, producer id, producer epoch) of the answer.
fn end_v5(c: &mut Client, id: &str, producer: (i64, i16), commit: bool) -> (i16, i64, i16) {
    end_at(c, 5, id, producer, commit)
}

/// EndTxn at `version`: (error, producer id, producer epoch) of the answer (the last two are
/// in the answer from v5 on).
fn end_at(
    c: &mut Client,
    version: i16,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
) -> (i16, i64, i16) {
    let Response::EndTxn(r) = c.call(
        version,
        Request::EndTxn(
            EndTxnRequest::default()
                .with_transactional_id(txn_id(id))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(commit),
        ),
    ) else {
        panic!("EndTxn")
    };
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// (finalized transaction.version if any, finalized features epoch) from ApiVersions v4.
fn finalized_tv(c: &mut Client) -> (Option<i16>, i64) {
    let Response::ApiVersions(r) = c.call(
        4,
        Request::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(s("it"))
                .with_client_software_version(s("1")),
        ),
    ) else {
        panic!("ApiVersions")
    };
    let supported = r
        .supported_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| (f.min_version, f.max_version));
    assert_eq!(
        supported,
        Some((0, 2)),
        "transaction.version 0-2 is supported"
    );
    let tv = r
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| f.max_version_level);
    (tv, r.finalized_features_epoch)
}

/// UpdateFeatures v2 of one feature: (error code, error message).
fn update_feature(c: &mut Client, feature: &str, level: i16, upgrade_type: i8) -> (i16, String) {
    let Response::UpdateFeatures(r) = c.call(
        2,
        Request::UpdateFeatures(
            UpdateFeaturesRequest::default()
                .with_timeout_ms(30_000)
                .with_feature_updates(vec![update_features_request::FeatureUpdateKey::default()
                    .with_feature(s(feature))
                    .with_max_version_level(level)
                    .with_upgrade_type(upgrade_type)]),
        ),
    ) else {
        panic!("UpdateFeatures")
    };
    (
        r.error_code,
        r.error_message.map(|m| m.to_string()).unwrap_or_default(),
    )
}

#[test]
fn transactions_v2_bump_the_epoch_and_writes_add_their_partitions() {
    let dir = data_dir("txn-v2");
    let mut broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    create_topic(&mut c, TOPIC, 2);
    let (tv, epoch0) = finalized_tv(&mut c);
    assert_eq!(
        tv,
        Some(2),
        "a new broker is at transaction.version 2, as Kafka 4.4"
    );

    let (err, pid, e0) = init(&mut c, "v2");
    assert_eq!(err, 0);
    // No AddPartitionsToTxn: Produce v12 adds partition 0 to the transaction.
    assert_eq!(produce_v(&mut c, 12, "v2", (pid, e0), 0, 0, &["c1"]), 0);
    assert_eq!(state(&mut c, "v2"), "Ongoing");
    // A v1 write (Produce v11) to a partition never added is still only verified, and refused
    // (TRANSACTION_ABORTABLE from v11, as Kafka's `genericErrorSupported`).
    assert_eq!(
        produce_v(&mut c, 11, "v2", (pid, e0), 0, 1, &["x"]),
        120,
        "TRANSACTION_ABORTABLE"
    );
    // EndTxn v5 bumps the epoch and says so.
    assert_eq!(end_v5(&mut c, "v2", (pid, e0), true), (0, pid, e0 + 1));
    eventually("the commit marker", || fetch(&mut c, true).0 == ["c1"]);
    // The ended transaction's epoch writes nothing more.
    assert_eq!(
        produce_v(&mut c, 12, "v2", (pid, e0), 1, 0, &["late"]),
        47,
        "INVALID_PRODUCER_EPOCH"
    );
    // The next transaction, with the bumped epoch, starts its sequences again; it is aborted.
    let e1 = e0 + 1;
    assert_eq!(produce_v(&mut c, 12, "v2", (pid, e1), 0, 0, &["a1"]), 0);
    assert_eq!(end_v5(&mut c, "v2", (pid, e1), false), (0, pid, e1 + 1));
    eventually("CompleteAbort", || state(&mut c, "v2") == "CompleteAbort");
    // A retried abort gets the same answer; a commit of it is refused; an older epoch is fenced.
    assert_eq!(end_v5(&mut c, "v2", (pid, e1), false), (0, pid, e1 + 1));
    assert_eq!(
        end_v5(&mut c, "v2", (pid, e1), true).0,
        48,
        "INVALID_TXN_STATE"
    );
    assert_eq!(
        end_v5(&mut c, "v2", (pid, e0), true).0,
        90,
        "PRODUCER_FENCED"
    );
    let (vals, _, aborted) = fetch(&mut c, true);
    assert_eq!(vals, vec!["c1"]);
    assert_eq!(aborted, vec![pid]);

    // UpdateFeatures: Kafka's refusals, then a downgrade to 1 that survives a restart.
    let refused = |(code, msg): (i16, String), why: &str| {
        assert_eq!(code, 95, "INVALID_UPDATE_VERSION: {msg}");
        assert!(msg.contains(why), "{msg}");
    };
    refused(
        update_feature(&mut c, "transaction.version", 3, 1),
        "only supports versions 0-2",
    );
    refused(
        update_feature(&mut c, "transaction.version", 1, 1),
        "without setting the upgrade type",
    );
    refused(
        update_feature(&mut c, "group.version", 1, 1),
        "does not support this feature",
    );
    assert_eq!(
        finalized_tv(&mut c),
        (Some(2), epoch0),
        "refusals change nothing"
    );
    assert_eq!(update_feature(&mut c, "transaction.version", 1, 2).0, 0);
    let (tv, epoch1) = finalized_tv(&mut c);
    assert_eq!(tv, Some(1));
    assert!(epoch1 > epoch0, "a change has a newer epoch");
    drop(c);
    broker.kill9();
    let broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    assert_eq!(
        finalized_tv(&mut c),
        (Some(1), epoch1),
        "the level is durable"
    );
    assert_eq!(update_feature(&mut c, "transaction.version", 2, 1).0, 0);
    assert_eq!(finalized_tv(&mut c).0, Some(2));
}
