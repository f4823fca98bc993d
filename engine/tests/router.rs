//! The cross-shard path: calls for partitions owned by another shard cross cores and come back.

use engine::partition::{PartitionOp, PartitionReply, PartitionTable};
use engine::router::{self, LocalExec, Router};
use glommio::{LocalExecutorBuilder, Placement};
use std::rc::Rc;

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
                    let router = Router::join(Some(mesh), |shard, n| -> LocalExec {
                        let table = Rc::new(PartitionTable::new(
                            shard,
                            n,
                            partitions,
                            engine::group::GroupConfig::default(),
                        ));
                        Rc::new(move |p, op| table.execute(p, op))
                    })
                    .await
                    .unwrap();
                    let mut remote = 0;
                    for p in 0..partitions {
                        match router.call(p, PartitionOp::Status).await {
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
                    // Keep serving the peer until it has finished its own sweep.
                    glommio::timer::sleep(std::time::Duration::from_millis(200)).await;
                    remote
                })
                .unwrap()
        })
        .collect();
    let remote: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // Each shard reached the 25 partitions it does not own through the mesh.
    assert_eq!(remote, vec![25, 25]);
}
