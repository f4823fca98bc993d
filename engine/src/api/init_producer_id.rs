//! InitProducerId: a new idempotent producer id from the durable id block (`producer_ids`).

use super::common::code;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// InitProducerId v0–v5 for idempotent producers: a new producer id with epoch 0, or (v3+, the
/// producer names its id and epoch after a fatal sequence error) the same id with the epoch
/// bumped (KIP-360). Transactional ids need a transaction coordinator, which this broker does
/// not have (FindCoordinator answers COORDINATOR_NOT_AVAILABLE for them): same answer here.
pub(super) async fn handle(
    shard: &Rc<Shard>,
    req: InitProducerIdRequest,
    _version: i16,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_throttle_time_ms(0)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    if req.transactional_id.is_some() {
        return resp.with_error_code(code(ResponseError::CoordinatorNotAvailable));
    }
    if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX - 1 {
        return resp
            .with_error_code(0)
            .with_producer_id(req.producer_id)
            .with_producer_epoch(req.producer_epoch + 1);
    }
    let broker = shard.broker.clone();
    let id = glommio::executor()
        .spawn_blocking(move || broker.producer_ids.next())
        .await;
    match id {
        Ok(id) => resp
            .with_error_code(0)
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "could not reserve producer ids");
            resp.with_error_code(code(ResponseError::KafkaStorageError))
        }
    }
}
