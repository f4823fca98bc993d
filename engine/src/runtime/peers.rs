//! The node-to-node link: Raft messages of the replicated `__consumer_offsets` partitions between
//! the nodes `controller.quorum.voters` names (each entry's address is that node's node-to-node
//! listener, as a KRaft controller listener is).
//!
//! Outgoing: every shard keeps one connection to each peer node for the messages of the
//! partitions it owns ([`Links`]). What a shard's replicas send between two writes goes out as
//! one write (batched per destination node and shard). A link that is down drops what it was
//! given: Raft resends what matters (appends are retried from the follower's match index,
//! heartbeats and votes are repeated every tick), so a queue that waits for a dead node would
//! only hold memory. The queue is bounded ([`LINK_QUEUE_BYTES`]); past it, messages are dropped
//! and counted. A link idle for a second also watches for the peer closing it (the peer never
//! writes on it): a node not added yet is refused that way, and connects again.
//!
//! Incoming: shard 0 accepts on this node's voter address ([`serve`]) and hands every message to
//! the shard that owns its partition through the router (`PartitionOp::Raft`).
//!
//! Wire format, big-endian: frames of `u32 length | i32 partition | payload`. The first frame of
//! a connection is the connector's hello (partition −1): [`HELLO_MAGIC`], its node id (u64), its
//! data directory's incarnation id (16 bytes, must be the one this node first knew that node id
//! by, `meta::PeerIncarnations`), its
//! `cluster.id` (u16-length string, must equal ours), the number of `__consumer_offsets`
//! partitions it runs (i32, must equal ours, or messages would reach the wrong partition), then
//! its client endpoints (u16 count, each a u16-length listener
//! name, a u16-length host and an i32 port) so FindCoordinator here can name it. The acceptor
//! answers it with one frame of partition −1 ([`Answer`]: accepted, not now, or never under this
//! node id, which stops the connector's node) and writes nothing after. Every later frame is the
//! connector's; its payload is one raft-rs message (`replication::encode`); partition −2 is the cluster's metadata
//! log (`runtime::metadata_log`, on shard 0), −3 a replicated topic partition's
//! ([`TOPIC_PARTITION`]), −4 a topic partition's re-seeding message ([`TOPIC_SEED`]), −5 the
//! metadata log's leader's view of its group ([`QUORUM_VIEW`]), −6 a topic partition's leader
//! telling a node without a replica that it leads ([`TOPIC_LEADER`]). A frame
//! longer than [`MAX_FRAME_BYTES`], a refused hello or a partition out of range closes the
//! connection.
//!
//! Must not: interpret a Raft message (the partition's replica does), or block a shard on a peer:
//! a send never waits, and a slow or dead peer costs only its own bounded queue.

use crate::cluster::{Cluster, Endpoint, NodeId};
use crate::runtime::partition::PartitionOp;
use crate::runtime::router::Router;
use crate::runtime::tasks::Shutdown;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel::{self, LocalSender};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// `RLRAFT` and the node-to-node version: 02 since every Raft message carries its sender's
/// configuration epoch and a snapshot its configuration's (`replication::Replica::conf_epoch`),
/// which a node of version 01 would not strip; 03 since re-seeding frames ([`TOPIC_SEED`]),
/// which a node of version 02 would close the connection over; 04 since the metadata log's
/// leader sends its view of the quorum ([`QUORUM_VIEW`]); 05 since a replicated topic
/// partition's Raft log carries DeleteRecords and an empty re-seeding chunk restarts the asker's
/// log (`replication::topic`), which a node of version 04 would ignore, its log start and records
/// then differing from the others'; 06 since topics may have fewer replicas than nodes (the
/// metadata log's `PlacedTopic::replicas`, which a node of version 05 would not read, opening
/// replicas the others do not count) and their leaders tell the other nodes ([`TOPIC_LEADER`],
/// which a node of version 05 would close the connection over); 07 since a partition of
/// replication factor 1 moves between nodes (the metadata log's `Command::HandOver` and
/// `PlacedTopic::handing_over`, and [`TOPIC_SEED`] frames of two more kinds, which a node of
/// version 06 would not apply or answer, leaving a move that never ends); 08 since a hello
/// carries the connector's incarnation id and is answered ([`Answer`]), which a node of version
/// 07 would not wait for.
pub const HELLO_MAGIC: &[u8; 8] = b"RLRAFT08";
/// The largest frame: one append message (`replication::MAX_MESSAGE_BYTES` of entries) plus its
/// envelope.
pub const MAX_FRAME_BYTES: usize = {
    // An append is at most MAX_MESSAGE_BYTES of entries; a snapshot at most MAX_SNAPSHOT_BYTES.
    let a = replication::MAX_MESSAGE_BYTES as usize;
    let b = replication::partition::MAX_SNAPSHOT_BYTES;
    (if a > b { a } else { b }) + (64 << 10)
};
/// Bytes one shard queues for one peer before it drops messages to it.
pub const LINK_QUEUE_BYTES: usize = 16 << 20;
/// Between two connection attempts to a peer that refused.
const RECONNECT: Duration = Duration::from_millis(200);
/// Messages from one connection handed to other shards and not answered yet, before the reader
/// waits for them (the router's channels are bounded too).
const MAX_FORWARDS: usize = 256;

/// A test failpoint: with `RINGLEADER_FAILPOINT_ISOLATE_DIR=D` set, a node drops every Raft
/// message it would send or receive while the file `D/isolate-<node.id>` exists, as if the network
/// between it and its peers were cut while its clients still reach it
/// (`tests/clients/test_cluster.py` checks that an isolated leader stops answering as coordinator
/// before another node starts). Read once; unset in production, where this costs one branch.
fn isolated(node: NodeId) -> bool {
    static DIR: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| std::env::var_os("RINGLEADER_FAILPOINT_ISOLATE_DIR").map(Into::into))
        .as_ref()
        .is_some_and(|d| d.join(format!("isolate-{node}")).exists())
}

/// One shard's connections to the peer nodes: one per node of the address book, the first
/// voters' from the start, a joined node's from the next Raft tick after the address book
/// learnt it ([`Links::open_new`]) or the first message to it, whichever comes first.
pub struct Links {
    node: NodeId,
    cluster: Arc<Cluster>,
    hello: Vec<u8>,
    shutdown: Shutdown,
    links: RefCell<BTreeMap<NodeId, Rc<Link>>>,
}

struct Link {
    /// Frames waiting for the writer.
    queue: RefCell<Vec<u8>>,
    doorbell: LocalSender<()>,
    connected: Cell<bool>,
    dropped: Cell<u64>,
}

impl Links {
    /// Start a writer task per peer. `hello` is this node's hello frame ([`hello`]).
    pub fn start(cluster: &Arc<Cluster>, hello: Vec<u8>, shutdown: Shutdown) -> Rc<Links> {
        let links = Rc::new(Links {
            node: cluster.node_id,
            cluster: cluster.clone(),
            hello,
            shutdown,
            links: RefCell::default(),
        });
        for peer in cluster.peers() {
            links.open(peer.id, peer.addr);
        }
        links
    }

    /// Start the writer task of the link to `peer` at `addr`.
    fn open(&self, peer: NodeId, addr: String) -> Rc<Link> {
        let (tx, rx) = local_channel::new_bounded(1);
        let link = Rc::new(Link {
            queue: RefCell::new(Vec::new()),
            doorbell: tx,
            connected: Cell::new(false),
            dropped: Cell::new(0),
        });
        glommio::spawn_local(write_loop(
            link.clone(),
            peer,
            addr,
            self.hello.clone(),
            rx,
            self.shutdown.clone(),
        ))
        .detach();
        self.links.borrow_mut().insert(peer, link.clone());
        link
    }

    /// Open a link to every node of the address book that has none yet (a node that joined
    /// since the start): called on every Raft tick, so the new node hears this node's hello,
    /// and learns where it serves clients, whether or not a message is due to it. Cheap when
    /// nothing changed (one length comparison, no copy of the address book).
    pub fn open_new(&self) {
        if self.cluster.book_len() == self.links.borrow().len() + 1 {
            return;
        }
        for p in self.cluster.peers() {
            if !self.links.borrow().contains_key(&p.id) {
                self.open(p.id, p.addr);
            }
        }
    }

    /// The link to `to`: opened on first use for a node the address book learnt since the
    /// start (a joined node). None: not a node of the address book.
    fn link(&self, to: NodeId) -> Option<Rc<Link>> {
        if let Some(l) = self.links.borrow().get(&to) {
            return Some(l.clone());
        }
        if to == self.node {
            return None;
        }
        let addr = self.cluster.address(to)?;
        Some(self.open(to, addr))
    }

    /// Queue `msg` (raft-rs's encoding) of `partition` for node `to`. Never waits: a link that is
    /// down or full drops it (Raft resends).
    pub fn send(&self, to: NodeId, partition: i32, msg: &[u8]) {
        let Some(link) = self.link(to) else {
            return; // not a peer (a replica never addresses anyone else)
        };
        if isolated(self.node) {
            return;
        }
        let mut q = link.queue.borrow_mut();
        // Past the bound only by one message into an empty queue: a snapshot (up to
        // MAX_FRAME_BYTES) larger than the bound must still be able to leave.
        if !link.connected.get() || (!q.is_empty() && q.len() + msg.len() + 8 > LINK_QUEUE_BYTES) {
            link.dropped.set(link.dropped.get() + 1);
            return;
        }
        let was_empty = q.is_empty();
        put_frame(&mut q, partition, msg);
        drop(q);
        if was_empty {
            let _ = link.doorbell.try_send(()); // full = the writer is due to look already
        }
    }

    /// Queue a frame of `kind` ([`TOPIC_PARTITION`]: a raft-rs message; [`TOPIC_SEED`];
    /// [`TOPIC_LEADER`]) for a topic partition: the topic id, the partition, then `msg`. Never
    /// waits, like [`Self::send`].
    pub fn send_topic_frame(
        &self,
        to: NodeId,
        kind: i32,
        topic: uuid::Uuid,
        partition: i32,
        msg: &[u8],
    ) {
        let mut framed = Vec::with_capacity(20 + msg.len());
        framed.extend_from_slice(topic.as_bytes());
        framed.extend_from_slice(&partition.to_be_bytes());
        framed.extend_from_slice(msg);
        self.send(to, kind, &framed);
    }

    /// Messages dropped so far (link down or full), over every peer.
    pub fn dropped(&self) -> u64 {
        self.links.borrow().values().map(|l| l.dropped.get()).sum()
    }
}

/// What a peer says of itself when it connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub node: NodeId,
    /// The connector's data directory (`meta::Meta::incarnation`): a peer that knew this node
    /// id by another refuses it ([`Answer::Fenced`]).
    pub incarnation: uuid::Uuid,
    pub cluster_id: String,
    pub partitions: i32,
    pub endpoints: Vec<Endpoint>,
}

/// This node's hello frame.
pub fn hello(h: &Hello) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(HELLO_MAGIC);
    p.extend_from_slice(&h.node.to_be_bytes());
    p.extend_from_slice(h.incarnation.as_bytes());
    p.extend_from_slice(&(h.cluster_id.len() as u16).to_be_bytes());
    p.extend_from_slice(h.cluster_id.as_bytes());
    let (partitions, endpoints) = (h.partitions, &h.endpoints);
    p.extend_from_slice(&partitions.to_be_bytes());
    p.extend_from_slice(&(endpoints.len() as u16).to_be_bytes());
    for e in endpoints {
        for s in [&e.listener, &e.host] {
            p.extend_from_slice(&(s.len() as u16).to_be_bytes());
            p.extend_from_slice(s.as_bytes());
        }
        p.extend_from_slice(&e.port.to_be_bytes());
    }
    let mut f = Vec::with_capacity(p.len() + 8);
    put_frame(&mut f, -1, &p);
    f
}

/// Append one frame, `u32 length | i32 partition | payload`, to `out`.
fn put_frame(out: &mut Vec<u8>, partition: i32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(&partition.to_be_bytes());
    out.extend_from_slice(payload);
}

/// A hello's payload, or why it is not one.
pub fn parse_hello(p: &[u8]) -> Result<Hello, String> {
    struct R<'a>(&'a [u8]);
    impl R<'_> {
        fn take(&mut self, n: usize) -> Result<&[u8], String> {
            if self.0.len() < n {
                return Err("hello is cut short".into());
            }
            let (a, b) = self.0.split_at(n);
            self.0 = b;
            Ok(a)
        }
        fn u16(&mut self) -> Result<u16, String> {
            Ok(u16::from_be_bytes(self.take(2)?.try_into().unwrap()))
        }
        fn i32(&mut self) -> Result<i32, String> {
            Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
        }
        fn str(&mut self) -> Result<String, String> {
            let n = self.u16()? as usize;
            String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "hello holds bad UTF-8".into())
        }
    }
    let mut r = R(p);
    let magic = r.take(8)?;
    if magic != HELLO_MAGIC {
        if magic.starts_with(b"RLRAFT") {
            return Err(format!(
                "a Ringleader node of node-to-node version {} (this node speaks {}): run one \
                 Ringleader version on every node",
                String::from_utf8_lossy(&magic[6..]),
                String::from_utf8_lossy(&HELLO_MAGIC[6..])
            ));
        }
        return Err("not a Ringleader node-to-node hello".into());
    }
    let node = u64::from_be_bytes(r.take(8)?.try_into().unwrap());
    let incarnation = uuid::Uuid::from_bytes(r.take(16)?.try_into().unwrap());
    let cluster_id = r.str()?;
    let partitions = r.i32()?;
    let n = r.u16()?;
    let mut eps = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let listener = r.str()?;
        let host = r.str()?;
        let port = r.i32()?;
        eps.push(Endpoint {
            listener,
            host,
            port,
        });
    }
    if !r.0.is_empty() {
        return Err("hello has trailing bytes".into());
    }
    Ok(Hello {
        node,
        incarnation,
        cluster_id,
        partitions,
        endpoints: eps,
    })
}

/// What the accepting node answers a hello with (a frame of partition −1: the verdict byte, then
/// the reason in UTF-8), before it reads anything else; the connector sends nothing more until
/// it is [`Answer::Accepted`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Accepted,
    /// Not now: a node not added yet, another `cluster.id`, version or partition count. The
    /// connector tries again (a joining node is accepted once the metadata log here added it).
    NotYet(String),
    /// Never under this node id: the peer knew it by another data directory
    /// (`meta::PeerIncarnations`). The connector stops its node.
    Fenced(String),
}

impl Answer {
    /// The answer's frame.
    pub fn frame(&self) -> Vec<u8> {
        let (verdict, reason) = match self {
            Answer::Accepted => (0u8, ""),
            Answer::NotYet(r) => (1, r.as_str()),
            Answer::Fenced(r) => (2, r.as_str()),
        };
        // Bounded so the frame stays far below MAX_FRAME_BYTES whatever the reason says.
        let reason = &reason.as_bytes()[..reason.len().min(4096)];
        let payload = [&[verdict][..], reason].concat();
        let mut f = Vec::with_capacity(8 + payload.len());
        put_frame(&mut f, -1, &payload);
        f
    }

    /// An answer's payload (after the partition), or why it is not one.
    pub fn parse(p: &[u8]) -> Result<Answer, String> {
        let (&verdict, reason) = p.split_first().ok_or("an empty answer")?;
        let reason = String::from_utf8_lossy(reason).into_owned();
        match verdict {
            0 if reason.is_empty() => Ok(Answer::Accepted),
            1 => Ok(Answer::NotYet(reason)),
            2 => Ok(Answer::Fenced(reason)),
            _ => Err(format!("an answer of verdict {verdict}")),
        }
    }
}

/// How long a connector waits for the answer to its hello before it drops the connection and
/// tries again (the peer checks the hello without waiting on anything but, once per peer node,
/// one small durable file write).
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// The process exit code of a node whose peer refused it for good ([`Answer::Fenced`]).
pub const EXIT_FENCED: i32 = 3;

/// Stop this node: the cluster knew its node id by another data directory (a peer refused its
/// hello, or the metadata log recorded another incarnation for it). This node lost (or
/// replaced) the disk its Raft votes and logs were on and must not take part under this id;
/// staying up would only be refused by every node that knew it.
pub fn stop_fenced(why: &str) -> ! {
    tracing::error!(
        reason = %why,
        "this data directory is not the one the cluster knew as this node.id; stopping \
         (exit code {EXIT_FENCED}). A node that lost its data directory rejoins under a new \
         node.id: remove the old one with RemoveRaftVoter (kafka-metadata-quorum \
         remove-controller), then start this node with another node.id and add it (AddRaftVoter)"
    );
    std::process::exit(EXIT_FENCED)
}

async fn write_loop(
    link: Rc<Link>,
    peer: NodeId,
    addr: String,
    hello: Vec<u8>,
    doorbell: local_channel::LocalReceiver<()>,
    shutdown: Shutdown,
) {
    let mut logged_down = false;
    let mut refused = false;
    while !shutdown.is_triggered() {
        let mut stream = match connect(&addr).await {
            Ok(s) => s,
            Err(e) => {
                if !logged_down {
                    tracing::info!(peer, %addr, error = %e, "node-to-node link down; retrying");
                    logged_down = true;
                }
                glommio::timer::sleep(RECONNECT).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        if stream.write_all(&hello).await.is_err() {
            glommio::timer::sleep(RECONNECT).await;
            continue;
        }
        logged_down = false;
        let answer = futures_lite::future::or(
            async {
                let mut buf = Vec::new();
                match read_frame(&mut stream, &mut buf).await {
                    Ok(-1) => Answer::parse(&buf),
                    Ok(p) => Err(format!("a frame of partition {p} instead of an answer")),
                    Err(e) => Err(e),
                }
            },
            async {
                glommio::timer::sleep(ANSWER_WAIT).await;
                Err(format!("no answer to the hello in {ANSWER_WAIT:?}"))
            },
        )
        .await;
        match answer {
            Ok(Answer::Accepted) => {}
            Ok(Answer::Fenced(reason)) => stop_fenced(&format!(
                "node {peer} at {addr} refused this node: {reason}"
            )),
            Ok(Answer::NotYet(reason)) | Err(reason) => {
                // Refused for now (this node is not added there yet, or a misconfiguration the
                // peer names), or a peer of another version that closes without answering:
                // said once while it lasts, and tried again less often.
                if !refused {
                    tracing::info!(peer, %addr, reason = %reason, "node-to-node hello refused; retrying");
                }
                refused = true;
                glommio::timer::sleep(RECONNECT * 5).await;
                continue;
            }
        }
        refused = false;
        tracing::info!(peer, %addr, "node-to-node link up");
        link.connected.set(true);
        loop {
            let batch = std::mem::take(&mut *link.queue.borrow_mut());
            if batch.is_empty() {
                enum Idle {
                    Ring(Option<()>),
                    Stop,
                    Closed,
                }
                let stop = async {
                    while !shutdown.is_triggered() {
                        glommio::timer::sleep(Duration::from_millis(100)).await;
                    }
                    Idle::Stop
                };
                // The peer writes nothing after its answer: a read that ends means it closed
                // the connection (it stopped), and the link reconnects now rather than at its
                // next write. Watched only once idle for a second: a busy link rings first, and
                // no read is submitted on the hot path.
                let mut byte = [0u8; 1];
                let closed = async {
                    glommio::timer::sleep(Duration::from_secs(1)).await;
                    let _ = stream.read(&mut byte).await;
                    Idle::Closed
                };
                let ring = async { Idle::Ring(doorbell.recv().await) };
                match futures_lite::future::or(ring, futures_lite::future::or(stop, closed)).await {
                    Idle::Ring(Some(())) => continue,
                    Idle::Ring(None) | Idle::Stop => {
                        link.connected.set(false);
                        return; // shutting down
                    }
                    Idle::Closed => break,
                }
            }
            if stream.write_all(&batch).await.is_err() {
                break;
            }
        }
        link.connected.set(false);
        link.queue.borrow_mut().clear();
        tracing::info!(peer, %addr, "node-to-node link lost; reconnecting");
    }
}

async fn connect(addr: &str) -> std::io::Result<glommio::net::TcpStream> {
    use std::net::ToSocketAddrs;
    let a = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{addr} resolves to no address")))?;
    glommio::net::TcpStream::connect(a)
        .await
        .map_err(std::io::Error::from)
}

/// The partition number of the cluster's metadata log's messages (`runtime::metadata_log`; the
/// `__consumer_offsets` partitions use 0..n, the hello −1).
pub const METADATA_PARTITION: i32 = -2;

/// The partition number of a replicated topic partition's messages: the payload is the topic id
/// (16 bytes), the partition (i32), then the raft-rs message. The receiving node hands it to
/// the shard that owns that topic partition (`data::owner_shard`, which may differ between
/// nodes running different numbers of shards); a topic this node does not know yet (its
/// metadata log is behind) drops the message, as a lost one.
pub const TOPIC_PARTITION: i32 = -3;

/// The partition number of a re-seeding message of a replicated topic partition, or of a move
/// of a partition of replication factor 1 (`replication::topic::SeedMsg`, `data::moving`): the
/// payload is the topic id, the partition, then the message; handed to the owning shard as
/// [`TOPIC_PARTITION`]'s are.
pub const TOPIC_SEED: i32 = -4;
/// Partition of a frame holding the metadata log's leader's view of its group
/// (`cluster::QuorumView::encode`), sent every Raft tick to the other members; kept by the
/// receiver for DescribeQuorum (`Cluster::set_leader_quorum`). One that does not decode is
/// dropped.
pub const QUORUM_VIEW: i32 = -5;
/// Partition of a frame in which the leader of a replicated topic partition tells a node that
/// holds no replica of it that it leads: the topic id, the partition, then the leader's Raft
/// term (u64). Sent every second and when it starts serving (`data::store::Store::raft_tick`),
/// kept by the receiver a few seconds (`Cluster::set_topic_hint`), so that node's Metadata
/// names the partition's leader as Kafka's every broker does (each learns it from the
/// controller). One of another length, or for a topic not known here, is dropped.
pub const TOPIC_LEADER: i32 = -6;

/// Where this shard steps a message of [`METADATA_PARTITION`]: the metadata log's, once it is
/// open (set by the server; a function, so this module does not depend on the log's). Before
/// that, such messages are dropped, as lost ones (Raft resends).
pub type MetaSlot = Rc<RefCell<Option<Rc<dyn Fn(&[u8])>>>>;

/// Accept peers on this node's voter address until shutdown (runs on shard 0), each judged by
/// its hello ([`judge`]) against the incarnations recorded (`Cluster::peer_records`).
pub async fn serve(
    listener: glommio::net::TcpListener,
    cluster: Arc<Cluster>,
    router: Rc<Router>,
    broker: Arc<crate::broker::Broker>,
    meta: MetaSlot,
    shutdown: Shutdown,
) {
    let partitions = broker.config.offsets_topic_num_partitions;
    enum Event {
        Conn(glommio::Result<glommio::net::TcpStream, ()>),
        Stop,
    }
    loop {
        let stop = async {
            while !shutdown.is_triggered() {
                glommio::timer::sleep(Duration::from_millis(100)).await;
            }
            Event::Stop
        };
        match futures_lite::future::or(async { Event::Conn(listener.accept().await) }, stop).await {
            Event::Conn(Ok(stream)) => {
                let cluster = cluster.clone();
                let router = router.clone();
                let shutdown = shutdown.clone();
                let meta = meta.clone();
                let broker = broker.clone();
                glommio::spawn_local(async move {
                    let peer = stream.peer_addr().ok();
                    let links = Peer {
                        cluster: &cluster,
                        router: &router,
                        broker: &broker,
                        partitions,
                        meta: &meta,
                    };
                    if let Err(e) = read_loop(stream, links, &shutdown).await {
                        tracing::info!(?peer, error = %e, "node-to-node connection closed");
                    }
                })
                .detach();
            }
            Event::Conn(Err(e)) => {
                tracing::warn!(error = %e, "node-to-node accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            Event::Stop => break,
        }
    }
}

async fn read_frame(
    stream: &mut glommio::net::TcpStream,
    buf: &mut Vec<u8>,
) -> Result<i32, String> {
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .await
        .map_err(|e| e.to_string())?;
    let len = u32::from_be_bytes(len) as usize;
    if !(4..=MAX_FRAME_BYTES).contains(&len) {
        return Err(format!("frame of {len} bytes (at most {MAX_FRAME_BYTES})"));
    }
    buf.resize(len, 0);
    stream.read_exact(buf).await.map_err(|e| e.to_string())?;
    let partition = i32::from_be_bytes(buf[..4].try_into().unwrap());
    buf.drain(..4);
    Ok(partition)
}

/// What a node-to-node connection's reader hands messages to.
struct Peer<'a> {
    cluster: &'a Arc<Cluster>,
    router: &'a Rc<Router>,
    broker: &'a Arc<crate::broker::Broker>,
    partitions: i32,
    meta: &'a MetaSlot,
}

/// Whether to take a connector that says `hello`: one of this cluster's peers, of this version
/// and partition count, with the data directory this node first knew it by (recorded now if it
/// never connected before).
fn judge(
    hello: Hello,
    cluster: &Cluster,
    partitions: i32,
    known: &mut crate::meta::PeerIncarnations,
    current: bool,
) -> Result<Hello, Answer> {
    let node = hello.node;
    if hello.cluster_id != cluster.cluster_id {
        return Err(Answer::NotYet(format!(
            "node {node} belongs to cluster {:?}, node {} to {:?}: set the same cluster.id on \
             every node",
            hello.cluster_id, cluster.node_id, cluster.cluster_id
        )));
    }
    if node == cluster.node_id || !cluster.knows(node) {
        // A node started to join is refused until the metadata log here applied its addition
        // (AddRaftVoter); its link tries again (`write_loop`).
        return Err(Answer::NotYet(format!(
            "node {node} is not a peer of node {} (members {:?}); a joining node is accepted \
             once AddRaftVoter added it",
            cluster.node_id,
            cluster.members()
        )));
    }
    if hello.partitions != partitions {
        return Err(Answer::NotYet(format!(
            "node {node} runs {} __consumer_offsets partitions, node {} {partitions}: \
             offsets.topic.num.partitions must be the same on every node",
            hello.partitions, cluster.node_id
        )));
    }
    let fenced = |known: uuid::Uuid, by: &str| {
        Answer::Fenced(format!(
            "node {} knew node {node} by the data directory of incarnation.id {} ({by}), and \
             this one is {} (meta.properties): a node id is never taken by another data \
             directory, as its Raft logs and votes were on the first",
            cluster.node_id,
            coordinator::base64_uuid(known),
            coordinator::base64_uuid(hello.incarnation)
        ))
    };
    // The metadata log's record, when there is one, decides (and this node's own follows it);
    // else this node's own record does, taken now if the node never connected before.
    let checked = match cluster.incarnation(node) {
        Some(recorded) if recorded != hello.incarnation => {
            return Err(fenced(recorded, "the metadata log's record"));
        }
        Some(recorded) => known.record(node, recorded),
        // Before this node's metadata log is current it may hold a record not replayed yet,
        // which wins over this node's own: a hello only the own record contradicts waits
        // until then (its connector tries again) rather than being refused for good.
        None => match known.get(node) {
            Some(own) if own != hello.incarnation && !current => {
                return Err(Answer::NotYet(format!(
                    "node {} knew node {node} by the data directory of incarnation.id {}, and \
                     this one is {}: refused for good unless the metadata log, not replayed \
                     here yet, records this one",
                    cluster.node_id,
                    coordinator::base64_uuid(own),
                    coordinator::base64_uuid(hello.incarnation)
                )));
            }
            // Recorded at the first hello, durably, before any frame after it is read, even
            // before the log is current: at a cluster's first start no record applies for a
            // second or so, and a node lost in that second must still be refused by every
            // peer that took a message from it (docs/replication.md, "A voter that lost its
            // disk"). The log's record replaces a different one here once it applies.
            _ => known.check(node, hello.incarnation),
        },
    };
    match checked {
        Ok(()) => Ok(hello),
        Err(crate::meta::Refused::Another { known }) => Err(fenced(known, "its first hello here")),
        Err(crate::meta::Refused::Io(e)) => Err(Answer::NotYet(format!(
            "node {} cannot record node {node}'s incarnation: {e}",
            cluster.node_id
        ))),
    }
}

async fn read_loop(
    mut stream: glommio::net::TcpStream,
    to: Peer<'_>,
    shutdown: &Shutdown,
) -> Result<(), String> {
    let Peer {
        cluster,
        router,
        broker,
        partitions,
        meta,
    } = to;
    let mut buf = Vec::new();
    if read_frame(&mut stream, &mut buf).await? != -1 {
        return Err("the first frame is not a hello".into());
    }
    let hello = parse_hello(&buf).map_err(Answer::NotYet).and_then(|h| {
        let current = broker.topics.is_current();
        match cluster.peer_records().as_mut() {
            Some(known) => judge(h, cluster, partitions, known, current),
            None => Err(Answer::NotYet(format!(
                "node {} has not read its record of its peers yet",
                cluster.node_id
            ))),
        }
    });
    let Hello {
        node,
        endpoints,
        incarnation,
        ..
    } = match hello {
        Ok(h) => h,
        Err(answer) => {
            // Told before the close, so the connector says why (and a fenced one stops).
            let _ = stream.write_all(&answer.frame()).await;
            return match answer {
                Answer::NotYet(r) => Err(r),
                Answer::Fenced(r) => {
                    // Said once, at error level (not again as a closed connection).
                    tracing::error!(reason = %r, "node-to-node hello refused for good");
                    Ok(())
                }
                Answer::Accepted => unreachable!("judge refuses with NotYet or Fenced"),
            };
        }
    };
    stream
        .write_all(&Answer::Accepted.frame())
        .await
        .map_err(|e| e.to_string())?;
    cluster.set_endpoints(node, endpoints);
    // Counted while this connection lives (the guard uncounts it however the loop ends).
    struct Open<'a>(&'a Cluster, NodeId);
    impl Drop for Open<'_> {
        fn drop(&mut self) {
            self.0.count_inbound(self.1, -1);
        }
    }
    cluster.count_inbound(node, 1);
    let _open = Open(cluster, node);
    let outstanding = Rc::new(Cell::new(0usize));
    let mut incarnations_seen = cluster.incarnations_changed();
    while !shutdown.is_triggered() {
        let partition = read_frame(&mut stream, &mut buf).await?;
        // The metadata log recorded incarnations since the hello: one of another id for this
        // peer ends the connection (it was accepted before this node learnt the record).
        if cluster.incarnations_changed() != incarnations_seen {
            incarnations_seen = cluster.incarnations_changed();
            if cluster.incarnation(node).is_some_and(|r| r != incarnation) {
                return Err(format!(
                    "node {node}'s incarnation {} is not the one the metadata log recorded",
                    coordinator::base64_uuid(incarnation)
                ));
            }
        }
        if partition == METADATA_PARTITION {
            // The metadata log lives on this shard: step it here.
            let step = meta.borrow().clone();
            if let Some(step) = step {
                step(&buf);
            }
            continue;
        }
        if partition == QUORUM_VIEW {
            if let Some(view) = crate::cluster::QuorumView::decode(&buf) {
                cluster.set_leader_quorum(node, view);
            }
            continue;
        }
        if partition == TOPIC_LEADER {
            if buf.len() == 28 {
                let id = uuid::Uuid::from_bytes(buf[..16].try_into().expect("16 bytes"));
                let p = i32::from_be_bytes(buf[16..20].try_into().expect("4 bytes"));
                let term = u64::from_be_bytes(buf[20..28].try_into().expect("8 bytes"));
                let known = broker
                    .topics
                    .snapshot()
                    .get_by_id(&id)
                    .is_some_and(|t| (0..t.partitions).contains(&p));
                if known {
                    cluster.set_topic_hint(id, p, node, term);
                }
            }
            continue;
        }
        if partition == TOPIC_PARTITION || partition == TOPIC_SEED {
            if buf.len() < 20 {
                return Err(format!(
                    "node {node} sent a topic message of {} bytes",
                    buf.len()
                ));
            }
            let id = uuid::Uuid::from_bytes(buf[..16].try_into().expect("16 bytes"));
            let p = i32::from_be_bytes(buf[16..20].try_into().expect("4 bytes"));
            let Some(topic) = broker.topics.snapshot().get_by_id(&id).cloned() else {
                continue; // not applied here yet: as if lost (Raft resends)
            };
            if !(0..topic.partitions).contains(&p) {
                continue;
            }
            let owner = crate::data::owner_shard(&topic.name, p, router.shards());
            let message = buf.split_off(20);
            let op = if partition == TOPIC_SEED {
                crate::data::DataOp::Seed {
                    topic,
                    partition: p,
                    from: node,
                    message,
                }
            } else {
                crate::data::DataOp::Raft {
                    topic,
                    partition: p,
                    message,
                }
            };
            while outstanding.get() >= MAX_FORWARDS {
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
            outstanding.set(outstanding.get() + 1);
            let (outstanding, router) = (outstanding.clone(), router.clone());
            glommio::spawn_local(async move {
                let _ = router.data(owner, op).await;
                outstanding.set(outstanding.get() - 1);
            })
            .detach();
            continue;
        }
        if !(0..partitions).contains(&partition) {
            return Err(format!(
                "node {node} sent a message for partition {partition}"
            ));
        }
        let op = PartitionOp::Raft(std::mem::take(&mut buf));
        let mut call = router.partition(partition, op);
        if call.ready().is_some() {
            continue; // stepped on this shard
        }
        // Owned by another shard: let the router carry it while this connection reads on, up to
        // a bound.
        while outstanding.get() >= MAX_FORWARDS {
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
        outstanding.set(outstanding.get() + 1);
        let outstanding = outstanding.clone();
        glommio::spawn_local(async move {
            let _ = call.await;
            outstanding.set(outstanding.get() - 1);
        })
        .detach();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_reads_back_and_garbage_is_refused() {
        let eps = vec![
            Endpoint {
                listener: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            },
            Endpoint {
                listener: "SASL_SSL".into(),
                host: "node-2.example".into(),
                port: 9093,
            },
        ];
        let h = Hello {
            node: 7,
            incarnation: uuid::Uuid::from_u128(0x0123_4567_89ab_4cde_8f01_2345_6789_abcd),
            cluster_id: "Xv4QfwMXThSzZgdeBdgXBA".into(),
            partitions: 50,
            endpoints: eps,
        };
        let f = hello(&h);
        assert_eq!(
            u32::from_be_bytes(f[..4].try_into().unwrap()) as usize,
            f.len() - 4
        );
        assert_eq!(i32::from_be_bytes(f[4..8].try_into().unwrap()), -1);
        assert_eq!(parse_hello(&f[8..]).unwrap(), h);
        for cut in 0..f.len() - 8 {
            assert!(parse_hello(&f[8..8 + cut]).is_err(), "a hello cut at {cut}");
        }
        let mut bad = f[8..].to_vec();
        bad[0] = b'X';
        assert!(parse_hello(&bad).unwrap_err().contains("not a Ringleader"));
        let mut older = f[8..].to_vec();
        older[..8].copy_from_slice(b"RLRAFT01");
        assert!(parse_hello(&older)
            .unwrap_err()
            .contains("version 01 (this node speaks 08)"));
        let mut long = f[8..].to_vec();
        long.push(0);
        assert!(parse_hello(&long).unwrap_err().contains("trailing"));
    }

    #[test]
    fn an_answer_reads_back_and_garbage_is_refused() {
        for a in [
            Answer::Accepted,
            Answer::NotYet("node 4 is not a peer".into()),
            Answer::Fenced("another data directory".into()),
            Answer::NotYet(String::new()),
        ] {
            let f = a.frame();
            assert_eq!(
                u32::from_be_bytes(f[..4].try_into().unwrap()) as usize,
                f.len() - 4
            );
            assert_eq!(i32::from_be_bytes(f[4..8].try_into().unwrap()), -1);
            assert_eq!(Answer::parse(&f[8..]).unwrap(), a);
        }
        assert!(Answer::parse(&[]).is_err(), "empty");
        assert!(Answer::parse(&[3]).is_err(), "unknown verdict");
        assert!(
            Answer::parse(b"\0x").is_err(),
            "an acceptance with a reason"
        );
        let long = Answer::Fenced("x".repeat(10_000)).frame();
        assert_eq!(long.len(), 9 + 4096, "the reason is bounded");
    }

    /// The refusals a hello can meet, in the order the acceptor checks them; the incarnation
    /// is recorded on the first acceptance and refuses another for good.
    #[test]
    fn a_hello_is_judged_and_another_data_directory_is_fenced() {
        let dir = std::env::temp_dir().join(format!("rl-peers-judge-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let voters = (1..=3)
            .map(|id| crate::cluster::Voter {
                id,
                addr: format!("127.0.0.1:{}", 19000 + id),
            })
            .collect();
        let cluster = Cluster::new(1, "c1".into(), voters, 50, Vec::new());
        let mut known = crate::meta::PeerIncarnations::open(&dir).unwrap();
        let first = uuid::Uuid::new_v4();
        let hello = |node, incarnation, cluster_id: &str, partitions| Hello {
            node,
            incarnation,
            cluster_id: cluster_id.into(),
            partitions,
            endpoints: Vec::new(),
        };
        let not_yet = |r: Result<Hello, Answer>, says: &str| match r {
            Err(Answer::NotYet(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("{other:?}"),
        };
        not_yet(
            judge(hello(2, first, "c2", 50), &cluster, 50, &mut known, true),
            "cluster.id",
        );
        not_yet(
            judge(hello(4, first, "c1", 50), &cluster, 50, &mut known, true),
            "AddRaftVoter",
        );
        not_yet(
            judge(hello(1, first, "c1", 50), &cluster, 50, &mut known, true),
            "not a peer",
        );
        not_yet(
            judge(hello(2, first, "c1", 3), &cluster, 50, &mut known, true),
            "offsets.topic.num.partitions",
        );
        assert_eq!(known.get(2), None, "nothing recorded from a refused hello");
        let h = hello(2, first, "c1", 50);
        assert_eq!(
            judge(h.clone(), &cluster, 50, &mut known, true),
            Ok(h.clone())
        );
        assert_eq!(judge(h.clone(), &cluster, 50, &mut known, true), Ok(h));
        match judge(
            hello(2, uuid::Uuid::new_v4(), "c1", 50),
            &cluster,
            50,
            &mut known,
            true,
        ) {
            Err(Answer::Fenced(m)) => assert!(
                m.contains(&coordinator::base64_uuid(first)) && m.contains("node 2"),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
        // Before this node's metadata log is current, a node never seen is let in and recorded
        // at once (a cluster's first second has no record in the log yet)...
        let early = dir.join("early");
        std::fs::create_dir_all(&early).unwrap();
        let mut fresh = crate::meta::PeerIncarnations::open(&early).unwrap();
        let h = hello(3, first, "c1", 50);
        assert_eq!(
            judge(h.clone(), &cluster, 50, &mut fresh, false),
            Ok(h.clone())
        );
        assert_eq!(fresh.get(3), Some(first));
        assert_eq!(
            crate::meta::PeerIncarnations::open(&early).unwrap().get(3),
            Some(first),
            "durably"
        );
        assert_eq!(judge(h.clone(), &cluster, 50, &mut fresh, false), Ok(h));
        // ... but one the own record alone contradicts is refused for now, not for good: the
        // log, not replayed yet, may record it. Once current, for good.
        let other = uuid::Uuid::new_v4();
        not_yet(
            judge(hello(3, other, "c1", 50), &cluster, 50, &mut fresh, false),
            "not replayed here yet",
        );
        assert_eq!(fresh.get(3), Some(first), "the own record is kept");
        assert!(matches!(
            judge(hello(3, other, "c1", 50), &cluster, 50, &mut fresh, true),
            Err(Answer::Fenced(_))
        ));
        // A restart of this node still knows it.
        let mut again = crate::meta::PeerIncarnations::open(&dir).unwrap();
        assert!(matches!(
            judge(
                hello(2, uuid::Uuid::new_v4(), "c1", 50),
                &cluster,
                50,
                &mut again,
                true
            ),
            Err(Answer::Fenced(_))
        ));
        // Node 3 never connected here, but the metadata log recorded it: another directory is
        // refused, and nothing is recorded locally for it.
        let three = uuid::Uuid::new_v4();
        let before = cluster.incarnations_changed();
        let own = dir.join("own");
        std::fs::create_dir_all(&own).unwrap();
        cluster.open_peer_records(&own).unwrap();
        cluster.set_incarnations(&BTreeMap::from([(1, three), (2, first), (3, three)]));
        assert_eq!(cluster.incarnations_changed(), before + 1);
        // Written through to the node's own record, this node's own incarnation left out.
        let written = crate::meta::PeerIncarnations::open(&own).unwrap();
        assert_eq!(
            (written.get(1), written.get(2), written.get(3)),
            (None, Some(first), Some(three))
        );
        cluster.set_incarnations(&BTreeMap::from([(2, first), (3, three)]));
        assert_eq!(cluster.incarnations_changed(), before + 2);
        cluster.set_incarnations(&BTreeMap::from([(2, first), (3, three)]));
        assert_eq!(cluster.incarnations_changed(), before + 2, "unchanged");
        match judge(
            hello(3, uuid::Uuid::new_v4(), "c1", 50),
            &cluster,
            50,
            &mut again,
            true,
        ) {
            Err(Answer::Fenced(m)) => assert!(m.contains("metadata log"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(again.get(3), None);
        let h = hello(3, three, "c1", 50);
        assert_eq!(judge(h.clone(), &cluster, 50, &mut again, true), Ok(h));
        assert_eq!(again.get(3), Some(three));
        // This node's own record of node 2 was taken from a hello before it learnt the log's
        // (another): the log's wins, and the local record follows it.
        cluster.set_incarnations(&BTreeMap::from([(2, three), (3, three)]));
        let h = hello(2, three, "c1", 50);
        assert_eq!(judge(h.clone(), &cluster, 50, &mut again, true), Ok(h));
        assert_eq!(again.get(2), Some(three));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
