//! ListTransactions: every transactional id of every `__transaction_state` partition, filtered
//! by state, producer id and (v1+) how long the transaction has been open
//! (`TransactionStateManager.listTransactionStates`).

use super::calls::call_txn_partition;
use super::common::s;
use crate::runtime::shard::Shard;
use coordinator::txn::{TxnRequest, TxnResponse, TxnState};
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::*;
use std::rc::Rc;

const STATES: [TxnState; 8] = [
    TxnState::Empty,
    TxnState::Ongoing,
    TxnState::PrepareCommit,
    TxnState::PrepareAbort,
    TxnState::CompleteCommit,
    TxnState::CompleteAbort,
    TxnState::Dead,
    TxnState::PrepareEpochFence,
];

///
/// With an authorizer, only the transactional ids the caller may Describe are listed
/// (`KafkaApis.handleListTransactionsRequest`).
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &crate::runtime::shard::Caller,
    req: ListTransactionsRequest,
    version: i16,
) -> ListTransactionsResponse {
    let known = |f: &str| STATES.iter().any(|st| st.name() == f);
    let unknown: Vec<_> = req
        .state_filters
        .iter()
        .filter(|f| !known(f))
        .cloned()
        .collect();
    let states: Vec<String> = req
        .state_filters
        .iter()
        .filter(|f| known(f))
        .map(|f| f.to_string())
        .collect();
    let resp = ListTransactionsResponse::default().with_unknown_state_filters(unknown.clone());
    // Only unknown states asked for: nothing can match (Kafka answers an empty list).
    if states.is_empty() && !unknown.is_empty() {
        return resp;
    }
    let pattern = if version >= 2 {
        match req
            .transactional_id_pattern
            .as_deref()
            .filter(|p| !p.is_empty())
        {
            Some(p) => match regex::Regex::new(&format!("^(?:{p})$")) {
                Ok(re) => Some(re),
                Err(_) => {
                    return resp.with_error_code(
                        kafka_protocol::ResponseError::InvalidRegularExpression.code(),
                    )
                }
            },
            None => None,
        }
    } else {
        None
    };
    let duration = if version >= 1 {
        req.duration_filter
    } else {
        -1
    };
    let n = shard.broker.config.transaction_state_log_num_partitions;
    let mut listed = Vec::new();
    for p in 0..n {
        let call = TxnRequest::List {
            states: states.clone(),
            producer_ids: req.producer_id_filters.iter().map(|id| id.0).collect(),
            min_duration_ms: duration,
        };
        match call_txn_partition(shard, p, call).await {
            Ok(TxnResponse::List(l)) => listed.extend(l),
            Ok(_) => {}
            Err(c) => return resp.with_error_code(c),
        }
    }
    resp.with_transaction_states(
        listed
            .into_iter()
            .filter(|t| {
                pattern
                    .as_ref()
                    .is_none_or(|re| re.is_match(&t.transactional_id))
                    && super::auth::allowed(
                        &shard.broker,
                        caller,
                        super::auth::Op::Describe,
                        super::auth::Rt::TransactionalId,
                        &t.transactional_id,
                    )
            })
            .map(|t| {
                TransactionState::default()
                    .with_transactional_id(TransactionalId(s(t.transactional_id)))
                    .with_producer_id(ProducerId(t.producer_id))
                    .with_transaction_state(s(t.state))
            })
            .collect(),
    )
}
