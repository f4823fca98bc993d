//! Metadata: brokers, topics and partitions (a single node leads all; a node of a cluster names
//! where the metadata log placed each one, `Broker::partition_view`), creating unknown topics
//! when `auto.create.topics.enable` and the request allow it.

use super::auth::{self, Op, Rt};
use super::common::{
    code, s, AUTHORIZED_OPS_OMITTED, CLUSTER_AUTHORIZED_OPS, TOPIC_AUTHORIZED_OPS,
};
use super::create_topics::create_topic;
use super::describe_configs::TOPIC_CONFIG_DEFAULTS;
use crate::broker::Broker;
use crate::topics::{self, RegistryError, Topic};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

impl Broker {
    /// The effective configs of a topic: its overrides, then Kafka's defaults. The internal
    /// offsets topic is compacted, as Kafka creates it (`GroupCoordinatorService.groupMetadataTopicConfigs`).
    pub(crate) fn topic_configs(&self, topic: &Topic) -> Vec<(String, String, bool)> {
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

    pub(crate) fn metadata_topic(&self, topic: &Topic, version: i16) -> MetadataResponseTopic {
        let ids = |v: Vec<i32>| v.into_iter().map(BrokerId).collect::<Vec<_>>();
        let partitions = (0..topic.partitions)
            .map(|p| {
                let view = self.partition_view(topic, p);
                MetadataResponsePartition::default()
                    .with_error_code(view.error)
                    .with_partition_index(p)
                    .with_leader_id(BrokerId(view.leader))
                    .with_leader_epoch(0)
                    .with_replica_nodes(ids(view.replicas))
                    .with_isr_nodes(ids(view.isr))
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

    pub(crate) fn metadata_error(
        name: Option<&str>,
        id: Uuid,
        err: ResponseError,
    ) -> MetadataResponseTopic {
        MetadataResponseTopic::default()
            .with_error_code(code(err))
            .with_name(name.map(|n| TopicName(s(n))))
            .with_topic_id(id)
            .with_topic_authorized_operations(AUTHORIZED_OPS_OMITTED)
    }

    /// This broker, at the endpoint `listener` advertises (the listener the request came in on).
    pub(crate) fn broker_list(
        &self,
        listener: &crate::listeners::Listener,
    ) -> Vec<MetadataResponseBroker> {
        self.nodes_on(listener)
            .into_iter()
            .map(|(id, host, port)| {
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(id))
                    .with_host(s(host))
                    .with_port(port)
            })
            .collect()
    }

    /// Every node a client of `listener` can reach, by id, as (node id, host, port): this node
    /// alone, or on a cluster every node whose endpoint on a listener of that name is known
    /// (peers tell theirs in their node-to-node hello, `runtime/peers.rs`). A node that is
    /// down stays listed, as its last endpoint: clients only connect to it if it leads
    /// something or coordinates a group, which a dead node does not once another leads. A node
    /// removed from the cluster (RemoveRaftVoter) is not; this node always is, removed or not
    /// (a client talking to it must find it in the list).
    pub(crate) fn nodes_on(
        &self,
        listener: &crate::listeners::Listener,
    ) -> Vec<(i32, String, i32)> {
        let own = (
            self.node_id,
            listener.advertised_host.clone(),
            listener.advertised_port,
        );
        let Some(cluster) = &self.cluster else {
            return vec![own];
        };
        let mut out: Vec<(i32, String, i32)> = cluster
            .nodes_on(&listener.name)
            .into_iter()
            // A node removed from the cluster is not listed (Kafka lists registered brokers).
            .filter(|(id, _)| *id as i32 != self.node_id && cluster.is_member(*id))
            .map(|(id, e)| (id as i32, e.host, e.port))
            .collect();
        out.push(own);
        out.sort_by_key(|n| n.0);
        out
    }
}

/// Metadata v0–v13. Unknown topics are created when the request allows it (v4+ flag; implied
/// before v4) and `auto.create.topics.enable` is set, and returned ready to use.
///
/// With an authorizer, as `KafkaApis.handleTopicMetadataRequest`
/// (core/src/main/scala/kafka/server/KafkaApis.scala): Describe on each topic (a named topic
/// without it is TOPIC_AUTHORIZATION_FAILED, unresolved; an all-topics request leaves it out);
/// auto-creation needs Create on the cluster or on the topic; the authorized operations are the
/// caller's (the cluster's only with Describe on it, else 0).
pub(super) async fn handle(
    broker: &Arc<Broker>,
    caller: &crate::runtime::shard::Caller,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let topic_ops = version >= 8 && req.include_topic_authorized_operations;
    let cluster_ops = (8..=10).contains(&version) && req.include_cluster_authorized_operations;
    let mut resp = metadata_topics(broker, Some(caller), req, version).await;
    resp.brokers = broker.broker_list(&caller.listener);
    let on = auth::on(broker);
    if topic_ops {
        let failed = ResponseError::TopicAuthorizationFailed.code();
        for t in &mut resp.topics {
            if !on {
                t.topic_authorized_operations = TOPIC_AUTHORIZED_OPS;
                continue;
            }
            // Kafka fills it for the topics it described only: not for unknown topic ids nor
            // for the ones refused.
            match &t.name {
                Some(name) if t.error_code != failed => {
                    t.topic_authorized_operations =
                        auth::operations(broker, caller, Rt::Topic, name, TOPIC_AUTHORIZED_OPS)
                }
                _ => {}
            }
        }
    }
    if cluster_ops {
        resp.cluster_authorized_operations = if auth::cluster(broker, caller, Op::Describe) {
            auth::operations(
                broker,
                caller,
                Rt::Cluster,
                security::acl::CLUSTER_NAME,
                CLUSTER_AUTHORIZED_OPS,
            )
        } else {
            0
        };
    }
    resp
}

/// The topics part of a Metadata response. `caller` is whose Describe and Create are checked
/// (`None`: nobody's, as without an authorizer).
pub(crate) async fn metadata_topics(
    broker: &Arc<Broker>,
    caller: Option<&crate::runtime::shard::Caller>,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let may =
        |op: Op, name: &str| caller.is_none_or(|c| auth::allowed(broker, c, op, Rt::Topic, name));
    let cluster_create = caller.is_none_or(|c| auth::cluster(broker, c, Op::Create));
    let mut resp = MetadataResponse::default()
        .with_brokers(broker.broker_list(&broker.listeners[0]))
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
            .filter(|t| may(Op::Describe, &t.name))
            .map(|t| broker.metadata_topic(t, version))
            .collect();
        return resp;
    };
    let allow_create =
        (version < 4 || req.allow_auto_topic_creation) && broker.config.auto_create_topics_enable;
    let mut seen = std::collections::HashSet::new();
    // Kafka answers the described topics, then those refused Create, then those refused
    // Describe (unknown topic ids it puts first; here they stay in request order, as always).
    let mut refused_create = Vec::new();
    let mut refused_describe = Vec::new();
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
                if !may(Op::Describe, &name) {
                    // Not even whether it exists is disclosed.
                    refused_describe.push(Broker::metadata_error(
                        Some(&name),
                        Uuid::nil(),
                        ResponseError::TopicAuthorizationFailed,
                    ));
                    continue;
                }
                if let Some(t) = snap.get(&name) {
                    resp.topics.push(broker.metadata_topic(t, version));
                    continue;
                }
                if allow_create && !cluster_create && !may(Op::Create, &name) {
                    let mut e = Broker::metadata_error(
                        Some(&name),
                        Uuid::nil(),
                        ResponseError::TopicAuthorizationFailed,
                    );
                    e.is_internal = super::common::is_internal(&name);
                    refused_create.push(e);
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
                // 1, or on a cluster every voter; more copies than there are nodes, or a
                // number of them between, cannot be held: Kafka's auto-create fails the same
                // way (INVALID_REPLICATION_FACTOR).
                let Ok(rf) = super::create_topics::replication_factor(
                    broker,
                    broker.config.default_replication_factor,
                ) else {
                    resp.topics.push(Broker::metadata_error(
                        Some(&name),
                        Uuid::nil(),
                        ResponseError::InvalidReplicationFactor,
                    ));
                    continue;
                };
                match create_topic(broker, name.clone(), partitions, rf, BTreeMap::new(), None)
                    .await
                {
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
                    Err(RegistryError::InvalidReplicationFactor(_)) => {
                        resp.topics.push(Broker::metadata_error(
                            Some(&name),
                            Uuid::nil(),
                            ResponseError::InvalidReplicationFactor,
                        ))
                    }
                    Err(RegistryError::Collides(..) | RegistryError::InvalidName(_)) => {
                        resp.topics.push(Broker::metadata_error(
                            Some(&name),
                            Uuid::nil(),
                            ResponseError::InvalidTopicException,
                        ))
                    }
                    // A cluster's metadata log has no leader yet, or did not answer in time:
                    // clients retry LEADER_NOT_AVAILABLE with their next metadata request.
                    Err(RegistryError::NotAvailable(why)) => {
                        tracing::info!(topic = %name, %why, "auto-creating topic: not yet");
                        resp.topics.push(Broker::metadata_error(
                            Some(&name),
                            Uuid::nil(),
                            ResponseError::LeaderNotAvailable,
                        ));
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
                // Topic ids are not secret: refused with the id, without the name.
                Some(t) if version >= 12 && !may(Op::Describe, &t.name) => refused_describe.push(
                    Broker::metadata_error(None, t.id, ResponseError::TopicAuthorizationFailed),
                ),
                Some(t) if version >= 12 => resp.topics.push(broker.metadata_topic(t, version)),
                _ => resp.topics.push(Broker::metadata_error(
                    None,
                    rt.topic_id,
                    ResponseError::UnknownTopicId,
                )),
            },
        }
    }
    resp.topics.append(&mut refused_create);
    resp.topics.append(&mut refused_describe);
    resp
}
