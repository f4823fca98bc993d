//! FindCoordinator: this broker coordinates every group and transactional id.

use super::auth::{self, Op, Rt};
use super::common::{code, s};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

/// FindCoordinator v0–v6. One broker owns every partition, so every group's and every
/// transactional id's coordinator is us.
pub(super) fn handle(
    broker: &Broker,
    caller: &Caller,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let listener = &caller.listener;
    let key_type = if version >= 1 { req.key_type } else { 0 };
    let answer = |key: &StrBytes| -> (i16, Option<String>) {
        // Describe on the group / transactional id (`KafkaApis.getCoordinator`).
        let refused = match key_type {
            0 if !auth::allowed(broker, caller, Op::Describe, Rt::Group, key) => {
                Some(ResponseError::GroupAuthorizationFailed)
            }
            1 if !auth::allowed(broker, caller, Op::Describe, Rt::TransactionalId, key) => {
                Some(ResponseError::TransactionalIdAuthorizationFailed)
            }
            _ => None,
        };
        if let Some(e) = refused {
            return (code(e), Some(e.to_string()));
        }
        match key_type {
            0 | 1 => (0, None),
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
            resp.host = s(listener.advertised_host.clone());
            resp.port = listener.advertised_port;
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
                    .with_host(s(listener.advertised_host.clone()))
                    .with_port(listener.advertised_port)
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
