//! SCRAM credentials end to end against the `ringleader` binary: `ringleader users` adds, lists
//! and deletes them (AlterUserScramCredentials / DescribeUserScramCredentials), bad requests get
//! Kafka's codes and messages, and the credentials survive a restart and a SIGKILL (they are
//! durable before the alter is answered). The keys in the file the broker wrote are those that
//! `security::sasl` derives from the password given to the CLI.

mod common;

use common::{data_dir, Broker, Client};
use kafka_protocol::messages::alter_user_scram_credentials_request::*;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;
use wire::{Request, Response};

fn users_cli(addr: SocketAddr, args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringleader"))
        .arg("users")
        .args(["--bootstrap-server", &addr.to_string()])
        .args(args)
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn describe(c: &mut Client, users: Option<&[&str]>) -> DescribeUserScramCredentialsResponse {
    let users = users.map(|u| {
        u.iter()
            .map(|n| UserName::default().with_name(s(n)))
            .collect()
    });
    let Response::DescribeUserScramCredentials(r) = c.call(
        0,
        Request::DescribeUserScramCredentials(
            DescribeUserScramCredentialsRequest::default().with_users(users),
        ),
    ) else {
        panic!("DescribeUserScramCredentials")
    };
    r
}

fn alter(c: &mut Client, req: AlterUserScramCredentialsRequest) -> Vec<(String, i16, String)> {
    let Response::AlterUserScramCredentials(r) = c.call(0, Request::AlterUserScramCredentials(req))
    else {
        panic!("AlterUserScramCredentials")
    };
    r.results
        .iter()
        .map(|x| {
            (
                x.user.to_string(),
                x.error_code,
                x.error_message.as_deref().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
    ScramCredentialUpsertion::default()
        .with_name(s(name))
        .with_mechanism(mechanism)
        .with_iterations(iterations)
        .with_salt(bytes::Bytes::from_static(b"0123456789abcdef"))
        .with_salted_password(bytes::Bytes::from(vec![9u8; 32]))
}

/// One described user: (user, error code, [(mechanism, iterations)]).
type Listed = (String, i16, Vec<(i8, i32)>);

fn listed(r: &DescribeUserScramCredentialsResponse) -> Vec<Listed> {
    r.results
        .iter()
        .map(|x| {
            (
                x.user.to_string(),
                x.error_code,
                x.credential_infos
                    .iter()
                    .map(|i| (i.mechanism, i.iterations))
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn users_cli_alter_describe_restart_and_errors() {
    let dir = data_dir("scram-users");
    let mut broker = Broker::start(&dir, &[]);
    let addr = broker.addr;

    // Add through the CLI (salt drawn and password salted client side).
    for args in [
        &[
            "--add",
            "alice",
            "--mechanism",
            "SCRAM-SHA-256",
            "--password",
            "alice-pw",
            "--iterations",
            "8192",
        ][..],
        &[
            "--add",
            "alice",
            "--mechanism",
            "SCRAM-SHA-512",
            "--password",
            "alice-pw2",
        ],
        &[
            "--add",
            "bob",
            "--mechanism",
            "SCRAM-SHA-512",
            "--password",
            "bob-pw",
        ],
    ] {
        let (code, out) = users_cli(addr, args);
        assert_eq!(code, Some(0), "{args:?}: {out}");
        assert!(out.contains("Completed updating config for user"), "{out}");
    }
    let (code, out) = users_cli(addr, &["--list"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        vec![
            "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096",
            "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096",
        ]
    );
    // CLI refusals: too few iterations (client side, Kafka's ConfigCommand message), a delete
    // of a credential that does not exist (the broker's RESOURCE_NOT_FOUND), bad arguments.
    let (code, out) = users_cli(
        addr,
        &[
            "--add",
            "carol",
            "--mechanism",
            "SCRAM-SHA-256",
            "--password",
            "x",
            "--iterations",
            "1000",
        ],
    );
    assert_eq!(code, Some(1));
    assert!(
        out.contains("Iterations 1000 is less than the minimum 4096 required for SCRAM-SHA-256"),
        "{out}"
    );
    let (code, out) = users_cli(addr, &["--delete", "bob", "--mechanism", "SCRAM-SHA-256"]);
    assert_eq!(code, Some(1));
    assert!(
        out.contains("RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist"),
        "{out}"
    );
    assert_eq!(users_cli(addr, &["--list", "--add", "x"]).0, Some(2));

    // Wire-level: Kafka's codes and messages (ScramControlManager, ScramImage).
    let mut c = Client::connect(addr);
    let results = alter(
        &mut c,
        AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![ScramCredentialDeletion::default()
                .with_name(s("ghost"))
                .with_mechanism(1)])
            .with_upsertions(vec![
                upsert("dave", 1, 4095),
                upsert("erin", 2, 16385),
                upsert("frank", 3, 8192),
                upsert("", 1, 8192),
                upsert("gina", 1, 8192),
                upsert("gina", 2, 8192),
                upsert("hank", 2, 16384),
            ]),
    );
    let want: Vec<(String, i16, String)> = [
        ("hank", 0, ""),
        (
            "ghost",
            91,
            "Attempt to delete a user credential that does not exist",
        ),
        ("dave", 93, "Too few iterations"),
        ("erin", 93, "Too many iterations"),
        ("frank", 33, "Unknown SCRAM mechanism"),
        ("", 93, "Username must not be empty"),
        (
            "gina",
            92,
            "A user credential cannot be altered twice in the same request",
        ),
    ]
    .iter()
    .map(|(u, c, m)| (u.to_string(), *c, m.to_string()))
    .collect();
    assert_eq!(results, want);
    let r = describe(&mut c, Some(&["bob", "ghost", "bob", "hank"]));
    assert_eq!(r.error_code, 0);
    assert_eq!(
        listed(&r),
        vec![
            ("bob".to_string(), 92, vec![]),
            ("ghost".to_string(), 91, vec![]),
            ("hank".to_string(), 0, vec![(2, 16384)]),
        ]
    );
    assert_eq!(
        r.results[1].error_message.as_deref(),
        Some("Attempt to describe a user credential that does not exist: ghost")
    );
    assert_eq!(
        r.results[0].error_message.as_deref(),
        Some("Cannot describe SCRAM credentials for the same user twice in a single request: bob")
    );
    let (code, out) = users_cli(addr, &["--delete", "hank", "--mechanism", "SCRAM-SHA-512"]);
    assert_eq!(code, Some(0), "{out}");
    drop(c);

    // Durable: a clean restart, then a SIGKILL right after an alter, keep everything.
    let before = listed(&describe(&mut Client::connect(addr), None));
    assert_eq!(before.len(), 2, "{before:?}");
    broker.stop();
    let mut broker = Broker::start(&dir, &[]);
    assert_eq!(
        listed(&describe(&mut Client::connect(broker.addr), None)),
        before
    );
    let (code, out) = users_cli(
        broker.addr,
        &[
            "--add",
            "ivy",
            "--mechanism",
            "SCRAM-SHA-256",
            "--password",
            "ivy-pw",
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    broker.kill9();
    let broker = Broker::start(&dir, &[]);
    let after = listed(&describe(&mut Client::connect(broker.addr), None));
    assert_eq!(after.len(), 3, "{after:?}");
    assert_eq!(after[2], ("ivy".to_string(), 0, vec![(1, 4096)]));
    drop(broker);

    // The stored keys are the ones the CLI's password derives (salt drawn by the CLI, 32 bytes).
    let bytes = std::fs::read(dir.join("scram-credentials")).unwrap();
    let set = security::scram_store::decode(&bytes).unwrap();
    let cred = set["alice"][&security::sasl::Mechanism::ScramSha256].clone();
    assert_eq!(cred.iterations, 8192);
    assert_eq!(cred.salt.len(), 32);
    let salted = security::sasl::salted_password(
        security::sasl::Mechanism::ScramSha256,
        b"alice-pw",
        &cred.salt,
        8192,
    )
    .unwrap();
    let expect = security::sasl::ScramCredential::from_salted_password(
        security::sasl::Mechanism::ScramSha256,
        &cred.salt,
        &salted,
        8192,
    )
    .unwrap();
    assert_eq!(
        cred, expect,
        "the broker's keys are those of the CLI's password"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn describe_client_quotas(
    c: &mut Client,
    version: i16,
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> DescribeClientQuotasResponse {
    use describe_client_quotas_request::ComponentData;
    let req = DescribeClientQuotasRequest::default()
        .with_components(
            components
                .iter()
                .map(|&(t, m, name)| {
                    ComponentData::default()
                        .with_entity_type(s(t))
                        .with_match_type(m)
                        .with_match(name.map(s))
                })
                .collect(),
        )
        .with_strict(strict);
    let Response::DescribeClientQuotas(r) = c.call(version, Request::DescribeClientQuotas(req))
    else {
        panic!("DescribeClientQuotas")
    };
    r
}

/// `kafka-configs --describe --entity-type users` sends DescribeClientQuotas next to
/// DescribeUserScramCredentials: no quota is configured (none is enforced), so a valid filter
/// gets an empty entries list, and an invalid one Kafka's INVALID_REQUEST with null entries.
#[test]
fn describe_client_quotas_is_empty_and_validated() {
    let dir = data_dir("client-quotas");
    let broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    for v in 0..=1 {
        // Every user, strict (what the tool sends without --entity-name); alice exactly.
        for (components, strict) in [
            (&[("user", 2, None)][..], true),
            (&[("user", 0, Some("alice"))], false),
            (&[], false),
        ] {
            let r = describe_client_quotas(&mut c, v, components, strict);
            assert_eq!(
                (r.error_code, r.error_message.as_deref()),
                (0, None),
                "v{v}"
            );
            assert_eq!(r.entries, Some(vec![]), "v{v}");
        }
        let r = describe_client_quotas(&mut c, v, &[("user", 0, None)], false);
        assert_eq!(r.error_code, 42, "INVALID_REQUEST v{v}");
        assert_eq!(
            r.error_message.as_deref(),
            Some("Request specified MATCH_TYPE_EXACT, but set match string to null.")
        );
        assert_eq!(r.entries, None);
        let r = describe_client_quotas(&mut c, v, &[("topic", 2, None)], false);
        assert_eq!(r.error_code, 35, "UNSUPPORTED_VERSION v{v}");
        assert_eq!(
            r.error_message.as_deref(),
            Some("Unsupported entity type topic")
        );
    }
}
