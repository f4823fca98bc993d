//! DescribeCluster: every node (this one alone, or each node of a cluster whose endpoint is
//! known), and this node as the controller.

use super::auth::{self, Op, Rt};
use super::common::{code, s, AUTHORIZED_OPS_OMITTED, CLUSTER_AUTHORIZED_OPS};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

/// DescribeCluster v0–v2: the nodes `Broker::nodes_on` lists, this one named controller.
pub(super) fn handle(
    broker: &Broker,
    caller: &Caller,
    req: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    let listener = &caller.listener;
    let endpoint_type = if version >= 1 { req.endpoint_type } else { 1 };
    let mut resp = DescribeClusterResponse::default()
        .with_cluster_id(s(broker.cluster_id.clone()))
        .with_controller_id(BrokerId(broker.node_id))
        .with_endpoint_type(endpoint_type)
        .with_cluster_authorized_operations(if req.include_cluster_authorized_operations {
            // Kafka answers, never refuses: the operations when the caller may Describe the
            // cluster, else none (`AuthHelper.computeDescribeClusterResponse`).
            if auth::cluster(broker, caller, Op::Describe) {
                auth::operations(
                    broker,
                    caller,
                    Rt::Cluster,
                    security::acl::CLUSTER_NAME,
                    CLUSTER_AUTHORIZED_OPS,
                )
            } else {
                0
            }
        } else {
            AUTHORIZED_OPS_OMITTED
        });
    if endpoint_type != 1 && endpoint_type != 2 {
        resp.error_code = code(ResponseError::UnsupportedEndpointType);
        resp.error_message = Some(s(format!("Unsupported endpoint type {endpoint_type}")));
        return resp;
    }
    resp.brokers = broker
        .nodes_on(listener)
        .into_iter()
        .map(|(id, host, port)| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(id))
                .with_host(s(host))
                .with_port(port)
        })
        .collect();
    resp
}
