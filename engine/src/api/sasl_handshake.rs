//! SaslHandshake outside authentication: on a listener without SASL, or on a connection that is
//! already authenticated (and not re-authenticating, which the connection's authenticator in
//! `runtime::conn` handles). Kafka's `KafkaApis.handleSaslHandshakeRequest` answers
//! ILLEGAL_SASL_STATE there (`core/src/main/scala/kafka/server/KafkaApis.scala`).

use super::common::code;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

pub(super) fn handle(_req: SaslHandshakeRequest) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(code(ResponseError::IllegalSaslState))
}
