//! AddPartitionsToTxn: partitions join a producer's open transaction on its coordinator
//! (`TransactionCoordinator.handleAddPartitionsToTransaction`). v0–v3 carry one transaction
//! (what clients send); v4+ carry several, each possibly `verify_only` (what brokers send to
//! check a transactional produce, KIP-890).

use super::auth::{self, Op, Rt};
use super::calls::call_txn;
use super::common::code;
use crate::runtime::shard::{Caller, Shard};
use coordinator::txn::{TxnRequest, TxnResponse};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// With an authorizer (`KafkaApis.handleAddPartitionsToTxnRequest`): v0–v3 (clients) need
/// Write on the transactional id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
/// and Write on each topic (a refused topic's partitions TOPIC_AUTHORIZATION_FAILED, the others
/// OPERATION_NOT_ATTEMPTED, nothing added); v4+ (brokers) need ClusterAction on the cluster.
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if version <= 3 {
        let results = one(
            shard,
            Some(caller),
            &req.v3_and_below_transactional_id.0,
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
            &req.v3_and_below_topics,
            false,
            version,
        )
        .await;
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    if !auth::cluster(&shard.broker, caller, Op::ClusterAction) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(code(ResponseError::ClusterAuthorizationFailed));
    }
    let mut out = Vec::with_capacity(req.transactions.len());
    for t in &req.transactions {
        let results = one(
            shard,
            None,
            &t.transactional_id.0,
            t.producer_id.0,
            t.producer_epoch,
            &t.topics,
            t.verify_only,
            version,
        )
        .await;
        out.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(t.transactional_id.clone())
                .with_topic_results(results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(out)
}

/// One transaction's partitions, answered per partition. Partitions of topics that do not
/// exist get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, and nothing is
/// added (`KafkaApis.handleAddPartitionsToTxnRequest`).
///
/// `caller`: whose Write on the transactional id and the topics to check (v0–v3).
async fn one(
    shard: &Rc<Shard>,
    caller: Option<&Caller>,
    id: &str,
    producer_id: i64,
    producer_epoch: i16,
    topics: &[AddPartitionsToTxnTopic],
    verify_only: bool,
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let snap = shard.broker.topics.snapshot();
    let partitions: Vec<(String, i32)> = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
        .collect();
    let b = &shard.broker;
    let caller = caller.filter(|_| auth::on(b));
    if caller.is_some_and(|c| !auth::allowed(b, c, Op::Write, Rt::TransactionalId, id)) {
        return answer(
            topics,
            std::iter::repeat(code(ResponseError::TransactionalIdAuthorizationFailed)),
        );
    }
    // Kafka leaves internal topics out of the ones it authorizes: refused, whatever the ACLs.
    let refused = |t: &str| {
        caller.is_some_and(|c| {
            super::common::is_internal(t) || !auth::allowed(b, c, Op::Write, Rt::Topic, t)
        })
    };
    let unknown = |(t, p): &(String, i32)| {
        snap.get(t)
            .is_none_or(|topic| topic.internal || *p < 0 || *p >= topic.partitions)
    };
    let codes: Vec<i16> = if partitions.iter().any(|tp| refused(&tp.0) || unknown(tp)) {
        partitions
            .iter()
            .map(|tp| {
                if refused(&tp.0) {
                    code(ResponseError::TopicAuthorizationFailed)
                } else if unknown(tp) {
                    code(ResponseError::UnknownTopicOrPartition)
                } else {
                    code(ResponseError::OperationNotAttempted)
                }
            })
            .collect()
    } else {
        let req = TxnRequest::AddPartitions {
            transactional_id: id.to_string(),
            producer_id,
            producer_epoch,
            partitions: partitions.clone(),
            verify_only,
            // v4+ is a broker adding for a transactions version 2 client
            // (`TransactionVersion.transactionVersionForAddPartitionsToTxn`).
            client_tv: if version >= 4 { 2 } else { 0 },
        };
        match call_txn(shard, id, req).await {
            Ok(TxnResponse::AddPartitions(codes)) if codes.len() == partitions.len() => codes,
            Ok(_) => vec![code(ResponseError::UnknownServerError); partitions.len()],
            Err(c) => vec![c; partitions.len()],
        }
    };
    answer(topics, codes)
}

/// Each partition of `topics` with the next of `codes`.
fn answer(
    topics: &[AddPartitionsToTxnTopic],
    codes: impl IntoIterator<Item = i16>,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut codes = codes.into_iter();
    topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(codes.next().unwrap_or(0))
                        })
                        .collect(),
                )
        })
        .collect()
}
