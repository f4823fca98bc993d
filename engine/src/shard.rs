//! One shard: a glommio executor pinned to one core, with its slice of `__consumer_offsets`
//! partitions, its connections, and its end of the cross-shard mesh.

use crate::broker::Broker;
use crate::router::Router;
use glommio::net::TcpStream;
use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;

pub struct Shard {
    pub broker: Arc<Broker>,
    pub router: Rc<Router>,
    pub conns: Rc<ConnRegistry>,
    /// This shard's partitions; also where its measurements accumulate.
    pub table: Rc<crate::partition::PartitionTable>,
}

/// The live connections of a shard, so shutdown can stop their reads and wait for them to drain.
#[derive(Default)]
pub struct ConnRegistry {
    next: Cell<u64>,
    open: RefCell<hashbrown::HashMap<u64, RawFd>>,
}

/// Removes its connection from the registry when dropped (the connection task ended).
pub struct Registration {
    id: u64,
    registry: Rc<ConnRegistry>,
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
        self.open.borrow_mut().insert(id, stream.as_raw_fd());
        Registration {
            id,
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
        for fd in self.open.borrow().values() {
            // SAFETY: the fd belongs to a live connection (its Registration, which removes the
            // entry, is dropped only after the stream is closed), and shutdown(2) does not free it.
            unsafe { libc::shutdown(*fd, libc::SHUT_RD) };
        }
    }
}
