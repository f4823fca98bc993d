//! EndTxn: commit or abort the producer's open transaction
//! (`TransactionCoordinator.handleEndTransaction`). The answer leaves once the prepare record
//! is durable; the markers follow (`runtime::txn`).
//!
//! v5+ is transactions version 2 (KIP-890, `KafkaApis.handleEndTxnRequest`): the coordinator
//! bumps the producer epoch, the markers carry the bumped epoch, and the response names the
//! producer id and epoch the client continues with.

use super::auth::{self, Op, Rt};
use super::calls::call_txn;
use super::common::code;
use crate::runtime::shard::{Caller, Shard};
use coordinator::txn::{epoch_exhausted, TxnRequest, TxnResponse};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// With an authorizer: Write on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
/// (`KafkaApis.handleEndTxnRequest`).
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    req: EndTxnRequest,
    version: i16,
) -> EndTxnResponse {
    let id = req.transactional_id.0.to_string();
    if !auth::allowed(&shard.broker, caller, Op::Write, Rt::TransactionalId, &id) {
        return error(code(ResponseError::TransactionalIdAuthorizationFailed));
    }
    let client_tv = if version >= 5 { 2 } else { 0 };
    // A version 2 end whose epoch is exhausted moves the producer to a new id. The current
    // epoch is the client's on every request that can succeed, so the id is reserved only
    // then (reserving one per EndTxn would spend the durable id blocks for nothing).
    let fresh_producer_id = if client_tv >= 2 && epoch_exhausted(req.producer_epoch) {
        match super::init_producer_id::new_producer_id(shard).await {
            Ok(id) => Some(id),
            Err(c) => return error(c),
        }
    } else {
        None
    };
    let call = TxnRequest::EndTxn {
        transactional_id: id.clone(),
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        commit: req.committed,
        client_tv,
        fresh_producer_id,
    };
    match call_txn(shard, &id, call).await {
        Ok(TxnResponse::EndTxn {
            error,
            producer_id,
            producer_epoch,
        }) => EndTxnResponse::default()
            .with_error_code(error)
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch),
        Ok(_) => error(code(ResponseError::UnknownServerError)),
        Err(c) => error(c),
    }
}

/// An error answer: no producer id or epoch (−1, as Kafka).
fn error(code: i16) -> EndTxnResponse {
    EndTxnResponse::default()
        .with_error_code(code)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}
