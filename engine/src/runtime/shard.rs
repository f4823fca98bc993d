//! One shard: a glommio executor pinned to one core, with its slice of `__consumer_offsets`
//! partitions, its topic partitions, its connections, its background tasks, and its end of the
//! cross-shard mesh.

use crate::broker::Broker;
use crate::data::{DataOp, DataReply, DataStore};
use crate::runtime::partition::{PartitionOp, PartitionReply, PartitionTable};
use crate::runtime::router::{Executor, Router};
use crate::runtime::tasks::Tasks;
use glommio::net::TcpStream;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wire::{Request, RequestHeader, Response};

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
}

/// Who is asking, for the member records Kafka keeps (client id, "/ip" host).
#[derive(Debug, Clone)]
pub struct Caller {
    pub client_id: String,
    pub client_host: String,
}

/// A request's answer, or why the connection must close.
pub type Handled = Pin<Box<dyn Future<Output = Result<Response, String>>>>;

/// The API layer's entry point. A function pointer, so the runtime depends on no handler.
pub type Handler = fn(Rc<Shard>, Rc<Caller>, RequestHeader, Request) -> Handled;

/// What a shard runs for itself and for calls from its peers.
pub struct ShardExec {
    pub table: Rc<PartitionTable>,
    pub store: Rc<DataStore>,
}

impl Executor for ShardExec {
    fn partition(
        &self,
        partition: i32,
        op: PartitionOp,
    ) -> Pin<Box<dyn Future<Output = PartitionReply>>> {
        self.table.execute(partition, op)
    }

    fn data(&self, op: DataOp) -> Pin<Box<dyn Future<Output = DataReply>>> {
        self.store.execute(op)
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
