//! InitProducerId: a new idempotent producer id from the durable id block (`producer_ids`), or,
//! with a transactional id, the transaction coordinator's answer (`coordinator::txn`).

use super::auth::{self, Op, Rt};
use super::calls::call_txn;
use super::common::code;
use crate::runtime::shard::{Caller, Shard};
use coordinator::txn::{TxnRequest, TxnResponse};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// InitProducerId v0–v5. Without a transactional id: a new producer id with epoch 0, or (v3+,
/// the producer names its id and epoch after a fatal sequence error) the same id with the epoch
/// bumped (KIP-360). With one: the id's coordinator bumps its epoch, fencing older producers
/// and aborting their open transaction (`TransactionCoordinator.handleInitProducerId`).
///
/// With an authorizer (`KafkaApis.handleInitProducerIdRequest`): Write on the transactional id,
/// else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; without one, IdempotentWrite on the cluster or
/// Write on some topic (`authorizeByResourceType`), else CLUSTER_AUTHORIZATION_FAILED.
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    req: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_throttle_time_ms(0)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let b = &shard.broker;
    match &req.transactional_id {
        Some(id) if !auth::allowed(b, caller, Op::Write, Rt::TransactionalId, &id.0) => {
            return resp.with_error_code(code(ResponseError::TransactionalIdAuthorizationFailed))
        }
        None if !auth::cluster(b, caller, Op::IdempotentWrite)
            && !auth::by_type(b, caller, Op::Write, Rt::Topic) =>
        {
            return resp.with_error_code(code(ResponseError::ClusterAuthorizationFailed))
        }
        _ => {}
    }
    if let Some(id) = &req.transactional_id {
        // Kafka reserves an id only for a new transactional id; one is taken here for every
        // call, because whether it is needed is known only on the coordinator's shard. Ids
        // are 63-bit and producers call this once per life.
        let fresh = match new_producer_id(shard).await {
            Ok(id) => id,
            Err(code) => return resp.with_error_code(code),
        };
        let expected = (version >= 3 && req.producer_id.0 >= 0 && req.producer_epoch >= 0)
            .then_some((req.producer_id.0, req.producer_epoch));
        let call = TxnRequest::InitProducerId {
            transactional_id: id.0.to_string(),
            timeout_ms: req.transaction_timeout_ms,
            expected,
            fresh_producer_id: fresh,
        };
        return match call_txn(shard, &id.0, call).await {
            Ok(TxnResponse::InitProducerId {
                error,
                producer_id,
                producer_epoch,
            }) => resp
                .with_error_code(error)
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(producer_epoch),
            Ok(_) => resp.with_error_code(code(ResponseError::UnknownServerError)),
            Err(c) => resp.with_error_code(c),
        };
    }
    if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX - 1 {
        return resp
            .with_error_code(0)
            .with_producer_id(req.producer_id)
            .with_producer_epoch(req.producer_epoch + 1);
    }
    match new_producer_id(shard).await {
        Ok(id) => resp
            .with_error_code(0)
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(c) => resp.with_error_code(c),
    }
}

/// A producer id never handed out before (reserving a new durable block off the reactor when
/// the current one is used up).
pub(super) async fn new_producer_id(shard: &Rc<Shard>) -> Result<i64, i16> {
    let broker = shard.broker.clone();
    glommio::executor()
        .spawn_blocking(move || broker.producer_ids.next())
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "could not reserve producer ids");
            code(ResponseError::KafkaStorageError)
        })
}
