use super::*;

fn coord() -> TxnCoordinator {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    c.on_loaded(0);
    c
}

fn run(c: &mut TxnCoordinator, req: TxnRequest, now: i64) -> (TxnResponse, TxnOutput) {
    let mut out = TxnOutput::default();
    c.handle(1, req, now, &mut out);
    let (_, resp) = out.replies.pop().expect("one reply");
    (resp, out)
}

fn init(c: &mut TxnCoordinator, id: &str, fresh: i64, now: i64) -> (i16, i64, i16) {
    match run(
        c,
        TxnRequest::InitProducerId {
            transactional_id: id.into(),
            timeout_ms: 60_000,
            expected: None,
            fresh_producer_id: fresh,
        },
        now,
    )
    .0
    {
        TxnResponse::InitProducerId {
            error,
            producer_id,
            producer_epoch,
        } => (error, producer_id, producer_epoch),
        other => panic!("{other:?}"),
    }
}

fn add(c: &mut TxnCoordinator, id: &str, pid: i64, epoch: i16, parts: &[(&str, i32)]) -> Vec<i16> {
    match run(
        c,
        TxnRequest::AddPartitions {
            transactional_id: id.into(),
            producer_id: pid,
            producer_epoch: epoch,
            partitions: parts.iter().map(|(t, p)| (t.to_string(), *p)).collect(),
            verify_only: false,
            client_tv: 0,
        },
        10,
    )
    .0
    {
        TxnResponse::AddPartitions(codes) => codes,
        other => panic!("{other:?}"),
    }
}

fn end(c: &mut TxnCoordinator, id: &str, pid: i64, epoch: i16, commit: bool) -> (i16, TxnOutput) {
    let (resp, out) = run(
        c,
        TxnRequest::EndTxn {
            transactional_id: id.into(),
            producer_id: pid,
            producer_epoch: epoch,
            commit,
            client_tv: 0,
            fresh_producer_id: None,
        },
        20,
    );
    match resp {
        TxnResponse::EndTxn { error, .. } => (error, out),
        other => panic!("{other:?}"),
    }
}

fn replayed(c: &TxnCoordinator) -> BTreeMap<String, TxnMeta> {
    let mut r = TxnCoordinator::new(TxnConfig::default());
    for rec in c.records() {
        r.replay(&rec);
    }
    r.txns
        .into_iter()
        .map(|(k, mut m)| {
            m.last_producer_epoch = -1;
            (k, m)
        })
        .collect()
}

fn live(c: &TxnCoordinator) -> BTreeMap<String, TxnMeta> {
    c.txns
        .iter()
        .map(|(k, m)| {
            let mut m = m.clone();
            m.last_producer_epoch = -1;
            (k.clone(), m)
        })
        .collect()
}

#[test]
fn init_gives_a_new_id_epoch_zero_then_bumps_the_epoch() {
    let mut c = coord();
    assert_eq!(init(&mut c, "t", 1000, 0), (0, 1000, 0));
    // A second producer with the same id fences the first: same id, next epoch.
    assert_eq!(init(&mut c, "t", 1001, 1), (0, 1000, 1));
    let m = c.get("t").unwrap();
    assert_eq!(m.state, TxnState::Empty);
    assert_eq!(live(&c), replayed(&c));
}

#[test]
fn init_refuses_bad_ids_and_timeouts() {
    let mut c = coord();
    assert_eq!(init(&mut c, "", 1, 0).0, code::INVALID_REQUEST);
    let (resp, out) = run(
        &mut c,
        TxnRequest::InitProducerId {
            transactional_id: "t".into(),
            timeout_ms: 900_001,
            expected: None,
            fresh_producer_id: 1,
        },
        0,
    );
    assert!(matches!(
        resp,
        TxnResponse::InitProducerId {
            error: code::INVALID_TRANSACTION_TIMEOUT,
            ..
        }
    ));
    assert!(out.records.is_empty(), "a refused request writes nothing");
    assert!(c.get("t").is_none());
}

#[test]
fn a_committed_transaction_prepares_writes_markers_then_completes() {
    let mut c = coord();
    let (_, pid, epoch) = init(&mut c, "t", 7, 0);
    assert_eq!(
        add(&mut c, "t", pid, epoch, &[("a", 0), ("a", 1)]),
        vec![0, 0]
    );
    assert_eq!(c.get("t").unwrap().state, TxnState::Ongoing);
    assert_eq!(c.get("t").unwrap().start_ms, 10);
    // Adding a partition already in the transaction writes nothing.
    let (_, out) = run(
        &mut c,
        TxnRequest::AddPartitions {
            transactional_id: "t".into(),
            producer_id: pid,
            producer_epoch: epoch,
            partitions: vec![("a".into(), 1)],
            verify_only: false,
            client_tv: 0,
        },
        11,
    );
    assert!(out.records.is_empty());
    assert_eq!(
        add(&mut c, "t", pid, epoch, &[("__consumer_offsets", 3)]),
        vec![0]
    );
    let (err, out) = end(&mut c, "t", pid, epoch, true);
    assert_eq!(err, 0);
    assert_eq!(c.get("t").unwrap().state, TxnState::PrepareCommit);
    assert_eq!(out.records.len(), 1);
    let job = out.markers[0].clone();
    assert!(job.commit);
    assert_eq!(job.producer_epoch, epoch);
    assert_eq!(job.partitions.len(), 3);
    // While the markers are written, a retried commit waits and an abort is refused.
    assert_eq!(
        end(&mut c, "t", pid, epoch, true).0,
        code::CONCURRENT_TRANSACTIONS
    );
    assert_eq!(
        end(&mut c, "t", pid, epoch, false).0,
        code::INVALID_TXN_STATE
    );
    let mut out = TxnOutput::default();
    c.markers_written(&job, 40, &mut out);
    assert_eq!(out.records.len(), 1);
    let m = c.get("t").unwrap();
    assert_eq!(m.state, TxnState::CompleteCommit);
    assert!(m.partitions.is_empty());
    // A retried commit after completion succeeds; the same job again changes nothing.
    assert_eq!(end(&mut c, "t", pid, epoch, true).0, 0);
    let mut out = TxnOutput::default();
    c.markers_written(&job, 41, &mut out);
    assert!(out.records.is_empty());
    assert_eq!(live(&c), replayed(&c));
}

#[test]
fn a_stale_epoch_is_fenced_everywhere() {
    let mut c = coord();
    let (_, pid, e0) = init(&mut c, "t", 7, 0);
    let (_, _, e1) = init(&mut c, "t", 8, 1);
    assert_eq!(e1, e0 + 1);
    assert_eq!(
        add(&mut c, "t", pid, e0, &[("a", 0)]),
        vec![code::PRODUCER_FENCED]
    );
    assert_eq!(
        add(&mut c, "t", pid + 1, e1, &[("a", 0)]),
        vec![code::INVALID_PRODUCER_ID_MAPPING]
    );
    assert_eq!(add(&mut c, "t", pid, e1, &[("a", 0)]), vec![0]);
    assert_eq!(end(&mut c, "t", pid, e0, true).0, code::PRODUCER_FENCED);
    assert_eq!(
        end(&mut c, "nobody", pid, e1, true).0,
        code::INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(end(&mut c, "t", pid, e1, false).0, 0);
}

#[test]
fn end_without_a_transaction_is_an_invalid_state() {
    let mut c = coord();
    let (_, pid, e) = init(&mut c, "t", 7, 0);
    assert_eq!(end(&mut c, "t", pid, e, true).0, code::INVALID_TXN_STATE);
}

#[test]
fn init_during_an_open_transaction_fences_and_aborts_it() {
    let mut c = coord();
    let (_, pid, e0) = init(&mut c, "t", 7, 0);
    add(&mut c, "t", pid, e0, &[("a", 0)]);
    let (resp, out) = run(
        &mut c,
        TxnRequest::InitProducerId {
            transactional_id: "t".into(),
            timeout_ms: 60_000,
            expected: None,
            fresh_producer_id: 9,
        },
        50,
    );
    assert_eq!(resp, init_error(code::CONCURRENT_TRANSACTIONS));
    let m = c.get("t").unwrap();
    assert_eq!(m.state, TxnState::PrepareAbort);
    assert_eq!(m.producer_epoch, e0 + 1, "the running producer is fenced");
    assert_eq!(out.markers.len(), 1);
    assert!(!out.markers[0].commit);
    assert_eq!(out.markers[0].producer_epoch, e0 + 1);
    // The old producer's commit is fenced.
    assert_eq!(end(&mut c, "t", pid, e0, true).0, code::PRODUCER_FENCED);
    let mut o = TxnOutput::default();
    c.markers_written(&out.markers[0], 60, &mut o);
    assert_eq!(c.get("t").unwrap().state, TxnState::CompleteAbort);
    // The retry gets the second bump.
    assert_eq!(init(&mut c, "t", 10, 70), (0, pid, e0 + 2));
}

#[test]
fn an_expired_transaction_is_aborted_with_a_bumped_epoch() {
    let mut c = TxnCoordinator::new(TxnConfig {
        abort_check_interval_ms: 100,
        ..TxnConfig::default()
    });
    c.on_loaded(0);
    let (resp, _) = run(
        &mut c,
        TxnRequest::InitProducerId {
            transactional_id: "t".into(),
            timeout_ms: 1_000,
            expected: None,
            fresh_producer_id: 5,
        },
        0,
    );
    assert!(matches!(resp, TxnResponse::InitProducerId { error: 0, .. }));
    add(&mut c, "t", 5, 0, &[("a", 0)]); // at now = 10
    let mut out = TxnOutput::default();
    c.tick(1_000, &mut out);
    assert!(out.records.is_empty(), "not expired before start + timeout");
    c.tick(1_100, &mut out); // the next check after 1,000
    assert_eq!(c.get("t").unwrap().state, TxnState::PrepareAbort);
    assert_eq!(out.markers.len(), 1);
    assert_eq!(out.markers[0].producer_epoch, 1);
    assert_eq!(end(&mut c, "t", 5, 0, true).0, code::PRODUCER_FENCED);
}

#[test]
fn idle_ids_expire_with_a_tombstone() {
    let mut c = TxnCoordinator::new(TxnConfig {
        id_expiration_ms: 1_000,
        expiration_check_interval_ms: 500,
        ..TxnConfig::default()
    });
    c.on_loaded(0);
    init(&mut c, "idle", 1, 0);
    let (_, pid, e) = init(&mut c, "busy", 2, 0);
    add(&mut c, "busy", pid, e, &[("a", 0)]);
    let mut out = TxnOutput::default();
    c.tick(1_500, &mut out);
    assert_eq!(out.records, vec![("idle".to_string(), None)]);
    assert!(c.get("idle").is_none());
    assert!(c.get("busy").is_some(), "an open transaction never expires");
}

#[test]
fn kip360_retry_and_fencing_with_expected_epoch() {
    let mut c = coord();
    let (_, pid, e0) = init(&mut c, "t", 7, 0);
    let req = |expected| TxnRequest::InitProducerId {
        transactional_id: "t".into(),
        timeout_ms: 60_000,
        expected: Some(expected),
        fresh_producer_id: 99,
    };
    let (r, _) = run(&mut c, req((pid, e0)), 1);
    assert_eq!(
        r,
        TxnResponse::InitProducerId {
            error: 0,
            producer_id: pid,
            producer_epoch: e0 + 1
        }
    );
    // The same request again (a retry whose answer was lost): no second bump.
    let (r, _) = run(&mut c, req((pid, e0)), 2);
    assert_eq!(
        r,
        TxnResponse::InitProducerId {
            error: 0,
            producer_id: pid,
            producer_epoch: e0 + 1
        }
    );
    // Another producer id entirely is fenced.
    let (r, _) = run(&mut c, req((12345, 0)), 3);
    assert_eq!(r, init_error(code::PRODUCER_FENCED));
}

#[test]
fn exhausted_epochs_rotate_the_producer_id() {
    let mut c = coord();
    init(&mut c, "t", 7, 0);
    c.txns.get_mut("t").unwrap().producer_epoch = i16::MAX - 1;
    assert_eq!(init(&mut c, "t", 8, 1), (0, 8, 0));
}

/// Every record's PreviousProducerId is the producer id its transition started from, as Kafka's
/// `prepareTransitionTo` writes it: a new id's own, the record's own id afterwards, the old id
/// on the record that rotates to a new one (TxnLogDiffTest compares the bytes with Kafka 4.4's).
#[test]
fn records_carry_the_producer_id_their_transition_started_from() {
    let prev = |out: &TxnOutput| {
        let (_, v) = out.records.last().expect("a record");
        v.as_ref().expect("a value").previous_producer_id
    };
    let mut c = coord();
    let mut out = TxnOutput::default();
    c.handle(
        1,
        TxnRequest::InitProducerId {
            transactional_id: "t".into(),
            timeout_ms: 60_000,
            expected: None,
            fresh_producer_id: 7,
        },
        0,
        &mut out,
    );
    assert_eq!(prev(&out), 7, "a new id starts from itself");
    let mut out = TxnOutput::default();
    c.handle(
        1,
        TxnRequest::AddPartitions {
            transactional_id: "t".into(),
            producer_id: 7,
            producer_epoch: 0,
            partitions: vec![("a".into(), 0)],
            verify_only: false,
            client_tv: 0,
        },
        1,
        &mut out,
    );
    assert_eq!(prev(&out), 7, "the Ongoing record's own id");
    let mut c = coord();
    init(&mut c, "u", 9, 0);
    c.txns.get_mut("u").unwrap().producer_epoch = i16::MAX - 1;
    let mut out = TxnOutput::default();
    c.handle(
        1,
        TxnRequest::InitProducerId {
            transactional_id: "u".into(),
            timeout_ms: 60_000,
            expected: None,
            fresh_producer_id: 10,
        },
        1,
        &mut out,
    );
    let (_, v) = out.records.last().expect("the rotation's record");
    let v = v.as_ref().expect("a value");
    assert_eq!((v.producer_id, v.previous_producer_id), (10, 9));
    // Replay gives the live state back, the previous producer id included.
    assert_eq!(replayed(&c), live(&c));
}

#[test]
fn verification_reports_partitions_outside_the_transaction() {
    let mut c = coord();
    let (_, pid, e) = init(&mut c, "t", 7, 0);
    add(&mut c, "t", pid, e, &[("a", 0)]);
    let (r, out) = run(
        &mut c,
        TxnRequest::AddPartitions {
            transactional_id: "t".into(),
            producer_id: pid,
            producer_epoch: e,
            partitions: vec![("a".into(), 0), ("a".into(), 1)],
            verify_only: true,
            client_tv: 0,
        },
        5,
    );
    assert_eq!(
        r,
        TxnResponse::AddPartitions(vec![0, code::TRANSACTION_ABORTABLE])
    );
    assert!(out.records.is_empty());
}

#[test]
fn a_load_resends_the_markers_of_prepared_transactions() {
    let mut c = coord();
    let (_, pid, e) = init(&mut c, "t", 7, 0);
    add(&mut c, "t", pid, e, &[("a", 0)]);
    end(&mut c, "t", pid, e, false);
    let mut r = TxnCoordinator::new(TxnConfig::default());
    for rec in c.records() {
        r.replay(&rec);
    }
    let jobs = r.on_loaded(100);
    assert_eq!(jobs.len(), 1);
    assert!(!jobs[0].commit);
    assert_eq!(jobs[0].partitions, vec![("a".to_string(), 0)]);
}

#[test]
fn describe_and_list() {
    let mut c = coord();
    let (_, pid, e) = init(&mut c, "t", 7, 0);
    init(&mut c, "u", 8, 0);
    add(&mut c, "t", pid, e, &[("a", 0)]);
    match run(
        &mut c,
        TxnRequest::Describe {
            transactional_id: "t".into(),
        },
        5,
    )
    .0
    {
        TxnResponse::Describe(Ok(d)) => {
            assert_eq!(d.state, "Ongoing");
            assert_eq!(d.partitions, vec![("a".to_string(), 0)]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        run(
            &mut c,
            TxnRequest::Describe {
                transactional_id: "x".into()
            },
            5
        )
        .0,
        TxnResponse::Describe(Err(code::TRANSACTIONAL_ID_NOT_FOUND))
    );
    let list = |c: &mut TxnCoordinator, states: &[&str], d: i64| match run(
        c,
        TxnRequest::List {
            states: states.iter().map(|s| s.to_string()).collect(),
            producer_ids: vec![],
            min_duration_ms: d,
        },
        1_000,
    )
    .0
    {
        TxnResponse::List(l) => l
            .into_iter()
            .map(|t| t.transactional_id)
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(list(&mut c, &[], -1), vec!["t", "u"]);
    assert_eq!(list(&mut c, &["Empty"], -1), vec!["u"]);
    assert_eq!(list(&mut c, &[], 990), vec!["t"]);
    assert!(list(&mut c, &[], 991).is_empty());
}

#[test]
fn requests_during_markers_wait_for_them_instead_of_failing() {
    let mut c = coord();
    let (_, pid, e) = init(&mut c, "t", 7, 0);
    add(&mut c, "t", pid, e, &[("a", 0)]);
    let (_, out) = end(&mut c, "t", pid, e, true);
    let job = out.markers[0].clone();
    // The next transaction's first AddPartitions arrives before the markers are written.
    let mut out = TxnOutput::default();
    let next = |p: i32| TxnRequest::AddPartitions {
        transactional_id: "t".into(),
        producer_id: pid,
        producer_epoch: e,
        partitions: vec![("a".into(), p)],
        verify_only: false,
        client_tv: 0,
    };
    c.handle(11, next(1), 30, &mut out);
    assert!(out.replies.is_empty() && out.records.is_empty(), "it waits");
    assert_eq!(c.waiting(), 1);
    // A stale producer is not made to wait: it is fenced at once.
    c.handle(
        12,
        TxnRequest::AddPartitions {
            transactional_id: "t".into(),
            producer_id: pid,
            producer_epoch: e - 1,
            partitions: vec![("a".into(), 1)],
            verify_only: false,
            client_tv: 0,
        },
        30,
        &mut out,
    );
    assert_eq!(
        out.replies.pop(),
        Some((12, TxnResponse::AddPartitions(vec![code::PRODUCER_FENCED])))
    );
    // The markers complete: the waiting request runs and opens the next transaction.
    let mut out = TxnOutput::default();
    c.markers_written(&job, 40, &mut out);
    assert_eq!(out.replies, vec![(11, TxnResponse::AddPartitions(vec![0]))]);
    assert_eq!(
        out.records.len(),
        2,
        "complete, then the new transaction's partitions"
    );
    let m = c.get("t").unwrap();
    assert_eq!(m.state, TxnState::Ongoing);
    assert_eq!(m.partitions.len(), 1);
    assert_eq!(c.waiting(), 0);

    // Markers that never complete: the waiting request gets Kafka's answer at its deadline,
    // and at most MAX_WAITING_PER_ID wait.
    end(&mut c, "t", pid, e, false);
    let mut out = TxnOutput::default();
    for i in 0..MAX_WAITING_PER_ID as u64 + 1 {
        c.handle(20 + i, next(2), 100, &mut out);
    }
    assert_eq!(
        out.replies,
        vec![(
            20 + MAX_WAITING_PER_ID as u64,
            TxnResponse::AddPartitions(vec![code::CONCURRENT_TRANSACTIONS])
        )]
    );
    assert_eq!(c.next_deadline(), 100 + WAIT_FOR_MARKERS_MS);
    let mut out = TxnOutput::default();
    c.tick(100 + WAIT_FOR_MARKERS_MS, &mut out);
    assert_eq!(out.replies.len(), MAX_WAITING_PER_ID);
    assert!(out
        .replies
        .iter()
        .all(|(_, r)| *r == TxnResponse::AddPartitions(vec![code::CONCURRENT_TRANSACTIONS])));
    assert_eq!(c.waiting(), 0);
}

// ---------------------------------------------------------------- transactions version 2

/// An add the broker makes for a version 2 client (Produce v12+, TxnOffsetCommit v5+).
fn add_v2(
    c: &mut TxnCoordinator,
    id: &str,
    pid: i64,
    epoch: i16,
    parts: &[(&str, i32)],
) -> Vec<i16> {
    match run(
        c,
        TxnRequest::AddPartitions {
            transactional_id: id.into(),
            producer_id: pid,
            producer_epoch: epoch,
            partitions: parts.iter().map(|(t, p)| (t.to_string(), *p)).collect(),
            verify_only: false,
            client_tv: 2,
        },
        10,
    )
    .0
    {
        TxnResponse::AddPartitions(codes) => codes,
        other => panic!("{other:?}"),
    }
}

/// EndTxn v5: (error, producer id, epoch to continue with, output).
fn end_v2(
    c: &mut TxnCoordinator,
    id: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
    fresh: Option<i64>,
) -> (i16, i64, i16, TxnOutput) {
    let (resp, out) = run(
        c,
        TxnRequest::EndTxn {
            transactional_id: id.into(),
            producer_id: pid,
            producer_epoch: epoch,
            commit,
            client_tv: 2,
            fresh_producer_id: fresh,
        },
        20,
    );
    match resp {
        TxnResponse::EndTxn {
            error,
            producer_id,
            producer_epoch,
        } => (error, producer_id, producer_epoch, out),
        other => panic!("{other:?}"),
    }
}

#[test]
fn v2_end_bumps_the_epoch_and_the_markers_carry_it() {
    let mut c = coord();
    let (_, pid, e0) = init(&mut c, "t", 7, 0);
    assert_eq!(add_v2(&mut c, "t", pid, e0, &[("a", 0)]), vec![0]);
    assert_eq!(c.get("t").unwrap().client_tv, 2);
    let (err, p, e, out) = end_v2(&mut c, "t", pid, e0, true, None);
    assert_eq!(
        (err, p, e),
        (0, pid, e0 + 1),
        "the client continues with epoch + 1"
    );
    let job = out.markers[0].clone();
    assert_eq!((job.producer_id, job.producer_epoch), (pid, e0 + 1));
    let m = c.get("t").unwrap();
    assert_eq!(
        (m.state, m.producer_epoch, m.client_tv),
        (TxnState::PrepareCommit, e0 + 1, 2)
    );
    assert_eq!(
        out.records[0]
            .1
            .as_ref()
            .unwrap()
            .client_transaction_version,
        2
    );
    // A retry while the markers are written: the stored epoch is the request's + 1.
    assert_eq!(
        end_v2(&mut c, "t", pid, e0, true, None).0,
        code::CONCURRENT_TRANSACTIONS
    );
    // The old epoch is fenced for anything else.
    assert_eq!(
        add_v2(&mut c, "t", pid, e0, &[("a", 1)]),
        vec![code::PRODUCER_FENCED]
    );
    let mut out = TxnOutput::default();
    c.markers_written(&job, 30, &mut out);
    let m = c.get("t").unwrap();
    assert_eq!(
        (m.state, m.producer_epoch),
        (TxnState::CompleteCommit, e0 + 1)
    );
    // A retry after completion gets the bumped epoch again; the wrong outcome is refused.
    let (err, p, e, out) = end_v2(&mut c, "t", pid, e0, true, None);
    assert_eq!((err, p, e), (0, pid, e0 + 1));
    assert!(out.records.is_empty());
    assert_eq!(
        end_v2(&mut c, "t", pid, e0, false, None).0,
        code::INVALID_TXN_STATE
    );
    // An epoch two behind is a zombie.
    assert_eq!(
        end_v2(&mut c, "t", pid, e0 - 1, true, None).0,
        code::PRODUCER_FENCED
    );
    // The next transaction, with the new epoch, starts by an add.
    assert_eq!(add_v2(&mut c, "t", pid, e0 + 1, &[("a", 2)]), vec![0]);
    let (err, _, e, _) = end_v2(&mut c, "t", pid, e0 + 1, false, None);
    assert_eq!((err, e), (0, e0 + 2));
    assert_eq!(live(&c), replayed(&c));
}

#[test]
fn v2_the_next_transactions_first_add_waits_for_the_markers() {
    let mut c = coord();
    let (_, pid, e0) = init(&mut c, "t", 7, 0);
    add_v2(&mut c, "t", pid, e0, &[("a", 0)]);
    let (_, _, e1, out) = end_v2(&mut c, "t", pid, e0, true, None);
    let job = out.markers[0].clone();
    let mut out = TxnOutput::default();
    c.handle(
        5,
        TxnRequest::AddPartitions {
            transactional_id: "t".into(),
            producer_id: pid,
            producer_epoch: e1,
            partitions: vec![("a".into(), 0)],
            verify_only: false,
            client_tv: 2,
        },
        25,
        &mut out,
    );
    assert!(
        out.replies.is_empty(),
        "parked until the markers are written"
    );
    let mut out = TxnOutput::default();
    c.markers_written(&job, 30, &mut out);
    assert_eq!(out.replies, vec![(5, TxnResponse::AddPartitions(vec![0]))]);
    let m = c.get("t").unwrap();
    assert_eq!((m.state, m.producer_epoch), (TxnState::Ongoing, e1));
}

#[test]
fn v2_an_exhausted_epoch_ends_on_a_new_producer_id() {
    let mut c = coord();
    let (_, pid, _) = init(&mut c, "t", 7, 0);
    // Bring the epoch to the last one a client may hold.
    c.txns.get_mut("t").unwrap().producer_epoch = i16::MAX - 1;
    let e = i16::MAX - 1;
    add_v2(&mut c, "t", pid, e, &[("a", 0)]);
    // The shell reserves a fresh id for such an end; without one the end fails cleanly.
    assert_eq!(
        end_v2(&mut c, "t", pid, e, true, None).0,
        code::UNKNOWN_SERVER_ERROR
    );
    assert_eq!(c.get("t").unwrap().state, TxnState::Ongoing);
    let (err, p, pe, out) = end_v2(&mut c, "t", pid, e, true, Some(99));
    assert_eq!(
        (err, p, pe),
        (0, 99, 0),
        "the client continues on the new id"
    );
    let job = out.markers[0].clone();
    assert_eq!(
        (job.producer_id, job.producer_epoch),
        (pid, i16::MAX),
        "markers: old id, last epoch"
    );
    let v = out.records[0].1.clone().unwrap();
    assert_eq!(v.next_producer_id, 99);
    // The new id's first add arrives before the markers are written: it waits for them.
    let mut out = TxnOutput::default();
    c.handle(
        5,
        TxnRequest::AddPartitions {
            transactional_id: "t".into(),
            producer_id: 99,
            producer_epoch: 0,
            partitions: vec![("a".into(), 1)],
            verify_only: false,
            client_tv: 2,
        },
        25,
        &mut out,
    );
    assert!(out.replies.is_empty());
    let mut out = TxnOutput::default();
    c.markers_written(&job, 30, &mut out);
    let complete = out.records[0].1.clone().unwrap();
    assert_eq!(
        (
            complete.producer_id,
            complete.previous_producer_id,
            complete.next_producer_id,
            complete.producer_epoch
        ),
        (99, pid, -1, 0)
    );
    assert_eq!(out.replies, vec![(5, TxnResponse::AddPartitions(vec![0]))]);
    // Replaying the log gives the same state, new id included.
    assert_eq!(live(&c), replayed(&c));
    let mut c2 = coord();
    c2.replay(&("t".into(), Some(v)));
    assert_eq!(
        c2.get("t").unwrap().next_producer_id,
        99,
        "the prepare record keeps the next id"
    );
}

#[test]
fn v2_a_retry_of_an_overflowed_end_is_recognised() {
    let mut c = coord();
    let (_, pid, _) = init(&mut c, "t", 7, 0);
    c.txns.get_mut("t").unwrap().producer_epoch = i16::MAX - 1;
    let e = i16::MAX - 1;
    add_v2(&mut c, "t", pid, e, &[("a", 0)]);
    let (_, _, _, out) = end_v2(&mut c, "t", pid, e, false, Some(99));
    let mut o = TxnOutput::default();
    c.markers_written(&out.markers[0], 30, &mut o);
    // The client never saw the answer and retries with its old id and epoch.
    let (err, p, pe, _) = end_v2(&mut c, "t", pid, e, false, None);
    assert_eq!((err, p, pe), (0, 99, 0));
}

#[test]
fn v2_timeout_abort_bumps_once_and_the_stalled_end_is_an_invalid_state() {
    let mut c = coord();
    c.set_transaction_version(2);
    let (_, pid, e0) = init(&mut c, "t", 7, 0);
    add_v2(&mut c, "t", pid, e0, &[("a", 0)]);
    let mut out = TxnOutput::default();
    c.tick(10 + 60_001 + 10_000, &mut out);
    let job = out.markers[0].clone();
    assert_eq!(job.producer_epoch, e0 + 1, "one bump fences and aborts");
    let mut o = TxnOutput::default();
    c.markers_written(&job, 80_000, &mut o);
    // Kafka (v2): the stalled producer's commit reads as a retry of the ended transaction
    // with the wrong outcome; its abort as a retry of the abort.
    assert_eq!(
        end_v2(&mut c, "t", pid, e0, true, None).0,
        code::INVALID_TXN_STATE
    );
    let (err, _, e, _) = end_v2(&mut c, "t", pid, e0, false, None);
    assert_eq!((err, e), (0, e0 + 1));
}

#[test]
fn v1_timeout_abort_still_fences_the_stalled_producer() {
    let mut c = coord();
    c.set_transaction_version(1);
    let (_, pid, e0) = init(&mut c, "t", 7, 0);
    add(&mut c, "t", pid, e0, &[("a", 0)]);
    let mut out = TxnOutput::default();
    c.tick(10 + 60_001 + 10_000, &mut out);
    let mut o = TxnOutput::default();
    c.markers_written(&out.markers[0], 80_000, &mut o);
    assert_eq!(end(&mut c, "t", pid, e0, true).0, code::PRODUCER_FENCED);
}
