//! What every shard shares: the configuration, the topic registry, the cluster identity, the
//! producer id block, connection accounting, the metrics hub and the SCRAM credentials. Plain state; the API layer
//! (`api/`) answers requests with it.

use crate::config::Config;
use crate::topics::TopicRegistry;
use wire::Versions;

/// Everything the handlers share across shards. Immutable except for the topic registry and the
/// feature levels.
#[derive(Debug)]
pub struct Broker {
    pub config: Config,
    pub versions: Versions,
    pub topics: TopicRegistry,
    /// Per-group config overrides (GROUP config resources).
    pub group_configs: crate::group_configs::GroupConfigRegistry,
    pub cluster_id: String,
    pub node_id: i32,
    /// What clients are told to connect to (advertised.listeners, else the listen address).
    /// The first listener's advertised endpoint (handlers answer with the endpoint of the
    /// listener a request arrived on: `Caller::listener`).
    pub host: String,
    pub port: i32,
    /// The listeners served, in configured order (every shard accepts on each).
    pub listeners: Vec<std::sync::Arc<crate::listeners::Listener>>,
    /// Where `__consumer_offsets-<p>` logs live; None keeps group state in memory only (tests).
    pub data_dir: Option<std::path::PathBuf>,
    /// Where shards publish their measurements (read by `--metrics-listen`).
    pub metrics: std::sync::Arc<crate::metrics::MetricsHub>,
    /// Idempotent producer ids (InitProducerId).
    pub producer_ids: crate::producer_ids::ProducerIds,
    /// Finalized feature levels (`transaction.version`), changed by UpdateFeatures.
    pub features: crate::features::Features,
    /// `max.connections` / `max.connections.per.ip` accounting across shards.
    pub connections: std::sync::Arc<crate::limits::ConnectionLimits>,
    /// SCRAM credentials (AlterUserScramCredentials writes, SCRAM authentications read).
    pub scram: crate::scram_store::ScramStore,
    /// The ACLs, when `authorizer.class.name` names the standard authorizer; None authorizes
    /// everything (Kafka without an authorizer).
    pub acls: Option<std::sync::Arc<crate::acls::AclStore>>,
    /// The cluster this node is one voter of (`controller.quorum.voters` naming other nodes);
    /// None for a single node, which replicates nothing.
    pub cluster: Option<std::sync::Arc<crate::cluster::Cluster>>,
}
