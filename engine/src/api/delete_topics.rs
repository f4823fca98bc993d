//! DeleteTopics: remove the topics from the registry, close their partitions on every shard,
//! and free their directories.

use super::common::{code, s};
use crate::broker::Broker;
use crate::data::DataOp;
use crate::runtime::shard::Shard;
use crate::topics::{RegistryError, Topic};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::rc::Rc;
use std::sync::Arc;
use uuid::Uuid;

async fn delete_topic(broker: &Arc<Broker>, name: String) -> Result<Arc<Topic>, RegistryError> {
    if broker.topics.is_replicated() {
        return broker.topics.delete_replicated(&name).await;
    }
    let b = broker.clone();
    glommio::executor()
        .spawn_blocking(move || b.topics.delete(&name))
        .await
}

/// DeleteTopics v1–v6 (by name; v6 also by id).
///
/// With an authorizer (Kafka 4.x `ControllerApis.deleteTopics`): Delete on the cluster allows
/// every topic; otherwise a topic named without Describe, or without Delete, is
/// TOPIC_AUTHORIZATION_FAILED before its existence is looked at, and a topic id resolving to a
/// topic the caller may not Delete is refused too, its name withheld unless it may Describe it.
async fn delete(
    broker: &Arc<Broker>,
    caller: &crate::runtime::shard::Caller,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    use super::auth::{self, Op, Rt};
    let mut resp = DeleteTopicsResponse::default();
    let cluster_delete = auth::cluster(broker, caller, Op::Delete);
    let may =
        |op: Op, name: &str| cluster_delete || auth::allowed(broker, caller, op, Rt::Topic, name);
    let refuse = |mut r: DeletableTopicResult| {
        r.error_code = code(ResponseError::TopicAuthorizationFailed);
        if version >= 5 {
            r.error_message = Some(s(ResponseError::TopicAuthorizationFailed.to_string()));
        }
        r
    };
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
        match (&name, &resolved) {
            (Some(n), _) if !may(Op::Describe, n) || !may(Op::Delete, n) => {
                resp.responses.push(refuse(r));
                continue;
            }
            (None, Ok(t)) if !may(Op::Delete, &t.name) => {
                if may(Op::Describe, &t.name) {
                    r.name = Some(TopicName(s(t.name.clone())));
                }
                resp.responses.push(refuse(r));
                continue;
            }
            _ => {}
        }
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
                Err(e @ RegistryError::NotAvailable(_)) => {
                    r.error_code = code(ResponseError::RequestTimedOut);
                    r.error_message = Some(s(e.to_string()));
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

/// DeleteTopics: remove the topics from the registry, close their partitions on every shard,
/// then free their directories.
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &crate::runtime::shard::Caller,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let b = &shard.broker;
    let resp = delete(b, caller, req, version).await;
    for s in 0..shard.router.shards() {
        // A shard that cannot answer (stalled, stopping) keeps the topic's open logs until its
        // next retention pass closes them; the registry no longer lists the topic either way.
        let _ = shard.router.data(s, DataOp::Forget).await;
    }
    // On a cluster the metadata log removes the directories on every node as it applies the
    // deletion (`runtime::metadata_log`).
    if let (Some(dir), None) = (&b.data_dir, &b.cluster) {
        crate::data::sweep_deleted_topics(dir, b);
    }
    resp
}
