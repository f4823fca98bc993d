//! DescribeUserScramCredentials (50): which SCRAM mechanisms each user has, and their
//! iterations (never a salt or key). Kafka answers it from its metadata image
//! (`metadata/src/main/java/org/apache/kafka/image/ScramImage.java`, `describe`): no users
//! (null or empty) means every user; a user named twice is DUPLICATE_RESOURCE, a user without
//! credentials RESOURCE_NOT_FOUND, each with Kafka's message; the top level is always NONE.

use super::common::{code, s};
use crate::broker::Broker;
use indexmap::IndexMap;
use kafka_protocol::messages::describe_user_scram_credentials_response::*;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

pub(super) fn handle(
    b: &Broker,
    caller: &crate::runtime::shard::Caller,
    req: DescribeUserScramCredentialsRequest,
    _version: i16,
) -> DescribeUserScramCredentialsResponse {
    // Kafka requires Describe on the cluster (`KafkaApis.handleDescribeUserScramCredentialsRequest`),
    // answering CLUSTER_AUTHORIZATION_FAILED at the top level, no results, otherwise
    // (`DescribeUserScramCredentialsRequest.getErrorResponse`).
    if !super::auth::cluster(b, caller, super::auth::Op::Describe) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(code(e))
            .with_error_message(Some(s(e.to_string())));
    }
    let set = b.scram.snapshot();
    // user → named more than once; in the request's order (Kafka's HashMap has no order).
    let mut users: IndexMap<String, bool> = IndexMap::new();
    match req.users.as_deref() {
        None | Some([]) => users.extend(set.keys().map(|u| (u.clone(), false))),
        Some(named) => {
            for u in named {
                match users.get_mut(u.name.as_str()) {
                    Some(duplicate) => *duplicate = true,
                    None => {
                        users.insert(u.name.to_string(), false);
                    }
                }
            }
        }
    }
    let results = users
        .into_iter()
        .map(|(user, duplicate)| {
            let r = DescribeUserScramCredentialsResult::default().with_user(s(user.clone()));
            if duplicate {
                return r
                    .with_error_code(code(ResponseError::DuplicateResource))
                    .with_error_message(Some(s(format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                    ))));
            }
            match set.get(&user) {
                Some(mechs) if !mechs.is_empty() => r
                    .with_error_code(0)
                    .with_error_message(None)
                    .with_credential_infos(
                        mechs
                            .iter()
                            .filter_map(|(m, c)| {
                                Some(
                                    CredentialInfo::default()
                                        .with_mechanism(m.scram_type()?)
                                        .with_iterations(c.iterations as i32),
                                )
                            })
                            .collect(),
                    ),
                _ => r
                    .with_error_code(code(ResponseError::ResourceNotFound))
                    .with_error_message(Some(s(format!(
                        "Attempt to describe a user credential that does not exist: {user}"
                    )))),
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default()
        .with_error_code(0)
        .with_error_message(None)
        .with_results(results)
}
