//! Seeds of the SASL fuzz targets (`fuzz/fuzz_targets/{sasl_plain,scram_messages,oauth_bearer,
//! jaas_config}.rs`), and the targets' own checks run on them: valid PLAIN tokens, complete
//! SCRAM-SHA-256/512 exchanges (client-final proofs computed here for the target's fixed server
//! nonce), good and bad OAUTHBEARER tokens, and Kafka's JAAS examples.
//!
//! `RINGLEADER_BLESS=1 cargo test -p ringleader-security --test fuzz_seeds` rewrites
//! `fuzz/seeds/<target>/`; without it this test checks that the committed seeds are these.

#[path = "../../../fuzz/src/sasl_check.rs"]
mod sasl_check;
#[path = "../../../fuzz/seed_files.rs"]
mod seed_files;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::{Hmac, Mac};
use security::sasl::{Mechanism, SaslStep};
use sha2::{Digest, Sha256, Sha512};
use std::path::Path;

const TARGETS: [&str; 4] = [
    "sasl_plain",
    "scram_messages",
    "oauth_bearer",
    "jaas_config",
];

fn hmac(m: Mechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    if m == Mechanism::ScramSha256 {
        let mut h = Hmac::<Sha256>::new_from_slice(key).unwrap();
        h.update(data);
        h.finalize().into_bytes().to_vec()
    } else {
        let mut h = Hmac::<Sha512>::new_from_slice(key).unwrap();
        h.update(data);
        h.finalize().into_bytes().to_vec()
    }
}

/// The client-final a correct client sends to the target's server (RFC 5802 §3).
fn client_final(m: Mechanism, client_first: &str, password: &str) -> String {
    let cred = sasl_check::store(m).1;
    let gs2_end = client_first.match_indices(',').nth(1).unwrap().0 + 1;
    let cnonce = client_first
        .split(",r=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    let nonce = format!("{cnonce}{}", STANDARD.encode(sasl_check::SERVER_NONCE));
    let server_first = format!("r={nonce},s={},i=4096", STANDARD.encode(&cred.salt));
    let salted = security::sasl::salted_password(m, password.as_bytes(), &cred.salt, 4096).unwrap();
    let client_key = hmac(m, &salted, b"Client Key");
    let stored = if m == Mechanism::ScramSha256 {
        Sha256::digest(&client_key).to_vec()
    } else {
        Sha512::digest(&client_key).to_vec()
    };
    let without = format!("c={},r={nonce}", STANDARD.encode(&client_first[..gs2_end]));
    let auth = format!("{},{server_first},{without}", &client_first[gs2_end..]);
    let sig = hmac(m, &stored, auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(sig).map(|(a, b)| a ^ b).collect();
    format!("{without},p={}", STANDARD.encode(proof))
}

fn jws(claims: &str) -> String {
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims)
    )
}

fn seeds() -> seed_files::Seeds {
    let mut s = seed_files::Seeds::new();
    let mut add = |target: &str, name: &str, bytes: Vec<u8>| {
        s.insert(format!("{target}/{name}"), bytes);
    };
    add("sasl_plain", "good", b"\0user\0pencil".to_vec());
    add("sasl_plain", "good_authzid", b"user\0user\0pencil".to_vec());
    add("sasl_plain", "bad_password", b"\0user\0pencil2".to_vec());
    add("sasl_plain", "two_tokens", b"user\0pencil".to_vec());

    for (sel, m) in [(0u8, Mechanism::ScramSha256), (1, Mechanism::ScramSha512)] {
        let tag = if sel == 0 { "256" } else { "512" };
        for (name, first, pw) in [
            ("good", "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", "pencil"),
            (
                "good_authzid_ext",
                "n,a=user,n=user,r=fyko+d2lbbFgONRv9qkxdawL,foo=bar",
                "pencil",
            ),
            ("bad_proof", "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", "pencil!"),
        ] {
            let mut bytes = vec![sel];
            bytes.extend_from_slice(first.as_bytes());
            bytes.push(0);
            bytes.extend_from_slice(client_final(m, first, pw).as_bytes());
            add("scram_messages", &format!("{name}_{tag}"), bytes);
        }
    }
    add(
        "scram_messages",
        "unknown_user",
        b"\0n,,n=bob,r=abc".to_vec(),
    );

    let far = 4_102_444_800i64; // 2100-01-01
    for (name, claims) in [
        (
            "good",
            format!(r#"{{"sub":"user","exp":{far},"iat":1600000000,"scope":["a","b"]}}"#),
        ),
        ("expired", r#"{"sub":"user","exp":1600000000}"#.to_string()),
        ("no_sub", format!(r#"{{"exp":{far}}}"#)),
    ] {
        let msg = format!("n,,\x01auth=Bearer {}\x01\x01", jws(&claims));
        add("oauth_bearer", name, msg.into_bytes());
    }
    let msg = format!(
        "n,a=user,\x01auth=Bearer {}\x01traceId=42\x01\x01",
        jws(&format!(r#"{{"sub":"user","exp":{far}}}"#))
    );
    add("oauth_bearer", "authzid_extension", msg.into_bytes());
    add("oauth_bearer", "ack", b"\x01".to_vec());

    add(
        "jaas_config",
        "plain",
        br#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#.to_vec(),
    );
    add(
        "jaas_config",
        "scram",
        b"org.apache.kafka.common.security.scram.ScramLoginModule required\n  username=\"admin\" // comment\n  password='a\\\"b' /* block */;".to_vec(),
    );
    add(
        "jaas_config",
        "oauth",
        br#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="a b" unsecuredValidatorAllowableClockSkewMs="100";"#.to_vec(),
    );
    s
}

#[test]
fn seeds_are_current_and_pass_the_targets_checks() {
    let seeds = seeds();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    seed_files::check_or_bless(&root, &TARGETS, &seeds, "ringleader-security");
    for (name, bytes) in &seeds {
        match name.split('/').next().unwrap() {
            "sasl_plain" => sasl_check::check_plain(bytes),
            "scram_messages" => sasl_check::check_scram(bytes),
            "oauth_bearer" => sasl_check::check_oauth(bytes),
            "jaas_config" => sasl_check::check_jaas(bytes),
            t => panic!("unknown target {t}"),
        }
    }
}

/// The seeds reach the deep states: the good SCRAM seeds complete the exchange, the good
/// OAUTHBEARER seed authenticates, the JAAS seeds parse.
#[test]
fn good_seeds_authenticate() {
    let cfg = sasl_check::config();
    for m in [Mechanism::ScramSha256, Mechanism::ScramSha512] {
        let first = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
        let store = sasl_check::store(m);
        let mut s = security::sasl::SaslServer::new(m, sasl_check::SERVER_NONCE);
        assert!(matches!(
            s.step(first.as_bytes(), 0, &cfg, &store),
            SaslStep::Challenge(_)
        ));
        let step = s.step(client_final(m, first, "pencil").as_bytes(), 0, &cfg, &store);
        assert!(matches!(step, SaslStep::Success { .. }), "{m}: {step:?}");
    }
    let seeds = seeds();
    let store = sasl_check::store(Mechanism::ScramSha256);
    let mut s = security::sasl::SaslServer::new(Mechanism::OAuthBearer, [0; 24]);
    let step = s.step(
        &seeds["oauth_bearer/good"],
        sasl_check::NOW_MS,
        &cfg,
        &store,
    );
    assert!(matches!(step, SaslStep::Success { .. }), "{step:?}");
    for n in ["plain", "scram", "oauth"] {
        let text = std::str::from_utf8(&seeds[&format!("jaas_config/{n}")]).unwrap();
        security::jaas::parse(text).unwrap();
    }
}
