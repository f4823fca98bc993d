//! `engine`: Ringleader's group coordinator and everything that runs it.
//!
//! Owns: the broker surface (ApiVersions, Metadata, topics, FindCoordinator, DescribeConfigs,
//! DescribeCluster), the thread-per-core runtime (one glommio executor pinned per core), client
//! connections with in-order responses, routing of a group's work to the shard that owns its
//! `__consumer_offsets` partition, the broker configuration (Kafka's key names and defaults), and
//! the `ringleader` binary. The coordinator state machines are in `group` (pure: `now` passed in,
//! records out); `partition` runs them per `__consumer_offsets` partition with group commit,
//! sliced snapshots (`snapshot_build`) and compaction; `topic_data` and `data` serve topic
//! partitions (Produce, Fetch, ListOffsets); `sim` drives all of it deterministically.
//!
//! Must not: read a clock or touch a socket inside a state machine (time is passed in), share a
//! partition's state between threads, or encode bytes by hand that `wire` knows how to encode.

// The pure coordinator lives in its own crate; these paths keep `crate::group::..` readable.
pub use coordinator::{group, partition_core, snapshot_build};

pub mod broker;
pub mod config;
pub mod conn;
pub mod data;
pub mod groups_api;
pub mod limits;
pub mod meta;
pub mod metrics;
pub mod oneshot;
pub mod partition;
pub mod router;
pub mod server;
pub mod shard;
pub mod topic_data;
pub mod topics;

use std::path::Path;
use std::sync::Arc;

/// Open the data directory and build the shared broker state for a listener at `addr`.
pub fn open_broker(
    config: config::Config,
    data_dir: &Path,
    addr: std::net::SocketAddr,
) -> anyhow::Result<Arc<broker::Broker>> {
    std::fs::create_dir_all(data_dir)
        .map_err(|e| anyhow::anyhow!("cannot create data dir {}: {e}", data_dir.display()))?;
    let meta = meta::load_or_create(data_dir, config.node_id, &config.cluster_id)?;
    let topics = topics::TopicRegistry::open(data_dir, config.offsets_topic_num_partitions)?;
    let (host, port) = match config.advertised_host_port() {
        Some((h, p)) => (h, p as i32),
        None => (advertised_host_for(addr), addr.port() as i32),
    };
    Ok(Arc::new(broker::Broker {
        versions: wire::Versions::default(),
        topics,
        cluster_id: meta.cluster_id,
        node_id: meta.node_id,
        host,
        port,
        config,
        data_dir: Some(data_dir.to_path_buf()),
        metrics: metrics::MetricsHub::new(),
        producer_ids: topic_data::ProducerIds::open(Some(data_dir))
            .map_err(|e| anyhow::anyhow!("cannot read the producer id block: {e}"))?,
        connections: Default::default(),
    }))
}

/// Without `advertised.listeners`, tell clients the address we listen on; a wildcard address is
/// not connectable, so use the host name there, as Kafka does for an empty listener host.
fn advertised_host_for(addr: std::net::SocketAddr) -> String {
    if !addr.ip().is_unspecified() {
        return addr.ip().to_string();
    }
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        if let Ok(h) = std::str::from_utf8(&buf[..end]) {
            if !h.is_empty() {
                return h.to_string();
            }
        }
    }
    "localhost".into()
}
