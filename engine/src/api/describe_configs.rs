//! DescribeConfigs: topic configs (overrides, then Kafka's defaults) and the broker's own
//! configuration, with sources and synonyms as Kafka reports them.

use super::common::{code, s};
use crate::broker::Broker;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

/// Topic-level configs a topic may carry, with Kafka's defaults (`TopicConfig` /
/// `LogConfig`). CreateTopics rejects any other name with INVALID_CONFIG.
pub(crate) const TOPIC_CONFIG_DEFAULTS: &[(&str, &str)] = &[
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

/// DescribeConfigs ConfigSource codes.
pub(crate) const SOURCE_TOPIC_CONFIG: i8 = 1;

pub(crate) const SOURCE_DEFAULT_CONFIG: i8 = 5;

/// DescribeConfigs resource types (`ConfigResource.Type`).
pub(crate) const RESOURCE_TOPIC: i8 = 2;

pub(crate) const RESOURCE_BROKER: i8 = 4;

pub(crate) const RESOURCE_BROKER_LOGGER: i8 = 8;

pub(crate) const RESOURCE_GROUP: i8 = 32;

/// `ConfigSource.GROUP_CONFIG`: a per-group override (Kafka prints DYNAMIC_GROUP_CONFIG).
pub(crate) const SOURCE_GROUP_CONFIG: i8 = 8;

/// DescribeConfigs v1–v4 for the broker resource (our config, Kafka names) and topics.
///
/// With an authorizer (`ConfigHelper.handleDescribeConfigsRequest`,
/// core/src/main/scala/kafka/server/ConfigHelper.scala): DescribeConfigs on the cluster (broker,
/// broker-logger resources), the topic or the group; the refused resources answer
/// CLUSTER_ / TOPIC_ / GROUP_AUTHORIZATION_FAILED with no configs, after the others.
pub(super) fn handle(
    broker: &Broker,
    caller: &crate::runtime::shard::Caller,
    mut req: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let mut resp = DescribeConfigsResponse::default();
    let mut refused = Vec::new();
    if super::auth::on(broker) {
        let (ok, no): (Vec<_>, Vec<_>) =
            std::mem::take(&mut req.resources)
                .into_iter()
                .partition(|r| {
                    config_refusal(
                        broker,
                        caller,
                        super::auth::Op::DescribeConfigs,
                        r.resource_type,
                        &r.resource_name,
                    )
                    .is_none()
                });
        req.resources = ok;
        for r in no {
            let e = config_refusal(
                broker,
                caller,
                super::auth::Op::DescribeConfigs,
                r.resource_type,
                &r.resource_name,
            )
            .unwrap_or(ResponseError::UnknownServerError);
            refused.push(
                DescribeConfigsResult::default()
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name)
                    .with_error_code(code(e))
                    .with_error_message(Some(s(e.to_string()))),
            );
        }
    }
    describe(broker, req, version, &mut resp);
    resp.results.extend(refused);
    resp
}

/// Why `op` (DescribeConfigs, AlterConfigs) on a config resource is refused, if it is: the
/// resource each config resource type is authorized on, and the error for it
/// (`ConfigHelper.handleDescribeConfigsRequest`, `KafkaApis.configsAuthorizationApiError`).
/// Unknown resource types are left to the handler's own answer.
pub(crate) fn config_refusal(
    broker: &Broker,
    caller: &crate::runtime::shard::Caller,
    op: super::auth::Op,
    resource_type: i8,
    name: &str,
) -> Option<ResponseError> {
    use super::auth::{self, Rt};
    let (allowed, error) = match resource_type {
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => (
            auth::cluster(broker, caller, op),
            ResponseError::ClusterAuthorizationFailed,
        ),
        RESOURCE_TOPIC => (
            auth::allowed(broker, caller, op, Rt::Topic, name),
            ResponseError::TopicAuthorizationFailed,
        ),
        RESOURCE_GROUP => (
            auth::allowed(broker, caller, op, Rt::Group, name),
            ResponseError::GroupAuthorizationFailed,
        ),
        _ => return None,
    };
    (!allowed).then_some(error)
}

fn describe(
    broker: &Broker,
    req: DescribeConfigsRequest,
    version: i16,
    resp: &mut DescribeConfigsResponse,
) {
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
            RESOURCE_GROUP => {
                // Every consumer-group key: the group's override (GROUP_CONFIG) with the broker
                // setting it overrides as a synonym, else the broker's value (DEFAULT_CONFIG),
                // as Kafka 4.4 describes a group (`kafka-configs --entity-type groups`).
                let bounds = crate::group_configs::Bounds::of(&broker.config);
                let over = broker
                    .group_configs
                    .snapshot()
                    .get(res.resource_name.as_str())
                    .map(crate::group_configs::to_strings)
                    .unwrap_or_default();
                for key in crate::group_configs::KEYS.into_iter().filter(|k| wanted(k)) {
                    let (broker_key, default) = bounds.default_of(key);
                    let default_synonym = DescribeConfigsSynonym::default()
                        .with_name(s(broker_key.to_string()))
                        .with_value(Some(s(default.to_string())))
                        .with_source(SOURCE_DEFAULT_CONFIG);
                    let (value, source) = match over.get(key) {
                        Some(v) => (v.clone(), SOURCE_GROUP_CONFIG),
                        None => (default.to_string(), SOURCE_DEFAULT_CONFIG),
                    };
                    let mut e = DescribeConfigsResourceResult::default()
                        .with_name(s(key.to_string()))
                        .with_value(Some(s(value.clone())))
                        .with_config_source(source)
                        .with_config_type(3);
                    if req.include_synonyms {
                        if source == SOURCE_GROUP_CONFIG {
                            e.synonyms.push(
                                DescribeConfigsSynonym::default()
                                    .with_name(s(key.to_string()))
                                    .with_value(Some(s(value)))
                                    .with_source(SOURCE_GROUP_CONFIG),
                            );
                        }
                        e.synonyms.push(default_synonym);
                    }
                    result.configs.push(e);
                }
            }
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
}

pub(crate) fn topic_config_type(name: &str) -> i8 {
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
