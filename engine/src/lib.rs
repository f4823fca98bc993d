//! `engine`: the broker — Ringleader's group coordinator and everything that runs it.
//!
//! Owns, layer by layer (each uses only the ones above it in this list; `tests/layers.rs`
//! checks it):
//! - shared state: the configuration (`config`, Kafka's key names and defaults), the data-dir
//!   identity (`meta`), the topic registry (`topics`), the producer id block (`producer_ids`),
//!   the finalized feature levels (`features`), the SCRAM credentials (`scram_store`), the
//!   ACL set (`acls`), the listeners with their TLS and SASL settings (`listeners`, `tls`),
//!   connection limits (`limits`), measurements (`metrics`), and `broker::Broker`, which holds
//!   them for every shard;
//! - `data`: the data path's shard side — topic partition logs, their writer tasks, retention;
//! - `runtime`: one glommio executor pinned per core (`server`, `shard`), client connections
//!   with in-order responses (`conn`), calls between shards by typed route with a stall bound
//!   (`router`), the glommio shell around each `__consumer_offsets` partition's sans-IO core
//!   (`partition`), background tasks and the one shutdown token (`tasks`);
//! - `api`: one file per Kafka API, reaching shard state only through the router;
//! - the `ringleader` binary (`main.rs`).
//!
//! The coordinator state machines and the partition core are the `coordinator` crate (pure:
//! `now` passed in, records out); the simulator (`sim`) and the tools (`tools`) are crates of
//! their own that use this one.
//!
//! Must not: read a clock or touch a socket inside a state machine (time is passed in), share a
//! partition's state between threads, or encode bytes by hand that `wire` knows how to encode.

// The pure coordinator lives in its own crate; these paths keep `crate::group::..` readable.
pub use coordinator::{group, partition_core, snapshot_build, txn};

// Shared state and utilities: depend on nothing below.
pub mod acls;
pub mod broker;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod features;
pub mod group_configs;
pub mod limits;
pub mod listeners;
pub mod meta;
pub mod metrics;
pub mod oneshot;
pub mod producer_ids;
pub mod raft_io;
pub mod scram_store;
pub mod tls;
pub mod topics;

// The data path's shard side: topic partition logs.
pub mod data;

// Threads, sockets, files and timers; knows no API.
pub mod runtime;

// One file per Kafka API; reaches shard state through the runtime's router.
pub mod api;

use std::path::Path;
use std::sync::Arc;

/// Start one shard per socket of `listeners` ([`runtime::server::bind_listeners`]) serving
/// `broker`, answering with the API layer.
pub fn start(
    broker: Arc<broker::Broker>,
    listeners: runtime::server::Listeners,
) -> anyhow::Result<runtime::server::ServerHandle> {
    runtime::server::start(broker, listeners, api::handle)
}

/// Open the data directory and build the shared broker state for one PLAINTEXT listener at
/// `addr` (advertised as `advertised.listeners` says, else at `addr`).
pub fn open_broker(
    config: config::Config,
    data_dir: &Path,
    addr: std::net::SocketAddr,
) -> anyhow::Result<Arc<broker::Broker>> {
    let (host, port) = match config.advertised_host_port() {
        Some((h, p)) => (h, p as i32),
        None => (listeners::advertised_host_for(addr), addr.port() as i32),
    };
    let listener = Arc::new(listeners::Listener::plaintext(addr, host, port));
    open_broker_with(config, data_dir, vec![listener])
}

/// Open the data directory and build the shared broker state for `listeners`
/// ([`runtime::server::Listeners::resolve`]), in the order their sockets were bound.
pub fn open_broker_with(
    config: config::Config,
    data_dir: &Path,
    listeners: Vec<Arc<listeners::Listener>>,
) -> anyhow::Result<Arc<broker::Broker>> {
    anyhow::ensure!(!listeners.is_empty(), "no listener to serve");
    std::fs::create_dir_all(data_dir)
        .map_err(|e| anyhow::anyhow!("cannot create data dir {}: {e}", data_dir.display()))?;
    let meta = meta::load_or_create(data_dir, config.node_id, &config.cluster_id)?;
    let topics = topics::TopicRegistry::open(data_dir, config.offsets_topic_num_partitions)?;
    let group_configs = group_configs::GroupConfigRegistry::open(data_dir)?;
    let acls = acls::AclStore::open(&config, Some(data_dir))?.map(Arc::new);
    let (host, port) = (
        listeners[0].advertised_host.clone(),
        listeners[0].advertised_port,
    );
    let endpoints = listeners
        .iter()
        .map(|l| cluster::Endpoint {
            listener: l.name.clone(),
            host: l.advertised_host.clone(),
            port: l.advertised_port,
        })
        .collect();
    let cluster = cluster_of(&config, endpoints)?;
    if let Some(c) = &cluster {
        meta::ensure_directory_id(data_dir, c.directory_id(c.node_id))?;
        c.open_peer_records(data_dir)?;
    }
    // A first voter's lane is its position in controller.quorum.voters; a joining node's is its
    // id, which the metadata log and the config require to be past those positions.
    let lane = cluster.as_ref().map(|c| {
        c.voters
            .iter()
            .position(|v| v.id == c.node_id)
            .unwrap_or(c.node_id as usize)
    });
    Ok(Arc::new(broker::Broker {
        versions: wire::Versions::default(),
        topics,
        group_configs,
        cluster_id: meta.cluster_id,
        node_id: meta.node_id,
        incarnation: meta.incarnation,
        host,
        port,
        listeners,
        config,
        data_dir: Some(data_dir.to_path_buf()),
        metrics: metrics::MetricsHub::new(),
        producer_ids: producer_ids::ProducerIds::open(Some(data_dir), lane)
            .map_err(|e| anyhow::anyhow!("cannot read the producer id block: {e}"))?,
        features: features::Features::open(Some(data_dir))
            .map_err(|e| anyhow::anyhow!("cannot read the feature levels: {e}"))?,
        connections: Default::default(),
        scram: scram_store::ScramStore::open(data_dir)
            .map_err(|e| anyhow::anyhow!("cannot read the SCRAM credentials: {e}"))?,
        cluster,
        acls,
    }))
}

/// The cluster this node belongs to, when `controller.quorum.voters` names other nodes too.
fn cluster_of(
    config: &config::Config,
    endpoints: Vec<cluster::Endpoint>,
) -> anyhow::Result<Option<Arc<cluster::Cluster>>> {
    let voters = config
        .quorum_voters()
        .map_err(|e| anyhow::anyhow!("controller.quorum.voters: {e}"))?;
    if voters.iter().all(|v| v.id == i64::from(config.node_id)) {
        return Ok(None);
    }
    // Kafka formats every node's storage with one cluster id; here it is configured, and the
    // nodes check it when they connect (runtime::peers).
    anyhow::ensure!(
        !config.cluster_id.is_empty(),
        "a node of a cluster (controller.quorum.voters names other nodes) needs cluster.id, \
         the same on every node"
    );
    let voters: Vec<cluster::Voter> = voters
        .into_iter()
        .map(|v| cluster::Voter {
            id: v.id as u64,
            addr: cluster::node_addr(&v.host, v.port),
        })
        .collect();
    let node = config.node_id as u64;
    let partitions = config.offsets_topic_num_partitions;
    let cluster_id = config.cluster_id.clone();
    if voters.iter().any(|v| v.id == node) {
        return Ok(Some(Arc::new(cluster::Cluster::new(
            node, cluster_id, voters, partitions, endpoints,
        ))));
    }
    // Not one of the first voters: a node started to join (Config::validate checked it has a
    // controller listener).
    let (host, port) = config
        .join_address()
        .map_err(|e| anyhow::anyhow!("listeners: {e}"))?
        .ok_or_else(|| anyhow::anyhow!("node {node} is not in controller.quorum.voters"))?;
    let host = if host.is_empty() { "0.0.0.0" } else { &host };
    let addr = cluster::node_addr(host, port);
    Ok(Some(Arc::new(cluster::Cluster::joining(
        node, cluster_id, voters, addr, partitions, endpoints,
    ))))
}
