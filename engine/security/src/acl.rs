//! Kafka's ACL model and its standard authorizer, as pure data and rules.
//!
//! The enums carry Kafka's wire codes (`clients/src/main/java/org/apache/kafka/common/resource/
//! ResourceType.java`, `PatternType.java`, `common/acl/AclOperation.java`,
//! `AclPermissionType.java`). [`AclBinding`] / [`AclBindingFilter`] and their matching follow
//! `common/acl/AclBindingFilter.java` and `common/resource/ResourcePatternFilter.java`;
//! [`validate_new_acl`] is what CreateAcls refuses (`core/src/main/scala/kafka/server/
//! AclApis.scala` then `metadata/src/main/java/org/apache/kafka/controller/AclControlManager.java`
//! `validateNewAcl`). [`Authorizer`] decides as `metadata/src/main/java/org/apache/kafka/metadata/
//! authorizer/StandardAuthorizerData.java` does: super users first, then every ACL on the
//! resource (literal name, the literal wildcard `*`, every prefix), a matching DENY wins, else a
//! matching ALLOW, else — when no ACL names the resource at all —
//! `allow.everyone.if.no.acl.found`.
//!
//! [`encode`] / [`decode`] are the durable form of an ACL set (the broker writes it whole).

use crate::principal::Principal;
use std::collections::HashMap;
use std::fmt;

macro_rules! code_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $code:literal, $text:literal;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($variant),* }

        impl $name {
            pub const ALL_VALUES: &'static [$name] = &[$($name::$variant),*];

            /// The wire code.
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code),* }
            }

            /// Kafka's `fromCode`: a code it does not know is `Unknown`.
            pub fn from_code(code: i8) -> Self {
                match code { $($code => $name::$variant,)* _ => $name::Unknown }
            }

            /// Kafka's `fromString` (case-insensitive; `Unknown` for anything else).
            pub fn parse(text: &str) -> Self {
                let t = text.to_ascii_uppercase().replace('-', "_");
                match t.as_str() { $($text => $name::$variant,)* _ => $name::Unknown }
            }

            /// Kafka's `SecurityUtils` lookup, as `kafka-acls.sh --operation` parses: the
            /// PascalCase name (`ClusterAction`) in any case, without underscores
            /// (`CLUSTERACTION`); `Unknown` for anything else (`cluster_action` too).
            pub fn from_tool_name(text: &str) -> Self {
                Self::ALL_VALUES
                    .iter()
                    .copied()
                    .find(|v| {
                        let n = v.name();
                        n.len() - n.matches('_').count() == text.len()
                            && n.bytes()
                                .filter(|b| *b != b'_')
                                .zip(text.bytes())
                                .all(|(a, b)| a.eq_ignore_ascii_case(&b))
                    })
                    .unwrap_or($name::Unknown)
            }

            /// The PascalCase name Kafka's tools show (`SecurityUtils.operationName`):
            /// `ClusterAction`.
            pub fn tool_name(self) -> String {
                let mut out = String::new();
                let mut upper = true;
                for c in self.name().chars() {
                    if c == '_' {
                        upper = true;
                    } else if upper {
                        out.push(c.to_ascii_uppercase());
                        upper = false;
                    } else {
                        out.push(c.to_ascii_lowercase());
                    }
                }
                out
            }

            /// The name Kafka prints (`TOPIC`, `LITERAL`, `READ`, `ALLOW`).
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

code_enum!(
    /// `org.apache.kafka.common.resource.ResourceType`.
    ResourceType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
);

code_enum!(
    /// `org.apache.kafka.common.resource.PatternType`.
    PatternType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Match = 2, "MATCH";
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
);

code_enum!(
    /// `org.apache.kafka.common.acl.AclOperation`.
    AclOperation {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
);

code_enum!(
    /// `org.apache.kafka.common.acl.AclPermissionType`.
    AclPermissionType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
);

/// The only name a CLUSTER resource has (`Resource.CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The resource name / host matching every one (`ResourcePattern.WILDCARD_RESOURCE`,
/// `AccessControlEntry` wildcard host).
pub const WILDCARD: &str = "*";

/// The principal matching every one (`StandardAuthorizerData.WILDCARD_PRINCIPAL`).
pub const WILDCARD_PRINCIPAL: &str = "User:*";

impl ResourceType {
    /// The operations a resource of this type supports, as an authorized-operations request
    /// tests them (`core/src/main/scala/kafka/security/authorizer/AclEntry.scala`
    /// `supportedOperations`).
    pub fn supported_operations(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            _ => &[],
        }
    }
}

/// A resource, or a set of them by prefix (`ResourcePattern`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourcePattern {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
}

/// Who may (or may not) do what from where (`AccessControlEntry`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessControlEntry {
    /// `Type:name` as the request carried it.
    pub principal: String,
    pub host: String,
    pub operation: AclOperation,
    pub permission: AclPermissionType,
}

/// One ACL (`AclBinding`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub pattern: ResourcePattern,
    pub entry: AccessControlEntry,
}

impl fmt::Display for ResourcePattern {
    /// As `ResourcePattern.toString` prints (kafka-acls.sh shows it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            self.resource_type, self.name, self.pattern_type
        )
    }
}

impl fmt::Display for AccessControlEntry {
    /// As kafka-acls.sh prints an entry (`AccessControlEntry.toString` without its class name).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(principal={}, host={}, operation={}, permissionType={})",
            self.principal, self.host, self.operation, self.permission
        )
    }
}

/// A filter on resource patterns (`ResourcePatternFilter`); `None` name matches any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePatternFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern_type: PatternType,
}

/// A filter on entries (`AccessControlEntryFilter`); `None` matches any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessControlEntryFilter {
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission: AclPermissionType,
}

/// What DescribeAcls and DeleteAcls select (`AclBindingFilter`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    pub pattern: ResourcePatternFilter,
    pub entry: AccessControlEntryFilter,
}

impl ResourcePatternFilter {
    /// `ResourcePatternFilter.matches`: MATCH selects the literal pattern of that name, the
    /// literal wildcard and every prefix pattern the name starts with.
    pub fn matches(&self, p: &ResourcePattern) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != p.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != p.pattern_type
        {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == p.pattern_type {
            return *name == p.name;
        }
        // MATCH against a stored pattern.
        match p.pattern_type {
            PatternType::Literal => *name == p.name || p.name == WILDCARD,
            PatternType::Prefixed => name.starts_with(p.name.as_str()),
            _ => false,
        }
    }

    /// `ResourcePatternFilter.isUnknown`.
    pub fn is_unknown(&self) -> bool {
        self.resource_type == ResourceType::Unknown || self.pattern_type == PatternType::Unknown
    }
}

impl AccessControlEntryFilter {
    /// `AccessControlEntryFilter.matches`.
    pub fn matches(&self, e: &AccessControlEntry) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == e.principal)
            && self.host.as_ref().is_none_or(|h| *h == e.host)
            && (self.operation == AclOperation::Any || self.operation == e.operation)
            && (self.permission == AclPermissionType::Any || self.permission == e.permission)
    }

    pub fn is_unknown(&self) -> bool {
        self.operation == AclOperation::Unknown || self.permission == AclPermissionType::Unknown
    }
}

impl AclBindingFilter {
    /// Everything (`AclBindingFilter.ANY`).
    pub fn any() -> Self {
        Self {
            pattern: ResourcePatternFilter {
                resource_type: ResourceType::Any,
                name: None,
                pattern_type: PatternType::Any,
            },
            entry: AccessControlEntryFilter {
                principal: None,
                host: None,
                operation: AclOperation::Any,
                permission: AclPermissionType::Any,
            },
        }
    }

    pub fn matches(&self, b: &AclBinding) -> bool {
        self.pattern.matches(&b.pattern) && self.entry.matches(&b.entry)
    }

    /// A filter with an UNKNOWN element: Kafka refuses the request that carries one while
    /// parsing it (`DescribeAclsRequest.validate`, `DeleteAclsRequest.validate`).
    pub fn is_unknown(&self) -> bool {
        self.pattern.is_unknown() || self.entry.is_unknown()
    }
}

/// Why CreateAcls refuses a binding: the message of Kafka's `InvalidRequestException`, checked in
/// Kafka's order (`AclApis.handleCreateAcls`, then `AclControlManager.validateNewAcl`).
pub fn validate_new_acl(b: &AclBinding) -> Result<(), String> {
    let p = &b.pattern;
    if p.resource_type == ResourceType::Cluster && p.name != CLUSTER_NAME {
        return Err(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        ));
    }
    if p.name.is_empty() {
        return Err("Invalid empty resource name".into());
    }
    if matches!(p.resource_type, ResourceType::Unknown | ResourceType::Any) {
        return Err(format!("Invalid resourceType {}", p.resource_type));
    }
    if !matches!(p.pattern_type, PatternType::Literal | PatternType::Prefixed) {
        return Err(format!("Invalid patternType {}", p.pattern_type));
    }
    let e = &b.entry;
    if matches!(e.operation, AclOperation::Unknown | AclOperation::Any) {
        return Err(format!("Invalid operation {}", e.operation));
    }
    if !matches!(
        e.permission,
        AclPermissionType::Allow | AclPermissionType::Deny
    ) {
        return Err(format!("Invalid permissionType {}", e.permission));
    }
    if !e.principal.contains(':') {
        return Err(format!(
            "Could not parse principal from `{}` (no colon is present separating the principal type from the principal name)",
            e.principal
        ));
    }
    Ok(())
}

/// One ACL as the authorizer checks it: the principal split once, so a check compares strings
/// without building any.
#[derive(Debug, Clone)]
struct Rule {
    principal_type: String,
    principal_name: String,
    host: String,
    operation: AclOperation,
    permission: AclPermissionType,
}

impl Rule {
    fn of(e: &AccessControlEntry) -> Self {
        let (t, n) = e.principal.split_once(':').unwrap_or((&e.principal, ""));
        Self {
            principal_type: t.to_string(),
            principal_name: n.to_string(),
            host: e.host.clone(),
            operation: e.operation,
            permission: e.permission,
        }
    }

    /// `StandardAuthorizerData.findResult`: None when the rule does not apply to the action.
    fn result(&self, who: &Principal, host: &str, op: AclOperation) -> Option<bool> {
        // The caller's own principal, or `User:*` (`matchingPrincipals`).
        let principal_matches = (self.principal_type == who.principal_type
            && self.principal_name == who.name)
            || (self.principal_type == crate::principal::USER_TYPE
                && self.principal_name == WILDCARD);
        if !principal_matches || (self.host != WILDCARD && self.host != host) {
            return None;
        }
        let allow = self.permission == AclPermissionType::Allow;
        if self.operation != AclOperation::All {
            // Implied operations hold for ALLOW rules only: a DENY of READ does not deny
            // DESCRIBE.
            let applies = if allow {
                match op {
                    AclOperation::Describe => matches!(
                        self.operation,
                        AclOperation::Describe
                            | AclOperation::Read
                            | AclOperation::Write
                            | AclOperation::Delete
                            | AclOperation::Alter
                    ),
                    AclOperation::DescribeConfigs => matches!(
                        self.operation,
                        AclOperation::DescribeConfigs | AclOperation::AlterConfigs
                    ),
                    _ => self.operation == op,
                }
            } else {
                self.operation == op
            };
            if !applies {
                return None;
            }
        }
        Some(allow)
    }
}

/// The rules of one resource type, indexed by name.
#[derive(Debug, Default)]
struct TypeIndex {
    /// Literal patterns by name, the wildcard `*` among them.
    literal: HashMap<String, Vec<Rule>>,
    /// Prefixed patterns by prefix.
    prefixed: HashMap<String, Vec<Rule>>,
    /// The longest and shortest prefix, bounding the lookups a check makes.
    min_prefix: usize,
    max_prefix: usize,
}

/// Authorization decisions over an ACL set (`StandardAuthorizer`), immutable: a change builds a
/// new one (the broker swaps it in whole).
#[derive(Debug)]
pub struct Authorizer {
    bindings: Vec<AclBinding>,
    super_users: Vec<Principal>,
    allow_if_no_acl: bool,
    /// Indexed by `ResourceType::code()`.
    by_type: [TypeIndex; 8],
}

impl Authorizer {
    /// `super_users` are whole principals (`super.users`, split on ';').
    pub fn new(
        bindings: Vec<AclBinding>,
        super_users: Vec<Principal>,
        allow_if_no_acl: bool,
    ) -> Self {
        let mut by_type: [TypeIndex; 8] = Default::default();
        for b in &bindings {
            let idx = &mut by_type[b.pattern.resource_type.code() as usize & 7];
            let rule = Rule::of(&b.entry);
            match b.pattern.pattern_type {
                PatternType::Prefixed => {
                    let len = b.pattern.name.len();
                    if idx.prefixed.is_empty() || len < idx.min_prefix {
                        idx.min_prefix = len;
                    }
                    idx.max_prefix = idx.max_prefix.max(len);
                    idx.prefixed
                        .entry(b.pattern.name.clone())
                        .or_default()
                        .push(rule);
                }
                _ => idx
                    .literal
                    .entry(b.pattern.name.clone())
                    .or_default()
                    .push(rule),
            }
        }
        Self {
            bindings,
            super_users,
            allow_if_no_acl,
            by_type,
        }
    }

    /// Every ACL, in the order they were created.
    pub fn bindings(&self) -> &[AclBinding] {
        &self.bindings
    }

    pub fn super_users(&self) -> &[Principal] {
        &self.super_users
    }

    pub fn allow_if_no_acl(&self) -> bool {
        self.allow_if_no_acl
    }

    /// May `who`, connected from `host` (an IP address as text, no leading '/'), do `op` on the
    /// resource `(resource_type, name)`? Allocates nothing.
    pub fn authorize(
        &self,
        who: &Principal,
        host: &str,
        op: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.super_users.iter().any(|s| s == who) {
            return true;
        }
        let idx = &self.by_type[resource_type.code() as usize & 7];
        let mut found = false;
        let mut allowed = false;
        // A DENY decides at once; an ALLOW is remembered while the other sections are
        // searched for a DENY (`MatchingRuleBuilder`).
        let mut scan = |rules: &[Rule]| -> bool {
            found |= !rules.is_empty();
            for r in rules {
                match r.result(who, host, op) {
                    Some(false) => return true,
                    Some(true) => allowed = true,
                    None => {}
                }
            }
            false
        };
        if let Some(rules) = idx.literal.get(name) {
            if scan(rules) {
                return false;
            }
        }
        if name != WILDCARD {
            if let Some(rules) = idx.literal.get(WILDCARD) {
                if scan(rules) {
                    return false;
                }
            }
        }
        if !idx.prefixed.is_empty() {
            let top = idx.max_prefix.min(name.len());
            for end in idx.min_prefix.max(1)..=top {
                if !name.is_char_boundary(end) {
                    continue;
                }
                if let Some(rules) = idx.prefixed.get(&name[..end]) {
                    if scan(rules) {
                        return false;
                    }
                }
            }
        }
        if !found {
            return self.allow_if_no_acl;
        }
        allowed
    }

    /// The operations `who` may do on the resource, as the protocol's 32-bit field
    /// (`AuthHelper.authorizedOperations`: each supported operation, authorized in turn).
    pub fn authorized_operations(
        &self,
        who: &Principal,
        host: &str,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        resource_type
            .supported_operations()
            .iter()
            .filter(|op| self.authorize(who, host, **op, resource_type, name))
            .fold(0i32, |bits, op| bits | (1 << op.code()))
    }

    /// May `who` do `op` on at least one resource of `resource_type`? Kafka's default
    /// `Authorizer.authorizeByResourceType` (clients/src/main/java/org/apache/kafka/server/
    /// authorizer/Authorizer.java), which StandardAuthorizer inherits: a check on a hard-coded
    /// name first (super users, allow.everyone.if.no.acl.found), then any ALLOW for the exact
    /// operation (or ALL) on this type that no DENY dominates (a literal deny of the same name,
    /// a prefixed deny of a prefix of it, a literal wildcard deny).
    pub fn authorize_by_resource_type(
        &self,
        who: &Principal,
        host: &str,
        op: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        if self.authorize(who, host, op, resource_type, "hardcode") {
            return true;
        }
        let mut deny_literal: Vec<&str> = Vec::new();
        let mut deny_prefixed: Vec<&str> = Vec::new();
        let mut allow: Vec<(PatternType, &str)> = Vec::new();
        let mut wildcard_allow = false;
        for b in &self.bindings {
            if b.pattern.resource_type != resource_type {
                continue;
            }
            let e = &b.entry;
            if e.host != host && e.host != WILDCARD {
                continue;
            }
            let (t, n) = e.principal.split_once(':').unwrap_or((&e.principal, ""));
            let own = t == who.principal_type && n == who.name;
            if !own && e.principal != "User:*" {
                continue;
            }
            if e.operation != op && e.operation != AclOperation::All {
                continue;
            }
            let name = b.pattern.name.as_str();
            match (e.permission, b.pattern.pattern_type) {
                (AclPermissionType::Deny, PatternType::Literal) => {
                    if name == WILDCARD {
                        return false;
                    }
                    deny_literal.push(name);
                }
                (AclPermissionType::Deny, PatternType::Prefixed) => deny_prefixed.push(name),
                (AclPermissionType::Allow, PatternType::Literal) if name == WILDCARD => {
                    wildcard_allow = true
                }
                (AclPermissionType::Allow, pt @ (PatternType::Literal | PatternType::Prefixed)) => {
                    allow.push((pt, name))
                }
                _ => {}
            }
        }
        if wildcard_allow {
            return true;
        }
        allow.iter().any(|(pt, name)| {
            if *pt == PatternType::Literal && deny_literal.contains(name) {
                return false;
            }
            // A prefixed DENY on any leading part of the name dominates it.
            !name
                .char_indices()
                .map(|(i, c)| &name[..i + c.len_utf8()])
                .any(|p| deny_prefixed.contains(&p))
        })
    }

    /// The ACLs a DescribeAcls filter selects.
    pub fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.bindings
            .iter()
            .filter(|b| filter.matches(b))
            .cloned()
            .collect()
    }
}

/// Every principal is written `Type:name`; the broker's `super.users` value is
/// semicolon-separated (`StandardAuthorizer.getConfiguredSuperUsers`).
pub fn parse_super_users(value: &str) -> Result<Vec<Principal>, String> {
    value
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| Principal::parse(s).map_err(|e| e.to_string()))
        .collect()
}

/// The durable form's first bytes and version.
const MAGIC: &[u8; 8] = b"RLACLS\0\0";
const FORMAT_VERSION: u16 = 1;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclFileError {
    #[error("not an ACL file (bad magic)")]
    BadMagic,
    #[error("unsupported ACL file version {0} (this broker reads version {FORMAT_VERSION})")]
    Version(u16),
    #[error("ACL file checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("ACL file truncated at byte {0}")]
    Truncated(usize),
    #[error("ACL file entry {index} is invalid: {reason}")]
    Invalid { index: usize, reason: String },
}

/// The durable form of an ACL set: magic, version (u16), count (u32), each binding (codes as
/// bytes, strings as u32 length + UTF-8), then a CRC-32C of everything before it.
pub fn encode(bindings: &[AclBinding]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + bindings.len() * 48);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&(bindings.len() as u32).to_be_bytes());
    let put = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u32).to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    for b in bindings {
        out.push(b.pattern.resource_type.code() as u8);
        out.push(b.pattern.pattern_type.code() as u8);
        put(&mut out, &b.pattern.name);
        put(&mut out, &b.entry.principal);
        put(&mut out, &b.entry.host);
        out.push(b.entry.operation.code() as u8);
        out.push(b.entry.permission.code() as u8);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// Read what [`encode`] wrote; every binding must still pass [`validate_new_acl`].
pub fn decode(bytes: &[u8]) -> Result<Vec<AclBinding>, AclFileError> {
    if bytes.len() < MAGIC.len() + 2 + 4 + 4 {
        return Err(AclFileError::Truncated(bytes.len()));
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err(AclFileError::BadMagic);
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_be_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(AclFileError::Checksum { stored, computed });
    }
    let mut r = Reader {
        buf: body,
        pos: MAGIC.len(),
    };
    let version = u16::from_be_bytes(r.take::<2>()?);
    if version != FORMAT_VERSION {
        return Err(AclFileError::Version(version));
    }
    let count = u32::from_be_bytes(r.take::<4>()?) as usize;
    // Every binding takes at least 16 bytes: a lying count cannot make us reserve much.
    let mut out = Vec::with_capacity(count.min(body.len() / 16));
    for index in 0..count {
        let [rt, pt] = r.take::<2>()?;
        let name = r.string()?;
        let principal = r.string()?;
        let host = r.string()?;
        let [op, perm] = r.take::<2>()?;
        let b = AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::from_code(rt as i8),
                name,
                pattern_type: PatternType::from_code(pt as i8),
            },
            entry: AccessControlEntry {
                principal,
                host,
                operation: AclOperation::from_code(op as i8),
                permission: AclPermissionType::from_code(perm as i8),
            },
        };
        validate_new_acl(&b).map_err(|reason| AclFileError::Invalid { index, reason })?;
        out.push(b);
    }
    if r.pos != body.len() {
        return Err(AclFileError::Invalid {
            index: count,
            reason: format!("{} bytes after the last entry", body.len() - r.pos),
        });
    }
    Ok(out)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], AclFileError> {
        let end = self.pos.checked_add(N).filter(|e| *e <= self.buf.len());
        let end = end.ok_or(AclFileError::Truncated(self.pos))?;
        let mut a = [0u8; N];
        a.copy_from_slice(&self.buf[self.pos..end]);
        self.pos = end;
        Ok(a)
    }

    fn string(&mut self) -> Result<String, AclFileError> {
        let len = u32::from_be_bytes(self.take::<4>()?) as usize;
        let start = self.pos;
        let end = start
            .checked_add(len)
            .filter(|e| *e <= self.buf.len())
            .ok_or(AclFileError::Truncated(start))?;
        self.pos = end;
        String::from_utf8(self.buf[start..end].to_vec()).map_err(|_| AclFileError::Invalid {
            index: 0,
            reason: format!("string at byte {start} is not UTF-8"),
        })
    }
}

#[cfg(test)]
mod tests;
