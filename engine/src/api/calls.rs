//! How a handler reaches state another shard may own: a group's share of a request goes to the
//! shard of the group's `__consumer_offsets` partition (`Router::partition`), a topic
//! partition's operation to the shard that owns it (`Router::data`), and a failure to answer
//! becomes the error code Kafka gives for it.

use crate::data::{DataOp, DataReply};
use crate::group::{GroupRequest, GroupResponse, RequestContext};
use crate::runtime::partition::{PartitionOp, PartitionReply};
use crate::runtime::shard::Caller;
use crate::runtime::shard::Shard;
use kafka_protocol::ResponseError;
use std::rc::Rc;

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
    let partition = wire::partition_for(group, shard.broker.config.offsets_topic_num_partitions);
    call_partition(shard, caller, version, partition, req).await
}

pub(crate) async fn call_partition(
    shard: &Rc<Shard>,
    caller: &Caller,
    version: i16,
    partition: i32,
    req: GroupRequest,
) -> Result<GroupResponse, i16> {
    let ctx = RequestContext {
        client_id: caller.client_id.clone(),
        client_host: caller.client_host.clone(),
        api_version: version,
        topics: shard.broker.topics.snapshot(),
        group_configs: shard.broker.group_configs.snapshot(),
    };
    match shard
        .router
        .partition(partition, PartitionOp::Group { ctx, req })
        .await
    {
        PartitionReply::Group(r) => Ok(r),
        PartitionReply::Loading => Err(ResponseError::CoordinatorLoadInProgress.code()),
        _ => Err(not_available()),
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
