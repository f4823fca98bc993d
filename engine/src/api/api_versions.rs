//! ApiVersions: the versions this broker serves (`wire::Versions`) and, from v3, its features
//! (`features`). A request of a version we do not know never reaches here: the connection
//! answers it with v0 and UNSUPPORTED_VERSION (KIP-511, `runtime::conn`).

use crate::broker::Broker;
use crate::features::{
    Features, TRANSACTION_VERSION, TRANSACTION_VERSION_MAX, TRANSACTION_VERSION_MIN,
};
use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

pub(super) fn handle(
    broker: &Broker,
    req: &ApiVersionsRequest,
    version: i16,
) -> ApiVersionsResponse {
    let resp = wire::api_versions::response(req, version, &broker.versions);
    with_features(resp, version, &broker.features)
}

/// The features part (v3+; the fields are tagged, older versions have none), as Kafka fills it
/// (`ApiVersionsResponse.Builder`): below v4 a supported feature whose minimum is 0 is left
/// out, because older clients fail on it (KAFKA-17492); a finalized level of 0 is not listed
/// (the feature is off).
fn with_features(
    mut resp: ApiVersionsResponse,
    version: i16,
    features: &Features,
) -> ApiVersionsResponse {
    if version < 3 || resp.error_code != 0 {
        return resp;
    }
    // Epoch before level: a level read after its epoch is never older than that epoch says.
    let epoch = features.epoch();
    let tv = features.transaction_version();
    if version >= 4 || TRANSACTION_VERSION_MIN > 0 {
        resp.supported_features.push(
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
                .with_min_version(TRANSACTION_VERSION_MIN)
                .with_max_version(TRANSACTION_VERSION_MAX),
        );
    }
    resp.finalized_features_epoch = epoch;
    if tv != 0 {
        resp.finalized_features.push(
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
                .with_min_version_level(tv)
                .with_max_version_level(tv),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(version: i16, tv: i16) -> ApiVersionsResponse {
        let f = Features::open(None).unwrap();
        f.set_transaction_version(tv).unwrap();
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("t"))
            .with_client_software_version(StrBytes::from_static_str("1"));
        let r = wire::api_versions::response(&req, version, &wire::Versions::default());
        with_features(r, version, &f)
    }

    #[test]
    fn transaction_version_is_supported_and_finalized_at_two() {
        let r = resp(4, 2);
        assert_eq!(r.supported_features.len(), 1);
        let s = &r.supported_features[0];
        assert_eq!(
            (s.name.as_str(), s.min_version, s.max_version),
            ("transaction.version", 0, 2)
        );
        assert_eq!(r.finalized_features.len(), 1);
        let f = &r.finalized_features[0];
        assert_eq!(
            (f.name.as_str(), f.min_version_level, f.max_version_level),
            ("transaction.version", 2, 2)
        );
        assert!(r.finalized_features_epoch >= 0);
    }

    #[test]
    fn v3_hides_a_minimum_of_zero_and_level_zero_is_not_finalized() {
        let r = resp(3, 2);
        assert!(r.supported_features.is_empty(), "KAFKA-17492");
        assert_eq!(r.finalized_features.len(), 1);
        let r = resp(4, 0);
        assert_eq!(r.supported_features.len(), 1);
        assert!(r.finalized_features.is_empty());
        let r = resp(2, 2);
        assert!(r.supported_features.is_empty() && r.finalized_features.is_empty());
    }
}
