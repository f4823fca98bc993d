//! Broker configuration: Kafka key names, Kafka defaults, Kafka validators.
//!
//! This module owns everything between "the operator wrote some settings" and
//! "the broker holds a typed, checked [`Config`]":
//!
//! * the table of supported keys (`KEYS`, one line per key, generated together
//!   with the [`Config`] struct and its [`Default`] impl so the three can never
//!   drift apart),
//! * a parser for the Java `.properties` format, so an operator can point the
//!   broker at an existing Kafka `server.properties` (for the keys we support),
//! * `--set name=value` overrides, applied after the file (later wins),
//! * per-key validation (ranges, enums, list members) and the cross-field
//!   checks Kafka's `GroupCoordinatorConfig` enforces at startup,
//! * rendering for DescribeConfigs ([`Config::entries`]): values formatted the
//!   way Kafka shows them, with "is this still the default" tracking.
//!
//! Why Kafka's names and defaults: tools, runbooks and client expectations are
//! written against them (e.g. a consumer's session timeout is checked against
//! `group.min.session.timeout.ms`), and `kafka-configs --describe` should show
//! the same thing it shows against Apache Kafka. The one deliberate difference
//! is `node.id`, which defaults to 1 instead of -1 because a single-node
//! broker has nothing to coordinate ids with and should start with no config.
//!
//! Unknown keys are errors, not warnings (Kafka only logs them): a typo such as
//! `group.max.sesion.timeout.ms` silently falling back to the default is the
//! kind of misconfiguration that only shows up under load.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Kafka's DescribeConfigs `ConfigType`. The numbering is the wire value
/// (`DescribeConfigsResponse.ConfigType`), returned by [`ConfigType::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigType {
    Unknown,
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Class,
    Password,
}

impl ConfigType {
    /// Wire code for DescribeConfigs (v3+ `ConfigType` field).
    pub fn code(&self) -> i8 {
        match self {
            ConfigType::Unknown => 0,
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Short => 4,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
            ConfigType::Class => 8,
            ConfigType::Password => 9,
        }
    }
}

/// One row of DescribeConfigs output for the broker resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: &'static str,
    /// Rendered as Kafka renders it; `None` for an unset string (Kafka's null
    /// default) and for passwords.
    pub value: Option<String>,
    /// True when nothing (file or `--set`) supplied the key and the value is
    /// still the built-in default.
    pub is_default: bool,
    /// Always true: this broker has no AlterConfigs for broker settings, so
    /// every key is static, which is how Kafka reports non-dynamic keys.
    pub read_only: bool,
    pub sensitive: bool,
    pub config_type: ConfigType,
    pub doc: &'static str,
}

impl ConfigEntry {
    /// Kafka's DescribeConfigs `ConfigSource` (v1+): STATIC_BROKER_CONFIG (4)
    /// when the operator supplied it, DEFAULT_CONFIG (5) otherwise.
    pub fn config_source_code(&self) -> i8 {
        if self.is_default {
            5
        } else {
            4
        }
    }
}

/// Everything that can go wrong while building a [`Config`]. Each message
/// names the key and where the value came from, because the binary prints it
/// verbatim and exits (code 2).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown config key \"{key}\" (from {source_desc}){}", did_you_mean(.suggestion))]
    UnknownKey {
        key: String,
        source_desc: String,
        /// Closest known key, when one is plausibly what was meant.
        suggestion: Option<&'static str>,
    },
    #[error("bad value \"{value}\" for {key} (from {source_desc}): {reason}")]
    BadValue {
        key: String,
        value: String,
        reason: String,
        source_desc: String,
    },
    #[error("cannot read config file {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("syntax error at {path}:{line}: {reason} in {text:?}")]
    Syntax {
        path: String,
        line: usize,
        text: String,
        reason: String,
    },
    #[error("bad --set argument \"{assignment}\": expected name=value")]
    BadAssignment { assignment: String },
    /// A cross-field rule from [`Config::validate`] does not hold.
    #[error("inconsistent configuration: {reason}")]
    Inconsistent { reason: String },
    /// A key Kafka's broker knows that this broker does not implement: refused, so that a
    /// setting is never silently dropped.
    #[error("config key \"{key}\" (from {source_desc}) is a Kafka broker setting Ringleader does not support: {reason}")]
    Unsupported {
        key: String,
        source_desc: String,
        reason: &'static str,
    },
}

/// A Kafka broker key accepted only so that an existing `server.properties` loads unchanged:
/// it has no meaning here. The broker logs each one once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoEffect {
    pub key: String,
    pub value: String,
    pub source_desc: String,
    pub reason: &'static str,
}

impl NoEffect {
    /// The refusal of this entry's value, for the keys a cluster reads
    /// ([`CLUSTER_EFFECT`]): `reason` says what a valid one is.
    fn bad(&self, reason: &str) -> ConfigError {
        ConfigError::BadValue {
            key: self.key.clone(),
            value: self.value.clone(),
            reason: reason.into(),
            source_desc: self.source_desc.clone(),
        }
    }
}

/// Keys that have no effect on a single node but do on a cluster (checked by
/// `check_cluster_replication`, so not announced as without effect there).
const CLUSTER_EFFECT: &[&str] = &[
    "offsets.topic.replication.factor",
    "min.insync.replicas",
    "auto.leader.rebalance.enable",
    "leader.imbalance.check.interval.seconds",
];

/// Every key Kafka 4.4's broker defines (`KafkaConfig.configDef().names()`, printed from the
/// `kafka_2.13` 4.4.0 jar), so that a Kafka key this broker does not implement is told apart
/// from a typo.
const KAFKA_BROKER_KEYS: &str = include_str!("kafka-4.4-broker-keys.txt");

fn is_kafka_broker_key(key: &str) -> bool {
    KAFKA_BROKER_KEYS.lines().any(|k| k == key)
        // Per-listener overrides (`listener.name.<listener>.<key>`).
        || key.starts_with("listener.name.")
}

const SINGLE_NODE: &str =
    "a single node: every partition has one replica and there is no KRaft controller quorum";
const THREADS: &str = "one executor per core (--cores) reads the sockets, runs the requests and does the disk I/O; there are no thread pools or queues between them to size";
const FSYNC: &str =
    "every write is fsynced before it is acknowledged, so there is no periodic flush to configure";

/// Kafka keys with no meaning here, accepted and announced (docs/configuration.md lists them).
/// Exact names, or prefixes ending in '.'.
const NO_EFFECT: &[(&str, &str)] = &[
    ("process.roles", "one Ringleader process is the broker and the group coordinator; there is no KRaft controller role"),
    ("controller.", SINGLE_NODE),
    ("metadata.log.", SINGLE_NODE),
    ("inter.broker.listener.name", SINGLE_NODE),
    ("security.inter.broker.protocol", SINGLE_NODE),
    ("sasl.mechanism.inter.broker.protocol", SINGLE_NODE),
    ("sasl.mechanism.controller.protocol", SINGLE_NODE),
    ("offsets.topic.replication.factor", SINGLE_NODE),
    ("transaction.state.log.replication.factor", SINGLE_NODE),
    ("transaction.state.log.min.isr", SINGLE_NODE),
    ("share.coordinator.state.topic.replication.factor", SINGLE_NODE),
    ("share.coordinator.state.topic.min.isr", SINGLE_NODE),
    ("min.insync.replicas", SINGLE_NODE),
    ("replica.", SINGLE_NODE),
    ("auto.leader.rebalance.enable", SINGLE_NODE),
    ("leader.imbalance.check.interval.seconds", SINGLE_NODE),
    ("leader.imbalance.per.broker.percentage", "Kafka 4's KRaft controller does not read it either: every leader.imbalance.check.interval.seconds it moves each partition whose preferred replica is in sync back to it (ReplicationControlManager.maybeBalancePartitionLeaders), and so does a Ringleader cluster"),
    ("unclean.leader.election.enable", SINGLE_NODE),
    ("num.replica.fetchers", SINGLE_NODE),
    ("num.network.threads", THREADS),
    ("num.io.threads", THREADS),
    ("background.threads", THREADS),
    ("num.recovery.threads.per.data.dir", THREADS),
    ("queued.max.requests", "requests are not queued between threads here; each connection reads at most 64 requests ahead of its responses"),
    ("socket.send.buffer.bytes", "sockets keep the kernel's autotuned buffer sizes"),
    ("socket.receive.buffer.bytes", "sockets keep the kernel's autotuned buffer sizes"),
    ("log.flush.", FSYNC),
];

/// Kafka keys refused with a specific reason (every other unimplemented Kafka key gets
/// [`UNSUPPORTED`]). Exact names, or prefixes ending in '.'.
const REFUSED: &[(&str, &str)] = &[
    ("ssl.keystore.password", "only PEM keystores are read here, and Kafka refuses a keystore password with a PEM keystore too (give the key unencrypted)"),
    ("ssl.truststore.password", "only PEM truststores are read here, and Kafka refuses a truststore password with a PEM truststore too"),
    ("ssl.key.password", "encrypted PEM private keys are not decrypted here: give ssl.keystore.key / the keystore file an unencrypted PKCS#8 key"),
    ("ssl.", "this TLS setting is not implemented (docs/configuration.md lists those that are); refusing rather than serving without the security it asks for"),
    ("sasl.jaas.config", "a broker reads its JAAS entries from listener.name.<listener>.<mechanism>.sasl.jaas.config, as Kafka's brokers do"),
    ("sasl.kerberos.", "GSSAPI (Kerberos) is not supported"),
    ("sasl.", "this SASL setting is not implemented (docs/configuration.md lists those that are); refusing rather than serving without the security it asks for"),
    ("security.", "security providers are Java classes; TLS here is rustls"),
    ("principal.builder.class", "principals are built as Kafka's DefaultKafkaPrincipalBuilder does (User:<TLS DN> or User:<SASL name>); custom builders are Java classes"),
    ("offsets.commit.timeout.ms", "a commit waits for its fsync however long that takes; Kafka answers REQUEST_TIMED_OUT after this timeout"),
    ("group.coordinator.threads", "one group coordinator runs on each core: use --cores"),
    ("group.coordinator.background.threads", "there are no background threads: assignments and snapshots run on the shard that owns the partition"),
    ("group.consumer.regex.refresh.interval.ms", "regular expression subscriptions are resolved again on every heartbeat, not on an interval"),
    ("transaction.two.phase.commit.enable", "two-phase commit transactions (KIP-939) are not supported"),
    ("transaction.partition.verification.enable", "partitions are always verified against the transaction coordinator before a transactional batch is written"),
    ("transaction.", "this transaction coordinator setting is not implemented (docs/configuration.md lists those that are)"),
    ("group.share.", "share groups are not supported"),
    ("share.", "share groups are not supported"),
];

const UNSUPPORTED: &str = "not implemented here (docs/configuration.md lists what is)";

/// One entry of `controller.quorum.voters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumVoter {
    pub id: i64,
    pub host: String,
    pub port: u16,
}

/// Kafka's `controller.quorum.voters` syntax: `{id}@{host}:{port}` entries separated by commas,
/// an IPv6 host in brackets (`QuorumConfig.parseVoterConnections` in Kafka's raft module).
/// Empty means none. Each id at most once.
pub fn parse_quorum_voters(value: &str) -> Result<Vec<QuorumVoter>, String> {
    let mut out: Vec<QuorumVoter> = Vec::new();
    if value.trim().is_empty() {
        return Ok(out);
    }
    for entry in value.split(',').map(str::trim) {
        let (id, addr) = entry
            .split_once('@')
            .ok_or_else(|| format!("\"{entry}\" is not of the form {{id}}@{{host}}:{{port}}"))?;
        let id: i64 =
            id.parse().ok().filter(|id| *id >= 0).ok_or_else(|| {
                format!("\"{id}\" in \"{entry}\" is not a node id (an integer >= 0)")
            })?;
        let (host, port) = addr
            .rsplit_once(':')
            .ok_or_else(|| format!("\"{entry}\" has no :port"))?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() {
            return Err(format!("\"{entry}\" has no host"));
        }
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("\"{port}\" in \"{entry}\" is not a port"))?;
        if out.iter().any(|v| v.id == id) {
            return Err(format!("node {id} is listed more than once"));
        }
        out.push(QuorumVoter {
            id,
            host: host.to_string(),
            port,
        });
    }
    Ok(out)
}

/// The reason of the first entry of `table` that names `key` exactly or is a prefix of it.
fn lookup_reason(table: &[(&str, &'static str)], key: &str) -> Option<&'static str> {
    table
        .iter()
        .find(|(k, _)| *k == key || (k.ends_with('.') && key.starts_with(k)))
        .map(|(_, r)| *r)
}

fn did_you_mean(suggestion: &Option<&'static str>) -> String {
    match suggestion {
        Some(s) => format!("; did you mean \"{s}\"?"),
        None => String::new(),
    }
}

// ---------------------------------------------------------------------------
// Value types
// ---------------------------------------------------------------------------

/// `group.consumer.migration.policy`: whether non-empty groups may convert between the classic
/// and consumer protocols (empty groups always may). The coordinator's own type, so the value
/// reaches it unchanged.
pub use coordinator::group::migration::MigrationPolicy;

/// Built-in server-side assignors (`group.consumer.assignors`). Kafka also
/// accepts Java class names there; we cannot load those, so only the
/// built-in names are valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerAssignor {
    Uniform,
    Range,
}

/// Group protocols (`group.coordinator.rebalance.protocols`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebalanceProtocol {
    Classic,
    Consumer,
    Streams,
    Share,
}

/// A closed set of names usable as members of a LIST-typed key.
trait ListItem: Sized + Copy + PartialEq + 'static {
    const ALL: &'static [Self];
    fn name(self) -> &'static str;
}

impl ListItem for ServerAssignor {
    const ALL: &'static [Self] = &[ServerAssignor::Uniform, ServerAssignor::Range];
    fn name(self) -> &'static str {
        match self {
            ServerAssignor::Uniform => "uniform",
            ServerAssignor::Range => "range",
        }
    }
}

impl ServerAssignor {
    /// The name clients send in `ServerAssignor` and Kafka prints.
    pub fn as_str(self) -> &'static str {
        self.name()
    }
}

impl ListItem for RebalanceProtocol {
    const ALL: &'static [Self] = &[
        RebalanceProtocol::Classic,
        RebalanceProtocol::Consumer,
        RebalanceProtocol::Streams,
        RebalanceProtocol::Share,
    ];
    fn name(self) -> &'static str {
        match self {
            RebalanceProtocol::Classic => "classic",
            RebalanceProtocol::Consumer => "consumer",
            RebalanceProtocol::Streams => "streams",
            RebalanceProtocol::Share => "share",
        }
    }
}

impl RebalanceProtocol {
    /// Kafka's `GroupType` rendering.
    pub fn as_str(self) -> &'static str {
        self.name()
    }
}

/// How one Rust field type is parsed from text, rendered back, and reported
/// to DescribeConfigs. Rendering must round-trip through `parse` because
/// [`Config::validate`] re-checks fields that way.
trait Value: Sized {
    const TYPE: ConfigType;
    fn parse(text: &str) -> Result<Self, String>;
    fn render(&self) -> String;
}

impl Value for bool {
    const TYPE: ConfigType = ConfigType::Boolean;
    fn parse(text: &str) -> Result<Self, String> {
        // Kafka's ConfigDef accepts true/false in any case and nothing else.
        if text.eq_ignore_ascii_case("true") {
            Ok(true)
        } else if text.eq_ignore_ascii_case("false") {
            Ok(false)
        } else {
            Err("expected true or false".to_string())
        }
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

impl Value for String {
    const TYPE: ConfigType = ConfigType::String;
    fn parse(text: &str) -> Result<Self, String> {
        Ok(text.to_string())
    }
    fn render(&self) -> String {
        self.clone()
    }
}

/// A secret (Kafka's PASSWORD type): DescribeConfigs reports it as sensitive, with no value.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Password(pub String);

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "\"\""
        } else {
            "[hidden]"
        })
    }
}

impl Value for Password {
    const TYPE: ConfigType = ConfigType::Password;
    fn parse(text: &str) -> Result<Self, String> {
        Ok(Password(text.to_string()))
    }
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// A comma-separated list of names kept as written (Kafka's LIST type of strings).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names(pub String);

impl Names {
    /// The entries, trimmed, empty ones dropped (as Kafka's list parser does).
    pub fn items(&self) -> Vec<String> {
        self.0
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }
}

impl Value for Names {
    const TYPE: ConfigType = ConfigType::List;
    fn parse(text: &str) -> Result<Self, String> {
        Ok(Names(text.to_string()))
    }
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// Integer field types, so range checks can be written once.
trait Int: Value + Copy + PartialOrd + fmt::Display {
    const MIN: Self;
    const MAX: Self;
}

macro_rules! int_value {
    ($t:ty, $ty:expr, $what:literal) => {
        impl Value for $t {
            const TYPE: ConfigType = $ty;
            fn parse(text: &str) -> Result<Self, String> {
                text.parse::<$t>()
                    .map_err(|_| concat!("expected ", $what).to_string())
            }
            fn render(&self) -> String {
                self.to_string()
            }
        }
        impl Int for $t {
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
        }
    };
}
int_value!(i16, ConfigType::Short, "a 16-bit integer");
int_value!(i32, ConfigType::Int, "a 32-bit integer");
int_value!(i64, ConfigType::Long, "a 64-bit integer");

impl Value for MigrationPolicy {
    const TYPE: ConfigType = ConfigType::String;
    fn parse(text: &str) -> Result<Self, String> {
        // Kafka uses CaseInsensitiveValidString here.
        MigrationPolicy::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                "expected one of DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL (case-insensitive)"
                    .to_string()
            })
    }
    fn render(&self) -> String {
        self.as_str().to_string()
    }
}

impl<T: ListItem> Value for Vec<T> {
    const TYPE: ConfigType = ConfigType::List;
    fn parse(text: &str) -> Result<Self, String> {
        let choices = T::ALL
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ");
        // Every list key we have is non-empty and duplicate-free in Kafka
        // (ValidList with isEmptyAllowed=false / anyNonDuplicateValues).
        if text.trim().is_empty() {
            return Err(format!(
                "expected a non-empty comma-separated list of: {choices}"
            ));
        }
        let mut out: Vec<T> = Vec::new();
        for raw in text.split(',') {
            let item = raw.trim();
            if item.is_empty() {
                return Err(format!("empty entry in list; allowed entries: {choices}"));
            }
            let Some(value) = T::ALL
                .iter()
                .copied()
                .find(|t| t.name().eq_ignore_ascii_case(item))
            else {
                return Err(format!(
                    "\"{item}\" is not one of {choices} (comma-separated list)"
                ));
            };
            if out.contains(&value) {
                return Err(format!("\"{item}\" is listed more than once"));
            }
            out.push(value);
        }
        Ok(out)
    }
    fn render(&self) -> String {
        // Kafka renders LIST values joined by "," with no spaces.
        self.iter().map(|t| t.name()).collect::<Vec<_>>().join(",")
    }
}

// ---------------------------------------------------------------------------
// Per-key checks
// ---------------------------------------------------------------------------

/// A constraint on an already-parsed value, plus how to phrase parse errors
/// (so "abc" and "0" for an `>= 1` key get the same helpful message).
trait Check<T> {
    fn check(&self, value: &T) -> Result<(), String>;
    fn explain_parse_error(&self, _text: &str, err: String) -> String {
        err
    }
}

/// No constraint beyond the type.
struct Any;
impl<T> Check<T> for Any {
    fn check(&self, _: &T) -> Result<(), String> {
        Ok(())
    }
}

/// Inclusive integer range, like Kafka's `Range.atLeast` / `Range.between`.
struct Bounds<T> {
    min: T,
    max: T,
}

fn at_least<T: Int>(min: T) -> Bounds<T> {
    Bounds { min, max: T::MAX }
}

impl<T: Int> Bounds<T> {
    fn expected(&self) -> String {
        match (self.min == T::MIN, self.max == T::MAX) {
            (false, true) => format!("expected an integer >= {}", self.min),
            (true, false) => format!("expected an integer <= {}", self.max),
            _ => format!("expected an integer between {} and {}", self.min, self.max),
        }
    }
}

impl<T: Int> Check<T> for Bounds<T> {
    fn check(&self, value: &T) -> Result<(), String> {
        if *value < self.min || *value > self.max {
            Err(self.expected())
        } else {
            Ok(())
        }
    }
    fn explain_parse_error(&self, text: &str, _err: String) -> String {
        // A syntactically valid integer that failed to parse overflowed the
        // field's width; say so rather than only restating the lower bound.
        if text.parse::<i128>().is_ok() && self.max == T::MAX {
            format!("{} (at most {})", self.expected(), T::MAX)
        } else {
            self.expected()
        }
    }
}

/// One of a fixed set of strings (Kafka's `ValidString.in`).
struct OneOf(&'static [&'static str]);
impl Check<String> for OneOf {
    fn check(&self, value: &String) -> Result<(), String> {
        if self.0.contains(&value.as_str()) {
            Ok(())
        } else {
            Err(format!("expected one of {}", self.0.join(", ")))
        }
    }
}

/// Kafka allows other values, this broker only the one that describes what it does; the
/// message says why, so the key is refused rather than parsed and ignored.
struct Only<T: 'static>(T, &'static str);
impl<T: PartialEq + Value> Check<T> for Only<T> {
    fn check(&self, value: &T) -> Result<(), String> {
        if *value == self.0 {
            Ok(())
        } else {
            Err(format!(
                "only {} is supported here: {}",
                self.0.render(),
                self.1
            ))
        }
    }
}

/// One data directory: each shard's partitions live under it.
struct LogDirs;
impl Check<String> for LogDirs {
    fn check(&self, value: &String) -> Result<(), String> {
        if value.split(',').filter(|d| !d.trim().is_empty()).count() > 1 {
            Err("exactly one directory is supported (Ringleader keeps every partition under one data directory)".into())
        } else {
            Ok(())
        }
    }
}

/// The classic protocol cannot be disabled (Kafka refuses to start too).
struct ContainsClassic;
impl Check<Vec<RebalanceProtocol>> for ContainsClassic {
    fn check(&self, value: &Vec<RebalanceProtocol>) -> Result<(), String> {
        if value.contains(&RebalanceProtocol::Classic) {
            Ok(())
        } else {
            Err("must contain \"classic\" (disabling the classic protocol is not supported)".into())
        }
    }
}

/// Kafka's KRaft authorizer is the only one: ACLs live in the broker's own file.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

struct AuthorizerClass;
impl Check<String> for AuthorizerClass {
    fn check(&self, value: &String) -> Result<(), String> {
        match value.trim() {
            "" | STANDARD_AUTHORIZER => Ok(()),
            "kafka.security.authorizer.AclAuthorizer" => Err(format!(
                "ZooKeeper ACLs (kafka.security.authorizer.AclAuthorizer) are not supported, as in Kafka 4: use {STANDARD_AUTHORIZER}"
            )),
            other => Err(format!(
                "custom authorizer {other} cannot be loaded here: only {STANDARD_AUTHORIZER} is supported"
            )),
        }
    }
}

/// `super.users`: principals `Type:name` separated by ';'.
struct SuperUsers;
impl Check<String> for SuperUsers {
    fn check(&self, value: &String) -> Result<(), String> {
        security::acl::parse_super_users(value).map(|_| ())
    }
}

/// Syntax check for `listeners` / `advertised.listeners`.
struct Listeners {
    advertised: bool,
}
impl Check<String> for Listeners {
    fn check(&self, value: &String) -> Result<(), String> {
        if self.advertised {
            parse_advertised(value).map(|_| ())
        } else {
            parse_listener_list(value, false).map(|_| ())
        }
    }
}

/// `listener.security.protocol.map`: `NAME:PROTOCOL` pairs.
struct ProtocolMap;
impl Check<String> for ProtocolMap {
    fn check(&self, value: &String) -> Result<(), String> {
        parse_protocol_map(value).map(|_| ())
    }
}

/// The security protocols Kafka names (`SecurityProtocol`), all served here.
pub const SECURITY_PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

fn parse_protocol_map(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for raw in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, proto) = raw
            .split_once(':')
            .ok_or_else(|| format!("\"{raw}\" is not NAME:PROTOCOL"))?;
        let (name, proto) = (name.trim().to_ascii_uppercase(), proto.trim());
        if !SECURITY_PROTOCOLS.contains(&proto) {
            return Err(format!(
                "unknown security protocol \"{proto}\" (expected one of {})",
                SECURITY_PROTOCOLS.join(", ")
            ));
        }
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!("listener name {name} is mapped more than once"));
        }
        out.push((name, proto.to_string()));
    }
    Ok(out)
}

fn parse_checked<T: Value, C: Check<T>>(text: &str, check: &C) -> Result<T, String> {
    let value = T::parse(text).map_err(|e| check.explain_parse_error(text, e))?;
    check.check(&value)?;
    Ok(value)
}

// ---------------------------------------------------------------------------
// Listener parsing
// ---------------------------------------------------------------------------

/// One listener to serve, as configured (see [`Config::listener_specs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Upper-case, as Kafka's `ListenerName.normalised`.
    pub name: String,
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    pub protocol: String,
    /// Empty: every interface.
    pub host: String,
    pub port: u16,
    /// Its `advertised.listeners` entry, if any.
    pub advertised: Option<(String, u16)>,
}

/// One `[NAME://]host:port` listener entry.
#[derive(Debug, PartialEq, Eq)]
struct Endpoint {
    name: Option<String>,
    host: String,
    port: u16,
}

/// Parses one entry. For advertised listeners the host must be present and
/// the port non-zero (clients must be able to connect to it); bind listeners
/// may leave the host empty (all interfaces) and use port 0 (ephemeral).
fn parse_endpoint(entry: &str, advertised: bool) -> Result<Endpoint, String> {
    let (name, rest) = match entry.split_once("://") {
        Some((name, rest)) => {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!("bad listener name \"{name}\" in \"{entry}\""));
            }
            (Some(name.to_string()), rest)
        }
        None => (None, entry),
    };
    let (host, port) = if let Some(after) = rest.strip_prefix('[') {
        // IPv6 literal: [::1]:9092
        let (host, tail) = after
            .split_once(']')
            .ok_or_else(|| format!("missing ']' in \"{entry}\""))?;
        let port = tail
            .strip_prefix(':')
            .ok_or_else(|| format!("missing :port in \"{entry}\""))?;
        (host, port)
    } else {
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("missing :port in \"{entry}\" (expected host:port)"))?;
        if host.contains(':') {
            return Err(format!(
                "IPv6 address must be in brackets, e.g. [::1]:9092, in \"{entry}\""
            ));
        }
        (host, port)
    };
    if host.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(format!("bad host \"{host}\" in \"{entry}\""));
    }
    if advertised && host.is_empty() {
        return Err(format!(
            "missing host in \"{entry}\" (clients need a host to connect to)"
        ));
    }
    let port: u16 = port
        .parse()
        .map_err(|_| format!("bad port \"{port}\" in \"{entry}\" (expected 0-65535)"))?;
    if advertised && port == 0 {
        return Err(format!("port 0 cannot be advertised in \"{entry}\""));
    }
    Ok(Endpoint {
        name,
        host: host.to_string(),
        port,
    })
}

/// Parses a comma-separated listener list (empty text = empty list). Listener
/// names must be unique, as in Kafka.
fn parse_listener_list(text: &str, advertised: bool) -> Result<Vec<Endpoint>, String> {
    let mut out: Vec<Endpoint> = Vec::new();
    if text.trim().is_empty() {
        return Ok(out);
    }
    for raw in text.split(',') {
        let entry = raw.trim();
        if entry.is_empty() {
            return Err("empty entry in listener list".to_string());
        }
        let ep = parse_endpoint(entry, advertised)?;
        let key = ep
            .name
            .as_deref()
            .unwrap_or("PLAINTEXT")
            .to_ascii_uppercase();
        if out.iter().any(|o| {
            o.name
                .as_deref()
                .unwrap_or("PLAINTEXT")
                .eq_ignore_ascii_case(&key)
        }) {
            return Err(format!("listener name {key} appears more than once"));
        }
        out.push(ep);
    }
    Ok(out)
}

/// The endpoint to hand to clients: the `PLAINTEXT` (or unnamed) entry of
/// `advertised.listeners`. `Ok(None)` when the key is empty or has no such entry (the listener
/// is then advertised at its bound address).
fn parse_advertised(text: &str) -> Result<Option<(String, u16)>, String> {
    let list = parse_listener_list(text, true)?;
    Ok(plaintext_entry(list))
}

/// The (host, port) of the entry named PLAINTEXT, or of the first unnamed one: the only listener
/// this broker serves. Others (a CONTROLLER listener from a KRaft server.properties) are ignored.
fn plaintext_entry(list: Vec<Endpoint>) -> Option<(String, u16)> {
    list.into_iter()
        .find(|e| {
            e.name
                .as_deref()
                .is_none_or(|n| n.eq_ignore_ascii_case("PLAINTEXT"))
        })
        .map(|e| (e.host, e.port))
}

// ---------------------------------------------------------------------------
// The key table
// ---------------------------------------------------------------------------

/// Descriptor of one supported key. `get` renders the field, `set` parses,
/// checks and stores it; both are generated from the table below.
struct KeyDef {
    name: &'static str,
    config_type: ConfigType,
    doc: &'static str,
    get: fn(&Config) -> String,
    set: fn(&mut Config, &str) -> Result<(), String>,
}

/// Alternative spellings accepted on input; they write the target's field
/// and are listed separately in DescribeConfigs, as Kafka lists both.
struct Alias {
    name: &'static str,
    target: &'static str,
    doc: &'static str,
}

const ALIASES: &[Alias] = &[
    Alias {
        name: "broker.id",
        target: "node.id",
        doc: "Alias of node.id, accepted because pre-KRaft server.properties files set broker.id. \
              It writes the same value; if both appear, the later one wins.",
    },
    Alias {
        name: "log.cleaner.delete.retention.ms",
        target: "delete.retention.ms",
        doc: "Kafka's broker-level name for the delete.retention.ms topic default; writes the same value.",
    },
];

/// Generates the `Config` struct, its `Default` impl and the `KEYS` table
/// from one line per key: `"kafka.key" => field: Type = default, check, "doc";`.
macro_rules! config_keys {
    ($($key:literal => $field:ident : $ty:ty = $default:expr, $check:expr, $doc:literal;)+) => {
        /// Typed broker configuration. Field names are the Kafka key in
        /// snake_case (units last). Build it with [`Config::load`]; mutate
        /// fields directly only in tests, then call [`Config::validate`].
        #[derive(Debug, Clone)]
        pub struct Config {
            $(
                #[doc = concat!("`", $key, "`: ", $doc)]
                pub $field: $ty,
            )+
            /// Where each explicitly supplied key came from ("file:line" or
            /// "--set"), keyed by canonical name. Drives `is_default` and
            /// error messages.
            origins: BTreeMap<&'static str, String>,
            /// Kafka keys accepted without effect, in the order they were supplied.
            no_effect: Vec<NoEffect>,
            /// `log.retention.minutes` was given (it wins over `log.retention.hours`).
            retention_minutes_set: bool,
            /// `listener.name.<listener>.<key>` overrides, keyed by the full key (listener name
            /// lower-case, as Kafka spells it).
            listener_overrides: BTreeMap<String, String>,
            /// `controller.listener.names` as given: listeners a KRaft file names there are not
            /// served (no controller runs here).
            controller_listener_names: String,
            /// `controller.quorum.voters` as given: checked by [`Config::validate`], which
            /// refuses a quorum of other nodes (see [`parse_quorum_voters`]).
            controller_quorum_voters: String,
        }

        impl Default for Config {
            fn default() -> Self {
                Config {
                    $($field: $default,)+
                    origins: BTreeMap::new(),
                    no_effect: Vec::new(),
                    retention_minutes_set: false,
                    listener_overrides: BTreeMap::new(),
                    controller_listener_names: String::new(),
                    controller_quorum_voters: String::new(),
                }
            }
        }

        /// Every supported key, in declaration order.
        static KEYS: &[KeyDef] = &[
            $(KeyDef {
                name: $key,
                config_type: <$ty as Value>::TYPE,
                doc: $doc,
                get: |c: &Config| Value::render(&c.$field),
                set: |c: &mut Config, text: &str| {
                    c.$field = parse_checked::<$ty, _>(text, &$check)?;
                    Ok(())
                },
            },)+
        ];
    };
}

config_keys! {
    // --- identity and listeners ---
    "node.id" => node_id: i32 = 1, at_least(0),
        "Id of this broker. Kafka defaults to -1 (must be set); a single-node broker defaults to 1 so it starts with no config.";
    "cluster.id" => cluster_id: String = String::new(), Any,
        "Cluster id reported in Metadata. Empty = generated once and persisted by the broker.";
    "advertised.listeners" => advertised_listeners: String = String::new(), Listeners { advertised: true },
        "What clients of each listener are told: NAME://host:port entries (host:port is PLAINTEXT). A listener without an entry is advertised at its bound address.";
    "listeners" => listeners: String = "PLAINTEXT://:9092".to_string(), Listeners { advertised: false },
        "The listeners served, NAME://host:port each (an empty host: every interface), their protocols from listener.security.protocol.map. --listen replaces the PLAINTEXT one's address; without this key the broker serves PLAINTEXT on 127.0.0.1:9092. Controller listeners (controller.listener.names, CONTROLLER) serve no clients; on a node that controller.quorum.voters does not name, the first is its node-to-node address (it joins that cluster once AddRaftVoter adds it).";
    "log.dirs" => log_dirs: String = String::new(), LogDirs,
        "The data directory (exactly one), used when --data-dir is not given; otherwise ./data.";

    // --- security: listeners, TLS and SASL ---
    // Each ssl.* and sasl key may also be given per listener as `listener.name.<listener>.<key>`
    // (lower-case listener name), which wins for that listener, as in Kafka.
    "listener.security.protocol.map" => listener_security_protocol_map: String = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT".to_string(), ProtocolMap,
        "Listener name to security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL). Kafka's default maps each protocol name to itself.";
    "ssl.keystore.type" => ssl_keystore_type: String = "JKS".to_string(), Any,
        "Kafka's default is JKS; only PEM is read here (a listener using TLS with another type is refused at start).";
    "ssl.keystore.location" => ssl_keystore_location: String = String::new(), Any,
        "A PEM file holding the private key (unencrypted PKCS#8, PKCS#1 or SEC1) and the certificate chain, as Kafka's PEM keystore.";
    "ssl.keystore.key" => ssl_keystore_key: Password = Password::default(), Any,
        "The private key in PEM, inline (with ssl.keystore.certificate.chain) instead of ssl.keystore.location.";
    "ssl.keystore.certificate.chain" => ssl_keystore_certificate_chain: Password = Password::default(), Any,
        "The certificate chain in PEM, inline (with ssl.keystore.key).";
    "ssl.truststore.type" => ssl_truststore_type: String = "JKS".to_string(), Any,
        "Kafka's default is JKS; only PEM is read here.";
    "ssl.truststore.location" => ssl_truststore_location: String = String::new(), Any,
        "A PEM file of CA certificates that client certificates are verified against.";
    "ssl.truststore.certificates" => ssl_truststore_certificates: Password = Password::default(), Any,
        "CA certificates in PEM, inline instead of ssl.truststore.location.";
    "ssl.client.auth" => ssl_client_auth: String = "none".to_string(), OneOf(&["required", "requested", "none"]),
        "Whether TLS clients must (required), may (requested) or do not (none) present a certificate.";
    "ssl.enabled.protocols" => ssl_enabled_protocols: Names = Names("TLSv1.2,TLSv1.3".to_string()), Any,
        "TLS versions served: TLSv1.2 and/or TLSv1.3 (older versions are refused: rustls does not speak them).";
    "ssl.protocol" => ssl_protocol: String = "TLSv1.3".to_string(), OneOf(&["TLSv1.3", "TLSv1.2", "TLS"]),
        "The SSLContext protocol in Kafka; the versions served are ssl.enabled.protocols.";
    "ssl.endpoint.identification.algorithm" => ssl_endpoint_identification_algorithm: String = "https".to_string(), Any,
        "Host name verification of the server by clients (Kafka: client side only); accepted, no effect on the broker.";
    "ssl.cipher.suites" => ssl_cipher_suites: Names = Names::default(), Any,
        "Empty only: rustls's own safe suites are served.";
    "sasl.enabled.mechanisms" => sasl_enabled_mechanisms: Names = Names("GSSAPI".to_string()), Any,
        "SASL mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER. Kafka's default, GSSAPI, is not supported, so a SASL listener needs this key.";
    "sasl.server.max.receive.size" => sasl_server_max_receive_size: i32 = 524_288, at_least(1),
        "Largest request accepted on a SASL listener before the connection is authenticated.";
    "connection.failed.authentication.delay.ms" => connection_failed_authentication_delay_ms: i32 = 100, at_least(0),
        "KIP-306: the answer to a failed SASL authentication is held back this long before it is written and the connection closed (slows password guessing). Must be less than connections.max.idle.ms, as Kafka requires.";
    "connections.max.reauth.ms" => connections_max_reauth_ms: i64 = 0, at_least(0),
        "KIP-368: when positive, a SASL session lasts at most this long (or the credential's lifetime, if shorter); the client must re-authenticate before then or the connection is closed. 0: sessions do not expire.";

    // --- topics ---
    "num.partitions" => num_partitions: i32 = 1, at_least(1),
        "Default number of partitions for auto-created topics and CreateTopics with -1 partitions.";
    "default.replication.factor" => default_replication_factor: i32 = 1, at_least(1),
        "Default replication factor for new topics (INT in Kafka). A single node keeps one copy; a cluster 1 or one on every voter (the number of nodes in controller.quorum.voters), checked when a topic is created.";
    "auto.create.topics.enable" => auto_create_topics_enable: bool = true, Any,
        "Create a topic when Metadata asks for one that does not exist (and the client allows it).";
    "delete.topic.enable" => delete_topic_enable: bool = true, Any,
        "Allow DeleteTopics.";
    "delete.retention.ms" => delete_retention_ms: i64 = 86_400_000, at_least(0),
        "How long tombstones are kept on compacted topics (topic-level default).";

    // --- topic data logs ---
    "log.segment.bytes" => log_segment_bytes: i32 = 1_073_741_824, at_least(14),
        "Segment size of topic partition logs (topic-level segment.bytes default).";
    "log.retention.ms" => log_retention_ms: i64 = 604_800_000, at_least(-1),
        "Delete segments whose newest record is older than this (-1: forever; topic retention.ms default). log.retention.minutes and log.retention.hours set it too unless this key is given (ms wins over minutes, minutes over hours).";
    "log.retention.bytes" => log_retention_bytes: i64 = -1, at_least(-1),
        "Delete oldest segments while a partition is larger than this (-1: no limit; topic retention.bytes default).";
    "log.retention.check.interval.ms" => log_retention_check_interval_ms: i64 = 300_000, at_least(1),
        "How often retention runs on topic partition logs.";
    "log.message.timestamp.type" => log_message_timestamp_type: String = "CreateTime".to_string(), OneOf(&["CreateTime", "LogAppendTime"]),
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker's clock (topic message.timestamp.type default).";

    // --- request limits ---
    "socket.request.max.bytes" => socket_request_max_bytes: i32 = 104_857_600, at_least(1),
        "Largest request (frame) the broker accepts.";
    "message.max.bytes" => message_max_bytes: i32 = 1_048_588, at_least(0),
        "Largest record batch the broker accepts (topic max.message.bytes default).";
    "max.connections" => max_connections: i32 = i32::MAX, at_least(0),
        "Most client connections the broker holds; a connection over the limit is closed at accept.";
    "max.connections.per.ip" => max_connections_per_ip: i32 = i32::MAX, at_least(0),
        "Most connections from one IP address; more are closed at accept (Kafka's TooManyConnectionsException).";
    "connections.max.idle.ms" => connections_max_idle_ms: i64 = 600_000, at_least(1),
        "Close a connection that has sent no complete request for this long (a half-sent frame does not count as activity, so a slow sender is closed too).";

    // --- __consumer_offsets and offset management ---
    "offsets.topic.num.partitions" => offsets_topic_num_partitions: i32 = 50, at_least(1),
        "Partitions of __consumer_offsets (should not change after deployment: it decides group placement).";
    "offsets.topic.replication.factor" => offsets_topic_replication_factor: i16 = 3, at_least(1),
        "Replication factor of __consumer_offsets. A single node keeps one copy.";
    "offsets.topic.segment.bytes" => offsets_topic_segment_bytes: i32 = 104_857_600, at_least(1),
        "Segment size of __consumer_offsets; small segments compact and load faster.";
    "offsets.topic.compression.codec" => offsets_topic_compression_codec: i32 = 0, Only(0, "__consumer_offsets batches are written uncompressed (no compression codecs are built in)"),
        "Compression codec id for __consumer_offsets; only 0 (none).";
    "offsets.retention.minutes" => offsets_retention_minutes: i32 = 10_080, at_least(1),
        "Committed offsets expire this long after the group becomes empty (or, for standalone consumers, after the last commit).";
    "offsets.retention.check.interval.ms" => offsets_retention_check_interval_ms: i64 = 600_000, at_least(1),
        "How often to look for expired offsets.";
    "offsets.load.buffer.size" => offsets_load_buffer_size: i32 = 5_242_880, at_least(1),
        "Read batch size when loading __consumer_offsets into memory (soft limit).";
    "offsets.snapshot.interval.records" => offsets_snapshot_interval_records: i64 = 100_000, at_least(1),
        "Ringleader-specific: write a snapshot of a __consumer_offsets partition after this many records, then drop the segments it covers.";
    "offset.metadata.max.bytes" => offset_metadata_max_bytes: i32 = 4096, Any,
        "Largest metadata string accepted with an offset commit.";

    // --- transactions ---
    "transaction.state.log.num.partitions" => transaction_state_log_num_partitions: i32 = 50, at_least(1),
        "Partitions of __transaction_state (should not change after deployment: it decides which partition coordinates a transactional id).";
    "transaction.state.log.segment.bytes" => transaction_state_log_segment_bytes: i32 = 104_857_600, at_least(1),
        "Segment size of __transaction_state.";
    "transaction.max.timeout.ms" => transaction_max_timeout_ms: i32 = 900_000, at_least(1),
        "Largest transaction.timeout.ms a producer may ask for; larger gets INVALID_TRANSACTION_TIMEOUT from InitProducerId.";
    "transactional.id.expiration.ms" => transactional_id_expiration_ms: i32 = 604_800_000, at_least(1),
        "A transactional id with no open transaction and no activity for this long is forgotten (its record is tombstoned).";
    "transaction.abort.timed.out.transaction.cleanup.interval.ms" => transaction_abort_timed_out_transaction_cleanup_interval_ms: i32 = 10_000, at_least(1),
        "How often to look for transactions open longer than their timeout; those are aborted and their producer fenced.";
    "transaction.remove.expired.transaction.cleanup.interval.ms" => transaction_remove_expired_transaction_cleanup_interval_ms: i32 = 3_600_000, at_least(1),
        "How often to look for transactional ids past transactional.id.expiration.ms.";

    // --- classic groups ---
    "group.min.session.timeout.ms" => group_min_session_timeout_ms: i32 = 6000, Any,
        "Smallest session timeout a classic-group member may request.";
    "group.max.session.timeout.ms" => group_max_session_timeout_ms: i32 = 1_800_000, Any,
        "Largest session timeout a classic-group member may request.";
    "group.initial.rebalance.delay.ms" => group_initial_rebalance_delay_ms: i32 = 3000, at_least(0),
        "How long a new classic group waits for more members before its first rebalance.";
    "group.max.size" => group_max_size: i32 = i32::MAX, at_least(1),
        "Most members in one classic group.";

    // --- consumer groups (KIP-848) ---
    "group.consumer.session.timeout.ms" => group_consumer_session_timeout_ms: i32 = 45_000, at_least(1),
        "Session timeout for consumer-protocol members.";
    "group.consumer.min.session.timeout.ms" => group_consumer_min_session_timeout_ms: i32 = 45_000, at_least(1),
        "Smallest allowed consumer-protocol session timeout (bounds per-group overrides).";
    "group.consumer.max.session.timeout.ms" => group_consumer_max_session_timeout_ms: i32 = 60_000, at_least(1),
        "Largest allowed consumer-protocol session timeout (bounds per-group overrides).";
    "group.consumer.heartbeat.interval.ms" => group_consumer_heartbeat_interval_ms: i32 = 5000, at_least(1),
        "Heartbeat interval given to consumer-protocol members.";
    "group.consumer.min.heartbeat.interval.ms" => group_consumer_min_heartbeat_interval_ms: i32 = 5000, at_least(1),
        "Smallest allowed consumer-protocol heartbeat interval.";
    "group.consumer.max.heartbeat.interval.ms" => group_consumer_max_heartbeat_interval_ms: i32 = 15_000, at_least(1),
        "Largest allowed consumer-protocol heartbeat interval.";
    "group.consumer.reconciliation.heartbeat.interval.ms" => group_consumer_reconciliation_heartbeat_interval_ms: i32 = 100, at_least(0),
        "Ringleader-specific: the heartbeat interval given to a consumer-protocol member while it has partitions to revoke or to receive (and until a group's next target can be computed), so that a rebalance completes in a few of these instead of whole heartbeat intervals; never more than the group's heartbeat interval. 0 (or the heartbeat interval itself) gives every member the heartbeat interval, as Kafka does.";
    "group.consumer.max.size" => group_consumer_max_size: i32 = i32::MAX, at_least(1),
        "Most members in one consumer-protocol group.";
    "group.consumer.assignors" => group_consumer_assignors: Vec<ServerAssignor> = vec![ServerAssignor::Uniform, ServerAssignor::Range], Any,
        "Server-side assignors (uniform, range); the first is used when a member names none.";
    "group.consumer.migration.policy" => group_consumer_migration_policy: MigrationPolicy = MigrationPolicy::Bidirectional, Any,
        "Whether live groups convert between the classic and consumer protocols (online upgrade and downgrade): bidirectional, upgrade, downgrade or disabled.";
    "group.consumer.assignment.interval.ms" => group_consumer_assignment_interval_ms: i32 = 1000, at_least(0),
        "Minimum time between target-assignment recomputations of one group.";
    "group.consumer.min.assignment.interval.ms" => group_consumer_min_assignment_interval_ms: i32 = 0, at_least(0),
        "Smallest allowed consumer-group assignment interval (bounds per-group overrides).";
    "group.consumer.max.assignment.interval.ms" => group_consumer_max_assignment_interval_ms: i32 = 15_000, at_least(0),
        "Largest allowed consumer-group assignment interval (bounds per-group overrides).";
    "group.consumer.assignor.offload.enable" => group_consumer_assignor_offload_enable: bool = true, Any,
        "Run large assignor computations off the shard's event loop (a blocking thread); false runs every one inline.";

    // --- coordinator runtime ---
    "group.coordinator.rebalance.protocols" => group_coordinator_rebalance_protocols: Vec<RebalanceProtocol> = vec![RebalanceProtocol::Classic, RebalanceProtocol::Consumer, RebalanceProtocol::Streams], ContainsClassic,
        "Enabled group protocols (classic, consumer, streams, share); classic is mandatory.";
    "group.coordinator.append.linger.ms" => group_coordinator_append_linger_ms: i32 = -1, Only(-1, "writes are batched adaptively: a batch is written as soon as the one before it is durable"),
        "How long coordinator writes wait to batch before flushing; only -1 (adaptive).";

    // --- protocol ---
    "unstable.api.versions.enable" => unstable_api_versions_enable: bool = false, Only(false, "this broker serves no API versions Kafka marks unstable"),
        "Advertise API versions Kafka still marks unstable; only false.";

    // --- authorization ---
    "authorizer.class.name" => authorizer_class_name: String = String::new(), AuthorizerClass,
        "The authorizer: empty (none: every request allowed, CreateAcls/DescribeAcls/DeleteAcls answer SECURITY_DISABLED) or org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs kept in DATA/acls).";
    "super.users" => super_users: String = String::new(), SuperUsers,
        "Principals (Type:name, ';'-separated) every authorization allows.";
    "allow.everyone.if.no.acl.found" => allow_everyone_if_no_acl_found: bool = false, Any,
        "With an authorizer: allow an operation on a resource no ACL names at all.";
}

/// The descriptor for `name`, resolving aliases.
fn lookup(name: &str) -> Option<&'static KeyDef> {
    let canonical = ALIASES
        .iter()
        .find(|a| a.name == name)
        .map_or(name, |a| a.target);
    KEYS.iter().find(|k| k.name == canonical)
}

/// The known key closest to a misspelt one, if it is close enough that
/// suggesting it helps more than it confuses.
fn suggest(unknown: &str) -> Option<&'static str> {
    let names = KEYS
        .iter()
        .map(|k| k.name)
        .chain(ALIASES.iter().map(|a| a.name));
    let (best, dist) = names
        .map(|n| (n, edit_distance(&unknown.to_ascii_lowercase(), n)))
        .min_by_key(|&(_, d)| d)?;
    let limit = (unknown.len() / 5).clamp(2, 4);
    (dist <= limit).then_some(best)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

// ---------------------------------------------------------------------------
// Java .properties parsing
// ---------------------------------------------------------------------------

/// One `key=value` pair from a properties text, with the physical line it
/// started on (for error messages).
#[derive(Debug, PartialEq, Eq)]
struct Property {
    line: usize,
    key: String,
    value: String,
}

#[derive(Debug)]
struct SyntaxIssue {
    line: usize,
    text: String,
    reason: String,
}

/// Whitespace as `java.util.Properties` defines it.
fn is_prop_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Splits on `\n`, `\r\n` and lone `\r`, as Java does.
fn physical_lines(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                out.push(&text[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                out.push(&text[start..i]);
                i += 1;
                if bytes.get(i) == Some(&b'\n') {
                    i += 1;
                }
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < bytes.len() {
        out.push(&text[start..]);
    }
    out
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits a logical line into raw (still escaped) key and value: the key ends
/// at the first unescaped `=`, `:` or whitespace; after whitespace, one `=`
/// or `:` may still follow.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (idx, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => {
                let rest = line[idx + 1..].trim_start_matches(is_prop_ws);
                return (&line[..idx], rest);
            }
            c if is_prop_ws(c) => {
                let mut rest = line[idx..].trim_start_matches(is_prop_ws);
                if let Some(r) = rest.strip_prefix(|c| c == '=' || c == ':') {
                    rest = r.trim_start_matches(is_prop_ws);
                }
                return (&line[..idx], rest);
            }
            _ => {}
        }
    }
    (line, "")
}

/// Resolves `\t \n \r \f \uXXXX` and `\x` -> `x`.
fn unescape(s: &str) -> Result<String, String> {
    fn hex4(chars: &mut std::str::Chars<'_>) -> Option<u32> {
        let hex: String = chars.by_ref().take(4).collect();
        if hex.len() == 4 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            u32::from_str_radix(&hex, 16).ok()
        } else {
            None
        }
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // A trailing backslash left by a continuation at end of input.
            None => {}
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let bad = || "malformed \\uXXXX escape".to_string();
                let unit = hex4(&mut chars).ok_or_else(bad)?;
                // Java strings are UTF-16: a high surrogate must be followed
                // by an escaped low surrogate to form one character.
                let code = if (0xD800..0xDC00).contains(&unit) {
                    let low = chars
                        .as_str()
                        .strip_prefix("\\u")
                        .and_then(|rest| hex4(&mut rest.chars()))
                        .filter(|l| (0xDC00..0xE000).contains(l))
                        .ok_or_else(|| "unpaired UTF-16 surrogate in \\u escape".to_string())?;
                    chars.nth(5); // skip the "\uXXXX" just consumed by peeking
                    0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    unit
                };
                out.push(
                    char::from_u32(code)
                        .ok_or_else(|| "unpaired UTF-16 surrogate in \\u escape".to_string())?,
                );
            }
            Some(other) => out.push(other),
        }
    }
    Ok(out)
}

/// Parses the `.properties` subset Kafka's `server.properties` uses: `#`/`!`
/// comments, blank lines, `key=value` / `key: value` / `key value`,
/// backslash continuation, escapes. Values are trimmed (Kafka trims too).
/// Duplicate keys are returned in order, so the later one wins when applied.
fn parse_properties(text: &str) -> Result<Vec<Property>, SyntaxIssue> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines = physical_lines(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start_line = i + 1;
        let first = lines[i].trim_start_matches(is_prop_ws);
        i += 1;
        // Comment lines never continue, even when they end in a backslash.
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = first.to_string();
        while ends_with_odd_backslashes(&logical) && i < lines.len() {
            logical.pop();
            logical.push_str(lines[i].trim_start_matches(is_prop_ws));
            i += 1;
        }
        let issue = |reason: String| SyntaxIssue {
            line: start_line,
            text: logical.clone(),
            reason,
        };
        let (raw_key, raw_value) = split_key_value(&logical);
        let key = unescape(raw_key).map_err(issue)?;
        let value = unescape(raw_value).map_err(issue)?;
        if key.is_empty() {
            return Err(issue("missing key".to_string()));
        }
        out.push(Property {
            line: start_line,
            key,
            value: value.trim().to_string(),
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Config API
// ---------------------------------------------------------------------------

/// The settings the transaction coordinator needs, from the broker config.
pub fn txn_config(c: &Config) -> coordinator::txn::TxnConfig {
    coordinator::txn::TxnConfig {
        max_timeout_ms: c.transaction_max_timeout_ms,
        id_expiration_ms: c.transactional_id_expiration_ms as i64,
        abort_check_interval_ms: c.transaction_abort_timed_out_transaction_cleanup_interval_ms
            as i64,
        expiration_check_interval_ms: c.transaction_remove_expired_transaction_cleanup_interval_ms
            as i64,
    }
}

/// The settings the coordinator needs, from the broker config.
pub fn group_config(c: &Config) -> coordinator::group::GroupConfig {
    coordinator::group::GroupConfig {
        min_session_timeout_ms: c.group_min_session_timeout_ms,
        max_session_timeout_ms: c.group_max_session_timeout_ms,
        initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms,
        max_size: c.group_max_size,
        offset_metadata_max_bytes: c.offset_metadata_max_bytes,
        offsets_retention_ms: c.offsets_retention_ms(),
        offsets_retention_check_interval_ms: c.offsets_retention_check_interval_ms,
        snapshot_interval_records: c.offsets_snapshot_interval_records.max(1) as u64,
        delete_retention_ms: c.delete_retention_ms,
        consumer_session_timeout_ms: c.group_consumer_session_timeout_ms,
        consumer_heartbeat_interval_ms: c.group_consumer_heartbeat_interval_ms,
        consumer_reconciliation_heartbeat_interval_ms: c
            .group_consumer_reconciliation_heartbeat_interval_ms,
        consumer_assignors: c
            .group_consumer_assignors
            .iter()
            .map(|a| match a {
                ServerAssignor::Uniform => "uniform".to_string(),
                ServerAssignor::Range => "range".to_string(),
            })
            .collect(),
        consumer_assignment_interval_ms: c.group_consumer_assignment_interval_ms,
        consumer_max_size: c.group_consumer_max_size,
        consumer_protocol_enabled: c
            .group_coordinator_rebalance_protocols
            .contains(&RebalanceProtocol::Consumer),
        migration_policy: c.group_consumer_migration_policy,
        // Offloading a small assignment costs more than computing it, so `true` offloads those
        // of at least DEFAULT_ASSIGNMENT_OFFLOAD_MIN_WORK members plus partitions (~0.1 ms inline);
        // `false` never offloads.
        assignment_offload_min_work: if c.group_consumer_assignor_offload_enable {
            coordinator::group::DEFAULT_ASSIGNMENT_OFFLOAD_MIN_WORK
        } else {
            usize::MAX
        },
    }
}

impl Config {
    /// Parse properties text (Java `.properties` subset) and apply every
    /// key in order. `source_desc` names the text in errors, e.g. the file
    /// path, giving `server.properties:3`. Stops at the first error; keys
    /// before it stay applied (callers discard the config on error).
    pub fn apply_properties(&mut self, text: &str, source_desc: &str) -> Result<(), ConfigError> {
        let props = parse_properties(text).map_err(|s| ConfigError::Syntax {
            path: source_desc.to_string(),
            line: s.line,
            text: s.text,
            reason: s.reason,
        })?;
        for p in props {
            self.apply_one(&p.key, &p.value, &format!("{source_desc}:{}", p.line))?;
        }
        Ok(())
    }

    /// Apply one `name=value` override (from `--set`). Splits at the first
    /// `=`, so values may themselves contain `=`.
    pub fn apply_set(&mut self, assignment: &str) -> Result<(), ConfigError> {
        let bad = || ConfigError::BadAssignment {
            assignment: assignment.to_string(),
        };
        let (key, value) = assignment.split_once('=').ok_or_else(bad)?;
        let key = key.trim();
        if key.is_empty() {
            return Err(bad());
        }
        self.apply_one(key, value.trim(), "--set")
    }

    /// Defaults, then the file (if any), then `sets` in order (later wins),
    /// then [`Config::validate`].
    pub fn load(file: Option<&Path>, sets: &[String]) -> Result<Config, ConfigError> {
        let mut cfg = Config::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            cfg.apply_properties(&text, &path.display().to_string())?;
        }
        for s in sets {
            cfg.apply_set(s)?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Re-checks every key against its own rule (fields are `pub`, so code
    /// may have bypassed the parsers), then the cross-field rules Kafka's
    /// `GroupCoordinatorConfig` enforces at startup, plus classic min <= max.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut scratch = self.clone();
        for def in KEYS {
            let text = (def.get)(self);
            (def.set)(&mut scratch, &text).map_err(|reason| ConfigError::BadValue {
                key: def.name.to_string(),
                value: text.clone(),
                reason,
                source_desc: self.origin_desc(def),
            })?;
        }

        use Rel::{Le, Lt};
        let rules: [(&str, Rel, &str); 12] = [
            // Kafka's KafkaConfig: "connection.failed.authentication.delay.ms=... should always be
            // less than connections.max.idle.ms=... to prevent failed authentication responses
            // from timing out" (server/src/main/java/org/apache/kafka/server/config/...).
            (
                "connection.failed.authentication.delay.ms",
                Lt,
                "connections.max.idle.ms",
            ),
            (
                "group.consumer.min.assignment.interval.ms",
                Le,
                "group.consumer.max.assignment.interval.ms",
            ),
            (
                "group.consumer.min.assignment.interval.ms",
                Le,
                "group.consumer.assignment.interval.ms",
            ),
            (
                "group.consumer.assignment.interval.ms",
                Le,
                "group.consumer.max.assignment.interval.ms",
            ),
            (
                "group.min.session.timeout.ms",
                Le,
                "group.max.session.timeout.ms",
            ),
            (
                "group.consumer.min.heartbeat.interval.ms",
                Le,
                "group.consumer.max.heartbeat.interval.ms",
            ),
            (
                "group.consumer.min.heartbeat.interval.ms",
                Le,
                "group.consumer.heartbeat.interval.ms",
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                Le,
                "group.consumer.max.heartbeat.interval.ms",
            ),
            (
                "group.consumer.min.session.timeout.ms",
                Le,
                "group.consumer.max.session.timeout.ms",
            ),
            (
                "group.consumer.min.session.timeout.ms",
                Le,
                "group.consumer.session.timeout.ms",
            ),
            (
                "group.consumer.session.timeout.ms",
                Le,
                "group.consumer.max.session.timeout.ms",
            ),
            // Members must get at least one heartbeat in per session.
            (
                "group.consumer.heartbeat.interval.ms",
                Lt,
                "group.consumer.session.timeout.ms",
            ),
        ];
        for (a, rel, b) in rules {
            self.require(a, rel, b)?;
        }
        self.check_quorum_voters()?;
        self.check_cluster_replication()?;
        self.leader_rebalance_ms()?;
        // Ringleader's short interval for reconciling members is never the longer one. Checked
        // only when given: its default (100) must not refuse a broker whose heartbeat interval
        // was set below it; there it gives way to the interval (as it does to a group's own
        // `consumer.heartbeat.interval.ms`).
        if self
            .origins
            .contains_key("group.consumer.reconciliation.heartbeat.interval.ms")
        {
            self.require(
                "group.consumer.reconciliation.heartbeat.interval.ms",
                Le,
                "group.consumer.heartbeat.interval.ms",
            )?;
        }
        Ok(())
    }

    /// `controller.quorum.voters` naming this node alone describes the single node this broker
    /// is; naming others too makes this node one voter of a cluster, whose `__consumer_offsets`
    /// partitions are replicated over every voter (docs/replication.md). A list of other nodes
    /// without this one is refused: this node would hold a replica of nothing.
    fn check_quorum_voters(&self) -> Result<(), ConfigError> {
        let voters = self
            .quorum_voters()
            .expect("checked when the key was applied");
        let this = i64::from(self.node_id);
        if voters.len() > crate::producer_ids::MAX_NODES {
            return Err(ConfigError::Inconsistent {
                reason: format!(
                    "controller.quorum.voters names {} nodes; a Ringleader cluster has at most {}",
                    voters.len(),
                    crate::producer_ids::MAX_NODES
                ),
            });
        }
        if voters.is_empty() || voters.iter().any(|v| v.id == this) {
            return Ok(());
        }
        let ids: Vec<String> = voters.iter().map(|v| v.id.to_string()).collect();
        // A node started to join the running cluster those voters are (AddRaftVoter adds it):
        // its node-to-node address is its controller listener, as a KRaft controller added with
        // `kafka-metadata-quorum add-controller` has one. Its producer id lane is its id
        // (`producer_ids`), past the first voters' positions.
        match self.join_address() {
            Ok(Some(_)) => {
                let max = crate::producer_ids::MAX_NODES as i64;
                let may = u64::try_from(this)
                    .is_ok_and(|id| replication::metadata::may_join(id, voters.len()));
                if !may {
                    return Err(ConfigError::Inconsistent {
                        reason: format!(
                            "node.id={this} cannot join the cluster of nodes {}: a joining \
                             node's id is between {} (the number of nodes in \
                             controller.quorum.voters) and {}",
                            ids.join(", "),
                            voters.len(),
                            max - 1
                        ),
                    });
                }
                Ok(())
            }
            Ok(None) => Err(ConfigError::Inconsistent {
                reason: format!(
                    "controller.quorum.voters names nodes {} but not this node (node.id={this}): \
                     list this node too, or give it a controller listener \
                     (listeners=...,CONTROLLER://host:port) to join that running cluster",
                    ids.join(", ")
                ),
            }),
            Err(reason) => Err(ConfigError::Inconsistent { reason }),
        }
    }

    /// The names of the controller listeners, upper-case: those `controller.listener.names`
    /// names, and CONTROLLER (a KRaft file's usual name) whatever it says.
    fn controller_listeners(&self) -> Vec<String> {
        self.controller_listener_names
            .split(',')
            .map(|n| n.trim().to_ascii_uppercase())
            .filter(|n| !n.is_empty())
            .chain(["CONTROLLER".to_string()])
            .collect()
    }

    /// On a node that joins a running cluster (`controller.quorum.voters` does not name it):
    /// its node-to-node listener, the first of `listeners` that `controller.listener.names`
    /// names (or named CONTROLLER), as (host, port); an empty host listens on every interface.
    /// None when there is none.
    pub fn join_address(&self) -> Result<Option<(String, u16)>, String> {
        if !self.origins.contains_key("listeners") {
            return Ok(None);
        }
        let controllers = self.controller_listeners();
        Ok(parse_listener_list(&self.listeners, false)?
            .into_iter()
            .find(|e| {
                e.name
                    .as_deref()
                    .is_some_and(|n| controllers.contains(&n.to_ascii_uppercase()))
            })
            .map(|e| (e.host, e.port)))
    }

    /// On a cluster every `__consumer_offsets` partition has a replica on every voter, and a
    /// commit is acknowledged once a majority of them holds it (docs/replication.md). So
    /// `offsets.topic.replication.factor`, when set, must be the number of voters, and
    /// `min.insync.replicas` at most a majority: a value asking for another placement or for
    /// more copies before the acknowledgement than are waited for is refused, not ignored.
    fn check_cluster_replication(&self) -> Result<(), ConfigError> {
        let voters = self.quorum_voters().map(|v| v.len()).unwrap_or(0);
        if voters <= 1 {
            return Ok(());
        }
        let majority = voters / 2 + 1;
        if self
            .origins
            .contains_key("offsets.topic.replication.factor")
            && usize::try_from(self.offsets_topic_replication_factor).ok() != Some(voters)
        {
            return Err(ConfigError::Inconsistent {
                reason: format!(
                    "offsets.topic.replication.factor={} but every __consumer_offsets partition of a \
                     Ringleader cluster has a replica on each of its {voters} voters \
                     (controller.quorum.voters): set it to {voters} or leave it out",
                    self.offsets_topic_replication_factor
                ),
            });
        }
        if let Some(n) = self.cluster_key("min.insync.replicas") {
            let v: i64 = n
                .value
                .trim()
                .parse()
                .map_err(|_| n.bad("not an integer"))?;
            if v < 1 || v as usize > majority {
                return Err(ConfigError::Inconsistent {
                    reason: format!(
                        "min.insync.replicas={v} but a commit on a Ringleader cluster of {voters} \
                         voters is acknowledged once a majority ({majority}) holds it: set it \
                         between 1 and {majority}"
                    ),
                });
            }
        }
        Ok(())
    }

    /// How often a cluster's leaders hand their partitions back to the preferred replicas
    /// (`auto.leader.rebalance.enable`, default true, every
    /// `leader.imbalance.check.interval.seconds`, default 300, as Kafka's controller does), in
    /// milliseconds; None when off. A value Kafka would refuse is refused.
    pub fn leader_rebalance_ms(&self) -> Result<Option<u64>, ConfigError> {
        if let Some(n) = self.cluster_key("auto.leader.rebalance.enable") {
            match n.value.trim().to_ascii_lowercase().as_str() {
                "true" => {}
                "false" => return Ok(None),
                _ => return Err(n.bad("not a boolean (true or false)")),
            }
        }
        let seconds = match self.cluster_key("leader.imbalance.check.interval.seconds") {
            None => 300,
            Some(n) => match n.value.trim().parse::<i64>() {
                Ok(v) if v >= 1 => v as u64,
                Ok(_) => return Err(n.bad("must be at least 1")),
                Err(_) => return Err(n.bad("not an integer")),
            },
        };
        Ok(Some(seconds.saturating_mul(1000)))
    }

    /// The value set for `key`, one of the keys only a cluster reads ([`CLUSTER_EFFECT`]), which
    /// a single node keeps among the keys without effect.
    fn cluster_key(&self, key: &str) -> Option<&NoEffect> {
        debug_assert!(CLUSTER_EFFECT.contains(&key), "{key} is not a cluster key");
        self.no_effect.iter().find(|n| n.key == key)
    }

    /// `controller.quorum.voters`, parsed.
    pub fn quorum_voters(&self) -> Result<Vec<QuorumVoter>, String> {
        parse_quorum_voters(&self.controller_quorum_voters)
    }

    /// Every known key (aliases included) with its current value, sorted by
    /// name, for DescribeConfigs.
    pub fn entries(&self) -> Vec<ConfigEntry> {
        let defaults = Config::default();
        let mut out: Vec<ConfigEntry> = KEYS
            .iter()
            .map(|d| self.make_entry(d, d.name, d.doc, &defaults))
            .chain(ALIASES.iter().filter_map(|a| {
                lookup(a.target).map(|d| self.make_entry(d, a.name, a.doc, &defaults))
            }))
            .collect();
        out.sort_by(|a, b| a.name.cmp(b.name));
        out
    }

    /// One entry by name (aliases accepted), for DescribeConfigs requests
    /// that name specific keys. `None` for an unknown key.
    pub fn entry(&self, name: &str) -> Option<ConfigEntry> {
        let def = lookup(name)?;
        let (name, doc) = match ALIASES.iter().find(|a| a.name == name) {
            Some(a) => (a.name, a.doc),
            None => (def.name, def.doc),
        };
        Some(self.make_entry(def, name, doc, &Config::default()))
    }

    /// Where `name` was set ("path:line" or "--set"); `None` if never set.
    pub fn origin(&self, name: &str) -> Option<&str> {
        let def = lookup(name)?;
        self.origins.get(def.name).map(String::as_str)
    }

    /// The advertised endpoint from `advertised.listeners`, or `None` when
    /// it is empty (the broker then advertises its listen address).
    pub fn advertised_host_port(&self) -> Option<(String, u16)> {
        parse_advertised(&self.advertised_listeners).ok().flatten()
    }

    /// The address `listeners` names, when the key was supplied: its PLAINTEXT (or unnamed)
    /// entry as (host, port); an empty host means every interface, as in Kafka.
    pub fn listen_from_listeners(&self) -> Option<Result<(String, u16), String>> {
        if !self.origins.contains_key("listeners") {
            return None;
        }
        let found = parse_listener_list(&self.listeners, false).and_then(|list| {
            plaintext_entry(list).ok_or_else(|| {
                "listeners has no PLAINTEXT entry (this broker only speaks PLAINTEXT)".to_string()
            })
        });
        Some(found)
    }

    /// The data directory `log.dirs` (or `log.dir`) names, when set.
    pub fn data_dir(&self) -> Option<PathBuf> {
        let d = self.log_dirs.trim();
        (!d.is_empty()).then(|| PathBuf::from(d.trim_end_matches(',')))
    }

    /// `offsets.retention.minutes` in milliseconds, as Kafka computes it.
    pub fn offsets_retention_ms(&self) -> i64 {
        i64::from(self.offsets_retention_minutes) * 60_000
    }

    /// Kafka keys accepted without effect (the broker logs each once at start-up).
    pub fn accepted_without_effect(&self) -> Vec<&NoEffect> {
        let cluster = self.quorum_voters().is_ok_and(|v| v.len() > 1);
        self.no_effect
            .iter()
            .filter(|n| !(cluster && CLUSTER_EFFECT.contains(&n.key.as_str())))
            .collect()
    }

    fn apply_one(&mut self, key: &str, value: &str, origin: &str) -> Result<(), ConfigError> {
        if let Some(rest) = key.strip_prefix("listener.name.") {
            return self.apply_listener_override(key, rest, value, origin);
        }
        if key == "controller.listener.names" {
            self.controller_listener_names = value.to_string();
        }
        if key == "controller.quorum.voters" {
            parse_quorum_voters(value).map_err(|reason| ConfigError::BadValue {
                key: key.to_string(),
                value: value.to_string(),
                reason,
                source_desc: origin.to_string(),
            })?;
            self.controller_quorum_voters = value.to_string();
            // It has an effect: the voters are the cluster's nodes (docs/replication.md).
            if let Some(def) = lookup(key) {
                self.set_known(def, key, value, origin)?;
            }
            return Ok(());
        }
        if let Some(reason) = lookup_reason(NO_EFFECT, key) {
            // Kept in the table too (DescribeConfigs reports it) when this broker has the key.
            if let Some(def) = lookup(key) {
                self.set_known(def, key, value, origin)?;
            }
            self.no_effect.retain(|n| n.key != key);
            self.no_effect.push(NoEffect {
                key: key.to_string(),
                value: value.to_string(),
                source_desc: origin.to_string(),
                reason,
            });
            return Ok(());
        }
        if let Some(minutes_per_unit) = match key {
            "log.retention.minutes" => Some(1),
            "log.retention.hours" => Some(60),
            _ => None,
        } {
            return self.apply_retention(key, value, origin, minutes_per_unit);
        }
        if key == "log.dir" {
            // Kafka: log.dirs wins over log.dir whichever comes first.
            if self.origins.contains_key("log.dirs") {
                return Ok(());
            }
            return self.apply_one("log.dirs", value, origin);
        }
        let Some(def) = lookup(key) else {
            let refused = lookup_reason(REFUSED, key)
                .or_else(|| is_kafka_broker_key(key).then_some(UNSUPPORTED));
            return Err(match refused {
                Some(reason) => ConfigError::Unsupported {
                    key: key.to_string(),
                    source_desc: origin.to_string(),
                    reason,
                },
                None => ConfigError::UnknownKey {
                    key: key.to_string(),
                    source_desc: origin.to_string(),
                    suggestion: suggest(key),
                },
            });
        };
        self.set_known(def, key, value, origin)
    }

    /// `listener.name.<listener>.<key>`: a per-listener ssl.* / sasl key (checked as the key
    /// itself is), or `<mechanism>.sasl.jaas.config`, the JAAS entry of one SASL mechanism.
    /// Anything else under the prefix is refused with a reason.
    fn apply_listener_override(
        &mut self,
        key: &str,
        rest: &str,
        value: &str,
        origin: &str,
    ) -> Result<(), ConfigError> {
        let unsupported = |reason: &'static str| ConfigError::Unsupported {
            key: key.to_string(),
            source_desc: origin.to_string(),
            reason,
        };
        let Some((listener, inner)) = rest.split_once('.') else {
            return Err(unsupported("expected listener.name.<listener>.<key>"));
        };
        if listener.is_empty() || listener.chars().any(|c| c.is_ascii_uppercase()) {
            // Kafka looks the overrides up under the lower-case listener name only.
            return Err(unsupported(
                "the listener name in listener.name.<listener>.<key> must be lower-case, as Kafka looks it up",
            ));
        }
        let jaas = inner
            .strip_suffix(".sasl.jaas.config")
            .filter(|m| !m.is_empty() && !m.contains('.'));
        if jaas.is_none() {
            let per_listener = inner.starts_with("ssl.")
                || inner.starts_with("sasl.")
                || inner == "connections.max.reauth.ms";
            match lookup(inner).filter(|_| per_listener) {
                Some(def) => {
                    let mut scratch = Config::default();
                    (def.set)(&mut scratch, value).map_err(|reason| ConfigError::BadValue {
                        key: key.to_string(),
                        value: value.to_string(),
                        reason,
                        source_desc: origin.to_string(),
                    })?;
                }
                None => {
                    return Err(unsupported(
                        lookup_reason(REFUSED, inner).unwrap_or(
                            "only ssl.*, sasl.* and connections.max.reauth.ms keys and <mechanism>.sasl.jaas.config are implemented per listener",
                        ),
                    ))
                }
            }
        }
        self.listener_overrides
            .insert(key.to_string(), value.to_string());
        Ok(())
    }

    /// The value of `key` for `listener`: its `listener.name.<listener>.<key>` override, else the
    /// broker-wide value (rendered as written).
    pub fn listener_value(&self, listener: &str, key: &str) -> String {
        let full = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
        match self.listener_overrides.get(&full) {
            Some(v) => v.clone(),
            None => lookup(key).map(|d| (d.get)(self)).unwrap_or_default(),
        }
    }

    /// Whether `key` was given for `listener`, per listener or broker-wide.
    pub fn listener_key_given(&self, listener: &str, key: &str) -> bool {
        let full = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
        self.listener_overrides.contains_key(&full)
            || lookup(key).is_some_and(|d| self.origins.contains_key(d.name))
    }

    /// `listener.name.<listener>.<mechanism>.sasl.jaas.config`, the only place a Kafka broker
    /// reads a JAAS entry from its config (`JaasContext.loadServerContext`).
    pub fn listener_jaas(&self, listener: &str, mechanism: &str) -> Option<&str> {
        let full = format!(
            "listener.name.{}.{}.sasl.jaas.config",
            listener.to_ascii_lowercase(),
            mechanism.to_ascii_lowercase()
        );
        self.listener_overrides.get(&full).map(String::as_str)
    }

    /// The listeners to serve, from `listeners` (or one PLAINTEXT listener at 127.0.0.1:9092
    /// when the key was not given), each with its security protocol from
    /// `listener.security.protocol.map` and its `advertised.listeners` entry if any. Listeners
    /// `controller.listener.names` names (or named CONTROLLER) are skipped: no controller runs
    /// here. Names are upper-case.
    pub fn listener_specs(&self) -> Result<Vec<ListenerSpec>, String> {
        let list = if self.origins.contains_key("listeners") {
            parse_listener_list(&self.listeners, false)?
        } else {
            vec![Endpoint {
                name: None,
                host: "127.0.0.1".to_string(),
                port: 9092,
            }]
        };
        let map = parse_protocol_map(&self.listener_security_protocol_map)?;
        let advertised = parse_listener_list(&self.advertised_listeners, true)?;
        let controllers = self.controller_listeners();
        let mut out = Vec::new();
        for e in list {
            let name = e
                .name
                .as_deref()
                .unwrap_or("PLAINTEXT")
                .to_ascii_uppercase();
            if controllers.contains(&name) {
                continue;
            }
            let protocol = map
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, p)| p.clone())
                .ok_or_else(|| {
                    format!("listener {name} has no security protocol in listener.security.protocol.map")
                })?;
            let adv = advertised
                .iter()
                .find(|a| {
                    a.name
                        .as_deref()
                        .unwrap_or("PLAINTEXT")
                        .eq_ignore_ascii_case(&name)
                })
                .map(|a| (a.host.clone(), a.port));
            out.push(ListenerSpec {
                name,
                protocol,
                host: e.host,
                port: e.port,
                advertised: adv,
            });
        }
        if let Some(a) = advertised.iter().find(|a| {
            let n = a.name.as_deref().unwrap_or("PLAINTEXT");
            !out.iter().any(|l| l.name.eq_ignore_ascii_case(n))
                && !controllers.iter().any(|c| c.eq_ignore_ascii_case(n))
        }) {
            return Err(format!(
                "advertised.listeners names {}, which is not in listeners",
                a.name.as_deref().unwrap_or("PLAINTEXT")
            ));
        }
        if out.is_empty() {
            return Err("listeners has no listener to serve (only controller listeners)".into());
        }
        Ok(out)
    }

    /// Parse, check and store a key of the table (spelt `key`, maybe an alias), remembering where
    /// it came from.
    fn set_known(
        &mut self,
        def: &'static KeyDef,
        key: &str,
        value: &str,
        origin: &str,
    ) -> Result<(), ConfigError> {
        (def.set)(self, value).map_err(|reason| ConfigError::BadValue {
            key: key.to_string(),
            value: value.to_string(),
            reason,
            source_desc: origin.to_string(),
        })?;
        self.origins.insert(def.name, origin.to_string());
        Ok(())
    }

    /// Kafka's `log.retention.minutes` / `log.retention.hours`: the retention in a coarser unit,
    /// used unless a finer one is set (ms wins over minutes, minutes over hours, whatever the
    /// order they appear in), as Kafka's `LogConfig` resolves them.
    fn apply_retention(
        &mut self,
        key: &str,
        value: &str,
        origin: &str,
        minutes_per_unit: i64,
    ) -> Result<(), ConfigError> {
        let bad = |reason: String| ConfigError::BadValue {
            key: key.to_string(),
            value: value.to_string(),
            reason,
            source_desc: origin.to_string(),
        };
        let n: i32 = value
            .trim()
            .parse()
            .map_err(|_| bad("expected a 32-bit integer".into()))?;
        let finer_set = self.origins.contains_key("log.retention.ms")
            || (minutes_per_unit > 1 && self.retention_minutes_set);
        if minutes_per_unit == 1 {
            self.retention_minutes_set = true;
        }
        if finer_set {
            return Ok(());
        }
        self.log_retention_ms = if n < 0 {
            -1
        } else {
            i64::from(n) * minutes_per_unit * 60_000
        };
        Ok(())
    }

    fn make_entry(
        &self,
        def: &KeyDef,
        name: &'static str,
        doc: &'static str,
        defaults: &Config,
    ) -> ConfigEntry {
        let text = (def.get)(self);
        // Supplied explicitly counts as non-default even when equal to the
        // default, as Kafka reports STATIC_BROKER_CONFIG for any key present
        // in server.properties.
        let is_default = !self.origins.contains_key(def.name) && text == (def.get)(defaults);
        let sensitive = def.config_type == ConfigType::Password;
        // Kafka's string keys with a null default render as null, not "".
        let value = if sensitive || (text.is_empty() && def.config_type == ConfigType::String) {
            None
        } else {
            Some(text)
        };
        ConfigEntry {
            name,
            value,
            is_default,
            read_only: true,
            sensitive,
            config_type: def.config_type,
            doc,
        }
    }

    /// "default", "server.properties:3", "--set", or "set in code" for a
    /// field changed directly without going through the parsers.
    fn origin_desc(&self, def: &KeyDef) -> String {
        match self.origins.get(def.name) {
            Some(o) => o.clone(),
            None if (def.get)(self) == (def.get)(&Config::default()) => "default".to_string(),
            None => "set in code".to_string(),
        }
    }

    fn require(&self, a: &'static str, rel: Rel, b: &'static str) -> Result<(), ConfigError> {
        let (Some(da), Some(db)) = (lookup(a), lookup(b)) else {
            unreachable!("cross-field rule names an unknown key");
        };
        let (va, vb) = ((da.get)(self), (db.get)(self));
        let (na, nb): (i64, i64) = match (va.parse(), vb.parse()) {
            (Ok(x), Ok(y)) => (x, y),
            _ => unreachable!("cross-field rules compare integer keys"),
        };
        let ok = match rel {
            Rel::Le => na <= nb,
            Rel::Lt => na < nb,
        };
        if ok {
            return Ok(());
        }
        let phrase = match rel {
            Rel::Le => "less than or equal to",
            Rel::Lt => "less than",
        };
        Err(ConfigError::Inconsistent {
            reason: format!(
                "{a} ({va}, {}) must be {phrase} {b} ({vb}, {})",
                self.origin_desc(da),
                self.origin_desc(db)
            ),
        })
    }
}

#[derive(Clone, Copy)]
enum Rel {
    Le,
    Lt,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cfg: &mut Config, s: &str) {
        cfg.apply_set(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    }

    fn set_err(s: &str) -> String {
        let mut cfg = Config::default();
        cfg.apply_set(s).unwrap_err().to_string()
    }

    fn entry(cfg: &Config, name: &str) -> ConfigEntry {
        cfg.entries()
            .into_iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no entry {name}"))
    }

    #[test]
    fn defaults_match_kafka() {
        let c = Config::default();
        assert_eq!(c.node_id, 1);
        assert_eq!(c.advertised_listeners, "");
        assert_eq!(c.listeners, "PLAINTEXT://:9092");
        assert_eq!(c.num_partitions, 1);
        assert_eq!(c.default_replication_factor, 1);
        assert!(c.auto_create_topics_enable);
        assert!(c.delete_topic_enable);
        assert_eq!(c.socket_request_max_bytes, 104_857_600);
        assert_eq!(c.message_max_bytes, 1_048_588);
        assert_eq!(c.offsets_topic_num_partitions, 50);
        assert_eq!(c.offsets_topic_replication_factor, 3);
        assert_eq!(c.offsets_topic_segment_bytes, 104_857_600);
        assert_eq!(c.offsets_topic_compression_codec, 0);
        assert_eq!(c.offsets_retention_minutes, 10_080);
        assert_eq!(c.offsets_retention_ms(), 7 * 24 * 3600 * 1000);
        assert_eq!(c.offsets_retention_check_interval_ms, 600_000);
        assert_eq!(c.offsets_load_buffer_size, 5_242_880);
        assert_eq!(c.offset_metadata_max_bytes, 4096);
        assert_eq!(c.group_min_session_timeout_ms, 6000);
        assert_eq!(c.group_max_session_timeout_ms, 1_800_000);
        assert_eq!(c.group_initial_rebalance_delay_ms, 3000);
        assert_eq!(c.group_max_size, i32::MAX);
        assert_eq!(c.group_consumer_session_timeout_ms, 45_000);
        assert_eq!(c.group_consumer_min_session_timeout_ms, 45_000);
        assert_eq!(c.group_consumer_max_session_timeout_ms, 60_000);
        assert_eq!(c.group_consumer_heartbeat_interval_ms, 5000);
        assert_eq!(c.group_consumer_min_heartbeat_interval_ms, 5000);
        assert_eq!(c.group_consumer_max_heartbeat_interval_ms, 15_000);
        assert_eq!(c.group_consumer_max_size, i32::MAX);
        assert_eq!(
            c.group_consumer_assignors,
            vec![ServerAssignor::Uniform, ServerAssignor::Range]
        );
        assert_eq!(
            c.group_consumer_migration_policy,
            MigrationPolicy::Bidirectional
        );
        assert_eq!(c.group_consumer_assignment_interval_ms, 1000);
        // Ringleader's own key: reconciling members heartbeat every 100 ms (Kafka has no such key).
        assert_eq!(c.group_consumer_reconciliation_heartbeat_interval_ms, 100);
        // Kafka's default: large assignments run off the shard's event loop.
        assert!(c.group_consumer_assignor_offload_enable);
        assert_eq!(
            c.group_coordinator_rebalance_protocols,
            vec![
                RebalanceProtocol::Classic,
                RebalanceProtocol::Consumer,
                RebalanceProtocol::Streams
            ]
        );
        assert_eq!(c.group_coordinator_append_linger_ms, -1);
        assert_eq!(c.delete_retention_ms, 86_400_000);
        assert_eq!(c.log_dirs, "");
        assert!(!c.unstable_api_versions_enable);
        assert_eq!(c.cluster_id, "");
        c.validate().expect("defaults are consistent");
        assert_eq!(c.advertised_host_port(), None);
    }

    #[test]
    fn defaults_render_like_kafka_and_round_trip() {
        let c = Config::default();
        let entries = c.entries();
        assert_eq!(entries.len(), KEYS.len() + ALIASES.len());
        assert!(
            entries.windows(2).all(|w| w[0].name < w[1].name),
            "sorted, unique"
        );
        assert!(entries
            .iter()
            .all(|e| e.is_default && e.config_source_code() == 5));
        assert_eq!(
            entry(&c, "group.consumer.assignors").value.as_deref(),
            Some("uniform,range")
        );
        assert_eq!(
            entry(&c, "group.coordinator.rebalance.protocols")
                .value
                .as_deref(),
            Some("classic,consumer,streams")
        );
        assert_eq!(
            entry(&c, "group.consumer.migration.policy")
                .value
                .as_deref(),
            Some("bidirectional")
        );
        assert_eq!(
            entry(&c, "group.max.size").value.as_deref(),
            Some("2147483647")
        );
        assert_eq!(entry(&c, "advertised.listeners").value, None);
        assert_eq!(entry(&c, "broker.id").value.as_deref(), Some("1"));
        assert_eq!(
            entry(&c, "auto.create.topics.enable").value.as_deref(),
            Some("true")
        );
        assert_eq!(
            entry(&c, "offsets.topic.replication.factor").config_type,
            ConfigType::Short
        );
        assert_eq!(
            entry(&c, "delete.retention.ms").config_type,
            ConfigType::Long
        );
        assert_eq!(
            entry(&c, "group.consumer.assignors").config_type,
            ConfigType::List
        );
        // Every rendered default parses back through its own setter.
        let mut scratch = Config::default();
        for def in KEYS {
            (def.set)(&mut scratch, &(def.get)(&c))
                .unwrap_or_else(|e| panic!("{} default does not round-trip: {e}", def.name));
        }
    }

    #[test]
    fn type_codes_match_kafka() {
        let codes: Vec<i8> = [
            ConfigType::Unknown,
            ConfigType::Boolean,
            ConfigType::String,
            ConfigType::Int,
            ConfigType::Short,
            ConfigType::Long,
            ConfigType::Double,
            ConfigType::List,
            ConfigType::Class,
            ConfigType::Password,
        ]
        .iter()
        .map(ConfigType::code)
        .collect();
        assert_eq!(codes, (0..=9).collect::<Vec<i8>>());
    }

    #[test]
    fn parses_properties_with_comments_continuations_and_escapes() {
        let text = "\u{feff}# a comment\r\n\
                    ! another comment \\\r\n\
                    \n\
                    \t  num.partitions = 7\n\
                    group.max.size: 10\n\
                    delete.topic.enable false\n\
                    group.consumer.assignors = range, \\\n\
                    \x20     uniform\n\
                    cluster.id=ab\\=c\\u0041\\td\\\\\r\
                    log.dirs  =  /a\\ b  \n\
                    num.partitions=8\n\
                    group.initial.rebalance.delay.ms\n\
                    advertised.listeners=PLAINTEXT\\://h\\:1\\\n";
        let props = parse_properties(text).expect("parses");
        let got: Vec<(usize, &str, &str)> = props
            .iter()
            .map(|p| (p.line, p.key.as_str(), p.value.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (4, "num.partitions", "7"),
                (5, "group.max.size", "10"),
                (6, "delete.topic.enable", "false"),
                (7, "group.consumer.assignors", "range, uniform"),
                (9, "cluster.id", "ab=cA\td\\"),
                (10, "log.dirs", "/a b"),
                (11, "num.partitions", "8"),
                (12, "group.initial.rebalance.delay.ms", ""),
                (13, "advertised.listeners", "PLAINTEXT://h:1"),
            ]
        );
        // The comment ending in a backslash did not swallow the blank line,
        // and applying (minus the empty-valued key) works; later wins.
        let mut c = Config::default();
        let text = text.replace("group.initial.rebalance.delay.ms\n", "");
        c.apply_properties(&text, "server.properties").unwrap();
        assert_eq!(c.num_partitions, 8);
        assert_eq!(c.group_max_size, 10);
        assert!(!c.delete_topic_enable);
        assert_eq!(
            c.group_consumer_assignors,
            vec![ServerAssignor::Range, ServerAssignor::Uniform]
        );
        assert_eq!(c.cluster_id, "ab=cA\td\\");
        assert_eq!(c.origin("num.partitions"), Some("server.properties:11"));
        assert_eq!(c.advertised_host_port(), Some(("h".to_string(), 1)));
    }

    #[test]
    fn unicode_escapes_and_syntax_errors() {
        let p = parse_properties("cluster.id=\\u00e9\\uD83D\\uDE00x").unwrap();
        assert_eq!(p[0].value, "é😀x");
        for (text, want) in [
            ("a\nnum.partitions=\\u12", "malformed \\uXXXX"),
            ("a\nnum.partitions=\\uD83Dx", "unpaired"),
            ("a\n= 5", "missing key"),
        ] {
            let mut c = Config::default();
            let err = c.apply_properties(text, "s.properties").unwrap_err();
            assert!(
                matches!(err, ConfigError::Syntax { line: 2, .. }),
                "{err:?}"
            );
            let msg = err.to_string();
            assert!(msg.starts_with("syntax error at s.properties:2: "), "{msg}");
            assert!(msg.contains(want), "{msg}");
        }
    }

    #[test]
    fn load_applies_file_then_sets_and_validates() {
        let path =
            std::env::temp_dir().join(format!("ringleader-cfg-{}.properties", std::process::id()));
        std::fs::write(&path, "num.partitions=3\ngroup.max.size=100\nbroker.id=7\n").unwrap();
        let sets = vec![
            "num.partitions=5".to_string(),
            "num.partitions = 6".to_string(),
        ];
        let c = Config::load(Some(&path), &sets).unwrap();
        assert_eq!(
            c.num_partitions, 6,
            "--set overrides the file, later --set wins"
        );
        assert_eq!(c.group_max_size, 100);
        assert_eq!(c.node_id, 7, "broker.id is an alias of node.id");
        assert_eq!(c.origin("num.partitions"), Some("--set"));
        let file_origin = format!("{}:2", path.display());
        assert_eq!(c.origin("group.max.size"), Some(file_origin.as_str()));

        // Validation runs after all sources.
        let err = Config::load(
            Some(&path),
            &["group.min.session.timeout.ms=2000000".to_string()],
        )
        .unwrap_err();
        assert!(matches!(err, ConfigError::Inconsistent { .. }), "{err}");
        std::fs::remove_file(&path).unwrap();

        let err = Config::load(Some(&path), &[]).unwrap_err();
        assert!(matches!(err, ConfigError::Io { .. }));
        assert!(
            err.to_string().starts_with("cannot read config file "),
            "{err}"
        );

        let c = Config::load(None, &[]).unwrap();
        assert_eq!(c.num_partitions, 1);
    }

    /// Kafka 4.x's KRaft `config/server.properties` (combined broker + controller), its keys and
    /// values as shipped.
    const KAFKA_SERVER_PROPERTIES: &str =
        include_str!("../tests/fixtures/kafka-4.4-server.properties");

    #[test]
    fn kafkas_own_server_properties_loads_and_says_what_has_no_effect() {
        let mut c = Config::default();
        c.apply_properties(KAFKA_SERVER_PROPERTIES, "server.properties")
            .expect("Kafka's server.properties loads");
        c.validate().expect("and is consistent");
        assert_eq!(
            c.data_dir(),
            Some(PathBuf::from("/tmp/kraft-combined-logs"))
        );
        assert_eq!(
            c.listen_from_listeners(),
            Some(Ok((String::new(), 9092))),
            "the PLAINTEXT listener, every interface"
        );
        assert_eq!(c.advertised_host_port(), Some(("localhost".into(), 9092)));
        assert_eq!(c.log_retention_ms, 168 * 3_600_000);
        assert_eq!(c.offsets_topic_replication_factor, 1, "still reported");
        let announced: Vec<&str> = c
            .accepted_without_effect()
            .iter()
            .map(|n| n.key.as_str())
            .collect();
        assert_eq!(
            announced,
            [
                "process.roles",
                "controller.quorum.bootstrap.servers",
                "inter.broker.listener.name",
                "controller.listener.names",
                "num.network.threads",
                "num.io.threads",
                "socket.send.buffer.bytes",
                "socket.receive.buffer.bytes",
                "num.recovery.threads.per.data.dir",
                "offsets.topic.replication.factor",
                "share.coordinator.state.topic.replication.factor",
                "share.coordinator.state.topic.min.isr",
                "transaction.state.log.replication.factor",
                "transaction.state.log.min.isr",
            ]
        );
        assert!(c.accepted_without_effect()[0].source_desc == "server.properties:3");
    }

    #[test]
    fn kafka_keys_not_implemented_are_refused_with_a_reason_and_typos_stay_unknown() {
        let refused = set_err("ssl.keymanager.algorithm=SunX509");
        assert!(
            refused.starts_with("config key \"ssl.keymanager.algorithm\" (from --set) is a Kafka broker setting Ringleader does not support: this TLS setting is not implemented"),
            "{refused}"
        );
        assert!(set_err("ssl.key.password=x").contains("encrypted PEM private keys"));
        assert!(set_err("sasl.kerberos.service.name=kafka").contains("GSSAPI"));
        assert!(set_err("listener.name.SSL.ssl.client.auth=required").contains("lower-case"));
        assert!(set_err("listener.name.ssl.num.io.threads=3").contains("per listener"));
        assert!(set_err("listener.name.ssl.ssl.client.auth=maybe").contains("ssl.client.auth"));
        assert!(set_err("group.coordinator.threads=8").contains("use --cores"));
        assert!(set_err("offsets.commit.timeout.ms=5000").contains("waits for its fsync"));
        // A Kafka key with no specific reason.
        let generic = set_err("log.roll.ms=1000");
        assert!(
            generic.contains("does not support: not implemented here"),
            "{generic}"
        );
        // Not a Kafka key either: a typo, with a suggestion when one is close.
        assert_eq!(
            set_err("num.partition=3"),
            "unknown config key \"num.partition\" (from --set); did you mean \"num.partitions\"?"
        );
    }

    #[test]
    fn retention_in_minutes_or_hours_gives_way_to_finer_units() {
        let load = |text: &str| {
            let mut c = Config::default();
            c.apply_properties(text, "p").expect("loads");
            c.log_retention_ms
        };
        assert_eq!(load("log.retention.hours=2\n"), 2 * 3_600_000);
        assert_eq!(load("log.retention.minutes=3\n"), 3 * 60_000);
        assert_eq!(load("log.retention.ms=5\nlog.retention.hours=2\n"), 5);
        assert_eq!(load("log.retention.hours=2\nlog.retention.ms=5\n"), 5);
        assert_eq!(
            load("log.retention.minutes=3\nlog.retention.hours=2\n"),
            3 * 60_000
        );
        assert_eq!(load("log.retention.hours=-1\n"), -1);
        // log.dirs wins over log.dir, in either order.
        let mut c = Config::default();
        c.apply_properties("log.dirs=/a\nlog.dir=/b\n", "p")
            .expect("loads");
        assert_eq!(c.data_dir(), Some(PathBuf::from("/a")));
    }

    #[test]
    fn the_coordinators_defaults_are_the_configs() {
        assert_eq!(
            group_config(&Config::default()),
            coordinator::group::GroupConfig::default()
        );
    }

    #[test]
    fn assignor_offload_enable_sets_what_runs_off_the_shard() {
        let min_work = |text: &str| {
            let mut c = Config::default();
            c.apply_properties(text, "p").expect("loads");
            group_config(&c).assignment_offload_min_work
        };
        assert_eq!(
            min_work(""),
            coordinator::group::DEFAULT_ASSIGNMENT_OFFLOAD_MIN_WORK
        );
        assert_eq!(
            min_work("group.consumer.assignor.offload.enable=true\n"),
            coordinator::group::DEFAULT_ASSIGNMENT_OFFLOAD_MIN_WORK
        );
        assert_eq!(
            min_work("group.consumer.assignor.offload.enable=false\n"),
            usize::MAX
        );
    }

    #[test]
    fn unknown_keys_are_errors() {
        assert_eq!(
            set_err("foo.bar=1"),
            "unknown config key \"foo.bar\" (from --set)"
        );
        assert_eq!(
            set_err("group.max.sesion.timeout.ms=1"),
            "unknown config key \"group.max.sesion.timeout.ms\" (from --set); did you mean \"group.max.session.timeout.ms\"?"
        );
        let mut c = Config::default();
        let err = c
            .apply_properties("# x\nnum.partitions=2\nbogus=1\n", "server.properties")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown config key \"bogus\" (from server.properties:3)"
        );
        // Keys are case-sensitive, as in Kafka.
        assert!(set_err("NUM.PARTITIONS=2").contains("did you mean \"num.partitions\""));
        assert_eq!(
            set_err("num.partitions"),
            "bad --set argument \"num.partitions\": expected name=value"
        );
        assert!(set_err("=3").starts_with("bad --set argument"));
    }

    #[test]
    fn bad_values_are_errors() {
        let mut c = Config::default();
        let err = c
            .apply_properties("a.b.c.d=\n", "server.properties")
            .unwrap_err();
        assert!(matches!(err, ConfigError::UnknownKey { .. }));
        let err = c
            .apply_properties("\n\ngroup.max.size=abc\n", "server.properties")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad value \"abc\" for group.max.size (from server.properties:3): expected an integer >= 1"
        );
        let cases = [
            ("group.max.size=0", "expected an integer >= 1"),
            (
                "group.max.size=3000000000",
                "expected an integer >= 1 (at most 2147483647)",
            ),
            ("offset.metadata.max.bytes=x", "expected a 32-bit integer"),
            ("offsets.topic.replication.factor=40000", "(at most 32767)"),
            (
                "group.consumer.assignment.interval.ms=-1",
                "expected an integer >= 0",
            ),
            (
                "group.coordinator.append.linger.ms=10",
                "only -1 is supported here",
            ),
            (
                "offsets.topic.compression.codec=1",
                "only 0 is supported here",
            ),
            ("unstable.api.versions.enable=true", "only false"),
            ("log.dirs=/a,/b", "exactly one directory"),
            ("delete.topic.enable=yes", "expected true or false"),
            (
                "group.consumer.migration.policy=sideways",
                "DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL",
            ),
            (
                "group.consumer.assignors=uniform,sticky",
                "\"sticky\" is not one of uniform, range",
            ),
            (
                "group.consumer.assignors=range,range",
                "listed more than once",
            ),
            ("group.consumer.assignors=", "non-empty"),
            ("group.consumer.assignors=range,,uniform", "empty entry"),
            (
                "group.coordinator.rebalance.protocols=consumer",
                "must contain \"classic\"",
            ),
            (
                "group.coordinator.rebalance.protocols=classic,eager",
                "\"eager\" is not one of classic, consumer, streams, share",
            ),
            ("node.id=-1", ">= 0"),
            ("broker.id=x", "expected an integer >= 0"),
            ("advertised.listeners=localhost", "missing :port"),
            ("listeners=PLAINTEXT://:99999", "bad port"),
        ];
        for (assignment, want) in cases {
            let msg = set_err(assignment);
            let (key, value) = assignment.split_once('=').unwrap();
            assert!(
                msg.starts_with(&format!("bad value \"{value}\" for {key} (from --set): ")),
                "{msg}"
            );
            assert!(msg.contains(want), "{assignment}: {msg}");
        }
        // Accepted spellings.
        let mut c = Config::default();
        set(&mut c, "delete.topic.enable=FALSE");
        set(&mut c, "group.consumer.migration.policy=Disabled");
        set(
            &mut c,
            "group.coordinator.rebalance.protocols= CLASSIC , share ",
        );
        set(&mut c, "group.consumer.assignors=range");
        assert!(!c.delete_topic_enable);
        assert_eq!(c.group_consumer_migration_policy, MigrationPolicy::Disabled);
        assert_eq!(
            entry(&c, "group.coordinator.rebalance.protocols")
                .value
                .as_deref(),
            Some("classic,share")
        );
        c.validate().unwrap();
    }

    #[test]
    fn cross_field_violations() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["group.min.session.timeout.ms=7000", "group.max.session.timeout.ms=6000"],
                "group.min.session.timeout.ms (7000, --set) must be less than or equal to group.max.session.timeout.ms (6000, --set)",
            ),
            (
                &["group.consumer.min.heartbeat.interval.ms=20000"],
                "group.consumer.min.heartbeat.interval.ms (20000, --set) must be less than or equal to group.consumer.max.heartbeat.interval.ms (15000, default)",
            ),
            (
                &["group.consumer.min.heartbeat.interval.ms=6000"],
                "group.consumer.min.heartbeat.interval.ms (6000, --set) must be less than or equal to group.consumer.heartbeat.interval.ms (5000, default)",
            ),
            (
                &["group.consumer.assignment.interval.ms=15001"],
                "group.consumer.assignment.interval.ms (15001, --set) must be less than or equal to group.consumer.max.assignment.interval.ms (15000, default)",
            ),
            (
                &["group.consumer.heartbeat.interval.ms=16000"],
                "group.consumer.heartbeat.interval.ms (16000, --set) must be less than or equal to group.consumer.max.heartbeat.interval.ms",
            ),
            (
                &["group.consumer.reconciliation.heartbeat.interval.ms=5001"],
                "group.consumer.reconciliation.heartbeat.interval.ms (5001, --set) must be less than or equal to group.consumer.heartbeat.interval.ms (5000, default)",
            ),
            (
                &["group.consumer.max.session.timeout.ms=40000"],
                "group.consumer.min.session.timeout.ms (45000, default) must be less than or equal to group.consumer.max.session.timeout.ms (40000, --set)",
            ),
            (
                &["group.consumer.session.timeout.ms=44000"],
                "group.consumer.min.session.timeout.ms (45000, default) must be less than or equal to group.consumer.session.timeout.ms (44000, --set)",
            ),
            (
                &["group.consumer.session.timeout.ms=61000"],
                "group.consumer.session.timeout.ms (61000, --set) must be less than or equal to group.consumer.max.session.timeout.ms",
            ),
            (
                &[
                    "group.consumer.min.session.timeout.ms=1000",
                    "group.consumer.session.timeout.ms=5000",
                ],
                "group.consumer.heartbeat.interval.ms (5000, default) must be less than group.consumer.session.timeout.ms (5000, --set)",
            ),
        ];
        for (sets, want) in cases {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            let err = Config::load(None, &sets).unwrap_err();
            assert!(matches!(err, ConfigError::Inconsistent { .. }), "{err}");
            let msg = err.to_string();
            assert!(msg.starts_with("inconsistent configuration: "), "{msg}");
            assert!(msg.contains(want), "{sets:?}: {msg}");
        }
        // The short interval's default gives way to a shorter heartbeat interval (it is capped
        // at run time), and 0 or the interval itself turns it off.
        for sets in [
            &[
                "group.consumer.min.heartbeat.interval.ms=10",
                "group.consumer.heartbeat.interval.ms=50",
            ][..],
            &["group.consumer.reconciliation.heartbeat.interval.ms=0"],
            &["group.consumer.reconciliation.heartbeat.interval.ms=5000"],
        ] {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            Config::load(None, &sets).unwrap_or_else(|e| panic!("{sets:?}: {e}"));
        }
        assert_eq!(
            set_err("group.consumer.reconciliation.heartbeat.interval.ms=-1"),
            "bad value \"-1\" for group.consumer.reconciliation.heartbeat.interval.ms (from --set): expected an integer >= 0"
        );
        // Equal min and max is fine.
        let sets = vec![
            "group.min.session.timeout.ms=6000".to_string(),
            "group.max.session.timeout.ms=6000".to_string(),
        ];
        Config::load(None, &sets).unwrap();
    }

    #[test]
    fn validate_catches_direct_field_mutation() {
        let c = Config {
            group_max_size: 0,
            ..Default::default()
        };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "bad value \"0\" for group.max.size (from set in code): expected an integer >= 1"
        );
        let c = Config {
            advertised_listeners: "nohost".into(),
            ..Default::default()
        };
        assert!(c.validate().is_err());
        assert_eq!(c.advertised_host_port(), None);
        let c = Config {
            group_consumer_session_timeout_ms: 50_000,
            group_consumer_heartbeat_interval_ms: 15_000,
            ..Default::default()
        };
        c.validate().unwrap();
    }

    #[test]
    fn listeners_map_to_protocols_with_per_listener_overrides() {
        let mut c = Config::default();
        // No `listeners`: one PLAINTEXT listener at 127.0.0.1:9092, as before.
        let specs = c.listener_specs().unwrap();
        assert_eq!(specs.len(), 1);
        assert_eq!(
            (
                specs[0].name.as_str(),
                specs[0].protocol.as_str(),
                specs[0].port
            ),
            ("PLAINTEXT", "PLAINTEXT", 9092)
        );
        set(&mut c, "listeners=SASL_SSL://:9093,PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9094,INTERNAL://:9095");
        set(&mut c, "controller.listener.names=CONTROLLER");
        set(&mut c, "advertised.listeners=SASL_SSL://pub.example:19093");
        assert!(c
            .listener_specs()
            .unwrap_err()
            .contains("listener INTERNAL has no security protocol"));
        set(
            &mut c,
            "listener.security.protocol.map=INTERNAL:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        );
        let specs = c.listener_specs().unwrap();
        let got: Vec<_> = specs
            .iter()
            .map(|s| (s.name.as_str(), s.protocol.as_str(), s.advertised.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "SASL_SSL",
                    "SASL_SSL",
                    Some(("pub.example".to_string(), 19093))
                ),
                ("PLAINTEXT", "PLAINTEXT", None),
                ("INTERNAL", "SASL_PLAINTEXT", None),
            ]
        );
        set(&mut c, "sasl.enabled.mechanisms=PLAIN");
        set(
            &mut c,
            "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512",
        );
        set(
            &mut c,
            "listener.name.internal.scram-sha-512.sasl.jaas.config=x required;",
        );
        assert_eq!(
            c.listener_value("INTERNAL", "sasl.enabled.mechanisms"),
            "SCRAM-SHA-512"
        );
        assert_eq!(
            c.listener_value("SASL_SSL", "sasl.enabled.mechanisms"),
            "PLAIN"
        );
        assert_eq!(
            c.listener_jaas("INTERNAL", "SCRAM-SHA-512"),
            Some("x required;")
        );
        assert_eq!(c.listener_jaas("SASL_SSL", "PLAIN"), None);
        assert!(
            set_err("listener.security.protocol.map=A:TLS").contains("unknown security protocol")
        );
        // Secrets are reported as sensitive, without their value.
        set(&mut c, "ssl.keystore.key=-----BEGIN PRIVATE KEY-----");
        let e = entry(&c, "ssl.keystore.key");
        assert!(e.sensitive && e.value.is_none());
    }

    #[test]
    fn advertised_listeners_parsing() {
        let ok = [
            ("PLAINTEXT://broker1:9092", "broker1", 9092),
            ("plaintext://broker1:9093", "broker1", 9093),
            ("10.0.0.5:19092", "10.0.0.5", 19092),
            ("[::1]:9092", "::1", 9092),
            ("PLAINTEXT://[fe80::1]:1", "fe80::1", 1),
            ("CONTROLLER://c:9093, PLAINTEXT://b:9092", "b", 9092),
        ];
        for (text, host, port) in ok {
            let mut c = Config::default();
            set(&mut c, &format!("advertised.listeners={text}"));
            assert_eq!(
                c.advertised_host_port(),
                Some((host.to_string(), port)),
                "{text}"
            );
        }
        let bad = [
            ("PLAINTEXT://:9092", "missing host"),
            ("PLAINTEXT://h:0", "port 0"),
            ("h:port", "bad port"),
            ("h:70000", "bad port"),
            ("::1:9092", "brackets"),
            ("[::1:9092", "missing ']'"),
            ("PLAINTEXT://a:1,PLAINTEXT://b:2", "more than once"),
            ("a:1,", "empty entry"),
            ("://h:1", "bad listener name"),
            ("http://h/x:1", "bad host"),
        ];
        for (text, want) in bad {
            let msg = set_err(&format!("advertised.listeners={text}"));
            assert!(msg.contains(want), "{text}: {msg}");
        }
        // Bind listeners may omit the host and use port 0.
        let mut c = Config::default();
        set(&mut c, "listeners=PLAINTEXT://:0,CONTROLLER://:9093");
        c.validate().unwrap();
    }

    #[test]
    fn entries_mark_overrides_non_default() {
        let mut c = Config::default();
        c.apply_properties("num.partitions=1\n", "server.properties")
            .unwrap();
        set(&mut c, "group.max.size=10");
        set(&mut c, "advertised.listeners=localhost:9092");
        set(&mut c, "log.cleaner.delete.retention.ms=5");

        let e = entry(&c, "group.max.size");
        assert_eq!(e.value.as_deref(), Some("10"));
        assert!(!e.is_default);
        assert_eq!(e.config_source_code(), 4);
        assert!(e.read_only && !e.sensitive);
        // Supplied explicitly, even with the default value: not default.
        assert!(!entry(&c, "num.partitions").is_default);
        assert_eq!(
            entry(&c, "advertised.listeners").value.as_deref(),
            Some("localhost:9092")
        );
        assert_eq!(c.delete_retention_ms, 5);
        assert!(!entry(&c, "delete.retention.ms").is_default);
        assert!(!entry(&c, "log.cleaner.delete.retention.ms").is_default);
        assert!(entry(&c, "group.max.session.timeout.ms").is_default);
        assert!(entry(&c, "broker.id").is_default);
        assert_eq!(c.entry("group.max.size"), Some(e));
        assert_eq!(c.entry("broker.id").map(|e| e.name), Some("broker.id"));
        assert_eq!(c.entry("nope"), None);

        // A field changed in code without a recorded origin is non-default too.
        let c = Config {
            num_partitions: 4,
            ..Default::default()
        };
        assert!(!entry(&c, "num.partitions").is_default);
    }

    #[test]
    fn quorum_voters_name_a_cluster_this_node_must_be_in() {
        // Kafka's syntax, IPv6 in brackets.
        let v = parse_quorum_voters("1@127.0.0.1:19001, 2@[::1]:19002,3@node-3:19003").unwrap();
        assert_eq!(v.iter().map(|v| v.id).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!((v[1].host.as_str(), v[1].port), ("::1", 19002));
        assert!(parse_quorum_voters("").unwrap().is_empty());
        for (bad, want) in [
            ("1@127.0.0.1", "no :port"),
            ("127.0.0.1:19001", "not of the form"),
            ("x@h:1", "not a node id"),
            ("1@h:0", "not a port"),
            ("1@:5", "no host"),
            ("1@h:1,1@h:2", "more than once"),
        ] {
            let msg = set_err(&format!("controller.quorum.voters={bad}"));
            assert!(msg.contains(want), "{bad}: {msg}");
        }
        // This node alone: accepted, as today.
        let mut c = Config::default();
        set(&mut c, "node.id=2");
        set(&mut c, "controller.quorum.voters=2@127.0.0.1:19002");
        c.validate().unwrap();
        // Three nodes with this one among them: a cluster.
        set(
            &mut c,
            "controller.quorum.voters=1@127.0.0.1:19001,2@127.0.0.1:19002,3@127.0.0.1:19003",
        );
        c.validate().unwrap();
        assert_eq!(c.quorum_voters().unwrap().len(), 3);
        // Replication keys have an effect on a cluster: the voters' count and a majority.
        assert!(c.accepted_without_effect().is_empty());
        for (kv, ok) in [
            ("offsets.topic.replication.factor=3", true),
            ("min.insync.replicas=2", true),
            ("min.insync.replicas=1", true),
            ("offsets.topic.replication.factor=1", false),
            ("min.insync.replicas=3", false),
        ] {
            let mut c = c.clone();
            set(&mut c, kv);
            assert_eq!(c.validate().is_ok(), ok, "{kv}: {:?}", c.validate());
            assert!(
                c.accepted_without_effect().is_empty(),
                "{kv} announced as without effect"
            );
        }
        // Leader rebalancing: on by default every 300 s, as Kafka; off, or another interval.
        assert_eq!(c.leader_rebalance_ms().unwrap(), Some(300_000));
        for (kv, want) in [
            (
                "leader.imbalance.check.interval.seconds=2",
                Some(Some(2_000)),
            ),
            ("auto.leader.rebalance.enable=false", Some(None)),
            ("auto.leader.rebalance.enable=TRUE", Some(Some(300_000))),
            ("auto.leader.rebalance.enable=yes", None),
            ("leader.imbalance.check.interval.seconds=0", None),
            ("leader.imbalance.check.interval.seconds=soon", None),
        ] {
            let mut c = c.clone();
            set(&mut c, kv);
            assert_eq!(c.validate().is_ok(), want.is_some(), "{kv}");
            if let Some(want) = want {
                assert_eq!(c.leader_rebalance_ms().unwrap(), want, "{kv}");
                assert!(c.accepted_without_effect().is_empty(), "{kv} announced");
            }
        }
        let mut pct = c.clone();
        set(&mut pct, "leader.imbalance.per.broker.percentage=10");
        assert!(pct.accepted_without_effect()[0]
            .reason
            .contains("KRaft controller"));
        // The same keys on one node: accepted and announced.
        let mut one = Config::default();
        set(&mut one, "min.insync.replicas=3");
        one.validate().unwrap();
        assert_eq!(one.accepted_without_effect()[0].key, "min.insync.replicas");
        // Other nodes only: this node would replicate nothing, refused.
        set(
            &mut c,
            "controller.quorum.voters=1@127.0.0.1:19001,3@127.0.0.1:19003",
        );
        let err = c.validate().unwrap_err();
        assert!(matches!(err, ConfigError::Inconsistent { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("names nodes 1, 3 but not this node"),
            "{err}"
        );
        // With a controller listener, the node joins that cluster: its node-to-node address.
        set(&mut c, "node.id=4");
        set(
            &mut c,
            "listeners=PLAINTEXT://127.0.0.1:9094,CONTROLLER://127.0.0.1:19004",
        );
        c.validate().unwrap();
        assert_eq!(
            c.join_address().unwrap(),
            Some(("127.0.0.1".to_string(), 19004))
        );
        assert_eq!(
            c.listener_specs().unwrap().len(),
            1,
            "not served to clients"
        );
        // Its id must be a free producer id lane: past the first voters' positions.
        set(&mut c, "node.id=0");
        let err = c.validate().unwrap_err();
        assert!(err.to_string().contains("between 2"), "{err}");
    }
}
