//! AlterConfigs (the legacy whole-set replacement) and the checks IncrementalAlterConfigs shares:
//! topic configs, validated as Kafka 4.4 validates them, written to the topic registry durably,
//! and read by the data path on its next operation (retention on its next pass, the timestamp
//! type, `max.message.bytes` and `segment.bytes` on the next append) — no restart.
//!
//! Kafka's order (`ConfigAdminManager.preprocess` on the broker, then the controller's
//! `ConfigurationControlManager` and `ControllerConfigurationValidator`): a resource named twice
//! fails both entries, a key named twice or a null value fails its resource (INVALID_REQUEST);
//! then the resulting set is validated (an unknown key or a bad value: INVALID_CONFIG) before the
//! topic's existence is checked, so an unknown topic with a bad key reports INVALID_CONFIG.
//!
//! Group resources hold the KIP-848 group configs (`crate::group_configs`): validated against the
//! broker's `group.consumer.min/max.*` bounds, written durably, applied from each group's next
//! heartbeat; the group need not exist. Broker resources are refused with a message: the broker's
//! configuration is read at start-up (`docs/configuration.md`).

use super::common::s;
use super::create_topics::validate_topic_config;
use super::describe_configs::TOPIC_CONFIG_DEFAULTS;
use crate::broker::Broker;
use crate::topics::RegistryError;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// `ConfigResource.Type` codes.
pub(super) const RESOURCE_TOPIC: i8 = 2;
pub(super) const RESOURCE_BROKER: i8 = 4;
pub(super) const RESOURCE_BROKER_LOGGER: i8 = 8;
pub(super) const RESOURCE_GROUP: i8 = 32;

/// One change to one key (`AlterConfigOp.OpType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Set,
    Delete,
    Append,
    Subtract,
}

impl Op {
    pub(super) fn from_code(code: i8) -> Option<Op> {
        Some(match code {
            0 => Op::Set,
            1 => Op::Delete,
            2 => Op::Append,
            3 => Op::Subtract,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Op::Set => "SET",
            Op::Delete => "DELETE",
            Op::Append => "APPEND",
            Op::Subtract => "SUBTRACT",
        }
    }
}

/// A resource's requested changes, from either request.
pub(super) struct Change {
    pub resource_type: i8,
    pub name: String,
    /// (key, operation, value)
    pub ops: Vec<(String, Option<Op>, Option<String>)>,
    /// AlterConfigs: keys not named are removed (the request is the whole new set).
    pub replace: bool,
}

type Outcome = Result<(), (ResponseError, String)>;

/// Topic configs whose value is a list (APPEND/SUBTRACT apply to them only).
const LIST_CONFIGS: &[&str] = &["cleanup.policy"];

fn invalid(msg: impl Into<String>) -> Outcome {
    Err((ResponseError::InvalidConfig, msg.into()))
}

/// A resource's configs after `change`'s operations, in request order (the set is checked by
/// the caller): an unknown operation is INVALID_REQUEST; APPEND or SUBTRACT on a key not in
/// `lists` is INVALID_CONFIG; `default_of` gives a key's default (the base of APPEND/SUBTRACT)
/// or refuses the key with INVALID_CONFIG.
fn apply_ops(
    change: &Change,
    current: &BTreeMap<String, String>,
    lists: &[&str],
    default_of: impl Fn(&str) -> Result<&'static str, String>,
) -> Result<BTreeMap<String, String>, (ResponseError, String)> {
    let mut out = if change.replace {
        BTreeMap::new()
    } else {
        current.clone()
    };
    for (key, op, value) in &change.ops {
        let op = op.ok_or_else(|| {
            (
                ResponseError::InvalidRequest,
                format!("Unknown operation for config {key}"),
            )
        })?;
        if matches!(op, Op::Append | Op::Subtract) && !lists.contains(&key.as_str()) {
            return Err((
                ResponseError::InvalidConfig,
                format!(
                    "Can't {} to key {key} because its type is not LIST.",
                    op.name()
                ),
            ));
        }
        let default = default_of(key).map_err(|m| (ResponseError::InvalidConfig, m))?;
        match op {
            Op::Set => {
                out.insert(key.clone(), value.clone().unwrap_or_default());
            }
            Op::Delete => {
                out.remove(key);
            }
            Op::Append | Op::Subtract => {
                let base = out.get(key).cloned().unwrap_or_else(|| default.to_string());
                let mut items: Vec<String> = base
                    .split(',')
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty())
                    .collect();
                for v in value.as_deref().unwrap_or("").split(',').map(str::trim) {
                    if v.is_empty() {
                        continue;
                    }
                    if op == Op::Append && !items.iter().any(|x| x == v) {
                        items.push(v.to_string());
                    } else if op == Op::Subtract {
                        items.retain(|x| x != v);
                    }
                }
                out.insert(key.clone(), items.join(","));
            }
        }
    }
    Ok(out)
}

/// The topic's configs after `change`, checked, or why not.
fn resulting_topic_configs(
    change: &Change,
    current: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, (ResponseError, String)> {
    let out = apply_ops(change, current, LIST_CONFIGS, |key| {
        TOPIC_CONFIG_DEFAULTS
            .iter()
            .find(|(n, _)| *n == key)
            .map(|(_, d)| *d)
            .ok_or_else(|| format!("Unknown topic config name: {key}"))
    })?;
    for (key, value) in &out {
        if let Err(msg) = validate_topic_config(key, value) {
            return Err((ResponseError::InvalidConfig, msg));
        }
    }
    Ok(out)
}

/// Check and apply every change; one outcome per change, in request order.
///
/// With an authorizer: AlterConfigs on the cluster (broker, broker-logger resources), the topic
/// or the group, else CLUSTER_ / TOPIC_ / GROUP_AUTHORIZATION_FAILED with no message
/// (`KafkaApis.configsAuthorizationApiError`), checked after the duplicate check. An outcome's
/// empty message stands for none.
pub(super) async fn apply(
    broker: &Arc<Broker>,
    caller: &crate::runtime::shard::Caller,
    changes: Vec<Change>,
    validate_only: bool,
) -> Vec<Outcome> {
    let mut named: HashMap<(i8, String), usize> = HashMap::new();
    for c in &changes {
        *named.entry((c.resource_type, c.name.clone())).or_default() += 1;
    }
    let mut out = Vec::with_capacity(changes.len());
    for c in &changes {
        let twice = named[&(c.resource_type, c.name.clone())] > 1;
        if !twice {
            if let Some(e) = super::describe_configs::config_refusal(
                broker,
                caller,
                super::auth::Op::AlterConfigs,
                c.resource_type,
                &c.name,
            ) {
                out.push(Err((e, String::new())));
                continue;
            }
        }
        out.push(
            apply_one(
                broker,
                c,
                named[&(c.resource_type, c.name.clone())] > 1,
                validate_only,
            )
            .await,
        );
    }
    out
}

async fn apply_one(broker: &Arc<Broker>, c: &Change, twice: bool, validate_only: bool) -> Outcome {
    if twice {
        return Err((
            ResponseError::InvalidRequest,
            "Each resource must appear at most once.".into(),
        ));
    }
    let mut keys = std::collections::HashSet::new();
    if c.ops.iter().any(|(k, _, _)| !keys.insert(k.as_str())) {
        return Err((
            ResponseError::InvalidRequest,
            "Error due to duplicate config keys".into(),
        ));
    }
    let nulls: Vec<&str> = c
        .ops
        .iter()
        .filter(|(_, op, v)| v.is_none() && *op != Some(Op::Delete))
        .map(|(k, _, _)| k.as_str())
        .collect();
    if !nulls.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            format!("Null value not supported for : {}", nulls.join(", ")),
        ));
    }
    match c.resource_type {
        RESOURCE_TOPIC => {}
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => {
            return Err((
                ResponseError::InvalidRequest,
                "Ringleader reads its broker configuration at start-up; dynamic broker configs are not supported (change server.properties or --set and restart).".into(),
            ))
        }
        RESOURCE_GROUP => return apply_group(broker, c, validate_only).await,
        other => {
            return Err((ResponseError::InvalidRequest, format!("Unknown resource type {other}")))
        }
    }
    if c.name.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "Default topic resources are not allowed.".into(),
        ));
    }
    let snap = broker.topics.snapshot();
    let topic = snap.get(c.name.as_str());
    let empty = BTreeMap::new();
    let configs = resulting_topic_configs(c, topic.map_or(&empty, |t| &t.configs))?;
    let Some(topic) = topic else {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            format!("The topic '{}' does not exist.", c.name),
        ));
    };
    super::create_topics::check_min_insync(broker, topic.replication_factor, &configs)
        .map_err(|msg| (ResponseError::InvalidConfig, msg))?;
    if topic.internal {
        // Kafka would accept it; the coordinator's log settings come from offsets.topic.*.
        return invalid(format!(
            "The configs of {} come from the broker's offsets.topic.* settings.",
            c.name
        ));
    }
    if validate_only || configs == topic.configs {
        return Ok(());
    }
    let written = if broker.topics.is_replicated() {
        broker.topics.set_configs_replicated(&c.name, configs).await
    } else {
        let (b, name) = (broker.clone(), c.name.clone());
        glommio::executor()
            .spawn_blocking(move || b.topics.set_configs(&name, configs))
            .await
    };
    match written {
        Ok(()) => Ok(()),
        Err(RegistryError::Unknown(name)) => Err((
            ResponseError::UnknownTopicOrPartition,
            format!("The topic '{name}' does not exist."),
        )),
        Err(e @ RegistryError::NotAvailable(_)) => {
            Err((ResponseError::RequestTimedOut, e.to_string()))
        }
        Err(e) => {
            tracing::error!(topic = %c.name, error = %e, "altering topic configs failed");
            Err((ResponseError::UnknownServerError, e.to_string()))
        }
    }
}

/// A GROUP resource: the resulting set is validated as a whole (`GroupConfig.validate`), then
/// written; the group's coordinator reads it with the group's next request.
async fn apply_group(broker: &Arc<Broker>, c: &Change, validate_only: bool) -> Outcome {
    if c.name.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "A group resource needs a group id.".into(),
        ));
    }
    let snap = broker.group_configs.snapshot();
    let now = snap.get(&c.name).cloned().unwrap_or_default();
    // No group key is a LIST; the set is checked as a whole below, names included.
    let configs = apply_ops(c, &crate::group_configs::to_strings(&now), &[], |_| Ok(""))?;
    let next =
        crate::group_configs::validate(&configs, &crate::group_configs::Bounds::of(&broker.config))
            .map_err(|m| (ResponseError::InvalidConfig, m))?;
    if validate_only || next == now {
        return Ok(());
    }
    let (b, group) = (broker.clone(), c.name.clone());
    let written = glommio::executor()
        .spawn_blocking(move || b.group_configs.set(&group, next))
        .await;
    written.map_err(|e| {
        tracing::error!(group = %c.name, error = %e, "altering group configs failed");
        (ResponseError::UnknownServerError, e.to_string())
    })
}

/// AlterConfigs v0–v2: each resource's configs become exactly the ones given.
pub(super) async fn handle(
    broker: &Arc<Broker>,
    caller: &crate::runtime::shard::Caller,
    req: AlterConfigsRequest,
    _version: i16,
) -> AlterConfigsResponse {
    let changes: Vec<Change> = req
        .resources
        .iter()
        .map(|r| Change {
            resource_type: r.resource_type,
            name: r.resource_name.to_string(),
            ops: r
                .configs
                .iter()
                .map(|c| {
                    (
                        c.name.to_string(),
                        Some(Op::Set),
                        c.value.as_ref().map(|v| v.to_string()),
                    )
                })
                .collect(),
            replace: true,
        })
        .collect();
    let outcomes = apply(broker, caller, changes, req.validate_only).await;
    let mut resp = AlterConfigsResponse::default();
    for (r, o) in req.resources.iter().zip(outcomes) {
        let mut x = alter_configs_response::AlterConfigsResourceResponse::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone())
            .with_error_message(None);
        if let Err((e, msg)) = o {
            x.error_code = e.code();
            x.error_message = (!msg.is_empty()).then(|| s(msg));
        }
        resp.responses.push(x);
    }
    resp
}
