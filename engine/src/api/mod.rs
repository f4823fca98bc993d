//! The API layer: one file per Kafka API, each turning a decoded request into its response.
//!
//! A handler reads the shared broker state (`crate::broker`) and reaches the state a shard owns
//! only through the router (`calls.rs`: a group's `__consumer_offsets` partition, a topic
//! partition's shard). It never touches a socket, a file or another shard's memory itself. The
//! runtime knows nothing of what a request means: a connection hands each decoded request to
//! [`handle`] and writes back what it returns.
//!
//! Where to look: group APIs (`join_group.rs` … `consumer_group_describe.rs`) split a request by
//! group and assemble the answer in the shape of the request's version; the data APIs
//! (`produce.rs`, `fetch.rs`, `list_offsets.rs`, `delete_records.rs`, `describe_producers.rs`)
//! split by owning shard;
//! the transaction APIs (`init_producer_id.rs`, `add_partitions_to_txn.rs`,
//! `add_offsets_to_txn.rs`, `end_txn.rs`, `describe_transactions.rs`, `list_transactions.rs`)
//! go to the shard of the transactional id's `__transaction_state` partition; the broker APIs (`api_versions.rs`, `metadata.rs`, `create_topics.rs`,
//! `delete_topics.rs`, `create_partitions.rs`, `find_coordinator.rs`, `describe_configs.rs`,
//! `alter_configs.rs`, `incremental_alter_configs.rs`, `describe_cluster.rs`)
//! answer from the shared state, `update_features.rs` changes its feature levels, and
//! `describe_user_scram_credentials.rs` / `alter_user_scram_credentials.rs` read and change the
//! SCRAM credentials (`crate::scram_store`); `describe_client_quotas.rs` answers that no client
//! quota is configured (none are enforced); `describe_quorum.rs`, `add_raft_voter.rs` and
//! `remove_raft_voter.rs` describe a cluster's metadata log and add a node to it or take one out;
//! `elect_leaders.rs` moves partitions' leadership back to their preferred replicas.
//! `describe_log_dirs.rs` lists the node's data directory and the partition logs in it;
//! `alter_partition_reassignments.rs` and `list_partition_reassignments.rs` move partitions
//! between nodes and list the moves under way.

use crate::runtime::shard::Caller;
use crate::runtime::shard::{Handled, Shard};
use std::rc::Rc;
use wire::{Request, Response};

mod auth;
mod calls;
mod common;

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod add_raft_voter;
mod alter_configs;
mod alter_partition_reassignments;
mod alter_user_scram_credentials;
mod api_versions;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_acls;
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_quorum;
mod describe_transactions;
mod describe_user_scram_credentials;
mod elect_leaders;
mod end_txn;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod produce;
mod remove_raft_voter;
mod sasl_authenticate;
mod sasl_handshake;
mod sync_group;
mod txn_offset_commit;
mod update_features;

#[cfg(test)]
mod data_tests;

pub use common::{is_internal, CLUSTER_AUTHORIZED_OPS, GROUP_AUTHORIZED_OPS, TOPIC_AUTHORIZED_OPS};

/// Answer one decoded request (`runtime::shard::Handler`). An `Err` closes the connection.
///
/// Requests that never wait are answered right here ([`Handled::Done`]): a heartbeat to a group
/// on this shard, the broker APIs answered from shared state. The rest are futures the
/// connection runs as tasks; the hottest of those get a box of their own size instead of the
/// size of the largest handler.
pub fn handle(shard: &Rc<Shard>, caller: &Rc<Caller>, v: i16, request: Request) -> Handled {
    let b = &shard.broker;
    let done = |r| Handled::Done(Ok(r));
    match request {
        Request::Heartbeat(r) => heartbeat::handle(shard, caller, r, v),
        Request::ConsumerGroupHeartbeat(r) => consumer_group_heartbeat::handle(shard, caller, r, v),
        Request::ApiVersions(r) => done(Response::ApiVersions(api_versions::handle(b, &r, v))),
        Request::FindCoordinator(r) => done(Response::FindCoordinator(find_coordinator::handle(
            b, caller, r, v,
        ))),
        Request::DescribeConfigs(r) => done(Response::DescribeConfigs(describe_configs::handle(
            b, caller, r, v,
        ))),
        Request::SaslHandshake(r) => done(Response::SaslHandshake(sasl_handshake::handle(r))),
        Request::SaslAuthenticate(r) => {
            done(Response::SaslAuthenticate(sasl_authenticate::handle(r)))
        }
        Request::DescribeCluster(r) => done(Response::DescribeCluster(describe_cluster::handle(
            b, caller, r, v,
        ))),
        Request::DescribeUserScramCredentials(r) => done(Response::DescribeUserScramCredentials(
            describe_user_scram_credentials::handle(b, caller, r, v),
        )),
        Request::DescribeClientQuotas(r) => done(Response::DescribeClientQuotas(
            describe_client_quotas::handle(b, caller, r, v),
        )),
        Request::DescribeQuorum(r) => done(Response::DescribeQuorum(describe_quorum::handle(
            b, caller, r, v,
        ))),
        Request::OffsetCommit(r) => {
            let (shard, caller) = (shard.clone(), caller.clone());
            Handled::Waiting(Box::pin(async move {
                Ok(Response::OffsetCommit(
                    offset_commit::handle(&shard, &caller, r, v).await,
                ))
            }))
        }
        request => {
            let (shard, caller) = (shard.clone(), caller.clone());
            Handled::Waiting(Box::pin(async move {
                dispatch(&shard, &caller, v, request).await
            }))
        }
    }
}

/// Route a decoded request to its handler.
async fn dispatch(
    shard: &Rc<Shard>,
    caller: &Caller,
    v: i16,
    request: Request,
) -> Result<Response, String> {
    let b = &shard.broker;
    Ok(match request {
        Request::JoinGroup(r) => Response::JoinGroup(join_group::handle(shard, caller, r, v).await),
        Request::SyncGroup(r) => Response::SyncGroup(sync_group::handle(shard, caller, r, v).await),
        Request::LeaveGroup(r) => {
            Response::LeaveGroup(leave_group::handle(shard, caller, r, v).await)
        }
        Request::OffsetCommit(r) => {
            Response::OffsetCommit(offset_commit::handle(shard, caller, r, v).await)
        }
        Request::OffsetFetch(r) => {
            Response::OffsetFetch(offset_fetch::handle(shard, caller, r, v).await)
        }
        Request::TxnOffsetCommit(r) => {
            Response::TxnOffsetCommit(txn_offset_commit::handle(shard, caller, r, v).await)
        }
        Request::OffsetDelete(r) => {
            Response::OffsetDelete(offset_delete::handle(shard, caller, r, v).await)
        }
        Request::DescribeGroups(r) => {
            Response::DescribeGroups(describe_groups::handle(shard, caller, r, v).await)
        }
        Request::ListGroups(r) => {
            Response::ListGroups(list_groups::handle(shard, caller, r, v).await)
        }
        Request::DeleteGroups(r) => {
            Response::DeleteGroups(delete_groups::handle(shard, caller, r, v).await)
        }
        Request::ConsumerGroupDescribe(r) => Response::ConsumerGroupDescribe(
            consumer_group_describe::handle(shard, caller, r, v).await,
        ),
        Request::Produce(r) => Response::Produce(produce::handle(shard, caller, r, v).await),
        Request::ListOffsets(r) => {
            Response::ListOffsets(list_offsets::handle(shard, caller, r, v).await)
        }
        Request::Fetch(r) => Response::Fetch(fetch::handle(shard, caller, r, v).await),
        Request::DeleteRecords(r) => {
            Response::DeleteRecords(delete_records::handle(shard, caller, r, v).await)
        }
        Request::DescribeProducers(r) => {
            Response::DescribeProducers(describe_producers::handle(shard, caller, r, v).await)
        }
        Request::InitProducerId(r) => {
            Response::InitProducerId(init_producer_id::handle(shard, caller, r, v).await)
        }
        Request::AddPartitionsToTxn(r) => {
            Response::AddPartitionsToTxn(add_partitions_to_txn::handle(shard, caller, r, v).await)
        }
        Request::AddOffsetsToTxn(r) => {
            Response::AddOffsetsToTxn(add_offsets_to_txn::handle(shard, caller, r, v).await)
        }
        Request::EndTxn(r) => Response::EndTxn(end_txn::handle(shard, caller, r, v).await),
        Request::DescribeTransactions(r) => {
            Response::DescribeTransactions(describe_transactions::handle(shard, caller, r, v).await)
        }
        Request::UpdateFeatures(r) => {
            Response::UpdateFeatures(update_features::handle(shard, caller, r, v).await)
        }
        Request::ListTransactions(r) => {
            Response::ListTransactions(list_transactions::handle(shard, caller, r, v).await)
        }
        Request::AlterUserScramCredentials(r) => Response::AlterUserScramCredentials(
            alter_user_scram_credentials::handle(shard, caller, r, v).await,
        ),
        Request::Metadata(r) => Response::Metadata(metadata::handle(b, caller, r, v).await),
        Request::CreateTopics(r) => {
            Response::CreateTopics(create_topics::handle(b, caller, r, v).await)
        }
        Request::AddRaftVoter(r) => {
            Response::AddRaftVoter(add_raft_voter::handle(b, caller, r).await)
        }
        Request::RemoveRaftVoter(r) => {
            Response::RemoveRaftVoter(remove_raft_voter::handle(b, caller, r).await)
        }
        Request::ElectLeaders(r) => {
            Response::ElectLeaders(elect_leaders::handle(b, caller, r, v).await)
        }
        Request::DescribeLogDirs(r) => {
            Response::DescribeLogDirs(describe_log_dirs::handle(b, caller, r, v).await)
        }
        Request::AlterPartitionReassignments(r) => Response::AlterPartitionReassignments(
            alter_partition_reassignments::handle(b, caller, r).await,
        ),
        Request::ListPartitionReassignments(r) => Response::ListPartitionReassignments(
            list_partition_reassignments::handle(b, caller, r).await,
        ),
        Request::DeleteTopics(r) => {
            Response::DeleteTopics(delete_topics::handle(shard, caller, r, v).await)
        }
        Request::CreatePartitions(r) => {
            Response::CreatePartitions(create_partitions::handle(b, caller, r, v).await)
        }
        Request::AlterConfigs(r) => {
            Response::AlterConfigs(alter_configs::handle(b, caller, r, v).await)
        }
        Request::IncrementalAlterConfigs(r) => Response::IncrementalAlterConfigs(
            incremental_alter_configs::handle(b, caller, r, v).await,
        ),
        Request::DescribeAcls(r) => Response::DescribeAcls(describe_acls::handle(b, caller, r)?),
        Request::CreateAcls(r) => Response::CreateAcls(create_acls::handle(b, caller, r).await?),
        Request::DeleteAcls(r) => Response::DeleteAcls(delete_acls::handle(b, caller, r).await?),
        // The version table only admits the APIs above; anything else reaching here is a bug in
        // that table, answered the way Kafka answers an API it does not serve.
        other => {
            return Err(format!(
                "api key {} is advertised but has no handler",
                other.api_key()
            ))
        }
    })
}
