//! Starting and stopping the broker: one glommio executor per core, each accepting connections.
//!
//! Every shard binds the same address with SO_REUSEPORT (and SO_REUSEADDR, for quick restarts),
//! so the kernel spreads new connections across shards and no accept thread hands sockets over.
//! Because SO_REUSEPORT would also let a second broker silently share the port, start-up first
//! binds the address once without it: if anything else holds the port, we fail like Kafka does.
//! That probe also resolves port 0 to a concrete port all shards then share.
//!
//! Shutdown (SIGINT/SIGTERM → [`ServerHandle::shutdown`]): shards stop accepting, stop reading
//! from their connections, let in-flight requests finish and their responses be written, then exit.

use crate::broker::Broker;
use crate::data::DataStore;
use crate::runtime::partition::PartitionTable;
use crate::runtime::router::{self, Executor, Router};
use crate::runtime::shard::{ConnRegistry, Handler, Shard, ShardExec};
use crate::runtime::tasks::{Shutdown, Tasks};
use glommio::{LocalExecutorBuilder, Placement};
use std::net::SocketAddr;
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

/// Bind once without SO_REUSEPORT to detect a port already in use and to resolve port 0.
///
/// "Address in use" is retried for up to a second: a broker restarted right after a SIGKILL finds
/// the old process's listening socket still held for a few milliseconds while the kernel tears
/// down its io_uring (measured 4–6 ms here). A port held by a live process still fails, later.
pub fn probe_listen_addr(listen: SocketAddr) -> anyhow::Result<SocketAddr> {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        match std::net::TcpListener::bind(listen) {
            Ok(probe) => return Ok(probe.local_addr()?),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => anyhow::bail!("cannot listen on {listen}: {e}"),
        }
    }
}

/// Start `cores` shards serving `broker` on `addr` (a concrete port, see [`probe_listen_addr`]),
/// each answering requests with `handler` (the API layer). Returns once every shard is
/// accepting.
pub fn start(
    broker: Arc<Broker>,
    addr: SocketAddr,
    cores: usize,
    handler: Handler,
) -> anyhow::Result<ServerHandle> {
    anyhow::ensure!(cores >= 1, "--cores must be at least 1");
    raise_memlock_limit();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let shutdown = Shutdown::default();
    let mesh = (cores > 1).then(|| router::mesh(cores));
    let (ready_tx, ready_rx) = mpsc::channel::<anyhow::Result<()>>();
    let partitions = broker.config.offsets_topic_num_partitions;
    let mut shards = Vec::with_capacity(cores);
    for i in 0..cores {
        let broker = broker.clone();
        let shutdown = shutdown.clone();
        let mesh = mesh.clone();
        let ready_tx = ready_tx.clone();
        let handle = LocalExecutorBuilder::new(Placement::Fixed(i % cpus))
            .name(&format!("shard-{i}"))
            .io_memory(IO_MEMORY_PER_SHARD)
            .spawn(move || async move {
                if let Err(e) =
                    run_shard(broker, addr, mesh, partitions, shutdown, handler, &ready_tx).await
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
    Ok(ServerHandle {
        local_addr: addr,
        shutdown,
        shards,
    })
}

async fn run_shard(
    broker: Arc<Broker>,
    addr: SocketAddr,
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
        let table = Rc::new(PartitionTable::new(shard, shards, partitions, group_config));
        let configs_broker = exec_broker.clone();
        table.set_group_configs(Rc::new(move || configs_broker.group_configs.snapshot()));
        let store = DataStore::new(exec_broker, shard);
        built = Some((table.clone(), store.clone()));
        Rc::new(ShardExec { table, store })
    })
    .await?;
    let (table, store) = built.expect("join built the shard's state");
    if router.shard() == 0 {
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
    if data_dir.is_some() {
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
    let listener =
        bind_shard_listener(addr).map_err(|e| anyhow::anyhow!("shard bind {addr}: {e}"))?;
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
        broker,
        router,
        conns: Rc::new(ConnRegistry::default()),
        tasks: tasks.clone(),
        handler,
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
    {
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
    drop(listener);
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
    Ok(())
}

/// Open and replay this shard's `__consumer_offsets` logs, one log line per partition.
async fn load_partitions(
    table: &Rc<PartitionTable>,
    broker: &Broker,
    data_dir: &std::path::Path,
) -> anyhow::Result<()> {
    let log_config = storage::log::LogConfig {
        segment_bytes: broker.config.offsets_topic_segment_bytes.max(1) as u64,
        read_chunk_bytes: broker.config.offsets_load_buffer_size.max(4096) as usize,
        ..storage::log::LogConfig::default()
    };
    let loaded = table
        .open_logs(data_dir, log_config)
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

/// A listener that shares its port with the other shards (SO_REUSEPORT) and can be re-bound at
/// once after a restart (SO_REUSEADDR): connections we close at shutdown sit in TIME_WAIT on this
/// port, and without SO_REUSEADDR on the listener (which accepted sockets inherit) they would block
/// the next start for a minute. glommio's own `bind` sets only SO_REUSEPORT.
fn bind_shard_listener(addr: SocketAddr) -> std::io::Result<glommio::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    use std::os::fd::{FromRawFd, IntoRawFd};
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.bind(&addr.into())?;
    // Thousands of clients may connect at once (loadgen, a restart of a big deployment); a
    // short accept queue turns the overflow into 1 s SYN retransmits.
    sock.listen(4096)?;
    // SAFETY: the fd is a freshly created, bound, listening TCP socket whose ownership moves to
    // the glommio listener (into_raw_fd gives it up).
    Ok(unsafe { glommio::net::TcpListener::from_raw_fd(sock.into_raw_fd()) })
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
