//! DescribeTransactions: each transactional id's state from its coordinator
//! (`TransactionCoordinator.handleDescribeTransactions`).

use super::calls::call_txn;
use super::common::{code, s};
use crate::runtime::shard::{Caller, Shard};
use coordinator::txn::{TxnRequest, TxnResponse};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;
use std::rc::Rc;

/// With an authorizer (`KafkaApis.handleDescribeTransactionsRequest`): Describe on each
/// transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it; only the topics the
/// caller may Describe are listed.
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &Caller,
    req: DescribeTransactionsRequest,
    _version: i16,
) -> DescribeTransactionsResponse {
    let mut states = Vec::with_capacity(req.transactional_ids.len());
    for id in &req.transactional_ids {
        let base = TransactionState::default()
            .with_transactional_id(id.clone())
            .with_transaction_state(s(""))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
            .with_transaction_start_time_ms(-1);
        let b = &shard.broker;
        use super::auth::{self, Op, Rt};
        if !auth::allowed(b, caller, Op::Describe, Rt::TransactionalId, &id.0) {
            states.push(
                base.with_error_code(code(ResponseError::TransactionalIdAuthorizationFailed)),
            );
            continue;
        }
        let call = TxnRequest::Describe {
            transactional_id: id.0.to_string(),
        };
        states.push(match call_txn(shard, &id.0, call).await {
            Ok(TxnResponse::Describe(Ok(d))) => {
                let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (t, p) in d.partitions {
                    if !auth::allowed(b, caller, Op::Describe, Rt::Topic, &t) {
                        continue;
                    }
                    topics.entry(t).or_default().push(p);
                }
                base.with_error_code(0)
                    .with_transaction_state(s(d.state))
                    .with_transaction_timeout_ms(d.timeout_ms)
                    .with_transaction_start_time_ms(d.start_ms)
                    .with_producer_id(ProducerId(d.producer_id))
                    .with_producer_epoch(d.producer_epoch)
                    .with_topics(
                        topics
                            .into_iter()
                            .map(|(t, ps)| {
                                TopicData::default()
                                    .with_topic(TopicName(s(t)))
                                    .with_partitions(ps)
                            })
                            .collect(),
                    )
            }
            Ok(TxnResponse::Describe(Err(c))) | Err(c) => base.with_error_code(c),
            Ok(_) => base.with_error_code(code(ResponseError::UnknownServerError)),
        });
    }
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
