//! One shard: a glommio executor pinned to one core, with its slice of `__consumer_offsets`
//! partitions, its topic partitions, its connections, its background tasks, and its end of the
//! cross-shard mesh.

use crate::broker::Broker;
use crate::data::{DataOp, DataReply, DataStore};
use crate::group::{GroupOverridesMap, RequestContext};
use crate::runtime::partition::{PartitionCall, PartitionOp, PartitionTable};
use crate::runtime::router::{Executor, Router};
use crate::runtime::tasks::Tasks;
use crate::runtime::txn::TxnTable;
use crate::topics::TopicsSnapshot;
use arc_swap::ArcSwap;
use coordinator::txn::{TxnRequest, TxnResponse};
use glommio::net::TcpStream;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use wire::{Request, Response};

pub struct Shard {
    pub broker: Arc<Broker>,
    pub router: Rc<Router>,
    pub conns: Rc<ConnRegistry>,
    /// This shard's partitions; also where its measurements accumulate.
    pub table: Rc<PartitionTable>,
    pub tasks: Rc<Tasks>,
    /// Answers one decoded request (the API layer, `api::handle`; the runtime does not know
    /// what a request means).
    pub handler: Handler,
    /// This shard's view of the topic registry and the per-group configs.
    pub snapshots: RefCell<Snapshots>,
    /// Requests of this shard's connections that are waiting (see `conn::Backlog`).
    pub backlog: Rc<Backlog>,
}

/// The shared snapshots as one shard last saw them: checking that they are still current is
/// one relaxed read each, and holding them takes no reference on an object every shard shares.
pub struct Snapshots {
    pub topics: arc_swap::Cache<Arc<ArcSwap<TopicsSnapshot>>, Arc<TopicsSnapshot>>,
    pub group_configs: arc_swap::Cache<Arc<ArcSwap<GroupOverridesMap>>, Arc<GroupOverridesMap>>,
}

impl Snapshots {
    pub fn new(broker: &Broker) -> Self {
        Self {
            topics: broker.topics.cache(),
            group_configs: broker.group_configs.cache(),
        }
    }
}

/// Request contexts one connection keeps at most (one per API version it uses; the group APIs
/// of one client use a handful).
const CONTEXTS_PER_CALLER: usize = 8;

/// Who is asking, for the member records Kafka keeps (client id, "/ip" host).
#[derive(Debug)]
pub struct Caller {
    pub client_id: String,
    pub client_host: String,
    /// Who the connection authenticated as (`User:ANONYMOUS` on a PLAINTEXT listener): what
    /// ACLs are checked against.
    pub principal: Arc<security::Principal>,
    /// The listener the request arrived on: Metadata, FindCoordinator and DescribeCluster answer
    /// with its advertised endpoint, as Kafka does.
    pub listener: Arc<crate::listeners::Listener>,
    /// Contexts built for this caller's group requests, reused while the API version, the topics
    /// and the group configs stay the same ([`Shard::request_context`]).
    contexts: RefCell<Vec<Arc<RequestContext>>>,
}

impl Caller {
    pub fn new(
        client_id: String,
        client_host: String,
        principal: Arc<security::Principal>,
        listener: Arc<crate::listeners::Listener>,
    ) -> Self {
        Self {
            client_id,
            client_host,
            principal,
            listener,
            contexts: RefCell::default(),
        }
    }
}

impl Shard {
    /// The context of a group request from `caller` at `api_version`: the one built for its
    /// previous request of that version while the topics and group configs have not changed
    /// since, so a heartbeat neither copies the caller's strings nor takes a reference on the
    /// shared snapshots. Entries built on replaced snapshots are dropped at the next miss.
    pub fn request_context(&self, caller: &Caller, api_version: i16) -> Arc<RequestContext> {
        let mut snapshots = self.snapshots.borrow_mut();
        let Snapshots {
            topics,
            group_configs,
        } = &mut *snapshots;
        let (topics, group_configs) = (topics.load(), group_configs.load());
        let mut contexts = caller.contexts.borrow_mut();
        if let Some(c) = contexts.iter().find(|c| c.api_version == api_version) {
            if Arc::ptr_eq(&c.topics, topics) && Arc::ptr_eq(&c.group_configs, group_configs) {
                return c.clone();
            }
        }
        // Drop every entry built on older snapshots too, not just this version's: a connection
        // should not keep a replaced topics snapshot alive until it next uses that version.
        contexts.retain(|c| {
            c.api_version != api_version
                && Arc::ptr_eq(&c.topics, topics)
                && Arc::ptr_eq(&c.group_configs, group_configs)
        });
        if contexts.len() >= CONTEXTS_PER_CALLER {
            contexts.remove(0);
        }
        let c = Arc::new(RequestContext {
            client_id: caller.client_id.clone(),
            client_host: caller.client_host.clone(),
            api_version,
            topics: topics.clone(),
            group_configs: group_configs.clone(),
            topic_filter: self.broker.acls.clone().map(|store| {
                let (principal, host) = (caller.principal.clone(), caller.client_host.clone());
                crate::group::TopicFilter(Arc::new(move |topic: &str| {
                    crate::acls::allowed(
                        Some(&store),
                        &principal,
                        &host,
                        security::acl::AclOperation::Describe,
                        security::acl::ResourceType::Topic,
                        topic,
                    )
                }))
            }),
        });
        contexts.push(c.clone());
        c
    }
}

/// A request's answer, or why the connection must close.
pub type Answer = Result<Response, String>;

/// What the API layer made of a request.
pub enum Handled {
    /// Answered while it ran (a heartbeat to a group on this shard whose reply needed no
    /// write to become durable first, ApiVersions, FindCoordinator, DescribeConfigs,
    /// DescribeCluster): no future was allocated for it. It still takes its place in the
    /// connection's response order.
    Done(Answer),
    /// It may have to wait (a parked JoinGroup, a reply behind records not yet durable, a call
    /// to another shard): the connection polls it once, and runs it as a task with a place in
    /// the response order if it is not done.
    Waiting(Pin<Box<dyn Future<Output = Answer>>>),
}

/// The API layer's entry point (the request's API version, then the request). A function
/// pointer, so the runtime depends on no handler.
pub type Handler = fn(&Rc<Shard>, &Rc<Caller>, i16, Request) -> Handled;

/// What a shard runs for itself and for calls from its peers.
pub struct ShardExec {
    pub table: Rc<PartitionTable>,
    pub store: Rc<DataStore>,
    pub txns: Rc<TxnTable>,
    /// A node of a cluster: its replicated `__consumer_offsets` partitions, once opened (the
    /// table above is then unused). None on a single node.
    pub replicas: Option<RefCell<Option<Rc<crate::runtime::replicated::ReplicaSet>>>>,
}

impl Executor for ShardExec {
    fn partition(&self, partition: i32, op: PartitionOp) -> PartitionCall {
        match &self.replicas {
            None => self.table.execute(partition, op),
            Some(set) => match set.borrow().as_ref() {
                Some(set) => set.execute(partition, op),
                // Still opening the partitions' logs: the client retries.
                None => {
                    PartitionCall::Ready(Some(crate::runtime::partition::PartitionReply::Loading))
                }
            },
        }
    }

    fn data(&self, op: DataOp) -> Pin<Box<dyn Future<Output = DataReply>>> {
        self.store.execute(op)
    }

    fn txn(
        &self,
        partition: i32,
        req: TxnRequest,
    ) -> Pin<Box<dyn Future<Output = Result<TxnResponse, i16>>>> {
        self.txns.execute(partition, req)
    }
}

/// The live connections of a shard, so shutdown can stop their reads and wait for them to drain,
/// and so idle connections (`connections.max.idle.ms`) are found by one sweep per shard instead
/// of a timer armed for every read.
#[derive(Default)]
pub struct ConnRegistry {
    next: Cell<u64>,
    open: RefCell<hashbrown::HashMap<u64, Rc<ConnEntry>>>,
}

/// What the registry knows of one connection.
pub struct ConnEntry {
    fd: RawFd,
    /// When the connection last completed a request (or was accepted).
    last_request: Cell<Instant>,
    /// Set when the idle sweep stopped its reads.
    idle_closed: Cell<bool>,
}

/// Removes its connection from the registry when dropped (the connection task ended).
pub struct Registration {
    id: u64,
    entry: Rc<ConnEntry>,
    registry: Rc<ConnRegistry>,
}

impl Registration {
    /// A complete request arrived at `now`: the connection is not idle.
    pub fn touch(&self, now: Instant) {
        self.entry.last_request.set(now);
    }

    /// Whether the idle sweep ended this connection's reads.
    pub fn closed_for_idle(&self) -> bool {
        self.entry.idle_closed.get()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.open.borrow_mut().remove(&self.id);
    }
}

impl ConnRegistry {
    pub fn register(self: &Rc<Self>, stream: &TcpStream) -> Registration {
        let id = self.next.get();
        self.next.set(id + 1);
        let entry = Rc::new(ConnEntry {
            fd: stream.as_raw_fd(),
            last_request: Cell::new(Instant::now()),
            idle_closed: Cell::new(false),
        });
        self.open.borrow_mut().insert(id, entry.clone());
        Registration {
            id,
            entry,
            registry: self.clone(),
        }
    }

    pub fn len(&self) -> usize {
        self.open.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.borrow().is_empty()
    }

    /// Stop reading on every connection: a pending read returns end-of-stream, the reader stops
    /// taking requests, and the writer finishes the ones already in flight before closing.
    pub fn stop_reading(&self) {
        for e in self.open.borrow().values() {
            // SAFETY: the fd belongs to a live connection (its Registration, which removes the
            // entry, is dropped only after the stream is closed), and shutdown(2) does not free it.
            unsafe { libc::shutdown(e.fd, libc::SHUT_RD) };
        }
    }

    /// Stop reading on every connection that completed no request for `idle`: like
    /// [`ConnRegistry::stop_reading`], its in-flight responses are still written before it
    /// closes. Returns how many were closed now.
    pub fn close_idle(&self, now: Instant, idle: Duration) -> usize {
        let mut closed = 0;
        for e in self.open.borrow().values() {
            if !e.idle_closed.get() && now.saturating_duration_since(e.last_request.get()) >= idle {
                e.idle_closed.set(true);
                // SAFETY: as in stop_reading.
                unsafe { libc::shutdown(e.fd, libc::SHUT_RD) };
                closed += 1;
            }
        }
        closed
    }
}

/// How often a shard looks for idle connections: a fraction of the idle limit, so a connection
/// closes within about an eighth of `connections.max.idle.ms` after its deadline (Kafka's own
/// check is lazy too), at most once a second and at least every 5 ms.
pub fn idle_sweep_interval(idle: Duration) -> Duration {
    (idle / 8).clamp(Duration::from_millis(5), Duration::from_secs(1))
}

/// Requests waiting (a write for its fsync, a cross-shard call) across one shard's connections,
/// past which its readers stop starting new ones until a quarter of them are answered. A classic
/// JoinGroup or SyncGroup is not counted: it waits for the other members of its group, whose
/// requests must still be read (Kafka keeps those in its purgatory, outside its request queue). A waiting request costs about 1.5 KB (its task, its future, its waiter), so this
/// holds a storm's backlog to ~12 MB per shard; a steady load keeps far fewer waiting (one
/// commit round's worth).
pub const MAX_WAITING_PER_SHARD: usize = 8192;

/// The requests waiting on one shard, and the readers stopped until there are fewer.
#[derive(Default)]
pub struct Backlog {
    waiting: Cell<usize>,
    stopped: RefCell<Vec<Waker>>,
}

impl Backlog {
    pub fn full(&self) -> bool {
        self.waiting.get() >= MAX_WAITING_PER_SHARD
    }

    pub fn enter(self: &Rc<Self>) -> BacklogSlot {
        self.waiting.set(self.waiting.get() + 1);
        BacklogSlot(self.clone())
    }

    /// Ready once the shard has room for another waiting request.
    pub fn room(&self, cx: &mut Context<'_>) -> Poll<()> {
        if !self.full() {
            return Poll::Ready(());
        }
        self.stopped.borrow_mut().push(cx.waker().clone());
        Poll::Pending
    }
}

/// One waiting request's place in its shard's [`Backlog`], given back when the request ends
/// (answered, or dropped with its connection).
pub struct BacklogSlot(Rc<Backlog>);

impl Drop for BacklogSlot {
    fn drop(&mut self) {
        let b = &self.0;
        let n = b.waiting.get() - 1;
        b.waiting.set(n);
        // Hysteresis: wake the stopped readers together once a quarter has drained, not one
        // per answer.
        if n <= MAX_WAITING_PER_SHARD / 4 * 3 {
            let stopped = std::mem::take(&mut *b.stopped.borrow_mut());
            for w in stopped {
                w.wake();
            }
        }
    }
}
