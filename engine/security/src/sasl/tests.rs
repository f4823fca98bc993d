use std::collections::BTreeMap;
use std::sync::Arc;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::{Hmac, Mac};
use proptest::prelude::*;
use sha2::{Digest, Sha256, Sha512};

use super::*;

const NOW_MS: i64 = 1_700_000_000_000;

struct OneUser {
    user: &'static str,
    mech: Mechanism,
    cred: ScramCredential,
}

impl ScramCredentials for OneUser {
    fn scram_credential(&self, m: Mechanism, user: &str) -> Option<ScramCredential> {
        (m == self.mech && user == self.user).then(|| self.cred.clone())
    }
}

fn config() -> SaslConfig {
    let mut c = SaslConfig::default();
    c.plain_users.insert("alice".into(), "alice-secret".into());
    c
}

fn failure(step: SaslStep) -> String {
    match step {
        SaslStep::Failure(f) => f.message,
        other => panic!("expected a failure, got {other:?}"),
    }
}

// ---------------------------------------------------------------- mechanisms

#[test]
fn mechanism_names_are_kafkas_and_exact() {
    for m in Mechanism::ALL {
        assert_eq!(Mechanism::from_name(m.name()), Some(m));
    }
    assert_eq!(Mechanism::from_name("scram-sha-256"), None);
    assert_eq!(Mechanism::from_name("GSSAPI"), None);
    assert_eq!(Mechanism::ScramSha512.scram_type(), Some(2));
    assert_eq!(Mechanism::from_scram_type(1), Some(Mechanism::ScramSha256));
    assert_eq!(Mechanism::from_scram_type(0), None);
}

// ---------------------------------------------------------------- PLAIN

#[test]
fn plain_accepts_good_and_refuses_bad_with_kafkas_words() {
    let run = |t: &[u8]| {
        let mut s = SaslServer::new(Mechanism::Plain, [0; 24]);
        s.step(t, NOW_MS, &config(), &NoScramCredentials)
    };
    for good in [&b"\0alice\0alice-secret"[..], b"alice\0alice\0alice-secret"] {
        assert_eq!(
            run(good),
            SaslStep::Success {
                principal: Principal::user("alice"),
                token: vec![],
                credential_expires_ms: None
            }
        );
    }
    let bad = "Authentication failed: Invalid username or password";
    assert_eq!(failure(run(b"\0alice\0wrong")), bad);
    assert_eq!(failure(run(b"\0alice\0alice-secreT")), bad);
    assert_eq!(failure(run(b"\0bob\0alice-secret")), bad);
    assert_eq!(
        failure(run(b"bob\0alice\0alice-secret")),
        "Authentication failed: Client requested an authorization id that is different from username"
    );
    assert_eq!(
        failure(run(b"\0\0pw")),
        "Authentication failed: username not specified"
    );
    assert_eq!(
        failure(run(b"\0alice\0")),
        "Authentication failed: password not specified"
    );
    assert_eq!(
        failure(run(b"alice-secret")),
        "Invalid SASL/PLAIN response: expected 3 tokens, got 1"
    );
    assert_eq!(
        failure(run(b"a\0b\0c\0d\0e")),
        "Invalid SASL/PLAIN response: expected 3 tokens, got 4"
    );
    // No message ever echoes the password.
    assert!(!failure(run(b"\0alice\0hunter2")).contains("hunter2"));
}

#[test]
fn a_step_after_the_end_is_a_failure() {
    let mut s = SaslServer::new(Mechanism::Plain, [0; 24]);
    assert!(matches!(
        s.step(
            b"\0alice\0alice-secret",
            NOW_MS,
            &config(),
            &NoScramCredentials
        ),
        SaslStep::Success { .. }
    ));
    assert!(s.is_done());
    failure(s.step(
        b"\0alice\0alice-secret",
        NOW_MS,
        &config(),
        &NoScramCredentials,
    ));
}

// ---------------------------------------------------------------- SCRAM

fn hmac(m: Mechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    match m {
        Mechanism::ScramSha256 => {
            let mut h = Hmac::<Sha256>::new_from_slice(key).unwrap();
            h.update(data);
            h.finalize().into_bytes().to_vec()
        }
        _ => {
            let mut h = Hmac::<Sha512>::new_from_slice(key).unwrap();
            h.update(data);
            h.finalize().into_bytes().to_vec()
        }
    }
}

fn digest(m: Mechanism, data: &[u8]) -> Vec<u8> {
    match m {
        Mechanism::ScramSha256 => Sha256::digest(data).to_vec(),
        _ => Sha512::digest(data).to_vec(),
    }
}

/// A SCRAM client, written from RFC 5802 §3 (independently of the server's code paths).
/// Returns (client-final, expected server-final).
fn client_final(
    m: Mechanism,
    password: &str,
    client_first_bare: &str,
    gs2: &str,
    server_first: &str,
) -> (String, String) {
    let mut salt = None;
    let mut iters = 0;
    let mut nonce = "";
    for part in server_first.split(',') {
        if let Some(v) = part.strip_prefix("s=") {
            salt = Some(STANDARD.decode(v).unwrap());
        } else if let Some(v) = part.strip_prefix("i=") {
            iters = v.parse().unwrap();
        } else if let Some(v) = part.strip_prefix("r=") {
            nonce = v;
        }
    }
    let salted = salted_password(m, password.as_bytes(), &salt.unwrap(), iters).unwrap();
    let client_key = hmac(m, &salted, b"Client Key");
    let stored_key = digest(m, &client_key);
    let without_proof = format!("c={},r={nonce}", STANDARD.encode(gs2));
    let auth = format!("{client_first_bare},{server_first},{without_proof}");
    let sig = hmac(m, &stored_key, auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
    let server_key = hmac(m, &salted, b"Server Key");
    let server_sig = hmac(m, &server_key, auth.as_bytes());
    (
        format!("{without_proof},p={}", STANDARD.encode(proof)),
        format!("v={}", STANDARD.encode(server_sig)),
    )
}

#[test]
fn rfc7677_scram_sha_256_test_vector() {
    let m = Mechanism::ScramSha256;
    let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let store = OneUser {
        user: "user",
        mech: m,
        cred: ScramCredential::from_password(m, b"pencil", &salt, 4096).unwrap(),
    };
    // Driven with the RFC's own server nonce so every message is the RFC's, byte for byte.
    let (state, step) = scram::ScramState::ClientFirst.step(
        m,
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        &store,
    );
    assert_eq!(
        step,
        SaslStep::Challenge(
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
                .to_vec()
        )
    );
    let (_, step) = state.step(
        m,
        "unused",
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        &store,
    );
    assert_eq!(
        step,
        SaslStep::Success {
            principal: Principal::user("user"),
            token: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec(),
            credential_expires_ms: None,
        }
    );
}

fn scram_exchange(
    m: Mechanism,
    stored_pw: &str,
    client_pw: &str,
    user: &'static str,
    client_first: &str,
) -> SaslStep {
    let store = OneUser {
        user,
        mech: m,
        cred: ScramCredential::from_password(m, stored_pw.as_bytes(), b"some salt", 8192).unwrap(),
    };
    let mut s = SaslServer::new(m, [7; 24]);
    let SaslStep::Challenge(sf) = s.step(client_first.as_bytes(), NOW_MS, &config(), &store) else {
        panic!("no server-first")
    };
    let sf = String::from_utf8(sf).unwrap();
    let gs2_len = client_first.match_indices(',').nth(1).unwrap().0 + 1;
    let (cf, expected) = client_final(
        m,
        client_pw,
        &client_first[gs2_len..],
        &client_first[..gs2_len],
        &sf,
    );
    let step = s.step(cf.as_bytes(), NOW_MS, &config(), &store);
    if let SaslStep::Success { token, .. } = &step {
        assert_eq!(token, expected.as_bytes());
    }
    assert!(s.is_done());
    failure(s.step(cf.as_bytes(), NOW_MS, &config(), &store));
    step
}

#[test]
fn full_scram_sha_512_exchange() {
    let m = Mechanism::ScramSha512;
    let step = scram_exchange(m, "s3cret", "s3cret", "alice", "n,,n=alice,r=abcDEF123");
    assert!(
        matches!(&step, SaslStep::Success { principal, .. } if *principal == Principal::user("alice")),
        "{step:?}"
    );
    // An authzid equal to the user, and escaped names, are fine.
    let step = scram_exchange(m, "pw", "pw", "a,b=c", "n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=xyz");
    assert!(matches!(&step, SaslStep::Success { principal, .. } if principal.name == "a,b=c"));
    let hidden = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512";
    assert_eq!(
        failure(scram_exchange(
            m,
            "s3cret",
            "wrong",
            "alice",
            "n,,n=alice,r=abc"
        )),
        hidden
    );
}

#[test]
fn scram_refusals() {
    let m = Mechanism::ScramSha256;
    let hidden = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256";
    let store = OneUser {
        user: "alice",
        mech: m,
        cred: ScramCredential::from_password(m, b"pw", b"salt", 4096).unwrap(),
    };
    let first = |t: &str| {
        let mut s = SaslServer::new(m, [1; 24]);
        s.step(t.as_bytes(), NOW_MS, &config(), &store)
    };
    // Unknown user and wrong mechanism look exactly like a bad password.
    assert_eq!(failure(first("n,,n=bob,r=abc")), hidden);
    let mut s = SaslServer::new(Mechanism::ScramSha512, [1; 24]);
    assert_eq!(
        failure(s.step(b"n,,n=alice,r=abc", NOW_MS, &config(), &store)),
        hidden.replace("256", "512")
    );
    for bad in [
        "y,,n=alice,r=abc",
        "p=tls-unique,,n=alice,r=abc",
        "n,,n=alice",
        "n,,n=al=ice,r=abc",
        "n,,r=abc,n=alice",
        "n,,n=alice,r=a b",
        "n,,n=alice,r=abc,1=2",
        "",
        "n,,",
    ] {
        assert_eq!(failure(first(bad)), hidden, "{bad}");
    }
    assert_eq!(
        failure(first("n,a=bob,n=alice,r=abc")),
        "Authentication failed: Client requested an authorization id that is different from username"
    );
    assert!(failure(first("n,,n=alice,r=abc,tokenauth=true")).contains("tokenauth"));
    // Extensions Kafka does not know are ignored.
    assert!(matches!(
        first("n,,n=alice,r=abc,foo=bar"),
        SaslStep::Challenge(_)
    ));

    // Client-final: nonce, channel binding and proof must all match.
    let start = || {
        let mut s = SaslServer::new(m, [1; 24]);
        let SaslStep::Challenge(sf) = s.step(b"n,,n=alice,r=abc", NOW_MS, &config(), &store) else {
            panic!()
        };
        (s, String::from_utf8(sf).unwrap())
    };
    let (mut s, sf) = start();
    let (good, _) = client_final(m, "pw", "n=alice,r=abc", "n,,", &sf);
    let nonce = sf
        .split(',')
        .next()
        .unwrap()
        .strip_prefix("r=")
        .unwrap()
        .to_string();
    for bad in [
        good.replace(&nonce, &format!("{nonce}x")),
        good.replace("c=biws", "c=eSws"),
        good.replace(",p=", ",p=AAAA"),
        format!("c=biws,r={nonce}"),
        "garbage".to_string(),
    ] {
        let (mut s, _) = start();
        assert_eq!(
            failure(s.step(bad.as_bytes(), NOW_MS, &config(), &store)),
            hidden,
            "{bad}"
        );
    }
    assert!(matches!(
        s.step(good.as_bytes(), NOW_MS, &config(), &store),
        SaslStep::Success { .. }
    ));
}

#[test]
fn scram_credential_derivation_bounds() {
    let m = Mechanism::ScramSha256;
    assert!(salted_password(m, b"pw", b"s", 0).is_err());
    assert!(salted_password(m, b"pw", b"s", SCRAM_MAX_ITERATIONS + 1).is_err());
    assert!(salted_password(Mechanism::Plain, b"pw", b"s", 4096).is_err());
    assert!(
        ScramCredential::from_salted_password(Mechanism::OAuthBearer, b"s", b"x", 4096).is_err()
    );
    // Debug never shows keys.
    let c = ScramCredential::from_password(m, b"pw", b"s", 4096).unwrap();
    assert!(!format!("{c:?}").contains("stored_key"));
}

// ---------------------------------------------------------------- OAUTHBEARER

fn jws(claims: serde_json::Value) -> String {
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

fn oauth_first(token: &str) -> Vec<u8> {
    format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
}

fn oauth(token: &[u8], cfg: &SaslConfig) -> (SaslServer, SaslStep) {
    let mut s = SaslServer::new(Mechanism::OAuthBearer, [0; 24]);
    let step = s.step(token, NOW_MS, cfg, &NoScramCredentials);
    (s, step)
}

#[test]
fn oauthbearer_accepts_a_good_unsecured_token() {
    let exp = NOW_MS / 1000 + 3600;
    let t = jws(
        serde_json::json!({"sub": "alice", "exp": exp, "iat": NOW_MS / 1000, "scope": ["read", "write"]}),
    );
    let (s, step) = oauth(&oauth_first(&t), &config());
    assert_eq!(
        step,
        SaslStep::Success {
            principal: Principal::user("alice"),
            token: vec![],
            credential_expires_ms: Some(exp * 1000)
        }
    );
    assert!(s.is_done());
    // Extensions and an authzid equal to the principal are accepted.
    let msg = format!("n,a=alice,\x01auth=Bearer {t}\x01traceId=abc 123\x01\x01");
    assert!(matches!(
        oauth(msg.as_bytes(), &config()).1,
        SaslStep::Success { .. }
    ));
    let msg = format!("n,a=bob,\x01auth=Bearer {t}\x01\x01");
    assert_eq!(
        failure(oauth(msg.as_bytes(), &config()).1),
        "Authentication failed: Client requested an authorization id (bob) that is different from the token's principal name (alice)"
    );
}

fn error_then_ack(token: &[u8], cfg: &SaslConfig) -> String {
    let (mut s, step) = oauth(token, cfg);
    let SaslStep::Challenge(json) = step else {
        panic!("expected an error challenge, got {step:?}")
    };
    let json = String::from_utf8(json).unwrap();
    // The client acknowledges with %x01; the server then fails with the same JSON.
    assert_eq!(
        failure(s.step(b"\x01", NOW_MS, cfg, &NoScramCredentials)),
        json
    );
    json
}

#[test]
fn oauthbearer_refuses_bad_tokens_with_rfc7628_errors() {
    let soon = NOW_MS / 1000 + 60;
    let invalid = r#"{"status":"invalid_token"}"#;
    // Expired (exp == now is already expired: "on or after").
    let t = jws(serde_json::json!({"sub": "alice", "exp": NOW_MS / 1000}));
    assert_eq!(error_then_ack(&oauth_first(&t), &config()), invalid);
    // ... but within the allowed clock skew it is fine.
    let mut skewed = config();
    skewed.oauth.allowable_clock_skew_ms = 5_000;
    assert!(matches!(
        oauth(&oauth_first(&t), &skewed).1,
        SaslStep::Success { .. }
    ));
    // Missing principal, wrong-typed principal, missing exp, iat in the future, exp <= iat.
    for claims in [
        serde_json::json!({"exp": soon}),
        serde_json::json!({"sub": 42, "exp": soon}),
        serde_json::json!({"sub": "alice"}),
        serde_json::json!({"sub": "alice", "exp": "soon"}),
        serde_json::json!({"sub": "alice", "exp": soon, "iat": soon - 30 + 600}),
    ] {
        assert_eq!(
            error_then_ack(&oauth_first(&jws(claims.clone())), &config()),
            invalid,
            "{claims}"
        );
    }
    // Signed tokens, wrong alg, garbage.
    let good = jws(serde_json::json!({"sub": "alice", "exp": soon}));
    for t in [
        format!("{good}c2ln"),
        good.replace(
            &URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            &URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256"}"#),
        ),
        "a.b.".into(),
        "abc".into(),
        format!("{good}.x"),
    ] {
        assert_eq!(error_then_ack(&oauth_first(&t), &config()), invalid, "{t}");
    }
    // Required scope.
    let mut scoped = config();
    scoped.oauth.required_scope = vec!["read".into(), "admin".into()];
    let t = jws(serde_json::json!({"sub": "alice", "exp": soon, "scope": ["read"]}));
    assert_eq!(
        error_then_ack(&oauth_first(&t), &scoped),
        r#"{"status":"insufficient_scope", "scope":"[read, admin]"}"#
    );
    let t = jws(serde_json::json!({"sub": "alice", "exp": soon, "scope": ["read", "admin"]}));
    assert!(matches!(
        oauth(&oauth_first(&t), &scoped).1,
        SaslStep::Success { .. }
    ));
    // A custom principal claim name.
    let mut named = config();
    named.oauth.principal_claim_name = "upn".into();
    let t = jws(serde_json::json!({"upn": "carol", "exp": soon}));
    assert!(
        matches!(oauth(&oauth_first(&t), &named).1, SaslStep::Success { principal, .. } if principal.name == "carol")
    );
}

#[test]
fn oauthbearer_malformed_messages_fail_at_once() {
    let hidden = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER";
    let good = jws(serde_json::json!({"sub": "alice", "exp": NOW_MS / 1000 + 60}));
    for msg in [
        b"".to_vec(),
        b"\x01".to_vec(),
        b"n,,\x01\x01".to_vec(),
        format!("n,,\x01auth=Basic {good}\x01\x01").into_bytes(),
        format!("n,,\x01auth=Bearer {good}\x01").into_bytes(),
        format!("y,,\x01auth=Bearer {good}\x01\x01").into_bytes(),
        format!("n,,\x01auth=Bearer {good}\x01bad key=x\x01\x01").into_bytes(),
        vec![0xff, 0xfe],
    ] {
        assert_eq!(failure(oauth(&msg, &config()).1), hidden, "{msg:?}");
    }
}

#[test]
fn oauthbearer_uses_the_configured_validator() {
    struct Allow;
    impl TokenValidator for Allow {
        fn validate(
            &self,
            token: &str,
            now_ms: i64,
            _: &OAuthConfig,
        ) -> Result<ValidatedToken, TokenError> {
            Ok(ValidatedToken {
                principal_name: token.to_string(),
                lifetime_ms: now_ms + 1,
                scope: vec![],
            })
        }
    }
    let mut cfg = config();
    cfg.oauth.validator = Some(Arc::new(Allow));
    assert_eq!(
        oauth(&oauth_first("opaque-token"), &cfg).1,
        SaslStep::Success {
            principal: Principal::user("opaque-token"),
            token: vec![],
            credential_expires_ms: Some(NOW_MS + 1)
        }
    );
}

#[test]
fn oauth_config_from_jaas_options() {
    let entry = crate::jaas::parse(
        r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
           unsecuredLoginStringClaim_sub="admin"
           unsecuredValidatorPrincipalClaimName="upn" unsecuredValidatorRequiredScope="a  b"
           unsecuredValidatorAllowableClockSkewMs="250";"#,
    )
    .unwrap();
    let c = OAuthConfig::from_jaas_options(&entry.options).unwrap();
    assert_eq!(c.principal_claim_name, "upn");
    assert_eq!(c.scope_claim_name, "scope");
    assert_eq!(c.required_scope, vec!["a", "b"]);
    assert_eq!(c.allowable_clock_skew_ms, 250);
    let mut o = BTreeMap::new();
    o.insert(
        OAUTH_ALLOWABLE_CLOCK_SKEW_MS_OPTION.to_string(),
        "-1".to_string(),
    );
    assert!(OAuthConfig::from_jaas_options(&o).is_err());
    o.insert(
        OAUTH_ALLOWABLE_CLOCK_SKEW_MS_OPTION.to_string(),
        "x".to_string(),
    );
    assert!(OAuthConfig::from_jaas_options(&o).is_err());
}

#[test]
fn reauthentication_wording() {
    let f = SaslFailure::hidden(Mechanism::Plain);
    assert_eq!(
        f.reauthentication_message(),
        "Authentication failed during reauthentication due to invalid credentials with SASL mechanism PLAIN"
    );
}

// ---------------------------------------------------------------- never panic

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_tokens_never_panic(
        mech in 0usize..4,
        tokens in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..4),
    ) {
        let m = Mechanism::ALL[mech];
        let store = OneUser {
            user: "alice",
            mech: m,
            cred: ScramCredential::from_password(Mechanism::ScramSha256, b"pw", b"salt", 4096).unwrap(),
        };
        let mut s = SaslServer::new(m, [3; 24]);
        for t in &tokens {
            let _ = s.step(t, NOW_MS, &config(), &store);
        }
    }

    #[test]
    fn structured_scram_tokens_never_panic(
        user in "[a-z=,]{0,6}", nonce in "[ -~]{0,8}", ext in "[a-z=,]{0,8}", fin in "[ -~]{0,60}",
    ) {
        let store = OneUser {
            user: "alice",
            mech: Mechanism::ScramSha256,
            cred: ScramCredential::from_password(Mechanism::ScramSha256, b"pw", b"salt", 4096).unwrap(),
        };
        let mut s = SaslServer::new(Mechanism::ScramSha256, [3; 24]);
        let _ = s.step(format!("n,,n={user},r={nonce}{ext}").as_bytes(), NOW_MS, &config(), &store);
        let _ = s.step(fin.as_bytes(), NOW_MS, &config(), &store);
    }

    #[test]
    fn structured_oauth_tokens_never_panic(
        header in "[ -~]{0,20}", claims in "[ -~]{0,40}", sig in "[a-z.]{0,4}", now in any::<i64>(),
    ) {
        let t = format!("{}.{}.{sig}", URL_SAFE_NO_PAD.encode(&header), URL_SAFE_NO_PAD.encode(&claims));
        let mut s = SaslServer::new(Mechanism::OAuthBearer, [0; 24]);
        let _ = s.step(&oauth_first(&t), now, &config(), &NoScramCredentials);
        let _ = s.step(b"\x01", now, &config(), &NoScramCredentials);
    }

    #[test]
    fn random_jaas_and_store_bytes_never_panic(text in "[ -~\n]{0,80}", bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let _ = crate::jaas::parse(&text);
        let _ = crate::scram_store::decode(&bytes);
    }
}
