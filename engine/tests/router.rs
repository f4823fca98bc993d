//! The cross-shard path: calls for state owned by another shard cross cores and come back, and a
//! call into a shard that stopped running fails within the router's bound instead of hanging.

use engine::data::{DataOp, DataReply};
use engine::runtime::partition::{PartitionCall, PartitionOp, PartitionReply, PartitionTable};
use engine::runtime::router::{self, Executor, Router, STALL_BOUND};
use engine::txn::{TxnRequest, TxnResponse};
use glommio::{LocalExecutorBuilder, Placement};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A shard's partitions, and topic data that answers every call with `Forgotten` (naming the
/// shard that ran it is what the routing test needs).
struct TestExec {
    table: PartitionTable,
    /// Partition whose first Status call blocks this shard's thread for this long.
    stall: Option<(i32, Duration)>,
    stalled_once: std::cell::Cell<bool>,
}

impl Executor for TestExec {
    fn partition(&self, partition: i32, op: PartitionOp) -> PartitionCall {
        if let Some((p, how_long)) = self.stall {
            if p == partition && !self.stalled_once.replace(true) {
                // A shard stuck in a blocking call: nothing else on this thread runs.
                std::thread::sleep(how_long);
            }
        }
        self.table.execute(partition, op)
    }

    fn data(&self, _op: DataOp) -> Pin<Box<dyn Future<Output = DataReply>>> {
        Box::pin(std::future::ready(DataReply::Forgotten))
    }

    fn txn(
        &self,
        _partition: i32,
        _req: TxnRequest,
    ) -> Pin<Box<dyn Future<Output = Result<TxnResponse, i16>>>> {
        Box::pin(std::future::ready(Err(-1)))
    }
}

fn exec(shard: usize, shards: usize, stall: Option<(i32, Duration)>) -> Rc<dyn Executor> {
    Rc::new(TestExec {
        table: PartitionTable::new(shard, shards, 50, engine::group::GroupConfig::default()),
        stall,
        stalled_once: Default::default(),
    })
}

#[test]
fn every_partition_is_served_by_its_owner_from_every_shard() {
    let shards = 2;
    let partitions = 50;
    let mesh = router::mesh(shards);
    let handles: Vec<_> = (0..shards)
        .map(|_| {
            let mesh = mesh.clone();
            LocalExecutorBuilder::new(Placement::Unbound)
                .io_memory(1 << 16)
                .spawn(move || async move {
                    let router = Router::join(Some(mesh), |shard, n| exec(shard, n, None))
                        .await
                        .unwrap();
                    let mut remote = 0;
                    for p in 0..partitions {
                        match router.partition(p, PartitionOp::Status).await {
                            PartitionReply::Status {
                                partition, shard, ..
                            } => {
                                assert_eq!(partition, p);
                                assert_eq!(shard, router::owner_of(p, shards));
                                if shard != router.shard() {
                                    remote += 1;
                                }
                            }
                            other => panic!("partition {p}: {other:?}"),
                        }
                    }
                    // A data call is routed by shard index, not by partition number.
                    for s in 0..shards {
                        assert_eq!(
                            router.data(s, DataOp::Forget).await,
                            Some(DataReply::Forgotten)
                        );
                    }
                    // Keep serving the peer until it has finished its own sweep.
                    glommio::timer::sleep(Duration::from_millis(200)).await;
                    remote
                })
                .unwrap()
        })
        .collect();
    let remote: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // Each shard reached the 25 partitions it does not own through the mesh.
    assert_eq!(remote, vec![25, 25]);
}

#[test]
fn a_call_into_a_stalled_shard_fails_within_the_bound_and_the_shard_serves_again_after() {
    // Shard 0 blocks its thread for longer than the bound on the first call for partition 0;
    // shard 1 is the caller.
    let stall = STALL_BOUND + Duration::from_secs(2);
    let mesh = router::mesh(2);
    let done = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let mesh = mesh.clone();
            let done = done.clone();
            LocalExecutorBuilder::new(Placement::Unbound)
                .io_memory(1 << 16)
                .spawn(move || async move {
                    let router = Router::join(Some(mesh), |shard, n| {
                        exec(shard, n, (shard == 0).then_some((0, stall)))
                    })
                    .await
                    .unwrap();
                    if router.shard() == 0 {
                        while !done.load(Ordering::Acquire) {
                            glommio::timer::sleep(Duration::from_millis(20)).await;
                        }
                        return None;
                    }
                    // Let both shards beat once, so neither counts as still starting.
                    glommio::timer::sleep(Duration::from_millis(300)).await;
                    let started = Instant::now();
                    let first = router.partition(0, PartitionOp::Status).await;
                    let failed_after = started.elapsed();
                    // While the peer is known to be stalled, new calls fail at once.
                    let during = Instant::now();
                    let second = router.partition(2, PartitionOp::Status).await;
                    let second_took = during.elapsed();
                    // Once it runs again, calls are answered again.
                    let recovered = loop {
                        match router.partition(2, PartitionOp::Status).await {
                            PartitionReply::Status { shard: 0, .. } => break started.elapsed(),
                            PartitionReply::Unavailable => {
                                assert!(started.elapsed() < stall + Duration::from_secs(5));
                                glommio::timer::sleep(Duration::from_millis(50)).await;
                            }
                            other => panic!("{other:?}"),
                        }
                    };
                    done.store(true, Ordering::Release);
                    Some((first, failed_after, second, second_took, recovered))
                })
                .unwrap()
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let (first, failed_after, second, second_took, recovered) = results
        .into_iter()
        .flatten()
        .next()
        .expect("shard 1 reports");
    assert_eq!(first, PartitionReply::Unavailable, "the stalled call fails");
    assert!(
        failed_after + router::BEAT * 2 >= STALL_BOUND && failed_after < stall,
        "failed after {failed_after:?}: the bound is {STALL_BOUND:?}, the stall {stall:?}"
    );
    assert_eq!(second, PartitionReply::Unavailable);
    assert!(second_took < Duration::from_millis(100), "{second_took:?}");
    assert!(recovered >= stall, "answered again after {recovered:?}");
}
