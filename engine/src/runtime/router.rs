//! Calls between shards, written down once: a typed route, the cross-core mesh, and the bound
//! on how long a caller waits for a shard that stopped running.
//!
//! Two kinds of state live on exactly one shard and are touched by no other thread:
//! `__consumer_offsets` partition `p` (owned by shard `p % shards`, [`owner_of`]) and topic
//! partitions (owned by `data::owner_shard`). A handler names what it wants —
//! [`Router::partition`] with a partition number, [`Router::data`] with the owning shard's index
//! — and never both through one overloaded number. A call for local state is a plain function
//! call; a call for another shard's state crosses cores as a message on glommio's lock-free
//! single-producer/single-consumer channels (one per ordered pair of shards, a full mesh), and
//! the reply comes back over the same mesh and wakes the waiting connection task.
//!
//! The bound: every shard stores a heartbeat (milliseconds since the mesh was built) every
//! [`BEAT`]; a watchdog on each shard fails the calls it has waiting on a peer whose heartbeat is
//! older than [`STALL_BOUND`], and fails new calls to that peer at once until it beats again. A
//! call is not cut for being long — a JoinGroup legitimately waits for its rebalance, and the
//! group state machine bounds that wait itself — only for waiting on a shard that is not running.
//! A peer that panicked ends the whole process instead (see `main.rs`), so no call waits on a
//! dead shard.

use crate::data::{DataOp, DataReply};
use crate::oneshot::OneShot;
use crate::runtime::partition::{PartitionCall, PartitionOp, PartitionReply};
use coordinator::txn::{TxnRequest, TxnResponse};
use glommio::channels::channel_mesh::{Full, MeshBuilder, Senders};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bound on messages queued from one shard to another; a full channel makes the sender wait,
/// which pushes back on the connections producing the load.
pub const MESH_CHANNEL_CAPACITY: usize = 1024;

/// How often a shard records that it is running.
pub const BEAT: Duration = Duration::from_millis(100);

/// A peer that has not beaten for this long is stalled: calls waiting on it fail with
/// [`PartitionReply::Unavailable`] (COORDINATOR_NOT_AVAILABLE, which clients retry) or `None`
/// (data calls). Every step a shard takes between two awaits is bounded to about a millisecond
/// (batches, snapshot and compaction slices, replay chunks), so a healthy shard beats on time
/// by three orders of magnitude.
pub const STALL_BOUND: Duration = Duration::from_secs(5);

/// How often the watchdog looks at its peers' heartbeats.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// What one shard asks of another.
pub enum Call {
    Partition {
        partition: i32,
        op: PartitionOp,
    },
    Data(DataOp),
    /// An operation on a `__transaction_state` partition.
    Txn {
        partition: i32,
        req: TxnRequest,
    },
}

/// What comes back.
pub enum Answer {
    Partition(PartitionReply),
    Data(DataReply),
    /// A transaction coordinator's answer, or the error code its partition gave instead.
    Txn(Result<TxnResponse, i16>),
}

/// Messages between shards. One mesh carries both directions so that a shard's index in it is
/// one number (glommio numbers peers per mesh, in join order).
pub enum Envelope {
    Call { id: u64, call: Call },
    Reply { id: u64, answer: Answer },
}

/// Runs the operations on a shard's own state: its `__consumer_offsets` partitions and its topic
/// partitions (`runtime::shard::ShardExec`; tests bring their own).
pub trait Executor {
    fn partition(&self, partition: i32, op: PartitionOp) -> PartitionCall;
    fn data(&self, op: DataOp) -> Pin<Box<dyn Future<Output = DataReply>>>;
    fn txn(
        &self,
        partition: i32,
        req: TxnRequest,
    ) -> Pin<Box<dyn Future<Output = Result<TxnResponse, i16>>>>;
}

/// The mesh every shard joins, and the heartbeats they share.
#[derive(Clone)]
pub struct Mesh {
    builder: MeshBuilder<Envelope, Full>,
    beats: Arc<Beats>,
}

/// One heartbeat per shard: milliseconds since `epoch`, plus one (0 = not yet beaten).
struct Beats {
    epoch: Instant,
    last: Vec<AtomicU64>,
}

impl Beats {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }
}

pub fn mesh(shards: usize) -> Mesh {
    Mesh {
        builder: MeshBuilder::full(shards, MESH_CHANNEL_CAPACITY),
        beats: Arc::new(Beats {
            epoch: Instant::now(),
            last: (0..shards).map(|_| AtomicU64::new(0)).collect(),
        }),
    }
}

/// Kafka's partition for a group (reference §1.3) → the shard that owns it.
pub fn owner_of(partition: i32, shards: usize) -> usize {
    partition as usize % shards
}

type Slot = Rc<OneShot<Option<Answer>>>;

pub struct Router {
    shard: usize,
    shards: usize,
    senders: Option<Senders<Envelope>>,
    beats: Option<Arc<Beats>>,
    /// Calls waiting for a reply: id → (the peer asked, where the answer goes).
    pending: RefCell<hashbrown::HashMap<u64, (usize, Slot)>>,
    next_id: Cell<u64>,
    /// Peers the watchdog found stalled; calls to them fail at once until they beat again.
    stalled: RefCell<Vec<bool>>,
    exec: Rc<dyn Executor>,
}

impl Router {
    /// Join the mesh (waits until every shard has joined) and start the tasks that serve calls
    /// from peers, deliver their replies, beat, and watch the peers' beats. With one shard there
    /// is no mesh at all.
    ///
    /// `make_exec(shard, shards)` builds the executor of this shard's own state once the shard
    /// knows its index.
    pub async fn join(
        mesh: Option<Mesh>,
        make_exec: impl FnOnce(usize, usize) -> Rc<dyn Executor>,
    ) -> anyhow::Result<Rc<Router>> {
        let Some(Mesh { builder, beats }) = mesh else {
            return Ok(Rc::new(Router {
                shard: 0,
                shards: 1,
                senders: None,
                beats: None,
                pending: RefCell::default(),
                next_id: Cell::new(0),
                stalled: RefCell::new(vec![false]),
                exec: make_exec(0, 1),
            }));
        };
        let shards = builder.nr_peers();
        assert_eq!(beats.last.len(), shards, "one heartbeat per shard");
        let (senders, mut receivers) = builder
            .join()
            .await
            .map_err(|_| anyhow::anyhow!("joining the shard mesh failed"))?;
        let shard = senders.peer_id();
        let router = Rc::new(Router {
            shard,
            shards,
            senders: Some(senders),
            beats: Some(beats.clone()),
            pending: RefCell::default(),
            next_id: Cell::new(0),
            stalled: RefCell::new(vec![false; shards]),
            exec: make_exec(shard, shards),
        });
        beats.last[shard].store(beats.now_ms(), Ordering::Release);
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
        let weak = Rc::downgrade(&router);
        glommio::spawn_local(async move {
            let mut since_watch = Duration::ZERO;
            loop {
                glommio::timer::sleep(BEAT).await;
                let Some(router) = weak.upgrade() else { break };
                beats.last[shard].store(beats.now_ms(), Ordering::Release);
                since_watch += BEAT;
                if since_watch >= WATCH_EVERY {
                    since_watch = Duration::ZERO;
                    router.watch();
                }
            }
        })
        .detach();
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
            Envelope::Call { id, call } => {
                let fut: Pin<Box<dyn Future<Output = Answer>>> = match call {
                    Call::Partition { partition, op } => {
                        let f = self.exec.partition(partition, op);
                        Box::pin(async move { Answer::Partition(f.await) })
                    }
                    Call::Data(op) => {
                        let f = self.exec.data(op);
                        Box::pin(async move { Answer::Data(f.await) })
                    }
                    Call::Txn { partition, req } => {
                        let f = self.exec.txn(partition, req);
                        Box::pin(async move { Answer::Txn(f.await) })
                    }
                };
                let me = self.clone();
                glommio::spawn_local(async move {
                    let answer = fut.await;
                    if let Some(tx) = &me.senders {
                        // The peer only goes away at shutdown; its caller is gone with it.
                        let _ = tx.send_to(peer, Envelope::Reply { id, answer }).await;
                    }
                })
                .detach();
            }
            Envelope::Reply { id, answer } => {
                // No entry: the watchdog failed the call while the peer was stalled; the caller
                // has its answer already and this late one is dropped.
                if let Some((_, slot)) = self.pending.borrow_mut().remove(&id) {
                    slot.complete(Some(answer));
                }
            }
        }
    }

    /// Fail the calls waiting on peers that stopped beating, and remember which peers those are.
    fn watch(&self) {
        let Some(beats) = &self.beats else { return };
        let now = beats.now_ms();
        let bound = STALL_BOUND.as_millis() as u64;
        let mut stalled = self.stalled.borrow_mut();
        for peer in (0..self.shards).filter(|p| *p != self.shard) {
            let last = beats.last[peer].load(Ordering::Acquire);
            // A peer that has not beaten yet is still starting (joining the mesh is not done).
            let is_stalled = last != 0 && now.saturating_sub(last) > bound;
            if is_stalled && !stalled[peer] {
                tracing::error!(
                    peer,
                    silent_ms = now.saturating_sub(last),
                    "shard stopped running: failing the calls waiting on it"
                );
            } else if !is_stalled && stalled[peer] {
                tracing::warn!(peer, "shard is running again");
            }
            stalled[peer] = is_stalled;
        }
        drop(stalled);
        let stalled = self.stalled.borrow();
        let failed: Vec<Slot> = {
            let mut pending = self.pending.borrow_mut();
            let ids: Vec<u64> = pending
                .iter()
                .filter(|(_, (peer, _))| stalled[*peer])
                .map(|(id, _)| *id)
                .collect();
            ids.into_iter()
                .filter_map(|id| pending.remove(&id).map(|(_, slot)| slot))
                .collect()
        };
        for slot in failed {
            slot.complete(None);
        }
    }

    /// Run `op` on the shard that owns `__consumer_offsets` partition `partition`.
    ///
    /// Not an `async fn`: a local call hands `op` to the partition at once and returns what the
    /// partition made of it — usually the answer itself ([`PartitionCall::ready`]), so a
    /// heartbeat to a local group allocates no future at all. Only a cross-shard call is a boxed
    /// future (holding the router, so the call outlives the caller's borrow).
    pub fn partition(self: &Rc<Self>, partition: i32, op: PartitionOp) -> PartitionCall {
        let owner = owner_of(partition, self.shards);
        if owner == self.shard {
            return self.exec.partition(partition, op);
        }
        let router = self.clone();
        PartitionCall::Elsewhere(Box::pin(async move {
            match router
                .remote(owner, Call::Partition { partition, op })
                .await
            {
                Some(Answer::Partition(r)) => r,
                Some(Answer::Data(_) | Answer::Txn(_)) => {
                    unreachable!("a partition call answered with another kind of reply")
                }
                None => PartitionReply::Unavailable,
            }
        }))
    }

    /// Run a topic-data operation on shard `owner` (its index: `data::owner_shard`). `None`:
    /// that shard could not answer (stalled, or shutting down).
    pub async fn data(&self, owner: usize, op: DataOp) -> Option<DataReply> {
        assert!(
            owner < self.shards,
            "data route {owner} of {} shards",
            self.shards
        );
        if owner == self.shard {
            return Some(self.exec.data(op).await);
        }
        match self.remote(owner, Call::Data(op)).await {
            Some(Answer::Data(r)) => Some(r),
            Some(Answer::Partition(_) | Answer::Txn(_)) => {
                unreachable!("a data call answered with another kind of reply")
            }
            None => None,
        }
    }

    /// Run `op` on the shard that owns `__transaction_state` partition `partition` (the same
    /// placement as `__consumer_offsets` partitions); `None` when that shard cannot answer.
    pub async fn txn(&self, partition: i32, req: TxnRequest) -> Option<Result<TxnResponse, i16>> {
        let owner = owner_of(partition, self.shards);
        if owner == self.shard {
            return Some(self.exec.txn(partition, req).await);
        }
        match self.remote(owner, Call::Txn { partition, req }).await {
            Some(Answer::Txn(r)) => Some(r),
            Some(Answer::Partition(_) | Answer::Data(_)) => {
                unreachable!("a transaction call answered with another kind of reply")
            }
            None => None,
        }
    }

    /// Send `call` to `owner` and wait for its answer, or for the watchdog to give up on it.
    async fn remote(&self, owner: usize, call: Call) -> Option<Answer> {
        let senders = self.senders.as_ref().expect("remote calls have a mesh");
        if self.stalled.borrow()[owner] {
            return None;
        }
        let id = self.next_id.get();
        self.next_id.set(id.wrapping_add(1));
        let slot: Slot = OneShot::new();
        self.pending.borrow_mut().insert(id, (owner, slot.clone()));
        // The send itself may wait (the peer's channel is full); the watchdog completing the
        // slot ends that wait too.
        let send = async {
            if senders
                .send_to(owner, Envelope::Call { id, call })
                .await
                .is_err()
            {
                if let Some((_, slot)) = self.pending.borrow_mut().remove(&id) {
                    slot.complete(None);
                }
            }
            std::future::pending::<Option<Answer>>().await
        };
        let answer = futures_lite::future::or(slot.wait(), send).await;
        debug_assert!(
            !self.pending.borrow().contains_key(&id),
            "an answered call is no longer pending"
        );
        answer
    }
}
