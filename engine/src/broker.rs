//! The broker surface every client needs before it can join a group: ApiVersions, Metadata,
//! topics (CreateTopics, DeleteTopics, auto-creation), FindCoordinator, DescribeConfigs and
//! DescribeCluster, for one broker that owns every partition.
//!
//! Handlers are plain functions of (broker, request, version) → response; the only side effects
//! are topic registry writes, which run on a blocking thread.

use crate::config::Config;
use crate::topics::{self, RegistryError, Topic, TopicRegistry, CONSUMER_OFFSETS};
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;
use wire::Versions;

/// Kafka's "authorized operations not requested" marker (`Integer.MIN_VALUE`).
const AUTHORIZED_OPS_OMITTED: i32 = i32::MIN;

/// An `AclOperation` set as the 32-bit field the protocol carries (`Utils.to32BitField`).
const fn ops(codes: &[u8]) -> i32 {
    let mut bits = 0i32;
    let mut i = 0;
    while i < codes.len() {
        bits |= 1 << codes[i];
        i += 1;
    }
    bits
}

// `AclOperation` codes.
const READ: u8 = 3;
const WRITE: u8 = 4;
const CREATE: u8 = 5;
const DELETE: u8 = 6;
const ALTER: u8 = 7;
const DESCRIBE: u8 = 8;
const CLUSTER_ACTION: u8 = 9;
const DESCRIBE_CONFIGS: u8 = 10;
const ALTER_CONFIGS: u8 = 11;
const IDEMPOTENT_WRITE: u8 = 12;

// What a client asking for its authorized operations is told. Ringleader has no authorizer,
// and with none Kafka allows, and reports, every operation the resource type supports
// (`AuthHelper.authorizedOperations` → `AclEntry.supportedOperations`): topic 3576, group
// 3400, as the reference broker answers.
pub const TOPIC_AUTHORIZED_OPS: i32 = ops(&[
    READ,
    WRITE,
    CREATE,
    DELETE,
    ALTER,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
]);
pub const GROUP_AUTHORIZED_OPS: i32 =
    ops(&[READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]);
pub const CLUSTER_AUTHORIZED_OPS: i32 = ops(&[
    CREATE,
    ALTER,
    DESCRIBE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
]);

/// Everything the handlers share across shards. Immutable except for the topic registry.
#[derive(Debug)]
pub struct Broker {
    pub config: Config,
    pub versions: Versions,
    pub topics: TopicRegistry,
    pub cluster_id: String,
    pub node_id: i32,
    /// What clients are told to connect to (advertised.listeners, else the listen address).
    pub host: String,
    pub port: i32,
    /// Where `__consumer_offsets-<p>` logs live; None keeps group state in memory only (tests).
    pub data_dir: Option<std::path::PathBuf>,
    /// Where shards publish their measurements (read by `--metrics-listen`).
    pub metrics: std::sync::Arc<crate::metrics::MetricsHub>,
    /// Idempotent producer ids (InitProducerId).
    pub producer_ids: crate::topic_data::ProducerIds,
    /// `max.connections` / `max.connections.per.ip` accounting across shards.
    pub connections: std::sync::Arc<crate::limits::ConnectionLimits>,
}

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// Topic-level configs a topic may carry, with Kafka's defaults (`TopicConfig` /
/// `LogConfig`). CreateTopics rejects any other name with INVALID_CONFIG.
const TOPIC_CONFIG_DEFAULTS: &[(&str, &str)] = &[
    ("cleanup.policy", "delete"),
    ("compression.type", "producer"),
    ("delete.retention.ms", "86400000"),
    ("file.delete.delay.ms", "60000"),
    ("flush.messages", "9223372036854775807"),
    ("flush.ms", "9223372036854775807"),
    ("index.interval.bytes", "4096"),
    ("max.compaction.lag.ms", "9223372036854775807"),
    ("max.message.bytes", "1048588"),
    ("message.timestamp.type", "CreateTime"),
    ("min.cleanable.dirty.ratio", "0.5"),
    ("min.compaction.lag.ms", "0"),
    ("min.insync.replicas", "1"),
    ("preallocate", "false"),
    ("retention.bytes", "-1"),
    ("retention.ms", "604800000"),
    ("segment.bytes", "1073741824"),
    ("segment.index.bytes", "10485760"),
    ("segment.jitter.ms", "0"),
    ("segment.ms", "604800000"),
    ("unclean.leader.election.enable", "false"),
];

/// Check a topic config value as Kafka's `LogConfig` ConfigDef does: its type, then its
/// validator, with Kafka's message (`ConfigException`: "Invalid value V for configuration K: ...").
fn validate_topic_config(key: &str, value: &str) -> Result<(), String> {
    let bad = |why: String| {
        Err(format!(
            "Invalid value {value} for configuration {key}: {why}"
        ))
    };
    let long = |min: i64| match value.trim().parse::<i64>() {
        Err(_) => bad("Not a number of type LONG".into()),
        Ok(v) if v < min => bad(format!("Value must be at least {min}")),
        Ok(_) => Ok(()),
    };
    let int = |min: i32| match value.trim().parse::<i32>() {
        Err(_) => bad("Not a number of type INT".into()),
        Ok(v) if v < min => bad(format!("Value must be at least {min}")),
        Ok(_) => Ok(()),
    };
    let one_of = |allowed: &[&str]| {
        if allowed.contains(&value.trim()) {
            Ok(())
        } else {
            bad(format!("String must be one of: {}", allowed.join(", ")))
        }
    };
    let boolean = || match value.trim().to_ascii_lowercase().as_str() {
        "true" | "false" => Ok(()),
        _ => bad("Expected value to be either true or false".into()),
    };
    match key {
        "cleanup.policy" => {
            for item in value.split(',').map(str::trim) {
                if !["compact", "delete"].contains(&item) {
                    return bad(format!("Invalid value {item} for configuration {key}: String must be one of: compact, delete"));
                }
            }
            Ok(())
        }
        "compression.type" => {
            one_of(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"])
        }
        "message.timestamp.type" => one_of(&["CreateTime", "LogAppendTime"]),
        "delete.retention.ms"
        | "file.delete.delay.ms"
        | "flush.ms"
        | "min.compaction.lag.ms"
        | "segment.jitter.ms" => long(0),
        "flush.messages" | "max.compaction.lag.ms" | "segment.ms" => long(1),
        "retention.ms" => long(-1),
        "retention.bytes" => long(i64::MIN),
        "index.interval.bytes" | "max.message.bytes" => int(0),
        "min.insync.replicas" => int(1),
        "segment.bytes" => int(1024 * 1024),
        "segment.index.bytes" => int(4),
        "preallocate" | "unclean.leader.election.enable" => boolean(),
        "min.cleanable.dirty.ratio" => match value.trim().parse::<f64>() {
            Err(_) => bad("Not a number of type DOUBLE".into()),
            Ok(v) if v < 0.0 => bad("Value must be at least 0".into()),
            Ok(v) if v > 1.0 => bad("Value must be no more than 1".into()),
            Ok(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

/// DescribeConfigs ConfigSource codes.
const SOURCE_TOPIC_CONFIG: i8 = 1;
const SOURCE_DEFAULT_CONFIG: i8 = 5;

/// DescribeConfigs resource types (`ConfigResource.Type`).
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;

impl Broker {
    /// The effective configs of a topic: its overrides, then Kafka's defaults. The internal
    /// offsets topic is compacted, as Kafka creates it (`GroupCoordinatorService.groupMetadataTopicConfigs`).
    fn topic_configs(&self, topic: &Topic) -> Vec<(String, String, bool)> {
        let mut out = Vec::with_capacity(TOPIC_CONFIG_DEFAULTS.len());
        for (name, default) in TOPIC_CONFIG_DEFAULTS {
            let internal_override = match (*name, topic.internal) {
                ("cleanup.policy", true) => Some("compact".to_string()),
                ("segment.bytes", true) => {
                    Some(self.config.offsets_topic_segment_bytes.to_string())
                }
                _ => None,
            };
            match topic.configs.get(*name).cloned().or(internal_override) {
                Some(v) => out.push(((*name).to_string(), v, false)),
                None => out.push(((*name).to_string(), (*default).to_string(), true)),
            }
        }
        out
    }

    fn metadata_topic(&self, topic: &Topic, version: i16) -> MetadataResponseTopic {
        let node = BrokerId(self.node_id);
        let partitions = (0..topic.partitions)
            .map(|p| {
                MetadataResponsePartition::default()
                    .with_partition_index(p)
                    .with_leader_id(node)
                    .with_leader_epoch(0)
                    .with_replica_nodes(vec![node])
                    .with_isr_nodes(vec![node])
            })
            .collect();
        let mut t = MetadataResponseTopic::default()
            .with_name(Some(TopicName(s(topic.name.clone()))))
            .with_is_internal(topic.internal)
            .with_partitions(partitions)
            .with_topic_authorized_operations(AUTHORIZED_OPS_OMITTED);
        if version >= 10 {
            t.topic_id = topic.id;
        }
        t
    }

    fn metadata_error(name: Option<&str>, id: Uuid, err: ResponseError) -> MetadataResponseTopic {
        MetadataResponseTopic::default()
            .with_error_code(code(err))
            .with_name(name.map(|n| TopicName(s(n))))
            .with_topic_id(id)
            .with_topic_authorized_operations(AUTHORIZED_OPS_OMITTED)
    }

    fn broker_list(&self) -> Vec<MetadataResponseBroker> {
        vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(self.node_id))
            .with_host(s(self.host.clone()))
            .with_port(self.port)]
    }
}

/// Metadata v0–v13. Unknown topics are created when the request allows it (v4+ flag; implied
/// before v4) and `auto.create.topics.enable` is set, and returned ready to use.
pub async fn metadata(
    broker: &Arc<Broker>,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let topic_ops = version >= 8 && req.include_topic_authorized_operations;
    let cluster_ops = (8..=10).contains(&version) && req.include_cluster_authorized_operations;
    let mut resp = metadata_topics(broker, req, version).await;
    if topic_ops {
        for t in &mut resp.topics {
            t.topic_authorized_operations = TOPIC_AUTHORIZED_OPS;
        }
    }
    if cluster_ops {
        resp.cluster_authorized_operations = CLUSTER_AUTHORIZED_OPS;
    }
    resp
}

async fn metadata_topics(
    broker: &Arc<Broker>,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let mut resp = MetadataResponse::default()
        .with_brokers(broker.broker_list())
        .with_cluster_id(Some(s(broker.cluster_id.clone())))
        .with_controller_id(BrokerId(broker.node_id))
        .with_cluster_authorized_operations(AUTHORIZED_OPS_OMITTED);
    let snap = broker.topics.snapshot();
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let requested = match req.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(t),
    };
    let Some(requested) = requested else {
        resp.topics = snap
            .iter()
            .map(|t| broker.metadata_topic(t, version))
            .collect();
        return resp;
    };
    let allow_create =
        (version < 4 || req.allow_auto_topic_creation) && broker.config.auto_create_topics_enable;
    let mut seen = std::collections::HashSet::new();
    for rt in requested {
        // v12+ may name a topic by id alone (name null; some clients send "" instead).
        let name = rt
            .name
            .filter(|n| !(n.0.is_empty() && !rt.topic_id.is_nil()));
        match name {
            Some(name) => {
                let name = name.0.to_string();
                if !seen.insert(name.clone()) {
                    continue;
                }
                if let Some(t) = snap.get(&name) {
                    resp.topics.push(broker.metadata_topic(t, version));
                    continue;
                }
                if let Err(_reason) = topics::validate_name(&name) {
                    resp.topics.push(Broker::metadata_error(
                        Some(&name),
                        Uuid::nil(),
                        ResponseError::InvalidTopicException,
                    ));
                    continue;
                }
                if !allow_create {
                    resp.topics.push(Broker::metadata_error(
                        Some(&name),
                        Uuid::nil(),
                        ResponseError::UnknownTopicOrPartition,
                    ));
                    continue;
                }
                let partitions = broker.config.num_partitions;
                if broker.config.default_replication_factor != 1 {
                    // One broker cannot hold more copies; Kafka's auto-create fails the same way.
                    resp.topics.push(Broker::metadata_error(
                        Some(&name),
                        Uuid::nil(),
                        ResponseError::InvalidReplicationFactor,
                    ));
                    continue;
                }
                match create_topic(broker, name.clone(), partitions, BTreeMap::new()).await {
                    Ok(t) => {
                        tracing::info!(topic = %t.name, partitions = t.partitions, id = %t.id, "auto-created topic");
                        resp.topics.push(broker.metadata_topic(&t, version));
                    }
                    // A concurrent creator won the race: report what is there now.
                    Err(RegistryError::AlreadyExists(_)) => {
                        match broker.topics.snapshot().get(&name) {
                            Some(t) => resp.topics.push(broker.metadata_topic(t, version)),
                            None => resp.topics.push(Broker::metadata_error(
                                Some(&name),
                                Uuid::nil(),
                                ResponseError::LeaderNotAvailable,
                            )),
                        }
                    }
                    Err(RegistryError::Collides(..) | RegistryError::InvalidName(_)) => {
                        resp.topics.push(Broker::metadata_error(
                            Some(&name),
                            Uuid::nil(),
                            ResponseError::InvalidTopicException,
                        ))
                    }
                    Err(e) => {
                        tracing::error!(topic = %name, error = %e, "auto-creating topic failed");
                        resp.topics.push(Broker::metadata_error(
                            Some(&name),
                            Uuid::nil(),
                            ResponseError::UnknownServerError,
                        ));
                    }
                }
            }
            // Lookup by topic id (v12+; earlier versions cannot carry one).
            None => match snap.get_by_id(&rt.topic_id) {
                Some(t) if version >= 12 => resp.topics.push(broker.metadata_topic(t, version)),
                _ => resp.topics.push(Broker::metadata_error(
                    None,
                    rt.topic_id,
                    ResponseError::UnknownTopicId,
                )),
            },
        }
    }
    resp
}

/// Registry writes fsync; keep them off the reactor.
async fn create_topic(
    broker: &Arc<Broker>,
    name: String,
    partitions: i32,
    configs: BTreeMap<String, String>,
) -> Result<Arc<Topic>, RegistryError> {
    let b = broker.clone();
    glommio::executor()
        .spawn_blocking(move || b.topics.create(&name, partitions, configs))
        .await
}

async fn delete_topic(broker: &Arc<Broker>, name: String) -> Result<Arc<Topic>, RegistryError> {
    let b = broker.clone();
    glommio::executor()
        .spawn_blocking(move || b.topics.delete(&name))
        .await
}

/// CreateTopics v2–v7 for a single broker: replication factor 1 only.
pub async fn create_topics(
    broker: &Arc<Broker>,
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut resp = CreateTopicsResponse::default();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for t in &req.topics {
        *counts.entry(t.name.0.to_string()).or_default() += 1;
    }
    let mut reported_dup = std::collections::HashSet::new();
    for t in req.topics {
        let name = t.name.0.to_string();
        let mut result = CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_num_partitions(-1)
            .with_replication_factor(-1);
        let fail = |mut r: CreatableTopicResult, e: ResponseError, msg: String| {
            r.error_code = code(e);
            r.error_message = Some(s(msg));
            r
        };
        if counts[&name] > 1 {
            // Kafka reports a duplicated name once, as INVALID_REQUEST.
            if reported_dup.insert(name.clone()) {
                resp.topics.push(fail(
                    result,
                    ResponseError::InvalidRequest,
                    format!("Duplicate topic name: {name}"),
                ));
            }
            continue;
        }
        let partitions = if t.num_partitions == -1 && t.assignments.is_empty() {
            broker.config.num_partitions
        } else {
            t.num_partitions
        };
        let rf = if t.replication_factor == -1 {
            broker.config.default_replication_factor
        } else {
            t.replication_factor as i32
        };
        if let Err(reason) = topics::validate_name(&name) {
            resp.topics
                .push(fail(result, ResponseError::InvalidTopicException, reason));
            continue;
        }
        if !t.assignments.is_empty() {
            if t.num_partitions != -1 || t.replication_factor != -1 {
                resp.topics.push(fail(
                    result,
                    ResponseError::InvalidRequest,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".into(),
                ));
                continue;
            }
            let bad = t.assignments.iter().enumerate().find(|(i, a)| {
                a.partition_index != *i as i32
                    || a.broker_ids.len() != 1
                    || a.broker_ids[0].0 != broker.node_id
            });
            if let Some((_, a)) = bad {
                resp.topics.push(fail(
                    result,
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "Invalid replica assignment for partition {}: only broker {} exists",
                        a.partition_index, broker.node_id
                    ),
                ));
                continue;
            }
        } else if partitions <= 0 {
            resp.topics.push(fail(
                result,
                ResponseError::InvalidPartitions,
                "Number of partitions must be larger than 0.".into(),
            ));
            continue;
        }
        let partitions = if t.assignments.is_empty() {
            partitions
        } else {
            t.assignments.len() as i32
        };
        if t.assignments.is_empty() && rf != 1 {
            let msg = if rf <= 0 {
                "Replication factor must be larger than 0, or -1 to use the default value."
                    .to_string()
            } else {
                format!(
                    "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only 1 broker(s) are registered."
                )
            };
            resp.topics
                .push(fail(result, ResponseError::InvalidReplicationFactor, msg));
            continue;
        }
        let mut configs = BTreeMap::new();
        let mut config_error = None;
        for c in &t.configs {
            let key = c.name.to_string();
            match (
                TOPIC_CONFIG_DEFAULTS.iter().any(|(n, _)| *n == key),
                &c.value,
            ) {
                (false, _) => config_error = Some(format!("Unknown topic config name: {key}")),
                (true, None) => {
                    config_error = Some(format!("Null value not supported for topic config: {key}"))
                }
                (true, Some(v)) => match validate_topic_config(&key, v) {
                    Ok(()) => {
                        configs.insert(key, v.to_string());
                    }
                    Err(msg) => config_error = Some(msg),
                },
            }
        }
        if let Some(msg) = config_error {
            resp.topics
                .push(fail(result, ResponseError::InvalidConfig, msg));
            continue;
        }
        let snap = broker.topics.snapshot();
        if snap.get(&name).is_some() {
            resp.topics.push(fail(
                result,
                ResponseError::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            ));
            continue;
        }
        if let Some(other) = snap.colliding(&name) {
            let msg = format!(
                "Topic '{name}' collides with existing topic: {}",
                other.name
            );
            resp.topics
                .push(fail(result, ResponseError::InvalidTopicException, msg));
            continue;
        }
        let created = if req.validate_only {
            Ok(Arc::new(Topic {
                name: name.clone(),
                id: Uuid::nil(),
                partitions,
                internal: false,
                configs,
            }))
        } else {
            create_topic(broker, name.clone(), partitions, configs).await
        };
        match created {
            Ok(topic) => {
                if !req.validate_only {
                    tracing::info!(topic = %topic.name, partitions = topic.partitions, id = %topic.id, "created topic");
                }
                result.num_partitions = topic.partitions;
                result.replication_factor = 1;
                if version >= 7 {
                    result.topic_id = topic.id;
                }
                if version >= 5 {
                    result.configs = Some(
                        broker
                            .topic_configs(&topic)
                            .into_iter()
                            .map(|(n, v, default)| {
                                CreatableTopicConfigs::default()
                                    .with_name(s(n))
                                    .with_value(Some(s(v)))
                                    .with_config_source(if default {
                                        SOURCE_DEFAULT_CONFIG
                                    } else {
                                        SOURCE_TOPIC_CONFIG
                                    })
                            })
                            .collect(),
                    );
                }
                resp.topics.push(result);
            }
            Err(RegistryError::AlreadyExists(_)) => resp.topics.push(fail(
                result,
                ResponseError::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            )),
            Err(e @ (RegistryError::Collides(..) | RegistryError::InvalidName(_))) => {
                resp.topics.push(fail(
                    result,
                    ResponseError::InvalidTopicException,
                    e.to_string(),
                ))
            }
            Err(e) => {
                tracing::error!(topic = %name, error = %e, "creating topic failed");
                resp.topics.push(fail(
                    result,
                    ResponseError::UnknownServerError,
                    e.to_string(),
                ))
            }
        }
    }
    resp
}

/// DeleteTopics v1–v6 (by name; v6 also by id).
pub async fn delete_topics(
    broker: &Arc<Broker>,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let mut resp = DeleteTopicsResponse::default();
    let targets: Vec<(Option<String>, Uuid)> = if version >= 6 {
        req.topics
            .into_iter()
            .map(|t| (t.name.map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .into_iter()
            .map(|n| (Some(n.0.to_string()), Uuid::nil()))
            .collect()
    };
    for (name, id) in targets {
        let mut r = DeletableTopicResult::default();
        let snap = broker.topics.snapshot();
        let resolved = match (&name, id.is_nil()) {
            (Some(n), _) => snap
                .get(n)
                .cloned()
                .ok_or(ResponseError::UnknownTopicOrPartition),
            (None, false) => snap
                .get_by_id(&id)
                .cloned()
                .ok_or(ResponseError::UnknownTopicId),
            (None, true) => Err(ResponseError::InvalidRequest),
        };
        r.name = name.clone().map(|n| TopicName(s(n)));
        r.topic_id = id;
        let topic = match resolved {
            Ok(t) => t,
            Err(e) => {
                r.error_code = code(e);
                // Kafka answers with the error's own message (`ApiError` of the error alone).
                if version >= 5 {
                    r.error_message = Some(s(e.to_string()));
                }
                resp.responses.push(r);
                continue;
            }
        };
        r.name = Some(TopicName(s(topic.name.clone())));
        if version >= 6 {
            r.topic_id = topic.id;
        }
        if !broker.config.delete_topic_enable {
            r.error_code = code(ResponseError::TopicDeletionDisabled);
        } else if topic.internal {
            r.error_code = code(ResponseError::InvalidRequest);
            r.error_message = Some(s(format!("Cannot delete internal topic {}", topic.name)));
        } else {
            match delete_topic(broker, topic.name.clone()).await {
                Ok(t) => tracing::info!(topic = %t.name, id = %t.id, "deleted topic"),
                Err(RegistryError::Unknown(_)) => {
                    r.error_code = code(ResponseError::UnknownTopicOrPartition)
                }
                Err(e) => {
                    tracing::error!(topic = %topic.name, error = %e, "deleting topic failed");
                    r.error_code = code(ResponseError::UnknownServerError);
                    r.error_message = Some(s(e.to_string()));
                }
            }
        }
        resp.responses.push(r);
    }
    resp
}

/// FindCoordinator v0–v6. One broker owns every partition, so every group's coordinator is us.
/// Transactions do not exist yet: transaction keys get COORDINATOR_NOT_AVAILABLE.
pub fn find_coordinator(
    broker: &Broker,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let key_type = if version >= 1 { req.key_type } else { 0 };
    let answer = |key: &StrBytes| -> (i16, Option<String>) {
        match key_type {
            0 => (0, None),
            1 => (
                code(ResponseError::CoordinatorNotAvailable),
                Some("Transactions are not supported yet".into()),
            ),
            2 if version < 6 => (
                code(ResponseError::InvalidRequest),
                Some("Share keys need FindCoordinator v6".into()),
            ),
            2 => (
                code(ResponseError::CoordinatorNotAvailable),
                Some(format!("Share groups are not supported: {key}")),
            ),
            other => (
                code(ResponseError::InvalidRequest),
                Some(format!("Unknown key type {other}")),
            ),
        }
    };
    let mut resp = FindCoordinatorResponse::default();
    if version < 4 {
        let (err, msg) = answer(&req.key);
        resp.error_code = err;
        if err == 0 {
            resp.node_id = BrokerId(broker.node_id);
            resp.host = s(broker.host.clone());
            resp.port = broker.port;
        } else {
            resp.node_id = BrokerId(-1);
            resp.host = s("");
            resp.port = -1;
            resp.error_message = msg.map(s);
        }
        return resp;
    }
    resp.coordinators = req
        .coordinator_keys
        .iter()
        .map(|key| {
            let (err, msg) = answer(key);
            let c = Coordinator::default()
                .with_key(key.clone())
                .with_error_code(err);
            if err == 0 {
                c.with_node_id(BrokerId(broker.node_id))
                    .with_host(s(broker.host.clone()))
                    .with_port(broker.port)
            } else {
                c.with_node_id(BrokerId(-1))
                    .with_host(s(""))
                    .with_port(-1)
                    .with_error_message(msg.map(s))
            }
        })
        .collect();
    resp
}

/// DescribeConfigs v1–v4 for the broker resource (our config, Kafka names) and topics.
pub fn describe_configs(
    broker: &Broker,
    req: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let mut resp = DescribeConfigsResponse::default();
    for res in req.resources {
        let mut result = DescribeConfigsResult::default()
            .with_resource_type(res.resource_type)
            .with_resource_name(res.resource_name.clone());
        let wanted = |name: &str| {
            res.configuration_keys
                .as_ref()
                .is_none_or(|keys| keys.iter().any(|k| k.as_str() == name))
        };
        let entry = |name: String,
                     value: Option<String>,
                     source: i8,
                     config_type: i8,
                     doc: Option<&str>| {
            let mut e = DescribeConfigsResourceResult::default()
                .with_name(s(name.clone()))
                .with_value(value.clone().map(s))
                .with_config_source(source)
                .with_config_type(config_type);
            if req.include_synonyms {
                e.synonyms.push(
                    DescribeConfigsSynonym::default()
                        .with_name(s(name))
                        .with_value(value.map(s))
                        .with_source(source),
                );
            }
            if version >= 3 && req.include_documentation {
                e.documentation = doc.map(s);
            }
            e
        };
        match res.resource_type {
            RESOURCE_BROKER => {
                let name = res.resource_name.as_str();
                if !name.is_empty() && name != broker.node_id.to_string() {
                    result.error_code = code(ResponseError::InvalidRequest);
                    result.error_message = Some(s(format!(
                        "Unexpected broker id, expected {} but received {name}",
                        broker.node_id
                    )));
                } else {
                    for e in broker
                        .config
                        .entries()
                        .into_iter()
                        .filter(|e| wanted(e.name))
                    {
                        let source = e.config_source_code();
                        result.configs.push(
                            entry(
                                e.name.to_string(),
                                e.value.clone(),
                                source,
                                e.config_type.code(),
                                Some(e.doc),
                            )
                            .with_read_only(true)
                            .with_is_sensitive(e.sensitive),
                        );
                    }
                }
            }
            RESOURCE_TOPIC => match broker.topics.snapshot().get(res.resource_name.as_str()) {
                None => {
                    result.error_code = code(ResponseError::UnknownTopicOrPartition);
                    result.error_message =
                        Some(s(format!("Topic {} does not exist", res.resource_name)));
                }
                Some(t) => {
                    for (name, value, default) in broker
                        .topic_configs(t)
                        .into_iter()
                        .filter(|(n, _, _)| wanted(n))
                    {
                        let source = if default {
                            SOURCE_DEFAULT_CONFIG
                        } else {
                            SOURCE_TOPIC_CONFIG
                        };
                        // Type codes: every topic config above is a STRING (2), LONG (5), INT (3),
                        // BOOLEAN (1), DOUBLE (6) or LIST (7) in Kafka; admin tools only display it.
                        result.configs.push(entry(
                            name.clone(),
                            Some(value),
                            source,
                            topic_config_type(&name),
                            None,
                        ));
                    }
                }
            },
            RESOURCE_BROKER_LOGGER => {
                // No per-logger levels to show; an empty list, as a broker with no overrides.
            }
            other => {
                result.error_code = code(ResponseError::InvalidRequest);
                result.error_message = Some(s(format!("Unsupported resource type {other}")));
            }
        }
        resp.results.push(result);
    }
    resp
}

fn topic_config_type(name: &str) -> i8 {
    match name {
        "cleanup.policy" => 7,
        "compression.type" | "message.timestamp.type" => 2,
        "preallocate" | "unclean.leader.election.enable" => 1,
        "min.cleanable.dirty.ratio" => 6,
        "max.message.bytes"
        | "index.interval.bytes"
        | "min.insync.replicas"
        | "segment.bytes"
        | "segment.index.bytes" => 3,
        _ => 5,
    }
}

/// DescribeCluster v0–v2: this one broker, which is also the controller.
pub fn describe_cluster(
    broker: &Broker,
    req: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    let endpoint_type = if version >= 1 { req.endpoint_type } else { 1 };
    let mut resp = DescribeClusterResponse::default()
        .with_cluster_id(s(broker.cluster_id.clone()))
        .with_controller_id(BrokerId(broker.node_id))
        .with_endpoint_type(endpoint_type)
        .with_cluster_authorized_operations(if req.include_cluster_authorized_operations {
            CLUSTER_AUTHORIZED_OPS
        } else {
            AUTHORIZED_OPS_OMITTED
        });
    if endpoint_type != 1 && endpoint_type != 2 {
        resp.error_code = code(ResponseError::UnsupportedEndpointType);
        resp.error_message = Some(s(format!("Unsupported endpoint type {endpoint_type}")));
        return resp;
    }
    resp.brokers = vec![DescribeClusterBroker::default()
        .with_broker_id(BrokerId(broker.node_id))
        .with_host(s(broker.host.clone()))
        .with_port(broker.port)];
    resp
}

/// The internal offsets topic name, re-exported for callers that check it.
pub fn is_internal(name: &str) -> bool {
    name == CONSUMER_OFFSETS
}

#[cfg(test)]
mod tests {
    use super::validate_topic_config as check;

    #[test]
    fn topic_config_values_are_checked_like_kafka() {
        assert_eq!(check("retention.ms", "3600000"), Ok(()));
        assert_eq!(
            check("retention.ms", "soon"),
            Err(
                "Invalid value soon for configuration retention.ms: Not a number of type LONG"
                    .into()
            )
        );
        assert_eq!(
            check("retention.ms", "-2"),
            Err(
                "Invalid value -2 for configuration retention.ms: Value must be at least -1".into()
            )
        );
        assert_eq!(check("retention.bytes", "-5"), Ok(()));
        assert!(check("segment.bytes", "1000").is_err(), "below 1 MiB");
        assert!(
            check("max.message.bytes", "3000000000").is_err(),
            "not an INT"
        );
        assert_eq!(check("cleanup.policy", "compact,delete"), Ok(()));
        assert!(check("cleanup.policy", "archive").is_err());
        assert!(check("message.timestamp.type", "logappendtime").is_err());
        assert!(check("preallocate", "yes").is_err());
        assert!(check("min.cleanable.dirty.ratio", "1.5").is_err());
        assert_eq!(check("min.cleanable.dirty.ratio", "0.25"), Ok(()));
    }
}
