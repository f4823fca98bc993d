//! SASL server mechanisms, as Kafka's broker runs them behind `SaslAuthenticate`.
//!
//! A [`SaslServer`] is one connection's exchange with one mechanism: the broker feeds it each
//! `SaslAuthenticate` token and sends back what [`SaslServer::step`] answers. It is pure: the
//! server nonce is drawn by the caller, the wall clock is passed in, and the credentials are read
//! through [`ScramCredentials`] (the broker's SCRAM store) and [`SaslConfig`] (its JAAS options).
//!
//! Mechanisms (Kafka's server classes in brackets, under
//! `clients/src/main/java/org/apache/kafka/common/security/`):
//! - PLAIN, RFC 4616 (`plain/internals/PlainSaslServer.java`), users from the JAAS
//!   `user_NAME="password"` options (`plain/internals/PlainServerCallbackHandler.java`).
//! - SCRAM-SHA-256 / SCRAM-SHA-512, RFC 5802 and 7677 (`scram/internals/ScramSaslServer.java`).
//! - OAUTHBEARER, RFC 7628 and KIP-255 (`oauthbearer/internals/OAuthBearerSaslServer.java`),
//!   tokens checked by a [`TokenValidator`]; the built-in one is Kafka's unsecured validator.
//!
//! Failure messages: Kafka sends the message of a `SaslAuthenticationException` as it is, and
//! replaces that of any other `SaslException` by "Authentication failed during authentication
//! due to invalid credentials with SASL mechanism M" so as not to tell whether a user exists
//! (`authenticator/SaslServerAuthenticator.java`). [`SaslFailure::message`] is already the text
//! Kafka would send; no message ever carries a password, proof or token.

mod oauth;
mod plain;
pub(crate) mod scram;

use std::collections::HashMap;

use base64::Engine;

use crate::Principal;

pub use oauth::{
    OAuthConfig, TokenError, TokenValidator, UnsecuredTokenValidator, ValidatedToken,
    OAUTH_ALLOWABLE_CLOCK_SKEW_MS_OPTION, OAUTH_PRINCIPAL_CLAIM_NAME_OPTION,
    OAUTH_REQUIRED_SCOPE_OPTION, OAUTH_SCOPE_CLAIM_NAME_OPTION,
};
pub use scram::{
    salted_password, ScramCredential, ScramError, SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS,
};

/// A SASL mechanism the broker can serve (Kafka's names, matched exactly).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl Mechanism {
    pub const ALL: [Mechanism; 4] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
        Mechanism::OAuthBearer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// Exact, case-sensitive match, as Kafka compares `sasl.enabled.mechanisms` entries.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    pub fn is_scram(self) -> bool {
        matches!(self, Mechanism::ScramSha256 | Mechanism::ScramSha512)
    }

    /// The wire type of a SCRAM mechanism in Describe/AlterUserScramCredentials
    /// (`ScramMechanism.type()`: 1 = SHA-256, 2 = SHA-512); `None` for the others.
    pub fn scram_type(self) -> Option<i8> {
        match self {
            Mechanism::ScramSha256 => Some(1),
            Mechanism::ScramSha512 => Some(2),
            _ => None,
        }
    }

    /// Inverse of [`Mechanism::scram_type`].
    pub fn from_scram_type(t: i8) -> Option<Self> {
        match t {
            1 => Some(Mechanism::ScramSha256),
            2 => Some(Mechanism::ScramSha512),
            _ => None,
        }
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Read-only settings the broker builds from its config (the JAAS options of each mechanism).
#[derive(Clone, Debug, Default)]
pub struct SaslConfig {
    /// PLAIN's users: name → password (`user_NAME="password"` JAAS options).
    pub plain_users: HashMap<String, String>,
    pub oauth: OAuthConfig,
}

/// Where the SCRAM mechanisms read a user's credential (the broker's SCRAM store).
pub trait ScramCredentials {
    fn scram_credential(&self, mechanism: Mechanism, user: &str) -> Option<ScramCredential>;
}

/// No SCRAM user at all (every SCRAM authentication fails as for an unknown user).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoScramCredentials;

impl ScramCredentials for NoScramCredentials {
    fn scram_credential(&self, _: Mechanism, _: &str) -> Option<ScramCredential> {
        None
    }
}

/// What to answer a `SaslAuthenticate` token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslStep {
    /// Send this token; the client answers with another round.
    Challenge(Vec<u8>),
    /// Authenticated. `token` is the last server message (SCRAM's server-final, else empty);
    /// `credential_expires_ms` is OAUTHBEARER's token expiry (`exp` × 1000), which caps the
    /// session lifetime Kafka grants (`connections.max.reauth.ms`, KIP-368).
    Success {
        principal: Principal,
        token: Vec<u8>,
        credential_expires_ms: Option<i64>,
    },
    /// Authentication failed: answer SASL_AUTHENTICATION_FAILED with this message and close.
    Failure(SaslFailure),
}

/// The `error_message` of a failed `SaslAuthenticate`; never contains a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslFailure {
    pub message: String,
}

impl SaslFailure {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// Kafka's generic message for a failure whose detail it hides (`SaslServerAuthenticator`).
    fn hidden(mechanism: Mechanism) -> Self {
        Self::new(format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
            mechanism.name()
        ))
    }

    /// The same message as Kafka words it during a re-authentication (KIP-368): its generic
    /// message says "reauthentication" there (`ReauthInfo.authenticationOrReauthenticationText`).
    pub fn reauthentication_message(&self) -> String {
        self.message.replacen(
            "failed during authentication due to",
            "failed during reauthentication due to",
            1,
        )
    }
}

enum State {
    Plain,
    Scram(scram::ScramState),
    OAuth(oauth::OAuthState),
    Done,
}

/// One connection's SASL exchange with one mechanism.
pub struct SaslServer {
    mechanism: Mechanism,
    server_nonce: [u8; 24],
    state: State,
}

impl std::fmt::Debug for SaslServer {
    // Hand-written so that no nonce or credential is ever printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslServer")
            .field("mechanism", &self.mechanism)
            .field("done", &matches!(self.state, State::Done))
            .finish()
    }
}

impl SaslServer {
    /// `server_nonce`: random bytes the broker draws (SCRAM's server nonce is derived from them).
    pub fn new(mechanism: Mechanism, server_nonce: [u8; 24]) -> Self {
        let state = match mechanism {
            Mechanism::Plain => State::Plain,
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
                State::Scram(scram::ScramState::ClientFirst)
            }
            Mechanism::OAuthBearer => State::OAuth(oauth::OAuthState::Initial),
        };
        Self {
            mechanism,
            server_nonce,
            state,
        }
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// True once the exchange ended (successfully or not): every later step fails.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// One SaslAuthenticate token in, what to answer out. `now_ms`: wall clock (token expiry).
    pub fn step(
        &mut self,
        token: &[u8],
        now_ms: i64,
        config: &SaslConfig,
        scram: &dyn ScramCredentials,
    ) -> SaslStep {
        let state = std::mem::replace(&mut self.state, State::Done);
        let (next, step) = match state {
            State::Done => (
                State::Done,
                // Kafka: IllegalSaslStateException("Unexpected challenge in Sasl server state ..")
                // for SCRAM; the others fail their parse. Either way the exchange is over.
                SaslStep::Failure(SaslFailure::new(format!(
                    "Unexpected SaslAuthenticate token: the SASL/{} exchange is already complete",
                    self.mechanism.name()
                ))),
            ),
            State::Plain => (State::Done, plain::step(token, config)),
            State::Scram(s) => {
                // Base64 of the broker's random bytes: printable, no ',' (RFC 5802's nonce).
                let nonce = base64::engine::general_purpose::STANDARD.encode(self.server_nonce);
                let (next, step) = s.step(self.mechanism, &nonce, token, scram);
                (State::Scram(next), step)
            }
            State::OAuth(s) => {
                let (next, step) = s.step(token, now_ms, &config.oauth);
                (State::OAuth(next), step)
            }
        };
        self.state = match step {
            SaslStep::Challenge(_) => next,
            _ => State::Done,
        };
        step
    }
}

#[cfg(test)]
mod tests;
