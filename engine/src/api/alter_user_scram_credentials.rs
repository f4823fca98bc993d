//! AlterUserScramCredentials (51): add, replace or delete users' SCRAM credentials
//! (`kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`). The client
//! sends the salt and the salted password (`Hi(password, salt, i)`); the broker keeps StoredKey
//! and ServerKey derived from it, as Kafka's controller does
//! (`metadata/src/main/java/org/apache/kafka/controller/ScramControlManager.java`,
//! `alterCredentials`), with its checks, codes and messages:
//! - a user may appear once per request, deletions and upsertions together: a second mention is
//!   DUPLICATE_RESOURCE for that user ("A user credential cannot be altered twice in the same
//!   request"), and the user's earlier change is dropped too;
//! - empty name: UNACCEPTABLE_CREDENTIAL "Username must not be empty"; mechanism other than 1/2:
//!   UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism";
//! - iterations below 4096 / above 16384: UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too
//!   many iterations";
//! - deleting a credential that does not exist: RESOURCE_NOT_FOUND "Attempt to delete a user
//!   credential that does not exist".
//!
//! The accepted changes are applied together and made durable before the answer (results:
//! deletions, then upsertions, then errors, as Kafka lists them).

use super::common::{code, s};
use crate::runtime::shard::Shard;
use crate::scram_store::ScramChange;
use indexmap::IndexMap;
use kafka_protocol::messages::alter_user_scram_credentials_response::*;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use security::sasl::{Mechanism, ScramCredential, SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS};
use security::scram_store::ScramCredentialSet;
use std::rc::Rc;

type Refusal = (ResponseError, &'static str);

const DUPLICATE: Refusal = (
    ResponseError::DuplicateResource,
    "A user credential cannot be altered twice in the same request",
);

/// `validateScramUsernameAndMechanism`.
fn name_and_mechanism(name: &str, mechanism: i8) -> Result<Mechanism, Refusal> {
    if name.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty",
        ));
    }
    Mechanism::from_scram_type(mechanism).ok_or((
        ResponseError::UnsupportedSaslMechanism,
        "Unknown SCRAM mechanism",
    ))
}

/// The request's verdicts: accepted changes (by user, in request order) and refusals.
fn plan(
    req: &AlterUserScramCredentialsRequest,
    set: &ScramCredentialSet,
) -> (
    IndexMap<String, ScramChange>,
    IndexMap<String, ScramChange>,
    IndexMap<String, Refusal>,
) {
    let mut deletions: IndexMap<String, ScramChange> = IndexMap::new();
    let mut upserts: IndexMap<String, ScramChange> = IndexMap::new();
    let mut errors: IndexMap<String, Refusal> = IndexMap::new();
    for d in &req.deletions {
        let user = d.name.to_string();
        if errors.contains_key(&user) {
            continue;
        }
        if deletions.shift_remove(&user).is_some() {
            errors.insert(user, DUPLICATE);
            continue;
        }
        let verdict = name_and_mechanism(&user, d.mechanism).and_then(|mechanism| {
            if set.get(&user).is_some_and(|m| m.contains_key(&mechanism)) {
                Ok(mechanism)
            } else {
                Err((
                    ResponseError::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist",
                ))
            }
        });
        match verdict {
            Ok(mechanism) => {
                deletions.insert(user.clone(), ScramChange::Delete { user, mechanism });
            }
            Err(e) => {
                errors.insert(user, e);
            }
        }
    }
    for u in &req.upsertions {
        let user = u.name.to_string();
        if errors.contains_key(&user) {
            continue;
        }
        if deletions.shift_remove(&user).is_some() || upserts.shift_remove(&user).is_some() {
            errors.insert(user, DUPLICATE);
            continue;
        }
        let verdict = name_and_mechanism(&user, u.mechanism).and_then(|mechanism| {
            if u.iterations < SCRAM_MIN_ITERATIONS as i32 {
                Err((ResponseError::UnacceptableCredential, "Too few iterations"))
            } else if u.iterations > SCRAM_MAX_ITERATIONS as i32 {
                Err((ResponseError::UnacceptableCredential, "Too many iterations"))
            } else {
                // `finishUpsertion`: StoredKey and ServerKey from the salted password as sent.
                ScramCredential::from_salted_password(
                    mechanism,
                    &u.salt,
                    &u.salted_password,
                    u.iterations as u32,
                )
                .map(|credential| (mechanism, credential))
                .map_err(|_| {
                    (
                        ResponseError::UnsupportedSaslMechanism,
                        "Unknown SCRAM mechanism",
                    )
                })
            }
        });
        match verdict {
            Ok((mechanism, credential)) => {
                upserts.insert(
                    user.clone(),
                    ScramChange::Upsert {
                        user,
                        mechanism,
                        credential,
                    },
                );
            }
            Err(e) => {
                errors.insert(user, e);
            }
        }
    }
    (deletions, upserts, errors)
}

pub(super) async fn handle(
    shard: &Rc<Shard>,
    caller: &crate::runtime::shard::Caller,
    req: AlterUserScramCredentialsRequest,
    _version: i16,
) -> AlterUserScramCredentialsResponse {
    // Kafka requires Alter on the cluster (`ControllerApis.handleAlterUserScramCredentials`),
    // answering every user named, once each and sorted, with CLUSTER_AUTHORIZATION_FAILED
    // otherwise (`AlterUserScramCredentialsRequest.getErrorResponse`).
    let broker = &shard.broker;
    if !super::auth::cluster(broker, caller, super::auth::Op::Alter) {
        let e = ResponseError::ClusterAuthorizationFailed;
        let users: std::collections::BTreeSet<String> = req
            .deletions
            .iter()
            .map(|d| d.name.to_string())
            .chain(req.upsertions.iter().map(|u| u.name.to_string()))
            .collect();
        return AlterUserScramCredentialsResponse::default().with_results(
            users
                .into_iter()
                .map(|user| {
                    AlterUserScramCredentialsResult::default()
                        .with_user(s(user))
                        .with_error_code(code(e))
                        .with_error_message(Some(s(e.to_string())))
                })
                .collect(),
        );
    }
    let (deletions, upserts, errors) = plan(&req, &broker.scram.snapshot());
    let changes: Vec<ScramChange> = deletions
        .values()
        .chain(upserts.values())
        .cloned()
        .collect();
    let mut write_error = None;
    if !changes.is_empty() {
        let b = broker.clone();
        let written = glommio::executor()
            .spawn_blocking(move || b.scram.apply(&changes))
            .await;
        if let Err(e) = written {
            tracing::error!(error = %e, "could not store SCRAM credentials");
            write_error = Some(e.to_string());
        } else {
            tracing::info!(
                deleted = deletions.len(),
                upserted = upserts.len(),
                "SCRAM credentials altered"
            );
        }
    }
    let ok = |user: &String| {
        let r = AlterUserScramCredentialsResult::default().with_user(s(user.clone()));
        match &write_error {
            None => r.with_error_code(0).with_error_message(None),
            Some(e) => r
                .with_error_code(code(ResponseError::UnknownServerError))
                .with_error_message(Some(s(e.clone()))),
        }
    };
    let mut results: Vec<AlterUserScramCredentialsResult> =
        deletions.keys().chain(upserts.keys()).map(ok).collect();
    results.extend(errors.into_iter().map(|(user, (e, msg))| {
        AlterUserScramCredentialsResult::default()
            .with_user(s(user))
            .with_error_code(code(e))
            .with_error_message(Some(s(msg)))
    }));
    AlterUserScramCredentialsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alter_user_scram_credentials_request::*;

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
        ScramCredentialUpsertion::default()
            .with_name(s(name))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(bytes::Bytes::from_static(b"salt"))
            .with_salted_password(bytes::Bytes::from(vec![1u8; 32]))
    }

    fn delete(name: &str, mechanism: i8) -> ScramCredentialDeletion {
        ScramCredentialDeletion::default()
            .with_name(s(name))
            .with_mechanism(mechanism)
    }

    #[test]
    fn verdicts_follow_scram_control_manager() {
        let mut set = ScramCredentialSet::new();
        let c = ScramCredential::from_password(Mechanism::ScramSha256, b"x", b"s", 4096).unwrap();
        set.entry("carol".into())
            .or_default()
            .insert(Mechanism::ScramSha256, c);
        let req = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![
                delete("carol", 1),
                delete("dave", 1),
                delete("carol", 2),
                delete("", 1),
            ])
            .with_upsertions(vec![
                upsert("alice", 1, 8192),
                upsert("bob", 1, 4095),
                upsert("erin", 2, 16385),
                upsert("frank", 3, 8192),
                upsert("alice", 2, 8192),
                upsert("gina", 2, 4096),
            ]);
        let (deletions, upserts, errors) = plan(&req, &set);
        assert!(deletions.is_empty(), "carol was named twice");
        assert_eq!(upserts.keys().collect::<Vec<_>>(), vec!["gina"]);
        let e = |u: &str| errors[u];
        assert_eq!(e("carol"), DUPLICATE);
        assert_eq!(e("alice"), DUPLICATE);
        assert_eq!(e("dave").0, ResponseError::ResourceNotFound);
        assert_eq!(
            e(""),
            (
                ResponseError::UnacceptableCredential,
                "Username must not be empty"
            )
        );
        assert_eq!(e("bob").1, "Too few iterations");
        assert_eq!(e("erin").1, "Too many iterations");
        assert_eq!(e("frank").0, ResponseError::UnsupportedSaslMechanism);
    }
}
