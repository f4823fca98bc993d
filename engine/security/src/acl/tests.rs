use super::*;

fn acl(
    rt: ResourceType,
    name: &str,
    pt: PatternType,
    who: &str,
    op: AclOperation,
    perm: AclPermissionType,
) -> AclBinding {
    acl_host(rt, name, pt, who, "*", op, perm)
}

fn acl_host(
    rt: ResourceType,
    name: &str,
    pt: PatternType,
    who: &str,
    host: &str,
    op: AclOperation,
    perm: AclPermissionType,
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: rt,
            name: name.into(),
            pattern_type: pt,
        },
        entry: AccessControlEntry {
            principal: who.into(),
            host: host.into(),
            operation: op,
            permission: perm,
        },
    }
}

use AclOperation as Op;
use AclPermissionType::{Allow, Deny};
use PatternType::{Literal, Prefixed};
use ResourceType::{Cluster, Group, Topic};

fn alice() -> Principal {
    Principal::user("alice")
}

#[test]
fn codes_round_trip_and_unknown_codes_are_unknown() {
    for rt in ResourceType::ALL_VALUES {
        assert_eq!(ResourceType::from_code(rt.code()), *rt);
        assert_eq!(ResourceType::parse(rt.name()), *rt);
    }
    for op in AclOperation::ALL_VALUES {
        assert_eq!(AclOperation::from_code(op.code()), *op);
    }
    assert_eq!(AclOperation::Describe.code(), 8);
    assert_eq!(ResourceType::TransactionalId.code(), 5);
    assert_eq!(PatternType::Prefixed.code(), 4);
    assert_eq!(AclPermissionType::Allow.code(), 3);
    assert_eq!(ResourceType::from_code(99), ResourceType::Unknown);
    assert_eq!(AclOperation::parse("idempotent-write"), Op::IdempotentWrite);
}

#[test]
fn allow_everyone_applies_only_when_no_acl_names_the_resource() {
    let a = Authorizer::new(
        vec![acl(Topic, "t", Literal, "User:bob", Op::Read, Allow)],
        vec![],
        true,
    );
    // An ACL for someone else names "t": alice is denied by default.
    assert!(!a.authorize(&alice(), "1.2.3.4", Op::Read, Topic, "t"));
    // Nothing names "u": allowed.
    assert!(a.authorize(&alice(), "1.2.3.4", Op::Read, Topic, "u"));
    let strict = Authorizer::new(vec![], vec![], false);
    assert!(!strict.authorize(&alice(), "h", Op::Read, Topic, "u"));
}

#[test]
fn deny_wins_across_literal_prefixed_and_wildcard() {
    let host = "10.0.0.1";
    for deny in [
        acl(Topic, "orders", Literal, "User:alice", Op::Read, Deny),
        acl(Topic, "ord", Prefixed, "User:alice", Op::Read, Deny),
        acl(Topic, "*", Literal, "User:alice", Op::Read, Deny),
        acl(Topic, "orders", Literal, "User:*", Op::Read, Deny),
        acl(Topic, "orders", Literal, "User:alice", Op::All, Deny),
        acl_host(Topic, "orders", Literal, "User:alice", host, Op::Read, Deny),
    ] {
        for allow in [
            acl(Topic, "orders", Literal, "User:alice", Op::Read, Allow),
            acl(Topic, "o", Prefixed, "User:alice", Op::All, Allow),
            acl(Topic, "*", Literal, "User:*", Op::Read, Allow),
        ] {
            let a = Authorizer::new(vec![allow.clone(), deny.clone()], vec![], false);
            assert!(
                !a.authorize(&alice(), host, Op::Read, Topic, "orders"),
                "{deny:?} vs {allow:?}"
            );
            let a = Authorizer::new(vec![allow.clone()], vec![], false);
            assert!(
                a.authorize(&alice(), host, Op::Read, Topic, "orders"),
                "{allow:?}"
            );
        }
    }
}

#[test]
fn names_principals_and_hosts_must_match() {
    let a = Authorizer::new(
        vec![
            acl(Topic, "orders", Literal, "User:alice", Op::Read, Allow),
            acl(Topic, "pay", Prefixed, "User:alice", Op::Write, Allow),
            acl_host(
                Group,
                "g",
                Literal,
                "User:alice",
                "10.0.0.1",
                Op::Read,
                Allow,
            ),
        ],
        vec![],
        false,
    );
    assert!(
        !a.authorize(&alice(), "h", Op::Read, Topic, "orders2"),
        "a literal is not a prefix"
    );
    assert!(a.authorize(&alice(), "h", Op::Write, Topic, "payments"));
    assert!(a.authorize(&alice(), "h", Op::Write, Topic, "pay"));
    assert!(!a.authorize(&alice(), "h", Op::Write, Topic, "pa"));
    assert!(!a.authorize(&Principal::user("bob"), "h", Op::Read, Topic, "orders"));
    assert!(!a.authorize(
        &Principal::parse("Group:alice").unwrap(),
        "h",
        Op::Read,
        Topic,
        "orders"
    ));
    assert!(a.authorize(&alice(), "10.0.0.1", Op::Read, Group, "g"));
    assert!(!a.authorize(&alice(), "10.0.0.2", Op::Read, Group, "g"));
    // Resource types do not mix.
    assert!(!a.authorize(&alice(), "h", Op::Read, Group, "orders"));
}

#[test]
fn implied_operations_hold_for_allow_only() {
    for op in [Op::Read, Op::Write, Op::Delete, Op::Alter] {
        let a = Authorizer::new(
            vec![acl(Topic, "t", Literal, "User:alice", op, Allow)],
            vec![],
            false,
        );
        assert!(
            a.authorize(&alice(), "h", Op::Describe, Topic, "t"),
            "{op:?} implies Describe"
        );
    }
    let a = Authorizer::new(
        vec![acl(
            Topic,
            "t",
            Literal,
            "User:alice",
            Op::AlterConfigs,
            Allow,
        )],
        vec![],
        false,
    );
    assert!(a.authorize(&alice(), "h", Op::DescribeConfigs, Topic, "t"));
    assert!(!a.authorize(&alice(), "h", Op::Describe, Topic, "t"));
    let a = Authorizer::new(
        vec![acl(Topic, "t", Literal, "User:alice", Op::Read, Allow)],
        vec![],
        false,
    );
    assert!(!a.authorize(&alice(), "h", Op::Write, Topic, "t"));
    // A DENY of READ does not deny DESCRIBE (`findResult`).
    let a = Authorizer::new(
        vec![
            acl(Topic, "t", Literal, "User:alice", Op::Describe, Allow),
            acl(Topic, "t", Literal, "User:alice", Op::Read, Deny),
        ],
        vec![],
        false,
    );
    assert!(a.authorize(&alice(), "h", Op::Describe, Topic, "t"));
    assert!(!a.authorize(&alice(), "h", Op::Read, Topic, "t"));
    // ALL allows everything.
    let a = Authorizer::new(
        vec![acl(
            Cluster,
            CLUSTER_NAME,
            Literal,
            "User:alice",
            Op::All,
            Allow,
        )],
        vec![],
        false,
    );
    assert!(a.authorize(&alice(), "h", Op::IdempotentWrite, Cluster, CLUSTER_NAME));
}

#[test]
fn super_users_override_denies() {
    let a = Authorizer::new(
        vec![acl(Group, "g", Literal, "User:*", Op::All, Deny)],
        parse_super_users("User:admin; User:alice").unwrap(),
        false,
    );
    assert!(a.authorize(&alice(), "h", Op::Read, Group, "g"));
    assert!(!a.authorize(&Principal::user("bob"), "h", Op::Read, Group, "g"));
    assert!(parse_super_users("admin").is_err());
}

#[test]
fn authorized_operations_is_the_allowed_supported_set() {
    let a = Authorizer::new(
        vec![acl(Group, "g", Literal, "User:alice", Op::Read, Allow)],
        vec![],
        false,
    );
    let bits = a.authorized_operations(&alice(), "h", Group, "g");
    assert_eq!(
        bits,
        (1 << 3) | (1 << 8),
        "Read and the Describe it implies"
    );
    let open = Authorizer::new(vec![], vec![], true);
    assert_eq!(open.authorized_operations(&alice(), "h", Group, "g"), 3400);
    assert_eq!(open.authorized_operations(&alice(), "h", Topic, "t"), 3576);
}

fn filter(rt: ResourceType, name: Option<&str>, pt: PatternType) -> AclBindingFilter {
    let mut f = AclBindingFilter::any();
    f.pattern = ResourcePatternFilter {
        resource_type: rt,
        name: name.map(Into::into),
        pattern_type: pt,
    };
    f
}

#[test]
fn filters_match_as_kafkas() {
    let lit = acl(Topic, "orders", Literal, "User:alice", Op::Read, Allow);
    let wild = acl(Topic, "*", Literal, "User:alice", Op::Read, Allow);
    let pre = acl(Topic, "ord", Prefixed, "User:alice", Op::Read, Allow);
    let other = acl(Topic, "x", Prefixed, "User:alice", Op::Read, Allow);
    let grp = acl(Group, "orders", Literal, "User:bob", Op::Read, Deny);
    let all = [
        lit.clone(),
        wild.clone(),
        pre.clone(),
        other.clone(),
        grp.clone(),
    ];
    let sel = |f: &AclBindingFilter| {
        all.iter()
            .filter(|b| f.matches(b))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(sel(&AclBindingFilter::any()).len(), 5);
    assert_eq!(
        sel(&filter(Topic, Some("orders"), PatternType::Match)),
        vec![lit.clone(), wild.clone(), pre.clone()]
    );
    assert_eq!(
        sel(&filter(Topic, Some("orders"), Literal)),
        vec![lit.clone()]
    );
    assert_eq!(
        sel(&filter(Topic, Some("orders"), PatternType::Any)),
        vec![lit.clone()]
    );
    assert_eq!(
        sel(&filter(Topic, Some("ord"), Prefixed)),
        vec![pre.clone()]
    );
    assert_eq!(
        sel(&filter(Topic, None, Prefixed)),
        vec![pre.clone(), other.clone()]
    );
    assert_eq!(
        sel(&filter(ResourceType::Any, Some("orders"), PatternType::Any)),
        vec![lit.clone(), grp.clone()]
    );
    let mut f = AclBindingFilter::any();
    f.entry.principal = Some("User:bob".into());
    assert_eq!(sel(&f), vec![grp.clone()]);
    f.entry.permission = Allow;
    assert!(sel(&f).is_empty());
    let mut f = AclBindingFilter::any();
    f.entry.host = Some("10.0.0.1".into());
    assert!(
        sel(&f).is_empty(),
        "a host filter is exact, '*' is not a wildcard here"
    );
    assert!(filter(ResourceType::Unknown, None, PatternType::Any).is_unknown());
}

#[test]
fn create_validation_gives_kafkas_messages() {
    let ok = acl(Topic, "t", Literal, "User:alice", Op::Read, Allow);
    assert_eq!(validate_new_acl(&ok), Ok(()));
    let mut b = ok.clone();
    b.pattern.resource_type = Cluster;
    assert_eq!(
        validate_new_acl(&b).unwrap_err(),
        "The only valid name for the CLUSTER resource is kafka-cluster"
    );
    b.pattern.name = CLUSTER_NAME.into();
    assert_eq!(validate_new_acl(&b), Ok(()));
    let mut b = ok.clone();
    b.pattern.name.clear();
    assert_eq!(
        validate_new_acl(&b).unwrap_err(),
        "Invalid empty resource name"
    );
    let mut b = ok.clone();
    b.pattern.pattern_type = PatternType::Match;
    assert_eq!(
        validate_new_acl(&b).unwrap_err(),
        "Invalid patternType MATCH"
    );
    let mut b = ok.clone();
    b.pattern.resource_type = ResourceType::Any;
    assert_eq!(
        validate_new_acl(&b).unwrap_err(),
        "Invalid resourceType ANY"
    );
    let mut b = ok.clone();
    b.entry.operation = Op::Any;
    assert_eq!(validate_new_acl(&b).unwrap_err(), "Invalid operation ANY");
    let mut b = ok.clone();
    b.entry.permission = AclPermissionType::Any;
    assert_eq!(
        validate_new_acl(&b).unwrap_err(),
        "Invalid permissionType ANY"
    );
    let mut b = ok;
    b.entry.principal = "alice".into();
    assert!(validate_new_acl(&b)
        .unwrap_err()
        .starts_with("Could not parse principal from `alice`"));
}

#[test]
fn the_file_round_trips_and_corruption_is_named() {
    let set = vec![
        acl(Topic, "orders", Literal, "User:alice", Op::Read, Allow),
        acl_host(
            Group,
            "g",
            Prefixed,
            "User:CN=x,O=y",
            "10.0.0.1",
            Op::All,
            Deny,
        ),
    ];
    let bytes = encode(&set);
    assert_eq!(decode(&bytes).unwrap(), set);
    assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
    let mut bad = bytes.clone();
    bad[20] ^= 1;
    assert!(matches!(decode(&bad), Err(AclFileError::Checksum { .. })));
    assert_eq!(
        decode(b"not an acl file at all"),
        Err(AclFileError::BadMagic)
    );
    assert!(matches!(
        decode(&bytes[..10]),
        Err(AclFileError::Truncated(_))
    ));
    // A truncated body with a valid checksum (a lying count) is refused, not trusted.
    let mut body = bytes[..bytes.len() - 4].to_vec();
    body[10..14].copy_from_slice(&1000u32.to_be_bytes());
    let crc = crc32c::crc32c(&body);
    body.extend_from_slice(&crc.to_be_bytes());
    assert!(matches!(decode(&body), Err(AclFileError::Truncated(_))));
}

#[test]
fn tool_names_parse_as_kafka_security_utils() {
    // `SecurityUtils.operation`: PascalCase, or any case without underscores.
    for (text, op) in [
        ("Read", AclOperation::Read),
        ("ClusterAction", AclOperation::ClusterAction),
        ("CLUSTERACTION", AclOperation::ClusterAction),
        ("clusteraction", AclOperation::ClusterAction),
        ("IdempotentWrite", AclOperation::IdempotentWrite),
        ("All", AclOperation::All),
        ("cluster_action", AclOperation::Unknown),
        ("Reads", AclOperation::Unknown),
        ("", AclOperation::Unknown),
    ] {
        assert_eq!(AclOperation::from_tool_name(text), op, "{text}");
    }
    assert_eq!(AclOperation::DescribeConfigs.tool_name(), "DescribeConfigs");
    assert_eq!(ResourceType::TransactionalId.tool_name(), "TransactionalId");
    for op in AclOperation::ALL_VALUES {
        assert_eq!(AclOperation::from_tool_name(&op.tool_name()), *op);
    }
}

#[test]
fn authorize_by_resource_type_follows_kafkas_default_authorizer() {
    let write = |name: &str, pt, perm| acl(Topic, name, pt, "User:alice", Op::Write, perm);
    let by_type = |bindings: Vec<AclBinding>, allow_if_no_acl| {
        Authorizer::new(bindings, vec![], allow_if_no_acl).authorize_by_resource_type(
            &alice(),
            "10.0.0.1",
            Op::Write,
            Topic,
        )
    };
    // No ACL at all: allow.everyone.if.no.acl.found decides (the hard-coded name check).
    assert!(by_type(vec![], true));
    assert!(!by_type(vec![], false));
    // One literal allow is enough; a literal deny of the same name cancels it.
    assert!(by_type(vec![write("t1", Literal, Allow)], false));
    assert!(!by_type(
        vec![write("t1", Literal, Allow), write("t1", Literal, Deny)],
        false
    ));
    // A prefixed deny dominates the allows it is a prefix of, not the others.
    assert!(!by_type(
        vec![write("abc", Literal, Allow), write("ab", Prefixed, Deny)],
        false
    ));
    assert!(by_type(
        vec![write("abc", Literal, Allow), write("x", Prefixed, Deny)],
        false
    ));
    // A wildcard deny refuses everything; a wildcard allow allows.
    assert!(!by_type(
        vec![write("t1", Literal, Allow), write("*", Literal, Deny)],
        true
    ));
    assert!(by_type(vec![write("*", Literal, Allow)], false));
    // Another principal's, another operation's allow does not count; ALL does.
    assert!(!by_type(
        vec![acl(Topic, "t1", Literal, "User:bob", Op::Write, Allow)],
        false
    ));
    assert!(!by_type(
        vec![acl(Topic, "t1", Literal, "User:alice", Op::Read, Allow)],
        false
    ));
    assert!(by_type(
        vec![acl(Topic, "t1", Literal, "User:alice", Op::All, Allow)],
        false
    ));
    assert!(by_type(
        vec![acl(Topic, "t1", Literal, "User:*", Op::Write, Allow)],
        false
    ));
}
