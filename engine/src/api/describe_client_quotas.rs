//! DescribeClientQuotas (48): which client quotas match a filter. Ringleader enforces no client
//! quotas and AlterClientQuotas (49) is not served, so no quota entry ever exists and the
//! truthful answer to a valid request is an empty entries list. `kafka-configs --describe
//! --entity-type users` sends this next to DescribeUserScramCredentials (50).
//!
//! The filter is still validated as Kafka's broker does before matching
//! (`metadata/src/main/java/org/apache/kafka/image/ClientQuotasImage.java`, `describe`), in its
//! order and with its messages: an empty entity type, a type named twice, a match string with
//! the wrong match type or an unknown match type are INVALID_REQUEST; an entity type other than
//! user, client-id or ip is UNSUPPORTED_VERSION; ip with user or client-id is INVALID_REQUEST.
//! An error answer has null entries (`DescribeClientQuotasRequest.getErrorResponse`).
//!
//! ACL: DESCRIBE_CONFIGS on the CLUSTER (`KafkaApis.handleDescribeClientQuotasRequest`),
//! CLUSTER_AUTHORIZATION_FAILED otherwise, checked before the filter.

use super::auth::{self, Op};
use super::common::{code, s};
use crate::broker::Broker;
use crate::runtime::shard::Caller;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
const IP: &str = "ip";

/// `DescribeClientQuotasRequest.MATCH_TYPE_*`.
const MATCH_TYPE_EXACT: i8 = 0;
const MATCH_TYPE_DEFAULT: i8 = 1;
const MATCH_TYPE_SPECIFIED: i8 = 2;

pub(super) fn handle(
    b: &Broker,
    caller: &Caller,
    req: DescribeClientQuotasRequest,
    _version: i16,
) -> DescribeClientQuotasResponse {
    if !auth::cluster(b, caller, Op::DescribeConfigs) {
        // `ApiError.fromThrowable` drops a message equal to the error's default one, as this
        // exception's is: a null message.
        return DescribeClientQuotasResponse::default()
            .with_error_code(code(ResponseError::ClusterAuthorizationFailed))
            .with_error_message(None)
            .with_entries(None);
    }
    match validate(&req) {
        // No quota entity exists, so nothing matches, whatever the filter and `strict`.
        Ok(()) => DescribeClientQuotasResponse::default()
            .with_error_code(0)
            .with_error_message(None)
            .with_entries(Some(Vec::new())),
        Err((e, message)) => error(e, message),
    }
}

fn error(e: ResponseError, message: String) -> DescribeClientQuotasResponse {
    DescribeClientQuotasResponse::default()
        .with_error_code(code(e))
        .with_error_message(Some(s(message)))
        .with_entries(None)
}

/// Kafka's checks on the filter (`ClientQuotasImage.describe`), first failure wins.
fn validate(req: &DescribeClientQuotasRequest) -> Result<(), (ResponseError, String)> {
    let invalid = |m: String| Err((ResponseError::InvalidRequest, m));
    let mut seen: Vec<&str> = Vec::with_capacity(req.components.len());
    for c in &req.components {
        let entity_type = c.entity_type.as_str();
        if entity_type.is_empty() {
            return invalid("Invalid empty entity type.".into());
        }
        if seen.contains(&entity_type) {
            return invalid(format!(
                "Entity type {entity_type} cannot appear more than once in the filter."
            ));
        }
        if ![IP, USER, CLIENT_ID].contains(&entity_type) {
            return Err((
                ResponseError::UnsupportedVersion,
                format!("Unsupported entity type {entity_type}"),
            ));
        }
        match c.match_type {
            MATCH_TYPE_EXACT if c._match.is_none() => {
                return invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                )
            }
            MATCH_TYPE_DEFAULT if c._match.is_some() => {
                return invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                        .into(),
                )
            }
            MATCH_TYPE_SPECIFIED if c._match.is_some() => {
                return invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .into(),
                )
            }
            MATCH_TYPE_EXACT | MATCH_TYPE_DEFAULT | MATCH_TYPE_SPECIFIED => {}
            other => return invalid(format!("Unknown match type {other}")),
        }
        seen.push(entity_type);
    }
    if seen.contains(&IP) && (seen.contains(&USER) || seen.contains(&CLIENT_ID)) {
        return invalid(
            "Invalid entity filter component combination. IP filter component should not be \
             used with user or clientId filter component."
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use describe_client_quotas_request::ComponentData;

    fn comp(entity_type: &str, match_type: i8, m: Option<&str>) -> ComponentData {
        ComponentData::default()
            .with_entity_type(s(entity_type))
            .with_match_type(match_type)
            .with_match(m.map(s))
    }

    fn check(components: Vec<ComponentData>) -> Result<(), (ResponseError, String)> {
        validate(&DescribeClientQuotasRequest::default().with_components(components))
    }

    fn invalid(m: &str) -> Result<(), (ResponseError, String)> {
        Err((ResponseError::InvalidRequest, m.to_string()))
    }

    #[test]
    fn accepts_what_kafka_configs_sends() {
        // --entity-type users (every user), --entity-name alice, --entity-default.
        assert_eq!(check(vec![comp(USER, 2, None)]), Ok(()));
        assert_eq!(check(vec![comp(USER, 0, Some("alice"))]), Ok(()));
        assert_eq!(check(vec![comp(USER, 1, None)]), Ok(()));
        assert_eq!(
            check(vec![comp(USER, 0, Some("alice")), comp(CLIENT_ID, 2, None)]),
            Ok(())
        );
        assert_eq!(check(vec![comp(IP, 0, Some("10.0.0.1"))]), Ok(()));
        // No component: every entity.
        assert_eq!(check(vec![]), Ok(()));
    }

    #[test]
    fn rejects_as_kafka_does() {
        assert_eq!(
            check(vec![comp("", 2, None)]),
            invalid("Invalid empty entity type.")
        );
        assert_eq!(
            check(vec![comp(USER, 2, None), comp(USER, 0, Some("a"))]),
            invalid("Entity type user cannot appear more than once in the filter.")
        );
        assert_eq!(
            check(vec![comp("topic", 2, None)]),
            Err((
                ResponseError::UnsupportedVersion,
                "Unsupported entity type topic".to_string()
            ))
        );
        assert_eq!(
            check(vec![comp(USER, 0, None)]),
            invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
        );
        assert_eq!(
            check(vec![comp(USER, 1, Some("a"))]),
            invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
        );
        assert_eq!(
            check(vec![comp(CLIENT_ID, 2, Some("a"))]),
            invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
        );
        assert_eq!(
            check(vec![comp(USER, 7, None)]),
            invalid("Unknown match type 7")
        );
        assert_eq!(
            check(vec![comp(IP, 2, None), comp(CLIENT_ID, 2, None)]),
            invalid(
                "Invalid entity filter component combination. IP filter component should not \
                 be used with user or clientId filter component."
            )
        );
    }

    #[test]
    fn first_failure_wins_in_component_order() {
        // The duplicate is found before the unknown type of a later component, and an unknown
        // type before its match type is looked at.
        assert_eq!(
            check(vec![
                comp(USER, 2, None),
                comp(USER, 9, None),
                comp("x", 2, None)
            ]),
            invalid("Entity type user cannot appear more than once in the filter.")
        );
        assert_eq!(
            check(vec![comp("x", 9, None)]),
            Err((
                ResponseError::UnsupportedVersion,
                "Unsupported entity type x".to_string()
            ))
        );
    }
}
