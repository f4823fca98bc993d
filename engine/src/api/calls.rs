//! How a handler reaches state another shard may own: a group's share of a request goes to the
//! shard of the group's `__consumer_offsets` partition (`Router::partition`), a transactional
//! id's to the shard of its `__transaction_state` partition (`Router::txn`), a topic
//! partition's operation to the shard that owns it (`Router::data`), and a failure to answer
//! becomes the error code Kafka gives for it.

use crate::data::{DataOp, DataReply};
use crate::group::{GroupRequest, GroupResponse};
use crate::runtime::partition::{PartitionCall, PartitionOp, PartitionReply};
use crate::runtime::shard::{Caller, Handled, Shard};
use coordinator::txn::{TxnRequest, TxnResponse};
use kafka_protocol::ResponseError;
use std::rc::Rc;
use wire::Response;

pub(crate) fn not_available() -> i16 {
    ResponseError::CoordinatorNotAvailable.code()
}

pub(crate) async fn call_group(
    shard: &Rc<Shard>,
    caller: &Caller,
    version: i16,
    group: &str,
    req: GroupRequest,
) -> Result<GroupResponse, i16> {
    call_partition(shard, caller, version, partition_of(shard, group), req).await
}

pub(crate) async fn call_partition(
    shard: &Rc<Shard>,
    caller: &Caller,
    version: i16,
    partition: i32,
    req: GroupRequest,
) -> Result<GroupResponse, i16> {
    group_result(start_partition(shard, caller, version, partition, req).await)
}

/// The `__consumer_offsets` partition of `group` (Kafka's hash).
pub(crate) fn partition_of(shard: &Shard, group: &str) -> i32 {
    wire::partition_for(group, shard.broker.config.offsets_topic_num_partitions)
}

/// Hand a group's share of a request to its partition; what comes back is usually the answer
/// itself (see [`answer`]).
pub(crate) fn start_partition(
    shard: &Rc<Shard>,
    caller: &Caller,
    version: i16,
    partition: i32,
    req: GroupRequest,
) -> PartitionCall {
    let ctx = shard.request_context(caller, version);
    shard
        .router
        .partition(partition, PartitionOp::Group { ctx, req })
}

/// The group's answer, or the error code Kafka gives when its partition could not answer.
pub(crate) fn group_result(reply: PartitionReply) -> Result<GroupResponse, i16> {
    match reply {
        PartitionReply::Group(r) => Ok(r),
        PartitionReply::Loading => Err(ResponseError::CoordinatorLoadInProgress.code()),
        PartitionReply::NotCoordinator => Err(ResponseError::NotCoordinator.code()),
        _ => Err(not_available()),
    }
}

/// A request of one group turned into its response by `respond`: at once when its partition
/// answered while it ran (no future is allocated), else as a future the connection runs.
pub(crate) fn answer(
    mut call: PartitionCall,
    respond: impl FnOnce(Result<GroupResponse, i16>) -> Response + 'static,
) -> Handled {
    match call.ready() {
        Some(reply) => Handled::Done(Ok(respond(group_result(reply)))),
        None => Handled::Waiting(Box::pin(
            async move { Ok(respond(group_result(call.await))) },
        )),
    }
}

/// The error a request gets when its partition could not answer it: still loading
/// (COORDINATOR_LOAD_IN_PROGRESS, retriable), or unavailable (COORDINATOR_NOT_AVAILABLE).
pub(crate) fn fail_code(r: &Result<GroupResponse, i16>) -> i16 {
    match r {
        Err(code) => *code,
        Ok(_) => not_available(),
    }
}

/// Run `op` on shard `owner`.
pub(crate) async fn call_data(shard: &Rc<Shard>, owner: usize, op: DataOp) -> Option<DataReply> {
    shard.router.data(owner, op).await
}

/// Run several calls at once (each shard works on its own part); answers in the order given.
pub(crate) async fn call_all(
    shard: &Rc<Shard>,
    calls: Vec<(usize, DataOp)>,
) -> Vec<Option<DataReply>> {
    let tasks: Vec<_> = calls
        .into_iter()
        .map(|(owner, op)| {
            let shard = shard.clone();
            glommio::spawn_local(async move { call_data(&shard, owner, op).await })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await);
    }
    out
}

/// The `__transaction_state` partition of `transactional_id` (Kafka's hash, as for groups).
pub(crate) fn txn_partition_of(shard: &Shard, transactional_id: &str) -> i32 {
    wire::partition_for(
        transactional_id,
        shard.broker.config.transaction_state_log_num_partitions,
    )
}

/// Run a transaction coordinator request on `partition`; the error code Kafka gives when the
/// partition could not answer (COORDINATOR_NOT_AVAILABLE when its shard is gone).
pub(crate) async fn call_txn_partition(
    shard: &Rc<Shard>,
    partition: i32,
    req: TxnRequest,
) -> Result<TxnResponse, i16> {
    shard
        .router
        .txn(partition, req)
        .await
        .unwrap_or_else(|| Err(not_available()))
}

/// Run a request on the partition that coordinates `transactional_id`.
pub(crate) async fn call_txn(
    shard: &Rc<Shard>,
    transactional_id: &str,
    req: TxnRequest,
) -> Result<TxnResponse, i16> {
    let partition = txn_partition_of(shard, transactional_id);
    call_txn_partition(shard, partition, req).await
}

/// What a transactional write asks of its transaction's coordinator before it is written
/// (KIP-890; Kafka's `TransactionSupportedOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnCheck {
    /// Transactions version 1: the partitions must already be in the open transaction
    /// (AddPartitionsToTxn with verify_only).
    Verify,
    /// Transactions version 2 (Produce v12+, TxnOffsetCommit v5+): the partitions join the
    /// transaction, starting one if none is open (`addPartition`: AddPartitionsToTxn without
    /// verify_only, on the client's behalf).
    Add,
}

/// KIP-890's check of a transactional write: whether each of `partitions` is in (or, with
/// [`TxnCheck::Add`], joined) `transactional_id`'s open transaction with this producer id and
/// epoch. One raw coordinator code per partition, in order (0 = in the transaction); callers
/// translate them as Kafka does for their API.
pub(crate) async fn verify_in_txn(
    shard: &Rc<Shard>,
    transactional_id: &str,
    (producer_id, producer_epoch): (i64, i16),
    partitions: Vec<(String, i32)>,
    check: TxnCheck,
) -> Vec<i16> {
    let n = partitions.len();
    let call = TxnRequest::AddPartitions {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
        partitions,
        verify_only: check == TxnCheck::Verify,
        client_tv: if check == TxnCheck::Add { 2 } else { 0 },
    };
    match call_txn(shard, transactional_id, call).await {
        Ok(TxnResponse::AddPartitions(codes)) if codes.len() == n => codes,
        Ok(_) => vec![ResponseError::UnknownServerError.code(); n],
        Err(c) => vec![c; n],
    }
}
