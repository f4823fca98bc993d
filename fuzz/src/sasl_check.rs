//! The checks of the SASL fuzz targets (`sasl_plain`, `scram_messages`, `oauth_bearer`,
//! `jaas_config`). Also included with `#[path]` by `engine/security/tests/fuzz_seeds.rs`, which
//! runs them on the committed seeds, so the checks stay compiled and true in the main workspace.
//!
//! Beyond "never panics": a success happens only for the right secret, and no failure message
//! carries the secret the input offered.

use security::sasl::{
    Mechanism, SaslConfig, SaslServer, SaslStep, ScramCredential, ScramCredentials,
};

/// `now_ms` of every target: tokens in the seeds expire long after it.
pub const NOW_MS: i64 = 1_700_000_000_000;
/// The only SCRAM user and PLAIN user, and their password.
pub const USER: &str = "user";
pub const PASSWORD: &str = "pencil";
/// The server nonce bytes of `scram_messages` (its base64 is 32 'A's), fixed so that a seed
/// can carry a correct client-final.
pub const SERVER_NONCE: [u8; 24] = [0; 24];

pub struct FixedStore(pub Mechanism, pub ScramCredential);

impl ScramCredentials for FixedStore {
    fn scram_credential(&self, m: Mechanism, user: &str) -> Option<ScramCredential> {
        (m == self.0 && user == USER).then(|| self.1.clone())
    }
}

/// RFC 7677's credential (user / pencil, its salt, 4096 iterations) for `mechanism`.
pub fn store(mechanism: Mechanism) -> FixedStore {
    let salt = b"[m\x99h\x9d\x125\x8e\xec\xa0K\x14\x126\xfa\x81"; // base64 W22ZaJ0SNY7soEsUEjb6gQ==
    let cred = ScramCredential::from_password(mechanism, PASSWORD.as_bytes(), salt, 4096)
        .expect("valid SCRAM parameters");
    FixedStore(mechanism, cred)
}

pub fn config() -> SaslConfig {
    let mut c = SaslConfig::default();
    c.plain_users.insert(USER.into(), PASSWORD.into());
    c
}

fn assert_no_secret(step: &SaslStep, secret: &[u8]) {
    if let SaslStep::Failure(f) = step {
        if secret.len() >= 4 {
            assert!(
                !f.message
                    .as_bytes()
                    .windows(secret.len())
                    .any(|w| w == secret),
                "failure message leaks the offered secret: {}",
                f.message
            );
        }
    }
}

/// `sasl_plain`: one PLAIN token; success only for user/pencil; nothing after the end.
pub fn check_plain(data: &[u8]) {
    let config = config();
    let store = store(Mechanism::ScramSha256);
    let mut s = SaslServer::new(Mechanism::Plain, [0; 24]);
    let step = s.step(data, NOW_MS, &config, &store);
    let parts: Vec<&[u8]> = data.splitn(3, |b| *b == 0).collect();
    if let Some(pw) = parts.get(2) {
        assert_no_secret(&step, pw);
    }
    if let SaslStep::Success { principal, .. } = &step {
        assert_eq!(principal.name, USER);
        assert_eq!(parts.get(2), Some(&PASSWORD.as_bytes()));
    }
    assert!(
        !matches!(step, SaslStep::Challenge(_)),
        "PLAIN has one round"
    );
    assert!(matches!(
        s.step(data, NOW_MS, &config, &store),
        SaslStep::Failure(_)
    ));
}

/// `scram_messages`: byte 0 picks the mechanism (even: SHA-256), then client-first and
/// client-final separated by the first NUL. A success must carry `v=` and user `user`.
pub fn check_scram(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mech = if sel % 2 == 0 {
        Mechanism::ScramSha256
    } else {
        Mechanism::ScramSha512
    };
    let store = store(mech);
    let config = config();
    let (first, fin) = match rest.iter().position(|b| *b == 0) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let mut s = SaslServer::new(mech, SERVER_NONCE);
    let step = s.step(first, NOW_MS, &config, &store);
    assert!(
        !matches!(step, SaslStep::Success { .. }),
        "success after one message"
    );
    let SaslStep::Challenge(server_first) = step else {
        assert!(s.is_done());
        return;
    };
    assert!(server_first.starts_with(b"r="));
    let Some(fin) = fin else { return };
    let step = s.step(fin, NOW_MS, &config, &store);
    match &step {
        SaslStep::Success {
            principal, token, ..
        } => {
            assert_eq!(principal.name, USER);
            assert!(token.starts_with(b"v="));
        }
        SaslStep::Challenge(_) => panic!("SCRAM has two rounds"),
        SaslStep::Failure(_) => {}
    }
    assert!(matches!(
        s.step(fin, NOW_MS, &config, &store),
        SaslStep::Failure(_)
    ));
}

/// `oauth_bearer`: a client initial response; an error challenge must be JSON with a status,
/// and the client's `\x01` then fails with that same JSON; a success has the token's expiry.
pub fn check_oauth(data: &[u8]) {
    let config = config();
    let store = store(Mechanism::ScramSha256);
    let mut s = SaslServer::new(Mechanism::OAuthBearer, [0; 24]);
    match s.step(data, NOW_MS, &config, &store) {
        SaslStep::Challenge(json) => {
            assert!(json.starts_with(b"{\"status\":\""), "not an RFC 7628 error");
            match s.step(b"\x01", NOW_MS, &config, &store) {
                SaslStep::Failure(f) => assert_eq!(f.message.as_bytes(), &json[..]),
                other => panic!("after the error challenge: {other:?}"),
            }
        }
        SaslStep::Success {
            credential_expires_ms,
            ..
        } => assert!(credential_expires_ms.is_some_and(|e| e > NOW_MS)),
        SaslStep::Failure(_) => assert!(s.is_done()),
    }
}

/// `jaas_config`: whatever parses prints back to a value that parses to the same entry.
pub fn check_jaas(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(entry) = security::jaas::parse(text) {
        let again = security::jaas::to_config_string(&entry);
        assert_eq!(
            security::jaas::parse(&again).as_ref(),
            Ok(&entry),
            "{again}"
        );
        let _ = security::jaas::plain_users(&entry.options);
        let _ = security::sasl::OAuthConfig::from_jaas_options(&entry.options);
    }
}
