//! EndTxn: commit or abort the producer's open transaction
//! (`TransactionCoordinator.handleEndTransaction`). The answer leaves once the prepare record
//! is durable; the markers follow (`runtime::txn`).

use super::calls::call_txn;
use super::common::code;
use crate::runtime::shard::Shard;
use coordinator::txn::{TxnRequest, TxnResponse};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::rc::Rc;

pub(super) async fn handle(shard: &Rc<Shard>, req: EndTxnRequest, _version: i16) -> EndTxnResponse {
    let id = req.transactional_id.0.to_string();
    let call = TxnRequest::EndTxn {
        transactional_id: id.clone(),
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        commit: req.committed,
    };
    let error = match call_txn(shard, &id, call).await {
        Ok(TxnResponse::EndTxn { error }) => error,
        Ok(_) => code(ResponseError::UnknownServerError),
        Err(c) => c,
    };
    // v5 reports the producer id and epoch to continue with; with transactions version 1 the
    // epoch does not change, so they are the request's (−1 on error, as Kafka).
    let (pid, epoch) = if error == 0 {
        (req.producer_id.0, req.producer_epoch)
    } else {
        (-1, -1)
    };
    EndTxnResponse::default()
        .with_error_code(error)
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
}
