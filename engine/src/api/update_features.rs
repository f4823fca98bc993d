//! UpdateFeatures: finalize a feature at a new level (KIP-584) — here only
//! `transaction.version` (`features`), so an operator can run the broker at transactions
//! version 1 (`Admin.updateFeatures`, `kafka-features.sh downgrade --feature
//! transaction.version=1`) and back. Kafka's controller answers it
//! (`QuorumController.updateFeatures`, `FeatureControlManager.updateFeatures`): every update
//! is checked first and one failure fails them all (INVALID_UPDATE_VERSION, top level); on
//! success v0–1 list each feature with NONE, v2 lists none. The new level is durable before
//! the answer leaves; clients see it in their next ApiVersions, with a newer epoch.

use super::common::{code, s};
use crate::features::{check_update, upgrade_type};
use crate::runtime::shard::Shard;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// With an authorizer: Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top level
/// (`ControllerApis.handleUpdateFeatures`, `UpdateFeaturesResponse.createWithErrors`).
pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &crate::runtime::shard::Caller,
    req: UpdateFeaturesRequest,
    version: i16,
) -> UpdateFeaturesResponse {
    let broker = &shard.broker;
    if !super::auth::cluster(broker, caller, super::auth::Op::Alter) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return UpdateFeaturesResponse::default()
            .with_error_code(code(e))
            .with_error_message(Some(s(e.to_string())));
    }
    // (feature, level, upgrade type); v0 has AllowDowngrade instead of UpgradeType
    // (`UpdateFeaturesRequest.extractUpdates`).
    let updates: Vec<(String, i16, i8)> = req
        .feature_updates
        .iter()
        .map(|u| {
            let t = if version == 0 {
                if u.allow_downgrade {
                    upgrade_type::SAFE_DOWNGRADE
                } else {
                    upgrade_type::UPGRADE
                }
            } else {
                u.upgrade_type
            };
            (u.feature.to_string(), u.max_version_level, t)
        })
        .collect();
    let current = broker.features.transaction_version();
    for (feature, level, t) in &updates {
        if let Err(msg) = check_update(broker.node_id, feature, current, *level, *t) {
            return UpdateFeaturesResponse::default()
                .with_error_code(code(ResponseError::InvalidUpdateVersion))
                .with_error_message(Some(s(format!(
                    "The update failed for all features since the following feature had an \
                     error: {msg}"
                ))));
        }
    }
    if !req.validate_only {
        // Every update names transaction.version (checked above); the last one wins, as the
        // controller's map of updates keeps the last.
        if let Some(&(_, level, _)) = updates.last() {
            let b = broker.clone();
            let written = glommio::executor()
                .spawn_blocking(move || b.features.set_transaction_version(level))
                .await;
            if let Err(e) = written {
                tracing::error!(error = %e, "could not store the feature levels");
                return UpdateFeaturesResponse::default()
                    .with_error_code(code(ResponseError::FeatureUpdateFailed))
                    .with_error_message(Some(s(e.to_string())));
            }
            tracing::info!(level, "transaction.version finalized");
        }
    }
    // No top-level message on success (the crate's default is an empty string, Kafka's null).
    let mut resp = UpdateFeaturesResponse::default()
        .with_error_code(0)
        .with_error_message(None);
    if version <= 1 {
        // Kafka fills each result's message with `Errors.NONE.message()`, which is "NONE".
        resp.results = updates
            .iter()
            .map(|(f, _, _)| {
                UpdatableFeatureResult::default()
                    .with_feature(s(f.clone()))
                    .with_error_code(0)
                    .with_error_message(Some(s("NONE".to_string())))
            })
            .collect();
    }
    resp
}
