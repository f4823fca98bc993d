//! CreateTopics, and the topic auto-creation Metadata triggers: validate like Kafka
//! (partitions, replication factor, topic configs), then write the topic registry on a blocking
//! thread.

use super::auth::{self, Op, Rt};
use super::common::{code, node_ids, s};
use super::describe_configs::{SOURCE_DEFAULT_CONFIG, SOURCE_TOPIC_CONFIG, TOPIC_CONFIG_DEFAULTS};
use crate::broker::Broker;
use crate::topics::{self, RegistryError, Topic};
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

/// Check a topic config value as Kafka's `LogConfig` ConfigDef does: its type, then its
/// validator, with Kafka's message (`ConfigException`: "Invalid value V for configuration K: ...").
pub(crate) fn validate_topic_config(key: &str, value: &str) -> Result<(), String> {
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

/// The replication factor a new topic asked for `rf` (-1 resolved already) gets, or why it
/// cannot have it: 1 anywhere, or on a cluster the number of voters (every voter a replica);
/// above the nodes there are, Kafka's message; 1 < rf < voters is not built (see
/// `replication::metadata::MetadataState::check_replication_factor`, which the metadata log
/// applies too).
pub(super) fn replication_factor(broker: &Broker, rf: i32) -> Result<i16, String> {
    let nodes = broker.cluster.as_ref().map_or(1, |c| c.members().len());
    replication::metadata::MetadataState::check_replication_factor(rf, nodes)?;
    Ok(i16::try_from(rf).expect("at most the number of voters"))
}

/// On a node of a cluster, a topic's `min.insync.replicas` asks for no more copies before an
/// acknowledgement than are waited for: a majority of the replicas of a topic replicated by
/// Raft, the one replica of a factor-1 topic. Kafka takes a larger value and then fails acks=all
/// produces with NOT_ENOUGH_REPLICAS; here the Raft group waits for a majority whatever the
/// value says, so a larger one is refused rather than ignored. A single node keeps Kafka's
/// acceptance (its one copy is all there is, as before).
pub(crate) fn check_min_insync(
    broker: &Broker,
    replication_factor: i16,
    configs: &BTreeMap<String, String>,
) -> Result<(), String> {
    let Some(v) = configs.get("min.insync.replicas") else {
        return Ok(());
    };
    if broker.cluster.is_none() {
        return Ok(());
    }
    let waited = if replication_factor > 1 {
        replication_factor as i64 / 2 + 1
    } else {
        1
    };
    match v.trim().parse::<i64>() {
        Ok(n) if n > waited => Err(format!(
            "Invalid value {v} for configuration min.insync.replicas: a record of this topic \
             (replication factor {replication_factor}) is acknowledged on a Ringleader cluster \
             once {waited} replica(s) hold it; at most {waited}"
        )),
        _ => Ok(()),
    }
}

/// What Kafka's `ReplicationControlManager.createTopic` refuses in a manual assignment before
/// looking at the nodes: a partition assigned twice, partitions that are not `0..n`, a
/// replica id that cannot be a node (not positive), an empty list. The rest (registered,
/// none twice, one size) is `MetadataState::check_assignment`, where the log applies it.
fn manual_shape(
    assignments: &[create_topics_request::CreatableReplicaAssignment],
) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    for a in assignments {
        if !seen.insert(a.partition_index) {
            return Some(format!(
                "Found multiple manual partition assignments for partition {}",
                a.partition_index
            ));
        }
        if a.broker_ids.is_empty() {
            return Some("The manual partition assignment includes an empty replica list.".into());
        }
        if let Err(m) = node_ids(&a.broker_ids) {
            return Some(m);
        }
    }
    if seen.iter().copied().ne(0..seen.len() as i32) {
        return Some("partitions should be a consecutive 0-based integer sequence".into());
    }
    None
}

/// Registry writes fsync; keep them off the reactor. `replication_factor` has passed
/// [`replication_factor`] (a single node's is 1).
pub(super) async fn create_topic(
    broker: &Arc<Broker>,
    name: String,
    partitions: i32,
    replication_factor: i16,
    configs: BTreeMap<String, String>,
    assignment: Option<Vec<Vec<u64>>>,
) -> Result<Arc<Topic>, RegistryError> {
    if broker.topics.is_replicated() {
        return broker
            .topics
            .create_replicated(&name, partitions, replication_factor, configs, assignment)
            .await;
    }
    if replication_factor != 1 {
        // A node of a cluster whose metadata log is not open yet: it cannot place replicas on
        // other nodes (and a client retries REQUEST_TIMED_OUT).
        return Err(RegistryError::NotAvailable(format!(
            "replication factor {replication_factor} needs the cluster's metadata log"
        )));
    }
    let b = broker.clone();
    glommio::executor()
        .spawn_blocking(move || b.topics.create(&name, partitions, configs))
        .await
}

/// CreateTopics v2–v7: replication factor 1, or on a cluster the number of voters.
///
/// With an authorizer (Kafka 4.x `ControllerApis.createTopics`): Create on the cluster, else on
/// each topic, or TOPIC_AUTHORIZATION_FAILED "Authorization failed."; a created topic's configs
/// (and partition count, replication factor) are returned only with DescribeConfigs on it, else
/// `topic_config_error_code` is TOPIC_AUTHORIZATION_FAILED
/// (`ReplicationControlManager.createTopic`, `authorizedToReturnConfigs`).
pub(super) async fn handle(
    broker: &Arc<Broker>,
    caller: &crate::runtime::shard::Caller,
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut resp = CreateTopicsResponse::default();
    // Kafka's bound on the partitions one request may create (`ReplicationControlManager.
    // validateTotalNumberOfPartitions`): over it, every topic fails alike. It also keeps one
    // request from making the registry (and every metadata hash) arbitrarily large.
    let total: i64 = req
        .topics
        .iter()
        .map(|t| match (t.assignments.is_empty(), t.num_partitions) {
            (false, _) => t.assignments.len() as i64,
            (true, -1) => broker.config.num_partitions as i64,
            (true, n) => n.max(0) as i64,
        })
        .sum();
    if total > super::create_partitions::MAX_PARTITIONS_PER_REQUEST {
        resp.topics = req
            .topics
            .iter()
            .map(|t| {
                CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_error_code(ResponseError::PolicyViolation.code())
                    .with_error_message(Some(s(
                        "Excessively large number of partitions per request.",
                    )))
            })
            .collect();
        return resp;
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for t in &req.topics {
        *counts.entry(t.name.0.to_string()).or_default() += 1;
    }
    let mut reported_dup = std::collections::HashSet::new();
    let cluster_create = auth::cluster(broker, caller, Op::Create);
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
        if !cluster_create && !auth::allowed(broker, caller, Op::Create, Rt::Topic, &name) {
            resp.topics.push(fail(
                result,
                ResponseError::TopicAuthorizationFailed,
                "Authorization failed.".into(),
            ));
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
            if broker.cluster.is_some() {
                // Checked in full where the metadata log applies it (the nodes that exist are
                // its voters); here only what the wire shape alone tells.
                if let Some(msg) = manual_shape(&t.assignments) {
                    resp.topics
                        .push(fail(result, ResponseError::InvalidReplicaAssignment, msg));
                    continue;
                }
            } else if let Some((_, a)) = bad {
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
        // Manual assignments: as many replicas as the first partition's (the metadata log checks
        // the others have as many); on a single node they name it alone (checked above).
        let assignment: Option<Vec<Vec<u64>>> =
            (broker.cluster.is_some() && !t.assignments.is_empty()).then(|| {
                let mut a: Vec<_> = t.assignments.iter().collect();
                a.sort_by_key(|a| a.partition_index);
                a.iter()
                    .map(|a| node_ids(&a.broker_ids).expect("checked: positive ids"))
                    .collect()
            });
        let rf = if let Some(a) = &assignment {
            a[0].len() as i16
        } else if t.assignments.is_empty() {
            match replication_factor(broker, rf) {
                Ok(rf) => rf,
                Err(msg) => {
                    resp.topics
                        .push(fail(result, ResponseError::InvalidReplicationFactor, msg));
                    continue;
                }
            }
        } else {
            1
        };
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
        let config_error = config_error.or_else(|| check_min_insync(broker, rf, &configs).err());
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
                replication_factor: rf,
            }))
        } else {
            create_topic(broker, name.clone(), partitions, rf, configs, assignment).await
        };
        match created {
            Ok(topic) => {
                if !req.validate_only {
                    tracing::info!(topic = %topic.name, partitions = topic.partitions, replication_factor = topic.replication_factor, id = %topic.id, "created topic");
                }
                if version >= 7 {
                    result.topic_id = topic.id;
                }
                if !auth::allowed(broker, caller, Op::DescribeConfigs, Rt::Topic, &name) {
                    result.topic_config_error_code = ResponseError::TopicAuthorizationFailed.code();
                    resp.topics.push(result);
                    continue;
                }
                result.num_partitions = topic.partitions;
                result.replication_factor = topic.replication_factor;
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
            // The metadata log's own check as it applies the entry: the one made above, against
            // the same voters, so not expected; answered alike all the same.
            Err(RegistryError::InvalidReplicationFactor(msg)) => {
                resp.topics
                    .push(fail(result, ResponseError::InvalidReplicationFactor, msg))
            }
            // A manual assignment, checked against the cluster's nodes as the log applies it.
            Err(RegistryError::InvalidAssignment(msg)) => {
                resp.topics
                    .push(fail(result, ResponseError::InvalidReplicaAssignment, msg))
            }
            Err(e @ RegistryError::NotAvailable(_)) => {
                resp.topics
                    .push(fail(result, ResponseError::RequestTimedOut, e.to_string()))
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
