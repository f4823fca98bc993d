//! OAUTHBEARER (RFC 7628, KIP-255) as Kafka's server runs it:
//! `clients/src/main/java/org/apache/kafka/common/security/oauthbearer/internals/OAuthBearerSaslServer.java`
//! and `OAuthBearerClientInitialResponse.java` for the exchange, and, for the tokens, the
//! unsecured validator (`oauthbearer/internals/unsecured/OAuthBearerUnsecuredValidatorCallbackHandler.java`,
//! `OAuthBearerUnsecuredJws.java`, `OAuthBearerValidationUtils.java`).
//!
//! Exchange: the client sends `n,[a=authzid],\x01auth=Bearer <token>\x01[key=value\x01]*\x01`.
//! A good token ends the exchange; a bad one is answered, as RFC 7628 §3.2.2 says, with a JSON
//! error as a *challenge* (`{"status":"invalid_token"}`), to which the client answers `\x01`,
//! and only then does the server fail, with that JSON as the message (Kafka does exactly this).
//!
//! # Validator hook
//! Which tokens are good is a [`TokenValidator`]'s decision. The only built-in one is Kafka's
//! *unsecured* validator ([`UnsecuredTokenValidator`]): it accepts unsigned JWS (`"alg":"none"`)
//! and is for development and tests, as in Kafka. A deployment with a real identity provider
//! implements [`TokenValidator`] (check the JWS signature against the provider's keys, then the
//! same claims) and puts it in [`OAuthConfig::validator`]; [`super::SaslServer`] calls whatever
//! is there, and the unsecured validator when nothing is.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::alphabet::URL_SAFE;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use serde_json::Value;

use super::{Mechanism, SaslFailure, SaslStep};
use crate::Principal;

/// JAAS option names of Kafka's unsecured validator
/// (`OAuthBearerUnsecuredValidatorCallbackHandler`).
pub const OAUTH_PRINCIPAL_CLAIM_NAME_OPTION: &str = "unsecuredValidatorPrincipalClaimName";
pub const OAUTH_SCOPE_CLAIM_NAME_OPTION: &str = "unsecuredValidatorScopeClaimName";
pub const OAUTH_REQUIRED_SCOPE_OPTION: &str = "unsecuredValidatorRequiredScope";
pub const OAUTH_ALLOWABLE_CLOCK_SKEW_MS_OPTION: &str = "unsecuredValidatorAllowableClockSkewMs";

/// A token a validator accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedToken {
    /// The principal's name (`OAuthBearerToken.principalName`): the connection is `User:<it>`.
    pub principal_name: String,
    /// `exp` in milliseconds (`OAuthBearerToken.lifetimeMs`).
    pub lifetime_ms: i64,
    pub scope: Vec<String>,
}

/// Why a token was refused: what the server's RFC 7628 error JSON says, and (for logs only) why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenError {
    /// `invalid_token` or `insufficient_scope` (RFC 6750 §3.1).
    pub status: String,
    pub scope: Option<String>,
    pub openid_configuration: Option<String>,
    /// Kafka's validation message (logged, never sent: Kafka sends only the JSON).
    pub reason: String,
}

impl TokenError {
    fn invalid(reason: impl Into<String>) -> Self {
        Self {
            status: "invalid_token".into(),
            scope: None,
            openid_configuration: None,
            reason: reason.into(),
        }
    }

    /// `OAuthBearerSaslServer.jsonErrorResponse`, byte for byte.
    pub fn json(&self) -> String {
        let mut s = format!("{{\"status\":\"{}\"", self.status);
        if let Some(scope) = &self.scope {
            s.push_str(&format!(", \"scope\":\"{scope}\""));
        }
        if let Some(oidc) = &self.openid_configuration {
            s.push_str(&format!(", \"openid-configuration\":\"{oidc}\""));
        }
        s.push('}');
        s
    }
}

/// Decides whether a bearer token is good (see the module's "Validator hook").
pub trait TokenValidator: Send + Sync {
    fn validate(
        &self,
        token: &str,
        now_ms: i64,
        config: &OAuthConfig,
    ) -> Result<ValidatedToken, TokenError>;
}

/// OAUTHBEARER settings: the unsecured validator's JAAS options, and the validator to use.
#[derive(Clone)]
pub struct OAuthConfig {
    /// Claim naming the principal (`unsecuredValidatorPrincipalClaimName`, default `sub`).
    pub principal_claim_name: String,
    /// Claim holding the scope (`unsecuredValidatorScopeClaimName`, default `scope`).
    pub scope_claim_name: String,
    /// Scopes every token must have (`unsecuredValidatorRequiredScope`, space-separated).
    pub required_scope: Vec<String>,
    /// `unsecuredValidatorAllowableClockSkewMs`, default 0.
    pub allowable_clock_skew_ms: i64,
    /// The validator; `None` means Kafka's unsecured one ([`UnsecuredTokenValidator`]).
    pub validator: Option<Arc<dyn TokenValidator>>,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("principal_claim_name", &self.principal_claim_name)
            .field("scope_claim_name", &self.scope_claim_name)
            .field("required_scope", &self.required_scope)
            .field("allowable_clock_skew_ms", &self.allowable_clock_skew_ms)
            .field("custom_validator", &self.validator.is_some())
            .finish()
    }
}

impl Default for OAuthConfig {
    fn default() -> Self {
        Self {
            principal_claim_name: "sub".into(),
            scope_claim_name: "scope".into(),
            required_scope: Vec::new(),
            allowable_clock_skew_ms: 0,
            validator: None,
        }
    }
}

impl OAuthConfig {
    /// The unsecured validator's options from a JAAS entry's options, with Kafka's defaults for
    /// blank ones; a clock skew that is not a non-negative int is refused, as Kafka's
    /// `OAuthBearerConfigException` does.
    pub fn from_jaas_options(options: &BTreeMap<String, String>) -> Result<Self, String> {
        let opt = |k: &str| options.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let mut c = Self::default();
        if let Some(v) = opt(OAUTH_PRINCIPAL_CLAIM_NAME_OPTION) {
            c.principal_claim_name = v.to_string();
        }
        if let Some(v) = opt(OAUTH_SCOPE_CLAIM_NAME_OPTION) {
            c.scope_claim_name = v.to_string();
        }
        if let Some(v) = opt(OAUTH_REQUIRED_SCOPE_OPTION) {
            // OAuthBearerScopeUtils.parseScope: split on single spaces, skip empty items.
            c.required_scope = v
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
        }
        if let Some(v) = opt(OAUTH_ALLOWABLE_CLOCK_SKEW_MS_OPTION) {
            let skew: i32 = v
                .parse()
                .map_err(|_| format!("{OAUTH_ALLOWABLE_CLOCK_SKEW_MS_OPTION}: not an int: {v}"))?;
            if skew < 0 {
                return Err(format!(
                    "Allowable clock skew millis must not be negative: {v}"
                ));
            }
            c.allowable_clock_skew_ms = i64::from(skew);
        }
        Ok(c)
    }
}

/// Kafka's unsecured validator: unsigned JWS, claims checked as
/// `OAuthBearerUnsecuredValidatorCallbackHandler.handleCallback` does.
#[derive(Debug, Clone, Copy, Default)]
pub struct UnsecuredTokenValidator;

fn b64url() -> GeneralPurpose {
    // java.util.Base64.getUrlDecoder accepts padded and unpadded input alike.
    GeneralPurpose::new(
        &URL_SAFE,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    )
}

fn json_object(part: &str) -> Result<serde_json::Map<String, Value>, TokenError> {
    let bytes = b64url()
        .decode(part)
        .map_err(|_| TokenError::invalid("malformed Base64 URL encoded value"))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(TokenError::invalid("malformed JSON")),
    }
}

fn seconds_to_ms(v: f64) -> i64 {
    // Math.round(seconds * 1000); `as` saturates, so absurd values cannot overflow.
    (v * 1000.0).round() as i64
}

impl TokenValidator for UnsecuredTokenValidator {
    fn validate(
        &self,
        token: &str,
        now_ms: i64,
        config: &OAuthConfig,
    ) -> Result<ValidatedToken, TokenError> {
        if token.contains("..") {
            return Err(TokenError::invalid(
                "Malformed compact serialization contains '..'",
            ));
        }
        let parts: Vec<&str> = token.split('.').collect();
        let [header, payload, signature] = parts.as_slice() else {
            return Err(TokenError::invalid(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values",
            ));
        };
        let header = json_object(header)?;
        let claims = json_object(payload)?;
        if header.get("alg").and_then(Value::as_str) != Some("none") {
            return Err(TokenError::invalid(
                "Unsecured JWS must have 'none' for an algorithm",
            ));
        }
        if !signature.is_empty() {
            return Err(TokenError::invalid(
                "Unsecured JWS must not contain a digital signature",
            ));
        }
        let number = |name: &str| -> Result<Option<f64>, TokenError> {
            match claims.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Number(n)) => Ok(n.as_f64()),
                Some(_) => Err(TokenError::invalid(format!(
                    "The '{name}' claim was not of type Number"
                ))),
            }
        };
        let principal_name = match claims.get(&config.principal_claim_name) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Value::String(_)) | None | Some(Value::Null) => {
                return Err(TokenError::invalid(format!(
                    "No principal name in JWT claim: {}",
                    config.principal_claim_name
                )))
            }
            Some(_) => {
                return Err(TokenError::invalid(format!(
                    "The {} claim had the incorrect type: String",
                    config.principal_claim_name
                )))
            }
        };
        let exp_ms = seconds_to_ms(
            number("exp")?.ok_or_else(|| TokenError::invalid("No expiration time in JWT"))?,
        );
        let iat_ms = number("iat")?.map(seconds_to_ms);
        let scope: Vec<String> = match claims.get(&config.scope_claim_name) {
            None | Some(Value::Null) => Vec::new(),
            // A string scope claim is one scope item, trimmed (`calculateScope`), not split.
            Some(Value::String(s)) if s.trim().is_empty() => Vec::new(),
            Some(Value::String(s)) => vec![s.trim().to_string()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
            Some(_) => {
                return Err(TokenError::invalid(format!(
                    "The '{}' claim was not of type List",
                    config.scope_claim_name
                )))
            }
        };
        let skew = config.allowable_clock_skew_ms;
        if let Some(iat) = iat_ms {
            if iat > now_ms.saturating_add(skew) {
                return Err(TokenError::invalid(
                    "The Issued At value was after the indicated time plus allowable clock skew",
                ));
            }
        }
        if now_ms.saturating_sub(skew) >= exp_ms {
            return Err(TokenError::invalid(
                "The indicated time minus allowable clock skew was on or after the Expiration Time value",
            ));
        }
        if iat_ms.is_some_and(|iat| exp_ms <= iat) {
            return Err(TokenError::invalid(
                "The Expiration Time time was not after the Issued At time",
            ));
        }
        if let Some(missing) = config.required_scope.iter().find(|r| !scope.contains(r)) {
            return Err(TokenError {
                status: "insufficient_scope".into(),
                // Kafka puts the whole required list, as Java prints a List: "[a, b]".
                scope: Some(format!("[{}]", config.required_scope.join(", "))),
                openid_configuration: None,
                reason: format!("The provided scope was missing a required scope ({missing})"),
            });
        }
        Ok(ValidatedToken {
            principal_name,
            lifetime_ms: exp_ms,
            scope,
        })
    }
}

pub(super) enum OAuthState {
    Initial,
    /// An error challenge was sent; the client's `\x01` now ends the exchange with it.
    ErrorSent(String),
}

struct InitialResponse<'a> {
    authzid: Option<&'a str>,
    token: &'a str,
}

fn is_sasl_name(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'=' => match b.get(i + 1..i + 3) {
                Some(b"2C") | Some(b"3D") => i += 3,
                _ => return false,
            },
            b',' | 0 | 0x80.. => return false,
            _ => i += 1,
        }
    }
    !s.is_empty()
}

/// `OAuthBearerClientInitialResponse(byte[])`: the whole message must match
/// `n,(a=SASLNAME)?,\x01(KEY=VALUE\x01)*\x01`, `auth` must be `Bearer <b64token>`.
fn parse_initial(msg: &str) -> Option<InitialResponse<'_>> {
    let rest = msg.strip_prefix("n,")?;
    let (authz, rest) = rest.split_once(',')?;
    let authzid = match authz {
        "" => None,
        a => Some(a.strip_prefix("a=").filter(|n| is_sasl_name(n))?),
    };
    let kvpairs = rest.strip_prefix('\x01')?.strip_suffix('\x01')?;
    let mut auth = None;
    if !kvpairs.is_empty() {
        for pair in kvpairs.strip_suffix('\x01')?.split('\x01') {
            let (k, v) = pair.split_once('=')?;
            let key_ok = !k.is_empty() && k.bytes().all(|c| c.is_ascii_alphabetic());
            let value_ok = !v.is_empty()
                && v.bytes().all(|c| {
                    (0x21..=0x7e).contains(&c) || matches!(c, b' ' | b'\t' | b'\r' | b'\n')
                });
            if !key_ok || !value_ok {
                return None;
            }
            if k == "auth" {
                auth = Some(v);
            }
        }
    }
    // AUTH_PATTERN: scheme, one or more spaces, token68.
    let (scheme, token) = auth?.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    let token_ok = {
        let body = token.trim_end_matches('=');
        !body.is_empty()
            && body
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"-_~+/.".contains(&c))
    };
    if !scheme.eq_ignore_ascii_case("bearer") || !token_ok {
        return None;
    }
    Some(InitialResponse { authzid, token })
}

impl OAuthState {
    pub(super) fn step(self, token: &[u8], now_ms: i64, config: &OAuthConfig) -> (Self, SaslStep) {
        if let OAuthState::ErrorSent(json) = &self {
            if token == [0x01] {
                return (
                    OAuthState::Initial,
                    SaslStep::Failure(SaslFailure::new(json.clone())),
                );
            }
        }
        // Kafka forgets the error and reads any other token as a new initial response.
        let hidden = || SaslStep::Failure(SaslFailure::hidden(Mechanism::OAuthBearer));
        let Some(initial) = std::str::from_utf8(token).ok().and_then(parse_initial) else {
            return (OAuthState::Initial, hidden());
        };
        let unsecured = UnsecuredTokenValidator;
        let validator: &dyn TokenValidator = match &config.validator {
            Some(v) => v.as_ref(),
            None => &unsecured,
        };
        match validator.validate(initial.token, now_ms, config) {
            Err(e) => {
                let json = e.json();
                (
                    OAuthState::ErrorSent(json.clone()),
                    SaslStep::Challenge(json.into_bytes()),
                )
            }
            Ok(t) => {
                if let Some(a) = initial.authzid.filter(|a| *a != t.principal_name) {
                    return (
                        OAuthState::Initial,
                        SaslStep::Failure(SaslFailure::new(format!(
                            "Authentication failed: Client requested an authorization id ({a}) that is different from the token's principal name ({})",
                            t.principal_name
                        ))),
                    );
                }
                (
                    OAuthState::Initial,
                    SaslStep::Success {
                        principal: Principal::user(t.principal_name),
                        token: Vec::new(),
                        credential_expires_ms: Some(t.lifetime_ms),
                    },
                )
            }
        }
    }
}
