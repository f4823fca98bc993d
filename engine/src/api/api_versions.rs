//! ApiVersions: the versions this broker serves (`wire::Versions`). A request of a version we
//! do not know never reaches here: the connection answers it with v0 and UNSUPPORTED_VERSION
//! (KIP-511, `runtime::conn`).

use crate::broker::Broker;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

pub(super) fn handle(
    broker: &Broker,
    req: &ApiVersionsRequest,
    version: i16,
) -> ApiVersionsResponse {
    wire::api_versions::response(req, version, &broker.versions)
}
