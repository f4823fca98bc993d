//! `ringleader acls` end to end against the `ringleader` binary: ACLs added, listed and removed
//! through the CLI with kafka-acls.sh's output, kept across a restart; the broker's refusals
//! (SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED for a caller that is
//! not allowed, INVALID_REQUEST for a bad ACL) printed with a non-zero exit. The CLI connects as
//! `User:ANONYMOUS` on the PLAINTEXT listener, so the broker makes it a super user.

mod common;

use common::{data_dir, Broker};
use std::net::SocketAddr;
use std::process::Stdio;

const AUTHORIZER: &str =
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer";
const SUPER_ANON: &str = "super.users=User:ANONYMOUS";

/// Run `ringleader acls` with stdin not a terminal; (exit code, stdout).
fn acls(addr: SocketAddr, args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringleader"))
        .arg("acls")
        .args(["--bootstrap-server", &addr.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

fn ok(addr: SocketAddr, args: &[&str]) -> String {
    let (code, out) = acls(addr, args);
    assert_eq!(code, Some(0), "{args:?}: {out}");
    out
}

/// kafka-acls.sh's `--list` block for one resource pattern.
fn listed(resource: &str, entries: &[&str]) -> String {
    let lines: Vec<String> = entries.iter().map(|e| format!("\t{e}\n")).collect();
    format!(
        "Current ACLs for resource `ResourcePattern({resource})`:\n{}\n",
        lines.concat()
    )
}

/// kafka-acls.sh's `--add` block for one resource pattern.
fn adding(resource: &str, entries: &[&str]) -> String {
    let lines: Vec<String> = entries.iter().map(|e| format!("\t{e}")).collect();
    format!(
        "Adding ACLs for resource `ResourcePattern({resource})`: \n {}\n\n",
        lines.join("\n")
    )
}

fn entry(principal: &str, host: &str, op: &str, permission: &str) -> String {
    format!("(principal={principal}, host={host}, operation={op}, permissionType={permission})")
}

const ORDERS: &str = "resourceType=TOPIC, name=orders, patternType=LITERAL";
const PAY: &str = "resourceType=TOPIC, name=pay-, patternType=PREFIXED";
const G1: &str = "resourceType=GROUP, name=g1, patternType=LITERAL";
const CLUSTER: &str = "resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL";
const TX: &str = "resourceType=TRANSACTIONAL_ID, name=tx-, patternType=PREFIXED";

#[test]
fn acls_cli_add_list_remove_restart_and_errors() {
    let alice_read = entry("User:alice", "*", "READ", "ALLOW");
    let carol_read = entry("User:carol", "*", "READ", "ALLOW");
    let carol_describe = entry("User:carol", "*", "DESCRIBE", "ALLOW");
    let bob = |op: &str| entry("User:bob", "*", op, "ALLOW");
    let mallory = entry("User:mallory", "10.0.0.9", "ALL", "DENY");

    // No authorizer: the broker says so, the CLI exits 1.
    let dir = data_dir("acls-cli-off");
    let off = Broker::start(&dir, &[]);
    let disabled = "Error while executing ACL command: SECURITY_DISABLED: No Authorizer is \
                    configured on the broker\n";
    assert_eq!(acls(off.addr, &["--list"]), (Some(1), disabled.to_string()));
    let add_alice = [
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "orders",
    ];
    let (code, out) = acls(off.addr, &add_alice);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.ends_with(disabled), "{out}");
    let (code, out) = acls(off.addr, &["--remove", "--force", "--topic", "orders"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.starts_with("Error while executing ACL command: SECURITY_DISABLED"),
        "{out}"
    );
    drop(off);
    let _ = std::fs::remove_dir_all(&dir);

    let dir = data_dir("acls-cli");
    let mut b = Broker::start(&dir, &[AUTHORIZER, SUPER_ANON]);
    let addr = b.addr;

    // Add: what is added is printed as kafka-acls.sh prints it; adding it again says so.
    assert_eq!(ok(addr, &add_alice), adding(ORDERS, &[&alice_read]));
    assert_eq!(
        ok(addr, &add_alice),
        format!("Acl (pattern=ResourcePattern({ORDERS}), entry={alice_read}) already exists.\n")
    );
    // --producer on prefixes: Write, Create, Describe on the topic; Write, Describe on the
    // transactional id.
    assert_eq!(
        ok(
            addr,
            &[
                "--add",
                "--producer",
                "--allow-principal",
                "User:bob",
                "--topic",
                "pay-",
                "--transactional-id",
                "tx-",
                "--resource-pattern-type",
                "prefixed",
            ]
        ),
        adding(PAY, &[&bob("WRITE"), &bob("CREATE"), &bob("DESCRIBE")])
            + &adding(TX, &[&bob("WRITE"), &bob("DESCRIBE")])
    );
    // --consumer: Read, Describe on the topic, Read on the group.
    assert_eq!(
        ok(
            addr,
            &[
                "--add",
                "--consumer",
                "--allow-principal",
                "User:carol",
                "--topic",
                "orders",
                "--group",
                "g1",
            ]
        ),
        adding(ORDERS, &[&carol_read, &carol_describe]) + &adding(G1, &[&carol_read])
    );
    // A deny from one host, on the cluster.
    assert_eq!(
        ok(
            addr,
            &[
                "--add",
                "--deny-principal",
                "User:mallory",
                "--deny-host",
                "10.0.0.9",
                "--cluster",
            ]
        ),
        adding(CLUSTER, &[&mallory])
    );

    // List: everything, one resource, by pattern matching, by principal.
    let all = [
        listed(ORDERS, &[&alice_read, &carol_read, &carol_describe]),
        listed(PAY, &[&bob("WRITE"), &bob("CREATE"), &bob("DESCRIBE")]),
        listed(G1, &[&carol_read]),
        listed(CLUSTER, &[&mallory]),
        listed(TX, &[&bob("WRITE"), &bob("DESCRIBE")]),
    ];
    assert_eq!(ok(addr, &["--list"]), all.concat());
    assert_eq!(ok(addr, &["--list", "--topic", "orders"]), all[0]);
    assert_eq!(ok(addr, &["--list", "--cluster"]), all[3]);
    assert_eq!(ok(addr, &["--list", "--topic", "pay-orders"]), "");
    assert_eq!(
        ok(
            addr,
            &[
                "--list",
                "--topic",
                "pay-orders",
                "--resource-pattern-type",
                "match"
            ]
        ),
        all[1]
    );
    assert_eq!(
        ok(addr, &["--list", "--principal", "User:carol"]),
        "ACLs for principal `User:carol`\n".to_string()
            + &listed(ORDERS, &[&carol_read, &carol_describe])
            + &listed(G1, &[&carol_read])
    );

    // Remove: refused without --force when nobody can be asked; then one entry, then a whole
    // prefixed resource.
    let (code, out) = acls(addr, &["--remove", "--topic", "orders"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("pass --force"), "{out}");
    assert_eq!(ok(addr, &["--list"]), all.concat());
    let removed = ok(
        addr,
        &[
            "--remove",
            "--force",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--topic",
            "orders",
        ],
    );
    assert_eq!(removed, "");
    assert_eq!(
        ok(
            addr,
            &[
                "--remove",
                "--force",
                "--topic",
                "pay-",
                "--resource-pattern-type",
                "prefixed"
            ]
        ),
        ""
    );
    let remaining = [
        listed(ORDERS, &[&carol_read, &carol_describe]),
        listed(G1, &[&carol_read]),
        listed(CLUSTER, &[&mallory]),
        listed(TX, &[&bob("WRITE"), &bob("DESCRIBE")]),
    ]
    .concat();
    assert_eq!(ok(addr, &["--list"]), remaining);

    // A bad ACL: the broker's INVALID_REQUEST and message.
    let (code, out) = acls(
        addr,
        &["--add", "--allow-principal", "User:x", "--topic", ""],
    );
    assert_eq!(
        (code, out.as_str()),
        (
            Some(1),
            "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=, \
             patternType=LITERAL)`: \n \t(principal=User:x, host=*, operation=ALL, \
             permissionType=ALLOW)\n\nError while executing ACL command: INVALID_REQUEST: \
             Invalid empty resource name\n"
        )
    );
    // Bad arguments: exit 2 before connecting.
    assert_eq!(acls(addr, &["--add", "--topic", "t"]).0, Some(2));

    // Durable: the same ACLs after a restart.
    b.stop();
    let mut b = Broker::start(&dir, &[AUTHORIZER, SUPER_ANON]);
    assert_eq!(ok(b.addr, &["--list"]), remaining);
    b.stop();

    // Not a super user, no ACL allowing it: the broker's CLUSTER_AUTHORIZATION_FAILED.
    let b = Broker::start(&dir, &[AUTHORIZER]);
    let (code, out) = acls(b.addr, &["--list"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.starts_with("Error while executing ACL command: CLUSTER_AUTHORIZATION_FAILED"),
        "{out}"
    );
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}
