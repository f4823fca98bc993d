//! SaslAuthenticate outside authentication: on a listener without SASL, or after the connection
//! authenticated. Kafka's `KafkaApis.handleSaslAuthenticateRequest` answers ILLEGAL_SASL_STATE
//! with this message (`core/src/main/scala/kafka/server/KafkaApis.scala`); the tokens of a real
//! authentication never reach the API layer (`runtime::conn` consumes them).

use super::common::{code, s};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

pub(super) fn handle(_req: SaslAuthenticateRequest) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(code(ResponseError::IllegalSaslState))
        .with_error_message(Some(s(
            "SaslAuthenticate request received after successful authentication".to_string(),
        )))
}
