//! Kafka's principal: a type and a name, written `Type:name` (`KafkaPrincipal.toString`).
//!
//! Kafka's default principal builder (`DefaultKafkaPrincipalBuilder`) gives every connection the
//! type `User`: the SASL authorization id, the TLS certificate's distinguished name, or
//! `ANONYMOUS` on a PLAINTEXT listener (and on TLS without a client certificate).

use std::fmt;

/// One authenticated (or anonymous) identity, as ACLs and `super.users` name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    /// `User` for every principal Kafka's default builder makes; ACLs may name others.
    pub principal_type: String,
    pub name: String,
}

/// `KafkaPrincipal.USER_TYPE`.
pub const USER_TYPE: &str = "User";

/// The name of the principal of an unauthenticated connection (`KafkaPrincipal.ANONYMOUS`).
pub const ANONYMOUS_NAME: &str = "ANONYMOUS";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad principal \"{text}\": expected Type:name, e.g. User:alice")]
pub struct PrincipalError {
    pub text: String,
}

impl Principal {
    /// `User:<name>`.
    pub fn user(name: impl Into<String>) -> Self {
        Self {
            principal_type: USER_TYPE.to_string(),
            name: name.into(),
        }
    }

    /// `User:ANONYMOUS`, the principal of a connection that did not authenticate.
    pub fn anonymous() -> Self {
        Self::user(ANONYMOUS_NAME)
    }

    pub fn is_anonymous(&self) -> bool {
        self.principal_type == USER_TYPE && self.name == ANONYMOUS_NAME
    }

    /// Parse `Type:name` (`SecurityUtils.parseKafkaPrincipal`): the type is what precedes the
    /// first ':', the name everything after it (names may contain ':', e.g. a DN or `*`).
    pub fn parse(text: &str) -> Result<Self, PrincipalError> {
        match text.split_once(':') {
            Some((t, n)) if !t.is_empty() && !n.is_empty() => Ok(Self {
                principal_type: t.to_string(),
                name: n.to_string(),
            }),
            _ => Err(PrincipalError {
                text: text.to_string(),
            }),
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_kafka_principals() {
        let p = Principal::parse("User:CN=alice,O=ringleader").unwrap();
        assert_eq!(p.principal_type, "User");
        assert_eq!(p.name, "CN=alice,O=ringleader");
        assert_eq!(p.to_string(), "User:CN=alice,O=ringleader");
        assert_eq!(Principal::parse("User:a:b").unwrap().name, "a:b");
        assert!(Principal::anonymous().is_anonymous());
        assert!(!Principal::user("alice").is_anonymous());
        for bad in ["", "User", "User:", ":alice"] {
            assert!(Principal::parse(bad).is_err(), "{bad}");
        }
    }
}
