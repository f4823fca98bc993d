//! Group → `__consumer_offsets` partition → owning shard → cross-core call, written down once.
//!
//! Partition `p` is owned by shard `p % shards` and its state is touched by no other thread. A
//! request that arrives on another shard crosses cores as a message on glommio's lock-free
//! single-producer/single-consumer channels (one per ordered pair of shards, built as a full
//! mesh); the reply comes back over the same mesh and wakes the waiting connection task. A
//! request for a local partition is a plain function call.
//!
//! The operation type is [`crate::partition::PartitionOp`]; the group APIs add their requests
//! there. The router itself knows nothing of what an operation means.

use crate::oneshot::OneShot;
use crate::partition::{PartitionOp, PartitionReply};
use glommio::channels::channel_mesh::{Full, MeshBuilder, Senders};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

/// Messages between shards. One mesh carries both directions so that a shard's index in it is
/// one number (glommio numbers peers per mesh, in join order).
pub enum Envelope {
    Call {
        id: u64,
        partition: i32,
        op: PartitionOp,
    },
    Reply {
        id: u64,
        reply: PartitionReply,
    },
}

/// Bound on messages queued from one shard to another; a full channel makes the sender wait,
/// which pushes back on the connections producing the load.
pub const MESH_CHANNEL_CAPACITY: usize = 1024;

pub type Mesh = MeshBuilder<Envelope, Full>;

pub fn mesh(shards: usize) -> Mesh {
    MeshBuilder::full(shards, MESH_CHANNEL_CAPACITY)
}

/// Kafka's partition for a group (reference §1.3), and the shard that owns it.
pub fn owner_of(partition: i32, shards: usize) -> usize {
    partition as usize % shards
}

/// Executes an operation on a partition this shard owns.
pub type LocalExec = Rc<dyn Fn(i32, PartitionOp) -> Pin<Box<dyn Future<Output = PartitionReply>>>>;

pub struct Router {
    shard: usize,
    shards: usize,
    senders: Option<Senders<Envelope>>,
    pending: RefCell<hashbrown::HashMap<u64, Rc<OneShot<PartitionReply>>>>,
    next_id: Cell<u64>,
    exec: LocalExec,
}

impl Router {
    /// Join the mesh (waits until every shard has joined) and start the tasks that serve calls
    /// from peers and deliver their replies. With one shard there is no mesh at all.
    ///
    /// `make_exec(shard, shards)` builds the executor of this shard's own partitions once the
    /// shard knows its index.
    pub async fn join(
        mesh: Option<Mesh>,
        make_exec: impl FnOnce(usize, usize) -> LocalExec,
    ) -> anyhow::Result<Rc<Router>> {
        let Some(mesh) = mesh else {
            let exec = make_exec(0, 1);
            return Ok(Rc::new(Router {
                shard: 0,
                shards: 1,
                senders: None,
                pending: RefCell::default(),
                next_id: Cell::new(0),
                exec,
            }));
        };
        let shards = mesh.nr_peers();
        let (senders, mut receivers) = mesh
            .join()
            .await
            .map_err(|_| anyhow::anyhow!("joining the shard mesh failed"))?;
        let exec = make_exec(senders.peer_id(), shards);
        let router = Rc::new(Router {
            shard: senders.peer_id(),
            shards,
            senders: Some(senders),
            pending: RefCell::default(),
            next_id: Cell::new(0),
            exec,
        });
        for (peer, rx) in receivers.streams() {
            let weak = Rc::downgrade(&router);
            glommio::spawn_local(async move {
                while let Some(msg) = rx.recv().await {
                    let Some(router) = weak.upgrade() else { break };
                    router.on_message(peer, msg);
                }
            })
            .detach();
        }
        Ok(router)
    }

    pub fn shard(&self) -> usize {
        self.shard
    }

    pub fn shards(&self) -> usize {
        self.shards
    }

    fn on_message(self: &Rc<Self>, peer: usize, msg: Envelope) {
        match msg {
            Envelope::Call { id, partition, op } => {
                let fut = (self.exec)(partition, op);
                let me = self.clone();
                glommio::spawn_local(async move {
                    let reply = fut.await;
                    if let Some(tx) = &me.senders {
                        // The peer only goes away at shutdown; its caller is gone with it.
                        let _ = tx.send_to(peer, Envelope::Reply { id, reply }).await;
                    }
                })
                .detach();
            }
            Envelope::Reply { id, reply } => {
                if let Some(slot) = self.pending.borrow_mut().remove(&id) {
                    slot.complete(reply);
                }
            }
        }
    }

    /// Run `op` on the shard that owns `partition` and return its reply.
    ///
    /// Not an `async fn`: a local call hands `op` to the partition at once and returns the
    /// partition's own future, so the caller's future does not carry the operation (or the
    /// cross-shard send with its envelope) across its await. That keeps the future of every group
    /// request small — it is moved into a box per request.
    pub fn call(
        &self,
        partition: i32,
        op: PartitionOp,
    ) -> Pin<Box<dyn Future<Output = PartitionReply> + '_>> {
        let owner = owner_of(partition, self.shards);
        if self.senders.is_none() || owner == self.shard {
            return (self.exec)(partition, op);
        }
        Box::pin(self.call_remote(owner, partition, op))
    }

    async fn call_remote(&self, owner: usize, partition: i32, op: PartitionOp) -> PartitionReply {
        let senders = self.senders.as_ref().expect("remote calls have a mesh");
        let id = self.next_id.get();
        self.next_id.set(id.wrapping_add(1));
        let slot = OneShot::new();
        self.pending.borrow_mut().insert(id, slot.clone());
        if senders
            .send_to(owner, Envelope::Call { id, partition, op })
            .await
            .is_err()
        {
            self.pending.borrow_mut().remove(&id);
            return PartitionReply::Unavailable;
        }
        slot.wait().await
    }
}
