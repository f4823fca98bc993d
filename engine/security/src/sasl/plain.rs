//! PLAIN (RFC 4616) as Kafka's server runs it:
//! `clients/src/main/java/org/apache/kafka/common/security/plain/internals/PlainSaslServer.java`,
//! checking passwords against the JAAS `user_NAME` options as `PlainServerCallbackHandler` does.
//! Every PLAIN failure is a `SaslAuthenticationException` in Kafka, so its message is sent as is.

use subtle::ConstantTimeEq;

use super::{SaslConfig, SaslFailure, SaslStep};
use crate::Principal;

pub(super) fn step(token: &[u8], config: &SaslConfig) -> SaslStep {
    let fail = |m: String| SaslStep::Failure(SaslFailure::new(m));
    // Kafka decodes the message as UTF-8 (malformed bytes become U+FFFD) before splitting.
    let message = String::from_utf8_lossy(token);
    // `extractTokens`: at most 4 NUL-separated pieces are looked at; exactly 3 are required.
    let tokens: Vec<&str> = message.splitn(4, '\0').collect();
    let [authzid, username, password] = tokens.as_slice() else {
        return fail(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            tokens.len()
        ));
    };
    if username.is_empty() {
        return fail("Authentication failed: username not specified".into());
    }
    if password.is_empty() {
        return fail("Authentication failed: password not specified".into());
    }
    // PlainServerCallbackHandler.authenticate: a user without a `user_NAME` option fails like a
    // wrong password. The comparison is constant-time so timing does not leak the password.
    let authenticated = config
        .plain_users
        .get(*username)
        .is_some_and(|expected| bool::from(expected.as_bytes().ct_eq(password.as_bytes())));
    if !authenticated {
        return fail("Authentication failed: Invalid username or password".into());
    }
    if !authzid.is_empty() && authzid != username {
        return fail(
            "Authentication failed: Client requested an authorization id that is different from username"
                .into(),
        );
    }
    SaslStep::Success {
        principal: Principal::user(*username),
        token: Vec::new(),
        credential_expires_ms: None,
    }
}
