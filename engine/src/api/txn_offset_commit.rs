//! TxnOffsetCommit: a transactional producer commits offsets for a group as part of its
//! transaction. The group's shard writes them as the producer's transactional batch; they stay
//! pending (invisible to OffsetFetch) until the transaction coordinator's marker for the
//! producer commits or aborts them (`coordinator::group::txn`). The answer leaves once the
//! records are durable.
//!
//! First the transaction coordinator confirms that the group's `__consumer_offsets` partition
//! is in the producer's open transaction (AddOffsetsToTxn came first) with the current producer
//! id and epoch — KIP-890's verification, as Kafka does before a transactional offset write
//! (`maybeStartTransactionVerificationForPartition`) — so a zombie or a producer whose
//! transaction timed out cannot leave pending offsets no marker will ever end. From v5
//! (transactions version 2) the coordinator adds the partition instead, checking the same
//! producer id and epoch.
//!
//! Verification and write are two steps, and the transaction's ABORT marker can reach the
//! group's partition between them; the write would then land as pending offsets of no open
//! transaction, which the producer's next COMMIT (same producer id and epoch in transactions
//! v1) would make visible. So, as Kafka does with its `VerificationGuard` (the "ABA problem"
//! comment in `core/src/main/scala/kafka/log/UnifiedLog.scala`), the partition first hands out
//! a guard for the producer (`GroupRequest::TxnGuard`), the write carries it, and the partition
//! accepts the write only if no marker for the producer came in between
//! (`coordinator::group::txn::TxnGuard`); otherwise INVALID_TXN_STATE.

use super::auth::{self, Op, Rt};
use super::calls::{call_group, fail_code};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use std::rc::Rc;

pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: TxnOffsetCommitRequest,
    v: i16,
) -> TxnOffsetCommitResponse {
    let group = r.group_id.0.to_string();
    // There is no top-level error: a group-level failure goes into every partition.
    let fallback = |topics: &[txn_offset_commit_request::TxnOffsetCommitRequestTopic],
                    code: i16| {
        TxnOffsetCommitResponse::default().with_topics(
            topics
                .iter()
                .map(|t| {
                    TxnOffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    TxnOffsetCommitResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
    };
    // Write on the transactional id, Read on the group, then Read on each topic: a refused
    // topic's partitions answer TOPIC_AUTHORIZATION_FAILED and the rest go on
    // (`KafkaApis.handleTxnOffsetCommitRequest`).
    let b = &shard.broker;
    if !auth::allowed(
        b,
        caller,
        Op::Write,
        Rt::TransactionalId,
        &r.transactional_id.0,
    ) {
        return fallback(
            &r.topics,
            kafka_protocol::ResponseError::TransactionalIdAuthorizationFailed.code(),
        );
    }
    if !auth::allowed(b, caller, Op::Read, Rt::Group, &group) {
        return fallback(
            &r.topics,
            kafka_protocol::ResponseError::GroupAuthorizationFailed.code(),
        );
    }
    let mut r = r;
    let mut refused = Vec::new();
    if auth::on(b) {
        let (ok, no): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
            .into_iter()
            .partition(|t| auth::allowed(b, caller, Op::Read, Rt::Topic, &t.name));
        r.topics = ok;
        refused = no;
    }
    let refused = fallback(
        &refused,
        kafka_protocol::ResponseError::TopicAuthorizationFailed.code(),
    );
    if r.topics.is_empty() && !refused.topics.is_empty() {
        return refused;
    }
    let mut resp = commit(shard, caller, r, v, &group, &fallback).await;
    if !refused.topics.is_empty() {
        resp.topics.extend(refused.topics);
    }
    resp
}

async fn commit(
    shard: &Rc<Shard>,
    caller: &Caller,
    r: TxnOffsetCommitRequest,
    v: i16,
    group: &str,
    fallback: &dyn Fn(
        &[txn_offset_commit_request::TxnOffsetCommitRequestTopic],
        i16,
    ) -> TxnOffsetCommitResponse,
) -> TxnOffsetCommitResponse {
    let group = group.to_string();
    let shape = r.topics.clone();
    let offsets_partition = (
        crate::runtime::txn::OFFSETS_TOPIC.to_string(),
        super::calls::partition_of(shard, &group),
    );
    // From v5 the client speaks transactions version 2 and sends no AddOffsetsToTxn: the
    // commit adds the group's partition to the transaction
    // (`txnOffsetCommitRequestVersionToTransactionSupportedOperation`).
    let check = if v >= 5 {
        super::calls::TxnCheck::Add
    } else {
        super::calls::TxnCheck::Verify
    };
    use kafka_protocol::ResponseError as E;
    let guard = match call_group(
        shard,
        caller,
        v,
        &group,
        GroupRequest::TxnGuard {
            producer_id: r.producer_id.0,
        },
    )
    .await
    {
        Ok(GroupResponse::TxnGuard(Ok(g))) => g,
        // Too many verifications under way in the partition: retriable.
        Ok(GroupResponse::TxnGuard(Err(c))) if c == E::ConcurrentTransactions.code() => {
            return fallback(&shape, E::CoordinatorNotAvailable.code())
        }
        Ok(GroupResponse::TxnGuard(Err(c))) => return fallback(&shape, c),
        other => return fallback(&shape, fail_code(&other)),
    };
    let verified = super::calls::verify_in_txn(
        shard,
        &r.transactional_id.0,
        (r.producer_id.0, r.producer_epoch),
        vec![offsets_partition],
        check,
    )
    .await;
    if let Some(&c) = verified.first().filter(|c| **c != 0) {
        // Kafka's translations (`AddPartitionsToTxnManager`): a fenced producer sees
        // INVALID_PRODUCER_EPOCH, a partition outside the transaction INVALID_TXN_STATE before
        // v5 (TRANSACTION_ABORTABLE from v5), and a coordinator that cannot answer now a
        // retriable coordinator error.
        let c = match E::try_from_code(c) {
            Some(E::ProducerFenced) => E::InvalidProducerEpoch.code(),
            Some(E::TransactionAbortable) if v <= 4 => E::InvalidTxnState.code(),
            Some(E::ConcurrentTransactions | E::CoordinatorLoadInProgress | E::NotCoordinator) => {
                E::CoordinatorNotAvailable.code()
            }
            _ => c,
        };
        return fallback(&shape, c);
    }
    match call_group(
        shard,
        caller,
        v,
        &group,
        GroupRequest::TxnOffsetCommit(r, guard),
    )
    .await
    {
        Ok(GroupResponse::TxnOffsetCommit(resp)) => resp,
        other => fallback(&shape, fail_code(&other)),
    }
}
