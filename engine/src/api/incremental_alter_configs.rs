//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on single keys of a topic's configs,
//! with the checks and the write of `alter_configs.rs` (Kafka's
//! `ConfigurationControlManager.incrementalAlterConfigResource`).

use super::alter_configs::{apply, Change, Op};
use super::common::s;
use crate::broker::Broker;
use kafka_protocol::messages::*;
use std::sync::Arc;

/// IncrementalAlterConfigs v0–v1.
pub(super) async fn handle(
    broker: &Arc<Broker>,
    caller: &crate::runtime::shard::Caller,
    req: IncrementalAlterConfigsRequest,
    _version: i16,
) -> IncrementalAlterConfigsResponse {
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
                        Op::from_code(c.config_operation),
                        c.value.as_ref().map(|v| v.to_string()),
                    )
                })
                .collect(),
            replace: false,
        })
        .collect();
    let outcomes = apply(broker, caller, changes, req.validate_only).await;
    let mut resp = IncrementalAlterConfigsResponse::default();
    for (r, o) in req.resources.iter().zip(outcomes) {
        let mut x = incremental_alter_configs_response::AlterConfigsResourceResponse::default()
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
