//! Starting and stopping the broker: one glommio executor per core, each accepting connections.
//!
//! Every shard accepts on its own socket bound to the same address with SO_REUSEPORT (and
//! SO_REUSEADDR, for quick restarts), so the kernel spreads new connections across shards and no
//! accept thread hands sockets over. Because SO_REUSEPORT would also let a second broker silently
//! share the port — each process then gets a share of the connections, and a client's requests
//! land on two brokers — [`bind_listeners`] binds the address once without it first (anything
//! else holding the port fails the start, as Kafka's does), binds every shard's socket right after
//! it, and then checks that no other process's socket joined the port in between. The probe also
//! resolves port 0 to a concrete port all shards then share.
//!
//! Shutdown (SIGINT/SIGTERM → [`ServerHandle::shutdown`]): shards stop accepting, stop reading
//! from their connections, let in-flight requests finish and their responses be written, then exit.

use crate::broker::Broker;
use crate::data::DataStore;
use crate::runtime::partition::PartitionTable;
use crate::runtime::router::{self, Executor, Router};
use crate::runtime::shard::{ConnRegistry, Handler, Shard, ShardExec};
use crate::runtime::tasks::{Shutdown, Tasks};
use crate::runtime::txn::TxnTable;
use glommio::{LocalExecutorBuilder, Placement};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How often a shard fires due group deadlines.
const TICK: Duration = Duration::from_millis(5);
/// How often an idle acceptor looks at the shutdown flag. Bounds shutdown latency only.
const SHUTDOWN_POLL: Duration = Duration::from_millis(20);
/// In-flight requests get this long to finish at shutdown before connections are dropped.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// io_uring buffer memory registered per shard. Network I/O does not use it; the storage layer
/// sizes it when it lands. Kept small so several shards fit the default 8 MiB memlock limit.
const IO_MEMORY_PER_SHARD: usize = 1 << 20;

pub struct ServerHandle {
    pub local_addr: SocketAddr,
    shutdown: Shutdown,
    shards: Vec<glommio::ExecutorJoinHandle<()>>,
}

impl ServerHandle {
    /// Ask every shard to stop; returns at once. Call [`ServerHandle::join`] to wait.
    pub fn shutdown(&self) {
        self.shutdown.trigger();
    }

    /// The flag a signal handler sets to shut down.
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        self.shutdown.flag()
    }

    /// Wait for every shard to finish.
    pub fn join(self) -> anyhow::Result<()> {
        for (i, h) in self.shards.into_iter().enumerate() {
            h.join()
                .map_err(|e| anyhow::anyhow!("shard {i} failed: {e}"))?;
        }
        Ok(())
    }
}

/// Every shard's listening sockets, one set per listener, bound before any shard starts (see
/// the module comment).
pub struct Listeners {
    bound: Vec<Bound>,
}

/// One listener's sockets, one per shard.
struct Bound {
    /// How it was planned (None: the plain `bind_listeners` of one PLAINTEXT listener).
    plan: Option<crate::listeners::ListenerPlan>,
    addr: SocketAddr,
    fds: Vec<OwnedFd>,
}

impl Listeners {
    /// The concrete address of the first listener (port 0 resolved): the PLAINTEXT one when the
    /// broker has only that.
    pub fn addr(&self) -> SocketAddr {
        self.bound[0].addr
    }

    /// Every listener's name and bound address, in configured order.
    pub fn addrs(&self) -> Vec<(String, SocketAddr)> {
        self.bound
            .iter()
            .map(|b| {
                let name = b
                    .plan
                    .as_ref()
                    .map_or("PLAINTEXT", |p| p.spec.name.as_str());
                (name.to_string(), b.addr)
            })
            .collect()
    }

    /// How many shards these sockets are for.
    pub fn shards(&self) -> usize {
        self.bound[0].fds.len()
    }

    /// The served listeners, in order, with their bound addresses. A listener bound with
    /// [`bind_listeners`] is PLAINTEXT, advertised at `advertised` (else its own address).
    pub fn resolve(
        &self,
        advertised: Option<(String, u16)>,
    ) -> Vec<Arc<crate::listeners::Listener>> {
        self.bound
            .iter()
            .map(|b| {
                Arc::new(match &b.plan {
                    Some(plan) => plan.bound(b.addr),
                    None => {
                        let (host, port) = match &advertised {
                            Some((h, p)) => (h.clone(), i32::from(*p)),
                            None => (
                                crate::listeners::advertised_host_for(b.addr),
                                i32::from(b.addr.port()),
                            ),
                        };
                        crate::listeners::Listener::plaintext(b.addr, host, port)
                    }
                })
            })
            .collect()
    }
}

/// Bind every planned listener's sockets, `shards` per listener (each as [`bind_listeners`]).
pub fn bind_planned(
    plans: Vec<crate::listeners::ListenerPlan>,
    shards: usize,
) -> anyhow::Result<Listeners> {
    let mut bound = Vec::with_capacity(plans.len());
    for plan in plans {
        let one = bind_listeners(plan.addr, shards)
            .map_err(|e| anyhow::anyhow!("listener {}: {e:#}", plan.spec.name))?;
        let Bound { addr, fds, .. } = one.bound.into_iter().next().expect("one listener");
        bound.push(Bound {
            plan: Some(plan),
            addr,
            fds,
        });
    }
    anyhow::ensure!(!bound.is_empty(), "no listener to serve");
    Ok(Listeners { bound })
}

/// Bind `shards` listening sockets on `listen`, failing if anything else holds the port.
///
/// "Address in use" is retried for up to a second: a broker restarted right after a SIGKILL finds
/// the old process's listening socket still held for a few milliseconds while the kernel tears
/// down its io_uring (measured 4–6 ms here). A port held by a live process still fails, later.
pub fn bind_listeners(listen: SocketAddr, shards: usize) -> anyhow::Result<Listeners> {
    anyhow::ensure!(shards >= 1, "--cores must be at least 1");
    let deadline = Instant::now() + Duration::from_secs(1);
    let addr = loop {
        // Without SO_REUSEPORT: fails while any socket at all is bound to the port.
        match std::net::TcpListener::bind(listen) {
            Ok(probe) => break probe.local_addr()?,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => anyhow::bail!("cannot listen on {listen}: {e}"),
        }
    };
    // The probe is closed: bind the shards' sockets at once, before anyone else's probe can find
    // the port free.
    let fds = (0..shards)
        .map(|_| bind_shard_socket(addr))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    match foreign_listeners(addr, &fds) {
        Ok(0) => {}
        Ok(n) => anyhow::bail!(
            "cannot listen on {addr}: {n} listening socket(s) of another process share the port \
             (a second broker started on it at the same moment)"
        ),
        // Without /proc the probe above is the only guard; it leaves a window of microseconds.
        Err(e) => tracing::debug!(error = %e, "cannot read /proc/net to check the port is ours"),
    }
    Ok(Listeners {
        bound: vec![Bound {
            plan: None,
            addr,
            fds,
        }],
    })
}

/// One shard's socket: shares its port with the other shards (SO_REUSEPORT) and can be re-bound
/// at once after a restart (SO_REUSEADDR): connections we close at shutdown sit in TIME_WAIT on
/// this port, and without SO_REUSEADDR on the listener (which accepted sockets inherit) they would
/// block the next start for a minute. glommio's own `bind` sets only SO_REUSEPORT.
fn bind_shard_socket(addr: SocketAddr) -> std::io::Result<OwnedFd> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.bind(&addr.into())?;
    // Thousands of clients may connect at once (loadgen, a restart of a big deployment); a
    // short accept queue turns the overflow into 1 s SYN retransmits.
    sock.listen(4096)?;
    Ok(sock.into())
}

/// How many sockets listening on exactly `addr` are not among `ours`, from /proc/net/tcp{,6}.
/// SO_REUSEPORT only groups sockets bound to the same address, so an exact match is the test.
fn foreign_listeners(addr: SocketAddr, ours: &[OwnedFd]) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut inodes = Vec::with_capacity(ours.len());
    for fd in ours {
        // "/proc/self/fd/N" links to "socket:[INODE]", the inode /proc/net/tcp lists.
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
        let link = link.to_string_lossy();
        let ino = link
            .strip_prefix("socket:[")
            .and_then(|r| r.strip_suffix(']'))
            .ok_or_else(|| std::io::Error::other(format!("unexpected fd link {link}")))?;
        inodes.push(ino.to_string());
    }
    let (table, local) = match addr {
        // The kernel prints the address words in host order, the port in hex.
        SocketAddr::V4(a) => (
            "/proc/net/tcp",
            format!(
                "{:08X}:{:04X}",
                u32::from_ne_bytes(a.ip().octets()),
                a.port()
            ),
        ),
        SocketAddr::V6(a) => {
            let o = a.ip().octets();
            let words: String = o
                .chunks(4)
                .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
                .collect();
            ("/proc/net/tcp6", format!("{words}:{:04X}", a.port()))
        }
    };
    let text = std::fs::read_to_string(table)?;
    const LISTEN: &str = "0A";
    Ok(text
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
            (f.len() > 9 && f[1] == local && f[3] == LISTEN).then(|| f[9].to_string())
        })
        .filter(|ino| !inodes.contains(ino))
        .count())
}

/// Start one shard per socket of `listeners` (see [`bind_listeners`]) serving `broker`, each
/// answering requests with `handler` (the API layer). Returns once every shard is accepting.
pub fn start(
    broker: Arc<Broker>,
    listeners: Listeners,
    handler: Handler,
) -> anyhow::Result<ServerHandle> {
    let addr = listeners.addr();
    let cores = listeners.shards();
    anyhow::ensure!(
        broker.listeners.len() == listeners.bound.len(),
        "the broker was opened for {} listener(s) but {} are bound",
        broker.listeners.len(),
        listeners.bound.len()
    );
    // Shard i gets socket i of every listener.
    let mut per_shard: Vec<Vec<OwnedFd>> = (0..cores).map(|_| Vec::new()).collect();
    for b in listeners.bound {
        for (i, fd) in b.fds.into_iter().enumerate() {
            per_shard[i].push(fd);
        }
    }
    raise_memlock_limit();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let shutdown = Shutdown::default();
    let mesh = (cores > 1).then(|| router::mesh(cores));
    let (ready_tx, ready_rx) = mpsc::channel::<anyhow::Result<()>>();
    let partitions = broker.config.offsets_topic_num_partitions;
    // A node of a cluster that lost one of its Raft logs must not take part under its id.
    if let (Some(dir), Some(_)) = (&broker.data_dir, &broker.cluster) {
        crate::meta::check_raft_logs(dir)?;
    }
    // What only the journal holds goes into the partition logs before any shard loads them.
    if let Some(dir) = &broker.data_dir {
        crate::runtime::journal::recover_before_start(
            dir,
            partitions,
            offsets_log_config(&broker),
        )?;
    }
    // A node of a cluster accepts its peers on its own voter address (shard 0 does).
    let mut peer_listener = match &broker.cluster {
        Some(c) => {
            let me = c.own_addr();
            let addr: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(&me)
                .map_err(|e| anyhow::anyhow!("controller.quorum.voters: {me}: {e}"))?
                .next()
                .ok_or_else(|| anyhow::anyhow!("{me} resolves to no address"))?;
            // Sockets are bound with SO_REUSEPORT (one per shard), so a client listener on the
            // same port would bind too and the kernel would spread peers and clients over both.
            let overlaps = |l: &SocketAddr| {
                l.port() == addr.port()
                    && (l.ip() == addr.ip()
                        || l.ip().is_unspecified()
                        || addr.ip().is_unspecified())
            };
            if let Some(l) = broker.listeners.iter().find(|l| overlaps(&l.addr)) {
                anyhow::bail!(
                    "listener {} on {} and this node's node-to-node address {addr} \
                     (controller.quorum.voters) share a port: give them different ones",
                    l.name,
                    l.addr
                );
            }
            Some(bind_shard_socket(addr).map_err(|e| {
                anyhow::anyhow!("cannot listen for peers on {addr} (controller.quorum.voters): {e}")
            })?)
        }
        None => None,
    };
    let mut shards = Vec::with_capacity(cores);
    for (i, listener) in per_shard.into_iter().enumerate() {
        let peer_listener = peer_listener.take();
        let broker = broker.clone();
        let shutdown = shutdown.clone();
        let mesh = mesh.clone();
        let ready_tx = ready_tx.clone();
        let handle = LocalExecutorBuilder::new(Placement::Fixed(i % cpus))
            .name(&format!("shard-{i}"))
            .io_memory(IO_MEMORY_PER_SHARD)
            .spawn(move || async move {
                if let Err(e) = run_shard(
                    broker,
                    listener,
                    peer_listener,
                    mesh,
                    partitions,
                    shutdown,
                    handler,
                    &ready_tx,
                )
                .await
                {
                    let _ = ready_tx.send(Err(e));
                }
            })
            .map_err(|e| anyhow::anyhow!("starting shard {i}: {e}"))?;
        shards.push(handle);
    }
    drop(ready_tx);
    for _ in 0..cores {
        match ready_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                shutdown.trigger();
                return Err(e);
            }
            Err(_) => {
                shutdown.trigger();
                anyhow::bail!("shards did not become ready");
            }
        }
    }
    // Every shard opened its Raft logs: listed, so a start that finds one gone stops.
    if let (Some(dir), Some(_)) = (&broker.data_dir, &broker.cluster) {
        // The ones a node keeps for good: the metadata log's and each `__consumer_offsets`
        // partition's (a topic partition's comes and goes with its placement).
        let logs = std::iter::once(crate::runtime::metadata_log::METADATA_DIR.to_string())
            .chain((0..partitions.max(0)).map(|p| format!("__consumer_offsets-{p}")));
        if let Err(e) = crate::meta::record_raft_logs(dir, logs) {
            tracing::error!(error = %e, "the list of this node's Raft logs was not written");
        }
    }
    Ok(ServerHandle {
        local_addr: addr,
        shutdown,
        shards,
    })
}

#[allow(clippy::too_many_arguments)]
async fn run_shard(
    broker: Arc<Broker>,
    listeners: Vec<OwnedFd>,
    peer_listener: Option<OwnedFd>,
    mesh: Option<router::Mesh>,
    partitions: i32,
    shutdown: Shutdown,
    handler: Handler,
    ready: &mpsc::Sender<anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let group_config = crate::config::group_config(&broker.config);
    let mut built = None;
    let exec_broker = broker.clone();
    let router = Router::join(mesh, |shard, shards| -> Rc<dyn Executor> {
        let table = PartitionTable::new(shard, shards, partitions, group_config).into_rc();
        let configs_broker = exec_broker.clone();
        table.set_group_configs(Rc::new(move || configs_broker.group_configs.snapshot()));
        let txns = TxnTable::new(exec_broker.clone(), shard, shards);
        let replicas = exec_broker.cluster.as_ref().map(|_| RefCell::new(None));
        let store = DataStore::new(exec_broker, shard);
        let exec = Rc::new(ShardExec {
            table,
            store,
            txns,
            replicas,
        });
        built = Some(exec.clone());
        exec
    })
    .await?;
    let exec = built.expect("join built the shard's state");
    let (table, store, txns) = (exec.table.clone(), exec.store.clone(), exec.txns.clone());
    txns.set_router(&router);
    // A node of a cluster cannot tell a deleted topic from one its metadata log has not replayed
    // yet: there the metadata log removes what it applies as deleted (`runtime::metadata_log`).
    if router.shard() == 0 && broker.cluster.is_none() {
        if let Some(dir) = &broker.data_dir {
            crate::data::sweep_deleted_topics(dir, &broker);
        }
    }
    let tasks = Tasks::new();
    // Topic retention (and closing partitions of deleted topics) runs on every shard.
    {
        let store = store.clone();
        let every = Duration::from_millis(broker.config.log_retention_check_interval_ms as u64);
        tasks.every("retention", every, move || {
            let store = store.clone();
            async move { store.apply_retention().await }
        });
    }
    // Partitions load after the listener opens: a client that connects first gets
    // COORDINATOR_LOAD_IN_PROGRESS for a group whose partition is not loaded yet, and retries.
    // "listening on" (the shard's readiness) is reported once every partition is loaded.
    let data_dir = broker.data_dir.clone();
    if data_dir.is_some() && broker.cluster.is_none() {
        table.begin_loading();
    }
    // Deadlines (sessions, join/sync phases, retention) fire from here. Group timers are in
    // milliseconds; a 5 ms tick keeps them within a few ms of Kafka's.
    {
        let table = table.clone();
        tasks.every("group deadlines", TICK, move || {
            table.tick(table.now());
            std::future::ready(())
        });
    }
    // Transaction timeouts and id expiration (each partition checks at Kafka's intervals).
    {
        let txns = txns.clone();
        tasks.every(
            "transaction deadlines",
            Duration::from_millis(100),
            move || {
                txns.tick();
                std::future::ready(())
            },
        );
    }
    {
        let txns = txns.clone();
        tasks.spawn(
            "load transactions",
            async move { txns.load_existing().await },
        );
    }
    let listeners: Vec<glommio::net::TcpListener> = listeners
        .into_iter()
        .map(|fd| {
            // SAFETY: the fd is a bound, listening TCP socket (bind_shard_socket) whose ownership
            // moves to the glommio listener (into_raw_fd gives it up).
            unsafe { glommio::net::TcpListener::from_raw_fd(fd.into_raw_fd()) }
        })
        .collect();
    {
        let table = table.clone();
        let broker = broker.clone();
        let shard_id = router.shard();
        table.publish_metrics(shard_id, &broker.metrics);
        tasks.every("metrics", Duration::from_secs(1), move || {
            table.publish_metrics(shard_id, &broker.metrics);
            std::future::ready(())
        });
    }
    let shard = Rc::new(Shard {
        table: table.clone(),
        snapshots: RefCell::new(crate::runtime::shard::Snapshots::new(&broker)),
        broker,
        router,
        conns: Rc::new(ConnRegistry::default()),
        tasks: tasks.clone(),
        handler,
        backlog: Default::default(),
    });
    // connections.max.idle.ms: one sweep per shard over its connections (a connection records
    // when it last completed a request; no timer is armed per read).
    {
        let conns = shard.conns.clone();
        let idle = Duration::from_millis(shard.broker.config.connections_max_idle_ms.max(1) as u64);
        let every = crate::runtime::shard::idle_sweep_interval(idle);
        tasks.every("idle sweep", every, move || {
            conns.close_idle(Instant::now(), idle);
            std::future::ready(())
        });
    }
    if let Some(cluster) = shard.broker.cluster.clone() {
        start_replicas(
            &shard,
            &exec,
            cluster,
            peer_listener,
            &shutdown,
            ready.clone(),
        );
    } else {
        let table = table.clone();
        let ready = ready.clone();
        let broker = shard.broker.clone();
        tasks.spawn("load", async move {
            let loaded = match data_dir {
                Some(data_dir) => load_partitions(&table, &broker, &data_dir).await,
                None => Ok(()),
            };
            let _ = ready.send(loaded);
        });
    }

    // Every shard accepts on every listener; each connection keeps the listener it came in on.
    let accepting: Vec<_> = listeners
        .into_iter()
        .zip(shard.broker.listeners.clone())
        .map(|(socket, info)| {
            glommio::spawn_local(accept_loop(shard.clone(), socket, info, shutdown.clone()))
        })
        .collect();
    for a in accepting {
        a.await;
    }
    shard.conns.stop_reading();
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while !shard.conns.is_empty() && Instant::now() < deadline {
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
    if !shard.conns.is_empty() {
        tracing::warn!(
            connections = shard.conns.len(),
            "shutdown: connections still open after drain timeout"
        );
    }
    // Connections are drained: group deadlines, retention, sweeps and the load end now.
    tasks.join().await;
    txns.close();
    table.close_journal().await;
    Ok(())
}

/// A node of a cluster: open this shard's replicated `__consumer_offsets` partitions, start its
/// links to the peers and the ticks, and (shard 0) accept the peers' links.
/// Kafka's preferred leader election for what this shard leads among the Raft groups `wanted`
/// names (by topic id, nil for `__consumer_offsets`, and partition): each hands its leadership
/// to its preferred replica when that one is a voter in sync. The leaders' rebalancing wants
/// every group, an ElectLeaders those it named. Returns how many handovers started.
fn hand_to_preferred(
    exec: &crate::runtime::shard::ShardExec,
    broker: &crate::broker::Broker,
    wanted: impl Fn((uuid::Uuid, i32)) -> bool,
) -> usize {
    let nil = uuid::Uuid::nil();
    let mut n = 0;
    if let Some(set) = exec.replicas.as_ref().and_then(|r| r.borrow().clone()) {
        n += set.hand_to_preferred(|p| {
            wanted((nil, p))
                .then(|| broker.topics.preferred_offsets_leader(p))
                .flatten()
        });
    }
    n + exec.store.hand_to_preferred(|t, p| wanted((t, p)))
}

fn start_replicas(
    shard: &Rc<Shard>,
    exec: &Rc<ShardExec>,
    cluster: Arc<crate::cluster::Cluster>,
    peer_listener: Option<OwnedFd>,
    shutdown: &Shutdown,
    ready: mpsc::Sender<anyhow::Result<()>>,
) {
    use crate::runtime::replicated::{ReplicaSet, RAFT_TICK};
    /// How often a shard looks for preferred leader elections to carry out.
    const ELECTION_POLL: std::time::Duration = std::time::Duration::from_millis(5);
    let broker = shard.broker.clone();
    let partitions = broker.config.offsets_topic_num_partitions;
    let endpoints: Vec<crate::cluster::Endpoint> = broker
        .listeners
        .iter()
        .map(|l| crate::cluster::Endpoint {
            listener: l.name.clone(),
            host: l.advertised_host.clone(),
            port: l.advertised_port,
        })
        .collect();
    let hello = crate::runtime::peers::hello(&crate::runtime::peers::Hello {
        node: cluster.node_id,
        incarnation: broker.incarnation,
        cluster_id: cluster.cluster_id.clone(),
        partitions,
        endpoints,
    });
    let links = crate::runtime::peers::Links::start(&cluster, hello, shutdown.clone());
    let tick_links = links.clone();
    // A topic partition's frames of one kind (Raft, re-seeding, a leader's word) to a peer.
    let frames = |kind: i32| -> crate::data::replica::SendTopic {
        let links = links.clone();
        Rc::new(move |to, topic, partition, msg: &[u8]| {
            links.send_topic_frame(to, kind, topic, partition, msg)
        })
    };
    exec.store.set_cluster(crate::data::replica::ClusterCtx {
        send: frames(crate::runtime::peers::TOPIC_PARTITION),
        seed: frames(crate::runtime::peers::TOPIC_SEED),
        hint: frames(crate::runtime::peers::TOPIC_LEADER),
        cluster: cluster.clone(),
        shards: shard.router.shards(),
    });
    // Shard 0 (the one given the node-to-node listener) runs the cluster's metadata log; its
    // node-to-node listener steps the log's messages through `meta_step`.
    let meta: Rc<RefCell<Option<Rc<crate::runtime::metadata_log::MetadataLog>>>> = Rc::default();
    let meta_step: crate::runtime::peers::MetaSlot = Rc::default();
    let runs_metadata_log = peer_listener.is_some();
    if let Some(fd) = peer_listener {
        // SAFETY: the fd is a bound, listening TCP socket (bind_shard_socket) whose ownership
        // moves to the glommio listener (into_raw_fd gives it up).
        let listener = unsafe { glommio::net::TcpListener::from_raw_fd(fd.into_raw_fd()) };
        shard.tasks.spawn(
            "node-to-node listener",
            crate::runtime::peers::serve(
                listener,
                cluster.clone(),
                shard.router.clone(),
                shard.broker.clone(),
                meta_step.clone(),
                shutdown.clone(),
            ),
        );
    }
    let exec_open = exec.clone();
    let (shard_id, shards) = (shard.router.shard(), shard.router.shards());
    let meta_open = meta.clone();
    shard.tasks.spawn("open replicas", async move {
        let opened = match &broker.data_dir {
            None => Err(anyhow::anyhow!(
                "a node of a cluster needs a data directory"
            )),
            Some(dir) => {
                let set = ReplicaSet::open(
                    shard_id,
                    shards,
                    partitions,
                    crate::config::group_config(&broker.config),
                    cluster.clone(),
                    links.clone(),
                    dir,
                    offsets_log_config(&broker),
                )
                .await;
                match set {
                    Ok(set) if runs_metadata_log => {
                        crate::runtime::metadata_log::MetadataLog::open(
                            broker.clone(),
                            cluster,
                            links,
                            dir,
                            offsets_log_config(&broker),
                        )
                        .await
                        .map(|log| {
                            let stepper = log.clone();
                            *meta_step.borrow_mut() =
                                Some(Rc::new(move |b: &[u8]| stepper.step(b)));
                            *meta_open.borrow_mut() = Some(log);
                            set
                        })
                    }
                    other => other,
                }
            }
        };
        match opened {
            Ok(set) => {
                tracing::info!(
                    shard = shard_id,
                    "replicated __consumer_offsets partitions open"
                );
                *exec_open
                    .replicas
                    .as_ref()
                    .expect("a cluster node has replicas")
                    .borrow_mut() = Some(set);
                let _ = ready.send(Ok(()));
            }
            Err(e) => {
                let _ = ready.send(Err(e));
            }
        }
    });
    let replicas = exec.clone();
    let meta_tick = meta.clone();
    // Kafka's automatic preferred leader election (`auto.leader.rebalance.enable`): validated at
    // start, so a bad value never reaches here.
    let topics_broker = shard.broker.clone();
    let rebalance_every = topics_broker.config.leader_rebalance_ms().ok().flatten();
    let next_rebalance = std::cell::Cell::new(crate::runtime::replicated::mono_ms());
    // Preferred leader elections asked for (ElectLeaders), looked for every ELECTION_POLL
    // rather than every Raft tick, so a handover starts within milliseconds of the election
    // applying here (one atomic load while none is asked for). Asked again until the preferred
    // replica leads or the election's time is up: a handover starts only once the preferred
    // replica holds every entry (`Replica::hand_to_preferred`).
    let elect_replicas = exec.clone();
    let elect_broker = shard.broker.clone();
    shard
        .tasks
        .every("preferred leader elections", ELECTION_POLL, move || {
            let now = crate::runtime::replicated::mono_ms();
            let elections = elect_broker.cluster.as_ref().and_then(|c| c.elections(now));
            if let Some(wanted) = elections {
                let n = hand_to_preferred(&elect_replicas, &elect_broker, |g| wanted.contains(&g));
                if n > 0 {
                    tracing::info!(partitions = n, "preferred leader election: handing over");
                }
            }
            std::future::ready(())
        });
    shard.tasks.every("raft ticks", RAFT_TICK, move || {
        // A node the address book learnt since (AddRaftVoter) gets this shard's link at once,
        // so it hears this node's hello (and its client endpoints) before any message.
        tick_links.open_new();
        let now = crate::runtime::replicated::mono_ms();
        let rebalance = rebalance_every.is_some_and(|every| {
            let due = now >= next_rebalance.get() + every as i64;
            if due {
                next_rebalance.set(now);
            }
            due
        });
        if let Some(set) = replicas.replicas.as_ref().and_then(|r| r.borrow().clone()) {
            set.raft_tick();
        }
        replicas.store.raft_tick();
        if rebalance {
            let n = hand_to_preferred(&replicas, &topics_broker, |_| true);
            if n > 0 {
                tracing::info!(
                    partitions = n,
                    "leadership handed to the preferred replicas"
                );
            }
        }
        let log = meta_tick.borrow().clone();
        if let Some(log) = log {
            log.raft_tick(now);
        }
        std::future::ready(())
    });
    if runs_metadata_log {
        shard.tasks.every(
            "metadata changes",
            crate::runtime::metadata_log::INBOX_POLL,
            move || {
                let log = meta.borrow().clone();
                if let Some(log) = log {
                    log.take_inbox();
                }
                std::future::ready(())
            },
        );
    }
    let replicas = exec.clone();
    shard.tasks.every("replica deadlines", TICK, move || {
        if let Some(set) = replicas.replicas.as_ref().and_then(|r| r.borrow().clone()) {
            set.tick(crate::clock::wall_clock_ms());
        }
        std::future::ready(())
    });
}

/// Accept connections on one listener until shutdown.
async fn accept_loop(
    shard: Rc<Shard>,
    listener: glommio::net::TcpListener,
    info: Arc<crate::listeners::Listener>,
    shutdown: Shutdown,
) {
    enum Event {
        Conn(glommio::Result<glommio::net::TcpStream, ()>),
        Stop,
    }
    loop {
        let stop = async {
            while !shutdown.is_triggered() {
                glommio::timer::sleep(SHUTDOWN_POLL).await;
            }
            Event::Stop
        };
        match futures_lite::future::or(async { Event::Conn(listener.accept().await) }, stop).await {
            Event::Conn(Ok(stream)) => {
                let ip = stream
                    .peer_addr()
                    .map(|a| a.ip())
                    .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
                let c = &shard.broker.config;
                match shard.broker.connections.admit(
                    ip,
                    c.max_connections as usize,
                    c.max_connections_per_ip as usize,
                ) {
                    Ok(slot) => {
                        glommio::spawn_local(crate::runtime::conn::serve(
                            shard.clone(),
                            stream,
                            slot,
                            info.clone(),
                        ))
                        .detach();
                    }
                    Err(why) => {
                        // One line per 1,000 refusals: a flood must not flood the log too.
                        let n = shard.broker.connections.refused();
                        if n % 1000 == 1 {
                            tracing::warn!(%ip, ?why, refused_so_far = n, "connection refused: over the connection limit");
                        }
                        drop(stream);
                    }
                }
            }
            Event::Conn(Err(e)) => {
                // Out of fds and similar: log, back off briefly, keep serving existing clients.
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            Event::Stop => break,
        }
    }
}

/// How `__consumer_offsets` segment logs are written and read, from the broker's config.
fn offsets_log_config(broker: &Broker) -> storage::log::LogConfig {
    storage::log::LogConfig {
        segment_bytes: broker.config.offsets_topic_segment_bytes.max(1) as u64,
        read_chunk_bytes: broker.config.offsets_load_buffer_size.max(4096) as usize,
        ..storage::log::LogConfig::default()
    }
}

/// Open and replay this shard's `__consumer_offsets` logs, one log line per partition.
async fn load_partitions(
    table: &Rc<PartitionTable>,
    broker: &Broker,
    data_dir: &std::path::Path,
) -> anyhow::Result<()> {
    let loaded = table
        .open_logs(data_dir, offsets_log_config(broker))
        .await
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    for r in loaded {
        let rep = &r.report;
        table
            .metrics
            .borrow_mut()
            .loads
            .push((r.partition, r.millis as u64, rep.records));
        tracing::info!(
            partition = r.partition,
            records = rep.records,
            bytes = rep.bytes,
            batches = rep.batches,
            segments = rep.segments,
            millis = r.millis as u64,
            skipped = r.skipped_records,
            snapshot_offset = rep.snapshot.map_or(-1, |(o, _, _)| o as i64),
            snapshot_records = rep.snapshot.map_or(0, |(_, n, _)| n),
            "loaded __consumer_offsets-{}",
            r.partition
        );
        if let Some((segment, pos, reason)) = &rep.truncated {
            tracing::warn!(partition = r.partition, segment = %segment, position = pos, %reason, "truncated a torn or corrupt log tail");
        }
    }
    Ok(())
}

/// io_uring registers memory that counts against RLIMIT_MEMLOCK; raise the soft limit to the
/// hard one so several shards fit where the administrator allows it.
fn raise_memlock_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read/write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_another_socket_holds_is_refused() {
        let first = bind_listeners("127.0.0.1:0".parse().unwrap(), 2).unwrap();
        assert_ne!(first.addr().port(), 0);
        assert_eq!(first.shards(), 2);
        assert_eq!(
            foreign_listeners(first.addr(), &first.bound[0].fds).unwrap(),
            0
        );
        let err = bind_listeners(first.addr(), 2)
            .err()
            .expect("the port is held");
        assert!(err.to_string().contains("cannot listen on"), "{err}");
        // Once the first sockets are closed, the port can be bound again at once.
        let addr = first.addr();
        drop(first);
        bind_listeners(addr, 1).unwrap();
    }

    #[test]
    fn a_socket_that_joined_the_port_is_found() {
        // What a second broker starting in the same microseconds would leave: its own
        // SO_REUSEPORT socket in our port's group, which only the /proc check can see.
        let ours = bind_listeners("127.0.0.1:0".parse().unwrap(), 2).unwrap();
        let intruder = bind_shard_socket(ours.addr()).unwrap();
        assert_eq!(
            foreign_listeners(ours.addr(), &ours.bound[0].fds).unwrap(),
            1
        );
        let all: Vec<OwnedFd> = ours.bound[0]
            .fds
            .iter()
            .map(|f| f.try_clone().unwrap())
            .chain([intruder])
            .collect();
        assert_eq!(foreign_listeners(ours.addr(), &all).unwrap(), 0);
    }

    #[test]
    fn ipv6_loopback_listeners_are_matched() {
        let Ok(ours) = bind_listeners("[::1]:0".parse().unwrap(), 1) else {
            return; // no IPv6 on this machine
        };
        let intruder = bind_shard_socket(ours.addr()).unwrap();
        assert_eq!(
            foreign_listeners(ours.addr(), &ours.bound[0].fds).unwrap(),
            1
        );
        drop(intruder);
        assert_eq!(
            foreign_listeners(ours.addr(), &ours.bound[0].fds).unwrap(),
            0
        );
    }
}
