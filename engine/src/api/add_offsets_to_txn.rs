//! AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the producer's open
//! transaction, so the coordinator sends it the transaction's marker
//! (`KafkaApis.handleAddOffsetsToTxnRequest`).

use super::auth::{self, Op, Rt};
use super::calls::{call_txn, partition_of};
use super::common::code;
use crate::runtime::shard::{Caller, Shard};
use crate::runtime::txn::OFFSETS_TOPIC;
use coordinator::txn::{TxnRequest, TxnResponse};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// With an authorizer: Write on the transactional id, then Read on the group, else
/// TRANSACTIONAL_ID_ / GROUP_AUTHORIZATION_FAILED (`KafkaApis.handleAddOffsetsToTxnRequest`).
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    req: AddOffsetsToTxnRequest,
    _version: i16,
) -> AddOffsetsToTxnResponse {
    let id = req.transactional_id.0.to_string();
    let b = &shard.broker;
    if !auth::allowed(b, caller, Op::Write, Rt::TransactionalId, &id) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(code(ResponseError::TransactionalIdAuthorizationFailed));
    }
    if !auth::allowed(b, caller, Op::Read, Rt::Group, &req.group_id.0) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(code(ResponseError::GroupAuthorizationFailed));
    }
    let partition = partition_of(shard, &req.group_id.0);
    let call = TxnRequest::AddPartitions {
        transactional_id: id.clone(),
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        partitions: vec![(OFFSETS_TOPIC.to_string(), partition)],
        verify_only: false,
        // Only a transactions version 1 client sends AddOffsetsToTxn.
        client_tv: 0,
    };
    let error = match call_txn(shard, &id, call).await {
        Ok(TxnResponse::AddPartitions(codes)) => codes.first().copied().unwrap_or(0),
        Ok(_) => code(ResponseError::UnknownServerError),
        Err(c) => c,
    };
    AddOffsetsToTxnResponse::default().with_error_code(error)
}
