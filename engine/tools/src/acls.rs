//! `ringleader acls`: add, remove and list ACLs over the Kafka wire protocol (CreateAcls /
//! DeleteAcls / DescribeAcls), with the options and output of Kafka's `kafka-acls.sh`
//! (`tools/src/main/java/org/apache/kafka/tools/AclCommand.java`).
//!
//! The ACL model (resource and pattern types, operations, bindings, their printed forms) is
//! `security::acl`'s. The command line expands as AclCommand's does: every resource option
//! (`--topic`, `--group`, `--transactional-id`, `--cluster`, ...) times every principal, host and
//! operation; `--producer` / `--consumer` stand for the operations those roles need. Kafka keeps
//! these in hash sets; here they are sorted, so the output is the same from run to run.
//!
//! A client like `ringleader groups` (whose connection it reuses): it runs against Ringleader or
//! any Kafka broker. Exit codes: 0 ok, 1 failure, 2 bad arguments.

use crate::groups::{error_name, AdminConnection, ApiSpec};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use security::acl::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;
use wire::{Request, Response};

/// `ringleader acls`: add, remove and list ACLs (like kafka-acls.sh).
#[derive(clap::Args, Debug, Default)]
pub struct AclsArgs {
    /// Broker to connect to, host:port.
    #[arg(long, alias = "bootstrap", default_value = "127.0.0.1:9092")]
    pub bootstrap_server: String,
    /// Add ACLs.
    #[arg(long)]
    pub add: bool,
    /// Remove ACLs.
    #[arg(long)]
    pub remove: bool,
    /// List ACLs (of the resources given with --topic, --group, --cluster, ...; else all).
    #[arg(long)]
    pub list: bool,
    /// A topic (repeatable; '*' is every topic).
    #[arg(long)]
    pub topic: Vec<String>,
    /// A consumer group (repeatable; '*' is every group).
    #[arg(long)]
    pub group: Vec<String>,
    /// A transactional id (repeatable; '*' is every one).
    #[arg(long)]
    pub transactional_id: Vec<String>,
    /// The cluster resource (`kafka-cluster`).
    #[arg(long)]
    pub cluster: bool,
    /// A delegation token (repeatable).
    #[arg(long)]
    pub delegation_token: Vec<String>,
    /// A user principal as a resource, for CreateTokens / DescribeTokens (repeatable).
    #[arg(long)]
    pub user_principal: Vec<String>,
    /// literal or prefixed when adding; literal, prefixed, any or match when listing or
    /// removing (any: every pattern type with exactly this name; match: every ACL that applies
    /// to the name). Default literal, as kafka-acls.sh.
    #[arg(long, value_name = "literal|prefixed|any|match")]
    pub resource_pattern_type: Option<String>,
    /// Operation allowed or denied (repeatable): Read, Write, Create, Delete, Alter, Describe,
    /// ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens,
    /// DescribeTokens, All.
    #[arg(long)]
    pub operation: Vec<String>,
    /// Principal to allow, Type:name (repeatable; User:* is every user).
    #[arg(long)]
    pub allow_principal: Vec<String>,
    /// Principal to deny, Type:name (repeatable). A DENY wins over any ALLOW.
    #[arg(long)]
    pub deny_principal: Vec<String>,
    /// Host the allowed principals may connect from (repeatable; default '*').
    #[arg(long)]
    pub allow_host: Vec<String>,
    /// Host the denied principals are denied from (repeatable; default '*').
    #[arg(long)]
    pub deny_host: Vec<String>,
    /// With --list: only this principal's ACLs (repeatable).
    #[arg(long)]
    pub principal: Vec<String>,
    /// The producer role: Write, Describe and Create on --topic, Write and Describe on
    /// --transactional-id (and IdempotentWrite on the cluster with --idempotent).
    #[arg(long)]
    pub producer: bool,
    /// The consumer role: Read and Describe on --topic, Read on --group.
    #[arg(long)]
    pub consumer: bool,
    /// With --producer: IdempotentWrite on the cluster.
    #[arg(long)]
    pub idempotent: bool,
    /// Remove without asking for confirmation.
    #[arg(long)]
    pub force: bool,
    /// Timeout for connecting and for each request.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
}

const DESCRIBE_ACLS: ApiSpec = ApiSpec {
    key: 29,
    name: "DescribeAcls",
    min: 1,
    max: 3,
};
const CREATE_ACLS: ApiSpec = ApiSpec {
    key: 30,
    name: "CreateAcls",
    min: 1,
    max: 3,
};
const DELETE_ACLS: ApiSpec = ApiSpec {
    key: 31,
    name: "DeleteAcls",
    min: 1,
    max: 3,
};

/// Resource patterns (filters, for --list and --remove) and the entries the command line names
/// for each. A filter's name is always given here, so a [`ResourcePattern`] holds it and prints
/// as Kafka's `ResourcePatternFilter.toString` does.
type Plan = BTreeMap<ResourcePattern, BTreeSet<AccessControlEntry>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Add,
    Remove,
    List,
}

pub fn run(args: &AclsArgs, out: &mut dyn Write) -> i32 {
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal();
    run_with_input(args, out, &mut stdin.lock(), interactive)
}

/// [`run`] with the confirmation prompts of --remove read from `input` (asked only when
/// `interactive`; otherwise --remove without --force is refused rather than left waiting).
pub fn run_with_input(
    args: &AclsArgs,
    out: &mut dyn Write,
    input: &mut dyn BufRead,
    interactive: bool,
) -> i32 {
    let code = match check_args(args) {
        Err(e) => usage(out, &e),
        Ok((action, pattern_type)) => {
            let planned = match action {
                Action::List => Ok(Plan::new()),
                _ => plan(args, pattern_type),
            };
            match planned {
                Err(e) => usage(out, &e),
                Ok(p) => {
                    let result = match action {
                        Action::Add => add(args, &p, out),
                        Action::Remove => remove(args, &p, out, input, interactive),
                        Action::List => list(args, pattern_type, out),
                    };
                    match result {
                        Ok(code) => code,
                        Err(e) => {
                            // AclCommand's words for any failure once the arguments are valid.
                            let _ = writeln!(out, "Error while executing ACL command: {e}");
                            1
                        }
                    }
                }
            }
        }
    };
    let _ = out.flush();
    code
}

fn usage(out: &mut dyn Write, what: &str) -> i32 {
    let _ = writeln!(
        out,
        "Error: {what}\nTry 'ringleader acls --help' for usage."
    );
    2
}

/// `AclCommandOptions.checkArgs`, with its messages; then the pattern type.
fn check_args(a: &AclsArgs) -> Result<(Action, PatternType), String> {
    let action = match (a.add, a.remove, a.list) {
        (true, false, false) => Action::Add,
        (false, true, false) => Action::Remove,
        (false, false, true) => Action::List,
        _ => {
            return Err("Command must include exactly one action: --list, --add, --remove.".into())
        }
    };
    let invalid_with = |option: &str, given: &[(&str, bool)]| -> Result<(), String> {
        match given.iter().find(|(_, has)| *has) {
            Some((other, _)) => Err(format!("Option --{option} can't be used with --{other}")),
            None => Ok(()),
        }
    };
    if action == Action::List {
        invalid_with(
            "list",
            &[
                ("producer", a.producer),
                ("consumer", a.consumer),
                ("allow-host", !a.allow_host.is_empty()),
                ("allow-principal", !a.allow_principal.is_empty()),
                ("deny-host", !a.deny_host.is_empty()),
                ("deny-principal", !a.deny_principal.is_empty()),
            ],
        )?;
    }
    for (role, on) in [("producer", a.producer), ("consumer", a.consumer)] {
        if on {
            invalid_with(
                role,
                &[
                    ("operation", !a.operation.is_empty()),
                    ("deny-principal", !a.deny_principal.is_empty()),
                    ("deny-host", !a.deny_host.is_empty()),
                ],
            )?;
        }
    }
    if !a.principal.is_empty() && action != Action::List {
        return Err("The --principal option is only available if --list is set".into());
    }
    if a.producer && a.topic.is_empty() {
        return Err("With --producer you must specify a --topic".into());
    }
    if a.idempotent && !a.producer {
        return Err("The --idempotent option is only available if --producer is set".into());
    }
    if a.consumer
        && (a.topic.is_empty()
            || a.group.is_empty()
            || (!a.producer && (a.cluster || !a.transactional_id.is_empty())))
    {
        return Err(
            "With --consumer you must specify a --topic and a --group and no --cluster or \
                    --transactional-id option should be specified."
                .into(),
        );
    }
    let pattern_type = match a.resource_pattern_type.as_deref() {
        None => PatternType::Literal,
        Some(text) => match PatternType::parse(text) {
            PatternType::Unknown => return Err(format!("Unknown resource-pattern-type: {text}")),
            p => p,
        },
    };
    if action == Action::Add
        && !matches!(pattern_type, PatternType::Literal | PatternType::Prefixed)
    {
        return Err(format!(
            "A '--resource-pattern-type' value of '{pattern_type}' is not valid when adding acls."
        ));
    }
    Ok((action, pattern_type))
}

/// `getResourceFilter`: the resources the options name, each with the pattern type. The cluster
/// is named only with a literal pattern type, as in AclCommand.
fn resource_filters(
    a: &AclsArgs,
    pattern_type: PatternType,
    must_name_one: bool,
) -> Result<BTreeSet<ResourcePattern>, String> {
    let mut out = BTreeSet::new();
    let mut put = |resource_type, name: &str| {
        out.insert(ResourcePattern {
            resource_type,
            name: name.to_string(),
            pattern_type,
        });
    };
    for t in &a.topic {
        put(ResourceType::Topic, t.trim());
    }
    if pattern_type == PatternType::Literal && (a.cluster || a.idempotent) {
        put(ResourceType::Cluster, CLUSTER_NAME);
    }
    for g in &a.group {
        put(ResourceType::Group, g.trim());
    }
    // AclCommand does not trim transactional ids.
    for t in &a.transactional_id {
        put(ResourceType::TransactionalId, t);
    }
    for t in &a.delegation_token {
        put(ResourceType::DelegationToken, t.trim());
    }
    for u in &a.user_principal {
        put(ResourceType::User, u.trim());
    }
    if out.is_empty() && must_name_one {
        return Err(
            "You must provide at least one resource: --topic <topic> or --cluster or \
                    --group <group> or --delegation-token <Delegation Token ID>"
                .into(),
        );
    }
    Ok(out)
}

/// `SecurityUtils.parseKafkaPrincipal`: `Type:name`, split at the first ':'.
fn principals(values: &[String]) -> Result<BTreeSet<String>, String> {
    values
        .iter()
        .map(|v| {
            let v = v.trim();
            match v.split_once(':') {
                Some((t, n)) => Ok(format!("{t}:{n}")),
                None => Err(format!(
                    "expected a string in format principalType:principalName but got {v}"
                )),
            }
        })
        .collect()
}

/// The --operation values (default All).
fn cli_operations(a: &AclsArgs) -> Result<BTreeSet<AclOperation>, String> {
    if a.operation.is_empty() {
        return Ok([AclOperation::All].into());
    }
    a.operation
        .iter()
        .map(|text| match AclOperation::from_tool_name(text.trim()) {
            AclOperation::Unknown | AclOperation::Any => {
                let valid: Vec<String> = AclOperation::ALL_VALUES
                    .iter()
                    .filter(|o| !matches!(o, AclOperation::Unknown | AclOperation::Any))
                    .map(|o| o.tool_name())
                    .collect();
                Err(format!(
                    "Unknown operation '{text}'; valid operations are {}",
                    valid.join(", ")
                ))
            }
            op => Ok(op),
        })
        .collect()
}

/// `getAcl`: every allowed principal x allowed host x operation, and the same for denied ones;
/// a host list defaults to '*' when principals are given.
fn entries(
    a: &AclsArgs,
    operations: &BTreeSet<AclOperation>,
) -> Result<BTreeSet<AccessControlEntry>, String> {
    let mut out = BTreeSet::new();
    for (principal_values, host_values, permission) in [
        (&a.allow_principal, &a.allow_host, AclPermissionType::Allow),
        (&a.deny_principal, &a.deny_host, AclPermissionType::Deny),
    ] {
        let principals = principals(principal_values)?;
        let hosts: BTreeSet<String> = if host_values.is_empty() {
            [WILDCARD.to_string()].into()
        } else {
            host_values.iter().map(|h| h.trim().to_string()).collect()
        };
        for principal in &principals {
            for operation in operations {
                for host in &hosts {
                    out.insert(AccessControlEntry {
                        principal: principal.clone(),
                        host: host.clone(),
                        operation: *operation,
                        permission,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// `getResourceFilterToAcls`: what --add adds or --remove removes, per resource, then
/// `validateOperation` (an operation the resource type does not support is refused) and, for
/// --add, at least one principal per resource.
fn plan(a: &AclsArgs, pattern_type: PatternType) -> Result<Plan, String> {
    use AclOperation::*;
    let mut plan = Plan::new();
    let resources = resource_filters(a, pattern_type, true)?;
    let of_type = |t: ResourceType| resources.iter().filter(move |r| r.resource_type == t);
    if !a.producer && !a.consumer {
        let acls = entries(a, &cli_operations(a)?)?;
        for r in &resources {
            plan.insert(r.clone(), acls.clone());
        }
    }
    if a.producer {
        let topic_acls = entries(a, &[Write, Describe, Create].into())?;
        let txn_acls = entries(a, &[Write, Describe].into())?;
        for r in of_type(ResourceType::Topic) {
            plan.insert(r.clone(), topic_acls.clone());
        }
        for r in of_type(ResourceType::TransactionalId) {
            plan.insert(r.clone(), txn_acls.clone());
        }
        if a.idempotent {
            let cluster = ResourcePattern {
                resource_type: ResourceType::Cluster,
                name: CLUSTER_NAME.into(),
                pattern_type: PatternType::Literal,
            };
            plan.insert(cluster, entries(a, &[IdempotentWrite].into())?);
        }
    }
    if a.consumer {
        let topic_acls = entries(a, &[Read, Describe].into())?;
        let group_acls = entries(a, &[Read].into())?;
        for r in of_type(ResourceType::Topic) {
            plan.entry(r.clone())
                .or_default()
                .extend(topic_acls.clone());
        }
        for r in of_type(ResourceType::Group) {
            plan.entry(r.clone())
                .or_default()
                .extend(group_acls.clone());
        }
    }
    for (resource, acls) in &plan {
        let mut valid: Vec<AclOperation> = resource.resource_type.supported_operations().to_vec();
        valid.push(All);
        if acls.iter().any(|e| !valid.contains(&e.operation)) {
            let names: Vec<&str> = valid.iter().map(|o| o.name()).collect();
            return Err(format!(
                "ResourceType {} only supports operations {}",
                resource.resource_type,
                names.join(", ")
            ));
        }
    }
    if a.add && plan.values().any(BTreeSet::is_empty) {
        return Err(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
                .into(),
        );
    }
    Ok(plan)
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn broker_error(code: i16, message: Option<&StrBytes>) -> String {
    match message.map(|m| m.as_str()).filter(|m| !m.is_empty()) {
        Some(m) => format!("{}: {m}", error_name(code)),
        None => error_name(code),
    }
}

fn connect(a: &AclsArgs) -> Result<AdminConnection, String> {
    let timeout = Duration::from_millis(a.timeout_ms.clamp(1, 86_400_000));
    AdminConnection::connect(&a.bootstrap_server, timeout, "ringleader-acls").map_err(|e| e.message)
}

/// DescribeAcls: the ACLs `filter` selects.
fn describe(c: &mut AdminConnection, filter: &AclBindingFilter) -> Result<Vec<AclBinding>, String> {
    let v = c.require(DESCRIBE_ACLS).map_err(|e| e.message)?;
    let p = &filter.pattern;
    let e = &filter.entry;
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(p.resource_type.code())
        .with_resource_name_filter(p.name.as_deref().map(s))
        .with_pattern_type_filter(p.pattern_type.code())
        .with_principal_filter(e.principal.as_deref().map(s))
        .with_host_filter(e.host.as_deref().map(s))
        .with_operation(e.operation.code())
        .with_permission_type(e.permission.code());
    let resp = match c
        .call(v, &Request::DescribeAcls(req))
        .map_err(|e| e.message)?
    {
        Response::DescribeAcls(r) => r,
        _ => return Err("the broker answered DescribeAcls with another response".into()),
    };
    if resp.error_code != 0 {
        return Err(broker_error(resp.error_code, resp.error_message.as_ref()));
    }
    let mut out = Vec::new();
    for r in resp.resources {
        let pattern = ResourcePattern {
            resource_type: ResourceType::from_code(r.resource_type),
            name: r.resource_name.to_string(),
            pattern_type: PatternType::from_code(r.pattern_type),
        };
        for acl in r.acls {
            out.push(AclBinding {
                pattern: pattern.clone(),
                entry: AccessControlEntry {
                    principal: acl.principal.to_string(),
                    host: acl.host.to_string(),
                    operation: AclOperation::from_code(acl.operation),
                    permission: AclPermissionType::from_code(acl.permission_type),
                },
            });
        }
    }
    Ok(out)
}

/// A filter selecting exactly one resource pattern's ACLs (`ResourcePattern.toFilter` with
/// `AccessControlEntryFilter.ANY`).
fn resource_filter(p: &ResourcePattern) -> AclBindingFilter {
    let mut f = AclBindingFilter::any();
    f.pattern = ResourcePatternFilter {
        resource_type: p.resource_type,
        name: Some(p.name.clone()),
        pattern_type: p.pattern_type,
    };
    f
}

/// `AclBinding.toString`.
fn binding_text(b: &AclBinding) -> String {
    format!("(pattern={}, entry={})", b.pattern, b.entry)
}

/// `addAcls`: per resource, the ACLs that already exist are reported, the others created.
fn add(a: &AclsArgs, plan: &Plan, out: &mut dyn Write) -> Result<i32, String> {
    let mut c = connect(a)?;
    for (resource, acls) in plan {
        let existing: BTreeSet<AclBinding> = describe(&mut c, &resource_filter(resource))?
            .into_iter()
            .collect();
        let mut new = Vec::new();
        for entry in acls {
            let binding = AclBinding {
                pattern: resource.clone(),
                entry: entry.clone(),
            };
            if existing.contains(&binding) {
                let _ = writeln!(out, "Acl {} already exists.", binding_text(&binding));
            } else {
                new.push(binding);
            }
        }
        if new.is_empty() {
            continue;
        }
        let lines: Vec<String> = new.iter().map(|b| format!("\t{}", b.entry)).collect();
        let _ = writeln!(
            out,
            "Adding ACLs for resource `{resource}`: \n {}\n",
            lines.join("\n")
        );
        let v = c.require(CREATE_ACLS).map_err(|e| e.message)?;
        let creations: Vec<AclCreation> = new
            .iter()
            .map(|b| {
                AclCreation::default()
                    .with_resource_type(b.pattern.resource_type.code())
                    .with_resource_name(s(&b.pattern.name))
                    .with_resource_pattern_type(b.pattern.pattern_type.code())
                    .with_principal(s(&b.entry.principal))
                    .with_host(s(&b.entry.host))
                    .with_operation(b.entry.operation.code())
                    .with_permission_type(b.entry.permission.code())
            })
            .collect();
        let resp = match c
            .call(
                v,
                &Request::CreateAcls(CreateAclsRequest::default().with_creations(creations)),
            )
            .map_err(|e| e.message)?
        {
            Response::CreateAcls(r) => r,
            _ => return Err("the broker answered CreateAcls with another response".into()),
        };
        if resp.results.len() != new.len() {
            return Err(format!(
                "the broker answered {} CreateAcls creations with {} results",
                new.len(),
                resp.results.len()
            ));
        }
        if let Some(r) = resp.results.iter().find(|r| r.error_code != 0) {
            return Err(broker_error(r.error_code, r.error_message.as_ref()));
        }
    }
    Ok(0)
}

/// `confirmAction`: --force, else ask on a terminal; a run without one is refused.
fn confirm(
    a: &AclsArgs,
    question: &str,
    out: &mut dyn Write,
    input: &mut dyn BufRead,
    interactive: bool,
) -> Result<bool, i32> {
    if a.force {
        return Ok(true);
    }
    if !interactive {
        return Err(usage(
            out,
            "--remove asks for confirmation, and standard input is not a terminal: \
             pass --force to remove without prompting",
        ));
    }
    let _ = writeln!(out, "{question}");
    let _ = out.flush();
    let mut line = String::new();
    let _ = input.read_line(&mut line);
    Ok(line.trim().eq_ignore_ascii_case("y"))
}

/// `removeAcls`: per resource filter, every ACL on it (no principal given) or the entries the
/// command line names, after confirmation.
fn remove(
    a: &AclsArgs,
    plan: &Plan,
    out: &mut dyn Write,
    input: &mut dyn BufRead,
    interactive: bool,
) -> Result<i32, String> {
    let mut c: Option<AdminConnection> = None;
    for (filter, acls) in plan {
        let question = if acls.is_empty() {
            format!(
                "Are you sure you want to delete all ACLs for resource filter `{filter}`? (y/n)"
            )
        } else {
            let lines: Vec<String> = acls.iter().map(|e| format!("\t{e}")).collect();
            format!(
                "Are you sure you want to remove ACLs: \n {}\n from resource filter `{filter}`? (y/n)",
                lines.join("\n")
            )
        };
        match confirm(a, &question, out, input, interactive) {
            Err(code) => return Ok(code),
            Ok(false) => continue,
            Ok(true) => {}
        }
        let base = resource_filter(filter);
        let filters: Vec<AclBindingFilter> = if acls.is_empty() {
            vec![base]
        } else {
            acls.iter()
                .map(|e| {
                    let mut f = base.clone();
                    f.entry = AccessControlEntryFilter {
                        principal: Some(e.principal.clone()),
                        host: Some(e.host.clone()),
                        operation: e.operation,
                        permission: e.permission,
                    };
                    f
                })
                .collect()
        };
        let conn = match &mut c {
            Some(conn) => conn,
            None => c.insert(connect(a)?),
        };
        delete(conn, &filters)?;
    }
    Ok(0)
}

/// DeleteAcls: fails on the first error of a filter or of a matching ACL.
fn delete(c: &mut AdminConnection, filters: &[AclBindingFilter]) -> Result<(), String> {
    let v = c.require(DELETE_ACLS).map_err(|e| e.message)?;
    let wire: Vec<DeleteAclsFilter> = filters
        .iter()
        .map(|f| {
            DeleteAclsFilter::default()
                .with_resource_type_filter(f.pattern.resource_type.code())
                .with_resource_name_filter(f.pattern.name.as_deref().map(s))
                .with_pattern_type_filter(f.pattern.pattern_type.code())
                .with_principal_filter(f.entry.principal.as_deref().map(s))
                .with_host_filter(f.entry.host.as_deref().map(s))
                .with_operation(f.entry.operation.code())
                .with_permission_type(f.entry.permission.code())
        })
        .collect();
    let resp = match c
        .call(
            v,
            &Request::DeleteAcls(DeleteAclsRequest::default().with_filters(wire)),
        )
        .map_err(|e| e.message)?
    {
        Response::DeleteAcls(r) => r,
        _ => return Err("the broker answered DeleteAcls with another response".into()),
    };
    for r in &resp.filter_results {
        if r.error_code != 0 {
            return Err(broker_error(r.error_code, r.error_message.as_ref()));
        }
        if let Some(m) = r.matching_acls.iter().find(|m| m.error_code != 0) {
            return Err(broker_error(m.error_code, m.error_message.as_ref()));
        }
    }
    Ok(())
}

/// `listAcls`: the ACLs of the resources named (all when none), per resource pattern; with
/// --principal, per principal.
fn list(a: &AclsArgs, pattern_type: PatternType, out: &mut dyn Write) -> Result<i32, String> {
    let filters = resource_filters(a, pattern_type, false)?;
    let wanted = principals(&a.principal)?;
    let mut c = connect(a)?;
    let mut by_resource = Plan::new();
    let found = if filters.is_empty() {
        describe(&mut c, &AclBindingFilter::any())?
    } else {
        let mut all = Vec::new();
        for f in &filters {
            all.extend(describe(&mut c, &resource_filter(f))?);
        }
        all
    };
    for b in found {
        by_resource.entry(b.pattern).or_default().insert(b.entry);
    }
    let print = |out: &mut dyn Write, only: Option<&str>| {
        for (resource, acls) in &by_resource {
            let lines: Vec<String> = acls
                .iter()
                .filter(|e| only.is_none_or(|p| e.principal == p))
                .map(|e| format!("\t{e}"))
                .collect();
            if lines.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                "Current ACLs for resource `{resource}`:\n{}\n",
                lines.join("\n")
            );
        }
    };
    if wanted.is_empty() {
        print(out, None);
    } else {
        for p in &wanted {
            let _ = writeln!(out, "ACLs for principal `{p}`");
            print(out, Some(p));
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: AclsArgs,
    }

    fn args(line: &[&str]) -> AclsArgs {
        Cli::try_parse_from(std::iter::once("acls").chain(line.iter().copied()))
            .unwrap()
            .args
    }

    fn planned(line: &[&str]) -> Result<Vec<String>, String> {
        let a = args(line);
        let (_, pt) = check_args(&a)?;
        Ok(plan(&a, pt)?
            .iter()
            .flat_map(|(r, es)| es.iter().map(move |e| format!("{r} {e}")))
            .collect())
    }

    #[test]
    fn producer_and_consumer_expand_as_acl_command() {
        let got = planned(&[
            "--add",
            "--producer",
            "--consumer",
            "--idempotent",
            "--allow-principal",
            "User:alice",
            "--topic",
            "orders",
            "--group",
            "g",
            "--transactional-id",
            "tx",
        ])
        .unwrap();
        let ops = |rt: &str, name: &str, ops: &[&str]| -> Vec<String> {
            ops.iter()
                .map(|op| {
                    format!(
                        "ResourcePattern(resourceType={rt}, name={name}, patternType=LITERAL) \
                         (principal=User:alice, host=*, operation={op}, permissionType=ALLOW)"
                    )
                })
                .collect()
        };
        let mut want = ops("TOPIC", "orders", &["READ", "WRITE", "CREATE", "DESCRIBE"]);
        want.extend(ops("GROUP", "g", &["READ"]));
        want.extend(ops("CLUSTER", "kafka-cluster", &["IDEMPOTENT_WRITE"]));
        want.extend(ops("TRANSACTIONAL_ID", "tx", &["WRITE", "DESCRIBE"]));
        assert_eq!(got, want);
    }

    #[test]
    fn entries_cross_principals_hosts_and_operations() {
        let got = planned(&[
            "--add",
            "--allow-principal",
            "User:a",
            "--deny-principal",
            "User:b",
            "--deny-host",
            "10.0.0.1",
            "--operation",
            "Read",
            "--operation",
            "describe",
            "--topic",
            "t",
            "--resource-pattern-type",
            "PREFIXED",
        ])
        .unwrap();
        let p = "ResourcePattern(resourceType=TOPIC, name=t, patternType=PREFIXED)";
        assert_eq!(
            got,
            vec![
                format!("{p} (principal=User:a, host=*, operation=READ, permissionType=ALLOW)"),
                format!("{p} (principal=User:a, host=*, operation=DESCRIBE, permissionType=ALLOW)"),
                format!(
                    "{p} (principal=User:b, host=10.0.0.1, operation=READ, permissionType=DENY)"
                ),
                format!(
                    "{p} (principal=User:b, host=10.0.0.1, operation=DESCRIBE, permissionType=DENY)"
                ),
            ]
        );
    }

    #[test]
    fn refusals_have_acl_command_messages() {
        let err = |line: &[&str]| planned(line).unwrap_err();
        assert!(err(&["--add", "--list"]).contains("exactly one action"));
        assert!(err(&["--add", "--topic", "t"]).contains("You must specify one of"));
        assert!(err(&["--add", "--allow-principal", "User:a"]).contains("at least one resource"));
        assert!(err(&[
            "--add",
            "--allow-principal",
            "User:a",
            "--topic",
            "t",
            "--resource-pattern-type",
            "match"
        ])
        .contains("'MATCH' is not valid when adding"));
        assert_eq!(
            err(&[
                "--add",
                "--allow-principal",
                "User:a",
                "--group",
                "g",
                "--operation",
                "Write"
            ]),
            "ResourceType GROUP only supports operations READ, DESCRIBE, DELETE, \
             DESCRIBE_CONFIGS, ALTER_CONFIGS, ALL"
        );
        assert!(
            err(&["--add", "--allow-principal", "alice", "--topic", "t"])
                .contains("principalType:principalName")
        );
        assert!(err(&[
            "--add",
            "--allow-principal",
            "User:a",
            "--topic",
            "t",
            "--operation",
            "cluster_action"
        ])
        .starts_with("Unknown operation 'cluster_action'"));
        assert!(err(&["--list", "--allow-principal", "User:a"]).contains("can't be used"));
        assert!(err(&["--remove", "--principal", "User:a", "--topic", "t"])
            .contains("only available if --list"));
        assert!(err(&["--add", "--consumer", "--topic", "t"]).contains("With --consumer"));
        assert!(err(&["--list", "--resource-pattern-type", "x"]).contains("Unknown resource"));
    }

    #[test]
    fn remove_without_force_is_refused_when_not_interactive() {
        let a = args(&[
            "--remove",
            "--topic",
            "t",
            "--bootstrap-server",
            "127.0.0.1:1",
        ]);
        let mut out = Vec::new();
        let code = run_with_input(&a, &mut out, &mut &b""[..], false);
        assert_eq!(code, 2);
        assert!(String::from_utf8(out).unwrap().contains("pass --force"));
        // Answered "n" on a terminal: nothing is asked of the broker (port 1 would fail).
        let mut out = Vec::new();
        let code = run_with_input(&a, &mut out, &mut &b"n\n"[..], true);
        assert_eq!(code, 0);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Are you sure you want to delete all ACLs for resource filter \
             `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`? (y/n)\n"
        );
    }
}
